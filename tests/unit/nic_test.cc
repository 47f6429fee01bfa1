// nic_test.cc - the dataplane's Nic on both backends: the same placement tests, the same answers.
//
// EAL runs without hugepages or root. Each test builds a crossed ring wire (two rings, two ring
// ports from rte_eth_from_rings). The receiving Nic is open_nic() on a net_cleave port over its
// end of the wire (cleave) or on the ring port itself (generic); the sending Nic is the same on
// the other end. Tests inject frames straight onto the receiver's wire ring, or send them through
// the sending Nic, and check what rx_burst hands out: only the counters may differ.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rss.h"
#include "nic.h"
#include "nic_backends.h"
#include "pmd_frames.h"
#include "rte_pmd_cleave.h"

namespace {

using namespace cleave::test::pmd;
using cleave::dp::GenericNicParams;
using cleave::dp::Nic;
using cleave::dp::NicBackend;
using cleave::dp::NicQueue;
using cleave::dp::open_nic;

int g_seq = 0;

constexpr uint8_t kUntouched = 0xEE;

// Configured with the TX offloads asked that the port offers.
void start_port(uint16_t port, uint64_t tx_offloads) {
  rte_eth_dev_info info{};
  ASSERT_EQ(rte_eth_dev_info_get(port, &info), 0);
  rte_eth_conf conf{};
  conf.rxmode.mtu = 9000;
  conf.txmode.offloads = tx_offloads & info.tx_offload_capa;
  ASSERT_NO_FATAL_FAILURE(cleave::test::pmd::start_port(port, conf, 512));
}

constexpr uint64_t kAllTxOffloads = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO |
                                    RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |
                                    RTE_ETH_TX_OFFLOAD_UDP_CKSUM;

// The sizing both backends get: net_cleave devargs and GenericNicParams alike.
GenericNicParams params() {
  GenericNicParams p;
  p.model.max_flows = 64;
  p.model.max_mrs = 16;
  p.model.ms_committed_per_flow = 16;
  p.model.ms_store_entries = 1024;
  p.tx_frames = 1023;
  return p;
}
constexpr const char* kCleaveSizing =
    ",max_flows=64,max_mrs=16,ms_committed=16,ms_store=1024,tx_mbufs=1023";

std::map<std::string, uint64_t> counters(const Nic& nic) {
  std::map<std::string, uint64_t> c;
  nic.for_each_counter([&](std::string_view n, uint64_t v) { c[std::string(n)] = v; });
  return c;
}

uint64_t counter(const Nic& nic, const std::string& name) {
  const auto c = counters(nic);
  auto it = c.find(name);
  EXPECT_NE(it, c.end()) << name << " on " << cleave::dp::backend_name(nic.backend());
  return it == c.end() ? ~0ull : it->second;
}

// The sending Nic `tx_` (A) and the receiving Nic `rx_` (B) of the backend under test.

// Stops, closes and uninits a vdev port made by a test, if it exists (name "" for none).
void close_vdev_port(const std::string& name) {
  uint16_t p;
  if (!name.empty() && rte_eth_dev_get_port_by_name(name.c_str(), &p) == 0) {
    rte_eth_dev_stop(p);
    rte_eth_dev_close(p);
    rte_vdev_uninit(name.c_str());
  }
}
class NicPair : public ::testing::TestWithParam<NicBackend> {
 protected:
  void SetUp() override {
    pool_avail_ = rte_mempool_avail_count(g_pool);
    jumbo_avail_ = rte_mempool_avail_count(g_jumbo_pool);
    const std::string n = std::to_string(++g_seq);
    ASSERT_NO_FATAL_FAILURE(wire_.make(n));
    if (GetParam() == NicBackend::kCleave) {
      name_a_ = "net_cleave_a" + n;
      name_b_ = "net_cleave_b" + n;
      ASSERT_EQ(rte_vdev_init(name_a_.c_str(), ("wire=" + wire_.wa_name + kCleaveSizing).c_str()),
                0);
      ASSERT_EQ(rte_vdev_init(name_b_.c_str(), ("wire=" + wire_.wb_name + kCleaveSizing).c_str()),
                0);
      ASSERT_EQ(rte_eth_dev_get_port_by_name(name_a_.c_str(), &a_), 0);
      ASSERT_EQ(rte_eth_dev_get_port_by_name(name_b_.c_str(), &b_), 0);
    } else {
      a_ = wire_.wa;
      b_ = wire_.wb;
    }
    ASSERT_NO_FATAL_FAILURE(start_port(a_, kAllTxOffloads));
    ASSERT_NO_FATAL_FAILURE(start_port(b_, kAllTxOffloads));
    tx_ = open_nic(a_, g_pool, params());
    rx_ = open_nic(b_, g_pool, params());
    ASSERT_EQ(tx_->backend(), GetParam());
    ASSERT_EQ(rx_->backend(), GetParam());
    ASSERT_EQ(rx_->port_id(), b_);
    ASSERT_EQ(rx_->placement_offset(), rte_pmd_cleave_placement_offset());
  }

  void TearDown() override {
    for (rte_mbuf* m : held_)
      rte_pktmbuf_free(m);
    held_.clear();
    tx_.reset();
    rx_.reset();
    for (const std::string& name : {name_a_, name_b_})
      close_vdev_port(name);
    wire_.close();
    EXPECT_EQ(rte_mempool_avail_count(g_pool), pool_avail_) << "every mbuf came back";
    EXPECT_EQ(rte_mempool_avail_count(g_jumbo_pool), jumbo_avail_);
  }

  // Runs both Nics until B has delivered `want` frames or nothing moves for a while. The mbufs
  // are freed at TearDown.
  std::vector<rte_mbuf*> receive(size_t want) {
    std::vector<rte_mbuf*> got;
    for (int idle = 0; got.size() < want && idle < 2000;) {
      rte_mbuf* bufs[32];
      tx_->tx_burst(nullptr, 0);  // A flushes what it holds
      const uint16_t n = rx_->rx_burst(bufs, 32);
      for (uint16_t i = 0; i < n; i++) {
        got.push_back(bufs[i]);
        held_.push_back(bufs[i]);
      }
      idle = n == 0 ? idle + 1 : 0;
    }
    return got;
  }

  rte_mbuf* receive_one() {
    std::vector<rte_mbuf*> got = receive(1);
    EXPECT_EQ(got.size(), 1u);
    return got.empty() ? nullptr : got[0];
  }

  void add_flow(uint32_t initial_seq, uint32_t id = kFlow, uint16_t sport = kPortA) {
    ASSERT_EQ(rx_->flow_add(id, tcp_flow(initial_seq, sport)), 0);
  }

  // Onto B's end of the wire, as if A's NIC had sent it.
  void inject(const Bytes& frame) {
    rte_mbuf* m = to_mbuf(frame);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(rte_ring_enqueue(wire_.ab, m), 0);
  }

  // The frame arrived whole, for the copy path.
  static void expect_whole(rte_mbuf* m, const Bytes& f) {
    ASSERT_EQ(m->pkt_len, f.size());
    Bytes flat(f.size());
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, m->pkt_len, flat.data()));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(0, std::memcmp(p, f.data(), f.size()));
  }

  static void expect_header_only(rte_mbuf* m) {
    EXPECT_EQ(m->pkt_len, 54u) << "header only";
    EXPECT_EQ(m->data_len, 54u);
    EXPECT_EQ(m->nb_segs, 1);
  }

  Wire wire_;
  std::string name_a_, name_b_;
  uint16_t a_ = 0, b_ = 0;
  std::unique_ptr<Nic> tx_, rx_;
  std::vector<rte_mbuf*> held_;
  unsigned pool_avail_ = 0, jumbo_avail_ = 0;
};

TEST_P(NicPair, InOrderPayloadEndingOnAnMsEdge) {
  constexpr uint32_t kSeq = 1000;
  add_flow(kSeq);
  Bytes mem(4096, kUntouched);
  ASSERT_EQ(rx_->mr_add(1, mem.data(), mem.size(), 42), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 1, 0, 1000, 0), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 1, 1100, 1000, 0), 0);
  Bytes stream = pattern(2000, 1);

  inject(tcp_frame(kSeq, stream.data(), 1000));
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  const rte_pmd_cleave_placement* p = &placement(m);
  EXPECT_EQ(p->decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(p->flow_id, kFlow);
  EXPECT_EQ(p->seq, kSeq);
  EXPECT_EQ(p->placed, 1000u);
  EXPECT_EQ(p->payload_len, 1000u);
  EXPECT_EQ(p->mr, 1);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(p), 0u);
  EXPECT_EQ(p->flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 1u) << "ends exactly on the MS's end";
  EXPECT_FALSE(p->flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ((p->flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  EXPECT_EQ((p->flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD);
  EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD);
  EXPECT_TRUE(m->ol_flags & RTE_MBUF_F_RX_FDIR_ID);
  EXPECT_EQ(m->hash.fdir.hi, kFlow);
  EXPECT_EQ(m->port, b_);
  expect_header_only(m);
  EXPECT_EQ(rte_be_to_cpu_32(rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, 34)->sent_seq), kSeq);

  ASSERT_EQ(rx_->cursor_update(kFlow, kSeq + 1000), 0);
  inject(tcp_frame(kSeq + 1000, stream.data() + 1000, 1000));
  m = receive_one();
  ASSERT_NE(m, nullptr);
  p = &placement(m);
  EXPECT_EQ(p->decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(p), 1100u) << "the next MS's first byte";
  EXPECT_EQ(p->flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 1u);
  EXPECT_FALSE(p->flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ(0, std::memcmp(mem.data(), stream.data(), 1000));
  EXPECT_EQ(0, std::memcmp(mem.data() + 1100, stream.data() + 1000, 1000));
  EXPECT_EQ(mem[1000], kUntouched);
  EXPECT_EQ(mem[1099], kUntouched);
  EXPECT_EQ(mem[2100], kUntouched);
  EXPECT_EQ(counter(*rx_, "nic_rx_in_order"), 2u);
  EXPECT_EQ(counter(*rx_, "nic_rx_placed_bytes"), 2000u);
}

TEST_P(NicPair, PayloadSpanningThreeMss) {
  add_flow(0);
  Bytes mem(2000, kUntouched);
  ASSERT_EQ(rx_->mr_add(2, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 2, 0, 500, 0), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 2, 600, 300, 0), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 2, 1000, 700, 0), 0);
  Bytes stream = pattern(1200, 2);
  inject(tcp_frame(0, stream.data(), 1200));
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  const rte_pmd_cleave_placement& p = placement(m);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(p.placed, 1200u);
  EXPECT_EQ(p.flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 3u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), 0u);
  expect_header_only(m);
  EXPECT_EQ(0, std::memcmp(mem.data(), stream.data(), 500));
  EXPECT_EQ(0, std::memcmp(mem.data() + 600, stream.data() + 500, 300));
  EXPECT_EQ(0, std::memcmp(mem.data() + 1000, stream.data() + 800, 400));
  EXPECT_EQ(mem[500], kUntouched);
  EXPECT_EQ(mem[599], kUntouched);
  EXPECT_EQ(mem[900], kUntouched);
  EXPECT_EQ(mem[1400], kUntouched);
  EXPECT_EQ(counter(*rx_, "nic_rx_fragments"), 3u);
}

