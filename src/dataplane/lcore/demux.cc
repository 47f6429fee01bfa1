// demux.cc - received frames to their transports: the claims transports make, the flow hash,
// the listeners, and the answer to a packet of no flow (flows.h).
//
// Nothing here allocates, locks or logs on the packet path; claims are learned on the control
// path (construction, and when the registry grew).
#include "lcore/flows_impl.h"

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <random>

#include "lcore/demux.h"
#include "siphash.h"

namespace cleave::dp {

namespace {

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

}  // namespace

// The hash of a key (for the table's spread, not secrecy: flows are made by listeners and apps).
uint32_t FlowPath::mix(const HashKey& k) {
  uint64_t h = (uint64_t(k.rip) << 32 | uint64_t(k.rport) << 16 | k.lport) ^
               (uint64_t(k.lip) << 7) ^ (uint64_t(k.proto) << 56);
  h *= 0x9E3779B97F4A7C15ull;
  return uint32_t(h >> 32);
}

// Every transport the registry holds and this flow path has not met yet: its claim, read from
// an instance made for the purpose and dropped (the claim's functions need none). Runs at
// construction and whenever the registry grew (a plugin attached at run time).
void FlowPath::learn_claims() {
  transport::Registry& reg = transport::Registry::global();
  const std::span<const transport::Registry::Entry> entries = reg.entries();
  for (; registry_seen_ < entries.size(); registry_seen_++) {
    const transport::Registry::Entry& e = entries[registry_seen_];
    std::unique_ptr<transport::Transport> t = reg.create(e.name);
    if (t) add_claim(e.name, t->claim());
  }
  link_claims();
}

// The registry refused every claim that collides with another (Registry::claim_error), so each
// protocol and UDP port has one claim; should one come twice all the same, the first keeps it.
void FlowPath::add_claim(std::string_view name, const transport::Claim& c) {
  if (c.proto == 0 || c.parse == nullptr || claims_.size() >= 255) return;
  const auto index = uint8_t(claims_.size() + 1);
  std::vector<uint16_t> ports;
  if (c.proto == IPPROTO_UDP) {
    for (uint16_t port : c.udp_ports) {
      if (port == 0 || udp_claims_[port] != 0) continue;
      udp_claims_[port] = index;
      ports.push_back(port);
    }
    if (ports.empty()) return;
    std::sort(ports.begin(), ports.end());
  } else if (proto_claims_[c.proto] == 0) {
    proto_claims_[c.proto] = index;
  } else {
    return;
  }
  ClaimEntry ce{std::string(name), c, std::move(ports), -1};
  ce.claim.udp_ports = {};  // taken into the tables above
  // The counters of the NIC's parser kinds (tcp_*, roce_*, udp_*); others count no_transport.
  switch (c.nic.parser) {
    case transport::NicParser::kTcp:
      ce.malformed = Drop::kTcpMalformed;
      ce.bad_checksum = Drop::kTcpBadChecksum;
      ce.no_flow = Drop::kTcpNoFlow;
      break;
    case transport::NicParser::kRoce:
      ce.malformed = Drop::kRoceMalformed;
      ce.bad_checksum = Drop::kRoceBadUdpChecksum;
      ce.no_flow = Drop::kRoceNoQp;
      break;
    case transport::NicParser::kUdp:
      ce.malformed = Drop::kUdpMalformed;
      ce.bad_checksum = Drop::kUdpBadChecksum;
      ce.no_flow = Drop::kUdpNoFlow;
      break;
    default:
      break;
  }
  ce.l4_verdict =
      c.nic.parser == transport::NicParser::kTcp || c.nic.parser == transport::NicParser::kUdp;
  ce.check = software_check(uint8_t(c.nic.parser));
  claims_.push_back(std::move(ce));
}

// Each claim's transport, once it is instantiated.
void FlowPath::link_claims() {
  for (ClaimEntry& c : claims_) {
    for (const auto& tp : transports_) {
      if (c.tp < 0 && tp->name == c.transport) c.tp = tp->index;
    }
  }
}

const FlowPath::ClaimEntry* FlowPath::claim_of(const Tp& tp) const {
  for (const ClaimEntry& c : claims_) {
    if (c.tp == tp.index) return &c;
  }
  return nullptr;
}

// The IP protocol of `tp`'s flows and listeners: its claim's, TCP for one that claims none (it
// serves what another claim takes, as bindings give it: TCP's).
uint8_t FlowPath::proto_of(const Tp& tp) const {
  const ClaimEntry* c = claim_of(tp);
  return c != nullptr ? c->claim.proto : uint8_t(IPPROTO_TCP);
}

bool FlowPath::claims(uint8_t proto, uint16_t udp_port) const {
  return (proto == IPPROTO_UDP ? udp_claims_[udp_port] : proto_claims_[proto]) != 0;
}

// ---- the flow hash: flows by their tuple, listeners by their local address
// ----------------------------------------------------------------------------------------------

FlowPath::HashKey FlowPath::key_of(const Flow& f) {
  const transport::FlowTuple& t = f.tuple;
  return {t.remote.ip.v4_host(), t.local.ip.v4_host(), t.remote.port, t.local.port, t.proto};
}

FlowPath::HashKey FlowPath::key_of(const Listener& l) {
  return {0, l.ip, 0, l.port, l.proto};
}

void FlowPath::hash_put(uint32_t entry, const HashKey& k) {
  const size_t mask = hash_.size() - 1;
  size_t i = mix(k) & mask;
  while (hash_[i] != 0 && hash_[i] != kTombstone)
    i = (i + 1) & mask;
  hash_[i] = entry;
}

void FlowPath::hash_drop(uint32_t entry, const HashKey& k) {
  const size_t mask = hash_.size() - 1;
  for (size_t i = mix(k) & mask; hash_[i] != 0; i = (i + 1) & mask) {
    if (hash_[i] == entry) {
      hash_[i] = kTombstone;
      return;
    }
  }
}

void FlowPath::hash_insert(uint32_t id) {
  hash_put(id + 1, key_of(flows_[id]));
}

void FlowPath::hash_remove(uint32_t id) {
  hash_drop(id + 1, key_of(flows_[id]));
}

void FlowPath::listener_insert(uint32_t l) {
  hash_put(kListenerEntry | l, key_of(listeners_[l]));
}

void FlowPath::listener_remove(uint32_t l) {
  hash_drop(kListenerEntry | l, key_of(listeners_[l]));
}

uint32_t FlowPath::hash_find(uint8_t proto, uint32_t rip, uint16_t rport, uint32_t lip,
                             uint16_t lport) const {
  const HashKey k{rip, lip, rport, lport, proto};
  const size_t mask = hash_.size() - 1;
  for (size_t i = mix(k) & mask; hash_[i] != 0; i = (i + 1) & mask) {
    const uint32_t e = hash_[i];
    if (e == kTombstone || (e & kListenerEntry) != 0) continue;
    const transport::FlowTuple& t = flows_[e - 1].tuple;
    if (t.remote.port == rport && t.local.port == lport && t.remote.ip.v4_host() == rip &&
        t.local.ip.v4_host() == lip && t.proto == proto) {
      return e - 1;
    }
  }
  return kNoFlow;
}

// The listener for `lip`:`lport`, or for any of our addresses on `lport` (listen() lets only one
// of the two exist); kNoFlow when there is none.
uint32_t FlowPath::listener_find(uint8_t proto, uint32_t lip, uint16_t lport) const {
  const size_t mask = hash_.size() - 1;
  for (const uint32_t ip : {lip, 0u}) {
    const HashKey k{0, ip, 0, lport, proto};
    for (size_t i = mix(k) & mask; hash_[i] != 0; i = (i + 1) & mask) {
      const uint32_t e = hash_[i];
      if (e == kTombstone || (e & kListenerEntry) == 0) continue;
      const Listener& l = listeners_[e & ~kListenerEntry];
      if (l.port == lport && l.ip == ip && l.proto == proto) return e & ~kListenerEntry;
    }
    if (lip == 0) break;
  }
  return kNoFlow;
}

// Whether a listener has `lport`, on any address (listeners' are ours or any).
bool FlowPath::port_listened(uint8_t proto, uint16_t lport) const {
  if (listener_find(proto, 0, lport) != kNoFlow) return true;
  return std::any_of(ports_.begin(), ports_.end(), [&](const FlowPort& p) {
    return listener_find(proto, p.ip, lport) != kNoFlow;
  });
}

// Whether a connection of `t` (its local address and peer given) may take local port `port`:
// no flow to the same peer or listener has it, and with several shards, the NICs' RSS steers
// its replies to this shard's queue (nic.h), so the flow's packets and its app stay on this
// lcore (as mTCP and TAS choose).
bool FlowPath::port_free(const transport::FlowTuple& t, uint16_t port) const {
  const uint32_t lip = t.local.ip.v4_host();
  const uint32_t rip = t.remote.ip.v4_host();
  return (p_.shards == 1 ||
          rss::reply_queue(rss::kDefaultKey, reta_, lip, port, rip, t.remote.port) == p_.shard) &&
         !port_listened(t.proto, port) &&
         hash_find(t.proto, rip, t.remote.port, lip, port) == kNoFlow;
}

// A local port for a connection of `t`: RFC 6056's walk (EphemeralPorts) over free ones. 0: none
// is left.
uint16_t FlowPath::ephemeral_port(const transport::FlowTuple& t) {
  return ephemeral_.pick(t.proto, t.local.ip.v4_host(), t.remote.ip.v4_host(), t.remote.port,
                         [&](uint16_t port) { return port_free(t, port); });
}

// A local port for a connection of `t` whose transport claims UDP ports (`c`): the peer's
// answers must reach it, so one of those, free; the walk starts where a hash of the peer says
// so that connections to several peers spread. 0: none is left.
uint16_t FlowPath::claimed_port(const ClaimEntry& c, const transport::FlowTuple& t) const {
  const size_t n = c.ports.size();
  const size_t start = n == 0 ? 0 : (t.remote.ip.v4_host() ^ t.remote.port) % n;
  for (size_t i = 0; i < n; i++) {
    const uint16_t port = c.ports[(start + i) % n];
    if (port_free(t, port)) return port;
  }
  return 0;
}

// ---- EphemeralPorts (demux.h)
// ----------------------------------------------------------------------------------------------

namespace {

// splitmix64: spreads a seed over the keys and counters (tests).
uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

EphemeralPorts::EphemeralPorts() {
  std::random_device rd;
  auto r64 = [&] { return uint64_t(rd()) << 32 | rd(); };
  for (uint64_t* k : {key_f_, key_g_}) {
    k[0] = r64();
    k[1] = r64();
  }
  for (uint16_t& c : table_)
    c = uint16_t(rd());
}

EphemeralPorts::EphemeralPorts(uint64_t seed) {
  for (uint64_t* k : {key_f_, key_g_}) {
    k[0] = splitmix(seed);
    k[1] = splitmix(seed);
  }
  for (uint16_t& c : table_)
    c = uint16_t(splitmix(seed));
}

uint32_t EphemeralPorts::hash(const uint64_t key[2], uint8_t proto, uint32_t local_ip,
                              uint32_t remote_ip, uint16_t remote_port) {
  const uint64_t m[2] = {uint64_t(local_ip) << 32 | remote_ip, uint64_t(proto) << 16 | remote_port};
  return uint32_t(transport::siphash24(key, m, 2));
}

// ---- receive
// ----------------------------------------------------------------------------------------------

Drop FlowPath::rx(uint8_t port, rte_mbuf* m) {
  const uint8_t* fr = rte_pktmbuf_mtod(m, const uint8_t*);
  if (m->nb_segs != 1 || m->data_len < kEthLen + kIpLen) return kFrameMalformed;
  const uint8_t* ip = fr + kEthLen;
  const uint32_t ihl = (ip[0] & 0xF) * 4u;
  const uint32_t ip_len = load16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < kIpLen || ip_len < ihl) return kFrameMalformed;
  const uint8_t proto = ip[9];
  const uint8_t* l4 = ip + ihl;
  const uint32_t avail = m->data_len >= kEthLen + ihl ? m->data_len - kEthLen - ihl : 0;
  uint8_t claim = 0;
  if (proto == IPPROTO_UDP) {
    if (avail >= 4) claim = udp_claims_[load16(l4 + 2)];
  } else {
    claim = proto_claims_[proto];
  }
  if (claim == 0) return Drop::kNoTransport;
  const ClaimEntry& c = claims_[claim - 1];

