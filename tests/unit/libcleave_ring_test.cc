// libcleave_ring_test.cc - libcleave against a fake daemon: receive rings: chunks in ring order
// without a copy, partial release, end of stream, resets, refusals.
#include "libcleave_test.h"

namespace cleave::test {
namespace {

// ---- Receive rings ----

// A connected flow whose receives the fake holds (and its scripted peer fills), and a ring on it.
class RingTest : public LibTest {
 protected:
  void SetUp() override {
    LibTest::SetUp();
    d_->hold_recvs = true;
    make_queues(1024, 256);
    sockaddr_in peer = inet("198.18.0.2", 5002);
    ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &flow_), 0);
    auto wc = poll_n(1);
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wc[0].opcode, uint32_t{CL_EV_CONNECTED});
  }
  void TearDown() override {
    if (ring_ != nullptr) {
      int e = cl_ring_destroy(ring_);
      if (e == CL_EBUSY) {  // still posted: abort the flow, take the completions, then free it
        cl_send_wr a{.wr_id = 77, .opcode = CL_OP_FLOW_ABORT, .flow = flow_};
        EXPECT_EQ(cl_post_send(sq_, &a, 1), 1);
        EXPECT_TRUE(pump_until([&] { return (e = cl_ring_destroy(ring_)) != CL_EBUSY; }));
      }
      EXPECT_EQ(e, 0);
    }
    LibTest::TearDown();
  }
  int create(uint64_t size, uint32_t chunk, void* addr = nullptr, const cl_mr* mr = nullptr) {
    cl_ring_attr a{.sq = sq_, .flow = flow_, .mr = mr, .addr = addr, .size = size, .chunk = chunk};
    return cl_ring_create(ctx_, &a, &ring_);
  }
  // Polls the CQ, handing every completion to the ring; keeps what the ring left to the app.
  // Until `done` holds or `ms` passed.
  template <class F>
  bool pump_until(F done, double ms = 5000) {
    auto t0 = Clock::now();
    while (!done()) {
      if (ms_since(t0) > ms) return false;
      cl_wc wc[16];
      int got = cl_poll_cq(cq_, wc, 16);
      EXPECT_GE(got, 0);
      if (got < 0) return false;
      for (int i = 0; i < got; i++) {
        int r = cl_ring_consume(ring_, &wc[i]);
        EXPECT_GE(r, 0);
        if (r == 0) app_.push_back(wc[i]);
      }
    }
    return true;
  }
  // Waits until at least n bytes are readable (contiguously from the ring position).
  bool wait_readable(size_t n) {
    return pump_until([&] {
      size_t len = 0;
      cl_ring_recv(ring_, &len);
      return len >= n;
    });
  }
  // Reads exactly n bytes that must be at `want` and be stream bytes from `stream`, releases them.
  void take(size_t n, uint8_t* want, uint64_t stream) {
    ASSERT_TRUE(wait_readable(n)) << "waiting for " << n << " readable bytes";
    size_t len = 0;
    auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
    ASSERT_EQ(p, want);  // in place: the ring's own memory, no copy
    ASSERT_GE(len, n);
    for (size_t i = 0; i < n; i++)
      ASSERT_EQ(p[i], FakeDaemon::flow_byte(stream + i)) << "stream byte " << stream + i;
    ASSERT_EQ(cl_ring_recv_done(ring_, n), 0);
  }
  // The receives the ring posted so far: (offset, length) each.
  std::vector<std::pair<uint64_t, uint32_t>> posted() {
    std::vector<std::pair<uint64_t, uint32_t>> out;
    std::lock_guard lk(d_->rec_mu);
    for (const abi::SendEntry& e : d_->flow_entries)
      if (e.opcode == abi::kOpFlowRecv) out.emplace_back(e.offset, e.length);
    return out;
  }
  bool wait_posted(size_t n) {
    return pump_until([&] { return posted().size() >= n; });
  }

  cl_flow flow_ = 0;
  cl_ring* ring_ = nullptr;
  std::vector<cl_wc> app_;
};

class RingOrder : public RingTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RingOrder, WrapsAroundInRingOrderWithoutACopy) {
  d_->data_event_first = GetParam();
  auto* mem = static_cast<uint8_t*>(cl_alloc(ctx_, 10000, 4096));
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(create(10000, 4096, mem), 0);
  const uint64_t h = cl_heap_offset(ctx_, mem);
  ASSERT_TRUE(wait_posted(3));
  using P = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(posted(), (std::vector<P>{{h, 4096}, {h + 4096, 4096}, {h + 8192, 1808}}));

