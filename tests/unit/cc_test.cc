// cc_test.cc - congestion control against the RFC formulas: NewReno, CUBIC, DCTCP, the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <string_view>

#include "transport/cc/cc.h"

namespace cleave::transport::cc {
namespace {

// Not the default 1460: an algorithm that ignores State::mss gets every number below wrong.
constexpr uint64_t kMss = 1000;
constexpr uint64_t kInfinite = ~0ull;

// RFC 9438 constants, restated here so that a wrong one in cubic.cc shows.
constexpr double kC = 0.4;
constexpr double kBeta = 0.7;
constexpr double kAlphaCubic = 3 * (1 - kBeta) / (1 + kBeta);
// RFC 8257 gain.
constexpr double kKeep = 1 - 1.0 / 16;

// One flow: its algorithm in its own storage, its window state, and a sender that keeps
// `flight` bytes ahead of the cumulative ACK, so that DCTCP's observation windows have a known
// length (the first one ACK longer: it opens at the first ACK).
class Flow {
 public:
  explicit Flow(std::string_view name) : alg_(construct(name, mem_)) {
    s.mss = static_cast<uint32_t>(kMss);
    if (alg_ != nullptr) alg_->init(s, 0);
  }
  ~Flow() {
    if (alg_ != nullptr) alg_->~Algorithm();
  }
  Flow(const Flow&) = delete;
  Flow& operator=(const Flow&) = delete;

  Algorithm& alg() { return *alg_; }

  void ack(uint64_t bytes, uint64_t ece = 0, bool recovery = false) {
    una += bytes;
    Ack a;
    a.now_ns = now_ns;
    a.acked = static_cast<uint32_t>(bytes);
    a.ece_acked = static_cast<uint32_t>(ece);
    a.rtt_us = rtt_us;
    a.snd_una = una;
    a.snd_nxt = una + flight;
    a.in_recovery = recovery;
    s.inflight = s.cwnd;
    alg_->on_ack(s, a);
  }

  // One RTT: an ACK per MSS of the window at its start, spread evenly over the RTT.
  void round() {
    const uint64_t n = s.cwnd / kMss;
    const uint64_t step = static_cast<uint64_t>(rtt_us) * 1000 / n;
    for (uint64_t i = 0; i < n; ++i) {
      now_ns += step;
      ack(kMss);
    }
  }
  void run_until(uint64_t end_ns) {
    while (now_ns < end_ns)
      round();
  }
  void set_rtt_us(uint32_t us) { rtt_us = s.srtt_us = s.min_rtt_us = us; }
  double segments() const { return static_cast<double>(s.cwnd) / kMss; }

  // DCTCP's alpha as its reduction shows it: an echo on a copy of the state with a huge window
  // (on_ecn changes nothing in the algorithm that the alpha tests look at).
  double implied_alpha() {
    State probe = s;
    probe.cwnd = 1ull << 40;
    alg_->on_ecn(probe, now_ns);
    return 2.0 * static_cast<double>((1ull << 40) - probe.cwnd) / static_cast<double>(1ull << 40);
  }

  State s;
  uint64_t now_ns = 0;
  uint32_t rtt_us = 0;
  uint64_t una = 0;
  uint64_t flight = 10 * kMss;

