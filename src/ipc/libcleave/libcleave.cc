// libcleave.cc - libcleave's control path: the connection to cleaved, the region, the heap, MR
// registration, queue creation, and opening flows (listen, connect). The data path (post, poll,
// wait) is in datapath.cc.
//
// Every control call is one request and one reply on the app socket, serialised by the context's
// control lock. The daemon is a separate process that may die or stall at any moment: every
// send and receive has a timeout, EOF makes the context fail for good (CL_EDAEMON), and anything
// the daemon sends that does not fit the protocol poisons the context as well, since request and
// reply can no longer be matched.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "internal.h"
#include "unix_msg.h"

using namespace cleave;

namespace cleave::lib {

int64_t coarse_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace {

constexpr char kDefaultSocket[] = "/run/cleave/app.sock";

void close_fds(const int* fds, int n) {
  for (int i = 0; i < n; i++)
    close(fds[i]);
}

int notice_code(const abi::Notice& n) {
  switch (static_cast<abi::NoticeReason>(n.reason)) {
    case abi::NoticeReason::kEvicted:
      return CL_EEVICTED;
    case abi::NoticeReason::kRefused:
      return n.h.status < 0 ? n.h.status : CL_EDAEMON;
    default:
      return CL_EDAEMON;
  }
}

// The daemon's last word after a send failed or a read was reset: a Notice (a refusal as it
// accepted the connection, an eviction) may wait behind the closed socket. When the daemon
// closed with our message unread, the reset is reported first and hides it from one read.
// Its code, or CL_EDAEMON.
int closing_notice(int sock) {
  alignas(8) unsigned char buf[abi::kMaxMessage];
  int fds[4], nfds = 0;
  bool trunc = false;
  ssize_t n = -ECONNRESET;
  for (int attempt = 0; attempt < 2 && n == -ECONNRESET; attempt++) {
    n = ipc::recv_msg(sock, buf, sizeof buf, MSG_DONTWAIT, fds, 4, &nfds, &trunc);
    close_fds(fds, nfds);
  }
  abi::Notice no{};
  if (n < static_cast<ssize_t>(sizeof no.h)) return CL_EDAEMON;
  std::memcpy(&no, buf, std::min(sizeof no, static_cast<size_t>(n)));
  if (no.h.magic != abi::kMagic || no.h.type != static_cast<uint16_t>(abi::MsgType::kNotice))
    return CL_EDAEMON;
  return notice_code(no);
}

bool power_of_two(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace
}  // namespace cleave::lib

using cleave::ipc::recv_msg;
using cleave::lib::close_fds;

int cl_ctx::fail(int code) {
  int expected = 0;
  if (err.compare_exchange_strong(expected, code, std::memory_order_relaxed)) {
    // The connection is unusable from now on: let the daemon see EOF and reclaim, but keep the
    // descriptor so no other thread's poll() lands on a reused number.
    if (sock >= 0) shutdown(sock, SHUT_RDWR);
    return code;
  }
  return expected;
}

int cl_ctx::poll_daemon(bool block) {
  if (int e = check()) return e;
  std::unique_lock lk(ctl_mu, std::defer_lock);
  if (block) {
    lk.lock();
  } else if (!lk.try_lock()) {
    return check();
  }
  // With the lock held no request is outstanding, so anything readable is unsolicited.
  for (;;) {
    if (int e = check()) return e;
    alignas(8) unsigned char buf[abi::kMaxMessage];
    int fds[4], nfds;
    bool trunc;
    ssize_t n = recv_msg(sock, buf, sizeof buf, MSG_DONTWAIT, fds, 4, &nfds, &trunc);
    close_fds(fds, nfds);
    if (n < 0 && (n == -EAGAIN || n == -EWOULDBLOCK)) return 0;
    if (n <= 0) return fail(n == -ECONNRESET ? lib::closing_notice(sock) : CL_EDAEMON);
    abi::Notice msg{};
    std::memcpy(&msg, buf, std::min(sizeof msg, static_cast<size_t>(n)));
    if (static_cast<size_t>(n) < sizeof(abi::MsgHeader) || msg.h.magic != abi::kMagic ||
        msg.h.type != static_cast<uint16_t>(abi::MsgType::kNotice))
      return fail(CL_EPROTO);
    return fail(lib::notice_code(msg));
  }
}

namespace cleave::lib {
namespace {

// Sends `req` (its header's magic, version and seq filled in here) with an optional descriptor
// and waits for the reply of type `type` into `reply` (zero-filled past what arrived). Returns 0
// when a reply arrived (its status is the caller's to read), or the context's sticky error.
// Caller holds ctx->ctl_mu.
int call_locked(cl_ctx* ctx, void* req, size_t req_len, int send_fd, abi::MsgType type, void* reply,
                size_t reply_len, int* recv_fd) {
  if (int e = ctx->check()) return e;
  auto* h = static_cast<abi::MsgHeader*>(req);
  h->magic = abi::kMagic;
  h->version = ctx->version != 0 ? ctx->version : abi::kAbiVersion;
  h->seq = ++ctx->seq;
  h->status = 0;

  ssize_t sent = ipc::send_msg(ctx->sock, req, req_len, send_fd, 0);
  // Any failure to send, a timeout included, means the daemon is gone or stuck, or refused us.
  if (sent != static_cast<ssize_t>(req_len)) return ctx->fail(closing_notice(ctx->sock));

  alignas(8) unsigned char buf[abi::kMaxMessage];
  int fds[4], nfds;
  bool trunc;
  ssize_t n = ipc::recv_msg(ctx->sock, buf, sizeof buf, 0, fds, 4, &nfds, &trunc);
  if (n <= 0) {
    // EOF, a reset, or SO_RCVTIMEO expiring: all mean no reply will come; a reset may hide why.
    return ctx->fail(n == -ECONNRESET ? closing_notice(ctx->sock) : CL_EDAEMON);
  }
  abi::MsgHeader rh{};
  if (static_cast<size_t>(n) >= sizeof rh) std::memcpy(&rh, buf, sizeof rh);
  if (static_cast<size_t>(n) < sizeof rh || rh.magic != abi::kMagic || trunc) {
    close_fds(fds, nfds);
    return ctx->fail(CL_EPROTO);
  }
  if (rh.type == static_cast<uint16_t>(abi::MsgType::kNotice)) {
    close_fds(fds, nfds);
    abi::Notice no{};
    std::memcpy(&no, buf, std::min(sizeof no, static_cast<size_t>(n)));
    return ctx->fail(notice_code(no));
  }
  // A failed request may get a bare header back; a successful one must be complete.
  if (rh.type != static_cast<uint16_t>(type) || rh.seq != h->seq ||
      (rh.status >= 0 && static_cast<size_t>(n) < reply_len)) {
    close_fds(fds, nfds);
    return ctx->fail(CL_EPROTO);
  }
  std::memset(reply, 0, reply_len);
  std::memcpy(reply, buf, std::min(reply_len, static_cast<size_t>(n)));
  int first = 0;
  if (recv_fd != nullptr) {
    *recv_fd = nfds > 0 ? fds[0] : -1;
    first = nfds > 0 ? 1 : 0;
  }
  close_fds(fds + first, nfds - first);
  return 0;
}

// A reply status must be one of ours: a daemon sending 0 for failure or a positive value would
// otherwise make a call "succeed" with garbage.
int reply_status(const abi::MsgHeader& h) {
  return h.status > 0 ? CL_EPROTO : h.status;
}

}  // namespace

int ctl_timeout_ms() {
  const char* v = std::getenv("CLEAVE_CTL_TIMEOUT_MS");
  if (v == nullptr) return kCtlTimeoutMs;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && n >= 100 && n <= 600000 ? static_cast<int>(n) : kCtlTimeoutMs;
}

namespace {

int connect_socket(const char* path, int* out) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (std::strlen(path) >= sizeof a.sun_path) return CL_EINVAL;
  std::memcpy(a.sun_path, path, std::strlen(path) + 1);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno == EMFILE || errno == ENFILE ? CL_ENOMEM : CL_EDAEMON;
  const int ms = ctl_timeout_ms();
  timeval tv{ms / 1000, suseconds_t{ms % 1000} * 1000};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // also bounds connect()
  int r;
  do {
    r = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } while (r < 0 && errno == EINTR);
  if (r < 0) {
    int e = errno;
    close(fd);
    if (e == ENOENT || e == ECONNREFUSED || e == ENOTDIR) return CL_ENOENT;
    if (e == EACCES || e == EPERM) return CL_EPERM;
    return CL_EDAEMON;
  }
  *out = fd;
  return 0;
}

void app_name(const cl_open_attr* attr, char (&name)[abi::kAppNameMax]) {
  const char* src =
      attr != nullptr && attr->name != nullptr ? attr->name : program_invocation_short_name;
  size_t i = 0;
  for (; src != nullptr && src[i] != '\0' && i + 1 < sizeof name; i++)
    name[i] = src[i] >= 0x20 && src[i] < 0x7f ? src[i] : '?';
  name[i] = '\0';
}

// The region geometry from the reply must fit the mapping, and the header the daemon wrote must
// say the same.
bool region_ok(const abi::HelloReply& r, const abi::RegionHeader& rh) {
  auto inside = [&](uint64_t off, uint64_t len) {
    return off <= r.region_size && len <= r.region_size - off;
  };
  return r.region_size >= abi::kRegionHeaderSize && r.pipe_area_offset >= abi::kRegionHeaderSize &&
         r.heap_offset >= abi::kRegionHeaderSize && inside(r.pipe_area_offset, r.pipe_area_size) &&
         inside(r.heap_offset, r.heap_size) && r.pipe_area_offset % abi::kCacheLine == 0 &&
         r.heap_offset % abi::kCacheLine == 0 && rh.magic == abi::kMagic &&
         rh.version == r.h.version && rh.app_id == r.app_id && rh.size == r.region_size &&
         rh.pipe_area_offset == r.pipe_area_offset && rh.pipe_area_size == r.pipe_area_size &&
         rh.heap_offset == r.heap_offset && rh.heap_size == r.heap_size;
}

void destroy_ctx(cl_ctx* ctx) {
  for (cl_qp* q : ctx->qps)
    delete q;  // its submit queue is in ctx->sqs
  delete ctx->pd;
  for (cl_ring* r : ctx->rings)
    delete r;  // its memory goes with the region or its MR below
  for (cl_sq* q : ctx->sqs)
    delete q;
  for (cl_rq* q : ctx->rqs)
    delete q;
  for (cl_cq* q : ctx->cqs) {
    if (q->efd >= 0) close(q->efd);
    delete q;
  }
  for (cl_mr* m : ctx->mrs) {
    munmap(m->addr, m->length);
    delete m;
  }
  if (ctx->base != nullptr) munmap(ctx->base, ctx->size);
  if (ctx->sock >= 0) close(ctx->sock);
  delete ctx;
}

template <class T>
void erase_one(std::vector<T*>& v, T* p) {
  v.erase(std::remove(v.begin(), v.end(), p), v.end());
}

// Asks the daemon for a pipe and checks that what it answers lies inside the pipe area.
int create_pipe(cl_ctx* ctx, abi::PipeKind kind, uint32_t entries, uint32_t cq, int efd,
                abi::PipeReply* out) {
  abi::PipeCreate req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kPipeCreate);
  req.kind = static_cast<uint8_t>(kind);
  req.entries = entries;
  req.cq = cq;
  req.flags = efd >= 0 ? abi::kPipeDoorbell : 0;
  if (int e = call_locked(ctx, &req, sizeof req, efd, abi::MsgType::kPipeReply, out, sizeof *out,
                          nullptr))
    return e;
  if (int e = reply_status(out->h)) return e;
  uint64_t bytes = abi::pipe_bytes(kind, entries);
  uint64_t rel = out->offset - ctx->pipe_area_offset;
  if (out->entries != entries || out->offset < ctx->pipe_area_offset ||
      out->offset % abi::kCacheLine != 0 || rel > ctx->pipe_area_size ||
      bytes > ctx->pipe_area_size - rel || out->pipe > UINT16_MAX)
    return ctx->fail(CL_EPROTO);
  return 0;
}

void destroy_pipe(cl_ctx* ctx, uint32_t pipe, int* result) {
  abi::PipeDestroy req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kPipeDestroy);
  req.pipe = pipe;
  abi::Reply rep{};
  int e = call_locked(ctx, &req, sizeof req, -1, abi::MsgType::kReply, &rep, sizeof rep, nullptr);
  *result = e != 0 ? e : reply_status(rep.h);
}

int check_entries(const cl_ctx* ctx, uint32_t entries) {
  if (!power_of_two(entries) || entries < abi::kPipeMinEntries || entries > abi::kPipeMaxEntries)
    return CL_EINVAL;
  if (ctx->quotas.pipe_entries != 0 && entries > ctx->quotas.pipe_entries) return CL_EDQUOT;
  return 0;
}

// Publishes a new RQ table for `cq` (caller holds ctl_mu).
void publish_rqs(cl_cq* cq, const RqRing* add, const RqRing* remove) {
  auto t = std::make_unique<RqTable>();
  if (const RqTable* cur = cq->rq_table.load(std::memory_order_relaxed)) t->rqs = cur->rqs;
  if (remove != nullptr)
    t->rqs.erase(std::remove(t->rqs.begin(), t->rqs.end(), remove), t->rqs.end());
  if (add != nullptr) t->rqs.push_back(add);
  cq->rq_table.store(t.get(), std::memory_order_release);
  cq->tables.push_back(std::move(t));
}

}  // namespace
}  // namespace cleave::lib

