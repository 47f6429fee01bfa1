// net_cleave.cc - the net_cleave PMD's control path: vdev probe, ethdev ops, the private API.
//
// The device is the NIC reference model (hw/fpga/model) over a wire port named in the devargs.
// Everything here runs on control threads; commands take Device::lock, which the data path
// (net_cleave_datapath.cc) only trylocks.
#include <bus_vdev_driver.h>
#include <ethdev_driver.h>
#include <ethdev_vdev.h>
#include <fcntl.h>
#include <rte_errno.h>
#include <rte_flow.h>
#include <rte_flow_driver.h>
#include <rte_kvargs.h>
#include <rte_log.h>
#include <rte_malloc.h>
#include <rte_mbuf_dyn.h>
#include <rte_pause.h>
#include <rte_service.h>
#include <rte_service_component.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "net_cleave.h"

// An rte_flow rule of net_cleave: the flow-table entry it installed.
struct rte_flow {
  uint32_t id;
};

namespace cleave::pmd {

int g_logtype = -1;
int g_placement_offset = -1;
uint64_t g_icrc_mask = 0;
uint64_t g_crc32c_mask = 0;

namespace {

// rte_flow masks are byte patterns, padding included (zero-initialised on both sides): compare
// them as bytes.
bool same_bytes(const void* a, const void* b, size_t n) {
  return std::memcmp(a, b, n) == 0;
}

#define CL_LOG(level, ...) rte_log(RTE_LOG_##level, g_logtype, "net_cleave: " __VA_ARGS__)

// The private API's values are the model's: both are generated from hw/fpga/spec/nic_spec.py.
static_assert(sizeof(struct rte_pmd_cleave_placement) == 32 &&
              alignof(struct rte_pmd_cleave_placement) == 4);
static_assert(nic::kMaxFrags <= RTE_PMD_CLEAVE_F_NFRAGS_MASK);
// API version 3 put `queue` where version 2 had two reserved bytes: the layout is unchanged.
static_assert(sizeof(struct rte_pmd_cleave_flow) == 48 &&
              offsetof(struct rte_pmd_cleave_flow, queue) == 18 &&
              offsetof(struct rte_pmd_cleave_flow, initial_seq) == 20);

// dev_private: a pointer to the C++ state, and the MAC (ethdev points mac_addrs at it).
struct Priv {
  Device* dev;
  rte_ether_addr mac;
};

constexpr const char* kArgWire = "wire";
constexpr const char* kArgMaxFlows = "max_flows";
constexpr const char* kArgMaxMrs = "max_mrs";
constexpr const char* kArgMsCommitted = "ms_committed";
constexpr const char* kArgMsStore = "ms_store";
constexpr const char* kArgTxMbufs = "tx_mbufs";
constexpr const char* kArgWireArgs = "wire_args";
const char* const kValidArgs[] = {kArgWire,    kArgMaxFlows, kArgMaxMrs, kArgMsCommitted,
                                  kArgMsStore, kArgTxMbufs,  nullptr};

constexpr const char* kPmdCtrNames[] = {
    "rx_headers",    "rx_wire_bytes",   "tx_wire_frames",    "tx_wire_bytes",   "tx_errors",
    "rx_linearized", "tx_pass_through", "tx_zero_copy",      "tx_bounce",       "tx_wire_full",
    "service_runs",  "service_inline",  "service_busy_runs", "posted_commands", "irqs",
    "irq_errors",
};
static_assert(std::size(kPmdCtrNames) == size_t(PmdCtr::kCount));
constexpr size_t kMemLines = std::tuple_size_v<decltype(nic::MemoryReport::lines)>;
constexpr size_t kXstats = size_t(PmdCtr::kCount) + dp::kFaultDirs * dp::kFaultCounterCount +
                           nic::kCounterCount + kMemLines * 2 + 1;

extern const eth_dev_ops g_ops;

Device* dev_of(rte_eth_dev* eth) {
  return static_cast<Priv*>(eth->data->dev_private)->dev;
}

Device* cleave_port(uint16_t port) {
  if (!rte_eth_dev_is_valid_port(port)) return nullptr;
  rte_eth_dev* eth = &rte_eth_devices[port];
  if (eth->dev_ops != &g_ops || eth->data->dev_private == nullptr) return nullptr;
  return dev_of(eth);
}

using model_mbuf::to_errno;

// Runs a command on the port's model under the lock the service also takes, after the commands
// posted before it.
template <typename F>
int command(uint16_t port, F&& f) {
  Device* d = cleave_port(port);
  if (d == nullptr) return -ENODEV;
  lock_model(*d);
  const int r = f(*d);
  rte_spinlock_unlock(&d->lock);
  return r;
}

// Queues a command on `queue`'s ring for the lock's next holder (one thread posts to a queue:
// single producer); runs it at once when the ring is full.
int post(uint16_t port, uint16_t queue, PostedCmd::Op op, uint32_t flow, uint32_t arg) {
  Device* d = cleave_port(port);
  if (d == nullptr) return -ENODEV;
  if (queue >= d->nb_queues) return -EINVAL;
  PostedCmd c{op, flow, arg, 0};
  if (rte_ring_sp_enqueue_elem(d->posted[queue], &c, sizeof c) == 0) return 0;
  lock_model(*d);  // applies this thread's earlier posts first: the order holds
  run_posted(*d, c);
  rte_spinlock_unlock(&d->lock);
  return 0;
}

// Names rings and pools per instance, not per port: a frame pool left behind with frames in
// flight must not block the next device on the same port id.
uint32_t next_instance() {
  static uint32_t instances = 0;
  return instances++;
}

void release_frame_pool(Device& d) {
  if (d.tx_pool == nullptr) return;
  // Frames still on the wire or held by the peer point into the pool: leave it then.
  const unsigned in_use = rte_mempool_in_use_count(d.tx_pool);
  if (in_use == 0) {
    rte_mempool_free(d.tx_pool);
  } else {
    CL_LOG(WARNING, "port %u: %u frames still in flight; their pool is not freed\n", d.port_id,
           in_use);
  }
  d.tx_pool = nullptr;
  d.tx_room = 0;
}

// The pool the model merges frames into, sized for the MTU: made at configure, remade when the
// MTU grows past it (port stopped).
int size_frame_pool(Device& d, uint16_t mtu) {
  const uint32_t room = uint32_t(mtu) + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN + RTE_VLAN_HLEN;
  if (d.tx_pool != nullptr && d.tx_room >= room) {
    rte_spinlock_lock(&d.lock);
    d.max_frame = room;
    rte_spinlock_unlock(&d.lock);
    return 0;
  }
  if (d.started) {
    CL_LOG(ERR, "port %u: stop the port to raise the MTU to %u\n", d.port_id, mtu);
    return -EBUSY;
  }
  release_frame_pool(d);
  char n[RTE_MEMPOOL_NAMESIZE];
  std::snprintf(n, sizeof n, "cleave_fr_%u", next_instance());
  const unsigned cache = std::min<unsigned>(128, d.tx_mbufs / 2);  // at most n / 1.5
  d.tx_pool = rte_pktmbuf_pool_create(n, d.tx_mbufs, cache, 0,
                                      uint16_t(RTE_PKTMBUF_HEADROOM + room), d.socket);
  if (d.tx_pool == nullptr) {
    CL_LOG(ERR, "port %u: frame pool of %u mbufs of %u bytes: %s\n", d.port_id, d.tx_mbufs, room,
           rte_strerror(rte_errno));
    return -ENOMEM;
  }
  d.tx_room = rte_pktmbuf_data_room_size(d.tx_pool) - RTE_PKTMBUF_HEADROOM;
  d.max_frame = room;
  return 0;
}

// ---- ethdev ops ---------------------------------------------------------------------------

int dev_infos_get(rte_eth_dev* eth, rte_eth_dev_info* info) {
  (void)eth;
  info->max_mac_addrs = 1;
  info->max_rx_queues = kMaxQueues;
  info->max_tx_queues = kMaxQueues;
  // RSS as the model steers (rte_pmd_cleave.h): Toeplitz over the IPv4 TCP/UDP 4-tuple.
  info->flow_type_rss_offloads = RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP;
  info->hash_key_size = uint8_t(rss::kKeyBytes);
  info->reta_size = uint16_t(rss::kRetaSize);
  info->min_mtu = RTE_ETHER_MIN_MTU;
  info->max_mtu = nic::kMaxMtu;
  info->max_rx_pktlen = nic::kMaxMtu + RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
  info->min_rx_bufsize = 0;
  info->rx_offload_capa = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_TCP_CKSUM |
                          RTE_ETH_RX_OFFLOAD_UDP_CKSUM | RTE_ETH_RX_OFFLOAD_SCATTER;
  info->tx_offload_capa = RTE_ETH_TX_OFFLOAD_MULTI_SEGS | RTE_ETH_TX_OFFLOAD_TCP_TSO |
                          RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_TCP_CKSUM |
                          RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
  info->rx_desc_lim = {
      .nb_max = kRingSize, .nb_min = 1, .nb_align = 1, .nb_seg_max = 0, .nb_mtu_seg_max = 0};
  info->tx_desc_lim = info->rx_desc_lim;
  info->default_rxportconf.ring_size = 512;
  info->default_txportconf.ring_size = 512;
  info->default_rxportconf.burst_size = kBurst;
  info->default_txportconf.burst_size = kBurst;
  info->speed_capa = RTE_ETH_LINK_SPEED_FIXED;
  return 0;
}

int dev_configure(rte_eth_dev* eth) {
  Device& d = *dev_of(eth);
  rte_eth_dev_data* data = eth->data;
  const uint16_t nq = data->nb_rx_queues;
  if (nq < 1 || nq > kMaxQueues || data->nb_tx_queues != nq) {
    CL_LOG(ERR, "port %u: as many TX queues as RX queues, 1 to %u (asked %u/%u)\n", d.port_id,
           kMaxQueues, data->nb_rx_queues, data->nb_tx_queues);
    return -EINVAL;
  }
  const rte_eth_rss_conf& rc = data->dev_conf.rx_adv_conf.rss_conf;
  if (rc.rss_key != nullptr && rc.rss_key_len != rss::kKeyBytes) {
    CL_LOG(ERR, "port %u: an RSS key of %zu bytes, not %u\n", d.port_id, rss::kKeyBytes,
           rc.rss_key_len);
    return -EINVAL;
  }
  lock_model(d);
  nic::Err qr = d.model->rx_queues_set(nq);
  if (qr == nic::Err::kOk && rc.rss_key != nullptr) {
    rss::Key key;
    std::memcpy(key.data(), rc.rss_key, key.size());
    qr = d.model->rss_set(key, d.model->reta());
  }
  if (qr == nic::Err::kOk) d.nb_queues = nq;
  rte_spinlock_unlock(&d.lock);
  if (qr != nic::Err::kOk) {
    CL_LOG(ERR, "port %u: %u queues: a flow names a queue beyond them\n", d.port_id, nq);
    return -EINVAL;
  }
  rte_eth_dev_info winfo{};
  if (int r = rte_eth_dev_info_get(d.wire_port, &winfo); r != 0) return r;
  rte_eth_conf wc{};
  wc.rxmode.mtu = data->mtu;
  // The wire carries plain frames; the NIC itself does split, checksums and TSO.
  wc.txmode.offloads = winfo.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  wc.rxmode.offloads = winfo.rx_offload_capa & RTE_ETH_RX_OFFLOAD_SCATTER;
  rte_eth_dev_stop(d.wire_port);
  if (int r = rte_eth_dev_configure(d.wire_port, 1, 1, &wc); r != 0) {
    CL_LOG(ERR, "port %u: configuring wire port %u failed: %s\n", d.port_id, d.wire_port,
           rte_strerror(-r));
    return r;
  }
  if (int r = rte_eth_dev_set_mtu(d.wire_port, data->mtu); r != 0 && r != -ENOTSUP) {
    CL_LOG(ERR, "port %u: wire MTU %u: %s\n", d.port_id, data->mtu, rte_strerror(-r));
    return r;
  }
  return size_frame_pool(d, data->mtu);
}

int mtu_set(rte_eth_dev* eth, uint16_t mtu) {
  Device& d = *dev_of(eth);
  if (int r = size_frame_pool(d, mtu); r != 0) return r;
  const int r = rte_eth_dev_set_mtu(d.wire_port, mtu);
  return r == -ENOTSUP ? 0 : r;
}

int rx_queue_setup(rte_eth_dev* eth, uint16_t qid, uint16_t nb_desc, unsigned socket,
                   const rte_eth_rxconf* conf, rte_mempool* mp) {
  (void)conf;
  Device& d = *dev_of(eth);
  if (qid >= d.nb_queues || mp == nullptr || nb_desc > kRingSize) return -EINVAL;
  eth->data->rx_queues[qid] = &d.rxq[qid];
  if (qid != 0) return 0;  // the wire's one RX queue takes queue 0's pool
  uint16_t nrx = nb_desc;
  uint16_t ntx = d.nb_tx_desc != 0 ? d.nb_tx_desc : nb_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(d.wire_port, &nrx, &ntx);
  if (int r = rte_eth_rx_queue_setup(d.wire_port, 0, nrx, socket, nullptr, mp); r != 0) {
    CL_LOG(ERR, "port %u: wire RX queue: %s\n", d.port_id, rte_strerror(-r));
    return r;
  }
  d.rx_mp = mp;
  d.nb_rx_desc = nb_desc;
  return 0;
}

int tx_queue_setup(rte_eth_dev* eth, uint16_t qid, uint16_t nb_desc, unsigned socket,
                   const rte_eth_txconf* conf) {
  (void)conf;
  Device& d = *dev_of(eth);
  if (qid >= d.nb_queues || nb_desc > kRingSize) return -EINVAL;
  eth->data->tx_queues[qid] = &d.txq[qid];
  if (qid != 0) return 0;  // the service merges every queue onto the wire's one TX queue
  uint16_t nrx = d.nb_rx_desc != 0 ? d.nb_rx_desc : nb_desc;
  uint16_t ntx = nb_desc;
  rte_eth_dev_adjust_nb_rx_tx_desc(d.wire_port, &nrx, &ntx);
  if (int r = rte_eth_tx_queue_setup(d.wire_port, 0, ntx, socket, nullptr); r != 0) {
    CL_LOG(ERR, "port %u: wire TX queue: %s\n", d.port_id, rte_strerror(-r));
    return r;
  }
  d.nb_tx_desc = nb_desc;
  return 0;
}

int link_update(rte_eth_dev* eth, int wait) {
  (void)wait;
  Device& d = *dev_of(eth);
  rte_eth_link link{};
  if (d.started) rte_eth_link_get_nowait(d.wire_port, &link);
  link.link_status = d.started ? link.link_status : RTE_ETH_LINK_DOWN;
  return rte_eth_linkstatus_set(eth, &link);
}

int dev_start(rte_eth_dev* eth) {
  Device& d = *dev_of(eth);
  for (uint16_t q = 0; q < d.nb_queues; q++) {
    if (eth->data->rx_queues[q] == nullptr || eth->data->tx_queues[q] == nullptr) return -EINVAL;
  }
  if (d.tx_pool == nullptr) return -EINVAL;
  if (int r = rte_eth_dev_start(d.wire_port); r != 0) {
    CL_LOG(ERR, "port %u: starting wire port %u: %s\n", d.port_id, d.wire_port, rte_strerror(-r));
    return r;
  }
  rte_spinlock_lock(&d.lock);
  d.started = true;
  rte_spinlock_unlock(&d.lock);
  rte_service_component_runstate_set(d.service_id, 1);
  // Once per start, not per burst: whether a service lcore runs the NIC (rte_pmd_cleave.h).
  d.inline_mode = rte_service_runstate_get(d.service_id) != 1;
  for (uint16_t q = 0; q < d.nb_queues; q++) {
    eth->data->rx_queue_state[q] = RTE_ETH_QUEUE_STATE_STARTED;
    eth->data->tx_queue_state[q] = RTE_ETH_QUEUE_STATE_STARTED;
  }
  link_update(eth, 0);
  return 0;
}

int dev_stop(rte_eth_dev* eth) {
  Device& d = *dev_of(eth);
  rte_service_component_runstate_set(d.service_id, 0);
  while (rte_service_may_be_active(d.service_id) == 1)
    rte_pause();
  lock_model(d);
  d.started = false;
  drain_locked(d);
  rte_spinlock_unlock(&d.lock);
  if (rte_eth_dev_is_valid_port(d.wire_port)) rte_eth_dev_stop(d.wire_port);
  for (uint16_t q = 0; q < d.nb_queues; q++) {
    eth->data->rx_queue_state[q] = RTE_ETH_QUEUE_STATE_STOPPED;
    eth->data->tx_queue_state[q] = RTE_ETH_QUEUE_STATE_STOPPED;
  }
  link_update(eth, 0);
  return 0;
}

void destroy(Device* d) {
  service_release(d->port_id);  // no service run holds d from here on
  if (d->service_registered) {
    rte_service_component_runstate_set(d->service_id, 0);
    while (rte_service_may_be_active(d->service_id) == 1)
      rte_pause();
    rte_service_component_unregister(d->service_id);
  }
  drain_locked(*d);
  for (size_t q = 0; q < kMaxQueues; q++) {
    rte_ring_free(d->rxq[q].ring);
    rte_ring_free(d->txq[q].ring);
  }
  for (rte_ring* r : d->posted)
    rte_ring_free(r);
  for (int fd : d->irq_fd) {
    if (fd >= 0) close(fd);
  }
  release_frame_pool(*d);
  for (rte_flow* f : d->rules)
    delete f;
  // A wire probed by this port goes with it. Closed, not uninit: the vdev bus may be walking its
  // device list right now (EAL cleanup), and the wire's own remove copes with a closed port.
  if (d->own_wire && rte_eth_dev_is_valid_port(d->wire_port)) {
    rte_eth_dev_stop(d->wire_port);
    rte_eth_dev_close(d->wire_port);
  }
  delete d;
}

int dev_close(rte_eth_dev* eth) {
  if (rte_eal_process_type() != RTE_PROC_PRIMARY) return 0;
  auto* p = static_cast<Priv*>(eth->data->dev_private);
  if (p == nullptr || p->dev == nullptr) return 0;
  if (p->dev->started) dev_stop(eth);
  destroy(p->dev);
  p->dev = nullptr;
  eth->data->mac_addrs = nullptr;  // part of dev_private
  return 0;
}

int stats_get(rte_eth_dev* eth, rte_eth_stats* st) {
  Device& d = *dev_of(eth);
  rte_spinlock_lock(&d.lock);
  st->ipackets = d.value(PmdCtr::kRxPackets);
  st->ibytes = d.value(PmdCtr::kRxBytes);
  st->opackets = d.value(PmdCtr::kTxPackets);
  st->obytes = d.value(PmdCtr::kTxBytes);
  st->oerrors = d.value(PmdCtr::kTxErrors);
  // Per queue: headers handed to each RX queue (and their wire bytes), descriptors taken from
  // each TX queue (the wire's frames are counted for the port: TSO makes several of one).
  const uint16_t nq = std::min<uint16_t>(d.nb_queues, RTE_ETHDEV_QUEUE_STAT_CNTRS);
  for (uint16_t q = 0; q < nq; q++) {
    st->q_ipackets[q] = d.rxq_packets[q] - d.rxq_base[q];
    st->q_ibytes[q] = d.rxq_bytes[q] - d.rxq_bytes_base[q];
    st->q_opackets[q] = d.txq_packets[q] - d.txq_base[q];
  }
  rte_spinlock_unlock(&d.lock);
  return 0;
}

int stats_reset(rte_eth_dev* eth) {
  Device& d = *dev_of(eth);
  rte_spinlock_lock(&d.lock);
  d.ctr_base = d.ctr;
  d.rxq_base = d.rxq_packets;
  d.rxq_bytes_base = d.rxq_bytes;
  d.txq_base = d.txq_packets;
  rte_spinlock_unlock(&d.lock);
  return 0;
}

int xstats_get_names(rte_eth_dev* eth, rte_eth_xstat_name* names, unsigned size) {
  (void)eth;
  if (names == nullptr || size < kXstats) return int(kXstats);
  size_t i = 0;
  auto put = [&](const char* prefix, std::string_view a, const char* suffix) {
    std::snprintf(names[i++].name, RTE_ETH_XSTATS_NAME_SIZE, "%s%.*s%s", prefix, int(a.size()),
                  a.data(), suffix);
  };
  for (const char* n : kPmdCtrNames)
    put("", n, "");
  for (const auto& dir : dp::kFaultCounterNames) {
    for (const char* n : dir)
      put("", n, "");
  }
  for (size_t c = 0; c < nic::kCounterCount; c++)
    put("nic_", nic::NicModel::counter_name(c), "");
  const nic::MemoryReport r = dev_of(eth)->model->memory_report();
  for (const nic::MemoryLine& l : r.lines) {
    put("nic_mem_", l.name, "_bytes");
    put("nic_mem_", l.name, "_in_use");
  }
  put("", "nic_mem_total_bytes", "");
  return int(i);
}

int xstats_get(rte_eth_dev* eth, rte_eth_xstat* xs, unsigned n) {
  if (xs == nullptr || n < kXstats) return int(kXstats);
  Device& d = *dev_of(eth);
  size_t i = 0;
  auto put = [&](uint64_t v) {
    xs[i].id = i;
    xs[i].value = v;
    i++;
  };
  lock_model(d);
  for (size_t c = 0; c < size_t(PmdCtr::kCount); c++)
    put(d.value(PmdCtr(c)));
  for (size_t dir = 0; dir < dp::kFaultDirs; dir++) {
    const auto now = dp::fault_counter_values(d.fault[dir].counters());
    const auto base = dp::fault_counter_values(d.fault_base[dir]);
    for (size_t c = 0; c < dp::kFaultCounterCount; c++)
      put(now[c] - base[c]);
  }
  size_t c = 0;
  d.model->for_each_counter([&](std::string_view, uint64_t v) {
    put(v - d.model_base[c]);
    c++;
  });
  const nic::MemoryReport r = d.model->memory_report();
  rte_spinlock_unlock(&d.lock);
  for (const nic::MemoryLine& l : r.lines) {
    put(l.bytes());
    put(l.in_use);
  }
  put(r.total_bytes);
  return int(i);
}

int xstats_reset(rte_eth_dev* eth) {
  Device& d = *dev_of(eth);
  lock_model(d);
  d.ctr_base = d.ctr;
  for (size_t dir = 0; dir < dp::kFaultDirs; dir++)
    d.fault_base[dir] = d.fault[dir].counters();
  size_t c = 0;
  d.model->for_each_counter([&](std::string_view, uint64_t v) { d.model_base[c++] = v; });
  rte_spinlock_unlock(&d.lock);
  return 0;
}

// The MAC is the NIC's (ethdev stores it in Priv::mac on success); the wire takes it too where it
// can, so a tap's kernel side or a veth sees the same address. The NIC filters nothing by MAC.
int mac_addr_set(rte_eth_dev* eth, rte_ether_addr* addr) {
  const int r = rte_eth_dev_default_mac_addr_set(dev_of(eth)->wire_port, addr);
  return r == -ENOTSUP ? 0 : r;
}

// Promiscuous and all-multicast are the wire's: the NIC itself filters nothing by MAC.
int promisc_on(rte_eth_dev* eth) {
  const int r = rte_eth_promiscuous_enable(dev_of(eth)->wire_port);
  return r == -ENOTSUP ? 0 : r;
}
int promisc_off(rte_eth_dev* eth) {
  const int r = rte_eth_promiscuous_disable(dev_of(eth)->wire_port);
  return r == -ENOTSUP ? 0 : r;
}
int allmulti_on(rte_eth_dev* eth) {
  const int r = rte_eth_allmulticast_enable(dev_of(eth)->wire_port);
  return r == -ENOTSUP ? 0 : r;
}
int allmulti_off(rte_eth_dev* eth) {
  const int r = rte_eth_allmulticast_disable(dev_of(eth)->wire_port);
  return r == -ENOTSUP ? 0 : r;
}

// ---- RSS: the model's key and RETA through the standard ethdev calls ----------------------

int rss_hash_update(rte_eth_dev* eth, rte_eth_rss_conf* conf) {
  Device& d = *dev_of(eth);
  if (conf->rss_key != nullptr && conf->rss_key_len != rss::kKeyBytes) return -EINVAL;
  if ((conf->rss_hf & ~(RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP)) != 0) {
    return -ENOTSUP;
  }
  if (conf->rss_key == nullptr) return 0;
  rss::Key key;
  std::memcpy(key.data(), conf->rss_key, key.size());
  return command(d.port_id,
                 [&](Device& dv) { return to_errno(dv.model->rss_set(key, dv.model->reta())); });
}

int rss_hash_conf_get(rte_eth_dev* eth, rte_eth_rss_conf* conf) {
  Device& d = *dev_of(eth);
  conf->rss_hf = RTE_ETH_RSS_NONFRAG_IPV4_TCP | RTE_ETH_RSS_NONFRAG_IPV4_UDP;
  if (conf->rss_key == nullptr) return 0;
  if (conf->rss_key_len < rss::kKeyBytes) return -EINVAL;
  conf->rss_key_len = uint8_t(rss::kKeyBytes);
  return command(d.port_id, [&](Device& dv) {
    std::memcpy(conf->rss_key, dv.model->rss_key().data(), rss::kKeyBytes);
    return 0;
  });
}

// RETA entries in groups of 64 (RTE_ETH_RETA_GROUP_SIZE), each with a mask of those it sets.
int reta_update(rte_eth_dev* eth, rte_eth_rss_reta_entry64* conf, uint16_t size) {
  Device& d = *dev_of(eth);
  if (size != rss::kRetaSize) return -EINVAL;
  return command(d.port_id, [&](Device& dv) {
    rss::Reta reta = dv.model->reta();
    for (uint32_t i = 0; i < rss::kRetaSize; i++) {
      const rte_eth_rss_reta_entry64& g = conf[i / RTE_ETH_RETA_GROUP_SIZE];
      if ((g.mask >> (i % RTE_ETH_RETA_GROUP_SIZE) & 1) != 0) {
        reta[i] = g.reta[i % RTE_ETH_RETA_GROUP_SIZE];
      }
    }
    return to_errno(dv.model->rss_set(dv.model->rss_key(), reta));
  });
}

int reta_query(rte_eth_dev* eth, rte_eth_rss_reta_entry64* conf, uint16_t size) {
  Device& d = *dev_of(eth);
  if (size != rss::kRetaSize) return -EINVAL;
  return command(d.port_id, [&](Device& dv) {
    const rss::Reta& reta = dv.model->reta();
    for (uint32_t i = 0; i < rss::kRetaSize; i++) {
      rte_eth_rss_reta_entry64& g = conf[i / RTE_ETH_RETA_GROUP_SIZE];
      if ((g.mask >> (i % RTE_ETH_RETA_GROUP_SIZE) & 1) != 0) {
        g.reta[i % RTE_ETH_RETA_GROUP_SIZE] = reta[i];
      }
    }
    return 0;
  });
}

// ---- rte_flow: classification with MARK --------------------------------------------------
//
// A rule ETH / IPV4 (src, dst) / TCP or UDP (ports) with MARK id [+ QUEUE q] installs flow `id`
// in copy mode, its frames on RX queue q (0 without QUEUE): they arrive whole with the flow id
// in the placement field and as the
// MARK (RTE_MBUF_F_RX_FDIR_ID, hash.fdir.hi). Zero-copy placement needs sequence state rte_flow
// cannot carry: use rte_pmd_cleave_flow_add() for that (or switch the mode of a rule's flow
// once its cursor is right). A UDP rule is a plain UDP flow, on 4791 (7000) too: there it
// catches the RoCE (Solar) frames of the QPs (connections) without a flow of their own.

// rte_flow.h's default masks are C only; these are the same (addresses and ports, exactly).
const rte_flow_item_ipv4 kIpv4Mask = [] {
  rte_flow_item_ipv4 m{};
  m.hdr.src_addr = UINT32_MAX;
  m.hdr.dst_addr = UINT32_MAX;
  return m;
}();
const rte_flow_item_tcp kTcpMask = [] {
  rte_flow_item_tcp m{};
  m.hdr.src_port = UINT16_MAX;
  m.hdr.dst_port = UINT16_MAX;
  return m;
}();
const rte_flow_item_udp kUdpMask = [] {
  rte_flow_item_udp m{};
  m.hdr.src_port = UINT16_MAX;
  m.hdr.dst_port = UINT16_MAX;
  return m;
}();

int flow_error(rte_flow_error* e, int code, rte_flow_error_type type, const void* cause,
               const char* msg) {
  return rte_flow_error_set(e, code, type, cause, msg);
}

int parse_rule(const rte_flow_attr* attr, const rte_flow_item* items,
               const rte_flow_action* actions, uint16_t queues, nic::FlowSpec* spec, uint32_t* id,
               rte_flow_error* e) {
  if (attr == nullptr || items == nullptr || actions == nullptr) {
    return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_UNSPECIFIED, nullptr, "missing arguments");
  }
  if (attr->egress != 0 || attr->transfer != 0 || attr->ingress == 0 || attr->group != 0) {
    return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ATTR, attr, "ingress rules in group 0 only");
  }
  *spec = {};
  spec->mode = nic::FlowMode::kCopy;
  bool ip = false, l4 = false;
  for (const rte_flow_item* it = items; it->type != RTE_FLOW_ITEM_TYPE_END; it++) {
    if (it->last != nullptr) {
      return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM, it, "ranges are not supported");
    }
    switch (it->type) {
      case RTE_FLOW_ITEM_TYPE_VOID:
        break;
      case RTE_FLOW_ITEM_TYPE_ETH: {
        static const rte_flow_item_eth zero{};
        if (it->mask != nullptr && !same_bytes(it->mask, &zero, sizeof zero)) {
          return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM_MASK, it,
                            "Ethernet fields are not matched");
        }
        break;
      }
      case RTE_FLOW_ITEM_TYPE_IPV4: {
        const auto* v = static_cast<const rte_flow_item_ipv4*>(it->spec);
        const auto* m =
            it->mask != nullptr ? static_cast<const rte_flow_item_ipv4*>(it->mask) : &kIpv4Mask;
        if (v == nullptr || !same_bytes(m, &kIpv4Mask, sizeof *m)) {
          return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM, it,
                            "IPv4: source and destination addresses exactly, nothing else");
        }
        spec->key.src_ip = rte_be_to_cpu_32(v->hdr.src_addr);
        spec->key.dst_ip = rte_be_to_cpu_32(v->hdr.dst_addr);
        ip = true;
        break;
      }
      case RTE_FLOW_ITEM_TYPE_TCP: {
        const auto* v = static_cast<const rte_flow_item_tcp*>(it->spec);
        const auto* m =
            it->mask != nullptr ? static_cast<const rte_flow_item_tcp*>(it->mask) : &kTcpMask;
        if (v == nullptr || !same_bytes(m, &kTcpMask, sizeof *m)) {
          return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM, it,
                            "TCP: both ports exactly, nothing else");
        }
        spec->key.proto = 6;
        spec->key.src_port = rte_be_to_cpu_16(v->hdr.src_port);
        spec->key.dst_port = rte_be_to_cpu_16(v->hdr.dst_port);
        spec->parser = nic::Parser::kTcp;
        l4 = true;
        break;
      }
      case RTE_FLOW_ITEM_TYPE_UDP: {
        const auto* v = static_cast<const rte_flow_item_udp*>(it->spec);
        const auto* m =
            it->mask != nullptr ? static_cast<const rte_flow_item_udp*>(it->mask) : &kUdpMask;
        rte_flow_item_udp any_src = kUdpMask;
        any_src.hdr.src_port = 0;
        if (v == nullptr ||
            (!same_bytes(m, &kUdpMask, sizeof *m) && !same_bytes(m, &any_src, sizeof *m))) {
          return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM, it,
                            "UDP destination port exactly, source port exactly or not at all");
        }
        spec->key.proto = 17;
        spec->key.src_port = m->hdr.src_port != 0 ? rte_be_to_cpu_16(v->hdr.src_port) : 0;
        spec->key.dst_port = rte_be_to_cpu_16(v->hdr.dst_port);
        // A RoCE flow is one QP, and rte_flow has no item for the BTH's DestQP (nor for a Solar
        // connection number): a rule on port 4791 (7000) catches, as a plain UDP flow, the RoCE
        // (Solar) frames of every QP (connection) not added as a flow.
        spec->parser = nic::Parser::kUdp;
        spec->reliable = false;
        l4 = true;
        break;
      }
      default:
        return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ITEM, it,
                          "pattern: ETH / IPV4 / TCP or UDP only");
    }
  }
  if (!ip || !l4) {
    return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_ITEM_NUM, items,
                      "the pattern needs IPV4 and TCP or UDP");
  }
  bool mark = false;
  for (const rte_flow_action* a = actions; a->type != RTE_FLOW_ACTION_TYPE_END; a++) {
    switch (a->type) {
      case RTE_FLOW_ACTION_TYPE_VOID:
        break;
      case RTE_FLOW_ACTION_TYPE_MARK:
        if (a->conf == nullptr) {
          return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_ACTION_CONF, a, "MARK needs an id");
        }
        *id = static_cast<const rte_flow_action_mark*>(a->conf)->id;
        mark = true;
        break;
      case RTE_FLOW_ACTION_TYPE_QUEUE:
        if (a->conf == nullptr ||
            static_cast<const rte_flow_action_queue*>(a->conf)->index >= queues) {
          return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_ACTION_CONF, a,
                            "QUEUE: an index below the port's RX queue count");
        }
        spec->queue = static_cast<const rte_flow_action_queue*>(a->conf)->index;
        break;
      default:
        return flow_error(e, ENOTSUP, RTE_FLOW_ERROR_TYPE_ACTION, a,
                          "actions: MARK (the flow id) and QUEUE only");
    }
  }
  if (!mark) {
    return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_ACTION_NUM, actions,
                      "MARK carries the flow id and is required");
  }
  return 0;
}

