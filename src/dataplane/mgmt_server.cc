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

constexpr unsigned kAcceptsPerTurn = 32;  // then the other clients get a turn
// A client with this many answer bytes unsent is not read from until it takes them.
constexpr size_t kOutHighWater = size_t{256} * 1024;

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

size_t LineSplitter::room() const {
  if (ready()) return 0;  // a complete line may wait: take it first
  size_t partial = buf_.size() - tail_;
  return partial > max_ ? 0 : max_ + 1 - partial;
}

bool LineSplitter::append(const char* p, size_t n) {
  // Drop the lines already returned once they are at least half the buffer: each byte is moved
  // at most about once, so the cost stays linear however many lines one read brings.
  if (head_ > 0 && head_ >= buf_.size() - head_) {
    buf_.erase(0, head_);
    scan_ = scan_ > head_ ? scan_ - head_ : 0;
    tail_ -= head_;
    head_ = 0;
  }
  size_t at = buf_.size();
  buf_.append(p, n);
  const std::string_view all(buf_);
  for (size_t nl; (nl = all.find('\n', at)) != std::string_view::npos;) {
    if (nl - tail_ > max_) return false;
    tail_ = at = nl + 1;
  }
  return buf_.size() - tail_ <= max_;
}

std::optional<std::string_view> LineSplitter::next() {
  const std::string_view all(buf_);
  size_t nl = all.find('\n', std::max(scan_, head_));
  if (nl == std::string_view::npos) {
    scan_ = buf_.size();
    return std::nullopt;
  }
  std::string_view line = all.substr(head_, nl - head_);
  head_ = scan_ = nl + 1;
  return line;
}

std::string parse_request(std::string_view line, json& id, std::string& command, json& args) {
  id = nullptr;
  json req;
  try {
    req = json::parse(line);
  } catch (const json::exception& e) {
    return error_answer(nullptr, mgmt::kErrBadRequest, std::string("invalid JSON: ") + e.what());
  }
  if (!req.is_object()) {
    return error_answer(nullptr, mgmt::kErrBadRequest, "a request must be a JSON object");
  }
  if (req.contains("id")) id = req["id"];
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
  args = req.contains("args") ? req["args"] : json::object();
  if (!args.is_object()) return error_answer(id, mgmt::kErrBadRequest, "'args' must be an object");
  command = req["command"].get<std::string>();
  return {};
}

