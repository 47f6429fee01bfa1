// rc_timer.cc - time in a QP: the local ACK timer and its RTO (IBTA's, or RFC 6298's estimate
// under selective repeat), RNR waits, DCQCN's timers; RcTransport::tick().
#include <algorithm>

#include "rc_qp.h"

namespace cleave::transport::roce {

// The local ACK timer. Go-back-N: the QP's timeout attribute, as IBTA defines it. Selective
// repeat (IRN's point: a lossy fabric cannot wait 67 ms for each lost retransmission or tail):
// the RTO of the measured round trip, srtt + 4 rttvar, at least kSrRtoMinNs, doubled for each
// timeout in a row, never above the attribute's.
uint64_t rto_ns(const RcTransport::Qp& q) {
  const uint64_t cap = ack_timeout_ns(q.attr.timeout);
  if (!q.attr.selective_repeat || !q.rtt.has_sample()) return cap;
  const uint64_t r = std::max(kSrRtoMinNs, q.rtt.rto());
  return std::min(cap, r << std::min(q.backoff, 16u));
}

// The timed packet is acknowledged: a round-trip sample (RFC 6298 2.2, 2.3).
void rtt_sample(RcTransport::Qp& q, uint64_t now) {
  q.timing = false;
  q.rtt.sample(now - q.rtt_sent_ns);
}

void RcTransport::tick(Context& ctx) {
  const uint64_t now = ctx.now_ns();
  // From the back, so the entry a removal moves into place was already looked at.
  for (size_t i = ticking_.size(); i-- > 0;) {
    Qp& q = *qps_[ticking_[i]];
    if (q.attr.state != QpState::kRts && q.attr.state != QpState::kRtr) {
      q.ticking = false;  // left RTR and RTS (ERR, RESET): off the list until it comes back
      ticking_[i] = ticking_.back();
      ticking_.pop_back();
      continue;
    }
    if (q.rnr_until != 0 && now >= q.rnr_until) q.rnr_until = 0;
    if (q.dcqcn && q.attr.state == QpState::kRts && q.rp.tick(now)) set_rate(q);
    if (q.timer_ns != 0 && now >= q.timer_ns) {
      q.c.timeouts++;
      total_.timeouts++;
      q.timing = false;
      // Selective repeat's short timeouts back off first; retry_cnt counts those of the full
      // local ACK timeout, so a dead peer is declared no sooner than IBTA's timer would.
      const bool full = rto_ns(q) >= ack_timeout_ns(q.attr.timeout);
      if (full && q.retries_left == 0) {
        fail(q, -ETIMEDOUT, ctx, total_);
        continue;
      }
      if (full) q.retries_left--;
      q.backoff++;
      if (q.attr.selective_repeat) {
        resend_on_timeout(q);
      } else {
        rewind(q, q.una);
      }
      q.timer_ns = now + rto_ns(q);
    }
    if (q.rr_n != 0) respond(q, ctx, total_);
    // An ACK held back by queued READ responses goes once they are out.
    if (q.ack_pending && ack_point(q) == psn_add(q.epsn, kPsnMask)) send_due_ack(q, ctx, total_);
    pump(q, ctx, total_);
  }
}

}  // namespace cleave::transport::roce
