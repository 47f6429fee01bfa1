// daemon.h - cleaved's life: lock, EAL, ports, dataplane lcore, management loop, shutdown.
#pragma once

#include "config.h"

namespace cleave::dp {

// Exit codes.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // start-up failed (EAL, ports, another instance...)
inline constexpr int kExitConfig = 2;   // bad configuration or command line

// Runs cleaved on a validated configuration until SIGTERM or SIGINT; returns the exit code.
int run_daemon(const Config& cfg);

}  // namespace cleave::dp
