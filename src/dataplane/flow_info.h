// flow_info.h - flows and transport bindings as management sees them (no DPDK here).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport.h"

namespace cleave::dp {

// One transport parameter binding, attached by the operator (cleavectl flow attach).
struct FlowBinding {
  uint16_t local_port = 0;  // listeners on this port, and connects to this remote port
  std::string transport;
  std::vector<std::pair<std::string, std::string>> params;
};

// A flow or listener as management sees it.
struct FlowRow {
  uint32_t id = 0;
  uint32_t app = 0;  // 0: none (the app left, or the flow is closing)
  bool listener = false;
  std::string transport;
  transport::FlowTuple tuple;
  std::vector<std::pair<std::string, std::string>> text;  // transport's flow_info
  std::vector<std::pair<std::string, uint64_t>> numbers;
};

// A running transport's counters over all its flows (Transport::stats).
struct TransportStats {
  std::string name;
  std::vector<std::pair<std::string, uint64_t>> numbers;
};

}  // namespace cleave::dp
