// solar_path.cc - one Solar path's window, RTO and up/down state (solar_path.h).
#include "solar_path.h"

#include <algorithm>

namespace cleave::transport::solar {

namespace {
constexpr uint32_t kMaxBackoff = 30;  // 2^30 times any RTO is past every max_rto_ns
}

PathState::PathState(const PathConfig& cfg, uint64_t now_ns)
    : cfg_(cfg), cc_(cc::construct("dctcp", cc_mem_)) {
  cc_state_.mss = cfg_.block_bytes;
  cc_->init(cc_state_, now_ns);
}

PathState::~PathState() {
  cc_->~Algorithm();
}

void PathState::resolve(uint64_t bytes) {
  resolved_ += std::min(bytes, inflight());
}

void PathState::on_ack(const PathAck& a) {
  resolve(a.acked_bytes);
  if (a.rtt_ns != 0) rtt_.sample(a.rtt_ns);
  if (a.acked_bytes > 0) {
    timeouts_ = 0;
    backoff_ = 0;
  }
  if (!up_) return;  // a late ACK: the window restarts when a probe brings the path back
  // DCTCP counts marked bytes; an ACK gives marked blocks, so share its bytes out evenly.
  const uint32_t ce = std::min(a.ce_blocks, a.acked_blocks);
  cc::Ack ack;
  ack.now_ns = a.now_ns;
  ack.acked = uint32_t(std::min<uint64_t>(a.acked_bytes, UINT32_MAX));
  ack.ece_acked = ce == 0 ? 0 : uint32_t(uint64_t(ack.acked) * ce / a.acked_blocks);
  ack.rtt_us = uint32_t(std::min<uint64_t>(a.rtt_ns / 1000, UINT32_MAX));
  ack.snd_una = resolved_;
  ack.snd_nxt = sent_;
  cc_state_.srtt_us = uint32_t(std::min<uint64_t>(rtt_.srtt() / 1000, UINT32_MAX));
  cc_state_.inflight = inflight();
  cc_->on_ack(cc_state_, ack);
  if (a.ce_blocks > 0 && reduction_allowed()) {
    cc_->on_ecn(cc_state_, a.now_ns);
    cut_window_end_ = sent_;
  }
}

void PathState::on_loss(uint64_t bytes, uint64_t now_ns) {
  cc_state_.inflight = inflight();
  resolve(bytes);
  if (up_ && reduction_allowed()) {
    cc_->on_loss(cc_state_, now_ns);
    cut_window_end_ = sent_;
  }
}

bool PathState::on_timeout(uint64_t now_ns) {
  cc_state_.inflight = inflight();
  resolved_ = sent_;
  timeouts_++;
  backoff_ = std::min(backoff_ + 1, kMaxBackoff);
  cc_->on_rto(cc_state_, now_ns, timeouts_ == 1);
  cut_window_end_ = sent_;
  if (!up_ || timeouts_ < cfg_.down_after_timeouts) return false;
  up_ = false;
  next_probe_ns_ = now_ns;  // probe at once: the path may have come back already
  return true;
}

void PathState::on_probe_reply(uint64_t now_ns, uint64_t rtt_ns) {
  if (rtt_ns != 0) rtt_.sample(rtt_ns);
  up_ = true;
  timeouts_ = 0;
  backoff_ = 0;
  resolved_ = sent_;
  cut_window_end_ = sent_;
  cc_->init(cc_state_, now_ns);
}

uint64_t PathState::rto_ns() const {
  const uint64_t base = rtt_.has_sample() ? std::clamp(rtt_.rto(), cfg_.min_rto_ns, cfg_.max_rto_ns)
                                          : cfg_.initial_rto_ns;
  if (backoff_ >= 63 || base > (cfg_.max_rto_ns >> backoff_)) return cfg_.max_rto_ns;
  return std::min(base << backoff_, cfg_.max_rto_ns);
}

}  // namespace cleave::transport::solar
