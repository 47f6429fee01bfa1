// arp.cc - neighbour cache state machine (see arp.h for the states).
#include "lcore/arp.h"

#include <bit>

namespace cleave::dp {

std::string_view arp_state_name(ArpState s) {
  switch (s) {
    case ArpState::kIncomplete:
      return "incomplete";
    case ArpState::kReachable:
      return "reachable";
    case ArpState::kRefreshing:
      return "refreshing";
    case ArpState::kFailed:
      return "failed";
  }
  return "?";
}

ArpTable::ArpTable(const ArpParams& p, TimerWheel& wheel, ArpIo& io, ProtoStats& stats)
    : p_(p),
      wheel_(wheel),
      io_(io),
      stats_(stats),
      entries_(p.max_entries + 1),
      buckets_(std::bit_ceil(uint64_t{p.max_entries} * 2), kNil) {
  for (uint32_t i = static_cast<uint32_t>(entries_.size()) - 1; i >= 1; i--) {
    entries_[i].next = free_;
    free_ = i;
  }
}

ArpTable::~ArpTable() {
  for (ArpEntry& e : entries_)
    wheel_.cancel(&e.timer);
}

uint32_t ArpTable::bucket(uint8_t port, Ipv4 ip) const {
  uint64_t h = (uint64_t{ip.host} << 8 | port) * 0x9e3779b97f4a7c15ull;
  return static_cast<uint32_t>(h >> 32) & static_cast<uint32_t>(buckets_.size() - 1);
}

ArpEntry* ArpTable::lookup(uint8_t port, Ipv4 ip) {
  for (uint32_t i = buckets_[bucket(port, ip)]; i != kNil; i = entries_[i].next) {
    ArpEntry& e = entries_[i];
    if (e.ip == ip && e.port == port) return &e;
  }
  return nullptr;
}

const ArpEntry* ArpTable::find(uint8_t port, Ipv4 ip) const {
  return const_cast<ArpTable*>(this)->lookup(port, ip);
}

ArpEntry* ArpTable::insert(uint8_t port, Ipv4 ip, uint64_t now) {
  if (free_ == kNil) {
    stats_.arp_table_full++;
    return nullptr;
  }
  uint32_t i = free_;
  ArpEntry& e = entries_[i];
  free_ = e.next;
  uint32_t b = bucket(port, ip);
  e = ArpEntry{};
  e.table = this;
  e.ip = ip;
  e.port = port;
  e.confirmed = now;
  e.timer.fn = timer_cb;
  e.timer.arg = &e;
  e.next = buckets_[b];
  buckets_[b] = i;
  size_++;
  return &e;
}

void ArpTable::remove(ArpEntry* e) {
  wheel_.cancel(&e->timer);
  uint32_t idx = static_cast<uint32_t>(e - entries_.data());
  for (uint32_t* link = &buckets_[bucket(e->port, e->ip)]; *link != kNil;
       link = &entries_[*link].next) {
    if (*link == idx) {
      *link = e->next;
      break;
    }
  }
  e->table = nullptr;
  e->next = free_;
  free_ = idx;
  size_--;
}

void ArpTable::start_resolving(ArpEntry* e, const Mac* dst) {
  e->retries_left = static_cast<uint8_t>(p_.retries - 1);
  io_.arp_send_request(e->port, e->ip, dst);
  wheel_.arm(&e->timer, p_.retry_cycles);
}

const Mac* ArpTable::resolve(uint8_t port, Ipv4 ip, uint64_t now) {
  ArpEntry* e = lookup(port, ip);
  if (e == nullptr) {
    e = insert(port, ip, now);
    if (e == nullptr) return nullptr;
    e->state = ArpState::kIncomplete;
    start_resolving(e, nullptr);
    return nullptr;
  }
  e->used = true;
  return e->state == ArpState::kReachable || e->state == ArpState::kRefreshing ? &e->mac : nullptr;
}

void ArpTable::learn(uint8_t port, Ipv4 ip, const Mac& mac, bool create, uint64_t now) {
  ArpEntry* e = lookup(port, ip);
  if (e == nullptr) {
    if (!create || (e = insert(port, ip, now)) == nullptr) return;
    e->state = ArpState::kFailed;  // counted as resolved below
  }
  if (e->state != ArpState::kReachable && e->state != ArpState::kRefreshing) stats_.arp_resolved++;
  e->mac = mac;
  e->state = ArpState::kReachable;
  e->confirmed = now;
  e->used = false;
  wheel_.arm(&e->timer, p_.reachable_cycles);
}

void ArpTable::pin(uint8_t port, Ipv4 ip, uint64_t now) {
  resolve(port, ip, now);
  if (ArpEntry* e = lookup(port, ip)) e->pinned = true;
}

void ArpTable::timer_cb(Timer* /*t*/, void* arg) {
  auto* e = static_cast<ArpEntry*>(arg);
  e->table->on_timer(e);
}

void ArpTable::on_timer(ArpEntry* e) {
  switch (e->state) {
    case ArpState::kReachable:
      if (!e->pinned && !e->used) {
        remove(e);
        return;
      }
      // Still wanted: ask the neighbour directly, keep using its address meanwhile.
      e->state = ArpState::kRefreshing;
      e->used = false;
      start_resolving(e, &e->mac);
      return;
    case ArpState::kIncomplete:
    case ArpState::kRefreshing:
      if (e->retries_left > 0) {
        e->retries_left--;
        io_.arp_send_request(e->port, e->ip, nullptr);
        wheel_.arm(&e->timer, p_.retry_cycles);
        return;
      }
      e->state = ArpState::kFailed;
      stats_.arp_failed++;
      wheel_.arm(&e->timer, p_.failed_hold_cycles);
      return;
    case ArpState::kFailed:
      if (!e->pinned) {
        remove(e);
        return;
      }
      e->state = ArpState::kIncomplete;
      start_resolving(e, nullptr);
      return;
  }
}

}  // namespace cleave::dp
