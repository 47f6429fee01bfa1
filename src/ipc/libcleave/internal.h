// internal.h - libcleave's private objects behind the opaque handles of cleave.h, shared by the
// control path (libcleave.cc) and the data path (datapath.cc).
//
// Ownership: the context owns every object created through it and frees what is left in
// cl_close. Queue handles are read by the data path without locks, so everything a post or a poll
// reads is fixed at creation, except the receive-queue table of a CQ, which is published by
// pointer swap (see RqTable).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "cleave/cleave.h"
#include "heap.h"
#include "pipe.h"
#include "shm_abi.h"

namespace cleave::lib {

// How long a control call waits for the daemon before declaring it gone: 30 s, or
// $CLEAVE_CTL_TIMEOUT_MS (100 to 600000). Longer than the systemd unit's watchdog (10 s), which
// restarts a daemon whose threads stall (the app then sees EOF at once), so a daemon that is
// slow rather than stuck (a 1 GiB registration on a loaded host takes seconds) is waited for.
inline constexpr int kCtlTimeoutMs = 30000;
int ctl_timeout_ms();
// How often an idle poller or waiter looks at the socket for a dead daemon or a notice.
inline constexpr int64_t kLivenessCheckNs = 50'000'000;
// The first ABI version with flows (listen, connect, CL_OP_FLOW_*, events): an older daemon gets
// none of them, and the calls fail with CL_EOPNOTSUPP before anything is sent.
inline constexpr uint16_t kFlowVersion = 2;
// The first ABI version with queue pairs (QpCreate..., kOpRdma*, MrReply::rkey): with an older
// daemon cl_pd_alloc and the cl_qp_* calls fail with CL_EOPNOTSUPP before anything is sent.
inline constexpr uint16_t kQpVersion = 3;
// The first ABI version with the submit summary word (shm_abi.h): posts mark their submit pipe
// there so the daemon looks at it; with an older daemon there is no word to set.
inline constexpr uint16_t kSummaryVersion = 4;

// The receive side of an RQ that completions are mapped back through. Outlives its RQ while a
// poller might still hold it: retired into the CQ and freed with the CQ.
struct RqRing {
  uint32_t pipe;
  uint32_t mask;
  std::unique_ptr<uint64_t[]> wr_ids;  // wr_id of the entry posted at index i, at [i & mask]
};

// The RQs attached to a CQ, immutable once published. A create or destroy builds a new table
// under the context lock and swaps it in; old tables are retired, not freed, so a concurrent
// poller never reads freed memory.
struct RqTable {
  std::vector<const RqRing*> rqs;
  const RqRing* find(uint32_t pipe) const {
    for (const RqRing* r : rqs)
      if (r->pipe == pipe) return r;
    return nullptr;
  }
};

int64_t coarse_now_ns();

}  // namespace cleave::lib

struct cl_ctx {
  // Control path: everything below is guarded by ctl_mu unless it says otherwise.
  std::mutex ctl_mu;
  int sock = -1;
  uint32_t seq = 0;
  uint16_t version = 0;  // negotiated; immutable once cl_open returned (the data path reads it)
  // Sticky failure (0 while healthy): set once, read by every call, lock-free.
  std::atomic<int> err{0};

  uint32_t app_id = 0;  // immutable after cl_open
  uint8_t* base = nullptr;
  uint64_t* submit_ready = nullptr;  // version 4: the submit summary word; immutable after cl_open
  uint64_t size = 0;
  uint64_t pipe_area_offset = 0, pipe_area_size = 0;
  uint64_t heap_offset = 0, heap_size = 0;
  cleave::abi::Quotas quotas{};

  std::mutex heap_mu;  // guards heap only: cl_alloc does not wait behind a control call
  cleave::ipc::Heap heap;

  std::vector<cl_mr*> mrs;
  std::vector<cl_cq*> cqs;
  std::vector<cl_sq*> sqs;
  std::vector<cl_rq*> rqs;
  std::vector<cl_ring*> rings;
  std::vector<cl_qp*> qps;
  cl_pd* pd = nullptr;        // the one protection domain, once allocated
  uint16_t next_ring_id = 0;  // tags the rings' wr_ids

  int fail(int code);  // makes `code` sticky (first one wins) and returns the sticky code
  int check() const { return err.load(std::memory_order_relaxed); }
  // Reads whatever the daemon sent unasked (a notice, or EOF) without waiting. `block` takes the
  // control lock even if another thread holds it; otherwise a busy lock means that thread will
  // see the same thing. Returns the sticky code.
  int poll_daemon(bool block);
};

