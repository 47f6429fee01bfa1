// cleavectl.cc - the operator's command line for cleaved, in the manner of iproute2:
//   cleavectl [-j] [-s SOCKET] OBJECT [VERB] [ARGS]
// Talks the management protocol (src/ipc/mgmt_protocol.h) over cleaved's unix socket.
// Exit codes: 0 success, 1 the daemon reported an error, 2 usage or connection error.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cleave_version.h"
#include "mgmt_protocol.h"
#include "stats.h"  // src/dataplane: the counters cleavectl names and explains

namespace {

using nlohmann::json;
namespace mgmt = cleave::mgmt;

constexpr int kExitOk = 0;
constexpr int kExitDaemonError = 1;
constexpr int kExitUsage = 2;
constexpr auto kAnswerTimeout = std::chrono::seconds(5);

// An error that ends the program with an exit code and a message on stderr.
struct Fatal {
  int code;
  std::string message;
};

// Connects on the first call, so usage errors found while building a request come first.
class Connection {
 public:
  explicit Connection(std::string path) : path_(std::move(path)) {}
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection() {
    if (fd_ >= 0) close(fd_);
  }

  // Sends one request and returns the result; daemon errors become Fatal{1}.
  json call(const std::string& command, const json& args = json::object()) {
    if (fd_ < 0) dial();
    json req = {
        {"version", mgmt::kProtocolVersion}, {"id", ++id_}, {"command", command}, {"args", args}};
    std::string line = req.dump() + "\n";
    for (size_t off = 0; off < line.size();) {
      ssize_t n = send(fd_, line.data() + off, line.size() - off, MSG_NOSIGNAL);
      if (n < 0) {
        throw Fatal{kExitUsage,
                    std::string("lost the connection to cleaved: ") + std::strerror(errno)};
      }
      off += static_cast<size_t>(n);
    }
    json ans = read_answer();
    if (!ans.is_object() || !ans.contains("ok")) {
      throw Fatal{kExitUsage, "cleaved sent an answer this cleavectl does not understand"};
    }
    if (!ans["ok"].get<bool>()) {
      const json& e = ans["error"];
      std::string msg = e.is_object() && e.contains("message") ? e["message"].get<std::string>()
                                                               : "unspecified error";
      throw Fatal{kExitDaemonError, msg};
    }
    return ans["result"];
  }

 private:
  void dial() {
    const std::string& path = path_;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path)
      throw Fatal{kExitUsage, "socket path too long: " + path};
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw Fatal{kExitUsage, std::string("socket: ") + std::strerror(errno)};
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      int err = errno;
      close(fd_);
      fd_ = -1;
      std::string hint;
      if (err == ENOENT) {
        hint = "is cleaved running? Check 'systemctl status cleaved', or give its socket with -s";
      } else if (err == ECONNREFUSED) {
        hint =
            "nothing listens there: cleaved has stopped (a stale socket), or -s names the "
            "wrong file";
      } else if (err == EACCES) {
        hint = "run as root or as a member of the socket's group";
      }
      throw Fatal{kExitUsage, "cannot connect to cleaved at " + path + ": " + std::strerror(err) +
                                  (hint.empty() ? "" : "\n  " + hint)};
    }
  }

  json read_answer() {
    auto deadline = std::chrono::steady_clock::now() + kAnswerTimeout;
    for (;;) {
      if (size_t nl = buf_.find('\n'); nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        try {
          return json::parse(line);
        } catch (const json::exception&) {
          throw Fatal{kExitUsage, "cleaved sent malformed JSON"};
        }
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) == 0) {
        throw Fatal{kExitUsage, "no answer from cleaved within " +
                                    std::to_string(kAnswerTimeout.count()) + " s"};
      }
      char chunk[65536];
      ssize_t n = recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) throw Fatal{kExitUsage, "cleaved closed the connection before answering"};
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }

  std::string path_;
  int fd_ = -1;
  int id_ = 0;
  std::string buf_;
};

// ---- human output ----

std::string str(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  return v.dump();
}

// A field an older daemon may not send: "-" when absent.
std::string field(const json& o, const char* key) {
  return o.is_object() && o.contains(key) ? str(o[key]) : "-";
}

// A table with left-aligned columns sized to their widest cell.
void print_table(const std::vector<std::string>& head,
                 const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); i++)
    w[i] = head[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < w.size(); i++)
      w[i] = std::max(w[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string out;
    for (size_t i = 0; i < cells.size(); i++) {
      out += cells[i];
      if (i + 1 < cells.size()) out += std::string(w[i] - cells[i].size() + 2, ' ');
    }
    std::printf("%s\n", out.c_str());
  };
  line(head);
  for (const auto& r : rows)
    line(r);
}

std::string duration(double seconds) {
  auto s = static_cast<long long>(seconds);
  char buf[64];
  if (s >= 86400) {
    std::snprintf(buf, sizeof buf, "%lldd %lldh %lldm", s / 86400, s % 86400 / 3600, s % 3600 / 60);
  } else if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lldh %lldm %llds", s / 3600, s % 3600 / 60, s % 60);
  } else if (s >= 60) {
    std::snprintf(buf, sizeof buf, "%lldm %llds", s / 60, s % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  }
  return buf;
}

void show_status(const json& s) {
  std::printf("cleaved %s (pid %s), up %s, management protocol %s\n", str(s["version"]).c_str(),
              str(s["pid"]).c_str(), duration(s["uptime_s"].get<double>()).c_str(),
              str(s["protocol"]).c_str());
  std::printf("  config       %s\n", str(s["config"]).c_str());
  std::printf("  runtime dir  %s\n", str(s["runtime_dir"]).c_str());
  const json& dp = s["dataplane"];
  std::string lcores;
  for (const json& l : dp.contains("lcores") ? dp["lcores"] : json::array({dp["lcore"]}))
    lcores += (lcores.empty() ? "" : ",") + str(l);
  std::printf("  dataplane    lcore(s) %s, %s\n", lcores.c_str(), str(dp["state"]).c_str());
  std::printf("  ports        %s of %s link up\n", str(s["ports"]["link_up"]).c_str(),
              str(s["ports"]["total"]).c_str());
  std::printf("  hugepages    %s\n", str(s["hugepages"]).c_str());
  std::printf("  log level    %s\n", str(s["log_level"]).c_str());
  // Local users on the sockets (a daemon before these counters sends none).
  if (const json& c = s.value("control_socket", json()); c.is_object()) {
    std::printf(
        "  control      %s clients (max %s, %s per uid), %s requests; %s oversized, %s evicted, "
        "%s refused\n",
        str(c["clients"]).c_str(), str(c["max_clients"]).c_str(),
        str(c["max_clients_per_uid"]).c_str(), str(c["requests"]).c_str(),
        str(c["oversized"]).c_str(), str(c["evicted"]).c_str(), str(c["refused"]).c_str());
  }
  if (const json& a = s.value("app_socket", json()); a.is_object()) {
    std::printf(
        "  app socket   %s apps (max %s), %s waiting for hello (max %s, %s per uid); %s refused "
        "(not allowed), %s refused or evicted (busy), %s dataplane timeouts\n",
        str(a["apps"]).c_str(), str(a["max_apps"]).c_str(), str(a["pending"]).c_str(),
        str(a["max_pending"]).c_str(), str(a["max_pending_per_uid"]).c_str(),
        str(a["refused_not_allowed"]).c_str(),
        std::to_string(a["refused"].get<uint64_t>() + a["evicted"].get<uint64_t>()).c_str(),
        str(a["dataplane_timeouts"]).c_str());
  }
}

