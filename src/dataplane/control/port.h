// port.h - bringing DPDK ports up for the dataplane and down again (control path, main thread).
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "config.h"
#include "control/management.h"  // NicLcore
#include "lcore/dataplane.h"

namespace cleave::dp {

// The packet buffer pool for all ports, each buffer big enough for the largest MTU unsegmented.
// Throws std::runtime_error on failure.
rte_mempool* create_pool(const Config& cfg);

// Configures `queues` RX and TX queue pairs on an existing port, sets MTU and (optionally) MAC,
// and starts it. Returns the port's MAC. Throws std::runtime_error naming `what` on failure.
Mac setup_port(uint16_t port_id, const char* what, uint16_t mtu, const std::optional<Mac>& mac,
               uint32_t rx_desc, uint32_t tx_desc, rte_mempool* pool, uint16_t queues = 1);

// Finds every configured device (and exception tap) probed by EAL and sets it up.
std::vector<DpPort> start_ports(const Config& cfg, rte_mempool* pool);

// Stops and closes the ports (and taps) in `ports`. Safe on a partial list.
void stop_ports(const std::vector<DpPort>& ports);

// The net_cleave ports' NIC on a service lcore of its own (nic.service_lcore): the DPDK service
// of each is mapped to it before the ports start (a port decides at start who runs its NIC,
// rte_pmd_cleave.h), and the lcore is stopped after they close. Without the key it does nothing,
// and each queue's bursts run the NIC inline. Throws std::runtime_error.
class NicService final : public NicLcore {
 public:
  explicit NicService(const Config& cfg);
  NicService(const NicService&) = delete;
  NicService& operator=(const NicService&) = delete;
  ~NicService();

  bool running() const { return lcore_.has_value(); }
  uint32_t lcore() const override { return lcore_.value_or(0); }
  // Over every port's service so far: TSC cycles in runs that did work (the NIC's busy time,
  // the emulated hardware's; idle runs return -EAGAIN, which DPDK leaves out), and those runs
  // (net_cleave's xstat service_busy_runs). Any thread.
  uint64_t busy_cycles() const override;
  uint64_t busy_runs() const override;

 private:
  void stop();

  std::optional<uint32_t> lcore_;
  std::vector<uint32_t> services_;
  std::vector<uint16_t> ports_;  // their ports
};

}  // namespace cleave::dp
