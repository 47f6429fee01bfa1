// net_cleave_datapath.cc - the net_cleave data path: rx/tx burst and the NIC service body.
//
// Nothing here allocates, logs, throws or blocks. The only lock is Device::lock, and the data
// path only ever trylocks it: a round is skipped while a control command holds it.
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_service.h>
#include <rte_spinlock.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "net_cleave.h"

namespace cleave::pmd {
namespace {

using nic::Decision;
using nic::NicModel;
using nic::TxRequest;
using nic::TxStatus;

// ---- RX: wire -> model -> rx_ring --------------------------------------------------------

uint8_t csum_bits(nic::CsumStatus s) {
  return uint8_t(s);
}

uint64_t rx_csum_flags(const nic::RxEntry& e) {
  uint64_t f = 0;
  if (e.ip_csum == nic::CsumStatus::kGood) f |= RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  if (e.ip_csum == nic::CsumStatus::kBad) f |= RTE_MBUF_F_RX_IP_CKSUM_BAD;
  if (e.l4_csum == nic::CsumStatus::kGood) f |= RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  if (e.l4_csum == nic::CsumStatus::kBad) f |= RTE_MBUF_F_RX_L4_CKSUM_BAD;
  return f;
}

void fill_placement(rte_mbuf* m, const nic::RxEntry& e) {
  auto* p = rte_pmd_cleave_placement_get(m, g_placement_offset);
  p->flow_id = e.flow_id;
  p->seq = e.seq;
  p->msg_seq = e.msg_seq;
  p->placed = e.placed;
  const nic::Placement first = e.nfrags > 0 ? e.frags[0] : nic::Placement{};
  p->offset_lo = uint32_t(first.offset);
  p->offset_hi = uint16_t(first.offset >> 32);
  p->mr = first.mr;
  p->payload_len = uint16_t(std::min<uint32_t>(e.payload_len, UINT16_MAX));
  p->trimmed = uint16_t(std::min<uint32_t>(e.trimmed, UINT16_MAX));
  p->decision = uint8_t(e.decision);
  p->reason = uint8_t(e.reason);
  p->parser = uint8_t(e.parser);
  p->flags = uint8_t((e.nfrags & RTE_PMD_CLEAVE_F_NFRAGS_MASK) |
                     (e.out_of_order ? RTE_PMD_CLEAVE_F_OUT_OF_ORDER : 0) |
                     (csum_bits(e.ip_csum) << RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) |
                     (csum_bits(e.l4_csum) << RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT));
  // Keep only the bits that describe the buffer itself (extbuf, indirect).
  m->ol_flags = (m->ol_flags & (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT)) | rx_csum_flags(e);
  if (e.flow_id != nic::kNoFlow) {
    m->ol_flags |= RTE_MBUF_F_RX_FDIR | RTE_MBUF_F_RX_FDIR_ID;
    m->hash.fdir.hi = e.flow_id;
  }
}

// Cuts the mbuf to its first `len` bytes (the headers); later segments are freed.
void keep_head(rte_mbuf* m, uint32_t len) {
  if (len >= m->pkt_len) return;
  rte_mbuf* s = m;
  uint32_t left = len;
  uint16_t segs = 1;
  while (s->data_len < left && s->next != nullptr) {
    left -= s->data_len;
    s = s->next;
    segs++;
  }
  s->data_len = uint16_t(left);
  if (s->next != nullptr) {
    rte_pktmbuf_free(s->next);
    s->next = nullptr;
  }
  m->nb_segs = segs;
  m->pkt_len = len;
}

void rx_wire(Device& d) {
  const unsigned room = rte_ring_free_count(d.rx_ring);
  const uint16_t want = uint16_t(std::min<unsigned>(kBurst, room));
  if (want == 0) return;
  rte_mbuf* bufs[kBurst];
  const uint16_t n = rte_eth_rx_burst(d.wire_port, 0, bufs, want);
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = bufs[i];
    const uint32_t frame_len = m->pkt_len;
    std::span<const uint8_t> frame;
    if (m->nb_segs == 1) {
      frame = {rte_pktmbuf_mtod(m, const uint8_t*), m->data_len};
    } else {
      // The model parses a flat frame; a chained one is copied into scratch first.
      const uint32_t len = std::min<uint32_t>(frame_len, uint32_t(d.rx_flat.size()));
      const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, d.rx_flat.data()));
      frame = {p, len};
      d.bump(PmdCtr::kRxLinearized);
    }
    nic::RxEntry& e = d.rx_entry;
    d.model->rx(frame, e);
    fill_placement(m, e);
    if (e.decision != Decision::kDeferred) keep_head(m, e.header_len);
    m->port = d.port_id;
    bytes += frame_len;
  }
  // Room was reserved above and this is the ring's only producer: everything fits.
  rte_ring_sp_enqueue_burst(d.rx_ring, reinterpret_cast<void**>(bufs), n, nullptr);
  d.bump(PmdCtr::kRxPackets, n);
  d.bump(PmdCtr::kRxBytes, bytes);
}

