// port.cc - port configuration: queues, MTU, MAC, start and stop.
#include "control/port.h"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_service.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>

#include "control/eal.h"
#include "rte_pmd_cleave.h"

namespace cleave::dp {

namespace {

// VLAN tag room, so a tagged full-MTU frame still fits one buffer.
constexpr uint32_t kFrameOverhead = RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + 2 * RTE_VLAN_HLEN;

[[noreturn]] void fail(const char* what, const std::string& step, int ret) {
  throw std::runtime_error(std::string(what) + ": " + step +
                           " failed: " + rte_strerror(ret < 0 ? -ret : ret));
}

}  // namespace

rte_mempool* create_pool(const Config& cfg) {
  uint32_t max_mtu = 0;
  for (const PortConfig& p : cfg.ports)
    max_mtu = std::max<uint32_t>(max_mtu, p.mtu);
  uint32_t room = std::max<uint32_t>(RTE_MBUF_DEFAULT_BUF_SIZE,
                                     RTE_PKTMBUF_HEADROOM + max_mtu + kFrameOverhead);
  room = RTE_ALIGN_CEIL(room, 64);
  rte_mempool* pool = rte_pktmbuf_pool_create("cleave_pkts", cfg.dataplane.mbufs, 256, 0,
                                              static_cast<uint16_t>(room), SOCKET_ID_ANY);
  if (pool == nullptr) {
    throw std::runtime_error("cannot create the packet pool (" +
                             std::to_string(cfg.dataplane.mbufs) + " buffers of " +
                             std::to_string(room) + " bytes): " + rte_strerror(rte_errno) +
                             "; lower dataplane.mbufs or raise eal.memory_mb");
  }
  return pool;
}

Mac setup_port(uint16_t port_id, const char* what, uint16_t mtu, const std::optional<Mac>& mac,
               uint32_t rx_desc, uint32_t tx_desc, rte_mempool* pool, uint16_t queues) {
  rte_eth_dev_info info{};
  if (int r = rte_eth_dev_info_get(port_id, &info); r != 0) fail(what, "reading device info", r);
  // Drivers state a maximum MTU, a maximum frame, or both (af_packet, tap and memif cap
  // their frames at 1518 bytes in DPDK 22.11).
  uint32_t max_mtu = info.max_mtu;
  if (info.max_rx_pktlen > RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN) {
    max_mtu =
        std::min<uint32_t>(max_mtu, info.max_rx_pktlen - RTE_ETHER_HDR_LEN - RTE_ETHER_CRC_LEN);
  }
  if (mtu > max_mtu || mtu < info.min_mtu) {
    throw std::runtime_error(std::string(what) + ": MTU " + std::to_string(mtu) +
                             " is outside what driver " + info.driver_name + " supports (" +
                             std::to_string(info.min_mtu) + "-" + std::to_string(max_mtu) + ")");
  }
  rte_eth_conf conf{};
  conf.rxmode.mtu = mtu;
  if (queues > info.max_rx_queues || queues > info.max_tx_queues) {
    throw std::runtime_error(std::string(what) + ": driver " + info.driver_name + " has " +
                             std::to_string(std::min(info.max_rx_queues, info.max_tx_queues)) +
                             " queue pair(s), " + std::to_string(queues) + " wanted");
  }
  if (int r = rte_eth_dev_configure(port_id, queues, queues, &conf); r != 0) {
    fail(what, "configure", r);
  }
  auto nrx = static_cast<uint16_t>(rx_desc);
  auto ntx = static_cast<uint16_t>(tx_desc);
  if (int r = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nrx, &ntx); r != 0) {
    fail(what, "adjusting descriptor counts", r);
  }
  int socket = rte_eth_dev_socket_id(port_id);
  for (uint16_t q = 0; q < queues; q++) {
    if (int r =
            rte_eth_rx_queue_setup(port_id, q, nrx, static_cast<unsigned>(socket), nullptr, pool);
        r != 0) {
      fail(what, "RX queue setup", r);
    }
    if (int r = rte_eth_tx_queue_setup(port_id, q, ntx, static_cast<unsigned>(socket), nullptr);
        r != 0) {
      fail(what, "TX queue setup", r);
    }
  }
  if (int r = rte_eth_dev_set_mtu(port_id, mtu); r != 0 && r != -ENOTSUP) {
    fail(what, "setting MTU " + std::to_string(mtu), r);
  }
  if (mac) {
    rte_ether_addr a;
    std::memcpy(a.addr_bytes, mac->b.data(), RTE_ETHER_ADDR_LEN);
    if (int r = rte_eth_dev_default_mac_addr_set(port_id, &a); r != 0) {
      fail(what, "setting MAC " + mac->str(), r);
    }
  }
  if (int r = rte_eth_dev_start(port_id); r != 0) fail(what, "start", r);
  rte_ether_addr a;
  if (int r = rte_eth_macaddr_get(port_id, &a); r != 0) fail(what, "reading MAC", r);
  Mac out;
  std::memcpy(out.b.data(), a.addr_bytes, RTE_ETHER_ADDR_LEN);
  return out;
}

namespace {

uint16_t find_port(const std::string& device, const std::string& what) {
  std::string name = device_name(device);
  uint16_t id = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &id) != 0) {
    throw std::runtime_error(what + ": device '" + name +
                             "' did not come up in DPDK; check the device spec and the EAL "
                             "messages above");
  }
  return id;
}

}  // namespace

