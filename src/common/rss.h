// rss.h - receive-side scaling as a NIC computes it: the Toeplitz hash, the RETA, port choice.
//
// The one definition for the NIC model (which queue a received frame reaches), the generic NIC
// backend's software steering and the dataplane (which source port lands a new connection's
// replies on its own shard, as mTCP and TAS choose it). Plain C++20, no DPDK; nothing allocates.
//
// Conventions: addresses and ports in host byte order, `src` the frame's sender. The hash input
// is the fields as they are on the wire (big-endian), in the order Microsoft's RSS specification
// and every NIC use: source address, destination address, then (4-tuple) source port and
// destination port. A queue is reta[hash % reta size], the size a power of two, so the low bits of
// the hash pick the entry as hardware does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace cleave::rss {

inline constexpr size_t kKeyBytes = 40;
using Key = std::array<uint8_t, kKeyBytes>;

// The key of Microsoft's RSS verification suite, the default of most NICs and DPDK drivers.
inline constexpr Key kDefaultKey = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
    0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
    0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

// RETA entries the model and the PMD keep (DPDK's RTE_ETH_RSS_RETA_SIZE_128).
inline constexpr uint32_t kRetaSize = 128;
inline constexpr uint16_t kMaxQueues = 16;
using Reta = std::array<uint16_t, kRetaSize>;

// The Toeplitz hash of `n` input bytes (n <= kKeyBytes - 4: the key must reach 32 bits past the
// last input bit).
uint32_t toeplitz(const Key& key, const uint8_t* input, size_t n);

// IPv4 2-tuple (addresses) and 4-tuple (addresses and TCP/UDP ports).
uint32_t hash_ipv4(const Key& key, uint32_t src_ip, uint32_t dst_ip);
uint32_t hash_ipv4_l4(const Key& key, uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                      uint16_t dst_port);

// Entries spread round-robin over `queues` queues (entry i -> i % queues), the default every
// NIC programs. queues 0 counts as 1.
Reta default_reta(uint16_t queues);
inline uint16_t reta_queue(const Reta& reta, uint32_t hash) {
  return reta[hash % kRetaSize];
}

// The queue that replies to a connection from (local_ip, local_port) to (remote_ip, remote_port)
// reach: the NIC hashes them as src = remote, dst = local.
inline uint16_t reply_queue(const Key& key, const Reta& reta, uint32_t local_ip,
                            uint16_t local_port, uint32_t remote_ip, uint16_t remote_port) {
  return reta_queue(reta, hash_ipv4_l4(key, remote_ip, local_ip, remote_port, local_port));
}

// A local port for a connection from (local_ip, port) to (remote_ip, remote_port) whose replies,
// which the NIC hashes as src = remote, dst = local, reach `queue` under `key` and `reta`: the
// first port from `start` upwards, wrapping within [lo, hi], that lands there. kNoPort when none
// in the range does (or start lies outside it). The caller skips ports in use by calling again
// from the next one; a random start spreads choices (RFC 6056).
inline constexpr uint32_t kNoPort = 0x10000;
uint32_t port_for_queue(const Key& key, const Reta& reta, uint32_t local_ip, uint32_t remote_ip,
                        uint16_t remote_port, uint16_t queue, uint16_t lo, uint16_t hi,
                        uint16_t start);

}  // namespace cleave::rss
