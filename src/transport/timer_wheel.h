// timer_wheel.h - a hashed timing wheel for one polling thread: O(1) arm and cancel.
//
// Timers are intrusive: the owner embeds a Timer and the wheel links it, so arming never
// allocates. Single-threaded: only the thread that calls advance() may arm or cancel.
// Time is in ticks of a fixed number of clock units (TSC cycles in the dataplane, nanoseconds in
// transports): "cycles" below means those units. arm() counts from the wheel's time (the last
// advance()); a timer fires on the first advance() that reaches its deadline, never earlier.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cleave {

struct Timer {
  using Fn = void (*)(Timer* t, void* arg);

  Fn fn = nullptr;
  void* arg = nullptr;
  // Owned by the wheel while armed.
  Timer* next = nullptr;
  Timer* prev = nullptr;
  uint64_t deadline = 0;  // tick

  bool armed() const { return next != nullptr; }
};

class TimerWheel {
 public:
  // tick_cycles: TSC cycles per tick; slots: a power of two.
  TimerWheel(uint64_t tick_cycles, uint64_t now_cycles, uint32_t slots = 4096);
  TimerWheel(const TimerWheel&) = delete;
  TimerWheel& operator=(const TimerWheel&) = delete;

  // (Re)arms t to fire `cycles` after the wheel's time, rounded up to a whole tick (at least one).
  void arm(Timer* t, uint64_t cycles);
  void cancel(Timer* t);
  // Fires every timer whose deadline is at or before now; returns how many fired.
  unsigned advance(uint64_t now_cycles);

  size_t armed_count() const { return armed_; }

 private:
  void link(Timer* t);
  static void unlink(Timer* t);

  uint64_t tick_cycles_;
  uint64_t now_tick_;  // every slot up to and including this tick has been processed
  uint32_t mask_;
  size_t armed_ = 0;
  std::vector<Timer> heads_;  // circular list sentinels, one per slot
};

}  // namespace cleave
