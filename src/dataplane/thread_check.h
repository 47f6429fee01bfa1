// thread_check.h - which thread runs what, checked rather than only documented (eRPC's
// kDatapathChecks and in_dispatch()): state that belongs to one thread holds a ThreadOwner, and
// the functions only that thread may call check it.
//
// The dataplane lcore's state (lcore/: the loop, the flow path, the app path) is bound by the
// loop: each poll binds the calling thread, so whichever thread drives the loop (the lcore in
// cleaved, a test's thread in the tests) owns it from then on, and another thread calling in
// trips the check. The main thread's state (control/: the app and control sockets) is bound when
// it is made. A trip prints what was called from where, and aborts.
//
// On in debug and sanitizer builds (meson's debug and debugoptimized, whose asserts are on, and
// -Db_sanitize builds); off in release builds, where a check costs nothing. Build with
// -DCLEAVE_DATAPATH_CHECKS=0 or =1 to force it.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>

namespace cleave::dp {

#if defined(CLEAVE_DATAPATH_CHECKS)
inline constexpr bool kDatapathChecks = CLEAVE_DATAPATH_CHECKS != 0;
#elif !defined(NDEBUG) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kDatapathChecks = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(undefined_behavior_sanitizer)
inline constexpr bool kDatapathChecks = true;
#else
inline constexpr bool kDatapathChecks = false;
#endif
#else
inline constexpr bool kDatapathChecks = false;
#endif

class ThreadOwner {
 public:
  // `thread` names the owner in a trip's message ("dataplane lcore", "main").
  explicit ThreadOwner(const char* thread) : thread_(thread) {}
  ThreadOwner(const ThreadOwner&) = delete;
  ThreadOwner& operator=(const ThreadOwner&) = delete;

  // The calling thread owns the state from now on.
  void bind() {
    if constexpr (kDatapathChecks) {
      owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
    }
  }
  // Aborts when a thread other than the owner calls `fn` (before the first bind, any may).
  void check([[maybe_unused]] const char* fn) const {
    if constexpr (kDatapathChecks) {
      const std::thread::id owner = owner_.load(std::memory_order_relaxed);
      if (owner != std::thread::id() && owner != std::this_thread::get_id()) trip(fn);
    }
  }

 private:
  [[noreturn]] void trip(const char* fn) const {
    std::fprintf(stderr, "cleaved: %s called off the %s thread (thread_check.h)\n", fn, thread_);
    std::abort();
  }

  const char* thread_;
  std::atomic<std::thread::id> owner_{};
};

}  // namespace cleave::dp
