// config.cc - YAML loading and whole-file validation of cleaved's configuration.
//
// yaml-cpp 0.7 accepts duplicate keys and reports conversions only as "bad conversion", so this
// file walks every mapping itself: unknown and duplicate keys, types, ranges and cross-field
// rules each get a message at the node's position. A null value (`key:` or `key: ~`) means
// "not given": the default applies.
#include "config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <tuple>
#include <utility>

#include "flow_info.h"  // kMaxTupleBindings
#include "stats.h"      // kMaxPorts: the dataplane keeps counters for that many ports

namespace cleave::dp {

std::string ConfigError::str() const {
  if (line == 0) return file + ": " + message;
  return file + ":" + std::to_string(line) + ":" + std::to_string(col) + ": " + message;
}

namespace {

constexpr size_t kMaxIfNameLen = 15;  // IFNAMSIZ - 1

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

bool is_ifname(std::string_view s) {
  return !s.empty() && s.size() <= kMaxIfNameLen &&
         std::all_of(s.begin(), s.end(), [](char c) { return is_name_char(c) || c == '.'; });
}

// Collects errors for one file; every check reads one node and reports at its position.
class Checker {
 public:
  Checker(std::string_view file, std::vector<ConfigError>& errors) : file_(file), errors_(errors) {}

  void error(const YAML::Mark& m, std::string msg) {
    // yaml-cpp marks are 0-based; a mark of -1 means "no position".
    errors_.push_back(
        {file_, m.line < 0 ? 1 : m.line + 1, m.column < 0 ? 1 : m.column + 1, std::move(msg)});
  }
  void error(const YAML::Node& n, std::string msg) { error(n.Mark(), std::move(msg)); }

  // Checks that n is a mapping whose keys are all in `allowed`, each at most once.
  bool mapping(const YAML::Node& n, const std::string& what,
               std::initializer_list<std::string_view> allowed) {
    if (!n.IsMap()) {
      error(n, what + ": expected a mapping of keys to values");
      return false;
    }
    std::map<std::string, YAML::Mark> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      YAML::Node key = it->first;  // a copy: `it->` is a proxy temporary
      if (!key.IsScalar()) {
        error(key, what + ": keys must be plain names");
        continue;
      }
      const std::string& k = key.Scalar();
      auto [prev, fresh] = seen.emplace(k, key.Mark());
      if (!fresh) {
        error(key, "duplicate key '" + join(what, k) + "' (first given at line " +
                       std::to_string(prev->second.line + 1) + ")");
      } else if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string list;
        for (auto a : allowed)
          list += (list.empty() ? "" : ", ") + std::string(a);
        error(key, "unknown key '" + join(what, k) + "' (expected one of: " + list + ")");
      }
    }
    return true;
  }

  // An undefined node: "not given". (A default-constructed YAML::Node is a defined null.)
  static YAML::Node absent() { return YAML::Node(YAML::NodeType::Undefined); }

  // Returns the value at key, or absent() when the key is missing or its value is null.
  static YAML::Node value(const YAML::Node& map, std::string_view key) {
    const YAML::Node& m = map;
    YAML::Node v = m[std::string(key)];
    if (!v.IsDefined() || v.IsNull()) return absent();
    return v;
  }

  bool scalar(const YAML::Node& v, const std::string& what, std::string_view expected) {
    if (v.IsScalar()) return true;
    error(v, what + ": expected " + std::string(expected) + ", got a " +
                 (v.IsMap() ? "mapping" : "list"));
    return false;
  }

