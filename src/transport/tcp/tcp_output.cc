// tcp_output.cc - the send path: data within the congestion and peer windows as header-only TSO
// descriptors over app memory, SACK-based retransmission (RFC 6675 NextSeg), NewReno partial-ACK
// retransmission, FIN; and the pure segments: ACK with SACK/DSACK, SYN, SYN-ACK, RST, probes.
#include <algorithm>

#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {
namespace {

constexpr uint32_t kMaxTso = 65536 - 1024;  // payload per descriptor, well inside the NIC's 64 KB

// What of `range` bytes to send in one descriptor with `room` left in the window: whole
// segments unless the range ends first (0 when the room is short of one). A runt in the middle
// of the data is one packet more for the same bytes, and once lost, a hole shorter than a
// segment.
uint32_t segments(const Conn& c, uint64_t range, uint64_t room) {
  uint64_t n = std::min<uint64_t>({range, room, kMaxTso});
  if (n < range) n -= n % c.eff_mss;
  return uint32_t(n);
}

// The window field we advertise, and the right edge it promises (rcv_adv: the furthest yet).
//
// Scaled, the posted space is rounded up to the scale unit (as Linux's ALIGN in
// __tcp_select_window): rounded down, the last bytes of the posted buffers would be announced only
// by the ACK of the data before them, which a delayed ACK holds for 40 ms (tcp_sim_loss showed
// those waits), and a buffer that completes only when full could wait for them. What arrives past
// the buffers is trimmed on input. An edge promised before is kept, rounded down: the window may
// shrink by less than a unit (RFC 7323 appendix F; Linux's tcp_shrink_window). Rounded up, as
// RFC 9293's "do not shrink" would have it, the kept edge moved up to a unit further with every ACK
// that did not end on a unit, and crept far past the buffers, where the NIC can place nothing.
uint16_t advertise(Conn& c, bool syn) {
  const uint32_t space = std::min(c.rcv_space(), 1u << 30);
  if (syn) {
    const uint32_t w = std::min<uint32_t>(space, 0xFFFF);
    c.rcv_adv = c.rcv_nxt + w;
    return uint16_t(w);
  }
  const uint32_t unit = (1u << c.rcv_wscale) - 1;
  const uint32_t kept = seq_gt(c.rcv_adv, c.rcv_nxt) ? c.rcv_adv - c.rcv_nxt : 0;
  const uint32_t w = uint32_t(std::min<uint64_t>(
      std::max<uint64_t>((uint64_t(space) + unit) >> c.rcv_wscale, kept >> c.rcv_wscale), 0xFFFF));
  c.rcv_adv = seq_max(c.rcv_adv, c.rcv_nxt + (w << c.rcv_wscale));
  return uint16_t(w);
}

// The ECE bit our ACKs carry: sticky until CWR (RFC 3168), or the last CE seen (DCTCP).
uint8_t ece_flag(const Conn& c) {
  if (!c.ecn_ok) return 0;
  return (c.dctcp_echo ? c.last_ce : c.ce_pending) ? kEce : 0;
}

}  // namespace

// Fills the common part of a header and finishes the descriptor; the ACK it carries resets the
// delayed-ACK state.
static void put_header(TcpTransport& t, Conn& c, TxDesc& d, BuildSpec& b) {
  b.src_port = c.tuple.local.port;
  b.dst_port = c.tuple.remote.port;
  if ((b.flags & kAck) != 0) {
    b.ack = c.rcv_nxt;
    c.last_ack_sent = c.rcv_nxt;
    c.unacked_segs = 0;
    c.ack_now = false;
    t.wheel_.cancel(&c.delack_timer);
  }
  if (c.ts_ok && (b.flags & kRst) == 0) {
    b.ts = true;
    b.ts_val = t.ts_now();
    b.ts_ecr = c.ts_recent;
  }
  if ((c.msg_ok || b.msg) && (b.flags & kRst) == 0) {
    // Message mode: every segment carries our credit (the SYN offers the option with it).
    b.msg = true;
    b.msg_limit = c.msg_limit();
    c.msg_limit_adv = b.msg_limit;
  }
  d.flow = c.flow;
  d.l4_len = uint8_t(build(b, d.l4.data()));
  t.ctr_.segs_out++;
}

