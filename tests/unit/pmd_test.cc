// pmd_test.cc - the net_cleave PMD end to end: two ports over a crossed ring wire in one process.
//
// EAL runs without hugepages or root. Each test builds a fresh wire (two rings, two ring ports
// made with rte_eth_from_rings) and two net_cleave ports with rte_vdev_init; the test is the
// dataplane on both ends and can also inject frames straight onto the wire ring.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_ip.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_service.h>
#include <rte_tcp.h>
#include <spawn.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/rss.h"
#include "pmd_frames.h"
#include "rte_pmd_cleave.h"

namespace {

using namespace cleave::test::pmd;

int g_seq = 0;

uint64_t xstat(uint16_t port, const char* name) {
  uint64_t id = 0;
  EXPECT_EQ(rte_eth_xstats_get_id_by_name(port, name, &id), 0) << name;
  uint64_t v = ~0ull;
  EXPECT_EQ(rte_eth_xstats_get_by_id(port, &id, &v, 1), 1) << name;
  return v;
}

// An rte_flow rule ETH / IPV4 (A to B) / TCP (sport to kPortB) with MARK `mark` and QUEUE
// `queue`, its parts there to change.
struct TcpRule {
  rte_flow_attr attr{};
  rte_flow_item_ipv4 ip{};
  rte_flow_item_tcp tcp{};
  rte_flow_item items[4] = {};
  rte_flow_action_mark mark{};
  rte_flow_action_queue queue{};
  rte_flow_action actions[3] = {};
  TcpRule(uint16_t sport, uint32_t mark_id, uint16_t queue_index) {
    attr.ingress = 1;
    ip.hdr.src_addr = rte_cpu_to_be_32(kIpA);
    ip.hdr.dst_addr = rte_cpu_to_be_32(kIpB);
    tcp.hdr.src_port = rte_cpu_to_be_16(sport);
    tcp.hdr.dst_port = rte_cpu_to_be_16(kPortB);
    items[0].type = RTE_FLOW_ITEM_TYPE_ETH;
    items[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
    items[1].spec = &ip;
    items[2].type = RTE_FLOW_ITEM_TYPE_TCP;
    items[2].spec = &tcp;
    items[3].type = RTE_FLOW_ITEM_TYPE_END;
    mark.id = mark_id;
    queue.index = queue_index;
    actions[0].type = RTE_FLOW_ACTION_TYPE_MARK;
    actions[0].conf = &mark;
    actions[1].type = RTE_FLOW_ACTION_TYPE_QUEUE;
    actions[1].conf = &queue;
    actions[2].type = RTE_FLOW_ACTION_TYPE_END;
  }
  TcpRule(const TcpRule&) = delete;
  TcpRule& operator=(const TcpRule&) = delete;
};

// Collects what DPDK logs while it lives.
struct LogCapture {
  char* buf = nullptr;
  size_t len = 0;
  FILE* f = open_memstream(&buf, &len);
  LogCapture() { rte_openlog_stream(f); }
  ~LogCapture() {
    rte_openlog_stream(nullptr);
    std::fclose(f);
    std::free(buf);
  }
  std::string text() {
    std::fflush(f);
    return std::string(buf, len);
  }
};

// Two net_cleave ports A and B over a crossed pair of ring ports: A's wire sends into `ab`,
// which B's wire receives, and back over `ba`.
class Pair : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_avail_ = rte_mempool_avail_count(g_pool);
    jumbo_avail_ = rte_mempool_avail_count(g_jumbo_pool);
    const std::string n = std::to_string(++g_seq);
    ASSERT_NO_FATAL_FAILURE(wire_.make(n));
    name_a_ = "net_cleave_a" + n;
    name_b_ = "net_cleave_b" + n;
    const std::string sizing =
        ",max_flows=64,max_mrs=16,ms_committed=16,ms_store=1024,tx_mbufs=1023";
    ASSERT_EQ(rte_vdev_init(name_a_.c_str(), ("wire=" + wire_.wa_name + sizing).c_str()), 0);
    ASSERT_EQ(rte_vdev_init(name_b_.c_str(), ("wire=" + wire_.wb_name + sizing).c_str()), 0);
    ASSERT_EQ(rte_eth_dev_get_port_by_name(name_a_.c_str(), &a_), 0);
    ASSERT_EQ(rte_eth_dev_get_port_by_name(name_b_.c_str(), &b_), 0);
    start(a_);
    start(b_);
  }

  void TearDown() override {
    for (rte_mbuf* m : held_)
      rte_pktmbuf_free(m);
    held_.clear();
    for (uint16_t p : {a_, b_}) {
      if (rte_eth_dev_is_valid_port(p)) rte_eth_dev_stop(p);
    }
    drain(wire_.ab);
    drain(wire_.ba);
    {
      LogCapture log;
      for (const std::string& name : {name_a_, name_b_}) {
        uint16_t p;
        if (rte_eth_dev_get_port_by_name(name.c_str(), &p) == 0) rte_eth_dev_close(p);
        rte_vdev_uninit(name.c_str());
      }
      EXPECT_EQ(log.text().find("in flight"), std::string::npos) << log.text();
    }
    wire_.close();
    EXPECT_EQ(rte_mempool_avail_count(g_pool), pool_avail_) << "every app mbuf came back";
    EXPECT_EQ(rte_mempool_avail_count(g_jumbo_pool), jumbo_avail_);
  }

  static void start(uint16_t port, uint16_t mtu = 9000) {
    rte_eth_conf conf{};
    conf.rxmode.mtu = mtu;
    conf.txmode.offloads = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO |
                           RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
    start_port(port, conf, 512);
  }

  // Runs both NICs (inline mode: their bursts run the service) until B has delivered `want`
  // entries or nothing moves for a while. The mbufs are freed at TearDown.
  std::vector<rte_mbuf*> receive_b(size_t want) {
    std::vector<rte_mbuf*> got;
    for (int idle = 0; got.size() < want && idle < 2000;) {
      rte_mbuf* bufs[32];
      rte_eth_tx_burst(a_, 0, nullptr, 0);  // A's NIC flushes its wire
      uint16_t n = rte_eth_rx_burst(b_, 0, bufs, 32);
      for (uint16_t i = 0; i < n; i++) {
        got.push_back(bufs[i]);
        held_.push_back(bufs[i]);
      }
      idle = n == 0 ? idle + 1 : 0;
    }
    return got;
  }

  void add_flow_b(uint32_t initial_seq) {
    const rte_pmd_cleave_flow f = tcp_flow(initial_seq);
    ASSERT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &f), 0);
  }

  void inject_b(const Bytes& frame) {
    rte_mbuf* m = to_mbuf(frame);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(rte_ring_enqueue(wire_.ab, m), 0);
  }

  Wire wire_;
  std::string name_a_, name_b_;
  uint16_t a_ = 0, b_ = 0;
  std::vector<rte_mbuf*> held_;
  unsigned pool_avail_ = 0, jumbo_avail_ = 0;
};

TEST_F(Pair, TsoPayloadLandsInThePostedMs) {
  constexpr uint32_t kLen = 65536, kMss = 1448, kSeq = 1000, kMsOff = 4096;
  add_flow_b(kSeq);
  Bytes rx(kMsOff + kLen + 4096, 0xEE);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 1, rx.data(), rx.size(), 42), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 1, kMsOff, kLen, 0), 0);
  AppMemory app(pattern(kLen + 100, 3));
  ASSERT_EQ(rte_pmd_cleave_mr_add(a_, 3, app.bytes.data(), app.bytes.size(), 42), 0);

  Bytes hdr = tcp_frame(kSeq, nullptr, 0, false);
  rte_mbuf* d = app.descriptor(hdr, 100, kLen, kMss, kHeaderLengths);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  constexpr uint32_t kFrames = (kLen + kMss - 1) / kMss;
  std::vector<rte_mbuf*> got = receive_b(kFrames);
  ASSERT_EQ(got.size(), kFrames);

  uint32_t placed = 0;
  for (uint32_t i = 0; i < kFrames; i++) {
    rte_mbuf* m = got[i];
    const rte_pmd_cleave_placement& p = placement(m);
    SCOPED_TRACE(i);
    EXPECT_EQ(m->pkt_len, 54u) << "header only";
    EXPECT_EQ(m->nb_segs, 1);
    EXPECT_EQ(m->port, b_);
    EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED);
    EXPECT_EQ(p.flow_id, kFlow);
    EXPECT_EQ(p.seq, kSeq + i * kMss);
    EXPECT_EQ(p.mr, 1);
    EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), kMsOff + i * kMss);
    EXPECT_EQ(p.placed, std::min(kMss, kLen - i * kMss));
    EXPECT_EQ(p.payload_len, p.placed);
    EXPECT_EQ(p.flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 1u);
    EXPECT_EQ((p.flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER) != 0, i > 0);
    EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
    EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
    EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD);
    EXPECT_TRUE(m->ol_flags & RTE_MBUF_F_RX_FDIR_ID);
    EXPECT_EQ(m->hash.fdir.hi, kFlow);
    auto* tcp = rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, 34);
    EXPECT_EQ(rte_be_to_cpu_32(tcp->sent_seq), kSeq + i * kMss);
    placed += p.placed;
  }
  EXPECT_EQ(placed, kLen);
  EXPECT_EQ(0, std::memcmp(rx.data() + kMsOff, app.bytes.data() + 100, kLen));
  EXPECT_EQ(rx[kMsOff - 1], 0xEE);
  EXPECT_EQ(rx[kMsOff + kLen], 0xEE);
  EXPECT_EQ(app.completions, 1) << "the extbuf was released once the NIC read it";

  rte_eth_stats sa{}, sb{};
  ASSERT_EQ(rte_eth_stats_get(a_, &sa), 0);
  ASSERT_EQ(rte_eth_stats_get(b_, &sb), 0);
  EXPECT_EQ(sa.opackets, kFrames);
  EXPECT_EQ(sb.ipackets, kFrames);
  EXPECT_EQ(sb.ibytes, sa.obytes);
  EXPECT_EQ(xstat(a_, "tx_zero_copy"), 1u);
  EXPECT_EQ(xstat(a_, "tx_bounce"), 0u);
  EXPECT_EQ(xstat(a_, "nic_tx_tso_requests"), 1u);
  EXPECT_EQ(xstat(a_, "nic_tx_frames"), kFrames);
  // The model compares with the transport's cursor, which this test never advances: only the
  // first frame is at the cursor, the rest land past it (case d) at their exact place.
  EXPECT_EQ(xstat(b_, "nic_rx_in_order"), 1u);
  EXPECT_EQ(xstat(b_, "nic_rx_past_hole"), kFrames - 1);
  EXPECT_EQ(xstat(b_, "nic_rx_placed_bytes"), kLen);
}