struct cl_mr {
  cl_ctx* ctx;
  uint32_t id;
  uint32_t access;
  void* addr;
  uint64_t length;
  uint32_t rkey;  // MrReply::rkey (version 3), else 0
};

struct cl_cq {
  cl_ctx* ctx;
  uint32_t pipe;
  uint32_t entries;
  uint32_t spin_us;
  int efd = -1;  // doorbell, or -1
  cleave::ipc::PipeConsumer<cleave::abi::Completion> cons;
  std::atomic<const cleave::lib::RqTable*> rq_table{nullptr};
  int64_t next_check_ns = 0;  // poller's private clock for liveness checks

  // Guarded by ctx->ctl_mu.
  uint64_t attached_entries = 0;  // sum over attached queues, <= entries
  uint32_t attached = 0;
  std::vector<std::unique_ptr<const cleave::lib::RqTable>> tables;  // current one is last
  std::vector<std::unique_ptr<cleave::lib::RqRing>> rings;          // live and retired
};

struct cl_sq {
  cl_ctx* ctx;
  cl_cq* cq;
  uint32_t pipe;
  uint32_t entries;
  uint32_t room;       // of cq->attached_entries: `entries`, or a QP's max_send_wr + max_recv_wr
  uint64_t ready_bit;  // abi::submit_bit(pipe)
  cleave::ipc::PipeProducer<cleave::abi::SendEntry> prod;
};

struct cl_rq {
  cl_ctx* ctx;
  cl_cq* cq;
  uint32_t pipe;
  uint32_t entries;
  uint32_t room;  // of cq->attached_entries: `entries`
  cleave::ipc::PipeProducer<cleave::abi::RecvEntry> prod;
  cleave::lib::RqRing* ring;  // owned by cq->rings
};

// The context's protection domain: the daemon knows none (an app's MRs are its PD), so this only
// counts the QPs created on it. Guarded by ctx->ctl_mu.
struct cl_pd {
  cl_ctx* ctx;
  uint32_t qps = 0;
};

// A RoCEv2 RC queue pair: a flow of the daemon's rocev2 transport, and a submit queue of the
// library's own (`sq`, in ctx->sqs, bound to the QP's CQ) that carries its work requests and
// receives. Immutable after cl_qp_create; posting on it is one thread at a time.
struct cl_qp {
  cl_ctx* ctx;
  cl_pd* pd;
  cl_cq* cq;
  cl_sq* sq;
  uint32_t id;        // its flow id: SendEntry::target, Completion::flow
  uint32_t qpn;       // 24 bits
  uint32_t ip;        // the daemon's address, host order: the QP's GID
  uint32_t max_pmtu;  // the largest PMTU its port carries (QpReply), 0 if the daemon said none
};

// A receive ring (ring.cc): `size` bytes at (mr, offset) cut into `nchunks` consecutive chunks,
// posted to `flow` in ring order. Stream offsets count from the flow's first byte; the ring holds
// stream bytes [consumed, consumed + size) at ring offset (stream offset mod size). Owned by
// the context; used by one thread at a time, the one posting on `sq`.
struct cl_ring {
  struct Chunk {
    uint64_t start;  // stream offset of its current (or last) posting
    uint64_t off;    // ring offset
    uint32_t len;
    bool posted;  // the daemon holds it: posted and its completion not back yet
  };
  cl_ctx* ctx;
  cl_sq* sq;
  cl_flow flow;
  const cl_mr* mr;
  uint8_t* base;       // the ring's first byte
  uint64_t mr_offset;  // the ring's offset in mr (or the heap)
  uint64_t size;
  bool owns_memory;  // cl_alloc'd by cl_ring_create
  uint16_t id;
  uint32_t nchunks;
  std::unique_ptr<Chunk[]> chunks;

  // Receiving: bytes [consumed, known) are readable; known = max(data_sum, done_end).
  uint64_t consumed = 0;
  uint64_t consumed_off = 0;  // consumed mod size
  uint64_t data_sum = 0;      // CL_EV_DATA lengths, summed
  uint64_t done_end = 0;      // furthest stream offset a chunk completion reached
  // Posting: the next chunk in ring order, and the stream offset it would take.
  uint32_t next_chunk = 0;
  uint64_t next_start = 0;
  uint32_t posted = 0;       // chunks the daemon holds
  bool peer_closed = false;  // CL_EV_PEER_CLOSED
  bool short_done = false;   // a chunk came back short: nothing more arrives (FIN or reset)
  bool closed = false;       // CL_EV_CLOSED: no more events are the ring's
  int err = 0;               // sticky: the flow's failure or a posting's
};
