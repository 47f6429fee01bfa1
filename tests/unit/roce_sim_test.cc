// roce_sim_test.cc - RoCEv2 RC between two RcTransports over the simulated network (tests/sim):
// SEND, SEND with immediate, WRITE, WRITE with immediate and READ of 0 B to 1 MiB, checked byte
// for byte and completion by completion, through the fault matrix (docs/testing.md) (loss, lost
// ACKs, NAKs and READ responses, reordering, duplicates, corruption caught by the ICRC, PSN wrap)
// on the NIC's placement and on the copy path; retry exhaustion, RNR, remote access errors.
//
// CLEAVE_SIM_SEED replays a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "roce_pair.h"

namespace cleave::transport::roce {
namespace {

using sim::Dir;
using sim::Faults;
using sim::RoceConfig;
using sim::RocePair;

constexpr size_t kHalf = 32u << 20;     // each MR: [0, 32 MiB) and [32 MiB, 64 MiB)
constexpr size_t kScratch = 62u << 20;  // B: receives WRITEs with immediate take
constexpr uint32_t kScratchLen = 1u << 20;

struct Op {
  ReqKind kind = ReqKind::kSend;
  bool imm = false;
  uint32_t len = 0;
  size_t src = 0;  // SEND/WRITE: A's offset; READ: B's
  size_t dst = 0;  // SEND/WRITE: B's offset; READ: A's
};

// A mixed workload of `count` requests from A (sizes across PMTU boundaries), with the receives
// B must post. Offsets never overlap, so every request's bytes can be checked at the end.
std::vector<Op> workload(size_t count, uint32_t max_len = 1u << 20) {
  static const uint32_t kSizes[] = {1,    3,    4,     255,    4095,     4096,
                                    4097, 8192, 65536, 100000, 1u << 20, 0};
  std::vector<Op> ops;
  size_t a_src = 0, b_dst = 0, b_src = kHalf, a_dst = kHalf;
  for (size_t i = 0; i < count; i++) {
    Op o;
    o.len = std::min(kSizes[i % std::size(kSizes)], max_len);
    switch (i % 5) {
      case 0:
        o.kind = ReqKind::kSend;
        break;
      case 1:
        o.kind = ReqKind::kSend;
        o.imm = true;
        break;
      case 2:
        o.kind = ReqKind::kWrite;
        break;
      case 3:
        o.kind = ReqKind::kWrite;
        o.imm = true;
        break;
      default:
        o.kind = ReqKind::kRead;
        break;
    }
    if (o.kind == ReqKind::kRead) {
      o.src = b_src;
      o.dst = a_dst;
      b_src += o.len + 1;
      a_dst += o.len + 1;
    } else {
      o.src = a_src;
      o.dst = b_dst;
      a_src += o.len + 1;
      b_dst += o.len + 1;
    }
    if (a_src > kHalf || b_src > kScratch) break;
    ops.push_back(o);
  }
  return ops;
}

bool consumes_recv(const Op& o) {
  return o.kind == ReqKind::kSend || (o.kind == ReqKind::kWrite && o.imm);
}

// Runs the workload and checks everything: each request completes once, in order, with status 0
// and its length; B's receives complete in order with the right length, immediate and flags; every
// byte is where it belongs.
void run_workload(RocePair& p, const std::vector<Op>& ops, uint64_t max_ns = 60'000'000'000) {
  ASSERT_TRUE(p.ok) << p.describe();
  p.fill(p.net->a(), 0, kHalf, 1);
  p.fill(p.net->b(), kHalf, kHalf, 2);
  std::span<uint8_t> scratch = p.net->b().mr(p.b.mr).subspan(kScratch, kScratchLen);
  std::fill(scratch.begin(), scratch.end(), 0);
  size_t recvs = 0;
  for (size_t i = 0; i < ops.size(); i++) {
    const Op& o = ops[i];
    if (consumes_recv(o)) {
      // SEND: the receive is the destination. WRITE with immediate: a receive of its own
      // (in B's scratch area past 62 MiB, zeroed) that takes its completion and none of its
      // bytes, nor another message's.
      const bool send = o.kind == ReqKind::kSend;
      p.post(p.net->b(), {.kind = ReqKind::kRecv,
                          .len = send ? o.len : kScratchLen,
                          .offset = send ? o.dst : kScratch,
                          .wr_id = 1000 + i});
      recvs++;
    }
  }
  for (size_t i = 0; i < ops.size(); i++) {
    const Op& o = ops[i];
    AppRequest r{.kind = o.kind, .len = o.len, .offset = o.src, .wr_id = i};
    if (o.imm) {
      r.flags = kReqImm;
      r.imm = 0xA0000000u + uint32_t(i);
    }
    if (o.kind == ReqKind::kWrite) {
      r.rkey = p.b.mr;
      r.remote_addr = o.dst;
    } else if (o.kind == ReqKind::kRead) {
      r.offset = o.dst;
      r.rkey = p.b.mr;
      r.remote_addr = o.src;
    }
    p.post(p.net->a(), r);
  }
  const bool finished = p.net->run_until(
      [&] { return p.a.events.size() >= ops.size() && p.b.events.size() >= recvs; }, max_ns);
  std::string first_error;
  for (const Event& e : p.a.events) {
    if (e.status != 0 && first_error.empty()) {
      first_error =
          "A's request " + std::to_string(e.wr_id) + " failed: " + std::to_string(e.status);
    }
  }
  ASSERT_TRUE(finished) << "stalled: A " << p.a.events.size() << "/" << ops.size() << ", B "
                        << p.b.events.size() << "/" << recvs << " " << first_error << "\n"
                        << p.describe();
  ASSERT_EQ(p.a.events.size(), ops.size()) << p.describe();
  ASSERT_EQ(p.b.events.size(), recvs) << p.describe();
  size_t r = 0;
  for (size_t i = 0; i < ops.size(); i++) {
    const Op& o = ops[i];
    const Event& e = p.a.events[i];
    SCOPED_TRACE("request " + std::to_string(i) + " len " + std::to_string(o.len));
    const EventKind want = o.kind == ReqKind::kSend    ? EventKind::kSendDone
                           : o.kind == ReqKind::kWrite ? EventKind::kWriteDone
                                                       : EventKind::kReadDone;
    EXPECT_EQ(e.kind, want);
    EXPECT_EQ(e.status, 0) << p.describe();
    EXPECT_EQ(e.wr_id, i);
    EXPECT_EQ(e.len, o.len);
    if (o.kind == ReqKind::kRead) {
      EXPECT_TRUE(p.same(p.net->a(), o.dst, p.net->b(), o.src, o.len)) << p.describe();
    } else {
      EXPECT_TRUE(p.same(p.net->b(), o.dst, p.net->a(), o.src, o.len)) << p.describe();
    }
    if (!consumes_recv(o)) continue;
    const Event& re = p.b.events[r++];
    EXPECT_EQ(re.kind, EventKind::kRecvDone);
    EXPECT_EQ(re.status, 0);
    EXPECT_EQ(re.wr_id, 1000 + i);
    EXPECT_EQ(re.len, o.len);
    const uint8_t flags =
        uint8_t((o.imm ? kEvImm : 0) | (o.kind == ReqKind::kWrite ? kEvWrite : 0));
    EXPECT_EQ(re.flags, flags);
    if (o.imm) {
      EXPECT_EQ(re.imm, 0xA0000000u + uint32_t(i));
    }
  }
  EXPECT_TRUE(std::all_of(scratch.begin(), scratch.end(), [](uint8_t c) { return c == 0; }))
      << "bytes landed in a receive a WRITE with immediate took";
  // Nothing left over: no request outstanding at either end.
  EXPECT_EQ(p.a.rc->counters().qp_errors + p.b.rc->counters().qp_errors, 0u);
}

RoceConfig with_faults(const Faults& ab, const Faults& ba) {
  RoceConfig c;
  c.ab = ab;
  c.ba = ba;
  return c;
}

uint64_t seed(uint64_t fallback) {
  return sim::SimNet::seed_from_env(fallback);
}

// ---- lossless ---------------------------------------------------------------------------------

TEST(RoceSim, EveryOperationLossless) {
  RocePair p(seed(1), RoceConfig{});
  run_workload(p, workload(60));
  const RcCounters& a = p.a.rc->counters();
  const RcCounters& b = p.b.rc->counters();
  EXPECT_EQ(a.retransmits + b.retransmits, 0u) << p.describe();
  EXPECT_EQ(a.timeouts + b.timeouts, 0u);
  EXPECT_EQ(b.naks_sent, 0u);
  // The NIC placed SEND and WRITE payloads at B and READ responses at A.
  EXPECT_GT(b.placed_bytes, 0u);
  EXPECT_GT(a.placed_bytes, 0u);
  // ACKs were coalesced: fewer than one per request packet.
  EXPECT_LT(b.acks_sent, a.tx_packets / 4) << p.describe();
}

// tick() looks only at QPs in RTR and RTS: a host's thousands in RESET cost the loop nothing, and
// a QP that leaves RTS drops off its list (until it comes back), destroyed or not.
TEST(RoceSim, TickLooksOnlyAtQpsInRtrAndRts) {
  RocePair p(seed(3), RoceConfig{});
  ASSERT_TRUE(p.ok);
  RcTransport& rc = *p.a.rc;
  sim::Host& h = p.net->a();
  EXPECT_EQ(rc.qps_ticking(), 1u);
  for (FlowId f = 100; f < 1100; f++)
    ASSERT_EQ(rc.create_qp(f, 0x1000 + f, RoceConfig{}.caps), 0);
  EXPECT_EQ(rc.flow_count(), 1001u);
  EXPECT_EQ(rc.qps_ticking(), 1u);
  QpAttr at;
  at.state = QpState::kInit;
  ASSERT_EQ(rc.modify_qp(100, at, kAttrState | kAttrAccess, h), 0);
  at.state = QpState::kRtr;
  at.pmtu = 1024;
  ASSERT_EQ(rc.modify_qp(100, at,
                         kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn | kAttrMinRnrTimer, h),
            0);
  EXPECT_EQ(rc.qps_ticking(), 2u);
  at.state = QpState::kErr;
  ASSERT_EQ(rc.modify_qp(p.a.qp, at, kAttrState, h), 0);
  rc.tick(h);
  EXPECT_EQ(rc.qps_ticking(), 1u) << "the QP in ERR is off the list";
  for (FlowId f = 100; f < 1100; f++)
    ASSERT_EQ(rc.destroy_qp(f, h), 0);
  EXPECT_EQ(rc.qps_ticking(), 0u);
  EXPECT_EQ(rc.flow_count(), 1u);
  rc.tick(h);
}

TEST(RoceSim, SmallPmtus) {
  for (uint32_t pmtu : {256u, 1024u}) {
    SCOPED_TRACE("pmtu " + std::to_string(pmtu));
    RoceConfig c;
    c.pmtu = pmtu;
    RocePair p(seed(2), c);
    run_workload(p, workload(25, 100000));
  }
}

TEST(RoceSim, CopyPath) {
  RoceConfig c;
  c.zero_copy = false;
  RocePair p(seed(3), c);
  run_workload(p, workload(30));
  EXPECT_EQ(p.b.rc->counters().placed_bytes, 0u);
  EXPECT_GT(p.b.rc->counters().copied_bytes, 0u);
  EXPECT_EQ(p.a.rc->counters().placed_bytes, 0u);
}

TEST(RoceSim, PsnWrap) {
  RoceConfig c;
  c.psn_a = 0xFFFFF0;
  c.psn_b = 0xFFFFFA;
  c.pmtu = 1024;
  RocePair p(seed(4), c);
  // Both directions cross 2^24: PSNs at the top and then from 0 go by.
  std::array<bool, 2> high{}, low{};
  p.net->set_tap([&](Dir d, std::span<const uint8_t> f) {
    if (f.size() < 54) return;
    const uint32_t psn = uint32_t(f[51]) << 16 | uint32_t(f[52]) << 8 | f[53];
    high[size_t(d)] |= psn >= 0xFFFFF0;
    low[size_t(d)] |= psn < 0x10;
  });
  run_workload(p, workload(30, 65536));
  EXPECT_TRUE(high[0] && low[0] && high[1] && low[1]);
}

// ---- the fault matrix -------------------------------------------------------------------------

struct FaultCase {
  std::string name;
  Faults ab;
  Faults ba;
  bool zero_copy = true;
};

bool opcode_is(std::span<const uint8_t> f, uint8_t lo, uint8_t hi) {
  // Ethernet 14, IPv4 20, UDP 8: the BTH opcode.
  return f.size() > 42 && f[23] == 17 && f[42] >= lo && f[42] <= hi;
}

uint32_t psn_of(std::span<const uint8_t> f) {
  return uint32_t(f[51]) << 16 | uint32_t(f[52]) << 8 | f[53];
}

// Drops the first copy of one in `every` packets with an opcode in [lo, hi], by PSN: a lost
// packet whose retransmission gets through (a periodic filter could lose every copy of one).
std::function<bool(std::span<const uint8_t>)> first_copies(uint8_t lo, uint8_t hi, uint32_t every) {
  auto seen = std::make_shared<std::set<uint32_t>>();
  return [seen, lo, hi, every](std::span<const uint8_t> f) {
    if (!opcode_is(f, lo, hi) || f.size() < 54) return false;
    const uint32_t psn = psn_of(f);
    return seen->insert(psn).second && psn % every == 0;
  };
}

std::vector<FaultCase> fault_cases() {
  std::vector<FaultCase> v;
  auto add = [&](std::string n, Faults ab, Faults ba, bool zc = true) {
    v.push_back({std::move(n), std::move(ab), std::move(ba), zc});
  };
  Faults f;
  f.loss = 0.01;
  add("Loss1", f, f);
  add("Loss1CopyPath", f, f, false);
  f = {};
  f.loss = 0.05;
  add("Loss5", f, f);
  f = {};
  f.loss = 0.01;
  f.loss_burst = 0.3;
  add("LossBursts", f, f);
  f = {};
  Faults acks;
  acks.drop_if = [n = 0](std::span<const uint8_t> fr) mutable {
    return opcode_is(fr, kAck, kAck) && (++n % 3) == 0;  // every third ACK or NAK
  };
  add("LostAcksAndNaks", Faults{.loss = 0.01}, acks);
  Faults resp;
  resp.drop_if = first_copies(kReadRespFirst, kReadRespOnly, 5);
  add("LostReadResponses", Faults{}, resp);
  Faults reqs;
  reqs.drop_if = first_copies(kReadRequest, kReadRequest, 2);
  add("LostReadRequests", reqs, Faults{});
  Faults firsts;
  firsts.drop_if = [seen = std::make_shared<std::set<uint32_t>>()](std::span<const uint8_t> fr) {
    const bool edge =
        opcode_is(fr, kSendFirst, kSendFirst) || opcode_is(fr, kWriteFirst, kWriteFirst) ||
        opcode_is(fr, kSendLast, kSendLastImm) || opcode_is(fr, kWriteLast, kWriteLastImm) ||
        opcode_is(fr, kSendOnly, kSendOnlyImm) || opcode_is(fr, kWriteOnly, kWriteOnlyImm);
    return edge && seen->insert(psn_of(fr)).second;
  };
  add("LostFirstAndLastPackets", firsts, Faults{});
  f = {};
  f.reorder = 0.02;
  add("Reorder", f, f);
  f = {};
  f.reverse = 0.01;
  add("WindowReversal", f, f);
  f = {};
  f.duplicate = 0.02;
  add("Duplicates", f, f);
  f = {};
  f.corrupt_header = 0.005;
  f.corrupt_payload = 0.01;
  f.corrupt_checksum = 0.005;
  add("CorruptionCaughtByIcrc", f, f);
  add("CorruptionCaughtByIcrcCopyPath", f, f, false);
  f = {};
  f.truncate = 0.005;
  add("Truncation", f, f);
  f = {};
  f.loss = 0.005;
  f.reorder = 0.01;
  f.duplicate = 0.01;
  f.corrupt_payload = 0.002;
  add("Everything", f, f);
  return v;
}

void PrintTo(const FaultCase& c, std::ostream* os) {
  *os << c.name;
}

class RoceFaults : public ::testing::TestWithParam<std::tuple<FaultCase, bool>> {};

TEST_P(RoceFaults, AllDataExactlyOnceInOrder) {
  // A fresh copy: the filters keep state (the PSNs they saw) that a parameter shares.
  const std::string& name = std::get<0>(GetParam()).name;
  const std::vector<FaultCase> all = fault_cases();
  const FaultCase& c =
      *std::find_if(all.begin(), all.end(), [&](const FaultCase& f) { return f.name == name; });
  RoceConfig cfg = with_faults(c.ab, c.ba);
  cfg.zero_copy = c.zero_copy;
  cfg.selective_repeat = std::get<1>(GetParam());
  RocePair p(seed(0x40CE + std::hash<std::string>{}(c.name) % 1000), cfg);
  run_workload(p, workload(60));
  const sim::LinkStats& ab = p.net->stats(Dir::kAtoB);
  const sim::LinkStats& ba = p.net->stats(Dir::kBtoA);
  const RcCounters& a = p.a.rc->counters();
  const RcCounters& b = p.b.rc->counters();
  if (ab.dropped() + ba.dropped() + ab.corrupted() + ba.corrupted() + ab.truncated + ba.truncated >
      0) {
    EXPECT_GT(a.retransmits + b.read_responses, 0u) << p.describe();
  }
  if (c.ab.corrupt_header + c.ab.corrupt_payload + c.ab.corrupt_checksum > 0) {
    EXPECT_GT(ab.corrupted(), 0u);
  }
  // A flipped payload bit fails the ICRC (a flipped UDP checksum does not: the ICRC leaves that
  // field out, and RoCEv2 does not use it).
  if (ab.corrupted_payload > 0) {
    EXPECT_GT(b.bad_icrc, 0u) << p.describe();
  }
  if (c.ab.duplicate > 0) {
    EXPECT_GT(b.duplicates, 0u) << p.describe();
  }
  if (c.ab.drop_if || c.ba.drop_if) {
    EXPECT_GT(ab.dropped_filter + ba.dropped_filter, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Matrix, RoceFaults,
                         ::testing::Combine(::testing::ValuesIn(fault_cases()), ::testing::Bool()),
                         [](const auto& tp) {
                           return std::get<0>(tp.param).name +
                                  (std::get<1>(tp.param) ? "SelectiveRepeat" : "GoBackN");
                         });

// RoCEv2 senders leave the UDP checksum 0 and the ICRC leaves the field out; one that is filled
// in and wrong is the UDP layer's to drop (as a UDP stack does), counted apart from the ICRC:
// bad_icrc stays for what the ICRC caught.
TEST(RoceSim, BadUdpChecksumIsNotABadIcrc) {
  RoceConfig c;
  c.ab.corrupt_checksum = 0.02;
  RocePair p(seed(15), c);
  run_workload(p, workload(30, 65536));
  EXPECT_GT(p.net->stats(Dir::kAtoB).corrupted_checksum, 0u);
  EXPECT_GT(p.net->b().stats().rx_bad_udp_csum, 0u) << p.describe();
  EXPECT_LE(p.net->b().stats().rx_bad_udp_csum, p.net->stats(Dir::kAtoB).corrupted_checksum);
  EXPECT_EQ(p.b.rc->counters().bad_icrc, 0u) << p.describe();
}

// Recovery paths that only some loss patterns reach (an ACK for everything sent overtaking a
// rewind, READs re-executed while their first responses are still queued): more seeds of the
// loss bursts case, both ways of recovering.
TEST(RoceSim, LossBurstSeeds) {
  for (bool sr : {false, true}) {
    for (uint64_t s = 300; s < 306; s++) {
      SCOPED_TRACE("seed " + std::to_string(s) + (sr ? " selective repeat" : " go-back-N"));
      Faults f;
      f.loss = 0.01;
      f.loss_burst = 0.3;
      RoceConfig c = with_faults(f, f);
      c.selective_repeat = sr;
      RocePair p(s, c);
      run_workload(p, workload(60));
    }
  }
}

// Go-back-N sends everything after a loss again; selective repeat only what was lost.
TEST(RoceSim, SelectiveRepeatResendsOnlyWhatWasLost) {
  uint64_t rexmit[2] = {};
  uint64_t dropped[2] = {};
  for (bool sr : {false, true}) {
    RoceConfig c;
    c.selective_repeat = sr;
    c.ab.drop_if = first_copies(kWriteMiddle, kWriteMiddle, 50);
    RocePair p(seed(11), c);
    std::vector<Op> ops;
    for (size_t i = 0; i < 8; i++)
      ops.push_back({ReqKind::kWrite, false, 1u << 20, i << 20, i << 20});
    run_workload(p, ops);
    rexmit[sr] = p.a.rc->counters().retransmits;
    dropped[sr] = p.net->stats(Dir::kAtoB).dropped_filter;
    EXPECT_GT(dropped[sr], 10u);
    EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  }
  EXPECT_EQ(rexmit[1], dropped[1]);
  EXPECT_GT(rexmit[0], 5 * dropped[0]);
}

// Selective repeat: SEND packets past a gap (the NIC cannot place them: which receive they go to
// is unknown while a lost packet may have ended the message before) are kept by the responder in
// its bounded buffer and copied in order once the gap fills: nothing but the lost packets goes
// again, as for WRITEs. (Dropping them made SENDs go-back-N.)
TEST(RoceSim, SelectiveRepeatKeepsSendsPastAGap) {
  RoceConfig c;
  c.selective_repeat = true;
  c.ab.drop_if = first_copies(kSendMiddle, kSendMiddle, 50);
  RocePair p(seed(17), c);
  std::vector<Op> ops;
  for (size_t i = 0; i < 8; i++)
    ops.push_back({ReqKind::kSend, i % 2 == 1, 1u << 20, i << 20, i << 20});
  run_workload(p, ops);
  const uint64_t dropped = p.net->stats(Dir::kAtoB).dropped_filter;
  EXPECT_GT(dropped, 10u);
  EXPECT_GT(p.b.rc->counters().out_of_sequence, 10 * dropped) << p.describe();
  EXPECT_EQ(p.a.rc->counters().retransmits, dropped) << p.describe();
  EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
}

// Selective repeat: a gap longer than the responder's SEND keep buffer (a round trip of 2 ms at
// 10 Gb/s is about 600 packets of 4 KiB, the buffer 256): what does not fit is dropped and sent
// again, what fits is not, and every byte and receive still arrives once, in order. (Dropping
// every SEND packet past a gap sends more again than went past gaps.)
TEST(RoceSim, SelectiveRepeatSendKeepBufferOverflows) {
  RoceConfig c;
  c.selective_repeat = true;
  c.link.delay_ns = 1'000'000;
  c.timeout = 12;  // 16 ms: the local ACK timeout above the round trip
  c.ab.drop_if = first_copies(kSendMiddle, kSendMiddle, 300);
  RocePair p(seed(19), c);
  std::vector<Op> ops;
  for (size_t i = 0; i < 8; i++) {
    ops.push_back({ReqKind::kSend, i % 2 == 1, 1u << 20, i << 20, i << 20});
  }
  run_workload(p, ops);
  const uint64_t dropped = p.net->stats(Dir::kAtoB).dropped_filter;
  const uint64_t rexmit = p.a.rc->counters().retransmits;
  EXPECT_GT(dropped, 3u);
  EXPECT_GT(rexmit, dropped + 256) << p.describe();  // some did not fit (kSrSendKeepBytes)
  // Each gap: the packets past it beyond the buffer, not all of them.
  EXPECT_LT(rexmit, p.b.rc->counters().out_of_sequence) << p.describe();
}

// Selective repeat: the packets kept past a gap are named in range NAKs, one when a gap shows and
// then one per kSrNakEvery packets (or a packet asking for an ACK), not one NAK per packet: each
// NAK is a packet both daemons handle. Nothing but the lost packets goes again, without a timeout.
TEST(RoceSim, SelectiveRepeatNaksRunsNotEachPacket) {
  RoceConfig c;
  c.selective_repeat = true;
  c.ab.drop_if = first_copies(kWriteMiddle, kWriteMiddle, 50);
  RocePair p(seed(13), c);
  std::vector<Op> ops;
  for (size_t i = 0; i < 8; i++)
    ops.push_back({ReqKind::kWrite, false, 1u << 20, i << 20, i << 20});
  run_workload(p, ops);
  const transport::roce::RcCounters& b = p.b.rc->counters();
  const uint64_t dropped = p.net->stats(Dir::kAtoB).dropped_filter;
  EXPECT_GT(dropped, 10u);
  EXPECT_GT(b.out_of_sequence, 10 * dropped) << p.describe();
  // One NAK as each gap shows, then one per kSrNakEvery packets kept behind it (one per packet
  // would be as many as out_of_sequence).
  EXPECT_LT(b.naks_sent, b.out_of_sequence / 4) << p.describe();
  EXPECT_EQ(p.a.rc->counters().retransmits, dropped) << p.describe();
  EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
}

// Selective repeat: a packet sent again and lost again goes a third time as soon as a NAK names
// a packet sent after it, with no timeout, and nothing else goes with it. (Without that, each
// such loss waits out a timeout that sent everything in flight again.)
TEST(RoceSim, SelectiveRepeatResendsALostResendWithoutATimeout) {
  RoceConfig c;
  c.selective_repeat = true;
  // The first two copies of every 50th packet of a WRITE's middle, away from the end (packets
  // sent after the second copy reveal its loss).
  c.ab.drop_if = [copies = std::make_shared<std::map<uint32_t, int>>(),
                  first = std::make_shared<std::optional<uint32_t>>()](std::span<const uint8_t> f) {
    if (!opcode_is(f, kWriteFirst, kWriteLastImm) || f.size() < 54) return false;
    const uint32_t psn = psn_of(f);
    if (!*first) *first = psn;
    const uint32_t k = (psn - **first) & kPsnMask;
    return opcode_is(f, kWriteMiddle, kWriteMiddle) && k % 50 == 25 && k < 1500 &&
           ++(*copies)[psn] <= 2;
  };
  RocePair p(seed(12), c);
  std::vector<Op> ops;
  for (size_t i = 0; i < 8; i++)
    ops.push_back({ReqKind::kWrite, false, 1u << 20, i << 20, i << 20});
  run_workload(p, ops);
  const uint64_t dropped = p.net->stats(Dir::kAtoB).dropped_filter;
  EXPECT_EQ(dropped, 60u);
  EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  EXPECT_EQ(p.a.rc->counters().retransmits, dropped) << p.describe();
}

// Selective repeat's timeout sends the first unacknowledged packet and the last one sent again
// (asking for an ACK) and those it sent again before that are still missing, not everything in
// flight: here the responder has it all and only its ACKs are lost.
TEST(RoceSim, SelectiveRepeatTimeoutSendsOnlyTheFirstAndLastUnacknowledged) {
  RoceConfig c;
  c.selective_repeat = true;
  // ACKs 5 to 24: the window fills, unacknowledged, and the timer goes off.
  c.ba.drop_if = [n = 0](std::span<const uint8_t> f) mutable {
    if (!opcode_is(f, kAck, kAck)) return false;
    n++;
    return n >= 5 && n < 25;
  };
  RocePair p(seed(13), c);
  std::vector<Op> ops;
  for (size_t i = 0; i < 8; i++)
    ops.push_back({ReqKind::kWrite, false, 1u << 20, i << 20, i << 20});
  run_workload(p, ops);
  const RcCounters& a = p.a.rc->counters();
  EXPECT_GT(a.timeouts, 0u) << p.describe();
  // Each timeout: the first unacknowledged, the last sent, and the last sent before if its ACK
  // was lost too; never the window (1024 packets).
  EXPECT_LE(a.retransmits, 3 * a.timeouts) << p.describe();
  EXPECT_EQ(p.b.rc->counters().out_of_sequence, 0u);
}

// ---- failures ---------------------------------------------------------------------------------

TEST(RoceSim, RetryExhaustionFailsTheRequestAndTheQp) {
  RoceConfig c;
  c.retry_cnt = 3;
  c.timeout = 8;  // ~1 ms
  RocePair p(seed(5), c);
  ASSERT_TRUE(p.ok);
  p.net->faults(Dir::kAtoB).down = true;
  p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 5000, .wr_id = 1, .rkey = p.b.mr});
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 10, .wr_id = 2});
  ASSERT_TRUE(p.run_until_events(p.a, 2, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.a.events[0].kind, EventKind::kWriteDone);
  EXPECT_EQ(p.a.events[0].status, -ETIMEDOUT);
  EXPECT_EQ(p.a.events[1].status, -ECANCELED);
  // The first try and retry_cnt retries, each after one timeout.
  EXPECT_EQ(p.a.rc->counters().timeouts, 4u);
  EXPECT_GE(p.net->now_ns(), 4 * ack_timeout_ns(8));
  QpAttr at;
  ASSERT_EQ(p.a.rc->query_qp(p.a.qp, &at), 0);
  EXPECT_EQ(at.state, QpState::kErr);
  // A QP in ERR refuses new work.
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 10, .wr_id = 3});
  ASSERT_TRUE(p.run_until_events(p.a, 3, 1'000'000)) << p.describe();
  EXPECT_EQ(p.a.events[2].status, -ECANCELED);
}

