// fault.h - a seeded fault stage for one direction of a wire: loss, reordering, duplication.
//
// It sits where frames meet the wire (both NIC backends: after the wire's RX burst, before the
// NIC model sees a frame; and where frames leave for the wire), so a transport above sees what a
// lossy network would give it. Decisions come from a xorshift64* generator seeded from the
// configuration: the same seed and the same frames give the same faults, so a failure replays.
//
// Per frame, in order: lost with probability `loss` (freed); else held back with probability
// `reorder` (at most kMaxHeld at once) and sent after kFaultReorderGap later frames, or once
// kIdlePolls polls in a row found nothing passed (the line went idle), so no frame is held
// forever; else passed on, and then copied once more with probability `duplicate`
// (rte_pktmbuf_copy from the frame's own pool; no copy when the pool is empty or the output has
// no room). No corruption: the NIC computes and checks checksums behind this stage.
//
// Threads: one stage belongs to one direction of one port and is used by the thread that owns
// that path (the dataplane lcore for the generic backend; whoever holds net_cleave's lock).
// Nothing here allocates memory of its own, locks or logs; when off, owners test active() once
// per burst.
#pragma once

#include <rte_mbuf.h>

#include <array>
#include <cstdint>

#include "fault_params.h"

namespace cleave::dp {

class FaultStage {
 public:
  static constexpr uint16_t kMaxHeld = 16;
  // Polls in a row with no frame passing that make the line idle. More than one: net_cleave
  // runs its service (and so the poll) from both rx_burst and tx_burst of one loop.
  static constexpr uint16_t kIdlePolls = 4;

  // New settings and a new generator (seeded from p.seed and dir). Frames held keep their place
  // and leave by the usual rules, also when the new settings turn faults off.
  void configure(const FaultParams& p, FaultDir dir);
  const FaultParams& params() const { return params_; }
  const FaultCounters& counters() const { return ctr_; }
  uint16_t held() const { return nheld_; }

  // Faults on, or frames still held: the one test on the path.
  bool active() const { return active_; }

  // Applies faults to in[0..n) in order and writes what goes on to the wire (or the NIC) to out,
  // which has room for cap >= n frames: every frame passed on always fits; duplicates and
  // released frames take the room left beyond the frames still to come. Returns the count.
  uint16_t apply(rte_mbuf* const* in, uint16_t n, rte_mbuf** out, uint16_t cap);

  // Once per poll of the line: frames due are released into out (up to cap; the rest at the next
  // call), and every held frame once kIdlePolls calls in a row found no frame passed since the
  // call before. Returns the count.
  uint16_t poll(rte_mbuf** out, uint16_t cap);

  // Frees every held frame (the port stops or goes away).
  void clear();

 private:
  struct Held {
    rte_mbuf* m;
    uint32_t left;  // later frames still to pass before it goes
  };

  uint64_t next();
  // UINT64_MAX is probability 1 (a cut wire): every frame, whatever the draw.
  bool roll(uint64_t threshold) {
    return threshold != 0 && (next() < threshold || threshold == UINT64_MAX);
  }
  uint16_t release(rte_mbuf** out, uint16_t o, uint16_t limit, bool all);
  void update_active() { active_ = params_.enabled() || nheld_ != 0; }

  FaultParams params_;
  uint64_t state_ = 1;
  uint64_t loss_t_ = 0;  // thresholds: a draw below one fires
  uint64_t reorder_t_ = 0;
  uint64_t dup_t_ = 0;
  bool active_ = false;
  bool passed_ = false;      // a frame passed since the last poll()
  uint16_t idle_polls_ = 0;  // polls in a row that found none passed
  uint16_t nheld_ = 0;
  std::array<Held, kMaxHeld> held_{};
  FaultCounters ctr_;
};

}  // namespace cleave::dp