TEST_P(NicPair, ZeroLengthPayloadIsNoPayload) {
  add_flow(50);
  Bytes mem(100, kUntouched);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 100, 0), 0);
  inject(tcp_frame(50, nullptr, 0));
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_NO_PAYLOAD);
  EXPECT_EQ(placement(m).payload_len, 0u);
  EXPECT_EQ(placement(m).placed, 0u);
  EXPECT_EQ(placement(m).flow_id, kFlow);
  expect_header_only(m);
  EXPECT_EQ(mem[0], kUntouched);
  EXPECT_EQ(counter(*rx_, "nic_rx_no_payload"), 1u);
}

TEST_P(NicPair, JumboFrameAndAChainedFrame) {
  add_flow(1);
  Bytes mem(20000, kUntouched);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 20000, 0), 0);
  Bytes stream = pattern(12000, 11);
  inject(tcp_frame(1, stream.data(), 8946));  // a 9000-byte frame
  // The next one in three segments, as a wire with small buffers would give it.
  Bytes f = tcp_frame(1 + 8946, stream.data() + 8946, 3000);
  rte_mbuf* head = to_segments(f, 1200);
  ASSERT_NE(head, nullptr);
  ASSERT_EQ(rte_ring_enqueue(wire_.ab, head), 0);
  std::vector<rte_mbuf*> got = receive(2);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(placement(got[0]).placed, 8946u);
  EXPECT_EQ(placement(got[0]).payload_len, 8946u);
  expect_header_only(got[0]);
  EXPECT_EQ(placement(got[1]).placed, 3000u);
  expect_header_only(got[1]);
  EXPECT_EQ(0, std::memcmp(mem.data(), stream.data(), 11946));
  EXPECT_EQ(mem[11946], kUntouched);
  EXPECT_EQ(counter(*rx_, "rx_linearized"), 1u);
}

TEST_P(NicPair, DuplicateDroppedAndPartialOverlapTrimmed) {
  constexpr uint32_t kSeq = 5000;
  add_flow(kSeq);
  Bytes mem(4000, 0);
  ASSERT_EQ(rx_->mr_add(4, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 4, 0, 4000, 0), 0);
  Bytes stream = pattern(3000, 5);
  auto seg = [&](uint32_t from, uint32_t len) {
    return tcp_frame(kSeq + from, stream.data() + from, len);
  };
  inject(seg(0, 2000));
  ASSERT_NE(receive_one(), nullptr);
  ASSERT_EQ(rx_->cursor_update(kFlow, kSeq + 2000), 0);
  inject(seg(0, 1000));     // wholly before the cursor
  inject(seg(1000, 1000));  // ends exactly at the cursor
  inject(seg(1500, 1000));  // half before the cursor
  std::vector<rte_mbuf*> got = receive(3);
  ASSERT_EQ(got.size(), 3u);
  for (int i : {0, 1}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(placement(got[i]).decision, RTE_PMD_CLEAVE_DROPPED);
    EXPECT_EQ(placement(got[i]).placed, 0u);
    EXPECT_EQ(placement(got[i]).payload_len, 1000u);
    expect_header_only(got[i]);
  }
  const rte_pmd_cleave_placement& p = placement(got[2]);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_TRIMMED);
  EXPECT_EQ(p.trimmed, 500u);
  EXPECT_EQ(p.placed, 500u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), 2000u);
  expect_header_only(got[2]);
  EXPECT_EQ(0, std::memcmp(mem.data(), stream.data(), 2500));
  EXPECT_EQ(mem[2500], 0);
  EXPECT_EQ(counter(*rx_, "nic_rx_dropped"), 2u);
  EXPECT_EQ(counter(*rx_, "nic_rx_trimmed"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_rx_trimmed_bytes"), 500u);
}

TEST_P(NicPair, PastAHoleThenARetransmissionOverwritesTheFutureMs) {
  constexpr uint32_t kSeq = 0xFFFFFC00;  // the sequence space wraps inside the MS
  add_flow(kSeq);
  Bytes mem(4000, kUntouched);
  ASSERT_EQ(rx_->mr_add(3, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 3, 0, 1500, 0), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 3, 2000, 1500, 0), 0);
  Bytes stream = pattern(3000, 8);
  Bytes stale = pattern(3000, 99);
  inject(tcp_frame(kSeq + 1000, stale.data() + 1000, 1000));  // past the hole, straddling
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_TRUE(placement(m).flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ(placement(m).flags & RTE_PMD_CLEAVE_F_NFRAGS_MASK, 2u);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&placement(m)), 1000u);
  EXPECT_EQ(0, std::memcmp(mem.data() + 1000, stale.data() + 1000, 500));
  EXPECT_EQ(0, std::memcmp(mem.data() + 2000, stale.data() + 1500, 500));

  inject(tcp_frame(kSeq + 1000, stream.data() + 1000, 1000));  // the retransmission
  m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_TRUE(placement(m).flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  inject(tcp_frame(kSeq, stream.data(), 1000));  // fills the hole
  m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_FALSE(placement(m).flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER);
  EXPECT_EQ(0, std::memcmp(mem.data(), stream.data(), 1500));
  EXPECT_EQ(0, std::memcmp(mem.data() + 2000, stream.data() + 1500, 500));
  EXPECT_EQ(mem[1500], kUntouched);
  EXPECT_EQ(mem[2500], kUntouched);
  EXPECT_EQ(counter(*rx_, "nic_rx_past_hole"), 2u);
  EXPECT_EQ(counter(*rx_, "nic_rx_in_order"), 1u);
}

TEST_P(NicPair, NoMsDefersTheWholeFrame) {
  add_flow(10);
  Bytes payload = pattern(500, 3);
  Bytes f = tcp_frame(10, payload.data(), 500);
  inject(f);
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  const rte_pmd_cleave_placement& p = placement(m);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(p.reason, RTE_PMD_CLEAVE_DEFER_NO_MS);
  EXPECT_EQ(p.flow_id, kFlow);
  EXPECT_EQ(p.placed, 0u);
  EXPECT_EQ(p.payload_len, 500u);
  EXPECT_EQ(m->hash.fdir.hi, kFlow);
  EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD);
  expect_whole(m, f);
  EXPECT_EQ(counter(*rx_, "nic_defer_no_ms"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_rx_deferred"), 1u);
}

TEST_P(NicPair, FlowTableFullAndFlowMissDeferTheWholeFrame) {
  add_flow(0);
  rte_pmd_cleave_flow f{};
  f.src_ip = kIpA;
  f.dst_ip = kIpB;
  f.src_port = 3333;
  f.dst_port = kPortB;
  f.proto = 6;
  f.reliable = 1;
  EXPECT_EQ(rx_->flow_add(64, f), -ENOSPC) << "max_flows=64: the table is full past id 63";
  Bytes payload = pattern(300, 4);
  Bytes frame = tcp_frame(0, payload.data(), 300, true, kIpA, kIpB, 3333);
  inject(frame);
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  const rte_pmd_cleave_placement& p = placement(m);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(p.reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
  EXPECT_EQ(p.flow_id, RTE_PMD_CLEAVE_NO_FLOW);
  EXPECT_FALSE(m->ol_flags & RTE_MBUF_F_RX_FDIR);
  expect_whole(m, frame);
  EXPECT_EQ(counter(*rx_, "nic_defer_flow_miss"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_cmd_err_flow_table_full"), 1u);
}

TEST_P(NicPair, CopyModeDefersTheWholeFrame) {
  add_flow(0);
  Bytes mem(1000, kUntouched);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 1000, 0), 0);
  ASSERT_EQ(rx_->flow_set_mode(kFlow, RTE_PMD_CLEAVE_COPY), 0);
  Bytes payload = pattern(400, 6);
  Bytes frame = tcp_frame(0, payload.data(), 400);
  inject(frame);
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(m).reason, RTE_PMD_CLEAVE_DEFER_COPY_MODE);
  EXPECT_TRUE(m->ol_flags & RTE_MBUF_F_RX_FDIR_ID);
  EXPECT_EQ(m->hash.fdir.hi, kFlow) << "marked: the flow matched";
  expect_whole(m, frame);
  EXPECT_EQ(mem[0], kUntouched);
  EXPECT_EQ(counter(*rx_, "nic_defer_copy_mode"), 1u);

  ASSERT_EQ(rx_->flow_set_mode(kFlow, RTE_PMD_CLEAVE_ZERO_COPY), 0);
  inject(frame);
  m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED) << "back to zero copy";
  EXPECT_EQ(0, std::memcmp(mem.data(), payload.data(), 400));
}

