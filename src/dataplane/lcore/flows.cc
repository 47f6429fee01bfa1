// flows.cc - the flow path's tables and control: construction, its transports, the flow table
// and app quotas, apps' flow requests, listen/connect/detach, MRs, bindings, management (flows.h).
//
// Nothing on the packet path allocates, locks or logs: tables are sized at construction, and a
// transport's bursts are staged in arrays reserved up front.
#include "lcore/flows_impl.h"

#include <cleave/cleave.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cleave::dp {

namespace {

// A binding's parameters as the transport takes them (views into the binding).
std::vector<transport::Param> as_params(const FlowBinding& b) {
  std::vector<transport::Param> v;
  for (const auto& [k, val] : b.params)
    v.push_back({k, val});
  return v;
}

}  // namespace

// ---- construction
// ------------------------------------------------------------------------------------

FlowPath::FlowPath(const FlowParams& params, std::vector<FlowPort> ports, ArpTable& arp,
                   const RouteTable& routes, rte_mempool* pool, FlowIo& io, FlowStats& stats)
    : p_(params),
      ports_(std::move(ports)),
      arp_(arp),
      routes_(routes),
      pool_(pool),
      io_(io),
      stats_(stats),
      flows_(params.max_flows),
      listeners_(params.max_listeners),
      nic_mrs_(params.max_nic_mrs),
      qp_gen_(params.max_flows) {
  // The table is indexed by the port-wide flow id; this shard hands out only its own range.
  flow_ids_ = IdRange::of(params.max_flows, params.shard, params.shards);
  mr_ids_ = IdRange::of(params.max_nic_mrs, params.shard, params.shards);
  mr_ids_.first = std::max<uint32_t>(mr_ids_.first, 1);
  reta_ = rss::default_reta(params.shards);
  free_head_ = flow_ids_.first < flow_ids_.end ? flow_ids_.first : uint32_t(flows_.size());
  for (uint32_t i = flow_ids_.first; i < flow_ids_.end; i++)
    flows_[i].next_free = i + 1 < flow_ids_.end ? i + 1 : uint32_t(flows_.size());
  size_t cap = 1;  // flows and listeners, at most half full
  while (cap < (size_t(params.max_flows) + params.max_listeners) * 2)
    cap <<= 1;
  hash_.assign(cap, 0);
  resolving_.reserve(params.max_flows);
  reap_.reserve(params.max_flows);
  data_waiting_.reserve(params.max_flows);
  tuple_bindings_.reserve(kMaxTupleBindings);
  accept_params_.reserve(16);
  shinfo_.free_cb = [](void*, void*) {};
  rte_mbuf_ext_refcnt_set(&shinfo_, 1);  // never reaches zero: app memory is not DPDK's
  placement_offset_ = rte_pmd_cleave_placement_offset();
  if (const int bit = rte_pmd_cleave_tx_icrc_bit(); bit >= 0) icrc_flag_ = uint64_t(1) << bit;
  if (const int bit = rte_pmd_cleave_tx_crc32c_bit(); bit >= 0) crc32c_flag_ = uint64_t(1) << bit;
  while ((uint64_t(1) << qpn_bits_) < params.max_flows)
    qpn_bits_++;
  claims_.reserve(transport::Registry::kMaxTransports);
  udp_claims_.assign(65536, 0);
  learn_claims();
  std::string error;
  transport_for("tcp", 0, error);  // the default one exists from the start
}

FlowPath::~FlowPath() = default;

std::vector<std::string> FlowPath::transport_names() const {
  lcore_.check("FlowPath::transport_names");
  std::vector<std::string> v;
  for (const auto& tp : transports_)
    v.push_back(tp->name);
  return v;
}

