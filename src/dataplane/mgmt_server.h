// mgmt_server.h - the control socket: line-delimited JSON over a unix stream socket.
//
// Runs in the main thread's event loop: the daemon registers fd() and every client fd it is
// told about with its epoll set and calls on_event() for them. Clients are untrusted: requests
// are size-limited, malformed JSON gets an error answer, a slow reader is dropped rather than
// buffered without bound, and when all connection slots are taken the longest-idle client makes
// room, so idle connections cannot lock the operator out.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace cleave::dp {

class MgmtServer {
 public:
  // Runs one command; throws MgmtError (management.h) for errors the client should see.
  using Handler =
      std::function<nlohmann::json(std::string_view command, const nlohmann::json& args)>;

  // Binds `path` (a stale socket file is replaced; the caller holds the instance lock) and
  // registers the listening socket with `epoll_fd`. Throws std::runtime_error on failure.
  MgmtServer(std::string path, int epoll_fd, Handler handler);
  MgmtServer(const MgmtServer&) = delete;
  MgmtServer& operator=(const MgmtServer&) = delete;
  ~MgmtServer();  // closes every connection and removes the socket file

  // True if fd belongs to this server; then handles the readiness events on it.
  bool on_event(int fd, uint32_t events);
  size_t clients() const { return clients_.size(); }
  const std::string& path() const { return path_; }

  // Answers one request line; public for tests.
  std::string answer(std::string_view line);

 private:
  struct Client {
    std::string in;
    std::string out;
    bool eof = false;      // the client closed its side: finish writing, then close
    uint64_t last_active;  // sequence number of its last request or connect
  };
  void accept_clients();
  void on_client(int fd, uint32_t events);
  void close_client(int fd);
  bool flush(int fd, Client& c);

  std::string path_;
  int epoll_fd_;
  int listen_fd_ = -1;
  Handler handler_;
  std::map<int, Client> clients_;
  uint64_t activity_ = 0;
};

}  // namespace cleave::dp