  template <typename T>
  void number(const YAML::Node& map, std::string_view key, const std::string& path, T& out,
              uint64_t lo, uint64_t hi) {
    YAML::Node v = value(map, key);
    std::string what = join(path, key);
    std::string expect = "an integer from " + std::to_string(lo) + " to " + std::to_string(hi);
    if (!v.IsDefined() || !scalar(v, what, expect)) return;
    const std::string& s = v.Scalar();
    uint64_t x = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec != std::errc{} || end != s.data() + s.size() || x < lo || x > hi) {
      error(v, what + ": expected " + expect + ", got '" + s + "'");
      return;
    }
    out = static_cast<T>(x);
  }

  void boolean(const YAML::Node& map, std::string_view key, const std::string& path, bool& out) {
    YAML::Node v = value(map, key);
    std::string what = join(path, key);
    if (!v.IsDefined() || !scalar(v, what, "true or false")) return;
    if (v.Scalar() == "true") {
      out = true;
    } else if (v.Scalar() == "false") {
      out = false;
    } else {
      error(v, what + ": expected true or false, got '" + v.Scalar() + "'");
    }
  }

  // A probability in [0, 1], as a decimal number.
  void probability(const YAML::Node& map, std::string_view key, const std::string& path,
                   double& out) {
    YAML::Node v = value(map, key);
    std::string what = join(path, key);
    const std::string expect = "a probability from 0 to 1, such as 0.01";
    if (!v.IsDefined() || !scalar(v, what, expect)) return;
    const std::string& s = v.Scalar();
    double x = 0;
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), x);
    if (ec != std::errc{} || end != s.data() + s.size() || fault_probability_error(x)) {
      error(v, what + ": expected " + expect + ", got '" + s + "'");
      return;
    }
    out = x;
  }

  // A non-empty string; returns the node so callers can report format errors at it.
  YAML::Node string(const YAML::Node& map, std::string_view key, const std::string& path,
                    std::string& out) {
    YAML::Node v = value(map, key);
    if (!v.IsDefined() || !scalar(v, join(path, key), "a string")) return absent();
    if (v.Scalar().empty()) {
      error(v, join(path, key) + ": must not be empty");
      return absent();
    }
    out = v.Scalar();
    return v;
  }

  template <typename E>
  void choice(const YAML::Node& map, std::string_view key, const std::string& path, E& out,
              std::initializer_list<std::pair<std::string_view, E>> options) {
    YAML::Node v = value(map, key);
    std::string what = join(path, key);
    std::string list;
    for (auto& [name, e] : options)
      list += (list.empty() ? "" : ", ") + std::string(name);
    if (!v.IsDefined() || !scalar(v, what, "one of " + list)) return;
    for (auto& [name, e] : options) {
      if (v.Scalar() == name) {
        out = e;
        return;
      }
    }
    error(v, what + ": expected one of " + list + ", got '" + v.Scalar() + "'");
  }

  void required(const YAML::Node& map, std::string_view key, const std::string& path) {
    if (!value(map, key).IsDefined()) {
      error(map,
            (path.empty() ? "" : path + ": ") + "missing required key '" + std::string(key) + "'");
    }
  }

  static std::string join(const std::string& path, std::string_view key) {
    return path.empty() ? std::string(key) : path + "." + std::string(key);
  }

 private:
  std::string file_;
  std::vector<ConfigError>& errors_;
};

void check_log(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "log", {"level", "format"})) return;
  c.choice<std::string>(n, "level", "log", cfg.log.level,
                        {{"trace", "trace"},
                         {"debug", "debug"},
                         {"info", "info"},
                         {"warn", "warn"},
                         {"error", "error"},
                         {"critical", "critical"},
                         {"off", "off"}});
  c.choice(n, "format", "log", cfg.log.format,
           {{"auto", LogFormat::kAuto},
            {"journald", LogFormat::kJournald},
            {"plain", LogFormat::kPlain}});
}

void check_eal(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "eal",
                 {"main_lcore", "hugepages", "memory_mb", "file_prefix", "telemetry", "args"})) {
    return;
  }
  c.number(n, "main_lcore", "eal", cfg.eal.main_lcore, 0, 1023);
  c.choice(n, "hugepages", "eal", cfg.eal.hugepages,
           {{"auto", HugepageMode::kAuto}, {"on", HugepageMode::kOn}, {"off", HugepageMode::kOff}});
  c.number(n, "memory_mb", "eal", cfg.eal.memory_mb, 64, 1 << 20);
  if (YAML::Node v = c.string(n, "file_prefix", "eal", cfg.eal.file_prefix); v.IsDefined()) {
    const std::string& p = cfg.eal.file_prefix;
    if (!std::all_of(p.begin(), p.end(), is_name_char)) {
      c.error(v, "eal.file_prefix: only letters, digits, '_' and '-' are allowed, got '" + p + "'");
    }
  }
  c.boolean(n, "telemetry", "eal", cfg.eal.telemetry);
  if (YAML::Node args = Checker::value(n, "args"); args.IsDefined()) {
    if (!args.IsSequence()) {
      c.error(args, "eal.args: expected a list of strings");
      return;
    }
    for (const YAML::Node& a : args) {
      if (c.scalar(a, "eal.args", "a string")) cfg.eal.args.push_back(a.Scalar());
    }
  }
}

// An lcore: "N" or "N@C" (lcore N on CPU C).
std::optional<LcoreSpec> parse_lcore(Checker& c, const YAML::Node& v, const std::string& what) {
  const std::string expect = "an lcore number (0-1023), or LCORE@CPU such as 2@1";
  if (!c.scalar(v, what, expect)) return std::nullopt;
  const std::string& s = v.Scalar();
  auto num = [](std::string_view t, uint32_t& out) {
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), out);
    return !t.empty() && ec == std::errc{} && end == t.data() + t.size() && out <= 1023;
  };
  LcoreSpec l;
  const size_t at = s.find('@');
  uint32_t cpu = 0;
  if (!num(std::string_view(s).substr(0, at), l.lcore) ||
      (at != std::string::npos && !num(std::string_view(s).substr(at + 1), cpu))) {
    c.error(v, what + ": expected " + expect + ", got '" + s + "'");
    return std::nullopt;
  }
  if (at != std::string::npos) l.cpu = cpu;
  return l;
}

