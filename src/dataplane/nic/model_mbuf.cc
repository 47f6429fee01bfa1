// model_mbuf.cc - mbufs in and out of the NIC reference model (see model_mbuf.h).
#include "model_mbuf.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace cleave::model_mbuf {

// ---- RX ---------------------------------------------------------------------------------------

uint64_t rx_csum_flags(const nic::RxEntry& e) {
  uint64_t f = 0;
  if (e.ip_csum == nic::CsumStatus::kGood) f |= RTE_MBUF_F_RX_IP_CKSUM_GOOD;
  if (e.ip_csum == nic::CsumStatus::kBad) f |= RTE_MBUF_F_RX_IP_CKSUM_BAD;
  if (e.l4_csum == nic::CsumStatus::kGood) f |= RTE_MBUF_F_RX_L4_CKSUM_GOOD;
  if (e.l4_csum == nic::CsumStatus::kBad) f |= RTE_MBUF_F_RX_L4_CKSUM_BAD;
  return f;
}

void fill_placement(rte_mbuf* m, const nic::RxEntry& e, int offset) {
  auto* p = rte_pmd_cleave_placement_get(m, offset);
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
                     (uint8_t(e.ip_csum) << RTE_PMD_CLEAVE_F_IP_CSUM_SHIFT) |
                     (uint8_t(e.l4_csum) << RTE_PMD_CLEAVE_F_L4_CSUM_SHIFT));
  // Keep only the bits that describe the buffer itself (extbuf, indirect).
  m->ol_flags = (m->ol_flags & (RTE_MBUF_F_EXTERNAL | RTE_MBUF_F_INDIRECT)) | rx_csum_flags(e);
  if (e.flow_id != nic::kNoFlow) {
    m->ol_flags |= RTE_MBUF_F_RX_FDIR | RTE_MBUF_F_RX_FDIR_ID;
    m->hash.fdir.hi = e.flow_id;
  }
}

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

bool rx_frame(nic::NicModel& model, rte_mbuf* m, std::span<uint8_t> flat, nic::RxEntry& e,
              int offset) {
  std::span<const uint8_t> frame;
  bool linearized = false;
  if (m->nb_segs == 1) {
    frame = {rte_pktmbuf_mtod(m, const uint8_t*), m->data_len};
  } else {
    // The model parses a flat frame; a chained one is copied into scratch first.
    const uint32_t len = std::min<uint32_t>(m->pkt_len, uint32_t(flat.size()));
    const auto* p = static_cast<const uint8_t*>(rte_pktmbuf_read(m, 0, len, flat.data()));
    frame = {p, len};
    linearized = true;
  }
  model.rx(frame, e);
  fill_placement(m, e, offset);
  if (e.decision != nic::Decision::kDeferred) keep_head(m, e.header_len);
  return linearized;
}

// ---- TX ---------------------------------------------------------------------------------------

uint8_t tx_flags(uint64_t ol_flags, uint64_t icrc_mask, uint64_t crc32c_mask) {
  uint8_t flags = 0;
  if ((ol_flags & RTE_MBUF_F_TX_TCP_SEG) != 0) flags |= nic::kTxTso;
  if ((ol_flags & RTE_MBUF_F_TX_IP_CKSUM) != 0) flags |= nic::kTxIpCsum;
  const uint64_t l4 = ol_flags & RTE_MBUF_F_TX_L4_MASK;
  if (l4 == RTE_MBUF_F_TX_TCP_CKSUM || l4 == RTE_MBUF_F_TX_UDP_CKSUM) flags |= nic::kTxL4Csum;
  if ((ol_flags & icrc_mask) != 0) flags |= nic::kTxIcrc;
  if ((ol_flags & crc32c_mask) != 0) flags |= nic::kTxCrc32c;
  return flags;
}

uint32_t header_length(const uint8_t* f, uint32_t len, uint8_t flags) {
  if (len < 14 + 20 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4) return 0;
  const uint32_t l4 = 14 + uint32_t(f[14] & 0xF) * 4;
  const uint8_t proto = f[14 + 9];
  if (proto == 6) {
    if (len < l4 + 20) return 0;
    const uint32_t h = l4 + uint32_t(f[l4 + 12] >> 4) * 4;
    return h <= len ? h : 0;
  }
  if (proto == 17) {
    const uint32_t h =
        l4 + 8 + ((flags & nic::kTxIcrc) != 0 ? 12 : 0) + ((flags & nic::kTxCrc32c) != 0 ? 32 : 0);
    return len >= h ? h : 0;
  }
  return l4 <= len ? l4 : 0;
}

bool tx_request(const rte_mbuf* m, uint8_t flags, nic::TxRequest& req) {
  const uint8_t* h = rte_pktmbuf_mtod(m, const uint8_t*);
  uint32_t hlen = m->data_len;
  if (m->nb_segs == 1) {
    hlen = header_length(h, m->data_len, flags);
    if (hlen == 0) return false;
  }
  req = nic::TxRequest{};
  req.header = {h, hlen};
  req.len = m->pkt_len - hlen;
  req.mss = (flags & nic::kTxTso) != 0 ? m->tso_segsz : 0;
  req.flags = flags;
  return true;
}

void MrRanges::insert(uintptr_t base, uint64_t len, uint16_t id) {
  const MrRange mr{base, len, id};
  auto at = std::upper_bound(r_.begin(), r_.end(), mr,
                             [](const MrRange& x, const MrRange& y) { return x.base < y.base; });
  r_.insert(at, mr);
}

