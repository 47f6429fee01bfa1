// solar_pair.h - one Solar connection over the simulated network (sim_net.h): A the initiator
// (WRITEs from its source MR, READs into its read MR), B the target with a volume, each end on its
// host's SolarTransport over a Solar NIC flow, opened the way an out-of-band setup does it (both
// ends' connection numbers, the paths, the block size). A's source MR, A's read buffers and B's
// volume; the completions A saw. For solar_sim_test.cc.
//
//   SolarPair p(seed, cfg);                    // hosts, flows, MRs, the connection
//   p.fill(0, 1 << 20, 7);                     // A's source bytes [0, 1 MiB) from seed 7
//   p.write(1, 0, 4096, 65536);                // wr_id 1: A's [0, 64 KiB) to volume 4096
//   ASSERT_TRUE(p.run_until_done(1)) << p.describe();
//   EXPECT_TRUE(p.same(0, 4096, 65536));       // byte for byte at the target
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "sim_net.h"
#include "transport/solar/solar.h"

namespace cleave::sim {

struct SolarConfig {
  LinkConfig link;
  Faults ab;  // initiator -> target: blocks, probes
  Faults ba;  // target -> initiator: ACKs, NACKs, probe replies
  uint16_t paths = 4;
  uint8_t routes = 1;  // both ends' (QpAttr::routes); the wire tells them apart by TTL (Host)
  uint32_t block_bytes = 1024;
  size_t src_bytes = 8u << 20;
  size_t volume_bytes = 8u << 20;
  bool zero_copy = true;
  uint32_t first_seq = 1;  // the initiator's first transmit sequence on every path
  // Open through QpControl as cleaved does (create_qp with "paths" and "block", the volume as
  // the target's region, then INIT, RTR, RTS), with the QP's own path settings, first_seq 1.
  bool via_qp = false;
  uint64_t io_timeout_ns = 30'000'000'000;  // the initiator's (not via_qp)
  transport::solar::PathConfig path = [] {
    transport::solar::PathConfig p;
    p.initial_rto_ns = 1'000'000;
    p.min_rto_ns = 500'000;
    p.max_rto_ns = 20'000'000;
    p.probe_interval_ns = 2'000'000;
    return p;
  }();
};

class SolarPair {
 public:
  static constexpr uint32_t kConnA = 0x1A;  // A's number for the connection
  static constexpr uint32_t kConnB = 0x2B;

  SolarPair(uint64_t seed, const SolarConfig& cfg) {
    HostConfig ha;
    HostConfig hb;
    auto ta = std::make_unique<transport::solar::SolarTransport>();
    auto tb = std::make_unique<transport::solar::SolarTransport>();
    ini = ta.get();
    tgt = tb.get();
    ha.transport = std::move(ta);
    hb.transport = std::move(tb);
    ha.zero_copy = hb.zero_copy = cfg.zero_copy;
    ha.on_event = [this](const transport::Event& e) { done.push_back(e); };
    net = std::make_unique<SimNet>(seed, cfg.link, cfg.ab, cfg.ba, std::move(ha), std::move(hb));
    src_mr = net->a().add_mr(cfg.src_bytes);
    dst_mr = net->a().add_mr(cfg.src_bytes);
    vol_mr = net->b().add_mr(cfg.volume_bytes);
    // The initiator's NIC places READ_BLKs by I/O id into the buffer each READ posts.
    fa = net->a().solar_flow(net->b().ip(), transport::solar::kUdpPort, kConnA, true);
    fb = net->b().solar_flow(net->a().ip(), transport::solar::kUdpPort, kConnB);
    if (cfg.via_qp) {
      ok = fa != transport::kNoFlow && fb != transport::kNoFlow &&
           qp_open(*ini, fa, kConnA, kConnB, {}, cfg, net->a()) == 0 &&
           qp_open(*tgt, fb, kConnB, kConnA, {.region_mr = vol_mr, .region_len = cfg.volume_bytes},
                   cfg, net->b()) == 0;
      return;
    }
    transport::solar::ConnConfig c;
    c.paths = cfg.paths;
    c.routes = cfg.routes;
    c.block_bytes = cfg.block_bytes;
    c.path = cfg.path;
    c.first_seq = cfg.first_seq;
    c.io_timeout_ns = cfg.io_timeout_ns;
    c.initiator = true;
    c.local_conn = kConnA;
    c.remote_conn = kConnB;
    const int ea = fa == transport::kNoFlow ? -1 : ini->open(fa, c, net->a());
    c.initiator = false;
    c.local_conn = kConnB;
    c.remote_conn = kConnA;
    c.volume_mr = vol_mr;
    c.volume_len = cfg.volume_bytes;
    const int eb = fb == transport::kNoFlow ? -1 : tgt->open(fb, c, net->b());
    ok = ea == 0 && eb == 0;
  }

