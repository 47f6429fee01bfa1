// libcleave_fake_daemon.h - FakeDaemon, a stand-in for cleaved that speaks the app socket
// protocol of shm_abi.h from a thread, for libcleave's tests (libcleave_*_test.cc).
//
// It creates a real memfd region, answers Hello/PipeCreate/MrReg/Listen/Connect/..., and plays
// the dataplane on the pipes (NOP, COPY and SEND done simply; flows as a scripted peer that
// acknowledges every send, fills every receive buffer and closes when asked), so no DPDK is
// needed. Test controls
// (any thread): kill() closes everything as a crashed daemon would; evict() and shutdown() send a
// Notice first; stall_on and notice_on make the next request of a type go unanswered (then the
// daemon dies) or be answered with a notice.
#pragma once

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
        if (c >= 0 && cfd_ >= 0) {
          close(c);  // one app at a time
        } else if (c >= 0) {
          cfd_ = c;
        }
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
    for (auto& [id, l] : listeners_) {
      if (l.port == req.port) {
        reply(r, req.h, abi::MsgType::kListenReply, CL_EADDRINUSE);
        return;
      }
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
    if (kind == abi::PipeKind::kSubmit) {
      p.sq = {v.ctl, static_cast<abi::SendEntry*>(v.ring), req.entries};
    } else if (kind == abi::PipeKind::kRecv) {
      p.rq = {v.ctl, static_cast<abi::RecvEntry*>(v.ring), req.entries};
    } else {
      p.cq_prod = {v.ctl, static_cast<abi::Completion*>(v.ring), req.entries};
    }
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
      if (cq.efd >= 0 && cq.cq_prod.take_wake()) {
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
