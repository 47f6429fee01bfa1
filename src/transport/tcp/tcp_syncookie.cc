// tcp_syncookie.cc - the listener's half-open budget and SYN cookies past it (RFC 4987 3.6).
//
// A listener holds at most `backlog` connections in SYN-RECEIVED, and each also needs a flow
// the dataplane may not have room for (the app's flow quota, its completion queue, the flow
// table). A SYN that finds no room is answered without any state: the SYN-ACK's sequence number
// is a cookie that the peer's ACK returns (ACK - 1), and only a valid one makes the connection.
// Nothing is allocated per SYN on that path; the answer goes out through Context::reply.
//
// The cookie, as Linux builds it (the same layout, our own code):
//   ISS = H(tuple, 0, 0) + peer ISN + (count << 24) + ((H(tuple, count, 1) + mss index) mod 2^24)
// H is SipHash-2-4 under a random key; count is a minute counter, and a cookie is good for two
// of them; the MSS is the largest of 536, 1300, 1440, 1460 not above the peer's and ours.
// When the SYN had timestamps (and the listener takes them), the low six bits of our TSval say
// what else was agreed, as Linux's cookie_init_timestamp does: the peer's window scale (0xF for
// none) in bits 0-3, SACK-permitted in bit 4, ECN in bit 5; the peer echoes them in TSecr.
// Without timestamps nothing but the MSS is offered (no window scale, no SACK, no ECN).
// An ACK to the listener is checked only while cookies went out in the last two minutes, as
// Linux does; an invalid one gets a RST (RFC 9293 3.10.7.2). Our SYN-ACKs offer a zero window
// (no receive is posted before the app accepts), so a peer whose ACK found no room yet sends
// zero-window probes next, one below its next sequence number: those complete the handshake
// too (SEG.SEQ taken as its ISN), as its later data segments do on Linux.
#include <algorithm>
#include <array>
#include <cerrno>

#include "siphash.h"
#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {
namespace {

constexpr std::array<uint16_t, 4> kCookieMss{536, 1300, 1440, 1460};
constexpr uint32_t kCookieBits = 24;
constexpr uint32_t kCookieMask = (1u << kCookieBits) - 1;
constexpr uint64_t kCookiePeriodNs = 60'000'000'000ull;  // the counter counts minutes
constexpr uint32_t kCookieMaxAge = 2;                    // periods a cookie stays good
constexpr uint32_t kTsBits = 6;                          // low TSval bits carrying options
constexpr uint32_t kTsMask = (1u << kTsBits) - 1;
constexpr uint32_t kTsNoWscale = 0xF;
constexpr uint32_t kTsSack = 1u << 4;
constexpr uint32_t kTsEcn = 1u << 5;

}  // namespace

uint32_t TcpTransport::cookie_hash(const FlowTuple& t, uint32_t count, uint32_t c) const {
  const uint64_t m[3] = {
      uint64_t(t.remote.ip.v4_host()) << 32 | t.local.ip.v4_host(),
      uint64_t(t.remote.port) << 48 | uint64_t(t.local.port) << 32 | count,
      c,
  };
  return uint32_t(siphash24(cookie_key_, m, 3));
}

void TcpTransport::end_half_open(Conn& c) {
  if (!c.half_open) return;
  c.half_open = false;
  if (c.listener >= listeners_.size()) return;
  Listener& l = listeners_[c.listener];
  if (l.used && l.gen == c.listener_gen && l.half_open != 0) l.half_open--;
}

void TcpTransport::send_cookie(const RxHeader& h, const Segment& s, Listener& l, Context& ctx) {
  const Settings& st = l.settings;
  const FlowTuple t = tuple_of(h, s);
  const uint16_t mss = std::min<uint16_t>(s.has_mss && s.mss != 0 ? s.mss : 536, st.mss);
  uint32_t ind = kCookieMss.size() - 1;
  while (ind > 0 && kCookieMss[ind] > mss)
    ind--;
  const auto count = uint32_t(now_ns_ / kCookiePeriodNs);
  BuildSpec b;
  b.src_port = t.local.port;
  b.dst_port = t.remote.port;
  b.seq = cookie_hash(t, 0, 0) + s.seq + (count << kCookieBits) +
          ((cookie_hash(t, count, 1) + ind) & kCookieMask);
  b.ack = s.seq + 1;
  b.flags = kSyn | kAck;
  b.window = 0;  // as any SYN-ACK of ours: no receive is posted before the app accepts
  b.mss = st.mss;
  if (s.has_ts && st.timestamps) {
    uint32_t opts = kTsNoWscale;
    if (s.has_wscale) {
      const uint8_t ws = std::min<uint8_t>(s.wscale, kMaxWscale);
      opts = ws;
      b.wscale_opt = st.wscale != 0 || ws != 0;
      b.wscale = st.wscale;
    }
    if (st.sack && s.sack_permitted) {
      opts |= kTsSack;
      b.sack_permitted = true;
    }
    if (st.ecn != 0 && (s.flags & (kEce | kCwr)) == (kEce | kCwr)) {
      opts |= kTsEcn;
      b.flags |= kEce;
    }
    // Our clock's value with the options in its low bits, never ahead of the clock.
    const uint32_t now = ts_now();
    b.ts_val = (now & ~kTsMask) | opts;
    if (seq_gt(b.ts_val, now)) b.ts_val -= 1u << kTsBits;
    b.ts = true;
    b.ts_ecr = s.ts_val;
  }
  uint8_t buf[kMaxHeaderLen];
  const size_t n = build(b, buf);
  l.cookies_until = now_ns_ + kCookieMaxAge * kCookiePeriodNs;
  if (ctx.reply(h, buf, n)) {
    ctr_.syncookies_sent++;
    ctr_.segs_out++;
  }
}

