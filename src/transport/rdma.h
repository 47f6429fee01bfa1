// rdma.h - the optional RDMA extensions of the transport interface: QpControl, what a transport
// whose flows are queue pairs offers its owner (Transport::qp_control()), and RdmaContext, what
// such a transport asks of its owner (Context::rdma()).
//
// A queue pair (QP) is a flow its owner makes (a flow id and a 24-bit QP number) and moves
// through RESET, INIT, RTR and RTS as ibv_modify_qp does, rather than one made by listen or
// connect. Its peer's packets find it by that number (FlowKey::kNumber). A transport without
// queue pairs, and an owner without RDMA, ignore all of this.
//
// Dependencies: transport.h and the standard library only.
#pragma once

#include <cstdint>

#include "transport.h"

namespace cleave::transport {

enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kErr };

// Remote access a QP grants its peer (ibv_access_flags' remote bits).
enum QpAccess : uint8_t {
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
  uint8_t access = 0;               // QpAccess (INIT)
  bool selective_repeat = false;    // IRN-style recovery; both ends must agree (RTR)
  uint64_t rate_limit_kbps = 0;     // the sending rate's ceiling, 0: 100 Gb/s (any state)
  // Set by the dataplane at RTR, never by the app: the QP's routes to its peer (TxDesc::route),
  // 1 plus the peer's other addresses it was given ("via"), each through another local port.
  uint8_t routes = 1;
};

enum QpAttrMask : uint32_t {
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
  // Memory of the QP's owner that its peer reaches by offset alone, with no key (Solar's target
  // volume): (region_mr, 0 .. region_len). region_len 0: none. A transport that has no use for
  // one refuses it (-EINVAL).
  uint16_t region_mr = 0;
  uint64_t region_len = 0;
};

// What the owner drives a QP transport through (Transport::qp_control()). Each call returns 0 or
// a negative errno.
class QpControl {
 public:
  // A new QP in RESET on `flow`, with local QP number `qpn` (24 bits) and its parameters
  // (checked as check_params does). -EEXIST, -EINVAL.
  virtual int create_qp(FlowId flow, uint32_t qpn, const QpCaps& caps, Params params) = 0;
  // ibv_modify_qp: the transitions RESET->INIT->RTR->RTS, any->ERR, any->RESET; each needs the
  // attributes ibv_modify_qp requires for it. -EINVAL for another transition or a bad value,
  // -ENOENT for no such QP. Moving to ERR completes every pending request with -ECANCELED.
  virtual int modify_qp(FlowId flow, const QpAttr& attr, uint32_t mask, Context& ctx) = 0;
  virtual int query_qp(FlowId flow, QpAttr* attr) const = 0;
  // Forgets the QP: pending requests complete with -ECANCELED first. No flow_closed() call: the
  // owner made the flow and removes it.
  virtual int destroy_qp(FlowId flow, Context& ctx) = 0;

  // The largest path MTU (4096 down to 256) whose packets, with their longest headers and
  // trailer, fit in `l4_mtu` bytes above the IP header; 0 when not even 256 does.
  virtual uint32_t max_pmtu(uint32_t l4_mtu) const = 0;
  // How the NIC is to place the peer's packets once `flow` moves to RTR by modify_qp(flow,
  // attr, mask): the owner adds the NIC flow before the transport moves.
  virtual NicFlow rtr_nic_flow(FlowId flow, const QpAttr& attr, uint32_t mask) const = 0;
  // Whether its QPs use several routes to their peer (QpAttr::routes, TxDesc::route); a QP of a
  // transport that does not may be given no other address than the one it moves to RTR with.
  virtual bool multi_route() const { return false; }

 protected:
  QpControl() = default;
  ~QpControl() = default;
  QpControl(const QpControl&) = default;
  QpControl& operator=(const QpControl&) = default;
};

// The owner's side of RDMA (Context::rdma()): the NIC keeps the MR table and places READ
// responses, so it answers for remote keys and READ sinks.
class RdmaContext {
 public:
  // Checks that the peer may touch [va, va + len) through `rkey` on `flow` (its protection
  // domain, the MR's remote access for a write or a read, the bounds) and names the place as
  // (*mr, *offset). 0, or -EACCES.
  virtual int rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write,
                         uint16_t* mr, uint64_t* offset) = 0;
  // The NIC places the responses to the READ whose first PSN is `psn` at (mr, offset), `len`
  // bytes; read_retire() forgets it.
  virtual int read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) = 0;
  virtual int read_retire(FlowId flow, uint32_t psn) = 0;
  // The NIC's message chain: the next message begins at `psn` and the next SEND takes message
  // `next_msg` (after messages the copy path accepted).
  virtual int roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) = 0;

 protected:
  RdmaContext() = default;
  ~RdmaContext() = default;
  RdmaContext(const RdmaContext&) = default;
  RdmaContext& operator=(const RdmaContext&) = default;
};

}  // namespace cleave::transport
