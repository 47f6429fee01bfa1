// demux.h - the part of the flow path's demultiplexing that stands alone (no DPDK): the choice of
// an ephemeral port for a connection (RFC 6056).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace cleave::dp {

// RFC 6056 3.3.4, algorithm 4 ("double-hash port selection"): each connection to a given peer
// (local address, remote address and port, protocol) walks the dynamic range from an offset
// F(peer) that only the holder of a secret key can predict, shifted by a counter table[G(peer)]
// that advances with every port tried. So ports to one peer follow each other (and are not
// reused soon), while an off-path attacker learns nothing from the ports it sees of another
// peer. F and G are SipHash-2-4 under two random keys; the counters start random.
class EphemeralPorts {
 public:
  static constexpr uint16_t kFirst = 49152;  // the dynamic range (RFC 6335), 49152-65535
  static constexpr uint32_t kCount = 65536 - kFirst;
  static constexpr size_t kTable = 256;  // counters (RFC 6056 suggests at least 10)

  // Keys and counters from the system's random source.
  EphemeralPorts();
  // Keys and counters derived from `seed`: tests only.
  explicit EphemeralPorts(uint64_t seed);

  // The first port of this peer's walk that `usable(port)` accepts, or 0 when none of the
  // kCount ports is.
  template <class Usable>
  uint16_t pick(uint8_t proto, uint32_t local_ip, uint32_t remote_ip, uint16_t remote_port,
                Usable&& usable) {
    const uint32_t offset = hash(key_f_, proto, local_ip, remote_ip, remote_port);
    uint16_t& next = table_[hash(key_g_, proto, local_ip, remote_ip, remote_port) % kTable];
    for (uint32_t n = 0; n < kCount; n++) {
      const auto port = uint16_t(kFirst + (offset + next) % kCount);
      next++;
      if (usable(port)) return port;
    }
    return 0;
  }

 private:
  static uint32_t hash(const uint64_t key[2], uint8_t proto, uint32_t local_ip, uint32_t remote_ip,
                       uint16_t remote_port);

  uint64_t key_f_[2] = {};
  uint64_t key_g_[2] = {};
  std::array<uint16_t, kTable> table_{};
};

}  // namespace cleave::dp
