// app_server.h - the app control socket: apps connect, are admitted by SO_PEERCRED against the
// configured rules, get their shared region, create pipes and register memory within their quota,
// and are reclaimed whole when they go.
//
// Main thread only, in the daemon's epoll loop (like MgmtServer). Apps are untrusted: every
// message is checked for size, type, magic and arguments; a malformed message is answered with
// CL_EPROTO and the connection closed; an app that stops reading its replies is dropped. What an
// app holds is reclaimed as soon as its socket reports EOF or hangup (kill -9 included): the
// dataplane lets go of it first (CtlChannel), then memory is deregistered and unmapped.
//
// Local users are untrusted too: a peer no apps.allow rule admits is refused as it connects
// (Notice kRefused, CL_EPERM), so it never holds a slot; admitted users' connections that have
// not said hello are capped in total and per uid, with the control socket's eviction rule
// (ClientTable, local_clients.h), and closed after kHelloTimeout.
//
// The dataplane may not answer in time (a stalled or descheduled lcore). A request it had not
// taken is withdrawn and the app told CL_ETIMEDOUT: nothing happened. One it took and did not
// finish leaves the app's tables unknown: the app is told CL_ETIMEDOUT and disconnected, and
// what the dataplane may still reference (an app attached after its hello gave up, an app whose
// detach is unanswered, their memory and doorbells) waits in limbo until the dataplane has
// answered; an app found attached is detached then. App ids are never reused while in limbo.
#pragma once

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "control/app_memory.h"
#include "control/local_clients.h"
#include "ctl_channel.h"
#include "heap.h"
#include "lcore/apps.h"
#include "shm_abi.h"
#include "thread_check.h"

namespace cleave::dp {

class AppServer {
 public:
  // Binds `path` (mode 0666: admission is by SO_PEERCRED, not file mode) and registers it with
  // `epoll_fd`. `ports` are DMA-mapped for every region. Throws std::runtime_error.
  AppServer(const Config& cfg, std::string path, int epoll_fd, const ShardChannels& ctl,
            std::vector<uint16_t> ports);
  AppServer(const AppServer&) = delete;
  AppServer& operator=(const AppServer&) = delete;
  ~AppServer();  // tells every app the daemon is stopping, reclaims everything, removes the socket

  bool on_event(int fd, uint32_t events);
  // Periodic: apps the dataplane asked to evict, connections that never said hello, limbo.
  void on_tick();

  nlohmann::json list();             // cleavectl app list
  nlohmann::json show(uint32_t id);  // cleavectl app show ID; throws MgmtError when unknown
  size_t apps() const;
  const std::string& path() const { return path_; }
  // The socket's limits and counters for status; safe from any thread while the server lives.
  nlohmann::json stats() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct PipeInfo {
    abi::PipeKind kind{};
    uint32_t entries = 0;
    uint64_t offset = 0;
    uint32_t cq = 0;
    int doorbell_fd = -1;
  };
  struct MrInfo {
    AppMemory mem;
    uint32_t access = 0;
  };
  struct Session {
    int fd = -1;
    ucred cred{};
    const AppRule* rule = nullptr;  // null: not admitted
    uint32_t id = 0;                // 0 until hello succeeded
    uint16_t shard = 0;             // the dataplane shard that serves its pipes and flows
    std::string name;
    uint16_t version = 0;
    Clock::time_point connected;
    AppMemory region;
    uint64_t heap_offset = 0;
    uint64_t heap_size = 0;
    ipc::Heap pipe_area;  // offsets from kRegionHeaderSize
    std::map<uint32_t, PipeInfo> pipes;
    std::map<uint32_t, MrInfo> mrs;
    uint64_t memory = 0;        // region + MRs
    std::unique_ptr<DpApp> dp;  // the dataplane's copy, attached while id != 0
    // A request the dataplane took did not finish in time: what it may reference is kept until
    // the app is detached, and the app is disconnected once told.
    bool lost_sync = false;
    std::vector<AppMemory> held;
    std::vector<int> held_fds;
  };
  // An app the dataplane may hold that no session does (see the top of this file).
  struct Limbo {
    uint32_t id = 0;
    uint16_t shard = 0;
    std::shared_ptr<CtlRequest> pending;  // the late attach or the detach in flight; null: a
                                          // detach to send
    bool attach = false;                  // `pending` is the late attach
    std::unique_ptr<DpApp> dp;
    std::vector<AppMemory> memory;
    std::vector<int> fds;
  };
  // What became of a control request.
  enum class Ctl : uint8_t {
    kApplied,    // answered, and done
    kRefused,    // answered: the dataplane said no
    kWithdrawn,  // unanswered, withdrawn before the dataplane took it: nothing happened
    kLate,       // taken, unfinished: the outcome comes later
  };

