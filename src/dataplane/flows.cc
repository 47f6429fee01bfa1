// flows.cc - the flow path: transports wired to the NIC's mbufs and the apps' pipes (flows.h).
//
// Nothing on the packet path allocates, locks or logs: tables are sized at construction, and a
// transport's bursts are staged in arrays reserved up front.
#include "flows.h"

#include <cleave/cleave.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

#include "rc.h"
#include "rte_pmd_cleave.h"
#include "tcp.h"
#include "wire.h"

namespace cleave::dp {

namespace {

using transport::EventKind;
using transport::FlowId;
using transport::kNoFlow;

constexpr uint32_t kEthLen = sizeof(rte_ether_hdr);
constexpr uint32_t kIpLen = sizeof(rte_ipv4_hdr);
constexpr uint32_t kHdrTemplate = kEthLen + kIpLen;
constexpr uint32_t kFlowEvents = 3;  // connected or accepted, peer closed, closed or refused
constexpr uint32_t kExtSeg = 32768;  // payload bytes per extbuf segment
// A descriptor's extbuf segments, built on the lcore's stack: enough for the longest payload
// the transport ABI allows (send() refuses longer descriptors).
constexpr uint32_t kMaxExtSegs = (transport::kMaxTxLen + kExtSeg - 1) / kExtSeg;
constexpr uint32_t kTombstone = 0xFFFFFFFFu;
constexpr uint16_t kEphemeralLo = 49152;
constexpr size_t kRxStage = 512;
constexpr size_t kAppStage = 64;
constexpr size_t kRing = 64;
constexpr uint32_t kResolveCheckUs = 1000;
constexpr uint32_t kMaxQpWr = 4096;  // a QP's send or receive queue
// The app socket's QP states and attribute mask bits are the transport's, number for number.
static_assert(uint8_t(transport::roce::QpState::kRtr) == abi::kQpRtr &&
              uint8_t(transport::roce::QpState::kErr) == abi::kQpErr);
static_assert(uint32_t(transport::roce::kAttrState) == abi::kQpAttrState &&
              uint32_t(transport::roce::kAttrAccess) == abi::kQpAttrAccess &&
              uint32_t(transport::roce::kAttrRateLimit) == abi::kQpAttrRateLimit);

// The largest IBTA PMTU whose packets, with the longest RC headers (IPv4, UDP, BTH, RETH,
// ImmDt) and the ICRC, fit an IP MTU of `mtu`; 0 when not even 256 does.
uint32_t max_pmtu_of(uint32_t mtu) {
  constexpr uint32_t kOverhead = kIpLen + transport::roce::kMaxHeader + 4;
  uint32_t pmtu = 4096;
  while (pmtu >= 256 && pmtu + kOverhead > mtu)
    pmtu /= 2;
  return pmtu >= 256 ? pmtu : 0;
}

uint32_t load32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
uint16_t load16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}

// The NIC's verdict on a frame's L4 checksum (TCP, UDP) or ICRC (RoCE).
transport::Csum nic_csum(const rte_pmd_cleave_placement& pl) {
  switch ((pl.flags >> RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT) & 3) {
    case RTE_PMD_CLEAVE_CSUM_GOOD:
      return transport::Csum::kGood;
    case RTE_PMD_CLEAVE_CSUM_BAD:
      return transport::Csum::kBad;
    default:
      return transport::Csum::kNotChecked;
  }
}

uint8_t event_code(EventKind k) {
  switch (k) {
    case EventKind::kConnected:
      return abi::kEvConnected;
    case EventKind::kAccepted:
      return abi::kEvAccepted;
    case EventKind::kPeerClosed:
      return abi::kEvPeerClosed;
    case EventKind::kClosed:
      return abi::kEvClosed;
    default:
      return abi::kEvRefused;
  }
}

// A binding's parameters as the transport takes them (views into the binding).
std::vector<transport::Param> as_params(const FlowBinding& b) {
  std::vector<transport::Param> v;
  for (const auto& [k, val] : b.params)
    v.push_back({k, val});
  return v;
}

uint32_t mix(uint32_t rip, uint16_t rport, uint32_t lip, uint16_t lport) {
  uint64_t h = (uint64_t(rip) << 32 | uint64_t(rport) << 16 | lport) ^ (uint64_t(lip) << 7);
  h *= 0x9E3779B97F4A7C15ull;
  return uint32_t(h >> 32);
}

}  // namespace

// ---- tables
// ------------------------------------------------------------------------------------------

struct FlowPath::Flow {
  enum class State : uint8_t { kFree, kResolving, kOpen };
  State state = State::kFree;
  bool on_nic = false;
  bool l2_ready = false;
  bool app_done = false;  // closed or refused delivered: later requests fail with EPIPE
  bool gone = false;      // the transport released it; freed after this burst's events
  bool data_listed = false;
  bool message = false;    // the app asked for message mode (applied at connect)
  bool msg_flow = false;   // the transport said its segments name their messages
  bool nic_msg = false;    // ...and the NIC flow places by them (net_cleave only)
  bool qp = false;         // a RoCEv2 queue pair (rocev2): found by qpn, not in the tuple hash
  bool charged = false;    // counted in its app's flows (quota.flows) until the app is done
  bool half_open = false;  // accepted from a SYN, not yet established: counted in half_open
  uint8_t port = 0;
  uint8_t tp = 0;
  uint16_t cq = 0;
  uint16_t ip_id = 0;
  DpApp* app = nullptr;  // null once the app left
  uint32_t owner = 0;    // the app's id (kept after it left, for management)
  uint32_t events_left = 0;
  uint32_t outstanding = 0;  // sends and receives taken, completions owed
  uint32_t data_pending = 0;
  uint32_t next_hop = 0;
  uint32_t next_free = 0;
  uint32_t qpn = 0;  // qp: its number
  transport::FlowTuple tuple;
  alignas(8) std::array<uint8_t, kHdrTemplate> hdr{};
};

struct FlowPath::Listener {
  bool used = false;
  DpApp* app = nullptr;
  uint32_t app_id = 0;
  uint16_t cq = 0;
  uint8_t tp = 0;
  uint32_t ip = 0;  // 0: any of ours
  uint16_t port = 0;
};

class FlowPath::Ctx final : public transport::Context {
 public:
  Ctx(FlowPath& fp, Tp& tp) : Context(tx_, ev_), fp_(fp), tp_(tp) {}
  void at(uint64_t tsc) {
    const uint64_t hz = fp_.p_.tsc_hz;
    set_now(tsc / hz * 1000000000u + tsc % hz * 1000000000u / hz);
  }

