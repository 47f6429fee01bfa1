// tb_rx.cc - the receive side (cleave_rx: parser, engine, frame buffer, outputs) against the
// model: seeded rounds of driver commands and faulted traffic from flows of every kind
// (tb_scenario.h). Compared for every command: the Err (and the MR id of RKEY_CHECK, the
// figures of a flow query); for every frame: each field of the RX entry, the fragments with
// their DMA addresses, the header bytes, the copy-path frame, every DMA write's address and
// bytes; every few rounds: all counters, flows in use, free store chunks, and host memory as
// the RTL's DMA writes left it against the model's. Random backpressure on every stream.
// CLEAVE_RTL_FRAMES sets the number of frames (default 20000).
#include <memory>

#include "Vcleave_rx.h"
#include "tb_common.h"
#include "tb_scenario.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
using Top = Vcleave_rx;

struct Frag {
  uint64_t mr, off, len, addr;
};

// rx_dec_t (cleave_types.svh), most significant field first.
struct Dec {
  uint64_t flow_id, decision, reason, parser, seq, payload_len, header_len, nfrags, ooo, ip_csum,
      l4_csum, trimmed, placed, msg_seq, data_off;
  Frag frags[4];
};
constexpr unsigned kDecBits =
    24 + 3 + 5 + 2 + 32 + 16 + 8 + 3 + 1 + 2 + 2 + 16 + 16 + 32 + 16 + 576;

template <typename T>
Frag decode_frag(const T& v, unsigned lsb) {
  Frag f;
  f.addr = get_bits(v, lsb, 64);
  f.len = get_bits(v, lsb + 64, 16);
  f.off = get_bits(v, lsb + 80, 48);
  f.mr = get_bits(v, lsb + 128, 16);
  return f;
}

