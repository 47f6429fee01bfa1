// pmd_bench.cc - net_cleave packets per second end to end over a ring wire, against the bare wire.
//
// One process, EAL without hugepages, inline mode (no service lcore: the bursts run the NICs).
// Per frame size (64, 1500, 9000 bytes, MTU 9000) three paths, each moving bursts of 32 frames
// from port A to port B:
//   RingWire        the two ring ports alone: the baseline, measured in the same run;
//   CleaveDeferred  plain frames through both NICs: A passes them through, B's model parses,
//                   verifies checksums, misses the flow table and delivers them whole;
//   CleaveZeroCopy  header + extbuf descriptors: A's model merges and checksums, B's model
//                   places payloads into posted MSs and delivers headers; the app side
//                   advances the cursor and re-posts MSs every burst.
// and, through the dataplane's Nic (nic.h):
//   CleaveRxPlaced  frames of one flow put on B's wire as they are (sequence numbers and
//                   checksums moved on every burst), placed by the cleave backend on B;
//   GenericRxPlaced the same frames on a third ring wire, placed by the generic backend on the
//                   ring port itself: the model's placement on the dataplane's own core;
//   GenericZeroCopy CleaveZeroCopy over two generic Nics: the software TX merge (checksums,
//                   payload read from the registered MR) and the software placement.
// and with receive queues, one Nic per queue on each side, each queue's pair driven by its own
// lcore (lcore 1 has CPU 1, lcore 2 shares CPU 0 with the main lcore, which sleeps meanwhile;
// CLEAVE_BENCH_LCORES=0@0,1@1,2@1 maps them otherwise). On a machine whose CPUs other work
// shares, two lcores handing frames to each other (a NIC lock held by one, the generic stage run
// by queue 0) wait on each other's time slices: the figures then measure the scheduler.
//   CleaveQueues/Q  Q queue pairs of net_cleave ports over a fourth ring wire; lcore q streams
//                   plain frames of flows whose ports rss::port_for_queue chose for q on A's
//                   queue q (up to 256 in flight) and receives them (deferred whole) on B's
//                   queue q; the NICs run inline, from whichever lcore's burst gets their lock;
//   GenericQueues/Q the same over a fifth ring wire's ports with the generic backend: with two
//                   queues its software steering stage runs in queue 0's bursts.
// Prints figures and the ratio to the baseline; asserts nothing.
// Run: meson test -C build --benchmark --suite bench -v pmd   (or ./build/tests/pmd_bench)
#include <benchmark/benchmark.h>
#include <rte_bus_vdev.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_ring.h>
#include <rte_tcp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/rss.h"
#include "nic.h"
#include "rte_pmd_cleave.h"