FlowPath::Tp* FlowPath::transport_for(std::string_view name, uint16_t port, std::string& error) {
  if (name.empty()) {
    const FlowBinding* b = binding(port);
    name = b != nullptr ? std::string_view(b->transport) : "tcp";
  }
  for (auto& tp : transports_) {
    if (tp->name == name) return tp.get();
  }
  if (transports_.size() >= 255) {
    error = "too many transports";
    return nullptr;
  }
  std::unique_ptr<transport::Transport> t = transport::Registry::global().create(name);
  if (!t) {
    error = "no transport named '" + std::string(name) + "'";
    return nullptr;
  }
  // The configuration's settings for it (a bad one was refused when the config was read).
  std::vector<transport::Param> settings;
  for (const TransportSetting& s : p_.settings) {
    if (s.transport == name) settings.push_back({s.key, s.value});
  }
  if (error = t->configure(settings); !error.empty()) return nullptr;
  auto tp = std::make_unique<Tp>();
  tp->name = std::string(name);
  tp->index = uint8_t(transports_.size());
  tp->t = std::move(t);
  tp->ctx = std::make_unique<Ctx>(*this, *tp);
  // RoCEv2's UDP checksum is 0 (the ICRC covers the packet); Solar's covers its header, the
  // block's CRC32C only the block.
  const transport::NicParser parser = tp->t->claim().nic.parser;
  tp->trailer_flag = parser == transport::NicParser::kRoce    ? icrc_flag_
                     : parser == transport::NicParser::kSolar ? crc32c_flag_
                                                              : 0;
  tp->trailer_udp_csum = parser == transport::NicParser::kSolar;
  tp->hdrs.reserve(kRxStage);
  tp->mbufs.reserve(kRxStage);
  tp->reqs.reserve(kAppStage);
  transports_.push_back(std::move(tp));
  link_claims();
  return transports_.back().get();
}

// ---- flow table
// --------------------------------------------------------------------------------------

uint32_t FlowPath::alloc_flow() {
  if (free_head_ >= flows_.size()) return kNoFlow;
  uint32_t id = free_head_;
  free_head_ = flows_[id].next_free;
  flows_[id] = Flow{};
  return id;
}

void FlowPath::free_flow(uint32_t id) {
  Flow& f = flows_[id];
  uncharge(f);
  release(f, f.outstanding + f.events_left);
  nic_off(f, id);
  if (!f.qp) hash_remove(id);  // a QP is found by its number, never in the tuple hash
  f = Flow{};
  f.next_free = free_head_;
  free_head_ = id;
}

// One more flow for the app, within its quota (quota.flows); false, counted, when it has none.
bool FlowPath::charge(DpApp& a) {
  if (a.counters.flows >= a.max_flows) {
    a.counters.flows_over_quota++;
    stats_.flows_over_quota++;
    return false;
  }
  a.counters.flows++;
  return true;
}

void FlowPath::uncharge(Flow& f) {
  established(f);
  if (!f.charged) return;
  f.charged = false;
  if (f.app != nullptr && f.app->counters.flows != 0) f.app->counters.flows--;
}

void FlowPath::established(Flow& f) {
  if (!f.half_open) return;
  f.half_open = false;
  if (f.app != nullptr && f.app->half_open != 0) f.app->half_open--;
}

bool FlowPath::fill_l2(Flow& f, uint64_t now) {
  f.l2_ready = fill_hdr(f.port, f.next_hop, f.tuple.local.ip.v4_host(), f.tuple.remote.ip.v4_host(),
                        f.tuple.proto, f.hdr.data(), now);
  return f.l2_ready;
}

// An Ethernet and IPv4 header template from `port` to `rip` (lip ours), once the next hop's MAC
// is known; false, and ARP asked, until then.
bool FlowPath::fill_hdr(uint8_t port, uint32_t next_hop, uint32_t lip, uint32_t rip, uint8_t proto,
                        uint8_t* hdr, uint64_t now) {
  const Mac* mac = arp_.resolve(port, Ipv4{next_hop}, now);
  if (mac == nullptr) return false;
  auto* eth = reinterpret_cast<rte_ether_hdr*>(hdr);
  std::memcpy(eth->dst_addr.addr_bytes, mac->b.data(), RTE_ETHER_ADDR_LEN);
  eth->src_addr = ports_[port].mac;
  eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->type_of_service = 0;
  ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = proto;
  ip->src_addr = rte_cpu_to_be_32(lip);
  ip->dst_addr = rte_cpu_to_be_32(rip);
  return true;
}

