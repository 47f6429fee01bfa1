// dataplane_test.cc - the real Dataplane on DPDK ring ports: ARP, ICMP echo, drops by reason,
// the exception path, next-hop resolution with retries, and the control channel.
//
// EAL runs without hugepages or root. Each test gets fresh ports made from rte_rings; the test
// plays the wire peer by enqueueing frames into the port's RX ring and reading its TX ring.
#include <gtest/gtest.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "ctl_channel.h"
#include "dataplane.h"
#include "frames.h"
#include "port.h"
#include "route.h"
#include "rte_pmd_cleave.h"

namespace cleave::dp {
namespace {

using test::Bytes;
using test::MacBytes;

rte_mempool* g_pool = nullptr;
rte_mempool* g_jumbo_pool = nullptr;  // buffers for a 9000-byte MTU in one segment
int g_seq = 0;

constexpr uint32_t kOurIp = 0x0a000001;   // 10.0.0.1
constexpr uint32_t kPeerIp = 0x0a000002;  // 10.0.0.2
constexpr uint32_t kGwIp = 0x0a0000fe;    // 10.0.0.254
constexpr MacBytes kPeerMac = {0x02, 0, 0, 0, 0, 0x02};
constexpr MacBytes kGwMac = {0x02, 0, 0, 0, 0, 0xfe};

// A port made of two rings: the test writes `in` (the port's RX) and reads `out` (its TX).
struct RingPort {
  rte_ring* in = nullptr;
  rte_ring* out = nullptr;
  uint16_t port_id = kNoPort;