int flow_validate(rte_eth_dev* eth, const rte_flow_attr* attr, const rte_flow_item items[],
                  const rte_flow_action actions[], rte_flow_error* e) {
  nic::FlowSpec spec;
  uint32_t id = 0;
  return parse_rule(attr, items, actions, eth->data->nb_rx_queues, &spec, &id, e);
}

rte_flow* flow_create(rte_eth_dev* eth, const rte_flow_attr* attr, const rte_flow_item items[],
                      const rte_flow_action actions[], rte_flow_error* e) {
  Device& d = *dev_of(eth);
  nic::FlowSpec spec;
  uint32_t id = 0;
  if (parse_rule(attr, items, actions, eth->data->nb_rx_queues, &spec, &id, e) != 0) return nullptr;
  auto* f = new (std::nothrow) rte_flow{id};
  if (f == nullptr) {
    flow_error(e, ENOMEM, RTE_FLOW_ERROR_TYPE_HANDLE, nullptr, "no memory for the handle");
    return nullptr;
  }
  lock_model(d);
  const nic::Err r = d.model->flow_add(id, spec);
  rte_spinlock_unlock(&d.lock);
  if (r != nic::Err::kOk) {
    delete f;
    flow_error(e, -to_errno(r), RTE_FLOW_ERROR_TYPE_ACTION, nullptr,
               r == nic::Err::kFlowExists ? "the MARK id is in use" : "the flow table refused it");
    return nullptr;
  }
  d.rules.push_back(f);
  return f;
}

