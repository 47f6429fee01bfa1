// dcqcn.h - DCQCN (Zhu et al., SIGCOMM'15): rate-based congestion control for RoCEv2, per QP.
//
// Rate-based, so not an Algorithm (cc.h computes windows): the sender's reaction point (DcqcnRp)
// turns CNPs, bytes sent and the passing of time into a rate R_C, which the transport enforces
// with a Pacer (pacer.h); the receiver's notification point (DcqcnNp) decides which CE-marked
// packets are answered with a CNP. Both are plain state in storage the QP owns: no heap, no
// clock (every call takes the caller's now_ns), no virtual calls, nothing that can fail.
//
// Units: rates in bits per second, times in nanoseconds, byte counts in bytes, alpha and g in
// Q20 fixed point (kOne = 2^20 stands for 1.0), so that the rate cut R_C * alpha / 2 fits 64 bits
// for any rate up to kMaxRateBps, and alpha's decay is exact, repeatable integer arithmetic.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace cleave::transport::cc {

// Every DCQCN constant, defaults from the paper and NVIDIA's mlx5 (docs/transports.md, DCQCN).
// One instance per transport or per binding; QPs copy what they need at init().
struct DcqcnParams {
  static constexpr uint32_t kOneShift = 20;
  static constexpr uint32_t kOne = 1u << kOneShift;  // 1.0 in Q20
  // Highest line rate accepted: R_C * alpha (Q20) must fit 64 bits (2^41 * 2^20 < 2^64).
  static constexpr uint64_t kMaxRateBps = 1'600'000'000'000;

  uint32_t g = kOne / 256;  // alpha's gain, Q20 (paper: 1/256)
  // Initial alpha, Q20. mlx5's 1023/1024 rather than the paper's 1: the same first cut within
  // 0.05 %, and what a ConnectX peer beside us does.
  uint32_t alpha_init = kOne / 1024 * 1023;
  uint64_t alpha_timer_ns = 55'000;     // K: alpha decays once per K without a CNP
  uint64_t rate_timer_ns = 55'000;      // T: one rate-increase event per T
  uint64_t byte_counter = 10ull << 20;  // B: one rate-increase event per B bytes sent (10 MiB)
  uint32_t fast_recovery_steps = 5;     // F
  uint64_t rai_bps = 40'000'000;        // R_AI, additive increase step
  // R_HAI, hyper increase step: 10 x R_AI, the ratio of QCN (802.1Qau) that the paper inherits
  // and that mlx5 keeps in its own defaults (rpg_ai_rate 5, rpg_hai_rate 50 Mb/s).
  uint64_t rhai_bps = 400'000'000;
  uint64_t min_rate_bps = 1'000'000;  // rpg_min_rate: R_C never goes below
  uint32_t min_dec_pct = 50;          // rpg_min_dec_fac: one cut keeps at least this % of R_C
  uint64_t line_rate_bps = 100'000'000'000;  // the initial and the highest rate
  uint64_t rate_reduce_period_ns = 4'000;    // rate_reduce_monitor_period: one cut per period
  uint64_t cnp_interval_ns = 50'000;         // NP: one CNP per QP per interval; 0: every CE
  uint32_t cnp_dscp = 48;                    // NP: the DSCP CNPs go out with (mlx5's cnp_dscp)

  // Sets one operator parameter (cleavectl flow attach ... KEY VALUE); returns "" or a readable
  // error, leaving the struct unchanged on error. Keys (see dcqcn.cc kKeys for the ranges):
  //   dcqcn_g                     fraction: 0.00390625 or 1/256, in (0, 1]
  //   dcqcn_alpha_init            fraction in [0, 1]
  //   dcqcn_alpha_timer_us        K
  //   dcqcn_rate_timer_us         T
  //   dcqcn_byte_counter_kb       B, in KiB (1 KiB = 1024 bytes)
  //   dcqcn_fast_recovery_steps   F
  //   dcqcn_rai_mbps, dcqcn_rhai_mbps, dcqcn_min_rate_mbps, dcqcn_line_rate_mbps
  //   dcqcn_min_dec_pct           1..100
  //   dcqcn_rate_reduce_period_us 0 = every CNP may cut
  //   dcqcn_cnp_interval_us       0 = every CE-marked packet may draw a CNP
  //   dcqcn_cnp_dscp              0..63, the IP DSCP of the CNPs sent
  // Rates are whole Mb/s (10^6 b/s), times whole microseconds.
  std::string set(std::string_view key, std::string_view value);
};

// Reaction point counters, cumulative since init().
struct DcqcnRpCounters {
  uint64_t cnps = 0;            // CNPs received
  uint64_t cnps_coalesced = 0;  // of those, inside the monitor period after a cut: ignored
  uint64_t decreases = 0;       // rate cuts
  uint64_t timer_events = 0;    // rate-increase events from the timer T
  uint64_t byte_events = 0;     // rate-increase events from the byte counter B
  uint64_t fast_recovery = 0;   // increase events by stage
  uint64_t additive = 0;
  uint64_t hyper = 0;
  uint64_t alpha_decays = 0;
};

