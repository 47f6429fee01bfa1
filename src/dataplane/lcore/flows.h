// flows.h - the dataplane's transports: the flow and listener tables, the Context transports act
// through, and the glue between the NIC's mbufs, the transports and the apps' pipes.
//
// What it does, and where:
//   flows.cc        the tables and control: construction, transports, the flow table and app
//                   quotas, apps' flow requests, listen/connect/detach, MRs, bindings, management
//   demux.cc        received frames to transports: the transports' claims, the flow hash and the
//                   listeners, the answer to a packet of no flow (a RST)
//   context.cc      the transport Context (and RdmaContext): NIC commands, the copy path, flows
//                   opened and closed by transports
//   tx.cc           TX descriptors to header mbufs chained to extbufs over app memory
//   completions.cc  transport events to app completions (room kept by CompletionRoom, apps.h)
//   qp.cc           queue-pair control through the transport's QpControl (rdma.h)
//   flows_impl.h    the private types these files share
//
// Receive: frames the NIC matched to a flow (FDIR) and the traffic transports claim (their IP
// protocol; for UDP, destination ports) come here; each claim's parse splits the packet and
// reads its flow key, and headers with placement metadata become RxHeaders, one rx_burst per
// transport per port burst. Packets for no flow go to the listener of their port, else get the
// claim's answer (TCP: a RST, RFC 9293 3.10.7.1). Transmit: each TxDesc becomes a header mbuf
// (the flow's Ethernet and IPv4 header templates, then the transport's L4 header) chained to
// extbuf segments over the app's memory, with checksum and TSO offload flags; both NIC backends
// honour them (the generic one in software). Apps: flow requests from submit pipes
// (FlowHandler) are batched into app_burst per transport; events become completions on the
// flow's completion pipe.
//
// Completions are never lost: a flow reserves room on its completion pipe for every completion
// it may owe (its events at creation, each send or receive when taken; CompletionRoom), and a
// request whose flow's pipe has no room stays in its submit pipe (FlowAdmit::kWait). The data
// event (kEvData) is the one exception: it is coalesced while the pipe is full.
//
// Threads: the dataplane lcore only (checked, thread_check.h: the thread that polls owns it);
// control requests reach it through the CtlChannel.
// Allocation: tables are sized at construction; connect and listen may allocate (control path).
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/rss.h"
#include "flow_info.h"
#include "lcore/apps.h"
#include "lcore/arp.h"
#include "lcore/demux.h"
#include "lcore/route.h"
#include "net.h"
#include "nic.h"
#include "rdma.h"
#include "shm_abi.h"
#include "stats.h"
#include "thread_check.h"
#include "transport.h"

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
  // A frame received on `port` that belongs to another shard (a listener or a flow of its): to
  // that shard, which receives it as if from its own queue.
  virtual void flow_hand_off(uint16_t shard, uint8_t port, rte_mbuf* m) = 0;

 protected:
  ~FlowIo() = default;
};

// A setting of a whole transport from the configuration (Transport::configure).
struct TransportSetting {
  std::string transport;
  std::string key;
  std::string value;
};

// A shard's part of an id space shared by all shards (a port's NIC flow and MR ids): shard s of
// n owns [s * size / n, (s + 1) * size / n).
struct IdRange {
  uint32_t first = 0;
  uint32_t end = 0;
  static IdRange of(uint32_t size, uint16_t shard, uint16_t shards) {
    return {uint32_t(uint64_t(size) * shard / shards),
            uint32_t(uint64_t(size) * (shard + 1) / shards)};
  }
  bool has(uint32_t id) const { return id >= first && id < end; }
};

struct FlowParams {
  uint32_t max_flows = 16384;  // also the NIC flow ids used (below the NIC's max_flows)
  uint32_t max_listeners = 1024;
  uint32_t max_nic_mrs = 4096;  // NIC MR ids used (below the NIC's max_mrs)
  // This shard (of `shards`): it allocates flow ids and NIC MR ids in its IdRange of each, and
  // hands frames for another shard's flows and listeners to it (FlowIo::flow_hand_off).
  uint16_t shard = 0;
  uint16_t shards = 1;
  uint64_t tsc_hz = 0;
  // Applied to each transport of that name when it is made (tcp's max_time_wait).
  std::vector<TransportSetting> settings;
  // The parameters of every QP of that transport unless its own say otherwise (from the
  // configuration's rocev2: section).
  std::vector<TransportSetting> qp_params;
};