TEST_F(Pair, PayloadOutsideAnyMrIsBouncedAndStillPlaced) {
  add_flow_b(77);
  Bytes rx(8192, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 2, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 2, 0, 8192, 0), 0);
  AppMemory app(pattern(3000, 9));  // never registered on A
  rte_mbuf* d = app.descriptor(tcp_frame(77, nullptr, 0, false), 0, 3000, 0, kHeaderLengths);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(placement(got[0]).placed, 3000u);
  EXPECT_EQ(0, std::memcmp(rx.data(), app.bytes.data(), 3000));
  EXPECT_EQ(xstat(a_, "tx_bounce"), 1u);
  EXPECT_EQ(app.completions, 1);
}

TEST_F(Pair, FlowMissDefersTheWholeFrame) {
  Bytes payload = pattern(1000, 1);
  Bytes f = tcp_frame(5, payload.data(), 1000);
  rte_mbuf* m = to_mbuf(f);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &m, 1), 1);
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  const rte_pmd_cleave_placement& p = placement(got[0]);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(p.reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
  EXPECT_EQ(p.flow_id, RTE_PMD_CLEAVE_NO_FLOW);
  EXPECT_EQ(p.placed, 0u);
  EXPECT_FALSE(got[0]->ol_flags & RTE_MBUF_F_RX_FDIR);
  ASSERT_EQ(got[0]->pkt_len, f.size());
  EXPECT_EQ(0, std::memcmp(rte_pktmbuf_mtod(got[0], void*), f.data(), f.size()));
  EXPECT_EQ(xstat(a_, "tx_pass_through"), 1u);
  EXPECT_EQ(xstat(b_, "nic_defer_flow_miss"), 1u);
}

TEST_F(Pair, PlainFrameGetsItsChecksumsFilled) {
  Bytes payload = pattern(600, 2);
  Bytes f = tcp_frame(5, payload.data(), 600, /*csum=*/false);
  rte_mbuf* m = to_mbuf(f);
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM;
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &m, 1), 1);
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  const rte_pmd_cleave_placement& p = placement(got[0]);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  ASSERT_EQ(got[0]->pkt_len, f.size());
  auto* ip = rte_pktmbuf_mtod_offset(got[0], rte_ipv4_hdr*, 14);
  EXPECT_EQ(rte_ipv4_cksum(ip), 0) << "a correct header sums to zero";
  EXPECT_EQ(rte_ipv4_udptcp_cksum_verify(ip, ip + 1), 0);
  EXPECT_EQ(0, std::memcmp(rte_pktmbuf_mtod_offset(got[0], uint8_t*, 54), payload.data(), 600));
}

// Posted commands wait for no one, and are applied in the order posted before what follows: a
// command run at once, the next frames off the wire, a look at the counters.
TEST_F(Pair, PostedCommandsAreAppliedInOrderBeforeWhatFollows) {
  constexpr uint32_t kSeq = 5000;
  add_flow_b(kSeq);
  Bytes rx(2000, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 4, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 0, 1000, 0), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 1000, 1000, 0), 0);
  Bytes stream = pattern(2000, 5);
  inject_b(tcp_frame(kSeq, stream.data(), 1000));
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  const uint64_t posted = xstat(b_, "posted_commands");
  const uint64_t refused = xstat(b_, "nic_cmd_err_unknown_flow");
  const uint64_t backwards = xstat(b_, "nic_cmd_err_bad_argument");

  // The first MS retires only past the cursor: a command run at once sees the posted cursor.
  ASSERT_EQ(rte_pmd_cleave_post_cursor_update(b_, 0, kFlow, kSeq + 1000), 0);
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), 0);
  // The next run over the wire sees a posted cursor past the second MS's bytes: a duplicate.
  ASSERT_EQ(rte_pmd_cleave_post_cursor_update(b_, 0, kFlow, kSeq + 2000), 0);
  ASSERT_EQ(rte_pmd_cleave_post_ms_retire(b_, 0, kFlow, 1), 0);
  inject_b(tcp_frame(kSeq + 1000, stream.data() + 1000, 1000));
  got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_DROPPED);
  EXPECT_EQ(rx[1000], 0) << "nothing placed past the cursor";
  // Both MSs retired: a third retire is refused.
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), -EAGAIN);

  // A refusal is returned to no one: the NIC counts it.
  EXPECT_EQ(rte_pmd_cleave_post_cursor_update(b_, 0, kFlow + 1, 1), 0);
  EXPECT_EQ(rte_pmd_cleave_post_ms_retire_msg(b_, 0, kFlow + 1, 1), 0);
  EXPECT_EQ(xstat(b_, "nic_cmd_err_unknown_flow"), refused + 2);

  // More than the queue holds, nothing running the NIC in between: the overflow runs at once,
  // after what is queued, so no cursor moves backwards.
  for (uint32_t i = 1; i <= 5000; i++)
    ASSERT_EQ(rte_pmd_cleave_post_cursor_update(b_, 0, kFlow, kSeq + 2000 + i), 0);
  EXPECT_EQ(xstat(b_, "nic_cmd_err_bad_argument"), backwards);
  EXPECT_EQ(xstat(b_, "posted_commands"), posted + 5 + 5000);
  EXPECT_EQ(rte_pmd_cleave_post_cursor_update(wire_.wa, 0, kFlow, 1), -ENODEV);  // not net_cleave
  EXPECT_EQ(rte_pmd_cleave_post_ms_retire(RTE_MAX_ETHPORTS, 0, kFlow, 1), -ENODEV);
}

// The eventfd's counter, 0 when nothing was written (read resets it).
uint64_t take_events(int efd) {
  uint64_t n = 0;
  return read(efd, &n, sizeof n) == sizeof n ? n : 0;
}

TEST_F(Pair, RaisedInterruptsWriteTheBoundEventfdWhenTheNicRuns) {
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  const int v = rte_pmd_cleave_irq_bind(b_, efd);
  ASSERT_GE(v, 0);
  const uint64_t irqs = xstat(b_, "irqs");
  const uint64_t errors = xstat(b_, "irq_errors");

  // Posted: nothing is written until the NIC runs, then once per raise.
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, uint32_t(v)), 0);
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, uint32_t(v)), 0);
  EXPECT_EQ(take_events(efd), 0u);
  rte_mbuf* none[1];
  EXPECT_EQ(rte_eth_rx_burst(b_, 0, none, 1), 0);  // inline: the burst runs the NIC
  EXPECT_EQ(take_events(efd), 2u);
  EXPECT_EQ(xstat(b_, "irqs"), irqs + 2);

  // A vector bound to nothing is counted, and writes nowhere.
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, uint32_t(v) + 1), 0);
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, 1u << 20), 0);
  EXPECT_EQ(xstat(b_, "irq_errors"), errors + 2);  // the look at xstats ran them
  EXPECT_EQ(take_events(efd), 0u);

  // The NIC holds its own duplicate: the vector outlives the caller's descriptor, and unbind
  // delivers what was raised before it.
  const int efd2 = dup(efd);
  ASSERT_GE(efd2, 0);
  close(efd);
  const int w = rte_pmd_cleave_irq_bind(b_, efd2);
  ASSERT_GE(w, 0);
  EXPECT_NE(w, v);
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, uint32_t(w)), 0);
  EXPECT_EQ(rte_pmd_cleave_irq_unbind(b_, uint32_t(w)), 0);
  EXPECT_EQ(take_events(efd2), 1u);
  EXPECT_EQ(rte_pmd_cleave_irq_unbind(b_, uint32_t(w)), -ENOENT);
  EXPECT_EQ(rte_pmd_cleave_irq_unbind(b_, uint32_t(v)), 0);
  ASSERT_EQ(rte_pmd_cleave_post_irq(b_, 0, uint32_t(v)), 0);
  EXPECT_EQ(xstat(b_, "irq_errors"), errors + 3);  // unbound now
  EXPECT_EQ(take_events(efd2), 0u);
  EXPECT_EQ(rte_pmd_cleave_irq_bind(b_, -1), -EBADF);
  EXPECT_EQ(rte_pmd_cleave_irq_bind(wire_.wa, efd2), -ENODEV);  // not net_cleave
  EXPECT_EQ(rte_pmd_cleave_post_irq(RTE_MAX_ETHPORTS, 0, 0), -ENODEV);

  // The table is bounded: 4096 vectors, then -ENOSPC, and a freed one is given again.
  rlimit lim{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &lim), 0);
  if (lim.rlim_max >= 8192) {
    rlimit more = lim;
    more.rlim_cur = 8192;
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &more), 0);
    std::vector<int> bound;
    int r;
    while ((r = rte_pmd_cleave_irq_bind(b_, efd2)) >= 0 && bound.size() <= 4096)
      bound.push_back(r);
    EXPECT_EQ(r, -ENOSPC);
    EXPECT_EQ(bound.size(), 4096u);
    ASSERT_EQ(rte_pmd_cleave_irq_unbind(b_, uint32_t(bound[100])), 0);
    EXPECT_EQ(rte_pmd_cleave_irq_bind(b_, efd2), bound[100]);
    for (int x : bound)
      EXPECT_EQ(rte_pmd_cleave_irq_unbind(b_, uint32_t(x)), 0);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &lim), 0);
  } else {
    ADD_FAILURE() << "RLIMIT_NOFILE's hard limit " << lim.rlim_max << " < 8192: table not filled";
  }
  close(efd2);
}