template <typename T>
Dec decode_dec(const T& v) {
  Dec d;
  unsigned at = kDecBits;
  auto take = [&](unsigned w) {
    at -= w;
    return get_bits(v, at, w);
  };
  d.flow_id = take(24);
  d.decision = take(3);
  d.reason = take(5);
  d.parser = take(2);
  d.seq = take(32);
  d.payload_len = take(16);
  d.header_len = take(8);
  d.nfrags = take(3);
  d.ooo = take(1);
  d.ip_csum = take(2);
  d.l4_csum = take(2);
  d.trimmed = take(16);
  d.placed = take(16);
  d.msg_seq = take(32);
  d.data_off = take(16);
  TB_CHECK(at == 576, "rx_dec_t layout");
  for (unsigned i = 0; i < 4; i++)
    d.frags[i] = decode_frag(v, 144 * i);
  return d;
}

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Top> top;
  Rng rng;
  AxisSource<TB_SIG(Top, s_axis_tdata), TB_SIG(Top, s_axis_tkeep)> src;
  AxisSink<TB_SIG(Top, m_axis_hdr_tdata), TB_SIG(Top, m_axis_hdr_tkeep)> hdr;
  AxisSink<TB_SIG(Top, m_axis_copy_tdata), TB_SIG(Top, m_axis_copy_tkeep)> copy;
  AxisSink<TB_SIG(Top, m_axis_pay_tdata), TB_SIG(Top, m_axis_pay_tkeep)> pay;
  std::deque<std::pair<Frag, bool>> descs;
  std::deque<Dec> cpls;
  double desc_stall = 0.3, cpl_stall = 0.3;
  // command channel
  bool cmd_pending = false;
  bool rsp_seen = false;
  uint8_t rsp_err = 0;
  uint16_t rsp_mr = 0;
  uint32_t rsp_ms = 0, rsp_cursor = 0, rsp_reads = 0;
  uint64_t cycles = 0;

  explicit Bench(uint64_t seed)
      : top(make_top<Top>(ctx.get(), seed)),
        rng(seed ^ 0x5DEECE66Dull),
        src(kNb, &top->s_axis_tdata, &top->s_axis_tkeep, &top->s_axis_tvalid, &top->s_axis_tlast,
            &top->s_axis_tready),
        hdr("hdr", kNb, &top->m_axis_hdr_tdata, &top->m_axis_hdr_tkeep, &top->m_axis_hdr_tvalid,
            &top->m_axis_hdr_tlast, &top->m_axis_hdr_tready),
        copy("copy", kNb, &top->m_axis_copy_tdata, &top->m_axis_copy_tkeep,
             &top->m_axis_copy_tvalid, &top->m_axis_copy_tlast, &top->m_axis_copy_tready),
        pay("pay", kNb, &top->m_axis_pay_tdata, &top->m_axis_pay_tkeep, &top->m_axis_pay_tvalid,
            &top->m_axis_pay_tlast, &top->m_axis_pay_tready) {
    top->tx_mr_addr = 0;
    top->tx_inc_en = 0;
    top->tx_inc_idx = 0;
    set_bits(top->tx_inc_amt, 0, 64, 0);
    set_bits(top->tx_inc_amt, 64, 64, 0);
    top->ctr_sel = 0;
    top->s_cmd_valid = 0;
  }

  void cycle() {
    src.drive(rng);
    hdr.drive(rng);
    copy.drive(rng);
    pay.drive(rng);
    top->m_desc_ready = rng.chance(desc_stall) ? 0 : 1;
    top->m_cpl_ready = rng.chance(cpl_stall) ? 0 : 1;
    top->s_cmd_valid = cmd_pending;
    top->clk = 0;
    top->eval();
    if (!top->rst) {
      src.fire();
      hdr.fire();
      copy.fire();
      pay.fire();
      if (top->m_desc_valid && top->m_desc_ready)
        descs.push_back({decode_frag(top->m_desc, 0), top->m_desc_last != 0});
      if (top->m_cpl_valid && top->m_cpl_ready) cpls.push_back(decode_dec(top->m_cpl));
      if (cmd_pending && top->s_cmd_ready) cmd_pending = false;
      if (top->m_rsp_valid) {
        TB_CHECK(!rsp_seen, "a second answer");
        rsp_seen = true;
        rsp_err = top->m_rsp_err;
        rsp_mr = top->m_rsp_mr;
        rsp_ms = top->m_rsp_ms_count;
        rsp_cursor = top->m_rsp_cursor;
        rsp_reads = top->m_rsp_read_count;
      }
    }
    top->clk = 1;
    top->eval();
    cycles++;
  }
  void reset() {
    top->rst = 1;
    for (int i = 0; i < 8; i++)
      cycle();
    top->rst = 0;
  }
  uint64_t counter(unsigned i) {
    top->ctr_sel = uint8_t(i);
    top->clk = 1;
    top->eval();
    return top->ctr_value;
  }
};

const bool g_trace = std::getenv("CLEAVE_RTL_TRACE") != nullptr;

void check_cmd(Bench& b, const Event& ev, uint64_t n) {
  if (g_trace) {
    std::printf("cmd %" PRIu64 ": op %u flow %u w2 %u want %s\n", n, unsigned(ev.cmd.b[0]),
                unsigned(cleave_nic_get(ev.cmd.b, CLEAVE_NIC_CMD_FLOW_LSB, 24)),
                unsigned(cleave_nic_get(ev.cmd.b, CLEAVE_NIC_CMD_W2_LSB, 32)),
                std::string(nic::err_name(ev.want)).c_str());
  }
  from_bytes(b.top->s_cmd_data, ev.cmd.b, CLEAVE_NIC_CMD_BYTES);
  b.cmd_pending = true;
  b.rsp_seen = false;
  for (uint64_t guard = 0; !b.rsp_seen; guard++) {
    TB_CHECK(guard < 2000000, "command %" PRIu64 " (op %u): no answer", n, unsigned(ev.cmd.b[0]));
    b.cycle();
  }
  const unsigned op = ev.cmd.b[0];
  if (ev.query) {
    TB_CHECK(b.rsp_ms == ev.q_ms && b.rsp_cursor == ev.q_cursor && b.rsp_reads == ev.q_reads,
             "flow query %u: ms %u/%u cursor %u/%u reads %u/%u",
             unsigned(cleave_nic_get(ev.cmd.b, CLEAVE_NIC_CMD_FLOW_LSB, 24)), b.rsp_ms, ev.q_ms,
             b.rsp_cursor, ev.q_cursor, b.rsp_reads, ev.q_reads);
    return;
  }
  TB_CHECK(b.rsp_err == uint8_t(ev.want), "command %" PRIu64 " (op %u flow %u): RTL %s, model %s",
           n, op, unsigned(cleave_nic_get(ev.cmd.b, CLEAVE_NIC_CMD_FLOW_LSB, 24)),
           std::string(nic::err_name(nic::Err(b.rsp_err))).c_str(),
           std::string(nic::err_name(ev.want)).c_str());
  if (op == CLEAVE_NIC_CMD_RKEY_CHECK && ev.want == nic::Err::kOk)
    TB_CHECK(b.rsp_mr == ev.want_mr, "rkey check MR %u want %u", b.rsp_mr, ev.want_mr);
}

