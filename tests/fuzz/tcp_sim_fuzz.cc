// tcp_sim_fuzz.cc - a TCP connection between the two hosts of the simulated network (tests/sim):
// the real transport (src/transport/tcp) over the real NIC model on both ends, the apps driven
// by the input, and an attacker on the wire (sim_attack.h) that forges segments from the ones it
// sees: sequence and acknowledgment numbers moved, flags, windows, options, lengths and data
// offsets changed, checksums right or wrong. The link's own faults (loss, reordering,
// duplication, bit flips, truncation) are set from the input too.
//
// Segments reach the transport through the NIC model's parser and placement (zero copy) or the
// copy path, as in cleaved, so TCP's header and option parsing, its input state machine, SACK,
// the message option, RST and window checks all see hostile input in real connection states.
//
// Invariants, beyond "no crash": events name the flows they belong to; a send completes with the
// length it was given and in order; a receive completes in order with no more than it was given;
// in a byte stream, every byte the receiver gets is the sender's byte at that stream position,
// unless the attacker forged a data segment with valid checksums (which a receiver cannot tell
// from a real one); after both apps abort, the wire falls silent (no ACK storm) and once the
// timers run out no flow is left in either transport or host.
#include <array>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "sim_attack.h"
#include "sim_net.h"
#include "transport/tcp/tcp.h"

namespace cleave::fuzz {
namespace {

using sim::Dir;
using transport::EventKind;
using transport::FlowId;
using transport::kNoFlow;
using transport::ReqKind;

constexpr uint32_t kSlot = 16384;  // one app send or receive buffer
constexpr uint32_t kSlots = 8;     // each side's MR holds this many
constexpr uint16_t kPort = 80;

// A byte of the stream in direction `dir` at offset `off`: what the sender writes and the
// receiver must get.
uint8_t stream_byte(int dir, uint64_t off) {
  const uint64_t x = (off + uint64_t(dir) * 0x5bd1e995) * 0x9E3779B97F4A7C15ull;
  return uint8_t(x >> 56);
}

// One app request in flight: its buffer slot and length.
struct Pending {
  uint64_t wr_id;
  uint32_t slot;
  uint32_t len;
};

struct Side {
  sim::Host* h = nullptr;
  int dir = 0;  // the stream this side sends: 0 A -> B, 1 B -> A
  uint16_t mr = 0;
  FlowId flow = kNoFlow;
  bool closed = false;
  bool fin = false;  // the app closed its side: no more sends (they would be refused, and the
                     // stream offsets of the ones after them would be wrong)
  uint64_t next_wr = 0;
  std::vector<Pending> sends, recvs;              // in flight, oldest first
  uint64_t sent = 0;                              // stream bytes submitted
  uint64_t last_send_ok = 0, last_recv_data = 0;  // 1 + the wr_id of the last such completion
  uint64_t received = 0;                          // stream bytes completed in order
  std::vector<FlowId> extra;  // more flows accepted: connections the attacker completed

  // The slot of no request in flight, or kSlots.
  uint32_t free_slot() const {
    for (uint32_t k = 0; k < kSlots; k++) {
      bool used = false;
      for (const auto* q : {&sends, &recvs})
        for (const Pending& p : *q)
          used |= p.slot == k;
      if (!used) return k;
    }
    return kSlots;
  }
  // Takes the request `wr_id` out of `q`; it must be there (each completes exactly once).
  static Pending take(std::vector<Pending>& q, uint64_t wr_id) {
    for (size_t i = 0; i < q.size(); i++) {
      if (q[i].wr_id == wr_id) {
        const Pending p = q[i];
        q.erase(q.begin() + ptrdiff_t(i));
        return p;
      }
    }
    FUZZ_CHECK(!"a completion for no request in flight");
  }
};

struct Harness {
  std::unique_ptr<sim::SimNet> net;
  std::unique_ptr<Attacker> atk;
  std::array<Side, 2> side;
  std::array<bool, 2> forged_data{};  // forged data segments that pass checksums, into side i
  bool messages = false;
  std::vector<std::string> texts;  // storage for the params' strings
  std::vector<transport::Param> params;

