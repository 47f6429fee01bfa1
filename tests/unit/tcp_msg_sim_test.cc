// tcp_msg_sim_test.cc - TCP message mode between two endpoints over the simulated network:
// messages of mixed sizes (1 B to 1 MB, and the MSS and TSO edges) through the fault matrix,
// each receive completion exactly one message, in order, byte-exact; and buffers shorter than
// their messages (truncation reported, nothing else lost). Three placements: the NIC places by
// message (net_cleave), the NIC flow is in copy mode (MSs posted, every segment deferred), and
// the NIC does not place messages at all (the generic backend: no MS, the copy path).
//
// CLEAVE_TCP_SIM_MB sets the bytes per case (a fifth of it; default 100), CLEAVE_SIM_SEED
// replays a seed.
#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "sim_net.h"
#include "transport/tcp/tcp.h"

namespace cleave::transport::tcp::test {
namespace {

using sim::Dir;
using sim::Faults;
using sim::HostConfig;
using sim::SimNet;

constexpr uint32_t kMaxMsg = 1u << 20;
constexpr uint32_t kRing = 8;  // messages in flight, receives posted
constexpr uint16_t kPort = 80;

uint64_t case_bytes() {
  const char* v = std::getenv("CLEAVE_TCP_SIM_MB");
  return (uint64_t(v != nullptr ? std::strtoull(v, nullptr, 10) : 100) << 20) / 5;
}

// Message i's bytes: a function of (i, offset) in 8-byte words.
uint64_t word(uint64_t msg, uint64_t off) {
  uint64_t z = (msg << 40) + (off >> 3) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
void fill(uint8_t* p, uint64_t msg, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 8) {
    const uint64_t w = word(msg, i);
    std::memcpy(p + i, &w, std::min<uint32_t>(8, len - i));
  }
}
bool same(const uint8_t* p, uint64_t msg, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 8) {
    const uint64_t w = word(msg, i);
    if (std::memcmp(p + i, &w, std::min<uint32_t>(8, len - i)) != 0) return false;
  }
  return true;
}

// Sizes: the edges first (1 byte, an MSS less, at and past it, a TSO descriptor, 1 MB), then a
// seeded mix of tiny, small, medium and large until the case's bytes are reached.
std::vector<uint32_t> sizes(uint64_t seed, uint64_t total) {
  std::vector<uint32_t> v{1, 2, 1427, 1428, 1429, 64511, 64512, 64513, kMaxMsg, 7};
  std::mt19937_64 r(seed);
  uint64_t sum = 0;
  for (uint32_t s : v)
    sum += s;
  while (sum < total) {
    uint32_t s = 0;
    switch (r() % 4) {
      case 0:
        s = 1 + uint32_t(r() % 16);
        break;
      case 1:
        s = 17 + uint32_t(r() % 2000);
        break;
      case 2:
        s = 2017 + uint32_t(r() % 70000);
        break;
      default:
        s = 72017 + uint32_t(r() % (kMaxMsg - 72016));
    }
    v.push_back(s);
    sum += s;
  }
  return v;
}

struct MsgCase {
  std::string name;
  Faults ab;
  Faults ba;
  std::vector<Param> params;
  bool zero_copy = true;        // the NIC flow in zero-copy mode, else copy mode
  bool nic_messages = true;     // the NIC flow places by message, else message MSs are refused
  uint32_t recv_len = kMaxMsg;  // below kMaxMsg: longer messages are truncated
};

struct MsgTransfer {
  MsgTransfer(const MsgCase& c, uint64_t seed) : cs(c) {
    HostConfig a, b;
    a.transport = std::make_unique<TcpTransport>();
    b.transport = std::make_unique<TcpTransport>();
    a.zero_copy = b.zero_copy = c.zero_copy;
    a.nic_messages = b.nic_messages = c.nic_messages;
    net = std::make_unique<SimNet>(seed, sim::LinkConfig{}, c.ab, c.ba, std::move(a), std::move(b));
    msgs = sizes(seed, case_bytes());
    mr_a = net->a().add_mr(size_t(kMaxMsg) * kRing);
    mr_b = net->b().add_mr(size_t(kMaxMsg) * kRing);
    net->a().set_event_handler([this](const Event& e) { on_a(e); });
    net->b().set_event_handler([this](const Event& e) { on_b(e); });
    std::vector<Param> p = c.params;
    p.push_back({"message", "on"});
    EXPECT_EQ(net->b().listen(1, kPort, p), 0);
    int err = 0;
    fa = net->a().connect(5000, net->b().endpoint(kPort), 6, p, &err);
    EXPECT_EQ(err, 0);
  }

