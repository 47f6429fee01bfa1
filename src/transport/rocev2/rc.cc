#include "rc.h"

#include "dcqcn.h"
#include "pacer.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace cleave::transport::roce {

namespace {

constexpr uint32_t kAckEvery = 64;            // AckReq at least every this many packets (rxe)
constexpr uint32_t kMaxInflight = 1024;       // packets sent and not acknowledged
constexpr uint32_t kSrWindow = kMaxInflight;  // selective repeat: PSNs tracked past the oldest
constexpr uint64_t kSrRtoMinNs = 250'000;     // selective repeat: the shortest RTO
// Selective repeat: READ responses kept past a gap, up to this many PSNs past the oldest
// unacknowledged (the window and a READ of up to 3072 responses begun at its edge).
constexpr uint32_t kSrReadWindow = 4 * kSrWindow;
constexpr uint32_t kMaxSrNaks = 32;     // selective-repeat NAKs a QP sends per burst
constexpr uint32_t kMaxReadQueue = 16;  // READs a responder holds (max_dest_rd_atomic)
constexpr uint32_t kRespBurst = 64;     // READ response packets per call, per QP
constexpr uint64_t kDefaultRateBps = 100'000'000'000ull;
constexpr uint8_t kEct0 = 2;            // the IP ECN field of every packet under DCQCN
constexpr uint32_t kWireOverhead = 64;  // Ethernet, IP, UDP, BTH, ICRC, preamble: the pacer's cost

bool valid_pmtu(uint32_t m) {
  return m == 256 || m == 512 || m == 1024 || m == 2048 || m == 4096;
}

// PSNs a message of `len` bytes takes (a PMTU is at least 256: modify_qp checks it).
// PMTUs are powers of two (modify_qp checks): a shift, not a division, on the send path.
uint32_t packets(uint32_t len, uint32_t pmtu) {
  const int shift = std::countr_zero(std::max(pmtu, 256u));
  return len == 0 ? 1 : uint32_t((uint64_t(len) + (uint64_t(1) << shift) - 1) >> shift);
}

struct SendWqe {
  ReqKind kind = ReqKind::kSend;
  bool imm = false;
  bool started = false;       // has PSNs
  bool read_counted = false;  // counted in reads_out
  bool done = false;          // READ: every response in place
  uint16_t mr = 0;
  uint32_t len = 0;
  uint32_t rkey = 0;
  uint32_t immv = 0;
  uint32_t first_psn = 0;
  uint32_t npkts = 0;
  uint32_t read_got = 0;    // READ: responses received in order
  uint32_t read_retry = 0;  // READ: the PSN of the last rewind for a gap (one per gap)
  uint32_t read_max = 0;    // READ, selective repeat: one past the furthest response in
  uint64_t offset = 0;
  uint64_t va = 0;
  uint64_t wr_id = 0;
  uint32_t last_psn() const { return psn_add(first_psn, npkts - 1); }
  bool covers(uint32_t psn) const {
    return started && psn_diff(psn, first_psn) >= 0 && psn_diff(psn, first_psn) < int32_t(npkts);
  }
};

struct RecvWqe {
  uint16_t mr = 0;
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t wr_id = 0;
};

// Selective repeat: a request packet the responder accepted past a gap (the NIC placed its
// payload, or it had none), kept until ePSN reaches it and it is processed in order.
struct OooPkt {
  bool valid = false;
  uint32_t len = 0;
  Headers b;
};

// Selective repeat: where a WRITE seen past a gap goes, so its packets the NIC could not place
// can be copied there.
struct WriteCtx {
  bool valid = false;
  uint16_t mr = 0;
  uint32_t first_psn = 0;
  uint32_t npkts = 0;
  uint32_t len = 0;
  uint64_t offset = 0;
};

struct ReadResp {
  bool again = false;  // a duplicate READ executed again
  uint32_t first_psn = 0;
  uint32_t npkts = 0;
  uint32_t next = 0;  // packets sent
  uint16_t mr = 0;
  uint32_t len = 0;
  uint64_t offset = 0;
};

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

}  // namespace

struct RcTransport::Qp {
  FlowId flow = kNoFlow;
  uint32_t qpn = 0;
  QpAttr attr;
  uint16_t sport = 0xC000;
  RcCounters c;

  // ---- requester ----
  QpCaps caps;              // what the owner asked for: the queues' capacity
  std::vector<SendWqe> sq;  // a power of two at least caps.max_send_wr: indexes are masked
  uint64_t sq_mask = 0;
  uint64_t sq_head = 0;    // oldest incomplete
  uint64_t sq_tail = 0;    // next free
  uint64_t send_wqe = 0;   // next to transmit from
  uint32_t send_pkt = 0;   // packet of it
  uint32_t snd_nxt = 0;    // PSN of the next packet
  uint32_t snd_max = 0;    // one past the highest PSN ever sent
  uint32_t una = 0;        // oldest PSN not acknowledged
  uint32_t reads_out = 0;  // READs issued and not complete
  uint32_t since_ackreq = 0;
  uint64_t timer_ns = 0;   // local ACK timer deadline, 0: off
  uint64_t rnr_until = 0;  // waiting out an RNR NAK until then, 0: not
  uint8_t retries_left = 7;
  uint8_t rnr_left = 7;
  // The round trip (RFC 6298's estimator, selective repeat's RTO): one packet timed at a time,
  // from its first sending to the acknowledgment past it (rtt_end); a timed packet sent again is
  // no sample. backoff: timeouts in a row.
  uint32_t rtt_end = 0;
  bool timing = false;  // a packet is timed
  uint64_t rtt_sent_ns = 0;
  uint64_t srtt_ns = 0;  // 0: no sample yet
  uint64_t rttvar_ns = 0;
  uint32_t backoff = 0;
  // Selective repeat, requester: PSNs the responder has (a set, see bit()), READ responses in
  // past a gap (a set over kSrReadWindow), PSNs queued to be sent again (and a set of them, so
  // a PSN is queued once), and where the next NAK's search for holes starts.
  std::vector<uint32_t> sacked;
  std::vector<uint32_t> read_in;
  std::vector<uint32_t> queued;
  std::vector<uint32_t> resend;
  size_t resend_head = 0;
  uint32_t recover_next = 0;
  // Pacing: the QP's rate cap (rate_limit_kbps), DCQCN's rate under it, and the pacer that
  // spaces every packet the QP sends at the lower of the two.
  uint64_t rate_bps = kDefaultRateBps;
  cc::Pacer pacer{kDefaultRateBps};
  bool dcqcn = true;
  cc::DcqcnParams dcqcn_params;
  cc::DcqcnRp rp;
  cc::DcqcnNp np;
  bool cnp_due = false;

