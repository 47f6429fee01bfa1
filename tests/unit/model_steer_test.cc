// model_steer_test.cc - the NIC model's receive queues: RSS over the 4-tuple through the RETA,
// a programmed flow's own queue, RoCE by destination QP, Solar by connection number, the rest to
// queue 0; one queue as before.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/rss.h"
#include "model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;

NicConfig queues_config(uint16_t queues) {
  NicConfig c;
  c.max_flows = 64;
  c.max_mrs = 8;
  c.ms_committed_per_flow = 16;
  c.ms_store_entries = 64;
  c.tx_completions = 8;
  c.rx_queues = queues;
  return c;
}

uint16_t rss_queue_of(const NicModel& nic, uint32_t src, uint32_t dst, uint16_t sport,
                      uint16_t dport) {
  return rss::reta_queue(nic.reta(), rss::hash_ipv4_l4(nic.rss_key(), src, dst, sport, dport));
}

// A frame from another source address: the frame helpers send from kPeer.
Bytes from(Bytes f, uint32_t src) {
  test::put32(&f[14 + 12], src);
  f[14 + 10] = f[14 + 11] = 0;
  test::put16(&f[14 + 10], test::fold(test::sum16(&f[14], 20)));
  if (f[14 + 9] == 6) {
    f[34 + 16] = f[34 + 17] = 0;
    test::put16(&f[34 + 16], test::l4_sum(&f[14], &f[34], f.size() - 34));
  }
  return f;
}

TEST(ModelSteer, ManyFlowsEachOnItsRssQueue) {
  NicModel nic(queues_config(4));
  std::map<uint16_t, uint64_t> per_queue;
  uint64_t frames = 0;
  for (uint32_t i = 0; i < 400; i++) {
    const uint32_t src = test::kPeer + (i % 7);
    const auto sport = uint16_t(30000 + i * 13);
    const auto dport = uint16_t(5001 + i % 3);
    const uint16_t want = rss_queue_of(nic, src, test::kLocal, sport, dport);
    for (uint32_t seq : {1000u, 2000u, 3000u}) {  // every segment of the flow on one queue
      const Bytes f = from(test::tcp_frame(seq, test::pattern(100), 0x18, sport, dport), src);
      RxEntry e;
      nic.rx(f, e);
      ASSERT_EQ(e.decision, Decision::kDeferred);
      EXPECT_EQ(e.reason, DeferReason::kFlowMiss);  // checksums were right: steered, then missed
      EXPECT_EQ(e.queue, want) << "flow " << i;
      EXPECT_EQ(nic.steer(f), want);
      per_queue[e.queue]++;
      frames++;
    }
  }
  ASSERT_EQ(per_queue.size(), 4u);  // the default RETA spreads over every queue
  for (uint16_t q = 0; q < 4; q++) {
    EXPECT_EQ(nic.queue_frames(q), per_queue[q]);
    EXPECT_GT(per_queue[q], frames / 8) << "queue " << q;  // roughly even
  }
  // UDP too, by its 4-tuple.
  const Bytes u = test::udp_frame(12345, 7777, test::pattern(20));
  RxEntry e;
  nic.rx(u, e);
  EXPECT_EQ(e.queue, rss_queue_of(nic, test::kPeer, test::kLocal, 12345, 7777));
}

TEST(ModelSteer, ProgrammedFlowReachesTheQueueItNames) {
  NicModel nic(queues_config(4));
  std::vector<uint8_t> mem(1 << 16, 0);
  ASSERT_EQ(nic.mr_add(1, mem.data(), mem.size(), 0), Err::kOk);
  // A flow whose hash says one queue, programmed on another.
  const uint16_t hashed = rss_queue_of(nic, test::kPeer, test::kLocal, 40000, 5001);
  const auto named = uint16_t((hashed + 1) % 4);
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
  s.initial_seq = 1000;
  s.queue = named;
  ASSERT_EQ(nic.flow_add(3, s), Err::kOk);
  ASSERT_EQ(nic.ms_post(3, {1, 0, 4096, 0}), Err::kOk);
  RxEntry e;
  const Bytes placed = test::tcp_frame(1000, test::pattern(100));
  nic.rx(placed, e);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.flow_id, 3u);
  EXPECT_EQ(e.queue, named);
  EXPECT_EQ(nic.steer(placed), named);
  // Deferred (past the MSs) and with a bad checksum: still the flow's queue.
  nic.rx(test::tcp_frame(900000, test::pattern(100)), e);
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.queue, named);
  Bytes bad = test::tcp_frame(1100, test::pattern(100));
  bad.back() ^= 0x55;
  nic.rx(bad, e);
  EXPECT_EQ(e.reason, DeferReason::kBadL4Checksum);
  EXPECT_EQ(e.queue, named);
  // Removed, the flow's frames go by the hash again.
  ASSERT_EQ(nic.flow_remove(3), Err::kOk);
  nic.rx(placed, e);
  EXPECT_EQ(e.queue, hashed);
  // A queue the NIC does not have is refused.
  s.queue = 4;
  EXPECT_EQ(nic.flow_add(3, s), Err::kBadArgument);
}

