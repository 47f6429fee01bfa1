// datapath.cc - libcleave's data path: posting sends and receive buffers (on submit and receive
// queues, and a queue pair's work requests), polling and waiting on completion queues.
//
// Post and poll touch only shared memory and the queue's private state: no locks, no
// allocation, no syscalls. The exceptions are on idle paths: a poll that finds nothing reads the
// coarse clock (vDSO) and, every kLivenessCheckNs, looks at the socket so a dead daemon is
// noticed within a second; cl_cq_wait sleeps in poll().
#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "internal.h"

using namespace cleave;
using cleave::lib::coarse_now_ns;
using cleave::lib::kLivenessCheckNs;

namespace {

constexpr unsigned kBurst = 32;  // entries staged on the stack per produce/consume

// Between polls while cl_cq_wait spins: the spin-wait hint costs a few ns of latency and saves
// power, the SMT sibling's share, and the memory-order flush on leaving the loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Resolves a (mr, offset, length) triple against what the library knows of the MR. The daemon
// checks again; these checks only turn obvious mistakes into an immediate error.
int check_range(const cl_ctx* ctx, const cl_mr* mr, uint64_t offset, uint64_t length, uint32_t need,
                uint32_t* id) {
  uint64_t size = ctx->heap_size;
  uint32_t access = abi::kAccessAll;
  *id = abi::kHeapMr;
  if (mr != nullptr) {
    if (mr->ctx != ctx) return CL_EINVAL;
    size = mr->length;
    access = mr->access;
    *id = mr->id;
  }
  if (offset > size || length > size - offset) return CL_EFAULT;
  if ((access & need) != need) return CL_EACCES;
  return 0;
}

int to_entry(const cl_sq* sq, const cl_send_wr& wr, abi::SendEntry* e) {
  std::memset(e, 0, sizeof *e);
  e->wr_id = wr.wr_id;
  e->opcode = static_cast<uint8_t>(wr.opcode);
  switch (wr.opcode) {
    case CL_OP_NOP:
      return 0;
    case CL_OP_COPY:
      if (int r = check_range(sq->ctx, wr.mr, wr.offset, wr.length, abi::kAccessRead, &e->mr))
        return r;
      if (int r = check_range(sq->ctx, wr.dst_mr, wr.dst_offset, wr.length, abi::kAccessWrite,
                              &e->remote_mr))
        return r;
      e->offset = wr.offset;
      e->remote_offset = wr.dst_offset;
      e->length = wr.length;
      return 0;
    case CL_OP_SEND:
      if (wr.target == nullptr || wr.target->ctx != sq->ctx) return CL_EINVAL;
      if (int r = check_range(sq->ctx, wr.mr, wr.offset, wr.length, abi::kAccessRead, &e->mr))
        return r;
      e->offset = wr.offset;
      e->length = wr.length;
      e->target = wr.target->pipe;
      e->imm = wr.imm;
      return 0;
    case CL_OP_FLOW_SEND:
    case CL_OP_FLOW_RECV: {
      // Any length the entry carries, up to 4 GiB - 1: the library copies nothing, so only the
      // MR's bounds and rights limit it here (the daemon checks again).
      if (sq->ctx->version < lib::kFlowVersion) return CL_EOPNOTSUPP;
      uint32_t need = wr.opcode == CL_OP_FLOW_SEND ? abi::kAccessRead : abi::kAccessWrite;
      if (int r = check_range(sq->ctx, wr.mr, wr.offset, wr.length, need, &e->mr)) return r;
      e->offset = wr.offset;
      e->length = wr.length;
      e->target = wr.flow;
      return 0;
    }
    case CL_OP_FLOW_CLOSE:
    case CL_OP_FLOW_ABORT:
      if (sq->ctx->version < lib::kFlowVersion) return CL_EOPNOTSUPP;
      if (wr.length != 0) return CL_EINVAL;  // no data: a length is a mistake, not ignored
      e->target = wr.flow;
      return 0;
    default:
      return CL_EOPNOTSUPP;
  }
}

// A QP's work request as a SendEntry on the QP's own submit queue, `target` the QP's flow.
constexpr uint32_t kQpMaxLength = 1u << 30;

int qp_entry(const cl_qp* qp, const cl_qp_wr& wr, abi::SendEntry* e) {
  std::memset(e, 0, sizeof *e);
  e->wr_id = wr.wr_id;
  e->target = qp->id;
  uint32_t need = abi::kAccessRead;  // SEND and WRITE read the local memory
  switch (wr.opcode) {
    case CL_WR_SEND:
    case CL_WR_SEND_WITH_IMM:
      e->opcode = abi::kOpFlowSend;
      break;
    case CL_WR_RDMA_WRITE:
    case CL_WR_RDMA_WRITE_WITH_IMM:
      e->opcode = abi::kOpRdmaWrite;
      break;
    case CL_WR_RDMA_READ:
      e->opcode = abi::kOpRdmaRead;
      need = abi::kAccessWrite;  // a READ lands in the local memory
      break;
    default:
      return CL_EOPNOTSUPP;
  }
  if (wr.length > kQpMaxLength) return CL_EINVAL;
  if (int r = check_range(qp->ctx, wr.mr, wr.offset, wr.length, need, &e->mr)) return r;
  if (e->opcode != abi::kOpFlowSend) {
    if (wr.remote_addr > UINT64_MAX - wr.length) return CL_EFAULT;
    e->remote_offset = wr.remote_addr;
    e->remote_mr = wr.rkey;
  }
  if (wr.opcode == CL_WR_SEND_WITH_IMM || wr.opcode == CL_WR_RDMA_WRITE_WITH_IMM) {
    e->flags = abi::kSendImm;
    e->imm = wr.imm;
  }
  e->offset = wr.offset;
  e->length = wr.length;
  return 0;
}

// A QP's receive: a flow receive on the QP.
int qp_recv_entry(const cl_qp* qp, const cl_recv_wr& wr, abi::SendEntry* e) {
  std::memset(e, 0, sizeof *e);
  e->wr_id = wr.wr_id;
  e->opcode = abi::kOpFlowRecv;
  e->target = qp->id;
  if (int r = check_range(qp->ctx, wr.mr, wr.offset, wr.length, abi::kAccessWrite, &e->mr))
    return r;
  e->offset = wr.offset;
  e->length = wr.length;
  return 0;
}

// Posts n requests on sq, each made into a SendEntry by to(w, &entry) (0, or the request's
// error). All or nothing: a bad request anywhere rejects the call before anything is posted, so
// the caller never has to work out which prefix went out.
template <class W, class To>
int post_entries(cl_sq* sq, const W* wr, unsigned n, To to) {
  abi::SendEntry staged[kBurst];
  for (unsigned i = 0; i < n; i++)
    if (int e = to(wr[i], &staged[0])) return e;
  unsigned done = 0;
  while (done < n) {
    unsigned want = std::min(n - done, kBurst);
    for (unsigned i = 0; i < want; i++)
      to(wr[done + i], &staged[i]);
    unsigned put = sq->prod.produce(staged, want);
    done += put;
    if (put < want) break;
  }
  // Entries first, then the mark (shm_abi.h, SubmitSummary): the daemon that takes the bit sees
  // them. Without it they would still be served, at the daemon's next sweep.
  if (done != 0 && sq->ctx->submit_ready != nullptr) {
    std::atomic_ref<uint64_t>(*sq->ctx->submit_ready)
        .fetch_or(sq->ready_bit, std::memory_order_release);
  }
  return static_cast<int>(done);
}

// A completion of a receive-queue entry names the entry by its index (kCompRecv), mapped back to
// the app's wr_id here. Flow and QP requests (a CL_OP_FLOW_RECV included) carry the app's own
// wr_id and events the listener id (accepted) or nothing: those pass through untouched.
bool rq_completion(const abi::Completion& c) {
  return (c.flags & abi::kCompRecv) != 0 && (c.flags & abi::kCompEvent) == 0 &&
         (c.opcode < abi::kOpFlowSend || c.opcode > abi::kOpRdmaRead);
}

// Called when a poll found nothing: at most every kLivenessCheckNs, looks for EOF or a notice.
int idle_check(cl_cq* cq) {
  int64_t now = coarse_now_ns();
  if (now < cq->next_check_ns) return 0;
  cq->next_check_ns = now + kLivenessCheckNs;
  return cq->ctx->poll_daemon(false);
}

}  // namespace

