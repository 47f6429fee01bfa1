// libcleave_flow_test.cc - libcleave against a fake daemon: flows: listen, connect, flow requests
// and events, an older daemon without flows.
#include "libcleave_test.h"

namespace cleave::test {
namespace {

TEST_F(LibTest, ListenAndConnectSendHostOrderAndReturnIds) {
  make_queues();
  sockaddr_in a = inet("198.18.0.1", 5001);
  uint32_t l = 0xdead;
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l), 0);
  EXPECT_EQ(l, 100u);
  sockaddr_in any = inet("0.0.0.0", 5002);
  uint32_t l2 = 0xdead;
  ASSERT_EQ(cl_listen(ctx_, cq_, &any, "tcp", &l2), 0);
  EXPECT_EQ(l2, 101u);
  // The daemon's refusal is the call's result, and the out parameter stays as it was.
  uint32_t l3 = 0xdead;
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, "", &l3), CL_EADDRINUSE);
  EXPECT_EQ(l3, 0xdeadu);

  cl_flow f = 0xdead;
  sockaddr_in peer = inet("198.18.0.2", 443);
  ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &f), 0);
  EXPECT_EQ(f, 500u);
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->listens.size(), 3u);
    EXPECT_EQ(d_->listens[0].ip, 0xc6120001u);  // host order
    EXPECT_EQ(d_->listens[0].port, 5001);
    EXPECT_STREQ(d_->listens[0].transport, "");
    EXPECT_EQ(d_->listens[1].ip, 0u);
    EXPECT_EQ(d_->listens[1].port, 5002);
    EXPECT_STREQ(d_->listens[1].transport, "tcp");
    ASSERT_EQ(d_->connects.size(), 1u);
    EXPECT_EQ(d_->connects[0].ip, 0xc6120002u);
    EXPECT_EQ(d_->connects[0].port, 443);
    EXPECT_EQ(d_->connects[0].h.version, abi::kAbiVersion);
    // Every request named the CQ by its pipe id.
    for (uint32_t k : d_->listen_cq_kinds)
      EXPECT_EQ(k, static_cast<uint32_t>(abi::PipeKind::kCompletion));
  }
  auto wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_CONNECTED});
  EXPECT_EQ(wc[0].flow, f);
  EXPECT_EQ(wc[0].status, 0);

  // Refused: the flow id comes at once, the refusal as an event.
  sockaddr_in closed = inet("198.18.0.2", FakeDaemon::kRefusedPort);
  cl_flow f2 = 0;
  ASSERT_EQ(cl_connect(ctx_, cq_, &closed, "tcp", &f2), 0);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_REFUSED});
  EXPECT_EQ(wc[0].status, CL_ECONNREFUSED);
  EXPECT_EQ(wc[0].flow, f2);

  EXPECT_EQ(cl_unlisten(ctx_, l), 0);
  EXPECT_EQ(cl_unlisten(ctx_, l), CL_ENOENT);
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l3), 0);  // the port is free again
}

TEST_F(LibTest, FlowCallsCheckTheirArgumentsBeforeAsking) {
  make_queues();
  sockaddr_in a = inet("198.18.0.1", 80);
  uint32_t l = 0xdead;
  cl_flow f = 0xdead;
  EXPECT_EQ(cl_listen(nullptr, cq_, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, nullptr, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, cq_, nullptr, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, nullptr, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &a, nullptr, nullptr), CL_EINVAL);
  sockaddr_in six = a;
  six.sin_family = AF_INET6;
  EXPECT_EQ(cl_listen(ctx_, cq_, &six, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &six, nullptr, &f), CL_EINVAL);
  std::string longest(abi::kTransportNameMax - 1, 'x');
  std::string too_long(abi::kTransportNameMax, 'x');
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, too_long.c_str(), &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &a, too_long.c_str(), &f), CL_EINVAL);
  // Nowhere to connect to.
  sockaddr_in port0 = inet("198.18.0.2", 0);
  sockaddr_in any = inet("0.0.0.0", 80);
  EXPECT_EQ(cl_connect(ctx_, cq_, &port0, nullptr, &f), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &any, nullptr, &f), CL_EINVAL);
  // Another context's CQ.
  FakeDaemon d2;
  cl_open_attr oa{d2.path().c_str(), "other"};
  cl_ctx* other = nullptr;
  ASSERT_EQ(cl_open(&oa, &other), 0);
  cl_cq* foreign = nullptr;
  ASSERT_EQ(cl_cq_create(other, 64, 0, 0, &foreign), 0);
  EXPECT_EQ(cl_listen(ctx_, foreign, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, foreign, &a, nullptr, &f), CL_EINVAL);
  EXPECT_EQ(cl_close(other), 0);
  EXPECT_EQ(l, 0xdeadu);
  EXPECT_EQ(f, 0xdeadu);
  EXPECT_EQ(d_->flow_msgs, 0);  // nothing reached the daemon
  // The longest name fits.
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, longest.c_str(), &l), 0);
  std::lock_guard lk(d_->rec_mu);
  ASSERT_EQ(d_->listens.size(), 1u);
  EXPECT_EQ(std::string(d_->listens[0].transport), longest);
}