int flow_destroy(rte_eth_dev* eth, rte_flow* f, rte_flow_error* e) {
  Device& d = *dev_of(eth);
  auto it = std::find(d.rules.begin(), d.rules.end(), f);
  if (it == d.rules.end()) {
    return flow_error(e, EINVAL, RTE_FLOW_ERROR_TYPE_HANDLE, f, "not a rule of this port");
  }
  lock_model(d);
  d.model->flow_remove(f->id);
  rte_spinlock_unlock(&d.lock);
  d.rules.erase(it);
  delete f;
  return 0;
}

int flow_flush(rte_eth_dev* eth, rte_flow_error* e) {
  Device& d = *dev_of(eth);
  while (!d.rules.empty()) {
    if (int r = flow_destroy(eth, d.rules.back(), e); r != 0) return r;
  }
  return 0;
}

rte_flow_ops make_flow_ops() {
  rte_flow_ops o{};
  o.validate = flow_validate;
  o.create = flow_create;
  o.destroy = flow_destroy;
  o.flush = flow_flush;
  return o;
}

const rte_flow_ops g_flow_ops = make_flow_ops();

int flow_ops_get(rte_eth_dev* eth, const rte_flow_ops** ops) {
  (void)eth;
  *ops = &g_flow_ops;
  return 0;
}