struct Stats {
  uint64_t frames = 0, cmds = 0, decision[5] = {}, reason[32] = {}, err[16] = {}, frags[5] = {};
  uint64_t by_parser[4][5] = {};    // flows' frames: parser x decision
  uint64_t why_parser[4][32] = {};  // and why deferred
} g_stats;

void check_frame(Bench& b, Scenario& sc, Bytes& rtl_mem, const Event& ev, const Dec& d,
                 uint64_t n) {
  const nic::RxEntry& e = ev.entry;
  const uint64_t want_flow = e.flow_id == nic::kNoFlow ? 0xFFFFFF : e.flow_id;
#define FIELD(got, want)                                                                  \
  TB_CHECK(uint64_t(got) == uint64_t(want),                                               \
           "frame %" PRIu64 " (%zu bytes, %s/%s): " #got " %" PRIu64 " want %" PRIu64, n, \
           ev.frame.size(), std::string(nic::decision_name(e.decision)).c_str(),          \
           std::string(nic::defer_reason_name(e.reason)).c_str(), uint64_t(got), uint64_t(want))
  FIELD(d.flow_id, want_flow);
  FIELD(d.decision, e.decision);
  FIELD(d.reason, e.reason);
  FIELD(d.parser, e.parser);
  FIELD(d.seq, e.seq);
  FIELD(d.payload_len, e.payload_len);
  FIELD(d.header_len, e.header_len);
  FIELD(d.nfrags, e.nfrags);
  FIELD(d.ooo, e.out_of_order);
  FIELD(d.ip_csum, e.ip_csum);
  FIELD(d.l4_csum, e.l4_csum);
  FIELD(d.trimmed, e.trimmed);
  FIELD(d.placed, e.placed);
  FIELD(d.msg_seq, e.msg_seq);
  for (unsigned i = 0; i < e.nfrags; i++) {
    FIELD(d.frags[i].mr, e.frags[i].mr);
    FIELD(d.frags[i].off, e.frags[i].offset);
    FIELD(d.frags[i].len, e.frags[i].len);
    FIELD(d.frags[i].addr, sc.iova(e.frags[i].mr, e.frags[i].offset));
  }
#undef FIELD
  // the header slot
  if (e.header_len > 0) {
    TB_CHECK(!b.hdr.empty(), "frame %" PRIu64 ": no header bytes", n);
    Bytes h = b.hdr.pop();
    TB_CHECK(h.size() == e.header_len && std::equal(h.begin(), h.end(), e.header.begin()),
             "frame %" PRIu64 ": header bytes differ (%zu, want %u)", n, h.size(), e.header_len);
  }
  // the copy path
  if (e.decision == nic::Decision::kDeferred) {
    TB_CHECK(!b.copy.empty(), "frame %" PRIu64 ": not on the copy path", n);
    TB_CHECK(b.copy.pop() == ev.frame, "frame %" PRIu64 ": copy-path frame differs", n);
  }
  // DMA writes: one request per fragment, the payload bytes back to back
  if (e.placed > 0) {
    TB_CHECK(b.descs.size() >= e.nfrags, "frame %" PRIu64 ": %zu DMA requests", n, b.descs.size());
    TB_CHECK(!b.pay.empty(), "frame %" PRIu64 ": no payload", n);
    // The placed bytes are the frame's from the payload (where the header slot ends: a placed
    // frame's header is never cut at 192 bytes) plus the trimmed ones.
    Bytes p = b.pay.pop();
    const size_t from = size_t(e.header_len) + e.trimmed;
    TB_CHECK(from + e.placed <= ev.frame.size(), "frame %" PRIu64 ": placed bytes outside", n);
    TB_CHECK(p.size() == e.placed && std::equal(p.begin(), p.end(), ev.frame.begin() + long(from)),
             "frame %" PRIu64 ": payload bytes differ (%zu, want %u)", n, p.size(), e.placed);
    size_t at = 0;
    for (unsigned i = 0; i < e.nfrags; i++) {
      auto [f, last] = b.descs.front();
      b.descs.pop_front();
      TB_CHECK(f.addr == sc.iova(e.frags[i].mr, e.frags[i].offset) && f.len == e.frags[i].len,
               "frame %" PRIu64 ": DMA request %u", n, i);
      TB_CHECK(last == (i + 1 == e.nfrags), "frame %" PRIu64 ": last flag", n);
      TB_CHECK(f.addr >= kIovaBase && f.addr - kIovaBase + f.len <= rtl_mem.size(), "DMA address");
      std::copy(p.begin() + long(at), p.begin() + long(at + f.len),
                rtl_mem.begin() + long(f.addr - kIovaBase));
      at += f.len;
    }
  }
  g_stats.frames++;
  g_stats.decision[unsigned(e.decision)]++;
  g_stats.reason[unsigned(e.reason)]++;
  g_stats.frags[e.nfrags]++;
  if (e.flow_id != nic::kNoFlow) {
    g_stats.by_parser[unsigned(e.parser)][unsigned(e.decision)]++;
    g_stats.why_parser[unsigned(e.parser)][unsigned(e.reason)]++;
  }
}