// The flow's NIC flows off every port that has one (its own, and a QP's other routes').
void FlowPath::nic_off(Flow& f, uint32_t id) {
  if (f.on_nic) nic_cmd(ports_[f.port].nic->flow_remove(id));
  f.on_nic = f.nic_msg = false;
  if (f.alt == nullptr) return;
  for (uint8_t i = 0; i < f.alt->count; i++) {
    AltRoute& r = f.alt->route[i];
    if (r.on_nic) nic_cmd(ports_[r.port].nic->flow_remove(id));
    r.on_nic = false;
  }
}

// Flows their transport released, once no event in a transport's ring names them any more.
void FlowPath::reap() {
  for (uint32_t id : reap_)
    free_flow(id);
  reap_.clear();
}

// ---- apps' requests
// ----------------------------------------------------------------------------------

FlowAdmit FlowPath::flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr,
                                 abi::Completion& c, uint64_t /*now*/) {
  lcore_.check("FlowPath::flow_request");
  c.flow = e.target;
  if (e.target >= flows_.size() || flows_[e.target].owner != a.id ||
      flows_[e.target].state == Flow::State::kFree || flows_[e.target].app != &a) {
    c.status = CL_ENOENT;
    return FlowAdmit::kDone;
  }
  Flow& f = flows_[e.target];
  if (f.app_done || f.gone || f.state != Flow::State::kOpen) {
    c.status = f.state == Flow::State::kResolving ? CL_EAGAIN : CL_EPIPE;
    return FlowAdmit::kDone;
  }
  // RDMA and immediate data are a QP's; close and abort are a stream's (a QP is destroyed).
  const bool rdma = e.opcode == abi::kOpRdmaWrite || e.opcode == abi::kOpRdmaRead;
  const bool stream_op = e.opcode == abi::kOpFlowClose || e.opcode == abi::kOpFlowAbort;
  if ((!f.qp && (rdma || e.flags != 0)) || (f.qp && stream_op) ||
      (e.flags != 0 && e.opcode != abi::kOpFlowSend && e.opcode != abi::kOpRdmaWrite)) {
    c.status = CL_EOPNOTSUPP;
    return FlowAdmit::kDone;
  }
  transport::AppRequest r;
  r.flow = e.target;
  r.wr_id = e.wr_id;
  switch (e.opcode) {
    case abi::kOpFlowSend:
    case abi::kOpFlowRecv:
    case abi::kOpRdmaWrite:
    case abi::kOpRdmaRead:
      if (!reserve(a, f.cq, 1)) return FlowAdmit::kWait;
      f.outstanding++;
      r.kind = e.opcode == abi::kOpFlowSend    ? transport::ReqKind::kSend
               : e.opcode == abi::kOpFlowRecv  ? transport::ReqKind::kRecv
               : e.opcode == abi::kOpRdmaWrite ? transport::ReqKind::kWrite
                                               : transport::ReqKind::kRead;
      r.mr = nic_mr;
      r.offset = e.offset;
      r.len = e.length;
      r.imm = e.imm;
      r.flags = (e.flags & abi::kSendImm) != 0 ? transport::kReqImm : 0;
      r.rkey = e.remote_mr;
      r.remote_addr = e.remote_offset;
      break;
    case abi::kOpFlowClose:
      r.kind = transport::ReqKind::kClose;
      break;
    default:
      r.kind = transport::ReqKind::kAbort;
      break;
  }
  Tp& tp = *transports_[f.tp];
  if (tp.reqs.size() == kAppStage) app_flush(tp, rte_rdtsc());
  tp.reqs.push_back(r);
  if (r.kind != transport::ReqKind::kClose && r.kind != transport::ReqKind::kAbort) {
    return FlowAdmit::kTaken;
  }
  c.status = 0;
  return FlowAdmit::kDone;
}

// The requests staged for one transport, in one app_burst.
unsigned FlowPath::app_flush(Tp& tp, uint64_t now) {
  const auto n = unsigned(tp.reqs.size());
  if (n == 0) return 0;
  tp.ctx->at(now);
  tp.t->app_burst(tp.reqs, *tp.ctx);
  tp.ctx->flush();
  tp.reqs.clear();
  reap();
  return n;
}