TEST_F(Pair, OutOfOrderTrimmedAndDuplicateFramesOnTheWire) {
  constexpr uint32_t kSeq = 5000;
  add_flow_b(kSeq);
  Bytes rx(4000, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 4, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 0, 1500, 0), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 1500, 2500, 0), 0);
  Bytes stream = pattern(3000, 5);
  auto seg = [&](uint32_t from, uint32_t len) {
    return tcp_frame(kSeq + from, stream.data() + from, len);
  };
  inject_b(seg(1000, 1000));  // past a hole: lands at its place, straddling the two MSs
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_TRUE(placement(got[0]).flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ(placement(got[0]).flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 2u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&placement(got[0])), 1000u);

  inject_b(seg(0, 1000));  // fills the hole
  got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_FALSE(placement(got[0]).flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ(0, std::memcmp(rx.data(), stream.data(), 2000));

  ASSERT_EQ(rte_pmd_cleave_cursor_update(b_, kFlow, kSeq + 2000), 0);
  inject_b(seg(0, 1000));     // a duplicate wholly before the cursor
  inject_b(seg(1500, 1000));  // half before the cursor
  got = receive_b(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_DROPPED);
  EXPECT_EQ(placement(got[0]).placed, 0u);
  EXPECT_EQ(got[0]->pkt_len, 54u);
  EXPECT_EQ(placement(got[1]).decision, RTE_PMD_CLEAVE_TRIMMED);
  EXPECT_EQ(placement(got[1]).trimmed, 500u);
  EXPECT_EQ(placement(got[1]).placed, 500u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&placement(got[1])), 2000u);
  EXPECT_EQ(0, std::memcmp(rx.data(), stream.data(), 2500));
  EXPECT_EQ(rx[2500], 0);

  // The retired MS and a retire past the cursor.
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), 0);
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), -EAGAIN);
  EXPECT_EQ(xstat(b_, "nic_rx_past_hole"), 1u);
  EXPECT_EQ(xstat(b_, "nic_rx_dropped"), 1u);
  EXPECT_EQ(xstat(b_, "nic_rx_trimmed_bytes"), 500u);
}

// Ethernet/IPv4/UDP/BTH/RETH of an RDMA WRITE-only from A to B (lengths and ICRC by the NIC).
Bytes roce_write_header(uint32_t psn, uint32_t rkey, uint64_t va, uint32_t len) {
  Bytes f(14 + 20 + 8 + 12 + 16, 0);
  f[0] = 2;
  f[6] = 4;
  f[12] = 0x08;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  ip->version_ihl = 0x45;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(kIpA);
  ip->dst_addr = rte_cpu_to_be_32(kIpB);
  uint8_t* udp = f.data() + 34;
  udp[0] = 0xC0;  // source port 49152
  udp[2] = 4791 >> 8;
  udp[3] = 4791 & 0xFF;
  uint8_t* bth = udp + 8;
  bth[0] = 0x0A;  // RDMA WRITE only; pad 0 (the length is a multiple of 4)
  bth[2] = bth[3] = 0xFF;
  bth[7] = 0x11;  // destination QP
  bth[9] = uint8_t(psn >> 16);
  bth[10] = uint8_t(psn >> 8);
  bth[11] = uint8_t(psn);
  uint8_t* reth = bth + 12;
  for (int i = 0; i < 8; i++)
    reth[i] = uint8_t(va >> (56 - 8 * i));
  for (int i = 0; i < 4; i++)
    reth[8 + i] = uint8_t(rkey >> (24 - 8 * i));
  for (int i = 0; i < 4; i++)
    reth[12 + i] = uint8_t(len >> (24 - 8 * i));
  return f;
}

// A TCP flow with `messages`: the model parses the message option and places by its number.
TEST_F(Pair, TcpMessageFlowPlacesByTheMessageOption) {
  constexpr uint32_t kSeq = 7000;
  rte_pmd_cleave_flow f = tcp_flow(kSeq);
  f.messages = 1;
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &f), 0);
  Bytes rx(8192, 0xEE);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 5, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 5, 0, 1000, 3), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 5, 4096, 1000, 4), 0);
  Bytes m = pattern(900, 6);
  // Message 3 is [7000, 7500), message 4 [7500, 7900): message 4's tail first.
  inject_b(tcp_msg_frame(kSeq + 700, m.data() + 700, 200, 4, kSeq + 500, 400));
  inject_b(tcp_msg_frame(kSeq, m.data(), 500, 3, kSeq, 500));
  inject_b(tcp_frame(kSeq + 500, m.data() + 500, 200));  // no option: the copy path
  std::vector<rte_mbuf*> got = receive_b(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(placement(got[0]).msg_seq, 4u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&placement(got[0])), 4096u + 200);
  EXPECT_EQ(placement(got[1]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(placement(got[1]).msg_seq, 3u);
  EXPECT_EQ(placement(got[2]).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(got[2]).reason, RTE_PMD_CLEAVE_DEFER_NO_MESSAGE);
  EXPECT_EQ(0, std::memcmp(rx.data(), m.data(), 500));
  EXPECT_EQ(0, std::memcmp(rx.data() + 4096 + 200, m.data() + 700, 200));
  EXPECT_EQ(rx[500], 0xEE);
  EXPECT_EQ(rx[4096 + 199], 0xEE);
  EXPECT_EQ(rte_pmd_cleave_ms_retire_msg(b_, kFlow, 3), 0);
  EXPECT_EQ(rte_pmd_cleave_ms_retire_msg(b_, kFlow, 3), -ENOMSG);
}

TEST_F(Pair, RoceWriteWithIcrcFromTheDynamicFlag) {
  rte_pmd_cleave_flow f{};
  f.src_ip = kIpA;
  f.dst_ip = kIpB;
  f.dst_port = 4791;  // any source port
  f.proto = 17;
  f.parser = RTE_PMD_CLEAVE_PARSER_ROCE;
  f.reliable = 1;
  f.initial_seq = 100;
  f.qpn = 0x11;  // roce_write_header's DestQP
  f.owner = 1;
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, 3, &f), 0);
  Bytes rx(4096, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add_remote(b_, 5, rx.data(), rx.size(), 1,
                                         RTE_PMD_CLEAVE_MR_REMOTE_WRITE, 0),
            0);
  AppMemory app(pattern(1024, 6));
  ASSERT_EQ(rte_pmd_cleave_mr_add(a_, 5, app.bytes.data(), app.bytes.size(), 1), 0);
  const int icrc = rte_pmd_cleave_tx_icrc_bit();
  ASSERT_GE(icrc, 0);

  // Without the flag the frame carries no ICRC: the receiving NIC refuses to place it.
  rte_mbuf* d = app.descriptor(roce_write_header(100, 5, 256, 1024), 0, 1024, 0, kHeaderLengths);
  d->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_DEFERRED);

  d = app.descriptor(roce_write_header(100, 5, 256, 1024), 0, 1024, 0, kHeaderLengths);
  d->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | (uint64_t(1) << icrc);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  const rte_pmd_cleave_placement& p = placement(got[0]);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED) << int(p.reason);
  EXPECT_EQ(p.parser, RTE_PMD_CLEAVE_PARSER_ROCE);
  EXPECT_EQ(p.flow_id, 3u);
  EXPECT_EQ(p.seq, 100u);
  EXPECT_EQ(p.mr, 5);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), 256u);
  EXPECT_EQ(p.placed, 1024u);
  EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD) << "ICRC";
  EXPECT_EQ(got[0]->pkt_len, 70u);
  EXPECT_EQ(0, std::memcmp(rx.data() + 256, app.bytes.data(), 1024));
  EXPECT_EQ(app.completions, 2);

  // The same WRITE with a tag the MR does not have: refused, counted, nothing written.
  Bytes before = rx;
  d = app.descriptor(roce_write_header(101, 0x70005, 2048, 1024), 0, 1024, 0, kHeaderLengths);
  d->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | (uint64_t(1) << icrc);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(got[0]).reason, RTE_PMD_CLEAVE_DEFER_REMOTE_ACCESS);
  EXPECT_EQ(rx, before);
  EXPECT_EQ(xstat(b_, "nic_defer_remote_access"), 1u);
}

TEST_F(Pair, JumboFrameAndMultiSegmentWireFrames) {
  add_flow_b(1);
  Bytes rx(20000, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 0, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 0, 0, 20000, 0), 0);
  Bytes stream = pattern(18000, 11);
  inject_b(tcp_frame(1, stream.data(), 8946));  // a 9000-byte frame in one segment
  // The next one arrives in three segments, as a wire with small buffers would give it.
  Bytes f = tcp_frame(1 + 8946, stream.data() + 8946, 3000);
  rte_mbuf* head = to_segments(f, 1200);
  ASSERT_NE(head, nullptr);
  ASSERT_EQ(rte_ring_enqueue(wire_.ab, head), 0);
  std::vector<rte_mbuf*> got = receive_b(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(placement(got[0]).placed, 8946u);
  EXPECT_EQ(placement(got[1]).placed, 3000u);
  EXPECT_EQ(got[1]->pkt_len, 54u);
  EXPECT_EQ(got[1]->nb_segs, 1);
  EXPECT_EQ(0, std::memcmp(rx.data(), stream.data(), 11946));
  EXPECT_EQ(xstat(b_, "rx_linearized"), 1u);
}

TEST_F(Pair, XstatsReflectDecisionsAndMemory) {
  rte_eth_xstat_name names[512];
  const int n = rte_eth_xstats_get_names(b_, names, 512);
  ASSERT_GT(n, 0);
  ASSERT_LT(n, 512);
  std::map<std::string, int> index;
  for (int i = 0; i < n; i++)
    index[names[i].name] = i;
  for (const char* want :
       {"nic_rx_frames", "nic_rx_in_order", "nic_rx_past_hole", "nic_rx_trimmed", "nic_rx_dropped",
        "nic_rx_deferred", "nic_defer_no_ms", "nic_defer_flow_miss", "nic_cmd_err_unknown_flow",
        "nic_tx_status_dma_fault", "nic_mem_flow_table_bytes", "nic_mem_flow_table_in_use",
        "nic_mem_ms_store_in_use", "nic_mem_total_bytes", "tx_bounce", "service_inline",
        "service_busy_runs", "posted_commands"}) {
    EXPECT_TRUE(index.count(want)) << want;
  }
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 0u);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_bytes"), 64u * 96u);
  const uint64_t total = xstat(b_, "nic_mem_total_bytes");
  uint64_t sum = 0;
  for (const auto& [name, i] : index) {
    if (name.starts_with("nic_mem_") && name.ends_with("_bytes") && name != "nic_mem_total_bytes")
      sum += xstat(b_, name.c_str());
  }
  EXPECT_EQ(sum, total);

  add_flow_b(10);
  Bytes rx(100, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 0, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 0, 0, 100, 0), 0);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 1u);
  EXPECT_EQ(xstat(b_, "nic_mem_ms_committed_in_use"), 1u);
  Bytes payload = pattern(400, 0);
  inject_b(tcp_frame(10, payload.data(), 400));  // no MS covers it: deferred whole
  inject_b(tcp_frame(10, payload.data(), 100));  // placed
  inject_b(tcp_frame(10, payload.data(), 100, true, kIpA, kIpB, 9, kPortB));  // flow miss
  EXPECT_EQ(receive_b(3).size(), 3u);
  EXPECT_EQ(xstat(b_, "nic_rx_frames"), 3u);
  EXPECT_EQ(xstat(b_, "nic_defer_no_ms"), 1u);
  EXPECT_EQ(xstat(b_, "nic_defer_flow_miss"), 1u);
  EXPECT_EQ(xstat(b_, "nic_rx_in_order"), 1u);
  EXPECT_EQ(xstat(b_, "rx_headers"), 3u);
  EXPECT_EQ(rte_pmd_cleave_ms_post(b_, 99, 0, 0, 10, 0), -ENOENT);
  EXPECT_EQ(xstat(b_, "nic_cmd_err_unknown_flow"), 1u);

  ASSERT_EQ(rte_eth_xstats_reset(b_), 0);
  EXPECT_EQ(xstat(b_, "nic_rx_frames"), 0u);
  EXPECT_EQ(xstat(b_, "nic_defer_flow_miss"), 0u);
  EXPECT_EQ(xstat(b_, "rx_headers"), 0u);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 1u) << "memory is not a counter";
  rte_eth_stats st{};
  ASSERT_EQ(rte_eth_stats_get(b_, &st), 0);
  EXPECT_EQ(st.ipackets, 0u);
  ASSERT_EQ(rte_pmd_cleave_flow_remove(b_, kFlow), 0);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 0u);
  EXPECT_EQ(xstat(b_, "nic_mem_ms_committed_in_use"), 0u);
}

