// tcp_bench.cc - header events per second through the TCP transport alone, no wire: in-order
// data headers in (placed by the NIC; runs taken as one, and not) with ACKs and cursor updates
// out, and ACKs in with TSO data descriptors out. A baseline in the same run parses the same
// headers and does nothing else, so the figures read as "transport cost over parsing".
//
// `tcp_bench --scaling [--threads K] [--rounds N] [--seconds S] [--adjacent]`: the same two
// workloads as shards, the way the dataplane splits over lcores: each thread pins itself to a
// CPU of its own (when the process may use K CPUs; the output says when not), makes its own
// TcpTransport, context, flow and headers, and bursts for S seconds beside the others; N
// alternating rounds of 1 then K threads (K=2 by default). Per round it prints header events
// per second in total and per thread with each thread's CPU time over the wall, then the
// medians and the scaling ratio (K threads' total over 1 thread's, per round). The ratio per
// CPU-second (events over the CPU time the threads got) leaves out what other processes took
// from them: anything the shards shared (static state, a lock, a cache line, the allocator)
// would lower it. Each thread counts its allocations in the measured loop (operator new below)
// and checks from the counters that its transport did the work; either failing fails the run.
// --adjacent: the main thread makes every transport, one after another (as a control thread
// would), instead of each thread its own; a round says when two of them share a cache line.
#include <benchmark/benchmark.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string_view>
#include <thread>
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
// rcv_nxt, moves the NIC cursor, completes buffers and ACKs once per burst. One instance is one
// shard's whole state: its transport, context, flow and headers.
struct DataIn {
  explicit DataIn(std::unique_ptr<TcpTransport> t) : tp(std::move(t)) {
    ctx.at(1'000'000);
    const uint32_t ack = establish(*tp, ctx);
    post(*tp, ctx, 16);
    for (auto& h : hs)
      h.make(data_spec(ack), kSeg, Placed::kPlaced);
  }
  DataIn(const DataIn&) = delete;
  DataIn& operator=(const DataIn&) = delete;

  void burst() {
    for (size_t i = 0; i < kBurst; i++) {
      hs[i].set_seq(seq);
      seq += kSeg;
      burst_[i] = hs[i].h;
    }
    tp->rx_burst(burst_, ctx);
    ctx.flush();
    while (reposted < ctx.recv_done) {
      AppRequest r{kFlow, ReqKind::kRecv, 0, 1u << 20, (reposted % 16) << 20, reposted, 0};
      tp->app_burst({&r, 1}, ctx);
      reposted++;
    }
  }
  // Whether the transport did the work of `bursts` bursts: every segment placed, ACKs sent.
  bool did_work(uint64_t bursts) const {
    return tp->counters().placed_bytes == bursts * kBurst * kSeg && ctx.descs >= bursts;
  }

  std::unique_ptr<TcpTransport> tp;
  BenchCtx ctx;
  std::array<Hdr, kBurst> hs;
  std::array<RxHeader, kBurst> burst_;
  uint32_t seq = kPeerIss + 1;
  uint64_t reposted = 0;
};

// Arg 1: a burst is one run, one pass through the receive path (the default); arg 0: runs off,
// a pass per segment.
void BM_TcpDataHeadersIn(benchmark::State& state) {
  DataIn w(std::make_unique<TcpTransport>());
  w.tp->set_merge_runs(state.range(0) != 0);
  for (auto _ : state)
    w.burst();
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["acks_per_hdr"] =
      benchmark::Counter(double(w.ctx.descs) / double(state.iterations() * kBurst));
  state.counters["cursor_per_burst"] =
      benchmark::Counter(double(w.ctx.cursors) / double(state.iterations()));
  state.counters["passes_per_burst"] = benchmark::Counter(
      double(w.tp->counters().segs_in - w.tp->counters().segs_merged) / double(state.iterations()));
}
BENCHMARK(BM_TcpDataHeadersIn)->Arg(1)->Arg(0);

