// tb_rx_parser.cc - cleave_rx_parser against the model: random frames of every kind (TCP with
// options, UDP, RoCEv2, Solar, IPv4 options, other protocols, garbage) with the fault matrix's
// byte faults, random backpressure on all three streams. For each frame: the pass-through
// frame is the input byte for byte; the verdict, checksum statuses, payload place and TCP
// sequence are the model's (NicModel::rx with a flow for the frame's key); the ICRC and Solar
// CRC verdicts are the model's wire library's; the key, ports, flags and header bytes are the
// frame's. CLEAVE_RTL_FRAMES sets the count.
#include <memory>

#include "Vcleave_rx_parser.h"
#include "nic_model.h"
#include "tb_common.h"
#include "tb_frames.h"

using namespace cleave::tb;
namespace nic = cleave::nic;
namespace wire = cleave::wire;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;

// rx_meta_t (cleave_types.svh), most significant field first.
struct Meta {
  uint64_t frame_len, pdefer, ip_csum, l4_csum, udp, src_ip, dst_ip, sport, dport, pay_off, pay_len,
      tcp_seq, tcp_flags, tcp_hlen;
  Bytes tcp_opt, l7;
  uint64_t icrc_ok, crc32c_ok;
};
constexpr unsigned kMetaBits =
    16 + 5 + 2 + 2 + 1 + 32 + 32 + 16 + 16 + 8 + 16 + 32 + 8 + 6 + 320 + 256 + 1 + 1;

template <typename T>
Meta decode_meta(const T& v) {
  Meta m;
  unsigned at = kMetaBits;
  auto take = [&](unsigned w) {
    at -= w;
    return get_bits(v, at, w);
  };
  auto take_bytes = [&](unsigned n) {
    at -= 8 * n;
    Bytes b(n);
    for (unsigned i = 0; i < n; i++)
      b[i] = uint8_t(get_bits(v, at + 8 * i, 8));
    return b;
  };
  m.frame_len = take(16);
  m.pdefer = take(5);
  m.ip_csum = take(2);
  m.l4_csum = take(2);
  m.udp = take(1);
  m.src_ip = take(32);
  m.dst_ip = take(32);
  m.sport = take(16);
  m.dport = take(16);
  m.pay_off = take(8);
  m.pay_len = take(16);
  m.tcp_seq = take(32);
  m.tcp_flags = take(8);
  m.tcp_hlen = take(6);
  m.tcp_opt = take_bytes(40);
  m.l7 = take_bytes(32);
  m.icrc_ok = take(1);
  m.crc32c_ok = take(1);
  TB_CHECK(at == 0, "meta layout");
  return m;
}

Bytes make_frame(Rng& rng) {
  IpOpts ipo;
  ipo.ihl = rng.chance(0.7) ? 5 : unsigned(5 + rng.below(11));
  ipo.src = uint32_t(rng.u64());
  ipo.dst = uint32_t(rng.u64());
  ipo.frag = rng.chance(0.9) ? 0x4000 : uint16_t(rng.u64());
  ipo.tos = uint8_t(rng.u64());
  ipo.ttl = uint8_t(rng.u64());
  size_t plen = rng.chance(0.05) ? rng.below(9000) : rng.below(1500);
  Bytes f;
  switch (rng.below(8)) {
    case 0:
    case 1:
      f = tcp_frame(uint32_t(rng.u64()), random_bytes(rng, plen), random_tcp_options(rng),
                    uint8_t(rng.u64()), uint16_t(rng.u64()), uint16_t(rng.u64()), ipo);
      break;
    case 2:
      f = udp_frame(uint16_t(rng.u64()), uint16_t(rng.u64()), random_bytes(rng, plen),
                    rng.chance(0.7), ipo);
      break;
    case 3:
    case 4: {
      uint8_t op = uint8_t(rng.chance(0.8) ? rng.below(0x18) : rng.u64());
      Bytes ext = random_bytes(rng, rng.below(5) * 4);
      f = roce_frame(op, uint32_t(rng.u64()), uint32_t(rng.u64()), ext, random_bytes(rng, plen),
                     uint16_t(rng.u64()), ipo);
      break;
    }
    case 5:
      f = solar_frame(uint8_t(rng.below(7)), uint32_t(rng.u64()), uint32_t(rng.u64()), rng.u64(),
                      uint32_t(rng.u64()), random_bytes(rng, plen),
                      rng.chance(0.5) ? kSolarPort : uint16_t(rng.u64()), uint16_t(rng.u64()), ipo);
      break;
    case 6:
      f = ipv4_frame(uint8_t(rng.u64()), random_bytes(rng, plen), ipo);
      break;
    default:
      f = random_bytes(rng, rng.below(200));
      if (f.size() > 13 && rng.chance(0.5)) wire::store16(&f[12], 0x0800);
      break;
  }
  if (rng.chance(0.3)) corrupt(rng, f);
  if (rng.chance(0.1)) corrupt(rng, f);
  return f;
}

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Vcleave_rx_parser> top;
  Rng rng;
  AxisSource<TB_SIG(Vcleave_rx_parser, s_axis_tdata), TB_SIG(Vcleave_rx_parser, s_axis_tkeep)> src;
  AxisSink<TB_SIG(Vcleave_rx_parser, m_axis_tdata), TB_SIG(Vcleave_rx_parser, m_axis_tkeep)> sink;
  std::deque<Meta> metas;
  double meta_stall = 0.3;

  static Vcleave_rx_parser* make(VerilatedContext* c, uint64_t seed) {
    c->randReset(2);
    c->randSeed(int(seed & 0x7FFFFFFF));
    return new Vcleave_rx_parser(c);
  }
  explicit Bench(uint64_t seed)
      : top(make(ctx.get(), seed)),
        rng(seed),
        src(kNb, &top->s_axis_tdata, &top->s_axis_tkeep, &top->s_axis_tvalid, &top->s_axis_tlast,
            &top->s_axis_tready),
        sink("frames", kNb, &top->m_axis_tdata, &top->m_axis_tkeep, &top->m_axis_tvalid,
             &top->m_axis_tlast, &top->m_axis_tready) {}

  void cycle() {
    src.drive(rng);
    sink.drive(rng);
    top->m_meta_ready = rng.chance(meta_stall) ? 0 : 1;
    top->clk = 0;
    top->eval();
    if (!top->rst) {
      src.fire();
      sink.fire();
      if (top->m_meta_valid && top->m_meta_ready) metas.push_back(decode_meta(top->m_meta));
    }
    top->clk = 1;
    top->eval();
  }
  void reset() {
    top->rst = 1;
    for (int i = 0; i < 8; i++)
      cycle();
    top->rst = 0;
  }
};

