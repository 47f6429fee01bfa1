// sim_attack.h - an attacker on the simulated wire (tests/sim) for the transport fuzzers: it
// remembers the last frame seen in each direction and forges new ones from it, edited as the
// input says, with lengths and checksums made right again when the input asks; and the link's
// own faults from the input.
//
// Forging from a frame just seen keeps addresses, ports, sequence numbers and QPNs plausible, so
// the fuzzer reaches the transports' state machines instead of their first checks.
#pragma once

#include <array>
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "sim_net.h"
#include "wire.h"

namespace cleave::fuzz {

// The link's own faults in one direction, from six bytes of the input: loss, duplication,
// reordering, truncation, CE marks, and one kind of bit flip at a time (a single flipped bit
// never passes a checksum; two in one frame can, and a check of the data would then blame the
// transport).
inline void faults_from(Reader& r, sim::Faults& f) {
  f.loss = (r.u8() % 8) / 40.0;
  f.duplicate = (r.u8() % 8) / 40.0;
  f.reorder = (r.u8() % 8) / 40.0;
  f.truncate = (r.u8() % 8) / 80.0;
  f.ce = (r.u8() % 8) / 20.0;
  const uint8_t c = r.u8();
  f.corrupt_header = c % 4 == 1 ? (c >> 2) / 256.0 : 0;
  f.corrupt_payload = c % 4 == 2 ? (c >> 2) / 256.0 : 0;
  f.corrupt_checksum = c % 4 == 3 ? (c >> 2) / 256.0 : 0;
}

class Attacker {
 public:
  explicit Attacker(sim::SimNet& net) : net_(net) {
    net_.set_tap([this](sim::Dir d, std::span<const uint8_t> f) {
      last_[size_t(d)].assign(f.begin(), f.end());
    });
  }

  // Fix-ups after the edits (the byte after them).
  enum Fix : uint8_t {
    kFixLengths = 1,  // IPv4 total length, UDP length
    kFixL4 = 2,       // TCP/UDP checksum; for RoCEv2 the ICRC
    kFixIp = 4,       // IPv4 header checksum
  };

  // Reads one forged frame's edits from `r` and puts it on the link in direction `d`. Returns
  // whether it is a data segment (payload bytes) whose checksums the attacker made right: one the
  // receiver cannot tell from a real one.
  bool forge(Reader& r, sim::Dir d) {
    std::vector<uint8_t> f = last_[size_t(d)];
    const size_t edits = r.u8() % 6;
    for (size_t i = 0; i < edits; i++)
      edit(r, f);
    fix_up(f, r.u8());
    net_.inject(d, f);
    forged++;
    return passes(f) && payload_len(f) != 0;
  }

  const std::vector<uint8_t>& last(sim::Dir d) const { return last_[size_t(d)]; }
  uint64_t forged = 0;

 private:
  static constexpr size_t kEth = 14;

  // The L4 header's offset and the IP header's length, or 0 when the frame is not IPv4.
  static size_t l4_at(const std::vector<uint8_t>& f) {
    if (f.size() < kEth + 20 || nic::load16(&f[12]) != 0x0800) return 0;
    const size_t ihl = size_t(f[kEth] & 0xF) * 4;
    return ihl >= 20 && f.size() >= kEth + ihl + 8 ? kEth + ihl : 0;
  }

  static size_t payload_len(const std::vector<uint8_t>& f) {
    const size_t l4 = l4_at(f);
    if (l4 == 0) return 0;
    const size_t total = kEth + nic::load16(&f[kEth + 2]);
    if (total > f.size() || total < l4) return 0;
    if (f[kEth + 9] == 6) {
      if (total < l4 + 20) return 0;
      const size_t doff = size_t(f[l4 + 12] >> 4) * 4;
      return total >= l4 + doff ? total - l4 - doff : 0;
    }
    return total - l4 >= 8 ? total - l4 - 8 : 0;
  }

