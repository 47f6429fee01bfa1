#!/usr/bin/env python3
"""gen_nic_defs.py - emit the NIC's shared constants from nic_spec.py.

Usage: gen_nic_defs.py OUTDIR
Writes into OUTDIR:
  nic_model_defs.h      C++ (namespace cleave::nic): the model's enums, flags, constants, names
  rte_pmd_cleave_defs.h C: the enums of the net_cleave PMD's API (rte_pmd_cleave.h)
  cleave_nic_hw.h       C: counters, opcodes, record layouts with pack/unpack helpers, registers
  cleave_nic_defs.vh    Verilog: the same as localparams, for `include inside a module
Meson runs it at build time (hw/fpga/spec/meson.build); nothing it writes is checked in.
"""
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nic_spec as spec  # noqa: E402

HEAD = "Generated from hw/fpga/spec/nic_spec.py by gen_nic_defs.py. Do not edit."


def camel(ident):
    return "".join(w[:1].upper() + w[1:] for w in ident.split("_"))


def upper(ident):
    return ident.upper()


def enum(name):
    for e in spec.ENUMS:
        if e["name"] == name:
            return e
    raise KeyError(name)


def counters():
    """Flat counter list: (index, name)."""
    out = []
    for group, prefix in spec.COUNTER_GROUPS:
        for ident, display, _ in enum(group)["values"]:
            out.append(prefix + (display or ident))
    return out


def check():
    seen = set()
    for e in spec.ENUMS:
        assert e["name"] not in seen, e["name"]
        seen.add(e["name"])
    for rec, (bits, fields) in spec.RECORDS.items():
        used = [False] * bits
        for name, lsb, width, _ in fields:
            assert 0 < width <= 64 and lsb + width <= bits, (rec, name)
            for b in range(lsb, lsb + width):
                # cmd fields overlap by design only through the w2..w7 words; nothing else may.
                assert not used[b], f"{rec}.{name} overlaps bit {b}"
                used[b] = True
    ops = [v for _, v, _ in spec.COMMANDS]
    assert len(set(ops)) == len(ops)
    for name, _, _, _, regs in spec.REG_BLOCKS:
        offs = [o for _, o, _ in regs]
        assert len(set(offs)) == len(offs), name
        assert all(0x0C <= o < spec.REG_BLOCK_STRIDE and o % 4 == 0 for o in offs), name


# ---- C++ for the model ----------------------------------------------------------------------

def gen_model():
    o = [f"// nic_model_defs.h - {HEAD}", "#pragma once", "", "#include <array>",
         "#include <cstddef>", "#include <cstdint>", "#include <string_view>", "",
         "namespace cleave::nic {", ""]
    for ident, value, ctype, doc in spec.CONSTANTS:
        text = str(value) if value < 0x10000 else f"{value:#x}"
        o.append(f"inline constexpr {ctype} k{camel(ident)} = {text};  // {doc}")
    o.append("")
    for e in spec.ENUMS:
        o.append(f"// {e['doc']}")
        o.append(f"enum class {e['name']} : {'uint16_t' if e['name'] == 'Ctr' else 'uint8_t'} {{")
        for ident, _, doc in e["values"]:
            o.append(f"  k{camel(ident)}," + (f"  // {doc}" if doc else ""))
        if e["name"] in [g for g, _ in spec.COUNTER_GROUPS]:
            o.append("  kCount")  # counter groups are sized by it
        o.append("};")
        names = ", ".join(f'"{d or i}"' for i, d, _ in e["values"])
        o.append(f"inline constexpr std::array<std::string_view, {len(e['values'])}> "
                 f"k{e['name']}Names = {{{names}}};")
        o.append("")
    for name, prefix, _, values in spec.FLAGS:
        o.append(f"enum {name} : uint8_t {{")
        for ident, value, doc in values:
            o.append(f"  {prefix}{camel(ident)} = {value},  // {doc}")
        o.append("};")
        o.append("")
    o.append("inline constexpr size_t kCounterCount = " +
             " + ".join(f"size_t({g}::kCount)" for g, _ in spec.COUNTER_GROUPS) + ";")
    o.append("")
    o.append("}  // namespace cleave::nic")
    return "\n".join(o) + "\n"


# ---- C for the PMD's API --------------------------------------------------------------------

