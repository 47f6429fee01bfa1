// rc_qp.h - inside RcTransport: a queue pair's state and queues, and what one rc_*.cc file calls
// in another (internal to rocev2/: rc.h is the interface).
//
// The functions below take the QP and the transport's totals (`t`, counted with each QP's own
// counters) and act through the Context; none allocates. Those called once per packet on both
// sides (pacing, the TX descriptor, landing a payload) are inline here.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "rc.h"
#include "roce_wire.h"
#include "rtt.h"
#include "transport/cc/dcqcn.h"
#include "transport/cc/pacer.h"

namespace cleave::transport::roce {

inline constexpr uint32_t kAckEvery = 64;       // AckReq at least every this many packets (rxe)
inline constexpr uint32_t kMaxInflight = 1024;  // packets sent and not acknowledged
// Selective repeat: PSNs tracked past the oldest, and the shortest RTO.
inline constexpr uint32_t kSrWindow = kMaxInflight;
inline constexpr uint64_t kSrRtoMinNs = 250'000;
// Selective repeat: READ responses kept past a gap, up to this many PSNs past the oldest
// unacknowledged (the window and a READ of up to 3072 responses begun at its edge).
inline constexpr uint32_t kSrReadWindow = 4 * kSrWindow;
// Selective repeat: the bytes a responder keeps of SEND packets past a gap (the NIC cannot place
// them), in slots of a PMTU made at RTR: the window (kSrWindow packets) at a PMTU of 1024, a
// quarter of it at 4096. A packet that finds no slot is dropped and sent again.
inline constexpr uint32_t kSrSendKeepBytes = 1u << 20;
inline constexpr uint32_t kMaxRereads = 64;  // READ re-asks a requester follows (Qp::rereads)
inline constexpr uint32_t kMaxSrNaks = 32;   // selective-repeat NAKs a QP sends per burst
// Selective repeat: a run of packets kept past a gap is NAKed when it starts, then once per this
// many packets it grows by (or at a packet asking for an ACK), not once per packet.
inline constexpr uint32_t kSrNakEvery = 16;
// Packet spraying (`spray N`): the most source ports a QP sprays over, and how many packets sent
// after a hole must be known to have arrived before a sprayed QP takes it for lost when the QP
// does not say (`reorder K`, at most kMaxReorder; unsprayed QPs take a hole at once, K = 1).
inline constexpr uint32_t kMaxSpray = 64;
inline constexpr uint32_t kSprayReorder = 32;
inline constexpr uint32_t kMaxReorder = kSrWindow / 2;
inline constexpr uint32_t kMaxReadQueue = 16;  // READs a responder holds (max_dest_rd_atomic)
inline constexpr uint32_t kRespBurst = 64;     // READ response packets per call, per QP
inline constexpr uint64_t kDefaultRateBps = 100'000'000'000ull;
inline constexpr uint8_t kEct0 = 2;  // the IP ECN field of every packet under DCQCN
// Ethernet, IP, UDP, BTH, ICRC, preamble: what the pacer counts for a packet beside its payload.
inline constexpr uint32_t kWireOverhead = 64;

// PSNs a message of `len` bytes takes (a PMTU is at least 256: modify_qp checks it).
// PMTUs are powers of two (modify_qp checks): a shift, not a division, on the send path.
inline uint32_t packets(uint32_t len, uint32_t pmtu) {
  const int shift = std::countr_zero(std::max(pmtu, 256u));
  return len == 0 ? 1 : uint32_t((uint64_t(len) + (uint64_t(1) << shift) - 1) >> shift);
}

// A ring, oldest first, that forgets its oldest entry to make room: what the requester notes
// to send again early (a timeout still finds what it forgot). Sized at RTR (assign).
template <class T>
struct ForgetfulRing {
  std::vector<T> v;
  uint32_t head = 0;
  uint32_t n = 0;
  void assign(size_t cap) {
    v.assign(cap, T{});
    head = n = 0;
  }
  void push(const T& x) {
    const auto cap = uint32_t(v.size());
    if (n == cap) pop();
    v[(head + n++) % cap] = x;
  }
  const T& at(uint32_t i) const { return v[(head + i) % v.size()]; }
  T pop() {
    const T x = v[head];
    head = (head + 1) % uint32_t(v.size());
    n--;
    return x;
  }
};

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
  uint32_t read_asked = 0;  // READ, selective repeat: gaps below it were asked for again
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
// payload, it had none, or a SEND's payload is in a slot of the QP's keep buffer), kept until
// ePSN reaches it and it is processed in order.
struct OooPkt {
  bool valid = false;
  int32_t slot = -1;  // the keep buffer's slot holding its payload, -1: none
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

struct RcTransport::Qp {
  FlowId flow = kNoFlow;
  uint32_t qpn = 0;
  QpAttr attr;
  uint16_t sport = 0xC000;
  // Packet spraying: request and READ response i goes from source port sport + i % spray
  // (within 0xC000-0xFFFF), so ECMP spreads the QP; ACKs, NAKs and CNPs keep `sport`, one path,
  // so they arrive in the order they tell it. A hole is lost once `reorder` packets sent after
  // it are known to have arrived.
  uint16_t spray = 1;
  uint16_t spray_next = 0;
  uint32_t reorder = 1;
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
  uint32_t reads_out = 0;  // READs issued and still missing responses (max_rd_atomic)
  uint32_t since_ackreq = 0;
  uint64_t timer_ns = 0;   // local ACK timer deadline, 0: off
  uint64_t rnr_until = 0;  // waiting out an RNR NAK until then, 0: not
  uint8_t retries_left = 7;
  uint8_t rnr_left = 7;
  // The round trip (RFC 6298's estimator, selective repeat's RTO): one packet timed at a time,
  // from its first sending to the acknowledgment past it (rtt_end); a timed packet sent again is
  // no sample. backoff: timeouts in a row.
  uint32_t rtt_end = 0;
  bool timing = false;   // a packet is timed
  bool ticking = false;  // on RcTransport::ticking_
  uint64_t rtt_sent_ns = 0;
  RttEstimator rtt;
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
  // The responder's ePSN as its ACKs and NAKs last told it: everything before it arrived, though
  // una may stay below it, at a READ still missing responses.
  uint32_t peer_epsn = 0;
  // Selective repeat, requester: the SEND and WRITE packets sent again and not yet known to have
  // arrived, oldest first (a ring of kSrWindow), each with snd_max when it went. A NAK naming a
  // PSN from there on (sent after it, over a path that keeps order) tells it was lost again: it
  // goes again at once, with no timeout; a timeout sends them again too.
  struct Again {
    uint32_t psn = 0;
    uint32_t mark = 0;
  };
  ForgetfulRing<Again> again;
  // Selective repeat, requester: the READ responses asked for again ([from, to)) and not yet all
  // in, oldest first (a ring of kMaxRereads), each with snd_max when it went. The responder
  // answers in order, so a response to a later re-read, or to a READ first asked for after one
  // went, tells what is still missing of that one was lost again: it is asked for at once.
  struct Reread {
    uint32_t from = 0;
    uint32_t to = 0;
    uint32_t mark = 0;
  };
  ForgetfulRing<Reread> rereads;
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
  // Selective repeat, responder: packets accepted past a gap, by psn % kSrWindow; the run of
  // consecutive ones the newest belongs to ([run_lo, run_hi], run_unsent of them not yet in a
  // NAK, from run_hi back), and the ranges this burst NAKs.
  std::vector<OooPkt> ooo;
  struct Range {
    uint32_t lo = 0;
    uint32_t hi = 0;
  };
  std::vector<Range> sr_naks;
  bool run = false;
  uint32_t run_lo = 0;
  uint32_t run_hi = 0;
  uint32_t run_unsent = 0;
  std::array<WriteCtx, 8> wctx{};
  uint32_t wctx_next = 0;
  // Selective repeat, responder: SEND payloads kept past a gap (the copy path's bytes live only
  // for the call), kSrSendKeepBytes in slots of the PMTU, and the free slots (a stack); both
  // made at RTR.
  std::vector<uint8_t> keep;
  std::vector<uint16_t> keep_free;