  explicit RingPort(const std::string& name) {
    in = rte_ring_create((name + "i").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    out = rte_ring_create((name + "o").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    int id = rte_eth_from_rings(name.c_str(), &in, 1, &out, 1, SOCKET_ID_ANY);
    EXPECT_GE(id, 0);
    port_id = static_cast<uint16_t>(id);
  }
  ~RingPort() {
    rte_eth_dev_stop(port_id);
    rte_eth_dev_close(port_id);
    for (rte_ring* r : {in, out}) {
      void* m;
      while (rte_ring_dequeue(r, &m) == 0)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      rte_ring_free(r);
    }
  }
  void send(const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(frame.size() > 1518 ? g_jumbo_pool : g_pool);
    ASSERT_NE(m, nullptr);
    char* p = rte_pktmbuf_append(m, static_cast<uint16_t>(frame.size()));
    ASSERT_NE(p, nullptr);
    std::memcpy(p, frame.data(), frame.size());
    ASSERT_EQ(rte_ring_enqueue(in, m), 0);
  }
  std::vector<Bytes> take() {
    std::vector<Bytes> frames;
    void* m;
    while (rte_ring_dequeue(out, &m) == 0) {
      auto* mb = static_cast<rte_mbuf*>(m);
      Bytes b(mb->pkt_len);
      // rte_pktmbuf_read copies only when the data is not contiguous; else it points at it.
      const void* p = rte_pktmbuf_read(mb, 0, mb->pkt_len, b.data());
      if (p != b.data()) std::memcpy(b.data(), p, mb->pkt_len);
      frames.push_back(std::move(b));
      rte_pktmbuf_free(mb);
    }
    return frames;
  }
};

class DataplaneTest : public ::testing::Test {
 protected:
  // Builds the dataplane over fresh ring ports. `yaml_port_extra` is appended to the port.
  // `cleave`: the port is a net_cleave NIC over the ring port (the cleave backend); else the
  // ring port itself (the generic backend).
  void build(const std::string& yaml_port_extra = "", bool exception = false,
             const std::string& arp = "arp: {retry_ms: 20, retries: 3, failed_hold_ms: 100}\n",
             uint16_t mtu = 1500, bool cleave = false) {
    std::string tag = "t" + std::to_string(g_seq++);
    wire = std::make_unique<RingPort>(tag + "w");
    std::string text = arp + "ports:\n  - name: p0\n    device: " + tag +
                       "w\n    ipv4: 10.0.0.1/24\n" + yaml_port_extra;
    ConfigResult r = parse_config(text, "test");
    ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
    cfg = *r.config;
    DpPort p;
    p.name = "p0";
    p.port_id = wire->port_id;
    if (cleave) {
      cleave_name = "net_cleave_dp" + tag;
      ASSERT_EQ(rte_vdev_init(cleave_name.c_str(), ("wire=net_ring_" + tag + "w").c_str()), 0);
      ASSERT_EQ(rte_eth_dev_get_port_by_name(cleave_name.c_str(), &p.port_id), 0);
    }
    p.ipv4 = cfg.ports[0].ipv4;
    p.mtu = mtu;
    rte_mempool* pool = mtu > 1500 ? g_jumbo_pool : g_pool;
    p.mac = setup_port(p.port_id, "wire", mtu, std::nullopt, 256, 256, pool);
    if (exception) {
      tap = std::make_unique<RingPort>(tag + "x");
      setup_port(tap->port_id, "tap", 1500, std::nullopt, 256, 256, g_pool);
      p.exception_port_id = tap->port_id;
    }
    std::memcpy(our_mac.data(), p.mac.b.data(), 6);
    routes = std::make_unique<RouteTable>(cfg.ports);
    ctl = std::make_unique<CtlChannel>();
    dp = std::make_unique<Dataplane>(DataplaneParams::from_config(cfg, rte_get_tsc_hz()),
                                     std::vector<DpPort>{p}, *routes, pool, *ctl);
  }
  void TearDown() override {
    uint16_t port = 0;
    dp.reset();
    ctl.reset();
    tap.reset();
    if (!cleave_name.empty() && rte_eth_dev_get_port_by_name(cleave_name.c_str(), &port) == 0) {
      rte_eth_dev_stop(port);
      rte_eth_dev_close(port);
      rte_vdev_uninit(cleave_name.c_str());
    }
    cleave_name.clear();
    wire.reset();
  }

  // The port's NIC backend and counters by name, as nic.show asks for them.
  std::map<std::string, uint64_t> nic_counters(NicBackend* backend) {
    auto req = std::make_unique<CtlRequest>();
    req->op = CtlOp::kNic;
    req->nic_port = 0;
    req->nic_counters.reserve(512);
    auto a = ask(std::move(req));
    EXPECT_TRUE(a->nic_found);
    EXPECT_FALSE(a->nic_truncated);
    *backend = static_cast<NicBackend>(a->nic_backend);
    std::map<std::string, uint64_t> out;
    for (const NicCounterRow& r : a->nic_counters)
      out[r.name.data()] = r.value;
    return out;
  }

  // Polls until `n` frames came out of the wire (or `ms` passed); returns them.
  std::vector<Bytes> poll_wire(size_t n, int ms = 200) {
    std::vector<Bytes> out;
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (out.size() < n && std::chrono::steady_clock::now() < end) {
      dp->poll_once();
      for (Bytes& b : wire->take())
        out.push_back(std::move(b));
    }
    return out;
  }
  void poll_for(int ms) { poll_wire(SIZE_MAX, ms); }

  DataplaneStats stats() {
    auto req = std::make_unique<CtlRequest>();
    req->op = CtlOp::kStats;
    return ask(std::move(req))->stats;
  }
  uint64_t drops(Drop d) { return stats().drops[static_cast<size_t>(d)]; }

  // Sends a control request from another thread while this one runs the loop, as in cleaved.
  std::unique_ptr<CtlRequest> ask(std::unique_ptr<CtlRequest> req) {
    std::unique_ptr<CtlRequest> answer;
    std::atomic<bool> finished{false};
    std::thread t([&] {
      answer = ctl->call(std::move(req), std::chrono::milliseconds(2000));
      finished.store(true);
    });
    while (!finished.load())
      dp->poll_once();
    t.join();
    EXPECT_NE(answer, nullptr);
    return answer;
  }

  RouteAnswer route_get(uint32_t addr) {
    auto req = std::make_unique<CtlRequest>();
    req->op = CtlOp::kRouteGet;
    req->addr = Ipv4{addr};
    return ask(std::move(req))->route;
  }

  Bytes echo_request(size_t data_len) {
    return test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 1, test::icmp(8, 0x77, 5, data_len));
  }

  Config cfg;
  std::string cleave_name;
  std::unique_ptr<RingPort> wire, tap;
  std::unique_ptr<RouteTable> routes;
  std::unique_ptr<CtlChannel> ctl;
  std::unique_ptr<Dataplane> dp;
  MacBytes our_mac{};
};

TEST_F(DataplaneTest, StartAnnouncesAndResolvesGateway) {
  build("    gateway: 10.0.0.254\n");
  dp->start();
  auto out = poll_wire(2);
  // A loaded machine may let the 20 ms retry in before the wire is read: more requests for the
  // gateway, nothing else.
  ASSERT_GE(out.size(), 2u);
  for (size_t i = 2; i < out.size(); i++)
    EXPECT_EQ(test::get32(out[i], 38), kGwIp);
  // Gratuitous ARP: request, sender = target = our address, broadcast.
  EXPECT_EQ(test::get_mac(out[0], 0), test::kBroadcast);
  EXPECT_EQ(test::get16(out[0], 20), 1);
  EXPECT_EQ(test::get32(out[0], 28), kOurIp);
  EXPECT_EQ(test::get32(out[0], 38), kOurIp);
  EXPECT_GE(out[0].size(), 60u);  // padded to the Ethernet minimum
  // Request for the gateway.
  EXPECT_EQ(test::get32(out[1], 38), kGwIp);
  EXPECT_EQ(test::get_mac(out[1], 22), our_mac);
}

TEST_F(DataplaneTest, AnswersArpRequestForOurAddress) {
  build();
  wire->send(test::arp(1, test::kBroadcast, kPeerMac, kPeerIp, {}, kOurIp));
  auto out = poll_wire(1);
  ASSERT_EQ(out.size(), 1u);
  const Bytes& r = out[0];
  EXPECT_EQ(test::get_mac(r, 0), kPeerMac);  // to the asker
  EXPECT_EQ(test::get_mac(r, 6), our_mac);
  EXPECT_EQ(test::get16(r, 12), 0x0806);
  EXPECT_EQ(test::get16(r, 20), 2);           // reply
  EXPECT_EQ(test::get_mac(r, 22), our_mac);   // sha
  EXPECT_EQ(test::get32(r, 28), kOurIp);      // spa
  EXPECT_EQ(test::get_mac(r, 32), kPeerMac);  // tha
  EXPECT_EQ(test::get32(r, 38), kPeerIp);     // tpa
  // The asker was learned (RFC 826: we were the target).
  RouteAnswer a = route_get(kPeerIp);
  EXPECT_TRUE(a.neighbour_known);
  EXPECT_EQ(a.state, ArpState::kReachable);
  EXPECT_EQ(a.mac.str(), "02:00:00:00:00:02");
  DataplaneStats s = stats();
  EXPECT_EQ(s.proto.arp_requests_rx, 1u);
  EXPECT_EQ(s.proto.arp_replies_tx, 1u);
}

TEST_F(DataplaneTest, IgnoresArpForOthersAndCountsConflicts) {
  build();
  wire->send(test::arp(1, test::kBroadcast, kPeerMac, kPeerIp, {}, 0x0a000063));
  wire->send(test::arp(2, our_mac, kGwMac, kOurIp, our_mac, kOurIp));  // someone claims our IP
  wire->send(test::arp(3, test::kBroadcast, kPeerMac, kPeerIp, {}, kOurIp));  // bad opcode
  EXPECT_TRUE(poll_wire(1, 50).empty());
  DataplaneStats s = stats();
  EXPECT_EQ(s.drops[size_t(Drop::kArpNotForUs)], 2u);
  EXPECT_EQ(s.drops[size_t(Drop::kArpMalformed)], 1u);
  EXPECT_EQ(s.proto.arp_conflicts, 1u);
  EXPECT_FALSE(route_get(kPeerIp).state == ArpState::kReachable);  // not learned: not for us
}

TEST_F(DataplaneTest, AnswersEchoRequests) {
  build();
  for (size_t len : {0u, 56u, 1472u}) {
    Bytes req = echo_request(len);
    wire->send(req);
    auto out = poll_wire(1);
    ASSERT_EQ(out.size(), 1u) << len;
    const Bytes& r = out[0];
    ASSERT_EQ(r.size(), req.size());
    EXPECT_EQ(test::get_mac(r, 0), kPeerMac);
    EXPECT_EQ(test::get_mac(r, 6), our_mac);
    EXPECT_EQ(test::get32(r, 14 + 12), kOurIp);
    EXPECT_EQ(test::get32(r, 14 + 16), kPeerIp);
    EXPECT_EQ(r[14 + 8], 64);                                            // TTL
    EXPECT_EQ(test::inet_checksum(r, 14, 20), 0);                        // valid IP header checksum
    EXPECT_EQ(r[34], 0);                                                 // echo reply
    EXPECT_EQ(test::inet_checksum(r, 34, r.size() - 34), 0);             // valid ICMP checksum
    EXPECT_TRUE(std::equal(r.begin() + 38, r.end(), req.begin() + 38));  // id, seq, data
  }
  DataplaneStats s = stats();
  EXPECT_EQ(s.proto.icmp_echo_requests, 3u);
  EXPECT_EQ(s.proto.icmp_echo_replies, 3u);
  EXPECT_EQ(s.ports[0].rx_packets, 3u);
  EXPECT_EQ(s.ports[0].tx_packets, 3u);
}

// The same echo through either NIC backend; both count the same decisions under the same names.
TEST_F(DataplaneTest, BothNicBackendsCarryTheCopyPathAndCountIt) {
  for (bool cleave : {false, true}) {
    SCOPED_TRACE(cleave ? "cleave backend" : "generic backend");
    build("", false, "arp: {retry_ms: 20, retries: 3, failed_hold_ms: 100}\n", 1500, cleave);
    wire->take();  // the announcement
    for (int i = 0; i < 5; i++)
      wire->send(echo_request(56));
    wire->send(test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(9, 9, 100)));
    auto out = poll_wire(5);
    ASSERT_EQ(out.size(), 5u);
    for (const Bytes& r : out)
      EXPECT_EQ(r[34], 0);  // echo reply
    poll_for(20);
    NicBackend b{};
    auto c = nic_counters(&b);
    EXPECT_EQ(b, cleave ? NicBackend::kCleave : NicBackend::kGeneric);
    EXPECT_EQ(c["nic_rx_frames"], 6u);
    EXPECT_EQ(c["nic_rx_deferred"], 6u);
    EXPECT_EQ(c["nic_defer_not_l4"], 5u);     // ICMP
    EXPECT_EQ(c["nic_defer_flow_miss"], 1u);  // the UDP datagram
    EXPECT_GT(c["nic_mem_total_bytes"], 0u);
    EXPECT_EQ(drops(Drop::kNoHandler), 1u);
    if (cleave) {
      EXPECT_EQ(c.count("tx_pass_through"), 1u);  // the PMD's own xstats
    }
    TearDown();
  }
}

// A RoCEv2 packet whose UDP checksum (optional there, and left out of the ICRC) is filled in and
// wrong: both backends' NICs count it as a bad L4 checksum, not a bad ICRC, and the flow path
// drops it as such before it looks for the QP.
TEST_F(DataplaneTest, BothNicBackendsTellABadUdpChecksumFromABadIcrc) {
  for (bool cleave : {false, true}) {
    SCOPED_TRACE(cleave ? "cleave backend" : "generic backend");
    build("", false, "arp: {retry_ms: 20, retries: 3, failed_hold_ms: 100}\n", 1500, cleave);
    wire->take();  // the announcement
    Bytes u = test::udp(49152, 4791, 12 + 16 + 4);
    std::fill(u.begin() + 8, u.end(), 0);
    u[8] = 0x04;                 // SEND only
    test::put16(u, 10, 0xFFFF);  // P_Key
    test::put16(u, 6, 0x1234);   // a UDP checksum, and not this datagram's
    wire->send(test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, u));
    poll_for(20);
    NicBackend b{};
    auto c = nic_counters(&b);
    EXPECT_EQ(b, cleave ? NicBackend::kCleave : NicBackend::kGeneric);
    EXPECT_EQ(c["nic_defer_bad_l4_csum"], 1u);
    EXPECT_EQ(c["nic_defer_bad_icrc"], 0u);
    EXPECT_EQ(drops(Drop::kRoceBadUdpChecksum), 1u);
    EXPECT_EQ(drops(Drop::kRoceNoQp), 0u);
    TearDown();
  }
}

// A frame the NIC matched to a flow belongs to a transport; with none it is counted, not
// mistaken for copy-path traffic.
TEST_F(DataplaneTest, FrameOfANicFlowWithoutATransportIsDropped) {
  build("", false, "arp: {retry_ms: 20, retries: 3, failed_hold_ms: 100}\n", 1500, true);
  uint16_t port = 0;
  ASSERT_EQ(rte_eth_dev_get_port_by_name(cleave_name.c_str(), &port), 0);
  rte_pmd_cleave_flow f{};
  f.src_ip = kPeerIp;
  f.dst_ip = kOurIp;
  f.src_port = 9;
  f.dst_port = 9;
  f.proto = 17;
  f.mode = RTE_PMD_CLEAVE_COPY;
  f.parser = RTE_PMD_CLEAVE_PARSER_UDP;
  ASSERT_EQ(rte_pmd_cleave_flow_add(port, 3, &f), 0);
  wire->send(test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(9, 9, 100)));
  wire->send(test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(8, 9, 100)));
  poll_for(30);
  EXPECT_EQ(drops(Drop::kNoTransport), 1u);
  EXPECT_EQ(drops(Drop::kNoHandler), 1u);
}

