// dataplane.cc - the dataplane lcore's loop and packet path: RX burst, ARP, ICMP echo, the
// exception tap, timers, TX flush. Control requests are answered in dataplane_ctl.cc.
//
// Nothing here allocates from the heap, locks, logs or makes a syscall of its own: packets are
// counted, never logged. (The PMDs may make syscalls: net_tap reads its fd, which is why the
// exception taps are polled on a timer rather than every iteration.)
#include "lcore/dataplane.h"

#include <rte_arp.h>
#include <rte_branch_prediction.h>
#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ether.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_prefetch.h>
#include <rte_udp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>

namespace cleave::dp {

namespace {

constexpr uint32_t kTimerTickUs = 100;
constexpr uint32_t kIdleLoopsBeforeSleep = 1024;
constexpr uint32_t kExceptionPollUs = 50;
constexpr uint32_t kMinFrame = 60;  // Ethernet minimum without FCS
constexpr unsigned kInboxSize = 1024;

uint64_t ms_to_cycles(uint32_t ms, uint64_t hz) {
  return uint64_t{ms} * hz / 1000;
}

rte_ether_addr to_ether(const Mac& m) {
  rte_ether_addr a;
  std::memcpy(a.addr_bytes, m.b.data(), RTE_ETHER_ADDR_LEN);
  return a;
}

Mac to_mac(const rte_ether_addr& a) {
  Mac m;
  std::memcpy(m.b.data(), a.addr_bytes, RTE_ETHER_ADDR_LEN);
  return m;
}

// One's-complement update of a checksum when one 16-bit word changes (RFC 1624, eqn. 3).
uint16_t cksum_update16(uint16_t cksum_be, uint16_t old_word, uint16_t new_word) {
  uint32_t sum = (~rte_be_to_cpu_16(cksum_be) & 0xffffu) + (~old_word & 0xffffu) + new_word;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  return rte_cpu_to_be_16(static_cast<uint16_t>(~sum & 0xffff));
}

}  // namespace

DataplaneParams DataplaneParams::from_config(const Config& c, uint64_t tsc_hz, uint16_t shard) {
  DataplaneParams p;
  p.shard = shard;
  p.shards = uint16_t(c.dataplane.lcores.size());
  p.burst = c.dataplane.burst;
  p.idle_sleep_us = c.dataplane.idle_sleep_us;
  p.max_apps = c.apps.max_apps;
  p.app_budget = c.apps.budget;
  p.arp.max_entries = c.arp.max_entries;
  p.arp.retries = c.arp.retries;
  p.arp.reachable_cycles = ms_to_cycles(c.arp.reachable_ms, tsc_hz);
  p.arp.retry_cycles = ms_to_cycles(c.arp.retry_ms, tsc_hz);
  p.arp.failed_hold_cycles = ms_to_cycles(c.arp.failed_hold_ms, tsc_hz);
  p.nic.model.max_flows = c.nic.max_flows;
  p.nic.model.max_mrs = c.nic.max_mrs;
  p.nic.model.ms_committed_per_flow = c.nic.ms_committed;
  p.nic.model.ms_store_entries = c.nic.ms_store;
  p.flows.max_flows = c.nic.max_flows;
  p.flows.max_nic_mrs = c.nic.max_mrs - 1;  // the last id is net_cleave's bounce MR
  p.flows.tsc_hz = tsc_hz;
  p.flows.shard = p.shard;
  p.flows.shards = p.shards;
  // The transports' sections: TIME-WAIT records each keep a flow id (at most half of the
  // shard's, and the shards share the limit); every QP's CNPs go out with the configured DSCP
  // unless its own parameters say otherwise.
  const uint32_t shard_flows = c.nic.max_flows / p.shards;
  const uint32_t time_wait = (c.tcp.max_time_wait + p.shards - 1) / p.shards;
  p.flows.settings.push_back(
      {"tcp", "max_time_wait", std::to_string(std::min(time_wait, shard_flows / 2))});
  p.flows.qp_params.push_back({"rocev2", "dcqcn_cnp_dscp", std::to_string(c.rocev2.cnp_dscp)});
  return p;
}

Dataplane::Dataplane(const DataplaneParams& params, std::vector<DpPort> ports,
                     const RouteTable& routes, rte_mempool* pool, CtlChannel& ctl)
    : params_(params),
      routes_(routes),
      pool_(pool),
      ctl_(ctl),
      tsc_hz_(rte_get_tsc_hz()),
      ctl_interval_(tsc_hz_ / 1000),
      timers_(tsc_hz_ / (1000000 / kTimerTickUs), rte_rdtsc()),
      arp_(params.arp, timers_, *this, stats_.proto),
      apps_(params.max_apps, params.app_budget, tsc_hz_) {
  if (params_.burst > kMaxBurst) params_.burst = kMaxBurst;
  ports_.resize(ports.size());
  for (size_t i = 0; i < ports.size(); i++) {
    Port& p = ports_[i];
    p.conf = std::move(ports[i]);
    p.mac = to_ether(p.conf.mac);
    p.ip_be = rte_cpu_to_be_32(p.conf.ipv4.addr.host);
    p.bcast_be = rte_cpu_to_be_32(p.conf.ipv4.network().host | ~p.conf.ipv4.mask());
    p.stats = &stats_.ports[i];
    p.nic = open_nic(p.conf.port_id, pool, params_.nic, NicQueue{params_.shard, params_.shards});
    for (size_t d = 0; d < kFaultDirs; d++) {
      if (p.conf.faults[d].enabled() && p.nic->set_faults(FaultDir(d), p.conf.faults[d]) != 0) {
        throw std::runtime_error("port " + p.conf.name + ": the NIC refused its faults");
      }
    }
    p.wire.port_id = p.conf.port_id;
    p.wire.nic = p.nic.get();
    p.wire.full_reason = Drop::kTxFull;
    p.wire.packets = &p.stats->tx_packets;
    p.wire.bytes = &p.stats->tx_bytes;
    p.exception.port_id = p.conf.exception_port_id;
    p.exception.full_reason = Drop::kExceptionFull;
    p.exception.packets = &p.stats->to_kernel;
  }
  std::vector<FlowPort> fports;
  for (Port& p : ports_)
    fports.push_back(FlowPort{p.nic.get(), p.conf.ipv4.addr.host, p.mac, p.conf.mtu});
  FlowParams fp = params_.flows;
  fp.tsc_hz = tsc_hz_;
  flows_ = std::make_unique<FlowPath>(fp, std::move(fports), arp_, routes_, pool,
                                      static_cast<FlowIo&>(*this), stats_.flows);
  for (Port& p : ports_) {
    if (p.nic->backend() == NicBackend::kCleave) {  // its interrupts wake sleeping apps
      apps_.set_interrupts(p.nic.get());
      break;
    }
  }
  apps_.set_flow_handler(flows_.get());
  flows_->set_completions(&apps_.completions());
  if (params_.shards > 1) {
    static std::atomic<unsigned> rings{0};
    const std::string name = "cl_inbox" + std::to_string(rings.fetch_add(1));
    inbox_ = rte_ring_create_elem(name.c_str(), sizeof(HandOffEntry), kInboxSize, SOCKET_ID_ANY,
                                  RING_F_SC_DEQ);
    if (inbox_ == nullptr) {
      throw std::runtime_error("shard " + std::to_string(params_.shard) +
                               ": cannot create its inbox ring: " + rte_strerror(rte_errno));
    }
  }
}

Dataplane::~Dataplane() {
  for (Port& p : ports_) {
    rte_pktmbuf_free_bulk(p.wire.pkts, p.wire.n);
    rte_pktmbuf_free_bulk(p.exception.pkts, p.exception.n);
  }
  if (inbox_ != nullptr) {
    HandOffEntry e;
    while (rte_ring_dequeue_elem(inbox_, &e, sizeof e) == 0)
      rte_pktmbuf_free(e.m);
    rte_ring_free(inbox_);
  }
}

int Dataplane::lcore_main(void* arg) {
  static_cast<Dataplane*>(arg)->run();
  return 0;
}

void Dataplane::start() {
  now_ = rte_rdtsc();
  if (params_.shard == 0) {
    for (Port& p : ports_)
      send_arp_request(p, p.conf.ipv4.addr, nullptr);  // announce
  }
  for (const NextHop& h : routes_.gateways())
    arp_.pin(h.port, h.addr, now_);
  flush_all();
}

// The loop: one call per stage (see poll_once), then cycle accounting.
void Dataplane::run() {
  start();
  uint32_t idle_streak = 0;
  uint64_t t0 = rte_rdtsc();
  while (!stop_.load(std::memory_order_relaxed)) {
    unsigned work = poll_once();
    uint64_t t1 = rte_rdtsc();
    LcoreStats& l = stats_.lcore;
    l.iterations++;
    if (work != 0) {
      l.busy_iterations++;
      l.busy_cycles += t1 - t0;
      idle_streak = 0;
    } else {
      if (params_.idle_sleep_us != 0 && ++idle_streak >= kIdleLoopsBeforeSleep) {
        rte_delay_us_sleep(params_.idle_sleep_us);
        t1 = rte_rdtsc();
      }
      l.idle_cycles += t1 - t0;
    }
    t0 = t1;
  }
  flush_all();
}

unsigned Dataplane::poll_once() {
  now_ = rte_rdtsc();
  unsigned work = poll_ports();                 // wire → ARP, ICMP echo, exception tap
  if (inbox_ != nullptr) work += poll_inbox();  // what other shards handed this one
  work += poll_exception_taps();                // kernel → wire
  work += apps_.poll(now_);                     // app submit pipes, round-robin with a budget each
  work += flows_->poll(now_);     // their flow requests to the transports; transport timers
  work += timers_.advance(now_);  // ARP retries and ageing
  apps_.completions().flush();    // the completions the stages above staged, a batch per pipe
  flush_all();                    // send what the stages above staged
  if (work == 0 || now_ - last_ctl_ >= ctl_interval_) serve_control(now_);
  return work;
}

unsigned Dataplane::poll_ports() {
  unsigned total = 0;
  rte_mbuf* pkts[kMaxBurst];
  for (Port& p : ports_) {
    uint16_t n = p.nic->rx_burst(pkts, static_cast<uint16_t>(params_.burst));
    if (n == 0) continue;
    for (uint16_t i = 0; i < n; i++)
      rte_prefetch0(rte_pktmbuf_mtod(pkts[i], void*));
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < n; i++) {
      bytes += pkts[i]->pkt_len;
      rx_packet(p, pkts[i]);
    }
    flows_->rx_flush();
    apps_.completions().flush();
    p.stats->rx_packets += n;
    p.stats->rx_bytes += bytes;
    total += n;
  }
  return total;
}

