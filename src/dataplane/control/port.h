// port.h - bringing DPDK ports up for the dataplane and down again (control path, main thread).
#pragma once

#include <rte_mempool.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "config.h"
#include "lcore/dataplane.h"

namespace cleave::dp {

// The packet buffer pool for all ports, each buffer big enough for the largest MTU unsegmented.
// Throws std::runtime_error on failure.
rte_mempool* create_pool(const Config& cfg);

// Configures one RX and one TX queue on an existing port, sets MTU and (optionally) MAC, and
// starts it. Returns the port's MAC. Throws std::runtime_error naming `what` on failure.
Mac setup_port(uint16_t port_id, const char* what, uint16_t mtu, const std::optional<Mac>& mac,
               uint32_t rx_desc, uint32_t tx_desc, rte_mempool* pool);

// Finds every configured device (and exception tap) probed by EAL and sets it up.
std::vector<DpPort> start_ports(const Config& cfg, rte_mempool* pool);

// Stops and closes the ports (and taps) in `ports`. Safe on a partial list.
void stop_ports(const std::vector<DpPort>& ports);

}  // namespace cleave::dp
