// management.cc - management commands: status, ports, ARP, routes, stats, NIC, flows,
// transports, log level.
#include "control/management.h"

#include <arpa/inet.h>
#include <rte_ethdev.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "cleave_version.h"
#include "control/app_server.h"
#include "control/log.h"
#include "control/mgmt_server.h"
#include "mgmt_protocol.h"
#include "registry.h"
#include "transport.h"

namespace cleave::dp {

using nlohmann::json;

namespace {

// How long a management request waits for the lcore's answer. A stuck lcore is reported after
// this, so it is short; but a polling core on an oversubscribed machine can go unscheduled for
// hundreds of milliseconds, which is slowness, not a fault.
constexpr auto kDataplaneTimeout = std::chrono::milliseconds(2000);

json link_json(uint16_t port_id) {
  rte_eth_link link{};
  if (rte_eth_link_get_nowait(port_id, &link) != 0) return nullptr;
  return {{"up", link.link_status == RTE_ETH_LINK_UP},
          {"speed_mbps", link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN ? 0 : link.link_speed},
          {"duplex", link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX ? "full" : "half"},
          {"autoneg", link.link_autoneg == RTE_ETH_LINK_AUTONEG}};
}

json counters_json(uint16_t port_id) {
  rte_eth_stats s{};
  if (rte_eth_stats_get(port_id, &s) != 0) return nullptr;
  return {{"rx_packets", s.ipackets}, {"tx_packets", s.opackets}, {"rx_bytes", s.ibytes},
          {"tx_bytes", s.obytes},     {"rx_missed", s.imissed},   {"rx_errors", s.ierrors},
          {"tx_errors", s.oerrors},   {"rx_nombuf", s.rx_nombuf}};
}

json xstats_json(uint16_t port_id) {
  int n = rte_eth_xstats_get_names(port_id, nullptr, 0);
  if (n <= 0) return json::object();
  std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
  std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
  if (rte_eth_xstats_get_names(port_id, names.data(), static_cast<unsigned>(n)) != n ||
      rte_eth_xstats_get(port_id, values.data(), static_cast<unsigned>(n)) != n) {
    return json::object();
  }
  json out = json::object();
  for (const rte_eth_xstat& v : values) {
    if (v.id < names.size()) out[names[v.id].name] = v.value;
  }
  return out;
}

// A neighbour's MAC is shown only while it is trusted.
json mac_json(ArpState state, const Mac& mac) {
  bool known = state == ArpState::kReachable || state == ArpState::kRefreshing;
  return known ? json(mac.str()) : json(nullptr);
}

// "ip:port", "[ip6]:port" for IPv6.
std::string endpoint_str(const transport::Endpoint& e) {
  if (e.ip.family == 4) return Ipv4{e.ip.v4_host()}.str() + ":" + std::to_string(e.port);
  char buf[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, e.ip.bytes.data(), buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(e.port);
}

json app_json(uint32_t app) {
  return app == 0 ? json(nullptr) : json(app);
}

// A flow: its tuple and the transport's flow_info. JSON objects keep no order, so info_keys
// lists info's keys in the order the dataplane reported them.
json flow_json(const FlowRow& r) {
  json info = json::object();
  json keys = json::array();
  for (const auto& [k, v] : r.text) {
    info[k] = v;
    keys.push_back(k);
  }
  for (const auto& [k, v] : r.numbers) {
    info[k] = v;
    keys.push_back(k);
  }
  return {{"id", r.id},
          {"app", app_json(r.app)},
          {"transport", r.transport},
          {"local", endpoint_str(r.tuple.local)},
          {"remote", endpoint_str(r.tuple.remote)},
          {"info", info},
          {"info_keys", keys}};
}

// "port 5001" or "tuple 10.0.0.1:5001 *:*", for messages and logs.
std::string binding_name(const FlowBinding& b) {
  if (!b.tuple) return "port " + std::to_string(b.local_port);
  return "tuple " + WildEndpoint{b.local_ip, b.local_port}.str() + " " +
         WildEndpoint{b.remote_ip, b.remote_port}.str();
}

json binding_json(const FlowBinding& b) {
  json params = json::object();
  for (const auto& [k, v] : b.params)
    params[k] = v;
  json out = json::object();
  if (b.tuple) {
    out["tuple"] = {{"local", WildEndpoint{b.local_ip, b.local_port}.str()},
                    {"remote", WildEndpoint{b.remote_ip, b.remote_port}.str()}};
  } else {
    out["port"] = b.local_port;
  }
  out["uid"] = b.uid ? json(*b.uid) : json(nullptr);
  out["transport"] = b.transport;
  out["params"] = params;
  return out;
}

// A non-negative integer argument (JSON from the wire has them unsigned; built in-process,
// signed), or nothing.
std::optional<uint64_t> uint_arg(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

// port.fault's probability arguments: a number in [0, 1], 0 when not given.
double probability_arg(const json& args, const char* key) {
  if (!args.contains(key)) return 0;
  const json& v = args[key];
  if (!v.is_number() || fault_probability_error(v.get<double>())) {
    throw MgmtError(mgmt::kErrBadRequest, std::string("port.fault: argument '") + key +
                                              "' must be a probability from 0 to 1 (1: a cut "
                                              "wire)");
  }
  return v.get<double>();
}

// The binding a flow.attach or flow.detach names: {port} or {tuple: {local, remote}}.
FlowBinding binding_key(const json& args, const std::string& command) {
  auto bad = [&](const std::string& msg) { return MgmtError(mgmt::kErrBadRequest, command + msg); };
  FlowBinding b;
  if (args.contains("port") == args.contains("tuple")) {
    throw bad(": give one of the arguments 'port' and 'tuple'");
  }
  if (args.contains("port")) {
    std::optional<uint64_t> port = uint_arg(args["port"]);
    if (!port || *port == 0 || *port > 65535) {
      throw bad(": argument 'port' must be a port number from 1 to 65535");
    }
    b.local_port = uint16_t(*port);
    return b;
  }
  const json& t = args["tuple"];
  const std::string form =
      ": argument 'tuple' must be {local, remote}, each \"ip:port\" with * for any address or "
      "port";
  if (!t.is_object() || !t.contains("local") || !t.contains("remote") || t.size() != 2 ||
      !t["local"].is_string() || !t["remote"].is_string()) {
    throw bad(form);
  }
  auto local = WildEndpoint::parse(t["local"].get<std::string>());
  auto remote = WildEndpoint::parse(t["remote"].get<std::string>());
  for (const auto& [e, key] : {std::pair{&local, "local"}, std::pair{&remote, "remote"}}) {
    if (!*e) {
      throw bad(std::string(": tuple ") + key + " '" + t[key].get<std::string>() +
                "' is not \"ip:port\" (an IPv4 address or *, a port from 1 to 65535 or *)");
    }
  }
  b.tuple = true;
  b.local_ip = local->ip;
  b.local_port = local->port;
  b.remote_ip = remote->ip;
  b.remote_port = remote->port;
  return b;
}

// flow.attach's arguments: {port | tuple: {local, remote}, uid?, transport?, params?}.
FlowBinding binding_args(const json& args) {
  auto bad = [](const std::string& msg) { return MgmtError(mgmt::kErrBadRequest, msg); };
  if (!args.contains("port") && !args.contains("tuple")) {
    throw bad("flow.attach: missing argument 'port' (or 'tuple')");
  }
  FlowBinding b = binding_key(args, "flow.attach");
  if (args.contains("uid")) {
    std::optional<uint64_t> uid = uint_arg(args["uid"]);
    if (!uid || *uid >= UINT32_MAX) {
      throw bad("flow.attach: argument 'uid' must be a user id (0 to 4294967294)");
    }
    b.uid = uint32_t(*uid);
  }
  if (args.contains("transport")) {
    if (!args["transport"].is_string() || args["transport"].get<std::string>().empty()) {
      throw bad("flow.attach: argument 'transport' must be a transport's name");
    }
    b.transport = args["transport"].get<std::string>();
  }
  if (args.contains("params")) {
    const json& params = args["params"];
    if (!params.is_object()) {
      throw bad("flow.attach: argument 'params' must be an object of names to values");
    }
    for (const auto& [k, v] : params.items()) {
      if (k.empty()) throw bad("flow.attach: a parameter's name may not be empty");
      if (v.is_string()) {
        b.params.emplace_back(k, v.get<std::string>());
      } else if (v.is_number_integer()) {
        b.params.emplace_back(k, v.dump());
      } else {
        throw bad("flow.attach: parameter '" + k + "' must be a string or an integer");
      }
    }
  }
  return b;
}

}  // namespace

Management::Management(DaemonInfo info, const Config& cfg, const std::vector<DpPort>& ports,
                       const RouteTable& routes, const ShardChannels& ctl)
    : info_(std::move(info)), cfg_(cfg), ports_(ports), routes_(routes), ctl_(ctl) {}

std::unique_ptr<CtlRequest> Management::ask(std::unique_ptr<CtlRequest> req, size_t shard) {
  auto answer = ctl_[shard].call(std::move(req), kDataplaneTimeout);
  if (!answer) {
    throw MgmtError(mgmt::kErrUnavailable,
                    "the dataplane (shard " + std::to_string(shard) + ", lcore " +
                        std::to_string(lcore_of(shard)) + ") did not answer within " +
                        std::to_string(kDataplaneTimeout.count()) + " ms (is its lcore stuck?)");
  }
  return answer;
}

std::vector<DataplaneStats> Management::shard_stats(DataplaneStats& sum, uint64_t& tsc_hz) {
  std::vector<DataplaneStats> out;
  sum = DataplaneStats{};
  for (auto& r : ask_all([] { return ctl::Stats{}; })) {
    out.push_back(r->as<ctl::Stats>().stats);
    sum += out.back();
    tsc_hz = r->tsc_hz;
  }
  return out;
}

json Management::handle(std::string_view command, const json& args) {
  auto str_arg = [&](const char* key, bool required) -> std::string {
    if (!args.contains(key)) {
      if (required) {
        throw MgmtError(mgmt::kErrBadRequest,
                        std::string(command) + ": missing argument '" + key + "'");
      }
      return {};
    }
    if (!args[key].is_string()) {
      throw MgmtError(mgmt::kErrBadRequest,
                      std::string(command) + ": argument '" + key + "' must be a string");
    }
    return args[key].get<std::string>();
  };
  if (command == "status") return status();
  if (command == "port.show") return ports(str_arg("name", false));
  if (command == "port.fault") {
    const std::string name = str_arg("name", true);
    uint8_t dirs = 0;
    const std::string dir = str_arg("dir", false);
    if (dir.empty() || dir == "rx") dirs |= 1u << size_t(FaultDir::kRx);
    if (dir.empty() || dir == "tx") dirs |= 1u << size_t(FaultDir::kTx);
    if (dirs == 0) {
      throw MgmtError(mgmt::kErrBadRequest, "port.fault: argument 'dir' must be rx or tx");
    }
    FaultParams p;
    p.loss = probability_arg(args, "loss");
    p.reorder = probability_arg(args, "reorder");
    p.duplicate = probability_arg(args, "duplicate");
    if (args.contains("seed")) {
      std::optional<uint64_t> seed = uint_arg(args["seed"]);
      if (!seed) {
        throw MgmtError(mgmt::kErrBadRequest,
                        "port.fault: argument 'seed' must be a non-negative integer");
      }
      p.seed = *seed;
    }
    return port_fault(name, dirs, p);
  }
  if (command == "arp.show") return arp();
  if (command == "route.show") return routes();
  if (command == "route.get") return route_get(str_arg("addr", true));
  if (command == "stats.show") return stats();
  if (command == "nic.show") return nic(str_arg("name", false));
  if (command == "flow.list") {
    // With start or max: one page (mgmt_protocol.h); without: the whole listing.
    auto page_arg = [&](const char* key, uint64_t lo, uint64_t hi) -> std::optional<uint32_t> {
      if (!args.contains(key)) return std::nullopt;
      std::optional<uint64_t> v = uint_arg(args[key]);
      if (!v || *v < lo || *v > hi) {
        throw MgmtError(mgmt::kErrBadRequest, "flow.list: argument '" + std::string(key) +
                                                  "' must be a number from " + std::to_string(lo) +
                                                  " to " + std::to_string(hi));
      }
      return uint32_t(*v);
    };
    return flows(page_arg("start", 0, transport::kNoFlow - 1),
                 page_arg("max", 1, ctl::kFlowListPageRows));
  }
  if (command == "flow.show") {
    std::optional<uint64_t> id = args.contains("id") ? uint_arg(args["id"]) : std::nullopt;
    if (!id || *id >= transport::kNoFlow) {
      throw MgmtError(mgmt::kErrBadRequest,
                      "flow.show: argument 'id' must be a flow id (a number)");
    }
    return flow_show(uint32_t(*id));
  }
  if (command == "flow.attach") return attach(binding_args(args));
  if (command == "flow.detach") return detach(binding_key(args, "flow.detach"));
  if (command == "transport.list") return transports();
  if (command == "transport.attach") return attach_transport(str_arg("path", true));
  if (command == "app.list" || command == "app.show") {
    if (apps_ == nullptr) throw MgmtError(mgmt::kErrUnavailable, "the app server is not running");
    if (command == "app.list") return apps_->list();
    if (!args.contains("id") || !args["id"].is_number_unsigned()) {
      throw MgmtError(mgmt::kErrBadRequest, "app.show: argument 'id' must be an app id (a number)");
    }
    return apps_->show(args["id"].get<uint32_t>());
  }
  if (command == "debug.ctl_stall" && info_.test_hooks) {
    // Test equipment: the dataplane as the control path sees a stalled lcore (ctl_channel.h).
    const std::string mode = str_arg("mode", true);
    CtlStall stall = CtlStall::kOff;
    if (mode == "queued") {
      stall = CtlStall::kQueued;
    } else if (mode == "attach") {
      stall = CtlStall::kAttach;
    } else if (mode != "off") {
      throw MgmtError(mgmt::kErrBadRequest,
                      "debug.ctl_stall: argument 'mode' must be off, queued or attach");
    }
    spdlog::warn("test hook: control requests to the dataplane stall: {}", mode);
    ctl_.test_stall(stall);
    return {{"mode", mode}};
  }
  if (command == "log.get") return {{"level", log_level()}};
  if (command == "log.set") {
    std::string level = str_arg("level", true);
    std::string old = log_level();
    if (!set_log_level(level)) {
      throw MgmtError(mgmt::kErrBadRequest,
                      "unknown log level '" + level +
                          "' (use trace, debug, info, warn, error, critical or off)");
    }
    if (old != level) spdlog::info("log level changed from {} to {}", old, level);
    return {{"level", log_level()}, {"previous", old}};
  }
  throw MgmtError(mgmt::kErrUnknownCommand, "unknown command '" + std::string(command) + "'");
}

json Management::status() {
  using namespace std::chrono;
  json dp = {{"lcore", lcore_of(0)}, {"lcores", info_.dataplane_lcores}};
  try {
    DataplaneStats sum;
    uint64_t hz = 0;
    shard_stats(sum, hz);
    dp["state"] = "running";
    dp["iterations"] = sum.lcore.iterations;
  } catch (const MgmtError&) {
    dp["state"] = "unresponsive";
  }
  unsigned up = 0;
  for (const DpPort& p : ports_) {
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(p.port_id, &link) == 0 && link.link_status == RTE_ETH_LINK_UP) up++;
  }
  double uptime = duration<double>(steady_clock::now() - info_.started).count();
  return {{"daemon", "cleaved"},
          {"version", CLEAVE_VERSION},
          {"protocol", mgmt::kProtocolVersion},
          {"pid", getpid()},
          {"uptime_s", uptime},
          {"config", info_.config_source},
          {"runtime_dir", info_.runtime_dir},
          {"hugepages", info_.hugepages},
          {"main_lcore", info_.main_lcore},
          {"dataplane", dp},
          {"ports", {{"total", ports_.size()}, {"link_up", up}}},
          {"log_level", log_level()},
          {"control_socket", control_ != nullptr ? control_->stats() : json(nullptr)},
          {"app_socket", apps_ != nullptr ? apps_->stats() : json(nullptr)}};
}

json Management::ports(const std::string& name) {
  json out = json::array();
  for (size_t i = 0; i < ports_.size(); i++) {
    const DpPort& p = ports_[i];
    const PortConfig& pc = cfg_.ports[i];
    if (!name.empty() && name != p.name) continue;
    rte_eth_dev_info info{};
    rte_eth_dev_info_get(p.port_id, &info);
    json routes = json::array();
    for (const Route& r : pc.routes)
      routes.push_back({{"dst", r.dst.str()}, {"via", r.via.str()}});
    out.push_back(
        {{"name", p.name},
         {"port_id", p.port_id},
         {"device", pc.device},
         {"driver", info.driver_name != nullptr ? info.driver_name : ""},
         {"mac", p.mac.str()},
         {"mtu", p.mtu},
         {"ipv4", p.ipv4.str()},
         {"gateway", pc.gateway ? json(pc.gateway->str()) : json(nullptr)},
         {"routes", routes},
         {"exception_tap", pc.exception_tap.empty() ? json(nullptr) : json(pc.exception_tap)},
         {"link", link_json(p.port_id)},
         {"counters", counters_json(p.port_id)},
         {"xstats", xstats_json(p.port_id)},
         {"faults", faults_or_null(i)}});
  }
  if (!name.empty() && out.empty()) {
    throw MgmtError(mgmt::kErrNotFound, "no port named '" + name + "'");
  }
  return out;
}

ctl::Nic Management::nic_answer(size_t index, uint8_t dirs, const FaultParams& p) {
  std::vector<std::unique_ptr<CtlRequest>> answers = ask_all([&] {
    ctl::Nic q;
    q.port = static_cast<uint8_t>(index);
    q.counters.reserve(kMaxNicCounters);
    q.fault_dirs = dirs;
    q.fault = p;
    return q;
  });
  ctl::Nic out = std::move(answers[0]->as<ctl::Nic>());
  if (static_cast<NicBackend>(out.backend) == NicBackend::kCleave) {
    for (const auto& a : answers) {
      if (out.fault_status == 0) out.fault_status = a->as<ctl::Nic>().fault_status;
    }
    return out;
  }
  // The generic backend: a model per queue. Its counters (the fault counters too) add up.
  for (size_t k = 1; k < answers.size(); k++) {
    const ctl::Nic& r = answers[k]->as<ctl::Nic>();
    if (out.fault_status == 0) out.fault_status = r.fault_status;
    out.truncated = out.truncated || r.truncated;
    for (const NicCounterRow& c : r.counters) {
      auto same = [&](const NicCounterRow& o) { return o.name == c.name; };
      if (auto it = std::find_if(out.counters.begin(), out.counters.end(), same);
          it != out.counters.end()) {
        it->value += c.value;
      }
    }
  }
  return out;
}

json Management::faults(size_t index, uint8_t dirs, const FaultParams& p) {
  ctl::Nic r = nic_answer(index, dirs, p);
  if (r.fault_status != 0) {
    throw MgmtError(mgmt::kErrBadRequest,
                    "port " + ports_[index].name +
                        ": the NIC refused the faults: " + std::strerror(-r.fault_status));
  }
  json out = json::object();
  for (size_t d = 0; d < kFaultDirs; d++) {
    const FaultParams& f = r.faults[d];
    json o = {{"enabled", f.enabled()},
              {"loss", f.loss},
              {"reorder", f.reorder},
              {"duplicate", f.duplicate},
              {"seed", f.seed}};
    for (const NicCounterRow& c : r.counters) {
      std::string_view n(c.name.data());
      for (size_t k = 0; k < kFaultCounterCount; k++) {
        // fault_<dir>_<what> -> <what>
        std::string_view full = kFaultCounterNames[d][k];
        if (n == full) o[std::string(full.substr(std::string_view("fault_rx_").size()))] = c.value;
      }
    }
    out[d == size_t(FaultDir::kRx) ? "rx" : "tx"] = o;
  }
  return out;
}

// port.show still answers when the dataplane does not: its faults are then null.
json Management::faults_or_null(size_t index) {
  try {
    return faults(index, 0, FaultParams{});
  } catch (const MgmtError&) {
    return nullptr;
  }
}

json Management::port_fault(const std::string& name, uint8_t dirs, const FaultParams& p) {
  for (size_t i = 0; i < ports_.size(); i++) {
    if (ports_[i].name != name) continue;
    json out = faults(i, dirs, p);
    for (size_t d = 0; d < kFaultDirs; d++) {
      if ((dirs & (1u << d)) == 0) continue;
      spdlog::info("port {}: {} faults {}: loss {} reorder {} duplicate {} seed {}", name,
                   d == size_t(FaultDir::kRx) ? "rx" : "tx", p.enabled() ? "on" : "off", p.loss,
                   p.reorder, p.duplicate, p.seed);
    }
    return {{"name", name}, {"faults", out}};
  }
  throw MgmtError(mgmt::kErrNotFound, "no port named '" + name + "'");
}

json Management::nic(const std::string& name) {
  json out = json::array();
  for (size_t i = 0; i < ports_.size(); i++) {
    if (!name.empty() && name != ports_[i].name) continue;
    ctl::Nic r = nic_answer(i, 0, FaultParams{});
    if (!r.found) continue;
    // nic_mem_<table>_bytes / _in_use and nic_mem_total_bytes become the memory table.
    constexpr std::string_view kMem = "nic_mem_", kBytes = "_bytes", kInUse = "_in_use";
    json counters = json::object();
    json tables = json::object();
    uint64_t total = 0;
    for (const NicCounterRow& c : r.counters) {
      std::string_view n(c.name.data());
      if (n == "nic_mem_total_bytes") {
        total = c.value;
      } else if (n.starts_with(kMem) && n.ends_with(kBytes)) {
        n = n.substr(kMem.size(), n.size() - kMem.size() - kBytes.size());
        tables[std::string(n)]["bytes"] = c.value;
      } else if (n.starts_with(kMem) && n.ends_with(kInUse)) {
        n = n.substr(kMem.size(), n.size() - kMem.size() - kInUse.size());
        tables[std::string(n)]["in_use"] = c.value;
      } else {
        counters[std::string(n)] = c.value;
      }
    }
    auto backend = static_cast<NicBackend>(r.backend);
    out.push_back({{"name", ports_[i].name},
                   {"device", cfg_.ports[i].device},
                   {"backend", backend_name(backend)},
                   {"memory",
                    {{"where", backend == NicBackend::kCleave ? "nic" : "host"},
                     {"total_bytes", total},
                     {"tables", tables}}},
                   {"counters", counters},
                   {"truncated", r.truncated}});
  }
  if (!name.empty() && out.empty()) {
    throw MgmtError(mgmt::kErrNotFound, "no port named '" + name + "'");
  }
  return out;
}

json Management::arp() {
  // Every shard keeps a neighbour cache (shard 0 shares what it learns): of an address's
  // entries, the one most recently confirmed, reachable first.
  ctl::ArpTable r;
  uint64_t tsc_hz = 1;
  for (auto& answer : ask_all([&] {
         ctl::ArpTable q;
         q.rows.reserve(cfg_.arp.max_entries);
         return q;
       })) {
    const ctl::ArpTable& t = answer->as<ctl::ArpTable>();
    r.rows.insert(r.rows.end(), t.rows.begin(), t.rows.end());
    r.truncated = r.truncated || t.truncated;
    tsc_hz = std::max<uint64_t>(answer->tsc_hz, 1);
  }
  auto rank = [](const ArpRow& a) { return a.state == ArpState::kReachable ? 0 : 1; };
  std::sort(r.rows.begin(), r.rows.end(), [&](const ArpRow& a, const ArpRow& b) {
    if (a.port != b.port) return a.port < b.port;
    if (a.ip != b.ip) return a.ip < b.ip;
    return rank(a) != rank(b) ? rank(a) < rank(b) : a.age_cycles < b.age_cycles;
  });
  r.rows.erase(std::unique(r.rows.begin(), r.rows.end(),
                           [](const ArpRow& a, const ArpRow& b) {
                             return a.port == b.port && a.ip == b.ip;
                           }),
               r.rows.end());
  json rows = json::array();
  for (const ArpRow& a : r.rows) {
    rows.push_back({{"port", port_name(a.port)},
                    {"ip", a.ip.str()},
                    {"mac", mac_json(a.state, a.mac)},
                    {"state", arp_state_name(a.state)},
                    {"pinned", a.pinned},
                    {"age_ms", a.age_cycles * 1000 / tsc_hz}});
  }
  return {{"entries", rows}, {"truncated", r.truncated}, {"capacity", cfg_.arp.max_entries}};
}

json Management::routes() {
  json out = json::array();
  for (const RouteEntry& r : routes_.entries()) {
    out.push_back({{"dst", r.dst.str()},
                   {"via", r.via ? json(r.via->str()) : json(nullptr)},
                   {"port", port_name(r.port)},
                   {"kind", r.kind()}});
  }
  return out;
}

json Management::route_get(const std::string& addr) {
  auto ip = Ipv4::parse(addr);
  if (!ip) throw MgmtError(mgmt::kErrBadRequest, "'" + addr + "' is not an IPv4 address");
  ctl::RouteGet q;
  q.addr = *ip;
  auto r = ask(CtlRequest::make(q));
  const RouteAnswer& a = r->as<ctl::RouteGet>().route;
  if (!a.found) throw MgmtError(mgmt::kErrNotFound, "no route to " + addr);
  json neigh = nullptr;
  if (a.neighbour_known) {
    neigh = {{"state", arp_state_name(a.state)}, {"mac", mac_json(a.state, a.mac)}};
  }
  return {{"addr", addr},
          {"dst", a.dst.str()},
          {"kind", a.kind},
          {"port", port_name(a.port)},
          {"next_hop", a.next_hop.str()},
          {"neighbour", neigh}};
}

json Management::stats() {
  DataplaneStats s;
  uint64_t tsc_hz = 0;
  std::vector<DataplaneStats> shards = shard_stats(s, tsc_hz);
  // Each shard's lcore, with what it received and handed to other shards; the sums below.
  json lcores = json::array();
  for (size_t k = 0; k < shards.size(); k++) {
    const LcoreStats& l = shards[k].lcore;
    uint64_t cycles = l.busy_cycles + l.idle_cycles;
    uint64_t rx = 0, tx = 0, off = 0, in = 0;
    for (size_t i = 0; i < ports_.size(); i++) {
      const PortStats& p = shards[k].ports[i];
      rx += p.rx_packets;
      tx += p.tx_packets;
      off += p.handed_off;
      in += p.handed_in;
    }
    lcores.push_back(
        {{"lcore", lcore_of(k)},
         {"role", "dataplane"},
         {"shard", k},
         {"iterations", l.iterations},
         {"busy_iterations", l.busy_iterations},
         {"busy_cycles", l.busy_cycles},
         {"idle_cycles", l.idle_cycles},
         {"busy_percent", cycles == 0 ? 0.0 : 100.0 * double(l.busy_cycles) / double(cycles)},
         {"rx_packets", rx},
         {"tx_packets", tx},
         {"handed_off", off},
         {"handed_in", in},
         {"flows_opened", shards[k].flows.flows_opened},
         {"flows_closed", shards[k].flows.flows_closed}});
  }
  // The emulated NIC's own time, apart from the shards' ("host") when it runs on its own lcore;
  // inline, it is inside the shards' busy cycles.
  json nic = {{"mode", "inline"}};
  if (nic_service_ != nullptr) {
    nic = {{"mode", "service"}, {"lcore", nic_service_->lcore()}};
    lcores.push_back({{"lcore", nic_service_->lcore()},
                      {"role", "nic"},
                      {"busy_cycles", nic_service_->busy_cycles()},
                      {"busy_runs", nic_service_->busy_runs()}});
  }
  json ports = json::object();
  for (size_t i = 0; i < ports_.size(); i++) {
    const PortStats& p = s.ports[i];
    ports[ports_[i].name] = {{"rx_packets", p.rx_packets}, {"rx_bytes", p.rx_bytes},
                             {"tx_packets", p.tx_packets}, {"tx_bytes", p.tx_bytes},
                             {"to_kernel", p.to_kernel},   {"from_kernel", p.from_kernel},
                             {"absorbed", p.absorbed},     {"handed_off", p.handed_off}};
  }
  const ProtoStats& pr = s.proto;
  json drops = json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < s.drops.size(); i++) {
    drops[std::string(kDropNames[i])] = s.drops[i];
    total += s.drops[i];
  }
  json flows = json::object();
#define CLEAVE_X(field, what) flows[#field] = s.flows.field;
  CLEAVE_FLOW_COUNTERS(CLEAVE_X)
#undef CLEAVE_X
  return {
      {"tsc_hz", tsc_hz},
      {"lcores", lcores},
      {"nic", nic},
      {"ports", ports},
      {"arp",
       {{"requests_rx", pr.arp_requests_rx},
        {"replies_rx", pr.arp_replies_rx},
        {"requests_tx", pr.arp_requests_tx},
        {"replies_tx", pr.arp_replies_tx},
        {"conflicts", pr.arp_conflicts},
        {"resolved", pr.arp_resolved},
        {"failed", pr.arp_failed},
        {"table_full", pr.arp_table_full}}},
      {"icmp", {{"echo_requests", pr.icmp_echo_requests}, {"echo_replies", pr.icmp_echo_replies}}},
      {"flows", flows},
      {"drops", drops},
      {"drops_total", total}};
}

// One page of the listing (ctl::FlowList): the lcore spends a bounded time on each, and serves
// its packets between them. The room for the rows is made here, not on the lcore.
ctl::FlowList Management::flow_page(size_t shard, uint32_t only, uint32_t start, uint32_t max_rows,
                                    bool meta) {
  ctl::FlowList q;
  q.only = only;
  q.start = start;
  q.max_rows = max_rows;
  q.meta = meta;
  q.rows.reserve(std::min(max_rows, ctl::kFlowListPageRows));
  auto r = ask(CtlRequest::make(std::move(q)), shard);
  return std::move(r->as<ctl::FlowList>());
}

void Management::add_rows(const ctl::FlowList& page, size_t shard, json& flows, json& listeners) {
  for (const FlowRow& row : page.rows) {
    if (row.listener) {
      listeners.push_back({{"id", row.id},
                           {"app", app_json(row.app)},
                           {"shard", shard},
                           {"transport", row.transport},
                           {"local", endpoint_str(row.tuple.local)}});
    } else {
      json f = flow_json(row);
      f["shard"] = shard;
      flows.push_back(std::move(f));
    }
  }
}

// The listing's position: the shard in the high bits, the position in its listing below.
namespace {
constexpr unsigned kShardShift = 24;
constexpr uint32_t kPosMask = (1u << kShardShift) - 1;
}  // namespace

json Management::flows(std::optional<uint32_t> start, std::optional<uint32_t> max_rows) {
  const bool paged = start || max_rows;
  const uint32_t want = max_rows.value_or(UINT32_MAX);  // rows in this answer
  uint32_t pos = start.value_or(0);
  json flows = json::array();
  json listeners = json::array();
  std::optional<ctl::FlowList> meta;  // the first page: its transports and bindings
  // The lcore's pages are short (ctl::kFlowListPageUs): as many as the answer needs.
  for (uint32_t got = 0; pos != transport::kNoFlow && got < want;) {
    const size_t shard = pos >> kShardShift;
    if (shard >= ctl_.size()) {  // past the end: the listing is complete
      pos = transport::kNoFlow;
      break;
    }
    ctl::FlowList page = flow_page(shard, transport::kNoFlow, pos & kPosMask,
                                   std::min(want - got, ctl::kFlowListPageRows), !meta);
    got += uint32_t(page.rows.size());
    add_rows(page, shard, flows, listeners);
    if (page.next != transport::kNoFlow) {
      pos = uint32_t(shard << kShardShift) | page.next;
    } else {
      pos = shard + 1 < ctl_.size() ? uint32_t((shard + 1) << kShardShift) : transport::kNoFlow;
    }
    if (!meta) meta = std::move(page);
  }
  if (!meta) meta.emplace();  // past the end: no page, nothing to say of transports
  json bindings = json::array();
  for (const FlowBinding& b : meta->bindings)
    bindings.push_back(binding_json(b));
  json out = {{"flows", flows},
              {"listeners", listeners},
              {"transports", meta->transports},
              {"bindings", bindings}};
  if (paged) out["next"] = pos == transport::kNoFlow ? json(nullptr) : json(pos);
  return out;
}

json Management::flow_show(uint32_t id) {
  for (size_t k = 0; k < ctl_.size(); k++) {
    auto r = flow_page(k, id, 0, 1);
    for (const FlowRow& row : r.rows) {
      if (row.listener || row.id != id) continue;
      json f = flow_json(row);
      f["shard"] = k;
      return f;
    }
  }
  throw MgmtError(mgmt::kErrNotFound, "no flow with id " + std::to_string(id));
}

json Management::attach(FlowBinding b) {
  // An empty transport keeps the port's: the dataplane resolves it and answers which.
  // Every shard keeps the bindings; shard 0 decides, the others follow (the same tables).
  ctl::BindingAttach q;
  q.binding = std::move(b);
  auto answer = ask(CtlRequest::make(ctl::BindingAttach(q)));
  const ctl::BindingAttach& r = answer->as<ctl::BindingAttach>();
  for (size_t k = 1; k < ctl_.size() && r.status == 0; k++) {
    if (int st = ask(CtlRequest::make(ctl::BindingAttach(q)), k)->as<ctl::BindingAttach>().status;
        st != 0) {
      spdlog::error("shard {} refused the binding shard 0 took ({})", k, st);
    }
  }
  if (r.status != 0) {
    std::string why =
        r.error.empty() ? "refused (error " + std::to_string(r.status) + ")" : r.error;
    throw MgmtError(mgmt::kErrBadRequest,
                    "cannot attach to " + binding_name(r.binding) + ": " + why);
  }
  std::string params;
  for (const auto& [k, v] : r.binding.params)
    params.append(" ").append(k).append(" ").append(v);
  std::string uid = r.binding.uid ? " for uid " + std::to_string(*r.binding.uid) : "";
  spdlog::info("{} bound to transport {}{}{}", binding_name(r.binding), r.binding.transport, params,
               uid);
  return binding_json(r.binding);
}

json Management::detach(FlowBinding key) {
  ctl::BindingDetach q;
  q.binding = std::move(key);
  auto answer = ask(CtlRequest::make(ctl::BindingDetach(q)));
  const ctl::BindingDetach& r = answer->as<ctl::BindingDetach>();
  for (size_t k = 1; k < ctl_.size() && r.status == 0; k++)
    ask(CtlRequest::make(ctl::BindingDetach(q)), k);
  if (r.status != 0) {
    throw MgmtError(mgmt::kErrNotFound, "no binding for " + binding_name(r.binding));
  }
  spdlog::info("{} unbound (flows that exist keep their transport and parameters)",
               binding_name(r.binding));
  return binding_json(r.binding);
}

json Management::transports() {
  std::map<std::string, std::pair<uint64_t, uint64_t>> counts;  // flows, listeners
  std::set<std::string> running;
  std::map<std::string, std::map<std::string, uint64_t>> stats;  // summed over the shards
  for (size_t k = 0; k < ctl_.size(); k++) {
    ctl::FlowList r;
    for (uint32_t pos = 0; pos != transport::kNoFlow; pos = r.next) {
      r = flow_page(k, transport::kNoFlow, pos, ctl::kFlowListPageRows, pos == 0);
      for (const FlowRow& row : r.rows) {
        auto& c = counts[row.transport];
        (row.listener ? c.second : c.first)++;
      }
      running.insert(r.transports.begin(), r.transports.end());
      for (const TransportStats& s : r.transport_stats) {
        for (const auto& [key, v] : s.numbers)
          stats[s.name][key] += v;
      }
    }
  }
  json out = json::array();
  for (const transport::Registry::Entry& e : transport::Registry::global().entries()) {
    // Counters over every flow the transport has had; empty until it runs.
    json st = json::object();
    for (const auto& [key, v] : stats[e.name])
      st[key] = v;
    out.push_back({{"name", e.name},
                   {"description", e.description},
                   {"origin", e.origin},
                   {"claims", e.claims},
                   {"instantiated", running.count(e.name) != 0},
                   {"flows", counts[e.name].first},
                   {"listeners", counts[e.name].second},
                   {"stats", st}});
  }
  return {{"transports", out}};
}

json Management::attach_transport(const std::string& path) {
  // cleaved's working directory means nothing to the operator: cleavectl sends absolute paths.
  if (!path.starts_with('/')) {
    throw MgmtError(mgmt::kErrBadRequest,
                    "transport.attach: the path must be absolute, got '" + path +
                        "' (cleavectl makes a relative path absolute against its own directory)");
  }
  // dlopen() here, on the main thread. The registry publishes the entry only once it is
  // complete, and the dataplane looks it up by name when a binding or an app first names it.
  transport::Registry& reg = transport::Registry::global();
  std::string name;
  try {
    name = reg.load(path);
  } catch (const std::exception& e) {
    throw MgmtError(mgmt::kErrBadRequest, std::string("cannot attach transport: ") + e.what());
  }
  spdlog::info("transport {} loaded from {}", name, path);
  for (const transport::Registry::Entry& e : reg.entries()) {
    if (e.name == name) {
      return {{"name", e.name}, {"description", e.description}, {"origin", e.origin}};
    }
  }
  return {{"name", name}, {"description", ""}, {"origin", path}};
}

}  // namespace cleave::dp
