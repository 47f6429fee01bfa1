// tcp_input.cc - the receive path: segment checks (RFC 9293 3.10.7, RFC 5961, RFC 7323 PAWS),
// ACK and SACK processing with loss detection (RFC 6675, RFC 6582), received data against the
// NIC's placement, FIN, ECN echo; then, once per connection per burst, the NIC cursor, retired
// memory segments and the app's receive completions.
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "common/wire.h"
#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {
FlowTuple tuple_of(const RxHeader& h, const Segment& s) {
  FlowTuple t;
  t.proto = 6;
  if (h.l3 != nullptr && h.l3_len >= 20 && (h.l3[0] >> 4) == 4) {
    t.remote.ip = IpAddr::v4(wire::load32(h.l3 + 12));
    t.local.ip = IpAddr::v4(wire::load32(h.l3 + 16));
  }
  t.remote.port = s.src_port;
  t.local.port = s.dst_port;
  return t;
}

namespace {

// ECN is on when the SYN asked for it (ECE and CWR) and the SYN-ACK agreed (ECE alone), RFC 3168
// 6.1.1: `we_asked` is our side of that, `want` the flags the peer's segment must carry.
// Whether TCP headers a and b, hl bytes each (20 and more, a multiple of 4), are the same but for
// what a run's segments may differ in: the sequence number, the checksum, the urgent pointer and
// PSH. Fixed-width loads: per segment of a run, where a library memcmp per field cost more than
// the rest of the test.
bool same_but_seq(const uint8_t* a, const uint8_t* b, size_t hl) {
  uint32_t a32, b32;
  std::memcpy(&a32, a, 4);  // ports
  std::memcpy(&b32, b, 4);
  uint64_t a64, b64;
  std::memcpy(&a64, a + 8, 8);  // ACK number, data offset, flags, window
  std::memcpy(&b64, b + 8, 8);
  // PSH in the flags, header byte 13: the sixth of the eight.
  constexpr uint64_t kPsh64 =
      std::endian::native == std::endian::little ? uint64_t{kPsh} << 40 : uint64_t{kPsh} << 16;
  if (a32 != b32 || ((a64 ^ b64) & ~kPsh64) != 0) return false;
  for (size_t k = 20; k < hl; k += 4) {  // options (timestamps)
    std::memcpy(&a32, a + k, 4);
    std::memcpy(&b32, b + k, 4);
    if (a32 != b32) return false;
  }
  return true;
}

void negotiate_ecn(Conn& c, bool we_asked, uint8_t peer_flags, uint8_t want) {
  c.ecn_ok = we_asked && (peer_flags & (kEce | kCwr)) == want;
  c.dctcp_echo = c.ecn_ok && c.st.dctcp();
}

// Options from the peer's SYN or SYN-ACK.
void negotiate(Conn& c, const Segment& s, uint64_t now_ns) {
  c.peer_mss = s.has_mss && s.mss != 0 ? s.mss : 536;
  c.sack_ok = c.st.sack && s.sack_permitted;
  c.ts_ok = c.st.timestamps && s.has_ts;
  if (c.ts_ok) {
    c.ts_recent = s.ts_val;
    c.ts_recent_valid = true;
  }
  if (s.has_wscale) {
    c.snd_wscale = std::min<uint8_t>(s.wscale, kMaxWscale);
    c.rcv_wscale = c.st.wscale;
  } else {
    c.snd_wscale = c.rcv_wscale = 0;
  }
  c.msg_ok = c.st.message && s.has_msg;
  if (c.msg_ok) c.peer_msg_limit = s.msg_limit;
  c.eff_mss = uint16_t(std::min(c.peer_mss, c.st.mss) - data_options_len(c.ts_ok, c.msg_ok));
  c.ccs.mss = c.eff_mss;
  c.cc->init(c.ccs, now_ns);
}

}  // namespace

void TcpTransport::rx_burst(std::span<const RxHeader> hdrs, Context& ctx) {
  begin(ctx);
  for (size_t i = 0; i < hdrs.size();)
    i += input(hdrs.subspan(i), ctx);
  end(ctx);
}

size_t TcpTransport::input(std::span<const RxHeader> hdrs, Context& ctx) {
  const RxHeader& h = hdrs[0];
  ctr_.segs_in++;
  if (h.l4_csum == Csum::kBad) {
    ctr_.bad_csum++;
    return 1;
  }
  Segment s;
  if (h.l4 == nullptr || !parse(h.l4, h.l4_len, s)) {
    ctr_.bad_header++;
    return 1;
  }
  if (h.flow != kNoFlow) {
    if (Conn* c = conn(h.flow); c != nullptr && c->state != State::kClosed) {
      const size_t n = run_length(*c, hdrs, s);
      if (n == 1) {
        input_conn(*c, h, s, ctx);
        return 1;
      }
      RxHeader run = h;
      for (size_t i = 1; i < n; i++)
        run.payload_len += hdrs[i].payload_len;
      s.segs = uint32_t(n);
      s.last_seq = wire::load32(hdrs[n - 1].l4 + 4);
      ctr_.segs_in += n - 1;
      ctr_.segs_merged += n - 1;
      input_conn(*c, run, s, ctx);
      return n;
    }
    if (TimeWait* w = tw(h.flow); w != nullptr) {
      tw_input(*w, h, s, ctx);
      return 1;
    }
  }
  if (h.has_listener && h.listener < listeners_.size() && listeners_[h.listener].used) {
    input_listen(h, s, ctx);
    return 1;
  }
  ctr_.no_flow++;
  return 1;
}

