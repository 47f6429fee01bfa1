// roce_sim_fuzz.cc - two RoCEv2 RC queue pairs (tests/sim/roce_pair.h): the real transport
// (src/transport/rocev2) over the real NIC model on both ends, SENDs, WRITEs and READs posted
// from the input, and an attacker on the wire (sim_attack.h) forging packets from the ones it
// sees: PSNs moved, opcodes, BTH flags, UDP ports, RETH/AETH/ImmDt bytes, lengths and pad
// changed, ICRC right or wrong. The link's own faults are set from the input too, and whether
// the QPs recover by go-back-N or selective repeat, the latter sprayed (`spray 4`) or not.
//
// Packets reach the QPs through the NIC model's RoCE parser and placement (rkeys, READ sinks,
// SENDs by message number) or the copy path, so the requester, the responder and the QP state
// machine see hostile input in real states.
//
// Invariants, beyond "no crash": every work request completes exactly once, in order per queue
// (send queue, receive queue), with a status of 0 or a negative errno, and a successful one
// with its length; unless the attacker forged a packet with a valid ICRC into that side: a
// WRITE that completed put its bytes at the peer, a READ that completed holds the peer's bytes,
// and a receive that completed holds the next SEND's bytes (or, taken by a WRITE with
// immediate, says so); the peer's memory that no WRITE targets is never changed; and after both
// QPs are destroyed no flow is left in either transport.
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <memory>
#include <vector>

#include "fuzz_input.h"
#include "roce_pair.h"
#include "sim_attack.h"
#include "transport/rocev2/rc.h"