void TcpTransport::send_ack(Conn& c, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  BuildSpec b;
  b.seq = c.snd_nxt;
  b.flags = kAck | ece_flag(c);
  b.window = advertise(c, false);
  // SACK blocks: a DSACK first, then the block the latest segment joined, then the others
  // (RFC 2018 4, RFC 2883).
  SackBlock blocks[kMaxSackBlocks];
  uint8_t n = 0;
  if (c.sack_ok) {
    if (c.dsack_pending) blocks[n++] = c.dsack;
    const SackBlock* last = c.ooo.find(c.last_ooo.left);
    if (last != nullptr) blocks[n++] = *last;
    for (size_t i = c.ooo.n; i-- > 0 && n < kMaxSackBlocks;) {
      if (&c.ooo.r[i] != last) blocks[n++] = c.ooo.r[i];
    }
    b.nsack = n;
    b.sack = blocks;
    c.dsack_pending = false;
  }
  put_header(*this, c, d, b);
}

void TcpTransport::send_syn(Conn& c, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  BuildSpec b;
  b.seq = c.iss;
  b.mss = c.st.mss;
  b.window = advertise(c, true);
  if (c.state == State::kSynSent) {
    // Our offer: nothing is negotiated yet, so the options come from the settings.
    b.flags = kSyn | (c.st.requests_ecn() ? kEce | kCwr : 0);
    b.wscale_opt = true;
    b.wscale = c.st.wscale;
    b.sack_permitted = c.st.sack;
    b.ts = c.st.timestamps;
    b.ts_val = ts_now();
    b.msg = c.st.message;
  } else {
    // The answer: only what the peer offered.
    b.flags = kSyn | kAck | (c.ecn_ok ? kEce : 0);
    b.wscale_opt = c.rcv_wscale != 0 || c.snd_wscale != 0;
    b.wscale = c.rcv_wscale;
    b.sack_permitted = c.sack_ok;
  }
  put_header(*this, c, d, b);
  if (c.backoff == 0) {
    c.rtt_timing = true;
    c.rtt_seq = c.iss + 1;
    c.rtt_start = now_ns_;
  }
  c.snd_nxt = c.iss + 1;
  c.snd_max = seq_max(c.snd_max, c.iss + 1);
}

void TcpTransport::send_rst(Conn& c, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  BuildSpec b;
  b.seq = c.snd_nxt;
  b.flags = kRst | kAck;
  put_header(*this, c, d, b);
  ctr_.rst_out++;
}

// A descriptor of payload [seq, seq + len) from the send queue; len is cut at the chunk's end.
// Returns the bytes it covers.
static uint32_t send_data(TcpTransport& t, Conn& c, Context& ctx, uint32_t seq, uint32_t len,
                          bool retransmit) {
  // Find the chunk holding seq: from the hint when it is at or before seq, else from the front.
  size_t i = c.tx_hint < c.sendq.size() && seq_leq(c.sendq[c.tx_hint].seq, seq) ? c.tx_hint : 0;
  while (i < c.sendq.size() && seq_leq(c.sendq[i].seq + c.sendq[i].len, seq))
    i++;
  if (i == c.sendq.size()) return 0;
  const SendChunk& k = c.sendq[i];
  const uint32_t at = seq - k.seq;
  len = std::min(len, k.len - at);
  if (!retransmit) c.tx_hint = i;

  TxDesc& d = ctx.tx_next();
  BuildSpec b;
  b.seq = seq;
  b.flags = kAck | ece_flag(c);
  if (at + len == k.len) b.flags |= kPsh;
  if (!retransmit && c.cwr_pending) {
    b.flags |= kCwr;
    c.cwr_pending = false;
  }
  b.window = advertise(c, false);
  if (c.msg_ok) {
    // The chunk is one message, and this descriptor lies inside it.
    b.msg_data = true;
    b.msg_no = k.msg_no;
    b.msg_start = k.seq;
    b.msg_len = k.len;
  }
  put_header(t, c, d, b);
  d.mr = k.mr;
  d.offset = k.offset + at;
  d.len = len;
  d.mss = len > c.eff_mss ? c.eff_mss : 0;
  d.ecn = c.ecn_ok && !retransmit ? 2 : 0;  // ECT(0); never on retransmissions (RFC 3168 6.1.5)
  t.ctr_.data_segs_out++;
  c.bytes_sent += len;
  t.rack_sent(c, seq, len, retransmit);
  if (retransmit) {
    if (c.undo_rxt >= 0) c.undo_rxt += len;
    t.ctr_.retransmits++;
    c.retransmits++;
    c.rtt_timing = false;  // Karn
  } else if (!c.rtt_timing) {
    c.rtt_timing = true;
    c.rtt_seq = seq + len;
    c.rtt_start = t.now_ns_;
  }
  return len;
}