  d_->peer(flow_, FakeDaemon::Peer::kData, 6000);
  take(6000, mem, 0);  // chunk 0 full and released: posted again; chunk 1 part-filled
  ASSERT_TRUE(wait_posted(4));
  EXPECT_EQ(posted().back(), (P{h, 4096}));
  // 2192 finish chunk 1, 1808 fill chunk 2, 3000 go into chunk 0 again: past the ring's end.
  d_->peer(flow_, FakeDaemon::Peer::kData, 7000);
  ASSERT_TRUE(pump_until([&] {
    size_t len = 0;
    cl_ring_recv(ring_, &len);
    return len == 4000;
  }));
  take(4000, mem + 6000, 6000);  // up to the ring's end
  take(3000, mem, 10000);        // then the wrapped part from the ring's start
  size_t len = 99;
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // Chunks 1 and 2 are released and back: posted again, in ring order.
  ASSERT_TRUE(wait_posted(6));
  auto p = posted();
  EXPECT_EQ(p[4], (P{h + 4096, 4096}));
  EXPECT_EQ(p[5], (P{h + 8192, 1808}));
  EXPECT_TRUE(app_.empty());  // every completion was the ring's
}

INSTANTIATE_TEST_SUITE_P(DataEvent, RingOrder, ::testing::Values(false, true));

TEST_F(RingTest, PartialReleaseKeepsTheChunkUntilItIsWhollyReleased) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 8192);
  ASSERT_TRUE(wait_readable(8192));
  size_t len = 0;
  auto* base = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_EQ(cl_ring_recv_done(ring_, 4000), 0);
  // The peer has no room: the window is closed until a chunk is wholly released.
  d_->peer(flow_, FakeDaemon::Peer::kData, 100);
  EXPECT_FALSE(pump_until([&] { return posted().size() > 2; }, 100));
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  EXPECT_EQ(p, base + 4000);
  EXPECT_EQ(len, 4192u);
  ASSERT_EQ(cl_ring_recv_done(ring_, 96), 0);  // chunk 0 wholly released: posted again
  ASSERT_TRUE(wait_posted(3));
  d_->peer(flow_, FakeDaemon::Peer::kData, 5000);  // only chunk 0's 4096 fit
  take(4096, base + 4096, 4096);
  take(4096, base, 8192);
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
}

TEST_F(RingTest, EndOfStreamInAPartlyFilledChunk) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 5000);
  d_->peer(flow_, FakeDaemon::Peer::kFin);
  // Chunk 1 comes back short (904 bytes): the stream's end, known once it is back.
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) == 1; }));
  size_t len = 0;
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(len, 5000u);
  for (size_t i = 0; i < len; i++)
    ASSERT_EQ(p[i], FakeDaemon::flow_byte(i));
  ASSERT_EQ(cl_ring_recv_done(ring_, 5000), 0);
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(cl_ring_status(ring_), 1);
  EXPECT_EQ(posted().size(), 2u);  // nothing posted after the end
  EXPECT_EQ(cl_ring_recv_done(ring_, 1), CL_EINVAL);
  // The flow's clean end is the app's to see; the ring only notes it.
  d_->peer(flow_, FakeDaemon::Peer::kClose);
  ASSERT_TRUE(pump_until([&] { return !app_.empty(); }));
  EXPECT_EQ(app_[0].opcode, uint32_t{CL_EV_CLOSED});
  EXPECT_EQ(cl_ring_status(ring_), 1);
  EXPECT_EQ(cl_ring_destroy(ring_), 0);
  ring_ = nullptr;
}

TEST_F(RingTest, EndOfStreamOnAChunkBoundaryAfterReposting) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 8192);
  ASSERT_TRUE(wait_readable(8192));
  ASSERT_EQ(cl_ring_recv_done(ring_, 8192), 0);
  ASSERT_TRUE(wait_posted(4));
  EXPECT_EQ(cl_ring_status(ring_), 0);
  d_->peer(flow_, FakeDaemon::Peer::kFin);  // both reposted chunks come back empty
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) == 1; }));
  size_t len = 0;
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(posted().size(), 4u);
}

