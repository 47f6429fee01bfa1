// app_server.h - the app control socket: apps connect, are admitted by SO_PEERCRED against the
// configured rules, get their shared region, create pipes and register memory within their quota,
// and are reclaimed whole when they go.
//
// Main thread only, in the daemon's epoll loop (like MgmtServer). Apps are untrusted: every
// message is checked for size, type, magic and arguments; a malformed message is answered with
// CL_EPROTO and the connection closed; an app that stops reading its replies is dropped. What an
// app holds is reclaimed as soon as its socket reports EOF or hangup (kill -9 included): the
// dataplane lets go of it first (CtlChannel), then memory is deregistered and unmapped.
#pragma once

#include <sys/socket.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "app_memory.h"
#include "apps.h"
#include "config.h"
#include "ctl_channel.h"
#include "heap.h"
#include "shm_abi.h"

namespace cleave::dp {

class AppServer {
 public:
  // Binds `path` (mode 0666: admission is by SO_PEERCRED, not file mode) and registers it with
  // `epoll_fd`. `ports` are DMA-mapped for every region. Throws std::runtime_error.
  AppServer(const Config& cfg, std::string path, int epoll_fd, CtlChannel& ctl,
            std::vector<uint16_t> ports);
  AppServer(const AppServer&) = delete;
  AppServer& operator=(const AppServer&) = delete;
  ~AppServer();  // tells every app the daemon is stopping, reclaims everything, removes the socket

  bool on_event(int fd, uint32_t events);
  // Periodic: apps the dataplane asked to evict, connections that never said hello.
  void on_tick();

  nlohmann::json list();             // cleavectl app list
  nlohmann::json show(uint32_t id);  // cleavectl app show ID; throws MgmtError when unknown
  size_t apps() const;
  const std::string& path() const { return path_; }

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
  };

  void accept_apps();
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
  int32_t ctl_flow(std::unique_ptr<CtlRequest> req, std::unique_ptr<CtlRequest>* answer = nullptr);
  // Queue pairs: a control request for QP `qp` of the app, and QpCreate.
  static std::unique_ptr<CtlRequest> qp_request(const Session& s, FlowOp op, uint32_t qp);
  int32_t qp_create(Session& s, const abi::QpCreate& m, abi::QpReply& out);
  bool send(Session& s, const void* msg, size_t len, int fd = -1);
  void notice(Session& s, abi::NoticeReason why);
  void close_session(int fd, const char* why);
  // Detaches from the dataplane and frees everything the app held.
  void reclaim(Session& s);
  bool ctl(std::unique_ptr<CtlRequest> req, std::unique_ptr<CtlRequest>* answer = nullptr);
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
  std::string path_;
  int epoll_fd_;
  int listen_fd_ = -1;
  CtlChannel& ctl_;
  std::vector<uint16_t> ports_;
  bool try_huge_;
  bool warned_no_huge_ = false;
  uint32_t next_id_ = 1;
  LogBudget refusals_;
  std::map<int, Session> sessions_;  // by fd
  // Memory the dataplane may still reference after a control request went unanswered: kept
  // mapped until shutdown rather than risk a use after unmap.
  std::vector<AppMemory> quarantine_;
  std::vector<int> quarantine_fds_;  // doorbells, likewise
};

}  // namespace cleave::dp
