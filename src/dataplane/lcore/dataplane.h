// dataplane.h - the polling loop on the dataplane lcore and the state it alone owns.
//
// Threading: every member is touched only by the lcore running run() (or by a test calling
// poll_once() on its own thread), except stop_ and heartbeat_, which are atomics, and the
// CtlChannel, which is the only way other threads reach this state.
//
// Setup (ports configured and started, mempool) is done by the daemon before construction;
// see port.h. The constructor opens each port's NIC backend (nic.h: net_cleave ports get the
// header-split NIC, any other port the generic one); from then on the dataplane reaches ports
// only through their Nic. It owns the packet path: RX burst, ARP, ICMP echo, the exception tap,
// timers, TX flush, and the answers to control requests.
#pragma once

#include <rte_ether.h>
#include <rte_mbuf.h>
#include <rte_ring.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config.h"
#include "ctl_channel.h"
#include "lcore/apps.h"
#include "lcore/arp.h"
#include "lcore/flows.h"
#include "lcore/route.h"
#include "net.h"
#include "nic.h"
#include "stats.h"
#include "timer_wheel.h"

namespace cleave::dp {

inline constexpr uint16_t kNoPort = UINT16_MAX;
inline constexpr uint32_t kMaxBurst = 512;

// A port as the dataplane sees it: already started, with its address plan.
struct DpPort {
  std::string name;
  uint16_t port_id = kNoPort;
  uint16_t exception_port_id = kNoPort;  // the kernel tap, if configured
  Mac mac;
  Ipv4Prefix ipv4;
  uint16_t mtu = 1500;
  std::array<FaultParams, kFaultDirs> faults{};  // seeded wire faults set at start (nic.h)
};

struct DataplaneParams {
  uint16_t shard = 0;  // which of `shards` this dataplane is: it polls that queue of every port
  uint16_t shards = 1;
  uint32_t burst = 32;
  uint32_t max_apps = 32;
  uint32_t app_budget = 32;
  uint32_t idle_sleep_us = 0;
  ArpParams arp;         // in TSC cycles
  GenericNicParams nic;  // tables of the generic NIC backend
  FlowParams flows;

  static DataplaneParams from_config(const Config& c, uint64_t tsc_hz, uint16_t shard = 0);
};

// Packets staged for one TX queue, sent in bursts by flush().
struct TxStage {
  uint16_t port_id = kNoPort;
  Nic* nic = nullptr;  // the port's NIC; null: a plain port (the exception tap)
  uint16_t n = 0;
  Drop full_reason = Drop::kTxFull;
  uint64_t* packets = nullptr;  // counters credited with what the NIC accepted
  uint64_t* bytes = nullptr;
  rte_mbuf* pkts[kMaxBurst];
};

class Dataplane final : private ArpIo, private FlowIo {
 public:
  // Throws std::runtime_error when a port's NIC backend cannot be opened.
  Dataplane(const DataplaneParams& params, std::vector<DpPort> ports, const RouteTable& routes,
            rte_mempool* pool, CtlChannel& ctl);
  Dataplane(const Dataplane&) = delete;
  Dataplane& operator=(const Dataplane&) = delete;
  ~Dataplane();

  // The other shards (by shard index, this one included), before start(): where frames of their
  // flows and listeners, ARP learned on queue 0 and frames for the exception tap are handed.
  void set_peers(std::vector<Dataplane*> peers) { peers_ = std::move(peers); }

  // rte_eal_remote_launch entry point: arg is the Dataplane.
  static int lcore_main(void* arg);
  // Announces the ports and resolves configured next hops; run() calls it first.
  void start();
  // Loops until request_stop().
  void run();
  // One iteration of the loop; returns the work done (packets and timers). Tests drive the
  // dataplane with this instead of run().
  unsigned poll_once();

  void request_stop() { stop_.store(true, std::memory_order_relaxed); }
  // Advances at least every millisecond while the loop runs: the watchdog's sign of life.
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }

 private:
  struct Port {
    DpPort conf;
    rte_ether_addr mac;  // conf.mac as the packet path writes and compares it
    uint32_t ip_be = 0;  // our address, network byte order
    uint32_t bcast_be = 0;
    PortStats* stats = nullptr;
    std::unique_ptr<Nic> nic;
    TxStage wire;       // to the port, through nic
    TxStage exception;  // to the kernel tap
  };

