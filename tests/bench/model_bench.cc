// model_bench.cc - NIC model figures: on-NIC memory for 10K flows, RX decisions, receive
// steering and TSO per second.
//
// Prints figures; asserts nothing. Run: meson test -C build --benchmark --suite bench -v, or
// ./build/tests/model_bench directly. Memory figures are counters of the Memory* benchmarks
// (bytes; the timing of those rows means nothing).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../unit/model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;

void report_memory(benchmark::State& state, const NicConfig& cfg, uint32_t flows, const char* label,
                   bool* printed) {
  MemoryReport r;
  for (auto _ : state) {
    NicModel nic(cfg);
    std::vector<uint8_t> mem(1 << 20);
    nic.mr_add(0, mem.data(), mem.size(), 0);
    for (uint32_t i = 0; i < flows; i++) {
      FlowSpec s;
      s.key = {test::kPeer + i, test::kLocal, uint16_t(1024 + i % 50000), 5001, 6};
      nic.flow_add(i, s);
      nic.ms_post(i, {0, 0, 65536, 0});
    }
    r = nic.memory_report();
    benchmark::DoNotOptimize(r);
  }
  uint64_t store = r.lines[4].bytes() +
                   (r.lines[5].entries - r.lines[3].entries / cfg.ms_chunk) * kChunkLinkBytes;
  state.counters["total_B"] = double(r.total_bytes);
  state.counters["store_B"] = double(store);
  state.counters["per_flow_tables_B"] = double(r.total_bytes - store);
  state.counters["per_flow_B"] = double(r.per_flow_bytes);
  if (!*printed) {
    *printed = true;
    std::printf(
        "\nNIC memory, %s: %u zero-copy flows, %u committed MS entries per flow, "
        "%u-entry shared store:\n",
        label, flows, cfg.ms_committed_per_flow, cfg.ms_store_entries);
    for (const auto& l : r.lines) {
      std::printf("  %-16s %9llu x %2llu B = %10llu B (%llu in use)\n", std::string(l.name).c_str(),
                  (unsigned long long)l.entries, (unsigned long long)l.entry_bytes,
                  (unsigned long long)l.bytes(), (unsigned long long)l.in_use);
    }
    std::printf("  total %.2f MB (%.2f MiB); without the shared store %.2f MB; per flow %llu B\n",
                double(r.total_bytes) / 1e6, double(r.total_bytes) / (1 << 20),
                double(r.total_bytes - store) / 1e6, (unsigned long long)r.per_flow_bytes);
  }
}

// The default allocation (NicConfig's defaults, table sized for the 10K flows).
void MemoryDefault10kFlows(benchmark::State& state) {
  static bool printed = false;
  NicConfig c;
  c.max_flows = 10000;
  report_memory(state, c, 10000, "default allocation", &printed);
}
BENCHMARK(MemoryDefault10kFlows)->Iterations(1)->Unit(benchmark::kMillisecond);

// ZeroNIC's allocation (128 committed per flow, a 1M-entry store) with our 16-byte MS entries.
void MemoryZeroNicAllocation10kFlows(benchmark::State& state) {
  static bool printed = false;
  NicConfig c;
  c.max_flows = 10000;
  c.ms_committed_per_flow = 128;
  c.ms_store_entries = 1u << 20;
  report_memory(state, c, 10000, "ZeroNIC's allocation", &printed);
}
BENCHMARK(MemoryZeroNicAllocation10kFlows)->Iterations(1)->Unit(benchmark::kMillisecond);

// In-order 1460-byte TCP segments, with the driver work a transport would do: a cursor update
// per segment, MS retire and repost as the cursor passes them (every `retire_every` segments).
// A pass is kFrames frames; then the flow is removed and added again (sequence numbers restart).
// bytes_per_second counts bytes placed, written or not: "NoCopy" skips only the memcpy.
struct RxRun {
  bool dma = true;
  bool verify = true;
  uint32_t ms_bytes = 65536;
  uint32_t ms_posted = 8;
  uint32_t retire_every = 1;
};

