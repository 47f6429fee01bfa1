// qp.cc - queue-pair control: an app's QP requests through its transport's QpControl (rdma.h),
// and the NIC flow that places a QP's packets from RTR on (flows.h).
#include "lcore/flows_impl.h"

#include <cleave/cleave.h>
#include <rte_cycles.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

namespace cleave::dp {

namespace {

// The app socket's QP states and attribute mask bits are the transport interface's (rdma.h),
// number for number; the access bits differ and are translated.
static_assert(uint8_t(transport::QpState::kReset) == abi::kQpReset &&
              uint8_t(transport::QpState::kInit) == abi::kQpInit &&
              uint8_t(transport::QpState::kRtr) == abi::kQpRtr &&
              uint8_t(transport::QpState::kRts) == abi::kQpRts &&
              uint8_t(transport::QpState::kErr) == abi::kQpErr);
static_assert(uint32_t(transport::kAttrState) == abi::kQpAttrState &&
              uint32_t(transport::kAttrPmtu) == abi::kQpAttrPmtu &&
              uint32_t(transport::kAttrDestQpn) == abi::kQpAttrDestQpn &&
              uint32_t(transport::kAttrRqPsn) == abi::kQpAttrRqPsn &&
              uint32_t(transport::kAttrSqPsn) == abi::kQpAttrSqPsn &&
              uint32_t(transport::kAttrTimeout) == abi::kQpAttrTimeout &&
              uint32_t(transport::kAttrRetryCnt) == abi::kQpAttrRetryCnt &&
              uint32_t(transport::kAttrRnrRetry) == abi::kQpAttrRnrRetry &&
              uint32_t(transport::kAttrMinRnrTimer) == abi::kQpAttrMinRnrTimer &&
              uint32_t(transport::kAttrMaxRdAtomic) == abi::kQpAttrMaxRdAtomic &&
              uint32_t(transport::kAttrMaxDestRdAtomic) == abi::kQpAttrMaxDestRdAtomic &&
              uint32_t(transport::kAttrAccess) == abi::kQpAttrAccess &&
              uint32_t(transport::kAttrSelectiveRepeat) == abi::kQpAttrSelectiveRepeat &&
              uint32_t(transport::kAttrRateLimit) == abi::kQpAttrRateLimit);

// The bytes a transport's packet may take above an IP header of ours.
uint32_t l4_mtu(uint32_t ip_mtu) {
  return ip_mtu > kIpLen ? ip_mtu - kIpLen : 0;
}

// "via A,B,...": the peer's other addresses (dotted IPv4, at most kMaxRoutes - 1, none 0 or
// given twice) into `out`; false when `v` is not that.
bool parse_via(std::string_view v, AltRoutes& out) {
  out.via_count = 0;
  for (;;) {
    const size_t comma = std::min(v.find(','), v.size());
    const std::optional<Ipv4> a = Ipv4::parse(v.substr(0, comma));
    if (out.via_count == out.via.size() || !a) return false;
    const uint32_t ip = a->host;
    const auto end = out.via.begin() + out.via_count;
    if (ip == 0 || std::find(out.via.begin(), end, ip) != end) return false;
    out.via[out.via_count++] = ip;
    if (comma == v.size()) return true;
    v.remove_prefix(comma + 1);
  }
}

}  // namespace

// The transport of a QP: the one its parameters name ("transport solar"), else the first in the
// registry that makes queue pairs (Transport::qp_control(): rocev2). Made by its first QP.
FlowPath::Tp* FlowPath::qp_transport(std::string_view name, std::string& error) {
  if (name.empty()) {
    transport::Registry& reg = transport::Registry::global();
    for (const transport::Registry::Entry& e : reg.entries()) {
      const std::unique_ptr<transport::Transport> t = reg.create(e.name);
      if (t != nullptr && t->qp_control() != nullptr) {
        name = e.name;
        break;
      }
    }
    if (name.empty()) {
      error = "no transport makes queue pairs";
      return nullptr;
    }
  }
  Tp* tp = transport_for(name, 0, error);  // nullptr, *error set, when it cannot be made
  if (tp != nullptr && tp->t->qp_control() == nullptr) {
    error = "transport '" + std::string(name) + "' makes no queue pairs";
    return nullptr;
  }
  return tp;
}

transport::QpControl& FlowPath::qp_control(const Flow& f) const {
  return *transports_[f.tp]->t->qp_control();
}

FlowPath::Flow* FlowPath::own_qp(uint32_t app_id, uint32_t qp) {
  if (qp >= flows_.size()) return nullptr;
  Flow& f = flows_[qp];
  return f.qp && f.owner == app_id && f.app != nullptr && !f.gone ? &f : nullptr;
}

int FlowPath::qp_create(DpApp& a, uint16_t cq, uint32_t max_send_wr, uint32_t max_recv_wr,
                        std::string_view params, uint32_t* qp, uint32_t* qpn, uint32_t* ip,
                        uint32_t* max_pmtu) {
  lcore_.check("FlowPath::qp_create");
  if (max_send_wr == 0 || max_recv_wr == 0 || max_send_wr > kMaxQpWr || max_recv_wr > kMaxQpWr) {
    return CL_EINVAL;
  }
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  // Room for 4 generation bits at least.
  if (ports_.empty() || qpn_bits_ > kQpnBits - 4) return CL_ENOSPC;
  // "key value key value ...": views into `params`, which outlives the call. Three keys are the
  // daemon's: "transport" (the QP's), "volume" (an MR of the app's its peer reaches by offset:
  // a Solar target's volume) and "via" (the peer's other addresses, each reached through
  // another local port: routes for a transport that takes several); the rest are the
  // transport's, after the operator's defaults for it (the config's), which they override.
  std::vector<std::string_view> words;
  for (size_t i = 0; i < params.size();) {
    const size_t end = std::min(params.find(' ', i), params.size());
    if (end > i) words.push_back(params.substr(i, end - i));
    i = end + 1;
  }
  if (words.size() % 2 != 0) return CL_EINVAL;
  std::string_view name;
  std::string_view volume;
  std::string_view via;
  std::vector<transport::Param> own;
  for (size_t i = 0; i < words.size(); i += 2) {
    if (words[i] == "transport" || words[i] == "volume" || words[i] == "via") {
      std::string_view& v = words[i] == "transport" ? name : words[i] == "volume" ? volume : via;
      if (!v.empty()) return CL_EINVAL;  // given twice
      v = words[i + 1];
    } else {
      own.push_back({words[i], words[i + 1]});
    }
  }
  std::string error;
  Tp* tp = qp_transport(name, error);
  if (tp == nullptr) return CL_ENOENT;
  transport::QpControl& qc = *tp->t->qp_control();
  std::vector<transport::Param> p;
  for (const TransportSetting& s : p_.qp_params) {
    if (s.transport == tp->name) p.push_back({s.key, s.value});
  }
  p.insert(p.end(), own.begin(), own.end());
  if (!tp->t->check_params(p).empty()) return CL_EINVAL;
  std::unique_ptr<AltRoutes> alt;
  if (!via.empty()) {
    alt = std::make_unique<AltRoutes>();
    if (!qc.multi_route() || !parse_via(via, *alt) || alt->via_count >= ports_.size()) {
      return CL_EINVAL;
    }
  }
  transport::QpCaps caps;
  caps.max_send_wr = max_send_wr;
  caps.max_recv_wr = max_recv_wr;
  if (!volume.empty()) {
    // Read and written by the peer with no key: the MR must allow both.
    uint32_t mr = 0;
    const auto [end, ec] = std::from_chars(volume.data(), volume.data() + volume.size(), mr);
    if (ec != std::errc() || end != volume.data() + volume.size() || mr == 0 ||
        mr >= a.mrs.size() || a.mrs[mr].length == 0 || a.mrs[mr].nic_mr == 0) {
      return CL_EINVAL;
    }
    constexpr uint32_t kBoth = abi::kAccessRemoteRead | abi::kAccessRemoteWrite;
    if ((a.mrs[mr].access & kBoth) != kBoth) return CL_EACCES;
    caps.region_mr = a.mrs[mr].nic_mr;
    caps.region_len = a.mrs[mr].length;
  }
  if (!charge(a)) return CL_EDQUOT;
  const uint32_t id = alloc_flow();
  if (id == kNoFlow) {
    a.counters.flows--;
    return CL_ENOSPC;
  }
  // The generation in the high bits: a stale packet for the QP the id held before finds none.
  const uint32_t gens = 1u << (kQpnBits - qpn_bits_);
  qp_gen_[id] = qp_gen_[id] + 1 == gens ? 1 : qp_gen_[id] + 1;
  Flow& f = flows_[id];
  f.qpn = qp_gen_[id] << qpn_bits_ | id;
  if (qc.create_qp(id, f.qpn, caps, p) != 0) {
    free_flow(id);
    a.counters.flows--;
    return CL_EINVAL;
  }
  // Its traffic is its transport's claim's: the protocol and the claim's (first) port, both ends.
  const ClaimEntry* claim = claim_of(*tp);
  f.state = Flow::State::kOpen;
  f.qp = true;
  f.charged = true;
  f.app = &a;
  f.owner = a.id;
  f.cq = cq;
  f.tp = tp->index;
  f.msg_flow = true;
  f.alt = std::move(alt);
  f.tuple.proto = claim != nullptr ? claim->claim.proto : 0;
  f.tuple.local = {transport::IpAddr::v4(ports_[0].ip),
                   claim != nullptr ? claim->port() : uint16_t(0)};
  stats_.flows_opened++;
  *qp = id;
  *qpn = f.qpn;
  *ip = ports_[0].ip;
  *max_pmtu = qc.max_pmtu(l4_mtu(ports_[0].mtu));
  return 0;
}

int FlowPath::qp_modify(uint32_t app_id, uint32_t qp, const abi::QpAttr& attr, uint32_t mask,
                        uint64_t now) {
  lcore_.check("FlowPath::qp_modify");
  Flow* fp = own_qp(app_id, qp);
  if (fp == nullptr) return CL_ENOENT;
  Flow& f = *fp;
  if ((mask & ~abi::kQpAttrAll) != 0 || attr.state > abi::kQpErr || attr.selective_repeat > 1 ||
      (attr.access & ~(abi::kAccessRemoteRead | abi::kAccessRemoteWrite)) != 0) {
    return CL_EINVAL;
  }
  transport::QpControl& qc = qp_control(f);
  Tp& tp = *transports_[f.tp];
  transport::QpAttr cur;
  qc.query_qp(qp, &cur);
  transport::QpAttr x;
  x.state = transport::QpState(attr.state);  // the same numbers
  x.pmtu = attr.pmtu;
  x.dest_qpn = attr.dest_qpn;
  x.rq_psn = attr.rq_psn;
  x.sq_psn = attr.sq_psn;
  x.timeout = attr.timeout;
  x.retry_cnt = attr.retry_cnt;
  x.rnr_retry = attr.rnr_retry;
  x.min_rnr_timer = attr.min_rnr_timer;
  x.max_rd_atomic = attr.max_rd_atomic;
  x.max_dest_rd_atomic = attr.max_dest_rd_atomic;
  x.access = uint8_t(((attr.access & abi::kAccessRemoteRead) != 0 ? transport::kRemoteRead : 0) |
                     ((attr.access & abi::kAccessRemoteWrite) != 0 ? transport::kRemoteWrite : 0));
  x.selective_repeat = attr.selective_repeat != 0;
  x.rate_limit_kbps = attr.rate_limit_kbps;
  const uint32_t tmask = mask & ~abi::kQpAttrRemoteIp;  // the transport's bits are the same

  // To RTR: the route to the peer, its MAC, and the NIC flow that places its packets, first.
  const bool to_rtr = (mask & abi::kQpAttrState) != 0 && attr.state == abi::kQpRtr &&
                      cur.state == transport::QpState::kInit;
  if (to_rtr) {
    if ((mask & abi::kQpAttrRemoteIp) == 0 || attr.remote_ip == 0 ||
        (mask & abi::kQpAttrPmtu) == 0) {
      return CL_EINVAL;
    }
    auto hop = routes_.lookup(Ipv4{attr.remote_ip});
    if (!hop || hop->port >= ports_.size()) return CL_ENETUNREACH;
    if (attr.pmtu > qc.max_pmtu(l4_mtu(ports_[hop->port].mtu))) return CL_EINVAL;  // too long
    f.port = hop->port;
    f.next_hop = hop->addr.host;
    f.tuple.local.ip = transport::IpAddr::v4(ports_[hop->port].ip);
    f.tuple.remote = {transport::IpAddr::v4(attr.remote_ip), f.tuple.local.port};
    f.l2_ready = false;
    fill_l2(f, now);  // else ARP is asked now, and TX waits for it (retransmission covers it)
    rte_pmd_cleave_flow spec = nic_spec(qc.rtr_nic_flow(qp, x, tmask), attr.remote_ip,
                                        ports_[hop->port].ip, f.tuple.proto);
    spec.dst_port = f.tuple.local.port;
    spec.qpn = f.qpn;
    spec.owner = f.owner;
    // Without a NIC flow the QP still works: every payload takes the copy path, and READ and
    // WRITE targets are refused (the NIC holds the MR table).
    nic_off(f, qp);
    f.on_nic = nic_cmd(ports_[f.port].nic->flow_add(qp, spec)) == 0;
    f.nic_msg = f.on_nic;
    if (f.alt != nullptr) {
      if (const int e = qp_routes(f, qp, attr.pmtu, spec, now); e != 0) {
        qp_unroute(f, qp);
        return e;
      }
      x.routes = uint8_t(1 + f.alt->count);
    }
  }
  tp.ctx->at(rte_rdtsc());
  const int rc_status = qc.modify_qp(qp, x, tmask, *tp.ctx);
  tp.ctx->flush();
  if (rc_status != 0) {
    if (to_rtr) qp_unroute(f, qp);
    return CL_EINVAL;
  }
  // Back to RESET: the peer is forgotten, and so are the NIC flows and the routes.
  if ((mask & abi::kQpAttrState) != 0 && attr.state == abi::kQpReset) {
    qp_unroute(f, qp);
    f.tuple.remote = {};
  }
  return 0;
}

// A QP's NIC flows off every port, and its routes past the first forgotten (their addresses
// kept for the next RTR).
void FlowPath::qp_unroute(Flow& f, uint32_t id) {
  nic_off(f, id);
  if (f.alt != nullptr) f.alt->count = 0;
}

// A QP's routes to its peer's other addresses (f.alt's "via"), each through a local port of its
// own (not the first route's): header template, ARP asked, NIC flow added as `spec` with that
// route's addresses. CL_ENETUNREACH for an address no port reaches, CL_EINVAL for one reached
// through a port another route takes or too small for `pmtu`; the caller then takes them off.
int FlowPath::qp_routes(Flow& f, uint32_t id, uint32_t pmtu, const rte_pmd_cleave_flow& spec,
                        uint64_t now) {
  AltRoutes& alt = *f.alt;
  transport::QpControl& qc = qp_control(f);
  alt.count = 0;
  for (uint8_t i = 0; i < alt.via_count; i++) {
    const auto hop = routes_.lookup(Ipv4{alt.via[i]});
    if (!hop || hop->port >= ports_.size()) return CL_ENETUNREACH;
    bool taken = hop->port == f.port;
    for (uint8_t j = 0; j < i; j++)
      taken = taken || alt.route[j].port == hop->port;
    if (taken || pmtu > qc.max_pmtu(l4_mtu(ports_[hop->port].mtu))) return CL_EINVAL;
    AltRoute& r = alt.route[i];
    r = AltRoute{};
    r.port = hop->port;
    r.remote_ip = alt.via[i];
    r.next_hop = hop->addr.host;
    r.l2_ready = fill_hdr(r.port, r.next_hop, ports_[r.port].ip, r.remote_ip, f.tuple.proto,
                          r.hdr.data(), now);
    rte_pmd_cleave_flow s = spec;
    s.src_ip = r.remote_ip;
    s.dst_ip = ports_[r.port].ip;
    r.on_nic = nic_cmd(ports_[r.port].nic->flow_add(id, s)) == 0;
    alt.count = uint8_t(i + 1);
  }
  return 0;
}

int FlowPath::qp_query(uint32_t app_id, uint32_t qp, abi::QpAttr* out) const {
  lcore_.check("FlowPath::qp_query");
  if (qp >= flows_.size()) return CL_ENOENT;
  const Flow& f = flows_[qp];
  if (!f.qp || f.owner != app_id || f.app == nullptr || f.gone) return CL_ENOENT;
  transport::QpAttr a;
  qp_control(f).query_qp(qp, &a);
  *out = abi::QpAttr{};
  out->state = uint8_t(a.state);
  out->timeout = a.timeout;
  out->retry_cnt = a.retry_cnt;
  out->rnr_retry = a.rnr_retry;
  out->min_rnr_timer = a.min_rnr_timer;
  out->max_rd_atomic = a.max_rd_atomic;
  out->max_dest_rd_atomic = a.max_dest_rd_atomic;
  out->selective_repeat = a.selective_repeat ? 1 : 0;
  out->access = ((a.access & transport::kRemoteRead) != 0 ? abi::kAccessRemoteRead : 0) |
                ((a.access & transport::kRemoteWrite) != 0 ? abi::kAccessRemoteWrite : 0);
  out->pmtu = a.pmtu;
  out->dest_qpn = a.dest_qpn;
  out->rq_psn = a.rq_psn;
  out->sq_psn = a.sq_psn;
  out->remote_ip = f.tuple.remote.ip.v4_host();
  out->rate_limit_kbps = a.rate_limit_kbps;
  return 0;
}

int FlowPath::qp_destroy(uint32_t app_id, uint32_t qp) {
  lcore_.check("FlowPath::qp_destroy");
  if (own_qp(app_id, qp) == nullptr) return CL_ENOENT;
  free_qp(qp);
  return 0;
}

// Pending requests complete with -ECANCELED (delivered while the app is there), then the flow
// and its NIC flow go.
void FlowPath::free_qp(uint32_t id) {
  Tp& tp = *transports_[flows_[id].tp];
  tp.ctx->at(rte_rdtsc());
  tp.t->qp_control()->destroy_qp(id, *tp.ctx);
  tp.ctx->flush();
  stats_.flows_closed++;
  free_flow(id);
}

}  // namespace cleave::dp