// ACKs in: bursts of 32 ACKs, each acknowledging two segments, on a flow with a large send
// queued; the transport completes, grows cwnd and emits TSO descriptors over app memory.
struct AcksIn {
  static constexpr uint32_t kSend = 256u << 20;

  explicit AcksIn(std::unique_ptr<TcpTransport> t) : tp(std::move(t)) {
    ctx.at(1'000'000);
    acked = establish(*tp, ctx);
    std::array<AppRequest, 2> sends{};
    for (int i = 0; i < 2; i++)
      sends[i] = {kFlow, ReqKind::kSend, 0, kSend, 0, uint64_t(i), 0};
    tp->app_burst(sends, ctx);
    ctx.flush();
    BuildSpec b = data_spec(acked);
    b.seq = kPeerIss + 1;
    for (auto& h : hs)
      h.make(b, 0, Placed::kNoPayload);
  }
  AcksIn(const AcksIn&) = delete;
  AcksIn& operator=(const AcksIn&) = delete;

  void burst() {
    // Acknowledge what is out, two segments per ACK, never past what was sent.
    const uint32_t sent_to = ctx.last_end;
    for (size_t i = 0; i < kBurst; i++) {
      acked += std::min<uint32_t>(2 * kSeg, sent_to - acked);
      hs[i].set_ack(acked);
      burst_[i] = hs[i].h;
    }
    tp->rx_burst(burst_, ctx);
    ctx.flush();
    if (posted - ctx.send_done < 2) {  // two sends queued at all times
      AppRequest r{kFlow, ReqKind::kSend, 0, kSend, 0, posted++, 0};
      tp->app_burst({&r, 1}, ctx);
    }
  }
  // Whether the transport did the work: every ACK taken in, new data sent behind them.
  bool did_work(uint64_t bursts) const {
    return tp->counters().segs_in >= bursts * kBurst && ctx.payload >= bursts * kSeg;
  }

  std::unique_ptr<TcpTransport> tp;
  BenchCtx ctx;
  std::array<Hdr, kBurst> hs;
  std::array<RxHeader, kBurst> burst_;
  uint32_t acked = 0;
  uint64_t posted = 2;
};

