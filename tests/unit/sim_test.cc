// sim_test.cc - the simulated network itself: placement through the NIC model, TSO, every fault,
// the link's rate, MTU and queue, determinism, throughput. A raw test-only transport emits
// hand-built segments (no reliability) so each effect can be seen at the receiver.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "common/wire.h"
#include "sim_net.h"

namespace cleave::sim {
namespace {

using transport::Context;
using transport::Csum;
using transport::Event;
using transport::EventKind;
using transport::kNoFlow;
using transport::Placed;
using transport::ReqKind;
using transport::RxHeader;
using transport::Transport;
using transport::TxDesc;

constexpr uint8_t kSyn = 0x02, kPsh = 0x08, kAck = 0x10;
constexpr uint16_t kPortA = 4000, kPortB = 80;
constexpr uint64_t kMs = 1'000'000;
constexpr uint64_t kSec = 1'000'000'000;

// What the receiving transport saw of one segment.
struct Seen {
  FlowId flow = kNoFlow;
  uint32_t seq = 0;
  uint8_t flags = 0;
  Placed placed = Placed::kNoPayload;
  Csum csum = Csum::kNotChecked;
  uint8_t ecn = 0;
  uint32_t payload_len = 0;
  uint32_t trimmed = 0;
  bool out_of_order = false;
  bool has_listener = false;
  bool payload_ptr = false;
};

// A transport that emits raw segments: SYN on connect, SYN|ACK on accept, data as the app asks
// (TSO descriptors of up to 64 KB), no acknowledgements and no retransmission. On receive it
// records every header, advances the NIC cursor over in-order placed data, and copies deferred
// payload into the buffer the app posted.
class RawTcp final : public Transport {
 public:
  struct Flow {
    FlowTuple tuple;
    uint32_t snd_nxt = 0;
    uint32_t rcv_nxt = 0;
    bool synced = false;
    uint16_t mss = 1448;
    uint8_t ecn = 0;
    uint8_t flags = kAck | kPsh;
    bool copy_set = false;  // the posted receive buffer, for the copy path
    uint16_t copy_mr = 0;
    uint64_t copy_off = 0;
    uint32_t copy_len = 0;
    uint32_t copy_seq = 0;
  };

  std::map<FlowId, Flow> flows;
  std::vector<Seen> seen;
  std::vector<int> post_results;
  FlowId accepted = kNoFlow;
  uint32_t iss = 1000;
  uint64_t placed_bytes = 0;
  uint64_t copied_bytes = 0;
  uint64_t ticks = 0;

  std::string_view name() const override { return "rawtcp"; }
  std::string check_params(Params /*params*/) const override { return ""; }
  int listen(ListenerId /*listener*/, const Endpoint& /*local*/, Params /*params*/) override {
    return 0;
  }
  void unlisten(ListenerId /*listener*/) override {}
  int connect(FlowId flow, const FlowTuple& tuple, Params /*params*/, Context& ctx) override {
    Flow& f = flows[flow];
    f.tuple = tuple;
    f.snd_nxt = iss;
    emit(ctx, flow, f, tuple.proto == 6 ? kSyn : 0, 0, 0, 0);
    if (tuple.proto == 6) f.snd_nxt++;
    return 0;
  }

  void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) override {
    for (const RxHeader& h : hdrs) {
      const bool tcp = h.l3[9] == 6;
      Seen s;
      s.flow = h.flow;
      s.seq = tcp ? wire::load32(h.l4 + 4) : 0;
      s.flags = tcp ? h.l4[13] : 0;
      s.placed = h.placed;
      s.csum = h.l4_csum;
      s.ecn = h.ecn;
      s.payload_len = h.payload_len;
      s.trimmed = h.trimmed;
      s.out_of_order = h.out_of_order;
      s.has_listener = h.has_listener;
      s.payload_ptr = h.payload != nullptr;
      seen.push_back(s);
      if (h.l4_csum == Csum::kBad) continue;
      if (h.has_listener && (!tcp || (s.flags & kSyn) != 0)) {
        accept(h, s, ctx);
        continue;
      }
      auto it = flows.find(h.flow);
      if (it == flows.end()) continue;
      Flow& f = it->second;
      if ((s.flags & kSyn) != 0 && !f.synced) {  // the SYN|ACK of our connect
        f.rcv_nxt = s.seq + 1;
        f.synced = true;
        ctx.flow_synced(h.flow, f.rcv_nxt, false);
        ctx.event({h.flow, EventKind::kConnected, 0, 0, 0, 0});
        continue;
      }
      if (h.placed == Placed::kPlaced || h.placed == Placed::kTrimmed) {
        placed_bytes += h.payload_len - h.trimmed;
        if (s.seq + h.trimmed == f.rcv_nxt) {
          f.rcv_nxt += h.payload_len - h.trimmed;
          ctx.cursor_update(h.flow, f.rcv_nxt);
        }
      } else if (h.placed == Placed::kDeferred && h.payload != nullptr && f.copy_set) {
        const uint32_t at = tcp ? s.seq - f.copy_seq : uint32_t(copied_bytes);
        if (at < f.copy_len) {
          const uint32_t n = std::min(h.payload_len, f.copy_len - at);
          if (ctx.copy_in(h.payload, n, f.copy_mr, f.copy_off + at)) copied_bytes += n;
        }
      }
    }
  }

  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override {
    for (const AppRequest& r : reqs) {
      auto it = flows.find(r.flow);
      if (it == flows.end()) continue;
      Flow& f = it->second;
      switch (r.kind) {
        case ReqKind::kSend:
          send(ctx, r.flow, f, r);
          break;
        case ReqKind::kRecv:
          post_results.push_back(ctx.ms_post(r.flow, r.mr, r.offset, r.len, 0));
          f.copy_set = true;
          f.copy_mr = r.mr;
          f.copy_off = r.offset;
          f.copy_len = r.len;
          f.copy_seq = f.rcv_nxt;
          break;
        case ReqKind::kClose:
        case ReqKind::kAbort:
          ctx.flow_closed(r.flow);
          flows.erase(it);
          break;
        case ReqKind::kWrite:
        case ReqKind::kRead:
          break;
      }
    }
  }