eth_dev_ops make_ops() {
  eth_dev_ops o{};
  o.dev_configure = dev_configure;
  o.dev_start = dev_start;
  o.dev_stop = dev_stop;
  o.dev_close = dev_close;
  o.mac_addr_set = mac_addr_set;
  o.promiscuous_enable = promisc_on;
  o.promiscuous_disable = promisc_off;
  o.allmulticast_enable = allmulti_on;
  o.allmulticast_disable = allmulti_off;
  o.link_update = link_update;
  o.stats_get = stats_get;
  o.stats_reset = stats_reset;
  o.xstats_get = xstats_get;
  o.xstats_reset = xstats_reset;
  o.xstats_get_names = xstats_get_names;
  o.dev_infos_get = dev_infos_get;
  o.mtu_set = mtu_set;
  o.rx_queue_setup = rx_queue_setup;
  o.tx_queue_setup = tx_queue_setup;
  o.flow_ops_get = flow_ops_get;
  o.rss_hash_update = rss_hash_update;
  o.rss_hash_conf_get = rss_hash_conf_get;
  o.reta_update = reta_update;
  o.reta_query = reta_query;
  return o;
}

const eth_dev_ops g_ops = make_ops();

// ---- probe and remove ---------------------------------------------------------------------

struct Args {
  std::string wire;
  std::string wire_args;  // devargs when net_cleave probes the wire itself
  nic::NicConfig cfg;
  uint32_t tx_mbufs = 4095;
};