// The sender side of DCQCN, one per QP. The transport calls on_cnp() for each CNP, on_sent() for
// each packet it emits, and tick() often (each burst is fine: it costs two compares when nothing
// is due); each returns true when R_C changed, so the transport reprograms its pacer only then.
//
// The state machine is the paper's (section 3.1, figure 7):
//  - CNP: R_T = R_C; R_C = R_C (1 - alpha/2), but never below min_dec_pct % of R_C nor below
//    min_rate; alpha = (1 - g) alpha + g; timers, byte counter and both event counts restart.
//    A CNP within rate_reduce_period of the last cut is counted and otherwise ignored (mlx5's
//    monitor period: CNPs of one congestion episode cut once).
//  - Every K without a CNP: alpha = (1 - g) alpha (rounded down, so it reaches 0 and stops).
//  - Each T (counted in `timer count`) and each B bytes sent (`byte count`) is an increase event;
//    with max(counts) <= F it is fast recovery, R_C = (R_T + R_C) / 2; with both counts > F
//    hyper increase, R_T += i R_HAI with i = min(counts) - F; otherwise additive increase,
//    R_T += R_AI; then R_C = (R_T + R_C) / 2. R_T and R_C never exceed the line rate.
//  - At line rate there is nothing to increase: the increase timer and byte counter stop until
//    the next cut (every event there would leave R_C unchanged).
// tick() applies at most kMaxCatchUp timer periods per call, so a QP that was not ticked for a
// long time costs a bounded amount; the rest follow in the next calls.
class DcqcnRp {
 public:
  static constexpr uint32_t kMaxCatchUp = 256;

  void init(const DcqcnParams& p, uint64_t now_ns);
  bool on_cnp(uint64_t now_ns);
  // Inline up to the byte counter's check: every packet the QP sends asks.
  bool on_sent(uint32_t bytes, uint64_t /*now_ns*/) {
    if (increase_due_ns_ == kNever) return false;  // at line rate the byte counter rests
    bytes_ += bytes;
    return bytes_ >= b_bytes_ && byte_events();
  }
  bool tick(uint64_t now_ns);

  uint64_t rate_bps() const { return rc_; }     // R_C, the rate to send at
  uint64_t target_bps() const { return rt_; }   // R_T
  uint32_t alpha_fp() const { return alpha_; }  // Q20
  double alpha() const { return static_cast<double>(alpha_) / DcqcnParams::kOne; }
  // When tick() next has work: the earlier timer deadline, ~0 when both timers are stopped.
  uint64_t next_timer_ns() const;
  const DcqcnRpCounters& counters() const { return c_; }

 private:
  static constexpr uint64_t kNever = ~0ull;  // a timer that is stopped

  bool increase_event();
  bool byte_events();

  // Copied from the params at init (one cache line of constants beside the state).
  uint64_t line_bps_ = 0;
  uint64_t min_bps_ = 0;
  uint64_t rai_bps_ = 0;
  uint64_t rhai_bps_ = 0;
  uint64_t k_ns_ = 0;
  uint64_t t_ns_ = 0;
  uint64_t b_bytes_ = 0;
  uint64_t reduce_period_ns_ = 0;
  uint32_t g_ = 0;
  uint32_t f_ = 0;
  uint32_t min_dec_pct_ = 0;

  uint64_t rc_ = 0;  // R_C, bps
  uint64_t rt_ = 0;  // R_T, bps
  uint32_t alpha_ = 0;
  uint32_t timer_count_ = 0;      // T's events since the last cut
  uint32_t byte_count_ = 0;       // B's events since the last cut
  uint64_t bytes_ = 0;            // bytes sent toward the next B event
  uint64_t alpha_due_ns_ = 0;     // next alpha decay; ~0 when alpha is 0
  uint64_t increase_due_ns_ = 0;  // next timer increase; ~0 at line rate
  uint64_t last_cut_ns_ = 0;
  bool cut_once_ = false;  // a cut happened (last_cut_ns_ is meaningful)
  DcqcnRpCounters c_;
};

// The receiver side, one per QP: which CE-marked packets draw a CNP.
class DcqcnNp {
 public:
  void init(const DcqcnParams& p) {
    interval_ns_ = p.cnp_interval_ns;
    sent_once_ = false;
    ce_seen_ = cnps_ = 0;
  }
  // A CE-marked packet of this QP arrived: true when a CNP should go now (the first one, then at
  // most one per interval).
  bool on_ce(uint64_t now_ns) {
    ce_seen_++;
    if (sent_once_ && now_ns - last_cnp_ns_ < interval_ns_) return false;
    sent_once_ = true;
    last_cnp_ns_ = now_ns;
    cnps_++;
    return true;
  }
  uint64_t ce_seen() const { return ce_seen_; }
  uint64_t cnps() const { return cnps_; }  // CNPs asked for

 private:
  uint64_t interval_ns_ = 0;
  uint64_t last_cnp_ns_ = 0;
  bool sent_once_ = false;
  uint64_t ce_seen_ = 0;
  uint64_t cnps_ = 0;
};

}  // namespace cleave::transport::cc