// A port's seeded wire faults, one line per direction: settings and what they did.
void show_faults(const json& faults) {
  if (!faults.is_object()) return;
  for (const char* dir : {"rx", "tx"}) {
    const json& f = faults[dir];
    if (!f["enabled"].get<bool>() && f.value("dropped", uint64_t{0}) == 0 &&
        f.value("reordered", uint64_t{0}) == 0 && f.value("duplicated", uint64_t{0}) == 0) {
      continue;
    }
    std::printf(
        "    %s faults %s: loss %g reorder %g duplicate %g seed %s  dropped %s reordered %s "
        "duplicated %s\n",
        dir, f["enabled"].get<bool>() ? "on" : "off", f["loss"].get<double>(),
        f["reorder"].get<double>(), f["duplicate"].get<double>(), str(f["seed"]).c_str(),
        str(f["dropped"]).c_str(), str(f["reordered"]).c_str(), str(f["duplicated"]).c_str());
  }
}

void show_ports(const json& ports, bool details) {
  for (const json& p : ports) {
    const json& l = p["link"];
    std::string link = l.is_null() ? "unknown"
                                   : std::string(l["up"].get<bool>() ? "up" : "down") + " " +
                                         str(l["speed_mbps"]) + " Mb/s " + str(l["duplex"]);
    std::printf("%s: %s  port %s  driver %s  link %s  mtu %s\n", str(p["name"]).c_str(),
                str(p["device"]).c_str(), str(p["port_id"]).c_str(), str(p["driver"]).c_str(),
                link.c_str(), str(p["mtu"]).c_str());
    std::printf("    mac %s  ipv4 %s  gateway %s  exception tap %s\n", str(p["mac"]).c_str(),
                str(p["ipv4"]).c_str(), str(p["gateway"]).c_str(), str(p["exception_tap"]).c_str());
    for (const json& r : p["routes"]) {
      std::printf("    route %s via %s\n", str(r["dst"]).c_str(), str(r["via"]).c_str());
    }
    const json& c = p["counters"];
    if (!c.is_null()) {
      std::printf("    RX: packets %s  bytes %s  missed %s  errors %s  nombuf %s\n",
                  str(c["rx_packets"]).c_str(), str(c["rx_bytes"]).c_str(),
                  str(c["rx_missed"]).c_str(), str(c["rx_errors"]).c_str(),
                  str(c["rx_nombuf"]).c_str());
      std::printf("    TX: packets %s  bytes %s  errors %s\n", str(c["tx_packets"]).c_str(),
                  str(c["tx_bytes"]).c_str(), str(c["tx_errors"]).c_str());
    }
    size_t hidden = 0;
    std::string xs;
    for (const auto& [name, v] : p["xstats"].items()) {
      if (!details && v.get<uint64_t>() == 0) {
        hidden++;
        continue;
      }
      xs += "      " + name + " " + str(v) + "\n";
    }
    std::printf("    xstats%s:\n%s", details ? "" : " (non-zero; -d for all)", xs.c_str());
    if (hidden != 0) std::printf("      (%zu at zero)\n", hidden);
    show_faults(p["faults"]);
  }
}

// port fault NAME [rx|tx] (off | [loss P] [reorder P] [duplicate P] [seed S]).
json port_fault_args(const std::vector<std::string>& a,
                     const std::function<Fatal(std::string)>& usage) {
  json args = {{"name", a[0]}};
  size_t i = 1;
  if (i < a.size() && (a[i] == "rx" || a[i] == "tx")) args["dir"] = a[i++];
  if (i < a.size() && a[i] == "off") {
    if (i + 1 != a.size()) throw usage("port fault: nothing may follow 'off'");
    return args;
  }
  if (i == a.size()) throw usage("port fault: give off, or loss/reorder/duplicate P and seed S");
  for (; i < a.size(); i += 2) {
    const std::string& key = a[i];
    if (i + 1 == a.size()) throw usage("port fault: '" + key + "' needs a value");
    const std::string& value = a[i + 1];
    if (args.contains(key)) throw usage("port fault: '" + key + "' is given twice");
    if (key == "seed") {
      uint64_t seed = 0;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seed);
      if (ec != std::errc{} || end != value.data() + value.size()) {
        throw usage("port fault: seed: expected a non-negative integer, got '" + value + "'");
      }
      args["seed"] = seed;
    } else if (key == "loss" || key == "reorder" || key == "duplicate") {
      double p = -1;
      auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), p);
      if (ec != std::errc{} || end != value.data() + value.size() || !(p >= 0 && p <= 1)) {
        std::string msg = "port fault: " + key;
        msg += ": expected a probability from 0 to 1, got '";
        msg += value;
        msg += "'";
        throw usage(msg);
      }
      args[key] = p;
    } else {
      throw usage("port fault: unknown setting '" + key +
                  "' (expected loss, reorder, duplicate or seed)");
    }
  }
  return args;
}

void show_nics(const json& nics, bool details) {
  for (const json& n : nics) {
    const json& m = n["memory"];
    std::printf("%s: %s  backend %s  table memory %.2f MB (%s)\n", str(n["name"]).c_str(),
                str(n["device"]).c_str(), str(n["backend"]).c_str(),
                double(m["total_bytes"].get<uint64_t>()) / 1e6,
                m["where"] == "nic" ? "on the NIC" : "host memory");
    std::vector<std::vector<std::string>> rows;
    for (const auto& [table, t] : m["tables"].items()) {
      rows.push_back({"    " + table, str(t["bytes"]), str(t["in_use"])});
    }
    print_table({"    TABLE", "BYTES", "IN USE"}, rows);
    size_t hidden = 0;
    std::printf("    counters%s:\n", details ? "" : " (non-zero; -d for all)");
    for (const auto& [name, v] : n["counters"].items()) {
      if (!details && v.get<uint64_t>() == 0) {
        hidden++;
        continue;
      }
      std::printf("      %-32s %s\n", name.c_str(), str(v).c_str());
    }
    if (hidden != 0) std::printf("      (%zu at zero)\n", hidden);
    if (n["truncated"].get<bool>()) std::printf("    (more counters than shown)\n");
  }
}