  int ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override {
    const Flow& f = fp_.flows_[flow];
    // A message flow's MSs mean something only to a NIC flow that places by message; otherwise
    // the transport keeps to the copy path (not an error).
    if (f.msg_flow && !f.nic_msg) return -EOPNOTSUPP;
    return fp_.nic_cmd(fp_.ports_[f.port].nic->ms_post(flow, mr, offset, len, msg));
  }
  int cursor_update(FlowId flow, uint32_t cursor) override {
    const Flow& f = fp_.flows_[flow];
    return fp_.nic_cmd(fp_.ports_[f.port].nic->cursor_update(flow, cursor));
  }
  int ms_retire(FlowId flow, uint32_t count) override {
    const Flow& f = fp_.flows_[flow];
    return fp_.nic_cmd(fp_.ports_[f.port].nic->ms_retire(flow, count));
  }
  int ms_retire_msg(FlowId flow, uint32_t msg) override {
    const Flow& f = fp_.flows_[flow];
    return fp_.nic_cmd(fp_.ports_[f.port].nic->ms_retire_msg(flow, msg));
  }
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) override {
    return fp_.copy_in(src, len, mr, offset);
  }
  FlowId flow_open(transport::ListenerId l, const transport::FlowTuple& t, uint32_t initial_seq,
                   bool messages) override {
    return fp_.open_flow(tp_, l, t, initial_seq, messages, true);
  }
  FlowId flow_open_established(transport::ListenerId l, const transport::FlowTuple& t,
                               uint32_t initial_seq, bool messages) override {
    return fp_.open_flow(tp_, l, t, initial_seq, messages, false);
  }
  int flow_open_error() const override { return fp_.open_error_; }
  bool reply(const transport::RxHeader& to, const uint8_t* l4, size_t len) override {
    return fp_.reply(to, l4, len);
  }
  void flow_synced(FlowId flow, uint32_t initial_seq, bool messages) override {
    fp_.synced(flow, initial_seq, messages);
  }
  void flow_closed(FlowId flow) override { fp_.closed(flow); }
  // RoCE: the NIC keeps the MR table, so it answers for rkeys; RDMA addresses are zero-based.
  // A QP without a NIC flow has its payloads copied, and no remote access.
  int rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write, uint16_t* mr,
                 uint64_t* offset) override {
    Nic* nic = flow_nic(flow);
    const uint8_t access = write ? RTE_PMD_CLEAVE_MR_REMOTE_WRITE : RTE_PMD_CLEAVE_MR_REMOTE_READ;
    if (nic == nullptr || nic->rkey_check(flow, rkey, va, len, access, mr) != 0) return -EACCES;
    *offset = va;
    return 0;
  }
  int read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) override {
    Nic* nic = flow_nic(flow);
    return nic != nullptr ? nic->read_post(flow, psn, mr, offset, len) : -EOPNOTSUPP;
  }
  int read_retire(FlowId flow, uint32_t psn) override {
    Nic* nic = flow_nic(flow);
    return nic != nullptr ? nic->read_retire(flow, psn) : -EOPNOTSUPP;
  }
  int roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) override {
    Nic* nic = flow_nic(flow);
    return nic != nullptr ? fp_.nic_cmd(nic->roce_resync(flow, psn, next_msg)) : -EOPNOTSUPP;
  }
  transport::Params flow_params(FlowId flow) override {
    if (flow != fp_.accept_params_flow_) return {};
    return fp_.accept_params_;
  }

 protected:
  void drain_tx(std::span<transport::TxDesc> descs) override { fp_.send(descs); }
  void drain_events(std::span<const transport::Event> events) override { fp_.deliver(events); }

 private:
  // The NIC holding the flow's NIC flow, or null when it has none.
  Nic* flow_nic(FlowId flow) const {
    const Flow& f = fp_.flows_[flow];
    return f.on_nic ? fp_.ports_[f.port].nic : nullptr;
  }

  std::array<transport::TxDesc, kRing> tx_{};
  std::array<transport::Event, kRing> ev_{};
  FlowPath& fp_;
  Tp& tp_;
};

struct FlowPath::Tp {
  std::string name;
  uint8_t index = 0;
  std::unique_ptr<transport::Transport> t;
  std::unique_ptr<Ctx> ctx;
  std::vector<transport::RxHeader> hdrs;
  std::vector<rte_mbuf*> mbufs;
  std::vector<transport::AppRequest> reqs;
};

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
  free_head_ = 0;
  for (uint32_t i = 0; i < flows_.size(); i++)
    flows_[i].next_free = i + 1;
  size_t cap = 1;
  while (cap < size_t(params.max_flows) * 2)
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
  while ((uint64_t(1) << qpn_bits_) < params.max_flows)
    qpn_bits_++;
  std::string error;
  Tp* tcp = transport_for("tcp", 0, error);  // the default one exists from the start
  auto* t = tcp != nullptr ? dynamic_cast<transport::tcp::TcpTransport*>(tcp->t.get()) : nullptr;
  if (t != nullptr) t->set_max_time_wait(params.tcp_max_time_wait);
}

FlowPath::~FlowPath() = default;

std::vector<std::string> FlowPath::transport_names() const {
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
  auto tp = std::make_unique<Tp>();
  tp->name = std::string(name);
  tp->index = uint8_t(transports_.size());
  tp->t = std::move(t);
  tp->ctx = std::make_unique<Ctx>(*this, *tp);
  tp->hdrs.reserve(kRxStage);
  tp->mbufs.reserve(kRxStage);
  tp->reqs.reserve(kAppStage);
  transports_.push_back(std::move(tp));
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
  if (f.on_nic) nic_cmd(ports_[f.port].nic->flow_remove(id));
  if (!f.qp) hash_remove(id);  // a QP is found by its number, never in the tuple hash
  f = Flow{};
  f.next_free = free_head_;
  free_head_ = id;
}

void FlowPath::hash_insert(uint32_t id) {
  const auto& t = flows_[id].tuple;
  size_t mask = hash_.size() - 1;
  size_t i = mix(t.remote.ip.v4_host(), t.remote.port, t.local.ip.v4_host(), t.local.port) & mask;
  while (hash_[i] != 0 && hash_[i] != kTombstone)
    i = (i + 1) & mask;
  hash_[i] = id + 1;
}

void FlowPath::hash_remove(uint32_t id) {
  const auto& t = flows_[id].tuple;
  size_t mask = hash_.size() - 1;
  size_t i = mix(t.remote.ip.v4_host(), t.remote.port, t.local.ip.v4_host(), t.local.port) & mask;
  for (; hash_[i] != 0; i = (i + 1) & mask) {
    if (hash_[i] == id + 1) {
      hash_[i] = kTombstone;
      return;
    }
  }
}

uint32_t FlowPath::hash_find(uint32_t rip, uint16_t rport, uint32_t lip, uint16_t lport) const {
  size_t mask = hash_.size() - 1;
  for (size_t i = mix(rip, rport, lip, lport) & mask; hash_[i] != 0; i = (i + 1) & mask) {
    if (hash_[i] == kTombstone) continue;
    const auto& t = flows_[hash_[i] - 1].tuple;
    if (t.remote.port == rport && t.local.port == lport && t.remote.ip.v4_host() == rip &&
        t.local.ip.v4_host() == lip) {
      return hash_[i] - 1;
    }
  }
  return kNoFlow;
}

