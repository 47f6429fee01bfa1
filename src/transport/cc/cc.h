// cc.h - congestion control, a per-flow choice behind one interface (NewReno, CUBIC, DCTCP).
//
// The transport owns the window state (State) and calls the algorithm on the events that move
// it: acknowledged data, a loss episode, an ECN echo, a retransmission timeout, the end of
// recovery. The algorithm only computes; it never sends. One Algorithm object per flow, built in
// place in storage the flow owns (no heap allocation when flows open on the dataplane lcore).
//
// Windows are in bytes. Time is in nanoseconds of the transport's clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <string_view>

namespace cleave::transport::cc {

// The window state a transport keeps per flow. The transport sets mss and inflight before each
// call that reduces; the algorithm reads them and updates cwnd and ssthresh.
struct State {
  uint32_t mss = 1460;
  uint64_t cwnd = 0;          // congestion window
  uint64_t ssthresh = ~0ull;  // slow-start threshold; "infinite" at first
  uint64_t inflight = 0;      // the flight a reduction scales (RFC 5681 FlightSize, <= cwnd)
  uint32_t srtt_us = 0;       // smoothed RTT, 0 before the first sample
  uint32_t min_rtt_us = 0;    // lowest RTT seen, 0 before the first sample
};

// One acknowledgment that advanced the sender's knowledge.
struct Ack {
  uint64_t now_ns = 0;
  uint32_t acked = 0;        // bytes newly acknowledged, cumulatively or by SACK
  uint32_t ece_acked = 0;    // of those, bytes acknowledged by segments with ECE set (DCTCP)
  uint32_t rtt_us = 0;       // an RTT sample taken from this ACK, 0 when none
  uint64_t snd_una = 0;      // the cumulative ACK point after this ACK (DCTCP observation windows);
                             // a 64-bit byte count since the flow began, so it never wraps
  uint64_t snd_nxt = 0;      // the next byte to send, same count
  bool in_recovery = false;  // fast recovery is in progress: cwnd must not grow
};

class Algorithm {
 public:
  virtual ~Algorithm() = default;
  virtual std::string_view name() const = 0;

  // The flow starts: sets the initial window (RFC 6928: 10 segments) and ssthresh.
  virtual void init(State& s, uint64_t now_ns) = 0;
  // Data was acknowledged: grow cwnd (slow start, congestion avoidance) unless in recovery, and
  // keep whatever per-ACK statistics the algorithm needs (DCTCP's marked fraction).
  virtual void on_ack(State& s, const Ack& a) = 0;
  // A loss episode begins (fast retransmit or RACK): set ssthresh and cwnd for recovery. Called
  // once per episode.
  virtual void on_loss(State& s, uint64_t now_ns) = 0;
  // The peer echoed congestion (ECE), at most once per window of data (the transport guards):
  // reduce like a loss (RFC 3168), or by the marked fraction (DCTCP).
  virtual void on_ecn(State& s, uint64_t now_ns) = 0;
  // The retransmission timer expired: cwnd one segment (RFC 5681 3.1). An RTO that begins a loss
  // episode also sets ssthresh from the window, as on_loss does; one inside an episode (in fast
  // recovery, or again before the data outstanding at an earlier RTO is acknowledged) keeps the
  // ssthresh the episode set: one reduction per window of data.
  virtual void on_rto(State& s, uint64_t now_ns, bool new_episode) = 0;
  // Fast recovery ended: deflate the window to ssthresh (RFC 6582).
  virtual void on_recovery_end(State& s, uint64_t now_ns) = 0;

 protected:
  Algorithm() = default;
  Algorithm(const Algorithm&) = default;
  Algorithm& operator=(const Algorithm&) = default;
};

// Room a flow reserves for its algorithm; every built-in one fits (static_assert in cc.cc).
inline constexpr size_t kStorageBytes = 128;
struct alignas(std::max_align_t) Storage {
  unsigned char bytes[kStorageBytes];
};

// Builds the algorithm called `name` in `mem` and returns it (destroy with ~Algorithm()), or
// nullptr when there is no such algorithm.
Algorithm* construct(std::string_view name, Storage& mem);
// The algorithms by name, the default first.
std::span<const std::string_view> names();

}  // namespace cleave::transport::cc
