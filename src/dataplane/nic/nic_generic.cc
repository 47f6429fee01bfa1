// nic_generic.cc - the generic backend: header split, placement and TX merge in software, on the
// dataplane lcore, by the NIC reference model over any DPDK port's mbufs.
//
// RX: the port's frames go through the model one by one (model_mbuf::rx_frame, exactly what
// net_cleave's service does), so rx_burst hands out what net_cleave's would.
// TX, per descriptor, in order:
//   - frames the port sends as they are: plain single-segment frames without offload flags, and
//     descriptors whose every ask (MULTI_SEGS for a chain, TSO, IPv4/TCP/UDP checksums) the port
//     offers and was configured with; those get l2/l3/l4_len and rte_eth_tx_prepare. They go
//     straight to the port, and only while nothing waits in the pending ring (order);
//   - everything else (the RoCE ICRC and the Solar CRC32C always) is merged by the model into
//   frames from the frame
//     pool, payload read from the registered MR that holds it or bounced, then queued in a
//     bounded pending ring that is flushed to the port before new work. The descriptor is freed
//     once its payload was read: the extbuf free callback is the app's send completion.
// A descriptor is taken only when there is room for all of it; it otherwise stays the caller's.
// Seeded wire faults (fault.h), when set: RX frames pass the RX stage before the model; with TX
// faults on, every frame goes through the pending ring and the TX stage on its way in.
// Nothing on the data path allocates, logs, locks or throws; every frame is counted.
//
// Several queues (NicQueue): the ports this backend serves (net_ring, net_tap, net_af_packet, a
// NIC without a Toeplitz RSS this model's key and RETA could program) keep one queue pair, and a
// software steering stage (SoftSteer) splits it: queue 0's Nic runs the stage in its bursts,
// reading the port, steering each frame by NicModel::steer() over a table of every queue's flows
// (the cleave backend's rule exactly: a flow's queue, RoCE by QP, Solar by connection number,
// Toeplitz RSS through the RETA, the rest to queue 0) onto one SPSC ring per queue, and sending the
// other queues' frames, which they put on SPSC rings of their own. Every queue has its own model
// (its flows, its MRs), pending ring and counters: placement, merging and copies run on each
// queue's lcore. What queues share is only those rings, and the stage's steering table, which
// commands change under a spinlock that the stage trylocks (a round's RX is skipped while a command
// holds it). The cost: queue 0's lcore parses and hashes every frame once more and moves it through
// a ring.
#include <rte_branch_prediction.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_ring.h>
#include <rte_spinlock.h>

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "fault.h"
#include "model_mbuf.h"
#include "nic_backends.h"

namespace cleave::dp {
namespace {

namespace mm = cleave::model_mbuf;

constexpr uint16_t kRun = 32;         // frames sent straight to the port per rte_eth_tx_burst
constexpr uint16_t kFaultBurst = 32;  // frames through a fault stage per apply

// The generic backend's own counters; the rx/tx packet and byte counts use the names of ethdev's
// basic xstats, the rest net_cleave's where the meaning is the same.
enum class Ctr : uint8_t {
  kRxPackets,
  kRxBytes,
  kTxPackets,  // frames the port accepted
  kTxBytes,
  kRxLinearized,    // multi-segment frames copied flat for the model
  kTxPassThrough,   // plain frames sent as they are
  kTxOffloaded,     // descriptors the port merges, segments or checksums itself
  kTxSwMerged,      // descriptors merged by the model
  kTxZeroCopy,      // of those, payload read from a registered MR
  kTxBounce,        // of those, payload copied to the bounce buffer first
  kTxErrors,        // descriptors refused (bad headers, over the MTU, too many frames)
  kTxWireFull,      // flushes that found the port full
  kTxPoolEmpty,     // merges postponed for want of frame mbufs
  kTxPrepareFails,  // descriptors rte_eth_tx_prepare refused, merged in software instead
  kCount
};
constexpr const char* kCtrNames[] = {
    "rx_good_packets", "rx_good_bytes", "tx_good_packets", "tx_good_bytes",    "rx_linearized",
    "tx_pass_through", "tx_offloaded",  "tx_sw_merged",    "tx_zero_copy",     "tx_bounce",
    "tx_errors",       "tx_wire_full",  "tx_pool_empty",   "tx_prepare_fails",
};
static_assert(std::size(kCtrNames) == size_t(Ctr::kCount));

// Ethernet/IPv4/TCP or UDP header lengths of the frame starting in m's first segment.
bool set_header_lengths(rte_mbuf* m) {
  const auto* f = rte_pktmbuf_mtod(m, const uint8_t*);
  const uint32_t h = mm::header_length(f, m->data_len, 0);
  if (h == 0) return false;
  const uint8_t proto = f[14 + 9];
  if (proto != 6 && proto != 17) return false;
  const uint32_t l3 = uint32_t(f[14] & 0xF) * 4;
  m->l2_len = 14;
  m->l3_len = l3;
  m->l4_len = h - 14 - l3;
  return true;
}

// ---- the software steering stage of a port opened as several queues ---------------------------

class SoftSteer {
 public:
  static constexpr uint32_t kRingSize = 1024;