unsigned Dataplane::poll_inbox() {
  HandOffEntry got[kMaxBurst];
  const unsigned n =
      rte_ring_sc_dequeue_burst_elem(inbox_, got, sizeof got[0], params_.burst, nullptr);
  for (unsigned i = 0; i < n; i++) {
    rte_mbuf* m = got[i].m;
    Port& p = ports_[got[i].port];
    switch (got[i].kind) {
      case HandOff::kFrame:
        p.stats->handed_in++;
        rx_packet(p, m);
        break;
      case HandOff::kArpLearn:
        learn_arp(p, m);
        break;
      case HandOff::kException:
        to_exception_or_drop(p, m, Drop::kNoHandler);
        break;
    }
  }
  if (n != 0) {
    flows_->rx_flush();
    apps_.completions().flush();
  }
  return n;
}

void Dataplane::hand_off(uint16_t shard, HandOff kind, uint8_t port, rte_mbuf* m) {
  HandOffEntry e{m, kind, port, {}};
  if (unlikely(shard >= peers_.size() || peers_[shard]->inbox_ == nullptr ||
               rte_ring_mp_enqueue_elem(peers_[shard]->inbox_, &e, sizeof e) != 0)) {
    return drop(m, Drop::kHandOffFull);
  }
  if (kind == HandOff::kFrame) ports_[port].stats->handed_off++;
}

