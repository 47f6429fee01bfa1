// flows.h - the dataplane's transports: the flow and listener tables, the Context transports act
// through, and the glue between the NIC's mbufs, the transports and the apps' pipes.
//
// Receive: frames the NIC matched to a flow (FDIR) and TCP segments to one of our addresses come
// here; their headers and placement metadata become RxHeaders, one rx_burst per transport per
// port burst. Segments for no flow go to the listener of their port, else get a RST (RFC 9293
// 3.10.7.1). Transmit: each TxDesc becomes a header mbuf (the flow's Ethernet and IPv4 header
// templates, then the transport's L4 header) chained to extbuf segments over the app's memory,
// with checksum and TSO offload flags; both NIC backends honour them (the generic one in
// software). Apps: flow requests from submit pipes (FlowHandler) are batched into app_burst per
// transport; events become completions on the flow's completion pipe.
//
// Completions are never lost: a flow reserves room on its completion pipe for every completion
// it may owe (its events at creation, each send or receive when taken; DpPipe::promised), and a
// request whose flow's pipe has no room stays in its submit pipe (FlowAdmit::kWait). The data
// event (kEvData) is the one exception: it is coalesced while the pipe is full.
//
// Threads: the dataplane lcore only; control requests reach it through the CtlChannel.
// Allocation: tables are sized at construction; connect and listen may allocate (control path).
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "apps.h"
#include "arp.h"
#include "flow_info.h"
#include "net.h"
#include "nic.h"
#include "route.h"
#include "shm_abi.h"
#include "stats.h"
#include "transport.h"

namespace cleave::transport::roce {
class RcTransport;
}

namespace cleave::dp {

// A port as the flow path sees it.
struct FlowPort {
  Nic* nic = nullptr;
  uint32_t ip = 0;  // host order
  rte_ether_addr mac{};
  uint32_t mtu = 1500;  // IP bytes per frame
};

// The dataplane services the flow path uses.
class FlowIo {
 public:
  virtual void flow_stage(uint8_t port, rte_mbuf* m) = 0;  // queue for TX on the port

 protected:
  ~FlowIo() = default;
};

struct FlowParams {
  uint32_t max_flows = 16384;  // also the NIC flow ids used (below the NIC's max_flows)
  uint32_t max_listeners = 1024;
  uint32_t max_nic_mrs = 4096;  // NIC MR ids used (below the NIC's max_mrs)
  // TCP TIME-WAIT records kept at most (tcp.max_time_wait); each holds a flow id.
  uint32_t tcp_max_time_wait = 4096;
  uint64_t tsc_hz = 0;
  uint8_t cnp_dscp = 48;  // every QP's dcqcn_cnp_dscp unless its own parameters say otherwise
};

class FlowPath final : public FlowHandler {
 public:
  FlowPath(const FlowParams& params, std::vector<FlowPort> ports, ArpTable& arp,
           const RouteTable& routes, rte_mempool* pool, FlowIo& io, FlowStats& stats);
  ~FlowPath();
  FlowPath(const FlowPath&) = delete;
  FlowPath& operator=(const FlowPath&) = delete;

  // ---- packet path ----
  // A frame for a transport: FDIR-matched, or TCP to one of our addresses. Returns Drop::kCount
  // when it took `m`, else why the caller must drop it.
  Drop rx(uint8_t port, rte_mbuf* m);
  // Hands what rx() staged to the transports (call after each port burst).
  void rx_flush();
  // Apps' flow requests staged by flow_request go to the transports; timers; connects waiting
  // for ARP; data events that waited for room. Returns the work done.
  unsigned poll(uint64_t now);

  // ---- FlowHandler (AppPath) ----
  FlowAdmit flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr, abi::Completion& c,
                         uint64_t now) override;