void check_state(Bench& b, Scenario& sc, const Bytes& rtl_mem) {
  size_t i = 0;
  sc.model().for_each_counter([&](std::string_view name, uint64_t v) {
    uint64_t got = b.counter(unsigned(i));
    TB_CHECK(got == v, "counter %s: RTL %" PRIu64 ", model %" PRIu64, std::string(name).c_str(),
             got, v);
    i++;
  });
  TB_CHECK(b.top->flows_in_use == sc.model().flows_in_use(), "flows in use %u want %u",
           b.top->flows_in_use, sc.model().flows_in_use());
  TB_CHECK(b.top->store_free == sc.model().store_chunks_free(), "store chunks free %u want %u",
           b.top->store_free, sc.model().store_chunks_free());
  if (rtl_mem != sc.mem()) {
    size_t k = 0;
    while (rtl_mem[k] == sc.mem()[k])
      k++;
    fail("host memory differs from byte " + std::to_string(k));
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_rx");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t frames = env_u64("CLEAVE_RTL_FRAMES", 20000);
  Scenario sc(seed, built_geometry());
  Bytes rtl_mem = sc.mem();

  b.reset();
  uint64_t rounds = 0;
  while (g_stats.frames < frames) {
    if (b.rng.chance(0.02)) {  // phases of heavy and light backpressure
      double p = b.rng.chance(0.5) ? 0.0 : b.rng.chance(0.5) ? 0.3 : 0.8;
      b.src.set_stall(p);
      for (auto* s : {&b.hdr, &b.copy, &b.pay})
        s->set_stall(b.rng.chance(0.5) ? 0.0 : 0.5);
      b.desc_stall = b.rng.chance(0.5) ? 0.0 : 0.5;
      b.cpl_stall = b.rng.chance(0.5) ? 0.0 : 0.5;
    }
    // A flow query first (answered by the model as things are before the round).
    const bool query = b.rng.chance(0.2);
    Event q = query ? sc.query() : Event{};
    std::vector<Event> evs = sc.round();
    if (query) evs.insert(evs.begin(), q);
    // Commands run at quiescent points, one at a time; frames stream back to back.
    std::deque<const Event*> pending;
    for (const Event& ev : evs) {
      if (ev.is_cmd) {
        check_cmd(b, ev, g_stats.cmds++);
        g_stats.err[unsigned(ev.want)]++;
      } else {
        b.src.push(ev.frame);
        pending.push_back(&ev);
      }
    }
    for (uint64_t idle = 0; !pending.empty(); idle++) {
      TB_CHECK(idle < 2000000, "round %" PRIu64 ": %zu frames never completed", rounds,
               pending.size());
      b.cycle();
      while (!b.cpls.empty()) {
        Dec d = b.cpls.front();
        b.cpls.pop_front();
        check_frame(b, sc, rtl_mem, *pending.front(), d, g_stats.frames);
        pending.pop_front();
        idle = 0;
      }
    }
    TB_CHECK(b.hdr.empty() && b.copy.empty() && b.pay.empty() && b.descs.empty(),
             "round %" PRIu64 ": output left over", rounds);
    if (++rounds % 64 == 0) check_state(b, sc, rtl_mem);
  }
  check_state(b, sc, rtl_mem);
  const Stats& s = g_stats;
  std::printf("tb_rx: ok, %" PRIu64 " frames and %" PRIu64 " commands at %u bits, %" PRIu64
              " cycles; placed %" PRIu64 " trimmed %" PRIu64 " dropped %" PRIu64
              " deferred %" PRIu64 " no payload %" PRIu64 "; fragments 1/2/3/4: %" PRIu64
              "/%" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n  deferred by:",
              s.frames, s.cmds, TB_DATA_WIDTH, b.cycles, s.decision[0], s.decision[1],
              s.decision[2], s.decision[3], s.decision[4], s.frags[1], s.frags[2], s.frags[3],
              s.frags[4]);
  for (unsigned r = 1; r < 32; r++)
    if (s.reason[r])
      std::printf(" %s %" PRIu64, std::string(nic::defer_reason_name(nic::DeferReason(r))).c_str(),
                  s.reason[r]);
  const char* pn[] = {"tcp", "roce", "solar", "udp"};
  for (unsigned p = 0; p < 4; p++) {
    std::printf("\n  %s: placed %" PRIu64 " trimmed %" PRIu64 " dropped %" PRIu64
                " deferred %" PRIu64 " no payload %" PRIu64 " (",
                pn[p], s.by_parser[p][0], s.by_parser[p][1], s.by_parser[p][2], s.by_parser[p][3],
                s.by_parser[p][4]);
    for (unsigned r = 1; r < 32; r++)
      if (s.why_parser[p][r])
        std::printf(" %s %" PRIu64,
                    std::string(nic::defer_reason_name(nic::DeferReason(r))).c_str(),
                    s.why_parser[p][r]);
    std::printf(" )");
  }
  std::printf("\n  command results:");
  for (unsigned r = 0; r < 16; r++)
    if (s.err[r])
      std::printf(" %s %" PRIu64, std::string(nic::err_name(nic::Err(r))).c_str(), s.err[r]);
  std::printf("\n");
  // A long run that never saw one of these checked less than it claims.
  if (s.frames >= 5000) {
    TB_CHECK(s.decision[0] && s.decision[1] && s.decision[2] && s.decision[3] && s.decision[4],
             "a decision never happened");
    for (unsigned p = 0; p < 4; p++)
      TB_CHECK(s.by_parser[p][0] > 0, "no %s frame was placed", pn[p]);
    TB_CHECK(s.frags[2] && s.frags[3], "no payload straddled MSs");
    for (auto r : {nic::DeferReason::kOutOfSequence, nic::DeferReason::kBadLength,
                   nic::DeferReason::kBadPkey, nic::DeferReason::kUnsupported})
      TB_CHECK(s.reason[unsigned(r)] > 0, "no frame was deferred as %s",
               std::string(nic::defer_reason_name(r)).c_str());
    TB_CHECK(s.err[unsigned(nic::Err::kOk)] && s.err[unsigned(nic::Err::kBadArgument)],
             "command outcomes missing");
  }
  return 0;
}
