// stats.h - the dataplane's counters: per lcore, per port, per protocol, drops by reason.
//
// Written only by the dataplane lcore as plain integers; other threads see them only through a
// snapshot the dataplane copies into a control request (ctl_channel.h).
//
// Every received packet is counted once by its fate: answered (arp_replies_tx,
// icmp_echo_replies), absorbed, handed to the kernel (to_kernel, or exception_full), or dropped
// by reason. Replies the NIC then refuses are counted again under tx_full.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace cleave::dp {

// X(enumerator, name shown to operators, meaning)
#define CLEAVE_DROP_REASONS(X)                                                                 \
  X(kRunt, "runt", "frame shorter than its headers claim")                                     \
  X(kNotForUs, "not_for_us", "destination MAC is not ours, broadcast or multicast")            \
  X(kUnknownEthertype, "unknown_ethertype", "not ARP or IPv4, and no exception tap")           \
  X(kArpMalformed, "arp_malformed", "ARP not Ethernet/IPv4, or bad opcode")                    \
  X(kArpNotForUs, "arp_not_for_us", "ARP request for an address that is not ours")             \
  X(kIpv4Malformed, "ipv4_malformed", "bad version, header length or total length")            \
  X(kIpv4BadChecksum, "ipv4_bad_checksum", "IPv4 header checksum mismatch")                    \
  X(kIpv4NotOurs, "ipv4_not_ours", "IPv4 destination is not this port's address")              \
  X(kIpv4Fragment, "ipv4_fragment", "IPv4 fragment, and no exception tap")                     \
  X(kIcmpMalformed, "icmp_malformed", "ICMP shorter than its header")                          \
  X(kIcmpBadChecksum, "icmp_bad_checksum", "ICMP checksum mismatch")                           \
  X(kIcmpUnhandled, "icmp_unhandled", "ICMP other than echo request, and no exception tap")    \
  X(kNoHandler, "no_handler", "IPv4 protocol no flow handles, and no exception tap")           \
  X(kExceptionFull, "exception_full", "the exception tap's TX queue was full")                 \
  X(kTxFull, "tx_full", "the port's TX queue was full")                                        \
  X(kNoMbuf, "no_mbuf", "no packet buffer for a copy")                                         \
  X(kNoTransport, "no_transport", "frame of a NIC flow that no transport serves")              \
  X(kTcpMalformed, "tcp_malformed", "TCP header truncated or bad, or a multi-segment frame")   \
  X(kTcpBadChecksum, "tcp_bad_checksum", "TCP checksum mismatch")                              \
  X(kTcpNoFlow, "tcp_no_flow", "TCP segment for no flow or listener (answered with RST)")      \
  X(kRoceMalformed, "roce_malformed", "RoCEv2 UDP or BTH truncated, or lengths that disagree") \
  X(kRoceBadUdpChecksum, "roce_bad_udp_checksum",                                              \
    "RoCEv2 with a UDP checksum (optional there) that is wrong")                               \
  X(kRoceNoQp, "roce_no_qp", "RoCEv2 packet for no queue pair of this peer")                   \
  X(kUdpMalformed, "udp_malformed", "UDP to a claimed port, truncated or its length bad")      \
  X(kUdpBadChecksum, "udp_bad_checksum", "UDP to a claimed port, checksum mismatch")           \
  X(kUdpNoFlow, "udp_no_flow", "UDP to a claimed port of no flow or listener")                 \
  X(kHandOffFull, "hand_off_full", "another shard's inbox was full (a frame of its flows)")

enum class Drop : uint8_t {
#define CLEAVE_X(e, name, what) e,
  CLEAVE_DROP_REASONS(CLEAVE_X)
#undef CLEAVE_X
      kCount
};

inline constexpr std::array<std::string_view, static_cast<size_t>(Drop::kCount)> kDropNames = {
#define CLEAVE_X(e, name, what) name,
    CLEAVE_DROP_REASONS(CLEAVE_X)
#undef CLEAVE_X
};

inline constexpr std::array<std::string_view, static_cast<size_t>(Drop::kCount)> kDropMeanings = {
#define CLEAVE_X(e, name, what) what,
    CLEAVE_DROP_REASONS(CLEAVE_X)
#undef CLEAVE_X
};

struct LcoreStats {
  uint64_t iterations = 0;
  uint64_t busy_iterations = 0;
  uint64_t busy_cycles = 0;  // TSC cycles in iterations that moved packets or fired timers
  uint64_t idle_cycles = 0;  // TSC cycles in iterations that found nothing (sleep included)
};

