// rtt.h - the round-trip time estimator of RFC 6298 (SRTT, RTTVAR and the RTO they give), the
// one every transport uses: TCP's retransmission timer, RoCEv2 selective repeat's.
//
// RFC 6298 section 2 with alpha = 1/8, beta = 1/4 and K = 4, in integer nanoseconds. What stays
// the caller's: Karn's rule (no sample from a segment sent again, section 3), the RTO before the
// first sample (2.1), its floor and ceiling (2.4, 2.5) and the backoff (5.5).
#pragma once

#include <algorithm>
#include <cstdint>

namespace cleave::transport {

class RttEstimator {
 public:
  // A measurement R: the first sets SRTT = R and RTTVAR = R/2 (2.2); each later one
  // RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R| with SRTT as it was before this sample, then
  // SRTT = 7/8 SRTT + 1/8 R (2.3). 0 counts as 1 ns, so a sample always leaves one behind.
  void sample(uint64_t r) {
    if (r == 0) r = 1;
    if (srtt_ == 0) {
      srtt_ = r;
      rttvar_ = r / 2;
      return;
    }
    const uint64_t err = srtt_ > r ? srtt_ - r : r - srtt_;
    rttvar_ = (3 * rttvar_ + err) / 4;
    srtt_ = (7 * srtt_ + r) / 8;
  }

  // RTO = SRTT + max(G, K * RTTVAR) (2.2, 2.3), G the clock granularity; meaningless before a
  // sample (has_sample()).
  uint64_t rto(uint64_t granularity = 0) const {
    return srtt_ + std::max<uint64_t>(granularity, 4 * rttvar_);
  }

  bool has_sample() const { return srtt_ != 0; }
  uint64_t srtt() const { return srtt_; }  // 0 before the first sample
  uint64_t rttvar() const { return rttvar_; }

  // Forgets every sample (a connection or queue pair starting over).
  void reset() { srtt_ = rttvar_ = 0; }

 private:
  uint64_t srtt_ = 0;
  uint64_t rttvar_ = 0;
};

}  // namespace cleave::transport
