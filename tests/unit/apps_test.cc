// apps_test.cc - the dataplane's app path without DPDK: apps simulated over plain memory, with
// their pipes written through the same PipeProducer/PipeConsumer a real app's library uses.
#include <cleave/cleave.h>
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "lcore/apps.h"
#include "pipe.h"

namespace cleave::dp {
namespace {

constexpr uint64_t kHz = 1'000'000;  // a fake TSC: 1 MHz
constexpr uint32_t kGuard = 4096;

// One app: a heap MR with guard bytes around it, a read-only MR, a CQ, an SQ and an RQ.
struct SimApp {
  static constexpr uint16_t kCq = 0, kSq = 1, kRq = 2;

  explicit SimApp(uint32_t id, uint32_t entries = 256, uint32_t cq_entries = 1024,
                  uint32_t error_budget = 1000)
      : mem(kGuard + kHeap + kGuard, 0xEE),
        ro(4096, 0x5A),
        cq_mem(abi::pipe_bytes(abi::PipeKind::kCompletion, cq_entries) / 64),
        sq_mem(abi::pipe_bytes(abi::PipeKind::kSubmit, entries) / 64),
        rq_mem(abi::pipe_bytes(abi::PipeKind::kRecv, entries) / 64) {
    std::memset(heap(), 0, kHeap);
    dp.id = id;
    dp.error_budget = error_budget;
    dp.mrs.resize(3);
    dp.mrs[0] = {heap(), kHeap, abi::kAccessRead | abi::kAccessWrite};
    dp.mrs[1] = {ro.data(), ro.size(), abi::kAccessRead};
    dp.pipes.resize(4);
    auto cq = ipc::pipe_at(cq_mem.data(), 0);
    auto sq = ipc::pipe_at(sq_mem.data(), 0);
    auto rq = ipc::pipe_at(rq_mem.data(), 0);
    dp.pipes[kCq].kind = abi::PipeKind::kCompletion;
    dp.pipes[kCq].cq_out = {cq.ctl, static_cast<abi::Completion*>(cq.ring), cq_entries};
    dp.pipes[kSq].kind = abi::PipeKind::kSubmit;
    dp.pipes[kSq].cq = kCq;
    dp.pipes[kSq].sq = {sq.ctl, static_cast<abi::SendEntry*>(sq.ring), entries};
    dp.pipes[kRq].kind = abi::PipeKind::kRecv;
    dp.pipes[kRq].cq = kCq;
    dp.pipes[kRq].rq = {rq.ctl, static_cast<abi::RecvEntry*>(rq.ring), entries};
    sq_out = {sq.ctl, static_cast<abi::SendEntry*>(sq.ring), entries};
    rq_out = {rq.ctl, static_cast<abi::RecvEntry*>(rq.ring), entries};
    cq_in = {cq.ctl, static_cast<abi::Completion*>(cq.ring), cq_entries};
  }

  uint8_t* heap() { return mem.data() + kGuard; }
  bool guards_intact() const {
    for (uint32_t i = 0; i < kGuard; i++) {
      if (mem[i] != 0xEE || mem[kGuard + kHeap + i] != 0xEE) return false;
    }
    return true;
  }
  unsigned post(const abi::SendEntry& e) { return sq_out.produce(&e, 1); }
  // Version 4: the app's summary word, which post_marked() sets as libcleave does.
  void use_summary() { dp.submit_ready = &summary.ready; }
  unsigned post_marked(const abi::SendEntry& e) {
    unsigned n = post(e);
    std::atomic_ref<uint64_t>(summary.ready)
        .fetch_or(abi::submit_bit(kSq), std::memory_order_release);
    return n;
  }
  unsigned post_recv(uint64_t offset, uint32_t length, uint16_t mr = 0) {
    abi::RecvEntry r{};
    r.offset = offset;
    r.length = length;
    r.mr = mr;
    return rq_out.produce(&r, 1);
  }
  std::vector<abi::Completion> poll() {
    std::vector<abi::Completion> out(cq_in.capacity());
    out.resize(cq_in.consume(out.data(), static_cast<unsigned>(out.size())));
    return out;
  }

