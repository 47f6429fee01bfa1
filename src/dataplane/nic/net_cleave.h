// net_cleave.h - the net_cleave PMD's private state, shared by its control and data path files.
//
// One Device per net_cleave port. The model (the NIC), the scratch buffers and every array the
// data path uses are allocated at probe or configure time; the burst functions and the service
// body only index them.
//
// Queues: up to kMaxQueues RX and TX queue pairs, one lcore per queue (DPDK's contract). Each
// has its own rings; the wire port has one queue pair, which only the service touches.
// Who touches what:
//   - the service body (service lcore, or inline from whichever queue's rx/tx burst wins the
//     trylock) holds `lock` and owns the model, the TX stage, the pending wire frames and the
//     counters; it steers each received frame to the ring of the queue the model chose;
//   - queue q's rx_burst is the only consumer of its `rx_ring` (the service the only producer);
//   - queue q's tx_burst is the only producer of its `tx_ring` (the service the only consumer);
//   - private API commands, stats and xstats take `lock` (spinning) on the control path.
#pragma once

#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "fault.h"
#include "model_mbuf.h"
#include "nic_model.h"
#include "rte_pmd_cleave.h"

namespace cleave::pmd {

inline constexpr uint16_t kBurst = 32;
inline constexpr uint32_t kRingSize = 1024;       // rx_ring and tx_ring entries
inline constexpr uint32_t kPendingFrames = 2048;  // wire frames waiting for room on the wire
inline constexpr uint32_t kPostedCmds = 1024;     // posted commands waiting, per queue
inline constexpr uint32_t kIrqVectors = 4096;     // interrupt vectors (eventfds) per port
inline constexpr uint32_t kMaxFrame = model_mbuf::kMaxFrame;
inline constexpr uint32_t kBounceBytes = model_mbuf::kBounceBytes;
inline constexpr uint16_t kMaxQueues = nic::kMaxRxQueues;  // RX and TX queue pairs

extern int g_logtype;
extern int g_placement_offset;
extern uint64_t g_icrc_mask;    // ol_flags bit of RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG
extern uint64_t g_crc32c_mask;  // ol_flags bit of RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG

// PMD counters beyond the model's: stats_get reads the first six, xstats all of them.
enum class PmdCtr : uint8_t {
  kRxPackets,  // header entries handed to rx_burst
  kRxBytes,    // frame bytes received from the wire
  kTxPackets,  // frames sent on the wire
  kTxBytes,
  kTxErrors,       // descriptors the model rejected or that could not be merged
  kRxLinearized,   // multi-segment wire frames copied flat for the model
  kTxPassThrough,  // plain frames sent as they are
  kTxZeroCopy,     // descriptors whose payload the model read from a registered MR
  kTxBounce,       // descriptors whose payload was copied to the bounce MR first
  kTxWireFull,     // service rounds that found the wire full
  kServiceRuns,    // service body runs (service lcore or inline)
  kServiceInline,  // of those, from rx/tx burst
  kServiceBusy,    // of the service lcore's, those that moved something
  kPosted,         // posted commands applied
  kIrqs,           // interrupts raised (eventfd writes)
  kIrqErrors,      // raises of a vector bound to nothing
  kCount
};

// A posted command (rte_pmd_cleave_post_*), applied by whoever next holds Device::lock.
struct PostedCmd {
  enum Op : uint32_t { kCursorUpdate, kMsRetire, kMsRetireMsg, kIrq };
  Op op;
  uint32_t flow;
  uint32_t arg;
  uint32_t pad;
};

struct Device;

// One queue's handle, what ethdev passes to the burst functions: the device and the queue's ring.
struct Queue {
  Device* dev = nullptr;
  uint16_t id = 0;
  rte_ring* ring = nullptr;  // RX: service -> rx_burst (headers with placement); TX: descriptors
};

struct Device {
  // ---- set at probe, read-only afterwards ----
  uint16_t port_id = 0;
  uint16_t wire_port = 0;
  bool own_wire = false;   // probed by this port (wire_args), closed with it
  uint16_t bounce_mr = 0;  // the MR id the PMD keeps for payloads outside registered MRs
  uint32_t service_id = 0;
  bool service_registered = false;
  nic::NicConfig cfg;
  std::unique_ptr<nic::NicModel> model;
  int socket = 0;
  uint32_t tx_mbufs = 0;           // devarg: frames in flight
  rte_mempool* tx_pool = nullptr;  // frames the model merges; made at configure for the MTU
  uint32_t tx_room = 0;            // data bytes in one tx_pool mbuf
  uint32_t max_frame = 0;          // the MTU plus Ethernet header, CRC and a VLAN tag
  // Made at probe, kMaxQueues of each; the first `nb_queues` (dev_configure) are in use.
  std::array<Queue, kMaxQueues> rxq{};
  std::array<Queue, kMaxQueues> txq{};
  rte_mempool* rx_mp = nullptr;  // queue 0's RX pool: the wire's RX queue uses it
  uint16_t nb_rx_desc = 0;
  uint16_t nb_tx_desc = 0;
  bool started = false;
  uint16_t nb_queues = 1;  // set at configure while stopped; the service reads it under `lock`
  // Decided at dev_start, read by every burst: no service lcore runs the NIC, so bursts do.
  bool inline_mode = true;
  // Posted commands (PostedCmd), a ring per queue: the queue's thread enqueues, the lock's
  // holder dequeues. Made at probe, kMaxQueues of them, like the queues' rings.
  std::array<rte_ring*, kMaxQueues> posted{};

