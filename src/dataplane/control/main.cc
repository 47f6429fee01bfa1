// main.cc - cleaved's command line: pick the configuration, validate it, run the daemon.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>

#include "cleave_version.h"
#include "config.h"
#include "control/daemon.h"
#include "control/transport_setup.h"
#include "registry.h"

namespace {

int run(int argc, char** argv) {
  using namespace cleave::dp;
  CLI::App app{
      "cleaved - the Cleave dataplane daemon.\n\n"
      "Owns the NIC through DPDK, answers ARP and ICMP echo, hands other traffic to an optional\n"
      "kernel exception tap, and serves cleavectl on <runtime_dir>/cleaved.sock. Runs in the\n"
      "foreground (systemd Type=notify); SIGTERM or SIGINT stops it cleanly.\n\n"
      "Exit codes: 0 clean stop, 1 start-up failure, 2 bad configuration or usage.",
      "cleaved"};
  std::string config_path;
  bool check_only = false;
  app.add_option("-c,--config", config_path,
                 std::string("YAML configuration file (default: the embedded configuration, "
                             "installed for reference as ") +
                     CLEAVE_DEFAULT_CONFIG_COPY + ")");
  app.add_flag("--check-config", check_only,
               "validate the configuration, print every error as file:line:col, and exit");
  app.set_version_flag("-V,--version", std::string("cleaved ") + CLEAVE_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitConfig;
  }

  ConfigResult r = config_path.empty() ? parse_config(kDefaultConfigYaml, kDefaultConfigName)
                                       : load_config_file(config_path);
  // Transport plugins are loaded here, on the main thread before EAL and the dataplane, also
  // for --check-config: a plugin that does not load is a configuration error like any other.
  if (r.errors.empty())
    r.errors = load_transports(*r.config, cleave::transport::Registry::global());
  if (!r.errors.empty()) {
    for (const ConfigError& e : r.errors)
      std::fprintf(stderr, "%s\n", e.str().c_str());
    std::fprintf(
        stderr, "cleaved: %zu error(s) in %s; nothing was started\n", r.errors.size(),
        config_path.empty() ? std::string(kDefaultConfigName).c_str() : config_path.c_str());
    return kExitConfig;
  }
  if (check_only) {
    std::printf("%s: configuration is valid\n", r.config->source.c_str());
    return kExitOk;
  }
  return run_daemon(*r.config);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    // run_daemon() handles its own failures; this is the last line of defence.
    std::fprintf(stderr, "cleaved: %s\n", e.what());
    return cleave::dp::kExitFailure;
  } catch (...) {
    std::fprintf(stderr, "cleaved: unexpected internal error\n");
    return cleave::dp::kExitFailure;
  }
}
