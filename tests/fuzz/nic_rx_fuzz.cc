// nic_rx_fuzz.cc - the NIC model's receive path (hw/fpga/model) on frames, and the driver
// commands that set up its flows, MRs, MS lists and READ sinks, all from the input.
//
// Frames reach the whole RX path: Ethernet/IPv4, TCP (options, the message option), UDP, RoCEv2
// (BTH, RETH, AETH, ICRC) and Solar headers, flow lookup and every placement decision. Optional
// fix-ups make a mutated frame's lengths and checksums right again, so placement is reached
// with checksum verification on as well as off. TX requests with fuzzed headers run too.
//
// Invariants, checked after every operation, beyond "no crash":
// - app memory changes only inside the fragments the RX entry reports, each fragment lies inside
//   a posted MS of the frame's flow, one of its READ sinks or (RoCE WRITE) an MR its owner
//   allows remote writes to, and holds the frame's payload bytes in order;
// - the RX entry is self-consistent (reason iff deferred, placed + trimmed = payload, header
//   bytes copied from the frame);
// - counters add up (frames, decisions, defer reasons, placed bytes, fragments, commands, TX
//   statuses, completions) and the tables match a shadow the harness keeps: flows in use, each
//   flow's MS count and READ sinks, the memory report's entries in use.
#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <vector>

#include "common/wire.h"
#include "fuzz_input.h"
#include "nic_model.h"
#include "nic_rx_ops.h"

namespace cleave::fuzz {
namespace {

using nic::Decision;
using nic::Err;

constexpr uint32_t kFlows = 8;  // the model's flow table; ids up to kIds probe its bound
constexpr uint32_t kMrs = 8;    // likewise for MRs
constexpr uint32_t kIds = 10;
constexpr size_t kMrSlot = 4096;  // the largest MR
constexpr size_t kGuard = 64;     // bytes between MRs that nothing may write
constexpr size_t kArena = kMrs * (kMrSlot + kGuard) + kGuard;
constexpr size_t kMaxFrame = 2048;
using namespace nic_rx;

struct Ms {
  uint16_t mr;
  uint64_t off;
  uint32_t len;
  uint32_t msg;
  bool dead;  // retired by message number: a tombstone until it reaches the head
};
struct Sink {
  uint32_t psn;
  uint16_t mr;
  uint64_t off;
  uint32_t len;
};
struct ShadowFlow {
  bool used = false;
  nic::FlowSpec spec;
  std::deque<Ms> ms;
  std::vector<Sink> sinks;
};
struct ShadowMr {
  bool used = false;
  uint64_t len = 0;
  uint32_t owner = 0;
  uint8_t access = 0;
};

struct Harness {
  explicit Harness(const nic::NicConfig& cfg) : m(cfg), arena(kArena, 0xEE), before(kArena) {}

  nic::NicModel m;
  std::vector<uint8_t> arena;
  std::vector<uint8_t> before;
  std::array<ShadowFlow, kIds> flows{};
  std::array<ShadowMr, kIds> mrs{};
  uint64_t commands = 0;
  uint64_t frames = 0, placed_bytes = 0, trimmed_bytes = 0, fragments = 0;
  uint64_t tx_calls = 0, tx_full = 0, tx_polled = 0;

  uint8_t* mr_base(uint32_t id) { return arena.data() + kGuard + (id % kMrs) * (kMrSlot + kGuard); }

  Err cmd(Err e) {
    commands++;
    return e;
  }

  size_t refs(uint16_t mr) const {
    size_t n = 0;
    for (const ShadowFlow& f : flows) {
      for (const Ms& s : f.ms)
        n += !s.dead && s.mr == mr;
      for (const Sink& s : f.sinks)
        n += s.mr == mr;
    }
    return n;
  }

  static void drop_dead_heads(ShadowFlow& f) {
    while (!f.ms.empty() && f.ms.front().dead)
      f.ms.pop_front();
  }

