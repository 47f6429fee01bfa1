// nic.cc - the Nic's common part and open_nic(): which backend serves a port.
#include "nic.h"

#include <rte_errno.h>
#include <rte_ethdev.h>

#include <cerrno>
#include <stdexcept>
#include <string>

#include "common/wire.h"
#include "nic_backends.h"
#include "rte_pmd_cleave.h"

namespace cleave::dp {

Nic::Nic(NicBackend b, uint16_t port_id, NicQueue queue)
    : backend_(b),
      port_id_(port_id),
      queue_(queue),
      placement_offset_(rte_pmd_cleave_placement_offset()) {
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

std::unique_ptr<Nic> open_nic(uint16_t port_id, rte_mempool* pool, const GenericNicParams& params,
                              NicQueue queue) {
  const std::string port = "port " + std::to_string(port_id);
  if (queue.count < 1 || queue.count > kMaxNicQueues || queue.id >= queue.count) {
    throw std::runtime_error(port + ": queue " + std::to_string(queue.id) + " of " +
                             std::to_string(queue.count) + ": want 1 to " +
                             std::to_string(kMaxNicQueues) + " queues and an id below the count");
  }
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
  if (std::string_view(info.driver_name) == "net_cleave") {
    if (info.nb_rx_queues != queue.count) {
      throw std::runtime_error(port + " (net_cleave) has " + std::to_string(info.nb_rx_queues) +
                               " queue pairs configured, not the " + std::to_string(queue.count) +
                               " asked for");
    }
    return open_cleave_nic(port_id, queue);
  }
  return open_generic_nic(port_id, pool, params, info, queue);
}

SoftwareCheck software_check(uint8_t parser) {
  switch (parser) {
    case RTE_PMD_CLEAVE_PARSER_ROCE:
      return [](const uint8_t* ip, uint32_t len) { return wire::roce_icrc_ok(ip, len); };
    default:  // TCP and plain UDP: their checksum is the L4 one; Solar's CRC32C is not here yet
      return nullptr;
  }
}

}  // namespace cleave::dp
