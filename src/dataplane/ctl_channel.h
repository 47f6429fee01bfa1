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
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "fault_params.h"
#include "flow_info.h"
#include "lcore/apps.h"
#include "lcore/arp.h"
#include "net.h"
#include "shm_abi.h"
#include "stats.h"

struct rte_ring;

namespace cleave::dp {

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

// One type per request (namespace ctl): what the requester asks, and the answer the dataplane
// writes into it. The requester reserves the room an answer needs (vectors' capacity); the
// dataplane fills up to it and never allocates, except for management's flow list.
namespace ctl {

// Every counter.
struct Stats {
  DataplaneStats stats;
};

// The neighbour cache, up to rows' capacity.
struct ArpTable {
  std::vector<ArpRow> rows;
  bool truncated = false;
};

// The route and next hop for `addr`, resolving the next hop's MAC.
struct RouteGet {
  Ipv4 addr;
  RouteAnswer route;
};

// One port's NIC backend and counters (up to counters' capacity; `truncated` says some did not
// fit). When fault_dirs is not 0 (bit 1 << FaultDir each) it first sets the port's wire faults
// to `fault`: fault_status is 0 or the NIC's negative errno. `faults` are those in force either
// way.
struct Nic {
  uint8_t port = 0;
  uint8_t fault_dirs = 0;
  FaultParams fault;
  bool found = false;
  uint8_t backend = 0;  // NicBackend
  std::vector<NicCounterRow> counters;
  bool truncated = false;
  int fault_status = 0;
  std::array<FaultParams, kFaultDirs> faults{};
};

// App table updates, built by the main thread (apps.h); `ok` says whether one applied.
struct AppUpdate {
  bool ok = false;
};
struct AppAttach : AppUpdate {
  DpApp* app = nullptr;
};
// Hands the app back in `app` for the main thread to free.
struct AppDetach : AppUpdate {
  uint32_t app_id = 0;
  DpApp* app = nullptr;
};
// An MR slot: length 0 removes it; `mr` comes back with its rkey.
struct AppSetMr : AppUpdate {
  uint32_t app_id = 0;
  uint32_t index = 0;
  DpMr mr;
};
struct AppSetPipe : AppUpdate {
  uint32_t app_id = 0;
  uint32_t index = 0;
  DpPipe pipe;
};
// Every app's counters, up to rows' capacity.
struct AppCountersList : AppUpdate {
  std::vector<AppCountersRow> rows;
};

// Flow requests (flows.h): `status` is 0 or a negative CL_E* code.
struct FlowAnswer {
  int32_t status = 0;
};
// An app's listen or connect: `transport` "" is the default; `message`: message mode (the
// transport's "message on"). `id` (the listener or the flow) out.
struct FlowOpen : FlowAnswer {
  uint32_t app_id = 0;
  uint16_t cq = 0;
  uint32_t ip = 0;  // host order; listen: 0 for any of ours
  uint16_t port = 0;
  std::string transport;
  bool message = false;
  uint32_t id = 0;
  uint8_t proto = 0;  // out, listen: the IP protocol the listener takes (its transport's claim's)
};
struct Listen : FlowOpen {};
struct Connect : FlowOpen {};
struct Unlisten : FlowAnswer {
  uint32_t app_id = 0;
  uint32_t listener = 0;
};
// To every shard but the listener's: listener `listener` of app `app_id` on shard `shard` listens
// on (ip, port) of IP protocol `proto` (add), or no longer (with listener kNoFlow: none of the
// app's do).
// FlowPath::listen_remote.
struct ListenShare : FlowAnswer {
  bool add = true;
  uint32_t app_id = 0;
  uint16_t shard = 0;
  uint32_t listener = 0;
  uint32_t ip = 0;
  uint16_t port = 0;
  uint8_t proto = 6;
};
// Management's list, one page per request so the lcore's time on it is bounded: one flow
// (`only`), or the rows from position `start` on (listeners, then flows), at most
// min(max_rows, kFlowListPageRows) of them, kFlowListPageScan table slots looked at and about
// `budget_us` spent (a row is begun only before then; a page has one at least); `next`
// says where the following page starts (kNoFlow: none). With `meta`, the page also has the
// transports instantiated with their counters and the operator's bindings (the dataplane
// allocates: management only).
inline constexpr uint32_t kFlowListPageRows = 256;
inline constexpr uint32_t kFlowListPageScan = 4096;
inline constexpr uint32_t kFlowListPageUs = 20;
struct FlowList : FlowAnswer {
  uint32_t only = 0;
  uint32_t start = 0;
  uint32_t max_rows = kFlowListPageRows;
  uint32_t budget_us = kFlowListPageUs;
  bool meta = false;
  uint32_t next = transport::kNoFlow;  // out
  std::vector<FlowRow> rows;
  std::vector<std::string> transports;
  std::vector<TransportStats> transport_stats;  // in the transports' order
  std::vector<FlowBinding> bindings;
};
// An operator binding attached (`binding` comes back as kept) or detached (by its key; the one
// removed comes back); `error` says why not.
struct BindingChange : FlowAnswer {
  FlowBinding binding;
  std::string error;
};
struct BindingAttach : BindingChange {};
struct BindingDetach : BindingChange {};
// Queue pairs: an app's, by its id (`qp`).
struct QpCreate : FlowAnswer {
  uint32_t app_id = 0;
  uint16_t cq = 0;
  uint32_t send_wr = 0;
  uint32_t recv_wr = 0;
  std::string params;
  uint32_t qp = 0;  // out, with qpn, ip, max_pmtu
  uint32_t qpn = 0;
  uint32_t ip = 0;
  uint32_t max_pmtu = 0;
};
struct QpModify : FlowAnswer {
  uint32_t app_id = 0;
  uint32_t qp = 0;
  abi::QpAttr attr{};
  uint32_t mask = 0;
};
struct QpQuery : FlowAnswer {
  uint32_t app_id = 0;
  uint32_t qp = 0;
  abi::QpAttr attr{};  // out
};
struct QpDestroy : FlowAnswer {
  uint32_t app_id = 0;
  uint32_t qp = 0;
};

using Body =
    std::variant<Stats, ArpTable, RouteGet, Nic, AppAttach, AppDetach, AppSetMr, AppSetPipe,
                 AppCountersList, Listen, Connect, Unlisten, ListenShare, FlowList, BindingAttach,
                 BindingDetach, QpCreate, QpModify, QpQuery, QpDestroy>;

}  // namespace ctl

// A request on the channel: its body, and what the channel needs to hand it over.
struct CtlRequest {
  CtlRequest() = default;
  explicit CtlRequest(ctl::Body b) : body(std::move(b)) {}
  template <class T>
  static std::unique_ptr<CtlRequest> make(T b) {
    return std::make_unique<CtlRequest>(ctl::Body(std::move(b)));
  }

