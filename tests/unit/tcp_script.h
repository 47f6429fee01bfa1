// tcp_script.h - a scripted peer for TCP unit tests: hand-built segments in, emitted segments
// and events out, with the app memory, NIC commands and flow table calls recorded.
//
// Everything here is the copy path (segments arrive deferred, with their payload), so the
// transport's decisions are visible without a NIC. Time moves only when the test says.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "transport.h"
#include "transport/tcp/tcp.h"
#include "transport/tcp/tcp_wire.h"

namespace cleave::transport::tcp::test {

inline const FlowTuple kTuple{{IpAddr::v4(0x0A000001), 5000}, {IpAddr::v4(0x0A000002), 80}, 6};

// One emitted segment, parsed.
struct Out {
  TxDesc desc;
  Segment seg;
};

// The payload bytes of emitted segments (a TSO descriptor counts all of its segments).
inline uint64_t payload_of(const std::vector<Out>& out) {
  uint64_t n = 0;
  for (const Out& o : out)
    n += o.desc.len;
  return n;
}

class ScriptCtx final : public Context {
 public:
  ScriptCtx() : Context(txbuf_, evbuf_) { mrs.emplace_back(1 << 20); }

  void at_ms(uint64_t ms) { set_now(ms * 1'000'000); }
  void at_ns(uint64_t ns) { set_now(ns); }
  uint64_t ns() const { return now_ns(); }

  // Emitted segments and events since the last take.
  std::vector<Out> take_out() {
    flush();
    std::vector<Out> o;
    o.swap(out);
    return o;
  }
  std::vector<Event> take_events() {
    flush();
    std::vector<Event> e;
    e.swap(events);
    return e;
  }

  int ms_post(FlowId, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) override {
    if (post_error != 0) return post_error;
    posts.push_back({mr, offset, len, msg});
    return 0;
  }
  int cursor_update(FlowId, uint32_t c) override {
    cursor = c;
    cursor_updates++;
    return 0;
  }
  int ms_retire(FlowId, uint32_t count) override {
    retired += count;
    return 0;
  }
  int ms_retire_msg(FlowId, uint32_t msg) override {
    retired_msgs.push_back(msg);
    return 0;
  }
  bool copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) override {
    if (mr >= mrs.size() || offset > mrs[mr].size() || len > mrs[mr].size() - offset) {
      return false;
    }
    std::memcpy(mrs[mr].data() + offset, src, len);
    return true;
  }
  FlowId flow_open(ListenerId, const FlowTuple& t, uint32_t initial_seq, bool msgs) override {
    if (open_error != 0) return kNoFlow;
    opened.push_back(t);
    synced_seq = initial_seq;
    synced_messages = msgs;
    return next_flow++;
  }
  void flow_synced(FlowId, uint32_t initial_seq, bool msgs) override {
    synced_seq = initial_seq;
    synced_messages = msgs;
  }
  void flow_closed(FlowId f) override { closed.push_back(f); }
  int flow_open_error() const override { return open_error; }
  bool reply(const RxHeader& to, const uint8_t* l4, size_t len) override {
    EXPECT_NE(to.l3, nullptr);
    Out o;
    std::memcpy(o.desc.l4.data(), l4, len);
    o.desc.l4_len = uint8_t(len);
    EXPECT_TRUE(parse(l4, len, o.seg));
    replies.push_back(o);
    return true;
  }

  struct Post {
    uint16_t mr;
    uint64_t offset;
    uint32_t len;
    uint32_t msg;
  };
  std::vector<Out> out;
  std::vector<Event> events;
  std::vector<std::vector<uint8_t>> mrs;
  std::vector<Post> posts;
  std::vector<FlowTuple> opened;
  std::vector<FlowId> closed;
  uint32_t cursor = 0;
  uint32_t cursor_updates = 0;
  uint32_t retired = 0;
  uint32_t synced_seq = 0;
  bool synced_messages = false;
  std::vector<uint32_t> retired_msgs;  // ms_retire_msg() calls
  int post_error = 0;                  // ms_post() fails with it when non-zero
  int open_error = 0;                  // flow_open() gives no flow, and says this, when non-zero
  std::vector<Out> replies;            // reply() calls: answers that had no flow
  FlowId next_flow = 7;