  // Is [off, off + len) of MR `mr` a place the frame's flow may receive into?
  bool allowed(const ShadowFlow& f, uint16_t mr, uint64_t off, uint32_t len) const {
    auto inside = [&](uint16_t m2, uint64_t o2, uint64_t l2) {
      return m2 == mr && off >= o2 && len <= l2 && off - o2 <= l2 - len;
    };
    for (const Ms& s : f.ms) {
      if (!s.dead && inside(s.mr, s.off, s.len)) return true;
    }
    for (const Sink& s : f.sinks) {
      if (inside(s.mr, s.off, s.len)) return true;
    }
    if (f.spec.parser == nic::Parser::kRoce && mr < kIds) {
      const ShadowMr& r = mrs[mr];
      if (r.used && (r.access & nic::kMrRemoteWrite) && r.owner == f.spec.owner &&
          inside(mr, 0, r.len)) {
        return true;
      }
    }
    return false;
  }

  void rx(std::span<const uint8_t> frame) {
    std::memcpy(before.data(), arena.data(), kArena);
    nic::RxEntry e;
    const Decision d = m.rx(frame, e);
    frames++;
    FUZZ_CHECK(d == e.decision);
    FUZZ_CHECK((d == Decision::kDeferred) == (e.reason != nic::DeferReason::kNone));
    FUZZ_CHECK(e.header_len <= std::min<size_t>(frame.size(), nic::kMaxHeaderBytes));
    FUZZ_CHECK(e.header_len == 0 || std::memcmp(e.header.data(), frame.data(), e.header_len) == 0);
    const bool wrote = d == Decision::kPlaced || d == Decision::kTrimmed;
    FUZZ_CHECK(wrote || (e.nfrags == 0 && e.placed == 0));
    FUZZ_CHECK((d == Decision::kTrimmed) == (wrote && e.trimmed != 0));
    if (e.flow_id != nic::kNoFlow) {
      FUZZ_CHECK(e.flow_id < kFlows && flows[e.flow_id].used);
    } else {
      FUZZ_CHECK(d == Decision::kDeferred);
    }
    if (!wrote) {
      FUZZ_CHECK(std::memcmp(before.data(), arena.data(), kArena) == 0);
      if (e.flow_id != nic::kNoFlow) sync_unreliable(flows[e.flow_id]);
      return;
    }
    ShadowFlow& f = flows[e.flow_id];
    FUZZ_CHECK(e.nfrags >= 1 && e.nfrags <= nic::kMaxFrags);
    FUZZ_CHECK(uint64_t(e.placed) + e.trimmed == e.payload_len);
    uint64_t sum = 0;
    bool overlap = false;
    for (uint8_t i = 0; i < e.nfrags; i++) {
      const nic::Placement& p = e.frags[i];
      FUZZ_CHECK(p.len != 0);
      FUZZ_CHECK(allowed(f, p.mr, p.offset, p.len));
      sum += p.len;
      for (uint8_t j = 0; j < i; j++) {
        const nic::Placement& q = e.frags[j];
        overlap |= q.mr == p.mr && p.offset < q.offset + q.len && q.offset < p.offset + p.len;
      }
    }
    FUZZ_CHECK(sum == e.placed);
    // Nothing else changed: put the fragments' new bytes into the old image and compare.
    for (uint8_t i = 0; i < e.nfrags; i++) {
      const nic::Placement& p = e.frags[i];
      const size_t at = size_t(mr_base(p.mr) - arena.data()) + p.offset;
      std::memcpy(before.data() + at, arena.data() + at, p.len);
    }
    FUZZ_CHECK(std::memcmp(before.data(), arena.data(), kArena) == 0);
    // The fragments hold the payload, from the first byte after the trimmed ones, in order.
    if (!overlap && e.header_len < nic::kMaxHeaderBytes) {
      size_t src = size_t(e.header_len) + e.trimmed;
      for (uint8_t i = 0; i < e.nfrags; i++) {
        const nic::Placement& p = e.frags[i];
        FUZZ_CHECK(src + p.len <= frame.size());
        FUZZ_CHECK(std::memcmp(mr_base(p.mr) + p.offset, frame.data() + src, p.len) == 0);
        src += p.len;
      }
    }
    placed_bytes += e.placed;
    trimmed_bytes += e.trimmed;
    fragments += e.nfrags;
    // An unreliable flow's payload went whole into its oldest live MS, which is consumed.
    if (unreliable(f)) {
      drop_dead_heads(f);
      FUZZ_CHECK(!f.ms.empty() && e.nfrags == 1 && e.frags[0].mr == f.ms.front().mr &&
                 e.frags[0].offset == f.ms.front().off);
      f.ms.pop_front();
    }
  }

