// tcp_bench.cc - header events per second through the TCP transport alone, no wire: in-order
// data headers in (placed by the NIC; runs taken as one, and not) with ACKs and cursor updates out,
// and ACKs in with TSO data descriptors out. A baseline in the same run parses the same headers and
// does nothing else, so the figures read as "transport cost over parsing".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "common/wire.h"
#include "transport.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_wire.h"

namespace {

using namespace cleave::transport;
using namespace cleave::transport::tcp;
namespace wire = cleave::wire;

constexpr FlowId kFlow = 0;
constexpr uint32_t kPeerIss = 1000;
constexpr size_t kBurst = 32;
constexpr uint32_t kSeg = 1448;
const FlowTuple kTuple{{IpAddr::v4(0x0A000001), 5000}, {IpAddr::v4(0x0A000002), 80}, 6};

// Counts what the transport emits and keeps the receive window open by reposting buffers.
class BenchCtx final : public Context {
 public:
  BenchCtx() : Context(tx_, ev_) {}
  void at(uint64_t ns) { set_now(ns); }
  int ms_post(FlowId, uint16_t, uint64_t, uint32_t, uint32_t) override { return 0; }
  int cursor_update(FlowId, uint32_t) override {
    cursors++;
    return 0;
  }
  int ms_retire(FlowId, uint32_t) override { return 0; }
  int ms_retire_msg(FlowId, uint32_t) override { return 0; }
  bool copy_in(const uint8_t*, uint32_t, uint16_t, uint64_t) override { return true; }
  FlowId flow_open(ListenerId, const FlowTuple&, uint32_t, bool) override { return kNoFlow; }
  void flow_synced(FlowId, uint32_t, bool) override {}
  void flow_closed(FlowId) override {}

  uint64_t descs = 0;
  uint64_t payload = 0;
  uint64_t recv_done = 0;
  uint64_t send_done = 0;
  uint64_t cursors = 0;
  uint32_t last_end = 0;  // one past the last byte sent

 protected:
  void drain_tx(std::span<TxDesc> d) override {
    descs += d.size();
    for (const TxDesc& x : d)
      payload += x.len;
    const TxDesc& b = d.back();
    last_end = wire::load32(&b.l4[4]) + b.len;
  }
  void drain_events(std::span<const Event> e) override {
    for (const Event& x : e) {
      recv_done += x.kind == EventKind::kRecvDone;
      send_done += x.kind == EventKind::kSendDone && x.status == 0;
    }
  }

