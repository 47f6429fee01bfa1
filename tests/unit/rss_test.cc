// rss_test.cc - the Toeplitz hash against Microsoft's RSS verification vectors, the default RETA,
// and the choice of a source port whose replies land on a given queue.
#include <gtest/gtest.h>

#include <set>

#include "common/rss.h"

namespace cleave::rss {
namespace {

constexpr uint32_t ip(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return uint32_t(a) << 24 | uint32_t(b) << 16 | uint32_t(c) << 8 | d;
}

// "Verifying the RSS Hash Calculation" (Microsoft), IPv4: the frame's source and destination,
// the 2-tuple hash and the 4-tuple (TCP) hash under the default key.
struct Vector {
  uint32_t src_ip;
  uint16_t src_port;
  uint32_t dst_ip;
  uint16_t dst_port;
  uint32_t hash_ip;
  uint32_t hash_tcp;
};
constexpr Vector kVectors[] = {
    {ip(66, 9, 149, 187), 2794, ip(161, 142, 100, 80), 1766, 0x323e8fc2, 0x51ccc178},
    {ip(199, 92, 111, 2), 14230, ip(65, 69, 140, 83), 4739, 0xd718262a, 0xc626b0ea},
    {ip(24, 19, 198, 95), 12898, ip(12, 22, 207, 184), 38024, 0xd2d0a5de, 0x5c2b394a},
    {ip(38, 27, 205, 30), 48228, ip(209, 142, 163, 6), 2217, 0x82989176, 0xafc7327f},
    {ip(153, 39, 163, 191), 44251, ip(202, 188, 127, 2), 1303, 0x5d1809c5, 0x10e828a2},
};

TEST(Rss, MicrosoftVectorsIpv4) {
  for (const Vector& v : kVectors) {
    EXPECT_EQ(hash_ipv4(kDefaultKey, v.src_ip, v.dst_ip), v.hash_ip) << std::hex << v.src_ip;
    EXPECT_EQ(hash_ipv4_l4(kDefaultKey, v.src_ip, v.dst_ip, v.src_port, v.dst_port), v.hash_tcp)
        << std::hex << v.src_ip;
  }
}

TEST(Rss, ToeplitzIsLinearInTheKeyWindow) {
  // One input bit selects the 32 key bits from its position: bit 0 the first four key bytes.
  const uint8_t first[12] = {0x80};
  EXPECT_EQ(toeplitz(kDefaultKey, first, sizeof first), 0x6d5a56dau);
  const uint8_t ninth[12] = {0, 0x80};
  EXPECT_EQ(toeplitz(kDefaultKey, ninth, sizeof ninth), 0x5a56da25u);
  const uint8_t zero[12] = {};
  EXPECT_EQ(toeplitz(kDefaultKey, zero, sizeof zero), 0u);
}

TEST(Rss, DefaultRetaIsRoundRobin) {
  const Reta r = default_reta(3);
  for (uint32_t i = 0; i < kRetaSize; i++)
    EXPECT_EQ(r[i], i % 3);
  const Reta one = default_reta(1);
  for (uint16_t q : one)
    EXPECT_EQ(q, 0);
  EXPECT_EQ(reta_queue(r, kRetaSize + 4), r[4]);  // the low bits pick the entry
}

TEST(Rss, PortForQueueLandsOnTheQueueAndIsTheFirst) {
  const uint32_t local = ip(10, 0, 0, 1), remote = ip(10, 0, 0, 2);
  for (uint16_t queues : {uint16_t(2), uint16_t(4), uint16_t(16)}) {
    const Reta reta = default_reta(queues);
    for (uint16_t q = 0; q < queues; q++) {
      std::set<uint32_t> seen;
      for (uint16_t start = 40000; start < 40200; start += 7) {
        const uint32_t p =
            port_for_queue(kDefaultKey, reta, local, remote, 5201, q, 32768, 60999, start);
        ASSERT_NE(p, kNoPort);
        ASSERT_GE(p, start);
        // The replies: from the remote to this port.
        EXPECT_EQ(reta_queue(reta, hash_ipv4_l4(kDefaultKey, remote, local, 5201, uint16_t(p))), q);
        for (uint32_t skipped = start; skipped < p; skipped++) {
          EXPECT_NE(
              reta_queue(reta, hash_ipv4_l4(kDefaultKey, remote, local, 5201, uint16_t(skipped))),
              q);
        }
        seen.insert(p);
      }
      EXPECT_GT(seen.size(), 1u);  // different starts spread the choice
    }
  }
}

TEST(Rss, PortForQueueWrapsAndRefuses) {
  const uint32_t local = ip(192, 168, 1, 1), remote = ip(192, 168, 1, 9);
  const Reta reta = default_reta(2);
  // From the top of the range it wraps to the bottom.
  const uint32_t p = port_for_queue(kDefaultKey, reta, local, remote, 80, 1, 1000, 1100, 1100);
  ASSERT_NE(p, kNoPort);
  EXPECT_TRUE(p == 1100 || p < 1100);
  // A queue no RETA entry names, an empty range, a start outside it: none.
  EXPECT_EQ(port_for_queue(kDefaultKey, reta, local, remote, 80, 2, 1000, 60000, 1000), kNoPort);
  EXPECT_EQ(port_for_queue(kDefaultKey, reta, local, remote, 80, 0, 2000, 1000, 1500), kNoPort);
  EXPECT_EQ(port_for_queue(kDefaultKey, reta, local, remote, 80, 0, 1000, 2000, 999), kNoPort);
}

}  // namespace
}  // namespace cleave::rss
