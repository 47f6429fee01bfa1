// registry_test.cc - the transport registry: names, built-ins, loading plugins and refusing
// broken ones, and the example datagram plugin driven through a test Context.
//
// The plugins are built by tests/meson.build and named by the environment (CLEAVE_TEST_PLUGIN,
// CLEAVE_TEST_BAD_PLUGIN_*): run through `meson test -C build registry`.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "registry.h"
#include "solar/solar.h"
#include "transport.h"
#include "transport_abi.h"

namespace cleave::transport {
namespace {

// ---- helpers ------------------------------------------------------------------------------------

// The what() of the E that f throws; a test failure when it throws nothing.
template <typename E, typename F>
std::string error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "no exception thrown";
  return "";
}

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

std::string env_path(const char* var) {
  const char* v = std::getenv(var);
  if (v == nullptr) {
    ADD_FAILURE() << var << " is not set: run this test through `meson test -C build registry`";
    return "/nonexistent";
  }
  return v;
}

class Fake : public Transport {
 public:
  std::string_view name() const override { return "fake"; }
  std::string check_params(Params /*params*/) const override { return ""; }
  int listen(ListenerId /*l*/, const Endpoint& /*e*/, Params /*p*/) override { return 0; }
  void unlisten(ListenerId /*l*/) override {}
  int connect(FlowId /*f*/, const FlowTuple& /*t*/, Params /*p*/, Context& /*c*/) override {
    return 0;
  }
  void rx_burst(std::span<const RxHeader> /*h*/, Context& /*c*/) override {}
  void app_burst(std::span<const AppRequest> /*r*/, Context& /*c*/) override {}
  void tick(Context& /*c*/) override {}
  bool flow_info(FlowId /*f*/, InfoSink& /*o*/) const override { return false; }
  size_t flow_count() const override { return 0; }
};
std::unique_ptr<Transport> make_fake() {
  return std::make_unique<Fake>();
}

// A fake whose claim is g_claim's when it is made: Registry::add() reads it at once.
Claim g_claim;
class Claiming final : public Fake {
 public:
  std::string_view name() const override { return "claiming"; }
  Claim claim() const override { return claim_; }