void show_arp(const json& a) {
  std::vector<std::vector<std::string>> rows;
  for (const json& e : a["entries"]) {
    char age[32];
    std::snprintf(age, sizeof age, "%.1fs", e["age_ms"].get<double>() / 1000.0);
    rows.push_back({str(e["port"]), str(e["ip"]), str(e["mac"]), str(e["state"]), age,
                    e["pinned"].get<bool>() ? "pinned" : ""});
  }
  print_table({"PORT", "ADDRESS", "MAC", "STATE", "AGE", ""}, rows);
  if (a["truncated"].get<bool>()) std::printf("(more entries than shown)\n");
}

void show_routes(const json& routes) {
  std::vector<std::vector<std::string>> rows;
  for (const json& r : routes) {
    rows.push_back({str(r["dst"]), str(r["via"]), str(r["port"]), str(r["kind"])});
  }
  print_table({"DESTINATION", "VIA", "PORT", "KIND"}, rows);
}

void show_route_get(const json& r) {
  std::string via = r["next_hop"] == r["addr"] ? "" : " via " + str(r["next_hop"]);
  std::printf("%s%s port %s (%s %s)\n", str(r["addr"]).c_str(), via.c_str(), str(r["port"]).c_str(),
              str(r["kind"]).c_str(), str(r["dst"]).c_str());
  const json& n = r["neighbour"];
  if (n.is_null()) {
    std::printf("    neighbour %s: unknown\n", str(r["next_hop"]).c_str());
  } else {
    std::printf("    neighbour %s lladdr %s %s\n", str(r["next_hop"]).c_str(),
                str(n["mac"]).c_str(), str(n["state"]).c_str());
  }
}

void show_stats(const json& s) {
  for (const json& l : s["lcores"]) {
    if (str(l["role"]) == "nic") {
      // The NIC service's own lcore: the emulated hardware's time, not the host's.
      std::printf("lcore %s (nic service): cycles busy %s in %s runs\n", str(l["lcore"]).c_str(),
                  str(l["busy_cycles"]).c_str(), str(l["busy_runs"]).c_str());
      continue;
    }
    std::printf(
        "lcore %s (shard %s): busy %.2f%%  iterations %s (%s busy)  cycles busy %s idle %s  rx %s "
        "tx %s  handed off %s in %s\n",
        str(l["lcore"]).c_str(), field(l, "shard").c_str(), l["busy_percent"].get<double>(),
        str(l["iterations"]).c_str(), str(l["busy_iterations"]).c_str(),
        str(l["busy_cycles"]).c_str(), str(l["idle_cycles"]).c_str(),
        field(l, "rx_packets").c_str(), field(l, "tx_packets").c_str(),
        field(l, "handed_off").c_str(), field(l, "handed_in").c_str());
  }
  if (s.contains("nic") && field(s["nic"], "mode") == "inline") {
    std::printf("nic: run inline by the shards (its cycles are in theirs)\n");
  }
  for (const auto& [name, p] : s["ports"].items()) {
    std::printf(
        "port %s: rx %s packets %s bytes  tx %s packets %s bytes  to kernel %s  from "
        "kernel %s  absorbed %s\n",
        name.c_str(), str(p["rx_packets"]).c_str(), str(p["rx_bytes"]).c_str(),
        str(p["tx_packets"]).c_str(), str(p["tx_bytes"]).c_str(), str(p["to_kernel"]).c_str(),
        str(p["from_kernel"]).c_str(), str(p["absorbed"]).c_str());
  }
  const json& a = s["arp"];
  std::printf(
      "arp: requests rx %s tx %s  replies rx %s tx %s  resolved %s  failed %s  conflicts "
      "%s  table full %s\n",
      str(a["requests_rx"]).c_str(), str(a["requests_tx"]).c_str(), str(a["replies_rx"]).c_str(),
      str(a["replies_tx"]).c_str(), str(a["resolved"]).c_str(), str(a["failed"]).c_str(),
      str(a["conflicts"]).c_str(), str(a["table_full"]).c_str());
  std::printf("icmp: echo requests %s  echo replies %s\n", str(s["icmp"]["echo_requests"]).c_str(),
              str(s["icmp"]["echo_replies"]).c_str());
  if (s.contains("flows")) {
    // Non-zero counters with their meaning, as for drops.
    const json& f = s["flows"];
    std::string lines;
    auto line = [&](const char* name, const char* what) {
      const json& v = f.contains(name) ? f[name] : json(nullptr);
      if (!v.is_number() || v.get<uint64_t>() == 0) return;
      char buf[256];
      std::snprintf(buf, sizeof buf, "  %-20s %12s  %s\n", name, str(v).c_str(), what);
      lines += buf;
    };
#define CLEAVE_X(field, what) line(#field, what);
    CLEAVE_FLOW_COUNTERS(CLEAVE_X)
#undef CLEAVE_X
    std::printf("flow path:%s\n%s", lines.empty() ? " no activity (every counter is zero)" : "",
                lines.c_str());
  }
  std::printf("drops: %s\n", str(s["drops_total"]).c_str());
  for (size_t i = 0; i < cleave::dp::kDropNames.size(); i++) {
    std::string name(cleave::dp::kDropNames[i]);
    const json& d = s["drops"];
    const json& v = d.contains(name) ? d[name] : json(nullptr);  // an older daemon's answer
    if (v.is_number() && v.get<uint64_t>() != 0) {
      std::printf("  %-20s %12s  %s\n", name.c_str(), str(v).c_str(),
                  std::string(cleave::dp::kDropMeanings[i]).c_str());
    }
  }
}

std::string mib(const json& bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB",
                static_cast<double>(bytes.get<uint64_t>()) / (1 << 20));
  return buf;
}

void show_apps(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const json& a : r["apps"]) {
    const json& c = a["counters"];
    rows.push_back(
        {str(a["id"]), str(a["name"]), str(a["pid"]), str(a["uid"]), field(a, "shard"),
         mib(a["memory_bytes"]) + " / " + mib(a["memory_quota_bytes"]),
         str(a["pipes"]) + "/" + str(a["pipes_quota"]), str(a["mrs"]) + "/" + str(a["mrs_quota"]),
         (c.is_null() ? "-" : str(c["flows"])) + "/" + str(a["flows_quota"]),
         c.is_null() ? "-" : str(c["flows_over_quota"]), c.is_null() ? "-" : str(c["completions"]),
         c.is_null() ? "-" : str(c["errors_total"])});
  }
  print_table({"ID", "NAME", "PID", "UID", "SHARD", "MEMORY", "PIPES", "MRS", "FLOWS", "OVER_QUOTA",
               "COMPLETIONS", "ERRORS"},
              rows);
  std::printf("%zu of at most %s apps; socket %s\n", r["apps"].size(), str(r["max_apps"]).c_str(),
              str(r["socket"]).c_str());
}