  // ---- responder ----
  std::vector<RecvWqe> rq;  // likewise for caps.max_recv_wr
  uint64_t rq_mask = 0;
  uint64_t rq_head = 0;  // next to consume; also its message number on the NIC
  uint64_t rq_tail = 0;
  uint64_t rq_nic = 0;  // receives posted to the NIC (message numbers < rq_nic)
  uint32_t epsn = 0;
  uint32_t msn = 0;
  uint32_t last_ack = kPsnMask + 1;  // the PSN of the last ACK sent (none yet)
  uint32_t cursor = 0;               // last cursor given to the NIC
  bool nak_sent = false;
  bool ack_pending = false;
  bool touched = false;
  bool resync =
      false;  // a message went through the copy path: tell the NIC where the next one starts
  uint8_t rnr_code_pending = 0xFF;  // an RNR NAK to send (its PSN is epsn)
  uint8_t nak_pending = 0;          // a NAK syndrome to send for epsn, 0: none
  // The message in progress.
  bool in_send = false;
  bool in_write = false;
  uint32_t msg_bytes = 0;
  uint16_t wr_mr = 0;
  uint64_t wr_off = 0;
  uint32_t wr_len = 0;
  std::vector<ReadResp> rr;
  uint32_t rr_head = 0;
  uint32_t rr_n = 0;
  // Selective repeat, responder: packets accepted past a gap, by psn % kSrWindow, and the PSNs
  // of those that arrived this burst (each is named in a NAK).
  std::vector<OooPkt> ooo;
  std::vector<uint32_t> sr_naks;
  std::array<WriteCtx, 8> wctx{};
  uint32_t wctx_next = 0;

  bool outstanding() const { return psn_diff(snd_max, una) > 0; }
};

namespace {

// A set of PSNs in a ring of a power-of-two size by psn % size, each slot holding psn + 1
// (0: none), so a PSN a ring later (a READ takes many PSNs) never reads as a member: it takes
// the slot over.
bool bit(const std::vector<uint32_t>& v, uint32_t psn) {
  return v[psn & (v.size() - 1)] == psn + 1;
}
void set_bit(std::vector<uint32_t>& v, uint32_t psn, bool on) {
  uint32_t& slot = v[psn & (v.size() - 1)];
  if (on) {
    slot = psn + 1;
  } else if (slot == psn + 1) {
    slot = 0;
  }
}

// True when the pacer lets a packet go now.
bool pace(RcTransport::Qp& q, uint64_t now) {
  return q.pacer.may_send(now);
}

// The rate the pacer keeps: DCQCN's, under the QP's cap.
void set_rate(RcTransport::Qp& q) {
  q.pacer.set_rate(q.dcqcn ? std::min(q.rp.rate_bps(), q.rate_bps) : q.rate_bps);
}

void spend(RcTransport::Qp& q, uint32_t payload, uint64_t now) {
  q.pacer.sent(payload + kWireOverhead, now);
  if (q.dcqcn && q.rp.on_sent(payload + kWireOverhead, now)) set_rate(q);
}

void count_tx(RcTransport::Qp& q, uint32_t len, RcCounters& total) {
  q.c.tx_packets++;
  q.c.tx_bytes += len;
  total.tx_packets++;
  total.tx_bytes += len;
}

// The local ACK timer. Go-back-N: the QP's timeout attribute, as IBTA defines it. Selective
// repeat (IRN's point: a lossy fabric cannot wait 67 ms for each lost retransmission or tail):
// the RTO of the measured round trip, srtt + 4 rttvar, at least kSrRtoMinNs, doubled for each
// timeout in a row, never above the attribute's.
uint64_t rto_ns(const RcTransport::Qp& q) {
  const uint64_t cap = ack_timeout_ns(q.attr.timeout);
  if (!q.attr.selective_repeat || q.srtt_ns == 0) return cap;
  const uint64_t r = std::max(kSrRtoMinNs, q.srtt_ns + 4 * q.rttvar_ns);
  return std::min(cap, r << std::min(q.backoff, 16u));
}

// The timed packet is acknowledged: a round-trip sample (RFC 6298 2.2, 2.3).
void rtt_sample(RcTransport::Qp& q, uint64_t now) {
  const uint64_t r = std::max<uint64_t>(now - q.rtt_sent_ns, 1);
  q.timing = false;
  if (q.srtt_ns == 0) {
    q.srtt_ns = r;
    q.rttvar_ns = r / 2;
    return;
  }
  const uint64_t err = q.srtt_ns > r ? q.srtt_ns - r : r - q.srtt_ns;
  q.rttvar_ns = (3 * q.rttvar_ns + err) / 4;
  q.srtt_ns = (7 * q.srtt_ns + r) / 8;
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

// A QP's parameters: `dcqcn on|off` and DCQCN's constants (cc::DcqcnParams::set's keys).
std::string apply_params(Params params, bool* dcqcn, cc::DcqcnParams* p) {
  for (const Param& x : params) {
    if (x.key == "dcqcn") {
      if (x.value != "on" && x.value != "off") {
        return "rocev2: dcqcn is \"on\" or \"off\", not \"" + std::string(x.value) + "\"";
      }
      *dcqcn = x.value == "on";
    } else if (x.key.starts_with("dcqcn_")) {
      std::string err = p->set(x.key, x.value);
      if (!err.empty()) return err;
    } else {
      return "rocev2: unknown parameter \"" + std::string(x.key) + "\" (have dcqcn and dcqcn_*)";
    }
  }
  return "";
}

}  // namespace

std::string RcTransport::check_params(Params params) const {
  bool on = true;
  cc::DcqcnParams p;
  return apply_params(params, &on, &p);
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
      caps.max_recv_wr == 0 || caps.max_send_wr > 65536 || caps.max_recv_wr > 65536) {
    return -EINVAL;
  }
  if (find(flow) != nullptr) return -EEXIST;
  if (qps_.size() <= flow) qps_.resize(size_t(flow) + 1);
  auto q = std::make_unique<Qp>();
  if (!apply_params(params, &q->dcqcn, &q->dcqcn_params).empty()) return -EINVAL;
  q->flow = flow;
  q->qpn = qpn;
  size_queues(*q, caps);
  qps_[flow] = std::move(q);
  live_.push_back(flow);
  return 0;
}

