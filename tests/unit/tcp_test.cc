// tcp_test.cc - TCP against a scripted peer: handshakes and their options, RST and SYN rules
// (RFC 5961), PAWS, SACK/DSACK generation, zero window and persist, window scaling, the
// receive path's NIC commands, RACK-TLP loss detection and probes, sequence wrap.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "siphash.h"
#include "tcp_script.h"

namespace cleave::transport::tcp::test {
namespace {

// The keyed hash behind the cookies (siphash.h) against the reference implementation's vectors
// (key 00..0f; messages 00..07 and 00..0f, whole 64-bit words read little-endian).
TEST(SipHash, MatchesTheReferenceVectors) {
  const uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  const uint64_t m[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  EXPECT_EQ(siphash24(key, m, 0), 0x726fdb47dd0e0e31ull);
  EXPECT_EQ(siphash24(key, m, 1), 0x93f5f5799a932462ull);
  EXPECT_EQ(siphash24(key, m, 2), 0x3f2acc7f57c29bdbull);
}

bool has_event(const std::vector<Event>& ev, EventKind k, int32_t status = 0) {
  for (const Event& e : ev) {
    if (e.kind == k && e.status == status) return true;
  }
  return false;
}

// A connection set up by an active open against the scripted peer, with the peer's SYN-ACK
// options given by the test.
struct Active {
  TcpTransport tp;
  ScriptCtx ctx;
  uint32_t iss = 0;

  explicit Active(std::vector<Param> params = {}) {
    ctx.at_ms(1000);
    EXPECT_EQ(tp.connect(kFlow, kTuple, params, ctx), 0);
    auto out = ctx.take_out();
    EXPECT_EQ(out.size(), 1u);
    iss = out[0].seg.seq;
  }

  // The peer answers the SYN; returns what we emitted.
  std::vector<Out> synack(BuildSpec b) {
    b.seq = kPeerIss;
    b.ack = iss + 1;
    b.flags = kSyn | kAck;
    PeerSeg s(b, {}, kFlow);
    tp.rx_burst({&s.h, 1}, ctx);
    return ctx.take_out();
  }

  // Established with Linux's options (window 64K << 7).
  void establish(uint16_t window = 512, uint8_t wscale = 7) {
    synack(linux_synack(iss, kPeerIss, wscale));
    // A window update from the peer scales from now on.
    BuildSpec a;
    a.seq = kPeerIss + 1;
    a.ack = iss + 1;
    a.flags = kAck;
    a.window = window;
    a.ts = true;
    a.ts_val = 101;
    a.ts_ecr = 1;
    PeerSeg s(a, {}, kFlow);
    tp.rx_burst({&s.h, 1}, ctx);
    ctx.take_out();
    ctx.take_events();
  }

  // A segment from the peer on the established flow.
  std::vector<Out> peer(BuildSpec b, std::vector<uint8_t> data = {}, uint8_t ecn = 0) {
    PeerSeg s(b, std::move(data), kFlow, ecn);
    tp.rx_burst({&s.h, 1}, ctx);
    return ctx.take_out();
  }
  BuildSpec ack_spec(uint32_t seq_off, uint32_t ack_off, uint32_t ts_val = 200) {
    BuildSpec b;
    b.seq = kPeerIss + 1 + seq_off;
    b.ack = iss + 1 + ack_off;
    b.flags = kAck;
    b.window = 512;
    b.ts = true;
    b.ts_val = ts_val;
    return b;
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

// ---- handshake and options ----

TEST(TcpHandshake, SynCarriesLinuxOptions) {
  TcpTransport tp;
  ScriptCtx ctx;
  ctx.at_ms(5);
  ASSERT_EQ(tp.connect(kFlow, kTuple, {}, ctx), 0);
  auto out = ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  const Segment& s = out[0].seg;
  EXPECT_EQ(s.flags, kSyn);
  EXPECT_EQ(s.src_port, 5000);
  EXPECT_EQ(s.dst_port, 80);
  EXPECT_TRUE(s.has_mss);
  EXPECT_EQ(s.mss, 1460);
  EXPECT_TRUE(s.sack_permitted);
  EXPECT_TRUE(s.has_ts);
  EXPECT_EQ(s.ts_val, 5u);
  EXPECT_EQ(s.ts_ecr, 0u);
  EXPECT_TRUE(s.has_wscale);
  EXPECT_EQ(s.wscale, 7);
  EXPECT_EQ(s.header_len, 40);  // mss 4, sackOK 2, TS 10, nop + wscale 4
  EXPECT_EQ(out[0].desc.len, 0u);
  EXPECT_EQ(tp.state(kFlow), State::kSynSent);
  EXPECT_EQ(tp.connect(kFlow, kTuple, {}, ctx), -EEXIST);
}

// Every combination of the peer's SYN-ACK options: what is on is what both offered.
TEST(TcpHandshake, EveryOptionCombination) {
  for (int m = 0; m < 16; m++) {
    const bool mss = m & 1, sack = m & 2, ts = m & 4, ws = m & 8;
    SCOPED_TRACE("mss " + std::to_string(mss) + " sack " + std::to_string(sack) + " ts " +
                 std::to_string(ts) + " ws " + std::to_string(ws));
    Active a;
    BuildSpec b;
    b.window = 1000;
    b.mss = mss ? 1200 : 0;
    b.sack_permitted = sack;
    b.ts = ts;
    b.ts_val = 77;
    b.wscale_opt = ws;
    b.wscale = 3;
    auto out = a.synack(b);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].seg.flags, kAck);
    EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
    EXPECT_EQ(out[0].seg.has_ts, ts);
    if (ts) {
      EXPECT_EQ(out[0].seg.ts_ecr, 77u);
    }
    EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
    EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kConnected));
    EXPECT_EQ(a.ctx.synced_seq, kPeerIss + 1);
    Info i = info(a.tp, kFlow);
    EXPECT_EQ(i.t["sack"], sack ? "on" : "off");
    EXPECT_EQ(i.t["timestamps"], ts ? "on" : "off");
    EXPECT_EQ(i.n["snd_wscale"], ws ? 3u : 0u);
    EXPECT_EQ(i.n["rcv_wscale"], ws ? 7u : 0u);
    // MSS: the peer's, or 536 without the option, less 12 bytes of timestamps.
    EXPECT_EQ(i.n["mss"], (mss ? 1200u : 536u) - (ts ? 12u : 0u));
    // The SYN-ACK's window is never scaled.
    EXPECT_EQ(i.n["snd_wnd"], 1000u);
  }
}

TEST(TcpHandshake, PassiveOpenEchoesOnlyOfferedOptions) {
  for (int m = 0; m < 8; m++) {
    const bool sack = m & 1, ts = m & 2, ws = m & 4;
    SCOPED_TRACE(m);
    TcpTransport tp;
    ScriptCtx ctx;
    ctx.at_ms(10);
    ASSERT_EQ(tp.listen(3, kTuple.local, {}), 0);
    BuildSpec b;
    b.seq = kPeerIss;
    b.flags = kSyn;
    b.window = 64240;
    b.mss = 1460;
    b.sack_permitted = sack;
    b.ts = ts;
    b.ts_val = 555;
    b.wscale_opt = ws;
    b.wscale = 7;
    PeerSeg syn(b);
    syn.h.has_listener = true;
    syn.h.listener = 3;
    tp.rx_burst({&syn.h, 1}, ctx);
    ASSERT_EQ(ctx.opened.size(), 1u);
    EXPECT_TRUE(ctx.opened[0] == kTuple);
    EXPECT_EQ(ctx.synced_seq, kPeerIss + 1);
    auto out = ctx.take_out();
    ASSERT_EQ(out.size(), 1u);
    const Segment& s = out[0].seg;
    EXPECT_EQ(s.flags, kSyn | kAck);
    EXPECT_EQ(s.ack, kPeerIss + 1);
    EXPECT_EQ(s.sack_permitted, sack);
    EXPECT_EQ(s.has_ts, ts);
    if (ts) {
      EXPECT_EQ(s.ts_ecr, 555u);
    }
    EXPECT_EQ(s.has_wscale, ws);
    EXPECT_EQ(tp.state(7), State::kSynReceived);
    // No app is told until the handshake completes.
    EXPECT_TRUE(ctx.take_events().empty());
    BuildSpec a;
    a.seq = kPeerIss + 1;
    a.ack = s.seq + 1;
    a.flags = kAck;
    a.window = 502;
    a.ts = ts;
    a.ts_val = 556;
    PeerSeg ack(a, {}, 7);
    tp.rx_burst({&ack.h, 1}, ctx);
    EXPECT_EQ(tp.state(7), State::kEstablished);
    auto ev = ctx.take_events();
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].kind, EventKind::kAccepted);
    EXPECT_EQ(ev[0].aux, 3u);
    EXPECT_EQ(info(tp, 7).n["snd_wnd"], ws ? 502u << 7 : 502u);
  }
}

TEST(TcpHandshake, SimultaneousOpen) {
  Active a;
  BuildSpec b;
  b.seq = kPeerIss;
  b.flags = kSyn;
  b.window = 1000;
  b.mss = 1460;
  PeerSeg syn(b, {}, kFlow);
  a.tp.rx_burst({&syn.h, 1}, a.ctx);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kSyn | kAck);
  EXPECT_EQ(out[0].seg.seq, a.iss);  // the same ISS as our SYN
  EXPECT_EQ(a.tp.state(kFlow), State::kSynReceived);
  // The peer's SYN again (its SYN-ACK to us was lost): our SYN-ACK again, once per 500 ms.
  PeerSeg syn2(b, {}, kFlow);
  a.tp.rx_burst({&syn2.h, 1}, a.ctx);
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kSyn | kAck);
  a.tp.rx_burst({&syn2.h, 1}, a.ctx);
  EXPECT_TRUE(a.ctx.take_out().empty());
  // The peer's SYN-ACK repeats its SYN and acknowledges ours (RFC 9293 figure 7): that is the
  // ACK of our SYN. ESTABLISHED, and it is acknowledged with a plain ACK, not our SYN-ACK again
  // (two ends answering SYN-ACKs with SYN-ACKs would do so without end).
  BuildSpec sa;
  sa.seq = kPeerIss;
  sa.ack = a.iss + 1;
  sa.flags = kSyn | kAck;
  sa.window = 1000;
  PeerSeg synack(sa, {}, kFlow);
  a.tp.rx_burst({&synack.h, 1}, a.ctx);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kConnected));
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kAck);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
}

TEST(TcpHandshake, SynRetriesThenTimeout) {
  TcpTransport tp;
  ScriptCtx ctx;
  ctx.at_ms(0);
  const std::vector<Param> p{{"syn_retries", "2"}};
  ASSERT_EQ(tp.connect(kFlow, kTuple, p, ctx), 0);
  ctx.take_out();
  uint64_t t = 0;
  for (int i = 0; i < 2; i++) {
    t += 1000u << i;  // 1 s, then 2 s (RFC 6298 initial RTO, doubled)
    ctx.at_ms(t - 5);
    tp.tick(ctx);
    EXPECT_TRUE(ctx.take_out().empty());
    ctx.at_ms(t + 5);
    tp.tick(ctx);
    auto out = ctx.take_out();
    ASSERT_EQ(out.size(), 1u) << i;
    EXPECT_EQ(out[0].seg.flags, kSyn);
  }
  ctx.at_ms(t + 4000 + 10);
  tp.tick(ctx);
  EXPECT_TRUE(has_event(ctx.take_events(), EventKind::kRefused, -ETIMEDOUT));
  EXPECT_EQ(tp.flow_count(), 0u);
  ASSERT_EQ(ctx.closed.size(), 1u);
}

// ---- RST and SYN rules (RFC 5961) ----

TEST(TcpRst, ExactSequenceResets) {
  Active a;
  a.establish();
  BuildSpec r = a.ack_spec(0, 0);
  r.flags = kRst;
  r.ts = false;
  a.peer(r);
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kClosed, -ECONNRESET));
  EXPECT_EQ(a.tp.flow_count(), 0u);
}

TEST(TcpRst, InWindowButNotExactIsChallenged) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 100000);
  a.ctx.take_out();
  BuildSpec r = a.ack_spec(1000, 0);
  r.flags = kRst;
  auto out = a.peer(r);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags & (kAck | kRst), kAck);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
  EXPECT_EQ(a.tp.counters().challenge_acks, 1u);
}

TEST(TcpRst, OutOfWindowIsIgnored) {
  Active a;
  a.establish();
  BuildSpec r = a.ack_spec(10'000'000, 0);
  r.flags = kRst;
  EXPECT_TRUE(a.peer(r).empty());
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
}

