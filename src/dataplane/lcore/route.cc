// route.cc - routing table construction and longest-prefix lookup.
#include "lcore/route.h"

#include <algorithm>

namespace cleave::dp {

std::string_view RouteEntry::kind() const {
  if (!via) return "connected";
  return dst.len == 0 ? "default" : "static";
}

RouteTable::RouteTable(const std::vector<PortConfig>& ports) {
  for (size_t i = 0; i < ports.size(); i++) {
    const PortConfig& p = ports[i];
    auto port = static_cast<uint8_t>(i);
    entries_.push_back({Ipv4Prefix{p.ipv4.network(), p.ipv4.len}, port, std::nullopt});
    for (const Route& r : p.routes)
      entries_.push_back({r.dst, port, r.via});
    if (p.gateway) entries_.push_back({Ipv4Prefix{Ipv4{0}, 0}, port, p.gateway});
  }
  // Longest prefix first; among equals, connected before static (configuration order kept).
  std::stable_sort(entries_.begin(), entries_.end(), [](const RouteEntry& a, const RouteEntry& b) {
    if (a.dst.len != b.dst.len) return a.dst.len > b.dst.len;
    return !a.via && b.via;
  });
}

std::optional<NextHop> RouteTable::lookup(Ipv4 dst) const {
  for (const RouteEntry& r : entries_) {
    if (r.dst.contains(dst)) return NextHop{&r, r.port, r.via ? *r.via : dst};
  }
  return std::nullopt;
}

std::vector<NextHop> RouteTable::gateways() const {
  std::vector<NextHop> out;
  for (const RouteEntry& r : entries_) {
    if (!r.via) continue;
    bool seen = std::any_of(out.begin(), out.end(),
                            [&](const NextHop& h) { return h.port == r.port && h.addr == *r.via; });
    if (!seen) out.push_back({&r, r.port, *r.via});
  }
  return out;
}

}  // namespace cleave::dp
