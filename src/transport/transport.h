// transport.h - the Transport interface: flows, app requests, received headers and timers in
// bursts, and the Context through which a transport acts on the NIC, the wire and the apps.
//
// A transport runs on headers only. It never reads or writes payload bytes: it names them by
// (mr, offset, len) in app memory. On receive the NIC has already placed the payload (the
// header's placement metadata says where, or why not); the transport advances the flow's cursor,
// retires memory segments and completes the app's receives. A deferred segment (copy path) still
// carries its payload, and the transport only says where it belongs (Context::copy_in); the
// dataplane moves the bytes. (One exception: RoCE's selective repeat keeps a deferred SEND
// packet past a gap in a bounded per-QP buffer until it can say where it belongs.) On send the
// transport emits header-only descriptors that reference app memory; the NIC merges, segments and
// checksums; a retransmission re-issues the same memory.
//
// Threads: one transport instance belongs to one dataplane lcore. Every call below happens on it,
// and nothing locks. Hot calls come in bursts; the virtual call is per burst, never per packet.
// Context's TX and event rings are plain inline code; its virtual hooks are for rarer work
// (a full ring, NIC commands, flow table changes).
//
// Dependencies: the standard library only. No DPDK, no ports, no apps (see README.md).
#pragma once

#include <array>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

