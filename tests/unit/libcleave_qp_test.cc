// libcleave_qp_test.cc - libcleave against a fake daemon: queue pairs: create, modify, query,
// connect, the entries their work requests make, and cl_qp_exchange over a socketpair.
#include "libcleave_test.h"

namespace cleave::test {
namespace {

// ---- Queue pairs (version 3) ----

class QpTest : public LibTest {
 protected:
  void SetUp() override {
    LibTest::SetUp();
    ASSERT_EQ(cl_cq_create(ctx_, 1024, 0, 0, &cq_), 0);
    ASSERT_EQ(cl_pd_alloc(ctx_, &pd_), 0);
    fd_ = sealed_memfd(1u << 16);
    ASSERT_EQ(cl_mr_reg(ctx_, fd_, 1u << 16, CL_ACCESS_ALL_FOR_TEST, &mr_), 0);
  }
  void TearDown() override {
    LibTest::TearDown();
    if (fd_ >= 0) close(fd_);
  }
  static constexpr unsigned CL_ACCESS_ALL_FOR_TEST =
      CL_ACCESS_READ | CL_ACCESS_WRITE | CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE;
  int create(cl_qp** qp, uint32_t send = 16, uint32_t recv = 16, const char* params = nullptr,
             cl_cq* cq = nullptr) {
    cl_qp_init_attr a{cq != nullptr ? cq : cq_, send, recv, params};
    return cl_qp_create(pd_, &a, qp);
  }
  std::vector<abi::SendEntry> entries() {
    std::lock_guard lk(d_->rec_mu);
    return d_->flow_entries;
  }
  std::vector<abi::QpModify> modifies() {
    std::lock_guard lk(d_->rec_mu);
    return d_->qp_modifies;
  }

  cl_pd* pd_ = nullptr;
  cl_mr* mr_ = nullptr;
  int fd_ = -1;
};

TEST_F(QpTest, OneProtectionDomainPerContext) {
  cl_pd* again = reinterpret_cast<cl_pd*>(0x1);
  EXPECT_EQ(cl_pd_alloc(ctx_, &again), CL_EBUSY);
  EXPECT_EQ(again, nullptr);
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  EXPECT_EQ(cl_pd_dealloc(pd_), CL_EBUSY);  // a QP of it exists
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);
  EXPECT_EQ(cl_pd_alloc(ctx_, &pd_), 0);  // free again
  EXPECT_EQ(cl_pd_alloc(nullptr, &again), CL_EINVAL);
  EXPECT_EQ(cl_pd_dealloc(nullptr), CL_EINVAL);
}

TEST_F(QpTest, MrKeys) {
  EXPECT_EQ(cl_mr_lkey(mr_), cl_mr_id(mr_));
  EXPECT_EQ(cl_mr_rkey(mr_), FakeDaemon::kRkeyTag << 16 | cl_mr_id(mr_));
  cl_mr* local = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd_, 4096, CL_ACCESS_READ, &local), 0);
  EXPECT_EQ(cl_mr_rkey(local), 0u);  // no remote access, no key
  EXPECT_EQ(cl_mr_rkey(nullptr), 0u);
  EXPECT_EQ(cl_mr_lkey(nullptr), UINT32_MAX);
}

TEST_F(QpTest, CreateSendsTheRequestAndKeepsTheReply) {
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  ASSERT_EQ(create(&qp, 100, 200, "dcqcn off"), 0);
  EXPECT_EQ(cl_qp_num(qp), FakeDaemon::kQpnBase);
  EXPECT_EQ(cl_qp_flow(qp), 500u);
  EXPECT_EQ(d_->live_qps, 1);
  EXPECT_EQ(d_->live_pipes, pipes + 1);  // the QP's own submit queue
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->qp_creates.size(), 1u);
    const abi::QpCreate& c = d_->qp_creates[0];
    EXPECT_EQ(c.cq, 1u);  // the CQ's pipe
    EXPECT_EQ(c.max_send_wr, 100u);
    EXPECT_EQ(c.max_recv_wr, 200u);
    EXPECT_STREQ(c.params, "dcqcn off");
    // The next power of two of 300 entries, bound to the QP's CQ.
    const abi::PipeCreate& p = d_->pipe_creates.back();
    EXPECT_EQ(p.kind, static_cast<uint8_t>(abi::PipeKind::kSubmit));
    EXPECT_EQ(p.entries, 512u);
    EXPECT_EQ(p.cq, 1u);
  }
  cl_qp* small = nullptr;
  ASSERT_EQ(create(&small, 1, 1), 0);
  {
    std::lock_guard lk(d_->rec_mu);
    EXPECT_EQ(d_->pipe_creates.back().entries, 64u);  // at least the smallest pipe
    EXPECT_EQ(d_->qp_creates.back().params[0], '\0');
  }
  EXPECT_EQ(cl_qp_num(small), FakeDaemon::kQpnBase + 1);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_qp_destroy(small), 0);
  EXPECT_EQ(d_->live_qps, 0);
  EXPECT_EQ(d_->live_pipes, pipes);
  EXPECT_EQ(cl_qp_num(nullptr), 0u);
  EXPECT_EQ(cl_qp_flow(nullptr), UINT32_MAX);
}