  SoftSteer(uint16_t port, uint16_t queues, uint32_t max_flows);
  ~SoftSteer();
  SoftSteer(const SoftSteer&) = delete;
  SoftSteer& operator=(const SoftSteer&) = delete;

  uint16_t queues() const { return queues_; }
  rte_ring* rx(uint16_t q) const { return rx_[q]; }
  rte_ring* tx(uint16_t q) const { return tx_[q]; }

  // Queue 0's lcore only: the other queues' frames to the port; the port's frames to the queues.
  void poll_tx();
  void poll_rx();
  uint64_t steered(uint16_t q) const { return steered_[q]; }  // queue 0's lcore
  uint64_t tx_frames() const { return tx_frames_; }

  // Commands, from any queue's lcore: the steering table's copy of a flow (its queue).
  int flow_add(uint32_t id, const nic::FlowSpec& spec);
  void flow_remove(uint32_t id);

 private:
  void release();  // frees the rings and what they and the stage hold

  uint16_t port_;
  uint16_t queues_;
  std::array<rte_ring*, kMaxNicQueues> rx_{};
  std::array<rte_ring*, kMaxNicQueues> tx_{};
  std::unique_ptr<nic::NicModel> table_;  // flows with their queues, RETA, key: steer() only
  alignas(64) rte_spinlock_t lock_ = RTE_SPINLOCK_INITIALIZER;
  // ---- queue 0's lcore ----
  alignas(64) std::array<rte_mbuf*, kRun> stage_{};  // one queue's TX burst the port has not taken
  uint16_t stage_head_ = 0;
  uint16_t stage_count_ = 0;
  uint16_t next_tx_ = 1;
  std::array<rte_mbuf*, kRun> rx_bufs_{};
  std::array<rte_mbuf*, kRun> rx_group_{};
  std::array<uint8_t, kRun> rx_queue_{};
  std::array<uint64_t, kMaxNicQueues> steered_{};
  uint64_t tx_frames_ = 0;
};

SoftSteer::SoftSteer(uint16_t port, uint16_t queues, uint32_t max_flows)
    : port_(port), queues_(queues) {
  nic::NicConfig c;
  c.max_flows = max_flows;
  c.max_mrs = 1;
  c.ms_committed_per_flow = 0;
  c.ms_store_entries = c.ms_chunk;
  c.roce_write_ctxs = 1;
  c.tx_completions = 1;
  c.rx_queues = queues;
  table_ = std::make_unique<nic::NicModel>(c);
  static uint32_t instances = 0;
  for (uint16_t q = 0; q < queues; q++) {
    char n[RTE_RING_NAMESIZE];
    std::snprintf(n, sizeof n, "cl_sw_rx_%u", instances);
    rx_[q] = rte_ring_create(n, kRingSize, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    std::snprintf(n, sizeof n, "cl_sw_tx_%u", instances++);
    tx_[q] = rte_ring_create(n, kRingSize, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (rx_[q] == nullptr || tx_[q] == nullptr) {
      const std::string why = rte_strerror(rte_errno);
      release();
      throw std::runtime_error("port " + std::to_string(port) +
                               ": the steering stage's rings: " + why);
    }
  }
}

SoftSteer::~SoftSteer() {
  release();
}

void SoftSteer::release() {
  for (uint16_t i = 0; i < stage_count_; i++)
    rte_pktmbuf_free(stage_[stage_head_ + i]);
  stage_count_ = 0;
  for (auto* rings : {&rx_, &tx_}) {
    for (rte_ring* r : *rings) {
      void* m;
      while (r != nullptr && rte_ring_dequeue(r, &m) == 0)
        rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
      rte_ring_free(r);
    }
  }
  rx_.fill(nullptr);
  tx_.fill(nullptr);
}

// One burst of another queue's frames a round, the queues in turn; what the port does not take
// waits in the stage.
void SoftSteer::poll_tx() {
  for (uint16_t round = 1; round < queues_; round++) {
    if (stage_count_ == 0) {
      const uint16_t q = next_tx_;
      next_tx_ = uint16_t(next_tx_ % (queues_ - 1) + 1);
      stage_head_ = 0;
      stage_count_ = uint16_t(rte_ring_sc_dequeue_burst(
          tx_[q], reinterpret_cast<void**>(stage_.data()), kRun, nullptr));
      if (stage_count_ == 0) continue;
    }
    const uint16_t sent = rte_eth_tx_burst(port_, 0, stage_.data() + stage_head_, stage_count_);
    tx_frames_ += sent;
    stage_head_ = uint16_t(stage_head_ + sent);
    stage_count_ = uint16_t(stage_count_ - sent);
    if (stage_count_ != 0) return;  // the port is full
  }
}

// As many frames as every queue's ring has room for (a queue left unpolled holds the others
// back, as on net_cleave), steered by their first segment's headers.
void SoftSteer::poll_rx() {
  unsigned room = kRun;
  for (uint16_t q = 0; q < queues_; q++)
    room = std::min(room, rte_ring_free_count(rx_[q]));
  if (room == 0 || !rte_spinlock_trylock(&lock_)) return;
  const uint16_t n = rte_eth_rx_burst(port_, 0, rx_bufs_.data(), uint16_t(room));
  for (uint16_t i = 0; i < n; i++) {
    const rte_mbuf* m = rx_bufs_[i];
    const uint16_t q = table_->steer({rte_pktmbuf_mtod(m, const uint8_t*), size_t(m->data_len)});
    rx_queue_[i] = uint8_t(q);
    steered_[q]++;
  }
  rte_spinlock_unlock(&lock_);
  for (uint16_t q = 0; q < queues_ && n != 0; q++) {
    uint16_t k = 0;
    for (uint16_t i = 0; i < n; i++) {
      if (rx_queue_[i] == q) rx_group_[k++] = rx_bufs_[i];
    }
    if (k != 0) {
      rte_ring_sp_enqueue_burst(rx_[q], reinterpret_cast<void**>(rx_group_.data()), k, nullptr);
    }
  }
}

int SoftSteer::flow_add(uint32_t id, const nic::FlowSpec& spec) {
  rte_spinlock_lock(&lock_);
  const int r = mm::to_errno(table_->flow_add(id, spec));
  rte_spinlock_unlock(&lock_);
  return r;
}

void SoftSteer::flow_remove(uint32_t id) {
  rte_spinlock_lock(&lock_);
  table_->flow_remove(id);
  rte_spinlock_unlock(&lock_);
}

// ---- a queue's NIC ------------------------------------------------------------------------------

class GenericNic final : public Nic {
 public:
  GenericNic(uint16_t port, rte_mempool* pool, const GenericNicParams& params,
             const rte_eth_dev_info& info, NicQueue queue, std::shared_ptr<SoftSteer> steer);
  ~GenericNic() override;

  uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override;
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override;

  int mr_add(uint16_t id, void* base, uint64_t len, uint32_t owner, uint8_t access,
             uint16_t tag) override;
  int mr_remove(uint16_t id) override;
  int flow_add(uint32_t id, const rte_pmd_cleave_flow& flow) override;
  int flow_remove(uint32_t id) override;
  int flow_set_mode(uint32_t id, rte_pmd_cleave_flow_mode mode) override;
  int ms_post(uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override;
  // As the cleave backend's posted commands: a refusal is the model's to count.
  int cursor_update(uint32_t flow, uint32_t cursor) override {
    model_->cursor_update(flow, cursor);
    return 0;
  }
  int ms_retire(uint32_t flow, uint32_t count) override {
    model_->ms_retire(flow, count);
    return 0;
  }
  int ms_retire_msg(uint32_t flow, uint32_t msg) override {
    model_->ms_retire_msg(flow, msg);
    return 0;
  }
  int roce_resync(uint32_t flow, uint32_t psn, uint32_t next_msg) override {
    return mm::to_errno(model_->roce_resync(flow, psn, next_msg));
  }
  int read_post(uint32_t flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) override {
    if (mr >= bounce_mr_) return -ENOENT;
    return mm::to_errno(model_->read_post(flow, psn, mr, offset, len));
  }
  int read_retire(uint32_t flow, uint32_t psn) override {
    return mm::to_errno(model_->read_retire(flow, psn));
  }
  int rkey_check(uint32_t flow, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access,
                 uint16_t* mr) override {
    return mm::to_errno(model_->rkey_check(flow, rkey, va, len, access, mr));
  }

  void for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const override;

 protected:
  int apply_faults(FaultDir dir, const FaultParams& p) override {
    fault_[size_t(dir)].configure(p, dir);
    return 0;
  }

 private:
  FaultStage& rx_fault() { return fault_[size_t(FaultDir::kRx)]; }
  FaultStage& tx_fault() { return fault_[size_t(FaultDir::kTx)]; }
  uint16_t rx_faulty(rte_mbuf** pkts, uint16_t n);
  uint16_t tx_faulty(rte_mbuf** pkts, uint16_t n);
  void to_wire(rte_mbuf* const* frames, uint32_t n);
  void poll_tx_fault();
  // The port's one queue pair, or with several queues this queue's rings of the steering stage.
  uint16_t port_rx(rte_mbuf** pkts, uint16_t n);
  uint16_t port_tx(rte_mbuf** pkts, uint16_t n) {
    if (steer_ == nullptr || queue_id() == 0) return rte_eth_tx_burst(port_id(), 0, pkts, n);
    return uint16_t(rte_ring_sp_enqueue_burst(steer_->tx(queue_id()),
                                              reinterpret_cast<void**>(pkts), n, nullptr));
  }
  void bump(Ctr c, uint64_t n = 1) { ctr_[size_t(c)] += n; }
  bool direct(rte_mbuf* m, bool* offload) const;
  uint16_t send_run(rte_mbuf** pkts, uint16_t n, uint32_t offloaded);
  bool take_sw(rte_mbuf* m);
  void refuse(rte_mbuf* m) {
    rte_pktmbuf_free(m);
    bump(Ctr::kTxErrors);
  }
  uint32_t pending_room() const { return uint32_t(pending_.size()) - pending_count_; }
  void push_pending(rte_mbuf* m);
  void flush_pending();

  // ---- set at open ----
  rte_mempool* pool_;  // frames the software merge builds
  uint32_t frame_room_ = 0;
  uint32_t max_frame_ = 0;  // largest merged frame: the MTU + Ethernet header, CRC, a VLAN tag
  uint64_t offloads_ = 0;   // TX offloads the port offers and was configured with
  uint64_t icrc_mask_ = 0;
  uint64_t crc32c_mask_ = 0;
  uint16_t bounce_mr_ = 0;  // the model's MR for payloads outside registered MRs
  std::unique_ptr<nic::NicModel> model_;
  std::shared_ptr<SoftSteer> steer_;  // with several queues: the port's steering stage

  // ---- data path state (the dataplane lcore) ----
  std::vector<uint8_t> rx_flat_;
  nic::RxEntry rx_entry_;
  std::vector<uint8_t> bounce_;
  mm::MrRanges mrs_;
  mm::FrameScratch frames_;
  std::vector<rte_mbuf*> pending_;  // merged frames not yet accepted by the port (a ring)
  std::vector<uint32_t> pending_len_;
  uint32_t pending_head_ = 0;
  uint32_t pending_count_ = 0;
  std::array<uint64_t, size_t(Ctr::kCount)> ctr_{};
  // Seeded wire faults (fault.h), off unless set: RX between the port and the model, TX where
  // frames enter the pending ring (with TX faults on, every frame goes through it).
  std::array<FaultStage, kFaultDirs> fault_;
  std::array<rte_mbuf*, kFaultBurst> fault_in_{};
  std::array<rte_mbuf*, 2 * kFaultBurst + FaultStage::kMaxHeld> fault_out_{};
};

GenericNic::GenericNic(uint16_t port, rte_mempool* pool, const GenericNicParams& params,
                       const rte_eth_dev_info& info, NicQueue queue,
                       std::shared_ptr<SoftSteer> steer)
    : Nic(NicBackend::kGeneric, port, queue), pool_(pool), steer_(std::move(steer)) {
  const std::string name = "port " + std::to_string(port) + " (" + info.driver_name + ")";
  if (pool == nullptr) {
    throw std::runtime_error(name +
                             ": the generic NIC backend needs a frame pool for its "
                             "software TX merge");
  }
  if (params.tx_frames == 0) {
    throw std::runtime_error(name + ": the generic NIC backend needs tx_frames > 0");
  }
  if (params.model.max_mrs >= UINT16_MAX) {
    throw std::runtime_error(name + ": max_mrs " + std::to_string(params.model.max_mrs) +
                             ": at most " + std::to_string(UINT16_MAX - 1));
  }
  const uint32_t data_room = rte_pktmbuf_data_room_size(pool);
  frame_room_ = data_room > RTE_PKTMBUF_HEADROOM ? data_room - RTE_PKTMBUF_HEADROOM : 0;
  uint16_t mtu = RTE_ETHER_MTU;
  if (int r = rte_eth_dev_get_mtu(port, &mtu); r != 0) {
    throw std::runtime_error(name + ": reading its MTU failed: " + rte_strerror(-r));
  }
  max_frame_ = std::min<uint32_t>(
      uint32_t(mtu) + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + RTE_VLAN_HLEN, frame_room_);
  rte_eth_conf conf{};
  if (int r = rte_eth_dev_conf_get(port, &conf); r != 0) {
    throw std::runtime_error(name + ": reading its configuration failed: " + rte_strerror(-r));
  }
  offloads_ = info.tx_offload_capa & conf.txmode.offloads;
  const int icrc = rte_pmd_cleave_tx_icrc_bit();
  if (icrc < 0) {
    throw std::runtime_error(name + ": cannot register the mbuf dynamic flag " +
                             RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG + ": " + rte_strerror(rte_errno));
  }
  icrc_mask_ = uint64_t(1) << icrc;
  const int crc32c = rte_pmd_cleave_tx_crc32c_bit();
  if (crc32c < 0) {
    throw std::runtime_error(name + ": cannot register the mbuf dynamic flag " +
                             RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG + ": " + rte_strerror(rte_errno));
  }
  crc32c_mask_ = uint64_t(1) << crc32c;

  nic::NicConfig cfg = params.model;
  cfg.max_mrs = params.model.max_mrs + 1;  // one more: the bounce MR
  try {
    model_ = std::make_unique<nic::NicModel>(cfg);
    bounce_mr_ = uint16_t(model_->config().max_mrs - 1);
    rx_flat_.resize(mm::kMaxFrame);
    bounce_.resize(mm::kBounceBytes);
    mrs_.reserve(model_->config().max_mrs);
    frames_.resize(mm::kMaxTxFrames);
    pending_.resize(params.tx_frames);
    pending_len_.resize(params.tx_frames);
  } catch (const std::bad_alloc&) {
    throw std::runtime_error(name + ": not enough memory for the generic NIC's tables (" +
                             std::to_string(cfg.max_flows) + " flows, " +
                             std::to_string(cfg.ms_store_entries) + " shared MS entries)");
  }
  if (model_->mr_add(bounce_mr_, bounce_.data(), bounce_.size(), 0) != nic::Err::kOk) {
    throw std::runtime_error(name + ": the NIC model refused its bounce MR");
  }
}

GenericNic::~GenericNic() {
  for (FaultStage& f : fault_)
    f.clear();
  for (uint32_t i = 0; i < pending_count_; i++)
    rte_pktmbuf_free(pending_[(pending_head_ + i) % pending_.size()]);
}

// ---- RX -----------------------------------------------------------------------------------------

uint16_t GenericNic::rx_burst(rte_mbuf** pkts, uint16_t n) {
  // Merged frames waiting for the port go out first, as net_cleave's inline service does.
  if (unlikely(tx_fault().active())) poll_tx_fault();
  if (pending_count_ > 0) flush_pending();
  const uint16_t got = likely(!rx_fault().active()) ? port_rx(pkts, n) : rx_faulty(pkts, n);
  uint64_t bytes = 0;
  uint64_t linearized = 0;
  for (uint16_t i = 0; i < got; i++) {
    bytes += pkts[i]->pkt_len;
    linearized += mm::rx_frame(*model_, pkts[i], rx_flat_, rx_entry_, placement_offset()) ? 1 : 0;
    pkts[i]->port = port_id();
  }
  bump(Ctr::kRxPackets, got);
  bump(Ctr::kRxBytes, bytes);
  bump(Ctr::kRxLinearized, linearized);
  return got;
}

// Frames from the port through the RX fault stage: held frames released when the line is idle,
// then at most half the room read, so duplicates find room too.
uint16_t GenericNic::rx_faulty(rte_mbuf** pkts, uint16_t n) {
  FaultStage& fault = rx_fault();
  const uint16_t released = fault.poll(pkts, n);
  const auto room = uint16_t(n - released);
  const auto want = uint16_t(std::min<unsigned>(kFaultBurst, (room + 1) / 2));
  const uint16_t got = want != 0 ? port_rx(fault_in_.data(), want) : 0;
  return uint16_t(released + fault.apply(fault_in_.data(), got, pkts + released, room));
}

uint16_t GenericNic::port_rx(rte_mbuf** pkts, uint16_t n) {
  if (steer_ == nullptr) return rte_eth_rx_burst(port_id(), 0, pkts, n);
  if (queue_id() == 0) {
    steer_->poll_tx();
    steer_->poll_rx();
  }
  return uint16_t(rte_ring_sc_dequeue_burst(steer_->rx(queue_id()), reinterpret_cast<void**>(pkts),
                                            n, nullptr));
}

// ---- TX -----------------------------------------------------------------------------------------

// Frames for the port into the pending ring, through the TX fault stage when it is on. The caller
// made room for n; duplicates and released frames take what is left.
void GenericNic::to_wire(rte_mbuf* const* frames, uint32_t n) {
  FaultStage& fault = tx_fault();
  if (likely(!fault.active())) {
    for (uint32_t i = 0; i < n; i++)
      push_pending(frames[i]);
    return;
  }
  for (uint32_t i = 0; i < n; i += kFaultBurst) {
    const auto k = uint16_t(std::min<uint32_t>(kFaultBurst, n - i));
    // Room the frames of later chunks keep: extras only take what is beyond all of them.
    const uint32_t later = n - i - k;
    const auto cap =
        uint16_t(std::min<uint32_t>(pending_room() - later, uint32_t(fault_out_.size())));
    const uint16_t o = fault.apply(frames + i, k, fault_out_.data(), cap);
    for (uint16_t j = 0; j < o; j++)
      push_pending(fault_out_[j]);
  }
}

// TX frames held back for reordering leave once the line is idle.
void GenericNic::poll_tx_fault() {
  const auto cap = uint16_t(std::min<uint32_t>(pending_room(), uint32_t(fault_out_.size())));
  const uint16_t o = tx_fault().poll(fault_out_.data(), cap);
  for (uint16_t j = 0; j < o; j++)
    push_pending(fault_out_[j]);
}

void GenericNic::push_pending(rte_mbuf* m) {
  const uint32_t at = (pending_head_ + pending_count_) % uint32_t(pending_.size());
  pending_[at] = m;
  pending_len_[at] = m->pkt_len;
  pending_count_++;
}

void GenericNic::flush_pending() {
  const auto size = uint32_t(pending_.size());
  while (pending_count_ > 0) {
    const uint32_t contig = std::min(pending_count_, size - pending_head_);
    const auto want = uint16_t(std::min<uint32_t>(contig, UINT16_MAX));
    const uint16_t sent = port_tx(&pending_[pending_head_], want);
    // Lengths were saved when queued: once sent, a frame may already belong to the peer.
    uint64_t bytes = 0;
    for (uint16_t i = 0; i < sent; i++)
      bytes += pending_len_[pending_head_ + i];
    bump(Ctr::kTxPackets, sent);
    bump(Ctr::kTxBytes, bytes);
    pending_head_ = (pending_head_ + sent) % size;
    pending_count_ -= sent;
    if (sent < want) {
      bump(Ctr::kTxWireFull);
      return;
    }
  }
}

// Whether the port sends `m` as it is: a plain frame, or one whose every offload the port was
// configured with: a chain the port gathers, checksums or TSO it computes (then the header
// lengths and RTE_MBUF_F_TX_IPV4 are set for the driver, which leaves the request the same should
// it stay the caller's). *offload is raised for all but plain frames.
bool GenericNic::direct(rte_mbuf* m, bool* offload) const {
  const uint64_t ol = m->ol_flags;
  const uint8_t flags = mm::tx_flags(ol, icrc_mask_, crc32c_mask_);
  if (m->nb_segs == 1 && flags == 0) return true;
  // No DPDK offload computes the RoCE ICRC or the Solar CRC32C: the model does, in software.
  if ((flags & (nic::kTxIcrc | nic::kTxCrc32c)) != 0) return false;
  uint64_t need = m->nb_segs > 1 ? RTE_ETH_TX_OFFLOAD_MULTI_SEGS : 0;
  uint64_t add = 0;
  if ((flags & nic::kTxTso) != 0) {
    // The model's TSO fills both checksums; ask the port for the same.
    need |= RTE_ETH_TX_OFFLOAD_TCP_TSO | RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
    add |= RTE_MBUF_F_TX_IP_CKSUM;
  }
  if ((flags & nic::kTxIpCsum) != 0) need |= RTE_ETH_TX_OFFLOAD_IPV4_CKSUM;
  if ((flags & nic::kTxL4Csum) != 0) {
    need |= (ol & RTE_MBUF_F_TX_L4_MASK) == RTE_MBUF_F_TX_TCP_CKSUM ? RTE_ETH_TX_OFFLOAD_TCP_CKSUM
                                                                    : RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
  }
  if ((need & ~offloads_) != 0) return false;
  if (flags != 0) {
    if (!set_header_lengths(m)) return false;
    m->ol_flags = (ol & ~RTE_MBUF_F_TX_IPV6) | RTE_MBUF_F_TX_IPV4 | add;
  }
  *offload = true;
  return true;
}

// Sends frames the port takes as they are; `offloaded` marks (bit i) the descriptors among them.
uint16_t GenericNic::send_run(rte_mbuf** pkts, uint16_t n, uint32_t offloaded) {
  std::array<uint32_t, kRun> lens;
  for (uint16_t i = 0; i < n; i++)
    lens[i] = pkts[i]->pkt_len;
  const uint16_t sent = port_tx(pkts, n);
  uint64_t bytes = 0;
  for (uint16_t i = 0; i < sent; i++)
    bytes += lens[i];
  const uint32_t sent_mask = sent >= 32 ? ~0u : (1u << sent) - 1;
  const auto off = uint64_t(std::popcount(offloaded & sent_mask));
  bump(Ctr::kTxPackets, sent);
  bump(Ctr::kTxBytes, bytes);
  bump(Ctr::kTxOffloaded, off);
  bump(Ctr::kTxPassThrough, sent - off);
  if (sent < n) bump(Ctr::kTxWireFull);
  return sent;
}

// Merges one descriptor into the pending ring. False when it must wait (no room in the ring, no
// frame mbufs): it stays the caller's. True when taken: merged, or refused and freed (counted).
bool GenericNic::take_sw(rte_mbuf* m) {
  const uint8_t flags = mm::tx_flags(m->ol_flags, icrc_mask_, crc32c_mask_);
  nic::TxRequest req;
  if (!mm::tx_request(m, flags, req)) {
    refuse(m);
    return true;
  }
  // More frames than the ring or the scratch could ever hold would wait forever: refuse them.
  const uint32_t nf = nic::NicModel::tx_frames(req);
  if (nf > pending_.size() || nf > frames_.bufs.size() ||
      nic::NicModel::tx_frame_room(req) > max_frame_) {
    refuse(m);
    return true;
  }
  if (pending_room() < nf) return false;
  switch (mm::tx_payload(m, uint32_t(req.header.size()), mrs_, bounce_, bounce_mr_, req)) {
    case mm::Payload::kNone:
      break;
    case mm::Payload::kZeroCopy:
      bump(Ctr::kTxZeroCopy);
      break;
    case mm::Payload::kBounced:
      bump(Ctr::kTxBounce);
      break;
    case mm::Payload::kFailed:
      refuse(m);
      return true;
  }
  nic::TxStatus s = nic::TxStatus::kOk;
  uint16_t got = 0;
  if (!mm::merge(*model_, req, pool_, frame_room_, frames_, &s, &got)) {
    bump(Ctr::kTxPoolEmpty);
    return false;
  }
  to_wire(frames_.bufs.data(), got);
  // The payload has been read: freeing the descriptor is the app memory's send completion.
  if (s != nic::TxStatus::kOk) {
    refuse(m);
  } else {
    rte_pktmbuf_free(m);
    bump(Ctr::kTxSwMerged);
  }
  return true;
}

uint16_t GenericNic::tx_burst(rte_mbuf** pkts, uint16_t n) {
  if (steer_ != nullptr && queue_id() == 0) steer_->poll_tx();
  flush_pending();
  if (pending_count_ > 0) return 0;  // the port is still full: nothing new
  if (unlikely(tx_fault().active())) return tx_faulty(pkts, n);
  // A call with nothing to send still reaches the port: PMDs that do deferred work in their
  // tx_burst (completions, a NIC service run inline, as net_cleave's) get to do it.
  if (n == 0) return port_tx(pkts, 0);
  uint16_t i = 0;
  bool merged = false;
  while (i < n) {
    // The longest run the port sends as it is.
    uint16_t run = 0;
    uint32_t offloaded = 0;
    while (run < kRun && i + run < n) {
      bool off = false;
      if (!direct(pkts[i + run], &off)) break;
      offloaded |= off ? 1u << run : 0;
      run++;
    }
    if (run == 0) {
      if (!take_sw(pkts[i])) {
        // The pending ring may be full of frames the port takes now: one more try.
        flush_pending();
        if (!take_sw(pkts[i])) break;
      }
      merged = true;
      i++;
      continue;
    }
    // Merged frames queued before this run go first.
    if (pending_count_ > 0) {
      flush_pending();
      if (pending_count_ > 0) break;
    }
    uint16_t ok = run;
    if (offloaded != 0) ok = rte_eth_tx_prepare(port_id(), 0, pkts + i, run);
    const uint16_t sent = send_run(pkts + i, ok, offloaded);
    i += sent;
    if (sent < ok) break;  // the port is full: the rest stay the caller's
    if (ok < run) {
      // The driver cannot take this one as it is (rte_errno says why): the model merges it.
      bump(Ctr::kTxPrepareFails);
      if (!take_sw(pkts[i])) break;
      merged = true;
      i++;
    }
  }
  flush_pending();
  if (merged) mm::poll_completions(*model_, frames_);
  return i;
}

// With TX faults on, every frame goes through the pending ring (and so the fault stage): plain
// frames as they are, the rest merged by the model; nothing is sent straight to the port.
uint16_t GenericNic::tx_faulty(rte_mbuf** pkts, uint16_t n) {
  uint16_t i = 0;
  for (; i < n; i++) {
    rte_mbuf* m = pkts[i];
    if (m->nb_segs == 1 && mm::tx_flags(m->ol_flags, icrc_mask_, crc32c_mask_) == 0) {
      if (pending_room() == 0) flush_pending();
      if (pending_room() == 0) break;
      to_wire(&m, 1);
      bump(Ctr::kTxPassThrough);
    } else if (!take_sw(m)) {
      flush_pending();
      if (!take_sw(m)) break;
    }
  }
  flush_pending();
  mm::poll_completions(*model_, frames_);
  if (n == 0) port_tx(pkts, 0);  // deferred work of the port, as above
  return i;
}

// ---- commands: rte_pmd_cleave_*'s arguments and errors ----------------------------------------

int GenericNic::mr_add(uint16_t id, void* base, uint64_t len, uint32_t owner, uint8_t access,
                       uint16_t tag) {
  if (id >= bounce_mr_) return -ENOSPC;
  const int r =
      mm::to_errno(model_->mr_add(id, static_cast<uint8_t*>(base), len, owner, access, tag));
  if (r == 0) mrs_.insert(reinterpret_cast<uintptr_t>(base), len, id);  // reserved at open
  return r;
}

int GenericNic::mr_remove(uint16_t id) {
  if (id >= bounce_mr_) return -ENOENT;
  const int r = mm::to_errno(model_->mr_remove(id));
  if (r == 0) mrs_.erase(id);
  return r;
}

// With several queues the flow is steered to this queue by the stage's table (added there first,
// so flow ids stay the port's), and placed by this queue's model, which has one queue.
int GenericNic::flow_add(uint32_t id, const rte_pmd_cleave_flow& flow) {
  nic::FlowSpec s;
  if (!mm::flow_spec(&flow, s)) return -EINVAL;
  s.queue = 0;
  if (steer_ == nullptr) return mm::to_errno(model_->flow_add(id, s));
  nic::FlowSpec steered = s;
  steered.queue = queue_id();
  if (const int r = steer_->flow_add(id, steered); r != 0) return r;
  const int r = mm::to_errno(model_->flow_add(id, s));
  if (r != 0) steer_->flow_remove(id);
  return r;
}

int GenericNic::flow_remove(uint32_t id) {
  const int r = mm::to_errno(model_->flow_remove(id));
  if (r == 0 && steer_ != nullptr) steer_->flow_remove(id);
  return r;
}

int GenericNic::flow_set_mode(uint32_t id, rte_pmd_cleave_flow_mode mode) {
  if (mode != RTE_PMD_CLEAVE_ZERO_COPY && mode != RTE_PMD_CLEAVE_COPY) return -EINVAL;
  return mm::to_errno(model_->flow_set_mode(id, nic::FlowMode(mode)));
}

int GenericNic::ms_post(uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) {
  if (mr >= bounce_mr_) return -ENOENT;
  return mm::to_errno(model_->ms_post(flow, nic::MsDesc{mr, offset, len, msg}));
}

// ---- counters -----------------------------------------------------------------------------------

void GenericNic::for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const {
  for (size_t c = 0; c < size_t(Ctr::kCount); c++)
    f(kCtrNames[c], ctr_[c]);
  for (size_t dir = 0; dir < kFaultDirs; dir++) {
    const auto v = fault_counter_values(fault_[dir].counters());
    for (size_t c = 0; c < kFaultCounterCount; c++)
      f(kFaultCounterNames[dir][c], v[c]);
  }
  // The names net_cleave's xstats give the same model counters and memory.
  std::string name;
  model_->for_each_counter([&](std::string_view n, uint64_t v) {
    name.assign("nic_").append(n);
    f(name, v);
  });
  const nic::MemoryReport r = model_->memory_report();
  for (const nic::MemoryLine& l : r.lines) {
    name.assign("nic_mem_").append(l.name).append("_bytes");
    f(name, l.bytes());
    name.assign("nic_mem_").append(l.name).append("_in_use");
    f(name, l.in_use);
  }
  f("nic_mem_total_bytes", r.total_bytes);
  if (steer_ != nullptr && queue_id() == 0) {
    // The steering stage runs on queue 0: frames it steered to each queue, others' frames sent.
    for (uint16_t q = 0; q < steer_->queues(); q++) {
      name.assign("steer_rx_q").append(std::to_string(q));
      f(name, steer_->steered(q));
    }
    f("steer_tx_frames", steer_->tx_frames());
  }
}

}  // namespace

std::unique_ptr<Nic> open_generic_nic(uint16_t port_id, rte_mempool* pool,
                                      const GenericNicParams& params, const rte_eth_dev_info& info,
                                      NicQueue queue) {
  std::shared_ptr<SoftSteer> steer;
  if (queue.count > 1) {
    const std::string name = "port " + std::to_string(port_id) + " (" + info.driver_name + ")";
    if (info.nb_rx_queues != 1 || info.nb_tx_queues != 1) {
      throw std::runtime_error(name +
                               ": the generic backend steers its queues in software over one "
                               "queue pair: configure the port with one");
    }
    // One stage per port while any of its queues' Nics lives (open_nic runs on the main thread).
    static std::array<std::weak_ptr<SoftSteer>, RTE_MAX_ETHPORTS> ports;
    steer = ports[port_id].lock();
    if (steer == nullptr) {
      steer = std::make_shared<SoftSteer>(port_id, queue.count, params.model.max_flows);
      ports[port_id] = steer;
    } else if (steer->queues() != queue.count) {
      throw std::runtime_error(name + ": opened as " + std::to_string(steer->queues()) +
                               " queues, not " + std::to_string(queue.count));
    }
  }
  return std::make_unique<GenericNic>(port_id, pool, params, info, queue, std::move(steer));
}

}  // namespace cleave::dp
