// apps.h - the dataplane's side of connected apps: their MR and pipe tables, and the app path
// that serves their pipes round-robin, checks every descriptor and posts completions.
//
// Ownership: the main thread (app_server.h) builds a DpApp with tables sized by the app's quota
// and hands it over with a ctl::AppAttach request (ctl_channel.h); from then until it is detached
// only the dataplane lcore touches it, except `evict`, the one field the main thread reads. Table
// updates (an MR or a pipe added or removed) travel the same way, so the main thread never writes
// state the dataplane reads. No DPDK here: the app path is plain C++ over mapped memory and is
// tested without EAL.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "pipe.h"
#include "shm_abi.h"
#include "thread_check.h"

namespace cleave::dp {

class Nic;  // nic.h

// Bad descriptors, by what was wrong. Each fails its request with an error completion.
#define CLEAVE_APP_ERRORS(X)                                     \
  X(bad_opcode, "unknown opcode")                                \
  X(bad_flags, "flags or reserved bits set")                     \
  X(bad_mr, "MR id not registered by this app")                  \
  X(out_of_bounds, "offset and length outside the MR")           \
  X(access, "MR access rights do not allow the operation")       \
  X(bad_target, "target is not one of this app's receive pipes") \
  X(too_long, "length over the per-request limit")               \
  X(corrupt_pipe, "the app published an impossible consumer index on a completion pipe")

enum class AppError : uint8_t {
#define CLEAVE_X(name, help) name,
  CLEAVE_APP_ERRORS(CLEAVE_X)
#undef CLEAVE_X
      kCount
};
inline constexpr size_t kAppErrorCount = static_cast<size_t>(AppError::kCount);
const char* app_error_name(AppError e);

struct AppCounters {
  uint64_t ops[abi::kOpCount] = {};  // requests completed successfully, by opcode
  uint64_t bytes = 0;                // payload bytes moved
  uint64_t completions = 0;          // entries written to completion pipes
  uint64_t recv_taken = 0;           // receive buffers consumed
  uint64_t no_recv = 0;              // sends that found no receive buffer posted
  uint64_t cq_full = 0;              // requests failed because a completion pipe was full
  uint64_t doorbells = 0;            // eventfd writes to wake a sleeping consumer
  uint64_t flows = 0;                // now: flows and QPs it holds (half-open accepted ones too)
  uint64_t flows_over_quota = 0;     // connects, accepts, QPs refused for quota.flows
  uint64_t errors[kAppErrorCount] = {};
  uint64_t errors_total = 0;
};

// The largest request the dataplane serves in one go: a copy this size takes tens of
// microseconds of the polling core.
inline constexpr uint32_t kMaxRequestBytes = 1u << 20;

struct DpMr {
  uint8_t* base = nullptr;  // the daemon's mapping
  uint64_t length = 0;      // registered bytes
  uint32_t access = 0;      // abi::kAccess*
  uint16_t nic_mr = 0;      // the NIC's MR id (flows.h), set by the dataplane; 0: none
  uint32_t rkey = 0;        // RoCE peers' key for it (remote access), set likewise; 0: none
};

struct DpPipe {
  abi::PipeKind kind{};  // 0: slot unused
  uint16_t cq = 0;       // kSubmit, kRecv: their completion pipe
  int doorbell_fd = -1;  // kCompletion: eventfd to write when the consumer sleeps; owned by main
  int32_t irq = -1;      // kCompletion: the interrupt vector bound to it (AppPath), -1: none
  ipc::PipeConsumer<abi::SendEntry> sq;
  ipc::PipeConsumer<abi::RecvEntry> rq;
  ipc::PipeProducer<abi::Completion> cq_out;
  uint32_t promised = 0;    // kCompletion: entries owed to flows (flows.h): see CompletionRoom
  uint16_t staged = 0;      // kCompletion: entries waiting in the CompletionBatch
  int16_t batch_slot = -1;  // kCompletion: its slot in the CompletionBatch, -1: none
};

// The room on a completion pipe beyond the entries it owes (DpPipe::promised) and those staged
// for it (DpPipe::staged, CompletionBatch): a flow reserves room for every completion it may
// owe (flows.h), and the app path writes only into what is left. The one place that counts
// it; a view over the pipe, held for one use.
class CompletionRoom {
 public:
  explicit CompletionRoom(DpPipe& cq) : cq_(cq) {}