using namespace cleave::lib;

// The cl_* functions keep the C linkage cleave.h declared them with.

int cl_open(const cl_open_attr* attr, cl_ctx** out) {
  if (out == nullptr) return CL_EINVAL;
  *out = nullptr;
  const char* path = attr != nullptr ? attr->socket_path : nullptr;
  if (path == nullptr) path = std::getenv("CLEAVE_APP_SOCKET");
  if (path == nullptr || *path == '\0') path = kDefaultSocket;

  auto* ctx = new (std::nothrow) cl_ctx;
  if (ctx == nullptr) return CL_ENOMEM;
  if (int e = connect_socket(path, &ctx->sock)) {
    delete ctx;
    return e;
  }

  abi::Hello hello{};
  hello.h.type = static_cast<uint16_t>(abi::MsgType::kHello);
  hello.min_version = abi::kAbiMinVersion;
  hello.max_version = abi::kAbiVersion;
  app_name(attr, hello.name);
  abi::HelloReply rep{};
  int region_fd = -1;
  int e;
  {
    std::lock_guard lk(ctx->ctl_mu);
    e = call_locked(ctx, &hello, sizeof hello, -1, abi::MsgType::kHelloReply, &rep, sizeof rep,
                    &region_fd);
  }
  if (e == 0) e = reply_status(rep.h);
  if (e == 0 && (rep.h.version < abi::kAbiMinVersion || rep.h.version > abi::kAbiVersion))
    e = CL_EVERSION;
  if (e == 0 && region_fd < 0) e = CL_EPROTO;
  struct stat st {};
  if (e == 0 && (fstat(region_fd, &st) != 0 || st.st_size < 0 ||
                 static_cast<uint64_t>(st.st_size) < rep.region_size ||
                 rep.region_size < abi::kRegionHeaderSize))
    e = CL_EPROTO;
  if (e == 0) {
    void* p = mmap(nullptr, rep.region_size, PROT_READ | PROT_WRITE, MAP_SHARED, region_fd, 0);
    if (p == MAP_FAILED) {
      e = CL_ENOMEM;
    } else {
      ctx->base = static_cast<uint8_t*>(p);
      ctx->size = rep.region_size;
      abi::RegionHeader rh;
      std::memcpy(&rh, p, sizeof rh);
      if (!region_ok(rep, rh)) e = CL_EPROTO;
    }
  }
  // The mapping keeps the memory alive; the descriptor is not needed again.
  if (region_fd >= 0) close(region_fd);
  if (e != 0) {
    destroy_ctx(ctx);
    return e;
  }
  ctx->version = rep.h.version;
  if (ctx->version >= kSummaryVersion) {
    ctx->submit_ready =
        &reinterpret_cast<abi::SubmitSummary*>(ctx->base + abi::kSubmitSummaryOffset)->ready;
  }
  ctx->app_id = rep.app_id;
  ctx->pipe_area_offset = rep.pipe_area_offset;
  ctx->pipe_area_size = rep.pipe_area_size;
  ctx->heap_offset = rep.heap_offset;
  ctx->heap_size = rep.heap_size;
  ctx->quotas = rep.quotas;
  ctx->heap.init(reinterpret_cast<uintptr_t>(ctx->base + ctx->heap_offset), ctx->heap_size);
  *out = ctx;
  return 0;
}