 private:
  Claim claim_ = g_claim;
};
bool parse_nothing(const RxL4& /*in*/, RxParsed* /*out*/) {
  return false;
}
// Adds a transport claiming `proto` (and for UDP `ports`); what add() threw, "" when it took it.
std::string add_claiming(Registry& reg, std::string_view name, uint8_t proto,
                         std::span<const uint16_t> ports = {},
                         bool (*parse)(const RxL4&, RxParsed*) = parse_nothing) {
  g_claim = Claim{.proto = proto, .udp_ports = ports, .parse = parse};
  try {
    reg.add(name, "", [] { return std::unique_ptr<Transport>(std::make_unique<Claiming>()); });
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// The rings a TestContext lends its base: a base of their own so they exist before Context.
// Two entries each, so that a burst of a few fills them and the drain hooks run mid-burst.
struct Rings {
  std::array<TxDesc, 2> tx_ring{};
  std::array<Event, 2> ev_ring{};
};

// A host for one transport: records what it sends and tells, and owns 256 bytes of app memory
// (memory region 0) that copy_in writes with a bounds check, as the dataplane does.
class TestContext final : private Rings, public Context {
 public:
  TestContext() : Context(tx_ring, ev_ring) {}

  std::vector<TxDesc> sent;
  std::vector<Event> events;
  std::vector<uint8_t> mem = std::vector<uint8_t>(256);
  std::vector<FlowTuple> opened;  // flow_open() calls; ids from 100 on
  std::vector<FlowId> closed;
  int nic_calls = 0;  // placement commands: a copy-path transport issues none

  int ms_post(FlowId /*f*/, uint16_t /*mr*/, uint64_t /*off*/, uint32_t /*len*/,
              uint32_t /*msg*/) override {
    return nic_calls++, -ENOTSUP;
  }
  int cursor_update(FlowId /*f*/, uint32_t /*cursor*/) override { return nic_calls++, -ENOTSUP; }
  int ms_retire(FlowId /*f*/, uint32_t /*count*/) override { return nic_calls++, -ENOTSUP; }
  int ms_retire_msg(FlowId /*f*/, uint32_t /*msg*/) override { return nic_calls++, -ENOTSUP; }
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) override {
    if (mr != 0 || offset > mem.size() || len > mem.size() - offset) return false;
    std::copy_n(src, len, mem.begin() + static_cast<std::ptrdiff_t>(offset));
    return true;
  }
  FlowId flow_open(ListenerId /*l*/, const FlowTuple& tuple, uint32_t /*seq*/,
                   bool /*messages*/) override {
    opened.push_back(tuple);
    return FlowId(100 + opened.size() - 1);
  }
  void flow_synced(FlowId /*f*/, uint32_t /*seq*/, bool /*messages*/) override {}
  void flow_closed(FlowId flow) override { closed.push_back(flow); }

 private:
  void drain_tx(std::span<TxDesc> d) override { sent.insert(sent.end(), d.begin(), d.end()); }
  void drain_events(std::span<const Event> e) override {
    events.insert(events.end(), e.begin(), e.end());
  }
};

class Info final : public InfoSink {
 public:
  std::vector<std::pair<std::string, uint64_t>> numbers;
  void text(std::string_view /*key*/, std::string_view /*value*/) override {}
  void number(std::string_view key, uint64_t value) override {
    numbers.emplace_back(std::string(key), value);
  }
  uint64_t get(std::string_view key) const {
    for (const auto& [k, v] : numbers) {
      if (k == key) return v;
    }
    ADD_FAILURE() << "no " << key << " in flow_info";
    return 0;
  }
};

// An IPv4 + UDP segment from 10.0.0.2:6000 to 10.0.0.1:5000 with `payload` on the copy path.
struct Segment {
  std::array<uint8_t, 20> ip{0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1};
  std::array<uint8_t, 8> udp{0x17, 0x70, 0x13, 0x88, 0, 0, 0, 0};
  std::string payload;

  explicit Segment(std::string p) : payload(std::move(p)) {
    udp[4] = uint8_t((8 + payload.size()) >> 8);
    udp[5] = uint8_t(8 + payload.size());
  }
  RxHeader header(FlowId flow) const {
    RxHeader h;
    h.l3 = ip.data();
    h.l4 = udp.data();
    h.l3_len = ip.size();
    h.l4_len = udp.size();
    h.placed = Placed::kDeferred;
    h.l4_csum = Csum::kGood;
    h.flow = flow;
    h.payload_len = uint32_t(payload.size());
    h.payload = reinterpret_cast<const uint8_t*>(payload.data());
    return h;
  }
};

const FlowTuple kTuple{
    .local = {IpAddr::v4(0x0a000001), 5000}, .remote = {IpAddr::v4(0x0a000002), 6000}, .proto = 17};

// ---- the registry -------------------------------------------------------------------------------

TEST(Registry, AddsCreatesAndListsInOrder) {
  Registry reg;
  reg.add("zeta", "last letter", make_fake);
  reg.add("alpha", "first letter", make_fake);
  auto es = reg.entries();
  ASSERT_EQ(es.size(), 2u);
  EXPECT_EQ(es[0].name, "zeta");
  EXPECT_EQ(es[0].description, "last letter");
  EXPECT_EQ(es[0].origin, "built-in");
  EXPECT_EQ(es[0].factory, make_fake);
  EXPECT_EQ(es[1].name, "alpha");

  auto t = reg.create("alpha");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name(), "fake");
  EXPECT_EQ(reg.create("beta"), nullptr);
  EXPECT_EQ(reg.create(""), nullptr);
}

TEST(Registry, ChecksNames) {
  Registry reg;
  reg.add(std::string(31, 'a'), "", make_fake);
  reg.add("tcp_v2-9", "", make_fake);
  auto add = [&](std::string_view name) {
    return error_of<std::invalid_argument>([&] { reg.add(name, "", make_fake); });
  };
  EXPECT_EQ(add(""), "a transport name may not be empty");
  EXPECT_HAS(add(std::string(32, 'b')), "is longer than 31 characters");
  for (const char* bad : {"Tcp", "t p", "tcp.2", "tcp/x", "caf\xc3\xa9"}) {
    const std::string msg = add(bad);
    EXPECT_HAS(msg, "\"" + std::string(bad) + "\"");
    EXPECT_HAS(msg, "may only hold the characters a-z, 0-9, '_' and '-'");
  }
  EXPECT_EQ(add("tcp_v2-9"), "transport name \"tcp_v2-9\" is taken (by built-in)");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { reg.add("nofactory", "", nullptr); }),
            "transport \"nofactory\" has no factory");
  EXPECT_EQ(reg.entries().size(), 2u);  // nothing refused was added
}