  void tick(Context& /*ctx*/) override { ticks++; }
  bool flow_info(FlowId /*flow*/, transport::InfoSink& /*out*/) const override { return false; }
  size_t flow_count() const override { return flows.size(); }

  bool synced(FlowId flow) const {
    auto it = flows.find(flow);
    return it != flows.end() && it->second.synced;
  }

 private:
  void accept(const RxHeader& h, const Seen& s, Context& ctx) {
    FlowTuple t;
    t.local = {transport::IpAddr::v4(wire::load32(h.l3 + 16)), wire::load16(h.l4 + 2)};
    t.remote = {transport::IpAddr::v4(wire::load32(h.l3 + 12)), wire::load16(h.l4)};
    t.proto = h.l3[9];
    const uint32_t rcv = t.proto == 6 ? s.seq + 1 : 0;
    FlowId id = ctx.flow_open(h.listener, t, rcv, false);
    if (id == kNoFlow) return;
    Flow& f = flows[id];
    f.tuple = t;
    f.snd_nxt = iss;
    f.rcv_nxt = rcv;
    f.synced = true;
    accepted = id;
    ctx.event({id, EventKind::kAccepted, 0, 0, h.listener, 0});
    if (t.proto == 6) {
      emit(ctx, id, f, kSyn | kAck, 0, 0, 0);
      f.snd_nxt++;
    }
  }

  // Data in TSO descriptors of at most 64 KB (whole segments).
  void send(Context& ctx, FlowId flow, Flow& f, const AppRequest& r) {
    if (r.len == 0 || f.tuple.proto != 6) {
      emit(ctx, flow, f, f.flags, r.mr, r.offset, r.len);
      return;
    }
    const uint32_t chunk = std::max<uint32_t>(1, nic::kMaxTsoBytes / f.mss) * f.mss;
    for (uint32_t done = 0; done < r.len;) {
      const uint32_t n = std::min(chunk, r.len - done);
      emit(ctx, flow, f, f.flags, r.mr, r.offset + done, n);
      f.snd_nxt += n;
      done += n;
    }
  }

  static void emit(Context& ctx, FlowId flow, const Flow& f, uint8_t flags, uint16_t mr,
                   uint64_t offset, uint32_t len) {
    TxDesc& d = ctx.tx_next();
    d.flow = flow;
    d.mr = mr;
    d.offset = offset;
    d.len = len;
    d.ecn = f.ecn;
    uint8_t* l4 = d.l4.data();
    std::memset(l4, 0, 20);
    wire::store16(l4, f.tuple.local.port);
    wire::store16(l4 + 2, f.tuple.remote.port);
    if (f.tuple.proto == 6) {
      d.mss = f.mss;
      wire::store32(l4 + 4, f.snd_nxt);
      wire::store32(l4 + 8, f.rcv_nxt);
      l4[12] = 5 << 4;
      l4[13] = flags;
      wire::store16(l4 + 14, 0xFFFF);
      d.l4_len = 20;
    } else {
      d.l4_len = 8;  // the NIC fills the UDP length and checksum
    }
  }
};

uint8_t pattern(size_t i) {
  return uint8_t((uint32_t(i) * 2654435761u) >> 24);
}

struct PairOptions {
  LinkConfig link;
  bool b_zero_copy = true;
  bool b_nic_checks_csum = true;
  size_t mr_bytes = 1 << 20;
};

// Two hosts running RawTcp, a flow between them (A port 4000 -> B port 80), MRs on both sides.
struct Pair {
  RawTcp* ta = nullptr;
  RawTcp* tb = nullptr;
  std::unique_ptr<SimNet> net;
  FlowId fa = kNoFlow;
  FlowId fb = kNoFlow;
  uint16_t mra = 0;
  uint16_t mrb = 0;

  explicit Pair(uint64_t seed, const PairOptions& o = {}) {
    HostConfig a, b;
    auto ra = std::make_unique<RawTcp>();
    auto rb = std::make_unique<RawTcp>();
    ta = ra.get();
    tb = rb.get();
    a.transport = std::move(ra);
    b.transport = std::move(rb);
    b.zero_copy = o.b_zero_copy;
    b.nic.verify_l4_checksum = o.b_nic_checks_csum;
    net = std::make_unique<SimNet>(seed, o.link, Faults{}, Faults{}, std::move(a), std::move(b));
    mra = net->a().add_mr(o.mr_bytes);
    mrb = net->b().add_mr(o.mr_bytes);
    std::span<uint8_t> m = net->a().mr(mra);
    for (size_t i = 0; i < m.size(); i++)
      m[i] = pattern(i);
  }

  Host& a() { return net->a(); }
  Host& b() { return net->b(); }
  const LinkStats& ab() const { return net->stats(Dir::kAtoB); }

  // Handshake without faults, then clear what the transports saw.
  void connect(uint8_t proto = 6) {
    ASSERT_EQ(b().listen(1, kPortB), 0);
    fa = a().connect(kPortA, b().endpoint(kPortB), proto);
    ASSERT_NE(fa, kNoFlow);
    ASSERT_TRUE(net->run_until(
        [&] { return tb->accepted != kNoFlow && (proto != 6 || ta->synced(fa)); }, kMs))
        << net->describe();
    fb = tb->accepted;
    net->reset_stats();
    ta->seen.clear();
    tb->seen.clear();
  }