// An ARP frame shard 0 checked and learned from: every shard keeps its own neighbour cache.
void Dataplane::learn_arp(Port& p, rte_mbuf* m) {
  const auto* arp = rte_pktmbuf_mtod_offset(m, const rte_arp_hdr*, sizeof(rte_ether_hdr));
  const rte_arp_ipv4& a = arp->arp_data;
  if (a.arp_sip != 0) {
    arp_.learn(static_cast<uint8_t>(&p - ports_.data()), Ipv4{rte_be_to_cpu_32(a.arp_sip)},
               to_mac(a.arp_sha), a.arp_tip == p.ip_be, now_);
  }
  rte_pktmbuf_free(m);
}

unsigned Dataplane::poll_exception_taps() {
  if (params_.shard != 0 || now_ < next_exception_poll_) return 0;
  next_exception_poll_ = now_ + tsc_hz_ / (1000000 / kExceptionPollUs);
  unsigned total = 0;
  rte_mbuf* pkts[kMaxBurst];
  for (Port& p : ports_) {
    if (p.conf.exception_port_id == kNoPort) continue;
    uint16_t n =
        rte_eth_rx_burst(p.conf.exception_port_id, 0, pkts, static_cast<uint16_t>(params_.burst));
    for (uint16_t i = 0; i < n; i++)
      stage(p.wire, pkts[i]);
    p.stats->from_kernel += n;
    total += n;
  }
  return total;
}

