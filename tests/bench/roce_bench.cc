// roce_bench.cc - header events per second through the RoCEv2 RC transport alone, no wire: WRITE
// and SEND packets in at the responder (placed by the NIC) with coalesced ACKs and cursor updates
// out; ACKs in at the requester, completing WRITEs with more WRITE packets out; READ responses in
// at the requester. A baseline in the same run parses the same headers and does nothing else, so
// the figures read as "transport cost over parsing". Each benchmark checks at the end, from the
// transport's counters and what the fake context saw, that the work was really done (nothing
// dropped as malformed, completions and ACKs happened) and fails the run otherwise.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "common/wire.h"
#include "transport.h"
#include "transport/rocev2/rc.h"
#include "transport/rocev2/roce_wire.h"

namespace {

using namespace cleave::transport;
using namespace cleave::transport::roce;
namespace wire = cleave::wire;

constexpr FlowId kFlow = 0;
constexpr uint32_t kQpn = 0x11;
constexpr uint32_t kPeerQpn = 0x22;
constexpr uint32_t kPeerPsn = 0xFFFF00;  // wraps early: 24-bit PSNs are part of the work
constexpr uint32_t kOurPsn = 0x100;
constexpr uint32_t kPmtu = 4096;
constexpr size_t kBurst = 32;
constexpr size_t kPsnOff = kUdpLen + 9;  // the BTH's PSN in the L4 bytes

uint32_t get_psn(const uint8_t* l4) {
  return wire::load24(l4 + kPsnOff);
}
void set_psn(uint8_t* l4, uint32_t psn) {
  wire::store24(l4 + kPsnOff, psn);
}

// Counts what the transport emits. READ requests it sent are remembered (a fixed ring) so the
// benchmark answers them in order; data packets' highest PSN so it acknowledges only what was
// sent.
class BenchCtx final : public Context, public RdmaContext {
 public:
  BenchCtx() : Context(tx_, ev_) {}
  void at(uint64_t ns) { set_now(ns); }
  int ms_post(FlowId, uint16_t, uint64_t, uint32_t, uint32_t) override {
    ms_posts++;
    return 0;
  }
  int cursor_update(FlowId, uint32_t c) override {
    cursors++;
    cursor = c;
    return 0;
  }
  int ms_retire(FlowId, uint32_t) override { return 0; }
  int ms_retire_msg(FlowId, uint32_t) override {
    ms_retires++;
    return 0;
  }
  RdmaContext* rdma() override { return this; }
  int rkey_check(FlowId, uint32_t, uint64_t va, uint32_t, bool, uint16_t* mr,
                 uint64_t* offset) override {
    *mr = 0;
    *offset = va;
    return 0;
  }
  int read_post(FlowId, uint32_t, uint16_t, uint64_t, uint32_t) override { return 0; }
  int read_retire(FlowId, uint32_t) override { return 0; }
  int roce_resync(FlowId, uint32_t, uint32_t) override { return 0; }
  bool copy_in(const uint8_t*, uint32_t, uint16_t, uint64_t) override { return true; }
  FlowId flow_open(ListenerId, const FlowTuple&, uint32_t, bool) override { return kNoFlow; }
  void flow_synced(FlowId, uint32_t, bool) override {}
  void flow_closed(FlowId) override {}

  uint64_t descs = 0;
  uint64_t acks = 0;  // ACK/NAK descriptors
  uint64_t naks = 0;  // of them, NAKs (a syndrome other than ACK)
  uint64_t data = 0;  // request packets (SEND, WRITE, READ request)
  uint64_t payload = 0;
  uint64_t cursors = 0;
  uint64_t ms_posts = 0;
  uint64_t ms_retires = 0;
  uint32_t cursor = 0;
  uint64_t recv_done = 0;
  uint64_t write_done = 0;
  uint64_t read_done = 0;
  uint64_t failed = 0;    // events with status != 0
  uint32_t sent_psn = 0;  // the highest request PSN sent (valid when data != 0)
  uint32_t last_ack = 0;  // the PSN of the newest ACK
  // READ requests sent, oldest first: first PSN.
  std::array<uint32_t, 64> reads{};
  uint64_t reads_head = 0;
  uint64_t reads_tail = 0;

