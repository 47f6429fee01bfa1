// rc.h - RoCEv2 Reliable Connection on headers only: queue pairs, their requester and responder,
// as a Transport.
//
// What it does, and where:
//   rc.cc            QP state (create, modify, query, destroy; ERR and its flush), app_burst and
//                    rx_burst's checks, handing each request and packet to one side; flow_info
//   rc_requester.cc  the requester: work requests cut into packets, paced; go-back-N and
//                    selective-repeat resends; ACKs, NAKs and READ responses in; completions
//   rc_responder.cc  the responder: requests checked and accepted at ePSN, payloads landed,
//                    duplicates, READ responses out, packets kept past a gap, ACKs and NAKs
//   rc_timer.cc      the local ACK timer and its RTO (RFC 6298 under selective repeat), RNR
//                    waits, DCQCN's timers: tick()
//   rc_qp.h          inside: the QP's state and queues, what one file calls in another
//   roce_wire.cc     the wire: UDP, BTH and extension headers parsed (untrusted) and built
//
// A queue pair (QP) is a flow. Its owner (the dataplane, or a test's simulated host) gives it a
// flow id and a 24-bit QP number, creates it here in RESET (create_qp), and moves it through
// INIT, RTR and RTS with modify_qp, as ibv_modify_qp does, with the peer's QPN and PSNs exchanged
// out of band. At RTR the owner also steers the peer's packets for (remote IP, local QPN) to the
// flow, on the NIC when it can. Work requests arrive as AppRequests (kSend with or without
// kReqImm, kWrite with or without it, kRead, kRecv) and complete as Events, in order per queue.
//
// Requester: a send queue of work requests cut into PMTU packets with PSNs; AckReq on the last
// packet of each message and every `ack_every` packets; cumulative ACKs complete requests in
// order; a PSN-sequence-error NAK goes back to the PSN it names (go-back-N), or, in selective-
// repeat mode, resends just that packet; the local ACK timer (4.096 µs × 2^timeout) goes back to
// the oldest unacknowledged PSN, retry_cnt times without progress; an RNR NAK waits its timer,
// rnr_retry times (7: forever); then the request fails with -ETIMEDOUT or -EBUSY and the QP goes
// to ERR, where every other request completes with -ECANCELED.
//
// Responder: in-order PSNs are accepted; a gap is NAKed once (go-back-N) or, in selective-repeat
// mode, each missing PSN is NAKed once and later packets are accepted when their place is
// certain; duplicates are re-ACKed and duplicate READs executed again; a SEND or a WRITE with
// immediate without a posted receive gets an RNR NAK; a WRITE or READ outside what the rkey
// allows gets a remote-access NAK, an invalid request (a SEND longer than its receive, opcodes
// out of order, bad lengths, an opcode this transport does not implement) an invalid-request
// NAK, and after either the responder's QP goes to ERR too (flushing its receives), as Linux
// rxe does. A packet whose P_Key is not the default partition's is dropped and counted. ACKs
// are coalesced: one per burst, for the newest PSN.
//
// Payloads: the NIC has placed them (SEND into the posted receive, WRITE at the RETH's VA, READ
// responses into the READ's buffer); a deferred one is copied by the owner where the transport
// says (Context::copy_in). Sends are header-only descriptors over app memory with
// kTxParserTrailer: the NIC appends the pad and the ICRC.
//
// Threads: one lcore, like every transport. Memory: a QP's queues are sized at create_qp and
// never grow.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma.h"
#include "roce_wire.h"
#include "transport.h"