void show_app(const json& a) {
  std::printf("app %s '%s': pid %s uid %s gid %s, shard %s, connected %s\n", str(a["id"]).c_str(),
              str(a["name"]).c_str(), str(a["pid"]).c_str(), str(a["uid"]).c_str(),
              str(a["gid"]).c_str(), field(a, "shard").c_str(),
              duration(a["connected_s"].get<double>()).c_str());
  std::printf(
      "  memory   %s of %s (region %s on %s, %s DPDK external memory, DMA-mapped for %s "
      "port(s))\n",
      mib(a["memory_bytes"]).c_str(), mib(a["memory_quota_bytes"]).c_str(),
      mib(a["region_bytes"]).c_str(), a["hugepages"].get<bool>() ? "hugepages" : "ordinary pages",
      a["dpdk_external_memory"].get<bool>() ? "registered as" : "NOT registered as",
      str(a["dma_mapped_ports"]).c_str());
  std::printf("  pipes    %s of %s\n", str(a["pipes"]).c_str(), str(a["pipes_quota"]).c_str());
  for (const json& p : a["pipe_list"]) {
    std::string cq = p.contains("cq") ? "  -> cq " + str(p["cq"]) : "";
    std::printf("    %-3s %-10s %6s entries%s%s\n", str(p["id"]).c_str(), str(p["kind"]).c_str(),
                str(p["entries"]).c_str(), cq.c_str(),
                p["doorbell"].get<bool>() ? "  doorbell" : "");
  }
  std::printf("  MRs      %s of %s (besides the heap)\n", str(a["mrs"]).c_str(),
              str(a["mrs_quota"]).c_str());
  for (const json& m : a["mr_list"]) {
    std::printf("    %-3s %-18s %12s bytes  access %s\n", str(m["id"]).c_str(),
                str(m["kind"]).c_str(), str(m["bytes"]).c_str(), str(m["access"]).c_str());
  }
  const json& c = a["counters"];
  if (c.is_null()) return;
  std::printf("  flows    %s of %s (flows and QPs; refused over the quota: %s)\n",
              str(c["flows"]).c_str(), str(a["flows_quota"]).c_str(),
              str(c["flows_over_quota"]).c_str());
  std::printf("  requests nop %s  copy %s  send %s  bytes %s  completions %s\n",
              str(c["ops"]["nop"]).c_str(), str(c["ops"]["copy"]).c_str(),
              str(c["ops"]["send"]).c_str(), str(c["bytes"]).c_str(),
              str(c["completions"]).c_str());
  std::printf(
      "  receive  buffers taken %s  sends without a buffer %s  completion queue full %s"
      "  doorbells %s\n",
      str(c["recv_taken"]).c_str(), str(c["no_recv"]).c_str(), str(c["cq_full"]).c_str(),
      str(c["doorbells"]).c_str());
  std::printf("  errors   %s\n", str(c["errors_total"]).c_str());
  for (const auto& [name, v] : a["errors"].items()) {
    if (v.get<uint64_t>() != 0) std::printf("    %-16s %s\n", name.c_str(), str(v).c_str());
  }
}

// ---- flows and transports ----

// A flow's info value by key, "-" when its transport does not report it.
std::string info(const json& flow, const char* key) {
  const json& i = flow["info"];
  return i.is_object() && i.contains(key) ? str(i[key]) : "-";
}

// Microseconds as milliseconds, e.g. "1.234ms".
std::string usec(const json& flow, const char* key) {
  const json& i = flow["info"];
  if (!i.is_object() || !i.contains(key) || !i[key].is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fms", double(i[key].get<uint64_t>()) / 1000.0);
  return buf;
}

std::string params_str(const json& params) {
  std::string out;
  for (const auto& [k, v] : params.items())
    out += (out.empty() ? "" : " ") + k + " " + str(v);
  return out.empty() ? "-" : out;
}

// "port 5001" or "tuple 10.0.0.1:5001 *:*".
std::string binding_key(const json& b) {
  if (b.contains("tuple")) {
    return "tuple " + str(b["tuple"]["local"]) + " " + str(b["tuple"]["remote"]);
  }
  return "port " + str(b["port"]);
}

void show_binding(const json& b) {
  std::printf("%s: transport %s", binding_key(b).c_str(), str(b["transport"]).c_str());
  if (b.contains("uid") && !b["uid"].is_null()) std::printf(" uid %s", str(b["uid"]).c_str());
  for (const auto& [k, v] : b["params"].items())
    std::printf(" %s %s", k.c_str(), str(v).c_str());
  std::printf("\n");
}

void show_flows(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const json& f : r["flows"]) {
    rows.push_back({str(f["id"]), str(f["app"]), str(f["transport"]), str(f["local"]),
                    str(f["remote"]), info(f, "state"), info(f, "cwnd"), usec(f, "srtt_us"),
                    info(f, "bytes_in_flight"), info(f, "retransmits")});
  }
  print_table({"ID", "APP", "TRANSPORT", "LOCAL", "REMOTE", "STATE", "CWND", "SRTT", "IN-FLIGHT",
               "RETRANS"},
              rows);
  std::string running;
  for (const json& t : r["transports"])
    running += (running.empty() ? "" : ", ") + str(t);
  std::printf("%zu flow(s); transports running: %s\n", r["flows"].size(),
              running.empty() ? "none" : running.c_str());
  if (r["listeners"].empty()) {
    std::printf("listeners: none\n");
  } else {
    std::printf("listeners:\n");
    rows.clear();
    for (const json& l : r["listeners"]) {
      rows.push_back({"  " + str(l["id"]), str(l["app"]), str(l["transport"]), str(l["local"])});
    }
    print_table({"  ID", "APP", "TRANSPORT", "LOCAL"}, rows);
  }
  if (r["bindings"].empty()) {
    std::printf("bindings: none\n");
  } else {
    std::printf("bindings:\n");
    rows.clear();
    for (const json& b : r["bindings"]) {
      const bool uid = b.contains("uid") && !b["uid"].is_null();
      rows.push_back({"  " + binding_key(b), uid ? str(b["uid"]) : "-", str(b["transport"]),
                      params_str(b["params"])});
    }
    print_table({"  BINDING", "UID", "TRANSPORT", "PARAMS"}, rows);
  }
}

// Themes of a flow's info: a title and the keys under it.
using InfoGroups = std::vector<std::pair<const char*, std::vector<std::string>>>;

// The flow's info keys line by line, by theme, "key value" each (value_of may add a human form);
// keys in no theme (another transport's) follow in the order the transport gave them.
void show_info_groups(const json& f, const InfoGroups& groups,
                      const std::function<std::string(const std::string&, const json&)>& value_of) {
  const json& i = f["info"];
  std::vector<std::string> keys;
  if (f.contains("info_keys") && f["info_keys"].is_array()) {
    for (const json& k : f["info_keys"])
      keys.push_back(str(k));
  } else {
    for (const auto& [k, v] : i.items())
      keys.push_back(k);
  }
  auto group_line = [&](const char* title, const std::vector<std::string>& names) {
    std::string line;
    for (const std::string& k : names) {
      if (i.contains(k)) line += "  " + k + " " + value_of(k, i[k]);
    }
    if (!line.empty()) std::printf("  %-10s%s\n", title, line.c_str());
  };
  std::vector<std::string> other;
  for (const std::string& k : keys) {
    bool grouped = false;
    for (const auto& [title, names] : groups)
      grouped |= std::find(names.begin(), names.end(), k) != names.end();
    if (!grouped) other.push_back(k);
  }
  for (const auto& [title, names] : groups)
    group_line(title, names);
  group_line(other.size() == keys.size() ? "info" : "other", other);
}