  // ---- control (dataplane lcore, from control requests) ----
  // Each returns 0 or a negative CL_E* code.
  // message: message mode, the transport parameter "message on" (CL_EOPNOTSUPP when the
  // transport has none).
  int listen(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view transport,
             bool message, uint32_t* listener);
  int unlisten(uint32_t app_id, uint32_t listener);
  int connect(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view transport,
              bool message, uint32_t* flow, uint64_t now);
  // The app is leaving: its flows are aborted (RST), its listeners closed, its memory dropped
  // from the NIC. Events for its flows are dropped from now on.
  void app_detached(DpApp& a);
  // The app's MR `mr` was set (length != 0: registered with the NIC) or is being removed;
  // false (nothing changed) when the NIC refuses, or when removing memory flows may still use.
  bool app_mr(DpApp& a, uint32_t mr, const DpMr& v);
  // A completion pipe may be destroyed only when no flow or listener is bound to it.
  bool cq_in_use(const DpApp& a, uint16_t cq) const;

  // Operator bindings (cleavectl flow attach), for flows opened from then on: 0 or a negative
  // CL_E* code, `error` says why. A binding with the key of an existing one replaces it. An
  // empty b.transport keeps the port's transport (tcp when it has none) for a port binding, and
  // is tcp for a tuple binding; b says which. At most kMaxTupleBindings tuple bindings
  // (CL_ENOSPC). Lookups happen when a flow or listener is created, never per segment: a linear
  // scan of the port bindings (listen, connect) and of the tuple bindings (accept, connect).
  //  - a port binding's uid: only apps of that uid may listen on the port (CL_EACCES); listeners
  //    that exist already stay.
  //  - a tuple binding: a matching flow uses its transport and its params, applied over the
  //    port binding's (connect) or the listener's (accept). Of several matching, the one with
  //    the most addresses given wins, then the older. A connect by an app of another uid fails
  //    with CL_EACCES; an accepted SYN for a listener of another uid, or of another transport,
  //    opens no flow. Both count binding_refused.
  int attach(FlowBinding& b, std::string& error);
  // Removes the binding with b's key (CL_ENOENT when there is none) and hands it back in b;
  // flows keep what they have.
  int detach(FlowBinding& b, std::string& error);
  // Port bindings, then tuple bindings, each in the order attached (allocates: management).
  std::vector<FlowBinding> bindings() const;

  // Queue pairs (RoCEv2 RC, the rocev2 transport): a QP is a flow with no tuple hash entry; its
  // peer's packets find it by QP number (qpn: generation << bits | flow id). Each returns 0 or a
  // negative CL_E* code. qp_create: a QP in RESET whose completions go to `cq`, with room for
  // max_send_wr + max_recv_wr requests; *qpn its number, *ip the address the app advertises
  // (the first port's), *max_pmtu the largest RoCE PMTU its MTU carries. qp_modify: abi::QpAttrMask
  // bits; moving to RTR routes to the peer (kQpAttrRemoteIp), resolves its MAC and adds the QP's
  // NIC flow before the transport moves. qp_destroy: pending requests complete with CL_ECANCELED,
  // then the flow is freed.
  int qp_create(DpApp& a, uint16_t cq, uint32_t max_send_wr, uint32_t max_recv_wr,
                std::string_view params, uint32_t* qp, uint32_t* qpn, uint32_t* ip,
                uint32_t* max_pmtu);
  int qp_modify(uint32_t app_id, uint32_t qp, const abi::QpAttr& attr, uint32_t mask, uint64_t now);
  int qp_query(uint32_t app_id, uint32_t qp, abi::QpAttr* attr) const;
  int qp_destroy(uint32_t app_id, uint32_t qp);

  // Management.
  void rows(std::vector<FlowRow>& out, uint32_t only_flow) const;
  std::vector<std::string> transport_names() const;
  // Management: each instantiated transport's counters (allocates).
  std::vector<TransportStats> transport_stats() const;

 private:
  struct Flow;
  struct Listener;
  struct Tp;
  class Ctx;
  friend class Ctx;