// Room on the completion pipe for n more owed entries, beyond those already owed.
bool FlowPath::reserve(DpApp& a, uint16_t cq, uint32_t n) {
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return false;
  DpPipe& p = a.pipes[cq];
  if (p.cq_out.credits(p.promised + n) < p.promised + n) return false;
  p.promised += n;
  return true;
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

void FlowPath::release(Flow& f, uint32_t n) {
  if (f.app == nullptr) return;
  DpPipe& p = f.app->pipes[f.cq];
  p.promised -= std::min(p.promised, n);
}

bool FlowPath::fill_l2(Flow& f, uint64_t now) {
  const FlowPort& port = ports_[f.port];
  const Mac* mac = arp_.resolve(f.port, Ipv4{f.next_hop}, now);
  if (mac == nullptr) return false;
  auto* eth = reinterpret_cast<rte_ether_hdr*>(f.hdr.data());
  std::memcpy(eth->dst_addr.addr_bytes, mac->b.data(), RTE_ETHER_ADDR_LEN);
  eth->src_addr = port.mac;
  eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->type_of_service = 0;
  ip->fragment_offset = RTE_BE16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = f.tuple.proto;
  ip->src_addr = rte_cpu_to_be_32(f.tuple.local.ip.v4_host());
  ip->dst_addr = rte_cpu_to_be_32(f.tuple.remote.ip.v4_host());
  f.l2_ready = true;
  return true;
}

int FlowPath::nic_cmd(int rc) {
  if (rc != 0) stats_.nic_errors++;
  return rc;
}

// ---- receive
// -----------------------------------------------------------------------------------------

Drop FlowPath::rx(uint8_t port, rte_mbuf* m) {
  const uint8_t* fr = rte_pktmbuf_mtod(m, const uint8_t*);
  const rte_pmd_cleave_placement* pl = rte_pmd_cleave_placement_get(m, placement_offset_);
  const bool deferred = pl->decision == RTE_PMD_CLEAVE_DEFERRED;
  if (m->nb_segs != 1 || m->data_len < kEthLen + kIpLen) return Drop::kTcpMalformed;
  const uint8_t* ip = fr + kEthLen;
  const uint32_t ihl = (ip[0] & 0xF) * 4u;
  const uint32_t ip_len = load16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < kIpLen || ip_len < ihl) return Drop::kTcpMalformed;
  if (ip[9] == IPPROTO_UDP) {
    if (m->data_len >= kEthLen + ihl + 4 && load16(ip + ihl + 2) == transport::roce::kUdpPort) {
      return rx_roce(m, ip, ihl, ip_len);
    }
    return Drop::kNoTransport;
  }
  if (ip[9] != IPPROTO_TCP) return Drop::kNoTransport;
  const uint8_t* tcp = ip + ihl;
  if (m->data_len < kEthLen + ihl + 20) return Drop::kTcpMalformed;
  const uint32_t thl = (tcp[12] >> 4) * 4u;
  if (thl < 20 || m->data_len < kEthLen + ihl + thl || ip_len < ihl + thl) {
    return Drop::kTcpMalformed;
  }
  const uint32_t payload_len = ip_len - ihl - thl;
  if (deferred && m->data_len < kEthLen + ip_len) return Drop::kTcpMalformed;

  // Checksum: the NIC's verdict, else ours (the frame is whole when the NIC did not check it).
  transport::Csum csum = nic_csum(*pl);
  if (csum == transport::Csum::kNotChecked && (deferred || payload_len == 0)) {
    csum = rte_ipv4_udptcp_cksum_verify(reinterpret_cast<const rte_ipv4_hdr*>(ip), tcp) == 0
               ? transport::Csum::kGood
               : transport::Csum::kBad;
  }
  if (csum == transport::Csum::kBad) return Drop::kTcpBadChecksum;

  const uint32_t rip = load32(ip + 12);
  const uint32_t lip = load32(ip + 16);
  const uint16_t rport = load16(tcp);
  const uint16_t lport = load16(tcp + 2);
  uint32_t id = kNoFlow;
  if ((m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0 && m->hash.fdir.hi < flows_.size() &&
      flows_[m->hash.fdir.hi].state == Flow::State::kOpen) {
    id = m->hash.fdir.hi;
  } else {
    id = hash_find(rip, rport, lip, lport);
  }
  Tp* tp = nullptr;
  transport::RxHeader h;
  const bool have_flow = id != kNoFlow && flows_[id].state == Flow::State::kOpen;
  // A bare SYN also names its listener when a flow has the tuple: a TIME-WAIT record may hand
  // the tuple to a new connection.
  const bool bare_syn =
      (tcp[13] & (RTE_TCP_SYN_FLAG | RTE_TCP_ACK_FLAG | RTE_TCP_RST_FLAG)) == RTE_TCP_SYN_FLAG;
  const Listener* hit = nullptr;
  if (!have_flow || bare_syn) {
    for (const Listener& l : listeners_) {
      if (l.used && l.port == lport && (l.ip == 0 || l.ip == lip)) {
        hit = &l;
        break;
      }
    }
  }
  if (have_flow) {
    tp = transports_[flows_[id].tp].get();
    h.flow = id;
    if (hit != nullptr && hit->tp == flows_[id].tp && lip == ports_[port].ip) {
      h.has_listener = true;
      h.listener = uint32_t(hit - listeners_.data());
    }
  } else {
    if (hit == nullptr || lip != ports_[port].ip) {
      send_rst(port, m, ip, tcp, payload_len);
      return Drop::kTcpNoFlow;
    }
    tp = transports_[hit->tp].get();
    h.has_listener = true;
    h.listener = uint32_t(hit - listeners_.data());
  }
  h.l3 = ip;
  h.l3_len = uint16_t(ihl);
  h.l4 = tcp;
  h.l4_len = uint16_t(thl);
  h.l4_csum = csum;
  h.payload_len = payload_len;
  stage_rx(*tp, h, m, *pl);
  return Drop::kCount;
}

// The NIC's placement verdict into h, and h with its mbuf onto the transport's next burst.
void FlowPath::stage_rx(Tp& tp, transport::RxHeader& h, rte_mbuf* m,
                        const rte_pmd_cleave_placement& pl) {
  h.ecn = h.l3[1] & 3;
  switch (pl.decision) {
    case RTE_PMD_CLEAVE_PLACED:
      h.placed = transport::Placed::kPlaced;
      break;
    case RTE_PMD_CLEAVE_TRIMMED:
      h.placed = transport::Placed::kTrimmed;
      h.trimmed = pl.trimmed;
      break;
    case RTE_PMD_CLEAVE_DROPPED:
      h.placed = transport::Placed::kDropped;
      break;
    case RTE_PMD_CLEAVE_NO_PAYLOAD:
      h.placed = transport::Placed::kNoPayload;
      break;
    default:
      h.placed = h.payload_len != 0 ? transport::Placed::kDeferred : transport::Placed::kNoPayload;
      if (h.payload_len != 0) h.payload = h.l4 + h.l4_len;
      break;
  }
  h.out_of_order = (pl.flags & RTE_PMD_CLEAVE_F_OUT_OF_ORDER) != 0;
  if (tp.hdrs.size() == kRxStage) rx_flush();
  tp.hdrs.push_back(h);
  tp.mbufs.push_back(m);
}

// RoCEv2: UDP to 4791, found by (destination QP, source address). Headers are parsed from
// untrusted bytes by the transport; here only what finding the QP and the payload needs.
Drop FlowPath::rx_roce(rte_mbuf* m, const uint8_t* ip, uint32_t ihl, uint32_t ip_len) {
  namespace roce = transport::roce;
  const rte_pmd_cleave_placement* pl = rte_pmd_cleave_placement_get(m, placement_offset_);
  const uint8_t* udp = ip + ihl;
  const uint32_t in_mbuf = m->data_len - kEthLen - ihl;  // L4 bytes the mbuf holds
  constexpr uint32_t kMin = roce::kUdpLen + roce::kBthLen;
  if (ip_len < ihl + kMin + 4 || in_mbuf < kMin || load16(udp + 2) != roce::kUdpPort) {
    return Drop::kRoceMalformed;
  }
  // A whole frame (deferred, or no payload) is split here; a placed one was cut to its headers.
  const bool whole = m->data_len >= kEthLen + ip_len;
  if (pl->decision == RTE_PMD_CLEAVE_DEFERRED && !whole) return Drop::kRoceMalformed;
  // A UDP checksum RoCEv2 leaves 0; one a sender filled in must be right (the ICRC leaves that
  // field out): the NIC's verdict, else ours on the whole frame. Dropped here, as a UDP stack
  // drops it, and counted apart from a bad ICRC (the transport's, per QP).
  if (pl->decision == RTE_PMD_CLEAVE_DEFERRED &&
      pl->reason == RTE_PMD_CLEAVE_DEFER_BAD_L4_CHECKSUM) {
    return Drop::kRoceBadUdpChecksum;
  }
  if (nic_csum(*pl) == transport::Csum::kNotChecked && whole && load16(udp + 6) != 0 &&
      rte_ipv4_udptcp_cksum_verify(reinterpret_cast<const rte_ipv4_hdr*>(ip), udp) != 0) {
    return Drop::kRoceBadUdpChecksum;
  }
  size_t hdr_len = in_mbuf;
  uint32_t payload_len = pl->payload_len;
  if (whole && !roce::split(udp, ip_len - ihl, &hdr_len, &payload_len)) {
    return Drop::kRoceMalformed;
  }
  const uint32_t qpn = uint32_t(udp[roce::kUdpLen + 5]) << 16 |
                       uint32_t(udp[roce::kUdpLen + 6]) << 8 | udp[roce::kUdpLen + 7];
  uint32_t id = qpn & ((1u << qpn_bits_) - 1);
  if ((m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0) id = m->hash.fdir.hi;
  if (id >= flows_.size()) return Drop::kRoceNoQp;
  const Flow& f = flows_[id];
  if (!f.qp || f.qpn != qpn || f.state != Flow::State::kOpen || f.gone ||
      f.tuple.remote.ip.v4_host() != load32(ip + 12) || roce_tp_ == nullptr) {
    return Drop::kRoceNoQp;
  }
  // The software ICRC, when the NIC left the frame whole and did not check it; kBad from the NIC
  // is the ICRC's now (a bad UDP checksum was dropped above).
  transport::Csum csum = nic_csum(*pl);
  if (csum == transport::Csum::kNotChecked && whole) {
    csum = nic::roce_icrc_ok(ip, ip_len) ? transport::Csum::kGood : transport::Csum::kBad;
  }
  transport::RxHeader h;
  h.flow = id;
  h.l3 = ip;
  h.l3_len = uint16_t(ihl);
  h.l4 = udp;
  h.l4_len = uint16_t(hdr_len);
  h.l4_csum = csum;  // a bad ICRC is dropped and counted by the transport, per QP
  h.payload_len = payload_len;
  stage_rx(*roce_tp_, h, m, *pl);
  return Drop::kCount;
}

void FlowPath::rx_flush() {
  for (auto& tp : transports_) {
    if (tp->hdrs.empty()) continue;
    stats_.rx_segments += tp->hdrs.size();
    tp->ctx->at(rte_rdtsc());
    tp->t->rx_burst(tp->hdrs, *tp->ctx);
    tp->ctx->flush();
    rte_pktmbuf_free_bulk(tp->mbufs.data(), unsigned(tp->mbufs.size()));
    tp->hdrs.clear();
    tp->mbufs.clear();
  }
  reap();
}

// Flows their transport released, once no event in a transport's ring names them any more.
void FlowPath::reap() {
  for (uint32_t id : reap_)
    free_flow(id);
  reap_.clear();
}

bool FlowPath::copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) {
  if (mr == 0 || mr >= nic_mrs_.size() || nic_mrs_[mr].app == 0) return false;
  const NicMr& m = nic_mrs_[mr];
  if (offset > m.length || len > m.length - offset) return false;
  std::memcpy(m.base + offset, src, len);
  stats_.rx_copied_bytes += len;
  return true;
}

// RFC 9293 3.10.7.1: a segment for no connection gets a RST, unless it is one.
void FlowPath::send_rst(uint8_t port, const rte_mbuf* m, const uint8_t* ip, const uint8_t* tcp,
                        uint32_t payload_len) {
  const uint8_t flags = tcp[13];
  if ((flags & RTE_TCP_RST_FLAG) != 0) return;
  rte_tcp_hdr th{};
  std::memcpy(&th.src_port, tcp + 2, 2);
  std::memcpy(&th.dst_port, tcp, 2);
  th.data_off = 5 << 4;
  if ((flags & RTE_TCP_ACK_FLAG) != 0) {
    std::memcpy(&th.sent_seq, tcp + 8, 4);  // <SEQ=SEG.ACK><CTL=RST>
    th.tcp_flags = RTE_TCP_RST_FLAG;
  } else {
    uint32_t ack = load32(tcp + 4) + payload_len + ((flags & RTE_TCP_SYN_FLAG) ? 1 : 0) +
                   ((flags & RTE_TCP_FIN_FLAG) ? 1 : 0);
    th.recv_ack = rte_cpu_to_be_32(ack);  // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>
    th.tcp_flags = RTE_TCP_RST_FLAG | RTE_TCP_ACK_FLAG;
  }
  if (send_back(port, rte_pktmbuf_mtod(m, const rte_ether_hdr*), ip,
                reinterpret_cast<const uint8_t*>(&th), sizeof th)) {
    stats_.rst_sent++;
  }
}

// A TCP header (`len` bytes, its checksum filled here) back to where the frame of `in_eth` and
// `ip` came from, out of `port`.
bool FlowPath::send_back(uint8_t port, const rte_ether_hdr* in_eth, const uint8_t* ip,
                         const uint8_t* l4, size_t len) {
  rte_mbuf* r = rte_pktmbuf_alloc(pool_);
  if (r == nullptr) {
    stats_.tx_no_mbuf++;
    return false;
  }
  auto* eth =
      reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(r, uint16_t(kEthLen + kIpLen + len)));
  eth->dst_addr = in_eth->src_addr;
  eth->src_addr = ports_[port].mac;
  eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_IPV4);
  auto* oip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  std::memset(oip, 0, kIpLen);
  oip->version_ihl = RTE_IPV4_VHL_DEF;
  oip->total_length = rte_cpu_to_be_16(uint16_t(kIpLen + len));
  oip->time_to_live = 64;
  oip->next_proto_id = IPPROTO_TCP;
  std::memcpy(&oip->src_addr, ip + 16, 4);
  std::memcpy(&oip->dst_addr, ip + 12, 4);
  auto* th = reinterpret_cast<rte_tcp_hdr*>(oip + 1);
  std::memcpy(th, l4, len);
  th->cksum = 0;
  oip->hdr_checksum = rte_ipv4_cksum(oip);
  th->cksum = rte_ipv4_udptcp_cksum(oip, th);
  io_.flow_stage(port, r);
  return true;
}