 private:
  Storage mem_{};
  Algorithm* alg_;
};

constexpr uint64_t seconds(double s) {
  return static_cast<uint64_t>(s * 1e9);
}

// --- the registry ---

TEST(CcRegistry, NamesListsTheThreeWithNewRenoFirst) {
  const auto n = names();
  ASSERT_EQ(n.size(), 3u);
  EXPECT_EQ(n[0], "newreno");
  EXPECT_EQ(n[1], "cubic");
  EXPECT_EQ(n[2], "dctcp");
}

TEST(CcRegistry, ConstructBuildsEachNamedAlgorithmInTheStorage) {
  for (std::string_view name : names()) {
    Storage mem{};
    Algorithm* a = construct(name, mem);
    ASSERT_NE(a, nullptr) << name;
    EXPECT_EQ(a->name(), name);
    const auto* p = reinterpret_cast<const unsigned char*>(a);
    EXPECT_TRUE(p >= mem.bytes && p < mem.bytes + kStorageBytes) << name;
    a->~Algorithm();
  }
}

TEST(CcRegistry, ConstructReturnsNullForUnknownNames) {
  for (std::string_view name : {"", "reno", "CUBIC", "newreno ", "bbr"}) {
    Storage mem{};
    EXPECT_EQ(construct(name, mem), nullptr) << '"' << name << '"';
  }
}

// --- what all three share: Reno's slow start, recovery, timeouts ---

class CcAll : public ::testing::TestWithParam<std::string> {};

TEST_P(CcAll, InitialWindowIsTenSegments) {
  Flow f(GetParam());
  EXPECT_EQ(f.s.cwnd, 10 * kMss);
  EXPECT_EQ(f.s.ssthresh, kInfinite);
  Storage mem{};
  State s;  // the default MSS
  Algorithm* a = construct(GetParam(), mem);
  a->init(s, 0);
  EXPECT_EQ(s.cwnd, 14600u);
  a->~Algorithm();
}

TEST_P(CcAll, SlowStartDoublesTheWindowEachRound) {
  Flow f(GetParam());
  f.set_rtt_us(1000);
  for (uint64_t expect : {20, 40, 80, 160}) {
    f.round();
    EXPECT_EQ(f.s.cwnd, expect * kMss);
  }
}

TEST_P(CcAll, SlowStartCountsEveryAckedByte) {
  Flow f(GetParam());
  f.ack(5 * kMss);  // a stretch ACK counts whole (Linux, not RFC 3465's L = 2)
  EXPECT_EQ(f.s.cwnd, 15 * kMss);
  f.ack(kMss / 2);
  EXPECT_EQ(f.s.cwnd, 15 * kMss + kMss / 2);
  // Delayed ACKs, one per two segments, still double the window in a round.
  f.s.cwnd = 10 * kMss;
  for (int i = 0; i < 5; ++i)
    f.ack(2 * kMss);
  EXPECT_EQ(f.s.cwnd, 20 * kMss);
}

TEST_P(CcAll, NoGrowthInRecovery) {
  Flow f(GetParam());
  for (int i = 0; i < 50; ++i)
    f.ack(kMss, 0, true);
  EXPECT_EQ(f.s.cwnd, 10 * kMss);  // not in slow start
  f.s.inflight = 20 * kMss;
  f.alg().on_loss(f.s, f.now_ns);
  const uint64_t after_loss = f.s.cwnd;
  for (int i = 0; i < 200; ++i) {
    f.now_ns += seconds(0.01);
    f.ack(kMss, 0, true);
  }
  EXPECT_EQ(f.s.cwnd, after_loss);  // nor in congestion avoidance
}

TEST_P(CcAll, TimeoutCollapsesToOneSegmentAndSlowStartsAgain) {
  Flow f(GetParam());
  f.s.cwnd = 40 * kMss;
  f.s.inflight = 40 * kMss;
  f.alg().on_rto(f.s, 0, true);
  EXPECT_EQ(f.s.cwnd, kMss);
  EXPECT_GT(f.s.ssthresh, kMss);
  f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 2 * kMss);
}

// An RTO inside a loss episode (in recovery, or backed off) collapses the window but keeps the
// ssthresh the episode set: one reduction per window of data.
TEST_P(CcAll, TimeoutInsideAnEpisodeKeepsSsthresh) {
  Flow f(GetParam());
  f.s.cwnd = 40 * kMss;
  f.s.inflight = 40 * kMss;
  f.alg().on_loss(f.s, 0);
  const uint64_t ssthresh = f.s.ssthresh;
  f.s.inflight = kMss;  // recovery has emptied the flight
  f.alg().on_rto(f.s, 0, false);
  EXPECT_EQ(f.s.cwnd, kMss);
  EXPECT_EQ(f.s.ssthresh, ssthresh);
  f.alg().on_rto(f.s, 0, false);  // backed off
  EXPECT_EQ(f.s.ssthresh, ssthresh);
  f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 2 * kMss);  // slow start again
}