TEST_F(Pair, CommandsReportErrors) {
  Bytes mem(1000);
  EXPECT_EQ(rte_pmd_cleave_mr_add(wire_.wa, 0, mem.data(), mem.size(), 1), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_mr_add(RTE_MAX_ETHPORTS, 0, mem.data(), mem.size(), 1), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_mr_add_remote(wire_.wa, 0, mem.data(), mem.size(), 1, 1, 0), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_read_post(wire_.wa, 0, 0, 0, 0, 10), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_read_retire(wire_.wa, 0, 0), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_rkey_check(wire_.wa, 0, 0, 0, 10, 1, nullptr), -ENODEV);
  EXPECT_EQ(rte_pmd_cleave_mr_add_remote(b_, 1, mem.data(), mem.size(), 1, 4, 0), -EINVAL);
  EXPECT_EQ(rte_pmd_cleave_mr_add(b_, 16, mem.data(), mem.size(), 1), -ENOSPC) << "max_mrs=16";
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 0, mem.data(), mem.size(), 1), 0);
  EXPECT_EQ(rte_pmd_cleave_mr_add(b_, 0, mem.data(), mem.size(), 1), -EEXIST);
  EXPECT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 0, 0, 10, 0), -ENOENT);
  add_flow_b(0);
  rte_pmd_cleave_flow dup = tcp_flow(0);  // flow kFlow's key again
  EXPECT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &dup), -EEXIST);
  dup.parser = 9;
  EXPECT_EQ(rte_pmd_cleave_flow_add(b_, 8, &dup), -EINVAL);
  EXPECT_EQ(rte_pmd_cleave_flow_add(b_, 1000, nullptr), -EINVAL);
  EXPECT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 0, 900, 200, 0), -ERANGE);
  EXPECT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 5, 0, 10, 0), -ENOENT);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 0, 0, 500, 0), 0);
  EXPECT_EQ(rte_pmd_cleave_mr_remove(b_, 0), -EBUSY);
  // RoCE commands: on a TCP flow, an unknown flow, the bounce MR; then a READ sink's life.
  EXPECT_EQ(rte_pmd_cleave_read_post(b_, kFlow, 0, 0, 0, 10), -EINVAL);
  EXPECT_EQ(rte_pmd_cleave_read_post(b_, 9, 0, 0, 0, 10), -ENOENT);
  EXPECT_EQ(rte_pmd_cleave_rkey_check(b_, kFlow, 0, 0, 10, 1, nullptr), -EINVAL);
  rte_pmd_cleave_flow qp = roce_flow(0x22, 1);
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, 9, &qp), 0);
  EXPECT_EQ(rte_pmd_cleave_read_post(b_, 9, 0, 16, 0, 10), -ENOENT) << "the bounce MR";
  EXPECT_EQ(rte_pmd_cleave_read_post(b_, 9, 1u << 24, 0, 0, 10), -EINVAL);
  ASSERT_EQ(rte_pmd_cleave_read_post(b_, 9, 5, 0, 0, 10), 0);
  EXPECT_EQ(rte_pmd_cleave_read_retire(b_, 9, 6), -ENOMSG);
  EXPECT_EQ(rte_pmd_cleave_read_retire(b_, 9, 5), 0);
  EXPECT_EQ(rte_pmd_cleave_rkey_check(b_, 9, 0, 0, 10, RTE_PMD_CLEAVE_MR_REMOTE_READ, nullptr),
            -EACCES)
      << "MR 0 allows no remote access";
  EXPECT_EQ(rte_pmd_cleave_flow_remove(b_, 9), 0);
  EXPECT_EQ(rte_pmd_cleave_flow_set_mode(b_, kFlow, RTE_PMD_CLEAVE_COPY), 0);
  EXPECT_EQ(rte_pmd_cleave_flow_remove(b_, kFlow), 0);
  EXPECT_EQ(rte_pmd_cleave_mr_remove(b_, 0), 0);
  EXPECT_EQ(rte_pmd_cleave_mr_remove(b_, 0), -ENOENT);
  uint32_t sid = 0;
  EXPECT_EQ(rte_pmd_cleave_service_id(b_, &sid), 0);
  EXPECT_EQ(rte_pmd_cleave_service_id(wire_.wb, &sid), -ENODEV);
}

TEST_F(Pair, StopStartCloseAndQueueValidation) {
  rte_eth_link link{};
  ASSERT_EQ(rte_eth_link_get_nowait(a_, &link), 0);
  EXPECT_EQ(link.link_status, RTE_ETH_LINK_UP) << "the ring wire is up";
  Bytes payload = pattern(100, 4);
  rte_mbuf* m = to_mbuf(tcp_frame(1, payload.data(), 100));
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &m, 1), 1);
  EXPECT_EQ(receive_b(1).size(), 1u);

  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  ASSERT_EQ(rte_eth_link_get_nowait(b_, &link), 0);
  EXPECT_EQ(link.link_status, RTE_ETH_LINK_DOWN);
  rte_eth_conf conf{};
  EXPECT_NE(rte_eth_dev_configure(b_, 2, 1, &conf), 0) << "one queue pair only";
  EXPECT_NE(rte_eth_rx_queue_setup(b_, 0, 4096, SOCKET_ID_ANY, nullptr, g_pool), 0);
  start(b_);
  m = to_mbuf(tcp_frame(1, payload.data(), 100));
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &m, 1), 1);
  EXPECT_EQ(receive_b(1).size(), 1u) << "traffic flows again after a restart";

  // Frames queued on B's wire when B stops are dropped with it, and nothing leaks.
  for (int i = 0; i < 5; i++)
    inject_b(tcp_frame(1, payload.data(), 100));
  ASSERT_EQ(rte_eth_tx_burst(b_, 0, nullptr, 0), 0);  // B's NIC takes them off the wire
  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  ASSERT_EQ(rte_eth_dev_close(b_), 0);
  EXPECT_FALSE(rte_eth_dev_is_valid_port(b_));
  Bytes mem(10);
  EXPECT_EQ(rte_pmd_cleave_mr_add(b_, 0, mem.data(), mem.size(), 1), -ENODEV);
  EXPECT_EQ(rte_vdev_uninit(name_b_.c_str()), 0);
}

// Lcore 1 as a service lcore running `services`, and back. rte_service_lcore_stop() does not wait
// for the lcore (rte_service.h: its thread "may not have returned from the service it is
// running"): deleted while its runner is still in its loop, with a stale copy of its service
// mask, it is no longer among the lcores rte_service_may_be_active() looks at, so a NIC closed
// next could have its service unregistered under that runner, which then calls a null callback.
// rte_eal_wait_lcore() waits for the runner to return.
void service_lcore_start(std::initializer_list<uint32_t> services) {
  ASSERT_EQ(rte_service_lcore_add(1), 0);
  for (uint32_t s : services) {
    ASSERT_EQ(rte_service_map_lcore_set(s, 1, 1), 0);
    ASSERT_EQ(rte_service_runstate_set(s, 1), 0);
  }
  ASSERT_EQ(rte_service_lcore_start(1), 0);
}

void service_lcore_stop(std::initializer_list<uint32_t> services) {
  for (uint32_t s : services)
    ASSERT_EQ(rte_service_runstate_set(s, 0), 0);
  ASSERT_EQ(rte_service_lcore_stop(1), 0);
  ASSERT_EQ(rte_eal_wait_lcore(1), 0);
  for (uint32_t s : services)
    ASSERT_EQ(rte_service_map_lcore_set(s, 1, 0), 0);
  ASSERT_EQ(rte_service_lcore_del(1), 0);
}