namespace cleave::transport {

class QpControl;    // rdma.h
class RdmaContext;  // rdma.h

// ---- names of things ----------------------------------------------------------------------------

// A flow's id: the dataplane's, also the NIC flow id (placement, FDIR mark). kNoFlow: none.
using FlowId = uint32_t;
inline constexpr FlowId kNoFlow = 0xFFFFFFFFu;
// A listener's id, the dataplane's.
using ListenerId = uint32_t;

// An IP address: IPv4 in the first four bytes (network order) with family 4, or IPv6 (16 bytes).
struct IpAddr {
  std::array<uint8_t, 16> bytes{};
  uint8_t family = 4;
  static IpAddr v4(uint32_t host_order) {
    IpAddr a;
    a.bytes[0] = uint8_t(host_order >> 24);
    a.bytes[1] = uint8_t(host_order >> 16);
    a.bytes[2] = uint8_t(host_order >> 8);
    a.bytes[3] = uint8_t(host_order);
    return a;
  }
  uint32_t v4_host() const {
    return uint32_t(bytes[0]) << 24 | uint32_t(bytes[1]) << 16 | uint32_t(bytes[2]) << 8 | bytes[3];
  }
  bool operator==(const IpAddr&) const = default;
};

struct Endpoint {
  IpAddr ip;
  uint16_t port = 0;  // host order
  bool operator==(const Endpoint&) const = default;
};

// Seen from this host: local is ours, remote the peer's.
struct FlowTuple {
  Endpoint local;
  Endpoint remote;
  uint8_t proto = 6;  // IP protocol: 6 TCP, 17 UDP
  bool operator==(const FlowTuple&) const = default;
};

// ---- receive ------------------------------------------------------------------------------------

// What the NIC did with a segment's payload (the NIC model's Decision, without DPDK).
enum class Placed : uint8_t {
  kPlaced,     // whole payload written to app memory (in order, or past a hole)
  kTrimmed,    // the part before the cursor was cut (`trimmed` bytes), the rest placed
  kDropped,    // wholly before the cursor: a duplicate
  kDeferred,   // not placed: the payload is in the frame (RxHeader::payload), the copy path
  kNoPayload,  // nothing to place
};

// Checksum status from the NIC (or the dataplane's software check).
enum class Csum : uint8_t { kNotChecked, kGood, kBad };

// One received segment: its headers (read only, valid for the call) and placement metadata.
struct RxHeader {
  const uint8_t* l3 = nullptr;  // the IP header
  const uint8_t* l4 = nullptr;  // the transport header (TCP, UDP, ...)
  uint16_t l3_len = 0;          // IP header bytes
  uint16_t l4_len = 0;          // bytes readable at l4: the whole L4 header, options included
  uint8_t ecn = 0;              // the IP ECN field (low two bits of TOS / traffic class)
  Placed placed = Placed::kDeferred;
  Csum l4_csum = Csum::kNotChecked;
  bool out_of_order = false;  // placed past a hole
  uint8_t route = 0;          // which of the flow's routes it came on (TxDesc::route's numbering)
  FlowId flow = kNoFlow;      // the flow it belongs to, or kNoFlow
  ListenerId listener = 0;    // when flow is kNoFlow: the listener it matched (has_listener)
  bool has_listener = false;
  uint32_t payload_len = 0;          // payload bytes the segment carried
  uint32_t trimmed = 0;              // kTrimmed: bytes cut before the cursor
  const uint8_t* payload = nullptr;  // kDeferred: the payload bytes (payload_len); else null
};

// ---- send ---------------------------------------------------------------------------------------

inline constexpr size_t kMaxL4Header = 64;  // TCP with options is at most 60
// The most payload one descriptor may carry (TxDesc::len): 64 KiB, the NIC's largest TSO payload
// and about what an IPv4 total length can describe. The dataplane refuses a longer descriptor:
// it is not sent and is counted (`tx_too_long` in the flow path's stats). To the transport that
// is a lost segment, as for any descriptor its owner cannot send (Context::drain_tx): a reliable
// transport's retransmission is refused again, so a flow that emits one stalls until its timers
// give up. Cut the payload first (TCP's descriptors stop at 63 KiB, RoCE's at a PMTU).
inline constexpr uint32_t kMaxTxLen = 65536;

// TxDesc::flags
enum TxFlag : uint8_t {
  // The NIC ends the packet as the flow's parser (NicFlow::parser) defines: RoCEv2's pad (BTH
  // PadCnt) and ICRC after the payload. The L4 checksum is then the transport's own.
  kTxParserTrailer = 1,
};

// A header-only descriptor: the L4 header the transport built, and a reference to the payload in
// app memory. The dataplane prepends the flow's L2/L3 headers, sets lengths, and asks the NIC for
// checksums, and for TSO when len > mss.
struct TxDesc {
  FlowId flow = kNoFlow;
  uint32_t len = 0;  // payload bytes at (mr, offset), at most kMaxTxLen; 0: header only
  uint64_t offset = 0;
  uint16_t mr = 0;
  uint16_t mss = 0;    // TSO: payload bytes per segment (the header's seq advances per segment)
  uint8_t l4_len = 0;  // bytes used in l4
  uint8_t ecn = 0;     // the IP ECN field to send
  uint8_t flags = 0;   // TxFlag
  uint8_t dscp = 0;    // the IP DSCP to send (0-63), 0: best effort
  // Which of the flow's routes to the peer it leaves on (a queue pair given several, through
  // several local ports: QpAttr::routes); 0, the one it was opened on, for every other flow.
  uint8_t route = 0;
  std::array<uint8_t, kMaxL4Header> l4{};
};

// ---- app requests and events
// ----------------------------------------------------------------------

enum class ReqKind : uint8_t {
  kSend,   // send (mr, offset, len); a kSendDone event when the peer has acknowledged it
  kRecv,   // post a receive buffer (mr, offset, len); kRecvDone when filled (or at end/error)
  kClose,  // graceful close: send FIN after queued data; receiving continues
  kAbort,  // reset the flow at once; pending requests complete with an error
  // RDMA (RoCEv2 RC): write (mr, offset, len) at the peer's (remote_addr, rkey); read len bytes
  // from there into (mr, offset). kWriteDone / kReadDone when done.
  kWrite,
  kRead,
};

// AppRequest::flags
enum ReqFlag : uint8_t {
  kReqImm = 1,  // kSend, kWrite: carry `imm` to the peer (SEND/WRITE with immediate)
  // kAbort: the app is gone (it exited or was disconnected), not aborting. What needs none of
  // its memory may finish without it: TCP keeps TIME-WAIT, and a close the app asked for whose
  // data the peer has all acknowledged (FIN-WAIT, CLOSING) goes on to TIME-WAIT. Everything
  // else is reset as by a plain kAbort, which is also what a transport ignoring the flag does.
  kReqDetach = 2,
};

struct AppRequest {
  FlowId flow = kNoFlow;
  ReqKind kind = ReqKind::kSend;
  uint16_t mr = 0;
  uint32_t len = 0;
  uint64_t offset = 0;
  uint64_t wr_id = 0;
  uint32_t imm = 0;          // message APIs: carried to the peer where the transport can
  uint8_t flags = 0;         // ReqFlag
  uint32_t rkey = 0;         // kWrite, kRead: the peer's key for remote_addr
  uint64_t remote_addr = 0;  // kWrite, kRead: the peer's address (RoCE: VA of the rkey's MR)
};

enum class EventKind : uint8_t {
  kSendDone,    // wr_id, len; status < 0 when the flow failed first
  kRecvDone,    // wr_id, len (bytes written); status < 0 when the flow failed first. Message
                // transports: aux is the message's length, status -EMSGSIZE when the buffer
                // was shorter (it holds the message's first len bytes)
  kRecvData,    // in-order data grew by len bytes (into posted buffers, not yet all full): for
                // apps that read a receive ring before its buffers complete; one per burst
  kConnected,   // an active open completed
  kAccepted,    // a passive open completed; aux is the listener id
  kPeerClosed,  // the peer sent FIN: no more data will arrive
  kClosed,      // the flow is gone (after a graceful close, a reset or a failure); status says
  kRefused,     // an active open was refused (RST) or timed out; status says which
  kWriteDone,   // RDMA: a kWrite the peer acknowledged; wr_id, len; status < 0 on failure
  kReadDone,    // RDMA: a kRead whose bytes are all in place; wr_id, len; status < 0 on failure
};

// Event::flags
enum EventFlag : uint8_t {
  kEvImm = 1,    // kRecvDone: `imm` carries the peer's immediate data
  kEvWrite = 2,  // kRecvDone: consumed by an RDMA WRITE with immediate (len: bytes it wrote)
};

struct Event {
  FlowId flow = kNoFlow;
  EventKind kind = EventKind::kSendDone;
  int32_t status = 0;  // 0 or a negative errno (-ECONNRESET, -ETIMEDOUT, -ECONNREFUSED, ...)
  uint32_t len = 0;
  uint32_t aux = 0;
  uint64_t wr_id = 0;
  uint32_t imm = 0;   // kEvImm
  uint8_t flags = 0;  // EventFlag
};

// ---- parameters
// -------------------------------------------------------------------------------------

// A flow's or listener's parameters as an operator gives them ("cc cubic"): keys and values as
// text, checked by the transport when they are attached (check_params), never on the data path.
struct Param {
  std::string_view key;
  std::string_view value;
};
using Params = std::span<const Param>;

// A parameter's value as a whole number in [lo, hi] (decimal, nothing before or after it).
inline bool parse_u32(std::string_view v, uint32_t lo, uint32_t hi, uint32_t& out) {
  uint32_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  out = x;
  return true;
}

// ---- the traffic a transport takes
// ---------------------------------------------------------------

// The NIC's parsers (the header-split NIC's, without DPDK): what the NIC reads of a flow's
// packets to place them, and the integrity check it makes on them: the TCP checksum; RoCEv2's
// ICRC; Solar's CRC32C; the UDP checksum of plain datagrams.
enum class NicParser : uint8_t { kTcp, kRoce, kSolar, kUdp };

// How the NIC is to place a flow's packets; the owner adds the addresses, ports and ids.
struct NicFlow {
  NicParser parser = NicParser::kTcp;
  bool zero_copy = true;          // payloads into posted memory; else all go to the copy path
  bool reliable = true;           // placed by sequence against the flow's cursor
  bool messages = false;          // segments name their messages, and are placed by them
  bool selective_repeat = false;  // RoCEv2: requests past a gap are placed too
  uint32_t initial_seq = 0;       // the first sequence number (TCP) or PSN (RoCEv2) expected
  uint32_t pmtu = 0;              // RoCEv2: the path MTU
};

// How a received packet finds its flow.
enum class FlowKey : uint8_t {
  // By its addresses and ports; a packet of no flow goes to the listener of its local port.
  kTuple,
  // By a number the packet names (RxParsed::number; RoCEv2's destination QP) that the owner
  // gave the flow when it made it (QpControl::create_qp), checked against the peer's address.
  kNumber,
};

// A received packet's L4 bytes, as a claim's parse sees them. The owner checked the IP header,
// that `avail` >= Claim::min_header and that `total` holds min_header + trailer.
struct RxL4 {
  const uint8_t* l4 = nullptr;
  uint32_t avail = 0;        // bytes readable at l4 (the headers, at least, when the NIC cut it)
  uint32_t total = 0;        // L4 bytes on the wire: the IP payload
  bool whole = false;        // all `total` bytes are readable (the NIC did not cut the frame)
  uint32_t nic_payload = 0;  // not whole: the payload bytes the NIC took out of the frame
};

// What a claim's parse found in a packet.
struct RxParsed {
  uint16_t header_len = 0;   // L4 header bytes (RxHeader::l4_len)
  uint32_t payload_len = 0;  // payload bytes, without a trailer (RxHeader::payload_len)
  uint16_t src_port = 0;     // kTuple: the packet's ports (host order)
  uint16_t dst_port = 0;
  bool opens = false;   // kTuple: it may open a new flow (TCP's SYN): it names its listener even
                        // when a flow has its tuple (the transport decides what it opens)
  uint32_t number = 0;  // kNumber: the flow's number
};

// What a transport takes from the wire (docs/architecture.md, "Transports"): an IP protocol and,
// for UDP, destination ports (UDP is claimed port by port). No two transports share any of it:
// the registry refuses a transport whose claim takes what another, or the owner itself, holds
// (registry.h, Registry::claim_error). The owner hands the transport every packet that matches,
// parsed by `parse`, and no other; a transport that claims nothing (proto 0, the default) still
// serves flows and listeners of other claims' traffic that name it. Claims are read once, when the
// owner first meets the transport: `parse` and `no_flow_answer` are plain functions that need
// no instance (a packet for a transport no flow of which exists yet is parsed, then counted as
// for no flow), and `udp_ports` lies in static storage.
struct Claim {
  uint8_t proto = 0;                    // IP protocol: 6 TCP, 17 UDP; 0: none
  std::span<const uint16_t> udp_ports;  // proto 17: the destination ports (host order)
  FlowKey key = FlowKey::kTuple;        // how its packets find their flows
  NicFlow nic;              // how its flows are placed (initial_seq, messages: per flow)
  uint16_t min_header = 0;  // shorter L4 headers are malformed
  uint8_t trailer = 0;      // L4 bytes after the payload (RoCEv2's ICRC)
  // Splits a packet into header and payload and reads its flow key; false when it is
  // malformed. Reads untrusted bytes: nothing past in.avail.
  bool (*parse)(const RxL4& in, RxParsed* out) = nullptr;
  // kTuple: the L4 header (checksum 0) that answers a packet of no flow and no listener (TCP's
  // RST, RFC 9293 3.10.7.1), into `out` (kMaxL4Header bytes); its length, or 0 for none.
  size_t (*no_flow_answer)(const RxL4& in, const RxParsed& p, uint8_t* out) = nullptr;
};

// ---- the context
// ------------------------------------------------------------------------------------

// What a transport acts through. The dataplane (or a test's simulated host) derives from it. The
// TX and event rings are arrays the owner lends; when one fills, the matching drain hook runs and
// the transport carries on. A transport never holds a pointer into them across calls.
class Context {
 public:
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // The time of this burst or tick, in nanoseconds of a monotonic clock.
  uint64_t now_ns() const { return now_ns_; }

