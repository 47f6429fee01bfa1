// tcp.h - TCP on headers: the transport that interoperates with Linux (RFC 9293 and friends).
//
// What it does, and where:
//   tcp.cc         control: listen/connect/close, parameters, connection life, flow_info
//   tcp_input.cc   the receive path: acceptability, RST/SYN rules (RFC 5961), PAWS, ACK and SACK
//                  processing, loss detection, the receive sequence and the NIC cursor
//   tcp_output.cc  the send path: data within cwnd and the peer's window (TSO over app memory),
//                  SACK-based retransmission (RFC 6675), ACKs with SACK/DSACK, SYN, FIN, RST
//   tcp_timer.cc   RTO (RFC 6298), delayed ACK, zero-window persist, TIME_WAIT
//   tcp_rack.cc    RACK-TLP (RFC 8985): loss detection by transmit time, the tail loss probe
//   tcp_syncookie.cc  the listener's half-open budget and SYN cookies (RFC 4987) past it
//   tcp_timewait.cc   TIME-WAIT as a compact record that outlives the app (RFC 9293 3.6)
//   tcp_traffic.cc    the traffic it claims: parsing a segment's ports and header length for the
//                     owner's demultiplexing, the RST for a segment of no flow (RFC 9293 3.10.7.1)
//
// Payload is never touched: received data has been placed by the NIC (or is copied by the
// dataplane through Context::copy_in into the buffer the transport names), sent data is named by
// (mr, offset, len) and re-issued from the same memory on retransmission. A receive buffer the
// app posts becomes a memory segment (MS) on the NIC; the transport advances the NIC's cursor
// as in-order data arrives and retires the segments the cursor has passed before it completes
// them to the app.
//
// Batching: rx_burst() processes every header of a burst, then visits each connection it touched
// once: one cursor update, one ACK decision and one output pass per connection per burst. Before
// that, consecutive headers of one established connection that continue each other as plain
// in-order data the NIC placed (the same header but for the sequence number, as Linux's GRO asks)
// go through the receive path as one segment, with the outcome of one pass each (run_length in
// tcp_input.cc): the per-segment work is paid once per run.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tcp_wire.h"
#include "timer_wheel.h"
#include "transport.h"
#include "transport/cc/cc.h"

namespace cleave::transport::tcp {

enum class State : uint8_t {
  kClosed,
  kSynSent,
  kSynReceived,
  kEstablished,
  kFinWait1,
  kFinWait2,
  kCloseWait,
  kClosing,
  kLastAck,
  kTimeWait,
};
std::string_view state_name(State s);

// Bytes a flow may have queued and unacknowledged; a send beyond it completes with -ENOBUFS.
inline constexpr uint32_t kMaxSendQueue = 1u << 30;
// Answers to segments we do not accept that carry no data: at most one per flow in this time
// (RFC 5961's ACK throttling; Linux's tcp_invalid_ratelimit), so two ends out of step cannot
// ACK each other's ACKs forever.
inline constexpr uint64_t kInvalidAckGapNs = 500'000'000;

// Per-flow settings, from Params ("cc cubic", "wscale 7", ...). check_params() lists the keys.
struct Settings {
  char cc[16] = "cubic";
  uint16_t mss = 1460;  // our MSS: MTU - 40
  uint8_t wscale = 7;   // our window scale (Linux's usual)
  bool sack = true;
  bool timestamps = true;
  int8_t ecn = -1;                // -1: request when cc is dctcp; 0 never; 1 always request
  uint32_t delack_ms = 40;        // Linux's minimum delayed-ACK time
  uint32_t peer_delack_ms = 200;  // the peer's worst-case delayed ACK (RFC 8985 WCDelAckT)
  uint32_t rto_min_ms = 200;      // Linux's RTO floor
  uint32_t rto_initial_ms = 1000;
  uint32_t rto_max_ms = 120000;
  uint32_t time_wait_ms = 60000;
  uint32_t fin_wait2_ms = 60000;
  uint32_t syn_retries = 6;
  uint32_t retries = 15;   // RTOs in a row before the flow fails (Linux tcp_retries2)
  bool fixed_isn = false;  // tests: start the send sequence at `isn`
  uint32_t isn = 0;
  // Message mode ("message on"): each send is one message and each posted receive takes one
  // message, boundaries carried in the message option (tcp_wire.h). Both ends must ask for it:
  // a connect whose peer does not accept it is refused (-EPROTONOSUPPORT, after a RST), and a
  // message-mode listener answers a SYN without it with a RST.
  bool message = false;
  // Listeners: half-open connections (SYN-RECEIVED) held at once, like Linux's listen backlog;
  // past it, or when the dataplane has no room for another flow, SYNs are answered with SYN
  // cookies ("syncookies on", the default) or dropped ("syncookies off"). Message-mode listeners
  // never use cookies (the option's credit needs state).
  uint32_t backlog = 128;
  bool syncookies = true;

