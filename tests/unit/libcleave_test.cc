// libcleave_test.cc - libcleave against a fake daemon: open, heap, MRs, queues, post/poll round
// trips, library-side validation, flows (listen, connect, flow requests, events), queue pairs
// (create, modify, query, connect, the entries their work requests make, cl_qp_exchange over a
// socketpair), and a daemon that dies, stalls or evicts the app.
//
// FakeDaemon is a stand-in for cleaved that speaks the app socket protocol of shm_abi.h from a
// thread: it creates a real memfd region, answers Hello/PipeCreate/MrReg/Listen/Connect/..., and
// plays the dataplane on the pipes (NOP, COPY and SEND done simply; flows as a scripted peer that
// acknowledges every send, fills every receive buffer and closes when asked), so no DPDK is
// needed. Test controls
// (any thread): kill() closes everything as a crashed daemon would; evict() and shutdown() send a
// Notice first; stall_on and notice_on make the next request of a type go unanswered (then the
// daemon dies) or be answered with a notice.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cleave/cleave.h"
#include "pipe.h"
#include "shm_abi.h"

namespace cleave::test {

struct FakeOptions {
  uint16_t min_version = abi::kAbiMinVersion;
  uint16_t max_version = abi::kAbiVersion;
  int32_t hello_status = 0;  // e.g. CL_EPERM: refuse the app
  uint64_t pipe_area = 1u << 20;
  uint64_t heap = 1u << 20;
  uint32_t pipe_entries_quota = 1u << 16;
};

class FakeDaemon {
 public:
  explicit FakeDaemon(FakeOptions o = {}) : o_(o) {
    static std::atomic<int> n{0};
    path_ = "/tmp/cleave-fake-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".sock";
    unlink(path_.c_str());
    lfd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path_.c_str());
    if (bind(lfd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(lfd_, 8) != 0)
      std::abort();
    thread_ = std::thread([this] { run(); });
  }
  ~FakeDaemon() {
    stop_ = true;
    thread_.join();
    close_conn();
    if (lfd_ >= 0) close(lfd_);
    close(stray_);
    unlink(path_.c_str());
    for (auto& [id, m] : mrs_)
      munmap(m.base, m.length);
    if (region_ != nullptr) munmap(region_, region_size_);
    if (region_fd_ >= 0) close(region_fd_);
  }

  const std::string& path() const { return path_; }
  void kill() { cmd_ = kKill; }
  void evict() { cmd_ = kEvict; }
  void shutdown() { cmd_ = kShutdown; }
  // True once the thread has acted on kill()/evict()/shutdown().
  bool dead() const { return dead_; }

  std::atomic<uint16_t> stall_on{0};   // MsgType: leave it unanswered, then die 200 ms later
  std::atomic<uint16_t> notice_on{0};  // MsgType: answer it with an eviction notice
  std::atomic<uint16_t> ignore_on{0};  // MsgType: never answer it, stay connected (a hung daemon)
  std::atomic<bool> pump{true};        // play the dataplane on the pipes
  // Misbehaviour: replies with the wrong seq, pipes placed outside the pipe area, stray fds.
  std::atomic<bool> wrong_seq{false}, bad_pipe_offset{false}, extra_fds{false};
  std::atomic<int> live_pipes{0}, live_mrs{0};
  std::atomic<bool> mrs_busy{false};  // refuse MrDereg with CL_EBUSY (flows still use the MR)
  std::atomic<uint64_t> entries_seen{0};
  std::atomic<int> unsealed_mrs{0};  // MrReg fds that came without F_SEAL_SHRINK

  // Flows. The fake refuses connections to kRefusedPort, and fills receive buffers with
  // flow_byte(stream offset).
  static constexpr uint16_t kRefusedPort = 1;
  static uint8_t flow_byte(uint64_t off) { return static_cast<uint8_t>(off * 13 + 5); }
  std::atomic<int> flow_msgs{0};  // Listen, Unlisten and Connect messages received
  // What arrived, for the test to read (under rec_mu).
  std::mutex rec_mu;
  std::vector<abi::Listen> listens;
  std::vector<abi::Connect> connects;
  std::vector<abi::SendEntry> flow_entries;
  std::vector<uint32_t> listen_cq_kinds;  // PipeKind of the pipe each Listen/Connect named
  // Queues a completion for the fake's thread to write into completion pipe `cq`.
  void inject(uint32_t cq, const abi::Completion& c) {
    std::lock_guard lk(rec_mu);
    injected_.emplace_back(cq, c);
  }
  // Held receives (for receive rings): while set, CL_OP_FLOW_RECV buffers are kept, as TCP keeps
  // them, and filled only by the scripted peer below, which completes them as the TCP transport
  // does: full buffers first, then one data event for the burst's growth; at the peer's FIN a
  // peer-closed event, then every held buffer back with what it holds (the partial one short,
  // the rest empty), and later receives at once and empty; at a reset every held buffer back
  // (status CL_ECONNRESET if empty), then closed with CL_ECONNRESET.
  std::atomic<bool> hold_recvs{false};
  std::atomic<bool> data_event_first{false};  // the data event before the completions
  enum class Peer { kData, kFin, kReset, kClose };
  void peer(uint32_t flow, Peer what, uint64_t bytes = 0) {
    std::lock_guard lk(rec_mu);
    peer_script_.push_back({flow, what, bytes});
  }
  // Queue pairs (version 3): QpCreate gets a QP (a flow id from the flows' counter, QPN
  // kQpnBase + n, GID kDaemonIp) in RESET; QpModify stores the masked fields; QpQuery reads
  // them back. Requests on a QP complete at once on its CQ (length as posted); its receives are
  // recorded in flow_entries and kept. MrReply carries kRkeyTag << 16 | id for an MR with remote
  // access, whatever version was agreed (a daemon before 3 sent whatever was in the field).
  static constexpr uint32_t kQpnBase = 0x1200;
  static constexpr uint32_t kDaemonIp = 0xc6120001;  // 198.18.0.1
  static constexpr uint32_t kRkeyTag = 0x5a;
  std::atomic<int> qp_msgs{0}, live_qps{0};
  std::atomic<int32_t> qp_create_status{0};   // e.g. CL_ENOSPC: refuse QpCreate
  std::atomic<uint32_t> max_pmtu{4096};       // QpReply::max_pmtu
  std::vector<abi::QpCreate> qp_creates;      // under rec_mu
  std::vector<abi::QpModify> qp_modifies;     // under rec_mu
  std::vector<abi::PipeCreate> pipe_creates;  // under rec_mu
  // A peer connects to `listener`: the fake makes a flow and reports it as accepted.
  void accept_on(uint32_t listener) {
    std::lock_guard lk(rec_mu);
    accepts_.push_back(listener);
  }

 private:
  enum Cmd { kNone, kKill, kEvict, kShutdown };
  struct Pipe {
    abi::PipeKind kind;
    uint32_t entries;
    uint32_t cq;
    int efd = -1;
    ipc::PipeConsumer<abi::SendEntry> sq;
    ipc::PipeConsumer<abi::RecvEntry> rq;
    ipc::PipeProducer<abi::Completion> cq_prod;
  };
  struct Mr {
    uint8_t* base;
    uint64_t length;
    uint32_t access;
  };
  struct Held {
    uint8_t* dst;
    uint32_t len;
    uint32_t filled;
    uint64_t wr_id;
  };
  struct Flow {
    uint32_t cq;
    uint64_t rx_offset = 0;  // stream bytes delivered into receive buffers so far
    std::deque<Held> held;
    bool fin = false;
  };
  struct PeerStep {
    uint32_t flow;
    Peer what;
    uint64_t bytes;
  };

  void run() {
    while (!stop_) {
      if (int c = cmd_.exchange(kNone); c != kNone) {
        if (c != kKill && cfd_ >= 0)
          send_notice(c == kEvict ? abi::NoticeReason::kEvicted : abi::NoticeReason::kShutdown);
        die();
      }
      if (stall_deadline_.time_since_epoch().count() != 0 &&
          std::chrono::steady_clock::now() >= stall_deadline_) {
        stall_deadline_ = {};
        die();
      }
      bool worked = pump && cfd_ >= 0 && run_pipes();
      pollfd fds[2] = {{lfd_, POLLIN, 0}, {cfd_, POLLIN, 0}};
      int r = poll(fds, 2, worked ? 0 : 1);
      if (r <= 0) continue;
      if (lfd_ >= 0 && (fds[0].revents & POLLIN)) {
        int c = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c >= 0 && cfd_ >= 0)
          close(c);  // one app at a time
        else if (c >= 0)
          cfd_ = c;
      }
      if (cfd_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) serve();
    }
  }

  void die() {
    close_conn();
    if (lfd_ >= 0) close(lfd_);
    lfd_ = -1;
    dead_ = true;
  }
  void close_conn() {
    if (cfd_ >= 0) close(cfd_);
    cfd_ = -1;
    for (auto& [id, p] : pipes_)
      if (p.efd >= 0) close(p.efd);
    pipes_.clear();
    live_pipes = 0;
    listeners_.clear();
    flows_.clear();
    qps_.clear();
    live_qps = 0;
  }