void check_dataplane(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "dataplane",
                 {"lcore", "lcores", "burst", "rx_descriptors", "tx_descriptors", "mbufs",
                  "idle_sleep_us"})) {
    return;
  }
  auto& d = cfg.dataplane;
  YAML::Node one = Checker::value(n, "lcore");
  YAML::Node many = Checker::value(n, "lcores");
  if (one.IsDefined() && many.IsDefined()) {
    c.error(many,
            "dataplane.lcores: give dataplane.lcore (one shard) or dataplane.lcores, not both");
  } else if (one.IsDefined()) {
    if (auto l = parse_lcore(c, one, "dataplane.lcore")) d.lcores = {*l};
  } else if (many.IsDefined()) {
    if (!many.IsSequence() || many.size() == 0 || many.size() > kMaxShards) {
      c.error(many, "dataplane.lcores: expected a list of 1 to " + std::to_string(kMaxShards) +
                        " lcores (one shard each)");
    } else {
      d.lcores.clear();
      for (size_t i = 0; i < many.size(); i++) {
        if (auto l = parse_lcore(c, many[i], "dataplane.lcores[" + std::to_string(i) + "]")) {
          d.lcores.push_back(*l);
        }
      }
    }
  }
  c.number(n, "burst", "dataplane", d.burst, 1, 512);
  c.number(n, "rx_descriptors", "dataplane", d.rx_descriptors, 64, 16384);
  c.number(n, "tx_descriptors", "dataplane", d.tx_descriptors, 64, 16384);
  c.number(n, "mbufs", "dataplane", d.mbufs, 1023, (1 << 24) - 1);
  c.number(n, "idle_sleep_us", "dataplane", d.idle_sleep_us, 0, 100000);
}

}  // namespace

std::string LcoreSpec::str() const {
  return std::to_string(lcore) + (cpu ? "@" + std::to_string(*cpu) : "");
}

namespace {

void check_arp(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "arp",
                 {"max_entries", "reachable_ms", "retry_ms", "retries", "failed_hold_ms"})) {
    return;
  }
  auto& a = cfg.arp;
  c.number(n, "max_entries", "arp", a.max_entries, 16, 1 << 20);
  c.number(n, "reachable_ms", "arp", a.reachable_ms, 1000, 3600000);
  c.number(n, "retry_ms", "arp", a.retry_ms, 10, 60000);
  c.number(n, "retries", "arp", a.retries, 1, 100);
  c.number(n, "failed_hold_ms", "arp", a.failed_hold_ms, 0, 3600000);
}

void check_tcp(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "tcp", {"max_time_wait"})) return;
  c.number(n, "max_time_wait", "tcp", cfg.tcp.max_time_wait, 0, 1 << 22);
}

void check_nic(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "nic", {"max_flows", "max_mrs", "ms_committed", "ms_store", "service_lcore"}))
    return;
  auto& g = cfg.nic;
  if (YAML::Node v = Checker::value(n, "service_lcore"); v.IsDefined()) {
    g.service_lcore = parse_lcore(c, v, "nic.service_lcore");
  }
  c.number(n, "max_flows", "nic", g.max_flows, 1, 1 << 22);
  c.number(n, "max_mrs", "nic", g.max_mrs, 1, 65535);
  c.number(n, "ms_committed", "nic", g.ms_committed, 16, 1 << 16);
  c.number(n, "ms_store", "nic", g.ms_store, 0, 1 << 26);
  for (auto [key, v] : {std::pair{"ms_committed", g.ms_committed}, {"ms_store", g.ms_store}}) {
    if (v % 16 != 0) {
      c.error(Checker::value(n, key), std::string("nic.") + key +
                                          ": expected a multiple of 16 (the MS chunk), got " +
                                          std::to_string(v));
    }
  }
}

void check_rocev2(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "rocev2", {"cnp_dscp"})) return;
  c.number(n, "cnp_dscp", "rocev2", cfg.rocev2.cnp_dscp, 0, 63);
}

// The first of `keys` given in mapping n, else n itself: where a cross-field error is reported.
YAML::Node first_of(const YAML::Node& n, std::initializer_list<std::string_view> keys) {
  for (auto key : keys) {
    if (YAML::Node v = Checker::value(n, key); v.IsDefined()) return v;
  }
  return n;
}