// The cl_* functions keep the C linkage cleave.h declared them with.

int cl_post_send(cl_sq* sq, const cl_send_wr* wr, unsigned n) {
  if (sq == nullptr || (wr == nullptr && n != 0)) return CL_EINVAL;
  if (int e = sq->ctx->check()) return e;
  return post_entries(sq, wr, n,
                      [sq](const cl_send_wr& w, abi::SendEntry* e) { return to_entry(sq, w, e); });
}

int cl_qp_post_send(cl_qp* qp, const cl_qp_wr* wr, unsigned n) {
  if (qp == nullptr || (wr == nullptr && n != 0)) return CL_EINVAL;
  if (int e = qp->ctx->check()) return e;
  return post_entries(qp->sq, wr, n,
                      [qp](const cl_qp_wr& w, abi::SendEntry* e) { return qp_entry(qp, w, e); });
}

int cl_qp_post_recv(cl_qp* qp, const cl_recv_wr* wr, unsigned n) {
  if (qp == nullptr || (wr == nullptr && n != 0)) return CL_EINVAL;
  if (int e = qp->ctx->check()) return e;
  return post_entries(qp->sq, wr, n, [qp](const cl_recv_wr& w, abi::SendEntry* e) {
    return qp_recv_entry(qp, w, e);
  });
}

