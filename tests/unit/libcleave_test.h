// libcleave_test.h - the fixture libcleave's tests share (libcleave_*_test.cc): a FakeDaemon
// (libcleave_fake_daemon.h), a context open on it, queues, and small helpers.
#pragma once

#include "libcleave_fake_daemon.h"

namespace cleave::test {

using Clock = std::chrono::steady_clock;
inline double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
inline double ms_since(Clock::time_point t) {
  return ms_between(t, Clock::now());
}

class LibTest : public ::testing::Test {
 protected:
  void start(FakeOptions o = {}) { d_ = std::make_unique<FakeDaemon>(o); }
  int open_ctx(cl_ctx** out) {
    cl_open_attr a{d_->path().c_str(), "libtest"};
    return cl_open(&a, out);
  }
  void SetUp() override {
    start();
    ASSERT_EQ(open_ctx(&ctx_), 0);
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      EXPECT_EQ(cl_close(ctx_), 0);
    }
    ctx_ = nullptr;
    d_.reset();
  }
  // A CQ of `cqe` entries with one SQ and one RQ of `qe` each.
  void make_queues(uint32_t cqe = 256, uint32_t qe = 64, int doorbell = 0) {
    ASSERT_EQ(cl_cq_create(ctx_, cqe, doorbell, 0, &cq_), 0);
    ASSERT_EQ(cl_sq_create(ctx_, cq_, qe, &sq_), 0);
    ASSERT_EQ(cl_rq_create(ctx_, cq_, qe, &rq_), 0);
  }
  // Polls until n completions arrived or 5 s passed.
  std::vector<cl_wc> poll_n(size_t n) {
    std::vector<cl_wc> out;
    auto t0 = Clock::now();
    while (out.size() < n && ms_since(t0) < 5000) {
      cl_wc wc[16];
      int got = cl_poll_cq(cq_, wc, 16);
      EXPECT_GE(got, 0);
      if (got < 0) break;
      out.insert(out.end(), wc, wc + got);
    }
    return out;
  }
  static int sealed_memfd(size_t len, bool sealable = true) {
    int fd = memfd_create("mr", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0));
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
    return fd;
  }

  std::unique_ptr<FakeDaemon> d_;
  cl_ctx* ctx_ = nullptr;
  cl_cq* cq_ = nullptr;
  cl_sq* sq_ = nullptr;
  cl_rq* rq_ = nullptr;
};

// An IPv4 address and port as a sockaddr_in.
inline sockaddr_in inet(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

}  // namespace cleave::test