  static void edit(Reader& r, std::vector<uint8_t>& f) {
    const size_t l4 = l4_at(f);
    const bool tcp = l4 != 0 && f[kEth + 9] == 6 && f.size() >= l4 + 20;
    switch (r.u8() % 7) {
      case 0:  // a byte anywhere
        if (!f.empty()) f[r.u16() % f.size()] = r.u8();
        break;
      case 1:  // TCP seq, or the BTH PSN, moved by a signed 16-bit step
        if (tcp) {
          nic::store32(&f[l4 + 4], nic::load32(&f[l4 + 4]) + uint32_t(int16_t(r.u16())));
        } else if (l4 != 0 && f.size() >= l4 + 8 + 12) {
          const uint32_t psn = nic::load24(&f[l4 + 8 + 9]) + uint32_t(int16_t(r.u16()));
          f[l4 + 17] = uint8_t(psn >> 16);
          f[l4 + 18] = uint8_t(psn >> 8);
          f[l4 + 19] = uint8_t(psn);
        }
        break;
      case 2:  // TCP ack, or the BTH opcode
        if (tcp) {
          nic::store32(&f[l4 + 8], nic::load32(&f[l4 + 8]) + uint32_t(int16_t(r.u16())));
        } else if (l4 != 0 && f.size() >= l4 + 8 + 12) {
          f[l4 + 8] = r.u8();
        }
        break;
      case 3:  // TCP flags and window, or the UDP source port
        if (tcp) {
          f[l4 + 13] = r.u8();
          nic::store16(&f[l4 + 14], r.u16());
        } else if (l4 != 0) {
          nic::store16(&f[l4], r.u16());
        }
        break;
      case 4: {  // bytes over the L4 header's options or extension headers
        if (l4 == 0) break;
        const size_t at = l4 + 20 + r.u8() % 40;  // TCP options; RoCE: after UDP + BTH
        auto b = r.bytes(r.u8() % 24);
        for (size_t i = 0; i < b.size() && at + i < f.size(); i++)
          f[at + i] = b[i];
        break;
      }
      case 5: {  // another length: cut, or grow with the input's bytes
        const size_t len = r.u16() % 1600;
        auto b = r.bytes(len > f.size() ? std::min<size_t>(len - f.size(), 64) : 0);
        const size_t old = f.size();
        f.resize(len);
        for (size_t i = 0; i < b.size() && old + i < f.size(); i++)
          f[old + i] = b[i];
        break;
      }
      case 6:  // TCP data offset, or the BTH PadCnt and version
        if (tcp) {
          f[l4 + 12] = uint8_t(r.u8() << 4);
        } else if (l4 != 0 && f.size() >= l4 + 8 + 12) {
          f[l4 + 9] = r.u8();
        }
        break;
    }
  }

  static void fix_up(std::vector<uint8_t>& f, uint8_t fix) {
    const size_t l4 = l4_at(f);
    if (l4 == 0) return;
    uint8_t* ip = &f[kEth];
    const size_t ihl = l4 - kEth;
    if (fix & kFixLengths) {
      nic::store16(ip + 2, uint16_t(std::min<size_t>(f.size() - kEth, 0xFFFF)));
      if (ip[9] == 17) nic::store16(&f[l4 + 4], uint16_t(f.size() - l4));
    }
    const size_t total = nic::load16(ip + 2);
    if ((fix & kFixL4) && total >= ihl && kEth + total <= f.size()) {
      const size_t n = total - ihl;
      if (ip[9] == 6 && n >= 20) {
        nic::store16(&f[l4 + 16], 0);
        nic::store16(&f[l4 + 16], nic::csum_fold(nic::csum_partial(
                                      &f[l4], n, nic::pseudo_sum(ip, 6, uint32_t(n)))));
      } else if (ip[9] == 17 && n >= 8 + 12 + 4 && nic::load16(&f[l4 + 2]) == 4791) {
        nic::store16(&f[l4 + 6], 0);
        nic::roce_icrc_store(&f[kEth + total - 4], nic::roce_icrc(ip, total - 4));
      }
    }
    if (fix & kFixIp) {
      nic::store16(ip + 10, 0);
      nic::store16(ip + 10, nic::csum_fold(nic::csum_partial(ip, ihl, 0)));
    }
  }

  // Would a receiver take it for a real frame: IPv4 header checksum, and the TCP checksum or
  // the RoCEv2 ICRC, right?
  static bool passes(const std::vector<uint8_t>& f) {
    const size_t l4 = l4_at(f);
    if (l4 == 0) return false;
    const uint8_t* ip = &f[kEth];
    const size_t ihl = l4 - kEth;
    const size_t total = nic::load16(ip + 2);
    if (total < ihl || kEth + total > f.size()) return false;
    if (nic::csum_fold(nic::csum_partial(ip, ihl, 0)) != 0) return false;
    const size_t n = total - ihl;
    if (ip[9] == 6) {
      return n >= 20 &&
             nic::csum_fold(nic::csum_partial(&f[l4], n, nic::pseudo_sum(ip, 6, uint32_t(n)))) == 0;
    }
    return ip[9] == 17 && nic::roce_icrc_ok(ip, total);
  }

  sim::SimNet& net_;
  std::array<std::vector<uint8_t>, 2> last_;
};

}  // namespace cleave::fuzz