  // The next TX descriptor to fill; it is sent at the next drain.
  TxDesc& tx_next() {
    if (tx_n_ == tx_.size()) {
      drain_tx(tx_.first(tx_n_));
      tx_n_ = 0;
    }
    TxDesc& d = tx_[tx_n_++];
    d.len = 0;
    d.mss = 0;
    d.ecn = 0;
    d.flags = 0;
    d.dscp = 0;
    return d;
  }

  // Tell the app.
  void event(const Event& e) {
    if (ev_n_ == ev_.size()) {
      drain_events(ev_.first(ev_n_));
      ev_n_ = 0;
    }
    ev_[ev_n_++] = e;
  }

  // Drains both rings; the owner calls it at the end of every burst it gave the transport.
  void flush() {
    if (tx_n_ != 0) drain_tx(tx_.first(tx_n_));
    if (ev_n_ != 0) drain_events(ev_.first(ev_n_));
    tx_n_ = ev_n_ = 0;
  }

  // ---- the NIC's placement state of a flow (semantics and errors of the Nic commands) ----
  // `msg`: on a flow opened with `messages`, the number of the message the MS receives (the NIC
  // places by the number and offset the segment names); 0 on byte streams. -EOPNOTSUPP when the
  // flow's NIC flow does not place by message (the generic backend, or no NIC flow): the copy
  // path then takes every segment of it. -ENOBUFS: the NIC's MS lists are full, try later.
  virtual int ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) = 0;
  virtual int cursor_update(FlowId flow, uint32_t cursor) = 0;
  virtual int ms_retire(FlowId flow, uint32_t count) = 0;
  // Message flows: retires the MS of message `msg` wherever it is in the list (a completed,
  // truncated or abandoned message's buffer goes back to the app).
  virtual int ms_retire_msg(FlowId flow, uint32_t msg) = 0;

