// sd_notify.h - the systemd notification protocol without libsystemd.
//
// One datagram per message on the AF_UNIX socket named by $NOTIFY_SOCKET (a leading '@' is the
// abstract namespace). Without $NOTIFY_SOCKET every call is a no-op, so cleaved runs the same
// under systemd and by hand.
#pragma once

#include <chrono>
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

}  // namespace cleave::dp