namespace {

constexpr uint16_t kBurst = 32;
constexpr uint32_t kFlow = 1;
constexpr uint32_t kSizes[] = {64, 1500, 9000};

rte_mempool* g_small = nullptr;  // headers and extbuf carriers
rte_mempool* g_jumbo = nullptr;  // prebuilt plain frames

rte_mempool* g_frames = nullptr;  // frames the generic backend's TX merge builds
int g_placement_off = -1;         // the placement dynfield, once net_cleave has registered it

struct Ports {
  uint16_t raw_tx = 0, raw_rx = 0;  // the bare ring wire
  uint16_t a = 0, b = 0;            // net_cleave over a second ring wire
  uint16_t wire_a = 0;              // A's end of that wire
  uint16_t gx = 0, gy = 0;          // a third ring wire, for the generic backend
  std::unique_ptr<cleave::dp::Nic> cleave_b, gen_x, gen_y;
  // Queues: net_cleave ports over a fourth wire and generic ones on a fifth, opened as 1 and as 2
  // queues (index: queue count - 1, then sender A / receiver B per queue).
  uint16_t qa = 0, qb = 0, qgx = 0, qgy = 0;
} g;

std::vector<uint8_t> tcp_frame(uint32_t size, uint32_t seq, bool csum) {
  std::vector<uint8_t> f(std::max<uint32_t>(size, 54), 0x5A);
  std::fill(f.begin(), f.begin() + 54, 0);
  f[0] = 2;
  f[6] = 4;
  f[12] = 0x08;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  ip->version_ihl = 0x45;
  ip->total_length = rte_cpu_to_be_16(uint16_t(size - 14));
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_TCP;
  ip->src_addr = rte_cpu_to_be_32(0x0a000001);
  ip->dst_addr = rte_cpu_to_be_32(0x0a000002);
  auto* tcp = reinterpret_cast<rte_tcp_hdr*>(f.data() + 34);
  tcp->src_port = rte_cpu_to_be_16(1000);
  tcp->dst_port = rte_cpu_to_be_16(2000);
  tcp->sent_seq = rte_cpu_to_be_32(seq);
  tcp->data_off = 5 << 4;
  tcp->tcp_flags = RTE_TCP_ACK_FLAG;
  tcp->rx_win = 0xFFFF;
  if (csum) {
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
  }
  return f;
}

void start(uint16_t port, uint16_t queues = 1) {
  rte_eth_dev_stop(port);
  rte_eth_conf conf{};
  conf.rxmode.mtu = 9000;
  conf.rxmode.mq_mode = queues > 1 ? RTE_ETH_MQ_RX_RSS : RTE_ETH_MQ_RX_NONE;
  conf.txmode.offloads = RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
  bool ok = rte_eth_dev_configure(port, queues, queues, &conf) == 0;
  for (uint16_t q = 0; ok && q < queues; q++) {
    ok = rte_eth_rx_queue_setup(port, q, 1024, SOCKET_ID_ANY, nullptr, g_small) == 0 &&
         rte_eth_tx_queue_setup(port, q, 1024, SOCKET_ID_ANY, nullptr) == 0;
  }
  if (!ok || rte_eth_dev_start(port) != 0) {
    std::fprintf(stderr, "port %u does not start\n", port);
    std::exit(1);
  }
}

uint16_t crossed_pair(const std::string& name, uint16_t* second) {
  rte_ring* ab = rte_ring_create((name + "ab").c_str(), 4096, SOCKET_ID_ANY, 0);
  rte_ring* ba = rte_ring_create((name + "ba").c_str(), 4096, SOCKET_ID_ANY, 0);
  int x = rte_eth_from_rings((name + "x").c_str(), &ba, 1, &ab, 1, SOCKET_ID_ANY);
  int y = rte_eth_from_rings((name + "y").c_str(), &ab, 1, &ba, 1, SOCKET_ID_ANY);
  if (x < 0 || y < 0) std::exit(1);
  *second = uint16_t(y);
  return uint16_t(x);
}

// Receives `want` frames on `port` (running its NIC), freeing them; returns how many came.
uint32_t receive(uint16_t port, uint16_t kick, uint32_t want) {
  uint32_t got = 0;
  rte_mbuf* bufs[kBurst];
  for (int idle = 0; got < want && idle < 1000;) {
    if (kick != RTE_MAX_ETHPORTS) rte_eth_tx_burst(kick, 0, nullptr, 0);
    const uint16_t n = rte_eth_rx_burst(port, 0, bufs, kBurst);
    rte_pktmbuf_free_bulk(bufs, n);
    got += n;
    idle = n == 0 ? idle + 1 : 0;
  }
  return got;
}

// The flow the frames of tcp_frame() are, receiving from `seq`.
rte_pmd_cleave_flow bench_flow(uint32_t seq) {
  rte_pmd_cleave_flow flow{};
  flow.src_ip = 0x0a000001;
  flow.dst_ip = 0x0a000002;
  flow.src_port = 1000;
  flow.dst_port = 2000;
  flow.proto = 6;
  flow.reliable = 1;
  flow.initial_seq = seq;
  return flow;
}

// A burst of `hdr` + extbuf descriptors, frame i carrying payload i of `payload` bytes from
// `app` at sequence number seq + i * payload; with the header lengths when `header_lengths`.
// False, with nothing allocated, when the pool runs dry.
bool descriptors(rte_mbuf* (&d)[kBurst], const std::vector<uint8_t>& hdr, std::vector<uint8_t>& app,
                 uint32_t seq, uint32_t payload, rte_mbuf_ext_shared_info& shinfo,
                 bool header_lengths) {
  rte_mbuf* carriers[kBurst];
  if (rte_pktmbuf_alloc_bulk(g_small, d, kBurst) != 0) return false;
  if (rte_pktmbuf_alloc_bulk(g_small, carriers, kBurst) != 0) {
    rte_pktmbuf_free_bulk(d, kBurst);
    return false;
  }
  rte_mbuf_ext_refcnt_set(&shinfo, kBurst);
  for (uint16_t i = 0; i < kBurst; i++) {
    auto* h = reinterpret_cast<uint8_t*>(rte_pktmbuf_append(d[i], 54));
    std::memcpy(h, hdr.data(), 54);
    reinterpret_cast<rte_tcp_hdr*>(h + 34)->sent_seq = rte_cpu_to_be_32(seq + i * payload);
    rte_pktmbuf_attach_extbuf(carriers[i], app.data() + size_t(i) * payload, RTE_BAD_IOVA,
                              uint16_t(payload), &shinfo);
    carriers[i]->data_len = uint16_t(payload);
    carriers[i]->pkt_len = payload;
    rte_pktmbuf_chain(d[i], carriers[i]);
    d[i]->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM;
    if (header_lengths) {
      d[i]->l2_len = 14;
      d[i]->l3_len = 20;
      d[i]->l4_len = 20;
    }
  }
  return true;
}

// Calls `rx_burst(bufs)` (which kicks the sender first where it must) until `want` frames came
// or nothing moves for a while, freeing them and adding what they placed to `placed_bytes`.
// Returns how many came.
template <class RxBurst>
uint32_t receive_placed(uint32_t want, uint64_t& placed_bytes, RxBurst&& rx_burst) {
  uint32_t got = 0;
  rte_mbuf* bufs[kBurst];
  for (int idle = 0; got < want && idle < 1000;) {
    const uint16_t n = rx_burst(bufs);
    for (uint16_t i = 0; i < n; i++)
      placed_bytes += rte_pmd_cleave_placement_get(bufs[i], g_placement_off)->placed;
    rte_pktmbuf_free_bulk(bufs, n);
    got += n;
    idle = n == 0 ? idle + 1 : 0;
  }
  return got;
}

// The figures of a path that moved bursts of `size`-byte frames.
void report(benchmark::State& state, uint32_t size, uint64_t lost) {
  state.SetItemsProcessed(int64_t(state.iterations()) * kBurst);
  state.SetBytesProcessed(int64_t(state.iterations()) * kBurst * size);
  state.counters["lost"] = double(lost);
}
// ... and of one that placed `placed_bytes` of their payloads.
void report(benchmark::State& state, uint32_t size, uint64_t lost, uint64_t placed_bytes) {
  report(state, size, lost);
  state.counters["placed_per_frame"] =
      state.iterations() > 0 ? double(placed_bytes) / double(state.iterations() * kBurst) : 0;
}

// Plain prebuilt frames, held with an extra reference so each burst reuses them.
void plain(benchmark::State& state, uint16_t tx, uint16_t rx, uint16_t kick) {
  const uint32_t size = uint32_t(state.range(0));
  const std::vector<uint8_t> f = tcp_frame(size, 1, true);
  rte_mbuf* frames[kBurst];
  for (rte_mbuf*& m : frames) {
    m = rte_pktmbuf_alloc(g_jumbo);
    std::memcpy(rte_pktmbuf_append(m, uint16_t(size)), f.data(), size);
  }
  uint64_t lost = 0;
  for (auto _ : state) {
    for (rte_mbuf* m : frames) {
      rte_mbuf_refcnt_update(m, 1);
      m->data_len = uint16_t(size);
      m->pkt_len = size;
    }
    uint16_t sent = rte_eth_tx_burst(tx, 0, frames, kBurst);
    for (uint16_t i = sent; i < kBurst; i++)
      rte_mbuf_refcnt_update(frames[i], -1);
    lost += sent - receive(rx, kick, sent);
  }
  for (rte_mbuf* m : frames)
    rte_pktmbuf_free(m);
  report(state, size, lost);
}

void ring_wire(benchmark::State& state) {
  plain(state, g.raw_tx, g.raw_rx, RTE_MAX_ETHPORTS);
}
void cleave_deferred(benchmark::State& state) {
  plain(state, g.a, g.b, g.a);
}

// Header + extbuf descriptors placed into MSs on B; the cursor and MSs move every burst.
void cleave_zero_copy(benchmark::State& state) {
  const uint32_t size = uint32_t(state.range(0));
  const uint32_t payload = size - 54;
  const uint32_t ms_len = payload * kBurst;
  constexpr uint32_t kAhead = 4;  // MSs posted ahead of the cursor
  static std::vector<uint8_t> app(size_t(9000) * kBurst, 0x33);
  static std::vector<uint8_t> rx(size_t(9000) * kBurst * (kAhead + 1), 0);
  static uint16_t next_mr = 0;
  const uint16_t mr_a = next_mr, mr_b = uint16_t(next_mr + 1);
  next_mr = uint16_t(next_mr + 2);
  rte_pmd_cleave_mr_add(g.a, mr_a, app.data(), app.size(), 1);
  rte_pmd_cleave_mr_add(g.b, mr_b, rx.data(), rx.size(), 1);
  uint32_t seq = 1000;
  const rte_pmd_cleave_flow flow = bench_flow(seq);
  rte_pmd_cleave_flow_add(g.b, kFlow, &flow);
  uint32_t slot = 0;
  for (; slot < kAhead; slot++)
    rte_pmd_cleave_ms_post(g.b, kFlow, mr_b, uint64_t(slot % (kAhead + 1)) * ms_len, ms_len, 0);
  std::vector<uint8_t> hdr = tcp_frame(54, seq, false);
  rte_mbuf_ext_shared_info shinfo{};
  shinfo.free_cb = [](void*, void*) {};
  uint64_t lost = 0, placed_bytes = 0;

  for (auto _ : state) {
    rte_mbuf* d[kBurst];
    if (!descriptors(d, hdr, app, seq, payload, shinfo, /*header_lengths=*/true)) {
      state.SkipWithError("out of mbufs");
      break;
    }
    const uint16_t sent = rte_eth_tx_burst(g.a, 0, d, kBurst);
    if (sent < kBurst) rte_pktmbuf_free_bulk(d + sent, kBurst - sent);
    lost += sent - receive_placed(sent, placed_bytes, [](rte_mbuf** bufs) {
              rte_eth_tx_burst(g.a, 0, nullptr, 0);
              return rte_eth_rx_burst(g.b, 0, bufs, kBurst);
            });
    // The transport's share: accept the burst, retire its MS, post the next one.
    seq += uint32_t(sent) * payload;
    rte_pmd_cleave_cursor_update(g.b, kFlow, seq);
    rte_pmd_cleave_ms_retire(g.b, kFlow, 1);
    rte_pmd_cleave_ms_post(g.b, kFlow, mr_b, uint64_t(slot++ % (kAhead + 1)) * ms_len, ms_len, 0);
  }
  rte_pmd_cleave_flow_remove(g.b, kFlow);
  rte_pmd_cleave_mr_remove(g.a, mr_a);
  rte_pmd_cleave_mr_remove(g.b, mr_b);
  report(state, size, lost, placed_bytes);
}

// RFC 1624: the checksum `hc` after a 32-bit word of the summed data went from `from` to `to`
// (all as they lie in memory).
uint16_t csum_update32(uint16_t hc, uint32_t from, uint32_t to) {
  uint32_t sum = uint16_t(~hc);
  sum += uint16_t(~from) + uint16_t(~from >> 16) + uint16_t(to) + uint16_t(to >> 16);
  while (sum >> 16 != 0)
    sum = (sum & 0xFFFF) + (sum >> 16);
  return uint16_t(~sum);
}

// A receive window of kAhead MSs over `rx`, on `nic`, moved on every burst like a transport.
struct Window {
  static constexpr uint32_t kAhead = 4;
  cleave::dp::Nic& nic;
  uint16_t mr;
  uint32_t ms_len;
  uint32_t seq;
  uint32_t slot = 0;
  Window(cleave::dp::Nic& n, uint16_t mr_id, std::vector<uint8_t>& rx, uint32_t len, uint32_t s)
      : nic(n), mr(mr_id), ms_len(len), seq(s) {
    nic.mr_add(mr, rx.data(), rx.size(), 1);
    nic.flow_add(kFlow, bench_flow(seq));
    for (; slot < kAhead; slot++)
      nic.ms_post(kFlow, mr, uint64_t(slot % (kAhead + 1)) * ms_len, ms_len, 0);
  }
  ~Window() {
    nic.flow_remove(kFlow);
    nic.mr_remove(mr);
  }
  // The transport's share: accept the burst, retire its MS, post the next one.
  void advance(uint32_t bytes) {
    seq += bytes;
    nic.cursor_update(kFlow, seq);
    nic.ms_retire(kFlow, 1);
    nic.ms_post(kFlow, mr, uint64_t(slot++ % (kAhead + 1)) * ms_len, ms_len, 0);
  }
};

uint16_t next_mr() {
  static uint16_t mr = 100;
  return mr++;
}

// Frames of one flow sent raw on `wire`, received and placed by `rx` (a Nic).
void rx_placed(benchmark::State& state, uint16_t wire, cleave::dp::Nic& rx) {
  const uint32_t size = uint32_t(state.range(0));
  const uint32_t payload = size - 54;
  static std::vector<uint8_t> mem(size_t(9000) * kBurst * (Window::kAhead + 1), 0);
  Window w(rx, next_mr(), mem, payload * kBurst, 1000);
  rte_mbuf* frames[kBurst];
  for (uint16_t i = 0; i < kBurst; i++) {
    const std::vector<uint8_t> f = tcp_frame(size, w.seq + i * payload, true);
    frames[i] = rte_pktmbuf_alloc(g_jumbo);
    std::memcpy(rte_pktmbuf_append(frames[i], uint16_t(size)), f.data(), size);
  }
  uint64_t lost = 0, placed_bytes = 0;
  for (auto _ : state) {
    for (uint16_t i = 0; i < kBurst; i++) {
      rte_mbuf* m = frames[i];
      rte_mbuf_refcnt_update(m, 1);
      m->data_len = uint16_t(size);
      m->pkt_len = size;
      auto* tcp = rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, 34);
      const uint32_t from = tcp->sent_seq;
      const uint32_t to = rte_cpu_to_be_32(w.seq + i * payload);
      tcp->sent_seq = to;
      tcp->cksum = csum_update32(tcp->cksum, from, to);
    }
    const uint16_t sent = rte_eth_tx_burst(wire, 0, frames, kBurst);
    for (uint16_t i = sent; i < kBurst; i++)
      rte_mbuf_refcnt_update(frames[i], -1);
    lost += sent - receive_placed(sent, placed_bytes,
                                  [&](rte_mbuf** bufs) { return rx.rx_burst(bufs, kBurst); });
    w.advance(uint32_t(sent) * payload);
  }
  for (rte_mbuf* m : frames)
    rte_pktmbuf_free(m);
  report(state, size, lost, placed_bytes);
}