// RACK's lost ranges (tcp_rack.cc) within cwnd: those below HighRxt (lost retransmissions), or
// with `tail` all of them, after NextSeg has filled the holes below the highest SACK.
static uint64_t resend_lost(TcpTransport& t, Conn& c, Context& ctx, uint64_t pipe, bool tail) {
  const uint64_t cwnd = c.ccs.cwnd;
  while (c.lost.n != 0 && pipe < cwnd) {
    const SackBlock r = c.lost.r[0];
    if (!tail && !seq_lt(r.left, c.high_rxt)) break;
    const uint32_t want = segments(c, r.right - r.left, cwnd - pipe);
    if (want == 0) break;
    const uint32_t n = send_data(t, c, ctx, r.left, want, true);
    if (n == 0) {
      c.lost.remove(r.left, r.right);  // no longer queued
      continue;
    }
    c.lost.remove(r.left, r.left + n);
    if (tail) c.high_rxt = seq_max(c.high_rxt, r.left + n);
    pipe += n;
  }
  return pipe;
}

void TcpTransport::output(Conn& c, Context& ctx) {
  const bool can_send = c.state == State::kEstablished || c.state == State::kCloseWait ||
                        c.state == State::kFinWait1 || c.state == State::kClosing ||
                        c.state == State::kLastAck;
  if (!can_send) return;
  uint64_t pipe = c.inflight();
  const uint64_t cwnd = c.ccs.cwnd;
  // Without SACK information (none negotiated, or a peer that sends none), each duplicate ACK
  // is a segment that left the network (RFC 6582 3.2 step 3).
  if (c.in_recovery && c.sacked.n == 0) {
    const uint64_t gone = uint64_t(c.dupacks) * c.eff_mss;
    pipe = pipe > gone ? pipe - gone : 0;
  }

  // 1. Retransmissions in fast recovery: first the first segment RACK found lost, or the one at
  // snd_una (on entry, and on each
  // partial ACK without SACK information), then NextSeg (RFC 6675 4): the holes above HighRxt
  // below the highest SACK.
  if (c.need_rxt) {
    c.need_rxt = false;
    const uint32_t at = c.lost.n != 0 ? c.lost.r[0].left : c.snd_una;
    // At most a segment, and none of what the peer SACKed: a SACKed byte sent again is wasted,
    // and its SACK would tell RACK the retransmission arrived before it has.
    uint32_t len = c.eff_mss;
    if (c.lost.n != 0) len = std::min(len, c.lost.r[0].right - at);
    for (size_t i = 0; i < c.sacked.n; i++) {
      if (seq_gt(c.sacked.r[i].left, at)) {
        len = std::min(len, c.sacked.r[i].left - at);
        break;
      }
    }
    const uint32_t n = send_data(*this, c, ctx, at, len, true);
    if (n != 0) {
      c.high_rxt = seq_max(c.high_rxt, at + n);
      pipe += n;
    }
  }
  if (c.in_recovery) pipe = resend_lost(*this, c, ctx, pipe, false);
  if (c.in_recovery && c.sacked.n != 0) {
    const uint64_t sacked = c.sacked.bytes();
    while (pipe < cwnd) {
      uint32_t at = seq_max(c.high_rxt, c.snd_una);
      uint32_t hole_end = at;
      uint64_t below = 0;  // SACKed bytes below the hole
      for (size_t i = 0; i < c.sacked.n; i++) {
        const SackBlock& r = c.sacked.r[i];
        if (seq_leq(r.right, at)) {
          below += r.right - r.left;
          continue;
        }
        if (seq_leq(r.left, at)) {
          below += r.right - r.left;
          at = r.right;
          continue;
        }
        hole_end = r.left;
        break;
      }
      // IsLost (RFC 6675 4): DupThresh segments' worth SACKed above it; a hole with less above
      // may be reordering, and RACK's timer decides.
      if (!seq_lt(at, hole_end) || sacked - below < 3ull * c.eff_mss) break;
      const uint64_t room = cwnd - pipe;
      const uint32_t want = segments(c, hole_end - at, room);
      if (want == 0) break;
      const uint32_t n = send_data(*this, c, ctx, at, want, true);
      if (n == 0) break;
      c.high_rxt = at + n;
      pipe += n;
    }
  }
  if (c.in_recovery) pipe = resend_lost(*this, c, ctx, pipe, true);

  // 2. New data, and after an RTO the old data again from snd_nxt (skipping SACKed ranges).
  const uint32_t wnd_right = seq_min(c.snd_una + c.snd_wnd, c.msg_send_right());
  while (true) {
    if (c.rto_recovery) {
      if (const SackBlock* r = c.sacked.find(c.snd_nxt)) c.snd_nxt = r->right;
    }
    const uint32_t limit = seq_min(c.snd_end, wnd_right);
    if (!seq_lt(c.snd_nxt, limit) || pipe >= cwnd) break;
    // Whole segments where the window cuts, up to the peer's right edge.
    uint32_t n = segments(c, limit - c.snd_nxt, cwnd - pipe);
    if (n == 0) n = uint32_t(std::min<uint64_t>(cwnd - pipe, kMaxTso));  // room for a runt only
    // Sender SWS avoidance: a runt while more waits, with data in flight, waits for room.
    if (n < c.eff_mss && n < c.snd_end - c.snd_nxt && c.snd_max != c.snd_una) break;
    const bool resend = seq_lt(c.snd_nxt, c.snd_max);
    if (resend) {
      for (size_t i = 0; i < c.sacked.n; i++) {
        if (seq_gt(c.sacked.r[i].left, c.snd_nxt)) {
          n = std::min<uint32_t>(n, c.sacked.r[i].left - c.snd_nxt);
          break;
        }
      }
      n = std::min<uint32_t>(n, c.snd_max - c.snd_nxt);
    }
    n = send_data(*this, c, ctx, c.snd_nxt, n, resend);
    if (n == 0) break;
    c.snd_nxt += n;
    c.snd_max = seq_max(c.snd_max, c.snd_nxt);
    pipe += n;
  }

  // 3. FIN once every queued byte is out (again after an RTO rewound snd_nxt).
  if (c.fin_queued && c.snd_nxt == c.snd_end && (!c.fin_sent || seq_lt(c.snd_nxt, c.snd_max))) {
    TxDesc& d = ctx.tx_next();
    BuildSpec b;
    b.seq = c.snd_end;
    b.flags = kFin | kAck | ece_flag(c);
    b.window = advertise(c, false);
    put_header(*this, c, d, b);
    if (c.fin_sent) {
      ctr_.retransmits++;
      c.retransmits++;
    }
    c.fin_sent = true;
    c.snd_nxt = c.snd_end + 1;
    c.snd_max = seq_max(c.snd_max, c.snd_nxt);
    if (c.state == State::kEstablished) c.state = State::kFinWait1;
    if (c.state == State::kCloseWait) c.state = State::kLastAck;
  }

  // 4. Timers: the RTO while anything is outstanding; persist while the peer's window is zero
  // and data waits with nothing in flight to bring a window update.
  if (c.send_blocked() && seq_lt(c.snd_nxt, c.snd_end) && c.snd_max == c.snd_una) {
    if (!c.persist) {
      c.persist = true;
      wheel_.arm(&c.misc_timer, c.rto);
    }
  } else if (!c.persist && c.snd_max != c.snd_una && !c.rto_timer.armed()) {
    arm_rto(c);
  }
  arm_tlp(c);
}