TEST_F(QpTest, CreateChecksItsArgumentsBeforeAsking) {
  cl_qp* qp = reinterpret_cast<cl_qp*>(0x1);
  cl_qp_init_attr a{cq_, 16, 16, nullptr};
  EXPECT_EQ(cl_qp_create(nullptr, &a, &qp), CL_EINVAL);
  EXPECT_EQ(cl_qp_create(pd_, nullptr, &qp), CL_EINVAL);
  EXPECT_EQ(cl_qp_create(pd_, &a, nullptr), CL_EINVAL);
  a.cq = nullptr;
  EXPECT_EQ(cl_qp_create(pd_, &a, &qp), CL_EINVAL);
  EXPECT_EQ(qp, nullptr);
  for (auto [s, r] : {std::pair{0u, 1u}, {1u, 0u}, {4097u, 1u}, {1u, 4097u}}) {
    EXPECT_EQ(create(&qp, s, r), CL_EINVAL) << s << " " << r;
  }
  std::string params(abi::kQpParamsMax, 'x');
  EXPECT_EQ(create(&qp, 1, 1, params.c_str()), CL_EINVAL);  // no room for its NUL
  params.pop_back();
  ASSERT_EQ(create(&qp, 1, 1, params.c_str()), 0);  // the longest that fits
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  // A CQ of another context.
  FakeDaemon other;
  cl_open_attr oa{other.path().c_str(), "other"};
  cl_ctx* octx = nullptr;
  ASSERT_EQ(cl_open(&oa, &octx), 0);
  cl_cq* ocq = nullptr;
  ASSERT_EQ(cl_cq_create(octx, 64, 0, 0, &ocq), 0);
  EXPECT_EQ(create(&qp, 1, 1, nullptr, ocq), CL_EINVAL);
  EXPECT_EQ(cl_close(octx), 0);
  EXPECT_EQ(d_->qp_msgs, 2);  // only the two that were fine were sent (create and destroy)
}

TEST_F(QpTest, TheCqMustHaveRoomForEveryRequest) {
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  EXPECT_EQ(create(&qp, 32, 33, nullptr, cq), CL_EINVAL);  // 65 > 64
  EXPECT_EQ(d_->live_pipes, pipes);
  EXPECT_EQ(d_->qp_msgs, 0);
  ASSERT_EQ(create(&qp, 32, 32, nullptr, cq), 0);
  cl_sq* sq = nullptr;
  EXPECT_EQ(cl_sq_create(ctx_, cq, 64, &sq), CL_EINVAL);  // the QP holds all of it
  cl_qp* more = nullptr;
  EXPECT_EQ(create(&more, 1, 1, nullptr, cq), CL_EINVAL);
  EXPECT_EQ(cl_cq_destroy(cq), CL_EBUSY);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq), 0);  // the room came back
  EXPECT_EQ(cl_sq_destroy(sq), 0);
  EXPECT_EQ(cl_cq_destroy(cq), 0);
}

TEST_F(QpTest, ARefusedCreateGivesItsRoomBack) {
  d_->qp_create_status = CL_ENOSPC;
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  EXPECT_EQ(create(&qp, 32, 32, nullptr, cq), CL_ENOSPC);
  EXPECT_EQ(qp, nullptr);
  EXPECT_EQ(d_->live_pipes, pipes + 1);  // the CQ only: the QP's submit queue went again
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);      // no QP counted
  pd_ = nullptr;
  EXPECT_EQ(cl_cq_destroy(cq), 0);  // nothing attached
}