TEST(TcpRst, SynSentRefusedOnlyWhenAckMatches) {
  Active a;
  BuildSpec r;
  r.flags = kRst | kAck;
  r.ack = a.iss + 5;  // acknowledges nothing we sent: ignored
  PeerSeg bad(r, {}, kFlow);
  a.tp.rx_burst({&bad.h, 1}, a.ctx);
  EXPECT_EQ(a.tp.state(kFlow), State::kSynSent);
  r.ack = a.iss + 1;
  PeerSeg good(r, {}, kFlow);
  a.tp.rx_burst({&good.h, 1}, a.ctx);
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kRefused, -ECONNREFUSED));
  EXPECT_EQ(a.tp.flow_count(), 0u);
}

TEST(TcpRst, SynOnEstablishedIsChallenged) {
  Active a;
  a.establish();
  BuildSpec s = a.ack_spec(0, 0);
  s.flags = kSyn;
  auto out = a.peer(s);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags & (kSyn | kRst | kAck), kAck);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
  EXPECT_EQ(a.tp.counters().challenge_acks, 1u);
}

// Two ends that disagree on the sequence space (one was reset by a forged RST and answered a
// forged SYN) must not ACK each other's ACKs forever: a segment we do not accept, without data,
// is answered at most once per 500 ms per flow, as Linux's tcp_invalid_ratelimit. fuzz_tcp_sim
// found the ACK storm (250 000 ACKs in 20 ms).
TEST(TcpRst, AnswersToUnacceptableSegmentsAreRateLimited) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 100000);
  a.ctx.take_out();
  BuildSpec old = a.ack_spec(0, 0);
  old.seq = kPeerIss + 1 - 1000;  // behind the window
  EXPECT_EQ(a.peer(old).size(), 1u);
  EXPECT_TRUE(a.peer(old).empty());
  EXPECT_TRUE(a.peer(a.ack_spec(0, 5000)).empty());  // acknowledges what we never sent
  BuildSpec syn = a.ack_spec(0, 0);
  syn.flags = kSyn;
  EXPECT_TRUE(a.peer(syn).empty());
  EXPECT_EQ(a.tp.counters().acks_rate_limited, 3u);
  // Data is always answered: the sender needs its DSACK.
  EXPECT_EQ(a.peer(old, bytes(100)).size(), 1u);
  a.ctx.at_ms(1000 + 501);
  a.tp.tick(a.ctx);  // what timers send by then (a window update repeated) is not the answer
  a.ctx.take_out();
  EXPECT_EQ(a.peer(a.ack_spec(0, 5000)).size(), 1u);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
}

TEST(TcpRst, AbortSendsRstAndFailsPending) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 4096, 0, 11);
  a.app(ReqKind::kSend, 3000, 0, 12);
  a.ctx.take_out();
  a.ctx.take_events();
  a.app(ReqKind::kAbort);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kRst | kAck);
  auto ev = a.ctx.take_events();
  EXPECT_TRUE(has_event(ev, EventKind::kSendDone, -ECONNABORTED));
  EXPECT_TRUE(has_event(ev, EventKind::kRecvDone, -ECONNABORTED));
  EXPECT_TRUE(has_event(ev, EventKind::kClosed, -ECONNABORTED));
}

TEST(TcpRst, AckOfUnsentDataIsAnsweredAndIgnored) {
  Active a;
  a.establish();
  auto out = a.peer(a.ack_spec(0, 5000));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_acked"], 0u);
}

// ---- timestamps ----

TEST(TcpTimestamps, PawsDropsOldAndAcceptsMissing) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 100000);
  a.ctx.take_out();
  auto d = bytes(100);
  auto out = a.peer(a.ack_spec(0, 0, 500), d);  // ts 500: accepted
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 100u);
  BuildSpec old = a.ack_spec(100, 0, 400);  // an older timestamp: PAWS drops it
  out = a.peer(old, d);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 100u);
  EXPECT_EQ(a.tp.counters().paws_drops, 1u);
  ASSERT_EQ(out.size(), 1u);  // and ACKs
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 101);
  BuildSpec none = a.ack_spec(100, 0);
  none.ts = false;  // no timestamp at all: accepted, as Linux does
  a.peer(none, d);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 200u);
  // The echo is the timestamp of the earliest segment not yet acknowledged (RFC 7323 4.3).
  a.ctx.at_ms(1100);
  a.tp.tick(a.ctx);  // the delayed ACK for the segment without a timestamp
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.ts_ecr, 500u);
  EXPECT_TRUE(a.peer(a.ack_spec(200, 0, 600), d).empty());  // delayed
  out = a.peer(a.ack_spec(300, 0, 700), d);                 // the second segment: ACKed at once
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out.back().seg.ts_ecr, 600u);
}

// ---- receiving: copy path, SACK, DSACK, NIC commands ----

TEST(TcpReceive, OutOfOrderIsSackedAndDuplicatesDsacked) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 10000, 0, 1);
  a.ctx.take_out();
  auto d = bytes(1000);
  // 0..1000 in order, then 2000..3000 past a hole.
  a.peer(a.ack_spec(0, 0), {d.begin(), d.end()});
  auto out = a.peer(a.ack_spec(2000, 0), d);
  ASSERT_EQ(out.size(), 1u);  // out of order: ACKed at once
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1 + 1000);
  ASSERT_EQ(out[0].seg.nsack, 1u);
  EXPECT_EQ(out[0].seg.sack[0].left, kPeerIss + 1 + 2000);
  EXPECT_EQ(out[0].seg.sack[0].right, kPeerIss + 1 + 3000);
  // 4000..5000: the newest block comes first.
  out = a.peer(a.ack_spec(4000, 0), d);
  ASSERT_EQ(out[0].seg.nsack, 2u);
  EXPECT_EQ(out[0].seg.sack[0].left, kPeerIss + 1 + 4000);
  EXPECT_EQ(out[0].seg.sack[1].left, kPeerIss + 1 + 2000);
  // The first 1000 again: a DSACK for it, first.
  out = a.peer(a.ack_spec(0, 0), d);
  ASSERT_GE(out[0].seg.nsack, 1u);
  EXPECT_EQ(out[0].seg.sack[0].left, kPeerIss + 1);
  EXPECT_EQ(out[0].seg.sack[0].right, kPeerIss + 1 + 1000);
  // The hole fills: cumulative ACK jumps to 3000, the NIC cursor follows.
  out = a.peer(a.ack_spec(1000, 0), d);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1 + 3000);
  EXPECT_EQ(a.ctx.cursor, kPeerIss + 1 + 3000);
  ASSERT_EQ(out[0].seg.nsack, 1u);
  EXPECT_EQ(out[0].seg.sack[0].left, kPeerIss + 1 + 4000);
  // The bytes are where the stream says.
  const auto& m = a.ctx.mrs[0];
  for (size_t k = 0; k < 3000; k++)
    ASSERT_EQ(m[k], d[k % 1000]) << k;
  for (size_t k = 4000; k < 5000; k++)
    ASSERT_EQ(m[k], d[k - 4000]) << k;
}

TEST(TcpReceive, BuffersCompleteInOrderAndAreRetiredFromTheNic) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 1500, 0, 21);
  a.app(ReqKind::kRecv, 1500, 4096, 22);
  ASSERT_EQ(a.ctx.posts.size(), 2u);  // the flow is synced: both went to the NIC
  EXPECT_EQ(a.ctx.posts[1].offset, 4096u);
  a.ctx.take_out();
  a.ctx.take_events();
  auto d = bytes(2000);
  a.peer(a.ack_spec(0, 0), d);
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EventKind::kRecvDone);
  EXPECT_EQ(ev[0].wr_id, 21u);
  EXPECT_EQ(ev[0].len, 1500u);
  EXPECT_EQ(ev[1].kind, EventKind::kRecvData);
  EXPECT_EQ(ev[1].len, 2000u);
  EXPECT_EQ(a.ctx.retired, 1u);
  EXPECT_EQ(a.ctx.cursor, kPeerIss + 1 + 2000);
  // The rest of the second buffer lands at 4096 + 500.
  EXPECT_EQ(a.ctx.mrs[0][4096 + 499], d[1999]);
  // FIN: the partial buffer completes with what it holds, the app hears the end.
  BuildSpec fin = a.ack_spec(2000, 0);
  fin.flags |= kFin;
  a.peer(fin);
  ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EventKind::kPeerClosed);
  EXPECT_EQ(ev[1].kind, EventKind::kRecvDone);
  EXPECT_EQ(ev[1].wr_id, 22u);
  EXPECT_EQ(ev[1].len, 500u);
  EXPECT_EQ(a.ctx.retired, 2u);
  EXPECT_EQ(a.tp.state(kFlow), State::kCloseWait);
}

TEST(TcpReceive, WindowFollowsPostedBuffersAndUpdatesWhenTheyArrive) {
  Active a;
  a.establish();
  // No buffers: a zero window; data beyond it is not taken.
  auto out = a.peer(a.ack_spec(0, 0), bytes(100));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.window, 0u);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
  // Posting 1 MB opens the window: an update goes out unasked, scaled by 7.
  a.app(ReqKind::kRecv, 1 << 20);
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.window, (1u << 20) >> 7);
}

// Posted space that is not a multiple of the window scale unit is advertised rounded up (as
// Linux's ALIGN in __tcp_select_window): rounded down, the last bytes of a buffer could never
// be announced and a buffer that completes only when full would wait for them forever.
TEST(TcpReceive, WindowRoundsUpToTheScaleUnitSoABufferCanFill) {
  Active a;
  a.establish();
  a.app(ReqKind::kRecv, 1000, 0, 61);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_GE(uint32_t(out[0].seg.window) << 7, 1000u);
  // 896 bytes (7 units) in: 104 are left, less than one unit, and still announced.
  a.peer(a.ack_spec(0, 0), bytes(896));
  a.ctx.at_ms(1300);  // the delayed ACK
  a.tp.tick(a.ctx);
  out = a.ctx.take_out();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.back().seg.ack, kPeerIss + 1 + 896);
  EXPECT_GE(uint32_t(out.back().seg.window) << 7, 104u);
  // The last 104 bytes (and 24 more the rounding let through, which are not taken) fill it.
  a.peer(a.ack_spec(896, 0), bytes(128));
  bool done = false;
  for (const Event& e : a.ctx.take_events())
    done |= e.kind == EventKind::kRecvDone && e.wr_id == 61 && e.len == 1000;
  EXPECT_TRUE(done);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 1000u);
}

// However the data arrives, the edge our ACKs promise stays within a scale unit of the end of the
// posted buffers. (Keeping an earlier edge by rounding it up moved it up to a unit further with
// every ACK whose sequence number did not end on a unit: past the buffers, where the NIC can place
// nothing, and the peer's segments there went to the copy path or were dropped.)
TEST(TcpReceive, WindowEdgeDoesNotCreepPastThePostedBuffers) {
  Active a;
  a.establish();
  constexpr uint32_t kPosted = 100000;
  a.app(ReqKind::kRecv, kPosted, 0, 62);
  a.ctx.take_out();
  uint32_t at = 0;
  size_t acks = 0;
  for (uint32_t len : {1000u, 1000u, 333u, 1448u, 77u, 1000u, 1448u, 1448u, 901u, 5u}) {
    for (int i = 0; i < 6; i++) {
      for (const Out& o : a.peer(a.ack_spec(at, 0), bytes(len))) {
        const uint32_t edge = o.seg.ack + (uint32_t(o.seg.window) << 7);
        EXPECT_TRUE(seq_lt(edge, kPeerIss + 1 + kPosted + 128))
            << "the edge is " << edge - kPeerIss - 1 - kPosted << " bytes past the buffers";
        acks++;
      }
      at += len;
    }
  }
  EXPECT_GT(acks, 20u);
}