  // Sends one message with `fd` (if any) and, in extra_fds mode, two stray descriptors more.
  void send_msg(const void* m, size_t len, int fd = -1) {
    iovec iov{const_cast<void*>(m), len};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 3)] = {};
    int fds[3];
    int nfds = 0;
    if (fd >= 0) fds[nfds++] = fd;
    if (extra_fds) {
      fds[nfds++] = stray_;
      fds[nfds++] = stray_;
    }
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    if (nfds != 0) {
      h.msg_control = cbuf;
      h.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
      cmsghdr* c = CMSG_FIRSTHDR(&h);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
      std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    sendmsg(cfd_, &h, MSG_NOSIGNAL);
  }
  void send_notice(abi::NoticeReason why) {
    abi::Notice n{};
    n.h = {abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(abi::MsgType::kNotice), 0, 0};
    n.reason = static_cast<uint32_t>(why);
    send_msg(&n, sizeof n);
  }
  template <class R>
  void reply(R& r, const abi::MsgHeader& req, abi::MsgType t, int32_t status, int fd = -1) {
    r.h = {abi::kMagic, req.version, static_cast<uint16_t>(t), req.seq, status};
    if (wrong_seq) r.h.seq++;
    send_msg(&r, sizeof r, fd);
  }

  void serve() {
    alignas(8) unsigned char buf[abi::kMaxMessage];
    iovec iov{buf, sizeof buf};
    alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = cbuf;
    m.msg_controllen = sizeof cbuf;
    ssize_t n = recvmsg(cfd_, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN)) {  // the app left: reclaim
      close_conn();
      for (auto& [id, mr] : mrs_)
        munmap(mr.base, mr.length);
      mrs_.clear();
      live_mrs = 0;
      return;
    }
    if (n < 0) return;
    int fd = -1;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c != nullptr; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    abi::MsgHeader h;
    std::memcpy(&h, buf, sizeof h);
    if (stall_on != 0 && h.type == stall_on) {
      stall_on = 0;
      stall_deadline_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
      if (fd >= 0) close(fd);
      return;
    }
    if (ignore_on != 0 && h.type == ignore_on) {
      if (fd >= 0) close(fd);
      return;
    }
    if (notice_on != 0 && h.type == notice_on) {
      send_notice(abi::NoticeReason::kEvicted);
      die();
      if (fd >= 0) close(fd);
      return;
    }
    switch (static_cast<abi::MsgType>(h.type)) {
      case abi::MsgType::kHello: {
        abi::Hello req;
        std::memcpy(&req, buf, sizeof req);
        hello(req);
        break;
      }
      case abi::MsgType::kPipeCreate: {
        abi::PipeCreate req;
        std::memcpy(&req, buf, sizeof req);
        pipe_create(req, fd);
        fd = -1;
        break;
      }
      case abi::MsgType::kPipeDestroy: {
        abi::PipeDestroy req;
        std::memcpy(&req, buf, sizeof req);
        abi::Reply r{};
        auto it = pipes_.find(req.pipe);
        if (it != pipes_.end()) {
          if (it->second.efd >= 0) close(it->second.efd);
          pipes_.erase(it);
          live_pipes--;
        }
        reply(r, req.h, abi::MsgType::kReply, it != pipes_.end() ? 0 : CL_ENOENT);
        break;
      }
      case abi::MsgType::kMrReg: {
        abi::MrReg req;
        std::memcpy(&req, buf, sizeof req);
        mr_reg(req, fd);
        break;
      }
      case abi::MsgType::kMrDereg: {
        abi::MrDereg req;
        std::memcpy(&req, buf, sizeof req);
        abi::Reply r{};
        auto it = mrs_.find(req.mr);
        bool found = it != mrs_.end();
        if (found && mrs_busy) {
          reply(r, req.h, abi::MsgType::kReply, CL_EBUSY);
          break;
        }
        if (found) {
          munmap(it->second.base, it->second.length);
          mrs_.erase(it);
          live_mrs--;
        }
        reply(r, req.h, abi::MsgType::kReply, found ? 0 : CL_ENOENT);
        break;
      }
      case abi::MsgType::kListen: {
        abi::Listen req;
        std::memcpy(&req, buf, sizeof req);
        on_listen(req);
        break;
      }
      case abi::MsgType::kUnlisten: {
        abi::Unlisten req;
        std::memcpy(&req, buf, sizeof req);
        flow_msgs++;
        bool found = listeners_.erase(req.listener) != 0;
        abi::Reply r{};
        reply(r, req.h, abi::MsgType::kReply, found ? 0 : CL_ENOENT);
        break;
      }
      case abi::MsgType::kConnect: {
        abi::Connect req;
        std::memcpy(&req, buf, sizeof req);
        on_connect(req);
        break;
      }
      case abi::MsgType::kQpCreate: {
        abi::QpCreate req;
        std::memcpy(&req, buf, sizeof req);
        qp_create(req);
        break;
      }
      case abi::MsgType::kQpModify: {
        abi::QpModify req;
        std::memcpy(&req, buf, sizeof req);
        qp_modify(req);
        break;
      }
      case abi::MsgType::kQpQuery:
      case abi::MsgType::kQpDestroy: {
        abi::QpId req;
        std::memcpy(&req, buf, sizeof req);
        qp_id(req);
        break;
      }
      default: {
        abi::Reply r{};
        reply(r, h, abi::MsgType::kReply, CL_EPROTO);
      }
    }
    if (fd >= 0) close(fd);
  }

  uint32_t pipe_kind(uint32_t id) const {
    auto it = pipes_.find(id);
    return it != pipes_.end() ? static_cast<uint32_t>(it->second.kind) : 0;
  }

  void on_listen(const abi::Listen& req) {
    flow_msgs++;
    {
      std::lock_guard lk(rec_mu);
      listens.push_back(req);
      listen_cq_kinds.push_back(pipe_kind(req.cq));
    }
    abi::ListenReply r{};
    for (auto& [id, l] : listeners_)
      if (l.port == req.port) {
        reply(r, req.h, abi::MsgType::kListenReply, CL_EADDRINUSE);
        return;
      }
    r.id = next_listener_++;
    listeners_[r.id] = {req.port, req.cq};
    reply(r, req.h, abi::MsgType::kListenReply, 0);
  }

  // The reply names the flow at once; the outcome follows as an event on the flow's CQ.
  void on_connect(const abi::Connect& req) {
    flow_msgs++;
    {
      std::lock_guard lk(rec_mu);
      connects.push_back(req);
      listen_cq_kinds.push_back(pipe_kind(req.cq));
    }
    abi::ConnectReply r{};
    r.id = next_flow_++;
    reply(r, req.h, abi::MsgType::kConnectReply, 0);
    abi::Completion c{};
    c.flags = abi::kCompEvent;
    c.flow = r.id;
    if (req.port == kRefusedPort) {
      c.opcode = abi::kEvRefused;
      c.status = CL_ECONNREFUSED;
    } else {
      c.opcode = abi::kEvConnected;
      flows_[r.id] = {req.cq};
    }
    produce(req.cq, c);
  }

  void qp_create(const abi::QpCreate& req) {
    qp_msgs++;
    {
      std::lock_guard lk(rec_mu);
      qp_creates.push_back(req);
    }
    abi::QpReply r{};
    if (int32_t st = qp_create_status) {
      reply(r, req.h, abi::MsgType::kQpReply, st);
      return;
    }
    r.qp = next_flow_++;
    r.qpn = kQpnBase + static_cast<uint32_t>(qps_.size());
    r.ip = kDaemonIp;
    r.max_pmtu = max_pmtu;
    qps_[r.qp] = {req.cq, {}};
    live_qps++;
    reply(r, req.h, abi::MsgType::kQpReply, 0);
  }

  void qp_modify(const abi::QpModify& req) {
    qp_msgs++;
    {
      std::lock_guard lk(rec_mu);
      qp_modifies.push_back(req);
    }
    abi::Reply r{};
    auto it = qps_.find(req.qp);
    if (it == qps_.end()) {
      reply(r, req.h, abi::MsgType::kReply, CL_ENOENT);
      return;
    }
    abi::QpAttr& a = it->second.attr;
    const abi::QpAttr& n = req.attr;
    auto set = [&](uint32_t bit, auto member) {
      if ((req.mask & bit) != 0) a.*member = n.*member;
    };
    set(abi::kQpAttrState, &abi::QpAttr::state);
    set(abi::kQpAttrPmtu, &abi::QpAttr::pmtu);
    set(abi::kQpAttrDestQpn, &abi::QpAttr::dest_qpn);
    set(abi::kQpAttrRqPsn, &abi::QpAttr::rq_psn);
    set(abi::kQpAttrSqPsn, &abi::QpAttr::sq_psn);
    set(abi::kQpAttrTimeout, &abi::QpAttr::timeout);
    set(abi::kQpAttrRetryCnt, &abi::QpAttr::retry_cnt);
    set(abi::kQpAttrRnrRetry, &abi::QpAttr::rnr_retry);
    set(abi::kQpAttrMinRnrTimer, &abi::QpAttr::min_rnr_timer);
    set(abi::kQpAttrMaxRdAtomic, &abi::QpAttr::max_rd_atomic);
    set(abi::kQpAttrMaxDestRdAtomic, &abi::QpAttr::max_dest_rd_atomic);
    set(abi::kQpAttrAccess, &abi::QpAttr::access);
    set(abi::kQpAttrSelectiveRepeat, &abi::QpAttr::selective_repeat);
    set(abi::kQpAttrRateLimit, &abi::QpAttr::rate_limit_kbps);
    set(abi::kQpAttrRemoteIp, &abi::QpAttr::remote_ip);
    reply(r, req.h, abi::MsgType::kReply, 0);
  }

  void qp_id(const abi::QpId& req) {
    qp_msgs++;
    auto it = qps_.find(req.qp);
    if (req.h.type == static_cast<uint16_t>(abi::MsgType::kQpQuery)) {
      abi::QpQueryReply r{};
      if (it != qps_.end()) r.attr = it->second.attr;
      reply(r, req.h, abi::MsgType::kQpQueryReply, it != qps_.end() ? 0 : CL_ENOENT);
      return;
    }
    abi::Reply r{};
    if (it != qps_.end()) {
      qps_.erase(it);
      live_qps--;
    }
    reply(r, req.h, abi::MsgType::kReply, it != qps_.end() ? 0 : CL_ENOENT);
  }

  // A QP's request: recorded; sends, writes and reads complete at once on the QP's CQ.
  void qp_request(const abi::SendEntry& e, uint32_t cq) {
    {
      std::lock_guard lk(rec_mu);
      flow_entries.push_back(e);
    }
    if (e.opcode == abi::kOpFlowRecv) return;
    abi::Completion c{};
    c.wr_id = e.wr_id;
    c.opcode = e.opcode;
    c.flow = e.target;
    c.length = e.length;
    produce(cq, c);
  }

  // Writes one completion into pipe `cq` if it has room (the tests keep far below the size).
  void produce(uint32_t cq, const abi::Completion& c) {
    auto it = pipes_.find(cq);
    if (it == pipes_.end() || it->second.kind != abi::PipeKind::kCompletion) return;
    if (it->second.cq_prod.produce(&c, 1) == 1) rung_.push_back(cq);
  }

  // The flows' peer: every send acknowledged whole, every receive buffer filled whole (half of
  // it reported by a data event first), a close answered by the peer's close. Sends and
  // receives complete on the flow's CQ; close, abort and refusals on the submit queue's.
  void flow_request(const abi::SendEntry& e, uint32_t submit_cq) {
    {
      std::lock_guard lk(rec_mu);
      flow_entries.push_back(e);
    }
    abi::Completion c{};
    c.wr_id = e.wr_id;
    c.opcode = e.opcode;
    c.flow = e.target;
    auto f = flows_.find(e.target);
    if (f == flows_.end()) {  // refused outright: on the submit pipe's CQ
      c.status = CL_ENOENT;
      produce(submit_cq, c);
      return;
    }
    uint32_t cq = f->second.cq;
    abi::Completion ev{};
    ev.flags = abi::kCompEvent;
    ev.flow = e.target;
    switch (e.opcode) {
      case abi::kOpFlowSend:
        c.length = e.length;
        produce(cq, c);
        break;
      case abi::kOpFlowRecv: {
        uint8_t* dst = resolve(e.mr, e.offset, e.length, abi::kAccessWrite);
        if (dst == nullptr) {
          c.status = CL_EFAULT;
          produce(cq, c);
          break;
        }
        if (hold_recvs) {
          if (f->second.fin) {  // after the FIN: back at once, empty
            produce(cq, c);
          } else {
            f->second.held.push_back({dst, e.length, 0, e.wr_id});
          }
          break;
        }
        for (uint32_t i = 0; i < e.length; i++)
          dst[i] = flow_byte(f->second.rx_offset + i);
        f->second.rx_offset += e.length;
        ev.opcode = abi::kEvData;
        ev.length = e.length / 2;
        produce(cq, ev);
        c.length = e.length;
        produce(cq, c);
        break;
      }
      case abi::kOpFlowClose:  // completes at once on the submit queue's CQ, events follow
        produce(submit_cq, c);
        ev.opcode = abi::kEvPeerClosed;
        produce(cq, ev);
        ev.opcode = abi::kEvClosed;
        produce(cq, ev);
        flows_.erase(f);
        break;
      case abi::kOpFlowAbort:
        produce(submit_cq, c);
        ev.opcode = abi::kEvClosed;
        ev.status = CL_ECONNRESET;
        produce(cq, ev);
        flows_.erase(f);
        break;
      default:
        c.status = CL_EOPNOTSUPP;
        produce(submit_cq, c);
    }
  }

  // Accepts and injected completions the test asked for, on the fake's own thread (the pipes'
  // producer side is single-threaded).
  bool run_script() {
    std::vector<std::pair<uint32_t, abi::Completion>> inj;
    std::vector<uint32_t> acc;
    std::vector<PeerStep> steps;
    {
      std::lock_guard lk(rec_mu);
      inj.swap(injected_);
      acc.swap(accepts_);
      steps.swap(peer_script_);
    }
    for (const PeerStep& s : steps)
      peer_step(s);
    for (auto& [cq, c] : inj)
      produce(cq, c);
    for (uint32_t l : acc) {
      auto it = listeners_.find(l);
      if (it == listeners_.end()) continue;
      abi::Completion c{};
      c.flags = abi::kCompEvent;
      c.opcode = abi::kEvAccepted;
      c.wr_id = l;
      c.flow = next_flow_++;
      flows_[c.flow] = {it->second.cq};
      produce(it->second.cq, c);
    }
    return !inj.empty() || !acc.empty() || !steps.empty();
  }

  void peer_step(const PeerStep& s) {
    auto it = flows_.find(s.flow);
    if (it == flows_.end()) return;
    Flow& f = it->second;
    abi::Completion ev{};
    ev.flags = abi::kCompEvent;
    ev.flow = s.flow;
    abi::Completion c{};
    c.flow = s.flow;
    c.opcode = abi::kOpFlowRecv;
    switch (s.what) {
      case Peer::kData: {
        // As much as the held buffers take (the window), in order.
        std::vector<abi::Completion> done;
        uint64_t moved = 0;
        for (Held& h : f.held) {
          while (h.filled < h.len && moved < s.bytes) {
            h.dst[h.filled++] = flow_byte(f.rx_offset++);
            moved++;
          }
          if (moved == s.bytes) break;
        }
        while (!f.held.empty() && f.held.front().filled == f.held.front().len) {
          c.wr_id = f.held.front().wr_id;
          c.length = f.held.front().len;
          done.push_back(c);
          f.held.pop_front();
        }
        ev.opcode = abi::kEvData;
        ev.length = static_cast<uint32_t>(moved);
        if (data_event_first && moved != 0) produce(f.cq, ev);
        for (const abi::Completion& d : done)
          produce(f.cq, d);
        if (!data_event_first && moved != 0) produce(f.cq, ev);
        break;
      }
      case Peer::kFin:
      case Peer::kReset:
        if (s.what == Peer::kFin) {
          f.fin = true;
          ev.opcode = abi::kEvPeerClosed;
          produce(f.cq, ev);
        }
        for (const Held& h : f.held) {
          c.wr_id = h.wr_id;
          c.length = h.filled;
          c.status = s.what == Peer::kReset && h.filled == 0 ? CL_ECONNRESET : 0;
          produce(f.cq, c);
        }
        f.held.clear();
        if (s.what == Peer::kFin) break;
        [[fallthrough]];
      case Peer::kClose:
        ev.opcode = abi::kEvClosed;
        ev.status = s.what == Peer::kReset ? CL_ECONNRESET : 0;
        produce(f.cq, ev);
        flows_.erase(it);
        break;
    }
  }

  void hello(const abi::Hello& req) {
    abi::HelloReply r{};
    r.min_version = o_.min_version;
    r.max_version = o_.max_version;
    uint16_t v = std::min(req.max_version, o_.max_version);
    if (o_.hello_status != 0 || v < std::max(req.min_version, o_.min_version)) {
      abi::MsgHeader h = req.h;
      r.h = {abi::kMagic, h.version, static_cast<uint16_t>(abi::MsgType::kHelloReply), h.seq,
             o_.hello_status != 0 ? o_.hello_status : CL_EVERSION};
      send_msg(&r, sizeof r);
      return;
    }
    if (region_ != nullptr) munmap(region_, region_size_);
    if (region_fd_ >= 0) close(region_fd_);
    region_size_ = abi::kRegionHeaderSize + o_.pipe_area + o_.heap;
    int fd = memfd_create("fake-region", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (ftruncate(fd, static_cast<off_t>(region_size_)) != 0) std::abort();
    region_ = static_cast<uint8_t*>(
        mmap(nullptr, region_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    abi::RegionHeader rh{};
    rh.magic = abi::kMagic;
    rh.version = v;
    rh.app_id = 7;
    rh.size = region_size_;
    rh.pipe_area_offset = abi::kRegionHeaderSize;
    rh.pipe_area_size = o_.pipe_area;
    rh.heap_offset = abi::kRegionHeaderSize + o_.pipe_area;
    rh.heap_size = o_.heap;
    std::memcpy(region_, &rh, sizeof rh);
    next_pipe_off_ = rh.pipe_area_offset;
    r.app_id = rh.app_id;
    r.region_size = rh.size;
    r.pipe_area_offset = rh.pipe_area_offset;
    r.pipe_area_size = rh.pipe_area_size;
    r.heap_offset = rh.heap_offset;
    r.heap_size = rh.heap_size;
    r.quotas = {1u << 30, 64, 16, 16, o_.pipe_entries_quota};
    abi::MsgHeader h = req.h;
    h.version = v;
    reply(r, h, abi::MsgType::kHelloReply, 0, fd);
    region_fd_ = fd;  // kept open: closing it races with the app counting its fds
  }

  void pipe_create(const abi::PipeCreate& req, int efd) {
    abi::PipeReply r{};
    auto kind = static_cast<abi::PipeKind>(req.kind);
    uint64_t bytes = abi::pipe_bytes(kind, req.entries);
    if (next_pipe_off_ + bytes > abi::kRegionHeaderSize + o_.pipe_area) {
      if (efd >= 0) close(efd);
      reply(r, req.h, abi::MsgType::kPipeReply, CL_ENOMEM);
      return;
    }
    {
      std::lock_guard lk(rec_mu);
      pipe_creates.push_back(req);
    }
    Pipe p{kind, req.entries, req.cq, efd, {}, {}, {}};
    std::memset(region_ + next_pipe_off_, 0, bytes);
    ipc::PipeView v = ipc::pipe_at(region_, next_pipe_off_);
    if (kind == abi::PipeKind::kSubmit)
      p.sq = {v.ctl, static_cast<abi::SendEntry*>(v.ring), req.entries};
    else if (kind == abi::PipeKind::kRecv)
      p.rq = {v.ctl, static_cast<abi::RecvEntry*>(v.ring), req.entries};
    else
      p.cq_prod = {v.ctl, static_cast<abi::Completion*>(v.ring), req.entries};
    r.pipe = next_pipe_id_++;
    r.entries = req.entries;
    r.offset = bad_pipe_offset ? abi::kRegionHeaderSize + o_.pipe_area - 64 : next_pipe_off_;
    next_pipe_off_ += bytes;
    pipes_.emplace(r.pipe, p);
    live_pipes++;
    reply(r, req.h, abi::MsgType::kPipeReply, 0);
  }

  void mr_reg(const abi::MrReg& req, int fd) {
    abi::MrReply r{};
    if (fd < 0 || (fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK) == 0) {
      unsealed_mrs++;
      reply(r, req.h, abi::MsgType::kMrReply, CL_EINVAL);
      return;
    }
    void* p = mmap(nullptr, req.length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    r.mr = next_mr_id_++;
    if ((req.access & (abi::kAccessRemoteRead | abi::kAccessRemoteWrite)) != 0)
      r.rkey = kRkeyTag << 16 | r.mr;
    mrs_[r.mr] = {static_cast<uint8_t*>(p), req.length, req.access};
    live_mrs++;
    reply(r, req.h, abi::MsgType::kMrReply, 0);
  }

  // The dataplane, simply: bounds-checked views of the app's memory, one entry at a time.
  uint8_t* resolve(uint32_t mr, uint64_t off, uint64_t len, uint32_t need) {
    uint8_t* base = region_ + abi::kRegionHeaderSize + o_.pipe_area;
    uint64_t size = o_.heap;
    uint32_t access = abi::kAccessAll;
    if (mr != abi::kHeapMr) {
      auto it = mrs_.find(mr);
      if (it == mrs_.end()) return nullptr;
      base = it->second.base;
      size = it->second.length;
      access = it->second.access;
    }
    if (off > size || len > size - off || (access & need) != need) return nullptr;
    return base + off;
  }

  bool run_pipes() {
    bool worked = run_script();
    std::vector<uint32_t>& rung = rung_;
    for (auto& [id, p] : pipes_) {
      if (p.kind != abi::PipeKind::kSubmit) continue;
      auto cq = pipes_.find(p.cq);
      if (cq == pipes_.end()) continue;
      // Room for the most one entry makes: a receive (data event and completion), or a close
      // (completion and two events), all on the same CQ in these tests.
      for (int budget = 0; budget < 64 && cq->second.cq_prod.credits(4) >= 4; budget++) {
        abi::SendEntry e;
        if (p.sq.consume(&e, 1) == 0) break;
        worked = true;
        entries_seen++;
        if (auto q = qps_.find(e.target); q != qps_.end() && e.opcode >= abi::kOpFlowSend) {
          qp_request(e, q->second.cq);
          continue;
        }
        if (e.opcode >= abi::kOpFlowSend && e.opcode <= abi::kOpFlowAbort) {
          flow_request(e, p.cq);
          continue;
        }
        abi::Completion c{};
        c.wr_id = e.wr_id;
        c.pipe = static_cast<uint16_t>(id);
        c.opcode = e.opcode;
        if (e.opcode == abi::kOpNop) {
        } else if (e.opcode == abi::kOpCopy) {
          uint8_t* s = resolve(e.mr, e.offset, e.length, abi::kAccessRead);
          uint8_t* d = resolve(e.remote_mr, e.remote_offset, e.length, abi::kAccessWrite);
          if (s != nullptr && d != nullptr) {
            std::memmove(d, s, e.length);
            c.length = e.length;
          } else {
            c.status = CL_EFAULT;
          }
        } else if (e.opcode == abi::kOpSend) {
          c.status = deliver(e, &rung);
          if (c.status == 0) c.length = e.length;
        } else {
          c.status = CL_EOPNOTSUPP;
        }
        cq->second.cq_prod.produce(&c, 1);
        rung.push_back(p.cq);
      }
    }
    for (uint32_t id : rung) {
      auto it = pipes_.find(id);
      if (it == pipes_.end()) continue;
      Pipe& cq = it->second;
      if (cq.efd >= 0 && cq.cq_prod.consumer_sleeping()) {
        uint64_t one = 1;
        if (write(cq.efd, &one, sizeof one) < 0) std::abort();
      }
    }
    rung.clear();
    return worked;
  }

  int32_t deliver(const abi::SendEntry& e, std::vector<uint32_t>* rung) {
    uint8_t* src = resolve(e.mr, e.offset, e.length, abi::kAccessRead);
    auto t = pipes_.find(e.target);
    if (src == nullptr || t == pipes_.end() || t->second.kind != abi::PipeKind::kRecv)
      return CL_EFAULT;
    auto cq = pipes_.find(t->second.cq);
    if (cq == pipes_.end() || cq->second.cq_prod.credits(1) < 1) return CL_ENOSPC;
    abi::RecvEntry r;
    if (t->second.rq.consume(&r, 1) == 0) return CL_ENORECV;
    abi::Completion c{};
    c.wr_id = t->second.rq.consumed() - 1;
    c.pipe = static_cast<uint16_t>(e.target);
    c.opcode = abi::kOpSend;
    c.flags = abi::kCompRecv | abi::kCompImm;
    c.imm = e.imm;
    uint8_t* dst = resolve(r.mr, r.offset, r.length, abi::kAccessWrite);
    if (dst == nullptr) {
      c.status = CL_EFAULT;
    } else {
      uint32_t n = std::min(e.length, r.length);
      std::memcpy(dst, src, n);
      c.length = n;
      c.status = n < e.length ? CL_ETRUNC : 0;
    }
    cq->second.cq_prod.produce(&c, 1);
    rung->push_back(t->second.cq);
    return c.status == CL_ETRUNC ? CL_ETRUNC : 0;
  }

  FakeOptions o_;
  std::string path_;
  int lfd_ = -1, cfd_ = -1;
  int stray_ = eventfd(0, EFD_CLOEXEC);  // one for the whole life: fd counts stay comparable
  std::thread thread_;
  std::atomic<bool> stop_{false}, dead_{false};
  std::atomic<int> cmd_{kNone};
  std::chrono::steady_clock::time_point stall_deadline_{};
  uint8_t* region_ = nullptr;
  int region_fd_ = -1;
  uint64_t region_size_ = 0;
  uint64_t next_pipe_off_ = 0;
  uint32_t next_pipe_id_ = 1, next_mr_id_ = 1;
  std::map<uint32_t, Pipe> pipes_;
  std::map<uint32_t, Mr> mrs_;
  struct Listener {
    uint16_t port;
    uint32_t cq;
  };
  std::map<uint32_t, Listener> listeners_;
  std::map<uint32_t, Flow> flows_;
  struct Qp {
    uint32_t cq;
    abi::QpAttr attr;
  };
  std::map<uint32_t, Qp> qps_;
  uint32_t next_listener_ = 100, next_flow_ = 500;
  std::vector<uint32_t> rung_;  // CQs written to since the last doorbell pass
  std::vector<std::pair<uint32_t, abi::Completion>> injected_;  // under rec_mu
  std::vector<uint32_t> accepts_;
  std::vector<PeerStep> peer_script_;  // under rec_mu
};

}  // namespace cleave::test

namespace cleave::test {
namespace {

using Clock = std::chrono::steady_clock;
double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double ms_since(Clock::time_point t) {
  return ms_between(t, Clock::now());
}

class LibTest : public ::testing::Test {
 protected:
  void start(FakeOptions o = {}) { d_ = std::make_unique<FakeDaemon>(o); }
  int open_ctx(cl_ctx** out) {
    cl_open_attr a{d_->path().c_str(), "libtest"};
    return cl_open(&a, out);
  }
  void SetUp() override {
    start();
    ASSERT_EQ(open_ctx(&ctx_), 0);
  }
  void TearDown() override {
    if (ctx_ != nullptr) {
      EXPECT_EQ(cl_close(ctx_), 0);
    }
    ctx_ = nullptr;
    d_.reset();
  }
  // A CQ of `cqe` entries with one SQ and one RQ of `qe` each.
  void make_queues(uint32_t cqe = 256, uint32_t qe = 64, int doorbell = 0) {
    ASSERT_EQ(cl_cq_create(ctx_, cqe, doorbell, 0, &cq_), 0);
    ASSERT_EQ(cl_sq_create(ctx_, cq_, qe, &sq_), 0);
    ASSERT_EQ(cl_rq_create(ctx_, cq_, qe, &rq_), 0);
  }
  // Polls until n completions arrived or 5 s passed.
  std::vector<cl_wc> poll_n(size_t n) {
    std::vector<cl_wc> out;
    auto t0 = Clock::now();
    while (out.size() < n && ms_since(t0) < 5000) {
      cl_wc wc[16];
      int got = cl_poll_cq(cq_, wc, 16);
      EXPECT_GE(got, 0);
      if (got < 0) break;
      out.insert(out.end(), wc, wc + got);
    }
    return out;
  }
  static int sealed_memfd(size_t len, bool sealable = true) {
    int fd = memfd_create("mr", MFD_CLOEXEC | (sealable ? MFD_ALLOW_SEALING : 0));
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(len)), 0);
    return fd;
  }

  std::unique_ptr<FakeDaemon> d_;
  cl_ctx* ctx_ = nullptr;
  cl_cq* cq_ = nullptr;
  cl_sq* sq_ = nullptr;
  cl_rq* rq_ = nullptr;
};

// ---- Context ----

TEST_F(LibTest, OpenGivesTheDaemonsAppId) {
  EXPECT_EQ(cl_app_id(ctx_), 7u);
}

TEST(LibOpen, NoDaemonIsEnoentAtOnce) {
  cl_open_attr a{"/tmp/cleave-no-such-daemon.sock", nullptr};
  cl_ctx* ctx = reinterpret_cast<cl_ctx*>(0x1);
  auto t0 = Clock::now();
  EXPECT_EQ(cl_open(&a, &ctx), CL_ENOENT);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_LT(ms_since(t0), 100.0);
  // A socket file with nobody listening: refused, also CL_ENOENT.
  std::string p = "/tmp/cleave-dead-" + std::to_string(getpid()) + ".sock";
  int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p.c_str());
  unlink(p.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  close(fd);
  a.socket_path = p.c_str();
  EXPECT_EQ(cl_open(&a, &ctx), CL_ENOENT);
  unlink(p.c_str());
}

TEST(LibOpen, SocketPathFromEnvironment) {
  FakeDaemon d;
  setenv("CLEAVE_APP_SOCKET", d.path().c_str(), 1);
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(nullptr, &ctx), 0);
  unsetenv("CLEAVE_APP_SOCKET");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(cl_close(ctx), 0);
}

TEST(LibOpen, NoCommonVersionIsEversion) {
  FakeOptions o;
  o.min_version = abi::kAbiVersion + 1;
  o.max_version = abi::kAbiVersion + 2;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "old"};
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(&a, &ctx), CL_EVERSION);
  EXPECT_EQ(ctx, nullptr);
}