  // Entries that may be written now besides those owed and staged; the consumer's index is
  // re-read only when fewer than `want` remain.
  unsigned free(unsigned want = 1) {
    const unsigned taken = cq_.promised + cq_.staged;
    const unsigned room = cq_.cq_out.credits(taken + want);
    return room > taken ? room - taken : 0;
  }
  // `n` more entries owed; false (nothing owed) when there is no room for them now.
  bool reserve(uint32_t n) {
    if (free(n) < n) return false;
    cq_.promised += n;
    return true;
  }
  // `n` owed entries were written, or never will be.
  void release(uint32_t n) { cq_.promised -= n < cq_.promised ? n : cq_.promised; }

 private:
  DpPipe& cq_;
};

struct DpApp {
  uint32_t id = 0;
  uint32_t uid = 0;                  // the app's SO_PEERCRED uid: what flow bindings restrict by
  uint32_t error_budget = 1;         // per second
  uint32_t max_flows = 0xFFFFFFFFu;  // quota.flows: counters.flows stays at or below it
  uint32_t half_open = 0;            // of those, accepted from a SYN and not yet established
  std::vector<DpMr> mrs;             // index: MR id (0: the heap); length 0 = unused
  std::vector<DpPipe> pipes;         // index: pipe id
  AppCounters counters;
  bool evicted = false;          // dataplane: no longer served
  uint64_t error_tokens = 0;     // token bucket, in errors x TSC Hz
  uint64_t error_refill_at = 0;  // TSC of the last refill
  uint16_t next_sq = 0;          // round-robin among the app's submit pipes (index into sqs)
  // Which submit pipes to look at (abi::SubmitSummary): the word in the app's region (null
  // before ABI version 4: every pass looks at all of them), and the bits the dataplane itself
  // still owes service (a pipe it could not drain), which no app can clear.
  uint64_t* submit_ready = nullptr;
  uint64_t submit_pending = 0;
  std::vector<uint16_t> sqs;       // the submit pipes' ids, kept by AppPath (attach, set_pipe)
  std::atomic<bool> evict{false};  // dataplane -> main: over the error budget, disconnect
};

// Where flow requests (abi::kOpFlow*) go: the dataplane's flow path (flows.h).
enum class FlowAdmit : uint8_t {
  kDone,   // finished now: the completion (status set) goes on the submit pipe's CQ
  kTaken,  // the flow's CQ gets the completion later
  kWait,   // the flow's CQ has no room: the request stays in its pipe for now
};
class FlowHandler {
 public:
  // `nic_mr` is the checked MR's NIC id (sends and receives). Fills c.status for kDone.
  virtual FlowAdmit flow_request(DpApp& a, const abi::SendEntry& e, uint16_t nic_mr,
                                 abi::Completion& c, uint64_t now) = 0;

 protected:
  ~FlowHandler() = default;
};

// Completions staged while a stage of the loop runs, and posted per completion pipe in one
// batch when it ends (flush): one write of consecutive entries and one doorbell check per pipe
// per burst, not one per completion (as TAS's fast path does). Each pipe's entries keep the
// order they were posted in. The caller made sure of the room first (CompletionRoom counts
// staged entries), so a flush never finds a pipe full. A pipe that fills its slot, or a new
// pipe when every slot is taken, is flushed early. The dataplane flushes at the end of every
// stage and after every control request, so nothing staged outlives a pipe or an app.
class CompletionBatch {
 public:
  // The NIC whose interrupts wake sleeping consumers (pipes with an irq); null: none.
  void set_interrupts(Nic* nic) { irq_ = nic; }
  Nic* interrupts() const { return irq_; }
  static constexpr unsigned kPipes = 16;    // pipes with entries staged at once
  static constexpr unsigned kPerPipe = 32;  // entries staged per pipe