void RxTcpInOrder(benchmark::State& state, const RxRun& run) {
  constexpr uint32_t kSeg = 1460, kFrames = 256, kIsn = 1;
  NicConfig c;
  c.max_flows = 16;
  c.ms_store_entries = 4096;
  c.dma_payload = run.dma;
  c.verify_l4_checksum = run.verify;
  NicModel nic(c);
  std::vector<uint8_t> mem(32 << 20);
  nic.mr_add(0, mem.data(), mem.size(), 0);
  const uint32_t slots = uint32_t(mem.size() / run.ms_bytes);
  std::vector<Bytes> frames;
  for (uint32_t i = 0; i < kFrames; i++) {
    frames.push_back(test::tcp_frame(kIsn + i * kSeg, test::pattern(kSeg, i * kSeg)));
  }
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
  s.initial_seq = kIsn;
  RxEntry e;
  uint64_t placed = 0;
  for (auto _ : state) {
    nic.flow_add(0, s);
    uint32_t posted = 0, retired_end = 0;
    for (; posted < run.ms_posted; posted++) {
      nic.ms_post(0, {0, uint64_t(posted % slots) * run.ms_bytes, run.ms_bytes, 0});
    }
    for (uint32_t i = 0; i < kFrames; i++) {
      nic.rx(frames[i], e);
      placed += e.placed;
      uint32_t cursor = (i + 1) * kSeg;
      nic.cursor_update(0, kIsn + cursor);
      if ((i + 1) % run.retire_every != 0) continue;
      while (cursor - retired_end >= run.ms_bytes) {
        nic.ms_retire(0, 1);
        retired_end += run.ms_bytes;
        nic.ms_post(0, {0, uint64_t(posted++ % slots) * run.ms_bytes, run.ms_bytes, 0});
      }
    }
    nic.flow_remove(0);
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kFrames);
  state.SetBytesProcessed(int64_t(placed));
  state.counters["decisions/s"] =
      benchmark::Counter(double(state.iterations()) * kFrames, benchmark::Counter::kIsRate);
}
void RxTcpInOrderCopy(benchmark::State& s) {
  RxTcpInOrder(s, {});
}
void RxTcpInOrderNoCopy(benchmark::State& s) {
  RxTcpInOrder(s, {.dma = false});
}
void RxTcpInOrderCopyNoVerify(benchmark::State& s) {
  RxTcpInOrder(s, {.verify = false});
}
void RxTcpInOrderNoCopyNoVerify(benchmark::State& s) {
  RxTcpInOrder(s, {.dma = false, .verify = false});
}
// 4 KB MSs, 512 posted, retired in batches every 256 segments (~90 MSs behind the cursor).
void RxTcpInOrderLongList(benchmark::State& s) {
  RxTcpInOrder(s, {.ms_bytes = 4096, .ms_posted = 512, .retire_every = 256});
}
BENCHMARK(RxTcpInOrderCopy);
BENCHMARK(RxTcpInOrderNoCopy);
BENCHMARK(RxTcpInOrderCopyNoVerify);
BENCHMARK(RxTcpInOrderNoCopyNoVerify);
BENCHMARK(RxTcpInOrderLongList);

// One 64 KB TSO request into 1448-byte frames with checksums.
void TxTso64k(benchmark::State& state) {
  NicConfig c;
  c.max_flows = 4;
  c.ms_store_entries = 64;
  NicModel nic(c);
  std::vector<uint8_t> mem(1 << 17, 7);
  nic.mr_add(0, mem.data(), mem.size(), 0);
  Bytes h = test::tcp_frame(1, {});
  std::vector<uint8_t> out(1 << 17);
  std::vector<TxFrame> frames(64);
  std::vector<TxCompletion> done(8);
  uint16_t n = 0;
  for (auto _ : state) {
    nic.tx({h, 0, 0, 65536, 1448, kTxTso, 0}, out, frames, &n);
    nic.tx_poll(done);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * 65536);
  state.counters["frames/s"] =
      benchmark::Counter(double(state.iterations()) * n, benchmark::Counter::kIsRate);
}
BENCHMARK(TxTso64k);

// Receive steering alone (NicModel::steer(): what the generic backend's software stage adds per
// frame with several queues): 64-byte TCP frames of 256 flows over 4 queues, 1000 programmed
// flows in the table (a quarter of the frames theirs), the rest by Toeplitz RSS.
void Steer4Queues(benchmark::State& state) {
  NicConfig cfg;
  cfg.max_flows = 1024;
  cfg.rx_queues = 4;
  NicModel nic(cfg);
  for (uint32_t i = 0; i < 1000; i++) {
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, uint16_t(10000 + i), 5001, 6};
    s.queue = uint16_t(i % 4);
    nic.flow_add(i, s);
  }
  std::vector<test::Bytes> frames;
  for (uint32_t i = 0; i < 256; i++) {
    const auto sport = uint16_t(i % 4 == 0 ? 10000 + i : 30000 + i);
    frames.push_back(test::tcp_frame(1, test::pattern(10), 0x18, sport));
  }
  uint64_t sum = 0;
  size_t i = 0;
  for (auto _ : state) {
    sum += nic.steer(frames[i++ & 255]);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(int64_t(state.iterations()));
}
BENCHMARK(Steer4Queues);

}  // namespace
}  // namespace cleave::nic

BENCHMARK_MAIN();
