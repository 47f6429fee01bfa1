// solar_wire.h - Solar on the wire: the 32-byte header of every Solar packet (WRITE_BLK,
// READ_REQ, READ_BLK, ACK, NACK), decoded from untrusted bytes and encoded; path ids and UDP
// ports; transmit sequence arithmetic. The format, field by field: README.md in this folder.
//
// The header's data fields sit where the NIC reads them (hw/fpga/model rx_solar, the RTL parser
// cleave_rx_parser.sv): type at 0, transmit sequence at 8, I/O id at 12, offset at 16, the
// block's CRC32C at 28. decode() reads untrusted bytes: every length is checked against the
// bytes given, and a header that breaks a rule comes back with the rule's error. The CRC32C of
// a block is not checked here (the transport sees headers, not blocks): block_crc_ok() does it
// where the block is at hand, and the NIC does it on receive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cleave::transport::solar {

inline constexpr size_t kHeaderLen = 32;
inline constexpr size_t kUdpLen = 8;
// The UDP destination port a Solar receiver listens on unless configured otherwise.
inline constexpr uint16_t kUdpPort = 7000;
// A path's packets leave from UDP source port 0xC000 | path id, so path ids have 14 bits.
inline constexpr uint16_t kPathPortBase = 0xC000;
inline constexpr uint16_t kMaxPaths = 0x4000;
// The SACK bitmap of an ACK: the 64 transmit sequences below the largest one received.
inline constexpr uint32_t kSackBits = 64;

enum class Type : uint8_t {
  kWriteBlk = 1,  // initiator -> target: one block of a write
  kReadReq = 2,   // initiator -> target: send these blocks of a read
  kReadBlk = 3,   // target -> initiator: one block of a read
  kAck = 4,       // which transmit sequences of a path arrived; RTT echo; CE count
  kNack = 5,      // one packet refused, and why
};
std::string_view type_name(uint8_t type);
inline bool carries_block(Type t) {
  return t == Type::kWriteBlk || t == Type::kReadBlk;
}

// Byte 1. Each type allows only some (kAllowedFlags); others are a malformed header.
enum Flag : uint8_t {
  kFlagAckReq = 0x01,      // data, READ_REQ: ACK at once. ACK: a probe, answer at once
  kFlagRetx = 0x02,        // data, READ_REQ: a resend (under a new transmit sequence)
  kFlagProbeReply = 0x04,  // ACK: the answer to a probe
};

// Why a NACK refused a packet (bytes 28..31 of a NACK).
enum class NackReason : uint32_t {
  kBadCrc = 1,      // the block's CRC32C did not match: dropped, send it again
  kUnknownIo = 2,   // no I/O with that id is expected (nothing posted for it)
  kOutOfRange = 3,  // the block or the requested range lies outside the volume or the I/O
};
std::string_view nack_reason_name(uint32_t reason);

// One header, every type's fields. Which bytes each field comes from depends on the type:
//                 8..11         12..15  16..23  24..25  26..27  28..31
//   WRITE/READ_BLK seq           io_id   offset  index   count   crc
//   READ_REQ       seq           io_id   offset  index   count   length
//   ACK            seq (largest) sack (12..19) echo (20..23) ack_delay_us  -  ce_count
//   NACK           seq (refused) io_id   offset  index   count   reason
struct Header {
  Type type = Type::kWriteBlk;
  uint8_t flags = 0;
  uint16_t path = 0;
  uint32_t conn = 0;  // the receiver's number for the connection
  uint32_t seq = 0;   // see the table
  // WRITE_BLK, READ_BLK, READ_REQ, NACK
  uint32_t io_id = 0;
  uint64_t offset = 0;
  uint16_t index = 0;
  uint16_t count = 0;
  uint32_t crc = 0;     // data: CRC32C of the block
  uint32_t length = 0;  // READ_REQ: bytes asked for from offset
  uint32_t reason = 0;  // NACK: NackReason
  // ACK
  uint64_t sack = 0;  // bit i: seq - 1 - i arrived
  uint32_t echo = 0;  // the transmit sequence whose arrival sent this ACK
  uint16_t ack_delay_us = 0;
  uint32_t ce_count = 0;  // CE-marked packets received on the path so far, modulo 2^32
};

// What can be wrong with a header, as (name, meaning).
#define CLEAVE_SOLAR_ERRORS(X)                                                                \
  X(kNone, "none", "a well-formed header")                                                    \
  X(kTruncated, "truncated", "fewer than 32 bytes")                                           \
  X(kBadType, "bad_type", "type is not 1..5")                                                 \
  X(kBadFlags, "bad_flags", "a flag this type does not allow")                                \
  X(kBadPath, "bad_path", "path id of 0x4000 or more (no UDP source port)")                   \
  X(kBadSourcePort, "bad_source_port", "UDP source port is not 0xC000 | path id")             \
  X(kBlockOnControl, "block_on_control", "bytes after the header of a READ_REQ, ACK or NACK") \
  X(kNoBlock, "no_block", "a WRITE_BLK or READ_BLK without a block")                          \
  X(kZeroCount, "zero_count", "block count 0")                                                \
  X(kIndexPastCount, "index_past_count", "block index not below the block count")             \
  X(kOffsetOverflow, "offset_overflow", "offset + length passes 2^64")                        \
  X(kZeroLength, "zero_length", "a READ_REQ for 0 bytes")                                     \
  X(kBadReason, "bad_reason", "a NACK reason that is not 1..3")                               \
  X(kReserved, "reserved", "ACK bytes 26..27 are not zero")

enum class Error : uint8_t {
#define CLEAVE_SOLAR_ENUM(e, name, meaning) e,
  CLEAVE_SOLAR_ERRORS(CLEAVE_SOLAR_ENUM)
#undef CLEAVE_SOLAR_ENUM
};
std::string_view error_name(Error e);
std::string_view error_meaning(Error e);

// Reads the header at `p`; `len` counts the bytes from the header to the end of the UDP payload
// (the block, if any, follows the header). Checks every rule of README.md except the CRC.
Error decode(const uint8_t* p, size_t len, Header& h);

// The same from the UDP header at `udp` (`len` bytes: UDP header, Solar header, block), also
// checking that the source port is the path's.
Error decode_udp(const uint8_t* udp, size_t len, Header& h);

// Writes the 32 header bytes of `h` into `out`. Fields the type does not carry are not written
// (their bytes are zero). Writes what it is given: decode() is the check.
void encode(const Header& h, uint8_t* out);

// The CRC32C (Castagnoli) of a block, as byte 28..31 carry it.
uint32_t block_crc(const uint8_t* block, size_t len);
// True when the `len` bytes after the header at `p` (a WRITE_BLK or READ_BLK) match its CRC.
bool block_crc_ok(const uint8_t* p, size_t len);

inline uint16_t udp_sport(uint16_t path) {
  return uint16_t(kPathPortBase | (path & (kMaxPaths - 1)));
}

// Transmit sequences compare modulo 2^32: a - b as a signed distance.
inline int32_t seq_diff(uint32_t a, uint32_t b) {
  return int32_t(a - b);
}
// True when an ACK with largest sequence `largest` and bitmap `sack` says `seq` arrived.
inline bool sack_has(uint32_t largest, uint64_t sack, uint32_t seq) {
  const int32_t d = seq_diff(largest, seq);
  if (d == 0) return true;
  return d > 0 && uint32_t(d) <= kSackBits && ((sack >> (d - 1)) & 1) != 0;
}

}  // namespace cleave::transport::solar