TEST_F(DataplaneTest, AnswersJumboEchoAtMtu9000) {
  build("", false, "", 9000);
  Bytes req = echo_request(9000 - 20 - 8);  // a full 9000-byte IP packet
  ASSERT_EQ(req.size(), 9014u);
  wire->send(req);
  auto out = poll_wire(1);
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), req.size());
  EXPECT_EQ(test::inet_checksum(out[0], 34, out[0].size() - 34), 0);
  EXPECT_TRUE(std::equal(out[0].begin() + 38, out[0].end(), req.begin() + 38));
}

TEST_F(DataplaneTest, TrimsEthernetPaddingFromEcho) {
  build();
  Bytes req = echo_request(4);  // 14 + 20 + 12 = 46 bytes: padded to 60 on a real wire
  size_t real = req.size();
  req.resize(60, 0xee);
  wire->send(req);
  auto out = poll_wire(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].size(), real);
  EXPECT_EQ(test::inet_checksum(out[0], 34, real - 34), 0);
}

// Each malformed or unmatched packet is dropped and counted under its own reason.
TEST_F(DataplaneTest, DropsByReason) {
  build();
  Bytes good = echo_request(8);
  struct Case {
    Bytes frame;
    Drop reason;
  };
  std::vector<Case> cases;
  cases.push_back({Bytes(10, 0), Drop::kRunt});
  cases.push_back(
      {test::ipv4(kGwMac, kPeerMac, kPeerIp, kOurIp, 1, test::icmp(8, 1, 1, 8)), Drop::kNotForUs});
  cases.push_back({test::ether(our_mac, kPeerMac, 0x86dd), Drop::kUnknownEthertype});
  {
    Bytes b = good;
    b[14 + 10] ^= 0xff;  // IP checksum
    cases.push_back({b, Drop::kIpv4BadChecksum});
  }
  {
    Bytes b = good;
    test::put16(b, 14 + 2, 200);  // total length beyond the frame
    test::put16(b, 14 + 10, 0);
    test::put16(b, 14 + 10, test::inet_checksum(b, 14, 20));
    cases.push_back({b, Drop::kIpv4Malformed});
  }
  {
    Bytes b = good;
    b[14] = 0x65;  // version 6 in an IPv4 frame
    cases.push_back({b, Drop::kIpv4Malformed});
  }
  {
    Bytes b = good;
    b[b.size() - 1] ^= 0x5a;  // payload corrupted: ICMP checksum fails
    cases.push_back({b, Drop::kIcmpBadChecksum});
  }
  cases.push_back({test::ipv4(our_mac, kPeerMac, kPeerIp, 0x0a000009, 1, test::icmp(8, 1, 1, 8)),
                   Drop::kIpv4NotOurs});
  cases.push_back(
      {test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 1, test::icmp(8, 1, 1, 8), 0x2000),
       Drop::kIpv4Fragment});
  cases.push_back({test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 1, test::icmp(13, 1, 1, 12)),
                   Drop::kIcmpUnhandled});
  cases.push_back(
      {test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 1, Bytes(4, 0)), Drop::kIcmpMalformed});
  cases.push_back({test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(1000, 2000, 10)),
                   Drop::kNoHandler});
  {
    // RoCEv2: a SEND only (BTH, 16 bytes, an ICRC) for a QP nobody has; then the same with a
    // UDP checksum that is filled in and wrong, which the UDP layer drops first.
    Bytes u = test::udp(49152, 4791, 12 + 16 + 4);
    std::fill(u.begin() + 8, u.begin() + 20, 0);
    u[8] = 0x04;                 // SEND only
    test::put16(u, 10, 0xFFFF);  // P_Key
    test::put16(u, 14, 0x0123);  // DestQP 0x000123
    cases.push_back({test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, u), Drop::kRoceNoQp});
    test::put16(u, 6, 0x1234);
    cases.push_back(
        {test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, u), Drop::kRoceBadUdpChecksum});
  }
  for (const Case& c : cases) {
    uint64_t before = drops(c.reason);
    wire->send(c.frame);
    EXPECT_TRUE(poll_wire(1, 20).empty()) << kDropNames[size_t(c.reason)];
    EXPECT_EQ(drops(c.reason), before + 1) << kDropNames[size_t(c.reason)];
  }
  DataplaneStats s = stats();
  uint64_t total = 0;
  for (uint64_t d : s.drops)
    total += d;
  EXPECT_EQ(total, cases.size());
  EXPECT_EQ(s.proto.icmp_echo_replies, 0u);
}