TEST_F(QpTest, ModifyAndQueryConvertTheAttributes) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_attr a{};
  a.qp_state = CL_QPS_RTR;
  a.path_mtu = 1024;
  a.dest_qp_num = 0xabcdef;
  a.rq_psn = 0x123456;
  a.sq_psn = 0x654321;
  inet_pton(AF_INET, "198.18.0.2", &a.remote_ip);  // network order
  a.qp_access_flags = CL_ACCESS_REMOTE_WRITE;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 5;
  a.min_rnr_timer = 12;
  a.max_rd_atomic = 3;
  a.max_dest_rd_atomic = 4;
  a.selective_repeat = 1;
  a.rate_limit_kbps = 1'000'000;
  ASSERT_EQ(cl_qp_modify(qp, &a, (1u << 15) - 1), 0);
  auto m = modifies();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].qp, cl_qp_flow(qp));
  EXPECT_EQ(m[0].mask, abi::kQpAttrAll);
  const abi::QpAttr& w = m[0].attr;
  EXPECT_EQ(w.state, abi::kQpRtr);
  EXPECT_EQ(w.pmtu, 1024u);
  EXPECT_EQ(w.dest_qpn, 0xabcdefu);
  EXPECT_EQ(w.rq_psn, 0x123456u);
  EXPECT_EQ(w.sq_psn, 0x654321u);
  EXPECT_EQ(w.remote_ip, 0xc6120002u);  // host order on the wire
  EXPECT_EQ(w.access, abi::kAccessRemoteWrite);
  EXPECT_EQ(w.timeout, 14);
  EXPECT_EQ(w.retry_cnt, 6);
  EXPECT_EQ(w.rnr_retry, 5);
  EXPECT_EQ(w.min_rnr_timer, 12);
  EXPECT_EQ(w.max_rd_atomic, 3);
  EXPECT_EQ(w.max_dest_rd_atomic, 4);
  EXPECT_EQ(w.selective_repeat, 1);
  EXPECT_EQ(w.rate_limit_kbps, 1'000'000u);
  cl_qp_attr q{};
  ASSERT_EQ(cl_qp_query(qp, &q), 0);
  // All of it back, the address in network order. Whole structs: both start zeroed, and the
  // library copies them whole, padding included.
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
  EXPECT_EQ(std::memcmp(&q, &a, sizeof q), 0);

  EXPECT_EQ(cl_qp_modify(qp, &a, 1u << 15), CL_EOPNOTSUPP);
  a.qp_state = 5;
  EXPECT_EQ(cl_qp_modify(qp, &a, CL_QP_STATE), CL_EINVAL);
  EXPECT_EQ(cl_qp_modify(qp, &a, CL_QP_PATH_MTU), 0);  // the state is not in the mask
  EXPECT_EQ(cl_qp_modify(qp, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_qp_query(qp, nullptr), CL_EINVAL);
  EXPECT_EQ(modifies().size(), 2u);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, ConnectWalksToRtsWithTheDefaultsAndTheOverrides) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_dest local{}, remote{};
  ASSERT_EQ(cl_qp_local_dest(qp, mr_, &local), 0);
  remote.qpn = 0x777;
  remote.psn = 0xfedcba;
  remote.gid[10] = remote.gid[11] = 0xff;
  remote.gid[12] = 198;
  remote.gid[13] = 18;
  remote.gid[14] = 0;
  remote.gid[15] = 2;
  ASSERT_EQ(cl_qp_connect(qp, &local, &remote, nullptr, 0), 0);
  auto m = modifies();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].mask, abi::kQpAttrState | abi::kQpAttrAccess);
  EXPECT_EQ(m[0].attr.state, abi::kQpInit);
  EXPECT_EQ(m[0].attr.access, abi::kAccessRemoteRead | abi::kAccessRemoteWrite);
  EXPECT_EQ(m[1].mask, abi::kQpAttrState | abi::kQpAttrPmtu | abi::kQpAttrDestQpn |
                           abi::kQpAttrRqPsn | abi::kQpAttrRemoteIp | abi::kQpAttrMaxDestRdAtomic |
                           abi::kQpAttrMinRnrTimer);
  EXPECT_EQ(m[1].attr.state, abi::kQpRtr);
  EXPECT_EQ(m[1].attr.pmtu, 4096u);
  EXPECT_EQ(m[1].attr.dest_qpn, 0x777u);
  EXPECT_EQ(m[1].attr.rq_psn, 0xfedcbau);
  EXPECT_EQ(m[1].attr.remote_ip, 0xc6120002u);
  EXPECT_EQ(m[1].attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(m[1].attr.min_rnr_timer, 12);
  EXPECT_EQ(m[2].mask, abi::kQpAttrState | abi::kQpAttrSqPsn | abi::kQpAttrTimeout |
                           abi::kQpAttrRetryCnt | abi::kQpAttrRnrRetry | abi::kQpAttrMaxRdAtomic);
  EXPECT_EQ(m[2].attr.state, abi::kQpRts);
  EXPECT_EQ(m[2].attr.sq_psn, local.psn);
  EXPECT_EQ(m[2].attr.timeout, 14);
  EXPECT_EQ(m[2].attr.retry_cnt, 7);
  EXPECT_EQ(m[2].attr.rnr_retry, 7);
  EXPECT_EQ(m[2].attr.max_rd_atomic, 16);

  // Overrides: a smaller MTU and selective repeat at RTR, a rate at RTS, read-only access.
  cl_qp* qp2 = nullptr;
  ASSERT_EQ(create(&qp2), 0);
  cl_qp_attr opt{};
  opt.path_mtu = 1024;
  opt.selective_repeat = 1;
  opt.rate_limit_kbps = 5000;
  opt.qp_access_flags = CL_ACCESS_REMOTE_READ;
  opt.retry_cnt = 2;
  unsigned mask = CL_QP_PATH_MTU | CL_QP_SELECTIVE_REPEAT | CL_QP_RATE_LIMIT | CL_QP_ACCESS_FLAGS |
                  CL_QP_RETRY_CNT;
  ASSERT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, mask), 0);
  m = modifies();
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[3].attr.access, abi::kAccessRemoteRead);
  EXPECT_EQ(m[4].mask & abi::kQpAttrSelectiveRepeat, abi::kQpAttrSelectiveRepeat);
  EXPECT_EQ(m[4].attr.selective_repeat, 1);
  EXPECT_EQ(m[4].attr.pmtu, 1024u);
  EXPECT_EQ(m[5].mask & abi::kQpAttrRateLimit, abi::kQpAttrRateLimit);
  EXPECT_EQ(m[5].attr.rate_limit_kbps, 5000u);
  EXPECT_EQ(m[5].attr.retry_cnt, 2);

  // A port with a smaller MTU: the largest PMTU it carries is the default.
  d_->max_pmtu = 1024;
  cl_qp* qp3 = nullptr;
  ASSERT_EQ(create(&qp3), 0);
  ASSERT_EQ(cl_qp_connect(qp3, &local, &remote, nullptr, 0), 0);
  m = modifies();
  ASSERT_EQ(m.size(), 9u);
  EXPECT_EQ(m[7].mask & abi::kQpAttrPmtu, abi::kQpAttrPmtu);
  EXPECT_EQ(m[7].attr.pmtu, 1024u);
  EXPECT_EQ(cl_qp_destroy(qp3), 0);

  // Refused before anything is sent.
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, CL_QP_STATE), CL_EINVAL);
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, nullptr, CL_QP_PATH_MTU), CL_EINVAL);
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, 1u << 20), CL_EOPNOTSUPP);
  cl_qp_dest bad = remote;
  bad.gid[10] = 0;  // not IPv4-mapped
  EXPECT_EQ(cl_qp_connect(qp2, &local, &bad, nullptr, 0), CL_EINVAL);
  bad = remote;
  bad.psn = 1u << 24;
  EXPECT_EQ(cl_qp_connect(qp2, &local, &bad, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(modifies().size(), 9u);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_qp_destroy(qp2), 0);
}