TEST_P(CcAll, RecoveryEndDeflatesToSsthresh) {
  Flow f(GetParam());
  f.s.cwnd = 40 * kMss;
  f.s.inflight = 40 * kMss;
  f.alg().on_loss(f.s, 0);
  const uint64_t ssthresh = f.s.ssthresh;
  EXPECT_LT(ssthresh, 40 * kMss);
  f.s.cwnd += 5 * kMss;  // the transport inflated it for the duplicate ACKs
  f.alg().on_recovery_end(f.s, 0);
  EXPECT_EQ(f.s.cwnd, ssthresh);
  EXPECT_EQ(f.s.ssthresh, ssthresh);
}

INSTANTIATE_TEST_SUITE_P(All, CcAll, ::testing::Values("newreno", "cubic", "dctcp"));

// --- NewReno ---

TEST(NewReno, CongestionAvoidanceAddsOneSegmentPerWindowOfBytes) {
  Flow f("newreno");
  f.s.cwnd = f.s.ssthresh = 20 * kMss;
  for (int i = 0; i < 19; ++i)
    f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 20 * kMss);
  f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 21 * kMss);
  for (int i = 0; i < 21; ++i)
    f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 22 * kMss);
  for (int i = 0; i < 11; ++i)
    f.ack(2 * kMss);  // delayed ACKs count the same bytes
  EXPECT_EQ(f.s.cwnd, 23 * kMss);
  // Stretch ACKs: bytes beyond one window carry over to the next MSS.
  f.ack(15 * kMss);
  EXPECT_EQ(f.s.cwnd, 23 * kMss);
  f.ack(15 * kMss);  // 30 of 23: +1, 7 carried
  EXPECT_EQ(f.s.cwnd, 24 * kMss);
  f.ack(17 * kMss);  // 7 + 17 = 24: +1
  EXPECT_EQ(f.s.cwnd, 25 * kMss);
  // A hundred rounds later: one segment per round.
  f.set_rtt_us(1000);
  for (int i = 0; i < 100; ++i)
    f.round();
  EXPECT_EQ(f.s.cwnd, 125 * kMss);
}

TEST(NewReno, SlowStartStopsAtSsthreshAndCarriesTheRest) {
  Flow f("newreno");
  f.s.ssthresh = 15 * kMss;
  f.ack(2 * kMss);
  f.ack(2 * kMss);
  EXPECT_EQ(f.s.cwnd, 14 * kMss);
  f.ack(2 * kMss);  // one segment reaches ssthresh, the other counts toward the next
  EXPECT_EQ(f.s.cwnd, 15 * kMss);
  for (int i = 0; i < 13; ++i)
    f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 15 * kMss);
  f.ack(kMss);
  EXPECT_EQ(f.s.cwnd, 16 * kMss);
}

TEST(NewReno, LossHalvesTheFlight) {
  Flow f("newreno");
  f.s.cwnd = 32 * kMss;
  f.s.inflight = 30 * kMss;
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.ssthresh, 15 * kMss);
  EXPECT_EQ(f.s.cwnd, 15 * kMss);
  f.s.inflight = 3 * kMss;  // never below two segments
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.ssthresh, 2 * kMss);
  EXPECT_EQ(f.s.cwnd, 2 * kMss);
}

TEST(NewReno, EcnEchoReducesLikeALoss) {
  Flow f("newreno");
  f.s.cwnd = 32 * kMss;
  f.s.inflight = 26 * kMss;
  f.alg().on_ecn(f.s, 0);
  EXPECT_EQ(f.s.ssthresh, 13 * kMss);
  EXPECT_EQ(f.s.cwnd, 13 * kMss);
}

TEST(NewReno, TimeoutTakesSsthreshFromTheFlight) {
  Flow f("newreno");
  f.s.cwnd = 50 * kMss;
  f.s.inflight = 40 * kMss;
  f.alg().on_rto(f.s, 0, true);
  EXPECT_EQ(f.s.ssthresh, 20 * kMss);
  EXPECT_EQ(f.s.cwnd, kMss);
}

// --- CUBIC ---

// W_cubic(t) in segments (RFC 9438 equation 1).
double w_cubic(double t, double w_max, double k) {
  return kC * std::pow(t - k, 3) + w_max;
}