void check_quota(Checker& c, const YAML::Node& n, const std::string& path, AppQuota& q) {
  if (!c.mapping(
          n, path,
          {"memory_mb", "region_mb", "pipes", "mrs", "flows", "pipe_entries", "error_budget"})) {
    return;
  }
  c.number(n, "memory_mb", path, q.memory_mb, 1, 1 << 20);
  c.number(n, "region_mb", path, q.region_mb, 1, 1 << 16);
  c.number(n, "pipes", path, q.pipes, 3, 4096);
  c.number(n, "mrs", path, q.mrs, 0, 1024);
  c.number(n, "flows", path, q.flows, 0, 1 << 20);
  c.number(n, "pipe_entries", path, q.pipe_entries, 64, 65536);
  c.number(n, "error_budget", path, q.error_budget, 1, 1 << 20);
  if ((q.pipe_entries & (q.pipe_entries - 1)) != 0) {
    c.error(Checker::value(n, "pipe_entries"),
            path + ".pipe_entries: expected a power of two, got " + std::to_string(q.pipe_entries));
  }
  if (q.region_mb > q.memory_mb) {
    c.error(first_of(n, {"region_mb", "memory_mb"}),
            path + ".region_mb: " + std::to_string(q.region_mb) + " MB does not fit in memory_mb " +
                std::to_string(q.memory_mb) + " MB");
  }
}

// A per-uid cap must fit in its total.
void check_per_uid(Checker& c, const YAML::Node& n, const std::string& path, std::string_view key,
                   uint32_t per_uid, std::string_view total_key, uint32_t total) {
  if (per_uid <= total) return;
  c.error(first_of(n, {key, total_key}),
          path + "." + std::string(key) + ": " + std::to_string(per_uid) + " is more than " +
              std::string(total_key) + " (" + std::to_string(total) + ")");
}

void check_management(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "management", {"max_clients", "max_clients_per_uid", "requests_per_turn"}))
    return;
  auto& m = cfg.management;
  c.number(n, "max_clients", "management", m.max_clients, 1, 4096);
  c.number(n, "max_clients_per_uid", "management", m.max_clients_per_uid, 1, 4096);
  c.number(n, "requests_per_turn", "management", m.requests_per_turn, 1, 4096);
  check_per_uid(c, n, "management", "max_clients_per_uid", m.max_clients_per_uid, "max_clients",
                m.max_clients);
}

void check_apps(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "apps",
                 {"max_apps", "budget", "max_pending", "max_pending_per_uid", "quota", "allow"}))
    return;
  auto& a = cfg.apps;
  c.number(n, "max_apps", "apps", a.max_apps, 1, 4096);
  c.number(n, "budget", "apps", a.budget, 1, 4096);
  c.number(n, "max_pending", "apps", a.max_pending, 1, 4096);
  c.number(n, "max_pending_per_uid", "apps", a.max_pending_per_uid, 1, 4096);
  check_per_uid(c, n, "apps", "max_pending_per_uid", a.max_pending_per_uid, "max_pending",
                a.max_pending);
  if (YAML::Node q = Checker::value(n, "quota"); q.IsDefined()) {
    check_quota(c, q, "apps.quota", a.quota);
  }
  a.allow.assign(1, AppRule{0, std::nullopt, a.quota});
  YAML::Node allow = Checker::value(n, "allow");
  if (!allow.IsDefined()) return;
  if (!allow.IsSequence()) {
    c.error(allow, "apps.allow: expected a list of {uid: N} or {gid: N} rules");
    return;
  }
  a.allow.clear();
  for (size_t i = 0; i < allow.size(); i++) {
    std::string path = "apps.allow[" + std::to_string(i) + "]";
    YAML::Node r = allow[i];
    AppRule rule{std::nullopt, std::nullopt, a.quota};
    if (!c.mapping(r, path, {"uid", "gid", "quota"})) continue;
    uint32_t id = 0;
    if (Checker::value(r, "uid").IsDefined()) {
      c.number(r, "uid", path, id, 0, UINT32_MAX - 1);
      rule.uid = id;
    }
    if (Checker::value(r, "gid").IsDefined()) {
      c.number(r, "gid", path, id, 0, UINT32_MAX - 1);
      rule.gid = id;
    }
    if (rule.uid.has_value() == rule.gid.has_value()) {
      c.error(r, path + ": give exactly one of uid or gid");
    }
    if (YAML::Node q = Checker::value(r, "quota"); q.IsDefined()) {
      check_quota(c, q, path + ".quota", rule.quota);
    }
    a.allow.push_back(rule);
  }
}

std::optional<Ipv4> ipv4_value(Checker& c, const YAML::Node& map, std::string_view key,
                               const std::string& path) {
  std::string s;
  YAML::Node v = c.string(map, key, path, s);
  if (!v.IsDefined()) return std::nullopt;
  auto a = Ipv4::parse(s);
  if (!a) c.error(v, Checker::join(path, key) + ": expected an IPv4 address, got '" + s + "'");
  return a;
}

