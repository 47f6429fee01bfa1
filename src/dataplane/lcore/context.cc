// context.cc - the transport Context the flow path lends each transport (flows_impl.h): NIC
// placement commands, the copy path, flows opened and closed by transports, and the RDMA hooks
// (RdmaContext) answered by the NIC.
#include "lcore/flows_impl.h"

#include <rte_cycles.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cleave::dp {

// ---- the Context
// ------------------------------------------------------------------------------------

// Placement commands go to the NIC of each port the flow's packets come in on: its own, and a
// QP's other routes' (each places what arrives there). The answer is its own port's.
template <typename Cmd>
int FlowPath::Ctx::each_nic(FlowId flow, Cmd cmd) {
  const Flow& f = fp_.flows_[flow];
  const int rc = fp_.nic_cmd(cmd(*fp_.ports_[f.port].nic));
  if (f.alt != nullptr) {
    for (uint8_t i = 0; i < f.alt->count; i++) {
      if (f.alt->route[i].on_nic) fp_.nic_cmd(cmd(*fp_.ports_[f.alt->route[i].port].nic));
    }
  }
  return rc;
}

int FlowPath::Ctx::ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) {
  const Flow& f = fp_.flows_[flow];
  // A message flow's MSs mean something only to a NIC flow that places by message; otherwise
  // the transport keeps to the copy path (not an error).
  if (f.msg_flow && !f.nic_msg) return -EOPNOTSUPP;
  return each_nic(flow, [&](Nic& n) { return n.ms_post(flow, mr, offset, len, msg); });
}

int FlowPath::Ctx::cursor_update(FlowId flow, uint32_t cursor) {
  return each_nic(flow, [&](Nic& n) { return n.cursor_update(flow, cursor); });
}

int FlowPath::Ctx::ms_retire(FlowId flow, uint32_t count) {
  return each_nic(flow, [&](Nic& n) { return n.ms_retire(flow, count); });
}

int FlowPath::Ctx::ms_retire_msg(FlowId flow, uint32_t msg) {
  return each_nic(flow, [&](Nic& n) { return n.ms_retire_msg(flow, msg); });
}

bool FlowPath::Ctx::copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) {
  return fp_.copy_in(src, len, mr, offset);
}

FlowId FlowPath::Ctx::flow_open(transport::ListenerId l, const transport::FlowTuple& t,
                                uint32_t initial_seq, bool messages) {
  return fp_.open_flow(tp_, l, t, initial_seq, messages, true);
}

FlowId FlowPath::Ctx::flow_open_established(transport::ListenerId l, const transport::FlowTuple& t,
                                            uint32_t initial_seq, bool messages) {
  return fp_.open_flow(tp_, l, t, initial_seq, messages, false);
}

int FlowPath::Ctx::flow_open_error() const {
  return fp_.open_error_;
}

bool FlowPath::Ctx::reply(const transport::RxHeader& to, const uint8_t* l4, size_t len) {
  return fp_.reply(to, l4, len);
}

transport::Params FlowPath::Ctx::flow_params(FlowId flow) {
  if (flow != fp_.accept_params_flow_) return {};
  return fp_.accept_params_;
}

void FlowPath::Ctx::flow_synced(FlowId flow, uint32_t initial_seq, bool messages) {
  fp_.synced(flow, initial_seq, messages);
}

void FlowPath::Ctx::flow_closed(FlowId flow) {
  fp_.closed(flow);
}

// ---- RDMA: the NIC keeps the MR table, so it answers for rkeys; RDMA addresses are zero-based.
// A QP without a NIC flow has its payloads copied, and no remote access.

int FlowPath::Ctx::rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write,
                              uint16_t* mr, uint64_t* offset) {
  Nic* nic = flow_nic(flow);
  const uint8_t access = write ? RTE_PMD_CLEAVE_MR_REMOTE_WRITE : RTE_PMD_CLEAVE_MR_REMOTE_READ;
  if (nic == nullptr || nic->rkey_check(flow, rkey, va, len, access, mr) != 0) return -EACCES;
  *offset = va;
  return 0;
}

int FlowPath::Ctx::read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset,
                             uint32_t len) {
  Nic* nic = flow_nic(flow);
  return nic != nullptr ? nic->read_post(flow, psn, mr, offset, len) : -EOPNOTSUPP;
}

int FlowPath::Ctx::read_retire(FlowId flow, uint32_t psn) {
  Nic* nic = flow_nic(flow);
  return nic != nullptr ? nic->read_retire(flow, psn) : -EOPNOTSUPP;
}

int FlowPath::Ctx::roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) {
  Nic* nic = flow_nic(flow);
  return nic != nullptr ? fp_.nic_cmd(nic->roce_resync(flow, psn, next_msg)) : -EOPNOTSUPP;
}

// The NIC holding the flow's NIC flow, or null when it has none.
Nic* FlowPath::Ctx::flow_nic(FlowId flow) const {
  const Flow& f = fp_.flows_[flow];
  return f.on_nic ? fp_.ports_[f.port].nic : nullptr;
}

// ---- what the Context asks of the flow path
// -------------------------------------------------------------------

int FlowPath::nic_cmd(int rc) {
  if (rc != 0) stats_.nic_errors++;
  return rc;
}

bool FlowPath::copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) {
  if (mr == 0 || mr >= nic_mrs_.size() || nic_mrs_[mr].app == 0) return false;
  const NicMr& m = nic_mrs_[mr];
  if (offset > m.length || len > m.length - offset) return false;
  std::memcpy(m.base + offset, src, len);
  stats_.rx_copied_bytes += len;
  return true;
}