int cl_close(cl_ctx* ctx) {
  if (ctx == nullptr) return CL_EINVAL;
  // Closing the socket is the whole protocol: the daemon reclaims the app's pipes, MRs and
  // region on EOF, so nothing is sent one by one.
  destroy_ctx(ctx);
  return 0;
}

uint32_t cl_app_id(const cl_ctx* ctx) {
  return ctx != nullptr ? ctx->app_id : 0;
}

const char* cl_strerror(int err) {
  switch (err) {
    case CL_OK:
      return "success";
    case CL_EPERM:
      return "not allowed to connect to cleaved";
    case CL_ENOENT:
      return "no such pipe or memory region, or no cleaved socket";
    case CL_EIO:
      return "the queue pair's peer reported a remote operational error";
    case CL_EAGAIN:
      return "nothing now, try again";
    case CL_ENOMEM:
      return "out of memory";
    case CL_EACCES:
      return "memory region access rights do not allow the operation";
    case CL_EFAULT:
      return "offset or length outside the memory region";
    case CL_EBUSY:
      return "in use";
    case CL_EINVAL:
      return "invalid argument";
    case CL_ENOSPC:
      return "a table of cleaved is full";
    case CL_EPIPE:
      return "the flow is closed for sending";
    case CL_EPROTO:
      return "malformed message or descriptor";
    case CL_EPROTONOSUPPORT:
      return "the peer does not speak message mode";
    case CL_EOPNOTSUPP:
      return "operation not supported (unknown opcode or flag, or cleaved too old)";
    case CL_EADDRINUSE:
      return "address in use: someone already listens on that port";
    case CL_ENETUNREACH:
      return "network unreachable: no route to the destination";
    case CL_ECONNRESET:
      return "connection reset";
    case CL_ENOBUFS:
      return "the flow's send queue is full";
    case CL_ETIMEDOUT:
      return "timed out";
    case CL_ECONNREFUSED:
      return "connection refused";
    case CL_EHOSTUNREACH:
      return "host unreachable: the next hop did not answer ARP";
    case CL_EDQUOT:
      return "over this application's quota";
    case CL_ECANCELED:
      return "work request flushed: the queue pair is in the error state or destroyed";
    case CL_EDAEMON:
      return "cleaved is gone";
    case CL_EVERSION:
      return "no protocol version in common with cleaved";
    case CL_EEVICTED:
      return "cleaved evicted this application";
    case CL_ENORECV:
      return "no receive buffer posted";
    case CL_ETRUNC:
      return "receive buffer too short";
    default:
      break;
  }
  // Other negated errno values come from transports through the daemon (a flow's status, e.g.
  // ECONNABORTED after an abort): the C library's text, which is constant and thread-safe.
  if (err < 0 && err > -4096) {
    if (const char* d = strerrordesc_np(-err)) return d;
  }
  return "unknown error";
}

