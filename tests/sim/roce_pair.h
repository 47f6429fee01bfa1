// roce_pair.h - two RoCEv2 RC queue pairs connected over the simulated network (sim_net.h): A's
// QP and B's, each on its host's RcTransport, brought to RTS the way an out-of-band connect does
// it (each side learns the other's QPN and first PSN), with one large MR per host and the
// completions each side saw. Shared by roce_sim_test.cc and the roce_sim_loss benchmark.
//
//   RocePair p(seed, cfg);                 // hosts, QPs, MRs; both QPs in RTS
//   p.fill(p.net->a(), 0, 1 << 20, 7);     // A's bytes [0, 1 MiB) from seed 7
//   p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 1 << 20, .remote_addr = 0, ...});
//   ASSERT_TRUE(p.run_until_done(p.a, 1));  // one completion at A
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
#include "transport/rocev2/rc.h"

namespace cleave::sim {

struct RoceConfig {
  LinkConfig link = [] {
    LinkConfig l;
    l.mtu = 4200;  // a 4096-byte PMTU plus headers
    return l;
  }();
  Faults ab;
  Faults ba;
  uint32_t pmtu = 4096;
  uint32_t psn_a = 0x100;  // A's first PSN (B's rq_psn)
  uint32_t psn_b = 0x200;
  uint8_t timeout = 8;  // 4.096 µs × 2^8 ≈ 1 ms
  uint8_t retry_cnt = 7;
  uint8_t rnr_retry = 7;
  uint8_t min_rnr_timer = 1;  // 0.01 ms
  uint8_t access = transport::roce::kRemoteWrite | transport::roce::kRemoteRead;
  bool zero_copy = true;
  bool selective_repeat = false;  // both QPs (kAttrSelectiveRepeat at RTR)
  std::vector<std::pair<std::string, std::string>> params;  // both QPs' (create_qp)
  size_t mr_bytes = 64u << 20;
  transport::roce::QpCaps caps{1024, 1024};
  uint64_t rate_limit_kbps = 0;  // both QPs' rate cap; 0: the link's rate
};

struct RoceSide {
  transport::roce::RcTransport* rc = nullptr;
  transport::FlowId qp = transport::kNoFlow;
  uint16_t mr = 0;
  std::vector<transport::Event> events;
};

class RocePair {
 public:
  static constexpr uint32_t kQpnA = 0x11;
  static constexpr uint32_t kQpnB = 0x22;

  RocePair(uint64_t seed, const RoceConfig& cfg) : cfg_(cfg) {
    HostConfig ha;
    HostConfig hb;
    auto ra = std::make_unique<transport::roce::RcTransport>();
    auto rb = std::make_unique<transport::roce::RcTransport>();
    a.rc = ra.get();
    b.rc = rb.get();
    ha.transport = std::move(ra);
    hb.transport = std::move(rb);
    ha.zero_copy = hb.zero_copy = cfg.zero_copy;
    ha.on_event = [this](const transport::Event& e) { a.events.push_back(e); };
    hb.on_event = [this](const transport::Event& e) { b.events.push_back(e); };
    net = std::make_unique<SimNet>(seed, cfg.link, cfg.ab, cfg.ba, std::move(ha), std::move(hb));
    a.mr = net->a().add_mr(cfg.mr_bytes);
    b.mr = net->b().add_mr(cfg.mr_bytes);
    ok = connect(net->a(), a, kQpnA, kQpnB, cfg.psn_a, cfg.psn_b, net->b().ip()) &&
         connect(net->b(), b, kQpnB, kQpnA, cfg.psn_b, cfg.psn_a, net->a().ip());
  }

  // Fills [off, off + len) of a host's MR with bytes from `seed`.
  void fill(Host& h, size_t off, size_t len, uint64_t seed) {
    std::span<uint8_t> m = h.mr(side(h).mr).subspan(off, len);
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (size_t i = 0; i < len; i += 8) {
      x ^= x << 13;  // xorshift64: cheap, and enough to tell every byte from its neighbours
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(m.data() + i, &x, std::min<size_t>(8, len - i));
    }
  }
  bool same(Host& x, size_t xoff, Host& y, size_t yoff, size_t len) {
    return std::memcmp(x.mr(side(x).mr).data() + xoff, y.mr(side(y).mr).data() + yoff, len) == 0;
  }

