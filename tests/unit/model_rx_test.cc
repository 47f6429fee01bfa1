// model_rx_test.cc - the NIC model's receive decisions (a-e) at their edges, per transport.
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;
using test::pattern;

constexpr uint8_t kUntouched = 0xEE;
constexpr uint16_t kMr = 1;

FlowKey tcp_key(uint16_t sport = 40000) {
  return {test::kPeer, test::kLocal, sport, 5001, 6};
}

NicConfig small_config() {
  NicConfig c;
  c.max_flows = 8;
  c.max_mrs = 16;
  c.ms_committed_per_flow = 8;
  c.ms_store_entries = 32;
  c.ms_chunk = 4;
  c.tx_completions = 8;
  return c;
}

// One TCP flow (id 0) over one MR; MSs are posted at scattered offsets so a wrong fragment
// split lands on untouched bytes and shows.
class ModelRx : public ::testing::Test {
 protected:
  NicConfig base_cfg = small_config();  // what SetUp starts with
  struct PostedMs {
    uint64_t off;
    uint32_t len;
  };

  void SetUp() override { start(1000, base_cfg); }
  void start(uint32_t first_seq, NicConfig cfg = small_config()) {
    mem.assign(1 << 20, kUntouched);
    nic = std::make_unique<NicModel>(cfg);
    ASSERT_EQ(nic->mr_add(kMr, mem.data(), mem.size(), 42, kMrRemoteWrite), Err::kOk);
    FlowSpec s;
    s.key = tcp_key();
    s.initial_seq = first_seq;
    ASSERT_EQ(nic->flow_add(0, s), Err::kOk);
    isn = first_seq;
    posted.clear();
  }
  void post(uint64_t off, uint32_t len) {
    ASSERT_EQ(nic->ms_post(0, {kMr, off, len, 0}), Err::kOk);
    posted.push_back({off, len});
  }
  // Where stream byte k (counted from the ISN) lives in mem.
  size_t where(uint64_t k) const {
    for (const auto& m : posted) {
      if (k < m.len) return size_t(m.off + k);
      k -= m.len;
    }
    ADD_FAILURE() << "stream byte beyond the posted MSs";
    return 0;
  }
  void expect_stream(uint64_t from, const Bytes& data) {
    for (size_t i = 0; i < data.size(); i++) {
      ASSERT_EQ(mem[where(from + i)], data[i]) << "stream byte " << from + i;
    }
  }
  RxEntry rx(const Bytes& f) {
    RxEntry e;
    nic->rx(f, e);
    return e;
  }
  RxEntry send(uint32_t rel, const Bytes& payload) {
    return rx(test::tcp_frame(isn + rel, payload));
  }
  size_t untouched() const { return size_t(std::count(mem.begin(), mem.end(), kUntouched)); }

  std::vector<uint8_t> mem;
  std::unique_ptr<NicModel> nic;
  std::vector<PostedMs> posted;
  uint32_t isn = 0;
};

// ---- (a) in order -------------------------------------------------------------------------

TEST_F(ModelRx, InOrderPlacesAtNextPosition) {
  post(0x1000, 3000);
  Bytes p1 = pattern(1000);
  RxEntry e = send(0, p1);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.flow_id, 0u);
  EXPECT_FALSE(e.out_of_order);
  ASSERT_EQ(e.nfrags, 1);
  EXPECT_EQ(e.frags[0].mr, kMr);
  EXPECT_EQ(e.frags[0].offset, 0x1000u);
  EXPECT_EQ(e.frags[0].len, 1000u);
  EXPECT_EQ(e.placed, 1000u);
  EXPECT_EQ(e.seq, isn);
  EXPECT_EQ(e.header_len, 54);
  EXPECT_EQ(e.ip_csum, CsumStatus::kGood);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  Bytes f1 = test::tcp_frame(isn, p1);
  EXPECT_EQ(Bytes(e.header.begin(), e.header.begin() + 54), Bytes(f1.begin(), f1.begin() + 54));
  expect_stream(0, p1);

  ASSERT_EQ(nic->cursor_update(0, isn + 1000), Err::kOk);
  Bytes p2 = pattern(1000, 1000);
  e = send(1000, p2);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x1000u + 1000);
  expect_stream(1000, p2);
  EXPECT_EQ(nic->counter(Ctr::kRxInOrder), 2u);
  EXPECT_EQ(nic->counter(Ctr::kRxPlacedBytes), 2000u);
  EXPECT_EQ(untouched(), mem.size() - 2000);
}

TEST_F(ModelRx, BurstGivesOneEntryPerFrame) {
  post(0x100, 1000);
  std::vector<Bytes> f = {test::tcp_frame(isn, pattern(100)), test::tcp_frame(isn, {}),
                          test::tcp_frame(isn, pattern(10), 0x18, 1)};
  std::vector<std::span<const uint8_t>> spans(f.begin(), f.end());
  std::vector<RxEntry> out(2);
  ASSERT_EQ(nic->rx_burst(spans, out), 2u);  // as many as there are entries
  EXPECT_EQ(out[0].decision, Decision::kPlaced);
  EXPECT_EQ(out[1].decision, Decision::kNoPayload);
  out.resize(4);
  ASSERT_EQ(nic->rx_burst(spans, out), 3u);
  EXPECT_EQ(out[2].reason, DeferReason::kFlowMiss);
  EXPECT_EQ(nic->counter(Ctr::kRxFrames), 5u);
}

TEST_F(ModelRx, PayloadEndingExactlyOnMsEdgeLeavesNoEmptyFragment) {
  post(0x100, 1000);
  post(0x8000, 1000);
  RxEntry e = send(0, pattern(1000));
  ASSERT_EQ(e.nfrags, 1);
  EXPECT_EQ(e.frags[0].offset, 0x100u);
  EXPECT_EQ(e.frags[0].len, 1000u);
  ASSERT_EQ(nic->cursor_update(0, isn + 1000), Err::kOk);
  e = send(1000, pattern(1000, 1000));
  ASSERT_EQ(e.nfrags, 1);  // wholly in the second MS: no zero-length first fragment
  EXPECT_EQ(e.frags[0].offset, 0x8000u);
  EXPECT_EQ(e.frags[0].len, 1000u);
  expect_stream(0, pattern(2000));
  // And the MS before the edge retires exactly when the cursor reaches its end.
  ASSERT_EQ(nic->cursor_update(0, isn + 999), Err::kBadArgument);  // backwards
  EXPECT_EQ(nic->ms_retire(0, 2), Err::kNotConsumed);
  EXPECT_EQ(nic->ms_retire(0, 1), Err::kOk);
  EXPECT_EQ(nic->ms_count(0), 1u);
}

TEST_F(ModelRx, PayloadSpansThreeMss) {
  post(0x100, 100);
  post(0x2000, 200);
  post(0x5000, 300);
  Bytes p = pattern(550);
  RxEntry e = send(0, p);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  ASSERT_EQ(e.nfrags, 3);
  EXPECT_EQ(e.frags[0].offset, 0x100u);
  EXPECT_EQ(e.frags[0].len, 100u);
  EXPECT_EQ(e.frags[1].offset, 0x2000u);
  EXPECT_EQ(e.frags[1].len, 200u);
  EXPECT_EQ(e.frags[2].offset, 0x5000u);
  EXPECT_EQ(e.frags[2].len, 250u);
  expect_stream(0, p);
  EXPECT_EQ(untouched(), mem.size() - 550);
  EXPECT_EQ(nic->counter(Ctr::kRxFragments), 3u);
}

TEST_F(ModelRx, MoreFragmentsThanAnEntryHoldsDefers) {
  for (int i = 0; i < 5; i++)
    post(0x1000 * (i + 1), 10);
  RxEntry e = send(0, pattern(50));
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kTooManyFrags);
  EXPECT_EQ(untouched(), mem.size());
}

TEST_F(ModelRx, ZeroLengthPayloadDeliversHeaderOnly) {
  post(0x100, 1000);
  RxEntry e = send(0, {});
  EXPECT_EQ(e.decision, Decision::kNoPayload);
  EXPECT_EQ(e.payload_len, 0u);
  EXPECT_EQ(e.header_len, 54);
  EXPECT_EQ(e.nfrags, 0);
  EXPECT_EQ(untouched(), mem.size());
  EXPECT_EQ(nic->counter(Ctr::kRxNoPayload), 1u);
}

TEST_F(ModelRx, JumboPayloadAcrossThreeMss) {
  post(0x10000, 4096);
  post(0x20000, 4096);
  post(0x30000, 4096);
  Bytes p = pattern(9000);
  RxEntry e = send(0, p);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  ASSERT_EQ(e.nfrags, 3);
  EXPECT_EQ(e.frags[2].len, 9000u - 8192);
  expect_stream(0, p);
}

// ---- (b) and (c): before the cursor --------------------------------------------------------

TEST_F(ModelRx, WhollyBeforeCursorIsDroppedAndWritesNothing) {
  post(0x100, 4000);
  Bytes p = pattern(1000);
  send(0, p);
  ASSERT_EQ(nic->cursor_update(0, isn + 1000), Err::kOk);
  Bytes other(1000, 0x55);
  RxEntry e = send(0, other);  // ends exactly at the cursor
  EXPECT_EQ(e.decision, Decision::kDropped);
  EXPECT_EQ(e.nfrags, 0);
  e = send(500, Bytes(500, 0x55));
  EXPECT_EQ(e.decision, Decision::kDropped);
  expect_stream(0, p);
  EXPECT_EQ(nic->counter(Ctr::kRxDropped), 2u);
}

TEST_F(ModelRx, PartlyBeforeCursorIsTrimmed) {
  post(0x100, 1000);
  post(0x9000, 3000);
  Bytes p = pattern(1000);
  send(0, p);
  ASSERT_EQ(nic->cursor_update(0, isn + 1000), Err::kOk);
  Bytes q = pattern(1000, 600);
  for (size_t i = 0; i < 400; i++)
    q[i] = 0x55;  // the stale part must never be written
  RxEntry e = send(600, q);
  EXPECT_EQ(e.decision, Decision::kTrimmed);
  EXPECT_EQ(e.trimmed, 400u);
  EXPECT_EQ(e.placed, 600u);
  ASSERT_EQ(e.nfrags, 1);
  EXPECT_EQ(e.frags[0].offset, 0x9000u);
  expect_stream(0, pattern(1600));
  // Trimmed by one byte only.
  e = send(999, pattern(2, 999));
  EXPECT_EQ(e.decision, Decision::kTrimmed);
  EXPECT_EQ(e.trimmed, 1u);
  EXPECT_EQ(nic->counter(Ctr::kRxTrimmedBytes), 401u);
}

// ---- (d) past a hole ------------------------------------------------------------------------

TEST_F(ModelRx, PastHoleWalksToThePosition) {
  for (int i = 0; i < 4; i++)
    post(0x10000 * (i + 1), 1000);
  Bytes p = pattern(1000, 2500);
  RxEntry e = send(2500, p);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_TRUE(e.out_of_order);
  ASSERT_EQ(e.nfrags, 2);
  EXPECT_EQ(e.frags[0].offset, 0x30000u + 500);
  EXPECT_EQ(e.frags[0].len, 500u);
  EXPECT_EQ(e.frags[1].offset, 0x40000u);
  expect_stream(2500, p);
  EXPECT_EQ(nic->counter(Ctr::kRxPastHole), 1u);
  // The hole filled later lands in front of it.
  e = send(0, pattern(2500));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_FALSE(e.out_of_order);
  expect_stream(0, pattern(3500));
}

TEST_F(ModelRx, RetransmissionOverwritesFutureMs) {
  post(0x100, 1000);
  post(0x9000, 1000);
  send(1200, Bytes(300, 0x11));
  EXPECT_EQ(mem[0x9000 + 200], 0x11);
  RxEntry e = send(1100, pattern(500, 1100));  // covers the earlier bytes again
  EXPECT_EQ(e.decision, Decision::kPlaced);
  expect_stream(1100, pattern(500, 1100));
}

// ---- (e) defer ------------------------------------------------------------------------------

