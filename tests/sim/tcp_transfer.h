// tcp_transfer.h - one TCP transfer A -> B over the simulated network, the way the sim tests
// and the sim benchmark run it: A sends `total` bytes of a checkable pattern in 1 MB sends (4 in
// flight) and closes; B posts 1 MB receives (8 at a time), checks every byte and closes when A's
// FIN arrives. Whatever goes wrong is collected in `errors`; the caller judges.
//
// CLEAVE_TCP_SIM_MB sets the default transfer size (100).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim_net.h"
#include "transport/tcp/tcp.h"

namespace cleave::transport::tcp::test {

using sim::Dir;
using sim::Faults;
using sim::HostConfig;
using sim::LinkConfig;
using sim::SimNet;

inline constexpr uint32_t kChunk = 1u << 20;  // one app send, one receive buffer
inline constexpr uint32_t kRing = 8;          // chunks in each side's memory region
inline constexpr uint32_t kSendsInFlight = 4;
inline constexpr uint16_t kPort = 80;

inline uint64_t transfer_bytes() {
  const char* v = std::getenv("CLEAVE_TCP_SIM_MB");
  return uint64_t(v != nullptr ? std::strtoull(v, nullptr, 10) : 100) << 20;
}

// The byte stream's content: a function of the stream offset, in 8-byte words, so that a byte
// misplaced anywhere is caught.
inline uint64_t word_at(uint64_t offset) {
  uint64_t z = (offset >> 3) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline void fill(uint8_t* p, uint64_t stream_off, uint32_t len) {
  for (uint32_t i = 0; i < len; i += 8) {
    const uint64_t w = word_at(stream_off + i);
    std::memcpy(p + i, &w, 8);
  }
}
// Offset of the first differing byte, or -1.
inline int64_t check(const uint8_t* p, uint64_t stream_off, uint32_t len) {
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
  bool few_spurious = false;     // run_case checks that little arrives twice (spurious resends)
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
    if (net->b().listen(1, kPort, c.params) != 0) errors.push_back("listen failed");
    int err = 0;
    fa = net->a().connect(5000, net->b().endpoint(kPort), 6, c.params, &err);
    if (err != 0) errors.push_back("connect failed: " + std::to_string(err));
  }

  void on_a(const Event& e) {
    switch (e.kind) {
      case EventKind::kConnected:
        connected = true;
        connected_ns = net->now_ns();
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
        if (received == total) done_ns = net->now_ns();
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
            if (on_step) on_step();
            return (a_closed && b_closed) || received != last;
          },
          stall_ns);
      if (!moved) return false;
      if (received != last) {
        last = received;
        longest_wait_ns = std::max(longest_wait_ns, net->now_ns() - last_t);
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
  uint64_t connected_ns = 0, done_ns = 0;  // simulated times: A connected, B had every byte
  uint64_t longest_wait_ns = 0;            // the longest time B's received bytes stood still
  bool a_closed = false, b_closed = false;
  uint64_t sent = 0, send_done = 0, posted = 0, recv_done = 0, received = 0;
  std::deque<uint64_t> held;
  std::vector<std::string> errors;
  std::function<void()> on_step;  // called after every step of the network while run() runs
};

inline TcpTransport& tcp_of(sim::Host& h) {
  return static_cast<TcpTransport&>(h.transport());
}

// The sender's window through a transfer, from A's flow_info after every step (set
// Transfer::on_step to call sample()): every reduction (a fast recovery or an RTO began, or
// ssthresh fell), and whether a loss episode began with it. One reduction per episode, an episode
// being the window of data outstanding when a loss was found (RFC 5681 3.1, RFC 6582, RFC 6675): a
// fast recovery begins one, so does an RTO outside one, and a tail loss probe that repaired a loss
// (RFC 8985 7.4.2: no counter; seen as a fall in ca_state open); an RTO in recovery or in the loss
// state after an RTO does not.
struct WindowWatch {
  struct Cut {
    uint64_t at_ns = 0;      // since the flow connected
    std::string from, to;    // ca_state before and after
    uint64_t cwnd = 0;       // before
    uint64_t ssthresh = 0;   // after
    uint64_t in_flight = 0;  // after
    bool new_episode = false;
    bool moved = false;  // ssthresh changed
    bool deep = false;   // below beta x cwnd - 1 MSS (and above 2 MSS), before the tail
    bool tail = false;   // the FIN was out: the flight was what data was left, not the window
  };
  double beta = 0.5;  // the algorithm's decrease factor: a cut below beta x cwnd is deeper than it
  uint64_t mss = 0;
  uint64_t cwnd = 0, ssthresh = ~0ull, recoveries = 0, rtos = 0;
  std::string state = "open";
  std::vector<Cut> cuts;  // every reduction
  uint64_t episodes = 0;  // cuts that began an episode
  uint64_t inside = 0;    // cuts inside an episode that moved ssthresh
  uint64_t deep = 0;      // cuts below beta x cwnd - 1 MSS (and above 2 MSS), before the tail
  uint64_t floor = 0;     // cuts to 2 MSS
  uint64_t min_ssthresh = ~0ull;

  void sample(Transfer& t) {
    struct Sink final : InfoSink {
      std::map<std::string, uint64_t, std::less<>> n;
      std::string ca_state, state;
      void text(std::string_view k, std::string_view v) override {
        if (k == "ca_state") ca_state = v;
        if (k == "state") state = v;
      }
      void number(std::string_view k, uint64_t v) override { n[std::string(k)] = v; }
    } k;
    if (t.fa == kNoFlow || !t.net->a().transport().flow_info(t.fa, k)) return;
    const uint64_t st = k.n.count("ssthresh") != 0 ? k.n["ssthresh"] : ~0ull;
    const uint64_t fr = k.n["fast_recoveries"], rt = k.n["rtos"];
    if (k.n.count("mss") == 0) return;  // TIME_WAIT: the window is gone
    mss = k.n["mss"];
    // A reduction: a fast recovery or an RTO began, or ssthresh fell (a probe's repair).
    if (fr > recoveries || rt > rtos || st < ssthresh) {
      Cut c;
      c.at_ns = t.net->now_ns() - t.connected_ns;
      c.from = state;
      c.to = k.ca_state;
      c.cwnd = cwnd;
      c.ssthresh = st;
      c.in_flight = k.n["bytes_in_flight"];
      c.new_episode = fr > recoveries || (state != "recovery" && state != "loss" &&
                                          (rt > rtos || k.ca_state == "open"));
      c.moved = st != ssthresh;
      c.tail = k.state != "ESTABLISHED" && k.state != "CLOSE-WAIT";
      if (c.new_episode) {
        episodes++;
      } else if (c.moved) {
        inside++;
      }
      if (st <= 2 * mss) {
        floor++;
      } else if (!c.tail && double(st) < beta * double(cwnd) - double(mss)) {
        c.deep = true;
        deep++;
      }
      min_ssthresh = std::min(min_ssthresh, st);
      cuts.push_back(c);
    }
    ssthresh = st;
    cwnd = k.n["cwnd"];
    recoveries = fr;
    rtos = rt;
    state = k.ca_state;
  }
  static std::string describe(const Cut& c) {
    return std::to_string(double(c.at_ns) / 1e6) + " ms " + c.from + " -> " + c.to + ": cwnd " +
           std::to_string(c.cwnd) + " -> ssthresh " + std::to_string(c.ssthresh) + " (in flight " +
           std::to_string(c.in_flight) + ")" +
           (c.new_episode ? ""
            : c.moved     ? " inside an episode"
                          : " inside an episode, kept");
  }
};

}  // namespace cleave::transport::tcp::test
