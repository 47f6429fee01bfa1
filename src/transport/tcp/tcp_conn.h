// tcp_conn.h - one TCP connection's state: the send queue over app memory, the SACK
// scoreboard, the receive buffers posted as NIC memory segments, and its timers.
//
// Private to the tcp_*.cc files. Sequence numbers are 32-bit and compared modulo 2^32;
// byte counts that must not wrap (the receive stream offset, CC's bookkeeping) are 64-bit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "rtt.h"
#include "tcp.h"
#include "tcp_wire.h"
#include "timer_wheel.h"
#include "transport/cc/cc.h"

namespace cleave::transport::tcp {

// A FIFO over a vector that grows by doubling (only when a flow queues more than ever before;
// the steady state does not allocate).
template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == tail_; }
  size_t size() const { return tail_ - head_; }
  T& operator[](size_t i) { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  const T& operator[](size_t i) const { return buf_[(head_ + i) & (buf_.size() - 1)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size() - 1]; }
  void push_back(const T& v) {
    if (size() == buf_.size()) grow();
    buf_[tail_++ & (buf_.size() - 1)] = v;
  }
  void pop_front() { head_++; }

 private:
  void grow() {
    std::vector<T> n(buf_.empty() ? 16 : buf_.size() * 2);
    for (size_t i = 0; i < size(); i++)
      n[i] = (*this)[i];
    tail_ = size();
    head_ = 0;
    buf_.swap(n);
  }
  std::vector<T> buf_;
  size_t head_ = 0;
  size_t tail_ = 0;
};

// An app send: bytes [seq, seq + len) of the stream live at (mr, offset).
struct SendChunk {
  uint32_t seq = 0;
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t wr_id = 0;
  uint16_t mr = 0;
  uint32_t msg_no = 0;  // message mode: the message this send is
};

// An app receive buffer: stream bytes [start, start + len) land at (mr, offset).
struct RecvBuf {
  uint64_t start = 0;  // receive stream offset (bytes since the peer's SYN)
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t wr_id = 0;
  uint16_t mr = 0;
  bool on_nic = false;  // posted as an MS
  // Message mode: the number of the message this buffer takes (the k-th outstanding receive
  // takes the k-th message not yet received), the MS's number on the NIC...
  uint32_t msg_no = 0;
  // ...and where that message is, once a segment of it has said.
  bool msg_known = false;
  uint32_t msg_start = 0;  // sequence number of its first byte
  uint32_t msg_len = 0;
};

// Sorted, disjoint sequence ranges: the sender's SACK scoreboard, the receiver's out-of-order
// data. Fixed size; when full, add() refuses a range that would need a new slot.
struct RangeSet {
  static constexpr size_t kMax = 32;
  SackBlock r[kMax];
  uint8_t n = 0;

  // Adds [left, right); merges neighbours. Returns false when it did not fit.
  bool add(uint32_t left, uint32_t right);
  // Drops everything below seq (trimming a range that straddles it).
  void drop_below(uint32_t seq);
  // The range containing seq, or nullptr.
  const SackBlock* find(uint32_t seq) const;
  bool covers(uint32_t left, uint32_t right) const;
  // Removes [left, right) (splitting a range that holds it). Returns false when a split did not
  // fit (nothing is removed then).
  bool remove(uint32_t left, uint32_t right);
  uint64_t bytes() const;
  void clear() { n = 0; }
};

// One transmission: bytes [start, end) left in one descriptor (a TSO burst, a retransmission or a
// probe) at ts. RACK (RFC 8985) reads them in transmit order.
struct Xmit {
  uint32_t start = 0;
  uint32_t end = 0;
  uint64_t ts = 0;
  bool rxt = false;         // a retransmission
  bool superseded = false;  // a later retransmission resent part of it
  bool delivered = false;   // wholly acknowledged or SACKed
};

// The flow's transmissions in time order: a fixed ring. When full, the oldest two join when they
// are one stretch of first transmissions, under the later one's time (RACK then deems their bytes
// lost no sooner than it would have); else the oldest is forgotten (its bytes are then left to
// SACK recovery and the RTO). Forgetting alone left a loss among forgotten bytes of a window of
// more than kMax descriptors to the RTO (CUBIC at 0.1 % loss, tcp_sim_loss).
struct XmitLog {
  static constexpr size_t kMax = 256;
  Xmit e[kMax];
  size_t head = 0;
  size_t n = 0;
  size_t rxt = 0;  // retransmissions among them: none, and the log is in sequence order too