 protected:
  void drain_tx(std::span<TxDesc> descs) override {
    for (const TxDesc& d : descs) {
      Out o{d, {}};
      EXPECT_TRUE(parse(d.l4.data(), d.l4_len, o.seg));
      out.push_back(o);
    }
  }
  void drain_events(std::span<const Event> e) override {
    events.insert(events.end(), e.begin(), e.end());
  }

 private:
  std::array<TxDesc, 16> txbuf_{};
  std::array<Event, 16> evbuf_{};
};

// A segment from the peer (kTuple's remote) to us, held with its bytes.
struct PeerSeg {
  std::array<uint8_t, 20> ip{};
  std::array<uint8_t, kMaxHeaderLen> tcp{};
  std::vector<uint8_t> payload;
  RxHeader h;

  PeerSeg(BuildSpec b, std::vector<uint8_t> data = {}, FlowId flow = kNoFlow, uint8_t ecn = 0,
          uint16_t src_port = kTuple.remote.port)
      : payload(std::move(data)) {
    b.src_port = src_port;
    b.dst_port = kTuple.local.port;
    const size_t hl = build(b, tcp.data());
    ip[0] = 0x45;
    ip[1] = ecn;
    const uint32_t src = kTuple.remote.ip.v4_host(), dst = kTuple.local.ip.v4_host();
    for (int i = 0; i < 4; i++) {
      ip[12 + i] = uint8_t(src >> (24 - 8 * i));
      ip[16 + i] = uint8_t(dst >> (24 - 8 * i));
    }
    ip[9] = 6;
    h.l3 = ip.data();
    h.l3_len = 20;
    h.l4 = tcp.data();
    h.l4_len = uint16_t(hl);
    h.ecn = ecn;
    h.flow = flow;
    h.l4_csum = Csum::kGood;
    h.payload_len = uint32_t(payload.size());
    h.placed = payload.empty() ? Placed::kNoPayload : Placed::kDeferred;
    h.payload = payload.empty() ? nullptr : payload.data();
  }
  PeerSeg(const PeerSeg&) = delete;
  PeerSeg& operator=(const PeerSeg&) = delete;
};

inline std::vector<uint8_t> bytes(size_t n, uint8_t seed = 1) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++)
    v[i] = uint8_t(seed + i * 7);
  return v;
}

// The flow of the scripted tests, and the peer's initial sequence number.
inline constexpr FlowId kFlow = 1;
inline constexpr uint32_t kPeerIss = 900000;

// The peer's SYN-ACK to our SYN (`iss`) from `peer_iss`, with Linux's options: window 65535,
// MSS 1460, SACK, timestamps (TSval 100), window scale `wscale`.
inline BuildSpec linux_synack(uint32_t iss, uint32_t peer_iss = kPeerIss, uint8_t wscale = 7) {
  BuildSpec b;
  b.seq = peer_iss;
  b.ack = iss + 1;
  b.flags = kSyn | kAck;
  b.window = 65535;
  b.mss = 1460;
  b.sack_permitted = true;
  b.ts = true;
  b.ts_val = 100;
  b.wscale_opt = true;
  b.wscale = wscale;
  return b;
}

// A flow's info (TcpTransport::flow_info) as maps.
class Info final : public InfoSink {
 public:
  void text(std::string_view k, std::string_view v) override { t[std::string(k)] = v; }
  void number(std::string_view k, uint64_t v) override { n[std::string(k)] = v; }
  std::map<std::string, std::string> t;
  std::map<std::string, uint64_t> n;
};

inline Info info(const TcpTransport& tp, FlowId f) {
  Info i;
  EXPECT_TRUE(tp.flow_info(f, i));
  return i;
}

}  // namespace cleave::transport::tcp::test