TEST_F(QpTest, LocalDestHasTheQpnARandomPsnAndTheGid) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_dest d{}, e{};
  ASSERT_EQ(cl_qp_local_dest(qp, mr_, &d), 0);
  EXPECT_EQ(d.qpn, cl_qp_num(qp));
  EXPECT_LT(d.psn, 1u << 24);
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1};
  EXPECT_EQ(std::memcmp(d.gid, gid, 16), 0);
  EXPECT_EQ(d.rkey, cl_mr_rkey(mr_));
  EXPECT_EQ(d.addr, 0u);
  EXPECT_EQ(d.length, 1u << 16);
  // No MR: nothing offered. The PSN is drawn each time (equal by chance once in 2^24).
  std::set<uint32_t> psns{d.psn};
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(cl_qp_local_dest(qp, nullptr, &e), 0);
    EXPECT_EQ(e.rkey, 0u);
    EXPECT_EQ(e.length, 0u);
    psns.insert(e.psn);
  }
  EXPECT_GE(psns.size(), 4u);
  EXPECT_EQ(cl_qp_local_dest(nullptr, mr_, &d), CL_EINVAL);
  EXPECT_EQ(cl_qp_local_dest(qp, mr_, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, PostWritesTheEntriesTheDaemonExpects) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_flow f = cl_qp_flow(qp);
  auto* heap = static_cast<uint8_t*>(cl_alloc(ctx_, 4096, 0));
  ASSERT_NE(heap, nullptr);
  uint64_t hoff = cl_heap_offset(ctx_, heap);
  cl_recv_wr r[2] = {{0x10, mr_, 100, 2000}, {0x11, nullptr, hoff, 64}};
  ASSERT_EQ(cl_qp_post_recv(qp, r, 2), 2);
  cl_qp_wr w[5] = {
      {.wr_id = 1, .mr = mr_, .offset = 8, .length = 100, .opcode = CL_WR_SEND, .imm = 99},
      {.wr_id = 2, .offset = hoff, .length = 64, .opcode = CL_WR_SEND_WITH_IMM, .imm = 0xabc},
      {.wr_id = 3,
       .mr = mr_,
       .offset = 4096,
       .length = 4096,
       .opcode = CL_WR_RDMA_WRITE,
       .rkey = 0x5a0009,
       .remote_addr = 0x10000},
      {.wr_id = 4,
       .mr = mr_,
       .length = 1,
       .opcode = CL_WR_RDMA_WRITE_WITH_IMM,
       .imm = 7,
       .rkey = 0x77,
       .remote_addr = 3},
      {.wr_id = 5,
       .mr = mr_,
       .offset = 60000,
       .length = 5536,
       .opcode = CL_WR_RDMA_READ,
       .rkey = 0x99,
       .remote_addr = 1u << 20}};
  ASSERT_EQ(cl_qp_post_send(qp, w, 5), 5);
  auto wc = poll_n(5);  // the fake completes sends, writes and reads, and keeps receives
  ASSERT_EQ(wc.size(), 5u);
  auto e = entries();
  ASSERT_EQ(e.size(), 7u);
  for (const abi::SendEntry& x : e)
    EXPECT_EQ(x.target, f);
  EXPECT_EQ(e[0].opcode, abi::kOpFlowRecv);
  EXPECT_EQ(e[0].wr_id, 0x10u);
  EXPECT_EQ(e[0].mr, cl_mr_id(mr_));
  EXPECT_EQ(e[0].length, 2000u);
  EXPECT_EQ(e[0].offset, 100u);
  EXPECT_EQ(e[1].mr, abi::kHeapMr);
  EXPECT_EQ(e[1].offset, hoff);
  // SEND: no immediate even with imm set.
  EXPECT_EQ(e[2].opcode, abi::kOpFlowSend);
  EXPECT_EQ(e[2].flags, 0);
  EXPECT_EQ(e[2].imm, 0u);
  EXPECT_EQ(e[2].offset, 8u);
  EXPECT_EQ(e[2].length, 100u);
  EXPECT_EQ(e[3].opcode, abi::kOpFlowSend);
  EXPECT_EQ(e[3].flags, abi::kSendImm);
  EXPECT_EQ(e[3].imm, 0xabcu);
  EXPECT_EQ(e[3].mr, abi::kHeapMr);
  EXPECT_EQ(e[4].opcode, abi::kOpRdmaWrite);
  EXPECT_EQ(e[4].flags, 0);
  EXPECT_EQ(e[4].remote_offset, 0x10000u);
  EXPECT_EQ(e[4].remote_mr, 0x5a0009u);
  EXPECT_EQ(e[4].mr, cl_mr_id(mr_));
  EXPECT_EQ(e[4].offset, 4096u);
  EXPECT_EQ(e[4].length, 4096u);
  EXPECT_EQ(e[5].opcode, abi::kOpRdmaWrite);
  EXPECT_EQ(e[5].flags, abi::kSendImm);
  EXPECT_EQ(e[5].imm, 7u);
  EXPECT_EQ(e[5].remote_offset, 3u);
  EXPECT_EQ(e[5].remote_mr, 0x77u);
  EXPECT_EQ(e[6].opcode, abi::kOpRdmaRead);
  EXPECT_EQ(e[6].flags, 0);
  EXPECT_EQ(e[6].remote_offset, 1u << 20);
  EXPECT_EQ(e[6].remote_mr, 0x99u);
  EXPECT_EQ(e[6].offset, 60000u);
  EXPECT_EQ(e[6].length, 5536u);
  for (const abi::SendEntry& x : e) {
    for (uint8_t b : x.reserved)
      EXPECT_EQ(b, 0);
  }
  // The completions pass through with their opcodes and the QP's flow.
  const uint32_t ops[] = {CL_OP_FLOW_SEND, CL_OP_FLOW_SEND, CL_OP_RDMA_WRITE, CL_OP_RDMA_WRITE,
                          CL_OP_RDMA_READ};
  for (size_t i = 0; i < wc.size(); i++) {
    EXPECT_EQ(wc[i].wr_id, i + 1);
    EXPECT_EQ(wc[i].opcode, ops[i]);
    EXPECT_EQ(wc[i].flow, f);
    EXPECT_EQ(wc[i].status, 0);
  }
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, LibraryRejectsBadWorkRequestsBeforePosting) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  // Each bad request follows a good one: nothing of the call is posted.
  auto post = [&](cl_qp_wr w) {
    cl_qp_wr two[2] = {{.mr = ro, .length = 1, .opcode = CL_WR_SEND}, w};
    return cl_qp_post_send(qp, two, 2);
  };
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_SEND}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_SEND_WITH_IMM}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_RDMA_WRITE}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_RDMA_WRITE_WITH_IMM}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .length = 16, .opcode = CL_WR_RDMA_READ}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .offset = 4000, .length = 97, .opcode = CL_WR_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.mr = wo, .offset = 4097, .opcode = CL_WR_RDMA_READ}), CL_EFAULT);
  EXPECT_EQ(post({.length = (1u << 30) + 1, .opcode = CL_WR_RDMA_WRITE}), CL_EINVAL);
  EXPECT_EQ(post({.length = 2, .opcode = CL_WR_RDMA_WRITE, .remote_addr = UINT64_MAX - 1}),
            CL_EFAULT);
  EXPECT_EQ(post({.opcode = CL_WR_RDMA_READ + 1}), CL_EOPNOTSUPP);
  cl_recv_wr rr[2] = {{1, wo, 0, 16}, {2, ro, 0, 16}};
  EXPECT_EQ(cl_qp_post_recv(qp, rr, 2), CL_EACCES);
  rr[1] = {2, wo, 4000, 100};
  EXPECT_EQ(cl_qp_post_recv(qp, rr, 2), CL_EFAULT);
  EXPECT_EQ(cl_qp_post_send(nullptr, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_send(qp, nullptr, 1), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_recv(qp, nullptr, 1), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_send(qp, nullptr, 0), 0);
  // The largest length, and the whole MR, are fine.
  EXPECT_EQ(post({.mr = ro, .length = 4096, .opcode = CL_WR_RDMA_WRITE}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 4096, .opcode = CL_WR_RDMA_READ}), 2);
  auto wc = poll_n(4);
  EXPECT_EQ(wc.size(), 4u);
  EXPECT_EQ(d_->entries_seen, 4u);
  // A plain submit queue takes no RDMA opcodes: they need a QP's rkey and remote address.
  cl_sq* sq = nullptr;
  ASSERT_EQ(cl_sq_create(ctx_, cq_, 64, &sq), 0);
  cl_send_wr sw{.opcode = CL_OP_RDMA_WRITE};
  EXPECT_EQ(cl_post_send(sq, &sw, 1), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  close(fd);
}