uint32_t FlowPath::open_flow(Tp& tp, transport::ListenerId l, const transport::FlowTuple& t,
                             uint32_t initial_seq, bool messages, bool half_open) {
  if (l >= listeners_.size() || !listeners_[l].used || listeners_[l].tp != tp.index) {
    return kNoFlow;
  }
  Listener& L = listeners_[l];
  accept_params_flow_ = kNoFlow;  // flow_params() answers for the flow opened here, if any
  open_error_ = -EACCES;
  // A tuple binding may reserve the flow for another uid, or name another transport than the
  // listener's: no flow then (the transport counts the segment as for no flow).
  const FlowBinding* tb = tuple_binding(t);
  if (tb != nullptr && ((tb->uid && *tb->uid != L.app->uid) || tb->transport != tp.name)) {
    stats_.binding_refused++;
    return kNoFlow;
  }
  auto hop = routes_.lookup(Ipv4{t.remote.ip.v4_host()});
  uint8_t port = 0;
  bool found = false;
  for (size_t i = 0; i < ports_.size(); i++) {
    if (ports_[i].ip == t.local.ip.v4_host()) {
      port = static_cast<uint8_t>(i);
      found = true;
    }
  }
  if (!found || !hop || hop->port != port) {
    open_error_ = -ENETUNREACH;
    stats_.accept_refused++;
    return kNoFlow;
  }
  // No room, for now: the transport may answer without state (SYN cookies) and ask again. The
  // listener's app is charged from the SYN on, so half-open flows count in its quota too.
  open_error_ = -ENOBUFS;
  // Half-open flows take at most half of the quota: the rest stays for connections that
  // complete (a SYN cookie's among them), so a SYN flood cannot lock the app's listeners.
  if (half_open && L.app->half_open >= std::max<uint32_t>(L.app->max_flows / 2, 1)) {
    stats_.accept_refused++;
    return kNoFlow;
  }
  if (!reserve(*L.app, L.cq, kFlowEvents)) {
    stats_.accept_refused++;
    return kNoFlow;
  }
  if (!charge(*L.app)) {
    CompletionRoom(L.app->pipes[L.cq]).release(kFlowEvents);
    stats_.accept_refused++;
    return kNoFlow;
  }
  uint32_t id = alloc_flow();
  if (id == kNoFlow) {
    CompletionRoom(L.app->pipes[L.cq]).release(kFlowEvents);
    L.app->counters.flows--;
    stats_.accept_refused++;
    return kNoFlow;
  }
  open_error_ = 0;
  Flow& f = flows_[id];
  f.state = Flow::State::kOpen;
  f.charged = true;
  f.app = L.app;
  f.half_open = half_open;
  if (half_open) L.app->half_open++;
  f.owner = L.app_id;
  f.cq = L.cq;
  f.port = port;
  f.tp = tp.index;
  f.events_left = kFlowEvents;
  f.next_hop = hop->addr.host;
  f.tuple = t;
  hash_insert(id);
  fill_l2(f, rte_rdtsc());
  synced(id, initial_seq, messages);
  accept_params_.clear();
  accept_params_flow_ = id;
  if (tb != nullptr) {
    for (const auto& [k, v] : tb->params)
      accept_params_.push_back({k, v});
  }
  stats_.flows_opened++;
  return id;
}

void FlowPath::synced(uint32_t id, uint32_t initial_seq, bool messages) {
  if (id >= flows_.size()) return;
  Flow& f = flows_[id];
  if (f.state != Flow::State::kOpen || f.on_nic) return;
  Nic& nic = *ports_[f.port].nic;
  // Message flows: net_cleave places by the message option; the generic backend keeps them on
  // the copy path (a byte-stream NIC flow with no MS posted defers every segment).
  f.msg_flow = messages;
  f.nic_msg = messages && nic.backend() == NicBackend::kCleave;
  // As the claim of the flow's protocol says (that of a listener's transport may be none).
  const uint8_t claim =
      f.tuple.proto == IPPROTO_UDP ? udp_claims_[f.tuple.local.port] : proto_claims_[f.tuple.proto];
  if (claim == 0) {  // no NIC flow: the copy path
    f.nic_msg = false;
    return;
  }
  transport::NicFlow nf = claims_[claim - 1].claim.nic;
  nf.messages = f.nic_msg;
  nf.initial_seq = initial_seq;
  rte_pmd_cleave_flow spec =
      nic_spec(nf, f.tuple.remote.ip.v4_host(), f.tuple.local.ip.v4_host(), f.tuple.proto);
  spec.src_port = f.tuple.remote.port;
  spec.dst_port = f.tuple.local.port;
  // Without a NIC flow the segments still arrive (deferred, found by tuple): the copy path.
  f.on_nic = nic_cmd(nic.flow_add(id, spec)) == 0;
  if (!f.on_nic) f.nic_msg = false;
}

void FlowPath::closed(uint32_t id) {
  if (id >= flows_.size() || flows_[id].state == Flow::State::kFree) return;
  Flow& f = flows_[id];
  stats_.flows_closed++;
  // Events naming it may still sit in the transport's ring, each using its reservation: freed
  // (and what it still holds released) once they are delivered.
  f.gone = true;
  reap_.push_back(id);
}

}  // namespace cleave::dp
