// eal.cc - turning the configuration into EAL arguments, and hugepage detection.
#include "control/eal.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace cleave::dp {

std::string exception_tap_vdev(size_t port_index) {
  return "net_tap_exc" + std::to_string(port_index);
}

bool is_pci_device(const std::string& device) {
  // [DDDD:]BB:DD.F[,devargs] in hex; the function digit is 0-7.
  std::string_view s = std::string_view(device).substr(0, device.find(','));
  auto hex = [](std::string_view h) {
    return std::all_of(h.begin(), h.end(), [](char c) { return std::isxdigit(uint8_t(c)) != 0; });
  };
  if (s.size() == 12) {
    if (s[4] != ':' || !hex(s.substr(0, 4))) return false;
    s.remove_prefix(5);
  }
  return s.size() == 7 && hex(s.substr(0, 2)) && s[2] == ':' && hex(s.substr(3, 2)) &&
         s[5] == '.' && s[6] >= '0' && s[6] <= '7';
}

std::string device_name(const std::string& device) {
  return device.substr(0, device.find(','));
}

unsigned long free_hugepages() {
  namespace fs = std::filesystem;
  bool mounted = false;
  std::ifstream mounts("/proc/mounts");
  for (std::string dev, dir, type, rest;
       mounts >> dev >> dir >> type && std::getline(mounts, rest);) {
    if (type == "hugetlbfs") mounted = true;
  }
  if (!mounted) return 0;
  unsigned long total = 0;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator("/sys/kernel/mm/hugepages", ec)) {
    std::ifstream f(d.path() / "free_hugepages");
    unsigned long n = 0;
    if (f >> n) total += n;
  }
  return total;
}

EalPlan plan_eal(const Config& cfg, unsigned long hugepages_free) {
  EalPlan plan;
  auto& a = plan.args;
  // Every lcore with the CPU it runs on (EAL's --lcores: lcore@cpu), so several may share one.
  std::string lcores = std::to_string(cfg.eal.main_lcore);
  auto add = [&](const LcoreSpec& l) {
    lcores += "," + std::to_string(l.lcore) + "@" + std::to_string(l.cpu_or_lcore());
  };
  for (const LcoreSpec& l : cfg.dataplane.lcores)
    add(l);
  if (cfg.nic.service_lcore) add(*cfg.nic.service_lcore);
  a = {"cleaved",
       "--lcores",
       lcores,
       "--main-lcore",
       std::to_string(cfg.eal.main_lcore),
       "--file-prefix",
       cfg.eal.file_prefix};
  plan.hugepages = cfg.eal.hugepages == HugepageMode::kOn ||
                   (cfg.eal.hugepages == HugepageMode::kAuto && hugepages_free > 0);
  if (plan.hugepages) {
    a.insert(a.end(), {"--in-memory"});
  } else {
    a.insert(a.end(), {"--no-huge", "--no-shconf", "-m", std::to_string(cfg.eal.memory_mb)});
  }
  if (!cfg.eal.telemetry) a.emplace_back("--no-telemetry");
  bool any_pci = false;
  for (size_t i = 0; i < cfg.ports.size(); i++) {
    const PortConfig& p = cfg.ports[i];
    if (is_pci_device(p.device)) {
      any_pci = true;
      a.insert(a.end(), {"-a", p.device});
    } else {
      a.insert(a.end(), {"--vdev", p.device});
    }
    if (!p.exception_tap.empty()) {
      a.insert(a.end(), {"--vdev", exception_tap_vdev(i) + ",iface=" + p.exception_tap});
    }
  }
  if (!any_pci) a.emplace_back("--no-pci");
  a.insert(a.end(), cfg.eal.args.begin(), cfg.eal.args.end());
  return plan;
}

void init_eal(const EalPlan& plan) {
  // rte_eal_init may permute argv; give it copies it can keep for the life of the process.
  static std::vector<std::string> storage;
  static std::vector<char*> argv;
  storage = plan.args;
  argv.clear();
  for (std::string& s : storage)
    argv.push_back(s.data());
  argv.push_back(nullptr);
  if (rte_eal_init(static_cast<int>(storage.size()), argv.data()) < 0) {
    throw std::runtime_error(
        "DPDK EAL initialisation failed: " + std::string(rte_strerror(rte_errno)) +
        " (see the EAL messages above)");
  }
}

}  // namespace cleave::dp