unsigned FlowPath::poll(uint64_t now) {
  lcore_.bind();
  unsigned work = 0;
  if (transport::Registry::global().entries().size() != registry_seen_) learn_claims();
  for (auto& tp : transports_) {
    work += app_flush(*tp, now);
    tp->ctx->at(now);
    tp->t->tick(*tp->ctx);
    tp->ctx->flush();
  }
  reap();
  if (!data_waiting_.empty()) {
    size_t keep = 0;
    for (uint32_t id : data_waiting_) {
      Flow& f = flows_[id];
      f.data_listed = false;
      if (f.app != nullptr && f.data_pending != 0) post_data(f);
      if (f.data_listed) data_waiting_[keep++] = id;
    }
    data_waiting_.resize(keep);
  }
  if (!resolving_.empty() && now >= next_resolve_check_) {
    next_resolve_check_ = now + p_.tsc_hz / (1000000 / kResolveCheckUs);
    size_t keep = 0;
    for (uint32_t id : resolving_) {
      Flow& f = flows_[id];
      if (f.state != Flow::State::kResolving) continue;
      const ArpEntry* e = arp_.find(f.port, Ipv4{f.next_hop});
      if (e != nullptr && e->state == ArpState::kFailed) {
        fail_connect(id, CL_EHOSTUNREACH);
      } else if (fill_l2(f, now)) {
        start_connect(id);
        work++;
      } else {
        resolving_[keep++] = id;
      }
    }
    resolving_.resize(keep);
  }
  return work;
}

// ---- control
// -----------------------------------------------------------------------------------------

int FlowPath::listen(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view name,
                     bool message, uint32_t* listener) {
  lcore_.check("FlowPath::listen");
  if (port == 0) return CL_EINVAL;
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  if (ip != 0 &&
      std::none_of(ports_.begin(), ports_.end(), [&](const FlowPort& p) { return p.ip == ip; })) {
    return CL_EINVAL;
  }
  if (const FlowBinding* b = binding(port); b != nullptr && b->uid && *b->uid != a.uid) {
    stats_.binding_refused++;
    return CL_EACCES;
  }
  uint32_t free = free_listener(ip, port);
  if (free == kNoFlow - 1) return CL_EADDRINUSE;
  if (free == kNoFlow) return CL_ENOSPC;
  std::string error;
  Tp* tp = transport_for(name, port, error);
  if (tp == nullptr) return CL_ENOENT;
  // Its traffic is what its transport claims: UDP by port, so only a port the claim takes.
  const uint8_t proto = proto_of(*tp);
  if (const ClaimEntry* c = claim_of(*tp);
      proto == IPPROTO_UDP && !std::binary_search(c->ports.begin(), c->ports.end(), port)) {
    return CL_EINVAL;
  }
  std::vector<transport::Param> params = params_for(nullptr, port, *tp, message);
  if (message && !tp->t->check_params(params).empty()) return CL_EOPNOTSUPP;
  transport::Endpoint local{transport::IpAddr::v4(ip), port};
  int rc = tp->t->listen(free, local, params);
  if (rc != 0) return rc == -EEXIST ? CL_EADDRINUSE : CL_EINVAL;
  listeners_[free] = Listener{true, proto, &a, a.id, cq, tp->index, ip, port};
  listener_insert(free);
  *listener = free;
  return 0;
}

uint8_t FlowPath::listener_proto(uint32_t listener) const {
  return listener < listeners_.size() ? listeners_[listener].proto : uint8_t(IPPROTO_TCP);
}

// A free listener slot for (ip, port), whatever the protocol: kNoFlow when the table is full,
// kNoFlow - 1 when a listener (here or another shard's) has the address.
uint32_t FlowPath::free_listener(uint32_t ip, uint16_t port) const {
  uint32_t free = kNoFlow;
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    const Listener& l = listeners_[i];
    if (l.used && l.port == port && (l.ip == 0 || ip == 0 || l.ip == ip)) return kNoFlow - 1;
    if (!l.used && free == kNoFlow) free = i;
  }
  return free;
}

