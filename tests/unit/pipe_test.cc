// pipe_test.cc - notification pipes alone: wrap, full, empty, every burst size, phases, credits,
// a corrupt consumer index, the doorbell protocol, and stress across threads and processes.
//
// The cross-process stress runs CLEAVE_PIPE_STRESS_ENTRIES entries (default 10^6; the slow suite
// runs 10^8) from a forked producer to the parent over a MAP_SHARED memfd, every entry checked.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "pipe.h"
#include "shm_abi.h"

namespace cleave::ipc {
namespace {

// Entry types carry a sequence number and a value derived from it, in whatever fields they have.
uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return x;
}
void stamp(abi::SendEntry* e, uint64_t seq) {
  *e = {};
  e->wr_id = seq;
  e->offset = mix(seq);
  e->length = static_cast<uint32_t>(seq * 3);
  e->reserved[16] = static_cast<uint8_t>(seq);
}
bool check(const abi::SendEntry& e, uint64_t seq) {
  return e.wr_id == seq && e.offset == mix(seq) && e.length == static_cast<uint32_t>(seq * 3) &&
         e.reserved[16] == static_cast<uint8_t>(seq);
}
void stamp(abi::RecvEntry* e, uint64_t seq) {
  *e = {};
  e->offset = seq;
  e->length = static_cast<uint32_t>(mix(seq));
}
bool check(const abi::RecvEntry& e, uint64_t seq) {
  return e.offset == seq && e.length == static_cast<uint32_t>(mix(seq));
}
void stamp(abi::Completion* e, uint64_t seq) {
  *e = {};
  e->wr_id = seq;
  e->imm = static_cast<uint32_t>(mix(seq));
  e->reserved[2] = static_cast<uint8_t>(seq >> 8);
}
bool check(const abi::Completion& e, uint64_t seq) {
  return e.wr_id == seq && e.imm == static_cast<uint32_t>(mix(seq)) &&
         e.reserved[2] == static_cast<uint8_t>(seq >> 8);
}

// A zeroed pipe in private memory: PipeCtl then the ring, cache-line aligned.
template <class E>
struct Ring {
  explicit Ring(uint32_t n)
      : count(n),
        mem(static_cast<uint8_t*>(std::aligned_alloc(abi::kCacheLine, bytes(n)))),
        ctl(reinterpret_cast<abi::PipeCtl*>(mem)),
        ring(reinterpret_cast<E*>(mem + sizeof(abi::PipeCtl))),
        prod(ctl, ring, n),
        cons(ctl, ring, n) {
    std::memset(mem, 0, bytes(n));
  }
  ~Ring() { std::free(mem); }
  static size_t bytes(uint32_t n) {
    size_t b = sizeof(abi::PipeCtl) + size_t{n} * sizeof(E);
    return (b + abi::kCacheLine - 1) / abi::kCacheLine * abi::kCacheLine;
  }
  uint8_t phase_at(uint32_t slot) const {
    return reinterpret_cast<const uint8_t*>(&ring[slot])[sizeof(E) - 1];
  }
  uint32_t count;
  uint8_t* mem;
  abi::PipeCtl* ctl;
  E* ring;
  PipeProducer<E> prod;
  PipeConsumer<E> cons;
};

template <class E>
class PipeTyped : public ::testing::Test {};
using EntryTypes = ::testing::Types<abi::SendEntry, abi::RecvEntry, abi::Completion>;
TYPED_TEST_SUITE(PipeTyped, EntryTypes);

TYPED_TEST(PipeTyped, FreshRingIsEmpty) {
  Ring<TypeParam> r(64);
  TypeParam out[4];
  EXPECT_FALSE(r.cons.ready());
  EXPECT_EQ(r.cons.consume(out, 4), 0u);
  EXPECT_EQ(r.ctl->consumer, 0u);
  EXPECT_EQ(r.prod.credits(), 64u);
}

TYPED_TEST(PipeTyped, FullRingTakesNothingUntilTheConsumerMoves) {
  Ring<TypeParam> r(64);
  std::vector<TypeParam> in(100);
  for (uint64_t i = 0; i < in.size(); i++)
    stamp(&in[i], i);
  EXPECT_EQ(r.prod.produce(in.data(), 100), 64u);
  EXPECT_EQ(r.prod.produce(in.data(), 1), 0u);
  EXPECT_EQ(r.prod.credits(), 0u);
  TypeParam out[3];
  ASSERT_EQ(r.cons.consume(out, 3), 3u);
  for (uint64_t i = 0; i < 3; i++)
    EXPECT_TRUE(check(out[i], i));
  EXPECT_EQ(r.prod.produce(&in[64], 5), 3u);  // exactly the three freed slots
  EXPECT_EQ(r.prod.produce(&in[67], 1), 0u);
}

TYPED_TEST(PipeTyped, PhaseFlipsOnEveryLap) {
  Ring<TypeParam> r(64);
  std::vector<TypeParam> buf(64);
  uint64_t seq = 0;
  for (int lap = 0; lap < 5; lap++) {
    for (auto& e : buf)
      stamp(&e, seq++);
    ASSERT_EQ(r.prod.produce(buf.data(), 64), 64u);
    for (uint32_t s = 0; s < 64; s++)
      ASSERT_EQ(r.phase_at(s), (lap + 1) & 1) << "lap " << lap << " slot " << s;
    ASSERT_EQ(r.cons.consume(buf.data(), 64), 64u);
    for (uint64_t i = 0; i < 64; i++)
      ASSERT_TRUE(check(buf[i], seq - 64 + i));
    EXPECT_FALSE(r.cons.ready());  // the stale phase of the last lap reads as empty
  }
}

// Every producer burst 1..64 against rings of 64..256, consumer bursts different from the
// producer's, over several laps: order and content survive every wrap position.
TYPED_TEST(PipeTyped, EveryBurstSizeAgainstEveryRing) {
  for (uint32_t count : {64u, 128u, 256u}) {
    for (unsigned burst = 1; burst <= 64; burst++) {
      Ring<TypeParam> r(count);
      unsigned cburst = (burst * 7) % 64 + 1;
      std::vector<TypeParam> in(burst), out(cburst);
      uint64_t next_in = 0, next_out = 0, total = count * 3 + burst;
      while (next_out < total) {
        unsigned want = static_cast<unsigned>(std::min<uint64_t>(burst, total - next_in));
        for (unsigned k = 0; k < want; k++)
          stamp(&in[k], next_in + k);
        unsigned put = r.prod.produce(in.data(), want);
        ASSERT_LE(r.prod.produced() - r.cons.consumed(), count);
        next_in += put;
        unsigned got = r.cons.consume(out.data(), cburst);
        for (unsigned k = 0; k < got; k++) {
          ASSERT_TRUE(check(out[k], next_out + k))
              << "ring " << count << " burst " << burst << " entry " << next_out + k;
        }
        next_out += got;
        ASSERT_EQ(r.ctl->consumer, next_out);  // published after every burst
        ASSERT_TRUE(put != 0 || got != 0) << "stuck at " << next_in << "/" << next_out;
      }
      EXPECT_FALSE(r.prod.corrupt());
    }
  }
}

TEST(Pipe, ProducerReadsTheConsumerIndexOnlyWhenCreditsRunOut) {
  Ring<abi::SendEntry> r(64);
  std::vector<abi::SendEntry> buf(64);
  ASSERT_EQ(r.prod.produce(buf.data(), 64), 64u);
  ASSERT_EQ(r.cons.consume(buf.data(), 32), 32u);
  EXPECT_EQ(r.ctl->consumer, 32u);
  EXPECT_EQ(r.prod.credits(1), 32u);  // out of credits: refreshed
  ASSERT_EQ(r.cons.consume(buf.data(), 32), 32u);
  EXPECT_EQ(r.prod.credits(1), 32u);   // still has credits: the new index is not read
  EXPECT_EQ(r.prod.credits(33), 64u);  // wants more than it has: reads it
  // Proof that it does not read: an impossible index goes unnoticed while credits last.
  r.ctl->consumer = 1'000'000;
  EXPECT_EQ(r.prod.produce(buf.data(), 10), 10u);
  EXPECT_FALSE(r.prod.corrupt());
}

TEST(Pipe, ConsumerIndexAheadOfTheProducerIsCorrupt) {
  Ring<abi::SendEntry> r(64);
  std::vector<abi::SendEntry> buf(100);
  ASSERT_EQ(r.prod.produce(buf.data(), 10), 10u);
  r.ctl->consumer = 11;  // more than was ever produced
  // The producer keeps to the credits it had and writes nothing beyond.
  EXPECT_EQ(r.prod.produce(buf.data(), 100), 54u);
  EXPECT_TRUE(r.prod.corrupt());
  EXPECT_EQ(r.prod.produce(buf.data(), 1), 0u);
  EXPECT_EQ(r.prod.produced(), 64u);
}

TEST(Pipe, ConsumerIndexTooFarBehindIsCorrupt) {
  Ring<abi::SendEntry> r(64);
  std::vector<abi::SendEntry> buf(64);
  ASSERT_EQ(r.prod.produce(buf.data(), 64), 64u);
  ASSERT_EQ(r.cons.consume(buf.data(), 64), 64u);
  ASSERT_EQ(r.prod.produce(buf.data(), 64), 64u);
  EXPECT_EQ(r.prod.credits(1), 0u);  // exactly one ring behind: full, and legitimate
  EXPECT_FALSE(r.prod.corrupt());
  r.ctl->consumer = 63;  // more than a ring behind the producer (head 128)
  EXPECT_EQ(r.prod.credits(1), 0u);
  EXPECT_TRUE(r.prod.corrupt());
  EXPECT_EQ(r.prod.produce(buf.data(), 1), 0u);
}

TEST(Pipe, DoorbellArmAndDisarm) {
  Ring<abi::Completion> r(64);
  EXPECT_FALSE(r.prod.take_wake());
  EXPECT_TRUE(r.cons.arm());  // empty: safe to sleep
  EXPECT_EQ(r.ctl->sleeping, 1u);
  EXPECT_TRUE(r.prod.take_wake());
  // The producer took the arm: the bursts that follow before the consumer runs ring no more.
  EXPECT_EQ(r.ctl->sleeping, 0u);
  EXPECT_FALSE(r.prod.take_wake());
  EXPECT_TRUE(r.cons.arm());
  r.cons.disarm();
  EXPECT_FALSE(r.prod.take_wake());
  abi::Completion c{};
  ASSERT_EQ(r.prod.produce(&c, 1), 1u);
  // An entry is waiting: arming refuses and leaves the flag down.
  EXPECT_FALSE(r.cons.arm());
  EXPECT_EQ(r.ctl->sleeping, 0u);
}

// The race the doorbell protocol exists for: the consumer arms while the producer publishes.
// Either the consumer sees the entry or the producer sees the flag; a lost wakeup shows as a
// sleep that times out with entries in the ring.
TEST(Pipe, DoorbellLosesNoWakeup) {
  Ring<abi::Completion> r(64);
  int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  constexpr uint64_t kN = 200'000;
  std::atomic<uint64_t> wakes{0};
  std::thread producer([&] {
    std::mt19937 rng(1);
    abi::Completion buf[8];
    for (uint64_t seq = 0; seq < kN;) {
      unsigned want = static_cast<unsigned>(std::min<uint64_t>(1 + rng() % 8, kN - seq));
      for (unsigned k = 0; k < want; k++)
        stamp(&buf[k], seq + k);
      unsigned put = r.prod.produce(buf, want);
      seq += put;
      if (put != 0 && r.prod.take_wake()) {
        uint64_t one = 1;
        ASSERT_EQ(write(efd, &one, sizeof one), 8);
        wakes++;
      }
      if (rng() % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  uint64_t next = 0, sleeps = 0, arms = 0;
  abi::Completion out[16];
  while (next < kN) {
    unsigned got = r.cons.consume(out, 16);
    for (unsigned k = 0; k < got; k++)
      ASSERT_TRUE(check(out[k], next + k));
    next += got;
    if (got != 0) continue;
    arms++;
    if (!r.cons.arm()) continue;
    pollfd p{efd, POLLIN, 0};
    int n = poll(&p, 1, 5000);
    r.cons.disarm();
    ASSERT_EQ(n, 1) << "lost wakeup at entry " << next << ", ready=" << r.cons.ready();
    uint64_t v;
    ASSERT_EQ(read(efd, &v, sizeof v), 8);
    sleeps++;
  }
  producer.join();
  close(efd);
  EXPECT_GT(sleeps, 0u);          // the sleeping path was taken
  EXPECT_LE(wakes.load(), arms);  // one wake per arm, never more
}

TEST(Pipe, TwoThreadStressWithChecksums) {
  Ring<abi::SendEntry> r(256);
  constexpr uint64_t kN = 2'000'000;
  uint64_t sent_sum = 0;
  std::thread producer([&] {
    abi::SendEntry buf[32];
    uint64_t sum = 0;
    for (uint64_t seq = 0; seq < kN;) {
      unsigned want = static_cast<unsigned>(std::min<uint64_t>(1 + seq % 32, kN - seq));
      for (unsigned k = 0; k < want; k++)
        stamp(&buf[k], seq + k);
      unsigned put = r.prod.produce(buf, want);
      for (unsigned k = 0; k < put; k++)
        sum += mix(buf[k].offset);
      seq += put;
      if (put == 0) std::this_thread::yield();
    }
    sent_sum = sum;
  });
  uint64_t next = 0, sum = 0, bad = 0;
  abi::SendEntry out[32];
  while (next < kN) {
    unsigned got = r.cons.consume(out, 1 + next % 29);
    for (unsigned k = 0; k < got; k++) {
      bad += !check(out[k], next + k);
      sum += mix(out[k].offset);
    }
    next += got;
    if (got == 0) std::this_thread::yield();
  }
  producer.join();
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(sum, sent_sum);
  EXPECT_FALSE(r.prod.corrupt());
}

uint64_t stress_entries() {
  const char* s = std::getenv("CLEAVE_PIPE_STRESS_ENTRIES");
  return s != nullptr ? std::strtoull(s, nullptr, 10) : 1'000'000;
}

// Producer and consumer in two processes over a MAP_SHARED memfd, as app and daemon are. The
// child produces; the parent checks order and content of every entry and a running checksum
// against the one the child computed, handed back through shared memory.
TEST(Pipe, CrossProcessStressWithChecksums) {
  const uint64_t n = stress_entries();
  constexpr uint32_t kCount = 1024;
  const size_t bytes = abi::pipe_bytes(abi::PipeKind::kSubmit, kCount) + abi::kCacheLine;
  int fd = memfd_create("pipe-stress", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
  auto* mem =
      static_cast<uint8_t*>(mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(mem, MAP_FAILED);
  auto* ctl = reinterpret_cast<abi::PipeCtl*>(mem);
  auto* ring = reinterpret_cast<abi::SendEntry*>(mem + sizeof(abi::PipeCtl));
  auto* child_sum = reinterpret_cast<uint64_t*>(mem + bytes - abi::kCacheLine);

  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    PipeProducer<abi::SendEntry> prod(ctl, ring, kCount);
    abi::SendEntry buf[32];
    uint64_t sum = 0;
    for (uint64_t seq = 0; seq < n;) {
      unsigned want = static_cast<unsigned>(std::min<uint64_t>(1 + (seq >> 5) % 32, n - seq));
      for (unsigned k = 0; k < want; k++)
        stamp(&buf[k], seq + k);
      unsigned put = prod.produce(buf, want);
      for (unsigned k = 0; k < put; k++)
        sum = mix(sum ^ buf[k].offset);
      seq += put;
      if (put == 0) sched_yield();
    }
    std::atomic_ref<uint64_t>(*child_sum).store(sum, std::memory_order_release);
    _exit(prod.corrupt() ? 2 : 0);
  }

  PipeConsumer<abi::SendEntry> cons(ctl, ring, kCount);
  uint64_t next = 0, sum = 0, bad = 0;
  abi::SendEntry out[32];
  auto last_progress = std::chrono::steady_clock::now();
  while (next < n) {
    unsigned got = cons.consume(out, 32);
    for (unsigned k = 0; k < got; k++) {
      if (!check(out[k], next + k) && bad++ == 0)
        ADD_FAILURE() << "entry " << next + k << " is wrong";
      sum = mix(sum ^ out[k].offset);
    }
    next += got;
    if (got != 0) {
      last_progress = std::chrono::steady_clock::now();
    } else {
      if (std::chrono::steady_clock::now() - last_progress > std::chrono::seconds(30)) {
        kill(pid, SIGKILL);
        ADD_FAILURE() << "no progress for 30 s at entry " << next;
        break;
      }
      sched_yield();
    }
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  EXPECT_EQ(next, n);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(sum, std::atomic_ref<uint64_t>(*child_sum).load(std::memory_order_acquire));
  EXPECT_EQ(ctl->consumer, n);
  munmap(mem, bytes);
  close(fd);
}

}  // namespace
}  // namespace cleave::ipc
