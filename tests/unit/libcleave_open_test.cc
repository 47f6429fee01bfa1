// libcleave_open_test.cc - libcleave against a fake daemon: open, the heap, memory regions, queues,
// post and poll round trips through the fake daemon, and what the library refuses before posting.
#include "libcleave_test.h"

namespace cleave::test {
namespace {

// ---- Context ----

TEST_F(LibTest, OpenGivesTheDaemonsAppId) {
  EXPECT_EQ(cl_app_id(ctx_), 7u);
}

TEST(LibOpen, NoDaemonIsEnoentAtOnce) {
  cl_open_attr a{"/tmp/cleave-no-such-daemon.sock", nullptr};
  cl_ctx* ctx = reinterpret_cast<cl_ctx*>(0x1);
  auto t0 = Clock::now();
  EXPECT_EQ(cl_open(&a, &ctx), CL_ENOENT);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_LT(ms_since(t0), 100.0);
  // A socket file with nobody listening: refused, also CL_ENOENT.
  std::string p = "/tmp/cleave-dead-" + std::to_string(getpid()) + ".sock";
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p.c_str());
  unlink(p.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  close(fd);
  a.socket_path = p.c_str();
  EXPECT_EQ(cl_open(&a, &ctx), CL_ENOENT);
  unlink(p.c_str());
}

TEST(LibOpen, SocketPathFromEnvironment) {
  FakeDaemon d;
  setenv("CLEAVE_APP_SOCKET", d.path().c_str(), 1);
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(nullptr, &ctx), 0);
  unsetenv("CLEAVE_APP_SOCKET");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(cl_close(ctx), 0);
}

TEST(LibOpen, NoCommonVersionIsEversion) {
  FakeOptions o;
  o.min_version = abi::kAbiVersion + 1;
  o.max_version = abi::kAbiVersion + 2;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "old"};
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(&a, &ctx), CL_EVERSION);
  EXPECT_EQ(ctx, nullptr);
}

TEST(LibOpen, RefusedPeerIsEperm) {
  FakeOptions o;
  o.hello_status = CL_EPERM;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "nobody"};
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(&a, &ctx), CL_EPERM);
}

// A daemon that refuses the connection as it accepts it (Notice kRefused) once the app's hello is
// waiting unread: closing then resets the app's socket, and the reset, reported first, must not
// hide the notice behind it.
TEST(LibOpen, RefusalAtAcceptIsReadBehindTheReset) {
  for (int32_t why : {CL_EPERM, CL_EAGAIN}) {
    std::string path = "/tmp/cleave-refuse-" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    std::thread daemon([&] {
      int fd = accept(lfd, nullptr, nullptr);
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 5000);  // the hello is there, unread
      abi::Notice n{};
      n.h = {abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(abi::MsgType::kNotice), 0, why};
      n.reason = static_cast<uint32_t>(abi::NoticeReason::kRefused);
      send(fd, &n, sizeof n, MSG_NOSIGNAL);
      close(fd);
    });
    cl_open_attr attr{path.c_str(), "refused"};
    cl_ctx* ctx = nullptr;
    EXPECT_EQ(cl_open(&attr, &ctx), why);
    EXPECT_EQ(ctx, nullptr);
    daemon.join();
    close(lfd);
    unlink(path.c_str());
  }
}

TEST(LibOpen, EveryCodeHasItsOwnName) {
  const int codes[] = {CL_OK,         CL_EPERM,   CL_ENOENT,     CL_EAGAIN,       CL_ENOMEM,
                       CL_EACCES,     CL_EFAULT,  CL_EBUSY,      CL_EINVAL,       CL_ENOSPC,
                       CL_EPIPE,      CL_EPROTO,  CL_EOPNOTSUPP, CL_EADDRINUSE,   CL_ENETUNREACH,
                       CL_ECONNRESET, CL_ENOBUFS, CL_ETIMEDOUT,  CL_ECONNREFUSED, CL_EHOSTUNREACH,
                       CL_EDQUOT,     CL_EDAEMON, CL_EVERSION,   CL_EEVICTED,     CL_ENORECV,
                       CL_ETRUNC,     CL_EIO,     CL_ECANCELED};
  std::set<std::string> names;
  for (int c : codes) {
    std::string s = cl_strerror(c);
    EXPECT_NE(s, cl_strerror(12345)) << c;
    names.insert(s);
  }
  EXPECT_EQ(names.size(), std::size(codes));
  // A flow's status may be any negated errno a transport reports: named by the C library.
  EXPECT_STREQ(cl_strerror(-ECONNABORTED), "Software caused connection abort");
  EXPECT_STREQ(cl_strerror(-4096), cl_strerror(12345));
}