void check_route(Checker& c, const YAML::Node& n, const std::string& path, const PortConfig& port,
                 std::vector<Route>& out) {
  if (!c.mapping(n, path, {"dst", "via"})) return;
  c.required(n, "dst", path);
  c.required(n, "via", path);
  Route r;
  bool ok = true;
  std::string s;
  if (YAML::Node v = c.string(n, "dst", path, s); v.IsDefined()) {
    auto p = Ipv4Prefix::parse(s, true);
    if (!p) {
      c.error(v, path + ".dst: expected a prefix such as 10.1.0.0/16, got '" + s + "'");
      ok = false;
    } else if (p->network() != p->addr) {
      c.error(v, path + ".dst: '" + s + "' has host bits set; did you mean " +
                     Ipv4Prefix{p->network(), p->len}.str() + "?");
      ok = false;
    } else {
      r.dst = *p;
    }
  } else {
    ok = false;
  }
  if (auto via = ipv4_value(c, n, "via", path)) {
    if (port.ipv4.len != 0 && !port.ipv4.contains(*via)) {
      c.error(Checker::value(n, "via"),
              path + ".via: " + via->str() + " is not on-link for port '" + port.name + "' (" +
                  port.ipv4.network().str() + "/" + std::to_string(port.ipv4.len) + ")");
      ok = false;
    }
    r.via = *via;
  } else {
    ok = false;
  }
  if (ok) out.push_back(r);
}

// faults: {seed, rx: {loss, reorder, duplicate}, tx: {...}}: seeded wire faults of a port.
void check_faults(Checker& c, const YAML::Node& n, const std::string& path, PortConfig& p) {
  if (!c.mapping(n, path, {"seed", "rx", "tx"})) return;
  uint64_t seed = 1;
  c.number(n, "seed", path, seed, 0, UINT64_MAX);
  for (auto [key, dir] : {std::pair{"rx", FaultDir::kRx}, {"tx", FaultDir::kTx}}) {
    FaultParams& f = p.faults[size_t(dir)];
    f.seed = seed;
    YAML::Node d = Checker::value(n, key);
    if (!d.IsDefined()) continue;
    const std::string what = Checker::join(path, key);
    if (!c.mapping(d, what, {"loss", "reorder", "duplicate"})) continue;
    c.probability(d, "loss", what, f.loss);
    c.probability(d, "reorder", what, f.reorder);
    c.probability(d, "duplicate", what, f.duplicate);
  }
}

void check_port(Checker& c, const YAML::Node& n, const std::string& path, PortConfig& p) {
  if (!c.mapping(n, path,
                 {"name", "device", "mac", "mtu", "ipv4", "gateway", "routes", "exception_tap",
                  "faults"})) {
    return;
  }
  c.required(n, "name", path);
  c.required(n, "device", path);
  c.required(n, "ipv4", path);
  if (YAML::Node v = c.string(n, "name", path, p.name); v.IsDefined()) {
    if (p.name.size() > kMaxIfNameLen || !std::all_of(p.name.begin(), p.name.end(), is_name_char)) {
      c.error(v, path + ".name: use up to 15 letters, digits, '_' or '-', got '" + p.name + "'");
    }
  }
  c.string(n, "device", path, p.device);
  std::string s;
  if (YAML::Node v = c.string(n, "mac", path, s); v.IsDefined()) {
    auto m = Mac::parse(s);
    if (!m) {
      c.error(v, path + ".mac: expected an address such as 02:00:00:00:00:01, got '" + s + "'");
    } else if (m->is_multicast() || m->is_zero()) {
      c.error(v, path + ".mac: " + s + " is not a unicast address");
    } else {
      p.mac = m;
    }
  }
  c.number(n, "mtu", path, p.mtu, 68, 9000);
  if (YAML::Node v = c.string(n, "ipv4", path, s); v.IsDefined()) {
    auto pre = Ipv4Prefix::parse(s, true);
    if (!pre || pre->len == 0) {
      c.error(v,
              path + ".ipv4: expected address/prefix-length such as 10.0.0.1/24, got '" + s + "'");
    } else if (pre->addr.host == 0 || (pre->addr.host >> 28) >= 0xe) {
      c.error(v, path + ".ipv4: " + pre->addr.str() + " cannot be an interface address");
    } else if (pre->len < 31 && (pre->addr == pre->network() ||
                                 pre->addr.host == (pre->network().host | ~pre->mask()))) {
      c.error(v, path + ".ipv4: " + pre->addr.str() + " is the network or broadcast address of " +
                     pre->network().str() + "/" + std::to_string(pre->len));
    } else {
      p.ipv4 = *pre;
    }
  }
  if (auto gw = ipv4_value(c, n, "gateway", path)) {
    YAML::Node v = Checker::value(n, "gateway");
    if (p.ipv4.len != 0 && !p.ipv4.contains(*gw)) {
      c.error(v, path + ".gateway: " + gw->str() + " is not on-link for " + p.ipv4.str());
    } else if (p.ipv4.len != 0 && *gw == p.ipv4.addr) {
      c.error(v, path + ".gateway: " + gw->str() + " is this port's own address");
    } else {
      p.gateway = gw;
    }
  }
  if (YAML::Node routes = Checker::value(n, "routes"); routes.IsDefined()) {
    if (!routes.IsSequence()) {
      c.error(routes, path + ".routes: expected a list of {dst, via}");
    } else {
      for (size_t i = 0; i < routes.size(); i++) {
        check_route(c, routes[i], path + ".routes[" + std::to_string(i) + "]", p, p.routes);
      }
    }
  }
  if (YAML::Node v = c.string(n, "exception_tap", path, p.exception_tap); v.IsDefined()) {
    if (!is_ifname(p.exception_tap)) {
      c.error(v, path + ".exception_tap: not a valid interface name: '" + p.exception_tap + "'");
    }
  }
  if (YAML::Node f = Checker::value(n, "faults"); f.IsDefined()) {
    check_faults(c, f, path + ".faults", p);
  }
}

