// pacer.h - a per-QP token bucket that spaces packets at a rate (DCQCN's R_C, or any other).
//
// The transport asks may_send(now) before emitting a packet or descriptor and reports it with
// sent(wire_bytes, now); next_send_ns() says when to look again (a timer, or the next burst).
// Kept as a theoretical departure time (GCRA, equivalent to a token bucket of `burst` bytes):
// tat is when the bytes sent so far would have finished at exactly the rate, and a packet may go
// while tat is at most one burst's time ahead of now. So a sender that keeps up sends at the
// rate on average with no drift (each packet adds its exact cost to tat, in ns plus a 32-bit
// binary fraction), and one that polls coarsely or sends TSO bursts is not throttled below
// the rate as long as its lateness fits in the burst. An idle pacer does not bank more than one
// burst. The per-packet path is two multiplies and an add, no division (set_rate divides).
//
// A rate change applies to packets sent afterwards; the time already charged for packets sent
// at the old rate stays. Header-only, no clock: now_ns is the caller's.
#pragma once

#include <algorithm>
#include <cstdint>

namespace cleave::transport::cc {

class Pacer {
 public:
  static constexpr uint32_t kDefaultBurstBytes = 64 * 1024;
  // Below this the cost of one 4 GB sent() would overflow 64 bits of ns; above it the rest of
  // 8e9 % rate shifted by 16 would (set_rate's division).
  static constexpr uint64_t kMinRateBps = 1000;
  static constexpr uint64_t kMaxRateBps = 1ull << 47;

  Pacer() = default;
  explicit Pacer(uint64_t bps, uint32_t burst_bytes = kDefaultBurstBytes) : burst_(burst_bytes) {
    set_rate(bps);
  }

  // 0 pauses: nothing may be sent until a rate is set. Other rates are clamped to
  // [kMinRateBps, kMaxRateBps].
  void set_rate(uint64_t bps) {
    rate_ = bps == 0 ? 0 : std::clamp(bps, kMinRateBps, kMaxRateBps);
    if (rate_ == 0) return;
    // ns per byte = 8e9 / rate, as an integer part and a 32-bit fraction, the fraction by long
    // division in two 16-bit steps so that no intermediate exceeds 64 bits.
    constexpr uint64_t kNsBitsPerSec = 8'000'000'000;
    ns_int_ = kNsBitsPerSec / rate_;
    const uint64_t r1 = (kNsBitsPerSec % rate_) << 16;
    const uint64_t r2 = (r1 % rate_) << 16;
    ns_frac_ = ((r1 / rate_) << 16) | (r2 / rate_);
    // Rounded up: the pacer is never faster than the rate, and slower by under 2^-32 ns a byte.
    if (r2 % rate_ != 0 && ++ns_frac_ == (1ull << 32)) {
      ns_frac_ = 0;
      ns_int_++;
    }
    tau_ns_ = cost_ns(burst_);
  }
  // How many bytes may go back to back (in addition to the packet that starts the burst).
  void set_burst(uint32_t bytes) {
    burst_ = bytes;
    if (rate_ != 0) tau_ns_ = cost_ns(burst_);
  }

  bool may_send(uint64_t now_ns) const { return rate_ != 0 && tat_ns_ <= now_ns + tau_ns_; }
  // Any packet counts, also one sent when may_send() said no (a control packet that must go).
  void sent(uint32_t wire_bytes, uint64_t now_ns) {
    if (rate_ == 0) return;
    if (tat_ns_ < now_ns) {  // idle: the bucket is full, credit beyond it is not kept
      tat_ns_ = now_ns;
      tat_frac_ = 0;
    }
    // wire_bytes < 2^32 and ns_frac_ < 2^32: the product and the carried fraction fit 64 bits.
    const uint64_t frac = uint64_t{wire_bytes} * ns_frac_ + tat_frac_;
    tat_ns_ += uint64_t{wire_bytes} * ns_int_ + (frac >> 32);
    tat_frac_ = frac & 0xFFFF'FFFFu;
  }
  // The earliest time may_send() is true; ~0 when paused.
  uint64_t next_send_ns() const {
    if (rate_ == 0) return ~0ull;
    return tat_ns_ > tau_ns_ ? tat_ns_ - tau_ns_ : 0;
  }
  uint64_t rate_bps() const { return rate_; }
  uint32_t burst_bytes() const { return burst_; }

 private:
  uint64_t cost_ns(uint32_t bytes) const {
    return uint64_t{bytes} * ns_int_ + ((uint64_t{bytes} * ns_frac_) >> 32);
  }

  uint64_t rate_ = 0;
  uint64_t ns_int_ = 0;    // ns per byte, integer part
  uint64_t ns_frac_ = 0;   // and fraction, in 2^-32 ns
  uint64_t tau_ns_ = 0;    // the burst's time at the rate
  uint64_t tat_ns_ = 0;    // theoretical departure time of the bytes sent so far
  uint64_t tat_frac_ = 0;  // its fraction of a ns, 2^-32 units
  uint32_t burst_ = kDefaultBurstBytes;
};

}  // namespace cleave::transport::cc
