// fault.cc - the seeded wire fault stage (see fault.h).
#include "fault.h"

#include <algorithm>

namespace cleave::dp {
namespace {

// A probability as a 64-bit threshold: a uniform draw below it fires with that probability.
uint64_t threshold(double p) {
  if (!(p > 0)) return 0;
  const double t = p * 18446744073709551616.0;  // 2^64
  return t >= 18446744073709551615.0 ? UINT64_MAX : uint64_t(t);
}

// splitmix64: spreads any seed, 0 included, over a state xorshift accepts (never 0).
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x != 0 ? x : 0x9E3779B97F4A7C15ULL;
}

}  // namespace

void FaultStage::configure(const FaultParams& p, FaultDir dir) {
  params_ = p;
  state_ = mix(fault_dir_seed(p.seed, dir));
  loss_t_ = threshold(p.loss);
  reorder_t_ = threshold(p.reorder);
  dup_t_ = threshold(p.duplicate);
  update_active();
}

uint64_t FaultStage::next() {  // xorshift64*
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return state_ * 0x2545F4914F6CDD1DULL;
}

// Moves held frames that are due (or all, when `all`) to out[o..limit), oldest first.
uint16_t FaultStage::release(rte_mbuf** out, uint16_t o, uint16_t limit, bool all) {
  uint16_t keep = 0;
  for (uint16_t i = 0; i < nheld_; i++) {
    if ((all || held_[i].left == 0) && o < limit) {
      out[o++] = held_[i].m;
    } else {
      held_[keep++] = held_[i];
    }
  }
  if (keep != nheld_) {
    nheld_ = keep;
    update_active();
  }
  return o;
}

uint16_t FaultStage::apply(rte_mbuf* const* in, uint16_t n, rte_mbuf** out, uint16_t cap) {
  // Frames due before this burst, in the room beyond the n frames that may pass.
  uint16_t o = nheld_ != 0 ? release(out, 0, uint16_t(cap - n), false) : 0;
  for (uint16_t i = 0; i < n; i++) {
    rte_mbuf* m = in[i];
    if (roll(loss_t_)) {
      rte_pktmbuf_free(m);
      ctr_.dropped++;
      continue;
    }
    if (roll(reorder_t_) && nheld_ < kMaxHeld) {
      held_[nheld_++] = Held{m, kFaultReorderGap};
      ctr_.reordered++;
      active_ = true;
      continue;
    }
    out[o++] = m;
    passed_ = true;
    for (uint16_t h = 0; h < nheld_; h++)
      held_[h].left -= held_[h].left != 0 ? 1 : 0;
    const auto limit = uint16_t(cap - (n - i - 1));  // room the frames still to come keep
    if (roll(dup_t_) && o < limit) {
      if (rte_mbuf* c = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX)) {
        out[o++] = c;
        ctr_.duplicated++;
      }
    }
    if (nheld_ != 0) o = release(out, o, limit, false);
  }
  return o;
}

uint16_t FaultStage::poll(rte_mbuf** out, uint16_t cap) {
  idle_polls_ = passed_ ? 0 : uint16_t(std::min<unsigned>(idle_polls_ + 1u, kIdlePolls));
  passed_ = false;
  if (nheld_ == 0) return 0;
  return release(out, 0, cap, idle_polls_ == kIdlePolls);
}

void FaultStage::clear() {
  for (uint16_t i = 0; i < nheld_; i++)
    rte_pktmbuf_free(held_[i].m);
  nheld_ = 0;
  update_active();
}

}  // namespace cleave::dp