TEST_F(ModelRx, MsExhaustionDefersWholePacket) {
  RxEntry e = send(0, pattern(100));
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kNoMs);
  post(0x100, 1000);
  post(0x9000, 1000);
  e = send(1500, pattern(1000));  // half beyond the last MS
  EXPECT_EQ(e.reason, DeferReason::kNoMs);
  e = send(5000, pattern(10));  // wholly beyond
  EXPECT_EQ(e.reason, DeferReason::kNoMs);
  EXPECT_EQ(untouched(), mem.size());
  e = send(1000, pattern(1000));  // exactly up to the end fits
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(nic->defer_count(DeferReason::kNoMs), 3u);
}

TEST_F(ModelRx, MsListsDrawFromTheSharedStoreUntilItRunsOut) {
  // 8 committed + 32 shared entries: flow 0 can hold 40, then flow 1 still has its own 8.
  for (int i = 0; i < 40; i++)
    post(uint64_t(i) * 16, 16);
  EXPECT_EQ(nic->ms_post(0, {kMr, 0x8000, 16, 0}), Err::kMsFull);
  EXPECT_EQ(nic->store_chunks_free(), 0u);
  FlowSpec s;
  s.key = tcp_key(40001);
  ASSERT_EQ(nic->flow_add(1, s), Err::kOk);
  for (int i = 0; i < 8; i++)
    EXPECT_EQ(nic->ms_post(1, {kMr, 0x9000, 16, 0}), Err::kOk);
  EXPECT_EQ(nic->ms_post(1, {kMr, 0x9000, 16, 0}), Err::kMsFull);
  // Placement still walks across committed and store chunks.
  RxEntry e = send(16 * 30 + 5, pattern(40));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.nfrags, 3);
  expect_stream(16 * 30 + 5, pattern(40));
  // Retiring returns store chunks.
  ASSERT_EQ(nic->cursor_update(0, isn + 16 * 40), Err::kOk);
  ASSERT_EQ(nic->ms_retire(0, 40), Err::kOk);
  EXPECT_EQ(nic->store_chunks_free(), 8u);
  EXPECT_EQ(nic->cmd_error_count(Err::kMsFull), 2u);
}

TEST_F(ModelRx, FlowMissAndFullTableDefer) {
  for (uint32_t id = 1; id < 8; id++) {
    FlowSpec s;
    s.key = tcp_key(uint16_t(41000 + id));
    ASSERT_EQ(nic->flow_add(id, s), Err::kOk);
  }
  FlowSpec s;
  s.key = tcp_key(42000);
  EXPECT_EQ(nic->flow_add(8, s), Err::kFlowTableFull);
  EXPECT_EQ(nic->flow_add(kNoFlow, s), Err::kBadArgument);
  RxEntry e = rx(test::tcp_frame(1, pattern(10), 0x18, 42000));
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kFlowMiss);
  EXPECT_EQ(e.flow_id, kNoFlow);
  EXPECT_EQ(nic->flows_in_use(), 8u);
  EXPECT_EQ(nic->defer_count(DeferReason::kFlowMiss), 1u);
}

TEST_F(ModelRx, CopyModeDefersEverything) {
  post(0x100, 1000);
  ASSERT_EQ(nic->flow_set_mode(0, FlowMode::kCopy), Err::kOk);
  EXPECT_EQ(send(0, pattern(10)).reason, DeferReason::kCopyMode);
  EXPECT_EQ(send(0, {}).reason, DeferReason::kCopyMode);
  ASSERT_EQ(nic->flow_set_mode(0, FlowMode::kZeroCopy), Err::kOk);
  EXPECT_EQ(send(0, pattern(10)).decision, Decision::kPlaced);
}

// ---- sequence wrap ----------------------------------------------------------------------------

TEST_F(ModelRx, TcpSequenceWrapsAt2To32) {
  start(0xFFFFFC00u);  // 1024 bytes before the wrap
  post(0x100, 1000);
  post(0x9000, 1000);
  post(0x20000, 1000);
  Bytes p = pattern(1500);
  RxEntry e = send(0, p);  // seq 0xFFFFFC00 .. 0x000001DC
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.nfrags, 2);
  expect_stream(0, p);
  ASSERT_EQ(nic->cursor_update(0, isn + 1500), Err::kOk);  // numerically smaller: forward
  EXPECT_EQ(nic->cursor(0), 0x1DCu);
  e = send(0, Bytes(1000, 0x55));  // numerically larger than the cursor, yet before it
  EXPECT_EQ(e.decision, Decision::kDropped);
  e = send(1000, pattern(1000, 1000));  // 0xFFFFFFE8: 500 bytes before the cursor
  EXPECT_EQ(e.decision, Decision::kTrimmed);
  EXPECT_EQ(e.trimmed, 500u);
  e = send(1020, pattern(10, 1020));  // straddles 2^32 itself, wholly before the cursor
  EXPECT_EQ(e.decision, Decision::kDropped);
  expect_stream(0, pattern(2000));
  EXPECT_EQ(nic->ms_retire(0, 1), Err::kOk);
  EXPECT_EQ(nic->ms_retire(0, 1), Err::kNotConsumed);  // ends at isn+2000, cursor at 1500
}

TEST_F(ModelRx, SynTakesOneSequenceNumber) {
  start(1000);
  post(0x100, 100);
  RxEntry e = rx(test::tcp_frame(isn - 1, pattern(10), 0x02));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  expect_stream(0, pattern(10));
}

// TCP with message semantics: flow 1, messages numbered from 5, the option of every segment
// names its message (number, first sequence number, length).
class ModelTcpMsg : public ModelRx {
 protected:
  void SetUp() override {
    ModelRx::SetUp();
    FlowSpec s;
    s.key = tcp_key(40001);
    s.messages = true;
    s.initial_seq = 5000;
    ASSERT_EQ(nic->flow_add(1, s), Err::kOk);
  }
  void post_msg(uint32_t msg, uint64_t off, uint32_t len) {
    ASSERT_EQ(nic->ms_post(1, {kMr, off, len, msg}), Err::kOk);
  }
  RxEntry seg(uint32_t seq, const Bytes& payload, uint32_t msg, uint32_t start, uint32_t length) {
    return rx(
        test::tcp_frame_opts(seq, payload, test::msg_option(msg, start, length, 99), 0x18, 40001));
  }
  Bytes at(uint64_t off, size_t len) const {
    return Bytes(mem.begin() + long(off), mem.begin() + long(off + len));
  }
};

TEST_F(ModelTcpMsg, OptionSelectsTheMsAndTheOffset) {
  post_msg(5, 0x10000, 1000);
  post_msg(6, 0x20000, 1000);
  // Message 5 is [5000, 5300), message 6 [5300, 5500). Message 6's second half first, then its
  // first half, then message 5 in two segments the other way round.
  RxEntry e = seg(5400, pattern(100, 100), 6, 5300, 200);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_TRUE(e.out_of_order);
  EXPECT_EQ(e.msg_seq, 6u);
  EXPECT_EQ(e.nfrags, 1);
  EXPECT_EQ(e.frags[0].offset, 0x20000u + 100);
  EXPECT_EQ(e.header_len, 14 + 20 + 20 + 20);  // Ethernet, IPv4, TCP, the option
  EXPECT_EQ(seg(5300, pattern(100, 0), 6, 5300, 200).decision, Decision::kPlaced);
  EXPECT_EQ(seg(5150, pattern(150, 150), 5, 5000, 300).decision, Decision::kPlaced);
  e = seg(5000, pattern(150, 0), 5, 5000, 300);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_FALSE(e.out_of_order);
  EXPECT_EQ(e.frags[0].offset, 0x10000u);
  EXPECT_EQ(at(0x10000, 300), pattern(300));
  EXPECT_EQ(at(0x20000, 200), pattern(200));
  EXPECT_EQ(mem[0x10000 + 300], kUntouched);
  EXPECT_EQ(mem[0x20000 + 200], kUntouched);
  EXPECT_EQ(nic->counter(Ctr::kRxMessage), 4u);
  EXPECT_EQ(untouched(), mem.size() - 500);

  // Message 5 complete: the cursor passes it and its MS retires by number.
  ASSERT_EQ(nic->cursor_update(1, 5300), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 5), Err::kOk);
  EXPECT_EQ(nic->ms_count(1), 1u);
  EXPECT_EQ(nic->ms_retire_msg(1, 5), Err::kNoSuchMessage);
  // Before the cursor: dropped; across it: trimmed, placed at (seq - start) + trim.
  EXPECT_EQ(seg(5000, pattern(300, 9), 5, 5000, 300).decision, Decision::kDropped);
  ASSERT_EQ(nic->cursor_update(1, 5350), Err::kOk);
  e = seg(5300, pattern(100, 7), 6, 5300, 200);
  EXPECT_EQ(e.decision, Decision::kTrimmed);
  EXPECT_EQ(e.trimmed, 50u);
  EXPECT_EQ(e.placed, 50u);
  EXPECT_EQ(e.frags[0].offset, 0x20000u + 50);
  EXPECT_EQ(at(0x20000, 50), pattern(50, 0));  // before the cursor: untouched by the trim
  EXPECT_EQ(at(0x20000 + 50, 50), pattern(50, 57));
  // A message whose MS was retired is not placed again (a late copy of message 5 past the
  // cursor would have nowhere to go).
  EXPECT_EQ(seg(5400, pattern(10), 5, 5000, 600).reason, DeferReason::kNoMessage);
}

TEST_F(ModelTcpMsg, UntrustedOptionsAreDeferredAndWriteNothing) {
  post_msg(5, 0x10000, 1000);
  post_msg(6, 0x20000, 1000);
  const size_t before = untouched();
  // No option at all, or only the 8-byte form (credit, no message): the copy path.
  EXPECT_EQ(rx(test::tcp_frame(5000, pattern(10), 0x18, 40001)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(
      rx(test::tcp_frame_opts(5000, pattern(10), {253, 8, 0xC1, 0xEA, 0, 0, 0, 9}, 0x18, 40001))
          .reason,
      DeferReason::kNoMessage);
  // Another ExID of the same kind is somebody else's option.
  Bytes other = test::msg_option(5, 5000, 300);
  other[3] = 0xEB;
  EXPECT_EQ(rx(test::tcp_frame_opts(5000, pattern(10), other, 0x18, 40001)).reason,
            DeferReason::kNoMessage);
  // A malformed option list (a zero length, a length past the header) is a bad header.
  EXPECT_EQ(rx(test::tcp_frame_opts(5000, pattern(10), {2, 0, 1, 1}, 0x18, 40001)).reason,
            DeferReason::kBadL4Header);
  EXPECT_EQ(rx(test::tcp_frame_opts(5000, pattern(10), {253, 40, 0xC1, 0xEA}, 0x18, 40001)).reason,
            DeferReason::kBadL4Header);
  // The option may follow others (MSS-like padding, timestamps): still found.
  Bytes ts = {8, 10, 0, 0, 0, 1, 0, 0, 0, 2};
  Bytes both = ts;
  Bytes m = test::msg_option(5, 5000, 300);
  both.insert(both.end(), m.begin(), m.end());
  EXPECT_EQ(rx(test::tcp_frame_opts(5000, pattern(10), both, 0x18, 40001)).decision,
            Decision::kPlaced);
  const size_t after_good = untouched();
  EXPECT_EQ(after_good, before - 10);
  // Lies: the message starting after the segment, the payload past the message's end, a
  // zero-length message, a start far behind (offset past 2^31).
  EXPECT_EQ(seg(5010, pattern(10), 5, 5011, 300).reason, DeferReason::kBadL4Header);
  EXPECT_EQ(seg(5290, pattern(20), 5, 5000, 300).reason, DeferReason::kBadL4Header);
  EXPECT_EQ(seg(5010, pattern(10), 5, 5010, 0).reason, DeferReason::kBadL4Header);
  EXPECT_EQ(seg(5010, pattern(10), 5, 5010 + 0x80000000u, 0xFFFFFFFFu).reason,
            DeferReason::kBadL4Header);
  // A message nobody posted a buffer for; one the payload overflows (the option says the
  // message is longer than its buffer; only the MS bounds the write).
  EXPECT_EQ(seg(5010, pattern(10), 7, 5000, 300).reason, DeferReason::kNoMessage);
  EXPECT_EQ(seg(5010, pattern(10), 4, 5000, 300).reason, DeferReason::kNoMessage);
  EXPECT_EQ(seg(5990, pattern(20), 5, 5000, 5000).reason, DeferReason::kMsOverflow);
  EXPECT_EQ(untouched(), after_good);
  EXPECT_EQ(nic->defer_count(DeferReason::kBadL4Header), 6u);
  EXPECT_EQ(nic->defer_count(DeferReason::kNoMessage), 5u);
  EXPECT_EQ(nic->defer_count(DeferReason::kMsOverflow), 1u);
}

// A buffer shorter than its message: what lies inside the MS is placed; a payload reaching past
// its end is deferred whole, so the transport's copy path stores exactly the part that fits and
// the NIC never writes beyond the MS.
TEST_F(ModelTcpMsg, ShortBufferTruncatesThroughTheCopyPath) {
  post_msg(5, 0x10000, 250);  // message 5 is 1000 bytes: [5000, 6000)
  post_msg(6, 0x20000, 100);
  EXPECT_EQ(seg(5000, pattern(200), 5, 5000, 1000).decision, Decision::kPlaced);
  EXPECT_EQ(seg(5200, pattern(100, 200), 5, 5000, 1000).reason, DeferReason::kMsOverflow);
  EXPECT_EQ(seg(5300, pattern(700, 300), 5, 5000, 1000).reason, DeferReason::kMsOverflow);
  // Exactly to the end fits.
  EXPECT_EQ(seg(5200, pattern(50, 200), 5, 5000, 1000).decision, Decision::kPlaced);
  EXPECT_EQ(at(0x10000, 250), pattern(250));
  EXPECT_EQ(mem[0x10000 + 250], kUntouched);
  // The next message goes to its own MS at its own offset.
  EXPECT_EQ(seg(6000, pattern(100), 6, 6000, 100).decision, Decision::kPlaced);
  EXPECT_EQ(at(0x20000, 100), pattern(100));
  EXPECT_EQ(mem[0x20000 + 100], kUntouched);
  ASSERT_EQ(nic->cursor_update(1, 6100), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 5), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 6), Err::kOk);
  EXPECT_EQ(nic->ms_count(1), 0u);
}