void MrRanges::erase(uint16_t id) {
  std::erase_if(r_, [&](const MrRange& m) { return m.id == id; });
}

bool MrRanges::find(uintptr_t p, uint32_t len, uint16_t* mr, uint64_t* off) const {
  auto it = std::upper_bound(r_.begin(), r_.end(), p,
                             [](uintptr_t v, const MrRange& r) { return v < r.base; });
  if (it == r_.begin()) return false;
  --it;
  const uint64_t at = p - it->base;
  if (at > it->len || len > it->len - at) return false;
  *mr = it->id;
  *off = at;
  return true;
}

bool payload_contiguous(const rte_mbuf* m) {
  const rte_mbuf* s = m->next;
  uintptr_t end = rte_pktmbuf_mtod(s, uintptr_t) + s->data_len;
  for (s = s->next; s != nullptr; s = s->next) {
    if (rte_pktmbuf_mtod(s, uintptr_t) != end) return false;
    end += s->data_len;
  }
  return true;
}

bool bounce(const rte_mbuf* m, uint32_t from, uint32_t len, std::span<uint8_t> buf) {
  if (len > buf.size()) return false;
  const void* p = rte_pktmbuf_read(m, from, len, buf.data());
  if (p == nullptr) return false;
  if (p != buf.data()) std::memcpy(buf.data(), p, len);
  return true;
}

Payload tx_payload(const rte_mbuf* m, uint32_t hlen, const MrRanges& mrs,
                   std::span<uint8_t> bounce_buf, uint16_t bounce_mr, nic::TxRequest& req) {
  if (req.len == 0) return Payload::kNone;
  if (m->nb_segs > 1 && payload_contiguous(m) &&
      mrs.find(rte_pktmbuf_mtod(m->next, uintptr_t), req.len, &req.mr, &req.offset)) {
    return Payload::kZeroCopy;
  }
  if (bounce(m, hlen, req.len, bounce_buf)) {
    req.mr = bounce_mr;
    req.offset = 0;
    return Payload::kBounced;
  }
  return Payload::kFailed;
}

void poll_completions(nic::NicModel& model, FrameScratch& s) {
  while (model.tx_poll(s.txc) == s.txc.size()) {
  }
}

bool merge(nic::NicModel& model, const nic::TxRequest& req, rte_mempool* pool, uint32_t room,
           FrameScratch& s, nic::TxStatus* status, uint16_t* got) {
  const uint32_t nf = nic::NicModel::tx_frames(req);
  if (rte_pktmbuf_alloc_bulk(pool, s.bufs.data(), nf) != 0) return false;
  for (uint32_t i = 0; i < nf; i++)
    s.spans[i] = {rte_pktmbuf_mtod(s.bufs[i], uint8_t*), room};
  uint16_t n = 0;
  nic::TxStatus st = model.tx(req, std::span(s.spans.data(), nf), std::span(s.lens.data(), nf), &n);
  if (st == nic::TxStatus::kCompletionsFull) {
    poll_completions(model, s);
    st = model.tx(req, std::span(s.spans.data(), nf), std::span(s.lens.data(), nf), &n);
  }
  if (st != nic::TxStatus::kOk) n = 0;
  for (uint32_t i = 0; i < n; i++) {
    rte_mbuf* f = s.bufs[i];
    f->data_len = uint16_t(s.lens[i]);
    f->pkt_len = s.lens[i];
  }
  if (n < nf) rte_pktmbuf_free_bulk(s.bufs.data() + n, nf - n);
  *status = st;
  *got = n;
  return true;
}

// ---- commands ---------------------------------------------------------------------------------

int to_errno(nic::Err e) {
  switch (e) {
    case nic::Err::kOk:
      return 0;
    case nic::Err::kBadArgument:
      return -EINVAL;
    case nic::Err::kUnknownMr:
    case nic::Err::kUnknownFlow:
      return -ENOENT;
    case nic::Err::kMrExists:
    case nic::Err::kFlowExists:
      return -EEXIST;
    case nic::Err::kMrTableFull:
    case nic::Err::kFlowTableFull:
      return -ENOSPC;
    case nic::Err::kMrInUse:
      return -EBUSY;
    case nic::Err::kOutOfBounds:
      return -ERANGE;
    case nic::Err::kMsFull:
      return -ENOBUFS;
    case nic::Err::kNotConsumed:
      return -EAGAIN;
    case nic::Err::kNoSuchMessage:
      return -ENOMSG;
    case nic::Err::kAccessDenied:
      return -EACCES;
    case nic::Err::kCount:
      break;
  }
  return -EINVAL;
}

bool flow_spec(const rte_pmd_cleave_flow* flow, nic::FlowSpec& s) {
  if (flow == nullptr || flow->mode > RTE_PMD_CLEAVE_COPY ||
      flow->parser > RTE_PMD_CLEAVE_PARSER_UDP) {
    return false;
  }
  s = nic::FlowSpec{};
  s.key = {flow->src_ip, flow->dst_ip, flow->src_port, flow->dst_port, flow->proto};
  s.mode = nic::FlowMode(flow->mode);
  s.parser = nic::Parser(flow->parser);
  s.reliable = flow->reliable != 0;
  s.messages = flow->messages != 0;
  s.initial_seq = flow->initial_seq;
  s.pmtu = flow->pmtu != 0 ? flow->pmtu : 4096;
  s.initial_offset = flow->initial_offset;
  s.qpn = flow->qpn;
  s.owner = flow->owner;
  s.selective_repeat = flow->selective_repeat != 0;
  s.queue = flow->queue;
  return true;
}

}  // namespace cleave::model_mbuf
