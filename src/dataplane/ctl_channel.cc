// ctl_channel.cc - the management → dataplane request ring.
#include "ctl_channel.h"

#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_pause.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

namespace cleave::dp {

namespace {
std::atomic<unsigned> g_ring_seq{0};
}

CtlChannel::CtlChannel(unsigned capacity) {
  std::string name = "cleave_ctl" + std::to_string(g_ring_seq.fetch_add(1));
  ring_ = rte_ring_create(name.c_str(), rte_align32pow2(capacity), SOCKET_ID_ANY, RING_F_SC_DEQ);
  if (ring_ == nullptr) {
    throw std::runtime_error("cannot create control ring: " + std::string(rte_strerror(rte_errno)));
  }
}

CtlChannel::~CtlChannel() {
  rte_ring_free(ring_);
}

void CtlChannel::reap_orphans() {
  std::lock_guard lock(orphans_mu_);
  std::erase_if(orphans_, [](const std::shared_ptr<CtlRequest>& r) {
    return r->done.load(std::memory_order_acquire);
  });
}

void CtlChannel::orphan(std::shared_ptr<CtlRequest> r) {
  std::lock_guard lock(orphans_mu_);
  orphans_.push_back(std::move(r));
}

bool CtlChannel::wait_done(const CtlRequest& r, std::chrono::steady_clock::time_point deadline) {
  // The dataplane answers between bursts, normally within microseconds: spin briefly, then
  // back off to short sleeps so a stuck dataplane does not cost a second core.
  for (unsigned spins = 0; !r.done.load(std::memory_order_acquire); spins++) {
    if (spins < 1000) {
      rte_pause();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}

std::unique_ptr<CtlRequest> CtlChannel::call(std::unique_ptr<CtlRequest> req,
                                             std::chrono::milliseconds timeout, CtlMiss* miss,
                                             std::shared_ptr<CtlRequest>* late) {
  reap_orphans();
  if (miss != nullptr) *miss = CtlMiss::kWithdrawn;
  if (late != nullptr) late->reset();
  req->done.store(false, std::memory_order_relaxed);
  req->claim.store(kQueued, std::memory_order_relaxed);
  if (rte_ring_mp_enqueue(ring_, req.get()) != 0) return nullptr;
  if (!wait_done(*req, std::chrono::steady_clock::now() + timeout)) {
    uint8_t queued = kQueued;
    if (req->claim.compare_exchange_strong(queued, kWithdrawn, std::memory_order_acq_rel)) {
      // Still in the ring: the dataplane will drop it unapplied, then it can be freed.
      orphan(std::move(req));
      return nullptr;
    }
    // Taken: the dataplane is applying it right now. Finishing takes microseconds unless its
    // lcore was descheduled or stalled in the middle; then the outcome comes later.
    if (!wait_done(*req, std::chrono::steady_clock::now() + timeout)) {
      std::shared_ptr<CtlRequest> shared(std::move(req));
      if (late != nullptr) *late = shared;
      if (miss != nullptr) *miss = CtlMiss::kLate;
      orphan(std::move(shared));
      return nullptr;
    }
  }
  if (miss != nullptr) *miss = CtlMiss::kNone;
  return req;
}

std::shared_ptr<CtlRequest> CtlChannel::post(std::unique_ptr<CtlRequest> req) {
  reap_orphans();
  req->done.store(false, std::memory_order_relaxed);
  req->claim.store(kQueued, std::memory_order_relaxed);
  std::shared_ptr<CtlRequest> shared(std::move(req));
  if (rte_ring_mp_enqueue(ring_, shared.get()) != 0) return nullptr;
  orphan(shared);  // alive until answered, whatever the caller does with its handle
  return shared;
}

unsigned CtlChannel::take(CtlRequest** out, unsigned n) {
  CtlStall stall = stall_.load(std::memory_order_acquire);
  if (stall == CtlStall::kQueued) return 0;
  unsigned kept = 0;
  while (kept < n) {
    void* p = nullptr;
    if (rte_ring_sc_dequeue(ring_, &p) != 0) break;
    auto* r = static_cast<CtlRequest*>(p);
    uint8_t queued = kQueued;
    if (!r->claim.compare_exchange_strong(queued, kTaken, std::memory_order_acq_rel)) {
      answer(r);  // withdrawn by its requester: not applied, only freed
      continue;
    }
    out[kept++] = r;
    if (stall == CtlStall::kAttach && r->op == CtlOp::kApp && r->app_op == AppOp::kAttach) {
      while (stall_.load(std::memory_order_acquire) == CtlStall::kAttach)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      break;
    }
  }
  return kept;
}

}  // namespace cleave::dp
