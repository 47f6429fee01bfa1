// timer_wheel.cc - hashed timing wheel: one circular list per slot, deadlines in absolute ticks.
#include "timer_wheel.h"

#include <cassert>

namespace cleave {

TimerWheel::TimerWheel(uint64_t tick_cycles, uint64_t now_cycles, uint32_t slots)
    : tick_cycles_(tick_cycles == 0 ? 1 : tick_cycles),
      now_tick_(now_cycles / tick_cycles_),
      mask_(slots - 1),
      heads_(slots) {
  assert(slots != 0 && (slots & (slots - 1)) == 0);
  for (Timer& h : heads_)
    h.next = h.prev = &h;
}

void TimerWheel::link(Timer* t) {
  Timer* head = &heads_[t->deadline & mask_];
  t->next = head;
  t->prev = head->prev;
  head->prev->next = t;
  head->prev = t;
}

void TimerWheel::unlink(Timer* t) {
  t->prev->next = t->next;
  t->next->prev = t->prev;
  t->next = t->prev = nullptr;
}

void TimerWheel::arm(Timer* t, uint64_t cycles) {
  if (t->armed()) {
    unlink(t);
    armed_--;
  }
  // Round up, and never into the slot already processed: a timer armed for 0 fires next tick.
  uint64_t ticks = (cycles + tick_cycles_ - 1) / tick_cycles_;
  t->deadline = now_tick_ + (ticks == 0 ? 1 : ticks);
  link(t);
  armed_++;
}

void TimerWheel::cancel(Timer* t) {
  if (!t->armed()) return;
  unlink(t);
  armed_--;
}

unsigned TimerWheel::advance(uint64_t now_cycles) {
  uint64_t target = now_cycles / tick_cycles_;
  if (target <= now_tick_) return 0;
  if (armed_ == 0) {
    now_tick_ = target;
    return 0;
  }
  // Move every due timer to a local list first, then fire: a callback may arm or cancel any
  // timer, including others that are due, without disturbing the walk over the slots.
  Timer due;
  due.next = due.prev = &due;
  // After a long stall, one sweep over every slot covers all deadlines up to target.
  uint64_t first = target - now_tick_ > mask_ ? target - mask_ : now_tick_ + 1;
  for (uint64_t tick = first; tick <= target; tick++) {
    Timer* head = &heads_[tick & mask_];
    for (Timer* t = head->next; t != head;) {
      Timer* next = t->next;
      if (t->deadline <= target) {
        unlink(t);
        t->next = &due;
        t->prev = due.prev;
        due.prev->next = t;
        due.prev = t;
      }
      t = next;
    }
  }
  now_tick_ = target;
  unsigned fired = 0;
  while (due.next != &due) {
    Timer* t = due.next;
    unlink(t);
    armed_--;
    fired++;
    t->fn(t, t->arg);
  }
  return fired;
}

}  // namespace cleave
