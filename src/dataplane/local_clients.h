// local_clients.h - who may hold a connection on cleaved's local sockets (the control socket and
// the app socket's connections that have not said hello) and who makes room when they are full.
//
// Local users are untrusted. Each connection is known by its peer's uid from accept on
// (SO_PEERCRED). A uid holds at most `per_uid` connections and all uids together `total`. A
// newcomer that finds no room displaces, in this order: connections whose peer has already gone
// (a connect/close flood leaves only these); an idle one (nothing sent, nothing unanswered) before
// one that is sending or waiting for its answer; from the uid holding the most connections; the
// longest idle. It never displaces a connection of another uid unless that uid holds at least two
// more than the newcomer's, nor a busy one of its own uid: then the newcomer is refused. So a flood
// from one user cannot close another user's connection that is talking, and only that user's
// own idle ones when its cap is reached.
//
// Main thread only (the servers' epoll loop); the counters are atomics so that status can read
// them from the telemetry thread.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace cleave::dp {

// The peer's credentials (SO_PEERCRED); false when the kernel does not give them.
bool peer_cred(int fd, ucred& out);

struct ClientCaps {
  size_t total = 64;
  size_t per_uid = 16;
};

// What a socket did with its connections, for status. Written by the main thread only.
struct ClientCounters {
  std::atomic<uint64_t> clients{0};   // connections held now
  std::atomic<uint64_t> accepted{0};  // admitted at accept
  std::atomic<uint64_t> refused{0};   // turned away at accept
  std::atomic<uint64_t> evicted{0};   // closed to make room for a newcomer
  std::atomic<uint64_t> reaped{0};    // found closed by their peer while making room
};

// The one writer's increment, and any thread's read, of such a counter.
inline void bump(std::atomic<uint64_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}
inline uint64_t get(const std::atomic<uint64_t>& c) {
  return c.load(std::memory_order_relaxed);
}

class ClientTable {
 public:
  explicit ClientTable(ClientCaps caps) : caps_(caps) {}

  struct Decision {
    bool admit = false;     // false: refuse the newcomer (its uid's connections are all busy)
    std::vector<int> gone;  // connections whose peer has gone: close them
    int evict = -1;         // a connection to close to make room, or -1
  };
  // A newcomer `fd` of `uid`. The table forgets `gone` and `evict` itself and, when admitted,
  // holds the newcomer; the caller closes what it is told to.
  Decision admit(int fd, uint32_t uid);
  // The connection did something: `busy` while it has sent part of a request or waits for an
  // answer, idle otherwise.
  void note(int fd, bool busy);
  void forget(int fd);

  bool holds(int fd) const { return entries_.contains(fd); }
  size_t size() const { return entries_.size(); }
  size_t of_uid(uint32_t uid) const;
  const ClientCaps& caps() const { return caps_; }

 private:
  struct Entry {
    uint32_t uid = 0;
    uint64_t last = 0;  // activity clock
    bool busy = false;
  };
  void add(int fd, uint32_t uid);

  ClientCaps caps_;
  std::unordered_map<int, Entry> entries_;
  std::unordered_map<uint32_t, size_t> per_uid_;
  uint64_t clock_ = 0;
};

}  // namespace cleave::dp
