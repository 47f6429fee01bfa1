// management.h - the answers to management commands, as JSON (mgmt_protocol.h).
//
// Serves both the control socket (main thread) and DPDK telemetry (telemetry thread), so every
// method is safe to call from several threads: dataplane state is reached only through the
// CtlChannel; ethdev stats, link and xstats are read from the PMD, which DPDK allows from any
// thread; the rest is fixed after start-up.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "config.h"
#include "ctl_channel.h"
#include "flow_info.h"
#include "lcore/dataplane.h"
#include "lcore/route.h"

namespace cleave::dp {

// NIC counters one nic.show answer can carry per port.
inline constexpr size_t kMaxNicCounters = 512;

struct MgmtError : std::runtime_error {
  MgmtError(std::string_view code_, const std::string& message)
      : std::runtime_error(message), code(code_) {}
  std::string code;
};

struct DaemonInfo {
  std::string config_source;
  std::string runtime_dir;
  bool hugepages = false;
  unsigned main_lcore = 0;
  std::vector<unsigned> dataplane_lcores{1};  // by shard
  std::chrono::steady_clock::time_point started;
  bool test_hooks = false;  // CLEAVE_TEST_HOOKS=1: debug.* commands (test equipment)
};

class AppServer;
class MgmtServer;

// The NIC service's lcore as stats shows it (port.h's NicService, when one runs).
class NicLcore {
 public:
  virtual uint32_t lcore() const = 0;
  virtual uint64_t busy_cycles() const = 0;
  virtual uint64_t busy_runs() const = 0;

 protected:
  ~NicLcore() = default;
};

class Management {
 public:
  Management(DaemonInfo info, const Config& cfg, const std::vector<DpPort>& ports,
             const RouteTable& routes, const ShardChannels& ctl);

  // The app server for app.* commands; those run on the main thread only (the telemetry thread
  // never calls handle()).
  void set_apps(AppServer* apps) { apps_ = apps; }
  // The control socket, whose counters status shows (read from any thread: atomics).
  void set_control(const MgmtServer* control) { control_ = control; }
  // The NIC service lcore, whose busy cycles stats shows apart from the shards' (null: none;
  // set before the first command; its counters are read from any thread).
  void set_nic_service(const NicLcore* s) { nic_service_ = s; }

  // Runs one command; throws MgmtError for anything the client should be told.
  nlohmann::json handle(std::string_view command, const nlohmann::json& args);

  nlohmann::json status();
  nlohmann::json ports(const std::string& name);  // empty name: all ports
  nlohmann::json arp();
  nlohmann::json routes();
  nlohmann::json route_get(const std::string& addr);
  nlohmann::json stats();
  nlohmann::json nic(const std::string& name);  // empty name: all ports
  // port.fault: sets the seeded wire faults of port `name` in the directions `dirs` (bit
  // 1 << FaultDir each; all zero probabilities: off) and returns the port's faults and their
  // counters, as port.show's "faults".
  nlohmann::json port_fault(const std::string& name, uint8_t dirs, const FaultParams& p);
  // Flows, listeners, transports and bindings: the whole listing, or with `start` or `max_rows`
  // one page of it and `next` (flow.list, mgmt_protocol.h). flow_show: one flow (not_found when
  // none).
  nlohmann::json flows(std::optional<uint32_t> start = std::nullopt,
                       std::optional<uint32_t> max_rows = std::nullopt);
  nlohmann::json flow_show(uint32_t id);
  // Binds `b.port` to a transport and params, as flow.attach; an empty transport keeps the
  // port's current one (tcp when it has none). Throws MgmtError (bad_request) with the
  // transport's reason when it refuses. Returns the binding as the dataplane keeps it.
  nlohmann::json attach(FlowBinding b);
  // flow.detach: removes the port or tuple binding with `key`'s key (not_found when none).
  // Answers the key; flows that exist keep what they have.
  nlohmann::json detach(FlowBinding key);
  // The registry's transports, with which the dataplane runs and their flows and listeners.
  nlohmann::json transports();
  // transport.attach: loads a transport plugin into the running daemon's registry (dlopen on
  // this thread, which must be the main thread: the registry has one writer). `path` must be
  // absolute. Throws MgmtError (bad_request) with the registry's reason when it refuses; answers
  // {name, description, origin}.
  nlohmann::json attach_transport(const std::string& path);

 private:
  std::unique_ptr<CtlRequest> ask(std::unique_ptr<CtlRequest> req, size_t shard = 0);
  // The same request to every shard, each made by `make()` (which reserves the room its answer
  // needs: a copy of a vector does not keep its capacity): the answers by shard.
  template <class Make>
  std::vector<std::unique_ptr<CtlRequest>> ask_all(const Make& make) {
    std::vector<std::unique_ptr<CtlRequest>> out;
    for (size_t k = 0; k < ctl_.size(); k++)
      out.push_back(ask(CtlRequest::make(make()), k));
    return out;
  }
  // Every shard's counters summed (`sum`), and each shard's.
  std::vector<DataplaneStats> shard_stats(DataplaneStats& sum, uint64_t& tsc_hz);
  // One page of shard `shard`'s listing; `meta`: with its transports and bindings.
  ctl::FlowList flow_page(size_t shard, uint32_t only, uint32_t start, uint32_t max_rows,
                          bool meta = false);
  void add_rows(const ctl::FlowList& page, size_t shard, nlohmann::json& flows,
                nlohmann::json& listeners);
  // A port's NIC through every shard's queue: faults set on each (when dirs is not 0), the
  // counters of a port-wide NIC (cleave) from shard 0, of per-queue ones (generic) summed.
  ctl::Nic nic_answer(size_t index, uint8_t dirs, const FaultParams& p);
  // One port's faults and fault counters, setting them first when dirs is not 0.
  nlohmann::json faults(size_t index, uint8_t dirs, const FaultParams& p);
  nlohmann::json faults_or_null(size_t index);
  const std::string& port_name(uint8_t index) const { return ports_[index].name; }
  unsigned lcore_of(size_t shard) const {
    return shard < info_.dataplane_lcores.size() ? info_.dataplane_lcores[shard] : 0;
  }

  DaemonInfo info_;
  const Config& cfg_;
  const std::vector<DpPort>& ports_;
  const RouteTable& routes_;
  const ShardChannels& ctl_;
  AppServer* apps_ = nullptr;
  const MgmtServer* control_ = nullptr;
  const NicLcore* nic_service_ = nullptr;
};

}  // namespace cleave::dp