  alignas(64) rte_spinlock_t lock = RTE_SPINLOCK_INITIALIZER;

  // ---- owned by whoever holds `lock` ----
  std::vector<uint8_t> bounce;     // payload staging for the bounce MR
  std::vector<uint8_t> rx_flat;    // a multi-segment wire frame made flat for the model
  model_mbuf::MrRanges mr_ranges;  // registered MRs by address, for the TX lookup
  std::vector<rte_mbuf*> pending;  // wire frames not yet accepted by the wire (a ring)
  std::vector<uint32_t> pending_len;
  uint32_t pending_head = 0;
  uint32_t pending_count = 0;
  std::array<rte_mbuf*, kBurst> tx_stage{};  // descriptors taken from one queue's tx ring
  uint32_t tx_stage_head = 0;
  uint32_t tx_stage_count = 0;
  uint16_t tx_next = 0;  // the TX queue whose ring is looked at first next time (round robin)
  std::array<uint64_t, kMaxQueues> rxq_packets{};  // headers handed to each RX queue
  std::array<uint64_t, kMaxQueues> rxq_bytes{};
  std::array<uint64_t, kMaxQueues> txq_packets{};  // descriptors taken from each TX queue
  std::array<uint64_t, kMaxQueues> rxq_base{};     // stats_reset
  std::array<uint64_t, kMaxQueues> rxq_bytes_base{};
  std::array<uint64_t, kMaxQueues> txq_base{};
  model_mbuf::FrameScratch frames;  // mbufs for one model TX request
  nic::RxEntry rx_entry;
  std::array<uint64_t, size_t(PmdCtr::kCount)> ctr{};
  std::array<uint64_t, size_t(PmdCtr::kCount)> ctr_base{};  // stats_reset/xstats_reset
  std::array<uint64_t, nic::kCounterCount> model_base{};    // xstats_reset of model counters
  // Interrupt vectors: the eventfd each is bound to (the PMD's own duplicate), -1 when free. A
  // raised vector is delivered as a write of 1 to it, as VFIO signals an MSI-X vector's eventfd.
  std::array<int, kIrqVectors> irq_fd;
  // Seeded wire faults (rte_pmd_cleave_fault_set): RX between the wire and the model, TX where
  // merged frames enter `pending`. Off unless set.
  std::array<dp::FaultStage, dp::kFaultDirs> fault;
  std::array<dp::FaultCounters, dp::kFaultDirs> fault_base{};  // xstats_reset
  std::array<rte_mbuf*, 2 * kBurst + dp::FaultStage::kMaxHeld> fault_out{};
  // One wire burst regrouped by RX queue, and each frame's queue.
  std::array<rte_mbuf*, 2 * kBurst + dp::FaultStage::kMaxHeld> rx_steered{};
  std::array<uint8_t, 2 * kBurst + dp::FaultStage::kMaxHeld> rx_queue_of{};

  // ---- control path only (rte_flow calls, close) ----
  std::vector<rte_flow*> rules;  // rte_flow handles to free at flush or close

  void bump(PmdCtr c, uint64_t n = 1) { ctr[size_t(c)] += n; }
  uint64_t value(PmdCtr c) const { return ctr[size_t(c)] - ctr_base[size_t(c)]; }
};

// The service callback's handle on a port's Device, one per port id, never freed. DPDK 22.11's
// rte_service_may_be_active() can call a service idle in the moment between its runner reading
// the run state and marking itself active, so a Device is not freed on its word alone: the
// runner raises `busy` before it reads `dev`, and close clears `dev` before it waits for `busy`
// to fall (both sequentially consistent: the runner sees no Device, or close sees it busy).
struct ServiceSlot {
  std::atomic<Device*> dev{nullptr};
  std::atomic<uint32_t> busy{0};
};
ServiceSlot& service_slot(uint16_t port_id);
// Clears the port's slot and waits until no service run holds its Device.
void service_release(uint16_t port_id);

// Data path (net_cleave_datapath.cc).
uint16_t rx_burst(void* queue, rte_mbuf** pkts, uint16_t n);
uint16_t tx_burst(void* queue, rte_mbuf** pkts, uint16_t n);
// The rte_service callback; arg: the port's ServiceSlot. Returns 0 for a run that did work and
// -EAGAIN for one that found none, so the service's cycles (RTE_SERVICE_ATTR_CYCLES) are the
// NIC's busy time, its idle polling apart; xstat service_busy_runs counts those runs (DPDK's
// call count counts every run).
int32_t service_run(void* arg);
// One round of the NIC: posted commands, wire TX flush, descriptors merged, wire RX into the
// model. Returns whether it did anything (a posted command, frames from or to the wire,
// descriptors off a TX queue). Caller holds dev.lock.
bool poll_locked(Device& dev);
// Frees every mbuf the device holds (rings, stage, pending); caller holds dev.lock, stopped.
void drain_locked(Device& dev);
// Applies the posted commands queued so far, each queue's in order (at most a ring's worth from
// each, so posters cannot hold the caller forever), and returns how many; caller holds dev.lock.
uint32_t apply_posted(Device& dev);
// Applies one posted command; caller holds dev.lock.
void run_posted(Device& dev, const PostedCmd& c);
// Takes dev.lock for a command or a look at the model: posted commands go first.
inline void lock_model(Device& dev) {
  rte_spinlock_lock(&dev.lock);
  apply_posted(dev);
}

}  // namespace cleave::pmd
