// tcp_msg_test.cc - TCP message mode against a scripted peer: the message option on the wire,
// its negotiation (and the clear refusal of a peer without it, as Linux is), the sender's
// boundaries and message credit, the receiver's one-message-per-buffer completions, truncation,
// and options that lie.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "tcp_script.h"

namespace cleave::transport::tcp::test {
namespace {

const std::vector<Param> kMessage{{"message", "on"}};

// ---- the option on the wire ----

TEST(TcpMsgWire, DataOptionRoundTripsBesideTimestamps) {
  BuildSpec b;
  b.seq = 1000;
  b.flags = kAck;
  b.ts = true;
  b.ts_val = 7;
  b.msg = true;
  b.msg_data = true;
  b.msg_limit = 0x01020304;
  b.msg_no = 0xFFFFFFFE;
  b.msg_start = 999;
  b.msg_len = 1u << 30;
  SackBlock sack{1, 2};
  b.nsack = 1;
  b.sack = &sack;
  uint8_t buf[kMaxHeaderLen];
  const size_t n = build(b, buf);
  EXPECT_EQ(n, 20u + 12 + 20);  // no room left for a SACK block: it is left out
  // Kind, length and ExID as RFC 6994 lays them out.
  EXPECT_EQ(buf[32], 253);
  EXPECT_EQ(buf[33], 20);
  EXPECT_EQ(buf[34], 0xC1);
  EXPECT_EQ(buf[35], 0xEA);
  Segment s;
  ASSERT_TRUE(parse(buf, n, s));
  EXPECT_TRUE(s.has_ts);
  EXPECT_TRUE(s.has_msg);
  EXPECT_TRUE(s.msg_data);
  EXPECT_EQ(s.msg_limit, 0x01020304u);
  EXPECT_EQ(s.msg_no, 0xFFFFFFFEu);
  EXPECT_EQ(s.msg_start, 999u);
  EXPECT_EQ(s.msg_len, 1u << 30);
  EXPECT_EQ(s.nsack, 0u);
  EXPECT_EQ(data_options_len(true, true), 32u);

  // The short form (no payload): 8 bytes, credit only; two SACK blocks still fit.
  SackBlock two[2] = {{1, 2}, {3, 4}};
  BuildSpec a;
  a.flags = kAck;
  a.ts = true;
  a.msg = true;
  a.msg_limit = 5;
  a.nsack = 2;
  a.sack = two;
  const size_t m = build(a, buf);
  ASSERT_TRUE(parse(buf, m, s));
  EXPECT_TRUE(s.has_msg);
  EXPECT_FALSE(s.msg_data);
  EXPECT_EQ(s.msg_limit, 5u);
  EXPECT_EQ(s.nsack, 2u);
}

TEST(TcpMsgWire, OtherExperimentsAndOddLengthsAreIgnored) {
  BuildSpec b;
  b.flags = kAck;
  b.msg = true;
  b.msg_limit = 9;
  uint8_t buf[kMaxHeaderLen];
  const size_t n = build(b, buf);
  ASSERT_EQ(n, 28u);
  Segment s;
  // Another experiment's ExID: skipped by its length.
  buf[22] = 0x12;
  ASSERT_TRUE(parse(buf, n, s));
  EXPECT_FALSE(s.has_msg);
  // Our ExID with a length we do not know (8 -> 6, NOPs after it keep the list whole).
  buf[22] = 0xC1;
  buf[21] = 6;
  buf[26] = buf[27] = kOptNop;
  ASSERT_TRUE(parse(buf, n, s));
  EXPECT_FALSE(s.has_msg);
  // A length running past the header is a malformed option list.
  buf[21] = 20;
  EXPECT_FALSE(parse(buf, n, s));
}

// ---- negotiation ----

struct MsgActive {
  TcpTransport tp;
  ScriptCtx ctx;
  uint32_t iss = 0;

  explicit MsgActive(std::vector<Param> params = kMessage) {
    ctx.at_ms(1000);
    EXPECT_EQ(tp.connect(kFlow, kTuple, params, ctx), 0);
    auto out = ctx.take_out();
    EXPECT_EQ(out.size(), 1u);
    syn = out[0].seg;
    iss = syn.seq;
  }
  Segment syn;