void Dataplane::flush_all() {
  for (Port& p : ports_) {
    if (p.wire.n != 0) flush(p.wire);
    if (p.exception.n != 0) flush(p.exception);
  }
}

// ---- receive path ----

void Dataplane::rx_packet(Port& p, rte_mbuf* m) {
  // The NIC matched a flow: the frame (maybe only its headers) belongs to that flow's transport.
  if ((m->ol_flags & RTE_MBUF_F_RX_FDIR_ID) != 0) return rx_flow(p, m);
  if (unlikely(m->data_len < sizeof(rte_ether_hdr))) return drop(m, Drop::kRunt);
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  if (unlikely(!rte_is_multicast_ether_addr(&eth->dst_addr) &&
               !rte_is_same_ether_addr(&eth->dst_addr, &p.mac))) {
    return drop(m, Drop::kNotForUs);
  }
  switch (eth->ether_type) {
    case RTE_BE16(RTE_ETHER_TYPE_IPV4):
      return rx_ipv4(p, m);
    case RTE_BE16(RTE_ETHER_TYPE_ARP):
      return rx_arp(p, m);
    default:
      return to_exception_or_drop(p, m, Drop::kUnknownEthertype);
  }
}

void Dataplane::rx_arp(Port& p, rte_mbuf* m) {
  if (m->data_len < sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) return drop(m, Drop::kRunt);
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
  uint16_t op = rte_be_to_cpu_16(arp->arp_opcode);
  if (arp->arp_hardware != RTE_BE16(RTE_ARP_HRD_ETHER) ||
      arp->arp_protocol != RTE_BE16(RTE_ETHER_TYPE_IPV4) || arp->arp_hlen != RTE_ETHER_ADDR_LEN ||
      arp->arp_plen != 4 || (op != RTE_ARP_OP_REQUEST && op != RTE_ARP_OP_REPLY)) {
    return drop(m, Drop::kArpMalformed);
  }
  const rte_arp_ipv4& a = arp->arp_data;
  Ipv4 sender{rte_be_to_cpu_32(a.arp_sip)};
  Mac sender_mac = to_mac(a.arp_sha);
  bool for_us = a.arp_tip == p.ip_be;
  auto port = static_cast<uint8_t>(&p - ports_.data());
  if (op == RTE_ARP_OP_REQUEST) {
    stats_.proto.arp_requests_rx++;
  } else {
    stats_.proto.arp_replies_rx++;
  }

  if (a.arp_sip == p.ip_be) {
    // Our own announcement looped back, or another host claims our address.
    if (sender_mac != p.conf.mac) stats_.proto.arp_conflicts++;
    return drop(m, Drop::kArpNotForUs);
  }
  if (sender_mac.is_multicast() || sender_mac.is_zero()) return drop(m, Drop::kArpMalformed);
  if (a.arp_sip != 0) {
    arp_.learn(port, sender, sender_mac, for_us, now_);
    // ARP reaches queue 0 alone: the other shards learn from copies of what may teach them (a
    // reply, a request for us, news of a neighbour shard 0 knows: the rest only refreshes
    // entries, ArpTable::learn). Copies take at most half an inbox, frames keep the rest.
    const bool teaches = for_us || op == RTE_ARP_OP_REPLY || arp_.find(port, sender) != nullptr;
    for (uint16_t s = 1; s < peers_.size() && params_.shard == 0 && teaches; s++) {
      if (rte_ring_free_count(peers_[s]->inbox_) < kInboxSize / 2) {
        stats_.drops[static_cast<size_t>(Drop::kHandOffFull)]++;
      } else if (rte_mbuf* c = rte_pktmbuf_copy(m, pool_, 0, UINT32_MAX)) {
        hand_off(s, HandOff::kArpLearn, port, c);
      } else {
        stats_.drops[static_cast<size_t>(Drop::kNoMbuf)]++;
      }
    }
  }

  if (op == RTE_ARP_OP_REPLY) {
    // The kernel behind the exception tap resolves its own neighbours through us: let it see
    // replies too (requests for our address are answered here, not by the kernel).
    if (p.conf.exception_port_id != kNoPort) return to_exception_or_drop(p, m, Drop::kArpNotForUs);
    p.stats->absorbed++;
    rte_pktmbuf_free(m);
    return;
  }
  if (!for_us) return drop(m, Drop::kArpNotForUs);

  // Answer in place: the request becomes the reply.
  rte_arp_ipv4& r = arp->arp_data;
  arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REPLY);
  r.arp_tha = r.arp_sha;
  r.arp_tip = r.arp_sip;
  r.arp_sha = p.mac;
  r.arp_sip = p.ip_be;
  eth->dst_addr = r.arp_tha;
  eth->src_addr = r.arp_sha;
  stats_.proto.arp_replies_tx++;
  stage(p.wire, m);
}

