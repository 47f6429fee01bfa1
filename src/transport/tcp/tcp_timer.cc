// tcp_timer.cc - RTO (RFC 6298, Linux's floor), delayed ACKs, zero-window persist, entering
// TIME_WAIT (its record: tcp_timewait.cc) and FIN_WAIT_2; the transport's tick.
#include <algorithm>
#include <cerrno>

#include "tcp.h"
#include "tcp_conn.h"

namespace cleave::transport::tcp {

// Every entry point: the time of this call, and the timers due by it (they act through ctx).
void TcpTransport::begin(Context& ctx) {
  now_ns_ = ctx.now_ns();
  ctx_ = &ctx;
  wheel_.advance(now_ns_);
}

// ...and once per touched connection at its end.
void TcpTransport::end(Context& ctx) {
  for (size_t i = 0; i < dirty_.size(); i++)
    after_burst(*dirty_[i], ctx);
  dirty_.clear();
  ctx_ = nullptr;
}

void TcpTransport::tick(Context& ctx) {
  begin(ctx);
  end(ctx);
}

void TcpTransport::rtt_sample(Conn& c, uint64_t r) {
  c.rtt.sample(r);
  // The wheel's tick is the clock granularity G; then Linux's floor and the ceiling.
  c.rto = std::clamp<uint64_t>(c.rtt.rto(tick_ns_), uint64_t(c.st.rto_min_ms) * 1'000'000,
                               uint64_t(c.st.rto_max_ms) * 1'000'000);
  c.ccs.srtt_us = uint32_t(c.rtt.srtt() / 1000);
  const uint32_t us = uint32_t(std::max<uint64_t>(r / 1000, 1));
  if (c.ccs.min_rtt_us == 0 || us < c.ccs.min_rtt_us) c.ccs.min_rtt_us = us;
}

void TcpTransport::arm_rto(Conn& c) {
  const uint64_t max = uint64_t(c.st.rto_max_ms) * 1'000'000;
  const uint64_t t = c.backoff >= 20 ? max : std::min(max, c.rto << c.backoff);
  wheel_.arm(&c.rto_timer, t);
  c.rto_at = now_ns_ + t;
}

void TcpTransport::cancel_timers(Conn& c) {
  wheel_.cancel(&c.rto_timer);
  wheel_.cancel(&c.delack_timer);
  wheel_.cancel(&c.misc_timer);
  wheel_.cancel(&c.reo_timer);
  wheel_.cancel(&c.tlp_timer);
  wheel_.cancel(&c.wnd_timer);
}

void TcpTransport::enter_time_wait(Conn& c, Context& ctx) {
  c.state = State::kTimeWait;
  wheel_.cancel(&c.rto_timer);
  wheel_.cancel(&c.reo_timer);
  wheel_.cancel(&c.tlp_timer);
  wheel_.cancel(&c.misc_timer);
  // The app is done with the flow now; the quiet time is the transport's alone: at the end of
  // this burst (after the ACK of the peer's FIN) a compact record takes the connection's place
  // (to_time_wait).
  notify_end(c, EventKind::kClosed, 0, ctx);
  touch(c);
}

void TcpTransport::on_rto_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  TcpTransport& tp = *c.tp;
  Context& ctx = *tp.ctx_;
  if (c.state == State::kSynSent || c.state == State::kSynReceived) {
    if (c.backoff >= c.st.syn_retries) {
      tp.finish(c, c.state == State::kSynSent ? EventKind::kRefused : EventKind::kClosed,
                -ETIMEDOUT, ctx);
      return;
    }
    c.backoff++;
    tp.send_syn(c, ctx);
    tp.arm_rto(c);
    return;
  }
  if (c.snd_una == c.snd_max || c.persist) return;
  if (c.backoff >= c.st.retries) {
    tp.finish(c, EventKind::kClosed, -ETIMEDOUT, ctx);
    return;
  }
  // RFC 6298 5.4-5.6 and RFC 5681 3.1: back off, collapse the window, resend from snd_una. One
  // reduction per window of data: an RTO in fast recovery, or again before what was outstanding
  // at the last RTO is acknowledged (its resent segment lost too), keeps the ssthresh its episode
  // set (RFC 5681 3.1, as Linux's tcp_enter_loss); halving the flight recovery has emptied, or the
  // one segment the last RTO left, would take ssthresh to its 2 MSS floor.
  c.rtos++;
  tp.ctr_.rtos++;
  c.backoff++;
  c.ccs.inflight = c.flight_size();
  if (!c.in_recovery && !c.rto_recovery) {
    tp.undo_mark(c);
    c.rto_ts = c.ts_ok ? std::max(tp.ts_now(), 1u) : 0;
  }
  c.cc->on_rto(c.ccs, tp.now_ns_, !c.in_recovery && !c.rto_recovery);
  c.in_recovery = false;
  c.rto_recovery = true;
  c.need_rxt = false;
  c.recover = c.snd_max;
  c.high_rxt = c.snd_una;
  c.snd_nxt = c.snd_una;
  c.dupacks = 0;
  c.rtt_timing = false;
  c.tx_hint = 0;
  c.lost.clear();
  c.tlp_out = false;
  tp.wheel_.cancel(&c.reo_timer);
  tp.wheel_.cancel(&c.tlp_timer);
  tp.arm_rto(c);
  tp.touch(c);
}

void TcpTransport::on_delack_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  if (c.unacked_segs != 0 && c.state != State::kClosed) c.tp->send_ack(c, *c.tp->ctx_);
}

void TcpTransport::on_misc_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  TcpTransport& tp = *c.tp;
  Context& ctx = *tp.ctx_;
  switch (c.state) {
    case State::kTimeWait:
    case State::kFinWait2:
      tp.finish(c, EventKind::kClosed, 0, ctx);
      return;
    default:
      break;
  }
  if (c.persist) {
    tp.send_probe(c, ctx);
    c.backoff = std::min<uint32_t>(c.backoff + 1, 20);
    const uint64_t max = uint64_t(c.st.rto_max_ms) * 1'000'000;
    tp.wheel_.arm(&c.misc_timer, std::min(max, c.rto << c.backoff));
  }
}

// A window update that reopened a closed window, sent again (twice at most, the second after
// twice the wait) while no data came from the peer; only while the window is still open.
void TcpTransport::on_wnd_timer(Timer* /*t*/, void* arg) {
  Conn& c = *static_cast<Conn*>(arg);
  TcpTransport& tp = *c.tp;
  if (c.wnd_repeats == 0 || c.fin_received || c.state == State::kClosed) return;
  if (c.rcv_adv - c.rcv_nxt < c.eff_mss) return;
  c.wnd_repeats--;
  tp.ctr_.window_update_repeats++;
  tp.send_ack(c, *tp.ctx_);
  if (c.wnd_repeats != 0) tp.wheel_.arm(&c.wnd_timer, 2 * wnd_repeat_ns(c));
}

}  // namespace cleave::transport::tcp