TEST_F(Pair, ServiceLcoreRunsTheNic) {
  uint32_t sa = 0, sb = 0;
  ASSERT_EQ(rte_pmd_cleave_service_id(a_, &sa), 0);
  ASSERT_EQ(rte_pmd_cleave_service_id(b_, &sb), 0);
  // The ports decide at start who runs their NIC: mapped before, the service lcore does.
  ASSERT_EQ(rte_eth_dev_stop(a_), 0);
  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  ASSERT_NO_FATAL_FAILURE(service_lcore_start({sa, sb}));
  ASSERT_EQ(rte_service_set_stats_enable(sb, 1), 0);
  ASSERT_EQ(rte_eth_dev_start(a_), 0);
  ASSERT_EQ(rte_eth_dev_start(b_), 0);
  const uint64_t inline_a = xstat(a_, "service_inline");

  // Idle, the service lcore loops over B's NIC and no run counts as work: the service's cycles
  // (DPDK leaves out runs that return -EAGAIN) are the NIC's busy time, its polling apart, and
  // service_busy_runs those runs (DPDK's call count counts every run).
  auto loops = [] {
    uint64_t v = 0;
    EXPECT_EQ(rte_service_lcore_attr_get(1, RTE_SERVICE_LCORE_ATTR_LOOPS, &v), 0);
    return v;
  };
  const uint64_t loops0 = loops();
  for (int i = 0; i < 200000 && loops() < loops0 + 1000; i++)
    usleep(10);
  ASSERT_GE(loops(), loops0 + 1000) << "the service lcore runs";
  uint64_t cycles = 0;
  ASSERT_EQ(rte_service_attr_get(sb, RTE_SERVICE_ATTR_CYCLES, &cycles), 0);
  EXPECT_EQ(cycles, 0u) << "idle runs of B's NIC counted as busy";
  EXPECT_EQ(xstat(b_, "service_busy_runs"), 0u);
  EXPECT_GT(xstat(b_, "service_runs"), 0u);

  add_flow_b(0);
  Bytes rx(40000, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 1, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 1, 0, 40000, 0), 0);
  AppMemory app(pattern(40000, 8));
  ASSERT_EQ(rte_pmd_cleave_mr_add(a_, 1, app.bytes.data(), app.bytes.size(), 1), 0);
  rte_mbuf* d = app.descriptor(tcp_frame(0, nullptr, 0, false), 0, 40000, 8000, kHeaderLengths);
  ASSERT_EQ(rte_eth_tx_burst(a_, 0, &d, 1), 1);
  std::vector<rte_mbuf*> got;
  for (int i = 0; i < 200000 && got.size() < 5; i++) {
    rte_mbuf* bufs[8];
    uint16_t n = rte_eth_rx_burst(b_, 0, bufs, 8);
    for (uint16_t k = 0; k < n; k++) {
      got.push_back(bufs[k]);
      held_.push_back(bufs[k]);
    }
    if (n == 0) usleep(10);
  }
  // Read while lcore 1 is a service lcore: its statistics go with it.
  ASSERT_EQ(rte_service_attr_get(sb, RTE_SERVICE_ATTR_CYCLES, &cycles), 0);
  ASSERT_NO_FATAL_FAILURE(service_lcore_stop({sa, sb}));

  ASSERT_EQ(got.size(), 5u);
  EXPECT_GT(cycles, 0u) << "the runs that took the frames off the wire count";
  EXPECT_GT(xstat(b_, "service_busy_runs"), 0u);
  EXPECT_LT(xstat(b_, "service_busy_runs"), xstat(b_, "service_runs"));
  EXPECT_EQ(0, std::memcmp(rx.data(), app.bytes.data(), 40000));
  EXPECT_EQ(xstat(a_, "service_inline"), inline_a) << "the service lcore, not tx_burst, ran A";
  EXPECT_EQ(xstat(b_, "service_inline"), 0u);
  EXPECT_GT(xstat(b_, "service_runs"), 0u);
  // Started again without the service lcore, the bursts run the NIC once more.
  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  ASSERT_EQ(rte_eth_dev_start(b_), 0);
  rte_mbuf* none[1];
  EXPECT_EQ(rte_eth_rx_burst(b_, 0, none, 1), 0);
  EXPECT_GT(xstat(b_, "service_inline"), 0u);
}

// rte_flow installs copy-mode flows: frames arrive whole, marked with the rule's MARK id.
TEST_F(Pair, RteFlowMarkClassifiesIntoCopyModeFlows) {
  TcpRule r(kPortA, 42, 0);
  rte_flow_attr& attr = r.attr;
  rte_flow_item_tcp& tcp = r.tcp;
  rte_flow_item* items = r.items;
  rte_flow_action_mark& mark = r.mark;
  rte_flow_action* actions = r.actions;

  rte_flow_error err{};
  ASSERT_EQ(rte_flow_validate(b_, &attr, items, actions, &err), 0);
  rte_flow* rule = rte_flow_create(b_, &attr, items, actions, &err);
  ASSERT_NE(rule, nullptr) << (err.message ? err.message : "");
  EXPECT_EQ(rte_flow_create(b_, &attr, items, actions, &err), nullptr) << "MARK id in use";
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 1u);

  Bytes payload = pattern(300, 3);
  inject_b(tcp_frame(9, payload.data(), 300));
  std::vector<rte_mbuf*> got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(got[0]).reason, RTE_PMD_CLEAVE_DEFER_COPY_MODE);
  EXPECT_EQ(placement(got[0]).flow_id, 42u);
  EXPECT_TRUE(got[0]->ol_flags & RTE_MBUF_F_RX_FDIR_ID);
  EXPECT_EQ(got[0]->hash.fdir.hi, 42u);
  EXPECT_EQ(got[0]->pkt_len, 354u);

  // What it cannot do is refused with a reason.
  rte_flow_attr egress{};
  egress.egress = 1;
  EXPECT_NE(rte_flow_validate(b_, &egress, items, actions, &err), 0);
  rte_flow_action drop[2] = {};
  drop[0].type = RTE_FLOW_ACTION_TYPE_DROP;
  drop[1].type = RTE_FLOW_ACTION_TYPE_END;
  EXPECT_EQ(rte_flow_validate(b_, &attr, items, drop, &err), -ENOTSUP);
  EXPECT_NE(err.message, nullptr);
  actions[0].type = RTE_FLOW_ACTION_TYPE_VOID;  // no MARK
  EXPECT_EQ(rte_flow_validate(b_, &attr, items, actions, &err), -EINVAL);
  actions[0].type = RTE_FLOW_ACTION_TYPE_MARK;
  rte_flow_item_tcp loose{};
  loose.hdr.dst_port = UINT16_MAX;
  items[2].mask = &loose;
  EXPECT_EQ(rte_flow_validate(b_, &attr, items, actions, &err), -ENOTSUP) << "no wildcards";
  items[2].mask = nullptr;

  ASSERT_EQ(rte_flow_destroy(b_, rule, &err), 0);
  inject_b(tcp_frame(9, payload.data(), 300));
  got = receive_b(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(placement(got[0]).reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);

  mark.id = 43;
  ASSERT_NE(rte_flow_create(b_, &attr, items, actions, &err), nullptr);
  mark.id = 44;
  tcp.hdr.src_port = rte_cpu_to_be_16(kPortA + 1);
  ASSERT_NE(rte_flow_create(b_, &attr, items, actions, &err), nullptr);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 2u);
  ASSERT_EQ(rte_flow_flush(b_, &err), 0);
  EXPECT_EQ(xstat(b_, "nic_mem_flow_table_in_use"), 0u);
  mark.id = 45;
  ASSERT_NE(rte_flow_create(b_, &attr, items, actions, &err), nullptr) << "freed at close";
}

// A UDP rule on RoCE's port catches, marked, the QPs between the hosts that have no flow.
TEST_F(Pair, RteFlowOnRocePortCatchesTheQpsWithoutAFlow) {
  rte_flow_attr attr{};
  attr.ingress = 1;
  rte_flow_item_ipv4 ip{};
  ip.hdr.src_addr = rte_cpu_to_be_32(kIpA);
  ip.hdr.dst_addr = rte_cpu_to_be_32(kIpB);
  rte_flow_item_udp udp{};
  udp.hdr.dst_port = rte_cpu_to_be_16(4791);
  rte_flow_item_udp any_src{};
  any_src.hdr.dst_port = UINT16_MAX;
  rte_flow_item items[4] = {};
  items[0].type = RTE_FLOW_ITEM_TYPE_ETH;
  items[1].type = RTE_FLOW_ITEM_TYPE_IPV4;
  items[1].spec = &ip;
  items[2].type = RTE_FLOW_ITEM_TYPE_UDP;
  items[2].spec = &udp;
  items[2].mask = &any_src;
  items[3].type = RTE_FLOW_ITEM_TYPE_END;
  rte_flow_action_mark mark{};
  mark.id = 42;
  rte_flow_action actions[2] = {};
  actions[0].type = RTE_FLOW_ACTION_TYPE_MARK;
  actions[0].conf = &mark;
  actions[1].type = RTE_FLOW_ACTION_TYPE_END;
  rte_flow_error err{};
  ASSERT_NE(rte_flow_create(b_, &attr, items, actions, &err), nullptr)
      << (err.message ? err.message : "");
  rte_pmd_cleave_flow qp = roce_flow(0x11, 1);
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, 5, &qp), 0);
  inject_b(roce_frame(0x11, 0, 0x11, kAeth, nullptr, 0));  // an ACK to QP 0x11: its flow
  inject_b(roce_frame(0x11, 0, 0x55, kAeth, nullptr, 0));  // to QP 0x55: the rule's
  std::vector<rte_mbuf*> got = receive_b(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_NO_PAYLOAD);
  EXPECT_EQ(placement(got[0]).flow_id, 5u);
  EXPECT_EQ(placement(got[1]).reason, RTE_PMD_CLEAVE_DEFER_COPY_MODE);
  EXPECT_EQ(placement(got[1]).flow_id, 42u);
  EXPECT_EQ(got[1]->hash.fdir.hi, 42u);
}

// The private API, stats and xstats from other threads while a service lcore runs both NICs:
// commands take the lock the service trylocks, so the stream still lands byte for byte.
TEST_F(Pair, CommandsFromOtherThreadsRaceNothing) {
  constexpr uint32_t kLen = 16384, kCount = 200, kSlots = 4, kSeq = 77;
  uint32_t sa = 0, sb = 0;
  ASSERT_EQ(rte_pmd_cleave_service_id(a_, &sa), 0);
  ASSERT_EQ(rte_pmd_cleave_service_id(b_, &sb), 0);
  add_flow_b(kSeq);
  Bytes rx(size_t(kLen) * kSlots, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 1, rx.data(), rx.size(), 1), 0);
  for (uint32_t k = 0; k + 1 < kSlots; k++)
    ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 1, uint64_t(k) * kLen, kLen, 0), 0);
  AppMemory app(pattern(size_t(kLen) * kCount, 12));
  ASSERT_EQ(rte_pmd_cleave_mr_add(a_, 1, app.bytes.data(), app.bytes.size(), 1), 0);

  ASSERT_NO_FATAL_FAILURE(service_lcore_start({sa, sb}));

  std::atomic<bool> stop{false};
  std::atomic<uint64_t> control_ops{0};
  std::thread control([&] {
    Bytes other(4096);
    std::vector<rte_eth_xstat> xs(512);
    while (!stop.load()) {
      for (uint16_t p : {a_, b_}) {
        rte_eth_stats st;
        EXPECT_EQ(rte_eth_stats_get(p, &st), 0);
        EXPECT_GT(rte_eth_xstats_get(p, xs.data(), unsigned(xs.size())), 0);
        EXPECT_EQ(rte_pmd_cleave_mr_add(p, 9, other.data(), other.size(), 2), 0);
        EXPECT_EQ(rte_pmd_cleave_mr_remove(p, 9), 0);
      }
      control_ops++;
    }
  });

  while (control_ops.load() == 0)
    std::this_thread::yield();  // the control thread is going before the stream starts
  uint32_t bad = 0, lost = 0;
  for (uint32_t i = 0; i < kCount; i++) {
    rte_mbuf* d = app.descriptor(tcp_frame(kSeq + i * kLen, nullptr, 0, false), uint64_t(i) * kLen,
                                 kLen, 8000, kHeaderLengths);
    while (rte_eth_tx_burst(a_, 0, &d, 1) == 0) {
    }
    uint32_t placed = 0;
    // A deadline, not a spin count: the service lcore shares two loaded cores with us.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (placed < kLen && std::chrono::steady_clock::now() < deadline) {
      rte_mbuf* bufs[8];
      const uint16_t n = rte_eth_rx_burst(b_, 0, bufs, 8);
      for (uint16_t k = 0; k < n; k++)
        placed += placement(bufs[k]).placed;
      rte_pktmbuf_free_bulk(bufs, n);
    }
    lost += placed != kLen;
    const uint32_t slot = i % kSlots;
    bad += std::memcmp(rx.data() + size_t(slot) * kLen, app.bytes.data() + size_t(i) * kLen,
                       kLen) != 0;
    // The transport's share: accept the bytes, retire their MS, post the next buffer.
    EXPECT_EQ(rte_pmd_cleave_cursor_update(b_, kFlow, kSeq + (i + 1) * kLen), 0);
    EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), 0);
    EXPECT_EQ(
        rte_pmd_cleave_ms_post(b_, kFlow, 1, uint64_t((i + kSlots - 1) % kSlots) * kLen, kLen, 0),
        0);
  }
  stop = true;
  control.join();
  ASSERT_NO_FATAL_FAILURE(service_lcore_stop({sa, sb}));

  EXPECT_EQ(lost, 0u);
  EXPECT_EQ(bad, 0u);
  EXPECT_EQ(app.completions, int(kCount));
  EXPECT_GT(control_ops.load(), 0u);
  EXPECT_EQ(xstat(b_, "nic_rx_placed_bytes"), uint64_t(kLen) * kCount);
}