// flow show: the transport's values by theme.
void show_flow(const json& f) {
  static const InfoGroups kGroups = {
      {"flow", {"state", "cc"}},
      {"window", {"mss", "cwnd", "ssthresh", "snd_wnd", "rcv_wnd", "snd_wscale", "rcv_wscale"}},
      {"rtt", {"srtt_us", "rttvar_us", "rto_ms"}},
      {"options", {"sack", "timestamps", "ecn"}},
      {"loss",
       {"ca_state", "bytes_in_flight", "sack_scoreboard", "ooo_ranges", "retransmits", "rtos",
        "fast_recoveries", "tlp_probes", "rack_losses", "undos", "ecn_reductions"}},
      {"bytes", {"bytes_sent", "bytes_acked", "bytes_received"}},
      {"placement", {"placed_bytes", "copied_bytes", "dup_bytes"}},
      {"queues", {"send_queue", "recv_buffers"}},
  };
  std::printf("flow %s: %s %s -> %s  app %s\n", str(f["id"]).c_str(), str(f["transport"]).c_str(),
              str(f["local"]).c_str(), str(f["remote"]).c_str(), str(f["app"]).c_str());
  show_info_groups(f, kGroups, [](const std::string&, const json& v) { return str(v); });
}

// ---- queue pairs: flows of the rocev2 transport ----

constexpr const char* kQpTransport = "rocev2";

// bits/s for humans: "100G", "12.5G", "800M"; "-" when not a number.
std::string rate_str(const json& bps) {
  if (!bps.is_number()) return "-";
  auto v = bps.get<double>();
  static const std::pair<double, const char*> kUnits[] = {
      {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& [scale, unit] : kUnits) {
    if (v >= scale) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g%s", v / scale, unit);
      return buf;
    }
  }
  return str(bps);
}

// DCQCN's alpha from parts per million: "0.031"; "-" when not a number.
std::string alpha_str(const json& ppm) {
  if (!ppm.is_number()) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", ppm.get<double>() / 1e6);
  return buf;
}

// The address of "ip:port" or "[ip6]:port".
std::string peer_ip(const json& endpoint) {
  std::string e = str(endpoint);
  size_t colon = e.rfind(':');
  if (colon == std::string::npos || e == "-") return e;
  e.resize(colon);
  if (e.size() >= 2 && e.front() == '[' && e.back() == ']') e = e.substr(1, e.size() - 2);
  return e;
}

// flow list: the whole listing, asked a page at a time (flow.list {start, max}) so the daemon's
// lcore never builds more than a page between its packets; the pages are joined here. A daemon
// that answers without `next` sent everything at once.
json flow_listing(Connection& c) {
  constexpr unsigned kPage = 256;  // the most the daemon gives per page
  json all;
  json start = 0;
  do {
    json page = c.call("flow.list", {{"start", start}, {"max", kPage}});
    if (all.is_null()) {
      all = page;
    } else {
      for (const char* key : {"flows", "listeners"}) {
        for (json& row : page[key])
          all[key].push_back(std::move(row));
      }
      all["transports"] = page["transports"];
      all["bindings"] = page["bindings"];
    }
    start = page.contains("next") ? page["next"] : json(nullptr);
  } while (!start.is_null());
  all.erase("next");
  return all;
}

// qp list, solar list: the flow listing's flows of one transport, as JSON rows (the flows, as
// flow list gives them).
json transport_rows(const json& listing, const char* transport) {
  json rows = json::array();
  for (const json& f : listing["flows"]) {
    if (f["transport"] == transport) rows.push_back(f);
  }
  return rows;
}

// solar list: a line per connection, then a row per path (SolarTransport::flow_info's keys).
void show_solar(const json& rows) {
  for (const json& f : rows) {
    std::printf(
        "solar %s: %s conn %s -> %s conn %s  app %s  block %s  I/Os in flight %s, done %s"
        "  blocks acked %s, received %s  crc drops %s  nacks %s\n",
        str(f["id"]).c_str(), info(f, "role").c_str(), info(f, "conn").c_str(),
        peer_ip(f["remote"]).c_str(), info(f, "peer_conn").c_str(), str(f["app"]).c_str(),
        info(f, "block_bytes").c_str(), info(f, "ios_in_flight").c_str(),
        info(f, "ios_done").c_str(), info(f, "blocks_acked").c_str(),
        info(f, "blocks_received").c_str(), info(f, "crc_drops").c_str(),
        info(f, "nacks_received").c_str());
    std::vector<std::vector<std::string>> table;
    const json& i = f["info"];
    for (unsigned p = 0; i.contains("path" + std::to_string(p) + "_state"); p++) {
      auto path = [&](const char* what) {
        return info(f, ("path" + std::to_string(p) + "_" + what).c_str());
      };
      const std::string key = "path" + std::to_string(p) + "_srtt_ns";
      std::string srtt = "-";
      if (i.contains(key) && i[key].is_number()) {
        char b[32];
        std::snprintf(b, sizeof b, "%.1f", i[key].get<double>() / 1000);
        srtt = b;
      }
      table.push_back({"  " + std::to_string(p), path("state"), path("route"), path("cwnd"), srtt,
                       path("sent"), path("resent"), path("timeouts"), path("downs")});
    }
    // The routes past the first (the flow's own addresses): another local port each.
    for (unsigned r = 1; i.contains("route" + std::to_string(r)); r++) {
      std::printf("  route %u: %s\n", r, info(f, ("route" + std::to_string(r)).c_str()).c_str());
    }
    print_table(
        {"  PATH", "STATE", "ROUTE", "CWND", "SRTT-US", "SENT", "RESENT", "TIMEOUTS", "DOWNS"},
        table);
  }
  std::printf("%zu Solar connection(s)\n", rows.size());
}

