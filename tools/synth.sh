#!/usr/bin/env bash
# synth.sh - synthesize the NIC unit with Yosys for Xilinx UltraScale+ and print its area.
#
# Usage: tools/synth.sh [--flows N] [--width BITS] [--top MODULE] [--keep DIR]
#   --flows N     flow table entries (default 10000; the hash gets the power of two >= 2N buckets)
#   --width BITS  AXI-Stream data width (default 512)
#   --top MODULE  cleave_nic (default) or mqnic_app_block
#   --keep DIR    keep the generated headers, the script and the log in DIR
# The other geometry is the model's default: 4096 MRs, MS chunks of 16, 32 committed per flow,
# a shared store of 65536, tables in UltraRAM. Runs `synth_xilinx -family xcup` without
# flattening: Yosys synthesizes each module once per parameter set, on its own (no optimization
# across module boundaries), and `stat` adds the cells up over every instance of the unit's
# hierarchy. Prints those totals: LUT, FF, BRAM (RAMB36 + RAMB18/2), URAM and DSP; then the
# memories as inferred in a flattened copy (depth x width of each instance, before they are
# mapped to RAM primitives) and their sum, what the RAM primitives hold (URAM288 36 KiB, RAMB36
# 4.5 KiB, RAMB18 2.25 KiB, data and parity), and the time taken.
# Needs yosys (tools/setup.sh); the unit takes about half an hour of one core.
set -euo pipefail
cd "$(dirname "$0")/.."

flows=10000
width=512
top=cleave_nic
keep=""
while [ $# -gt 0 ]; do
  case "$1" in
    --flows) flows=$2; shift 2 ;;
    --width) width=$2; shift 2 ;;
    --top) top=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "synth.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
command -v yosys >/dev/null || { echo "synth.sh: yosys not found; run tools/setup.sh" >&2; exit 2; }

buckets=1
while [ "$buckets" -lt $((2 * flows)) ]; do buckets=$((buckets * 2)); done

work=${keep:-$(mktemp -d /tmp/cleave-synth.XXXXXX)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
python3 hw/fpga/spec/gen_nic_defs.py "$work"
python3 hw/fpga/rtl/gen_crc_vh.py "$work/cleave_crc_tables.vh"

rtl=hw/fpga/rtl
sources=(cleave_ram.sv cleave_crc.sv cleave_regs.sv cleave_rx_parser.sv cleave_flow_lookup.sv
         cleave_rx_engine.sv cleave_rx_out.sv cleave_rx.sv cleave_tx.sv cleave_rxq.sv cleave_txq.sv
         cleave_dma_wr_mux.sv cleave_nic.sv)
if [ "$top" = mqnic_app_block ]; then
  sources+=(cleave_dma_adapter.sv mqnic_app_block.v)
fi
params="-set DATA_WIDTH $width -set MAX_FLOWS $flows -set BUCKETS $buckets -set MAX_MRS 4096"
params+=" -set MS_CHUNK 16 -set MS_COMMITTED 32 -set MS_STORE 65536 -set ULTRA 1"
params+=" -set FBUF_BEATS $((32768 / (width / 8)))"
[ "$top" = cleave_nic ] || params="-set AXIS_DATA_WIDTH $width -set CLEAVE_MAX_FLOWS $flows -set CLEAVE_BUCKETS $buckets"

{
  echo "read_verilog -sv -I$work -I$rtl $(printf "$rtl/%s " "${sources[@]}")"
  echo "chparam $params $top"
  echo "synth_xilinx -family xcup -top $top -run :map_memory"
  # the memories of every instance, listed from a flattened copy
  echo "design -save hier"
  echo "flatten"
  echo "tee -q -o $work/mem.txt dump t:\$mem_v2"
  echo "design -load hier"
  echo "synth_xilinx -family xcup -top $top -run map_memory:"
  echo "tee -q -o $work/stat.txt stat"
} > "$work/synth.ys"

echo "synth.sh: $top at $flows flows, $width bits (yosys $(yosys -V | awk '{print $2}'), log in $work/yosys.log)" >&2
echo "synth.sh: not flattened: each module synthesized on its own, the totals are Yosys' stat over every instance" >&2
start=$(date +%s)
yosys -q -l "$work/yosys.log" -s "$work/synth.ys" >/dev/null
took=$(($(date +%s) - start))

# The totals over the hierarchy: the section after "design hierarchy" (the whole design when it
# is one module).
awk '/=== design hierarchy ===/ { n = 0 } { line[n++] = $0 }
     END { for (i = 0; i < n; i++) print line[i] }' "$work/stat.txt" > "$work/total.txt"
count() { awk -v c="$1" '$1 == c { n += $2 } END { print n + 0 }' "$work/total.txt"; }
luts=0
for l in LUT1 LUT2 LUT3 LUT4 LUT5 LUT6 LUT6_2; do luts=$((luts + $(count $l))); done
ffs=0
for f in FDRE FDSE FDCE FDPE; do ffs=$((ffs + $(count $f))); done
ram36=$(count RAMB36E2)
ram18=$(count RAMB18E2)
lutram=$(( $(count RAM32M) + $(count RAM32M16) + $(count RAM64M) + $(count RAM64M8) + $(count RAM64X1D) + $(count RAM128X1D) + $(count RAM256X1D) + $(count RAM32X1D) ))
uram=$(count URAM288)
dsp=$(count DSP48E2)
bram=$(awk -v a="$ram36" -v b="$ram18" 'BEGIN { printf "%g", a + b / 2 }')
printf 'top %s flows %d width %d: LUT %d FF %d BRAM %s (RAMB36 %d, RAMB18 %d) URAM %d DSP %d LUTRAM %d\n' \
  "$top" "$flows" "$width" "$luts" "$ffs" "$bram" "$ram36" "$ram18" "$uram" "$dsp" "$lutram"
# The memories as inferred: name, depth x width, bytes.
awk '/^ *cell \$mem_v2 / { name = $3 } /parameter \\SIZE / { size = $3 }
     /parameter \\WIDTH / { width = $3 }
     /^ *end$/ && name != "" { printf "  %-60s %8d x %5d = %10.0f B\n", name, size, width, size * width / 8;
                               total += size * width / 8; name = "" }
     END { printf "memories as inferred: %.0f B (%.2f MB)\n", total, total / 1e6 }' "$work/mem.txt"
awk -v u="$uram" -v a="$ram36" -v b="$ram18" \
  'BEGIN { t = u * 36864 + a * 4608 + b * 2304; printf "RAM primitives: %.0f B (%.2f MB): URAM288 %d, RAMB36 %d, RAMB18 %d\n", t, t / 1e6, u, a, b }'
cpu=$(grep -o 'CPU: user [0-9.]*s' "$work/yosys.log" | tail -1 | awk '{ print $3 }')
echo "took ${took} s (yosys CPU user ${cpu:-?})"