// Context::reply: `to` is a header of the burst being handed over, so its frame (the Ethernet
// header just before l3) is still ours; the answer leaves by the port of its local address.
bool FlowPath::reply(const transport::RxHeader& to, const uint8_t* l4, size_t len) {
  if (to.l3 == nullptr || to.l3_len < kIpLen || (to.l3[0] >> 4) != 4 || to.l3[9] != IPPROTO_TCP ||
      len < 20 || len > transport::kMaxL4Header) {
    stats_.tx_bad_desc++;
    return false;
  }
  const uint32_t lip = load32(to.l3 + 16);
  for (size_t i = 0; i < ports_.size(); i++) {
    if (ports_[i].ip == lip) {
      const auto* eth = reinterpret_cast<const rte_ether_hdr*>(to.l3 - kEthLen);
      return send_back(uint8_t(i), eth, to.l3, l4, len);
    }
  }
  stats_.tx_bad_desc++;
  return false;
}

// ---- transmit
// ----------------------------------------------------------------------------------------

void FlowPath::send(std::span<transport::TxDesc> descs) {
  const uint64_t now = rte_rdtsc();
  for (const transport::TxDesc& d : descs) {
    stats_.tx_descs++;
    if (d.flow >= flows_.size() || flows_[d.flow].state != Flow::State::kOpen || d.l4_len < 20 ||
        d.l4_len > transport::kMaxL4Header) {
      stats_.tx_bad_desc++;
      continue;
    }
    Flow& f = flows_[d.flow];
    if (!f.l2_ready && !fill_l2(f, now)) {
      stats_.tx_no_neighbour++;
      continue;
    }
    if (d.len > transport::kMaxTxLen) {
      stats_.tx_too_long++;
      continue;
    }
    const NicMr* mr = nullptr;
    if (d.len != 0) {
      mr = d.mr < nic_mrs_.size() ? &nic_mrs_[d.mr] : nullptr;
      if (mr == nullptr || mr->app == 0 || d.offset > mr->length || d.len > mr->length - d.offset) {
        stats_.tx_bad_desc++;
        continue;
      }
    }
    rte_mbuf* h = rte_pktmbuf_alloc(pool_);
    const uint32_t nseg = (d.len + kExtSeg - 1) / kExtSeg;
    std::array<rte_mbuf*, kMaxExtSegs> segs;
    if (h == nullptr || (nseg != 0 && rte_pktmbuf_alloc_bulk(pool_, segs.data(), nseg) != 0)) {
      if (h != nullptr) rte_pktmbuf_free(h);
      stats_.tx_no_mbuf++;
      continue;
    }
    auto* p = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(h, uint16_t(kHdrTemplate + d.l4_len)));
    std::memcpy(p, f.hdr.data(), kHdrTemplate);
    std::memcpy(p + kHdrTemplate, d.l4.data(), d.l4_len);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    const bool tso = d.mss != 0 && d.len > d.mss;
    const uint32_t frames = tso ? (d.len + d.mss - 1) / d.mss : 1;
    ip->total_length = rte_cpu_to_be_16(
        uint16_t(std::min<uint32_t>(kIpLen + d.l4_len + (tso ? d.mss : d.len), 0xFFFF)));
    ip->type_of_service = uint8_t((d.dscp & 0x3F) << 2 | (d.ecn & 3));
    ip->packet_id = rte_cpu_to_be_16(f.ip_id);
    f.ip_id = uint16_t(f.ip_id + frames);
    if (nseg != 0) {
      rte_mbuf_ext_refcnt_update(&shinfo_, int16_t(nseg));
      for (uint32_t i = 0, done = 0; i < nseg; i++) {
        const uint32_t n = std::min(kExtSeg, d.len - done);
        rte_pktmbuf_attach_extbuf(segs[i], mr->base + d.offset + done, RTE_BAD_IOVA, uint16_t(n),
                                  &shinfo_);
        segs[i]->data_len = uint16_t(n);
        segs[i]->pkt_len = n;
        rte_pktmbuf_chain(h, segs[i]);
        done += n;
      }
    }
    h->l2_len = kEthLen;
    h->l3_len = kIpLen;
    h->l4_len = d.l4_len;
    ip->hdr_checksum = 0;
    if ((d.flags & transport::kTxRoce) != 0) {
      // RoCEv2: UDP checksum 0 (the transport's), the NIC appends the pad and the ICRC.
      h->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | icrc_flag_;
      io_.flow_stage(f.port, h);
      continue;
    }
    h->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM;
    if (tso) {
      h->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
      h->tso_segsz = d.mss;
    }
    // DPDK's convention for checksum offload: the pseudo-header sum in the TCP checksum field.
    auto* th = reinterpret_cast<rte_tcp_hdr*>(p + kHdrTemplate);
    th->cksum = rte_ipv4_phdr_cksum(ip, h->ol_flags);
    io_.flow_stage(f.port, h);
  }
}