TEST_P(NicPair, HeaderOnlyTsoFromTheSendingNicIsPlaced) {
  constexpr uint32_t kLen = 65536, kMss = 1448, kSeq = 1000, kMsOff = 4096;
  add_flow(kSeq);
  Bytes mem(kMsOff + kLen + 4096, kUntouched);
  ASSERT_EQ(rx_->mr_add(1, mem.data(), mem.size(), 42), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 1, kMsOff, kLen, 0), 0);
  AppMemory app(pattern(kLen + 100, 3));
  ASSERT_EQ(tx_->mr_add(3, app.bytes.data(), app.bytes.size(), 42), 0);

  rte_mbuf* d = app.descriptor(tcp_frame(kSeq, nullptr, 0, false), 100, kLen, kMss);
  ASSERT_EQ(tx_->tx_burst(&d, 1), 1);
  constexpr uint32_t kFrames = (kLen + kMss - 1) / kMss;
  std::vector<rte_mbuf*> got = receive(kFrames);
  ASSERT_EQ(got.size(), kFrames);
  uint32_t placed = 0;
  for (uint32_t i = 0; i < kFrames; i++) {
    SCOPED_TRACE(i);
    rte_mbuf* m = got[i];
    const rte_pmd_cleave_placement& p = placement(m);
    expect_header_only(m);
    EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED);
    EXPECT_EQ(p.flow_id, kFlow);
    EXPECT_EQ(p.seq, kSeq + i * kMss);
    EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), kMsOff + i * kMss);
    EXPECT_EQ(p.placed, std::min(kMss, kLen - i * kMss));
    EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    EXPECT_EQ(m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK, RTE_MBUF_F_RX_L4_CKSUM_GOOD);
    EXPECT_EQ(rte_be_to_cpu_32(rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, 34)->sent_seq),
              kSeq + i * kMss);
    placed += p.placed;
  }
  EXPECT_EQ(placed, kLen);
  EXPECT_EQ(0, std::memcmp(mem.data() + kMsOff, app.bytes.data() + 100, kLen));
  EXPECT_EQ(mem[kMsOff - 1], kUntouched);
  EXPECT_EQ(mem[kMsOff + kLen], kUntouched);
  EXPECT_EQ(app.completions, 1) << "the extbuf was released once the payload was read";
  EXPECT_EQ(counter(*tx_, "nic_tx_tso_requests"), 1u);
  EXPECT_EQ(counter(*tx_, "nic_tx_frames"), kFrames);
  EXPECT_EQ(counter(*tx_, "tx_zero_copy"), 1u);
  EXPECT_EQ(counter(*tx_, "tx_bounce"), 0u);
  EXPECT_EQ(counter(*rx_, "nic_rx_placed_bytes"), kLen);
}

TEST_P(NicPair, PayloadOutsideAnyMrIsBouncedAndStillPlaced) {
  add_flow(77);
  Bytes mem(8192, 0);
  ASSERT_EQ(rx_->mr_add(2, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 2, 0, 8192, 0), 0);
  AppMemory app(pattern(3000, 9));  // never registered on A
  rte_mbuf* d = app.descriptor(tcp_frame(77, nullptr, 0, false), 0, 3000, 1448);
  ASSERT_EQ(tx_->tx_burst(&d, 1), 1);
  std::vector<rte_mbuf*> got = receive(3);
  ASSERT_EQ(got.size(), 3u);
  for (rte_mbuf* m : got)
    EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(0, std::memcmp(mem.data(), app.bytes.data(), 3000));
  EXPECT_EQ(counter(*tx_, "tx_bounce"), 1u);
  EXPECT_EQ(app.completions, 1);
}

TEST_P(NicPair, PlainFrameWithChecksumFlagsGetsCorrectChecksums) {
  Bytes payload = pattern(600, 2);
  Bytes f = tcp_frame(5, payload.data(), 600, /*csum=*/false);
  rte_mbuf* m = to_mbuf(f);
  ASSERT_NE(m, nullptr);
  m->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM;
  ASSERT_EQ(tx_->tx_burst(&m, 1), 1);
  rte_mbuf* r = receive_one();
  ASSERT_NE(r, nullptr);
  const rte_pmd_cleave_placement& p = placement(r);
  EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(p.reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
  EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  ASSERT_EQ(r->pkt_len, f.size());
  ASSERT_EQ(r->nb_segs, 1);
  auto* ip = rte_pktmbuf_mtod_offset(r, rte_ipv4_hdr*, 14);
  EXPECT_EQ(rte_ipv4_cksum(ip), 0) << "a correct header sums to zero";
  EXPECT_EQ(rte_ipv4_udptcp_cksum_verify(ip, ip + 1), 0);
  EXPECT_EQ(0, std::memcmp(rte_pktmbuf_mtod_offset(r, uint8_t*, 54), payload.data(), 600));

  // A frame without flags goes out untouched, its (wrong) checksums included.
  m = to_mbuf(f);
  ASSERT_EQ(tx_->tx_burst(&m, 1), 1);
  r = receive_one();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ((placement(r).flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_BAD);
  EXPECT_EQ(r->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_BAD);
  EXPECT_EQ(placement(r).reason, RTE_PMD_CLEAVE_DEFER_BAD_IP_CHECKSUM);
  EXPECT_EQ(counter(*tx_, "tx_pass_through"), 1u);
}

// Seeded wire faults on A's TX and B's RX: every frame sent arrives as often as the counters
// say (lost, duplicated), some out of order, none held for good; the same on both backends.
// RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG: the sending NIC writes each Solar block's CRC32C (net_cleave:
// the model; generic: the model merging in software) and the receiving NIC verifies and places
// it. Without the flag the CRC field goes out zero and the block is deferred.
TEST_P(NicPair, SolarBlockCrc32cFromTheDynamicFlag) {
  ASSERT_EQ(rx_->flow_add(kFlow, solar_flow()), 0);
  Bytes mem(8192, kUntouched);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 8192, 0), 0);
  AppMemory app(pattern(2200, 7));
  ASSERT_EQ(tx_->mr_add(3, app.bytes.data(), app.bytes.size(), 1), 0);
  const int bit = rte_pmd_cleave_tx_crc32c_bit();
  ASSERT_GE(bit, 0);
  const uint64_t csums = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;

  rte_mbuf* d = app.descriptor(solar_frame(1, 0, nullptr, 0), 0, 1000, 0);
  d->ol_flags = csums;
  ASSERT_EQ(tx_->tx_burst(&d, 1), 1);
  rte_mbuf* r = receive_one();
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(placement(r).decision, RTE_PMD_CLEAVE_DEFERRED);
  EXPECT_EQ(placement(r).reason, RTE_PMD_CLEAVE_DEFER_BAD_CRC32C);
  EXPECT_EQ(mem[0], kUntouched);

  // A header-only descriptor, then a plain frame holding header and block.
  d = app.descriptor(solar_frame(2, 0, nullptr, 0), 0, 1000, 0);
  d->ol_flags = csums | uint64_t(1) << bit;
  ASSERT_EQ(tx_->tx_burst(&d, 1), 1);
  rte_mbuf* plain = to_mbuf(solar_frame(3, 1000, app.bytes.data() + 1000, 1200));
  ASSERT_NE(plain, nullptr);
  plain->ol_flags = csums | uint64_t(1) << bit;
  ASSERT_EQ(tx_->tx_burst(&plain, 1), 1);
  std::vector<rte_mbuf*> got = receive(2);
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; i++) {
    SCOPED_TRACE(i);
    const uint32_t len = i == 0 ? 1000 : 1200;
    const rte_pmd_cleave_placement& p = placement(got[i]);
    EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED) << int(p.reason);
    EXPECT_EQ(p.parser, RTE_PMD_CLEAVE_PARSER_SOLAR);
    EXPECT_EQ(p.seq, 2u + i);
    EXPECT_EQ(p.placed, len);
    EXPECT_EQ((p.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
    EXPECT_EQ(got[i]->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK, RTE_MBUF_F_RX_IP_CKSUM_GOOD);
    ASSERT_EQ(got[i]->data_len, 74u) << "the header alone";
    const uint8_t* crc = rte_pktmbuf_mtod_offset(got[i], const uint8_t*, 42 + 28);
    const uint32_t want = crc32c_bitwise(app.bytes.data() + 1000 * i, len);
    EXPECT_EQ(uint32_t(crc[0]) << 24 | uint32_t(crc[1]) << 16 | uint32_t(crc[2]) << 8 | crc[3],
              want);
  }
  EXPECT_EQ(0, std::memcmp(mem.data(), app.bytes.data(), 2200));
  EXPECT_EQ(mem[2200], kUntouched);
  if (GetParam() == NicBackend::kGeneric) {
    EXPECT_EQ(counter(*tx_, "tx_sw_merged"), 3u) << "no DPDK offload computes the CRC32C";
    EXPECT_EQ(counter(*tx_, "tx_offloaded"), 0u);
  }
}

// Solar connections are found by B's connection number in the header (rte_pmd_cleave_flow.qpn),
// as QPs are by their DestQP: two between A and B take their own blocks into their own MSs; a
// number no flow has, or one of 2^24 or more, finds none; the same on both backends.
TEST_P(NicPair, SolarConnectionsAreFoundByTheirNumber) {
  ASSERT_EQ(rx_->flow_add(kFlow, solar_flow(0x1A)), 0);
  ASSERT_EQ(rx_->flow_add(kFlow + 1, solar_flow(0x2B)), 0);
  EXPECT_EQ(rx_->flow_add(kFlow + 2, solar_flow(0x2B)), -EEXIST);
  EXPECT_EQ(rx_->flow_add(kFlow + 2, solar_flow(1u << 24)), -EINVAL);
  rte_pmd_cleave_flow other_port = solar_flow(0x3C);
  other_port.dst_port = 7001;
  EXPECT_EQ(rx_->flow_add(kFlow + 2, other_port), -EINVAL);
  Bytes mem(8192, kUntouched);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 4096, 0), 0);
  ASSERT_EQ(rx_->ms_post(kFlow + 1, 0, 4096, 4096, 0), 0);
  const Bytes blocks = pattern(1000, 9);
  const int bit = rte_pmd_cleave_tx_crc32c_bit();
  ASSERT_GE(bit, 0);
  const uint32_t conns[] = {0x1A, 0x2B, 0x3C, 0x0100001A};
  for (uint32_t i = 0; i < 4; i++) {
    rte_mbuf* m = to_mbuf(solar_frame(i, 0, blocks.data() + 250 * i, 250, conns[i]));
    ASSERT_NE(m, nullptr);
    m->ol_flags =
        RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM | uint64_t(1) << bit;
    ASSERT_EQ(tx_->tx_burst(&m, 1), 1);
  }
  std::vector<rte_mbuf*> got = receive(4);
  ASSERT_EQ(got.size(), 4u);
  for (uint32_t i = 0; i < 4; i++) {
    SCOPED_TRACE(i);
    const rte_pmd_cleave_placement& p = placement(got[i]);
    if (i < 2) {
      EXPECT_EQ(p.flow_id, kFlow + i);
      EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_PLACED) << int(p.reason);
      EXPECT_EQ(p.parser, RTE_PMD_CLEAVE_PARSER_SOLAR);
      EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(&p), 4096u * i);
      EXPECT_EQ(0, std::memcmp(mem.data() + 4096 * i, blocks.data() + 250 * i, 250));
      EXPECT_EQ(mem[4096 * i + 250], kUntouched);
    } else {
      EXPECT_EQ(p.flow_id, RTE_PMD_CLEAVE_NO_FLOW);
      EXPECT_EQ(p.decision, RTE_PMD_CLEAVE_DEFERRED);
      EXPECT_EQ(p.reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
    }
  }
}