 protected:
  void drain_tx(std::span<TxDesc> d) override {
    descs += d.size();
    for (const TxDesc& x : d) {
      payload += x.len;
      const uint8_t op = x.l4[kUdpLen];
      const uint32_t psn = get_psn(x.l4.data());
      if (op == kAck) {
        acks++;
        naks += !syndrome_is_ack(x.l4[kUdpLen + kBthLen]);
        last_ack = psn;
        continue;
      }
      if (data == 0 || psn_diff(psn, sent_psn) > 0) sent_psn = psn;
      data++;
      if (op == kReadRequest) reads[reads_tail++ % reads.size()] = psn;
    }
  }
  void drain_events(std::span<const Event> e) override {
    for (const Event& x : e) {
      failed += x.status != 0;
      recv_done += x.kind == EventKind::kRecvDone;
      write_done += x.kind == EventKind::kWriteDone;
      read_done += x.kind == EventKind::kReadDone;
    }
  }

 private:
  std::array<TxDesc, 64> tx_{};
  std::array<Event, 64> ev_{};
};

// A header from the peer, held with its bytes.
struct Hdr {
  std::array<uint8_t, kMaxHeader> l4{};
  RxHeader h;
  void make(const Headers& b, uint32_t payload) {
    const size_t hl = build(b, l4.data());
    h = RxHeader{};
    h.l4 = l4.data();
    h.l4_len = uint16_t(hl);
    h.flow = kFlow;
    h.l4_csum = Csum::kGood;
    h.payload_len = payload;
    h.placed = payload == 0 ? Placed::kNoPayload : Placed::kPlaced;
  }
};

Headers peer(uint8_t opcode) {
  Headers b;
  b.src_port = udp_sport(kPeerQpn, kQpn);
  b.opcode = opcode;
  b.dest_qp = kQpn;
  return b;
}

// Our QP in RTS with the peer allowed to write and read; `sq` send queue entries.
bool up(RcTransport& rc, BenchCtx& ctx, uint32_t sq) {
  if (rc.create_qp(kFlow, kQpn, QpCaps{sq, 256}) != 0) return false;
  QpAttr a;
  a.state = QpState::kInit;
  a.access = kRemoteWrite | kRemoteRead;
  if (rc.modify_qp(kFlow, a, kAttrState | kAttrAccess, ctx) != 0) return false;
  a.state = QpState::kRtr;
  a.pmtu = kPmtu;
  a.dest_qpn = kPeerQpn;
  a.rq_psn = kPeerPsn;
  if (rc.modify_qp(kFlow, a, kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn, ctx) != 0) {
    return false;
  }
  a.state = QpState::kRts;
  a.sq_psn = kOurPsn;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = 7;
  return rc.modify_qp(kFlow, a,
                      kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry,
                      ctx) == 0;
}

// Fails the run, readably, when the transport did not do the work the figures claim.
bool check(benchmark::State& state, bool ok, const char* what) {
  if (!ok) state.SkipWithError(what);
  return ok;
}

// WRITEs in at the responder: 1 MiB messages (256 packets: first, 254 middle, last) in bursts of
// 32 the NIC placed, AckReq every 64 packets and on the last, as a requester sets it. The
// transport checks each packet (PSN, opcode order, lengths, the rkey on the first), advances
// ePSN, moves the NIC cursor once per burst and sends one coalesced ACK per burst with an AckReq.
void BM_RoceWriteIn(benchmark::State& state) {
  RcTransport rc;
  BenchCtx ctx;
  ctx.at(1'000'000);
  if (!check(state, up(rc, ctx, 256), "qp")) return;
  constexpr uint32_t kMsgPkts = 256;
  std::array<Hdr, kMsgPkts> hs;
  for (uint32_t k = 0; k < kMsgPkts; k++) {
    Headers b = peer(k == 0 ? kWriteFirst : k + 1 == kMsgPkts ? kWriteLast : kWriteMiddle);
    if (k == 0) {
      b.va = 0;
      b.rkey = 1;
      b.dma_len = kMsgPkts * kPmtu;
    }
    b.ack_req = k + 1 == kMsgPkts || k % 64 == 63;
    hs[k].make(b, kPmtu);
  }
  std::array<RxHeader, kBurst> burst;
  uint32_t psn = kPeerPsn;
  uint32_t k = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++) {
      set_psn(hs[k].l4.data(), psn);
      burst[i] = hs[k].h;
      psn = psn_add(psn, 1);
      k = (k + 1) % kMsgPkts;
    }
    rc.rx_burst(burst, ctx);
    ctx.flush();
  }
  const uint64_t pkts = state.iterations() * kBurst;
  const RcCounters& c = rc.counters();
  check(state,
        c.rx_packets == pkts && c.placed_bytes == pkts * kPmtu && c.bad_packets == 0 &&
            c.invalid_requests == 0 && c.access_errors == 0 && ctx.naks == 0 && ctx.cursor == psn &&
            ctx.acks == c.acks_sent && ctx.acks >= pkts / 64,
        "the responder did not accept every packet");
  state.SetItemsProcessed(int64_t(pkts));
  state.counters["acks_per_hdr"] = benchmark::Counter(double(ctx.acks) / double(pkts));
  state.counters["cursor_per_burst"] =
      benchmark::Counter(double(ctx.cursors) / double(state.iterations()));
}
BENCHMARK(BM_RoceWriteIn);

