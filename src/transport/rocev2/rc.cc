// rc.cc - RcTransport's control and entry points: QP state (create, modify, query, destroy, ERR
// and its flush), app_burst and rx_burst handing each request and packet to the requester or the
// responder, flow_info and stats.
#include "rc.h"

#include <algorithm>
#include <bit>
#include <string>

#include "rc_qp.h"

namespace cleave::transport::roce {

namespace {

bool valid_pmtu(uint32_t m) {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

}  // namespace

std::string_view state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

RcTransport::RcTransport() = default;
RcTransport::~RcTransport() = default;

namespace {

// A QP's parameters: `dcqcn on|off` and DCQCN's constants (cc::DcqcnParams::set's keys);
// `spray N` (1-kMaxSpray source ports, 1: off) and `reorder K` (1-kMaxReorder packets).
struct QpOpts {
  bool dcqcn = true;
  cc::DcqcnParams dcqcn_params;
  uint32_t spray = 1;
  uint32_t reorder = 0;  // 0: not given

  // The reordering a hole is given before it is taken for lost: at once unless sprayed.
  uint32_t reorder_or_default() const {
    return reorder != 0 ? reorder : spray > 1 ? kSprayReorder : 1;
  }
};

std::string parse_count(const Param& x, uint32_t max, uint32_t* out) {
  if (parse_u32(x.value, 1, max, *out)) return "";
  return "rocev2: " + std::string(x.key) + " is a whole number from 1 to " + std::to_string(max) +
         ", not \"" + std::string(x.value) + "\"";
}

std::string apply_params(Params params, QpOpts* o) {
  for (const Param& x : params) {
    std::string err;
    if (x.key == "dcqcn") {
      if (x.value != "on" && x.value != "off") {
        return "rocev2: dcqcn is \"on\" or \"off\", not \"" + std::string(x.value) + "\"";
      }
      o->dcqcn = x.value == "on";
    } else if (x.key.starts_with("dcqcn_")) {
      err = o->dcqcn_params.set(x.key, x.value);
    } else if (x.key == "spray") {
      err = parse_count(x, kMaxSpray, &o->spray);
    } else if (x.key == "reorder") {
      err = parse_count(x, kMaxReorder, &o->reorder);
    } else {
      return "rocev2: unknown parameter \"" + std::string(x.key) +
             "\" (have dcqcn, dcqcn_*, spray and reorder)";
    }
    if (!err.empty()) return err;
  }
  return "";
}

}  // namespace

std::string RcTransport::check_params(Params params) const {
  QpOpts o;
  return apply_params(params, &o);
}

uint32_t RcTransport::qp_number(FlowId flow) const {
  const Qp* q = find(flow);
  return q == nullptr ? 0 : q->qpn;
}

namespace {
void size_queues(RcTransport::Qp& q, const QpCaps& caps) {
  q.caps = caps;
  q.sq.resize(std::bit_ceil(caps.max_send_wr));
  q.sq_mask = q.sq.size() - 1;
  q.rq.resize(std::bit_ceil(caps.max_recv_wr));
  q.rq_mask = q.rq.size() - 1;
  q.rr.resize(kMaxReadQueue);
}
}  // namespace

int RcTransport::create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params) {
  if (flow == kNoFlow || qpn > kPsnMask || qpn < 2 || caps.max_send_wr == 0 ||
      caps.max_recv_wr == 0 || caps.max_send_wr > 65536 || caps.max_recv_wr > 65536 ||
      caps.region_len != 0) {  // peers reach memory by rkey
    return -EINVAL;
  }
  if (find(flow) != nullptr) return -EEXIST;
  if (qps_.size() <= flow) qps_.resize(size_t(flow) + 1);
  auto q = std::make_unique<Qp>();
  QpOpts o;
  if (!apply_params(params, &o).empty()) return -EINVAL;
  q->dcqcn = o.dcqcn;
  q->dcqcn_params = o.dcqcn_params;
  q->spray = uint16_t(o.spray);
  q->reorder = o.reorder_or_default();
  q->flow = flow;
  q->qpn = qpn;
  size_queues(*q, caps);
  qps_[flow] = std::move(q);
  qp_count_++;
  return 0;
}

int RcTransport::query_qp(FlowId flow, QpAttr* attr) const {
  const Qp* q = find(flow);
  if (q == nullptr) return -ENOENT;
  *attr = q->attr;
  return 0;
}

// ---- errors -----------------------------------------------------------------------------------

// Every request still queued completes with `status`: the first one (the one that failed) with
// its own error, the rest flushed.
void flush_all(RcTransport::Qp& q, int first_status, Context& ctx) {
  int status = first_status;
  for (; q.sq_head != q.sq_tail; q.sq_head++) {
    SendWqe& w = q.sq[(q.sq_head) & q.sq_mask];
    if (w.kind == ReqKind::kRead && w.read_counted && ctx.rdma()) {
      ctx.rdma()->read_retire(q.flow, w.first_psn);
    }
    ctx.event({q.flow, done_kind(w.kind), status, 0, 0, w.wr_id});
    status = -ECANCELED;
  }
  for (; q.rq_head != q.rq_tail; q.rq_head++) {
    const RecvWqe& r = q.rq[(q.rq_head) & q.rq_mask];
    if (q.rq_head < q.rq_nic) ctx.ms_retire_msg(q.flow, uint32_t(q.rq_head));
    ctx.event({q.flow, EventKind::kRecvDone, -ECANCELED, 0, 0, r.wr_id});
  }
  q.send_wqe = q.sq_head;
  q.send_pkt = 0;
  q.reads_out = 0;
  q.timer_ns = 0;
  q.rnr_until = 0;
  q.rr_n = 0;
}

void to_error(RcTransport::Qp& q, int status, Context& ctx) {
  if (q.attr.state == QpState::kErr) return;
  q.attr.state = QpState::kErr;
  flush_all(q, status, ctx);
}

// The request holding `psn` failed with `status`: it and everything after it complete with
// errors, and the QP goes to ERR.
void fail(RcTransport::Qp& q, int status, Context& ctx, RcCounters& t) {
  q.c.qp_errors++;
  t.qp_errors++;
  to_error(q, status, ctx);
}

int RcTransport::modify_qp(FlowId flow, const QpAttr& a, uint32_t mask, Context& ctx) {
  Qp* q = find(flow);
  if (q == nullptr) return -ENOENT;
  const QpState from = q->attr.state;
  const QpState to = (mask & kAttrState) != 0 ? a.state : from;
  auto need = [&](uint32_t m) { return (mask & m) == m; };
  // Values first: nothing changes unless all of it is right.
  if ((mask & kAttrPmtu) != 0 && !valid_pmtu(a.pmtu)) return -EINVAL;
  if ((mask & kAttrDestQpn) != 0 && a.dest_qpn > kPsnMask) return -EINVAL;
  if ((mask & kAttrRqPsn) != 0 && a.rq_psn > kPsnMask) return -EINVAL;
  if ((mask & kAttrSqPsn) != 0 && a.sq_psn > kPsnMask) return -EINVAL;
  if ((mask & kAttrTimeout) != 0 && a.timeout > 31) return -EINVAL;
  if ((mask & kAttrRetryCnt) != 0 && a.retry_cnt > 7) return -EINVAL;
  if ((mask & kAttrRnrRetry) != 0 && a.rnr_retry > 7) return -EINVAL;
  if ((mask & kAttrMinRnrTimer) != 0 && a.min_rnr_timer > 31) return -EINVAL;
  if ((mask & kAttrMaxRdAtomic) != 0 && (a.max_rd_atomic == 0 || a.max_rd_atomic > 16)) {
    return -EINVAL;
  }
  if ((mask & kAttrMaxDestRdAtomic) != 0 &&
      (a.max_dest_rd_atomic == 0 || a.max_dest_rd_atomic > kMaxReadQueue)) {
    return -EINVAL;
  }
  if ((mask & kAttrAccess) != 0 && (a.access & ~(kRemoteWrite | kRemoteRead)) != 0) return -EINVAL;
  if ((mask & kAttrRateLimit) != 0 && a.rate_limit_kbps > kDefaultRateBps / 1000 * 4) {
    return -EINVAL;  // 400 Gb/s
  }
  bool ok = false;
  if (to == QpState::kErr || to == QpState::kReset ||
      (from == QpState::kInit && to == QpState::kInit)) {
    ok = true;
  } else if (from == QpState::kReset && to == QpState::kInit) {
    ok = need(kAttrAccess);
  } else if (from == QpState::kInit && to == QpState::kRtr) {
    // Spraying reorders the QP's packets on purpose: only selective repeat takes that without
    // sending everything again (and so does tolerating reordering).
    const bool sr =
        (mask & kAttrSelectiveRepeat) != 0 ? a.selective_repeat : q->attr.selective_repeat;
    ok = need(kAttrPmtu | kAttrDestQpn | kAttrRqPsn) && (sr || (q->spray == 1 && q->reorder == 1));
  } else if (from == QpState::kRtr && to == QpState::kRts) {
    ok = need(kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry);
  } else if (from == QpState::kRts && to == QpState::kRts) {
    ok = (mask & (kAttrPmtu | kAttrDestQpn | kAttrRqPsn | kAttrSqPsn | kAttrSelectiveRepeat)) == 0;
  }
  if (!ok) return -EINVAL;

  QpAttr& s = q->attr;
  if ((mask & kAttrPmtu) != 0) s.pmtu = a.pmtu;
  if ((mask & kAttrDestQpn) != 0) s.dest_qpn = a.dest_qpn;
  if ((mask & kAttrRqPsn) != 0) s.rq_psn = a.rq_psn;
  if ((mask & kAttrSqPsn) != 0) s.sq_psn = a.sq_psn;
  if ((mask & kAttrTimeout) != 0) s.timeout = a.timeout;
  if ((mask & kAttrRetryCnt) != 0) s.retry_cnt = a.retry_cnt;
  if ((mask & kAttrRnrRetry) != 0) s.rnr_retry = a.rnr_retry;
  if ((mask & kAttrMinRnrTimer) != 0) s.min_rnr_timer = a.min_rnr_timer;
  if ((mask & kAttrMaxRdAtomic) != 0) s.max_rd_atomic = a.max_rd_atomic;
  if ((mask & kAttrMaxDestRdAtomic) != 0) s.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if ((mask & kAttrAccess) != 0) s.access = a.access;
  if ((mask & kAttrSelectiveRepeat) != 0) s.selective_repeat = a.selective_repeat;
  if ((mask & kAttrRateLimit) != 0) {
    s.rate_limit_kbps = a.rate_limit_kbps;
    q->rate_bps = a.rate_limit_kbps == 0 ? kDefaultRateBps : a.rate_limit_kbps * 1000;
    set_rate(*q);
  }

  if (to == QpState::kErr) {
    to_error(*q, -ECANCELED, ctx);
    return 0;
  }
  if (to == QpState::kReset) {
    flush_all(*q, -ECANCELED, ctx);
    const FlowId f = q->flow;
    const uint32_t n = q->qpn;
    const QpCaps caps = q->caps;
    const bool dcqcn = q->dcqcn;
    const cc::DcqcnParams dp = q->dcqcn_params;
    const uint16_t spray = q->spray;
    const uint32_t reorder = q->reorder;
    *q = Qp{};
    q->flow = f;
    q->qpn = n;
    q->dcqcn = dcqcn;
    q->dcqcn_params = dp;
    q->spray = spray;
    q->reorder = reorder;
    size_queues(*q, caps);
    return 0;
  }
  if (to == QpState::kRtr && from == QpState::kInit) {
    q->epsn = q->cursor = s.rq_psn;
    if (s.selective_repeat) {
      q->sacked.assign(kSrWindow, 0);
      q->read_in.assign(kSrReadWindow, 0);
      q->queued.assign(kSrReadWindow, 0);  // READs run past the window (read_fits)
      q->resend.reserve(kSrReadWindow);
      q->again.assign(kSrWindow);
      q->rereads.assign(kMaxRereads);
      q->ooo.assign(kSrWindow, OooPkt{});
      q->keep.assign(size_t(kSrSendKeepBytes / s.pmtu) * s.pmtu, 0);
      q->keep_free.clear();
      for (uint32_t i = kSrSendKeepBytes / s.pmtu; i-- > 0;)
        q->keep_free.push_back(uint16_t(i));
      q->sr_naks.reserve(kMaxSrNaks);
      q->run = false;
    }
    q->sport = udp_sport(q->qpn, s.dest_qpn);
    // Receives posted before RTR go to the NIC now that the flow is steered.
    for (; q->rq_nic < q->rq_tail; q->rq_nic++) {
      const RecvWqe& r = q->rq[(q->rq_nic) & q->rq_mask];
      if (ctx.ms_post(flow, r.mr, r.offset, r.len, uint32_t(q->rq_nic)) == -ENOBUFS) break;
    }
  }
  if (to == QpState::kRts && from == QpState::kRtr) {
    q->snd_nxt = q->snd_max = q->una = q->recover_next = q->peer_epsn = s.sq_psn;
    q->timing = false;
    q->rtt.reset();
    q->backoff = 0;
    // DCQCN starts at the QP's rate (its "line rate") and never goes above it.
    cc::DcqcnParams p = q->dcqcn_params;
    p.line_rate_bps = q->rate_bps;
    p.min_rate_bps = std::min(p.min_rate_bps, q->rate_bps);
    q->rp.init(p, ctx.now_ns());
    q->np.init(p);
    set_rate(*q);
    q->retries_left = s.retry_cnt;
    q->rnr_left = s.rnr_retry;
  }
  s.state = to;
  if ((to == QpState::kRtr || to == QpState::kRts) && !q->ticking) {
    q->ticking = true;
    ticking_.push_back(flow);
  }
  return 0;
}

int RcTransport::destroy_qp(FlowId flow, Context& ctx) {
  Qp* q = find(flow);
  if (q == nullptr) return -ENOENT;
  flush_all(*q, -ECANCELED, ctx);
  // Its counters stay in the transport's totals (they were added as they happened).
  if (q->ticking) std::erase(ticking_, flow);
  qps_[flow].reset();
  qp_count_--;
  return 0;
}

size_t RcTransport::flow_count() const {
  return qp_count_;
}

// ---- the bursts -------------------------------------------------------------------------------

void RcTransport::app_burst(std::span<const AppRequest> reqs, Context& ctx) {
  touched_.clear();
  for (const AppRequest& r : reqs) {
    Qp* q = find(r.flow);
    auto refuse = [&](EventKind k, int status) { ctx.event({r.flow, k, status, 0, 0, r.wr_id}); };
    switch (r.kind) {
      case ReqKind::kRecv: {
        if (q == nullptr || q->attr.state == QpState::kReset || q->attr.state == QpState::kErr) {
          refuse(EventKind::kRecvDone, q == nullptr ? -ENOTCONN : -ECANCELED);
          break;
        }
        if (q->rq_tail - q->rq_head == q->caps.max_recv_wr) {
          refuse(EventKind::kRecvDone, -ENOBUFS);
          break;
        }
        q->rq[(q->rq_tail) & q->rq_mask] = RecvWqe{r.mr, r.len, r.offset, r.wr_id};
        q->rq_tail++;
        if (q->rq_nic + 1 == q->rq_tail &&
            (q->attr.state == QpState::kRtr || q->attr.state == QpState::kRts)) {
          if (ctx.ms_post(r.flow, r.mr, r.offset, r.len, uint32_t(q->rq_nic)) != -ENOBUFS) {
            q->rq_nic++;
          }
        }
        break;
      }
      case ReqKind::kSend:
      case ReqKind::kWrite:
      case ReqKind::kRead: {
        const EventKind k = done_kind(r.kind);
        if (q == nullptr || q->attr.state != QpState::kRts) {
          refuse(k, q == nullptr                     ? -ENOTCONN
                    : q->attr.state == QpState::kErr ? -ECANCELED
                                                     : -EINVAL);
          break;
        }
        if (r.len > (1u << 31) || (r.kind == ReqKind::kRead && (r.flags & kReqImm) != 0)) {
          refuse(k, -EINVAL);
          break;
        }
        if (q->sq_tail - q->sq_head == q->caps.max_send_wr) {
          refuse(k, -ENOBUFS);
          break;
        }
        SendWqe& w = q->sq[(q->sq_tail) & q->sq_mask];
        w = SendWqe{};
        w.kind = r.kind;
        w.imm = (r.flags & kReqImm) != 0;
        w.mr = r.mr;
        w.offset = r.offset;
        w.len = r.len;
        w.rkey = r.rkey;
        w.va = r.remote_addr;
        w.immv = r.imm;
        w.wr_id = r.wr_id;
        q->sq_tail++;
        if (!q->touched) {  // sent once the burst is queued
          q->touched = true;
          touched_.push_back(q);
        }
        break;
      }
      case ReqKind::kClose:
      case ReqKind::kAbort:
        if (q != nullptr) to_error(*q, -ECANCELED, ctx);
        break;
    }
  }
  for (Qp* q : touched_) {
    q->touched = false;
    pump(*q, ctx, total_);
  }
}

void RcTransport::rx_burst(std::span<const RxHeader> hdrs, Context& ctx) {
  const uint64_t now = ctx.now_ns();
  touched_.clear();
  for (const RxHeader& h : hdrs) {
    Qp* q = find(h.flow);
    if (q == nullptr || h.l4 == nullptr) {
      total_.bad_packets++;
      continue;
    }
    if (h.l4_csum == Csum::kBad) {
      q->c.bad_icrc++;
      total_.bad_icrc++;
      continue;
    }
    Headers b;
    size_t hl = 0;
    // A QP takes packets from RTR on, and none once in ERR: its queues were flushed (a SEND
    // whose first packet came before would find its receive completed already).
    if (parse(h.l4, h.l4_len, b, &hl) != ParseError::kNone || b.dest_qp != q->qpn ||
        q->attr.state == QpState::kReset || q->attr.state == QpState::kInit ||
        q->attr.state == QpState::kErr) {
      q->c.bad_packets++;
      total_.bad_packets++;
      continue;
    }
    if (!pkey_match(b.pkey, kDefaultPkey)) {
      q->c.bad_pkey++;
      total_.bad_pkey++;
      continue;
    }
    q->c.rx_packets++;
    total_.rx_packets++;
    if (!q->touched) {
      q->touched = true;
      touched_.push_back(q);
    }
    const Rx x{h, b, h.payload_len};
    const OpInfo o = op_info(b.opcode);
    // The padding is the sender's to get right: a payload whose PadCnt does not make it a
    // multiple of four is malformed.
    if (((x.len + b.pad) & 3) != 0 && o.kind != OpKind::kCnp) {
      q->c.bad_packets++;
      total_.bad_packets++;
      continue;
    }

    if (o.kind == OpKind::kCnp) {
      // DCQCN's reaction point: the peer saw our packets marked.
      q->c.cnps_received++;
      total_.cnps_received++;
      if (q->dcqcn && q->attr.state == QpState::kRts && q->rp.on_cnp(now)) set_rate(*q);
      continue;
    }
    if (h.ecn == 3 && o.kind != OpKind::kAck) {
      // DCQCN's notification point: data to us came through a congested queue; one CNP per
      // interval goes back.
      q->c.ce_received++;
      total_.ce_received++;
      if (q->dcqcn && q->np.on_ce(now)) q->cnp_due = true;
    }
    if (o.kind == OpKind::kAck || o.kind == OpKind::kReadResponse) {
      if (q->attr.state == QpState::kRts) on_response(*q, x, ctx, total_);
      continue;
    }
    on_request(*q, x, ctx, total_);
  }

  for (Qp* tq : touched_) {
    Qp& q = *tq;
    q.touched = false;
    if (q.attr.state == QpState::kErr) continue;
    finish_rx(q, ctx, total_);
    pump(q, ctx, total_);
  }
}

// ---- management -------------------------------------------------------------------------------

namespace {

void put_counters(const RcCounters& c, InfoSink& out) {
  out.number("tx_packets", c.tx_packets);
  out.number("tx_bytes", c.tx_bytes);
  out.number("rx_packets", c.rx_packets);
  out.number("retransmits", c.retransmits);
  out.number("timeouts", c.timeouts);
  out.number("naks_sent", c.naks_sent);
  out.number("naks_received", c.naks_received);
  out.number("rnr_naks_sent", c.rnr_naks_sent);
  out.number("rnr_naks_received", c.rnr_naks_received);
  out.number("acks_sent", c.acks_sent);
  out.number("acks_received", c.acks_received);
  out.number("duplicates", c.duplicates);
  out.number("out_of_sequence", c.out_of_sequence);
  out.number("read_responses", c.read_responses);
  out.number("access_errors", c.access_errors);
  out.number("invalid_requests", c.invalid_requests);
  out.number("bad_icrc", c.bad_icrc);
  out.number("bad_pkey", c.bad_pkey);
  out.number("bad_packets", c.bad_packets);
  out.number("copied_bytes", c.copied_bytes);
  out.number("placed_bytes", c.placed_bytes);
  out.number("qp_errors", c.qp_errors);
  out.number("ce_received", c.ce_received);
  out.number("cnps_sent", c.cnps_sent);
  out.number("cnps_received", c.cnps_received);
}

}  // namespace

bool RcTransport::flow_info(FlowId flow, InfoSink& out) const {
  const Qp* q = find(flow);
  if (q == nullptr) return false;
  out.text("state", state_name(q->attr.state));
  out.number("qpn", q->qpn);
  out.number("dest_qpn", q->attr.dest_qpn);
  out.number("pmtu", q->attr.pmtu);
  out.number("sq_psn", q->snd_nxt);
  out.number("una_psn", q->una);
  out.number("epsn", q->epsn);
  out.number("msn", q->msn);
  out.number("send_queued", q->sq_tail - q->sq_head);
  out.number("recv_posted", q->rq_tail - q->rq_head);
  out.number("reads_outstanding", q->reads_out);
  out.number("outstanding_psns", uint32_t(psn_diff(q->snd_nxt, q->una)));
  out.number("retries_left", q->retries_left);
  out.number("rnr_retries_left", q->rnr_left);
  out.text("recovery", q->attr.selective_repeat ? "selective-repeat" : "go-back-n");
  out.number("spray", q->spray);
  out.number("reorder", q->reorder);
  out.number("srtt_us", q->rtt.srtt() / 1000);
  out.number("rto_us", rto_ns(*q) / 1000);
  out.text("dcqcn", q->dcqcn ? "on" : "off");
  out.number("cnp_dscp", q->dcqcn_params.cnp_dscp);
  out.number("rate_limit_bps", q->rate_bps);
  // DCQCN's rates exist from RTS on; before, the QP would start at its cap.
  const bool rp = q->dcqcn && q->attr.state == QpState::kRts;
  out.number("rate_bps", rp ? std::min(q->rp.rate_bps(), q->rate_bps) : q->rate_bps);
  out.number("target_rate_bps", rp ? q->rp.target_bps() : q->rate_bps);
  out.number("alpha_ppm", uint64_t(q->rp.alpha_fp()) * 1'000'000 >> cc::DcqcnParams::kOneShift);
  out.number("rate_decreases", q->rp.counters().decreases);
  put_counters(q->c, out);
  return true;
}

void RcTransport::stats(InfoSink& out) const {
  put_counters(total_, out);
}

}  // namespace cleave::transport::roce