void cleave_rx_placed(benchmark::State& state) {
  rx_placed(state, g.wire_a, *g.cleave_b);
}
void generic_rx_placed(benchmark::State& state) {
  rx_placed(state, g.gx, *g.gen_y);
}

// Header + extbuf descriptors through the generic Nic on x, placed by the generic Nic on y.
void generic_zero_copy(benchmark::State& state) {
  const uint32_t size = uint32_t(state.range(0));
  const uint32_t payload = size - 54;
  static std::vector<uint8_t> app(size_t(9000) * kBurst, 0x33);
  static std::vector<uint8_t> mem(size_t(9000) * kBurst * (Window::kAhead + 1), 0);
  cleave::dp::Nic& tx = *g.gen_x;
  cleave::dp::Nic& rx = *g.gen_y;
  const uint16_t mr_tx = next_mr();
  tx.mr_add(mr_tx, app.data(), app.size(), 1);
  Window w(rx, next_mr(), mem, payload * kBurst, 1000);
  std::vector<uint8_t> hdr = tcp_frame(54, w.seq, false);
  rte_mbuf_ext_shared_info shinfo{};
  shinfo.free_cb = [](void*, void*) {};
  uint64_t lost = 0, placed_bytes = 0;
  for (auto _ : state) {
    rte_mbuf* d[kBurst];
    if (!descriptors(d, hdr, app, w.seq, payload, shinfo, /*header_lengths=*/false)) {
      state.SkipWithError("out of mbufs");
      break;
    }
    const uint16_t sent = tx.tx_burst(d, kBurst);
    if (sent < kBurst) rte_pktmbuf_free_bulk(d + sent, kBurst - sent);
    lost += sent - receive_placed(sent, placed_bytes, [&](rte_mbuf** bufs) {
              tx.tx_burst(nullptr, 0);
              return rx.rx_burst(bufs, kBurst);
            });
    w.advance(uint32_t(sent) * payload);
  }
  tx.mr_remove(mr_tx);
  report(state, size, lost, placed_bytes);
}