// Many MSs over several chunks (and the shared store): message m is found at m - head; out-of-
// order retirement leaves tombstones that neither it nor its neighbours' lookups trip over.
TEST_F(ModelTcpMsg, LookupByNumberAcrossChunksAndTombstones) {
  constexpr uint32_t kN = 30;  // 8 committed + store, chunks of 4
  for (uint32_t i = 0; i < kN; i++)
    post_msg(100 + i, 0x1000 * (i + 1), 100);
  ASSERT_EQ(nic->ms_count(1), kN);
  // Every message of 100 bytes from 5000 on: place them last to first.
  for (uint32_t i = kN; i-- > 0;) {
    const uint32_t start = 5000 + 100 * i;
    RxEntry e = seg(start, pattern(100, uint8_t(i)), 100 + i, start, 100);
    ASSERT_EQ(e.decision, Decision::kPlaced) << i;
    ASSERT_EQ(e.frags[0].offset, 0x1000u * (i + 1)) << i;
  }
  for (uint32_t i = 0; i < kN; i++)
    ASSERT_EQ(at(0x1000 * (i + 1), 100), pattern(100, uint8_t(i))) << i;
  // Retire some in the middle (tombstones), then the head: the rest are still found.
  ASSERT_EQ(nic->ms_retire_msg(1, 117), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 103), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 100), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(1, 101), Err::kOk);
  EXPECT_EQ(nic->ms_count(1), kN - 2);  // 102 heads the list, 103 and 117 are tombstones
  EXPECT_EQ(seg(5000 + 1700, pattern(10), 117, 5000 + 1700, 100).reason, DeferReason::kNoMessage);
  EXPECT_EQ(seg(5000 + 300, pattern(10), 103, 5000 + 300, 100).reason, DeferReason::kNoMessage);
  EXPECT_EQ(seg(5000, pattern(10), 100, 5000, 100).reason, DeferReason::kNoMessage);
  for (uint32_t i : {2u, 4u, 16u, 18u, 29u}) {
    const uint32_t start = 5000 + 100 * i;
    RxEntry e = seg(start + 50, pattern(10, 1), 100 + i, start, 100);
    ASSERT_EQ(e.decision, Decision::kPlaced) << i;
    EXPECT_EQ(e.frags[0].offset, 0x1000u * (i + 1) + 50) << i;
  }
  EXPECT_EQ(seg(5000 + 3000, pattern(10), 130, 5000 + 3000, 100).reason, DeferReason::kNoMessage);
  // A number posted out of order still finds its MS (the list is searched then).
  post_msg(500, 0x40000, 100);
  post_msg(131, 0x41000, 100);
  EXPECT_EQ(seg(9000, pattern(10), 500, 9000, 100).frags[0].offset, 0x40000u);
  EXPECT_EQ(seg(9100, pattern(10), 131, 9100, 100).frags[0].offset, 0x41000u);
  EXPECT_EQ(seg(9100, pattern(10), 129, 9100, 100).frags[0].offset, 0x1000u * 30);
  ASSERT_EQ(nic->ms_retire_msg(1, 500), Err::kOk);
  for (uint32_t i = 2; i < kN; i++) {
    if (i != 3 && i != 17) {
      ASSERT_EQ(nic->ms_retire_msg(1, 100 + i), Err::kOk) << i;
    }
  }
  ASSERT_EQ(nic->ms_retire_msg(1, 131), Err::kOk);
  EXPECT_EQ(nic->ms_count(1), 0u);
  // An empty list starts a dense run again.
  post_msg(7, 0x50000, 100);
  post_msg(8, 0x51000, 100);
  EXPECT_EQ(seg(20000, pattern(10), 8, 20000, 100).frags[0].offset, 0x51000u);
}

// ---- unreliable, Solar, RoCEv2 ------------------------------------------------------------------

TEST_F(ModelRx, UnreliableFlowPlacesIntoNextMs) {
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 9000, 17};
  s.parser = Parser::kUdp;
  s.reliable = false;
  ASSERT_EQ(nic->flow_add(1, s), Err::kOk);
  ASSERT_EQ(nic->ms_post(1, {kMr, 0x100, 100, 7}), Err::kOk);
  ASSERT_EQ(nic->ms_post(1, {kMr, 0x9000, 200, 8}), Err::kOk);
  RxEntry e = rx(test::udp_frame(1234, 9000, pattern(80)));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x100u);
  EXPECT_EQ(e.msg_seq, 7u);
  EXPECT_EQ(nic->ms_count(1), 1u);  // consumed
  e = rx(test::udp_frame(1234, 9000, pattern(300)));
  EXPECT_EQ(e.reason, DeferReason::kMsOverflow);
  e = rx(test::udp_frame(4321, 9000, pattern(200), false));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x9000u);
  e = rx(test::udp_frame(4321, 9000, pattern(1)));
  EXPECT_EQ(e.reason, DeferReason::kNoMs);
  EXPECT_EQ(nic->counter(Ctr::kRxUnreliable), 2u);
}

class ModelSolar : public ModelRx {
 protected:
  void SetUp() override {
    ModelRx::SetUp();
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, 7000, 17};
    s.parser = Parser::kSolar;
    s.qpn = test::kSolarConn;
    s.messages = true;
    ASSERT_EQ(nic->flow_add(2, s), Err::kOk);
  }
};

TEST_F(ModelSolar, IoIdSelectsTheMsAndShortMessagesRetireUnfilled) {
  ASSERT_EQ(nic->ms_post(2, {kMr, 0x10000, 8192, 10}), Err::kOk);
  ASSERT_EQ(nic->ms_post(2, {kMr, 0x20000, 8192, 11}), Err::kOk);
  // A block of the later I/O first, on another path, then a short I/O.
  RxEntry e = rx(test::solar_frame(1, 11, 4096, 1, pattern(4096, 7), 3));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.msg_seq, 11u);
  EXPECT_EQ(e.frags[0].offset, 0x20000u + 4096);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  e = rx(test::solar_frame(1, 10, 0, 2, pattern(512, 9)));
  EXPECT_EQ(e.frags[0].offset, 0x10000u);
  EXPECT_EQ(Bytes(mem.begin() + 0x10000, mem.begin() + 0x10000 + 512), pattern(512, 9));
  EXPECT_EQ(mem[0x10000 + 512], kUntouched);
  // The driver retires the short message's MS; the next I/O's MS is unaffected.
  ASSERT_EQ(nic->ms_retire_msg(2, 10), Err::kOk);
  EXPECT_EQ(nic->ms_count(2), 1u);
  e = rx(test::solar_frame(1, 10, 512, 3, pattern(16)));
  EXPECT_EQ(e.reason, DeferReason::kNoMessage);
  e = rx(test::solar_frame(1, 11, 8192 - 100, 4, pattern(200)));  // runs past the MS
  EXPECT_EQ(e.reason, DeferReason::kMsOverflow);
  EXPECT_EQ(nic->ms_retire_msg(2, 10), Err::kNoSuchMessage);
  ASSERT_EQ(nic->ms_retire_msg(2, 11), Err::kOk);
  EXPECT_EQ(nic->ms_count(2), 0u);
}

TEST_F(ModelSolar, OutOfOrderRetirementLeavesNoGhosts) {
  for (uint32_t io = 0; io < 6; io++) {
    ASSERT_EQ(nic->ms_post(2, {kMr, 0x1000u * (io + 1), 100, io}), Err::kOk);
  }
  ASSERT_EQ(nic->ms_retire_msg(2, 3), Err::kOk);
  ASSERT_EQ(nic->ms_retire_msg(2, 1), Err::kOk);
  EXPECT_EQ(nic->ms_count(2), 6u);  // tombstones until they reach the head
  ASSERT_EQ(nic->ms_retire_msg(2, 0), Err::kOk);
  EXPECT_EQ(nic->ms_count(2), 4u);  // 0 and 1 popped
  EXPECT_EQ(rx(test::solar_frame(1, 3, 0, 1, pattern(10))).reason, DeferReason::kNoMessage);
  EXPECT_EQ(rx(test::solar_frame(1, 4, 0, 1, pattern(10))).decision, Decision::kPlaced);
  EXPECT_EQ(nic->mr_remove(kMr), Err::kMrInUse);
}

TEST_F(ModelSolar, BadBlockCrcDefers) {
  ASSERT_EQ(nic->ms_post(2, {kMr, 0x10000, 8192, 10}), Err::kOk);
  Bytes f = test::solar_frame(1, 10, 0, 1, pattern(64));
  f[14 + 20 + 8 + 28] ^= 1;  // CRC32C field
  // Keep the UDP checksum right so only the block CRC is wrong.
  test::put16(&f[34 + 6], 0);
  RxEntry e = rx(f);
  EXPECT_EQ(e.reason, DeferReason::kBadCrc32c);
  EXPECT_EQ(e.l4_csum, CsumStatus::kBad);
  EXPECT_EQ(untouched(), mem.size());
  // ACKs carry no block.
  EXPECT_EQ(rx(test::solar_frame(4, 10, 0, 2, {})).decision, Decision::kNoPayload);
}

TEST_F(ModelRx, SolarStreamPlacesByOffset) {
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 7000, 17};
  s.parser = Parser::kSolar;
  s.qpn = test::kSolarConn;
  s.initial_offset = 1 << 20;
  ASSERT_EQ(nic->flow_add(3, s), Err::kOk);
  ASSERT_EQ(nic->ms_post(3, {kMr, 0x100, 1000, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(3, {kMr, 0x9000, 1000, 0}), Err::kOk);
  RxEntry e = rx(test::solar_frame(1, 1, (1 << 20) + 900, 1, pattern(200)));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  ASSERT_EQ(e.nfrags, 2);
  EXPECT_EQ(e.frags[0].offset, 0x100u + 900);
  EXPECT_EQ(e.frags[1].offset, 0x9000u);
  ASSERT_EQ(nic->ms_retire(3, 1), Err::kOk);
  e = rx(test::solar_frame(1, 1, (1 << 20) + 900, 2, pattern(200)));
  EXPECT_EQ(e.decision, Decision::kTrimmed);
  EXPECT_EQ(e.trimmed, 100u);
  EXPECT_EQ(rx(test::solar_frame(1, 1, 0, 3, pattern(200))).decision, Decision::kDropped);
}

// Solar connections are found by (peer, local address, the header's connection number), as RoCE
// QPs by their DestQP: two between the same hosts are two flows, whatever source port each path
// uses, each placing into its own MSs.
FlowSpec solar_conn(uint32_t conn) {
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, kSolarPort, 17};
  s.parser = Parser::kSolar;
  s.qpn = conn;
  return s;
}