  static constexpr uint32_t kHeap = 64 * 1024;
  std::vector<uint8_t> mem;
  std::vector<uint8_t> ro;
  // Pipe memory, cache-line aligned.
  struct alignas(64) Line {
    uint8_t b[64];
  };
  std::vector<Line> cq_mem, sq_mem, rq_mem;
  DpApp dp;
  abi::SubmitSummary summary{};
  ipc::PipeProducer<abi::SendEntry> sq_out;
  ipc::PipeProducer<abi::RecvEntry> rq_out;
  ipc::PipeConsumer<abi::Completion> cq_in;
};

abi::SendEntry op(uint8_t opcode, uint64_t wr_id, uint32_t mr = 0, uint64_t offset = 0,
                  uint32_t length = 0) {
  abi::SendEntry e{};
  e.opcode = opcode;
  e.wr_id = wr_id;
  e.mr = mr;
  e.offset = offset;
  e.length = length;
  return e;
}

abi::SendEntry copy(uint64_t wr_id, uint32_t src_mr, uint64_t src, uint32_t dst_mr, uint64_t dst,
                    uint32_t length) {
  abi::SendEntry e = op(abi::kOpCopy, wr_id, src_mr, src, length);
  e.remote_mr = dst_mr;
  e.remote_offset = dst;
  return e;
}

abi::SendEntry send(uint64_t wr_id, uint64_t offset, uint32_t length, uint32_t target,
                    uint32_t imm = 0) {
  abi::SendEntry e = op(abi::kOpSend, wr_id, 0, offset, length);
  e.target = target;
  e.imm = imm;
  return e;
}

struct AppPathTest : ::testing::Test {
  AppPath path{8, 32, kHz};
  uint64_t now = 1000;
  unsigned poll() { return path.poll(now); }
};

TEST_F(AppPathTest, NopCopyAndSendComplete) {
  SimApp a(1);
  ASSERT_TRUE(path.attach(&a.dp, now));
  for (uint32_t i = 0; i < 100; i++)
    a.heap()[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(a.post_recv(8192, 200));
  a.post(op(abi::kOpNop, 11));
  a.post(copy(12, 0, 0, 0, 4096, 100));
  a.post(send(13, 0, 100, SimApp::kRq, 0xabcd));
  EXPECT_EQ(poll(), 3u);
  auto c = a.poll();
  ASSERT_EQ(c.size(), 4u);  // nop, copy, the receive, then the send
  EXPECT_EQ(c[0].wr_id, 11u);
  EXPECT_EQ(c[0].status, 0);
  EXPECT_EQ(c[1].wr_id, 12u);
  EXPECT_EQ(c[1].status, 0);
  EXPECT_EQ(c[1].length, 100u);
  EXPECT_EQ(c[2].flags & abi::kCompRecv, abi::kCompRecv);
  EXPECT_EQ(c[2].wr_id, 0u);  // index of the receive entry
  EXPECT_EQ(c[2].pipe, SimApp::kRq);
  EXPECT_EQ(c[2].imm, 0xabcdu);
  EXPECT_EQ(c[2].length, 100u);
  EXPECT_EQ(c[3].wr_id, 13u);
  EXPECT_EQ(c[3].status, 0);
  EXPECT_EQ(c[3].pipe, SimApp::kSq);
  EXPECT_EQ(std::memcmp(a.heap(), a.heap() + 4096, 100), 0);
  EXPECT_EQ(std::memcmp(a.heap(), a.heap() + 8192, 100), 0);
  EXPECT_EQ(a.dp.counters.ops[abi::kOpNop], 1u);
  EXPECT_EQ(a.dp.counters.ops[abi::kOpCopy], 1u);
  EXPECT_EQ(a.dp.counters.ops[abi::kOpSend], 1u);
  EXPECT_EQ(a.dp.counters.bytes, 200u);
  EXPECT_EQ(a.dp.counters.errors_total, 0u);
  EXPECT_TRUE(a.guards_intact());
}

TEST_F(AppPathTest, SendWithoutReceiveAndTruncation) {
  SimApp a(1);
  ASSERT_TRUE(path.attach(&a.dp, now));
  a.post(send(1, 0, 64, SimApp::kRq));
  poll();
  auto c = a.poll();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].status, CL_ENORECV);
  EXPECT_EQ(a.dp.counters.no_recv, 1u);
  EXPECT_EQ(a.dp.counters.errors_total, 0u);  // not the app's fault

