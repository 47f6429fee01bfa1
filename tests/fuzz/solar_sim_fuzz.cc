// solar_sim_fuzz.cc - one Solar connection (tests/sim/solar_pair.h): the real transport
// (src/transport/solar) over the real NIC model on both ends, WRITEs and READs posted from the
// input over 1 to 4 paths, and an attacker on the wire (sim_attack.h) forging packets from the
// ones it sees: types, flags, paths, connection numbers, sequences, I/O ids, offsets, indexes,
// counts, SACK bitmaps and lengths changed, UDP checksums right or wrong. The link's own faults
// are set from the input too.
//
// Invariants, beyond "no crash": every I/O completes exactly once, with a status of 0 or a
// negative errno, a successful one with its length; unless the attacker forged a packet: a
// WRITE that completed put its bytes in the volume, a READ that completed holds the volume's
// bytes, and once the faults stop every I/O completes; and after the connections close no
// connection is left in either transport.
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "sim_attack.h"
#include "solar_pair.h"

namespace cleave::fuzz {
namespace {

using sim::Dir;
using transport::EventKind;

constexpr uint32_t kSlot = 16384;
constexpr uint32_t kSlots = 8;      // I/O slots in the initiator's MRs, and in the volume
constexpr uint32_t kVolSlots = 16;  // volume slots

struct Io {
  bool read;
  uint32_t slot;      // in A's source (WRITE) or read MR (READ)
  uint32_t vol_slot;  // in the volume
  uint32_t len;
};

// The statuses solar.cc completes I/Os with.
bool known(int32_t status) {
  return status == 0 || status == -EIO || status == -EINVAL || status == -ECANCELED ||
         status == -ECONNABORTED || status == -EOPNOTSUPP;
}

uint8_t pattern(uint64_t wr, uint64_t i) {
  return uint8_t(((wr + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull) >> 56);
}

struct Harness {
  std::unique_ptr<sim::SolarPair> p;
  std::unique_ptr<Attacker> atk;
  std::map<uint64_t, Io> inflight;
  std::vector<uint8_t> shadow;  // what the volume holds, as the I/Os that completed say
  uint64_t next_wr = 1;
  size_t seen = 0;  // p->done taken so far
  bool forged = false;

  bool busy(uint32_t slot, uint32_t vol_slot, bool read) const {
    for (const auto& [wr, io] : inflight) {
      if (io.vol_slot == vol_slot || (io.read == read && io.slot == slot)) return true;
    }
    return false;
  }

  void post(bool read, uint32_t slot, uint32_t vol_slot, uint32_t len) {
    if (len == 0 || busy(slot, vol_slot, read)) return;
    const uint64_t wr = next_wr++;
    inflight[wr] = {read, slot, vol_slot, len};
    if (read) {
      std::memset(p->net->a().mr(p->dst_mr).data() + uint64_t(slot) * kSlot, 0xEE, len);
      p->read(wr, uint64_t(slot) * kSlot, uint64_t(vol_slot) * kSlot, len);
    } else {
      uint8_t* s = p->net->a().mr(p->src_mr).data() + uint64_t(slot) * kSlot;
      for (uint32_t i = 0; i < len; i++)
        s[i] = pattern(wr, i);
      p->write(wr, uint64_t(slot) * kSlot, uint64_t(vol_slot) * kSlot, len);
    }
  }

  void take() {
    for (; seen < p->done.size(); seen++) {
      const transport::Event& e = p->done[seen];
      FUZZ_CHECK(e.flow == p->fa);
      FUZZ_CHECK(known(e.status));
      auto it = inflight.find(e.wr_id);
      FUZZ_CHECK(it != inflight.end());  // exactly once
      const Io io = it->second;
      inflight.erase(it);
      FUZZ_CHECK(e.kind == (io.read ? EventKind::kReadDone : EventKind::kWriteDone));
      if (e.status != 0) continue;
      FUZZ_CHECK(e.len == io.len);
      const uint8_t* vol = p->net->b().mr(p->vol_mr).data() + uint64_t(io.vol_slot) * kSlot;
      if (io.read) {
        if (!forged) {
          const uint8_t* d = p->net->a().mr(p->dst_mr).data() + uint64_t(io.slot) * kSlot;
          FUZZ_CHECK(std::memcmp(d, shadow.data() + uint64_t(io.vol_slot) * kSlot, io.len) == 0);
        }
      } else {
        for (uint32_t i = 0; i < io.len; i++)
          shadow[uint64_t(io.vol_slot) * kSlot + i] = pattern(e.wr_id, i);
        if (!forged)
          FUZZ_CHECK(std::memcmp(vol, shadow.data() + uint64_t(io.vol_slot) * kSlot, io.len) == 0);
      }
    }
  }
};

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  Reader r(data, size);
  const uint8_t setup = r.u8();
  sim::SolarConfig cfg;
  cfg.paths = uint16_t(1 + (setup & 3));
  cfg.block_bytes = 256u << ((setup >> 2) & 3);  // 256 to 2048
  cfg.link.mtu = 2200;
  cfg.zero_copy = (setup & 16) == 0;
  cfg.first_seq = (setup & 32) != 0 ? 0xFFFFFF00u : 1;  // sequences that wrap
  cfg.src_bytes = kSlot * kSlots;
  cfg.volume_bytes = kSlot * kVolSlots;
  Harness h;
  h.p = std::make_unique<sim::SolarPair>(1, cfg);
  FUZZ_CHECK(h.p->ok);
  sim::SolarPair& p = *h.p;
  h.shadow.assign(cfg.volume_bytes, 0);
  p.net->set_tick_ns(100'000);
  h.atk = std::make_unique<Attacker>(*p.net);

  while (!r.done()) {
    const uint8_t op = r.u8();
    switch ((op & 0x7F) % 6) {
      case 0:
        p.net->run_for(uint64_t(r.u16()) * 100);
        break;
      case 1:
      case 2: {
        const uint32_t slot = r.u8() % kSlots;
        const uint32_t vol_slot = r.u8() % kVolSlots;
        h.post((op & 0x7F) % 6 == 2, slot, vol_slot, r.u16() % (kSlot + 1));
        break;
      }
      case 3: {  // a forged packet, towards the target (high bit clear) or the initiator
        h.atk->forge(r, (op & 0x80) == 0 ? Dir::kAtoB : Dir::kBtoA);
        h.forged = true;
        break;
      }
      case 4:
        faults_from(r, p.net->faults((op & 0x80) == 0 ? Dir::kAtoB : Dir::kBtoA));
        break;
      default:
        p.net->run_for(20'000);
        break;
    }
    h.take();
  }
  // Faults off: every I/O completes (a forged packet may have stranded one: no check then).
  for (Dir d : {Dir::kAtoB, Dir::kBtoA})
    p.net->faults(d) = sim::Faults{};
  p.net->run_until([&] { return h.inflight.size() == h.p->done.size() - h.seen; }, 2'000'000'000);
  h.take();
  if (!h.forged) FUZZ_CHECK(h.inflight.empty());
  // Closing completes whatever is left, once each, and leaves no connection.
  p.ini->close(p.fa, p.net->a(), -ECANCELED);
  p.tgt->close(p.fb, p.net->b(), -ECANCELED);
  p.net->a().flush();
  p.net->b().flush();
  h.take();
  FUZZ_CHECK(h.inflight.empty());
  FUZZ_CHECK(p.ini->flow_count() == 0 && p.tgt->flow_count() == 0);
  return 0;
}