// How many of hdrs, from the first (parsed: s), input_conn() may take as one segment: seq the
// first's, payload_len the sum, segs the count. Taken one at a time they would have had the same
// outcome, and the run is cut wherever that is not plain:
// - The connection is established and holds nothing out of order, no FIN beyond a hole, no tail
//   loss probe outstanding (whose end an ACK without progress settles), no orphan; no message
//   mode.
// - The first segment starts at RCV.NXT with the ACK flag alone (PSH, ECE, CWR aside), passes
//   PAWS and the ACK checks, and has no option that counts each time it comes (SACK blocks, a
//   DSACK, the message option).
// - Each next one is of the same flow and continues the one before it, and its TCP header is the
//   first's but for the sequence number, the checksum, the urgent pointer and PSH: the same ports,
//   ACK, window, flags and option bytes (timestamps), as Linux's GRO asks (tcp_gro_receive). A
//   moving ACK or window is cut: per ACK, congestion control, RACK and the duplicate-ACK count
//   would see fewer; the timestamp's value and echo stay, so PAWS, TS.Recent (RFC 7323 4.3:
//   the first segment's sequence number decides, as Last.ACK.sent is the same for all) and RACK
//   see each segment's.
// - The NIC placed every payload (no copy to make per segment, no verdict to act on), the checksum
//   is not bad, the ECN field is the same, and the run ends within the posted buffers (beyond
//   them a segment is cut or dropped and counted).
// Then the second and later segments each acknowledge nothing new, update the peer's window as
// the first did (process_ack takes WL1 from the last: last_seq), and add their bytes to the
// in-order stream and one each to the segments unacknowledged (RFC 5681 4.2's count).
size_t TcpTransport::run_length(const Conn& c, std::span<const RxHeader> hdrs,
                                const Segment& s) const {
  const RxHeader& h = hdrs[0];
  if (!merge_runs_ || hdrs.size() < 2 || h.placed != Placed::kPlaced || h.payload_len == 0) {
    return 1;
  }
  if (c.state != State::kEstablished || c.ooo.n != 0 || c.fin_seen || c.tlp_out || c.orphan ||
      c.msg_ok) {
    return 1;
  }
  if ((s.flags & (kSyn | kFin | kRst | kUrg | kAck)) != kAck || s.nsack != 0 || s.has_msg ||
      s.seq != c.rcv_nxt) {
    return 1;
  }
  if (c.ts_ok && s.has_ts && c.ts_recent_valid && int32_t(s.ts_val - c.ts_recent) < 0) return 1;
  if (seq_gt(s.ack, c.snd_max) || seq_lt(s.ack, c.snd_una - c.max_snd_wnd)) return 1;
  // receive_data's right edge, which the run leaves where it is (rcv_nxt and rcv_stream move
  // together), unless 2^30 caps it, when it only moves on.
  const uint32_t room = std::min(c.rcv_space(), 1u << 30);
  uint32_t used = h.payload_len;
  if (used > room) return 1;
  const uint8_t* a = h.l4;
  const size_t hl = s.header_len;
  size_t n = 1;
  for (; n < hdrs.size(); n++) {
    const RxHeader& x = hdrs[n];
    const uint8_t* b = x.l4;
    if (x.flow != h.flow || x.placed != Placed::kPlaced || x.l4_csum == Csum::kBad ||
        x.ecn != h.ecn || x.payload_len == 0 || x.payload_len > room - used || b == nullptr ||
        x.l4_len < hl) {
      break;
    }
    if (wire::load32(b + 4) != s.seq + used || !same_but_seq(a, b, hl)) break;
    used += x.payload_len;
  }
  return n;
}

// LISTEN (RFC 9293 3.10.7.2): RSTs are ignored; an ACK completes a SYN cookie's handshake or
// gets a RST; a SYN opens a connection while the listener has room for another half-open one
// (its backlog, and the dataplane's room for a flow: the app's quota, its completion queue, the
// flow table), else it gets a SYN cookie (tcp_syncookie.cc) or is dropped.
void TcpTransport::input_listen(const RxHeader& h, const Segment& s, Context& ctx) {
  if ((s.flags & (kSyn | kAck | kRst)) == kAck) {
    accept_cookie(h, s, ctx);
    return;
  }
  if ((s.flags & (kSyn | kAck | kRst)) != kSyn) {
    ctr_.no_flow++;
    return;
  }
  Listener& l = listeners_[h.listener];
  const FlowTuple tuple = tuple_of(h, s);
  FlowId id = kNoFlow;
  if (l.half_open < l.settings.backlog) {
    // Message mode is on when both ask (negotiate() below); a refused one is closed at once.
    id = ctx.flow_open(h.listener, tuple, s.seq + 1, l.settings.message && s.has_msg);
    if (id == kNoFlow && ctx.flow_open_error() != -ENOBUFS) {
      ctr_.syn_dropped_refused++;
      return;
    }
  }
  if (id == kNoFlow) {
    ctr_.syn_no_room++;
    if (!l.settings.syncookies || l.settings.message) {
      ctr_.syn_dropped_no_room++;
      return;
    }
    send_cookie(h, s, l, ctx);
    return;
  }
  if (conn(id) != nullptr || tw(id) != nullptr) {
    ctr_.no_flow++;
    return;
  }
  // A tuple binding's parameters go over the listener's. They were checked when attached; should
  // they not parse now, the listener's stand.
  Settings st = l.settings;
  if (Params op = ctx.flow_params(id); !op.empty()) {
    Settings with = st;
    if (parse_settings(op, with).empty()) st = with;
  }
  Conn& c = new_conn(id, tuple, st);
  c.passive = true;
  c.listener = h.listener;
  c.listener_gen = l.gen;
  c.half_open = true;
  l.half_open++;
  c.state = State::kSynReceived;
  c.irs = s.seq;
  c.rcv_nxt = c.rcv_adv = c.nic_cursor = c.rcv_msg_seq = s.seq + 1;
  c.synced = true;
  negotiate(c, s, now_ns_);
  if (c.st.message && !c.msg_ok) {
    // A message-mode listener takes message-mode peers only: refuse the others clearly.
    ctr_.msg_refused++;
    send_rst(c, ctx);
    finish(c, EventKind::kClosed, -EPROTONOSUPPORT, ctx);
    return;
  }
  negotiate_ecn(c, c.st.ecn != 0, s.flags, kEce | kCwr);
  c.snd_wnd = s.window;  // never scaled in a SYN (RFC 7323 2.2)
  c.max_snd_wnd = c.snd_wnd;
  c.snd_wl1 = s.seq;
  c.snd_wl2 = c.iss;
  send_syn(c, ctx);
  arm_rto(c);
}