int FlowPath::listen_remote(uint32_t app_id, uint16_t shard, uint32_t listener, uint32_t ip,
                            uint16_t port, uint8_t proto) {
  lcore_.check("FlowPath::listen_remote");
  if (port == 0 || shard == p_.shard || shard >= p_.shards) return CL_EINVAL;
  uint32_t free = free_listener(ip, port);
  if (free == kNoFlow - 1) return CL_EADDRINUSE;
  if (free == kNoFlow) return CL_ENOSPC;
  Listener l;
  l.used = true;
  l.proto = proto;
  l.app_id = app_id;
  l.tp = UINT8_MAX;  // no transport of this shard's
  l.ip = ip;
  l.port = port;
  l.remote = true;
  l.shard = shard;
  l.remote_id = listener;
  listeners_[free] = l;
  listener_insert(free);
  return 0;
}

int FlowPath::unlisten_remote(uint32_t app_id, uint32_t listener) {
  lcore_.check("FlowPath::unlisten_remote");
  int rc = CL_ENOENT;
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    const Listener& l = listeners_[i];
    if (!l.used || !l.remote || l.app_id != app_id ||
        (listener != kNoFlow && l.remote_id != listener))
      continue;
    listener_remove(i);
    listeners_[i] = Listener{};
    rc = 0;
  }
  return rc;
}

int FlowPath::unlisten(uint32_t app_id, uint32_t listener) {
  lcore_.check("FlowPath::unlisten");
  if (listener >= listeners_.size() || !listeners_[listener].used || listeners_[listener].remote ||
      listeners_[listener].app_id != app_id) {
    return CL_ENOENT;
  }
  transports_[listeners_[listener].tp]->t->unlisten(listener);
  listener_remove(listener);
  listeners_[listener] = Listener{};
  return 0;
}

int FlowPath::connect(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view name,
                      bool message, uint32_t* flow, uint64_t now) {
  lcore_.check("FlowPath::connect");
  if (port == 0 || ip == 0) return CL_EINVAL;
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  auto hop = routes_.lookup(Ipv4{ip});
  if (!hop || hop->port >= ports_.size()) return CL_ENETUNREACH;
  transport::FlowTuple tuple;
  tuple.proto = 6;
  tuple.local.ip = transport::IpAddr::v4(ports_[hop->port].ip);
  tuple.remote = {transport::IpAddr::v4(ip), port};
  // An ephemeral port no flow to this peer uses, and no listener (RFC 6056).
  tuple.local.port = ephemeral_port(tuple);
  if (tuple.local.port == 0) return CL_EADDRINUSE;
  // The tuple's binding, then the port's: the app's own transport name wins over both.
  const FlowBinding* tb = tuple_binding(tuple);
  if (tb != nullptr && tb->uid && *tb->uid != a.uid) {
    stats_.binding_refused++;
    return CL_EACCES;
  }
  if (name.empty() && tb != nullptr) name = tb->transport;
  std::string error;
  Tp* tp = transport_for(name, port, error);
  if (tp == nullptr) return CL_ENOENT;
  // A transport of another protocol than TCP's: its own, and for UDP one of its claimed ports,
  // where the peer's answers reach it.
  if (const ClaimEntry* c = claim_of(*tp); c != nullptr && c->claim.proto != tuple.proto) {
    tuple.proto = c->claim.proto;
    tuple.local.port = c->ports.empty() ? ephemeral_port(tuple) : claimed_port(*c, tuple);
    if (tuple.local.port == 0) return CL_EADDRINUSE;
  }
  if (message && !tp->t->check_params(params_for(&tuple, port, *tp, true)).empty()) {
    return CL_EOPNOTSUPP;
  }
  if (!charge(a)) return CL_EDQUOT;
  if (!reserve(a, cq, kFlowEvents)) {
    a.counters.flows--;
    return CL_EBUSY;
  }
  uint32_t id = alloc_flow();
  if (id == kNoFlow) {
    CompletionRoom(a.pipes[cq]).release(kFlowEvents);
    a.counters.flows--;
    return CL_ENOSPC;
  }
  Flow& f = flows_[id];
  f.charged = true;
  f.app = &a;
  f.owner = a.id;
  f.cq = cq;
  f.port = hop->port;
  f.tp = tp->index;
  f.events_left = kFlowEvents;
  f.message = message;
  f.next_hop = hop->addr.host;
  f.tuple = tuple;
  hash_insert(id);
  stats_.flows_opened++;
  *flow = id;
  if (fill_l2(f, now)) {
    f.state = Flow::State::kOpen;
    start_connect(id);
  } else {
    f.state = Flow::State::kResolving;  // poll() connects once ARP answers
    resolving_.push_back(id);
  }
  return 0;
}