  std::memset(a.heap(), 0x11, 64);
  a.post_recv(1024, 16);
  a.post(send(2, 0, 64, SimApp::kRq));
  poll();
  c = a.poll();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, CL_ETRUNC);
  EXPECT_EQ(c[0].length, 16u);
  EXPECT_EQ(c[1].status, CL_ETRUNC);
  EXPECT_EQ(a.heap()[1024 + 15], 0x11);
  EXPECT_EQ(a.heap()[1024 + 16], 0);  // nothing past the buffer
}

// Every kind of bad descriptor: an error completion with the right code, the right counter, and
// not one byte written outside the app's MRs.
TEST_F(AppPathTest, BadDescriptorsAreRejected) {
  SimApp a(1);
  ASSERT_TRUE(path.attach(&a.dp, now));
  const uint64_t heap = SimApp::kHeap;
  struct Case {
    abi::SendEntry e;
    int32_t status;
    AppError error;
  };
  abi::SendEntry flags = op(abi::kOpNop, 0);
  flags.flags = 1;
  abi::SendEntry reserved = op(abi::kOpNop, 0);
  reserved.reserved[5] = 1;
  std::vector<Case> cases = {
      {op(9, 0), CL_EOPNOTSUPP, AppError::bad_opcode},
      {op(255, 0), CL_EOPNOTSUPP, AppError::bad_opcode},
      {flags, CL_EINVAL, AppError::bad_flags},
      {reserved, CL_EINVAL, AppError::bad_flags},
      {copy(0, 7, 0, 0, 0, 8), CL_ENOENT, AppError::bad_mr},            // unknown MR
      {copy(0, 2, 0, 0, 0, 8), CL_ENOENT, AppError::bad_mr},            // slot not registered
      {copy(0, 0xffffffff, 0, 0, 0, 8), CL_ENOENT, AppError::bad_mr},   // huge id
      {copy(0, 0, 0, 0, heap, 1), CL_EFAULT, AppError::out_of_bounds},  // one past the end
      {copy(0, 0, heap - 8, 0, 0, 9), CL_EFAULT, AppError::out_of_bounds},
      {copy(0, 0, UINT64_MAX - 4, 0, 0, 16), CL_EFAULT, AppError::out_of_bounds},  // wraps
      {copy(0, 0, 0, 0, UINT64_MAX, 1), CL_EFAULT, AppError::out_of_bounds},
      {copy(0, 0, 0, 1, 0, 8), CL_EACCES, AppError::access},          // read-only MR as target
      {send(0, 0, 8, 3), CL_EINVAL, AppError::bad_target},            // an unused pipe slot
      {send(0, 0, 8, SimApp::kCq), CL_EINVAL, AppError::bad_target},  // not a receive pipe
      {send(0, 0, 8, 0xffffffff), CL_EINVAL, AppError::bad_target},
      {copy(0, 0, 0, 0, 0, kMaxRequestBytes + 1), CL_EINVAL, AppError::too_long},
  };
  for (size_t i = 0; i < cases.size(); i++) {
    cases[i].e.wr_id = 100 + i;
    ASSERT_EQ(a.post(cases[i].e), 1u);
    poll();
    auto c = a.poll();
    ASSERT_EQ(c.size(), 1u) << "case " << i;
    EXPECT_EQ(c[0].wr_id, 100 + i);
    EXPECT_EQ(c[0].status, cases[i].status) << "case " << i;
    EXPECT_EQ(a.dp.counters.errors[static_cast<size_t>(cases[i].error)] > 0, true) << "case " << i;
  }
  EXPECT_EQ(a.dp.counters.errors_total, cases.size());
  EXPECT_FALSE(a.dp.evicted);
  EXPECT_TRUE(a.guards_intact());

  // A receive buffer out of bounds fails both sides and is counted once.
  a.post_recv(heap - 4, 8);
  a.post(send(500, 0, 8, SimApp::kRq));
  poll();
  auto c = a.poll();
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].status, CL_EFAULT);
  EXPECT_EQ(c[1].status, CL_EFAULT);
  EXPECT_EQ(a.dp.counters.errors_total, cases.size() + 1);
  EXPECT_TRUE(a.guards_intact());
}