void show_qps(const json& rows) {
  std::vector<std::vector<std::string>> table;
  for (const json& f : rows) {
    const json& i = f["info"];
    auto num = [&](const char* key) { return i.contains(key) ? i[key] : json(nullptr); };
    table.push_back({str(f["id"]), str(f["app"]), info(f, "qpn"), info(f, "dest_qpn"),
                     peer_ip(f["remote"]), info(f, "state"), info(f, "sq_psn"), info(f, "una_psn"),
                     info(f, "epsn"), info(f, "outstanding_psns"), info(f, "send_queued"),
                     info(f, "recv_posted"), info(f, "retries_left"), info(f, "rnr_retries_left"),
                     rate_str(num("rate_bps")), alpha_str(num("alpha_ppm")), info(f, "cnps_sent"),
                     info(f, "cnps_received")});
  }
  print_table({"ID", "APP", "QPN", "DEST-QPN", "PEER", "STATE", "SQ-PSN", "UNA-PSN", "EPSN",
               "OUTSTANDING", "SEND-Q", "RECV-POSTED", "RETRIES", "RNR-RETRIES", "RATE", "ALPHA",
               "CNPS-SENT", "CNPS-RECV"},
              table);
  std::printf("%zu queue pair(s)\n", rows.size());
}

// qp show: every value the QP reports, by theme; rates and alpha also for humans.
void show_qp(const json& f) {
  static const InfoGroups kGroups = {
      {"qp", {"state", "qpn", "dest_qpn", "pmtu", "recovery", "spray", "reorder"}},
      {"requester", {"sq_psn", "una_psn", "outstanding_psns", "send_queued", "reads_outstanding"}},
      {"responder", {"epsn", "msn", "recv_posted"}},
      {"retries",
       {"retries_left", "rnr_retries_left", "srtt_us", "rto_us", "retransmits", "timeouts",
        "naks_sent", "naks_received", "rnr_naks_sent", "rnr_naks_received", "duplicates",
        "out_of_sequence"}},
      {"dcqcn",
       {"dcqcn", "rate_bps", "target_rate_bps", "rate_limit_bps", "alpha_ppm", "rate_decreases",
        "ce_received", "cnps_sent", "cnps_received", "cnp_dscp"}},
      {"counters",
       {"tx_packets", "tx_bytes", "rx_packets", "acks_sent", "acks_received", "read_responses",
        "placed_bytes", "copied_bytes"}},
      {"errors",
       {"access_errors", "invalid_requests", "bad_icrc", "bad_pkey", "bad_packets", "qp_errors"}},
  };
  std::printf("qp %s: qpn %s -> %s qpn %s  %s  app %s (flow %s -> %s)\n", str(f["id"]).c_str(),
              info(f, "qpn").c_str(), peer_ip(f["remote"]).c_str(), info(f, "dest_qpn").c_str(),
              info(f, "state").c_str(), str(f["app"]).c_str(), str(f["local"]).c_str(),
              str(f["remote"]).c_str());
  show_info_groups(f, kGroups, [](const std::string& k, const json& v) {
    if (k.ends_with("_bps") && v.is_number()) return str(v) + " (" + rate_str(v) + ")";
    if (k == "alpha_ppm" && v.is_number()) return str(v) + " (" + alpha_str(v) + ")";
    return str(v);
  });
}

void show_transports(const json& r) {
  std::vector<std::vector<std::string>> rows;
  for (const json& t : r["transports"]) {
    // What its claim takes ("UDP 4791"); "-" for nothing (or a daemon that does not say).
    const std::string claims =
        t.contains("claims") && !str(t["claims"]).empty() ? str(t["claims"]) : "-";
    rows.push_back({str(t["name"]), str(t["origin"]), claims, str(t["instantiated"]),
                    str(t["flows"]), str(t["listeners"]), str(t["description"])});
  }
  print_table({"NAME", "ORIGIN", "CLAIMS", "RUNNING", "FLOWS", "LISTENERS", "DESCRIPTION"}, rows);
  // A running transport's counters over all its flows, non-zero ones (-j shows every one).
  for (const json& t : r["transports"]) {
    if (!t.contains("stats") || t["stats"].empty()) continue;
    std::string line;
    for (const auto& [k, v] : t["stats"].items()) {
      if (v != 0) line += " " + k + " " + str(v);
    }
    std::printf("%s:%s\n", str(t["name"]).c_str(), line.empty() ? " (all zero)" : line.c_str());
  }
}

