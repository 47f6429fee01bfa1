// wire.cc - the Internet checksum, table-driven CRC-32/CRC-32C (slicing by 8), the RoCEv2 ICRC.
#include "common/wire.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>

namespace cleave::wire {
namespace {

using CrcTables = std::array<std::array<uint32_t, 256>, 8>;

constexpr CrcTables make_tables(uint32_t poly) {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++) {
    for (size_t s = 1; s < 8; s++)
      t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}

constexpr CrcTables kCrc32 = make_tables(0xEDB88320u);
constexpr CrcTables kCrc32c = make_tables(0x82F63B78u);

uint32_t crc_update(const CrcTables& t, uint32_t crc, const uint8_t* p, size_t n) {
  while (n >= 8) {
    uint32_t lo =
        crc ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][p[4]] ^ t[2][p[5]] ^ t[1][p[6]] ^ t[0][p[7]];
    p += 8;
    n -= 8;
  }
  while (n-- > 0)
    crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xFF];
  return crc;
}

}  // namespace

uint64_t csum_partial(const uint8_t* p, size_t n, uint64_t sum) {
  if constexpr (std::endian::native == std::endian::little) {
    // Native 64-bit words with end-around carry, then folded to 16 bits and byte-swapped: the
    // one's-complement sum does not depend on byte order (RFC 1071 2.B), and after csum_fold
    // the result is the same as summing big-endian words. About three times faster.
    uint64_t s = 0, carry = 0;
    while (n >= 16) {
      uint64_t v[2];
      std::memcpy(v, p, 16);
      s += v[0];
      carry += s < v[0];
      s += v[1];
      carry += s < v[1];
      p += 16;
      n -= 16;
    }
    if (n >= 8) {
      uint64_t v;
      std::memcpy(&v, p, 8);
      s += v;
      carry += s < v;
      p += 8;
      n -= 8;
    }
    s = (s & 0xFFFFFFFFu) + (s >> 32) + carry;
    if (n >= 4) {
      uint32_t v;
      std::memcpy(&v, p, 4);
      s += v;
      p += 4;
      n -= 4;
    }
    if (n >= 2) {
      uint16_t v;
      std::memcpy(&v, p, 2);
      s += v;
      p += 2;
      n -= 2;
    }
    if (n == 1) s += p[0];  // the low byte of a little-endian word: the high one once swapped
    while (s >> 16)
      s = (s & 0xFFFF) + (s >> 16);
    return sum + uint16_t(s << 8 | s >> 8);
  }
  // 32-bit big-endian words into a 64-bit accumulator: no carry is lost for any frame size.
  while (n >= 4) {
    sum += load32(p);
    p += 4;
    n -= 4;
  }
  if (n >= 2) {
    sum += load16(p);
    p += 2;
    n -= 2;
  }
  if (n == 1) sum += uint32_t(p[0]) << 8;
  return sum;
}

uint16_t csum_fold(uint64_t sum) {
  while (sum >> 16)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

uint64_t pseudo_sum(const uint8_t* ip_hdr, uint8_t proto, uint32_t l4_len) {
  uint64_t s = csum_partial(ip_hdr + 12, 8, 0);
  return s + proto + l4_len;
}

uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t n) {
  return crc_update(kCrc32, crc, p, n);
}
uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n) {
  return crc_update(kCrc32c, crc, p, n);
}

namespace {
// IP header length for the ICRC: IPv6's fixed 40 bytes, IPv4's IHL.
size_t icrc_ip_hlen(const uint8_t* ip) {
  return (ip[0] >> 4) == 6 ? 40 : size_t(ip[0] & 0xF) * 4;
}
constexpr size_t kIcrcUdpLen = 8;
constexpr size_t kIcrcBthLen = 12;
}  // namespace

uint32_t roce_icrc(const uint8_t* ip, size_t len) {
  // The masked copy covers the 8 bytes of ones and the headers holding variant fields (at most
  // IPv4 with options, UDP and BTH); the payload after them is fed to the CRC in place.
  std::array<uint8_t, 8 + 60 + kIcrcUdpLen + kIcrcBthLen> m;
  std::memset(m.data(), 0xFF, 8);
  const size_t hlen = len > 0 ? icrc_ip_hlen(ip) : 0;
  const size_t n = std::min(len, hlen + kIcrcUdpLen + kIcrcBthLen);
  if (n != 0) std::memcpy(m.data() + 8, ip, n);  // ip may be null when len is 0
  uint8_t* h = m.data() + 8;
  auto ones = [&](size_t at) {
    if (at < n) h[at] = 0xFF;
  };
  if (n > 0 && (ip[0] >> 4) == 6) {
    h[0] |= 0x0F;  // traffic class (high nibble) ...
    ones(1);       // ... its low nibble and the flow label
    ones(2);
    ones(3);
    ones(7);  // hop limit
  } else {
    ones(1);  // TOS
    ones(8);  // TTL
    ones(10);
    ones(11);  // header checksum
  }
  ones(hlen + 6);  // UDP checksum
  ones(hlen + 7);
  ones(hlen + kIcrcUdpLen + 4);  // BTH resv8a: FECN, BECN
  const uint32_t crc = crc32_update(0xFFFFFFFFu, m.data(), 8 + n);
  return crc32_update(crc, ip + n, len - n) ^ 0xFFFFFFFFu;
}

bool roce_icrc_ok(const uint8_t* ip, size_t len) {
  if (len < 20) return false;
  const uint8_t version = ip[0] >> 4;
  if (version != 4 && version != 6) return false;
  const size_t hlen = icrc_ip_hlen(ip);
  if (hlen < 20 || len < hlen + kIcrcUdpLen + kIcrcBthLen + 4) return false;
  return roce_icrc(ip, len - 4) == roce_icrc_load(ip + len - 4);
}

}  // namespace cleave::wire
