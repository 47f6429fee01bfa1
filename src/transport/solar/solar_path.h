// solar_path.h - one Solar path's sender state, pure logic: its congestion window (DCTCP,
// g = 1/16, cc/), its RTT and RTO (RFC 6298, rtt.h), and whether it is up: k retransmission
// timeouts in a row take it down, and the reply to a probe brings it back.
//
// The transport owns one per path and calls it on the path's events: a block sent, an ACK's
// news (bytes newly acknowledged, CE marks, an RTT sample), blocks found lost, the path's
// retransmission timer, probes. It keeps no per-sequence state: the transport knows which
// blocks are outstanding where and resends them; a path only counts bytes. Its "resolved" count
// (bytes acknowledged or given up, the sum never falls) plays the part of TCP's snd_una for
// DCTCP's observation windows and for one reduction per window of data. Not wired to anything
// yet. Time is in nanoseconds of the transport's clock. One owner thread; nothing allocates.
#pragma once

#include <cstdint>

#include "rtt.h"
#include "transport/cc/cc.h"

namespace cleave::transport::solar {

struct PathConfig {
  uint32_t block_bytes = 4096;           // a full block: the window's unit (its "MSS")
  uint32_t down_after_timeouts = 3;      // k: timeouts in a row that take the path down
  uint64_t initial_rto_ns = 10'000'000;  // before the first RTT sample
  uint64_t min_rto_ns = 1'000'000;
  uint64_t max_rto_ns = 1'000'000'000;      // also the ceiling of the backed-off RTO
  uint64_t probe_interval_ns = 10'000'000;  // between probes of a path that is down
};

// What one ACK (or NACK) told the sender about this path.
struct PathAck {
  uint64_t now_ns = 0;
  uint64_t acked_bytes = 0;   // bytes of blocks newly acknowledged (by largest or SACK)
  uint32_t acked_blocks = 0;  // how many blocks those were
  uint32_t ce_blocks = 0;     // CE count increase since the last ACK (modulo 2^32 by the caller)
  uint64_t rtt_ns = 0;        // now - sent_at(echo) - ACK delay, 0 when the echo gave none
};

class PathState {
 public:
  PathState(const PathConfig& cfg, uint64_t now_ns);
  PathState(const PathState&) = delete;
  PathState& operator=(const PathState&) = delete;
  ~PathState();

  bool up() const { return up_; }
  // The window has room for a block of `bytes` on a path that is up.
  bool can_send(uint32_t bytes) const { return up_ && inflight() + bytes <= cc_state_.cwnd; }
  void on_send(uint32_t bytes) { sent_ += bytes; }
  void on_ack(const PathAck& a);
  // Blocks of `bytes` found lost (three sequences or more below the largest acknowledged): no
  // longer in flight; the window shrinks once per window of data.
  void on_loss(uint64_t bytes, uint64_t now_ns);
  // A transmission the receiver refused (a NACK, e.g. a bad CRC32C): it arrived, so it is
  // neither acknowledged data for the window nor a loss; it is only no longer in flight.
  void on_refused(uint64_t bytes) { resolve(bytes); }
  // The path's retransmission timer fired: everything in flight is lost, the window drops to
  // one block, the RTO backs off. True when this timeout took the path down.
  bool on_timeout(uint64_t now_ns);
  // A path that is down is probed every probe_interval_ns.
  bool probe_due(uint64_t now_ns) const { return !up_ && now_ns >= next_probe_ns_; }
  void on_probe_sent(uint64_t now_ns) { next_probe_ns_ = now_ns + cfg_.probe_interval_ns; }
  // The probe's reply: up again with a fresh window (its capacity is unknown), RTT sampled.
  void on_probe_reply(uint64_t now_ns, uint64_t rtt_ns);

  // RFC 6298: SRTT + 4 RTTVAR within [min, max] (the initial RTO before a sample), doubled per
  // timeout in a row up to max.
  uint64_t rto_ns() const;
  uint64_t srtt_ns() const { return rtt_.srtt(); }
  uint64_t cwnd() const { return cc_state_.cwnd; }
  uint64_t inflight() const { return sent_ - resolved_; }
  uint32_t consecutive_timeouts() const { return timeouts_; }

 private:
  void resolve(uint64_t bytes);
  // One reduction per window of data, whatever its cause (CE or loss): news of data sent after
  // the last one is needed for the next.
  bool reduction_allowed() const { return resolved_ > cut_window_end_; }

  PathConfig cfg_;
  cc::Storage cc_mem_;
  cc::Algorithm* cc_;
  cc::State cc_state_;
  RttEstimator rtt_;
  bool up_ = true;
  uint32_t timeouts_ = 0;        // in a row; an ACK that acknowledges anything clears it
  uint32_t backoff_ = 0;         // RTO doublings
  uint64_t sent_ = 0;            // bytes sent on the path, ever
  uint64_t resolved_ = 0;        // of those, acknowledged or given up
  uint64_t cut_window_end_ = 0;  // sent_ at the last reduction
  uint64_t next_probe_ns_ = 0;
};

}  // namespace cleave::transport::solar