MgmtServer::MgmtServer(std::string path, int epoll_fd, Handler handler, MgmtLimits limits)
    : path_(std::move(path)),
      epoll_fd_(epoll_fd),
      handler_(std::move(handler)),
      limits_(limits),
      table_(limits.clients) {
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
  // A bounded number per turn: a connect flood must not keep the main thread here.
  for (unsigned i = 0; i < kAcceptsPerTurn; i++) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a client that gave up
    ucred cred{};
    if (!peer_cred(fd, cred)) {
      close(fd);
      continue;
    }
    ClientTable::Decision d = table_.admit(fd, cred.uid);
    for (int gone : d.gone) {
      bump(counters_.reaped);
      close_client(gone);
    }
    if (d.evict >= 0) {
      bump(counters_.evicted);
      tell(d.evict, mgmt::kErrUnavailable,
           "cleaved closed this connection to make room for another client; connect again");
      close_client(d.evict);
    }
    if (!d.admit) {
      bump(counters_.refused);
      tell(fd, mgmt::kErrUnavailable,
           "too many connections from uid " + std::to_string(cred.uid) + " (at most " +
               std::to_string(limits_.clients.per_uid) +
               ", all busy with requests); try again when one is answered");
      close(fd);
      continue;
    }
    bump(counters_.accepted);
    Client& c = clients_.emplace(fd, Client(mgmt::kMaxRequestBytes)).first->second;
    c.uid = cred.uid;
    counters_.clients.store(clients_.size(), std::memory_order_relaxed);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void MgmtServer::tell(int fd, std::string_view code, const std::string& message) {
  std::string line = error_answer(nullptr, code, message) + "\n";
  (void)!send(fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

void MgmtServer::close_client(int fd) {
  table_.forget(fd);
  if (clients_.erase(fd) == 0) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  counters_.clients.store(clients_.size(), std::memory_order_relaxed);
}

bool MgmtServer::flush(int fd, Client& c) {
  while (c.out_head < c.out.size()) {
    ssize_t n = send(fd, c.out.data() + c.out_head, c.out.size() - c.out_head, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return false;
    }
    c.out_head += static_cast<size_t>(n);
  }
  // Sent bytes go once they are half the buffer: linear in the bytes however they trickle out.
  if (c.out_head > 0 && c.out_head >= c.out.size() - c.out_head) {
    c.out.erase(0, c.out_head);
    c.out_head = 0;
  }
  return c.out.size() - c.out_head <= mgmt::kMaxAnswerBytes;  // else the client does not read
}

bool MgmtServer::serve(int fd, Client& c) {
  char buf[16384];
  for (size_t served = 0;;) {
    // A client that does not take its answers gets no more of them for now.
    if (c.out.size() - c.out_head > kOutHighWater) return true;
    if (served == limits_.requests_per_turn) {
      if (c.in.ready()) bump(deferred_);
      return true;
    }
    if (std::optional<std::string_view> line = c.in.next()) {
      served++;  // blank lines count: they cost a turn's work too
      if (line->find_first_not_of(" \t\r") == std::string_view::npos) continue;
      c.out += answer(*line);
      c.out += '\n';
      bump(requests_);
      continue;
    }
    if (c.eof) return true;
    // Only what the current request can still take: the limit holds on every read.
    ssize_t n = recv(fd, buf, std::min(sizeof buf, c.in.room()), 0);
    if (n > 0) {
      if (!c.in.append(buf, static_cast<size_t>(n))) {
        bump(oversized_);
        c.out += error_answer(nullptr, mgmt::kErrBadRequest,
                              "request longer than " + std::to_string(mgmt::kMaxRequestBytes) +
                                  " bytes; closing the connection");
        c.out += '\n';
        flush(fd, c);
        return false;
      }
      continue;
    }
    if (n == 0) {
      c.eof = true;
      return true;
    }
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void MgmtServer::watch(int fd, const Client& c) {
  // Reading again waits while answers pile up or after EOF (a level-triggered EPOLLIN or RDHUP
  // would fire forever); writability stands for "more to do" while requests wait in the buffer.
  bool backlog = c.out.size() - c.out_head > kOutHighWater;
  bool out = c.out_head < c.out.size() || c.in.ready();
  epoll_event ev{};
  ev.events =
      (c.eof || backlog ? 0u : uint32_t{EPOLLIN | EPOLLRDHUP}) | (out ? uint32_t{EPOLLOUT} : 0u);
  ev.data.fd = fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
}

void MgmtServer::on_client(int fd, uint32_t events) {
  Client& c = clients_.at(fd);
  if ((events & (EPOLLHUP | EPOLLERR)) != 0) return close_client(fd);
  if (!flush(fd, c) || !serve(fd, c) || !flush(fd, c)) return close_client(fd);
  bool unsent = c.out_head < c.out.size();
  if (c.eof && !c.in.ready() && !unsent) return close_client(fd);
  table_.note(fd, !c.in.empty() || unsent);
  watch(fd, c);
}

std::string MgmtServer::answer(std::string_view line) {
  json id, args;
  std::string command;
  if (std::string error = parse_request(line, id, command, args); !error.empty()) return error;
  try {
    json result = handler_(command, args);
    return encode(
        json{{"version", mgmt::kProtocolVersion}, {"id", id}, {"ok", true}, {"result", result}});
  } catch (const MgmtError& e) {
    return error_answer(id, e.code, e.what());
  } catch (const std::exception& e) {
    return error_answer(id, "internal", e.what());
  }
}

json MgmtServer::stats() const {
  return {{"clients", get(counters_.clients)},
          {"max_clients", limits_.clients.total},
          {"max_clients_per_uid", limits_.clients.per_uid},
          {"requests_per_turn", limits_.requests_per_turn},
          {"max_request_bytes", mgmt::kMaxRequestBytes},
          {"accepted", get(counters_.accepted)},
          {"refused", get(counters_.refused)},
          {"evicted", get(counters_.evicted)},
          {"reaped", get(counters_.reaped)},
          {"requests", get(requests_)},
          {"oversized", get(oversized_)},
          {"deferred", get(deferred_)}};
}

}  // namespace cleave::dp