  bool dctcp() const { return std::string_view(cc) == "dctcp"; }
  // Whether our SYN asks for ECN (RFC 3168 6.1.1).
  bool requests_ecn() const { return ecn == 1 || (ecn == -1 && dctcp()); }
};

// Parses params over defaults; returns "" or the error.
std::string parse_settings(Params params, Settings& out);

// Counters over every flow of the transport.
struct Counters {
  uint64_t segs_in = 0;  // every segment received
  // ...of which went through the receive path with the one before it, as one run of in-order
  // data (rx_burst): segs_in - segs_merged passes in all.
  uint64_t segs_merged = 0;
  uint64_t segs_out = 0;
  uint64_t data_segs_out = 0;  // descriptors with payload (a TSO descriptor counts once)
  uint64_t retransmits = 0;    // descriptors re-sending data
  uint64_t bad_header = 0;     // malformed TCP header
  uint64_t bad_csum = 0;
  uint64_t no_flow = 0;  // for no flow or listener we know
  uint64_t paws_drops = 0;
  uint64_t challenge_acks = 0;
  // Answers to unacceptable segments without data (out of window, PAWS, an ACK of unsent data,
  // challenges) not sent: at most one per kInvalidAckGapNs per flow.
  uint64_t acks_rate_limited = 0;
  uint64_t rst_in = 0;
  uint64_t rst_out = 0;
  uint64_t out_of_window = 0;
  uint64_t dup_bytes = 0;     // received payload already held
  uint64_t placed_bytes = 0;  // new payload the NIC had placed
  uint64_t copied_bytes = 0;  // new payload copied by the dataplane (deferred segments)
  uint64_t copy_faults = 0;
  uint64_t dsacks_in = 0;
  uint64_t fast_recoveries = 0;
  uint64_t rtos = 0;
  uint64_t tlp_probes = 0;
  uint64_t rack_losses = 0;
  uint64_t undos = 0;
  uint64_t ecn_reductions = 0;
  uint64_t zero_window_probes = 0;
  uint64_t window_update_repeats = 0;  // window updates sent again (wnd_timer)
  uint64_t conn_opened = 0;
  uint64_t conn_closed = 0;
  // Message mode.
  uint64_t msg_refused = 0;    // handshakes refused: one side asked for message mode, one not
  uint64_t msg_bad = 0;        // data segments whose message option was missing or inconsistent
  uint64_t msg_no_buffer = 0;  // data segments of a message with no posted receive (dropped)
  uint64_t msg_truncated = 0;  // messages longer than their receive buffer
  // Listeners (Linux's TcpExtSyncookies*, ListenOverflows, TCPReqQFull*).
  uint64_t syn_no_room = 0;          // SYNs that found the half-open budget used up
  uint64_t syncookies_sent = 0;      // SYN-ACKs carrying a cookie
  uint64_t syncookies_recv = 0;      // ACKs whose cookie was valid: connections made from them
  uint64_t syncookies_failed = 0;    // ACKs to a listener whose cookie was not valid (RST)
  uint64_t syn_dropped_no_room = 0;  // SYNs dropped without room and without cookies
  uint64_t syn_dropped_refused = 0;  // SYNs the dataplane refused (a binding, no route)
  uint64_t listen_overflows = 0;     // valid cookies dropped: still no room for the flow
  // TIME-WAIT.
  uint64_t time_wait = 0;           // connections that entered it (compact records made)
  uint64_t time_wait_overflow = 0;  // ...that found max_time_wait records and closed at once
  uint64_t time_wait_recycled = 0;  // records ended by a new SYN for their tuple (reuse)
  uint64_t time_wait_acks = 0;      // segments a record answered (a retransmitted FIN, ...)
  uint64_t orphaned = 0;            // closing connections that went on after their app left
};

struct Conn;
struct TimeWait;

class TcpTransport final : public Transport {
 public:
  // tick_ns: the timer wheel's granularity.
  explicit TcpTransport(uint64_t tick_ns = 1'000'000);
  ~TcpTransport() override;

