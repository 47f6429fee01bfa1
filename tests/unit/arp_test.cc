// arp_test.cc - the neighbour cache state machine with a fake clock and a fake wire.
#include <gtest/gtest.h>

#include <vector>

#include "lcore/arp.h"

namespace cleave::dp {
namespace {

struct Sent {
  uint8_t port;
  Ipv4 target;
  bool unicast;
  Mac dst;
};

class FakeIo final : public ArpIo {
 public:
  void arp_send_request(uint8_t port, Ipv4 target, const Mac* dst) override {
    sent.push_back({port, target, dst != nullptr, dst != nullptr ? *dst : Mac{}});
  }
  std::vector<Sent> sent;
};

constexpr uint64_t kMs = 1000;  // cycles per millisecond in this test

class ArpTest : public ::testing::Test {
 protected:
  ArpTest() { reset(ArpParams{16, 3, 30000 * kMs, 1000 * kMs, 5000 * kMs}); }

  void reset(const ArpParams& p) {
    table.reset();
    wheel = std::make_unique<TimerWheel>(kMs / 10, 0, 1024);
    stats = ProtoStats{};
    io.sent.clear();
    now = 0;
    table = std::make_unique<ArpTable>(p, *wheel, io, stats);
  }
  void run_for(uint64_t ms) {
    uint64_t end = now + ms * kMs;
    while (now < end) {
      now += kMs / 10;
      wheel->advance(now);
    }
  }
  ArpState state(Ipv4 ip) { return table->find(0, ip)->state; }

