// solar_wire.cc - the Solar header decoded from untrusted bytes and encoded; names of types,
// errors and NACK reasons.
#include "solar_wire.h"

#include <array>

#include "common/wire.h"

namespace cleave::transport::solar {

using wire::load16;
using wire::load32;
using wire::load64;
using wire::store16;
using wire::store32;
using wire::store64;

namespace {

struct ErrorText {
  std::string_view name;
  std::string_view meaning;
};
constexpr ErrorText kErrors[] = {
#define CLEAVE_SOLAR_TEXT(e, name, meaning) {name, meaning},
    CLEAVE_SOLAR_ERRORS(CLEAVE_SOLAR_TEXT)
#undef CLEAVE_SOLAR_TEXT
};

// The flags each type may carry, by type 1..5.
constexpr std::array<uint8_t, 6> kAllowedFlags = {
    0,
    kFlagAckReq | kFlagRetx,        // WRITE_BLK
    kFlagAckReq | kFlagRetx,        // READ_REQ
    kFlagAckReq | kFlagRetx,        // READ_BLK
    kFlagAckReq | kFlagProbeReply,  // ACK
    0,                              // NACK
};

}  // namespace

std::string_view type_name(uint8_t type) {
  switch (Type(type)) {
    case Type::kWriteBlk:
      return "WRITE_BLK";
    case Type::kReadReq:
      return "READ_REQ";
    case Type::kReadBlk:
      return "READ_BLK";
    case Type::kAck:
      return "ACK";
    case Type::kNack:
      return "NACK";
  }
  return "?";
}

std::string_view nack_reason_name(uint32_t reason) {
  switch (NackReason(reason)) {
    case NackReason::kBadCrc:
      return "bad_crc";
    case NackReason::kUnknownIo:
      return "unknown_io";
    case NackReason::kOutOfRange:
      return "out_of_range";
  }
  return "?";
}

std::string_view error_name(Error e) {
  return size_t(e) < std::size(kErrors) ? kErrors[size_t(e)].name : "?";
}

std::string_view error_meaning(Error e) {
  return size_t(e) < std::size(kErrors) ? kErrors[size_t(e)].meaning : "?";
}

Error decode(const uint8_t* p, size_t len, Header& h) {
  if (len < kHeaderLen) return Error::kTruncated;
  const uint8_t type = p[0];
  if (type < 1 || type > 5) return Error::kBadType;
  // Every field is written (the ones this type does not carry zero), one by one: `h =
  // Header{}` went through a temporary on the stack, a store-forwarding stall per header.
  h.type = Type(type);
  h.flags = p[1];
  h.path = load16(p + 2);
  h.conn = load32(p + 4);
  h.seq = load32(p + 8);
  h.io_id = 0;
  h.offset = 0;
  h.index = h.count = 0;
  h.crc = h.length = h.reason = 0;
  h.sack = 0;
  h.echo = 0;
  h.ack_delay_us = 0;
  h.ce_count = 0;
  if ((h.flags & ~kAllowedFlags[type]) != 0) return Error::kBadFlags;
  if (h.path >= kMaxPaths) return Error::kBadPath;
  const size_t block = len - kHeaderLen;
  if (!carries_block(h.type) && block != 0) return Error::kBlockOnControl;

  if (h.type == Type::kAck) {
    h.sack = load64(p + 12);
    h.echo = load32(p + 20);
    h.ack_delay_us = load16(p + 24);
    h.ce_count = load32(p + 28);
    return load16(p + 26) == 0 ? Error::kNone : Error::kReserved;
  }

  h.io_id = load32(p + 12);
  h.offset = load64(p + 16);
  h.index = load16(p + 24);
  h.count = load16(p + 26);
  const uint32_t last = load32(p + 28);
  if (h.count == 0) return Error::kZeroCount;
  if (h.index >= h.count) return Error::kIndexPastCount;
  switch (h.type) {
    case Type::kWriteBlk:
    case Type::kReadBlk:
      h.crc = last;
      if (block == 0) return Error::kNoBlock;
      if (h.offset > UINT64_MAX - block) return Error::kOffsetOverflow;
      return Error::kNone;
    case Type::kReadReq:
      h.length = last;
      if (h.length == 0) return Error::kZeroLength;
      if (h.offset > UINT64_MAX - h.length) return Error::kOffsetOverflow;
      return Error::kNone;
    default:  // NACK
      h.reason = last;
      if (h.reason < 1 || h.reason > 3) return Error::kBadReason;
      return Error::kNone;
  }
}

Error decode_udp(const uint8_t* udp, size_t len, Header& h) {
  if (len < kUdpLen) return Error::kTruncated;
  const Error e = decode(udp + kUdpLen, len - kUdpLen, h);
  if (e != Error::kNone) return e;
  return load16(udp) == udp_sport(h.path) ? Error::kNone : Error::kBadSourcePort;
}

void encode(const Header& h, uint8_t* out) {
  for (size_t i = 0; i < kHeaderLen; i++)
    out[i] = 0;
  out[0] = uint8_t(h.type);
  out[1] = h.flags;
  store16(out + 2, h.path);
  store32(out + 4, h.conn);
  store32(out + 8, h.seq);
  if (h.type == Type::kAck) {
    store64(out + 12, h.sack);
    store32(out + 20, h.echo);
    store16(out + 24, h.ack_delay_us);
    store32(out + 28, h.ce_count);
    return;
  }
  store32(out + 12, h.io_id);
  store64(out + 16, h.offset);
  store16(out + 24, h.index);
  store16(out + 26, h.count);
  switch (h.type) {
    case Type::kReadReq:
      store32(out + 28, h.length);
      break;
    case Type::kNack:
      store32(out + 28, h.reason);
      break;
    default:
      store32(out + 28, h.crc);
      break;
  }
}

uint32_t block_crc(const uint8_t* block, size_t len) {
  return wire::crc32c(block, len);
}

bool block_crc_ok(const uint8_t* p, size_t len) {
  return len >= kHeaderLen && block_crc(p + kHeaderLen, len - kHeaderLen) == load32(p + 28);
}

}  // namespace cleave::transport::solar