int parse_u32(const char* key, const char* value, void* out) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(value, &end, 0);
  if (errno != 0 || end == value || *end != '\0' || v == 0 || v > UINT32_MAX) {
    CL_LOG(ERR, "devarg %s=%s: want a positive integer\n", key, value);
    return -EINVAL;
  }
  *static_cast<uint32_t*>(out) = uint32_t(v);
  return 0;
}

int parse_str(const char* key, const char* value, void* out) {
  (void)key;
  *static_cast<std::string*>(out) = value;
  return 0;
}

int parse_args(const char* name, const char* params, Args& a) {
  // wire_args=... is last and takes the rest verbatim: the wire's own devargs have commas and
  // '=' that rte_kvargs cannot nest.
  std::string own = params != nullptr ? params : "";
  const std::string key = std::string(kArgWireArgs) + "=";
  size_t at = own.rfind(key, 0) == 0 ? 0 : own.find("," + key);
  if (at != std::string::npos) {
    const size_t value = at == 0 ? key.size() : at + 1 + key.size();
    a.wire_args = own.substr(value);
    own.erase(at);
  }
  rte_kvargs* kv = rte_kvargs_parse(own.c_str(), kValidArgs);
  if (kv == nullptr) {
    CL_LOG(ERR,
           "%s: cannot parse devargs '%s'; known: wire=<ethdev name>, max_flows, max_mrs, "
           "ms_committed, ms_store, tx_mbufs, and last wire_args=<the wire's devargs>\n",
           name, params != nullptr ? params : "");
    return -EINVAL;
  }
  uint32_t max_mrs = a.cfg.max_mrs - 1;
  int r = rte_kvargs_process(kv, kArgWire, parse_str, &a.wire);
  if (r == 0) r = rte_kvargs_process(kv, kArgMaxFlows, parse_u32, &a.cfg.max_flows);
  if (r == 0) r = rte_kvargs_process(kv, kArgMaxMrs, parse_u32, &max_mrs);
  if (r == 0) r = rte_kvargs_process(kv, kArgMsCommitted, parse_u32, &a.cfg.ms_committed_per_flow);
  if (r == 0) r = rte_kvargs_process(kv, kArgMsStore, parse_u32, &a.cfg.ms_store_entries);
  if (r == 0) r = rte_kvargs_process(kv, kArgTxMbufs, parse_u32, &a.tx_mbufs);
  rte_kvargs_free(kv);
  if (r != 0) return -EINVAL;
  if (max_mrs >= UINT16_MAX) {
    CL_LOG(ERR, "%s: max_mrs=%u: at most %u\n", name, max_mrs, UINT16_MAX - 1);
    return -EINVAL;
  }
  a.cfg.max_mrs = max_mrs + 1;  // one more: the PMD's bounce MR
  if (a.wire.empty()) {
    CL_LOG(ERR,
           "%s: devargs need wire=<ethdev name>, an already-probed port that carries the "
           "frames (e.g. net_cleave0,wire=net_ring0)\n",
           name);
    return -EINVAL;
  }
  return 0;
}

