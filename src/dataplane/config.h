// config.h - cleaved's configuration: the schema as plain structs, and the validating loader.
//
// The loader checks the whole file before anything starts and reports every problem it finds as
// file:line:col (1-based) with a message, so an operator fixes a file in one pass.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fault_params.h"
#include "net.h"

namespace cleave::dp {

// The default configuration compiled into cleaved (config/cleaved.yaml).
extern const std::string_view kDefaultConfigYaml;
inline constexpr std::string_view kDefaultConfigName = "<embedded>";

enum class HugepageMode { kAuto, kOn, kOff };
enum class LogFormat { kAuto, kJournald, kPlain };

struct Route {
  Ipv4Prefix dst;
  Ipv4 via;
};

struct PortConfig {
  std::string name;
  std::string device;      // DPDK device: vdev spec or PCI address, with devargs
  std::optional<Mac> mac;  // unset: keep the device's address
  uint16_t mtu = 1500;
  Ipv4Prefix ipv4;              // interface address and on-link prefix
  std::optional<Ipv4> gateway;  // default route through this port
  std::vector<Route> routes;    // static routes through this port
  std::string exception_tap;    // empty: unmatched packets are dropped
  // Seeded wire faults per direction (test equipment; fault.h): off unless given.
  std::array<FaultParams, kFaultDirs> faults{};
};

// What one app may use. Every limit is enforced by the daemon when the app asks.
struct AppQuota {
  uint32_t memory_mb = 256;      // the region plus registered MRs
  uint32_t region_mb = 16;       // the shared region: pipes and the cl_alloc heap
  uint32_t pipes = 16;           // notification pipes of all kinds
  uint32_t mrs = 8;              // registered MRs besides the heap
  uint32_t flows = 64;           // flows the app may own (transports)
  uint32_t pipe_entries = 4096;  // largest pipe
  uint32_t error_budget = 64;    // bad descriptors per second before the app is disconnected
};

// Who may connect to the app socket (SO_PEERCRED): a uid or a gid (primary group of the peer
// process), with that app's quota.
struct AppRule {
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  AppQuota quota;
};

// Where a value was given in the file (1-based), for errors found after parsing: a plugin that
// does not load, a binding the transport refuses.
struct ConfigPos {
  int line = 0;
  int col = 0;
};

// A transport shared object to load at start-up (transport_abi.h).
struct TransportPlugin {
  std::string path;
  ConfigPos pos;
};

// An operator binding applied at start-up, as `cleavectl flow attach` does: listeners on `port`
// and connects to `port` (a port binding), or flows whose addresses match `local` and `remote`
// (a tuple binding, `tuple` set), use `transport` with `params` (checked by the transport); with
// `uid`, only apps of that uid may listen on the port or accept and connect on the tuple.
struct TransportBinding {
  uint16_t port = 0;  // a port binding: 1 to 65535; a tuple binding: 0
  bool tuple = false;
  WildEndpoint local;
  WildEndpoint remote;
  std::optional<uint32_t> uid;
  std::string transport = "tcp";
  std::vector<std::pair<std::string, std::string>> params;
  ConfigPos pos;            // the binding
  ConfigPos transport_pos;  // its transport: (the binding's when not given)
  ConfigPos params_pos;     // its params: (the binding's when not given)
};

// An EAL lcore and, optionally, the CPU its thread runs on ("2@1": lcore 2 on CPU 1, EAL's
// --lcores syntax; without a CPU, lcore N runs on CPU N). Several lcores may share a CPU.
// Dataplane shards at most: one receive queue each on every port (the NIC's queues).
inline constexpr size_t kMaxShards = 16;

struct LcoreSpec {
  uint32_t lcore = 0;
  std::optional<uint32_t> cpu;
  uint32_t cpu_or_lcore() const { return cpu ? *cpu : lcore; }
  std::string str() const;  // "2" or "2@1"
  bool operator==(const LcoreSpec&) const = default;
};

struct Config {
  std::string source;  // file name, or kDefaultConfigName
  std::string runtime_dir = "/run/cleave";
  struct {
    std::string level = "info";
    LogFormat format = LogFormat::kAuto;
  } log;
  struct {
    uint32_t main_lcore = 0;
    HugepageMode hugepages = HugepageMode::kAuto;
    uint32_t memory_mb = 512;
    std::string file_prefix = "cleave";
    bool telemetry = true;
    std::vector<std::string> args;
  } eal;
  struct {
    // One shard per lcore (dataplane.lcores; dataplane.lcore: one). Shard i polls queue i of
    // every port.
    std::vector<LcoreSpec> lcores{LcoreSpec{1, std::nullopt}};
    uint32_t burst = 32;
    uint32_t rx_descriptors = 1024;
    uint32_t tx_descriptors = 1024;
    uint32_t mbufs = 8191;
    uint32_t idle_sleep_us = 0;
  } dataplane;
  struct {
    uint32_t max_entries = 1024;
    uint32_t reachable_ms = 30000;
    uint32_t retry_ms = 1000;
    uint32_t retries = 3;
    uint32_t failed_hold_ms = 5000;
  } arp;
  // Table sizes of the generic NIC backend (software split and placement on ports that are not
  // net_cleave); a net_cleave port takes its own from its devargs.
  struct {
    uint32_t max_flows = 16384;
    uint32_t max_mrs = 4096;
    uint32_t ms_committed = 32;  // MS entries each flow owns (a multiple of 16)
    uint32_t ms_store = 65536;   // MS entries shared by all flows (a multiple of 16)
    // The lcore that runs net_cleave ports' NIC (their DPDK service); none: each queue's bursts
    // run it inline on the shard's lcore.
    std::optional<LcoreSpec> service_lcore;
  } nic;
  // TCP's daemon-wide limits; per-listener and per-flow settings are transport parameters.
  struct {
    // TIME-WAIT records kept at most (Linux's tcp_max_tw_buckets). Each keeps a flow id, so at
    // most half of nic.max_flows are used; past it a closing connection skips TIME-WAIT.
    uint32_t max_time_wait = 4096;
  } tcp;
  // The control socket (cleavectl): connections from local users, capped and served in turns.
  struct {
    uint32_t max_clients = 64;          // connections at once
    uint32_t max_clients_per_uid = 16;  // of them from one user
    uint32_t requests_per_turn = 16;    // requests served from one connection before the others
  } management;
  struct {
    uint32_t max_apps = 32;
    uint32_t budget = 32;              // entries taken from one app per loop iteration (fairness)
    uint32_t max_pending = 16;         // admitted users' connections that have not said hello
    uint32_t max_pending_per_uid = 4;  // of them from one user
    AppQuota quota;                    // the default for every rule that sets none
    std::vector<AppRule> allow{AppRule{0, std::nullopt, AppQuota{}}};  // default: root only
  } apps;
  struct {
    std::vector<TransportPlugin> plugins;
    std::vector<TransportBinding> bindings;
  } transports;
  // Defaults of every RoCEv2 queue pair (a QP's own parameters override them).
  struct {
    uint32_t cnp_dscp = 48;  // the IP DSCP of the CNPs DCQCN sends (mlx5's cnp_dscp)
  } rocev2;
  std::vector<PortConfig> ports;
};

struct ConfigError {
  std::string file;
  int line = 0;  // 1-based; 0 when the error has no position (e.g. the file cannot be read)
  int col = 0;   // 1-based
  std::string message;

  std::string str() const;  // "file:line:col: message"
};

struct ConfigResult {
  std::optional<Config> config;  // set only when errors is empty
  std::vector<ConfigError> errors;
};

// Parses and validates YAML text. `name` is used in error positions.
ConfigResult parse_config(std::string_view text, std::string_view name);
// Reads and validates a file.
ConfigResult load_config_file(const std::string& path);

}  // namespace cleave::dp