int RcTransport::query_qp(FlowId flow, QpAttr* attr) const {
  const Qp* q = find(flow);
  if (q == nullptr) return -ENOENT;
  *attr = q->attr;
  return 0;
}

// ---- errors -----------------------------------------------------------------------------------

namespace {

EventKind done_kind(ReqKind k) {
  switch (k) {
    case ReqKind::kWrite:
      return EventKind::kWriteDone;
    case ReqKind::kRead:
      return EventKind::kReadDone;
    default:
      return EventKind::kSendDone;
  }
}

// Every request still queued completes with `status`: the first one (the one that failed) with
// its own error, the rest flushed.
void flush_all(RcTransport::Qp& q, int first_status, Context& ctx) {
  int status = first_status;
  for (; q.sq_head != q.sq_tail; q.sq_head++) {
    SendWqe& w = q.sq[(q.sq_head) & q.sq_mask];
    if (w.kind == ReqKind::kRead && w.read_counted) ctx.read_retire(q.flow, w.first_psn);
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

}  // namespace

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
    ok = need(kAttrPmtu | kAttrDestQpn | kAttrRqPsn);
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
    *q = Qp{};
    q->flow = f;
    q->qpn = n;
    q->dcqcn = dcqcn;
    q->dcqcn_params = dp;
    size_queues(*q, caps);
    return 0;
  }
  if (to == QpState::kRtr && from == QpState::kInit) {
    q->epsn = q->cursor = s.rq_psn;
    if (s.selective_repeat) {
      q->sacked.assign(kSrWindow, 0);
      q->read_in.assign(kSrReadWindow, 0);
      q->queued.assign(kSrWindow, 0);
      q->resend.reserve(kSrWindow);
      q->ooo.assign(kSrWindow, OooPkt{});
      q->sr_naks.reserve(kMaxSrNaks);
    }
    q->sport = udp_sport(q->qpn, s.dest_qpn);
    // Receives posted before RTR go to the NIC now that the flow is steered.
    for (; q->rq_nic < q->rq_tail; q->rq_nic++) {
      const RecvWqe& r = q->rq[(q->rq_nic) & q->rq_mask];
      if (ctx.ms_post(flow, r.mr, r.offset, r.len, uint32_t(q->rq_nic)) == -ENOBUFS) break;
    }
  }
  if (to == QpState::kRts && from == QpState::kRtr) {
    q->snd_nxt = q->snd_max = q->una = q->recover_next = s.sq_psn;
    q->timing = false;
    q->srtt_ns = q->rttvar_ns = 0;
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
  return 0;
}

int RcTransport::destroy_qp(FlowId flow, Context& ctx) {
  Qp* q = find(flow);
  if (q == nullptr) return -ENOENT;
  flush_all(*q, -ECANCELED, ctx);
  // Its counters stay in the transport's totals (they were added as they happened).
  qps_[flow].reset();
  std::erase(live_, flow);
  return 0;
}

size_t RcTransport::flow_count() const {
  return live_.size();
}

// ---- sending ----------------------------------------------------------------------------------

namespace {

TxDesc& header(RcTransport::Qp& q, Headers& h, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  d.flow = q.flow;
  d.flags = kTxRoce;
  // Under DCQCN every packet goes out ECT(0): requests, READ responses, ACKs and NAKs, READ
  // requests and CNPs, as mlx5 sends them (a switch marks what is ECN-capable only).
  d.ecn = q.dcqcn ? kEct0 : 0;
  h.src_port = q.sport;
  h.dest_qp = q.attr.dest_qpn;
  d.l4_len = uint8_t(build(h, d.l4.data()));
  return d;
}

// An ACK or NAK. `msn`: the AETH's MSN field, the responder's message count; in a selective-
// repeat NAK, the PSN it names.
void send_ack(RcTransport::Qp& q, uint8_t syndrome, uint32_t psn, uint32_t msn, Context& ctx,
              RcCounters& t) {
  Headers h;
  h.opcode = kAck;
  h.psn = psn;
  h.syndrome = syndrome;
  h.msn = msn;
  header(q, h, ctx);
  count_tx(q, 0, t);
}

// One packet of a SEND or WRITE (packet `k` of `w`, PSN first + k), or the READ request from
// response `k` on.
void send_packet(RcTransport::Qp& q, SendWqe& w, uint32_t k, Context& ctx, RcCounters& t) {
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
  h.ack_req = last || ++q.since_ackreq >= kAckEvery;
  if (h.ack_req) q.since_ackreq = 0;
  TxDesc& d = header(q, h, ctx);
  d.mr = w.mr;
  d.offset = w.offset + off;
  d.len = len;
  count_tx(q, len, t);
}

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

// Selective repeat: every PSN in [from, to) the responder does not have is sent again. A READ
// is one request: its first PSN stands for all of them; after a timeout (`all`) a READ still
// missing responses is asked again even when the responder has its request.
void queue_holes(RcTransport::Qp& q, uint32_t from, uint32_t to, bool all = false) {
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
    const uint32_t a = psn_diff(w.first_psn, from) >= 0 ? w.first_psn : from;
    for (uint32_t p = a; psn_diff(p, to) < 0 && psn_diff(p, w.last_psn()) <= 0; p = psn_add(p, 1)) {
      if (!bit(q.sacked, p)) queue_resend(q, p);
    }
  }
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

}  // namespace

namespace {

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
      send_packet(q, w, k, ctx, t);
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
    if (psn_diff(q.snd_nxt, q.una) >= int32_t(kMaxInflight)) break;
    if (!pace(q, now)) break;
    SendWqe& w = q.sq[(q.send_wqe) & q.sq_mask];
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
        ctx.read_post(q.flow, w.first_psn, w.mr, w.offset, w.len);
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
      q.reads_out--;
      ctx.read_retire(q.flow, w.first_psn);
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

// Everything before `next` is acknowledged. A READ whose responses stop short of it is missing
// some: the acknowledgment stops there and the READ is asked again from its first missing
// response. A READ from `next` on whose responses all came (before those of an earlier one
// that was missing some) acknowledges itself too. Returns true on progress.
bool ack_upto(RcTransport::Qp& q, uint32_t next, Context& ctx) {
  if (psn_diff(next, q.snd_max) > 0) return false;  // acknowledges what was never sent
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
        // (Selective repeat asked for gaps below the furthest response in as they showed.)
        if (w.read_retry != missing + 1 && w.read_got >= w.read_max) {
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

// The request holding `psn` failed with `status`: it and everything after it complete with
// errors, and the QP goes to ERR.
void fail(RcTransport::Qp& q, int status, Context& ctx, RcCounters& t) {
  q.c.qp_errors++;
  t.qp_errors++;
  to_error(q, status, ctx);
}

}  // namespace

// ---- app requests -----------------------------------------------------------------------------

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

// ---- receiving --------------------------------------------------------------------------------

namespace {

struct Rx {
  const RxHeader& h;
  const Headers& b;
  uint32_t len;  // payload
};

// Puts a payload where the transport says: the NIC placed it, or the copy path copies it.
bool land(RcTransport::Qp& q, const Rx& x, uint16_t mr, uint64_t offset, Context& ctx,
          RcCounters& t) {
  if (x.len == 0) return true;
  if (x.h.placed == Placed::kDeferred) {
    if (x.h.payload == nullptr || !ctx.copy_in(x.h.payload, x.len, mr, offset)) return false;
    q.c.copied_bytes += x.len;
    t.copied_bytes += x.len;
    q.resync = true;
    return true;
  }
  q.c.placed_bytes += x.len;
  t.placed_bytes += x.len;
  return x.h.placed == Placed::kPlaced || x.h.placed == Placed::kTrimmed;
}

// May the peer touch what the RETH names (the QP's remote access, then the rkey's MR through
// the owner's rule)? A zero-length request names nothing and needs no key.
bool remote_ok(const RcTransport::Qp& q, const Headers& b, bool write, Context& ctx, uint16_t* mr,
               uint64_t* off) {
  if ((q.attr.access & (write ? kRemoteWrite : kRemoteRead)) == 0) return false;
  return b.dma_len == 0 || ctx.rkey_check(q.flow, b.rkey, b.va, b.dma_len, write, mr, off) == 0;
}

// The receive at the head completes with `e` (its MS leaves the NIC) and the next one is up.
void consume_recv(RcTransport::Qp& q, Event e, Context& ctx) {
  e.wr_id = q.rq[(q.rq_head) & q.rq_mask].wr_id;
  ctx.event(e);
  if (q.rq_head < q.rq_nic) ctx.ms_retire_msg(q.flow, uint32_t(q.rq_head));
  q.rq_head++;
}

// Makes room for a new READ by dropping a duplicate READ's responses not yet sent (the
// requester asks again if it still needs them). False when there is none.
bool drop_reread(RcTransport::Qp& q) {
  const auto n = uint32_t(q.rr.size());
  for (uint32_t i = 0; i < q.rr_n; i++) {
    if (!q.rr[(q.rr_head + i) % n].again) continue;
    for (uint32_t j = i; j + 1 < q.rr_n; j++)
      q.rr[(q.rr_head + j) % n] = q.rr[(q.rr_head + j + 1) % n];
    q.rr_n--;
    return true;
  }
  return false;
}

// IBTA's packet lengths: a first or middle packet carries exactly one PMTU, a last one
// 1..PMTU, an only one 0..PMTU (a READ request's payload is none of its business).
bool lengths_ok(const OpInfo& o, uint32_t len, uint32_t pmtu) {
  if (o.kind == OpKind::kReadRequest) return true;
  if (o.first && o.last) return len <= pmtu;
  if (o.last) return len != 0 && len <= pmtu;
  return len == pmtu;
}

// A RETH's DMA length: no message is longer than 2^31 bytes, and a WRITE cut into packets is
// longer than one PMTU.
bool reth_ok(const OpInfo& o, const Headers& b, uint32_t pmtu) {
  return b.dma_len <= kMaxMessage && (o.kind != OpKind::kWrite || o.last || b.dma_len > pmtu);
}

// The responder's side of one request packet at ePSN. Returns false (with a NAK or RNR pending)
// when it was not accepted.
bool accept(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t) {
  const OpInfo o = op_info(x.b.opcode);
  const uint32_t pmtu = q.attr.pmtu;
  auto invalid = [&] {
    q.nak_pending = kSynInvalid;
    q.c.invalid_requests++;
    t.invalid_requests++;
    return false;
  };
  auto denied = [&] {
    q.nak_pending = kSynAccess;
    q.c.access_errors++;
    t.access_errors++;
    return false;
  };
  // An opcode this transport does not implement (atomics, SEND with invalidate, FLUSH, ...).
  if (o.kind == OpKind::kUnsupported) return invalid();
  if (!lengths_ok(o, x.len, pmtu)) return invalid();
  // Opcode order (IBTA 9.7.5.1.2, as rxe's check_op_seq): a SEND or WRITE in progress takes only
  // its own middle or last packets; none in progress, only a first or only packet.
  if ((o.kind == OpKind::kSend && (o.first == q.in_send || q.in_write)) ||
      (o.kind == OpKind::kWrite && (o.first == q.in_write || q.in_send))) {
    return invalid();
  }
  if (o.reth && !reth_ok(o, x.b, pmtu)) return invalid();

  if (o.kind == OpKind::kSend || (o.kind == OpKind::kWrite && o.last && o.imm)) {
    // Consumes a receive.
    const bool need_recv = o.kind == OpKind::kSend ? o.first : true;
    if (need_recv && q.rq_head == q.rq_tail) {
      q.rnr_code_pending = q.attr.min_rnr_timer;
      return false;
    }
  }
  if (o.kind == OpKind::kSend) {
    RecvWqe& r = q.rq[(q.rq_head) & q.rq_mask];
    if (o.first) q.msg_bytes = 0;
    if (uint64_t(q.msg_bytes) + x.len > r.len) {
      // The message is longer than the receive: an invalid request (IBTA 9.7.5.2.6); the
      // receive fails.
      consume_recv(q, {q.flow, EventKind::kRecvDone, -EMSGSIZE, q.msg_bytes, 0, 0}, ctx);
      q.in_send = false;
      q.resync = true;
      return invalid();
    }
    if (!land(q, x, r.mr, r.offset + q.msg_bytes, ctx, t)) return invalid();
    q.msg_bytes += x.len;
    q.in_send = !o.last;
    if (o.last) {
      consume_recv(q,
                   {q.flow, EventKind::kRecvDone, 0, q.msg_bytes, q.msg_bytes, 0, x.b.imm,
                    uint8_t(o.imm ? kEvImm : 0)},
                   ctx);
      q.msn = psn_add(q.msn, 1);
    }
    return true;
  }
  if (o.kind == OpKind::kWrite) {
    if (o.first) {
      q.msg_bytes = 0;
      uint16_t mr = 0;
      uint64_t off = 0;
      if (!remote_ok(q, x.b, true, ctx, &mr, &off)) return denied();
      q.wr_mr = mr;
      q.wr_off = off;
      q.wr_len = x.b.dma_len;
    }
    if (uint64_t(q.msg_bytes) + x.len > q.wr_len || (o.last && q.msg_bytes + x.len != q.wr_len)) {
      q.in_write = false;
      return invalid();
    }
    if (!land(q, x, q.wr_mr, q.wr_off + q.msg_bytes, ctx, t)) return invalid();
    q.msg_bytes += x.len;
    q.in_write = !o.last;
    if (o.last) {
      if (o.imm) {
        consume_recv(q,
                     {q.flow, EventKind::kRecvDone, 0, q.msg_bytes, q.msg_bytes, 0, x.b.imm,
                      uint8_t(kEvImm | kEvWrite)},
                     ctx);
        q.resync = true;  // the NIC counts SENDs only: tell it which receive the next one takes
      }
      q.msn = psn_add(q.msn, 1);
    }
    return true;
  }
  // READ request.
  if (q.in_send || q.in_write) return invalid();
  if (q.rr_n >= q.attr.max_dest_rd_atomic && !drop_reread(q)) return invalid();
  uint16_t mr = 0;
  uint64_t off = 0;
  if (!remote_ok(q, x.b, false, ctx, &mr, &off)) return denied();
  ReadResp& rr = q.rr[(q.rr_head + q.rr_n) % q.rr.size()];
  rr = ReadResp{false, x.b.psn, packets(x.b.dma_len, pmtu), 0, mr, x.b.dma_len, off};
  q.rr_n++;
  q.msn = psn_add(q.msn, 1);
  return true;
}

// A duplicate READ request: executed again from its RETH (the bytes may have changed; RC allows
// that), queued behind what is being sent.
void reread(RcTransport::Qp& q, const Rx& x, Context& ctx) {
  uint16_t mr = 0;
  uint64_t off = 0;
  if (q.rr_n >= q.rr.size() || !remote_ok(q, x.b, false, ctx, &mr, &off)) return;
  // Responses queued and not yet sent from that PSN on: they answer it, nothing to add. Ones
  // already past it stop there (go-back-N: the requester discards what follows a gap), and the
  // new responses take over from the PSN asked. Selective repeat asks for the gap only; the
  // rest still goes, after it (what was lost goes first).
  const auto n = uint32_t(q.rr.size());
  for (uint32_t i = 0; i < q.rr_n; i++) {
    ReadResp& r = q.rr[(q.rr_head + i) % n];
    const int32_t k = psn_diff(x.b.psn, r.first_psn);
    if (k < 0 || k >= int32_t(r.npkts)) continue;
    if (uint32_t(k) >= r.next) return;
    if (q.attr.selective_repeat) continue;
    r.npkts = r.next;
    r.len = std::min(r.len, r.next * q.attr.pmtu);
  }
  if (q.attr.selective_repeat) q.rr_head = (q.rr_head + n - 1) % n;
  ReadResp& rr = q.rr[q.attr.selective_repeat ? q.rr_head : (q.rr_head + q.rr_n) % n];
  rr = ReadResp{true, x.b.psn, packets(x.b.dma_len, q.attr.pmtu), 0, mr, x.b.dma_len, off};
  q.rr_n++;
}

// The PSN an ACK may name now: the newest accepted, but not past a READ whose responses are
// still queued (the ACK would tell the requester they were lost). Duplicates executed again do
// not hold it back: the requester had their ACK.
uint32_t ack_point(const RcTransport::Qp& q) {
  for (uint32_t i = 0; i < q.rr_n; i++) {
    const ReadResp& r = q.rr[(q.rr_head + i) % q.rr.size()];
    if (!r.again) return psn_add(r.first_psn, kPsnMask);
  }
  return psn_add(q.epsn, kPsnMask);
}

// Sends the ACK that is due, as far as ack_point() allows; the rest stays due.
void send_due_ack(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  const uint32_t psn = ack_point(q);
  q.ack_pending = psn != psn_add(q.epsn, kPsnMask);
  if (q.ack_pending && psn == q.last_ack) return;  // held back, and it would tell nothing new
  send_ack(q, kSynAck, psn, q.msn, ctx, t);
  q.last_ack = psn;
  q.c.acks_sent++;
  t.acks_sent++;
}

// Sends queued READ responses (as the pacer allows, at most kRespBurst per call).
void respond(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  const uint64_t now = ctx.now_ns();
  const uint32_t pmtu = q.attr.pmtu;
  for (uint32_t sent = 0; q.rr_n != 0 && sent < kRespBurst && pace(q, now); sent++) {
    ReadResp& r = q.rr[q.rr_head];
    if (r.next >= r.npkts) {  // cut short by a duplicate READ (reread)
      q.rr_head = (q.rr_head + 1) % uint32_t(q.rr.size());
      q.rr_n--;
      continue;
    }
    const uint32_t k = r.next;
    const bool first = k == 0;
    const bool last = k + 1 == r.npkts;
    const uint32_t len = std::min(pmtu, r.len - std::min(r.len, k * pmtu));
    Headers h;
    h.opcode = first && last ? kReadRespOnly
               : first       ? kReadRespFirst
               : last        ? kReadRespLast
                             : kReadRespMiddle;
    h.psn = psn_add(r.first_psn, k);
    h.syndrome = kSynAck;
    h.msn = q.msn;
    h.pad = uint8_t((4 - len % 4) % 4);
    TxDesc& d = header(q, h, ctx);
    d.mr = r.mr;
    d.offset = r.offset + uint64_t(k) * pmtu;
    d.len = len;
    count_tx(q, len, t);
    q.c.read_responses++;
    t.read_responses++;
    spend(q, len, now);
    if (++r.next == r.npkts) {
      q.rr_head = (q.rr_head + 1) % uint32_t(q.rr.size());
      q.rr_n--;
    }
  }
}

// Selective repeat: a request `d` PSNs past ePSN. Kept when its payload is certainly in place
// (the NIC placed it, it had none, or it belongs to a WRITE whose place is known), to be
// processed when ePSN reaches it, and named in a NAK. Otherwise (a SEND's packet past a gap: the
// NIC places SENDs in order only) dropped: false, and the caller asks for everything from ePSN
// the responder does not have.
bool keep_ooo(RcTransport::Qp& q, const Rx& x, int32_t d, Context& ctx, RcCounters& t) {
  if (d >= int32_t(kSrWindow)) return false;
  OooPkt& e = q.ooo[x.b.psn % kSrWindow];
  if (e.valid && e.b.psn == x.b.psn) return true;  // a duplicate of one kept
  const OpInfo o = op_info(x.b.opcode);
  if (o.kind == OpKind::kWrite && o.first) {
    // Where this WRITE goes: for its packets the NIC defers (it keeps one WRITE's context).
    WriteCtx c;
    if (x.b.dma_len != 0 && reth_ok(o, x.b, q.attr.pmtu) &&
        remote_ok(q, x.b, true, ctx, &c.mr, &c.offset)) {
      c.valid = true;
      c.first_psn = x.b.psn;
      c.npkts = packets(x.b.dma_len, q.attr.pmtu);
      c.len = x.b.dma_len;
      q.wctx[q.wctx_next++ % q.wctx.size()] = c;
    }
  }
  if (x.len != 0 && x.h.placed != Placed::kPlaced) {
    // Deferred: kept only when it is a WRITE's packet whose place is known, copied there.
    if (o.kind != OpKind::kWrite || x.h.placed != Placed::kDeferred) return false;
    const WriteCtx* c = nullptr;
    for (const WriteCtx& w : q.wctx) {
      if (w.valid && psn_diff(x.b.psn, w.first_psn) >= 0 &&
          psn_diff(x.b.psn, w.first_psn) < int32_t(w.npkts)) {
        c = &w;
      }
    }
    if (c == nullptr) return false;
    // Copied only when IBTA's lengths hold: the packet's own, and a last one ends the WRITE.
    const uint64_t at = uint64_t(psn_diff(x.b.psn, c->first_psn)) * q.attr.pmtu;
    if (!lengths_ok(o, x.len, q.attr.pmtu) || at + x.len > c->len ||
        (o.last && at + x.len != c->len) || !land(q, x, c->mr, c->offset + at, ctx, t)) {
      return false;
    }
  }
  e.valid = true;
  e.b = x.b;
  e.len = x.len;
  if (q.sr_naks.size() < kMaxSrNaks) q.sr_naks.push_back(x.b.psn);
  return true;
}

// Selective repeat: processes, in order, the packets kept past what was the gap.
void sweep(RcTransport::Qp& q, Context& ctx, RcCounters& t) {
  for (;;) {
    OooPkt& e = q.ooo[q.epsn % kSrWindow];
    if (!e.valid || e.b.psn != q.epsn) return;
    e.valid = false;
    RxHeader h;
    h.placed = e.len == 0 ? Placed::kNoPayload : Placed::kPlaced;
    h.payload_len = e.len;
    const Rx x{h, e.b, e.len};
    if (!accept(q, x, ctx, t)) return;  // its NAK or RNR NAK is due; it comes again
    const OpInfo o = op_info(e.b.opcode);
    q.epsn =
        psn_add(q.epsn, o.kind == OpKind::kReadRequest ? packets(e.b.dma_len, q.attr.pmtu) : 1);
    if (o.kind != OpKind::kReadRequest) q.ack_pending |= e.b.ack_req;
  }
}

}  // namespace

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
      if (q->attr.state != QpState::kRts) continue;
      if (o.kind == OpKind::kReadResponse) {
        // The READ it answers, and in order?
        SendWqe* w = nullptr;
        for (uint64_t i = q->sq_head; i != q->sq_tail; i++) {
          SendWqe& c = q->sq[(i)&q->sq_mask];
          if (!c.started) break;
          if (c.kind == ReqKind::kRead && c.covers(b.psn) && !c.done) {
            w = &c;
            break;
          }
        }
        if (w == nullptr) continue;  // a late duplicate
        const uint32_t expect = psn_add(w->first_psn, w->read_got);
        const bool sr = q->attr.selective_repeat;
        const int32_t ahead = psn_diff(b.psn, expect);
        if (ahead < 0 || (ahead > 0 && (!sr || bit(q->read_in, b.psn) ||
                                        psn_diff(b.psn, q->una) >= int32_t(kSrReadWindow)))) {
          // A duplicate, or (go-back-N) past a gap: dropped.
          if (ahead > 0 && !sr && w->read_retry != expect + 1) {
            w->read_retry = expect + 1;  // a gap: ask again from the first missing response
            q->c.naks_received++;
            total_.naks_received++;
            go_back(*q, expect);
          }
          continue;
        }
        // Selective repeat keeps a response past a gap too (in `read_in`). Each carries
        // PMTU bytes but the READ's last; the last ends with it. A re-asked range (selective
        // repeat) may end anywhere.
        const uint32_t k = uint32_t(psn_diff(b.psn, w->first_psn));
        const bool end = k + 1 == w->npkts;
        const uint32_t want = std::min(q->attr.pmtu, w->len - std::min(w->len, k * q->attr.pmtu));
        if (x.len != want || (end && !o.last) || (o.last && !end && !sr)) {
          fail(*q, -EIO, ctx, total_);
          continue;
        }
        if (!land(*q, x, w->mr, w->offset + uint64_t(k) * q->attr.pmtu, ctx, total_)) {
          fail(*q, -EFAULT, ctx, total_);
          continue;
        }
        if (sr) {
          // Responses still come, so the ones asked for again are queued behind them (another
          // READ's, or past a gap): no timeout yet. A gap this one reveals is asked for once,
          // at once.
          if (q->timer_ns != 0) q->timer_ns = now + rto_ns(*q);
          if (k > w->read_max) {
            q->c.naks_received++;
            total_.naks_received++;
            queue_resend(*q, psn_add(w->first_psn, w->read_max));
          }
          w->read_max = std::max(w->read_max, k + 1);
        }
        if (ahead > 0) {
          set_bit(q->read_in, b.psn, true);
          continue;
        }
        w->read_got++;
        while (sr && w->read_got < w->npkts && bit(q->read_in, psn_add(w->first_psn, w->read_got)))
          w->read_got++;
        if (w->read_got == w->npkts) w->done = true;
        // Responses acknowledge everything before them; the last one its READ too.
        ack_upto(*q, psn_add(w->first_psn, w->done ? w->npkts : w->read_got - 1), ctx);
        complete(*q, ctx);
        continue;
      }
      q->c.acks_received++;
      total_.acks_received++;
      if (syndrome_is_ack(b.syndrome)) {
        ack_upto(*q, psn_add(b.psn, 1), ctx);
      } else if (syndrome_is_rnr(b.syndrome)) {
        q->c.rnr_naks_received++;
        total_.rnr_naks_received++;
        ack_upto(*q, b.psn, ctx);
        if (q->attr.rnr_retry != 7) {
          if (q->rnr_left == 0) {
            fail(*q, -EBUSY, ctx, total_);
            continue;
          }
          q->rnr_left--;
        }
        go_back(*q, b.psn);
        q->rnr_until = now + rnr_timer_ns(b.syndrome & 0x1F);
        q->timer_ns = 0;
      } else if (b.syndrome == kSynPsnError) {
        q->c.naks_received++;
        total_.naks_received++;
        ack_upto(*q, b.psn, ctx);
        if (q->attr.selective_repeat) {
          // The responder has everything before the NAK's PSN, and the PSN its MSN field names
          // (our selective-repeat NAK): the holes below that one go again, each once per NAK
          // that passes it.
          const uint32_t got = b.msn;
          if (got == b.psn) {
            // It names nothing it has: it dropped what followed the gap (a SEND's packets the
            // NIC could not place), so all it lacks goes again.
            queue_holes(*q, b.psn, q->snd_max);
            q->recover_next = q->snd_max;
          } else if (psn_diff(got, q->una) >= 0 && psn_diff(got, q->snd_max) < 0) {
            set_bit(q->sacked, got, true);
            const uint32_t from = psn_diff(q->recover_next, q->una) > 0 ? q->recover_next : q->una;
            queue_holes(*q, from, got);
            if (psn_diff(psn_add(got, 1), q->recover_next) > 0) q->recover_next = psn_add(got, 1);
          }
        } else if (psn_diff(b.psn, q->snd_nxt) < 0) {
          rewind(*q, b.psn);
        }
      } else {
        ack_upto(*q, b.psn, ctx);
        fail(*q, syndrome_status(b.syndrome), ctx, total_);
      }
      continue;
    }