  void event(Side& s, const transport::Event& e) {
    if (e.kind == EventKind::kAccepted) {
      if (s.flow == kNoFlow && !s.closed) {
        s.flow = e.flow;
      } else {
        s.extra.push_back(e.flow);  // the app takes it too, and aborts it at the end
      }
      return;
    }
    if (e.flow != s.flow) {  // a flow the attacker opened
      if (e.kind == EventKind::kClosed) std::erase(s.extra, e.flow);
      return;
    }
    switch (e.kind) {
      case EventKind::kSendDone: {
        // Refused sends complete at once; the accepted ones in order, each with its length.
        const Pending p = Side::take(s.sends, e.wr_id);
        if (e.status == 0) {
          FUZZ_CHECK(e.len == p.len && e.wr_id + 1 > s.last_send_ok);
          s.last_send_ok = e.wr_id + 1;
        }
        break;
      }
      case EventKind::kRecvDone: {
        // A buffer with data, whatever its status, holds the next bytes of the stream.
        const Pending p = Side::take(s.recvs, e.wr_id);
        FUZZ_CHECK(e.len <= p.len);
        if (e.len == 0) break;
        FUZZ_CHECK(e.wr_id + 1 > s.last_recv_data);
        s.last_recv_data = e.wr_id + 1;
        if (!messages && !forged_data[size_t(&s - side.data())]) {
          const uint8_t* d = s.h->mr(s.mr).data() + size_t(p.slot) * kSlot;
          const int dir = 1 - s.dir;
          for (uint32_t i = 0; i < e.len; i++)
            FUZZ_CHECK(d[i] == stream_byte(dir, s.received + i));
        }
        s.received += e.len;
        break;
      }
      case EventKind::kClosed:
      case EventKind::kRefused:
        s.closed = true;
        break;
      default:
        break;
    }
  }

  void send(Side& s, uint32_t len) {
    const uint32_t slot = s.free_slot();
    if (s.flow == kNoFlow || s.closed || s.fin || slot == kSlots) return;
    uint8_t* p = s.h->mr(s.mr).data() + size_t(slot) * kSlot;
    for (uint32_t i = 0; i < len; i++)
      p[i] = stream_byte(s.dir, s.sent + i);
    s.sends.push_back({s.next_wr, slot, len});
    s.h->submit({s.flow, ReqKind::kSend, s.mr, len, uint64_t(slot) * kSlot, s.next_wr++, 0});
    s.sent += len;
  }

  void recv(Side& s, uint32_t len) {
    const uint32_t slot = s.free_slot();
    if (s.flow == kNoFlow || s.closed || slot == kSlots) return;
    s.recvs.push_back({s.next_wr, slot, len});
    s.h->submit({s.flow, ReqKind::kRecv, s.mr, len, uint64_t(slot) * kSlot, s.next_wr++, 0});
  }

