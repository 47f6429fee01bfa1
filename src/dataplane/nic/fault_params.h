// fault_params.h - what a seeded wire fault stage does to one direction of a port (no DPDK).
//
// Shared by the configuration, management and both NIC backends; the stage itself is fault.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace cleave::dp {

enum class FaultDir : uint8_t { kRx = 0, kTx = 1 };
inline constexpr unsigned kFaultDirs = 2;

// Probabilities per frame, each in [0, 1]. A frame held back for reordering is released after
// kFaultReorderGap later frames of the same direction, or at the next poll that finds the line
// idle. Corruption is deliberately absent: the NIC computes and checks checksums behind the
// stage, so a corrupted frame would be caught by nothing that tests the transport.
struct FaultParams {
  double loss = 0;
  double reorder = 0;
  double duplicate = 0;
  uint64_t seed = 1;

  bool enabled() const { return loss > 0 || reorder > 0 || duplicate > 0; }
  bool operator==(const FaultParams&) const = default;
};

inline constexpr uint32_t kFaultReorderGap = 3;

// Counters of one direction's stage.
struct FaultCounters {
  uint64_t dropped = 0;     // frames lost
  uint64_t reordered = 0;   // frames held back and sent after later ones
  uint64_t duplicated = 0;  // extra copies sent
};

// Counter names, the same on both backends (net_cleave's xstats, the generic backend's counters),
// and the values in that order.
inline constexpr const char* kFaultCounterNames[kFaultDirs][3] = {
    {"fault_rx_dropped", "fault_rx_reordered", "fault_rx_duplicated"},
    {"fault_tx_dropped", "fault_tx_reordered", "fault_tx_duplicated"},
};
inline constexpr size_t kFaultCounterCount = 3;
inline std::array<uint64_t, kFaultCounterCount> fault_counter_values(const FaultCounters& c) {
  return {c.dropped, c.reordered, c.duplicated};
}

// Checks a probability given by an operator: a message saying why it is refused, or nothing.
inline std::optional<std::string> fault_probability_error(double p) {
  if (!(p >= 0 && p <= 1)) return std::string("expected a probability from 0 to 1");
  return std::nullopt;
}

// The seed of one direction's generator: the port's seed, mixed so RX and TX differ.
inline uint64_t fault_dir_seed(uint64_t seed, FaultDir dir) {
  return seed * 2 + (dir == FaultDir::kTx ? 1 : 0);
}

}  // namespace cleave::dp