TEST_F(RingTest, ResetIsReportedAfterTheBytesBeforeIt) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 3000);
  ASSERT_TRUE(wait_readable(3000));
  d_->peer(flow_, FakeDaemon::Peer::kReset);
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) != 0; }));
  EXPECT_EQ(cl_ring_status(ring_), CL_ECONNRESET);
  ASSERT_TRUE(pump_until([&] { return !app_.empty(); }));
  EXPECT_EQ(app_[0].opcode, uint32_t{CL_EV_CLOSED});  // the app sees the flow end too
  EXPECT_EQ(app_[0].status, CL_ECONNRESET);
  size_t len = 0;
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(len, 3000u);  // what arrived before the reset stays readable
  EXPECT_EQ(p[2999], FakeDaemon::flow_byte(2999));
  ASSERT_EQ(cl_ring_recv_done(ring_, 3000), 0);
  EXPECT_EQ(posted().size(), 2u);  // nothing posted to a failed flow
  // After the close the ring takes no events of that flow id (it may be another flow's now).
  cl_wc ev{.status = 0, .length = 10, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &ev), 0);
  EXPECT_EQ(cl_ring_destroy(ring_), 0);
  ring_ = nullptr;
}

TEST_F(RingTest, AShortChunkAtAResetIsNoEndOfStream) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 6000);  // chunk 1 holds 1904 bytes
  ASSERT_TRUE(wait_readable(6000));
  d_->peer(flow_, FakeDaemon::Peer::kReset);  // chunk 1 back short (status 0), then closed
  // One completion at a time: between the short chunk and CL_EV_CLOSED the status must not
  // claim a clean end.
  std::vector<int> seen;
  auto t0 = Clock::now();
  while (cl_ring_status(ring_) == 0 && ms_since(t0) < 5000) {
    cl_wc wc;
    if (cl_poll_cq(cq_, &wc, 1) != 1) continue;
    cl_ring_consume(ring_, &wc);
    seen.push_back(cl_ring_status(ring_));
  }
  ASSERT_GE(seen.size(), 2u);  // the short chunk, then the close
  EXPECT_EQ(seen[0], 0);
  EXPECT_EQ(seen.back(), CL_ECONNRESET);
  size_t len = 0;
  cl_ring_recv(ring_, &len);
  EXPECT_EQ(len, 6000u);
}

TEST_F(RingTest, RingSmallerThanTwoChunksIsCutInHalves) {
  ASSERT_EQ(create(1001, 0), 0);  // the default chunk is larger
  ASSERT_TRUE(wait_posted(2));
  using P = std::pair<uint64_t, uint32_t>;
  auto p = posted();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].second, 501u);
  EXPECT_EQ(p[1], (P{p[0].first + 501, 500}));
  d_->peer(flow_, FakeDaemon::Peer::kData, 2500);  // 1001 fit
  ASSERT_TRUE(wait_readable(1001));
  size_t len = 0;
  auto* base = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  EXPECT_EQ(len, 1001u);
  ASSERT_EQ(cl_ring_recv_done(ring_, 500), 0);
  EXPECT_FALSE(pump_until([&] { return posted().size() > 2; }, 50));
  ASSERT_EQ(cl_ring_recv_done(ring_, 1), 0);  // the first half wholly released
  ASSERT_TRUE(wait_posted(3));
  d_->peer(flow_, FakeDaemon::Peer::kData, 1000);  // 501 fit
  take(500, base + 501, 501);
  take(501, base, 1001);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // A one-byte ring is one chunk: it cannot be cut.
  cl_ring* one = nullptr;
  cl_ring_attr a{.sq = sq_, .flow = flow_ + 1, .size = 1};
  ASSERT_EQ(cl_ring_create(ctx_, &a, &one), 0);
  ASSERT_TRUE(wait_posted(6));
  EXPECT_EQ(posted().back().second, 1u);
  EXPECT_EQ(cl_ring_destroy(one), CL_EBUSY);  // still posted: cl_close frees it
}