  void send(uint64_t offset, uint32_t len) {
    a().submit({fa, ReqKind::kSend, mra, len, offset, 0, 0});
  }
  void post(uint64_t offset, uint32_t len) {
    b().submit({fb, ReqKind::kRecv, mrb, len, offset, 0, 0});
  }
  // One step (the app requests go out), then until both links are empty.
  void drain() {
    net->run_for(1);
    ASSERT_TRUE(net->run_until(
        [&] { return net->in_flight(Dir::kAtoB) == 0 && net->in_flight(Dir::kBtoA) == 0; },
        10 * kSec))
        << net->describe();
  }
  // `frames` segments of `mss` bytes A -> B, sent and drained 1000 at a time.
  void stream(uint32_t mss, uint32_t frames) {
    ta->flows[fa].mss = uint16_t(mss);
    for (uint32_t sent = 0; sent < frames;) {
      const uint32_t n = std::min<uint32_t>(1000, frames - sent);
      send(0, n * mss);
      drain();
      sent += n;
    }
  }
  bool b_mr_matches(uint64_t offset, uint32_t len) {
    std::span<uint8_t> m = b().mr(mrb);
    for (uint64_t i = offset; i < offset + len; i++) {
      if (m[i] != pattern(i)) return false;
    }
    return true;
  }
  bool b_mr_zero() {
    std::span<uint8_t> m = b().mr(mrb);
    return std::all_of(m.begin(), m.end(), [](uint8_t v) { return v == 0; });
  }
  // The sequence numbers B saw, relative to the first data byte A sent, in segments of `mss`.
  std::vector<uint32_t> b_segments(uint32_t mss) const {
    std::vector<uint32_t> out;
    out.reserve(tb->seen.size());
    for (const Seen& s : tb->seen)
      out.push_back((s.seq - (ta->iss + 1)) / mss);
    return out;
  }
};

// ---- placement ----------------------------------------------------------------------------------

TEST(Sim, ZeroCopyPlacesPayloadAtThePeer) {
  Pair p(SimNet::seed_from_env(1));
  std::vector<Event> accepted;
  p.b().set_event_handler([&](const Event& e) { accepted.push_back(e); });
  p.connect();
  EXPECT_EQ(p.a().events(EventKind::kConnected), 1u);
  ASSERT_EQ(accepted.size(), 1u);
  EXPECT_EQ(accepted[0].kind, EventKind::kAccepted);
  EXPECT_EQ(accepted[0].flow, p.fb);
  EXPECT_EQ(accepted[0].aux, 1u);  // the listener
  ASSERT_TRUE(p.b().nic().flows_in_use() == 1 && p.a().nic().flows_in_use() == 1);
  p.post(0, 65536);
  p.send(0, 4000);
  ASSERT_TRUE(p.net->run_until([&] { return p.tb->placed_bytes >= 4000; }, kMs))
      << p.net->describe();
  ASSERT_EQ(p.tb->post_results, std::vector<int>{0});
  ASSERT_EQ(p.tb->seen.size(), 3u);
  for (const Seen& s : p.tb->seen) {
    EXPECT_EQ(s.placed, Placed::kPlaced);
    EXPECT_FALSE(s.payload_ptr);
    EXPECT_EQ(s.csum, Csum::kGood);
    EXPECT_EQ(s.flow, p.fb);
    EXPECT_FALSE(s.out_of_order);
  }
  EXPECT_EQ(p.tb->seen[0].payload_len, 1448u);
  EXPECT_EQ(p.tb->seen[2].payload_len, 4000u - 2 * 1448u);
  EXPECT_TRUE(p.b_mr_matches(0, 4000));
  EXPECT_EQ(p.b().mr(p.mrb)[4000], 0);
  EXPECT_EQ(p.b().nic().counter(nic::Ctr::kRxPlacedBytes), 4000u);
}

TEST(Sim, CopyModeDefersWithThePayload) {
  Pair p(SimNet::seed_from_env(2), {.b_zero_copy = false});
  p.connect();
  p.post(0, 65536);
  p.send(0, 4000);
  ASSERT_TRUE(p.net->run_until([&] { return p.tb->copied_bytes >= 4000; }, kMs))
      << p.net->describe();
  ASSERT_EQ(p.tb->seen.size(), 3u);
  for (const Seen& s : p.tb->seen) {
    EXPECT_EQ(s.placed, Placed::kDeferred);
    EXPECT_TRUE(s.payload_ptr);
    EXPECT_EQ(s.csum, Csum::kGood);
    EXPECT_EQ(s.flow, p.fb);
  }
  EXPECT_TRUE(p.b_mr_matches(0, 4000));
  EXPECT_EQ(p.b().nic().defer_count(nic::DeferReason::kCopyMode), 3u);
  EXPECT_EQ(p.b().nic().counter(nic::Ctr::kRxPlacedBytes), 0u);
}

TEST(Sim, Tso64KArrivesAsMssFramesAllPlaced) {
  Pair p(SimNet::seed_from_env(3));
  p.connect();
  const uint64_t sent0 = p.ab().sent;
  p.post(0, 1 << 20);
  p.send(0, 65536);
  ASSERT_TRUE(p.net->run_until([&] { return p.tb->placed_bytes >= 65536; }, kMs))
      << p.net->describe();
  EXPECT_EQ(p.ab().sent - sent0, 46u);  // 45 x 1448 + 376 (two descriptors: 65160 + 376)
  ASSERT_EQ(p.tb->seen.size(), 46u);
  uint32_t seq = p.ta->iss + 1;
  for (const Seen& s : p.tb->seen) {
    EXPECT_EQ(s.seq, seq);
    EXPECT_EQ(s.placed, Placed::kPlaced);
    EXPECT_LE(s.payload_len, 1448u);
    seq += s.payload_len;
  }
  EXPECT_EQ(seq, p.ta->iss + 1 + 65536);
  EXPECT_TRUE(p.b_mr_matches(0, 65536));
  // The second descriptor (376 bytes) is below the MSS: checksums only, no TSO.
  EXPECT_EQ(p.a().nic().counter(nic::Ctr::kTxTsoRequests), 1u);
}

TEST(Sim, UdpFlowsStayOffTheNicAndUseTheCopyPath) {
  Pair p(SimNet::seed_from_env(4));
  p.connect(17);
  EXPECT_EQ(p.b().nic().flows_in_use(), 0u);
  p.post(0, 4096);
  p.send(0, 1000);
  ASSERT_TRUE(p.net->run_until([&] { return p.tb->copied_bytes >= 1000; }, kMs))
      << p.net->describe();
  ASSERT_EQ(p.tb->seen.size(), 1u);
  EXPECT_EQ(p.tb->seen[0].placed, Placed::kDeferred);
  EXPECT_EQ(p.tb->seen[0].flow, p.fb);
  EXPECT_EQ(p.tb->seen[0].csum, Csum::kGood);
  EXPECT_EQ(p.tb->post_results, std::vector<int>{-ENOENT});
  EXPECT_TRUE(p.b_mr_matches(0, 1000));
}

// Sends hand-built Solar WRITE_BLKs (UDP + 32-byte header, the block by reference) in its next
// tick, and records every header it receives with the Solar header's first byte.
class RawSolar final : public Transport {
 public:
  struct Send {
    FlowId flow;
    uint16_t sport;
    uint64_t offset;  // the header's
    uint16_t mr;
    uint64_t at;  // the block in mr
    uint32_t len;
  };
  struct Got {
    RxHeader h;
    uint8_t type = 0;
    uint64_t offset = 0;
  };
  std::vector<Send> to_send;
  std::vector<Got> got;
  uint32_t conn = 0;  // the receiver's connection number, in every header sent