    // A request (SEND, WRITE, READ) at the responder.
    const int32_t d = psn_diff(b.psn, q->epsn);
    if (d < 0) {
      q->c.duplicates++;
      total_.duplicates++;
      if (o.kind == OpKind::kReadRequest) {
        reread(*q, x, ctx);
      } else {
        q->ack_pending = true;
      }
      continue;
    }
    if (d > 0) {
      q->c.out_of_sequence++;
      total_.out_of_sequence++;
      if (q->attr.selective_repeat) {
        if (!keep_ooo(*q, x, d, ctx, total_) && !q->nak_sent) q->nak_pending = kSynPsnError;
      } else if (!q->nak_sent && q->nak_pending == 0 && q->rnr_code_pending == 0xFF) {
        q->nak_pending = kSynPsnError;
      }
      continue;
    }
    // An RNR or error NAK for ePSN is already due this burst.
    if ((q->nak_pending != 0 && q->nak_pending != kSynPsnError) || q->rnr_code_pending != 0xFF) {
      continue;
    }
    if (!accept(*q, x, ctx, total_)) continue;
    if (q->attr.selective_repeat) q->ooo[b.psn % kSrWindow].valid = false;  // a kept copy
    q->epsn =
        psn_add(q->epsn, o.kind == OpKind::kReadRequest ? packets(b.dma_len, q->attr.pmtu) : 1);
    q->nak_sent = false;
    if (q->nak_pending == kSynPsnError) q->nak_pending = 0;  // the gap closed
    // READ responses acknowledge their request.
    if (o.kind != OpKind::kReadRequest) q->ack_pending |= b.ack_req;
    if (q->attr.selective_repeat) sweep(*q, ctx, total_);
  }