void TcpTransport::input_conn(Conn& c, const RxHeader& h, const Segment& s, Context& ctx) {
  touch(c);
  if (c.state == State::kSynSent) {
    const bool ack_ok = (s.flags & kAck) != 0 && seq_gt(s.ack, c.iss) && seq_leq(s.ack, c.snd_max);
    if ((s.flags & kAck) != 0 && !ack_ok) return;  // RFC 9293: would send a RST; we drop
    if ((s.flags & kRst) != 0) {
      ctr_.rst_in++;
      if (ack_ok) finish(c, EventKind::kRefused, -ECONNREFUSED, ctx);
      return;
    }
    if ((s.flags & kSyn) == 0) return;
    c.irs = s.seq;
    c.rcv_nxt = c.rcv_adv = c.nic_cursor = c.rcv_msg_seq = s.seq + 1;
    negotiate(c, s, now_ns_);
    if (c.st.message && !c.msg_ok) {
      // The peer does not speak the message option (Linux ignores it): refuse, and reset the
      // peer's half-open connection.
      ctr_.msg_refused++;
      send_rst(c, ctx);
      finish(c, EventKind::kRefused, -EPROTONOSUPPORT, ctx);
      return;
    }
    c.snd_wnd = s.window;
    c.max_snd_wnd = c.snd_wnd;
    c.snd_wl1 = s.seq;
    c.snd_wl2 = s.ack;
    ctx.flow_synced(c.flow, c.rcv_nxt, c.msg_ok);
    c.synced = true;
    if (ack_ok) {
      negotiate_ecn(c, c.st.requests_ecn(), s.flags, kEce);
      if (c.rtt_timing && c.backoff == 0) rtt_sample(c, now_ns_ - c.rtt_start);
      c.rtt_timing = false;
      c.snd_una = c.prior_una = s.ack;
      c.backoff = 0;
      c.state = State::kEstablished;
      c.accepted = true;
      wheel_.cancel(&c.rto_timer);
      ctx.event({c.flow, EventKind::kConnected, 0, 0, 0, 0});
      c.ack_now = true;
    } else {
      // Simultaneous open (RFC 9293 figure 7): answer with SYN-ACK from the same ISS.
      negotiate_ecn(c, c.st.requests_ecn(), s.flags, kEce | kCwr);
      c.state = State::kSynReceived;
      send_syn(c, ctx);
    }
    return;
  }

  // ---- synchronized states ----
  const bool rst = (s.flags & kRst) != 0;
  const bool syn = (s.flags & kSyn) != 0;
  uint32_t plen = h.payload_len;
  const uint32_t seglen = plen + (syn ? 1 : 0) + ((s.flags & kFin) != 0 ? 1 : 0);

  if (c.state == State::kSynReceived && syn && !rst && s.seq == c.irs) {
    if ((s.flags & kAck) != 0 && s.ack == c.iss + 1) {
      // Simultaneous open (RFC 9293 figure 7): the peer's SYN-ACK acknowledges our SYN. Its SYN
      // was taken already: the rest is that ACK, and it is acknowledged. (Answered with our
      // SYN-ACK, two such ends would trade SYN-ACKs without end.)
      Segment rest = s;
      rest.flags &= uint8_t(~kSyn);
      rest.seq = s.seq + 1;
      c.ack_now = true;
      input_conn(c, h, rest, ctx);
      return;
    }
    // A retransmitted SYN while our SYN-ACK is unanswered: the SYN-ACK again, at most once per
    // kInvalidAckGapNs (Linux's tcp_check_req).
    if ((s.flags & kAck) == 0) {
      if (may_answer(c.invalid_answered, c.invalid_answer_ns)) send_syn(c, ctx);
      return;
    }
  }

  // SYN in a synchronized state, whatever its sequence number (RFC 5961 4.2): challenge ACK.
  if (syn && !rst) {
    ctr_.challenge_acks++;
    answer_invalid(c, false);
    return;
  }

  // PAWS (RFC 7323 5.3); segments without timestamps are accepted, as Linux does.
  if (c.ts_ok && s.has_ts && c.ts_recent_valid && !rst && int32_t(s.ts_val - c.ts_recent) < 0) {
    ctr_.paws_drops++;
    answer_invalid(c, seglen != 0);
    return;
  }

  // Acceptability (RFC 9293 3.10.7.4). The window is what we advertised, or the posted buffers
  // when those reach further.
  const uint32_t wnd = std::max<uint32_t>(c.rcv_adv - c.rcv_nxt, std::min(c.rcv_space(), 1u << 30));
  bool ok;
  if (seglen == 0) {
    ok =
        wnd == 0 ? s.seq == c.rcv_nxt : seq_geq(s.seq, c.rcv_nxt) && seq_lt(s.seq, c.rcv_nxt + wnd);
  } else {
    ok = wnd != 0 &&
         ((seq_geq(s.seq, c.rcv_nxt) && seq_lt(s.seq, c.rcv_nxt + wnd)) ||
          (seq_geq(s.seq + seglen - 1, c.rcv_nxt) && seq_lt(s.seq + seglen - 1, c.rcv_nxt + wnd)));
  }
  // Starting exactly at rcv_nxt is always acceptable, as in Linux: a FIN, or data into a zero
  // window (dropped below, but its ACK and FIN count).
  if (s.seq == c.rcv_nxt) ok = true;
  // An empty segment one byte behind rcv_nxt is Linux's window probe and keepalive: its ACK
  // field counts, and it is answered (RFC 9293 3.8.6.1, 3.10.7.4), at most once per
  // kInvalidAckGapNs as Linux's tcp_oow_rate_limited does: two ends out of step by a byte (a
  // FIN one of them never sent, forged) would otherwise answer each other's ACKs without end.
  if (!ok && seglen == 0 && !rst && seq_lt(s.seq, c.rcv_nxt) && seq_geq(s.seq, c.rcv_nxt - 1)) {
    ok = true;
    answer_invalid(c, false);
  }
  if (!ok) {
    if (rst) return;
    ctr_.out_of_window++;
    if (plen != 0 && seq_lt(s.seq, c.rcv_nxt)) {
      // An old duplicate: report it as a DSACK (RFC 2883).
      const uint32_t end = seq_min(s.seq + plen, c.rcv_nxt);
      c.dup_bytes += end - s.seq;
      ctr_.dup_bytes += end - s.seq;
      if (c.sack_ok) {
        c.dsack = {s.seq, end};
        c.dsack_pending = true;
      }
    }
    answer_invalid(c, seglen != 0);
    return;
  }

  // RST (RFC 5961 3.2): exact sequence resets, anything else in the window is challenged.
  if (rst) {
    ctr_.rst_in++;
    if (s.seq != c.rcv_nxt) {
      ctr_.challenge_acks++;
      answer_invalid(c, false);
      return;
    }
    const bool quiet =
        c.state == State::kClosing || c.state == State::kLastAck || c.state == State::kTimeWait;
    finish(c, EventKind::kClosed, quiet ? 0 : -ECONNRESET, ctx);
    return;
  }
  if ((s.flags & kAck) == 0) return;

  // The timestamp to echo is that of the earliest segment not yet acknowledged (RFC 7323 4.3).
  if (c.ts_ok && s.has_ts && seq_leq(s.seq, c.last_ack_sent)) c.ts_recent = s.ts_val;

  if (c.state == State::kSynReceived) {
    if (!seq_gt(s.ack, c.snd_una) || !seq_leq(s.ack, c.snd_max)) return;
    end_half_open(c);
    c.state = State::kEstablished;
    c.backoff = 0;
    c.snd_wnd = uint32_t(s.window) << c.snd_wscale;
    c.max_snd_wnd = std::max(c.max_snd_wnd, c.snd_wnd);
    c.snd_wl1 = s.seq;
    c.snd_wl2 = s.ack;
    c.accepted = true;
    ctx.event({c.flow, c.passive ? EventKind::kAccepted : EventKind::kConnected, 0, 0,
               c.passive ? c.listener : 0, 0});
  }

  // ---- ACK (RFC 9293 3.10.7.4 fifth, RFC 5961 5.2) ----
  if (seq_gt(s.ack, c.snd_max)) {
    answer_invalid(c, false);  // acknowledges data we never sent: the data is not taken either
    return;
  }
  if (seq_lt(s.ack, c.snd_una - c.max_snd_wnd)) {
    ctr_.challenge_acks++;
    answer_invalid(c, false);
    return;
  }
  process_ack(c, h, s, ctx);
  if (c.state == State::kClosed) return;

  // ---- data ----
  if (plen != 0 && (c.state == State::kEstablished || c.state == State::kFinWait1 ||
                    c.state == State::kFinWait2)) {
    if (c.orphan && seq_gt(s.seq + plen, c.rcv_nxt)) {
      // New data for an app that left: nobody will read it (Linux resets too).
      send_rst(c, ctx);
      finish(c, EventKind::kClosed, -ECONNRESET, ctx);
      return;
    }
    receive_data(c, h, s, ctx);
  }

  // ---- ECN echo (RFC 3168 6.1.3; RFC 8257 3.2 for DCTCP) ----
  if (c.ecn_ok && plen != 0) {
    const bool ce = h.ecn == 3;
    if (c.dctcp_echo) {
      if (ce != c.last_ce) c.ack_now = true;
      c.last_ce = ce;
    } else {
      if ((s.flags & kCwr) != 0) c.ce_pending = false;
      if (ce) c.ce_pending = true;
    }
  }

  // ---- FIN ----
  if ((s.flags & kFin) != 0 && !c.fin_received) {
    c.fin_seen = true;
    c.rcv_fin_seq = s.seq + plen;
  }
  if (c.fin_seen && !c.fin_received && c.rcv_nxt == c.rcv_fin_seq) receive_fin(c, ctx);
}