// ---- TX: tx_ring -> model merge -> pending -> wire ------------------------------------------

uint32_t pending_room(const Device& d) {
  return kPendingFrames - d.pending_count;
}

void push_pending(Device& d, rte_mbuf* m) {
  const uint32_t at = (d.pending_head + d.pending_count) % kPendingFrames;
  d.pending[at] = m;
  d.pending_len[at] = m->pkt_len;
  d.pending_count++;
}

void flush_pending(Device& d) {
  while (d.pending_count > 0) {
    const uint32_t contig = std::min<uint32_t>(d.pending_count, kPendingFrames - d.pending_head);
    const uint16_t want = uint16_t(std::min<uint32_t>(contig, kBurst * 4));
    // Lengths were saved when queued: once sent, a frame may already belong to the peer.
    const uint16_t sent = rte_eth_tx_burst(d.wire_port, 0, &d.pending[d.pending_head], want);
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < sent; i++)
      bytes += d.pending_len[d.pending_head + i];
    d.bump(PmdCtr::kTxPackets, sent);
    d.bump(PmdCtr::kTxBytes, bytes);
    d.pending_head = (d.pending_head + sent) % kPendingFrames;
    d.pending_count -= sent;
    if (sent < want) {
      d.bump(PmdCtr::kTxWireFull);
      return;
    }
  }
}

// Length of Ethernet + IPv4 + TCP/UDP headers (+ the 12-byte BTH for `roce`) of a flat frame,
// or 0 if it is not one.
uint32_t header_length(const uint8_t* f, uint32_t len, bool roce) {
  if (len < 14 + 20 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4) return 0;
  const uint32_t l4 = 14 + uint32_t(f[14] & 0xF) * 4;
  const uint8_t proto = f[14 + 9];
  if (proto == 6) {
    if (len < l4 + 20) return 0;
    const uint32_t h = l4 + uint32_t(f[l4 + 12] >> 4) * 4;
    return h <= len ? h : 0;
  }
  if (proto == 17) {
    const uint32_t h = l4 + 8 + (roce ? 12 : 0);
    return len >= h ? h : 0;
  }
  return l4 <= len ? l4 : 0;
}

// Finds the registered MR holding [p, p+len); false if none does.
bool find_mr(const Device& d, uintptr_t p, uint32_t len, uint16_t* mr, uint64_t* off) {
  auto it = std::upper_bound(d.mr_ranges.begin(), d.mr_ranges.end(), p,
                             [](uintptr_t v, const MrRange& r) { return v < r.base; });
  if (it == d.mr_ranges.begin()) return false;
  --it;
  const uint64_t at = p - it->base;
  if (at > it->len || len > it->len - at) return false;
  *mr = it->id;
  *off = at;
  return true;
}

// True when the segments after the header lie back to back in memory (one extbuf, or a
// payload over 64 KB - 1 split into extbufs over one buffer).
bool payload_contiguous(const rte_mbuf* m) {
  const rte_mbuf* s = m->next;
  uintptr_t end = rte_pktmbuf_mtod(s, uintptr_t) + s->data_len;
  for (s = s->next; s != nullptr; s = s->next) {
    if (rte_pktmbuf_mtod(s, uintptr_t) != end) return false;
    end += s->data_len;
  }
  return true;
}