TEST(RoceSim, ProgressResetsTheRetryCount) {
  // Each SEND's first two copies are lost: two timeouts each, never retry_cnt = 2 in a row
  // without progress, but ten in all.
  RoceConfig c;
  c.retry_cnt = 2;
  c.timeout = 6;
  Faults f;
  f.drop_if = [n = 0](std::span<const uint8_t> fr) mutable {
    return opcode_is(fr, kSendOnly, kSendOnly) && (++n % 3) != 0;
  };
  c.ab = f;
  RocePair p(seed(6), c);
  ASSERT_TRUE(p.ok);
  for (uint64_t i = 0; i < 5; i++) {
    p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 100, .offset = i * 100, .wr_id = i});
  }
  for (uint64_t i = 0; i < 5; i++) {
    p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 100, .offset = i * 100, .wr_id = i});
    ASSERT_TRUE(p.run_until_events(p.a, i + 1, 2'000'000'000)) << p.describe();
    EXPECT_EQ(p.a.events[i].status, 0) << p.describe();
  }
  EXPECT_EQ(p.a.rc->counters().timeouts, 10u);
}

TEST(RoceSim, RnrNakUntilAReceiveIsPosted) {
  RocePair p(seed(7), RoceConfig{});
  ASSERT_TRUE(p.ok);
  p.fill(p.net->a(), 0, 3000, 9);
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 3000, .wr_id = 1});
  p.net->run_for(2'000'000);
  EXPECT_TRUE(p.a.events.empty());
  EXPECT_GT(p.b.rc->counters().rnr_naks_sent, 0u);
  EXPECT_GT(p.a.rc->counters().rnr_naks_received, 0u);
  p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 4000, .offset = 100, .wr_id = 7});
  ASSERT_TRUE(p.run_until_events(p.a, 1)) << p.describe();
  ASSERT_TRUE(p.run_until_events(p.b, 1)) << p.describe();
  EXPECT_EQ(p.a.events[0].status, 0);
  EXPECT_EQ(p.b.events[0].len, 3000u);
  EXPECT_TRUE(p.same(p.net->b(), 100, p.net->a(), 0, 3000));
}