void TcpTransport::answer_invalid(Conn& c, bool data) {
  if (!data && !may_answer(c.invalid_answered, c.invalid_answer_ns)) return;
  c.ack_now = true;
}

bool TcpTransport::may_answer(bool& answered, uint64_t& at_ns) {
  if (answered && now_ns_ - at_ns < kInvalidAckGapNs) {
    ctr_.acks_rate_limited++;
    return false;
  }
  answered = true;
  at_ns = now_ns_;
  return true;
}

void TcpTransport::process_ack(Conn& c, const RxHeader& h, const Segment& s, Context& ctx) {
  const uint32_t ack = s.ack;
  c.prior_una = c.snd_una;
  // The peer's message credit only grows; a reordered older one says nothing new.
  if (c.msg_ok && s.has_msg && int32_t(s.msg_limit - c.peer_msg_limit) > 0) {
    c.peer_msg_limit = s.msg_limit;
  }
  // SACK blocks (RFC 2018), DSACK (RFC 2883): the first block reports a duplicate when it lies
  // below the cumulative ACK or inside the second block.
  uint32_t newly_sacked = 0;
  const uint64_t dsacks_before = ctr_.dsacks_in;
  // Reordering (for RACK's window): a segment sent once arriving below others already SACKed,
  // by a SACK block or by the cumulative ACK filling the hole below them.
  const uint32_t prior_high = c.sacked.n != 0 ? c.sacked.r[c.sacked.n - 1].right : c.snd_una;
  if (c.sacked.n != 0 && seq_gt(ack, c.snd_una)) {
    rack_check_reordering(c, c.snd_una, seq_min(ack, c.sacked.r[0].left));
  }
  if (c.sack_ok && s.nsack != 0) {
    const uint64_t before = c.sacked.bytes();
    for (size_t i = 0; i < s.nsack; i++) {
      SackBlock b = s.sack[i];
      if (!seq_lt(b.left, b.right)) continue;
      if (i == 0 && (seq_leq(b.right, ack) || (s.nsack > 1 && seq_geq(b.left, s.sack[1].left) &&
                                               seq_leq(b.right, s.sack[1].right)))) {
        ctr_.dsacks_in++;
        undo_dsack(c, b.left, b.right);
        continue;
      }
      b.left = seq_max(b.left, seq_max(ack, c.snd_una));
      if (seq_gt(b.right, c.snd_max) || !seq_lt(b.left, b.right)) continue;
      const uint32_t below = seq_min(b.right, prior_high);
      if (seq_lt(b.left, below) && !c.sacked.covers(b.left, below)) {
        rack_check_reordering(c, b.left, below);
      }
      c.sacked.add(b.left, b.right);
      c.lost.remove(b.left, b.right);  // it arrived after all
    }
    c.sacked.drop_below(seq_max(ack, c.snd_una));
    const uint64_t after = c.sacked.bytes();
    newly_sacked = after > before ? uint32_t(after - before) : 0;
    if (c.sacked.n != 0) c.high_sack = c.sacked.r[c.sacked.n - 1].right;
  }

  uint32_t acked = 0;
  uint64_t rtt_ns = 0;
  const bool advanced = seq_gt(ack, c.snd_una);
  if (advanced) {
    acked = ack - c.snd_una;
    const bool fin_acked = c.fin_sent && seq_gt(ack, c.snd_end);
    c.snd_una = ack;
    if (seq_lt(c.snd_nxt, ack)) c.snd_nxt = ack;
    c.sacked.drop_below(ack);
    c.lost.drop_below(ack);
    if (fin_acked) acked--;
    c.bytes_acked += acked;
    c.snd_una64 += acked;
    // Send completions: every chunk wholly acknowledged.
    while (!c.sendq.empty()) {
      const SendChunk& k = c.sendq.front();
      if (seq_gt(k.seq + k.len, ack)) break;
      ctx.event({c.flow, EventKind::kSendDone, 0, k.len, 0, k.wr_id});
      c.sendq.pop_front();
      if (c.tx_hint != 0) c.tx_hint--;
    }
    if (c.rtt_timing && seq_geq(ack, c.rtt_seq)) {
      rtt_ns = now_ns_ - c.rtt_start;
      rtt_sample(c, rtt_ns);
      c.rtt_timing = false;
    }
    c.backoff = 0;
    c.dupacks = 0;
    if (c.in_recovery) {
      if (seq_geq(ack, c.recover)) {
        c.in_recovery = false;
        c.lost.clear();  // RACK looks again below
        if (c.reo_wnd_persist != 0 && --c.reo_wnd_persist == 0) c.reo_wnd_mult = 1;
        c.cc->on_recovery_end(c.ccs, now_ns_);
      } else if (c.sacked.n == 0 && !c.sack_ok) {
        // RFC 6582 partial ACK: resend the next hole. With SACK, RACK finds it (it went out
        // before the retransmission just delivered).
        c.need_rxt = true;
      }
    }
    if (c.ts_ok && s.has_ts && s.ts_ecr != 0) undo_spurious_rto(c, s.ts_ecr);
    if (c.rto_recovery && seq_geq(ack, c.recover)) {
      c.rto_recovery = false;
      c.rto_ts = 0;
    }
    if (c.ecn_reacting && seq_geq(ack, c.ecn_recover)) c.ecn_reacting = false;
    if (fin_acked) {
      switch (c.state) {
        case State::kFinWait1:
          c.state = State::kFinWait2;
          wheel_.arm(&c.misc_timer, uint64_t(c.st.fin_wait2_ms) * 1'000'000);
          break;
        case State::kClosing:
          enter_time_wait(c, ctx);
          break;
        case State::kLastAck:
          finish(c, EventKind::kClosed, 0, ctx);
          return;
        default:
          break;
      }
    }
  } else if (ack == c.snd_una && h.payload_len == 0 && (s.flags & (kSyn | kFin)) == 0 &&
             (uint32_t(s.window) << c.snd_wscale) == c.snd_wnd && c.snd_max != c.snd_una &&
             c.snd_wnd != 0) {
    c.dupacks++;  // RFC 5681 duplicate ACK (answers to zero-window probes are not)
  }

  // Window update (RFC 9293 3.10.7.4): from segments newer than the last update, and, as in
  // Linux (tcp_may_update_window), from any that acknowledges new data. The window counts from
  // its segment's ACK: kept while SND.UNA moves on, it would reach past the peer's buffers (a
  // resent segment of the peer's, older than the last update, carries a new ACK). An older ACK's
  // window is not taken, for the same reason.
  // A run (rx_burst) updates as its last segment would after the others (run_length).
  const uint32_t wl_seq = s.segs > 1 ? s.last_seq : s.seq;
  if (seq_geq(ack, c.snd_una) &&
      (advanced || seq_lt(c.snd_wl1, wl_seq) || (c.snd_wl1 == wl_seq && seq_leq(c.snd_wl2, ack)))) {
    c.snd_wnd = uint32_t(s.window) << c.snd_wscale;
    c.max_snd_wnd = std::max(c.max_snd_wnd, c.snd_wnd);
    c.snd_wl1 = wl_seq;
    c.snd_wl2 = ack;
  }
  if (c.persist && !c.send_blocked()) {
    c.persist = false;
    c.backoff = 0;
    wheel_.cancel(&c.misc_timer);
  }

  // Congestion control.
  if (acked != 0 || newly_sacked != 0) {
    cc::Ack a;
    a.now_ns = now_ns_;
    a.acked = acked + newly_sacked;
    a.ece_acked = c.ecn_ok && (s.flags & kEce) != 0 ? a.acked : 0;
    a.rtt_us = uint32_t(rtt_ns / 1000);
    a.snd_una = c.snd_una64;
    a.snd_nxt = c.snd_una64 + (c.snd_max - c.snd_una);
    // After an RTO the window grows again by slow start from one segment (RFC 5681 3.1);
    // rto_recovery only keeps a fast recovery from starting for data sent before it.
    a.in_recovery = c.in_recovery;
    c.cc->on_ack(c.ccs, a);
  }
  if (c.ecn_ok && (s.flags & kEce) != 0 && !c.ecn_reacting && !c.in_recovery) {
    c.ccs.inflight = c.flight_size();
    c.cc->on_ecn(c.ccs, now_ns_);
    c.ecn_reacting = true;
    c.ecn_recover = c.snd_max;
    c.cwr_pending = true;
    c.ecn_reductions++;
    ctr_.ecn_reductions++;
  }

  // Loss detection: with SACK, RACK alone (tcp_rack.cc), by transmit time: three SACKed
  // segments above a hole may be reordering, and RACK waits its window before calling it lost
  // (as Linux does with RACK on). Without SACK, DupThresh duplicate ACKs (RFC 5681), outside
  // an episode we are already in.
  rack_ack(c, uint32_t(ctr_.dsacks_in - dsacks_before), acked != 0 || newly_sacked != 0,
           c.ts_ok && s.has_ts && s.ts_ecr != 0 ? std::optional<uint32_t>(s.ts_ecr) : std::nullopt);
  if (!c.sack_ok && !c.in_recovery && !c.rto_recovery && c.snd_max != c.snd_una && c.dupacks >= 3 &&
      seq_geq(c.snd_una, c.recover)) {
    enter_recovery(c);
  }

  if (c.snd_una == c.snd_max) {
    if (!c.persist) wheel_.cancel(&c.rto_timer);
  } else if (acked != 0 && !c.persist) {
    arm_rto(c);  // RFC 6298 5.3: restart on new data acknowledged
  }
  c.prior_una = c.snd_una;
}

