// management.cc - management commands: status, ports, ARP, routes, stats, log level.
#include "management.h"

#include <rte_ethdev.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>

#include "app_server.h"
#include "cleave_version.h"
#include "log.h"
#include "mgmt_protocol.h"

namespace cleave::dp {

using nlohmann::json;

namespace {

constexpr auto kDataplaneTimeout = std::chrono::milliseconds(500);

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

}  // namespace

Management::Management(DaemonInfo info, const Config& cfg, const std::vector<DpPort>& ports,
                       const RouteTable& routes, CtlChannel& ctl)
    : info_(std::move(info)), cfg_(cfg), ports_(ports), routes_(routes), ctl_(ctl) {}

std::unique_ptr<CtlRequest> Management::ask(std::unique_ptr<CtlRequest> req) {
  auto answer = ctl_.call(std::move(req), kDataplaneTimeout);
  if (!answer) {
    throw MgmtError(mgmt::kErrUnavailable, "the dataplane did not answer within " +
                                               std::to_string(kDataplaneTimeout.count()) +
                                               " ms (is its lcore stuck?)");
  }
  return answer;
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
  if (command == "arp.show") return arp();
  if (command == "route.show") return routes();
  if (command == "route.get") return route_get(str_arg("addr", true));
  if (command == "stats.show") return stats();
  if (command == "nic.show") return nic(str_arg("name", false));
  if (command == "app.list" || command == "app.show") {
    if (apps_ == nullptr) throw MgmtError(mgmt::kErrUnavailable, "the app server is not running");
    if (command == "app.list") return apps_->list();
    if (!args.contains("id") || !args["id"].is_number_unsigned()) {
      throw MgmtError(mgmt::kErrBadRequest, "app.show: argument 'id' must be an app id (a number)");
    }
    return apps_->show(args["id"].get<uint32_t>());
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
  json dp = {{"lcore", info_.dataplane_lcore}};
  try {
    auto r = std::make_unique<CtlRequest>();
    r->op = CtlOp::kStats;
    r = ask(std::move(r));
    dp["state"] = "running";
    dp["iterations"] = r->stats.lcore.iterations;
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
          {"log_level", log_level()}};
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
         {"xstats", xstats_json(p.port_id)}});
  }
  if (!name.empty() && out.empty()) {
    throw MgmtError(mgmt::kErrNotFound, "no port named '" + name + "'");
  }
  return out;
}

json Management::nic(const std::string& name) {
  json out = json::array();
  for (size_t i = 0; i < ports_.size(); i++) {
    if (!name.empty() && name != ports_[i].name) continue;
    auto r = std::make_unique<CtlRequest>();
    r->op = CtlOp::kNic;
    r->nic_port = static_cast<uint8_t>(i);
    r->nic_counters.reserve(kMaxNicCounters);
    r = ask(std::move(r));
    if (!r->nic_found) continue;
    // nic_mem_<table>_bytes / _in_use and nic_mem_total_bytes become the memory table.
    constexpr std::string_view kMem = "nic_mem_", kBytes = "_bytes", kInUse = "_in_use";
    json counters = json::object();
    json tables = json::object();
    uint64_t total = 0;
    for (const NicCounterRow& c : r->nic_counters) {
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
    auto backend = static_cast<NicBackend>(r->nic_backend);
    out.push_back({{"name", ports_[i].name},
                   {"device", cfg_.ports[i].device},
                   {"backend", backend_name(backend)},
                   {"memory",
                    {{"where", backend == NicBackend::kCleave ? "nic" : "host"},
                     {"total_bytes", total},
                     {"tables", tables}}},
                   {"counters", counters},
                   {"truncated", r->nic_truncated}});
  }
  if (!name.empty() && out.empty()) {
    throw MgmtError(mgmt::kErrNotFound, "no port named '" + name + "'");
  }
  return out;
}

json Management::arp() {
  auto r = std::make_unique<CtlRequest>();
  r->op = CtlOp::kArpTable;
  r->arp.reserve(cfg_.arp.max_entries);
  r = ask(std::move(r));
  std::sort(r->arp.begin(), r->arp.end(), [](const ArpRow& a, const ArpRow& b) {
    return a.port != b.port ? a.port < b.port : a.ip < b.ip;
  });
  json rows = json::array();
  for (const ArpRow& a : r->arp) {
    rows.push_back({{"port", port_name(a.port)},
                    {"ip", a.ip.str()},
                    {"mac", mac_json(a.state, a.mac)},
                    {"state", arp_state_name(a.state)},
                    {"pinned", a.pinned},
                    {"age_ms", a.age_cycles * 1000 / std::max<uint64_t>(r->tsc_hz, 1)}});
  }
  return {{"entries", rows}, {"truncated", r->arp_truncated}, {"capacity", cfg_.arp.max_entries}};
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
  auto r = std::make_unique<CtlRequest>();
  r->op = CtlOp::kRouteGet;
  r->addr = *ip;
  r = ask(std::move(r));
  const RouteAnswer& a = r->route;
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
  auto r = std::make_unique<CtlRequest>();
  r->op = CtlOp::kStats;
  r = ask(std::move(r));
  const DataplaneStats& s = r->stats;
  const LcoreStats& l = s.lcore;
  uint64_t cycles = l.busy_cycles + l.idle_cycles;
  json lcore = {
      {"lcore", info_.dataplane_lcore},
      {"role", "dataplane"},
      {"iterations", l.iterations},
      {"busy_iterations", l.busy_iterations},
      {"busy_cycles", l.busy_cycles},
      {"idle_cycles", l.idle_cycles},
      {"busy_percent", cycles == 0 ? 0.0 : 100.0 * double(l.busy_cycles) / double(cycles)}};
  json ports = json::object();
  for (size_t i = 0; i < ports_.size(); i++) {
    const PortStats& p = s.ports[i];
    ports[ports_[i].name] = {{"rx_packets", p.rx_packets}, {"rx_bytes", p.rx_bytes},
                             {"tx_packets", p.tx_packets}, {"tx_bytes", p.tx_bytes},
                             {"to_kernel", p.to_kernel},   {"from_kernel", p.from_kernel},
                             {"absorbed", p.absorbed}};
  }
  const ProtoStats& pr = s.proto;
  json drops = json::object();
  uint64_t total = 0;
  for (size_t i = 0; i < s.drops.size(); i++) {
    drops[std::string(kDropNames[i])] = s.drops[i];
    total += s.drops[i];
  }
  return {
      {"tsc_hz", r->tsc_hz},
      {"lcores", json::array({lcore})},
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
      {"drops", drops},
      {"drops_total", total}};
}

}  // namespace cleave::dp
