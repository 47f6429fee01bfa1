// newreno.cc - Reno growth (RFC 5681, RFC 3465) and NewReno's reductions (RFC 6582, RFC 3168).
#include <algorithm>

#include "algorithms.h"

namespace cleave::transport::cc {

uint64_t RenoGrowth::slow_start(State& s, uint64_t acked) {
  // At cwnd == ssthresh RFC 5681 allows either; congestion avoidance, so that a window just set
  // to ssthresh by a reduction does not double again.
  if (s.cwnd >= s.ssthresh) return acked;
  uint64_t inc = acked;
  if (inc < s.ssthresh - s.cwnd) {
    s.cwnd += inc;
    return 0;
  }
  inc = s.ssthresh - s.cwnd;
  s.cwnd = s.ssthresh;
  return acked - inc;
}

void RenoGrowth::congestion_avoidance(State& s, uint64_t acked) {
  ca_acked_ += acked;
  // A loop, not a division: each MSS added raises the bytes the next one costs.
  while (s.cwnd != 0 && ca_acked_ >= s.cwnd) {
    ca_acked_ -= s.cwnd;
    s.cwnd += s.mss;
  }
}

void NewReno::init(State& s, uint64_t /*now_ns*/) {
  s.cwnd = kInitialWindowSegments * s.mss;
  s.ssthresh = ~0ull;
  growth_.reset();
}

void NewReno::on_ack(State& s, const Ack& a) {
  if (a.in_recovery) return;
  growth_.grow(s, a.acked);
}

void NewReno::on_loss(State& s, uint64_t /*now_ns*/) {
  // cwnd = ssthresh, not ssthresh + 3 MSS: inflation during recovery is the transport's business.
  s.ssthresh = reno_ssthresh(s);
  s.cwnd = s.ssthresh;
  growth_.reset();
}

void NewReno::on_ecn(State& s, uint64_t now_ns) {
  on_loss(s, now_ns);
}

void NewReno::on_rto(State& s, uint64_t /*now_ns*/, bool new_episode) {
  if (new_episode) s.ssthresh = reno_ssthresh(s);
  s.cwnd = s.mss;
  growth_.reset();
}

void NewReno::on_recovery_end(State& s, uint64_t /*now_ns*/) {
  s.cwnd = s.ssthresh;
}

}  // namespace cleave::transport::cc
