// app_server.cc - the app control socket: admission, regions, pipes, MRs, reclaim.
#include "control/app_server.h"

#include <cleave/cleave.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>

#include "control/management.h"  // MgmtError
#include "unix_msg.h"

namespace cleave::dp {

namespace {

constexpr auto kCtlTimeout = std::chrono::milliseconds(1000);
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr unsigned kAcceptsPerTurn = 32;  // then the other sockets get a turn
constexpr uint64_t kMiB = 1ull << 20;

bool allowed(const AppRule& r, const ucred& c) {
  return (r.uid && *r.uid == c.uid) || (r.gid && *r.gid == c.gid);
}

bool is_eventfd(int fd) {
  char link[64] = {};
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  ssize_t n = readlink(path.c_str(), link, sizeof link - 1);
  return n > 0 && std::string_view(link, static_cast<size_t>(n)) == "anon_inode:[eventfd]";
}

const char* kind_name(abi::PipeKind k) {
  switch (k) {
    case abi::PipeKind::kSubmit:
      return "submit";
    case abi::PipeKind::kRecv:
      return "recv";
    case abi::PipeKind::kCompletion:
      return "completion";
  }
  return "?";
}

std::string access_str(uint32_t a) {
  std::string s;
  if (a & abi::kAccessRead) s += "r";
  if (a & abi::kAccessWrite) s += "w";
  if (a & abi::kAccessRemoteRead) s += "R";
  if (a & abi::kAccessRemoteWrite) s += "W";
  return s.empty() ? "-" : s;
}

template <class T>
T reply_for(const abi::MsgHeader& req, abi::MsgType type) {
  T r{};
  r.h.magic = abi::kMagic;
  r.h.version = req.version;
  r.h.type = static_cast<uint16_t>(type);
  r.h.seq = req.seq;
  return r;
}

// The smallest free id in [lo, hi), or hi.
template <class M>
uint32_t free_id(const M& used, uint32_t lo, uint32_t hi) {
  for (uint32_t i = lo; i < hi; i++) {
    if (used.find(i) == used.end()) return i;
  }
  return hi;
}

}  // namespace

bool AppServer::LogBudget::take() {
  auto now = Clock::now();
  if (now - window_start >= std::chrono::seconds(10)) {
    if (suppressed != 0) {
      spdlog::warn("app socket: {} more refusals or protocol errors in the last 10 s not logged",
                   suppressed);
    }
    window_start = now;
    logged = suppressed = 0;
  }
  if (logged < 10) {
    logged++;
    return true;
  }
  suppressed++;
  return false;
}

AppServer::AppServer(const Config& cfg, std::string path, int epoll_fd, const ShardChannels& ctl,
                     std::vector<uint16_t> ports)
    : cfg_(cfg),
      path_(std::move(path)),
      epoll_fd_(epoll_fd),
      ctl_(ctl),
      ports_(std::move(ports)),
      try_huge_(cfg.eal.hugepages != HugepageMode::kOff),
      pending_(ClientCaps{cfg.apps.max_pending, cfg.apps.max_pending_per_uid}) {
  main_.bind();
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path_.size() >= sizeof addr.sun_path) throw std::runtime_error("app socket path too long");
  std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw std::runtime_error("app socket: " + std::string(strerror(errno)));
  unlink(path_.c_str());  // stale from a crashed instance; the caller holds the instance lock
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      chmod(path_.c_str(), 0666) != 0 || listen(listen_fd_, 64) != 0) {
    int e = errno;
    close(listen_fd_);
    throw std::runtime_error("cannot listen on " + path_ + ": " + strerror(e));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
}

AppServer::~AppServer() {
  while (!sessions_.empty()) {
    Session& s = sessions_.begin()->second;
    if (s.id != 0) notice(s, abi::NoticeReason::kShutdown);
    close_session(s.fd, "the daemon is stopping");
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, listen_fd_, nullptr);
  close(listen_fd_);
  unlink(path_.c_str());
  // The dataplane still runs: give it its time to let go of what is in limbo.
  auto deadline = Clock::now() + kCtlTimeout;
  for (settle(); !limbo_.empty() && Clock::now() < deadline; settle())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!limbo_.empty()) {
    // It may still reference them: never unmap under it. The process is about to exit.
    spdlog::error(
        "app server: the dataplane did not let go of {} app(s); leaving their memory "
        "mapped",
        limbo_.size());
    try {
      (void)new std::vector<Limbo>(std::move(limbo_));
    } catch (const std::bad_alloc&) {  // nothing to be done: they go with the rest
    }
  }
}

size_t AppServer::apps() const {
  return get(apps_);
}

bool AppServer::on_event(int fd, uint32_t events) {
  main_.check("AppServer::on_event");
  if (fd == listen_fd_) {
    accept_apps();
    return true;
  }
  auto it = sessions_.find(fd);
  if (it == sessions_.end()) return false;
  if (events & EPOLLIN) {
    on_message(it->second);
    // The dataplane took a request and did not finish it in time: the app was told, and goes.
    it = sessions_.find(fd);
    if (it != sessions_.end() && it->second.lost_sync) {
      close_session(fd, "disconnected: the dataplane did not answer in time");
    }
    return true;  // a hangup with data pending is seen on the next read (EOF)
  }
  if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) close_session(fd, "disconnected");
  return true;
}

