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

using nic::NicModel;
using nic::TxRequest;
using nic::TxStatus;

// ---- RX: wire -> model -> rx_ring --------------------------------------------------------

void rx_wire(Device& d) {
  const unsigned room = rte_ring_free_count(d.rx_ring);
  const uint16_t want = uint16_t(std::min<unsigned>(kBurst, room));
  if (want == 0) return;
  rte_mbuf* bufs[kBurst];
  const uint16_t n = rte_eth_rx_burst(d.wire_port, 0, bufs, want);
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = bufs[i];
    bytes += m->pkt_len;
    if (model_mbuf::rx_frame(*d.model, m, d.rx_flat, d.rx_entry, g_placement_offset)) {
      d.bump(PmdCtr::kRxLinearized);
    }
    m->port = d.port_id;
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

void drop_tx(Device& d, rte_mbuf* m) {
  rte_pktmbuf_free(m);
  d.bump(PmdCtr::kTxErrors);
}

// Sends one descriptor. Returns false when it must wait (no room on the wire or no frame
// mbufs); the descriptor then stays staged and nothing was consumed.
bool tx_one(Device& d, rte_mbuf* m) {
  const uint8_t flags = model_mbuf::tx_flags(m->ol_flags, g_icrc_mask);
  if (m->nb_segs == 1 && flags == 0) {
    if (pending_room(d) == 0) return false;
    push_pending(d, m);
    d.bump(PmdCtr::kTxPassThrough);
    return true;
  }

  TxRequest req;
  if (!model_mbuf::tx_request(m, flags, req)) {
    drop_tx(d, m);
    return true;
  }
  // More frames than the pool could ever give at once would wait forever: refuse them.
  const uint32_t nf = NicModel::tx_frames(req);
  if (nf > std::min<size_t>(d.frames.bufs.size(), d.tx_mbufs) ||
      NicModel::tx_frame_room(req) > d.max_frame) {
    drop_tx(d, m);
    return true;
  }
  if (pending_room(d) < nf) return false;

  switch (model_mbuf::tx_payload(m, uint32_t(req.header.size()), d.mr_ranges, d.bounce, d.bounce_mr,
                                 req)) {
    case model_mbuf::Payload::kNone:
      break;
    case model_mbuf::Payload::kZeroCopy:
      d.bump(PmdCtr::kTxZeroCopy);
      break;
    case model_mbuf::Payload::kBounced:
      d.bump(PmdCtr::kTxBounce);
      break;
    case model_mbuf::Payload::kFailed:
      drop_tx(d, m);
      return true;
  }

  TxStatus s = TxStatus::kOk;
  uint16_t got = 0;
  if (!model_mbuf::merge(*d.model, req, d.tx_pool, d.tx_room, d.frames, &s, &got)) return false;
  for (uint32_t i = 0; i < got; i++)
    push_pending(d, d.frames.bufs[i]);
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
  model_mbuf::poll_completions(*d.model, d.frames);
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