void Dataplane::rx_ipv4(Port& p, rte_mbuf* m) {
  constexpr uint32_t off = sizeof(rte_ether_hdr);
  if (unlikely(m->data_len < off + sizeof(rte_ipv4_hdr))) return drop(m, Drop::kRunt);
  auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, off);
  uint32_t ihl = rte_ipv4_hdr_len(ip);
  uint32_t len = rte_be_to_cpu_16(ip->total_length);
  if (unlikely((ip->version_ihl >> 4) != 4 || ihl < sizeof(rte_ipv4_hdr) ||
               m->data_len < off + ihl || len < ihl || m->pkt_len < off + len)) {
    return drop(m, Drop::kIpv4Malformed);
  }
  uint64_t csum_flags = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
  if (unlikely(csum_flags == RTE_MBUF_F_RX_IP_CKSUM_BAD ||
               (csum_flags != RTE_MBUF_F_RX_IP_CKSUM_GOOD && rte_raw_cksum(ip, ihl) != 0xffff))) {
    return drop(m, Drop::kIpv4BadChecksum);
  }
  if (m->pkt_len > off + len) rte_pktmbuf_trim(m, static_cast<uint16_t>(m->pkt_len - off - len));

  if (ip->dst_addr != p.ip_be) {
    bool group = ip->dst_addr == p.bcast_be || ip->dst_addr == RTE_BE32(0xffffffff) ||
                 RTE_IS_IPV4_MCAST(rte_be_to_cpu_32(ip->dst_addr));
    return group ? to_exception_or_drop(p, m, Drop::kNoHandler) : drop(m, Drop::kIpv4NotOurs);
  }
  if (unlikely((ip->fragment_offset & RTE_BE16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK)) !=
               0)) {
    return to_exception_or_drop(p, m, Drop::kIpv4Fragment);
  }
  if (ip->next_proto_id == IPPROTO_ICMP) return rx_icmp(p, m, off, ihl, len);
  // What a transport claims (flows.h): its flows, also those the NIC has none for, and its
  // listeners. UDP is claimed by destination port.
  if (ip->next_proto_id != IPPROTO_UDP) {
    if (flows_->claims(ip->next_proto_id, 0)) return rx_flow(p, m);
  } else if (len >= ihl + sizeof(rte_udp_hdr) && m->data_len >= off + ihl + sizeof(rte_udp_hdr) &&
             flows_->claims(
                 IPPROTO_UDP,
                 rte_be_to_cpu_16(
                     rte_pktmbuf_mtod_offset(m, const rte_udp_hdr*, off + ihl)->dst_port))) {
    return rx_flow(p, m);
  }
  to_exception_or_drop(p, m, Drop::kNoHandler);
}

void Dataplane::rx_icmp(Port& p, rte_mbuf* m, uint32_t ip_off, uint32_t ihl, uint32_t ip_len) {
  uint32_t icmp_off = ip_off + ihl;
  uint32_t icmp_len = ip_len - ihl;
  if (icmp_len < sizeof(rte_icmp_hdr) || m->data_len < icmp_off + sizeof(rte_icmp_hdr)) {
    return drop(m, Drop::kIcmpMalformed);
  }
  auto* icmp = rte_pktmbuf_mtod_offset(m, rte_icmp_hdr*, icmp_off);
  if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0) {
    return to_exception_or_drop(p, m, Drop::kIcmpUnhandled);
  }
  uint16_t sum = 0;
  if (rte_raw_cksum_mbuf(m, icmp_off, icmp_len, &sum) != 0 || sum != 0xffff) {
    return drop(m, Drop::kIcmpBadChecksum);
  }
  stats_.proto.icmp_echo_requests++;

  // Answer in place: swap addresses, turn the type around, patch the checksums.
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, ip_off);
  icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
  icmp->icmp_cksum =
      cksum_update16(icmp->icmp_cksum, RTE_IP_ICMP_ECHO_REQUEST << 8, RTE_IP_ICMP_ECHO_REPLY << 8);
  ip->dst_addr = ip->src_addr;
  ip->src_addr = p.ip_be;
  ip->time_to_live = 64;
  ip->hdr_checksum = 0;
  ip->hdr_checksum = static_cast<uint16_t>(~rte_raw_cksum(ip, ihl));
  eth->dst_addr = eth->src_addr;
  eth->src_addr = p.mac;
  m->ol_flags = 0;
  stats_.proto.icmp_echo_replies++;
  stage(p.wire, m);
}