TEST_F(QpTest, QpCompletionsKeepTheirWrIdAndFlags) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_rq* rq = nullptr;
  ASSERT_EQ(cl_rq_create(ctx_, cq_, 64, &rq), 0);
  cl_recv_wr r{0x5151, nullptr, 0, 64};
  ASSERT_EQ(cl_post_recv(rq, &r, 1), 1);
  uint32_t rq_pipe;
  {
    std::lock_guard lk(d_->rec_mu);
    rq_pipe = static_cast<uint32_t>(d_->pipe_creates.size());  // the pipes are numbered from 1
  }
  // A receive a WRITE with immediate consumed, and one a SEND with immediate consumed; both
  // carry kCompRecv and name the RQ's pipe number, yet are the QP's and keep their wr_id.
  abi::Completion c{};
  c.wr_id = 0x42;
  c.opcode = abi::kOpFlowRecv;
  c.flags = abi::kCompRecv | abi::kCompImm | abi::kCompRdmaWrite;
  c.imm = 0x1000;
  c.length = 0x1000;
  c.flow = cl_qp_flow(qp);
  c.pipe = static_cast<uint16_t>(rq_pipe);
  d_->inject(1, c);
  c.wr_id = 0x43;
  c.flags = abi::kCompRecv | abi::kCompImm;
  d_->inject(1, c);
  c.wr_id = 0x44;  // a write's completion, as if kCompRecv leaked onto it
  c.opcode = abi::kOpRdmaWrite;
  c.status = CL_ECANCELED;
  d_->inject(1, c);
  auto wc = poll_n(3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 0x42u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_RECV | CL_WC_IMM | CL_WC_RDMA_WRITE});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_OP_FLOW_RECV});
  EXPECT_EQ(wc[0].imm, 0x1000u);
  EXPECT_EQ(wc[0].flow, cl_qp_flow(qp));
  EXPECT_EQ(wc[1].wr_id, 0x43u);
  EXPECT_EQ(wc[1].flags, uint32_t{CL_WC_RECV | CL_WC_IMM});
  EXPECT_EQ(wc[2].wr_id, 0x44u);
  EXPECT_EQ(wc[2].opcode, uint32_t{CL_OP_RDMA_WRITE});
  EXPECT_EQ(wc[2].status, CL_ECANCELED);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, DestroyFreesTheHandleEvenWhenTheDaemonIsGone) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  d_->kill();
  while (!d_->dead())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(cl_qp_destroy(qp), CL_EDAEMON);  // and ASan sees no leak
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);
}