std::vector<DpPort> start_ports(const Config& cfg, rte_mempool* pool) {
  std::vector<DpPort> ports;
  try {
    for (size_t i = 0; i < cfg.ports.size(); i++) {
      const PortConfig& pc = cfg.ports[i];
      std::string what = "port '" + pc.name + "'";
      DpPort p;
      p.name = pc.name;
      p.ipv4 = pc.ipv4;
      p.mtu = pc.mtu;
      p.faults = pc.faults;
      p.port_id = find_port(pc.device, what);
      ports.push_back(p);  // from here on stop_ports() cleans it up
      DpPort& dp = ports.back();
      // A net_cleave port has a queue pair per shard (its NIC steers frames to them); any other
      // port one, which the generic NIC backend's steering stage splits (nic.h).
      rte_eth_dev_info info{};
      rte_eth_dev_info_get(dp.port_id, &info);
      const bool cleave =
          info.driver_name != nullptr && std::string_view(info.driver_name) == "net_cleave";
      dp.mac = setup_port(dp.port_id, what.c_str(), pc.mtu, pc.mac, cfg.dataplane.rx_descriptors,
                          cfg.dataplane.tx_descriptors, pool,
                          cleave ? uint16_t(cfg.dataplane.lcores.size()) : uint16_t{1});
      if (!pc.exception_tap.empty()) {
        std::string tap_what = what + " exception tap '" + pc.exception_tap + "'";
        dp.exception_port_id = find_port(exception_tap_vdev(i), tap_what);
        // The kernel's interface takes the port's MAC, so what it sends through us is answered
        // to an address we accept.
        setup_port(dp.exception_port_id, tap_what.c_str(), pc.mtu, dp.mac,
                   cfg.dataplane.rx_descriptors, cfg.dataplane.tx_descriptors, pool, 1);
      }
      rte_eth_link link{};
      rte_eth_link_get_nowait(dp.port_id, &link);
      spdlog::info("port {} ({}) up: mac {} mtu {} ipv4 {} link {}{}", pc.name, pc.device,
                   dp.mac.str(), pc.mtu, pc.ipv4.str(), link.link_status ? "up" : "down",
                   pc.exception_tap.empty() ? "" : ", exception tap " + pc.exception_tap);
    }
  } catch (...) {
    stop_ports(ports);
    throw;
  }
  return ports;
}

NicService::NicService(const Config& cfg) {
  if (!cfg.nic.service_lcore) return;
  const uint32_t lcore = cfg.nic.service_lcore->lcore;
  for (const PortConfig& pc : cfg.ports) {
    uint16_t id = 0;
    uint32_t service = 0;
    if (rte_eth_dev_get_port_by_name(device_name(pc.device).c_str(), &id) != 0 ||
        rte_pmd_cleave_service_id(id, &service) != 0) {
      continue;  // not a net_cleave port: the generic backend runs on the shards
    }
    services_.push_back(service);
    ports_.push_back(id);
  }
  if (services_.empty()) {
    spdlog::warn("nic.service_lcore {}: no net_cleave port, so no NIC service to run",
                 cfg.nic.service_lcore->str());
    return;
  }
  if (int r = rte_service_lcore_add(lcore); r != 0) {
    throw std::runtime_error("nic.service_lcore " + cfg.nic.service_lcore->str() +
                             ": cannot make it a service lcore: " + rte_strerror(-r));
  }
  lcore_ = lcore;
  for (uint32_t s : services_) {
    if (rte_service_map_lcore_set(s, lcore, 1) != 0 || rte_service_runstate_set(s, 1) != 0 ||
        rte_service_set_stats_enable(s, 1) != 0) {
      stop();
      throw std::runtime_error("nic.service_lcore: cannot map the NIC service to lcore " +
                               std::to_string(lcore));
    }
  }
  if (int r = rte_service_lcore_start(lcore); r != 0) {
    stop();
    throw std::runtime_error("nic.service_lcore: cannot start lcore " + std::to_string(lcore) +
                             ": " + rte_strerror(-r));
  }
  spdlog::info("NIC service of {} net_cleave port(s) on lcore {}", services_.size(),
               cfg.nic.service_lcore->str());
}

// After the ports closed (their services are unregistered then): rte_service_lcore_stop() does
// not wait for the lcore's runner, rte_eal_wait_lcore() does.
NicService::~NicService() {
  stop();
}

void NicService::stop() {
  if (!lcore_) return;
  for (uint32_t s : services_)
    rte_service_runstate_set(s, 0);
  rte_service_lcore_stop(*lcore_);
  rte_eal_wait_lcore(*lcore_);
  for (uint32_t s : services_)
    rte_service_map_lcore_set(s, *lcore_, 0);
  rte_service_lcore_del(*lcore_);
  lcore_.reset();
}

uint64_t NicService::busy_cycles() const {
  uint64_t sum = 0;
  for (uint32_t s : services_) {
    uint64_t v = 0;
    if (rte_service_attr_get(s, RTE_SERVICE_ATTR_CYCLES, &v) == 0) sum += v;
  }
  return sum;
}

// net_cleave counts them (xstat service_busy_runs): DPDK's call count counts idle runs too.
uint64_t NicService::busy_runs() const {
  uint64_t sum = 0;
  for (uint16_t port : ports_) {
    uint64_t id = 0, v = 0;
    if (rte_eth_xstats_get_id_by_name(port, "service_busy_runs", &id) == 0 &&
        rte_eth_xstats_get_by_id(port, &id, &v, 1) == 1) {
      sum += v;
    }
  }
  return sum;
}

void stop_ports(const std::vector<DpPort>& ports) {
  for (const DpPort& p : ports) {
    for (uint16_t id : {p.port_id, p.exception_port_id}) {
      if (id == kNoPort || !rte_eth_dev_is_valid_port(id)) continue;
      if (int r = rte_eth_dev_stop(id); r != 0) {
        spdlog::warn("port {}: stop failed: {}", p.name, rte_strerror(-r));
      }
      rte_eth_dev_close(id);
    }
  }
}

}  // namespace cleave::dp