  Xmit& operator[](size_t i) { return e[(head + i) % kMax]; }
  const Xmit& operator[](size_t i) const { return e[(head + i) % kMax]; }
  void push(const Xmit& x) {
    if (n == kMax) {
      const Xmit& a = e[head];
      Xmit& b = (*this)[1];
      const bool first = !a.rxt && !b.rxt && !a.superseded && !b.superseded;
      if (first && !a.delivered && !b.delivered && a.end == b.start) b.start = a.start;
      pop();
    }
    e[(head + n++) % kMax] = x;
    rxt += x.rxt ? 1 : 0;
  }
  void pop() {
    rxt -= e[head].rxt ? 1 : 0;
    head = (head + 1) % kMax;
    n--;
  }
  void clear() { head = n = rxt = 0; }
};

struct Conn {
  // ---- identity ----
  TcpTransport* tp = nullptr;  // for timer callbacks
  FlowId flow = kNoFlow;
  FlowTuple tuple;
  State state = State::kClosed;
  bool passive = false;
  bool accepted = false;   // the app has heard kConnected or kAccepted
  bool app_done = false;   // the app has heard kClosed (TIME_WAIT goes on without it)
  bool orphan = false;     // the app left while it closed: the close goes on without it
  bool half_open = false;  // passive, in SYN-RECEIVED: counted in its listener's half_open
  ListenerId listener = 0;
  uint32_t listener_gen = 0;  // Listener::gen when it was counted
  Settings st;

  // ---- negotiated ----
  bool sack_ok = false;
  bool ts_ok = false;
  bool ecn_ok = false;
  bool msg_ok = false;      // message mode negotiated
  bool dctcp_echo = false;  // receiver echoes CE per segment (DCTCP), else sticky ECE (RFC 3168)
  uint8_t snd_wscale = 0;   // applied to windows the peer advertises
  uint8_t rcv_wscale = 0;   // applied to windows we advertise
  uint16_t peer_mss = 536;  // RFC 9293 default when the SYN carries none
  uint16_t eff_mss = 536;   // payload per segment, options excluded

  // ---- send ----
  uint32_t iss = 0;
  uint32_t snd_una = 0;
  uint32_t prior_una = 0;  // snd_una before the ACK being processed (else snd_una)
  uint32_t snd_nxt = 0;
  uint32_t snd_max = 0;  // highest sequence sent + 1
  uint32_t snd_end = 0;  // one past the last byte the app queued
  uint32_t snd_wnd = 0;  // scaled
  uint32_t max_snd_wnd = 0;
  uint32_t snd_wl1 = 0;
  uint32_t snd_wl2 = 0;
  Fifo<SendChunk> sendq;    // unacknowledged and unsent app sends, in sequence order
  bool fin_queued = false;  // the app closed: FIN goes after snd_end
  bool fin_sent = false;
  size_t tx_hint = 0;           // sendq index of the chunk holding snd_nxt (a search hint)
  uint64_t snd_una64 = 0;       // bytes acknowledged since the SYN, for CC (never wraps)
  uint32_t snd_msg_no = 0;      // message mode: the number the next send gets
  uint32_t peer_msg_limit = 0;  // message mode: the peer takes messages numbered below this

  // Loss recovery.
  RangeSet sacked;         // SACKed above snd_una
  uint32_t high_sack = 0;  // highest SACKed sequence + 1 (valid when sacked.n > 0)
  bool in_recovery = false;
  uint32_t recover = 0;   // snd_max when recovery began (RFC 6582)
  uint32_t high_rxt = 0;  // retransmitted up to here in this recovery (RFC 6675 HighRxt)
  uint32_t dupacks = 0;
  bool rto_recovery = false;  // after an RTO: resend from snd_una, skipping SACKed ranges
  bool need_rxt = false;      // NewReno (no SACK): retransmit the segment at snd_una

