// sd_notify.cc - datagrams to $NOTIFY_SOCKET.
#include "control/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace cleave::dp {

SdNotify::SdNotify() {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (path == nullptr || (path[0] != '/' && path[0] != '@') ||
      std::strlen(path) >= sizeof(sockaddr_un::sun_path)) {
    return;
  }
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) return;
  path_ = path;

  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* pid = std::getenv("WATCHDOG_PID");
  if (usec != nullptr && (pid == nullptr || std::strtol(pid, nullptr, 10) == getpid())) {
    long long v = std::strtoll(usec, nullptr, 10);
    if (v > 0) watchdog_ = std::chrono::microseconds(v);
  }
}

SdNotify::~SdNotify() {
  if (fd_ >= 0) close(fd_);
}

bool SdNotify::send(std::string_view msg) {
  if (fd_ < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path_.data(), path_.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path_.size());
  if (path_[0] == '@') {
    addr.sun_path[0] = '\0';  // abstract namespace: no terminating NUL counted
  } else {
    len++;
  }
  return sendto(fd_, msg.data(), msg.size(), MSG_NOSIGNAL, reinterpret_cast<sockaddr*>(&addr),
                len) == static_cast<ssize_t>(msg.size());
}

WatchdogGate::Verdict WatchdogGate::check(uint64_t progress, Clock::time_point now) {
  if (period_.count() == 0 || now < next_) return Verdict::kWait;
  if (progress == last_) {
    if (stalled_) return Verdict::kWait;
    stalled_ = true;
    return Verdict::kStalled;
  }
  last_ = progress;
  stalled_ = false;
  next_ = now + period_;
  return Verdict::kPing;
}

}  // namespace cleave::dp