int probe(rte_vdev_device* vdev) {
  const char* name = rte_vdev_device_name(vdev);
  if (rte_eal_process_type() != RTE_PROC_PRIMARY) {
    CL_LOG(ERR, "%s: secondary processes are not supported\n", name);
    return -ENOTSUP;
  }
  Args a;
  if (int r = parse_args(name, rte_vdev_device_args(vdev), a); r != 0) return r;
  uint16_t wire = 0;
  bool own_wire = false;
  if (rte_eth_dev_get_port_by_name(a.wire.c_str(), &wire) != 0) {
    // Not probed yet: probe it as a vdev of our own (so one --vdev, or one cleaved port entry,
    // brings up both). It is closed with this port.
    const int r =
        rte_vdev_init(a.wire.c_str(), a.wire_args.empty() ? nullptr : a.wire_args.c_str());
    if (r == 0 && rte_eth_dev_get_port_by_name(a.wire.c_str(), &wire) == 0) {
      own_wire = true;
    } else {
      if (r == 0) rte_vdev_uninit(a.wire.c_str());
      CL_LOG(ERR,
             "%s: wire port '%s' not found, and no vdev driver probes it: name a port probed "
             "before (an earlier --vdev, rte_eth_from_rings(), ...) or a vdev, with its devargs "
             "in wire_args=... (last)\n",
             name, a.wire.c_str());
      return -ENODEV;
    }
  }
  uint16_t p = 0;
  RTE_ETH_FOREACH_DEV(p) {
    Device* other = cleave_port(p);
    if (p == wire && other != nullptr) {
      CL_LOG(ERR, "%s: wire '%s' is itself a net_cleave port\n", name, a.wire.c_str());
      return -EINVAL;
    }
    if (other != nullptr && other->wire_port == wire) {
      CL_LOG(ERR, "%s: wire '%s' already belongs to net_cleave port %u\n", name, a.wire.c_str(), p);
      return -EBUSY;
    }
  }
  g_placement_offset = rte_pmd_cleave_placement_offset();
  if (g_placement_offset < 0) {
    CL_LOG(ERR, "%s: registering the mbuf dynamic field: %s\n", name, rte_strerror(rte_errno));
    if (own_wire) rte_eth_dev_close(wire);
    return -rte_errno;
  }

  if (const int bit = rte_pmd_cleave_tx_icrc_bit(); bit >= 0) {
    g_icrc_mask = uint64_t(1) << bit;
  } else {
    CL_LOG(ERR, "%s: registering the ICRC TX flag: %s\n", name, rte_strerror(rte_errno));
    if (own_wire) rte_eth_dev_close(wire);
    return -rte_errno;
  }
  if (const int bit = rte_pmd_cleave_tx_crc32c_bit(); bit >= 0) {
    g_crc32c_mask = uint64_t(1) << bit;
  } else {
    CL_LOG(ERR, "%s: registering the CRC32C TX flag: %s\n", name, rte_strerror(rte_errno));
    if (own_wire) rte_eth_dev_close(wire);
    return -rte_errno;
  }

  rte_eth_dev* eth = rte_eth_vdev_allocate(vdev, sizeof(Priv));
  if (eth == nullptr) {
    CL_LOG(ERR, "%s: cannot allocate an ethdev\n", name);
    if (own_wire) rte_eth_dev_close(wire);
    return -ENOMEM;
  }
  auto* priv = static_cast<Priv*>(eth->data->dev_private);
  Device* d = new (std::nothrow) Device;
  int err = -ENOMEM;
  if (d == nullptr) goto fail;
  priv->dev = d;
  d->port_id = eth->data->port_id;
  d->irq_fd.fill(-1);
  d->wire_port = wire;
  d->own_wire = own_wire;
  d->socket = eth->data->numa_node;
  d->cfg = a.cfg;
  d->tx_mbufs = a.tx_mbufs;
  d->bounce_mr = uint16_t(a.cfg.max_mrs - 1);
  try {
    d->model = std::make_unique<nic::NicModel>(a.cfg);
    d->bounce.resize(kBounceBytes);
    d->rx_flat.resize(kMaxFrame);
    d->mr_ranges.reserve(a.cfg.max_mrs);
    d->pending.resize(kPendingFrames);
    d->pending_len.resize(kPendingFrames);
    d->frames.resize(model_mbuf::kMaxTxFrames);
  } catch (const std::bad_alloc&) {
    CL_LOG(ERR, "%s: not enough memory for the NIC model\n", name);
    goto fail;
  }
  if (d->model->mr_add(d->bounce_mr, d->bounce.data(), d->bounce.size(), 0) != nic::Err::kOk) {
    err = -EINVAL;
    goto fail;
  }
  for (uint16_t q = 0; q < kMaxQueues; q++) {
    char n[RTE_RING_NAMESIZE];
    std::snprintf(n, sizeof n, "cleave_rx_%u", next_instance());
    d->rxq[q] = {d, q, rte_ring_create(n, kRingSize, eth->data->numa_node, RING_F_EXACT_SZ)};
    std::snprintf(n, sizeof n, "cleave_tx_%u", next_instance());
    d->txq[q] = {d, q, rte_ring_create(n, kRingSize, eth->data->numa_node, RING_F_EXACT_SZ)};
    if (d->rxq[q].ring == nullptr || d->txq[q].ring == nullptr) {
      CL_LOG(ERR, "%s: rings: %s\n", name, rte_strerror(rte_errno));
      goto fail;
    }
  }
  for (rte_ring*& r : d->posted) {
    char n[RTE_RING_NAMESIZE];
    std::snprintf(n, sizeof n, "cleave_cmd_%u", next_instance());
    r = rte_ring_create_elem(n, sizeof(PostedCmd), kPostedCmds, eth->data->numa_node,
                             RING_F_SP_ENQ | RING_F_SC_DEQ | RING_F_EXACT_SZ);
    if (r == nullptr) {
      CL_LOG(ERR, "%s: command rings: %s\n", name, rte_strerror(rte_errno));
      goto fail;
    }
  }
  {
    rte_service_spec spec{};
    std::snprintf(spec.name, sizeof spec.name, "net_cleave_%u", d->port_id);
    spec.callback = service_run;
    service_slot(d->port_id).dev.store(d);
    spec.callback_userdata = &service_slot(d->port_id);
    spec.socket_id = eth->data->numa_node;
    if (int r = rte_service_component_register(&spec, &d->service_id); r != 0) {
      CL_LOG(ERR, "%s: registering the NIC service: %s\n", name, rte_strerror(-r));
      err = r;
      goto fail;
    }
    d->service_registered = true;
    rte_service_component_runstate_set(d->service_id, 0);
  }

  rte_eth_macaddr_get(wire, &priv->mac);
  eth->data->mac_addrs = &priv->mac;
  eth->data->dev_link.link_status = RTE_ETH_LINK_DOWN;
  eth->data->dev_link.link_speed = RTE_ETH_SPEED_NUM_10G;
  eth->data->dev_link.link_duplex = RTE_ETH_LINK_FULL_DUPLEX;
  eth->dev_ops = &g_ops;
  eth->rx_pkt_burst = rx_burst;
  eth->tx_pkt_burst = tx_burst;
  rte_eth_dev_probing_finish(eth);
  CL_LOG(INFO, "%s: port %u over wire %s (port %u), NIC memory %" PRIu64 " bytes, service %u\n",
         name, d->port_id, a.wire.c_str(), wire, d->model->memory_report().total_bytes,
         d->service_id);
  return 0;

fail:
  if (d != nullptr) {
    destroy(d);  // closes a wire of its own
  } else if (own_wire) {
    rte_eth_dev_close(wire);
  }
  priv->dev = nullptr;
  rte_eth_dev_release_port(eth);
  return err;
}

