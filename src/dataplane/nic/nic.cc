// nic.cc - the Nic's common part and open_nic(): which backend serves a port.
#include "nic.h"

#include <rte_errno.h>
#include <rte_ethdev.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "nic_backends.h"

namespace cleave::dp {

Nic::Nic(NicBackend b, uint16_t port_id)
    : backend_(b), port_id_(port_id), placement_offset_(rte_pmd_cleave_placement_offset()) {
  if (placement_offset_ < 0) {
    throw std::runtime_error("port " + std::to_string(port_id) +
                             ": cannot register the mbuf dynamic field " +
                             RTE_PMD_CLEAVE_PLACEMENT_DYNFIELD + ": " + rte_strerror(rte_errno));
  }
}

int Nic::set_faults(FaultDir dir, const FaultParams& p) {
  for (double v : {p.loss, p.reorder, p.duplicate}) {
    if (fault_probability_error(v)) return -EINVAL;
  }
  const int r = apply_faults(dir, p);
  if (r == 0) faults_[size_t(dir)] = p;
  return r;
}

std::unique_ptr<Nic> open_nic(uint16_t port_id, rte_mempool* pool, const GenericNicParams& params) {
  const std::string port = "port " + std::to_string(port_id);
  if (!rte_eth_dev_is_valid_port(port_id)) {
    throw std::runtime_error(port + " is not a DPDK port (probed ports: " +
                             std::to_string(rte_eth_dev_count_avail()) + ")");
  }
  rte_eth_dev_info info{};
  if (int r = rte_eth_dev_info_get(port_id, &info); r != 0) {
    throw std::runtime_error(port + ": reading its device info failed: " + rte_strerror(-r));
  }
  if (info.nb_rx_queues == 0 || info.nb_tx_queues == 0) {
    throw std::runtime_error(port + " (" + info.driver_name +
                             ") is not configured: configure it with one RX and one TX queue "
                             "and start it before opening its NIC");
  }
  if (std::string_view(info.driver_name) == "net_cleave") return open_cleave_nic(port_id);
  return open_generic_nic(port_id, pool, params, info);
}

}  // namespace cleave::dp