  // The claim's parse splits header and payload and reads the flow key. TCP's checksum covers
  // a header the parse has read; UDP's is the UDP layer's, checked before the transport that
  // claims the port reads its header.
  const rte_pmd_cleave_placement* pl = rte_pmd_cleave_placement_get(m, placement_offset_);
  const bool deferred = pl->decision == RTE_PMD_CLEAVE_DEFERRED;
  const uint32_t total = ip_len - ihl;
  if (avail < c.claim.min_header || total < uint32_t(c.claim.min_header) + c.claim.trailer) {
    return c.malformed;
  }
  const bool whole = m->data_len >= kEthLen + ip_len;
  const transport::RxL4 in{l4, avail, total, whole, pl->payload_len};
  transport::RxParsed k;
  if (proto != IPPROTO_UDP && !c.claim.parse(in, &k)) return c.malformed;
  if (deferred && !whole) return c.malformed;  // the copy path needs the whole frame
  // The L4 checksum: the NIC's verdict where its parser checks it (TCP, plain UDP), a UDP
  // checksum it found bad, else ours on a whole frame (UDP's is optional: 0 is none). The NIC's
  // verdict on another parser's packet is its own check's (RoCEv2's ICRC): the transport's.
  transport::Csum csum = nic_csum(*pl);
  if (c.l4_verdict && csum == transport::Csum::kBad) return c.bad_checksum;
  if (proto == IPPROTO_UDP) {
    if (deferred && pl->reason == RTE_PMD_CLEAVE_DEFER_BAD_L4_CHECKSUM) return c.bad_checksum;
    if (csum == transport::Csum::kNotChecked && whole && load16(l4 + 6) != 0 &&
        rte_ipv4_udptcp_cksum_verify(reinterpret_cast<const rte_ipv4_hdr*>(ip), l4) != 0) {
      return c.bad_checksum;
    }
    if (!c.claim.parse(in, &k)) return c.malformed;
  } else if (proto == IPPROTO_TCP && csum == transport::Csum::kNotChecked && whole) {
    if (rte_ipv4_udptcp_cksum_verify(reinterpret_cast<const rte_ipv4_hdr*>(ip), l4) != 0) {
      return c.bad_checksum;
    }
    csum = transport::Csum::kGood;
  }

