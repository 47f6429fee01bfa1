// config_test.cc - every class of configuration error, at the right line and column.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>

#include "config.h"
#include "control/eal.h"
#include "control/transport_setup.h"
#include "flow_info.h"
#include "registry.h"
#include "transport.h"

namespace cleave::dp {
namespace {

constexpr const char* kPort = R"(ports:
  - name: p0
    device: net_null0
    ipv4: 10.0.0.1/24
)";

ConfigResult parse(const std::string& text) {
  return parse_config(text, "t.yaml");
}

// Expects exactly one error, at line:col, whose message contains `part`.
void expect_error(const std::string& text, int line, int col, const std::string& part) {
  ConfigResult r = parse(text);
  ASSERT_FALSE(r.config.has_value()) << text;
  ASSERT_EQ(r.errors.size(), 1u) << text << "\nfirst: " << r.errors[0].str();
  const ConfigError& e = r.errors[0];
  EXPECT_EQ(e.file, "t.yaml");
  EXPECT_EQ(e.line, line) << e.str();
  EXPECT_EQ(e.col, col) << e.str();
  EXPECT_NE(e.message.find(part), std::string::npos) << e.str();
}

TEST(Config, EmbeddedDefaultIsValid) {
  ConfigResult r = parse_config(kDefaultConfigYaml, kDefaultConfigName);
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  const Config& c = *r.config;
  ASSERT_EQ(c.ports.size(), 1u);
  EXPECT_EQ(c.ports[0].device, "net_cleave0,wire=net_tap0,wire_args=iface=cleave0");
  EXPECT_EQ(c.ports[0].ipv4.str(), "198.18.0.1/24");
  EXPECT_EQ(c.runtime_dir, "/run/cleave");
  ASSERT_EQ(c.dataplane.lcores.size(), 1u);
  EXPECT_NE(c.dataplane.lcores[0].lcore, c.eal.main_lcore);
  EXPECT_FALSE(c.nic.service_lcore.has_value());
  EXPECT_TRUE(c.transports.plugins.empty());
  EXPECT_TRUE(c.transports.bindings.empty());
}

TEST(Config, MinimalFileTakesDefaults) {
  ConfigResult r = parse(kPort);
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  const Config& c = *r.config;
  EXPECT_EQ(c.source, "t.yaml");
  EXPECT_EQ(c.dataplane.burst, 32u);
  EXPECT_EQ(c.arp.retries, 3u);
  EXPECT_EQ(c.ports[0].mtu, 1500);
  EXPECT_FALSE(c.ports[0].mac.has_value());
  EXPECT_EQ(c.eal.hugepages, HugepageMode::kAuto);
}

TEST(Config, FullPortIsRead) {
  ConfigResult r = parse(R"(eal:
  args: [--log-level, "*:debug"]
ports:
  - name: p0
    device: net_af_packet0,iface=va
    mac: 02:00:00:00:00:01
    mtu: 9000
    ipv4: 10.0.0.1/24
    gateway: 10.0.0.254
    routes:
      - {dst: 10.1.0.0/16, via: 10.0.0.2}
    exception_tap: cl-exc0
)");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  const PortConfig& p = r.config->ports[0];
  EXPECT_EQ(p.mac->str(), "02:00:00:00:00:01");
  EXPECT_EQ(p.mtu, 9000);
  EXPECT_EQ(p.gateway->str(), "10.0.0.254");
  ASSERT_EQ(p.routes.size(), 1u);
  EXPECT_EQ(p.routes[0].dst.str(), "10.1.0.0/16");
  EXPECT_EQ(p.routes[0].via.str(), "10.0.0.2");
  EXPECT_EQ(p.exception_tap, "cl-exc0");
  EXPECT_EQ(r.config->eal.args, (std::vector<std::string>{"--log-level", "*:debug"}));
}

TEST(Config, PortFaultsAreRead) {
  ConfigResult r =
      parse(std::string(kPort) +
            "    faults: {seed: 9, rx: {loss: 0.01, reorder: 0.02}, tx: {duplicate: 0.5}}\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  const PortConfig& p = r.config->ports[0];
  const FaultParams& rx = p.faults[size_t(FaultDir::kRx)];
  const FaultParams& tx = p.faults[size_t(FaultDir::kTx)];
  EXPECT_EQ(rx, (FaultParams{0.01, 0.02, 0, 9}));
  EXPECT_EQ(tx, (FaultParams{0, 0, 0.5, 9}));
  EXPECT_TRUE(rx.enabled());
  // None given: off.
  ConfigResult none = parse(kPort);
  ASSERT_TRUE(none.errors.empty());
  EXPECT_FALSE(none.config->ports[0].faults[0].enabled());
  EXPECT_FALSE(none.config->ports[0].faults[1].enabled());
}

TEST(Config, PortFaultsAreChecked) {
  expect_error(std::string(kPort) + "    faults: {rx: {loss: 1.5}}\n", 5, 25,
               "ports[0].faults.rx.loss: expected a probability from 0 to 1, such "
               "as 0.01, got '1.5'");
  expect_error(std::string(kPort) + "    faults: {tx: {reorder: -0.1}}\n", 5, 28,
               "ports[0].faults.tx.reorder: expected a probability");
  expect_error(std::string(kPort) + "    faults: {tx: {duplicate: lots}}\n", 5, 30, "got 'lots'");
  expect_error(std::string(kPort) + "    faults: {rx: {corrupt: 0.1}}\n", 5, 19,
               "unknown key 'ports[0].faults.rx.corrupt' (expected one of: loss, reorder, "
               "duplicate)");
  expect_error(std::string(kPort) + "    faults: {seed: -3}\n", 5, 20, "ports[0].faults.seed");
  expect_error(std::string(kPort) + "    faults: {both: {}}\n", 5, 14,
               "unknown key 'ports[0].faults.both'");
}

TEST(Config, NullMeansDefault) {
  ConfigResult r = parse(std::string("log:\n  level: ~\n") + kPort);
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].str();
  EXPECT_EQ(r.config->log.level, "info");
}

TEST(Config, SyntaxError) {
  expect_error("ports: [\n  {name: p0\n", 3, 1, "YAML syntax error");
}

TEST(Config, EmptyFile) {
  expect_error("", 1, 1, "empty");
}

TEST(Config, UnknownKeyTopLevel) {
  expect_error(std::string(kPort) + "colour: blue\n", 5, 1, "unknown key 'colour'");
}

TEST(Config, UnknownKeyNested) {
  expect_error(std::string("dataplane:\n  lcore: 1\n  bursts: 64\n") + kPort, 3, 3,
               "unknown key 'dataplane.bursts'");
}

TEST(Config, UnknownKeyInPort) {
  expect_error(std::string(kPort) + "    speed: 100\n", 5, 5, "unknown key 'ports[0].speed'");
}

TEST(Config, DuplicateKey) {
  expect_error(std::string("runtime_dir: /run/a\n") + kPort + "runtime_dir: /run/b\n", 6, 1,
               "duplicate key 'runtime_dir' (first given at line 1)");
}

TEST(Config, DuplicateKeyInPort) {
  expect_error(std::string(kPort) + "    ipv4: 10.0.0.2/24\n", 5, 5,
               "duplicate key 'ports[0].ipv4'");
}

TEST(Config, WrongTypeNumber) {
  expect_error(std::string("dataplane:\n  burst: lots\n") + kPort, 2, 10,
               "dataplane.burst: expected an integer from 1 to 512, got 'lots'");
}

TEST(Config, WrongTypeMappingForScalar) {
  expect_error(std::string("dataplane:\n  burst: {a: 1}\n") + kPort, 2, 10, "got a mapping");
}

TEST(Config, WrongTypeSectionNotMapping) {
  expect_error(std::string("eal: 7\n") + kPort, 1, 6, "eal: expected a mapping");
}

TEST(Config, OutOfRange) {
  expect_error(std::string(kPort) + "    mtu: 9001\n", 5, 10,
               "ports[0].mtu: expected an integer from 68 to 9000, got '9001'");
}

TEST(Config, NegativeNumber) {
  expect_error(std::string("arp:\n  retries: -1\n") + kPort, 2, 12, "got '-1'");
}

TEST(Config, BadEnum) {
  expect_error(std::string("log:\n  level: loud\n") + kPort, 2, 10,
               "log.level: expected one of trace, debug, info, warn, error, critical, off");
}

TEST(Config, BadBool) {
  expect_error(std::string("eal:\n  telemetry: yes\n") + kPort, 2, 14, "expected true or false");
}

TEST(Config, MissingRequiredKey) {
  expect_error("ports:\n  - name: p0\n    ipv4: 10.0.0.1/24\n", 2, 5,
               "ports[0]: missing required key 'device'");
}

TEST(Config, MissingPorts) {
  expect_error("runtime_dir: /run/x\n", 1, 1, "'ports'");
}

TEST(Config, EmptyPorts) {
  expect_error("ports: []\n", 1, 8, "non-empty list");
}

TEST(Config, BadAddress) {
  expect_error("ports:\n  - name: p0\n    device: d\n    ipv4: 10.0.0.256/24\n", 4, 11,
               "expected address/prefix-length");
}

TEST(Config, NetworkAddressAsInterface) {
  expect_error("ports:\n  - name: p0\n    device: d\n    ipv4: 10.0.0.0/24\n", 4, 11,
               "network or broadcast");
}

TEST(Config, BadMac) {
  expect_error(std::string(kPort) + "    mac: 02:00:00:00:00\n", 5, 10, "ports[0].mac");
}

TEST(Config, MulticastMac) {
  expect_error(std::string(kPort) + "    mac: 01:00:5e:00:00:01\n", 5, 10, "not a unicast");
}

TEST(Config, GatewayOffLink) {
  expect_error(std::string(kPort) + "    gateway: 10.0.1.1\n", 5, 14, "not on-link");
}

TEST(Config, RouteWithHostBits) {
  expect_error(std::string(kPort) + "    routes:\n      - {dst: 10.1.2.3/16, via: 10.0.0.2}\n", 6,
               15, "did you mean 10.1.0.0/16?");
}

TEST(Config, RouteViaOffLink) {
  expect_error(std::string(kPort) + "    routes:\n      - {dst: 10.1.0.0/16, via: 10.2.0.2}\n", 6,
               33, "not on-link for port 'p0'");
}

TEST(Config, SameLcoreTwice) {
  expect_error(std::string("eal:\n  main_lcore: 1\n") + kPort, 2, 15,
               "lcore 1 is also eal.main_lcore");
  expect_error(std::string("dataplane:\n  lcores: [1, 2, 1]\n") + kPort, 2, 11,
               "dataplane lcore 2: lcore 1 is also dataplane lcore 0");
  expect_error(std::string("dataplane:\n  lcores: [1, 2]\nnic:\n  service_lcore: 2\n") + kPort, 2,
               11, "nic.service_lcore: lcore 2 is also dataplane lcore 1");
}

TEST(Config, ShardsAndTheNicServiceLcore) {
  ConfigResult r = parse(std::string("dataplane:\n  lcores: [1, \"2@1\"]\n"
                                     "nic:\n  service_lcore: 3@0\n") +
                         kPort);
  ASSERT_TRUE(r.config.has_value()) << r.errors[0].str();
  const Config& c = *r.config;
  ASSERT_EQ(c.dataplane.lcores.size(), 2u);
  EXPECT_EQ(c.dataplane.lcores[0], (LcoreSpec{1, std::nullopt}));
  EXPECT_EQ(c.dataplane.lcores[1], (LcoreSpec{2, 1}));
  ASSERT_TRUE(c.nic.service_lcore.has_value());
  EXPECT_EQ(c.nic.service_lcore->str(), "3@0");
  EalPlan plan = plan_eal(c, 0);
  auto at = std::find(plan.args.begin(), plan.args.end(), "--lcores");
  ASSERT_NE(at, plan.args.end());
  EXPECT_EQ(*(at + 1), "0,1@1,2@1,3@0");

  expect_error(std::string("dataplane:\n  lcore: 1\n  lcores: [2]\n") + kPort, 3, 11, "not both");
  expect_error(std::string("dataplane:\n  lcores: []\n") + kPort, 2, 11, "a list of 1 to 16");
  expect_error(std::string("dataplane:\n  lcores: [1, 2@]\n") + kPort, 2, 15,
               "expected an lcore number (0-1023), or LCORE@CPU");
  expect_error(std::string("nic:\n  service_lcore: x\n") + kPort, 2, 18, "got 'x'");
}

TEST(Config, DuplicatePortName) {
  expect_error(std::string(kPort) + "  - name: p0\n    device: net_null1\n    ipv4: 10.0.1.1/24\n",
               5, 11, "'p0' is already used by ports[0]");
}

TEST(Config, OverlappingPrefixes) {
  expect_error(std::string(kPort) + "  - name: p1\n    device: net_null1\n    ipv4: 10.0.0.9/16\n",
               7, 11, "overlaps port 'p0'");
}

TEST(Config, TooFewMbufs) {
  expect_error(std::string("dataplane:\n  mbufs: 2000\n") + kPort, 2, 10,
               "dataplane.mbufs: 2000 packet buffers cannot fill");
}

TEST(Config, RelativeRuntimeDir) {
  expect_error(std::string("runtime_dir: run/cleave\n") + kPort, 1, 14, "absolute path");
}

TEST(Config, AppsDefaultToRootOnly) {
  ConfigResult r = parse(kPort);
  ASSERT_TRUE(r.config);
  const auto& a = r.config->apps;
  ASSERT_EQ(a.allow.size(), 1u);
  EXPECT_EQ(a.allow[0].uid, 0u);
  EXPECT_FALSE(a.allow[0].gid);
  EXPECT_EQ(a.allow[0].quota.region_mb, 16u);
}

TEST(Config, AppRulesTakeTheDefaultQuotaAndOverrideIt) {
  ConfigResult r = parse(std::string(R"(apps:
  quota: {pipes: 8, error_budget: 10}
  allow:
    - uid: 1000
    - gid: 100
      quota: {memory_mb: 1024, region_mb: 64}
)") + kPort);
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  const auto& allow = r.config->apps.allow;
  ASSERT_EQ(allow.size(), 2u);
  EXPECT_EQ(allow[0].uid, 1000u);
  EXPECT_EQ(allow[0].quota.pipes, 8u);
  EXPECT_EQ(allow[1].gid, 100u);
  EXPECT_EQ(allow[1].quota.memory_mb, 1024u);
  EXPECT_EQ(allow[1].quota.region_mb, 64u);
  EXPECT_EQ(allow[1].quota.error_budget, 10u);
}

TEST(Config, BadAppRulesAreReported) {
  expect_error(std::string("apps:\n  allow:\n    - {uid: 1, gid: 2}\n") + kPort, 3, 7,
               "exactly one of uid or gid");
  expect_error(std::string("apps:\n  quota: {pipe_entries: 1000}\n") + kPort, 2, 25,
               "power of two");
  expect_error(std::string("apps:\n  quota: {memory_mb: 8, region_mb: 16}\n") + kPort, 2, 36,
               "does not fit");
  expect_error(std::string("apps:\n  allow: {uid: 0}\n") + kPort, 2, 10, "a list");
}

TEST(Config, SocketLimitsHaveDefaultsAndAreChecked) {
  ConfigResult d = parse(kPort);
  ASSERT_TRUE(d.config);
  EXPECT_EQ(d.config->management.max_clients, 64u);
  EXPECT_EQ(d.config->management.max_clients_per_uid, 16u);
  EXPECT_EQ(d.config->management.requests_per_turn, 16u);
  EXPECT_EQ(d.config->apps.max_pending, 16u);
  EXPECT_EQ(d.config->apps.max_pending_per_uid, 4u);
  ConfigResult r = parse(std::string("management: {max_clients: 8, max_clients_per_uid: 2, "
                                     "requests_per_turn: 1}\napps: {max_pending: 3, "
                                     "max_pending_per_uid: 3}\n") +
                         kPort);
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  EXPECT_EQ(r.config->management.max_clients, 8u);
  EXPECT_EQ(r.config->management.max_clients_per_uid, 2u);
  EXPECT_EQ(r.config->management.requests_per_turn, 1u);
  EXPECT_EQ(r.config->apps.max_pending, 3u);
  EXPECT_EQ(r.config->apps.max_pending_per_uid, 3u);
  expect_error(std::string("management:\n  max_clients: 4\n  max_clients_per_uid: 5\n") + kPort, 3,
               24, "management.max_clients_per_uid: 5 is more than max_clients (4)");
  expect_error(std::string("apps:\n  max_pending_per_uid: 40\n") + kPort, 2, 24,
               "apps.max_pending_per_uid: 40 is more than max_pending (16)");
  expect_error(std::string("management:\n  requests_per_turn: 0\n") + kPort, 2, 22,
               "requests_per_turn");
  expect_error(std::string("management:\n  max_client: 4\n") + kPort, 2, 3, "max_client");
}

TEST(Config, GenericNicTablesAreReadAndChecked) {
  ConfigResult r =
      parse(std::string("nic: {max_flows: 100, ms_committed: 64, ms_store: 0}\n") + kPort);
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  EXPECT_EQ(r.config->nic.max_flows, 100u);
  EXPECT_EQ(r.config->nic.max_mrs, 4096u);
  EXPECT_EQ(r.config->nic.ms_committed, 64u);
  EXPECT_EQ(r.config->nic.ms_store, 0u);
  expect_error(std::string("nic:\n  ms_store: 1000\n") + kPort, 2, 13, "multiple of 16");
  expect_error(std::string("nic:\n  ms_committed: 8\n") + kPort, 2, 17, "ms_committed");
  expect_error(std::string("nic:\n  max_flow: 8\n") + kPort, 2, 3, "max_flow");
}

TEST(Config, TcpTimeWaitBoundIsReadAndChecked) {
  ConfigResult r = parse(kPort);
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->tcp.max_time_wait, 4096u);
  r = parse(std::string("tcp: {max_time_wait: 0}\n") + kPort);
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  EXPECT_EQ(r.config->tcp.max_time_wait, 0u);
  expect_error(std::string("tcp:\n  max_time_wait: 99999999\n") + kPort, 2, 18, "max_time_wait");
  expect_error(std::string("tcp:\n  max_tw_buckets: 8\n") + kPort, 2, 3, "max_tw_buckets");
}

TEST(Config, RoceDefaultsAreReadAndChecked) {
  ConfigResult r = parse(kPort);
  ASSERT_TRUE(r.config);
  EXPECT_EQ(r.config->rocev2.cnp_dscp, 48u);  // mlx5's
  r = parse(std::string("rocev2: {cnp_dscp: 26}\n") + kPort);
  ASSERT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  EXPECT_EQ(r.config->rocev2.cnp_dscp, 26u);
  expect_error(std::string("rocev2:\n  cnp_dscp: 64\n") + kPort, 2, 13, "rocev2.cnp_dscp");
  expect_error(std::string("rocev2:\n  cnp_tos: 1\n") + kPort, 2, 3, "cnp_tos");
}

TEST(Config, TransportsDefaultToNone) {
  ConfigResult r = parse(kPort);
  ASSERT_TRUE(r.config);
  EXPECT_TRUE(r.config->transports.plugins.empty());
  EXPECT_TRUE(r.config->transports.bindings.empty());
}

TEST(Config, TransportsSectionIsRead) {
  ConfigResult r = parse(std::string(R"(transports:
  plugins:
    - /usr/lib/cleave/solar.so
    - libdatagram.so
  bindings:
    - port: 5001
      transport: tcp
      params: {cc: cubic, mss: 1400, sack: off}
    - {port: 80}
)") + kPort);
  ASSERT_TRUE(r.config) << r.errors[0].str();
  const auto& t = r.config->transports;
  ASSERT_EQ(t.plugins.size(), 2u);
  EXPECT_EQ(t.plugins[0].path, "/usr/lib/cleave/solar.so");
  EXPECT_EQ(t.plugins[1].path, "libdatagram.so");
  EXPECT_EQ(t.plugins[1].pos.line, 4);
  EXPECT_EQ(t.plugins[1].pos.col, 7);
  ASSERT_EQ(t.bindings.size(), 2u);
  const TransportBinding& b = t.bindings[0];
  EXPECT_EQ(b.port, 5001);
  EXPECT_EQ(b.transport, "tcp");
  // In the file's order, values as written: the transport parses them.
  using Kv = std::pair<std::string, std::string>;
  EXPECT_EQ(b.params, (std::vector<Kv>{{"cc", "cubic"}, {"mss", "1400"}, {"sack", "off"}}));
  EXPECT_EQ(b.pos.line, 6);
  EXPECT_EQ(b.transport_pos.line, 7);
  EXPECT_EQ(b.transport_pos.col, 18);
  EXPECT_EQ(b.params_pos.line, 8);
  EXPECT_EQ(b.params_pos.col, 15);
  EXPECT_EQ(t.bindings[1].port, 80);
  EXPECT_EQ(t.bindings[1].transport, "tcp");  // the default
  EXPECT_TRUE(t.bindings[1].params.empty());
  EXPECT_EQ(t.bindings[1].params_pos.line, 9);  // no params: the binding's position
}

// The example config/cleaved.yaml gives under transports.bindings, uncommented, is valid.
TEST(Config, TheDefaultFilesBindingExampleIsValid) {
  std::string t(kDefaultConfigYaml);
  for (auto [from, to] : {std::pair<std::string, std::string>{"  bindings: []", "  bindings:"},
                          {"\n  #   - port:", "\n    - port:"},
                          {"\n  #     transport:", "\n      transport:"},
                          {"\n  #     params:", "\n      params:"}}) {
    size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
  }
  ConfigResult r = parse_config(t, "default");
  ASSERT_TRUE(r.config) << r.errors[0].str();
  ASSERT_EQ(r.config->transports.bindings.size(), 1u);
  EXPECT_EQ(r.config->transports.bindings[0].port, 5001);
  EXPECT_EQ(r.config->transports.bindings[0].params.size(), 2u);
  auto e = load_transports(*r.config, transport::Registry::global());
  EXPECT_TRUE(e.empty()) << e[0].str();
}

TEST(Config, BadTransportsAreReported) {
  auto t = [](const std::string& section) { return "transports:\n" + section + kPort; };
  expect_error("transports: 5\n" + std::string(kPort), 1, 13, "transports: expected a mapping");
  expect_error(t("  plugin: [a.so]\n"), 2, 3, "unknown key 'transports.plugin'");
  expect_error(t("  plugins: a.so\n"), 2, 12,
               "transports.plugins: expected a list of shared object paths");
  expect_error(t("  plugins: ['']\n"), 2, 13,
               "transports.plugins[0]: expected a path to a shared object, got nothing");
  expect_error(t("  plugins: [~]\n"), 2, 13, "got nothing");
  expect_error(t("  plugins: [{a: 1}]\n"), 2, 13,
               "transports.plugins[0]: expected a path, got a mapping");
  expect_error(t("  plugins: [a.so, b.so, a.so]\n"), 2, 25,
               "transports.plugins[2]: 'a.so' is already listed at line 2");
  expect_error(t("  bindings: {port: 1}\n"), 2, 13,
               "transports.bindings: expected a list of {port or tuple, uid, transport, params}");
  expect_error(t("  bindings: [5001]\n"), 2, 14, "transports.bindings[0]: expected a mapping");
  expect_error(t("  bindings: [{transport: tcp}]\n"), 2, 14,
               "transports.bindings[0]: give one of port (a port binding) and tuple (a tuple "
               "binding)");
  expect_error(t("  bindings: [{port: 0}]\n"), 2, 21,
               "transports.bindings[0].port: expected an integer from 1 to 65535, got '0'");
  expect_error(t("  bindings: [{port: 65536}]\n"), 2, 21, "got '65536'");
  expect_error(t("  bindings: [{port: http}]\n"), 2, 21, "got 'http'");
  expect_error(t("  bindings: [{port: 1, transport: ''}]\n"), 2, 35,
               "transports.bindings[0].transport: must not be empty");
  expect_error(t("  bindings: [{port: 1, prams: {}}]\n"), 2, 24,
               "unknown key 'transports.bindings[0].prams'");
  expect_error(t("  bindings: [{port: 1, params: [cc, cubic]}]\n"), 2, 32,
               "transports.bindings[0].params: expected a mapping of parameter names to values");
  expect_error(
      t("  bindings: [{port: 1, params: {cc: [a]}}]\n"), 2, 37,
      "transports.bindings[0].params.cc: expected a value such as cubic or 10, got a list");
  expect_error(t("  bindings: [{port: 1, params: {cc: ~}}]\n"), 2, 37, "got nothing");
  expect_error(t("  bindings: [{port: 1, params: {cc: a, cc: b}}]\n"), 2, 40,
               "duplicate key 'transports.bindings[0].params.cc'");
  expect_error(t("  bindings: [{port: 1}, {port: 2}, {port: 1}]\n"), 2, 43,
               "transports.bindings[2].port: 1 is already bound by transports.bindings[0]");
}

TEST(Config, TupleBindingsAndUidsAreRead) {
  ConfigResult r = parse(std::string(R"(transports:
  bindings:
    - port: 5001
      uid: 1000
    - tuple: {local: "10.0.0.1:5001", remote: "*:*"}
      uid: 0
      params: {cc: dctcp}
    - tuple: {local: 0.0.0.0:*, remote: 10.0.0.2:443}
      transport: tcp
)") + kPort);
  ASSERT_TRUE(r.config) << r.errors[0].str();
  const auto& t = r.config->transports;
  ASSERT_EQ(t.bindings.size(), 3u);
  EXPECT_FALSE(t.bindings[0].tuple);
  EXPECT_EQ(t.bindings[0].port, 5001);
  EXPECT_EQ(t.bindings[0].uid, std::optional<uint32_t>(1000));
  const TransportBinding& a = t.bindings[1];
  EXPECT_TRUE(a.tuple);
  EXPECT_EQ(a.port, 0);
  EXPECT_EQ(a.local, (WildEndpoint{0x0a000001, 5001}));
  EXPECT_EQ(a.remote, (WildEndpoint{0, 0}));
  EXPECT_EQ(a.uid, std::optional<uint32_t>(0));
  EXPECT_EQ(a.transport, "tcp");  // the default
  using Kv = std::pair<std::string, std::string>;
  EXPECT_EQ(a.params, (std::vector<Kv>{{"cc", "dctcp"}}));
  const TransportBinding& b = t.bindings[2];
  EXPECT_EQ(b.local, (WildEndpoint{0, 0}));
  EXPECT_EQ(b.remote, (WildEndpoint{0x0a000002, 443}));
  EXPECT_FALSE(b.uid);
  EXPECT_EQ(b.pos.line, 8);
}

TEST(Config, BadTupleBindingsAreReported) {
  auto t = [](const std::string& section) { return "transports:\n" + section + kPort; };
  expect_error(t("  bindings: [{port: 1, tuple: {local: '*:*', remote: '*:*'}}]\n"), 2, 14,
               "transports.bindings[0]: give one of port (a port binding) and tuple");
  expect_error(t("  bindings: [{tuple: '*:* *:*'}]\n"), 2, 22,
               "transports.bindings[0].tuple: expected a mapping");
  expect_error(t("  bindings: [{tuple: {local: '*:*'}}]\n"), 2, 22,
               "transports.bindings[0].tuple.remote: missing");
  expect_error(t("  bindings: [{tuple: {local: '*:*', remote: '*:*', proto: 6}}]\n"), 2, 52,
               "unknown key 'transports.bindings[0].tuple.proto' (expected one of: local, remote)");
  expect_error(t("  bindings: [{tuple: {local: 10.0.0.1, remote: '*:*'}}]\n"), 2, 30,
               "transports.bindings[0].tuple.local: expected \"ip:port\" (an IPv4 address or *, a "
               "port from 1 to 65535 or *; quote a value that starts with *), got '10.0.0.1'");
  expect_error(t("  bindings: [{tuple: {local: '*:*', remote: '10.0.0.2:0'}}]\n"), 2, 45,
               "transports.bindings[0].tuple.remote: expected \"ip:port\"");
  expect_error(t("  bindings: [{tuple: {local: '*:*', remote: [a]}}]\n"), 2, 45,
               "transports.bindings[0].tuple.remote: expected \"ip:port\", got a list");
  expect_error(t("  bindings: [{port: 1, uid: -1}]\n"), 2, 29,
               "transports.bindings[0].uid: expected an integer from 0 to 4294967294, got '-1'");
  expect_error(t("  bindings: [{port: 1, uid: root}]\n"), 2, 29, "got 'root'");
  expect_error(t("  bindings:\n    - tuple: {local: '*:1', remote: '*:*'}\n"
                 "    - tuple: {local: '*:1', remote: '*:*'}\n"),
               4, 14,
               "transports.bindings[1].tuple: *:1 *:* is already bound by transports.bindings[0]");
  std::string many = "  bindings:\n";
  for (size_t i = 0; i <= kMaxTupleBindings; i++)
    many += "    - tuple: {local: '*:*', remote: '*:" + std::to_string(i + 1) + "'}\n";
  expect_error(t(many), int(kMaxTupleBindings) + 3, 14,
               "transports.bindings[" + std::to_string(kMaxTupleBindings) + "].tuple: more than " +
                   std::to_string(kMaxTupleBindings) + " tuple bindings");
}

// load_transports: plugins are loaded, bindings checked by the transport they name, each error
// at its entry. The test plugins come from tests/meson.build (CLEAVE_TEST_PLUGIN...).
std::vector<ConfigError> load(const std::string& section, transport::Registry& reg) {
  ConfigResult r = parse("transports:\n" + section + kPort);
  EXPECT_TRUE(r.config) << (r.errors.empty() ? "" : r.errors[0].str());
  if (!r.config) return {};
  return load_transports(*r.config, reg);
}

std::string env_path(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr) ADD_FAILURE() << var << " is not set: run through `meson test -C build unit`";
  return v != nullptr ? v : "/nonexistent";
}

TEST(Config, BindingsAreCheckedByTheirTransport) {
  transport::Registry& builtins = transport::Registry::global();  // tcp; nothing is loaded here
  EXPECT_TRUE(load("  bindings: [{port: 1, params: {cc: cubic, mss: 1400}}]\n", builtins).empty());
  auto e = load("  bindings:\n    - {port: 1, params: {cc: nosuch}}\n", builtins);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].str(),
            "t.yaml:3:25: transports.bindings[0].params: tcp: unknown congestion control 'nosuch' "
            "(have newreno, cubic, dctcp)");
  for (const char* qp : {"rocev2", "solar"}) {
    e = load("  bindings:\n    - {port: 1, transport: " + std::string(qp) + "}\n", builtins);
    ASSERT_EQ(e.size(), 1u) << qp;
    EXPECT_EQ(e[0].str(), "t.yaml:3:28: transports.bindings[0].transport: transport '" +
                              std::string(qp) +
                              "' makes queue pairs, which apps open by their QP calls: it takes "
                              "no bindings");
  }
  e = load("  bindings:\n    - {port: 1, transport: nosuch}\n", builtins);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].str(),
            "t.yaml:3:28: transports.bindings[0].transport: no transport named 'nosuch' (have "
            "tcp, rocev2, solar)");
  e = load("  bindings:\n    - port: 1\n      params: {mss: 9}\n", builtins);
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].line, 4);
  EXPECT_NE(e[0].message.find("tcp: bad value '9' for mss"), std::string::npos) << e[0].str();
}

