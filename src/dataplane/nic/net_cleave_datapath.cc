// net_cleave_datapath.cc - the net_cleave data path: rx/tx burst and the NIC service body.
//
// Nothing here allocates, logs, throws or blocks. The only lock is Device::lock, and the data
// path only ever trylocks it: a round is skipped while a control command holds it.
#include <rte_branch_prediction.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_service.h>
#include <rte_spinlock.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <span>

#include "net_cleave.h"

namespace cleave::pmd {
namespace {

using nic::NicModel;
using nic::TxRequest;
using nic::TxStatus;

// ---- RX: wire -> model -> the RX queue's ring --------------------------------------------

// Hands `n` processed frames to the rings of the queues the model steered them to, in order
// within each queue. Room was reserved on every ring and the service is each ring's only
// producer: everything fits.
void to_queues(Device& d, rte_mbuf** frames, uint16_t n) {
  if (d.nb_queues == 1) {
    rte_ring_sp_enqueue_burst(d.rxq[0].ring, reinterpret_cast<void**>(frames), n, nullptr);
    return;
  }
  for (uint16_t q = 0; q < d.nb_queues; q++) {
    uint16_t k = 0;
    for (uint16_t i = 0; i < n; i++) {
      if (d.rx_queue_of[i] == q) d.rx_steered[k++] = frames[i];
    }
    if (k != 0) {
      rte_ring_sp_enqueue_burst(d.rxq[q].ring, reinterpret_cast<void**>(d.rx_steered.data()), k,
                                nullptr);
    }
  }
}

// With RX faults on, frames pass the fault stage between the wire and the model: a frame lost
// there is one the NIC never saw, as on a lossy link. A frame the model has processed is never
// dropped, and may reach any queue: the burst is bounded by the room of the fullest ring (one
// queue left unpolled holds the wire back for all, as a NIC without a per-queue drop policy).
// Returns whether it took frames from the wire or the fault stage.
bool rx_wire(Device& d) {
  unsigned free = unsigned(d.fault_out.size());
  for (uint16_t q = 0; q < d.nb_queues; q++)
    free = std::min(free, rte_ring_free_count(d.rxq[q].ring));
  const auto room = uint16_t(free);
  rte_mbuf* bufs[kBurst];
  rte_mbuf** frames = bufs;
  uint16_t n = 0;
  dp::FaultStage& fault = d.fault[size_t(dp::FaultDir::kRx)];
  if (likely(!fault.active())) {
    const uint16_t want = std::min<uint16_t>(kBurst, room);
    if (want == 0) return false;
    n = rte_eth_rx_burst(d.wire_port, 0, bufs, want);
    if (n == 0) return false;
  } else {
    const uint16_t released = fault.poll(d.fault_out.data(), room);
    const uint16_t want = std::min<uint16_t>(kBurst, uint16_t(room - released));
    const uint16_t got = want != 0 ? rte_eth_rx_burst(d.wire_port, 0, bufs, want) : 0;
    n = uint16_t(released +
                 fault.apply(bufs, got, d.fault_out.data() + released, uint16_t(room - released)));
    frames = d.fault_out.data();
    if (released == 0 && got == 0) return false;
  }
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = frames[i];
    const uint32_t len = m->pkt_len;
    bytes += len;
    if (model_mbuf::rx_frame(*d.model, m, d.rx_flat, d.rx_entry, g_placement_offset)) {
      d.bump(PmdCtr::kRxLinearized);
    }
    m->port = d.port_id;
    const uint16_t q = d.rx_entry.queue;
    d.rx_queue_of[i] = uint8_t(q);
    d.rxq_packets[q]++;
    d.rxq_bytes[q] += len;
  }
  to_queues(d, frames, n);
  d.bump(PmdCtr::kRxPackets, n);
  d.bump(PmdCtr::kRxBytes, bytes);
  return true;
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

// Frames leaving the NIC for the wire; with TX faults on they pass the fault stage first. The
// caller made room for n frames; duplicates and released frames use what is left.
void to_wire(Device& d, rte_mbuf* const* frames, uint32_t n) {
  dp::FaultStage& fault = d.fault[size_t(dp::FaultDir::kTx)];
  if (likely(!fault.active())) {
    for (uint32_t i = 0; i < n; i++)
      push_pending(d, frames[i]);
    return;
  }
  for (uint32_t i = 0; i < n; i += kBurst) {
    const auto k = uint16_t(std::min<uint32_t>(kBurst, n - i));
    // Room the frames of later chunks keep: extras only take what is beyond all of them.
    const uint32_t later = n - i - k;
    const auto cap =
        uint16_t(std::min<uint32_t>(pending_room(d) - later, uint32_t(d.fault_out.size())));
    const uint16_t o = fault.apply(frames + i, k, d.fault_out.data(), cap);
    for (uint16_t j = 0; j < o; j++)
      push_pending(d, d.fault_out[j]);
  }
}

// TX frames held back for reordering leave once the line is idle.
void poll_tx_fault(Device& d) {
  dp::FaultStage& fault = d.fault[size_t(dp::FaultDir::kTx)];
  if (likely(!fault.active())) return;
  const auto cap = uint16_t(std::min<uint32_t>(pending_room(d), uint32_t(d.fault_out.size())));
  const uint16_t o = fault.poll(d.fault_out.data(), cap);
  for (uint16_t j = 0; j < o; j++)
    push_pending(d, d.fault_out[j]);
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
  const uint8_t flags = model_mbuf::tx_flags(m->ol_flags, g_icrc_mask, g_crc32c_mask);
  if (m->nb_segs == 1 && flags == 0) {
    if (pending_room(d) == 0) return false;
    to_wire(d, &m, 1);
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
  to_wire(d, d.frames.bufs.data(), got);
  // The payload has been read: freeing the descriptor is the app memory's send completion.
  if (s != TxStatus::kOk) {
    drop_tx(d, m);
  } else {
    rte_pktmbuf_free(m);
  }
  return true;
}

// Descriptors are staged from one TX queue's ring at a time, the queues taken round robin; the
// wire has one queue, so they merge onto it in that order.
void tx_merge(Device& d) {
  if (d.tx_stage_count == 0) {
    d.tx_stage_head = 0;
    for (uint16_t i = 0; i < d.nb_queues && d.tx_stage_count == 0; i++) {
      const auto q = uint16_t((d.tx_next + i) % d.nb_queues);
      d.tx_stage_count = rte_ring_sc_dequeue_burst(
          d.txq[q].ring, reinterpret_cast<void**>(d.tx_stage.data()), kBurst, nullptr);
      d.txq_packets[q] += d.tx_stage_count;
      if (d.tx_stage_count != 0) d.tx_next = uint16_t((q + 1) % d.nb_queues);
    }
  }
  while (d.tx_stage_count > 0 && tx_one(d, d.tx_stage[d.tx_stage_head])) {
    d.tx_stage_head++;
    d.tx_stage_count--;
  }
  // The mbuf's release is the completion the app sees; the model's own ring is just emptied.
  model_mbuf::poll_completions(*d.model, d.frames);
}

// What TX moved: frames onto the wire, descriptors taken from the TX queues.
uint64_t tx_moved(const Device& d) {
  uint64_t n = d.ctr[size_t(PmdCtr::kTxPackets)];
  for (uint16_t q = 0; q < d.nb_queues; q++)
    n += d.txq_packets[q];
  return n;
}

// Inline mode: no service lcore runs the NIC, so the dataplane's bursts do (decided at start).
bool run_inline(const Device& d) {
  return d.inline_mode;
}

}  // namespace

uint32_t apply_posted(Device& d) {
  PostedCmd c[kBurst];
  uint32_t done = 0;
  for (uint16_t q = 0; q < d.nb_queues; q++) {
    for (uint32_t from_q = 0; from_q < kPostedCmds;) {
      const unsigned n =
          rte_ring_sc_dequeue_burst_elem(d.posted[q], c, sizeof(PostedCmd), kBurst, nullptr);
      if (n == 0) break;
      for (unsigned i = 0; i < n; i++)
        run_posted(d, c[i]);
      from_q += n;
      done += n;
    }
  }
  return done;
}

void run_posted(Device& d, const PostedCmd& c) {
  // A refusal is the model's to count (nic_cmd_err_*): no one waits for the answer.
  switch (c.op) {
    case PostedCmd::kCursorUpdate:
      d.model->cursor_update(c.flow, c.arg);
      break;
    case PostedCmd::kMsRetire:
      d.model->ms_retire(c.flow, c.arg);
      break;
    case PostedCmd::kMsRetireMsg:
      d.model->ms_retire_msg(c.flow, c.arg);
      break;
    case PostedCmd::kIrq: {
      // The eventfd is non-blocking (the daemon checked): a write fails only when its counter
      // would overflow, and then its reader is awake anyway.
      const uint64_t one = 1;
      if (c.flow < kIrqVectors && d.irq_fd[c.flow] >= 0) {
        [[maybe_unused]] ssize_t r = write(d.irq_fd[c.flow], &one, sizeof one);
        d.bump(PmdCtr::kIrqs);
      } else {
        d.bump(PmdCtr::kIrqErrors);
      }
      break;
    }
  }
  d.bump(PmdCtr::kPosted);
}

bool poll_locked(Device& d) {
  d.bump(PmdCtr::kServiceRuns);
  const bool posted = apply_posted(d) != 0;
  const uint64_t before = tx_moved(d);
  poll_tx_fault(d);
  flush_pending(d);
  if (d.pending_count == 0) {
    tx_merge(d);
    flush_pending(d);
  }
  const bool rx = rx_wire(d);
  return rx || posted || tx_moved(d) != before;
}

void drain_locked(Device& d) {
  void* m;
  for (size_t q = 0; q < kMaxQueues; q++) {
    for (rte_ring* r : {d.rxq[q].ring, d.txq[q].ring}) {
      while (r != nullptr && rte_ring_dequeue(r, &m) == 0)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
    }
  }
  for (uint32_t i = 0; i < d.tx_stage_count; i++)
    rte_pktmbuf_free(d.tx_stage[d.tx_stage_head + i]);
  d.tx_stage_count = 0;
  d.tx_stage_head = 0;
  for (uint32_t i = 0; i < d.pending_count; i++)
    rte_pktmbuf_free(d.pending[(d.pending_head + i) % kPendingFrames]);
  d.pending_count = 0;
  d.pending_head = 0;
  for (dp::FaultStage& f : d.fault)
    f.clear();
}

ServiceSlot& service_slot(uint16_t port_id) {
  static ServiceSlot slots[RTE_MAX_ETHPORTS];
  return slots[port_id];
}

void service_release(uint16_t port_id) {
  ServiceSlot& s = service_slot(port_id);
  s.dev.store(nullptr);
  while (s.busy.load() != 0)
    rte_pause();
}

int32_t service_run(void* arg) {
  ServiceSlot& s = *static_cast<ServiceSlot*>(arg);
  s.busy.fetch_add(1);
  Device* d = s.dev.load();
  int32_t r = -EAGAIN;
  if (d != nullptr && rte_spinlock_trylock(&d->lock)) {
    if (d->started && poll_locked(*d)) {
      d->bump(PmdCtr::kServiceBusy);
      r = 0;
    }
    rte_spinlock_unlock(&d->lock);
  }
  s.busy.fetch_sub(1);
  return r;
}

uint16_t rx_burst(void* queue, rte_mbuf** pkts, uint16_t n) {
  const Queue& q = *static_cast<const Queue*>(queue);
  Device& d = *q.dev;
  if (run_inline(d)) {
    if (rte_spinlock_trylock(&d.lock)) {
      d.bump(PmdCtr::kServiceInline);
      poll_locked(d);
      rte_spinlock_unlock(&d.lock);
    }
  }
  return uint16_t(rte_ring_sc_dequeue_burst(q.ring, reinterpret_cast<void**>(pkts), n, nullptr));
}

uint16_t tx_burst(void* queue, rte_mbuf** pkts, uint16_t n) {
  const Queue& q = *static_cast<const Queue*>(queue);
  Device& d = *q.dev;
  const auto sent =
      uint16_t(rte_ring_sp_enqueue_burst(q.ring, reinterpret_cast<void**>(pkts), n, nullptr));
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