// Received payload [seq, seq + len): already placed by the NIC, or to be copied (deferred).
void TcpTransport::receive_data(Conn& c, const RxHeader& h, const Segment& s, Context& ctx) {
  if (c.wnd_repeats != 0) {
    c.wnd_repeats = 0;  // the peer is sending: it has the window
    wheel_.cancel(&c.wnd_timer);
  }
  uint32_t seq = s.seq;
  uint32_t end = seq + h.payload_len;
  if (seq_lt(seq, c.rcv_nxt)) {
    const uint32_t dup_end = seq_min(end, c.rcv_nxt);
    c.dup_bytes += dup_end - seq;
    ctr_.dup_bytes += dup_end - seq;
    if (c.sack_ok) {
      c.dsack = {seq, dup_end};
      c.dsack_pending = true;
    }
    c.ack_now = true;
    if (seq_leq(end, c.rcv_nxt)) return;
    seq = c.rcv_nxt;
  }
  // In message mode the posted buffer of the segment's message is the limit (msg_buffer).
  const uint32_t right = c.rcv_nxt + (c.msg_ok ? 1u << 30 : std::min(c.rcv_space(), 1u << 30));
  if (seq_geq(seq, right)) {
    ctr_.out_of_window++;
    c.ack_now = true;
    return;
  }
  if (seq_gt(end, right)) end = right;
  if (c.ooo.covers(seq, end)) {
    c.dup_bytes += end - seq;
    ctr_.dup_bytes += end - seq;
    if (c.sack_ok) {
      c.dsack = {seq, end};
      c.dsack_pending = true;
    }
    c.ack_now = true;
    return;
  }

  long msg = -1;
  if (c.msg_ok) {
    msg = msg_buffer(c, s, h.payload_len);
    if (msg < 0) return;
  }

  const uint32_t len = end - seq;
  switch (h.placed) {
    case Placed::kPlaced:
    case Placed::kTrimmed:
      // Message mode: the NIC placed it in the MS of the number the option names, at
      // seq - start; msg_buffer() has just checked both against this buffer. A buffer the
      // NIC does not have cannot have received it: drop it (the peer resends).
      if (msg >= 0 && !c.recvq[size_t(msg)].on_nic) return;
      break;
    case Placed::kDeferred: {
      if (h.payload == nullptr) return;
      if (msg >= 0) {
        // Message mode: at its offset in its message's buffer; what runs past the buffer is
        // dropped here and reported when the message completes (-EMSGSIZE).
        const RecvBuf& b = c.recvq[size_t(msg)];
        const uint32_t at = seq - b.msg_start;
        if (at < b.len && !ctx.copy_in(h.payload + (seq - s.seq), std::min(len, b.len - at), b.mr,
                                       b.offset + at)) {
          ctr_.copy_faults++;
          return;
        }
        break;
      }
      // Copy into the posted buffers the stream offsets name, across buffer edges.
      const uint8_t* src = h.payload + (seq - s.seq);
      uint64_t off = c.rcv_stream + (seq - c.rcv_nxt);
      uint32_t left = len;
      for (size_t i = 0; i < c.recvq.size() && left != 0; i++) {
        const RecvBuf& b = c.recvq[i];
        if (off >= b.start + b.len) continue;
        const uint32_t at = uint32_t(off - b.start);
        const uint32_t n = std::min(left, b.len - at);
        if (!ctx.copy_in(src, n, b.mr, b.offset + at)) {
          ctr_.copy_faults++;
          return;
        }
        src += n;
        off += n;
        left -= n;
      }
      if (left != 0) return;  // beyond the posted buffers: the window check should prevent it
      break;
    }
    case Placed::kDropped:
    case Placed::kNoPayload:
      return;  // the NIC holds nothing new of it
  }

  // What this segment adds: the growth of the in-order stream plus the out-of-order bytes held.
  const uint64_t held_before = c.ooo.bytes();
  uint64_t adv = 0;
  if (seq == c.rcv_nxt) {
    uint32_t nxt = end;
    if (c.ooo.n != 0) {
      c.ooo.drop_below(nxt);
      while (c.ooo.n != 0 && seq_leq(c.ooo.r[0].left, nxt)) {
        nxt = seq_max(nxt, c.ooo.r[0].right);
        c.ooo.drop_below(nxt);
      }
      c.ack_now = true;  // a hole filled: ACK at once (RFC 5681 4.2)
    }
    adv = nxt - c.rcv_nxt;
    c.rcv_nxt = nxt;
    c.rcv_stream += adv;
    c.bytes_received += adv;
    c.rcv_progress += uint32_t(adv);
    c.unacked_segs += s.segs;  // a run counts each of its segments
    if (c.unacked_segs >= 2) c.ack_now = true;
  } else {
    if (!c.ooo.add(seq, end)) return;  // too fragmented: drop, the peer resends
    c.last_ooo = *c.ooo.find(seq);
    c.ack_now = true;  // out of order: a duplicate ACK with SACK at once (RFC 5681 4.2)
  }
  const uint64_t fresh = adv + c.ooo.bytes() - held_before;
  if (h.placed == Placed::kDeferred) {
    c.copied_bytes += fresh;
    ctr_.copied_bytes += fresh;
  } else {
    c.placed_bytes += fresh;
    ctr_.placed_bytes += fresh;
  }
}

