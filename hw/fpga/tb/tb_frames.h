// tb_frames.h - frames for the RTL testbenches: Ethernet/IPv4 (with options) carrying TCP (with
// options), UDP, RoCEv2 and Solar, built field by field, and the faults the model must survive
// (truncation, flipped bytes, bad checksums, broken headers).
//
// Checksums and CRCs come from the shared wire library (src/common/wire.h): the RTL is
// checked against it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/wire.h"
#include "tb_common.h"

namespace cleave::tb {

inline constexpr uint16_t kRocePort = 4791;
inline constexpr uint16_t kSolarPort = 7000;

struct IpOpts {
  uint32_t src = 0x0A000002;
  uint32_t dst = 0x0A000001;
  unsigned ihl = 5;  // 5..15; options are NOPs (1) then EOL
  uint16_t frag = 0x4000;
  uint8_t tos = 0;
  uint8_t ttl = 64;
  uint16_t id = 0x1234;
};

// Ethernet + IPv4 + l4, lengths and the IP checksum filled in.
inline Bytes ipv4_frame(uint8_t proto, const Bytes& l4, const IpOpts& o = {}) {
  const size_t hl = 4 * o.ihl;
  Bytes f(14 + hl + l4.size());
  const uint8_t mac[12] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2};
  std::memcpy(f.data(), mac, 12);
  wire::store16(&f[12], 0x0800);
  uint8_t* ip = &f[14];
  ip[0] = uint8_t(0x40 | o.ihl);
  ip[1] = o.tos;
  wire::store16(ip + 2, uint16_t(hl + l4.size()));
  wire::store16(ip + 4, o.id);
  wire::store16(ip + 6, o.frag);
  ip[8] = o.ttl;
  ip[9] = proto;
  wire::store32(ip + 12, o.src);
  wire::store32(ip + 16, o.dst);
  for (size_t i = 20; i < hl; i++)
    ip[i] = i + 1 < hl ? 1 : 0;
  wire::store16(ip + 10, wire::csum_fold(wire::csum_partial(ip, hl, 0)));
  std::copy(l4.begin(), l4.end(), f.begin() + long(14 + hl));
  return f;
}

inline size_t ip_hlen(const Bytes& f) {
  return size_t(f[14] & 0xF) * 4;
}

// Recomputes the TCP or UDP checksum of a well-formed frame (UDP: 0 stays 0 if `keep_zero`).
inline void fix_l4_csum(Bytes& f, bool keep_zero = false) {
  uint8_t* ip = &f[14];
  const size_t hl = ip_hlen(f);
  const uint32_t total = wire::load16(ip + 2);
  uint8_t* l4 = ip + hl;
  const uint32_t l4len = total - uint32_t(hl);
  const bool tcp = ip[9] == 6;
  uint8_t* c = l4 + (tcp ? 16 : 6);
  if (!tcp && keep_zero && wire::load16(c) == 0) return;
  wire::store16(c, 0);
  uint16_t v = wire::csum_fold(wire::csum_partial(l4, l4len, wire::pseudo_sum(ip, ip[9], l4len)));
  if (!tcp && v == 0) v = 0xFFFF;
  wire::store16(c, v);
}

inline Bytes tcp_frame(uint32_t seq, const Bytes& payload, const Bytes& opts_in = {},
                       uint8_t flags = 0x18, uint16_t sport = 40000, uint16_t dport = 5001,
                       const IpOpts& ipo = {}) {
  Bytes opts = opts_in;
  while (opts.size() % 4)
    opts.push_back(0);  // EOL padding
  const size_t hl = 20 + opts.size();
  Bytes l4(hl + payload.size());
  wire::store16(&l4[0], sport);
  wire::store16(&l4[2], dport);
  wire::store32(&l4[4], seq);
  wire::store32(&l4[8], 1);
  l4[12] = uint8_t(hl / 4 << 4);
  l4[13] = flags;
  wire::store16(&l4[14], 65535);
  std::copy(opts.begin(), opts.end(), l4.begin() + 20);
  std::copy(payload.begin(), payload.end(), l4.begin() + long(hl));
  Bytes f = ipv4_frame(6, l4, ipo);
  fix_l4_csum(f);
  return f;
}

// The message option (hw/fpga/docs/formats.md section 2).
inline Bytes msg_option(uint32_t msg, uint32_t start, uint32_t length, uint32_t limit = 0) {
  Bytes o = {253, 20, 0xC1, 0xEA};
  o.resize(20);
  wire::store32(&o[4], limit);
  wire::store32(&o[8], msg);
  wire::store32(&o[12], start);
  wire::store32(&o[16], length);
  return o;
}

inline Bytes udp_frame(uint16_t sport, uint16_t dport, const Bytes& payload, bool csum = true,
                       const IpOpts& ipo = {}) {
  Bytes l4(8 + payload.size());
  wire::store16(&l4[0], sport);
  wire::store16(&l4[2], dport);
  wire::store16(&l4[4], uint16_t(l4.size()));
  std::copy(payload.begin(), payload.end(), l4.begin() + 8);
  Bytes f = ipv4_frame(17, l4, ipo);
  if (csum) fix_l4_csum(f);
  return f;
}