  std::vector<Out> synack(bool msg, uint32_t limit = 0) {
    BuildSpec b = linux_synack(iss);
    b.msg = msg;
    b.msg_limit = limit;
    PeerSeg s(b, {}, kFlow);
    tp.rx_burst({&s.h, 1}, ctx);
    return ctx.take_out();
  }
  BuildSpec spec(uint32_t seq_off, uint32_t ack_off, uint32_t limit) {
    BuildSpec b;
    b.seq = kPeerIss + 1 + seq_off;
    b.ack = iss + 1 + ack_off;
    b.flags = kAck;
    b.window = 2048;
    b.ts = true;
    b.ts_val = 200;
    b.msg = true;
    b.msg_limit = limit;
    return b;
  }
  // A data segment of message `no` [start, start + len) of the peer's stream: bytes at `at`.
  std::vector<Out> data(uint32_t no, uint32_t start, uint32_t len, uint32_t at,
                        std::vector<uint8_t> d, uint32_t limit = 0) {
    BuildSpec b = spec(at, 0, limit);
    b.msg_data = true;
    b.msg_no = no;
    b.msg_start = kPeerIss + 1 + start;
    b.msg_len = len;
    PeerSeg s(b, std::move(d), kFlow);
    tp.rx_burst({&s.h, 1}, ctx);
    return ctx.take_out();
  }
  // The same segment of `n` bytes at `at`, as the NIC reports it after placing it itself (the
  // payload is in app memory, not in the frame): kPlaced, or kTrimmed by `trim` bytes.
  std::vector<Out> placed(uint32_t no, uint32_t start, uint32_t len, uint32_t at, uint32_t n,
                          uint32_t trim = 0) {
    BuildSpec b = spec(at, 0, 0);
    b.msg_data = true;
    b.msg_no = no;
    b.msg_start = kPeerIss + 1 + start;
    b.msg_len = len;
    PeerSeg s(b, {}, kFlow);
    s.h.payload_len = n;
    s.h.placed = trim != 0 ? Placed::kTrimmed : Placed::kPlaced;
    s.h.trimmed = trim;
    s.h.payload = nullptr;
    tp.rx_burst({&s.h, 1}, ctx);
    return ctx.take_out();
  }
  void app(ReqKind k, uint32_t len = 0, uint64_t off = 0, uint64_t wr = 0) {
    AppRequest r;
    r.flow = kFlow;
    r.kind = k;
    r.len = len;
    r.offset = off;
    r.wr_id = wr;
    tp.app_burst({&r, 1}, ctx);
  }
};

TEST(TcpMsgHandshake, OfferedInTheSynAndAcceptedInTheSynAck) {
  MsgActive a;
  EXPECT_TRUE(a.syn.has_msg);
  EXPECT_FALSE(a.syn.msg_data);
  EXPECT_EQ(a.syn.header_len, 48);  // Linux's 20 bytes of options and ours, 8
  auto out = a.synack(true, 4);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].seg.has_msg);  // the ACK carries our credit too
  Info i = info(a.tp, kFlow);
  EXPECT_EQ(i.t["message"], "on");
  EXPECT_EQ(i.n["mss"], 1460u - 12 - 20);  // room for timestamps and the data option
  // A stream flow never sends it.
  MsgActive s(std::vector<Param>{});
  EXPECT_FALSE(s.syn.has_msg);
  out = s.synack(true);
  EXPECT_FALSE(out[0].seg.has_msg);
  EXPECT_EQ(info(s.tp, kFlow).t["message"], "off");
}

TEST(TcpMsgHandshake, PeerWithoutTheOptionIsRefusedClearly) {
  MsgActive a;
  auto out = a.synack(false);  // what Linux answers: it ignores the option
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags & kRst, kRst);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kRefused);
  EXPECT_EQ(ev[0].status, -EPROTONOSUPPORT);
  EXPECT_EQ(a.tp.state(kFlow), State::kClosed);
  EXPECT_EQ(a.ctx.closed, std::vector<FlowId>{kFlow});
  EXPECT_EQ(a.tp.counters().msg_refused, 1u);
}

