// telemetry.cc - /cleave/status, /cleave/ports, /cleave/stats and /cleave/nic on DPDK's telemetry
// socket.
//
// The callbacks run on DPDK's telemetry thread and go through Management, which reaches
// dataplane state only via the control channel. Telemetry dictionaries take only names of
// [A-Za-z0-9_/] and cannot hold arrays of objects, so the JSON is mapped: other characters
// become '_', arrays of objects become dictionaries keyed by their "name" (or index).
#include "control/telemetry.h"

#include <rte_telemetry.h>
#include <spdlog/spdlog.h>

#include <shared_mutex>
#include <string>

namespace cleave::dp {

using nlohmann::json;

namespace {

// Held shared by a running callback, so the daemon can withdraw Management safely.
std::shared_mutex g_mgmt_mu;
Management* g_mgmt = nullptr;

std::string tel_name(const std::string& s) {
  std::string out = s.substr(0, RTE_TEL_MAX_STRING_LEN - 1);
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '/';
    if (!ok) c = '_';
  }
  return out;
}

std::string tel_string(const json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  return s.substr(0, RTE_TEL_MAX_STRING_LEN - 1);
}

void fill_dict(rte_tel_data* d, const json& obj, int depth);

void add_value(rte_tel_data* d, const std::string& key, const json& v, int depth) {
  std::string name = tel_name(key);
  if (v.is_number_unsigned()) {
    rte_tel_data_add_dict_u64(d, name.c_str(), v.get<uint64_t>());
  } else if (v.is_number_integer()) {
    rte_tel_data_add_dict_int(d, name.c_str(), static_cast<int>(v.get<int64_t>()));
  } else if (v.is_boolean()) {
    rte_tel_data_add_dict_int(d, name.c_str(), v.get<bool>() ? 1 : 0);
  } else if ((v.is_object() || v.is_array()) && depth < 4) {
    rte_tel_data* sub = rte_tel_data_alloc();
    if (sub == nullptr) return;
    rte_tel_data_start_dict(sub);
    fill_dict(sub, v, depth + 1);
    if (rte_tel_data_add_dict_container(d, name.c_str(), sub, 0) != 0) rte_tel_data_free(sub);
  } else {
    rte_tel_data_add_dict_string(d, name.c_str(), tel_string(v).c_str());
  }
}

void fill_dict(rte_tel_data* d, const json& v, int depth) {
  if (v.is_object()) {
    for (const auto& [k, item] : v.items())
      add_value(d, k, item, depth);
    return;
  }
  for (size_t i = 0; i < v.size(); i++) {
    const json& item = v[i];
    std::string key = item.is_object() && item.contains("name") && item["name"].is_string()
                          ? item["name"].get<std::string>()
                          : std::to_string(i);
    add_value(d, key, item, depth);
  }
}

template <json (*Fn)(Management&)>
int handler(const char* /*cmd*/, const char* /*params*/, rte_tel_data* d) {
  std::shared_lock lock(g_mgmt_mu);
  Management* m = g_mgmt;
  rte_tel_data_start_dict(d);
  if (m == nullptr) {
    rte_tel_data_add_dict_string(d, "error", "cleaved is shutting down");
    return 0;
  }
  try {
    fill_dict(d, Fn(*m), 0);
  } catch (const std::exception& e) {
    rte_tel_data_add_dict_string(d, "error", tel_string(e.what()).c_str());
  }
  return 0;
}

json do_status(Management& m) {
  return m.status();
}
json do_ports(Management& m) {
  return m.ports("");
}
json do_stats(Management& m) {
  return m.stats();
}
json do_nic(Management& m) {
  return m.nic("");
}

}  // namespace

void register_telemetry(Management* m) {
  static bool registered = false;
  {
    std::unique_lock lock(g_mgmt_mu);
    g_mgmt = m;
  }
  if (registered || m == nullptr) return;
  registered = true;
  rte_telemetry_register_cmd("/cleave/status", handler<do_status>,
                             "cleaved status: version, uptime, dataplane state, ports up");
  rte_telemetry_register_cmd("/cleave/ports", handler<do_ports>,
                             "cleaved ports: address plan, link, NIC counters, xstats");
  rte_telemetry_register_cmd(
      "/cleave/stats", handler<do_stats>,
      "cleaved dataplane stats: lcore busy/idle, per port, ARP, ICMP, drops");
  rte_telemetry_register_cmd(
      "/cleave/nic", handler<do_nic>,
      "cleaved NICs per port: backend (cleave or generic), placement counters, table memory");
}

}  // namespace cleave::dp
