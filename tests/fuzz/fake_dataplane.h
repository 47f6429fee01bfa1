// fake_dataplane.h - the dataplane's side of the control channel (ctl_channel.h) for the
// control-socket fuzzers (mgmt_fuzz.cc, app_fuzz.cc): EAL without hugepages for the channel's
// ring and for apps' external memory, and a thread that answers requests as the dataplane lcore
// does, without ports or packets.
//
// What it answers from real code: app table updates through a real AppPath (apps.h), as
// dataplane_ctl.cc does; bindings checked by the real transports' check_params (the registry's
// TCP and RoCEv2). The rest is the smallest faithful answer: no ARP entries, no routes, zero
// counters, flows and QPs given ids when their app and completion pipe exist.
#pragma once

#include <cleave/cleave.h>
#include <rte_eal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "ctl_channel.h"
#include "flow_info.h"
#include "lcore/apps.h"
#include "registry.h"
#include "transport.h"

namespace cleave::fuzz {

// EAL once per process: no hugepages, no PCI, no shared config, one lcore.
inline void eal_init(const char* name) {
  static bool done = false;
  if (done) return;
  done = true;
  const std::string prefix =
      std::string("--file-prefix=cleave-") + name + "-" + std::to_string(getpid());
  const char* argv[] = {
      name, "--no-huge",      "--no-shconf",         "-m",          "128", "--no-pci", "-l",
      "0",  "--no-telemetry", "--log-level=*:error", prefix.c_str()};
  if (rte_eal_init(int(std::size(argv)), const_cast<char**>(argv)) < 0) {
    std::fprintf(stderr, "%s: rte_eal_init failed\n", name);
    std::abort();
  }
  // EAL makes a runtime directory even without shared config; empty, it goes with the process.
  std::atexit([] { rmdir(rte_eal_get_runtime_dir()); });
}

class FakeDataplane {
 public:
  static constexpr uint32_t kMaxApps = 8;

  explicit FakeDataplane(dp::CtlChannel& ctl) : ctl_(ctl) {
    thread_ = std::thread([this] { run(); });
  }
  ~FakeDataplane() {
    stop_ = true;
    thread_.join();
  }
  FakeDataplane(const FakeDataplane&) = delete;
  FakeDataplane& operator=(const FakeDataplane&) = delete;

  // Forgets the operator's bindings, on the dataplane's thread, and waits: each input starts
  // from the same state.
  void reset() {
    reset_.store(true);
    while (reset_.load())
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }

 private:
  void run() {
    uint64_t now = 1;
    while (!stop_.load()) {
      if (reset_.load()) {
        bindings_.clear();
        reset_.store(false);
      }
      dp::CtlRequest* r[8];
      const unsigned n = ctl_.take(r, 8);
      for (unsigned i = 0; i < n; i++) {
        answer(*r[i], now);
        dp::CtlChannel::answer(r[i]);
      }
      apps_.poll(now++);
      if (n == 0) std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  void answer(dp::CtlRequest& r, uint64_t now) {
    r.tsc_hz = 1'000'000;
    std::visit([&](auto& body) { on(body, now); }, r.body);
  }

  void on(dp::ctl::Stats&, uint64_t) {}
  void on(dp::ctl::ArpTable& r, uint64_t) { r.rows.clear(); }
  void on(dp::ctl::RouteGet& r, uint64_t) { r.route.found = false; }
  void on(dp::ctl::Nic& r, uint64_t) { r.found = false; }

  void on(dp::ctl::AppAttach& r, uint64_t now) { r.ok = apps_.attach(r.app, now); }
  void on(dp::ctl::AppDetach& r, uint64_t) {
    r.app = apps_.detach(r.app_id);
    r.ok = r.app != nullptr;
    std::erase_if(flows_, [&](const auto& kv) { return kv.second == r.app_id; });
  }
  void on(dp::ctl::AppSetMr& r, uint64_t) {
    dp::DpApp* a = apps_.find(r.app_id);
    r.ok = a != nullptr && r.index < a->mrs.size() && apps_.set_mr(r.app_id, r.index, r.mr);
  }
  void on(dp::ctl::AppSetPipe& r, uint64_t) {
    const dp::DpApp* a = apps_.find(r.app_id);
    r.ok = a != nullptr && r.index < a->pipes.size() && apps_.set_pipe(r.app_id, r.index, r.pipe);
  }
  void on(dp::ctl::AppCountersList& r, uint64_t) {
    r.rows.clear();
    apps_.for_each([&](const dp::DpApp& a) {
      if (r.rows.size() < r.rows.capacity()) r.rows.push_back({a.id, a.counters});
    });
    r.ok = true;
  }

  // A flow, listener or QP of `app` whose completion pipe `cq` exists: an id, else ENOENT.
  bool open(uint32_t app_id, uint16_t cq, int32_t& status, uint32_t& id) {
    const dp::DpApp* a = apps_.find(app_id);
    if (a == nullptr || cq >= a->pipes.size() || a->pipes[cq].kind != abi::PipeKind::kCompletion) {
      status = CL_ENOENT;
      return false;
    }
    id = next_flow_++;
    flows_[id] = app_id;
    status = 0;
    return true;
  }
  void open(dp::ctl::FlowOpen& r) {
    if (!r.transport.empty() && !transport(r.transport)) {
      r.status = CL_EINVAL;
      return;
    }
    open(r.app_id, r.cq, r.status, r.id);
  }
  void on(dp::ctl::Listen& r, uint64_t) { open(r); }
  void on(dp::ctl::Connect& r, uint64_t) { open(r); }
  void on(dp::ctl::QpCreate& r, uint64_t) {
    if (!open(r.app_id, r.cq, r.status, r.qp)) return;
    r.qpn = r.qp & 0xFFFFFF;
    r.ip = 0x0A000001;
    r.max_pmtu = 1024;
  }
  // An app's own flow, listener or QP, forgotten when `close`.
  int32_t own(uint32_t app_id, uint32_t id, bool close) {
    auto it = flows_.find(id);
    if (it == flows_.end() || it->second != app_id) return CL_ENOENT;
    if (close) flows_.erase(it);
    return 0;
  }
  void on(dp::ctl::Unlisten& r, uint64_t) { r.status = own(r.app_id, r.listener, true); }
  // One shard: no other shard's listener ever reaches it.
  void on(dp::ctl::ListenShare& r, uint64_t) { r.status = CL_EINVAL; }
  void on(dp::ctl::QpModify& r, uint64_t) { r.status = own(r.app_id, r.qp, false); }
  void on(dp::ctl::QpQuery& r, uint64_t) { r.status = own(r.app_id, r.qp, false); }
  void on(dp::ctl::QpDestroy& r, uint64_t) { r.status = own(r.app_id, r.qp, true); }
  void on(dp::ctl::FlowList& r, uint64_t) {
    r.rows.clear();
    r.transports = {"tcp"};
    r.transport_stats.clear();
    r.bindings = bindings_;
  }
  void on(dp::ctl::BindingDetach& r, uint64_t) {
    auto it = std::find_if(bindings_.begin(), bindings_.end(),
                           [&](const dp::FlowBinding& b) { return b.same_key(r.binding); });
    r.status = it == bindings_.end() ? CL_ENOENT : 0;
    if (it != bindings_.end()) {
      r.binding = *it;
      bindings_.erase(it);
    }
  }

  // A binding, checked by its transport as the flow path does.
  void on(dp::ctl::BindingAttach& r, uint64_t) {
    dp::FlowBinding& b = r.binding;
    if (b.transport.empty()) b.transport = "tcp";
    transport::Transport* t = transport(b.transport);
    if (t == nullptr) {
      r.status = CL_EINVAL;
      r.error = "no transport named '" + b.transport + "'";
      return;
    }
    std::vector<transport::Param> params;
    for (const auto& [k, v] : b.params)
      params.push_back({k, v});
    r.error = t->check_params(params);
    if (!r.error.empty()) {
      r.status = CL_EINVAL;
      return;
    }
    auto it = std::find_if(bindings_.begin(), bindings_.end(),
                           [&](const dp::FlowBinding& o) { return o.same_key(b); });
    if (it != bindings_.end()) {
      *it = b;
    } else if (b.tuple && std::count_if(bindings_.begin(), bindings_.end(), [](const auto& o) {
                            return o.tuple;
                          }) >= long(dp::kMaxTupleBindings)) {
      r.status = CL_ENOSPC;
      r.error = "too many tuple bindings";
      return;
    } else {
      bindings_.push_back(b);
    }
    r.status = 0;
  }

  transport::Transport* transport(const std::string& name) {
    auto it = transports_.find(name);
    if (it != transports_.end()) return it->second.get();
    std::unique_ptr<transport::Transport> t = transport::Registry::global().create(name);
    if (t == nullptr) return nullptr;  // not kept: names come from the input
    return transports_.emplace(name, std::move(t)).first->second.get();
  }

  dp::CtlChannel& ctl_;
  dp::AppPath apps_{kMaxApps, 32, 1'000'000};
  std::map<uint32_t, uint32_t> flows_;  // flows, listeners and QPs: their app
  uint32_t next_flow_ = 1;
  std::vector<dp::FlowBinding> bindings_;
  std::map<std::string, std::unique_ptr<transport::Transport>> transports_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reset_{false};
  std::thread thread_;
};

}  // namespace cleave::fuzz