  transport::RxHeader h;
  Tp* tp = nullptr;
  if (c.claim.key == transport::FlowKey::kNumber) {
    tp = find_numbered(m, c, k.number, load32(ip + 12), &h);
    // Another shard's QP (its NIC flow steers its frames there; this one came by RSS or to
    // queue 0, before the QP's flow was on the NIC or after it left): to that shard.
    if (const uint32_t id = k.number & ((1u << qpn_bits_) - 1);
        tp == nullptr && !flow_ids_.has(id) && id < flows_.size()) {
      io_.flow_hand_off(shard_of(id), port, m);
      return Drop::kCount;
    }
  } else {
    tp = find_tuple(port, proto, load32(ip + 12), load32(ip + 16), k, m, &h);
    // No flow here, and another shard's listener has the address: the flow, or the one the
    // packet may open, is that shard's.
    if (tp == nullptr && h.has_listener && listeners_[h.listener].remote) {
      io_.flow_hand_off(listeners_[h.listener].shard, port, m);
      return Drop::kCount;
    }
  }
  if (tp == nullptr) {
    if (c.claim.key == transport::FlowKey::kTuple && c.claim.no_flow_answer != nullptr) {
      answer_no_flow(port, m, ip, in, k, *c.claim.no_flow_answer);
    }
    return c.no_flow;
  }
  // What the NIC checks on a parser's packets and did not, on a whole frame: done here
  // (RoCEv2's ICRC; the transport counts a bad one per flow).
  if (csum == transport::Csum::kNotChecked && whole && c.check != nullptr) {
    csum = c.check(ip, ip_len) ? transport::Csum::kGood : transport::Csum::kBad;
  }
  h.l3 = ip;
  h.l3_len = uint16_t(ihl);
  h.l4 = l4;
  h.l4_len = k.header_len;
  h.l4_csum = csum;
  h.payload_len = k.payload_len;
  stage_rx(*tp, h, m, *pl);
  return Drop::kCount;
}

// A flow found by number (a QP: generation << bits | flow id, or the NIC's flow id), which must
// be the claim's transport's, open, and its peer's.
FlowPath::Tp* FlowPath::find_numbered(const rte_mbuf* m, const ClaimEntry& c, uint32_t number,
                                      uint32_t rip, transport::RxHeader* h) {
  uint32_t id = number & ((1u << qpn_bits_) - 1);
  if ((m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0) id = m->hash.fdir.hi;
  if (id >= flows_.size() || c.tp < 0) return nullptr;
  const Flow& f = flows_[id];
  if (!f.qp || f.qpn != number || f.state != Flow::State::kOpen || f.gone || f.tp != c.tp) {
    return nullptr;
  }
  // From the peer's address, or from one of its others a route of the QP's goes to.
  uint8_t route = 0;
  if (f.tuple.remote.ip.v4_host() != rip) {
    const uint8_t n = f.alt != nullptr ? f.alt->count : 0;
    while (route < n && f.alt->route[route].remote_ip != rip)
      route++;
    if (route == n) return nullptr;
    route++;
  }
  h->flow = id;
  h->route = route;
  return transports_[f.tp].get();
}

// A flow found by tuple (or the NIC's flow id); else the listener of its local port, which a
// packet that may open a flow names even when a flow has the tuple (a TIME-WAIT record may hand
// the tuple to a new connection).
FlowPath::Tp* FlowPath::find_tuple(uint8_t port, uint8_t proto, uint32_t rip, uint32_t lip,
                                   const transport::RxParsed& k, const rte_mbuf* m,
                                   transport::RxHeader* h) {
  uint32_t id = kNoFlow;
  if ((m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0 && m->hash.fdir.hi < flows_.size() &&
      flows_[m->hash.fdir.hi].state == Flow::State::kOpen) {
    id = m->hash.fdir.hi;
  } else {
    id = hash_find(proto, rip, k.src_port, lip, k.dst_port);
  }
  const bool have_flow = id != kNoFlow && flows_[id].state == Flow::State::kOpen;
  const uint32_t l = !have_flow || k.opens ? listener_find(proto, lip, k.dst_port) : kNoFlow;
  if (have_flow) {
    h->flow = id;
    if (l != kNoFlow && listeners_[l].tp == flows_[id].tp && lip == ports_[port].ip) {
      h->has_listener = true;
      h->listener = l;
    }
    return transports_[flows_[id].tp].get();
  }
  if (l == kNoFlow || lip != ports_[port].ip) return nullptr;
  h->has_listener = true;
  h->listener = l;
  if (listeners_[l].remote) return nullptr;  // another shard's: rx() hands the frame over
  return transports_[listeners_[l].tp].get();
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

void FlowPath::rx_flush() {
  lcore_.check("FlowPath::rx_flush");
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

// A packet of no flow and no listener, answered as its claim says (TCP's RST; RFC 9293
// 3.10.7.1).
void FlowPath::answer_no_flow(uint8_t port, const rte_mbuf* m, const uint8_t* ip,
                              const transport::RxL4& in, const transport::RxParsed& k,
                              NoFlowAnswer answer) {
  std::array<uint8_t, transport::kMaxL4Header> l4{};
  const size_t n = answer(in, k, l4.data());
  if (n == 0 || n > l4.size()) return;
  if (send_back(port, rte_pktmbuf_mtod(m, const rte_ether_hdr*), ip, l4.data(), n)) {
    stats_.rst_sent++;
  }
}

// A TCP or UDP header (`len` bytes, its checksum filled here) back to where the frame of
// `in_eth` and `ip` came from, out of `port`.
bool FlowPath::send_back(uint8_t port, const rte_ether_hdr* in_eth, const uint8_t* ip,
                         const uint8_t* l4, size_t len) {
  const uint8_t proto = ip[9];
  const size_t csum_at = proto == IPPROTO_TCP   ? offsetof(rte_tcp_hdr, cksum)
                         : proto == IPPROTO_UDP ? offsetof(rte_udp_hdr, dgram_cksum)
                                                : 0;
  if (csum_at == 0 || len < csum_at + 2) {
    stats_.tx_bad_desc++;
    return false;
  }
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
  oip->next_proto_id = proto;
  std::memcpy(&oip->src_addr, ip + 16, 4);
  std::memcpy(&oip->dst_addr, ip + 12, 4);
  auto* out = reinterpret_cast<uint8_t*>(oip + 1);
  std::memcpy(out, l4, len);
  out[csum_at] = out[csum_at + 1] = 0;
  oip->hdr_checksum = rte_ipv4_cksum(oip);
  const uint16_t sum = rte_ipv4_udptcp_cksum(oip, out);
  std::memcpy(out + csum_at, &sum, 2);
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

}  // namespace cleave::dp
