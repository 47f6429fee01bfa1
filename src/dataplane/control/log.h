// log.h - cleaved's logging: spdlog to stderr, one line per event, journald-friendly.
//
// Under systemd (JOURNAL_STREAM set, or format journald) each line starts with a syslog
// priority "<N>" and carries no timestamp, which journald adds itself. DPDK's own log lines are
// routed into the same logger. Nothing on the data path logs: it counts.
#pragma once

#include <string>
#include <string_view>

#include "config.h"

namespace cleave::dp {

void setup_logging(LogFormat format, std::string_view level);
// Returns false if level is not one of trace, debug, info, warn, error, critical, off.
bool set_log_level(std::string_view level);
std::string log_level();
// Sends DPDK's log stream (EAL, PMDs) to spdlog. Call before rte_eal_init.
void route_dpdk_logs();

}  // namespace cleave::dp