  // ---- optional extensions ----
  // The owner's RDMA hooks (rdma.h: remote keys, READ sinks, the NIC's message chain), asked
  // for by a transport whose flows are queue pairs; nullptr (the default) when it has none.
  virtual RdmaContext* rdma() { return nullptr; }

  // Copy path: put `len` payload bytes from a deferred segment at (mr, offset) of app memory.
  // The owner checks the bounds; false when they fail (nothing is written).
  virtual bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) = 0;

  // A listener accepted a new flow for `tuple`: the owner gives it an id, steers its segments to
  // this transport with placement from `initial_seq` on, and returns kNoFlow when it cannot.
  // `messages`: each segment names its message (TCP message mode), and the NIC may place by it.
  virtual FlowId flow_open(ListenerId listener, const FlowTuple& tuple, uint32_t initial_seq,
                           bool messages) = 0;
  // As flow_open(), for a connection that is established already (a SYN cookie's handshake just
  // completed): flow_open() opens a half-open one (a SYN's), which the owner may hold fewer of.
  virtual FlowId flow_open_established(ListenerId listener, const FlowTuple& tuple,
                                       uint32_t initial_seq, bool messages) {
    return flow_open(listener, tuple, initial_seq, messages);
  }
  // Why the latest flow_open() gave kNoFlow: -ENOBUFS when the listener has no room for another
  // flow now (its app's flow quota, its completion queue, the flow table), so a handshake may be
  // answered without state (TCP's SYN cookies) and tried again when it completes; anything else
  // (-EACCES: a binding keeps the tuple for another user or transport; -ENETUNREACH: no route
  // back through the port) refuses the connection.
  virtual int flow_open_error() const { return -EACCES; }
  // Sends `len` bytes of L4 header (checksum 0: the owner fills it) back to where `to` came
  // from: `to` is a header of the burst being processed, and the answer goes out of the port it
  // arrived on with the addresses and ports swapped. For answers that have no flow: a SYN
  // cookie's SYN-ACK, a RST. False when it could not be sent (the owner counts it).
  virtual bool reply(const RxHeader& /*to*/, const uint8_t* /*l4*/, size_t /*len*/) {
    return false;
  }
  // The operator's parameters for a flow flow_open() just gave (a tuple binding, cleavectl flow
  // attach tuple), to apply over the listener's; empty when there are none (the default). The
  // transport checked them when they were attached. Valid until the current call returns.
  virtual Params flow_params(FlowId /*flow*/) { return {}; }
  // The receive sequence of a flow the transport opened actively is now known (the peer's SYN):
  // zero-copy placement can start at `initial_seq`; `messages` as for flow_open.
  virtual void flow_synced(FlowId flow, uint32_t initial_seq, bool messages) = 0;
  // The flow is gone: the owner forgets it and may reuse the id. No call names it again.
  virtual void flow_closed(FlowId flow) = 0;

 protected:
  Context(std::span<TxDesc> tx, std::span<Event> events) : tx_(tx), ev_(events) {}
  ~Context() = default;

  void set_now(uint64_t ns) { now_ns_ = ns; }

  // Called with full rings and from flush(). The owner sends or queues every descriptor (a
  // descriptor it cannot send is dropped and counted: the transport retransmits) and delivers
  // every event (events are never dropped).
  virtual void drain_tx(std::span<TxDesc> descs) = 0;
  virtual void drain_events(std::span<const Event> events) = 0;

 private:
  uint64_t now_ns_ = 0;
  std::span<TxDesc> tx_;
  std::span<Event> ev_;
  size_t tx_n_ = 0;
  size_t ev_n_ = 0;
};