// A window update that reopens a closed window is the only thing a blocked sender waits for:
// lost, the sender would sit until its persist timer (200 ms and more). It goes again after
// max(2 srtt, 1 ms) and once more after twice that, unless the peer's data comes first.
TEST(TcpReceive, ReopenedWindowUpdateIsSentAgainUntilDataArrives) {
  Active a;
  a.establish();
  a.peer(a.ack_spec(0, 0), bytes(100));  // no buffer: a zero window
  a.ctx.at_ns(1'000'000'000);
  a.app(ReqKind::kRecv, 1 << 20);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  const uint16_t open = out[0].seg.window;
  EXPECT_EQ(open, (1u << 20) >> 7);
  auto at = [&](uint64_t us) {
    a.ctx.at_ns(1'000'000'000 + us * 1000);
    a.tp.tick(a.ctx);
    return a.ctx.take_out();
  };
  EXPECT_TRUE(at(900).empty());
  out = at(1100);
  ASSERT_EQ(out.size(), 1u);  // the peer never heard: again
  EXPECT_EQ(out[0].seg.window, open);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
  EXPECT_TRUE(at(2900).empty());
  EXPECT_EQ(at(3200).size(), 1u);  // once more, 2 ms later
  EXPECT_TRUE(at(20000).empty());  // and that was the last
  EXPECT_EQ(a.tp.counters().window_update_repeats, 2u);

  // The next time the window closes and opens, the peer's data answers the update first.
  Active b;
  b.establish();
  b.peer(b.ack_spec(0, 0), bytes(100));
  b.ctx.at_ns(1'000'000'000);
  b.app(ReqKind::kRecv, 4096);
  ASSERT_EQ(b.ctx.take_out().size(), 1u);
  b.ctx.at_ns(1'000'500'000);
  b.peer(b.ack_spec(0, 0), bytes(1000));
  b.ctx.at_ns(1'005'000'000);
  b.tp.tick(b.ctx);
  for (const Out& o : b.ctx.take_out())
    EXPECT_EQ(o.seg.ack, kPeerIss + 1 + 1000) << "only ACKs of the data, no repeated update";
  EXPECT_EQ(b.tp.counters().window_update_repeats, 0u);
}

// Linux probes a zero window with an empty segment one byte behind what we expect (seq =
// SND.UNA - 1): it must be answered, or the peer's FIN never gets through.
TEST(TcpReceive, LinuxZeroWindowProbeIsAnswered) {
  Active a;
  a.establish();
  auto out = a.peer(a.ack_spec(0, 0));  // a pure ACK at RCV.NXT: nothing to say
  EXPECT_TRUE(out.empty());
  out = a.peer(a.ack_spec(uint32_t(-1), 0));  // the probe
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 1);
  EXPECT_EQ(out[0].seg.window, 0u);
}

// Such probes are answered at most once per 500 ms (Linux's tcp_oow_rate_limited): two ends a
// byte out of step (a FIN one of them never sent, forged on the wire) see each other's ACKs as
// probes, and would answer each other without end.
TEST(TcpReceive, ProbeAnswersAreRateLimited) {
  Active a;
  a.establish();
  a.ctx.at_ms(2000);
  EXPECT_EQ(a.peer(a.ack_spec(uint32_t(-1), 0)).size(), 1u);
  for (uint64_t ms = 2001; ms < 2500; ms += 50) {
    a.ctx.at_ms(ms);
    EXPECT_TRUE(a.peer(a.ack_spec(uint32_t(-1), 0)).empty()) << ms;
  }
  EXPECT_EQ(a.tp.counters().acks_rate_limited, 10u);
  a.ctx.at_ms(2501);
  EXPECT_EQ(a.peer(a.ack_spec(uint32_t(-1), 0)).size(), 1u);
}

// ---- sending ----

TEST(TcpSend, SegmentsAreTsoDescriptorsOverAppMemory) {
  Active a;
  a.establish(65535, 7);
  a.app(ReqKind::kSend, 100000, 8192, 31);
  auto out = a.ctx.take_out();
  // The initial window: 10 segments of 1448 (1460 less timestamps).
  uint64_t sent = 0;
  for (const Out& o : out) {
    EXPECT_EQ(o.desc.mr, 0u);
    EXPECT_EQ(o.desc.offset, 8192 + sent);
    EXPECT_EQ(o.seg.seq, a.iss + 1 + sent);
    if (o.desc.len > 1448) {
      EXPECT_EQ(o.desc.mss, 1448u);
    }
    sent += o.desc.len;
  }
  EXPECT_EQ(sent, 10u * 1448);
  // The ACK of all of it completes nothing yet (the send is 100000) but opens the window.
  out = a.peer(a.ack_spec(0, uint32_t(sent)));
  const uint64_t more = payload_of(out);
  EXPECT_GT(more, sent);  // slow start
  EXPECT_TRUE(a.ctx.take_events().empty());
  sent += more;
  while (sent < 100000) {
    out = a.peer(a.ack_spec(0, uint32_t(sent)));
    ASSERT_FALSE(out.empty());
    sent += payload_of(out);
  }
  EXPECT_EQ(sent, 100000u);
  a.peer(a.ack_spec(0, 100000));
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kSendDone);
  EXPECT_EQ(ev[0].wr_id, 31u);
  EXPECT_EQ(ev[0].len, 100000u);
}

// After an RTO the window restarts at one segment and grows by slow start with each ACK of
// the resent data (RFC 5681 3.1), long before the ACKs reach what was outstanding at the RTO.
// (NewReno: its ssthresh is half the flight.)
TEST(TcpSend, SlowStartAfterRtoGrowsBeforeTheOldFlightIsAcked) {
  Active a(std::vector<Param>{{"cc", "newreno"}});
  a.establish(65535, 7);
  a.app(ReqKind::kSend, 1 << 20, 0, 51);
  const uint64_t sent = payload_of(a.ctx.take_out());
  ASSERT_EQ(sent, 10u * 1448);
  // Nothing comes back: a tail loss probe first, then the RTO (the 1 s initial one: no RTT
  // sample yet) resends the first segment with the window collapsed to one.
  std::vector<Out> out;
  for (uint64_t t = 1100; t < 5000 && info(a.tp, kFlow).n["rtos"] == 0; t += 10) {
    a.ctx.at_ms(t);
    a.tp.tick(a.ctx);
    out = a.ctx.take_out();
  }
  ASSERT_EQ(info(a.tp, kFlow).n["rtos"], 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(out[0].desc.len, 1448u);
  EXPECT_EQ(info(a.tp, kFlow).n["cwnd"], 1448u);
  // Each ACK of resent data opens the window by a segment: 2, then 4 segments go out, then up
  // to ssthresh: half of the window at the RTO (10 segments; the probe's new one went beyond it).
  const uint64_t ssthresh = 10ull * 1448 / 2;
  uint32_t acked = 1448;
  for (uint64_t expect : {uint64_t{2 * 1448}, uint64_t{4 * 1448}, ssthresh}) {
    out = a.peer(a.ack_spec(0, acked));
    const uint64_t bytes = payload_of(out);
    EXPECT_EQ(bytes, expect) << "after " << acked << " bytes acknowledged";
    acked += uint32_t(bytes);
  }
  EXPECT_EQ(info(a.tp, kFlow).n["ssthresh"], ssthresh);
  EXPECT_EQ(info(a.tp, kFlow).n["cwnd"], ssthresh);
}

// The peer's window counts from the ACK it came with. A segment that acknowledges new data
// carries the peer's window as of that ACK, even when its sequence number is older than the
// last window update's (the peer resending a segment lost on the way here; RFC 9293's WL1 rule
// alone would keep the old window, and the old window from the new ACK reaches past the peer's
// buffers). As Linux (tcp_may_update_window), an ACK that advances SND.UNA updates the window.
TEST(TcpSend, NeverPastThePeersRightEdge) {
  Active a;
  a.establish(40, 7);  // 40 << 7 = 5120 bytes
  a.app(ReqKind::kRecv, 100000);
  a.app(ReqKind::kSend, 100000, 0, 1);
  const uint64_t sent = payload_of(a.ctx.take_out());
  ASSERT_EQ(sent, 5120u);  // window-limited (the initial cwnd is 10 segments)
  // The peer's data arrives with a hole: its second segment first (a window update, from the
  // higher sequence number), then the first, resent, with an ACK of half of ours and the window
  // that keeps the peer's right edge where it was.
  BuildSpec second = a.ack_spec(1000, 0);
  second.window = 40;
  a.peer(second, std::vector<uint8_t>(1000, 7));
  BuildSpec first = a.ack_spec(0, 2560);
  first.window = 20;
  auto out = a.peer(first, std::vector<uint8_t>(1000, 7));
  for (const Out& o : out) {
    EXPECT_TRUE(seq_leq(o.seg.seq + o.desc.len, a.iss + 1 + 5120))
        << "sent " << o.desc.len << " bytes at " << o.seg.seq - a.iss - 1;
  }
  // The peer's next ACK opens the window: the data goes on.
  BuildSpec more = a.ack_spec(2000, 5120);
  more.window = 40;
  out = a.peer(more);
  EXPECT_EQ(payload_of(out), 5120u);
}

TEST(TcpSend, ZeroWindowProbesCarryOneByte) {
  Active a;
  a.establish(0, 7);  // the peer's window is zero
  a.app(ReqKind::kSend, 5000, 0, 41);
  EXPECT_TRUE(a.ctx.take_out().empty());
  // The persist timer fires after the RTO (the handshake's RTT sample put it at the 200 ms
  // floor): one byte of new data.
  a.ctx.at_ms(1150);
  a.tp.tick(a.ctx);
  EXPECT_TRUE(a.ctx.take_out().empty());
  a.ctx.at_ms(1250);
  a.tp.tick(a.ctx);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].desc.len, 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(a.tp.counters().zero_window_probes, 1u);
  // Still zero: the next probe backs off (400 ms) and resends the same byte.
  BuildSpec closed = a.ack_spec(0, 0);
  closed.window = 0;
  a.peer(closed);
  a.ctx.at_ms(1600);
  a.tp.tick(a.ctx);
  EXPECT_TRUE(a.ctx.take_out().empty());
  a.ctx.at_ms(1700);
  a.tp.tick(a.ctx);
  out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(out[0].desc.len, 1u);
  // Many probes later the connection is still there: a live peer with a closed window is not
  // a dead one.
  for (uint64_t t = 2000; t < 600000; t += 5000) {
    a.ctx.at_ms(t);
    a.tp.tick(a.ctx);
    a.peer(closed);
  }
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
  // The window opens with the probe byte acknowledged: the rest flows, the connection lives.
  BuildSpec open = a.ack_spec(0, 1);
  open.window = 100;
  out = a.peer(open);
  const uint64_t sent = payload_of(out);
  EXPECT_EQ(sent, 4999u);
  EXPECT_EQ(a.tp.state(kFlow), State::kEstablished);
}

// ---- RACK-TLP (RFC 8985) ----

// The peer's ACK of [0, ack) with SACK blocks, offsets from our first data byte.
BuildSpec sack_spec(Active& a, uint32_t ack, std::vector<SackBlock>& blocks) {
  BuildSpec b = a.ack_spec(0, ack);
  for (SackBlock& k : blocks) {
    k.left += a.iss + 1;
    k.right += a.iss + 1;
  }
  b.nsack = uint8_t(blocks.size());
  b.sack = blocks.data();
  return b;
}

// Established with a 10 ms RTT sample (srtt = min_rtt = 10 ms, the RTO at its 200 ms floor).
void establish_10ms(Active& a) {
  a.ctx.at_ms(1010);
  a.establish(65535, 7);
}

std::vector<Out> tick_at(Active& a, uint64_t ms) {
  a.ctx.at_ms(ms);
  a.tp.tick(a.ctx);
  return a.ctx.take_out();
}

constexpr uint32_t kSeg = 1448;

TEST(TcpRack, LostTailIsRecoveredByAProbeNotAnRto) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 10 * kSeg, 0, 1);
  a.ctx.take_out();
  // Eight segments arrive; the last two are lost.
  a.ctx.at_ms(1020);
  a.peer(a.ack_spec(0, 8 * kSeg));
  // PTO = 2 srtt = 20 ms after that ACK: nothing before, then the last segment again.
  EXPECT_TRUE(tick_at(a, 1035).empty());
  auto out = tick_at(a, 1042);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1 + 9 * kSeg);
  EXPECT_EQ(out[0].desc.len, kSeg);
  EXPECT_EQ(info(a.tp, kFlow).n["tlp_probes"], 1u);
  // The probe is SACKed: RACK sees segment 8, sent before it, lost, and resends it at once.
  a.ctx.at_ms(1052);
  std::vector<SackBlock> sb{{9 * kSeg, 10 * kSeg}};
  out = a.peer(sack_spec(a, 8 * kSeg, sb));
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].seg.seq, a.iss + 1 + 8 * kSeg);
  EXPECT_EQ(out[0].desc.len, kSeg);
  a.ctx.at_ms(1062);
  a.peer(a.ack_spec(0, 10 * kSeg));
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kSendDone));
  auto i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["rtos"], 0u);
  EXPECT_EQ(i.n["retransmits"], 2u);
  EXPECT_EQ(a.tp.counters().tlp_probes, 1u);
}

// The highest offset sent so far, after `out` went.
void track(const std::vector<Out>& out, const Active& a, uint32_t& top) {
  for (const Out& o : out) {
    if (o.desc.len != 0) top = std::max(top, o.seg.seq - (a.iss + 1) + o.desc.len);
  }
}