TEST(RoceSim, RnrRetryExhaustion) {
  RoceConfig c;
  c.rnr_retry = 2;
  RocePair p(seed(8), c);
  ASSERT_TRUE(p.ok);
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 10, .wr_id = 1});
  ASSERT_TRUE(p.run_until_events(p.a, 1, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.a.events[0].status, -EBUSY);
  EXPECT_EQ(p.a.rc->counters().rnr_naks_received, 3u);
}

TEST(RoceSim, RemoteAccessErrors) {
  struct Bad {
    std::string what;
    ReqKind kind;
    uint32_t rkey_delta;
    uint64_t va;
    uint8_t access;                                                // both QPs' access
    uint8_t mr_access = nic::kMrRemoteWrite | nic::kMrRemoteRead;  // B's MR
  };
  const std::vector<Bad> cases = {
      {"write with an unknown rkey", ReqKind::kWrite, 5, 0, 3},
      {"write past the MR", ReqKind::kWrite, 0, (64u << 20) - 10, 3},
      {"read past the MR", ReqKind::kRead, 0, (64u << 20) - 10, 3},
      {"write to a QP without remote write", ReqKind::kWrite, 0, 0, kRemoteRead},
      {"read from a QP without remote read", ReqKind::kRead, 0, 0, kRemoteWrite},
      {"write to an MR without remote write", ReqKind::kWrite, 0, 0, 3, nic::kMrRemoteRead},
      {"read from an MR without remote read", ReqKind::kRead, 0, 0, 3, nic::kMrRemoteWrite},
  };
  for (const Bad& bad : cases) {
    SCOPED_TRACE(bad.what);
    RoceConfig c;
    c.access = bad.access;
    RocePair p(seed(9), c);
    ASSERT_TRUE(p.ok);
    p.net->b().set_mr_access(p.b.mr, bad.mr_access);
    std::vector<uint8_t> before(p.net->b().mr(p.b.mr).begin(), p.net->b().mr(p.b.mr).end());
    p.post(p.net->a(), {.kind = bad.kind,
                        .len = 100,
                        .wr_id = 1,
                        .rkey = p.b.mr + bad.rkey_delta,
                        .remote_addr = bad.va});
    p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 10, .wr_id = 2});
    ASSERT_TRUE(p.run_until_events(p.a, 2, 1'000'000'000)) << p.describe();
    EXPECT_EQ(p.a.events[0].status, -EACCES);
    EXPECT_EQ(p.a.events[1].status, -ECANCELED);
    EXPECT_EQ(p.b.rc->counters().access_errors, 1u);
    EXPECT_TRUE(std::equal(before.begin(), before.end(), p.net->b().mr(p.b.mr).begin()));
    // The responder's QP goes to ERR too (an RC class C error), once its NAK is out.
    QpAttr qa;
    ASSERT_EQ(p.b.rc->query_qp(p.b.qp, &qa), 0);
    EXPECT_EQ(qa.state, QpState::kErr);
    EXPECT_EQ(p.b.rc->counters().qp_errors, 1u);
  }
}

