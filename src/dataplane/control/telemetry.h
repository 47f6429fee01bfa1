// telemetry.h - cleaved's commands on the DPDK telemetry socket (dpdk-telemetry.py).
#pragma once

#include "control/management.h"

namespace cleave::dp {

// Registers /cleave/status, /cleave/ports, /cleave/stats and /cleave/nic answering from m.
// Commands cannot be unregistered from DPDK: call with nullptr before m goes away (it waits for
// running callbacks), and they answer with an error from then on.
void register_telemetry(Management* m);

}  // namespace cleave::dp