TEST_P(NicPair, WireFaultsLoseReorderAndDuplicateAsCounted) {
  using cleave::dp::FaultDir;
  using cleave::dp::FaultParams;
  ASSERT_EQ(tx_->set_faults(FaultDir::kTx, FaultParams{0.1, 0.1, 0.1, 5}), 0);
  ASSERT_EQ(rx_->set_faults(FaultDir::kRx, FaultParams{0.1, 0.1, 0.1, 6}), 0);
  EXPECT_EQ(rx_->set_faults(FaultDir::kRx, FaultParams{1.5, 0, 0, 6}), -EINVAL);
  EXPECT_EQ(rx_->faults(FaultDir::kRx), (FaultParams{0.1, 0.1, 0.1, 6})) << "kept";
  EXPECT_EQ(rx_->faults(FaultDir::kTx), FaultParams{}) << "the other direction is off";

  constexpr uint32_t kFrames = 600;
  std::vector<uint32_t> got;
  // Both Nics polled as a dataplane loop would (A's rx_burst is its every-loop poll too).
  auto pump = [&](int idle_rounds) {
    for (int idle = 0; idle < idle_rounds;) {
      rte_mbuf* bufs[32];
      tx_->tx_burst(nullptr, 0);
      EXPECT_EQ(tx_->rx_burst(bufs, 32), 0);
      const uint16_t n = rx_->rx_burst(bufs, 32);
      for (uint16_t i = 0; i < n; i++) {
        // The frames belong to no flow: whole, the sequence number says which one.
        const auto* tcp = rte_pktmbuf_mtod_offset(bufs[i], const rte_tcp_hdr*, 34);
        got.push_back(rte_be_to_cpu_32(tcp->sent_seq));
        rte_pktmbuf_free(bufs[i]);
      }
      idle = n == 0 ? idle + 1 : 0;
    }
  };
  const Bytes payload = pattern(100, 1);
  for (uint32_t i = 0; i < kFrames; i += 20) {
    rte_mbuf* batch[20];
    for (uint32_t j = 0; j < 20; j++) {
      batch[j] = to_mbuf(tcp_frame(i + j, payload.data(), 100));
      ASSERT_NE(batch[j], nullptr);
    }
    ASSERT_EQ(tx_->tx_burst(batch, 20), 20);
    pump(1);
  }
  pump(200);

  const auto a = counters(*tx_);
  const auto b = counters(*rx_);
  const uint64_t tx_dropped = a.at("fault_tx_dropped"), tx_dup = a.at("fault_tx_duplicated");
  const uint64_t rx_dropped = b.at("fault_rx_dropped"), rx_dup = b.at("fault_rx_duplicated");
  EXPECT_GT(tx_dropped, 0u);
  EXPECT_GT(tx_dup, 0u);
  EXPECT_GT(a.at("fault_tx_reordered"), 0u);
  EXPECT_GT(rx_dropped, 0u);
  EXPECT_GT(rx_dup, 0u);
  EXPECT_GT(b.at("fault_rx_reordered"), 0u);
  EXPECT_EQ(a.at("fault_rx_dropped") + b.at("fault_tx_dropped"), 0u) << "directions apart";
  // What B delivered: what A put on the wire, less B's losses, plus B's copies.
  EXPECT_EQ(got.size(), kFrames - tx_dropped + tx_dup - rx_dropped + rx_dup);
  EXPECT_FALSE(std::is_sorted(got.begin(), got.end())) << "some frames came out of order";
  std::map<uint32_t, int> seen;
  for (uint32_t s : got)
    seen[s]++;
  for (auto [s, n] : seen) {
    EXPECT_LT(s, kFrames);
    EXPECT_LE(n, 4) << "frame " << s;
  }

  // Off: nothing more happens to frames, and they arrive in order.
  ASSERT_EQ(tx_->set_faults(FaultDir::kTx, FaultParams{}), 0);
  ASSERT_EQ(rx_->set_faults(FaultDir::kRx, FaultParams{}), 0);
  got.clear();
  rte_mbuf* batch[10];
  for (uint32_t j = 0; j < 10; j++)
    batch[j] = to_mbuf(tcp_frame(1000 + j, payload.data(), 100));
  ASSERT_EQ(tx_->tx_burst(batch, 10), 10);
  pump(50);
  ASSERT_EQ(got.size(), 10u);
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(counters(*tx_).at("fault_tx_dropped"), tx_dropped);
  EXPECT_EQ(counters(*rx_).at("fault_rx_duplicated"), rx_dup);
}

// A TCP stream cut into packets that are lost, reordered and duplicated on the wire, then
// retransmitted, over MSs with gaps between them and a sequence space that wraps: the receiver
// plays the transport (cursor, retiring MSs) and every byte below the cursor is the stream's.
TEST_P(NicPair, RandomizedStreamLandsExactly) {
  const char* env = std::getenv("CLEAVE_NIC_SEED");
  const uint32_t seed = env != nullptr ? uint32_t(std::strtoul(env, nullptr, 0)) : 20240611u;
  SCOPED_TRACE("CLEAVE_NIC_SEED=" + std::to_string(seed));
  std::mt19937 rng(seed);
  auto uniform = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  constexpr uint32_t kLen = 400000, kGap = 64;
  const uint32_t iseq = 0xFFFFFFFFu - uniform(0, kLen);  // wraps somewhere in the stream
  add_flow(iseq);
  Bytes stream(kLen);
  for (uint8_t& b : stream)
    b = uint8_t(rng());

  // MSs of random sizes, kGap bytes apart in the MR.
  struct Ms {
    uint32_t from, len;
    uint64_t at;
  };
  std::vector<Ms> ms;
  for (uint32_t from = 0, at = 0; from < kLen;) {
    const uint32_t len = std::min(uniform(1000, 20000), kLen - from);
    ms.push_back({from, len, at});
    from += len;
    at += len + kGap;
  }
  Bytes mem(ms.back().at + ms.back().len + kGap, kUntouched);
  ASSERT_EQ(rx_->mr_add(5, mem.data(), mem.size(), 1), 0);
  for (const Ms& s : ms)
    ASSERT_EQ(rx_->ms_post(kFlow, 5, s.at, s.len, 0), 0);
  auto mem_at = [&](uint32_t pos) {
    auto it = std::upper_bound(ms.begin(), ms.end(), pos,
                               [](uint32_t v, const Ms& s) { return v < s.from; });
    --it;
    return it->at + (pos - it->from);
  };

  struct Seg {
    uint32_t from, len;
  };
  std::vector<Seg> segs;
  for (uint32_t from = 0; from < kLen;) {
    const uint32_t len = std::min(uniform(1, 1460), kLen - from);
    segs.push_back({from, len});
    from += len;
  }
  std::vector<bool> got(kLen, false);
  uint32_t cursor = 0;
  size_t retired = 0;
  uint64_t frames = 0, dropped = 0, trimmed = 0;
  auto check_below_cursor = [&] {
    for (uint32_t pos = 0; pos < cursor; pos++) {
      if (mem[mem_at(pos)] != stream[pos]) {
        ADD_FAILURE() << "byte " << pos << " below the cursor " << cursor << " differs";
        return;
      }
    }
  };

  std::vector<Seg> to_send = segs;
  for (int round = 0; cursor < kLen && round < 500; round++) {
    // A window of up to 16 packets: some lost, some sent twice, shuffled within the window.
    std::vector<Seg> window;
    size_t take = std::min<size_t>(to_send.size(), 16);
    std::vector<Seg> lost;
    for (size_t i = 0; i < take; i++) {
      const uint32_t r = uniform(0, 99);
      if (r < 8) {
        lost.push_back(to_send[i]);
        continue;
      }
      window.push_back(to_send[i]);
      if (r < 16) window.push_back(to_send[i]);
    }
    to_send.erase(to_send.begin(), to_send.begin() + long(take));
    std::shuffle(window.begin(), window.end(), rng);
    for (const Seg& s : window)
      inject(tcp_frame(iseq + s.from, stream.data() + s.from, s.len));
    std::vector<rte_mbuf*> rx = receive(window.size());
    ASSERT_EQ(rx.size(), window.size());
    for (rte_mbuf* m : rx) {
      const rte_pmd_cleave_placement& p = placement(m);
      ASSERT_NE(p.decision, RTE_PMD_CLEAVE_DEFERRED) << "reason " << int(p.reason);
      ASSERT_EQ(m->pkt_len, 54u);
      frames++;
      dropped += p.decision == RTE_PMD_CLEAVE_DROPPED ? 1 : 0;
      trimmed += p.decision == RTE_PMD_CLEAVE_TRIMMED ? 1 : 0;
      const uint32_t from = p.seq - iseq + p.trimmed;
      ASSERT_LE(from + p.placed, kLen);
      if (p.placed > 0) {
        ASSERT_EQ(rte_pmd_cleave_placement_mr_offset(&p), mem_at(from));
      }
      for (uint32_t i = 0; i < p.placed; i++)
        got[from + i] = true;
    }
    for (rte_mbuf* m : rx)
      rte_pktmbuf_free(m);
    held_.clear();
    // The transport: advance the cursor over the in-order prefix, retire passed MSs.
    while (cursor < kLen && got[cursor])
      cursor++;
    ASSERT_EQ(rx_->cursor_update(kFlow, iseq + cursor), 0);
    size_t passed = retired;
    while (passed < ms.size() && ms[passed].from + ms[passed].len <= cursor)
      passed++;
    if (passed > retired) {
      ASSERT_EQ(rx_->ms_retire(kFlow, uint32_t(passed - retired)), 0);
      retired = passed;
    }
    if (round % 8 == 0) check_below_cursor();
    // Lost packets are retransmitted two windows later.
    to_send.insert(to_send.begin() + long(std::min<size_t>(to_send.size(), 32)), lost.begin(),
                   lost.end());
    if (to_send.empty() && cursor < kLen) {
      for (const Seg& s : segs) {
        if (!got[s.from] || !got[s.from + s.len - 1]) to_send.push_back(s);
      }
    }
    // And old bytes again, cut anew and sent next: below the cursor (dropped), across it (trimmed)
    // or past it (placed over what is there).
    for (uint32_t k = uniform(0, 2); k > 0; k--) {
      const uint32_t from = uniform(0, 1) == 0 && cursor > 1460 && cursor < kLen
                                ? uniform(cursor - 1460, cursor - 1)
                                : uniform(0, std::min(kLen - 1, cursor + 2000));
      to_send.insert(to_send.begin(), {from, std::min(uniform(1, 1460), kLen - from)});
    }
  }
  EXPECT_EQ(cursor, kLen);
  check_below_cursor();
  EXPECT_GT(dropped, 0u) << "duplicates below the cursor happened";
  EXPECT_GT(trimmed, 0u) << "retransmissions straddling the cursor happened";
  EXPECT_EQ(counter(*rx_, "nic_rx_frames"), frames);
  EXPECT_EQ(counter(*rx_, "nic_rx_dropped"), dropped);
  EXPECT_EQ(counter(*rx_, "nic_rx_trimmed"), trimmed);
  EXPECT_GT(counter(*rx_, "nic_rx_past_hole"), 0u);
}