TEST_F(AppPathTest, ErrorBudgetEvictsAndRefills) {
  SimApp a(1, 256, 1024, /*error_budget=*/4);
  ASSERT_TRUE(path.attach(&a.dp, now));
  // Four errors a second are tolerated, spread out or at once.
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 4; i++)
      a.post(op(99, 0));
    poll();
    EXPECT_EQ(a.poll().size(), 4u);
    EXPECT_FALSE(a.dp.evict.load());
    now += kHz;  // a second later the bucket is full again
  }
  // The fifth within a second evicts: nothing more is served.
  for (int i = 0; i < 5; i++)
    a.post(op(99, 0));
  a.post(op(abi::kOpNop, 7));
  poll();
  EXPECT_TRUE(a.dp.evict.load());
  EXPECT_EQ(a.poll().size(), 5u);
  a.post(op(abi::kOpNop, 8));
  EXPECT_EQ(poll(), 0u);
  EXPECT_TRUE(a.poll().empty());
}

// A flooding app gets its budget per pass; an app that posts one request is served in the same
// pass, whichever goes first.
TEST_F(AppPathTest, NoAppStarvesAnother) {
  SimApp flood(1, 4096, 8192), quiet(2);
  AppPath p(8, /*budget=*/8, kHz);
  ASSERT_TRUE(p.attach(&flood.dp, now));
  ASSERT_TRUE(p.attach(&quiet.dp, now));
  for (int pass = 0; pass < 4; pass++) {
    for (int i = 0; i < 1000; i++)
      flood.post(op(abi::kOpNop, i));
    quiet.post(op(abi::kOpNop, 42));
    unsigned served = p.poll(now);
    EXPECT_EQ(served, 8u + 1u) << "pass " << pass;
    auto c = quiet.poll();
    ASSERT_EQ(c.size(), 1u) << "pass " << pass;
    EXPECT_EQ(c[0].wr_id, 42u);
    EXPECT_EQ(flood.poll().size(), 8u);
  }
}

// A full completion pipe holds requests back; none is lost and none completes twice.
TEST_F(AppPathTest, FullCompletionPipeHoldsRequests) {
  SimApp a(1, 256, 64);
  ASSERT_TRUE(path.attach(&a.dp, now));
  for (int i = 0; i < 200; i++)
    ASSERT_EQ(a.post(op(abi::kOpNop, i)), 1u);
  uint64_t next = 0;
  for (int pass = 0; pass < 100 && next < 200; pass++) {
    poll();
    if (pass % 3 != 0) continue;  // the app reads its completions only now and then
    for (const abi::Completion& c : a.poll()) {
      EXPECT_EQ(c.wr_id, next++);
      EXPECT_EQ(c.status, 0);
    }
  }
  EXPECT_EQ(next, 200u);
  EXPECT_EQ(a.dp.counters.cq_full, 0u);
}

// The room flows reserve on a completion pipe is kept from the app path: its requests wait
// while only owed entries would fit, and go on as the app reads or the flows release theirs.
TEST_F(AppPathTest, CompletionRoomKeepsWhatFlowsAreOwed) {
  SimApp a(1, 256, 64);
  CompletionRoom room(a.dp.pipes[SimApp::kCq]);
  EXPECT_EQ(room.free(), 64u);
  EXPECT_FALSE(room.reserve(65)) << "more than the pipe holds";
  EXPECT_EQ(a.dp.pipes[SimApp::kCq].promised, 0u) << "a refused reservation owes nothing";
  ASSERT_TRUE(room.reserve(63));
  EXPECT_EQ(room.free(), 1u);
  EXPECT_FALSE(room.reserve(2));
  ASSERT_TRUE(path.attach(&a.dp, now));
  // A request needs room for two completions (its own and a receive's): none is free.
  ASSERT_EQ(a.post(op(abi::kOpNop, 7)), 1u);
  poll();
  EXPECT_TRUE(a.poll().empty());
  room.release(62);
  poll();
  auto c = a.poll();
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].wr_id, 7u);
  EXPECT_EQ(room.free(), 62u) << "the consumer's index is not re-read while enough remains";
  EXPECT_EQ(room.free(63), 63u) << "...and is when fewer than wanted do";
  room.release(100);  // more than owed: nothing is owed any more
  EXPECT_EQ(a.dp.pipes[SimApp::kCq].promised, 0u);
  EXPECT_EQ(room.free(64), 64u);
}

