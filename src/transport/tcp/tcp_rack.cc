// tcp_rack.cc - RACK-TLP (RFC 8985): loss detection by transmit time, with the reordering timer,
// and the tail loss probe. With SACK, RACK alone starts recovery and marks in `lost` everything
// it finds lost, which goes out before NextSeg's holes (RFC 6675); the probe also runs in
// recovery. Only with SACK; peers without it keep NewReno, DupThresh and the RTO.
#include <algorithm>

#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {
namespace {

constexpr uint64_t kTlpSlackNs = 2'000'000;

// Whether (t1, s1) went out after (t2, s2) (RFC 8985 RACK_sent_after).
bool sent_after(uint64_t t1, uint32_t s1, uint64_t t2, uint32_t s2) {
  return t1 > t2 || (t1 == t2 && seq_gt(s1, s2));
}

uint64_t min_rtt(const Conn& c) {
  return uint64_t(c.ccs.min_rtt_us) * 1000;
}

// RFC 8985 6.2 step 4: min_rtt / 4, in steps that DSACKs add, at most srtt. As Linux
// (tcp_rack_reo_wnd), none until reordering is seen once a recovery is under way or DupThresh
// segments are SACKed: then a hole is a loss, not a segment overtaken, and waiting for the
// window would cost a tick of the timer wheel (1 ms), many round trips on a short path.
uint64_t reo_wnd(const Conn& c) {
  if (!c.reord_seen && (c.in_recovery || c.sacked.bytes() >= 3ull * c.eff_mss)) return 0;
  return std::min<uint64_t>(c.reo_wnd_mult * min_rtt(c) / 4, c.rtt.srtt());
}

// Adds to `found` what of [lo, hi) (part of log entry i) no later retransmission resent.
void unsent_since(const Conn& c, size_t i, uint32_t lo, uint32_t hi, RangeSet& found) {
  for (size_t j = i + 1; j < c.xmits.n; j++) {
    const Xmit& x = c.xmits[j];
    if (!x.rxt || !seq_lt(x.start, hi) || !seq_lt(lo, x.end)) continue;
    if (seq_lt(lo, x.start)) unsent_since(c, j, lo, x.start, found);
    if (seq_lt(x.end, hi)) unsent_since(c, j, x.end, hi, found);
    return;
  }
  found.add(lo, hi);
}

// Whether a retransmission after log entry i resent byte `seq`.
bool resent_later(const Conn& c, size_t i, uint32_t seq) {
  for (size_t j = i + 1; j < c.xmits.n; j++) {
    const Xmit& x = c.xmits[j];
    if (x.rxt && seq_leq(x.start, seq) && seq_lt(seq, x.end)) return true;
  }
  return false;
}

// Adds [lo, hi) to c.lost; returns the bytes that were not there.
uint64_t add_lost(Conn& c, uint32_t lo, uint32_t hi) {
  if (!seq_lt(lo, hi)) return 0;
  const uint64_t before = c.lost.bytes();
  c.lost.add(lo, hi);
  return c.lost.bytes() - before;
}

}  // namespace

void TcpTransport::rack_sent(Conn& c, uint32_t seq, uint32_t len, bool rxt) {
  if (!c.sack_ok || len == 0) return;
  const uint32_t end = seq + len;
  if (rxt) {
    c.lost.remove(seq, end);
    for (size_t i = 0; i < c.xmits.n; i++) {
      Xmit& x = c.xmits[i];
      if (seq_lt(x.start, end) && seq_lt(seq, x.end)) x.superseded = true;
    }
  }
  c.xmits.push({seq, end, now_ns_, rxt, false, false});
}

void TcpTransport::undo_mark(Conn& c) {
  c.undo_rxt = 0;
  c.undo_marker = c.snd_una;
  c.undo_cwnd = c.ccs.cwnd;
  c.undo_ssthresh = c.ccs.ssthresh;
}