int cl_post_recv(cl_rq* rq, const cl_recv_wr* wr, unsigned n) {
  if (rq == nullptr || (wr == nullptr && n != 0)) return CL_EINVAL;
  if (int e = rq->ctx->check()) return e;
  for (unsigned i = 0; i < n; i++) {
    uint32_t id;
    if (int e = check_range(rq->ctx, wr[i].mr, wr[i].offset, wr[i].length, abi::kAccessWrite, &id))
      return e;
    if (id > UINT16_MAX) return CL_EINVAL;  // RecvEntry::mr is 16 bits
  }
  abi::RecvEntry staged[kBurst];
  unsigned done = 0;
  while (done < n) {
    // The wr_id slots are written before the entries are published, and only for entries that
    // fit: a slot beyond the credits still belongs to an outstanding entry.
    unsigned want = std::min({n - done, kBurst, rq->prod.credits(std::min(n - done, kBurst))});
    if (want == 0) break;
    uint64_t base = rq->prod.produced();
    for (unsigned i = 0; i < want; i++) {
      const cl_recv_wr& w = wr[done + i];
      std::memset(&staged[i], 0, sizeof staged[i]);
      staged[i].offset = w.offset;
      staged[i].length = w.length;
      staged[i].mr = static_cast<uint16_t>(w.mr != nullptr ? w.mr->id : abi::kHeapMr);
      rq->ring->wr_ids[(base + i) & rq->ring->mask] = w.wr_id;
    }
    unsigned put = rq->prod.produce(staged, want);
    done += put;
    if (put < want) break;
  }
  return static_cast<int>(done);
}