void BM_TcpAcksIn(benchmark::State& state) {
  AcksIn w(std::make_unique<TcpTransport>());
  for (auto _ : state)
    w.burst();
  state.SetItemsProcessed(int64_t(state.iterations() * kBurst));
  state.counters["payload_per_ack"] =
      benchmark::Counter(double(w.ctx.payload) / double(state.iterations() * kBurst));
  state.counters["descs_per_ack"] =
      benchmark::Counter(double(w.ctx.descs) / double(state.iterations() * kBurst));
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

// ---- --scaling: the same workloads on 1 and K threads, one shard per thread -----------------

// Allocations by this thread, to show that a shard's loop makes none (a global allocator in it
// would be shared state between shards).
thread_local uint64_t t_allocs = 0;

constexpr uint64_t kWarmBursts = 20000;  // each shard's, before the common start

struct Options {
  int threads = 2;  // K
  int rounds = 7;
  double seconds = 0.5;   // per measurement
  bool adjacent = false;  // the main thread makes every transport, one after another
};

double now_s(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// What one shard measured; each on its own cache lines, written once at the end.
struct alignas(64) ShardResult {
  uint64_t bursts = 0;
  double wall_s = 0;
  double cpu_s = 0;  // the thread's own CPU time over the same window
  uint64_t allocs = 0;
  bool did_work = false;
  bool pinned = false;
};

struct Run {
  std::vector<ShardResult> shard;
  bool shared_line = false;  // two shards' transports have bytes in one cache line
  double total() const {     // header events per second, all shards
    double t = 0;
    for (const ShardResult& r : shard)
      t += double(r.bursts * kBurst) / r.wall_s;
    return t;
  }
  // Header events per second of CPU the shards had: what the transports do with the CPU they
  // get, whatever else the machine runs. Sharing between shards would lower it at K > 1.
  double per_cpu_s() const {
    double events = 0;
    double cpu = 0;
    for (const ShardResult& r : shard) {
      events += double(r.bursts * kBurst);
      cpu += r.cpu_s;
    }
    return events / cpu;
  }
};

// Runs K shards of workload W at once: each thread pins itself to cpus[i] (when there is one),
// makes its own transport (or takes the one the main thread made, with --adjacent) and workload,
// warms up, then bursts from a common start until the main thread says stop.
template <typename W>
Run run_shards(int k, const std::vector<int>& cpus, const Options& o) {
  std::vector<std::unique_ptr<TcpTransport>> made(static_cast<size_t>(k));
  Run run;
  if (o.adjacent) {
    for (auto& t : made)
      t = std::make_unique<TcpTransport>();
    for (size_t i = 0; i < made.size(); i++) {
      for (size_t j = 0; j < made.size(); j++) {
        const auto a = reinterpret_cast<uintptr_t>(made[i].get());
        const auto b = reinterpret_cast<uintptr_t>(made[j].get());
        run.shared_line |= i != j && (a + sizeof(TcpTransport) - 1) / 64 == b / 64;
      }
    }
  }
  run.shard.resize(size_t(k));
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  for (int i = 0; i < k; i++) {
    threads.emplace_back([&, i] {
      ShardResult& res = run.shard[size_t(i)];
      if (size_t(i) < cpus.size()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[size_t(i)], &set);
        res.pinned = pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
      }
      std::unique_ptr<TcpTransport> tp =
          made[size_t(i)] ? std::move(made[size_t(i)]) : std::make_unique<TcpTransport>();
      auto w = std::make_unique<W>(std::move(tp));
      for (uint64_t b = 0; b < kWarmBursts; b++)  // caches, the send queue's steady size
        w->burst();
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire))
        std::this_thread::yield();
      const uint64_t allocs0 = t_allocs;
      const double t0 = now_s(CLOCK_MONOTONIC);
      const double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
      uint64_t n = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        for (int b = 0; b < 64; b++)
          w->burst();
        n += 64;
      }
      res.wall_s = now_s(CLOCK_MONOTONIC) - t0;
      res.cpu_s = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
      res.allocs = t_allocs - allocs0;
      res.bursts = n;
      res.did_work = w->did_work(kWarmBursts + n);
    });
  }
  while (ready.load() < k)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  go.store(true, std::memory_order_release);
  std::this_thread::sleep_for(std::chrono::duration<double>(o.seconds));
  stop.store(true);
  for (auto& t : threads)
    t.join();
  return run;
}