// `n` READs of `len` bytes each, B's [0, n x len) (filled) into A's from 32 MiB, all posted at
// once; runs until they complete (within `max_ns`), each with status 0 in order, the bytes equal.
void reads_complete(RocePair& p, uint64_t n, uint32_t len, uint64_t max_ns) {
  p.fill(p.net->b(), 0, n * len, uint8_t(n));
  for (uint64_t i = 0; i < n; i++) {
    p.post(p.net->a(), {.kind = ReqKind::kRead,
                        .len = len,
                        .offset = (32u << 20) + i * len,
                        .wr_id = i,
                        .rkey = p.b.mr,
                        .remote_addr = i * len});
  }
  ASSERT_TRUE(p.run_until_events(p.a, n, max_ns)) << p.describe();
  for (uint64_t i = 0; i < n; i++) {
    EXPECT_EQ(p.a.events[i].wr_id, i);
    EXPECT_EQ(p.a.events[i].status, 0) << i << p.describe();
  }
  EXPECT_TRUE(p.same(p.net->a(), 32u << 20, p.net->b(), 0, n * len));
}

// A sender ten times faster than its link, which holds 64 KiB: every burst of READ responses
// loses its tail. Large READs back to back still complete, with either recovery.
TEST(RoceSim, LargeReadsThroughTailDrops) {
  for (const bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-n");
    RoceConfig c;
    c.pmtu = 1024;
    c.link.queue_bytes = 64u << 10;
    c.rate_limit_kbps = 100'000'000;
    c.selective_repeat = sr;
    RocePair p(seed(14), c);
    ASSERT_TRUE(p.ok);
    reads_complete(p, 16, 1u << 20, 20'000'000'000);
  }
}

// One response of the first of two READs is lost and the second READ's responses all come
// before the first's again: the second is done first. Once the first is done, both complete and
// the requester has nothing outstanding: no timeout fires later, the QP stays in RTS.
TEST(RoceSim, ReadDoneBeforeAnEarlierOne) {
  for (const bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-n");
    RoceConfig c;
    c.pmtu = 1024;
    c.timeout = 8;  // ~1 ms
    c.retry_cnt = 2;
    c.selective_repeat = sr;
    auto seen = std::make_shared<std::set<uint32_t>>();
    c.ba.drop_if = [seen, first = std::optional<uint32_t>()](std::span<const uint8_t> f) mutable {
      if (!opcode_is(f, kReadRespFirst, kReadRespOnly)) return false;
      if (!first) first = psn_of(f);
      return psn_of(f) == psn_add(*first, 10) && seen->insert(psn_of(f)).second;
    };
    RocePair p(seed(15), c);
    ASSERT_TRUE(p.ok);
    reads_complete(p, 2, 64u << 10, 1'000'000'000);
    EXPECT_EQ(seen->size(), 1u) << "the response was not lost";
    p.net->run_for(4 * (c.retry_cnt + 1) * ack_timeout_ns(c.timeout));
    EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
    QpAttr qa;
    ASSERT_EQ(p.a.rc->query_qp(p.a.qp, &qa), 0);
    EXPECT_EQ(qa.state, QpState::kRts);
  }
}

// Selective repeat asks again for exactly the READ responses that were lost (each gap once,
// when a later response reveals it), and the responder sends just those; go-back-N's READ asks
// for everything from the gap on.
TEST(RoceSim, SelectiveRepeatRereadsOnlyLostResponses) {
  uint64_t extra[2] = {};
  uint64_t dropped[2] = {};
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-n");
    RoceConfig c;
    c.pmtu = 1024;
    c.selective_repeat = sr;
    c.ba.drop_if = first_copies(kReadRespFirst, kReadRespOnly, 50);
    RocePair p(seed(16), c);
    ASSERT_TRUE(p.ok);
    reads_complete(p, 8, 1u << 20, 10'000'000'000);
    extra[sr] = p.b.rc->counters().read_responses - 8 * 1024;
    dropped[sr] = p.net->stats(Dir::kBtoA).dropped_filter;
    EXPECT_GT(dropped[sr], 100u);
  }
  EXPECT_EQ(extra[1], dropped[1]);
  EXPECT_GT(extra[0], 20 * dropped[0]);
}

// Selective repeat: a READ missing a response holds up neither the READs behind it (past the
// window, max_rd_atomic counts only READs still missing responses) nor the news that what it
// asked for again was lost again: the responses to READs asked for after that show it, and it
// is asked for a third time with no timeout. (Before, the READs behind it filled the window
// and max_rd_atomic, nothing more went out, and each lost re-ask waited out a timeout.)
TEST(RoceSim, SelectiveRepeatReasksALostReaskWithoutATimeout) {
  RoceConfig c;
  c.pmtu = 1024;
  c.selective_repeat = true;
  // The first two copies of response 30 of the third READ (64 responses each).
  c.ba.drop_if = [copies = std::make_shared<int>(0),
                  first = std::make_shared<std::optional<uint32_t>>()](std::span<const uint8_t> f) {
    if (!opcode_is(f, kReadRespFirst, kReadRespOnly) || f.size() < 54) return false;
    if (!*first) *first = psn_of(f);
    return ((psn_of(f) - **first) & kPsnMask) == 2 * 64 + 30 && ++*copies <= 2;
  };
  RocePair p(seed(17), c);
  ASSERT_TRUE(p.ok);
  reads_complete(p, 64, 64u << 10, 10'000'000'000);
  EXPECT_EQ(p.net->stats(Dir::kBtoA).dropped_filter, 2u);
  EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  EXPECT_EQ(p.a.rc->counters().retransmits, 2u) << p.describe();
}

// Selective repeat: the responder answers re-reads in the order they were asked, so the answer
// to a later re-read shows an earlier one was lost, here inside one large READ with no READ
// asked for after it. The responder answers a re-read only with responses it had sent: the
// requester never has a READ before the responder lets go of it (max_dest_rd_atomic holds).
TEST(RoceSim, SelectiveRepeatReasksByTheOrderOfReReads) {
  RoceConfig c;
  c.pmtu = 1024;
  c.selective_repeat = true;
  // Response 100 of the first READ twice (the first copy and the re-read's), response 300 once.
  c.ba.drop_if = [copies = std::make_shared<std::map<uint32_t, int>>(),
                  first = std::make_shared<std::optional<uint32_t>>()](std::span<const uint8_t> f) {
    if (!opcode_is(f, kReadRespFirst, kReadRespOnly) || f.size() < 54) return false;
    if (!*first) *first = psn_of(f);
    const uint32_t k = (psn_of(f) - **first) & kPsnMask;
    const int n = ++(*copies)[k];
    return (k == 100 && n <= 2) || (k == 300 && n == 1);
  };
  RocePair p(seed(18), c);
  ASSERT_TRUE(p.ok);
  reads_complete(p, 4, 1u << 20, 10'000'000'000);
  EXPECT_EQ(p.net->stats(Dir::kBtoA).dropped_filter, 3u);
  EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  EXPECT_EQ(p.a.rc->counters().retransmits, 3u) << p.describe();
  EXPECT_EQ(p.b.rc->counters().invalid_requests, 0u);
}

// Selective repeat: a slow responder (100 Mb/s) loses every response for 3 ms in the middle of
// the first of 24 READs. Timeouts ask the READs again from their first missing responses, and
// every READ completes with its bytes, with no invalid request (more READs than the responder
// may hold would be one, fatal to both QPs). The responder's part, re-reads answered only with
// responses already sent: RoceResponder.ASelectiveRepeatRereadGetsOnlyResponsesAlreadySent.
TEST(RoceSim, SelectiveRepeatReadsThroughAResponseBlackout) {
  RoceConfig c;
  c.pmtu = 1024;
  c.selective_repeat = true;
  c.rate_limit_kbps = 100'000;
  auto net = std::make_shared<const sim::SimNet*>(nullptr);
  auto from = std::make_shared<uint64_t>(0);
  c.ba.drop_if = [net, from](std::span<const uint8_t> f) {
    if (*net == nullptr || !opcode_is(f, kReadRespFirst, kReadRespOnly) || f.size() < 54) {
      return false;
    }
    const uint64_t now = (*net)->now_ns();
    if (*from == 0) *from = now + 2'000'000;  // 2 ms after the first response
    return now >= *from && now < *from + 3'000'000;
  };
  RocePair p(seed(19), c);
  ASSERT_TRUE(p.ok);
  *net = p.net.get();
  reads_complete(p, 24, 64u << 10, 20'000'000'000);
  EXPECT_GT(p.a.rc->counters().timeouts, 0u);
  EXPECT_EQ(p.b.rc->counters().invalid_requests, 0u);
}

// A lost tail (the last packet of the last WRITE: nothing after it reveals the loss) costs
// go-back-N the local ACK timeout (67 ms at 14); selective repeat's RTO comes from the round
// trip it measured, a few ms at most.
TEST(RoceSim, SelectiveRepeatTimesOutOnTheRoundTrip) {
  uint64_t took[2] = {};
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-n");
    RoceConfig c;
    c.timeout = 14;
    c.selective_repeat = sr;
    auto armed = std::make_shared<bool>(false);
    c.ab.drop_if = [armed](std::span<const uint8_t> f) {
      const bool drop = *armed && opcode_is(f, kWriteLast, kWriteLast);
      if (drop) *armed = false;
      return drop;
    };
    RocePair p(seed(17), c);
    ASSERT_TRUE(p.ok);
    // A round trip to measure first.
    p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 100, .wr_id = 0, .rkey = p.b.mr});
    ASSERT_TRUE(p.run_until_events(p.a, 1, 1'000'000'000)) << p.describe();
    *armed = true;
    const uint64_t t0 = p.net->now_ns();
    p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 64u << 10, .wr_id = 1, .rkey = p.b.mr});
    ASSERT_TRUE(p.run_until_events(p.a, 2, 1'000'000'000)) << p.describe();
    EXPECT_FALSE(*armed) << "the last packet was not lost";
    EXPECT_EQ(p.a.events[1].status, 0);
    EXPECT_EQ(p.a.rc->counters().timeouts, 1u);
    took[sr] = p.net->now_ns() - t0;
  }
  EXPECT_GE(took[0], ack_timeout_ns(14));
  EXPECT_LT(took[1], ack_timeout_ns(14) / 10);
}

// A dead peer: selective repeat's short timeouts back off up to the local ACK timeout, and only
// those count against retry_cnt, so the request fails no sooner than go-back-N's would.
TEST(RoceSim, SelectiveRepeatRetryExhaustionTakesTheFullTimeouts) {
  for (bool sr : {false, true}) {
    SCOPED_TRACE(sr ? "selective repeat" : "go-back-n");
    RoceConfig c;
    c.timeout = 12;  // ~16.8 ms
    c.retry_cnt = 2;
    c.selective_repeat = sr;
    RocePair p(seed(18), c);
    ASSERT_TRUE(p.ok);
    p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 100, .wr_id = 0, .rkey = p.b.mr});
    ASSERT_TRUE(p.run_until_events(p.a, 1, 1'000'000'000)) << p.describe();
    p.net->faults(Dir::kAtoB).down = true;
    const uint64_t t0 = p.net->now_ns();
    p.post(p.net->a(), {.kind = ReqKind::kWrite, .len = 100, .wr_id = 1, .rkey = p.b.mr});
    ASSERT_TRUE(p.run_until_events(p.a, 2, 10'000'000'000)) << p.describe();
    EXPECT_EQ(p.a.events[1].status, -ETIMEDOUT);
    EXPECT_GE(p.net->now_ns() - t0, 3 * ack_timeout_ns(12));
    const uint64_t timeouts = p.a.rc->counters().timeouts;
    if (sr) {
      EXPECT_GT(timeouts, 3u);  // short ones, doubling, before the full 16.8 ms
    } else {
      EXPECT_EQ(timeouts, 3u);
    }
  }
}

TEST(RoceSim, SendLongerThanTheReceiveFailsBoth) {
  RocePair p(seed(10), RoceConfig{});
  ASSERT_TRUE(p.ok);
  p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 100, .wr_id = 5});
  p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 100, .wr_id = 6});
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 5000, .wr_id = 1});
  ASSERT_TRUE(p.run_until_events(p.a, 1, 1'000'000'000)) << p.describe();
  ASSERT_TRUE(p.run_until_events(p.b, 2, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.a.events[0].status, -EINVAL);
  EXPECT_EQ(p.b.events[0].status, -EMSGSIZE);
  EXPECT_EQ(p.b.events[0].wr_id, 5u);
  // Both QPs end in ERR: the responder's next receive is flushed.
  EXPECT_EQ(p.b.events[1].status, -ECANCELED);
  EXPECT_EQ(p.b.events[1].wr_id, 6u);
  QpAttr qa;
  ASSERT_EQ(p.b.rc->query_qp(p.b.qp, &qa), 0);
  EXPECT_EQ(qa.state, QpState::kErr);
  ASSERT_EQ(p.a.rc->query_qp(p.a.qp, &qa), 0);
  EXPECT_EQ(qa.state, QpState::kErr);
}

// A QP in ERR has flushed its queues and takes no more packets. Here B's app moves its QP to ERR
// between the first and the middle packets of a SEND: the rest of that SEND must not reach the
// receive the flush completed (fuzz_roce_sim found it completed a second time, and the receive
// queue's head run past its tail).
TEST(RoceSim, QpInErrorTakesNoMorePackets) {
  RoceConfig c;
  c.pmtu = 1024;
  c.link.rate_bps = 1'000'000'000;  // a packet every 8 us: B sees them one at a time
  RocePair p(seed(14), c);
  ASSERT_TRUE(p.ok);
  p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = 8192, .wr_id = 5});
  p.post(p.net->a(), {.kind = ReqKind::kSend, .len = 4096, .wr_id = 1});
  ASSERT_TRUE(p.net->run_until([&] { return p.b.rc->counters().rx_packets >= 1; }, 1'000'000'000))
      << p.describe();
  ASSERT_EQ(p.b.rc->counters().rx_packets, 1u) << p.describe();
  QpAttr at;
  at.state = QpState::kErr;
  ASSERT_EQ(p.b.rc->modify_qp(p.b.qp, at, kAttrState, p.net->b()), 0);
  p.net->b().flush();
  p.net->run_for(20'000'000);  // the SEND's other packets, and A's retries
  ASSERT_EQ(p.b.events.size(), 1u) << p.describe();
  EXPECT_EQ(p.b.events[0].wr_id, 5u);
  EXPECT_EQ(p.b.events[0].status, -ECANCELED);
  EXPECT_GT(p.b.rc->counters().bad_packets, 0u);  // they came, and were dropped
}

// WRITEs with immediate and SENDs alternating, each pair arriving in one burst (an infinitely
// fast link): the NIC must not open a SEND before the transport has accepted the WRITE before
// it, which takes a receive too; else the SEND lands in that receive's buffer.
TEST(RoceSim, SendAfterAWriteWithImmediateTakesItsOwnReceive) {
  RoceConfig c;
  c.link.rate_bps = 0;
  RocePair p(seed(13), c);
  ASSERT_TRUE(p.ok);
  p.fill(p.net->a(), 0, 8u << 20, 6);
  const size_t kWriteAt = 32u << 20;
  size_t off = 0;
  std::vector<std::pair<size_t, uint32_t>> sends;
  for (uint64_t i = 0; i < 40; i++) {
    const auto len = uint32_t(1000 + i * 3000);
    // Every receive has a buffer; a WRITE's receive must stay zero.
    p.post(p.net->b(), {.kind = ReqKind::kRecv, .len = len, .offset = off, .wr_id = i});
    AppRequest r{.kind = ReqKind::kSend, .len = len, .offset = off, .wr_id = i};
    if (i % 2 == 1) {
      r.kind = ReqKind::kWrite;
      r.flags = kReqImm;
      r.rkey = p.b.mr;
      r.remote_addr = kWriteAt + off;
    } else {
      sends.emplace_back(off, len);
    }
    p.post(p.net->a(), r);
    off += len;
  }
  ASSERT_TRUE(p.run_until_events(p.b, 40, 1'000'000'000)) << p.describe();
  for (const auto& [o, len] : sends)
    EXPECT_TRUE(p.same(p.net->b(), o, p.net->a(), o, len)) << "SEND at " << o;
  size_t o = 0;
  for (uint64_t i = 0; i < 40; i++) {
    const auto len = uint32_t(1000 + i * 3000);
    if (i % 2 == 1) {
      std::span<uint8_t> buf = p.net->b().mr(p.b.mr).subspan(o, len);
      EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](uint8_t x) { return x == 0; }))
          << "a SEND's bytes in the receive of WRITE " << i;
      EXPECT_TRUE(p.same(p.net->b(), kWriteAt + o, p.net->a(), o, len));
    }
    o += len;
  }
}

// RC executes requests in order: a flag written after its data is never seen before the data,
// whatever the wire does to the packets. A go-back-N responder's NIC places only the request it
// expects next, so nothing past a gap reaches app memory (before, a WRITE's self-describing
// first packet was placed ahead of the cursor); the copy path copies only at ePSN. Checked
// before every frame B's NIC takes: whenever B's flag says round k, rounds 0..k-1's data are
// all in place.
TEST(RoceSim, GoBackNNeverShowsAFlagBeforeItsData) {
  constexpr uint32_t kData = 3 * 4096 + 100;  // a WRITE first, middles and a last
  constexpr uint64_t kRounds = 40;
  constexpr size_t kFlags = kHalf;  // A: each round's flag value; B: the flag
  for (bool zc : {true, false}) {
    SCOPED_TRACE(zc ? "NIC placement" : "copy path");
    RoceConfig c;
    c.zero_copy = zc;
    c.ab.reorder = 0.25;
    c.ab.reorder_depth = 6;
    c.ab.loss = 0.02;
    c.ab.duplicate = 0.02;
    RocePair p(seed(14), c);
    ASSERT_TRUE(p.ok);
    p.fill(p.net->a(), 0, kRounds * kData, 21);
    std::span<uint8_t> a_mem = p.net->a().mr(p.a.mr);
    std::span<uint8_t> b_mem = p.net->b().mr(p.b.mr);
    for (uint64_t k = 0; k < kRounds; k++) {
      const uint64_t v = k + 1;
      std::memcpy(a_mem.data() + kFlags + 8 * k, &v, 8);
      p.post(p.net->a(), {.kind = ReqKind::kWrite,
                          .len = kData,
                          .offset = k * kData,
                          .wr_id = 2 * k,
                          .rkey = p.b.mr,
                          .remote_addr = k * kData});
      p.post(p.net->a(), {.kind = ReqKind::kWrite,
                          .len = 8,
                          .offset = kFlags + 8 * k,
                          .wr_id = 2 * k + 1,
                          .rkey = p.b.mr,
                          .remote_addr = kFlags});
    }
    uint64_t checked = 0;  // rounds whose data was seen whole under their flag
    uint64_t early = 0;    // flags seen before their data
    auto check = [&] {
      uint64_t flag = 0;
      std::memcpy(&flag, b_mem.data() + kFlags, 8);
      for (; checked < flag; checked++) {
        if (!p.same(p.net->b(), checked * kData, p.net->a(), checked * kData, kData)) early++;
      }
    };
    p.net->set_tap([&](Dir d, std::span<const uint8_t>) {
      if (d == Dir::kAtoB) check();
    });
    ASSERT_TRUE(p.run_until_events(p.a, 2 * kRounds)) << p.describe();
    check();
    EXPECT_EQ(early, 0u) << "flags seen before their data\n" << p.describe();
    EXPECT_EQ(checked, kRounds);
    for (const Event& e : p.a.events)
      EXPECT_EQ(e.status, 0);
    EXPECT_GT(p.net->stats(Dir::kAtoB).reordered, 10u);
    EXPECT_GT(p.b.rc->counters().out_of_sequence, 0u);
  }
}

// ---- DCQCN ------------------------------------------------------------------------------------

class MapSink final : public InfoSink {
 public:
  void text(std::string_view k, std::string_view v) override { texts[std::string(k)] = v; }
  void number(std::string_view k, uint64_t v) override { numbers[std::string(k)] = v; }
  std::map<std::string, std::string> texts;
  std::map<std::string, uint64_t> numbers;
};

uint64_t info(sim::RoceSide& s, const std::string& key) {
  MapSink m;
  EXPECT_TRUE(s.rc->flow_info(s.qp, m));
  return m.numbers.at(key);
}

// 8 MiB of WRITEs from A through a queue that CE-marks 5 % of ECT packets: B's notification point
// sends CNPs (at most one per 50 µs), A's reaction point cuts its rate; with DCQCN off the
// packets are not ECT, nothing is marked and A keeps its rate.
TEST(RoceSim, DcqcnCnpsSlowTheSender) {
  uint64_t took[2] = {};
  for (bool on : {true, false}) {
    RoceConfig c;
    c.ab.ce = 0.05;
    if (!on) c.params = {{"dcqcn", "off"}};
    RocePair p(seed(12), c);
    std::vector<Op> ops;
    for (size_t i = 0; i < 8; i++)
      ops.push_back({ReqKind::kWrite, false, 1u << 20, i << 20, i << 20});
    const uint64_t start = p.net->now_ns();
    run_workload(p, ops);
    took[on] = p.net->now_ns() - start;
    const RcCounters& a = p.a.rc->counters();
    const RcCounters& b = p.b.rc->counters();
    // Data packets carry ECT under DCQCN (and only then may a queue mark them).
    EXPECT_EQ(p.net->stats(Dir::kAtoB).ce_marked > 0, on);
    EXPECT_EQ(b.ce_received, p.net->stats(Dir::kAtoB).ce_marked);
    if (on) {
      EXPECT_GT(b.cnps_sent, 0u);
      EXPECT_LE(b.cnps_sent, took[on] / 50'000 + 1) << "one CNP per 50 µs at most";
      EXPECT_EQ(a.cnps_received, b.cnps_sent);
      EXPECT_GT(info(p.a, "rate_decreases"), 0u);
      EXPECT_LT(info(p.a, "target_rate_bps"), c.link.rate_bps);
    } else {
      EXPECT_EQ(b.cnps_sent, 0u);
      EXPECT_EQ(info(p.a, "rate_bps"), c.link.rate_bps);
    }
  }
  EXPECT_GT(took[1], took[0] * 3 / 2) << "DCQCN slowed the marked sender";
}

TEST(RoceSim, DcqcnParamsAreChecked) {
  RcTransport rc;
  EXPECT_EQ(rc.check_params({}), "");
  const Param ok[] = {{"dcqcn", "off"}, {"dcqcn_rai_mbps", "20"}};
  EXPECT_EQ(rc.check_params(ok), "");
  const Param bad_onoff[] = {{"dcqcn", "maybe"}};
  EXPECT_NE(rc.check_params(bad_onoff).find("on"), std::string::npos);
  const Param bad_key[] = {{"window", "5"}};
  EXPECT_NE(rc.check_params(bad_key).find("unknown parameter"), std::string::npos);
  const Param bad_value[] = {{"dcqcn_rai_mbps", "-5"}};
  EXPECT_NE(rc.check_params(bad_value), "");
  EXPECT_EQ(rc.create_qp(1, 0x40, QpCaps{}, bad_value), -EINVAL);
  EXPECT_EQ(rc.create_qp(1, 0x40, QpCaps{}, ok), 0);
}

// ---- packet spraying --------------------------------------------------------------------------

// An ECMP fabric behind the simulated link: a frame's path is its UDP source port modulo 4 (a
// switch's hash, simplified), path k kSkewNs longer than path 0, so packets sprayed over the
// paths overtake each other (by up to 3 skews: at 1 KiB packets on 10 Gb/s, about 10 packets).
constexpr uint64_t kSkewNs = 3000;

struct Ecmp {
  std::array<uint64_t, 4> frames{};
  std::function<uint64_t(std::span<const uint8_t>)> delay() {
    return [this](std::span<const uint8_t> f) -> uint64_t {
      if (f.size() < 42 || f[23] != 17) return 0;
      const uint32_t path = (uint32_t(f[34]) << 8 | f[35]) % 4;  // UDP source port
      frames[path]++;
      return path * kSkewNs;
    };
  }
  size_t used() const {
    return size_t(std::count_if(frames.begin(), frames.end(), [](uint64_t n) { return n != 0; }));
  }
};

// Both QPs sprayed over four source ports with selective repeat, PMTU 1024, through the fabric
// `ab` and `ba` describe, with `f`'s faults both ways.
RoceConfig over_ecmp(Ecmp& ab, Ecmp& ba, const Faults& f = {}) {
  RoceConfig c = with_faults(f, f);
  c.pmtu = 1024;
  c.selective_repeat = true;
  c.params = {{"spray", "4"}};
  c.ab.path_delay_if = ab.delay();
  c.ba.path_delay_if = ba.delay();
  return c;
}

// `spray 4`: each request and READ response of a QP takes the next of four source ports (ACKs
// and NAKs keep one), so the fabric spreads it over its four paths; the receivers take the
// reordering that makes without sending anything again (the NIC places what overtook, selective
// repeat keeps it, and a hole is taken for lost only once `reorder` packets sent after it are
// known to have arrived; 32 by default when sprayed). Without the tolerance (`reorder 1`)
// the same reordering is taken for loss and sent again; unsprayed, a QP keeps one path, in order.
TEST(RoceSim, SprayedQpsSpreadOverTheFabricAndTakeItsReordering) {
  struct Run {
    std::vector<std::pair<std::string, std::string>> params;
    Ecmp ab, ba;
    uint64_t resent = 0, ooo = 0;
  };
  std::array<Run, 3> runs;
  runs[0].params = {{"spray", "4"}};
  runs[1].params = {{"spray", "4"}, {"reorder", "1"}};
  runs[2].params = {};
  for (Run& r : runs) {
    SCOPED_TRACE(r.params.empty() ? "unsprayed" : r.params.size() == 1 ? "sprayed" : "reorder 1");
    RoceConfig c = over_ecmp(r.ab, r.ba);
    c.params = r.params;
    RocePair p(seed(40), c);
    run_workload(p, workload(60));
    r.resent = p.a.rc->counters().retransmits + p.b.rc->counters().retransmits;
    r.ooo = p.b.rc->counters().out_of_sequence;
    EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  }
  for (const Run* r : {&runs[0], &runs[1]}) {
    // Each path carried at least a sixth of the requests; the READ responses took all four
    // (the ACKs and NAKs beside them keep one).
    const uint64_t ab = std::accumulate(r->ab.frames.begin(), r->ab.frames.end(), uint64_t{0});
    for (uint64_t n : r->ab.frames)
      EXPECT_GT(n * 6, ab);
    EXPECT_EQ(r->ba.used(), 4u);
    EXPECT_GT(r->ooo, 100u) << "the paths reordered the requests";
  }
  EXPECT_EQ(runs[0].resent, 0u) << "reordering is not loss";
  EXPECT_GT(runs[1].resent, 100u) << "without the tolerance it is taken for loss";
  EXPECT_EQ(runs[2].ab.used(), 1u);
  EXPECT_EQ(runs[2].ba.used(), 1u);
  EXPECT_EQ(runs[2].ooo, 0u);
  EXPECT_EQ(runs[2].resent, 0u);
}

// A sprayed QP's lost READ request: taken for lost as any hole once `reorder` packets sent after
// it arrived (a READ request past the responder's ePSN and not named in a NAK never came), and
// asked again without waiting for the timer; and the packets after it, which the responder's
// ACK acknowledged while the READ's responses were still on their way (sprayed, the ACK
// overtakes them), are taken as acknowledged once the READ is done (before, una stayed at the
// READ's end and the QP timed out to retry exhaustion). Also unsprayed, and without the loss.
TEST(RoceSim, SprayedQpsAskAgainForALostReadRequestWithoutATimeout) {
  for (int variant = 0; variant < 4; variant++) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    Ecmp ab, ba;
    RoceConfig c = over_ecmp(ab, ba);
    if ((variant & 1) != 0) {  // unsprayed, on one path
      c.params.clear();
      c.ab.path_delay_if = c.ba.path_delay_if = nullptr;
    }
    if ((variant & 2) == 0) c.ab.drop_if = first_copies(kReadRequest, kReadRequest, 1);
    RocePair p(seed(41), c);
    std::vector<Op> ops;
    for (size_t i = 0; i < 10; i++) {
      ops.push_back(
          {.kind = ReqKind::kRead, .len = 4096, .src = kHalf + i * 4096, .dst = kHalf + i * 4096});
      ops.push_back({.kind = ReqKind::kWrite, .len = 65536, .src = i * 65536, .dst = i * 65536});
    }
    run_workload(p, ops);
    EXPECT_EQ(p.a.rc->counters().timeouts, 0u) << p.describe();
  }
}

// Sprayed over the reordering fabric, with loss and loss bursts both ways: every request
// completes with its bytes, the lost ones sent again.
TEST(RoceSim, SprayedQpsRecoverLossAmongTheReordering) {
  for (uint64_t s = 500; s < 504; s++) {
    SCOPED_TRACE("seed " + std::to_string(s));
    Ecmp ab, ba;
    Faults f;
    f.loss = 0.01;
    f.loss_burst = 0.2;
    RocePair p(seed(s), over_ecmp(ab, ba, f));
    run_workload(p, workload(60));
    EXPECT_GT(p.a.rc->counters().retransmits, 0u);
    EXPECT_EQ(ab.used(), 4u);
  }
}

// ---- the responder's checks, packet by packet -------------------------------------------------

// A Context that keeps what the transport emits: descriptors, events, copies.
class RecordingContext final : public Context, public RdmaContext {
 public:
  RecordingContext() : Context(tx_, ev_) {}
  RdmaContext* rdma() override { return this; }
  int ms_post(FlowId, uint16_t, uint64_t, uint32_t, uint32_t) override { return 0; }
  int cursor_update(FlowId, uint32_t) override { return 0; }
  int ms_retire(FlowId, uint32_t) override { return 0; }
  int ms_retire_msg(FlowId, uint32_t) override { return 0; }
  int rkey_check(FlowId, uint32_t, uint64_t va, uint32_t, bool, uint16_t* mr,
                 uint64_t* offset) override {
    *mr = 1;
    *offset = va;
    return 0;
  }
  int read_post(FlowId, uint32_t, uint16_t, uint64_t, uint32_t) override { return -EOPNOTSUPP; }
  int read_retire(FlowId, uint32_t) override { return -EOPNOTSUPP; }
  int roce_resync(FlowId, uint32_t, uint32_t) override { return -EOPNOTSUPP; }
  bool copy_in(const uint8_t*, uint32_t len, uint16_t, uint64_t) override {
    copied += len;
    return true;
  }
  FlowId flow_open(ListenerId, const FlowTuple&, uint32_t, bool) override { return kNoFlow; }
  void flow_synced(FlowId, uint32_t, bool) override {}
  void flow_closed(FlowId) override {}
  void at(uint64_t ns) { set_now(ns); }
  std::vector<TxDesc> sent;
  std::vector<Event> events;
  uint64_t copied = 0;

 private:
  void drain_tx(std::span<TxDesc> d) override { sent.insert(sent.end(), d.begin(), d.end()); }
  void drain_events(std::span<const Event> e) override {
    events.insert(events.end(), e.begin(), e.end());
  }
  std::array<TxDesc, 8> tx_{};
  std::array<Event, 8> ev_{};
};

// One QP in RTS (flow 1, QPN 0x11, the peer 0x22, PMTU 256, ePSN 0x100) and packets for it,
// handed over as the copy path does (Placed::kDeferred with the payload).
class RoceResponder : public ::testing::Test {
 protected:
  static constexpr FlowId kFlow = 1;
  static constexpr uint32_t kEpsn = 0x100;
  static constexpr uint32_t kPmtu = 256;

  void make_qp(std::vector<Param> params = {}, bool selective_repeat = false) {
    ASSERT_EQ(rc.create_qp(kFlow, 0x11, QpCaps{}, params), 0);
    QpAttr a;
    a.state = QpState::kInit;
    a.access = kRemoteWrite | kRemoteRead;
    ASSERT_EQ(rc.modify_qp(kFlow, a, kAttrState | kAttrAccess, ctx), 0);
    a.state = QpState::kRtr;
    a.pmtu = kPmtu;
    a.dest_qpn = 0x22;
    a.rq_psn = kEpsn;
    a.selective_repeat = selective_repeat;
    ASSERT_EQ(rc.modify_qp(
                  kFlow, a,
                  kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn | kAttrSelectiveRepeat, ctx),
              0);
    a.state = QpState::kRts;
    a.sq_psn = 0x500;
    ASSERT_EQ(
        rc.modify_qp(kFlow, a,
                     kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry, ctx),
        0);
  }
  void SetUp() override { make_qp(); }

  // Delivers one packet: UDP, BTH and the opcode's headers (`ext` more bytes of zeros for the
  // headers build() does not write), then `payload` bytes; ECN `ecn`.
  void deliver(Headers h, uint32_t payload, uint8_t ext = 0, uint8_t ecn = 2) {
    h.dest_qp = 0x11;
    h.pad = uint8_t((4 - payload % 4) % 4);
    std::array<uint8_t, kMaxHeader + 32> l4{};
    const size_t n = build(h, l4.data()) + ext;
    std::vector<uint8_t> data(payload, 0xAB);
    std::array<uint8_t, 20> ip{0x45, uint8_t(ecn)};
    RxHeader x;
    x.flow = kFlow;
    x.l3 = ip.data();
    x.l3_len = 20;
    x.l4 = l4.data();
    x.l4_len = uint16_t(n);
    x.ecn = ecn;
    x.l4_csum = Csum::kGood;
    x.payload_len = payload;
    x.placed = payload != 0 ? Placed::kDeferred : Placed::kNoPayload;
    x.payload = payload != 0 ? data.data() : nullptr;
    ctx.at(now += 1000);
    rc.rx_burst(std::span<const RxHeader>(&x, 1), ctx);
    ctx.flush();
  }
  Headers write_only(uint32_t psn, uint32_t len) {
    Headers h;
    h.opcode = kWriteOnly;
    h.psn = psn;
    h.va = 0x1000;
    h.rkey = 1;
    h.dma_len = len;
    h.ack_req = true;
    return h;
  }
  // The AETH syndrome and PSN of descriptor i (an ACK or NAK).
  std::pair<uint8_t, uint32_t> aeth(size_t i) const {
    Headers h;
    size_t n = 0;
    EXPECT_EQ(parse(ctx.sent.at(i).l4.data(), ctx.sent[i].l4_len, h, &n), ParseError::kNone);
    return {h.syndrome, h.psn};
  }
  QpState state() {
    QpAttr a;
    rc.query_qp(kFlow, &a);
    return a.state;
  }

  RcTransport rc;
  RecordingContext ctx;
  uint64_t now = 1'000'000;
};

// IBTA 10.9.3: the QP is in the default partition (0xFFFF). A packet of another partition is
// dropped without a word and counted; a limited member of the same one (0x7FFF) is taken.
// Selective repeat: a re-read of a READ the responder is still sending gets only the responses
// it had sent (the rest come from the READ itself, once), so the requester never has every
// response of a READ the responder still holds. Here a READ of 256 responses, 64 sent, then a
// re-read from response 10 to the end: it ends at response 63, and every response from 64 on
// goes once.
TEST_F(RoceResponder, ASelectiveRepeatRereadGetsOnlyResponsesAlreadySent) {
  rc.destroy_qp(kFlow, ctx);
  ctx.sent.clear();
  ASSERT_NO_FATAL_FAILURE(make_qp({}, true));
  Headers r;
  r.opcode = kReadRequest;
  r.psn = kEpsn;
  r.va = 0x1000;
  r.rkey = 1;
  r.dma_len = 256 * kPmtu;
  r.ack_req = true;
  deliver(r, 0);
  ASSERT_EQ(ctx.sent.size(), 64u) << "one burst of responses (kRespBurst)";
  Headers again = r;
  again.psn = kEpsn + 10;
  again.va = 0x1000 + 10 * kPmtu;
  again.dma_len = (256 - 10) * kPmtu;
  deliver(again, 0);
  for (int i = 0; i < 20; i++) {
    ctx.at(now += 1'000'000);
    rc.tick(ctx);
    ctx.flush();
  }
  std::map<uint32_t, int> times;
  std::optional<uint8_t> op63;
  for (size_t i = 64; i < ctx.sent.size(); i++) {
    Headers h;
    size_t n = 0;
    ASSERT_EQ(parse(ctx.sent[i].l4.data(), ctx.sent[i].l4_len, h, &n), ParseError::kNone);
    const uint32_t k = h.psn - kEpsn;
    times[k]++;
    if (k == 63 && !op63) op63 = h.opcode;
  }
  for (uint32_t k = 10; k < 256; k++)
    EXPECT_EQ(times[k], 1) << "response " << k;
  ASSERT_TRUE(op63.has_value());
  EXPECT_EQ(*op63, kReadRespLast) << "the re-read ends where the READ had got to";
}

TEST_F(RoceResponder, PkeyOfAnotherPartitionIsDroppedAndCounted) {
  for (uint16_t pkey : {0x1234, 0x0000, 0x8000, 0x7FFE}) {
    Headers h = write_only(kEpsn, 64);
    h.pkey = pkey;
    deliver(h, 64);
  }
  EXPECT_EQ(rc.counters().bad_pkey, 4u);
  EXPECT_EQ(ctx.copied, 0u) << "a WRITE of another partition was executed";
  EXPECT_TRUE(ctx.sent.empty()) << "no NAK for a P_Key violation";
  Headers h = write_only(kEpsn, 64);
  h.pkey = 0x7FFF;
  deliver(h, 64);
  EXPECT_EQ(ctx.copied, 64u);
  ASSERT_EQ(ctx.sent.size(), 1u);
  EXPECT_EQ(aeth(0), std::pair(uint8_t(kSynAck), kEpsn));
  EXPECT_EQ(rc.counters().bad_pkey, 4u);
}

// Every RC request this transport does not implement is answered with NAK invalid request
// (0x61) at its PSN, as rxe answers what it does not support, and the responder's QP goes to
// ERR; nothing of it is executed. Silently dropped, a real peer would wait out its timeouts.
TEST_F(RoceResponder, UnsupportedOpcodesGetAnInvalidRequestNak) {
  struct Case {
    uint8_t op;
    uint8_t ext;
    uint32_t payload;
  };
  const Case cases[] = {{kCompareSwap, 28, 0}, {kFetchAdd, 28, 0},    {kSendOnlyInv, 4, 40},
                        {kSendLastInv, 4, 40}, {0x15, 0, 0},          {0x18, 0, 8},
                        {kFlush, 20, 0},       {kAtomicWrite, 16, 8}, {0x1F, 0, 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(op_name(c.op)));
    rc.destroy_qp(kFlow, ctx);
    ctx.sent.clear();
    make_qp();
    Headers h;
    h.opcode = c.op;
    h.psn = kEpsn;
    deliver(h, c.payload, c.ext);
    ASSERT_EQ(ctx.sent.size(), 1u);
    EXPECT_EQ(aeth(0), std::pair(uint8_t(kSynInvalid), kEpsn));
    EXPECT_EQ(state(), QpState::kErr);
    EXPECT_EQ(ctx.copied, 0u);
  }
  EXPECT_EQ(rc.counters().invalid_requests, std::size(cases));
  EXPECT_EQ(rc.counters().bad_packets, 0u);
}

// IBTA's lengths and opcode order, checked before a byte of the request is taken.
TEST_F(RoceResponder, RequestsBreakingLengthsOrOrderAreInvalid) {
  auto invalid = [&](const char* what, auto&& send) {
    SCOPED_TRACE(what);
    rc.destroy_qp(kFlow, ctx);
    ctx.sent.clear();
    ctx.copied = 0;
    make_qp();
    send();
    ASSERT_FALSE(ctx.sent.empty());
    EXPECT_EQ(aeth(ctx.sent.size() - 1), std::pair(uint8_t(kSynInvalid), kEpsn + 1));
    EXPECT_EQ(state(), QpState::kErr);
  };
  Headers first = write_only(kEpsn + 1, 1000);
  first.opcode = kWriteFirst;
  invalid("a WRITE first one PMTU long", [&] {
    deliver(write_only(kEpsn, 0), 0);
    Headers h = first;
    h.dma_len = kPmtu;
    deliver(h, kPmtu);
    EXPECT_EQ(ctx.copied, 0u);
  });
  invalid("a WRITE first over 2^31", [&] {
    deliver(write_only(kEpsn, 0), 0);
    Headers h = first;
    h.dma_len = kMaxMessage + 1;
    deliver(h, kPmtu);
    EXPECT_EQ(ctx.copied, 0u);
  });
  invalid("a WRITE first shorter than a PMTU", [&] {
    deliver(write_only(kEpsn, 0), 0);
    deliver(first, 100);
    EXPECT_EQ(ctx.copied, 0u);
  });
  invalid("a WRITE first inside a SEND", [&] {
    Headers s;
    s.opcode = kSendFirst;
    s.psn = kEpsn;
    rc.app_burst(std::array{AppRequest{.flow = kFlow, .kind = ReqKind::kRecv, .len = 4096}}, ctx);
    deliver(s, kPmtu);
    deliver(first, kPmtu);
  });
  invalid("a SEND middle with no SEND", [&] {
    deliver(write_only(kEpsn, 0), 0);
    Headers s;
    s.opcode = kSendMiddle;
    s.psn = kEpsn + 1;
    deliver(s, kPmtu);
    EXPECT_EQ(ctx.copied, 0u);
  });
}

// Under DCQCN every packet the QP sends is ECT(0): READ requests, WRITEs, ACKs; a CE-marked
// packet draws a CNP at DSCP 48 (mlx5's), or the DSCP the QP's dcqcn_cnp_dscp names. Without
// DCQCN nothing is ECN-capable.
TEST_F(RoceResponder, EveryPacketIsEctUnderDcqcnAndCnpsHaveTheirDscp) {
  for (const char* dscp : {"", "26", "off"}) {
    SCOPED_TRACE(dscp);
    rc.destroy_qp(kFlow, ctx);
    ctx.sent.clear();
    std::vector<Param> params;
    if (std::string_view(dscp) == "off") {
      params.push_back({"dcqcn", "off"});
    } else if (*dscp != 0) {
      params.push_back({"dcqcn_cnp_dscp", dscp});
    }
    make_qp(params);
    const bool on = std::string_view(dscp) != "off";
    rc.app_burst(std::array{AppRequest{.flow = kFlow, .kind = ReqKind::kRead, .len = 100},
                            AppRequest{.flow = kFlow, .kind = ReqKind::kWrite, .len = 100}},
                 ctx);
    ctx.flush();
    deliver(write_only(kEpsn, 8), 8, 0, 3);  // CE-marked: an ACK and (under DCQCN) a CNP
    ASSERT_EQ(ctx.sent.size(), on ? 4u : 3u);
    size_t cnps = 0;
    for (const TxDesc& d : ctx.sent) {
      EXPECT_EQ(d.ecn, on ? 2 : 0) << op_name(d.l4[8]);
      if (d.l4[8] == kCnp) {
        cnps++;
        EXPECT_EQ(d.dscp, *dscp != 0 ? 26 : 48);
      } else {
        EXPECT_EQ(d.dscp, 0);
      }
    }
    EXPECT_EQ(cnps, on ? 1u : 0u);
  }
}

// ---- the QP state machine ---------------------------------------------------------------------

TEST(RoceQp, TransitionsNeedTheirAttributes) {
  RcTransport rc;
  RecordingContext ctx;
  ASSERT_EQ(rc.create_qp(3, 0x33, QpCaps{}), 0);
  EXPECT_EQ(rc.create_qp(3, 0x34, QpCaps{}), -EEXIST);
  EXPECT_EQ(rc.create_qp(4, 0x1000000, QpCaps{}), -EINVAL);
  QpAttr a;
  a.state = QpState::kRtr;  // RESET -> RTR skips INIT
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn, ctx), -EINVAL);
  a.state = QpState::kInit;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState, ctx), -EINVAL);  // INIT needs access
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrAccess, ctx), 0);
  a.state = QpState::kRtr;
  a.pmtu = 1000;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn, ctx), -EINVAL);
  a.pmtu = 2048;
  a.rq_psn = 0x1000000;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn, ctx), -EINVAL);
  a.rq_psn = 5;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu | kAttrDestQpn, ctx), -EINVAL);
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn, ctx), 0);
  // Work before RTS is refused.
  rc.app_burst(std::array{AppRequest{.flow = 3, .kind = ReqKind::kSend, .len = 1, .wr_id = 9}},
               ctx);
  ctx.flush();
  ASSERT_EQ(ctx.events.size(), 1u);
  EXPECT_EQ(ctx.events[0].status, -EINVAL);
  a.state = QpState::kRts;
  a.retry_cnt = 8;
  const uint32_t rts = kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry;
  EXPECT_EQ(rc.modify_qp(3, a, rts, ctx), -EINVAL);
  a.retry_cnt = 7;
  EXPECT_EQ(rc.modify_qp(3, a, rts & ~kAttrSqPsn, ctx), -EINVAL);
  EXPECT_EQ(rc.modify_qp(3, a, rts, ctx), 0);
  QpAttr q;
  ASSERT_EQ(rc.query_qp(3, &q), 0);
  EXPECT_EQ(q.state, QpState::kRts);
  EXPECT_EQ(q.pmtu, 2048u);
  // RTS -> RTS may not change the path or PSNs.
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState | kAttrPmtu, ctx), -EINVAL);
  // Any state -> ERR, then ERR -> RESET.
  a.state = QpState::kErr;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState, ctx), 0);
  a.state = QpState::kRts;
  EXPECT_EQ(rc.modify_qp(3, a, rts, ctx), -EINVAL);
  a.state = QpState::kReset;
  EXPECT_EQ(rc.modify_qp(3, a, kAttrState, ctx), 0);
  EXPECT_EQ(rc.destroy_qp(3, ctx), 0);
  EXPECT_EQ(rc.destroy_qp(3, ctx), -ENOENT);
}

