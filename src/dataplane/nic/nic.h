// nic.h - the dataplane's NIC: one interface over two backends, so transports run unchanged.
//
//   - cleave:  a net_cleave port (the header-split NIC; the reference model here, the FPGA on real
//              hosts). Bursts are the port's; commands are rte_pmd_cleave_*.
//   - generic: any other DPDK port. The same split and placement done in software on the
//              dataplane lcore, by the same reference model (hw/fpga/model, the single source of
//              truth for the semantics) over the port's mbufs, with payload copies by the CPU.
//
// Both hand the dataplane the same thing: one mbuf per received frame, trimmed to its headers when
// the payload was placed, dropped or trimmed (or there was none) and whole when deferred, with the
// rte_pmd_cleave_placement dynamic field, checksum flags and the FDIR flow id filled in exactly as
// rte_pmd_cleave.h describes; and on TX they take header-only descriptors (a header mbuf chained
// to extbuf segments over app memory, with RTE_MBUF_F_TX_* offload flags) and plain frames. Only
// the counters differ.
//
// Queues: a port may be opened as N queues (NicQueue), one Nic per queue, one shard each. Queue
// q's Nic receives the frames steered to q (a flow added through it is steered to q; other TCP
// and UDP by the Toeplitz hash of the 4-tuple under rss::kDefaultKey through
// rss::default_reta(queue_count()), src/common/rss.h, the same on both backends, so
// rss::reply_queue with those says where a connection's replies land on either; ARP, ICMP and the
// rest to queue 0) and sends on q. Flow ids are the port's: queues use disjoint ones. MR commands:
// see mr_add. One queue (the default) is a port as before.
//
// Threads: the dataplane lcore alone calls a Nic's bursts and commands, and its counters (the
// management thread asks through the CtlChannel); a queue's Nic belongs to its shard's lcore.
// Bursts are called once per burst: the virtual call is per burst, never per packet. open_nic()
// and the destructor run on the main thread while the dataplane is not running.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "fault_params.h"
#include "nic_model.h"
#include "rte_pmd_cleave.h"

namespace cleave::dp {

enum class NicBackend : uint8_t { kCleave, kGeneric };
// Inline: management names backends without linking the Nic (tests/fuzz builds it so).
inline std::string_view backend_name(NicBackend b) {
  switch (b) {
    case NicBackend::kCleave:
      return "cleave";
    case NicBackend::kGeneric:
      return "generic";
  }
  return "unknown";
}

// Which queue of how many a Nic serves. The port must be configured for them: net_cleave with
// `count` queue pairs; any other port (generic backend) with one, whatever the count.
struct NicQueue {
  uint16_t id = 0;
  uint16_t count = 1;
};
inline constexpr uint16_t kMaxNicQueues = 16;

// Sizing of the generic backend's tables (host memory). The cleave backend takes its sizing from
// the net_cleave devargs instead.
struct GenericNicParams {
  nic::NicConfig model;
  uint32_t tx_frames = 4096;  // frames the software merge may hold for a full TX queue
};

class Nic {
 public:
  virtual ~Nic() = default;
  Nic(const Nic&) = delete;
  Nic& operator=(const Nic&) = delete;

  NicBackend backend() const { return backend_; }
  uint16_t port_id() const { return port_id_; }
  uint16_t queue_id() const { return queue_.id; }
  uint16_t queue_count() const { return queue_.count; }