TEST(TcpMsgHandshake, MessageListenerResetsStreamSynsAndAcceptsMessageSyns) {
  for (bool msg : {false, true}) {
    SCOPED_TRACE(msg);
    TcpTransport tp;
    ScriptCtx ctx;
    ASSERT_EQ(tp.listen(3, kTuple.local, kMessage), 0);
    BuildSpec b;
    b.seq = kPeerIss;
    b.flags = kSyn;
    b.window = 64240;
    b.mss = 1460;
    b.msg = msg;
    b.msg_limit = 2;
    PeerSeg syn(b);
    syn.h.has_listener = true;
    syn.h.listener = 3;
    tp.rx_burst({&syn.h, 1}, ctx);
    auto out = ctx.take_out();
    ASSERT_EQ(out.size(), 1u);
    if (msg) {
      EXPECT_EQ(out[0].seg.flags, kSyn | kAck);
      EXPECT_TRUE(out[0].seg.has_msg);
      EXPECT_EQ(tp.state(7), State::kSynReceived);
    } else {
      // RST|ACK acknowledging the SYN: Linux's connect() fails with ECONNREFUSED.
      EXPECT_EQ(out[0].seg.flags, kRst | kAck);
      EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
      EXPECT_EQ(ctx.closed, std::vector<FlowId>{7});
      EXPECT_EQ(tp.counters().msg_refused, 1u);
      EXPECT_EQ(tp.flow_count(), 0u);
    }
    EXPECT_TRUE(ctx.take_events().empty());  // no app heard of it
  }
}

// ---- sending ----

TEST(TcpMsgSend, SegmentsNeverSpanMessagesAndWaitForCredit) {
  MsgActive a;
  a.synack(true, 2);  // the peer has two receives posted
  a.ctx.take_events();
  const uint32_t sizes[] = {3000, 10, 5000};
  uint64_t off = 0;
  for (uint32_t i = 0; i < 3; i++) {
    a.app(ReqKind::kSend, sizes[i], off, 100 + i);
    off += sizes[i];
  }
  auto out = a.ctx.take_out();
  uint32_t sent = 0;
  for (const Out& o : out) {
    ASSERT_TRUE(o.seg.msg_data);
    const uint32_t no = o.seg.msg_no;
    ASSERT_LT(no, 2u);  // the third message has no credit yet
    const uint32_t start = a.iss + 1 + (no == 0 ? 0 : 3000);
    EXPECT_EQ(o.seg.msg_start, start);
    EXPECT_EQ(o.seg.msg_len, sizes[no]);
    EXPECT_TRUE(seq_geq(o.seg.seq, start));
    EXPECT_LE(o.seg.seq - start + o.desc.len, sizes[no]);  // inside its message, TSO or not
    if (o.desc.len > o.desc.mss && o.desc.mss != 0) {
      EXPECT_EQ(o.desc.mss, 1428u);
    }
    sent += o.desc.len;
  }
  EXPECT_EQ(sent, 3010u);
  // Credit for one more: the third message goes, all of it in its own descriptors.
  BuildSpec ack = a.spec(0, 3010, 3);
  PeerSeg s(ack, {}, kFlow);
  a.tp.rx_burst({&s.h, 1}, a.ctx);
  out = a.ctx.take_out();
  sent = 0;
  for (const Out& o : out) {
    if (o.desc.len == 0) continue;
    EXPECT_EQ(o.seg.msg_no, 2u);
    EXPECT_EQ(o.seg.msg_start, a.iss + 1 + 3010);
    EXPECT_EQ(o.seg.msg_len, 5000u);
    sent += o.desc.len;
  }
  EXPECT_EQ(sent, 5000u);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 2u);  // the first two acknowledged
  EXPECT_EQ(ev[0].wr_id, 100u);
  EXPECT_EQ(ev[1].wr_id, 101u);
}