// Whether `out` carries data from offset `off`.
bool sends(const std::vector<Out>& out, const Active& a, uint32_t off) {
  for (const Out& o : out) {
    if (o.seg.seq == a.iss + 1 + off && o.desc.len != 0) return true;
  }
  return false;
}

// Ticks at each ms in [from, to) and returns what went out.
std::vector<Out> ticks(Active& a, uint64_t from, uint64_t to) {
  std::vector<Out> all;
  for (uint64_t t = from; t < to; t++) {
    for (const Out& o : tick_at(a, t))
      all.push_back(o);
  }
  return all;
}

// Segment 0 of the first window (sent at 1010) is missing: at 1020 the peer SACKs segments 1-3.
// Returns what that ACK sent (with no reordering seen, RACK calls 0 lost at once and recovery
// resends it).
std::vector<Out> sack_1_to_3(Active& a) {
  a.ctx.at_ms(1020);
  std::vector<SackBlock> sb{{kSeg, 4 * kSeg}};
  return a.peer(sack_spec(a, 0, sb));
}

// The same, and what went out in the ticks after it up to 1024.
std::vector<Out> lose_segment_0(Active& a) {
  auto out = sack_1_to_3(a);
  for (const Out& o : ticks(a, 1021, 1024))
    out.push_back(o);
  return out;
}

// With SACK, as Linux: until reordering is seen, three SACKed segments above a hole make it a
// loss at once; fewer wait for RACK, a reordering window (min_rtt / 4) past the RTT of what was
// delivered. Once a segment sent once has arrived after later ones, three wait as well.
TEST(TcpRack, ThreeSackedSegmentsAreALossUntilReorderingIsSeen) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 40 * kSeg, 0, 1);
  a.ctx.take_out();  // segments 0-9
  EXPECT_TRUE(sends(sack_1_to_3(a), a, 0));
  EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 1u);
  // The resend fills the hole, which says nothing of reordering: the next hole with three
  // SACKed above it is a loss at once too.
  a.ctx.at_ms(1030);
  a.peer(a.ack_spec(0, 10 * kSeg));
  a.ctx.at_ms(1040);
  std::vector<SackBlock> sb{{11 * kSeg, 14 * kSeg}};
  EXPECT_TRUE(sends(a.peer(sack_spec(a, 10 * kSeg, sb)), a, 10 * kSeg));
  EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 2u);

  // Two SACKed segments wait for RACK; segment 0 only came late: it arrives inside the
  // window, nothing is resent, and that was reordering.
  Active b;
  establish_10ms(b);
  b.app(ReqKind::kSend, 10 * kSeg, 0, 1);
  b.ctx.take_out();
  b.ctx.at_ms(1020);
  sb = {{kSeg, 3 * kSeg}};
  EXPECT_FALSE(sends(b.peer(sack_spec(b, 0, sb)), b, 0));
  b.ctx.at_ms(1021);
  EXPECT_FALSE(sends(b.peer(b.ack_spec(0, 3 * kSeg)), b, 0));
  EXPECT_FALSE(sends(ticks(b, 1022, 1030), b, 0));
  EXPECT_EQ(info(b.tp, kFlow).n["fast_recoveries"], 0u);
  EXPECT_EQ(info(b.tp, kFlow).n["retransmits"], 0u);
  // Now three SACKed segments above segment 3 wait too. Sent at 1010, delivered with RTT
  // 10 ms: lost at 1022.5, past the window.
  b.ctx.at_ms(1031);
  sb = {{4 * kSeg, 7 * kSeg}};
  EXPECT_FALSE(sends(b.peer(sack_spec(b, 3 * kSeg, sb)), b, 3 * kSeg));
  EXPECT_EQ(info(b.tp, kFlow).n["fast_recoveries"], 0u);
}

// A reduction for nothing is undone (Linux's tcp_try_undo_dsack): segment 0 was only late, the
// peer reports the resend of it as a duplicate, and every byte the episode resent is so
// reported: the window and ssthresh come back and recovery ends.
TEST(TcpRack, AResendReportedAsADuplicateUndoesTheReduction) {
  for (const char* cc : {"newreno", "cubic"}) {
    SCOPED_TRACE(cc);
    Active a(std::vector<Param>{{"cc", cc}});
    establish_10ms(a);
    a.app(ReqKind::kSend, 40 * kSeg, 0, 1);
    a.ctx.take_out();  // segments 0-9
    const uint64_t cwnd = info(a.tp, kFlow).n["cwnd"];
    ASSERT_TRUE(sends(sack_1_to_3(a), a, 0));
    auto i = info(a.tp, kFlow);
    ASSERT_EQ(i.n["fast_recoveries"], 1u);
    ASSERT_LT(i.n["cwnd"], cwnd);
    ASSERT_EQ(i.t["ca_state"], "recovery");
    // The original arrives, then the resend: a DSACK of segment 0.
    a.ctx.at_ms(1021);
    a.peer(a.ack_spec(0, 10 * kSeg));
    ASSERT_EQ(info(a.tp, kFlow).n["undos"], 0u);
    a.ctx.at_ms(1030);
    std::vector<SackBlock> sb{{0, kSeg}};
    a.peer(sack_spec(a, 10 * kSeg, sb));
    i = info(a.tp, kFlow);
    EXPECT_EQ(i.n["undos"], 1u);
    EXPECT_GE(i.n["cwnd"], cwnd);
    EXPECT_EQ(i.n.count("ssthresh"), 0u) << "ssthresh is back to infinite";
    EXPECT_EQ(i.t["ca_state"], "open");
  }
}

// A resend that repaired a loss draws no DSACK: nothing is undone.
TEST(TcpRack, ARepairedLossIsNotUndone) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 40 * kSeg, 0, 1);
  a.ctx.take_out();
  ASSERT_TRUE(sends(sack_1_to_3(a), a, 0));
  const uint64_t ssthresh = info(a.tp, kFlow).n["ssthresh"];
  a.ctx.at_ms(1030);
  a.peer(a.ack_spec(0, 10 * kSeg));
  auto i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["undos"], 0u);
  EXPECT_EQ(i.n["ssthresh"], ssthresh);
}

// Sent at 1010, segments 1-3 delivered with RTT 10 ms: once reordering was seen, segment 0 is
// lost a reordering window later, not at once.
TEST(TcpRack, AfterReorderingAHoleWaitsForRacksWindow) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 10 * kSeg, 0, 1);
  a.ctx.take_out();
  a.ctx.at_ms(1020);
  // A DSACK of segment 1 (sent once: the wire duplicated it) says the path reorders, and
  // widens the window to 2 x min_rtt / 4: lost at 1025.
  std::vector<SackBlock> sb{{kSeg, 2 * kSeg}, {kSeg, 4 * kSeg}};
  EXPECT_FALSE(sends(a.peer(sack_spec(a, 0, sb)), a, 0));
  EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 0u);
  EXPECT_FALSE(sends(ticks(a, 1021, 1024), a, 0));
  EXPECT_TRUE(sends(ticks(a, 1025, 1026), a, 0));
  EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 1u);
}

TEST(TcpRack, LostRetransmissionIsResentWithoutAnRto) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 40 * kSeg, 0, 1);
  uint32_t top = 0;
  track(a.ctx.take_out(), a, top);  // the initial window: segments 0-9
  auto out = lose_segment_0(a);
  ASSERT_TRUE(sends(out, a, 0));
  track(out, a, top);
  EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 1u);
  // The rest of the window arrives, and the room it leaves goes to new data, sent after the
  // retransmission.
  a.ctx.at_ms(1025);
  std::vector<SackBlock> sb{{kSeg, top}};
  const uint32_t before = top;
  track(a.peer(sack_spec(a, 0, sb)), a, top);
  ASSERT_GT(top, before);
  // That new data is SACKed, but the retransmission of segment 0 is lost too. RACK resends it
  // at once (in recovery, with no reordering seen, its window is 0): long before the RTO.
  a.ctx.at_ms(1035);
  sb = {{kSeg, top}};
  out = a.peer(sack_spec(a, 0, sb));
  EXPECT_TRUE(sends(out, a, 0));
  track(out, a, top);
  auto i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["rtos"], 0u);
  EXPECT_EQ(i.n["fast_recoveries"], 1u);
  EXPECT_GE(i.n["rack_losses"], 1u);
  a.ctx.at_ms(1055);
  a.peer(a.ack_spec(0, top));
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 0u);
}

// In recovery the ACK clock can stop: the retransmission is lost and nothing sent after it
// can be SACKed to show it. The probe timeout still runs there, so a probe (here the last
// segment again: there is no new data) draws an ACK, RACK sees the retransmission sent before
// the probe lost, and resends it: no RTO.
TEST(TcpRack, ProbeInRecoveryFindsALostRetransmission) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 10 * kSeg, 0, 1);
  a.ctx.take_out();
  ASSERT_TRUE(sends(lose_segment_0(a), a, 0));  // segment 0 again; that copy is lost too
  a.ctx.at_ms(1024);
  std::vector<SackBlock> sb{{kSeg, 10 * kSeg}};
  a.peer(sack_spec(a, 0, sb));
  // Nothing more comes back. About 2 srtt later, long before the RTO, the probe goes.
  std::vector<Out> probe;
  uint64_t t = 1025;
  for (; t < 1250 && probe.empty(); t++)
    probe = tick_at(a, t);
  ASSERT_FALSE(probe.empty());
  EXPECT_LT(t, 1060u);
  EXPECT_EQ(info(a.tp, kFlow).n["tlp_probes"], 1u);
  // Its ACK (a duplicate: the DSACK) makes RACK resend segment 0 once the reordering window
  // past its RTT has gone by.
  a.ctx.at_ms(t + 10);
  sb = {{9 * kSeg, 10 * kSeg}, {kSeg, 10 * kSeg}};
  auto out = a.peer(sack_spec(a, 0, sb));
  for (const Out& o : ticks(a, t + 11, t + 20))
    out.push_back(o);
  EXPECT_TRUE(sends(out, a, 0));
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 0u);
}

// One window reduction per loss episode (RFC 5681 3.1, RFC 6582; Linux's tcp_enter_loss): an RTO
// that fires in fast recovery collapses the window to one segment but keeps the ssthresh the
// recovery set, instead of halving again a flight that recovery has already emptied.
TEST(TcpRack, AnRtoInRecoveryKeepsTheRecoverysSsthresh) {
  for (const char* cc : {"newreno", "cubic"}) {
    SCOPED_TRACE(cc);
    Active a(std::vector<Param>{{"cc", cc}});
    establish_10ms(a);
    a.app(ReqKind::kSend, 10 * kSeg, 0, 1);
    a.ctx.take_out();
    ASSERT_TRUE(sends(lose_segment_0(a), a, 0));  // recovery; this copy of segment 0 is lost too
    const uint64_t ssthresh = info(a.tp, kFlow).n["ssthresh"];
    ASSERT_GT(ssthresh, 2u * kSeg);
    a.ctx.at_ms(1024);
    std::vector<SackBlock> sb{{kSeg, 10 * kSeg}};
    a.peer(sack_spec(a, 0, sb));
    // Nothing more comes back (the probe is lost too) until the RTO.
    for (uint64_t t = 1025; t < 2000 && info(a.tp, kFlow).n["rtos"] == 0; t++)
      tick_at(a, t);
    auto i = info(a.tp, kFlow);
    ASSERT_EQ(i.n["rtos"], 1u);
    EXPECT_EQ(i.n["cwnd"], kSeg);
    EXPECT_EQ(i.n["ssthresh"], ssthresh);
  }
}

// An RTO of a segment the RTO already resent keeps ssthresh (RFC 5681 3.1, Linux): the second
// timeout says nothing new about the window, and halving the one-segment window it left would
// put ssthresh at its 2 MSS floor.
TEST(TcpSend, ABackedOffRtoKeepsSsthresh) {
  for (const char* cc : {"newreno", "cubic"}) {
    SCOPED_TRACE(cc);
    Active a(std::vector<Param>{{"cc", cc}});
    establish_10ms(a);
    a.app(ReqKind::kSend, 1 << 20, 0, 51);
    a.ctx.take_out();
    uint64_t t = 1011;
    for (; t < 5000 && info(a.tp, kFlow).n["rtos"] == 0; t++)
      tick_at(a, t);
    ASSERT_EQ(info(a.tp, kFlow).n["rtos"], 1u);
    const uint64_t ssthresh = info(a.tp, kFlow).n["ssthresh"];
    EXPECT_GE(ssthresh, 5u * kSeg);
    // The resent segment is lost too: the RTO again, backed off.
    for (; t < 5000 && info(a.tp, kFlow).n["rtos"] == 1; t++)
      tick_at(a, t);
    auto i = info(a.tp, kFlow);
    ASSERT_EQ(i.n["rtos"], 2u);
    EXPECT_EQ(i.n["cwnd"], kSeg);
    EXPECT_EQ(i.n["ssthresh"], ssthresh);
  }
}

