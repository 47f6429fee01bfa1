// pmd_frames.h - what the net_cleave PMD tests and the dataplane's Nic tests both build: TCP
// frames from A to B, mbufs, extbuf descriptors over app memory, a crossed ring wire.
//
// Each test program sets g_pool and g_jumbo_pool after EAL init; the helpers allocate from them.
#pragma once

#include <gtest/gtest.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_launch.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <rte_tcp.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "rte_pmd_cleave.h"

namespace cleave::test::pmd {

// Runs body(shards[0]) on lcore 1 and body(shards[1]) on lcore 2 and waits for both. The
// handshakes are atomics the sanitizers see (EAL's launch and wait are not instrumented): each
// body starts after `go` and raises `finished` last.
template <class Shard>
struct LcoreRun {
  Shard* shard = nullptr;
  void (*body)(Shard&) = nullptr;
  std::atomic<bool>* go = nullptr;
  std::atomic<unsigned>* finished = nullptr;
};

template <class Shard>
int lcore_run_main(void* arg) {
  LcoreRun<Shard>& r = *static_cast<LcoreRun<Shard>*>(arg);
  while (!r.go->load())
    rte_pause();
  r.body(*r.shard);
  r.finished->fetch_add(1);
  return 0;
}

template <class Shard>
void run_on_lcores_1_and_2(Shard (&shards)[2], void (*body)(Shard&)) {
  std::atomic<bool> go{false};
  std::atomic<unsigned> finished{0};
  LcoreRun<Shard> runs[2] = {{&shards[0], body, &go, &finished},
                             {&shards[1], body, &go, &finished}};
  ASSERT_EQ(rte_eal_remote_launch(lcore_run_main<Shard>, &runs[0], 1), 0);
  ASSERT_EQ(rte_eal_remote_launch(lcore_run_main<Shard>, &runs[1], 2), 0);
  go = true;
  while (finished.load() < 2)
    usleep(1000);
  ASSERT_EQ(rte_eal_wait_lcore(1), 0);
  ASSERT_EQ(rte_eal_wait_lcore(2), 0);
}

inline rte_mempool* g_pool = nullptr;  // headers, plain frames, extbuf carriers, merged frames
inline rte_mempool* g_jumbo_pool = nullptr;  // injected jumbo frames

inline constexpr uint32_t kIpA = 0x0a000001;  // 10.0.0.1, the sender (A)
inline constexpr uint32_t kIpB = 0x0a000002;  // 10.0.0.2, the receiver (B)
inline constexpr uint16_t kPortA = 1000;
inline constexpr uint16_t kPortB = 2000;
inline constexpr uint32_t kFlow = 7;

using Bytes = std::vector<uint8_t>;

// An Ethernet/IPv4/TCP frame from A to B with correct checksums (when `csum`) and `payload`.
inline Bytes tcp_frame(uint32_t seq, const uint8_t* payload, uint32_t len, bool csum = true,
                       uint32_t src = kIpA, uint32_t dst = kIpB, uint16_t sport = kPortA,
                       uint16_t dport = kPortB) {
  Bytes f(14 + 20 + 20 + len, 0);
  for (int i = 0; i < 6; i++) {
    f[i] = uint8_t(0x02 + i);
    f[6 + i] = uint8_t(0x12 + i);
  }
  f[12] = 0x08;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  ip->version_ihl = 0x45;
  ip->total_length = rte_cpu_to_be_16(uint16_t(40 + len));
  ip->packet_id = rte_cpu_to_be_16(1);
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_TCP;
  ip->src_addr = rte_cpu_to_be_32(src);
  ip->dst_addr = rte_cpu_to_be_32(dst);
  auto* tcp = reinterpret_cast<rte_tcp_hdr*>(f.data() + 34);
  tcp->src_port = rte_cpu_to_be_16(sport);
  tcp->dst_port = rte_cpu_to_be_16(dport);
  tcp->sent_seq = rte_cpu_to_be_32(seq);
  tcp->recv_ack = rte_cpu_to_be_32(1);
  tcp->data_off = 5 << 4;
  tcp->tcp_flags = RTE_TCP_ACK_FLAG | RTE_TCP_PSH_FLAG;
  tcp->rx_win = rte_cpu_to_be_16(65535);
  if (len > 0) std::memcpy(f.data() + 54, payload, len);
  if (csum) {
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
  }
  return f;
}

// The same with TCP message mode's 20-byte option (kind 253, ExID 0xC1EA: credit limit, message
// number, the sequence number where the message starts, its length) before the payload.
inline Bytes tcp_msg_frame(uint32_t seq, const uint8_t* payload, uint32_t len, uint32_t msg,
                           uint32_t start, uint32_t length) {
  Bytes f = tcp_frame(seq, nullptr, 0, false);
  const uint8_t opt[20] = {253,
                           20,
                           0xC1,
                           0xEA,
                           0,
                           0,
                           0,
                           8,
                           uint8_t(msg >> 24),
                           uint8_t(msg >> 16),
                           uint8_t(msg >> 8),
                           uint8_t(msg),
                           uint8_t(start >> 24),
                           uint8_t(start >> 16),
                           uint8_t(start >> 8),
                           uint8_t(start),
                           uint8_t(length >> 24),
                           uint8_t(length >> 16),
                           uint8_t(length >> 8),
                           uint8_t(length)};
  f.insert(f.end(), opt, opt + 20);
  f.insert(f.end(), payload, payload + len);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  auto* tcp = reinterpret_cast<rte_tcp_hdr*>(f.data() + 34);
  ip->total_length = rte_cpu_to_be_16(uint16_t(60 + len));
  tcp->data_off = 10 << 4;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  tcp->cksum = rte_ipv4_udptcp_cksum(ip, tcp);
  return f;
}

// A zero-copy, reliable flow from A to B's `dst_port` (any source port), read by `parser`.
inline rte_pmd_cleave_flow ab_flow(uint8_t proto, uint16_t dst_port, uint8_t parser) {
  rte_pmd_cleave_flow f{};
  f.src_ip = kIpA;
  f.dst_ip = kIpB;
  f.dst_port = dst_port;
  f.proto = proto;
  f.mode = RTE_PMD_CLEAVE_ZERO_COPY;
  f.parser = parser;
  f.reliable = 1;
  return f;
}

// The zero-copy TCP flow of those frames, A to B, receiving from `initial_seq`.
inline rte_pmd_cleave_flow tcp_flow(uint32_t initial_seq, uint16_t sport = kPortA) {
  rte_pmd_cleave_flow f = ab_flow(6, kPortB, RTE_PMD_CLEAVE_PARSER_TCP);
  f.src_port = sport;
  f.initial_seq = initial_seq;
  return f;
}

// A RoCE flow (a QP of A's peer on B), zero-copy, reliable, receiving from PSN `initial_psn`.
inline rte_pmd_cleave_flow roce_flow(uint32_t qpn, uint32_t owner, uint32_t initial_psn = 0) {
  rte_pmd_cleave_flow f = ab_flow(17, 4791, RTE_PMD_CLEAVE_PARSER_ROCE);
  f.initial_seq = initial_psn;
  f.pmtu = 256;
  f.qpn = qpn;
  f.owner = owner;
  return f;
}

// A RoCEv2 frame from A to B: BTH (opcode, DestQP `qpn`, PSN), `ext` headers, payload, pad and
// the ICRC, computed here bit by bit (IBTA annex A17), not by the model under test.
inline Bytes roce_frame(uint8_t opcode, uint32_t psn, uint32_t qpn, const Bytes& ext,
                        const uint8_t* payload, uint32_t len) {
  const uint32_t pad = (4 - len % 4) % 4;
  const auto l4 = uint32_t(8 + 12 + ext.size() + len + pad + 4);
  Bytes f(14 + 20 + l4, 0);
  for (int i = 0; i < 6; i++) {
    f[i] = uint8_t(0x02 + i);
    f[6 + i] = uint8_t(0x12 + i);
  }
  f[12] = 0x08;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  ip->version_ihl = 0x45;
  ip->total_length = rte_cpu_to_be_16(uint16_t(20 + l4));
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(kIpA);
  ip->dst_addr = rte_cpu_to_be_32(kIpB);
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  uint8_t* udp = f.data() + 34;
  udp[0] = 0xC0;  // source port 49152; checksum zero, as RoCE senders leave it
  udp[2] = 4791 >> 8;
  udp[3] = 4791 & 0xFF;
  udp[4] = uint8_t(l4 >> 8);
  udp[5] = uint8_t(l4);
  uint8_t* bth = udp + 8;
  bth[0] = opcode;
  bth[1] = uint8_t(pad << 4);
  bth[2] = bth[3] = 0xFF;
  for (int i = 0; i < 3; i++) {
    bth[5 + i] = uint8_t(qpn >> (16 - 8 * i));
    bth[9 + i] = uint8_t(psn >> (16 - 8 * i));
  }
  std::copy(ext.begin(), ext.end(), bth + 12);
  if (len > 0) std::memcpy(bth + 12 + ext.size(), payload, len);
  // The ICRC's input: eight bytes of ones, then IP to the pad with the variant fields as ones.
  Bytes m(f.begin() + 14, f.end() - 4);
  m[1] = m[8] = m[10] = m[11] = 0xFF;  // TOS, TTL, IP checksum
  m[26] = m[27] = 0xFF;                // UDP checksum
  m[32] = 0xFF;                        // BTH byte 4
  uint32_t crc = 0xFFFFFFFF;
  auto feed = [&crc](uint8_t b) {
    crc ^= b;
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0xEDB88320 & (0u - (crc & 1)));
  };
  for (int i = 0; i < 8; i++)
    feed(0xFF);
  for (uint8_t b : m)
    feed(b);
  crc ^= 0xFFFFFFFF;
  for (int i = 0; i < 4; i++)
    f[f.size() - 4 + size_t(i)] = uint8_t(crc >> (8 * i));
  return f;
}