TEST(Config, PluginsAreLoadedAndTheirFailuresPointAtTheEntry) {
  const std::string good = env_path("CLEAVE_TEST_PLUGIN");
  const std::string bad = env_path("CLEAVE_TEST_BAD_PLUGIN_WRONG_ABI");
  {
    transport::Registry reg;  // not the global one: nothing leaks into other tests
    auto e = load("  plugins: [" + good + "]\n  bindings: [{port: 7, transport: datagram}]\n", reg);
    EXPECT_TRUE(e.empty()) << e[0].str();
    ASSERT_EQ(reg.entries().size(), 1u);
    EXPECT_EQ(reg.entries()[0].name, "datagram");
    EXPECT_EQ(reg.entries()[0].origin, good);
  }
  {
    transport::Registry reg;
    auto e = load("  plugins:\n    - " + good +
                      "\n  bindings:\n    - port: 7\n"
                      "      transport: datagram\n      params: {x: 1}\n",
                  reg);
    ASSERT_EQ(e.size(), 1u);
    EXPECT_EQ(e[0].line, 7);
    EXPECT_EQ(e[0].col, 15);
    EXPECT_NE(e[0].message.find("transports.bindings[0].params: datagram: no parameters"),
              std::string::npos)
        << e[0].str();
  }
  {
    transport::Registry reg;
    auto e = load("  plugins:\n    - /nonexistent/solar.so\n    - " + bad + "\n", reg);
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].str(),
              "t.yaml:3:7: transports.plugins[0]: /nonexistent/solar.so: cannot load: cannot open "
              "shared object file: No such file or directory");
    EXPECT_EQ(e[1].line, 4);
    EXPECT_EQ(e[1].col, 7);
    EXPECT_NE(e[1].message.find("transports.plugins[1]: " + bad +
                                ": built for transport ABI "
                                "version 999"),
              std::string::npos)
        << e[1].str();
    EXPECT_TRUE(reg.entries().empty());
  }
  {
    // A binding to a plugin that failed to load is reported too: both are true.
    transport::Registry reg;
    auto e =
        load("  plugins: [/nonexistent/d.so]\n  bindings: [{port: 7, transport: datagram}]\n", reg);
    ASSERT_EQ(e.size(), 2u);
    EXPECT_EQ(e[0].line, 2);
    EXPECT_EQ(e[1].line, 3);
    EXPECT_NE(e[1].message.find("no transport named 'datagram' (have none)"), std::string::npos);
  }
}

