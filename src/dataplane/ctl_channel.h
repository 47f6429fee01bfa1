// ctl_channel.h - requests from management threads to the dataplane lcore, and their answers.
//
// The management thread and the telemetry thread never read dataplane state. They put a request
// on a multi-producer/single-consumer rte_ring; the dataplane takes it between bursts, fills in
// the answer in the request itself and publishes `done` with release order. The requester owns
// the request and preallocates any room the answer needs, so the dataplane never allocates.
//
// A request the dataplane does not answer in time is withdrawn if the dataplane has not taken it
// yet (a stalled or descheduled lcore): it is then never applied, and the requester knows that.
// One the dataplane took is finished by it; the requester either waits for it or keeps a handle
// (`late`) to learn its outcome later, so nothing is applied behind the main thread's back.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "apps.h"
#include "arp.h"
#include "fault_params.h"
#include "flow_info.h"
#include "net.h"
#include "shm_abi.h"
#include "stats.h"

struct rte_ring;

namespace cleave::dp {

enum class CtlOp : uint8_t {
  kStats,     // copy of every counter
  kArpTable,  // the neighbour cache
  kRouteGet,  // route and next hop for `addr`, resolving the next hop's MAC
  kApp,       // an app table update (app_op), or every app's counters
  kNic,       // one port's NIC backend and counters (nic_port)
  kFlow,      // flows: an app's listen, unlisten or connect; management's list and attach
};

enum class FlowOp : uint8_t {
  kListen,
  kUnlisten,
  kConnect,
  kList,
  kAttach,
  kDetach,
  kQpCreate,
  kQpModify,
  kQpQuery,
  kQpDestroy,
};

// One NIC counter, its name copied (xstats names are at most 64 bytes with the NUL).
struct NicCounterRow {
  std::array<char, 64> name{};
  uint64_t value = 0;
};

struct AppCountersRow {
  uint32_t id = 0;
  AppCounters counters;
};

struct ArpRow {
  Ipv4 ip;
  Mac mac;
  uint8_t port = 0;
  ArpState state = ArpState::kIncomplete;
  bool pinned = false;
  uint64_t age_cycles = 0;  // since the neighbour last answered
};

struct RouteAnswer {
  bool found = false;
  uint8_t port = 0;
  Ipv4Prefix dst;
  std::string_view kind;  // RouteEntry::kind()
  Ipv4 next_hop;
  bool neighbour_known = false;  // an ARP entry exists
  ArpState state = ArpState::kIncomplete;
  Mac mac;
};

struct CtlRequest {
  CtlOp op = CtlOp::kStats;
  Ipv4 addr;  // kRouteGet

  // Answers, written by the dataplane before `done`.
  uint64_t tsc_hz = 0;
  DataplaneStats stats;
  std::vector<ArpRow> arp;  // capacity reserved by the requester; the dataplane never grows it
  bool arp_truncated = false;
  RouteAnswer route;

  // kApp: the update, built by the main thread. `app_ok` says whether it applied; kDetach
  // hands the app back in `app`.
  AppOp app_op = AppOp::kCounters;
  DpApp* app = nullptr;  // kAttach
  uint32_t app_id = 0;
  uint32_t app_index = 0;  // kSetMr, kSetPipe: the slot
  DpMr mr;
  DpPipe pipe;
  bool app_ok = false;
  std::vector<AppCountersRow> app_counters;  // kCounters: capacity reserved by the requester

  // kNic: the port by index; the answer fills nic_counters up to the capacity the requester
  // reserved (nic_truncated says some did not fit).
  uint8_t nic_port = 0;
  bool nic_found = false;
  uint8_t nic_backend = 0;  // NicBackend
  std::vector<NicCounterRow> nic_counters;
  bool nic_truncated = false;
  // kNic also sets a port's wire faults when nic_fault_dirs is not 0 (bit 1 << FaultDir each),
  // before the counters are read; nic_fault_status is 0 or the NIC's negative errno. The answer
  // carries the faults in force either way.
  uint8_t nic_fault_dirs = 0;
  FaultParams nic_fault;
  int nic_fault_status = 0;
  std::array<FaultParams, kFaultDirs> nic_faults{};