  // RACK-TLP (RFC 8985), with SACK only. `lost` holds what RACK deems lost that SACK recovery
  // would not resend: lost retransmissions (below high_rxt) and the tail above high_sack.
  XmitLog xmits;
  RangeSet lost;
  uint64_t rack_xmit_ts = 0;  // the latest transmission known delivered...
  uint32_t rack_end_seq = 0;  // ...and its end
  uint64_t rack_rtt = 0;      // its RTT
  uint32_t reo_wnd_mult = 1;  // reordering window in min_rtt/4 (grows with DSACKs)
  bool reord_seen = false;    // a DSACK came, or a segment sent once arrived after later ones
  // Undo (Linux's undo_marker, undo_retrans): the window before the latest loss episode, and the
  // bytes it has resent that no DSACK has reported yet; -1 when there is nothing to undo.
  int64_t undo_rxt = -1;
  uint32_t undo_marker = 0;  // snd_una when the episode began: DSACKs below it are older
  uint64_t undo_cwnd = 0;
  uint64_t undo_ssthresh = 0;
  // The timestamp the first resends after an RTO carried, when that RTO began the episode (0:
  // none). An ACK of new data echoing an older one acknowledges an original: the RTO was
  // spurious (Eifel detection, RFC 3522), and its reduction is undone.
  uint32_t rto_ts = 0;
  uint32_t reo_wnd_persist = 0;
  uint32_t dsack_round = 0;  // no new growth until snd_una passes this
  bool dsack_round_on = false;
  bool tlp_out = false;  // a probe is outstanding
  bool tlp_rxt = false;  // ...and it resent old data
  bool tlp_dsack = false;
  uint32_t tlp_end_seq = 0;

  // Congestion control.
  cc::State ccs;
  cc::Storage cc_mem;
  cc::Algorithm* cc = nullptr;
  bool cwr_pending = false;  // set CWR on the next new data segment
  uint32_t ecn_recover = 0;  // no new ECN reaction until snd_una passes this
  bool ecn_reacting = false;

  // RTT and RTO (RFC 6298), all in ns.
  bool rtt_timing = false;
  uint32_t rtt_seq = 0;
  uint64_t rtt_start = 0;
  RttEstimator rtt;
  uint64_t rto = 0;
  uint64_t rto_at = 0;   // when the armed RTO fires
  uint32_t backoff = 0;  // RTOs (or probes) in a row
  bool persist = false;  // the peer's window is zero and data waits

  // ---- receive ----
  uint32_t irs = 0;
  uint32_t rcv_nxt = 0;
  uint32_t rcv_adv = 0;     // right edge we advertised
  uint64_t rcv_stream = 0;  // data bytes received in order
  uint64_t posted_end = 0;  // stream offset one past the last posted buffer
  Fifo<RecvBuf> recvq;
  RangeSet ooo;          // out-of-order data held above rcv_nxt
  SackBlock last_ooo{};  // the block the latest out-of-order segment joined (first SACK)
  bool dsack_pending = false;
  SackBlock dsack{};
  bool fin_received = false;  // the peer's FIN is in order and consumed
  bool fin_seen = false;      // a FIN arrived, perhaps beyond a hole
  uint32_t rcv_fin_seq = 0;
  uint32_t ts_recent = 0;
  bool ts_recent_valid = false;
  uint32_t last_ack_sent = 0;
  uint32_t nic_cursor = 0;    // last cursor given to the NIC
  uint32_t nic_ms = 0;        // receive buffers posted to the NIC and not yet retired
  bool nic_msg_off = false;   // message mode: the NIC flow does not place by message (copy)
  bool synced = false;        // the NIC knows the receive sequence
  uint32_t unacked_segs = 0;  // received since our last ACK
  bool ack_now = false;
  bool invalid_answered = false;  // an unacceptable segment was answered, at invalid_answer_ns
  uint64_t invalid_answer_ns = 0;
  bool ce_pending = false;    // RFC 3168: echo ECE until the peer sends CWR
  bool last_ce = false;       // DCTCP: CE of the last data segment
  uint32_t rcv_progress = 0;  // new in-order bytes this burst (one kRecvData event)
  bool fenced = false;        // after the peer's FIN: the NIC places nothing more
  // Message mode: recvq's front takes message rcv_msg_no, which starts at rcv_msg_seq; the
  // credit we gave the peer is rcv_msg_no + recvq.size() (last advertised: msg_limit_adv).
  uint32_t rcv_msg_no = 0;
  uint32_t rcv_msg_seq = 0;
  uint32_t msg_limit_adv = 0;
  uint64_t msg_truncated = 0;