// ---- several queues ---------------------------------------------------------------------------

// Both ports reconfigured with `nq` queue pairs.
void start_queues(uint16_t port, uint16_t nq) {
  ASSERT_EQ(rte_eth_dev_stop(port), 0);
  rte_eth_conf conf{};
  conf.rxmode.mtu = 9000;
  conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
  conf.txmode.offloads = RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  ASSERT_EQ(rte_eth_dev_configure(port, nq, nq, &conf), 0);
  for (uint16_t q = 0; q < nq; q++) {
    ASSERT_EQ(rte_eth_rx_queue_setup(port, q, 512, SOCKET_ID_ANY, nullptr, g_pool), 0);
    ASSERT_EQ(rte_eth_tx_queue_setup(port, q, 512, SOCKET_ID_ANY, nullptr), 0);
  }
  ASSERT_EQ(rte_eth_dev_start(port), 0);
}

uint16_t frame_sport(rte_mbuf* m) {
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  return uint16_t(f[34] << 8 | f[35]);
}
uint32_t frame_seq(rte_mbuf* m) {
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  return uint32_t(f[38]) << 24 | uint32_t(f[39]) << 16 | uint32_t(f[40]) << 8 | f[41];
}

uint16_t rss_queue(uint16_t sport, uint16_t nq) {
  return cleave::rss::reta_queue(
      cleave::rss::default_reta(nq),
      cleave::rss::hash_ipv4_l4(cleave::rss::kDefaultKey, kIpA, kIpB, sport, kPortB));
}

TEST_F(Pair, QueueCountsAndRssThroughEthdev) {
  rte_eth_dev_info info{};
  ASSERT_EQ(rte_eth_dev_info_get(b_, &info), 0);
  EXPECT_EQ(info.max_rx_queues, 16);
  EXPECT_EQ(info.reta_size, cleave::rss::kRetaSize);
  EXPECT_EQ(info.hash_key_size, cleave::rss::kKeyBytes);
  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  rte_eth_conf conf{};
  EXPECT_EQ(rte_eth_dev_configure(b_, 17, 17, &conf), -EINVAL);
  EXPECT_NE(rte_eth_dev_configure(b_, 2, 1, &conf), 0);
  ASSERT_NO_FATAL_FAILURE(start_queues(b_, 4));
  // The key reads back as the default; a RETA aimed at queue 3 alone takes every hashed frame.
  uint8_t key[40] = {};
  rte_eth_rss_conf rc{};
  rc.rss_key = key;
  rc.rss_key_len = sizeof key;
  ASSERT_EQ(rte_eth_dev_rss_hash_conf_get(b_, &rc), 0);
  EXPECT_EQ(0, std::memcmp(key, cleave::rss::kDefaultKey.data(), sizeof key));
  rte_eth_rss_reta_entry64 reta[2] = {};
  for (auto& g : reta) {
    g.mask = ~0ull;
    for (uint16_t& e : g.reta)
      e = 3;
  }
  ASSERT_EQ(rte_eth_dev_rss_reta_update(b_, reta, 128), 0);
  reta[1].reta[5] = 4;  // no queue 4
  EXPECT_NE(rte_eth_dev_rss_reta_update(b_, reta, 128), 0);
  rte_eth_rss_reta_entry64 back[2] = {};
  back[0].mask = back[1].mask = ~0ull;
  ASSERT_EQ(rte_eth_dev_rss_reta_query(b_, back, 128), 0);
  EXPECT_EQ(back[1].reta[5], 3);
  Bytes payload = pattern(64, 1);
  for (uint16_t sport = 3000; sport < 3020; sport++)
    inject_b(tcp_frame(1, payload.data(), 64, true, kIpA, kIpB, sport));
  size_t on3 = 0;
  for (int idle = 0; on3 < 20 && idle < 2000;) {
    rte_mbuf* bufs[32];
    uint16_t n = 0;
    for (uint16_t q = 0; q < 4; q++) {
      const uint16_t got = rte_eth_rx_burst(b_, q, bufs, 32);
      EXPECT_TRUE(got == 0 || q == 3) << "queue " << q;
      if (q == 3) on3 += got;
      n = uint16_t(n + got);
      rte_pktmbuf_free_bulk(bufs, got);
    }
    idle = n == 0 ? idle + 1 : 0;
  }
  EXPECT_EQ(on3, 20u);
  rte_eth_stats st{};
  ASSERT_EQ(rte_eth_stats_get(b_, &st), 0);
  EXPECT_EQ(st.q_ipackets[3], 20u);
  EXPECT_EQ(st.q_ipackets[0], 0u);
  // A flow naming a queue the port does not have is refused; shrinking under it too.
  rte_pmd_cleave_flow f = tcp_flow(0);
  f.queue = 4;
  EXPECT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &f), -EINVAL);
  f.queue = 3;
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &f), 0);
  ASSERT_EQ(rte_eth_dev_stop(b_), 0);
  EXPECT_EQ(rte_eth_dev_configure(b_, 2, 2, &conf), -EINVAL);
  ASSERT_EQ(rte_pmd_cleave_flow_remove(b_, kFlow), 0);
  ASSERT_NO_FATAL_FAILURE(start_queues(b_, 1));
}

// Two queue pairs on both ports, each polled by its own lcore (lcores 1 and 2, on the two CPUs):
// lcore q sends its flows on A's queue q and receives B's queue q. Many flows, hashed; one
// programmed flow and one rte_flow rule on the queue their hash does not give; a RoCE QP on
// queue 1. Every frame reaches its flow's queue, in order, exactly once.
struct Shard {
  uint16_t a = 0, b = 0, q = 0;
  std::vector<std::vector<Bytes>>* frames = nullptr;  // per flow, in order
  std::vector<uint32_t> flows;                        // the flows this shard sends
  std::atomic<uint64_t>* received = nullptr;
  uint64_t total = 0;
  std::vector<std::pair<uint16_t, uint32_t>> got;  // (source port, seq) as received
  std::vector<uint32_t> roce_psns;
  bool timed_out = false;
};

void shard_main(Shard& s) {
  std::vector<size_t> next(s.frames->size(), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s.received->load() < s.total) {
    if (std::chrono::steady_clock::now() > deadline) {
      s.timed_out = true;
      break;
    }
    // Send: one frame of each of this shard's flows that has frames left.
    rte_mbuf* out[64];
    uint16_t n = 0;
    std::vector<uint32_t> took;
    for (uint32_t f : s.flows) {
      if (next[f] < (*s.frames)[f].size() && n < 64) {
        out[n++] = to_mbuf((*s.frames)[f][next[f]]);
        took.push_back(f);
      }
    }
    const uint16_t sent = rte_eth_tx_burst(s.a, s.q, out, n);
    for (uint16_t i = 0; i < sent; i++)
      next[took[i]]++;
    rte_pktmbuf_free_bulk(out + sent, n - sent);
    // Receive.
    rte_mbuf* in[32];
    const uint16_t got = rte_eth_rx_burst(s.b, s.q, in, 32);
    for (uint16_t i = 0; i < got; i++) {
      const rte_pmd_cleave_placement& p = placement(in[i]);
      if (p.parser == RTE_PMD_CLEAVE_PARSER_ROCE) {
        // Copy mode: the whole frame, its BTH after the UDP header; the PSN in bytes 9-11.
        const auto* f = rte_pktmbuf_mtod(in[i], const uint8_t*);
        s.roce_psns.push_back(uint32_t(f[51]) << 16 | uint32_t(f[52]) << 8 | f[53]);
      } else {
        s.got.emplace_back(frame_sport(in[i]), frame_seq(in[i]));
      }
    }
    rte_pktmbuf_free_bulk(in, got);
    s.received->fetch_add(got);
  }
}