  static bool unreliable(const ShadowFlow& f) {
    return f.spec.parser == nic::Parser::kUdp ||
           (!f.spec.reliable && f.spec.parser != nic::Parser::kRoce);
  }

  // Placement on an unreliable flow drops the tombstones at the head of its list first, even when
  // it then defers the frame: follow the model there, nowhere else.
  void sync_unreliable(ShadowFlow& f) {
    const uint32_t id = uint32_t(&f - flows.data());
    if (f.used && unreliable(f) && m.ms_count(id) < f.ms.size()) drop_dead_heads(f);
  }

  void check_tables() {
    uint32_t used = 0;
    uint64_t entries = 0;
    for (uint32_t id = 0; id < kIds; id++) {
      const ShadowFlow& f = flows[id];
      FUZZ_CHECK(id < kFlows || !f.used);
      if (!f.used) continue;
      used++;
      FUZZ_CHECK(m.ms_count(id) == f.ms.size());
      FUZZ_CHECK(m.read_count(id) == f.sinks.size());
      entries += f.ms.size() + f.sinks.size();
    }
    FUZZ_CHECK(m.flows_in_use() == used);
    const nic::MemoryReport r = m.memory_report();
    FUZZ_CHECK(r.lines[0].in_use == used);
    FUZZ_CHECK(r.lines[3].in_use + r.lines[4].in_use == entries);
  }