// SENDs in at the responder: messages of state.range(0) packets, each consuming a posted
// receive (a completion, the NIC's MS retired), in bursts of 32 the NIC placed. The app reposts
// every completed receive (app_burst, through ms_post to the NIC), so 64 stay posted.
void BM_RoceSendIn(benchmark::State& state) {
  RcTransport rc;
  BenchCtx ctx;
  ctx.at(1'000'000);
  if (!check(state, up(rc, ctx, 256), "qp")) return;
  const uint32_t msg_pkts = uint32_t(state.range(0));
  constexpr uint32_t kPosted = 64;
  const uint32_t recv_len = msg_pkts * kPmtu;
  std::array<AppRequest, kPosted> recvs{};
  for (uint32_t i = 0; i < kPosted; i++) {
    recvs[i] = {kFlow, ReqKind::kRecv, 0, recv_len, uint64_t(i) * recv_len, i};
  }
  rc.app_burst(recvs, ctx);
  ctx.flush();
  std::array<Hdr, kBurst> hs;  // kBurst is a multiple of msg_pkts: one set of headers per burst
  for (uint32_t k = 0; k < kBurst; k++) {
    const uint32_t m = k % msg_pkts;
    const uint8_t op = msg_pkts == 1       ? kSendOnly
                       : m == 0            ? kSendFirst
                       : m + 1 == msg_pkts ? kSendLast
                                           : kSendMiddle;
    Headers b = peer(op);
    b.ack_req = m + 1 == msg_pkts;
    hs[k].make(b, kPmtu);
  }
  std::array<RxHeader, kBurst> burst;
  uint32_t psn = kPeerPsn;
  uint64_t reposted = 0;
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++) {
      set_psn(hs[i].l4.data(), psn);
      burst[i] = hs[i].h;
      psn = psn_add(psn, 1);
    }
    rc.rx_burst(burst, ctx);
    ctx.flush();
    // The app gives every filled buffer back.
    const uint64_t n = ctx.recv_done - reposted;
    for (uint64_t i = 0; i < n; i++, reposted++) {
      recvs[i] = {
          kFlow, ReqKind::kRecv, 0, recv_len, (reposted % kPosted) * recv_len, kPosted + reposted};
    }
    rc.app_burst({recvs.data(), size_t(n)}, ctx);
  }
  ctx.flush();
  const uint64_t pkts = state.iterations() * kBurst;
  const RcCounters& c = rc.counters();
  check(state,
        c.rx_packets == pkts && c.placed_bytes == pkts * kPmtu && c.bad_packets == 0 &&
            c.rnr_naks_sent == 0 && c.invalid_requests == 0 && ctx.failed == 0 &&
            ctx.recv_done == pkts / msg_pkts && ctx.ms_retires == ctx.recv_done &&
            ctx.ms_posts == kPosted + reposted && ctx.cursor == psn,
        "the responder did not complete every receive");
  state.SetItemsProcessed(int64_t(pkts));
  state.counters["recv_per_hdr"] = benchmark::Counter(double(ctx.recv_done) / double(pkts));
  state.counters["acks_per_hdr"] = benchmark::Counter(double(ctx.acks) / double(pkts));
}
BENCHMARK(BM_RoceSendIn)->Arg(1)->Arg(16);