  // kFlow. kListen, kConnect: app_id, cq, ip (host order), port, transport ("" default) in;
  // flow_id (listener or flow) and flow_status (0 or CL_E*) out. kUnlisten: app_id, flow_id.
  // kList: flow_id (kNoFlow: all) in, flow_rows out (the dataplane allocates: management only).
  // kAttach, kDetach: binding in (kAttach: as kept out), flow_status and flow_error out.
  FlowOp flow_op = FlowOp::kList;
  uint16_t flow_cq = 0;
  uint32_t flow_ip = 0;
  uint16_t flow_port = 0;
  std::string flow_transport;
  bool flow_message = false;  // kListen, kConnect: message mode (the transport's "message on")
  uint32_t flow_id = 0;
  int32_t flow_status = 0;
  std::vector<FlowRow> flow_rows;
  FlowBinding binding;
  std::string flow_error;
  std::vector<std::string> transports;          // kList: the transports instantiated
  std::vector<TransportStats> transport_stats;  // kList: their counters, in the same order
  std::vector<FlowBinding> bindings;            // kList: the operator's bindings
  // kQp*: app_id and flow_id (the QP) in. kQpCreate: flow_cq, qp_send_wr, qp_recv_wr and
  // qp_params in; flow_id, qp_qpn, qp_ip and qp_max_pmtu out. kQpModify: qp_attr and qp_mask in.
  // kQpQuery: qp_attr out. flow_status (0 or CL_E*) out.
  uint32_t qp_send_wr = 0;
  uint32_t qp_recv_wr = 0;
  std::string qp_params;
  uint32_t qp_qpn = 0;
  uint32_t qp_ip = 0;
  uint32_t qp_max_pmtu = 0;
  abi::QpAttr qp_attr{};
  uint32_t qp_mask = 0;

  std::atomic<bool> done{false};
  // Who has the request: CtlChannel's business (kQueued, kTaken by the dataplane, or kWithdrawn by
  // a requester that stopped waiting before the dataplane took it).
  std::atomic<uint8_t> claim{0};
};

// What happened to a request that call() did not return answered.
enum class CtlMiss : uint8_t {
  kNone,       // answered
  kWithdrawn,  // unanswered in time, or the ring was full: never applied, and never will be
  kLate,       // the dataplane took it and has not finished: `late` holds it until it does
};

// Test hook (cleaved enables it with CLEAVE_TEST_HOOKS=1, see management.cc): the dataplane as
// the control path sees a stalled or descheduled lcore. kQueued: it takes no request; kAttach: it
// serves requests until it takes an app attach, then holds that one unanswered. Until kOff.
enum class CtlStall : uint8_t { kOff, kQueued, kAttach };

class CtlChannel {
 public:
  explicit CtlChannel(unsigned capacity = 64);
  CtlChannel(const CtlChannel&) = delete;
  CtlChannel& operator=(const CtlChannel&) = delete;
  ~CtlChannel();

  // Any management thread. Sends the request and waits up to `timeout` for the answer. Returns
  // the answered request, or null: the ring was full, or the dataplane did not answer in time.
  // An unanswered request not yet taken is withdrawn (never applied); one the dataplane is working
  // on is waited for once more `timeout`, and if still unfinished is kept alive until it is,
  // shared with `*late` when the caller asks for it. `*miss` (optional) says which it was.
  std::unique_ptr<CtlRequest> call(std::unique_ptr<CtlRequest> req,
                                   std::chrono::milliseconds timeout, CtlMiss* miss = nullptr,
                                   std::shared_ptr<CtlRequest>* late = nullptr);
  // Sends without waiting; the caller polls `done` on the handle. Null when the ring is full.
  std::shared_ptr<CtlRequest> post(std::unique_ptr<CtlRequest> req);

  // Dataplane lcore only. Withdrawn requests are answered here (so their owner can free them)
  // and not returned.
  unsigned take(CtlRequest** out, unsigned n);
  static void answer(CtlRequest* r) { r->done.store(true, std::memory_order_release); }

  void test_stall(CtlStall s) { stall_.store(s, std::memory_order_release); }

 private:
  static constexpr uint8_t kQueued = 0, kTaken = 1, kWithdrawn = 2;
  void reap_orphans();
  void orphan(std::shared_ptr<CtlRequest> r);
  bool wait_done(const CtlRequest& r, std::chrono::steady_clock::time_point deadline);

  rte_ring* ring_;
  std::atomic<CtlStall> stall_{CtlStall::kOff};
  std::mutex orphans_mu_;
  std::vector<std::shared_ptr<CtlRequest>> orphans_;
};

}  // namespace cleave::dp
