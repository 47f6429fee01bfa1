// net.cc - parsing and formatting of IPv4 and Ethernet addresses.
#include "net.h"

#include <charconv>
#include <cstdio>

namespace cleave::dp {

namespace {

// Parses a decimal number in [0, max] that spans the whole of s, without leading zeros that
// would make "010" ambiguous (octal in inet_aton).
std::optional<uint32_t> parse_decimal(std::string_view s, uint32_t max) {
  if (s.empty() || s.size() > 10 || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v > max) return std::nullopt;
  return v;
}

std::optional<uint8_t> parse_hex_byte(std::string_view s) {
  if (s.size() != 2) return std::nullopt;
  uint8_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + 2, v, 16);
  if (ec != std::errc{} || end != s.data() + 2) return std::nullopt;
  return v;
}

}  // namespace

std::optional<Ipv4> Ipv4::parse(std::string_view s) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) {
    size_t dot = s.find('.');
    if ((i < 3) != (dot != std::string_view::npos)) return std::nullopt;
    auto octet = parse_decimal(s.substr(0, dot), 255);
    if (!octet) return std::nullopt;
    v = v << 8 | *octet;
    s = i < 3 ? s.substr(dot + 1) : std::string_view{};
  }
  return Ipv4{v};
}

std::string Ipv4::str() const {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%u.%u.%u.%u", host >> 24, (host >> 16) & 0xff, (host >> 8) & 0xff,
                host & 0xff);
  return buf;
}

std::optional<Ipv4Prefix> Ipv4Prefix::parse(std::string_view s, bool allow_host_bits) {
  size_t slash = s.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  auto addr = Ipv4::parse(s.substr(0, slash));
  auto len = parse_decimal(s.substr(slash + 1), 32);
  if (!addr || !len) return std::nullopt;
  Ipv4Prefix p{*addr, static_cast<uint8_t>(*len)};
  if (!allow_host_bits && p.network() != p.addr) return std::nullopt;
  return p;
}

std::string Ipv4Prefix::str() const {
  return addr.str() + "/" + std::to_string(len);
}

std::optional<Mac> Mac::parse(std::string_view s) {
  Mac m;
  for (size_t i = 0; i < 6; i++) {
    if (i > 0) {
      if (s.empty() || s[0] != ':') return std::nullopt;
      s.remove_prefix(1);
    }
    auto byte = parse_hex_byte(s.substr(0, 2));
    if (!byte) return std::nullopt;
    m.b[i] = *byte;
    s.remove_prefix(2);
  }
  if (!s.empty()) return std::nullopt;
  return m;
}

std::string Mac::str() const {
  char buf[18];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4],
                b[5]);
  return buf;
}

std::optional<WildEndpoint> WildEndpoint::parse(std::string_view s) {
  const size_t colon = s.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  WildEndpoint e;
  const std::string_view ip = s.substr(0, colon);
  const std::string_view port = s.substr(colon + 1);
  if (ip != "*") {
    auto a = Ipv4::parse(ip);
    if (!a) return std::nullopt;
    e.ip = a->host;
  }
  if (port != "*") {
    auto p = parse_decimal(port, 65535);
    if (!p || *p == 0) return std::nullopt;
    e.port = uint16_t(*p);
  }
  return e;
}

std::string WildEndpoint::str() const {
  return (ip == 0 ? std::string("*") : Ipv4{ip}.str()) + ":" +
         (port == 0 ? std::string("*") : std::to_string(port));
}

}  // namespace cleave::dp