TEST_F(ModelRx, SolarConnectionsBetweenTheSameHostsEachTakeTheirOwnFrames) {
  ASSERT_EQ(nic->flow_add(3, solar_conn(0x1A)), Err::kOk);
  ASSERT_EQ(nic->flow_add(4, solar_conn(0x2B)), Err::kOk);
  ASSERT_EQ(nic->ms_post(3, {kMr, 0x1000, 1000, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x8000, 1000, 0}), Err::kOk);
  for (uint16_t path : {1, 2, 3}) {  // every path's source port
    const uint64_t at = 100 * (path - 1);
    RxEntry e = rx(test::solar_frame(1, 0, at, path, pattern(100, path), path, 0x1A));
    EXPECT_EQ(e.flow_id, 3u);
    EXPECT_EQ(e.parser, Parser::kSolar);
    ASSERT_EQ(e.decision, Decision::kPlaced);
    EXPECT_EQ(e.frags[0].offset, 0x1000 + at);
    e = rx(test::solar_frame(1, 0, at, path, pattern(100, 50 + path), path, 0x2B));
    EXPECT_EQ(e.flow_id, 4u);
    ASSERT_EQ(e.decision, Decision::kPlaced);
    EXPECT_EQ(e.frags[0].offset, 0x8000 + at);
  }
  for (uint16_t path : {1, 2, 3}) {
    const size_t at = 100 * (path - 1);
    EXPECT_EQ(Bytes(mem.begin() + long(0x1000 + at), mem.begin() + long(0x1000 + at + 100)),
              pattern(100, path));
    EXPECT_EQ(Bytes(mem.begin() + long(0x8000 + at), mem.begin() + long(0x8000 + at + 100)),
              pattern(100, 50 + path));
  }
  EXPECT_EQ(untouched(), mem.size() - 600);
  // Removing one leaves the other's frames to it and the removed one's to no flow.
  ASSERT_EQ(nic->flow_remove(3), Err::kOk);
  EXPECT_EQ(rx(test::solar_frame(1, 0, 300, 9, pattern(10), 1, 0x1A)).reason,
            DeferReason::kFlowMiss);
  EXPECT_EQ(rx(test::solar_frame(1, 0, 300, 9, pattern(10), 1, 0x2B)).flow_id, 4u);
}

TEST_F(ModelRx, SolarFrameOfAnUnknownConnectionMisses) {
  ASSERT_EQ(nic->flow_add(3, solar_conn(0x1A)), Err::kOk);
  ASSERT_EQ(nic->ms_post(3, {kMr, 0x1000, 1000, 0}), Err::kOk);
  // No flow has 0x1B; 0x0100001A is not 0x1A (the NIC's numbers are 24 bits, and one of 2^24 or
  // more names no flow rather than the one its low bits name).
  for (uint32_t conn : {0x1Bu, 0x0100001Au, 0xFF00001Au, 0xFFFFFFFFu}) {
    RxEntry e = rx(test::solar_frame(1, 0, 0, 1, pattern(100), 1, conn));
    EXPECT_EQ(e.flow_id, kNoFlow) << conn;
    EXPECT_EQ(e.reason, DeferReason::kFlowMiss) << conn;
  }
  EXPECT_EQ(nic->defer_count(DeferReason::kFlowMiss), 4u);
  EXPECT_EQ(untouched(), mem.size());
  // A plain UDP flow on the Solar port takes the frames of connections with no flow of their own
  // (an rte_flow rule on UDP 7000), not those of a connection that has one.
  FlowSpec udp;
  udp.key = {test::kPeer, test::kLocal, 0, kSolarPort, 17};
  udp.parser = Parser::kUdp;
  udp.reliable = false;
  ASSERT_EQ(nic->flow_add(5, udp), Err::kOk);
  EXPECT_EQ(rx(test::solar_frame(1, 0, 0, 1, pattern(100), 1, 0x0100001A)).flow_id, 5u);
  EXPECT_EQ(rx(test::solar_frame(1, 0, 0, 1, pattern(100), 1, 0x1A)).flow_id, 3u);
}

TEST_F(ModelRx, SolarFlowsNeedANumberBelow2To24OnTheSolarPort) {
  const uint64_t bad = nic->cmd_error_count(Err::kBadArgument);
  EXPECT_EQ(nic->flow_add(3, solar_conn(1u << 24)), Err::kBadArgument);
  EXPECT_EQ(nic->flow_add(3, solar_conn(0xFFFFFFFFu)), Err::kBadArgument);
  FlowSpec other_port = solar_conn(0x1A);
  other_port.key.dst_port = kSolarPort + 1;
  EXPECT_EQ(nic->flow_add(3, other_port), Err::kBadArgument);
  EXPECT_EQ(nic->cmd_error_count(Err::kBadArgument), bad + 3);
  EXPECT_EQ(nic->flows_in_use(), 1u);  // the fixture's TCP flow
  // The largest number is a flow's; the same number between the same hosts is the same flow,
  // whatever source port is given (any is taken).
  ASSERT_EQ(nic->flow_add(3, solar_conn(0xFFFFFF)), Err::kOk);
  FlowSpec again = solar_conn(0xFFFFFF);
  again.key.src_port = 0xC001;
  EXPECT_EQ(nic->flow_add(4, again), Err::kFlowExists);
  again.qpn = 0xFFFFFE;
  ASSERT_EQ(nic->flow_add(4, again), Err::kOk);
  EXPECT_EQ(rx(test::solar_frame(4, 0, 0, 1, {}, 7, 0xFFFFFE)).flow_id, 4u);  // from 0xC007
  EXPECT_EQ(rx(test::solar_frame(4, 0, 0, 1, {}, 7, 0xFFFFFF)).flow_id, 3u);
  // Solar keeps no sequence: its cursor starts at 0 whatever initial_seq says.
  FlowSpec seq = solar_conn(0x1A);
  seq.initial_seq = 5000;
  ASSERT_EQ(nic->flow_add(5, seq), Err::kOk);
  EXPECT_EQ(nic->cursor(5), 0u);
}

TEST_F(ModelRx, SolarFrameTooShortToNameItsConnectionIsTruncated) {
  ASSERT_EQ(nic->flow_add(3, solar_conn(0)), Err::kOk);
  // Fewer than 8 UDP payload bytes: no connection number (not even 0's).
  for (size_t len = 0; len < 8; len++) {
    RxEntry e = rx(test::udp_frame(0xC001, kSolarPort, Bytes(len, 0)));
    EXPECT_EQ(e.flow_id, kNoFlow) << len;
    EXPECT_EQ(e.reason, DeferReason::kTruncated) << len;
  }
  // 8 to 31 bytes name it: the flow's, truncated before the end of its header.
  for (size_t len : {8, 31}) {
    RxEntry e = rx(test::udp_frame(0xC001, kSolarPort, Bytes(len, 0)));
    EXPECT_EQ(e.flow_id, 3u) << len;
    EXPECT_EQ(e.reason, DeferReason::kTruncated) << len;
  }
  EXPECT_EQ(nic->defer_count(DeferReason::kTruncated), 10u);
  EXPECT_EQ(nic->defer_count(DeferReason::kFlowMiss), 0u);
}

// A RoCE QP on flow 4, going back N (RC's recovery) unless the fixture says otherwise.
class ModelRoce : public ModelRx {
 protected:
  static constexpr uint32_t kPmtu = 256;
  void SetUp() override {
    ModelRx::SetUp();
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
    s.parser = Parser::kRoce;
    s.pmtu = kPmtu;
    s.initial_seq = kFirstPsn;
    s.qpn = kQp;
    s.owner = 42;  // kMr's
    s.selective_repeat = selective_repeat;
    ASSERT_EQ(nic->flow_add(4, s), Err::kOk);
  }
  RxEntry roce(uint8_t op, uint32_t psn, const Bytes& payload, const Bytes& ext = {},
               uint32_t qp = kQp, uint16_t pkey = 0xFFFF, int pad = -1) {
    return rx(test::roce_frame(op, psn & 0xFFFFFF, ext, payload, uint16_t(49152 + psn % 7), qp,
                               pkey, pad));
  }
  bool selective_repeat = false;
  static constexpr uint32_t kFirstPsn = 0xFFFFFE;  // messages straddle the PSN wrap
  static constexpr uint32_t kQp = 17;              // roce_frame's default DestQP
  static inline const Bytes kAeth = {0x1F, 0, 0, 1};
};

// The same QP recovering by selective repeat: requests past a gap are placed where their place
// is certain.
class ModelRoceSr : public ModelRoce {
 protected:
  void SetUp() override {
    selective_repeat = true;
    ModelRoce::SetUp();
  }
};

// Go-back-N (RC as IBTA has it): only the request at the PSN the NIC expects next is placed. One
// past a gap, a WRITE's self-describing first packet included, is deferred and writes nothing,
// so app memory holds a prefix of the request stream: a flag written after its data is never
// there before it. The expected PSN runs ahead of the cursor over what the NIC placed in order,
// so a burst is placed without a cursor update.
TEST_F(ModelRoce, GoBackNPlacesOnlyTheExpectedRequest) {
  const Bytes data = pattern(600);
  const Bytes first(data.begin(), data.begin() + 256),
      middle(data.begin() + 256, data.begin() + 512), last(data.begin() + 512, data.end());
  const Bytes flag = pattern(8, 77);
  RxEntry e = roce(0x06, 0xFFFFFE, first, test::reth(0x3000, kMr, 600));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_FALSE(e.out_of_order);
  // The middle is lost: its WRITE's last packet and the flag after it are not placed.
  for (RxEntry x :
       {roce(0x08, 0x000000, last), roce(0x0A, 0x000001, flag, test::reth(0x8000, kMr, 8))}) {
    EXPECT_EQ(x.decision, Decision::kDeferred);
    EXPECT_EQ(x.reason, DeferReason::kOutOfSequence);
    EXPECT_EQ(x.placed, 0u);
  }
  EXPECT_EQ(untouched(), mem.size() - 256);
  // Behind the expected PSN and not behind the cursor: the transport decides, unwritten too.
  EXPECT_EQ(roce(0x06, 0xFFFFFE, first, test::reth(0x3000, kMr, 600)).reason,
            DeferReason::kOutOfSequence);
  // The middle comes: the rest follows in order, the cursor still where it was.
  EXPECT_EQ(roce(0x07, 0xFFFFFF, middle).decision, Decision::kPlaced);
  EXPECT_EQ(roce(0x08, 0x000000, last).decision, Decision::kPlaced);
  e = roce(0x0A, 0x000001, flag, test::reth(0x8000, kMr, 8));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_FALSE(e.out_of_order);
  EXPECT_EQ(Bytes(mem.begin() + 0x3000, mem.begin() + 0x3000 + 600), data);
  EXPECT_EQ(Bytes(mem.begin() + 0x8000, mem.begin() + 0x8000 + 8), flag);
  EXPECT_EQ(nic->defer_count(DeferReason::kOutOfSequence), 3u);
  EXPECT_EQ(nic->cursor(4), 0xFFFFFEu);
  ASSERT_EQ(nic->cursor_update(4, 0x000002), Err::kOk);
  EXPECT_EQ(roce(0x0A, 0x000001, flag, test::reth(0x8000, kMr, 8)).decision, Decision::kDropped);
  // A request at the expected PSN the NIC defers (a SEND with no receive yet: the transport's
  // RNR NAK) holds it: what follows is not placed until the SEND is.
  EXPECT_EQ(roce(0x04, 0x000002, pattern(40, 1)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x0A, 0x000003, pattern(16, 2), test::reth(0x9000, kMr, 16)).reason,
            DeferReason::kOutOfSequence);
  EXPECT_EQ(mem[0x9000], kUntouched);
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 64, 0}), Err::kOk);
  EXPECT_EQ(roce(0x04, 0x000002, pattern(40, 1)).decision, Decision::kPlaced);
  EXPECT_EQ(roce(0x0A, 0x000003, pattern(16, 2), test::reth(0x9000, kMr, 16)).decision,
            Decision::kPlaced);
  // The transport took requests through the copy path: the cursor moves the expected PSN on.
  EXPECT_EQ(roce(0x0A, 0x000006, pattern(16, 3), test::reth(0xA000, kMr, 16)).reason,
            DeferReason::kOutOfSequence);
  ASSERT_EQ(nic->cursor_update(4, 0x000006), Err::kOk);
  ASSERT_EQ(nic->roce_resync(4, 0x000006, 1), Err::kOk);
  EXPECT_EQ(roce(0x0A, 0x000006, pattern(16, 3), test::reth(0xA000, kMr, 16)).decision,
            Decision::kPlaced);
}

