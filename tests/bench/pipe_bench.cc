// pipe_bench.cc - notification pipe throughput and round-trip latency, threads or processes
// pinned to the two cores, side by side with baselines measured in the same run.
//
// One way (SendEntry, producer bursts of 1, 8, 32; the consumer takes up to 32, spinning hot or
// backing off): the pipe, a plain index-based SPSC ring (Lamport: both indexes shared and read on
// every call) and a mutex-guarded std::deque. Round trip (one entry each way), between threads
// and between processes: the pipe, a raw shared cache-line ping-pong (the physical floor), and
// (processes) an eventfd pair and a unix socket pair; median and p99 per round trip.
// Prints figures; asserts nothing. Run: meson test -C build --benchmark --suite bench -v
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "pipe.h"
#include "shm_abi.h"

namespace cleave::ipc {
namespace {

using abi::SendEntry;
constexpr uint32_t kRing = 1024;

void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu % static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}
inline void relax() {
  __builtin_ia32_pause();
}

// ---- Queues under test: push/pop bursts of SendEntry ----

// The ring lives in a MAP_SHARED mapping (zeroed) so a forked peer uses the same one.
struct PipeQ {
  static constexpr size_t kBytes = abi::pipe_bytes(abi::PipeKind::kSubmit, kRing);
  PipeQ()
      : mem(static_cast<uint8_t*>(
            mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0))) {
    auto* ctl = reinterpret_cast<abi::PipeCtl*>(mem);
    auto* ring = reinterpret_cast<SendEntry*>(ctl + 1);
    prod = {ctl, ring, kRing};
    cons = {ctl, ring, kRing};
  }
  ~PipeQ() { munmap(mem, kBytes); }
  unsigned push(const SendEntry* e, unsigned n) { return prod.produce(e, n); }
  unsigned pop(SendEntry* e, unsigned n) { return cons.consume(e, n); }
  uint8_t* mem;
  // Each side's private state on its own cache line, as it is when the sides are processes.
  alignas(64) PipeProducer<SendEntry> prod;
  alignas(64) PipeConsumer<SendEntry> cons;
};

// The textbook SPSC ring: each side publishes its index and reads the other's on every call.
struct LamportQ {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) SendEntry ring[kRing];
  unsigned push(const SendEntry* e, unsigned n) {
    uint64_t h = head.load(std::memory_order_relaxed);
    uint64_t room = kRing - (h - tail.load(std::memory_order_acquire));
    n = static_cast<unsigned>(std::min<uint64_t>(n, room));
    for (unsigned k = 0; k < n; k++)
      ring[(h + k) & (kRing - 1)] = e[k];
    head.store(h + n, std::memory_order_release);
    return n;
  }
  unsigned pop(SendEntry* e, unsigned n) {
    uint64_t t = tail.load(std::memory_order_relaxed);
    uint64_t avail = head.load(std::memory_order_acquire) - t;
    n = static_cast<unsigned>(std::min<uint64_t>(n, avail));
    for (unsigned k = 0; k < n; k++)
      e[k] = ring[(t + k) & (kRing - 1)];
    tail.store(t + n, std::memory_order_release);
    return n;
  }
};

struct MutexDequeQ {
  std::mutex mu;
  std::deque<SendEntry> q;
  unsigned push(const SendEntry* e, unsigned n) {
    std::lock_guard lk(mu);
    n = static_cast<unsigned>(std::min<size_t>(n, kRing - q.size()));
    q.insert(q.end(), e, e + n);
    return n;
  }
  unsigned pop(SendEntry* e, unsigned n) {
    std::lock_guard lk(mu);
    n = static_cast<unsigned>(std::min<size_t>(n, q.size()));
    std::copy_n(q.begin(), n, e);
    q.erase(q.begin(), q.begin() + n);
    return n;
  }
};

