// roce_wire.h - RoCEv2 on the wire: PSN arithmetic, the opcodes of the Reliable Connection
// service, and the UDP + BTH + extension headers, parsed and built (IBTA spec vol. 1 chapter 9,
// RoCEv2 annex A17; docs/transports.md).
//
// parse() reads untrusted bytes: every length is checked against the bytes given, and a packet
// whose opcode, version or headers are not what RC allows comes back invalid with a reason. The
// ICRC is not computed here: the NIC appends it (TX) and checks it (RX); src/common/wire.h has
// the software one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cleave::transport::roce {

inline constexpr uint16_t kUdpPort = 4791;
inline constexpr size_t kUdpLen = 8;
inline constexpr size_t kBthLen = 12;
inline constexpr size_t kRethLen = 16;
inline constexpr size_t kAethLen = 4;
inline constexpr size_t kImmLen = 4;
inline constexpr size_t kIcrcLen = 4;
// The longest header a transport builds: UDP, BTH, RETH and ImmDt (WRITE only with immediate).
inline constexpr size_t kMaxHeader = kUdpLen + kBthLen + kRethLen + kImmLen;

// ---- PSNs: 24 bits, compared modulo 2^24 ----
inline constexpr uint32_t kPsnMask = 0xFFFFFF;
inline uint32_t psn_add(uint32_t psn, uint32_t n) {
  return (psn + n) & kPsnMask;
}
// a - b as a signed distance in (-2^23, 2^23].
inline int32_t psn_diff(uint32_t a, uint32_t b) {
  return int32_t((a - b) << 8) >> 8;
}

// ---- opcodes (RC: service bits 000) ----
enum Op : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0A,
  kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C,
  kReadRespFirst = 0x0D,
  kReadRespMiddle = 0x0E,
  kReadRespLast = 0x0F,
  kReadRespOnly = 0x10,
  kAck = 0x11,
  kAtomicAck = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInv = 0x16,
  kSendOnlyInv = 0x17,
  kFlush = 0x1C,
  kAtomicWrite = 0x1D,
  kCnp = 0x81,
};

// kUnsupported: a request RC has (or reserves) that this transport does not implement: the
// responder answers it with an invalid-request NAK (IBTA 9.7.5.2.4, as Linux rxe does).
enum class OpKind : uint8_t {
  kInvalid,
  kSend,
  kWrite,
  kReadRequest,
  kReadResponse,
  kAck,
  kCnp,
  kUnsupported,
};

// What an opcode carries. `first`/`last`: the packet starts or ends its message. `ext`: for an
// unsupported request, the bytes of its extension headers (not parsed; 0 when unknown).
struct OpInfo {
  OpKind kind = OpKind::kInvalid;
  bool first = false;
  bool last = false;
  bool reth = false;
  bool aeth = false;
  bool imm = false;
  uint8_t ext = 0;
};

// The RC opcodes, 0x00-0x1F (kind, first, last, RETH, AETH, ImmDt, other headers). Atomics
// (AtomicETH, 28 bytes), SEND with invalidate (IETH, 4), FLUSH (FETH and RETH, 20), ATOMIC WRITE
// (RETH, 16) and the reserved codes are requests this transport does not implement; the atomic
// ACK answers a request it never makes, so it is no opcode here at all.
inline constexpr std::array<OpInfo, 0x20> kOps = {{
    {OpKind::kSend, true, false, false, false, false},            // SEND first
    {OpKind::kSend, false, false, false, false, false},           // SEND middle
    {OpKind::kSend, false, true, false, false, false},            // SEND last
    {OpKind::kSend, false, true, false, false, true},             // SEND last + imm
    {OpKind::kSend, true, true, false, false, false},             // SEND only
    {OpKind::kSend, true, true, false, false, true},              // SEND only + imm
    {OpKind::kWrite, true, false, true, false, false},            // WRITE first
    {OpKind::kWrite, false, false, false, false, false},          // WRITE middle
    {OpKind::kWrite, false, true, false, false, false},           // WRITE last
    {OpKind::kWrite, false, true, false, false, true},            // WRITE last + imm
    {OpKind::kWrite, true, true, true, false, false},             // WRITE only
    {OpKind::kWrite, true, true, true, false, true},              // WRITE only + imm
    {OpKind::kReadRequest, true, true, true, false, false},       // READ request
    {OpKind::kReadResponse, true, false, false, true, false},     // READ response first
    {OpKind::kReadResponse, false, false, false, false, false},   // READ response middle
    {OpKind::kReadResponse, false, true, false, true, false},     // READ response last
    {OpKind::kReadResponse, true, true, false, true, false},      // READ response only
    {OpKind::kAck, true, true, false, true, false},               // ACK
    {},                                                           // atomic ACK
    {OpKind::kUnsupported, true, true, false, false, false, 28},  // compare and swap
    {OpKind::kUnsupported, true, true, false, false, false, 28},  // fetch and add
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, false, true, false, false, false, 4},  // SEND last + invalidate
    {OpKind::kUnsupported, true, true, false, false, false, 4},   // SEND only + invalidate
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, true, true, false, false, false, 20},  // FLUSH
    {OpKind::kUnsupported, true, true, false, false, false, 16},  // ATOMIC WRITE
    {OpKind::kUnsupported, true, true},                           // reserved
    {OpKind::kUnsupported, true, true},                           // reserved
}};

