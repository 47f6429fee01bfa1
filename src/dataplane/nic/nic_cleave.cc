// nic_cleave.cc - the cleave backend: a net_cleave port's bursts and rte_pmd_cleave_* commands.
//
// The header-split NIC does the work; this only forwards. Bursts use the Nic's queue; flows
// added through it are steered there; counters are the port's xstats by name, the model's as
// nic_*. With several queues, the queues' Nics share the port's MR table and count which queues
// added each id (nic.h, mr_add).
#include <rte_ethdev.h>

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "nic_backends.h"

namespace cleave::dp {
namespace {

// A multi-queue port's MR ids: which queues added each, with what. Commands run on the queues'
// lcores, so it is locked (control path only).
struct PortMrs {
  struct Mr {
    void* base;
    uint64_t len;
    uint32_t owner;
    uint8_t access;
    uint16_t tag;
    uint32_t queues;  // bit q: queue q added it
  };
  std::mutex lock;
  std::map<uint16_t, Mr> mrs;
};

class CleaveNic final : public Nic {
 public:
  CleaveNic(uint16_t port, NicQueue queue, std::shared_ptr<PortMrs> mrs)
      : Nic(NicBackend::kCleave, port, queue), mrs_(std::move(mrs)) {}

  uint16_t rx_burst(rte_mbuf** pkts, uint16_t n) override {
    return rte_eth_rx_burst(port_id(), queue_id(), pkts, n);
  }
  uint16_t tx_burst(rte_mbuf** pkts, uint16_t n) override {
    return rte_eth_tx_burst(port_id(), queue_id(), pkts, n);
  }

  int mr_add(uint16_t id, void* base, uint64_t len, uint32_t owner, uint8_t access,
             uint16_t tag) override {
    if (mrs_ == nullptr)
      return rte_pmd_cleave_mr_add_remote(port_id(), id, base, len, owner, access, tag);
    const uint32_t bit = 1u << queue_id();
    std::lock_guard<std::mutex> g(mrs_->lock);
    auto it = mrs_->mrs.find(id);
    if (it != mrs_->mrs.end()) {
      PortMrs::Mr& m = it->second;
      if ((m.queues & bit) != 0 || m.base != base || m.len != len || m.owner != owner ||
          m.access != access || m.tag != tag) {
        return -EEXIST;
      }
      m.queues |= bit;
      return 0;
    }
    const int r = rte_pmd_cleave_mr_add_remote(port_id(), id, base, len, owner, access, tag);
    if (r == 0) mrs_->mrs[id] = {base, len, owner, access, tag, bit};
    return r;
  }
  int mr_remove(uint16_t id) override {
    if (mrs_ == nullptr) return rte_pmd_cleave_mr_remove(port_id(), id);
    const uint32_t bit = 1u << queue_id();
    std::lock_guard<std::mutex> g(mrs_->lock);
    auto it = mrs_->mrs.find(id);
    if (it == mrs_->mrs.end() || (it->second.queues & bit) == 0) return -ENOENT;
    if (it->second.queues != bit) {
      it->second.queues &= ~bit;
      return 0;
    }
    const int r = rte_pmd_cleave_mr_remove(port_id(), id);
    if (r == 0) mrs_->mrs.erase(it);
    return r;
  }
  int flow_add(uint32_t id, const rte_pmd_cleave_flow& flow) override {
    rte_pmd_cleave_flow f = flow;
    f.queue = queue_id();
    return rte_pmd_cleave_flow_add(port_id(), id, &f);
  }
  int flow_remove(uint32_t id) override { return rte_pmd_cleave_flow_remove(port_id(), id); }
  int flow_set_mode(uint32_t id, rte_pmd_cleave_flow_mode mode) override {
    return rte_pmd_cleave_flow_set_mode(port_id(), id, mode);
  }
  int ms_post(uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override {
    return rte_pmd_cleave_ms_post(port_id(), flow, mr, offset, len, msg);
  }
  int cursor_update(uint32_t flow, uint32_t cursor) override {
    return rte_pmd_cleave_post_cursor_update(port_id(), queue_id(), flow, cursor);
  }
  int ms_retire(uint32_t flow, uint32_t count) override {
    return rte_pmd_cleave_post_ms_retire(port_id(), queue_id(), flow, count);
  }
  int ms_retire_msg(uint32_t flow, uint32_t msg) override {
    return rte_pmd_cleave_post_ms_retire_msg(port_id(), queue_id(), flow, msg);
  }
  int roce_resync(uint32_t flow, uint32_t psn, uint32_t next_msg) override {
    return rte_pmd_cleave_roce_resync(port_id(), flow, psn, next_msg);
  }
  int read_post(uint32_t flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) override {
    return rte_pmd_cleave_read_post(port_id(), flow, psn, mr, offset, len);
  }
  int read_retire(uint32_t flow, uint32_t psn) override {
    return rte_pmd_cleave_read_retire(port_id(), flow, psn);
  }
  int rkey_check(uint32_t flow, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access,
                 uint16_t* mr) override {
    return rte_pmd_cleave_rkey_check(port_id(), flow, rkey, va, len, access, mr);
  }

  int irq_bind(int fd) override { return rte_pmd_cleave_irq_bind(port_id(), fd); }
  int irq_unbind(uint32_t vector) override { return rte_pmd_cleave_irq_unbind(port_id(), vector); }
  int irq_raise(uint32_t vector) override {
    return rte_pmd_cleave_post_irq(port_id(), queue_id(), vector);
  }

  int apply_faults(FaultDir dir, const FaultParams& p) override {
    const rte_pmd_cleave_fault f{p.loss, p.reorder, p.duplicate, p.seed};
    return rte_pmd_cleave_fault_set(port_id(), rte_pmd_cleave_fault_dir(dir), &f);
  }

  void for_each_counter(const std::function<void(std::string_view, uint64_t)>& f) const override {
    const int n = rte_eth_xstats_get_names(port_id(), nullptr, 0);
    if (n <= 0) return;
    std::vector<rte_eth_xstat_name> names(static_cast<size_t>(n));
    std::vector<rte_eth_xstat> values(static_cast<size_t>(n));
    const int got_names = rte_eth_xstats_get_names(port_id(), names.data(), unsigned(n));
    const int got = rte_eth_xstats_get(port_id(), values.data(), unsigned(n));
    if (got_names != n || got != n) return;  // the set changed in between: skip this read
    for (const rte_eth_xstat& x : values) {
      if (x.id < names.size()) f(names[x.id].name, x.value);
    }
  }

 private:
  std::shared_ptr<PortMrs> mrs_;  // null with one queue: the PMD's table alone
};

}  // namespace

std::unique_ptr<Nic> open_cleave_nic(uint16_t port_id, NicQueue queue) {
  // A command that only a net_cleave port answers with anything but -ENODEV.
  if (rte_pmd_cleave_flow_add(port_id, 0, nullptr) == -ENODEV) {
    throw std::runtime_error("port " + std::to_string(port_id) +
                             " is not a net_cleave port: the cleave NIC backend needs one");
  }
  std::shared_ptr<PortMrs> mrs;
  if (queue.count > 1) {
    // One per port while any of its queues' Nics lives (open_nic runs on the main thread).
    static std::array<std::weak_ptr<PortMrs>, RTE_MAX_ETHPORTS> ports;
    mrs = ports[port_id].lock();
    if (mrs == nullptr) {
      mrs = std::make_shared<PortMrs>();
      ports[port_id] = mrs;
    }
  }
  return std::make_unique<CleaveNic>(port_id, queue, std::move(mrs));
}

}  // namespace cleave::dp
