// demux_test.cc - the flow path's choice of ephemeral ports (RFC 6056 algorithm 4, demux.h),
// without DPDK: ports in the dynamic range, consecutive for one peer, unpredictable across
// peers and keys, what is taken skipped, and none when all are.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "lcore/demux.h"

namespace cleave::dp {
namespace {

constexpr uint32_t kLocal = 0x0A000001;  // 10.0.0.1
constexpr uint32_t kPeer = 0x0A000002;
constexpr uint8_t kTcp = 6;

auto any = [](uint16_t) { return true; };

uint16_t next_in_range(uint16_t p) {
  return p == 65535 ? EphemeralPorts::kFirst : uint16_t(p + 1);
}

TEST(EphemeralPorts, OnePeersPortsFollowEachOtherInTheDynamicRange) {
  EphemeralPorts e(1);
  uint16_t prev = e.pick(kTcp, kLocal, kPeer, 80, any);
  ASSERT_GE(prev, EphemeralPorts::kFirst);
  for (int i = 0; i < 20000; i++) {  // past a wrap of the range
    const uint16_t p = e.pick(kTcp, kLocal, kPeer, 80, any);
    ASSERT_GE(p, EphemeralPorts::kFirst);
    ASSERT_EQ(p, next_in_range(prev)) << i;
    prev = p;
  }
}

TEST(EphemeralPorts, PeersAndKeysStartEachWalkSomewhereElse) {
  EphemeralPorts e(1);
  std::set<uint16_t> first;
  for (uint16_t rport = 1; rport <= 200; rport++)
    first.insert(e.pick(kTcp, kLocal, kPeer, rport, any));
  // Sequential allocation would give 200 neighbours; a keyed offset spreads them over 16384.
  EXPECT_GT(first.size(), 190u);
  EXPECT_GT(*first.rbegin() - *first.begin(), 8000);
  // The address, the peer's port and the protocol each move the offset; so does the key.
  EphemeralPorts a(7), b(7), c(8);
  const uint16_t pa = a.pick(kTcp, kLocal, kPeer, 443, any);
  EXPECT_EQ(b.pick(kTcp, kLocal, kPeer, 443, any), pa) << "the same key walks the same way";
  std::vector<uint16_t> others = {
      EphemeralPorts(7).pick(kTcp, kLocal, kPeer + 1, 443, any),
      EphemeralPorts(7).pick(kTcp, kLocal + 1, kPeer, 443, any),
      EphemeralPorts(7).pick(kTcp, kLocal, kPeer, 444, any),
      EphemeralPorts(7).pick(17, kLocal, kPeer, 443, any),
      c.pick(kTcp, kLocal, kPeer, 443, any),
  };
  for (uint16_t p : others)
    EXPECT_NE(p, pa);
}

TEST(EphemeralPorts, SkipsWhatIsTakenAndGivesNoneWhenAllAre) {
  EphemeralPorts e(3), twin(3);
  const uint16_t free_first = twin.pick(kTcp, kLocal, kPeer, 80, any);
  // The first three of the walk are taken: the fourth comes back.
  std::set<uint16_t> taken = {free_first, next_in_range(free_first),
                              next_in_range(next_in_range(free_first))};
  const uint16_t p =
      e.pick(kTcp, kLocal, kPeer, 80, [&](uint16_t port) { return taken.count(port) == 0; });
  EXPECT_EQ(p, next_in_range(next_in_range(next_in_range(free_first))));
  uint32_t asked = 0;
  EXPECT_EQ(e.pick(kTcp, kLocal, kPeer, 80,
                   [&](uint16_t) {
                     asked++;
                     return false;
                   }),
            0);
  EXPECT_EQ(asked, EphemeralPorts::kCount) << "every port of the range once";
}

TEST(EphemeralPorts, TheSystemsKeysDifferPerInstance) {
  // Two instances with random keys agree on a peer's first port about once in 16384.
  int same = 0;
  for (int i = 0; i < 8; i++) {
    EphemeralPorts a, b;
    same += a.pick(kTcp, kLocal, kPeer, 80, any) == b.pick(kTcp, kLocal, kPeer, 80, any);
  }
  EXPECT_LT(same, 3);
}

}  // namespace
}  // namespace cleave::dp
