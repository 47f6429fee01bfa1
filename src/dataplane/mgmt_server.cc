// mgmt_server.cc - unix socket server for management requests (main thread).
#include "mgmt_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <spdlog/spdlog.h>

#include "management.h"
#include "mgmt_protocol.h"

namespace cleave::dp {

using nlohmann::json;

namespace {

constexpr size_t kMaxClients = 64;

// Client text may be echoed in messages: invalid UTF-8 is replaced, never thrown on.
std::string encode(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string error_answer(const json& id, std::string_view code, const std::string& message) {
  return encode({{"version", mgmt::kProtocolVersion},
                 {"id", id},
                 {"ok", false},
                 {"error", {{"code", code}, {"message", message}}}});
}

}  // namespace

MgmtServer::MgmtServer(std::string path, int epoll_fd, Handler handler)
    : path_(std::move(path)), epoll_fd_(epoll_fd), handler_(std::move(handler)) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) {
    throw std::runtime_error("control socket path too long: " + path_);
  }
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  unlink(path_.c_str());     // left by a daemon that crashed; we hold the instance lock
  mode_t old = umask(0117);  // socket file rw for owner and group
  int r = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (r != 0 || listen(listen_fd_, 16) != 0) {
    int err = errno;
    close(listen_fd_);
    throw std::runtime_error("cannot listen on " + path_ + ": " + std::strerror(err));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
}

MgmtServer::~MgmtServer() {
  while (!clients_.empty())
    close_client(clients_.begin()->first);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  close(listen_fd_);
  unlink(path_.c_str());
}

bool MgmtServer::on_event(int fd, uint32_t events) {
  if (fd == listen_fd_) {
    accept_clients();
    return true;
  }
  if (!clients_.contains(fd)) return false;
  try {
    on_client(fd, events);
  } catch (const std::exception& e) {
    // A request must never take the daemon down: drop that client, keep serving.
    spdlog::error("management client dropped after an internal error: {}", e.what());
    close_client(fd);
  }
  return true;
}

void MgmtServer::accept_clients() {
  for (;;) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a client that gave up
    if (clients_.size() >= kMaxClients) {
      auto idlest = std::min_element(clients_.begin(), clients_.end(), [](auto& a, auto& b) {
        return a.second.last_active < b.second.last_active;
      });
      close_client(idlest->first);
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    clients_[fd].last_active = ++activity_;
  }
}

void MgmtServer::close_client(int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  clients_.erase(fd);
}

bool MgmtServer::flush(int fd, Client& c) {
  while (!c.out.empty()) {
    ssize_t n = send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
  if (c.out.size() > mgmt::kMaxAnswerBytes) return false;  // the client does not read
  // After EOF only writability matters: a level-triggered EPOLLIN would fire forever.
  epoll_event ev{};
  ev.events =
      (c.eof ? 0u : uint32_t{EPOLLIN | EPOLLRDHUP}) | (c.out.empty() ? 0u : uint32_t{EPOLLOUT});
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
  return true;
}

void MgmtServer::on_client(int fd, uint32_t events) {
  Client& c = clients_[fd];
  if ((events & (EPOLLHUP | EPOLLERR)) != 0) return close_client(fd);
  if ((events & EPOLLIN) != 0) {
    char buf[4096];
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof buf, 0);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        if (c.in.size() > mgmt::kMaxRequestBytes && c.in.find('\n') == std::string::npos) {
          c.out += error_answer(
                       nullptr, mgmt::kErrBadRequest,
                       "request longer than " + std::to_string(mgmt::kMaxRequestBytes) + " bytes") +
                   "\n";
          flush(fd, c);
          return close_client(fd);
        }
        continue;
      }
      if (n == 0) c.eof = true;
      break;  // EAGAIN or error
    }
    for (size_t nl; (nl = c.in.find('\n')) != std::string::npos;) {
      std::string line = c.in.substr(0, nl);
      c.in.erase(0, nl + 1);
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      c.out += answer(line);
      c.out += '\n';
      c.last_active = ++activity_;
    }
  }
  if (!flush(fd, c) || (c.eof && c.out.empty())) close_client(fd);
}

std::string MgmtServer::answer(std::string_view line) {
  json req;
  try {
    req = json::parse(line);
  } catch (const json::exception& e) {
    return error_answer(nullptr, mgmt::kErrBadRequest, std::string("invalid JSON: ") + e.what());
  }
  if (!req.is_object()) {
    return error_answer(nullptr, mgmt::kErrBadRequest, "a request must be a JSON object");
  }
  json id = req.contains("id") ? req["id"] : json(nullptr);
  if (!req.contains("version") || !req["version"].is_number_integer()) {
    return error_answer(id, mgmt::kErrBadRequest, "request has no integer 'version'");
  }
  if (req["version"].get<int64_t>() > mgmt::kProtocolVersion) {
    return error_answer(id, mgmt::kErrUnsupportedVersion,
                        "this cleaved speaks management protocol version " +
                            std::to_string(mgmt::kProtocolVersion) + ", the request uses " +
                            std::to_string(req["version"].get<int64_t>()));
  }
  if (!req.contains("command") || !req["command"].is_string()) {
    return error_answer(id, mgmt::kErrBadRequest, "request has no string 'command'");
  }
  json args = req.contains("args") ? req["args"] : json::object();
  if (!args.is_object()) {
    return error_answer(id, mgmt::kErrBadRequest, "'args' must be an object");
  }
  try {
    json result = handler_(req["command"].get<std::string>(), args);
    return encode(
        json{{"version", mgmt::kProtocolVersion}, {"id", id}, {"ok", true}, {"result", result}});
  } catch (const MgmtError& e) {
    return error_answer(id, e.code, e.what());
  } catch (const std::exception& e) {
    return error_answer(id, "internal", e.what());
  }
}

}  // namespace cleave::dp