// An app that writes an impossible consumer index into its completion pipe is counted and,
// being hostile, runs out of budget; the daemon never writes past the ring.
TEST_F(AppPathTest, CorruptConsumerIndexIsCaught) {
  SimApp a(1, 256, 64, 8);
  ASSERT_TRUE(path.attach(&a.dp, now));
  for (int i = 0; i < 64; i++)
    a.post(op(abi::kOpNop, i));
  poll();
  poll();
  auto* ctl = reinterpret_cast<abi::PipeCtl*>(a.cq_mem.data());
  ctl->consumer = 1u << 30;  // far ahead of what was produced
  for (int i = 0; i < 200 && !a.dp.evicted; i++) {
    a.post(op(abi::kOpNop, i));
    poll();
  }
  EXPECT_GT(a.dp.counters.errors[static_cast<size_t>(AppError::corrupt_pipe)], 0u);
  EXPECT_TRUE(a.dp.evict.load());
  EXPECT_LE(a.dp.counters.completions, 64u);
}

// Random bytes written over a submit pipe: every entry the dataplane takes is checked; the app
// gets completions or errors, the daemon writes nothing outside the app's memory.
TEST_F(AppPathTest, RandomBytesInPipes) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 50; trial++) {
    SimApp a(1, 64, 1024, 1u << 20);
    AppPath p(2, 32, kHz);
    ASSERT_TRUE(p.attach(&a.dp, now));
    auto* sq = reinterpret_cast<uint8_t*>(a.sq_mem.data()) + sizeof(abi::PipeCtl);
    auto* rq = reinterpret_cast<uint8_t*>(a.rq_mem.data()) + sizeof(abi::PipeCtl);
    for (size_t i = 0; i < 64 * sizeof(abi::SendEntry); i++)
      sq[i] = static_cast<uint8_t>(rng());
    for (size_t i = 0; i < 64 * sizeof(abi::RecvEntry); i++)
      rq[i] = static_cast<uint8_t>(rng());
    for (int k = 0; k < 10; k++) {
      p.poll(now);
      a.poll();
    }
    EXPECT_TRUE(a.guards_intact()) << "trial " << trial;
  }
}

TEST_F(AppPathTest, AttachDetachAndTableUpdates) {
  SimApp a(5), b(5);
  EXPECT_TRUE(path.attach(&a.dp, now));
  EXPECT_FALSE(path.attach(&b.dp, now));  // the id is taken
  EXPECT_FALSE(path.set_mr(5, 99, DpMr{}));
  EXPECT_TRUE(path.set_mr(5, 2, DpMr{a.heap(), 16, abi::kAccessRead}));
  a.post(copy(1, 2, 0, 0, 100, 16));
  poll();
  EXPECT_EQ(a.poll().at(0).status, 0);
  EXPECT_TRUE(path.set_mr(5, 2, DpMr{}));  // deregistered
  a.post(copy(2, 2, 0, 0, 100, 16));
  poll();
  EXPECT_EQ(a.poll().at(0).status, CL_ENOENT);
  EXPECT_EQ(path.detach(5), &a.dp);
  EXPECT_EQ(path.detach(5), nullptr);
  a.post(op(abi::kOpNop, 3));
  EXPECT_EQ(poll(), 0u);
  AppPath small(1, 32, kHz);
  EXPECT_TRUE(small.attach(&a.dp, now));
  EXPECT_FALSE(small.attach(&b.dp, now));  // full (and a duplicate)
}

