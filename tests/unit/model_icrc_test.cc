// model_icrc_test.cc - the software RoCEv2 ICRC of common/wire.h (roce_icrc, roce_icrc_ok)
// against two published reference vectors byte for byte, and what it covers: one
// flipped bit anywhere but in a variant field changes it, the variant fields (IPv4 TOS, TTL,
// header checksum; IPv6 traffic class, flow label, hop limit; UDP checksum; BTH byte 4) do not.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/wire.h"
#include "model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;
using wire::crc32_update;
using wire::csum_fold;
using wire::csum_partial;
using wire::pseudo_sum;
using wire::roce_icrc;
using wire::roce_icrc_load;
using wire::roce_icrc_ok;
using wire::roce_icrc_store;
using wire::store16;
using wire::store32;

constexpr size_t kEth = 14;

Bytes from_hex(const std::string& hex) {
  Bytes b;
  std::string digits;
  for (char c : hex) {
    if (c != ' ' && c != '\n') digits += c;
  }
  for (size_t i = 0; i + 1 < digits.size(); i += 2) {
    b.push_back(uint8_t(std::stoul(digits.substr(i, 2), nullptr, 16)));
  }
  return b;
}

// Vector 1: a CNP captured from a ConnectX-4 Lx (scapy test/contrib/roce.uts), ICRC included.
Bytes connectx4_cnp() {
  return from_hex(
      "e41d2dab2bc2 7cfe90643b32 0800 45c2003c718c40004011 9161 0a001101 0a001201 000012b7 0028 "
      "0000 8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a");
}

// Vector 2 built field by field as its reference describes it: UC SEND only (0x24)
// 192.168.0.7 -> itself, TOS 0x01, IP id 1144, DF, TTL 64, UDP 49152 -> 4791, MigReq, PadCnt 2,
// P_Key 0xFFFF, DestQP 211, PSN 13571856, scapy's 20-byte payload (18 bytes and the 2 pad
// bytes). Checksums and ICRC are computed here: IP checksum, then ICRC (which masks the UDP
// checksum), then the UDP checksum over the whole datagram, ICRC included.
Bytes scapy_uc_send_only() {
  const Bytes payload = from_hex("4630818be28935d90e9a95505401be885e50 0000");
  Bytes f(kEth + 20 + 8 + 12 + payload.size() + 4);
  const uint8_t mac[6] = {0x24, 0x8a, 0x07, 0xa8, 0xfa, 0x22};
  std::copy(mac, mac + 6, f.begin());
  std::copy(mac, mac + 6, f.begin() + 6);
  store16(&f[12], 0x0800);
  uint8_t* ip = &f[kEth];
  ip[0] = 0x45;
  ip[1] = 0x01;
  store16(ip + 2, uint16_t(f.size() - kEth));
  store16(ip + 4, 1144);
  store16(ip + 6, 0x4000);
  ip[8] = 64;
  ip[9] = 17;
  store32(ip + 12, 0xC0A80007);
  store32(ip + 16, 0xC0A80007);
  store16(ip + 10, csum_fold(csum_partial(ip, 20, 0)));
  uint8_t* udp = ip + 20;
  store16(udp, 49152);
  store16(udp + 2, 4791);
  store16(udp + 4, uint16_t(f.size() - kEth - 20));
  uint8_t* bth = udp + 8;
  bth[0] = 0x24;
  bth[1] = 0x40 | 2 << 4;
  store16(bth + 2, 0xFFFF);
  store32(bth + 4, 211);
  store32(bth + 8, 13571856);
  std::copy(payload.begin(), payload.end(), bth + 12);
  const size_t len = f.size() - kEth - 4;
  roce_icrc_store(ip + len, roce_icrc(ip, len));
  const auto l4_len = uint32_t(f.size() - kEth - 20);
  store16(udp + 6, csum_fold(csum_partial(udp, l4_len, pseudo_sum(ip, 17, l4_len))));
  return f;
}

// An RC SEND only over IPv6 (no extension headers), with payload and pad, ICRC appended.
Bytes ipv6_send_only() {
  Bytes f(kEth + 40 + 8 + 12 + 8 + 4);
  store16(&f[12], 0x86DD);
  uint8_t* ip = &f[kEth];
  store32(ip, 6u << 28 | 0x2Au << 20 | 0x12345);  // version, traffic class, flow label
  store16(ip + 4, uint16_t(f.size() - kEth - 40));
  ip[6] = 17;
  ip[7] = 64;
  for (size_t i = 0; i < 32; i++)
    ip[8 + i] = uint8_t(0x20 + i);
  uint8_t* udp = ip + 40;
  store16(udp, 0xC123);
  store16(udp + 2, 4791);
  store16(udp + 4, uint16_t(f.size() - kEth - 40));
  store16(udp + 6, 0xBEEF);
  uint8_t* bth = udp + 8;
  bth[0] = 0x04;
  bth[1] = 1 << 4;
  store16(bth + 2, 0xFFFF);
  store32(bth + 4, 0x22);
  store32(bth + 8, 0x80000007);
  for (size_t i = 0; i < 7; i++)
    bth[12 + i] = uint8_t(0xA0 + i);
  const size_t len = f.size() - kEth - 4;
  roce_icrc_store(ip + len, roce_icrc(ip, len));
  return f;
}