// ---- Heap ----

TEST_F(LibTest, HeapAlignsAndExhaustsAndCoalesces) {
  void* a = cl_alloc(ctx_, 100, 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  void* b = cl_alloc(ctx_, 10, 4096);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  EXPECT_EQ(cl_alloc(ctx_, 10, 3), nullptr);  // not a power of two
  EXPECT_EQ(cl_alloc(ctx_, 0, 0), nullptr);
  EXPECT_EQ(cl_heap_offset(ctx_, a), 0u);
  EXPECT_EQ(cl_heap_offset(ctx_, &a), UINT64_MAX);
  EXPECT_EQ(cl_alloc(ctx_, 1u << 20, 0), nullptr);  // the heap is 1 MiB and part is used
  cl_free(ctx_, a);
  cl_free(ctx_, a);  // a double free is ignored
  cl_free(ctx_, b);
  // Everything merged back: the whole heap in one block, then nothing.
  void* all = cl_alloc(ctx_, 1u << 20, 0);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(cl_alloc(ctx_, 1, 0), nullptr);
  cl_free(ctx_, all);
  // Exhaustion by many small blocks, then all freed in a scattered order.
  std::vector<void*> v;
  for (void* p; (p = cl_alloc(ctx_, 4096, 0)) != nullptr;)
    v.push_back(p);
  EXPECT_EQ(v.size(), 256u);
  for (size_t i = 0; i < v.size(); i += 2)
    cl_free(ctx_, v[i]);
  EXPECT_EQ(cl_alloc(ctx_, 8192, 0), nullptr);  // fragmented: no two neighbours free
  for (size_t i = 1; i < v.size(); i += 2)
    cl_free(ctx_, v[i]);
  all = cl_alloc(ctx_, 1u << 20, 0);
  EXPECT_NE(all, nullptr);
  cl_free(ctx_, all);
}

TEST_F(LibTest, HeapIsSafeForManyThreads) {
  constexpr int kThreads = 4, kOps = 3000;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<uint8_t*, size_t>> mine;
      for (int i = 0; i < kOps; i++) {
        if (mine.size() < 16 && rng() % 3 != 0) {
          size_t n = 1 + rng() % 8000;
          auto* p = static_cast<uint8_t*>(cl_alloc(ctx_, n, size_t{64} << (rng() % 4)));
          if (p == nullptr) continue;
          std::memset(p, t + 1, n);
          mine.emplace_back(p, n);
        } else if (!mine.empty()) {
          size_t k = rng() % mine.size();
          auto [p, n] = mine[k];
          for (size_t j = 0; j < n; j++) {
            if (p[j] != t + 1) {
              bad++;
              break;
            }
          }
          cl_free(ctx_, p);
          mine.erase(mine.begin() + static_cast<long>(k));
        }
      }
      for (auto [p, n] : mine)
        cl_free(ctx_, p);
    });
  }
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(bad, 0);  // no block was handed to two threads at once
  void* all = cl_alloc(ctx_, 1u << 20, 0);
  EXPECT_NE(all, nullptr);
  cl_free(ctx_, all);
}

// ---- Memory regions ----