  std::string_view name() const override { return "tcp"; }
  std::string check_params(Params params) const override;
  // `max_time_wait N`: set_max_time_wait(N).
  std::string configure(Params params) override;
  // IP protocol 6, found by tuple; a segment of no flow is answered with a RST (tcp_traffic.cc).
  Claim claim() const override;
  int listen(ListenerId listener, const Endpoint& local, Params params) override;
  void unlisten(ListenerId listener) override;
  int connect(FlowId flow, const FlowTuple& tuple, Params params, Context& ctx) override;
  void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) override;
  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override;
  void tick(Context& ctx) override;
  bool flow_info(FlowId flow, InfoSink& out) const override;
  size_t flow_count() const override { return nconns_ + ntw_; }
  void stats(InfoSink& out) const override;

  const Counters& counters() const { return ctr_; }
  // Tests: the connection's state (kTimeWait for a TIME-WAIT record), kClosed when unknown.
  State state(FlowId flow) const;
  // TIME-WAIT records kept at most (Linux's tcp_max_tw_buckets); a connection that would make
  // one more closes at once (time_wait_overflow). Each record keeps its flow id.
  void set_max_time_wait(uint32_t n) { max_tw_ = n; }
  size_t time_wait_count() const { return ntw_; }
  // Tests and benchmarks: off, every segment goes through the receive path alone (on by default;
  // the outcome is the same, segs_merged aside).
  void set_merge_runs(bool on) { merge_runs_ = on; }
  static constexpr uint32_t kDefaultMaxTimeWait = 4096;

  // ---- used by the tcp_*.cc parts (one class, several files) ----
  struct Listener {
    bool used = false;
    Endpoint local;
    Settings settings;
    uint32_t gen = 0;            // which listener of this id a half-open connection counts in
    uint32_t half_open = 0;      // its connections in SYN-RECEIVED
    uint64_t cookies_until = 0;  // ACKs are checked for cookies until then (ns)
  };