TEST_F(DataplaneTest, ExceptionTapCarriesUnmatchedTrafficBothWays) {
  build("    exception_tap: cl-test\n", true);
  Bytes u = test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(1000, 53, 20));
  Bytes v6 = test::ether(our_mac, kPeerMac, 0x86dd);
  v6.resize(60);
  wire->send(u);
  wire->send(v6);
  wire->send(echo_request(8));  // still answered by cleaved, not the kernel
  auto answered = poll_wire(1);
  ASSERT_EQ(answered.size(), 1u);
  EXPECT_EQ(answered[0][34], 0);
  auto to_kernel = tap->take();
  ASSERT_EQ(to_kernel.size(), 2u);
  EXPECT_EQ(to_kernel[0], u);
  EXPECT_EQ(to_kernel[1], v6);
  // What the kernel writes to its tap goes out the port untouched.
  Bytes from_kernel = test::ipv4(kPeerMac, our_mac, kOurIp, kPeerIp, 17, test::udp(53, 1000, 30));
  tap->send(from_kernel);
  auto out = poll_wire(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], from_kernel);
  // ARP replies are shown to the kernel too, so it can resolve its own neighbours.
  Bytes reply = test::arp(2, our_mac, kPeerMac, kPeerIp, our_mac, kOurIp);
  wire->send(reply);
  poll_for(5);
  auto arp_to_kernel = tap->take();
  ASSERT_EQ(arp_to_kernel.size(), 1u);
  EXPECT_EQ(arp_to_kernel[0], reply);
  DataplaneStats s = stats();
  EXPECT_EQ(s.ports[0].to_kernel, 3u);
  EXPECT_EQ(s.ports[0].from_kernel, 1u);
  EXPECT_EQ(s.drops[size_t(Drop::kNoHandler)], 0u);
}