// Recomputes the ICRC (the last four bytes of the IP packet) of a RoCEv2 frame.
inline void fix_icrc(Bytes& f) {
  const uint32_t total = wire::load16(&f[16]);
  wire::roce_icrc_store(&f[14 + total - 4], wire::roce_icrc(&f[14], total - 4));
}

// RoCEv2: BTH + ext + payload + pad + ICRC; the UDP checksum 0, as RoCE senders send it.
inline Bytes roce_frame(uint8_t opcode, uint32_t psn, uint32_t dqp, const Bytes& ext,
                        const Bytes& payload, uint16_t sport = 49152, const IpOpts& ipo = {}) {
  const uint8_t pad = uint8_t((4 - payload.size() % 4) % 4);
  Bytes u(12 + ext.size() + payload.size() + pad + 4);
  u[0] = opcode;
  u[1] = uint8_t(pad << 4);
  wire::store16(&u[2], 0xFFFF);
  wire::store32(&u[4], dqp & 0xFFFFFF);
  wire::store32(&u[8], psn & 0xFFFFFF);
  std::copy(ext.begin(), ext.end(), u.begin() + 12);
  std::copy(payload.begin(), payload.end(), u.begin() + 12 + long(ext.size()));
  Bytes f = udp_frame(sport, kRocePort, u, false, ipo);
  fix_icrc(f);
  return f;
}

inline Bytes reth(uint64_t va, uint32_t rkey, uint32_t len) {
  Bytes r(16);
  wire::store32(&r[0], uint32_t(va >> 32));
  wire::store32(&r[4], uint32_t(va));
  wire::store32(&r[8], rkey);
  wire::store32(&r[12], len);
  return r;
}

// Solar: the 32-byte header (conn: the receiver's connection number) + the block.
inline Bytes solar_frame(uint8_t type, uint32_t conn, uint32_t io_id, uint64_t offset,
                         uint32_t tx_seq, const Bytes& block, uint16_t dport = kSolarPort,
                         uint16_t path = 1, const IpOpts& ipo = {}) {
  Bytes u(32 + block.size());
  u[0] = type;
  wire::store16(&u[2], path);
  wire::store32(&u[4], conn);
  wire::store32(&u[8], tx_seq);
  wire::store32(&u[12], io_id);
  wire::store32(&u[16], uint32_t(offset >> 32));
  wire::store32(&u[20], uint32_t(offset));
  wire::store32(&u[28], wire::crc32c(block.data(), block.size()));
  std::copy(block.begin(), block.end(), u.begin() + 32);
  return udp_frame(uint16_t(0xC000 | path), dport, u, true, ipo);
}

inline Bytes random_bytes(Rng& rng, size_t n) {
  Bytes b(n);
  for (auto& x : b)
    x = uint8_t(rng.u64());
  return b;
}

// Random TCP options: NOPs, timestamps, a message option now and then, sometimes broken.
inline Bytes random_tcp_options(Rng& rng) {
  Bytes o;
  size_t want = rng.below(41);
  while (o.size() < want) {
    switch (rng.below(6)) {
      case 0:
        o.push_back(1);
        break;
      case 1: {  // timestamps
        Bytes t = {8, 10};
        Bytes r = random_bytes(rng, 8);
        t.insert(t.end(), r.begin(), r.end());
        o.insert(o.end(), t.begin(), t.end());
        break;
      }
      case 2: {
        Bytes m =
            msg_option(uint32_t(rng.below(8)), uint32_t(rng.u64()), uint32_t(rng.below(9000)));
        o.insert(o.end(), m.begin(), m.end());
        break;
      }
      case 3:  // some other option with a random length (maybe malformed)
        o.push_back(uint8_t(2 + rng.below(250)));
        o.push_back(uint8_t(rng.below(12)));
        break;
      case 4:
        o.push_back(0);  // EOL
        break;
      default:
        o.push_back(uint8_t(rng.u64()));
        break;
    }
  }
  if (o.size() > 40) o.resize(40);
  return o;
}

// One of the faults of the fault matrix that changes a frame's bytes (loss, reordering and
// duplication are the caller's): truncation, a flipped byte anywhere or in the headers, padding
// past the IP length, a broken IP header field.
inline void corrupt(Rng& rng, Bytes& f) {
  switch (rng.below(7)) {
    case 0:
      if (!f.empty()) f.resize(rng.below(f.size()));
      break;
    case 1:
      if (!f.empty()) f[rng.below(f.size())] ^= uint8_t(1 + rng.below(255));
      break;
    case 2:
      if (f.size() > 14)
        f[14 + rng.below(std::min<size_t>(f.size() - 14, 80))] ^= uint8_t(1 + rng.below(255));
      break;
    case 3: {  // Ethernet padding: bytes past the IP packet are not part of it
      Bytes p = random_bytes(rng, 1 + rng.below(40));
      f.insert(f.end(), p.begin(), p.end());
      break;
    }
    case 4:
      if (f.size() > 17) wire::store16(&f[16], uint16_t(rng.u64()));  // total length
      break;
    case 5:
      if (f.size() > 14) f[14] = uint8_t(rng.u64());  // version/IHL
      break;
    default:
      if (f.size() > 21) wire::store16(&f[20], uint16_t(rng.below(2) ? 0x2000 : rng.u64()));
      break;
  }
}

}  // namespace cleave::tb