void Dataplane::rx_flow(Port& p, rte_mbuf* m) {
  Drop why = flows_->rx(static_cast<uint8_t>(&p - ports_.data()), m);
  if (why != Drop::kCount) drop(m, why);
}

void Dataplane::to_exception_or_drop(Port& p, rte_mbuf* m, Drop reason) {
  if (p.conf.exception_port_id == kNoPort) return drop(m, reason);
  // Shard 0 alone sends to the tap (one TX queue).
  if (params_.shard != 0) {
    return hand_off(0, HandOff::kException, static_cast<uint8_t>(&p - ports_.data()), m);
  }
  stage(p.exception, m);
}

// ---- transmit path ----

void Dataplane::stage(TxStage& s, rte_mbuf* m) {
  if (unlikely(s.n == kMaxBurst)) flush(s);
  s.pkts[s.n++] = m;
}

void Dataplane::flush(TxStage& s) {
  // Lengths are summed before sending: a sent mbuf may already belong to the other side. The
  // unsent ones are still ours, and come off again.
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < s.n; i++)
    bytes += s.pkts[i]->pkt_len;
  uint16_t sent =
      s.nic != nullptr ? s.nic->tx_burst(s.pkts, s.n) : rte_eth_tx_burst(s.port_id, 0, s.pkts, s.n);
  *s.packets += sent;
  if (unlikely(sent < s.n)) {
    stats_.drops[static_cast<size_t>(s.full_reason)] += s.n - sent;
    for (uint16_t i = sent; i < s.n; i++)
      bytes -= s.pkts[i]->pkt_len;
    rte_pktmbuf_free_bulk(s.pkts + sent, s.n - sent);
  }
  if (s.bytes != nullptr) *s.bytes += bytes;
  s.n = 0;
}

void Dataplane::drop(rte_mbuf* m, Drop reason) {
  stats_.drops[static_cast<size_t>(reason)]++;
  rte_pktmbuf_free(m);
}

void Dataplane::send_arp_request(Port& p, Ipv4 target, const Mac* dst) {
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  if (unlikely(m == nullptr)) {
    stats_.drops[static_cast<size_t>(Drop::kNoMbuf)]++;
    return;
  }
  auto* eth = reinterpret_cast<rte_ether_hdr*>(rte_pktmbuf_append(m, kMinFrame));
  std::memset(eth, 0, kMinFrame);
  auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
  if (dst != nullptr) {
    eth->dst_addr = to_ether(*dst);
  } else {
    std::memset(eth->dst_addr.addr_bytes, 0xff, RTE_ETHER_ADDR_LEN);
  }
  eth->src_addr = p.mac;
  eth->ether_type = RTE_BE16(RTE_ETHER_TYPE_ARP);
  arp->arp_hardware = RTE_BE16(RTE_ARP_HRD_ETHER);
  arp->arp_protocol = RTE_BE16(RTE_ETHER_TYPE_IPV4);
  arp->arp_hlen = RTE_ETHER_ADDR_LEN;
  arp->arp_plen = 4;
  arp->arp_opcode = RTE_BE16(RTE_ARP_OP_REQUEST);
  arp->arp_data.arp_sha = p.mac;
  arp->arp_data.arp_sip = p.ip_be;
  arp->arp_data.arp_tip = rte_cpu_to_be_32(target.host);  // tha stays zero
  stats_.proto.arp_requests_tx++;
  stage(p.wire, m);
}

void Dataplane::arp_send_request(uint8_t port, Ipv4 target, const Mac* dst) {
  send_arp_request(ports_[port], target, dst);
}

}  // namespace cleave::dp
