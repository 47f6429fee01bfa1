// arp.h - the neighbour cache: IPv4 → MAC per port, with resolution, retries, refresh and expiry.
//
// Owned and used by the dataplane lcore only. The table does no I/O itself: it asks its ArpIo to
// send requests, so it can be tested with a fake clock and a fake wire. Storage is fixed at
// construction (no allocation afterwards); entries are chained in a hash table by (port, ip).
//
// States:  incomplete --answer--> reachable --reachable time, in use--> refreshing --answer-->
//          reachable; incomplete/refreshing --retries run out--> failed --hold--> gone, or
//          incomplete again for pinned entries. Unused reachable entries and failed ones are
//          removed when their timer runs out; pinned entries (configured next hops) never are.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "net.h"
#include "stats.h"
#include "timer_wheel.h"

namespace cleave::dp {

enum class ArpState : uint8_t { kIncomplete, kReachable, kRefreshing, kFailed };
std::string_view arp_state_name(ArpState s);

class ArpTable;

struct ArpEntry {
  Timer timer;
  ArpTable* table = nullptr;
  uint64_t confirmed = 0;  // TSC when the neighbour last answered
  Ipv4 ip;
  Mac mac;
  uint32_t next = 0;  // hash chain or free list
  uint8_t port = 0;
  ArpState state = ArpState::kIncomplete;
  uint8_t retries_left = 0;
  bool pinned = false;
  bool used = false;  // looked up since the last answer
};

// How the table talks to the wire. `dst` null: broadcast request; else unicast to that MAC.
class ArpIo {
 public:
  virtual void arp_send_request(uint8_t port, Ipv4 target, const Mac* dst) = 0;

 protected:
  ~ArpIo() = default;
};

struct ArpParams {
  uint32_t max_entries = 1024;
  uint32_t retries = 3;
  uint64_t reachable_cycles = 0;
  uint64_t retry_cycles = 0;
  uint64_t failed_hold_cycles = 0;
};

class ArpTable {
 public:
  ArpTable(const ArpParams& p, TimerWheel& wheel, ArpIo& io, ProtoStats& stats);
  ArpTable(const ArpTable&) = delete;
  ArpTable& operator=(const ArpTable&) = delete;
  ~ArpTable();

  // The MAC for ip on port, or null while it is unknown; an unknown neighbour is resolved.
  const Mac* resolve(uint8_t port, Ipv4 ip, uint64_t now);
  // Records that ip is at mac (from any ARP packet the neighbour sent). Updates an existing
  // entry; creates one only when `create` (RFC 826: when the packet was addressed to us).
  void learn(uint8_t port, Ipv4 ip, const Mac& mac, bool create, uint64_t now);
  // Keeps ip resolved from now on (gateways and route next hops).
  void pin(uint8_t port, Ipv4 ip, uint64_t now);

  const ArpEntry* find(uint8_t port, Ipv4 ip) const;
  size_t size() const { return size_; }

  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 1; i < entries_.size(); i++) {
      if (entries_[i].table != nullptr) f(entries_[i]);
    }
  }

 private:
  static constexpr uint32_t kNil = 0;  // entry 0 is never used: 0 ends chains

  uint32_t bucket(uint8_t port, Ipv4 ip) const;
  ArpEntry* lookup(uint8_t port, Ipv4 ip);
  ArpEntry* insert(uint8_t port, Ipv4 ip, uint64_t now);
  void remove(ArpEntry* e);
  void start_resolving(ArpEntry* e, const Mac* dst);
  void on_timer(ArpEntry* e);
  static void timer_cb(Timer* t, void* arg);

  ArpParams p_;
  TimerWheel& wheel_;
  ArpIo& io_;
  ProtoStats& stats_;
  std::vector<ArpEntry> entries_;
  std::vector<uint32_t> buckets_;
  uint32_t free_ = kNil;
  size_t size_ = 0;
};

}  // namespace cleave::dp