// Entries sit in a fixed table: one that was listed stays where it was while more are added
// (another thread may be reading it), and the table refuses the one past kMaxTransports.
TEST(Registry, EntriesStayPutAndTheTableIsBounded) {
  Registry reg;
  reg.add("t0", "first", make_fake);
  const Registry::Entry* first = &reg.entries()[0];
  for (size_t i = 1; i < Registry::kMaxTransports; i++)
    reg.add("t" + std::to_string(i), "", make_fake);
  EXPECT_EQ(&reg.entries()[0], first);
  EXPECT_EQ(first->name, "t0");
  EXPECT_EQ(reg.entries().size(), Registry::kMaxTransports);
  EXPECT_EQ(error_of<std::invalid_argument>([&] { reg.add("one-more", "", make_fake); }),
            "the registry is full (" + std::to_string(Registry::kMaxTransports) + " transports)");
  EXPECT_EQ(reg.entries().size(), Registry::kMaxTransports);
  EXPECT_NE(reg.create("t63"), nullptr);
}

// A reader on another thread (the dataplane lcore) looks transports up while this thread adds:
// every name it has seen listed it can create, and it sees the last one eventually.
TEST(Registry, LookupsWhileAnotherThreadAdds) {
  Registry reg;
  std::atomic<bool> failed{false};
  std::thread reader([&] {
    for (;;) {
      auto es = reg.entries();
      for (const Registry::Entry& e : es) {
        if (!reg.create(e.name)) failed = true;
      }
      if (es.size() == 32) return;
    }
  });
  for (int i = 0; i < 32; i++)
    reg.add("r" + std::to_string(i), "", make_fake);
  reader.join();
  EXPECT_FALSE(failed);
}

TEST(Registry, GlobalIsOneRegistryWithTheBuiltIns) {
  EXPECT_EQ(&Registry::global(), &Registry::global());
  auto t = Registry::global().create("tcp");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name(), "tcp");
  ASSERT_FALSE(Registry::global().entries().empty());
  EXPECT_EQ(Registry::global().entries()[0].origin, "built-in");
}

// ---- claims -------------------------------------------------------------------------------------

// Two transports never claim the same protocol or UDP port: the second is refused, named with
// what it asked for and who holds it, and nothing of it is added.
TEST(RegistryClaims, RefusesAClaimThatCollides) {
  Registry reg;
  static constexpr std::array<uint16_t, 2> kA{5001, 5000};
  static constexpr std::array<uint16_t, 2> kB{6000, 5001};
  static constexpr std::array<uint16_t, 1> kC{6000};
  EXPECT_EQ(add_claiming(reg, "a", 17, kA), "");
  EXPECT_EQ(add_claiming(reg, "b", 17, kB),
            "transport \"b\": it claims UDP port 5001, which transport \"a\" holds");
  EXPECT_EQ(add_claiming(reg, "c", 17, kC), "");  // 6000 was not b's: b was refused whole
  EXPECT_EQ(add_claiming(reg, "sctp", 132), "");
  EXPECT_EQ(add_claiming(reg, "sctp2", 132),
            "transport \"sctp2\": it claims IP protocol 132, which transport \"sctp\" holds");
  EXPECT_EQ(add_claiming(reg, "none", 0), "");  // claims nothing: nothing to collide
  EXPECT_EQ(add_claiming(reg, "none2", 0), "");
  auto es = reg.entries();
  ASSERT_EQ(es.size(), 5u);
  EXPECT_EQ(es[0].claims, "UDP 5000-5001");
  EXPECT_EQ(es[1].name, "c");
  EXPECT_EQ(es[1].claims, "UDP 6000");
  EXPECT_EQ(es[2].claims, "IP protocol 132");
  EXPECT_EQ(es[3].claims, "");
}

