// dcqcn_test.cc - DCQCN's reaction and notification points against the paper's formulas, the
// pacer's long-run rate and burst, the operator parameters, and one sender through a bottleneck.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include "transport/cc/dcqcn.h"
#include "transport/cc/pacer.h"

namespace cleave::transport::cc {
namespace {

// The reference's numbers, restated so that a wrong default in dcqcn.h shows.
constexpr double kG = 1.0 / 256;
constexpr double kAlpha0 = 1023.0 / 1024;
constexpr uint64_t kUs = 1000;
constexpr uint64_t kK = 55 * kUs;
constexpr uint64_t kT = 55 * kUs;
constexpr uint64_t kB = 10ull << 20;
constexpr int kF = 5;
constexpr double kRai = 40e6;
constexpr double kRhai = 400e6;
constexpr double kLine = 100e9;
constexpr double kMin = 1e6;
constexpr uint64_t kMonitor = 4 * kUs;

// Rates agree within this fraction: alpha is Q20, so a cut may differ by R_C * 2^-21 per step.
constexpr double kRel = 1e-5;

double rate(const DcqcnRp& rp) {
  return static_cast<double>(rp.rate_bps());
}
double target(const DcqcnRp& rp) {
  return static_cast<double>(rp.target_bps());
}

TEST(DcqcnParams, DefaultsAreTheReferences) {
  DcqcnParams p;
  EXPECT_EQ(p.g, (1u << 20) / 256);
  EXPECT_EQ(p.alpha_init, (1u << 20) / 1024 * 1023);
  EXPECT_EQ(p.alpha_timer_ns, kK);
  EXPECT_EQ(p.rate_timer_ns, kT);
  EXPECT_EQ(p.byte_counter, kB);
  EXPECT_EQ(p.fast_recovery_steps, 5u);
  EXPECT_EQ(p.rai_bps, 40'000'000u);
  EXPECT_EQ(p.rhai_bps, 400'000'000u);
  EXPECT_EQ(p.min_rate_bps, 1'000'000u);
  EXPECT_EQ(p.min_dec_pct, 50u);
  EXPECT_EQ(p.line_rate_bps, 100'000'000'000u);
  EXPECT_EQ(p.rate_reduce_period_ns, kMonitor);
  EXPECT_EQ(p.cnp_interval_ns, 50 * kUs);
  EXPECT_EQ(p.cnp_dscp, 48u);  // mlx5's cnp_dscp
}

TEST(DcqcnRp, StartsAtLineRate) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  EXPECT_EQ(rate(rp), kLine);
  EXPECT_EQ(target(rp), kLine);
  EXPECT_NEAR(rp.alpha(), kAlpha0, 1e-6);
  // Nothing to increase at line rate: bytes and time change nothing.
  EXPECT_FALSE(rp.on_sent(uint32_t{1} << 31, 0));
  EXPECT_FALSE(rp.tick(100 * kT));
  EXPECT_EQ(rate(rp), kLine);
  EXPECT_EQ(rp.counters().timer_events, 0u);
}

TEST(DcqcnRp, CnpCutsByHalfAlphaAndRaisesAlpha) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  EXPECT_TRUE(rp.on_cnp(1000));
  double rc = kLine * (1 - kAlpha0 / 2);  // 50.05 Gb/s
  double alpha = (1 - kG) * kAlpha0 + kG;
  EXPECT_NEAR(rate(rp), rc, rc * kRel);
  EXPECT_EQ(target(rp), kLine);
  EXPECT_NEAR(rp.alpha(), alpha, 1e-5);