// Entries/s one way: the benchmark thread produces in bursts of range(0), a pinned consumer
// thread takes up to 32 at a time. Each iteration moves a batch and waits until it is consumed.
template <class Q>
void BM_OneWay(benchmark::State& state) {
  const auto burst = static_cast<unsigned>(state.range(0));
  const auto pauses = static_cast<int>(state.range(1));
  constexpr uint64_t kBatch = 1u << 14;
  auto q = std::make_unique<Q>();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> consumed{0};
  std::thread consumer([&] {
    pin(1);
    SendEntry buf[32];
    uint64_t n = 0, sum = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      unsigned got = q->pop(buf, 32);
      if (got == 0) {
        for (int r = 0; r < pauses; r++)
          relax();
        continue;
      }
      for (unsigned k = 0; k < got; k++)
        sum += buf[k].wr_id;
      n += got;
      consumed.store(n, std::memory_order_release);
    }
    benchmark::DoNotOptimize(sum);
  });
  pin(0);
  SendEntry in[32] = {};
  uint64_t produced = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    uint64_t target = produced + kBatch;
    while (produced < target) {
      for (unsigned k = 0; k < burst; k++)
        in[k].wr_id = produced + k;
      unsigned put =
          q->push(in, static_cast<unsigned>(std::min<uint64_t>(burst, target - produced)));
      produced += put;
      if (put == 0) relax();
    }
    while (consumed.load(std::memory_order_acquire) < produced)
      relax();
  }
  double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  stop = true;
  consumer.join();
  state.SetItemsProcessed(static_cast<int64_t>(produced));
  state.counters["ns_per_entry"] = produced != 0 ? ns / static_cast<double>(produced) : 0;
}

// Arguments: producer burst, and pauses the consumer takes after an empty poll: 1 is a consumer
// spinning flat out on the next entry (the line the producer writes next), 32 one that backs off,
// closer to a daemon that polls many pipes in turn and finds a batch waiting.
void Args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"burst", "pauses"})->UseRealTime();
  for (int pauses : {1, 32}) {
    for (int burst : {1, 8, 32})
      b->Args({burst, pauses});
  }
}
BENCHMARK_TEMPLATE(BM_OneWay, PipeQ)->Apply(Args);
BENCHMARK_TEMPLATE(BM_OneWay, LamportQ)->Apply(Args);
BENCHMARK_TEMPLATE(BM_OneWay, MutexDequeQ)->Apply(Args);

// ---- Round trips: one message there, one back ----

// Each transport: ping(i) from the benchmark thread, then wait_pong(); the echo thread runs
// echo_once() until stopped (it must return now and then to look at the stop flag).
struct PipeRtt {
  PipeQ there, back;
  void ping(uint64_t i) {
    SendEntry e{};
    e.wr_id = i;
    while (there.push(&e, 1) == 0)
      relax();
  }
  void wait_pong(uint64_t) {
    SendEntry e;
    while (back.pop(&e, 1) == 0)
      relax();
  }
  void echo_once() {
    SendEntry e;
    if (there.pop(&e, 1) == 0) return relax();
    while (back.push(&e, 1) == 0)
      relax();
  }
  void stop() {}
};

// Two words on two cache lines: the least any shared-memory round trip can cost.
struct RawRtt {
  alignas(64) std::atomic<uint64_t> ping_word{0};
  alignas(64) std::atomic<uint64_t> pong_word{0};
  uint64_t seen = 0;
  void ping(uint64_t i) { ping_word.store(i + 1, std::memory_order_release); }
  void wait_pong(uint64_t i) {
    while (pong_word.load(std::memory_order_acquire) != i + 1)
      relax();
  }
  void echo_once() {
    uint64_t v = ping_word.load(std::memory_order_acquire);
    if (v == seen) return relax();
    seen = v;
    pong_word.store(v, std::memory_order_release);
  }
  void stop() {}
};