void TcpTransport::undo_dsack(Conn& c, uint32_t left, uint32_t right) {
  if (c.undo_rxt <= 0 || seq_lt(left, c.undo_marker)) return;
  c.undo_rxt -= std::min<int64_t>(right - left, c.undo_rxt);
  if (c.undo_rxt != 0) return;
  // Every resend was a duplicate: the originals all arrived (reordering, a late ACK), and no
  // loss means no reduction (Linux's tcp_try_undo_dsack). The window comes back, and recovery
  // (not the loss state after an RTO: what it resends is outstanding) ends here.
  undo(c);
}

void TcpTransport::undo_spurious_rto(Conn& c, uint32_t ts_ecr) {
  if (!c.rto_recovery || c.rto_ts == 0 || int32_t(ts_ecr - c.rto_ts) >= 0) return;
  // The ACK echoes a timestamp older than the first resend: an original arrived, and the RTO
  // was for a delay, not a loss (RFC 3522). As Linux's tcp_try_undo_loss, the window comes back
  // and what the RTO would still resend is not resent (RFC 4015: new data goes next); RACK looks
  // after any real loss among the originals.
  undo(c);
  c.rto_recovery = false;
  c.rto_ts = 0;
  c.snd_nxt = c.snd_max;
  c.high_rxt = c.snd_una;
}

void TcpTransport::undo(Conn& c) {
  c.undo_rxt = -1;
  c.ccs.cwnd = std::max(c.ccs.cwnd, c.undo_cwnd);
  c.ccs.ssthresh = std::max(c.ccs.ssthresh, c.undo_ssthresh);
  if (c.in_recovery) {
    c.in_recovery = false;
    c.lost.clear();
  }
  c.undos++;
  ctr_.undos++;
}

void TcpTransport::enter_recovery(Conn& c) {
  undo_mark(c);
  c.in_recovery = true;
  c.recover = c.snd_max;
  c.high_rxt = c.snd_una;
  // The first segment presumed lost goes at once, whatever the window (RFC 6675 4.3): the
  // first RACK found lost, or without SACK the one at snd_una.
  c.need_rxt = true;
  c.rtt_timing = false;
  c.tlp_out = false;
  wheel_.cancel(&c.tlp_timer);
  c.ccs.inflight = c.flight_size();
  c.cc->on_loss(c.ccs, now_ns_);
  c.fast_recoveries++;
  ctr_.fast_recoveries++;
}

void TcpTransport::rack_check_reordering(Conn& c, uint32_t lo, uint32_t hi) {
  if (c.reord_seen || !c.sack_ok || !seq_lt(lo, hi)) return;
  for (size_t i = 0; i < c.xmits.n; i++) {
    const Xmit& x = c.xmits[i];
    if ((x.rxt || x.superseded) && seq_lt(x.start, hi) && seq_lt(lo, x.end)) return;
  }
  c.reord_seen = true;
}