  void on_a(const Event& e) {
    switch (e.kind) {
      case EventKind::kConnected:
        for (uint32_t i = 0; i < kRing; i++)
          send_next();
        break;
      case EventKind::kSendDone:
        if (e.status != 0 || e.wr_id != send_done || e.len != msgs[e.wr_id]) {
          errors.push_back("send completion " + std::to_string(e.wr_id) + " status " +
                           std::to_string(e.status));
        }
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
    if (sent == msgs.size()) return;
    const uint64_t off = (sent % kRing) * kMaxMsg;
    fill(net->a().mr(mr_a).data() + off, sent, msgs[sent]);
    net->a().submit({fa, ReqKind::kSend, mr_a, msgs[sent], off, sent, 0});
    if (++sent == msgs.size()) net->a().submit({fa, ReqKind::kClose, 0, 0, 0, 0, 0});
  }

  void on_b(const Event& e) {
    switch (e.kind) {
      case EventKind::kAccepted:
        fb = e.flow;
        for (uint32_t i = 0; i < kRing; i++)
          post_recv();
        break;
      case EventKind::kRecvDone: {
        const uint64_t i = e.wr_id;
        if (i >= msgs.size()) {
          if (e.len != 0 || e.status != 0) errors.push_back("a receive past the last message");
          break;  // the buffers left when the peer closed return empty
        }
        if (i != recv_done) {
          errors.push_back("completion " + std::to_string(i) + " after " +
                           std::to_string(recv_done));
          break;
        }
        const uint32_t want = std::min(msgs[i], cs.recv_len);
        const int32_t status = msgs[i] > cs.recv_len ? -EMSGSIZE : 0;
        if (e.status != status || e.len != want || e.aux != msgs[i]) {
          errors.push_back("message " + std::to_string(i) + " of " + std::to_string(msgs[i]) +
                           ": status " + std::to_string(e.status) + " len " +
                           std::to_string(e.len) + " aux " + std::to_string(e.aux));
        }
        if (!same(net->b().mr(mr_b).data() + (i % kRing) * kMaxMsg, i, want)) {
          errors.push_back("message " + std::to_string(i) + " differs");
        }
        received += msgs[i];
        recv_done++;
        post_recv();
        break;
      }
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
    const uint64_t off = (posted % kRing) * kMaxMsg;
    net->b().submit({fb, ReqKind::kRecv, mr_b, cs.recv_len, off, posted, 0});
    posted++;
  }

  bool run() {
    uint64_t last = ~0ull;
    while (!(a_closed && b_closed)) {
      last = recv_done;
      const bool moved = net->run_until([&] { return (a_closed && b_closed) || recv_done != last; },
                                        120'000'000'000ull);
      if (!moved) return false;
    }
    return true;
  }
  std::string where() const {
    return cs.name + " " + net->describe() + " messages " + std::to_string(recv_done) + " of " +
           std::to_string(msgs.size());
  }

  MsgCase cs;
  std::unique_ptr<SimNet> net;
  std::vector<uint32_t> msgs;
  uint16_t mr_a = 0, mr_b = 0;
  FlowId fa = kNoFlow, fb = kNoFlow;
  bool peer_closed = false, a_closed = false, b_closed = false;
  uint64_t sent = 0, send_done = 0, posted = 0, recv_done = 0, received = 0;
  std::vector<std::string> errors;
};

TcpTransport& tcp_of(sim::Host& h) {
  return static_cast<TcpTransport&>(h.transport());
}

void run_case(const MsgCase& c) {
  const uint64_t seed = SimNet::seed_from_env(0x3E55A6E + std::hash<std::string>{}(c.name) % 1000);
  MsgTransfer t(c, seed);
  SCOPED_TRACE(t.where());
  ASSERT_TRUE(t.run()) << "stalled: " << t.where();
  for (const std::string& e : t.errors)
    ADD_FAILURE() << e;
  EXPECT_EQ(t.recv_done, t.msgs.size());
  EXPECT_EQ(t.send_done, t.msgs.size());
  EXPECT_TRUE(t.peer_closed);
  const Counters& rb = tcp_of(t.net->b()).counters();
  const nic::NicModel& nb = t.net->b().nic();
  EXPECT_EQ(rb.msg_bad, 0u);
  uint64_t longer = 0;
  uint64_t tails = 0;  // bytes of truncated messages from one segment before the buffer's end
  for (uint32_t s : t.msgs) {
    longer += s > c.recv_len ? 1 : 0;
    tails += s > c.recv_len ? s - c.recv_len + 1460 : 0;
  }
  EXPECT_EQ(rb.msg_truncated, longer);
  if (c.zero_copy && c.nic_messages) {
    // The NIC placed every message byte but those of segments reaching past a short buffer
    // (deferred whole: ms_overflow), which the copy path stores as far as the buffer goes.
    EXPECT_EQ(rb.placed_bytes + rb.copied_bytes, t.received);
    EXPECT_LE(rb.copied_bytes, tails);
    if (longer == 0) {
      EXPECT_EQ(rb.copied_bytes, 0u);
    } else {
      EXPECT_GT(nb.defer_count(nic::DeferReason::kMsOverflow), 0u);
    }
    EXPECT_GT(nb.counter(nic::Ctr::kRxMessage), 0u);
    if (c.ab.loss > 0 || c.ab.reorder > 0) {
      EXPECT_GT(nb.counter(nic::Ctr::kRxPastHole), 0u);
    }
    EXPECT_EQ(nb.defer_count(nic::DeferReason::kBadL4Header), 0u);
  } else {
    EXPECT_EQ(rb.placed_bytes, 0u);
    EXPECT_EQ(rb.copied_bytes, t.received);
    EXPECT_EQ(nb.counter(nic::Ctr::kRxMessage), 0u);
  }
  // Every MS posted, retired and dropped without a failed command (retire by message number
  // included), and none left behind on the NIC.
  EXPECT_EQ(t.net->b().stats().cmd_errors, 0u);
  const sim::LinkStats& ab = t.net->stats(Dir::kAtoB);
  if (c.ab.loss > 0) {
    EXPECT_GT(ab.lost, 0u);
    EXPECT_GT(tcp_of(t.net->a()).counters().retransmits, 0u);
  }
  if (c.ab.reorder > 0) {
    EXPECT_GT(ab.reordered, 0u);
  }
  if (c.ab.duplicate > 0) {
    EXPECT_GT(ab.duplicated, 0u);
  }
  t.net->run_for(70'000'000'000ull);
  EXPECT_EQ(t.net->a().transport().flow_count(), 0u);
  EXPECT_EQ(t.net->b().transport().flow_count(), 0u);
}

enum class Placement { kNic, kCopyMode, kGeneric };
class TcpMsgSim : public ::testing::TestWithParam<Placement> {};

#define MSG_CASE(NAME, ...)                             \
  TEST_P(TcpMsgSim, NAME) {                             \
    MsgCase c;                                          \
    c.name = #NAME;                                     \
    c.zero_copy = GetParam() != Placement::kCopyMode;   \
    c.nic_messages = GetParam() != Placement::kGeneric; \
    __VA_ARGS__;                                        \
    run_case(c);                                        \
  }

MSG_CASE(Clean, {})
MSG_CASE(Loss1, { c.ab.loss = c.ba.loss = 0.01; })
MSG_CASE(Reorder, {
  c.ab.reorder = 0.02;
  c.ab.reorder_depth = 4;
})
MSG_CASE(Duplicates, { c.ab.duplicate = c.ba.duplicate = 0.02; })
MSG_CASE(Everything, {
  c.ab.loss = c.ba.loss = 0.005;
  c.ab.reorder = 0.01;
  c.ab.duplicate = c.ba.duplicate = 0.005;
  c.ab.corrupt_payload = 0.002;
  c.ab.corrupt_header = 0.002;
})
MSG_CASE(SequenceWrap, { c.params = {{"isn", "4294900000"}}; })
MSG_CASE(NoSackNoTimestamps, {
  c.params = {{"sack", "off"}, {"timestamps", "off"}};
  c.ab.loss = 0.005;
})
MSG_CASE(ShortBuffers, {
  c.recv_len = 4096;
  c.ab.loss = 0.005;
})

INSTANTIATE_TEST_SUITE_P(Placement, TcpMsgSim,
                         ::testing::Values(Placement::kNic, Placement::kCopyMode,
                                           Placement::kGeneric),
                         [](const auto& i) {
                           switch (i.param) {
                             case Placement::kNic:
                               return "NicByMessage";
                             case Placement::kCopyMode:
                               return "CopyMode";
                             default:
                               return "NoNicMessages";
                           }
                         });

}  // namespace
}  // namespace cleave::transport::tcp::test