TEST(RoceQp, SprayParamsAreCheckedAndNeedSelectiveRepeat) {
  RcTransport rc;
  const Param ok[] = {{"spray", "64"}, {"reorder", "512"}};
  EXPECT_EQ(rc.check_params(ok), "");
  for (const char* bad : {"0", "65", "x", "4x", ""}) {
    const Param p[] = {{"spray", bad}};
    EXPECT_NE(rc.check_params(p).find("spray is a whole number from 1 to 64"), std::string::npos)
        << bad;
  }
  const Param bad_reorder[] = {{"reorder", "513"}};
  EXPECT_NE(rc.check_params(bad_reorder).find("reorder"), std::string::npos);
  RecordingContext ctx;
  const Param sprayed[] = {{"spray", "4"}};
  const Param tolerant[] = {{"reorder", "8"}};
  ASSERT_EQ(rc.create_qp(3, 0x33, QpCaps{}, sprayed), 0);
  ASSERT_EQ(rc.create_qp(4, 0x34, QpCaps{}, tolerant), 0);
  ASSERT_EQ(rc.create_qp(5, 0x35, QpCaps{}, sprayed), 0);
  QpAttr a;
  a.state = QpState::kInit;
  for (FlowId f : {3, 4, 5})
    ASSERT_EQ(rc.modify_qp(f, a, kAttrState | kAttrAccess, ctx), 0);
  a.state = QpState::kRtr;
  a.pmtu = 1024;
  a.rq_psn = 5;
  const uint32_t rtr = kAttrState | kAttrPmtu | kAttrDestQpn | kAttrRqPsn;
  // Go-back-N would send everything again at each overtaking: refused.
  EXPECT_EQ(rc.modify_qp(3, a, rtr, ctx), -EINVAL);
  EXPECT_EQ(rc.modify_qp(4, a, rtr, ctx), -EINVAL);
  a.selective_repeat = true;
  EXPECT_EQ(rc.modify_qp(3, a, rtr | kAttrSelectiveRepeat, ctx), 0);
  EXPECT_EQ(rc.modify_qp(4, a, rtr | kAttrSelectiveRepeat, ctx), 0);
  // RESET keeps the QP's parameters: still sprayed, so still refused without selective repeat.
  a.state = QpState::kReset;
  ASSERT_EQ(rc.modify_qp(3, a, kAttrState, ctx), 0);
  a.state = QpState::kInit;
  ASSERT_EQ(rc.modify_qp(3, a, kAttrState | kAttrAccess, ctx), 0);
  a.state = QpState::kRtr;
  a.selective_repeat = false;
  EXPECT_EQ(rc.modify_qp(3, a, rtr | kAttrSelectiveRepeat, ctx), -EINVAL);
}

}  // namespace
}  // namespace cleave::transport::roce