TEST(RegistryClaims, RefusesAMalformedClaim) {
  Registry reg;
  static constexpr std::array<uint16_t, 1> kPort{7000};
  static constexpr std::array<uint16_t, 2> kZero{7001, 0};
  EXPECT_EQ(add_claiming(reg, "a", 17),
            "transport \"a\": it claims UDP without destination ports (UDP is claimed port by "
            "port)");
  EXPECT_EQ(add_claiming(reg, "b", 6, kPort),
            "transport \"b\": its claim names UDP ports but takes IP protocol 6");
  EXPECT_EQ(add_claiming(reg, "c", 17, kPort, nullptr),
            "transport \"c\": its claim on UDP has no parse function");
  EXPECT_EQ(add_claiming(reg, "d", 17, kZero), "transport \"d\": it claims UDP port 0");
  EXPECT_EQ(error_of<std::invalid_argument>(
                [&] { reg.add("e", "", [] { return std::unique_ptr<Transport>(); }); }),
            "transport \"e\": it made no transport to read its claim from");
  EXPECT_TRUE(reg.entries().empty());
  EXPECT_EQ(add_claiming(reg, "f", 17, kPort), "");  // nothing above held 7000
}

// What the owner handles itself (the dataplane: ICMP) is refused to every transport after, and
// the owner cannot reserve what a transport holds.
TEST(RegistryClaims, ReservationsAreTheOwnersAlone) {
  Registry reg;
  static constexpr std::array<uint16_t, 1> kRoce{4791};
  static constexpr std::array<uint16_t, 2> kMine{53, 67};
  EXPECT_EQ(add_claiming(reg, "roce", 17, kRoce), "");
  reg.reserve(1, {}, "the dataplane (ICMP)");
  reg.reserve(1, {}, "the dataplane (ICMP)");  // the same again: nothing changes
  reg.reserve(17, kMine, "the dataplane (DNS, DHCP)");
  reg.reserve(17, kMine, "the dataplane (DNS, DHCP)");
  EXPECT_EQ(add_claiming(reg, "icmp", 1),
            "transport \"icmp\": it claims IP protocol 1, which the dataplane (ICMP) holds");
  static constexpr std::array<uint16_t, 2> kDhcp{68, 67};
  EXPECT_EQ(add_claiming(reg, "dhcp", 17, kDhcp),
            "transport \"dhcp\": it claims UDP port 67, which the dataplane (DNS, DHCP) holds");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { reg.reserve(17, kRoce, "someone"); }),
            "someone: it claims UDP port 4791, which transport \"roce\" holds");
  EXPECT_EQ(error_of<std::invalid_argument>([&] { reg.reserve(1, {}, "someone"); }),
            "someone: it claims IP protocol 1, which the dataplane (ICMP) holds");
  EXPECT_EQ(reg.entries().size(), 1u);
}

TEST(RegistryClaims, TheBuiltInsClaimTcpAndRocesPort) {
  auto es = Registry::global().entries();
  ASSERT_GE(es.size(), 2u);
  EXPECT_EQ(es[0].name, "tcp");
  EXPECT_EQ(es[0].claims, "IP protocol 6");
  EXPECT_EQ(es[1].name, "rocev2");
  EXPECT_EQ(es[1].claims, "UDP 4791");
  // The registry refuses a third party the same traffic.
  static constexpr std::array<uint16_t, 1> kRoce{4791};
  Claim c{.proto = 17, .udp_ports = kRoce, .parse = parse_nothing};
  EXPECT_EQ(Registry::global().claim_error(c),
            "it claims UDP port 4791, which transport \"rocev2\" holds");
  c = Claim{.proto = 6, .parse = parse_nothing};
  EXPECT_EQ(Registry::global().claim_error(c),
            "it claims IP protocol 6, which transport \"tcp\" holds");
}

// Solar is a built-in: its connections are queue pairs, and it takes UDP 7000 from anyone else.
TEST(RegistryClaims, SolarIsBuiltInAndHoldsUdp7000) {
  const std::unique_ptr<Transport> t = Registry::global().create("solar");
  ASSERT_NE(t, nullptr);
  EXPECT_NE(t->qp_control(), nullptr);
  const auto es = Registry::global().entries();
  ASSERT_EQ(es.size(), 3u);
  EXPECT_EQ(es[2].name, "solar");
  EXPECT_EQ(es[2].claims, "UDP 7000");
  static constexpr std::array<uint16_t, 1> kSolar{7000};
  const Claim c{.proto = 17, .udp_ports = kSolar, .parse = parse_nothing};
  EXPECT_EQ(Registry::global().claim_error(c),
            "it claims UDP port 7000, which transport \"solar\" holds");
}