// ACKs in at the requester: a send queue kept full of 64-byte WRITEs (one packet each, so the
// 64 KB pacer bucket and the 1024-PSN window let a burst's worth go out per call); bursts of 32
// cumulative ACKs, each for the next two PSNs the transport sent (never past them). Each ACK
// completes two WRITEs and re-arms the ACK timer; the transport sends the WRITEs the app posts
// back in their place.
void BM_RoceAcksIn(benchmark::State& state) {
  RcTransport rc;
  BenchCtx ctx;
  uint64_t now = 1'000'000;
  ctx.at(now);
  constexpr uint32_t kSq = 1024;
  constexpr uint32_t kLen = 64;
  if (!check(state, up(rc, ctx, kSq), "qp")) return;
  std::array<AppRequest, kSq> w{};
  uint64_t posted = 0;
  for (; posted < kSq; posted++) {
    w[posted] = {kFlow, ReqKind::kWrite, 0, kLen, 0, posted, 0, 0, 1, 0};
  }
  rc.app_burst(w, ctx);
  ctx.flush();
  std::array<Hdr, kBurst> hs;
  for (auto& h : hs) {
    Headers b = peer(kAck);
    b.syndrome = kSynAck;
    h.make(b, 0);
  }
  std::array<RxHeader, kBurst> burst;
  uint32_t acked = psn_add(kOurPsn, kPsnMask);  // the newest PSN acknowledged
  for (auto _ : state) {
    for (size_t i = 0; i < kBurst; i++) {
      const uint32_t next = psn_add(acked, 2);
      if (psn_diff(next, ctx.sent_psn) <= 0) acked = next;
      set_psn(hs[i].l4.data(), acked);
      burst[i] = hs[i].h;
    }
    now += 1000;  // 1 µs a burst: the pacer refills 12.5 KB, enough for 64 small WRITEs
    ctx.at(now);
    rc.rx_burst(burst, ctx);
    ctx.flush();
    // The app keeps the send queue full.
    const uint64_t n = ctx.write_done + kSq - posted;
    for (uint64_t i = 0; i < n; i++, posted++) {
      w[i] = {kFlow, ReqKind::kWrite, 0, kLen, 0, posted, 0, 0, 1, 0};
    }
    rc.app_burst({w.data(), size_t(n)}, ctx);
  }
  ctx.flush();
  const uint64_t acks = state.iterations() * kBurst;
  const RcCounters& c = rc.counters();
  check(state,
        c.acks_received == acks && c.bad_packets == 0 && c.retransmits == 0 && ctx.failed == 0 &&
            ctx.write_done == acks * 2 && ctx.write_done + kSq == posted,
        "the requester did not complete two WRITEs per ACK");
  state.SetItemsProcessed(int64_t(acks));
  // Header events both ways: each ACK parsed in, each packet header built out.
  state.counters["headers_in_out"] =
      benchmark::Counter(double(acks + ctx.descs), benchmark::Counter::kIsRate);
  state.counters["done_per_ack"] = benchmark::Counter(double(ctx.write_done) / double(acks));
  state.counters["descs_per_ack"] = benchmark::Counter(double(ctx.data) / double(acks));
}
BENCHMARK(BM_RoceAcksIn);

