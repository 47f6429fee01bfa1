// tcp.cc - TCP control: parameters, listen/connect, app requests, connection life, flow_info.
#include "tcp.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "tcp_conn.h"

namespace cleave::transport::tcp {

std::string_view state_name(State s) {
  switch (s) {
    case State::kClosed:
      return "CLOSED";
    case State::kSynSent:
      return "SYN-SENT";
    case State::kSynReceived:
      return "SYN-RECEIVED";
    case State::kEstablished:
      return "ESTABLISHED";
    case State::kFinWait1:
      return "FIN-WAIT-1";
    case State::kFinWait2:
      return "FIN-WAIT-2";
    case State::kCloseWait:
      return "CLOSE-WAIT";
    case State::kClosing:
      return "CLOSING";
    case State::kLastAck:
      return "LAST-ACK";
    case State::kTimeWait:
      return "TIME-WAIT";
  }
  return "?";
}

// ---- parameters ---------------------------------------------------------------------------------

namespace {

bool parse_bool(std::string_view v, bool& out) {
  if (v == "1" || v == "on" || v == "yes" || v == "true") {
    out = true;
    return true;
  }
  if (v == "0" || v == "off" || v == "no" || v == "false") {
    out = false;
    return true;
  }
  return false;
}

struct U32Key {
  std::string_view key;
  uint32_t Settings::*field;
  uint32_t lo;
  uint32_t hi;
};
constexpr U32Key kU32Keys[] = {
    {"delack_ms", &Settings::delack_ms, 1, 500},
    {"rto_min_ms", &Settings::rto_min_ms, 1, 60000},
    {"rto_initial_ms", &Settings::rto_initial_ms, 1, 60000},
    {"rto_max_ms", &Settings::rto_max_ms, 1, 600000},
    {"time_wait_ms", &Settings::time_wait_ms, 0, 240000},
    {"fin_wait2_ms", &Settings::fin_wait2_ms, 0, 600000},
    {"syn_retries", &Settings::syn_retries, 1, 127},
    {"retries", &Settings::retries, 1, 255},
    {"backlog", &Settings::backlog, 1, 65535},
};

}  // namespace

std::string parse_settings(Params params, Settings& out) {
  for (const Param& p : params) {
    std::string bad = "tcp: bad value '" + std::string(p.value) + "' for " + std::string(p.key);
    if (p.key == "cc") {
      if (p.value.size() >= sizeof(out.cc)) return bad;
      cc::Storage probe;
      cc::Algorithm* a = cc::construct(p.value, probe);
      if (a == nullptr) {
        std::string names;
        for (std::string_view n : cc::names())
          names += (names.empty() ? "" : ", ") + std::string(n);
        return "tcp: unknown congestion control '" + std::string(p.value) + "' (have " + names +
               ")";
      }
      a->~Algorithm();
      std::memcpy(out.cc, p.value.data(), p.value.size());
      out.cc[p.value.size()] = '\0';
      continue;
    }
    uint32_t v = 0;
    if (p.key == "mss") {
      if (!parse_u32(p.value, 88, 9000 - 40, v)) return bad + " (88..8960)";
      out.mss = uint16_t(v);
    } else if (p.key == "wscale") {
      if (!parse_u32(p.value, 0, kMaxWscale, v)) return bad + " (0..14)";
      out.wscale = uint8_t(v);
    } else if (p.key == "sack") {
      if (!parse_bool(p.value, out.sack)) return bad + " (on|off)";
    } else if (p.key == "timestamps") {
      if (!parse_bool(p.value, out.timestamps)) return bad + " (on|off)";
    } else if (p.key == "message") {
      if (!parse_bool(p.value, out.message)) return bad + " (on|off)";
    } else if (p.key == "syncookies") {
      if (!parse_bool(p.value, out.syncookies)) return bad + " (on|off)";
    } else if (p.key == "ecn") {
      bool b = false;
      if (!parse_bool(p.value, b)) return bad + " (on|off)";
      out.ecn = b ? 1 : 0;
    } else if (p.key == "isn") {
      if (!parse_u32(p.value, 0, 0xFFFFFFFFu, v)) return bad;
      out.fixed_isn = true;
      out.isn = v;
    } else {
      bool found = false;
      for (const U32Key& k : kU32Keys) {
        if (p.key != k.key) continue;
        if (!parse_u32(p.value, k.lo, k.hi, v)) {
          return bad + " (" + std::to_string(k.lo) + ".." + std::to_string(k.hi) + ")";
        }
        out.*k.field = v;
        found = true;
      }
      if (!found) {
        return "tcp: unknown parameter '" + std::string(p.key) +
               "' (have cc, mss, wscale, sack, timestamps, ecn, message, isn, delack_ms, "
               "rto_min_ms, "
               "rto_initial_ms, rto_max_ms, time_wait_ms, fin_wait2_ms, syn_retries, retries, "
               "backlog, syncookies)";
      }
    }
  }
  if (out.rto_min_ms > out.rto_max_ms) return "tcp: rto_min_ms is above rto_max_ms";
  return "";
}

// ---- ranges
// ---------------------------------------------------------------------------------------

bool RangeSet::add(uint32_t left, uint32_t right) {
  if (!seq_lt(left, right)) return true;
  // Find the first range whose right edge reaches left.
  size_t i = 0;
  while (i < n && seq_lt(r[i].right, left))
    i++;
  if (i == n || seq_lt(right, r[i].left)) {
    if (n == kMax) return false;
    for (size_t k = n; k > i; k--)
      r[k] = r[k - 1];
    r[i] = {left, right};
    n++;
    return true;
  }
  // Overlaps or touches r[i]: extend it and swallow the ranges it now reaches.
  r[i].left = seq_min(r[i].left, left);
  r[i].right = seq_max(r[i].right, right);
  size_t j = i + 1;
  while (j < n && seq_leq(r[j].left, r[i].right)) {
    r[i].right = seq_max(r[i].right, r[j].right);
    j++;
  }
  const size_t gone = j - i - 1;
  for (size_t k = i + 1; k + gone < n; k++)
    r[k] = r[k + gone];
  n = uint8_t(n - gone);
  return true;
}

void RangeSet::drop_below(uint32_t seq) {
  size_t i = 0;
  while (i < n && seq_leq(r[i].right, seq))
    i++;
  if (i != 0) {
    for (size_t k = 0; k + i < n; k++)
      r[k] = r[k + i];
    n = uint8_t(n - i);
  }
  if (n != 0 && seq_lt(r[0].left, seq)) r[0].left = seq;
}

const SackBlock* RangeSet::find(uint32_t seq) const {
  for (size_t i = 0; i < n; i++) {
    if (seq_geq(seq, r[i].left) && seq_lt(seq, r[i].right)) return &r[i];
  }
  return nullptr;
}

bool RangeSet::covers(uint32_t left, uint32_t right) const {
  for (size_t i = 0; i < n; i++) {
    if (seq_leq(r[i].left, left) && seq_geq(r[i].right, right)) return true;
  }
  return false;
}

bool RangeSet::remove(uint32_t left, uint32_t right) {
  for (size_t i = 0; i < n; i++) {
    SackBlock& b = r[i];
    if (!seq_lt(left, b.right) || !seq_lt(b.left, right)) continue;
    if (seq_gt(left, b.left) && seq_lt(right, b.right)) {
      // Inside: split in two.
      if (n == kMax) return false;
      for (size_t k = n; k > i + 1; k--)
        r[k] = r[k - 1];
      r[i + 1] = {right, b.right};
      r[i].right = left;
      n++;
      return true;
    }
    if (seq_gt(left, b.left)) {
      b.right = left;
    } else if (seq_lt(right, b.right)) {
      b.left = right;
    } else {
      for (size_t k = i; k + 1 < n; k++)
        r[k] = r[k + 1];
      n--;
      i--;
    }
  }
  return true;
}

uint64_t RangeSet::bytes() const {
  uint64_t b = 0;
  for (size_t i = 0; i < n; i++)
    b += r[i].right - r[i].left;
  return b;
}

// RFC 6675 SetPipe, by bytes: what is outstanding, less what the peer holds (SACKed) and what is
// deemed lost (holes below the highest SACK, in recovery), plus what was resent of those holes.
uint64_t Conn::inflight() const {
  if (rto_recovery) {
    // After an RTO everything outstanding is deemed lost (RFC 5681 3.1): in flight is only what
    // went out again since, less what the peer holds of it.
    uint64_t out = snd_nxt - snd_una;
    for (size_t i = 0; i < sacked.n && seq_lt(sacked.r[i].left, snd_nxt); i++)
      out -= seq_min(sacked.r[i].right, snd_nxt) - sacked.r[i].left;
    return out;
  }
  uint64_t out = snd_max - snd_una;
  if (sacked.n == 0) {
    const uint64_t l = in_recovery ? lost.bytes() : 0;
    return out > l ? out - l : 0;
  }
  uint64_t sacked_bytes = sacked.bytes();
  uint64_t holes = 0;
  uint64_t resent = 0;
  if (in_recovery) {
    uint32_t at = snd_una;
    const uint32_t rxt = seq_min(high_rxt, high_sack);
    for (size_t i = 0; i < sacked.n; i++) {
      const uint32_t l = sacked.r[i].left;
      holes += l - at;
      if (seq_gt(rxt, at)) resent += seq_min(rxt, l) - at;
      at = sacked.r[i].right;
    }
  }
  // What RACK marked lost is either resent (below HighRxt) or above the highest SACK: out of
  // the network either way until it goes again.
  const uint64_t gone = sacked_bytes + holes + (in_recovery ? lost.bytes() : 0);
  return (out > gone ? out - gone : 0) + resent;
}

// ---- the transport
// ---------------------------------------------------------------------------------

TcpTransport::TcpTransport(uint64_t tick_ns)
    : wheel_(tick_ns, 0), tick_ns_(tick_ns), isn_secret_(std::random_device{}()) {
  std::random_device rd;
  isn_secret_ = isn_secret_ << 32 | rd();
  for (uint64_t& k : cookie_key_)
    k = uint64_t(rd()) << 32 | rd();
}

TcpTransport::~TcpTransport() {
  for (auto& c : conns_) {
    if (c && c->cc != nullptr) c->cc->~Algorithm();
  }
}

std::string TcpTransport::check_params(Params params) const {
  Settings s;
  return parse_settings(params, s);
}

std::string TcpTransport::configure(Params params) {
  for (const Param& p : params) {
    uint32_t n = 0;
    if (p.key != "max_time_wait")
      return "tcp: no transport-wide setting \"" + std::string(p.key) + "\"";
    if (!parse_u32(p.value, 0, UINT32_MAX, n)) {
      return "tcp: max_time_wait must be a number, got \"" + std::string(p.value) + "\"";
    }
    set_max_time_wait(n);
  }
  return "";
}

int TcpTransport::listen(ListenerId listener, const Endpoint& local, Params params) {
  Settings s;
  if (!parse_settings(params, s).empty()) return -EINVAL;
  if (listener >= listeners_.size()) listeners_.resize(listener + 1);
  if (listeners_[listener].used) return -EEXIST;
  listeners_[listener] = Listener{true, local, s, ++listener_gen_, 0, 0};
  return 0;
}

void TcpTransport::unlisten(ListenerId listener) {
  if (listener < listeners_.size()) listeners_[listener].used = false;
}

uint32_t TcpTransport::ts_now() const {
  return uint32_t(now_ns_ / 1'000'000);
}

Conn& TcpTransport::new_conn(FlowId id, const FlowTuple& tuple, const Settings& st) {
  if (id >= conns_.size()) conns_.resize(size_t(id) + 1);
  conns_[id] = std::make_unique<Conn>();
  Conn& c = *conns_[id];
  nconns_++;
  ctr_.conn_opened++;
  c.tp = this;
  c.flow = id;
  c.tuple = tuple;
  c.st = st;
  if (iss_set_) {
    c.iss = iss_next_;  // above what the TIME-WAIT record before it sent (RFC 6191)
    iss_set_ = false;
  } else if (st.fixed_isn) {
    c.iss = st.isn;
  } else {
    // RFC 6528: a keyed hash of the tuple plus a 4 µs clock.
    uint64_t h = isn_secret_ ^ (uint64_t(tuple.local.port) << 16 | tuple.remote.port);
    for (uint8_t b : tuple.remote.ip.bytes)
      h = (h ^ b) * 0x100000001b3ull;
    for (uint8_t b : tuple.local.ip.bytes)
      h = (h ^ b) * 0x100000001b3ull;
    h ^= h >> 29;
    c.iss = uint32_t(h) + uint32_t(now_ns_ / 4000);
  }
  c.snd_una = c.snd_nxt = c.snd_max = c.prior_una = c.iss;
  c.snd_end = c.iss + 1;
  c.high_rxt = c.recover = c.iss;
  c.rto = uint64_t(st.rto_initial_ms) * 1'000'000;
  c.cc = cc::construct(st.cc, c.cc_mem);
  c.ccs.mss = st.mss;
  c.cc->init(c.ccs, now_ns_);
  c.rto_timer.arg = c.delack_timer.arg = c.misc_timer.arg = &c;
  c.reo_timer.arg = c.tlp_timer.arg = c.wnd_timer.arg = &c;
  c.wnd_timer.fn = on_wnd_timer;
  c.reo_timer.fn = on_reo_timer;
  c.tlp_timer.fn = on_tlp_timer;
  c.rto_timer.fn = on_rto_timer;
  c.delack_timer.fn = on_delack_timer;
  c.misc_timer.fn = on_misc_timer;
  return c;
}

int TcpTransport::connect(FlowId flow, const FlowTuple& tuple, Params params, Context& ctx) {
  if (flow == kNoFlow) return -EINVAL;
  if (tuple.proto != 6) return -EPROTONOSUPPORT;
  if (conn(flow) != nullptr) return -EEXIST;
  Settings s;
  if (!parse_settings(params, s).empty()) return -EINVAL;
  begin(ctx);
  Conn& c = new_conn(flow, tuple, s);
  c.state = State::kSynSent;
  send_syn(c, ctx);
  arm_rto(c);
  end(ctx);
  return 0;
}

State TcpTransport::state(FlowId flow) const {
  if (tw(flow) != nullptr) return State::kTimeWait;
  const Conn* c = conn(flow);
  return c != nullptr ? c->state : State::kClosed;
}

void TcpTransport::touch(Conn& c) {
  if (!c.dirty) {
    c.dirty = true;
    dirty_.push_back(&c);
  }
}

// ---- app requests
// -----------------------------------------------------------------------------------

void TcpTransport::app_burst(std::span<const AppRequest> reqs, Context& ctx) {
  begin(ctx);
  for (const AppRequest& r : reqs) {
    Conn* c = conn(r.flow);
    const bool open = c != nullptr && c->state != State::kClosed;
    switch (r.kind) {
      case ReqKind::kSend: {
        // Sending is allowed until the app closes; before the handshake completes it queues.
        const bool can = open && !c->fin_queued && c->state != State::kTimeWait;
        if (!can || r.len == 0 || r.len > kMaxSendQueue) {
          ctx.event({r.flow, EventKind::kSendDone, !open ? -ENOTCONN : (can ? -EINVAL : -EPIPE), 0,
                     0, r.wr_id});
          break;
        }
        if (c->snd_end - c->snd_una > kMaxSendQueue - r.len) {
          // Sequence numbers compare modulo 2^32: keep what is queued far below 2^31.
          ctx.event({r.flow, EventKind::kSendDone, -ENOBUFS, 0, 0, r.wr_id});
          break;
        }
        c->sendq.push_back({c->snd_end, r.len, r.offset, r.wr_id, r.mr, c->snd_msg_no++});
        c->snd_end += r.len;
        touch(*c);
        break;
      }
      case ReqKind::kRecv: {
        if (!open || c->fin_received || r.len == 0) {
          ctx.event({r.flow, EventKind::kRecvDone, !open ? -ENOTCONN : (r.len == 0 ? -EINVAL : 0),
                     0, 0, r.wr_id});
          break;
        }
        RecvBuf b{c->posted_end, r.len, r.offset, r.wr_id, r.mr, false};
        b.msg_no = c->msg_limit();  // message mode: the next number without a receive
        c->posted_end += r.len;
        c->recvq.push_back(b);
        touch(*c);
        break;
      }
      case ReqKind::kClose:
        if (!open) break;
        if (c->state == State::kSynSent || c->state == State::kSynReceived) {
          // Nothing was promised to the peer's app yet: RFC 9293 lets us just go.
          if (c->state == State::kSynReceived) send_rst(*c, ctx);
          finish(*c, EventKind::kClosed, 0, ctx);
          break;
        }
        if (!c->fin_queued) {
          c->fin_queued = true;
          touch(*c);
        }
        break;
      case ReqKind::kAbort:
        if (!open) break;
        if ((r.flags & kReqDetach) != 0 && detach(*c, ctx)) break;
        if (c->state != State::kSynSent && c->state != State::kTimeWait) send_rst(*c, ctx);
        finish(*c, EventKind::kClosed, -ECONNABORTED, ctx);
        break;
      case ReqKind::kWrite:
      case ReqKind::kRead:  // RDMA: not a TCP operation
        ctx.event({r.flow, r.kind == ReqKind::kWrite ? EventKind::kWriteDone : EventKind::kReadDone,
                   -EOPNOTSUPP, 0, 0, r.wr_id});
        break;
    }
  }
  end(ctx);
}

// ---- the end of a flow
// --------------------------------------------------------------------------------

void TcpTransport::finish(Conn& c, EventKind kind, int32_t status, Context& ctx) {
  const FlowId id = c.flow;
  end_half_open(c);
  notify_end(c, kind, status, ctx);
  cancel_timers(c);
  c.state = State::kClosed;
  ctx.flow_closed(id);
  // A connection on this burst's list is freed by after_burst, which skips closed ones.
  if (!c.dirty) release(c);
}

void TcpTransport::notify_end(Conn& c, EventKind kind, int32_t status, Context& ctx) {
  if (c.app_done) return;
  c.app_done = true;
  const FlowId id = c.flow;
  // Every pending request completes: sends that were not acknowledged fail, receive buffers
  // return with what they hold (EOF after a graceful end).
  const int32_t send_status = status != 0 ? status : -EPIPE;
  for (; !c.sendq.empty(); c.sendq.pop_front()) {
    const SendChunk& s = c.sendq.front();
    ctx.event({id, EventKind::kSendDone, send_status, 0, 0, s.wr_id});
  }
  for (; !c.recvq.empty(); c.recvq.pop_front()) {
    const RecvBuf& b = c.recvq.front();
    // The NIC must place nothing more in a buffer the app gets back. A byte stream's MSs go
    // with the NIC flow (flow_closed); a message's MS retires by its number here.
    if (b.on_nic && c.st.message) {
      ctx.ms_retire_msg(id, b.msg_no);
      c.nic_ms--;
    }
    // A message-mode buffer holds no whole message (those completed already): it returns empty.
    const uint64_t have = !c.st.message && c.rcv_stream > b.start ? c.rcv_stream - b.start : 0;
    ctx.event({id, EventKind::kRecvDone, have == 0 ? status : 0,
               uint32_t(std::min<uint64_t>(have, b.len)), 0, b.wr_id});
  }
  if (c.accepted || !c.passive) ctx.event({id, kind, status, 0, 0, 0});
}

// The app left (kReqDetach). A connection it closed whose data the peer has all acknowledged
// needs none of its memory to finish: FIN-WAIT and CLOSING go on (only the FIN may be resent)
// to TIME-WAIT, where a compact record stays. A TIME-WAIT connection stays as it is. Anything
// else is reset by the caller.
bool TcpTransport::detach(Conn& c, Context& ctx) {
  if (c.state == State::kTimeWait) return true;
  const bool closing =
      c.state == State::kFinWait1 || c.state == State::kFinWait2 || c.state == State::kClosing;
  if (!closing || !c.fin_queued || seq_lt(c.snd_una, c.snd_end)) return false;
  notify_end(c, EventKind::kClosed, -ECONNABORTED, ctx);
  c.orphan = true;
  ctr_.orphaned++;
  touch(c);
  return true;
}

void TcpTransport::release(Conn& c) {
  const FlowId id = c.flow;
  c.cc->~Algorithm();
  c.cc = nullptr;
  conns_[id].reset();
  nconns_--;
  ctr_.conn_closed++;
}

// ---- management
// ------------------------------------------------------------------------------------

bool TcpTransport::flow_info(FlowId flow, InfoSink& out) const {
  if (const TimeWait* w = tw(flow); w != nullptr) {
    out.text("state", state_name(State::kTimeWait));
    out.text("timestamps", w->ts_ok ? "on" : "off");
    return true;
  }
  const Conn* c = conn(flow);
  if (c == nullptr) return false;
  out.text("state", state_name(c->state));
  out.text("cc", c->cc != nullptr ? c->cc->name() : "-");
  // Where loss recovery stands, in Linux's names (tcpi_ca_state): recovery (fast recovery), loss
  // (after an RTO, until what was outstanding then is acknowledged), cwr (the window of data
  // after an ECN reduction), open.
  out.text("ca_state", c->rto_recovery   ? "loss"
                       : c->in_recovery  ? "recovery"
                       : c->ecn_reacting ? "cwr"
                                         : "open");
  out.number("mss", c->eff_mss);
  out.number("cwnd", c->ccs.cwnd);
  // Like ss(8): no ssthresh until a loss (or DCTCP's first window) sets one.
  if (c->ccs.ssthresh < (1ull << 40)) out.number("ssthresh", c->ccs.ssthresh);
  out.number("srtt_us", c->rtt.srtt() / 1000);
  out.number("rttvar_us", c->rtt.rttvar() / 1000);
  out.number("rto_ms", c->rto / 1'000'000);
  out.number("bytes_in_flight", c->inflight());
  out.number("snd_wnd", c->snd_wnd);
  out.number("rcv_wnd", c->rcv_adv - c->rcv_nxt);
  out.number("snd_wscale", c->snd_wscale);
  out.number("rcv_wscale", c->rcv_wscale);
  out.text("sack", c->sack_ok ? "on" : "off");
  out.text("timestamps", c->ts_ok ? "on" : "off");
  out.text("ecn", c->ecn_ok ? "on" : "off");
  out.text("message", c->msg_ok ? "on" : "off");
  out.number("sack_scoreboard", c->sacked.n);
  out.number("ooo_ranges", c->ooo.n);
  out.number("retransmits", c->retransmits);
  out.number("rtos", c->rtos);
  out.number("fast_recoveries", c->fast_recoveries);
  out.number("tlp_probes", c->tlp_probes);
  out.number("rack_losses", c->rack_losses);
  out.number("undos", c->undos);
  out.number("ecn_reductions", c->ecn_reductions);
  out.number("bytes_sent", c->bytes_sent);
  out.number("bytes_acked", c->bytes_acked);
  out.number("bytes_received", c->bytes_received);
  out.number("placed_bytes", c->placed_bytes);
  out.number("copied_bytes", c->copied_bytes);
  out.number("dup_bytes", c->dup_bytes);
  out.number("send_queue", c->sendq.size());
  out.number("recv_buffers", c->recvq.size());
  out.number("msgs_sent", c->snd_msg_no);
  out.number("msgs_received", c->rcv_msg_no);
  out.number("msgs_truncated", c->msg_truncated);
  return true;
}

void TcpTransport::stats(InfoSink& out) const {
  const Counters& c = ctr_;
  for (const auto& [key, value] : {std::pair<std::string_view, uint64_t>{"segs_in", c.segs_in},
                                   {"segs_merged", c.segs_merged},
                                   {"segs_out", c.segs_out},
                                   {"data_segs_out", c.data_segs_out},
                                   {"retransmits", c.retransmits},
                                   {"bad_header", c.bad_header},
                                   {"bad_csum", c.bad_csum},
                                   {"no_flow", c.no_flow},
                                   {"paws_drops", c.paws_drops},
                                   {"challenge_acks", c.challenge_acks},
                                   {"acks_rate_limited", c.acks_rate_limited},
                                   {"rst_in", c.rst_in},
                                   {"rst_out", c.rst_out},
                                   {"out_of_window", c.out_of_window},
                                   {"dup_bytes", c.dup_bytes},
                                   {"placed_bytes", c.placed_bytes},
                                   {"copied_bytes", c.copied_bytes},
                                   {"copy_faults", c.copy_faults},
                                   {"dsacks_in", c.dsacks_in},
                                   {"fast_recoveries", c.fast_recoveries},
                                   {"rtos", c.rtos},
                                   {"ecn_reductions", c.ecn_reductions},
                                   {"tlp_probes", c.tlp_probes},
                                   {"rack_losses", c.rack_losses},
                                   {"undos", c.undos},
                                   {"zero_window_probes", c.zero_window_probes},
                                   {"window_update_repeats", c.window_update_repeats},
                                   {"conn_opened", c.conn_opened},
                                   {"conn_closed", c.conn_closed},
                                   {"msg_refused", c.msg_refused},
                                   {"msg_bad", c.msg_bad},
                                   {"msg_no_buffer", c.msg_no_buffer},
                                   {"msg_truncated", c.msg_truncated},
                                   {"syn_no_room", c.syn_no_room},
                                   {"syncookies_sent", c.syncookies_sent},
                                   {"syncookies_recv", c.syncookies_recv},
                                   {"syncookies_failed", c.syncookies_failed},
                                   {"syn_dropped_no_room", c.syn_dropped_no_room},
                                   {"syn_dropped_refused", c.syn_dropped_refused},
                                   {"listen_overflows", c.listen_overflows},
                                   {"time_wait", c.time_wait},
                                   {"time_wait_overflow", c.time_wait_overflow},
                                   {"time_wait_recycled", c.time_wait_recycled},
                                   {"time_wait_acks", c.time_wait_acks},
                                   {"time_wait_records", uint64_t(ntw_)},
                                   {"orphaned", c.orphaned}})
    out.number(key, value);
}

std::unique_ptr<Transport> make_transport() {
  return std::make_unique<TcpTransport>();
}

}  // namespace cleave::transport::tcp
