// tcp_sim_test.cc - two TCP endpoints over the simulated network (tests/sim): 100 MB per case
// through the fault matrix (docs/testing.md), byte-exact with no duplicates and no stalls, on the
// NIC's zero-copy placement and on the copy path; sequence wrap; option combinations; zero window
// from a slow reader; congestion control on a bottleneck.
//
// CLEAVE_TCP_SIM_MB sets the transfer size (default 100), CLEAVE_SIM_SEED replays a seed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <ostream>
#include <string>
#include <vector>

#include "tcp_transfer.h"

namespace cleave::transport::tcp::test {
namespace {

void run_case(const Case& c) {
  const uint64_t seed = SimNet::seed_from_env(0xC1EA7E + std::hash<std::string>{}(c.name) % 1000);
  Transfer t(c, seed);
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  for (const std::string& e : t.errors)
    ADD_FAILURE() << e;
  EXPECT_EQ(t.received, t.total);
  EXPECT_GE(t.send_done * kChunk, t.total);
  EXPECT_TRUE(t.peer_closed);
  // Zero copy: the NIC placed every new byte and the transport copied none.
  const Counters& rb = tcp_of(t.net->b()).counters();
  if (c.zero_copy && c.ab.corrupt_payload == 0 && c.ab.truncate == 0) {
    EXPECT_GT(rb.placed_bytes, 0u);
  }
  if (!c.zero_copy) {
    EXPECT_EQ(rb.placed_bytes, 0u);
  }
  EXPECT_EQ(rb.placed_bytes + rb.copied_bytes, t.total);
  // The faults happened, and losses were repaired by retransmission.
  const sim::LinkStats& ab = t.net->stats(Dir::kAtoB);
  const Faults& f = c.ab;
  if (f.loss > 0) {
    EXPECT_GT(ab.lost, 0u);
  }
  if (f.loss_burst > 0) {
    EXPECT_GT(ab.burst_lost, 0u);
  }
  if (f.drop_if) {
    EXPECT_GT(ab.dropped_filter, 0u);
  }
  if (f.reorder > 0) {
    EXPECT_GT(ab.reordered, 0u);
  }
  if (f.reverse > 0) {
    EXPECT_GT(ab.reversals, 0u);
  }
  if (f.duplicate > 0) {
    EXPECT_GT(ab.duplicated, 0u);
  }
  if (f.corrupt_header + f.corrupt_payload + f.corrupt_checksum > 0) {
    EXPECT_GT(ab.corrupted(), 0u);
  }
  if (f.truncate > 0) {
    EXPECT_GT(ab.truncated, 0u);
  }
  if (f.ce > 0) {
    EXPECT_GT(ab.ce_marked, 0u);
  }
  const Counters& ra = tcp_of(t.net->a()).counters();
  if (ab.dropped() + ab.corrupted() + ab.truncated > 0) {
    EXPECT_GT(ra.retransmits, 0u);
  }
  if (f.duplicate > 0) {
    EXPECT_GT(rb.dup_bytes, 0u);
  }
  // Spurious retransmissions: what arrived twice, where the wire duplicated nothing, at most
  // half a segment per frame the wire lost, and 4 segments besides.
  if (c.few_spurious) {
    const uint64_t lost = ab.dropped() + t.net->stats(Dir::kBtoA).dropped();
    EXPECT_LE(rb.dup_bytes, (lost + 8) * 1448 / 2);
  }
  // Both ends let go of their flows once TIME_WAIT ends.
  t.net->run_for(70'000'000'000ull);
  EXPECT_EQ(t.net->a().flows_open(), 0u);
  EXPECT_EQ(t.net->b().flows_open(), 0u);
  EXPECT_EQ(t.net->a().transport().flow_count(), 0u);
  EXPECT_EQ(t.net->b().transport().flow_count(), 0u);
}

class TcpSim : public ::testing::TestWithParam<bool> {};  // param: zero copy

// A case: its name and the statements that set up `c`.
#define SIM_CASE(NAME, ...)   \
  TEST_P(TcpSim, NAME) {      \
    Case c;                   \
    c.name = #NAME;           \
    c.zero_copy = GetParam(); \
    __VA_ARGS__;              \
    run_case(c);              \
  }

SIM_CASE(Clean, {})
SIM_CASE(Loss0_1, {
  c.few_spurious = true;
  c.ab.loss = c.ba.loss = 0.001;
})
SIM_CASE(Loss1, {
  c.few_spurious = true;
  c.ab.loss = c.ba.loss = 0.01;
})
SIM_CASE(Loss5, {
  c.few_spurious = true;
  c.ab.loss = c.ba.loss = 0.05;
})
SIM_CASE(LossBursts, {
  c.few_spurious = true;
  c.ab.loss = 0.002;
  c.ab.loss_burst = 0.5;  // half the losses take 2 to 20 frames
  c.ab.loss_burst_len = 20;
})
SIM_CASE(OnlyAcksLost, {
  c.few_spurious = true;
  c.ba.loss = 0.2;
})
SIM_CASE(FirstAndLastOfEachSendLost, {
  // Drop, once each, the segment starting each 1 MB send and the one ending it.
  auto seen = std::make_shared<std::vector<uint32_t>>();
  c.ab.drop_if = [seen](std::span<const uint8_t> f) {
    if (f.size() < 54 || f[23] != 6) return false;
    const uint8_t* tcp = f.data() + 14 + (f[14] & 0xF) * 4;
    const size_t hl = size_t(tcp[12] >> 4) * 4;
    const size_t plen = size_t(f[16] << 8 | f[17]) - (f[14] & 0xF) * 4 - hl;
    if (plen == 0) return false;
    const uint32_t seq =
        uint32_t(tcp[4]) << 24 | uint32_t(tcp[5]) << 16 | uint32_t(tcp[6]) << 8 | tcp[7];
    for (uint32_t s : *seen) {
      if (s == seq) return false;  // the retransmission goes through
    }
    const bool first = (tcp[13] & kPsh) == 0 && seen->size() % 2 == 0;
    const bool last = (tcp[13] & kPsh) != 0;
    if (!first && !last) return false;
    seen->push_back(seq);
    return true;
  };
})
SIM_CASE(Reorder, {
  c.few_spurious = true;
  c.ab.reorder = 0.02;
  c.ab.reorder_depth = 4;
})
SIM_CASE(WindowReversal, {
  c.few_spurious = true;
  c.ab.reverse = 0.002;
})
SIM_CASE(Duplicates, { c.ab.duplicate = c.ba.duplicate = 0.02; })
SIM_CASE(CorruptHeader, { c.ab.corrupt_header = c.ba.corrupt_header = 0.005; })
SIM_CASE(CorruptPayload, { c.ab.corrupt_payload = 0.005; })
SIM_CASE(CorruptChecksum, { c.ab.corrupt_checksum = c.ba.corrupt_checksum = 0.005; })
SIM_CASE(Truncation, { c.ab.truncate = 0.005; })
SIM_CASE(Everything, {
  c.ab.loss = c.ba.loss = 0.005;
  c.ab.reorder = 0.01;
  c.ab.duplicate = c.ba.duplicate = 0.005;
  c.ab.corrupt_payload = 0.002;
  c.ab.corrupt_header = 0.002;
})
SIM_CASE(SequenceWrap, { c.params = {{"isn", "4294900000"}}; })
SIM_CASE(NoSack, {
  c.params = {{"sack", "off"}};
  c.ab.loss = 0.01;
})
SIM_CASE(NoTimestampsNoWscale, {
  c.params = {{"timestamps", "off"}, {"wscale", "0"}};
  c.ab.loss = 0.002;
})
SIM_CASE(SmallMss, {
  c.params = {{"mss", "536"}};
  c.bytes = 20u << 20;
})
SIM_CASE(Jumbo, {
  c.params = {{"mss", "8960"}};
  c.link.mtu = 9000;
  c.ab.loss = 0.005;
})
SIM_CASE(CubicOnABottleneck, {
  c.params = {{"cc", "cubic"}};
  c.link.rate_bps = 1'000'000'000;
  c.link.queue_bytes = 256 * 1024;
})
SIM_CASE(DctcpWithCeMarks, {
  c.params = {{"cc", "dctcp"}};
  c.ab.ce = 0.05;
})
SIM_CASE(SlowReader, {
  c.reader_delay_ns = 3'000'000;  // each buffer comes back 3 ms after it filled: zero windows
  c.bytes = 20u << 20;
})

INSTANTIATE_TEST_SUITE_P(Placement, TcpSim, ::testing::Values(true, false),
                         [](const auto& i) { return i.param ? "ZeroCopy" : "Copy"; });

// Runs of in-order segments taken as one (rx_burst) change nothing anyone can see: the same
// transfer, seeded alike, with runs on and off ends at the same simulated time with the same
// frames on the links and every counter of both ends the same (segs_merged aside).
std::string run_and_show(const Case& c, bool merge, uint64_t* merged) {
  Transfer t(c, SimNet::seed_from_env(4242));
  tcp_of(t.net->a()).set_merge_runs(merge);
  tcp_of(t.net->b()).set_merge_runs(merge);
  EXPECT_TRUE(t.run()) << "stalled: " << t.where();
  for (const std::string& e : t.errors)
    ADD_FAILURE() << e;
  EXPECT_EQ(t.received, t.total);
  struct Sink final : InfoSink {
    std::string s;
    void text(std::string_view, std::string_view) override {}
    void number(std::string_view k, uint64_t v) override {
      if (k != "segs_merged") s += std::string(k) + "=" + std::to_string(v) + " ";
    }
  } sa, sb;
  tcp_of(t.net->a()).stats(sa);
  tcp_of(t.net->b()).stats(sb);
  *merged = tcp_of(t.net->b()).counters().segs_merged;
  const sim::LinkStats& ab = t.net->stats(Dir::kAtoB);
  const sim::LinkStats& ba = t.net->stats(Dir::kBtoA);
  return "done " + std::to_string(t.done_ns) + " frames " + std::to_string(ab.delivered) + " " +
         std::to_string(ba.delivered) + "\nA " + sa.s + "\nB " + sb.s;
}

class TcpSimMerge : public ::testing::TestWithParam<int> {};

TEST_P(TcpSimMerge, RunsChangeNothingOnTheWire) {
  Case c;
  c.bytes = 16u << 20;
  // No serialization delay: the frames of a TSO descriptor arrive together, in one burst (on a
  // finite rate each frame is a burst of its own, as for a receiver that is never behind).
  c.link.rate_bps = 0;
  switch (GetParam()) {
    case 0:
      c.name = "clean";
      break;
    case 1:
      c.name = "everything";
      c.ab.loss = c.ba.loss = 0.005;
      c.ab.reorder = 0.01;
      c.ab.duplicate = c.ba.duplicate = 0.005;
      c.ab.corrupt_payload = 0.002;
      c.ab.corrupt_header = 0.002;
      break;
    case 2:
      c.name = "dctcp";
      c.params = {{"cc", "dctcp"}};
      c.ab.ce = 0.05;
      c.ab.loss = 0.002;
      break;
    case 3:
      c.name = "slow reader";
      c.reader_delay_ns = 3'000'000;
      c.bytes = 8u << 20;
      break;
    default:
      c.name = "no timestamps";
      c.params = {{"timestamps", "off"}, {"sack", "off"}};
      c.ab.loss = 0.005;
      break;
  }
  SCOPED_TRACE(c.name);
  uint64_t merged_on = 0, merged_off = 0;
  const std::string on = run_and_show(c, true, &merged_on);
  const std::string off = run_and_show(c, false, &merged_off);
  EXPECT_EQ(on, off);
  EXPECT_GT(merged_on, 0u);  // runs were taken as one
  EXPECT_EQ(merged_off, 0u);
}

INSTANTIATE_TEST_SUITE_P(Faults, TcpSimMerge, ::testing::Range(0, 5));

// A path that goes down for longer than several RTOs comes back and finishes.
TEST(TcpSimPath, DownAndUp) {
  Case c;
  c.name = "DownAndUp";
  c.bytes = 30u << 20;
  Transfer t(c, SimNet::seed_from_env(77));
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.net->run_until([&] { return t.received >= (10u << 20); }, 10'000'000'000ull));
  t.net->faults(Dir::kAtoB).down = true;
  t.net->faults(Dir::kBtoA).down = true;
  t.net->run_for(3'000'000'000ull);
  const uint64_t during = t.received;
  t.net->faults(Dir::kAtoB).down = false;
  t.net->faults(Dir::kBtoA).down = false;
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  for (const std::string& e : t.errors)
    ADD_FAILURE() << e;
  EXPECT_EQ(t.received, t.total);
  EXPECT_LT(during, t.total);
  EXPECT_GT(tcp_of(t.net->a()).counters().rtos, 0u);
}

// Under random loss each way (1 % and 5 %) the sender cuts its window once per loss episode
// (RFC 5681 3.1, RFC 6582: a fast recovery, or an RTO outside one), never again inside one (an
// RTO in recovery, or of a segment an RTO already resent), and by its algorithm's factor of the
// window it had (NewReno half, CUBIC 0.7), not of a flight that loss detection has already
// emptied of SACKed and lost bytes.
struct WindowCase {
  const char* cc;
  double loss;
};
void PrintTo(const WindowCase& w, std::ostream* os) {
  *os << w.cc << " at " << w.loss * 100 << " % loss";
}
class TcpSimWindow : public ::testing::TestWithParam<WindowCase> {};

TEST_P(TcpSimWindow, OneReductionPerLossEpisode) {
  const WindowCase& p = GetParam();
  Case c;
  c.name = std::string("Window-") + p.cc + "-" + std::to_string(p.loss);
  c.params = {{"cc", p.cc}};
  c.bytes = 32u << 20;
  c.link.rate_bps = 1'000'000'000;
  c.link.delay_ns = 50'000;
  c.ab.loss = c.ba.loss = p.loss;
  Transfer t(c, SimNet::seed_from_env(2500));
  WindowWatch w;
  w.beta = std::string(p.cc) == "cubic" ? 0.7 : 0.5;
  t.on_step = [&] { w.sample(t); };
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  for (const std::string& e : t.errors)
    ADD_FAILURE() << e;
  EXPECT_EQ(t.received, t.total);
  EXPECT_GT(w.episodes, 20u);
  std::string inside, deep;
  for (const WindowWatch::Cut& k : w.cuts) {
    if (!k.new_episode && k.moved && inside.size() < 2000)
      inside += "\n  " + WindowWatch::describe(k);
    if (k.deep && deep.size() < 2000) deep += "\n  " + WindowWatch::describe(k);
  }
  EXPECT_EQ(w.inside, 0u) << "cuts inside an episode:" << inside;
  EXPECT_EQ(w.deep, 0u) << "cuts deeper than beta x cwnd:" << deep;
}

INSTANTIATE_TEST_SUITE_P(Cc, TcpSimWindow,
                         ::testing::Values(WindowCase{"newreno", 0.01}, WindowCase{"cubic", 0.01},
                                           WindowCase{"newreno", 0.05}, WindowCase{"cubic", 0.05}),
                         [](const auto& i) {
                           return std::string(i.param.cc) + "Loss" +
                                  std::to_string(int(i.param.loss * 100));
                         });

// CUBIC's window grows past what RACK's log holds one descriptor each (XmitLog::kMax); a loss
// among the oldest transmissions must still start a recovery, not wait for the RTO (200 ms,
// where the whole transfer takes 600).
TEST(TcpSimRack, LargeWindowLossesRecoverWithoutAnRto) {
  Case c;
  c.name = "LargeWindow";
  c.params = {{"cc", "cubic"}};
  c.bytes = 64u << 20;
  c.link.rate_bps = 1'000'000'000;
  c.link.delay_ns = 50'000;
  c.ab.loss = c.ba.loss = 0.001;
  Transfer t(c, SimNet::seed_from_env(1000));
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  EXPECT_EQ(t.received, t.total);
  EXPECT_GT(tcp_of(t.net->a()).counters().fast_recoveries, 20u);
  EXPECT_EQ(tcp_of(t.net->a()).counters().rtos, 0u);
}

// A retransmission carries only what was lost: never bytes the peer SACKed (a hole can be
// shorter than a segment where a send ended in a runt, and descriptors are cut at whole
// segments so that no other runt makes one). Such bytes are wasted, and their SACK,
// already known, would tell RACK that the retransmission arrived while it still queues, so
// everything sent before it would be taken for lost and resent too.
TEST(TcpSimRack, RetransmissionsCarryOnlyLostBytes) {
  Case c;
  c.name = "OnlyLostBytes";
  c.ab.loss = c.ba.loss = 0.001;
  auto payload = std::make_shared<uint64_t>(0);  // every data byte put on the wire
  auto runts = std::make_shared<uint64_t>(0);    // segments short of the MSS not ending a send
  c.ab.drop_if = [payload, runts](std::span<const uint8_t> f) {
    if (f.size() >= 54 && f[23] == 6) {
      const size_t ihl = (f[14] & 0xF) * 4;
      const size_t hl = size_t(f[14 + ihl + 12] >> 4) * 4;
      const size_t len = size_t(f[16] << 8 | f[17]) - ihl - hl;
      *payload += len;
      if (len != 0 && len < 1448 && (f[14 + ihl + 13] & kPsh) == 0) ++*runts;
    }
    return false;
  };
  Transfer t(c, SimNet::seed_from_env(12709463));
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  EXPECT_EQ(t.received, t.total);
  const sim::LinkStats& ab = t.net->stats(Dir::kAtoB);
  ASSERT_GT(ab.lost, 20u);
  // What went twice: at most a segment per frame lost, and a few tail probes; what arrived
  // twice, a few segments (a probe of a tail that was not lost, a resend whose SACK was lost).
  EXPECT_LE(*payload - t.total, (ab.lost + 4) * 1448);
  EXPECT_LE(tcp_of(t.net->b()).counters().dup_bytes, 8u * 1448);
  // Descriptors are cut at whole segments, so a hole is never shorter than one.
  EXPECT_EQ(*runts, 0u);
}

// A tail loss probe whose original was only late: the original (and the FIN behind it) arrive
// and are acknowledged before the probe, so the ACK that reaches the probe's end comes before
// any DSACK of the probe could. Nothing says the probe repaired a loss, and the window stays
// (RFC 8985 7.4.2). It used to be cut, to 2 segments: to half of what was then in flight.
TEST(TcpSimRack, ProbeOfALateTailReducesNothing) {
  Case c;
  c.name = "LateTail";
  c.bytes = 700 * 1448;  // one send, its last segment full: the probe timeout has no delayed ACK
  c.link.rate_bps = 1'000'000'000;
  c.link.delay_ns = 50'000;
  // The last segment and the FIN are held 20 ms, past the probe timeout (2 srtt + 2 ms, srtt
  // under 2 ms here); the probe (the last segment again) 40 ms.
  auto last_seen = std::make_shared<int>(0);
  c.ab.delay_if = [last_seen](std::span<const uint8_t> f) -> uint64_t {
    if (f.size() < 54 || f[23] != 6) return 0;
    const uint8_t flags = f[14 + (f[14] & 0xF) * 4 + 13];
    if ((flags & kFin) != 0) return 20'000'000;
    if ((flags & kPsh) == 0) return 0;
    return ++*last_seen == 1 ? 20'000'000 : 40'000'000;
  };
  Transfer t(c, SimNet::seed_from_env(3100));
  WindowWatch w;
  t.on_step = [&] { w.sample(t); };
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  EXPECT_EQ(t.received, t.total);
  const Counters& a = tcp_of(t.net->a()).counters();
  EXPECT_EQ(*last_seen, 2);  // the original and the probe
  EXPECT_EQ(a.tlp_probes, 1u);
  EXPECT_EQ(a.rtos, 0u);
  std::string cuts;
  for (const WindowWatch::Cut& k : w.cuts)
    cuts += "\n  " + WindowWatch::describe(k);
  EXPECT_TRUE(w.cuts.empty()) << "reductions:" << cuts;
}

// A path that stalls the ACKs past the RTO but loses nothing: the RTO was spurious. The first
// ACK after it echoes an original's timestamp (RFC 3522): the reduction is undone at once and
// the RTO's go-back-N stops, so little more than the RTO's own resend arrives twice.
TEST(TcpSimRack, ASpuriousRtoIsUndone) {
  Case c;
  c.name = "SpuriousRto";
  c.bytes = 32u << 20;
  c.link.rate_bps = 1'000'000'000;
  c.link.delay_ns = 50'000;
  // From 60 ms into the run, every frame from the receiver is held until 400 ms: the sender
  // hears nothing for longer than its RTO (the 200 ms floor).
  auto net = std::make_shared<const SimNet*>(nullptr);
  c.ba.delay_if = [net](std::span<const uint8_t>) -> uint64_t {
    if (*net == nullptr) return 0;
    const uint64_t now = (*net)->now_ns(), from = 60'000'000, until = 400'000'000;
    return now >= from && now < until ? until - now : 0;
  };
  Transfer t(c, SimNet::seed_from_env(4100));
  *net = t.net.get();
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  EXPECT_EQ(t.received, t.total);
  const Counters& a = tcp_of(t.net->a()).counters();
  const Counters& b = tcp_of(t.net->b()).counters();
  ASSERT_GE(a.rtos, 1u);
  EXPECT_EQ(a.undos, 1u);
  EXPECT_LE(b.dup_bytes, 4u * 1448) << "the RTO's resending went on after the undo";
}

// A path that reorders but loses nothing: recoveries RACK starts for segments that were only
// late are undone once the peer reports every resend of theirs as a duplicate. And a late
// original's SACK is not taken for the resend's (the ACK echoes the original's timestamp):
// else everything sent before the resend, still on its way, would be called lost and resent.
TEST(TcpSimRack, ReductionsForReorderingAreUndone) {
  Case c;
  c.name = "ReorderUndo";
  c.bytes = 32u << 20;
  c.link.rate_bps = 1'000'000'000;
  c.link.delay_ns = 50'000;
  c.ab.reorder = 0.01;
  c.ab.reorder_depth = 16;
  Transfer t(c, SimNet::seed_from_env(4200));
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  EXPECT_EQ(t.received, t.total);
  const Counters& a = tcp_of(t.net->a()).counters();
  ASSERT_GT(a.fast_recoveries, 0u);
  EXPECT_LE(tcp_of(t.net->b()).counters().dup_bytes, 256u * 1448);
  // Each episode's resends all reported as duplicates, but an episode may overlap the next
  // (whose start forgets what is left of the last): at least half are undone.
  EXPECT_GE(a.undos * 2, a.fast_recoveries);
}

// Congestion control reacts to a bottleneck: with CE marks DCTCP cuts its window.
TEST(TcpSimCc, EcnIsNegotiatedAndReactedTo) {
  Case c;
  c.name = "Ecn";
  c.params = {{"cc", "dctcp"}};
  c.ab.ce = 0.02;
  c.bytes = 20u << 20;
  Transfer t(c, SimNet::seed_from_env(5));
  ASSERT_TRUE(t.run());
  EXPECT_GT(t.net->stats(Dir::kAtoB).ce_marked, 0u);
  EXPECT_GT(tcp_of(t.net->a()).counters().ecn_reductions, 0u);
  EXPECT_EQ(tcp_of(t.net->a()).counters().retransmits, 0u);
  EXPECT_EQ(t.received, t.total);
}

}  // namespace
}  // namespace cleave::transport::tcp::test
