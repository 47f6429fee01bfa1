// management_test.cc - management commands against the real Dataplane on a DPDK ring port: the
// flow path's commands (flow.list, flow.show, flow.attach and flow.detach of port and tuple
// bindings, transport.list, transport.attach's refusals), stats.show's flow counters, and every
// argument error those commands report; and two shards on one port (what one hands the other,
// their sums and listings).
//
// EAL runs without hugepages or root. The dataplane loops on its own thread, as in cleaved, and
// the test is the management thread. The example datagram plugin is loaded into the registry
// before any dataplane exists (CLEAVE_TEST_PLUGIN, set by tests/meson.build).
#include <cleave/cleave.h>
#include <gtest/gtest.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/rss.h"
#include "config.h"
#include "control/management.h"
#include "control/port.h"
#include "ctl_channel.h"
#include "frames.h"
#include "lcore/dataplane.h"
#include "lcore/route.h"
#include "mgmt_protocol.h"
#include "pipe.h"
#include "registry.h"
#include "transport.h"

namespace cleave::dp {
namespace {

using nlohmann::json;
using test::Bytes;
using test::MacBytes;

rte_mempool* g_pool = nullptr;
std::string g_plugin;   // the datagram plugin's path; empty when it was not given
std::string g_long_tx;  // the long-tx test plugin's path (CLEAVE_TEST_LONG_TX_PLUGIN)
int g_seq = 0;

constexpr uint32_t kOurIp = 0x0a000001;   // 10.0.0.1
constexpr uint32_t kPeerIp = 0x0a000002;  // 10.0.0.2
constexpr MacBytes kPeerMac = {0x02, 0, 0, 0, 0, 0x02};

// A TCP segment with no options and a correct checksum (RFC 9293 3.1), as an IPv4 payload.
Bytes tcp_segment(uint32_t sip, uint32_t dip, uint16_t sport, uint16_t dport, uint8_t flags) {
  Bytes seg(20, 0);
  test::put16(seg, 0, sport);
  test::put16(seg, 2, dport);
  test::put32(seg, 4, 1000);  // seq
  seg[12] = 5 << 4;           // data offset: 20 bytes
  seg[13] = flags;
  test::put16(seg, 14, 65535);  // window
  Bytes pseudo(12, 0);
  test::put32(pseudo, 0, sip);
  test::put32(pseudo, 4, dip);
  pseudo[9] = 6;
  test::put16(pseudo, 10, uint16_t(seg.size()));
  pseudo.insert(pseudo.end(), seg.begin(), seg.end());
  test::put16(seg, 16, test::inet_checksum(pseudo, 0, pseudo.size()));
  return seg;
}

// The MgmtError a command throws: its code and message; a test failure when it succeeds.
std::pair<std::string, std::string> error_of(Management& m, std::string_view cmd,
                                             const json& args) {
  try {
    json r = m.handle(cmd, args);
    ADD_FAILURE() << cmd << " " << args.dump() << " succeeded: " << r.dump();
  } catch (const MgmtError& e) {
    return {e.code, e.what()};
  }
  return {};
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

struct TestApp;

class ManagementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tag = "m" + std::to_string(g_seq++);
    in_ = rte_ring_create((tag + "i").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    out_ = rte_ring_create((tag + "o").c_str(), 1024, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    ASSERT_NE(in_, nullptr);
    ASSERT_NE(out_, nullptr);
    int id = rte_eth_from_rings((tag + "w").c_str(), &in_, 1, &out_, 1, SOCKET_ID_ANY);
    ASSERT_GE(id, 0);
    port_id_ = uint16_t(id);
    // Shards on lcores 1, 2, ... (names only: each dataplane runs on a thread of the test's).
    std::string lcores;
    for (uint16_t k = 0; k < shards_; k++)
      lcores += (k == 0 ? "" : ", ") + std::to_string(k + 1);
    ConfigResult r = parse_config(extra_config_ + "dataplane: {lcores: [" + lcores +
                                      "], idle_sleep_us: 50}\nports:\n  - name: p0\n"
                                      "    device: " +
                                      tag + "w\n    ipv4: 10.0.0.1/24\n",
                                  "test");
    ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
    cfg_ = *r.config;
    DpPort p;
    p.name = "p0";
    p.port_id = port_id_;
    p.ipv4 = cfg_.ports[0].ipv4;
    p.mtu = 1500;
    p.mac = setup_port(p.port_id, "wire", 1500, std::nullopt, 256, 256, g_pool);
    std::memcpy(our_mac_.data(), p.mac.b.data(), 6);
    ports_.push_back(p);
    routes_ = std::make_unique<RouteTable>(cfg_.ports);
    ctl_ = std::make_unique<ShardChannels>(shards_);
    std::vector<Dataplane*> peers;
    for (uint16_t k = 0; k < shards_; k++) {
      dps_.push_back(
          std::make_unique<Dataplane>(DataplaneParams::from_config(cfg_, rte_get_tsc_hz(), k),
                                      ports_, *routes_, g_pool, (*ctl_)[k]));
      peers.push_back(dps_.back().get());
    }
    for (auto& dp : dps_) {
      dp->set_peers(peers);
      runners_.emplace_back([d = dp.get()] { d->run(); });
    }
    DaemonInfo info;
    info.dataplane_lcores.clear();
    for (uint16_t k = 0; k < shards_; k++)
      info.dataplane_lcores.push_back(k + 1u);
    mgmt_ = std::make_unique<Management>(info, cfg_, ports_, *routes_, *ctl_);
  }

  void TearDown() override {
    mgmt_.reset();
    for (auto& dp : dps_)
      dp->request_stop();
    for (std::thread& t : runners_)
      t.join();
    dps_.clear();
    ctl_.reset();
    rte_eth_dev_stop(port_id_);
    rte_eth_dev_close(port_id_);
    for (rte_ring* r : {in_, out_}) {
      void* m;
      while (r != nullptr && rte_ring_dequeue(r, &m) == 0)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      rte_ring_free(r);
    }
  }

  void send(const Bytes& frame) {
    rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
    ASSERT_NE(m, nullptr);
    char* p = rte_pktmbuf_append(m, uint16_t(frame.size()));
    ASSERT_NE(p, nullptr);
    std::memcpy(p, frame.data(), frame.size());
    ASSERT_EQ(rte_ring_enqueue(in_, m), 0);
  }

  // `app` attached to shard 0 for the test (ASSERTs it), and detached at its end.
  void attach_app(TestApp& app);
  void detach_app(TestApp& app);
  // A QP of the attached `app` with `params` (QpCreate, 16 requests each way): the answer.
  std::unique_ptr<CtlRequest> create_qp(const TestApp& app, const std::string& params);

  json handle(std::string_view cmd, const json& args = json::object()) {
    return mgmt_->handle(cmd, args);
  }

  // The next frame out of the wire that `want` accepts (others are skipped); empty when none
  // came within 30 s (a deadline that only bounds a hang).
  Bytes next_out(const std::function<bool(const Bytes&)>& want) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      void* p = nullptr;
      if (rte_ring_dequeue(out_, &p) != 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      auto* m = static_cast<rte_mbuf*>(p);
      Bytes b(rte_pktmbuf_mtod(m, const uint8_t*),
              rte_pktmbuf_mtod(m, const uint8_t*) + m->data_len);
      rte_pktmbuf_free(m);
      if (want(b)) return b;
    }
    return {};
  }

  std::string extra_config_;  // YAML ahead of the fixture's own (set before SetUp)
  uint16_t shards_ = 1;       // dataplanes on the port, each on its own thread (before SetUp)
  Config cfg_;
  std::vector<DpPort> ports_;
  rte_ring* in_ = nullptr;
  rte_ring* out_ = nullptr;
  uint16_t port_id_ = 0;
  MacBytes our_mac_{};
  std::unique_ptr<RouteTable> routes_;
  std::unique_ptr<ShardChannels> ctl_;
  std::vector<std::unique_ptr<Dataplane>> dps_;
  std::vector<std::thread> runners_;
  std::unique_ptr<Management> mgmt_;
};

TEST_F(ManagementTest, FlowListOfAnIdleDataplane) {
  json r = handle("flow.list");
  EXPECT_EQ(r["flows"], json::array());
  EXPECT_EQ(r["listeners"], json::array());
  EXPECT_EQ(r["transports"], json::array({"tcp"}));  // the default one exists from the start
  EXPECT_EQ(r["bindings"], json::array());
}

TEST_F(ManagementTest, AttachBindsAPortAndTheListShowsIt) {
  json b =
      handle("flow.attach",
             {{"port", 5001}, {"transport", "tcp"}, {"params", {{"cc", "cubic"}, {"mss", 1400}}}});
  json want = {{"port", 5001},
               {"uid", nullptr},
               {"transport", "tcp"},
               {"params", {{"cc", "cubic"}, {"mss", "1400"}}}};
  EXPECT_EQ(b, want);
  EXPECT_EQ(handle("flow.list")["bindings"], json::array({want}));
  // Attached again: replaced, not added; without a transport the port keeps its own.
  b = handle("flow.attach", {{"port", 5001}, {"params", {{"cc", "dctcp"}}}});
  EXPECT_EQ(
      b,
      json(
          {{"port", 5001}, {"uid", nullptr}, {"transport", "tcp"}, {"params", {{"cc", "dctcp"}}}}));
  handle("flow.attach", {{"port", 80}});
  json list = handle("flow.list")["bindings"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["params"], json({{"cc", "dctcp"}}));
  EXPECT_EQ(
      list[1],
      json({{"port", 80}, {"uid", nullptr}, {"transport", "tcp"}, {"params", json::object()}}));
}

TEST_F(ManagementTest, TupleBindingsAttachListAndDetach) {
  json t = {{"local", "10.0.0.1:5001"}, {"remote", "*:*"}};
  json b = handle("flow.attach", {{"tuple", t}, {"uid", 1000}, {"params", {{"cc", "dctcp"}}}});
  json want = {{"tuple", t}, {"uid", 1000}, {"transport", "tcp"}, {"params", {{"cc", "dctcp"}}}};
  EXPECT_EQ(b, want);  // without a transport: tcp
  handle("flow.attach", {{"port", 5001}, {"params", {{"cc", "cubic"}}}});
  // The same addresses again replace it; "0.0.0.0" is a wildcard as "*" is.
  json t2 = {{"local", "*:*"}, {"remote", "10.0.0.2:40000"}};
  handle("flow.attach", {{"tuple", t2}});
  b = handle("flow.attach", {{"tuple", {{"local", "0.0.0.0:*"}, {"remote", "10.0.0.2:40000"}}},
                             {"params", {{"cc", "newreno"}}}});
  EXPECT_EQ(b["tuple"], t2);
  json list = handle("flow.list")["bindings"];  // port bindings first, then tuples
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0]["port"], 5001);
  EXPECT_EQ(list[1], want);
  EXPECT_EQ(list[2]["params"], json({{"cc", "newreno"}}));
  // Detached: gone from the list; again, not found.
  EXPECT_EQ(handle("flow.detach", {{"tuple", t}}), want);
  auto [code, msg] = error_of(*mgmt_, "flow.detach", {{"tuple", t}});
  EXPECT_EQ(code, mgmt::kErrNotFound);
  EXPECT_EQ(msg, "no binding for tuple 10.0.0.1:5001 *:*");
  EXPECT_EQ(handle("flow.detach", {{"port", 5001}})["params"], json({{"cc", "cubic"}}));
  std::tie(code, msg) = error_of(*mgmt_, "flow.detach", {{"port", 5001}});
  EXPECT_EQ(msg, "no binding for port 5001");
  list = handle("flow.list")["bindings"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["tuple"], t2);
  // The transport checks a tuple's params as a port's.
  std::tie(code, msg) = error_of(*mgmt_, "flow.attach", {{"tuple", t}, {"params", {{"cc", "x"}}}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_HAS(msg, "cannot attach to tuple 10.0.0.1:5001 *:*: tcp: unknown congestion control 'x'");
}

TEST_F(ManagementTest, TupleBindingsAreBounded) {
  auto tuple = [](size_t i) {
    return json{{"local", "*:*"}, {"remote", "10.0.0.2:" + std::to_string(1000 + i)}};
  };
  for (size_t i = 0; i < kMaxTupleBindings; i++)
    handle("flow.attach", {{"tuple", tuple(i)}});
  auto [code, msg] = error_of(*mgmt_, "flow.attach", {{"tuple", tuple(kMaxTupleBindings)}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_EQ(msg, "cannot attach to tuple *:* 10.0.0.2:" + std::to_string(1000 + kMaxTupleBindings) +
                     ": the table of tuple bindings is full (" + std::to_string(kMaxTupleBindings) +
                     "): detach one first");
  // Replacing one still works when full, and so does a port binding.
  handle("flow.attach", {{"tuple", tuple(3)}, {"params", {{"cc", "cubic"}}}});
  handle("flow.attach", {{"port", 80}});
  EXPECT_EQ(handle("flow.list")["bindings"].size(), kMaxTupleBindings + 1);
  handle("flow.detach", {{"tuple", tuple(0)}});
  handle("flow.attach", {{"tuple", tuple(kMaxTupleBindings)}});
}

TEST_F(ManagementTest, TupleAndUidArgumentErrors) {
  const json t = {{"local", "10.0.0.1:1"}, {"remote", "*:*"}};
  struct Case {
    json args;
    const char* message;
  } cases[] = {
      {{{"port", 1}, {"tuple", t}}, "flow.attach: give one of the arguments 'port' and 'tuple'"},
      {{{"tuple", "10.0.0.1:1 *:*"}}, "argument 'tuple' must be {local, remote}"},
      {{{"tuple", {{"local", "10.0.0.1:1"}}}}, "argument 'tuple' must be {local, remote}"},
      {{{"tuple", {{"local", "10.0.0.1:1"}, {"remote", 5}}}},
       "argument 'tuple' must be {local, remote}"},
      {{{"tuple", {{"local", "10.0.0.1"}, {"remote", "*:*"}}}},
       "tuple local '10.0.0.1' is not \"ip:port\""},
      {{{"tuple", {{"local", "10.0.0.1:0"}, {"remote", "*:*"}}}}, "tuple local '10.0.0.1:0'"},
      {{{"tuple", {{"local", "*:*"}, {"remote", "10.0.0.256:1"}}}}, "tuple remote '10.0.0.256:1'"},
      {{{"tuple", {{"local", "*:*"}, {"remote", "*:65536"}}}}, "tuple remote '*:65536'"},
      {{{"port", 1}, {"uid", -1}}, "argument 'uid' must be a user id (0 to 4294967294)"},
      {{{"port", 1}, {"uid", 4294967295u}}, "argument 'uid' must be a user id"},
      {{{"port", 1}, {"uid", "root"}}, "argument 'uid' must be a user id"},
  };
  for (const Case& c : cases) {
    auto [code, msg] = error_of(*mgmt_, "flow.attach", c.args);
    EXPECT_EQ(code, mgmt::kErrBadRequest) << c.args.dump();
    EXPECT_HAS(msg, c.message);
  }
  auto [code, msg] = error_of(*mgmt_, "flow.detach", json::object());
  EXPECT_EQ(msg, "flow.detach: give one of the arguments 'port' and 'tuple'");
  EXPECT_EQ(handle("flow.list")["bindings"], json::array());  // nothing was bound
}

// Plugins attached to the running daemon: every refusal says why and changes nothing. (Success
// is the integration test's: this process loaded the datagram plugin before its dataplane.)
TEST_F(ManagementTest, TransportAttachRefusals) {
  const size_t before = handle("transport.list")["transports"].size();
  auto refused = [&](const std::string& path) {
    auto [code, msg] = error_of(*mgmt_, "transport.attach", {{"path", path}});
    EXPECT_EQ(code, mgmt::kErrBadRequest) << path;
    return msg;
  };
  EXPECT_EQ(refused("plugin.so"),
            "transport.attach: the path must be absolute, got 'plugin.so' (cleavectl makes a "
            "relative path absolute against its own directory)");
  EXPECT_EQ(refused("/nonexistent/solar.so"),
            "cannot attach transport: /nonexistent/solar.so: cannot load: cannot open shared "
            "object file: No such file or directory");
  auto env = [](const char* var) {
    const char* p = std::getenv(var);
    return std::string(p != nullptr ? p : "");
  };
  const std::string wrong_abi = env("CLEAVE_TEST_BAD_PLUGIN_WRONG_ABI");
  const std::string taken = env("CLEAVE_TEST_BAD_PLUGIN_TAKEN");
  if (g_plugin.empty() || wrong_abi.empty() || taken.empty()) {
    GTEST_SKIP() << "the test plugins are not set: run through meson test";
  }
  EXPECT_HAS(refused(wrong_abi), wrong_abi + ": built for transport ABI version 999");
  EXPECT_EQ(refused(taken), "cannot attach transport: " + taken +
                                ": transport name \"tcp\" is taken (by built-in)");
  EXPECT_EQ(refused(g_plugin),
            "cannot attach transport: " + g_plugin + ": already loaded (transport \"datagram\")");
  auto [code, msg] = error_of(*mgmt_, "transport.attach", json::object());
  EXPECT_EQ(msg, "transport.attach: missing argument 'path'");
  EXPECT_EQ(handle("transport.list")["transports"].size(), before);
  EXPECT_EQ(handle("flow.list")["transports"][0], "tcp");  // the dataplane still answers
}

TEST_F(ManagementTest, AttachRefusalsCarryTheTransportsReason) {
  auto [code, msg] =
      error_of(*mgmt_, "flow.attach",
               {{"port", 5001}, {"transport", "tcp"}, {"params", {{"cc", "nosuch"}}}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_EQ(msg,
            "cannot attach to port 5001: tcp: unknown congestion control 'nosuch' (have newreno, "
            "cubic, dctcp)");
  std::tie(code, msg) =
      error_of(*mgmt_, "flow.attach", {{"port", 5001}, {"params", {{"mss", "9"}}}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_HAS(msg, "tcp: bad value '9' for mss (88..8960)");
  std::tie(code, msg) = error_of(*mgmt_, "flow.attach", {{"port", 5001}, {"transport", "nope"}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_EQ(msg, "cannot attach to port 5001: no transport named 'nope'");
  EXPECT_EQ(handle("flow.list")["bindings"], json::array());  // nothing was bound
}

TEST_F(ManagementTest, AttachArgumentErrors) {
  struct Case {
    json args;
    const char* message;
  } cases[] = {
      {json::object(), "flow.attach: missing argument 'port' (or 'tuple')"},
      {{{"port", 0}}, "argument 'port' must be a port number from 1 to 65535"},
      {{{"port", 65536}}, "argument 'port' must be a port number from 1 to 65535"},
      {{{"port", -1}}, "argument 'port' must be a port number from 1 to 65535"},
      {{{"port", "5001"}}, "argument 'port' must be a port number from 1 to 65535"},
      {{{"port", 5001}, {"transport", 6}}, "argument 'transport' must be a transport's name"},
      {{{"port", 5001}, {"transport", ""}}, "argument 'transport' must be a transport's name"},
      {{{"port", 5001}, {"params", json::array({"cc", "cubic"})}},
       "argument 'params' must be an object of names to values"},
      {{{"port", 5001}, {"params", {{"sack", true}}}},
       "parameter 'sack' must be a string or an integer"},
      {{{"port", 5001}, {"params", {{"cc", {{"a", 1}}}}}},
       "parameter 'cc' must be a string or an integer"},
      {{{"port", 5001}, {"params", {{"", "x"}}}}, "a parameter's name may not be empty"},
  };
  for (const Case& c : cases) {
    auto [code, msg] = error_of(*mgmt_, "flow.attach", c.args);
    EXPECT_EQ(code, mgmt::kErrBadRequest) << c.args.dump();
    EXPECT_HAS(msg, c.message);
  }
}

TEST_F(ManagementTest, FlowShowOfNoFlowIsNotFound) {
  auto [code, msg] = error_of(*mgmt_, "flow.show", {{"id", 7}});
  EXPECT_EQ(code, mgmt::kErrNotFound);
  EXPECT_EQ(msg, "no flow with id 7");
  for (const json& args : {json::object(), json{{"id", "7"}}, json{{"id", -1}},
                           json{{"id", 4294967295u}}, json{{"id", 1.5}}}) {
    std::tie(code, msg) = error_of(*mgmt_, "flow.show", args);
    EXPECT_EQ(code, mgmt::kErrBadRequest) << args.dump();
    EXPECT_EQ(msg, "flow.show: argument 'id' must be a flow id (a number)");
  }
}

TEST_F(ManagementTest, TransportListShowsTheRegistryAndWhatRuns) {
  json r = handle("transport.list")["transports"];
  ASSERT_GE(r.size(), 1u);
  EXPECT_EQ(r[0]["name"], "tcp");
  EXPECT_EQ(r[0]["origin"], "built-in");
  EXPECT_EQ(r[0]["instantiated"], true);
  EXPECT_EQ(r[0]["flows"], 0);
  EXPECT_EQ(r[0]["listeners"], 0);
  EXPECT_HAS(r[0]["description"].get<std::string>(), "TCP");
  ASSERT_GE(r.size(), 2u);
  EXPECT_EQ(r[1]["name"], "rocev2");  // built in, made by the first queue pair
  EXPECT_EQ(r[1]["origin"], "built-in");
  EXPECT_EQ(r[1]["instantiated"], false);
  ASSERT_GE(r.size(), 3u);
  EXPECT_EQ(r[2]["name"], "solar");  // built in, made by the first Solar queue pair
  EXPECT_EQ(r[2]["claims"], "UDP 7000");
  EXPECT_EQ(r[2]["instantiated"], false);
  if (g_plugin.empty()) GTEST_SKIP() << "CLEAVE_TEST_PLUGIN is not set: run through meson test";
  ASSERT_EQ(r.size(), g_long_tx.empty() ? 4u : 5u);  // long-tx is loaded after datagram
  EXPECT_EQ(r[3]["name"], "datagram");
  EXPECT_EQ(r[3]["origin"], g_plugin);
  EXPECT_EQ(r[3]["instantiated"], false);
  // A binding to the plugin's transport instantiates it; its own check_params speaks.
  auto [code, msg] = error_of(*mgmt_, "flow.attach",
                              {{"port", 7}, {"transport", "datagram"}, {"params", {{"x", "1"}}}});
  EXPECT_EQ(code, mgmt::kErrBadRequest);
  EXPECT_HAS(msg, "datagram: no parameters are known");
  handle("flow.attach", {{"port", 7}, {"transport", "datagram"}});
  EXPECT_EQ(handle("transport.list")["transports"][3]["instantiated"], true);
  EXPECT_EQ(handle("flow.list")["transports"], json::array({"tcp", "datagram"}));
  for (const char* qp : {"rocev2", "solar"}) {  // queue pairs only
    auto [c, m] = error_of(*mgmt_, "flow.attach", {{"port", 7}, {"transport", qp}});
    EXPECT_EQ(c, mgmt::kErrBadRequest) << qp;
    EXPECT_HAS(m, "makes queue pairs, which apps open by their QP calls: it takes no bindings");
  }
}

TEST_F(ManagementTest, StatsShowCountsTheFlowPath) {
  json flows = handle("stats.show")["flows"];
  size_t n = 0;
#define CLEAVE_X(field, what)                       \
  EXPECT_TRUE(flows[#field].is_number()) << #field; \
  n++;
  CLEAVE_FLOW_COUNTERS(CLEAVE_X)
#undef CLEAVE_X
  EXPECT_EQ(flows.size(), n);
  EXPECT_EQ(flows["rst_sent"], 0);
  // A SYN to a port nobody listens on is answered with a RST (RFC 9293 3.10.7.1) and counted.
  send(test::ipv4(our_mac_, kPeerMac, kPeerIp, kOurIp, 6,
                  tcp_segment(kPeerIp, kOurIp, 40000, 5001, 0x02)));
  json s;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  do {
    s = handle("stats.show");
  } while (s["flows"]["rst_sent"] == 0 && std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(s["flows"]["rst_sent"], 1);
  EXPECT_EQ(s["drops"]["tcp_no_flow"], 1);
}

// An app of the test's own in plain memory, attached the way the app server attaches one: MR 0
// (256 KiB), a completion pipe and a submit pipe.
struct TestApp {
  static constexpr uint16_t kCq = 0, kSq = 1;
  static constexpr uint32_t kEntries = 64;
  static constexpr size_t kMrBytes = 256 * 1024;
  struct alignas(64) Line {
    uint8_t b[64];
  };

  explicit TestApp(uint32_t id)
      : mem(kMrBytes, 0x5A),
        cq_mem(abi::pipe_bytes(abi::PipeKind::kCompletion, kEntries) / 64),
        sq_mem(abi::pipe_bytes(abi::PipeKind::kSubmit, kEntries) / 64) {
    dp.id = id;
    dp.error_budget = 64;
    dp.mrs.resize(1);
    dp.mrs[0] = {mem.data(), mem.size(), abi::kAccessRead | abi::kAccessWrite};
    dp.pipes.resize(2);
    auto cq = ipc::pipe_at(cq_mem.data(), 0);
    auto sq = ipc::pipe_at(sq_mem.data(), 0);
    dp.pipes[kCq].kind = abi::PipeKind::kCompletion;
    dp.pipes[kCq].cq_out = {cq.ctl, static_cast<abi::Completion*>(cq.ring), kEntries};
    dp.pipes[kSq].kind = abi::PipeKind::kSubmit;
    dp.pipes[kSq].cq = kCq;
    dp.pipes[kSq].sq = {sq.ctl, static_cast<abi::SendEntry*>(sq.ring), kEntries};
    sq_out = {sq.ctl, static_cast<abi::SendEntry*>(sq.ring), kEntries};
    cq_in = {cq.ctl, static_cast<abi::Completion*>(cq.ring), kEntries};
  }

  std::vector<uint8_t> mem;
  std::vector<Line> cq_mem, sq_mem;
  DpApp dp;
  ipc::PipeProducer<abi::SendEntry> sq_out;
  ipc::PipeConsumer<abi::Completion> cq_in;
};

void ManagementTest::attach_app(TestApp& app) {
  ctl::AppAttach attach;
  attach.app = &app.dp;
  auto r = (*ctl_)[0].call(CtlRequest::make(attach), std::chrono::seconds(5));
  ASSERT_TRUE(r && r->app_ok());
}

void ManagementTest::detach_app(TestApp& app) {
  ctl::AppDetach detach;
  detach.app_id = app.dp.id;
  auto r = (*ctl_)[0].call(CtlRequest::make(detach), std::chrono::seconds(5));
  EXPECT_TRUE(r && r->app_ok());
}

std::unique_ptr<CtlRequest> ManagementTest::create_qp(const TestApp& app,
                                                      const std::string& params) {
  ctl::QpCreate q;
  q.app_id = app.dp.id;
  q.cq = TestApp::kCq;
  q.send_wr = 16;
  q.recv_wr = 16;
  q.params = params;
  return (*ctl_)[0].call(CtlRequest::make(std::move(q)), std::chrono::seconds(5));
}

// A plugin's descriptor longer than transport::kMaxTxLen is refused and counted, and the lcore
// carries on: the descriptor's extbuf segments live on its stack, sized for kMaxTxLen (before
// the limit, 4 of them, and a 200 KiB send overflowed them: ASan's stack-buffer-overflow).
TEST_F(ManagementTest, OverlongDescriptorFromAPluginIsRefusedAndCounted) {
  if (g_long_tx.empty()) GTEST_SKIP() << "CLEAVE_TEST_LONG_TX_PLUGIN is not set: run through meson";
  auto call = [&](std::unique_ptr<CtlRequest> r) {
    r = (*ctl_)[0].call(std::move(r), std::chrono::seconds(5));
    EXPECT_NE(r, nullptr) << "the dataplane did not answer";
    return r;
  };
  TestApp app(7);
  ctl::AppAttach attach;
  attach.app = &app.dp;
  auto r = call(CtlRequest::make(attach));
  ASSERT_TRUE(r && r->app_ok());
  // The peer asks for our address: its own is learned, so the connect needs no ARP round.
  send(test::arp(1, test::kBroadcast, kPeerMac, kPeerIp, {}, kOurIp));
  auto wait_for = [&](auto&& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return done();
  };
  std::vector<abi::Completion> got;
  auto poll_cq = [&] {
    abi::Completion c[8];
    got.insert(got.end(), c, c + app.cq_in.consume(c, 8));
  };
  ctl::Connect connect;
  connect.app_id = app.dp.id;
  connect.cq = TestApp::kCq;
  connect.ip = kPeerIp;
  connect.port = 9;
  connect.transport = "long-tx";
  r = call(CtlRequest::make(std::move(connect)));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->flow_status(), 0);
  const uint32_t flow = r->as<ctl::Connect>().id;
  ASSERT_TRUE(wait_for([&] {
    poll_cq();
    return !got.empty();
  }));
  ASSERT_EQ(got[0].flags, abi::kCompEvent);
  ASSERT_EQ(got[0].opcode, abi::kEvConnected);
  // 200 KiB: refused. Then exactly the limit: sent.
  for (uint32_t len : {200u * 1024, transport::kMaxTxLen}) {
    abi::SendEntry e{};
    e.opcode = abi::kOpFlowSend;
    e.wr_id = len;
    e.target = flow;
    e.length = len;
    ASSERT_EQ(app.sq_out.produce(&e, 1), 1u);
  }
  ASSERT_TRUE(wait_for([&] {
    poll_cq();
    return got.size() >= 3;
  })) << "the sends did not complete";
  json flows = handle("stats.show")["flows"];
  EXPECT_EQ(flows["tx_too_long"], 1);
  EXPECT_EQ(flows["tx_descs"], 2);
  EXPECT_EQ(flows["tx_bad_desc"], 0);
  ctl::AppDetach detach;
  detach.app_id = app.dp.id;
  r = call(CtlRequest::make(detach));
  EXPECT_TRUE(r && r->app_ok());
}

// The config's rocev2.cnp_dscp is every new QP's CNP DSCP; a QP's own parameters override it.
class ManagementRoceTest : public ManagementTest {
 protected:
  void SetUp() override {
    extra_config_ = "rocev2: {cnp_dscp: 26}\n";
    ManagementTest::SetUp();
  }
};

TEST_F(ManagementRoceTest, ConfiguredCnpDscpIsEveryQpsUnlessItSaysOtherwise) {
  TestApp app(8);
  ASSERT_NO_FATAL_FAILURE(attach_app(app));
  for (const auto& [params, want] : {std::pair("", 26), {"dcqcn_cnp_dscp 10", 10}}) {
    SCOPED_TRACE(params);
    auto r = create_qp(app, params);
    ASSERT_TRUE(r);
    ASSERT_EQ(r->flow_status(), 0);
    json f = handle("flow.show", {{"id", r->as<ctl::QpCreate>().qp}});
    EXPECT_EQ(f["info"]["cnp_dscp"], want) << f.dump();
  }
  detach_app(app);
}

// "via" (a QP's routes through other local ports) is refused at create unless the transport
// takes several routes, the addresses are IPv4, distinct and not 0, and the daemon has a port
// for each besides the QP's own (this one has one port: any via is one too many).
TEST_F(ManagementTest, QpViaIsCheckedAtCreate) {
  TestApp app(8);
  ASSERT_NO_FATAL_FAILURE(attach_app(app));
  for (const auto& [params, want] : {std::pair("transport solar paths 2", 0),
                                     {"via 10.1.0.2", CL_EINVAL},
                                     {"transport solar via 10.1.0.2", CL_EINVAL},
                                     {"transport solar via 10.1.0", CL_EINVAL},
                                     {"transport solar via 10.1.0.2,", CL_EINVAL},
                                     {"transport solar via 0.0.0.0", CL_EINVAL},
                                     {"transport solar via 10.1.0.2,10.1.0.2", CL_EINVAL},
                                     {"transport solar via 10.1.0.2 via 10.2.0.2", CL_EINVAL}}) {
    SCOPED_TRACE(params);
    auto r = create_qp(app, params);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->flow_status(), want);
  }
  detach_app(app);
}

// A listing of many flows is built a page at a time, so the lcore's time on it is bounded
// between packets: every flow comes exactly once, no page holds more than kFlowListPageRows
// rows, and between pages pings are answered and a new app is attached. (Built in one go, a
// listing of 100 K flows held ping 0.8 s and new apps were refused meanwhile.)
class ManagementManyFlowsTest : public ManagementTest {
 protected:
  void SetUp() override {
    extra_config_ = "nic: {max_flows: 32768}\n";
    ManagementTest::SetUp();
  }

  // One echo request through the dataplane and its reply.
  bool ping(uint16_t seq) {
    send(test::ipv4(our_mac_, kPeerMac, kPeerIp, kOurIp, 1, test::icmp(8, 0x99, seq, 16)));
    // Ethernet, IPv4 (20 bytes), ICMP echo reply (type 0) with our id and seq.
    return !next_out([&](const Bytes& b) {
              return b.size() >= 42 && b[12] == 0x08 && b[13] == 0x00 && b[23] == 1 && b[34] == 0 &&
                     b[38] == 0x00 && b[39] == 0x99 && b[40] == (seq >> 8) && b[41] == (seq & 0xff);
            }).empty();
  }

  std::unique_ptr<CtlRequest> call(std::unique_ptr<CtlRequest> r) {
    return (*ctl_)[0].call(std::move(r), std::chrono::seconds(30));
  }
};

TEST_F(ManagementManyFlowsTest, ListingIsPagedAndThePacketPathInterleaves) {
  constexpr uint32_t kQps = 4000;  // 16 pages of 256 rows
  TestApp app(9), late(10);
  ctl::AppAttach attach;
  attach.app = &app.dp;
  auto r = call(CtlRequest::make(attach));
  ASSERT_TRUE(r && r->app_ok());
  std::vector<uint32_t> made;
  for (uint32_t i = 0; i < kQps; i++) {
    ctl::QpCreate q;
    q.app_id = app.dp.id;
    q.cq = TestApp::kCq;
    q.send_wr = 1;
    q.recv_wr = 1;
    r = call(CtlRequest::make(std::move(q)));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->flow_status(), 0) << "QP " << i;
    made.push_back(r->as<ctl::QpCreate>().qp);
  }

  std::vector<uint32_t> seen;
  uint16_t pages = 0;
  json start = 0;
  do {
    json page = handle("flow.list", {{"start", start}, {"max", 256}});
    ASSERT_TRUE(page.contains("next")) << "a page says where the next one starts";
    ASSERT_LE(page["flows"].size() + page["listeners"].size(), ctl::kFlowListPageRows);
    EXPECT_EQ(page["transports"], json::array({"tcp", "rocev2"}));
    for (const json& f : page["flows"])
      seen.push_back(f["id"].get<uint32_t>());
    pages++;
    ASSERT_TRUE(ping(pages)) << "no echo reply after page " << pages;
    if (pages == 10) {
      ctl::AppAttach a;
      a.app = &late.dp;
      auto ra = call(CtlRequest::make(a));
      ASSERT_TRUE(ra && ra->app_ok()) << "an app attached while the listing runs";
    }
    start = page["next"];
  } while (!start.is_null());
  EXPECT_GE(pages, kQps / ctl::kFlowListPageRows);
  std::sort(seen.begin(), seen.end());
  std::sort(made.begin(), made.end());
  EXPECT_EQ(std::adjacent_find(seen.begin(), seen.end()), seen.end()) << "a flow listed twice";
  EXPECT_EQ(seen, made) << "every flow, exactly once";
  // The lcore's own pages end when their time is up, one row at least: with none to spend, a
  // row a page, each where the last ended (made is sorted now: the listing's order).
  uint32_t pos = 0;
  for (int i = 0; i < 50; i++) {
    ctl::FlowList q;
    q.only = transport::kNoFlow;
    q.start = pos;
    q.budget_us = 0;
    r = call(CtlRequest::make(std::move(q)));
    ASSERT_TRUE(r);
    const auto& p = r->as<ctl::FlowList>();
    ASSERT_EQ(p.rows.size(), 1u) << "page " << i;
    EXPECT_EQ(p.rows[0].id, made[size_t(i)]) << "page " << i;
    EXPECT_TRUE(p.transports.empty()) << "transports and bindings only when asked";
    ASSERT_GT(p.next, pos);
    pos = p.next;
  }
  // Without start or max: the whole listing at once, built from the same pages.
  EXPECT_EQ(handle("flow.list")["flows"].size(), kQps);
  // A page past the end, and arguments out of range.
  json end = handle("flow.list", {{"start", 1u << 30}});
  EXPECT_TRUE(end["flows"].empty());
  EXPECT_TRUE(end["next"].is_null());
  EXPECT_EQ(error_of(*mgmt_, "flow.list", {{"max", 0}}).first, mgmt::kErrBadRequest);
  EXPECT_EQ(error_of(*mgmt_, "flow.list", {{"max", 257}}).first, mgmt::kErrBadRequest);
  EXPECT_EQ(error_of(*mgmt_, "flow.list", {{"start", -1}}).first, mgmt::kErrBadRequest);
  for (uint32_t id : {app.dp.id, late.dp.id}) {
    ctl::AppDetach detach;
    detach.app_id = id;
    r = call(CtlRequest::make(detach));
    EXPECT_TRUE(r && r->app_ok());
  }
}

TEST_F(ManagementTest, UnknownFlowCommandIsReported) {
  auto [code, msg] = error_of(*mgmt_, "flow.frob", json::object());
  EXPECT_EQ(code, mgmt::kErrUnknownCommand);
}

// Two shards on one ring port (the generic backend's steering stage splits its one queue), each
// dataplane on its own thread, as cleaved runs dataplane.lcores: [1, 2]. What one shard hands
// the other: a SYN that RSS put on queue 0 for a listener of shard 1's app (accepted there, its
// SYN-ACK sent), the ARP that queue 0 received (shard 1 learns the peer). A SYN for no listener
// is answered by the shard it reached; a connect from shard 1 picks source ports whose replies
// RSS puts on queue 1. Management sums and lists both.
class ManagementShardsTest : public ManagementTest {
 protected:
  static constexpr uint16_t kShards = 2;

  void SetUp() override {
    shards_ = kShards;
    ManagementTest::SetUp();
  }

  std::unique_ptr<CtlRequest> call(uint16_t shard, std::unique_ptr<CtlRequest> r) {
    return (*ctl_)[shard].call(std::move(r), std::chrono::seconds(10));
  }

  // A TCP segment out of the wire with these ports: its flags; -1 when none came.
  int tcp_out(uint16_t sport, uint16_t dport) {
    Bytes b = next_out([&](const Bytes& f) {
      return f.size() >= 54 && f[12] == 0x08 && f[13] == 0x00 && f[23] == 6 &&
             test::get16(f, 34) == sport && test::get16(f, 36) == dport;
    });
    return b.empty() ? -1 : b[47];
  }

  // A kernel source port whose segment to `dport` RSS puts on `queue`.
  static uint16_t sport_to(uint16_t queue, uint16_t dport, uint16_t from) {
    const rss::Reta reta = rss::default_reta(kShards);
    for (uint32_t p = from;; p++) {
      if (rss::reta_queue(reta, rss::hash_ipv4_l4(rss::kDefaultKey, kPeerIp, kOurIp, uint16_t(p),
                                                  dport)) == queue) {
        return uint16_t(p);
      }
    }
  }

  DataplaneStats shard_stats(uint16_t shard) {
    auto r = call(shard, CtlRequest::make(ctl::Stats{}));
    EXPECT_NE(r, nullptr);
    return r ? r->as<ctl::Stats>().stats : DataplaneStats{};
  }
};

TEST_F(ManagementShardsTest, AListenerOnOneShardAcceptsWhatReachesTheOther) {
  TestApp app(5);
  ctl::AppAttach attach;
  attach.app = &app.dp;
  auto r = call(1, CtlRequest::make(attach));
  ASSERT_TRUE(r && r->app_ok());

  // ARP reaches queue 0: shard 0 answers, and shard 1 learns the peer from its copy.
  send(test::arp(1, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, kPeerMac, kPeerIp, {}, kOurIp));
  ASSERT_FALSE(next_out([](const Bytes& f) {
                 return f.size() >= 42 && f[12] == 0x08 && f[13] == 0x06;
               }).empty())
      << "no ARP reply";
  bool learned = false;
  for (int i = 0; i < 1000 && !learned; i++) {
    ctl::ArpTable q;
    q.rows.reserve(16);
    r = call(1, CtlRequest::make(std::move(q)));
    ASSERT_TRUE(r);
    for (const ArpRow& row : r->as<ctl::ArpTable>().rows)
      learned = learned || (row.ip == Ipv4{kPeerIp} && row.state == ArpState::kReachable);
    if (!learned) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(learned) << "shard 1 did not learn the peer from shard 0's ARP";

  // The app's listener on shard 1, and its share on shard 0 (as the app server does).
  ctl::Listen l;
  l.app_id = app.dp.id;
  l.cq = TestApp::kCq;
  l.port = 8080;
  r = call(1, CtlRequest::make(l));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->flow_status(), 0);
  ctl::ListenShare share;
  share.app_id = app.dp.id;
  share.shard = 1;
  share.listener = r->as<ctl::Listen>().id;
  share.port = 8080;
  r = call(0, CtlRequest::make(share));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->flow_status(), 0);
  // An app on shard 0 may not take the address shard 1's listener has.
  TestApp other(6);
  attach.app = &other.dp;
  ASSERT_TRUE(call(0, CtlRequest::make(attach))->app_ok());
  ctl::Listen l0 = l;
  l0.app_id = other.dp.id;
  EXPECT_EQ(call(0, CtlRequest::make(l0))->flow_status(), CL_EADDRINUSE);

  // A SYN RSS puts on queue 0: handed to shard 1, whose SYN-ACK answers it.
  const uint16_t to0 = sport_to(0, 8080, 40000);
  send(test::ipv4(our_mac_, kPeerMac, kPeerIp, kOurIp, 6,
                  tcp_segment(kPeerIp, kOurIp, to0, 8080, 0x02)));
  EXPECT_EQ(tcp_out(8080, to0), 0x12) << "no SYN-ACK from the listener's shard";
  // A SYN for a port nobody listens on is answered by the shard it reached, with a RST.
  const uint16_t none = sport_to(0, 8081, 41000);
  send(test::ipv4(our_mac_, kPeerMac, kPeerIp, kOurIp, 6,
                  tcp_segment(kPeerIp, kOurIp, none, 8081, 0x02)));
  EXPECT_EQ(tcp_out(8081, none), 0x14);

  const DataplaneStats s0 = shard_stats(0), s1 = shard_stats(1);
  EXPECT_EQ(s0.ports[0].handed_off, 1u);
  EXPECT_EQ(s1.ports[0].handed_in, 1u);
  EXPECT_EQ(s0.flows.flows_opened, 0u);
  EXPECT_EQ(s1.flows.flows_opened, 1u);

  // Management: both shards' lcores and their sum; the flow and the listener, each once, with
  // the shard that has it.
  json st = handle("stats.show");
  ASSERT_EQ(st["lcores"].size(), 2u);
  EXPECT_EQ(st["lcores"][1]["shard"], 1);
  EXPECT_EQ(st["lcores"][1]["lcore"], 2);
  EXPECT_EQ(st["ports"]["p0"]["handed_off"], 1);
  EXPECT_EQ(st["flows"]["flows_opened"], 1);
  json list = handle("flow.list");
  ASSERT_EQ(list["flows"].size(), 1u) << list.dump();
  EXPECT_EQ(list["flows"][0]["shard"], 1);
  ASSERT_EQ(list["listeners"].size(), 1u) << list.dump();
  EXPECT_EQ(list["listeners"][0]["shard"], 1);

  // Connects from shard 1: each source port's replies RSS puts on queue 1.
  const rss::Reta reta = rss::default_reta(kShards);
  for (uint16_t i = 0; i < 4; i++) {
    ctl::Connect c;
    c.app_id = app.dp.id;
    c.cq = TestApp::kCq;
    c.ip = kPeerIp;
    c.port = uint16_t(9000 + i);
    r = call(1, CtlRequest::make(c));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->flow_status(), 0);
    Bytes syn = next_out([&](const Bytes& f) {
      return f.size() >= 54 && f[23] == 6 && test::get16(f, 36) == 9000 + i && f[47] == 0x02;
    });
    ASSERT_FALSE(syn.empty()) << "no SYN for connect " << i;
    const uint16_t sport = test::get16(syn, 34);
    EXPECT_EQ(rss::reta_queue(reta, rss::hash_ipv4_l4(rss::kDefaultKey, kPeerIp, kOurIp,
                                                      uint16_t(9000 + i), sport)),
              1)
        << "source port " << sport;
  }

  for (auto [shard, a] : {std::pair<uint16_t, TestApp*>{1, &app}, {0, &other}}) {
    ctl::AppDetach d;
    d.app_id = a->dp.id;
    EXPECT_TRUE(call(shard, CtlRequest::make(d))->app_ok());
  }
  // Withdrawn from shard 0 (as the app server does when the app goes): the port is free there.
  share.add = false;
  share.listener = transport::kNoFlow;
  EXPECT_EQ(call(0, CtlRequest::make(share))->flow_status(), 0);
  EXPECT_EQ(call(0, CtlRequest::make(share))->flow_status(), CL_ENOENT);
}

// A transport claiming UDP (the datagram plugin): its listener on shard 1 is shared with its
// protocol, so a datagram RSS puts on queue 0 is handed over and opens the flow on shard 1.
TEST_F(ManagementShardsTest, ADatagramForAListenerOnTheOtherShardIsHandedOver) {
  if (g_plugin.empty()) GTEST_SKIP() << "CLEAVE_TEST_PLUGIN is not set: run through meson test";
  TestApp app(5);
  ctl::AppAttach attach;
  attach.app = &app.dp;
  ASSERT_TRUE(call(1, CtlRequest::make(attach))->app_ok());
  ctl::Listen l;
  l.app_id = app.dp.id;
  l.cq = TestApp::kCq;
  l.port = 9000;  // one the plugin claims
  l.transport = "datagram";
  auto r = call(1, CtlRequest::make(l));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->flow_status(), 0);
  EXPECT_EQ(r->as<ctl::Listen>().proto, 17);  // the plugin's claim's
  ctl::ListenShare share;
  share.app_id = app.dp.id;
  share.shard = 1;
  share.listener = r->as<ctl::Listen>().id;
  share.port = 9000;
  share.proto = r->as<ctl::Listen>().proto;
  ASSERT_EQ(call(0, CtlRequest::make(share))->flow_status(), 0);

  const uint16_t to0 = sport_to(0, 9000, 42000);
  send(test::ipv4(our_mac_, kPeerMac, kPeerIp, kOurIp, 17, test::udp(to0, 9000, 32)));
  bool opened = false;
  for (int i = 0; i < 5000 && !opened; i++) {  // up to 10 s on a loaded machine
    opened = shard_stats(1).flows.flows_opened == 1;
    if (!opened) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(opened) << "shard 1 opened no flow for the datagram";
  const DataplaneStats s0 = shard_stats(0);
  EXPECT_EQ(s0.ports[0].handed_off, 1u);
  EXPECT_EQ(s0.drops[size_t(Drop::kUdpNoFlow)], 0u);
  EXPECT_EQ(s0.flows.flows_opened, 0u);

  ctl::AppDetach d;
  d.app_id = app.dp.id;
  EXPECT_TRUE(call(1, CtlRequest::make(d))->app_ok());
  share.add = false;
  share.listener = transport::kNoFlow;
  EXPECT_EQ(call(0, CtlRequest::make(share))->flow_status(), 0);
}

}  // namespace
}  // namespace cleave::dp

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The registry is filled before any dataplane runs, as cleaved does.
  if (const char* p = std::getenv("CLEAVE_TEST_PLUGIN")) {
    cleave::transport::Registry::global().load(p);
    cleave::dp::g_plugin = p;
  }
  if (const char* p = std::getenv("CLEAVE_TEST_LONG_TX_PLUGIN")) {
    cleave::transport::Registry::global().load(p);
    cleave::dp::g_long_tx = p;
  }
  std::string prefix = "--file-prefix=cleave-mgmttest-" + std::to_string(getpid());
  const char* eal_argv[] = {
      "management_tests", "--no-huge",           "--no-shconf", "-m", "256", "--no-pci", "-l", "0",
      "--no-telemetry",   "--log-level=*:error", prefix.c_str()};
  int eal_argc = static_cast<int>(sizeof eal_argv / sizeof eal_argv[0]);
  if (rte_eal_init(eal_argc, const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  cleave::dp::g_pool =
      rte_pktmbuf_pool_create("test_pool", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE, SOCKET_ID_ANY);
  int rc = RUN_ALL_TESTS();
  rte_mempool_free(cleave::dp::g_pool);
  rte_eal_cleanup();
  return rc;
}
