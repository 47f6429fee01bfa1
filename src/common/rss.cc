// rss.cc - the Toeplitz hash, bit by bit as the specification states it, and port choice.
#include "common/rss.h"

#include <bit>

#include "common/wire.h"

namespace cleave::rss {

uint32_t toeplitz(const Key& key, const uint8_t* input, size_t n) {
  uint32_t h = 0;
  for (size_t i = 0; i < n && i + 4 < kKeyBytes; i++) {
    // The 40 key bits from bit 8i on: input bit b of byte i takes the 32 of them from bit 8i + b.
    // Only the set bits cost a step: bit b from the top is bit 7 - b from the bottom.
    const uint64_t k = uint64_t(wire::load32(&key[i])) << 8 | key[i + 4];
    for (unsigned bits = input[i]; bits != 0; bits &= bits - 1)
      h ^= uint32_t(k >> (std::countr_zero(bits) + 1));
  }
  return h;
}

uint32_t hash_ipv4(const Key& key, uint32_t src_ip, uint32_t dst_ip) {
  uint8_t in[8];
  wire::store32(in, src_ip);
  wire::store32(in + 4, dst_ip);
  return toeplitz(key, in, sizeof in);
}

uint32_t hash_ipv4_l4(const Key& key, uint32_t src_ip, uint32_t dst_ip, uint16_t src_port,
                      uint16_t dst_port) {
  uint8_t in[12];
  wire::store32(in, src_ip);
  wire::store32(in + 4, dst_ip);
  wire::store16(in + 8, src_port);
  wire::store16(in + 10, dst_port);
  return toeplitz(key, in, sizeof in);
}

Reta default_reta(uint16_t queues) {
  Reta r{};
  const uint16_t q = queues == 0 ? 1 : queues;
  for (uint32_t i = 0; i < kRetaSize; i++)
    r[i] = uint16_t(i % q);
  return r;
}

uint32_t port_for_queue(const Key& key, const Reta& reta, uint32_t local_ip, uint32_t remote_ip,
                        uint16_t remote_port, uint16_t queue, uint16_t lo, uint16_t hi,
                        uint16_t start) {
  if (lo > hi || start < lo || start > hi) return kNoPort;
  const uint32_t span = uint32_t(hi) - lo + 1;
  for (uint32_t i = 0; i < span; i++) {
    const auto p = uint16_t(lo + (uint32_t(start) - lo + i) % span);
    if (reply_queue(key, reta, local_ip, p, remote_ip, remote_port) == queue) return p;
  }
  return kNoPort;
}

}  // namespace cleave::rss
