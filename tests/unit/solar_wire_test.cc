// solar_wire_test.cc - the Solar header codec (src/transport/solar/solar_wire.h): each type
// encoded and compared with bytes written out by hand from README.md's table, decoded back, and
// every malformed case refused with its own error; CRC32C against the standard check value.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "transport/solar/solar_wire.h"

namespace cleave::transport::solar {
namespace {

using Bytes = std::vector<uint8_t>;

Bytes encoded(const Header& h) {
  Bytes b(kHeaderLen, 0xEE);
  encode(h, b.data());
  return b;
}

Error decoded(const Bytes& b, Header& h) {
  return decode(b.data(), b.size(), h);
}

TEST(SolarWire, Crc32cOfTheCheckString) {
  const std::string_view s = "123456789";
  EXPECT_EQ(block_crc(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xE3069283u);
  EXPECT_EQ(block_crc(nullptr, 0), 0u);
  // RFC 3720 B.4: 32 bytes of zeros.
  const Bytes zeros(32, 0);
  EXPECT_EQ(block_crc(zeros.data(), zeros.size()), 0x8A9136AAu);
}

TEST(SolarWire, WriteBlockEncodesByteForByte) {
  Header h;
  h.type = Type::kWriteBlk;
  h.flags = kFlagAckReq | kFlagRetx;
  h.path = 0x0102;
  h.conn = 0x03040506;
  h.seq = 0x0708090A;
  h.io_id = 0x0B0C0D0E;
  h.offset = 0x1112131415161718;
  h.index = 0x0021;
  h.count = 0x0022;
  h.crc = 0xE3069283;
  const Bytes want = {
      0x01, 0x03, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06,  // type, flags, path, conn
      0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x0E,  // seq, io id
      0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18,  // offset
      0x00, 0x21, 0x00, 0x22, 0xE3, 0x06, 0x92, 0x83,  // index, count, crc
  };
  EXPECT_EQ(encoded(h), want);

  // Decoded with the block "123456789" after it: the same fields, and the CRC matches.
  Bytes pkt = want;
  for (char c : std::string_view("123456789"))
    pkt.push_back(uint8_t(c));
  Header d;
  ASSERT_EQ(decoded(pkt, d), Error::kNone);
  EXPECT_EQ(d.type, Type::kWriteBlk);
  EXPECT_EQ(d.flags, kFlagAckReq | kFlagRetx);
  EXPECT_EQ(d.path, 0x0102);
  EXPECT_EQ(d.conn, 0x03040506u);
  EXPECT_EQ(d.seq, 0x0708090Au);
  EXPECT_EQ(d.io_id, 0x0B0C0D0Eu);
  EXPECT_EQ(d.offset, 0x1112131415161718u);
  EXPECT_EQ(d.index, 0x21);
  EXPECT_EQ(d.count, 0x22);
  EXPECT_EQ(d.crc, 0xE3069283u);
  EXPECT_TRUE(block_crc_ok(pkt.data(), pkt.size()));
  pkt.back() ^= 1;
  EXPECT_FALSE(block_crc_ok(pkt.data(), pkt.size()));
  EXPECT_FALSE(block_crc_ok(pkt.data(), kHeaderLen - 1));
}

TEST(SolarWire, ReadBlockIsTypeThreeWithTheSameLayout) {
  Header h;
  h.type = Type::kReadBlk;
  h.path = 3;
  h.conn = 9;
  h.seq = 0xFFFFFFFF;
  h.io_id = 77;
  h.offset = 8192;
  h.index = 2;
  h.count = 4;
  h.crc = 0xDEADBEEF;
  const Bytes want = {
      0x03, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x09, 0xFF, 0xFF, 0xFF,
      0xFF, 0x00, 0x00, 0x00, 0x4D, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x20, 0x00, 0x00, 0x02, 0x00, 0x04, 0xDE, 0xAD, 0xBE, 0xEF,
  };
  EXPECT_EQ(encoded(h), want);
}

TEST(SolarWire, ReadRequestCarriesItsLengthWhereBlocksCarryTheCrc) {
  Header h;
  h.type = Type::kReadReq;
  h.flags = kFlagAckReq;
  h.path = 0x3FFF;
  h.conn = 0xA0A0A0A0;
  h.seq = 100;
  h.io_id = 5;
  h.offset = 0x0000010000000000;
  h.index = 0;
  h.count = 16;
  h.length = 65536;
  const Bytes want = {
      0x02, 0x01, 0x3F, 0xFF, 0xA0, 0xA0, 0xA0, 0xA0, 0x00, 0x00, 0x00,
      0x64, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x01, 0x00, 0x00,
  };
  EXPECT_EQ(encoded(h), want);
  Header d;
  ASSERT_EQ(decoded(want, d), Error::kNone);
  EXPECT_EQ(d.length, 65536u);
  EXPECT_EQ(d.crc, 0u);
  EXPECT_EQ(d.offset, 0x0000010000000000u);
}

TEST(SolarWire, AckCarriesLargestSackEchoDelayAndCeCount) {
  Header h;
  h.type = Type::kAck;
  h.flags = kFlagProbeReply;
  h.path = 1;
  h.conn = 7;
  h.seq = 0x00001000;           // largest received
  h.sack = 0x8000000000000005;  // 0x0FFF, 0x0FFD and 0x0FBF arrived
  h.echo = 0x00000FFD;          // a late one sent this ACK
  h.ack_delay_us = 0x1234;
  h.ce_count = 0x01020304;
  const Bytes want = {
      0x04, 0x04, 0x00, 0x01, 0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x10,
      0x00, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00,
      0x0F, 0xFD, 0x12, 0x34, 0x00, 0x00, 0x01, 0x02, 0x03, 0x04,
  };
  EXPECT_EQ(encoded(h), want);
  Header d;
  ASSERT_EQ(decoded(want, d), Error::kNone);
  EXPECT_EQ(d.type, Type::kAck);
  EXPECT_EQ(d.seq, 0x1000u);
  EXPECT_EQ(d.sack, 0x8000000000000005u);
  EXPECT_EQ(d.echo, 0xFFDu);
  EXPECT_EQ(d.ack_delay_us, 0x1234);
  EXPECT_EQ(d.ce_count, 0x01020304u);
  EXPECT_EQ(d.count, 0);  // not an ACK's field

  EXPECT_TRUE(sack_has(d.seq, d.sack, 0x1000));
  EXPECT_TRUE(sack_has(d.seq, d.sack, 0x0FFF));
  EXPECT_FALSE(sack_has(d.seq, d.sack, 0x0FFE));
  EXPECT_TRUE(sack_has(d.seq, d.sack, 0x0FFD));
  EXPECT_TRUE(sack_has(d.seq, d.sack, 0x0FC0));   // bit 63: largest - 64
  EXPECT_FALSE(sack_has(d.seq, d.sack, 0x0FBF));  // beyond the bitmap
  EXPECT_FALSE(sack_has(d.seq, d.sack, 0x1001));  // after the largest
}

TEST(SolarWire, SackWrapsModulo2To32) {
  EXPECT_TRUE(sack_has(2, 0x4, 0xFFFFFFFF));  // 2 - 3
  EXPECT_FALSE(sack_has(2, 0x4, 0xFFFFFFFE));
  EXPECT_EQ(seq_diff(1, 0xFFFFFFFF), 2);
  EXPECT_EQ(seq_diff(0xFFFFFFFF, 1), -2);
}

TEST(SolarWire, NackEchoesTheRefusedPacketAndSaysWhy) {
  Header h;
  h.type = Type::kNack;
  h.path = 2;
  h.conn = 1;
  h.seq = 42;
  h.io_id = 9;
  h.offset = 4096;
  h.index = 1;
  h.count = 2;
  h.reason = uint32_t(NackReason::kBadCrc);
  const Bytes want = {
      0x05, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
      0x2A, 0x00, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x10, 0x00, 0x00, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01,
  };
  EXPECT_EQ(encoded(h), want);
  Header d;
  ASSERT_EQ(decoded(want, d), Error::kNone);
  EXPECT_EQ(d.reason, 1u);
  EXPECT_EQ(nack_reason_name(d.reason), "bad_crc");
}

TEST(SolarWire, UdpSourcePortNamesThePath) {
  EXPECT_EQ(udp_sport(0), 0xC000);
  EXPECT_EQ(udp_sport(5), 0xC005);
  EXPECT_EQ(udp_sport(0x3FFF), 0xFFFF);

  Header h;
  h.type = Type::kAck;
  h.path = 5;
  Bytes u(kUdpLen + kHeaderLen, 0);
  u[0] = 0xC0;
  u[1] = 0x05;
  u[2] = kUdpPort >> 8;
  u[3] = kUdpPort & 0xFF;
  encode(h, &u[kUdpLen]);
  Header d;
  EXPECT_EQ(decode_udp(u.data(), u.size(), d), Error::kNone);
  EXPECT_EQ(d.path, 5);
  u[1] = 0x06;
  EXPECT_EQ(decode_udp(u.data(), u.size(), d), Error::kBadSourcePort);
  EXPECT_EQ(decode_udp(u.data(), kUdpLen - 1, d), Error::kTruncated);
  EXPECT_EQ(decode_udp(u.data(), kUdpLen + kHeaderLen - 1, d), Error::kTruncated);
}

// A well-formed header of each type (with a block where the type carries one), then one broken
// field at a time.
Bytes good(Type t, size_t block = 0) {
  Header h;
  h.type = t;
  h.path = 1;
  h.conn = 7;
  h.seq = 10;
  h.io_id = 3;
  h.offset = 4096;
  h.index = 0;
  h.count = 1;
  h.length = 512;
  h.reason = 1;
  Bytes b(kHeaderLen + block, 0x5A);
  encode(h, b.data());
  return b;
}

struct Case {
  const char* what;
  Bytes bytes;
  Error want;
};

std::vector<Case> malformed() {
  std::vector<Case> c;
  auto with = [](Bytes b, size_t at, uint8_t v) {
    b[at] = v;
    return b;
  };
  auto shorter = [](Bytes b, size_t n) {
    b.resize(n);
    return b;
  };
  const Bytes wr = good(Type::kWriteBlk, 64);
  const Bytes rd = good(Type::kReadBlk, 64);
  const Bytes rq = good(Type::kReadReq);
  const Bytes ack = good(Type::kAck);
  const Bytes nack = good(Type::kNack);
  c.push_back({"empty", {}, Error::kTruncated});
  c.push_back({"31 bytes", shorter(ack, 31), Error::kTruncated});
  c.push_back({"type 0", with(ack, 0, 0), Error::kBadType});
  c.push_back({"type 6", with(ack, 0, 6), Error::kBadType});
  c.push_back({"type 255", with(wr, 0, 255), Error::kBadType});
  c.push_back({"probe reply on a block", with(wr, 1, kFlagProbeReply), Error::kBadFlags});
  c.push_back({"unknown flag", with(wr, 1, 0x80), Error::kBadFlags});
  c.push_back({"resend flag on an ACK", with(ack, 1, kFlagRetx), Error::kBadFlags});
  c.push_back({"any flag on a NACK", with(nack, 1, kFlagAckReq), Error::kBadFlags});
  c.push_back({"path 0x4000", with(ack, 2, 0x40), Error::kBadPath});
  c.push_back({"path 0xFFFF", with(with(wr, 2, 0xFF), 3, 0xFF), Error::kBadPath});
  Bytes ack_block = ack;
  ack_block.push_back(0);
  c.push_back({"block on an ACK", ack_block, Error::kBlockOnControl});
  Bytes nack_block = nack;
  nack_block.resize(kHeaderLen + 100);
  c.push_back({"block on a NACK", nack_block, Error::kBlockOnControl});
  Bytes rq_block = rq;
  rq_block.push_back(0);
  c.push_back({"block on a READ_REQ", rq_block, Error::kBlockOnControl});
  c.push_back({"WRITE_BLK without a block", shorter(wr, kHeaderLen), Error::kNoBlock});
  c.push_back({"READ_BLK without a block", shorter(rd, kHeaderLen), Error::kNoBlock});
  c.push_back({"count 0", with(wr, 27, 0), Error::kZeroCount});
  c.push_back({"count 0 on a READ_REQ", with(rq, 27, 0), Error::kZeroCount});
  c.push_back({"count 0 on a NACK", with(nack, 27, 0), Error::kZeroCount});
  c.push_back({"index = count", with(wr, 25, 1), Error::kIndexPastCount});
  c.push_back({"index > count", with(with(rd, 24, 1), 27, 5), Error::kIndexPastCount});
  c.push_back({"index past count on a READ_REQ", with(rq, 25, 9), Error::kIndexPastCount});
  Bytes end = wr;
  for (size_t i = 16; i < 24; i++)
    end[i] = 0xFF;
  c.push_back({"block runs past 2^64", end, Error::kOffsetOverflow});
  Bytes edge = good(Type::kReadBlk, 16);
  for (size_t i = 16; i < 24; i++)
    edge[i] = 0xFF;
  edge[23] = 0xF0;
  c.push_back({"block ends at 2^64", edge, Error::kOffsetOverflow});
  Bytes rq_end = rq;
  for (size_t i = 16; i < 24; i++)
    rq_end[i] = 0xFF;
  c.push_back({"read runs past 2^64", rq_end, Error::kOffsetOverflow});
  Bytes rq_zero = rq;
  for (size_t i = 28; i < 32; i++)
    rq_zero[i] = 0;
  c.push_back({"READ_REQ for 0 bytes", rq_zero, Error::kZeroLength});
  c.push_back({"NACK reason 0", with(nack, 31, 0), Error::kBadReason});
  c.push_back({"NACK reason 4", with(nack, 31, 4), Error::kBadReason});
  c.push_back({"ACK reserved byte 26", with(ack, 26, 1), Error::kReserved});
  c.push_back({"ACK reserved byte 27", with(ack, 27, 0x80), Error::kReserved});
  return c;
}

TEST(SolarWire, WellFormedHeadersOfEveryTypeDecode) {
  for (Type t : {Type::kWriteBlk, Type::kReadBlk}) {
    Header h;
    EXPECT_EQ(decoded(good(t, 1), h), Error::kNone) << type_name(uint8_t(t));
    EXPECT_EQ(decoded(good(t, 9000), h), Error::kNone) << type_name(uint8_t(t));
  }
  for (Type t : {Type::kReadReq, Type::kAck, Type::kNack}) {
    Header h;
    EXPECT_EQ(decoded(good(t), h), Error::kNone) << type_name(uint8_t(t));
  }
  // The highest block: index 0xFFFE of 0xFFFF, its end (offset + length) at 2^64 - 1, the
  // largest the NIC accepts.
  Bytes b = good(Type::kWriteBlk, 16);
  for (size_t i = 16; i < 24; i++)
    b[i] = 0xFF;
  b[23] = 0xEF;
  b[24] = 0xFF;
  b[25] = 0xFE;
  b[26] = b[27] = 0xFF;
  Header h;
  EXPECT_EQ(decoded(b, h), Error::kNone);
  EXPECT_EQ(h.offset, 0xFFFFFFFFFFFFFFEFu);
  EXPECT_EQ(h.index, 0xFFFE);
}

TEST(SolarWire, EveryMalformedHeaderIsRefusedWithItsReason) {
  for (const Case& c : malformed()) {
    Header h;
    EXPECT_EQ(error_name(decoded(c.bytes, h)), error_name(c.want)) << c.what;
  }
}

TEST(SolarWire, EveryErrorHasANameAndAMeaning) {
  for (uint8_t e = 0; e <= uint8_t(Error::kReserved); e++) {
    EXPECT_NE(error_name(Error(e)), "?");
    EXPECT_FALSE(error_meaning(Error(e)).empty());
  }
  EXPECT_EQ(error_name(Error::kBlockOnControl), "block_on_control");
  EXPECT_EQ(type_name(9), "?");
  EXPECT_EQ(nack_reason_name(0), "?");
}

// What the NIC model reads of a data header (nic_model_rx.cc rx_solar) is where encode() puts it.
TEST(SolarWire, DataFieldsSitWhereTheNicReadsThem) {
  Header h;
  h.type = Type::kReadBlk;
  h.seq = 0xA1A2A3A4;
  h.io_id = 0xB1B2B3B4;
  h.offset = 0xC1C2C3C4C5C6C7C8;
  h.crc = 0xD1D2D3D4;
  const Bytes b = encoded(h);
  EXPECT_EQ(b[0], 3);
  EXPECT_EQ((Bytes{b.begin() + 8, b.begin() + 12}), (Bytes{0xA1, 0xA2, 0xA3, 0xA4}));
  EXPECT_EQ((Bytes{b.begin() + 12, b.begin() + 16}), (Bytes{0xB1, 0xB2, 0xB3, 0xB4}));
  EXPECT_EQ((Bytes{b.begin() + 16, b.begin() + 24}),
            (Bytes{0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8}));
  EXPECT_EQ((Bytes{b.begin() + 28, b.begin() + 32}), (Bytes{0xD1, 0xD2, 0xD3, 0xD4}));
}

}  // namespace
}  // namespace cleave::transport::solar