TEST(Config, EveryErrorIsReportedInOnePass) {
  ConfigResult r = parse(R"(dataplane:
  burst: 0
  colour: red
ports:
  - name: p0
    device: d
    ipv4: 10.0.0.1/24
    mtu: 10
)");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].str(),
            "t.yaml:2:10: dataplane.burst: expected an integer from 1 to 512, got '0'");
  EXPECT_EQ(r.errors[1].line, 3);
  EXPECT_EQ(r.errors[2].line, 8);
}

TEST(Config, UnreadableFile) {
  ConfigResult r = load_config_file("/nonexistent/cleaved.yaml");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line, 0);
  EXPECT_EQ(r.errors[0].str(),
            "/nonexistent/cleaved.yaml: cannot read file: No such file or directory");
}

// Seeded mutations of the default file: the loader never throws, and every error has a position
// inside the text it was given.
TEST(Config, MutatedFilesNeverThrowAndErrorsPointIntoTheFile) {
  std::mt19937 rng(2026);
  const std::string base(kDefaultConfigYaml);
  const std::string alphabet = "abz019:-[]{},#&*!|>'\" \n\t";
  int lines = 1 + static_cast<int>(std::count(base.begin(), base.end(), '\n'));
  for (int i = 0; i < 3000; i++) {
    std::string t = base;
    for (int k = std::uniform_int_distribution<int>(1, 6)(rng); k > 0; k--) {
      size_t at = std::uniform_int_distribution<size_t>(0, t.size() - 1)(rng);
      switch (rng() % 3) {
        case 0:
          t[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          t.erase(at, rng() % 8);
          break;
        default:
          t.insert(at, 1, alphabet[rng() % alphabet.size()]);
          break;
      }
    }
    ConfigResult r;
    ASSERT_NO_THROW(r = parse_config(t, "m.yaml")) << t;
    ASSERT_NE(r.config.has_value(), !r.errors.empty());
    for (const ConfigError& e : r.errors) {
      EXPECT_GE(e.line, 1);
      EXPECT_LE(e.line, lines + 8) << e.str();
      EXPECT_GE(e.col, 1);
    }
  }
}

}  // namespace
}  // namespace cleave::dp