// Rules that span ports: unique names, devices, taps and prefixes; one default gateway.
void check_ports_together(Checker& c, const YAML::Node& seq, const std::vector<PortConfig>& ports) {
  const PortConfig* gw_port = nullptr;
  for (size_t i = 0; i < ports.size(); i++) {
    const PortConfig& p = ports[i];
    const YAML::Node& n = seq[i];
    std::string path = "ports[" + std::to_string(i) + "]";
    for (size_t j = 0; j < i; j++) {
      const PortConfig& q = ports[j];
      if (!p.name.empty() && p.name == q.name) {
        c.error(
            Checker::value(n, "name"),
            path + ".name: '" + p.name + "' is already used by ports[" + std::to_string(j) + "]");
      }
      if (!p.device.empty() && p.device == q.device) {
        c.error(Checker::value(n, "device"),
                path + ".device: '" + p.device + "' is already used by port '" + q.name + "'");
      }
      if (!p.exception_tap.empty() && p.exception_tap == q.exception_tap) {
        c.error(Checker::value(n, "exception_tap"), path + ".exception_tap: '" + p.exception_tap +
                                                        "' is already used by port '" + q.name +
                                                        "'");
      }
      if (p.ipv4.len != 0 && q.ipv4.len != 0 &&
          (p.ipv4.contains(q.ipv4.addr) || q.ipv4.contains(p.ipv4.addr))) {
        c.error(Checker::value(n, "ipv4"), path + ".ipv4: " + p.ipv4.str() + " overlaps port '" +
                                               q.name + "' (" + q.ipv4.str() + ")");
      }
    }
    if (p.gateway) {
      if (gw_port != nullptr) {
        c.error(Checker::value(n, "gateway"),
                path + ".gateway: port '" + gw_port->name + "' already has the default gateway");
      }
      gw_port = &p;
    }
  }
}

ConfigPos pos_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return {m.line < 0 ? 1 : m.line + 1, m.column < 0 ? 1 : m.column + 1};
}