// ---- queues: one lcore per queue pair ---------------------------------------------------------

constexpr uint32_t kQueueBursts = 512;  // bursts each lcore moves per iteration

struct QueueLcore {
  cleave::dp::Nic* a = nullptr;
  cleave::dp::Nic* b = nullptr;
  rte_mbuf* frames[kBurst] = {};  // prebuilt, of flows steered to this queue; reused by refcount
  uint32_t size = 0;
  uint64_t moved = 0;
  uint64_t lost = 0;
  std::atomic<unsigned>* done = nullptr;  // lcores finished with their bursts
  unsigned lcores = 1;
};

// Streams kQueueBursts bursts with up to kQueueWindow frames in flight (so an lcore does not
// wait on another's time slice for every burst), until all came back or a generous deadline
// passed (the CPUs are shared: another lcore may be off its CPU for a while).
constexpr uint32_t kQueueWindow = 256;

int queue_lcore(void* arg) {
  QueueLcore& l = *static_cast<QueueLcore*>(arg);
  rte_mbuf* bufs[kBurst];
  const uint64_t want = uint64_t(kQueueBursts) * kBurst;
  uint64_t sent = 0, got = 0;
  const uint64_t deadline = rte_get_timer_cycles() + 10 * rte_get_timer_hz();
  for (uint32_t spin = 0; got < want; spin++) {
    if (sent < want && sent - got + kBurst <= kQueueWindow) {
      for (rte_mbuf* m : l.frames) {
        rte_mbuf_refcnt_update(m, 1);
        m->data_len = uint16_t(l.size);
        m->pkt_len = l.size;
      }
      const uint16_t n = l.a->tx_burst(l.frames, kBurst);
      for (uint16_t i = n; i < kBurst; i++)
        rte_mbuf_refcnt_update(l.frames[i], -1);
      sent += n;
    } else {
      l.a->tx_burst(nullptr, 0);
    }
    const uint16_t n = l.b->rx_burst(bufs, kBurst);
    rte_pktmbuf_free_bulk(bufs, n);
    got += n;
    if ((spin & 1023) == 1023 && rte_get_timer_cycles() > deadline) break;
  }
  l.moved += got;
  l.lost += sent - std::min(sent, got);
  // Keep the NICs going until every lcore is done: the generic backend's queue 0 runs the
  // steering stage the other queues' frames pass.
  l.done->fetch_add(1);
  while (l.done->load() < l.lcores) {
    l.a->tx_burst(nullptr, 0);
    const uint16_t n = l.b->rx_burst(bufs, kBurst);
    rte_pktmbuf_free_bulk(bufs, n);
  }
  return 0;
}