TEST_F(LibTest, MrRegisterUseDeregister) {
  int fd = sealed_memfd(8192);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 8192, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  EXPECT_GE(cl_mr_id(mr), 1u);
  EXPECT_EQ(cl_mr_length(mr), 8192u);
  EXPECT_EQ(d_->live_mrs, 1);
  EXPECT_EQ(d_->unsealed_mrs, 0);
  // The library's mapping is the memfd's memory.
  std::memcpy(cl_mr_addr(mr), "hello", 5);
  char buf[5];
  ASSERT_EQ(pread(fd, buf, 5, 0), 5);
  EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
  // Sealed: the app can no longer shrink it under the daemon.
  EXPECT_NE(ftruncate(fd, 4096), 0);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  EXPECT_EQ(d_->live_mrs, 0);
  close(fd);
}

TEST_F(LibTest, MrRefusesWhatItCannotSealOrMap) {
  cl_mr* mr = nullptr;
  int unsealable = sealed_memfd(4096, false);
  EXPECT_EQ(cl_mr_reg(ctx_, unsealable, 4096, CL_ACCESS_READ, &mr), CL_EINVAL);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_EQ(cl_mr_reg(ctx_, fds[0], 4096, CL_ACCESS_READ, &mr), CL_EINVAL);
  int fd = sealed_memfd(4096);
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 8192, CL_ACCESS_READ, &mr), CL_EINVAL);  // shorter than asked
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 0, CL_ACCESS_READ, &mr), CL_EINVAL);
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, 1u << 7, &mr), CL_EINVAL);  // unknown access bit
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(d_->live_mrs, 0);
  EXPECT_EQ(d_->unsealed_mrs, 0);  // nothing unsealed ever reached the daemon
  for (int f : {unsealable, fds[0], fds[1], fd})
    close(f);
}

// ---- Queues ----

TEST_F(LibTest, QueueCreationRules) {
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 100, 0, 0, &cq), CL_EINVAL);  // not a power of two
  EXPECT_EQ(cl_cq_create(ctx_, 32, 0, 0, &cq), CL_EINVAL);   // below the minimum
  EXPECT_EQ(cl_cq_create(ctx_, 1u << 17, 0, 0, &cq), CL_EINVAL);
  ASSERT_EQ(cl_cq_create(ctx_, 128, 0, 0, &cq), 0);
  cl_sq* sq = nullptr;
  cl_rq* rq = nullptr;
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq), 0);
  EXPECT_EQ(cl_rq_create(ctx_, cq, 128, &rq), CL_EINVAL);  // 64 + 128 > 128
  ASSERT_EQ(cl_rq_create(ctx_, cq, 64, &rq), 0);
  cl_sq* sq2 = nullptr;
  EXPECT_EQ(cl_sq_create(ctx_, cq, 64, &sq2), CL_EINVAL);  // full
  EXPECT_EQ(cl_cq_destroy(cq), CL_EBUSY);
  EXPECT_EQ(d_->live_pipes, 3);
  EXPECT_EQ(cl_sq_destroy(sq), 0);
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq2), 0);  // the room came back
  EXPECT_EQ(cl_sq_destroy(sq2), 0);
  EXPECT_EQ(cl_rq_destroy(rq), 0);
  EXPECT_EQ(cl_cq_destroy(cq), 0);
  EXPECT_EQ(d_->live_pipes, 0);
}

TEST_F(LibTest, QuotaOnPipeEntries) {
  TearDown();
  FakeOptions o;
  o.pipe_entries_quota = 128;
  start(o);
  ASSERT_EQ(open_ctx(&ctx_), 0);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 256, 0, 0, &cq), CL_EDQUOT);
  EXPECT_EQ(cl_cq_create(ctx_, 128, 0, 0, &cq), 0);
}

// ---- Post and poll through the fake daemon ----

