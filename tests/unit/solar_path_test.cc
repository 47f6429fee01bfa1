// solar_path_test.cc - one Solar path's sender state (src/transport/solar/solar_path.h): the
// window a path opens with and what it lets out, RTT and RTO by RFC 6298's formulas worked by
// hand, DCTCP's cut by the smoothed marked fraction (g = 1/16, recomputed here), one reduction
// per window of data, k timeouts in a row taking the path down and a probe bringing it back.
#include <gtest/gtest.h>

#include <cstdint>

#include "transport/solar/solar_path.h"

namespace cleave::transport::solar {
namespace {

constexpr uint32_t kBlock = 4096;
constexpr uint64_t kUs = 1000;

PathConfig config() {
  PathConfig c;
  c.block_bytes = kBlock;
  c.down_after_timeouts = 3;
  c.initial_rto_ns = 10'000 * kUs;
  c.min_rto_ns = 50 * kUs;
  c.max_rto_ns = 1'000'000 * kUs;
  c.probe_interval_ns = 5'000 * kUs;
  return c;
}

// Sends `n` blocks; false as soon as the window has no room for one.
bool send(PathState& p, uint32_t n) {
  for (uint32_t i = 0; i < n; i++) {
    if (!p.can_send(kBlock)) return false;
    p.on_send(kBlock);
  }
  return true;
}

PathAck ack(uint32_t blocks, uint32_t ce = 0, uint64_t rtt_ns = 0, uint64_t now = 0) {
  PathAck a;
  a.now_ns = now;
  a.acked_bytes = uint64_t(blocks) * kBlock;
  a.acked_blocks = blocks;
  a.ce_blocks = ce;
  a.rtt_ns = rtt_ns;
  return a;
}

TEST(SolarPath, StartsUpWithTenBlocksOfWindow) {
  PathState p(config(), 0);
  EXPECT_TRUE(p.up());
  EXPECT_EQ(p.cwnd(), 10u * kBlock);  // RFC 6928's ten segments
  EXPECT_TRUE(send(p, 10));
  EXPECT_EQ(p.inflight(), 10u * kBlock);
  EXPECT_FALSE(p.can_send(kBlock));
  EXPECT_TRUE(p.can_send(0));
  // Slow start: ten blocks acknowledged open ten more, twenty in all.
  p.on_ack(ack(10));
  EXPECT_EQ(p.inflight(), 0u);
  EXPECT_EQ(p.cwnd(), 20u * kBlock);
  EXPECT_TRUE(send(p, 20));
  EXPECT_FALSE(send(p, 1));
}

TEST(SolarPath, RttAndRtoFollowRfc6298) {
  PathState p(config(), 0);
  EXPECT_EQ(p.rto_ns(), 10'000 * kUs) << "the initial RTO before any sample";
  send(p, 2);
  p.on_ack(ack(1, 0, 100 * kUs));
  EXPECT_EQ(p.srtt_ns(), 100 * kUs);
  EXPECT_EQ(p.rto_ns(), 300 * kUs);  // 100 + 4 * 50
  p.on_ack(ack(1, 0, 200 * kUs));
  // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5.
  EXPECT_EQ(p.srtt_ns(), 112'500u);
  EXPECT_EQ(p.rto_ns(), 112'500u + 4 * 62'500u);
  // Each timeout in a row doubles it; an acknowledgment ends the backoff.
  send(p, 1);
  p.on_timeout(0);
  EXPECT_EQ(p.rto_ns(), 2 * 362'500u);
  p.on_timeout(0);
  EXPECT_EQ(p.rto_ns(), 4 * 362'500u);
  send(p, 1);
  p.on_ack(ack(1));
  EXPECT_EQ(p.rto_ns(), 362'500u);

  // The floor and the ceiling.
  PathState q(config(), 0);
  send(q, 1);
  q.on_ack(ack(1, 0, 1 * kUs));
  EXPECT_EQ(q.rto_ns(), 50 * kUs);
  for (int i = 0; i < 40; i++)
    q.on_timeout(0);
  EXPECT_EQ(q.rto_ns(), 1'000'000 * kUs);
}

// DCTCP's alpha and cut recomputed here (RFC 8257: alpha = (1 - g) alpha + g F per window of
// data, cwnd = cwnd (1 - alpha / 2) on a mark, at most once per window).
TEST(SolarPath, CeMarksCutTheWindowByHalfTheSmoothedMarkedFraction) {
  PathState p(config(), 0);
  double alpha = 1;  // DCTCP's start: every byte taken as marked
  // The first ACK opens DCTCP's first observation window (no sample yet).
  ASSERT_TRUE(send(p, 10));
  p.on_ack(ack(10));
  ASSERT_EQ(p.cwnd(), 20u * kBlock);
  // A window with no marks: alpha decays, nothing is cut, slow start goes on.
  ASSERT_TRUE(send(p, 20));
  p.on_ack(ack(20));
  alpha = (1 - 1.0 / 16) * alpha;
  ASSERT_EQ(p.cwnd(), 40u * kBlock);
  // Half of the next window marked: alpha moves towards 1/2 and the window is cut by alpha/2
  // once, after the ACK's growth.
  ASSERT_TRUE(send(p, 40));
  p.on_ack(ack(20, 10));
  alpha = (1 - 1.0 / 16) * alpha + 1.0 / 16 * 0.5;
  uint64_t cwnd = 60u * kBlock;
  cwnd -= uint64_t(double(cwnd) * alpha / 2);
  EXPECT_EQ(p.cwnd(), cwnd);
  // The rest of that window, marked too: no second cut (only growth, now in congestion
  // avoidance, under one block).
  p.on_ack(ack(20, 20));
  EXPECT_GE(p.cwnd(), cwnd);
  EXPECT_LT(p.cwnd(), cwnd + kBlock);
  EXPECT_EQ(p.inflight(), 0u);
  // Data sent after the cut, marked: the next window may cut again.
  const uint64_t before = p.cwnd();
  ASSERT_TRUE(send(p, 5));
  p.on_ack(ack(5, 5));
  EXPECT_LT(p.cwnd(), before);
}

TEST(SolarPath, LossCutsOncePerWindow) {
  PathState p(config(), 0);
  ASSERT_TRUE(send(p, 10));
  p.on_loss(kBlock, 0);
  EXPECT_EQ(p.inflight(), 9u * kBlock);
  EXPECT_EQ(p.cwnd(), 5u * kBlock) << "half the window";  // NewReno's ssthresh of 10 blocks
  p.on_loss(kBlock, 0);
  EXPECT_EQ(p.cwnd(), 5u * kBlock) << "the same window: no second cut";
  EXPECT_EQ(p.inflight(), 8u * kBlock);
  p.on_loss(100u * kBlock, 0);
  EXPECT_EQ(p.inflight(), 0u) << "never below nothing";
}

// A refused block (a NACK) arrived: no longer in flight, but neither an ACK nor a loss.
TEST(SolarPath, ARefusedBlockLeavesTheWindowAlone) {
  PathState p(config(), 0);
  ASSERT_TRUE(send(p, 10));
  p.on_refused(kBlock);
  EXPECT_EQ(p.inflight(), 9u * kBlock);
  EXPECT_EQ(p.cwnd(), 10u * kBlock);
  p.on_refused(100u * kBlock);
  EXPECT_EQ(p.inflight(), 0u);
  EXPECT_EQ(p.cwnd(), 10u * kBlock);
}

TEST(SolarPath, KTimeoutsInARowTakeThePathDownAndAProbeBringsItBack) {
  PathState p(config(), 0);
  ASSERT_TRUE(send(p, 10));
  EXPECT_FALSE(p.on_timeout(1));
  EXPECT_EQ(p.cwnd(), kBlock) << "one block after a timeout";
  EXPECT_EQ(p.inflight(), 0u) << "what was in flight is lost";
  EXPECT_FALSE(p.on_timeout(2));
  EXPECT_EQ(p.consecutive_timeouts(), 2u);
  // An acknowledgment in between: the count starts again.
  ASSERT_TRUE(send(p, 1));
  p.on_ack(ack(1));
  EXPECT_EQ(p.consecutive_timeouts(), 0u);
  EXPECT_FALSE(p.on_timeout(3));
  EXPECT_FALSE(p.on_timeout(4));
  EXPECT_TRUE(p.up());
  EXPECT_TRUE(p.on_timeout(5)) << "the third in a row";
  EXPECT_FALSE(p.up());
  EXPECT_FALSE(p.can_send(kBlock));
  EXPECT_FALSE(p.on_timeout(6)) << "already down";

  // Probed at once, then every probe interval until a reply.
  EXPECT_TRUE(p.probe_due(6));
  p.on_probe_sent(6);
  EXPECT_FALSE(p.probe_due(6 + 5'000 * kUs - 1));
  EXPECT_TRUE(p.probe_due(6 + 5'000 * kUs));
  // A late ACK of old data neither brings it back nor opens its window.
  p.on_ack(ack(1));
  EXPECT_FALSE(p.up());
  p.on_probe_reply(7, 80 * kUs);
  EXPECT_TRUE(p.up());
  EXPECT_FALSE(p.probe_due(100 * 5'000 * kUs));
  EXPECT_EQ(p.consecutive_timeouts(), 0u);
  EXPECT_EQ(p.cwnd(), 10u * kBlock) << "a fresh window";
  EXPECT_EQ(p.rto_ns(), 240 * kUs) << "the probe's RTT (80 + 4 * 40), no backoff";
  EXPECT_TRUE(send(p, 10));
}

}  // namespace
}  // namespace cleave::transport::solar