// The tail loss probe (RFC 8985 7.3): one segment of new data when the window and the peer's
// message credit allow it, else the last segment sent again. Returns whether it went.
bool TcpTransport::send_tlp(Conn& c, Context& ctx) {
  const uint32_t limit = seq_min(c.msg_send_right(), c.snd_una + c.snd_wnd);
  uint32_t n = 0;
  if (c.snd_nxt == c.snd_max && seq_lt(c.snd_nxt, limit)) {
    n = send_data(*this, c, ctx, c.snd_nxt, std::min<uint32_t>(limit - c.snd_nxt, c.eff_mss),
                  false);
    c.snd_nxt += n;
    c.snd_max = seq_max(c.snd_max, c.snd_nxt);
    c.tlp_rxt = false;
  } else {
    const uint32_t top = c.fin_sent ? c.snd_end : c.snd_max;
    if (!seq_lt(c.snd_una, top)) return false;  // only the FIN is out: the RTO resends it
    const uint32_t from = top - c.snd_una > c.eff_mss ? top - c.eff_mss : c.snd_una;
    n = send_data(*this, c, ctx, from, top - from, true);
    c.tlp_rxt = true;
  }
  if (n == 0) return false;
  c.tlp_out = true;
  c.tlp_dsack = false;
  c.tlp_end_seq = c.snd_max;
  return true;
}

// A zero-window probe carries one byte of new data (RFC 9293 3.8.6.1), so that a peer which
// reopens its window acknowledges it.
void TcpTransport::send_probe(Conn& c, Context& ctx) {
  if (!seq_lt(c.snd_una, c.snd_end)) return;
  const uint32_t n = send_data(*this, c, ctx, c.snd_una, 1, c.snd_nxt != c.snd_una);
  if (n == 0) return;
  if (c.snd_nxt == c.snd_una) {
    c.snd_nxt++;
    c.snd_max = seq_max(c.snd_max, c.snd_nxt);
  }
  ctr_.zero_window_probes++;
}

}  // namespace cleave::transport::tcp