  // The next one, past the monitor period, cuts by the raised alpha; R_T is the rate before it.
  EXPECT_TRUE(rp.on_cnp(1000 + kMonitor));
  const double rt = rc;
  rc *= 1 - alpha / 2;
  alpha = (1 - kG) * alpha + kG;
  EXPECT_NEAR(target(rp), rt, rt * kRel);
  EXPECT_NEAR(rate(rp), rc, rc * kRel);
  EXPECT_NEAR(rp.alpha(), alpha, 1e-5);
  EXPECT_EQ(rp.counters().cnps, 2u);
  EXPECT_EQ(rp.counters().decreases, 2u);
}

TEST(DcqcnRp, CnpsWithinTheMonitorPeriodCutOnce) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  const uint64_t t0 = 10 * kUs;
  EXPECT_TRUE(rp.on_cnp(t0));
  const uint64_t after_one = rp.rate_bps();
  const uint32_t alpha_one = rp.alpha_fp();
  EXPECT_FALSE(rp.on_cnp(t0 + 1));
  EXPECT_FALSE(rp.on_cnp(t0 + kUs));
  EXPECT_FALSE(rp.on_cnp(t0 + kMonitor - 1));
  EXPECT_EQ(rp.rate_bps(), after_one);
  EXPECT_EQ(rp.alpha_fp(), alpha_one);
  EXPECT_EQ(rp.counters().cnps, 4u);
  EXPECT_EQ(rp.counters().cnps_coalesced, 3u);
  EXPECT_EQ(rp.counters().decreases, 1u);
  // One period after the cut, the next CNP cuts again.
  EXPECT_TRUE(rp.on_cnp(t0 + kMonitor));
  EXPECT_EQ(rp.counters().decreases, 2u);
  EXPECT_LT(rp.rate_bps(), after_one);

  // Period 0: every CNP cuts.
  DcqcnParams p;
  p.rate_reduce_period_ns = 0;
  rp.init(p, 0);
  for (int i = 0; i < 3; ++i)
    rp.on_cnp(t0);
  EXPECT_EQ(rp.counters().decreases, 3u);
}

TEST(DcqcnRp, AlphaDecaysEveryKWithoutCnp) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  const uint64_t t0 = 1000;
  rp.on_cnp(t0);
  const double alpha1 = (1 - kG) * kAlpha0 + kG;
  rp.tick(t0 + kK - 1);
  EXPECT_NEAR(rp.alpha(), alpha1, 1e-5);
  rp.tick(t0 + kK);
  EXPECT_NEAR(rp.alpha(), alpha1 * (1 - kG), 1e-5);
  rp.tick(t0 + 3 * kK);
  EXPECT_NEAR(rp.alpha(), alpha1 * std::pow(1 - kG, 3), 1e-5);
  EXPECT_EQ(rp.counters().alpha_decays, 3u);

  // A CNP restarts K: at t1 + K - 1 after it nothing decays, although more than K passed since
  // the last decay.
  const uint64_t t1 = t0 + 3 * kK + kK / 2;
  rp.on_cnp(t1);
  const double alpha2 = (1 - kG) * alpha1 * std::pow(1 - kG, 3) + kG;
  rp.tick(t1 + kK - 1);
  EXPECT_NEAR(rp.alpha(), alpha2, 1e-5);
  rp.tick(t1 + kK);
  EXPECT_NEAR(rp.alpha(), alpha2 * (1 - kG), 1e-5);

  // Left alone long enough, alpha reaches 0 and its timer stops (ln(2^20) / g ~ 3550 periods).
  for (uint64_t t = t1 + kK; rp.alpha_fp() != 0 && t < t1 + 10'000 * kK; t += 50 * kK)
    rp.tick(t);
  EXPECT_EQ(rp.alpha_fp(), 0u);
}

// The paper's increase stages, computed step by step from a state reached by two CNPs (so R_T is
// below line rate and no clamp interferes).
struct Hand {
  double rc = kLine;
  double rt = kLine;
  double alpha = kAlpha0;
  void cnp() {
    rt = rc;
    rc *= 1 - alpha / 2;
    alpha = (1 - kG) * alpha + kG;
  }
  void fast_recovery() { rc = (rt + rc) / 2; }
  void additive() {
    rt += kRai;
    rc = (rt + rc) / 2;
  }
  void hyper(int i) {
    rt += i * kRhai;
    rc = (rt + rc) / 2;
  }
};