// ---- events to apps
// ----------------------------------------------------------------------------------

void FlowPath::deliver(std::span<const transport::Event> events) {
  for (const transport::Event& e : events) {
    if (e.flow >= flows_.size()) continue;
    Flow& f = flows_[e.flow];
    if (f.app == nullptr) {
      stats_.events_dropped++;
      continue;
    }
    abi::Completion c{};
    c.flow = e.flow;
    // Negative errno values: the CL_E* codes are the same numbers, but for a message longer
    // than its receive buffer (-EMSGSIZE: CL_ETRUNC, and imm carries the message's length).
    c.status = e.status == -EMSGSIZE && e.kind == EventKind::kRecvDone ? CL_ETRUNC : e.status;
    c.length = e.len;
    c.imm = e.kind == EventKind::kRecvDone ? e.aux : 0;
    c.wr_id = e.wr_id;
    switch (e.kind) {
      case EventKind::kSendDone:
      case EventKind::kWriteDone:
      case EventKind::kReadDone:
      case EventKind::kRecvDone:
        c.opcode = e.kind == EventKind::kRecvDone    ? abi::kOpFlowRecv
                   : e.kind == EventKind::kWriteDone ? abi::kOpRdmaWrite
                   : e.kind == EventKind::kReadDone  ? abi::kOpRdmaRead
                                                     : abi::kOpFlowSend;
        if (f.qp && e.kind == EventKind::kRecvDone) {
          // A QP's receive: the peer's immediate data, and whether a WRITE consumed it.
          c.flags |= abi::kCompRecv;
          c.imm = (e.flags & transport::kEvImm) != 0 ? e.imm : 0;
          if ((e.flags & transport::kEvImm) != 0) c.flags |= abi::kCompImm;
          if ((e.flags & transport::kEvWrite) != 0) c.flags |= abi::kCompRdmaWrite;
        }
        if (f.outstanding != 0) {
          f.outstanding--;
          release(f, 1);
        }
        break;
      case EventKind::kRecvData:
        f.data_pending += e.len;
        post_data(f);
        continue;
      case EventKind::kAccepted:
        established(f);
        [[fallthrough]];
      case EventKind::kConnected:
      case EventKind::kPeerClosed:
      case EventKind::kClosed:
      case EventKind::kRefused: {
        c.flags = abi::kCompEvent;
        c.opcode = event_code(e.kind);
        c.wr_id = e.kind == EventKind::kAccepted ? e.aux : 0;
        if (f.events_left != 0) {
          f.events_left--;
          release(f, 1);
        }
        if (e.kind == EventKind::kClosed || e.kind == EventKind::kRefused) {
          // Deliver any data event still waiting first, then nothing more for the app.
          if (f.data_pending != 0) post_data(f);
          f.app_done = true;
          release(f, f.events_left);
          f.events_left = 0;
          if (!f.qp) {
            // What the transport keeps of the flow now (TIME-WAIT) is its own: not in the app's
            // quota, and nothing the NIC places into the app's memory.
            uncharge(f);
            if (f.on_nic) {
              nic_cmd(ports_[f.port].nic->flow_remove(e.flow));
              f.on_nic = false;
            }
          }
        }
        break;
      }
    }
    c.pipe = f.cq;
    stats_.events++;
    post_completions(*f.app, f.cq, &c, 1);
  }
}