TEST_F(QpTest, CloseFreesQpsAndThePd) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  ASSERT_EQ(create(&qp), 0);
  EXPECT_EQ(cl_close(ctx_), 0);  // ASan: nothing leaks
  ctx_ = nullptr;
}

TEST(LibOpen, AnOlderDaemonHasNoQueuePairs) {
  FakeOptions o;
  o.max_version = 2;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "v2"};
  cl_ctx* ctx = nullptr;
  ASSERT_EQ(cl_open(&a, &ctx), 0);
  cl_pd* pd = reinterpret_cast<cl_pd*>(0x1);
  EXPECT_EQ(cl_pd_alloc(ctx, &pd), CL_EOPNOTSUPP);
  EXPECT_EQ(pd, nullptr);
  // The field was reserved before version 3: whatever the daemon left in it is no key.
  int fd = memfd_create("mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx, fd, 4096, CL_ACCESS_REMOTE_WRITE, &mr), 0);
  EXPECT_EQ(cl_mr_rkey(mr), 0u);
  EXPECT_EQ(d.qp_msgs, 0);
  EXPECT_EQ(cl_close(ctx), 0);
  close(fd);
}

// ---- cl_qp_exchange over a socketpair (no daemon) ----

class QpExchange : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd_), 0); }
  void TearDown() override {
    for (int f : fd_)
      if (f >= 0) close(f);
  }
  static cl_qp_dest dest(uint32_t qpn, uint32_t psn, uint8_t last, uint32_t rkey) {
    cl_qp_dest d{};
    d.qpn = qpn;
    d.psn = psn;
    d.gid[10] = d.gid[11] = 0xff;
    d.gid[12] = 10;
    d.gid[13] = 99;
    d.gid[14] = 0;
    d.gid[15] = last;
    d.rkey = rkey;
    d.addr = 0;
    d.length = 1ull << 40;
    return d;
  }
  void peer_writes(const std::string& s) {
    ASSERT_EQ(write(fd_[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  std::string peer_reads() {
    char buf[256];
    ssize_t n = read(fd_[1], buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  int fd_[2] = {-1, -1};
};

TEST_F(QpExchange, GoodLinesBothWays) {
  cl_qp_dest a = dest(0x1234, 0xabcdef, 1, 0x5a0001), b = dest(0xffffff, 0, 2, 0xdeadbeef);
  b.addr = 0x0123456789abcdefull;
  cl_qp_dest got_a{}, got_b{};
  int rb = 1;
  std::thread t([&] { rb = cl_qp_exchange(fd_[1], &b, &got_a, 5000); });
  int ra = cl_qp_exchange(fd_[0], &a, &got_b, 5000);
  t.join();
  ASSERT_EQ(ra, 0);
  ASSERT_EQ(rb, 0);
  // Whole structs: zeroed on both sides, and the exchange carries them whole.
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
  EXPECT_EQ(std::memcmp(&got_a, &a, sizeof a), 0);
  // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
  EXPECT_EQ(std::memcmp(&got_b, &b, sizeof b), 0);
}

TEST_F(QpExchange, TheLineIsExactlyAsDocumentedAndNothingAfterItIsRead) {
  cl_qp_dest a = dest(0x1234, 0xabcdef, 1, 0x5a0001);
  // The peer's line in uppercase, followed by bytes the app reads itself afterwards.
  peer_writes(
      "CLEAVE-RC 1 00ABCD:000001:00000000000000000000FFFF0A630002:0000BEEF:0000000000000010:"
      "0000000000001000\nNEXT");
  cl_qp_dest r{};
  ASSERT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), 0);
  EXPECT_EQ(peer_reads(),
            "CLEAVE-RC 1 001234:abcdef:00000000000000000000ffff0a630001:005a0001:0000000000000000:"
            "0000010000000000\n");
  EXPECT_EQ(r.qpn, 0xabcdu);
  EXPECT_EQ(r.psn, 1u);
  EXPECT_EQ(r.gid[15], 2);
  EXPECT_EQ(r.rkey, 0xbeefu);
  EXPECT_EQ(r.addr, 0x10u);
  EXPECT_EQ(r.length, 0x1000u);
  char rest[8] = {};
  ASSERT_EQ(read(fd_[0], rest, sizeof rest), 4);
  EXPECT_STREQ(rest, "NEXT");
}

TEST_F(QpExchange, GarbageIsEproto) {
  const char* good =
      "CLEAVE-RC 1 00abcd:000001:00000000000000000000ffff0a630002:0000beef:0000000000000010:"
      "0000000000001000\n";
  std::string bad[] = {
      "hello\n",
      "\n",
      std::string(good).replace(10, 1, "2"),              // another version
      std::string(good).replace(14, 1, "g"),              // not a hex digit
      std::string(good).replace(18, 1, "-"),              // not the separator
      std::string(good).replace(0, 12, "CLEAVE-RC 1  "),  // one character too many
      std::string(good).erase(20, 1),                     // one too few
      std::string(good).replace(12, 1, " "),              // a space in a number
  };
  for (const std::string& s : bad) {
    TearDown();
    SetUp();  // a fresh pair each time: nothing of the last line is left
    peer_writes(s);
    cl_qp_dest a = dest(1, 2, 1, 0), r = dest(9, 9, 9, 9), before = r;
    EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_EPROTO) << s;
    // Untouched, byte for byte (a copy of itself).
    // NOLINTNEXTLINE(bugprone-suspicious-memory-comparison)
    EXPECT_EQ(std::memcmp(&r, &before, sizeof r), 0) << s;
  }
}

TEST_F(QpExchange, AnEndlessLineIsEprotoNotAHang) {
  peer_writes(std::string(4096, 'A'));  // no newline, ever; the peer stays connected
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  auto t0 = Clock::now();
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 5000), CL_EPROTO);
  EXPECT_LT(ms_since(t0), 1000.0);
  // It stopped reading at the limit: most of the line is still in the socket.
  char buf[8192];
  EXPECT_GT(read(fd_[0], buf, sizeof buf), 3900);
}

