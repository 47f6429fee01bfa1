// nic_backends.h - the two Nic backends' constructors, for open_nic() and for tests that pick a
// backend themselves (a generic Nic over a port that offloads TX, for instance).
#pragma once

#include <rte_ethdev.h>

#include <memory>

#include "nic.h"

namespace cleave::dp {

// A net_cleave port: bursts and commands are the PMD's.
std::unique_ptr<Nic> open_cleave_nic(uint16_t port_id, NicQueue queue = {});
// Any configured port: split, placement and TX merge in software by the reference model.
// `info` is the port's rte_eth_dev_info.
std::unique_ptr<Nic> open_generic_nic(uint16_t port_id, rte_mempool* pool,
                                      const GenericNicParams& params, const rte_eth_dev_info& info,
                                      NicQueue queue = {});

}  // namespace cleave::dp