TEST_F(LibTest, NopCopyAndSendRoundTrip) {
  make_queues();
  auto* src = static_cast<uint8_t*>(cl_alloc(ctx_, 4096, 0));
  ASSERT_NE(src, nullptr);
  for (int i = 0; i < 4096; i++)
    src[i] = static_cast<uint8_t>(i * 7);
  int fd = sealed_memfd(1u << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);

  cl_send_wr w[2]{};
  w[0].wr_id = 11;
  w[0].opcode = CL_OP_NOP;
  w[1].wr_id = 12;
  w[1].opcode = CL_OP_COPY;
  w[1].offset = cl_heap_offset(ctx_, src);
  w[1].length = 4096;
  w[1].dst_mr = mr;
  w[1].dst_offset = 100;
  ASSERT_EQ(cl_post_send(sq_, w, 2), 2);
  auto wc = poll_n(2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(wc[0].status, 0);
  EXPECT_EQ(wc[1].wr_id, 12u);
  EXPECT_EQ(wc[1].status, 0);
  EXPECT_EQ(wc[1].length, 4096u);
  EXPECT_EQ(wc[1].opcode, uint32_t{CL_OP_COPY});
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(cl_mr_addr(mr)) + 100, src, 4096), 0);

  // SEND into receive buffers in the MR, several laps of the 64-entry queues, so the wr_id map
  // wraps; wr_ids are scattered so a mix-up shows.
  auto* dst = static_cast<uint8_t*>(cl_mr_addr(mr));
  uint32_t sends = 0, recvs = 0;
  for (int round = 0; round < 10; round++) {
    cl_recv_wr r[40];
    for (int i = 0; i < 40; i++)
      r[i] = {0x9000'0000ull + round * 1000 + i * 3, mr, static_cast<uint64_t>(i) * 1024, 1024};
    ASSERT_EQ(cl_post_recv(rq_, r, 40), 40);
    cl_send_wr s[40]{};
    for (int i = 0; i < 40; i++) {
      s[i].wr_id = round * 1000 + i;
      s[i].opcode = CL_OP_SEND;
      s[i].offset = cl_heap_offset(ctx_, src) + i;
      s[i].length = 100 + i;
      s[i].target = rq_;
      s[i].imm = 0xabc0 + i;
    }
    ASSERT_EQ(cl_post_send(sq_, s, 40), 40);
    auto got = poll_n(80);
    ASSERT_EQ(got.size(), 80u);
    for (const cl_wc& c : got) {
      EXPECT_EQ(c.status, 0);
      if (c.flags & CL_WC_RECV) {
        uint64_t i = (c.wr_id - 0x9000'0000ull - round * 1000) / 3;
        ASSERT_LT(i, 40u);
        EXPECT_EQ(c.wr_id, 0x9000'0000ull + round * 1000 + i * 3);
        EXPECT_EQ(c.length, 100 + i);
        EXPECT_EQ(c.imm, 0xabc0 + i);
        EXPECT_TRUE(c.flags & CL_WC_IMM);
        EXPECT_EQ(std::memcmp(dst + i * 1024, src + i, 100 + i), 0);
        recvs++;
      } else {
        EXPECT_EQ(c.opcode, uint32_t{CL_OP_SEND});
        EXPECT_EQ(c.wr_id % 1000, c.length - 100);
        sends++;
      }
    }
  }
  EXPECT_EQ(sends, 400u);
  EXPECT_EQ(recvs, 400u);

  // No buffer posted: the send completes with CL_ENORECV.
  cl_send_wr s{};
  s.wr_id = 99;
  s.opcode = CL_OP_SEND;
  s.length = 10;
  s.target = rq_;
  ASSERT_EQ(cl_post_send(sq_, &s, 1), 1);
  auto last = poll_n(1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].status, CL_ENORECV);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  close(fd);
}

// The daemon refuses to deregister an MR its flows still use: the handle stays valid, and a
// later deregistration succeeds.
TEST_F(LibTest, MrDeregRefusedKeepsTheHandle) {
  int fd = sealed_memfd(1 << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1 << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  static_cast<char*>(cl_mr_addr(mr))[0] = 'x';
  d_->mrs_busy = true;
  EXPECT_EQ(cl_mr_dereg(mr), CL_EBUSY);
  EXPECT_EQ(d_->live_mrs.load(), 1);
  EXPECT_EQ(static_cast<char*>(cl_mr_addr(mr))[0], 'x');  // still mapped
  d_->mrs_busy = false;
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  EXPECT_EQ(d_->live_mrs.load(), 0);
  close(fd);
}

TEST_F(LibTest, LibraryRejectsBadRequestsBeforePosting) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  cl_send_wr ok{};
  ok.opcode = CL_OP_NOP;
  auto bad = [&](auto edit) {
    cl_send_wr w[2] = {ok, ok};
    w[1].opcode = CL_OP_COPY;
    w[1].mr = ro;
    w[1].length = 16;
    w[1].dst_mr = wo;
    edit(w[1]);
    return cl_post_send(sq_, w, 2);
  };
  EXPECT_EQ(bad([](cl_send_wr&) {}), 2);  // the base case is fine
  EXPECT_EQ(bad([](cl_send_wr& w) { w.offset = 4090; }), CL_EFAULT);
  EXPECT_EQ(bad([](cl_send_wr& w) { w.dst_offset = UINT64_MAX - 4; }), CL_EFAULT);
  EXPECT_EQ(bad([](cl_send_wr& w) { w.offset = 4096, w.length = 0; }), 2);  // empty at the end
  EXPECT_EQ(bad([](cl_send_wr& w) { w.mr = nullptr, w.offset = 2u << 20; }), CL_EFAULT);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.dst_mr = ro; }), CL_EACCES);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.mr = wo; }), CL_EACCES);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.opcode = CL_OP_SEND, w.mr = nullptr; }), CL_EINVAL);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.opcode = 9; }), CL_EOPNOTSUPP);
  cl_recv_wr r{1, ro, 0, 16};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EACCES);
  r = {1, wo, 4000, 200};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EFAULT);
  // Another context's MR is not ours.
  cl_ctx* other = nullptr;
  FakeDaemon d2;
  cl_open_attr a{d2.path().c_str(), "other"};
  ASSERT_EQ(cl_open(&a, &other), 0);
  cl_mr* foreign = nullptr;
  int fd2 = sealed_memfd(4096);
  ASSERT_EQ(cl_mr_reg(other, fd2, 4096, CL_ACCESS_READ, &foreign), 0);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.mr = foreign; }), CL_EINVAL);
  EXPECT_EQ(cl_close(other), 0);
  close(fd2);
  // Only the two accepted calls reached the daemon, two entries each.
  auto wc = poll_n(4);
  EXPECT_EQ(wc.size(), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cl_wc extra;
  EXPECT_EQ(cl_poll_cq(cq_, &extra, 1), 0);
  EXPECT_EQ(d_->entries_seen, 4u);
  close(fd);
}