TEST_F(LibTest, FlowRequestsAndEventsRoundTrip) {
  make_queues();
  int fd = sealed_memfd(1u << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  auto* src = static_cast<uint8_t*>(cl_alloc(ctx_, 8192, 0));
  ASSERT_NE(src, nullptr);
  sockaddr_in peer = inet("198.18.0.2", 5002);
  cl_flow f = 0;
  ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &f), 0);
  ASSERT_EQ(poll_n(1).at(0).opcode, uint32_t{CL_EV_CONNECTED});

  cl_send_wr w[4]{};
  w[0] = {.wr_id = 1,
          .offset = cl_heap_offset(ctx_, src) + 8,
          .length = 8000,
          .opcode = CL_OP_FLOW_SEND,
          .flow = f};
  w[1] = {
      .wr_id = 2, .mr = mr, .offset = 4096, .length = 1000, .opcode = CL_OP_FLOW_RECV, .flow = f};
  w[2] = {
      .wr_id = 3, .mr = mr, .offset = 8192, .length = 3000, .opcode = CL_OP_FLOW_RECV, .flow = f};
  w[3] = {.wr_id = 4, .opcode = CL_OP_FLOW_CLOSE, .flow = f};
  ASSERT_EQ(cl_post_send(sq_, w, 4), 4);
  // send; data event + recv; data event + recv; close; peer closed; closed
  auto wc = poll_n(8);
  ASSERT_EQ(wc.size(), 8u);
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->flow_entries.size(), 4u);
    const abi::SendEntry& s = d_->flow_entries[0];
    EXPECT_EQ(s.opcode, abi::kOpFlowSend);
    EXPECT_EQ(s.target, f);
    EXPECT_EQ(s.mr, abi::kHeapMr);
    EXPECT_EQ(s.offset, cl_heap_offset(ctx_, src) + 8);
    EXPECT_EQ(s.length, 8000u);
    const abi::SendEntry& r = d_->flow_entries[1];
    EXPECT_EQ(r.opcode, abi::kOpFlowRecv);
    EXPECT_EQ(r.target, f);
    EXPECT_EQ(r.mr, cl_mr_id(mr));
    EXPECT_EQ(r.offset, 4096u);
    EXPECT_EQ(r.length, 1000u);
    const abi::SendEntry& c = d_->flow_entries[3];
    EXPECT_EQ(c.opcode, abi::kOpFlowClose);
    EXPECT_EQ(c.target, f);
    EXPECT_EQ(c.length, 0u);
  }
  for (const cl_wc& c : wc)
    EXPECT_EQ(c.flow, f);
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_OP_FLOW_SEND});
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].length, 8000u);
  EXPECT_EQ(wc[0].flags, 0u);
  EXPECT_EQ(wc[1].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[1].opcode, uint32_t{CL_EV_DATA});
  EXPECT_EQ(wc[1].length, 500u);
  // A flow receive keeps the app's wr_id (the CQ also serves an RQ, whose mapping must not
  // touch it), and the bytes are in the buffer.
  EXPECT_EQ(wc[2].opcode, uint32_t{CL_OP_FLOW_RECV});
  EXPECT_EQ(wc[2].wr_id, 2u);
  EXPECT_EQ(wc[2].length, 1000u);
  EXPECT_EQ(wc[2].status, 0);
  EXPECT_EQ(wc[4].wr_id, 3u);
  EXPECT_EQ(wc[4].length, 3000u);
  auto* rx = static_cast<uint8_t*>(cl_mr_addr(mr));
  for (uint64_t i = 0; i < 4000; i++) {
    uint8_t got = i < 1000 ? rx[4096 + i] : rx[8192 + i - 1000];
    ASSERT_EQ(got, FakeDaemon::flow_byte(i)) << i;
  }
  EXPECT_EQ(wc[5].opcode, uint32_t{CL_OP_FLOW_CLOSE});
  EXPECT_EQ(wc[5].wr_id, 4u);
  EXPECT_EQ(wc[6].opcode, uint32_t{CL_EV_PEER_CLOSED});
  EXPECT_EQ(wc[7].opcode, uint32_t{CL_EV_CLOSED});
  EXPECT_EQ(wc[7].status, 0);

  // The flow is gone: a request on it is refused on the submit queue's CQ.
  cl_send_wr late{.wr_id = 9, .opcode = CL_OP_FLOW_ABORT, .flow = f};
  ASSERT_EQ(cl_post_send(sq_, &late, 1), 1);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, CL_ENOENT);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  close(fd);
}