 private:
  std::array<TxDesc, 64> tx_{};
  std::array<Event, 64> ev_{};
};

// A header from the peer, held with its bytes.
struct Hdr {
  std::array<uint8_t, 20> ip{};
  std::array<uint8_t, kMaxHeaderLen> tcp{};
  RxHeader h;
  void make(const BuildSpec& b0, uint32_t payload, Placed placed) {
    BuildSpec b = b0;
    b.src_port = 80;
    b.dst_port = 5000;
    const size_t hl = build(b, tcp.data());
    ip[0] = 0x45;
    ip[9] = 6;
    h = RxHeader{};
    h.l3 = ip.data();
    h.l3_len = 20;
    h.l4 = tcp.data();
    h.l4_len = uint16_t(hl);
    h.flow = kFlow;
    h.l4_csum = Csum::kGood;
    h.payload_len = payload;
    h.placed = placed;
  }
  void set_seq(uint32_t v) { wire::store32(&tcp[4], v); }
  void set_ack(uint32_t v) { wire::store32(&tcp[8], v); }
};

// An established connection: our SYN, the peer's SYN-ACK with Linux's options.
uint32_t establish(TcpTransport& tp, BenchCtx& ctx) {
  const std::vector<Param> p{{"isn", "5000"}};
  tp.connect(kFlow, kTuple, p, ctx);
  ctx.flush();
  Hdr s;
  BuildSpec b;
  b.seq = kPeerIss;
  b.ack = 5001;
  b.flags = kSyn | kAck;
  b.window = 65535;
  b.mss = 1460;
  b.sack_permitted = true;
  b.ts = true;
  b.ts_val = 1;
  b.wscale_opt = true;
  b.wscale = 14;
  s.make(b, 0, Placed::kNoPayload);
  tp.rx_burst({&s.h, 1}, ctx);
  ctx.flush();
  return 5001;
}

BuildSpec data_spec(uint32_t ack) {
  BuildSpec b;
  b.flags = kAck;
  b.ack = ack;
  b.window = 65535;
  b.ts = true;
  b.ts_val = 2;
  b.ts_ecr = 1;
  return b;
}

void post(TcpTransport& tp, BenchCtx& ctx, int n) {
  std::array<AppRequest, 16> r{};
  for (int i = 0; i < n; i++)
    r[i] = {kFlow, ReqKind::kRecv, 0, 1u << 20, uint64_t(i) << 20, uint64_t(i), 0};
  tp.app_burst({r.data(), size_t(n)}, ctx);
  ctx.flush();
}

// Data in: bursts of 32 in-order 1448-byte segments the NIC placed; the transport advances
// rcv_nxt, moves the NIC cursor, completes buffers and ACKs once per burst. Arg 1: a burst is
// one run, one pass through the receive path (the default); arg 0: runs off, a pass per segment.
void BM_TcpDataHeadersIn(benchmark::State& state) {
  TcpTransport tp;
  tp.set_merge_runs(state.range(0) != 0);
  BenchCtx ctx;
  ctx.at(1'000'000);
  const uint32_t ack = establish(tp, ctx);
  post(tp, ctx, 16);
  std::array<Hdr, kBurst> hs;
  std::array<RxHeader, kBurst> burst;
  for (auto& h : hs)
    h.make(data_spec(ack), kSeg, Placed::kPlaced);
  uint32_t seq = kPeerIss + 1;
  uint64_t reposted = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++) {
      hs[i].set_seq(seq);
      seq += kSeg;
      burst[i] = hs[i].h;
    }
    tp.rx_burst(burst, ctx);
    ctx.flush();
    while (reposted < ctx.recv_done) {
      AppRequest r{kFlow, ReqKind::kRecv, 0, 1u << 20, (reposted % 16) << 20, reposted, 0};
      tp.app_burst({&r, 1}, ctx);
      reposted++;
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["acks_per_hdr"] =
      benchmark::Counter(double(ctx.descs) / double(state.iterations() * kBurst));
  state.counters["cursor_per_burst"] =
      benchmark::Counter(double(ctx.cursors) / double(state.iterations()));
  state.counters["passes_per_burst"] = benchmark::Counter(
      double(tp.counters().segs_in - tp.counters().segs_merged) / double(state.iterations()));
}
BENCHMARK(BM_TcpDataHeadersIn)->Arg(1)->Arg(0);

// ACKs in: bursts of 32 ACKs, each acknowledging two segments, on a flow with a large send
// queued; the transport completes, grows cwnd and emits TSO descriptors over app memory.
void BM_TcpAcksIn(benchmark::State& state) {
  TcpTransport tp;
  BenchCtx ctx;
  ctx.at(1'000'000);
  const uint32_t iss1 = establish(tp, ctx);
  constexpr uint32_t kSend = 256u << 20;
  std::array<AppRequest, 2> sends{};
  for (int i = 0; i < 2; i++)
    sends[i] = {kFlow, ReqKind::kSend, 0, kSend, 0, uint64_t(i), 0};
  tp.app_burst(sends, ctx);
  ctx.flush();
  std::array<Hdr, kBurst> hs;
  std::array<RxHeader, kBurst> burst;
  BuildSpec b = data_spec(iss1);
  b.seq = kPeerIss + 1;
  for (auto& h : hs)
    h.make(b, 0, Placed::kNoPayload);
  uint32_t acked = iss1;
  uint64_t posted = 2;
  for (auto _ : state) {
    // Acknowledge what is out, two segments per ACK, never past what was sent.
    const uint32_t sent_to = ctx.last_end;
    for (size_t i = 0; i < kBurst; i++) {
      acked += std::min<uint32_t>(2 * kSeg, sent_to - acked);
      hs[i].set_ack(acked);
      burst[i] = hs[i].h;
    }
    tp.rx_burst(burst, ctx);
    ctx.flush();
    if (posted - ctx.send_done < 2) {  // two sends queued at all times
      AppRequest r{kFlow, ReqKind::kSend, 0, kSend, 0, posted++, 0};
      tp.app_burst({&r, 1}, ctx);
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["payload_per_ack"] =
      benchmark::Counter(double(ctx.payload) / double(state.iterations() * kBurst));
  state.counters["descs_per_ack"] =
      benchmark::Counter(double(ctx.descs) / double(state.iterations() * kBurst));
}
BENCHMARK(BM_TcpAcksIn);

// Baseline: parse the same 32 headers and nothing else.
void BM_ParseOnly(benchmark::State& state) {
  std::array<Hdr, kBurst> hs;
  for (auto& h : hs)
    h.make(data_spec(1), kSeg, Placed::kPlaced);
  uint32_t seq = 1;
  for (auto _ : state) {
    uint64_t sum = 0;
    for (auto& h : hs) {
      h.set_seq(seq);
      seq += kSeg;
      Segment s;
      parse(h.h.l4, h.h.l4_len, s);
      sum += s.seq + s.ts_val;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
}
BENCHMARK(BM_ParseOnly);

}  // namespace

BENCHMARK_MAIN();
