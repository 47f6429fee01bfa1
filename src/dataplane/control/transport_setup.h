// transport_setup.h - the configuration's `transports:` section before anything starts: plugins
// loaded into the registry, bindings checked against the transports they name.
//
// Main thread only, before the dataplane starts: the registry is read-only once it runs. cleaved
// calls this for --check-config too, so a file that checks is one that starts.
#pragma once

#include <vector>

#include "config.h"
#include "registry.h"

namespace cleave::dp {

// Keeps in `reg` the traffic the dataplane handles itself, before any transport's claim
// (Registry::reserve): a plugin claiming it is refused. Throws as reserve() does when a
// transport holds it.
void reserve_dataplane_traffic(transport::Registry& reg);

// Reserves the dataplane's traffic (above), loads cfg.transports.plugins into `reg` in order,
// then checks every binding: its transport exists and accepts its params
// (Transport::check_params). Each problem is a ConfigError at the file position of the entry
// that caused it; an empty result means the section is usable.
std::vector<ConfigError> load_transports(const Config& cfg, transport::Registry& reg);

}  // namespace cleave::dp