def gen_pmd():
    o = [f"/* rte_pmd_cleave_defs.h - {HEAD} */", "#ifndef RTE_PMD_CLEAVE_DEFS_H",
         "#define RTE_PMD_CLEAVE_DEFS_H", ""]
    for e in spec.ENUMS:
        if e["pmd"] is None:
            continue
        tag, prefix = e["pmd"]
        o.append(f"/** {e['doc']} (cleave::nic::{e['name']}) */")
        o.append(f"enum {tag} {{")
        for i, (ident, _, doc) in enumerate(e["values"]):
            line = f"  RTE_PMD_CLEAVE_{prefix}{upper(ident)} = {i},"
            o.append(line + (f" /**< {doc} */" if doc else ""))
        o.append("};")
        o.append("")
    for _, _, pmd, values in spec.FLAGS:
        if pmd is None:
            continue
        for ident, value, doc in values:
            o.append(f"#define {pmd}{upper(ident)} {value:#x}u /**< {doc} */")
        o.append("")
    no_flow = dict((c[0], c[1]) for c in spec.CONSTANTS)["no_flow"]
    o.append(f"/** flow id of a frame without a flow */")
    o.append(f"#define RTE_PMD_CLEAVE_NO_FLOW UINT32_C({no_flow:#X})")
    o.append("")
    o.append("#endif /* RTE_PMD_CLEAVE_DEFS_H */")
    return "\n".join(o) + "\n"


# ---- C for drivers and testbenches ----------------------------------------------------------

def gen_hw():
    o = [f"/* cleave_nic_hw.h - {HEAD} */", "/*",
         " * The device side of the NIC: counter indices, command opcodes, record layouts (bit",
         " * positions in little-endian byte arrays, with get/set helpers) and register blocks.",
         " */", "#ifndef CLEAVE_NIC_HW_H", "#define CLEAVE_NIC_HW_H", "", "#include <stddef.h>",
         "#include <stdint.h>", ""]
    for ident, value, _, doc in spec.CONSTANTS:
        o.append(f"#define CLEAVE_NIC_{upper(ident)} {value:#x}u /* {doc} */")
    o.append("")
    for e in spec.ENUMS:
        for i, (ident, _, _) in enumerate(e["values"]):
            o.append(f"#define CLEAVE_NIC_{upper(e['name'])}_{upper(ident)} {i}u")
        o.append(f"#define CLEAVE_NIC_{upper(e['name'])}_COUNT {len(e['values'])}u")
        o.append("")
    for name, _, _, values in spec.FLAGS:
        for ident, value, _ in values:
            o.append(f"#define CLEAVE_NIC_{upper(name)}_{upper(ident)} {value:#x}u")
    o.append("")
    names = counters()
    o.append("/* Counters in the counter block's order. */")
    for i, n in enumerate(names):
        o.append(f"#define CLEAVE_NIC_CTR_{upper(n)} {i}u")
    o.append(f"#define CLEAVE_NIC_COUNTERS {len(names)}u")
    o.append("#define CLEAVE_NIC_COUNTER_NAMES \\")
    o.append("  { " + ", ".join(f'"{n}"' for n in names) + " }")
    o.append("")
    o.append("/* Command opcodes (word 0 bits 7..0) and what each reads. */")
    for ident, value, doc in spec.COMMANDS:
        o.append(f"#define CLEAVE_NIC_CMD_{upper(ident)} {value}u /* {doc} */")
    o.append("")
    o.append("/* Records: bit lsb and width of each field in a little-endian byte array. */")
    o.append("static inline uint64_t cleave_nic_get(const uint8_t* r, unsigned lsb, unsigned w) {")
    o.append("  uint64_t v = 0;")
    o.append("  for (unsigned i = 0; i < w; i++)")
    o.append("    v |= (uint64_t)((r[(lsb + i) / 8] >> ((lsb + i) % 8)) & 1u) << i;")
    o.append("  return v;")
    o.append("}")
    o.append("static inline void cleave_nic_set(uint8_t* r, unsigned lsb, unsigned w, uint64_t v) {")
    o.append("  for (unsigned i = 0; i < w; i++) {")
    o.append("    uint8_t bit = (uint8_t)(1u << ((lsb + i) % 8));")
    o.append("    if ((v >> i) & 1u)")
    o.append("      r[(lsb + i) / 8] |= bit;")
    o.append("    else")
    o.append("      r[(lsb + i) / 8] &= (uint8_t)~bit;")
    o.append("  }")
    o.append("}")
    for rec, (bits, fields) in spec.RECORDS.items():
        R = upper(rec)
        o.append(f"#define CLEAVE_NIC_{R}_BYTES {bits // 8}u")
        for name, lsb, width, doc in fields:
            F = upper(name)
            o.append(f"#define CLEAVE_NIC_{R}_{F}_LSB {lsb}u /* {doc} */")
            o.append(f"#define CLEAVE_NIC_{R}_{F}_W {width}u")
        o.append(f"#define CLEAVE_NIC_{R}_GET(r, f) \\")
        o.append(f"  cleave_nic_get((r), CLEAVE_NIC_{R}_##f##_LSB, CLEAVE_NIC_{R}_##f##_W)")
        o.append(f"#define CLEAVE_NIC_{R}_SET(r, f, v) \\")
        o.append(f"  cleave_nic_set((r), CLEAVE_NIC_{R}_##f##_LSB, CLEAVE_NIC_{R}_##f##_W, (v))")
        o.append("")
    o.append("/* Register blocks: type, version, next pointer, then these offsets. */")
    o.append(f"#define CLEAVE_NIC_RB_STRIDE {spec.REG_BLOCK_STRIDE:#x}u")
    o.append("#define CLEAVE_NIC_RB_TYPE 0x00u")
    o.append("#define CLEAVE_NIC_RB_VERSION 0x04u")
    o.append("#define CLEAVE_NIC_RB_NEXT 0x08u")
    for i, (name, sub, ver, doc, regs) in enumerate(spec.REG_BLOCKS):
        B = upper(name)
        o.append(f"/* {doc} */")
        o.append(f"#define CLEAVE_NIC_RB_{B}_TYPE {(spec.VENDOR << 16) | sub:#010x}u")
        o.append(f"#define CLEAVE_NIC_RB_{B}_VERSION {ver:#010x}u")
        o.append(f"#define CLEAVE_NIC_RB_{B}_BASE {i * spec.REG_BLOCK_STRIDE:#x}u")
        for reg, off, rdoc in regs:
            o.append(f"#define CLEAVE_NIC_RB_{B}_{upper(reg)} {off:#04x}u" +
                     (f" /* {rdoc} */" if rdoc else ""))
    o.append(f"#define CLEAVE_NIC_RB_COUNT {len(spec.REG_BLOCKS)}u")
    o.append("")
    o.append("#endif /* CLEAVE_NIC_HW_H */")
    return "\n".join(o) + "\n"