// Copies `len` bytes of `m` from `from` into the bounce buffer; false if it does not fit.
bool bounce(Device& d, const rte_mbuf* m, uint32_t from, uint32_t len) {
  if (len > d.bounce.size()) return false;
  const void* p = rte_pktmbuf_read(m, from, len, d.bounce.data());
  if (p == nullptr) return false;
  if (p != d.bounce.data()) std::memcpy(d.bounce.data(), p, len);
  d.bump(PmdCtr::kTxBounce);
  return true;
}

void drop_tx(Device& d, rte_mbuf* m) {
  rte_pktmbuf_free(m);
  d.bump(PmdCtr::kTxErrors);
}

void poll_completions(Device& d) {
  while (d.model->tx_poll(d.txc) == d.txc.size()) {
  }
}

// Sends one descriptor. Returns false when it must wait (no room on the wire or no frame
// mbufs); the descriptor then stays staged and nothing was consumed.
bool tx_one(Device& d, rte_mbuf* m) {
  const uint64_t ol = m->ol_flags;
  uint8_t flags = 0;
  if ((ol & RTE_MBUF_F_TX_TCP_SEG) != 0) flags |= nic::kTxTso;
  if ((ol & RTE_MBUF_F_TX_IP_CKSUM) != 0) flags |= nic::kTxIpCsum;
  const uint64_t l4 = ol & RTE_MBUF_F_TX_L4_MASK;
  if (l4 == RTE_MBUF_F_TX_TCP_CKSUM || l4 == RTE_MBUF_F_TX_UDP_CKSUM) flags |= nic::kTxL4Csum;
  if ((ol & g_icrc_mask) != 0) flags |= nic::kTxIcrc;

  if (m->nb_segs == 1 && flags == 0) {
    if (pending_room(d) == 0) return false;
    push_pending(d, m);
    d.bump(PmdCtr::kTxPassThrough);
    return true;
  }

  TxRequest req;
  const uint8_t* h = rte_pktmbuf_mtod(m, const uint8_t*);
  uint32_t hlen = m->data_len;
  if (m->nb_segs == 1) {
    hlen = header_length(h, m->data_len, (flags & nic::kTxIcrc) != 0);
    if (hlen == 0) {
      drop_tx(d, m);
      return true;
    }
  }
  req.header = {h, hlen};
  req.len = m->pkt_len - hlen;
  req.mss = (flags & nic::kTxTso) != 0 ? m->tso_segsz : 0;
  req.flags = flags;
  // More frames than the pool could ever give at once would wait forever: refuse them.
  if (NicModel::tx_frames(req) > std::min<size_t>(d.frame_bufs.size(), d.tx_mbufs) ||
      NicModel::tx_frame_room(req) > d.max_frame) {
    drop_tx(d, m);
    return true;
  }
  const uint32_t nf = NicModel::tx_frames(req);
  if (pending_room(d) < nf) return false;

  if (req.len > 0) {
    if (m->nb_segs > 1 && payload_contiguous(m) &&
        find_mr(d, rte_pktmbuf_mtod(m->next, uintptr_t), req.len, &req.mr, &req.offset)) {
      d.bump(PmdCtr::kTxZeroCopy);
    } else if (bounce(d, m, hlen, req.len)) {
      req.mr = d.bounce_mr;
      req.offset = 0;
    } else {
      drop_tx(d, m);
      return true;
    }
  }

  if (rte_pktmbuf_alloc_bulk(d.tx_pool, d.frame_bufs.data(), nf) != 0) return false;
  for (uint32_t i = 0; i < nf; i++)
    d.frame_spans[i] = {rte_pktmbuf_mtod(d.frame_bufs[i], uint8_t*), d.tx_room};
  uint16_t got = 0;
  TxStatus s = d.model->tx(req, std::span(d.frame_spans.data(), nf),
                           std::span(d.frame_lens.data(), nf), &got);
  if (s == TxStatus::kCompletionsFull) {
    poll_completions(d);
    s = d.model->tx(req, std::span(d.frame_spans.data(), nf), std::span(d.frame_lens.data(), nf),
                    &got);
  }
  if (s != TxStatus::kOk) got = 0;
  for (uint32_t i = 0; i < got; i++) {
    rte_mbuf* f = d.frame_bufs[i];
    f->data_len = uint16_t(d.frame_lens[i]);
    f->pkt_len = d.frame_lens[i];
    push_pending(d, f);
  }
  if (got < nf) rte_pktmbuf_free_bulk(d.frame_bufs.data() + got, nf - got);
  // The payload has been read: freeing the descriptor is the app memory's send completion.
  if (s != TxStatus::kOk) {
    drop_tx(d, m);
  } else {
    rte_pktmbuf_free(m);
  }
  return true;
}