// A data event goes out when the pipe has room beyond what it owes; else it waits (poll()).
void FlowPath::post_data(Flow& f) {
  DpPipe& p = f.app->pipes[f.cq];
  if (p.cq_out.credits(p.promised + 1) < p.promised + 1) {
    stats_.data_coalesced++;
    if (!f.data_listed) {
      f.data_listed = true;
      data_waiting_.push_back(uint32_t(&f - flows_.data()));
    }
    return;
  }
  abi::Completion c{};
  c.flow = uint32_t(&f - flows_.data());
  c.flags = abi::kCompEvent;
  c.opcode = abi::kEvData;
  c.length = f.data_pending;
  c.pipe = f.cq;
  f.data_pending = 0;
  stats_.events++;
  post_completions(*f.app, f.cq, &c, 1);
}

// ---- flows opened and closed by transports
// ---------------------------------------------------

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
    L.app->pipes[L.cq].promised -= kFlowEvents;
    stats_.accept_refused++;
    return kNoFlow;
  }
  uint32_t id = alloc_flow();
  if (id == kNoFlow) {
    L.app->pipes[L.cq].promised -= kFlowEvents;
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
  rte_pmd_cleave_flow spec{};
  spec.src_ip = f.tuple.remote.ip.v4_host();
  spec.dst_ip = f.tuple.local.ip.v4_host();
  spec.src_port = f.tuple.remote.port;
  spec.dst_port = f.tuple.local.port;
  spec.proto = f.tuple.proto;
  spec.mode = RTE_PMD_CLEAVE_ZERO_COPY;
  spec.parser = RTE_PMD_CLEAVE_PARSER_TCP;
  spec.reliable = 1;
  spec.messages = f.nic_msg ? 1 : 0;
  spec.initial_seq = initial_seq;
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

// ---- apps' requests
// ----------------------------------------------------------------------------------

FlowAdmit FlowPath::flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr,
                                 abi::Completion& c, uint64_t /*now*/) {
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
  unsigned work = 0;
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
  uint32_t free = kNoFlow;
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    const Listener& l = listeners_[i];
    if (l.used && l.port == port && (l.ip == 0 || ip == 0 || l.ip == ip)) return CL_EADDRINUSE;
    if (!l.used && free == kNoFlow) free = i;
  }
  if (free == kNoFlow) return CL_ENOSPC;
  std::string error;
  Tp* tp = transport_for(name, port, error);
  if (tp == nullptr) return CL_ENOENT;
  std::vector<transport::Param> params = params_for(nullptr, port, *tp, message);
  if (message && !tp->t->check_params(params).empty()) return CL_EOPNOTSUPP;
  transport::Endpoint local{transport::IpAddr::v4(ip), port};
  int rc = tp->t->listen(free, local, params);
  if (rc != 0) return rc == -EEXIST ? CL_EADDRINUSE : CL_EINVAL;
  listeners_[free] = Listener{true, &a, a.id, cq, tp->index, ip, port};
  *listener = free;
  return 0;
}

int FlowPath::unlisten(uint32_t app_id, uint32_t listener) {
  if (listener >= listeners_.size() || !listeners_[listener].used ||
      listeners_[listener].app_id != app_id) {
    return CL_ENOENT;
  }
  transports_[listeners_[listener].tp]->t->unlisten(listener);
  listeners_[listener] = Listener{};
  return 0;
}

