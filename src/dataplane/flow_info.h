// flow_info.h - flows and transport bindings as management sees them (no DPDK here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "transport.h"

namespace cleave::dp {

// The most tuple bindings the flow path keeps (flow attach tuple): each flow creation scans them.
inline constexpr size_t kMaxTupleBindings = 64;

// An operator binding (cleavectl flow attach), for flows opened from then on. A port binding
// names a local port: listeners on it, and connects to that remote port. A tuple binding names
// flows by their addresses (TCP, the protocol the flow path carries), each of which may be a
// wildcard; it takes precedence over the port binding of the same flow.
struct FlowBinding {
  bool tuple = false;
  uint16_t local_port = 0;   // port binding: the port; tuple binding: 0 any
  uint32_t local_ip = 0;     // tuple binding only, host order; 0 any
  uint32_t remote_ip = 0;    // tuple binding only; 0 any
  uint16_t remote_port = 0;  // tuple binding only; 0 any
  // Only apps of this uid (their SO_PEERCRED) may listen on the port (port binding), or accept
  // or connect a flow of the tuple (tuple binding); nullopt: any app.
  std::optional<uint32_t> uid;
  std::string transport;
  std::vector<std::pair<std::string, std::string>> params;

  // The same port, or the same four addresses (wildcards included): one replaces the other.
  bool same_key(const FlowBinding& o) const {
    return tuple == o.tuple && local_port == o.local_port && local_ip == o.local_ip &&
           remote_ip == o.remote_ip && remote_port == o.remote_port;
  }
  // A tuple binding: whether `t` (IPv4 TCP) is one of its flows.
  bool matches(const transport::FlowTuple& t) const {
    return t.proto == 6 && t.local.ip.family == 4 && t.remote.ip.family == 4 &&
           (local_ip == 0 || local_ip == t.local.ip.v4_host()) &&
           (local_port == 0 || local_port == t.local.port) &&
           (remote_ip == 0 || remote_ip == t.remote.ip.v4_host()) &&
           (remote_port == 0 || remote_port == t.remote.port);
  }
  // A tuple binding: how many of its four addresses are given; the most specific match wins.
  int specificity() const {
    return int(local_ip != 0) + int(local_port != 0) + int(remote_ip != 0) + int(remote_port != 0);
  }
};

// A flow or listener as management sees it.
struct FlowRow {
  uint32_t id = 0;
  uint32_t app = 0;  // 0: none (the app left, or the flow is closing)
  bool listener = false;
  std::string transport;
  transport::FlowTuple tuple;
  std::vector<std::pair<std::string, std::string>> text;  // transport's flow_info
  std::vector<std::pair<std::string, uint64_t>> numbers;
};

// A running transport's counters over all its flows (Transport::stats).
struct TransportStats {
  std::string name;
  std::vector<std::pair<std::string, uint64_t>> numbers;
};

}  // namespace cleave::dp