  bool outstanding() const { return psn_diff(snd_max, una) > 0; }
};

// A set of PSNs in a ring of a power-of-two size by psn % size, each slot holding psn + 1
// (0: none), so a PSN a ring later (a READ takes many PSNs) never reads as a member: it takes
// the slot over.
inline bool bit(const std::vector<uint32_t>& v, uint32_t psn) {
  return v[psn & (v.size() - 1)] == psn + 1;
}
inline void set_bit(std::vector<uint32_t>& v, uint32_t psn, bool on) {
  uint32_t& slot = v[psn & (v.size() - 1)];
  if (on) {
    slot = psn + 1;
  } else if (slot == psn + 1) {
    slot = 0;
  }
}

inline EventKind done_kind(ReqKind k) {
  switch (k) {
    case ReqKind::kWrite:
      return EventKind::kWriteDone;
    case ReqKind::kRead:
      return EventKind::kReadDone;
    default:
      return EventKind::kSendDone;
  }
}

// ---- sending, for both sides -------------------------------------------------------------------

// True when the pacer lets a packet go now.
inline bool pace(RcTransport::Qp& q, uint64_t now) {
  return q.pacer.may_send(now);
}

// The rate the pacer keeps: DCQCN's, under the QP's cap.
inline void set_rate(RcTransport::Qp& q) {
  q.pacer.set_rate(q.dcqcn ? std::min(q.rp.rate_bps(), q.rate_bps) : q.rate_bps);
}

inline void spend(RcTransport::Qp& q, uint32_t payload, uint64_t now) {
  q.pacer.sent(payload + kWireOverhead, now);
  if (q.dcqcn && q.rp.on_sent(payload + kWireOverhead, now)) set_rate(q);
}

inline void count_tx(RcTransport::Qp& q, uint32_t len, RcCounters& total) {
  q.c.tx_packets++;
  q.c.tx_bytes += len;
  total.tx_packets++;
  total.tx_bytes += len;
}

// The TX descriptor of a packet the QP sends, its UDP and RoCE headers built from `h`.
inline TxDesc& header(RcTransport::Qp& q, Headers& h, Context& ctx) {
  TxDesc& d = ctx.tx_next();
  d.flow = q.flow;
  d.flags = kTxParserTrailer;
  // Under DCQCN every packet goes out ECT(0): requests, READ responses, ACKs and NAKs, READ
  // requests and CNPs, as mlx5 sends them (a switch marks what is ECN-capable only).
  d.ecn = q.dcqcn ? kEct0 : 0;
  h.src_port = q.sport;
  if (q.spray > 1 && h.opcode != kAck && h.opcode != kCnp) {
    h.src_port = uint16_t(0xC000 | ((q.sport + q.spray_next) & 0x3FFF));
    if (++q.spray_next == q.spray) q.spray_next = 0;
  }
  h.dest_qp = q.attr.dest_qpn;
  d.l4_len = uint8_t(build(h, d.l4.data()));
  return d;
}

// ---- receiving, for both sides -----------------------------------------------------------------

// A packet being processed: the dataplane's header, its parsed RoCE headers, its payload length.
struct Rx {
  const RxHeader& h;
  const Headers& b;
  uint32_t len;  // payload
};

// Puts a payload where the transport says: the NIC placed it, or the copy path copies it.
inline bool land(RcTransport::Qp& q, const Rx& x, uint16_t mr, uint64_t offset, Context& ctx,
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

// ---- rc.cc: QP state ---------------------------------------------------------------------------

// Every request still queued completes with `status`: the first one (the one that failed) with
// its own error, the rest flushed.
void flush_all(RcTransport::Qp& q, int first_status, Context& ctx);
// The QP goes to ERR, once: its requests complete, the first with `status` (flush_all).
void to_error(RcTransport::Qp& q, int status, Context& ctx);
// The request holding `psn` failed with `status`: it and everything after it complete with
// errors, and the QP goes to ERR.
void fail(RcTransport::Qp& q, int status, Context& ctx, RcCounters& t);

// ---- rc_timer.cc: time -------------------------------------------------------------------------

// The local ACK timer. Go-back-N: the QP's timeout attribute, as IBTA defines it. Selective
// repeat (IRN's point: a lossy fabric cannot wait 67 ms for each lost retransmission or tail):
// the RTO of the measured round trip, srtt + 4 rttvar, at least kSrRtoMinNs, doubled for each
// timeout in a row, never above the attribute's.
uint64_t rto_ns(const RcTransport::Qp& q);
// The timed packet is acknowledged: a round-trip sample (RFC 6298 2.2, 2.3).
void rtt_sample(RcTransport::Qp& q, uint64_t now);

// ---- rc_requester.cc ---------------------------------------------------------------------------

// Sends what the queues, the window, the pacer and the READ limit allow.
void pump(RcTransport::Qp& q, Context& ctx, RcCounters& t);
// Completes finished requests from the oldest, in order.
void complete(RcTransport::Qp& q, Context& ctx);
// Go back to `psn` (go-back-N): the request holding it is sent again from there.
void rewind(RcTransport::Qp& q, uint32_t psn);
// Selective repeat: every PSN in [from, to) the responder does not have is sent again. A READ
// is one request: its first PSN stands for all of them; after a timeout (`all`) a READ still
// missing responses is asked again even when the responder has its request. `reads_only`: the
// READs' only.
void queue_holes(RcTransport::Qp& q, uint32_t from, uint32_t to, bool all = false,
                 bool reads_only = false);
// Selective repeat's timeout: the first unacknowledged packet and the last one sent go again
// (the last, past a lost tail, is NAKed naming it and shows the holes), and the packets sent
// again and still missing; not the packets in flight between, nor the holes no NAK has shown
// yet. Every READ short of responses asks again (no response came for an RTO: none is coming).
void resend_on_timeout(RcTransport::Qp& q);
// A response at the requester, in RTS: an ACK or NAK (cumulative acknowledgment, go-back-N or
// selective repeat's resends, RNR waits, errors), or a READ response (placed, in order or kept
// past a gap).
void on_response(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t);

// ---- rc_responder.cc ---------------------------------------------------------------------------

// A request (SEND, WRITE, READ) at the responder: a duplicate, one past a gap, or the one at
// ePSN, accepted or NAKed.
void on_request(RcTransport::Qp& q, const Rx& x, Context& ctx, RcCounters& t);
// Once per burst for each QP it reached (not in ERR): the NIC's cursor and message chain, a CNP
// that is due, queued READ responses, then the NAKs, RNR NAK or ACK the burst made due.
void finish_rx(RcTransport::Qp& q, Context& ctx, RcCounters& t);
// Sends queued READ responses (as the pacer allows, at most kRespBurst per call).
void respond(RcTransport::Qp& q, Context& ctx, RcCounters& t);
// The PSN an ACK may name now: the newest accepted, but not past a READ whose responses are
// still queued (the ACK would tell the requester they were lost). Duplicates executed again do
// not hold it back: the requester had their ACK.
uint32_t ack_point(const RcTransport::Qp& q);
// Sends the ACK that is due, as far as ack_point() allows; the rest stays due.
void send_due_ack(RcTransport::Qp& q, Context& ctx, RcCounters& t);

}  // namespace cleave::transport::roce