// Q lcores (1, then 2) move bursts over Q queue pairs of A and B at once.
void queues(benchmark::State& state, uint16_t a, uint16_t b) {
  const auto nq = uint16_t(state.range(0));
  const uint32_t size = 64;
  std::vector<std::unique_ptr<cleave::dp::Nic>> nics;
  cleave::dp::GenericNicParams params;
  params.model.max_flows = 1024;
  params.model.ms_store_entries = 4096;
  params.tx_frames = 512;
  // net_cleave has queues of its own; a generic port keeps one queue pair.
  for (uint16_t p : {a, b}) {
    rte_eth_dev_info info{};
    rte_eth_dev_info_get(p, &info);
    start(p, std::string(info.driver_name) == "net_cleave" ? nq : 1);
  }
  QueueLcore lc[2];
  const cleave::rss::Reta reta = cleave::rss::default_reta(nq);
  uint16_t port = 40000;
  for (uint16_t q = 0; q < nq; q++) {
    nics.push_back(cleave::dp::open_nic(a, g_frames, params, {q, nq}));
    nics.push_back(cleave::dp::open_nic(b, g_frames, params, {q, nq}));
    lc[q].a = nics[nics.size() - 2].get();
    lc[q].b = nics.back().get();
    lc[q].size = size;
    for (rte_mbuf*& m : lc[q].frames) {
      // B's shard q chose a port for its connection to A's port 1000: A sends there.
      port = uint16_t(cleave::rss::port_for_queue(cleave::rss::kDefaultKey, reta, 0x0a000002,
                                                  0x0a000001, 1000, q, 32768, 60999, port));
      std::vector<uint8_t> f = tcp_frame(size, 1, false);
      reinterpret_cast<rte_tcp_hdr*>(f.data() + 34)->dst_port = rte_cpu_to_be_16(port++);
      auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
      ip->hdr_checksum = rte_ipv4_cksum(ip);
      reinterpret_cast<rte_tcp_hdr*>(f.data() + 34)->cksum =
          rte_ipv4_udptcp_cksum(ip, f.data() + 34);
      m = rte_pktmbuf_alloc(g_jumbo);
      std::memcpy(rte_pktmbuf_append(m, uint16_t(size)), f.data(), size);
    }
  }
  std::atomic<unsigned> done{0};
  for (uint16_t q = 0; q < nq; q++) {
    lc[q].done = &done;
    lc[q].lcores = nq;
  }
  for (auto _ : state) {
    done = 0;
    for (uint16_t q = 0; q < nq; q++)
      rte_eal_remote_launch(queue_lcore, &lc[q], 1 + q);
    for (unsigned l = 1; l <= nq; l++) {
      while (rte_eal_get_lcore_state(l) == RUNNING)
        usleep(200);  // the main lcore shares CPU 0 with lcore 2: it sleeps
      rte_eal_wait_lcore(l);
    }
  }
  uint64_t moved = 0, lost = 0;
  for (uint16_t q = 0; q < nq; q++) {
    moved += lc[q].moved;
    lost += lc[q].lost;
    rte_pktmbuf_free_bulk(lc[q].frames, kBurst);
  }
  state.SetItemsProcessed(int64_t(moved));
  state.SetBytesProcessed(int64_t(moved) * size);
  state.counters["lost"] = double(lost);
  nics.clear();
}