  // A request on a host's QP (flow and MR filled in).
  void post(Host& h, transport::AppRequest r) {
    r.flow = side(h).qp;
    r.mr = side(h).mr;
    h.submit(r);
  }

  // Runs until `side` has seen `n` events (of any kind) or max_ns passed.
  bool run_until_events(RoceSide& s, size_t n, uint64_t max_ns = 20'000'000'000) {
    return net->run_until([&] { return s.events.size() >= n; }, max_ns);
  }

  RoceSide& side(Host& h) { return &h == &net->a() ? a : b; }

  std::string describe() const {
    std::ostringstream o;
    o << net->describe();
    for (const RoceSide* s : {&a, &b}) {
      const transport::roce::RcCounters& c = s->rc->counters();
      o << (s == &a ? "\nrc a:" : "\nrc b:") << " tx " << c.tx_packets << " rx " << c.rx_packets
        << " rexmit " << c.retransmits << " timeouts " << c.timeouts << " naks " << c.naks_sent
        << "/" << c.naks_received << " rnr " << c.rnr_naks_sent << "/" << c.rnr_naks_received
        << " acks " << c.acks_sent << "/" << c.acks_received << " dup " << c.duplicates << " ooo "
        << c.out_of_sequence << " bad_icrc " << c.bad_icrc << " bad " << c.bad_packets << " placed "
        << c.placed_bytes << " copied " << c.copied_bytes << " qp_errors " << c.qp_errors
        << " events " << s->events.size();
    }
    return o.str();
  }

  std::unique_ptr<SimNet> net;
  RoceSide a;
  RoceSide b;
  bool ok = false;

 private:
  bool connect(Host& h, RoceSide& s, uint32_t qpn, uint32_t dest, uint32_t sq_psn, uint32_t rq_psn,
               uint32_t peer_ip) {
    using namespace transport::roce;
    s.qp = h.roce_flow(peer_ip, qpn, rq_psn, cfg_.pmtu, cfg_.selective_repeat);
    std::vector<transport::Param> params;
    for (const auto& [k, v] : cfg_.params)
      params.push_back({k, v});
    if (s.qp == transport::kNoFlow || s.rc->create_qp(s.qp, qpn, cfg_.caps, params) != 0) {
      return false;
    }
    QpAttr at;
    at.state = QpState::kInit;
    at.access = cfg_.access;
    if (s.rc->modify_qp(s.qp, at, kAttrState | kAttrAccess, h) != 0) return false;
    at.state = QpState::kRtr;
    at.pmtu = cfg_.pmtu;
    at.dest_qpn = dest;
    at.rq_psn = rq_psn;
    at.min_rnr_timer = cfg_.min_rnr_timer;
    at.selective_repeat = cfg_.selective_repeat;
    if (s.rc->modify_qp(s.qp, at,
                        kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn | kAttrMinRnrTimer |
                            kAttrSelectiveRepeat,
                        h) != 0) {
      return false;
    }
    at.state = QpState::kRts;
    at.sq_psn = sq_psn;
    at.timeout = cfg_.timeout;
    at.retry_cnt = cfg_.retry_cnt;
    at.rnr_retry = cfg_.rnr_retry;
    // The link's rate: the sim's queue has no bound, and nothing else (DCQCN) slows a sender.
    at.rate_limit_kbps =
        cfg_.rate_limit_kbps != 0 ? cfg_.rate_limit_kbps : cfg_.link.rate_bps / 1000;
    return s.rc->modify_qp(s.qp, at,
                           kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry |
                               kAttrRateLimit,
                           h) == 0;
  }

  RoceConfig cfg_;
};

}  // namespace cleave::sim