// RETH: VA, rkey, DMA length (wire order).
inline Bytes reth(uint64_t va, uint32_t rkey, uint32_t len) {
  Bytes r(16);
  for (int i = 0; i < 8; i++)
    r[size_t(i)] = uint8_t(va >> (56 - 8 * i));
  for (int i = 0; i < 4; i++) {
    r[8 + size_t(i)] = uint8_t(rkey >> (24 - 8 * i));
    r[12 + size_t(i)] = uint8_t(len >> (24 - 8 * i));
  }
  return r;
}

inline const Bytes kAeth = {0x1F, 0, 0, 1};  // ACK, MSN 1

// CRC-32C bit by bit (reflected 0x82F63B78), not the tables the NIC uses.
inline uint32_t crc32c_bitwise(const uint8_t* p, size_t n) {
  uint32_t crc = 0xFFFFFFFF;
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++)
      crc = (crc >> 1) ^ (0x82F63B78 & (0u - (crc & 1)));
  }
  return crc ^ 0xFFFFFFFF;
}

// B's number for the Solar connection solar_frame's packets belong to (their header's
// connection id): the NIC finds B's flow by it.
inline constexpr uint32_t kSolarConn = 7;

// A Solar WRITE_BLK from A (path 1: UDP source port 0xC001) to B's UDP port 7000 at stream
// offset `offset`, then `len` bytes of `block`, for B's connection `conn`: lengths, checksums
// and the block's CRC32C are left zero for the NIC (src/transport/solar/README.md has the
// header).
inline Bytes solar_frame(uint32_t seq, uint64_t offset, const uint8_t* block, uint32_t len,
                         uint32_t conn = kSolarConn) {
  Bytes f(14 + 20 + 8 + 32 + len, 0);
  for (int i = 0; i < 6; i++) {
    f[i] = uint8_t(0x02 + i);
    f[6 + i] = uint8_t(0x12 + i);
  }
  f[12] = 0x08;
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.data() + 14);
  ip->version_ihl = 0x45;
  ip->time_to_live = 64;
  ip->next_proto_id = IPPROTO_UDP;
  ip->src_addr = rte_cpu_to_be_32(kIpA);
  ip->dst_addr = rte_cpu_to_be_32(kIpB);
  uint8_t* udp = f.data() + 34;
  udp[0] = 0xC0;
  udp[1] = 0x01;
  udp[2] = 7000 >> 8;
  udp[3] = 7000 & 0xFF;
  uint8_t* h = udp + 8;
  h[0] = 1;  // WRITE_BLK, path 1
  h[3] = 1;
  for (int i = 0; i < 4; i++)
    h[4 + i] = uint8_t(conn >> (24 - 8 * i));
  for (int i = 0; i < 4; i++)
    h[8 + i] = uint8_t(seq >> (24 - 8 * i));
  for (int i = 0; i < 8; i++)
    h[16 + i] = uint8_t(offset >> (56 - 8 * i));
  h[27] = 1;  // block 0 of 1
  if (len > 0) std::memcpy(h + 32, block, len);
  return f;
}