// ---- loading plugins ----------------------------------------------------------------------------

TEST(RegistryLoad, LoadsTheDatagramPlugin) {
  const std::string path = env_path("CLEAVE_TEST_PLUGIN");
  Registry reg;  // outlives t below, as it must: t's code is in the plugin
  reg.add("builtin", "", make_fake);
  EXPECT_EQ(reg.load(path), "datagram");
  auto es = reg.entries();
  ASSERT_EQ(es.size(), 2u);
  EXPECT_EQ(es[1].name, "datagram");
  EXPECT_EQ(es[1].origin, path);
  EXPECT_HAS(es[1].description, "UDP");
  EXPECT_EQ(es[1].factory, nullptr);

  auto t = reg.create("datagram");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->name(), "datagram");
  EXPECT_EQ(t->flow_count(), 0u);
  EXPECT_NE(reg.create("builtin"), nullptr);
}

TEST(RegistryLoad, RefusesTheSameNameTwice) {
  const std::string path = env_path("CLEAVE_TEST_PLUGIN");
  Registry reg;
  reg.load(path);
  std::string msg = error_of<std::runtime_error>([&] { reg.load(path); });
  EXPECT_EQ(msg, path + ": already loaded (transport \"datagram\")");
  // By another path to the same file: dlopen() knows the object, and so do we.
  const std::string other = std::filesystem::path(path).parent_path().string() + "/./" +
                            std::filesystem::path(path).filename().string();
  msg = error_of<std::runtime_error>([&] { reg.load(other); });
  EXPECT_EQ(msg, other + ": already loaded (transport \"datagram\")");
  EXPECT_EQ(reg.entries().size(), 1u);
  EXPECT_NE(reg.create("datagram"), nullptr);  // the first load is still usable
}

TEST(RegistryLoad, RefusesATakenName) {
  Registry reg;
  reg.add("tcp", "", make_fake);
  const std::string path = env_path("CLEAVE_TEST_BAD_PLUGIN_TAKEN");
  EXPECT_EQ(error_of<std::runtime_error>([&] { reg.load(path); }),
            path + ": transport name \"tcp\" is taken (by built-in)");
  EXPECT_EQ(reg.entries().size(), 1u);
}

// A plugin's claim is checked as a built-in's: one colliding with RoCEv2's port or another
// plugin's is refused (and unloaded: its name is free again), and one that makes no transport
// to read its claim from is refused too.
TEST(RegistryLoad, RefusesAPluginWhoseClaimCollides) {
  Registry reg;
  static constexpr std::array<uint16_t, 1> kRoce{4791};
  EXPECT_EQ(add_claiming(reg, "rocev2", 17, kRoce), "");
  const std::string datagram = env_path("CLEAVE_TEST_PLUGIN");
  const std::string roce = env_path("CLEAVE_TEST_PLUGIN_CLASH_ROCE");
  const std::string twin = env_path("CLEAVE_TEST_PLUGIN_CLASH_TWIN");
  EXPECT_EQ(reg.load(datagram), "datagram");
  EXPECT_EQ(reg.entries()[1].claims, "UDP 9000-9015");
  EXPECT_EQ(error_of<std::runtime_error>([&] { reg.load(roce); }),
            roce +
                ": transport \"clash-roce\": it claims UDP port 4791, which transport "
                "\"rocev2\" holds");
  EXPECT_EQ(error_of<std::runtime_error>([&] { reg.load(twin); }),
            twin +
                ": transport \"clash-twin\": it claims UDP port 9008, which transport "
                "\"datagram\" holds");
  const std::string none = env_path("CLEAVE_TEST_BAD_PLUGIN_MAKES_NONE");
  EXPECT_EQ(error_of<std::runtime_error>([&] { reg.load(none); }),
            none + ": transport \"makes-none\": it made no transport to read its claim from");
  EXPECT_EQ(reg.entries().size(), 2u);
  EXPECT_EQ(reg.create("clash-twin"), nullptr);
  // Refused, it was unloaded and holds nothing: a registry without datagram takes it.
  Registry other;
  EXPECT_EQ(other.load(twin), "clash-twin");
  EXPECT_EQ(other.entries()[0].claims, "UDP 9008-9023");
}