  // A queue pair on `flow`, moved to RTS: 0 or the first call's error.
  static int qp_open(transport::solar::SolarTransport& t, transport::FlowId flow, uint32_t local,
                     uint32_t remote, transport::QpCaps caps, const SolarConfig& cfg,
                     transport::Context& ctx) {
    const std::string paths = std::to_string(cfg.paths);
    const std::string block = std::to_string(cfg.block_bytes);
    const transport::Param params[] = {{"paths", paths}, {"block", block}};
    if (const int e = t.create_qp(flow, local, caps, params); e != 0) return e;
    transport::QpAttr a;
    a.state = transport::QpState::kInit;
    if (const int e = t.modify_qp(flow, a, transport::kAttrState, ctx); e != 0) return e;
    a.state = transport::QpState::kRtr;
    a.dest_qpn = remote;
    a.pmtu = 4096;
    a.routes = cfg.routes;
    const uint32_t rtr = transport::kAttrState | transport::kAttrDestQpn | transport::kAttrPmtu;
    if (const int e = t.modify_qp(flow, a, rtr, ctx); e != 0) return e;
    a.state = transport::QpState::kRts;
    return t.modify_qp(flow, a, transport::kAttrState, ctx);
  }

  // Fills [off, off + len) of A's source MR with bytes from `seed`.
  void fill(size_t off, size_t len, uint64_t seed) {
    fill_random(net->a().mr(src_mr).subspan(off, len), seed * 0x9E3779B97F4A7C15ull + 1);
  }
  // A's source bytes at `src` are the volume's at `vol`.
  bool same(size_t src, size_t vol, size_t len) {
    return std::memcmp(net->a().mr(src_mr).data() + src, net->b().mr(vol_mr).data() + vol, len) ==
           0;
  }

  // Fills [off, off + len) of B's volume with bytes from `seed`.
  void fill_volume(size_t off, size_t len, uint64_t seed) {
    fill_random(net->b().mr(vol_mr).subspan(off, len), seed * 0x9E3779B97F4A7C15ull + 3);
  }
  // xorshift64 from `x`, 8 bytes a step.
  static void fill_random(std::span<uint8_t> m, uint64_t x) {
    for (size_t i = 0; i < m.size(); i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(m.data() + i, &x, std::min<size_t>(8, m.size() - i));
    }
  }
  // A's read buffer at `dst` holds the volume's bytes at `vol`.
  bool read_same(size_t dst, size_t vol, size_t len) {
    return std::memcmp(net->a().mr(dst_mr).data() + dst, net->b().mr(vol_mr).data() + vol, len) ==
           0;
  }
  void read(uint64_t wr_id, uint64_t dst, uint64_t vol, uint32_t len) {
    net->a().submit({.flow = fa,
                     .kind = transport::ReqKind::kRead,
                     .mr = dst_mr,
                     .len = len,
                     .offset = dst,
                     .wr_id = wr_id,
                     .remote_addr = vol});
  }

  void write(uint64_t wr_id, uint64_t src, uint64_t vol, uint32_t len) {
    net->a().submit({.flow = fa,
                     .kind = transport::ReqKind::kWrite,
                     .mr = src_mr,
                     .len = len,
                     .offset = src,
                     .wr_id = wr_id,
                     .remote_addr = vol});
  }

  bool run_until_done(size_t n, uint64_t max_ns = 10'000'000'000) {
    return net->run_until([&] { return done.size() >= n; }, max_ns);
  }

  transport::solar::PathInfo path(uint16_t p) const {
    transport::solar::PathInfo pi;
    ini->path_info(fa, p, &pi);
    return pi;
  }
  // The target's path: its sender state for READ_BLKs.
  transport::solar::PathInfo tgt_path(uint16_t p) const {
    transport::solar::PathInfo pi;
    tgt->path_info(fb, p, &pi);
    return pi;
  }
  const transport::solar::ConnStats& ini_stats() const { return *ini->conn_stats(fa); }
  const transport::solar::ConnStats& tgt_stats() const { return *tgt->conn_stats(fb); }

  std::string describe() const {
    std::ostringstream o;
    o << net->describe();
    const auto& a = ini_stats();
    const auto& b = tgt_stats();
    o << "\nsolar initiator: ios_done " << a.ios_done << " blocks_acked " << a.blocks_acked
      << " acks " << a.acks_received << " nacks " << a.nacks_received << " bad " << a.bad_headers
      << " events " << done.size();
    o << "\nsolar target: received " << b.blocks_received << " crc_drops " << b.crc_drops
      << " refused " << b.refused << " acks " << b.acks_sent << " probe_replies " << b.probe_replies
      << " bad " << b.bad_headers;
    for (uint16_t p = 0; p < 64; p++) {
      transport::solar::PathInfo pi;
      if (!ini->path_info(fa, p, &pi)) break;
      o << "\npath " << p << (pi.up ? " up" : " down") << " cwnd " << pi.cwnd << " srtt "
        << pi.srtt_ns << " inflight " << pi.inflight << " sent " << pi.blocks_sent << " resent "
        << pi.blocks_resent << " acked " << pi.acked << " lost " << pi.lost << " timeouts "
        << pi.timeouts << " downs " << pi.downs << " ups " << pi.ups << " probes " << pi.probes;
    }
    return o.str();
  }

  std::unique_ptr<SimNet> net;
  transport::solar::SolarTransport* ini = nullptr;
  transport::solar::SolarTransport* tgt = nullptr;
  transport::FlowId fa = transport::kNoFlow;
  transport::FlowId fb = transport::kNoFlow;
  uint16_t src_mr = 0;
  uint16_t dst_mr = 0;  // A's READ buffers
  uint16_t vol_mr = 0;
  std::vector<transport::Event> done;  // A's completions, writes and reads
  bool ok = false;
};

}  // namespace cleave::sim