void cleave_queues(benchmark::State& state) {
  queues(state, g.qa, g.qb);
}
void generic_queues(benchmark::State& state) {
  queues(state, g.qgx, g.qgy);
}

// Prints the usual table, then each net_cleave path's median rate over the bare wire's.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (!median && r.run_type != Run::RT_Iteration) continue;
      auto it = r.counters.find("items_per_second");
      if (it == r.counters.end()) continue;
      const std::string name = r.run_name.str();
      if (median || !rate_.count(name)) rate_[name] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::printf(
        "\nnet_cleave and the Nic's backends over the ring wire (inline mode, bursts of %u, "
        "medians):\n",
        kBurst);
    for (uint32_t size : kSizes) {
      const std::string s = "/" + std::to_string(size);
      const double base = rate_["RingWire" + s];
      for (const char* path : {"CleaveDeferred", "CleaveZeroCopy", "CleaveRxPlaced",
                               "GenericRxPlaced", "GenericZeroCopy"}) {
        const double v = rate_[std::string(path) + s];
        std::printf("  %5u B  %-15s %8.3f Mpps  %6.1f%% of the bare wire (%.3f Mpps)\n", size, path,
                    v / 1e6, base > 0 ? 100.0 * v / base : 0.0, base / 1e6);
      }
    }
    std::printf("\nqueues, 64 B frames, one lcore per queue pair (medians):\n");
    for (const char* path : {"CleaveQueues", "GenericQueues"}) {
      const double one = rate_[std::string(path) + "/1/real_time"];
      const double two = rate_[std::string(path) + "/2/real_time"];
      std::printf("  %-14s 1 queue %8.3f Mpps   2 queues %8.3f Mpps   x%.2f\n", path, one / 1e6,
                  two / 1e6, one > 0 ? two / one : 0.0);
    }
  }

 private:
  std::map<std::string, double> rate_;
};

}  // namespace

