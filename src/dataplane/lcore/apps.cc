// apps.cc - the app path on the dataplane lcore: submit pipes served round-robin with a budget,
// every descriptor copied out of shared memory and checked before use, completions posted.
//
// Nothing here allocates, locks or logs. The only syscall is the doorbell when an app's
// completion consumer has said it sleeps: an eventfd write, unless a NIC with interrupts
// raises the pipe's vector (a posted command) and writes it instead (control path aside).
#include "lcore/apps.h"

#include <cleave/cleave.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "nic.h"

namespace cleave::dp {

namespace {
constexpr unsigned kSqBurst = 32;

bool reserved_clear(const abi::SendEntry& e) {
  return std::all_of(std::begin(e.reserved), std::end(e.reserved),
                     [](uint8_t b) { return b == 0; });
}
}  // namespace

const char* app_error_name(AppError e) {
  static constexpr const char* kNames[] = {
#define CLEAVE_X(name, help) #name,
      CLEAVE_APP_ERRORS(CLEAVE_X)
#undef CLEAVE_X
  };
  return kNames[static_cast<size_t>(e)];
}

AppPath::AppPath(uint32_t max_apps, uint32_t budget, uint64_t tsc_hz)
    : max_apps_(max_apps),
      budget_(budget),
      tsc_hz_(tsc_hz),
      sweep_cycles_(tsc_hz * abi::kSubmitSweepUs / 1000000) {
  apps_.reserve(max_apps);
}

bool AppPath::attach(DpApp* app, uint64_t now) {
  lcore_.check("AppPath::attach");
  if (apps_.size() >= max_apps_ || find(app->id) != nullptr) return false;
  app->error_tokens = uint64_t{app->error_budget} * tsc_hz_;
  app->error_refill_at = now;
  // Control path: the one allocation of the app's submit list, sized for every pipe slot.
  app->sqs.clear();
  app->sqs.reserve(app->pipes.size());
  for (size_t i = 0; i < app->pipes.size(); i++) {
    if (app->pipes[i].kind == abi::PipeKind::kSubmit) app->sqs.push_back(uint16_t(i));
  }
  app->next_sq = 0;
  app->submit_pending = 0;
  for (DpPipe& p : app->pipes)
    bind_irq(p);
  apps_.push_back(app);
  return true;
}

DpApp* AppPath::detach(uint32_t app_id) {
  lcore_.check("AppPath::detach");
  auto it = std::find_if(apps_.begin(), apps_.end(), [&](DpApp* a) { return a->id == app_id; });
  if (it == apps_.end()) return nullptr;
  DpApp* a = *it;
  apps_.erase(it);
  for (DpPipe& p : a->pipes)
    unbind_irq(p);
  return a;
}

DpApp* AppPath::find(uint32_t app_id) {
  lcore_.check("AppPath::find");
  for (DpApp* a : apps_) {
    if (a->id == app_id) return a;
  }
  return nullptr;
}

const DpApp* AppPath::find(uint32_t app_id) const {
  return const_cast<AppPath*>(this)->find(app_id);
}

bool AppPath::set_mr(uint32_t app_id, uint32_t mr, const DpMr& v) {
  lcore_.check("AppPath::set_mr");
  DpApp* a = find(app_id);
  if (a == nullptr || mr >= a->mrs.size()) return false;
  a->mrs[mr] = v;
  return true;
}

bool AppPath::set_pipe(uint32_t app_id, uint32_t pipe, const DpPipe& v) {
  lcore_.check("AppPath::set_pipe");
  DpApp* a = find(app_id);
  if (a == nullptr || pipe >= a->pipes.size()) return false;
  const bool was = a->pipes[pipe].kind == abi::PipeKind::kSubmit;
  const bool is = v.kind == abi::PipeKind::kSubmit;
  unbind_irq(a->pipes[pipe]);
  a->pipes[pipe] = v;
  bind_irq(a->pipes[pipe]);
  if (was && !is) {
    std::erase(a->sqs, uint16_t(pipe));
  } else if (is && !was) {
    a->sqs.push_back(uint16_t(pipe));  // within the capacity attach reserved
    a->submit_pending |= abi::submit_bit(pipe);
  }
  return true;
}

unsigned AppPath::poll(uint64_t now) {
  lcore_.bind();
  size_t n = apps_.size();
  if (n == 0) return 0;
  uint32_t start = rr_ < n ? rr_ : 0;
  const bool sweep = now >= next_sweep_;
  if (sweep) next_sweep_ = now + sweep_cycles_;
  unsigned work = 0;
  for (size_t k = 0; k < n; k++) {
    DpApp& a = *apps_[(start + k) % n];
    if (a.evicted) continue;
    // The app's word is read (a shared line it alone writes) and only then taken: a pass over
    // idle apps writes nothing to their memory.
    uint64_t ready = a.submit_pending;
    if (a.submit_ready == nullptr) {
      ready = ~uint64_t{0};
    } else if (std::atomic_ref<uint64_t> word(*a.submit_ready);
               word.load(std::memory_order_relaxed) != 0) {
      ready |= word.exchange(0, std::memory_order_acquire);
    }
    if (sweep) ready = ~uint64_t{0};
    if (ready != 0) work += serve(a, ready, now);
  }
  rr_ = static_cast<uint32_t>((start + 1) % n);
  batch_.flush();
  return work;
}

// The submit pipes `ready` names, round-robin from where the app's last pass started, within
// one budget. What it could not drain (budget spent, completion pipe full) stays marked.
unsigned AppPath::serve(DpApp& a, uint64_t ready, uint64_t now) {
  const size_t n = a.sqs.size();
  const size_t start = a.next_sq < n ? a.next_sq : 0;
  unsigned done = 0;
  uint64_t owed = 0;
  for (size_t k = 0; k < n; k++) {
    const uint16_t id = a.sqs[(start + k) % n];
    const uint64_t bit = abi::submit_bit(id);
    if ((ready & bit) == 0) continue;
    if (done >= budget_ || a.evicted) {
      owed |= bit;
      continue;
    }
    done += serve_sq(a, id, budget_ - done, now);
    if (a.pipes[id].sq.ready()) owed |= bit;
  }
  if (n != 0) a.next_sq = static_cast<uint16_t>((start + 1) % n);
  a.submit_pending = owed;
  return done;
}

unsigned AppPath::serve_sq(DpApp& a, uint16_t sq_id, unsigned budget, uint64_t now) {
  DpPipe& sq = a.pipes[sq_id];
  DpPipe* cq = pipe(a, sq.cq, abi::PipeKind::kCompletion);
  if (cq == nullptr || !sq.sq.ready()) return 0;
  unsigned done = 0;
  abi::SendEntry e[kSqBurst];
  while (done < budget && !a.evicted) {
    // Room for this request's completion and, for a send, the receive completion that may go
    // to the same pipe, beyond what the pipe owes flows. No room: the app is not reading its
    // completions; its requests wait.
    const unsigned room = CompletionRoom(*cq).free(2);
    if (cq->cq_out.corrupt()) {
      fail(a, AppError::corrupt_pipe, CL_EPROTO, now);
      break;
    }
    if (room < 2) break;
    unsigned want = std::min({budget - done, room / 2, kSqBurst});
    unsigned got = sq.sq.peek(e, want);
    if (got == 0) break;
    unsigned taken = 0;
    for (; taken < got && !a.evicted; taken++) {
      abi::Completion c{};
      bool post_now = true;
      if (!execute(a, e[taken], c, post_now, now)) break;  // a flow's CQ is full: wait
      if (post_now) {
        c.pipe = sq_id;
        batch_.post(a, sq.cq, &c, 1);
      }
    }
    sq.sq.take(taken);
    done += taken;
    if (taken < got) break;
  }
  return done;
}

bool AppPath::execute(DpApp& a, const abi::SendEntry& e, abi::Completion& c, bool& post_now,
                      uint64_t now) {
  c.wr_id = e.wr_id;
  c.opcode = e.opcode;
  if (e.opcode >= abi::kOpCount) {
    c.status = fail(a, AppError::bad_opcode, CL_EOPNOTSUPP, now);
    return true;
  }
  // kSendImm: flow opcodes only, and the flow path takes it only where it means something.
  const uint8_t flags_ok = e.opcode >= abi::kOpFlowSend ? abi::kSendImm : 0;
  if ((e.flags & ~flags_ok) != 0 || !reserved_clear(e)) {
    c.status = fail(a, AppError::bad_flags, CL_EINVAL, now);
    return true;
  }
  if (e.opcode >= abi::kOpFlowSend) {
    switch (flow_request(a, e, c, now)) {
      case FlowAdmit::kWait:
        return false;
      case FlowAdmit::kTaken:
        post_now = false;
        a.counters.ops[e.opcode]++;
        return true;
      case FlowAdmit::kDone:
        if (c.status == 0) a.counters.ops[e.opcode]++;
        return true;
    }
  }
  if (e.length > kMaxRequestBytes) {
    c.status = fail(a, AppError::too_long, CL_EINVAL, now);
    return true;
  }
  switch (e.opcode) {
    case abi::kOpNop:
      break;
    case abi::kOpCopy: {
      int32_t st = 0;
      const uint8_t* src = window(a, e.mr, e.offset, e.length, abi::kAccessRead, st, now);
      uint8_t* dst =
          src ? window(a, e.remote_mr, e.remote_offset, e.length, abi::kAccessWrite, st, now)
              : nullptr;
      if (dst == nullptr) {
        c.status = st;
        return true;
      }
      std::memmove(dst, src, e.length);
      c.length = e.length;
      a.counters.bytes += e.length;
      break;
    }
    case abi::kOpSend:
      send(a, e, c, now);
      if (c.status != 0) return true;
      break;
    default:
      break;
  }
  a.counters.ops[e.opcode]++;
  return true;
}

// Flow requests: the MR window is checked here, the rest by the flow path.
FlowAdmit AppPath::flow_request(DpApp& a, const abi::SendEntry& e, abi::Completion& c,
                                uint64_t now) {
  c.flow = e.target;
  if (flows_ == nullptr) {
    c.status = CL_EOPNOTSUPP;
    return FlowAdmit::kDone;
  }
  uint16_t nic_mr = 0;
  if (e.opcode == abi::kOpFlowSend || e.opcode == abi::kOpFlowRecv ||
      e.opcode == abi::kOpRdmaWrite || e.opcode == abi::kOpRdmaRead) {
    // Sends and WRITEs read the app's memory; receives and READs write it.
    const uint32_t need = e.opcode == abi::kOpFlowSend || e.opcode == abi::kOpRdmaWrite
                              ? abi::kAccessRead
                              : abi::kAccessWrite;
    int32_t st = 0;
    if (window(a, e.mr, e.offset, e.length, need, st, now) == nullptr) {
      c.status = st;
      return FlowAdmit::kDone;
    }
    nic_mr = a.mrs[e.mr].nic_mr;
  } else if (e.length != 0) {
    c.status = fail(a, AppError::bad_flags, CL_EINVAL, now);
    return FlowAdmit::kDone;
  }
  FlowAdmit r = flows_->flow_request(a, e, nic_mr, c, now);
  if (r == FlowAdmit::kDone && c.status == CL_ENOENT) fail(a, AppError::bad_target, c.status, now);
  return r;
}

void AppPath::send(DpApp& a, const abi::SendEntry& e, abi::Completion& c, uint64_t now) {
  int32_t st = 0;
  const uint8_t* src = window(a, e.mr, e.offset, e.length, abi::kAccessRead, st, now);
  if (src == nullptr) {
    c.status = st;
    return;
  }
  DpPipe* rq = pipe(a, e.target, abi::PipeKind::kRecv);
  DpPipe* rcq = rq ? pipe(a, rq->cq, abi::PipeKind::kCompletion) : nullptr;
  if (rcq == nullptr) {
    c.status = fail(a, AppError::bad_target, CL_EINVAL, now);
    return;
  }
  if (CompletionRoom(*rcq).free() == 0) {
    a.counters.cq_full++;
    c.status = CL_EAGAIN;
    return;
  }
  uint64_t index = rq->rq.consumed();
  abi::RecvEntry r;
  if (rq->rq.consume(&r, 1) == 0) {
    a.counters.no_recv++;
    c.status = CL_ENORECV;
    return;
  }
  a.counters.recv_taken++;
  abi::Completion rc{};
  rc.wr_id = index;
  rc.imm = e.imm;
  rc.pipe = static_cast<uint16_t>(e.target);
  rc.opcode = abi::kOpSend;
  rc.flags = abi::kCompRecv | abi::kCompImm;
  uint8_t* dst = r.reserved == 0 ? window(a, r.mr, r.offset, r.length, abi::kAccessWrite, st, now)
                                 : (st = fail(a, AppError::bad_flags, CL_EINVAL, now), nullptr);
  if (dst == nullptr) {
    rc.status = c.status = st;
  } else {
    uint32_t n = std::min(e.length, r.length);
    std::memmove(dst, src, n);
    rc.length = c.length = n;
    if (n < e.length) rc.status = c.status = CL_ETRUNC;
    a.counters.bytes += n;
  }
  batch_.post(a, rq->cq, &rc, 1);
}

uint8_t* AppPath::window(DpApp& a, uint32_t mr, uint64_t offset, uint32_t length, uint32_t need,
                         int32_t& status, uint64_t now) {
  if (mr >= a.mrs.size() || a.mrs[mr].length == 0) {
    status = fail(a, AppError::bad_mr, CL_ENOENT, now);
    return nullptr;
  }
  const DpMr& m = a.mrs[mr];
  // Overflow-safe: neither offset + length nor anything else is computed before the checks.
  if (offset > m.length || length > m.length - offset) {
    status = fail(a, AppError::out_of_bounds, CL_EFAULT, now);
    return nullptr;
  }
  if ((m.access & need) != need) {
    status = fail(a, AppError::access, CL_EACCES, now);
    return nullptr;
  }
  return m.base + offset;
}

// Counts the error and charges the app's token bucket: error_budget tokens, refilled at
// error_budget per second. An empty bucket evicts the app.
int32_t AppPath::fail(DpApp& a, AppError e, int32_t status, uint64_t now) {
  a.counters.errors[static_cast<size_t>(e)]++;
  a.counters.errors_total++;
  uint64_t cap = uint64_t{a.error_budget} * tsc_hz_;
  uint64_t elapsed = std::min(now - a.error_refill_at, tsc_hz_);
  a.error_tokens = std::min(cap, a.error_tokens + elapsed * a.error_budget);
  a.error_refill_at = now;
  if (a.error_tokens < tsc_hz_) {
    a.evicted = true;
    a.evict.store(true, std::memory_order_release);
  } else {
    a.error_tokens -= tsc_hz_;
  }
  return status;
}

void CompletionBatch::post(DpApp& a, uint16_t cq_id, const abi::Completion* c, unsigned n) {
  DpPipe& cq = a.pipes[cq_id];
  for (unsigned k = 0; k < n; k++) {
    if (cq.batch_slot < 0) {
      if (used_ == kPipes) flush();
      Slot& s = slots_[used_];
      s.app = &a;
      s.cq = cq_id;
      s.n = 0;
      cq.batch_slot = int16_t(used_++);
    }
    Slot& s = slots_[cq.batch_slot];
    if (s.n == kPerPipe) flush(s);
    s.c[s.n++] = c[k];
    cq.staged++;
  }
}

void CompletionBatch::flush(Slot& s) {
  DpApp& a = *s.app;
  DpPipe& cq = a.pipes[s.cq];
  const unsigned put = cq.cq_out.produce(s.c, s.n);
  a.counters.completions += put;
  a.counters.cq_full += s.n - put;  // not reached: posters reserve room first
  cq.staged = uint16_t(cq.staged - s.n);
  s.n = 0;
  if (cq.doorbell_fd >= 0 && put != 0 && cq.cq_out.take_wake()) {
    // Raised, the NIC writes the eventfd: a posted command, no system call here.
    uint64_t one = 1;
    if (cq.irq >= 0 ? irq_->irq_raise(uint32_t(cq.irq)) == 0
                    : write(cq.doorbell_fd, &one, sizeof one) == sizeof one) {
      a.counters.doorbells++;
    }
  }
}

void CompletionBatch::flush_all() {
  for (unsigned i = 0; i < used_; i++) {
    Slot& s = slots_[i];
    if (s.n != 0) flush(s);
    s.app->pipes[s.cq].batch_slot = -1;
  }
  used_ = 0;
}

// Control path. A vector the NIC cannot give (none left, or no interrupts) leaves the pipe
// woken by the lcore's own eventfd write, as before.
void AppPath::bind_irq(DpPipe& p) {
  Nic* nic = batch_.interrupts();
  p.irq = -1;
  if (nic == nullptr || p.kind != abi::PipeKind::kCompletion || p.doorbell_fd < 0) return;
  const int v = nic->irq_bind(p.doorbell_fd);
  if (v >= 0) p.irq = v;
}

void AppPath::unbind_irq(DpPipe& p) {
  if (p.irq >= 0) batch_.interrupts()->irq_unbind(uint32_t(p.irq));
  p.irq = -1;
}

DpPipe* AppPath::pipe(DpApp& a, uint32_t id, abi::PipeKind kind) {
  if (id >= a.pipes.size() || a.pipes[id].kind != kind) return nullptr;
  return &a.pipes[id];
}

}  // namespace cleave::dp