// Each queue posts on a ring of its own (one producer: no poster waits for another, as one
// descheduled on a shared CPU would make it); a command that follows sees every queue's posts,
// each queue's in the order posted; a queue past the configured count is refused.
TEST_F(Pair, PostedCommandsPerQueue) {
  ASSERT_NO_FATAL_FAILURE(start_queues(b_, 2));
  const uint64_t refused = xstat(b_, "nic_cmd_err_unknown_flow");
  const uint64_t posted = xstat(b_, "posted_commands");
  const rte_pmd_cleave_flow f = tcp_flow(1000);
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, kFlow, &f), 0);
  Bytes mem(4000, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(b_, 4, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 0, 1000, 0), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(b_, kFlow, 4, 1000, 1000, 0), 0);
  // Queue 1 moves the cursor past both MSs and retires one; queue 0 refuses one of its own.
  ASSERT_EQ(rte_pmd_cleave_post_cursor_update(b_, 1, kFlow, 3000), 0);
  ASSERT_EQ(rte_pmd_cleave_post_ms_retire(b_, 1, kFlow, 1), 0);
  ASSERT_EQ(rte_pmd_cleave_post_ms_retire_msg(b_, 0, kFlow + 1, 1), 0);
  // Run at once, the command sees both: one MS left to retire, then none.
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), 0);
  EXPECT_EQ(rte_pmd_cleave_ms_retire(b_, kFlow, 1), -EAGAIN);
  EXPECT_EQ(xstat(b_, "nic_cmd_err_unknown_flow"), refused + 1);
  EXPECT_EQ(xstat(b_, "posted_commands"), posted + 3);
  EXPECT_EQ(rte_pmd_cleave_post_cursor_update(b_, 2, kFlow, 4000), -EINVAL) << "two queues";
  EXPECT_EQ(rte_pmd_cleave_post_irq(b_, 16, 0), -EINVAL);
  // A full ring runs the command at once, after the ring: no cursor moves backwards.
  for (uint32_t i = 1; i <= 1500; i++)
    ASSERT_EQ(rte_pmd_cleave_post_cursor_update(b_, 1, kFlow, 3000 + i), 0);
  EXPECT_EQ(xstat(b_, "posted_commands"), posted + 3 + 1500);
  EXPECT_EQ(xstat(b_, "nic_cmd_err_bad_argument"), 0u);
  ASSERT_EQ(rte_pmd_cleave_flow_remove(b_, kFlow), 0);
  ASSERT_EQ(rte_pmd_cleave_mr_remove(b_, 4), 0);
}

TEST_F(Pair, TwoQueuesFromTwoLcoresKeepEveryFlowOnItsQueue) {
  constexpr uint32_t kFlows = 64, kPerFlow = 200;
  ASSERT_NO_FATAL_FAILURE(start_queues(a_, 2));
  ASSERT_NO_FATAL_FAILURE(start_queues(b_, 2));
  // Flow i sends from port 5000 + i; the programmed ones are named on the other queue.
  std::vector<uint16_t> want(kFlows + 1);
  for (uint32_t i = 0; i < kFlows; i++)
    want[i] = rss_queue(uint16_t(5000 + i), 2);
  // Flow 0: a copy-mode flow of the private API; flow 1: an rte_flow MARK + QUEUE rule.
  rte_pmd_cleave_flow f0 = tcp_flow(0, 5000);
  f0.mode = RTE_PMD_CLEAVE_COPY;
  want[0] = uint16_t(1 - want[0]);
  f0.queue = want[0];
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, 30, &f0), 0);
  want[1] = uint16_t(1 - want[1]);
  TcpRule rule(5001, 31, 2);
  rte_flow_error err{};
  EXPECT_EQ(rte_flow_validate(b_, &rule.attr, rule.items, rule.actions, &err), -EINVAL)
      << "no queue 2";
  rule.queue.index = want[1];
  ASSERT_NE(rte_flow_create(b_, &rule.attr, rule.items, rule.actions, &err), nullptr);
  // A RoCE QP on queue 1 (copy mode: its frames arrive whole), sent from many source ports.
  rte_pmd_cleave_flow qp = roce_flow(0x123, 1);
  qp.mode = RTE_PMD_CLEAVE_COPY;
  qp.queue = 1;
  ASSERT_EQ(rte_pmd_cleave_flow_add(b_, 32, &qp), 0);

  std::vector<std::vector<Bytes>> frames(kFlows + 1);
  Bytes payload = pattern(64, 5);
  for (uint32_t i = 0; i < kFlows; i++) {
    for (uint32_t k = 0; k < kPerFlow; k++) {
      frames[i].push_back(
          tcp_frame(k * 64, payload.data(), 64, true, kIpA, kIpB, uint16_t(5000 + i)));
    }
  }
  for (uint32_t k = 0; k < kPerFlow; k++) {
    Bytes r = roce_frame(0x04, k, 0x123, {}, payload.data(), 64);
    r[35] = uint8_t(k);  // a UDP source port per packet, as multipath senders vary it
    frames[kFlows].push_back(r);
  }
  std::atomic<uint64_t> received{0};
  const uint64_t total = uint64_t(kFlows + 1) * kPerFlow;
  Shard shards[2];
  for (uint16_t q = 0; q < 2; q++) {
    shards[q].a = a_;
    shards[q].b = b_;
    shards[q].q = q;
    shards[q].frames = &frames;
    shards[q].received = &received;
    shards[q].total = total;
    for (uint32_t i = q; i <= kFlows; i += 2)
      shards[q].flows.push_back(i);
  }
  ASSERT_NO_FATAL_FAILURE(run_on_lcores_1_and_2(shards, shard_main));

  EXPECT_FALSE(shards[0].timed_out || shards[1].timed_out) << received.load() << " of " << total;
  EXPECT_EQ(received.load(), total);
  std::map<uint16_t, std::vector<uint32_t>> seqs;  // per source port, as received
  for (uint16_t q = 0; q < 2; q++) {
    for (const auto& [sport, seq] : shards[q].got) {
      const uint32_t flow = uint32_t(sport - 5000);
      ASSERT_LT(flow, kFlows);
      EXPECT_EQ(want[flow], q) << "flow " << flow << " seq " << seq;
      seqs[sport].push_back(seq);
    }
  }
  ASSERT_EQ(seqs.size(), size_t(kFlows));
  for (const auto& [sport, v] : seqs) {
    // Each frame once, in order: the received sequence numbers are exactly 0, 64, ...
    std::string diff;
    for (size_t k = 0; k < std::max<size_t>(v.size(), kPerFlow); k++) {
      if (k >= v.size() || k >= kPerFlow || v[k] != k * 64) {
        diff += " [" + std::to_string(k) + "]=" + (k < v.size() ? std::to_string(v[k]) : "none");
      }
    }
    EXPECT_EQ(diff, "") << "port " << sport << ": " << v.size() << " frames";
  }
  EXPECT_TRUE(shards[0].roce_psns.empty());
  ASSERT_EQ(shards[1].roce_psns.size(), size_t(kPerFlow));
  for (uint32_t k = 0; k < kPerFlow; k++)
    EXPECT_EQ(shards[1].roce_psns[k], k);
  rte_eth_stats st{};
  ASSERT_EQ(rte_eth_stats_get(b_, &st), 0);
  EXPECT_EQ(st.q_ipackets[0], shards[0].got.size() + shards[0].roce_psns.size());
  EXPECT_EQ(st.q_ipackets[1], shards[1].got.size() + shards[1].roce_psns.size());
  EXPECT_GT(st.q_ipackets[0], 0u);
  EXPECT_GT(st.q_ipackets[1], 0u);
  ASSERT_EQ(rte_eth_stats_get(a_, &st), 0);
  EXPECT_EQ(st.q_opackets[0] + st.q_opackets[1], total);
}

// ---- probing ----------------------------------------------------------------------------------

TEST(Probe, BadDevargsFailWithAClearLog) {
  {
    LogCapture log;
    EXPECT_NE(rte_vdev_init("net_cleave_bad0", nullptr), 0);
    EXPECT_NE(log.text().find("need wire=<ethdev name>"), std::string::npos) << log.text();
  }
  {
    LogCapture log;
    EXPECT_NE(rte_vdev_init("net_cleave_bad1", "wire=no_such_port"), 0);
    EXPECT_NE(log.text().find("wire port 'no_such_port' not found"), std::string::npos)
        << log.text();
  }
  {
    LogCapture log;
    EXPECT_NE(rte_vdev_init("net_cleave_bad2", "wire=net_null0,colour=blue"), 0);
    EXPECT_NE(log.text().find("cannot parse devargs"), std::string::npos) << log.text();
  }
  {
    LogCapture log;
    EXPECT_NE(rte_vdev_init("net_cleave_bad3", "wire=net_null0,max_flows=lots"), 0);
    EXPECT_NE(log.text().find("max_flows=lots"), std::string::npos) << log.text();
  }
  {
    LogCapture log;  // net_cleave9 (from the EAL command line) already owns net_null0
    EXPECT_NE(rte_vdev_init("net_cleave_bad4", "wire=net_null0"), 0);
    EXPECT_NE(log.text().find("already belongs"), std::string::npos) << log.text();
    EXPECT_NE(rte_vdev_init("net_cleave_bad5", "wire=net_cleave9"), 0);
  }
  uint16_t p;
  for (const char* n : {"net_cleave_bad0", "net_cleave_bad1", "net_cleave_bad2"})
    EXPECT_NE(rte_eth_dev_get_port_by_name(n, &p), 0) << n;
}

// net_cleave9,wire=net_null0 came from --vdev on the EAL command line, as in cleaved.
TEST(Probe, FromTheEalCommandLineOverANullWire) {
  uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_cleave9", &port), 0);
  rte_eth_dev_info info{};
  ASSERT_EQ(rte_eth_dev_info_get(port, &info), 0);
  EXPECT_STREQ(info.driver_name, "net_cleave");
  EXPECT_EQ(info.max_mtu, 9216);
  rte_eth_conf conf{};
  ASSERT_NO_FATAL_FAILURE(start_port(port, conf, 256));
  // net_null's RX invents zero-filled frames: not IPv4, so deferred whole.
  rte_mbuf* bufs[8];
  uint16_t n = 0;
  for (int i = 0; i < 10 && n == 0; i++)
    n = rte_eth_rx_burst(port, 0, bufs, 8);
  ASSERT_GT(n, 0);
  EXPECT_EQ(placement(bufs[0]).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(bufs[0]).reason, RTE_PMD_CLEAVE_DEFER_NOT_IPV4);
  rte_pktmbuf_free_bulk(bufs, n);
  Bytes payload = pattern(64, 0);
  rte_mbuf* m = to_mbuf(tcp_frame(1, payload.data(), 64));
  ASSERT_EQ(rte_eth_tx_burst(port, 0, &m, 1), 1);
  rte_eth_rx_burst(port, 0, bufs, 0);
  rte_eth_stats st{};
  ASSERT_EQ(rte_eth_stats_get(port, &st), 0);
  EXPECT_EQ(st.opackets, 1u);
  ASSERT_EQ(rte_eth_dev_stop(port), 0);
}

// From the EAL command line too; this one is left to EAL cleanup, which must cope.
TEST(Probe, AWireOfItsOwnFromTheEalCommandLine) {
  uint16_t port = 0, wire = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_cleave8", &port), 0);
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_null8", &wire), 0);
  EXPECT_EQ(rte_pmd_cleave_flow_add(wire, 1, nullptr), -ENODEV);
}

