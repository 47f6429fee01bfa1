// net.h - IPv4 and Ethernet address value types for control code: parse, format, compare.
//
// Addresses are kept in host byte order here; the data path converts at the packet edge.
// No DPDK in this header, so config and tools can use it without EAL.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cleave::dp {

struct Ipv4 {
  uint32_t host = 0;  // host byte order

  static std::optional<Ipv4> parse(std::string_view s);
  std::string str() const;
  bool operator==(const Ipv4&) const = default;
  bool operator<(const Ipv4& o) const { return host < o.host; }
};

struct Ipv4Prefix {
  Ipv4 addr;
  uint8_t len = 0;

  // "a.b.c.d/len"; with allow_host_bits the address may have bits set past len (an interface
  // address such as 10.0.0.1/24), otherwise it must be a network address (10.0.0.0/24).
  static std::optional<Ipv4Prefix> parse(std::string_view s, bool allow_host_bits);
  uint32_t mask() const { return len == 0 ? 0 : ~uint32_t{0} << (32 - len); }
  bool contains(Ipv4 a) const { return (a.host & mask()) == (addr.host & mask()); }
  Ipv4 network() const { return Ipv4{addr.host & mask()}; }
  std::string str() const;
  bool operator==(const Ipv4Prefix&) const = default;
};

// One side of a tuple binding (cleavectl flow attach tuple): "ip:port", where the address, the
// port or both may be "*" (any), held as 0. "0.0.0.0" is any address too; port 0 is refused.
struct WildEndpoint {
  uint32_t ip = 0;    // host order; 0: any
  uint16_t port = 0;  // 0: any

  static std::optional<WildEndpoint> parse(std::string_view s);
  std::string str() const;  // "*" for each wildcard
  bool operator==(const WildEndpoint&) const = default;
};

struct Mac {
  std::array<uint8_t, 6> b{};

  static std::optional<Mac> parse(std::string_view s);
  std::string str() const;
  bool is_zero() const { return b == std::array<uint8_t, 6>{}; }
  bool is_multicast() const { return (b[0] & 1) != 0; }
  bool operator==(const Mac&) const = default;
};

}  // namespace cleave::dp