void FlowPath::start_connect(uint32_t id) {
  Flow& f = flows_[id];
  f.state = Flow::State::kOpen;
  Tp& tp = *transports_[f.tp];
  std::vector<transport::Param> params = params_for(&f.tuple, f.tuple.remote.port, tp, f.message);
  tp.ctx->at(rte_rdtsc());
  int rc = tp.t->connect(id, f.tuple, params, *tp.ctx);
  tp.ctx->flush();
  if (rc != 0) fail_connect(id, rc);
  reap();
}

void FlowPath::app_detached(DpApp& a) {
  lcore_.check("FlowPath::app_detached");
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    if (listeners_[i].used && !listeners_[i].remote && listeners_[i].app_id == a.id) {
      unlisten(a.id, i);
    }
  }
  const uint64_t now = rte_rdtsc();
  for (uint32_t id = 0; id < flows_.size(); id++) {
    Flow& f = flows_[id];
    if (f.state == Flow::State::kFree || f.owner != a.id) continue;
    uncharge(f);
    if (f.state == Flow::State::kResolving) {
      f.app = nullptr;
      free_flow(id);
      continue;
    }
    f.app = nullptr;  // events from here on are dropped
    if (f.qp) {
      free_qp(id);
      continue;
    }
    if (!f.gone) {
      Tp& tp = *transports_[f.tp];
      transport::AppRequest r;
      r.flow = id;
      r.kind = transport::ReqKind::kAbort;
      r.flags = transport::kReqDetach;  // a close the app asked for may finish without it
      tp.ctx->at(now);
      tp.t->app_burst(std::span<const transport::AppRequest>(&r, 1), *tp.ctx);
      tp.ctx->flush();
    }
    // Whatever remains (a close going on, TIME-WAIT) needs no placement: off the NIC, so its
    // MRs can go.
    if (!f.gone) nic_off(f, id);
  }
  reap();
  for (uint32_t mr = 0; mr < a.mrs.size(); mr++) {
    if (a.mrs[mr].nic_mr != 0) app_mr(a, mr, DpMr{});
  }
}

bool FlowPath::app_mr(DpApp& a, uint32_t mr, const DpMr& v) {
  lcore_.check("FlowPath::app_mr");
  if (mr >= a.mrs.size()) return false;
  DpMr& cur = a.mrs[mr];
  if (cur.nic_mr != 0) {
    // Removing memory a flow may still send from or receive into: refused while the app has
    // flows that are not closed.
    if (v.length == 0) {
      for (const Flow& f : flows_) {
        if (f.state != Flow::State::kFree && f.app == &a && !f.app_done) return false;
      }
    }
    for (const FlowPort& p : ports_)
      nic_cmd(p.nic->mr_remove(cur.nic_mr));
    nic_mrs_[cur.nic_mr] = NicMr{.tag = nic_mrs_[cur.nic_mr].tag};  // the next rkey differs
    cur.nic_mr = 0;
    cur.rkey = 0;
  }
  if (v.length == 0) return true;
  uint16_t id = 0;
  for (uint32_t i = mr_ids_.first; i < mr_ids_.end; i++) {
    if (nic_mrs_[i].app == 0) {
      id = uint16_t(i);
      break;
    }
  }
  if (id == 0) return false;
  // RoCE peers of the app's QPs reach it by rkey = tag << 16 | id; a new tag on each reuse of
  // the id, so an old rkey never names new memory.
  uint8_t remote = 0;
  if ((v.access & abi::kAccessRemoteRead) != 0) remote |= RTE_PMD_CLEAVE_MR_REMOTE_READ;
  if ((v.access & abi::kAccessRemoteWrite) != 0) remote |= RTE_PMD_CLEAVE_MR_REMOTE_WRITE;
  const auto tag = uint16_t(nic_mrs_[id].tag == 0xFFFF ? 1 : nic_mrs_[id].tag + 1);
  for (size_t i = 0; i < ports_.size(); i++) {
    if (nic_cmd(ports_[i].nic->mr_add(id, v.base, v.length, a.id, remote, tag)) != 0) {
      for (size_t j = 0; j < i; j++)
        ports_[j].nic->mr_remove(id);
      return false;
    }
  }
  nic_mrs_[id] = NicMr{v.base, v.length, a.id, tag};
  cur.nic_mr = id;
  cur.rkey = remote != 0 ? uint32_t(tag) << 16 | id : 0;
  return true;
}