TEST(LibOpen, RefusedPeerIsEperm) {
  FakeOptions o;
  o.hello_status = CL_EPERM;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "nobody"};
  cl_ctx* ctx = nullptr;
  EXPECT_EQ(cl_open(&a, &ctx), CL_EPERM);
}

// A daemon that refuses the connection as it accepts it (Notice kRefused) once the app's hello is
// waiting unread: closing then resets the app's socket, and the reset, reported first, must not
// hide the notice behind it.
TEST(LibOpen, RefusalAtAcceptIsReadBehindTheReset) {
  for (int32_t why : {CL_EPERM, CL_EAGAIN}) {
    std::string path = "/tmp/cleave-refuse-" + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::snprintf(a.sun_path, sizeof a.sun_path, "%s", path.c_str());
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ASSERT_EQ(listen(lfd, 4), 0);
    std::thread daemon([&] {
      int fd = accept(lfd, nullptr, nullptr);
      pollfd p{fd, POLLIN, 0};
      poll(&p, 1, 5000);  // the hello is there, unread
      abi::Notice n{};
      n.h = {abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(abi::MsgType::kNotice), 0, why};
      n.reason = static_cast<uint32_t>(abi::NoticeReason::kRefused);
      send(fd, &n, sizeof n, MSG_NOSIGNAL);
      close(fd);
    });
    cl_open_attr attr{path.c_str(), "refused"};
    cl_ctx* ctx = nullptr;
    EXPECT_EQ(cl_open(&attr, &ctx), why);
    EXPECT_EQ(ctx, nullptr);
    daemon.join();
    close(lfd);
    unlink(path.c_str());
  }
}

TEST(LibOpen, EveryCodeHasItsOwnName) {
  const int codes[] = {CL_OK,         CL_EPERM,   CL_ENOENT,     CL_EAGAIN,       CL_ENOMEM,
                       CL_EACCES,     CL_EFAULT,  CL_EBUSY,      CL_EINVAL,       CL_ENOSPC,
                       CL_EPIPE,      CL_EPROTO,  CL_EOPNOTSUPP, CL_EADDRINUSE,   CL_ENETUNREACH,
                       CL_ECONNRESET, CL_ENOBUFS, CL_ETIMEDOUT,  CL_ECONNREFUSED, CL_EHOSTUNREACH,
                       CL_EDQUOT,     CL_EDAEMON, CL_EVERSION,   CL_EEVICTED,     CL_ENORECV,
                       CL_ETRUNC,     CL_EIO,     CL_ECANCELED};
  std::set<std::string> names;
  for (int c : codes) {
    std::string s = cl_strerror(c);
    EXPECT_NE(s, cl_strerror(12345)) << c;
    names.insert(s);
  }
  EXPECT_EQ(names.size(), std::size(codes));
  // A flow's status may be any negated errno a transport reports: named by the C library.
  EXPECT_STREQ(cl_strerror(-ECONNABORTED), "Software caused connection abort");
  EXPECT_STREQ(cl_strerror(-4096), cl_strerror(12345));
}

// ---- Heap ----

TEST_F(LibTest, HeapAlignsAndExhaustsAndCoalesces) {
  void* a = cl_alloc(ctx_, 100, 0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  void* b = cl_alloc(ctx_, 10, 4096);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 4096, 0u);
  EXPECT_EQ(cl_alloc(ctx_, 10, 3), nullptr);  // not a power of two
  EXPECT_EQ(cl_alloc(ctx_, 0, 0), nullptr);
  EXPECT_EQ(cl_heap_offset(ctx_, a), 0u);
  EXPECT_EQ(cl_heap_offset(ctx_, &a), UINT64_MAX);
  EXPECT_EQ(cl_alloc(ctx_, 1u << 20, 0), nullptr);  // the heap is 1 MiB and part is used
  cl_free(ctx_, a);
  cl_free(ctx_, a);  // a double free is ignored
  cl_free(ctx_, b);
  // Everything merged back: the whole heap in one block, then nothing.
  void* all = cl_alloc(ctx_, 1u << 20, 0);
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(cl_alloc(ctx_, 1, 0), nullptr);
  cl_free(ctx_, all);
  // Exhaustion by many small blocks, then all freed in a scattered order.
  std::vector<void*> v;
  for (void* p; (p = cl_alloc(ctx_, 4096, 0)) != nullptr;)
    v.push_back(p);
  EXPECT_EQ(v.size(), 256u);
  for (size_t i = 0; i < v.size(); i += 2)
    cl_free(ctx_, v[i]);
  EXPECT_EQ(cl_alloc(ctx_, 8192, 0), nullptr);  // fragmented: no two neighbours free
  for (size_t i = 1; i < v.size(); i += 2)
    cl_free(ctx_, v[i]);
  all = cl_alloc(ctx_, 1u << 20, 0);
  EXPECT_NE(all, nullptr);
  cl_free(ctx_, all);
}

TEST_F(LibTest, HeapIsSafeForManyThreads) {
  constexpr int kThreads = 4, kOps = 3000;
  std::atomic<int> bad{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; t++) {
    ts.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<uint8_t*, size_t>> mine;
      for (int i = 0; i < kOps; i++) {
        if (mine.size() < 16 && rng() % 3 != 0) {
          size_t n = 1 + rng() % 8000;
          auto* p = static_cast<uint8_t*>(cl_alloc(ctx_, n, size_t{64} << (rng() % 4)));
          if (p == nullptr) continue;
          std::memset(p, t + 1, n);
          mine.emplace_back(p, n);
        } else if (!mine.empty()) {
          size_t k = rng() % mine.size();
          auto [p, n] = mine[k];
          for (size_t j = 0; j < n; j++)
            if (p[j] != t + 1) {
              bad++;
              break;
            }
          cl_free(ctx_, p);
          mine.erase(mine.begin() + static_cast<long>(k));
        }
      }
      for (auto [p, n] : mine)
        cl_free(ctx_, p);
    });
  }
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(bad, 0);  // no block was handed to two threads at once
  void* all = cl_alloc(ctx_, 1u << 20, 0);
  EXPECT_NE(all, nullptr);
  cl_free(ctx_, all);
}

// ---- Memory regions ----

TEST_F(LibTest, MrRegisterUseDeregister) {
  int fd = sealed_memfd(8192);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 8192, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  EXPECT_GE(cl_mr_id(mr), 1u);
  EXPECT_EQ(cl_mr_length(mr), 8192u);
  EXPECT_EQ(d_->live_mrs, 1);
  EXPECT_EQ(d_->unsealed_mrs, 0);
  // The library's mapping is the memfd's memory.
  std::memcpy(cl_mr_addr(mr), "hello", 5);
  char buf[5];
  ASSERT_EQ(pread(fd, buf, 5, 0), 5);
  EXPECT_EQ(std::memcmp(buf, "hello", 5), 0);
  // Sealed: the app can no longer shrink it under the daemon.
  EXPECT_NE(ftruncate(fd, 4096), 0);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  EXPECT_EQ(d_->live_mrs, 0);
  close(fd);
}

TEST_F(LibTest, MrRefusesWhatItCannotSealOrMap) {
  cl_mr* mr = nullptr;
  int unsealable = sealed_memfd(4096, false);
  EXPECT_EQ(cl_mr_reg(ctx_, unsealable, 4096, CL_ACCESS_READ, &mr), CL_EINVAL);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  EXPECT_EQ(cl_mr_reg(ctx_, fds[0], 4096, CL_ACCESS_READ, &mr), CL_EINVAL);
  int fd = sealed_memfd(4096);
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 8192, CL_ACCESS_READ, &mr), CL_EINVAL);  // shorter than asked
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 0, CL_ACCESS_READ, &mr), CL_EINVAL);
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, 1u << 7, &mr), CL_EINVAL);  // unknown access bit
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(d_->live_mrs, 0);
  EXPECT_EQ(d_->unsealed_mrs, 0);  // nothing unsealed ever reached the daemon
  for (int f : {unsealable, fds[0], fds[1], fd})
    close(f);
}

// ---- Queues ----

TEST_F(LibTest, QueueCreationRules) {
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 100, 0, 0, &cq), CL_EINVAL);  // not a power of two
  EXPECT_EQ(cl_cq_create(ctx_, 32, 0, 0, &cq), CL_EINVAL);   // below the minimum
  EXPECT_EQ(cl_cq_create(ctx_, 1u << 17, 0, 0, &cq), CL_EINVAL);
  ASSERT_EQ(cl_cq_create(ctx_, 128, 0, 0, &cq), 0);
  cl_sq* sq = nullptr;
  cl_rq* rq = nullptr;
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq), 0);
  EXPECT_EQ(cl_rq_create(ctx_, cq, 128, &rq), CL_EINVAL);  // 64 + 128 > 128
  ASSERT_EQ(cl_rq_create(ctx_, cq, 64, &rq), 0);
  cl_sq* sq2 = nullptr;
  EXPECT_EQ(cl_sq_create(ctx_, cq, 64, &sq2), CL_EINVAL);  // full
  EXPECT_EQ(cl_cq_destroy(cq), CL_EBUSY);
  EXPECT_EQ(d_->live_pipes, 3);
  EXPECT_EQ(cl_sq_destroy(sq), 0);
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq2), 0);  // the room came back
  EXPECT_EQ(cl_sq_destroy(sq2), 0);
  EXPECT_EQ(cl_rq_destroy(rq), 0);
  EXPECT_EQ(cl_cq_destroy(cq), 0);
  EXPECT_EQ(d_->live_pipes, 0);
}

TEST_F(LibTest, QuotaOnPipeEntries) {
  TearDown();
  FakeOptions o;
  o.pipe_entries_quota = 128;
  start(o);
  ASSERT_EQ(open_ctx(&ctx_), 0);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 256, 0, 0, &cq), CL_EDQUOT);
  EXPECT_EQ(cl_cq_create(ctx_, 128, 0, 0, &cq), 0);
}

// ---- Post and poll through the fake daemon ----

