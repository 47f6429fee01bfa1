// local_clients.cc - per-uid caps and the eviction rule of cleaved's local sockets (main thread).
#include "local_clients.h"

#include <sys/socket.h>

#include <cerrno>

namespace cleave::dp {

bool peer_cred(int fd, ucred& out) {
  socklen_t len = sizeof out;
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &out, &len) == 0 && len == sizeof out;
}

size_t ClientTable::of_uid(uint32_t uid) const {
  auto it = per_uid_.find(uid);
  return it == per_uid_.end() ? 0 : it->second;
}

void ClientTable::add(int fd, uint32_t uid) {
  entries_[fd] = Entry{uid, ++clock_, false};
  per_uid_[uid]++;
}

void ClientTable::note(int fd, bool busy) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return;
  it->second.last = ++clock_;
  it->second.busy = busy;
}

void ClientTable::forget(int fd) {
  auto it = entries_.find(fd);
  if (it == entries_.end()) return;
  auto u = per_uid_.find(it->second.uid);
  if (--u->second == 0) per_uid_.erase(u);
  entries_.erase(it);
}

ClientTable::Decision ClientTable::admit(int fd, uint32_t uid) {
  Decision d;
  auto full = [&] { return entries_.size() >= caps_.total || of_uid(uid) >= caps_.per_uid; };
  if (!full()) {
    add(fd, uid);
    d.admit = true;
    return d;
  }
  // Full: look at every connection once (at most `total` non-blocking peeks, only when full).
  // A peer that has gone reads as EOF; unread bytes make a connection busy whatever it was.
  struct Candidate {
    int fd;
    uint32_t uid;
    uint64_t last;
    bool busy;
  };
  std::vector<Candidate> candidates;
  candidates.reserve(entries_.size());
  for (const auto& [cfd, e] : entries_) {
    char byte;
    ssize_t n = recv(cfd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      d.gone.push_back(cfd);
      continue;
    }
    candidates.push_back({cfd, e.uid, e.last, e.busy || n > 0});
  }
  for (int g : d.gone)
    forget(g);
  if (!full()) {
    add(fd, uid);
    d.admit = true;
    return d;
  }
  const bool own_cap = of_uid(uid) >= caps_.per_uid;
  const size_t mine = of_uid(uid);
  auto eligible = [&](const Candidate& c) {
    if (own_cap) return c.uid == uid;
    return c.uid == uid || of_uid(c.uid) >= mine + 2;
  };
  // True when a should go before b.
  auto sooner = [&](const Candidate& a, const Candidate& b) {
    if (a.busy != b.busy) return !a.busy;
    size_t ca = of_uid(a.uid), cb = of_uid(b.uid);
    if (ca != cb) return ca > cb;
    return a.last < b.last;
  };
  const Candidate* victim = nullptr;
  for (const Candidate& c : candidates) {
    if (eligible(c) && (victim == nullptr || sooner(c, *victim))) victim = &c;
  }
  if (victim == nullptr || (victim->busy && victim->uid == uid)) return d;
  d.evict = victim->fd;
  forget(victim->fd);
  add(fd, uid);
  d.admit = true;
  return d;
}

}  // namespace cleave::dp