# ---- Verilog --------------------------------------------------------------------------------

def gen_vh():
    o = [f"// cleave_nic_defs.vh - {HEAD}",
         "// `include inside a module body: localparams only. A module uses a few of them.",
         "/* verilator lint_off UNUSEDPARAM */", ""]

    def lp(name, width, value, doc=""):
        o.append(f"localparam logic [{width - 1}:0] {name} = {width}'d{value};" +
                 (f"  // {doc}" if doc else ""))

    for ident, value, _, doc in spec.CONSTANTS:
        lp(f"C_{upper(ident)}", 32, value, doc)
    o.append("")
    widths = {"Err": 8, "FlowMode": 1, "Parser": 2, "Decision": 3, "DeferReason": 5,
              "CsumStatus": 2, "TxStatus": 8, "Ctr": 8}
    for e in spec.ENUMS:
        if e["name"] == "Ctr":
            continue  # the counter list below numbers these
        w = widths[e["name"]]
        assert len(e["values"]) <= (1 << w), e["name"]
        for i, (ident, _, _) in enumerate(e["values"]):
            lp(f"{upper(e['name'])}_{upper(ident)}", w, i)
        o.append("")
    for name, _, _, values in spec.FLAGS:
        for ident, value, _ in values:
            lp(f"{upper(name)}_{upper(ident)}", 8, value)
    o.append("")
    names = counters()
    for i, n in enumerate(names):
        lp(f"CTR_{upper(n)}", 8, i)
    o.append(f"localparam int CTR_COUNT = {len(names)};")
    for g, _ in spec.COUNTER_GROUPS:
        base = 0
        for g2, _ in spec.COUNTER_GROUPS:
            if g2 == g:
                break
            base += len(enum(g2)["values"])
        o.append(f"localparam int CTR_BASE_{upper(g)} = {base};")
    o.append("")
    for ident, value, doc in spec.COMMANDS:
        lp(f"CMD_{upper(ident)}", 8, value)
    o.append("")
    for rec, (bits, fields) in spec.RECORDS.items():
        R = upper(rec)
        o.append(f"localparam int {R}_BITS = {bits};")
        for name, lsb, width, doc in fields:
            o.append(f"localparam int {R}_{upper(name)}_LSB = {lsb};  // {doc}")
            o.append(f"localparam int {R}_{upper(name)}_W = {width};")
        o.append("")
    o.append(f"localparam int RB_STRIDE = {spec.REG_BLOCK_STRIDE};")
    o.append(f"localparam int RB_COUNT = {len(spec.REG_BLOCKS)};")
    for i, (name, sub, ver, doc, regs) in enumerate(spec.REG_BLOCKS):
        B = upper(name)
        lp(f"RB_{B}_TYPE", 32, (spec.VENDOR << 16) | sub, doc)
        lp(f"RB_{B}_VERSION", 32, ver)
        o.append(f"localparam int RB_{B}_BASE = {i * spec.REG_BLOCK_STRIDE};")
        for reg, off, _ in regs:
            o.append(f"localparam int RB_{B}_{upper(reg)} = {off};")
    o.append("/* verilator lint_on UNUSEDPARAM */")
    return "\n".join(o) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    check()
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, text in (("nic_model_defs.h", gen_model()), ("rte_pmd_cleave_defs.h", gen_pmd()),
                       ("cleave_nic_hw.h", gen_hw()), ("cleave_nic_defs.vh", gen_vh())):
        path = os.path.join(out, name)
        # Rewrite only on change, so a rerun does not rebuild everything that includes it.
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


if __name__ == "__main__":
    main()
