// loop_bench.cc - what one dataplane loop iteration costs, idle and answering echo requests.
//
// Runs the real Dataplane on a ring port (EAL without hugepages). Baseline in the same run: a
// bare rte_eth_rx_burst on the same empty port, the least any poll loop must do. Prints figures;
// asserts nothing. Run: meson test -C build --benchmark --suite bench -v
#include <benchmark/benchmark.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "../unit/frames.h"
#include "config.h"
#include "control/port.h"
#include "ctl_channel.h"
#include "lcore/dataplane.h"
#include "lcore/route.h"

namespace cleave::dp {
namespace {

rte_mempool* g_pool = nullptr;

struct Rig {
  rte_ring* in;
  rte_ring* out;
  uint16_t port;
  Config cfg;
  std::unique_ptr<RouteTable> routes;
  std::unique_ptr<CtlChannel> ctl;
  std::unique_ptr<Dataplane> dp;
  test::MacBytes mac{};

  Rig() {
    static int seq = 0;
    std::string name = "b" + std::to_string(seq++);
    in = rte_ring_create((name + "i").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    out = rte_ring_create((name + "o").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    port = static_cast<uint16_t>(rte_eth_from_rings(name.c_str(), &in, 1, &out, 1, SOCKET_ID_ANY));
    cfg = *parse_config("ports:\n  - {name: p0, device: " + name + ", ipv4: 10.0.0.1/24}\n", "b")
               .config;
    DpPort p;
    p.name = "p0";
    p.port_id = port;
    p.ipv4 = cfg.ports[0].ipv4;
    p.mac = setup_port(port, "bench", 1500, std::nullopt, 1024, 1024, g_pool);
    std::memcpy(mac.data(), p.mac.b.data(), 6);
    routes = std::make_unique<RouteTable>(cfg.ports);
    ctl = std::make_unique<CtlChannel>();
    dp = std::make_unique<Dataplane>(DataplaneParams::from_config(cfg, rte_get_tsc_hz()),
                                     std::vector<DpPort>{p}, *routes, g_pool, *ctl);
  }
  ~Rig() {
    dp.reset();
    rte_eth_dev_stop(port);
    rte_eth_dev_close(port);
    rte_ring_free(in);
    rte_ring_free(out);
  }
};

void BM_BareRxBurst(benchmark::State& state) {
  Rig rig;
  rte_mbuf* pkts[32];
  uint64_t cycles = 0;
  for (auto _ : state) {
    uint64_t t0 = rte_rdtsc();
    benchmark::DoNotOptimize(rte_eth_rx_burst(rig.port, 0, pkts, 32));
    cycles += rte_rdtsc() - t0;
  }
  state.counters["cycles"] = benchmark::Counter(double(cycles), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_BareRxBurst);

void BM_IdleIteration(benchmark::State& state) {
  Rig rig;
  uint64_t cycles = 0;
  for (auto _ : state) {
    uint64_t t0 = rte_rdtsc();
    benchmark::DoNotOptimize(rig.dp->poll_once());
    cycles += rte_rdtsc() - t0;
  }
  state.counters["cycles"] = benchmark::Counter(double(cycles), benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_IdleIteration);

// Puts pkts.size() copies of `frame` on the rig's RX ring, then runs one loop iteration over
// them, alone in the measured (manual) time; returns its cycles.
uint64_t poll_burst(benchmark::State& state, Rig& rig, const test::Bytes& frame,
                    std::vector<rte_mbuf*>& pkts) {
  const auto burst = unsigned(pkts.size());
  rte_pktmbuf_alloc_bulk(g_pool, pkts.data(), burst);
  for (rte_mbuf* m : pkts) {
    std::memcpy(rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size())), frame.data(),
                frame.size());
  }
  rte_ring_enqueue_bulk(rig.in, reinterpret_cast<void**>(pkts.data()), burst, nullptr);
  uint64_t t0 = rte_rdtsc();
  rig.dp->poll_once();
  uint64_t t1 = rte_rdtsc();
  state.SetIterationTime(double(t1 - t0) / double(rte_get_tsc_hz()));
  return t1 - t0;
}

// The figures of a burst benchmark: cycles per packet and packets per second.
void per_packet(benchmark::State& state, uint64_t cycles, unsigned burst) {
  state.counters["cycles/pkt"] =
      benchmark::Counter(double(cycles) / burst, benchmark::Counter::kAvgIterations);
  state.SetItemsProcessed(int64_t(state.iterations()) * burst);
}

// One iteration that receives a burst of echo requests and sends the replies. Filling the RX
// ring and freeing the replies happen outside the measured time.
void BM_EchoBurst(benchmark::State& state) {
  Rig rig;
  const auto burst = static_cast<unsigned>(state.range(0));
  test::Bytes req =
      test::ipv4(rig.mac, {2, 0, 0, 0, 0, 2}, 0x0a000002, 0x0a000001, 1, test::icmp(8, 1, 1, 56));
  std::vector<rte_mbuf*> pkts(burst);
  uint64_t cycles = 0;
  for (auto _ : state) {
    cycles += poll_burst(state, rig, req, pkts);
    unsigned n =
        rte_ring_dequeue_burst(rig.out, reinterpret_cast<void**>(pkts.data()), burst, nullptr);
    if (n != burst) state.SkipWithError("not every request was answered");
    rte_pktmbuf_free_bulk(pkts.data(), n);
  }
  per_packet(state, cycles, burst);
}
BENCHMARK(BM_EchoBurst)->Arg(1)->Arg(32)->UseManualTime();

// One iteration that demultiplexes a burst of claimed traffic and drops it: UDP to the port
// RoCEv2 claims (4791), a BTH naming a queue pair that does not exist. What each frame costs
// from the port to the claim's parse and the flow lookup, no transport work after.
void BM_ClaimedNoFlowBurst(benchmark::State& state) {
  Rig rig;
  const auto burst = static_cast<unsigned>(state.range(0));
  test::Bytes bth = test::udp(49152, 4791, 12 + 64 + 4);
  bth[8] = 0x04;  // RC SEND only
  test::put16(bth, 8 + 2, 0xFFFF);
  test::put32(bth, 8 + 4, 0x00ABCDEF);  // DestQP: none
  test::Bytes frame = test::ipv4(rig.mac, {2, 0, 0, 0, 0, 2}, 0x0a000002, 0x0a000001, 17, bth);
  std::vector<rte_mbuf*> pkts(burst);
  uint64_t cycles = 0;
  for (auto _ : state)
    cycles += poll_burst(state, rig, frame, pkts);
  per_packet(state, cycles, burst);
}
BENCHMARK(BM_ClaimedNoFlowBurst)->Arg(32)->UseManualTime();

}  // namespace
}  // namespace cleave::dp

int main(int argc, char** argv) {
  std::string prefix = "--file-prefix=cleave-bench-" + std::to_string(getpid());
  const char* eal_argv[] = {
      "loop_bench", "--no-huge",      "--no-shconf",         "-m",          "256", "--no-pci", "-l",
      "0",          "--no-telemetry", "--log-level=*:error", prefix.c_str()};
  if (rte_eal_init(int(sizeof eal_argv / sizeof eal_argv[0]), const_cast<char**>(eal_argv)) < 0) {
    return 1;
  }
  cleave::dp::g_pool =
      rte_pktmbuf_pool_create("bench_pool", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  std::printf("TSC %.3f GHz\n", double(rte_get_tsc_hz()) / 1e9);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  rte_eal_cleanup();
  return 0;
}