  void accept_apps();
  // Best effort: why the connection is not served (Notice kRefused), before it is closed.
  void send_refusal(int fd, int32_t status);
  void on_message(Session& s);
  // Each returns the reply status; a reply message is filled in `out`.
  int32_t hello(Session& s, const abi::Hello& m, abi::HelloReply& out);
  int32_t pipe_create(Session& s, const abi::PipeCreate& m, int fd,
                      abi::PipeReply& out);  // takes fd
  int32_t pipe_destroy(Session& s, const abi::PipeDestroy& m);
  int32_t mr_reg(Session& s, const abi::MrReg& m, int fd, abi::MrReply& out);
  int32_t mr_dereg(Session& s, const abi::MrDereg& m);
  // Listen and connect (the same message layout): the dataplane opens it; the id out.
  int32_t flow_open(Session& s, const abi::FlowOpen& m, bool listen, uint32_t& id);
  // Tells every other shard that the app's listener `id` on its shard listens on (ip, port) of
  // IP protocol `proto` (ListenShare), so they hand it the frames they receive for it; undoes what
  // it did and returns the refusal when one cannot. unshare_listener: no longer (kNoFlow: none of
  // the app's); best effort, logged.
  int32_t share_listener(Session& s, uint32_t id, uint32_t ip, uint16_t port, uint8_t proto);
  void unshare_listener(uint32_t app, uint16_t shard, uint32_t id);
  // The shard with the fewest apps, for a new one.
  uint16_t pick_shard() const;
  int32_t ctl_flow(Session& s, std::unique_ptr<CtlRequest> req,
                   std::unique_ptr<CtlRequest>* answer = nullptr);
  int32_t qp_create(Session& s, const abi::QpCreate& m, abi::QpReply& out);
  bool send(Session& s, const void* msg, size_t len, int fd = -1);
  void notice(Session& s, abi::NoticeReason why);
  void close_session(int fd, const char* why);
  // Detaches from the dataplane and frees everything the app held (or leaves it in limbo).
  void reclaim(Session& s);
  // Sends a request and waits (kCtlTimeout). `answer` gets the answered request; `late`, when
  // given, the request of a kLate outcome.
  Ctl ctl(uint16_t shard, std::unique_ptr<CtlRequest> req,
          std::unique_ptr<CtlRequest>* answer = nullptr,
          std::shared_ptr<CtlRequest>* late = nullptr);
  // The outcome of a request on a live app: kLate marks the session lost (disconnected after its
  // reply) and keeps `memory` and `fd` with it. The status for the app: 0, `refused`, or
  // CL_ETIMEDOUT.
  int32_t app_ctl(Session& s, std::unique_ptr<CtlRequest> req, int32_t refused,
                  std::unique_ptr<CtlRequest>* answer = nullptr, AppMemory* memory = nullptr,
                  int fd = -1);
  // Limbo: detaches what turned out attached, frees what the dataplane let go of.
  void settle();
  nlohmann::json describe(const Session& s, const AppCounters* c, bool detail) const;
  std::map<uint32_t, AppCounters> counters();

  // Refusals and protocol errors are logged at most 10 per 10 s, so a local user cannot flood
  // the journal by connecting in a loop; the rest are counted and summarised.
  struct LogBudget {
    Clock::time_point window_start{};
    unsigned logged = 0;
    uint64_t suppressed = 0;
    bool take();
  };

  const Config& cfg_;
  ThreadOwner main_{"main"};  // bound when made: the socket's events are the main thread's
  std::string path_;
  int epoll_fd_;
  int listen_fd_ = -1;
  const ShardChannels& ctl_;
  std::vector<uint16_t> ports_;
  bool try_huge_;
  bool warned_no_huge_ = false;
  uint32_t next_id_ = 1;
  LogBudget refusals_;
  std::map<int, Session> sessions_;  // by fd
  ClientTable pending_;              // sessions that have not said hello
  std::vector<Limbo> limbo_;
  ClientCounters counters_;                  // of pending connections
  std::atomic<uint64_t> apps_{0};            // admitted now
  std::atomic<uint64_t> refused_uid_{0};     // no apps.allow rule admits the uid
  std::atomic<uint64_t> hello_timeouts_{0};  // pending connections that never said hello
  std::atomic<uint64_t> ctl_timeouts_{0};    // requests the dataplane did not answer in time
  std::atomic<uint64_t> limbo_count_{0};     // apps in limbo now
  std::atomic<uint64_t> late_attached_{0};   // attaches found applied after they timed out
};

}  // namespace cleave::dp