TEST_F(LibTest, NopCopyAndSendRoundTrip) {
  make_queues();
  auto* src = static_cast<uint8_t*>(cl_alloc(ctx_, 4096, 0));
  ASSERT_NE(src, nullptr);
  for (int i = 0; i < 4096; i++)
    src[i] = static_cast<uint8_t>(i * 7);
  int fd = sealed_memfd(1u << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);

  cl_send_wr w[2]{};
  w[0].wr_id = 11;
  w[0].opcode = CL_OP_NOP;
  w[1].wr_id = 12;
  w[1].opcode = CL_OP_COPY;
  w[1].offset = cl_heap_offset(ctx_, src);
  w[1].length = 4096;
  w[1].dst_mr = mr;
  w[1].dst_offset = 100;
  ASSERT_EQ(cl_post_send(sq_, w, 2), 2);
  auto wc = poll_n(2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_EQ(wc[0].status, 0);
  EXPECT_EQ(wc[1].wr_id, 12u);
  EXPECT_EQ(wc[1].status, 0);
  EXPECT_EQ(wc[1].length, 4096u);
  EXPECT_EQ(wc[1].opcode, uint32_t{CL_OP_COPY});
  EXPECT_EQ(std::memcmp(static_cast<uint8_t*>(cl_mr_addr(mr)) + 100, src, 4096), 0);

  // SEND into receive buffers in the MR, several laps of the 64-entry queues, so the wr_id map
  // wraps; wr_ids are scattered so a mix-up shows.
  auto* dst = static_cast<uint8_t*>(cl_mr_addr(mr));
  uint32_t sends = 0, recvs = 0;
  for (int round = 0; round < 10; round++) {
    cl_recv_wr r[40];
    for (int i = 0; i < 40; i++)
      r[i] = {0x9000'0000ull + round * 1000 + i * 3, mr, static_cast<uint64_t>(i) * 1024, 1024};
    ASSERT_EQ(cl_post_recv(rq_, r, 40), 40);
    cl_send_wr s[40]{};
    for (int i = 0; i < 40; i++) {
      s[i].wr_id = round * 1000 + i;
      s[i].opcode = CL_OP_SEND;
      s[i].offset = cl_heap_offset(ctx_, src) + i;
      s[i].length = 100 + i;
      s[i].target = rq_;
      s[i].imm = 0xabc0 + i;
    }
    ASSERT_EQ(cl_post_send(sq_, s, 40), 40);
    auto got = poll_n(80);
    ASSERT_EQ(got.size(), 80u);
    for (const cl_wc& c : got) {
      EXPECT_EQ(c.status, 0);
      if (c.flags & CL_WC_RECV) {
        uint64_t i = (c.wr_id - 0x9000'0000ull - round * 1000) / 3;
        ASSERT_LT(i, 40u);
        EXPECT_EQ(c.wr_id, 0x9000'0000ull + round * 1000 + i * 3);
        EXPECT_EQ(c.length, 100 + i);
        EXPECT_EQ(c.imm, 0xabc0 + i);
        EXPECT_TRUE(c.flags & CL_WC_IMM);
        EXPECT_EQ(std::memcmp(dst + i * 1024, src + i, 100 + i), 0);
        recvs++;
      } else {
        EXPECT_EQ(c.opcode, uint32_t{CL_OP_SEND});
        EXPECT_EQ(c.wr_id % 1000, c.length - 100);
        sends++;
      }
    }
  }
  EXPECT_EQ(sends, 400u);
  EXPECT_EQ(recvs, 400u);

  // No buffer posted: the send completes with CL_ENORECV.
  cl_send_wr s{};
  s.wr_id = 99;
  s.opcode = CL_OP_SEND;
  s.length = 10;
  s.target = rq_;
  ASSERT_EQ(cl_post_send(sq_, &s, 1), 1);
  auto last = poll_n(1);
  ASSERT_EQ(last.size(), 1u);
  EXPECT_EQ(last[0].status, CL_ENORECV);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  close(fd);
}

// The daemon refuses to deregister an MR its flows still use: the handle stays valid, and a
// later deregistration succeeds.
TEST_F(LibTest, MrDeregRefusedKeepsTheHandle) {
  int fd = sealed_memfd(1 << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1 << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  static_cast<char*>(cl_mr_addr(mr))[0] = 'x';
  d_->mrs_busy = true;
  EXPECT_EQ(cl_mr_dereg(mr), CL_EBUSY);
  EXPECT_EQ(d_->live_mrs.load(), 1);
  EXPECT_EQ(static_cast<char*>(cl_mr_addr(mr))[0], 'x');  // still mapped
  d_->mrs_busy = false;
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  EXPECT_EQ(d_->live_mrs.load(), 0);
  close(fd);
}

TEST_F(LibTest, LibraryRejectsBadRequestsBeforePosting) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  cl_send_wr ok{};
  ok.opcode = CL_OP_NOP;
  auto bad = [&](auto edit) {
    cl_send_wr w[2] = {ok, ok};
    w[1].opcode = CL_OP_COPY;
    w[1].mr = ro;
    w[1].length = 16;
    w[1].dst_mr = wo;
    edit(w[1]);
    return cl_post_send(sq_, w, 2);
  };
  EXPECT_EQ(bad([](cl_send_wr&) {}), 2);  // the base case is fine
  EXPECT_EQ(bad([](cl_send_wr& w) { w.offset = 4090; }), CL_EFAULT);
  EXPECT_EQ(bad([](cl_send_wr& w) { w.dst_offset = UINT64_MAX - 4; }), CL_EFAULT);
  EXPECT_EQ(bad([](cl_send_wr& w) { w.offset = 4096, w.length = 0; }), 2);  // empty at the end
  EXPECT_EQ(bad([](cl_send_wr& w) { w.mr = nullptr, w.offset = 2u << 20; }), CL_EFAULT);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.dst_mr = ro; }), CL_EACCES);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.mr = wo; }), CL_EACCES);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.opcode = CL_OP_SEND, w.mr = nullptr; }), CL_EINVAL);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.opcode = 9; }), CL_EOPNOTSUPP);
  cl_recv_wr r{1, ro, 0, 16};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EACCES);
  r = {1, wo, 4000, 200};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EFAULT);
  // Another context's MR is not ours.
  cl_ctx* other = nullptr;
  FakeDaemon d2;
  cl_open_attr a{d2.path().c_str(), "other"};
  ASSERT_EQ(cl_open(&a, &other), 0);
  cl_mr* foreign = nullptr;
  int fd2 = sealed_memfd(4096);
  ASSERT_EQ(cl_mr_reg(other, fd2, 4096, CL_ACCESS_READ, &foreign), 0);
  EXPECT_EQ(bad([&](cl_send_wr& w) { w.mr = foreign; }), CL_EINVAL);
  EXPECT_EQ(cl_close(other), 0);
  close(fd2);
  // Only the two accepted calls reached the daemon, two entries each.
  auto wc = poll_n(4);
  EXPECT_EQ(wc.size(), 4u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  cl_wc extra;
  EXPECT_EQ(cl_poll_cq(cq_, &extra, 1), 0);
  EXPECT_EQ(d_->entries_seen, 4u);
  close(fd);
}

TEST_F(LibTest, FullQueueTakesWhatFits) {
  make_queues();
  d_->pump = false;
  std::vector<cl_send_wr> w(100);
  for (auto& x : w)
    x.opcode = CL_OP_NOP;
  EXPECT_EQ(cl_post_send(sq_, w.data(), 100), 64);
  EXPECT_EQ(cl_post_send(sq_, w.data(), 1), 0);
  std::vector<cl_recv_wr> r(70, cl_recv_wr{5, nullptr, 0, 64});
  EXPECT_EQ(cl_post_recv(rq_, r.data(), 70), 64);
  d_->pump = true;
  EXPECT_EQ(poll_n(64).size(), 64u);
  EXPECT_EQ(cl_post_send(sq_, w.data(), 1), 1);
}

TEST_F(LibTest, WaitSleepsOnTheDoorbellAndTimesOut) {
  make_queues(256, 64, 1);
  auto t0 = Clock::now();
  EXPECT_EQ(cl_cq_wait(cq_, 50), CL_ETIMEDOUT);
  EXPECT_GE(ms_since(t0), 49.0);
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cl_send_wr w{};
    w.wr_id = 5;
    w.opcode = CL_OP_NOP;
    EXPECT_EQ(cl_post_send(sq_, &w, 1), 1);
  });
  t0 = Clock::now();
  EXPECT_EQ(cl_cq_wait(cq_, 5000), 0);
  EXPECT_LT(ms_since(t0), 1000.0);
  poster.join();
  cl_wc wc;
  EXPECT_EQ(cl_poll_cq(cq_, &wc, 1), 1);
  EXPECT_EQ(wc.wr_id, 5u);
}

// ---- Flows ----

sockaddr_in inet(const char* ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  inet_pton(AF_INET, ip, &a.sin_addr);
  return a;
}

TEST_F(LibTest, ListenAndConnectSendHostOrderAndReturnIds) {
  make_queues();
  sockaddr_in a = inet("198.18.0.1", 5001);
  uint32_t l = 0xdead;
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l), 0);
  EXPECT_EQ(l, 100u);
  sockaddr_in any = inet("0.0.0.0", 5002);
  uint32_t l2 = 0xdead;
  ASSERT_EQ(cl_listen(ctx_, cq_, &any, "tcp", &l2), 0);
  EXPECT_EQ(l2, 101u);
  // The daemon's refusal is the call's result, and the out parameter stays as it was.
  uint32_t l3 = 0xdead;
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, "", &l3), CL_EADDRINUSE);
  EXPECT_EQ(l3, 0xdeadu);

  cl_flow f = 0xdead;
  sockaddr_in peer = inet("198.18.0.2", 443);
  ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &f), 0);
  EXPECT_EQ(f, 500u);
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->listens.size(), 3u);
    EXPECT_EQ(d_->listens[0].ip, 0xc6120001u);  // host order
    EXPECT_EQ(d_->listens[0].port, 5001);
    EXPECT_STREQ(d_->listens[0].transport, "");
    EXPECT_EQ(d_->listens[1].ip, 0u);
    EXPECT_EQ(d_->listens[1].port, 5002);
    EXPECT_STREQ(d_->listens[1].transport, "tcp");
    ASSERT_EQ(d_->connects.size(), 1u);
    EXPECT_EQ(d_->connects[0].ip, 0xc6120002u);
    EXPECT_EQ(d_->connects[0].port, 443);
    EXPECT_EQ(d_->connects[0].h.version, abi::kAbiVersion);
    // Every request named the CQ by its pipe id.
    for (uint32_t k : d_->listen_cq_kinds)
      EXPECT_EQ(k, static_cast<uint32_t>(abi::PipeKind::kCompletion));
  }
  auto wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_CONNECTED});
  EXPECT_EQ(wc[0].flow, f);
  EXPECT_EQ(wc[0].status, 0);

  // Refused: the flow id comes at once, the refusal as an event.
  sockaddr_in closed = inet("198.18.0.2", FakeDaemon::kRefusedPort);
  cl_flow f2 = 0;
  ASSERT_EQ(cl_connect(ctx_, cq_, &closed, "tcp", &f2), 0);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_REFUSED});
  EXPECT_EQ(wc[0].status, CL_ECONNREFUSED);
  EXPECT_EQ(wc[0].flow, f2);

  EXPECT_EQ(cl_unlisten(ctx_, l), 0);
  EXPECT_EQ(cl_unlisten(ctx_, l), CL_ENOENT);
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l3), 0);  // the port is free again
}

TEST_F(LibTest, FlowCallsCheckTheirArgumentsBeforeAsking) {
  make_queues();
  sockaddr_in a = inet("198.18.0.1", 80);
  uint32_t l = 0xdead;
  cl_flow f = 0xdead;
  EXPECT_EQ(cl_listen(nullptr, cq_, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, nullptr, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, cq_, nullptr, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, nullptr, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &a, nullptr, nullptr), CL_EINVAL);
  sockaddr_in six = a;
  six.sin_family = AF_INET6;
  EXPECT_EQ(cl_listen(ctx_, cq_, &six, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &six, nullptr, &f), CL_EINVAL);
  std::string longest(abi::kTransportNameMax - 1, 'x');
  std::string too_long(abi::kTransportNameMax, 'x');
  EXPECT_EQ(cl_listen(ctx_, cq_, &a, too_long.c_str(), &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &a, too_long.c_str(), &f), CL_EINVAL);
  // Nowhere to connect to.
  sockaddr_in port0 = inet("198.18.0.2", 0);
  sockaddr_in any = inet("0.0.0.0", 80);
  EXPECT_EQ(cl_connect(ctx_, cq_, &port0, nullptr, &f), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, cq_, &any, nullptr, &f), CL_EINVAL);
  // Another context's CQ.
  FakeDaemon d2;
  cl_open_attr oa{d2.path().c_str(), "other"};
  cl_ctx* other = nullptr;
  ASSERT_EQ(cl_open(&oa, &other), 0);
  cl_cq* foreign = nullptr;
  ASSERT_EQ(cl_cq_create(other, 64, 0, 0, &foreign), 0);
  EXPECT_EQ(cl_listen(ctx_, foreign, &a, nullptr, &l), CL_EINVAL);
  EXPECT_EQ(cl_connect(ctx_, foreign, &a, nullptr, &f), CL_EINVAL);
  EXPECT_EQ(cl_close(other), 0);
  EXPECT_EQ(l, 0xdeadu);
  EXPECT_EQ(f, 0xdeadu);
  EXPECT_EQ(d_->flow_msgs, 0);  // nothing reached the daemon
  // The longest name fits.
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, longest.c_str(), &l), 0);
  std::lock_guard lk(d_->rec_mu);
  ASSERT_EQ(d_->listens.size(), 1u);
  EXPECT_EQ(std::string(d_->listens[0].transport), longest);
}

TEST_F(LibTest, FlowRequestsAndEventsRoundTrip) {
  make_queues();
  int fd = sealed_memfd(1u << 16);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr), 0);
  auto* src = static_cast<uint8_t*>(cl_alloc(ctx_, 8192, 0));
  ASSERT_NE(src, nullptr);
  sockaddr_in peer = inet("198.18.0.2", 5002);
  cl_flow f = 0;
  ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &f), 0);
  ASSERT_EQ(poll_n(1).at(0).opcode, uint32_t{CL_EV_CONNECTED});

  cl_send_wr w[4]{};
  w[0] = {.wr_id = 1,
          .offset = cl_heap_offset(ctx_, src) + 8,
          .length = 8000,
          .opcode = CL_OP_FLOW_SEND,
          .flow = f};
  w[1] = {
      .wr_id = 2, .mr = mr, .offset = 4096, .length = 1000, .opcode = CL_OP_FLOW_RECV, .flow = f};
  w[2] = {
      .wr_id = 3, .mr = mr, .offset = 8192, .length = 3000, .opcode = CL_OP_FLOW_RECV, .flow = f};
  w[3] = {.wr_id = 4, .opcode = CL_OP_FLOW_CLOSE, .flow = f};
  ASSERT_EQ(cl_post_send(sq_, w, 4), 4);
  // send; data event + recv; data event + recv; close; peer closed; closed
  auto wc = poll_n(8);
  ASSERT_EQ(wc.size(), 8u);
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->flow_entries.size(), 4u);
    const abi::SendEntry& s = d_->flow_entries[0];
    EXPECT_EQ(s.opcode, abi::kOpFlowSend);
    EXPECT_EQ(s.target, f);
    EXPECT_EQ(s.mr, abi::kHeapMr);
    EXPECT_EQ(s.offset, cl_heap_offset(ctx_, src) + 8);
    EXPECT_EQ(s.length, 8000u);
    const abi::SendEntry& r = d_->flow_entries[1];
    EXPECT_EQ(r.opcode, abi::kOpFlowRecv);
    EXPECT_EQ(r.target, f);
    EXPECT_EQ(r.mr, cl_mr_id(mr));
    EXPECT_EQ(r.offset, 4096u);
    EXPECT_EQ(r.length, 1000u);
    const abi::SendEntry& c = d_->flow_entries[3];
    EXPECT_EQ(c.opcode, abi::kOpFlowClose);
    EXPECT_EQ(c.target, f);
    EXPECT_EQ(c.length, 0u);
  }
  for (const cl_wc& c : wc)
    EXPECT_EQ(c.flow, f);
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_OP_FLOW_SEND});
  EXPECT_EQ(wc[0].wr_id, 1u);
  EXPECT_EQ(wc[0].length, 8000u);
  EXPECT_EQ(wc[0].flags, 0u);
  EXPECT_EQ(wc[1].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[1].opcode, uint32_t{CL_EV_DATA});
  EXPECT_EQ(wc[1].length, 500u);
  // A flow receive keeps the app's wr_id (the CQ also serves an RQ, whose mapping must not
  // touch it), and the bytes are in the buffer.
  EXPECT_EQ(wc[2].opcode, uint32_t{CL_OP_FLOW_RECV});
  EXPECT_EQ(wc[2].wr_id, 2u);
  EXPECT_EQ(wc[2].length, 1000u);
  EXPECT_EQ(wc[2].status, 0);
  EXPECT_EQ(wc[4].wr_id, 3u);
  EXPECT_EQ(wc[4].length, 3000u);
  auto* rx = static_cast<uint8_t*>(cl_mr_addr(mr));
  for (uint64_t i = 0; i < 4000; i++) {
    uint8_t got = i < 1000 ? rx[4096 + i] : rx[8192 + i - 1000];
    ASSERT_EQ(got, FakeDaemon::flow_byte(i)) << i;
  }
  EXPECT_EQ(wc[5].opcode, uint32_t{CL_OP_FLOW_CLOSE});
  EXPECT_EQ(wc[5].wr_id, 4u);
  EXPECT_EQ(wc[6].opcode, uint32_t{CL_EV_PEER_CLOSED});
  EXPECT_EQ(wc[7].opcode, uint32_t{CL_EV_CLOSED});
  EXPECT_EQ(wc[7].status, 0);

  // The flow is gone: a request on it is refused on the submit queue's CQ.
  cl_send_wr late{.wr_id = 9, .opcode = CL_OP_FLOW_ABORT, .flow = f};
  ASSERT_EQ(cl_post_send(sq_, &late, 1), 1);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, CL_ENOENT);
  EXPECT_EQ(wc[0].wr_id, 9u);
  EXPECT_EQ(cl_mr_dereg(mr), 0);
  close(fd);
}