TEST(RegistryLoad, RefusesWhatIsNotAPlugin) {
  Registry reg;
  const std::string missing = testing::TempDir() + "no-such-plugin.so";
  std::string msg = error_of<std::runtime_error>([&] { reg.load(missing); });
  // dlerror() names the path too: it is said once.
  EXPECT_EQ(msg,
            missing + ": cannot load: cannot open shared object file: No such file or directory");

  const std::string text = testing::TempDir() + "not-a-plugin.so";
  std::ofstream(text) << "this is not an ELF file, just text long enough to have a header\n";
  msg = error_of<std::runtime_error>([&] { reg.load(text); });
  EXPECT_HAS(msg, text + ": cannot load: ");
  EXPECT_HAS(msg, "ELF");  // glibc: "invalid ELF header"
  std::remove(text.c_str());
  EXPECT_TRUE(reg.entries().empty());
}

TEST(RegistryLoad, RefusesBrokenPlugins) {
  Registry reg;
  auto load = [&](const char* var) {
    const std::string path = env_path(var);
    std::string msg = error_of<std::runtime_error>([&] { reg.load(path); });
    EXPECT_EQ(msg.substr(0, path.size() + 2), path + ": ");
    return msg;
  };
  EXPECT_HAS(load("CLEAVE_TEST_BAD_PLUGIN_NO_ENTRY"),
             ": not a Cleave transport: no entry point cleave_transport_plugin_v1 (undefined "
             "symbol: cleave_transport_plugin_v1)");
  EXPECT_HAS(load("CLEAVE_TEST_BAD_PLUGIN_WRONG_ABI"),
             "built for transport ABI version 999, this build of Cleave has version " +
                 std::to_string(CLEAVE_TRANSPORT_ABI_VERSION));
  // Built against the transport.h of before the routes (TxDesc::route, RxHeader::route: version 7).
  EXPECT_HAS(load("CLEAVE_TEST_BAD_PLUGIN_OLD_ABI"),
             "built for transport ABI version 7, this build of Cleave has version " +
                 std::to_string(CLEAVE_TRANSPORT_ABI_VERSION));
  EXPECT_HAS(load("CLEAVE_TEST_BAD_PLUGIN_SHORT"),
             "its struct cleave_transport_plugin is 8 bytes, at least 32 expected");
  EXPECT_HAS(load("CLEAVE_TEST_BAD_PLUGIN_BAD_NAME"),
             "transport name \"Bad_Name\" may only hold the characters");
  EXPECT_TRUE(reg.entries().empty());
}

// ---- the datagram plugin at work ----------------------------------------------------------------

class Datagram : public testing::Test {
 protected:
  void SetUp() override {
    reg.load(env_path("CLEAVE_TEST_PLUGIN"));
    t = reg.create("datagram");
    ASSERT_NE(t, nullptr);
  }
  void TearDown() override { EXPECT_EQ(ctx.nic_calls, 0); }

  Registry reg;  // declared first: destroyed (and the plugin closed) after t
  std::unique_ptr<Transport> t;
  TestContext ctx;
};