// The Solar flow of solar_frame's packets on B: connection `conn`, found by that number from
// any source port, placed by offset from 0.
inline rte_pmd_cleave_flow solar_flow(uint32_t conn = kSolarConn) {
  rte_pmd_cleave_flow f = ab_flow(17, 7000, RTE_PMD_CLEAVE_PARSER_SOLAR);
  f.qpn = conn;
  return f;
}

inline Bytes pattern(size_t n, uint8_t salt) {
  Bytes b(n);
  for (size_t i = 0; i < n; i++)
    b[i] = uint8_t(i * 7 + salt + (i >> 8));
  return b;
}

inline rte_mbuf* to_mbuf(const Bytes& f) {
  rte_mbuf* m = rte_pktmbuf_alloc(f.size() > 2000 ? g_jumbo_pool : g_pool);
  if (m == nullptr) return nullptr;
  std::memcpy(rte_pktmbuf_append(m, uint16_t(f.size())), f.data(), f.size());
  return m;
}

// `f` as a chain of `seg`-byte mbufs, as a wire with small buffers would give it; nullptr (and
// a test failure) when it cannot be built.
inline rte_mbuf* to_segments(const Bytes& f, size_t seg) {
  rte_mbuf* head = nullptr;
  for (size_t at = 0; at < f.size(); at += seg) {
    rte_mbuf* s = rte_pktmbuf_alloc(g_pool);
    const size_t n = std::min<size_t>(seg, f.size() - at);
    std::memcpy(rte_pktmbuf_append(s, uint16_t(n)), f.data() + at, n);
    if (head == nullptr) {
      head = s;
    } else if (rte_pktmbuf_chain(head, s) != 0) {
      ADD_FAILURE() << "rte_pktmbuf_chain";
      rte_pktmbuf_free(s);
      rte_pktmbuf_free(head);
      return nullptr;
    }
  }
  return head;
}