struct EventfdRtt {
  int there = eventfd(0, EFD_CLOEXEC), back = eventfd(0, EFD_CLOEXEC);
  ~EventfdRtt() {
    close(there);
    close(back);
  }
  void ping(uint64_t) {
    uint64_t one = 1;
    benchmark::DoNotOptimize(write(there, &one, 8));
  }
  void wait_pong(uint64_t) {
    uint64_t v;
    benchmark::DoNotOptimize(read(back, &v, 8));
  }
  void echo_once() {
    uint64_t v;
    if (read(there, &v, 8) != 8) return;
    uint64_t one = 1;
    benchmark::DoNotOptimize(write(back, &one, 8));
  }
  void stop() { ping(0); }  // unblocks the echo thread's read
};

struct UnixRtt {
  int fds[2];
  UnixRtt() { socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds); }
  ~UnixRtt() {
    close(fds[0]);
    close(fds[1]);
  }
  void ping(uint64_t i) {
    SendEntry e{};
    e.wr_id = i;
    benchmark::DoNotOptimize(send(fds[0], &e, sizeof e, 0));
  }
  void wait_pong(uint64_t) {
    SendEntry e;
    benchmark::DoNotOptimize(recv(fds[0], &e, sizeof e, 0));
  }
  void echo_once() {
    SendEntry e;
    if (recv(fds[1], &e, sizeof e, 0) != sizeof e) return;
    benchmark::DoNotOptimize(send(fds[1], &e, sizeof e, 0));
  }
  void stop() { ping(0); }
};

// T and the stop flag in one MAP_SHARED mapping, so a forked echo process sees them.
template <class T>
struct SharedRig {
  T t;
  std::atomic<bool> stop{false};
  static SharedRig* make() {
    void* p =
        mmap(nullptr, sizeof(SharedRig), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return new (p) SharedRig;
  }
  void destroy() {
    this->~SharedRig();
    munmap(this, sizeof(SharedRig));
  }
};

// The echo runs in a thread, or (kProcess) in a forked process as an app and cleaved would.
template <class T, bool kProcess>
void BM_RoundTrip(benchmark::State& state) {
  SharedRig<T>* rig = SharedRig<T>::make();
  T* t = &rig->t;
  auto echo_loop = [rig] {
    pin(1);
    while (!rig->stop.load(std::memory_order_relaxed))
      rig->t.echo_once();
  };
  pid_t child = -1;
  std::thread echo;
  if (kProcess) {
    child = fork();
    if (child == 0) {
      echo_loop();
      _exit(0);
    }
  } else {
    echo = std::thread(echo_loop);
  }
  pin(0);
  std::vector<double> rtt;
  rtt.reserve(1u << 20);
  uint64_t i = 0;
  for (auto _ : state) {
    auto a = std::chrono::steady_clock::now();
    t->ping(i);
    t->wait_pong(i);
    auto b = std::chrono::steady_clock::now();
    if (rtt.size() < rtt.capacity())
      rtt.push_back(std::chrono::duration<double, std::nano>(b - a).count());
    i++;
  }
  rig->stop = true;
  t->stop();
  if (kProcess) {
    waitpid(child, nullptr, 0);
  } else {
    echo.join();
  }
  rig->destroy();
  std::sort(rtt.begin(), rtt.end());
  if (!rtt.empty()) {
    state.counters["median_ns"] = rtt[rtt.size() / 2];
    state.counters["p99_ns"] = rtt[rtt.size() * 99 / 100];
  }
}

BENCHMARK_TEMPLATE(BM_RoundTrip, PipeRtt, false)->UseRealTime();
BENCHMARK_TEMPLATE(BM_RoundTrip, RawRtt, false)->UseRealTime();
BENCHMARK_TEMPLATE(BM_RoundTrip, PipeRtt, true)->UseRealTime();
BENCHMARK_TEMPLATE(BM_RoundTrip, RawRtt, true)->UseRealTime();
BENCHMARK_TEMPLATE(BM_RoundTrip, EventfdRtt, true)->UseRealTime();
BENCHMARK_TEMPLATE(BM_RoundTrip, UnixRtt, true)->UseRealTime();

}  // namespace
}  // namespace cleave::ipc

BENCHMARK_MAIN();