// Completions of one pass go to their pipe in one batch: in the order posted, every one of
// them (a slot holds kPerPipe), and one doorbell per sleep of the consumer, not one per
// completion or batch.
TEST_F(AppPathTest, CompletionsArePostedInOneBatchPerPipe) {
  SimApp a(1);
  const int efd = eventfd(0, EFD_NONBLOCK);
  ASSERT_GE(efd, 0);
  a.dp.pipes[SimApp::kCq].doorbell_fd = efd;
  ASSERT_TRUE(path.attach(&a.dp, now));
  ASSERT_TRUE(a.cq_in.arm());  // the consumer sleeps on its doorbell from now on
  // 30 nops: 30 completions, one batch.
  for (uint64_t i = 0; i < 30; i++)
    a.post(op(abi::kOpNop, i));
  EXPECT_EQ(poll(), 30u);
  EXPECT_EQ(a.dp.counters.doorbells, 1u);
  uint64_t v = 0;
  EXPECT_EQ(read(efd, &v, sizeof v), ssize_t(sizeof v));
  EXPECT_EQ(v, 1u);
  auto c = a.poll();
  ASSERT_EQ(c.size(), 30u);
  for (uint64_t i = 0; i < 30; i++)
    EXPECT_EQ(c[i].wr_id, i);
  // Nops and sends mixed, 32 requests: 48 completions (a send's receive comes first), in the
  // order posted; a slot holds kPerPipe, so two batches. The consumer sleeps again: the first
  // batch takes its arm, the second rings no more.
  ASSERT_TRUE(a.cq_in.arm());
  for (uint32_t i = 0; i < 16; i++)
    ASSERT_TRUE(a.post_recv(8192 + i * 64, 64));
  for (uint64_t i = 0; i < 32; i++)
    a.post(i % 2 ? send(100 + i, 0, 8, SimApp::kRq) : op(abi::kOpNop, 100 + i));
  EXPECT_EQ(poll(), 32u);
  EXPECT_EQ(a.dp.counters.doorbells, 2u);
  c = a.poll();
  ASSERT_EQ(c.size(), 48u);
  size_t k = 0;
  for (uint64_t i = 0; i < 32; i++) {
    if (i % 2) {
      EXPECT_EQ(c[k].flags & abi::kCompRecv, abi::kCompRecv);
      EXPECT_EQ(c[k++].wr_id, i / 2) << "the receive entry's index";
    }
    EXPECT_EQ(c[k].flags & abi::kCompRecv, 0);
    EXPECT_EQ(c[k].status, 0);
    EXPECT_EQ(c[k++].wr_id, 100 + i);
  }
  EXPECT_EQ(a.dp.counters.completions, 78u);
  EXPECT_EQ(a.dp.counters.cq_full, 0u);
  EXPECT_TRUE(path.completions().empty());
  close(efd);
}

// ---- the submit summary word (abi::SubmitSummary) ----

constexpr uint64_t kSweep = kHz * abi::kSubmitSweepUs / 1000000;  // in fake TSC ticks

// Drains whatever completions the app has and checks they are nops numbered from `next` on.
void expect_in_order(SimApp& a, uint64_t& next) {
  for (const abi::Completion& c : a.poll()) {
    EXPECT_EQ(c.wr_id, next++);
    EXPECT_EQ(c.status, 0);
  }
}

// An app that marks its pipe is served on the next pass; an idle one is not looked at.
TEST_F(AppPathTest, MarkedPipeIsServedAtOnce) {
  SimApp a(1);
  a.use_summary();
  ASSERT_TRUE(path.attach(&a.dp, now));
  EXPECT_EQ(poll(), 0u);  // the first pass sweeps
  now++;
  a.post_marked(op(abi::kOpNop, 5));
  EXPECT_EQ(poll(), 1u);
  EXPECT_EQ(a.summary.ready, 0u) << "the dataplane takes the bits it serves";
  EXPECT_EQ(a.poll().size(), 1u);
  // Entries published without a mark wait for the sweep: the pass does not look at the pipe.
  a.post(op(abi::kOpNop, 6));
  now++;
  EXPECT_EQ(poll(), 0u);
}

// An app that never sets the word is still served, at the latest one sweep interval later.
TEST_F(AppPathTest, UnmarkedPipeIsServedBySweep) {
  SimApp a(1);
  a.use_summary();
  ASSERT_TRUE(path.attach(&a.dp, now));
  poll();
  uint64_t next = 0;
  for (uint64_t i = 0; i < 40; i++)
    a.post(op(abi::kOpNop, i));
  const uint64_t posted_at = now;
  unsigned served = 0;
  while (served == 0 && now <= posted_at + kSweep) {
    now++;
    served = poll();
  }
  EXPECT_EQ(served, 32u) << "one budget at the sweep";
  EXPECT_LE(now, posted_at + kSweep);
  // What the budget left is the dataplane's to finish, without a mark or another sweep.
  now++;
  EXPECT_EQ(poll(), 8u);
  expect_in_order(a, next);
  EXPECT_EQ(next, 40u);
}

