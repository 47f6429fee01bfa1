// route.h - the IPv4 routing table: connected prefixes, static routes, one default gateway.
//
// Built once from the configuration; lookups are longest-prefix-match over a short list sorted
// by prefix length (tens of routes; flows look up once at setup, not per packet).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "config.h"
#include "net.h"

namespace cleave::dp {

struct RouteEntry {
  Ipv4Prefix dst;
  uint8_t port = 0;         // index into the configured ports
  std::optional<Ipv4> via;  // unset: connected, the destination itself is the next hop

  std::string_view kind() const;  // "connected", "static" or "default"
};

struct NextHop {
  const RouteEntry* route;
  uint8_t port;
  Ipv4 addr;  // whom to ARP for
};

class RouteTable {
 public:
  explicit RouteTable(const std::vector<PortConfig>& ports);

  std::optional<NextHop> lookup(Ipv4 dst) const;
  const std::vector<RouteEntry>& entries() const { return entries_; }
  // Every gateway address, with its port: the neighbours to keep resolved.
  std::vector<NextHop> gateways() const;

 private:
  std::vector<RouteEntry> entries_;  // longest prefix first
};

}  // namespace cleave::dp
