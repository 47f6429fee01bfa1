// rc_requester.cc - the requester: work requests cut into PMTU packets and paced out, go-back-N
// and selective repeat's resends, ACKs, NAKs and READ responses taken in, completions in order.
#include <algorithm>

#include "rc_qp.h"

namespace cleave::transport::roce {

namespace {

int syndrome_status(uint8_t s) {
  switch (s) {
    case kSynAccess:
      return -EACCES;
    case kSynInvalid:
      return -EINVAL;
    default:
      return -EIO;
  }
}

// One packet of a SEND or WRITE (packet `k` of `w`, PSN first + k), or the READ request from
// response `k` on. `again`: selective repeat sends it again, and asks for an ACK (the gap it
// fills is acknowledged at once).
void send_packet(RcTransport::Qp& q, SendWqe& w, uint32_t k, Context& ctx, RcCounters& t,
                 bool again = false) {
  const uint32_t pmtu = q.attr.pmtu;
  Headers h;
  h.psn = psn_add(w.first_psn, k);
  if (w.kind == ReqKind::kRead) {
    h.opcode = kReadRequest;
    h.va = w.va + uint64_t(k) * pmtu;
    h.rkey = w.rkey;
    h.dma_len = w.len - std::min(w.len, k * pmtu);
    if (q.attr.selective_repeat && psn_diff(w.first_psn, q.snd_max) < 0) {
      // Asked again: only up to the next response already in.
      uint32_t n = 1;
      while (k + n < w.npkts && !bit(q.read_in, psn_add(h.psn, n)))
        n++;
      h.dma_len = std::min(h.dma_len, n * pmtu);
      // A gap below responses in, which the responder sent before: it answers such re-reads
      // in order. (Asked from where the responses stopped, it may still be sending them.)
      if (k < w.read_max) q.rereads.push({h.psn, psn_add(h.psn, n), q.snd_max});
    }
    h.ack_req = true;
    header(q, h, ctx);
    q.since_ackreq = 0;
    count_tx(q, 0, t);
    return;
  }
  const bool send = w.kind == ReqKind::kSend;
  const bool first = k == 0;
  const bool last = k + 1 == w.npkts;
  const uint32_t off = k * pmtu;
  const uint32_t len = std::min(pmtu, w.len - off);
  if (first && last) {
    h.opcode = send ? (w.imm ? kSendOnlyImm : kSendOnly) : (w.imm ? kWriteOnlyImm : kWriteOnly);
  } else if (first) {
    h.opcode = send ? kSendFirst : kWriteFirst;
  } else if (last) {
    h.opcode = send ? (w.imm ? kSendLastImm : kSendLast) : (w.imm ? kWriteLastImm : kWriteLast);
  } else {
    h.opcode = send ? kSendMiddle : kWriteMiddle;
  }
  if (!send && first) {
    h.va = w.va;
    h.rkey = w.rkey;
    h.dma_len = w.len;
  }
  h.imm = w.immv;
  h.solicited = last && w.imm;
  h.pad = uint8_t((4 - len % 4) % 4);
  h.ack_req = again || last || ++q.since_ackreq >= kAckEvery;
  if (h.ack_req) q.since_ackreq = 0;
  TxDesc& d = header(q, h, ctx);
  d.mr = w.mr;
  d.offset = w.offset + off;
  d.len = len;
  count_tx(q, len, t);
}

// Selective repeat: `psn` is to be sent again (once, however often it is named).
void queue_resend(RcTransport::Qp& q, uint32_t psn) {
  if (psn_diff(psn, q.una) < 0 || psn_diff(psn, q.snd_max) >= 0 || bit(q.queued, psn)) return;
  if (q.resend_head == q.resend.size()) {
    q.resend.clear();
    q.resend_head = 0;
  } else if (q.resend_head >= kSrWindow / 2) {  // drop what was sent, so the list stays small
    q.resend.erase(q.resend.begin(), q.resend.begin() + ptrdiff_t(q.resend_head));
    q.resend_head = 0;
  }
  set_bit(q.queued, psn, true);
  q.resend.push_back(psn);
}

// Something from `psn` on must go again: go-back-N goes back there, selective repeat sends that
// packet (a READ: the rest of it).
void go_back(RcTransport::Qp& q, uint32_t psn) {
  if (q.attr.selective_repeat) {
    queue_resend(q, psn);
  } else {
    rewind(q, psn);
  }
}

// Selective repeat: the next queued PSN still to send again, if any.
bool next_resend(RcTransport::Qp& q, uint32_t* psn) {
  while (q.resend_head < q.resend.size()) {
    const uint32_t p = q.resend[q.resend_head++];
    set_bit(q.queued, p, false);
    if (psn_diff(p, q.una) >= 0) {  // sacked ones were not queued (READs may be, by timeout)
      *psn = p;
      return true;
    }
  }
  return false;
}

// Selective repeat: whether the responder still lacks `psn` (a SEND's or WRITE's packet), or
// the requester a READ's response `psn`, as far as is known.
bool lacks(const RcTransport::Qp& q, uint32_t psn) {
  for (uint64_t i = q.sq_head; i != q.sq_tail; i++) {
    const SendWqe& w = q.sq[(i)&q.sq_mask];
    if (!w.started) break;
    if (!w.covers(psn)) continue;
    if (w.kind != ReqKind::kRead) return !bit(q.sacked, psn);
    return !w.done && psn_diff(psn, psn_add(w.first_psn, w.read_got)) >= 0 && !bit(q.read_in, psn);
  }
  return false;  // completed
}

// Selective repeat: the packets sent again before `got` was first sent (all of them: `all`)
// that the responder still lacks go again. Each is forgotten once looked at; sent again, it is
// noted anew.
void resend_lost_again(RcTransport::Qp& q, uint32_t got, bool all) {
  while (q.again.n != 0) {
    if (!all && psn_diff(got, q.again.at(0).mark) < 0) break;
    const RcTransport::Qp::Again a = q.again.pop();
    if (lacks(q, a.psn)) queue_resend(q, a.psn);  // (not when it arrived since)
  }
}

// Selective repeat: READ response `psn` of `w` is in. The responder answers in order, so the
// re-reads that went before the one that asked for it, or before `w` was first asked for, have
// been answered: what they still lack from was lost again, and is asked for once more. Each is
// forgotten once looked at; asked for again, it is noted anew.
void reread_lost_again(RcTransport::Qp& q, const SendWqe& w, uint32_t psn) {
  uint32_t passed = 0;
  for (uint32_t i = q.rereads.n; i-- > 0;) {
    const RcTransport::Qp::Reread& r = q.rereads.at(i);
    if (psn_diff(psn, r.from) >= 0 && psn_diff(psn, r.to) < 0) {
      passed = i;
      break;
    }
  }
  while (passed < q.rereads.n && psn_diff(w.first_psn, q.rereads.at(passed).mark) >= 0)
    passed++;
  for (; passed != 0; passed--) {
    const RcTransport::Qp::Reread r = q.rereads.pop();
    for (uint32_t p = r.from; p != r.to; p = psn_add(p, 1)) {
      if (lacks(q, p)) {
        queue_resend(q, p);
        break;
      }
    }
  }
}

}  // namespace

// Go back to `psn` (go-back-N): the request holding it is sent again from there.
void rewind(RcTransport::Qp& q, uint32_t psn) {
  uint64_t i = q.sq_head;
  for (; i != q.sq_tail; i++) {
    SendWqe& w = q.sq[(i)&q.sq_mask];
    if (!w.started) break;
    if (w.done) continue;
    if (!w.covers(psn) && psn_diff(psn, w.first_psn) >= 0) continue;
    // The first request at or after psn (psn lies in it, or before it: a READ's start).
    uint32_t k = w.covers(psn) ? uint32_t(psn_diff(psn, w.first_psn)) : 0;
    if (w.kind == ReqKind::kRead) k = std::max(k, w.read_got);
    q.send_wqe = i;
    q.send_pkt = k;
    q.snd_nxt = psn_add(w.first_psn, k);
    return;
  }
  // Past everything sent (an ACK for all of it overtook a rewind): new requests go on from psn.
  q.send_wqe = i;
  q.send_pkt = 0;
  q.snd_nxt = psn;
}

// Selective repeat: every PSN in [from, to) the responder does not have is sent again. A READ
// is one request: its first PSN stands for all of them; after a timeout (`all`) a READ still
// missing responses is asked again even when the responder has its request. `reads_only`: the
// READs' only.
void queue_holes(RcTransport::Qp& q, uint32_t from, uint32_t to, bool all, bool reads_only) {
  for (uint64_t i = q.sq_head; i != q.sq_tail; i++) {
    const SendWqe& w = q.sq[(i)&q.sq_mask];
    if (!w.started || psn_diff(w.first_psn, to) >= 0) break;
    if (psn_diff(w.last_psn(), from) < 0) continue;
    if (w.kind == ReqKind::kRead) {
      // Its first missing response: asked for when the responder lacks the request, or (after
      // a timeout) when the responses stopped; then every other gap below the furthest
      // response in.
      const uint32_t missing = psn_add(w.first_psn, w.read_got);
      if (!w.done && psn_diff(missing, from) >= 0 && psn_diff(missing, to) < 0 &&
          (all || !bit(q.sacked, w.first_psn))) {
        queue_resend(q, missing);
        for (uint32_t k = w.read_got + 1; all && k < w.read_max; k++) {
          const uint32_t p = psn_add(w.first_psn, k);
          if (!bit(q.read_in, p) && bit(q.read_in, psn_add(p, kPsnMask))) queue_resend(q, p);
        }
      }
      continue;
    }
    if (reads_only) continue;
    const uint32_t a = psn_diff(w.first_psn, from) >= 0 ? w.first_psn : from;
    for (uint32_t p = a; psn_diff(p, to) < 0 && psn_diff(p, w.last_psn()) <= 0; p = psn_add(p, 1)) {
      if (!bit(q.sacked, p)) queue_resend(q, p);
    }
  }
}

// Selective repeat's timeout: the first unacknowledged packet and the last one sent go again
// (the last, past a lost tail, is NAKed naming it and shows the holes), and the packets sent
// again and still missing; not the packets in flight between, nor the holes no NAK has shown
// yet. Every READ short of responses asks again (no response came for an RTO: none is coming).
void resend_on_timeout(RcTransport::Qp& q) {
  q.rereads.n = 0;  // asked for again below, and noted anew
  queue_holes(q, q.una, q.snd_max, true, true);
  queue_holes(q, q.una, psn_add(q.una, 1), true);
  const uint32_t last = psn_add(q.snd_max, kPsnMask);
  queue_holes(q, last, q.snd_max, true);
  resend_lost_again(q, 0, true);
}

namespace {

// Selective repeat lets READs run past the window while responses are missing below: their
// responses are kept past a gap over kSrReadWindow PSNs, and max_rd_atomic bounds the READs
// still missing some. So a READ waiting for a lost response holds up neither the READs behind it
// nor the news that what was asked for again was lost again (their responses bring it).
bool read_fits(const RcTransport::Qp& q, const SendWqe& w) {
  if (!q.attr.selective_repeat || w.kind != ReqKind::kRead) return false;
  const uint32_t n = w.started ? w.npkts : packets(w.len, q.attr.pmtu);
  return psn_diff(psn_add(q.snd_nxt, n), q.una) <= int32_t(kSrReadWindow);
}

// READ `w` no longer counts against max_rd_atomic, and the NIC lets go of its sink (late copies
// of a response go to the copy path, which drops them).
void read_release(RcTransport::Qp& q, SendWqe& w, Context& ctx) {
  if (!w.read_counted) return;
  w.read_counted = false;
  q.reads_out--;
  if (ctx.rdma()) ctx.rdma()->read_retire(q.flow, w.first_psn);
}

// Every response of READ `w` is in; it completes in order, but is let go at once: the
// responder is done with it too (it answers a re-read only with responses it had sent before).
void read_done(RcTransport::Qp& q, SendWqe& w, Context& ctx) {
  w.done = true;
  read_release(q, w, ctx);
}

}  // namespace

// Sends what the queues, the window, the pacer and the READ limit allow.
void pump(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  if (q.attr.state != QpState::kRts || q.rnr_until != 0) return;
  const uint64_t now = ctx.now_ns();
  // Selective repeat: what was lost goes first.
  uint32_t p = 0;
  while (q.attr.selective_repeat && q.resend_head < q.resend.size() && pace(q, now) &&
         next_resend(q, &p)) {
    for (uint64_t i = q.sq_head; i != q.sq_tail; i++) {
      SendWqe& w = q.sq[(i)&q.sq_mask];
      if (!w.started) break;
      if (!w.covers(p)) continue;
      uint32_t k = uint32_t(psn_diff(p, w.first_psn));
      if (w.kind == ReqKind::kRead) {
        if (w.done) break;
        k = std::max(k, w.read_got);
      }
      send_packet(q, w, k, ctx, t, true);
      if (w.kind != ReqKind::kRead) q.again.push({p, q.snd_max});  // noted: Qp::again
      spend(q, w.kind == ReqKind::kRead ? 0 : std::min(q.attr.pmtu, w.len - k * q.attr.pmtu), now);
      q.c.retransmits++;
      t.retransmits++;
      const uint32_t timed = psn_add(q.rtt_end, kPsnMask);
      if (timed == p || (w.kind == ReqKind::kRead && w.covers(timed))) {
        q.timing = false;  // the timed packet goes again: no sample (Karn)
      }
      break;
    }
    if (q.timer_ns == 0 && q.attr.timeout != 0) q.timer_ns = now + rto_ns(q);
  }
  while (q.send_wqe != q.sq_tail) {
    SendWqe& w = q.sq[(q.send_wqe) & q.sq_mask];
    if (psn_diff(q.snd_nxt, q.una) >= int32_t(kMaxInflight) && !read_fits(q, w)) break;
    if (!pace(q, now)) break;
    if (!w.started) {
      w.started = true;
      w.first_psn = q.snd_nxt;
      w.npkts = packets(w.len, q.attr.pmtu);
    }
    const bool again = psn_diff(q.snd_nxt, q.snd_max) < 0;
    if (w.kind == ReqKind::kRead) {
      if (w.done) {  // going back over a READ whose responses all came: nothing to ask
        q.snd_nxt = psn_add(w.first_psn, w.npkts);
        q.send_wqe++;
        q.send_pkt = 0;
        continue;
      }
      q.send_pkt = std::max(q.send_pkt, w.read_got);  // only the responses still missing
      if (!w.read_counted) {
        if (q.reads_out >= q.attr.max_rd_atomic) break;
        q.reads_out++;
        w.read_counted = true;
        if (ctx.rdma()) ctx.rdma()->read_post(q.flow, w.first_psn, w.mr, w.offset, w.len);
      }
      send_packet(q, w, q.send_pkt, ctx, t);
      spend(q, 0, now);
      if (!again && !q.timing) {  // timed to its first response, not its last
        q.timing = true;
        q.rtt_end = psn_add(w.first_psn, 1);
        q.rtt_sent_ns = now;
      }
      q.snd_nxt = psn_add(w.first_psn, w.npkts);
      q.send_wqe++;
      q.send_pkt = 0;
    } else {
      send_packet(q, w, q.send_pkt, ctx, t);
      spend(q, std::min(q.attr.pmtu, w.len - q.send_pkt * q.attr.pmtu), now);
      q.snd_nxt = psn_add(q.snd_nxt, 1);
      if (++q.send_pkt == w.npkts) {
        q.send_wqe++;
        q.send_pkt = 0;
      }
    }
    if (again) {
      q.c.retransmits++;
      t.retransmits++;
      q.timing = false;  // going back: Karn's rule
    } else if (!q.timing) {
      q.timing = true;
      q.rtt_end = q.snd_nxt;
      q.rtt_sent_ns = now;
    }
    if (psn_diff(q.snd_nxt, q.snd_max) > 0) q.snd_max = q.snd_nxt;
    if (q.timer_ns == 0 && q.attr.timeout != 0) q.timer_ns = now + rto_ns(q);
  }
}

// Completes finished requests from the oldest, in order.
void complete(RcTransport::Qp& q, Context& ctx) {
  while (q.sq_head != q.sq_tail) {
    SendWqe& w = q.sq[(q.sq_head) & q.sq_mask];
    if (!w.started) break;
    if (w.kind == ReqKind::kRead) {
      if (!w.done) break;
      read_release(q, w, ctx);
    } else if (psn_diff(w.last_psn(), q.una) >= 0) {
      break;
    }
    ctx.event({q.flow, done_kind(w.kind), 0, w.len, 0, w.wr_id});
    q.sq_head++;
    if (q.sq_head > q.send_wqe) {  // completed while being resent (an ACK overtook a rewind)
      q.send_wqe = q.sq_head;
      q.send_pkt = 0;
    }
  }
}

namespace {

// Everything before `next` is acknowledged. A READ whose responses stop short of it is missing
// some: the acknowledgment stops there and the READ is asked again from its first missing
// response. A READ from `next` on whose responses all came (before those of an earlier one
// that was missing some) acknowledges itself too. Returns true on progress.
bool ack_upto(RcTransport::Qp& q, uint32_t next, Context& ctx) {
  if (psn_diff(next, q.snd_max) > 0) return false;  // acknowledges what was never sent
  // What the responder's ACKs and NAKs said it has, though a READ missing responses held una
  // back then: an ACK may overtake a READ's responses (they take other paths when sprayed),
  // and none may come again once the READ is done.
  if (psn_diff(q.peer_epsn, next) > 0) next = q.peer_epsn;
  for (uint64_t i = q.sq_head; i != q.sq_tail; i++) {
    SendWqe& w = q.sq[(i)&q.sq_mask];
    if (!w.started || psn_diff(w.first_psn, next) > 0) break;
    if (w.kind == ReqKind::kRead && w.done) {
      const uint32_t end = psn_add(w.last_psn(), 1);
      if (psn_diff(end, next) > 0) next = end;
    } else if (w.kind == ReqKind::kRead) {
      const uint32_t missing = psn_add(w.first_psn, w.read_got);
      if (psn_diff(next, missing) > 0) {
        next = missing;
        // (Selective repeat asked for gaps below the furthest response in as they showed. A QP
        // that tolerates reordering does not take this for loss: its responses take other
        // paths than the ACK, which may overtake them; ask_read_gaps and the timeout ask.)
        if (w.read_retry != missing + 1 && w.read_got >= w.read_max && q.reorder == 1) {
          w.read_retry = missing + 1;
          go_back(q, missing);
        }
      }
      break;
    }
  }
  if (psn_diff(next, q.una) <= 0) return false;
  if (q.attr.selective_repeat) {
    for (uint32_t p = q.una; p != next; p = psn_add(p, 1))
      set_bit(q.sacked, p, false);  // the bits are reused for PSNs kSrWindow later
  }
  q.una = next;
  // peer_epsn stays in [una, snd_max], never 2^23 PSNs stale (READ responses move una alone).
  if (psn_diff(q.una, q.peer_epsn) > 0) q.peer_epsn = q.una;
  if (!q.outstanding()) q.again.n = q.rereads.n = 0;
  if (q.timing && psn_diff(q.una, q.rtt_end) >= 0) rtt_sample(q, ctx.now_ns());
  // Acknowledged while being sent again (an ACK that overtook a rewind): resume past it.
  if (psn_diff(q.una, q.snd_nxt) > 0) rewind(q, q.una);
  q.retries_left = q.attr.retry_cnt;
  q.rnr_left = q.attr.rnr_retry;
  q.backoff = 0;
  complete(q, ctx);
  q.timer_ns = q.outstanding() && q.attr.timeout != 0 ? ctx.now_ns() + rto_ns(q) : 0;
  return true;
}

// An ACK's or a NAK's word on the responder's ePSN (a later one than known, of what was sent).
void note_peer_epsn(RcTransport::Qp& q, uint32_t epsn) {
  if (psn_diff(epsn, q.peer_epsn) > 0 && psn_diff(epsn, q.snd_max) <= 0) q.peer_epsn = epsn;
}

// Selective repeat: a NAK says the responder has PSNs up to `got` (and not those between the last
// NAK and `below`). The holes below it go again, once, when `reorder` packets sent after them are
// known to have arrived (RFC 6675's IsLost, in packets: the sacked PSNs from the K-th one down
// from `got`, a READ request counting once however many PSNs it spans; K = 1: `got` itself, the
// holes go at once). A QP whose packets take several paths (sprayed, or over a fabric that
// reorders) so gives a hole that long to fill; the holes nearer `got` wait for a later NAK, a
// tail for the timeout. So do the packets sent again and still missing, and a READ request
// (one past the responder's ePSN that no NAK named never came).
void take_holes(RcTransport::Qp& q, uint32_t got, uint32_t below) {
  uint32_t from = psn_diff(q.recover_next, q.peer_epsn) > 0 ? q.recover_next : q.peer_epsn;
  uint32_t kth = got;
  if (q.reorder > 1) {
    uint32_t seen = 0;
    const int32_t span = std::min(psn_diff(got, from), int32_t(kSrWindow) - 1);
    int32_t i = 0;
    for (; i <= span; i++) {  // the sacked set covers a window of PSNs
      kth = psn_add(got, kPsnMask + 1 - uint32_t(i));
      if (bit(q.sacked, kth) && ++seen == q.reorder) break;
    }
    if (i > span) return;  // fewer than K known to have arrived past the holes
  }
  queue_holes(q, from, psn_diff(kth, below) < 0 ? kth : below);
  if (psn_diff(psn_add(kth, 1), q.recover_next) > 0) q.recover_next = psn_add(kth, 1);
  resend_lost_again(q, kth, false);
}

// Selective repeat: response `k` of READ `w` came; each gap at least `reorder` responses below it
// (1: any gap it shows) that was not asked for yet is asked for again, from its first response
// missing up to the next one in.
void ask_read_gaps(RcTransport::Qp& q, SendWqe& w, uint32_t k, RcCounters& t) {
  const uint32_t upto = k + 1 >= q.reorder ? k + 1 - q.reorder : 0;
  for (uint32_t i = std::max(w.read_asked, w.read_got); i < upto; i++) {
    const uint32_t p = psn_add(w.first_psn, i);
    if (bit(q.read_in, p) || (i != w.read_got && !bit(q.read_in, psn_add(p, kPsnMask)))) continue;
    q.c.naks_received++;
    t.naks_received++;
    queue_resend(q, p);
  }
  w.read_asked = std::max(w.read_asked, upto);
}

}  // namespace

// A response at the requester, in RTS: an ACK or NAK (cumulative acknowledgment, go-back-N or
// selective repeat's resends, RNR waits, errors), or a READ response (placed, in order or kept
// past a gap).
void on_response(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t) {
  const uint64_t now = ctx.now_ns();
  const Headers& b = x.b;
  const OpInfo o = op_info(b.opcode);
  if (o.kind == OpKind::kReadResponse) {
    // The READ it answers, and in order?
    SendWqe* w = nullptr;
    for (uint64_t i = q.sq_head; i != q.sq_tail; i++) {
      SendWqe& c = q.sq[(i)&q.sq_mask];
      if (!c.started) break;
      if (c.kind == ReqKind::kRead && c.covers(b.psn) && !c.done) {
        w = &c;
        break;
      }
    }
    if (w == nullptr) return;  // a late duplicate
    const uint32_t expect = psn_add(w->first_psn, w->read_got);
    const bool sr = q.attr.selective_repeat;
    const int32_t ahead = psn_diff(b.psn, expect);
    if (ahead < 0 || (ahead > 0 && (!sr || bit(q.read_in, b.psn) ||
                                    psn_diff(b.psn, q.una) >= int32_t(kSrReadWindow)))) {
      // A duplicate, or (go-back-N) past a gap: dropped.
      if (ahead > 0 && !sr && w->read_retry != expect + 1) {
        w->read_retry = expect + 1;  // a gap: ask again from the first missing response
        q.c.naks_received++;
        t.naks_received++;
        go_back(q, expect);
      }
      return;
    }
    // Selective repeat keeps a response past a gap too (in `read_in`). Each carries
    // PMTU bytes but the READ's last; the last ends with it. A re-asked range (selective
    // repeat) may end anywhere.
    const uint32_t k = uint32_t(psn_diff(b.psn, w->first_psn));
    const bool end = k + 1 == w->npkts;
    const uint32_t want = std::min(q.attr.pmtu, w->len - std::min(w->len, k * q.attr.pmtu));
    if (x.len != want || (end && !o.last) || (o.last && !end && !sr)) {
      fail(q, -EIO, ctx, t);
      return;
    }
    if (!land(q, x, w->mr, w->offset + uint64_t(k) * q.attr.pmtu, ctx, t)) {
      fail(q, -EFAULT, ctx, t);
      return;
    }
    if (sr) {
      // Responses still come, so the ones asked for again are queued behind them (another
      // READ's, or past a gap): no timeout yet. A gap this one reveals is asked for once,
      // at once. A response to a READ asked for after something was asked again comes after
      // that (the responder answers in order): what is still missing of it was lost again.
      if (q.timer_ns != 0) q.timer_ns = now + rto_ns(q);
      reread_lost_again(q, *w, b.psn);
      ask_read_gaps(q, *w, k, t);
      w->read_max = std::max(w->read_max, k + 1);
    }
    if (ahead > 0) {
      set_bit(q.read_in, b.psn, true);
      return;
    }
    w->read_got++;
    while (sr && w->read_got < w->npkts && bit(q.read_in, psn_add(w->first_psn, w->read_got)))
      w->read_got++;
    if (w->read_got == w->npkts) read_done(q, *w, ctx);
    // Responses acknowledge everything before them; the last one its READ too.
    ack_upto(q, psn_add(w->first_psn, w->done ? w->npkts : w->read_got - 1), ctx);
    complete(q, ctx);
    return;
  }
  q.c.acks_received++;
  t.acks_received++;
  if (syndrome_is_ack(b.syndrome)) {
    note_peer_epsn(q, psn_add(b.psn, 1));
    ack_upto(q, psn_add(b.psn, 1), ctx);
  } else if (syndrome_is_rnr(b.syndrome)) {
    q.c.rnr_naks_received++;
    t.rnr_naks_received++;
    ack_upto(q, b.psn, ctx);
    if (q.attr.rnr_retry != 7) {
      if (q.rnr_left == 0) {
        fail(q, -EBUSY, ctx, t);
        return;
      }
      q.rnr_left--;
    }
    go_back(q, b.psn);
    q.rnr_until = now + rnr_timer_ns(b.syndrome & 0x1F);
    q.timer_ns = 0;
  } else if (b.syndrome == kSynPsnError && q.attr.selective_repeat && b.solicited) {
    // Selective repeat's range NAK (SE set): the responder keeps PSNs [BTH PSN, MSN field] past
    // a gap, a run that grew from one a NAK named. The PSNs between the last one named and
    // these it lacks: they go again, once.
    q.c.naks_received++;
    t.naks_received++;
    const uint32_t hi = b.msn;
    const uint32_t lo = psn_diff(b.psn, q.una) > 0 ? b.psn : q.una;
    if (psn_diff(hi, lo) >= 0 && psn_diff(hi, lo) < int32_t(kSrWindow) &&
        psn_diff(hi, q.snd_max) < 0) {
      for (uint32_t p = lo; p != psn_add(hi, 1); p = psn_add(p, 1))
        set_bit(q.sacked, p, true);
      take_holes(q, hi, lo);
    }
  } else if (b.syndrome == kSynPsnError) {
    q.c.naks_received++;
    t.naks_received++;
    note_peer_epsn(q, b.psn);
    ack_upto(q, b.psn, ctx);
    if (q.attr.selective_repeat) {
      // The responder has everything before the NAK's PSN, and the PSN its MSN field names
      // (our selective-repeat NAK): the holes below that one go again, each once per NAK
      // that passes it.
      const uint32_t got = b.msn;
      if (got == b.psn) {
        // It names nothing it has: it dropped what followed the gap (a SEND's packets the
        // NIC could not place), so all it lacks goes again.
        queue_holes(q, b.psn, q.snd_max);
        q.recover_next = q.snd_max;
      } else if (psn_diff(got, q.una) >= 0 && psn_diff(got, q.snd_max) < 0) {
        set_bit(q.sacked, got, true);
        take_holes(q, got, got);
      }
    } else if (psn_diff(b.psn, q.snd_nxt) < 0) {
      rewind(q, b.psn);
    }
  } else {
    ack_upto(q, b.psn, ctx);
    fail(q, syndrome_status(b.syndrome), ctx, t);
  }
}

}  // namespace cleave::transport::roce