// Message mode: checks a data segment's message option against what the flow knows and returns
// the index in recvq of the buffer its message goes to, or -1 when the segment must be dropped.
// The option is untrusted: the payload must lie inside the message it names, and a message must
// fit between its neighbours (each starts where the one before ends), so no byte belongs to two
// messages and none is skipped. The first segment of a message records it in its buffer.
long TcpTransport::msg_buffer(Conn& c, const Segment& s, uint32_t plen) {
  auto bad = [&] {
    ctr_.msg_bad++;
    return -1L;
  };
  if (!s.msg_data || s.msg_len == 0 || s.msg_len > kMaxSendQueue) return bad();
  const uint32_t msg_end = s.msg_start + s.msg_len;
  if (seq_lt(s.seq, s.msg_start) || seq_gt(s.seq + plen, msg_end)) return bad();
  if (seq_lt(s.msg_start, c.rcv_msg_seq) || seq_gt(msg_end, c.rcv_nxt + (1u << 30))) return bad();
  const uint32_t idx = s.msg_no - c.rcv_msg_no;
  if (int32_t(idx) < 0) return bad();
  if (idx >= c.recvq.size()) {
    // No receive posted for it: beyond the credit we gave. Drop; the ACK tells the peer.
    ctr_.msg_no_buffer++;
    c.ack_now = true;
    return -1;
  }
  RecvBuf& b = c.recvq[idx];
  if (b.msg_known) {
    if (b.msg_start != s.msg_start || b.msg_len != s.msg_len) return bad();
    return long(idx);
  }
  if (idx == 0) {
    if (s.msg_start != c.rcv_msg_seq) return bad();
  } else if (const RecvBuf& p = c.recvq[idx - 1]; p.msg_known) {
    if (s.msg_start != p.msg_start + p.msg_len) return bad();
  } else if (!seq_gt(s.msg_start, c.rcv_nxt) || seq_lt(s.msg_start, c.rcv_msg_seq + idx)) {
    // An unknown message before it still has bytes to come (which will name it), and each
    // message has at least one byte.
    return bad();
  }
  if (idx + 1 < c.recvq.size()) {
    const RecvBuf& n = c.recvq[idx + 1];
    if (n.msg_known && n.msg_start != msg_end) return bad();
  }
  b.msg_known = true;
  b.msg_start = s.msg_start;
  b.msg_len = s.msg_len;
  // The window counts this message's length in place of its buffer's (see Conn::rcv_space).
  c.posted_end = c.posted_end - b.len + s.msg_len;
  return long(idx);
}

