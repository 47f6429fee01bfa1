// dataplane_ctl.cc - the dataplane's side of the control channel: answers management requests
// between bursts, on the dataplane lcore, from state only this lcore touches.
#include <rte_cycles.h>

#include <algorithm>

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
    switch (r->op) {
      case CtlOp::kStats:
        r->stats = stats_;
        break;
      case CtlOp::kArpTable:
        answer_arp_table(r, now);
        break;
      case CtlOp::kRouteGet:
        answer_route_get(r, now);
        break;
      case CtlOp::kApp:
        answer_app(r, now);
        break;
      case CtlOp::kNic:
        answer_nic(r);
        break;
      case CtlOp::kFlow:
        answer_flow(r, now);
        break;
    }
    CtlChannel::answer(r);
  }
}

void Dataplane::answer_app(CtlRequest* r, uint64_t now) {
  switch (r->app_op) {
    case AppOp::kAttach:
      r->app_ok = apps_.attach(r->app, now);
      // Its memory is the NIC's to read and write from now on.
      for (uint32_t i = 0; r->app_ok && i < r->app->mrs.size(); i++) {
        if (r->app->mrs[i].length != 0 && !flows_->app_mr(*r->app, i, r->app->mrs[i])) {
          flows_->app_detached(*r->app);
          apps_.detach(r->app->id);
          r->app_ok = false;
        }
      }
      break;
    case AppOp::kDetach:
      if (DpApp* a = apps_.find(r->app_id)) flows_->app_detached(*a);
      r->app = apps_.detach(r->app_id);
      r->app_ok = r->app != nullptr;
      break;
    case AppOp::kSetMr: {
      DpApp* a = apps_.find(r->app_id);
      r->app_ok = a != nullptr && r->app_index < a->mrs.size();
      if (!r->app_ok) break;
      if (r->mr.length == 0) {
        // Refused while flows may still use the memory.
        r->app_ok =
            flows_->app_mr(*a, r->app_index, r->mr) && apps_.set_mr(a->id, r->app_index, r->mr);
      } else {
        apps_.set_mr(a->id, r->app_index, r->mr);
        if (!flows_->app_mr(*a, r->app_index, a->mrs[r->app_index])) {
          apps_.set_mr(a->id, r->app_index, DpMr{});
          r->app_ok = false;
        }
        r->mr = a->mrs[r->app_index];  // with its rkey
      }
      break;
    }
    case AppOp::kSetPipe: {
      const DpApp* a = apps_.find(r->app_id);
      // A completion pipe flows or listeners are bound to stays.
      r->app_ok = a != nullptr && r->app_index < a->pipes.size() &&
                  !(r->pipe.kind == abi::PipeKind{} &&
                    a->pipes[r->app_index].kind == abi::PipeKind::kCompletion &&
                    flows_->cq_in_use(*a, static_cast<uint16_t>(r->app_index))) &&
                  apps_.set_pipe(r->app_id, r->app_index, r->pipe);
      break;
    }
    case AppOp::kCounters:
      r->app_counters.clear();
      apps_.for_each([&](const DpApp& a) {
        if (r->app_counters.size() < r->app_counters.capacity()) {
          r->app_counters.push_back({a.id, a.counters});
        }
      });
      r->app_ok = true;
      break;
  }
}

void Dataplane::answer_flow(CtlRequest* r, uint64_t now) {
  DpApp* a = nullptr;
  if (r->flow_op == FlowOp::kListen || r->flow_op == FlowOp::kConnect ||
      r->flow_op == FlowOp::kQpCreate) {
    a = apps_.find(r->app_id);
    if (a == nullptr) {
      r->flow_status = CL_ENOENT;
      return;
    }
  }
  switch (r->flow_op) {
    case FlowOp::kListen:
      r->flow_status = flows_->listen(*a, r->flow_cq, r->flow_ip, r->flow_port, r->flow_transport,
                                      r->flow_message, &r->flow_id);
      break;
    case FlowOp::kUnlisten:
      r->flow_status = flows_->unlisten(r->app_id, r->flow_id);
      break;
    case FlowOp::kConnect:
      r->flow_status = flows_->connect(*a, r->flow_cq, r->flow_ip, r->flow_port, r->flow_transport,
                                       r->flow_message, &r->flow_id, now);
      break;
    case FlowOp::kList:
      r->flow_rows.clear();
      flows_->rows(r->flow_rows, r->flow_id);
      r->transports = flows_->transport_names();
      r->transport_stats = flows_->transport_stats();
      r->bindings = flows_->bindings();
      r->flow_status = 0;
      break;
    case FlowOp::kAttach:
      r->flow_status = flows_->attach(r->binding, r->flow_error);
      break;
    case FlowOp::kDetach:
      r->flow_status = flows_->detach(r->binding, r->flow_error);
      break;
    case FlowOp::kQpCreate:
      r->flow_status = flows_->qp_create(*a, r->flow_cq, r->qp_send_wr, r->qp_recv_wr, r->qp_params,
                                         &r->flow_id, &r->qp_qpn, &r->qp_ip, &r->qp_max_pmtu);
      break;
    case FlowOp::kQpModify:
      r->flow_status = flows_->qp_modify(r->app_id, r->flow_id, r->qp_attr, r->qp_mask, now);
      break;
    case FlowOp::kQpQuery:
      r->flow_status = flows_->qp_query(r->app_id, r->flow_id, &r->qp_attr);
      break;
    case FlowOp::kQpDestroy:
      r->flow_status = flows_->qp_destroy(r->app_id, r->flow_id);
      break;
  }
}

// The generic backend's counters live on this lcore, so both backends are read here.
void Dataplane::answer_nic(CtlRequest* r) {
  r->nic_counters.clear();
  r->nic_truncated = false;
  r->nic_found = r->nic_port < ports_.size();
  if (!r->nic_found) return;
  Nic& nic = *ports_[r->nic_port].nic;
  r->nic_backend = static_cast<uint8_t>(nic.backend());
  r->nic_fault_status = 0;
  for (size_t d = 0; d < kFaultDirs; d++) {
    if ((r->nic_fault_dirs & (1u << d)) != 0 && r->nic_fault_status == 0) {
      r->nic_fault_status = nic.set_faults(FaultDir(d), r->nic_fault);
    }
    r->nic_faults[d] = nic.faults(FaultDir(d));
  }
  nic.for_each_counter([&](std::string_view name, uint64_t value) {
    if (r->nic_counters.size() == r->nic_counters.capacity()) {
      r->nic_truncated = true;
      return;
    }
    NicCounterRow row;
    name = name.substr(0, row.name.size() - 1);
    std::copy(name.begin(), name.end(), row.name.begin());
    row.value = value;
    r->nic_counters.push_back(row);
  });
}

void Dataplane::answer_arp_table(CtlRequest* r, uint64_t now) {
  r->arp.clear();
  r->arp_truncated = false;
  arp_.for_each([&](const ArpEntry& e) {
    if (r->arp.size() == r->arp.capacity()) {
      r->arp_truncated = true;
      return;
    }
    r->arp.push_back({e.ip, e.mac, e.port, e.state, e.pinned, now - e.confirmed});
  });
}

void Dataplane::answer_route_get(CtlRequest* r, uint64_t now) {
  RouteAnswer& a = r->route;
  a = RouteAnswer{};
  auto hop = routes_.lookup(r->addr);
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