TEST_F(Datagram, SendsAndReceives) {
  ASSERT_EQ(t->connect(7, kTuple, {}, ctx), 0);
  ctx.flush();
  ASSERT_EQ(ctx.events.size(), 1u);
  EXPECT_EQ(ctx.events[0].flow, 7u);
  EXPECT_EQ(ctx.events[0].kind, EventKind::kConnected);
  ctx.events.clear();
  EXPECT_EQ(t->connect(7, kTuple, {}, ctx), -EEXIST);

  const std::array<AppRequest, 3> reqs{{
      {.flow = 7, .kind = ReqKind::kSend, .mr = 0, .len = 300, .offset = 32, .wr_id = 1},
      {.flow = 7, .kind = ReqKind::kRecv, .mr = 0, .len = 64, .offset = 128, .wr_id = 2},
      {.flow = 7, .kind = ReqKind::kSend, .mr = 0, .len = 0, .offset = 0, .wr_id = 3},
  }};
  t->app_burst(reqs, ctx);
  ctx.flush();
  ASSERT_EQ(ctx.sent.size(), 2u);
  const TxDesc& d = ctx.sent[0];
  EXPECT_EQ(d.flow, 7u);
  EXPECT_EQ(d.len, 300u);
  EXPECT_EQ(d.mr, 0);
  EXPECT_EQ(d.offset, 32u);
  EXPECT_EQ(d.mss, 0);
  ASSERT_EQ(d.l4_len, 8);
  // Source port 5000, destination 6000, length 8 + 300, checksum 0 (the NIC's).
  const std::array<uint8_t, 8> want{0x13, 0x88, 0x17, 0x70, 0x01, 0x34, 0, 0};
  EXPECT_TRUE(std::equal(want.begin(), want.end(), d.l4.begin()));
  EXPECT_EQ(ctx.sent[1].l4[4], 0);
  EXPECT_EQ(ctx.sent[1].l4[5], 8);  // an empty datagram is a header alone
  ASSERT_EQ(ctx.events.size(), 2u);
  EXPECT_EQ(ctx.events[0].kind, EventKind::kSendDone);
  EXPECT_EQ(ctx.events[0].wr_id, 1u);
  EXPECT_EQ(ctx.events[0].len, 300u);
  EXPECT_EQ(ctx.events[0].status, 0);
  EXPECT_EQ(ctx.events[1].wr_id, 3u);
  ctx.events.clear();

  const Segment seg("hello, datagram");
  const RxHeader h = seg.header(7);
  t->rx_burst({&h, 1}, ctx);
  ctx.flush();
  EXPECT_EQ(std::string(ctx.mem.begin() + 128, ctx.mem.begin() + 128 + 15), "hello, datagram");
  EXPECT_EQ(ctx.mem[128 + 15], 0);
  ASSERT_EQ(ctx.events.size(), 1u);
  EXPECT_EQ(ctx.events[0].flow, 7u);
  EXPECT_EQ(ctx.events[0].kind, EventKind::kRecvDone);
  EXPECT_EQ(ctx.events[0].wr_id, 2u);
  EXPECT_EQ(ctx.events[0].len, 15u);
  EXPECT_EQ(ctx.events[0].status, 0);

  Info info;
  ASSERT_TRUE(t->flow_info(7, info));
  EXPECT_EQ(info.get("local_port"), 5000u);
  EXPECT_EQ(info.get("remote_port"), 6000u);
  EXPECT_EQ(info.get("sent"), 2u);
  EXPECT_EQ(info.get("received"), 1u);
  EXPECT_EQ(info.get("dropped"), 0u);
  EXPECT_FALSE(t->flow_info(8, info));
  EXPECT_FALSE(t->flow_info(kNoFlow, info));
}

TEST_F(Datagram, CutsDropsAndChecksBounds) {
  ASSERT_EQ(t->connect(7, kTuple, {}, ctx), 0);
  const std::array<AppRequest, 2> reqs{{
      {.flow = 7, .kind = ReqKind::kRecv, .mr = 0, .len = 4, .offset = 0, .wr_id = 1},
      {.flow = 7, .kind = ReqKind::kRecv, .mr = 0, .len = 64, .offset = 250, .wr_id = 2},
  }};
  t->app_burst(reqs, ctx);
  const Segment seg("0123456789");
  const std::array<RxHeader, 3> hs{seg.header(7), seg.header(7), seg.header(7)};
  t->rx_burst(hs, ctx);
  ctx.flush();
  ASSERT_EQ(ctx.events.size(), 3u);
  // Cut to the 4-byte buffer; aux tells the whole length.
  EXPECT_EQ(ctx.events[1].wr_id, 1u);
  EXPECT_EQ(ctx.events[1].len, 4u);
  EXPECT_EQ(ctx.events[1].aux, 10u);
  EXPECT_EQ(std::string(ctx.mem.begin(), ctx.mem.begin() + 5), std::string("0123\0", 5));
  // The second buffer runs past app memory: copy_in refuses and the receive fails.
  EXPECT_EQ(ctx.events[2].wr_id, 2u);
  EXPECT_EQ(ctx.events[2].status, -EFAULT);
  EXPECT_EQ(ctx.events[2].len, 0u);
  // The third datagram found no buffer.
  Info info;
  ASSERT_TRUE(t->flow_info(7, info));
  EXPECT_EQ(info.get("received"), 3u);
  EXPECT_EQ(info.get("dropped"), 1u);
}

