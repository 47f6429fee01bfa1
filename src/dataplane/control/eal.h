// eal.h - DPDK EAL arguments from the configuration, and EAL start-up.
#pragma once

#include <string>
#include <vector>

#include "config.h"

namespace cleave::dp {

// The vdev name cleaved gives the exception tap of port i.
std::string exception_tap_vdev(size_t port_index);
// True for a PCI address such as 0000:3b:00.0 or 3b:00.0 (optionally followed by ,devargs).
bool is_pci_device(const std::string& device);
// The DPDK device name of a device spec: everything before the first ','.
std::string device_name(const std::string& device);

struct EalPlan {
  std::vector<std::string> args;  // argv for rte_eal_init, argv[0] included
  bool hugepages = false;
};

// `hugepages_free` is the number of free hugepages on a mounted hugetlbfs (see
// free_hugepages()); auto mode uses hugepages only when some are free.
EalPlan plan_eal(const Config& cfg, unsigned long hugepages_free);
unsigned long free_hugepages();

// Runs rte_eal_init; throws std::runtime_error with DPDK's reason on failure.
void init_eal(const EalPlan& plan);

}  // namespace cleave::dp