// What the model says of a frame: a model with one flow for the frame's key (TCP parser for
// TCP, UDP parser otherwise), so a frame that parses reaches the flow and reports its payload.
struct Expect {
  bool parsed = false;
  nic::RxEntry e;
};

Expect model_view(nic::NicModel& m, const Bytes& f) {
  Expect x;
  nic::FlowSpec s;
  bool flow = false;
  if (f.size() >= 14 + 20) {
    const size_t hl = ip_hlen(f);
    const uint8_t proto = f[14 + 9];
    if ((proto == 6 || proto == 17) && f.size() >= 14 + hl + 4 && hl >= 20) {
      s.key = {wire::load32(&f[26]), wire::load32(&f[30]), wire::load16(&f[14 + hl]),
               wire::load16(&f[14 + hl + 2]), proto};
      s.parser = proto == 6 ? nic::Parser::kTcp : nic::Parser::kUdp;
      flow = m.flow_add(0, s) == nic::Err::kOk;
    }
  }
  m.rx(f, x.e);
  if (flow) m.flow_remove(0);
  x.parsed = x.e.flow_id != nic::kNoFlow || x.e.reason == nic::DeferReason::kFlowMiss;
  return x;
}

// How often each check ran with each outcome: a run that never saw a good ICRC proves nothing.
struct Stats {
  uint64_t parsed = 0, defer[32] = {}, icrc[2] = {}, crc32c[2] = {}, tcp = 0, l4_checked = 0;
} g_stats;