// A READ request takes the PSNs of its responses: the expected PSN and the message chain pass
// over them, so the SEND after it is placed at once.
TEST_F(ModelRoce, GoBackNReadRequestTakesItsResponsesPsns) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 64, 0}), Err::kOk);
  EXPECT_EQ(roce(0x0C, 0xFFFFFE, {}, test::reth(0x100, kMr, 600)).decision, Decision::kNoPayload);
  EXPECT_EQ(roce(0x04, 0xFFFFFF, pattern(40)).reason, DeferReason::kOutOfSequence);
  RxEntry e = roce(0x04, 0x000001, pattern(40));  // 600 bytes: PSNs FFFFFE..000000
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.msg_seq, 0u);
}

// Selective repeat keeps its placement past a gap: the WRITE's last packet, then the flag (a
// self-describing first packet), land before the missing middle.
TEST_F(ModelRoceSr, SelectiveRepeatPlacesPastAGap) {
  const Bytes data = pattern(600);
  EXPECT_EQ(
      roce(0x06, 0xFFFFFE, Bytes(data.begin(), data.begin() + 256), test::reth(0x3000, kMr, 600))
          .decision,
      Decision::kPlaced);
  RxEntry e = roce(0x08, 0x000000, Bytes(data.begin() + 512, data.end()));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_TRUE(e.out_of_order);
  e = roce(0x0A, 0x000001, pattern(8, 77), test::reth(0x8000, kMr, 8));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_TRUE(e.out_of_order);
  EXPECT_EQ(nic->defer_count(DeferReason::kOutOfSequence), 0u);
}

// Selective repeat with several WRITE contexts per flow (here 3: the flow entry's and 2 from a
// pool of 3 shared by all flows): the packets of each WRITE past a gap are placed, not deferred.
class ModelRoceSrCtxs : public ModelRoceSr {
 protected:
  void SetUp() override {
    base_cfg.roce_write_ctxs = 3;
    base_cfg.roce_write_ctx_pool = 3;
    ModelRoceSr::SetUp();
  }
  // WRITE k of 600 bytes (3 packets at PMTU 256) at PSN kFirstPsn + 3k, to 0x3000 + 0x1000 k:
  // packet i of it (0 first, 1 middle, 2 last).
  RxEntry write_pkt(uint32_t k, int i, uint32_t flow_qp = kQp) {
    const Bytes d = pattern(600, uint8_t(k + 1));
    const uint32_t psn = kFirstPsn + 3 * k + uint32_t(i);
    const Bytes part(d.begin() + 256 * i, d.begin() + std::min(600, 256 * (i + 1)));
    if (i == 0) return roce(0x06, psn, part, test::reth(va(k), kMr, 600), flow_qp);
    return roce(i == 1 ? 0x07 : 0x08, psn, part, {}, flow_qp);
  }
  static uint64_t va(uint32_t k) { return 0x3000 + 0x1000 * uint64_t(k); }
  bool write_landed(uint32_t k) const {
    return Bytes(mem.begin() + va(k), mem.begin() + va(k) + 600) == pattern(600, uint8_t(k + 1));
  }
  uint64_t past_gap() const { return nic->counter(Ctr::kRxPlacedPastGap); }
};

// WRITE 0's middle is lost; WRITEs 1 and 2 follow whole. With one context per flow their middle
// and last packets are deferred (the first WRITE keeps it); with three, placed.
TEST_F(ModelRoceSrCtxs, PacketsPastAGapOfSeveralWritesArePlaced) {
  EXPECT_EQ(write_pkt(0, 0).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(0, 2).decision, Decision::kPlaced);
  for (uint32_t k : {1u, 2u}) {
    for (int i = 0; i < 3; i++) {
      RxEntry e = write_pkt(k, i);
      EXPECT_EQ(e.decision, Decision::kPlaced) << k << " " << i;
      EXPECT_TRUE(e.out_of_order);
    }
  }
  EXPECT_EQ(past_gap(), 4u);  // the middle and last packets of WRITEs 1 and 2
  EXPECT_EQ(nic->write_ctxs(4), 2u);
  EXPECT_EQ(nic->write_ctx_pool_free(), 1u);
  // The gap fills: WRITE 0's middle finds the flow entry's context.
  EXPECT_EQ(write_pkt(0, 1).decision, Decision::kPlaced);
  EXPECT_EQ(past_gap(), 4u);
  for (uint32_t k : {0u, 1u, 2u})
    EXPECT_TRUE(write_landed(k)) << k;
  // A duplicate past the gap lands on the same bytes again; a retransmitted first packet finds
  // its context and takes no other.
  EXPECT_EQ(write_pkt(1, 1).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(2, 0).decision, Decision::kPlaced);
  EXPECT_EQ(nic->write_ctxs(4), 2u);
  EXPECT_TRUE(write_landed(1));
  EXPECT_EQ(past_gap(), 5u);
  // The cursor passes them all: their contexts go back to the pool.
  ASSERT_EQ(nic->cursor_update(4, (kFirstPsn + 9) & 0xFFFFFF), Err::kOk);
  EXPECT_EQ(nic->write_ctxs(4), 0u);
  EXPECT_EQ(nic->write_ctx_pool_free(), 3u);
  EXPECT_EQ(nic->defer_count(DeferReason::kNoMessage), 0u);
}

// Contexts full: a fourth WRITE past the gap has its first packet placed (self-describing) and
// the rest deferred. A context whose WRITE the cursor passed is taken again by the next one.
TEST_F(ModelRoceSrCtxs, ContextsFullDeferAndAPassedOneIsReused) {
  EXPECT_EQ(write_pkt(0, 0).decision, Decision::kPlaced);  // WRITE 0's middle lost
  for (uint32_t k : {1u, 2u})
    EXPECT_EQ(write_pkt(k, 0).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(3, 0).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(3, 1).reason, DeferReason::kNoMessage);
  EXPECT_EQ(write_pkt(3, 2).reason, DeferReason::kNoMessage);
  EXPECT_EQ(mem[va(3) + 256], kUntouched);
  EXPECT_EQ(past_gap(), 0u);
  // WRITE 0 and 1 complete; the cursor passes them: WRITE 1's pool context goes back, WRITE 0's
  // flow-entry context is free. WRITE 3 (its first packet again) takes the flow entry's.
  for (int i : {1, 2})
    EXPECT_EQ(write_pkt(0, i).decision, Decision::kPlaced);
  for (int i : {1, 2})
    EXPECT_EQ(write_pkt(1, i).decision, Decision::kPlaced);
  ASSERT_EQ(nic->cursor_update(4, (kFirstPsn + 6) & 0xFFFFFF), Err::kOk);
  EXPECT_EQ(nic->write_ctxs(4), 1u);  // WRITE 2's
  EXPECT_EQ(nic->write_ctx_pool_free(), 2u);
  EXPECT_EQ(write_pkt(3, 0).decision, Decision::kPlaced);
  EXPECT_EQ(nic->write_ctxs(4), 1u);
  EXPECT_EQ(write_pkt(3, 2).decision, Decision::kPlaced);
  // WRITE 4, past WRITE 2's and 3's gaps: the pool context WRITE 1 returned.
  EXPECT_EQ(write_pkt(4, 0).decision, Decision::kPlaced);
  EXPECT_EQ(nic->write_ctxs(4), 2u);
  EXPECT_EQ(write_pkt(4, 2).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(4, 1).decision, Decision::kPlaced);
  EXPECT_EQ(past_gap(), 4u);  // WRITE 1's two, then WRITE 4's
  EXPECT_EQ(write_pkt(3, 1).decision, Decision::kPlaced);
  for (int i : {1, 2})
    EXPECT_EQ(write_pkt(2, i).decision, Decision::kPlaced);
  for (uint32_t k : {0u, 1u, 2u, 3u, 4u})
    EXPECT_TRUE(write_landed(k)) << k;
}

// Out of range: a packet no context's PSNs hold, a last packet short of its WRITE's end and a
// middle packet at a WRITE's last PSN are deferred and write nothing.
TEST_F(ModelRoceSrCtxs, PacketsOutsideEveryContextAreDeferred) {
  EXPECT_EQ(write_pkt(0, 0).decision, Decision::kPlaced);  // WRITE 0's middle lost
  EXPECT_EQ(write_pkt(1, 0).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(2, 2).reason, DeferReason::kNoMessage);  // WRITE 2's first not seen
  EXPECT_EQ(roce(0x08, kFirstPsn + 4, pattern(40)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x07, kFirstPsn + 5, pattern(256)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x08, kFirstPsn + 5, pattern(100)).reason, DeferReason::kBadLength);
  EXPECT_EQ(mem[va(1) + 256], kUntouched);
  EXPECT_EQ(mem[va(1) + 512], kUntouched);
  EXPECT_EQ(past_gap(), 0u);
}

// An earlier WRITE's first packet, sent again, takes the flow entry's context from a later one
// that got it first; the later one moves to the pool and its packets are still placed. The pool
// is shared: a second flow draws what is left, then it defers.
TEST_F(ModelRoceSrCtxs, ContextsMoveToThePoolAndThePoolIsShared) {
  EXPECT_EQ(write_pkt(1, 0).decision, Decision::kPlaced);  // WRITE 0's first lost
  EXPECT_EQ(write_pkt(0, 0).decision, Decision::kPlaced);  // ... comes again
  EXPECT_EQ(nic->write_ctxs(4), 1u);
  EXPECT_EQ(write_pkt(1, 1).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(1, 2).decision, Decision::kPlaced);
  EXPECT_EQ(past_gap(), 2u);
  EXPECT_EQ(write_pkt(2, 0).decision, Decision::kPlaced);
  EXPECT_EQ(nic->write_ctxs(4), 2u);  // the flow's share: 3 contexts in all
  // Flow 5, another QP: the pool's last entry, then none.
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
  s.parser = Parser::kRoce;
  s.pmtu = kPmtu;
  s.initial_seq = kFirstPsn;
  s.qpn = 18;
  s.owner = 42;
  s.selective_repeat = true;
  ASSERT_EQ(nic->flow_add(5, s), Err::kOk);
  // Its WRITE 0's middle lost; WRITE 1 takes the pool's last; WRITE 2's middle is deferred.
  EXPECT_EQ(write_pkt(0, 0, 18).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(1, 0, 18).decision, Decision::kPlaced);
  EXPECT_EQ(write_pkt(2, 0, 18).decision, Decision::kPlaced);
  EXPECT_EQ(nic->write_ctxs(5), 1u);
  EXPECT_EQ(nic->write_ctx_pool_free(), 0u);
  EXPECT_EQ(write_pkt(2, 1, 18).reason, DeferReason::kNoMessage);
  // Removing flow 4 returns its two.
  ASSERT_EQ(nic->flow_remove(4), Err::kOk);
  EXPECT_EQ(nic->write_ctx_pool_free(), 2u);
}

// One WRITE context per flow (the RTL's geometry): no pool, nothing placed past a gap through
// one, and the memory report has no pool.
TEST_F(ModelRoceSr, OneWriteContextKeepsNoPool) {
  NicConfig c = small_config();
  c.roce_write_ctxs = 1;
  NicModel one(c);
  EXPECT_EQ(one.write_ctx_pool_free(), 0u);
  const MemoryReport r = one.memory_report();
  EXPECT_EQ(r.lines[7].bytes() + r.lines[8].bytes(), 0u);
  const MemoryReport d = nic->memory_report();  // small_config's defaults: 16, pool 8192
  EXPECT_EQ(d.lines[7].bytes(), 8192u * kWriteCtxBytes);
  EXPECT_EQ(d.lines[8].bytes(), 8u * kWriteCtxHeadBytes);
}

