// dataplane_ctl.cc - the dataplane's side of the control channel: answers management requests
// between bursts, on the dataplane lcore, from state only this lcore touches.
#include <rte_cycles.h>

#include <algorithm>
#include <variant>

#include <cleave/cleave.h>

#include "lcore/dataplane.h"

namespace cleave::dp {

namespace {
constexpr unsigned kRequestsPerPass = 4;
}

void Dataplane::serve_control(uint64_t now) {
  last_ctl_ = now;
  heartbeat_.store(heartbeat_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  CtlRequest* reqs[kRequestsPerPass];
  unsigned n = ctl_.take(reqs, kRequestsPerPass);
  for (unsigned i = 0; i < n; i++) {
    CtlRequest* r = reqs[i];
    r->tsc_hz = tsc_hz_;
    std::visit([&](auto& body) { answer(body, now); }, r->body);
    apps_.completions().flush();  // before a pipe or an app can change hands
    CtlChannel::answer(r);
  }
}

void Dataplane::answer(ctl::Stats& r, uint64_t /*now*/) {
  r.stats = stats_;
}

// ---- app table updates

void Dataplane::answer(ctl::AppAttach& r, uint64_t now) {
  r.ok = apps_.attach(r.app, now);
  // Its memory is the NIC's to read and write from now on.
  for (uint32_t i = 0; r.ok && i < r.app->mrs.size(); i++) {
    if (r.app->mrs[i].length != 0 && !flows_->app_mr(*r.app, i, r.app->mrs[i])) {
      flows_->app_detached(*r.app);
      apps_.detach(r.app->id);
      r.ok = false;
    }
  }
}

void Dataplane::answer(ctl::AppDetach& r, uint64_t /*now*/) {
  if (DpApp* a = apps_.find(r.app_id)) flows_->app_detached(*a);
  r.app = apps_.detach(r.app_id);
  r.ok = r.app != nullptr;
}

void Dataplane::answer(ctl::AppSetMr& r, uint64_t /*now*/) {
  DpApp* a = apps_.find(r.app_id);
  r.ok = a != nullptr && r.index < a->mrs.size();
  if (!r.ok) return;
  if (r.mr.length == 0) {
    // Refused while flows may still use the memory.
    r.ok = flows_->app_mr(*a, r.index, r.mr) && apps_.set_mr(a->id, r.index, r.mr);
  } else {
    apps_.set_mr(a->id, r.index, r.mr);
    if (!flows_->app_mr(*a, r.index, a->mrs[r.index])) {
      apps_.set_mr(a->id, r.index, DpMr{});
      r.ok = false;
    }
    r.mr = a->mrs[r.index];  // with its rkey
  }
}

void Dataplane::answer(ctl::AppSetPipe& r, uint64_t /*now*/) {
  const DpApp* a = apps_.find(r.app_id);
  // A completion pipe flows or listeners are bound to stays.
  r.ok = a != nullptr && r.index < a->pipes.size() &&
         !(r.pipe.kind == abi::PipeKind{} && a->pipes[r.index].kind == abi::PipeKind::kCompletion &&
           flows_->cq_in_use(*a, static_cast<uint16_t>(r.index))) &&
         apps_.set_pipe(r.app_id, r.index, r.pipe);
}

void Dataplane::answer(ctl::AppCountersList& r, uint64_t /*now*/) {
  r.rows.clear();
  apps_.for_each([&](const DpApp& a) {
    if (r.rows.size() < r.rows.capacity()) r.rows.push_back({a.id, a.counters});
  });
  r.ok = true;
}

// ---- flows

void Dataplane::answer(ctl::Listen& r, uint64_t /*now*/) {
  DpApp* a = apps_.find(r.app_id);
  r.status = a == nullptr ? CL_ENOENT
                          : flows_->listen(*a, r.cq, r.ip, r.port, r.transport, r.message, &r.id);
  if (r.status == 0) r.proto = flows_->listener_proto(r.id);
}

void Dataplane::answer(ctl::Connect& r, uint64_t now) {
  DpApp* a = apps_.find(r.app_id);
  r.status = a == nullptr
                 ? CL_ENOENT
                 : flows_->connect(*a, r.cq, r.ip, r.port, r.transport, r.message, &r.id, now);
}

void Dataplane::answer(ctl::Unlisten& r, uint64_t /*now*/) {
  r.status = flows_->unlisten(r.app_id, r.listener);
}

void Dataplane::answer(ctl::ListenShare& r, uint64_t /*now*/) {
  r.status = r.add ? flows_->listen_remote(r.app_id, r.shard, r.listener, r.ip, r.port, r.proto)
                   : flows_->unlisten_remote(r.app_id, r.listener);
}

void Dataplane::answer(ctl::FlowList& r, uint64_t /*now*/) {
  r.rows.clear();
  const uint64_t deadline = rte_rdtsc() + tsc_hz_ * r.budget_us / 1000000;
  r.next = flows_->rows(r.rows, r.only, r.start, std::min(r.max_rows, ctl::kFlowListPageRows),
                        ctl::kFlowListPageScan, deadline);
  if (r.meta) {
    r.transports = flows_->transport_names();
    r.transport_stats = flows_->transport_stats();
    r.bindings = flows_->bindings();
  }
  r.status = 0;
}

void Dataplane::answer(ctl::BindingAttach& r, uint64_t /*now*/) {
  r.status = flows_->attach(r.binding, r.error);
}

void Dataplane::answer(ctl::BindingDetach& r, uint64_t /*now*/) {
  r.status = flows_->detach(r.binding, r.error);
}

void Dataplane::answer(ctl::QpCreate& r, uint64_t /*now*/) {
  DpApp* a = apps_.find(r.app_id);
  r.status = a == nullptr ? CL_ENOENT
                          : flows_->qp_create(*a, r.cq, r.send_wr, r.recv_wr, r.params, &r.qp,
                                              &r.qpn, &r.ip, &r.max_pmtu);
}

void Dataplane::answer(ctl::QpModify& r, uint64_t now) {
  r.status = flows_->qp_modify(r.app_id, r.qp, r.attr, r.mask, now);
}

void Dataplane::answer(ctl::QpQuery& r, uint64_t /*now*/) {
  r.status = flows_->qp_query(r.app_id, r.qp, &r.attr);
}

void Dataplane::answer(ctl::QpDestroy& r, uint64_t /*now*/) {
  r.status = flows_->qp_destroy(r.app_id, r.qp);
}

// The generic backend's counters live on this lcore, so both backends are read here.
void Dataplane::answer(ctl::Nic& r, uint64_t /*now*/) {
  r.counters.clear();
  r.truncated = false;
  r.found = r.port < ports_.size();
  if (!r.found) return;
  Nic& nic = *ports_[r.port].nic;
  r.backend = static_cast<uint8_t>(nic.backend());
  r.fault_status = 0;
  for (size_t d = 0; d < kFaultDirs; d++) {
    if ((r.fault_dirs & (1u << d)) != 0 && r.fault_status == 0) {
      r.fault_status = nic.set_faults(FaultDir(d), r.fault);
    }
    r.faults[d] = nic.faults(FaultDir(d));
  }
  nic.for_each_counter([&](std::string_view name, uint64_t value) {
    if (r.counters.size() == r.counters.capacity()) {
      r.truncated = true;
      return;
    }
    NicCounterRow row;
    name = name.substr(0, row.name.size() - 1);
    std::copy(name.begin(), name.end(), row.name.begin());
    row.value = value;
    r.counters.push_back(row);
  });
}

void Dataplane::answer(ctl::ArpTable& r, uint64_t now) {
  r.rows.clear();
  r.truncated = false;
  arp_.for_each([&](const ArpEntry& e) {
    if (r.rows.size() == r.rows.capacity()) {
      r.truncated = true;
      return;
    }
    r.rows.push_back({e.ip, e.mac, e.port, e.state, e.pinned, now - e.confirmed});
  });
}

void Dataplane::answer(ctl::RouteGet& r, uint64_t now) {
  RouteAnswer& a = r.route;
  a = RouteAnswer{};
  auto hop = routes_.lookup(r.addr);
  if (!hop) return;
  a.found = true;
  a.port = hop->port;
  a.dst = hop->route->dst;
  a.kind = hop->route->kind();
  a.next_hop = hop->addr;
  if (hop->addr == ports_[hop->port].conf.ipv4.addr) {
    // Our own address: nothing to resolve.
    a.neighbour_known = true;
    a.state = ArpState::kReachable;
    a.mac = ports_[hop->port].conf.mac;
    return;
  }
  arp_.resolve(hop->port, hop->addr, now);  // starts resolution when the neighbour is unknown
  if (const ArpEntry* e = arp_.find(hop->port, hop->addr)) {
    a.neighbour_known = true;
    a.state = e->state;
    a.mac = e->mac;
  }
}

}  // namespace cleave::dp
