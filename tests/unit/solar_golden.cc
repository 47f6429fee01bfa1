// solar_golden.cc - golden Solar packets: one Ethernet/IPv4/UDP frame of each kind of header
// (every type, every flag, several paths, a block whose CRC32C is wrong), built with the codec
// (src/transport/solar/solar_wire.h) and checked by decoding each back with it.
//
//   solar_golden [FILE]
//
// Writes `NAME hex` lines, one frame each, to FILE or stdout: the format of
// tests/golden/solar.txt, which is how that file is regenerated after an intended change of the
// wire format (tests/README.md). tests/unit/test_solar_golden.py compares the two and decodes the
// frames with tshark and tools/solar.lua. Deterministic. Exit status 0, or 1 with what went wrong
// on stderr.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/wire.h"
#include "transport/solar/solar_wire.h"

namespace {

using namespace cleave;
namespace solar = transport::solar;
using Bytes = std::vector<uint8_t>;

constexpr size_t kEth = 14;
constexpr size_t kIp = 20;
constexpr size_t kL4 = kEth + kIp;
constexpr uint8_t kEct0 = 0x02, kCe = 0x03;  // the ECN field of the IPv4 TOS byte

struct Golden {
  std::string name;
  Bytes frame;
};

// Bytes that differ along a block (never all zero).
Bytes block(size_t n, uint8_t seed) {
  Bytes b(n);
  for (size_t i = 0; i < n; i++)
    b[i] = uint8_t(seed + i * 29 + (i >> 3));
  return b;
}

// Ethernet, IPv4 (10.0.0.1 -> 10.0.0.2, or back when `from_b`), UDP from the path's port to
// 7000 with its checksum, the header and the block.
Bytes frame(const solar::Header& h, const Bytes& blk, bool from_b, uint16_t ip_id,
            uint8_t tos = kEct0) {
  Bytes f(kL4 + solar::kUdpLen + solar::kHeaderLen + blk.size());
  const uint8_t a_mac[6] = {2, 0, 0, 0, 0, 1}, b_mac[6] = {2, 0, 0, 0, 0, 2};
  for (size_t i = 0; i < 6; i++) {
    f[i] = from_b ? a_mac[i] : b_mac[i];
    f[6 + i] = from_b ? b_mac[i] : a_mac[i];
  }
  wire::store16(&f[12], 0x0800);
  uint8_t* ip = &f[kEth];
  ip[0] = 0x45;
  ip[1] = tos;
  wire::store16(ip + 2, uint16_t(f.size() - kEth));
  wire::store16(ip + 4, ip_id);
  wire::store16(ip + 6, 0x4000);  // DF
  ip[8] = 64;
  ip[9] = 17;
  const uint8_t a_ip[4] = {10, 0, 0, 1}, b_ip[4] = {10, 0, 0, 2};
  for (size_t i = 0; i < 4; i++) {
    ip[12 + i] = from_b ? b_ip[i] : a_ip[i];
    ip[16 + i] = from_b ? a_ip[i] : b_ip[i];
  }
  wire::store16(ip + 10, wire::csum_fold(wire::csum_partial(ip, kIp, 0)));
  uint8_t* udp = &f[kL4];
  const uint32_t udp_len = uint32_t(f.size() - kL4);
  wire::store16(udp, solar::udp_sport(h.path));
  wire::store16(udp + 2, solar::kUdpPort);
  wire::store16(udp + 4, uint16_t(udp_len));
  solar::encode(h, udp + solar::kUdpLen);
  std::copy(blk.begin(), blk.end(), udp + solar::kUdpLen + solar::kHeaderLen);
  uint16_t c = wire::csum_fold(wire::csum_partial(udp, udp_len, wire::pseudo_sum(ip, 17, udp_len)));
  wire::store16(udp + 6, c == 0 ? 0xFFFF : c);
  return f;
}

solar::Header data(solar::Type t, uint16_t path, uint32_t seq, uint32_t io, uint64_t offset,
                   uint16_t index, uint16_t count, const Bytes& blk, uint8_t flags = 0) {
  solar::Header h;
  h.type = t;
  h.flags = flags;
  h.path = path;
  h.conn = 0x00C0FFEE;
  h.seq = seq;
  h.io_id = io;
  h.offset = offset;
  h.index = index;
  h.count = count;
  h.crc = solar::block_crc(blk.data(), blk.size());
  return h;
}

solar::Header ack(uint16_t path, uint32_t largest, uint64_t sack, uint32_t echo, uint16_t delay,
                  uint32_t ce, uint8_t flags = 0) {
  solar::Header h;
  h.type = solar::Type::kAck;
  h.flags = flags;
  h.path = path;
  h.conn = 0x00000A11;
  h.seq = largest;
  h.sack = sack;
  h.echo = echo;
  h.ack_delay_us = delay;
  h.ce_count = ce;
  return h;
}

// A write of 100 bytes in blocks of 64 over paths 1 and 2, its ACKs (one with SACK and CE
// counted), a read of 100 bytes from volume offset 1 MiB over path 3 with a resent block, a
// corrupted block and its NACK, and a probe of path 2 with its reply.
std::vector<Golden> goldens() {
  using solar::Type;
  std::vector<Golden> g;
  uint16_t id = 1;
  const Bytes w0 = block(64, 1), w1 = block(36, 2), r0 = block(64, 3), r1 = block(36, 4);
  g.push_back({"WRITE_BLK", frame(data(Type::kWriteBlk, 1, 1, 10, 0, 0, 2, w0), w0, false, id++)});
  g.push_back(
      {"WRITE_BLK_ACK_REQ", frame(data(Type::kWriteBlk, 2, 1, 10, 64, 1, 2, w1, solar::kFlagAckReq),
                                  w1, false, id++, kCe)});
  g.push_back({"ACK", frame(ack(1, 1, 0, 1, 25, 0), {}, true, id++)});
  g.push_back({"ACK_SACK_CE", frame(ack(2, 100, 0x8000000000000015, 98, 0, 3), {}, true, id++)});
  solar::Header rq = data(Type::kReadReq, 3, 1, 11, 1u << 20, 0, 2, {}, solar::kFlagAckReq);
  rq.crc = 0;
  rq.length = 100;
  g.push_back({"READ_REQ", frame(rq, {}, false, id++)});
  g.push_back({"READ_BLK", frame(data(Type::kReadBlk, 3, 1, 11, 0, 0, 2, r0), r0, true, id++)});
  g.push_back(
      {"READ_BLK_RETX",
       frame(data(Type::kReadBlk, 1, 2, 11, 64, 1, 2, r1, solar::kFlagRetx), r1, true, id++)});
  solar::Header bad = data(Type::kWriteBlk, 1, 2, 12, 4096, 0, 1, w0);
  bad.crc ^= 0x00010000;  // a CRC32C that does not match the block
  g.push_back({"WRITE_BLK_BAD_CRC", frame(bad, w0, false, id++)});
  solar::Header nack = bad;
  nack.type = Type::kNack;
  nack.reason = uint32_t(solar::NackReason::kBadCrc);
  g.push_back({"NACK", frame(nack, {}, true, id++)});
  g.push_back({"ACK_PROBE", frame(ack(2, 1, 0, 5, 0, 0, solar::kFlagAckReq), {}, false, id++)});
  g.push_back({"ACK_PROBE_REPLY",
               frame(ack(2, 100, 0x15, 5, 3, 3, solar::kFlagProbeReply), {}, true, id++)});
  return g;
}

// What is wrong with a golden frame by the codec, or empty.
std::string check(const Golden& g) {
  solar::Header h;
  const solar::Error e = solar::decode_udp(&g.frame[kL4], g.frame.size() - kL4, h);
  if (e != solar::Error::kNone) return "decode_udp: " + std::string(solar::error_name(e));
  if (solar::carries_block(h.type)) {
    const bool ok =
        solar::block_crc_ok(&g.frame[kL4 + solar::kUdpLen], g.frame.size() - kL4 - solar::kUdpLen);
    if (ok != (g.name != "WRITE_BLK_BAD_CRC")) return "block CRC32C";
  }
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: solar_golden [FILE]\n");
    return 1;
  }
  FILE* out = stdout;
  if (argc == 2 && (out = std::fopen(argv[1], "w")) == nullptr) {
    std::perror(argv[1]);
    return 1;
  }
  for (const Golden& g : goldens()) {
    if (std::string e = check(g); !e.empty()) {
      std::fprintf(stderr, "solar_golden: %s: %s\n", g.name.c_str(), e.c_str());
      return 1;
    }
    std::fprintf(out, "%s ", g.name.c_str());
    for (uint8_t b : g.frame)
      std::fprintf(out, "%02x", b);
    std::fprintf(out, "\n");
  }
  return out == stdout || std::fclose(out) == 0 ? 0 : 1;
}
