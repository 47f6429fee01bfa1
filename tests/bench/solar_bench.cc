// solar_bench.cc - header events per second through the Solar transport alone, no wire: WRITE
// blocks in at the target (placed by the NIC) with its ACKs out; ACKs in at the initiator,
// each acknowledging a burst of blocks and so completing I/Os and releasing more blocks out. A
// baseline in the same run decodes the same headers and does nothing else, so the figures read
// as "transport cost over parsing". Each benchmark checks at the end, from the transport's
// counters and what the fake context saw, that the work was really done (nothing refused as a
// bad header, ACKs sent, I/Os completed) and fails the run otherwise.
//
// Run: meson test -C build --benchmark -v solar (or build/tests/solar_bench).
#include <benchmark/benchmark.h>

#include <array>
#include <cstring>
#include <vector>

#include "common/wire.h"
#include "transport.h"
#include "transport/solar/solar.h"
#include "transport/solar/solar_wire.h"

namespace {

using namespace cleave::transport;
using namespace cleave::transport::solar;
namespace wire = cleave::wire;

constexpr FlowId kFlow = 0;
constexpr uint32_t kConn = 0x21;
constexpr uint32_t kPeerConn = 0x35;
constexpr uint32_t kBlock = 4096;
constexpr uint16_t kPaths = 4;
constexpr size_t kBurst = 32;
constexpr uint64_t kVolume = 1ull << 30;

// Counts what the transport emits; keeps the initiator's data blocks of the current burst (their
// path and sequence) so the benchmark acknowledges exactly what was sent.
class BenchCtx final : public Context {
 public:
  BenchCtx() : Context(tx_, ev_) {}
  void at(uint64_t ns) { set_now(ns); }
  int ms_post(FlowId, uint16_t, uint64_t, uint32_t, uint32_t) override { return 0; }
  int cursor_update(FlowId, uint32_t) override { return 0; }
  int ms_retire(FlowId, uint32_t) override { return 0; }
  int ms_retire_msg(FlowId, uint32_t) override { return 0; }
  bool copy_in(const uint8_t*, uint32_t, uint16_t, uint64_t) override { return true; }
  FlowId flow_open(ListenerId, const FlowTuple&, uint32_t, bool) override { return kNoFlow; }
  void flow_synced(FlowId, uint32_t, bool) override {}
  void flow_closed(FlowId) override {}

  uint64_t acks = 0;
  uint64_t blocks = 0;
  uint64_t done = 0;
  uint64_t failed = 0;
  struct Sent {
    uint16_t path;
    uint32_t seq;
  };
  std::vector<Sent> sent;  // blocks since the benchmark last took them

 protected:
  // Reads the type, path and sequence where the header has them (solar_wire.h); the transport
  // encoded them, and decoding each in full would measure the benchmark.
  void drain_tx(std::span<TxDesc> d) override {
    for (const TxDesc& x : d) {
      const uint8_t* h = x.l4.data() + kUdpLen;
      if (h[0] == uint8_t(Type::kAck)) {
        acks++;
      } else if (h[0] == uint8_t(Type::kWriteBlk)) {
        blocks++;
        sent.push_back({wire::load16(h + 2), wire::load32(h + 8)});
      }
    }
  }
  void drain_events(std::span<const Event> e) override {
    for (const Event& x : e) {
      done++;
      failed += x.status != 0;
    }
  }

