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

// ---- the message option (RFC 6994 experimental option, kind 253, ExID kMsgExId) ----
// A message-mode flow (Settings::message) offers it in its SYN and the peer accepts it in the
// SYN-ACK; after that every segment of the flow carries it. Big-endian on the wire:
//   SYN, SYN-ACK and segments without payload (8 bytes):
//     kind 253 | len 8 | ExID (16) | limit (32)
//   data segments (20 bytes):
//     kind 253 | len 20 | ExID (16) | limit (32) | number (32) | start (32) | length (32)
// limit:  the sender's receive credit: the peer may send messages numbered below it (one posted
//         receive each; never decreases).
// number: the message this payload belongs to (0 is the first message of the direction).
// start:  the sequence number of the message's first byte; length: its bytes (>= 1).
// A segment never spans two messages, so the offset of its payload in its message is
// seq - start, on every segment a TSO burst is cut into too: a NIC places it at that offset of
// the number-th posted buffer without reassembly.
inline constexpr uint16_t kMsgExId = 0xC1EA;  // "cleave"; RFC 6994 4: an unregistered ExID
inline constexpr uint8_t kMsgOptLen = 8;
inline constexpr uint8_t kMsgDataOptLen = 20;

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
  // The message option (kMsgExId): has_msg on any segment with it, msg_data when it names the
  // message of the payload (the 20-byte form).
  bool has_msg = false;
  bool msg_data = false;
  uint32_t msg_limit = 0;
  uint32_t msg_no = 0;
  uint32_t msg_start = 0;
  uint32_t msg_len = 0;
  // Not from the wire: rx_burst may hand the receive path a run of in-order segments as one
  // (tcp_input.cc, run_length); segs says how many, last_seq where the last one began.
  uint32_t segs = 1;
  uint32_t last_seq = 0;  // segs > 1
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
  // The message option, after timestamps (before SACK): msg_data adds the message fields.
  bool msg = false;
  bool msg_data = false;
  uint32_t msg_limit = 0;
  uint32_t msg_no = 0;
  uint32_t msg_start = 0;
  uint32_t msg_len = 0;
};

// Writes the header (checksum 0: the NIC or the dataplane fills it) into out, which holds at
// least kMaxHeaderLen bytes. SACK blocks that do not fit beside the other options are left out.
// Returns the header length.
size_t build(const BuildSpec& spec, uint8_t* out);

// Bytes of options on a data segment: what the MSS must leave room for.
inline size_t data_options_len(bool ts, bool msg = false) {
  return (ts ? 12 : 0) + (msg ? kMsgDataOptLen : 0);
}

}  // namespace cleave::transport::tcp
