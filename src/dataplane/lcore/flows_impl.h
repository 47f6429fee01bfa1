// flows_impl.h - the flow path's private parts, shared by its files (flows.h has the map):
// constants, the flow and listener records, a transport's staging, the Context it acts through.
// Included only by the flow path's own .cc files.
#pragma once

#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/wire.h"
#include "lcore/flows.h"
#include "rdma.h"
#include "registry.h"
#include "rte_pmd_cleave.h"
#include "transport.h"

namespace cleave::dp {

namespace flowpath {

using transport::EventKind;
using transport::FlowId;
using transport::kNoFlow;

inline constexpr uint32_t kEthLen = sizeof(rte_ether_hdr);
inline constexpr uint32_t kIpLen = sizeof(rte_ipv4_hdr);
inline constexpr uint32_t kHdrTemplate = kEthLen + kIpLen;
inline constexpr uint32_t kFlowEvents = 3;  // connected or accepted, peer closed, closed or refused
inline constexpr uint32_t kExtSeg = 32768;  // payload bytes per extbuf segment
// A descriptor's extbuf segments, built on the lcore's stack: enough for the longest payload
// the transport ABI allows (send() refuses longer descriptors).
inline constexpr uint32_t kMaxExtSegs = (transport::kMaxTxLen + kExtSeg - 1) / kExtSeg;
inline constexpr uint8_t kMinL4Header = 8;  // a TX descriptor's L4 header: UDP's at least
inline constexpr uint32_t kTombstone = 0xFFFFFFFFu;
inline constexpr uint32_t kListenerEntry = 0x80000000u;  // a hash entry naming a listener
inline constexpr size_t kRxStage = 512;
inline constexpr size_t kAppStage = 64;
inline constexpr size_t kRing = 64;
inline constexpr uint32_t kResolveCheckUs = 1000;
inline constexpr uint32_t kMaxQpWr = 4096;  // a QP's send or receive queue
inline constexpr uint32_t kQpnBits = 24;  // a QP number's (the verbs ABI's, abi::QpAttr::dest_qpn)
inline constexpr uint8_t kMaxRoutes = 4;  // a QP's routes to its peer: its own and 3 "via"
// IP-level faults of a frame the NIC matched to a flow (rx_ipv4 checks the others) count here,
// as they always did, whatever the transport.
inline constexpr Drop kFrameMalformed = Drop::kTcpMalformed;

using wire::load16;
using wire::load32;

// The NIC's parsers, number for number.
static_assert(uint8_t(transport::NicParser::kTcp) == RTE_PMD_CLEAVE_PARSER_TCP &&
              uint8_t(transport::NicParser::kRoce) == RTE_PMD_CLEAVE_PARSER_ROCE &&
              uint8_t(transport::NicParser::kSolar) == RTE_PMD_CLEAVE_PARSER_SOLAR &&
              uint8_t(transport::NicParser::kUdp) == RTE_PMD_CLEAVE_PARSER_UDP);

// A transport's NIC flow, addressed (the caller adds ports, QP number and owner).
inline rte_pmd_cleave_flow nic_spec(const transport::NicFlow& n, uint32_t src_ip, uint32_t dst_ip,
                                    uint8_t proto) {
  rte_pmd_cleave_flow spec{};
  spec.src_ip = src_ip;
  spec.dst_ip = dst_ip;
  spec.proto = proto;
  spec.mode = n.zero_copy ? RTE_PMD_CLEAVE_ZERO_COPY : RTE_PMD_CLEAVE_COPY;
  spec.parser = uint8_t(n.parser);
  spec.reliable = n.reliable ? 1 : 0;
  spec.messages = n.messages ? 1 : 0;
  spec.selective_repeat = n.selective_repeat ? 1 : 0;
  spec.initial_seq = n.initial_seq;
  spec.pmtu = n.pmtu;
  return spec;
}

// A queue pair's route to its peer's other address ("via" at create) through another local
// port: its own next hop, header template and NIC flow there.
struct AltRoute {
  uint8_t port = 0;
  bool l2_ready = false;
  bool on_nic = false;
  uint32_t remote_ip = 0;  // host order
  uint32_t next_hop = 0;
  alignas(8) std::array<uint8_t, kHdrTemplate> hdr{};
};

// A QP's routes past its first: the addresses its app gave, resolved at RTR.
struct AltRoutes {
  uint8_t via_count = 0;
  std::array<uint32_t, kMaxRoutes - 1> via{};  // host order
  uint8_t count = 0;                           // resolved (RTR): via_count, else 0
  std::array<AltRoute, kMaxRoutes - 1> route;
};

}  // namespace flowpath

using namespace flowpath;  // the flow path's own files share these names

struct FlowPath::Flow {
  enum class State : uint8_t { kFree, kResolving, kOpen };
  State state = State::kFree;
  bool on_nic = false;
  bool l2_ready = false;
  bool app_done = false;  // closed or refused delivered: later requests fail with EPIPE
  bool gone = false;      // the transport released it; freed after this burst's events
  bool data_listed = false;
  bool message = false;    // the app asked for message mode (applied at connect)
  bool msg_flow = false;   // the transport said its segments name their messages
  bool nic_msg = false;    // ...and the NIC flow places by them (net_cleave only)
  bool qp = false;         // a queue pair (QpControl): found by qpn, not in the tuple hash
  bool charged = false;    // counted in its app's flows (quota.flows) until the app is done
  bool half_open = false;  // accepted from a SYN, not yet established: counted in half_open
  uint8_t port = 0;
  uint8_t tp = 0;
  uint16_t cq = 0;
  uint16_t ip_id = 0;
  DpApp* app = nullptr;  // null once the app left
  uint32_t owner = 0;    // the app's id (kept after it left, for management)
  uint32_t events_left = 0;
  uint32_t outstanding = 0;  // sends and receives taken, completions owed
  uint32_t data_pending = 0;
  uint32_t next_hop = 0;
  uint32_t next_free = 0;
  uint32_t qpn = 0;  // qp: its number
  transport::FlowTuple tuple;
  alignas(8) std::array<uint8_t, kHdrTemplate> hdr{};
  std::unique_ptr<AltRoutes> alt;  // a QP given "via" addresses; null for every other flow
};

struct FlowPath::Listener {
  bool used = false;
  uint8_t proto = IPPROTO_TCP;
  DpApp* app = nullptr;
  uint32_t app_id = 0;
  uint16_t cq = 0;
  uint8_t tp = 0;
  uint32_t ip = 0;  // 0: any of ours
  uint16_t port = 0;
  // Another shard's (listen_remote): its frames go there; no app, no transport here.
  bool remote = false;
  uint16_t shard = 0;
  uint32_t remote_id = 0;  // the listener's id on its shard
};

// The Context a transport acts through, one per transport (context.cc): its TX descriptors go
// out through FlowPath::send (tx.cc), its events through FlowPath::deliver (completions.cc).
class FlowPath::Ctx final : public transport::Context, public transport::RdmaContext {
 public:
  Ctx(FlowPath& fp, Tp& tp) : Context(tx_, ev_), fp_(fp), tp_(tp) {}
  // The time of the burst about to be handed over, from the TSC.
  void at(uint64_t tsc) {
    const uint64_t hz = fp_.p_.tsc_hz;
    set_now(tsc / hz * 1000000000u + tsc % hz * 1000000000u / hz);
  }

