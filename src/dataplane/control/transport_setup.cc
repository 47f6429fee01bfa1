// transport_setup.cc - plugins from the configuration loaded, bindings checked (main thread).
#include "control/transport_setup.h"

#include <netinet/in.h>

#include <exception>
#include <memory>
#include <string>
#include <utility>

namespace cleave::dp {

namespace {

std::string registry_names(const transport::Registry& reg) {
  std::string names;
  for (const transport::Registry::Entry& e : reg.entries())
    names += (names.empty() ? "" : ", ") + e.name;
  return names.empty() ? "none" : names;
}

}  // namespace

void reserve_dataplane_traffic(transport::Registry& reg) {
  // Dataplane::rx_ipv4 answers ICMP echo and hands the rest of ICMP to the exception path before
  // it looks at any claim: a transport's claim on it would never see a packet.
  reg.reserve(IPPROTO_ICMP, {}, "the dataplane (ICMP)");
}

std::vector<ConfigError> load_transports(const Config& cfg, transport::Registry& reg) {
  std::vector<ConfigError> errors;
  auto error = [&](const ConfigPos& p, std::string msg) {
    errors.push_back({cfg.source, p.line, p.col, std::move(msg)});
  };
  reserve_dataplane_traffic(reg);
  const auto& plugins = cfg.transports.plugins;
  for (size_t i = 0; i < plugins.size(); i++) {
    try {
      reg.load(plugins[i].path);
    } catch (const std::exception& e) {
      error(plugins[i].pos, "transports.plugins[" + std::to_string(i) + "]: " + e.what());
    }
  }
  const auto& bindings = cfg.transports.bindings;
  for (size_t i = 0; i < bindings.size(); i++) {
    const TransportBinding& b = bindings[i];
    std::string path = "transports.bindings[" + std::to_string(i) + "]";
    std::unique_ptr<transport::Transport> t = reg.create(b.transport);
    if (!t) {
      error(b.transport_pos, path + ".transport: no transport named '" + b.transport + "' (have " +
                                 registry_names(reg) + ")");
      continue;
    }
    if (t->qp_control() != nullptr) {
      error(b.transport_pos, path + ".transport: transport '" + b.transport +
                                 "' makes queue pairs, which apps open by their QP calls: it " +
                                 "takes no bindings");
      continue;
    }
    std::vector<transport::Param> params;
    for (const auto& [key, value] : b.params)
      params.push_back({key, value});
    if (std::string why = t->check_params(params); !why.empty()) {
      error(b.params_pos, path.append(".params: ").append(why));
    }
  }
  return errors;
}

}  // namespace cleave::dp