TEST_F(LibTest, LibraryRejectsBadFlowRequestsBeforePosting) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  auto post = [&](cl_send_wr w) {
    cl_send_wr two[2] = {{.opcode = CL_OP_NOP}, w};
    return cl_post_send(sq_, two, 2);
  };
  EXPECT_EQ(post({.mr = ro, .length = 4096, .opcode = CL_OP_FLOW_SEND, .flow = 7}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 4096, .opcode = CL_OP_FLOW_RECV, .flow = 7}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_OP_FLOW_SEND}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .length = 16, .opcode = CL_OP_FLOW_RECV}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .offset = 4000, .length = 97, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.mr = wo, .offset = 4097, .opcode = CL_OP_FLOW_RECV}), CL_EFAULT);
  // The whole heap in one send is fine (no per-request cap), one byte more is not.
  EXPECT_EQ(post({.length = 1u << 20, .opcode = CL_OP_FLOW_SEND}), 2);
  EXPECT_EQ(post({.length = (1u << 20) + 1, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.length = UINT32_MAX, .opcode = CL_OP_FLOW_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.opcode = CL_OP_FLOW_CLOSE, .flow = 7}), 2);
  EXPECT_EQ(post({.length = 1, .opcode = CL_OP_FLOW_CLOSE}), CL_EINVAL);
  EXPECT_EQ(post({.length = 1, .opcode = CL_OP_FLOW_ABORT}), CL_EINVAL);
  EXPECT_EQ(post({.opcode = CL_OP_FLOW_ABORT + 1}), CL_EOPNOTSUPP);
  // Four calls went through, two entries each; the flow requests name no flow of ours.
  auto wc = poll_n(8);
  EXPECT_EQ(wc.size(), 8u);
  EXPECT_EQ(d_->entries_seen, 8u);
  close(fd);
}

TEST_F(LibTest, EventsPassThroughTheReceiveQueueMapping) {
  make_queues();
  sockaddr_in a = inet("0.0.0.0", 8080);
  uint32_t l = 0;
  ASSERT_EQ(cl_listen(ctx_, cq_, &a, nullptr, &l), 0);
  d_->accept_on(l);
  auto wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_ACCEPTED});
  EXPECT_EQ(wc[0].wr_id, l);  // the listener, not mapped through the RQ
  cl_flow f = wc[0].flow;
  EXPECT_EQ(f, 500u);

  // A receive on the RQ is still mapped back to its wr_id, next to an event that names the
  // RQ's pipe and sets kCompRecv as well: an event is never mapped.
  cl_recv_wr r{0x5151, nullptr, 0, 64};
  ASSERT_EQ(cl_post_recv(rq_, &r, 1), 1);
  cl_send_wr s{.wr_id = 8, .length = 10, .opcode = CL_OP_SEND, .target = rq_};
  ASSERT_EQ(cl_post_send(sq_, &s, 1), 1);
  wc = poll_n(2);
  ASSERT_EQ(wc.size(), 2u);
  const cl_wc& recv = (wc[0].flags & CL_WC_RECV) ? wc[0] : wc[1];
  EXPECT_EQ(recv.wr_id, 0x5151u);
  EXPECT_EQ(recv.flow, 0u);
  // kEvAccepted has the value of kOpSend, the opcode of receive completions.
  abi::Completion ev{};
  ev.wr_id = 3;
  ev.flags = abi::kCompEvent | abi::kCompRecv;
  ev.opcode = abi::kEvAccepted;
  ev.flow = f + 1;
  ev.pipe = 3;  // the RQ's pipe (CQ 1, SQ 2, RQ 3)
  d_->inject(1, ev);
  wc = poll_n(1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 3u);
  EXPECT_EQ(wc[0].status, 0);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_EVENT | CL_WC_RECV});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_EV_ACCEPTED});
  EXPECT_EQ(wc[0].flow, f + 1);
}

TEST(LibOpen, AnOlderDaemonHasNoFlows) {
  FakeOptions o;
  o.max_version = 1;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "v1"};
  cl_ctx* ctx = nullptr;
  ASSERT_EQ(cl_open(&a, &ctx), 0);
  cl_cq* cq = nullptr;
  cl_sq* sq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx, 128, 0, 0, &cq), 0);
  ASSERT_EQ(cl_sq_create(ctx, cq, 64, &sq), 0);
  sockaddr_in addr = inet("198.18.0.2", 80);
  uint32_t l = 0xdead;
  cl_flow f = 0xdead;
  EXPECT_EQ(cl_listen(ctx, cq, &addr, nullptr, &l), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_connect(ctx, cq, &addr, nullptr, &f), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_unlisten(ctx, 1), CL_EOPNOTSUPP);
  EXPECT_EQ(l, 0xdeadu);
  EXPECT_EQ(f, 0xdeadu);
  EXPECT_EQ(d.flow_msgs, 0);
  for (uint32_t op : {CL_OP_FLOW_SEND, CL_OP_FLOW_RECV, CL_OP_FLOW_CLOSE, CL_OP_FLOW_ABORT}) {
    cl_send_wr w{.opcode = op};
    EXPECT_EQ(cl_post_send(sq, &w, 1), CL_EOPNOTSUPP) << op;
  }
  EXPECT_EQ(d.entries_seen, 0u);
  EXPECT_EQ(cl_close(ctx), 0);
}

// ---- Queue pairs (version 3) ----

class QpTest : public LibTest {
 protected:
  void SetUp() override {
    LibTest::SetUp();
    ASSERT_EQ(cl_cq_create(ctx_, 1024, 0, 0, &cq_), 0);
    ASSERT_EQ(cl_pd_alloc(ctx_, &pd_), 0);
    fd_ = sealed_memfd(1u << 16);
    ASSERT_EQ(cl_mr_reg(ctx_, fd_, 1u << 16, CL_ACCESS_ALL_FOR_TEST, &mr_), 0);
  }
  void TearDown() override {
    LibTest::TearDown();
    if (fd_ >= 0) close(fd_);
  }
  static constexpr unsigned CL_ACCESS_ALL_FOR_TEST =
      CL_ACCESS_READ | CL_ACCESS_WRITE | CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE;
  int create(cl_qp** qp, uint32_t send = 16, uint32_t recv = 16, const char* params = nullptr,
             cl_cq* cq = nullptr) {
    cl_qp_init_attr a{cq != nullptr ? cq : cq_, send, recv, params};
    return cl_qp_create(pd_, &a, qp);
  }
  std::vector<abi::SendEntry> entries() {
    std::lock_guard lk(d_->rec_mu);
    return d_->flow_entries;
  }
  std::vector<abi::QpModify> modifies() {
    std::lock_guard lk(d_->rec_mu);
    return d_->qp_modifies;
  }

  cl_pd* pd_ = nullptr;
  cl_mr* mr_ = nullptr;
  int fd_ = -1;
};

TEST_F(QpTest, OneProtectionDomainPerContext) {
  cl_pd* again = reinterpret_cast<cl_pd*>(0x1);
  EXPECT_EQ(cl_pd_alloc(ctx_, &again), CL_EBUSY);
  EXPECT_EQ(again, nullptr);
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  EXPECT_EQ(cl_pd_dealloc(pd_), CL_EBUSY);  // a QP of it exists
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);
  EXPECT_EQ(cl_pd_alloc(ctx_, &pd_), 0);  // free again
  EXPECT_EQ(cl_pd_alloc(nullptr, &again), CL_EINVAL);
  EXPECT_EQ(cl_pd_dealloc(nullptr), CL_EINVAL);
}

TEST_F(QpTest, MrKeys) {
  EXPECT_EQ(cl_mr_lkey(mr_), cl_mr_id(mr_));
  EXPECT_EQ(cl_mr_rkey(mr_), FakeDaemon::kRkeyTag << 16 | cl_mr_id(mr_));
  cl_mr* local = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd_, 4096, CL_ACCESS_READ, &local), 0);
  EXPECT_EQ(cl_mr_rkey(local), 0u);  // no remote access, no key
  EXPECT_EQ(cl_mr_rkey(nullptr), 0u);
  EXPECT_EQ(cl_mr_lkey(nullptr), UINT32_MAX);
}

TEST_F(QpTest, CreateSendsTheRequestAndKeepsTheReply) {
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  ASSERT_EQ(create(&qp, 100, 200, "dcqcn off"), 0);
  EXPECT_EQ(cl_qp_num(qp), FakeDaemon::kQpnBase);
  EXPECT_EQ(cl_qp_flow(qp), 500u);
  EXPECT_EQ(d_->live_qps, 1);
  EXPECT_EQ(d_->live_pipes, pipes + 1);  // the QP's own submit queue
  {
    std::lock_guard lk(d_->rec_mu);
    ASSERT_EQ(d_->qp_creates.size(), 1u);
    const abi::QpCreate& c = d_->qp_creates[0];
    EXPECT_EQ(c.cq, 1u);  // the CQ's pipe
    EXPECT_EQ(c.max_send_wr, 100u);
    EXPECT_EQ(c.max_recv_wr, 200u);
    EXPECT_STREQ(c.params, "dcqcn off");
    // The next power of two of 300 entries, bound to the QP's CQ.
    const abi::PipeCreate& p = d_->pipe_creates.back();
    EXPECT_EQ(p.kind, static_cast<uint8_t>(abi::PipeKind::kSubmit));
    EXPECT_EQ(p.entries, 512u);
    EXPECT_EQ(p.cq, 1u);
  }
  cl_qp* small = nullptr;
  ASSERT_EQ(create(&small, 1, 1), 0);
  {
    std::lock_guard lk(d_->rec_mu);
    EXPECT_EQ(d_->pipe_creates.back().entries, 64u);  // at least the smallest pipe
    EXPECT_EQ(d_->qp_creates.back().params[0], '\0');
  }
  EXPECT_EQ(cl_qp_num(small), FakeDaemon::kQpnBase + 1);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_qp_destroy(small), 0);
  EXPECT_EQ(d_->live_qps, 0);
  EXPECT_EQ(d_->live_pipes, pipes);
  EXPECT_EQ(cl_qp_num(nullptr), 0u);
  EXPECT_EQ(cl_qp_flow(nullptr), UINT32_MAX);
}

TEST_F(QpTest, CreateChecksItsArgumentsBeforeAsking) {
  cl_qp* qp = reinterpret_cast<cl_qp*>(0x1);
  cl_qp_init_attr a{cq_, 16, 16, nullptr};
  EXPECT_EQ(cl_qp_create(nullptr, &a, &qp), CL_EINVAL);
  EXPECT_EQ(cl_qp_create(pd_, nullptr, &qp), CL_EINVAL);
  EXPECT_EQ(cl_qp_create(pd_, &a, nullptr), CL_EINVAL);
  a.cq = nullptr;
  EXPECT_EQ(cl_qp_create(pd_, &a, &qp), CL_EINVAL);
  EXPECT_EQ(qp, nullptr);
  for (auto [s, r] : {std::pair{0u, 1u}, {1u, 0u}, {4097u, 1u}, {1u, 4097u}}) {
    EXPECT_EQ(create(&qp, s, r), CL_EINVAL) << s << " " << r;
  }
  std::string params(abi::kQpParamsMax, 'x');
  EXPECT_EQ(create(&qp, 1, 1, params.c_str()), CL_EINVAL);  // no room for its NUL
  params.pop_back();
  ASSERT_EQ(create(&qp, 1, 1, params.c_str()), 0);  // the longest that fits
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  // A CQ of another context.
  FakeDaemon other;
  cl_open_attr oa{other.path().c_str(), "other"};
  cl_ctx* octx = nullptr;
  ASSERT_EQ(cl_open(&oa, &octx), 0);
  cl_cq* ocq = nullptr;
  ASSERT_EQ(cl_cq_create(octx, 64, 0, 0, &ocq), 0);
  EXPECT_EQ(create(&qp, 1, 1, nullptr, ocq), CL_EINVAL);
  EXPECT_EQ(cl_close(octx), 0);
  EXPECT_EQ(d_->qp_msgs, 2);  // only the two that were fine were sent (create and destroy)
}

TEST_F(QpTest, TheCqMustHaveRoomForEveryRequest) {
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  EXPECT_EQ(create(&qp, 32, 33, nullptr, cq), CL_EINVAL);  // 65 > 64
  EXPECT_EQ(d_->live_pipes, pipes);
  EXPECT_EQ(d_->qp_msgs, 0);
  ASSERT_EQ(create(&qp, 32, 32, nullptr, cq), 0);
  cl_sq* sq = nullptr;
  EXPECT_EQ(cl_sq_create(ctx_, cq, 64, &sq), CL_EINVAL);  // the QP holds all of it
  cl_qp* more = nullptr;
  EXPECT_EQ(create(&more, 1, 1, nullptr, cq), CL_EINVAL);
  EXPECT_EQ(cl_cq_destroy(cq), CL_EBUSY);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  ASSERT_EQ(cl_sq_create(ctx_, cq, 64, &sq), 0);  // the room came back
  EXPECT_EQ(cl_sq_destroy(sq), 0);
  EXPECT_EQ(cl_cq_destroy(cq), 0);
}

TEST_F(QpTest, ARefusedCreateGivesItsRoomBack) {
  d_->qp_create_status = CL_ENOSPC;
  cl_qp* qp = nullptr;
  int pipes = d_->live_pipes;
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  EXPECT_EQ(create(&qp, 32, 32, nullptr, cq), CL_ENOSPC);
  EXPECT_EQ(qp, nullptr);
  EXPECT_EQ(d_->live_pipes, pipes + 1);  // the CQ only: the QP's submit queue went again
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);      // no QP counted
  pd_ = nullptr;
  EXPECT_EQ(cl_cq_destroy(cq), 0);  // nothing attached
}