int main(int argc, char** argv) {
  std::string prefix = "--file-prefix=cleave-pmdbench-" + std::to_string(getpid());
  // CLEAVE_BENCH_LCORES: another --lcores map for lcores 0 to 2 (e.g. 0@0,1@1,2@1).
  const char* lcores = std::getenv("CLEAVE_BENCH_LCORES");
  const char* eal_argv[] = {
      "pmd_bench", "--no-huge", "--no-shconf", "-m", "512", "--no-pci",
      // Lcore 1 has CPU 1; lcore 2 shares CPU 0 with the main lcore (which sleeps while they run).
      "--lcores", lcores != nullptr ? lcores : "0@0,1@1,2@0", "--no-telemetry",
      "--log-level=*:error", prefix.c_str()};
  if (rte_eal_init(int(sizeof eal_argv / sizeof eal_argv[0]), const_cast<char**>(eal_argv)) < 0) {
    return 1;
  }
  g_small = rte_pktmbuf_pool_create("bench_small", 8191, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
                                    SOCKET_ID_ANY);
  g_jumbo =
      rte_pktmbuf_pool_create("bench_jumbo", 255, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, SOCKET_ID_ANY);
  g_frames = rte_pktmbuf_pool_create("bench_frames", 1023, 128, 0, RTE_PKTMBUF_HEADROOM + 9216,
                                     SOCKET_ID_ANY);
  if (g_small == nullptr || g_jumbo == nullptr || g_frames == nullptr) return 1;
  g.raw_tx = crossed_pair("raw", &g.raw_rx);
  uint16_t wb = 0;
  g.wire_a = crossed_pair("cl", &wb);
  g.gx = crossed_pair("gen", &g.gy);
  uint16_t qwb = 0;
  crossed_pair("q", &qwb);  // net_cleave_qa and _qb take both ends
  g.qgx = crossed_pair("qg", &g.qgy);
  const char* sizing = ",max_flows=1024,ms_store=65536";
  if (rte_vdev_init("net_cleave_qa", (std::string("wire=net_ring_qx") + sizing).c_str()) != 0 ||
      rte_vdev_init("net_cleave_qb", (std::string("wire=net_ring_qy") + sizing).c_str()) != 0 ||
      rte_eth_dev_get_port_by_name("net_cleave_qa", &g.qa) != 0 ||
      rte_eth_dev_get_port_by_name("net_cleave_qb", &g.qb) != 0) {
    std::fprintf(stderr, "net_cleave queue ports do not probe\n");
    return 1;
  }
  if (rte_vdev_init("net_cleave_a", (std::string("wire=net_ring_clx") + sizing).c_str()) != 0 ||
      rte_vdev_init("net_cleave_b", (std::string("wire=net_ring_cly") + sizing).c_str()) != 0 ||
      rte_eth_dev_get_port_by_name("net_cleave_a", &g.a) != 0 ||
      rte_eth_dev_get_port_by_name("net_cleave_b", &g.b) != 0) {
    std::fprintf(stderr, "net_cleave ports do not probe\n");
    return 1;
  }
  g_placement_off = rte_pmd_cleave_placement_offset();
  for (uint16_t p : {g.raw_tx, g.raw_rx, g.a, g.b, g.gx, g.gy})
    start(p);
  (void)wb;
  try {
    cleave::dp::GenericNicParams params;
    params.model.max_flows = 1024;
    params.model.ms_store_entries = 65536;
    params.tx_frames = 512;
    g.cleave_b = cleave::dp::open_nic(g.b, g_frames);
    g.gen_x = cleave::dp::open_nic(g.gx, g_frames, params);
    g.gen_y = cleave::dp::open_nic(g.gy, g_frames, params);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  for (uint32_t size : kSizes) {
    benchmark::RegisterBenchmark("RingWire", ring_wire)->Arg(size);
    benchmark::RegisterBenchmark("CleaveDeferred", cleave_deferred)->Arg(size);
    benchmark::RegisterBenchmark("CleaveZeroCopy", cleave_zero_copy)->Arg(size);
    benchmark::RegisterBenchmark("CleaveRxPlaced", cleave_rx_placed)->Arg(size);
    benchmark::RegisterBenchmark("GenericRxPlaced", generic_rx_placed)->Arg(size);
    benchmark::RegisterBenchmark("GenericZeroCopy", generic_zero_copy)->Arg(size);
  }
  benchmark::RegisterBenchmark("CleaveQueues", cleave_queues)->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("GenericQueues", generic_queues)->Arg(1)->Arg(2)->UseRealTime();
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  g.cleave_b.reset();
  g.gen_x.reset();
  g.gen_y.reset();
  for (uint16_t p : {g.a, g.b, g.raw_tx, g.raw_rx, g.gx, g.gy, g.qa, g.qb, g.qgx, g.qgy})
    rte_eth_dev_stop(p);
  rte_eal_cleanup();
  return 0;
}
