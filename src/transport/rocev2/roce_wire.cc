#include "roce_wire.h"

namespace cleave::transport::roce {

using K = OpKind;

namespace {

uint16_t load16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}
uint32_t load24(const uint8_t* p) {
  return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2];
}
uint32_t load32(const uint8_t* p) {
  return uint32_t(load16(p)) << 16 | load16(p + 2);
}
void store16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
void store24(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 16);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v);
}
void store32(uint8_t* p, uint32_t v) {
  store16(p, uint16_t(v >> 16));
  store16(p + 2, uint16_t(v));
}

constexpr std::array<std::string_view, 0x20> kOpNames = {
    "SEND_FIRST",     "SEND_MIDDLE",    "SEND_LAST",     "SEND_LAST_IMM",   "SEND_ONLY",
    "SEND_ONLY_IMM",  "WRITE_FIRST",    "WRITE_MIDDLE",  "WRITE_LAST",      "WRITE_LAST_IMM",
    "WRITE_ONLY",     "WRITE_ONLY_IMM", "READ_REQUEST",  "READ_RESP_FIRST", "READ_RESP_MIDDLE",
    "READ_RESP_LAST", "READ_RESP_ONLY", "ACK",           "ATOMIC_ACK",      "COMPARE_SWAP",
    "FETCH_ADD",      "RESERVED_15",    "SEND_LAST_INV", "SEND_ONLY_INV",   "RESERVED_18",
    "RESERVED_19",    "RESERVED_1A",    "RESERVED_1B",   "FLUSH",           "ATOMIC_WRITE",
    "RESERVED_1E",    "RESERVED_1F",
};

// IBTA vol. 1 table 45, in units of 10 ns: code 0 is 655.36 ms, then 0.01 ms ... 491.52 ms.
constexpr std::array<uint32_t, 32> kRnrTimer10ns = {
    65536000, 1000,    2000,    3000,     4000,     6000,     8000,     12000,
    16000,    24000,   32000,   48000,    64000,    96000,    128000,   192000,
    256000,   384000,  512000,  768000,   1024000,  1536000,  2048000,  3072000,
    4096000,  6144000, 8192000, 12288000, 16384000, 24576000, 32768000, 49152000,
};

}  // namespace

std::string_view op_name(uint8_t opcode) {
  if (opcode == kCnp) return "CNP";
  return opcode < kOpNames.size() ? kOpNames[opcode] : "?";
}

uint64_t rnr_timer_ns(uint8_t code) {
  return uint64_t(kRnrTimer10ns[code & 31]) * 10;
}

uint8_t rnr_timer_code(uint64_t ns) {
  uint8_t best = 31;
  for (uint8_t c = 1; c < 32; c++) {
    if (rnr_timer_ns(c) >= ns && rnr_timer_ns(c) < rnr_timer_ns(best)) best = c;
  }
  return best;
}

std::string_view parse_error_name(ParseError e) {
  switch (e) {
    case ParseError::kNone:
      return "none";
    case ParseError::kTruncated:
      return "truncated";
    case ParseError::kNotRoce:
      return "not_roce";
    case ParseError::kBadOpcode:
      return "bad_opcode";
    case ParseError::kBadVersion:
      return "bad_version";
  }
  return "?";
}