// transports: plugins are only named here (loaded at start-up, see transport_setup.h); bindings
// are read and checked for form, their transport and params when the plugins are loaded.
void check_transports(Checker& c, const YAML::Node& n, Config& cfg) {
  if (!c.mapping(n, "transports", {"plugins", "bindings"})) return;
  auto& t = cfg.transports;
  if (YAML::Node plugins = Checker::value(n, "plugins"); plugins.IsDefined()) {
    if (!plugins.IsSequence()) {
      c.error(plugins, "transports.plugins: expected a list of shared object paths");
    } else {
      for (size_t i = 0; i < plugins.size(); i++) {
        std::string what = "transports.plugins[" + std::to_string(i) + "]";
        YAML::Node v = plugins[i];
        if (v.IsNull() || (v.IsScalar() && v.Scalar().empty())) {
          c.error(v, what + ": expected a path to a shared object, got nothing");
          continue;
        }
        if (!c.scalar(v, what, "a path")) continue;
        auto same = std::find_if(t.plugins.begin(), t.plugins.end(),
                                 [&](const TransportPlugin& p) { return p.path == v.Scalar(); });
        if (same != t.plugins.end()) {
          c.error(v, what + ": '" + v.Scalar() + "' is already listed at line " +
                         std::to_string(same->pos.line));
          continue;
        }
        t.plugins.push_back({v.Scalar(), pos_of(v)});
      }
    }
  }
  YAML::Node bindings = Checker::value(n, "bindings");
  if (!bindings.IsDefined()) return;
  if (!bindings.IsSequence()) {
    c.error(bindings,
            "transports.bindings: expected a list of {port or tuple, uid, transport, params}");
    return;
  }
  for (size_t i = 0; i < bindings.size(); i++) {
    std::string path = "transports.bindings[" + std::to_string(i) + "]";
    YAML::Node b = bindings[i];
    if (!c.mapping(b, path, {"port", "tuple", "uid", "transport", "params"})) continue;
    TransportBinding tb;
    tb.pos = tb.transport_pos = tb.params_pos = pos_of(b);
    const YAML::Node tuple = Checker::value(b, "tuple");
    if (tuple.IsDefined() == Checker::value(b, "port").IsDefined()) {
      c.error(b, path + ": give one of port (a port binding) and tuple (a tuple binding)");
      continue;
    }
    c.number(b, "port", path, tb.port, 1, 65535);
    if (tuple.IsDefined() && c.mapping(tuple, path + ".tuple", {"local", "remote"})) {
      bool ok = true;
      for (const char* key : {"local", "remote"}) {
        const std::string what = path + ".tuple." + key;
        YAML::Node v = Checker::value(tuple, key);
        if (!v.IsDefined()) {
          c.error(tuple, what + ": missing (\"ip:port\", * for any address or port)");
          ok = false;
          continue;
        }
        if (!c.scalar(v, what, "\"ip:port\"")) {
          ok = false;
          continue;
        }
        auto e = WildEndpoint::parse(v.Scalar());
        if (!e) {
          c.error(v, what +
                         ": expected \"ip:port\" (an IPv4 address or *, a port from 1 to "
                         "65535 or *; quote a value that starts with *), got '" +
                         v.Scalar() + "'");
          ok = false;
          continue;
        }
        (std::string_view(key) == "local" ? tb.local : tb.remote) = *e;
      }
      tb.tuple = ok;
      if (!ok) continue;
    } else if (tuple.IsDefined()) {
      continue;
    }
    if (Checker::value(b, "uid").IsDefined()) {
      uint32_t uid = UINT32_MAX;
      c.number(b, "uid", path, uid, 0, UINT32_MAX - 1);
      if (uid != UINT32_MAX) tb.uid = uid;
    }
    if (YAML::Node v = c.string(b, "transport", path, tb.transport); v.IsDefined()) {
      tb.transport_pos = pos_of(v);
    }
    if (YAML::Node params = Checker::value(b, "params"); params.IsDefined()) {
      tb.params_pos = pos_of(params);
      if (!params.IsMap()) {
        c.error(params, path + ".params: expected a mapping of parameter names to values");
      } else {
        for (auto it = params.begin(); it != params.end(); ++it) {
          YAML::Node key = it->first;
          YAML::Node value = it->second;
          if (!key.IsScalar() || key.Scalar().empty()) {
            c.error(key, path + ".params: keys must be plain names");
            continue;
          }
          std::string what = path + ".params." + key.Scalar();
          if (!value.IsScalar()) {
            c.error(value, what + ": expected a value such as cubic or 10, got " +
                               (value.IsMap()        ? "a mapping"
                                : value.IsSequence() ? "a list"
                                                     : "nothing"));
            continue;
          }
          auto same = std::find_if(tb.params.begin(), tb.params.end(),
                                   [&](const auto& kv) { return kv.first == key.Scalar(); });
          if (same != tb.params.end()) {
            c.error(key, "duplicate key '" + what + "'");
            continue;
          }
          tb.params.emplace_back(key.Scalar(), value.Scalar());
        }
      }
    }
    if (tb.tuple) {
      size_t tuples = 0;
      for (size_t j = 0; j < t.bindings.size(); j++) {
        const TransportBinding& o = t.bindings[j];
        tuples += o.tuple ? 1 : 0;
        if (o.tuple && o.local == tb.local && o.remote == tb.remote) {
          c.error(tuple, path + ".tuple: " + tb.local.str() + " " + tb.remote.str() +
                             " is already bound by transports.bindings[" + std::to_string(j) + "]");
        }
      }
      if (tuples == kMaxTupleBindings) {
        c.error(tuple, path + ".tuple: more than " + std::to_string(kMaxTupleBindings) +
                           " tuple bindings");
      }
      t.bindings.push_back(std::move(tb));
    } else if (tb.port != 0) {
      for (size_t j = 0; j < t.bindings.size(); j++) {
        if (!t.bindings[j].tuple && t.bindings[j].port == tb.port) {
          c.error(Checker::value(b, "port"), path + ".port: " + std::to_string(tb.port) +
                                                 " is already bound by transports.bindings[" +
                                                 std::to_string(j) + "]");
        }
      }
      t.bindings.push_back(std::move(tb));
    }
  }
}

// The first of several section.key values that the file gives, else the root: where to report
// an error that involves several keys, some of which may be defaults.
YAML::Node first_given(const YAML::Node& root,
                       std::initializer_list<std::pair<std::string_view, std::string_view>> keys) {
  for (auto [section, key] : keys) {
    YAML::Node s = Checker::value(root, section);
    if (!s.IsDefined() || !s.IsMap()) continue;
    if (YAML::Node v = Checker::value(s, key); v.IsDefined()) return v;
  }
  return root;
}

}  // namespace