struct PortStats {
  uint64_t rx_packets = 0;
  uint64_t rx_bytes = 0;
  uint64_t tx_packets = 0;
  uint64_t tx_bytes = 0;
  uint64_t to_kernel = 0;    // handed to the exception tap
  uint64_t from_kernel = 0;  // sent on behalf of the exception tap
  uint64_t absorbed = 0;     // used up without an answer: ARP replies the cache learned from
  uint64_t handed_off = 0;   // received here, for another shard's flow or listener
  uint64_t handed_in = 0;    // received by another shard, for this one's
};

struct ProtoStats {
  uint64_t arp_requests_rx = 0;
  uint64_t arp_replies_rx = 0;
  uint64_t arp_requests_tx = 0;
  uint64_t arp_replies_tx = 0;
  uint64_t arp_conflicts = 0;   // someone else claims one of our addresses
  uint64_t arp_resolved = 0;    // neighbours that answered
  uint64_t arp_failed = 0;      // neighbours that did not answer all retries
  uint64_t arp_table_full = 0;  // could not add a neighbour: cache full
  uint64_t icmp_echo_requests = 0;
  uint64_t icmp_echo_replies = 0;
};

// The flow path (flows.h). X(field, meaning)
#define CLEAVE_FLOW_COUNTERS(X)                                                               \
  X(rx_segments, "segments handed to transports")                                             \
  X(rx_copied_bytes, "payload bytes of deferred segments copied into app buffers")            \
  X(tx_descs, "descriptors transports emitted")                                               \
  X(tx_no_neighbour, "descriptors dropped: next hop not resolved yet")                        \
  X(tx_no_mbuf, "descriptors dropped: no mbuf")                                               \
  X(tx_bad_desc, "descriptors dropped: unknown flow, MR or bad lengths")                      \
  X(tx_too_long, "descriptors dropped: payload over transport::kMaxTxLen")                    \
  X(rst_sent, "RSTs sent for segments that matched no flow")                                  \
  X(flows_opened, "flows created (accepted or connecting)")                                   \
  X(flows_closed, "flows released by their transport")                                        \
  X(accept_refused,                                                                           \
    "new flows refused: flow table, the listener's completion pipe, or its app's flow quota " \
    "full")                                                                                   \
  X(flows_over_quota,                                                                         \
    "connects, accepts and QPs refused: their app holds quota.flows flows (CL_EDQUOT)")       \
  X(binding_refused,                                                                          \
    "listens, connects, accepts refused by a binding: another uid's port or tuple, or (on "   \
    "accept) a tuple bound to another transport than the listener's")                         \
  X(events, "flow events and completions posted to apps")                                     \
  X(events_dropped, "events for flows whose app is gone")                                     \
  X(data_coalesced, "data events delayed because the completion pipe was full")               \
  X(nic_errors, "NIC commands that failed (posted ones: the NIC counts them, nic_cmd_err_*)")

struct FlowStats {
#define CLEAVE_X(f, what) uint64_t f = 0;
  CLEAVE_FLOW_COUNTERS(CLEAVE_X)
#undef CLEAVE_X
};

inline constexpr size_t kMaxPorts = 16;

struct DataplaneStats {
  LcoreStats lcore;
  std::array<PortStats, kMaxPorts> ports;
  ProtoStats proto;
  FlowStats flows;
  std::array<uint64_t, static_cast<size_t>(Drop::kCount)> drops{};

  // Adds another shard's counters (every field is a count).
  DataplaneStats& operator+=(const DataplaneStats& o) {
    add(lcore, o.lcore);
    for (size_t i = 0; i < ports.size(); i++)
      add(ports[i], o.ports[i]);
    add(proto, o.proto);
    add(flows, o.flows);
    for (size_t i = 0; i < drops.size(); i++)
      drops[i] += o.drops[i];
    return *this;
  }

 private:
  // The counter structs above are uint64_t fields and nothing else.
  template <class T>
  static void add(T& a, const T& b) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) % sizeof(uint64_t) == 0);
    constexpr size_t n = sizeof(T) / sizeof(uint64_t);
    auto x = std::bit_cast<std::array<uint64_t, n>>(a);
    const auto y = std::bit_cast<std::array<uint64_t, n>>(b);
    for (size_t i = 0; i < n; i++)
      x[i] += y[i];
    a = std::bit_cast<T>(x);
  }
};

}  // namespace cleave::dp