int cl_poll_cq(cl_cq* cq, cl_wc* wc, unsigned n) {
  if (cq == nullptr || (wc == nullptr && n != 0)) return CL_EINVAL;
  if (int e = cq->ctx->check()) return e;
  abi::Completion staged[kBurst];
  const lib::RqTable* rqs = nullptr;
  unsigned done = 0;
  while (done < n) {
    unsigned got = cq->cons.consume(staged, std::min(n - done, kBurst));
    for (unsigned i = 0; i < got; i++) {
      const abi::Completion& c = staged[i];
      cl_wc& w = wc[done + i];
      w.wr_id = c.wr_id;
      w.status = c.status;
      w.length = c.length;
      w.opcode = c.opcode;
      w.imm = c.imm;
      w.flow = c.flow;
      w.flags = ((c.flags & abi::kCompRecv) ? uint32_t{CL_WC_RECV} : 0u) |
                ((c.flags & abi::kCompImm) ? uint32_t{CL_WC_IMM} : 0u) |
                ((c.flags & abi::kCompEvent) ? uint32_t{CL_WC_EVENT} : 0u) |
                ((c.flags & abi::kCompRdmaWrite) ? uint32_t{CL_WC_RDMA_WRITE} : 0u);
      if (rq_completion(c)) {
        if (rqs == nullptr) rqs = cq->rq_table.load(std::memory_order_acquire);
        const lib::RqRing* r = rqs != nullptr ? rqs->find(c.pipe) : nullptr;
        if (r != nullptr) {
          w.wr_id = r->wr_ids[c.wr_id & r->mask];
        } else if (w.status == 0) {
          w.status = CL_ENOENT;  // a receive queue this CQ does not (or no longer) serve
        }
      }
    }
    done += got;
    if (got == 0) break;
  }
  if (done == 0) {
    if (int e = idle_check(cq)) return e;
  }
  return static_cast<int>(done);
}

int cl_cq_wait(cl_cq* cq, int timeout_ms) {
  if (cq == nullptr) return CL_EINVAL;
  cl_ctx* ctx = cq->ctx;
  timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  auto elapsed_ns = [&] {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t{t.tv_sec} - t0.tv_sec) * 1'000'000'000 + (t.tv_nsec - t0.tv_nsec);
  };
  const int64_t timeout_ns = timeout_ms < 0 ? INT64_MAX : int64_t{timeout_ms} * 1'000'000;
  const int64_t spin_ns = std::min<int64_t>(int64_t{cq->spin_us} * 1000, timeout_ns);

  // Spin first: a completion that is microseconds away is not worth two syscalls.
  for (;;) {
    if (int e = ctx->check()) return e;
    if (cq->cons.ready()) return 0;
    if (int e = idle_check(cq)) return e;
    if (elapsed_ns() >= spin_ns) break;
    cpu_relax();
  }

  for (;;) {
    if (int e = ctx->check()) return e;
    if (cq->cons.ready()) return 0;
    int64_t left = timeout_ns == INT64_MAX ? INT64_MAX : timeout_ns - elapsed_ns();
    if (left <= 0) return CL_ETIMEDOUT;
    if (cq->efd < 0) {
      // No doorbell: nap briefly, looking at the daemon now and then.
      if (int e = idle_check(cq)) return e;
      timespec nap{0, static_cast<long>(std::min<int64_t>(left, 50'000))};
      nanosleep(&nap, nullptr);
      continue;
    }
    if (!cq->cons.arm()) return 0;  // a completion slipped in while arming
    // POLLRDHUP, not POLLIN, on the socket: replies to other threads' control calls must not
    // wake us, but the daemon closing (after a notice, or dying) must.
    pollfd fds[2] = {{cq->efd, POLLIN, 0}, {ctx->sock, POLLRDHUP, 0}};
    int ms = left == INT64_MAX
                 ? -1
                 : static_cast<int>(std::min<int64_t>((left + 999'999) / 1'000'000, INT32_MAX));
    int r = poll(fds, 2, ms);
    cq->cons.disarm();
    if (r < 0 && errno != EINTR) return CL_ENOMEM;  // poll's only other failure here
    if (r > 0 && (fds[0].revents & POLLIN)) {
      uint64_t v;
      ssize_t ignored = read(cq->efd, &v, sizeof v);  // reset the counter; nonblocking
      (void)ignored;
    }
    if (r > 0 && (fds[1].revents & (POLLRDHUP | POLLHUP | POLLERR))) {
      // Read the notice, if any, that came before the close; wait for a thread that holds the
      // control lock, whose own receive returns at once on a closed socket.
      if (int e = ctx->poll_daemon(true)) return e;
      return ctx->fail(CL_EDAEMON);
    }
  }
}