void check_frame(uint64_t n, const Bytes& f, const Meta& g, nic::NicModel& m) {
  TB_CHECK(g.frame_len == f.size(), "frame %" PRIu64 ": length %" PRIu64 " want %zu", n,
           g.frame_len, f.size());
  Expect x = model_view(m, f);
  const uint64_t want_defer = x.parsed ? 0 : uint64_t(x.e.reason);
  if (std::getenv("CLEAVE_RTL_TRACE") && g.pdefer != want_defer) {
    std::fprintf(stderr, "frame %zu bytes:", f.size());
    for (size_t i = 0; i < f.size() && i < 64; i++)
      std::fprintf(stderr, " %02x", f[i]);
    std::fprintf(stderr, "\n");
  }
  TB_CHECK(g.pdefer == want_defer,
           "frame %" PRIu64 " (%zu bytes): verdict %" PRIu64 " want %" PRIu64, n, f.size(),
           g.pdefer, want_defer);
  TB_CHECK(g.ip_csum == uint64_t(x.e.ip_csum), "frame %" PRIu64 ": ip csum", n);
  TB_CHECK(g.l4_csum == uint64_t(x.e.l4_csum), "frame %" PRIu64 ": l4 csum %" PRIu64 " want %d", n,
           g.l4_csum, int(x.e.l4_csum));
  g_stats.defer[want_defer]++;
  g_stats.l4_checked += x.e.l4_csum != nic::CsumStatus::kNotChecked;
  if (!x.parsed) return;
  g_stats.parsed++;
  const size_t hl = ip_hlen(f);
  const uint8_t* l4 = &f[14 + hl];
  const bool tcp = f[23] == 6;
  TB_CHECK(g.udp == !tcp, "frame %" PRIu64 ": protocol", n);
  TB_CHECK(g.src_ip == wire::load32(&f[26]) && g.dst_ip == wire::load32(&f[30]), "addresses");
  TB_CHECK(g.sport == wire::load16(l4) && g.dport == wire::load16(l4 + 2), "ports");
  TB_CHECK(g.pay_len == x.e.payload_len, "frame %" PRIu64 ": payload %" PRIu64 " want %u", n,
           g.pay_len, x.e.payload_len);
  TB_CHECK(g.pay_off == x.e.header_len, "frame %" PRIu64 ": payload at %" PRIu64 " want %u", n,
           g.pay_off, x.e.header_len);
  if (tcp) {
    g_stats.tcp++;
    TB_CHECK(g.tcp_seq == x.e.seq, "frame %" PRIu64 ": seq", n);
    TB_CHECK(g.tcp_flags == l4[13], "flags");
    TB_CHECK(g.tcp_hlen == size_t(l4[12] >> 4) * 4, "TCP header length");
    for (size_t i = 20; i < g.tcp_hlen; i++)
      TB_CHECK(g.tcp_opt[i - 20] == l4[i], "frame %" PRIu64 ": option byte %zu", n, i);
  } else {
    const uint8_t* u = l4 + 8;
    for (size_t i = 0; i < 32 && i < g.pay_len; i++)
      TB_CHECK(g.l7[i] == u[i], "frame %" PRIu64 ": UDP payload byte %zu", n, i);
    const uint32_t total = wire::load16(&f[16]);
    if (g.pay_len >= 16) {
      const bool ok = wire::roce_icrc_ok(&f[14], total);
      TB_CHECK(g.icrc_ok == ok, "frame %" PRIu64 ": ICRC verdict %" PRIu64 " want %d", n, g.icrc_ok,
               ok);
      g_stats.icrc[ok]++;
    }
    if (g.pay_len >= 32) {
      const bool ok = wire::crc32c(u + 32, g.pay_len - 32) == wire::load32(u + 28);
      TB_CHECK(g.crc32c_ok == ok, "frame %" PRIu64 ": CRC-32C verdict %" PRIu64 " want %d", n,
               g.crc32c_ok, ok);
      g_stats.crc32c[ok]++;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_rx_parser");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t frames = env_u64("CLEAVE_RTL_FRAMES", 20000);
  nic::NicConfig cfg;
  cfg.roce_write_ctxs = 1;  // the RTL keeps the flow entry's WRITE context only
  cfg.max_flows = 4;
  cfg.max_mrs = 4;
  cfg.ms_store_entries = 64;
  nic::NicModel model(cfg);

  b.reset();
  std::deque<Bytes> sent;
  uint64_t made = 0, checked = 0, idle = 0;
  while (checked < frames) {
    // Phases of heavy and light backpressure.
    if (b.rng.chance(0.001)) {
      double p = b.rng.chance(0.5) ? 0.0 : b.rng.chance(0.5) ? 0.3 : 0.8;
      b.src.set_stall(p);
      b.sink.set_stall(b.rng.chance(0.5) ? 0.0 : 0.5);
      b.meta_stall = b.rng.chance(0.5) ? 0.0 : 0.6;
    }
    while (made < frames && b.src.queued() < 4) {
      Bytes f = make_frame(b.rng);
      if (f.empty()) continue;  // AXI-Stream has no empty frames
      b.src.push(f);
      sent.push_back(std::move(f));
      made++;
    }
    b.cycle();
    idle++;
    while (!b.sink.empty() && !b.metas.empty()) {
      Bytes got = b.sink.pop();
      TB_CHECK(got == sent.front(), "frame %" PRIu64 ": pass-through differs", checked);
      check_frame(checked, sent.front(), b.metas.front(), model);
      sent.pop_front();
      b.metas.pop_front();
      checked++;
      idle = 0;
    }
    TB_CHECK(idle < 100000, "no frame for 100000 cycles");
  }
  const Stats& s = g_stats;
  std::printf("tb_rx_parser: ok, %" PRIu64 " frames at %u bits: %" PRIu64 " parsed (%" PRIu64
              " TCP), %" PRIu64 " L4 checksums checked, ICRC good/bad %" PRIu64 "/%" PRIu64
              ", CRC-32C good/bad %" PRIu64 "/%" PRIu64 "; deferred by parse:",
              checked, TB_DATA_WIDTH, s.parsed, s.tcp, s.l4_checked, s.icrc[1], s.icrc[0],
              s.crc32c[1], s.crc32c[0]);
  for (unsigned r = 1; r < 32; r++)
    if (s.defer[r] != 0)
      std::printf(" %s %" PRIu64, std::string(nic::defer_reason_name(nic::DeferReason(r))).c_str(),
                  s.defer[r]);
  std::printf("\n");
  // Every outcome must have happened, or the run checked less than it claims.
  if (checked >= 5000) {
    TB_CHECK(s.icrc[0] && s.icrc[1] && s.crc32c[0] && s.crc32c[1] && s.tcp, "outcomes missing");
  }
  return 0;
}