  // The body as the request it is (the caller knows; another type is a bug and aborts).
  template <class T>
  T& as() noexcept {
    T* b = std::get_if<T>(&body);
    if (b == nullptr) std::abort();
    return *b;
  }
  template <class T>
  const T& as() const noexcept {
    const T* b = std::get_if<T>(&body);
    if (b == nullptr) std::abort();
    return *b;
  }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(body);
  }
  // A flow request, and its status; an app table update, and whether it applied.
  bool is_flow() const noexcept { return base<ctl::FlowAnswer>() != nullptr; }
  int32_t flow_status() const noexcept {
    const ctl::FlowAnswer* b = base<ctl::FlowAnswer>();
    return b != nullptr ? b->status : 0;
  }
  bool app_ok() const noexcept {
    const ctl::AppUpdate* b = base<ctl::AppUpdate>();
    return b != nullptr && b->ok;
  }

  ctl::Body body;
  uint64_t tsc_hz = 0;  // answer: the dataplane's TSC rate, for cycle counts in answers

  std::atomic<bool> done{false};
  // Who has the request: CtlChannel's business (kQueued, kTaken by the dataplane, or kWithdrawn by
  // a requester that stopped waiting before the dataplane took it).
  std::atomic<uint8_t> claim{0};

 private:
  // The body as a `Base` when its type derives from it, else nullptr; never throws (std::visit
  // may, on a valueless variant).
  template <class Base>
  const Base* base() const noexcept {
    const Base* out = nullptr;
    [&]<size_t... I>(std::index_sequence<I...>) {
      ((body.index() == I ? (out = base_of<Base>(std::get_if<I>(&body))) : nullptr), ...);
    }
    (std::make_index_sequence<std::variant_size_v<ctl::Body>>{});
    return out;
  }
  template <class Base, class T>
  static const Base* base_of(const T* b) noexcept {
    if constexpr (std::is_base_of_v<Base, T>) {
      return b;
    } else {
      return nullptr;
    }
  }
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

// The channels to every shard's dataplane, by shard index (dataplane.lcores' order). Requests
// that concern one app go to its shard's; ARP, routes, bindings and management go to every one,
// and their answers are summed or merged by the requester.
class ShardChannels {
 public:
  explicit ShardChannels(size_t shards) {
    for (size_t i = 0; i < shards; i++)
      chans_.push_back(std::make_unique<CtlChannel>());
  }
  size_t size() const { return chans_.size(); }
  CtlChannel& operator[](size_t shard) const { return *chans_[shard]; }
  void test_stall(CtlStall s) const {
    for (const auto& c : chans_)
      c->test_stall(s);
  }

 private:
  std::vector<std::unique_ptr<CtlChannel>> chans_;
};

}  // namespace cleave::dp