 private:
  std::array<TxDesc, 64> tx_{};
  std::array<Event, 64> ev_{};
};

// A header from the peer, held with its bytes.
struct Hdr {
  std::array<uint8_t, kUdpLen + kHeaderLen> l4{};
  RxHeader h;
  void make(const Header& s, uint32_t payload) {
    wire::store16(l4.data(), udp_sport(s.path));
    wire::store16(l4.data() + 2, kUdpPort);
    wire::store16(l4.data() + 4, uint16_t(kUdpLen + kHeaderLen + payload));
    encode(s, l4.data() + kUdpLen);
    h = RxHeader{};
    h.l4 = l4.data();
    h.l4_len = uint16_t(l4.size());
    h.flow = kFlow;
    h.l4_csum = Csum::kGood;
    h.payload_len = payload;
    h.placed = payload == 0 ? Placed::kNoPayload : Placed::kPlaced;
  }
};

ConnConfig config(bool initiator) {
  ConnConfig c;
  c.initiator = initiator;
  c.local_conn = kConn;
  c.remote_conn = kPeerConn;
  c.paths = kPaths;
  c.block_bytes = kBlock;
  c.volume_len = initiator ? 0 : kVolume;
  return c;
}

bool check(benchmark::State& state, bool ok, const char* what) {
  if (!ok) state.SkipWithError(what);
  return ok;
}

// WRITE_BLKs in at the target, in bursts of 32 the NIC placed, round robin over four paths with
// each path's sequence rising; I/Os of 64 blocks with ACK_REQ on each I/O's last block. The
// transport decodes each header, records its arrival in the path's SACK state and sends ACKs
// (per burst per path that received, at once for ACK_REQ).
void BM_SolarWriteIn(benchmark::State& state) {
  SolarTransport t;
  BenchCtx ctx;
  ctx.at(1'000'000);
  if (!check(state, t.open(kFlow, config(false), ctx) == 0, "open")) return;
  // One I/O's 64 headers, built once; each burst patches the transmit sequence and the I/O id
  // in place (bytes 8..15 of the Solar header), as a sender's would differ.
  constexpr uint32_t kIoBlocks = 64;
  std::array<Hdr, kIoBlocks> hs;
  for (uint32_t k = 0; k < kIoBlocks; k++) {
    Header s;
    s.type = Type::kWriteBlk;
    s.path = uint16_t(k % kPaths);
    s.conn = kConn;
    s.index = uint16_t(k);
    s.count = kIoBlocks;
    s.offset = uint64_t(k) * kBlock;
    s.flags = k + 1 == kIoBlocks ? kFlagAckReq : 0;
    hs[k].make(s, kBlock);
  }
  std::array<RxHeader, kBurst> burst;
  std::array<uint32_t, kPaths> seq{};
  seq.fill(1);
  uint64_t n = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++, n++) {
      Hdr& h = hs[n % kIoBlocks];
      wire::store32(h.l4.data() + kUdpLen + 8, seq[n % kPaths]++);
      wire::store32(h.l4.data() + kUdpLen + 12, uint32_t(n / kIoBlocks + 1));
      burst[i] = h.h;
    }
    t.rx_burst(burst, ctx);
    ctx.flush();
  }
  const ConnStats* c = t.conn_stats(kFlow);
  check(state, c != nullptr && c->blocks_received == n && c->bad_headers == 0 && ctx.acks > 0,
        "the target did not take every block");
  state.SetItemsProcessed(int64_t(n));
  state.counters["acks_per_block"] = benchmark::Counter(double(ctx.acks) / double(n));
}
BENCHMARK(BM_SolarWriteIn);