  for (Qp* tq : touched_) {
    Qp& q = *tq;
    q.touched = false;
    if (q.attr.state == QpState::kErr) continue;
    if (q.epsn != q.cursor) {
      ctx.cursor_update(q.flow, q.epsn);
      q.cursor = q.epsn;
    }
    if (q.resync && !q.in_send && !q.in_write) {
      ctx.roce_resync(q.flow, q.epsn, uint32_t(q.rq_head));
      q.resync = false;
    }
    if (q.cnp_due) {
      Headers h;
      h.opcode = kCnp;
      h.becn = true;
      header(q, h, ctx).dscp = uint8_t(q.dcqcn_params.cnp_dscp);
      count_tx(q, 0, total_);
      q.c.cnps_sent++;
      total_.cnps_sent++;
      q.cnp_due = false;
    }
    respond(q, ctx, total_);
    // Selective repeat: a NAK per packet accepted past a gap, naming it (MSN field) and the
    // ePSN (all before it received), unless the gap closed meanwhile.
    for (uint32_t got : q.sr_naks) {
      if (psn_diff(got, q.epsn) <= 0) continue;
      Headers h;
      h.opcode = kAck;
      h.psn = q.epsn;
      h.syndrome = kSynPsnError;
      h.msn = got;
      header(q, h, ctx);
      count_tx(q, 0, total_);
      q.c.naks_sent++;
      total_.naks_sent++;
    }
    q.sr_naks.clear();
    if (q.nak_pending != 0) {
      // Selective repeat names no PSN it has (MSN = ePSN): everything missing goes again.
      const bool sr = q.attr.selective_repeat && q.nak_pending == kSynPsnError;
      send_ack(q, q.nak_pending, q.epsn, sr ? q.epsn : q.msn, ctx, total_);
      const bool fatal = q.nak_pending == kSynInvalid || q.nak_pending == kSynAccess;
      if (q.nak_pending == kSynPsnError) {
        q.nak_sent = true;
        q.c.naks_sent++;
        total_.naks_sent++;
      }
      q.nak_pending = 0;
      q.ack_pending = false;
      // An invalid request or a remote access error is fatal to the responder's QP too (an RC
      // class C error; Linux rxe does the same): ERR once the NAK is out, receives flushed.
      if (fatal) fail(q, -ECANCELED, ctx, total_);
    } else if (q.rnr_code_pending != 0xFF) {
      send_ack(q, uint8_t(kSynRnr | q.rnr_code_pending), q.epsn, q.msn, ctx, total_);
      q.nak_sent = true;  // no PSN-sequence NAK for the packets behind it
      q.c.rnr_naks_sent++;
      total_.rnr_naks_sent++;
      q.rnr_code_pending = 0xFF;
      q.ack_pending = false;
    } else if (q.ack_pending) {
      send_due_ack(q, ctx, total_);
    }
    pump(q, ctx, total_);
  }
}

void RcTransport::tick(Context& ctx) {
  const uint64_t now = ctx.now_ns();
  for (FlowId f : live_) {
    Qp& q = *qps_[f];
    if (q.attr.state != QpState::kRts && q.attr.state != QpState::kRtr) continue;
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
        q.recover_next = q.una;  // everything the responder does not have goes again
        queue_holes(q, q.una, q.snd_max, true);
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
  out.number("srtt_us", q->srtt_ns / 1000);
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