// An RTO for a delay, not a loss (RFC 3522, RFC 4015; Linux's tcp_try_undo_loss): the first ACK
// after it echoes the timestamp of an original, sent before the RTO. The window comes back, and
// the originals still in flight are not sent again. An ACK that echoes the resend's timestamp
// says the resend repaired a loss: nothing is undone and the RTO's resending goes on.
TEST(TcpSend, ASpuriousRtoIsUndone) {
  for (const char* cc : {"newreno", "cubic"}) {
    for (bool spurious : {true, false}) {
      SCOPED_TRACE(std::string(cc) + (spurious ? " spurious" : " a loss"));
      Active a(std::vector<Param>{{"cc", cc}});
      establish_10ms(a);
      a.app(ReqKind::kSend, 10 * kSeg, 0, 1);
      a.ctx.take_out();  // segments 0-9, stamped 1010
      const uint64_t cwnd = info(a.tp, kFlow).n["cwnd"];
      uint64_t t = 1011;
      for (; t < 5000 && info(a.tp, kFlow).n["rtos"] == 0; t++)
        tick_at(a, t);
      ASSERT_EQ(info(a.tp, kFlow).n["rtos"], 1u);
      ASSERT_EQ(info(a.tp, kFlow).t["ca_state"], "loss");
      // Segments 0-4 acknowledged, echoing the originals' timestamp or the resend's.
      a.ctx.at_ms(t + 5);
      BuildSpec ack = a.ack_spec(0, 5 * kSeg);
      ack.ts_ecr = spurious ? 1010 : uint32_t(t - 1);
      auto out = a.peer(ack);
      auto i = info(a.tp, kFlow);
      if (spurious) {
        EXPECT_EQ(i.n["undos"], 1u);
        EXPECT_GE(i.n["cwnd"], cwnd);
        EXPECT_EQ(i.n.count("ssthresh"), 0u) << "ssthresh is back to infinite";
        EXPECT_EQ(i.t["ca_state"], "open");
        for (uint32_t seg = 5; seg < 10; seg++)
          EXPECT_FALSE(sends(out, a, seg * kSeg)) << "segment " << seg << " resent";
      } else {
        EXPECT_EQ(i.n["undos"], 0u);
        EXPECT_LT(i.n["cwnd"], cwnd);
        EXPECT_TRUE(sends(out, a, 5 * kSeg)) << "slow start resends from snd_una";
      }
    }
  }
}

// On a path that reorders, in recovery a second hole with less than DupThreshold segments
// SACKed above it may only be reordering (RFC 6675 IsLost): NextSeg leaves it though the window
// has room, and RACK resends it once the reordering window past its RTT has gone by without it.
TEST(TcpRack, AHoleWithFewSackedAboveWaitsForRack) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, 60 * kSeg, 0, 1);
  a.ctx.take_out();  // segments 0-9
  a.ctx.at_ms(1019);
  std::vector<SackBlock> early{{kSeg, 3 * kSeg}};
  a.peer(sack_spec(a, 0, early));  // segment 0 is late (slow start: 10 and 11 go)...
  a.ctx.at_ms(1020);
  a.peer(a.ack_spec(0, 10 * kSeg));  // ...and arrives, never resent: reordering. 12-29 go
  // Segment 10 is lost: RACK's recovery resends it.
  a.ctx.at_ms(1030);
  std::vector<SackBlock> sb{{11 * kSeg, 14 * kSeg}};
  a.peer(sack_spec(a, 10 * kSeg, sb));
  ASSERT_TRUE(sends(ticks(a, 1031, 1034), a, 10 * kSeg));
  // All but 27 and 29 arrive: 27 has one segment above it, and the window has room.
  a.ctx.at_ms(1034);
  sb = {{11 * kSeg, 27 * kSeg}, {28 * kSeg, 29 * kSeg}};
  auto out = a.peer(sack_spec(a, 10 * kSeg, sb));
  EXPECT_FALSE(out.empty()) << "the room goes to new data";
  EXPECT_FALSE(sends(out, a, 27 * kSeg)) << "resent before it could be called lost";
  // RACK: 27 left with 28 at 1020, which was delivered 14 ms later; window 2.5 ms.
  EXPECT_FALSE(sends(tick_at(a, 1036), a, 27 * kSeg));
  EXPECT_TRUE(sends(ticks(a, 1037, 1040), a, 27 * kSeg));
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 0u);
}

TEST(TcpRack, ReorderingWithinTheWindowIsNotALoss) {
  Active a;
  establish_10ms(a);
  // Two segments, sent 1 ms apart.
  a.app(ReqKind::kSend, kSeg, 0, 1);
  a.ctx.at_ms(1011);
  a.app(ReqKind::kSend, kSeg, kSeg, 2);
  EXPECT_EQ(a.ctx.take_out().size(), 2u);
  // The second arrives first (its ACK 10 ms after it left); the first 1 ms later, inside
  // RACK's window (10 ms + min_rtt / 4 = 12.5 ms after it left).
  a.ctx.at_ms(1021);
  std::vector<SackBlock> sb{{kSeg, 2 * kSeg}};
  EXPECT_TRUE(a.peer(sack_spec(a, 0, sb)).empty());
  a.ctx.at_ms(1022);
  EXPECT_TRUE(a.peer(a.ack_spec(0, 2 * kSeg)).empty());
  EXPECT_TRUE(tick_at(a, 1100).empty());
  auto i = info(a.tp, kFlow);
  EXPECT_EQ(i.n["retransmits"], 0u);
  EXPECT_EQ(i.n["rack_losses"], 0u);
  EXPECT_EQ(i.n["fast_recoveries"], 0u);
}

TEST(TcpRack, ReorderingBeyondTheWindowIsALoss) {
  Active a;
  establish_10ms(a);
  a.app(ReqKind::kSend, kSeg, 0, 1);
  a.ctx.at_ms(1011);
  a.app(ReqKind::kSend, kSeg, kSeg, 2);
  a.ctx.take_out();
  a.ctx.at_ms(1021);
  std::vector<SackBlock> sb{{kSeg, 2 * kSeg}};
  EXPECT_TRUE(a.peer(sack_spec(a, 0, sb)).empty());
  // The reordering timer: the first segment goes again 12.5 ms after it left.
  auto out = tick_at(a, 1024);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(info(a.tp, kFlow).n["rack_losses"], 1u);
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 0u);
}

TEST(TcpRack, OneSegmentInFlightWaitsForTheDelayedAck) {
  Active a(std::vector<Param>{{"rto_min_ms", "1000"}});
  establish_10ms(a);
  a.app(ReqKind::kSend, 1000, 0, 1);
  a.ctx.take_out();
  // Not at 2 srtt (20 ms): the peer may be holding its ACK. At 2 srtt + 200 ms, a probe.
  EXPECT_TRUE(tick_at(a, 1040).empty());
  EXPECT_TRUE(tick_at(a, 1225).empty());
  auto out = tick_at(a, 1232);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1);
  EXPECT_EQ(out[0].desc.len, 1000u);
  EXPECT_EQ(info(a.tp, kFlow).n["tlp_probes"], 1u);
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 0u);
}

TEST(TcpRack, TwoSegmentsInFlightProbeAtTwiceSrtt) {
  Active a(std::vector<Param>{{"rto_min_ms", "1000"}});
  establish_10ms(a);
  a.app(ReqKind::kSend, 2 * kSeg, 0, 1);
  a.ctx.take_out();
  EXPECT_TRUE(tick_at(a, 1028).empty());
  auto out = tick_at(a, 1032);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.seq, a.iss + 1 + kSeg);
}

TEST(TcpRack, WithoutSackTheRtoRecovers) {
  Active a;
  a.ctx.at_ms(1010);
  BuildSpec b;
  b.window = 65535;
  b.mss = 1460;
  b.ts = true;
  b.ts_val = 100;
  b.wscale_opt = true;
  b.wscale = 7;
  a.synack(b);
  a.app(ReqKind::kSend, 2 * kSeg, 0, 1);
  a.ctx.take_out();
  EXPECT_TRUE(tick_at(a, 1100).empty());  // no probe without SACK
  EXPECT_FALSE(tick_at(a, 1215).empty());
  EXPECT_EQ(info(a.tp, kFlow).n["rtos"], 1u);
  EXPECT_EQ(info(a.tp, kFlow).n["tlp_probes"], 0u);
}

// ---- runs of in-order data: one pass through the receive path (rx_burst, run_length) ----

// A segment of a burst from the peer: its header, payload bytes and what the NIC made of them.
struct BurstSeg {
  BuildSpec b;
  uint32_t len = 0;
  Placed placed = Placed::kPlaced;
  Csum csum = Csum::kGood;
  uint8_t ecn = 0;
};

// A data segment at offset `off` of the peer's stream, `len` bytes, acknowledging our `ack`.
BurstSeg data_seg(Active& a, uint32_t off, uint32_t len, uint32_t ack = 0, uint32_t ts = 200) {
  return {a.ack_spec(off, ack, ts), len};
}

// Everything the app, the NIC and the peer can see of the connection, and every counter but
// segs_merged, as text.
std::string seen(Active& a) {
  std::string s;
  for (const Out& o : a.ctx.take_out()) {
    s += "out len=" + std::to_string(o.desc.len) + " off=" + std::to_string(o.desc.offset) +
         " mss=" + std::to_string(o.desc.mss) + " ecn=" + std::to_string(o.desc.ecn) + " l4=";
    for (size_t i = 0; i < o.desc.l4_len; i++)
      s += std::to_string(o.desc.l4[i]) + ",";
    s += "\n";
  }
  for (const Event& e : a.ctx.take_events()) {
    s += "event " + std::to_string(int(e.kind)) + " " + std::to_string(e.status) + " " +
         std::to_string(e.len) + " " + std::to_string(e.aux) + " " + std::to_string(e.wr_id) + "\n";
  }
  s += "cursor " + std::to_string(a.ctx.cursor) + " " + std::to_string(a.ctx.cursor_updates) +
       " retired " + std::to_string(a.ctx.retired) + " posts " +
       std::to_string(a.ctx.posts.size()) + "\n";
  uint64_t sum = 0;
  for (uint8_t b : a.ctx.mrs[0])
    sum = sum * 31 + b;
  s += "memory " + std::to_string(sum) + "\n";
  Info c;
  a.tp.stats(c);
  for (const auto& [k, v] : c.n)
    if (k != "segs_merged") s += k + "=" + std::to_string(v) + " ";
  s += "\n";
  Info f;
  if (a.tp.flow_info(kFlow, f)) {
    for (const auto& [k, v] : f.n)
      s.append(k).append("=").append(std::to_string(v)).append(" ");
    for (const auto& [k, v] : f.t)
      s.append(k).append("=").append(v).append(" ");
  }
  return s + "\n";
}

// One burst from the peer; returns what it showed.
std::string burst(Active& a, const std::vector<BurstSeg>& segs) {
  std::vector<std::unique_ptr<PeerSeg>> held;
  std::vector<RxHeader> hs;
  for (size_t i = 0; i < segs.size(); i++) {
    const BurstSeg& g = segs[i];
    held.push_back(std::make_unique<PeerSeg>(g.b, bytes(g.len, uint8_t(i)), kFlow, g.ecn));
    RxHeader& h = held.back()->h;
    h.placed = g.len == 0 ? Placed::kNoPayload : g.placed;
    if (h.placed != Placed::kDeferred) h.payload = nullptr;
    h.l4_csum = g.csum;
    hs.push_back(h);
  }
  a.tp.rx_burst(hs, a.ctx);
  return seen(a);
}

// Runs `script` on a connection that merges runs and on one that takes every segment alone: both
// must show the same. Returns the first one's segs_merged. `rtt_10ms`: established as
// establish_10ms() does.
template <typename Script>
uint64_t merged_and_same(Script script, bool rtt_10ms = false) {
  std::string log[2];
  uint64_t merged[2] = {0, 0};
  for (int m = 0; m < 2; m++) {
    Active a(std::vector<Param>{{"isn", "5000"}});  // the same ISS both times
    a.tp.set_merge_runs(m == 0);
    if (rtt_10ms) {
      establish_10ms(a);
    } else {
      a.establish();
    }
    log[m] = script(a);
    merged[m] = a.tp.counters().segs_merged;
  }
  EXPECT_EQ(log[0], log[1]);
  EXPECT_EQ(merged[1], 0u);
  return merged[0];
}