bool FlowPath::cq_in_use(const DpApp& a, uint16_t cq) const {
  lcore_.check("FlowPath::cq_in_use");
  for (const Listener& l : listeners_) {
    if (l.used && l.app == &a && l.cq == cq) return true;
  }
  for (const Flow& f : flows_) {
    // A flow the app is done with (TIME-WAIT) posts nothing more to it.
    if (f.state != Flow::State::kFree && f.app == &a && f.cq == cq && !f.app_done) return true;
  }
  return false;
}

const FlowBinding* FlowPath::binding(uint16_t port) const {
  for (const FlowBinding& b : bindings_) {
    if (b.local_port == port) return &b;
  }
  return nullptr;
}

// A linear scan: at most kMaxTupleBindings, once per flow created.
const FlowBinding* FlowPath::tuple_binding(const transport::FlowTuple& t) const {
  const FlowBinding* best = nullptr;
  for (const FlowBinding& b : tuple_bindings_) {
    if (b.matches(t) && (best == nullptr || b.specificity() > best->specificity())) best = &b;
  }
  return best;
}

std::vector<transport::Param> FlowPath::params_for(const transport::FlowTuple* t, uint16_t port,
                                                   const Tp& tp, bool message) const {
  std::vector<transport::Param> p;
  const FlowBinding* b = binding(port);
  if (b != nullptr && b->transport == tp.name) p = as_params(*b);
  const FlowBinding* tb = t != nullptr ? tuple_binding(*t) : nullptr;
  if (tb != nullptr && tb->transport == tp.name) {
    for (const auto& [k, v] : tb->params)
      p.push_back({k, v});  // after the port's: the tuple's win
  }
  if (message) p.push_back({"message", "on"});  // after the operator's: the app's choice wins
  return p;
}

int FlowPath::attach(FlowBinding& b, std::string& error) {
  lcore_.check("FlowPath::attach");
  if (!b.tuple && b.local_port == 0) {
    error = "port must be 1 to 65535";
    return CL_EINVAL;
  }
  std::vector<FlowBinding>& table = b.tuple ? tuple_bindings_ : bindings_;
  auto it =
      std::find_if(table.begin(), table.end(), [&](const FlowBinding& x) { return x.same_key(b); });
  if (b.tuple && it == table.end() && table.size() >= kMaxTupleBindings) {
    error = "the table of tuple bindings is full (" + std::to_string(kMaxTupleBindings) +
            "): detach one first";
    return CL_ENOSPC;
  }
  if (b.tuple && b.transport.empty()) b.transport = "tcp";
  Tp* tp = transport_for(b.transport, b.local_port, error);
  if (tp == nullptr) return CL_ENOENT;
  b.transport = tp->name;  // "" keeps the port's transport (tcp when it has none)
  if (tp->t->qp_control() != nullptr) {
    error = "transport '" + tp->name +
            "' makes queue pairs, which apps open by their QP calls: " + "it takes no bindings";
    return CL_EINVAL;
  }
  error = tp->t->check_params(as_params(b));
  if (!error.empty()) return CL_EINVAL;
  if (it != table.end()) {
    *it = b;
  } else {
    table.push_back(b);
  }
  return 0;
}

int FlowPath::detach(FlowBinding& b, std::string& error) {
  lcore_.check("FlowPath::detach");
  std::vector<FlowBinding>& table = b.tuple ? tuple_bindings_ : bindings_;
  auto it =
      std::find_if(table.begin(), table.end(), [&](const FlowBinding& x) { return x.same_key(b); });
  if (it == table.end()) {
    error = "no such binding";
    return CL_ENOENT;
  }
  b = std::move(*it);
  table.erase(it);
  return 0;
}

