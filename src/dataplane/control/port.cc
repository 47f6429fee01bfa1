// port.cc - port configuration: queues, MTU, MAC, start and stop.
#include "control/port.h"

#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "control/eal.h"

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
               uint32_t rx_desc, uint32_t tx_desc, rte_mempool* pool) {
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
  if (int r = rte_eth_dev_configure(port_id, 1, 1, &conf); r != 0) fail(what, "configure", r);
  auto nrx = static_cast<uint16_t>(rx_desc);
  auto ntx = static_cast<uint16_t>(tx_desc);
  if (int r = rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &nrx, &ntx); r != 0) {
    fail(what, "adjusting descriptor counts", r);
  }
  int socket = rte_eth_dev_socket_id(port_id);
  if (int r = rte_eth_rx_queue_setup(port_id, 0, nrx, static_cast<unsigned>(socket), nullptr, pool);
      r != 0) {
    fail(what, "RX queue setup", r);
  }
  if (int r = rte_eth_tx_queue_setup(port_id, 0, ntx, static_cast<unsigned>(socket), nullptr);
      r != 0) {
    fail(what, "TX queue setup", r);
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
      dp.mac = setup_port(dp.port_id, what.c_str(), pc.mtu, pc.mac, cfg.dataplane.rx_descriptors,
                          cfg.dataplane.tx_descriptors, pool);
      if (!pc.exception_tap.empty()) {
        std::string tap_what = what + " exception tap '" + pc.exception_tap + "'";
        dp.exception_port_id = find_port(exception_tap_vdev(i), tap_what);
        // The kernel's interface takes the port's MAC, so what it sends through us is answered
        // to an address we accept.
        setup_port(dp.exception_port_id, tap_what.c_str(), pc.mtu, dp.mac,
                   cfg.dataplane.rx_descriptors, cfg.dataplane.tx_descriptors, pool);
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