  FakeIo io;
  ProtoStats stats;
  std::unique_ptr<TimerWheel> wheel;
  std::unique_ptr<ArpTable> table;
  uint64_t now = 0;
  const Ipv4 kPeer{0x0a000002};
  const Mac kPeerMac = *Mac::parse("02:00:00:00:00:02");
};

TEST_F(ArpTest, UnknownNeighbourIsResolvedByBroadcast) {
  EXPECT_EQ(table->resolve(0, kPeer, now), nullptr);
  ASSERT_EQ(io.sent.size(), 1u);
  EXPECT_EQ(io.sent[0].target, kPeer);
  EXPECT_FALSE(io.sent[0].unicast);
  EXPECT_EQ(state(kPeer), ArpState::kIncomplete);
  EXPECT_EQ(table->resolve(0, kPeer, now), nullptr);  // no second request while waiting
  EXPECT_EQ(io.sent.size(), 1u);

  run_for(10);
  table->learn(0, kPeer, kPeerMac, false, now);
  const Mac* m = table->resolve(0, kPeer, now);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(*m, kPeerMac);
  EXPECT_EQ(stats.arp_resolved, 1u);
}

TEST_F(ArpTest, RetriesThenFailsThenForgets) {
  table->resolve(0, kPeer, now);
  run_for(999);
  EXPECT_EQ(io.sent.size(), 1u);
  run_for(1);
  EXPECT_EQ(io.sent.size(), 2u);
  run_for(1000);
  EXPECT_EQ(io.sent.size(), 3u);  // retries = 3 requests in all
  EXPECT_EQ(state(kPeer), ArpState::kIncomplete);
  run_for(1000);
  EXPECT_EQ(io.sent.size(), 3u);
  EXPECT_EQ(state(kPeer), ArpState::kFailed);
  EXPECT_EQ(stats.arp_failed, 1u);
  EXPECT_EQ(table->resolve(0, kPeer, now), nullptr);  // fails fast, no new request
  EXPECT_EQ(io.sent.size(), 3u);
  run_for(5000);  // failed_hold
  EXPECT_EQ(table->find(0, kPeer), nullptr);
  EXPECT_EQ(table->size(), 0u);
}

TEST_F(ArpTest, PinnedNeighbourIsRetriedForever) {
  table->pin(0, kPeer, now);
  run_for(3000 + 5000);  // three requests, failure, hold
  EXPECT_EQ(state(kPeer), ArpState::kIncomplete);
  EXPECT_EQ(io.sent.size(), 4u);
  table->learn(0, kPeer, kPeerMac, false, now);
  EXPECT_EQ(state(kPeer), ArpState::kReachable);
  EXPECT_TRUE(table->find(0, kPeer)->pinned);
}

TEST_F(ArpTest, UnusedEntryExpires) {
  table->learn(0, kPeer, kPeerMac, true, now);
  EXPECT_TRUE(io.sent.empty());
  run_for(30000);
  EXPECT_EQ(table->find(0, kPeer), nullptr);
  EXPECT_TRUE(io.sent.empty());
}

TEST_F(ArpTest, UsedEntryIsRefreshedByUnicastAndStaysUsable) {
  table->learn(0, kPeer, kPeerMac, true, now);
  run_for(100);
  ASSERT_NE(table->resolve(0, kPeer, now), nullptr);
  run_for(29900);
  ASSERT_EQ(io.sent.size(), 1u);
  EXPECT_TRUE(io.sent[0].unicast);
  EXPECT_EQ(io.sent[0].dst, kPeerMac);
  EXPECT_EQ(state(kPeer), ArpState::kRefreshing);
  EXPECT_NE(table->resolve(0, kPeer, now), nullptr);  // still usable while refreshing
  table->learn(0, kPeer, *Mac::parse("02:00:00:00:00:99"), false, now);
  EXPECT_EQ(state(kPeer), ArpState::kReachable);
  EXPECT_EQ(table->resolve(0, kPeer, now)->str(), "02:00:00:00:00:99");
}

TEST_F(ArpTest, RefreshWithoutAnswerFails) {
  table->learn(0, kPeer, kPeerMac, true, now);
  table->resolve(0, kPeer, now);
  run_for(30000 + 3000);
  EXPECT_EQ(io.sent.size(), 3u);
  EXPECT_TRUE(io.sent[0].unicast);
  EXPECT_FALSE(io.sent[1].unicast);
  EXPECT_EQ(state(kPeer), ArpState::kFailed);
  EXPECT_EQ(table->resolve(0, kPeer, now), nullptr);
}

TEST_F(ArpTest, LearnCreatesOnlyWhenAsked) {
  table->learn(0, kPeer, kPeerMac, false, now);
  EXPECT_EQ(table->find(0, kPeer), nullptr);
  table->learn(0, kPeer, kPeerMac, true, now);
  ASSERT_NE(table->find(0, kPeer), nullptr);
  EXPECT_EQ(table->find(1, kPeer), nullptr);  // per port
}

TEST_F(ArpTest, FullTableCountsAndRecovers) {
  for (uint32_t i = 0; i < 16; i++)
    table->learn(0, Ipv4{0x0a000100 + i}, kPeerMac, true, now);
  EXPECT_EQ(table->size(), 16u);
  EXPECT_EQ(table->resolve(0, kPeer, now), nullptr);
  EXPECT_EQ(stats.arp_table_full, 1u);
  EXPECT_TRUE(io.sent.empty());
  run_for(30000);  // all unused: expire
  EXPECT_EQ(table->size(), 0u);
  table->resolve(0, kPeer, now);
  EXPECT_EQ(io.sent.size(), 1u);
}

TEST_F(ArpTest, ManyEntriesInsertAndRemoveCleanly) {
  for (int round = 0; round < 3; round++) {
    for (uint32_t i = 0; i < 16; i++)
      table->resolve(static_cast<uint8_t>(i % 2), Ipv4{i}, now);
    EXPECT_EQ(table->size(), 16u);
    size_t seen = 0;
    table->for_each([&](const ArpEntry&) { seen++; });
    EXPECT_EQ(seen, 16u);
    run_for(3000 + 5000 + 1);
    EXPECT_EQ(table->size(), 0u);
  }
}

}  // namespace
}  // namespace cleave::dp