// ---- Heap ----

void* cl_alloc(cl_ctx* ctx, size_t size, size_t align) {
  if (ctx == nullptr || ctx->check() != 0) return nullptr;
  if (align == 0) align = abi::kCacheLine;
  uint64_t off;
  {
    std::lock_guard lk(ctx->heap_mu);
    off = ctx->heap.alloc(size, align);
  }
  return off == ipc::Heap::kNone ? nullptr : ctx->base + ctx->heap_offset + off;
}

void cl_free(cl_ctx* ctx, void* ptr) {
  if (ctx == nullptr || ptr == nullptr) return;
  uint64_t off = cl_heap_offset(ctx, ptr);
  if (off == UINT64_MAX) return;
  std::lock_guard lk(ctx->heap_mu);
  ctx->heap.free(off);  // a stray pointer is ignored rather than corrupting the free list
}

uint64_t cl_heap_offset(const cl_ctx* ctx, const void* ptr) {
  if (ctx == nullptr || ctx->base == nullptr) return UINT64_MAX;
  auto p = reinterpret_cast<uintptr_t>(ptr);
  auto h = reinterpret_cast<uintptr_t>(ctx->base + ctx->heap_offset);
  if (p < h || p - h >= ctx->heap_size) return UINT64_MAX;
  return p - h;
}

// ---- Memory regions ----

int cl_mr_reg(cl_ctx* ctx, int memfd, uint64_t length, unsigned access, cl_mr** out) {
  if (ctx == nullptr || out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (int e = ctx->check()) return e;
  if (memfd < 0 || length == 0 || (access & ~abi::kAccessAll) != 0 || length > SIZE_MAX)
    return CL_EINVAL;
  // Sealed against shrinking, the memory cannot vanish under the daemon or the NIC.
  if (fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0) return CL_EINVAL;
  struct stat st {};
  if (fstat(memfd, &st) != 0 || st.st_size < 0 || static_cast<uint64_t>(st.st_size) < length)
    return CL_EINVAL;
  void* addr = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (addr == MAP_FAILED) return errno == ENOMEM ? CL_ENOMEM : CL_EINVAL;
  auto* mr = new (std::nothrow) cl_mr{ctx, 0, access, addr, length, 0};
  if (mr == nullptr) {
    munmap(addr, length);
    return CL_ENOMEM;
  }

  abi::MrReg req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kMrReg);
  req.length = length;
  req.access = access;
  abi::MrReply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e =
      call_locked(ctx, &req, sizeof req, memfd, abi::MsgType::kMrReply, &rep, sizeof rep, nullptr);
  if (e == 0) e = reply_status(rep.h);
  if (e == 0 && rep.mr == abi::kHeapMr) e = ctx->fail(CL_EPROTO);
  if (e != 0) {
    munmap(addr, length);
    delete mr;
    return e;
  }
  mr->id = rep.mr;
  // Before version 3 the field was reserved: whatever it holds is no key.
  mr->rkey = ctx->version >= kQpVersion ? rep.rkey : 0;
  ctx->mrs.push_back(mr);
  *out = mr;
  return 0;
}