ParseError parse(const uint8_t* l4, size_t len, Headers& h, size_t* hdr_len) {
  if (len < kUdpLen + kBthLen) return ParseError::kTruncated;
  h.src_port = load16(l4);
  h.dst_port = load16(l4 + 2);
  if (h.dst_port != kUdpPort) return ParseError::kNotRoce;
  const uint8_t* b = l4 + kUdpLen;
  h.opcode = b[0];
  h.solicited = (b[1] & 0x80) != 0;
  h.pad = (b[1] >> 4) & 3;
  if ((b[1] & 0x0F) != 0) return ParseError::kBadVersion;
  h.pkey = load16(b + 2);
  h.becn = (b[4] & 0x40) != 0;
  h.dest_qp = load24(b + 5);
  h.ack_req = (b[8] & 0x80) != 0;
  h.psn = load24(b + 9);
  const OpInfo o = op_info(h.opcode);
  if (o.kind == K::kInvalid) return ParseError::kBadOpcode;
  size_t n = kUdpLen + kBthLen;
  if (o.kind == K::kCnp) {
    if (len < n + 16) return ParseError::kTruncated;  // 16 reserved bytes
    *hdr_len = n + 16;
    return ParseError::kNone;
  }
  const size_t need =
      n + (o.reth ? kRethLen : 0) + (o.aeth ? kAethLen : 0) + (o.imm ? kImmLen : 0) + o.ext;
  if (len < need) return ParseError::kTruncated;
  if (o.kind == K::kUnsupported) {  // its BTH is all the transport reads
    *hdr_len = need;
    return ParseError::kNone;
  }
  if (o.reth) {
    h.va = uint64_t(load32(l4 + n)) << 32 | load32(l4 + n + 4);
    h.rkey = load32(l4 + n + 8);
    h.dma_len = load32(l4 + n + 12);
    n += kRethLen;
  }
  if (o.aeth) {
    h.syndrome = l4[n];
    h.msn = load24(l4 + n + 1);
    n += kAethLen;
  }
  if (o.imm) {
    h.imm = load32(l4 + n);
    n += kImmLen;
  }
  *hdr_len = n;
  return ParseError::kNone;
}

bool split(const uint8_t* l4, size_t l4_total, size_t* hdr_len, uint32_t* payload_len) {
  Headers h;
  size_t n = 0;
  if (parse(l4, l4_total, h, &n) != ParseError::kNone) return false;
  if (op_info(h.opcode).kind == OpKind::kCnp) {
    if (l4_total < n + kIcrcLen) return false;
    *hdr_len = n;
    *payload_len = 0;
    return true;
  }
  if (l4_total < n + h.pad + kIcrcLen) return false;
  *hdr_len = n;
  *payload_len = uint32_t(l4_total - n - h.pad - kIcrcLen);
  return true;
}

size_t build(const Headers& h, uint8_t* out) {
  store16(out, h.src_port);
  store16(out + 2, h.dst_port);
  store16(out + 4, 0);
  store16(out + 6, 0);
  uint8_t* b = out + kUdpLen;
  b[0] = h.opcode;
  b[1] = uint8_t((h.solicited ? 0x80 : 0) | (h.pad & 3) << 4);
  store16(b + 2, h.pkey);
  b[4] = h.becn ? 0x40 : 0;
  store24(b + 5, h.dest_qp);
  b[8] = h.ack_req ? 0x80 : 0;
  store24(b + 9, h.psn & kPsnMask);
  size_t n = kUdpLen + kBthLen;
  const OpInfo o = op_info(h.opcode);
  if (o.kind == K::kCnp) {
    for (size_t i = 0; i < 16; i++)
      out[n + i] = 0;
    return n + 16;
  }
  if (o.reth) {
    store32(out + n, uint32_t(h.va >> 32));
    store32(out + n + 4, uint32_t(h.va));
    store32(out + n + 8, h.rkey);
    store32(out + n + 12, h.dma_len);
    n += kRethLen;
  }
  if (o.aeth) {
    out[n] = h.syndrome;
    store24(out + n + 1, h.msn & kPsnMask);
    n += kAethLen;
  }
  if (o.imm) {
    store32(out + n, h.imm);
    n += kImmLen;
  }
  return n;
}

uint16_t udp_sport(uint32_t local_qpn, uint32_t remote_qpn) {
  // rdma_calc_flow_label() folds the QPN product to 20 bits; the port keeps its low 14 bits
  // XORed with the high 6 and sets the top two.
  uint64_t v = uint64_t(local_qpn) * remote_qpn;
  v ^= v >> 20;
  v ^= v >> 40;
  const auto fl = uint32_t(v & 0xFFFFF);
  const uint32_t low = (fl & 0x03FFF) ^ ((fl & 0xFC000) >> 14);
  return uint16_t(low | 0xC000);
}

}  // namespace cleave::transport::roce