  // ---- data path ----
  // Up to n received frames, as described above. Never blocks.
  virtual uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) = 0;
  // Takes up to n descriptors or frames; returns how many it took (those are the NIC's now: each
  // is freed once its payload has been read, which is the app memory's send completion). The
  // rest stay the caller's. Frames the NIC holds for a full port go out on every call, n = 0
  // included (and, on both backends, on rx_burst).
  virtual uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) = 0;

  // ---- commands: the semantics and errors (0 or a negative errno) of rte_pmd_cleave_* ----
  // `access` (RTE_PMD_CLEAVE_MR_REMOTE_* bits) and `tag`: rte_pmd_cleave_mr_add_remote; the
  // defaults give an MR no RoCE peer can reach. With several queues, register an MR through
  // every queue's Nic that places into it (a generic queue has tables of its own; on cleave
  // the port's one MR table counts the queues that added an id, and the last remove frees it).
  // flow_add steers the flow to this Nic's queue, whatever rte_pmd_cleave_flow::queue says.
  virtual int mr_add(uint16_t id, void* base, uint64_t len, uint32_t owner, uint8_t access = 0,
                     uint16_t tag = 0) = 0;
  virtual int mr_remove(uint16_t id) = 0;
  virtual int flow_add(uint32_t id, const rte_pmd_cleave_flow& flow) = 0;
  virtual int flow_remove(uint32_t id) = 0;
  virtual int flow_set_mode(uint32_t id, rte_pmd_cleave_flow_mode mode) = 0;
  virtual int ms_post(uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) = 0;
  // The three commands every burst makes: posted, as a driver writes a doorbell (the cleave
  // backend queues them for the NIC, applied before anything that follows); they return 0 and
  // the NIC counts a refusal (nic_cmd_err_*).
  virtual int cursor_update(uint32_t flow, uint32_t cursor) = 0;
  virtual int ms_retire(uint32_t flow, uint32_t count) = 0;
  virtual int ms_retire_msg(uint32_t flow, uint32_t msg) = 0;
  virtual int roce_resync(uint32_t flow, uint32_t psn, uint32_t next_msg) = 0;
  virtual int read_post(uint32_t flow, uint32_t psn, uint16_t mr, uint64_t offset,
                        uint32_t len) = 0;
  virtual int read_retire(uint32_t flow, uint32_t psn) = 0;
  virtual int rkey_check(uint32_t flow, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access,
                         uint16_t* mr) = 0;

  // ---- interrupts (rte_pmd_cleave_irq_*): a vector the NIC raises is delivered as a write to
  // the eventfd bound to it, so a lcore wakes a sleeping app with a posted command, not a
  // system call. Vectors are the port's, shared by its queues. The generic backend has none
  // (-ENOTSUP): its caller writes the eventfd itself. ----
  virtual int irq_bind(int /*fd*/) { return -ENOTSUP; }
  virtual int irq_unbind(uint32_t /*vector*/) { return -ENOTSUP; }
  virtual int irq_raise(uint32_t /*vector*/) { return -ENOTSUP; }

  // ---- seeded wire faults (fault.h): test equipment on the wire side of the NIC ----
  // Sets one direction's loss, reordering and duplication (all zero: off). RX faults act on
  // frames from the port before the NIC model sees them, TX faults on frames as they leave for
  // the port. 0, or -EINVAL for a probability outside [0, 1). Counted as fault_<dir>_dropped,
  // _reordered and _duplicated in for_each_counter.
  int set_faults(FaultDir dir, const FaultParams& p);
  const FaultParams& faults(FaultDir dir) const { return faults_[size_t(dir)]; }

  // ---- introspection (not on the packet path; may allocate) ----
  // Every counter by a stable name, as net_cleave's xstats name them: the model's counters as
  // nic_<name> (decisions, defer reasons, command errors) and its table memory as
  // nic_mem_<table>_bytes / _in_use and nic_mem_total_bytes, the same on both backends (on-NIC
  // memory for cleave, host memory for generic); plus each backend's own counters.
  virtual void for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const = 0;

  // The placement dynamic field's offset in every mbuf rx_burst returns.
  int placement_offset() const { return placement_offset_; }

 protected:
  Nic(NicBackend b, uint16_t port_id, NicQueue queue = {});
  virtual int apply_faults(FaultDir dir, const FaultParams& p) = 0;

 private:
  NicBackend backend_;
  uint16_t port_id_;
  NicQueue queue_;
  int placement_offset_;
  std::array<FaultParams, kFaultDirs> faults_{};
};

// The backend for a configured and started port: cleave for a net_cleave port, generic for any
// other. `pool` supplies the frames the generic backend's software TX merge builds. `queue`: which
// of the port's queues this Nic serves; open every queue of a port with the same count (the
// generic backend's queues share a steering stage, made by the first and gone with the last).
// Throws std::runtime_error with a readable message on failure.
std::unique_ptr<Nic> open_nic(uint16_t port_id, rte_mempool* pool,
                              const GenericNicParams& params = {}, NicQueue queue = {});

// The integrity check NIC parser `parser` (RTE_PMD_CLEAVE_PARSER_*) makes on its frames beyond
// the L4 checksum (RoCEv2's ICRC), done in software over the IPv4 packet at `ip` (`len` bytes)
// on a whole frame the NIC left unchecked; nullptr for a parser that makes none. The dataplane
// asks once per claim, so the parser's wire format stays the NIC's to know.
using SoftwareCheck = bool (*)(const uint8_t* ip, uint32_t len);
SoftwareCheck software_check(uint8_t parser);

}  // namespace cleave::dp