  int ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override;
  int cursor_update(FlowId flow, uint32_t cursor) override;
  int ms_retire(FlowId flow, uint32_t count) override;
  int ms_retire_msg(FlowId flow, uint32_t msg) override;
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) override;
  FlowId flow_open(transport::ListenerId l, const transport::FlowTuple& t, uint32_t initial_seq,
                   bool messages) override;
  FlowId flow_open_established(transport::ListenerId l, const transport::FlowTuple& t,
                               uint32_t initial_seq, bool messages) override;
  int flow_open_error() const override;
  bool reply(const transport::RxHeader& to, const uint8_t* l4, size_t len) override;
  transport::Params flow_params(FlowId flow) override;
  void flow_synced(FlowId flow, uint32_t initial_seq, bool messages) override;
  void flow_closed(FlowId flow) override;
  transport::RdmaContext* rdma() override { return this; }

  // ---- RdmaContext ----
  int rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write, uint16_t* mr,
                 uint64_t* offset) override;
  int read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) override;
  int read_retire(FlowId flow, uint32_t psn) override;
  int roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) override;

 protected:
  void drain_tx(std::span<transport::TxDesc> descs) override { fp_.send(descs); }
  void drain_events(std::span<const transport::Event> events) override { fp_.deliver(events); }

 private:
  Nic* flow_nic(FlowId flow) const;
  template <typename Cmd>
  int each_nic(FlowId flow, Cmd cmd);

  std::array<transport::TxDesc, kRing> tx_{};
  std::array<transport::Event, kRing> ev_{};
  FlowPath& fp_;
  Tp& tp_;
};

// A transport the flow path runs, with what is staged for its next bursts.
struct FlowPath::Tp {
  std::string name;
  uint8_t index = 0;
  std::unique_ptr<transport::Transport> t;
  std::unique_ptr<Ctx> ctx;
  std::vector<transport::RxHeader> hdrs;
  std::vector<rte_mbuf*> mbufs;
  std::vector<transport::AppRequest> reqs;
  // The mbuf TX flag that asks the NIC to end a kTxParserTrailer packet as this transport's
  // parser does (RoCEv2: pad and ICRC; Solar: the block's CRC32C); 0 for none.
  uint64_t trailer_flag = 0;
  bool trailer_udp_csum = false;  // and the UDP checksum over the whole packet, after the trailer
};

}  // namespace cleave::dp