inline const rte_pmd_cleave_placement& placement(rte_mbuf* m) {
  return *rte_pmd_cleave_placement_get(m, rte_pmd_cleave_placement_offset());
}

// One RX and one TX queue of `descs` entries, then start. Asserts, so call it through
// ASSERT_NO_FATAL_FAILURE where what follows needs a started port.
inline void start_port(uint16_t port, const rte_eth_conf& conf, uint16_t descs) {
  ASSERT_EQ(rte_eth_dev_configure(port, 1, 1, &conf), 0);
  ASSERT_EQ(rte_eth_rx_queue_setup(port, 0, descs, SOCKET_ID_ANY, nullptr, g_pool), 0);
  ASSERT_EQ(rte_eth_tx_queue_setup(port, 0, descs, SOCKET_ID_ANY, nullptr), 0);
  ASSERT_EQ(rte_eth_dev_start(port), 0);
}

inline void drain(rte_ring* r) {
  void* m;
  while (rte_ring_dequeue(r, &m) == 0)
    rte_pktmbuf_free(static_cast<rte_mbuf*>(m));
}

// For AppMemory::descriptor: also set l2/l3/l4_len, which net_cleave does not need.
inline constexpr bool kHeaderLengths = true;

// App memory the extbuf segments point at; the free callback is the send completion.
struct AppMemory {
  Bytes bytes;
  rte_mbuf_ext_shared_info shinfo{};
  int completions = 0;
  explicit AppMemory(Bytes b) : bytes(std::move(b)) {
    shinfo.free_cb = [](void*, void* opaque) { static_cast<AppMemory*>(opaque)->completions++; };
    shinfo.fcb_opaque = this;
  }
  // A header mbuf chained to extbuf segments over [off, off+len) (32 KB each), with the
  // checksum flags and TSO when `mss`, and the header lengths only when `header_lengths`.
  rte_mbuf* descriptor(const Bytes& header, uint64_t off, uint32_t len, uint16_t mss,
                       bool header_lengths = false) {
    rte_mbuf* h = rte_pktmbuf_alloc(g_pool);
    std::memcpy(rte_pktmbuf_append(h, uint16_t(header.size())), header.data(), header.size());
    // One reference per segment, on top of those of descriptors still in flight.
    rte_mbuf_ext_refcnt_update(&shinfo, int16_t((len + 32767) / 32768));
    for (uint32_t done = 0; done < len;) {
      const uint32_t n = std::min<uint32_t>(32768, len - done);
      rte_mbuf* p = rte_pktmbuf_alloc(g_pool);
      rte_pktmbuf_attach_extbuf(p, bytes.data() + off + done, RTE_BAD_IOVA, uint16_t(n), &shinfo);
      p->data_len = uint16_t(n);
      p->pkt_len = n;
      EXPECT_EQ(rte_pktmbuf_chain(h, p), 0);
      done += n;
    }
    if (header_lengths) {
      h->l2_len = 14;
      h->l3_len = 20;
      h->l4_len = 20;
    }
    h->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_TCP_CKSUM;
    if (mss != 0) {
      h->ol_flags |= RTE_MBUF_F_TX_TCP_SEG;
      h->tso_segsz = mss;
    }
    return h;
  }
};

