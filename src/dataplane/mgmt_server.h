// mgmt_server.h - the control socket: line-delimited JSON over a unix stream socket.
//
// Runs in the main thread's event loop: the daemon registers fd() and every client fd it is
// told about with its epoll set and calls on_event() for them. Clients are untrusted:
// - a request is at most mgmt::kMaxRequestBytes, checked on every read: the bytes of one request
//   held at once never exceed it (an oversized request gets an error answer, is counted, and
//   the connection is closed);
// - one turn of a client serves at most `requests_per_turn` requests and reads only what they
//   need, then the other clients get theirs; splitting lines is linear in the bytes read;
// - a client that does not read its answers is not read from either, and is dropped when one
//   answer alone outgrows mgmt::kMaxAnswerBytes;
// - connections are capped in total and per uid; who makes room for a newcomer is decided by
//   ClientTable (local_clients.h), so a connect/close flood cannot close a client that is
//   sending its request, and idle connections cannot lock the operator out.
// Malformed JSON gets an error answer.
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "local_clients.h"

namespace cleave::dp {

// Splits a byte stream into lines of at most `max_line` bytes (the newline not counted), in time
// linear in the bytes: each byte is scanned once, and consumed lines are dropped in bulk.
class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line) : max_(max_line) {}
  // How many bytes a read may append now: what completes the current line at most (one past
  // the limit, so a line that is too long shows). 0 while a complete line waits.
  size_t room() const;
  // Appends bytes (at most room()); false when the line being received is over the limit.
  bool append(const char* p, size_t n);
  // The next complete line without its newline, valid until the next call; nullopt when none.
  std::optional<std::string_view> next();
  bool empty() const { return head_ == buf_.size(); }  // no byte of any line held
  bool ready() const { return scan_ < buf_.size(); }   // bytes next() has not looked at yet

 private:
  size_t max_;
  std::string buf_;
  size_t head_ = 0;  // start of the first line not yet returned
  size_t scan_ = 0;  // no newline in [head_, scan_): next() searches from here
  size_t tail_ = 0;  // start of the line still being received
};

// Checks one request line against the protocol (mgmt_protocol.h). Returns "" with the command
// and its arguments in `command` and `args`, or the complete error answer to send; `id` gets
// what to echo (null when absent or unreadable) either way. Pure: no handler runs; fuzzable.
std::string parse_request(std::string_view line, nlohmann::json& id, std::string& command,
                          nlohmann::json& args);

struct MgmtLimits {
  ClientCaps clients{64, 16};
  size_t requests_per_turn = 16;
};

class MgmtServer {
 public:
  // Runs one command; throws MgmtError (management.h) for errors the client should see.
  using Handler =
      std::function<nlohmann::json(std::string_view command, const nlohmann::json& args)>;

  // Binds `path` (a stale socket file is replaced; the caller holds the instance lock) and
  // registers the listening socket with `epoll_fd`. Throws std::runtime_error on failure.
  MgmtServer(std::string path, int epoll_fd, Handler handler, MgmtLimits limits = {});
  MgmtServer(const MgmtServer&) = delete;
  MgmtServer& operator=(const MgmtServer&) = delete;
  ~MgmtServer();  // closes every connection and removes the socket file

  // True if fd belongs to this server; then handles the readiness events on it.
  bool on_event(int fd, uint32_t events);
  size_t clients() const { return clients_.size(); }
  const std::string& path() const { return path_; }

  // Answers one request line; public for tests.
  std::string answer(std::string_view line);

  // The socket's limits and counters for status; safe from any thread while the server lives.
  nlohmann::json stats() const;

 private:
  struct Client {
    explicit Client(size_t max_request) : in(max_request) {}
    LineSplitter in;
    std::string out;
    size_t out_head = 0;  // bytes of `out` already sent
    uint32_t uid = 0;
    bool eof = false;  // the client closed its side: finish writing, then close
  };
  void accept_clients();
  void on_client(int fd, uint32_t events);
  // Serves what the client sent, within its turn's budget. False: close it now.
  bool serve(int fd, Client& c);
  // Best effort: one error line to a connection about to be closed.
  void tell(int fd, std::string_view code, const std::string& message);
  void close_client(int fd);
  bool flush(int fd, Client& c);
  void watch(int fd, const Client& c);

  std::string path_;
  int epoll_fd_;
  int listen_fd_ = -1;
  Handler handler_;
  MgmtLimits limits_;
  ClientTable table_;
  std::map<int, Client> clients_;
  ClientCounters counters_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> oversized_{0};
  std::atomic<uint64_t> deferred_{0};  // turns that ended on the budget with requests left
};

}  // namespace cleave::dp