TEST_F(DataplaneTest, RouteGetResolvesTheNextHop) {
  build("    gateway: 10.0.0.254\n");
  RouteAnswer a = route_get(0x08080808);
  EXPECT_TRUE(a.found);
  EXPECT_EQ(a.kind, "default");
  EXPECT_EQ(a.next_hop, Ipv4{kGwIp});
  EXPECT_EQ(a.state, ArpState::kIncomplete);
  auto out = poll_wire(1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(test::get16(out[0], 20), 1);
  EXPECT_EQ(test::get32(out[0], 38), kGwIp);
  wire->send(test::arp(2, our_mac, kGwMac, kGwIp, our_mac, kOurIp));
  poll_for(5);
  a = route_get(0x08080808);
  EXPECT_EQ(a.state, ArpState::kReachable);
  EXPECT_EQ(a.mac.str(), "02:00:00:00:00:fe");
  EXPECT_EQ(stats().proto.arp_resolved, 1u);
  EXPECT_TRUE(route_get(0x0b000001).found);  // the default route covers everything
}

TEST_F(DataplaneTest, UnansweredNeighbourIsRetriedThenFails) {
  // A failure held for 400 ms: a slow (sanitized, loaded) run still finds it failed below.
  build("", false, "arp: {retry_ms: 20, retries: 3, failed_hold_ms: 400}\n");
  route_get(kPeerIp);
  auto requests = poll_wire(4, 150);  // retries: 3 requests 20 ms apart, then failure
  ASSERT_EQ(requests.size(), 3u);
  for (const Bytes& r : requests)
    EXPECT_EQ(test::get32(r, 38), kPeerIp);
  EXPECT_EQ(route_get(kPeerIp).state, ArpState::kFailed);
  EXPECT_EQ(stats().proto.arp_failed, 1u);
  poll_for(450);  // failed_hold: the entry is forgotten, and a new lookup asks again
  route_get(kPeerIp);
  EXPECT_EQ(poll_wire(1).size(), 1u);
}

TEST_F(DataplaneTest, NoRouteIsReported) {
  build();
  RouteAnswer a = route_get(0x08080808);
  EXPECT_FALSE(a.found);
}

// Hostile wire: valid frames of every kind, mutated (bit flips, truncation, junk appended) and
// pure garbage, from a fixed seed. Every frame must be accounted for exactly once, every answer
// must be well formed, and every packet buffer must come back. CLEAVE_FUZZ_FRAMES sets the count
// (the slow suite runs two million).
TEST_F(DataplaneTest, EveryHostileFrameIsAccountedFor) {
  build();
  const char* env = std::getenv("CLEAVE_FUZZ_FRAMES");
  const uint64_t frames = env != nullptr ? std::strtoull(env, nullptr, 10) : 20000;
  std::mt19937_64 rng(0xc1ea7e);
  auto pick = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  const std::vector<Bytes> templates = {
      test::arp(1, test::kBroadcast, kPeerMac, kPeerIp, {}, kOurIp),
      test::arp(2, our_mac, kGwMac, kGwIp, our_mac, kOurIp),
      test::arp(1, test::kBroadcast, kPeerMac, kPeerIp, {}, 0x0a000077),
      echo_request(56),
      echo_request(1400),
      test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 17, test::udp(1, 2, 30)),
      test::ipv4(our_mac, kPeerMac, kPeerIp, kOurIp, 6, Bytes(40, 0)),
      test::ether(our_mac, kPeerMac, 0x86dd),
  };
  unsigned avail_before = rte_mempool_avail_count(g_pool);
  uint64_t answers = 0, sent = 0;
  while (sent < frames) {
    unsigned batch = static_cast<unsigned>(std::min<uint64_t>(32, frames - sent));
    for (unsigned i = 0; i < batch; i++) {
      Bytes f = templates[pick(templates.size())];
      switch (pick(5)) {
        case 0:  // intact
          break;
        case 1:  // a few bit flips anywhere
          for (uint64_t k = pick(4) + 1; k > 0; k--)
            f[pick(f.size())] ^= uint8_t(1u << pick(8));
          break;
        case 2:  // truncated
          f.resize(pick(f.size()) + 1);
          break;
        case 3:  // junk appended, header length fields now lie
          for (uint64_t k = pick(64) + 1; k > 0; k--)
            f.push_back(uint8_t(pick(256)));
          if (f.size() > 20) f[14 + pick(6)] = uint8_t(pick(256));
          break;
        default:  // pure garbage of any length
          f.resize(pick(1500) + 1);
          for (uint8_t& b : f)
            b = uint8_t(pick(256));
          if (pick(2) == 0) std::memcpy(f.data(), our_mac.data(), std::min<size_t>(6, f.size()));
          break;
      }
      wire->send(f);
    }
    sent += batch;
    dp->poll_once();
    for (const Bytes& r : wire->take()) {
      answers++;
      ASSERT_GE(r.size(), 42u);
      ASSERT_EQ(test::get_mac(r, 6), our_mac);
      if (test::get16(r, 12) == 0x0806) {
        ASSERT_EQ(test::get16(r, 20), 2);  // only replies
        ASSERT_EQ(test::get32(r, 28), kOurIp);
      } else {
        ASSERT_EQ(test::get16(r, 12), 0x0800);
        ASSERT_EQ(test::inet_checksum(r, 14, 20), 0);
        ASSERT_EQ(r[34], 0);  // echo reply
        ASSERT_EQ(test::inet_checksum(r, 34, r.size() - 34), 0);
      }
    }
  }
  poll_for(5);
  answers += wire->take().size();
  DataplaneStats s = stats();
  uint64_t drops = 0;
  for (uint64_t d : s.drops)
    drops += d;
  EXPECT_EQ(s.ports[0].rx_packets, frames);
  EXPECT_EQ(answers, s.proto.arp_replies_tx + s.proto.icmp_echo_replies);
  EXPECT_EQ(s.ports[0].tx_packets, answers);
  EXPECT_EQ(s.ports[0].rx_packets,
            s.proto.arp_replies_tx + s.proto.icmp_echo_replies + s.ports[0].absorbed + drops);
  EXPECT_GT(s.proto.icmp_echo_replies, 0u);
  EXPECT_GT(drops, frames / 4);
  EXPECT_EQ(rte_mempool_avail_count(g_pool), avail_before) << "packet buffers leaked";
}