// A crossed ring wire: `wa` sends into `ab`, which `wb` receives, and back over `ba`.
struct Wire {
  rte_ring* ab = nullptr;
  rte_ring* ba = nullptr;
  uint16_t wa = 0, wb = 0;
  std::string wa_name, wb_name;

  void make(const std::string& n) {
    ab = rte_ring_create(("ab" + n).c_str(), 4096, SOCKET_ID_ANY, 0);
    ba = rte_ring_create(("ba" + n).c_str(), 4096, SOCKET_ID_ANY, 0);
    ASSERT_NE(ab, nullptr);
    ASSERT_NE(ba, nullptr);
    // rte_eth_from_rings(NAME) names the port net_ring_NAME.
    const int a = rte_eth_from_rings(("wa" + n).c_str(), &ba, 1, &ab, 1, SOCKET_ID_ANY);
    const int b = rte_eth_from_rings(("wb" + n).c_str(), &ab, 1, &ba, 1, SOCKET_ID_ANY);
    ASSERT_GE(a, 0);
    ASSERT_GE(b, 0);
    wa = uint16_t(a);
    wb = uint16_t(b);
    wa_name = "net_ring_wa" + n;
    wb_name = "net_ring_wb" + n;
  }
  void close() {
    for (uint16_t w : {wa, wb}) {
      rte_eth_dev_stop(w);
      rte_eth_dev_close(w);
    }
    drain(ab);
    drain(ba);
    rte_ring_free(ab);
    rte_ring_free(ba);
  }
};

}  // namespace cleave::test::pmd