TEST(Cubic, LossLeavesSeventyPercentOfTheWindow) {
  Flow f("cubic");
  f.s.cwnd = 100 * kMss;
  f.s.inflight = 60 * kMss;  // CUBIC reduces from cwnd, not from the flight
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.cwnd, 70 * kMss);
  EXPECT_EQ(f.s.ssthresh, 70 * kMss);
  f.s.cwnd = 2 * kMss;
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.cwnd, 2 * kMss);
  f.s.cwnd = 50 * kMss;
  f.alg().on_ecn(f.s, 0);
  EXPECT_EQ(f.s.cwnd, 35 * kMss);
}

TEST(Cubic, TimeoutKeepsSeventyPercentAsSsthresh) {
  Flow f("cubic");
  f.s.cwnd = 100 * kMss;
  f.s.inflight = 60 * kMss;
  f.alg().on_rto(f.s, 0, true);
  EXPECT_EQ(f.s.ssthresh, 70 * kMss);
  EXPECT_EQ(f.s.cwnd, kMss);
}

// After a loss at W_max = 1000 segments over a 100 ms path, where the cubic curve dominates
// Reno's: K = cbrt(W_max (1 - beta) / C) seconds after the epoch starts the window is back at
// W_max, and it follows the curve on the way.
class CubicCurve : public ::testing::Test {
 protected:
  void SetUp() override {
    f.set_rtt_us(100'000);
    f.s.srtt_us = 200'000;  // queueing: the aim one RTT ahead must use the minimum
    f.s.cwnd = static_cast<uint64_t>(kWmax) * kMss;
    f.alg().on_loss(f.s, f.now_ns);
    start_ns = f.now_ns;
  }
  double at(double t) {
    f.run_until(start_ns + seconds(t));
    return f.segments();
  }

  static constexpr double kWmax = 1000;
  const double k = std::cbrt(kWmax * (1 - kBeta) / kC);  // 9.09 s
  Flow f{"cubic"};
  uint64_t start_ns = 0;
};

TEST_F(CubicCurve, ReturnsToWmaxAtK) {
  EXPECT_EQ(f.s.cwnd, 700 * kMss);
  EXPECT_NEAR(k, 9.0856, 1e-3);
  EXPECT_NEAR(at(k), kWmax, 0.01 * kWmax);
}

TEST_F(CubicCurve, FollowsTheCubicFunction) {
  // Each ACK closes part of the gap to W_cubic(t + RTT) (section 4.2), so the window runs
  // between the curve now and the curve one RTT ahead.
  const double rtt = 0.1;
  for (double t : {0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 11.0, 12.0}) {
    const double w = at(t);
    EXPECT_GT(w, w_cubic(t, kWmax, k) * 0.998) << "t = " << t;
    EXPECT_LT(w, w_cubic(t + rtt, kWmax, k) * 1.002) << "t = " << t;
  }
}

TEST_F(CubicCurve, ConcaveBeforeKConvexAfter) {
  const double w0 = at(0.5);
  const double w1 = at(1.5);
  const double wk1 = at(k - 1);
  const double wk = at(k);
  const double wk2 = at(k + 1);
  const double wk3 = at(k + 2);
  EXPECT_GT(w1 - w0, 4 * (wk - wk1));    // fast far below W_max, slow near it
  EXPECT_LT(wk, kWmax * 1.01);           // a plateau around W_max
  EXPECT_GT(wk3 - wk2, 2 * (wk2 - wk));  // then probing faster and faster
  EXPECT_GT(wk3, kWmax + 1.0);
}

TEST(Cubic, FastConvergenceLowersWmaxAfterALossBelowIt) {
  Flow f("cubic");
  f.set_rtt_us(100'000);
  f.s.cwnd = 1000 * kMss;
  f.alg().on_loss(f.s, 0);  // W_max = 1000
  f.run_until(seconds(3));  // back to about 910 only: a newcomer takes bandwidth
  const double c2 = f.segments();
  ASSERT_LT(c2, 950);
  f.alg().on_loss(f.s, f.now_ns);
  EXPECT_NEAR(f.segments(), c2 * kBeta, 0.001);
  // W_max = c2 (1 + beta) / 2, K = cbrt((W_max - beta c2) / C), time from the new epoch: the
  // plateau comes sooner and lower than c2, where it would be without fast convergence.
  const double w_max = c2 * (1 + kBeta) / 2;
  const double k = std::cbrt((w_max - c2 * kBeta) / kC);
  const uint64_t start = f.now_ns;
  for (double t : {k / 2, k}) {
    f.run_until(start + seconds(t));
    EXPECT_GT(f.segments(), w_cubic(t, w_max, k) * 0.998) << "t = " << t;
    EXPECT_LT(f.segments(), w_cubic(t + 0.1, w_max, k) * 1.002) << "t = " << t;
  }
}

// Section 4.2: the target is clamped to 1.5 cwnd, so no RTT more than multiplies the window by
// 1.5. A long RTT on a small window runs far into the convex part where the clamp binds.
TEST(Cubic, GrowsAtMostHalfAWindowPerRtt) {
  Flow f("cubic");
  f.set_rtt_us(2'000'000);
  f.s.cwnd = 10 * kMss;
  f.alg().on_loss(f.s, 0);
  bool bound = false;
  for (int i = 0; i < 6; ++i) {
    const double before = f.segments();
    f.round();
    EXPECT_LE(f.segments(), 1.5 * before + 0.01) << "round " << i;
    bound = bound || f.segments() > 1.49 * before;
  }
  EXPECT_TRUE(bound);
}

TEST(Cubic, LossAboveWmaxTakesTheWholeWindow) {
  Flow f("cubic");
  f.set_rtt_us(100'000);
  f.s.cwnd = 1000 * kMss;
  f.alg().on_loss(f.s, 0);
  f.s.cwnd = 1200 * kMss;
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.cwnd, 840 * kMss);
  const double k = std::cbrt(1200 * (1 - kBeta) / kC);
  f.run_until(seconds(k));
  EXPECT_NEAR(f.segments(), 1200, 12);
}

TEST(Cubic, RenoFriendlyRegionRulesAtShortRttAndSmallWindows) {
  Flow f("cubic");
  f.set_rtt_us(1000);
  f.s.cwnd = 20 * kMss;
  f.alg().on_loss(f.s, 0);
  // Reno from 14 segments: alpha_cubic per RTT until W_est reaches cwnd_prior (20), then 1.
  double reno = 14;
  for (int i = 0; i < 200; ++i) {
    f.round();
    reno += reno >= 20 ? 1 : kAlphaCubic;
    if (i == 9) {
      EXPECT_NEAR(f.segments(), reno, 0.03 * reno);  // 19.3, still below cwnd_prior
    }
  }
  const double cubic_alone = w_cubic(0.2, 20, std::cbrt(20 * (1 - kBeta) / kC));  // ~15.4
  EXPECT_NEAR(f.segments(), reno, 0.03 * reno);
  EXPECT_GT(f.segments(), 10 * cubic_alone);
}

TEST(Cubic, TimeoutRestartsTheCurveAtTheNewWindow) {
  Flow f("cubic");
  f.set_rtt_us(100'000);
  f.s.cwnd = 1000 * kMss;
  f.alg().on_loss(f.s, 0);
  f.run_until(seconds(2));
  const uint64_t before = f.s.cwnd;
  f.alg().on_rto(f.s, f.now_ns, true);
  ASSERT_EQ(f.s.ssthresh, static_cast<uint64_t>(static_cast<double>(before) * kBeta));
  ASSERT_EQ(f.s.cwnd, kMss);
  while (f.s.cwnd < f.s.ssthresh) {
    f.now_ns += seconds(0.001);
    f.ack(kMss);
  }
  // Section 4.8: K = 0 and W_max = the window where congestion avoidance began, so the curve is
  // convex from here. Keeping the old W_max (1000) would put cwnd near 980 by t = 6 s.
  const uint64_t ca_start = f.now_ns;
  const double w0 = f.segments();
  f.run_until(ca_start + seconds(6));
  const double expect = w_cubic(6, w0, 0);
  EXPECT_NEAR(f.segments(), expect, 0.02 * expect);
}

// --- DCTCP ---

TEST(Dctcp, FirstEchoHalvesTheWindow) {
  Flow f("dctcp");
  f.alg().on_ecn(f.s, 0);  // alpha starts at 1
  EXPECT_EQ(f.s.cwnd, 5 * kMss);
  EXPECT_EQ(f.s.ssthresh, 5 * kMss);
}

TEST(Dctcp, AlphaDecaysOncePerUnmarkedWindow) {
  Flow f("dctcp");
  f.ack(kMss);  // opens the first window: it ends when snd_una reaches 11 segments
  EXPECT_DOUBLE_EQ(f.implied_alpha(), 1.0);
  for (int i = 2; i <= 10; ++i)
    f.ack(kMss);
  EXPECT_DOUBLE_EQ(f.implied_alpha(), 1.0);
  f.ack(kMss);
  EXPECT_NEAR(f.implied_alpha(), kKeep, 1e-9);
  for (int i = 12; i <= 20; ++i)
    f.ack(kMss);
  EXPECT_NEAR(f.implied_alpha(), kKeep, 1e-9);
  f.ack(kMss);
  EXPECT_NEAR(f.implied_alpha(), kKeep * kKeep, 1e-9);
  for (int i = 0; i < 10 * 28; ++i)
    f.ack(kMss);
  EXPECT_NEAR(f.implied_alpha(), std::pow(kKeep, 30), 1e-9);
}

TEST(Dctcp, AlphaRisesTowardOneWhenEveryByteIsMarked) {
  Flow f("dctcp");
  for (int i = 0; i < 1 + 10 * 20; ++i)
    f.ack(kMss);
  const double low = std::pow(kKeep, 20);
  EXPECT_NEAR(f.implied_alpha(), low, 1e-9);
  for (int i = 0; i < 10 * 20; ++i)
    f.ack(kMss, kMss);
  EXPECT_NEAR(f.implied_alpha(), 1 - (1 - low) * std::pow(kKeep, 20), 1e-9);
}

TEST(Dctcp, AlphaConvergesToTheMarkedFractionOfBytes) {
  Flow f("dctcp");
  f.flight = 40 * kMss;  // ACKs of four segments, one of them marked: F = 0.25
  for (int i = 0; i < 1 + 10 * 100; ++i)
    f.ack(4 * kMss, kMss);
  EXPECT_NEAR(f.implied_alpha(), 0.25 + 0.75 * std::pow(kKeep, 100), 1e-9);
  EXPECT_NEAR(f.implied_alpha(), 0.25, 0.002);
}

TEST(Dctcp, EchoCutsByHalfAlpha) {
  Flow f("dctcp");
  f.s.ssthresh = f.s.cwnd;  // grow slowly, the window is not the point
  for (int i = 0; i < 1 + 10 * 10; ++i)
    f.ack(kMss);
  const double alpha = std::pow(kKeep, 10);  // 0.52
  const double before = static_cast<double>(f.s.cwnd);
  f.alg().on_ecn(f.s, 0);
  EXPECT_NEAR(static_cast<double>(f.s.cwnd), before * (1 - alpha / 2), 1.0);
  EXPECT_EQ(f.s.ssthresh, f.s.cwnd);
}

TEST(Dctcp, NoCutOnceAlphaHasDecayedAway) {
  Flow f("dctcp");
  for (int i = 0; i < 1 + 10 * 700; ++i)  // alpha = (15/16)^700, about 2e-20
    f.ack(kMss);
  const uint64_t before = f.s.cwnd;
  f.alg().on_ecn(f.s, 0);
  EXPECT_EQ(f.s.cwnd, before);
  EXPECT_EQ(f.s.ssthresh, before);
}

TEST(Dctcp, MarkedFractionIsMeasuredDuringRecovery) {
  Flow f("dctcp");
  for (int i = 0; i < 1 + 10 * 4; ++i)
    f.ack(kMss, 0, true);
  EXPECT_EQ(f.s.cwnd, 10 * kMss);
  EXPECT_NEAR(f.implied_alpha(), std::pow(kKeep, 4), 1e-9);
}

TEST(Dctcp, LossAndTimeoutAsNewReno) {
  Flow f("dctcp");
  f.s.cwnd = 32 * kMss;
  f.s.inflight = 30 * kMss;
  f.alg().on_loss(f.s, 0);
  EXPECT_EQ(f.s.cwnd, 15 * kMss);
  EXPECT_EQ(f.s.ssthresh, 15 * kMss);
  f.s.inflight = 40 * kMss;
  f.alg().on_rto(f.s, 0, true);
  EXPECT_EQ(f.s.ssthresh, 20 * kMss);
  EXPECT_EQ(f.s.cwnd, kMss);
}

}  // namespace
}  // namespace cleave::transport::cc