// IBTA's lengths hold before a byte is written, in both modes: a request that breaks them is
// deferred untouched (the transport NAKs it as invalid) and the expected PSN stays.
TEST_F(ModelRoce, RequestsBreakingIbtaLengthsWriteNothing) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 4096, 0}), Err::kOk);
  const uint32_t p = kFirstPsn;
  struct Case {
    const char* what;
    RxEntry e;
    DeferReason want;
  };
  const Case cases[] = {
      {"WRITE first shorter than a PMTU",
       roce(0x06, p, pattern(100), test::reth(0x3000, kMr, 1000)), DeferReason::kBadLength},
      {"WRITE first whose RETH is one PMTU",
       roce(0x06, p, pattern(256), test::reth(0x3000, kMr, 256)), DeferReason::kBadLength},
      {"WRITE first over 2^31", roce(0x06, p, pattern(256), test::reth(0x3000, kMr, 0x80000001)),
       DeferReason::kBadLength},
      {"WRITE only short of its RETH", roce(0x0A, p, pattern(30), test::reth(0x3000, kMr, 200)),
       DeferReason::kBadLength},
      {"WRITE only over a PMTU", roce(0x0A, p, pattern(300), test::reth(0x3000, kMr, 300)),
       DeferReason::kBadLength},
      {"SEND first shorter than a PMTU", roce(0x00, p, pattern(100)), DeferReason::kBadLength},
      {"SEND only over a PMTU", roce(0x04, p, pattern(300)), DeferReason::kBadLength},
      {"READ request over 2^31", roce(0x0C, p, {}, test::reth(0, kMr, 0x80000001)),
       DeferReason::kBadLength},
      {"payload and pad not whole words", roce(0x04, p, pattern(3), {}, kQp, 0xFFFF, 0),
       DeferReason::kBadL4Header},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.e.decision, Decision::kDeferred) << c.what;
    EXPECT_EQ(c.e.reason, c.want) << c.what;
  }
  EXPECT_EQ(untouched(), mem.size());
  // A two-packet WRITE: its last packet must end at the RETH's length.
  EXPECT_EQ(roce(0x06, p, pattern(256), test::reth(0x3000, kMr, 300)).decision, Decision::kPlaced);
  EXPECT_EQ(roce(0x08, p + 1, pattern(50)).reason, DeferReason::kBadLength);
  EXPECT_EQ(mem[0x3000 + 256], kUntouched);
  EXPECT_EQ(roce(0x08, p + 1, pattern(44)).decision, Decision::kPlaced);
}

// IBTA 10.9.3: the QP is in the default partition. A P_Key of another (or an invalid one) is
// deferred untouched; a limited member of the default partition (0x7FFF) matches ours.
TEST_F(ModelRoce, PkeyOutsideTheDefaultPartitionWritesNothing) {
  for (uint16_t pkey : {0x1234, 0x0000, 0x8000, 0x7FFE}) {
    RxEntry e = roce(0x0A, kFirstPsn, pattern(64), test::reth(0x3000, kMr, 64), kQp, pkey);
    EXPECT_EQ(e.reason, DeferReason::kBadPkey) << pkey;
  }
  EXPECT_EQ(untouched(), mem.size());
  EXPECT_EQ(nic->defer_count(DeferReason::kBadPkey), 4u);
  EXPECT_EQ(roce(0x0A, kFirstPsn, pattern(64), test::reth(0x3000, kMr, 64), kQp, 0x7FFF).decision,
            Decision::kPlaced);
}

// What the transport refuses with an invalid-request NAK is never placed: SEND with invalidate
// (into a posted receive), atomics, UC's opcodes on an RC QP. Nor do they move the expected PSN.
TEST_F(ModelRoce, UnsupportedOpcodesAreNeverPlaced) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 4096, 0}), Err::kOk);
  const Bytes ieth = {0, 0, 0, 9};
  EXPECT_EQ(roce(0x17, kFirstPsn, pattern(64), ieth).reason, DeferReason::kUnsupported);
  EXPECT_EQ(roce(0x13, kFirstPsn, {}, Bytes(28, 0)).decision, Decision::kNoPayload);
  EXPECT_EQ(roce(0x24, kFirstPsn, pattern(64)).reason, DeferReason::kUnsupported);  // UC SEND
  EXPECT_EQ(untouched(), mem.size());
  EXPECT_EQ(roce(0x04, kFirstPsn, pattern(64)).decision, Decision::kPlaced);
}

TEST_F(ModelRoceSr, SendMessagesAcrossPsnWrapSelectPostedReceives) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 1024, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x20000, 1024, 1}), Err::kOk);
  Bytes msg = pattern(612);
  Bytes a(msg.begin(), msg.begin() + 256), b(msg.begin() + 256, msg.begin() + 512),
      c(msg.begin() + 512, msg.end());
  RxEntry e = roce(0x00, 0xFFFFFE, a);  // SEND first
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.l4_csum, CsumStatus::kGood);
  EXPECT_EQ(e.seq, 0xFFFFFEu);
  ASSERT_EQ(nic->cursor_update(4, 0xFFFFFF), Err::kOk);
  // The last packet before the middle one: a SEND's extent is unknown until its last packet
  // arrives in order, so nothing past the hole can be placed safely yet.
  e = roce(0x02, 0x000000, c);
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kNoMessage);
  e = roce(0x01, 0xFFFFFF, b);
  EXPECT_EQ(e.frags[0].offset, 0x10000u + 256);
  e = roce(0x02, 0x000000, c);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_TRUE(e.out_of_order);  // the cursor still at 0xFFFFFF
  EXPECT_EQ(e.frags[0].offset, 0x10000u + 512);
  EXPECT_EQ(e.payload_len, 100u);  // pad and ICRC are not payload
  // Once the end is known, a retransmission inside the message is placed again.
  e = roce(0x01, 0xFFFFFF, b);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(Bytes(mem.begin() + 0x10000, mem.begin() + 0x10000 + 612), msg);
  EXPECT_EQ(mem[0x10000 + 612], kUntouched);
  // The next SEND opens only once the cursor has passed this one (so that retransmissions
  // of it still find their message).
  EXPECT_EQ(roce(0x04, 0x000001, pattern(50, 3)).reason, DeferReason::kNoMessage);
  ASSERT_EQ(nic->cursor_update(4, 0x000001), Err::kOk);
  // A short SEND only: the next posted receive, retired unfilled by the driver.
  e = roce(0x04, 0x000001, pattern(50, 3));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.msg_seq, 1u);
  EXPECT_EQ(e.frags[0].offset, 0x20000u);
  ASSERT_EQ(nic->cursor_update(4, 0x000002), Err::kOk);  // forward across the wrap
  ASSERT_EQ(nic->ms_retire(4, 2), Err::kOk);
  // Duplicates before the cursor (also across the wrap) are dropped.
  EXPECT_EQ(roce(0x01, 0xFFFFFF, Bytes(256, 0x55)).decision, Decision::kDropped);
  EXPECT_EQ(roce(0x04, 0x000001, Bytes(50, 0x55)).decision, Decision::kDropped);
  EXPECT_EQ(nic->cursor_update(4, 0xFFFFFF), Err::kBadArgument);  // backwards
  EXPECT_EQ(Bytes(mem.begin() + 0x20000, mem.begin() + 0x20000 + 50), pattern(50, 3));
  // No receive posted for the next message.
  EXPECT_EQ(roce(0x04, 0x000002, pattern(8)).reason, DeferReason::kNoMessage);
}

TEST_F(ModelRoceSr, SendWhoseStartIsUnknownDefers) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 4096, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x20000, 4096, 1}), Err::kOk);
  // The first packet is lost: middle and a later message cannot be placed safely.
  EXPECT_EQ(roce(0x01, 0xFFFFFF, pattern(256)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x04, 0x000003, pattern(8)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(untouched(), mem.size());
  // The retransmitted first packet opens message 0; its retransmission again reuses it.
  EXPECT_EQ(roce(0x00, 0xFFFFFE, pattern(256)).msg_seq, 0u);
  EXPECT_EQ(roce(0x00, 0xFFFFFE, pattern(256)).msg_seq, 0u);
  EXPECT_EQ(roce(0x02, 0xFFFFFF, pattern(10)).decision, Decision::kPlaced);
  ASSERT_EQ(nic->cursor_update(4, 0x000000), Err::kOk);
  EXPECT_EQ(roce(0x04, 0x000000, pattern(10)).msg_seq, 1u);
  // A transport that took messages through the copy path tells the NIC where the next begins.
  EXPECT_EQ(roce(0x04, 0x000005, pattern(10)).reason, DeferReason::kNoMessage);
  ASSERT_EQ(nic->cursor_update(4, 0x000005), Err::kOk);
  ASSERT_EQ(nic->roce_resync(4, 0x000005, 1), Err::kOk);
  EXPECT_EQ(roce(0x04, 0x000005, pattern(10)).msg_seq, 1u);
  EXPECT_EQ(nic->roce_resync(0, 0, 0), Err::kBadArgument);  // not a RoCE flow
}

TEST_F(ModelRoceSr, PacketsOfALaterMessageNeverLandInTheCurrentOne) {
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 4096, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x20000, 4096, 1}), Err::kOk);
  // Message A = FFFFFE..FFFFFF (its last packet lost), B = 000000..000001 (its first lost).
  EXPECT_EQ(roce(0x00, 0xFFFFFE, pattern(256)).decision, Decision::kPlaced);
  EXPECT_EQ(roce(0x02, 0x000001, pattern(10)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(mem[0x10000 + 256], kUntouched);
  // WRITE: the RETH length bounds the message; a later WRITE's packets are not its own.
  EXPECT_EQ(roce(0x06, 0x000010, pattern(256), test::reth(0x3000, kMr, 300)).decision,
            Decision::kPlaced);
  EXPECT_EQ(roce(0x07, 0x000011, pattern(256)).reason, DeferReason::kNoMessage);  // must be last
  EXPECT_EQ(roce(0x08, 0x000012, pattern(44)).reason, DeferReason::kNoMessage);   // next WRITE
  EXPECT_EQ(roce(0x08, 0x000011, pattern(44)).decision, Decision::kPlaced);
  EXPECT_EQ(mem[0x3000 + 300], kUntouched);
}

TEST_F(ModelRoce, WritePlacesAtRethAddress) {
  Bytes msg = pattern(600);
  RxEntry e =
      roce(0x06, 0xFFFFFE, Bytes(msg.begin(), msg.begin() + 256), test::reth(0x3000, kMr, 600));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x3000u);
  EXPECT_EQ(e.header_len, 14 + 20 + 8 + 12 + 16);
  e = roce(0x07, 0xFFFFFF, Bytes(msg.begin() + 256, msg.begin() + 512));
  e = roce(0x08, 0x000000, Bytes(msg.begin() + 512, msg.end()));
  EXPECT_EQ(e.frags[0].offset, 0x3000u + 512);
  EXPECT_EQ(Bytes(mem.begin() + 0x3000, mem.begin() + 0x3000 + 600), msg);
  // Beyond the RETH length, an unknown MR, outside the MR: deferred, nothing written (each at
  // the expected PSN, which a deferred request does not move).
  e = roce(0x0A, 0x000001, pattern(200), test::reth(0x5000, kMr, 100));
  EXPECT_EQ(e.reason, DeferReason::kBadLength);
  e = roce(0x0A, 0x000001, pattern(30), test::reth(0x5000, 9, 30));
  EXPECT_EQ(e.reason, DeferReason::kRemoteAccess);
  e = roce(0x0A, 0x000001, pattern(30), test::reth((1 << 20) - 10, kMr, 30));
  EXPECT_EQ(e.reason, DeferReason::kRemoteAccess);
  EXPECT_EQ(untouched(), mem.size() - 600);
}

TEST_F(ModelRoce, BadIcrcAndAcksAndReadResponses) {
  Bytes f = test::roce_frame(0x04, 0xFFFFFE, {}, pattern(40));
  f[f.size() - 1] ^= 0x80;
  EXPECT_EQ(rx(f).reason, DeferReason::kBadIcrc);
  EXPECT_EQ(roce(0x11, 0xFFFFFE, {}, kAeth).decision, Decision::kNoPayload);
  EXPECT_EQ(roce(0x10, 0xFFFFFE, pattern(16), kAeth).reason, DeferReason::kNoMessage);  // no READ
  EXPECT_EQ(roce(0x10, 0xFFFFFE, {}, kAeth).decision, Decision::kNoPayload);  // zero-length READ
  EXPECT_EQ(roce(0x1F, 0xFFFFFE, pattern(16)).reason, DeferReason::kUnsupported);
}