ConfigResult parse_config(std::string_view text, std::string_view name) {
  ConfigResult r;
  Checker c(name, r.errors);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    c.error(e.mark, "YAML syntax error: " + e.msg);
    return r;
  }
  if (!root.IsDefined() || root.IsNull()) {
    r.errors.push_back(
        {std::string(name), 1, 1, "the configuration is empty: 'ports' is required"});
    return r;
  }
  Config cfg;
  cfg.source = name;
  if (!c.mapping(root, "",
                 {"runtime_dir", "log", "eal", "dataplane", "arp", "nic", "tcp", "management",
                  "apps", "transports", "rocev2", "ports"}))
    return r;

  if (YAML::Node v = c.string(root, "runtime_dir", "", cfg.runtime_dir); v.IsDefined()) {
    if (cfg.runtime_dir[0] != '/' || cfg.runtime_dir.size() > 80) {
      c.error(v, "runtime_dir: expected an absolute path of at most 80 characters, got '" +
                     cfg.runtime_dir + "'");
    }
  }
  if (YAML::Node n = Checker::value(root, "log"); n.IsDefined()) check_log(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "eal"); n.IsDefined()) check_eal(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "dataplane"); n.IsDefined()) check_dataplane(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "arp"); n.IsDefined()) check_arp(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "nic"); n.IsDefined()) check_nic(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "tcp"); n.IsDefined()) check_tcp(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "management"); n.IsDefined()) {
    check_management(c, n, cfg);
  }
  if (YAML::Node n = Checker::value(root, "apps"); n.IsDefined()) check_apps(c, n, cfg);
  if (YAML::Node n = Checker::value(root, "transports"); n.IsDefined()) {
    check_transports(c, n, cfg);
  }
  if (YAML::Node n = Checker::value(root, "rocev2"); n.IsDefined()) check_rocev2(c, n, cfg);

  // Every lcore has one role: the main thread, a shard, the NIC service.
  {
    std::map<uint32_t, std::string> roles{{cfg.eal.main_lcore, "eal.main_lcore"}};
    std::vector<std::pair<LcoreSpec, std::string>> wanted;
    for (size_t i = 0; i < cfg.dataplane.lcores.size(); i++)
      wanted.emplace_back(cfg.dataplane.lcores[i], "dataplane lcore " + std::to_string(i));
    if (cfg.nic.service_lcore) wanted.emplace_back(*cfg.nic.service_lcore, "nic.service_lcore");
    for (const auto& [l, role] : wanted) {
      auto [it, fresh] = roles.emplace(l.lcore, role);
      if (!fresh) {
        c.error(first_given(root, {{"dataplane", "lcores"},
                                   {"dataplane", "lcore"},
                                   {"nic", "service_lcore"},
                                   {"eal", "main_lcore"}}),
                role + ": lcore " + std::to_string(l.lcore) + " is also " + it->second +
                    "; each needs an lcore of its own (lcores may share a CPU: LCORE@CPU)");
      }
    }
  }

  YAML::Node ports = Checker::value(root, "ports");
  if (!ports.IsDefined()) {
    c.error(root, "missing required key 'ports' (at least one port)");
  } else if (!ports.IsSequence() || ports.size() == 0) {
    c.error(ports, "ports: expected a non-empty list of ports");
  } else if (ports.size() > kMaxPorts) {
    c.error(ports, "ports: at most " + std::to_string(kMaxPorts) + " ports are supported, got " +
                       std::to_string(ports.size()));
  } else {
    cfg.ports.resize(ports.size());
    for (size_t i = 0; i < ports.size(); i++) {
      check_port(c, ports[i], "ports[" + std::to_string(i) + "]", cfg.ports[i]);
    }
    check_ports_together(c, ports, cfg.ports);
    // Every RX ring full, every TX ring full, and a burst in flight per port and stage.
    const auto& d = cfg.dataplane;
    uint64_t per_port = uint64_t{d.rx_descriptors} + d.tx_descriptors + uint64_t{2} * d.burst;
    uint64_t need = cfg.ports.size() * per_port + uint64_t{4} * d.burst;
    // Exception taps are ports too: one RX ring and one TX ring each.
    for (const PortConfig& p : cfg.ports) {
      if (!p.exception_tap.empty()) {
        need += uint64_t{d.rx_descriptors} + d.tx_descriptors;
      }
    }
    if (cfg.dataplane.mbufs < need) {
      c.error(first_given(root, {{"dataplane", "mbufs"}, {"dataplane", "rx_descriptors"}}),
              "dataplane.mbufs: " + std::to_string(cfg.dataplane.mbufs) +
                  " packet buffers cannot fill the rings of " + std::to_string(cfg.ports.size()) +
                  " port(s); at least " + std::to_string(need) + " are needed");
    }
  }
  // Checks run by kind; an operator reads the file top to bottom.
  std::stable_sort(r.errors.begin(), r.errors.end(),
                   [](const ConfigError& a, const ConfigError& b) {
                     return std::tie(a.line, a.col) < std::tie(b.line, b.col);
                   });
  if (r.errors.empty()) r.config = std::move(cfg);
  return r;
}

ConfigResult load_config_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ConfigResult r;
    r.errors.push_back({path, 0, 0, std::string("cannot read file: ") + std::strerror(errno)});
    return r;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_config(ss.str(), path);
}

}  // namespace cleave::dp
