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
  std::erase_if(orphans_, [](const std::unique_ptr<CtlRequest>& r) {
    return r->done.load(std::memory_order_acquire);
  });
}

std::unique_ptr<CtlRequest> CtlChannel::call(std::unique_ptr<CtlRequest> req,
                                             std::chrono::milliseconds timeout) {
  reap_orphans();
  req->done.store(false, std::memory_order_relaxed);
  if (rte_ring_mp_enqueue(ring_, req.get()) != 0) return nullptr;
  // The dataplane answers between bursts, normally within microseconds: spin briefly, then
  // back off to short sleeps so a stuck dataplane does not cost a second core.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (unsigned spins = 0; !req->done.load(std::memory_order_acquire); spins++) {
    if (spins < 1000) {
      rte_pause();
      continue;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::lock_guard lock(orphans_mu_);
      orphans_.push_back(std::move(req));
      return nullptr;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return req;
}

unsigned CtlChannel::take(CtlRequest** out, unsigned n) {
  return rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(out), n, nullptr);
}

}  // namespace cleave::dp