TEST(TcpReceiveRun, InOrderSegmentsOfABurstAreOnePassWithTheSameOutcome) {
  uint64_t segs_in = 0;
  const uint64_t merged = merged_and_same([&](Active& a) {
    a.app(ReqKind::kRecv, 6000, 0, 1);
    a.app(ReqKind::kRecv, 6000, 8192, 2);
    std::string s = seen(a);
    std::vector<BurstSeg> segs;
    for (uint32_t i = 0; i < 8; i++)
      segs.push_back(data_seg(a, i * 1000, 1000));
    segs[3].b.flags |= kPsh;  // PSH does not break a run
    const uint64_t before = a.tp.counters().segs_in;
    s += burst(a, segs);
    segs_in = a.tp.counters().segs_in - before;
    // One ACK for all of it, the cursor at its end, the first buffer complete.
    auto i = info(a.tp, kFlow);
    EXPECT_EQ(i.n["bytes_received"], 8000u);
    EXPECT_EQ(a.ctx.cursor, kPeerIss + 1 + 8000);
    EXPECT_EQ(a.ctx.retired, 1u);
    return s;
  });
  EXPECT_EQ(merged, 7u);
  EXPECT_EQ(segs_in, 8u);  // wire segments, merged or not
}

TEST(TcpReceiveRun, OneSegmentAndAnOddCountAreAckedAsAlone) {
  // RFC 5681 4.2: an ACK at least every second segment; a run counts each of its segments.
  for (uint32_t n : {1u, 2u, 3u}) {
    merged_and_same([&](Active& a) {
      a.app(ReqKind::kRecv, 60000, 0, 1);
      std::string s = seen(a);
      std::vector<BurstSeg> segs;
      for (uint32_t i = 0; i < n; i++)
        segs.push_back(data_seg(a, i * 1448, 1448));
      s += burst(a, segs);
      a.ctx.at_ms(1100);
      a.tp.tick(a.ctx);  // the delayed ACK, if one was left
      return s + seen(a);
    });
  }
}

TEST(TcpReceiveRun, AHoleADuplicateAndAFinBreakTheRun) {
  // 0-2 in order, 3 missing, 4-5 beyond the hole: one run of three, then each alone.
  EXPECT_EQ(merged_and_same([&](Active& a) {
              a.app(ReqKind::kRecv, 20000, 0, 1);
              std::string s = seen(a);
              s += burst(a, {data_seg(a, 0, 1000), data_seg(a, 1000, 1000), data_seg(a, 2000, 1000),
                             data_seg(a, 4000, 1000), data_seg(a, 5000, 1000)});
              // The hole fills, with more behind it: the filler goes alone (out-of-order data
              // is held), then what follows is a run again.
              s += burst(a, {data_seg(a, 3000, 1000), data_seg(a, 6000, 1000),
                             data_seg(a, 7000, 1000), data_seg(a, 8000, 1000)});
              return s;
            }),
            2u + 2u);
  // Resent segments fill a hole and run on over data held beyond it: that part is a duplicate
  // (DSACK) once the hole is filled, so nothing is a run while data is held out of order.
  EXPECT_EQ(
      merged_and_same([&](Active& a) {
        a.app(ReqKind::kRecv, 20000, 0, 1);
        std::string s = seen(a);
        s += burst(a, {data_seg(a, 0, 1000), data_seg(a, 2000, 1000)});
        s += burst(a, {data_seg(a, 1000, 1000), data_seg(a, 2000, 1000), data_seg(a, 3000, 1000)});
        return s;
      }),
      0u);
  // A duplicate inside a burst: DSACKed; the run before it and the one after it are runs.
  EXPECT_EQ(merged_and_same([&](Active& a) {
              a.app(ReqKind::kRecv, 20000, 0, 1);
              std::string s = seen(a);
              s += burst(a, {data_seg(a, 0, 1000), data_seg(a, 1000, 1000), data_seg(a, 1000, 1000),
                             data_seg(a, 2000, 1000), data_seg(a, 3000, 1000)});
              EXPECT_GT(info(a.tp, kFlow).n["dup_bytes"], 0u);
              return s;
            }),
            2u);
  // A FIN ends the stream: the data before it is a run, the FIN goes alone.
  EXPECT_EQ(merged_and_same([&](Active& a) {
              a.app(ReqKind::kRecv, 20000, 0, 1);
              std::string s = seen(a);
              BurstSeg fin = data_seg(a, 3000, 1000);
              fin.b.flags |= kFin;
              s += burst(a, {data_seg(a, 0, 1000), data_seg(a, 1000, 1000), data_seg(a, 2000, 1000),
                             fin, data_seg(a, 4001, 0)});
              EXPECT_EQ(a.tp.state(kFlow), State::kCloseWait);
              return s;
            }),
            2u);
}

TEST(TcpReceiveRun, AnythingUnusualGoesAlone) {
  // Each case changes segment 2 of five in-order ones: segments 0-1 are a run, 2 goes alone,
  // and 3-4 are a run again when 2 was taken (2 merged), not when it was dropped (1).
  struct Case {
    const char* what;
    std::function<void(BurstSeg&)> change;
    uint64_t merged;
  };
  const std::vector<Case> cases{
      {"a newer timestamp", [](BurstSeg& g) { g.b.ts_val = 201; }, 2},
      {"an older timestamp (PAWS)", [](BurstSeg& g) { g.b.ts_val = 150; }, 1},
      {"another echo", [](BurstSeg& g) { g.b.ts_ecr = 7; }, 2},
      {"no timestamps", [](BurstSeg& g) { g.b.ts = false; }, 2},
      {"another window", [](BurstSeg& g) { g.b.window = 500; }, 2},
      {"URG", [](BurstSeg& g) { g.b.flags |= kUrg; }, 2},
      {"CWR", [](BurstSeg& g) { g.b.flags |= kCwr; }, 2},
      {"a bad checksum", [](BurstSeg& g) { g.csum = Csum::kBad; }, 1},
      {"copied, not placed", [](BurstSeg& g) { g.placed = Placed::kDeferred; }, 2},
      {"trimmed", [](BurstSeg& g) { g.placed = Placed::kTrimmed; }, 2},
      {"dropped by the NIC", [](BurstSeg& g) { g.placed = Placed::kDropped; }, 1},
      {"CE", [](BurstSeg& g) { g.ecn = 3; }, 2},
      {"a DSACK block",
       [](BurstSeg& g) {
         static std::vector<SackBlock> d{{0, 0}};
         g.b.nsack = 1;
         g.b.sack = d.data();
       },
       2},
      {"no ACK", [](BurstSeg& g) { g.b.flags = 0; }, 1},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    const uint64_t merged = merged_and_same([&](Active& a) {
      a.app(ReqKind::kRecv, 20000, 0, 1);
      std::string s = seen(a);
      std::vector<BurstSeg> segs;
      for (uint32_t i = 0; i < 5; i++)
        segs.push_back(data_seg(a, i * 1000, 1000));
      k.change(segs[2]);
      return s + burst(a, segs);
    });
    EXPECT_EQ(merged, k.merged);
  }
}

TEST(TcpReceiveRun, WhatTheFirstSegmentFailsEveryOneFails) {
  // Checks made on the run's first segment hold for all of it; where they fail, each segment is
  // refused and counted on its own.
  struct Case {
    const char* what;
    std::function<void(BurstSeg&)> change;
  };
  const std::vector<Case> cases{
      {"PAWS", [](BurstSeg& g) { g.b.ts_val = 50; }},
      {"an ACK of data never sent", [](BurstSeg& g) { g.b.ack += 100000; }},
      {"an ACK far below SND.UNA", [](BurstSeg& g) { g.b.ack -= 1u << 30; }},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    EXPECT_EQ(merged_and_same([&](Active& a) {
                a.app(ReqKind::kRecv, 20000, 0, 1);
                std::string s = seen(a);
                std::vector<BurstSeg> segs;
                for (uint32_t i = 0; i < 4; i++) {
                  segs.push_back(data_seg(a, i * 1000, 1000));
                  k.change(segs.back());
                }
                return s + burst(a, segs);
              }),
              0u);
  }
}

TEST(TcpReceiveRun, TheWindowUpdateIsTheLastSegmentsAfterARun) {
  // RFC 9293 3.10.7.4: a segment older than the last window update (SND.WL1) does not update the
  // window. After a run, that is the run's last segment, not its first: a resent segment from
  // inside the run with another window and no new ACK keeps the window as it was.
  merged_and_same([&](Active& a) {
    a.app(ReqKind::kRecv, 20000, 0, 1);
    std::string s = seen(a);
    std::vector<BurstSeg> segs;
    for (uint32_t i = 0; i < 5; i++)
      segs.push_back(data_seg(a, i * 1000, 1000));
    s += burst(a, segs);
    BurstSeg again = data_seg(a, 3500, 2000);
    again.b.window = 300;
    s += burst(a, {again});
    EXPECT_EQ(info(a.tp, kFlow).n["snd_wnd"], 512u << 7);
    return s;
  });
}

TEST(TcpReceiveRun, PastThePostedBuffersTheRestIsCountedAsAlone) {
  EXPECT_EQ(merged_and_same([&](Active& a) {
              a.app(ReqKind::kRecv, 2500, 0, 1);
              std::string s = seen(a);
              std::vector<BurstSeg> segs;
              for (uint32_t i = 0; i < 5; i++)
                segs.push_back(data_seg(a, i * 1000, 1000));
              s += burst(a, segs);
              EXPECT_EQ(info(a.tp, kFlow).n["bytes_received"], 2500u);
              EXPECT_EQ(a.tp.counters().out_of_window, 2u);
              return s;
            }),
            1u);
}

TEST(TcpReceiveRun, AMovingAckIsTakenSegmentBySegment) {
  // We send too: the peer's data acknowledges more with each segment. Each ACK counts for
  // congestion control and RACK, so none of them is a run.
  EXPECT_EQ(merged_and_same(
                [&](Active& a) {
                  a.app(ReqKind::kRecv, 20000, 0, 1);
                  a.app(ReqKind::kSend, 8 * kSeg, 0, 2);
                  std::string s = seen(a);
                  a.ctx.at_ms(1020);
                  std::vector<BurstSeg> segs;
                  for (uint32_t i = 0; i < 4; i++)
                    segs.push_back(data_seg(a, i * 1000, 1000, (i + 1) * kSeg));
                  segs.push_back(data_seg(a, 4000, 1000, 4 * kSeg));  // the same ACK: a run of two
                  s += burst(a, segs);
                  EXPECT_GT(a.tp.counters().placed_bytes, 0u);
                  return s;
                },
                true),
            1u);
}

TEST(TcpReceiveRun, AnOutstandingProbeIsSettledAsSegmentBySegment) {
  // A tail loss probe resent the last segment; the original's ACK reaches the probe's end,
  // riding on a run of the peer's data. Taken one by one, the second segment (no progress, the
  // ACK at the probe's end) says both copies arrived: no loss. A later ACK must not reduce the
  // window for it.
  merged_and_same(
      [&](Active& a) {
        a.app(ReqKind::kRecv, 20000, 0, 1);
        a.app(ReqKind::kSend, 10 * kSeg, 0, 2);
        std::string s = seen(a);
        a.ctx.at_ms(1020);
        s += burst(a, {data_seg(a, 0, 0, 8 * kSeg)});
        a.ctx.at_ms(1042);
        a.tp.tick(a.ctx);
        s += seen(a);
        EXPECT_EQ(a.tp.counters().tlp_probes, 1u);
        a.ctx.at_ms(1050);
        s += burst(a, {data_seg(a, 0, 1000, 10 * kSeg), data_seg(a, 1000, 1000, 10 * kSeg)});
        a.app(ReqKind::kSend, 4 * kSeg, 0, 3);
        s += seen(a);
        a.ctx.at_ms(1060);
        s += burst(a, {data_seg(a, 2000, 0, 14 * kSeg)});
        EXPECT_EQ(info(a.tp, kFlow).n["fast_recoveries"], 0u);
        return s;
      },
      true);
}

