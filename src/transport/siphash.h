// siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), the keyed hash behind TCP's SYN cookies
// and the dataplane's ephemeral port choice (RFC 6056): unpredictable to whoever does not hold
// the 128-bit key, cheap enough for a handshake.
//
// Dependencies: the standard library only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cleave::transport {

// SipHash-2-4 of `n` whole 64-bit words (each read as 8 little-endian bytes) under `key`.
inline uint64_t siphash24(const uint64_t key[2], const uint64_t* m, size_t n) {
  auto rotl = [](uint64_t x, int b) { return x << b | x >> (64 - b); };
  uint64_t v0 = 0x736f6d6570736575ull ^ key[0];
  uint64_t v1 = 0x646f72616e646f6dull ^ key[1];
  uint64_t v2 = 0x6c7967656e657261ull ^ key[0];
  uint64_t v3 = 0x7465646279746573ull ^ key[1];
  auto round = [&] {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  };
  auto absorb = [&](uint64_t w) {
    v3 ^= w;
    round();
    round();
    v0 ^= w;
  };
  for (size_t i = 0; i < n; i++)
    absorb(m[i]);
  absorb(uint64_t(n * 8) << 56);
  v2 ^= 0xff;
  for (int i = 0; i < 4; i++)
    round();
  return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace cleave::transport