  void post(DpApp& a, uint16_t cq_id, const abi::Completion* c, unsigned n);
  // Called after every stage: nothing staged costs one compare.
  void flush() {
    if (used_ != 0) flush_all();
  }
  bool empty() const { return used_ == 0; }

 private:
  struct Slot {
    DpApp* app;
    uint16_t cq;
    uint16_t n;
    abi::Completion c[kPerPipe];
  };
  void flush(Slot& s);
  void flush_all();

  Slot slots_[kPipes];
  unsigned used_ = 0;
  Nic* irq_ = nullptr;
};

class AppPath {
 public:
  // `tsc_hz`: the clock the error budget refills by.
  AppPath(uint32_t max_apps, uint32_t budget, uint64_t tsc_hz);
  void set_flow_handler(FlowHandler* h) { flows_ = h; }
  // Where the app path and the flow path stage completions; poll() flushes it before it returns.
  CompletionBatch& completions() { return batch_; }
  // Sleeping consumers are woken by this NIC's interrupts (null: by an eventfd write of the
  // lcore's own): attach and set_pipe bind a vector to each completion pipe's doorbell, detach
  // and set_pipe unbind it (the NIC delivers what was raised first). Set before any attach.
  void set_interrupts(Nic* nic) { batch_.set_interrupts(nic); }

  // One pass over every app, each from where it left off, at most `budget` requests each;
  // returns the requests served. Of an app's submit pipes it looks only at those its summary
  // word or the dataplane's own marks name, and at all of them every abi::kSubmitSweepUs. The
  // thread that polls owns the app path (thread_check.h): the calls below are its alone.
  unsigned poll(uint64_t now);

  // Control (dataplane lcore). attach: false when full or the id is taken. detach returns the
  // app (for the main thread to free) or null. set_mr / set_pipe replace one table slot.
  bool attach(DpApp* app, uint64_t now);
  DpApp* detach(uint32_t app_id);
  bool set_mr(uint32_t app_id, uint32_t mr, const DpMr& v);
  bool set_pipe(uint32_t app_id, uint32_t pipe, const DpPipe& v);
  const DpApp* find(uint32_t app_id) const;
  DpApp* find(uint32_t app_id);
  size_t size() const { return apps_.size(); }
  template <class F>
  void for_each(F&& f) const {
    for (const DpApp* a : apps_)
      f(*a);
  }

 private:
  unsigned serve(DpApp& a, uint64_t ready, uint64_t now);
  unsigned serve_sq(DpApp& a, uint16_t sq_id, unsigned budget, uint64_t now);
  // Runs one request from its private copy; fills the sender's completion. False: a flow
  // request that must wait (kWait), nothing done.
  bool execute(DpApp& a, const abi::SendEntry& e, abi::Completion& c, bool& post_now, uint64_t now);
  FlowAdmit flow_request(DpApp& a, const abi::SendEntry& e, abi::Completion& c, uint64_t now);
  void send(DpApp& a, const abi::SendEntry& e, abi::Completion& c, uint64_t now);
  // A checked window of an MR, or null (and the error counted) when the request may not touch it.
  uint8_t* window(DpApp& a, uint32_t mr, uint64_t offset, uint32_t length, uint32_t need,
                  int32_t& status, uint64_t now);
  int32_t fail(DpApp& a, AppError e, int32_t status, uint64_t now);
  DpPipe* pipe(DpApp& a, uint32_t id, abi::PipeKind kind);
  void bind_irq(DpPipe& p);
  void unbind_irq(DpPipe& p);

  ThreadOwner lcore_{"dataplane lcore"};  // bound by poll()
  std::vector<DpApp*> apps_;              // capacity reserved for max_apps: never reallocates
  uint32_t max_apps_;
  uint32_t budget_;
  uint64_t tsc_hz_;
  uint32_t rr_ = 0;  // which app goes first next pass
  uint64_t sweep_cycles_;
  uint64_t next_sweep_ = 0;  // TSC of the next pass that looks at every submit pipe
  FlowHandler* flows_ = nullptr;
  CompletionBatch batch_;
};

}  // namespace cleave::dp
