// libcleave_daemon_test.cc - libcleave against a fake daemon: a daemon that dies, evicts the app,
// hangs or misbehaves.
#include "libcleave_test.h"

namespace cleave::test {
namespace {

// ---- The daemon goes away ----

TEST_F(LibTest, SpinningPollerSeesDaemonDeathWithinASecond) {
  make_queues();
  std::atomic<int> result{1};
  std::atomic<bool> polling{false};
  Clock::time_point done;
  std::thread t([&] {
    cl_wc wc[8];
    int r;
    polling = true;
    while ((r = cl_poll_cq(cq_, wc, 8)) >= 0) {
    }
    done = Clock::now();
    result = r;
  });
  while (!polling)
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto t0 = Clock::now();
  d_->kill();
  t.join();
  EXPECT_EQ(result, CL_EDAEMON);
  EXPECT_LT(ms_between(t0, done), 1000.0);
  // Sticky: every later call fails the same way.
  cl_send_wr w{};
  EXPECT_EQ(cl_post_send(sq_, &w, 1), CL_EDAEMON);
  cl_recv_wr r{1, nullptr, 0, 8};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EDAEMON);
  EXPECT_EQ(cl_cq_wait(cq_, 0), CL_EDAEMON);
  EXPECT_EQ(cl_alloc(ctx_, 64, 0), nullptr);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EDAEMON);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  close(fd);
}

class WaitForever : public LibTest, public ::testing::WithParamInterface<int> {};

TEST_P(WaitForever, ReturnsWhenTheDaemonDies) {
  make_queues(256, 64, GetParam());
  std::atomic<int> result{1};
  Clock::time_point done;
  std::thread t([&] {
    result = cl_cq_wait(cq_, -1);
    done = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(result, 1);  // still waiting
  auto t0 = Clock::now();
  d_->kill();
  t.join();
  EXPECT_EQ(result, CL_EDAEMON);
  EXPECT_LT(ms_between(t0, done), 1000.0);
}
INSTANTIATE_TEST_SUITE_P(Doorbell, WaitForever, ::testing::Values(0, 1));

TEST_F(LibTest, ControlCallInFlightWhenTheDaemonDies) {
  d_->stall_on = static_cast<uint16_t>(abi::MsgType::kMrReg);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  auto t0 = Clock::now();
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  EXPECT_LT(ms_since(t0), 1000.0);
  EXPECT_GE(ms_since(t0), 150.0);  // it did wait for the reply until the daemon went
  EXPECT_EQ(mr, nullptr);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EDAEMON);
  close(fd);
}

TEST_F(LibTest, EvictionNoticeFailsThePoller) {
  make_queues();
  std::atomic<int> result{1};
  std::thread t([&] {
    cl_wc wc[8];
    int r;
    while ((r = cl_poll_cq(cq_, wc, 8)) >= 0) {
    }
    result = r;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  d_->evict();
  t.join();
  EXPECT_EQ(result, CL_EEVICTED);
  EXPECT_EQ(cl_cq_wait(cq_, -1), CL_EEVICTED);
  cl_send_wr w{};
  EXPECT_EQ(cl_post_send(sq_, &w, 1), CL_EEVICTED);
}

TEST_F(LibTest, EvictionNoticeWakesASleeper) {
  make_queues(256, 64, 1);
  std::atomic<int> result{1};
  std::thread t([&] { result = cl_cq_wait(cq_, -1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  d_->evict();
  t.join();
  EXPECT_EQ(result, CL_EEVICTED);
}

TEST_F(LibTest, NoticeInPlaceOfAReply) {
  d_->notice_on = static_cast<uint16_t>(abi::MsgType::kPipeCreate);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EEVICTED);
  EXPECT_EQ(cl_alloc(ctx_, 64, 0), nullptr);
}

TEST_F(LibTest, ShutdownNoticeIsDaemonGone) {
  make_queues(256, 64, 1);
  d_->shutdown();
  EXPECT_EQ(cl_cq_wait(cq_, 5000), CL_EDAEMON);
}

TEST_F(LibTest, CloseWithEverythingOpenReclaims) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), 0);
  EXPECT_NE(cl_alloc(ctx_, 1000, 0), nullptr);
  EXPECT_EQ(cl_close(ctx_), 0);
  ctx_ = nullptr;
  auto t0 = Clock::now();
  while ((d_->live_mrs != 0 || d_->live_pipes != 0) && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(d_->live_mrs, 0);  // the daemon saw EOF and reclaimed
  EXPECT_EQ(d_->live_pipes, 0);
  close(fd);
}

// ---- A daemon that hangs or misbehaves ----

TEST_F(LibTest, HungDaemonTimesOutTheControlCall) {
  // A context opened with $CLEAVE_CTL_TIMEOUT_MS set waits that long, not the default 30 s.
  ASSERT_EQ(cl_close(ctx_), 0);
  ctx_ = nullptr;
  start();  // a fresh fake daemon: it serves one app
  setenv("CLEAVE_CTL_TIMEOUT_MS", "1000", 1);
  int opened = open_ctx(&ctx_);
  unsetenv("CLEAVE_CTL_TIMEOUT_MS");
  ASSERT_EQ(opened, 0);
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  d_->ignore_on = static_cast<uint16_t>(abi::MsgType::kMrReg);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  auto t0 = Clock::now();
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  EXPECT_GE(ms_since(t0), 950.0);
  EXPECT_LT(ms_since(t0), 20000.0);  // the configured timeout, not the default
  // The library hung up, so the daemon reclaims what the app had.
  t0 = Clock::now();
  while (d_->live_pipes != 0 && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(d_->live_pipes, 0);
  cl_wc wc;
  EXPECT_EQ(cl_poll_cq(cq, &wc, 1), CL_EDAEMON);
  close(fd);
}

TEST_F(LibTest, ReplyWithTheWrongSeqPoisonsTheContext) {
  d_->wrong_seq = true;
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);
  d_->wrong_seq = false;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);  // sticky: replies can't be matched
}

TEST_F(LibTest, PipeOutsideThePipeAreaIsRefused) {
  d_->bad_pipe_offset = true;
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);
  EXPECT_EQ(cq, nullptr);
}

size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    n++;
  }
  return n;
}