void tx_merge(Device& d) {
  if (d.tx_stage_count == 0) {
    d.tx_stage_head = 0;
    d.tx_stage_count = rte_ring_sc_dequeue_burst(
        d.tx_ring, reinterpret_cast<void**>(d.tx_stage.data()), kBurst, nullptr);
  }
  while (d.tx_stage_count > 0 && tx_one(d, d.tx_stage[d.tx_stage_head])) {
    d.tx_stage_head++;
    d.tx_stage_count--;
  }
  // The mbuf's release is the completion the app sees; the model's own ring is just emptied.
  poll_completions(d);
}

// Inline mode: no service lcore runs the NIC, so the dataplane's bursts do.
bool run_inline(const Device& d) {
  return rte_service_runstate_get(d.service_id) != 1;
}

}  // namespace

void poll_locked(Device& d) {
  d.bump(PmdCtr::kServiceRuns);
  flush_pending(d);
  if (d.pending_count == 0) {
    tx_merge(d);
    flush_pending(d);
  }
  rx_wire(d);
}

void drain_locked(Device& d) {
  void* m;
  while (rte_ring_dequeue(d.rx_ring, &m) == 0)
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  while (rte_ring_dequeue(d.tx_ring, &m) == 0)
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
  for (uint32_t i = 0; i < d.tx_stage_count; i++)
    rte_pktmbuf_free(d.tx_stage[d.tx_stage_head + i]);
  d.tx_stage_count = 0;
  d.tx_stage_head = 0;
  for (uint32_t i = 0; i < d.pending_count; i++)
    rte_pktmbuf_free(d.pending[(d.pending_head + i) % kPendingFrames]);
  d.pending_count = 0;
  d.pending_head = 0;
}

int32_t service_run(void* arg) {
  Device& d = *static_cast<Device*>(arg);
  if (!rte_spinlock_trylock(&d.lock)) return -EAGAIN;
  if (!d.started) {
    rte_spinlock_unlock(&d.lock);
    return -EAGAIN;
  }
  poll_locked(d);
  rte_spinlock_unlock(&d.lock);
  return 0;
}

uint16_t rx_burst(void* queue, rte_mbuf** pkts, uint16_t n) {
  Device& d = *static_cast<Device*>(queue);
  if (run_inline(d)) {
    if (rte_spinlock_trylock(&d.lock)) {
      d.bump(PmdCtr::kServiceInline);
      poll_locked(d);
      rte_spinlock_unlock(&d.lock);
    }
  }
  return uint16_t(rte_ring_sc_dequeue_burst(d.rx_ring, reinterpret_cast<void**>(pkts), n, nullptr));
}

uint16_t tx_burst(void* queue, rte_mbuf** pkts, uint16_t n) {
  Device& d = *static_cast<Device*>(queue);
  const auto sent =
      uint16_t(rte_ring_sp_enqueue_burst(d.tx_ring, reinterpret_cast<void**>(pkts), n, nullptr));
  if (run_inline(d)) {
    if (rte_spinlock_trylock(&d.lock)) {
      d.bump(PmdCtr::kServiceInline);
      poll_locked(d);
      rte_spinlock_unlock(&d.lock);
    }
  }
  return sent;
}

}  // namespace cleave::pmd
