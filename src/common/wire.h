// wire.h - byte-order loads and stores, the Internet checksum, CRC-32, the RoCEv2 ICRC and CRC-32C.
//
// The one definition of each, for every layer: the NIC model (RX verification, TX offload), the
// transports (header parsing and building), the dataplane (the software ICRC) and the tests.
// Everything here works on raw byte pointers the caller has already bounds-checked; nothing
// allocates. Plain C++20 and the standard library: no DPDK, no other project header.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cleave::wire {

inline uint16_t load16(const uint8_t* p) {
  return uint16_t(p[0] << 8 | p[1]);
}
inline uint32_t load24(const uint8_t* p) {
  return uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | p[2];
}
inline uint32_t load32(const uint8_t* p) {
  return uint32_t(load16(p)) << 16 | load16(p + 2);
}
inline uint64_t load64(const uint8_t* p) {
  return uint64_t(load32(p)) << 32 | load32(p + 4);
}
inline void store16(uint8_t* p, uint16_t v) {
  p[0] = uint8_t(v >> 8);
  p[1] = uint8_t(v);
}
// The low 24 bits of v (a RoCE PSN or QPN).
inline void store24(uint8_t* p, uint32_t v) {
  p[0] = uint8_t(v >> 16);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v);
}
inline void store32(uint8_t* p, uint32_t v) {
  store16(p, uint16_t(v >> 16));
  store16(p + 2, uint16_t(v));
}
inline void store64(uint8_t* p, uint64_t v) {
  store32(p, uint32_t(v >> 32));
  store32(p + 4, uint32_t(v));
}

// One's-complement sum of n bytes (big-endian 16-bit words, odd tail padded with zero), added
// to `sum`. Only the last chunk of a checksummed range may have odd length.
uint64_t csum_partial(const uint8_t* p, size_t n, uint64_t sum);
// Folds a partial sum and complements it: the value to put in a checksum field.
uint16_t csum_fold(uint64_t sum);
// Partial sum of the IPv4 pseudo header (addresses as they are on the wire at p+12 of the IP
// header, protocol, L4 length).
uint64_t pseudo_sum(const uint8_t* ip_hdr, uint8_t proto, uint32_t l4_len);

// CRC-32 as zlib computes it (reflected 0xEDB88320). `crc` is the running, non-inverted state:
// start with 0xFFFFFFFF and XOR the result with 0xFFFFFFFF at the end.
uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t n);

// The RoCEv2 invariant CRC (IBTA vol. 1 annex A17.3.3):
// zlib's CRC-32 over 8 bytes of 0xFF, then the packet from the IP header up to the ICRC, with
// the fields a router may change taken as all ones: IPv4 TOS, TTL and header checksum (IPv6
// traffic class, flow label and hop limit), the UDP checksum and BTH byte 4 (FECN, BECN).
// `ip` points at the IPv4 or IPv6 header (its version nibble says which; IPv6 without extension
// headers) and `len` counts the bytes from there up to the ICRC (pad included). On the wire the
// value goes least-significant byte first (roce_icrc_store). The fields to mask are only read
// within `len`, so a short or nonsensical packet gets a value and never a read past the end.
uint32_t roce_icrc(const uint8_t* ip, size_t len);
inline void roce_icrc_store(uint8_t* p, uint32_t icrc) {
  for (size_t i = 0; i < 4; i++)
    p[i] = uint8_t(icrc >> (8 * i));
}
inline uint32_t roce_icrc_load(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
// True when the last 4 of the `len` bytes at `ip` (the packet from its IP header to the end of
// the ICRC) are its ICRC. False also when `len` cannot hold the IP, UDP and BTH headers and an
// ICRC, or the IP version is neither 4 nor 6.
bool roce_icrc_ok(const uint8_t* ip, size_t len);

// CRC-32C (Castagnoli, reflected 0x82F63B78), same conventions.
uint32_t crc32c_update(uint32_t crc, const uint8_t* p, size_t n);
inline uint32_t crc32c(const uint8_t* p, size_t n) {
  return crc32c_update(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

}  // namespace cleave::wire