// An app table with nothing registered, as the app server builds one.
std::unique_ptr<CtlRequest> attach_request(DpApp& app) {
  app.mrs.resize(2);
  app.pipes.resize(3);
  auto req = std::make_unique<CtlRequest>();
  req->op = CtlOp::kApp;
  req->app_op = AppOp::kAttach;
  req->app = &app;
  return req;
}

std::unique_ptr<CtlRequest> detach_request(uint32_t id) {
  auto req = std::make_unique<CtlRequest>();
  req->op = CtlOp::kApp;
  req->app_op = AppOp::kDetach;
  req->app_id = id;
  return req;
}

TEST_F(DataplaneTest, AnUnansweredRequestIsWithdrawnAndNeverApplied) {
  build();
  DpApp app;
  app.id = 7;
  CtlMiss miss = CtlMiss::kNone;
  std::shared_ptr<CtlRequest> late;
  // Nobody polls: the dataplane does not answer in time.
  auto a = ctl->call(attach_request(app), std::chrono::milliseconds(20), &miss, &late);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(miss, CtlMiss::kWithdrawn);
  EXPECT_EQ(late, nullptr);
  poll_for(20);  // now it takes the request, and must drop it
  auto counters = std::make_unique<CtlRequest>();
  counters->op = CtlOp::kApp;
  counters->app_op = AppOp::kCounters;
  counters->app_counters.reserve(8);
  EXPECT_TRUE(ask(std::move(counters))->app_counters.empty()) << "the withdrawn attach applied";
  // The same id attaches now, and detaches.
  EXPECT_TRUE(ask(attach_request(app))->app_ok);
  EXPECT_EQ(ask(detach_request(7))->app, &app);
}