// After an ACK's SACK blocks and cumulative ACK are applied (RFC 8985 6.2 and 7.4).
void TcpTransport::rack_ack(Conn& c, uint32_t dsacks, bool progress,
                            std::optional<uint32_t> ts_ecr) {
  if (!c.sack_ok) return;
  // Step 4: a DSACK says we were fooled by reordering; widen the window once per round trip,
  // and keep it wide for 16 recoveries.
  if (dsacks != 0) {
    c.reord_seen = true;
    if (c.tlp_out) c.tlp_dsack = true;
    if (!c.dsack_round_on || seq_geq(c.snd_una, c.dsack_round)) {
      c.reo_wnd_mult = std::min<uint32_t>(c.reo_wnd_mult + 1, 64);
      c.dsack_round = c.snd_max;
      c.dsack_round_on = true;
    }
    c.reo_wnd_persist = 16;
  }
  // Step 2: the latest transmission delivered. Partly delivered entries count up to their
  // highest delivered byte. Without SACK blocks or retransmissions in the log, only entries
  // below the cumulative ACK can have been delivered, and they come first (the common ACK
  // costs the entries it acknowledges, not the whole log).
  const bool in_order = c.sacked.n == 0 && c.xmits.rxt == 0;
  // What lies below the cumulative ACK was delivered, whenever it went: the latest delivered
  // byte is never behind it. (A stale end could also fall 2^31 behind, where comparisons wrap.)
  if (seq_lt(c.rack_end_seq, c.snd_una)) c.rack_end_seq = c.snd_una;
  for (size_t i = 0; i < c.xmits.n; i++) {
    Xmit& x = c.xmits[i];
    if (x.delivered) continue;
    if (in_order && !seq_gt(c.snd_una, x.start)) break;
    const uint32_t lo = seq_max(x.start, c.snd_una);
    uint32_t hi = x.start;
    bool any = seq_gt(c.snd_una, x.start);
    if (any) hi = seq_min(c.snd_una, x.end);
    for (size_t k = 0; k < c.sacked.n; k++) {
      const SackBlock& r = c.sacked.r[k];
      if (seq_lt(r.left, x.end) && seq_lt(x.start, r.right)) {
        any = true;
        hi = seq_max(hi, seq_min(r.right, x.end));
      }
    }
    if (!any) continue;
    if (!seq_lt(lo, x.end) || c.sacked.covers(lo, x.end)) x.delivered = true;
    // Which transmission arrived is unknown when the byte was sent again (part of a TSO burst
    // resent leaves the rest the original's).
    if (x.superseded && resent_later(c, i, hi - 1)) continue;
    const uint64_t rtt = now_ns_ - x.ts;
    // Most likely the original arrived: an RTT shorter than any, or an ACK that echoes a
    // timestamp from before the retransmission (RFC 8985 6.2 step 2; Linux's
    // tcp_rack_detect_loss). Else a late original's SACK would make everything sent before the
    // retransmission look lost.
    if (x.rxt &&
        (rtt < min_rtt(c) || (ts_ecr && int32_t(*ts_ecr - uint32_t(x.ts / 1'000'000)) <= 0)))
      continue;
    if (sent_after(x.ts, hi, c.rack_xmit_ts, c.rack_end_seq)) {
      c.rack_xmit_ts = x.ts;
      c.rack_end_seq = hi;
      c.rack_rtt = rtt;
    }
  }
  while (c.xmits.n != 0 && (c.xmits[0].delivered || seq_leq(c.xmits[0].end, c.snd_una)))
    c.xmits.pop();

  // TLP (7.4): a probe that resent old data repaired a loss unless both it and the original
  // arrived. The ACK that reaches the probe's end may be the original's, with the probe's
  // DSACK (or bare duplicate ACK) still on its way: only an ACK beyond the probe's end without
  // a DSACK says the probe was needed (as Linux decides, tcp_process_tlp_ack). Then react
  // once.
  if (c.tlp_out && seq_geq(c.snd_una, c.tlp_end_seq)) {
    if (!c.tlp_rxt || c.tlp_dsack || (!progress && c.snd_una == c.tlp_end_seq)) {
      c.tlp_out = false;
    } else if (seq_gt(c.snd_una, c.tlp_end_seq)) {
      c.tlp_out = false;
      if (!c.in_recovery) {
        c.undo_rxt = -1;  // a repaired loss: nothing to undo
        // From the window, as Linux (tcp_init_cwnd_reduction): a probe goes when the sender is
        // at a tail, with little in flight, and half of that would leave a window of 2
        // segments for what comes next.
        c.ccs.inflight = c.ccs.cwnd;
        c.cc->on_loss(c.ccs, now_ns_);
        c.cc->on_recovery_end(c.ccs, now_ns_);
      }
    }
  }
  rack_detect(c);
}