// Rounds of 1 then K shards, alternating; per round the K-shard total over the 1-shard one.
template <typename W>
bool scale(const char* name, const std::vector<int>& cpus, const Options& o) {
  std::vector<double> one, many, per_thread, ratio, one_cpu, many_cpu, ratio_cpu;
  bool ok = true;
  std::printf("\n%s:\n", name);
  for (int r = 0; r < o.rounds; r++) {
    for (const int k : {1, o.threads}) {
      const Run run = run_shards<W>(k, cpus, o);
      const double total = run.total();
      std::printf("  round %d  K=%d  %6.2f M/s", r + 1, k, total / 1e6);
      const char* sep = k > 1 ? " =" : "  ";
      for (const ShardResult& s : run.shard) {
        const double rate = double(s.bursts * kBurst) / s.wall_s;
        std::printf("%s %5.2f (cpu %.2f%s%s)", sep, rate / 1e6, s.cpu_s / s.wall_s,
                    s.pinned || cpus.empty() ? "" : ", not pinned",
                    s.allocs != 0 ? ", ALLOCATED" : "");
        sep = " +";
        if (k > 1) per_thread.push_back(rate);
        if (!s.did_work || s.allocs != 0) ok = false;
      }
      std::printf("; %.2f M per CPU-second%s\n", run.per_cpu_s() / 1e6,
                  run.shared_line ? "; transports share a cache line" : "");
      (k == 1 ? one : many).push_back(total);
      (k == 1 ? one_cpu : many_cpu).push_back(run.per_cpu_s());
    }
    ratio.push_back(many.back() / one.back());
    ratio_cpu.push_back(many_cpu.back() / one_cpu.back());
  }
  const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
  const auto [clo, chi] = std::minmax_element(ratio_cpu.begin(), ratio_cpu.end());
  std::printf("  median: K=1 %.2f M/s, K=%d %.2f M/s (%.2f M/s per thread)\n", median(one) / 1e6,
              o.threads, median(many) / 1e6, median(per_thread) / 1e6);
  std::printf(
      "  scaling K=%d/K=1: %.2f (rounds %.2f-%.2f); per CPU-second %.2f (rounds %.2f-%.2f)\n",
      o.threads, median(ratio), *lo, *hi, median(ratio_cpu), *clo, *chi);
  if (!ok) std::printf("  FAILED: a shard did not do the work, or allocated in its loop\n");
  return ok;
}

int scaling(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    const std::string_view a = argv[i];
    const bool more = i + 1 < argc;
    if (a == "--scaling") continue;
    if (a == "--adjacent") {
      o.adjacent = true;
    } else if (a == "--threads" && more) {
      o.threads = std::atoi(argv[++i]);
    } else if (a == "--rounds" && more) {
      o.rounds = std::atoi(argv[++i]);
    } else if (a == "--seconds" && more) {
      o.seconds = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: tcp_bench --scaling [--threads K] [--rounds N] [--seconds S] "
                   "[--adjacent]\n");
      return 2;
    }
  }
  if (o.threads < 2 || o.rounds < 1 || !(o.seconds > 0)) {
    std::fprintf(stderr, "tcp_bench: --threads must be >= 2, --rounds >= 1, --seconds > 0\n");
    return 2;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; c++) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  std::printf("tcp_bench --scaling: header events per second, one TcpTransport per thread\n");
  if (int(cpus.size()) >= o.threads) {
    cpus.resize(size_t(o.threads));
    std::printf("thread i pinned to CPU");
    for (const int c : cpus)
      std::printf(" %d", c);
    std::printf(" (of %d this process may use)\n", CPU_COUNT(&set));
  } else {
    std::printf("NOT PINNED: this process may use %zu CPUs, fewer than %d threads\n", cpus.size(),
                o.threads);
    cpus.clear();
  }
  std::printf(
      "%d rounds of K=1 then K=%d, %.2f s each; transports made %s; cpu: the thread's "
      "CPU time over the wall\n",
      o.rounds, o.threads, o.seconds,
      o.adjacent ? "by the main thread, one after another (--adjacent)" : "each by its own thread");
  bool ok = scale<DataIn>("data headers in (placed), ACKs and cursor updates out", cpus, o);
  ok = scale<AcksIn>("ACKs in, TSO descriptors out", cpus, o) && ok;
  return ok ? 0 : 1;
}

}  // namespace

// Counts this thread's allocations (t_allocs); otherwise the usual operator new. Out of line, or
// GCC pairs the malloc() and free() it inlined with new and delete and warns
// (-Wmismatched-new-delete).
__attribute__((noinline)) void* operator new(std::size_t n) {
  t_allocs++;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void* operator new(std::size_t n, std::align_val_t a) {
  t_allocs++;
  const size_t al = size_t(a);
  if (void* p = std::aligned_alloc(al, (n + al - 1) / al * al)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
__attribute__((noinline)) void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

int main(int argc, char** argv) {
  for (int i = 1; i < argc; i++) {
    if (std::string_view(argv[i]) == "--scaling") return scaling(argc, argv);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