// The same CRC computed independently on purpose (a test oracle): bitwise, over a masked copy of
// the whole packet.
uint32_t icrc_bitwise(const Bytes& f, const std::vector<size_t>& ones, uint8_t byte0_or = 0) {
  Bytes m(8 + f.size() - kEth - 4, 0xFF);
  std::copy(f.begin() + kEth, f.end() - 4, m.begin() + 8);
  for (size_t at : ones)
    m[8 + at] = 0xFF;
  m[8] |= byte0_or;
  return test::crc_bitwise(0xEDB88320, m.data(), m.size()) ^ 0xFFFFFFFF;
}

// Flips every bit from the IP header to the end of the pad, one at a time: the ICRC must change
// unless the bit lies in a variant field (`variant(byte, bit)`).
template <typename Variant>
void expect_coverage(Bytes f, Variant variant) {
  uint8_t* ip = &f[kEth];
  const size_t len = f.size() - kEth - 4;
  const uint32_t want = roce_icrc(ip, len);
  size_t changed = 0;
  size_t same = 0;
  for (size_t i = 0; i < len; i++) {
    for (size_t b = 0; b < 8; b++) {
      ip[i] ^= uint8_t(1u << b);
      const bool differs = roce_icrc(ip, len) != want;
      ip[i] ^= uint8_t(1u << b);
      if (variant(i, b)) {
        EXPECT_FALSE(differs) << "variant byte " << i << " bit " << b;
        same++;
      } else {
        EXPECT_TRUE(differs) << "covered byte " << i << " bit " << b;
        changed++;
      }
    }
  }
  EXPECT_GT(changed, 0u);
  EXPECT_GT(same, 0u);
}

TEST(Icrc, StateAfterTheEightOnesIsTheDocumentedOne) {
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  EXPECT_EQ(crc32_update(0xFFFFFFFFu, ones, 8), 0xDEBB20E3u);
}

TEST(Icrc, MatchesTheCapturedConnectX4Cnp) {
  const Bytes f = connectx4_cnp();
  ASSERT_EQ(f.size(), 74u);
  const size_t len = f.size() - kEth - 4;
  EXPECT_EQ(roce_icrc(&f[kEth], len), 0x2A00FD82u);
  uint8_t got[4];
  roce_icrc_store(got, roce_icrc(&f[kEth], len));
  EXPECT_EQ(Bytes(got, got + 4), from_hex("82fd002a"));
  EXPECT_EQ(roce_icrc_load(got), 0x2A00FD82u);
  EXPECT_TRUE(roce_icrc_ok(&f[kEth], f.size() - kEth));
  EXPECT_EQ(roce_icrc(&f[kEth], len), icrc_bitwise(f, {1, 8, 10, 11, 26, 27, 32}));
}

TEST(Icrc, MatchesScapysUcSendOnlyWithItsChecksums) {
  const Bytes f = scapy_uc_send_only();
  ASSERT_EQ(f.size(), 14u + 64);
  EXPECT_EQ(test::get16(&f[kEth + 10]), 0xB4D5);
  EXPECT_EQ(test::get16(&f[kEth + 20 + 6]), 0xACA2);
  EXPECT_EQ(Bytes(f.end() - 4, f.end()), from_hex("78f353f3"));
  // The whole frame, byte for byte, as scapy builds it.
  EXPECT_EQ(f, from_hex("248a07a8fa22 248a07a8fa22 0800 4501 0040 0478 4000 4011 b4d5 c0a80007 "
                        "c0a80007 c000 12b7 002c aca2 2460ffff 000000d3 00cf1710 "
                        "4630818be28935d90e9a95505401be885e50 0000 78f353f3"));
  EXPECT_TRUE(roce_icrc_ok(&f[kEth], f.size() - kEth));
}

TEST(Icrc, CoversEveryBitButTheVariantFieldsOfIpv4) {
  // IPv4: TOS (1), TTL (8), header checksum (10, 11); UDP checksum (26, 27); BTH byte 4 (32).
  auto v4 = [](size_t i, size_t) {
    return i == 1 || i == 8 || i == 10 || i == 11 || i == 26 || i == 27 || i == 32;
  };
  expect_coverage(connectx4_cnp(), v4);
  expect_coverage(scapy_uc_send_only(), v4);
}

