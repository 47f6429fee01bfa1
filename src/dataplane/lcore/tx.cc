// tx.cc - a transport's TX descriptors become header mbufs (the flow's Ethernet and IPv4
// templates, then its L4 header) chained to extbuf segments over app memory, with checksum, TSO
// and trailer (ICRC, CRC32C) offload flags (flows.h).
#include "lcore/flows_impl.h"

#include <rte_byteorder.h>
#include <rte_cycles.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

namespace cleave::dp {

void FlowPath::send(std::span<transport::TxDesc> descs) {
  const uint64_t now = rte_rdtsc();
  for (const transport::TxDesc& d : descs) {
    stats_.tx_descs++;
    if (d.flow >= flows_.size() || flows_[d.flow].state != Flow::State::kOpen ||
        d.l4_len < kMinL4Header || d.l4_len > transport::kMaxL4Header) {
      stats_.tx_bad_desc++;
      continue;
    }
    Flow& f = flows_[d.flow];
    const bool tcp = f.tuple.proto == IPPROTO_TCP;
    if (tcp && d.l4_len < sizeof(rte_tcp_hdr)) {
      stats_.tx_bad_desc++;
      continue;
    }
    // Its route: the flow's own, or one of a QP's others (TxDesc::route, modulo their number).
    uint8_t port = f.port;
    const uint8_t* hdr = f.hdr.data();
    if (const uint8_t r = f.alt != nullptr ? d.route % (1 + f.alt->count) : 0; r != 0) {
      AltRoute& a = f.alt->route[r - 1];
      if (!a.l2_ready) {
        a.l2_ready = fill_hdr(a.port, a.next_hop, ports_[a.port].ip, a.remote_ip, f.tuple.proto,
                              a.hdr.data(), now);
      }
      if (!a.l2_ready) {
        stats_.tx_no_neighbour++;
        continue;
      }
      port = a.port;
      hdr = a.hdr.data();
    } else if (!f.l2_ready && !fill_l2(f, now)) {
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
    std::memcpy(p, hdr, kHdrTemplate);
    std::memcpy(p + kHdrTemplate, d.l4.data(), d.l4_len);
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthLen);
    const bool tso = tcp && d.mss != 0 && d.len > d.mss;
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
    if ((d.flags & transport::kTxParserTrailer) != 0) {
      // The NIC ends the packet as the flow's parser does (RoCEv2: pad and ICRC; Solar: the
      // block's CRC32C), then the UDP checksum where the parser has one (Solar's; RoCEv2's is 0).
      const Tp& tp = *transports_[f.tp];
      h->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | tp.trailer_flag;
      if (tp.trailer_udp_csum) {
        h->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
        auto* uh = reinterpret_cast<rte_udp_hdr*>(p + kHdrTemplate);
        uh->dgram_cksum = rte_ipv4_phdr_cksum(ip, h->ol_flags);
      }
      io_.flow_stage(port, h);
      continue;
    }
    if (!tcp) {
      // UDP: its checksum by the NIC, the pseudo-header sum in its field (DPDK's convention).
      // Segmenting is TCP's alone: a longer datagram leaves whole (IPv4 fragments it not).
      h->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM;
      if (f.tuple.proto == IPPROTO_UDP) {
        h->ol_flags |= RTE_MBUF_F_TX_UDP_CKSUM;
        auto* uh = reinterpret_cast<rte_udp_hdr*>(p + kHdrTemplate);
        uh->dgram_cksum = rte_ipv4_phdr_cksum(ip, h->ol_flags);
      }
      io_.flow_stage(port, h);
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
    io_.flow_stage(port, h);
  }
}

}  // namespace cleave::dp