int remove(rte_vdev_device* vdev) {
  rte_eth_dev* eth = rte_eth_dev_allocated(rte_vdev_device_name(vdev));
  if (eth == nullptr) return 0;  // already closed and released
  dev_close(eth);
  rte_eth_dev_release_port(eth);
  return 0;
}

rte_vdev_driver g_driver = {.next = {}, .driver = {}, .probe = probe, .remove = remove};

}  // namespace
}  // namespace cleave::pmd

namespace cleave::pmd {
RTE_PMD_REGISTER_VDEV(net_cleave, g_driver);
RTE_PMD_REGISTER_PARAM_STRING(net_cleave,
                              "wire=<ethdev name> max_flows=<int> max_mrs=<int> "
                              "ms_committed=<int> ms_store=<int> tx_mbufs=<int> "
                              "wire_args=<the wire's devargs, last>");
RTE_INIT(net_cleave_log_init) {
  g_logtype = rte_log_register_type_and_pick_level("pmd.net.cleave", RTE_LOG_NOTICE);
  if (g_logtype < 0) g_logtype = RTE_LOGTYPE_PMD;
}
}  // namespace cleave::pmd

using cleave::model_mbuf::to_errno;
using cleave::pmd::command;
using cleave::pmd::Device;
using cleave::pmd::kIrqVectors;
using cleave::pmd::post;
using cleave::pmd::PostedCmd;
namespace nic = cleave::nic;
namespace dp = cleave::dp;

// ---- the private API (rte_pmd_cleave.h) -----------------------------------------------------

int rte_pmd_cleave_placement_offset(void) {
  rte_mbuf_dynfield desc{};
  std::snprintf(desc.name, sizeof desc.name, "%s", RTE_PMD_CLEAVE_PLACEMENT_DYNFIELD);
  desc.size = sizeof(struct rte_pmd_cleave_placement);
  desc.align = alignof(struct rte_pmd_cleave_placement);
  return rte_mbuf_dynfield_register(&desc);
}