TEST(DcqcnRp, FiveFastRecoveryStepsHalveTheGapThenAdditive) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  Hand h;
  rp.on_cnp(0);
  h.cnp();
  const uint64_t t0 = 10 * kUs;
  rp.on_cnp(t0);
  h.cnp();
  const double gap0 = h.rt - h.rc;
  for (int i = 1; i <= kF; ++i) {
    EXPECT_FALSE(rp.tick(t0 + i * kT - 1)) << i;
    EXPECT_TRUE(rp.tick(t0 + i * kT)) << i;
    h.fast_recovery();
    EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel) << i;
    EXPECT_NEAR(target(rp), h.rt, h.rt * kRel) << i;
  }
  EXPECT_NEAR(target(rp) - rate(rp), gap0 / 32, h.rc * kRel);
  EXPECT_EQ(rp.counters().fast_recovery, 5u);
  EXPECT_EQ(rp.counters().additive, 0u);
  // The sixth timer event is additive: R_T moves by R_AI.
  rp.tick(t0 + 6 * kT);
  h.additive();
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  // The timer alone never reaches hyper increase (the byte counter stays at 0).
  for (int i = 7; i <= 40; ++i) {
    rp.tick(t0 + i * kT);
    h.additive();
  }
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  EXPECT_EQ(rp.counters().additive, 35u);
  EXPECT_EQ(rp.counters().hyper, 0u);
}

TEST(DcqcnRp, ByteCounterTriggersIncreasesAndHyperNeedsBoth) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  Hand h;
  rp.on_cnp(0);
  h.cnp();
  const uint64_t t0 = 10 * kUs;
  rp.on_cnp(t0);
  h.cnp();
  // B - 1 bytes: nothing; one more: the first byte-counter event, fast recovery.
  EXPECT_FALSE(rp.on_sent(static_cast<uint32_t>(kB - 1), t0 + 1));
  EXPECT_EQ(rp.counters().byte_events, 0u);
  EXPECT_TRUE(rp.on_sent(1, t0 + 2));
  h.fast_recovery();
  EXPECT_EQ(rp.counters().byte_events, 1u);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  // Five more B in one call (a large descriptor): events 2..5 fast recovery, 6 additive.
  rp.on_sent(static_cast<uint32_t>(5 * kB), t0 + 3);
  for (int i = 2; i <= 5; ++i)
    h.fast_recovery();
  h.additive();
  EXPECT_EQ(rp.counters().byte_events, 6u);
  EXPECT_EQ(rp.counters().fast_recovery, 5u);
  EXPECT_EQ(rp.counters().additive, 1u);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  // Timer events 1..5: max(counts) is 6, min <= F: additive. Timer event 6: both > F, hyper
  // with i = 1; event 7: i = 2.
  for (int i = 1; i <= 5; ++i) {
    rp.tick(t0 + i * kT);
    h.additive();
  }
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  EXPECT_EQ(rp.counters().hyper, 0u);
  rp.tick(t0 + 6 * kT);
  h.hyper(1);
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  // i is min(counts) - F: the seventh B makes the counts (6, 7), i = 1 again; the seventh T
  // makes them (7, 7), i = 2.
  rp.on_sent(static_cast<uint32_t>(kB), t0 + 7 * kT - 1);
  h.hyper(1);
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  rp.tick(t0 + 7 * kT);
  h.hyper(2);
  EXPECT_NEAR(target(rp), h.rt, h.rt * kRel);
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  EXPECT_EQ(rp.counters().hyper, 3u);
  EXPECT_EQ(rp.counters().timer_events, 7u);

  // A CNP restarts both counts: the next event is fast recovery again. (Alpha decayed at
  // t0 + K .. t0 + 7K meanwhile.)
  rp.on_cnp(t0 + 7 * kT + 1);
  h.alpha *= std::pow(1 - kG, 7);
  h.cnp();
  rp.on_sent(static_cast<uint32_t>(kB), t0 + 7 * kT + 2);
  h.fast_recovery();
  EXPECT_NEAR(rate(rp), h.rc, h.rc * kRel);
  EXPECT_EQ(rp.counters().fast_recovery, 6u);
}

TEST(DcqcnRp, NeverAboveLineRate) {
  DcqcnParams p;
  p.byte_counter = 64 * 1024;  // both counters run: hyper increase overshoots R_T past line rate
  DcqcnRp rp;
  rp.init(p, 0);
  rp.on_cnp(0);
  bool reached = false;
  for (uint64_t t = kT; t < 2000 * kT; t += kT) {
    rp.on_sent(static_cast<uint32_t>(p.byte_counter), t);
    rp.tick(t);
    ASSERT_LE(rp.rate_bps(), p.line_rate_bps);
    ASSERT_LE(rp.target_bps(), p.line_rate_bps);
    reached = reached || rp.rate_bps() == p.line_rate_bps;
  }
  EXPECT_TRUE(reached);
  EXPECT_GT(rp.counters().hyper, 0u);
  // At line rate the increase timer stops; the next deadline is alpha's.
  EXPECT_EQ(rp.rate_bps(), p.line_rate_bps);
  const uint64_t events = rp.counters().timer_events + rp.counters().byte_events;
  rp.tick(5000 * kT);
  rp.on_sent(1u << 30, 5000 * kT);
  EXPECT_EQ(rp.counters().timer_events + rp.counters().byte_events, events);
}