  void param(std::string k, std::string v) {
    texts.push_back(std::move(k));
    texts.push_back(std::move(v));
  }
};

}  // namespace
}  // namespace cleave::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cleave;
  using namespace cleave::fuzz;
  Reader r(data, size);
  Harness h;
  const uint8_t setup = r.u8();
  h.messages = (setup & 2) != 0;
  // Short timers, so every flow ends within the run's last phase.
  h.param("rto_initial_ms", "20");
  h.param("rto_max_ms", "200");
  h.param("retries", "4");
  h.param("syn_retries", "3");
  h.param("time_wait_ms", "100");
  h.param("fin_wait2_ms", "200");
  h.param("isn", std::to_string(r.u32()));
  if (h.messages) h.param("message", "on");
  if (setup & 4) h.param("sack", "off");
  if (setup & 8) h.param("timestamps", "off");
  if (setup & 16) h.param("ecn", "on");
  h.param("cc", (setup & 32) ? "cubic" : (setup & 64) ? "dctcp" : "newreno");
  for (size_t i = 0; i < h.texts.size(); i += 2)
    h.params.push_back({h.texts[i], h.texts[i + 1]});

  sim::HostConfig a, b;
  a.transport = std::make_unique<transport::tcp::TcpTransport>();
  b.transport = std::make_unique<transport::tcp::TcpTransport>();
  a.zero_copy = b.zero_copy = (setup & 1) == 0;
  a.nic.max_flows = b.nic.max_flows = 16;  // small tables: one is built per input
  a.nic.max_mrs = b.nic.max_mrs = 4;
  a.nic.ms_store_entries = b.nic.ms_store_entries = 256;
  b.nic_messages = (setup & 128) == 0;
  a.on_event = [&h](const transport::Event& e) { h.event(h.side[0], e); };
  b.on_event = [&h](const transport::Event& e) { h.event(h.side[1], e); };
  sim::LinkConfig link;
  link.mtu = 1500;
  h.net = std::make_unique<sim::SimNet>(1, link, sim::Faults{}, sim::Faults{}, std::move(a),
                                        std::move(b));
  h.net->set_tick_ns(1'000'000);  // idle time in 1 ms steps: the transports' timer tick
  h.atk = std::make_unique<Attacker>(*h.net);
  for (int i = 0; i < 2; i++) {
    Side& s = h.side[size_t(i)];
    s.h = i == 0 ? &h.net->a() : &h.net->b();
    s.dir = i;
    s.mr = s.h->add_mr(size_t(kSlot) * kSlots);
  }
  FUZZ_CHECK(h.net->b().listen(1, kPort, h.params) == 0);
  int err = 0;
  h.side[0].flow = h.net->a().connect(5000, h.net->b().endpoint(kPort), 6, h.params, &err);
  FUZZ_CHECK(err == 0 && h.side[0].flow != kNoFlow);

  while (!r.done()) {
    const uint8_t op = r.u8();
    Side& s = h.side[op >> 7];
    switch (op % 8) {
      case 0:
        h.net->run_for(uint64_t(r.u16()) * 1000);
        break;
      case 1:
        h.send(s, 1 + r.u16() % kSlot);
        break;
      case 2:
        h.recv(s, 1 + r.u16() % kSlot);
        break;
      case 3: {  // a forged segment towards this side
        const Dir d = &s == &h.side[1] ? Dir::kAtoB : Dir::kBtoA;
        if (h.atk->forge(r, d)) h.forged_data[op >> 7] = true;
        break;
      }
      case 4:  // the link's own faults towards this side
        faults_from(r, h.net->faults(&s == &h.side[1] ? Dir::kAtoB : Dir::kBtoA));
        break;
      case 5:
        if (s.flow != kNoFlow && !s.closed) {
          s.h->submit({s.flow, ReqKind::kClose, 0, 0, 0, 0, 0});
          s.fin = true;
        }
        break;
      case 6:
        if ((r.u8() & 7) == 0 && s.flow != kNoFlow && !s.closed) {
          s.h->submit({s.flow, ReqKind::kAbort, 0, 0, 0, 0, 0});
        }
        break;
      default:
        h.net->run_for(50'000);
        break;
    }
  }
  // Settle, then abort what is left and let every timer run out.
  h.net->run_for(20'000'000);
  for (Side& s : h.side) {
    if (s.flow != kNoFlow && !s.closed) s.h->submit({s.flow, ReqKind::kAbort, 0, 0, 0, 0, 0});
    for (FlowId f : s.extra)
      s.h->submit({f, ReqKind::kAbort, 0, 0, 0, 0, 0});
  }
  for (Dir d : {Dir::kAtoB, Dir::kBtoA})
    h.net->faults(d) = sim::Faults{};
  const uint64_t before = h.net->stats(Dir::kAtoB).sent + h.net->stats(Dir::kBtoA).sent;
  h.net->set_tick_ns(20'000'000);
  h.net->run_for(5'000'000'000);
  // Aborted flows send their RSTs and fall silent; ends that disagree answer each other at
  // most a couple of times a second (no ACK storm).
  FUZZ_CHECK(h.net->stats(Dir::kAtoB).sent + h.net->stats(Dir::kBtoA).sent - before <= 64);
  for (Side& s : h.side) {
    FUZZ_CHECK(s.h->transport().flow_count() == 0);
    FUZZ_CHECK(s.h->flows_open() == 0);
  }
  return 0;
}