// Message mode: each buffer completes when its whole message is in order, with the message's
// length in aux and -EMSGSIZE when the buffer was shorter (it holds the message's first bytes).
// After the peer's FIN the buffers left get nothing (EOF).
void TcpTransport::complete_messages(Conn& c, Context& ctx) {
  while (!c.recvq.empty()) {
    const RecvBuf& b = c.recvq.front();
    if (b.msg_known && seq_geq(c.rcv_nxt, b.msg_start + b.msg_len)) {
      const bool trunc = b.msg_len > b.len;
      if (trunc) {
        ctr_.msg_truncated++;
        c.msg_truncated++;
      }
      ctx.event({c.flow, EventKind::kRecvDone, trunc ? -EMSGSIZE : 0, std::min(b.msg_len, b.len),
                 b.msg_len, b.wr_id});
      c.rcv_msg_no++;
      c.rcv_msg_seq = b.msg_start + b.msg_len;
    } else if (c.fin_received) {
      ctx.event({c.flow, EventKind::kRecvDone, 0, 0, 0, b.wr_id});
    } else {
      break;
    }
    // The cursor has passed the message (after_burst moved it first): nothing more of it is
    // placed, and its MS, filled, short or never used, retires by number.
    if (b.on_nic) {
      ctx.ms_retire_msg(c.flow, b.msg_no);
      c.nic_ms--;
    }
    c.recvq.pop_front();
  }
}

// Message mode: posts the receive buffers the NIC does not have yet, each as the MS of its
// message. The ones posted are a prefix of recvq (nic_ms long): buffers complete in order.
// -ENOBUFS (the NIC's lists are full) tries again after the next burst; any other refusal
// (-EOPNOTSUPP: the NIC flow places by stream, as on the generic backend) leaves the flow to
// the copy path for good.
void TcpTransport::post_messages(Conn& c, Context& ctx) {
  for (size_t i = c.nic_ms; i < c.recvq.size(); i++) {
    RecvBuf& b = c.recvq[i];
    const int rc = ctx.ms_post(c.flow, b.mr, b.offset, b.len, b.msg_no);
    if (rc != 0) {
      if (rc != -ENOBUFS) c.nic_msg_off = true;
      return;
    }
    b.on_nic = true;
    c.nic_ms++;
  }
}