  std::string_view name() const override { return "rawsolar"; }
  std::string check_params(Params /*params*/) const override { return ""; }
  int listen(ListenerId, const Endpoint&, Params) override { return -EOPNOTSUPP; }
  void unlisten(ListenerId) override {}
  int connect(FlowId, const FlowTuple&, Params, Context&) override { return -EOPNOTSUPP; }
  void rx_burst(std::span<const RxHeader> hdrs, Context& /*ctx*/) override {
    for (const RxHeader& h : hdrs) {
      Got g{h};
      if (h.l4_len >= 40) {
        g.type = h.l4[8];
        g.offset = wire::load64(h.l4 + 8 + 16);
      }
      got.push_back(g);
    }
  }
  void app_burst(std::span<const transport::AppRequest>, Context&) override {}
  void tick(Context& ctx) override {
    for (const Send& s : to_send) {
      TxDesc& d = ctx.tx_next();
      d.flow = s.flow;
      d.mr = s.mr;
      d.offset = s.at;
      d.len = s.len;
      d.l4_len = 40;
      d.flags = transport::kTxParserTrailer;
      d.l4.fill(0);
      wire::store16(d.l4.data(), s.sport);
      wire::store16(d.l4.data() + 2, 7000);
      uint8_t* h = d.l4.data() + 8;
      h[0] = 1;  // WRITE_BLK
      wire::store16(h + 2, uint16_t(s.sport & 0x3FFF));
      wire::store32(h + 4, conn);
      wire::store64(h + 16, s.offset);
      wire::store16(h + 26, 1);  // count
    }
    to_send.clear();
  }
  bool flow_info(FlowId, transport::InfoSink&) const override { return false; }
  size_t flow_count() const override { return 0; }
};

// Solar flows: on the NIC by connection number from any source port, blocks placed by their
// offsets; a descriptor with kTxParserTrailer gets the block's CRC32C in the header; a frame the
// NIC does not place still finds its flow from any source port, its Solar header split from the
// block.
TEST(Sim, SolarFlowsTakeEverySourcePortAndGetTheirCrc32c) {
  HostConfig ha, hb;
  auto ra = std::make_unique<RawSolar>();
  auto rb = std::make_unique<RawSolar>();
  RawSolar* ta = ra.get();
  RawSolar* tb = rb.get();
  ha.transport = std::move(ra);
  hb.transport = std::move(rb);
  SimNet net(SimNet::seed_from_env(18), LinkConfig{}, Faults{}, Faults{}, std::move(ha),
             std::move(hb));
  const uint16_t src = net.a().add_mr(1 << 16);
  const uint16_t vol = net.b().add_mr(1 << 16);
  for (size_t i = 0; i < 4096; i++)
    net.a().mr(src)[i] = uint8_t(i * 7 + 3);
  const FlowId fa = net.a().solar_flow(net.b().ip(), 7000, 0x1A);
  const FlowId fb = net.b().solar_flow(net.a().ip(), 7000, 0x2B);
  ta->conn = 0x2B;  // B's number: its NIC finds fb by it
  ASSERT_NE(fa, kNoFlow);
  ASSERT_NE(fb, kNoFlow);
  ASSERT_EQ(net.b().ms_post(fb, vol, 0, 1 << 16, 0), 0);
  std::vector<std::vector<uint8_t>> wire_frames;
  net.set_tap([&](Dir d, std::span<const uint8_t> f) {
    if (d == Dir::kAtoB) wire_frames.emplace_back(f.begin(), f.end());
  });

  ta->to_send = {{fa, 0xC000, 8192, src, 0, 1024}, {fa, 0xC005, 4096, src, 1024, 1024}};
  ASSERT_TRUE(net.run_until([&] { return tb->got.size() == 2; }, kMs)) << net.describe();
  for (const RawSolar::Got& g : tb->got) {
    EXPECT_EQ(g.h.flow, fb);
    EXPECT_EQ(g.h.placed, Placed::kPlaced);
    EXPECT_EQ(g.h.l4_csum, Csum::kGood);
    EXPECT_EQ(g.h.l4_len, 40);
    EXPECT_EQ(g.h.payload_len, 1024u);
    EXPECT_EQ(g.type, 1);
  }
  EXPECT_EQ(std::memcmp(net.b().mr(vol).data() + 8192, net.a().mr(src).data(), 1024), 0);
  EXPECT_EQ(std::memcmp(net.b().mr(vol).data() + 4096, net.a().mr(src).data() + 1024, 1024), 0);
  ASSERT_EQ(wire_frames.size(), 2u);
  for (size_t i = 0; i < 2; i++) {  // Ethernet 14, IPv4 20, UDP 8: the header's CRC at 28
    const std::vector<uint8_t>& f = wire_frames[i];
    ASSERT_EQ(f.size(), 14 + 20 + 8 + 32 + 1024u);
    EXPECT_EQ(wire::load32(f.data() + 42 + 28), wire::crc32c(f.data() + 42 + 32, 1024)) << i;
  }

  // A corrupted block: not placed, still its flow's (from another source port), split as Solar.
  net.faults(Dir::kAtoB).corrupt_payload = 1;
  ta->to_send = {{fa, 0xC009, 0, src, 2048, 1024}};
  ASSERT_TRUE(net.run_until([&] { return tb->got.size() == 3; }, kMs)) << net.describe();
  const RawSolar::Got& g = tb->got[2];
  EXPECT_EQ(g.h.flow, fb);
  EXPECT_EQ(g.h.placed, Placed::kDeferred);
  EXPECT_EQ(g.h.l4_csum, Csum::kBad);
  EXPECT_EQ(g.h.l4_len, 40);
  EXPECT_EQ(g.h.payload_len, 1024u);
  EXPECT_NE(g.h.payload, nullptr);
  EXPECT_EQ(net.b().stats().rx_no_flow, 0u);
  EXPECT_TRUE(std::all_of(net.b().mr(vol).begin(), net.b().mr(vol).begin() + 1024,
                          [](uint8_t b) { return b == 0; }));
}

TEST(Sim, CommandErrorsMapToNegativeErrno) {
  Pair p(SimNet::seed_from_env(5));
  p.connect();
  Host& b = p.b();
  EXPECT_EQ(b.ms_post(77, p.mrb, 0, 100, 0), -ENOENT);
  EXPECT_EQ(b.ms_post(p.fb, p.mrb, (1 << 20) - 10, 100, 0), -ERANGE);
  EXPECT_EQ(b.ms_post(p.fb, p.mrb, 0, 0, 0), -EINVAL);
  EXPECT_EQ(b.ms_retire(p.fb, 1), -EAGAIN);
  EXPECT_EQ(b.ms_post(p.fb, p.mrb, 0, 100, 0), 0);
  EXPECT_EQ(b.cursor_update(p.fb, 0), -EINVAL);  // backwards
  EXPECT_FALSE(b.copy_in(nullptr, 10, p.mrb, (1 << 20) - 5));
  EXPECT_FALSE(b.copy_in(nullptr, 10, 9, 0));
  // Closing forgets the flow on the NIC and in the tables.
  EXPECT_EQ(b.nic().flows_in_use(), 1u);
  b.submit({p.fb, ReqKind::kClose, 0, 0, 0, 0, 0});
  p.net->run_for(1);
  EXPECT_EQ(b.nic().flows_in_use(), 0u);
  EXPECT_EQ(b.flow_tuple(p.fb), nullptr);
  EXPECT_EQ(b.ms_post(p.fb, p.mrb, 0, 100, 0), -ENOENT);
}

// ---- determinism --------------------------------------------------------------------------------

struct Trace {
  std::array<LinkStats, 2> stats;
  std::vector<uint64_t> order;  // a hash of every delivered frame, with its direction
};

Trace faulty_run(uint64_t seed) {
  Pair p(seed, {.mr_bytes = 4 << 20});
  p.connect();
  Faults f;
  f.loss = 0.02;
  f.loss_burst = 0.2;
  f.reorder = 0.05;
  f.reverse = 0.01;
  f.duplicate = 0.02;
  f.corrupt_header = 0.01;
  f.corrupt_payload = 0.01;
  f.corrupt_checksum = 0.01;
  f.truncate = 0.01;
  f.ce = 0.1;
  p.net->faults(Dir::kAtoB) = f;
  p.net->faults(Dir::kBtoA) = f;
  p.ta->flows[p.fa].ecn = 2;
  Trace t;
  p.net->set_tap([&](Dir d, std::span<const uint8_t> frame) {
    uint64_t h = 0xCBF29CE484222325ull ^ uint64_t(d);
    for (uint8_t c : frame)
      h = (h ^ c) * 0x100000001B3ull;
    t.order.push_back(h);
  });
  p.post(0, 4 << 20);
  p.b().submit({p.fb, ReqKind::kSend, p.mrb, 2 << 20, 0, 0, 0});
  for (int i = 0; i < 4; i++)
    p.send(uint64_t(i) << 20, 1 << 20);
  p.drain();
  t.stats = {p.net->stats(Dir::kAtoB), p.net->stats(Dir::kBtoA)};
  return t;
}

TEST(Sim, SameSeedReplaysExactlyAndAnotherSeedDoesNot) {
  const uint64_t seed = SimNet::seed_from_env(42);
  Trace a = faulty_run(seed);
  Trace b = faulty_run(seed);
  Trace c = faulty_run(seed + 1);
  for (int d = 0; d < 2; d++) {
    EXPECT_GT(a.stats[d].lost, 0u);
    EXPECT_GT(a.stats[d].reordered, 0u);
    EXPECT_GT(a.stats[d].duplicated, 0u);
    EXPECT_GT(a.stats[d].corrupted(), 0u);
    EXPECT_GT(a.stats[d].truncated, 0u);
  }
  EXPECT_GT(a.stats[0].ce_marked, 0u);
  for (const LinkStats& s : a.stats)  // every frame accounted for (the links are empty)
    EXPECT_EQ(s.sent + s.duplicated, s.delivered + s.dropped());
  EXPECT_EQ(a.stats[0], b.stats[0]);
  EXPECT_EQ(a.stats[1], b.stats[1]);
  EXPECT_EQ(a.order, b.order);
  EXPECT_NE(a.order, c.order);
  EXPECT_FALSE(a.stats[0] == c.stats[0] && a.stats[1] == c.stats[1]);
}

// ---- loss, duplication, reordering --------------------------------------------------------------

TEST(Sim, LossRateIsCloseToConfigured) {
  const uint64_t seed = SimNet::seed_from_env(7);
  Pair p(seed, {.mr_bytes = 100'000});
  p.connect();
  p.net->faults(Dir::kAtoB).loss = 0.01;
  p.stream(100, 100'000);
  const LinkStats& s = p.ab();
  ASSERT_EQ(s.sent, 100'000u) << p.net->describe();
  const double rate = double(s.lost) / double(s.sent);
  EXPECT_NEAR(rate, 0.01, 0.002) << p.net->describe();
  EXPECT_EQ(s.burst_lost, 0u);
  EXPECT_EQ(s.delivered + s.lost, s.sent);
  EXPECT_EQ(p.tb->seen.size(), s.delivered);
}

TEST(Sim, LossBurstsLoseRunsOfFrames) {
  Pair p(SimNet::seed_from_env(8), {.mr_bytes = 100'000});
  p.connect();
  Faults& f = p.net->faults(Dir::kAtoB);
  f.loss = 0.01;
  f.loss_burst = 1;
  f.loss_burst_len = 8;
  p.stream(100, 50'000);
  const LinkStats& s = p.ab();
  const uint64_t starts = s.lost - s.burst_lost;
  ASSERT_GT(starts, 0u);
  // Each burst is 2-8 frames, 5 on average.
  EXPECT_NEAR(double(s.lost) / double(starts), 5.0, 0.5) << p.net->describe();
  // At the receiver: runs of missing segments, none shorter than two (bursts may merge; a run
  // cut by the end of the stream may be shorter).
  std::vector<bool> got(50'000, false);
  for (uint32_t g : p.b_segments(100))
    got.at(g) = true;
  uint64_t runs = 0, short_runs = 0, missing = 0;
  for (uint32_t i = 0; i < got.size();) {
    if (got[i]) {
      i++;
      continue;
    }
    uint32_t len = 0;
    for (; i < got.size() && !got[i]; i++)
      len++;
    runs++;
    missing += len;
    if (len < 2 && i < got.size()) short_runs++;
  }
  EXPECT_EQ(missing, s.lost);
  EXPECT_EQ(short_runs, 0u);
  EXPECT_LE(runs, starts);
  EXPECT_GE(double(runs), 0.9 * double(starts));
}

TEST(Sim, DuplicatesArriveAsExtraCopies) {
  Pair p(SimNet::seed_from_env(9), {.mr_bytes = 100'000});
  p.connect();
  p.net->faults(Dir::kAtoB).duplicate = 0.05;
  p.stream(100, 10'000);
  const LinkStats& s = p.ab();
  std::vector<uint32_t> copies(10'000, 0);
  for (uint32_t g : p.b_segments(100))
    copies.at(g)++;
  uint64_t extra = 0, max_copies = 0;
  for (uint32_t c : copies) {
    ASSERT_GE(c, 1u) << p.net->describe();
    extra += c - 1;
    max_copies = std::max<uint64_t>(max_copies, c);
  }
  EXPECT_EQ(extra, s.duplicated);
  EXPECT_NEAR(double(s.duplicated), 0.05 * 2 * 10'000, 150);  // 1-3 copies, 2 on average
  EXPECT_EQ(max_copies, 4u);
  EXPECT_EQ(s.delivered, s.sent + s.duplicated);
}

TEST(Sim, ReorderedFramesArriveLateAndNoneIsLost) {
  Pair p(SimNet::seed_from_env(10), {.mr_bytes = 100'000});
  p.connect();
  Faults& f = p.net->faults(Dir::kAtoB);
  f.reorder = 0.05;
  f.reorder_depth = 3;
  p.stream(100, 10'000);
  const LinkStats& s = p.ab();
  std::vector<uint32_t> segs = p.b_segments(100);
  ASSERT_EQ(segs.size(), 10'000u) << p.net->describe();
  std::vector<bool> got(10'000, false);
  uint64_t late = 0, late_by_3 = 0;
  uint32_t highest = 0;
  for (size_t i = 0; i < segs.size(); i++) {
    ASSERT_FALSE(got.at(segs[i]));
    got[segs[i]] = true;
    if (i > 0 && segs[i] < highest) {
      late++;
      late_by_3 += highest - segs[i] >= 3;
    }
    highest = std::max(highest, segs[i]);
  }
  // A held frame goes out after 1-3 later ones: each is late, and only they are, but for a few
  // held at the end of a 1000-frame batch (released in order by the hold deadline). About a
  // third are late by three frames or more.
  EXPECT_GT(s.reordered, 300u);
  EXPECT_LE(late, s.reordered);
  EXPECT_GE(late + 20, s.reordered);
  EXPECT_GT(late_by_3, s.reordered / 5);
  EXPECT_LT(late_by_3, s.reordered / 2);
}

TEST(Sim, ReversedWindowsArriveInDescendingOrder) {
  Pair p(SimNet::seed_from_env(11), {.mr_bytes = 100'000});
  p.connect();
  Faults& f = p.net->faults(Dir::kAtoB);
  f.reverse = 0.01;
  f.reverse_window = 8;
  p.stream(100, 10'000);
  const LinkStats& s = p.ab();
  std::vector<uint32_t> segs = p.b_segments(100);
  ASSERT_EQ(segs.size(), 10'000u) << p.net->describe();
  // Maximal descending runs: one per reversed window, 8 long unless a batch ended first.
  uint64_t full = 0, partial = 0;
  for (size_t i = 0; i < segs.size();) {
    size_t j = i + 1;
    while (j < segs.size() && segs[j] + 1 == segs[j - 1])
      j++;
    if (j - i == 8) full++;
    if (j - i > 1 && j - i < 8) partial++;
    EXPECT_LE(j - i, 8u);
    i = j;
  }
  EXPECT_GT(s.reversals, 50u);
  EXPECT_GE(full + partial, s.reversals - 10);  // a window of one frame looks in order
  EXPECT_LE(full + partial, s.reversals);
  EXPECT_LE(partial, 10u);  // only a window still open when a 1000-frame batch ends
}

// ---- corruption, truncation, CE -----------------------------------------------------------------

TEST(Sim, CorruptPayloadIsFlaggedAndNeverPlaced) {
  Pair p(SimNet::seed_from_env(12));
  p.connect();
  p.net->faults(Dir::kAtoB).corrupt_payload = 1;
  p.post(0, 1 << 20);
  p.send(0, 65536);
  p.drain();
  EXPECT_EQ(p.ab().corrupted_payload, 46u);
  ASSERT_EQ(p.tb->seen.size(), 46u) << p.net->describe();
  for (const Seen& s : p.tb->seen) {
    EXPECT_EQ(s.csum, Csum::kBad);
    EXPECT_EQ(s.placed, Placed::kDeferred);
    EXPECT_EQ(s.flow, p.fb);  // the tuple is intact: found in the software table
  }
  EXPECT_EQ(p.b().nic().defer_count(nic::DeferReason::kBadL4Checksum), 46u);
  EXPECT_EQ(p.b().nic().counter(nic::Ctr::kRxPlacedBytes), 0u);
  EXPECT_TRUE(p.b_mr_zero());
}

TEST(Sim, CorruptHeaderIsCaughtByAChecksumOrHeaderCheck) {
  Pair p(SimNet::seed_from_env(13), {.mr_bytes = 100'000});
  p.connect();
  p.post(0, 100'000);
  p.net->faults(Dir::kAtoB).corrupt_header = 1;
  const HostStats before = p.b().stats();
  p.stream(100, 5'000);
  const LinkStats& s = p.ab();
  HostStats h = p.b().stats();
  h.rx_frames -= before.rx_frames;  // the handshake's SYN
  EXPECT_EQ(s.corrupted_header, 5'000u);
  EXPECT_EQ(h.rx_frames, 5'000u);
  // Every frame was dropped by the host (IP-level checks, or a tuple that matches nothing) or
  // reached the transport with a bad L4 checksum; none was placed.
  EXPECT_GT(h.rx_bad_ip, 0u);
  EXPECT_GT(h.rx_bad_csum, 0u);
  uint64_t bad = 0;
  for (const Seen& x : p.tb->seen) {
    EXPECT_EQ(x.csum, Csum::kBad);
    bad += x.csum == Csum::kBad;
  }
  EXPECT_EQ(h.rx_bad_ip + h.rx_truncated + h.rx_bad_l4_header + h.rx_no_flow + bad, 5'000u)
      << p.net->describe();
  EXPECT_EQ(p.b().nic().counter(nic::Ctr::kRxPlacedBytes), 0u);
  EXPECT_TRUE(p.b_mr_zero());
}

TEST(Sim, CorruptChecksumFieldIsFlagged) {
  Pair p(SimNet::seed_from_env(14), {.mr_bytes = 100'000});
  p.connect();
  p.post(0, 100'000);
  p.net->faults(Dir::kAtoB).corrupt_checksum = 1;
  p.stream(100, 2'000);
  EXPECT_EQ(p.ab().corrupted_checksum, 2'000u);
  ASSERT_EQ(p.tb->seen.size(), 2'000u) << p.net->describe();
  for (const Seen& x : p.tb->seen)
    EXPECT_EQ(x.csum, Csum::kBad);
  EXPECT_TRUE(p.b_mr_zero());
}

// A NIC that does not check L4 checksums places what arrives; the host checks in software and
// the transport sees the verdict (and must not accept the data).
TEST(Sim, HostChecksInSoftwareWhenTheNicDoesNot) {
  Pair p(SimNet::seed_from_env(24), {.b_nic_checks_csum = false});
  p.connect();
  p.post(0, 1 << 20);
  const uint64_t sw0 = p.b().stats().rx_sw_csum;
  p.send(0, 14480);
  p.drain();
  p.net->faults(Dir::kAtoB).corrupt_payload = 1;
  p.send(14480, 14480);
  p.drain();
  EXPECT_EQ(p.b().stats().rx_sw_csum - sw0, 20u);
  ASSERT_EQ(p.tb->seen.size(), 20u) << p.net->describe();
  for (size_t i = 0; i < 20; i++)
    EXPECT_EQ(p.tb->seen[i].csum, i < 10 ? Csum::kGood : Csum::kBad) << i;
}

TEST(Sim, TruncatedFramesAreFlaggedAndDropped) {
  Pair p(SimNet::seed_from_env(15), {.mr_bytes = 1 << 20});
  p.connect();
  p.post(0, 1 << 20);
  p.net->faults(Dir::kAtoB).truncate = 1;
  for (int i = 0; i < 16; i++)
    p.send(uint64_t(i) << 16, 1 << 16);
  p.drain();
  const LinkStats& s = p.ab();
  EXPECT_EQ(s.truncated, s.sent);
  EXPECT_EQ(p.b().stats().rx_truncated, s.delivered) << p.net->describe();
  EXPECT_TRUE(p.tb->seen.empty());
  EXPECT_TRUE(p.b_mr_zero());
}

TEST(Sim, CeMarksOnlyEctFrames) {
  Pair p(SimNet::seed_from_env(16));
  p.connect();
  p.post(0, 1 << 20);
  p.net->faults(Dir::kAtoB).ce = 1;
  p.ta->flows[p.fa].ecn = 2;  // ECT(0)
  p.send(0, 14480);
  p.drain();
  p.ta->flows[p.fa].ecn = 1;  // ECT(1)
  p.send(14480, 14480);
  p.drain();
  p.ta->flows[p.fa].ecn = 0;  // not ECN-capable
  p.send(28960, 14480);
  p.drain();
  EXPECT_EQ(p.ab().ce_marked, 20u);
  ASSERT_EQ(p.tb->seen.size(), 30u) << p.net->describe();
  for (size_t i = 0; i < 30; i++) {
    EXPECT_EQ(p.tb->seen[i].ecn, i < 20 ? 3 : 0) << i;
    EXPECT_EQ(p.tb->seen[i].placed, Placed::kPlaced) << i;  // the IP checksum was fixed
  }
  EXPECT_TRUE(p.b_mr_matches(0, 3 * 14480));
}

// ---- targeted drops, MTU, queue, rate, path down ------------------------------------------------

TEST(Sim, DropIfDropsExactlyTheMatchingFrames) {
  Pair p(SimNet::seed_from_env(17));
  p.connect();
  p.post(0, 1 << 20);
  // Drop pure ACKs, and the segment at byte 1448 of the stream (the second one).
  const uint32_t second = p.ta->iss + 1 + 1448;
  p.net->faults(Dir::kAtoB).drop_if = [&](std::span<const uint8_t> f) {
    const uint32_t ip_len = wire::load16(f.data() + 16);
    return ip_len == 40 || wire::load32(f.data() + 34 + 4) == second;
  };
  for (int i = 0; i < 10; i++) {
    p.send(uint64_t(i) * 1448, 1448);
    p.a().submit({p.fa, ReqKind::kSend, p.mra, 0, 0, 0, 0});  // a pure ACK
  }
  p.drain();
  EXPECT_EQ(p.ab().dropped_filter, 11u);
  ASSERT_EQ(p.tb->seen.size(), 9u) << p.net->describe();
  for (const Seen& s : p.tb->seen) {
    EXPECT_EQ(s.payload_len, 1448u);
    EXPECT_NE(s.seq, second);
  }
}

TEST(Sim, FramesAboveTheMtuAreDropped) {
  Pair p(SimNet::seed_from_env(18));
  p.connect();
  p.post(0, 1 << 20);
  p.ta->flows[p.fa].mss = 1460;  // IP length 1500: fits
  p.send(0, 2920);
  p.drain();
  EXPECT_EQ(p.ab().dropped_mtu, 0u);
  EXPECT_EQ(p.tb->seen.size(), 2u);
  p.ta->flows[p.fa].mss = 1461;  // 1501: too big
  p.send(0, 2922);
  p.drain();
  p.ta->flows[p.fa].mss = 4000;  // larger than a frame buffer
  p.send(0, 8000);
  p.drain();
  EXPECT_EQ(p.ab().dropped_mtu, 4u) << p.net->describe();
  EXPECT_EQ(p.tb->seen.size(), 2u);
  EXPECT_EQ(p.a().stats().tx_errors, 0u);

  LinkConfig jumbo;
  jumbo.mtu = 9000;
  Pair q(SimNet::seed_from_env(19), {.link = jumbo});
  q.connect();
  q.post(0, 1 << 20);
  q.ta->flows[q.fa].mss = 8960;
  q.send(0, 3 * 8960);
  q.drain();
  EXPECT_EQ(q.ab().dropped_mtu, 0u);
  EXPECT_EQ(q.tb->placed_bytes, 3u * 8960);
}

TEST(Sim, QueueLimitTailDrops) {
  LinkConfig link;
  link.rate_bps = 1'000'000'000;
  link.queue_bytes = 30'000;
  Pair p(SimNet::seed_from_env(20), {.link = link});
  p.connect();
  p.post(0, 1 << 20);
  p.send(0, 65536);  // 46 frames at one instant
  p.drain();
  // The same rule by hand: a frame fits while the backlog plus its wire size stays in the limit.
  uint64_t backlog = 0, accepted = 0;
  for (int i = 0; i < 46; i++) {
    const uint64_t wire = (i < 45 ? 1448 : 376) + 54 + 24;
    if (backlog + wire <= link.queue_bytes) {
      backlog += wire;
      accepted++;
    }
  }
  EXPECT_EQ(p.ab().dropped_queue, 46 - accepted) << p.net->describe();
  EXPECT_EQ(p.ab().delivered, accepted);
  EXPECT_LE(p.ab().max_queue_bytes, link.queue_bytes);
  EXPECT_EQ(p.tb->seen.size(), accepted);
}

TEST(Sim, OneMegabyteAtOneGigabitTakesEightMilliseconds) {
  LinkConfig link;
  link.rate_bps = 1'000'000'000;
  Pair p(SimNet::seed_from_env(21), {.link = link});
  p.connect();
  p.post(0, 1 << 20);
  for (int i = 0; i < 16; i++)
    p.send(uint64_t(i) << 16, 1 << 16);
  const uint64_t t0 = p.net->now_ns();
  ASSERT_TRUE(p.net->run_until([&] { return p.tb->placed_bytes >= (1u << 20); }, kSec))
      << p.net->describe();
  const uint64_t took = p.net->now_ns() - t0;
  const LinkStats& s = p.ab();
  // Wire bytes: frames plus 24 bytes of preamble, FCS and gap each; 8 ns a byte at 1 Gbit/s.
  const uint64_t expect = (s.delivered_bytes + 24 * s.delivered) * 8 + link.delay_ns;
  EXPECT_NEAR(double(took), double(expect), 2'000);
  EXPECT_GT(took, 8 * kMs);
  EXPECT_LT(took, 9 * kMs);
  EXPECT_TRUE(p.b_mr_matches(0, 1 << 20));
}

TEST(Sim, PathGoesDownAndUp) {
  Pair p(SimNet::seed_from_env(22));
  p.connect();
  p.post(0, 1 << 20);
  Faults& f = p.net->faults(Dir::kAtoB);
  f.down = true;
  p.send(0, 14480);
  p.drain();
  EXPECT_EQ(p.ab().dropped_down, 10u);
  EXPECT_TRUE(p.tb->seen.empty());
  // Frames in flight when the path goes down are lost too.
  f.down = false;
  p.send(0, 14480);
  p.net->run_for(10'000);
  EXPECT_EQ(p.net->in_flight(Dir::kAtoB), 10u);
  f.down = true;
  p.drain();
  EXPECT_EQ(p.ab().dropped_down, 20u);
  EXPECT_TRUE(p.tb->seen.empty());
  f.down = false;
  p.ta->flows[p.fa].snd_nxt = p.ta->iss + 1;  // retransmit from the first byte
  p.send(0, 14480);
  p.drain();
  EXPECT_EQ(p.tb->seen.size(), 10u) << p.net->describe();
  EXPECT_TRUE(p.b_mr_matches(0, 14480));
}

// ---- speed --------------------------------------------------------------------------------------

// Not a benchmark (nothing is asserted on time): prints frames per second of wall time for a
// zero-copy stream through both NIC models, so a slowdown shows in the test log.
TEST(Sim, ThroughputOfAZeroCopyStream) {
  constexpr uint32_t kBytes = 64 << 20;
  Pair p(SimNet::seed_from_env(23), {.mr_bytes = kBytes});
  p.connect();
  p.post(0, kBytes);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint32_t off = 0; off < kBytes; off += 1 << 20) {
    p.send(off, 1 << 20);
    p.drain();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const LinkStats& s = p.ab();
  EXPECT_EQ(p.tb->placed_bytes, kBytes) << p.net->describe();
  EXPECT_TRUE(p.b_mr_matches(0, kBytes));
  std::printf("sim throughput: %llu frames (%u MB) in %.3f s wall, %.0f frames/s, %.2f Gbit/s\n",
              static_cast<unsigned long long>(s.delivered), kBytes >> 20, secs,
              double(s.delivered) / secs, double(s.delivered_bytes) * 8 / secs / 1e9);
  RecordProperty("frames_per_second", std::to_string(uint64_t(double(s.delivered) / secs)));
}

}  // namespace
}  // namespace cleave::sim