class FlowPath final : public FlowHandler {
 public:
  FlowPath(const FlowParams& params, std::vector<FlowPort> ports, ArpTable& arp,
           const RouteTable& routes, rte_mempool* pool, FlowIo& io, FlowStats& stats);
  ~FlowPath();
  FlowPath(const FlowPath&) = delete;
  FlowPath& operator=(const FlowPath&) = delete;

  // ---- packet path ----
  // Whether a transport claims IP protocol `proto` (for UDP, to destination port `udp_port`).
  bool claims(uint8_t proto, uint16_t udp_port) const;
  // A frame for a transport: FDIR-matched, or claimed traffic to one of our addresses. Returns
  // Drop::kCount when it took `m`, else why the caller must drop it.
  Drop rx(uint8_t port, rte_mbuf* m);
  // Hands what rx() staged to the transports (call after each port burst).
  void rx_flush();
  // Apps' flow requests staged by flow_request go to the transports; timers; connects waiting
  // for ARP; data events that waited for room. Returns the work done.
  unsigned poll(uint64_t now);

  // Where events become completions: the app path's batch, flushed by the dataplane at the
  // end of each stage (set once, before the first packet).
  void set_completions(CompletionBatch* b) { completions_ = b; }

  // ---- FlowHandler (AppPath) ----
  FlowAdmit flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr, abi::Completion& c,
                         uint64_t now) override;

  // ---- control (dataplane lcore, from control requests) ----
  // Each returns 0 or a negative CL_E* code.
  // message: message mode, the transport parameter "message on" (CL_EOPNOTSUPP when the
  // transport has none).
  // The listener takes its transport's claim's IP protocol (TCP for a transport that claims
  // none); a transport that claims UDP listens only on ports it claims (CL_EINVAL otherwise).
  int listen(DpApp& a, uint16_t cq, uint32_t ip, uint16_t port, std::string_view transport,
             bool message, uint32_t* listener);
  // The IP protocol of a listener listen() made.
  uint8_t listener_proto(uint32_t listener) const;
  int unlisten(uint32_t app_id, uint32_t listener);
  // Another shard's listener (`listener` there), for an app of that shard: frames this shard has
  // no flow for that would reach it are handed to that shard, and no app here may listen on its
  // address. 0, CL_EADDRINUSE or CL_ENOSPC. unlisten_remote: that one, or with `listener`
  // kNoFlow every one of the app's; CL_ENOENT when none.
  int listen_remote(uint32_t app_id, uint16_t shard, uint32_t listener, uint32_t ip, uint16_t port,
                    uint8_t proto);
  int unlisten_remote(uint32_t app_id, uint32_t listener);
  // The flow takes its transport's claim's IP protocol, as listen(); its local port is an
  // ephemeral one, or for a transport that claims UDP one of its claimed ports.
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

  // Queue pairs (of a transport with QpControl, rdma.h): a QP is a flow with no tuple hash
  // entry; its peer's packets find it by QP number (qpn: generation << bits | flow id). Each
  // returns 0 or a negative CL_E* code. qp_create: a QP in RESET whose completions go to `cq`,
  // with room for max_send_wr + max_recv_wr requests, of the transport `params` names
  // ("transport solar"; else rocev2), with the volume they name ("volume <MR id>": an MR with
  // remote read and write, CL_EACCES without); *qpn its number, *ip the address the app
  // advertises (the first port's), *max_pmtu the largest PMTU its MTU carries. qp_modify:
  // abi::QpAttrMask bits; moving to RTR routes to the peer (kQpAttrRemoteIp), resolves its MAC
  // and adds the QP's NIC flow before the transport moves. qp_destroy: pending requests complete
  // with CL_ECANCELED, then the flow is freed.
  int qp_create(DpApp& a, uint16_t cq, uint32_t max_send_wr, uint32_t max_recv_wr,
                std::string_view params, uint32_t* qp, uint32_t* qpn, uint32_t* ip,
                uint32_t* max_pmtu);
  int qp_modify(uint32_t app_id, uint32_t qp, const abi::QpAttr& attr, uint32_t mask, uint64_t now);
  int qp_query(uint32_t app_id, uint32_t qp, abi::QpAttr* attr) const;
  int qp_destroy(uint32_t app_id, uint32_t qp);

  // Management.
  // One page of the flow listing: rows from position `start` on (listeners, then flows, each
  // by id), at most `max_rows` of them, at most `max_scan` table slots looked at, and no row
  // begun once the TSC reaches `deadline` (one row at least), so a page costs the lcore a
  // bounded time; returns where the next page starts, kNoFlow when the listing is complete.
  // `only` other than kNoFlow: that flow's row alone, if it exists.
  uint32_t rows(std::vector<FlowRow>& out, uint32_t only, uint32_t start, uint32_t max_rows,
                uint32_t max_scan, uint64_t deadline) const;
  std::vector<std::string> transport_names() const;
  // Management: each instantiated transport's counters (allocates).
  std::vector<TransportStats> transport_stats() const;

 private:
  struct Flow;
  struct Listener;
  struct Tp;
  class Ctx;
  friend class Ctx;
  // A transport's claim (transport::Claim), learned from the registry.
  struct ClaimEntry {
    std::string transport;
    transport::Claim claim;       // its udp_ports are in udp_claims_ and `ports`
    std::vector<uint16_t> ports;  // UDP: the ports it took, ascending
    int tp = -1;                  // its transport's index once instantiated
    // Set when the claim is learned, read per packet: the counters its packets are dropped
    // under, and whether the NIC's checksum verdict on them is the L4 checksum's (TCP, UDP)
    // rather than the transport's own check (RoCEv2's ICRC).
    Drop malformed = Drop::kNoTransport;
    Drop bad_checksum = Drop::kNoTransport;
    Drop no_flow = Drop::kNoTransport;
    bool l4_verdict = false;
    SoftwareCheck check = nullptr;  // the parser's own check, on frames the NIC did not check
    // UDP: the first port it took (a QP's, both ends); 0 for another protocol.
    uint16_t port() const { return ports.empty() ? 0 : ports.front(); }
  };
  using NoFlowAnswer = size_t (*)(const transport::RxL4&, const transport::RxParsed&, uint8_t*);

  Tp* transport_for(std::string_view name, uint16_t port, std::string& error);
  uint32_t alloc_flow();
  void free_flow(uint32_t id);
  // The flow hash (demux.cc): flows by tuple and listeners by local address in one table.
  struct HashKey {
    uint32_t rip = 0;  // listeners: 0
    uint32_t lip = 0;  // listeners: 0 for any of ours
    uint16_t rport = 0;
    uint16_t lport = 0;
    uint8_t proto = 0;
  };
  static HashKey key_of(const Flow& f);
  static HashKey key_of(const Listener& l);
  static uint32_t mix(const HashKey& k);
  void hash_put(uint32_t entry, const HashKey& k);
  void hash_drop(uint32_t entry, const HashKey& k);
  void hash_insert(uint32_t id);
  void hash_remove(uint32_t id);
  void listener_insert(uint32_t l);
  void listener_remove(uint32_t l);
  uint32_t hash_find(uint8_t proto, uint32_t remote_ip, uint16_t remote_port, uint32_t local_ip,
                     uint16_t local_port) const;
  uint32_t listener_find(uint8_t proto, uint32_t local_ip, uint16_t local_port) const;
  bool port_listened(uint8_t proto, uint16_t local_port) const;
  uint32_t free_listener(uint32_t ip, uint16_t port) const;
  // The shard whose IdRange holds flow id `id`.
  uint16_t shard_of(uint32_t id) const {
    uint16_t s = 0;
    while (s + 1 < p_.shards && IdRange::of(p_.max_flows, uint16_t(s + 1), p_.shards).first <= id)
      s++;
    return s;
  }
  bool port_free(const transport::FlowTuple& t, uint16_t port) const;
  uint16_t ephemeral_port(const transport::FlowTuple& t);
  uint16_t claimed_port(const ClaimEntry& c, const transport::FlowTuple& t) const;
  uint8_t proto_of(const Tp& tp) const;
  void learn_claims();
  void add_claim(std::string_view name, const transport::Claim& c);
  void link_claims();
  const ClaimEntry* claim_of(const Tp& tp) const;
  Tp* find_numbered(const rte_mbuf* m, const ClaimEntry& c, uint32_t number, uint32_t rip,
                    transport::RxHeader* h);
  Tp* find_tuple(uint8_t port, uint8_t proto, uint32_t rip, uint32_t lip,
                 const transport::RxParsed& k, const rte_mbuf* m, transport::RxHeader* h);
  void stage_rx(Tp& tp, transport::RxHeader& h, rte_mbuf* m, const rte_pmd_cleave_placement& pl);
  Flow* own_qp(uint32_t app_id, uint32_t qp);
  Tp* qp_transport(std::string_view name, std::string& error);
  transport::QpControl& qp_control(const Flow& f) const;
  void free_qp(uint32_t id);
  int qp_routes(Flow& f, uint32_t id, uint32_t pmtu, const rte_pmd_cleave_flow& spec, uint64_t now);
  void qp_unroute(Flow& f, uint32_t id);
  bool reserve(DpApp& a, uint16_t cq, uint32_t n);
  bool charge(DpApp& a);
  void uncharge(Flow& f);
  void established(Flow& f);
  void release(Flow& f, uint32_t n);
  bool fill_l2(Flow& f, uint64_t now);
  bool fill_hdr(uint8_t port, uint32_t next_hop, uint32_t lip, uint32_t rip, uint8_t proto,
                uint8_t* hdr, uint64_t now);
  void nic_off(Flow& f, uint32_t id);
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
  void answer_no_flow(uint8_t port, const rte_mbuf* m, const uint8_t* ip, const transport::RxL4& in,
                      const transport::RxParsed& k, NoFlowAnswer answer);
  bool send_back(uint8_t port, const rte_ether_hdr* in_eth, const uint8_t* ip, const uint8_t* l4,
                 size_t len);
  bool reply(const transport::RxHeader& to, const uint8_t* l4, size_t len);

  FlowParams p_;
  ThreadOwner lcore_{"dataplane lcore"};  // bound by poll(); every public call below is its
  std::vector<FlowPort> ports_;
  ArpTable& arp_;
  const RouteTable& routes_;
  rte_mempool* pool_;
  FlowIo& io_;
  FlowStats& stats_;
  CompletionBatch* completions_ = nullptr;
  std::vector<std::unique_ptr<Tp>> transports_;
  std::vector<Flow> flows_;
  uint32_t free_head_;
  IdRange flow_ids_;  // this shard's flow ids
  IdRange mr_ids_;    // this shard's NIC MR ids
  rss::Reta reta_;    // the NICs' RETA over the shards' queues (nic.h)
  // Open addressing: 0 empty, kTombstone deleted, a flow's id + 1, kListenerEntry | a listener's.
  std::vector<uint32_t> hash_;
  std::vector<Listener> listeners_;
  struct NicMr {
    uint8_t* base = nullptr;
    uint64_t length = 0;
    uint32_t app = 0;  // 0: free
    uint16_t tag = 0;  // remote keys' high bits, a new one each time the id is reused
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
  EphemeralPorts ephemeral_;
  std::vector<ClaimEntry> claims_;           // reserved: never reallocates
  std::array<uint8_t, 256> proto_claims_{};  // by IP protocol but UDP: claims_ index + 1, 0 none
  std::vector<uint8_t> udp_claims_;          // by UDP destination port: likewise
  size_t registry_seen_ = 0;                 // registry entries learn_claims() has met
  uint32_t qpn_bits_ = 0;                    // a QP number's low bits are its flow id
  std::vector<uint32_t> qp_gen_;  // by flow id: the generation of the QP number last given
  uint64_t icrc_flag_ = 0;        // the mbuf TX flags asking the NIC for a parser's trailer:
  uint64_t crc32c_flag_ = 0;      // RoCEv2's ICRC, Solar's CRC32C (Tp::trailer_flag)
  uint64_t next_resolve_check_ = 0;
  int placement_offset_ = -1;
  int open_error_ = 0;  // Context::flow_open_error(): why the latest open_flow() gave none
};

}  // namespace cleave::dp