TEST_P(NicPair, CountersHaveTheSameNamesOnBothBackendsAndMove) {
  // Exactly the names net_cleave's xstats give the model's counters and memory.
  cleave::nic::NicModel model;
  std::set<std::string> want;
  for (size_t i = 0; i < cleave::nic::kCounterCount; i++)
    want.insert("nic_" + std::string(cleave::nic::NicModel::counter_name(i)));
  for (const cleave::nic::MemoryLine& l : model.memory_report().lines) {
    want.insert("nic_mem_" + std::string(l.name) + "_bytes");
    want.insert("nic_mem_" + std::string(l.name) + "_in_use");
  }
  want.insert("nic_mem_total_bytes");
  std::set<std::string> have;
  for (const auto& [name, value] : counters(*rx_)) {
    if (name.starts_with("nic_")) have.insert(name);
  }
  EXPECT_EQ(have, want);
  for (const char* common :
       {"rx_good_packets", "rx_good_bytes", "tx_good_packets", "tx_good_bytes", "rx_linearized",
        "tx_bounce", "tx_zero_copy", "tx_pass_through", "tx_errors", "tx_wire_full"}) {
    EXPECT_TRUE(counters(*rx_).count(common)) << common;
  }
  EXPECT_EQ(counter(*rx_, "nic_mem_flow_table_bytes"), 64u * 96u);
  EXPECT_EQ(counter(*rx_, "nic_mem_flow_table_in_use"), 0u);

  add_flow(10);
  Bytes mem(100, 0);
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 100, 0), 0);
  EXPECT_EQ(counter(*rx_, "nic_mem_flow_table_in_use"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_mem_ms_committed_in_use"), 1u);
  Bytes payload = pattern(400, 0);
  inject(tcp_frame(10, payload.data(), 400));  // no MS covers it
  inject(tcp_frame(10, payload.data(), 100));  // placed
  ASSERT_EQ(receive(2).size(), 2u);
  EXPECT_EQ(counter(*rx_, "nic_rx_frames"), 2u);
  EXPECT_EQ(counter(*rx_, "nic_defer_no_ms"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_rx_in_order"), 1u);
  EXPECT_EQ(counter(*rx_, "rx_good_packets"), 2u);
  EXPECT_EQ(counter(*rx_, "rx_good_bytes"), 454u + 154u);
  EXPECT_EQ(rx_->ms_post(99, 0, 0, 10, 0), -ENOENT);
  EXPECT_EQ(counter(*rx_, "nic_cmd_err_unknown_flow"), 1u);

  Bytes f = tcp_frame(1, payload.data(), 100);
  rte_mbuf* m = to_mbuf(f);
  ASSERT_EQ(tx_->tx_burst(&m, 1), 1);
  ASSERT_EQ(receive(1).size(), 1u);
  EXPECT_EQ(counter(*tx_, "tx_good_packets"), 1u);
  EXPECT_EQ(counter(*tx_, "tx_good_bytes"), f.size());
}

TEST_P(NicPair, CommandsReportTheSameErrors) {
  Bytes mem(1000);
  EXPECT_EQ(rx_->mr_add(16, mem.data(), mem.size(), 1), -ENOSPC) << "max_mrs=16";
  ASSERT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), 0);
  EXPECT_EQ(rx_->mr_add(0, mem.data(), mem.size(), 1), -EEXIST);
  EXPECT_EQ(rx_->ms_post(kFlow, 0, 0, 10, 0), -ENOENT);
  add_flow(0);
  rte_pmd_cleave_flow dup = tcp_flow(0);  // flow kFlow's key again
  EXPECT_EQ(rx_->flow_add(kFlow, dup), -EEXIST);
  dup.parser = 9;
  EXPECT_EQ(rx_->flow_add(8, dup), -EINVAL);
  EXPECT_EQ(rx_->ms_post(kFlow, 0, 900, 200, 0), -ERANGE);
  EXPECT_EQ(rx_->ms_post(kFlow, 5, 0, 10, 0), -ENOENT);
  EXPECT_EQ(rx_->ms_post(kFlow, 16, 0, 10, 0), -ENOENT) << "the bounce MR is the NIC's own";
  ASSERT_EQ(rx_->ms_post(kFlow, 0, 0, 500, 0), 0);
  EXPECT_EQ(rx_->mr_remove(0), -EBUSY);
  // The per-burst commands are posted: a refusal is counted, not returned.
  EXPECT_EQ(rx_->ms_retire(kFlow, 1), 0);  // the cursor has not passed it
  EXPECT_EQ(counter(*rx_, "nic_cmd_err_not_consumed"), 1u);
  ASSERT_EQ(rx_->cursor_update(kFlow, 500), 0);
  EXPECT_EQ(rx_->ms_retire(kFlow, 1), 0);
  EXPECT_EQ(rx_->ms_retire_msg(kFlow, 3), 0);    // not a message flow
  EXPECT_EQ(rx_->cursor_update(kFlow, 499), 0);  // backwards
  EXPECT_EQ(rx_->roce_resync(kFlow, 0, 0), -EINVAL);
  EXPECT_EQ(counter(*rx_, "nic_cmd_err_not_consumed"), 1u);
  EXPECT_EQ(counter(*rx_, "nic_cmd_err_bad_argument"), 2u + 1u);  // and roce_resync's
  EXPECT_EQ(rx_->flow_remove(kFlow), 0);
  EXPECT_EQ(rx_->flow_remove(kFlow), -ENOENT);
  EXPECT_EQ(rx_->mr_remove(0), 0);
  EXPECT_EQ(rx_->mr_remove(0), -ENOENT);
  EXPECT_EQ(rx_->mr_remove(16), -ENOENT);
}

// Interrupts are the cleave backend's: a raised vector is written to its eventfd when the NIC
// next runs. The generic backend has none, and says so (its caller writes the eventfd).
TEST_P(NicPair, InterruptsOnTheCleaveBackendOnly) {
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(efd, 0);
  const int v = rx_->irq_bind(efd);
  if (GetParam() == NicBackend::kGeneric) {
    EXPECT_EQ(v, -ENOTSUP);
    EXPECT_EQ(rx_->irq_raise(0), -ENOTSUP);
    EXPECT_EQ(rx_->irq_unbind(0), -ENOTSUP);
  } else {
    ASSERT_GE(v, 0);
    ASSERT_EQ(rx_->irq_raise(uint32_t(v)), 0);
    rte_mbuf* none[1];
    EXPECT_EQ(rx_->rx_burst(none, 1), 0);  // the NIC runs, inline
    uint64_t n = 0;
    EXPECT_EQ(read(efd, &n, sizeof n), ssize_t(sizeof n));
    EXPECT_EQ(n, 1u);
    EXPECT_EQ(counter(*rx_, "irqs"), 1u);
    EXPECT_EQ(rx_->irq_unbind(uint32_t(v)), 0);
  }
  close(efd);
}

// RoCE on the NIC: QPs between the same hosts found by DestQP, rkeys with owner, tag and access,
// READ responses into the sinks read_post() gave, rkey_check(): the same answers on both.
TEST_P(NicPair, RoceQpsRkeysAndReadSinks) {
  Bytes mem(8192, kUntouched), other(4096, kUntouched);
  ASSERT_EQ(rx_->flow_add(3, roce_flow(0x11, 1)), 0);
  ASSERT_EQ(rx_->flow_add(4, roce_flow(0x12, 2)), 0);
  ASSERT_EQ(rx_->flow_add(5, roce_flow(0x12, 2)), -EEXIST) << "same hosts, same QP";
  ASSERT_EQ(rx_->mr_add(1, mem.data(), mem.size(), 1, RTE_PMD_CLEAVE_MR_REMOTE_WRITE, 0xA1), 0);
  ASSERT_EQ(rx_->mr_add(2, other.data(), other.size(), 2, RTE_PMD_CLEAVE_MR_REMOTE_WRITE), 0);
  EXPECT_EQ(rx_->mr_add(3, other.data(), other.size(), 2, 4), -EINVAL) << "no such access";
  const Bytes data = pattern(300, 3);
  const uint32_t key1 = 0xA1u << 16 | 1;
  inject(roce_frame(0x0A, 0, 0x11, reth(0x100, key1, 64), data.data(), 64));
  inject(roce_frame(0x0A, 0, 0x12, reth(0x200, 2, 64), data.data(), 64));
  inject(roce_frame(0x0A, 1, 0x11, reth(0x200, 2, 64), data.data(), 64));     // QP 0x11 → owner 2
  inject(roce_frame(0x0A, 1, 0x11, reth(0x200, 1, 64), data.data(), 64));     // no tag
  inject(roce_frame(0x0A, 0, 0x13, reth(0x200, key1, 64), data.data(), 64));  // no such QP
  ASSERT_EQ(rx_->read_post(3, 0x100, 1, 0x1000, 300), 0);  // PMTU 256: PSNs 0x100, 0x101
  inject(roce_frame(0x0F, 0x101, 0x11, kAeth, data.data() + 256, 44));
  inject(roce_frame(0x0D, 0x100, 0x11, kAeth, data.data(), 256));
  std::vector<rte_mbuf*> got = receive(7);
  ASSERT_EQ(got.size(), 7u);
  const rte_pmd_cleave_placement* p[7];
  for (size_t i = 0; i < 7; i++)
    p[i] = &placement(got[i]);
  EXPECT_EQ(p[0]->decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(p[0]->flow_id, 3u);
  EXPECT_EQ(p[1]->decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(p[1]->flow_id, 4u);
  EXPECT_EQ(p[1]->mr, 2);
  for (size_t i : {2, 3}) {
    EXPECT_EQ(p[i]->decision, RTE_PMD_CLEAVE_DEFERRED) << i;
    EXPECT_EQ(p[i]->reason, RTE_PMD_CLEAVE_DEFER_REMOTE_ACCESS) << i;
  }
  EXPECT_EQ(p[4]->reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
  EXPECT_EQ(p[5]->decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(rte_pmd_cleave_placement_mr_offset(p[5]), 0x1000u + 256);
  EXPECT_EQ(p[5]->msg_seq, 0x100u);
  EXPECT_EQ(p[6]->decision, RTE_PMD_CLEAVE_PLACED);
  Bytes want(mem.size(), kUntouched), want_other(other.size(), kUntouched);
  std::copy(data.begin(), data.begin() + 64, want.begin() + 0x100);
  std::copy(data.begin(), data.end(), want.begin() + 0x1000);
  std::copy(data.begin(), data.begin() + 64, want_other.begin() + 0x200);
  EXPECT_EQ(mem, want) << "placed where the keys and sinks say, nothing else";
  EXPECT_EQ(other, want_other);
  EXPECT_EQ(counter(*rx_, "nic_defer_remote_access"), 2u);

  // Retired: a late duplicate goes to the copy path.
  EXPECT_EQ(rx_->read_retire(3, 0x100), 0);
  EXPECT_EQ(rx_->read_retire(3, 0x100), -ENOMSG);
  inject(roce_frame(0x0D, 0x100, 0x11, kAeth, data.data(), 256));
  rte_mbuf* m = receive_one();
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(placement(m).reason, RTE_PMD_CLEAVE_DEFER_NO_MESSAGE);
  // The commands' refusals.
  EXPECT_EQ(rx_->read_post(3, 0x200, 2, 0, 10), -EACCES) << "another owner's MR";
  EXPECT_EQ(rx_->read_post(3, 0x200, 1, 8190, 10), -ERANGE);
  EXPECT_EQ(rx_->read_post(9, 0x200, 1, 0, 10), -ENOENT);
  EXPECT_EQ(rx_->read_post(3, 0x200, 16, 0, 10), -ENOENT) << "the bounce MR is the NIC's own";
  ASSERT_EQ(rx_->read_post(3, 0x200, 1, 0, 10), 0);
  EXPECT_EQ(rx_->read_post(3, 0x200, 1, 0, 10), -EINVAL) << "the same PSN";
  EXPECT_EQ(rx_->mr_remove(1), -EBUSY) << "a READ sink holds it";
  uint16_t id = 0;
  EXPECT_EQ(rx_->rkey_check(3, key1, 0, 8192, RTE_PMD_CLEAVE_MR_REMOTE_WRITE, &id), 0);
  EXPECT_EQ(id, 1);
  EXPECT_EQ(rx_->rkey_check(3, key1, 0, 8192, RTE_PMD_CLEAVE_MR_REMOTE_READ, &id), -EACCES);
  EXPECT_EQ(rx_->rkey_check(3, 2, 0, 8, RTE_PMD_CLEAVE_MR_REMOTE_WRITE, nullptr), -EACCES);
  EXPECT_EQ(rx_->rkey_check(3, key1, 0, 8, 0, nullptr), -EINVAL);
  EXPECT_EQ(rx_->rkey_check(9, key1, 0, 8, RTE_PMD_CLEAVE_MR_REMOTE_WRITE, nullptr), -ENOENT);
  EXPECT_EQ(rx_->flow_remove(3), 0);
  EXPECT_EQ(rx_->mr_remove(1), 0);
}

// A QP's recovery reaches the NIC with its flow: go-back-N places only the request at the PSN
// it expects next (a WRITE's last packet and a flag past a lost middle are deferred, untouched,
// and placed once the middle came); selective repeat places them past the gap. The same on both
// backends (the generic one places in software by the same rules).
TEST_P(NicPair, RoceGoBackNPlacesInOrderOnly) {
  for (bool sr : {true, false}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-N");
    Bytes mem(8192, kUntouched);
    rte_pmd_cleave_flow f = roce_flow(0x11, 1, 0x10);
    f.selective_repeat = sr ? 1 : 0;
    ASSERT_EQ(rx_->flow_add(3, f), 0);
    ASSERT_EQ(rx_->mr_add(1, mem.data(), mem.size(), 1, RTE_PMD_CLEAVE_MR_REMOTE_WRITE, 0xA1), 0);
    const uint32_t key = 0xA1u << 16 | 1;
    const Bytes data = pattern(600, 5), flag = pattern(8, 6);
    inject(roce_frame(0x06, 0x10, 0x11, reth(0x100, key, 600), data.data(), 256));
    inject(roce_frame(0x08, 0x12, 0x11, {}, data.data() + 512, 88));  // the middle is lost
    inject(roce_frame(0x0A, 0x13, 0x11, reth(0x1000, key, 8), flag.data(), 8));
    std::vector<rte_mbuf*> got = receive(3);
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(placement(got[0]).decision, RTE_PMD_CLEAVE_PLACED);
    for (size_t i : {1, 2}) {
      if (sr) {
        EXPECT_EQ(placement(got[i]).decision, RTE_PMD_CLEAVE_PLACED) << i;
      } else {
        EXPECT_EQ(placement(got[i]).decision, RTE_PMD_CLEAVE_DEFERRED) << i;
        EXPECT_EQ(placement(got[i]).reason, RTE_PMD_CLEAVE_DEFER_OUT_OF_SEQUENCE) << i;
      }
    }
    EXPECT_EQ(mem[0x1000], sr ? flag[0] : kUntouched) << "the flag, before its data's middle";
    EXPECT_EQ(counter(*rx_, "nic_defer_out_of_sequence"), sr ? 0u : 2u);
    if (!sr) {
      // The middle: it and what follows are placed, in order.
      inject(roce_frame(0x07, 0x11, 0x11, {}, data.data() + 256, 256));
      inject(roce_frame(0x08, 0x12, 0x11, {}, data.data() + 512, 88));
      inject(roce_frame(0x0A, 0x13, 0x11, reth(0x1000, key, 8), flag.data(), 8));
      std::vector<rte_mbuf*> more = receive(3);
      ASSERT_EQ(more.size(), 3u);
      for (rte_mbuf* m : more)
        EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
      EXPECT_TRUE(std::equal(data.begin(), data.end(), mem.begin() + 0x100));
    }
    EXPECT_TRUE(std::equal(flag.begin(), flag.end(), mem.begin() + 0x1000));
    EXPECT_EQ(rx_->flow_remove(3), 0);
    EXPECT_EQ(rx_->mr_remove(1), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, NicPair,
                         ::testing::Values(NicBackend::kCleave, NicBackend::kGeneric),
                         [](const ::testing::TestParamInfo<NicBackend>& i) {
                           return std::string(cleave::dp::backend_name(i.param));
                         });

// ---- several queues: one Nic per queue, each on its own lcore -------------------------------

// Frames from A (kIpA:kPortA, the "server") to B's local port `dport`, the port a shard of B chose
// for its connection. What rx_burst handed the shard, by that port.
uint16_t frame_dport(rte_mbuf* m) {
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  return uint16_t(f[36] << 8 | f[37]);
}
uint32_t frame_seq(rte_mbuf* m) {
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  return uint32_t(f[38]) << 24 | uint32_t(f[39]) << 16 | uint32_t(f[40]) << 8 | f[41];
}
uint16_t rss_queue(uint16_t dport) {
  using namespace cleave::rss;
  return reta_queue(default_reta(2), hash_ipv4_l4(kDefaultKey, kIpA, kIpB, kPortA, dport));
}

constexpr uint32_t kQueueFrames = 100;  // per flow
constexpr uint32_t kQueuePayload = 64;

// One shard: queue q of A (sends its flows' frames) and of B (receives what is steered to q).
struct Shard {
  Nic* a = nullptr;
  Nic* b = nullptr;
  std::vector<uint16_t> sends;  // the destination ports of the flows it sends
  std::atomic<uint64_t>* received = nullptr;
  uint64_t total = 0;
  std::vector<std::pair<uint16_t, uint32_t>> got;  // (port, seq) in the order received
  std::vector<uint32_t> placed;                    // bytes placed per frame of a zero-copy flow
  uint32_t arp = 0;
  bool timed_out = false;
};

void shard_main(Shard& s) {
  Bytes payload = pattern(kQueuePayload, 9);
  std::vector<uint32_t> next(s.sends.size(), 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s.received->load() < s.total) {
    if (std::chrono::steady_clock::now() > deadline) {
      s.timed_out = true;
      break;
    }
    rte_mbuf* out[32];
    uint16_t n = 0;
    std::vector<size_t> took;
    for (size_t i = 0; i < s.sends.size() && n < 32; i++) {
      if (next[i] < kQueueFrames) {
        out[n++] = to_mbuf(tcp_frame(next[i] * kQueuePayload, payload.data(), kQueuePayload, true,
                                     kIpA, kIpB, kPortA, s.sends[i]));
        took.push_back(i);
      }
    }
    const uint16_t sent = s.a->tx_burst(out, n);  // n = 0 too: the NIC flushes
    for (uint16_t i = 0; i < sent; i++)
      next[took[i]]++;
    rte_pktmbuf_free_bulk(out + sent, n - sent);
    rte_mbuf* in[32];
    const uint16_t got = s.b->rx_burst(in, 32);
    for (uint16_t i = 0; i < got; i++) {
      const auto* f = rte_pktmbuf_mtod(in[i], const uint8_t*);
      if (f[12] == 0x08 && f[13] == 0x06) {
        s.arp++;
        continue;
      }
      s.got.emplace_back(frame_dport(in[i]), frame_seq(in[i]));
      const rte_pmd_cleave_placement& p = placement(in[i]);
      if (p.decision == RTE_PMD_CLEAVE_PLACED) s.placed.push_back(p.placed);
    }
    rte_pktmbuf_free_bulk(in, got);
    s.received->fetch_add(got);
  }
}

class NicQueues : public ::testing::TestWithParam<NicBackend> {
 protected:
  void SetUp() override {
    pool_avail_ = rte_mempool_avail_count(g_pool);
    const std::string n = std::to_string(++g_seq);
    ASSERT_NO_FATAL_FAILURE(wire_.make(n));
    uint16_t pairs = 1;
    if (GetParam() == NicBackend::kCleave) {
      for (std::string* name : {&name_a_, &name_b_})
        *name = (name == &name_a_ ? "net_cleave_qa" : "net_cleave_qb") + n;
      ASSERT_EQ(rte_vdev_init(name_a_.c_str(), ("wire=" + wire_.wa_name + kCleaveSizing).c_str()),
                0);
      ASSERT_EQ(rte_vdev_init(name_b_.c_str(), ("wire=" + wire_.wb_name + kCleaveSizing).c_str()),
                0);
      ASSERT_EQ(rte_eth_dev_get_port_by_name(name_a_.c_str(), &a_), 0);
      ASSERT_EQ(rte_eth_dev_get_port_by_name(name_b_.c_str(), &b_), 0);
      pairs = 2;  // net_cleave steers into queues of its own
    } else {
      a_ = wire_.wa;  // one queue pair, split by the software stage
      b_ = wire_.wb;
    }
    for (uint16_t p : {a_, b_}) {
      rte_eth_conf conf{};
      conf.rxmode.mtu = 9000;
      conf.rxmode.mq_mode = pairs > 1 ? RTE_ETH_MQ_RX_RSS : RTE_ETH_MQ_RX_NONE;
      ASSERT_EQ(rte_eth_dev_configure(p, pairs, pairs, &conf), 0);
      for (uint16_t q = 0; q < pairs; q++) {
        ASSERT_EQ(rte_eth_rx_queue_setup(p, q, 512, SOCKET_ID_ANY, nullptr, g_pool), 0);
        ASSERT_EQ(rte_eth_tx_queue_setup(p, q, 512, SOCKET_ID_ANY, nullptr), 0);
      }
      ASSERT_EQ(rte_eth_dev_start(p), 0);
    }
    for (uint16_t q = 0; q < 2; q++) {
      a_nics_.push_back(open_nic(a_, g_pool, params(), NicQueue{q, 2}));
      b_nics_.push_back(open_nic(b_, g_pool, params(), NicQueue{q, 2}));
      ASSERT_EQ(b_nics_[q]->queue_id(), q);
      ASSERT_EQ(b_nics_[q]->queue_count(), 2);
      ASSERT_EQ(b_nics_[q]->backend(), GetParam());
    }
  }
  void TearDown() override {
    a_nics_.clear();
    b_nics_.clear();
    for (const std::string& name : {name_a_, name_b_})
      close_vdev_port(name);
    wire_.close();
    EXPECT_EQ(rte_mempool_avail_count(g_pool), pool_avail_) << "every mbuf came back";
  }

  Wire wire_;
  std::string name_a_, name_b_;
  uint16_t a_ = 0, b_ = 0;
  std::vector<std::unique_ptr<Nic>> a_nics_, b_nics_;
  unsigned pool_avail_ = 0;
};

// Each shard of B "connects" from ports chosen by rss::port_for_queue for its queue and receives
// there; some ports are arbitrary (they land where the hash says); each shard has a zero-copy
// flow on a port whose hash gives the other queue, added through its own Nic (so steered to it),
// placed into an MR both queues registered. Both lcores burst at once; every frame reaches its
// flow's queue, in order, exactly once, and ARP reaches queue 0.
TEST_P(NicQueues, TwoLcoresEveryFlowOnItsQueue) {
  using namespace cleave::rss;
  const Reta reta = default_reta(2);
  Bytes mem(size_t(2) * kQueueFrames * kQueuePayload, kUntouched);
  for (auto& nic : b_nics_)
    ASSERT_EQ(nic->mr_add(1, mem.data(), mem.size(), 1), 0);
  EXPECT_EQ(b_nics_[0]->mr_add(1, mem.data(), mem.size(), 1), -EEXIST);
  std::map<uint16_t, uint16_t> want;  // port -> queue
  Shard shards[2];
  uint16_t start = 40000;
  for (uint16_t q = 0; q < 2; q++) {
    for (int i = 0; i < 12; i++) {  // chosen for the shard's queue
      const uint32_t p =
          port_for_queue(kDefaultKey, reta, kIpB, kIpA, kPortA, q, 32768, 60999, start);
      ASSERT_NE(p, kNoPort);
      start = uint16_t(p + 1);
      want[uint16_t(p)] = q;
      shards[q].sends.push_back(uint16_t(p));
    }
    for (uint16_t i = 0; i < 4; i++) {  // arbitrary: the hash decides
      const auto p = uint16_t(20000 + q * 100 + i * 7);
      want[p] = rss_queue(p);
      shards[q].sends.push_back(p);
    }
    // The zero-copy flow: its hash says the other queue, its Nic says this one.
    const uint32_t p = port_for_queue(kDefaultKey, reta, kIpB, kIpA, kPortA, uint16_t(1 - q),
                                      50000 + q * 1000, 60999, uint16_t(50000 + q * 1000));
    ASSERT_NE(p, kNoPort);
    rte_pmd_cleave_flow f{};
    f.src_ip = kIpA;
    f.dst_ip = kIpB;
    f.src_port = kPortA;
    f.dst_port = uint16_t(p);
    f.proto = 6;
    f.mode = RTE_PMD_CLEAVE_ZERO_COPY;
    f.parser = RTE_PMD_CLEAVE_PARSER_TCP;
    f.reliable = 1;
    f.queue = uint16_t(1 - q);  // ignored: a Nic adds its flows for its own queue
    ASSERT_EQ(b_nics_[q]->flow_add(20 + q, f), 0);
    ASSERT_EQ(b_nics_[q]->ms_post(20 + q, 1, uint64_t(q) * kQueueFrames * kQueuePayload,
                                  kQueueFrames * kQueuePayload, 0),
              0);
    want[uint16_t(p)] = q;
    shards[q].sends.push_back(uint16_t(p));
  }
  // The flow ids are the port's: the other queue cannot take one in use.
  rte_pmd_cleave_flow dup{};
  dup.src_ip = kIpA;
  dup.dst_ip = kIpB;
  dup.src_port = 1;
  dup.dst_port = 1;
  dup.proto = 6;
  dup.parser = RTE_PMD_CLEAVE_PARSER_TCP;
  EXPECT_EQ(b_nics_[1]->flow_add(20, dup), -EEXIST);
  // An ARP request on B's wire: queue 0's.
  Bytes arp(60, 0);
  std::fill(arp.begin(), arp.begin() + 6, 0xFF);
  arp[12] = 0x08;
  arp[13] = 0x06;
  rte_mbuf* am = to_mbuf(arp);
  ASSERT_EQ(rte_ring_enqueue(wire_.ab, am), 0);

  std::atomic<uint64_t> received{0};
  const uint64_t total = uint64_t(want.size()) * kQueueFrames + 1;
  for (uint16_t q = 0; q < 2; q++) {
    shards[q].a = a_nics_[q].get();
    shards[q].b = b_nics_[q].get();
    shards[q].received = &received;
    shards[q].total = total;
  }
  ASSERT_NO_FATAL_FAILURE(run_on_lcores_1_and_2(shards, shard_main));

  EXPECT_FALSE(shards[0].timed_out || shards[1].timed_out) << received.load() << " of " << total;
  EXPECT_EQ(shards[0].arp, 1u);
  EXPECT_EQ(shards[1].arp, 0u);
  std::map<uint16_t, std::vector<uint32_t>> seqs;
  for (uint16_t q = 0; q < 2; q++) {
    for (const auto& [port, seq] : shards[q].got) {
      ASSERT_EQ(want.count(port), 1u) << port;
      EXPECT_EQ(want[port], q) << "port " << port << " seq " << seq;
      seqs[port].push_back(seq);
    }
    // The zero-copy flow's every frame placed, by its own queue's Nic.
    EXPECT_EQ(shards[q].placed.size(), kQueueFrames);
  }
  ASSERT_EQ(seqs.size(), want.size());
  for (const auto& [port, v] : seqs) {
    ASSERT_EQ(v.size(), kQueueFrames) << "port " << port << ": none lost or duplicated";
    for (uint32_t k = 0; k < kQueueFrames; k++)
      EXPECT_EQ(v[k], k * kQueuePayload) << "port " << port << ": in order";
  }
  const Bytes payload = pattern(kQueuePayload, 9);
  for (size_t at = 0; at < mem.size(); at += kQueuePayload)
    ASSERT_EQ(0, std::memcmp(mem.data() + at, payload.data(), kQueuePayload)) << at;
  // The MR goes with the last queue that registered it.
  for (uint16_t q = 0; q < 2; q++) {
    ASSERT_EQ(b_nics_[q]->flow_remove(20 + q), 0);
    ASSERT_EQ(b_nics_[q]->mr_remove(1), 0);
  }
  EXPECT_EQ(b_nics_[0]->mr_remove(1), -ENOENT);
}

INSTANTIATE_TEST_SUITE_P(Backends, NicQueues,
                         ::testing::Values(NicBackend::kCleave, NicBackend::kGeneric),
                         [](const ::testing::TestParamInfo<NicBackend>& i) {
                           return std::string(cleave::dp::backend_name(i.param));
                         });

// ---- the generic backend's TX paths, which only it has --------------------------------------

class GenericTx : public ::testing::Test {
 protected:
  void SetUp() override {
    pool_avail_ = rte_mempool_avail_count(g_pool);
    ASSERT_NO_FATAL_FAILURE(wire_.make(std::to_string(++g_seq)));
  }
  void TearDown() override {
    for (rte_mbuf* m : held_)
      rte_pktmbuf_free(m);
    nics_.clear();
    for (const std::string& name : cleave_) {
      uint16_t p;
      if (rte_eth_dev_get_port_by_name(name.c_str(), &p) == 0) {
        rte_eth_dev_stop(p);
        rte_eth_dev_close(p);
      }
      rte_vdev_uninit(name.c_str());
    }
    wire_.close();
    EXPECT_EQ(rte_mempool_avail_count(g_pool), pool_avail_) << "every mbuf came back";
  }
  std::vector<rte_mbuf*> receive(Nic& tx, Nic& rx, size_t want) {
    std::vector<rte_mbuf*> got;
    for (int idle = 0; got.size() < want && idle < 2000;) {
      rte_mbuf* bufs[32];
      tx.tx_burst(nullptr, 0);  // the generic Nic passes the kick on to its port
      const uint16_t n = rx.rx_burst(bufs, 32);
      got.insert(got.end(), bufs, bufs + n);
      held_.insert(held_.end(), bufs, bufs + n);
      idle = n == 0 ? idle + 1 : 0;
    }
    return got;
  }
  Wire wire_;
  std::vector<std::string> cleave_;
  std::vector<std::unique_ptr<Nic>> nics_;
  std::vector<rte_mbuf*> held_;
  unsigned pool_avail_ = 0;
};

// A port that offers TSO and checksums (net_cleave's ethdev, driven as any port) gets the
// descriptors as they are; the generic backend merges nothing.
TEST_F(GenericTx, DescriptorsPassThroughAPortThatOffloads) {
  const std::string a = "net_cleave_ga" + std::to_string(g_seq);
  const std::string b = "net_cleave_gb" + std::to_string(g_seq);
  cleave_ = {a, b};
  ASSERT_EQ(rte_vdev_init(a.c_str(), ("wire=" + wire_.wa_name + kCleaveSizing).c_str()), 0);
  ASSERT_EQ(rte_vdev_init(b.c_str(), ("wire=" + wire_.wb_name + kCleaveSizing).c_str()), 0);
  uint16_t pa = 0, pb = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(a.c_str(), &pa), 0);
  ASSERT_EQ(rte_eth_dev_get_port_by_name(b.c_str(), &pb), 0);
  ASSERT_NO_FATAL_FAILURE(start_port(pa, kAllTxOffloads));
  ASSERT_NO_FATAL_FAILURE(start_port(pb, kAllTxOffloads));
  rte_eth_dev_info info{};
  ASSERT_EQ(rte_eth_dev_info_get(pa, &info), 0);
  nics_.push_back(cleave::dp::open_generic_nic(pa, g_pool, params(), info));
  nics_.push_back(open_nic(pb, g_pool, params()));
  Nic& tx = *nics_[0];
  Nic& rx = *nics_[1];
  ASSERT_EQ(tx.backend(), NicBackend::kGeneric);
  ASSERT_EQ(rx.backend(), NicBackend::kCleave);

  constexpr uint32_t kLen = 20000, kMss = 1448;
  rte_pmd_cleave_flow f{};
  f.src_ip = kIpA;
  f.dst_ip = kIpB;
  f.src_port = kPortA;
  f.dst_port = kPortB;
  f.proto = 6;
  f.reliable = 1;
  f.initial_seq = 9;
  ASSERT_EQ(rx.flow_add(kFlow, f), 0);
  Bytes mem(kLen, kUntouched);
  ASSERT_EQ(rx.mr_add(0, mem.data(), mem.size(), 1), 0);
  ASSERT_EQ(rx.ms_post(kFlow, 0, 0, kLen, 0), 0);
  AppMemory app(pattern(kLen, 4));
  rte_mbuf* d = app.descriptor(tcp_frame(9, nullptr, 0, false), 0, kLen, kMss);
  ASSERT_EQ(tx.tx_burst(&d, 1), 1);
  std::vector<rte_mbuf*> got = receive(tx, rx, (kLen + kMss - 1) / kMss);
  ASSERT_EQ(got.size(), (kLen + kMss - 1) / kMss);
  for (rte_mbuf* m : got)
    EXPECT_EQ(placement(m).decision, RTE_PMD_CLEAVE_PLACED);
  EXPECT_EQ(0, std::memcmp(mem.data(), app.bytes.data(), kLen));
  EXPECT_EQ(app.completions, 1);
  EXPECT_EQ(counter(tx, "tx_offloaded"), 1u);
  EXPECT_EQ(counter(tx, "tx_sw_merged"), 0u);
  EXPECT_EQ(counter(tx, "nic_tx_requests"), 0u) << "the generic model merged nothing";
}

// A ring port offers multi-segment TX only: a chain without offload flags passes as it is, a
// chain asking for checksums or the RoCE ICRC is merged in software.
TEST_F(GenericTx, RingPortGetsChainsAndMergedFrames) {
  ASSERT_NO_FATAL_FAILURE(start_port(wire_.wa, RTE_ETH_TX_OFFLOAD_MULTI_SEGS));
  ASSERT_NO_FATAL_FAILURE(start_port(wire_.wb, RTE_ETH_TX_OFFLOAD_MULTI_SEGS));
  nics_.push_back(open_nic(wire_.wa, g_pool, params()));
  nics_.push_back(open_nic(wire_.wb, g_pool, params()));
  Nic& tx = *nics_[0];
  Nic& rx = *nics_[1];
  AppMemory app(pattern(1000, 5));
  // The headers of the whole frame, checksums included: the chain is a complete frame.
  const Bytes whole = tcp_frame(1, app.bytes.data(), 1000, true);
  const Bytes hdr(whole.begin(), whole.begin() + 54);
  rte_mbuf* d[2] = {app.descriptor(hdr, 0, 1000, 0), app.descriptor(hdr, 0, 1000, 0)};
  d[0]->ol_flags = 0;  // a plain chain; d[1] asks for checksums the ring does not offer
  ASSERT_EQ(tx.tx_burst(d, 2), 2);
  std::vector<rte_mbuf*> got = receive(tx, rx, 2);
  ASSERT_EQ(got.size(), 2u);
  for (rte_mbuf* m : got) {
    EXPECT_EQ(placement(m).reason, RTE_PMD_CLEAVE_DEFER_FLOW_MISS);
    EXPECT_EQ(m->pkt_len, 1054u);
    EXPECT_EQ((placement(m).flags >> RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) & 3, RTE_PMD_CLEAVE_CSUM_GOOD);
  }
  EXPECT_EQ(counter(tx, "tx_offloaded"), 1u) << "the chain";
  EXPECT_EQ(counter(tx, "tx_sw_merged"), 1u);
  EXPECT_EQ(counter(rx, "rx_linearized"), 1u) << "the chain arrived chained";
  // One shared info for both: the app memory is released once neither refers to it. The chain
  // went as it was, so the receiver still holds its payload segment.
  EXPECT_EQ(app.completions, 0);
  for (rte_mbuf* m : held_)
    rte_pktmbuf_free(m);
  held_.clear();
  EXPECT_EQ(app.completions, 1);

  // A header the NIC cannot parse is refused, freed and counted, never sent.
  Bytes junk(60, 0xAB);
  rte_mbuf* bad = to_mbuf(junk);
  bad->ol_flags = RTE_MBUF_F_TX_IP_CKSUM;
  ASSERT_EQ(tx.tx_burst(&bad, 1), 1);
  EXPECT_EQ(counter(tx, "tx_errors"), 1u);
  EXPECT_TRUE(receive(tx, rx, 1).empty());
}

TEST(OpenNic, ErrorsAreReadable) {
  try {
    open_nic(RTE_MAX_ETHPORTS - 1, g_pool);
    ADD_FAILURE() << "no port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a DPDK port"), std::string::npos) << e.what();
  }
  Wire w;
  ASSERT_NO_FATAL_FAILURE(w.make(std::to_string(++g_seq)));
  ASSERT_NO_FATAL_FAILURE(start_port(w.wa, 0));
  try {
    open_nic(w.wa, nullptr);
    ADD_FAILURE() << "no frame pool";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a frame pool"), std::string::npos) << e.what();
  }
  try {
    cleave::dp::open_cleave_nic(w.wa);
    ADD_FAILURE() << "not net_cleave";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("not a net_cleave port"), std::string::npos) << e.what();
  }
  w.close();
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=cleave-nictest-" + std::to_string(getpid());
  const char* eal_argv[] = {
      "nic_tests", "--no-huge", "--no-shconf", "-m", "256", "--no-pci",
      // Lcores 0 (main) and 2 share CPU 0, lcore 1 has CPU 1: two shards for NicQueues.
      "--lcores", "0@0,1@1,2@0", "--no-telemetry", "--log-level=*:error", prefix.c_str()};
  if (rte_eal_init(int(sizeof eal_argv / sizeof eal_argv[0]), const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  g_pool =
      rte_pktmbuf_pool_create("test_pool", 8191, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  g_jumbo_pool =
      rte_pktmbuf_pool_create("test_jumbo", 255, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
  if (g_pool == nullptr || g_jumbo_pool == nullptr) {
    std::fprintf(stderr, "mbuf pools: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  rte_mempool_free(g_jumbo_pool);
  rte_mempool_free(g_pool);
  rte_eal_cleanup();
  return rc;
}