namespace cleave::transport::roce {

// Queue pairs as the transport interface names them (rdma.h).
using transport::QpAttr;
using transport::QpCaps;
using transport::QpState;
using Access = transport::QpAccess;
using AttrMask = transport::QpAttrMask;
using enum transport::QpAccess;
using enum transport::QpAttrMask;
std::string_view state_name(QpState s);

// Counters over every QP of a transport (stats()), and per QP (flow_info()).
struct RcCounters {
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;  // payload
  uint64_t rx_packets = 0;
  uint64_t retransmits = 0;  // packets sent again
  uint64_t timeouts = 0;     // local ACK timer expiries
  uint64_t naks_sent = 0;    // PSN-sequence-error NAKs
  uint64_t naks_received = 0;
  uint64_t rnr_naks_sent = 0;
  uint64_t rnr_naks_received = 0;
  uint64_t acks_sent = 0;
  uint64_t acks_received = 0;
  uint64_t duplicates = 0;       // requests received again
  uint64_t out_of_sequence = 0;  // requests past a gap
  uint64_t read_responses = 0;   // READ response packets sent
  uint64_t access_errors = 0;    // remote-access NAKs sent
  // Invalid-request NAKs sent: opcodes out of order, bad lengths, opcodes not implemented.
  uint64_t invalid_requests = 0;
  uint64_t bad_icrc = 0;       // dropped: the NIC saw a bad ICRC
  uint64_t bad_pkey = 0;       // dropped: a P_Key of another partition (no NAK: IBTA 10.9.3)
  uint64_t bad_packets = 0;    // dropped: not RC, truncated, another QP's number
  uint64_t copied_bytes = 0;   // payload the copy path put in place
  uint64_t placed_bytes = 0;   // payload the NIC placed
  uint64_t qp_errors = 0;      // QPs moved to ERR by a failed request
  uint64_t ce_received = 0;    // data packets that arrived CE-marked
  uint64_t cnps_sent = 0;      // DCQCN: CNPs to the peer (at most one per interval)
  uint64_t cnps_received = 0;  // DCQCN: CNPs from the peer
};

class RcTransport final : public Transport, public QpControl {
 public:
  RcTransport();
  ~RcTransport() override;

  std::string_view name() const override { return "rocev2"; }
  std::string check_params(Params params) const override;
  // UDP to 4791, found by destination QP (rc_traffic.cc).
  Claim claim() const override;
  QpControl* qp_control() override { return this; }

  // ---- queue pairs (QpControl) ----
  // create_qp's parameters are check_params': `dcqcn on|off`, DCQCN's constants `dcqcn_*`,
  // `spray N` and `reorder K` (packet spraying: docs/transports.md).
  // modify_qp's transitions need (INIT: access; RTR: pmtu, dest_qpn, rq_psn; RTS: sq_psn,
  // timeout, retry_cnt, rnr_retry).
  int create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params = {}) override;
  int modify_qp(FlowId flow, const QpAttr& attr, uint32_t mask, Context& ctx) override;
  int query_qp(FlowId flow, QpAttr* attr) const override;
  int destroy_qp(FlowId flow, Context& ctx) override;
  // rc_traffic.cc: the longest headers and the ICRC; the NIC flow of a QP at RTR.
  uint32_t max_pmtu(uint32_t l4_mtu) const override;
  NicFlow rtr_nic_flow(FlowId flow, const QpAttr& attr, uint32_t mask) const override;
  uint32_t qp_number(FlowId flow) const;

  // ---- Transport ----
  int listen(ListenerId, const Endpoint&, Params) override { return -EOPNOTSUPP; }
  void unlisten(ListenerId) override {}
  int connect(FlowId, const FlowTuple&, Params, Context&) override { return -EOPNOTSUPP; }
  void rx_burst(std::span<const RxHeader> hdrs, Context& ctx) override;
  void app_burst(std::span<const AppRequest> reqs, Context& ctx) override;
  void tick(Context& ctx) override;
  bool flow_info(FlowId flow, InfoSink& out) const override;
  size_t flow_count() const override;
  // QPs tick() looks at: those in RTR or RTS (and any that left since the last tick).
  size_t qps_ticking() const { return ticking_.size(); }
  void stats(InfoSink& out) const override;

  const RcCounters& counters() const { return total_; }

  struct Qp;

 private:
  Qp* find(FlowId flow) const { return flow < qps_.size() ? qps_[flow].get() : nullptr; }

  std::vector<std::unique_ptr<Qp>> qps_;  // by flow id
  // QPs in RTR or RTS (and those that left since the last tick), the only ones tick() looks at:
  // a host's thousands of QPs in RESET cost the loop nothing.
  std::vector<FlowId> ticking_;
  size_t qp_count_ = 0;
  std::vector<Qp*> touched_;  // QPs a burst reached (reserved, reused)
  RcCounters total_;
};

}  // namespace cleave::transport::roce