TEST_F(QpTest, ModifyAndQueryConvertTheAttributes) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_attr a{};
  a.qp_state = CL_QPS_RTR;
  a.path_mtu = 1024;
  a.dest_qp_num = 0xabcdef;
  a.rq_psn = 0x123456;
  a.sq_psn = 0x654321;
  inet_pton(AF_INET, "198.18.0.2", &a.remote_ip);  // network order
  a.qp_access_flags = CL_ACCESS_REMOTE_WRITE;
  a.timeout = 14;
  a.retry_cnt = 6;
  a.rnr_retry = 5;
  a.min_rnr_timer = 12;
  a.max_rd_atomic = 3;
  a.max_dest_rd_atomic = 4;
  a.selective_repeat = 1;
  a.rate_limit_kbps = 1'000'000;
  ASSERT_EQ(cl_qp_modify(qp, &a, (1u << 15) - 1), 0);
  auto m = modifies();
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].qp, cl_qp_flow(qp));
  EXPECT_EQ(m[0].mask, abi::kQpAttrAll);
  const abi::QpAttr& w = m[0].attr;
  EXPECT_EQ(w.state, abi::kQpRtr);
  EXPECT_EQ(w.pmtu, 1024u);
  EXPECT_EQ(w.dest_qpn, 0xabcdefu);
  EXPECT_EQ(w.rq_psn, 0x123456u);
  EXPECT_EQ(w.sq_psn, 0x654321u);
  EXPECT_EQ(w.remote_ip, 0xc6120002u);  // host order on the wire
  EXPECT_EQ(w.access, abi::kAccessRemoteWrite);
  EXPECT_EQ(w.timeout, 14);
  EXPECT_EQ(w.retry_cnt, 6);
  EXPECT_EQ(w.rnr_retry, 5);
  EXPECT_EQ(w.min_rnr_timer, 12);
  EXPECT_EQ(w.max_rd_atomic, 3);
  EXPECT_EQ(w.max_dest_rd_atomic, 4);
  EXPECT_EQ(w.selective_repeat, 1);
  EXPECT_EQ(w.rate_limit_kbps, 1'000'000u);
  cl_qp_attr q{};
  ASSERT_EQ(cl_qp_query(qp, &q), 0);
  EXPECT_EQ(std::memcmp(&q, &a, sizeof q), 0);  // all of it back, the address in network order

  EXPECT_EQ(cl_qp_modify(qp, &a, 1u << 15), CL_EOPNOTSUPP);
  a.qp_state = 5;
  EXPECT_EQ(cl_qp_modify(qp, &a, CL_QP_STATE), CL_EINVAL);
  EXPECT_EQ(cl_qp_modify(qp, &a, CL_QP_PATH_MTU), 0);  // the state is not in the mask
  EXPECT_EQ(cl_qp_modify(qp, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_qp_query(qp, nullptr), CL_EINVAL);
  EXPECT_EQ(modifies().size(), 2u);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, ConnectWalksToRtsWithTheDefaultsAndTheOverrides) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_dest local{}, remote{};
  ASSERT_EQ(cl_qp_local_dest(qp, mr_, &local), 0);
  remote.qpn = 0x777;
  remote.psn = 0xfedcba;
  remote.gid[10] = remote.gid[11] = 0xff;
  remote.gid[12] = 198;
  remote.gid[13] = 18;
  remote.gid[14] = 0;
  remote.gid[15] = 2;
  ASSERT_EQ(cl_qp_connect(qp, &local, &remote, nullptr, 0), 0);
  auto m = modifies();
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].mask, abi::kQpAttrState | abi::kQpAttrAccess);
  EXPECT_EQ(m[0].attr.state, abi::kQpInit);
  EXPECT_EQ(m[0].attr.access, abi::kAccessRemoteRead | abi::kAccessRemoteWrite);
  EXPECT_EQ(m[1].mask, abi::kQpAttrState | abi::kQpAttrPmtu | abi::kQpAttrDestQpn |
                           abi::kQpAttrRqPsn | abi::kQpAttrRemoteIp | abi::kQpAttrMaxDestRdAtomic |
                           abi::kQpAttrMinRnrTimer);
  EXPECT_EQ(m[1].attr.state, abi::kQpRtr);
  EXPECT_EQ(m[1].attr.pmtu, 4096u);
  EXPECT_EQ(m[1].attr.dest_qpn, 0x777u);
  EXPECT_EQ(m[1].attr.rq_psn, 0xfedcbau);
  EXPECT_EQ(m[1].attr.remote_ip, 0xc6120002u);
  EXPECT_EQ(m[1].attr.max_dest_rd_atomic, 16);
  EXPECT_EQ(m[1].attr.min_rnr_timer, 12);
  EXPECT_EQ(m[2].mask, abi::kQpAttrState | abi::kQpAttrSqPsn | abi::kQpAttrTimeout |
                           abi::kQpAttrRetryCnt | abi::kQpAttrRnrRetry | abi::kQpAttrMaxRdAtomic);
  EXPECT_EQ(m[2].attr.state, abi::kQpRts);
  EXPECT_EQ(m[2].attr.sq_psn, local.psn);
  EXPECT_EQ(m[2].attr.timeout, 14);
  EXPECT_EQ(m[2].attr.retry_cnt, 7);
  EXPECT_EQ(m[2].attr.rnr_retry, 7);
  EXPECT_EQ(m[2].attr.max_rd_atomic, 16);

  // Overrides: a smaller MTU and selective repeat at RTR, a rate at RTS, read-only access.
  cl_qp* qp2 = nullptr;
  ASSERT_EQ(create(&qp2), 0);
  cl_qp_attr opt{};
  opt.path_mtu = 1024;
  opt.selective_repeat = 1;
  opt.rate_limit_kbps = 5000;
  opt.qp_access_flags = CL_ACCESS_REMOTE_READ;
  opt.retry_cnt = 2;
  unsigned mask = CL_QP_PATH_MTU | CL_QP_SELECTIVE_REPEAT | CL_QP_RATE_LIMIT | CL_QP_ACCESS_FLAGS |
                  CL_QP_RETRY_CNT;
  ASSERT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, mask), 0);
  m = modifies();
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[3].attr.access, abi::kAccessRemoteRead);
  EXPECT_EQ(m[4].mask & abi::kQpAttrSelectiveRepeat, abi::kQpAttrSelectiveRepeat);
  EXPECT_EQ(m[4].attr.selective_repeat, 1);
  EXPECT_EQ(m[4].attr.pmtu, 1024u);
  EXPECT_EQ(m[5].mask & abi::kQpAttrRateLimit, abi::kQpAttrRateLimit);
  EXPECT_EQ(m[5].attr.rate_limit_kbps, 5000u);
  EXPECT_EQ(m[5].attr.retry_cnt, 2);

  // A port with a smaller MTU: the largest PMTU it carries is the default.
  d_->max_pmtu = 1024;
  cl_qp* qp3 = nullptr;
  ASSERT_EQ(create(&qp3), 0);
  ASSERT_EQ(cl_qp_connect(qp3, &local, &remote, nullptr, 0), 0);
  m = modifies();
  ASSERT_EQ(m.size(), 9u);
  EXPECT_EQ(m[7].mask & abi::kQpAttrPmtu, abi::kQpAttrPmtu);
  EXPECT_EQ(m[7].attr.pmtu, 1024u);
  EXPECT_EQ(cl_qp_destroy(qp3), 0);

  // Refused before anything is sent.
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, CL_QP_STATE), CL_EINVAL);
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, nullptr, CL_QP_PATH_MTU), CL_EINVAL);
  EXPECT_EQ(cl_qp_connect(qp2, &local, &remote, &opt, 1u << 20), CL_EOPNOTSUPP);
  cl_qp_dest bad = remote;
  bad.gid[10] = 0;  // not IPv4-mapped
  EXPECT_EQ(cl_qp_connect(qp2, &local, &bad, nullptr, 0), CL_EINVAL);
  bad = remote;
  bad.psn = 1u << 24;
  EXPECT_EQ(cl_qp_connect(qp2, &local, &bad, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(modifies().size(), 9u);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  EXPECT_EQ(cl_qp_destroy(qp2), 0);
}

TEST_F(QpTest, LocalDestHasTheQpnARandomPsnAndTheGid) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_qp_dest d{}, e{};
  ASSERT_EQ(cl_qp_local_dest(qp, mr_, &d), 0);
  EXPECT_EQ(d.qpn, cl_qp_num(qp));
  EXPECT_LT(d.psn, 1u << 24);
  const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 198, 18, 0, 1};
  EXPECT_EQ(std::memcmp(d.gid, gid, 16), 0);
  EXPECT_EQ(d.rkey, cl_mr_rkey(mr_));
  EXPECT_EQ(d.addr, 0u);
  EXPECT_EQ(d.length, 1u << 16);
  // No MR: nothing offered. The PSN is drawn each time (equal by chance once in 2^24).
  std::set<uint32_t> psns{d.psn};
  for (int i = 0; i < 4; i++) {
    ASSERT_EQ(cl_qp_local_dest(qp, nullptr, &e), 0);
    EXPECT_EQ(e.rkey, 0u);
    EXPECT_EQ(e.length, 0u);
    psns.insert(e.psn);
  }
  EXPECT_GE(psns.size(), 4u);
  EXPECT_EQ(cl_qp_local_dest(nullptr, mr_, &d), CL_EINVAL);
  EXPECT_EQ(cl_qp_local_dest(qp, mr_, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, PostWritesTheEntriesTheDaemonExpects) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_flow f = cl_qp_flow(qp);
  auto* heap = static_cast<uint8_t*>(cl_alloc(ctx_, 4096, 0));
  ASSERT_NE(heap, nullptr);
  uint64_t hoff = cl_heap_offset(ctx_, heap);
  cl_recv_wr r[2] = {{0x10, mr_, 100, 2000}, {0x11, nullptr, hoff, 64}};
  ASSERT_EQ(cl_qp_post_recv(qp, r, 2), 2);
  cl_qp_wr w[5] = {
      {.wr_id = 1, .mr = mr_, .offset = 8, .length = 100, .opcode = CL_WR_SEND, .imm = 99},
      {.wr_id = 2, .offset = hoff, .length = 64, .opcode = CL_WR_SEND_WITH_IMM, .imm = 0xabc},
      {.wr_id = 3,
       .mr = mr_,
       .offset = 4096,
       .length = 4096,
       .opcode = CL_WR_RDMA_WRITE,
       .rkey = 0x5a0009,
       .remote_addr = 0x10000},
      {.wr_id = 4,
       .mr = mr_,
       .length = 1,
       .opcode = CL_WR_RDMA_WRITE_WITH_IMM,
       .imm = 7,
       .rkey = 0x77,
       .remote_addr = 3},
      {.wr_id = 5,
       .mr = mr_,
       .offset = 60000,
       .length = 5536,
       .opcode = CL_WR_RDMA_READ,
       .rkey = 0x99,
       .remote_addr = 1u << 20}};
  ASSERT_EQ(cl_qp_post_send(qp, w, 5), 5);
  auto wc = poll_n(5);  // the fake completes sends, writes and reads, and keeps receives
  ASSERT_EQ(wc.size(), 5u);
  auto e = entries();
  ASSERT_EQ(e.size(), 7u);
  for (const abi::SendEntry& x : e)
    EXPECT_EQ(x.target, f);
  EXPECT_EQ(e[0].opcode, abi::kOpFlowRecv);
  EXPECT_EQ(e[0].wr_id, 0x10u);
  EXPECT_EQ(e[0].mr, cl_mr_id(mr_));
  EXPECT_EQ(e[0].length, 2000u);
  EXPECT_EQ(e[0].offset, 100u);
  EXPECT_EQ(e[1].mr, abi::kHeapMr);
  EXPECT_EQ(e[1].offset, hoff);
  // SEND: no immediate even with imm set.
  EXPECT_EQ(e[2].opcode, abi::kOpFlowSend);
  EXPECT_EQ(e[2].flags, 0);
  EXPECT_EQ(e[2].imm, 0u);
  EXPECT_EQ(e[2].offset, 8u);
  EXPECT_EQ(e[2].length, 100u);
  EXPECT_EQ(e[3].opcode, abi::kOpFlowSend);
  EXPECT_EQ(e[3].flags, abi::kSendImm);
  EXPECT_EQ(e[3].imm, 0xabcu);
  EXPECT_EQ(e[3].mr, abi::kHeapMr);
  EXPECT_EQ(e[4].opcode, abi::kOpRdmaWrite);
  EXPECT_EQ(e[4].flags, 0);
  EXPECT_EQ(e[4].remote_offset, 0x10000u);
  EXPECT_EQ(e[4].remote_mr, 0x5a0009u);
  EXPECT_EQ(e[4].mr, cl_mr_id(mr_));
  EXPECT_EQ(e[4].offset, 4096u);
  EXPECT_EQ(e[4].length, 4096u);
  EXPECT_EQ(e[5].opcode, abi::kOpRdmaWrite);
  EXPECT_EQ(e[5].flags, abi::kSendImm);
  EXPECT_EQ(e[5].imm, 7u);
  EXPECT_EQ(e[5].remote_offset, 3u);
  EXPECT_EQ(e[5].remote_mr, 0x77u);
  EXPECT_EQ(e[6].opcode, abi::kOpRdmaRead);
  EXPECT_EQ(e[6].flags, 0);
  EXPECT_EQ(e[6].remote_offset, 1u << 20);
  EXPECT_EQ(e[6].remote_mr, 0x99u);
  EXPECT_EQ(e[6].offset, 60000u);
  EXPECT_EQ(e[6].length, 5536u);
  for (const abi::SendEntry& x : e)
    for (uint8_t b : x.reserved)
      EXPECT_EQ(b, 0);
  // The completions pass through with their opcodes and the QP's flow.
  const uint32_t ops[] = {CL_OP_FLOW_SEND, CL_OP_FLOW_SEND, CL_OP_RDMA_WRITE, CL_OP_RDMA_WRITE,
                          CL_OP_RDMA_READ};
  for (size_t i = 0; i < wc.size(); i++) {
    EXPECT_EQ(wc[i].wr_id, i + 1);
    EXPECT_EQ(wc[i].opcode, ops[i]);
    EXPECT_EQ(wc[i].flow, f);
    EXPECT_EQ(wc[i].status, 0);
  }
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, LibraryRejectsBadWorkRequestsBeforePosting) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  int fd = sealed_memfd(4096);
  cl_mr* ro = nullptr;
  cl_mr* wo = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &ro), 0);
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_WRITE, &wo), 0);
  // Each bad request follows a good one: nothing of the call is posted.
  auto post = [&](cl_qp_wr w) {
    cl_qp_wr two[2] = {{.mr = ro, .length = 1, .opcode = CL_WR_SEND}, w};
    return cl_qp_post_send(qp, two, 2);
  };
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_SEND}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_SEND_WITH_IMM}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_RDMA_WRITE}), CL_EACCES);
  EXPECT_EQ(post({.mr = wo, .length = 16, .opcode = CL_WR_RDMA_WRITE_WITH_IMM}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .length = 16, .opcode = CL_WR_RDMA_READ}), CL_EACCES);
  EXPECT_EQ(post({.mr = ro, .offset = 4000, .length = 97, .opcode = CL_WR_SEND}), CL_EFAULT);
  EXPECT_EQ(post({.mr = wo, .offset = 4097, .opcode = CL_WR_RDMA_READ}), CL_EFAULT);
  EXPECT_EQ(post({.length = (1u << 30) + 1, .opcode = CL_WR_RDMA_WRITE}), CL_EINVAL);
  EXPECT_EQ(post({.length = 2, .opcode = CL_WR_RDMA_WRITE, .remote_addr = UINT64_MAX - 1}),
            CL_EFAULT);
  EXPECT_EQ(post({.opcode = CL_WR_RDMA_READ + 1}), CL_EOPNOTSUPP);
  cl_recv_wr rr[2] = {{1, wo, 0, 16}, {2, ro, 0, 16}};
  EXPECT_EQ(cl_qp_post_recv(qp, rr, 2), CL_EACCES);
  rr[1] = {2, wo, 4000, 100};
  EXPECT_EQ(cl_qp_post_recv(qp, rr, 2), CL_EFAULT);
  EXPECT_EQ(cl_qp_post_send(nullptr, nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_send(qp, nullptr, 1), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_recv(qp, nullptr, 1), CL_EINVAL);
  EXPECT_EQ(cl_qp_post_send(qp, nullptr, 0), 0);
  // The largest length, and the whole MR, are fine.
  EXPECT_EQ(post({.mr = ro, .length = 4096, .opcode = CL_WR_RDMA_WRITE}), 2);
  EXPECT_EQ(post({.mr = wo, .length = 4096, .opcode = CL_WR_RDMA_READ}), 2);
  auto wc = poll_n(4);
  EXPECT_EQ(wc.size(), 4u);
  EXPECT_EQ(d_->entries_seen, 4u);
  // A plain submit queue takes no RDMA opcodes: they need a QP's rkey and remote address.
  cl_sq* sq = nullptr;
  ASSERT_EQ(cl_sq_create(ctx_, cq_, 64, &sq), 0);
  cl_send_wr sw{.opcode = CL_OP_RDMA_WRITE};
  EXPECT_EQ(cl_post_send(sq, &sw, 1), CL_EOPNOTSUPP);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
  close(fd);
}

TEST_F(QpTest, QpCompletionsKeepTheirWrIdAndFlags) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  cl_rq* rq = nullptr;
  ASSERT_EQ(cl_rq_create(ctx_, cq_, 64, &rq), 0);
  cl_recv_wr r{0x5151, nullptr, 0, 64};
  ASSERT_EQ(cl_post_recv(rq, &r, 1), 1);
  uint32_t rq_pipe;
  {
    std::lock_guard lk(d_->rec_mu);
    rq_pipe = static_cast<uint32_t>(d_->pipe_creates.size());  // the pipes are numbered from 1
  }
  // A receive a WRITE with immediate consumed, and one a SEND with immediate consumed; both
  // carry kCompRecv and name the RQ's pipe number, yet are the QP's and keep their wr_id.
  abi::Completion c{};
  c.wr_id = 0x42;
  c.opcode = abi::kOpFlowRecv;
  c.flags = abi::kCompRecv | abi::kCompImm | abi::kCompRdmaWrite;
  c.imm = 0x1000;
  c.length = 0x1000;
  c.flow = cl_qp_flow(qp);
  c.pipe = static_cast<uint16_t>(rq_pipe);
  d_->inject(1, c);
  c.wr_id = 0x43;
  c.flags = abi::kCompRecv | abi::kCompImm;
  d_->inject(1, c);
  c.wr_id = 0x44;  // a write's completion, as if kCompRecv leaked onto it
  c.opcode = abi::kOpRdmaWrite;
  c.status = CL_ECANCELED;
  d_->inject(1, c);
  auto wc = poll_n(3);
  ASSERT_EQ(wc.size(), 3u);
  EXPECT_EQ(wc[0].wr_id, 0x42u);
  EXPECT_EQ(wc[0].flags, uint32_t{CL_WC_RECV | CL_WC_IMM | CL_WC_RDMA_WRITE});
  EXPECT_EQ(wc[0].opcode, uint32_t{CL_OP_FLOW_RECV});
  EXPECT_EQ(wc[0].imm, 0x1000u);
  EXPECT_EQ(wc[0].flow, cl_qp_flow(qp));
  EXPECT_EQ(wc[1].wr_id, 0x43u);
  EXPECT_EQ(wc[1].flags, uint32_t{CL_WC_RECV | CL_WC_IMM});
  EXPECT_EQ(wc[2].wr_id, 0x44u);
  EXPECT_EQ(wc[2].opcode, uint32_t{CL_OP_RDMA_WRITE});
  EXPECT_EQ(wc[2].status, CL_ECANCELED);
  EXPECT_EQ(cl_qp_destroy(qp), 0);
}

TEST_F(QpTest, DestroyFreesTheHandleEvenWhenTheDaemonIsGone) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  d_->kill();
  while (!d_->dead())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(cl_qp_destroy(qp), CL_EDAEMON);  // and ASan sees no leak
  EXPECT_EQ(cl_pd_dealloc(pd_), 0);
}

TEST_F(QpTest, CloseFreesQpsAndThePd) {
  cl_qp* qp = nullptr;
  ASSERT_EQ(create(&qp), 0);
  ASSERT_EQ(create(&qp), 0);
  EXPECT_EQ(cl_close(ctx_), 0);  // ASan: nothing leaks
  ctx_ = nullptr;
}

