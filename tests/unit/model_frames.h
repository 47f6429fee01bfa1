// model_frames.h - frames for the NIC model tests: TCP, UDP, RoCEv2 and Solar over IPv4.
//
// Written independently of hw/fpga/model and src/common/wire.h on purpose (test oracles): bitwise
// CRCs, a 16-bit-word Internet checksum and byte-order helpers of their own, so the tests check
// the table-driven code against a second implementation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

namespace cleave::nic::test {

using Bytes = std::vector<uint8_t>;

inline void put16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
inline void put32(uint8_t* p, uint32_t v) {
  put16(p, uint16_t(v >> 16));
  put16(p + 2, uint16_t(v));
}
inline uint16_t get16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}
inline uint32_t get32(const uint8_t* p) {
  return uint32_t(get16(p)) << 16 | get16(p + 2);
}

// RFC 1071, one 16-bit word at a time.
inline uint32_t sum16(const uint8_t* p, size_t n, uint32_t s = 0) {
  for (size_t i = 0; i + 1 < n; i += 2)
    s += uint32_t(p[i] << 8 | p[i + 1]);
  if (n % 2) s += uint32_t(p[n - 1] << 8);
  return s;
}
inline uint16_t fold(uint32_t s) {
  while (s >> 16)
    s = (s & 0xFFFF) + (s >> 16);
  return uint16_t(~s);
}
// Checksum of an L4 segment (checksum field included as it is) with the IPv4 pseudo header.
inline uint16_t l4_sum(const uint8_t* ip, const uint8_t* l4, size_t len) {
  uint32_t s = sum16(ip + 12, 8);
  s += ip[9];
  s += uint32_t(len);
  return fold(sum16(l4, len, s));
}

inline uint32_t crc_bitwise(uint32_t poly, const uint8_t* p, size_t n, uint32_t crc = 0xFFFFFFFF) {
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (poly & (0u - (crc & 1)));
  }
  return crc;
}
inline uint32_t crc32c_ref(const uint8_t* p, size_t n) {
  return crc_bitwise(0x82F63B78, p, n) ^ 0xFFFFFFFF;
}

inline constexpr uint32_t kPeer = 0x0A000002;   // 10.0.0.2
inline constexpr uint32_t kLocal = 0x0A000001;  // 10.0.0.1

// Ethernet + IPv4 (+ l4 bytes), with lengths and IP checksum filled in.
inline Bytes ipv4_frame(uint8_t proto, const Bytes& l4, uint32_t src = kPeer,
                        uint32_t dst = kLocal) {
  Bytes f(14 + 20 + l4.size());
  const uint8_t mac[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
  std::memcpy(f.data(), mac, 12);
  put16(&f[12], 0x0800);
  uint8_t* ip = &f[14];
  ip[0] = 0x45;
  put16(ip + 2, uint16_t(20 + l4.size()));
  put16(ip + 4, 0x1234);
  put16(ip + 6, 0x4000);
  ip[8] = 64;
  ip[9] = proto;
  put32(ip + 12, src);
  put32(ip + 16, dst);
  put16(ip + 10, fold(sum16(ip, 20)));
  std::copy(l4.begin(), l4.end(), ip + 20);
  return f;
}

// TCP with options (padded to 4 bytes with NOPs here, as senders do).
inline Bytes tcp_frame_opts(uint32_t seq, const Bytes& payload, Bytes opts, uint8_t flags = 0x18,
                            uint16_t sport = 40000, uint16_t dport = 5001) {
  while (opts.size() % 4)
    opts.insert(opts.begin(), 1);
  const size_t hl = 20 + opts.size();
  Bytes l4(hl + payload.size());
  put16(&l4[0], sport);
  put16(&l4[2], dport);
  put32(&l4[4], seq);
  put32(&l4[8], 1);
  l4[12] = uint8_t(hl / 4 << 4);
  l4[13] = flags;
  put16(&l4[14], 65535);
  std::copy(opts.begin(), opts.end(), l4.begin() + 20);
  std::copy(payload.begin(), payload.end(), l4.begin() + long(hl));
  Bytes f = ipv4_frame(6, l4);
  put16(&f[14 + 20 + 16], l4_sum(&f[14], &f[34], l4.size()));
  return f;
}

inline Bytes tcp_frame(uint32_t seq, const Bytes& payload, uint8_t flags = 0x18,
                       uint16_t sport = 40000, uint16_t dport = 5001) {
  return tcp_frame_opts(seq, payload, {}, flags, sport, dport);
}

// The message option of a data segment (hw/fpga/docs/formats.md section 2): kind 253, length
// 20, ExID 0xC1EA, then the credit limit, the message number, the sequence number where the
// message starts and its length, all big-endian.
inline Bytes msg_option(uint32_t msg, uint32_t start, uint32_t length, uint32_t limit = 0) {
  Bytes o = {253, 20, 0xC1, 0xEA};
  o.resize(20);
  put32(&o[4], limit);
  put32(&o[8], msg);
  put32(&o[12], start);
  put32(&o[16], length);
  return o;
}

inline Bytes udp_frame(uint16_t sport, uint16_t dport, const Bytes& payload, bool csum = true) {
  Bytes l4(8 + payload.size());
  put16(&l4[0], sport);
  put16(&l4[2], dport);
  put16(&l4[4], uint16_t(l4.size()));
  std::copy(payload.begin(), payload.end(), l4.begin() + 8);
  Bytes f = ipv4_frame(17, l4);
  if (csum) {
    uint16_t c = l4_sum(&f[14], &f[34], l4.size());
    put16(&f[34 + 6], c == 0 ? 0xFFFF : c);
  }
  return f;
}

// ICRC over a whole RoCEv2 frame whose last four bytes are the ICRC field.
inline uint32_t icrc_ref(const Bytes& f) {
  Bytes m(f.begin() + 14, f.end() - 4);
  m[1] = m[8] = m[10] = m[11] = 0xFF;  // TOS, TTL, IP checksum
  m[20 + 6] = m[20 + 7] = 0xFF;        // UDP checksum
  m[28 + 4] = 0xFF;                    // BTH byte 4
  const uint8_t ones[8] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};
  uint32_t crc = crc_bitwise(0xEDB88320, ones, 8);
  return crc_bitwise(0xEDB88320, m.data(), m.size(), crc) ^ 0xFFFFFFFF;
}

