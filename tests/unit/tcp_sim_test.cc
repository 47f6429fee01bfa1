// tcp_sim_test.cc - two TCP endpoints over the simulated network (tests/sim): 100 MB per case
// through the fault matrix of TRANSPORTS.md, byte-exact with no duplicates and no stalls, on the
// NIC's zero-copy placement and on the copy path; sequence wrap; option combinations; zero window
// from a slow reader; congestion control on a bottleneck.
//
// CLEAVE_TCP_SIM_MB sets the transfer size (default 100), CLEAVE_SIM_SEED replays a seed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "sim_net.h"
#include "tcp.h"

namespace cleave::transport::tcp::test {
namespace {

using sim::Dir;
using sim::Faults;
using sim::HostConfig;
using sim::LinkConfig;
using sim::SimNet;

constexpr uint32_t kChunk = 1u << 20;  // one app send, one receive buffer
constexpr uint32_t kRing = 8;          // chunks in each side's memory region
constexpr uint32_t kSendsInFlight = 4;
constexpr uint16_t kPort = 80;

uint64_t transfer_bytes() {
  const char* v = std::getenv("CLEAVE_TCP_SIM_MB");
  return uint64_t(v != nullptr ? std::strtoull(v, nullptr, 10) : 100) << 20;
}

// The byte stream's content: a function of the stream offset, in 8-byte words, so that a byte
// misplaced anywhere is caught.
uint64_t word_at(uint64_t offset) {
  uint64_t z = (offset >> 3) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
void fill(uint8_t* p, uint64_t stream_off, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 8) {
    const uint64_t w = word_at(stream_off + i);
    std::memcpy(p + i, &w, 8);
  }
}
// Offset of the first differing byte, or -1.
int64_t check(const uint8_t* p, uint64_t stream_off, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 8) {
    const uint64_t w = word_at(stream_off + i);
    if (std::memcmp(p + i, &w, std::min<uint32_t>(8, len - i)) != 0) return int64_t(i);
  }
  return -1;
}

struct Case {
  std::string name;
  Faults ab;  // data direction
  Faults ba;  // ACK direction
  std::vector<Param> params;
  LinkConfig link{};
  bool zero_copy = true;
  uint64_t bytes = 0;            // 0: transfer_bytes()
  uint64_t reader_delay_ns = 0;  // the receiving app holds each buffer this long
};

// One transfer A -> B, then a graceful close from both sides; asserts everything about it.
struct Transfer {
  explicit Transfer(const Case& c, uint64_t seed) : cs(c) {
    HostConfig a, b;
    a.transport = std::make_unique<TcpTransport>();
    b.transport = std::make_unique<TcpTransport>();
    a.zero_copy = b.zero_copy = c.zero_copy;
    net = std::make_unique<SimNet>(seed, c.link, c.ab, c.ba, std::move(a), std::move(b));
    total = c.bytes != 0 ? c.bytes : transfer_bytes();
    mr_a = net->a().add_mr(size_t(kChunk) * kRing);
    mr_b = net->b().add_mr(size_t(kChunk) * kRing);
    net->a().set_event_handler([this](const Event& e) { on_a(e); });
    net->b().set_event_handler([this](const Event& e) { on_b(e); });
    EXPECT_EQ(net->b().listen(1, kPort, c.params), 0);
    int err = 0;
    fa = net->a().connect(5000, net->b().endpoint(kPort), 6, c.params, &err);
    EXPECT_EQ(err, 0);
  }

  void on_a(const Event& e) {
    switch (e.kind) {
      case EventKind::kConnected:
        connected = true;
        for (uint32_t i = 0; i < kSendsInFlight; i++)
          send_next();
        break;
      case EventKind::kSendDone:
        if (e.status != 0) {
          errors.push_back("send failed " + std::to_string(e.status));
          break;
        }
        if (e.wr_id != send_done) errors.push_back("send completions out of order");
        send_done++;
        send_next();
        break;
      case EventKind::kClosed:
        a_closed = true;
        if (e.status != 0) errors.push_back("A closed with " + std::to_string(e.status));
        break;
      case EventKind::kPeerClosed:
        break;
      default:
        errors.push_back("A: unexpected event " + std::to_string(int(e.kind)));
    }
  }
  void send_next() {
    if (sent >= total || fin_sent) return;
    const uint32_t len = uint32_t(std::min<uint64_t>(kChunk, total - sent));
    const uint64_t off = (sent / kChunk % kRing) * kChunk;
    fill(net->a().mr(mr_a).data() + off, sent, len);
    net->a().submit({fa, ReqKind::kSend, mr_a, len, off, sent / kChunk, 0});
    sent += len;
    if (sent == total) {
      net->a().submit({fa, ReqKind::kClose, 0, 0, 0, 0, 0});
      fin_sent = true;
    }
  }