TEST(LibOpen, AnOlderDaemonHasNoQueuePairs) {
  FakeOptions o;
  o.max_version = 2;
  FakeDaemon d(o);
  cl_open_attr a{d.path().c_str(), "v2"};
  cl_ctx* ctx = nullptr;
  ASSERT_EQ(cl_open(&a, &ctx), 0);
  cl_pd* pd = reinterpret_cast<cl_pd*>(0x1);
  EXPECT_EQ(cl_pd_alloc(ctx, &pd), CL_EOPNOTSUPP);
  EXPECT_EQ(pd, nullptr);
  // The field was reserved before version 3: whatever the daemon left in it is no key.
  int fd = memfd_create("mr", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx, fd, 4096, CL_ACCESS_REMOTE_WRITE, &mr), 0);
  EXPECT_EQ(cl_mr_rkey(mr), 0u);
  EXPECT_EQ(d.qp_msgs, 0);
  EXPECT_EQ(cl_close(ctx), 0);
  close(fd);
}

// ---- cl_qp_exchange over a socketpair (no daemon) ----

class QpExchange : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fd_), 0); }
  void TearDown() override {
    for (int f : fd_)
      if (f >= 0) close(f);
  }
  static cl_qp_dest dest(uint32_t qpn, uint32_t psn, uint8_t last, uint32_t rkey) {
    cl_qp_dest d{};
    d.qpn = qpn;
    d.psn = psn;
    d.gid[10] = d.gid[11] = 0xff;
    d.gid[12] = 10;
    d.gid[13] = 99;
    d.gid[14] = 0;
    d.gid[15] = last;
    d.rkey = rkey;
    d.addr = 0;
    d.length = 1ull << 40;
    return d;
  }
  void peer_writes(const std::string& s) {
    ASSERT_EQ(write(fd_[1], s.data(), s.size()), static_cast<ssize_t>(s.size()));
  }
  std::string peer_reads() {
    char buf[256];
    ssize_t n = read(fd_[1], buf, sizeof buf);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  }
  int fd_[2] = {-1, -1};
};

TEST_F(QpExchange, GoodLinesBothWays) {
  cl_qp_dest a = dest(0x1234, 0xabcdef, 1, 0x5a0001), b = dest(0xffffff, 0, 2, 0xdeadbeef);
  b.addr = 0x0123456789abcdefull;
  cl_qp_dest got_a{}, got_b{};
  int rb = 1;
  std::thread t([&] { rb = cl_qp_exchange(fd_[1], &b, &got_a, 5000); });
  int ra = cl_qp_exchange(fd_[0], &a, &got_b, 5000);
  t.join();
  ASSERT_EQ(ra, 0);
  ASSERT_EQ(rb, 0);
  EXPECT_EQ(std::memcmp(&got_a, &a, sizeof a), 0);
  EXPECT_EQ(std::memcmp(&got_b, &b, sizeof b), 0);
}

TEST_F(QpExchange, TheLineIsExactlyAsDocumentedAndNothingAfterItIsRead) {
  cl_qp_dest a = dest(0x1234, 0xabcdef, 1, 0x5a0001);
  // The peer's line in uppercase, followed by bytes the app reads itself afterwards.
  peer_writes(
      "CLEAVE-RC 1 00ABCD:000001:00000000000000000000FFFF0A630002:0000BEEF:0000000000000010:"
      "0000000000001000\nNEXT");
  cl_qp_dest r{};
  ASSERT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), 0);
  EXPECT_EQ(peer_reads(),
            "CLEAVE-RC 1 001234:abcdef:00000000000000000000ffff0a630001:005a0001:0000000000000000:"
            "0000010000000000\n");
  EXPECT_EQ(r.qpn, 0xabcdu);
  EXPECT_EQ(r.psn, 1u);
  EXPECT_EQ(r.gid[15], 2);
  EXPECT_EQ(r.rkey, 0xbeefu);
  EXPECT_EQ(r.addr, 0x10u);
  EXPECT_EQ(r.length, 0x1000u);
  char rest[8] = {};
  ASSERT_EQ(read(fd_[0], rest, sizeof rest), 4);
  EXPECT_STREQ(rest, "NEXT");
}

TEST_F(QpExchange, GarbageIsEproto) {
  const char* good =
      "CLEAVE-RC 1 00abcd:000001:00000000000000000000ffff0a630002:0000beef:0000000000000010:"
      "0000000000001000\n";
  std::string bad[] = {
      "hello\n",
      "\n",
      std::string(good).replace(10, 1, "2"),              // another version
      std::string(good).replace(14, 1, "g"),              // not a hex digit
      std::string(good).replace(18, 1, "-"),              // not the separator
      std::string(good).replace(0, 12, "CLEAVE-RC 1  "),  // one character too many
      std::string(good).erase(20, 1),                     // one too few
      std::string(good).replace(12, 1, " "),              // a space in a number
  };
  for (const std::string& s : bad) {
    TearDown();
    SetUp();  // a fresh pair each time: nothing of the last line is left
    peer_writes(s);
    cl_qp_dest a = dest(1, 2, 1, 0), r = dest(9, 9, 9, 9), before = r;
    EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_EPROTO) << s;
    EXPECT_EQ(std::memcmp(&r, &before, sizeof r), 0) << s;  // untouched
  }
}

TEST_F(QpExchange, AnEndlessLineIsEprotoNotAHang) {
  peer_writes(std::string(4096, 'A'));  // no newline, ever; the peer stays connected
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  auto t0 = Clock::now();
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 5000), CL_EPROTO);
  EXPECT_LT(ms_since(t0), 1000.0);
  // It stopped reading at the limit: most of the line is still in the socket.
  char buf[8192];
  EXPECT_GT(read(fd_[0], buf, sizeof buf), 3900);
}

TEST_F(QpExchange, ASilentPeerTimesOut) {
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  auto t0 = Clock::now();
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 200), CL_ETIMEDOUT);
  double ms = ms_since(t0);
  EXPECT_GE(ms, 190.0);
  EXPECT_LT(ms, 2000.0);
  // Half a line, then silence: also a timeout.
  peer_writes("CLEAVE-RC 1 0000");
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 100), CL_ETIMEDOUT);
}

TEST_F(QpExchange, ThePeerClosingIsConnreset) {
  peer_writes("CLEAVE-RC 1 0000");
  ASSERT_EQ(shutdown(fd_[1], SHUT_WR), 0);  // half a line, then EOF
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_ECONNRESET);
  // Gone altogether: the write fails.
  close(fd_[1]);
  fd_[1] = -1;
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 1000), CL_EPIPE);
}

TEST_F(QpExchange, BadArguments) {
  cl_qp_dest a = dest(1, 2, 1, 0), r{};
  EXPECT_EQ(cl_qp_exchange(-1, &a, &r, 10), CL_EINVAL);
  EXPECT_EQ(cl_qp_exchange(fd_[0], nullptr, &r, 10), CL_EINVAL);
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, nullptr, 10), CL_EINVAL);
  a.qpn = 1u << 24;
  EXPECT_EQ(cl_qp_exchange(fd_[0], &a, &r, 10), CL_EINVAL);
  char c;
  EXPECT_EQ(recv(fd_[1], &c, 1, MSG_DONTWAIT), -1);  // nothing was written
}

// ---- The daemon goes away ----

TEST_F(LibTest, SpinningPollerSeesDaemonDeathWithinASecond) {
  make_queues();
  std::atomic<int> result{1};
  std::atomic<bool> polling{false};
  Clock::time_point done;
  std::thread t([&] {
    cl_wc wc[8];
    int r;
    polling = true;
    while ((r = cl_poll_cq(cq_, wc, 8)) >= 0) {
    }
    done = Clock::now();
    result = r;
  });
  while (!polling)
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto t0 = Clock::now();
  d_->kill();
  t.join();
  EXPECT_EQ(result, CL_EDAEMON);
  EXPECT_LT(ms_between(t0, done), 1000.0);
  // Sticky: every later call fails the same way.
  cl_send_wr w{};
  EXPECT_EQ(cl_post_send(sq_, &w, 1), CL_EDAEMON);
  cl_recv_wr r{1, nullptr, 0, 8};
  EXPECT_EQ(cl_post_recv(rq_, &r, 1), CL_EDAEMON);
  EXPECT_EQ(cl_cq_wait(cq_, 0), CL_EDAEMON);
  EXPECT_EQ(cl_alloc(ctx_, 64, 0), nullptr);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EDAEMON);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  close(fd);
}

class WaitForever : public LibTest, public ::testing::WithParamInterface<int> {};

TEST_P(WaitForever, ReturnsWhenTheDaemonDies) {
  make_queues(256, 64, GetParam());
  std::atomic<int> result{1};
  Clock::time_point done;
  std::thread t([&] {
    result = cl_cq_wait(cq_, -1);
    done = Clock::now();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(result, 1);  // still waiting
  auto t0 = Clock::now();
  d_->kill();
  t.join();
  EXPECT_EQ(result, CL_EDAEMON);
  EXPECT_LT(ms_between(t0, done), 1000.0);
}
INSTANTIATE_TEST_SUITE_P(Doorbell, WaitForever, ::testing::Values(0, 1));

TEST_F(LibTest, ControlCallInFlightWhenTheDaemonDies) {
  d_->stall_on = static_cast<uint16_t>(abi::MsgType::kMrReg);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  auto t0 = Clock::now();
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  EXPECT_LT(ms_since(t0), 1000.0);
  EXPECT_GE(ms_since(t0), 150.0);  // it did wait for the reply until the daemon went
  EXPECT_EQ(mr, nullptr);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EDAEMON);
  close(fd);
}

TEST_F(LibTest, EvictionNoticeFailsThePoller) {
  make_queues();
  std::atomic<int> result{1};
  std::thread t([&] {
    cl_wc wc[8];
    int r;
    while ((r = cl_poll_cq(cq_, wc, 8)) >= 0) {
    }
    result = r;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  d_->evict();
  t.join();
  EXPECT_EQ(result, CL_EEVICTED);
  EXPECT_EQ(cl_cq_wait(cq_, -1), CL_EEVICTED);
  cl_send_wr w{};
  EXPECT_EQ(cl_post_send(sq_, &w, 1), CL_EEVICTED);
}

TEST_F(LibTest, EvictionNoticeWakesASleeper) {
  make_queues(256, 64, 1);
  std::atomic<int> result{1};
  std::thread t([&] { result = cl_cq_wait(cq_, -1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  d_->evict();
  t.join();
  EXPECT_EQ(result, CL_EEVICTED);
}

TEST_F(LibTest, NoticeInPlaceOfAReply) {
  d_->notice_on = static_cast<uint16_t>(abi::MsgType::kPipeCreate);
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EEVICTED);
  EXPECT_EQ(cl_alloc(ctx_, 64, 0), nullptr);
}

TEST_F(LibTest, ShutdownNoticeIsDaemonGone) {
  make_queues(256, 64, 1);
  d_->shutdown();
  EXPECT_EQ(cl_cq_wait(cq_, 5000), CL_EDAEMON);
}

TEST_F(LibTest, CloseWithEverythingOpenReclaims) {
  make_queues();
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), 0);
  EXPECT_NE(cl_alloc(ctx_, 1000, 0), nullptr);
  EXPECT_EQ(cl_close(ctx_), 0);
  ctx_ = nullptr;
  auto t0 = Clock::now();
  while ((d_->live_mrs != 0 || d_->live_pipes != 0) && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(d_->live_mrs, 0);  // the daemon saw EOF and reclaimed
  EXPECT_EQ(d_->live_pipes, 0);
  close(fd);
}

// ---- A daemon that hangs or misbehaves ----

TEST_F(LibTest, HungDaemonTimesOutTheControlCall) {
  // A context opened with $CLEAVE_CTL_TIMEOUT_MS set waits that long, not the default 30 s.
  ASSERT_EQ(cl_close(ctx_), 0);
  ctx_ = nullptr;
  start();  // a fresh fake daemon: it serves one app
  setenv("CLEAVE_CTL_TIMEOUT_MS", "1000", 1);
  int opened = open_ctx(&ctx_);
  unsetenv("CLEAVE_CTL_TIMEOUT_MS");
  ASSERT_EQ(opened, 0);
  cl_cq* cq = nullptr;
  ASSERT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), 0);
  d_->ignore_on = static_cast<uint16_t>(abi::MsgType::kMrReg);
  int fd = sealed_memfd(4096);
  cl_mr* mr = nullptr;
  auto t0 = Clock::now();
  EXPECT_EQ(cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ, &mr), CL_EDAEMON);
  EXPECT_GE(ms_since(t0), 950.0);
  EXPECT_LT(ms_since(t0), 20000.0);  // the configured timeout, not the default
  // The library hung up, so the daemon reclaims what the app had.
  t0 = Clock::now();
  while (d_->live_pipes != 0 && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(d_->live_pipes, 0);
  cl_wc wc;
  EXPECT_EQ(cl_poll_cq(cq, &wc, 1), CL_EDAEMON);
  close(fd);
}

TEST_F(LibTest, ReplyWithTheWrongSeqPoisonsTheContext) {
  d_->wrong_seq = true;
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);
  d_->wrong_seq = false;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);  // sticky: replies can't be matched
}

TEST_F(LibTest, PipeOutsideThePipeAreaIsRefused) {
  d_->bad_pipe_offset = true;
  cl_cq* cq = nullptr;
  EXPECT_EQ(cl_cq_create(ctx_, 64, 0, 0, &cq), CL_EPROTO);
  EXPECT_EQ(cq, nullptr);
}

size_t open_fds() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    n++;
  }
  return n;
}

TEST_F(LibTest, StrayDescriptorsFromTheDaemonAreClosed) {
  d_->extra_fds = true;
  size_t before = open_fds();
  for (int i = 0; i < 10; i++) {
    cl_cq* cq = nullptr;
    ASSERT_EQ(cl_cq_create(ctx_, 64, 1, 0, &cq), 0);
    ASSERT_EQ(cl_cq_destroy(cq), 0);
  }
  EXPECT_EQ(open_fds(), before);
  // And at open, where the region fd comes with the strays.
  FakeDaemon d2;
  d2.extra_fds = true;
  before = open_fds();
  cl_ctx* other = nullptr;
  cl_open_attr a{d2.path().c_str(), "strays"};
  ASSERT_EQ(cl_open(&a, &other), 0);
  EXPECT_EQ(cl_close(other), 0);
  // d2 keeps its region memfd; its connection goes once it has seen the EOF.
  auto t0 = Clock::now();
  while (open_fds() != before + 1 && ms_since(t0) < 1000)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(open_fds(), before + 1);
}

// Control calls from several threads while each also posts and polls its own queues.
TEST_F(LibTest, ControlAndDataFromManyThreads) {
  std::atomic<int> failures{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++) {
    ts.emplace_back([&, t] {
      for (int round = 0; round < 20; round++) {
        cl_cq* cq = nullptr;
        cl_sq* sq = nullptr;
        cl_mr* mr = nullptr;
        int fd = sealed_memfd(4096);
        if (cl_cq_create(ctx_, 64, round & 1, 0, &cq) != 0 ||
            cl_sq_create(ctx_, cq, 64, &sq) != 0 ||
            cl_mr_reg(ctx_, fd, 4096, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr) != 0) {
          failures++;
          close(fd);
          return;
        }
        cl_send_wr w[10]{};
        for (int i = 0; i < 10; i++) {
          w[i].wr_id = static_cast<uint64_t>(t * 1000 + i);
          w[i].opcode = CL_OP_COPY;
          w[i].mr = mr;
          w[i].dst_mr = mr;
          w[i].dst_offset = 2048;
          w[i].length = 64;
        }
        if (cl_post_send(sq, w, 10) != 10) failures++;
        int got = 0;
        auto t0 = Clock::now();
        while (got < 10 && ms_since(t0) < 5000) {
          if (cl_cq_wait(cq, 100) < -200) break;
          cl_wc wc[10];
          int n = cl_poll_cq(cq, wc, 10);
          for (int i = 0; i < n; i++)
            if (wc[i].status != 0 || wc[i].wr_id != static_cast<uint64_t>(t * 1000 + got + i))
              failures++;
          got += n > 0 ? n : 0;
        }
        if (got != 10) failures++;
        if (cl_sq_destroy(sq) != 0 || cl_cq_destroy(cq) != 0 || cl_mr_dereg(mr) != 0) failures++;
        close(fd);
      }
    });
  }
  for (auto& t : ts)
    t.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(d_->live_pipes, 0);
  EXPECT_EQ(d_->live_mrs, 0);
}

// ---- Receive rings ----