void TcpTransport::receive_fin(Conn& c, Context& ctx) {
  c.fin_received = true;
  c.rcv_nxt++;
  c.ack_now = true;
  // Before the state changes: entering TIME_WAIT ends the app's view of the flow.
  if (c.accepted && !c.app_done) ctx.event({c.flow, EventKind::kPeerClosed, 0, 0, 0, 0});
  switch (c.state) {
    case State::kEstablished:
      c.state = State::kCloseWait;
      break;
    case State::kFinWait1:
      c.state = State::kClosing;  // our FIN is not acknowledged yet: simultaneous close
      break;
    case State::kFinWait2:
      enter_time_wait(c, ctx);
      break;
    default:
      break;
  }
}

// Once per touched connection per burst: NIC cursor, retired segments, app completions, then
// output and the ACK decision.
void TcpTransport::after_burst(Conn& c, Context& ctx) {
  c.dirty = false;
  if (c.state == State::kClosed) {
    release(c);
    return;
  }
  // In-order data advanced: move the NIC's cursor, retire the segments it passed, complete them.
  const uint32_t data_seq = c.irs + 1 + uint32_t(c.rcv_stream);
  if (c.synced && !c.fenced && data_seq != c.nic_cursor) {
    ctx.cursor_update(c.flow, data_seq);
    c.nic_cursor = data_seq;
  }
  if (c.fin_received && c.synced && !c.fenced) {
    // No data may follow the FIN: move the cursor far ahead so the NIC places nothing more in
    // buffers the app is about to get back, and every segment can be retired.
    ctx.cursor_update(c.flow, data_seq + 0x40000000u);
    c.fenced = true;
  }
  uint32_t retire = 0;
  if (c.st.message) {
    // Messages complete whole: no data event. Each buffer goes to the NIC as the MS of its
    // message number, in order (the NIC finds message m at m - head), once the NIC flow is
    // known to place by message; the copy path takes what it does not place.
    complete_messages(c, ctx);
    c.rcv_progress = 0;
    if (c.msg_ok && c.synced && !c.fenced && !c.nic_msg_off) post_messages(c, ctx);
  }
  while (!c.st.message && !c.recvq.empty()) {
    const RecvBuf& b = c.recvq.front();
    const bool full = b.start + b.len <= c.rcv_stream;
    if (!full && !c.fin_received) break;
    if (b.on_nic) retire++;
    const uint64_t have = c.rcv_stream > b.start ? c.rcv_stream - b.start : 0;
    const uint32_t len = uint32_t(std::min<uint64_t>(have, b.len));
    if (!full) c.rcv_progress = 0;  // the partial buffer completes: no separate progress event
    ctx.event({c.flow, EventKind::kRecvDone, 0, len, 0, b.wr_id});
    c.recvq.pop_front();
  }
  if (retire != 0) {
    ctx.ms_retire(c.flow, retire);
    c.nic_ms -= retire;
  }
  // Buffers the NIC does not have yet go to it in stream order, once it knows the flow. On an
  // empty list the NIC starts at its cursor, so a buffer the copy path partly filled is posted
  // from there on.
  if (c.synced && !c.fenced && !c.st.message) {
    for (size_t i = 0; i < c.recvq.size(); i++) {
      RecvBuf& b = c.recvq[i];
      if (b.on_nic) continue;
      const uint64_t skip = c.nic_ms == 0 && c.rcv_stream > b.start ? c.rcv_stream - b.start : 0;
      if (ctx.ms_post(c.flow, b.mr, b.offset + skip, uint32_t(b.len - skip), 0) != 0) break;
      b.on_nic = true;
      c.nic_ms++;
    }
  }
  if (c.rcv_progress != 0) {
    ctx.event({c.flow, EventKind::kRecvData, 0, c.rcv_progress, 0, 0});
    c.rcv_progress = 0;
  }

  output(c, ctx);
  if (c.state == State::kClosed) return;

  // Window update: tell the peer when posted buffers opened the window well beyond what it
  // knows (receiver SWS avoidance, RFC 9293 3.8.6.2.2: at least an MSS or half the buffers).
  if (c.state != State::kSynSent && c.state != State::kSynReceived) {
    const uint32_t space = std::min(c.rcv_space(), uint32_t(0xFFFF) << c.rcv_wscale);
    const uint32_t known = c.rcv_adv - c.rcv_nxt;
    if (space > known && space - known >= std::min<uint32_t>(c.eff_mss, space / 2) &&
        known < space / 2) {
      c.ack_now = true;
      // The peer thought the window (nearly) closed and may be waiting only for this update,
      // with nothing in flight to bring another: if it is lost, a sender would wait for its
      // persist timer (200 ms and more). Send it again unless the peer's data arrives first.
      if (known < c.eff_mss && space >= c.eff_mss) {
        c.wnd_repeats = 2;
        wheel_.arm(&c.wnd_timer, wnd_repeat_ns(c));
      }
    }
    // Message credit: tell the peer when it knows of at most half of our posted receives.
    if (c.msg_ok && c.msg_limit() != c.msg_limit_adv &&
        int32_t(c.msg_limit_adv - c.rcv_msg_no) <= int32_t(c.recvq.size() / 2)) {
      c.ack_now = true;
    }
  }
  if (c.ack_now) {
    send_ack(c, ctx);
  } else if (c.unacked_segs != 0 && !c.delack_timer.armed()) {
    wheel_.arm(&c.delack_timer, uint64_t(c.st.delack_ms) * 1'000'000);
  }
  if (c.state == State::kTimeWait) to_time_wait(c, ctx);
}

}  // namespace cleave::transport::tcp
