// dcqcn_bench.cc - what DCQCN and the pacer cost the transport per call: the RP's tick when
// nothing is due and when a timer fires, on_sent, a CNP, and the pacer's check-and-charge per
// packet. Many QPs, visited round-robin, so the state is not always in L1 as it would not be
// in a dataplane with thousands of QPs.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "transport/cc/dcqcn.h"
#include "transport/cc/pacer.h"

namespace {

using cleave::transport::cc::DcqcnParams;
using cleave::transport::cc::DcqcnRp;
using cleave::transport::cc::Pacer;

constexpr size_t kQps = 4096;

// QPs below line rate (one cut each), so the increase timer and byte counter run.
std::vector<DcqcnRp> cut_qps() {
  std::vector<DcqcnRp> qps(kQps);
  for (DcqcnRp& rp : qps) {
    rp.init(DcqcnParams{}, 0);
    rp.on_cnp(0);
  }
  return qps;
}

// tick() between deadlines: the common case, two compares.
void BM_TickIdle(benchmark::State& state) {
  std::vector<DcqcnRp> qps = cut_qps();
  size_t i = 0;
  uint64_t now = 1000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(qps[i].tick(now));
    if (++i == kQps) i = 0;
  }
}
BENCHMARK(BM_TickIdle);

// tick() with a timer due every call: alpha decays and a rate-increase event each time.
void BM_TickDue(benchmark::State& state) {
  std::vector<DcqcnRp> qps = cut_qps();
  size_t i = 0;
  uint64_t now = 55'000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(qps[i].tick(now));
    if (++i == kQps) {
      i = 0;
      now += 55'000;
      if (qps[0].rate_bps() == DcqcnParams{}.line_rate_bps) {  // back at line rate: cut again
        state.PauseTiming();
        qps = cut_qps();
        now = 55'000;
        state.ResumeTiming();
      }
    }
  }
}
BENCHMARK(BM_TickDue);

// on_sent() per 4 KiB packet (an increase event every 10 MiB).
void BM_OnSent(benchmark::State& state) {
  std::vector<DcqcnRp> qps = cut_qps();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(qps[i].on_sent(4096, 0));
    if (++i == kQps) i = 0;
  }
}
BENCHMARK(BM_OnSent);

void BM_OnCnp(benchmark::State& state) {
  std::vector<DcqcnRp> qps = cut_qps();
  size_t i = 0;
  uint64_t now = 10'000;
  for (auto _ : state) {
    benchmark::DoNotOptimize(qps[i].on_cnp(now));
    if (++i == kQps) {
      i = 0;
      now += 10'000;  // past the monitor period: every call cuts
    }
  }
}
BENCHMARK(BM_OnCnp);

// may_send() and sent() per packet, at 25 Gb/s, packets due as the clock moves.
void BM_PacerPacket(benchmark::State& state) {
  std::vector<Pacer> pacers(kQps, Pacer(25'000'000'000));
  size_t i = 0;
  uint64_t now = 0;
  uint64_t sent = 0;
  for (auto _ : state) {
    Pacer& p = pacers[i];
    if (p.may_send(now)) {
      p.sent(4096, now);
      sent++;
    }
    if (++i == kQps) {
      i = 0;
      now += 1311;  // 4096 B at 25 Gb/s: one packet per QP per round
    }
  }
  state.counters["sent_fraction"] = static_cast<double>(sent) / state.iterations();
}
BENCHMARK(BM_PacerPacket);

}  // namespace

BENCHMARK_MAIN();