TEST(DcqcnRp, NeverBelowMinRateNorMoreThanMinDecPerCut) {
  DcqcnParams p;
  p.rate_reduce_period_ns = 0;
  p.alpha_init = DcqcnParams::kOne;  // alpha 1 and g 1: every cut halves
  p.g = DcqcnParams::kOne;
  p.line_rate_bps = 1'000'000'000;
  DcqcnRp rp;
  rp.init(p, 0);
  double rc = 1e9;
  for (int i = 0; i < 20; ++i) {
    rp.on_cnp(0);
    rc = std::max(rc / 2, kMin);
    EXPECT_NEAR(rate(rp), rc, 1) << i;
  }
  EXPECT_EQ(rate(rp), kMin);  // 1e9 / 2^20 < 1e6
  rp.on_cnp(0);
  EXPECT_EQ(rate(rp), kMin);

  // rpg_min_dec_fac 75 %: alpha 1 would halve, the floor keeps three quarters.
  p.min_dec_pct = 75;
  rp.init(p, 0);
  rp.on_cnp(0);
  EXPECT_EQ(rate(rp), 1e9 * 0.75);
  rp.on_cnp(0);
  EXPECT_EQ(rate(rp), 1e9 * 0.75 * 0.75);
}

TEST(DcqcnRp, TimersCatchUpBoundedAndNextTimer) {
  DcqcnRp rp;
  rp.init(DcqcnParams{}, 0);
  EXPECT_EQ(rp.next_timer_ns(), kK);  // alpha's
  rp.on_cnp(100);
  EXPECT_EQ(rp.next_timer_ns(), 100 + std::min(kK, kT));
  // A second cut puts R_T at half the line rate: 256 additive steps of 40 Mb/s stay below it.
  const uint64_t t0 = 100 + kMonitor;
  rp.on_cnp(t0);
  EXPECT_EQ(rp.next_timer_ns(), t0 + std::min(kK, kT));
  // A tick long overdue handles at most kMaxCatchUp periods per call; the rest come next.
  rp.tick(t0 + 1000 * kT);
  EXPECT_EQ(rp.counters().timer_events, DcqcnRp::kMaxCatchUp);
  rp.tick(t0 + 1000 * kT);
  EXPECT_EQ(rp.counters().timer_events, 2 * DcqcnRp::kMaxCatchUp);
}

TEST(DcqcnNp, OneCnpPerIntervalPerQp) {
  DcqcnParams p;  // 50 us
  DcqcnNp a;
  DcqcnNp b;
  a.init(p);
  b.init(p);
  const uint64_t t0 = 7 * kUs;
  EXPECT_TRUE(a.on_ce(t0));
  EXPECT_FALSE(a.on_ce(t0 + 1));
  EXPECT_FALSE(a.on_ce(t0 + 49 * kUs));
  EXPECT_FALSE(a.on_ce(t0 + 50 * kUs - 1));
  EXPECT_TRUE(b.on_ce(t0 + 10 * kUs));  // another QP has its own interval
  EXPECT_TRUE(a.on_ce(t0 + 50 * kUs));
  EXPECT_FALSE(a.on_ce(t0 + 99 * kUs));
  EXPECT_TRUE(a.on_ce(t0 + 100 * kUs));
  EXPECT_EQ(a.ce_seen(), 7u);
  EXPECT_EQ(a.cnps(), 3u);
  EXPECT_EQ(b.cnps(), 1u);

  p.cnp_interval_ns = 0;
  a.init(p);
  for (int i = 0; i < 5; ++i)
    EXPECT_TRUE(a.on_ce(t0));
  EXPECT_EQ(a.cnps(), 5u);
}