void AppServer::accept_apps() {
  // A bounded number per turn: a connect flood must not keep the main thread here.
  for (unsigned i = 0; i < kAcceptsPerTurn; i++) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    Session s;
    s.fd = fd;
    s.connected = Clock::now();
    if (!peer_cred(fd, s.cred)) {
      close(fd);
      continue;
    }
    for (const AppRule& r : cfg_.apps.allow) {
      if (allowed(r, s.cred)) {
        s.rule = &r;
        break;
      }
    }
    // Credentials are known now: a user no rule admits never holds a slot, not even for 5 s.
    if (s.rule == nullptr) {
      bump(refused_uid_);
      if (refusals_.take()) {
        spdlog::warn("app pid {} uid {} gid {} refused: no rule in apps.allow admits it",
                     s.cred.pid, s.cred.uid, s.cred.gid);
      }
      send_refusal(fd, CL_EPERM);
      close(fd);
      continue;
    }
    ClientTable::Decision d = pending_.admit(fd, s.cred.uid);
    for (int gone : d.gone) {
      bump(counters_.reaped);
      close_session(gone, "gone before hello");
    }
    if (d.evict >= 0) {
      bump(counters_.evicted);
      send_refusal(d.evict, CL_EAGAIN);
      close_session(d.evict, "closed before hello to make room");
    }
    if (!d.admit) {
      bump(counters_.refused);
      if (refusals_.take()) {
        spdlog::warn("app pid {} uid {} refused: {} connections of uid {} wait for hello already",
                     s.cred.pid, s.cred.uid, pending_.of_uid(s.cred.uid), s.cred.uid);
      }
      send_refusal(fd, CL_EAGAIN);
      close(fd);
      continue;
    }
    bump(counters_.accepted);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    sessions_.emplace(fd, std::move(s));
    counters_.clients.store(pending_.size(), std::memory_order_relaxed);
  }
}

void AppServer::send_refusal(int fd, int32_t status) {
  abi::Notice n{};
  n.h = {abi::kMagic, abi::kAbiVersion, static_cast<uint16_t>(abi::MsgType::kNotice), 0, status};
  n.reason = static_cast<uint32_t>(abi::NoticeReason::kRefused);
  ipc::send_msg(fd, &n, sizeof n, -1, MSG_DONTWAIT);
}