int FlowPath::connect(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view name,
                      bool message, uint32_t* flow, uint64_t now) {
  if (port == 0 || ip == 0) return CL_EINVAL;
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  auto hop = routes_.lookup(Ipv4{ip});
  if (!hop || hop->port >= ports_.size()) return CL_ENETUNREACH;
  transport::FlowTuple tuple;
  tuple.proto = 6;
  tuple.local.ip = transport::IpAddr::v4(ports_[hop->port].ip);
  tuple.remote = {transport::IpAddr::v4(ip), port};
  // An ephemeral port no flow to this peer uses, and no listener.
  const uint32_t span = 65536 - kEphemeralLo;
  for (uint32_t tries = 0; tuple.local.port == 0; tries++) {
    if (tries == span) return CL_EADDRINUSE;
    const auto lport = uint16_t(kEphemeralLo + next_ephemeral_++ % span);
    bool listened = std::any_of(listeners_.begin(), listeners_.end(),
                                [&](const Listener& l) { return l.used && l.port == lport; });
    if (!listened && hash_find(ip, port, ports_[hop->port].ip, lport) == kNoFlow) {
      tuple.local.port = lport;
    }
  }
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
    a.pipes[cq].promised -= kFlowEvents;
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

void FlowPath::fail_connect(uint32_t id, int32_t status) {
  Flow& f = flows_[id];
  if (f.app != nullptr) {
    abi::Completion c{};
    c.flow = id;
    c.flags = abi::kCompEvent;
    c.opcode = abi::kEvRefused;
    c.status = status;
    c.pipe = f.cq;
    release(f, f.events_left);
    f.events_left = 0;
    stats_.events++;
    post_completions(*f.app, f.cq, &c, 1);
  }
  stats_.flows_closed++;
  free_flow(id);
}

void FlowPath::app_detached(DpApp& a) {
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    if (listeners_[i].used && listeners_[i].app_id == a.id) unlisten(a.id, i);
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
    if (f.on_nic && !f.gone) {
      nic_cmd(ports_[f.port].nic->flow_remove(id));
      f.on_nic = false;
    }
  }
  reap();
  for (uint32_t mr = 0; mr < a.mrs.size(); mr++) {
    if (a.mrs[mr].nic_mr != 0) app_mr(a, mr, DpMr{});
  }
}