  // ---- timers ----
  Timer rto_timer;
  Timer delack_timer;
  Timer misc_timer;         // persist, TIME_WAIT, FIN_WAIT_2
  Timer reo_timer;          // RACK reordering window
  Timer tlp_timer;          // probe timeout (PTO)
  Timer wnd_timer;          // repeats a window update that reopened a closed window
  uint8_t wnd_repeats = 0;  // repeats left; cancelled by the peer's next data

  // ---- per-flow statistics ----
  uint64_t retransmits = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_acked = 0;
  uint64_t bytes_received = 0;
  uint64_t placed_bytes = 0;
  uint64_t copied_bytes = 0;
  uint64_t dup_bytes = 0;
  uint64_t rtos = 0;
  uint64_t fast_recoveries = 0;
  uint64_t ecn_reductions = 0;
  uint64_t tlp_probes = 0;
  uint64_t rack_losses = 0;  // ranges RACK marked lost
  uint64_t undos = 0;        // reductions undone: every retransmission of the episode DSACKed

  bool dirty = false;  // on the transport's list for after_burst

  uint64_t inflight() const;  // RFC 6675 pipe
  // The flight a window reduction scales: RFC 5681's FlightSize (sent, not cumulatively
  // acknowledged) before the ACK that found the loss (Linux's prior_snd_una), at most cwnd (Linux
  // scales cwnd). Not the pipe: by the time a loss is found, SACKed bytes, the holes and what RACK
  // marked lost have left it, and halving what remained cut NewReno to about 0.4 of its window at
  // nearly every loss (tcp_sim_loss --trace).
  uint64_t flight_size() const { return std::min<uint64_t>(snd_max - prior_una, ccs.cwnd); }
  // Room in the posted buffers. In message mode posted_end counts the known length of each
  // buffer's message in place of the buffer's (see msg_buffer), so a message longer than its
  // buffer still opens the window it needs.
  uint32_t rcv_space() const {
    return posted_end > rcv_stream ? uint32_t(std::min<uint64_t>(posted_end - rcv_stream, 1u << 31))
                                   : 0;
  }
  uint32_t msg_limit() const { return rcv_msg_no + uint32_t(recvq.size()); }
  // One past the last byte the peer's message credit lets us send (snd_end when all of it).
  uint32_t msg_send_right() const {
    if (!msg_ok || sendq.empty()) return snd_end;
    const uint32_t allowed = peer_msg_limit - sendq.front().msg_no;  // messages from the front
    if (int32_t(allowed) <= 0) return sendq.front().seq;
    return allowed < sendq.size() ? sendq[allowed].seq : snd_end;
  }
  // New data waits for the peer: a zero window, or no message credit.
  bool send_blocked() const { return snd_wnd == 0 || seq_geq(snd_nxt, msg_send_right()); }
};

// A connection in TIME-WAIT, all that is left of it once it got there (RFC 9293 3.6): enough to
// answer a retransmitted FIN, check timestamps (PAWS) and let a newer SYN reuse the tuple. It
// holds no app memory; its flow id stays the dataplane's until the record ends.
struct TimeWait {
  TcpTransport* tp = nullptr;
  FlowId flow = kNoFlow;
  uint16_t local_port = 0;
  uint16_t remote_port = 0;
  uint32_t snd_nxt = 0;  // after our FIN
  uint32_t rcv_nxt = 0;  // after the peer's FIN
  uint32_t ts_recent = 0;
  uint16_t window = 0;  // the window field our ACKs carry
  bool ts_ok = false;
  bool answered = false;   // an ACK went to a segment that carried nothing...
  uint64_t answer_ns = 0;  // ...at this time (the rate limit)
  Timer timer;             // 2 MSL (time_wait_ms), restarted by segments that need an answer
  uint64_t duration_ns = 0;
};

// The tuple of a received segment, seen from this host.
FlowTuple tuple_of(const RxHeader& h, const Segment& s);

// How long a reopened window's update waits for the peer's data before it goes again.
inline uint64_t wnd_repeat_ns(const Conn& c) {
  return std::max<uint64_t>(2 * c.rtt.srtt(), 1'000'000);
}

}  // namespace cleave::transport::tcp