TEST(TcpReceiveRun, ARunAcrossTheSequenceWrapIsOnePass) {
  // The peer's sequence numbers wrap inside the run.
  TcpTransport tp;
  ScriptCtx ctx;
  ctx.at_ms(1000);
  ASSERT_EQ(tp.connect(kFlow, kTuple, {}, ctx), 0);
  const uint32_t iss = ctx.take_out()[0].seg.seq;
  const uint32_t peer_iss = 0xFFFFFFFFu - 2500;
  PeerSeg syn(linux_synack(iss, peer_iss), {}, kFlow);
  tp.rx_burst({&syn.h, 1}, ctx);
  AppRequest r{kFlow, ReqKind::kRecv, 0, 10000, 0, 1, 0};
  tp.app_burst({&r, 1}, ctx);
  ctx.take_out();
  std::vector<std::unique_ptr<PeerSeg>> held;
  std::vector<RxHeader> hs;
  for (uint32_t i = 0; i < 5; i++) {
    BuildSpec d;
    d.seq = peer_iss + 1 + i * 1000;
    d.ack = iss + 1;
    d.flags = kAck;
    d.window = 512;
    d.ts = true;
    d.ts_val = 101;
    held.push_back(std::make_unique<PeerSeg>(d, bytes(1000), kFlow));
    held.back()->h.placed = Placed::kPlaced;
    held.back()->h.payload = nullptr;
    hs.push_back(held.back()->h);
  }
  tp.rx_burst(hs, ctx);
  EXPECT_EQ(tp.counters().segs_merged, 4u);
  EXPECT_EQ(ctx.cursor, peer_iss + 1 + 5000);
  auto out = ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.ack, peer_iss + 1 + 5000);
}

// ---- close ----

TEST(TcpClose, ActiveCloseThroughTimeWait) {
  Active a;
  a.establish();
  a.app(ReqKind::kClose);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kFin | kAck);
  EXPECT_EQ(a.tp.state(kFlow), State::kFinWait1);
  a.peer(a.ack_spec(0, 1));
  EXPECT_EQ(a.tp.state(kFlow), State::kFinWait2);
  BuildSpec fin = a.ack_spec(0, 1);
  fin.flags |= kFin;
  out = a.peer(fin);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 2);
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
  // The app hears the peer's FIN, then the end.
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0].kind, EventKind::kPeerClosed);
  EXPECT_EQ(ev[1].kind, EventKind::kClosed);
  EXPECT_EQ(ev[1].status, 0);
  // TIME_WAIT answers a retransmitted FIN, and ends after 60 s.
  out = a.peer(fin);
  ASSERT_EQ(out.size(), 1u);
  a.ctx.at_ms(1000 + 59000);
  a.tp.tick(a.ctx);
  EXPECT_EQ(a.tp.flow_count(), 1u);
  a.ctx.at_ms(1000 + 61000);
  a.tp.tick(a.ctx);
  EXPECT_EQ(a.tp.flow_count(), 0u);
  EXPECT_EQ(a.ctx.closed.size(), 1u);
}

TEST(TcpClose, SimultaneousClose) {
  Active a;
  a.establish();
  a.app(ReqKind::kClose);
  a.ctx.take_out();
  BuildSpec fin = a.ack_spec(0, 0);  // the peer's FIN crosses ours
  fin.flags |= kFin;
  a.peer(fin);
  EXPECT_EQ(a.tp.state(kFlow), State::kClosing);
  a.peer(a.ack_spec(1, 1));
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
}

TEST(TcpClose, PassiveCloseThroughLastAck) {
  Active a;
  a.establish();
  BuildSpec fin = a.ack_spec(0, 0);
  fin.flags |= kFin;
  a.peer(fin);
  EXPECT_EQ(a.tp.state(kFlow), State::kCloseWait);
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kPeerClosed));
  a.app(ReqKind::kClose);
  EXPECT_EQ(a.tp.state(kFlow), State::kLastAck);
  a.peer(a.ack_spec(1, 1));
  EXPECT_TRUE(has_event(a.ctx.take_events(), EventKind::kClosed, 0));
  EXPECT_EQ(a.tp.flow_count(), 0u);
}

// ---- parameters ----

TEST(TcpParams, ErrorsNameTheProblem) {
  TcpTransport tp;
  EXPECT_EQ(tp.check_params({}), "");
  std::vector<Param> ok{{"cc", "cubic"}, {"wscale", "9"}, {"sack", "off"}};
  EXPECT_EQ(tp.check_params(ok), "");
  std::vector<Param> bad_cc{{"cc", "bbr9"}};
  EXPECT_NE(tp.check_params(bad_cc).find("unknown congestion control 'bbr9'"), std::string::npos);
  std::vector<Param> bad_ws{{"wscale", "15"}};
  EXPECT_NE(tp.check_params(bad_ws).find("0..14"), std::string::npos);
  std::vector<Param> bad_key{{"color", "blue"}};
  EXPECT_NE(tp.check_params(bad_key).find("unknown parameter 'color'"), std::string::npos);
  ScriptCtx ctx;
  EXPECT_EQ(tp.connect(kFlow, kTuple, bad_key, ctx), -EINVAL);
}

// ---- sequence wrap ----

TEST(TcpWrap, TransferAcrossTheWrap) {
  Active a(std::vector<Param>{{"isn", "4294967000"}});
  EXPECT_EQ(a.iss, 4294967000u);
  a.establish(65535, 7);
  a.app(ReqKind::kSend, 3000, 0, 51);
  auto out = a.ctx.take_out();
  const uint64_t sent = payload_of(out);
  EXPECT_EQ(sent, 3000u);
  a.peer(a.ack_spec(0, 3000));  // iss + 1 + 3000 wraps past 2^32
  auto ev = a.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kSendDone);
  EXPECT_EQ(info(a.tp, kFlow).n["bytes_in_flight"], 0u);
}

// ---- listener: the half-open budget and SYN cookies ----

constexpr ListenerId kListener = 3;

// A listener with `params` and a SYN from the peer's port `port` (kTuple's remote address).
struct Listening {
  TcpTransport tp;
  ScriptCtx ctx;

  explicit Listening(std::vector<Param> params = {}) {
    ctx.at_ms(5000);
    EXPECT_EQ(tp.listen(kListener, kTuple.local, params), 0);
  }
  static BuildSpec syn_spec(uint32_t isn, bool options = true) {
    BuildSpec b;
    b.seq = isn;
    b.flags = kSyn;
    b.window = 64240;
    b.mss = 1460;
    if (options) {
      b.sack_permitted = true;
      b.ts = true;
      b.ts_val = 777;
      b.wscale_opt = true;
      b.wscale = 7;
    }
    return b;
  }
  void in(const BuildSpec& b, uint16_t port, FlowId flow = kNoFlow,
          std::vector<uint8_t> data = {}) {
    PeerSeg s(b, std::move(data), flow, 0, port);
    if (flow == kNoFlow) {
      s.h.has_listener = true;
      s.h.listener = kListener;
    }
    tp.rx_burst({&s.h, 1}, ctx);
  }
  // The peer's ACK completing a handshake whose SYN-ACK was `synack`.
  static BuildSpec ack_of(const Segment& synack, uint32_t isn) {
    BuildSpec a;
    a.seq = isn + 1;
    a.ack = synack.seq + 1;
    a.flags = kAck;
    a.window = 502;
    if (synack.has_ts) {
      a.ts = true;
      a.ts_val = 778;
      a.ts_ecr = synack.ts_val;
    }
    return a;
  }
};

TEST(TcpSynCookie, PastTheBacklogASynGetsACookieAndItsAckMakesTheConnection) {
  Listening l(std::vector<Param>{{"backlog", "2"}});
  l.in(Listening::syn_spec(1000), 40001);
  l.in(Listening::syn_spec(2000), 40002);
  EXPECT_EQ(l.ctx.opened.size(), 2u);
  EXPECT_EQ(l.ctx.take_out().size(), 2u);  // their SYN-ACKs, from their flows
  // The third finds the backlog full: a SYN-ACK with no flow behind it, and nothing allocated.
  l.in(Listening::syn_spec(3000), 40003);
  EXPECT_EQ(l.ctx.opened.size(), 2u);
  EXPECT_TRUE(l.ctx.take_out().empty());
  EXPECT_EQ(l.tp.flow_count(), 2u);
  ASSERT_EQ(l.ctx.replies.size(), 1u);
  const Segment c = l.ctx.replies[0].seg;
  EXPECT_EQ(c.flags, kSyn | kAck);
  EXPECT_EQ(c.src_port, kTuple.local.port);
  EXPECT_EQ(c.dst_port, 40003);
  EXPECT_EQ(c.ack, 3001u);
  EXPECT_TRUE(c.has_mss);
  EXPECT_EQ(c.mss, 1460);
  EXPECT_TRUE(c.sack_permitted);
  EXPECT_TRUE(c.has_wscale);
  ASSERT_TRUE(c.has_ts);
  EXPECT_EQ(c.ts_ecr, 777u);
  // Linux's layout: the peer's window scale in bits 0-3, SACK in bit 4, no ECN (bit 5).
  EXPECT_EQ(c.ts_val & 63, 7u | 16u);
  EXPECT_LE(c.ts_val, 5000u);  // never ahead of our clock (ms)
  EXPECT_EQ(l.tp.counters().syn_no_room, 1u);
  EXPECT_EQ(l.tp.counters().syncookies_sent, 1u);

  // The peer's ACK, 300 ms later: the connection exists from it, established at once.
  l.ctx.at_ms(5300);
  l.in(Listening::ack_of(c, 3000), 40003);
  ASSERT_EQ(l.ctx.opened.size(), 3u);
  EXPECT_EQ(l.ctx.opened[2].remote.port, 40003);
  EXPECT_EQ(l.ctx.synced_seq, 3001u);
  const FlowId f = 9;  // the third flow_open()
  EXPECT_EQ(l.tp.state(f), State::kEstablished);
  auto ev = l.ctx.take_events();
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kind, EventKind::kAccepted);
  EXPECT_EQ(ev[0].flow, f);
  EXPECT_EQ(ev[0].aux, kListener);
  Info i = info(l.tp, f);
  EXPECT_EQ(i.t["sack"], "on");
  EXPECT_EQ(i.t["timestamps"], "on");
  EXPECT_EQ(i.n["snd_wscale"], 7u);
  EXPECT_EQ(i.n["mss"], 1460u - 12);
  EXPECT_EQ(i.n["snd_wnd"], 502u << 7);
  EXPECT_EQ(l.tp.counters().syncookies_recv, 1u);
  EXPECT_TRUE(l.ctx.replies.size() == 1);  // no RST

  // It moves data both ways.
  AppRequest r;
  r.flow = f;
  r.kind = ReqKind::kRecv;
  r.len = 4096;
  r.wr_id = 5;
  l.tp.app_burst({&r, 1}, l.ctx);
  l.ctx.take_out();
  BuildSpec d = Listening::ack_of(c, 3000);
  d.flags |= kPsh;
  l.in(d, 40003, f, bytes(100));
  ev = l.ctx.take_events();
  ASSERT_FALSE(ev.empty());
  EXPECT_EQ(info(l.tp, f).n["bytes_received"], 100u);
  r.kind = ReqKind::kSend;
  r.len = 200;
  r.wr_id = 6;
  l.tp.app_burst({&r, 1}, l.ctx);
  auto out = l.ctx.take_out();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].seg.seq, c.seq + 1);
  EXPECT_EQ(out[0].desc.len, 200u);
}

TEST(TcpSynCookie, ABadStaleOrForeignCookieGetsARstAndNoFlow) {
  Listening l(std::vector<Param>{{"backlog", "1"}});
  l.in(Listening::syn_spec(1000), 40001);
  l.in(Listening::syn_spec(3000), 40003);
  ASSERT_EQ(l.ctx.replies.size(), 1u);
  const Segment c = l.ctx.replies[0].seg;
  l.ctx.replies.clear();
  // A guessed cookie.
  BuildSpec bad = Listening::ack_of(c, 3000);
  bad.ack += 0x5A5A5A;
  l.in(bad, 40003);
  // The right cookie from another port.
  l.in(Listening::ack_of(c, 3000), 40004);
  // The right one with another minute counter.
  BuildSpec later = Listening::ack_of(c, 3000);
  later.ack += 1u << 24;
  l.in(later, 40003);
  EXPECT_EQ(l.ctx.opened.size(), 1u);
  ASSERT_EQ(l.ctx.replies.size(), 3u);
  for (const Out& o : l.ctx.replies) {
    EXPECT_EQ(o.seg.flags, kRst);
  }
  EXPECT_EQ(l.ctx.replies[0].seg.seq, bad.ack);  // <SEQ=SEG.ACK><CTL=RST>
  EXPECT_EQ(l.tp.counters().syncookies_failed, 3u);
  // Too old: cookies are good for two minutes.
  l.ctx.at_ms(5000 + 3 * 60000);
  l.in(Listening::ack_of(c, 3000), 40003);
  EXPECT_EQ(l.ctx.opened.size(), 1u);
  EXPECT_EQ(l.ctx.replies.size(), 4u);
  EXPECT_EQ(l.tp.counters().syncookies_recv, 0u);
}

