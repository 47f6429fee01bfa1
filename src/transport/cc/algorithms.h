// algorithms.h - the built-in algorithms' classes: private to cc/, sized by cc.cc, built by name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>

#include "cc.h"

namespace cleave::transport::cc {

inline constexpr uint64_t kInitialWindowSegments = 10;  // RFC 6928
inline constexpr uint64_t kMinSsthreshSegments = 2;     // RFC 5681 equation (4)

// Reno's window growth, shared by NewReno, DCTCP and CUBIC's slow start: RFC 5681 slow start
// with RFC 3465 appropriate byte counting, and congestion avoidance counting bytes, so that
// delayed and stretch ACKs grow the window as much as one ACK per segment would (no more).
// Slow start counts every acknowledged byte, as Linux does, rather than RFC 3465's L = 2 MSS per
// ACK: receivers that acknowledge a burst at a time (GRO in Linux, a burst in Cleave) would
// otherwise halve its growth.
class RenoGrowth {
 public:
  // Slow start while cwnd < ssthresh. Returns the part of `acked` left once cwnd reached
  // ssthresh, for congestion avoidance.
  uint64_t slow_start(State& s, uint64_t acked);
  // One MSS per cwnd of acknowledged bytes.
  void congestion_avoidance(State& s, uint64_t acked);
  void grow(State& s, uint64_t acked) { congestion_avoidance(s, slow_start(s, acked)); }
  // A reduction starts the byte count afresh: credit earned at the old window is not carried.
  void reset() { ca_acked_ = 0; }

 private:
  uint64_t ca_acked_ = 0;  // bytes acknowledged in congestion avoidance toward the next MSS
};

// RFC 5681 equation (4) with the flight the transport reports (RFC 6675 uses the same).
inline uint64_t reno_ssthresh(const State& s) {
  return std::max<uint64_t>(s.inflight / 2, kMinSsthreshSegments * s.mss);
}

// RFC 5681 and RFC 6582, RFC 3168 for ECN echoes.
class NewReno : public Algorithm {
 public:
  static constexpr std::string_view kName = "newreno";
  std::string_view name() const override { return kName; }
  void init(State& s, uint64_t now_ns) override;
  void on_ack(State& s, const Ack& a) override;
  void on_loss(State& s, uint64_t now_ns) override;
  void on_ecn(State& s, uint64_t now_ns) override;
  void on_rto(State& s, uint64_t now_ns, bool new_episode) override;
  void on_recovery_end(State& s, uint64_t now_ns) override;

 protected:
  RenoGrowth growth_;
};

// RFC 9438 without HyStart: slow start as Reno, then the cubic function of the time since the
// last reduction, never below what Reno would have reached (the Reno-friendly region).
class Cubic final : public Algorithm {
 public:
  static constexpr std::string_view kName = "cubic";
  std::string_view name() const override { return kName; }
  void init(State& s, uint64_t now_ns) override;
  void on_ack(State& s, const Ack& a) override;
  void on_loss(State& s, uint64_t now_ns) override;
  void on_ecn(State& s, uint64_t now_ns) override;
  void on_rto(State& s, uint64_t now_ns, bool new_episode) override;
  void on_recovery_end(State& s, uint64_t now_ns) override;

 private:
  void reduce(State& s);
  void congestion_avoidance(State& s, const Ack& a, uint64_t acked);

  RenoGrowth growth_;
  // All windows in bytes, as doubles: the cubic function and W_est move by fractions of a byte.
  double w_max_ = 0;       // the window before the last reduction (after fast convergence)
  double cwnd_prior_ = 0;  // cwnd when ssthresh was last set; W_est reaching it ends alpha_cubic
  double w_est_ = 0;       // the Reno-emulating window (RFC 9438 section 4.3)
  double k_s_ = 0;         // seconds from the epoch start until the cubic function reaches W_max
  double carry_ = 0;       // growth below one byte, kept so that small per-ACK steps add up
  uint64_t epoch_start_ns_ = 0;
  bool in_epoch_ = false;  // false from a reduction until the first ACK in congestion avoidance
};

// RFC 8257: the fraction of ECN-marked bytes per window of data, smoothed into alpha, scales the
// reduction on an ECN echo. Growth, losses and timeouts are NewReno's (section 3.4).
class Dctcp final : public NewReno {
 public:
  static constexpr std::string_view kName = "dctcp";
  std::string_view name() const override { return kName; }
  void init(State& s, uint64_t now_ns) override;
  void on_ack(State& s, const Ack& a) override;
  void on_ecn(State& s, uint64_t now_ns) override;

 private:
  double alpha_ = 1;            // the smoothed marked fraction
  uint64_t window_end_ = 0;     // snd_nxt when the observation window began; 0 before the first ACK
  uint64_t window_acked_ = 0;   // bytes acknowledged in this observation window
  uint64_t window_marked_ = 0;  // of those, bytes acknowledged with ECE
};

}  // namespace cleave::transport::cc