TEST_F(DataplaneTest, ARequestTakenButUnfinishedComesBackLate) {
  build();
  ctl->test_stall(CtlStall::kAttach);  // the lcore takes the attach, then stalls
  std::atomic<bool> stop{false};
  std::thread lcore([&] {
    while (!stop.load())
      dp->poll_once();
  });
  DpApp app;
  app.id = 9;
  CtlMiss miss = CtlMiss::kNone;
  std::shared_ptr<CtlRequest> late;
  auto a = ctl->call(attach_request(app), std::chrono::milliseconds(20), &miss, &late);
  EXPECT_EQ(a, nullptr);
  EXPECT_EQ(miss, CtlMiss::kLate);
  ASSERT_NE(late, nullptr);
  EXPECT_FALSE(late->done.load());
  ctl->test_stall(CtlStall::kOff);
  auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!late->done.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(late->done.load(std::memory_order_acquire));
  EXPECT_TRUE(late->app_ok);  // applied after the caller gave up: it must learn that
  stop.store(true);
  lcore.join();
  EXPECT_EQ(ask(detach_request(9))->app, &app);
}

TEST_F(DataplaneTest, CountsLoopIterationsAndCycles) {
  build();
  std::thread runner([&] { dp->run(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto req = std::make_unique<CtlRequest>();
  req->op = CtlOp::kStats;
  auto a = ctl->call(std::move(req), std::chrono::milliseconds(1000));
  dp->request_stop();
  runner.join();
  ASSERT_NE(a, nullptr);
  EXPECT_GT(a->stats.lcore.iterations, 100u);
  EXPECT_GT(a->stats.lcore.idle_cycles, 0u);
  EXPECT_GT(dp->heartbeat(), 0u);
}

}  // namespace
}  // namespace cleave::dp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=cleave-dptest-" + std::to_string(getpid());
  const char* eal_argv[] = {
      "dataplane_tests", "--no-huge",           "--no-shconf", "-m", "256", "--no-pci", "-l", "0",
      "--no-telemetry",  "--log-level=*:error", prefix.c_str()};
  int eal_argc = static_cast<int>(sizeof eal_argv / sizeof eal_argv[0]);
  if (rte_eal_init(eal_argc, const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  cleave::dp::g_pool =
      rte_pktmbuf_pool_create("test_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  cleave::dp::g_jumbo_pool =
      rte_pktmbuf_pool_create("test_jumbo", 511, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
  int rc = RUN_ALL_TESTS();
  rte_mempool_free(cleave::dp::g_jumbo_pool);
  rte_mempool_free(cleave::dp::g_pool);
  rte_eal_cleanup();
  return rc;
}