  void on_b(const Event& e) {
    switch (e.kind) {
      case EventKind::kAccepted:
        fb = e.flow;
        for (uint32_t i = 0; i < kRing; i++)
          post_recv();
        break;
      case EventKind::kRecvDone: {
        if (e.status != 0) {
          errors.push_back("recv failed " + std::to_string(e.status));
          break;
        }
        const uint64_t idx = e.wr_id;
        if (idx != recv_done) {
          errors.push_back("receive completions out of order or duplicated: " +
                           std::to_string(idx) + " after " + std::to_string(recv_done));
          break;
        }
        const uint64_t off = (idx % kRing) * kChunk;
        const uint64_t stream = idx * kChunk;
        if (e.len != std::min<uint64_t>(kChunk, total - std::min(total, stream))) {
          errors.push_back("buffer " + std::to_string(idx) + " holds " + std::to_string(e.len));
        }
        const int64_t bad = check(net->b().mr(mr_b).data() + off, stream, e.len);
        if (bad >= 0) {
          errors.push_back("byte " + std::to_string(stream + uint64_t(bad)) + " differs");
        }
        received += e.len;
        recv_done++;
        if (cs.reader_delay_ns == 0) {
          post_recv();
        } else {
          held.push_back(net->now_ns() + cs.reader_delay_ns);
        }
        break;
      }
      case EventKind::kRecvData:
        break;
      case EventKind::kPeerClosed:
        peer_closed = true;
        net->b().submit({fb, ReqKind::kClose, 0, 0, 0, 0, 0});
        break;
      case EventKind::kClosed:
        b_closed = true;
        if (e.status != 0) errors.push_back("B closed with " + std::to_string(e.status));
        break;
      default:
        errors.push_back("B: unexpected event " + std::to_string(int(e.kind)));
    }
  }
  void post_recv() {
    if (posted * kChunk >= total) return;
    const uint64_t off = (posted % kRing) * kChunk;
    net->b().submit({fb, ReqKind::kRecv, mr_b, kChunk, off, posted, 0});
    posted++;
  }
  void release_held() {
    while (!held.empty() && held.front() <= net->now_ns()) {
      held.pop_front();
      post_recv();
    }
  }

  // Runs to the end; false on a stall (no progress for `stall_ns` of simulated time).
  bool run(uint64_t stall_ns = 120'000'000'000ull) {
    uint64_t last = 0, last_t = 0;
    while (!(a_closed && b_closed)) {
      const bool moved = net->run_until(
          [&] {
            release_held();
            return (a_closed && b_closed) || received != last;
          },
          stall_ns);
      if (!moved) return false;
      if (received != last) {
        last = received;
        last_t = net->now_ns();
      } else if (net->now_ns() - last_t > stall_ns) {
        return false;
      }
    }
    return true;
  }

  std::string where() const {
    return cs.name + " " + net->describe() + " received " + std::to_string(received) + " of " +
           std::to_string(total) + "\n  A: " + info(net->a(), fa) + "\n  B: " + info(net->b(), fb);
  }
  static std::string info(sim::Host& h, FlowId f) {
    struct Sink final : InfoSink {
      std::string s;
      void text(std::string_view k, std::string_view v) override {
        s += std::string(k) + "=" + std::string(v) + " ";
      }
      void number(std::string_view k, uint64_t v) override {
        s += std::string(k) + "=" + std::to_string(v) + " ";
      }
    } sink;
    if (f == kNoFlow || !h.transport().flow_info(f, sink)) return "(no flow)";
    return sink.s;
  }

  Case cs;
  std::unique_ptr<SimNet> net;
  uint64_t total = 0;
  uint16_t mr_a = 0, mr_b = 0;
  FlowId fa = kNoFlow, fb = kNoFlow;
  bool connected = false, fin_sent = false, peer_closed = false;
  bool a_closed = false, b_closed = false;
  uint64_t sent = 0, send_done = 0, posted = 0, recv_done = 0, received = 0;
  std::deque<uint64_t> held;
  std::vector<std::string> errors;
};

TcpTransport& tcp_of(sim::Host& h) {
  return static_cast<TcpTransport&>(h.transport());
}

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
SIM_CASE(Loss0_1, { c.ab.loss = c.ba.loss = 0.001; })
SIM_CASE(Loss1, { c.ab.loss = c.ba.loss = 0.01; })
SIM_CASE(Loss5, { c.ab.loss = c.ba.loss = 0.05; })
SIM_CASE(LossBursts, {
  c.ab.loss = 0.002;
  c.ab.loss_burst = 0.5;  // half the losses take 2 to 20 frames
  c.ab.loss_burst_len = 20;
})
SIM_CASE(OnlyAcksLost, { c.ba.loss = 0.2; })
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
  c.ab.reorder = 0.02;
  c.ab.reorder_depth = 4;
})
SIM_CASE(WindowReversal, { c.ab.reverse = 0.002; })
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