TEST(Icrc, Ipv4OptionsMoveTheUdpAndBthFields) {
  // IHL 6: the UDP checksum is at 26 + 4 and BTH byte 4 at 32 + 4.
  Bytes f = scapy_uc_send_only();
  f.insert(f.begin() + kEth + 20, {1, 1, 1, 0});  // four NOP options and end of list
  f[kEth] = 0x46;
  expect_coverage(f, [](size_t i, size_t) {
    return i == 1 || i == 8 || i == 10 || i == 11 || i == 30 || i == 31 || i == 36;
  });
  const size_t len = f.size() - kEth - 4;
  EXPECT_EQ(roce_icrc(&f[kEth], len), icrc_bitwise(f, {1, 8, 10, 11, 30, 31, 36}));
}

TEST(Icrc, CoversEveryBitButTheVariantFieldsOfIpv6) {
  const Bytes f = ipv6_send_only();
  EXPECT_TRUE(roce_icrc_ok(&f[kEth], f.size() - kEth));
  // Traffic class and flow label: the low nibble of byte 0 and bytes 1-3; hop limit (7); UDP
  // checksum (46, 47); BTH byte 4 (52). The version nibble is covered.
  expect_coverage(f, [](size_t i, size_t b) {
    return (i == 0 && b < 4) || i == 1 || i == 2 || i == 3 || i == 7 || i == 46 || i == 47 ||
           i == 52;
  });
  const size_t len = f.size() - kEth - 4;
  EXPECT_EQ(roce_icrc(&f[kEth], len), icrc_bitwise(f, {1, 2, 3, 7, 46, 47, 52}, 0x0F));
}

TEST(Icrc, VerifyRefusesWhatCannotBeARocePacket) {
  Bytes f = connectx4_cnp();
  const size_t len = f.size() - kEth;
  EXPECT_TRUE(roce_icrc_ok(&f[kEth], len));
  f[f.size() - 1] ^= 0x80;  // the ICRC itself
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], len));
  f[f.size() - 1] ^= 0x80;
  f[kEth + 40] ^= 1;  // the DestQP
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], len));
  f[kEth + 40] ^= 1;
  f[kEth + 8] = 1;   // TTL: variant
  f[kEth + 32] = 0;  // BTH byte 4: variant
  EXPECT_TRUE(roce_icrc_ok(&f[kEth], len));
  // Shorter than IP, UDP, BTH and an ICRC; no IP header at all; not IPv4 or IPv6; IHL < 5.
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], 20 + 8 + 12 + 3));
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], 0));
  f[kEth] = 0x55;
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], len));
  f[kEth] = 0x44;  // even with the ICRC that roce_icrc gives such a packet
  roce_icrc_store(&f[f.size() - 4], roce_icrc(&f[kEth], len - 4));
  EXPECT_FALSE(roce_icrc_ok(&f[kEth], len));
  // A value for a packet cut anywhere, reading nothing past `len` (ASan would tell).
  for (size_t n = 0; n <= len; n++) {
    Bytes cut(f.begin() + kEth, f.begin() + long(kEth + n));
    (void)roce_icrc(cut.data(), cut.size());
  }
}

TEST(Icrc, AgreesWithTheModelsTxOffload) {
  // What the NIC model appends (kTxIcrc) verifies with roce_icrc_ok, for every pad count.
  NicConfig c;
  c.max_flows = 4;
  c.ms_store_entries = 64;
  NicModel nic(c);
  Bytes mem(4096);
  for (size_t i = 0; i < mem.size(); i++)
    mem[i] = uint8_t(i * 7 + 3);
  ASSERT_EQ(nic.mr_add(1, mem.data(), mem.size(), 1), Err::kOk);
  Bytes out(8192);
  std::vector<TxFrame> frames(4);
  std::vector<TxCompletion> done(4);
  for (uint32_t plen = 0; plen < 9; plen++) {
    SCOPED_TRACE(plen);
    const Bytes f0 = test::roce_frame(0x04, 100 + plen, {}, Bytes(plen));
    Bytes h(f0.begin(), f0.begin() + long(kEth + 20 + 8 + 12));
    uint16_t n = 0;
    ASSERT_EQ(nic.tx({h, 1, plen, plen, 0, kTxIcrc | kTxIpCsum, plen}, out, frames, &n),
              TxStatus::kOk);
    ASSERT_EQ(n, 1);
    ASSERT_EQ(nic.tx_poll(done), 1u);
    EXPECT_TRUE(roce_icrc_ok(&out[frames[0].offset + kEth], frames[0].len - kEth));
  }
}

}  // namespace
}  // namespace cleave::nic
