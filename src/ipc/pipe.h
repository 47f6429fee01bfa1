// pipe.h - notification pipes: single-producer single-consumer rings of phase-tagged entries in
// shared memory (the layout and the phase rule are in shm_abi.h).
//
// Each side keeps its own index in private memory; nothing a peer writes is ever used as an
// index or a size. The producer's only read of peer state is PipeCtl::consumer, taken when its
// credits run out, and a value that cannot be right (ahead of the producer, or more than a ring
// behind) is refused and reported through corrupt(). A consumer facing a hostile producer sees
// garbage entries, never out-of-bounds ones: it copies each entry out and its owner checks the
// copy.
//
// Threads: one producer thread and one consumer thread per pipe, in the same process or not.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "shm_abi.h"

namespace cleave::ipc {

// The entry's last byte is its phase.
template <class E>
inline uint8_t load_phase(const E* e) {
  static_assert(std::is_trivially_copyable_v<E>);
  auto* p = const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(e) + sizeof(E) - 1);
  return std::atomic_ref<uint8_t>(*p).load(std::memory_order_acquire);
}

constexpr uint32_t log2_exact(uint32_t n) {
  uint32_t l = 0;
  while ((1u << l) < n)
    l++;
  return l;
}

// The phase written on the lap that index `i` lies in (see shm_abi.h).
constexpr uint8_t phase_of(uint64_t i, uint32_t lap_shift) {
  return static_cast<uint8_t>(((i >> lap_shift) + 1) & 1);
}

template <class E>
class PipeProducer {
 public:
  PipeProducer() = default;
  // `count` is a power of two; ring is count entries. The pipe must be zeroed before its first
  // use (a fresh pipe), or the producer must resume from the consumer's published index.
  PipeProducer(abi::PipeCtl* ctl, E* ring, uint32_t count)
      : ctl_(ctl), ring_(ring), mask_(count - 1), lap_shift_(log2_exact(count)), limit_(count) {}

  // Writes up to n entries (their phase bytes are ignored); returns how many it wrote. Fewer than
  // n means the ring is full: the consumer has not caught up.
  unsigned produce(const E* in, unsigned n) {
    unsigned room = credits(n);
    if (room < n) n = room;
    for (unsigned k = 0; k < n; k++, head_++) {
      E* slot = &ring_[head_ & mask_];
      std::memcpy(static_cast<void*>(slot), &in[k], sizeof(E) - 1);
      auto* phase = reinterpret_cast<uint8_t*>(slot) + sizeof(E) - 1;
      std::atomic_ref<uint8_t>(*phase).store(phase_of(head_, lap_shift_),
                                             std::memory_order_release);
    }
    return n;
  }

  // Entries the producer may write now, re-reading the consumer's index only when fewer than
  // `want` remain.
  unsigned credits(unsigned want = 1) {
    if (limit_ - head_ < want) refresh();
    return static_cast<unsigned>(limit_ - head_);
  }

  // After a burst: true when the consumer sleeps on its doorbell and must be woken; the arm is
  // then taken (the flag cleared), so one sleep costs one wake however many bursts come before
  // the consumer runs. The fence orders the entries just published before the read of the flag
  // (the consumer fences the other way round), so a consumer going to sleep either sees the
  // entries or is seen asleep. The exchange runs only when the flag is up.
  bool take_wake() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    std::atomic_ref<uint32_t> flag(ctl_->sleeping);
    return flag.load(std::memory_order_relaxed) != 0 &&
           flag.exchange(0, std::memory_order_relaxed) != 0;
  }

  // True once the consumer published an impossible index; the producer then stays within the
  // credits it had. The owner decides what a corrupt peer deserves.
  bool corrupt() const { return corrupt_; }
  uint64_t produced() const { return head_; }
  uint32_t capacity() const { return mask_ + 1; }

 private:
  void refresh() {
    if (corrupt_) return;  // sticky: a peer that lied once is not believed again
    uint64_t c = std::atomic_ref<uint64_t>(ctl_->consumer).load(std::memory_order_acquire);
    if (c > head_ || head_ - c > capacity()) {
      corrupt_ = true;
      return;
    }
    if (c + capacity() > limit_) limit_ = c + capacity();
  }

  abi::PipeCtl* ctl_ = nullptr;
  E* ring_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t lap_shift_ = 0;
  uint64_t head_ = 0;   // next entry to write
  uint64_t limit_ = 0;  // head may reach this without reading the consumer's index
  bool corrupt_ = false;
};

template <class E>
class PipeConsumer {
 public:
  PipeConsumer() = default;
  PipeConsumer(abi::PipeCtl* ctl, const E* ring, uint32_t count)
      : ctl_(ctl), ring_(ring), mask_(count - 1), lap_shift_(log2_exact(count)) {}

  // True when the next entry has been published.
  bool ready() const { return load_phase(&ring_[tail_ & mask_]) == phase_of(tail_, lap_shift_); }

  // Copies up to n published entries out, in order, and publishes the new index; returns how
  // many.
  unsigned consume(E* out, unsigned n) {
    unsigned k = 0;
    for (; k < n && ready(); k++, tail_++)
      std::memcpy(static_cast<void*>(&out[k]), &ring_[tail_ & mask_], sizeof(E));
    if (k != 0) std::atomic_ref<uint64_t>(ctl_->consumer).store(tail_, std::memory_order_release);
    return k;
  }

  // Copies up to n published entries out without taking them; take(k) then takes the first k.
  // Lets the owner stop before an entry it cannot serve yet (it is read again next time).
  unsigned peek(E* out, unsigned n) const {
    unsigned k = 0;
    for (uint64_t t = tail_; k < n && load_phase(&ring_[t & mask_]) == phase_of(t, lap_shift_);
         k++, t++)
      std::memcpy(static_cast<void*>(&out[k]), &ring_[t & mask_], sizeof(E));
    return k;
  }
  void take(unsigned k) {
    if (k == 0) return;
    tail_ += k;
    std::atomic_ref<uint64_t>(ctl_->consumer).store(tail_, std::memory_order_release);
  }

  // Doorbell: announce sleep, then look once more. Returns true when it is safe to sleep (no
  // entry arrived); the producer, seeing the flag, clears it and writes the eventfd (once per
  // arm). Call disarm() on waking (the flag may be up still if something else woke us).
  bool arm() {
    std::atomic_ref<uint32_t>(ctl_->sleeping).store(1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!ready()) return true;
    disarm();
    return false;
  }
  void disarm() { std::atomic_ref<uint32_t>(ctl_->sleeping).store(0, std::memory_order_relaxed); }

  uint64_t consumed() const { return tail_; }
  uint32_t capacity() const { return mask_ + 1; }

 private:
  abi::PipeCtl* ctl_ = nullptr;
  const E* ring_ = nullptr;
  uint32_t mask_ = 0;
  uint32_t lap_shift_ = 0;
  uint64_t tail_ = 0;  // next entry to read
};

// A pipe's parts at `offset` in a mapped region (offset already checked against the region).
struct PipeView {
  abi::PipeCtl* ctl;
  void* ring;
};
inline PipeView pipe_at(void* region_base, uint64_t offset) {
  auto* ctl = reinterpret_cast<abi::PipeCtl*>(static_cast<uint8_t*>(region_base) + offset);
  return {ctl, ctl + 1};
}

}  // namespace cleave::ipc