// ACKs in at the initiator: WRITE I/Os of 64 blocks kept 16 deep by the app; every block the
// transport sends is acknowledged by an ACK on its path (largest = its sequence, the SACK bitmap
// full below it), in bursts of 32 ACKs; each ACK frees window, so the transport sends the next
// blocks in the same call, and each I/O completes when its 64 blocks are acknowledged. Items:
// ACKs in plus blocks out (both header events).
void BM_SolarAcksIn(benchmark::State& state) {
  SolarTransport t;
  BenchCtx ctx;
  uint64_t now = 1'000'000;
  ctx.at(now);
  if (!check(state, t.open(kFlow, config(true), ctx) == 0, "open")) return;
  constexpr uint32_t kIo = 64 * kBlock;
  constexpr unsigned kDepth = 16;
  uint64_t wr = 0;
  auto post = [&](unsigned k) {
    std::array<AppRequest, kDepth> r{};
    for (unsigned i = 0; i < k; i++) {
      r[i].flow = kFlow;
      r[i].kind = ReqKind::kWrite;
      r[i].len = kIo;
      r[i].offset = 0;
      r[i].remote_addr = (wr * kIo) % kVolume;
      r[i].wr_id = wr++;
    }
    t.app_burst(std::span(r.data(), k), ctx);
    ctx.flush();
  };
  post(kDepth);
  // One ACK header per slot of a burst, built once; each burst patches its path (bytes 2..3 and
  // the UDP source port), largest sequence (8..11) and echo (20..23).
  std::array<Hdr, kBurst> hs;
  for (Hdr& h : hs) {
    Header s;
    s.type = Type::kAck;
    s.conn = kConn;
    s.sack = ~uint64_t(0);
    h.make(s, 0);
  }
  std::array<RxHeader, kBurst> burst;
  uint64_t acks_in = 0;
  uint64_t done_seen = 0;
  size_t head = 0;  // ctx.sent before it is acknowledged
  for (auto _ : state) {
    // Acknowledge the oldest blocks sent, one ACK each, up to a burst.
    const size_t k = std::min(kBurst, ctx.sent.size() - head);
    if (k == 0) {
      state.SkipWithError("the initiator sent nothing to acknowledge");
      break;
    }
    now += 1000;
    ctx.at(now);
    for (size_t i = 0; i < k; i++) {
      const BenchCtx::Sent& o = ctx.sent[head + i];
      uint8_t* l4 = hs[i].l4.data();
      wire::store16(l4, udp_sport(o.path));
      wire::store16(l4 + kUdpLen + 2, o.path);
      wire::store32(l4 + kUdpLen + 8, o.seq);
      wire::store32(l4 + kUdpLen + 20, o.seq);
      burst[i] = hs[i].h;
    }
    head += k;
    if (head >= 4096) {  // drop what was acknowledged, now and then
      ctx.sent.erase(ctx.sent.begin(), ctx.sent.begin() + long(head));
      head = 0;
    }
    acks_in += k;
    t.rx_burst(std::span(burst.data(), k), ctx);
    ctx.flush();
    if (ctx.done != done_seen) {  // keep 16 I/Os in flight
      const auto more = unsigned(ctx.done - done_seen);
      done_seen = ctx.done;
      post(more);
    }
  }
  const ConnStats* c = t.conn_stats(kFlow);
  check(state,
        c != nullptr && c->bad_headers == 0 && ctx.failed == 0 && c->blocks_acked >= acks_in &&
            c->blocks_acked >= ctx.done * 64 && (acks_in < 4096 || ctx.done > 0),
        "the initiator did not complete its I/Os");
  state.SetItemsProcessed(int64_t(acks_in + ctx.blocks));
  state.counters["ios_done"] = benchmark::Counter(double(ctx.done));
  state.counters["blocks_per_ack"] = benchmark::Counter(double(ctx.blocks) / double(acks_in));
}
BENCHMARK(BM_SolarAcksIn);

// The baseline: the same WRITE_BLK headers decoded (decode_udp, as the transport reads each
// one) and nothing else done.
void BM_SolarDecodeOnly(benchmark::State& state) {
  std::array<Hdr, kBurst> hs;
  for (size_t i = 0; i < kBurst; i++) {
    Header s;
    s.type = Type::kWriteBlk;
    s.path = uint16_t(i % kPaths);
    s.conn = kConn;
    s.seq = uint32_t(i + 1);
    s.io_id = 1;
    s.index = uint16_t(i);
    s.count = 64;
    s.offset = i * kBlock;
    hs[i].make(s, kBlock);
  }
  uint64_t n = 0;
  uint64_t sum = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++, n++) {
      Header h;
      const RxHeader& r = hs[i].h;
      if (decode_udp(r.l4, size_t(r.l4_len) + r.payload_len, h) == Error::kNone) sum += h.seq;
    }
    benchmark::DoNotOptimize(sum);
  }
  check(state, sum != 0, "nothing decoded");
  state.SetItemsProcessed(int64_t(n));
}
BENCHMARK(BM_SolarDecodeOnly);

}  // namespace

BENCHMARK_MAIN();