TEST(TcpMsgSend, NoCreditAndNothingInFlightProbes) {
  MsgActive a;
  a.synack(true, 0);  // no receive posted at the peer
  a.app(ReqKind::kSend, 100, 0, 1);
  auto out = a.ctx.take_out();
  EXPECT_TRUE(out.empty());
  // The persist timer probes with one byte of the message; the peer's answer grants credit.
  a.ctx.at_ms(3000);
  a.tp.tick(a.ctx);
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].desc.len, 1u);
  EXPECT_EQ(out[0].seg.msg_len, 100u);
  BuildSpec ack = a.spec(0, 0, 1);
  PeerSeg s(ack, {}, kFlow);
  a.tp.rx_burst({&s.h, 1}, a.ctx);
  out = a.ctx.take_out();
  EXPECT_EQ(payload_of(out), 99u);  // the rest of the message (the probe byte is in flight)
}

// A tail loss probe sends new data only inside the peer's credit, as the regular output does:
// a message the peer has no receive for must not go, even though the byte window allows it
// (the peer's NIC has nowhere to place it, and a receive posted while the segment waits in its
// queue would turn it into a copy).
TEST(TcpMsgSend, TailLossProbeKeepsInsideTheCredit) {
  MsgActive a;
  a.ctx.at_ms(1010);  // a 10 ms RTT sample: the probe timeout is well before the RTO
  a.synack(true, 1);  // one receive posted at the peer
  a.ctx.take_events();
  a.app(ReqKind::kSend, 100, 0, 1);
  a.app(ReqKind::kSend, 5000, 100, 2);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.msg_no, 0u);
  EXPECT_EQ(out[0].desc.len, 100u);
  // No ACK comes: the probe goes (ahead of the RTO), and it is the last segment sent, again.
  out.clear();
  for (uint64_t ms = 1011; out.empty() && ms < 1500; ms++) {
    a.ctx.at_ms(ms);
    a.tp.tick(a.ctx);
    out = a.ctx.take_out();
  }
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.msg_no, 0u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(out[0].desc.len, 100u);
  EXPECT_EQ(info(a.tp, kFlow).n["tlp_probes"], 1u);
}

// ---- receiving ----

TEST(TcpMsgRecv, EachBufferTakesOneMessageInAnyArrivalOrder) {
  MsgActive a;
  a.synack(true, 8);
  a.ctx.take_events();
  // The NIC flow does not place by message (the generic backend): every segment is copied.
  a.ctx.post_error = -EOPNOTSUPP;
  a.app(ReqKind::kRecv, 4096, 0, 11);
  a.app(ReqKind::kRecv, 100, 8192, 12);  // shorter than its message
  a.app(ReqKind::kRecv, 4096, 16384, 13);
  EXPECT_TRUE(a.ctx.posts.empty());
  auto out = a.ctx.take_out();
  ASSERT_FALSE(out.empty());
  // The credit went out: the peer learns of new receives while it knows at most half of them.
  EXPECT_GE(out.back().seg.msg_limit, 2u);
  auto m0 = bytes(2000, 3), m1 = bytes(300, 5), m2 = bytes(1, 9);
  // Message 1 first, then message 2, then message 0 in two pieces, the second first.
  a.data(1, 2000, 300, 2000, m1);
  a.data(2, 2300, 1, 2300, m2);
  a.data(0, 0, 2000, 1000, {m0.begin() + 1000, m0.end()});
  EXPECT_TRUE(a.ctx.take_events().empty());
  a.data(0, 0, 2000, 0, {m0.begin(), m0.begin() + 1000});
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].kind, EventKind::kRecvDone);
  EXPECT_EQ(ev[0].wr_id, 11u);
  EXPECT_EQ(ev[0].status, 0);
  EXPECT_EQ(ev[0].len, 2000u);
  EXPECT_EQ(ev[0].aux, 2000u);
  EXPECT_EQ(ev[1].wr_id, 12u);
  EXPECT_EQ(ev[1].status, -EMSGSIZE);  // truncated: the first 100 bytes, and the real length
  EXPECT_EQ(ev[1].len, 100u);
  EXPECT_EQ(ev[1].aux, 300u);
  EXPECT_EQ(ev[2].wr_id, 13u);
  EXPECT_EQ(ev[2].len, 1u);
  const auto& mr = a.ctx.mrs[0];
  EXPECT_TRUE(std::equal(m0.begin(), m0.end(), mr.begin()));
  EXPECT_TRUE(std::equal(m1.begin(), m1.begin() + 100, mr.begin() + 8192));
  EXPECT_EQ(mr[8192 + 100], 0);  // nothing past the short buffer
  EXPECT_EQ(mr[16384], m2[0]);
  Info i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["msgs_received"], 3u);
  EXPECT_EQ(i.n["msgs_truncated"], 1u);
  EXPECT_EQ(i.n["bytes_received"], 2301u);
  EXPECT_EQ(i.n["copied_bytes"], 2301u);
  EXPECT_EQ(i.n["placed_bytes"], 0u);
  // Refused once, the NIC is not asked again, and nothing was ever retired on it.
  a.ctx.post_error = 0;
  a.app(ReqKind::kRecv, 4096, 0, 14);
  EXPECT_TRUE(a.ctx.posts.empty());
  EXPECT_TRUE(a.ctx.retired_msgs.empty());
}