// A budget's worth per pass: what one mark announced is drained over the next passes.
TEST_F(AppPathTest, OneMarkDrainsThePipe) {
  SimApp a(1);
  a.use_summary();
  ASSERT_TRUE(path.attach(&a.dp, now));
  poll();
  for (uint64_t i = 0; i < 100; i++)
    a.post(op(abi::kOpNop, i));
  std::atomic_ref<uint64_t>(a.summary.ready).fetch_or(abi::submit_bit(SimApp::kSq));
  std::vector<unsigned> per_pass;
  for (int k = 0; k < 5; k++) {
    now++;
    per_pass.push_back(poll());
  }
  EXPECT_EQ(per_pass, (std::vector<unsigned>{32, 32, 32, 4, 0}));
  uint64_t next = 0;
  expect_in_order(a, next);
  EXPECT_EQ(next, 100u);
}

// Setting every bit on every pass buys nothing: the same budget per pass as an app that marks
// only when it posts, with the same backlog.
TEST_F(AppPathTest, AlwaysMarkedGainsNothing) {
  SimApp greedy(1, 4096, 8192), fair(2, 4096, 8192);
  greedy.use_summary();
  fair.use_summary();
  AppPath p(8, /*budget=*/8, kHz);
  ASSERT_TRUE(p.attach(&greedy.dp, now));
  ASSERT_TRUE(p.attach(&fair.dp, now));
  for (int i = 0; i < 1000; i++) {
    greedy.post(op(abi::kOpNop, i));
    fair.post_marked(op(abi::kOpNop, i));
  }
  uint64_t g = 0, f = 0;
  for (int pass = 0; pass < 50; pass++) {
    greedy.summary.ready = ~uint64_t{0};
    p.poll(now + 1 + pass);  // within one sweep interval after the first pass
    expect_in_order(greedy, g);
    expect_in_order(fair, f);
    EXPECT_EQ(g, f) << "pass " << pass;
  }
  EXPECT_EQ(g, 50u * 8u);
}

// Garbage in the word (bits of no pipe, of receive and completion pipes, cleared behind the
// dataplane's back) loses nothing and serves nothing twice: every request completes once, in
// order, within a sweep of being posted.
TEST_F(AppPathTest, GarbageInTheWordLosesNothing) {
  std::mt19937_64 rng(23);
  SimApp a(1, 256, 1024);
  a.use_summary();
  ASSERT_TRUE(path.attach(&a.dp, now));
  uint64_t posted = 0, next = 0;
  for (int pass = 0; pass < 2000; pass++) {
    for (uint64_t k = rng() % 4; k > 0; k--)
      posted += a.post(op(abi::kOpNop, posted));
    uint64_t w = rng();
    switch (rng() % 3) {
      case 0:
        w &= ~abi::submit_bit(SimApp::kSq);  // everything but the pipe's own bit
        break;
      case 1:
        w = 0;  // cleared
        break;
      default:
        break;  // anything
    }
    a.summary.ready = w;
    now += rng() % 8;
    poll();
    expect_in_order(a, next);
  }
  // The last ones under every bit but the pipe's own.
  for (int k = 0; k < 5; k++)
    posted += a.post(op(abi::kOpNop, posted));
  a.summary.ready = ~abi::submit_bit(SimApp::kSq);
  now += kSweep;
  for (int k = 0; k < 20; k++) {
    poll();
    now++;
  }
  expect_in_order(a, next);
  EXPECT_EQ(next, posted);
  EXPECT_EQ(a.dp.counters.errors_total, 0u);
}

// Pipes added after attach are in the app's submit list, removed ones leave it.
TEST_F(AppPathTest, SubmitListFollowsPipeTable) {
  SimApp a(1);
  a.use_summary();
  DpPipe sq = a.dp.pipes[SimApp::kSq];
  a.dp.pipes[SimApp::kSq] = DpPipe{};
  ASSERT_TRUE(path.attach(&a.dp, now));
  EXPECT_TRUE(a.dp.sqs.empty());
  ASSERT_TRUE(path.set_pipe(1, SimApp::kSq, sq));
  EXPECT_EQ(a.dp.sqs, (std::vector<uint16_t>{SimApp::kSq}));
  a.post_marked(op(abi::kOpNop, 1));
  EXPECT_EQ(poll(), 1u);
  ASSERT_TRUE(path.set_pipe(1, SimApp::kSq, DpPipe{}));
  EXPECT_TRUE(a.dp.sqs.empty());
  a.post_marked(op(abi::kOpNop, 2));
  now += kSweep;
  EXPECT_EQ(poll(), 0u);
}

}  // namespace
}  // namespace cleave::dp