TEST(ModelSteer, RoceByDestinationQp) {
  NicModel nic(queues_config(4));
  // Two QPs between the same two hosts, on queues 2 and 3.
  for (uint32_t qpn : {17u, 18u}) {
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, kRocePort, 17};
    s.parser = Parser::kRoce;
    s.pmtu = 1024;
    s.qpn = qpn;
    s.queue = uint16_t(qpn - 15);
    ASSERT_EQ(nic.flow_add(qpn, s), Err::kOk);
  }
  std::set<uint16_t> hashed;
  for (uint16_t sport = 49152; sport < 49152 + 64; sport++) {  // paths vary the source port
    for (uint32_t qpn : {17u, 18u}) {
      RxEntry e;
      const Bytes f = test::roce_frame(0x04, 0, {}, test::pattern(64), sport, qpn);
      nic.rx(f, e);
      EXPECT_EQ(e.flow_id, qpn);
      EXPECT_EQ(e.queue, qpn - 15);
      EXPECT_EQ(nic.steer(f), qpn - 15);
    }
    hashed.insert(rss_queue_of(nic, test::kPeer, test::kLocal, sport, kRocePort));
  }
  EXPECT_GT(hashed.size(), 1u);  // the hash alone would have spread them
  // A QP no flow has: queue 0, with the other deferred traffic.
  RxEntry e;
  nic.rx(test::roce_frame(0x04, 0, {}, test::pattern(64), 50000, 99), e);
  EXPECT_EQ(e.reason, DeferReason::kFlowMiss);
  EXPECT_EQ(e.queue, 0);
}

TEST(ModelSteer, SolarByConnectionNumber) {
  NicModel nic(queues_config(4));
  // Two connections between the same two hosts, on queues 2 and 3.
  for (uint32_t conn : {0x1Au, 0x1Bu}) {
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, kSolarPort, 17};
    s.parser = Parser::kSolar;
    s.qpn = conn;
    s.queue = uint16_t(conn - 0x18);
    ASSERT_EQ(nic.flow_add(conn, s), Err::kOk);
  }
  std::set<uint16_t> hashed;
  for (uint16_t path = 0; path < 64; path++) {  // paths vary the source port
    for (uint32_t conn : {0x1Au, 0x1Bu}) {
      RxEntry e;
      const Bytes f = test::solar_frame(1, 0, 0, 1, test::pattern(64), path, conn);
      nic.rx(f, e);
      EXPECT_EQ(e.flow_id, conn);
      EXPECT_EQ(e.queue, conn - 0x18);
      EXPECT_EQ(nic.steer(f), conn - 0x18);
    }
    hashed.insert(
        rss_queue_of(nic, test::kPeer, test::kLocal, uint16_t(0xC000 | path), kSolarPort));
  }
  EXPECT_GT(hashed.size(), 1u);  // the hash alone would have spread them
  // A connection no flow has, one of 2^24 or more, a frame too short to name one: queue 0.
  Bytes f = test::solar_frame(1, 0, 0, 1, test::pattern(64), 5, 0x1C);
  Bytes big = test::solar_frame(1, 0, 0, 1, test::pattern(64), 5, 0x0100001A);
  Bytes runt = test::udp_frame(0xC005, kSolarPort, test::pattern(7));
  for (const Bytes* x : {&f, &big, &runt}) {
    RxEntry e;
    nic.rx(*x, e);
    EXPECT_EQ(e.flow_id, kNoFlow);
    EXPECT_EQ(e.queue, 0);
    EXPECT_EQ(nic.steer(*x), 0);
  }
}