int cl_mr_dereg(cl_mr* mr) {
  if (mr == nullptr) return CL_EINVAL;
  cl_ctx* ctx = mr->ctx;
  abi::MrDereg req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kMrDereg);
  req.mr = mr->id;
  abi::Reply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e = call_locked(ctx, &req, sizeof req, -1, abi::MsgType::kReply, &rep, sizeof rep, nullptr);
  if (e == 0) e = reply_status(rep.h);
  // CL_EBUSY: the daemon keeps the MR (flows still use it), so the app keeps its handle too.
  // Otherwise the handle goes: with the daemon gone there is nothing to keep it for, and a
  // refusal (CL_ENOENT) means the daemon has no such MR either.
  if (e == CL_EBUSY) return e;
  erase_one(ctx->mrs, mr);
  munmap(mr->addr, mr->length);
  delete mr;
  return e;
}

void* cl_mr_addr(const cl_mr* mr) {
  return mr != nullptr ? mr->addr : nullptr;
}
uint64_t cl_mr_length(const cl_mr* mr) {
  return mr != nullptr ? mr->length : 0;
}
uint32_t cl_mr_id(const cl_mr* mr) {
  return mr != nullptr ? mr->id : UINT32_MAX;
}
uint32_t cl_mr_lkey(const cl_mr* mr) {
  return cl_mr_id(mr);
}
uint32_t cl_mr_rkey(const cl_mr* mr) {
  return mr != nullptr ? mr->rkey : 0;
}

// ---- Queues ----

int cl_cq_create(cl_ctx* ctx, uint32_t entries, int doorbell, uint32_t spin_us, cl_cq** out) {
  if (ctx == nullptr || out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (int e = ctx->check()) return e;
  if (int e = check_entries(ctx, entries)) return e;
  int efd = -1;
  if (doorbell) {
    efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd < 0) return CL_ENOMEM;
  }
  abi::PipeReply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e = create_pipe(ctx, abi::PipeKind::kCompletion, entries, 0, efd, &rep);
  auto* cq = e == 0 ? new (std::nothrow) cl_cq : nullptr;
  if (e == 0 && cq == nullptr) {
    int ignored;
    destroy_pipe(ctx, rep.pipe, &ignored);
    e = CL_ENOMEM;
  }
  if (e != 0) {
    if (efd >= 0) close(efd);
    return e;
  }
  cq->ctx = ctx;
  cq->pipe = rep.pipe;
  cq->entries = entries;
  cq->spin_us = spin_us;
  cq->efd = efd;
  ipc::PipeView v = ipc::pipe_at(ctx->base, rep.offset);
  cq->cons =
      ipc::PipeConsumer<abi::Completion>(v.ctl, static_cast<abi::Completion*>(v.ring), entries);
  publish_rqs(cq, nullptr, nullptr);
  ctx->cqs.push_back(cq);
  *out = cq;
  return 0;
}

int cl_cq_destroy(cl_cq* cq) {
  if (cq == nullptr) return CL_EINVAL;
  cl_ctx* ctx = cq->ctx;
  std::lock_guard lk(ctx->ctl_mu);
  if (cq->attached != 0) return CL_EBUSY;
  int e;
  destroy_pipe(ctx, cq->pipe, &e);
  erase_one(ctx->cqs, cq);
  if (cq->efd >= 0) close(cq->efd);
  delete cq;
  return e;
}