// RoCEv2: BTH + ext + payload + pad + ICRC; UDP checksum zero as RoCE senders do.
// `pad` < 0: the pad the payload needs; else that PadCnt, and that many pad bytes.
inline Bytes roce_frame(uint8_t opcode, uint32_t psn, const Bytes& ext, const Bytes& payload,
                        uint16_t sport = 49152, uint32_t dqp = 17, uint16_t pkey = 0xFFFF,
                        int pad_cnt = -1) {
  uint8_t pad = pad_cnt < 0 ? uint8_t((4 - payload.size() % 4) % 4) : uint8_t(pad_cnt);
  Bytes u(12 + ext.size() + payload.size() + pad + 4);
  u[0] = opcode;
  u[1] = uint8_t(pad << 4);
  put16(&u[2], pkey);
  put32(&u[4], dqp & 0xFFFFFF);
  put32(&u[8], psn & 0xFFFFFF);
  std::copy(ext.begin(), ext.end(), u.begin() + 12);
  std::copy(payload.begin(), payload.end(), u.begin() + 12 + long(ext.size()));
  Bytes f = udp_frame(sport, 4791, u, false);
  uint32_t ic = icrc_ref(f);
  for (int i = 0; i < 4; i++)
    f[f.size() - 4 + i] = uint8_t(ic >> (8 * i));
  return f;
}

inline Bytes reth(uint64_t va, uint32_t rkey, uint32_t len) {
  Bytes r(16);
  put32(&r[0], uint32_t(va >> 32));
  put32(&r[4], uint32_t(va));
  put32(&r[8], rkey);
  put32(&r[12], len);
  return r;
}

// The receiver's connection number solar_frame() carries unless told: a Solar flow on the NIC
// finds its frames by it (FlowSpec::qpn).
inline constexpr uint32_t kSolarConn = 7;

inline Bytes solar_frame(uint8_t type, uint32_t io_id, uint64_t offset, uint32_t tx_seq,
                         const Bytes& block, uint16_t path = 1, uint32_t conn = kSolarConn) {
  Bytes u(32 + block.size());
  u[0] = type;
  put16(&u[2], path);
  put32(&u[4], conn);  // connection id
  put32(&u[8], tx_seq);
  put32(&u[12], io_id);
  put32(&u[16], uint32_t(offset >> 32));
  put32(&u[20], uint32_t(offset));
  put32(&u[28], crc32c_ref(block.data(), block.size()));
  std::copy(block.begin(), block.end(), u.begin() + 32);
  return udp_frame(uint16_t(0xC000 | path), 7000, u);
}

// Payload bytes that vary along a long stream and never equal 0xEE, the tests' "untouched".
inline Bytes pattern(size_t n, uint32_t start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; i++) {
    uint8_t v = uint8_t((start + i) * 131 + ((start + i) >> 8) + 7);
    b[i] = v == 0xEE ? 0x5A : v;
  }
  return b;
}

}  // namespace cleave::nic::test