// A connected flow whose receives the fake holds (and its scripted peer fills), and a ring on it.
class RingTest : public LibTest {
 protected:
  void SetUp() override {
    LibTest::SetUp();
    d_->hold_recvs = true;
    make_queues(1024, 256);
    sockaddr_in peer = inet("198.18.0.2", 5002);
    ASSERT_EQ(cl_connect(ctx_, cq_, &peer, nullptr, &flow_), 0);
    auto wc = poll_n(1);
    ASSERT_EQ(wc.size(), 1u);
    ASSERT_EQ(wc[0].opcode, uint32_t{CL_EV_CONNECTED});
  }
  void TearDown() override {
    if (ring_ != nullptr) {
      int e = cl_ring_destroy(ring_);
      if (e == CL_EBUSY) {  // still posted: abort the flow, take the completions, then free it
        cl_send_wr a{.wr_id = 77, .opcode = CL_OP_FLOW_ABORT, .flow = flow_};
        EXPECT_EQ(cl_post_send(sq_, &a, 1), 1);
        EXPECT_TRUE(pump_until([&] { return (e = cl_ring_destroy(ring_)) != CL_EBUSY; }));
      }
      EXPECT_EQ(e, 0);
    }
    LibTest::TearDown();
  }
  int create(uint64_t size, uint32_t chunk, void* addr = nullptr, const cl_mr* mr = nullptr) {
    cl_ring_attr a{.sq = sq_, .flow = flow_, .mr = mr, .addr = addr, .size = size, .chunk = chunk};
    return cl_ring_create(ctx_, &a, &ring_);
  }
  // Polls the CQ, handing every completion to the ring; keeps what the ring left to the app.
  // Until `done` holds or `ms` passed.
  template <class F>
  bool pump_until(F done, double ms = 5000) {
    auto t0 = Clock::now();
    while (!done()) {
      if (ms_since(t0) > ms) return false;
      cl_wc wc[16];
      int got = cl_poll_cq(cq_, wc, 16);
      EXPECT_GE(got, 0);
      if (got < 0) return false;
      for (int i = 0; i < got; i++) {
        int r = cl_ring_consume(ring_, &wc[i]);
        EXPECT_GE(r, 0);
        if (r == 0) app_.push_back(wc[i]);
      }
    }
    return true;
  }
  // Waits until at least n bytes are readable (contiguously from the ring position).
  bool wait_readable(size_t n) {
    return pump_until([&] {
      size_t len = 0;
      cl_ring_recv(ring_, &len);
      return len >= n;
    });
  }
  // Reads exactly n bytes that must be at `want` and be stream bytes from `stream`, releases them.
  void take(size_t n, uint8_t* want, uint64_t stream) {
    ASSERT_TRUE(wait_readable(n)) << "waiting for " << n << " readable bytes";
    size_t len = 0;
    auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
    ASSERT_EQ(p, want);  // in place: the ring's own memory, no copy
    ASSERT_GE(len, n);
    for (size_t i = 0; i < n; i++)
      ASSERT_EQ(p[i], FakeDaemon::flow_byte(stream + i)) << "stream byte " << stream + i;
    ASSERT_EQ(cl_ring_recv_done(ring_, n), 0);
  }
  // The receives the ring posted so far: (offset, length) each.
  std::vector<std::pair<uint64_t, uint32_t>> posted() {
    std::vector<std::pair<uint64_t, uint32_t>> out;
    std::lock_guard lk(d_->rec_mu);
    for (const abi::SendEntry& e : d_->flow_entries)
      if (e.opcode == abi::kOpFlowRecv) out.emplace_back(e.offset, e.length);
    return out;
  }
  bool wait_posted(size_t n) {
    return pump_until([&] { return posted().size() >= n; });
  }

  cl_flow flow_ = 0;
  cl_ring* ring_ = nullptr;
  std::vector<cl_wc> app_;
};

class RingOrder : public RingTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RingOrder, WrapsAroundInRingOrderWithoutACopy) {
  d_->data_event_first = GetParam();
  auto* mem = static_cast<uint8_t*>(cl_alloc(ctx_, 10000, 4096));
  ASSERT_NE(mem, nullptr);
  ASSERT_EQ(create(10000, 4096, mem), 0);
  const uint64_t h = cl_heap_offset(ctx_, mem);
  ASSERT_TRUE(wait_posted(3));
  using P = std::pair<uint64_t, uint32_t>;
  EXPECT_EQ(posted(), (std::vector<P>{{h, 4096}, {h + 4096, 4096}, {h + 8192, 1808}}));

  d_->peer(flow_, FakeDaemon::Peer::kData, 6000);
  take(6000, mem, 0);  // chunk 0 full and released: posted again; chunk 1 part-filled
  ASSERT_TRUE(wait_posted(4));
  EXPECT_EQ(posted().back(), (P{h, 4096}));
  // 2192 finish chunk 1, 1808 fill chunk 2, 3000 go into chunk 0 again: past the ring's end.
  d_->peer(flow_, FakeDaemon::Peer::kData, 7000);
  ASSERT_TRUE(pump_until([&] {
    size_t len = 0;
    cl_ring_recv(ring_, &len);
    return len == 4000;
  }));
  take(4000, mem + 6000, 6000);  // up to the ring's end
  take(3000, mem, 10000);        // then the wrapped part from the ring's start
  size_t len = 99;
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // Chunks 1 and 2 are released and back: posted again, in ring order.
  ASSERT_TRUE(wait_posted(6));
  auto p = posted();
  EXPECT_EQ(p[4], (P{h + 4096, 4096}));
  EXPECT_EQ(p[5], (P{h + 8192, 1808}));
  EXPECT_TRUE(app_.empty());  // every completion was the ring's
}

INSTANTIATE_TEST_SUITE_P(DataEvent, RingOrder, ::testing::Values(false, true));

TEST_F(RingTest, PartialReleaseKeepsTheChunkUntilItIsWhollyReleased) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 8192);
  ASSERT_TRUE(wait_readable(8192));
  size_t len = 0;
  auto* base = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_EQ(cl_ring_recv_done(ring_, 4000), 0);
  // The peer has no room: the window is closed until a chunk is wholly released.
  d_->peer(flow_, FakeDaemon::Peer::kData, 100);
  EXPECT_FALSE(pump_until([&] { return posted().size() > 2; }, 100));
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  EXPECT_EQ(p, base + 4000);
  EXPECT_EQ(len, 4192u);
  ASSERT_EQ(cl_ring_recv_done(ring_, 96), 0);  // chunk 0 wholly released: posted again
  ASSERT_TRUE(wait_posted(3));
  d_->peer(flow_, FakeDaemon::Peer::kData, 5000);  // only chunk 0's 4096 fit
  take(4096, base + 4096, 4096);
  take(4096, base, 8192);
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
}

TEST_F(RingTest, EndOfStreamInAPartlyFilledChunk) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 5000);
  d_->peer(flow_, FakeDaemon::Peer::kFin);
  // Chunk 1 comes back short (904 bytes): the stream's end, known once it is back.
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) == 1; }));
  size_t len = 0;
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(len, 5000u);
  for (size_t i = 0; i < len; i++)
    ASSERT_EQ(p[i], FakeDaemon::flow_byte(i));
  ASSERT_EQ(cl_ring_recv_done(ring_, 5000), 0);
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(cl_ring_status(ring_), 1);
  EXPECT_EQ(posted().size(), 2u);  // nothing posted after the end
  EXPECT_EQ(cl_ring_recv_done(ring_, 1), CL_EINVAL);
  // The flow's clean end is the app's to see; the ring only notes it.
  d_->peer(flow_, FakeDaemon::Peer::kClose);
  ASSERT_TRUE(pump_until([&] { return !app_.empty(); }));
  EXPECT_EQ(app_[0].opcode, uint32_t{CL_EV_CLOSED});
  EXPECT_EQ(cl_ring_status(ring_), 1);
  EXPECT_EQ(cl_ring_destroy(ring_), 0);
  ring_ = nullptr;
}

TEST_F(RingTest, EndOfStreamOnAChunkBoundaryAfterReposting) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 8192);
  ASSERT_TRUE(wait_readable(8192));
  ASSERT_EQ(cl_ring_recv_done(ring_, 8192), 0);
  ASSERT_TRUE(wait_posted(4));
  EXPECT_EQ(cl_ring_status(ring_), 0);
  d_->peer(flow_, FakeDaemon::Peer::kFin);  // both reposted chunks come back empty
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) == 1; }));
  size_t len = 0;
  EXPECT_EQ(cl_ring_recv(ring_, &len), nullptr);
  EXPECT_EQ(posted().size(), 4u);
}

TEST_F(RingTest, ResetIsReportedAfterTheBytesBeforeIt) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 3000);
  ASSERT_TRUE(wait_readable(3000));
  d_->peer(flow_, FakeDaemon::Peer::kReset);
  ASSERT_TRUE(pump_until([&] { return cl_ring_status(ring_) != 0; }));
  EXPECT_EQ(cl_ring_status(ring_), CL_ECONNRESET);
  ASSERT_TRUE(pump_until([&] { return !app_.empty(); }));
  EXPECT_EQ(app_[0].opcode, uint32_t{CL_EV_CLOSED});  // the app sees the flow end too
  EXPECT_EQ(app_[0].status, CL_ECONNRESET);
  size_t len = 0;
  auto* p = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(len, 3000u);  // what arrived before the reset stays readable
  EXPECT_EQ(p[2999], FakeDaemon::flow_byte(2999));
  ASSERT_EQ(cl_ring_recv_done(ring_, 3000), 0);
  EXPECT_EQ(posted().size(), 2u);  // nothing posted to a failed flow
  // After the close the ring takes no events of that flow id (it may be another flow's now).
  cl_wc ev{.status = 0, .length = 10, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &ev), 0);
  EXPECT_EQ(cl_ring_destroy(ring_), 0);
  ring_ = nullptr;
}

TEST_F(RingTest, AShortChunkAtAResetIsNoEndOfStream) {
  ASSERT_EQ(create(8192, 4096), 0);
  ASSERT_TRUE(wait_posted(2));
  d_->peer(flow_, FakeDaemon::Peer::kData, 6000);  // chunk 1 holds 1904 bytes
  ASSERT_TRUE(wait_readable(6000));
  d_->peer(flow_, FakeDaemon::Peer::kReset);  // chunk 1 back short (status 0), then closed
  // One completion at a time: between the short chunk and CL_EV_CLOSED the status must not
  // claim a clean end.
  std::vector<int> seen;
  auto t0 = Clock::now();
  while (cl_ring_status(ring_) == 0 && ms_since(t0) < 5000) {
    cl_wc wc;
    if (cl_poll_cq(cq_, &wc, 1) != 1) continue;
    cl_ring_consume(ring_, &wc);
    seen.push_back(cl_ring_status(ring_));
  }
  ASSERT_GE(seen.size(), 2u);  // the short chunk, then the close
  EXPECT_EQ(seen[0], 0);
  EXPECT_EQ(seen.back(), CL_ECONNRESET);
  size_t len = 0;
  cl_ring_recv(ring_, &len);
  EXPECT_EQ(len, 6000u);
}

TEST_F(RingTest, RingSmallerThanTwoChunksIsCutInHalves) {
  ASSERT_EQ(create(1001, 0), 0);  // the default chunk is larger
  ASSERT_TRUE(wait_posted(2));
  using P = std::pair<uint64_t, uint32_t>;
  auto p = posted();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].second, 501u);
  EXPECT_EQ(p[1], (P{p[0].first + 501, 500}));
  d_->peer(flow_, FakeDaemon::Peer::kData, 2500);  // 1001 fit
  ASSERT_TRUE(wait_readable(1001));
  size_t len = 0;
  auto* base = static_cast<uint8_t*>(cl_ring_recv(ring_, &len));
  EXPECT_EQ(len, 1001u);
  ASSERT_EQ(cl_ring_recv_done(ring_, 500), 0);
  EXPECT_FALSE(pump_until([&] { return posted().size() > 2; }, 50));
  ASSERT_EQ(cl_ring_recv_done(ring_, 1), 0);  // the first half wholly released
  ASSERT_TRUE(wait_posted(3));
  d_->peer(flow_, FakeDaemon::Peer::kData, 1000);  // 501 fit
  take(500, base + 501, 501);
  take(501, base, 1001);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // A one-byte ring is one chunk: it cannot be cut.
  cl_ring* one = nullptr;
  cl_ring_attr a{.sq = sq_, .flow = flow_ + 1, .size = 1};
  ASSERT_EQ(cl_ring_create(ctx_, &a, &one), 0);
  ASSERT_TRUE(wait_posted(6));
  EXPECT_EQ(posted().back().second, 1u);
  EXPECT_EQ(cl_ring_destroy(one), CL_EBUSY);  // still posted: cl_close frees it
}

TEST_F(RingTest, AFullSubmitQueueIsRetriedLater) {
  d_->pump = false;  // the fake takes nothing off the submit queue for now
  ASSERT_EQ(create(300 * 100, 100), 0);
  EXPECT_EQ(posted().size(), 0u);
  d_->pump = true;
  // 256 went in at creation; the other 44 follow from a later call once there is room.
  ASSERT_TRUE(pump_until([&] {
    size_t len = 0;
    cl_ring_recv(ring_, &len);
    return posted().size() == 300;
  }));
  d_->peer(flow_, FakeDaemon::Peer::kData, 30000);
  ASSERT_TRUE(wait_readable(30000));
  EXPECT_EQ(cl_ring_status(ring_), 0);
}

TEST_F(RingTest, OnlyItsOwnCompletionsAreTaken) {
  ASSERT_EQ(create(8192, 4096), 0);
  cl_wc other{.wr_id = 5, .opcode = CL_OP_FLOW_RECV, .flow = flow_};  // the app's own wr_id
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.wr_id = 0, .length = 5, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_ + 1};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.opcode = CL_EV_CONNECTED, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  other = {.opcode = CL_OP_FLOW_SEND, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 0);
  EXPECT_EQ(cl_ring_status(ring_), 0);
  // More data reported than the ring has posted: another receiver on the flow.
  other = {.length = 1u << 20, .opcode = CL_EV_DATA, .flags = CL_WC_EVENT, .flow = flow_};
  EXPECT_EQ(cl_ring_consume(ring_, &other), 1);
  EXPECT_EQ(cl_ring_status(ring_), CL_EPROTO);
}

TEST_F(RingTest, BadArgumentsAreRefusedAndNothingIsPosted) {
  cl_ring* r = reinterpret_cast<cl_ring*>(0x1);
  cl_ring_attr a{.sq = sq_, .flow = flow_, .size = 4096};
  EXPECT_EQ(cl_ring_create(ctx_, &a, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_create(nullptr, &a, &r), CL_EINVAL);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(cl_ring_create(ctx_, nullptr, &r), CL_EINVAL);
  cl_ring_attr b = a;
  b.sq = nullptr;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 0;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 4097 * 64;
  b.chunk = 64;  // 4097 chunks
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b = a;
  b.size = 1ull << 40;  // more than the heap
  b.chunk = 1u << 30;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_ENOMEM);
  auto* mem = static_cast<uint8_t*>(cl_alloc(ctx_, 8192, 0));
  b = a;
  b.addr = mem;
  b.size = (1u << 20) * 2;  // runs past the heap's end
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  uint8_t outside[64];
  b = a;
  b.addr = outside;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  int fd = sealed_memfd(1u << 16);
  cl_mr* ro = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, fd, 1u << 16, CL_ACCESS_READ, &ro), 0);
  b = a;
  b.mr = ro;
  b.addr = cl_mr_addr(ro);
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EACCES);
  b.addr = nullptr;  // the library allocates from the heap only
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EINVAL);
  b.addr = static_cast<uint8_t*>(cl_mr_addr(ro)) + (1u << 16) - 100;
  EXPECT_EQ(cl_ring_create(ctx_, &b, &r), CL_EFAULT);
  EXPECT_EQ(r, nullptr);
  EXPECT_EQ(posted().size(), 0u);

  size_t len = 7;
  EXPECT_EQ(cl_ring_recv(nullptr, &len), nullptr);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(cl_ring_recv_done(nullptr, 0), CL_EINVAL);
  EXPECT_EQ(cl_ring_status(nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_destroy(nullptr), CL_EINVAL);
  cl_wc wc{};
  EXPECT_EQ(cl_ring_consume(nullptr, &wc), CL_EINVAL);

  // A good ring in an MR: more released than readable is refused and changes nothing; a ring
  // still posted to an open flow is not freed.
  int wfd = sealed_memfd(1u << 16);
  cl_mr* rw = nullptr;
  ASSERT_EQ(cl_mr_reg(ctx_, wfd, 1u << 16, CL_ACCESS_WRITE, &rw), 0);
  ASSERT_EQ(create(8192, 4096, static_cast<uint8_t*>(cl_mr_addr(rw)) + 4096, rw), 0);
  ASSERT_TRUE(wait_posted(2));
  {
    std::lock_guard lk(d_->rec_mu);
    EXPECT_EQ(d_->flow_entries[0].mr, cl_mr_id(rw));
    EXPECT_EQ(d_->flow_entries[0].offset, 4096u);
  }
  EXPECT_EQ(cl_ring_consume(ring_, nullptr), CL_EINVAL);
  EXPECT_EQ(cl_ring_recv(ring_, nullptr), nullptr);
  EXPECT_EQ(cl_ring_recv_done(ring_, 1), CL_EINVAL);
  d_->peer(flow_, FakeDaemon::Peer::kData, 10);
  ASSERT_TRUE(wait_readable(10));
  EXPECT_EQ(cl_ring_recv_done(ring_, 11), CL_EINVAL);
  EXPECT_EQ(cl_ring_recv(ring_, &len), static_cast<uint8_t*>(cl_mr_addr(rw)) + 4096);
  EXPECT_EQ(len, 10u);
  EXPECT_EQ(cl_ring_destroy(ring_), CL_EBUSY);  // TearDown aborts the flow, then frees it
  close(fd);
  close(wfd);
}

}  // namespace
}  // namespace cleave::test
