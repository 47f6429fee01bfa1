// roce_wire_fuzz.cc - RoCEv2 header parsing (src/transport/rocev2/roce_wire.*) on the input as
// a UDP datagram (UDP, BTH, extension headers, payload, pad, ICRC), and the software ICRC
// (hw/fpga/model/wire.*) on it as an IP packet.
//
// Invariants: parse() takes no more bytes than it was given and only RC opcodes; split() agrees
// with parse() and accounts for every byte (headers + payload + pad + ICRC); build() of the
// parsed headers writes as many bytes as parse() took and parses back to the same values, but
// for unsupported requests, which parse() skips past and nothing builds.
#include <cstring>

#include "common/wire.h"
#include "fuzz_input.h"
#include "transport/rocev2/roce_wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave::transport::roce;
  // Whatever the bytes, the ICRC check reads only inside them.
  (void)cleave::wire::roce_icrc_ok(data, size);

  Headers h;
  size_t hl = 0;
  const ParseError e = parse(data, size, h, &hl);
  FUZZ_CHECK(!parse_error_name(e).empty());
  size_t split_hl = 0;
  uint32_t payload = 0;
  const bool split_ok = split(data, size, &split_hl, &payload);
  if (e != ParseError::kNone) {
    FUZZ_CHECK(!split_ok);
    return 0;
  }
  const OpInfo o = op_info(h.opcode);
  FUZZ_CHECK(o.kind != OpKind::kInvalid && op_name(h.opcode) != "?");
  // An unsupported request is parsed to its BTH only (its extension headers, up to an atomic's
  // 28 bytes, are skipped) and is never built: the transport answers it with a NAK.
  const bool unsupported = o.kind == OpKind::kUnsupported;
  FUZZ_CHECK(hl >= kUdpLen + kBthLen && hl <= size &&
             (unsupported ? hl == kUdpLen + kBthLen + o.ext : hl <= kMaxHeader));
  FUZZ_CHECK(h.dst_port == kUdpPort && h.pad <= 3 && h.dest_qp <= kPsnMask && h.psn <= kPsnMask);
  if (o.kind == OpKind::kCnp) {
    // A CNP carries nothing after its reserved bytes but the ICRC; its pad bits mean nothing.
    FUZZ_CHECK(split_ok == (size >= hl + kIcrcLen) &&
               (!split_ok || (split_hl == hl && payload == 0)));
  } else if (split_ok) {
    FUZZ_CHECK(split_hl == hl && hl + payload + h.pad + kIcrcLen == size);
  } else {
    FUZZ_CHECK(size < hl + h.pad + kIcrcLen);
  }

  if (unsupported) return 0;

  uint8_t out[kMaxHeader + 32];
  std::memset(out, 0xA5, sizeof out);
  const size_t n = build(h, out);
  FUZZ_CHECK(n == hl);
  FUZZ_CHECK(out[n] == 0xA5);
  Headers t;
  size_t thl = 0;
  FUZZ_CHECK(parse(out, n, t, &thl) == ParseError::kNone && thl == n);
  FUZZ_CHECK(t.src_port == h.src_port && t.opcode == h.opcode && t.solicited == h.solicited &&
             t.pad == h.pad && t.pkey == h.pkey && t.becn == h.becn && t.dest_qp == h.dest_qp &&
             t.ack_req == h.ack_req && t.psn == h.psn);
  FUZZ_CHECK(t.va == h.va && t.rkey == h.rkey && t.dma_len == h.dma_len);
  FUZZ_CHECK(t.syndrome == h.syndrome && t.msn == h.msn && t.imm == h.imm);
  return 0;
}