TEST_F(QpExchange, ASilentPeerTimesOut) {
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  auto t0 = Clock::now();
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 200), CL_ETIMEDOUT);
  double ms = ms_since(t0);
  EXPECT_GE(ms, 190.0);
  EXPECT_LT(ms, 2000.0);
  // Half a line, then silence: also a timeout.
  peer_writes("CLEAVE-RC 1 0000");
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 100), CL_ETIMEDOUT);
}

TEST_F(QpExchange, ThePeerClosingIsConnreset) {
  peer_writes("CLEAVE-RC 1 0000");
  ASSERT_EQ(shutdown(fd_[1], SHUT_WR), 0);  // half a line, then EOF
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_ECONNRESET);
  // Gone altogether: the write fails.
  close(fd_[1]);
  fd_[1] = -1;
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_EPIPE);
}

TEST_F(QpExchange, BadArguments) {
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  EXPECT_EQ(cl_qp_exchange(-1, &a, &r, 10), CL_EINVAL);
  EXPECT_EQ(cl_qp_exchange(fd_[0], nullptr, &r, 10), CL_EINVAL);
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, nullptr, 10), CL_EINVAL);
  a.qpn = 1u << 24;
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 10), CL_EINVAL);
  char c;
  EXPECT_EQ(recv(fd_[1], &c, 1, MSG_DONTWAIT), -1);  // nothing was written
}

}  // namespace
}  // namespace cleave::test