TEST_F(RingTest, AFullSubmitQueueIsRetriedLater) {
  d_->pump = false;  // the fake takes nothing off the submit queue for now
  ASSERT_EQ(create(300 * 100, 100), 0);
  EXPECT_EQ(posted().size(), 0u);
  d_->pump = true;
  // 256 went in at creation; the other 44 follow from a later call once there is room.
  ASSERT_TRUE(pump_until([&] {
    size_t len = 0;
    cl_ring_recv(ring_, &len);
    return posted().size() == 300;
  }));
  d_->peer(flow_, FakeDaemon::Peer::kData, 30000);
  ASSERT_TRUE(wait_readable(30000));
  EXPECT_EQ(cl_ring_status(ring_), 0);
}

TEST_F(RingTest, OnlyItsOwnCompletionsAreTaken) {
  ASSERT_EQ(create(8192, 4096), 0);
  cl_wc other{.wr_id = 5, .opcode = CL_OP_FLOW_RECV, .flow = flow_};  // the app's own wr_id
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.wr_id = 0, .length = 5, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_ + 1};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.opcode = CL_EV_CONNECTED, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.opcode = CL_OP_FLOW_SEND, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // More data reported than the ring has posted: another receiver on the flow.
  other = {.length = 1u << 20, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 1);
  EXPECT_EQ(cl_ring_status(ring_), CL_EPROTO);
}

TEST_F(RingTest, BadArgumentsAreRefusedAndNothingIsPosted) {
  cl_ring* r = reinterpret_cast<cl_ring*>(0x1);
  cl_ring_attr a{.sq = sq_, .flow = flow_, .size = 4096};
  EXPECT_EQ(cl_ring_create(ctx_, &a, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_create(nullptr, &a, &r), CL_EINVAL);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(cl_ring_create(ctx_, nullptr, &r), CL_EINVAL);
  cl_ring_attr b = a;
  b.sq = nullptr;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 0;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 4097 * 64;
  b.chunk = 64;  // 4097 chunks
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 1ull << 40;  // more than the heap
  b.chunk = 1u << 30;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_ENOMEM);
  auto* mem = static_cast<uint8_t*>(cl_alloc(ctx_, 8192, 0));
  b = a;
  b.addr = mem;
  b.size = (1u << 20) * 2;  // runs past the heap's end
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  uint8_t outside[64];
  b = a;
  b.addr = outside;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  int fd = sealed_memfd(1u << 16);
  cl_mr* ro = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ, &ro), 0);
  b = a;
  b.mr = ro;
  b.addr = cl_mr_addr(ro);
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EACCES);
  b.addr = nullptr;  // the library allocates from the heap only
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b.addr = static_cast<uint8_t*>(cl_mr_addr(ro)) + (1u << 16) - 100;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(posted().size(), 0u);

  size_t len = 7;
  EXPECT_EQ(cl_ring_recv(nullptr, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(cl_ring_recv_done(nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_ring_status(nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_destroy(nullptr), CL_EINVAL);
  cl_wc wc{};
  EXPECT_EQ(cl_ring_consume(nullptr, &wc), CL_EINVAL);

  // A good ring in an MR: more released than readable is refused and changes nothing; a ring
  // still posted to an open flow is not freed.
  int wfd = sealed_memfd(1u << 16);
  cl_mr* rw = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, wfd, 1u << 16, CL_ACCESS_WRITE, &rw), 0);
  ASSERT_EQ(create(8192, 4096, static_cast<uint8_t*>(cl_mr_addr(rw)) + 4096, rw), 0);
  ASSERT_TRUE(wait_posted(2));
  {
    std::lock_guard lk(d_->rec_mu);
    EXPECT_EQ(d_->flow_entries[0].mr, cl_mr_id(rw));
    EXPECT_EQ(d_->flow_entries[0].offset, 4096u);
  }
  EXPECT_EQ(cl_ring_consume(ring_, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_recv(ring_, nullptr), nullptr);
  EXPECT_EQ(cl_ring_recv_done(ring_, 1), CL_EINVAL);
  d_->peer(flow_, FakeDaemon::Peer::kData, 10);
  ASSERT_TRUE(wait_readable(10));
  EXPECT_EQ(cl_ring_recv_done(ring_, 11), CL_EINVAL);
  EXPECT_EQ(cl_ring_recv(ring_, &len), static_cast<uint8_t*>(cl_mr_addr(rw)) + 4096);
  EXPECT_EQ(len, 10u);
  EXPECT_EQ(cl_ring_destroy(ring_), CL_EBUSY);  // TearDown aborts the flow, then frees it
  close(fd);
  close(wfd);
}

}  // namespace
}  // namespace cleave::test