TEST_F(LibTest, StrayDescriptorsFromTheDaemonAreClosed) {
  d_->extra_fds = true;
  size_t before = open_fds();
  for (int i = 0; i < 10; i++) {
    cl_cq* cq = nullptr;
    ASSERT_EQ(cl_cq_create(ctx_, 64, 1, 0, &cq), 0);
    ASSERT_EQ(cl_cq_destroy(cq), 0);
  }
  EXPECT_EQ(open_fds(), before);
  // And at open, where the region fd comes with the strays.
  FakeDaemon d2;
  d2.extra_fds = true;
  before = open_fds();
  cl_ctx* other = nullptr;
  cl_open_attr a{d2.path().c_str(), "strays"};
  ASSERT_EQ(cl_open(&a, &other), 0);
  EXPECT_EQ(cl_close(other), 0);
  // d2 keeps its region memfd; its connection goes once it has seen the EOF.
  auto t0 = Clock::now();
  while (open_fds() != before + 1 && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(open_fds(), before + 1);
}

// Control calls from several threads while each also posts and polls its own queues.
TEST_F(LibTest, ControlAndDataFromManyThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (int round = 0; round < 20; round++) {
        cl_cq* cq = nullptr;
        cl_sq* sq = nullptr;
        cl_mr* mr = nullptr;
        int fd = sealed_memfd(4096);
        if (cl_cq_create(ctx_, 64, round & 1, 0, &cq) != 0 ||
            cl_sq_create(ctx_, cq, 64, &sq) != 0 ||
            cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr) != 0) {
          failures++;
          close(fd);
          return;
        }
        cl_send_wr w[10]{};
        for (int i = 0; i < 10; i++) {
          w[i].wr_id = static_cast<uint64_t>(t) * 1000 + uint64_t(i);
          w[i].opcode = CL_OP_COPY;
          w[i].mr = mr;
          w[i].dst_mr = mr;
          w[i].dst_offset = 2048;
          w[i].length = 64;
        }
        if (cl_post_send(sq, w, 10) != 10) failures++;
        int got = 0;
        auto t0 = Clock::now();
        while (got < 10 && ms_since(t0) < 5000) {
          if (cl_cq_wait(cq, 100) < -200) break;
          cl_wc wc[10];
          int n = cl_poll_cq(cq, wc, 10);
          for (int i = 0; i < n; i++) {
            if (wc[i].status != 0 ||
                wc[i].wr_id != static_cast<uint64_t>(t) * 1000 + uint64_t(got + i))
              failures++;
          }
          got += n > 0 ? n : 0;
        }
        if (got != 10) failures++;
        if (cl_sq_destroy(sq) != 0 || cl_cq_destroy(cq) != 0 || cl_mr_dereg(mr) != 0) failures++;
        close(fd);
      }
    });
  }
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(d_->live_pipes, 0);
  EXPECT_EQ(d_->live_mrs, 0);
}

}  // namespace
}  // namespace cleave::test