TEST(TcpSynCookie, WithoutTimestampsOnlyTheMssIsOffered) {
  Listening l(std::vector<Param>{{"backlog", "1"}});
  l.in(Listening::syn_spec(1000), 40001);
  BuildSpec syn = Listening::syn_spec(5000, false);
  syn.mss = 1400;
  syn.sack_permitted = true;  // offered, but without timestamps there is nowhere to keep it
  syn.wscale_opt = true;
  syn.wscale = 9;
  l.in(syn, 40005);
  ASSERT_EQ(l.ctx.replies.size(), 1u);
  const Segment c = l.ctx.replies[0].seg;
  EXPECT_FALSE(c.has_ts);
  EXPECT_FALSE(c.has_wscale);
  EXPECT_FALSE(c.sack_permitted);
  EXPECT_EQ(c.mss, 1460);
  l.in(Listening::ack_of(c, 5000), 40005);
  ASSERT_EQ(l.ctx.opened.size(), 2u);
  Info i = info(l.tp, 8);
  EXPECT_EQ(i.n["mss"], 1300u);  // the largest of 536, 1300, 1440, 1460 not above 1400
  EXPECT_EQ(i.t["sack"], "off");
  EXPECT_EQ(i.n["snd_wscale"], 0u);
  EXPECT_EQ(i.n["snd_wnd"], 502u);
}

TEST(TcpSynCookie, NoRoomInTheDataplaneAlsoMeansCookiesARefusalDoesNot) {
  Listening l;
  l.ctx.open_error = -ENOBUFS;  // the app's flow quota, or its completion queue, is full
  l.in(Listening::syn_spec(1000), 40001);
  ASSERT_EQ(l.ctx.replies.size(), 1u);
  const Segment c = l.ctx.replies[0].seg;
  // Still no room when the handshake completes: dropped and counted, the peer tries again.
  l.in(Listening::ack_of(c, 1000), 40001);
  EXPECT_EQ(l.tp.counters().listen_overflows, 1u);
  EXPECT_EQ(l.ctx.replies.size(), 1u);
  l.ctx.open_error = 0;
  // Our SYN-ACK offered no window: what the peer sends next is a zero-window probe, one below
  // its next sequence number. It completes the handshake as well.
  BuildSpec probe = Listening::ack_of(c, 1000);
  probe.seq = 1000;
  l.in(probe, 40001);
  EXPECT_EQ(l.tp.state(7), State::kEstablished);
  EXPECT_EQ(l.ctx.synced_seq, 1001u);
  // A binding that refuses the tuple: no cookie, no answer.
  l.ctx.open_error = -EACCES;
  l.in(Listening::syn_spec(2000), 40002);
  EXPECT_EQ(l.ctx.replies.size(), 1u);
  EXPECT_EQ(l.tp.counters().syn_dropped_refused, 1u);
}

TEST(TcpSynCookie, WithCookiesOffTheSynIsDroppedAndCounted) {
  Listening l({{"backlog", "1"}, {"syncookies", "off"}});
  l.in(Listening::syn_spec(1000), 40001);
  l.in(Listening::syn_spec(2000), 40002);
  EXPECT_TRUE(l.ctx.replies.empty());
  EXPECT_EQ(l.ctx.opened.size(), 1u);
  EXPECT_EQ(l.tp.counters().syn_dropped_no_room, 1u);
}

TEST(TcpSynCookie, TheBudgetFreesAsHandshakesCompleteOrFail) {
  Listening l({{"backlog", "1"}, {"syn_retries", "1"}});
  l.in(Listening::syn_spec(1000), 40001);
  const Segment sa = l.ctx.take_out().at(0).seg;
  l.in(Listening::ack_of(sa, 1000), 40001, 7);
  EXPECT_EQ(l.tp.state(7), State::kEstablished);
  l.in(Listening::syn_spec(2000), 40002);  // room again: a flow, no cookie
  EXPECT_EQ(l.ctx.opened.size(), 2u);
  EXPECT_TRUE(l.ctx.replies.empty());
  // The half-open one times out (one retry): its place is free again.
  l.ctx.at_ms(5000 + 10000);
  l.tp.tick(l.ctx);  // the retry
  l.ctx.at_ms(5000 + 20000);
  l.tp.tick(l.ctx);  // the end
  EXPECT_EQ(l.tp.state(8), State::kClosed);
  l.in(Listening::syn_spec(3000), 40003);
  EXPECT_EQ(l.ctx.opened.size(), 3u);
  EXPECT_TRUE(l.ctx.replies.empty());
}

// ---- TIME-WAIT: a record the daemon keeps ----

// An active close up to TIME-WAIT; returns the peer's FIN.
BuildSpec to_time_wait(Active& a) {
  a.establish();
  a.app(ReqKind::kClose);
  a.ctx.take_out();
  a.peer(a.ack_spec(0, 1));
  BuildSpec fin = a.ack_spec(0, 1);
  fin.flags |= kFin;
  a.peer(fin);
  a.ctx.take_events();
  return fin;
}

TEST(TcpTimeWait, TheRecordOutlivesTheAppAndAcksARetransmittedFin) {
  Active a;
  const BuildSpec fin = to_time_wait(a);
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
  EXPECT_EQ(a.tp.time_wait_count(), 1u);
  EXPECT_EQ(a.tp.counters().time_wait, 1u);
  EXPECT_EQ(a.tp.counters().conn_closed, 1u);  // the connection itself is gone: a record stays
  EXPECT_EQ(info(a.tp, kFlow).n.count("cwnd"), 0u);
  // The app exits: the dataplane detaches its flows. TIME-WAIT stays, and sends nothing.
  AppRequest r;
  r.flow = kFlow;
  r.kind = ReqKind::kAbort;
  r.flags = kReqDetach;
  a.tp.app_burst({&r, 1}, a.ctx);
  EXPECT_TRUE(a.ctx.take_out().empty());
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
  // The peer did not get our ACK and sends its FIN again: it is acknowledged, not reset.
  a.ctx.at_ms(3000);
  BuildSpec again = fin;
  again.ts_val = 300;
  auto out = a.peer(again);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].desc.flow, kFlow);
  EXPECT_EQ(out[0].seg.flags, kAck);
  EXPECT_EQ(out[0].seg.seq, a.iss + 2);  // after our FIN
  EXPECT_EQ(out[0].seg.ack, kPeerIss + 2);
  ASSERT_TRUE(out[0].seg.has_ts);
  EXPECT_EQ(out[0].seg.ts_ecr, 200u);
  EXPECT_EQ(a.tp.counters().time_wait_acks, 1u);
  EXPECT_TRUE(a.ctx.closed.empty());
  // 2 MSL (60 s) from the last answer, then the flow id goes back to the dataplane.
  a.ctx.at_ms(3000 + 59000);
  a.tp.tick(a.ctx);
  EXPECT_EQ(a.tp.flow_count(), 1u);
  a.ctx.at_ms(3000 + 61000);
  a.tp.tick(a.ctx);
  EXPECT_EQ(a.tp.flow_count(), 0u);
  ASSERT_EQ(a.ctx.closed.size(), 1u);
  EXPECT_EQ(a.ctx.closed[0], kFlow);
}

TEST(TcpTimeWait, PawsAndRstAsLinux) {
  Active a;
  const BuildSpec fin = to_time_wait(a);
  // An old duplicate (its timestamp older than the FIN's): dropped by PAWS, answered.
  BuildSpec old = a.ack_spec(0, 1, 150);
  auto out = a.peer(old);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(a.tp.counters().paws_drops, 1u);
  // A bare ACK in sequence: taken silently.
  EXPECT_TRUE(a.peer(a.ack_spec(1, 1, 210)).empty());
  // A RST in sequence ends the record.
  BuildSpec rst = a.ack_spec(1, 1, 211);
  rst.flags = kRst;
  EXPECT_TRUE(a.peer(rst).empty());
  EXPECT_EQ(a.tp.state(kFlow), State::kClosed);
  EXPECT_EQ(a.ctx.closed.size(), 1u);
  (void)fin;
}

// A bare ACK out of sequence is answered at most once per 500 ms, as a connection answers
// one: a record and an end out of step with it (both in TIME-WAIT, say) cannot ACK each
// other's ACKs without end. A retransmitted FIN is answered every time.
TEST(TcpTimeWait, BareAcksOutOfSequenceAreAnsweredAtMostTwiceASecond) {
  Active a;
  const BuildSpec fin = to_time_wait(a);
  a.ctx.at_ms(3000);
  EXPECT_EQ(a.peer(a.ack_spec(uint32_t(-1), 1, 300)).size(), 1u);
  a.ctx.at_ms(3100);
  EXPECT_TRUE(a.peer(a.ack_spec(uint32_t(-1), 1, 301)).empty());
  EXPECT_EQ(a.tp.counters().acks_rate_limited, 1u);
  BuildSpec again = fin;
  again.ts_val = 302;
  EXPECT_EQ(a.peer(again).size(), 1u) << "a FIN again is always answered";
  a.ctx.at_ms(3501);
  EXPECT_EQ(a.peer(a.ack_spec(uint32_t(-1), 1, 303)).size(), 1u);
  EXPECT_EQ(a.tp.counters().time_wait_acks, 3u);
}

TEST(TcpTimeWait, ANewerSynReusesTheTupleAboveTheOldSequence) {
  Active a;
  to_time_wait(a);
  ASSERT_EQ(a.tp.listen(kListener, kTuple.local, {}), 0);
  BuildSpec syn = Listening::syn_spec(kPeerIss + 100000);
  syn.ts_val = 5000;
  PeerSeg s(syn, {}, kFlow);
  s.h.has_listener = true;
  s.h.listener = kListener;
  a.tp.rx_burst({&s.h, 1}, a.ctx);
  ASSERT_EQ(a.ctx.closed.size(), 1u);
  EXPECT_EQ(a.ctx.closed[0], kFlow);
  ASSERT_EQ(a.ctx.opened.size(), 1u);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kSyn | kAck);
  EXPECT_EQ(out[0].seg.seq, a.iss + 2 + 65535 + 2);
  EXPECT_EQ(a.tp.counters().time_wait_recycled, 1u);
}

TEST(TcpTimeWait, AnOldSynIsAnsweredWithAnAckNotAConnection) {
  Active a;
  to_time_wait(a);
  ASSERT_EQ(a.tp.listen(kListener, kTuple.local, {}), 0);
  BuildSpec syn = Listening::syn_spec(kPeerIss - 5);
  syn.ts_val = 100;  // older than the record's
  PeerSeg s(syn, {}, kFlow);
  s.h.has_listener = true;
  s.h.listener = kListener;
  a.tp.rx_burst({&s.h, 1}, a.ctx);
  EXPECT_TRUE(a.ctx.opened.empty());
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kAck);
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
}

TEST(TcpTimeWait, PastTheLimitAConnectionClosesWithoutIt) {
  Active a;
  a.tp.set_max_time_wait(0);
  to_time_wait(a);
  EXPECT_EQ(a.tp.state(kFlow), State::kClosed);
  EXPECT_EQ(a.tp.counters().time_wait_overflow, 1u);
  EXPECT_EQ(a.ctx.closed.size(), 1u);
}

TEST(TcpTimeWait, AClosingConnectionWhoseAppLeftGoesOnToTimeWait) {
  Active a;
  a.establish();
  a.app(ReqKind::kClose);
  a.ctx.take_out();
  a.peer(a.ack_spec(0, 1));
  EXPECT_EQ(a.tp.state(kFlow), State::kFinWait2);
  AppRequest r;
  r.flow = kFlow;
  r.kind = ReqKind::kAbort;
  r.flags = kReqDetach;
  a.tp.app_burst({&r, 1}, a.ctx);
  EXPECT_TRUE(a.ctx.take_out().empty());  // no RST
  EXPECT_EQ(a.tp.counters().orphaned, 1u);
  BuildSpec fin = a.ack_spec(0, 1);
  fin.flags |= kFin;
  auto out = a.peer(fin);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags, kAck);
  EXPECT_EQ(a.tp.state(kFlow), State::kTimeWait);
  EXPECT_EQ(a.tp.time_wait_count(), 1u);
}

TEST(TcpTimeWait, AnAppThatLeavesWithDataUnacknowledgedResets) {
  Active a;
  a.establish();
  a.app(ReqKind::kSend, 1000, 0, 1);
  a.app(ReqKind::kClose);
  a.ctx.take_out();
  AppRequest r;
  r.flow = kFlow;
  r.kind = ReqKind::kAbort;
  r.flags = kReqDetach;
  a.tp.app_burst({&r, 1}, a.ctx);
  auto out = a.ctx.take_out();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].seg.flags & kRst, kRst);
  EXPECT_EQ(a.tp.state(kFlow), State::kClosed);
}

}  // namespace
}  // namespace cleave::transport::tcp::test