void TcpTransport::reply_rst(const RxHeader& h, const Segment& s, Context& ctx) {
  BuildSpec b;
  b.src_port = s.dst_port;
  b.dst_port = s.src_port;
  b.seq = s.ack;  // <SEQ=SEG.ACK><CTL=RST>: the segment carried an ACK
  b.flags = kRst;
  uint8_t buf[kMaxHeaderLen];
  const size_t n = build(b, buf);
  if (ctx.reply(h, buf, n)) {
    ctr_.rst_out++;
    ctr_.segs_out++;
  }
}

// An ACK to a listener: the third segment of a cookie's handshake, or a RST's business.
void TcpTransport::accept_cookie(const RxHeader& h, const Segment& s, Context& ctx) {
  Listener& l = listeners_[h.listener];
  const Settings& lst = l.settings;
  const FlowTuple t = tuple_of(h, s);
  const uint32_t cookie = s.ack - 1;
  const auto count = uint32_t(now_ns_ / kCookiePeriodNs);
  // The MSS index the cookie holds for a peer whose ISN was `isn`, or kCookieMss.size().
  auto check = [&](uint32_t isn) {
    const uint32_t c = cookie - cookie_hash(t, 0, 0) - isn;
    const uint32_t age = (count - (c >> kCookieBits)) & (0xFFFFFFFFu >> kCookieBits);
    if (age >= kCookieMaxAge) return uint32_t(kCookieMss.size());
    const uint32_t ind = (c - cookie_hash(t, count - age, 1)) & kCookieMask;
    return ind < kCookieMss.size() ? ind : uint32_t(kCookieMss.size());
  };
  bool ok = lst.syncookies && !lst.message && now_ns_ < l.cookies_until;
  uint32_t peer_isn = s.seq - 1;
  uint32_t ind = ok ? check(peer_isn) : 0;
  if (ok && ind == kCookieMss.size() && h.payload_len == 0 && (s.flags & kFin) == 0) {
    // Our SYN-ACK offers no window, so a peer whose ACK was dropped (no room) next sends a
    // zero-window probe, one below its next sequence number: SEG.SEQ is its ISN.
    peer_isn = s.seq;
    ind = check(peer_isn);
  }
  ok = ok && ind < kCookieMss.size();
  uint32_t ws = kTsNoWscale;
  bool sack = false;
  bool ecn = false;
  const bool ts = ok && s.has_ts && lst.timestamps;
  if (ts) {
    const uint32_t opts = s.ts_ecr & kTsMask;
    ws = opts & 0xF;
    sack = (opts & kTsSack) != 0;
    ecn = (opts & kTsEcn) != 0;
    // Options we would not have offered mean the echo was not ours.
    ok = (ws == kTsNoWscale || ws <= kMaxWscale) && (!sack || lst.sack) && (!ecn || lst.ecn != 0);
  }
  if (!ok) {
    if (now_ns_ < l.cookies_until) ctr_.syncookies_failed++;
    ctr_.no_flow++;
    reply_rst(h, s, ctx);
    return;
  }
  const FlowId id = ctx.flow_open_established(h.listener, t, peer_isn + 1, false);
  if (id == kNoFlow) {
    // Still no room: drop it as Linux does (ListenOverflows); the peer's next segment carries
    // the same cookie while it is good.
    if (ctx.flow_open_error() == -ENOBUFS) {
      ctr_.listen_overflows++;
    } else {
      ctr_.syn_dropped_refused++;
    }
    return;
  }
  if (conn(id) != nullptr || tw(id) != nullptr) {
    ctr_.no_flow++;
    return;
  }
  Settings st = lst;
  if (Params op = ctx.flow_params(id); !op.empty()) {
    Settings with = st;
    if (parse_settings(op, with).empty()) st = with;
  }
  Conn& c = new_conn(id, t, st);
  c.iss = cookie;
  c.snd_una = c.prior_una = c.snd_nxt = c.snd_max = c.snd_end = cookie + 1;
  c.high_rxt = c.recover = cookie + 1;
  c.passive = true;
  c.listener = h.listener;
  c.state = State::kEstablished;
  c.accepted = true;
  c.irs = peer_isn;
  c.rcv_nxt = c.rcv_adv = c.nic_cursor = c.rcv_msg_seq = peer_isn + 1;
  c.last_ack_sent = peer_isn + 1;
  c.synced = true;
  c.peer_mss = kCookieMss[ind];
  c.sack_ok = sack;
  c.ts_ok = ts;
  if (ts) {
    c.ts_recent = s.ts_val;
    c.ts_recent_valid = true;
  }
  if (ws != kTsNoWscale) {
    c.snd_wscale = uint8_t(ws);
    c.rcv_wscale = st.wscale;
  }
  c.ecn_ok = ecn;
  c.dctcp_echo = ecn && st.dctcp();
  c.eff_mss = uint16_t(std::min(c.peer_mss, st.mss) - data_options_len(ts));
  c.ccs.mss = c.eff_mss;
  c.cc->init(c.ccs, now_ns_);
  c.snd_wnd = uint32_t(s.window) << c.snd_wscale;
  c.max_snd_wnd = c.snd_wnd;
  c.snd_wl1 = peer_isn + 1;
  c.snd_wl2 = s.ack;
  ctr_.syncookies_recv++;
  ctx.event({id, EventKind::kAccepted, 0, 0, h.listener, 0});
  touch(c);
  // Data or a FIN with the handshake's last ACK: the connection takes it as any segment.
  if (h.payload_len != 0 || (s.flags & kFin) != 0) input_conn(c, h, s, ctx);
}

}  // namespace cleave::transport::tcp