TEST_F(Datagram, AcceptsFromAListener) {
  ASSERT_EQ(t->listen(3, {IpAddr::v4(0x0a000001), 5000}, {}), 0);
  EXPECT_EQ(t->listen(3, {IpAddr::v4(0x0a000001), 5000}, {}), -EEXIST);
  const std::array<Param, 1> params{{{"cc", "cubic"}}};
  EXPECT_EQ(t->listen(4, {IpAddr::v4(0x0a000001), 5001}, params), -EINVAL);
  EXPECT_HAS(t->check_params(params), "\"cc\"");

  const Segment seg("first");
  RxHeader h = seg.header(kNoFlow);
  h.has_listener = true;
  h.listener = 3;
  t->rx_burst({&h, 1}, ctx);
  ctx.flush();
  ASSERT_EQ(ctx.opened.size(), 1u);
  EXPECT_EQ(ctx.opened[0], kTuple);  // as seen from here: the segment's destination is local
  ASSERT_EQ(ctx.events.size(), 1u);
  EXPECT_EQ(ctx.events[0].kind, EventKind::kAccepted);
  EXPECT_EQ(ctx.events[0].flow, 100u);
  EXPECT_EQ(ctx.events[0].aux, 3u);
  EXPECT_EQ(t->flow_count(), 1u);

  // Replies go back to the sender's port.
  const AppRequest send{.flow = 100, .kind = ReqKind::kSend, .len = 1, .wr_id = 9};
  t->app_burst({&send, 1}, ctx);
  ctx.flush();
  ASSERT_EQ(ctx.sent.size(), 1u);
  EXPECT_EQ(ctx.sent[0].l4[2] << 8 | ctx.sent[0].l4[3], 6000);

  // A listener that is gone accepts nothing.
  t->unlisten(3);
  t->rx_burst({&h, 1}, ctx);
  EXPECT_EQ(ctx.opened.size(), 1u);
}

TEST_F(Datagram, ClosesAndRefusesUnknownFlows) {
  ASSERT_EQ(t->connect(7, kTuple, {}, ctx), 0);
  FlowTuple tcp = kTuple;
  tcp.proto = 6;
  EXPECT_EQ(t->connect(8, tcp, {}, ctx), -EINVAL);
  const std::array<AppRequest, 4> reqs{{
      {.flow = 7, .kind = ReqKind::kRecv, .len = 16, .wr_id = 1},
      {.flow = 7, .kind = ReqKind::kAbort, .wr_id = 2},
      {.flow = 7, .kind = ReqKind::kSend, .len = 16, .wr_id = 3},
      {.flow = 9, .kind = ReqKind::kRecv, .len = 16, .wr_id = 4},
  }};
  ctx.flush();
  ctx.events.clear();
  t->app_burst(reqs, ctx);
  ctx.flush();
  ASSERT_EQ(ctx.events.size(), 4u);
  EXPECT_EQ(ctx.events[0].kind, EventKind::kRecvDone);  // the posted buffer fails
  EXPECT_EQ(ctx.events[0].status, -ECONNABORTED);
  EXPECT_EQ(ctx.events[1].kind, EventKind::kClosed);
  EXPECT_EQ(ctx.events[1].status, -ECONNABORTED);
  EXPECT_EQ(ctx.events[2].kind, EventKind::kSendDone);  // the flow is gone
  EXPECT_EQ(ctx.events[2].status, -ENOTCONN);
  EXPECT_EQ(ctx.events[3].kind, EventKind::kRecvDone);
  EXPECT_EQ(ctx.events[3].status, -ENOTCONN);
  EXPECT_EQ(ctx.closed, std::vector<FlowId>{7});
  EXPECT_EQ(t->flow_count(), 0u);
  EXPECT_TRUE(ctx.sent.empty());
}

}  // namespace
}  // namespace cleave::transport
