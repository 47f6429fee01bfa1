// sd_notify.h - the systemd notification protocol without libsystemd.
//
// One datagram per message on the AF_UNIX socket named by $NOTIFY_SOCKET (a leading '@' is the
// abstract namespace). Without $NOTIFY_SOCKET every call is a no-op, so cleaved runs the same
// under systemd and by hand.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cleave::dp {

class SdNotify {
 public:
  SdNotify();  // reads $NOTIFY_SOCKET and $WATCHDOG_USEC (honouring $WATCHDOG_PID)
  SdNotify(const SdNotify&) = delete;
  SdNotify& operator=(const SdNotify&) = delete;
  ~SdNotify();

  bool enabled() const { return fd_ >= 0; }
  // Sends "READY=1", "STATUS=...", "WATCHDOG=1", "STOPPING=1" or several lines at once.
  bool send(std::string_view msg);
  // The watchdog interval systemd asked for, if any; ping at half of it.
  std::optional<std::chrono::microseconds> watchdog() const { return watchdog_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::optional<std::chrono::microseconds> watchdog_;
};

// When to ping the watchdog: once per period, and only while the dataplane makes progress, so
// systemd restarts a daemon whose polling core is stuck even though its main thread runs.
class WatchdogGate {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Verdict {
    kWait,     // nothing to do now
    kPing,     // send WATCHDOG=1
    kStalled,  // a ping is due but there was no progress (reported once per stall)
  };

  explicit WatchdogGate(std::chrono::microseconds period) : period_(period) {}
  // `progress` is any counter that advances while the dataplane is alive.
  Verdict check(uint64_t progress, Clock::time_point now);

 private:
  std::chrono::microseconds period_;
  Clock::time_point next_{};
  uint64_t last_ = UINT64_MAX;
  bool stalled_ = false;
};

}  // namespace cleave::dp