// ---- NIC placement by message ----

TEST(TcpMsgNic, TheActiveOpenTellsTheDataplaneTheFlowHasMessages) {
  for (bool msg : {false, true}) {
    MsgActive a(msg ? kMessage : std::vector<Param>{});
    a.synack(msg, 4);
    EXPECT_EQ(a.ctx.synced_seq, kPeerIss + 1);
    EXPECT_EQ(a.ctx.synced_messages, msg);
  }
}

TEST(TcpMsgNic, ThePassiveOpenTellsTheDataplaneTheFlowHasMessages) {
  TcpTransport tp;
  ScriptCtx ctx;
  ASSERT_EQ(tp.listen(3, kTuple.local, kMessage), 0);
  BuildSpec b;
  b.seq = kPeerIss;
  b.flags = kSyn;
  b.window = 64240;
  b.msg = true;
  PeerSeg syn(b);
  syn.h.has_listener = true;
  syn.h.listener = 3;
  tp.rx_burst({&syn.h, 1}, ctx);
  EXPECT_EQ(ctx.opened.size(), 1u);
  EXPECT_TRUE(ctx.synced_messages);
}

TEST(TcpMsgNic, EachReceiveIsPostedAsTheMsOfItsMessageAndPlacedBytesCount) {
  MsgActive a;
  // Receives posted before the handshake wait for it (the NIC does not know the flow yet).
  a.app(ReqKind::kRecv, 4096, 0, 11);
  EXPECT_TRUE(a.ctx.posts.empty());
  a.synack(true, 8);
  a.ctx.take_events();
  a.app(ReqKind::kRecv, 100, 8192, 12);  // shorter than its message
  a.app(ReqKind::kRecv, 4096, 16384, 13);
  ASSERT_EQ(a.ctx.posts.size(), 3u);
  for (uint32_t i = 0; i < 3; i++) {
    EXPECT_EQ(a.ctx.posts[i].msg, i);
    EXPECT_EQ(a.ctx.posts[i].offset, uint64_t(i) * 8192);
    EXPECT_EQ(a.ctx.posts[i].len, i == 1 ? 100u : 4096u);
  }
  // Message 0 (2000 bytes) placed by the NIC in two segments, the second first; message 1
  // (300 bytes) into its 100-byte buffer: the part that fits placed, the NIC defers the rest
  // (it would run past the MS), which the copy path stores nowhere; message 2 half placed,
  // half deferred (say the NIC had a bad moment): one message, both paths.
  a.placed(0, 0, 2000, 1000, 1000);
  EXPECT_TRUE(a.ctx.take_events().empty());
  a.placed(0, 0, 2000, 0, 1000);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].wr_id, 11u);
  EXPECT_EQ(ev[0].status, 0);
  EXPECT_EQ(ev[0].len, 2000u);
  EXPECT_EQ(ev[0].aux, 2000u);
  EXPECT_EQ(a.ctx.retired_msgs, std::vector<uint32_t>{0});
  a.placed(1, 2000, 300, 2000, 100);
  a.data(1, 2000, 300, 2100, bytes(200, 4));
  ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].wr_id, 12u);
  EXPECT_EQ(ev[0].status, -EMSGSIZE);
  EXPECT_EQ(ev[0].len, 100u);
  EXPECT_EQ(ev[0].aux, 300u);
  EXPECT_EQ(a.ctx.mrs[0][8192 + 100], 0);  // the copy path wrote nothing past the buffer
  auto m2 = bytes(50, 8);
  a.data(2, 2300, 100, 2300, m2);
  a.placed(2, 2300, 100, 2350, 50);
  ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].wr_id, 13u);
  EXPECT_EQ(ev[0].len, 100u);
  EXPECT_TRUE(std::equal(m2.begin(), m2.end(), a.ctx.mrs[0].begin() + 16384));
  EXPECT_EQ(a.ctx.retired_msgs, (std::vector<uint32_t>{0, 1, 2}));
  Info i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["bytes_received"], 2400u);
  EXPECT_EQ(i.n["placed_bytes"], 2000u + 100 + 50);
  EXPECT_EQ(i.n["copied_bytes"], 200u + 50);
  EXPECT_EQ(i.n["msgs_received"], 3u);
  EXPECT_EQ(i.n["msgs_truncated"], 1u);
  EXPECT_EQ(a.tp.counters().placed_bytes, 2150u);
  // The next receive is the MS of message 3.
  a.app(ReqKind::kRecv, 4096, 0, 14);
  ASSERT_EQ(a.ctx.posts.size(), 4u);
  EXPECT_EQ(a.ctx.posts[3].msg, 3u);
}