  // What one shard hands another through its inbox (an MP/SC ring of these).
  enum class HandOff : uint8_t {
    kFrame,      // receive it as if from this shard's own queue
    kArpLearn,   // an ARP frame queue 0 received: learn from it, nothing else
    kException,  // to the port's exception tap (shard 0's)
  };
  struct HandOffEntry {
    rte_mbuf* m;
    HandOff kind;
    uint8_t port;  // its index in ports_
    uint8_t pad[6];
  };
  static_assert(sizeof(HandOffEntry) == 16);  // a multiple of 4: an rte_ring element
  void hand_off(uint16_t shard, HandOff kind, uint8_t port, rte_mbuf* m);
  void flow_hand_off(uint16_t shard, uint8_t port, rte_mbuf* m) override {
    hand_off(shard, HandOff::kFrame, port, m);
  }
  unsigned poll_inbox();
  void learn_arp(Port& p, rte_mbuf* m);

  // Stages of the loop.
  unsigned poll_ports();
  unsigned poll_exception_taps();
  void flush_all();
  void serve_control(uint64_t now);

  // Receive path.
  void rx_packet(Port& p, rte_mbuf* m);
  void rx_arp(Port& p, rte_mbuf* m);
  void rx_ipv4(Port& p, rte_mbuf* m);
  void rx_icmp(Port& p, rte_mbuf* m, uint32_t ip_off, uint32_t ihl, uint32_t ip_len);
  void rx_flow(Port& p, rte_mbuf* m);  // to the flow path (transports)
  void to_exception_or_drop(Port& p, rte_mbuf* m, Drop reason);

  // Transmit path.
  void stage(TxStage& s, rte_mbuf* m);
  void flush(TxStage& s);
  void drop(rte_mbuf* m, Drop reason);
  void send_arp_request(Port& p, Ipv4 target, const Mac* dst);
  void arp_send_request(uint8_t port, Ipv4 target, const Mac* dst) override;
  void flow_stage(uint8_t port, rte_mbuf* m) override { stage(ports_[port].wire, m); }

  // Control requests.
  // The answer to each kind of control request (dataplane_ctl.cc).
  void answer(ctl::Stats& r, uint64_t now);
  void answer(ctl::ArpTable& r, uint64_t now);
  void answer(ctl::RouteGet& r, uint64_t now);
  void answer(ctl::Nic& r, uint64_t now);
  void answer(ctl::AppAttach& r, uint64_t now);
  void answer(ctl::AppDetach& r, uint64_t now);
  void answer(ctl::AppSetMr& r, uint64_t now);
  void answer(ctl::AppSetPipe& r, uint64_t now);
  void answer(ctl::AppCountersList& r, uint64_t now);
  void answer(ctl::Listen& r, uint64_t now);
  void answer(ctl::Connect& r, uint64_t now);
  void answer(ctl::Unlisten& r, uint64_t now);
  void answer(ctl::ListenShare& r, uint64_t now);
  void answer(ctl::FlowList& r, uint64_t now);
  void answer(ctl::BindingAttach& r, uint64_t now);
  void answer(ctl::BindingDetach& r, uint64_t now);
  void answer(ctl::QpCreate& r, uint64_t now);
  void answer(ctl::QpModify& r, uint64_t now);
  void answer(ctl::QpQuery& r, uint64_t now);
  void answer(ctl::QpDestroy& r, uint64_t now);

  DataplaneParams params_;
  std::vector<Port> ports_;
  const RouteTable& routes_;
  rte_mempool* pool_;
  CtlChannel& ctl_;
  uint64_t tsc_hz_;
  uint64_t ctl_interval_;  // serve control at least this often under load
  uint64_t last_ctl_ = 0;
  uint64_t next_exception_poll_ = 0;
  uint64_t now_ = 0;  // TSC at the start of the current iteration
  DataplaneStats stats_;
  TimerWheel timers_;
  ArpTable arp_;
  AppPath apps_;
  std::unique_ptr<FlowPath> flows_;
  rte_ring* inbox_ = nullptr;  // with several shards: frames handed to this one
  std::vector<Dataplane*> peers_;
  alignas(64) std::atomic<bool> stop_{false};
  alignas(64) std::atomic<uint64_t> heartbeat_{0};
};

}  // namespace cleave::dp