// An unsigned number in [lo, hi], or nothing.
std::optional<uint32_t> number(const std::string& s, uint32_t lo, uint32_t hi) {
  uint32_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

// flow attach / flow detach: `port PORT` or `tuple LOCAL REMOTE`, anywhere among the words; for
// attach also `uid UID`, `transport NAME` and the transport's KEY VALUE parameters.
json flow_binding_args(const std::vector<std::string>& a, const std::string& what, bool attach,
                       const std::function<Fatal(std::string)>& usage) {
  json args = json::object();
  json params = json::object();
  auto fail = [&](const std::string& msg) { return usage(what + msg); };
  for (size_t i = 0; i < a.size();) {
    const std::string& key = a[i];
    const size_t values = key == "tuple" ? 2 : 1;
    if (i + values >= a.size()) {
      throw fail(": '" + key + "' needs " + (values == 2 ? "two values" : "a value"));
    }
    const std::string& value = a[i + 1];
    const bool ours = key == "port" || key == "tuple" || key == "uid" || key == "transport";
    if (ours ? args.contains(key) : params.contains(key)) {
      throw fail(": '" + key + "' is given twice");
    }
    if (key == "port" || key == "tuple") {
      if (args.contains("port") || args.contains("tuple")) {
        throw fail(": give either 'port PORT' or 'tuple LOCAL REMOTE', not both");
      }
    }
    if (key == "port") {
      auto port = number(value, 1, 65535);
      if (!port) {
        throw fail(": expected a port number from 1 to 65535, got '" + value + "'");
      }
      args["port"] = *port;
    } else if (key == "tuple") {
      args["tuple"] = {{"local", value}, {"remote", a[i + 2]}};
    } else if (!attach) {
      throw fail(": unexpected '" + key + "' (give 'port PORT' or 'tuple LOCAL REMOTE')");
    } else if (key == "uid") {
      auto uid = number(value, 0, UINT32_MAX - 1);
      if (!uid) throw fail(": expected a user id (a number), got '" + value + "'");
      args["uid"] = *uid;
    } else if (key == "transport") {
      args["transport"] = value;
    } else {
      params[key] = value;
    }
    i += 1 + values;
  }
  if (!args.contains("port") && !args.contains("tuple")) {
    throw fail(": missing 'port PORT' or 'tuple LOCAL REMOTE'");
  }
  if (!params.empty()) args["params"] = params;
  return args;
}

// route get: ask until the next hop is resolved or has failed (ARP retries take seconds).
json route_get(Connection& c, const std::string& addr, int wait_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  for (;;) {
    json r = c.call("route.get", {{"addr", addr}});
    const json& n = r["neighbour"];
    bool settled = !n.is_null() && n["state"] != "incomplete";
    if (settled || std::chrono::steady_clock::now() >= deadline) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

const char* kHelp = R"(Usage: cleavectl [OPTIONS] OBJECT [VERB] [ARGS]

Objects and verbs (the verb defaults to show; for app, flow, qp, solar and transport to list):
  status                  daemon version, uptime, configuration, dataplane state, sockets
  port show [NAME]        ports: device, link, MAC, IPv4, MTU, NIC counters, xstats, faults
  port fault NAME [rx|tx] [loss P] [reorder P] [duplicate P] [seed S]
  port fault NAME [rx|tx] off
                          seeded wire faults on the cleave side of the port (test equipment):
                          each P a probability per frame in [0, 1], unset ones 0, seed 1 by
                          default; both directions unless rx or tx is given; off clears them
                          e.g. port fault p0 loss 0.01 reorder 0.01 seed 7
  arp show                the neighbour cache
  route show              the routing table
  route get ADDR          the route to ADDR and its next hop, resolving the next hop's MAC
  stats show              dataplane counters, summed over the shards: each shard's lcore
                          (busy/idle, packets, frames handed between shards), the NIC
                          service's lcore apart when it has one, per port, ARP, ICMP, the
                          flow path, drops
  nic show [NAME]         each port's NIC: backend (cleave: the header-split NIC; generic:
                          software placement), placement counters, table memory
  app list                connected apps (libcleave): memory, pipes, MRs, flows, requests,
                          errors
  app show ID             one app: its pipes, MRs, flows, request counters and errors by kind
  flow list               flows (state, cwnd, srtt, bytes in flight, retransmits), then
                          listeners and bindings (port and tuple); asked a page at a time,
                          shown whole
  flow show ID            one flow: every value its transport reports, by theme
  flow attach port PORT [uid UID] [transport NAME] [KEY VALUE]...
                          bind a local port (its listeners, and connects to that remote port)
                          to a transport and its parameters, for flows opened from then on;
                          without transport the port keeps its own (tcp when it has none);
                          with uid, only apps of that user may listen on the port
                          e.g. flow attach port 5001 transport tcp cc cubic
  flow attach tuple LOCAL REMOTE [uid UID] [transport NAME] [KEY VALUE]...
                          bind TCP flows by address: LOCAL and REMOTE are IP:PORT, * for any
                          address or port. A matching flow (an accepted SYN, an app's connect)
                          uses this transport (tcp when not given) and these parameters, over
                          the port binding's; the most specific tuple wins. With uid, only
                          apps of that user may accept or connect such flows (others get
                          CL_EACCES). At most 64 tuple bindings
                          e.g. flow attach tuple 10.0.0.1:5001 10.0.0.2:* cc dctcp
  flow detach port PORT | tuple LOCAL REMOTE
                          remove a binding; flows that exist keep what they have
  qp list                 RoCEv2 queue pairs (the flows of transport rocev2): QP numbers, peer,
                          state, PSNs (next to send, oldest unacknowledged, expected),
                          outstanding PSNs, queued sends, posted receives, retries left, DCQCN
                          rate and alpha, CNPs sent and received
  qp show ID              one queue pair (ID: its flow id): every value it reports, by theme
  solar list              Solar connections (the flows of transport solar): role, both
                          connection numbers, peer, block size, I/Os in flight and done,
                          blocks acknowledged and received, CRC drops, NACKs; its routes
                          past the first (another local port each); then each path: up or
                          down, route, cwnd, smoothed RTT, blocks sent and resent, timeouts,
                          times down
  transport list          transports cleaved knows (built-in and plugins), which run, and
                          their flows and listeners; then each running transport's counters
                          over all its flows (tcp: segments, retransmits, placed_bytes and
                          copied_bytes of received payload, ...)
  transport attach PATH   load a transport plugin (a shared object, see transport_abi.h) into
                          the running cleaved; a relative PATH is taken from cleavectl's
                          directory. Refused, and nothing changes, when it is not a plugin of
                          this ABI version, its name is taken, or it is loaded already
  log level [LEVEL]       show, or set, the daemon's log level
                          (trace, debug, info, warn, error, critical, off)
  help                    this text

Options:
  -j, --json              print the daemon's JSON answer instead of tables
  -p, --pretty            indent JSON output
  -d, --details           more detail (port show, nic show: every counter, zeros included)
  -s, --socket PATH       cleaved's control socket
                          (default $CLEAVE_SOCKET, else /run/cleave/cleaved.sock)
  -w, --wait MS           route get: how long to wait for ARP resolution (default 5000)
  -V, --version           print cleavectl's version

Exit status: 0 success, 1 cleaved reported an error, 2 usage or connection error.
)";

}  // namespace

namespace {

int run(int argc, char** argv) {
  CLI::App app{"cleavectl - control and inspect cleaved", "cleavectl"};
  app.set_help_flag();  // our own help text below
  bool json_out = false, pretty = false, details = false, help = false;
  int wait_ms = 5000;
  const char* env_sock = std::getenv("CLEAVE_SOCKET");
  std::string sock = env_sock != nullptr ? env_sock
                                         : std::string(mgmt::kDefaultRuntimeDir) + "/" +
                                               std::string(mgmt::kSocketName);
  app.add_flag("-j,--json", json_out);
  app.add_flag("-p,--pretty", pretty);
  app.add_flag("-d,--details", details);
  app.add_flag("-h,--help", help);
  app.add_option("-s,--socket", sock);
  app.add_option("-w,--wait", wait_ms)->check(CLI::Range(0, 600000));
  app.set_version_flag("-V,--version", std::string("cleavectl ") + CLEAVE_VERSION);
  std::vector<std::string> words;
  app.add_option("words", words);
  app.positionals_at_end(false);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::fprintf(stderr, "cleavectl: %s\nTry 'cleavectl help'.\n", e.what());
    return kExitUsage;
  }
  if (help || (!words.empty() && words[0] == "help")) {
    std::fputs(kHelp, stdout);
    return kExitOk;
  }
  if (words.empty()) {
    std::fputs(kHelp, stderr);
    return kExitUsage;
  }

  auto usage = [](const std::string& msg) {
    return Fatal{kExitUsage, msg + "\nTry 'cleavectl help'."};
  };
  struct Command {
    const char* object;
    const char* verb;
    size_t min_args, max_args;
    std::function<json(Connection&, const std::vector<std::string>&)> fetch;
    std::function<void(const json&, const std::vector<std::string>&)> show;
  };
  auto simple = [](const char* command) {
    return [command](Connection& c, const std::vector<std::string>&) { return c.call(command); };
  };
  const Command commands[] = {
      {"status", "show", 0, 0, simple("status"),
       [](const json& r, const auto&) { show_status(r); }},
      {"port", "show", 0, 1,
       [](Connection& c, const auto& a) {
         return c.call("port.show", a.empty() ? json::object() : json{{"name", a[0]}});
       },
       [&](const json& r, const auto&) { show_ports(r, details); }},
      {"port", "fault", 1, SIZE_MAX,
       [&](Connection& c, const auto& a) {
         return c.call("port.fault", port_fault_args(a, usage));
       },
       [](const json& r, const auto&) {
         std::printf("%s:\n", str(r["name"]).c_str());
         for (const char* dir : {"rx", "tx"}) {
           const json& f = r["faults"][dir];
           std::printf("    %s faults %s: loss %g reorder %g duplicate %g seed %s\n", dir,
                       f["enabled"].get<bool>() ? "on" : "off", f["loss"].get<double>(),
                       f["reorder"].get<double>(), f["duplicate"].get<double>(),
                       str(f["seed"]).c_str());
         }
       }},
      {"arp", "show", 0, 0, simple("arp.show"), [](const json& r, const auto&) { show_arp(r); }},
      {"route", "show", 0, 0, simple("route.show"),
       [](const json& r, const auto&) { show_routes(r); }},
      {"route", "get", 1, 1,
       [&](Connection& c, const auto& a) { return route_get(c, a[0], wait_ms); },
       [](const json& r, const auto&) { show_route_get(r); }},
      {"stats", "show", 0, 0, simple("stats.show"),
       [](const json& r, const auto&) { show_stats(r); }},
      {"nic", "show", 0, 1,
       [](Connection& c, const auto& a) {
         return c.call("nic.show", a.empty() ? json::object() : json{{"name", a[0]}});
       },
       [&](const json& r, const auto&) { show_nics(r, details); }},
      {"app", "list", 0, 0, simple("app.list"), [](const json& r, const auto&) { show_apps(r); }},
      {"app", "show", 1, 1,
       [&](Connection& c, const auto& a) {
         uint32_t id = 0;
         auto [end, ec] = std::from_chars(a[0].data(), a[0].data() + a[0].size(), id);
         if (ec != std::errc{} || end != a[0].data() + a[0].size()) {
           throw usage("app show: expected an app id (a number), got '" + a[0] + "'");
         }
         return c.call("app.show", {{"id", id}});
       },
       [](const json& r, const auto&) { show_app(r); }},
      {"flow", "list", 0, 0, [](Connection& c, const auto&) { return flow_listing(c); },
       [](const json& r, const auto&) { show_flows(r); }},
      {"flow", "show", 1, 1,
       [&](Connection& c, const auto& a) {
         auto id = number(a[0], 0, UINT32_MAX - 1);
         if (!id) throw usage("flow show: expected a flow id (a number), got '" + a[0] + "'");
         return c.call("flow.show", {{"id", *id}});
       },
       [](const json& r, const auto&) { show_flow(r); }},
      {"flow", "attach", 0, SIZE_MAX,
       [&](Connection& c, const auto& a) {
         json args = flow_binding_args(a, "flow attach", true, usage);
         return c.call("flow.attach", args);
       },
       [](const json& r, const auto&) { show_binding(r); }},
      {"flow", "detach", 0, SIZE_MAX,
       [&](Connection& c, const auto& a) {
         json args = flow_binding_args(a, "flow detach", false, usage);
         return c.call("flow.detach", args);
       },
       [](const json& r, const auto&) {
         std::printf("removed ");
         show_binding(r);
       }},
      {"qp", "list", 0, 0,
       [](Connection& c, const auto&) { return transport_rows(flow_listing(c), kQpTransport); },
       [](const json& r, const auto&) { show_qps(r); }},
      {"solar", "list", 0, 0,
       [](Connection& c, const auto&) { return transport_rows(flow_listing(c), "solar"); },
       [](const json& r, const auto&) { show_solar(r); }},
      {"qp", "show", 1, 1,
       [&](Connection& c, const auto& a) {
         auto id = number(a[0], 0, UINT32_MAX - 1);
         if (!id)
           throw usage("qp show: expected a queue pair's flow id (a number), got '" + a[0] + "'");
         json f = c.call("flow.show", {{"id", *id}});
         if (f["transport"] != kQpTransport) {
           throw Fatal{kExitDaemonError, "flow " + a[0] +
                                             " is not a queue pair (its transport is " +
                                             str(f["transport"]) + ", not " + kQpTransport + ")"};
         }
         return f;
       },
       [](const json& r, const auto&) { show_qp(r); }},
      {"transport", "list", 0, 0, simple("transport.list"),
       [](const json& r, const auto&) { show_transports(r); }},
      {"transport", "attach", 1, 1,
       [&](Connection& c, const auto& a) {
         // Relative to where cleavectl runs, not to cleaved's directory: made absolute here.
         std::error_code ec;
         std::filesystem::path p = std::filesystem::absolute(a[0], ec);
         if (ec || a[0].empty())
           throw usage("transport attach: cannot use the path '" + a[0] + "'");
         return c.call("transport.attach", {{"path", p.lexically_normal().string()}});
       },
       [](const json& r, const auto&) {
         std::printf("transport %s loaded from %s: %s\n", str(r["name"]).c_str(),
                     str(r["origin"]).c_str(), str(r["description"]).c_str());
       }},
      {"log", "level", 0, 1,
       [](Connection& c, const auto& a) {
         return a.empty() ? c.call("log.get") : c.call("log.set", {{"level", a[0]}});
       },
       [](const json& r, const auto& a) {
         if (a.empty()) {
           std::printf("%s\n", str(r["level"]).c_str());
         } else {
           std::printf("log level %s (was %s)\n", str(r["level"]).c_str(),
                       str(r["previous"]).c_str());
         }
       }},
  };

  try {
    const std::string& object = words[0];
    std::string verb = words.size() > 1 ? words[1] : "show";
    if (object == "log" && words.size() == 1) verb = "level";
    if ((object == "app" || object == "flow" || object == "qp" || object == "solar" ||
         object == "transport") &&
        words.size() == 1) {
      verb = "list";
    }
    std::vector<std::string> args(words.begin() + std::min<size_t>(words.size(), 2), words.end());
    const Command* cmd = nullptr;
    bool known_object = false;
    for (const Command& c : commands) {
      known_object |= object == c.object;
      if (object == c.object && verb == c.verb) cmd = &c;
    }
    if (cmd == nullptr) {
      throw usage(known_object ? "unknown verb '" + verb + "' for '" + object + "'"
                               : "unknown object '" + object + "'");
    }
    if (args.size() < cmd->min_args || args.size() > cmd->max_args) {
      throw usage("wrong number of arguments for '" + object + " " + verb + "'");
    }
    Connection conn(sock);
    json r = cmd->fetch(conn, args);
    if (json_out) {
      std::cout << r.dump(pretty ? 2 : -1) << "\n";
    } else {
      cmd->show(r, args);
    }
  } catch (const Fatal& f) {
    std::fprintf(stderr, "cleavectl: %s\n", f.message.c_str());
    return f.code;
  } catch (const json::exception& e) {
    std::fprintf(stderr, "cleavectl: unexpected answer from cleaved: %s\n", e.what());
    return kExitUsage;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cleavectl: %s\n", e.what());
    return kExitUsage;
  } catch (...) {
    std::fprintf(stderr, "cleavectl: unexpected internal error\n");
    return kExitUsage;
  }
}