// Inline: every packet in and out asks.
inline OpInfo op_info(uint8_t opcode) {
  if (opcode == kCnp) return OpInfo{OpKind::kCnp, true, true, false, false, false};
  return opcode < kOps.size() ? kOps[opcode] : OpInfo{};
}

std::string_view op_name(uint8_t opcode);

// ---- P_Keys (IBTA 10.9.3) ----
// The one partition there is: the default, as a full member.
inline constexpr uint16_t kDefaultPkey = 0xFFFF;
// Two P_Keys match when their low 15 bits are equal and not zero and at least one of the two is
// a full member (bit 15). A packet whose P_Key does not match the QP's is dropped silently and
// counted (no NAK), as Linux rxe does.
inline bool pkey_match(uint16_t a, uint16_t b) {
  return (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) && ((a | b) & 0x8000) != 0;
}

// The IBTA's largest message (and RETH DMA length): 2^31 bytes.
inline constexpr uint32_t kMaxMessage = 1u << 31;

// ---- AETH syndromes ----
enum Syndrome : uint8_t {
  kSynAck = 0x1F,       // ACK, credits "unlimited" (what Linux rxe sends)
  kSynRnr = 0x20,       // RNR NAK | timer code
  kSynPsnError = 0x60,  // NAK: PSN sequence error
  kSynInvalid = 0x61,   // NAK: invalid request
  kSynAccess = 0x62,    // NAK: remote access error
  kSynOperational = 0x63,
};
inline bool syndrome_is_ack(uint8_t s) {
  return (s & 0x60) == 0x00;
}
inline bool syndrome_is_rnr(uint8_t s) {
  return (s & 0x60) == 0x20;
}
inline bool syndrome_is_nak(uint8_t s) {
  return (s & 0x60) == 0x60;
}
// The RNR NAK timer: code 0 = 655.36 ms, 1 = 0.01 ms ... 31 = 491.52 ms (IBTA table 45).
uint64_t rnr_timer_ns(uint8_t code);
// The smallest code whose time is at least `ns` (31 when none is).
uint8_t rnr_timer_code(uint64_t ns);
// The local ACK timeout 4.096 µs × 2^t; 0 = none (returned as 0).
inline uint64_t ack_timeout_ns(uint8_t t) {
  return t == 0 ? 0 : uint64_t(4096) << (t < 31 ? t : 31);
}

// ---- one packet's headers ----
struct Headers {
  // UDP
  uint16_t src_port = 0;
  uint16_t dst_port = kUdpPort;
  // BTH
  uint8_t opcode = 0;
  bool solicited = false;
  uint8_t pad = 0;  // PadCnt: payload bytes added to reach a multiple of 4
  uint16_t pkey = 0xFFFF;
  bool becn = false;  // byte 4 bit 6: set in a CNP
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;
  // RETH (WRITE first/only, READ request)
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t dma_len = 0;
  // AETH (ACK, READ response first/last/only)
  uint8_t syndrome = 0;
  uint32_t msn = 0;
  // ImmDt
  uint32_t imm = 0;
};

enum class ParseError : uint8_t {
  kNone,
  kTruncated,   // fewer bytes than the UDP header, BTH and the opcode's headers
  kNotRoce,     // UDP destination port is not 4791
  kBadOpcode,   // not an RC opcode we know (or UC/UD/XRC)
  kBadVersion,  // BTH TVer is not 0
};
std::string_view parse_error_name(ParseError e);

// Parses UDP + BTH + the opcode's extension headers from `l4` (`len` readable bytes). On success
// *hdr_len is the bytes they take (the payload follows).
ParseError parse(const uint8_t* l4, size_t len, Headers& h, size_t* hdr_len);

// Splits a whole RoCEv2 L4 region (`l4_total` bytes: UDP header, BTH, extension headers,
// payload, pad, ICRC) as the copy path receives it: *hdr_len gets the header bytes and
// *payload_len the payload without pad and ICRC. false when it is not a well-formed packet.
bool split(const uint8_t* l4, size_t l4_total, size_t* hdr_len, uint32_t* payload_len);

// The destination QP in the BTH of the packet at `l4` (kUdpLen + kBthLen readable bytes).
inline uint32_t dest_qp(const uint8_t* l4) {
  const uint8_t* b = l4 + kUdpLen + 5;
  return uint32_t(b[0]) << 16 | uint32_t(b[1]) << 8 | b[2];
}

// Writes UDP (length and checksum 0: the NIC fills the length, RoCEv2 leaves the checksum 0) +
// BTH + the extension headers `h.opcode` carries into `out` (room for kMaxHeader). Returns the
// bytes written.
size_t build(const Headers& h, uint8_t* out);

// The UDP source port Linux derives from a QP pair's flow label (rdma_flow_label_to_udp_sport):
// in 49152-65535, stable per QP pair.
uint16_t udp_sport(uint32_t local_qpn, uint32_t remote_qpn);

}  // namespace cleave::transport::roce