TEST_F(LibTest, FullQueueTakesWhatFits) {
  make_queues();
  d_->pump = false;
  std::vector<cl_send_wr> w(100);
  for (auto& x : w)
    x.opcode = CL_OP_NOP;
  EXPECT_EQ(cl_post_send(sq_, w.data(), 100), 64);
  EXPECT_EQ(cl_post_send(sq_, w.data(), 1), 0);
  std::vector<cl_recv_wr> r(70, cl_recv_wr{5, nullptr, 0, 64});
  EXPECT_EQ(cl_post_recv(rq_, r.data(), 70), 64);
  d_->pump = true;
  EXPECT_EQ(poll_n(64).size(), 64u);
  EXPECT_EQ(cl_post_send(sq_, w.data(), 1), 1);
}

TEST_F(LibTest, WaitSleepsOnTheDoorbellAndTimesOut) {
  make_queues(256, 64, 1);
  auto t0 = Clock::now();
  EXPECT_EQ(cl_cq_wait(cq_, 50), CL_ETIMEDOUT);
  EXPECT_GE(ms_since(t0), 49.0);
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cl_send_wr w{};
    w.wr_id = 5;
    w.opcode = CL_OP_NOP;
    EXPECT_EQ(cl_post_send(sq_, &w, 1), 1);
  });
  t0 = Clock::now();
  EXPECT_EQ(cl_cq_wait(cq_, 5000), 0);
  EXPECT_LT(ms_since(t0), 1000.0);
  poster.join();
  cl_wc wc;
  EXPECT_EQ(cl_poll_cq(cq_, &wc, 1), 1);
  EXPECT_EQ(wc.wr_id, 5u);
}

}  // namespace
}  // namespace cleave::test
