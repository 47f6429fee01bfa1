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
#include <vector>

#include "apps.h"
#include "ctl_channel.h"
#include "flow_info.h"
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
    using dp::CtlOp;
    r.tsc_hz = 1'000'000;
    switch (r.op) {
      case CtlOp::kStats:
        break;
      case CtlOp::kArpTable:
        r.arp.clear();
        break;
      case CtlOp::kRouteGet:
        r.route.found = false;
        break;
      case CtlOp::kApp:
        answer_app(r, now);
        break;
      case CtlOp::kNic:
        r.nic_found = false;
        break;
      case CtlOp::kFlow:
        answer_flow(r);
        break;
    }
  }

  void answer_app(dp::CtlRequest& r, uint64_t now) {
    using dp::AppOp;
    switch (r.app_op) {
      case AppOp::kAttach:
        r.app_ok = apps_.attach(r.app, now);
        break;
      case AppOp::kDetach:
        r.app = apps_.detach(r.app_id);
        r.app_ok = r.app != nullptr;
        std::erase_if(flows_, [&](const auto& kv) { return kv.second == r.app_id; });
        break;
      case AppOp::kSetMr: {
        dp::DpApp* a = apps_.find(r.app_id);
        r.app_ok = a != nullptr && r.app_index < a->mrs.size() &&
                   apps_.set_mr(r.app_id, r.app_index, r.mr);
        break;
      }
      case AppOp::kSetPipe: {
        const dp::DpApp* a = apps_.find(r.app_id);
        r.app_ok = a != nullptr && r.app_index < a->pipes.size() &&
                   apps_.set_pipe(r.app_id, r.app_index, r.pipe);
        break;
      }
      case AppOp::kCounters:
        r.app_counters.clear();
        apps_.for_each([&](const dp::DpApp& a) {
          if (r.app_counters.size() < r.app_counters.capacity()) {
            r.app_counters.push_back({a.id, a.counters});
          }
        });
        r.app_ok = true;
        break;
    }
  }

  // A flow, listener or QP of `app` whose completion pipe `cq` exists: an id, else ENOENT.
  void open(dp::CtlRequest& r) {
    const dp::DpApp* a = apps_.find(r.app_id);
    if (a == nullptr || r.flow_cq >= a->pipes.size() ||
        a->pipes[r.flow_cq].kind != abi::PipeKind::kCompletion) {
      r.flow_status = CL_ENOENT;
      return;
    }
    r.flow_id = next_flow_++;
    flows_[r.flow_id] = r.app_id;
    r.qp_qpn = r.flow_id & 0xFFFFFF;
    r.qp_ip = 0x0A000001;
    r.qp_max_pmtu = 1024;
    r.flow_status = 0;
  }

  void answer_flow(dp::CtlRequest& r) {
    using dp::FlowOp;
    switch (r.flow_op) {
      case FlowOp::kListen:
      case FlowOp::kConnect:
        if (!r.flow_transport.empty() && !transport(r.flow_transport)) {
          r.flow_status = CL_EINVAL;
          break;
        }
        open(r);
        break;
      case FlowOp::kQpCreate:
        open(r);
        break;
      case FlowOp::kUnlisten:
      case FlowOp::kQpModify:
      case FlowOp::kQpQuery:
      case FlowOp::kQpDestroy: {
        auto it = flows_.find(r.flow_id);
        r.flow_status = it != flows_.end() && it->second == r.app_id ? 0 : CL_ENOENT;
        if (r.flow_status == 0 &&
            (r.flow_op == FlowOp::kUnlisten || r.flow_op == FlowOp::kQpDestroy)) {
          flows_.erase(it);
        }
        break;
      }
      case FlowOp::kList:
        r.flow_rows.clear();
        r.transports = {"tcp"};
        r.transport_stats.clear();
        r.bindings = bindings_;
        break;
      case FlowOp::kAttach:
        attach(r);
        break;
      case FlowOp::kDetach: {
        auto it = std::find_if(bindings_.begin(), bindings_.end(),
                               [&](const dp::FlowBinding& b) { return b.same_key(r.binding); });
        r.flow_status = it == bindings_.end() ? CL_ENOENT : 0;
        if (it != bindings_.end()) {
          r.binding = *it;
          bindings_.erase(it);
        }
        break;
      }
    }
  }

  // A binding, checked by its transport as the flow path does.
  void attach(dp::CtlRequest& r) {
    dp::FlowBinding& b = r.binding;
    if (b.transport.empty()) b.transport = "tcp";
    transport::Transport* t = transport(b.transport);
    if (t == nullptr) {
      r.flow_status = CL_EINVAL;
      r.flow_error = "no transport named '" + b.transport + "'";
      return;
    }
    std::vector<transport::Param> params;
    for (const auto& [k, v] : b.params)
      params.push_back({k, v});
    r.flow_error = t->check_params(params);
    if (!r.flow_error.empty()) {
      r.flow_status = CL_EINVAL;
      return;
    }
    auto it = std::find_if(bindings_.begin(), bindings_.end(),
                           [&](const dp::FlowBinding& o) { return o.same_key(b); });
    if (it != bindings_.end()) {
      *it = b;
    } else if (b.tuple && std::count_if(bindings_.begin(), bindings_.end(), [](const auto& o) {
                            return o.tuple;
                          }) >= long(dp::kMaxTupleBindings)) {
      r.flow_status = CL_ENOSPC;
      r.flow_error = "too many tuple bindings";
      return;
    } else {
      bindings_.push_back(b);
    }
    r.flow_status = 0;
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