namespace {

// Common part of SQ and RQ creation: the CQ must have room for a completion per entry (`room`:
// the entries, or for a QP's submit queue its max_send_wr + max_recv_wr, the completions it can
// have outstanding). The room is reserved before asking the daemon so two threads cannot both
// take the last of it.
template <class Q>
int create_queue(cl_ctx* ctx, cl_cq* cq, uint32_t entries, uint32_t room, abi::PipeKind kind,
                 Q** out, abi::PipeReply* rep) {
  if (ctx == nullptr || cq == nullptr || out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (cq->ctx != ctx) return CL_EINVAL;
  if (int e = ctx->check()) return e;
  if (int e = check_entries(ctx, entries)) return e;
  if (cq->attached_entries + room > cq->entries) return CL_EINVAL;
  cq->attached_entries += room;
  cq->attached++;
  int e = create_pipe(ctx, kind, entries, cq->pipe, -1, rep);
  auto* q = e == 0 ? new (std::nothrow) Q : nullptr;
  if (e == 0 && q == nullptr) {
    int ignored;
    destroy_pipe(ctx, rep->pipe, &ignored);
    e = CL_ENOMEM;
  }
  if (e != 0) {
    cq->attached_entries -= room;
    cq->attached--;
    return e;
  }
  q->ctx = ctx;
  q->cq = cq;
  q->pipe = rep->pipe;
  q->entries = entries;
  q->room = room;
  *out = q;
  return 0;
}

template <class Q>
int destroy_queue(Q* q, std::vector<Q*>& list) {
  cl_ctx* ctx = q->ctx;
  int e;
  destroy_pipe(ctx, q->pipe, &e);
  q->cq->attached_entries -= q->room;
  q->cq->attached--;
  erase_one(list, q);
  return e;
}

// A submit queue on `cq` (caller holds ctx->ctl_mu): cl_sq_create's, and a QP's own.
int create_sq_locked(cl_ctx* ctx, cl_cq* cq, uint32_t entries, uint32_t room, cl_sq** out) {
  abi::PipeReply rep{};
  cl_sq* sq;
  if (int e = create_queue(ctx, cq, entries, room, abi::PipeKind::kSubmit, &sq, &rep)) return e;
  ipc::PipeView v = ipc::pipe_at(ctx->base, rep.offset);
  sq->prod =
      ipc::PipeProducer<abi::SendEntry>(v.ctl, static_cast<abi::SendEntry*>(v.ring), entries);
  sq->ready_bit = abi::submit_bit(sq->pipe);
  ctx->sqs.push_back(sq);
  *out = sq;
  return 0;
}

}  // namespace

int cl_sq_create(cl_ctx* ctx, cl_cq* cq, uint32_t entries, cl_sq** out) {
  if (ctx == nullptr) return CL_EINVAL;
  std::lock_guard lk(ctx->ctl_mu);
  return create_sq_locked(ctx, cq, entries, entries, out);
}

int cl_sq_destroy(cl_sq* sq) {
  if (sq == nullptr) return CL_EINVAL;
  std::lock_guard lk(sq->ctx->ctl_mu);
  int e = destroy_queue(sq, sq->ctx->sqs);
  delete sq;
  return e;
}

int cl_rq_create(cl_ctx* ctx, cl_cq* cq, uint32_t entries, cl_rq** out) {
  if (ctx == nullptr) return CL_EINVAL;
  auto ring = std::unique_ptr<RqRing>(new (std::nothrow) RqRing{0, entries - 1, nullptr});
  if (ring == nullptr) return CL_ENOMEM;
  abi::PipeReply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  cl_rq* rq;
  if (int e = create_queue(ctx, cq, entries, entries, abi::PipeKind::kRecv, &rq, &rep)) return e;
  ring->pipe = rep.pipe;
  ring->wr_ids.reset(new (std::nothrow) uint64_t[entries]());
  if (ring->wr_ids == nullptr) {
    destroy_queue(rq, ctx->rqs);
    delete rq;
    return CL_ENOMEM;
  }
  ipc::PipeView v = ipc::pipe_at(ctx->base, rep.offset);
  rq->prod =
      ipc::PipeProducer<abi::RecvEntry>(v.ctl, static_cast<abi::RecvEntry*>(v.ring), entries);
  rq->ring = ring.get();
  publish_rqs(cq, ring.get(), nullptr);
  cq->rings.push_back(std::move(ring));
  ctx->rqs.push_back(rq);
  *out = rq;
  return 0;
}

int cl_rq_destroy(cl_rq* rq) {
  if (rq == nullptr) return CL_EINVAL;
  std::lock_guard lk(rq->ctx->ctl_mu);
  publish_rqs(rq->cq, nullptr, rq->ring);  // the ring itself is retired with the CQ
  int e = destroy_queue(rq, rq->ctx->rqs);
  delete rq;
  return e;
}

// ---- Flows ----

namespace {

// cl_listen and cl_connect: the same message (FlowOpen) and reply, the id out on success. The
// library's checks come first; the context is left alone when they fail.
int open_flow(cl_ctx* ctx, const cl_cq* cq, const sockaddr_in* addr, const char* transport,
              unsigned flags, bool connect, uint32_t* id) {
  if (ctx == nullptr || id == nullptr) return CL_EINVAL;
  if (int e = ctx->check()) return e;
  if (cq == nullptr || cq->ctx != ctx || addr == nullptr || addr->sin_family != AF_INET)
    return CL_EINVAL;
  size_t tlen = transport != nullptr ? strnlen(transport, abi::kTransportNameMax) : 0;
  if (tlen >= abi::kTransportNameMax) return CL_EINVAL;
  if ((flags & ~unsigned(CL_FLOW_MESSAGE)) != 0) return CL_EOPNOTSUPP;
  if (ctx->version < kFlowVersion) return CL_EOPNOTSUPP;
  abi::FlowOpen req{};
  static_assert(CL_FLOW_MESSAGE == abi::kFlowMessage);
  req.flags = static_cast<uint16_t>(flags);
  req.h.type = static_cast<uint16_t>(connect ? abi::MsgType::kConnect : abi::MsgType::kListen);
  req.ip = ntohl(addr->sin_addr.s_addr);
  req.port = ntohs(addr->sin_port);
  req.cq = cq->pipe;
  if (tlen != 0) std::memcpy(req.transport, transport, tlen);                // the rest stays NUL
  if (connect && (req.ip == INADDR_ANY || req.port == 0)) return CL_EINVAL;  // nowhere to go
  abi::FlowOpenReply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e = call_locked(ctx, &req, sizeof req, -1,
                      connect ? abi::MsgType::kConnectReply : abi::MsgType::kListenReply, &rep,
                      sizeof rep, nullptr);
  if (e == 0) e = reply_status(rep.h);
  if (e == 0) *id = rep.id;
  return e;
}

}  // namespace

int cl_listen(cl_ctx* ctx, cl_cq* cq, const sockaddr_in* addr, const char* transport,
              uint32_t* listener) {
  return open_flow(ctx, cq, addr, transport, 0, /*connect=*/false, listener);
}

int cl_listen_ex(cl_ctx* ctx, cl_cq* cq, const sockaddr_in* addr, const char* transport,
                 unsigned flags, uint32_t* listener) {
  return open_flow(ctx, cq, addr, transport, flags, /*connect=*/false, listener);
}

int cl_unlisten(cl_ctx* ctx, uint32_t listener) {
  if (ctx == nullptr) return CL_EINVAL;
  if (int e = ctx->check()) return e;
  if (ctx->version < kFlowVersion) return CL_EOPNOTSUPP;
  abi::Unlisten req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kUnlisten);
  req.listener = listener;
  abi::Reply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e = call_locked(ctx, &req, sizeof req, -1, abi::MsgType::kReply, &rep, sizeof rep, nullptr);
  return e != 0 ? e : reply_status(rep.h);
}

