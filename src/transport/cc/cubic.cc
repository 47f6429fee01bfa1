// cubic.cc - CUBIC (RFC 9438): window growth as a cubic function of the time since the last
// reduction, with fast convergence and a Reno-friendly floor. No HyStart.
#include <algorithm>
#include <cmath>

#include "algorithms.h"

namespace cleave::transport::cc {
namespace {

constexpr double kC = 0.4;     // RFC 9438 section 4.2: segments per second cubed
constexpr double kBeta = 0.7;  // section 4.6: the multiplicative decrease factor
// Section 4.3: the additive increase that makes W_est match Reno's average rate given kBeta.
constexpr double kAlphaCubic = 3 * (1 - kBeta) / (1 + kBeta);

}  // namespace

void Cubic::init(State& s, uint64_t /*now_ns*/) {
  s.cwnd = kInitialWindowSegments * s.mss;
  s.ssthresh = ~0ull;
  growth_.reset();
  w_max_ = 0;
  cwnd_prior_ = 0;
  w_est_ = 0;
  k_s_ = 0;
  carry_ = 0;
  epoch_start_ns_ = 0;
  in_epoch_ = false;
}

void Cubic::on_ack(State& s, const Ack& a) {
  if (a.in_recovery) return;
  const uint64_t acked = growth_.slow_start(s, a.acked);
  if (acked == 0 || s.cwnd < s.ssthresh) return;
  congestion_avoidance(s, a, acked);
}

void Cubic::congestion_avoidance(State& s, const Ack& a, uint64_t acked) {
  const double mss = s.mss;
  const auto cwnd = static_cast<double>(s.cwnd);
  if (!in_epoch_) {
    // Section 4.2: the epoch starts with congestion avoidance. Without a W_max above cwnd (no
    // loss yet, or after a timeout, section 4.8) the curve starts here, at its convex part.
    in_epoch_ = true;
    epoch_start_ns_ = a.now_ns;
    w_est_ = cwnd;
    carry_ = 0;
    if (w_max_ <= cwnd) {
      w_max_ = cwnd;
      k_s_ = 0;
    } else {
      k_s_ = std::cbrt((w_max_ - cwnd) / mss / kC);
    }
  }
  const double t =
      a.now_ns > epoch_start_ns_ ? static_cast<double>(a.now_ns - epoch_start_ns_) * 1e-9 : 0.0;
  // Section 4.2 aims one RTT ahead; the minimum RTT keeps queueing delay out of the aim.
  const uint32_t rtt_us = s.min_rtt_us != 0 ? s.min_rtt_us : s.srtt_us != 0 ? s.srtt_us : a.rtt_us;
  const auto w_cubic = [&](double at) {
    const double d = at - k_s_;
    return kC * d * d * d * mss + w_max_;
  };

  // Section 4.3: Reno's window, had it been in charge since the epoch began.
  const double alpha = w_est_ >= cwnd_prior_ ? 1.0 : kAlphaCubic;
  w_est_ += alpha * static_cast<double>(acked) * mss / cwnd;

  if (w_cubic(t) < w_est_) {
    // The Reno-friendly region: short RTTs or small windows, where Reno would grow faster.
    if (w_est_ > cwnd) {
      s.cwnd = static_cast<uint64_t>(w_est_);
      carry_ = w_est_ - static_cast<double>(s.cwnd);
    }
    return;
  }
  // Sections 4.4 and 4.5: close (target - cwnd) / cwnd of the gap per MSS acknowledged, with the
  // target clamped so that one RTT at most grows the window by half.
  const double target = std::clamp(w_cubic(t + rtt_us * 1e-6), cwnd, 1.5 * cwnd);
  carry_ += (target - cwnd) * static_cast<double>(acked) / cwnd;
  const auto whole = static_cast<uint64_t>(carry_);
  s.cwnd += whole;
  carry_ -= static_cast<double>(whole);
}

void Cubic::reduce(State& s) {
  const auto cwnd = static_cast<double>(s.cwnd);
  // Section 4.7, fast convergence: losing below the last W_max means a new flow is taking its
  // share; aim lower so that it gets there sooner.
  w_max_ = cwnd < w_max_ ? cwnd * (1 + kBeta) / 2 : cwnd;
  cwnd_prior_ = cwnd;
  // Section 4.6 with cwnd for the flight size, as Linux does (the RFC allows either).
  s.ssthresh = std::max(static_cast<uint64_t>(cwnd * kBeta), kMinSsthreshSegments * s.mss);
  s.cwnd = s.ssthresh;
  in_epoch_ = false;
  growth_.reset();
}

void Cubic::on_loss(State& s, uint64_t /*now_ns*/) {
  reduce(s);
}

// Section 4.6: an ECN echo is a congestion event like a loss.
void Cubic::on_ecn(State& s, uint64_t /*now_ns*/) {
  reduce(s);
}

void Cubic::on_rto(State& s, uint64_t /*now_ns*/, bool new_episode) {
  // Section 4.8: ssthresh as for a loss, cwnd as Reno; the next epoch starts its curve at
  // whatever slow start reaches, with K = 0, so forget W_max. Inside an episode the reduction it
  // made stands (its W_max too); only the window collapses.
  if (new_episode) {
    const auto cwnd = static_cast<double>(s.cwnd);
    cwnd_prior_ = cwnd;
    s.ssthresh = std::max(static_cast<uint64_t>(cwnd * kBeta), kMinSsthreshSegments * s.mss);
    w_max_ = 0;
  }
  s.cwnd = s.mss;
  in_epoch_ = false;
  growth_.reset();
}

void Cubic::on_recovery_end(State& s, uint64_t /*now_ns*/) {
  s.cwnd = s.ssthresh;
}

}  // namespace cleave::transport::cc