  void begin(Context& ctx);
  void end(Context& ctx);
  // Takes hdrs[0], with the headers after it that run_length() finds it may take as one;
  // returns how many it took.
  size_t input(std::span<const RxHeader> hdrs, Context& ctx);
  size_t run_length(const Conn& c, std::span<const RxHeader> hdrs, const Segment& s) const;
  void input_listen(const RxHeader& h, const Segment& s, Context& ctx);
  void input_conn(Conn& c, const RxHeader& h, const Segment& s, Context& ctx);
  // Answers a segment input_conn() does not accept; `data`: it carried data or a FIN, whose
  // sender needs the (D)SACK now. The rest are throttled (kInvalidAckGapNs).
  void answer_invalid(Conn& c, bool data);
  // Whether an answer to a segment that carried nothing may go now: at most one per
  // kInvalidAckGapNs per flow or TIME-WAIT record (`answered`, `at_ns` are its); counted if not.
  bool may_answer(bool& answered, uint64_t& at_ns);
  void process_ack(Conn& c, const RxHeader& h, const Segment& s, Context& ctx);
  void receive_data(Conn& c, const RxHeader& h, const Segment& s, Context& ctx);
  void receive_fin(Conn& c, Context& ctx);
  // Message mode: the receive buffer index of a data segment's message, or -1 (dropped).
  long msg_buffer(Conn& c, const Segment& s, uint32_t plen);
  void complete_messages(Conn& c, Context& ctx);
  void post_messages(Conn& c, Context& ctx);
  void after_burst(Conn& c, Context& ctx);
  void output(Conn& c, Context& ctx);
  void send_ack(Conn& c, Context& ctx);
  void send_syn(Conn& c, Context& ctx);
  void send_rst(Conn& c, Context& ctx);
  void send_probe(Conn& c, Context& ctx);
  void arm_rto(Conn& c);
  void cancel_timers(Conn& c);  // every timer of the connection
  // RACK-TLP (tcp_rack.cc).
  void rack_sent(Conn& c, uint32_t seq, uint32_t len, bool rxt);
  // Notes reordering when [lo, hi), newly delivered below data already SACKed, was never resent.
  void rack_check_reordering(Conn& c, uint32_t lo, uint32_t hi);
  // A loss episode begins: what an undo would restore.
  void undo_mark(Conn& c);
  // A DSACK of [left, right): once DSACKs have reported every byte the episode resent, the
  // reduction was for nothing and is undone.
  void undo_dsack(Conn& c, uint32_t left, uint32_t right);
  // An ACK of new data after an RTO that echoes `ts_ecr`: undone if the RTO was spurious.
  void undo_spurious_rto(Conn& c, uint32_t ts_ecr);
  void undo(Conn& c);
  // progress: the ACK acknowledged or SACKed new data; ts_ecr: its echoed timestamp (with
  // timestamps on), which tells a retransmission's ACK from the original's.
  void rack_ack(Conn& c, uint32_t dsacks, bool progress, std::optional<uint32_t> ts_ecr);
  void rack_detect(Conn& c);
  void arm_tlp(Conn& c);
  bool send_tlp(Conn& c, Context& ctx);
  void enter_recovery(Conn& c);
  void rtt_sample(Conn& c, uint64_t rtt_ns);
  void enter_time_wait(Conn& c, Context& ctx);
  // SYN cookies (tcp_syncookie.cc).
  void send_cookie(const RxHeader& h, const Segment& s, Listener& l, Context& ctx);
  void accept_cookie(const RxHeader& h, const Segment& s, Context& ctx);
  uint32_t cookie_hash(const FlowTuple& t, uint32_t count, uint32_t c) const;
  void end_half_open(Conn& c);
  void reply_rst(const RxHeader& h, const Segment& s, Context& ctx);
  // The app is gone: keep what needs none of its memory (kReqDetach); false: reset it.
  bool detach(Conn& c, Context& ctx);
  // TIME-WAIT records (tcp_timewait.cc).
  void to_time_wait(Conn& c, Context& ctx);
  void tw_input(TimeWait& w, const RxHeader& h, const Segment& s, Context& ctx);
  void tw_send_ack(TimeWait& w, Context& ctx);
  void tw_free(TimeWait& w, Context& ctx);
  TimeWait* tw(FlowId id) const { return id < tw_.size() ? tw_[id] : nullptr; }
  static void on_tw_timer(Timer* t, void* arg);
  // The flow ends: pending requests complete with `status` (0 for a graceful end), the app
  // hears `kind`, the dataplane forgets the flow, and the connection is freed.
  void finish(Conn& c, EventKind kind, int32_t status, Context& ctx);
  void release(Conn& c);
  // The app hears the end once: pending requests complete and the `kind` event is sent.
  void notify_end(Conn& c, EventKind kind, int32_t status, Context& ctx);
  void touch(Conn& c);
  uint32_t ts_now() const;
  Conn* conn(FlowId id) const { return id < conns_.size() ? conns_[id].get() : nullptr; }
  Conn& new_conn(FlowId id, const FlowTuple& tuple, const Settings& st);

  static void on_rto_timer(Timer* t, void* arg);
  static void on_delack_timer(Timer* t, void* arg);
  static void on_misc_timer(Timer* t, void* arg);
  static void on_wnd_timer(Timer* t, void* arg);
  static void on_reo_timer(Timer* t, void* arg);
  static void on_tlp_timer(Timer* t, void* arg);

  Counters ctr_;
  TimerWheel wheel_;
  uint64_t tick_ns_;
  uint64_t now_ns_ = 0;
  Context* ctx_ = nullptr;  // during tick(): the context timer callbacks act through
  uint64_t isn_secret_;
  uint64_t cookie_key_[2];  // SipHash key of the SYN cookies
  uint32_t listener_gen_ = 0;
  bool iss_set_ = false;  // new_conn: start at iss_next_ (a SYN that ended a TIME-WAIT record)
  uint32_t iss_next_ = 0;
  std::vector<TimeWait*> tw_;                       // by flow id
  std::vector<std::unique_ptr<TimeWait>> tw_pool_;  // every record made; free ones listed
  std::vector<TimeWait*> tw_free_;
  size_t ntw_ = 0;
  uint32_t max_tw_ = kDefaultMaxTimeWait;
  bool merge_runs_ = true;
  std::vector<std::unique_ptr<Conn>> conns_;  // by flow id
  size_t nconns_ = 0;
  std::vector<Listener> listeners_;  // by listener id
  std::vector<Conn*> dirty_;         // touched in this burst
};

std::unique_ptr<Transport> make_transport();

}  // namespace cleave::transport::tcp