// RACK_detect_loss (6.2 step 5): a transmission older than the latest delivered one is lost
// once a reordering window past its RTT has gone by; the earliest one still waiting arms the
// reordering timer.
void TcpTransport::rack_detect(Conn& c) {
  if (!c.sack_ok || c.rto_recovery || c.rack_xmit_ts == 0 || c.snd_una == c.snd_max) {
    wheel_.cancel(&c.reo_timer);
    return;
  }
  const uint64_t wnd = reo_wnd(c);
  uint64_t wait = UINT64_MAX;
  RangeSet found;
  for (size_t i = 0; i < c.xmits.n; i++) {
    const Xmit& x = c.xmits[i];
    if (x.delivered) continue;
    // Only what went out before the latest delivered byte: in the same TSO burst (one time),
    // the part below it.
    uint32_t end = x.end;
    if (!sent_after(c.rack_xmit_ts, c.rack_end_seq, x.ts, x.end)) {
      // Later entries went out later still (or, without retransmissions in the log, at the
      // same time and above).
      if (x.ts > c.rack_xmit_ts || (c.xmits.rxt == 0 && !seq_lt(x.start, c.rack_end_seq))) break;
      if (x.ts != c.rack_xmit_ts || !seq_lt(x.start, c.rack_end_seq)) continue;
      end = c.rack_end_seq;
    }
    const uint64_t due = x.ts + c.rack_rtt + wnd;
    if (due > now_ns_) {
      wait = std::min(wait, due - now_ns_);
      continue;
    }
    // Lost: what of it is neither acknowledged, SACKed, nor resent since.
    uint32_t at = seq_max(x.start, c.snd_una);
    for (size_t k = 0; k < c.sacked.n && seq_lt(at, end); k++) {
      const SackBlock& r = c.sacked.r[k];
      if (seq_leq(r.right, at)) continue;
      if (seq_geq(r.left, end)) break;
      if (seq_lt(at, r.left)) unsent_since(c, i, at, r.left, found);
      at = r.right;
    }
    if (seq_lt(at, end)) unsent_since(c, i, at, end, found);
  }
  if (found.n != 0) {
    // All of it: NextSeg resends a hole only once DupThresh segments' worth above it are
    // SACKed; RACK's time says more, and sooner. What NextSeg sends first leaves `lost`.
    uint64_t added = 0;
    for (size_t k = 0; k < found.n; k++)
      added += add_lost(c, found.r[k].left, found.r[k].right);
    const bool entered = !c.in_recovery;
    if (entered) enter_recovery(c);
    if (added != 0 || entered) {
      c.rack_losses++;
      ctr_.rack_losses++;
    }
    touch(c);
  }
  if (wait != UINT64_MAX) {
    wheel_.arm(&c.reo_timer, wait);
  } else {
    wheel_.cancel(&c.reo_timer);
  }
}

void TcpTransport::on_reo_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  c.tp->rack_detect(c);
}

// The probe timeout (7.2): 2 srtt and 2 ms, as Linux (where the round trip is tens of
// microseconds, the time a host takes to answer varies by more, and a probe at 2 srtt mostly
// repeats a segment still on its way), plus the peer's delayed ACK when one segment is in flight,
// at most until the RTO; with no probe outstanding, and not after an RTO. Also in fast recovery,
// where a lost retransmission stops the ACK clock when nothing sent after it is left to be
// SACKed.
void TcpTransport::arm_tlp(Conn& c) {
  if (!c.sack_ok || c.rto_recovery || c.tlp_out || c.persist || !c.rtt.has_sample() ||
      c.snd_una == c.snd_max || !c.rto_timer.armed()) {
    wheel_.cancel(&c.tlp_timer);
    return;
  }
  uint64_t pto = 2 * c.rtt.srtt() + kTlpSlackNs;
  if (c.snd_max - c.snd_una <= c.eff_mss) pto += uint64_t(c.st.peer_delack_ms) * 1'000'000;
  // Not after the RTO: then the probe goes in its place, a tick ahead of it.
  const uint64_t rto_left = c.rto_at > now_ns_ + tick_ns_ ? c.rto_at - now_ns_ - tick_ns_ : 0;
  if (rto_left == 0) {
    wheel_.cancel(&c.tlp_timer);
    return;
  }
  pto = std::min(pto, rto_left);
  wheel_.arm(&c.tlp_timer, pto);
}

void TcpTransport::on_tlp_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  TcpTransport& tp = *c.tp;
  if (!c.sack_ok || c.rto_recovery || c.tlp_out || c.persist || c.snd_una == c.snd_max) {
    return;
  }
  if (tp.send_tlp(c, *tp.ctx_)) {
    c.tlp_probes++;
    tp.ctr_.tlp_probes++;
    tp.arm_rto(c);  // 7.3: after the probe, the RTO
  }
}

}  // namespace cleave::transport::tcp