TEST(TcpMsgNic, PlacedSegmentsAreCheckedLikeCopiedOnes) {
  MsgActive a;
  a.synack(true, 8);
  a.app(ReqKind::kRecv, 1000, 0, 1);
  a.app(ReqKind::kRecv, 1000, 1000, 2);
  a.ctx.take_out();
  a.ctx.take_events();
  // The NIC trusts the option within the message it names; the transport checks the rest:
  // message 0 not at the stream's start, message 1 where message 0 has to be.
  a.placed(0, 10, 100, 10, 100);
  a.placed(1, 0, 100, 0, 100);
  EXPECT_EQ(a.tp.counters().msg_bad, 2u);
  // Message 2 has no receive posted (the NIC could not have placed it: no MS): not counted.
  a.placed(2, 300, 100, 300, 100);
  EXPECT_EQ(a.tp.counters().msg_no_buffer, 1u);
  Info i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["bytes_received"], 0u);
  EXPECT_EQ(i.n["placed_bytes"], 0u);
  // A trimmed segment (its head was before the NIC's cursor) counts from the cursor on.
  a.placed(0, 0, 100, 0, 60);
  a.placed(0, 0, 100, 40, 60, 20);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].len, 100u);
  i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["placed_bytes"], 100u);
  EXPECT_EQ(i.n["dup_bytes"], 20u);
}

TEST(TcpMsgNic, FullMsListsAreRetriedAndRefusalsFallBackToCopying) {
  MsgActive a;
  a.synack(true, 8);
  a.ctx.post_error = -ENOBUFS;
  a.app(ReqKind::kRecv, 1000, 0, 1);
  a.app(ReqKind::kRecv, 1000, 1000, 2);
  EXPECT_TRUE(a.ctx.posts.empty());
  // Room again: the next burst posts both, in order.
  a.ctx.post_error = 0;
  a.data(0, 0, 10, 0, bytes(10));     // copied: the NIC had no MS for it
  ASSERT_EQ(a.ctx.posts.size(), 1u);  // message 0 completed first: only message 1 is left
  EXPECT_EQ(a.ctx.posts[0].msg, 1u);
  EXPECT_TRUE(a.ctx.retired_msgs.empty());  // message 0 never was on the NIC
  a.placed(1, 10, 10, 10, 10);
  EXPECT_EQ(a.ctx.retired_msgs, std::vector<uint32_t>{1});
  Info i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["copied_bytes"], 10u);
  EXPECT_EQ(i.n["placed_bytes"], 10u);
}