int cl_connect(cl_ctx* ctx, cl_cq* cq, const sockaddr_in* addr, const char* transport,
               cl_flow* flow) {
  return open_flow(ctx, cq, addr, transport, 0, /*connect=*/true, flow);
}

int cl_connect_ex(cl_ctx* ctx, cl_cq* cq, const sockaddr_in* addr, const char* transport,
                  unsigned flags, cl_flow* flow) {
  return open_flow(ctx, cq, addr, transport, flags, /*connect=*/true, flow);
}

// ---- Queue pairs (version 3) ----

// The public names and the wire's have the same values (compared as integers: the enums differ).
constexpr bool same(long a, long b) {
  return a == b;
}
static_assert(same(CL_QPS_RESET, abi::kQpReset) && same(CL_QPS_INIT, abi::kQpInit) &&
              same(CL_QPS_RTR, abi::kQpRtr) && same(CL_QPS_RTS, abi::kQpRts) &&
              same(CL_QPS_ERR, abi::kQpErr));
static_assert(same(CL_QP_STATE, abi::kQpAttrState) && same(CL_QP_PATH_MTU, abi::kQpAttrPmtu) &&
              same(CL_QP_DEST_QPN, abi::kQpAttrDestQpn) && same(CL_QP_RQ_PSN, abi::kQpAttrRqPsn) &&
              same(CL_QP_SQ_PSN, abi::kQpAttrSqPsn) && same(CL_QP_TIMEOUT, abi::kQpAttrTimeout) &&
              same(CL_QP_RETRY_CNT, abi::kQpAttrRetryCnt) &&
              same(CL_QP_RNR_RETRY, abi::kQpAttrRnrRetry) &&
              same(CL_QP_MIN_RNR_TIMER, abi::kQpAttrMinRnrTimer) &&
              same(CL_QP_MAX_QP_RD_ATOMIC, abi::kQpAttrMaxRdAtomic) &&
              same(CL_QP_MAX_DEST_RD_ATOMIC, abi::kQpAttrMaxDestRdAtomic) &&
              same(CL_QP_ACCESS_FLAGS, abi::kQpAttrAccess) &&
              same(CL_QP_SELECTIVE_REPEAT, abi::kQpAttrSelectiveRepeat) &&
              same(CL_QP_RATE_LIMIT, abi::kQpAttrRateLimit) &&
              same(CL_QP_AV, abi::kQpAttrRemoteIp));
static_assert(same(CL_ACCESS_REMOTE_READ, abi::kAccessRemoteRead) &&
              same(CL_ACCESS_REMOTE_WRITE, abi::kAccessRemoteWrite));
static_assert(same(CL_OP_RDMA_WRITE, abi::kOpRdmaWrite) && same(CL_OP_RDMA_READ, abi::kOpRdmaRead));

namespace {

constexpr uint32_t kQpMaxWr = 4096;

uint32_t next_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v)
    p <<= 1;
  return p;
}

// The public attributes and the wire's: the same fields, the address in network order outside
// and host order inside.
abi::QpAttr to_wire(const cl_qp_attr& a) {
  abi::QpAttr w{};
  w.state = static_cast<uint8_t>(a.qp_state);
  w.timeout = a.timeout;
  w.retry_cnt = a.retry_cnt;
  w.rnr_retry = a.rnr_retry;
  w.min_rnr_timer = a.min_rnr_timer;
  w.max_rd_atomic = a.max_rd_atomic;
  w.max_dest_rd_atomic = a.max_dest_rd_atomic;
  w.selective_repeat = a.selective_repeat;
  w.access = a.qp_access_flags;
  w.pmtu = a.path_mtu;
  w.dest_qpn = a.dest_qp_num;
  w.rq_psn = a.rq_psn;
  w.sq_psn = a.sq_psn;
  w.remote_ip = ntohl(a.remote_ip);
  w.rate_limit_kbps = a.rate_limit_kbps;
  return w;
}

cl_qp_attr from_wire(const abi::QpAttr& w) {
  cl_qp_attr a{};
  a.qp_state = w.state;
  a.path_mtu = w.pmtu;
  a.dest_qp_num = w.dest_qpn;
  a.rq_psn = w.rq_psn;
  a.sq_psn = w.sq_psn;
  a.remote_ip = htonl(w.remote_ip);
  a.qp_access_flags = w.access;
  a.timeout = w.timeout;
  a.retry_cnt = w.retry_cnt;
  a.rnr_retry = w.rnr_retry;
  a.min_rnr_timer = w.min_rnr_timer;
  a.max_rd_atomic = w.max_rd_atomic;
  a.max_dest_rd_atomic = w.max_dest_rd_atomic;
  a.selective_repeat = w.selective_repeat;
  a.rate_limit_kbps = w.rate_limit_kbps;
  return a;
}

int qp_call(cl_qp* qp, abi::MsgType type, abi::MsgType reply_type, void* reply, size_t reply_len) {
  abi::QpId req{};
  req.h.type = static_cast<uint16_t>(type);
  req.qp = qp->id;
  int e = call_locked(qp->ctx, &req, sizeof req, -1, reply_type, reply, reply_len, nullptr);
  return e != 0 ? e : reply_status(*static_cast<abi::MsgHeader*>(reply));
}

}  // namespace

