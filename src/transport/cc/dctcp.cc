// dctcp.cc - DCTCP (RFC 8257): reductions scaled by the smoothed fraction of ECN-marked bytes.
#include <algorithm>

#include "algorithms.h"

namespace cleave::transport::cc {
namespace {

constexpr double kG = 1.0 / 16;  // RFC 8257 section 4.2: the estimation gain

}  // namespace

void Dctcp::init(State& s, uint64_t now_ns) {
  NewReno::init(s, now_ns);
  // Before any measurement assume every byte is marked: the first echo halves like Reno would
  // (RFC 8257 section 3.3 leaves the initial value open; 1 is the conservative choice).
  alpha_ = 1;
  window_end_ = 0;
  window_acked_ = 0;
  window_marked_ = 0;
}

void Dctcp::on_ack(State& s, const Ack& a) {
  // The marked fraction is measured in recovery too: the echoes there are the freshest news.
  window_acked_ += a.acked;
  window_marked_ += std::min(a.ece_acked, a.acked);
  if (window_end_ == 0) {
    window_end_ = a.snd_nxt;
  } else if (a.snd_una >= window_end_) {
    // Everything sent when the window began is acknowledged: one window of data, one sample.
    const double f = window_acked_ == 0
                         ? 0.0
                         : static_cast<double>(window_marked_) / static_cast<double>(window_acked_);
    alpha_ = (1 - kG) * alpha_ + kG * f;
    window_acked_ = 0;
    window_marked_ = 0;
    window_end_ = a.snd_nxt;
  }
  NewReno::on_ack(s, a);
}

void Dctcp::on_ecn(State& s, uint64_t /*now_ns*/) {
  // The cut rounds down, so an alpha that has decayed to almost nothing leaves cwnd alone.
  const auto cut = static_cast<uint64_t>(static_cast<double>(s.cwnd) * alpha_ / 2);
  s.cwnd = std::max(s.cwnd - cut, kMinSsthreshSegments * s.mss);
  s.ssthresh = s.cwnd;
  growth_.reset();
}

}  // namespace cleave::transport::cc