TEST_F(LibTest, LibraryRejectsBadFlowRequestsBeforePosting) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  auto post = [&](cl_send_wr w) {
    cl_send_wr two[2] = {{.opcode = CL_OP_NOP}, w};
    return cl_post_send(sq_, two, 2);
  };
  EXPECT_EQ(post({.mr = ro, .length = 4096, .opcode = CL_OP_FLOW_SEND, .flow = 7}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 4096, .opcode = CL_OP_FLOW_RECV, .flow = 7}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_OP_FLOW_SEND}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .length = 16, .opcode = CL_OP_FLOW_RECV}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .offset = 4000, .length = 97, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.mr = wo, .offset = 4097, .opcode = CL_OP_FLOW_RECV}), CL_EFAULT);
  // The whole heap in one send is fine (no per-request cap), one byte more is not.
  EXPECT_EQ(post({.length = 1u << 20, .opcode = CL_OP_FLOW_SEND}), 2);
  EXPECT_EQ(post({.length = (1u << 20) + 1, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.length = UINT32_MAX, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.opcode = CL_OP_FLOW_CLOSE, .flow = 7}), 2);
  EXPECT_EQ(post({.length = 1, .opcode = CL_OP_FLOW_CLOSE}), CL_EINVAL);
  EXPECT_EQ(post({.length = 1, .opcode = CL_OP_FLOW_ABORT}), CL_EINVAL);
  EXPECT_EQ(post({.opcode = CL_OP_FLOW_ABORT + 1}), CL_EOPNOTSUPP);
  // Four calls went through, two entries each; the flow requests name no flow of ours.
  auto wc = poll_n(8);
  EXPECT_EQ(wc.size(), 8u);
  EXPECT_EQ(d_->entries_seen, 8u);
  close(fd);
}

TEST_F(LibTest, EventsPassThroughTheReceiveQueueMapping) {
  make_queues();
  sockaddr_in a = inet("0.0.0.0", 8080);
  uint32_t l = 0;
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l), 0);
  d_->accept_on(l);
  auto wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_ACCEPTED});
  EXPECT_EQ(wc[0].wr_id, l);  // the listener, not mapped through the RQ
  cl_flow f = wc[0].flow;
  EXPECT_EQ(f, 500u);

  // A receive on the RQ is still mapped back to its wr_id, next to an event that names the
  // RQ's pipe and sets kCompRecv as well: an event is never mapped.
  cl_recv_wr r{0x5151, nullptr, 0, 64};
  ASSERT_EQ(cl_post_recv(rq_, &r, 1), 1);
  cl_send_wr s{.wr_id = 8, .length = 10, .opcode = CL_OP_SEND, .target = rq_};
  ASSERT_EQ(cl_post_send(sq_, &s, 1), 1);
  wc = poll_n(2);
  ASSERT_EQ(wc.size(), 2u);
  const cl_wc& recv = (wc[0].flags & CL_WC_RECV) ? wc[0] : wc[1];
  EXPECT_EQ(recv.wr_id, 0x5151u);
  EXPECT_EQ(recv.flow, 0u);
  // kEvAccepted has the value of kOpSend, the opcode of receive completions.
  abi::Completion ev{};
  ev.wr_id = 3;
  ev.flags = abi::kCompEvent | abi::kCompRecv;
  ev.opcode = abi::kEvAccepted;
  ev.flow = f + 1;
  ev.pipe = 3;  // the RQ's pipe (CQ 1, SQ 2, RQ 3)
  d_->inject(1, ev);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].status, 0);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT | CL_WC_RECV});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_ACCEPTED});
  EXPECT_EQ(wc[0].flow, f + 1);
}

TEST(LibOpen, AnOlderDaemonHasNoFlows) {
  FakeOptions o;
  o.max_version = 1;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "v1"};
  cl_ctx* ctx = nullptr;
  ASSERT_EQ(cl_open(&a, &ctx), 0);
  cl_cq* cq = nullptr;
  cl_sq* sq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx, 128, 0, 0, &cq), 0);
  ASSERT_EQ(cl_sq_create(ctx, cq, 64, &sq), 0);
  sockaddr_in addr = inet("198.18.0.2", 80);
  uint32_t l = 0xdead;
  cl_flow f = 0xdead;
  EXPECT_EQ(cl_listen(ctx, cq, &addr, nullptr, &l), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_connect(ctx, cq, &addr, nullptr, &f), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_unlisten(ctx, 1), CL_EOPNOTSUPP);
  EXPECT_EQ(l, 0xdeadu);
  EXPECT_EQ(f, 0xdeadu);
  EXPECT_EQ(d.flow_msgs, 0);
  for (uint32_t op : {CL_OP_FLOW_SEND, CL_OP_FLOW_RECV, CL_OP_FLOW_CLOSE, CL_OP_FLOW_ABORT}) {
    cl_send_wr w{.opcode = op};
    EXPECT_EQ(cl_post_send(sq, &w, 1), CL_EOPNOTSUPP) << op;
  }
  EXPECT_EQ(d.entries_seen, 0u);
  EXPECT_EQ(cl_close(ctx), 0);
}

}  // namespace
}  // namespace cleave::test