TEST(ModelSteer, ArpIcmpFragmentsAndJunkToQueueZero) {
  NicModel nic(queues_config(4));
  // Aim the whole RETA away from queue 0, so queue 0 can only come from the rule.
  rss::Reta reta;
  reta.fill(3);
  ASSERT_EQ(nic.rss_set(rss::kDefaultKey, reta), Err::kOk);
  Bytes arp(42, 0);
  test::put16(&arp[12], 0x0806);
  const Bytes icmp = test::ipv4_frame(1, Bytes(64, 8));
  Bytes frag = test::tcp_frame(1, test::pattern(64));
  test::put16(&frag[14 + 6], 0x2000);  // more fragments
  const Bytes runt(10, 0);
  uint64_t n = 0;
  for (const Bytes& f : {arp, icmp, frag, runt}) {
    RxEntry e;
    nic.rx(f, e);
    EXPECT_EQ(e.decision, Decision::kDeferred);
    EXPECT_EQ(e.queue, 0) << "frame " << n;
    EXPECT_EQ(nic.steer(f), 0);
    n++;
  }
  EXPECT_EQ(nic.queue_frames(0), n);
  RxEntry e;
  nic.rx(test::tcp_frame(1, test::pattern(64)), e);
  EXPECT_EQ(e.queue, 3);
  EXPECT_EQ(nic.queue_frames(3), 1u);
}

TEST(ModelSteer, RssSetTakesKeyAndReta) {
  NicModel nic(queues_config(2));
  rss::Key key{};
  for (size_t i = 0; i < key.size(); i++)
    key[i] = uint8_t(i * 37 + 5);
  const rss::Reta reta = rss::default_reta(2);
  ASSERT_EQ(nic.rss_set(key, reta), Err::kOk);
  for (uint16_t sport = 1000; sport < 1100; sport++) {
    RxEntry e;
    nic.rx(test::tcp_frame(1, test::pattern(8), 0x18, sport), e);
    EXPECT_EQ(e.queue, rss::reta_queue(
                           reta, rss::hash_ipv4_l4(key, test::kPeer, test::kLocal, sport, 5001)));
  }
  // Reconfigured to three queues: the RETA spreads over them, a flow on queue 2 stops a shrink.
  ASSERT_EQ(nic.rx_queues_set(3), Err::kOk);
  EXPECT_EQ(nic.reta(), rss::default_reta(3));
  EXPECT_EQ(nic.rss_key(), key);
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
  s.queue = 2;
  ASSERT_EQ(nic.flow_add(0, s), Err::kOk);
  EXPECT_EQ(nic.rx_queues_set(2), Err::kBadArgument);
  EXPECT_EQ(nic.rx_queues_set(0), Err::kBadArgument);
  EXPECT_EQ(nic.rx_queues_set(kMaxRxQueues + 1), Err::kBadArgument);
  ASSERT_EQ(nic.flow_remove(0), Err::kOk);
  ASSERT_EQ(nic.rx_queues_set(2), Err::kOk);
  rss::Reta bad = reta;
  bad[5] = 2;  // no queue 2
  EXPECT_EQ(nic.rss_set(rss::kDefaultKey, bad), Err::kBadArgument);
  EXPECT_EQ(nic.rss_key(), key);  // unchanged
}

TEST(ModelSteer, OneQueueIsQueueZeroAndCostsNoMemory) {
  NicModel nic(queues_config(1));
  for (uint16_t sport = 1000; sport < 1100; sport++) {
    RxEntry e;
    nic.rx(test::tcp_frame(1, test::pattern(8), 0x18, sport), e);
    EXPECT_EQ(e.queue, 0);
  }
  EXPECT_EQ(nic.queue_frames(0), 100u);
  const MemoryReport r = nic.memory_report();
  for (size_t l = 9; l < r.lines.size(); l++)
    EXPECT_EQ(r.lines[l].bytes(), 0u) << r.lines[l].name;
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
  s.queue = 1;
  EXPECT_EQ(nic.flow_add(0, s), Err::kBadArgument);
  rss::Reta reta{};
  reta[0] = 1;
  EXPECT_EQ(nic.rss_set(rss::kDefaultKey, reta), Err::kBadArgument);
}

TEST(ModelSteer, MemoryBudgetHoldsWithQueues) {
  NicConfig c;
  c.max_flows = 10000;
  c.rx_queues = kMaxRxQueues;
  const MemoryReport r = NicModel(c).memory_report();
  EXPECT_EQ(r.lines[9].bytes(), 10000u * kFlowQueueBytes);
  EXPECT_EQ(r.lines[10].bytes(), rss::kRetaSize * kRetaEntryBytes);
  EXPECT_EQ(r.lines[11].bytes(), rss::kKeyBytes);
  EXPECT_LE(r.total_bytes, 8'000'000u);
  c.rx_queues = 1;
  EXPECT_EQ(r.total_bytes - NicModel(c).memory_report().total_bytes,
            10000u * kFlowQueueBytes + rss::kRetaSize * kRetaEntryBytes + rss::kKeyBytes);
}

}  // namespace
}  // namespace cleave::nic