// A sender that always has data: sends whenever the pacer allows, polling at `poll_ns` (0: it
// wakes exactly at next_send_ns()). Returns the rate achieved over [warmup, warmup + span).
double paced_rate(uint64_t bps, uint32_t packet, uint64_t poll_ns, uint64_t span_ns,
                  uint32_t burst = Pacer::kDefaultBurstBytes) {
  Pacer pacer(bps, burst);
  const uint64_t warmup = span_ns / 10;
  uint64_t now = 1000;
  uint64_t bytes = 0;
  // A broken pacer must fail here, not hang: at most twice the packets the rate allows, and
  // time only moves forward.
  const double most = 2.0 * static_cast<double>(bps) / 8e9 * static_cast<double>(warmup + span_ns);
  double all = 0;
  while (now < warmup + span_ns && all < most) {
    if (pacer.may_send(now)) {
      pacer.sent(packet, now);
      all += packet;
      if (now >= warmup) bytes += packet;
    } else if (poll_ns != 0) {
      now += poll_ns;
    } else {
      EXPECT_GT(pacer.next_send_ns(), now) << "may_send() said no, next_send_ns() says now";
      if (pacer.next_send_ns() <= now) return 0;
      now = pacer.next_send_ns();
    }
  }
  return static_cast<double>(bytes) * 8e9 / static_cast<double>(span_ns);
}