std::vector<FlowBinding> FlowPath::bindings() const {
  lcore_.check("FlowPath::bindings");
  std::vector<FlowBinding> v = bindings_;
  v.insert(v.end(), tuple_bindings_.begin(), tuple_bindings_.end());
  return v;
}

namespace {
class RowSink final : public transport::InfoSink {
 public:
  explicit RowSink(FlowRow& r) : r_(r) {}
  void text(std::string_view key, std::string_view value) override {
    r_.text.emplace_back(std::string(key), std::string(value));
  }
  void number(std::string_view key, uint64_t value) override {
    r_.numbers.emplace_back(std::string(key), value);
  }

 private:
  FlowRow& r_;
};
}  // namespace

std::vector<TransportStats> FlowPath::transport_stats() const {
  lcore_.check("FlowPath::transport_stats");
  class Sink final : public transport::InfoSink {
   public:
    explicit Sink(TransportStats& s) : s_(s) {}
    void text(std::string_view, std::string_view) override {}
    void number(std::string_view key, uint64_t value) override {
      s_.numbers.emplace_back(std::string(key), value);
    }

   private:
    TransportStats& s_;
  };
  std::vector<TransportStats> v;
  for (const auto& tp : transports_) {
    TransportStats s{tp->name, {}};
    Sink sink(s);
    tp->t->stats(sink);
    v.push_back(std::move(s));
  }
  return v;
}

uint32_t FlowPath::rows(std::vector<FlowRow>& out, uint32_t only, uint32_t start, uint32_t max_rows,
                        uint32_t max_scan, uint64_t deadline) const {
  lcore_.check("FlowPath::rows");
  auto flow_row = [&](uint32_t id) {
    const Flow& f = flows_[id];
    FlowRow r;
    r.id = id;
    r.app = f.app != nullptr ? f.owner : 0;
    r.transport = transports_[f.tp]->name;
    r.tuple = f.tuple;
    // A QP's routes past its first (the tuple's): "port P: local > remote".
    for (uint8_t i = 0; f.alt != nullptr && i < f.alt->count; i++) {
      const AltRoute& a = f.alt->route[i];
      r.text.emplace_back("route" + std::to_string(i + 1), "port " + std::to_string(a.port) + ": " +
                                                               Ipv4{ports_[a.port].ip}.str() +
                                                               " > " + Ipv4{a.remote_ip}.str());
    }
    if (f.state == Flow::State::kResolving) {
      r.text.emplace_back("state", "resolving");
    } else {
      RowSink sink(r);
      transports_[f.tp]->t->flow_info(id, sink);
    }
    out.push_back(std::move(r));
  };
  if (only != kNoFlow) {
    if (only < flows_.size() && flows_[only].state != Flow::State::kFree) flow_row(only);
    return kNoFlow;
  }
  // One position space: listeners by id, then flows by id. Ids are stable while their owner
  // lives, so what exists for the whole listing is met exactly once, whatever comes and goes.
  // Flows by this shard's ids only; other shards' listeners are theirs to list.
  const auto nl = uint32_t(listeners_.size());
  const auto end = nl + flow_ids_.end;
  const size_t first = out.size();
  uint32_t pos = start;
  for (uint32_t scanned = 0; pos < end && scanned < max_scan && out.size() - first < max_rows &&
                             (out.size() == first || rte_rdtsc() < deadline);
       pos++, scanned++) {
    if (pos >= nl) {
      if (pos < nl + flow_ids_.first) pos = nl + flow_ids_.first;
      if (flows_[pos - nl].state != Flow::State::kFree) flow_row(pos - nl);
      continue;
    }
    const Listener& l = listeners_[pos];
    if (!l.used || l.remote) continue;
    FlowRow r;
    r.id = pos;
    r.app = l.app_id;
    r.listener = true;
    r.transport = transports_[l.tp]->name;
    r.tuple.local = {transport::IpAddr::v4(l.ip), l.port};
    out.push_back(std::move(r));
  }
  return pos >= end ? kNoFlow : pos;
}

}  // namespace cleave::dp