void AppServer::on_message(Session& s) {
  alignas(8) uint8_t buf[abi::kMaxMessage + 1];
  int fds[4];
  int nfds = 0;
  bool trunc = false;
  ssize_t n = ipc::recv_msg(s.fd, buf, sizeof buf, MSG_DONTWAIT, fds, 4, &nfds, &trunc);
  if (n == -EAGAIN) return;
  if (n <= 0) {
    close_session(s.fd, n == 0 ? "disconnected" : "socket error");
    return;
  }
  // Every fd that came along is ours to close unless a handler keeps it.
  int fd = nfds == 1 ? fds[0] : -1;
  auto close_fds = [&] {
    for (int i = 0; i < nfds; i++)
      close(fds[i]);
  };
  abi::MsgHeader h{};
  trunc = trunc || nfds > 1;
  if (!trunc && static_cast<size_t>(n) >= sizeof h) std::memcpy(&h, buf, sizeof h);
  auto size_ok = [&](size_t want) { return static_cast<size_t>(n) == want; };
  auto bad = [&](const char* why) {
    close_fds();
    abi::Reply r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
    r.h.status = CL_EPROTO;
    send(s, &r, sizeof r);
    if (refusals_.take()) {
      spdlog::warn("app socket: pid {} uid {}: {}; closing", s.cred.pid, s.cred.uid, why);
    }
    close_session(s.fd, "protocol error");
  };
  if (trunc || static_cast<size_t>(n) < sizeof h || h.magic != abi::kMagic) {
    bad("malformed message");
    return;
  }
  auto type = static_cast<abi::MsgType>(h.type);
  if ((s.id == 0) != (type == abi::MsgType::kHello)) {
    bad(s.id == 0 ? "first message is not hello" : "second hello");
    return;
  }
  if (s.id != 0 && h.version != s.version) {
    bad("message version differs from the negotiated one");
    return;
  }
  switch (type) {
    case abi::MsgType::kHello: {
      abi::Hello m;
      if (!size_ok(sizeof m) || fd >= 0) return bad("malformed hello");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::HelloReply>(h, abi::MsgType::kHelloReply);
      r.h.status = hello(s, m, r);
      r.h.version = s.version != 0 ? s.version : abi::kAbiVersion;
      bool ok = r.h.status == 0;
      if (!send(s, &r, sizeof r, ok ? s.region.fd() : -1) || !ok) {
        // Refused apps are told why, then closed; their session holds nothing.
        close_session(s.fd, "refused");
      }
      return;
    }
    case abi::MsgType::kPipeCreate: {
      abi::PipeCreate m;
      if (!size_ok(sizeof m)) return bad("malformed pipe create");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::PipeReply>(h, abi::MsgType::kPipeReply);
      r.h.status = pipe_create(s, m, fd, r);  // takes fd
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kPipeDestroy: {
      abi::PipeDestroy m;
      if (!size_ok(sizeof m) || fd >= 0) return bad("malformed pipe destroy");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
      r.h.status = pipe_destroy(s, m);
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kMrReg: {
      abi::MrReg m;
      if (!size_ok(sizeof m) || fd < 0) return bad("malformed MR registration");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::MrReply>(h, abi::MsgType::kMrReply);
      r.h.status = mr_reg(s, m, fd, r);
      close(fd);  // mapped or refused: the fd itself is not kept
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kMrDereg: {
      abi::MrDereg m;
      if (!size_ok(sizeof m) || fd >= 0) return bad("malformed MR deregistration");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
      r.h.status = mr_dereg(s, m);
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kListen:
    case abi::MsgType::kConnect: {
      abi::FlowOpen m;
      if (s.version < 2 || !size_ok(sizeof m) || fd >= 0) return bad("malformed listen or connect");
      std::memcpy(&m, buf, sizeof m);
      bool listen = type == abi::MsgType::kListen;
      auto r = reply_for<abi::FlowOpenReply>(
          h, listen ? abi::MsgType::kListenReply : abi::MsgType::kConnectReply);
      r.h.status = flow_open(s, m, listen, r.id);
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kUnlisten: {
      abi::Unlisten m;
      if (s.version < 2 || !size_ok(sizeof m) || fd >= 0) return bad("malformed unlisten");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
      r.h.status = ctl_flow(s, CtlRequest::make(ctl::Unlisten{{}, s.id, m.listener}));
      if (r.h.status == 0) unshare_listener(s.id, s.shard, m.listener);
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kQpCreate: {
      abi::QpCreate m;
      if (s.version < 3 || !size_ok(sizeof m) || fd >= 0) return bad("malformed QP create");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::QpReply>(h, abi::MsgType::kQpReply);
      r.h.status = qp_create(s, m, r);
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kQpModify: {
      abi::QpModify m;
      if (s.version < 3 || !size_ok(sizeof m) || fd >= 0) return bad("malformed QP modify");
      std::memcpy(&m, buf, sizeof m);
      auto r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
      r.h.status = ctl_flow(s, CtlRequest::make(ctl::QpModify{{}, s.id, m.qp, m.attr, m.mask}));
      send(s, &r, sizeof r);
      return;
    }
    case abi::MsgType::kQpQuery:
    case abi::MsgType::kQpDestroy: {
      abi::QpId m;
      if (s.version < 3 || !size_ok(sizeof m) || fd >= 0) return bad("malformed QP message");
      std::memcpy(&m, buf, sizeof m);
      if (m.reserved != 0) return bad("malformed QP message");
      if (type == abi::MsgType::kQpDestroy) {
        auto r = reply_for<abi::Reply>(h, abi::MsgType::kReply);
        r.h.status = ctl_flow(s, CtlRequest::make(ctl::QpDestroy{{}, s.id, m.qp}));
        send(s, &r, sizeof r);
        return;
      }
      auto r = reply_for<abi::QpQueryReply>(h, abi::MsgType::kQpQueryReply);
      std::unique_ptr<CtlRequest> answer;
      r.h.status = ctl_flow(s, CtlRequest::make(ctl::QpQuery{{}, s.id, m.qp}), &answer);
      if (r.h.status == 0) r.attr = answer->as<ctl::QpQuery>().attr;
      send(s, &r, sizeof r);
      return;
    }
    default:
      return bad("unknown message type");
  }
}

int32_t AppServer::qp_create(Session& s, const abi::QpCreate& m, abi::QpReply& out) {
  const char* end = static_cast<const char*>(std::memchr(m.params, 0, sizeof m.params));
  if (end == nullptr || m.reserved != 0) return CL_EINVAL;
  auto pipe = s.pipes.find(m.cq);
  if (pipe == s.pipes.end() || pipe->second.kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  ctl::QpCreate q;
  q.app_id = s.id;
  q.cq = static_cast<uint16_t>(m.cq);
  q.send_wr = m.max_send_wr;
  q.recv_wr = m.max_recv_wr;
  q.params.assign(m.params, end);
  std::unique_ptr<CtlRequest> answer;
  int32_t st = ctl_flow(s, CtlRequest::make(std::move(q)), &answer);
  if (st == 0) {
    const ctl::QpCreate& a = answer->as<ctl::QpCreate>();
    out.qp = a.qp;
    out.qpn = a.qpn;
    out.ip = a.ip;
    out.max_pmtu = a.max_pmtu;
  }
  return st;
}

int32_t AppServer::flow_open(Session& s, const abi::FlowOpen& m, bool listen, uint32_t& id) {
  const char* end = static_cast<const char*>(std::memchr(m.transport, 0, sizeof m.transport));
  if (end == nullptr || (m.flags & ~abi::kFlowMessage) != 0 || m.reserved2 != 0) return CL_EINVAL;
  auto pipe = s.pipes.find(m.cq);
  if (pipe == s.pipes.end() || pipe->second.kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  ctl::FlowOpen o;
  o.app_id = s.id;
  o.cq = static_cast<uint16_t>(m.cq);
  o.ip = m.ip;
  o.port = m.port;
  o.transport.assign(m.transport, end);
  o.message = (m.flags & abi::kFlowMessage) != 0;
  std::unique_ptr<CtlRequest> answer;
  int32_t st = listen ? ctl_flow(s, CtlRequest::make(ctl::Listen{std::move(o)}), &answer)
                      : ctl_flow(s, CtlRequest::make(ctl::Connect{std::move(o)}), &answer);
  if (st == 0) {
    id = listen ? answer->as<ctl::Listen>().id : answer->as<ctl::Connect>().id;
    if (listen) {
      st = share_listener(s, id, m.ip, static_cast<uint16_t>(m.port),
                          answer->as<ctl::Listen>().proto);
    }
  }
  return st;
}

int32_t AppServer::share_listener(Session& s, uint32_t id, uint32_t ip, uint16_t port,
                                  uint8_t proto) {
  for (size_t k = 0; k < ctl_.size(); k++) {
    if (k == s.shard) continue;
    ctl::ListenShare q;
    q.app_id = s.id;
    q.shard = s.shard;
    q.listener = id;
    q.ip = ip;
    q.port = port;
    q.proto = proto;
    std::unique_ptr<CtlRequest> answer;
    int32_t st = CL_ETIMEDOUT;
    if (ctl(uint16_t(k), CtlRequest::make(q), &answer) == Ctl::kApplied) {
      st = answer->flow_status();
    }
    if (st != 0) {
      // Another shard's app has the address, or a table is full: the listen did not happen.
      unshare_listener(s.id, s.shard, id);
      if (app_ctl(s, CtlRequest::make(ctl::Unlisten{{}, s.id, id}), 0) != 0) {
        spdlog::error("app {}: cannot withdraw listener {} that shard {} refused", s.id, id, k);
      }
      return st;
    }
  }
  return 0;
}

void AppServer::unshare_listener(uint32_t app, uint16_t shard, uint32_t id) {
  for (size_t k = 0; k < ctl_.size(); k++) {
    if (k == shard) continue;
    ctl::ListenShare q;
    q.add = false;
    q.app_id = app;
    q.shard = shard;
    q.listener = id;
    if (ctl(uint16_t(k), CtlRequest::make(q)) != Ctl::kApplied) {
      spdlog::error(
          "app {}: shard {} did not answer; it may still hand frames for the app's "
          "listener to shard {}",
          app, k, shard);
    }
  }
}

uint16_t AppServer::pick_shard() const {
  std::vector<size_t> apps(ctl_.size());
  for (const auto& [fd, s] : sessions_) {
    if (s.id != 0) apps[s.shard]++;
  }
  return static_cast<uint16_t>(std::min_element(apps.begin(), apps.end()) - apps.begin());
}

int32_t AppServer::ctl_flow(Session& s, std::unique_ptr<CtlRequest> req,
                            std::unique_ptr<CtlRequest>* out) {
  std::unique_ptr<CtlRequest> answer;
  if (int32_t st = app_ctl(s, std::move(req), 0, &answer); st != 0) return st;
  int32_t st = answer->flow_status();
  if (out != nullptr) *out = std::move(answer);
  return st;
}

int32_t AppServer::hello(Session& s, const abi::Hello& m, abi::HelloReply& out) {
  out.min_version = abi::kAbiMinVersion;
  out.max_version = abi::kAbiVersion;
  uint16_t v = std::min(m.max_version, abi::kAbiVersion);
  if (m.min_version > m.max_version || v < std::max(m.min_version, abi::kAbiMinVersion)) {
    if (refusals_.take()) {
      spdlog::warn("app pid {}: no common protocol version (app {}-{}, cleaved {}-{})", s.cred.pid,
                   m.min_version, m.max_version, abi::kAbiMinVersion, abi::kAbiVersion);
    }
    return CL_EVERSION;
  }
  size_t len = strnlen(m.name, abi::kAppNameMax);
  if (len == abi::kAppNameMax ||
      !std::all_of(m.name, m.name + len, [](char c) { return c >= 0x20 && c < 0x7f; })) {
    return CL_EINVAL;
  }
  // Apps in limbo may still hold places in the dataplane's table: they count until settled.
  settle();
  if (apps() + limbo_.size() >= cfg_.apps.max_apps) {
    if (refusals_.take()) {
      spdlog::warn("app pid {} refused: apps.max_apps ({}) connected{}", s.cred.pid,
                   cfg_.apps.max_apps,
                   limbo_.empty() ? "" : " or waiting for the dataplane to let go of them");
    }
    return limbo_.empty() ? CL_ENOSPC : CL_EAGAIN;
  }
  const AppQuota& q = s.rule->quota;
  uint32_t id = next_id_;
  std::string why;
  uint64_t size = uint64_t{q.region_mb} * kMiB;
  if (int r = AppMemory::create("cleave-app-" + std::to_string(id), size, try_huge_, s.region, why);
      r != 0) {
    spdlog::error("app pid {}: cannot create its region: {}", s.cred.pid, why);
    return r;
  }
  if (!s.region.hugetlb() && !warned_no_huge_) {
    warned_no_huge_ = true;
    spdlog::warn(
        "app regions use ordinary pages ({}); reserve hugepages for them (README 'Hugepages')",
        try_huge_ ? why : "eal.hugepages: off");
  }
  if (int r = s.region.register_dpdk(ports_, why); r != 0) {
    spdlog::error("app pid {}: cannot register its region with DPDK: {}", s.cred.pid, why);
    s.region.reset();
    return r;
  }
  // [header page][pipe area: a quarter][heap]
  uint64_t pipe_area = (size / 4) & ~uint64_t{abi::kCacheLine - 1};
  s.heap_offset = abi::kRegionHeaderSize + pipe_area;
  s.heap_size = size > s.heap_offset ? size - s.heap_offset : 0;
  s.pipe_area.init(reinterpret_cast<uintptr_t>(s.region.base()) + abi::kRegionHeaderSize,
                   pipe_area);
  auto* hdr = reinterpret_cast<abi::RegionHeader*>(s.region.base());
  *hdr = abi::RegionHeader{abi::kMagic,
                           v,
                           static_cast<uint16_t>(s.region.hugetlb() ? abi::kRegionHugetlb : 0),
                           id,
                           0,
                           size,
                           abi::kRegionHeaderSize,
                           pipe_area,
                           s.heap_offset,
                           s.heap_size};

  auto dp = std::make_unique<DpApp>();
  dp->id = id;
  dp->uid = s.cred.uid;
  dp->error_budget = q.error_budget;
  dp->max_flows = q.flows;
  dp->mrs.resize(size_t{q.mrs} + 1);
  dp->mrs[abi::kHeapMr] = {s.region.base() + s.heap_offset, s.heap_size,
                           abi::kAccessRead | abi::kAccessWrite};
  dp->pipes.resize(q.pipes);
  // Version 4: the app marks its submit pipes with work in its header page (shm_abi.h).
  if (v >= 4) {
    dp->submit_ready =
        &reinterpret_cast<abi::SubmitSummary*>(s.region.base() + abi::kSubmitSummaryOffset)->ready;
  }
  ctl::AppAttach attach;
  attach.app = dp.get();
  std::shared_ptr<CtlRequest> late;
  s.shard = pick_shard();
  switch (ctl(s.shard, CtlRequest::make(attach), nullptr, &late)) {
    case Ctl::kApplied:
      break;
    case Ctl::kRefused:  // the dataplane's app table is full, or the NIC's MR table
      s.region.reset();
      return CL_ENOSPC;
    case Ctl::kWithdrawn:
      s.region.reset();
      return CL_ETIMEDOUT;
    case Ctl::kLate: {
      // The dataplane may attach it yet: limbo keeps what it would reference, detaches it if
      // so, and its id is not given to anyone else.
      next_id_++;
      Limbo l;
      l.id = id;
      l.shard = s.shard;
      l.pending = std::move(late);
      l.attach = true;
      l.dp = std::move(dp);
      l.memory.push_back(std::move(s.region));
      limbo_.push_back(std::move(l));
      limbo_count_.store(limbo_.size(), std::memory_order_relaxed);
      return CL_ETIMEDOUT;
    }
  }
  next_id_++;
  pending_.forget(s.fd);
  counters_.clients.store(pending_.size(), std::memory_order_relaxed);
  s.dp = std::move(dp);
  s.id = id;
  s.version = v;
  s.name.assign(m.name, len);
  s.memory = size;
  out.app_id = id;
  out.region_size = size;
  out.pipe_area_offset = abi::kRegionHeaderSize;
  out.pipe_area_size = pipe_area;
  out.heap_offset = s.heap_offset;
  out.heap_size = s.heap_size;
  out.region_flags = hdr->flags;
  out.quotas = {uint64_t{q.memory_mb} * kMiB, q.pipes, q.mrs, q.flows, q.pipe_entries};
  apps_.store(apps_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  spdlog::info("app {} '{}' (pid {}, uid {}) connected: region {} MiB on {}", id, s.name,
               s.cred.pid, s.cred.uid, q.region_mb,
               s.region.hugetlb() ? "hugepages" : "ordinary pages");
  return 0;
}

int32_t AppServer::pipe_create(Session& s, const abi::PipeCreate& m, int fd, abi::PipeReply& out) {
  // The doorbell fd is ours: closed on every refusal, kept by the pipe or held by the session.
  struct Owned {
    int fd;
    ~Owned() {
      if (fd >= 0) close(fd);
    }
  } owned{fd};
  const AppQuota& q = s.rule->quota;
  auto kind = static_cast<abi::PipeKind>(m.kind);
  if (kind != abi::PipeKind::kSubmit && kind != abi::PipeKind::kRecv &&
      kind != abi::PipeKind::kCompletion) {
    return CL_EINVAL;
  }
  if ((m.flags & ~abi::kPipeDoorbell) != 0 || m.reserved[0] || m.reserved[1] || m.reserved[2])
    return CL_EINVAL;
  bool doorbell = (m.flags & abi::kPipeDoorbell) != 0;
  if (doorbell != (fd >= 0) || (doorbell && kind != abi::PipeKind::kCompletion)) return CL_EINVAL;
  // The dataplane writes this fd: it must be an eventfd, and never block.
  if (doorbell && (!is_eventfd(fd) || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0))
    return CL_EINVAL;
  if (m.entries < abi::kPipeMinEntries || m.entries > abi::kPipeMaxEntries ||
      (m.entries & (m.entries - 1)) != 0) {
    return CL_EINVAL;
  }
  if (m.entries > q.pipe_entries || s.pipes.size() >= q.pipes) return CL_EDQUOT;
  if (kind != abi::PipeKind::kCompletion) {
    auto cq = s.pipes.find(m.cq);
    if (cq == s.pipes.end() || cq->second.kind != abi::PipeKind::kCompletion) return CL_ENOENT;
  }
  uint64_t bytes = abi::pipe_bytes(kind, m.entries);
  uint64_t off = s.pipe_area.alloc(bytes, abi::kCacheLine);
  if (off == ipc::Heap::kNone) return CL_ENOMEM;
  off += abi::kRegionHeaderSize;
  uint32_t id = free_id(s.pipes, 0, q.pipes);
  std::memset(s.region.base() + off, 0, bytes);

  DpPipe p;
  p.kind = kind;
  p.cq = static_cast<uint16_t>(kind == abi::PipeKind::kCompletion ? 0 : m.cq);
  p.doorbell_fd = fd;
  ipc::PipeView v = ipc::pipe_at(s.region.base(), off);
  switch (kind) {
    case abi::PipeKind::kSubmit:
      p.sq = {v.ctl, static_cast<abi::SendEntry*>(v.ring), m.entries};
      break;
    case abi::PipeKind::kRecv:
      p.rq = {v.ctl, static_cast<abi::RecvEntry*>(v.ring), m.entries};
      break;
    case abi::PipeKind::kCompletion:
      p.cq_out = {v.ctl, static_cast<abi::Completion*>(v.ring), m.entries};
      break;
  }
  ctl::AppSetPipe set;
  set.app_id = s.id;
  set.index = id;
  set.pipe = p;
  auto req = CtlRequest::make(set);
  // Unfinished, the dataplane may install the pipe yet: its doorbell stays open (and its
  // number unused) until the app is detached; the pipe's place in the region is never reused.
  if (int32_t st = app_ctl(s, std::move(req), CL_ENOSPC, nullptr, nullptr, owned.fd); st != 0) {
    if (s.lost_sync) {
      owned.fd = -1;
    } else {
      s.pipe_area.free(off - abi::kRegionHeaderSize);
    }
    return st;
  }
  owned.fd = -1;
  s.pipes[id] = {kind, m.entries, off, p.cq, fd};
  out.pipe = id;
  out.entries = m.entries;
  out.offset = off;
  return 0;
}

int32_t AppServer::pipe_destroy(Session& s, const abi::PipeDestroy& m) {
  auto it = s.pipes.find(m.pipe);
  if (it == s.pipes.end()) return CL_ENOENT;
  if (it->second.kind == abi::PipeKind::kCompletion) {
    for (auto& [id, p] : s.pipes) {
      if (p.kind != abi::PipeKind::kCompletion && p.cq == m.pipe) return CL_EBUSY;
    }
  }
  ctl::AppSetPipe set;  // an empty pipe: the slot is freed
  set.app_id = s.id;
  set.index = m.pipe;
  auto req = CtlRequest::make(set);
  if (int32_t st = app_ctl(s, std::move(req), CL_EBUSY, nullptr, nullptr, it->second.doorbell_fd);
      st != 0) {
    // Unfinished: the pipe may be gone or not; its doorbell is held, its place never reused.
    if (s.lost_sync) s.pipes.erase(it);
    return st;
  }
  if (it->second.doorbell_fd >= 0) close(it->second.doorbell_fd);
  s.pipe_area.free(it->second.offset - abi::kRegionHeaderSize);
  s.pipes.erase(it);
  return 0;
}

int32_t AppServer::mr_reg(Session& s, const abi::MrReg& m, int fd, abi::MrReply& out) {
  const AppQuota& q = s.rule->quota;
  if ((m.access & ~abi::kAccessAll) != 0 || m.reserved != 0 || m.length == 0) return CL_EINVAL;
  if (s.mrs.size() >= q.mrs || m.length > uint64_t{q.memory_mb} * kMiB - s.memory) {
    return CL_EDQUOT;
  }
  MrInfo mr;
  mr.access = m.access;
  std::string why;
  if (int r = AppMemory::import(fd, m.length, mr.mem, why); r != 0) {
    spdlog::info("app {}: MR registration refused: {}", s.id, why);
    return r;
  }
  if (int r = mr.mem.register_dpdk(ports_, why); r != 0) {
    spdlog::warn("app {}: cannot register an MR with DPDK: {}", s.id, why);
    return r;
  }
  uint32_t id = free_id(s.mrs, 1, q.mrs + 1);
  ctl::AppSetMr set;
  set.app_id = s.id;
  set.index = id;
  set.mr = {mr.mem.base(), mr.mem.length(), mr.access};
  auto req = CtlRequest::make(set);
  std::unique_ptr<CtlRequest> answer;
  // Refused: a table of the NIC is full. Unfinished: the memory is held until the app goes.
  if (int32_t st = app_ctl(s, std::move(req), CL_ENOSPC, &answer, &mr.mem); st != 0) return st;
  s.memory += m.length;
  out.mr = id;
  out.rkey = s.version >= 3 ? answer->as<ctl::AppSetMr>().mr.rkey : 0;
  s.mrs.emplace(id, std::move(mr));
  return 0;
}

int32_t AppServer::mr_dereg(Session& s, const abi::MrDereg& m) {
  auto it = s.mrs.find(m.mr);
  if (it == s.mrs.end()) return CL_ENOENT;
  ctl::AppSetMr set;  // an empty MR: the slot is freed
  set.app_id = s.id;
  set.index = m.mr;
  auto req = CtlRequest::make(set);
  const uint64_t len = it->second.mem.length();
  // Refused: the app still has flows that may use the memory. Unfinished: the dataplane may
  // still reference it, so it stays mapped until the app is detached.
  if (int32_t st = app_ctl(s, std::move(req), CL_EBUSY, nullptr, &it->second.mem); st != 0) {
    if (s.lost_sync) s.mrs.erase(it);
    return st;
  }
  s.memory -= len;
  s.mrs.erase(it);
  return 0;
}

AppServer::Ctl AppServer::ctl(uint16_t shard, std::unique_ptr<CtlRequest> req,
                              std::unique_ptr<CtlRequest>* answer,
                              std::shared_ptr<CtlRequest>* late) {
  // Flow requests carry their outcome in their status, which the caller reads.
  const bool flow = req->is_flow();
  CtlMiss miss = CtlMiss::kNone;
  req = ctl_[shard].call(std::move(req), kCtlTimeout, &miss, late);
  if (!req) {
    bump(ctl_timeouts_);
    spdlog::error("app server: the dataplane did not answer a control request in {} ms ({})",
                  kCtlTimeout.count(),
                  miss == CtlMiss::kLate ? "it is still working on it" : "withdrawn, not applied");
    return miss == CtlMiss::kLate ? Ctl::kLate : Ctl::kWithdrawn;
  }
  bool ok = flow || req->app_ok();
  if (answer != nullptr) *answer = std::move(req);
  return ok ? Ctl::kApplied : Ctl::kRefused;
}

int32_t AppServer::app_ctl(Session& s, std::unique_ptr<CtlRequest> req, int32_t refused,
                           std::unique_ptr<CtlRequest>* answer, AppMemory* memory, int fd) {
  switch (ctl(s.shard, std::move(req), answer)) {
    case Ctl::kApplied:
      return 0;
    case Ctl::kRefused:
      return refused;
    case Ctl::kWithdrawn:
      return CL_ETIMEDOUT;
    case Ctl::kLate:
      s.lost_sync = true;
      if (memory != nullptr && memory->base() != nullptr) s.held.push_back(std::move(*memory));
      if (fd >= 0) s.held_fds.push_back(fd);
      return CL_ETIMEDOUT;
  }
  return CL_ETIMEDOUT;
}

bool AppServer::send(Session& s, const void* msg, size_t len, int fd) {
  // Replies are small and one per request: an app whose socket buffer is full is not reading
  // them, and is not waited for.
  return ipc::send_msg(s.fd, msg, len, fd, MSG_DONTWAIT) == static_cast<ssize_t>(len);
}

void AppServer::notice(Session& s, abi::NoticeReason why) {
  abi::Notice n{};
  n.h = {abi::kMagic, s.version, static_cast<uint16_t>(abi::MsgType::kNotice), 0, 0};
  n.reason = static_cast<uint32_t>(why);
  send(s, &n, sizeof n);
}

void AppServer::on_tick() {
  main_.check("AppServer::on_tick");
  settle();
  auto now = Clock::now();
  std::vector<int> evict, stale;
  for (auto& [fd, s] : sessions_) {
    if (s.id != 0 && s.dp->evict.load(std::memory_order_acquire)) evict.push_back(fd);
    if (s.id == 0 && now - s.connected > kHelloTimeout) stale.push_back(fd);
  }
  for (int fd : evict) {
    Session& s = sessions_.at(fd);
    spdlog::warn("app {} '{}' (pid {}) disconnected: over its error budget of {} bad requests/s",
                 s.id, s.name, s.cred.pid, s.rule->quota.error_budget);
    notice(s, abi::NoticeReason::kEvicted);
    close_session(fd, "evicted");
  }
  for (int fd : stale) {
    bump(hello_timeouts_);
    close_session(fd, "no hello");
  }
}

void AppServer::close_session(int fd, const char* why) {
  auto it = sessions_.find(fd);
  if (it == sessions_.end()) return;
  Session& s = it->second;
  if (s.id != 0) {
    auto t0 = Clock::now();
    uint32_t id = s.id;
    size_t pipes = s.pipes.size(), mrs = s.mrs.size();
    reclaim(s);
    auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
    spdlog::info("app {} '{}' (pid {}) {}: reclaimed its region, {} pipe(s) and {} MR(s) in {} us",
                 id, s.name, s.cred.pid, why, pipes, mrs, us);
  }
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  sessions_.erase(it);
  pending_.forget(fd);
  counters_.clients.store(pending_.size(), std::memory_order_relaxed);
}

namespace {

std::unique_ptr<CtlRequest> detach_request(uint32_t id) {
  ctl::AppDetach d;
  d.app_id = id;
  return CtlRequest::make(d);
}

}  // namespace

void AppServer::reclaim(Session& s) {
  std::shared_ptr<CtlRequest> late;
  Ctl o = ctl(s.shard, detach_request(s.id), nullptr, &late);
  unshare_listener(s.id, s.shard, transport::kNoFlow);
  // Answered either way (detached, or the dataplane had no such app): it holds nothing of it.
  if (o == Ctl::kWithdrawn || o == Ctl::kLate) {
    // The dataplane may still hold the app: its memory, tables and doorbells wait in limbo
    // until a detach is answered (withdrawn: settle() sends it again).
    Limbo l;
    l.id = s.id;
    l.shard = s.shard;
    l.pending = std::move(late);
    l.dp = std::move(s.dp);
    l.memory.push_back(std::move(s.region));
    for (auto& [id, mr] : s.mrs)
      l.memory.push_back(std::move(mr.mem));
    for (AppMemory& m : s.held)
      l.memory.push_back(std::move(m));
    for (auto& [id, p] : s.pipes) {
      if (p.doorbell_fd >= 0) l.fds.push_back(p.doorbell_fd);
    }
    l.fds.insert(l.fds.end(), s.held_fds.begin(), s.held_fds.end());
    limbo_.push_back(std::move(l));
    limbo_count_.store(limbo_.size(), std::memory_order_relaxed);
  } else {
    for (auto& [id, p] : s.pipes) {
      if (p.doorbell_fd >= 0) close(p.doorbell_fd);
    }
    for (int fd : s.held_fds)
      close(fd);
  }
  s.pipes.clear();
  s.mrs.clear();
  s.held.clear();
  s.held_fds.clear();
  s.region.reset();
  s.dp.reset();
  s.id = 0;
  apps_.store(apps_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

void AppServer::settle() {
  for (auto it = limbo_.begin(); it != limbo_.end();) {
    Limbo& l = *it;
    if (l.pending != nullptr && !l.pending->done.load(std::memory_order_acquire)) {
      ++it;
      continue;
    }
    // Held: a detach never sent (or not taken), or an attach the dataplane applied late.
    bool held = l.pending == nullptr || (l.attach && l.pending->app_ok());
    if (l.attach && held) {
      bump(late_attached_);
      spdlog::warn("app {}: the dataplane attached it after its hello had given up; detaching it",
                   l.id);
    }
    if (held) {
      l.attach = false;
      l.pending = ctl_[l.shard].post(detach_request(l.id));  // ring full: again next tick
      ++it;
      continue;
    }
    // An answered detach, or an attach refused: the dataplane references none of it.
    for (int fd : l.fds)
      close(fd);
    it = limbo_.erase(it);
  }
  limbo_count_.store(limbo_.size(), std::memory_order_relaxed);
}

std::map<uint32_t, AppCounters> AppServer::counters() {
  std::map<uint32_t, AppCounters> out;
  for (size_t k = 0; k < ctl_.size(); k++) {
    ctl::AppCountersList list;
    list.rows.reserve(cfg_.apps.max_apps);
    std::unique_ptr<CtlRequest> answer;
    if (ctl(uint16_t(k), CtlRequest::make(std::move(list)), &answer) != Ctl::kApplied)
      throw MgmtError("unavailable", "the dataplane did not answer");
    for (const AppCountersRow& r : answer->as<ctl::AppCountersList>().rows)
      out[r.id] = r.counters;
  }
  return out;
}

nlohmann::json AppServer::describe(const Session& s, const AppCounters* c, bool detail) const {
  using nlohmann::json;
  const AppQuota& q = s.rule->quota;
  auto age = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - s.connected).count();
  json j = {{"id", s.id},
            {"name", s.name},
            {"pid", s.cred.pid},
            {"uid", s.cred.uid},
            {"gid", s.cred.gid},
            {"shard", s.shard},
            {"connected_s", age},
            {"region_bytes", s.region.length()},
            {"hugepages", s.region.hugetlb()},
            {"dpdk_external_memory", s.region.dpdk_knows()},
            {"dma_mapped_ports", s.region.dma_mapped_ports()},
            {"memory_bytes", s.memory},
            {"memory_quota_bytes", uint64_t{q.memory_mb} * kMiB},
            {"pipes", s.pipes.size()},
            {"pipes_quota", q.pipes},
            {"mrs", s.mrs.size()},
            {"mrs_quota", q.mrs},
            {"flows_quota", q.flows}};
  if (c != nullptr) {
    json ops = json::object();
    static constexpr const char* kOps[] = {"nop",        "copy",       "send",
                                           "flow_send",  "flow_recv",  "flow_close",
                                           "flow_abort", "rdma_write", "rdma_read"};
    static_assert(std::size(kOps) == abi::kOpCount);
    for (size_t i = 0; i < abi::kOpCount; i++)
      ops[kOps[i]] = c->ops[i];
    json errors = json::object();
    for (size_t i = 0; i < kAppErrorCount; i++)
      errors[app_error_name(static_cast<AppError>(i))] = c->errors[i];
    j["counters"] = {{"ops", ops},
                     {"bytes", c->bytes},
                     {"completions", c->completions},
                     {"recv_taken", c->recv_taken},
                     {"no_recv", c->no_recv},
                     {"cq_full", c->cq_full},
                     {"doorbells", c->doorbells},
                     {"flows", c->flows},
                     {"flows_over_quota", c->flows_over_quota},
                     {"errors_total", c->errors_total}};
    j["errors"] = errors;
  }
  if (detail) {
    json pipes = json::array();
    for (auto& [id, p] : s.pipes) {
      json pj = {{"id", id},
                 {"kind", kind_name(p.kind)},
                 {"entries", p.entries},
                 {"offset", p.offset},
                 {"doorbell", p.doorbell_fd >= 0}};
      if (p.kind != abi::PipeKind::kCompletion) pj["cq"] = p.cq;
      pipes.push_back(pj);
    }
    json mrs = json::array();
    mrs.push_back({{"id", abi::kHeapMr},
                   {"bytes", s.heap_size},
                   {"access", access_str(abi::kAccessRead | abi::kAccessWrite)},
                   {"kind", "heap"}});
    for (auto& [id, mr] : s.mrs) {
      mrs.push_back({{"id", id},
                     {"bytes", mr.mem.length()},
                     {"access", access_str(mr.access)},
                     {"dpdk_external_memory", mr.mem.dpdk_knows()},
                     {"kind", mr.mem.hugetlb() ? "memfd (hugepages)" : "memfd"}});
    }
    j["pipe_list"] = pipes;
    j["mr_list"] = mrs;
  }
  return j;
}

nlohmann::json AppServer::stats() const {
  return {{"apps", get(apps_)},
          {"max_apps", cfg_.apps.max_apps},
          {"pending", get(counters_.clients)},
          {"max_pending", cfg_.apps.max_pending},
          {"max_pending_per_uid", cfg_.apps.max_pending_per_uid},
          {"accepted", get(counters_.accepted)},
          {"refused", get(counters_.refused)},
          {"refused_not_allowed", get(refused_uid_)},
          {"evicted", get(counters_.evicted)},
          {"reaped", get(counters_.reaped)},
          {"hello_timeouts", get(hello_timeouts_)},
          {"dataplane_timeouts", get(ctl_timeouts_)},
          {"late_attaches", get(late_attached_)},
          {"limbo", get(limbo_count_)}};
}

nlohmann::json AppServer::list() {
  auto c = counters();
  nlohmann::json apps = nlohmann::json::array();
  for (auto& [fd, s] : sessions_) {
    if (s.id == 0) continue;
    auto it = c.find(s.id);
    apps.push_back(describe(s, it == c.end() ? nullptr : &it->second, false));
  }
  std::sort(apps.begin(), apps.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a["id"].get<uint32_t>() < b["id"].get<uint32_t>();
  });
  return {{"apps", apps}, {"max_apps", cfg_.apps.max_apps}, {"socket", path_}};
}

nlohmann::json AppServer::show(uint32_t id) {
  for (auto& [fd, s] : sessions_) {
    if (s.id != id) continue;
    auto c = counters();
    auto it = c.find(id);
    return describe(s, it == c.end() ? nullptr : &it->second, true);
  }
  throw MgmtError("not_found",
                  "no app with id " + std::to_string(id) + "; see 'cleavectl app list'");
}

}  // namespace cleave::dp