TEST(Pacer, LongRunAverageIsTheRate) {
  for (double bps : {1e9, 10e9, 100e9, 3e9, 77.7e9}) {
    const auto r = static_cast<uint64_t>(bps);
    // 1500-byte packets, 100 ms (100 Gb/s: 830 000 packets), exact wake-ups.
    EXPECT_NEAR(paced_rate(r, 1500, 0, 100'000'000), bps, bps * 0.01) << bps;
    // Coarse polling every 2 us and 4 KB packets: the burst absorbs the lateness.
    EXPECT_NEAR(paced_rate(r, 4096, 2000, 100'000'000), bps, bps * 0.01) << bps;
  }
  // Slow and odd: 1 Mb/s (DCQCN's floor), 10 s of 1000-byte packets.
  EXPECT_NEAR(paced_rate(1'000'000, 1000, 0, 10'000'000'000), 1e6, 1e6 * 0.01);
}

TEST(Pacer, NoBurstAllowanceThrottlesCoarsePollers) {
  // What the burst is for: a poller every 2 us at 100 Gb/s with no allowance loses the time
  // between a packet's due time and the next poll. (Checks the test above can fail.)
  const double r = paced_rate(100'000'000'000, 4096, 2000, 10'000'000, 0);
  EXPECT_LT(r, 0.9 * 100e9);
}

TEST(Pacer, BurstAllowance) {
  // 10 Gb/s: a byte costs 0.8 ns; 64 KiB of burst is 52428.8 ns; a 1500-byte packet 1200 ns.
  Pacer p(10'000'000'000);
  const uint64_t t0 = 1'000'000;
  // Each loop stops at 1000 packets: a pacer that never says no must fail, not hang.
  int n = 0;
  while (p.may_send(t0) && n < 1000) {
    p.sent(1500, t0);
    ++n;
  }
  // Packets k = 0.. go while k * 1200 <= 52428.8: 44 of them (64 KiB and the one starting it).
  EXPECT_EQ(n, 44);
  EXPECT_EQ(p.next_send_ns(), t0 + 44 * 1200 - 52428);  // 52428.8 rounded down: 372 ns
  EXPECT_FALSE(p.may_send(p.next_send_ns() - 1));
  EXPECT_TRUE(p.may_send(p.next_send_ns()));
  // Idle for a second: the bucket holds one burst, not a second's worth.
  const uint64_t t1 = t0 + 1'000'000'000;
  n = 0;
  while (p.may_send(t1) && n < 1000) {
    p.sent(1500, t1);
    ++n;
  }
  EXPECT_EQ(n, 44);

  // Configurable: 3000 bytes of burst lets three packets go (0, 1200, 2400 ns of debt).
  p.set_burst(3000);
  const uint64_t t2 = t1 + 1'000'000'000;
  n = 0;
  while (p.may_send(t2) && n < 1000) {
    p.sent(1500, t2);
    ++n;
  }
  EXPECT_EQ(n, 3);
}

TEST(Pacer, ZeroRatePauses) {
  Pacer p;
  EXPECT_FALSE(p.may_send(0));
  EXPECT_EQ(p.next_send_ns(), ~0ull);
  p.set_rate(1'000'000'000);
  EXPECT_TRUE(p.may_send(0));
  p.set_rate(0);
  EXPECT_FALSE(p.may_send(1'000'000'000));
}

TEST(DcqcnParams, SetAcceptsGoodValues) {
  DcqcnParams p;
  EXPECT_EQ(p.set("dcqcn_g", "1/16"), "");
  EXPECT_EQ(p.g, (1u << 20) / 16);
  EXPECT_EQ(p.set("dcqcn_g", "0.5"), "");
  EXPECT_EQ(p.g, (1u << 20) / 2);
  EXPECT_EQ(p.set("dcqcn_alpha_init", "1"), "");
  EXPECT_EQ(p.alpha_init, 1u << 20);
  EXPECT_EQ(p.set("dcqcn_alpha_init", "0"), "");
  EXPECT_EQ(p.alpha_init, 0u);
  EXPECT_EQ(p.set("dcqcn_alpha_timer_us", "100"), "");
  EXPECT_EQ(p.alpha_timer_ns, 100'000u);
  EXPECT_EQ(p.set("dcqcn_rate_timer_us", "300"), "");
  EXPECT_EQ(p.rate_timer_ns, 300'000u);
  EXPECT_EQ(p.set("dcqcn_byte_counter_kb", "2048"), "");
  EXPECT_EQ(p.byte_counter, 2u << 20);
  EXPECT_EQ(p.set("dcqcn_fast_recovery_steps", "0"), "");
  EXPECT_EQ(p.fast_recovery_steps, 0u);
  EXPECT_EQ(p.set("dcqcn_rai_mbps", "5"), "");
  EXPECT_EQ(p.rai_bps, 5'000'000u);
  EXPECT_EQ(p.set("dcqcn_rhai_mbps", "50"), "");
  EXPECT_EQ(p.rhai_bps, 50'000'000u);
  EXPECT_EQ(p.set("dcqcn_line_rate_mbps", "25000"), "");
  EXPECT_EQ(p.line_rate_bps, 25'000'000'000u);
  EXPECT_EQ(p.set("dcqcn_min_rate_mbps", "10"), "");
  EXPECT_EQ(p.min_rate_bps, 10'000'000u);
  EXPECT_EQ(p.set("dcqcn_min_dec_pct", "100"), "");
  EXPECT_EQ(p.min_dec_pct, 100u);
  EXPECT_EQ(p.set("dcqcn_rate_reduce_period_us", "0"), "");
  EXPECT_EQ(p.rate_reduce_period_ns, 0u);
  EXPECT_EQ(p.set("dcqcn_cnp_interval_us", "0"), "");
  EXPECT_EQ(p.cnp_interval_ns, 0u);
  EXPECT_EQ(p.set("dcqcn_cnp_interval_us", "50"), "");
  EXPECT_EQ(p.cnp_interval_ns, 50'000u);
  EXPECT_EQ(p.set("dcqcn_cnp_dscp", "0"), "");
  EXPECT_EQ(p.cnp_dscp, 0u);
  EXPECT_EQ(p.set("dcqcn_cnp_dscp", "63"), "");
  EXPECT_EQ(p.cnp_dscp, 63u);
}

TEST(DcqcnParams, SetRefusesBadValuesAndLeavesThemUnchanged) {
  const DcqcnParams def;
  DcqcnParams p;
  EXPECT_EQ(p.set("dcqcn_g", "0"),
            "dcqcn: bad value '0' for dcqcn_g (rounds to 0; the smallest gain is 1/1048576)");
  EXPECT_EQ(p.set("dcqcn_g", "1.5"),
            "dcqcn: bad value '1.5' for dcqcn_g (a fraction in (0, 1], as 0.00390625 or 1/256)");
  for (const char* v : {"", "abc", "1/0", "2/1", "-0.1", "1/", "/2", "0.5x", "nan"})
    EXPECT_NE(p.set("dcqcn_g", v), "") << v;
  EXPECT_NE(p.set("dcqcn_alpha_init", "1.01"), "");
  EXPECT_EQ(p.set("dcqcn_rai_mbps", "-5"),
            "dcqcn: bad value '-5' for dcqcn_rai_mbps (a whole number 1..1600000)");
  EXPECT_EQ(p.set("dcqcn_rai_mbps", "40.5"),
            "dcqcn: bad value '40.5' for dcqcn_rai_mbps (a whole number 1..1600000)");
  EXPECT_NE(p.set("dcqcn_rai_mbps", "0"), "");
  EXPECT_NE(p.set("dcqcn_rai_mbps", ""), "");
  EXPECT_NE(p.set("dcqcn_line_rate_mbps", "1600001"), "");
  EXPECT_NE(p.set("dcqcn_line_rate_mbps", "99999999999999999999999"), "");
  EXPECT_EQ(p.set("dcqcn_min_dec_pct", "0"),
            "dcqcn: bad value '0' for dcqcn_min_dec_pct (a whole number 1..100)");
  EXPECT_NE(p.set("dcqcn_min_dec_pct", "101"), "");
  EXPECT_NE(p.set("dcqcn_alpha_timer_us", "0"), "");
  EXPECT_NE(p.set("dcqcn_rate_timer_us", "1000001"), "");
  EXPECT_NE(p.set("dcqcn_byte_counter_kb", "0"), "");
  EXPECT_NE(p.set("dcqcn_fast_recovery_steps", "256"), "");
  EXPECT_NE(p.set("dcqcn_cnp_interval_us", "1e3"), "");
  EXPECT_EQ(p.set("dcqcn_cnp_dscp", "64"),
            "dcqcn: bad value '64' for dcqcn_cnp_dscp (a whole number 0..63)");
  // The two rates bound each other.
  EXPECT_EQ(p.set("dcqcn_min_rate_mbps", "200000"),
            "dcqcn: bad value '200000' for dcqcn_min_rate_mbps (above dcqcn_line_rate_mbps, "
            "100000)");
  EXPECT_EQ(p.set("dcqcn_line_rate_mbps", "0"),
            "dcqcn: bad value '0' for dcqcn_line_rate_mbps (a whole number 1..1600000)");
  ASSERT_EQ(p.set("dcqcn_min_rate_mbps", "100"), "");
  EXPECT_EQ(p.set("dcqcn_line_rate_mbps", "50"),
            "dcqcn: bad value '50' for dcqcn_line_rate_mbps (below dcqcn_min_rate_mbps, 100)");
  const std::string unknown = p.set("dcqcn_gain", "1");
  EXPECT_EQ(unknown.rfind("dcqcn: unknown parameter 'dcqcn_gain' (have dcqcn_g, ", 0), 0u)
      << unknown;
  EXPECT_NE(unknown.find("dcqcn_cnp_interval_us"), std::string::npos);
  // Nothing refused changed anything.
  EXPECT_EQ(p.g, def.g);
  EXPECT_EQ(p.alpha_init, def.alpha_init);
  EXPECT_EQ(p.rai_bps, def.rai_bps);
  EXPECT_EQ(p.line_rate_bps, def.line_rate_bps);
  EXPECT_EQ(p.min_dec_pct, def.min_dec_pct);
  EXPECT_EQ(p.alpha_timer_ns, def.alpha_timer_ns);
  EXPECT_EQ(p.rate_timer_ns, def.rate_timer_ns);
  EXPECT_EQ(p.byte_counter, def.byte_counter);
  EXPECT_EQ(p.fast_recovery_steps, def.fast_recovery_steps);
  EXPECT_EQ(p.cnp_interval_ns, def.cnp_interval_ns);
  EXPECT_EQ(p.cnp_dscp, def.cnp_dscp);
}

// One sender at 100 Gb/s into a 40 Gb/s bottleneck: a FIFO that marks CE on packets that find
// more than kMarkBytes queued, a receiver NP, CNPs back after a fixed delay. The RP's rate drives
// the pacer; the test looks at the sender's rate and the queue once DCQCN has settled.
struct SimResult {
  std::vector<double> window_gbps;  // what the sender sent per 1 ms window
  double max_queue_late = 0;        // bytes, after the settling time
  uint64_t cnps = 0;
};

SimResult simulate(const DcqcnParams& p, uint64_t run_ns, uint64_t settle_ns) {
  constexpr double kBottleneckBytesPerNs = 40e9 / 8 / 1e9;
  constexpr uint32_t kPacket = 4096;
  constexpr double kMarkBytes = 100'000;
  constexpr uint64_t kProp = 2 * kUs;      // sender to receiver, after the queue
  constexpr uint64_t kCnpBack = 4 * kUs;   // receiver to sender
  constexpr uint64_t kWindow = 1'000'000;  // 1 ms

  DcqcnRp rp;
  DcqcnNp np;
  rp.init(p, 0);
  np.init(p);
  Pacer pacer(rp.rate_bps(), 16 * 1024);
  std::deque<uint64_t> cnps_due;  // arrival times at the sender, in order
  double queue = 0;               // bytes in the bottleneck at `queue_t`
  uint64_t queue_t = 0;
  SimResult r;
  r.window_gbps.assign(run_ns / kWindow, 0);

  uint64_t now = 0;
  uint64_t packets = 0;
  const uint64_t most = run_ns / 200;  // 4 KiB packets at 160 Gb/s: a broken pacer stops here
  while (now < run_ns && packets < most) {
    const uint64_t next = std::min<uint64_t>(
        {pacer.next_send_ns(), rp.next_timer_ns(), cnps_due.empty() ? ~0ull : cnps_due.front()});
    now = std::max(now, next);
    if (now >= run_ns) break;
    if (rp.tick(now)) pacer.set_rate(rp.rate_bps());
    while (!cnps_due.empty() && cnps_due.front() <= now) {
      cnps_due.pop_front();
      if (rp.on_cnp(now)) pacer.set_rate(rp.rate_bps());
    }
    if (!pacer.may_send(now)) continue;
    pacer.sent(kPacket, now);
    packets++;
    if (rp.on_sent(kPacket, now)) pacer.set_rate(rp.rate_bps());
    r.window_gbps[now / kWindow] += kPacket * 8.0 / 1e6;  // Gb per ms = Gb/s over the window
    // Into the bottleneck: drain since the last packet, then mark by what it finds.
    queue = std::max(0.0, queue - static_cast<double>(now - queue_t) * kBottleneckBytesPerNs);
    queue_t = now;
    const bool ce = queue > kMarkBytes;
    queue += kPacket;
    if (now >= settle_ns) r.max_queue_late = std::max(r.max_queue_late, queue);
    const auto arrival = now + static_cast<uint64_t>(queue / kBottleneckBytesPerNs) + kProp;
    if (ce && np.on_ce(arrival)) cnps_due.push_back(arrival + kCnpBack);
  }
  r.cnps = rp.counters().cnps;
  return r;
}

TEST(DcqcnSim, ConvergesToTheBottleneck) {
  // What the defaults do with one flow: the queue built at 100 Gb/s before the first CNP keeps
  // marking while it drains, so three cuts in a row take the rate to ~13 Gb/s; fast recovery
  // returns it to R_T (~25 Gb/s), then additive increase climbs 40 Mb/s per 55 us (0.73 Gb/s per
  // ms) until the byte counter has also passed F (6 x 10 MiB at ~25 Gb/s: ~20 ms) and hyper
  // increase finds 40 Gb/s. From then on each ms stays within a few percent.
  const SimResult r = simulate(DcqcnParams{}, 100'000'000, 30'000'000);
  ASSERT_GT(r.cnps, 0u);
  double sum = 0;
  for (size_t w = 30; w < r.window_gbps.size(); ++w) {
    EXPECT_NEAR(r.window_gbps[w], 40, 8) << "ms " << w;
    sum += r.window_gbps[w];
  }
  const double mean = sum / static_cast<double>(r.window_gbps.size() - 30);
  EXPECT_NEAR(mean, 40, 2);
  // Bounded: the marking threshold (100 KB) plus what arrives before a CNP takes effect.
  EXPECT_LT(r.max_queue_late, 250'000);
  std::printf(
      "dcqcn sim: %.2f Gb/s from 30 to 100 ms (first ms %.1f, 10th %.1f, 20th %.1f), "
      "max queue %.0f KB, %llu CNPs\n",
      mean, r.window_gbps[0], r.window_gbps[9], r.window_gbps[19], r.max_queue_late / 1000,
      static_cast<unsigned long long>(r.cnps));
}

}  // namespace
}  // namespace cleave::transport::cc