  void check_counters() {
    using nic::Ctr;
    FUZZ_CHECK(m.counter(Ctr::kRxFrames) == frames);
    FUZZ_CHECK(m.counter(Ctr::kRxInOrder) + m.counter(Ctr::kRxPastHole) +
                   m.counter(Ctr::kRxTrimmed) + m.counter(Ctr::kRxDropped) +
                   m.counter(Ctr::kRxNoPayload) + m.counter(Ctr::kRxDeferred) ==
               frames);
    uint64_t deferred = 0;
    for (size_t r = 0; r < size_t(nic::DeferReason::kCount); r++)
      deferred += m.defer_count(nic::DeferReason(r));
    FUZZ_CHECK(deferred == m.counter(Ctr::kRxDeferred));
    FUZZ_CHECK(m.defer_count(nic::DeferReason::kNone) == 0);
    FUZZ_CHECK(m.counter(Ctr::kRxPlacedBytes) == placed_bytes);
    FUZZ_CHECK(m.counter(Ctr::kRxTrimmedBytes) == trimmed_bytes);
    FUZZ_CHECK(m.counter(Ctr::kRxFragments) == fragments);
    FUZZ_CHECK(m.counter(Ctr::kCmdOk) + m.counter(Ctr::kCmdErrors) == commands);
    uint64_t errs = 0;
    for (size_t e = 0; e < size_t(Err::kCount); e++)
      errs += m.cmd_error_count(Err(e));
    FUZZ_CHECK(errs == m.counter(Ctr::kCmdErrors) && m.cmd_error_count(Err::kOk) == 0);
    uint64_t tx = 0, tx_bad = 0;
    for (size_t s = 0; s < size_t(nic::TxStatus::kCount); s++) {
      tx += m.tx_status_count(nic::TxStatus(s));
      if (nic::TxStatus(s) != nic::TxStatus::kOk) tx_bad += m.tx_status_count(nic::TxStatus(s));
    }
    FUZZ_CHECK(m.counter(Ctr::kTxRequests) == tx_calls && tx == tx_calls);
    FUZZ_CHECK(m.counter(Ctr::kTxErrors) == tx_bad);
    FUZZ_CHECK(m.tx_status_count(nic::TxStatus::kCompletionsFull) == tx_full);
  }
};

// Fix-ups of a mutated frame, so checks that come before placement pass when the input asks.
void fix_frame(std::vector<uint8_t>& f, uint8_t fix) {
  if (f.size() < 14 + 20 || wire::load16(&f[12]) != 0x0800) return;
  uint8_t* ip = &f[14];
  const uint32_t ihl = uint32_t(ip[0] & 0xF) * 4;
  if ((ip[0] >> 4) != 4 || ihl < 20 || f.size() < 14 + ihl) return;
  if (fix & kFixLengths) wire::store16(ip + 2, uint16_t(std::min<size_t>(f.size() - 14, 0xFFFF)));
  const uint32_t total = wire::load16(ip + 2);
  if (total >= ihl && f.size() >= 14 + size_t(total) && (fix & kFixL4)) {
    uint8_t* l4 = ip + ihl;
    const uint32_t l4_len = total - ihl;
    const uint8_t proto = ip[9];
    if (proto == 17 && l4_len >= 8) {
      if (fix & kFixLengths) wire::store16(l4 + 4, uint16_t(l4_len));
      uint8_t* pl = l4 + 8;
      const uint32_t n = l4_len - 8;
      if (wire::load16(l4 + 2) == 4791) {
        wire::store16(l4 + 6, 0);
        if (n >= 12 + 4) wire::roce_icrc_store(pl + n - 4, wire::roce_icrc(ip, ihl + 8 + n - 4));
      } else if (n >= 32) {
        wire::store32(pl + 28, wire::crc32c(pl + 32, n - 32));
      }
      if (wire::load16(l4 + 6) != 0 || wire::load16(l4 + 2) != 4791) {
        wire::store16(l4 + 6, 0);
        uint16_t c =
            wire::csum_fold(wire::csum_partial(l4, l4_len, wire::pseudo_sum(ip, 17, l4_len)));
        wire::store16(l4 + 6, c == 0 ? 0xFFFF : c);
      }
    } else if (proto == 6 && l4_len >= 20) {
      wire::store16(l4 + 16, 0);
      wire::store16(l4 + 16, wire::csum_fold(
                                 wire::csum_partial(l4, l4_len, wire::pseudo_sum(ip, 6, l4_len))));
    }
  }
  if (fix & kFixIp) {
    wire::store16(ip + 10, 0);
    wire::store16(ip + 10, wire::csum_fold(wire::csum_partial(ip, ihl, 0)));
  }
}

nic::NicConfig config_from(uint8_t c) {
  nic::NicConfig cfg;
  cfg.max_flows = kFlows;
  cfg.max_mrs = kMrs;
  cfg.ms_chunk = 1u << (c & 3);                                // 1 to 8 entries per chunk
  cfg.ms_committed_per_flow = cfg.ms_chunk * ((c >> 2) & 3);   // 0 to 3 chunks per flow
  cfg.ms_store_entries = cfg.ms_chunk * (((c >> 4) & 3) * 6);  // 0 to 18 chunks shared
  cfg.tx_completions = 4;
  cfg.verify_l4_checksum = (c & 0x80) != 0;
  return cfg;
}

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  Reader r(data, size);
  Harness h(config_from(r.u8()));
  std::vector<uint8_t> frame;
  std::vector<uint8_t> tx_out(16384);
  std::array<nic::TxFrame, 8> tx_frames{};
  std::array<nic::TxCompletion, 8> done{};
  while (!r.done()) {
    const uint8_t op = r.u8() % kOpCount;
    const uint32_t id = r.u8() % kIds;
    ShadowFlow& f = h.flows[id];
    switch (op) {
      case kMrAdd: {
        const uint64_t len = 1 + r.u16() % kMrSlot;
        const uint32_t owner = r.u8() % 2;
        const uint8_t access = r.u8() % 5;  // 4: a bad flag
        const uint16_t tag = r.u8() % 2;
        const Err e = h.cmd(h.m.mr_add(uint16_t(id), h.mr_base(id), len, owner, access, tag));
        FUZZ_CHECK(!h.mrs[id].used || e != Err::kOk);
        if (e == Err::kOk) h.mrs[id] = {true, len, owner, access};
        break;
      }
      case kMrRemove: {
        const Err e = h.cmd(h.m.mr_remove(uint16_t(id)));
        if (h.mrs[id].used) FUZZ_CHECK((e == Err::kMrInUse) == (h.refs(uint16_t(id)) != 0));
        FUZZ_CHECK((e == Err::kOk) == (h.mrs[id].used && h.refs(uint16_t(id)) == 0));
        if (e == Err::kOk) h.mrs[id] = {};
        break;
      }
      case kFlowAdd: {
        nic::FlowSpec s;
        s.parser = nic::Parser(r.u8() % 4);
        const uint8_t bits = r.u8();
        s.key.proto = s.parser == nic::Parser::kTcp ? 6 : 17;
        if (bits & 0x80) s.key.proto ^= 6 ^ 17;  // the wrong protocol for the parser
        s.key.src_ip = kIps[bits & 3];
        s.key.dst_ip = kIps[(bits >> 2) & 3];
        s.key.src_port = r.u16();
        s.key.dst_port = r.u16();
        s.mode = (bits & 0x10) ? nic::FlowMode::kCopy : nic::FlowMode::kZeroCopy;
        s.reliable = (bits & 0x20) == 0;
        s.messages = (bits & 0x40) != 0;
        s.initial_seq = r.u32();
        s.pmtu = 256u << (r.u8() % 6);
        s.initial_offset = r.u32();
        s.qpn = r.u32() & 0x1FFFFFF;  // RoCE QPN, Solar connection: half 2^24 or more (refused)
        s.owner = r.u8() % 2;
        const Err e = h.cmd(h.m.flow_add(id, s));
        FUZZ_CHECK(!f.used || e != Err::kOk);
        if (e == Err::kOk) {
          f = ShadowFlow{};
          f.used = true;
          f.spec = s;
        }
        break;
      }
      case kFlowRemove: {
        const Err e = h.cmd(h.m.flow_remove(id));
        FUZZ_CHECK((e == Err::kOk) == f.used);
        if (e == Err::kOk) f = ShadowFlow{};
        break;
      }
      case kFlowMode: {
        const Err e = h.cmd(h.m.flow_set_mode(id, nic::FlowMode(r.u8() % 3)));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        break;
      }
      case kMsPost: {
        nic::MsDesc ms;
        ms.mr = uint16_t(r.u8() % kIds);
        ms.offset = r.u16() % (kMrSlot + 16);
        ms.len = r.u16() % (kMrSlot + 16);
        ms.msg_seq = r.flag() ? r.u32() : uint32_t(f.ms.empty() ? 0 : f.ms.back().msg + 1);
        const Err e = h.cmd(h.m.ms_post(id, ms));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        if (e == Err::kOk) {
          FUZZ_CHECK(h.mrs[ms.mr].used && ms.offset + ms.len <= h.mrs[ms.mr].len);
          f.ms.push_back({ms.mr, ms.offset, ms.len, ms.msg_seq, false});
        }
        break;
      }
      case kCursor: {
        const uint32_t c = r.flag() ? h.m.cursor(id) + r.u16() : r.u32();
        const Err e = h.cmd(h.m.cursor_update(id, c));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        if (e == Err::kOk) FUZZ_CHECK(h.m.cursor(id) == c);
        break;
      }
      case kMsRetire: {
        const uint32_t count = r.u8() % 6;
        const Err e = h.cmd(h.m.ms_retire(id, count));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        if (e == Err::kOk) {
          FUZZ_CHECK(count <= f.ms.size());
          f.ms.erase(f.ms.begin(), f.ms.begin() + count);
          Harness::drop_dead_heads(f);
        }
        break;
      }
      case kMsRetireMsg: {
        const uint8_t k = r.u8();
        const uint32_t msg = (k & 1) && !f.ms.empty() ? f.ms[(k >> 1) % f.ms.size()].msg : r.u32();
        const Err e = h.cmd(h.m.ms_retire_msg(id, msg));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        auto it = std::find_if(f.ms.begin(), f.ms.end(),
                               [&](const Ms& s) { return !s.dead && s.msg == msg; });
        if (e == Err::kOk) {
          FUZZ_CHECK(it != f.ms.end());
          it->dead = true;
          Harness::drop_dead_heads(f);
        } else if (e == Err::kNoSuchMessage) {
          FUZZ_CHECK(it == f.ms.end());
        }
        break;
      }
      case kRoceResync: {
        const uint32_t psn = r.u32() & 0x1FFFFFF;
        const Err e = h.cmd(h.m.roce_resync(id, psn, r.u32()));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        break;
      }
      case kReadPost: {
        const uint32_t psn = r.u32() & 0x1FFFFFF;
        const uint16_t mr = uint16_t(r.u8() % kIds);
        const uint64_t off = r.u16() % (kMrSlot + 16);
        const uint32_t len = r.u16() % (kMrSlot + 16);
        const Err e = h.cmd(h.m.read_post(id, psn, mr, off, len));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        if (e == Err::kOk) {
          FUZZ_CHECK(h.mrs[mr].used && off + len <= h.mrs[mr].len);
          f.sinks.push_back({psn, mr, off, len});
        }
        break;
      }
      case kReadRetire: {
        const uint8_t k = r.u8();
        const uint32_t psn = (k & 1) && !f.sinks.empty() ? f.sinks[(k >> 1) % f.sinks.size()].psn
                                                         : r.u32() & 0x1FFFFFF;
        const Err e = h.cmd(h.m.read_retire(id, psn));
        if (!f.used) FUZZ_CHECK(e == Err::kUnknownFlow);
        auto it = std::find_if(f.sinks.begin(), f.sinks.end(),
                               [&](const Sink& s) { return s.psn == psn; });
        if (e == Err::kOk) {
          FUZZ_CHECK(it != f.sinks.end());
          f.sinks.erase(it);
        } else if (e == Err::kNoSuchMessage) {
          FUZZ_CHECK(it == f.sinks.end());
        }
        break;
      }
      case kFrame: {
        const size_t len = r.u16() % kMaxFrame;
        auto b = r.bytes(len);
        frame.assign(b.begin(), b.end());
        fix_frame(frame, r.u8());
        h.rx(frame);
        break;
      }
      case kTx: {
        nic::TxRequest t;
        auto hdr = r.bytes(r.u8() % 160);
        t.header = hdr;
        t.mr = uint16_t(r.u8() % kIds);
        t.offset = r.u16() % (kMrSlot + 16);
        t.len = r.u16() % (kMrSlot + 16);
        t.mss = r.u16();
        t.flags = r.u8() & 0x0F;
        t.cookie = h.tx_calls;
        uint16_t n = 0;
        const nic::TxStatus s = h.m.tx(t, tx_out, tx_frames, &n);
        h.tx_calls++;
        if (s == nic::TxStatus::kCompletionsFull) h.tx_full++;
        if (s == nic::TxStatus::kOk) {
          FUZZ_CHECK(n >= 1 && n <= tx_frames.size());
          for (uint16_t i = 0; i < n; i++)
            FUZZ_CHECK(tx_frames[i].offset + tx_frames[i].len <= tx_out.size());
        } else {
          FUZZ_CHECK(n == 0);
        }
        if (r.flag()) h.tx_polled += h.m.tx_poll(done);
        break;
      }
      default:
        break;
    }
    h.check_tables();
  }
  h.check_counters();
  while (size_t n = h.m.tx_poll(done))
    h.tx_polled += n;
  FUZZ_CHECK(h.tx_polled == h.tx_calls - h.tx_full);
  return 0;
}