TEST_F(ModelRoce, TwoQpsBetweenTheSameHostsAreTwoFlows) {
  std::vector<uint8_t> mem2(1 << 16, kUntouched);
  ASSERT_EQ(nic->mr_add(2, mem2.data(), mem2.size(), 42, kMrRemoteWrite, 0x1234), Err::kOk);
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
  s.parser = Parser::kRoce;
  s.pmtu = kPmtu;
  s.initial_seq = kFirstPsn;
  s.qpn = 18;
  s.owner = 42;
  ASSERT_EQ(nic->flow_add(5, s), Err::kOk);
  // Each QP's WRITE and SEND land in its own memory.
  RxEntry e = roce(0x0A, kFirstPsn, pattern(64), test::reth(0x3000, kMr, 64));
  EXPECT_EQ(e.flow_id, 4u);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  e = roce(0x0A, kFirstPsn, pattern(64, 9), test::reth(0x200, 0x1234u << 16 | 2, 64), 18);
  EXPECT_EQ(e.flow_id, 5u);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].mr, 2u);
  EXPECT_EQ(Bytes(mem.begin() + 0x3000, mem.begin() + 0x3000 + 64), pattern(64));
  EXPECT_EQ(Bytes(mem2.begin() + 0x200, mem2.begin() + 0x200 + 64), pattern(64, 9));
  ASSERT_EQ(nic->ms_post(4, {kMr, 0x10000, 256, 0}), Err::kOk);
  ASSERT_EQ(nic->ms_post(5, {2, 0x1000, 256, 0}), Err::kOk);
  ASSERT_EQ(nic->cursor_update(4, 0xFFFFFF), Err::kOk);
  ASSERT_EQ(nic->cursor_update(5, 0xFFFFFF), Err::kOk);
  EXPECT_EQ(roce(0x04, 0xFFFFFF, pattern(40, 1)).frags[0].offset, 0x10000u);
  e = roce(0x04, 0xFFFFFF, pattern(40, 2), {}, 18);
  EXPECT_EQ(e.flow_id, 5u);
  EXPECT_EQ(e.frags[0].mr, 2u);
  EXPECT_EQ(Bytes(mem.begin() + 0x10000, mem.begin() + 0x10000 + 40), pattern(40, 1));
  EXPECT_EQ(Bytes(mem2.begin() + 0x1000, mem2.begin() + 0x1000 + 40), pattern(40, 2));
  // No QP 19 on the NIC: a miss, as for any other frame no flow claims.
  const size_t before = untouched();
  e = roce(0x0A, kFirstPsn, pattern(64), test::reth(0x3000, kMr, 64), 19);
  EXPECT_EQ(e.decision, Decision::kDeferred);
  EXPECT_EQ(e.reason, DeferReason::kFlowMiss);
  EXPECT_EQ(e.flow_id, kNoFlow);
  EXPECT_EQ(untouched(), before);
  // The identity is (peer, local, QPN): ports do not make another flow; a QPN fits 24 bits.
  s.key.src_port = 49153;
  EXPECT_EQ(nic->flow_add(6, s), Err::kFlowExists);
  s.qpn = 1u << 24;
  EXPECT_EQ(nic->flow_add(6, s), Err::kBadArgument);
  s.qpn = 20;
  s.key.dst_port = 4792;
  EXPECT_EQ(nic->flow_add(6, s), Err::kBadArgument);
  // Removing one QP leaves the other found.
  ASSERT_EQ(nic->flow_remove(5), Err::kOk);
  EXPECT_EQ(roce(0x04, 0x000000, pattern(8), {}, 18).reason, DeferReason::kFlowMiss);
  EXPECT_EQ(roce(0x11, 0x000000, {}, kAeth).flow_id, 4u);
}

TEST_F(ModelRoce, WriteNeedsTheTagTheOwnerRemoteWriteAndTheRange) {
  std::vector<uint8_t> mine(4096, kUntouched), theirs(4096, kUntouched), ro(4096, kUntouched);
  ASSERT_EQ(nic->mr_add(2, mine.data(), mine.size(), 42, kMrRemoteWrite, 0xBEEF), Err::kOk);
  ASSERT_EQ(nic->mr_add(3, theirs.data(), theirs.size(), 7, kMrRemoteWrite), Err::kOk);
  ASSERT_EQ(nic->mr_add(5, ro.data(), ro.size(), 42, kMrRemoteRead), Err::kOk);
  const uint32_t key = 0xBEEFu << 16 | 2;
  struct Case {
    uint64_t va;
    uint32_t rkey;
    const char* what;
  };
  const Case refused[] = {
      {0x100, 0xBEEEu << 16 | 2, "wrong tag"},
      {0x100, 2, "no tag"},
      {0x100, 3, "another owner's MR"},
      {0x100, 5, "no remote write"},
      {4096 - 32, key, "runs past the MR"},
      {~0ull - 8, key, "VA overflows"},
      {0x100, 9, "no such MR"},
  };
  const size_t before = untouched();
  const uint32_t psn = kFirstPsn;  // each refused at the expected PSN, which stays
  for (const Case& c : refused) {
    RxEntry e = roce(0x0A, psn, pattern(64), test::reth(c.va, c.rkey, 64));
    EXPECT_EQ(e.decision, Decision::kDeferred) << c.what;
    EXPECT_EQ(e.reason, DeferReason::kRemoteAccess) << c.what;
  }
  // A first packet whose RETH claims more than the MR is refused though its own bytes fit.
  EXPECT_EQ(roce(0x06, psn, pattern(256), test::reth(4096 - 256, key, 512)).reason,
            DeferReason::kRemoteAccess);
  EXPECT_EQ(nic->defer_count(DeferReason::kRemoteAccess), 8u);
  EXPECT_EQ(untouched(), before);
  for (const auto* m : {&mine, &theirs, &ro})
    EXPECT_EQ(std::count(m->begin(), m->end(), kUntouched), 4096);

  // Allowed; and checked again per packet: the MR re-registered under a new tag between a
  // WRITE's first and last packets (an app re-using the id) is not written by the old key.
  RxEntry e = roce(0x06, psn, pattern(256), test::reth(0x100, key, 300));
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].mr, 2u);
  EXPECT_EQ(Bytes(mine.begin() + 0x100, mine.begin() + 0x100 + 256), pattern(256));
  std::vector<uint8_t> next(4096, kUntouched);
  ASSERT_EQ(nic->mr_remove(2), Err::kOk);
  ASSERT_EQ(nic->mr_add(2, next.data(), next.size(), 42, kMrRemoteWrite, 0xBEF0), Err::kOk);
  EXPECT_EQ(roce(0x08, psn + 1, pattern(44)).reason, DeferReason::kRemoteAccess);
  EXPECT_EQ(std::count(next.begin(), next.end(), kUntouched), 4096);

  // The same rule as a query, for READ requests.
  uint16_t id = 0;
  EXPECT_EQ(nic->rkey_check(4, 0xBEF0u << 16 | 2, 0, 4096, kMrRemoteWrite, &id), Err::kOk);
  EXPECT_EQ(id, 2u);
  EXPECT_EQ(nic->rkey_check(4, 5, 0x10, 100, kMrRemoteRead, nullptr), Err::kOk);
  EXPECT_EQ(nic->rkey_check(4, 5, 0x10, 100, kMrRemoteWrite, nullptr), Err::kAccessDenied);
  EXPECT_EQ(nic->rkey_check(4, 5, 0x10, 100, kMrRemoteRead | kMrRemoteWrite, nullptr),
            Err::kAccessDenied);
  EXPECT_EQ(nic->rkey_check(4, 5, 4000, 100, kMrRemoteRead, nullptr), Err::kAccessDenied);
  EXPECT_EQ(nic->rkey_check(4, key, 0, 10, kMrRemoteWrite, nullptr), Err::kAccessDenied);
  EXPECT_EQ(nic->rkey_check(4, 3, 0, 10, kMrRemoteWrite, nullptr), Err::kAccessDenied);
  EXPECT_EQ(nic->rkey_check(4, 5, 0, 10, 0, nullptr), Err::kBadArgument);
  EXPECT_EQ(nic->rkey_check(0, 5, 0, 10, kMrRemoteRead, nullptr), Err::kBadArgument);  // TCP
  EXPECT_EQ(nic->rkey_check(6, 5, 0, 10, kMrRemoteRead, nullptr), Err::kUnknownFlow);
  EXPECT_EQ(nic->mr_add(6, ro.data(), ro.size(), 42, 4), Err::kBadArgument);
}

TEST_F(ModelRoce, ReadResponsesLandAtTheirSinkWhateverTheCursor) {
  // A 700-byte READ over the PSN wrap: FFFFFE (first), FFFFFF (middle), 000000 (last).
  ASSERT_EQ(nic->read_post(4, 0xFFFFFE, kMr, 0x40000, 700), Err::kOk);
  ASSERT_EQ(nic->read_post(4, 0x000001, kMr, 0x50000, 100), Err::kOk);  // one packet
  EXPECT_EQ(nic->read_count(4), 2u);
  // The cursor is the responder side's ePSN: far ahead of these PSNs, and no matter.
  ASSERT_EQ(nic->cursor_update(4, 0x000100), Err::kOk);
  Bytes data = pattern(700);
  Bytes first(data.begin(), data.begin() + 256), middle(data.begin() + 256, data.begin() + 512),
      last(data.begin() + 512, data.end());
  RxEntry e = roce(0x0F, 0x000000, last, kAeth);  // out of order: the last one first
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x40000u + 512);
  EXPECT_EQ(e.msg_seq, 0xFFFFFEu);
  EXPECT_EQ(e.payload_len, 188u);
  e = roce(0x0D, 0xFFFFFE, first, kAeth);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x40000u);
  e = roce(0x0E, 0xFFFFFF, middle);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x40000u + 256);
  EXPECT_EQ(roce(0x0E, 0xFFFFFF, middle).decision, Decision::kPlaced);  // a duplicate: again
  EXPECT_EQ(Bytes(mem.begin() + 0x40000, mem.begin() + 0x40000 + 700), data);
  EXPECT_EQ(mem[0x40000 + 700], kUntouched);
  e = roce(0x10, 0x000001, pattern(100, 5), kAeth);
  EXPECT_EQ(e.decision, Decision::kPlaced);
  EXPECT_EQ(e.frags[0].offset, 0x50000u);
  EXPECT_EQ(e.msg_seq, 1u);
  EXPECT_EQ(Bytes(mem.begin() + 0x50000, mem.begin() + 0x50000 + 100), pattern(100, 5));
  EXPECT_EQ(nic->cursor(4), 0x000100u);  // responses do not move it either

  const size_t before = untouched();
  // An opcode out of its place in the READ, a PSN no READ posted, a payload past the sink.
  EXPECT_EQ(roce(0x10, 0xFFFFFF, pattern(16), kAeth).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x0D, 0x000001, pattern(256), kAeth).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x0F, 0xFFFFFF, pattern(16), kAeth).reason, DeferReason::kNoMessage);
  EXPECT_EQ(roce(0x10, 0x000040, pattern(16), kAeth).reason, DeferReason::kNoMessage);
  e = roce(0x10, 0x000001, pattern(101), kAeth);
  EXPECT_EQ(e.reason, DeferReason::kMsOverflow);
  EXPECT_EQ(e.placed, 0u);
  EXPECT_EQ(roce(0x0F, 0x000000, pattern(189), kAeth).reason, DeferReason::kMsOverflow);
  EXPECT_EQ(untouched(), before);
  // Retired: its responses are deferred from then on.
  ASSERT_EQ(nic->read_retire(4, 0xFFFFFE), Err::kOk);
  EXPECT_EQ(roce(0x0E, 0xFFFFFF, Bytes(256, 0x55)).reason, DeferReason::kNoMessage);
  EXPECT_EQ(nic->read_retire(4, 0xFFFFFE), Err::kNoSuchMessage);
  EXPECT_EQ(Bytes(mem.begin() + 0x40000, mem.begin() + 0x40000 + 700), data);
  EXPECT_EQ(nic->read_count(4), 1u);
}

