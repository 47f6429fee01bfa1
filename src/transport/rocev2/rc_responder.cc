// rc_responder.cc - the responder: requests checked and accepted at ePSN, payloads landed,
// duplicates answered, READ responses sent, selective repeat's packets past a gap, ACKs and NAKs.
#include <algorithm>
#include <cstring>

#include "rc_qp.h"

namespace cleave::transport::roce {

namespace {

// An ACK or NAK. `msn`: the AETH's MSN field, the responder's message count; in a selective-
// repeat NAK, the PSN it names.
void send_ack(RcTransport::Qp& q, uint8_t syndrome, uint32_t psn, uint32_t msn, Context& ctx,
              RcCounters& t) {
  Headers h;
  h.opcode = kAck;
  h.psn = psn;
  h.syndrome = syndrome;
  h.msn = msn;
  header(q, h, ctx);
  count_tx(q, 0, t);
}

// May the peer touch what the RETH names (the QP's remote access, then the rkey's MR through
// the owner's rule)? A zero-length request names nothing and needs no key.
bool remote_ok(const RcTransport::Qp& q, const Headers& b, bool write, Context& ctx, uint16_t* mr,
               uint64_t* off) {
  if ((q.attr.access & (write ? kRemoteWrite : kRemoteRead)) == 0) return false;
  return b.dma_len == 0 || (ctx.rdma() && ctx.rdma()->rkey_check(q.flow, b.rkey, b.va, b.dma_len,
                                                                 write, mr, off) == 0);
}

// The receive at the head completes with `e` (its MS leaves the NIC) and the next one is up.
void consume_recv(RcTransport::Qp& q, Event e, Context& ctx) {
  e.wr_id = q.rq[(q.rq_head) & q.rq_mask].wr_id;
  ctx.event(e);
  if (q.rq_head < q.rq_nic) ctx.ms_retire_msg(q.flow, uint32_t(q.rq_head));
  q.rq_head++;
}

// Makes room for a new READ by dropping a duplicate READ's responses not yet sent (the
// requester asks again if it still needs them). False when there is none.
bool drop_reread(RcTransport::Qp& q) {
  const auto n = uint32_t(q.rr.size());
  for (uint32_t i = 0; i < q.rr_n; i++) {
    if (!q.rr[(q.rr_head + i) % n].again) continue;
    for (uint32_t j = i; j + 1 < q.rr_n; j++)
      q.rr[(q.rr_head + j) % n] = q.rr[(q.rr_head + j + 1) % n];
    q.rr_n--;
    return true;
  }
  return false;
}

// IBTA's packet lengths: a first or middle packet carries exactly one PMTU, a last one
// 1..PMTU, an only one 0..PMTU (a READ request's payload is none of its business).
bool lengths_ok(const OpInfo& o, uint32_t len, uint32_t pmtu) {
  if (o.kind == OpKind::kReadRequest) return true;
  if (o.first && o.last) return len <= pmtu;
  if (o.last) return len != 0 && len <= pmtu;
  return len == pmtu;
}

// A RETH's DMA length: no message is longer than 2^31 bytes, and a WRITE cut into packets is
// longer than one PMTU.
bool reth_ok(const OpInfo& o, const Headers& b, uint32_t pmtu) {
  return b.dma_len <= kMaxMessage && (o.kind != OpKind::kWrite || o.last || b.dma_len > pmtu);
}

// The responder's side of one request packet at ePSN. Returns false (with a NAK or RNR pending)
// when it was not accepted.
bool accept(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t) {
  const OpInfo o = op_info(x.b.opcode);
  const uint32_t pmtu = q.attr.pmtu;
  auto invalid = [&] {
    q.nak_pending = kSynInvalid;
    q.c.invalid_requests++;
    t.invalid_requests++;
    return false;
  };
  auto denied = [&] {
    q.nak_pending = kSynAccess;
    q.c.access_errors++;
    t.access_errors++;
    return false;
  };
  // An opcode this transport does not implement (atomics, SEND with invalidate, FLUSH, ...).
  if (o.kind == OpKind::kUnsupported) return invalid();
  if (!lengths_ok(o, x.len, pmtu)) return invalid();
  // Opcode order (IBTA 9.7.5.1.2, as rxe's check_op_seq): a SEND or WRITE in progress takes only
  // its own middle or last packets; none in progress, only a first or only packet.
  if ((o.kind == OpKind::kSend && (o.first == q.in_send || q.in_write)) ||
      (o.kind == OpKind::kWrite && (o.first == q.in_write || q.in_send))) {
    return invalid();
  }
  if (o.reth && !reth_ok(o, x.b, pmtu)) return invalid();

  if (o.kind == OpKind::kSend || (o.kind == OpKind::kWrite && o.last && o.imm)) {
    // Consumes a receive.
    const bool need_recv = o.kind == OpKind::kSend ? o.first : true;
    if (need_recv && q.rq_head == q.rq_tail) {
      q.rnr_code_pending = q.attr.min_rnr_timer;
      return false;
    }
  }
  if (o.kind == OpKind::kSend) {
    RecvWqe& r = q.rq[(q.rq_head) & q.rq_mask];
    if (o.first) q.msg_bytes = 0;
    if (uint64_t(q.msg_bytes) + x.len > r.len) {
      // The message is longer than the receive: an invalid request (IBTA 9.7.5.2.6); the
      // receive fails.
      consume_recv(q, {q.flow, EventKind::kRecvDone, -EMSGSIZE, q.msg_bytes, 0, 0}, ctx);
      q.in_send = false;
      q.resync = true;
      return invalid();
    }
    if (!land(q, x, r.mr, r.offset + q.msg_bytes, ctx, t)) return invalid();
    q.msg_bytes += x.len;
    q.in_send = !o.last;
    if (o.last) {
      consume_recv(q,
                   {q.flow, EventKind::kRecvDone, 0, q.msg_bytes, q.msg_bytes, 0, x.b.imm,
                    uint8_t(o.imm ? kEvImm : 0)},
                   ctx);
      q.msn = psn_add(q.msn, 1);
    }
    return true;
  }
  if (o.kind == OpKind::kWrite) {
    if (o.first) {
      q.msg_bytes = 0;
      uint16_t mr = 0;
      uint64_t off = 0;
      if (!remote_ok(q, x.b, true, ctx, &mr, &off)) return denied();
      q.wr_mr = mr;
      q.wr_off = off;
      q.wr_len = x.b.dma_len;
    }
    if (uint64_t(q.msg_bytes) + x.len > q.wr_len || (o.last && q.msg_bytes + x.len != q.wr_len)) {
      q.in_write = false;
      return invalid();
    }
    if (!land(q, x, q.wr_mr, q.wr_off + q.msg_bytes, ctx, t)) return invalid();
    q.msg_bytes += x.len;
    q.in_write = !o.last;
    if (o.last) {
      if (o.imm) {
        consume_recv(q,
                     {q.flow, EventKind::kRecvDone, 0, q.msg_bytes, q.msg_bytes, 0, x.b.imm,
                      uint8_t(kEvImm | kEvWrite)},
                     ctx);
        q.resync = true;  // the NIC counts SENDs only: tell it which receive the next one takes
      }
      q.msn = psn_add(q.msn, 1);
    }
    return true;
  }
  // READ request.
  if (q.in_send || q.in_write) return invalid();
  if (q.rr_n >= q.attr.max_dest_rd_atomic && !drop_reread(q)) return invalid();
  uint16_t mr = 0;
  uint64_t off = 0;
  if (!remote_ok(q, x.b, false, ctx, &mr, &off)) return denied();
  ReadResp& rr = q.rr[(q.rr_head + q.rr_n) % q.rr.size()];
  rr = ReadResp{false, x.b.psn, packets(x.b.dma_len, pmtu), 0, mr, x.b.dma_len, off};
  q.rr_n++;
  q.msn = psn_add(q.msn, 1);
  return true;
}

// A duplicate READ request: executed again from its RETH (the bytes may have changed; RC allows
// that), queued behind what is being sent.
void reread(RcTransport::Qp& q, const Rx& x, Context& ctx) {
  uint16_t mr = 0;
  uint64_t off = 0;
  if (q.rr_n >= q.rr.size() || !remote_ok(q, x.b, false, ctx, &mr, &off)) return;
  // Responses queued and not yet sent from that PSN on: they answer it, nothing to add. Ones
  // already past it stop there (go-back-N: the requester discards what follows a gap), and the
  // new responses take over from the PSN asked. Selective repeat asks for the gap only, and
  // gets only what was sent: the rest still goes, after it (what was lost goes first), so the
  // requester never has a READ's responses while the READ still holds a place here.
  const auto n = uint32_t(q.rr.size());
  uint32_t dma_len = x.b.dma_len;
  for (uint32_t i = 0; i < q.rr_n; i++) {
    ReadResp& r = q.rr[(q.rr_head + i) % n];
    const int32_t k = psn_diff(x.b.psn, r.first_psn);
    if (k < 0 || k >= int32_t(r.npkts)) continue;
    if (uint32_t(k) >= r.next) return;
    if (q.attr.selective_repeat) {
      if (!r.again) dma_len = std::min(dma_len, (r.next - uint32_t(k)) * q.attr.pmtu);
      continue;
    }
    r.npkts = r.next;
    r.len = std::min(r.len, r.next * q.attr.pmtu);
  }
  // Selective repeat: ahead of the READs queued, behind the re-reads queued before it, so the
  // requester gets answers in the order it asked (it tells a lost re-read by that).
  uint32_t at = q.rr_n;
  if (q.attr.selective_repeat) {
    at = 0;
    while (at < q.rr_n && q.rr[(q.rr_head + at) % n].again)
      at++;
    for (uint32_t i = q.rr_n; i > at; i--)
      q.rr[(q.rr_head + i) % n] = q.rr[(q.rr_head + i - 1) % n];
  }
  q.rr[(q.rr_head + at) % n] =
      ReadResp{true, x.b.psn, packets(dma_len, q.attr.pmtu), 0, mr, dma_len, off};
  q.rr_n++;
}

}  // namespace

// The PSN an ACK may name now: the newest accepted, but not past a READ whose responses are
// still queued (the ACK would tell the requester they were lost). Duplicates executed again do
// not hold it back: the requester had their ACK.
uint32_t ack_point(const RcTransport::Qp& q) {
  for (uint32_t i = 0; i < q.rr_n; i++) {
    const ReadResp& r = q.rr[(q.rr_head + i) % q.rr.size()];
    if (!r.again) return psn_add(r.first_psn, kPsnMask);
  }
  return psn_add(q.epsn, kPsnMask);
}

// Sends the ACK that is due, as far as ack_point() allows; the rest stays due.
void send_due_ack(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  const uint32_t psn = ack_point(q);
  q.ack_pending = psn != psn_add(q.epsn, kPsnMask);
  if (q.ack_pending && psn == q.last_ack) return;  // held back, and it would tell nothing new
  send_ack(q, kSynAck, psn, q.msn, ctx, t);
  q.last_ack = psn;
  q.c.acks_sent++;
  t.acks_sent++;
}

// Sends queued READ responses (as the pacer allows, at most kRespBurst per call).
void respond(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  const uint64_t now = ctx.now_ns();
  const uint32_t pmtu = q.attr.pmtu;
  for (uint32_t sent = 0; q.rr_n != 0 && sent < kRespBurst && pace(q, now); sent++) {
    ReadResp& r = q.rr[q.rr_head];
    if (r.next >= r.npkts) {  // cut short by a duplicate READ (reread)
      q.rr_head = (q.rr_head + 1) % uint32_t(q.rr.size());
      q.rr_n--;
      continue;
    }
    const uint32_t k = r.next;
    const bool first = k == 0;
    const bool last = k + 1 == r.npkts;
    const uint32_t len = std::min(pmtu, r.len - std::min(r.len, k * pmtu));
    Headers h;
    h.opcode = first && last ? kReadRespOnly
               : first       ? kReadRespFirst
               : last        ? kReadRespLast
                             : kReadRespMiddle;
    h.psn = psn_add(r.first_psn, k);
    h.syndrome = kSynAck;
    h.msn = q.msn;
    h.pad = uint8_t((4 - len % 4) % 4);
    TxDesc& d = header(q, h, ctx);
    d.mr = r.mr;
    d.offset = r.offset + uint64_t(k) * pmtu;
    d.len = len;
    count_tx(q, len, t);
    q.c.read_responses++;
    t.read_responses++;
    spend(q, len, now);
    if (++r.next == r.npkts) {
      q.rr_head = (q.rr_head + 1) % uint32_t(q.rr.size());
      q.rr_n--;
    }
  }
}

namespace {

// Selective repeat: the NAK of the newest run's packets not yet NAKed, if any. (Before a NAK
// that names nothing kept: the requester sends again all that no NAK named.)
void flush_run(RcTransport::Qp& q) {
  if (!q.run || psn_diff(q.run_hi, q.epsn) <= 0 || q.run_unsent == 0) return;
  if (q.sr_naks.size() < kMaxSrNaks) {
    q.sr_naks.push_back({psn_add(q.run_hi, 1u - q.run_unsent), q.run_hi});
  }
  q.run_unsent = 0;
}

// Selective repeat: `psn` was kept past a gap; the NAKs that tell it. One that follows the newest
// run grows it, and is NAKed with the run's packets not yet NAKed once there are kSrNakEvery of
// them or it asks for an ACK. One past a new gap starts a run and is NAKed at once (the gap is
// news), after the old run's packets not yet NAKed (the requester takes what lies between two
// NAKs for lost). One below the run (a hole filled before an older one) is NAKed alone.
void note_kept(RcTransport::Qp& q, uint32_t psn, bool ack_req) {
  auto nak = [&q](uint32_t lo, uint32_t hi) {
    if (q.sr_naks.size() < kMaxSrNaks) q.sr_naks.push_back({lo, hi});
  };
  const bool live = q.run && psn_diff(q.run_hi, q.epsn) > 0;  // not yet passed by ePSN
  if (live && psn == psn_add(q.run_hi, 1)) {
    q.run_hi = psn;
    if (++q.run_unsent >= kSrNakEvery || ack_req) flush_run(q);
    return;
  }
  if (live && psn_diff(psn, q.run_lo) < 0) {
    nak(psn, psn);
    return;
  }
  flush_run(q);
  q.run = true;
  q.run_lo = q.run_hi = psn;
  q.run_unsent = 0;
  nak(psn, psn);
}

// Selective repeat: a kept packet is gone (processed, passed, or its slot taken by a PSN a window
// later); its payload's slot is free again.
void unkeep(RcTransport::Qp& q, OooPkt& e) {
  if (e.slot >= 0) q.keep_free.push_back(uint16_t(e.slot));
  e.slot = -1;
  e.valid = false;
}

// Selective repeat: a deferred SEND packet past a gap, its payload copied into a free slot of the
// keep buffer (the NIC cannot place it: which receive it belongs to is unknown while a lost
// packet may have ended the message before), or a WRITE's whose first packet has not come.
// False when no slot is free or it does not fit.
bool keep_send(RcTransport::Qp& q, const Rx& x, const OpInfo& o, OooPkt& e) {
  const uint32_t pmtu = q.attr.pmtu;
  if (x.h.payload == nullptr || !lengths_ok(o, x.len, pmtu) || q.keep_free.empty()) return false;
  e.slot = q.keep_free.back();
  q.keep_free.pop_back();
  std::memcpy(q.keep.data() + size_t(e.slot) * pmtu, x.h.payload, x.len);
  return true;
}

// Selective repeat: a request `d` PSNs past ePSN. Kept when its payload is certainly in place
// (the NIC placed it, it had none, or it belongs to a WRITE whose place is known) or a SEND's
// payload, or that of a WRITE whose first packet has not come, found room in the keep buffer,
// to be processed when ePSN reaches it, and named in a NAK. Otherwise dropped: false, and the
// caller asks for everything from ePSN the responder does not have, unless it was a packet
// that found the keep buffer full (`full`): the packets
// in flight behind it would find it full too, and sending them all again at once only repeats
// that; the NAK of the next packet kept past it (or the timeout) asks for it.
bool keep_ooo(RcTransport::Qp& q, const Rx& x, int32_t d, Context& ctx, RcCounters& t, bool* full) {
  if (d >= int32_t(kSrWindow)) return false;
  OooPkt& e = q.ooo[x.b.psn % kSrWindow];
  if (e.valid && e.b.psn == x.b.psn) return true;  // a duplicate of one kept
  unkeep(q, e);                                    // a PSN a window before, never processed
  const OpInfo o = op_info(x.b.opcode);
  if (o.kind == OpKind::kWrite && o.first) {
    // Where this WRITE goes: for its packets the NIC defers (its WRITE contexts were full).
    WriteCtx c;
    if (x.b.dma_len != 0 && reth_ok(o, x.b, q.attr.pmtu) &&
        remote_ok(q, x.b, true, ctx, &c.mr, &c.offset)) {
      c.valid = true;
      c.first_psn = x.b.psn;
      c.npkts = packets(x.b.dma_len, q.attr.pmtu);
      c.len = x.b.dma_len;
      q.wctx[q.wctx_next++ % q.wctx.size()] = c;
    }
  }
  if (x.len != 0 && x.h.placed == Placed::kDeferred && o.kind == OpKind::kSend) {
    if (!keep_send(q, x, o, e)) {
      *full = q.keep_free.empty();
      return false;
    }
  } else if (x.len != 0 && x.h.placed != Placed::kPlaced) {
    // Deferred: kept only when it is a WRITE's packet whose place is known, copied there.
    if (o.kind != OpKind::kWrite || x.h.placed != Placed::kDeferred) return false;
    const WriteCtx* c = nullptr;
    for (const WriteCtx& w : q.wctx) {
      if (w.valid && psn_diff(x.b.psn, w.first_psn) >= 0 &&
          psn_diff(x.b.psn, w.first_psn) < int32_t(w.npkts)) {
        c = &w;
      }
    }
    if (c == nullptr) {
      // Its WRITE's first packet has not come (it was lost, or overtaken on another path):
      // kept in a slot like a SEND's, and copied to its place when ePSN reaches it.
      if (!keep_send(q, x, o, e)) {
        *full = q.keep_free.empty();
        return false;
      }
    } else {
      // Copied only when IBTA's lengths hold: the packet's own, and a last one ends the WRITE.
      const uint64_t at = uint64_t(psn_diff(x.b.psn, c->first_psn)) * q.attr.pmtu;
      if (!lengths_ok(o, x.len, q.attr.pmtu) || at + x.len > c->len ||
          (o.last && at + x.len != c->len) || !land(q, x, c->mr, c->offset + at, ctx, t)) {
        return false;
      }
    }
  }
  e.valid = true;
  e.b = x.b;
  e.len = x.len;
  note_kept(q, x.b.psn, x.b.ack_req);
  return true;
}

// Selective repeat: processes, in order, the packets kept past what was the gap.
void sweep(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  for (;;) {
    OooPkt& e = q.ooo[q.epsn % kSrWindow];
    if (!e.valid || e.b.psn != q.epsn) return;
    RxHeader h;
    h.placed = e.len == 0 ? Placed::kNoPayload : Placed::kPlaced;
    h.payload_len = e.len;
    if (e.slot >= 0) {  // a SEND's payload in the keep buffer: copied as if it came now
      h.placed = Placed::kDeferred;
      h.payload = q.keep.data() + size_t(e.slot) * q.attr.pmtu;
    }
    const Rx x{h, e.b, e.len};
    const bool ok = accept(q, x, ctx, t);
    unkeep(q, e);
    if (!ok) return;  // its NAK or RNR NAK is due; it comes again
    const OpInfo o = op_info(e.b.opcode);
    q.epsn =
        psn_add(q.epsn, o.kind == OpKind::kReadRequest ? packets(e.b.dma_len, q.attr.pmtu) : 1);
    if (o.kind != OpKind::kReadRequest) q.ack_pending |= e.b.ack_req;
  }
}

// Selective repeat: the NAKs of packets kept past a gap this burst (note_kept), none for what
// ePSN reached meanwhile. One packet: BTH PSN = ePSN (all before it received), MSN field = the
// PSN kept. Several (a run): the SE bit set, BTH PSN = the first, MSN field = the last.
void send_sr_naks(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  for (const RcTransport::Qp::Range& r : q.sr_naks) {
    if (psn_diff(r.lo, q.epsn) <= 0 || q.attr.state == QpState::kErr) continue;
    Headers h;
    h.opcode = kAck;
    h.psn = r.lo == r.hi ? q.epsn : r.lo;
    h.solicited = r.lo != r.hi;
    h.syndrome = kSynPsnError;
    h.msn = r.hi;
    header(q, h, ctx);
    count_tx(q, 0, t);
    q.c.naks_sent++;
    t.naks_sent++;
  }
  q.sr_naks.clear();
}

}  // namespace

// A request (SEND, WRITE, READ) at the responder: a duplicate, one past a gap, or the one at
// ePSN, accepted or NAKed.
void on_request(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t) {
  const Headers& b = x.b;
  const OpInfo o = op_info(b.opcode);
  const int32_t d = psn_diff(b.psn, q.epsn);
  if (d < 0) {
    q.c.duplicates++;
    t.duplicates++;
    if (o.kind == OpKind::kReadRequest) {
      reread(q, x, ctx);
    } else {
      q.ack_pending = true;
    }
    return;
  }
  if (d > 0) {
    q.c.out_of_sequence++;
    t.out_of_sequence++;
    if (q.attr.selective_repeat) {
      bool full = false;
      if (!keep_ooo(q, x, d, ctx, t, &full) && !full && !q.nak_sent) {
        q.nak_pending = kSynPsnError;
        flush_run(q);
      }
    } else if (!q.nak_sent && q.nak_pending == 0 && q.rnr_code_pending == 0xFF) {
      q.nak_pending = kSynPsnError;
    }
    return;
  }
  // An RNR or error NAK for ePSN is already due this burst.
  if ((q.nak_pending != 0 && q.nak_pending != kSynPsnError) || q.rnr_code_pending != 0xFF) {
    return;
  }
  if (!accept(q, x, ctx, t)) return;
  if (q.attr.selective_repeat) {
    OooPkt& e = q.ooo[b.psn % kSrWindow];
    if (e.valid && e.b.psn == b.psn) unkeep(q, e);  // a kept copy
  }
  q.epsn = psn_add(q.epsn, o.kind == OpKind::kReadRequest ? packets(b.dma_len, q.attr.pmtu) : 1);
  q.nak_sent = false;
  if (q.nak_pending == kSynPsnError) q.nak_pending = 0;  // the gap closed
  // READ responses acknowledge their request.
  if (o.kind != OpKind::kReadRequest) q.ack_pending |= b.ack_req;
  if (q.attr.selective_repeat) sweep(q, ctx, t);
}

// Once per burst for each QP it reached (not in ERR): the NIC's cursor and message chain, a CNP
// that is due, queued READ responses, then the NAKs, RNR NAK or ACK the burst made due.
void finish_rx(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  if (q.epsn != q.cursor) {
    ctx.cursor_update(q.flow, q.epsn);
    q.cursor = q.epsn;
  }
  if (q.resync && !q.in_send && !q.in_write) {
    if (ctx.rdma()) ctx.rdma()->roce_resync(q.flow, q.epsn, uint32_t(q.rq_head));
    q.resync = false;
  }
  if (q.cnp_due) {
    Headers h;
    h.opcode = kCnp;
    h.becn = true;
    header(q, h, ctx).dscp = uint8_t(q.dcqcn_params.cnp_dscp);
    count_tx(q, 0, t);
    q.c.cnps_sent++;
    t.cnps_sent++;
    q.cnp_due = false;
  }
  respond(q, ctx, t);
  // Selective repeat's NAKs go after the ACK (a range NAK acknowledges nothing: the requester
  // would take a hole the ACK closes for one still open), before a NAK naming nothing kept (it
  // sends again all that is not named).
  if (q.nak_pending != 0) send_sr_naks(q, ctx, t);
  if (q.nak_pending != 0) {
    // Selective repeat names no PSN it has (MSN = ePSN): everything missing goes again.
    const bool sr = q.attr.selective_repeat && q.nak_pending == kSynPsnError;
    send_ack(q, q.nak_pending, q.epsn, sr ? q.epsn : q.msn, ctx, t);
    const bool fatal = q.nak_pending == kSynInvalid || q.nak_pending == kSynAccess;
    if (q.nak_pending == kSynPsnError) {
      q.nak_sent = true;
      q.c.naks_sent++;
      t.naks_sent++;
    }
    q.nak_pending = 0;
    q.ack_pending = false;
    // An invalid request or a remote access error is fatal to the responder's QP too (an RC
    // class C error; Linux rxe does the same): ERR once the NAK is out, receives flushed.
    if (fatal) fail(q, -ECANCELED, ctx, t);
  } else if (q.rnr_code_pending != 0xFF) {
    send_ack(q, uint8_t(kSynRnr | q.rnr_code_pending), q.epsn, q.msn, ctx, t);
    q.nak_sent = true;  // no PSN-sequence NAK for the packets behind it
    q.c.rnr_naks_sent++;
    t.rnr_naks_sent++;
    q.rnr_code_pending = 0xFF;
    q.ack_pending = false;
  } else if (q.ack_pending) {
    send_due_ack(q, ctx, t);
  }
  send_sr_naks(q, ctx, t);
}

}  // namespace cleave::transport::roce