TEST(TcpMsgNic, FinResetAndAbortRetireEveryMs) {
  // The peer's FIN: buffers left complete empty, and their MSs retire.
  {
    MsgActive a;
    a.synack(true, 8);
    for (uint32_t i = 0; i < 3; i++)
      a.app(ReqKind::kRecv, 1000, i * 1000, i);
    a.placed(0, 0, 10, 0, 10);
    BuildSpec fin = a.spec(10, 0, 0);
    fin.flags |= kFin;
    PeerSeg f(fin, {}, kFlow);
    a.tp.rx_burst({&f.h, 1}, a.ctx);
    EXPECT_EQ(a.ctx.retired_msgs, (std::vector<uint32_t>{0, 1, 2}));
    auto ev = a.ctx.take_events();
    EXPECT_EQ(ev.size(), 1u + 3 + 1);  // connected, three receives, peer closed
  }
  // A reset from the peer, and the app's abort: every MS retires before the app hears.
  for (bool abort : {false, true}) {
    MsgActive a;
    a.synack(true, 8);
    for (uint32_t i = 0; i < 3; i++)
      a.app(ReqKind::kRecv, 1000, i * 1000, i);
    a.placed(1, 100, 10, 100, 5);  // message 1 partly there
    ASSERT_EQ(a.ctx.posts.size(), 3u);
    if (abort) {
      a.app(ReqKind::kAbort);
    } else {
      BuildSpec rst = a.spec(0, 0, 0);
      rst.flags = kRst;
      PeerSeg r(rst, {}, kFlow);
      a.tp.rx_burst({&r.h, 1}, a.ctx);
    }
    EXPECT_EQ(a.ctx.retired_msgs, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(a.ctx.closed, std::vector<FlowId>{kFlow});
    EXPECT_EQ(a.tp.flow_count(), 0u);
  }
}

TEST(TcpMsgRecv, OptionsThatLieAreDroppedAndMessagesWithoutBufferWait) {
  MsgActive a;
  a.synack(true, 8);
  a.app(ReqKind::kRecv, 1000, 0, 1);
  a.app(ReqKind::kRecv, 1000, 1000, 2);
  a.ctx.take_out();
  a.ctx.take_events();
  auto d = bytes(100);
  // Payload outside the message it names; message 0 not starting at the stream's start; no
  // option at all; message 1 claimed to start where message 0 has to be.
  a.data(0, 0, 50, 0, d);
  a.data(0, 10, 100, 10, d);
  a.data(1, 0, 100, 0, d);
  BuildSpec plain = a.spec(0, 0, 0);
  plain.msg = false;
  PeerSeg p(plain, d, kFlow);
  a.tp.rx_burst({&p.h, 1}, a.ctx);
  EXPECT_EQ(a.tp.counters().msg_bad, 4u);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 0u);
  // Message 2 has no receive posted: dropped, and answered with our credit (2).
  auto out = a.data(2, 300, 100, 300, d);
  EXPECT_EQ(a.tp.counters().msg_no_buffer, 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.msg_limit, 2u);
  // Once message 1 is known, a message 0 that does not end where it starts is refused.
  a.data(1, 100, 200, 100, d);
  a.data(0, 0, 90, 0, bytes(90));
  EXPECT_EQ(a.tp.counters().msg_bad, 5u);
  a.data(0, 0, 100, 0, d);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].wr_id, 1u);
  EXPECT_EQ(ev[0].len, 100u);
  // The peer closes: the buffer of the unfinished message returns empty.
  a.data(1, 100, 200, 200, d);
  BuildSpec fin = a.spec(300, 0, 0);
  fin.flags |= kFin;
  PeerSeg f(fin, {}, kFlow);
  a.tp.rx_burst({&f.h, 1}, a.ctx);
  ev = a.ctx.take_events();
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[0].wr_id, 2u);
  EXPECT_EQ(ev[0].len, 200u);
}

}  // namespace
}  // namespace cleave::transport::tcp::test
