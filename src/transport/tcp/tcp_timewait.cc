// tcp_timewait.cc - TIME-WAIT as a compact record that outlives the app (RFC 9293 3.6).
//
// A connection that reaches TIME-WAIT (its app already heard kClosed) is replaced, at the end of
// the burst that got it there, by a TimeWait record: the ports, snd_nxt and rcv_nxt, the
// timestamp to echo and check (PAWS), the window our ACKs carry and a timer. The Conn, its
// queues and its NIC state go; the record keeps the flow id, so the dataplane still finds the
// tuple, and no app memory or completion queue. The record lasts time_wait_ms, 2 MSL with
// Linux's MSL of 30 s (60 s, the default), restarted by segments it answers, and answers as
// Linux's tcp_timewait_state_process does:
//   - in sequence (SEG.SEQ = RCV.NXT) and empty: a bare ACK is taken silently, a RST ends the
//     record (Linux's default, tcp_rfc1337 = 0);
//   - a SYN with a higher sequence number or a newer timestamp ends the record and opens a new
//     connection on the tuple through the listener, its ISS above the old snd_nxt (RFC 6191);
//   - anything else but a RST, a retransmitted FIN first of all, gets an ACK (RFC 9293
//     3.10.7.4), one that carries nothing at most once per kInvalidAckGapNs, and PAWS failures
//     are counted.
// At most max_time_wait records exist (tcp_max_tw_buckets); a connection that would make one
// more closes at once (time_wait_overflow), as Linux does. Records are pooled: after the first
// ones, making a record allocates nothing.
#include <algorithm>

#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {

void TcpTransport::to_time_wait(Conn& c, Context& ctx) {
  if (ntw_ >= max_tw_) {
    ctr_.time_wait_overflow++;
    finish(c, EventKind::kClosed, 0, ctx);
    return;
  }
  TimeWait* w;
  if (!tw_free_.empty()) {
    w = tw_free_.back();
    tw_free_.pop_back();
  } else {
    tw_pool_.push_back(std::make_unique<TimeWait>());
    w = tw_pool_.back().get();
  }
  w->tp = this;
  w->flow = c.flow;
  w->local_port = c.tuple.local.port;
  w->remote_port = c.tuple.remote.port;
  w->snd_nxt = c.snd_nxt;
  w->rcv_nxt = c.rcv_nxt;
  w->ts_ok = c.ts_ok;
  w->ts_recent = c.ts_recent;
  w->answered = false;
  const uint32_t adv = seq_gt(c.rcv_adv, c.rcv_nxt) ? c.rcv_adv - c.rcv_nxt : 0;
  w->window = uint16_t(std::min<uint32_t>(adv >> c.rcv_wscale, 0xFFFF));
  w->duration_ns = std::max<uint64_t>(uint64_t(c.st.time_wait_ms) * 1'000'000, 1);
  w->timer.fn = on_tw_timer;
  w->timer.arg = w;
  const FlowId id = c.flow;
  // The connection goes without telling the dataplane: the record keeps its flow id.
  cancel_timers(c);
  c.state = State::kClosed;
  release(c);
  if (id >= tw_.size()) tw_.resize(size_t(id) + 1, nullptr);
  tw_[id] = w;
  ntw_++;
  ctr_.time_wait++;
  wheel_.arm(&w->timer, w->duration_ns);
}

void TcpTransport::tw_free(TimeWait& w, Context& ctx) {
  wheel_.cancel(&w.timer);
  const FlowId id = w.flow;
  tw_[id] = nullptr;
  ntw_--;
  tw_free_.push_back(&w);
  ctx.flow_closed(id);
}

void TcpTransport::on_tw_timer(Timer* /*t*/, void* arg) {
  TimeWait& w = *static_cast<TimeWait*>(arg);
  w.tp->tw_free(w, *w.tp->ctx_);
}

void TcpTransport::tw_send_ack(TimeWait& w, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  BuildSpec b;
  b.src_port = w.local_port;
  b.dst_port = w.remote_port;
  b.seq = w.snd_nxt;
  b.ack = w.rcv_nxt;
  b.flags = kAck;
  b.window = w.window;
  if (w.ts_ok) {
    b.ts = true;
    b.ts_val = ts_now();
    b.ts_ecr = w.ts_recent;
  }
  d.flow = w.flow;
  d.l4_len = uint8_t(build(b, d.l4.data()));
  ctr_.segs_out++;
  ctr_.time_wait_acks++;
}

void TcpTransport::tw_input(TimeWait& w, const RxHeader& h, const Segment& s, Context& ctx) {
  const bool rst = (s.flags & kRst) != 0;
  const bool syn = (s.flags & kSyn) != 0;
  const bool ack = (s.flags & kAck) != 0;
  const uint32_t seglen = h.payload_len + (syn ? 1 : 0) + ((s.flags & kFin) != 0 ? 1 : 0);
  const bool paws_reject = w.ts_ok && s.has_ts && !rst && int32_t(s.ts_val - w.ts_recent) < 0;
  if (!paws_reject && s.seq == w.rcv_nxt && (seglen == 0 || rst)) {
    if (rst) {
      ctr_.rst_in++;
      tw_free(w, ctx);
      return;
    }
    if (w.ts_ok && s.has_ts) w.ts_recent = s.ts_val;
    wheel_.arm(&w.timer, w.duration_ns);
    return;
  }
  // A new incarnation of the tuple (RFC 9293 3.4.1 / RFC 6191): a SYN beyond what the old one
  // sent us, or with a newer timestamp.
  if (syn && !rst && !ack && !paws_reject &&
      (seq_gt(s.seq, w.rcv_nxt) || (w.ts_ok && s.has_ts && int32_t(s.ts_val - w.ts_recent) > 0))) {
    const uint32_t old_snd_nxt = w.snd_nxt;
    ctr_.time_wait_recycled++;
    tw_free(w, ctx);
    if (h.has_listener && h.listener < listeners_.size() && listeners_[h.listener].used) {
      iss_set_ = true;
      iss_next_ = old_snd_nxt + 65535 + 2;  // above anything the old connection sent
      input_listen(h, s, ctx);
      iss_set_ = false;
    }
    return;
  }
  if (paws_reject) ctr_.paws_drops++;
  if (rst) return;
  // A retransmitted FIN (our ACK of it was lost), an old duplicate, a SYN that may not reuse
  // the tuple: all are answered with an ACK, and the quiet time starts again when it was an ACK.
  // Those that carry nothing (a bare ACK or SYN) at most once per kInvalidAckGapNs, as a
  // connection answers them (Linux's tcp_timewait_check_oow_rate_limit): an end out of step
  // cannot keep the record ACKing its ACKs.
  if (paws_reject || ack) wheel_.arm(&w.timer, w.duration_ns);
  if (h.payload_len == 0 && (s.flags & kFin) == 0 && !may_answer(w.answered, w.answer_ns)) return;
  tw_send_ack(w, ctx);
}

}  // namespace cleave::transport::tcp