// A wire that is not there yet is probed by net_cleave with wire_args, and closed with it.
TEST(Probe, AWireOfItsOwnFromWireArgs) {
  ASSERT_EQ(rte_vdev_init("net_cleave_own", "wire=net_null7,tx_mbufs=63,wire_args=size=80,no-rx=1"),
            0);
  uint16_t port = 0, wire = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_cleave_own", &port), 0);
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_null7", &wire), 0);
  rte_eth_conf conf{};
  ASSERT_NO_FATAL_FAILURE(start_port(port, conf, 64));
  rte_mbuf* bufs[4];
  EXPECT_EQ(rte_eth_rx_burst(port, 0, bufs, 4), 0) << "no-rx=1 reached the wire";
  ASSERT_EQ(rte_eth_dev_stop(port), 0);
  ASSERT_EQ(rte_eth_dev_close(port), 0);
  EXPECT_FALSE(rte_eth_dev_is_valid_port(wire)) << "the wire went with it";
  EXPECT_EQ(rte_vdev_uninit("net_cleave_own"), 0);
  EXPECT_EQ(rte_vdev_uninit("net_null7"), 0);
}

// The NIC's frame pool is sized for the MTU at configure; a frame over the MTU is refused.
TEST(Probe, FramesFollowTheMtu) {
  uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_cleave9", &port), 0);
  rte_eth_conf conf{};
  conf.rxmode.mtu = 1500;
  ASSERT_NO_FATAL_FAILURE(start_port(port, conf, 256));
  EXPECT_EQ(rte_eth_dev_set_mtu(port, 9000), -EBUSY) << "a larger pool needs a stopped port";
  ASSERT_EQ(rte_eth_stats_reset(port), 0);
  AppMemory app(pattern(3000, 1));
  rte_mbuf* d = app.descriptor(tcp_frame(1, nullptr, 0, false), 0, 3000, 0, kHeaderLengths);
  ASSERT_EQ(rte_eth_tx_burst(port, 0, &d, 1), 1);
  rte_eth_stats st{};
  ASSERT_EQ(rte_eth_stats_get(port, &st), 0);
  EXPECT_EQ(st.oerrors, 1u);
  EXPECT_EQ(st.opackets, 0u);
  EXPECT_EQ(app.completions, 1) << "a refused descriptor still releases the app memory";

  ASSERT_EQ(rte_eth_dev_stop(port), 0);
  ASSERT_EQ(rte_eth_dev_set_mtu(port, 9000), 0);
  ASSERT_EQ(rte_eth_dev_start(port), 0);
  d = app.descriptor(tcp_frame(1, nullptr, 0, false), 0, 3000, 0, kHeaderLengths);
  ASSERT_EQ(rte_eth_tx_burst(port, 0, &d, 1), 1);
  ASSERT_EQ(rte_eth_stats_get(port, &st), 0);
  EXPECT_EQ(st.opackets, 1u);
  EXPECT_EQ(app.completions, 2);
  ASSERT_EQ(rte_eth_dev_stop(port), 0);
}

// ---- two processes over memif ------------------------------------------------------------------

constexpr uint32_t kMemifLen = 65536, kMemifMss = 1448, kMemifSeq = 500;

void start_mtu1500(uint16_t port) {
  start_port(port, rte_eth_conf{}, 512);
}

bool wait_link_up(uint16_t port, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    rte_eth_link link{};
    rte_eth_link_get_nowait(port, &link);
    if (link.link_status == RTE_ETH_LINK_UP) return true;
    rte_mbuf* none[1];
    rte_eth_rx_burst(port, 0, none, 0);
    usleep(1000);
  }
  return false;
}

// The second process: net_cleave over the client end of a memif, sending one 64 KB TSO
// descriptor. Exit status 0 when all its frames went out the wire.
int memif_peer(const std::string& sock) {
  const std::string prefix = "--file-prefix=cleave-pmdpeer-" + std::to_string(getpid());
  const std::string vdev =
      "net_cleave_peer,max_flows=16,ms_store=256,tx_mbufs=255,"
      "wire=net_memif_c,wire_args=role=client,socket=" +
      sock;
  const char* eal_argv[] = {"pmd_peer",
                            "--no-huge",
                            "--no-shconf",
                            "-m",
                            "256",
                            "--no-pci",
                            "-l",
                            "0",
                            "--no-telemetry",
                            "--log-level=*:error",
                            prefix.c_str(),
                            "--vdev",
                            vdev.c_str()};
  if (rte_eal_init(int(sizeof eal_argv / sizeof eal_argv[0]), const_cast<char**>(eal_argv)) < 0) {
    return 2;
  }
  g_pool =
      rte_pktmbuf_pool_create("peer_pool", 2047, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  uint16_t port = 0;
  if (g_pool == nullptr || rte_eth_dev_get_port_by_name("net_cleave_peer", &port) != 0) return 3;
  start_mtu1500(port);
  if (!wait_link_up(port, std::chrono::seconds(10))) return 4;
  AppMemory app(pattern(kMemifLen, 21));
  if (rte_pmd_cleave_mr_add(port, 0, app.bytes.data(), app.bytes.size(), 1) != 0) return 5;
  rte_mbuf* d = app.descriptor(tcp_frame(kMemifSeq, nullptr, 0, false), 0, kMemifLen, kMemifMss,
                               kHeaderLengths);
  if (rte_eth_tx_burst(port, 0, &d, 1) != 1) return 6;
  constexpr uint64_t kFrames = (kMemifLen + kMemifMss - 1) / kMemifMss;
  rte_eth_stats st{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    rte_eth_tx_burst(port, 0, nullptr, 0);  // inline: the burst runs the NIC
    rte_eth_stats_get(port, &st);
    if (st.opackets == kFrames) break;
    usleep(100);
  }
  usleep(200000);  // let the server drain the memif ring before the link goes down
  rte_eth_dev_stop(port);
  rte_eth_dev_close(port);
  rte_eal_cleanup();
  return st.opackets == kFrames && app.completions == 1 ? 0 : 7;
}

// Two processes, each with its own net_cleave over one end of a memif (copy mode, no
// hugepages): the peer's TSO descriptor lands in this process's posted MS.
TEST(Memif, TwoProcessesOverMemif) {
  const std::string sock = "/cleave-pmdtest-" + std::to_string(getpid()) + ".sock";  // abstract
  ASSERT_EQ(rte_vdev_init("net_cleave_srv", ("max_flows=16,ms_store=256,tx_mbufs=255,"
                                             "wire=net_memif_s,wire_args=role=server,socket=" +
                                             sock)
                                                .c_str()),
            0);
  uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name("net_cleave_srv", &port), 0);
  start_mtu1500(port);
  rte_pmd_cleave_flow f{};
  f.src_ip = kIpA;
  f.dst_ip = kIpB;
  f.src_port = kPortA;
  f.dst_port = kPortB;
  f.proto = 6;
  f.reliable = 1;
  f.initial_seq = kMemifSeq;
  ASSERT_EQ(rte_pmd_cleave_flow_add(port, 1, &f), 0);
  Bytes rx(kMemifLen, 0);
  ASSERT_EQ(rte_pmd_cleave_mr_add(port, 0, rx.data(), rx.size(), 1), 0);
  ASSERT_EQ(rte_pmd_cleave_ms_post(port, 1, 0, 0, kMemifLen, 0), 0);

  const std::string arg = "--memif-peer=" + sock;
  char* child_argv[] = {const_cast<char*>("pmd_tests"), const_cast<char*>(arg.c_str()), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, child_argv, environ), 0);

  EXPECT_TRUE(wait_link_up(port, std::chrono::seconds(15))) << "the link follows the wire's";
  constexpr uint32_t kFrames = (kMemifLen + kMemifMss - 1) / kMemifMss;
  uint32_t headers = 0, placed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (headers < kFrames && std::chrono::steady_clock::now() < deadline) {
    rte_mbuf* bufs[32];
    const uint16_t n = rte_eth_rx_burst(port, 0, bufs, 32);
    for (uint16_t i = 0; i < n; i++) {
      EXPECT_EQ(placement(bufs[i]).decision, RTE_PMD_CLEAVE_PLACED);
      placed += placement(bufs[i]).placed;
    }
    rte_pktmbuf_free_bulk(bufs, n);
    headers += n;
    if (n == 0) usleep(100);
  }
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "peer status " << status;
  EXPECT_EQ(headers, kFrames);
  EXPECT_EQ(placed, kMemifLen);
  EXPECT_EQ(0, std::memcmp(rx.data(), pattern(kMemifLen, 21).data(), kMemifLen));
  ASSERT_EQ(rte_eth_dev_stop(port), 0);
  ASSERT_EQ(rte_eth_dev_close(port), 0);
  EXPECT_EQ(rte_vdev_uninit("net_cleave_srv"), 0);
  rte_vdev_uninit("net_memif_s");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::strncmp(argv[1], "--memif-peer=", 13) == 0) {
    return memif_peer(argv[1] + 13);
  }
  ::testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=cleave-pmdtest-" + std::to_string(getpid());
  // Lcore 0 (main) and 2 share CPU 0; lcore 1 (the service lcore, a shard) has CPU 1. net_null0
  // copies: its frames are zeros, not whatever the pool's mbufs held before.
  const char* eal_argv[] = {
      "pmd_tests",
      "--no-huge",
      "--no-shconf",
      "-m",
      "256",
      "--no-pci",
      "--lcores",
      "0@0,1@1,2@0",
      "--no-telemetry",
      "--log-level=*:error",
      "--vdev",
      "net_null0,copy=1",
      "--vdev",
      "net_cleave9,wire=net_null0,max_flows=16,ms_store=256,tx_mbufs=255",
      "--vdev",
      "net_cleave8,max_flows=16,ms_store=256,wire=net_null8,wire_args=no-rx=1",
      prefix.c_str()};
  int eal_argc = static_cast<int>(sizeof eal_argv / sizeof eal_argv[0]);
  if (rte_eal_init(eal_argc, const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  rte_log_set_level_pattern("pmd.net.cleave", RTE_LOG_WARNING);  // frames left in flight
  g_pool =
      rte_pktmbuf_pool_create("test_pool", 8191, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  g_jumbo_pool =
      rte_pktmbuf_pool_create("test_jumbo", 255, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
  if (g_pool == nullptr || g_jumbo_pool == nullptr) {
    std::fprintf(stderr, "mbuf pools: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  int rc = RUN_ALL_TESTS();
  uint16_t p;
  if (rte_eth_dev_get_port_by_name("net_cleave9", &p) == 0) rte_eth_dev_close(p);
  rte_mempool_free(g_jumbo_pool);
  rte_mempool_free(g_pool);
  rte_eal_cleanup();
  return rc;
}