// READ responses in at the requester: 64 KiB READs (16 responses: first, 14 middle, last), 32
// queued and 16 outstanding (max_rd_atomic); bursts of 32 responses the NIC placed, answering
// the READ requests the transport sent, in order. Each burst completes two READs; the app posts
// two more, and the transport sends their requests as READs retire.
void BM_RoceReadResponsesIn(benchmark::State& state) {
  RcTransport rc;
  BenchCtx ctx;
  uint64_t now = 1'000'000;
  ctx.at(now);
  constexpr uint32_t kLen = 64u << 10;
  constexpr uint32_t kResp = kLen / kPmtu;
  static_assert(kBurst % kResp == 0);
  constexpr uint32_t kQueued = 32;
  if (!check(state, up(rc, ctx, 256), "qp")) return;
  std::array<AppRequest, kQueued> r{};
  uint64_t posted = 0;
  for (; posted < kQueued; posted++) {
    r[posted] = {kFlow, ReqKind::kRead, 0, kLen, 0, posted, 0, 0, 1, 0};
  }
  rc.app_burst(r, ctx);
  ctx.flush();
  std::array<Hdr, kBurst> hs;
  for (uint32_t k = 0; k < kBurst; k++) {
    const uint32_t m = k % kResp;
    Headers b = peer(m == 0 ? kReadRespFirst : m + 1 == kResp ? kReadRespLast : kReadRespMiddle);
    b.syndrome = kSynAck;
    hs[k].make(b, kPmtu);
  }
  std::array<RxHeader, kBurst> burst;
  uint64_t answered = 0;
  for (auto _ : state) {
    // The next two READs sent, in order.
    if (ctx.reads_tail - ctx.reads_head < kBurst / kResp) {
      state.SkipWithError("too few READs outstanding");
      break;
    }
    for (size_t i = 0; i < kBurst; i++) {
      if (i % kResp == 0) answered = ctx.reads[ctx.reads_head++ % ctx.reads.size()];
      set_psn(hs[i].l4.data(), psn_add(uint32_t(answered), uint32_t(i % kResp)));
      burst[i] = hs[i].h;
    }
    now += 1000;
    ctx.at(now);
    rc.rx_burst(burst, ctx);
    ctx.flush();
    const uint64_t n = ctx.read_done + kQueued - posted;
    for (uint64_t i = 0; i < n; i++, posted++) {
      r[i] = {kFlow, ReqKind::kRead, 0, kLen, 0, posted, 0, 0, 1, 0};
    }
    rc.app_burst({r.data(), size_t(n)}, ctx);
    ctx.flush();
  }
  const uint64_t pkts = state.iterations() * kBurst;
  const RcCounters& c = rc.counters();
  check(state,
        c.rx_packets == pkts && c.placed_bytes == pkts * kPmtu && c.bad_packets == 0 &&
            c.naks_received == 0 && c.retransmits == 0 && ctx.failed == 0 &&
            ctx.read_done == pkts / kResp,
        "the requester did not complete every READ");
  state.SetItemsProcessed(int64_t(pkts));
  state.counters["reads_per_hdr"] = benchmark::Counter(double(ctx.read_done) / double(pkts));
}
BENCHMARK(BM_RoceReadResponsesIn);

// Baseline: parse the same 32 WRITE middle headers and nothing else.
void BM_RoceParseOnly(benchmark::State& state) {
  std::array<Hdr, kBurst> hs;
  for (auto& h : hs)
    h.make(peer(kWriteMiddle), kPmtu);
  uint32_t psn = 0;
  for (auto _ : state) {
    uint64_t sum = 0;
    for (auto& h : hs) {
      set_psn(h.l4.data(), psn);
      psn = psn_add(psn, 1);
      Headers b;
      size_t hl = 0;
      if (parse(h.h.l4, h.h.l4_len, b, &hl) == ParseError::kNone) sum += b.psn + b.dest_qp + hl;
    }
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
}
BENCHMARK(BM_RoceParseOnly);

}  // namespace

BENCHMARK_MAIN();