bool FlowPath::app_mr(DpApp& a, uint32_t mr, const DpMr& v) {
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
  for (uint32_t i = 1; i < nic_mrs_.size(); i++) {
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

// ---- queue pairs
// -------------------------------------------------------------------------------------

transport::roce::RcTransport* FlowPath::roce(std::string& error) {
  if (roce_tp_ == nullptr) {
    Tp* tp = transport_for("rocev2", 0, error);
    if (tp == nullptr) return nullptr;
    if (dynamic_cast<transport::roce::RcTransport*>(tp->t.get()) == nullptr) {
      error = "the transport named rocev2 is not Cleave's RoCEv2 RC";
      return nullptr;
    }
    roce_tp_ = tp;
  }
  return static_cast<transport::roce::RcTransport*>(roce_tp_->t.get());
}

FlowPath::Flow* FlowPath::own_qp(uint32_t app_id, uint32_t qp) {
  if (qp >= flows_.size()) return nullptr;
  Flow& f = flows_[qp];
  return f.qp && f.owner == app_id && f.app != nullptr && !f.gone ? &f : nullptr;
}

int FlowPath::qp_create(DpApp& a, uint16_t cq, uint32_t max_send_wr, uint32_t max_recv_wr,
                        std::string_view params, uint32_t* qp, uint32_t* qpn, uint32_t* ip,
                        uint32_t* max_pmtu) {
  if (max_send_wr == 0 || max_recv_wr == 0 || max_send_wr > kMaxQpWr || max_recv_wr > kMaxQpWr) {
    return CL_EINVAL;
  }
  if (cq >= a.pipes.size() || a.pipes[cq].kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  if (ports_.empty() || qpn_bits_ > 20) return CL_ENOSPC;  // room for 4 generation bits at least
  std::string error;
  transport::roce::RcTransport* rc = roce(error);
  if (rc == nullptr) return CL_ENOENT;
  // "key value key value ...": views into `params`, which outlives the call, after the
  // operator's defaults (config `rocev2:`), which the app's own override.
  const std::string cnp_dscp = std::to_string(p_.cnp_dscp);
  std::vector<transport::Param> p{{"dcqcn_cnp_dscp", cnp_dscp}};
  std::vector<std::string_view> words;
  for (size_t i = 0; i < params.size();) {
    const size_t end = std::min(params.find(' ', i), params.size());
    if (end > i) words.push_back(params.substr(i, end - i));
    i = end + 1;
  }
  if (words.size() % 2 != 0) return CL_EINVAL;
  for (size_t i = 0; i < words.size(); i += 2)
    p.push_back({words[i], words[i + 1]});
  if (!rc->check_params(p).empty()) return CL_EINVAL;
  if (!charge(a)) return CL_EDQUOT;
  const uint32_t id = alloc_flow();
  if (id == kNoFlow) {
    a.counters.flows--;
    return CL_ENOSPC;
  }
  // The generation in the high bits: a stale packet for the QP the id held before finds none.
  const uint32_t gens = 1u << (24 - qpn_bits_);
  qp_gen_[id] = qp_gen_[id] + 1 == gens ? 1 : qp_gen_[id] + 1;
  Flow& f = flows_[id];
  f.qpn = qp_gen_[id] << qpn_bits_ | id;
  transport::roce::QpCaps caps;
  caps.max_send_wr = max_send_wr;
  caps.max_recv_wr = max_recv_wr;
  if (rc->create_qp(id, f.qpn, caps, p) != 0) {
    free_flow(id);
    a.counters.flows--;
    return CL_EINVAL;
  }
  f.state = Flow::State::kOpen;
  f.qp = true;
  f.charged = true;
  f.app = &a;
  f.owner = a.id;
  f.cq = cq;
  f.tp = roce_tp_->index;
  f.msg_flow = true;
  f.tuple.proto = IPPROTO_UDP;
  f.tuple.local = {transport::IpAddr::v4(ports_[0].ip), transport::roce::kUdpPort};
  stats_.flows_opened++;
  *qp = id;
  *qpn = f.qpn;
  *ip = ports_[0].ip;
  *max_pmtu = max_pmtu_of(ports_[0].mtu);
  return 0;
}

int FlowPath::qp_modify(uint32_t app_id, uint32_t qp, const abi::QpAttr& attr, uint32_t mask,
                        uint64_t now) {
  namespace roce = transport::roce;
  Flow* fp = own_qp(app_id, qp);
  if (fp == nullptr) return CL_ENOENT;
  Flow& f = *fp;
  if ((mask & ~abi::kQpAttrAll) != 0 || attr.state > abi::kQpErr || attr.selective_repeat > 1 ||
      (attr.access & ~(abi::kAccessRemoteRead | abi::kAccessRemoteWrite)) != 0) {
    return CL_EINVAL;
  }
  roce::QpAttr cur;
  roce::RcTransport& rc = *static_cast<roce::RcTransport*>(roce_tp_->t.get());
  rc.query_qp(qp, &cur);
  roce::QpAttr x;
  x.state = roce::QpState(attr.state);  // the same numbers
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
  x.access = uint8_t(((attr.access & abi::kAccessRemoteRead) != 0 ? roce::kRemoteRead : 0) |
                     ((attr.access & abi::kAccessRemoteWrite) != 0 ? roce::kRemoteWrite : 0));
  x.selective_repeat = attr.selective_repeat != 0;
  x.rate_limit_kbps = attr.rate_limit_kbps;
  const uint32_t tmask = mask & ~abi::kQpAttrRemoteIp;  // the transport's bits are the same

  // To RTR: the route to the peer, its MAC, and the NIC flow that places its packets, first.
  const bool to_rtr = (mask & abi::kQpAttrState) != 0 && attr.state == abi::kQpRtr &&
                      cur.state == roce::QpState::kInit;
  bool added = false;
  if (to_rtr) {
    if ((mask & abi::kQpAttrRemoteIp) == 0 || attr.remote_ip == 0 ||
        (mask & abi::kQpAttrPmtu) == 0) {
      return CL_EINVAL;
    }
    auto hop = routes_.lookup(Ipv4{attr.remote_ip});
    if (!hop || hop->port >= ports_.size()) return CL_ENETUNREACH;
    if (attr.pmtu > max_pmtu_of(ports_[hop->port].mtu)) return CL_EINVAL;  // frames too long
    f.port = hop->port;
    f.next_hop = hop->addr.host;
    f.tuple.local.ip = transport::IpAddr::v4(ports_[hop->port].ip);
    f.tuple.remote = {transport::IpAddr::v4(attr.remote_ip), roce::kUdpPort};
    f.l2_ready = false;
    fill_l2(f, now);  // else ARP is asked now, and TX waits for it (retransmission covers it)
    rte_pmd_cleave_flow spec{};
    spec.src_ip = attr.remote_ip;
    spec.dst_ip = ports_[hop->port].ip;
    spec.dst_port = roce::kUdpPort;
    spec.proto = IPPROTO_UDP;
    spec.mode = RTE_PMD_CLEAVE_ZERO_COPY;
    spec.parser = RTE_PMD_CLEAVE_PARSER_ROCE;
    spec.reliable = 1;
    spec.messages = 1;
    spec.initial_seq = attr.rq_psn & roce::kPsnMask;
    spec.pmtu = attr.pmtu;
    spec.qpn = f.qpn;
    spec.owner = f.owner;
    // The NIC places a go-back-N QP's requests in order only: it must know which way it recovers.
    const bool sr = (mask & abi::kQpAttrSelectiveRepeat) != 0 ? attr.selective_repeat != 0
                                                              : cur.selective_repeat;
    spec.selective_repeat = sr ? 1 : 0;
    // Without a NIC flow the QP still works: every payload takes the copy path, and READ and
    // WRITE targets are refused (the NIC holds the MR table).
    if (f.on_nic) nic_cmd(ports_[f.port].nic->flow_remove(qp));
    f.on_nic = nic_cmd(ports_[f.port].nic->flow_add(qp, spec)) == 0;
    f.nic_msg = f.on_nic;
    added = f.on_nic;
  }
  roce_tp_->ctx->at(rte_rdtsc());
  const int rc_status = rc.modify_qp(qp, x, tmask, *roce_tp_->ctx);
  roce_tp_->ctx->flush();
  if (rc_status != 0) {
    if (added) {
      nic_cmd(ports_[f.port].nic->flow_remove(qp));
      f.on_nic = f.nic_msg = false;
    }
    return CL_EINVAL;
  }
  // Back to RESET: the peer is forgotten, and so is the NIC flow.
  if ((mask & abi::kQpAttrState) != 0 && attr.state == abi::kQpReset && f.on_nic) {
    nic_cmd(ports_[f.port].nic->flow_remove(qp));
    f.on_nic = f.nic_msg = false;
    f.tuple.remote = {};
  }
  return 0;
}

int FlowPath::qp_query(uint32_t app_id, uint32_t qp, abi::QpAttr* out) const {
  namespace roce = transport::roce;
  if (qp >= flows_.size()) return CL_ENOENT;
  const Flow& f = flows_[qp];
  if (!f.qp || f.owner != app_id || f.app == nullptr || f.gone) return CL_ENOENT;
  roce::QpAttr a;
  static_cast<const roce::RcTransport*>(roce_tp_->t.get())->query_qp(qp, &a);
  *out = abi::QpAttr{};
  out->state = uint8_t(a.state);
  out->timeout = a.timeout;
  out->retry_cnt = a.retry_cnt;
  out->rnr_retry = a.rnr_retry;
  out->min_rnr_timer = a.min_rnr_timer;
  out->max_rd_atomic = a.max_rd_atomic;
  out->max_dest_rd_atomic = a.max_dest_rd_atomic;
  out->selective_repeat = a.selective_repeat ? 1 : 0;
  out->access = ((a.access & roce::kRemoteRead) != 0 ? abi::kAccessRemoteRead : 0) |
                ((a.access & roce::kRemoteWrite) != 0 ? abi::kAccessRemoteWrite : 0);
  out->pmtu = a.pmtu;
  out->dest_qpn = a.dest_qpn;
  out->rq_psn = a.rq_psn;
  out->sq_psn = a.sq_psn;
  out->remote_ip = f.tuple.remote.ip.v4_host();
  out->rate_limit_kbps = a.rate_limit_kbps;
  return 0;
}

int FlowPath::qp_destroy(uint32_t app_id, uint32_t qp) {
  if (own_qp(app_id, qp) == nullptr) return CL_ENOENT;
  free_qp(qp);
  return 0;
}

// Pending requests complete with -ECANCELED (delivered while the app is there), then the flow
// and its NIC flow go.
void FlowPath::free_qp(uint32_t id) {
  roce_tp_->ctx->at(rte_rdtsc());
  static_cast<transport::roce::RcTransport*>(roce_tp_->t.get())->destroy_qp(id, *roce_tp_->ctx);
  roce_tp_->ctx->flush();
  stats_.flows_closed++;
  free_flow(id);
}

bool FlowPath::cq_in_use(const DpApp& a, uint16_t cq) const {
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

void FlowPath::rows(std::vector<FlowRow>& out, uint32_t only) const {
  for (uint32_t i = 0; i < listeners_.size(); i++) {
    const Listener& l = listeners_[i];
    if (!l.used || only != kNoFlow) continue;
    FlowRow r;
    r.id = i;
    r.app = l.app_id;
    r.listener = true;
    r.transport = transports_[l.tp]->name;
    r.tuple.local = {transport::IpAddr::v4(l.ip), l.port};
    out.push_back(std::move(r));
  }
  for (uint32_t id = 0; id < flows_.size(); id++) {
    const Flow& f = flows_[id];
    if (f.state == Flow::State::kFree || (only != kNoFlow && id != only)) continue;
    FlowRow r;
    r.id = id;
    r.app = f.app != nullptr ? f.owner : 0;
    r.transport = transports_[f.tp]->name;
    r.tuple = f.tuple;
    if (f.state == Flow::State::kResolving) {
      r.text.emplace_back("state", "resolving");
    } else {
      RowSink sink(r);
      transports_[f.tp]->t->flow_info(id, sink);
    }
    out.push_back(std::move(r));
  }
}

}  // namespace cleave::dp