namespace cleave::fuzz {
namespace {

using sim::Dir;
using transport::AppRequest;
using transport::EventKind;
using transport::ReqKind;

// Each side's MR: sources of its SENDs and WRITEs, the target of the peer's WRITEs, its receive
// buffers and READ destinations, and bytes the peer READs (never written).
constexpr uint32_t kSlot = 8192;
constexpr uint32_t kSlots = 8;
constexpr uint64_t kSrc = 0;
constexpr uint64_t kWriteTarget = kSrc + kSlot * kSlots;
constexpr uint64_t kRecvArea = kWriteTarget + kSlot * kSlots;
constexpr uint64_t kReadDst = kRecvArea + kSlot * kSlots;
constexpr uint64_t kReadSrc = kReadDst + kSlot * kSlots;
constexpr uint64_t kMrBytes = kReadSrc + kSlot * kSlots;

uint8_t pattern(uint64_t wr, uint64_t i) {
  return uint8_t(((wr + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull) >> 56);
}

struct Req {
  uint64_t wr_id;
  ReqKind kind;
  uint32_t slot;
  uint32_t len;
  bool imm;
};

struct Side {
  sim::Host* h = nullptr;
  sim::RoceSide* rs = nullptr;
  std::deque<Req> sq, rq;  // in flight, in posting order
  uint64_t next_wr = 0;
  // What this side's SENDs and WRITEs with immediate will consume at the peer, in order.
  std::deque<Req> to_peer;
  bool forged_into = false;  // the attacker sent it a packet with a valid ICRC
  uint8_t* mem() { return h->mr(rs->mr).data(); }
  bool slot_free(const std::deque<Req>& q, uint32_t s) const {
    for (const Req& r : q)
      if (r.slot == s) return false;
    return true;
  }
};

// The statuses rc.cc completes requests with.
bool known(int32_t status) {
  return status == 0 || status == -ETIMEDOUT || status == -EBUSY || status == -ECANCELED ||
         status == -EIO || status == -EACCES || status == -EINVAL || status == -EMSGSIZE ||
         status == -ENOBUFS || status == -EFAULT || status == -ENOTCONN;
}

struct Harness {
  std::unique_ptr<sim::RocePair> pair;
  std::unique_ptr<Attacker> atk;
  std::array<Side, 2> side;
  std::vector<uint8_t> read_src[2];  // each side's never-written area, as set up

  Side& peer(Side& s) { return &s == &side[0] ? side[1] : side[0]; }

  void event(Side& s, const transport::Event& e) {
    FUZZ_CHECK(e.flow == s.rs->qp);
    FUZZ_CHECK(known(e.status));
    if (e.kind == EventKind::kRecvDone) {
      FUZZ_CHECK(!s.rq.empty() && s.rq.front().wr_id == e.wr_id);
      const Req r = s.rq.front();
      s.rq.pop_front();
      Side& p = peer(s);
      if (e.status != 0) return;
      FUZZ_CHECK(!p.to_peer.empty());
      const Req m = p.to_peer.front();
      p.to_peer.pop_front();
      if (s.forged_into) return;
      FUZZ_CHECK(((e.flags & transport::kEvWrite) != 0) == (m.kind == ReqKind::kWrite));
      FUZZ_CHECK(((e.flags & transport::kEvImm) != 0) == m.imm);
      if (m.kind == ReqKind::kSend) {
        FUZZ_CHECK(e.len == m.len && e.len <= r.len);
        const uint8_t* d = s.mem() + kRecvArea + uint64_t(r.slot) * kSlot;
        for (uint32_t i = 0; i < e.len; i++)
          FUZZ_CHECK(d[i] == pattern(m.wr_id, i));
      }
      return;
    }
    FUZZ_CHECK(!s.sq.empty() && s.sq.front().wr_id == e.wr_id);
    const Req r = s.sq.front();
    s.sq.pop_front();
    const EventKind want = r.kind == ReqKind::kSend    ? EventKind::kSendDone
                           : r.kind == ReqKind::kWrite ? EventKind::kWriteDone
                                                       : EventKind::kReadDone;
    FUZZ_CHECK(e.kind == want);
    if (e.status != 0) {
      // A request that failed consumed nothing at the peer that anyone will be told of.
      return;
    }
    FUZZ_CHECK(e.len == r.len);
    Side& p = peer(s);
    if (r.kind == ReqKind::kWrite && !p.forged_into) {
      const uint8_t* d = p.mem() + kWriteTarget + uint64_t(r.slot) * kSlot;
      for (uint32_t i = 0; i < r.len; i++)
        FUZZ_CHECK(d[i] == pattern(r.wr_id, i));
    }
    if (r.kind == ReqKind::kRead && !s.forged_into) {
      const uint8_t* d = s.mem() + kReadDst + uint64_t(r.slot) * kSlot;
      FUZZ_CHECK(std::memcmp(d, p.mem() + kReadSrc + uint64_t(r.slot) * kSlot, r.len) == 0);
    }
  }

  // A SEND, WRITE or READ from `s`, `len` bytes, in a slot no request of its kind holds.
  void post(Side& s, ReqKind kind, uint32_t len, bool imm, uint32_t rkey) {
    if (s.sq.size() >= kSlots) return;
    uint32_t slot = 0;
    while (slot < kSlots && !s.slot_free(s.sq, slot))
      slot++;
    if (slot == kSlots) return;
    const uint64_t wr = s.next_wr++;
    AppRequest q{};
    q.kind = kind;
    q.len = len;
    q.wr_id = wr;
    if (imm && kind != ReqKind::kRead) {
      q.flags = transport::kReqImm;
      q.imm = uint32_t(wr);
    }
    if (kind == ReqKind::kRead) {
      q.offset = kReadDst + uint64_t(slot) * kSlot;
      q.remote_addr = kReadSrc + uint64_t(slot) * kSlot;
    } else {
      q.offset = kSrc + uint64_t(slot) * kSlot;
      uint8_t* d = s.mem() + q.offset;
      for (uint32_t i = 0; i < len; i++)
        d[i] = pattern(wr, i);
      q.remote_addr = kWriteTarget + uint64_t(slot) * kSlot;
    }
    q.rkey = rkey;
    const Req r{wr, kind, slot, len, (q.flags & transport::kReqImm) != 0};
    s.sq.push_back(r);
    if (kind == ReqKind::kSend || (kind == ReqKind::kWrite && r.imm)) s.to_peer.push_back(r);
    pair->post(*s.h, q);
  }

  void post_recv(Side& s, uint32_t len) {
    if (s.rq.size() >= kSlots) return;
    uint32_t slot = 0;
    while (slot < kSlots && !s.slot_free(s.rq, slot))
      slot++;
    if (slot == kSlots) return;
    const uint64_t wr = s.next_wr++;
    AppRequest q{};
    q.kind = ReqKind::kRecv;
    q.len = len;
    q.wr_id = wr;
    q.offset = kRecvArea + uint64_t(slot) * kSlot;
    s.rq.push_back({wr, ReqKind::kRecv, slot, len, false});
    pair->post(*s.h, q);
  }
};

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  Reader r(data, size);
  const uint8_t setup = r.u8();
  sim::RoceConfig cfg;
  cfg.pmtu = 256u << (setup & 3);  // 256 to 2048
  cfg.link.mtu = 1500;
  if (cfg.pmtu > 1024) cfg.link.mtu = 2200;
  cfg.psn_a = r.u32() & 0xFFFFFF;
  cfg.psn_b = r.u32() & 0xFFFFFF;
  cfg.timeout = 4;  // 65 µs: failures come fast
  cfg.retry_cnt = 3;
  cfg.rnr_retry = (setup & 4) ? 6 : 1;  // never 7 (forever): every run ends
  cfg.zero_copy = (setup & 8) == 0;
  cfg.selective_repeat = (setup & 16) != 0;
  if (setup & 32) cfg.params = {{"dcqcn", "on"}};
  // Packet spraying, its reordering tolerance (32 PSNs) beside selective repeat's recovery.
  if (cfg.selective_repeat && (setup & 64) != 0) cfg.params.push_back({"spray", "4"});
  cfg.mr_bytes = kMrBytes;
  cfg.caps = {16, 16};
  Harness h;
  h.pair = std::make_unique<sim::RocePair>(1, cfg);
  FUZZ_CHECK(h.pair->ok);
  sim::RocePair& p = *h.pair;
  h.side[0] = {&p.net->a(), &p.a};
  h.side[1] = {&p.net->b(), &p.b};
  p.net->a().set_event_handler([&h](const transport::Event& e) { h.event(h.side[0], e); });
  p.net->b().set_event_handler([&h](const transport::Event& e) { h.event(h.side[1], e); });
  for (int k = 0; k < 2; k++) {
    Side& s = h.side[size_t(k)];
    uint8_t* m = s.mem() + kReadSrc;
    for (uint64_t i = 0; i < kSlot * kSlots; i++)
      m[i] = uint8_t(i * 7 + k);
    h.read_src[k].assign(m, m + kSlot * kSlots);
  }
  p.net->set_tick_ns(100'000);
  h.atk = std::make_unique<Attacker>(*p.net);

  while (!r.done()) {
    const uint8_t op = r.u8();
    Side& s = h.side[op >> 7];
    Side& peer = h.peer(s);
    const auto rkey = [&] { return (r.u8() & 7) != 0 ? uint32_t(peer.rs->mr) : r.u32(); };
    switch (op % 8) {
      case 0:
        p.net->run_for(uint64_t(r.u16()) * 100);
        break;
      case 1:
        h.post(s, ReqKind::kSend, r.u16() % (kSlot + 1), r.flag(), 0);
        break;
      case 2:
        h.post_recv(s, r.u16() % (kSlot + 1));
        break;
      case 3: {
        const uint32_t len = r.u16() % (kSlot + 1);
        const bool imm = r.flag();
        h.post(s, ReqKind::kWrite, len, imm, rkey());
        break;
      }
      case 4: {
        const uint32_t len = r.u16() % (kSlot + 1);
        h.post(s, ReqKind::kRead, len, false, rkey());
        break;
      }
      case 5: {  // a forged packet towards this side
        const Dir d = &s == &h.side[1] ? Dir::kAtoB : Dir::kBtoA;
        if (h.atk->forge(r, d)) s.forged_into = true;
        break;
      }
      case 6:  // the link's own faults towards this side
        faults_from(r, p.net->faults(&s == &h.side[1] ? Dir::kAtoB : Dir::kBtoA));
        break;
      default:
        p.net->run_for(20'000);
        break;
    }
  }
  // Let every request finish or fail; then the peer's never-written bytes are as they were.
  for (sim::Dir d : {Dir::kAtoB, Dir::kBtoA})
    p.net->faults(d) = sim::Faults{};
  p.net->run_until([&] { return h.side[0].sq.empty() && h.side[1].sq.empty(); }, 2'000'000'000);
  p.net->run_for(1000);  // receives posted last reach the transport
  for (int k = 0; k < 2; k++) {
    Side& s = h.side[size_t(k)];
    if (!s.forged_into) {
      FUZZ_CHECK(std::memcmp(s.mem() + kReadSrc, h.read_src[k].data(), kSlot * kSlots) == 0);
    }
  }
  // Destroying the QPs completes whatever is left, in order, and leaves no flow.
  for (Side& s : h.side) {
    FUZZ_CHECK(s.rs->rc->destroy_qp(s.rs->qp, *s.h) == 0);
    s.h->flush();
    FUZZ_CHECK(s.sq.empty() && s.rq.empty());
    FUZZ_CHECK(s.rs->rc->flow_count() == 0);
  }
  return 0;
}