int cl_pd_alloc(cl_ctx* ctx, cl_pd** out) {
  if (ctx == nullptr || out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (int e = ctx->check()) return e;
  if (ctx->version < kQpVersion) return CL_EOPNOTSUPP;
  std::lock_guard lk(ctx->ctl_mu);
  if (ctx->pd != nullptr) return CL_EBUSY;
  auto* pd = new (std::nothrow) cl_pd{ctx};
  if (pd == nullptr) return CL_ENOMEM;
  ctx->pd = pd;
  *out = pd;
  return 0;
}

int cl_pd_dealloc(cl_pd* pd) {
  if (pd == nullptr) return CL_EINVAL;
  cl_ctx* ctx = pd->ctx;
  std::lock_guard lk(ctx->ctl_mu);
  if (pd->qps != 0) return CL_EBUSY;
  ctx->pd = nullptr;
  delete pd;
  return 0;
}

int cl_qp_create(cl_pd* pd, const cl_qp_init_attr* attr, cl_qp** out) {
  if (pd == nullptr || attr == nullptr || out == nullptr) return CL_EINVAL;
  *out = nullptr;
  cl_ctx* ctx = pd->ctx;
  if (int e = ctx->check()) return e;
  if (ctx->version < kQpVersion) return CL_EOPNOTSUPP;
  cl_cq* cq = attr->cq;
  if (cq == nullptr || cq->ctx != ctx) return CL_EINVAL;
  if (attr->max_send_wr < 1 || attr->max_send_wr > kQpMaxWr || attr->max_recv_wr < 1 ||
      attr->max_recv_wr > kQpMaxWr)
    return CL_EINVAL;
  size_t plen = attr->params != nullptr ? strnlen(attr->params, abi::kQpParamsMax) : 0;
  if (plen >= abi::kQpParamsMax) return CL_EINVAL;
  auto* qp = new (std::nothrow) cl_qp{};
  if (qp == nullptr) return CL_ENOMEM;

  abi::QpCreate req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kQpCreate);
  req.cq = cq->pipe;
  req.max_send_wr = attr->max_send_wr;
  req.max_recv_wr = attr->max_recv_wr;
  if (plen != 0) std::memcpy(req.params, attr->params, plen);  // the rest stays NUL
  // Sends and receives share one submit queue, with room for all of both.
  uint32_t wrs = attr->max_send_wr + attr->max_recv_wr;
  uint32_t entries = next_pow2(std::max(abi::kPipeMinEntries, wrs));

  std::lock_guard lk(ctx->ctl_mu);
  cl_sq* sq = nullptr;
  if (int e = create_sq_locked(ctx, cq, entries, wrs, &sq)) {
    delete qp;
    return e;
  }
  abi::QpReply rep{};
  int e = call_locked(ctx, &req, sizeof req, -1, abi::MsgType::kQpReply, &rep, sizeof rep, nullptr);
  if (e == 0) e = reply_status(rep.h);
  if (e == 0 && rep.qpn > 0xffffff) e = ctx->fail(CL_EPROTO);
  if (e != 0) {
    destroy_queue(sq, ctx->sqs);  // its own failure adds nothing to the first
    delete sq;
    delete qp;
    return e;
  }
  qp->ctx = ctx;
  qp->pd = pd;
  qp->cq = cq;
  qp->sq = sq;
  qp->id = rep.qp;
  qp->qpn = rep.qpn;
  qp->ip = rep.ip;
  qp->max_pmtu = rep.max_pmtu;
  pd->qps++;
  ctx->qps.push_back(qp);
  *out = qp;
  return 0;
}

int cl_qp_modify(cl_qp* qp, const cl_qp_attr* attr, unsigned mask) {
  if (qp == nullptr || attr == nullptr) return CL_EINVAL;
  cl_ctx* ctx = qp->ctx;
  if (int e = ctx->check()) return e;
  if ((mask & ~unsigned{abi::kQpAttrAll}) != 0) return CL_EOPNOTSUPP;
  // Values the wire's narrower fields would cut: refused here rather than changed.
  if ((mask & CL_QP_STATE) != 0 && attr->qp_state > CL_QPS_ERR) return CL_EINVAL;
  abi::QpModify req{};
  req.h.type = static_cast<uint16_t>(abi::MsgType::kQpModify);
  req.qp = qp->id;
  req.mask = mask;
  req.attr = to_wire(*attr);
  abi::Reply rep{};
  std::lock_guard lk(ctx->ctl_mu);
  int e = call_locked(ctx, &req, sizeof req, -1, abi::MsgType::kReply, &rep, sizeof rep, nullptr);
  return e != 0 ? e : reply_status(rep.h);
}

int cl_qp_query(cl_qp* qp, cl_qp_attr* attr) {
  if (qp == nullptr || attr == nullptr) return CL_EINVAL;
  if (int e = qp->ctx->check()) return e;
  abi::QpQueryReply rep{};
  std::lock_guard lk(qp->ctx->ctl_mu);
  int e = qp_call(qp, abi::MsgType::kQpQuery, abi::MsgType::kQpQueryReply, &rep, sizeof rep);
  if (e == 0) *attr = from_wire(rep.attr);
  return e;
}

int cl_qp_destroy(cl_qp* qp) {
  if (qp == nullptr) return CL_EINVAL;
  cl_ctx* ctx = qp->ctx;
  std::lock_guard lk(ctx->ctl_mu);
  abi::Reply rep{};
  // The daemon flushes the QP's requests onto its CQ before it answers; then the submit queue
  // that carried them goes. The handle goes whatever the daemon says, as other destroys do.
  int e = qp_call(qp, abi::MsgType::kQpDestroy, abi::MsgType::kReply, &rep, sizeof rep);
  int e2 = destroy_queue(qp->sq, ctx->sqs);
  delete qp->sq;
  qp->pd->qps--;
  erase_one(ctx->qps, qp);
  delete qp;
  return e != 0 ? e : e2;
}

uint32_t cl_qp_num(const cl_qp* qp) {
  return qp != nullptr ? qp->qpn : 0;
}

cl_flow cl_qp_flow(const cl_qp* qp) {
  return qp != nullptr ? qp->id : UINT32_MAX;
}