TEST_F(ModelRoce, ReadSinkCommandsRefuseWhatTheyCannotKeep) {
  std::vector<uint8_t> theirs(4096);
  ASSERT_EQ(nic->mr_add(3, theirs.data(), theirs.size(), 7), Err::kOk);
  ASSERT_EQ(nic->read_post(4, 0x000010, kMr, 0, 1000), Err::kOk);          // PSNs 10..13
  EXPECT_EQ(nic->read_post(4, 0x000013, kMr, 0, 10), Err::kBadArgument);   // overlaps its end
  EXPECT_EQ(nic->read_post(4, 0x00000F, kMr, 0, 512), Err::kBadArgument);  // overlaps its start
  EXPECT_EQ(nic->read_post(4, 0x000014, 3, 0, 10), Err::kAccessDenied);    // another owner
  EXPECT_EQ(nic->read_post(4, 0x000014, 9, 0, 10), Err::kUnknownMr);
  EXPECT_EQ(nic->read_post(4, 0x000014, kMr, (1 << 20) - 5, 10), Err::kOutOfBounds);
  EXPECT_EQ(nic->read_post(4, 1u << 24, kMr, 0, 10), Err::kBadArgument);
  EXPECT_EQ(nic->read_post(0, 0x000014, kMr, 0, 10), Err::kBadArgument);  // a TCP flow
  EXPECT_EQ(nic->read_post(6, 0x000014, kMr, 0, 10), Err::kUnknownFlow);
  EXPECT_EQ(nic->read_retire(4, 0x000011), Err::kNoSuchMessage);  // not a READ's first PSN
  // small_config's chunks hold four; the default's sixteen (ModelMemory below).
  for (uint32_t i = 1; i < 4; i++)
    ASSERT_EQ(nic->read_post(4, 0x000020 + i, kMr, 0, 0), Err::kOk);  // zero-length READs
  EXPECT_EQ(nic->read_post(4, 0x000030, kMr, 0, 10), Err::kMsFull);
  // A sink holds its MR; removing the flow releases both.
  EXPECT_EQ(nic->mr_remove(kMr), Err::kMrInUse);
  ASSERT_EQ(nic->flow_remove(4), Err::kOk);
  EXPECT_EQ(nic->mr_remove(kMr), Err::kOk);
}

// ---- commands ------------------------------------------------------------------------------

TEST_F(ModelRx, BadCommandsAreReportedAndCounted) {
  uint8_t buf[64];
  EXPECT_EQ(nic->mr_add(kMr, buf, sizeof buf, 1), Err::kMrExists);
  EXPECT_EQ(nic->mr_add(16, buf, sizeof buf, 1), Err::kMrTableFull);
  EXPECT_EQ(nic->mr_add(2, nullptr, 64, 1), Err::kOutOfBounds);
  EXPECT_EQ(nic->mr_add(2, buf, 0, 1), Err::kOutOfBounds);
  EXPECT_EQ(nic->mr_remove(3), Err::kUnknownMr);
  EXPECT_EQ(nic->ms_post(0, {kMr, (1 << 20) - 10, 11, 0}), Err::kOutOfBounds);
  EXPECT_EQ(nic->ms_post(0, {kMr, ~0ull, 16, 0}), Err::kOutOfBounds);
  EXPECT_EQ(nic->ms_post(0, {kMr, 0, 0, 0}), Err::kBadArgument);
  EXPECT_EQ(nic->ms_post(0, {7, 0, 10, 0}), Err::kUnknownMr);
  EXPECT_EQ(nic->ms_post(5, {kMr, 0, 10, 0}), Err::kUnknownFlow);
  EXPECT_EQ(nic->ms_post(kNoFlow, {kMr, 0, 10, 0}), Err::kUnknownFlow);
  EXPECT_EQ(nic->cursor_update(5, 0), Err::kUnknownFlow);
  EXPECT_EQ(nic->ms_retire(0, 1), Err::kNotConsumed);
  EXPECT_EQ(nic->ms_retire_msg(0, 1), Err::kBadArgument);
  EXPECT_EQ(nic->flow_remove(5), Err::kUnknownFlow);
  EXPECT_EQ(nic->flow_set_mode(5, FlowMode::kCopy), Err::kUnknownFlow);
  FlowSpec s;
  s.key = tcp_key();
  EXPECT_EQ(nic->flow_add(0, s), Err::kFlowExists);  // same id
  EXPECT_EQ(nic->flow_add(1, s), Err::kFlowExists);  // same 5-tuple
  s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
  s.parser = Parser::kRoce;
  s.pmtu = 1000;  // not a power of two
  EXPECT_EQ(nic->flow_add(1, s), Err::kBadArgument);
  s.key = tcp_key(1);
  s.pmtu = 4096;
  EXPECT_EQ(nic->flow_add(1, s), Err::kBadArgument);  // RoCE over TCP
  EXPECT_EQ(nic->cmd_error_count(Err::kUnknownFlow), 5u);
  EXPECT_EQ(nic->cmd_error_count(Err::kOutOfBounds), 4u);
  EXPECT_EQ(nic->counter(Ctr::kCmdErrors), 20u);
  // The MR stays until its MSs are gone; removing the flow releases them.
  post(0, 100);
  EXPECT_EQ(nic->mr_remove(kMr), Err::kMrInUse);
  EXPECT_EQ(nic->flow_remove(0), Err::kOk);
  EXPECT_EQ(nic->mr_remove(kMr), Err::kOk);
  EXPECT_EQ(nic->flows_in_use(), 0u);
}

TEST_F(ModelRx, RemovedMrIsNeverWritten) {
  FlowSpec s;
  s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
  s.parser = Parser::kRoce;
  s.qpn = 17;
  s.owner = 1;
  ASSERT_EQ(nic->flow_add(1, s), Err::kOk);
  std::vector<uint8_t> other(4096, kUntouched);
  ASSERT_EQ(nic->mr_add(2, other.data(), other.size(), 1, kMrRemoteWrite), Err::kOk);
  ASSERT_EQ(nic->mr_remove(2), Err::kOk);
  RxEntry e = rx(test::roce_frame(0x0A, 0, test::reth(0, 2, 64), pattern(64)));
  EXPECT_EQ(e.reason, DeferReason::kRemoteAccess);
  EXPECT_EQ(std::count(other.begin(), other.end(), kUntouched), 4096);
}

// ---- accounting -----------------------------------------------------------------------------

TEST(ModelMemory, ReportAddsUpAndTracksUse) {
  NicConfig c;
  c.max_flows = 1000;
  NicModel nic(c);
  MemoryReport r = nic.memory_report();
  uint64_t sum = 0;
  for (const auto& l : r.lines)
    sum += l.bytes();
  EXPECT_EQ(r.total_bytes, sum);
  EXPECT_EQ(r.lines[0].bytes(), 1000u * kFlowEntryBytes);
  // The defaults: 32 committed entries per flow (2 chunks of 16), a 64K-entry store.
  EXPECT_EQ(r.lines[3].entries, 1000u * 32);
  EXPECT_EQ(r.lines[4].entries, 1u << 16);
  EXPECT_EQ(r.lines[4].bytes(), (1u << 16) * kMsEntryBytes);
  EXPECT_EQ(r.lines[5].entries, 1000u * 2 + (1u << 16) / 16);
  // Selective repeat's WRITE contexts: a pool of 8192 and a list head per flow.
  EXPECT_EQ(r.lines[7].bytes(), 8192u * kWriteCtxBytes);
  EXPECT_EQ(r.lines[8].bytes(), 1000u * kWriteCtxHeadBytes);
  EXPECT_EQ(r.per_flow_bytes, kFlowEntryBytes + 2 * kHashBucketBytes + 32 * kMsEntryBytes +
                                  2 * kChunkLinkBytes + kWriteCtxHeadBytes);
  // The budget: 10K flows in 8 MB, the pool included.
  c.max_flows = 10000;
  EXPECT_LE(NicModel(c).memory_report().total_bytes, 8'000'000u);
  std::vector<uint8_t> mem(1 << 16);
  ASSERT_EQ(nic.mr_add(0, mem.data(), mem.size(), 0), Err::kOk);
  FlowSpec s;
  s.key = tcp_key();
  ASSERT_EQ(nic.flow_add(3, s), Err::kOk);
  for (int i = 0; i < 34; i++)
    ASSERT_EQ(nic.ms_post(3, {0, 0, 100, 0}), Err::kOk);
  r = nic.memory_report();
  EXPECT_EQ(r.lines[0].in_use, 1u);
  EXPECT_EQ(r.lines[2].in_use, 1u);
  EXPECT_EQ(r.lines[3].in_use, 32u);
  EXPECT_EQ(r.lines[4].in_use, 2u);  // in the one chunk drawn from the store
  EXPECT_EQ(r.lines[5].in_use, 1u);
  // READ sinks: sixteen per flow (max_rd_atomic) in one chunk, the flow's own first.
  s = FlowSpec{};
  s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
  s.parser = Parser::kRoce;
  ASSERT_EQ(nic.flow_add(4, s), Err::kOk);
  for (uint32_t i = 0; i < 16; i++)
    ASSERT_EQ(nic.read_post(4, i * 2, 0, i * 4000, 4097), Err::kOk);  // two PSNs each
  EXPECT_EQ(nic.read_post(4, 32, 0, 0, 1), Err::kMsFull);
  r = nic.memory_report();
  EXPECT_EQ(r.lines[3].in_use, 32u + 16u);
  EXPECT_EQ(r.lines[4].in_use, 2u);
  for (uint32_t i = 0; i < 16; i++)
    ASSERT_EQ(nic.read_retire(4, i * 2), Err::kOk);
  EXPECT_EQ(nic.read_count(4), 0u);
  EXPECT_EQ(nic.memory_report().lines[3].in_use, 32u);
}

TEST(ModelCounters, NamesAreUniqueAndStable) {
  NicModel nic(small_config());
  std::set<std::string> names;
  nic.for_each_counter([&](std::string_view n, uint64_t) {
    EXPECT_FALSE(n.empty());
    names.insert(std::string(n));
  });
  EXPECT_EQ(names.size(), kCounterCount);
  EXPECT_TRUE(names.count("rx_in_order"));
  EXPECT_TRUE(names.count("defer_no_ms"));
  EXPECT_TRUE(names.count("cmd_err_unknown_flow"));
  EXPECT_TRUE(names.count("tx_status_dma_fault"));
  EXPECT_EQ(decision_name(Decision::kTrimmed), "trimmed");
  EXPECT_EQ(defer_reason_name(DeferReason::kDmaFault), "dma_fault");
  EXPECT_TRUE(names.count("defer_remote_access"));
  EXPECT_TRUE(names.count("cmd_err_access_denied"));
  EXPECT_TRUE(names.count("defer_out_of_sequence"));
  EXPECT_TRUE(names.count("defer_bad_pkey"));
  EXPECT_TRUE(names.count("defer_bad_length"));
  EXPECT_TRUE(names.count("rx_placed_past_gap"));
  EXPECT_EQ(kCounterCount, 63u);
}

// A driver reuses one RxEntry for every frame (net_cleave, the generic backend): a frame no flow
// matches reports the TCP parser, as a fresh entry does, not the last matched flow's.
TEST(ModelRxEntry, AReusedEntryCarriesNothingOfTheLastFrame) {
  NicModel nic(small_config());
  FlowSpec qp;
  qp.key = {test::kPeer, test::kLocal, 0, kRocePort, 17};
  qp.parser = Parser::kRoce;
  qp.mode = FlowMode::kCopy;
  qp.pmtu = 1024;
  qp.qpn = 17;
  ASSERT_EQ(nic.flow_add(0, qp), Err::kOk);
  RxEntry e;
  nic.rx(test::roce_frame(0x04, 0, {}, test::pattern(64)), e);
  ASSERT_EQ(e.parser, Parser::kRoce);
  nic.rx(test::tcp_frame(1, test::pattern(64)), e);
  EXPECT_EQ(e.reason, DeferReason::kFlowMiss);
  EXPECT_EQ(e.parser, Parser::kTcp);
  RxEntry fresh;
  nic.rx(test::tcp_frame(1, test::pattern(64)), fresh);
  EXPECT_EQ(fresh.parser, e.parser);
}

}  // namespace
}  // namespace cleave::nic