int rte_pmd_cleave_tx_icrc_bit(void) {
  rte_mbuf_dynflag desc{};
  std::snprintf(desc.name, sizeof desc.name, "%s", RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG);
  return rte_mbuf_dynflag_register(&desc);
}

int rte_pmd_cleave_tx_crc32c_bit(void) {
  rte_mbuf_dynflag desc{};
  std::snprintf(desc.name, sizeof desc.name, "%s", RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG);
  return rte_mbuf_dynflag_register(&desc);
}

int rte_pmd_cleave_mr_add(uint16_t port, uint16_t id, void* base, uint64_t len, uint32_t owner) {
  return rte_pmd_cleave_mr_add_remote(port, id, base, len, owner, 0, 0);
}

int rte_pmd_cleave_mr_add_remote(uint16_t port, uint16_t id, void* base, uint64_t len,
                                 uint32_t owner, uint8_t access, uint16_t tag) {
  return command(port, [&](Device& d) {
    if (id >= d.bounce_mr) return -ENOSPC;
    const int r =
        to_errno(d.model->mr_add(id, static_cast<uint8_t*>(base), len, owner, access, tag));
    if (r == 0) d.mr_ranges.insert(reinterpret_cast<uintptr_t>(base), len, id);  // reserved
    return r;
  });
}

int rte_pmd_cleave_mr_remove(uint16_t port, uint16_t id) {
  return command(port, [&](Device& d) {
    if (id >= d.bounce_mr) return -ENOENT;
    const int r = to_errno(d.model->mr_remove(id));
    if (r == 0) d.mr_ranges.erase(id);
    return r;
  });
}

int rte_pmd_cleave_flow_add(uint16_t port, uint32_t id, const struct rte_pmd_cleave_flow* flow) {
  nic::FlowSpec s;
  if (!cleave::model_mbuf::flow_spec(flow, s)) {
    return cleave::pmd::cleave_port(port) == nullptr ? -ENODEV : -EINVAL;
  }
  return command(port, [&](Device& d) { return to_errno(d.model->flow_add(id, s)); });
}

int rte_pmd_cleave_flow_remove(uint16_t port, uint32_t id) {
  return command(port, [&](Device& d) { return to_errno(d.model->flow_remove(id)); });
}

int rte_pmd_cleave_flow_set_mode(uint16_t port, uint32_t id, enum rte_pmd_cleave_flow_mode mode) {
  if (mode != RTE_PMD_CLEAVE_ZERO_COPY && mode != RTE_PMD_CLEAVE_COPY) return -EINVAL;
  return command(
      port, [&](Device& d) { return to_errno(d.model->flow_set_mode(id, nic::FlowMode(mode))); });
}

int rte_pmd_cleave_ms_post(uint16_t port, uint32_t flow, uint16_t mr, uint64_t offset, uint32_t len,
                           uint32_t msg) {
  return command(port, [&](Device& d) {
    if (mr >= d.bounce_mr) return -ENOENT;
    return to_errno(d.model->ms_post(flow, nic::MsDesc{mr, offset, len, msg}));
  });
}

int rte_pmd_cleave_cursor_update(uint16_t port, uint32_t flow, uint32_t cursor) {
  return command(port, [&](Device& d) { return to_errno(d.model->cursor_update(flow, cursor)); });
}

int rte_pmd_cleave_ms_retire(uint16_t port, uint32_t flow, uint32_t count) {
  return command(port, [&](Device& d) { return to_errno(d.model->ms_retire(flow, count)); });
}

int rte_pmd_cleave_ms_retire_msg(uint16_t port, uint32_t flow, uint32_t msg) {
  return command(port, [&](Device& d) { return to_errno(d.model->ms_retire_msg(flow, msg)); });
}

int rte_pmd_cleave_post_cursor_update(uint16_t port, uint16_t queue, uint32_t flow,
                                      uint32_t cursor) {
  return post(port, queue, PostedCmd::kCursorUpdate, flow, cursor);
}

int rte_pmd_cleave_post_ms_retire(uint16_t port, uint16_t queue, uint32_t flow, uint32_t count) {
  return post(port, queue, PostedCmd::kMsRetire, flow, count);
}

int rte_pmd_cleave_post_ms_retire_msg(uint16_t port, uint16_t queue, uint32_t flow, uint32_t msg) {
  return post(port, queue, PostedCmd::kMsRetireMsg, flow, msg);
}

int rte_pmd_cleave_irq_bind(uint16_t port, int fd) {
  return command(port, [&](Device& d) {
    const auto free = std::find(d.irq_fd.begin(), d.irq_fd.end(), -1);
    if (free == d.irq_fd.end()) return -ENOSPC;
    *free = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (*free < 0) {
      *free = -1;
      return -errno;
    }
    return int(free - d.irq_fd.begin());
  });
}

int rte_pmd_cleave_irq_unbind(uint16_t port, uint32_t vector) {
  return command(port, [&](Device& d) {
    if (vector >= kIrqVectors || d.irq_fd[vector] < 0) return -ENOENT;
    close(d.irq_fd[vector]);
    d.irq_fd[vector] = -1;
    return 0;
  });
}

int rte_pmd_cleave_post_irq(uint16_t port, uint16_t queue, uint32_t vector) {
  return post(port, queue, PostedCmd::kIrq, vector, 0);
}

int rte_pmd_cleave_roce_resync(uint16_t port, uint32_t flow, uint32_t psn, uint32_t next_msg) {
  return command(port,
                 [&](Device& d) { return to_errno(d.model->roce_resync(flow, psn, next_msg)); });
}

int rte_pmd_cleave_read_post(uint16_t port, uint32_t flow, uint32_t psn, uint16_t mr,
                             uint64_t offset, uint32_t len) {
  return command(port, [&](Device& d) {
    if (mr >= d.bounce_mr) return -ENOENT;
    return to_errno(d.model->read_post(flow, psn, mr, offset, len));
  });
}

int rte_pmd_cleave_read_retire(uint16_t port, uint32_t flow, uint32_t psn) {
  return command(port, [&](Device& d) { return to_errno(d.model->read_retire(flow, psn)); });
}

int rte_pmd_cleave_rkey_check(uint16_t port, uint32_t flow, uint32_t rkey, uint64_t va,
                              uint64_t len, uint8_t access, uint16_t* mr) {
  return command(port, [&](Device& d) {
    return to_errno(d.model->rkey_check(flow, rkey, va, len, access, mr));
  });
}

int rte_pmd_cleave_fault_set(uint16_t port, enum rte_pmd_cleave_fault_dir dir,
                             const struct rte_pmd_cleave_fault* fault) {
  if (cleave::pmd::cleave_port(port) == nullptr) return -ENODEV;
  if (fault == nullptr || (dir != RTE_PMD_CLEAVE_FAULT_RX && dir != RTE_PMD_CLEAVE_FAULT_TX)) {
    return -EINVAL;
  }
  const dp::FaultParams p{fault->loss, fault->reorder, fault->duplicate, fault->seed};
  for (double v : {p.loss, p.reorder, p.duplicate}) {
    if (dp::fault_probability_error(v)) return -EINVAL;
  }
  return command(port, [&](Device& d) {
    d.fault[size_t(dir)].configure(p, dp::FaultDir(dir));
    return 0;
  });
}

int rte_pmd_cleave_service_id(uint16_t port, uint32_t* service_id) {
  if (service_id == nullptr) return -EINVAL;
  return command(port, [&](Device& d) {
    *service_id = d.service_id;
    return 0;
  });
}
