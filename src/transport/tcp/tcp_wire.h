// tcp_wire.h - TCP on the wire: sequence arithmetic, the header and its options, parsed and built.
//
// parse() reads untrusted bytes: it checks every length against the bytes it was given and
// never reads past them. Options it does not know are skipped by their length; a malformed option
// list makes the segment invalid (RFC 9293 3.1: a receiver must not crash on it; Linux drops).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace cleave::transport::tcp {

// ---- sequence numbers: 32-bit, compared modulo 2^32 (RFC 9293 3.4) ----
inline bool seq_lt(uint32_t a, uint32_t b) {
  return int32_t(a - b) < 0;
}
inline bool seq_leq(uint32_t a, uint32_t b) {
  return int32_t(a - b) <= 0;
}
inline bool seq_gt(uint32_t a, uint32_t b) {
  return int32_t(a - b) > 0;
}
inline bool seq_geq(uint32_t a, uint32_t b) {
  return int32_t(a - b) >= 0;
}
inline uint32_t seq_max(uint32_t a, uint32_t b) {
  return seq_gt(a, b) ? a : b;
}
inline uint32_t seq_min(uint32_t a, uint32_t b) {
  return seq_lt(a, b) ? a : b;
}

enum Flag : uint8_t {
  kFin = 0x01,
  kSyn = 0x02,
  kRst = 0x04,
  kPsh = 0x08,
  kAck = 0x10,
  kUrg = 0x20,
  kEce = 0x40,
  kCwr = 0x80,
};

enum Opt : uint8_t {
  kOptEnd = 0,
  kOptNop = 1,
  kOptMss = 2,
  kOptWscale = 3,
  kOptSackPermitted = 4,
  kOptSack = 5,
  kOptTimestamp = 8,
  // Cleave's message boundary option, an experimental option per RFC 6994 (kind 253, ExID).
  kOptExperimental = 253,
};

inline constexpr size_t kHeaderLen = 20;
inline constexpr size_t kMaxHeaderLen = 60;
inline constexpr uint8_t kMaxWscale = 14;  // RFC 7323 2.3
inline constexpr size_t kMaxSackBlocks = 4;

struct SackBlock {
  uint32_t left = 0;   // first sequence number of the block
  uint32_t right = 0;  // one past its last
};

// A parsed TCP header. Fields of absent options are left at their defaults.
struct Segment {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint16_t window = 0;  // as on the wire (unscaled)
  uint8_t flags = 0;
  uint8_t header_len = 0;  // data offset in bytes

  bool has_mss = false;
  bool has_wscale = false;
  bool sack_permitted = false;
  bool has_ts = false;
  uint16_t mss = 0;
  uint8_t wscale = 0;  // as sent; the caller clamps to kMaxWscale
  uint32_t ts_val = 0;
  uint32_t ts_ecr = 0;
  uint8_t nsack = 0;
  std::array<SackBlock, kMaxSackBlocks> sack{};
};

// Parses the TCP header at p (len readable bytes). False when the header is malformed: shorter
// than 20 bytes, a data offset below 5 or beyond len, or an option running past the header.
bool parse(const uint8_t* p, size_t len, Segment& out);

// What build() writes.
struct BuildSpec {
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t seq = 0;
  uint32_t ack = 0;
  uint16_t window = 0;
  uint8_t flags = 0;
  // Options, in Linux's order (MSS, SACK-permitted, timestamps, window scale; on other segments
  // timestamps then SACK), padded with NOPs to 32-bit words.
  uint16_t mss = 0;  // 0: none (SYN only)
  bool wscale_opt = false;
  uint8_t wscale = 0;
  bool sack_permitted = false;
  bool ts = false;
  uint32_t ts_val = 0;
  uint32_t ts_ecr = 0;
  uint8_t nsack = 0;
  const SackBlock* sack = nullptr;
};

// Writes the header (checksum 0: the NIC or the dataplane fills it) into out, which holds at
// least kMaxHeaderLen bytes. SACK blocks that do not fit beside the other options are left out.
// Returns the header length.
size_t build(const BuildSpec& spec, uint8_t* out);

// Bytes of options on a data segment: what the MSS must leave room for.
inline size_t data_options_len(bool ts) {
  return ts ? 12 : 0;
}

}  // namespace cleave::transport::tcp