  Tp* transport_for(std::string_view name, uint16_t port, std::string& error);
  uint32_t alloc_flow();
  void free_flow(uint32_t id);
  void hash_insert(uint32_t id);
  void hash_remove(uint32_t id);
  uint32_t hash_find(uint32_t remote_ip, uint16_t remote_port, uint32_t local_ip,
                     uint16_t local_port) const;
  Drop rx_roce(rte_mbuf* m, const uint8_t* ip, uint32_t ihl, uint32_t ip_len);
  void stage_rx(Tp& tp, transport::RxHeader& h, rte_mbuf* m, const rte_pmd_cleave_placement& pl);
  Flow* own_qp(uint32_t app_id, uint32_t qp);
  transport::roce::RcTransport* roce(std::string& error);
  void free_qp(uint32_t id);
  bool reserve(DpApp& a, uint16_t cq, uint32_t n);
  bool charge(DpApp& a);
  void uncharge(Flow& f);
  void established(Flow& f);
  void release(Flow& f, uint32_t n);
  bool fill_l2(Flow& f, uint64_t now);
  void start_connect(uint32_t id);
  void fail_connect(uint32_t id, int32_t status);
  void post_data(Flow& f);
  unsigned app_flush(Tp& tp, uint64_t now);
  const FlowBinding* binding(uint16_t port) const;
  const FlowBinding* tuple_binding(const transport::FlowTuple& t) const;
  // The operator's parameters for a flow of `tp`: the port's binding, then the tuple's (when t
  // is given and matches one), each when it names tp; then "message on" when the app asked.
  std::vector<transport::Param> params_for(const transport::FlowTuple* t, uint16_t port,
                                           const Tp& tp, bool message = false) const;
  void reap();

  // Context hooks.
  void send(std::span<transport::TxDesc> descs);
  void deliver(std::span<const transport::Event> events);
  int nic_cmd(int rc);
  uint32_t open_flow(Tp& tp, transport::ListenerId l, const transport::FlowTuple& t,
                     uint32_t initial_seq, bool messages, bool half_open);
  void synced(uint32_t id, uint32_t initial_seq, bool messages);
  void closed(uint32_t id);
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset);
  void send_rst(uint8_t port, const rte_mbuf* m, const uint8_t* ip, const uint8_t* tcp,
                uint32_t payload_len);
  bool send_back(uint8_t port, const rte_ether_hdr* in_eth, const uint8_t* ip, const uint8_t* l4,
                 size_t len);
  bool reply(const transport::RxHeader& to, const uint8_t* l4, size_t len);

  FlowParams p_;
  std::vector<FlowPort> ports_;
  ArpTable& arp_;
  const RouteTable& routes_;
  rte_mempool* pool_;
  FlowIo& io_;
  FlowStats& stats_;
  std::vector<std::unique_ptr<Tp>> transports_;
  std::vector<Flow> flows_;
  uint32_t free_head_;
  std::vector<uint32_t> hash_;  // open addressing: flow id + 1, 0 empty, kTombstone deleted
  std::vector<Listener> listeners_;
  struct NicMr {
    uint8_t* base = nullptr;
    uint64_t length = 0;
    uint32_t app = 0;  // 0: free
    uint16_t tag = 0;  // RoCE: the rkey's high bits, a new one each time the id is reused
  };
  std::vector<NicMr> nic_mrs_;  // by NIC MR id; id 0 is never used
  std::vector<uint32_t> resolving_;
  std::vector<uint32_t> data_waiting_;
  std::vector<uint32_t> reap_;
  std::vector<FlowBinding> bindings_;        // port bindings
  std::vector<FlowBinding> tuple_bindings_;  // at most kMaxTupleBindings (reserved)
  // The tuple binding's params for the flow open_flow() just accepted (Context::flow_params):
  // views into tuple_bindings_, reused so accepting allocates nothing here.
  std::vector<transport::Param> accept_params_;
  uint32_t accept_params_flow_ = transport::kNoFlow;
  rte_mbuf_ext_shared_info shinfo_{};  // app memory under TX extbufs: never freed by DPDK
  uint16_t next_ephemeral_ = 0;
  Tp* roce_tp_ = nullptr;         // the rocev2 transport, once a QP was created
  uint32_t qpn_bits_ = 0;         // a QP number's low bits are its flow id
  std::vector<uint32_t> qp_gen_;  // by flow id: the generation of the QP number last given
  uint64_t icrc_flag_ = 0;        // the mbuf TX flag asking the NIC for the RoCE ICRC
  uint64_t next_resolve_check_ = 0;
  int placement_offset_ = -1;
  int open_error_ = 0;  // Context::flow_open_error(): why the latest open_flow() gave none
};

}  // namespace cleave::dp
