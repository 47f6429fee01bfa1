// frames.h - building and reading Ethernet/ARP/IPv4/ICMP/UDP frames as bytes, for tests.
//
// Written from the RFCs with no DPDK helpers, so the tests check the dataplane against an
// independent implementation rather than against itself.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cleave::test {

using Bytes = std::vector<uint8_t>;
using MacBytes = std::array<uint8_t, 6>;

inline constexpr MacBytes kBroadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

inline void put16(Bytes& b, size_t off, uint16_t v) {
  b[off] = uint8_t(v >> 8);
  b[off + 1] = uint8_t(v);
}
inline void put32(Bytes& b, size_t off, uint32_t v) {
  put16(b, off, uint16_t(v >> 16));
  put16(b, off + 2, uint16_t(v));
}
inline uint16_t get16(const Bytes& b, size_t off) {
  return uint16_t(b[off] << 8 | b[off + 1]);
}
inline uint32_t get32(const Bytes& b, size_t off) {
  return uint32_t(get16(b, off)) << 16 | get16(b, off + 2);
}
inline MacBytes get_mac(const Bytes& b, size_t off) {
  MacBytes m;
  std::memcpy(m.data(), &b[off], 6);
  return m;
}

// RFC 1071 Internet checksum over b[off, off+len).
inline uint16_t inet_checksum(const Bytes& b, size_t off, size_t len) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < len; i += 2)
    sum += get16(b, off + i);
  if (len % 2 != 0) sum += uint32_t(b[off + len - 1]) << 8;
  while (sum >> 16 != 0)
    sum = (sum & 0xffff) + (sum >> 16);
  return uint16_t(~sum);
}

inline Bytes ether(const MacBytes& dst, const MacBytes& src, uint16_t type) {
  Bytes b(14);
  std::memcpy(&b[0], dst.data(), 6);
  std::memcpy(&b[6], src.data(), 6);
  put16(b, 12, type);
  return b;
}

// ARP for IPv4 over Ethernet (RFC 826). op 1 request, 2 reply.
inline Bytes arp(uint16_t op, const MacBytes& eth_dst, const MacBytes& sha, uint32_t sip,
                 const MacBytes& tha, uint32_t tip) {
  Bytes b = ether(eth_dst, sha, 0x0806);
  b.resize(14 + 28);
  put16(b, 14, 1);
  put16(b, 16, 0x0800);
  b[18] = 6;
  b[19] = 4;
  put16(b, 20, op);
  std::memcpy(&b[22], sha.data(), 6);
  put32(b, 28, sip);
  std::memcpy(&b[32], tha.data(), 6);
  put32(b, 38, tip);
  return b;
}

// IPv4 header (no options) with a correct checksum, followed by payload.
inline Bytes ipv4(const MacBytes& dst, const MacBytes& src, uint32_t sip, uint32_t dip,
                  uint8_t proto, const Bytes& payload, uint16_t frag = 0, uint8_t ttl = 64) {
  Bytes b = ether(dst, src, 0x0800);
  size_t ip = b.size();
  b.resize(ip + 20 + payload.size());
  std::copy(payload.begin(), payload.end(), b.begin() + long(ip + 20));
  b[ip] = 0x45;
  put16(b, ip + 2, uint16_t(20 + payload.size()));
  put16(b, ip + 4, 0x1234);
  put16(b, ip + 6, frag);
  b[ip + 8] = ttl;
  b[ip + 9] = proto;
  put32(b, ip + 12, sip);
  put32(b, ip + 16, dip);
  put16(b, ip + 10, inet_checksum(b, ip, 20));
  return b;
}

inline Bytes icmp(uint8_t type, uint16_t id, uint16_t seq, size_t data_len) {
  Bytes b(8 + data_len);
  b[0] = type;
  put16(b, 4, id);
  put16(b, 6, seq);
  for (size_t i = 0; i < data_len; i++)
    b[8 + i] = uint8_t(i * 7 + 3);
  put16(b, 2, inet_checksum(b, 0, b.size()));
  return b;
}

inline Bytes udp(uint16_t sport, uint16_t dport, size_t data_len) {
  Bytes b(8 + data_len, 0xab);
  put16(b, 0, sport);
  put16(b, 2, dport);
  put16(b, 4, uint16_t(8 + data_len));
  put16(b, 6, 0);  // no checksum (allowed for IPv4)
  return b;
}

}  // namespace cleave::test