// ---- flow information (management, never the data path)
// ------------------------------------------

// Receives a flow's state as named values, in a stable order per transport.
class InfoSink {
 public:
  virtual void text(std::string_view key, std::string_view value) = 0;
  virtual void number(std::string_view key, uint64_t value) = 0;

 protected:
  ~InfoSink() = default;
};

// ---- the transport
// --------------------------------------------------------------------------------

class Transport {
 public:
  virtual ~Transport() = default;
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  virtual std::string_view name() const = 0;

  // Checks parameters before they are attached; returns "" or a readable error.
  virtual std::string check_params(Params params) const = 0;
  // Settings of the whole transport from its owner's configuration (check_params is for flows
  // and listeners): applied at once; "" or a readable error. None are known by default.
  virtual std::string configure(Params params) {
    return params.empty()
               ? ""
               : "no transport-wide settings (got \"" + std::string(params[0].key) + "\")";
  }

  // The traffic it takes (see Claim); none by default.
  virtual Claim claim() const { return {}; }
  // Optional extensions. Queue-pair control (rdma.h), for a transport whose flows are queue
  // pairs its owner makes and moves through their states; nullptr (the default) for others.
  virtual QpControl* qp_control() { return nullptr; }

  // Passive open: segments for `local` that match no flow arrive with `listener` set.
  // Returns 0 or a negative errno (-EEXIST, -EINVAL).
  virtual int listen(ListenerId listener, const Endpoint& local, Params params) = 0;
  virtual void unlisten(ListenerId listener) = 0;
  // Active open of `flow` (the id the dataplane gave it). Emits the first segment through ctx.
  virtual int connect(FlowId flow, const FlowTuple& tuple, Params params, Context& ctx) = 0;

  // The hot calls. Each may emit descriptors and events and issue NIC commands through ctx.
  virtual void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) = 0;
  virtual void app_burst(std::span<const AppRequest> reqs, Context& ctx) = 0;
  // Timers: called often (every loop iteration that found nothing to do, at least every few µs).
  virtual void tick(Context& ctx) = 0;

  // Management: a flow's state; false when the flow is unknown.
  virtual bool flow_info(FlowId flow, InfoSink& out) const = 0;
  virtual size_t flow_count() const = 0;
  // Management: counters over every flow since the transport was made (numbers only); none by
  // default.
  virtual void stats(InfoSink& /*out*/) const {}

 protected:
  Transport() = default;
};

}  // namespace cleave::transport
