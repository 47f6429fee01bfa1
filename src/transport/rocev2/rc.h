// rc.h - RoCEv2 Reliable Connection on headers only: queue pairs, their requester and responder,
// as a Transport.
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
// says (Context::copy_in). Sends are header-only descriptors over app memory with kTxRoce: the
// NIC appends the pad and the ICRC.
//
// Threads: one lcore, like every transport. Memory: a QP's queues are sized at create_qp and
// never grow.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "roce_wire.h"
#include "transport.h"

namespace cleave::transport::roce {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kErr };
std::string_view state_name(QpState s);

// Remote access a QP grants its peer (ibv_access_flags' remote bits).
enum Access : uint8_t {
  kRemoteWrite = 1,
  kRemoteRead = 2,
};

// Attributes as ibv_qp_attr names them; modify_qp() takes those `mask` names.
struct QpAttr {
  QpState state = QpState::kReset;
  uint32_t pmtu = 4096;             // 256, 512, 1024, 2048 or 4096 (RTR)
  uint32_t dest_qpn = 0;            // the peer's QP number (RTR)
  uint32_t rq_psn = 0;              // the first PSN expected from the peer (RTR)
  uint32_t sq_psn = 0;              // our first PSN (RTS)
  uint8_t timeout = 14;             // local ACK timeout 4.096 µs × 2^timeout, 0 none (RTS)
  uint8_t retry_cnt = 7;            // 0-7 (RTS)
  uint8_t rnr_retry = 7;            // 0-7, 7 = forever (RTS)
  uint8_t min_rnr_timer = 12;       // the RNR NAK timer code we send (RTR): 12 = 0.64 ms
  uint8_t max_rd_atomic = 16;       // READs outstanding as requester (RTS), 1-16
  uint8_t max_dest_rd_atomic = 16;  // READs queued as responder (RTR), 1-16
  uint8_t access = 0;               // Access (INIT)
  bool selective_repeat = false;    // IRN-style recovery; both ends must agree (RTR)
  uint64_t rate_limit_kbps = 0;     // the sending rate's ceiling, 0: 100 Gb/s (any state)
};

enum AttrMask : uint32_t {
  kAttrState = 1u << 0,
  kAttrPmtu = 1u << 1,
  kAttrDestQpn = 1u << 2,
  kAttrRqPsn = 1u << 3,
  kAttrSqPsn = 1u << 4,
  kAttrTimeout = 1u << 5,
  kAttrRetryCnt = 1u << 6,
  kAttrRnrRetry = 1u << 7,
  kAttrMinRnrTimer = 1u << 8,
  kAttrMaxRdAtomic = 1u << 9,
  kAttrMaxDestRdAtomic = 1u << 10,
  kAttrAccess = 1u << 11,
  kAttrSelectiveRepeat = 1u << 12,
  kAttrRateLimit = 1u << 13,
};

struct QpCaps {
  uint32_t max_send_wr = 256;  // send queue entries
  uint32_t max_recv_wr = 256;  // receive queue entries
};

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

class RcTransport final : public Transport {
 public:
  RcTransport();
  ~RcTransport() override;

  std::string_view name() const override { return "rocev2"; }
  std::string check_params(Params params) const override;

  // ---- queue pairs ----
  // A new QP in RESET on `flow`, with local QP number `qpn` (24 bits) and its parameters
  // (check_params: `dcqcn on|off`, DCQCN's constants `dcqcn_*`). -EEXIST, -EINVAL.
  int create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params = {});
  // ibv_modify_qp: the transitions RESET->INIT->RTR->RTS, any->ERR, any->RESET; each needs the
  // attributes ibv_modify_qp requires for it (INIT: access; RTR: pmtu, dest_qpn, rq_psn; RTS:
  // sq_psn, timeout, retry_cnt, rnr_retry). -EINVAL for another transition or a bad value,
  // -ENOENT for no such QP. Moving to ERR completes every pending request with -ECANCELED.
  int modify_qp(FlowId flow, const QpAttr& attr, uint32_t mask, Context& ctx);
  int query_qp(FlowId flow, QpAttr* attr) const;
  // Forgets the QP: pending requests complete with -ECANCELED first. No flow_closed() call: the
  // owner made the flow and removes it.
  int destroy_qp(FlowId flow, Context& ctx);
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
  void stats(InfoSink& out) const override;

  const RcCounters& counters() const { return total_; }

  struct Qp;

 private:
  Qp* find(FlowId flow) const { return flow < qps_.size() ? qps_[flow].get() : nullptr; }

  std::vector<std::unique_ptr<Qp>> qps_;  // by flow id
  std::vector<FlowId> live_;              // flows with a QP, for tick()
  std::vector<Qp*> touched_;              // QPs a burst reached (reserved, reused)
  RcCounters total_;
};

}  // namespace cleave::transport::roce
