// tb_nic.cc - the whole unit (cleave_nic) as a driver sees it, against the model.
//
// The testbench is the host: it owns host memory (the MRs' bytes and three rings) behind a DMA
// engine that serves the unit's DMA writes and reads with random latency and backpressure, and
// it drives the unit only through its registers and streams. It sets up the RX split queue and
// the TX merge queue, runs every command through the command mailbox and every flow query
// through the debug block, feeds the same seeded rounds of commands and faulted traffic as
// tb_rx (tb_scenario.h) plus random TX requests (tb_txgen.h), and compares with the model:
// every RX completion in the ring (each field, slot, copy flag and phase bit through ring
// wraps), every header slot, every copy-path frame, every TX frame byte for byte, every TX
// completion in its ring, all 62 counters read through the counter block, flows in use and free
// store chunks through the debug block, and host memory. CLEAVE_RTL_FRAMES sets the number of
// received frames (default 5000).
//
// With CLEAVE_RTL_RATE=1 it prints figures instead (the `bench` suite; asserts nothing about
// speed): frames per cycle the unit sustains with nothing held back (no stall on any stream, DMA
// requests taken at once, the RX ring's consumer index returned as completions arrive), one flow
// at a time, from the first beat in to the last RX completion in host memory, every frame placed
// (or the run fails); median of five runs, beside the input's own bound (its beats per frame).
#include <algorithm>
#include <memory>

#include "Vcleave_nic.h"
#include "cleave_nic_hw.h"
#include "tb_common.h"
#include "tb_driver.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
using Top = Vcleave_nic;

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Top> top;
  Rng rng;
  AxilMaster<Top> axil;
  AxisSource<TB_SIG(Top, s_axis_rx_tdata), TB_SIG(Top, s_axis_rx_tkeep)> rx;
  AxisSink<TB_SIG(Top, m_axis_copy_tdata), TB_SIG(Top, m_axis_copy_tkeep)> copy;
  AxisSource<TB_SIG(Top, s_axis_txd_tdata), TB_SIG(Top, s_axis_txd_tkeep)> txd;
  AxisSink<TB_SIG(Top, m_axis_tx_tdata), TB_SIG(Top, m_axis_tx_tkeep)> tx;
  AxisSink<TB_SIG(Top, m_axis_dma_wr_tdata), TB_SIG(Top, m_axis_dma_wr_tkeep)> wr;
  AxisSource<TB_SIG(Top, s_axis_dma_rd_tdata), TB_SIG(Top, s_axis_dma_rd_tkeep)> rd;
  Bytes* mem = nullptr;  // the MRs' bytes
  Bytes rings = Bytes(kRingBytes, 0);
  std::deque<std::pair<uint64_t, uint32_t>> wr_reqs;  // the open write transaction's requests
  bool wr_have_last = false;
  bool rd_busy = false;
  double req_ready = 0.7;
  uint64_t cycles = 0, dma_writes = 0, dma_reads = 0;

  explicit Bench(uint64_t seed)
      : top(make_top<Top>(ctx.get(), seed)),
        rng(seed ^ 0x1234567ull),
        axil(top.get()),
        rx(kNb, &top->s_axis_rx_tdata, &top->s_axis_rx_tkeep, &top->s_axis_rx_tvalid,
           &top->s_axis_rx_tlast, &top->s_axis_rx_tready),
        copy("copy", kNb, &top->m_axis_copy_tdata, &top->m_axis_copy_tkeep,
             &top->m_axis_copy_tvalid, &top->m_axis_copy_tlast, &top->m_axis_copy_tready),
        txd(kNb, &top->s_axis_txd_tdata, &top->s_axis_txd_tkeep, &top->s_axis_txd_tvalid,
            &top->s_axis_txd_tlast, &top->s_axis_txd_tready),
        tx("tx", kNb, &top->m_axis_tx_tdata, &top->m_axis_tx_tkeep, &top->m_axis_tx_tvalid,
           &top->m_axis_tx_tlast, &top->m_axis_tx_tready),
        wr("dma_wr", kNb, &top->m_axis_dma_wr_tdata, &top->m_axis_dma_wr_tkeep,
           &top->m_axis_dma_wr_tvalid, &top->m_axis_dma_wr_tlast, &top->m_axis_dma_wr_tready),
        rd(kNb, &top->s_axis_dma_rd_tdata, &top->s_axis_dma_rd_tkeep, &top->s_axis_dma_rd_tvalid,
           &top->s_axis_dma_rd_tlast, &top->s_axis_dma_rd_tready) {
    top->dma_errors = 0;
  }

  uint8_t* host(uint64_t addr, uint64_t len) {
    if (addr >= kIovaBase && addr - kIovaBase + len <= mem->size())
      return &(*mem)[addr - kIovaBase];
    if (addr >= kRingBase && addr - kRingBase + len <= rings.size())
      return &rings[addr - kRingBase];
    fail("DMA outside host memory at 0x" + std::to_string(addr));
  }

  void cycle() {
    axil.drive(rng);
    rx.drive(rng);
    copy.drive(rng);
    txd.drive(rng);
    tx.drive(rng);
    wr.drive(rng);
    rd.drive(rng);
    top->m_dma_wr_ready = !wr_have_last && rng.chance(req_ready);
    top->m_dma_rd_ready = !rd_busy && rng.chance(req_ready);
    top->clk = 0;
    top->eval();
    if (!top->rst) {
      axil.fire();
      rx.fire();
      copy.fire();
      txd.fire();
      tx.fire();
      if (rd.fire()) rd_busy = false;
      if (top->m_dma_wr_valid && top->m_dma_wr_ready) {
        wr_reqs.push_back({top->m_dma_wr_addr, top->m_dma_wr_len});
        wr_have_last = top->m_dma_wr_last;
      }
      if (wr.fire()) {
        // The transaction's bytes, request by request.
        TB_CHECK(wr_have_last, "DMA write data before its last request");
        Bytes d = wr.pop();
        size_t at = 0;
        for (auto [a, n] : wr_reqs) {
          TB_CHECK(at + n <= d.size(), "DMA write data shorter than its requests");
          std::copy(d.begin() + long(at), d.begin() + long(at + n), host(a, n));
          at += n;
          dma_writes++;
        }
        TB_CHECK(at == d.size(), "DMA write data longer than its requests");
        wr_reqs.clear();
        wr_have_last = false;
      }
      if (top->m_dma_rd_valid && top->m_dma_rd_ready) {
        uint64_t a = top->m_dma_rd_addr;
        uint32_t n = top->m_dma_rd_len;
        const uint8_t* p = host(a, n);
        rd.push(Bytes(p, p + n));
        rd_busy = true;
        dma_reads++;
      }
    }
    top->clk = 1;
    top->eval();
    cycles++;
  }
  void push_tx_request(Bytes pkt) { txd.push(std::move(pkt)); }
  void set_stalls(double p) {
    for (auto* s : {&copy, &tx, &wr})
      s->set_stall(rng.chance(0.5) ? 0.0 : p);
    rx.set_stall(rng.chance(0.5) ? 0.0 : 0.4);
    rd.set_stall(rng.chance(0.5) ? 0.0 : 0.4);
    req_ready = rng.chance(0.5) ? 1.0 : 0.4;
  }
  void write(uint32_t a, uint32_t v) {
    axil.write(a, v, [this] { cycle(); });
  }
  uint32_t read(uint32_t a) {
    return axil.read(a, [this] { cycle(); });
  }
};

Event ok_cmd(const CmdRec& c) {
  Event ev;
  ev.is_cmd = true;
  ev.cmd = c;
  ev.want = nic::Err::kOk;
  return ev;
}

// One rate run: `frames` frames of one flow (kind 0 TCP in order, 1 RoCE WRITE only) with
// `payload` bytes each; returns the cycles from the first beat to the last completion.
uint64_t rate_run(int argc, char** argv, int kind, uint32_t payload, uint32_t frames, int rep,
                  size_t* flen) {
  Bench b(uint64_t(rep) + 1);
  b.ctx->commandArgs(argc, argv);
  Bytes mem(4u << 20, 0);
  b.mem = &mem;
  for (auto* s : {&b.copy, &b.tx, &b.wr})
    s->set_stall(0.0);
  b.rx.set_stall(0.0);
  b.rd.set_stall(0.0);
  b.req_ready = 1.0;
  b.top->rst = 1;
  for (int i = 0; i < 8; i++)
    b.cycle();
  b.top->rst = 0;
  const uint32_t rq = CLEAVE_NIC_RB_RXQ_BASE;
  b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_BASE_LO, uint32_t(kRxCpl));
  b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_BASE_HI, uint32_t(kRxCpl >> 32));
  b.write(rq + CLEAVE_NIC_RB_RXQ_HDR_BASE_LO, uint32_t(kRxHdr));
  b.write(rq + CLEAVE_NIC_RB_RXQ_HDR_BASE_HI, uint32_t(kRxHdr >> 32));
  b.write(rq + CLEAVE_NIC_RB_RXQ_LOG2_ENTRIES, kRxLog2);
  b.write(rq + CLEAVE_NIC_RB_RXQ_ENABLE, 1);
  // One MR over host memory, one flow, MSs for the whole run.
  CmdRec mr;
  mr.op(CLEAVE_NIC_CMD_MR_ADD).arg16(0).arg8(nic::kMrRemoteWrite).w(2, 1);
  mr.w(3, uint32_t(kIovaBase)).w(4, uint32_t(kIovaBase >> 32)).w(5, uint32_t(mem.size()));
  mr.w(6, 0).w(7, 0x55);
  run_cmd(b, ok_cmd(mr));
  const uint32_t isn = 1000;
  CmdRec f;
  f.op(CLEAVE_NIC_CMD_FLOW_ADD).flow(0).w(2, 0x0A000002).w(3, 0x0A000001).w(5, isn);
  f.set(CLEAVE_NIC_CMD_FRELIABLE_LSB, 1, 1);
  if (kind == 0) {
    f.arg8(6).set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, CLEAVE_NIC_PARSER_TCP).w(4, 5001u << 16 | 40000);
  } else {
    f.arg8(17).arg16(4096).set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, CLEAVE_NIC_PARSER_ROCE);
    f.w(4, 4791u << 16).w(6, 1).w(7, 17);
  }
  run_cmd(b, ok_cmd(f));
  if (kind == 0) {
    const uint32_t ms_len = (frames * payload) / 8 + 1;
    for (uint32_t i = 0; i < 8; i++) {
      CmdRec p;
      p.op(CLEAVE_NIC_CMD_MS_POST).flow(0).arg16(0).w(2, i * ms_len).w(3, 0).w(4, ms_len);
      run_cmd(b, ok_cmd(p));
    }
  }
  Rng rng(uint64_t(rep) + 1);
  for (uint32_t i = 0; i < frames; i++) {
    Bytes pl = random_bytes(rng, payload);
    Bytes fr = kind == 0 ? tcp_frame(isn + i * payload, pl)
                         : roce_frame(0x0A, (isn + i) & 0xFFFFFF, 17,
                                      reth(uint64_t(i) * payload, 0x55u << 16, payload), pl);
    *flen = fr.size();
    b.rx.push(std::move(fr));
  }
  Rings rings;
  const uint64_t c0 = b.cycles;
  while (rings.rx_cons < frames) {
    b.cycle();
    uint8_t rec[32];
    while (rx_entry(b, rings, rec)) {
      TB_CHECK(CLEAVE_NIC_RX_CPL_GET(rec, DECISION) == unsigned(nic::Decision::kPlaced),
               "frame %u not placed (reason %u)", rings.rx_cons,
               unsigned(CLEAVE_NIC_RX_CPL_GET(rec, REASON)));
      rings.rx_cons++;
    }
    if (rings.rx_cons % 64 == 0 && rings.rx_cons != 0) {
      b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_CONS, rings.rx_cons);  // the unit runs meanwhile
    }
    TB_CHECK(b.cycles - c0 < 100'000'000, "stuck at frame %u", rings.rx_cons);
  }
  return b.cycles - c0;
}

int rate(int argc, char** argv) {
  constexpr double kClockHz = 250e6;
  std::printf("the whole unit at %u bits, no backpressure; 250 MHz assumed\n", TB_DATA_WIDTH);
  std::printf("%-28s %12s %12s %12s %12s %14s\n", "workload", "cycles/frame", "frames/cycle",
              "Mframes/s", "Gb/s", "beats/frame");
  struct Spec {
    const char* name;
    int kind;
    uint32_t payload, frames;
  };
  const Spec specs[] = {
      {"TCP in order, 1460 B", 0, 1460, 2000},
      {"TCP in order, 64 B frames", 0, 10, 2000},
      {"TCP in order, 9000 B", 0, 8960, 300},
      {"RoCE WRITE only, 1024 B", 1, 1024, 2000},
  };
  for (const Spec& sp : specs) {
    std::vector<double> per_frame;
    size_t flen = 0;
    for (int rep = 0; rep < 5; rep++)
      per_frame.push_back(double(rate_run(argc, argv, sp.kind, sp.payload, sp.frames, rep, &flen)) /
                          double(sp.frames));
    std::sort(per_frame.begin(), per_frame.end());
    const double cpf = per_frame[per_frame.size() / 2];
    std::printf("%-28s %12.2f %12.4f %12.2f %12.2f %14zu\n", sp.name, cpf, 1.0 / cpf,
                kClockHz / cpf / 1e6, kClockHz / cpf * double(flen) * 8 / 1e9,
                (flen + kNb - 1) / kNb);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (env_u64("CLEAVE_RTL_RATE", 0) != 0) return rate(argc, argv);
  uint64_t seed = init_seed("tb_nic");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t frames = env_u64("CLEAVE_RTL_FRAMES", 5000);
  Scenario sc(seed, built_geometry());
  Bytes mem = sc.mem();
  b.mem = &mem;

  b.top->rst = 1;
  for (int i = 0; i < 8; i++)
    b.cycle();
  b.top->rst = 0;
  drive(b, sc, frames);
  const Stats& s = g_stats;
  std::printf(
      "tb_nic: ok, %" PRIu64 " frames (%" PRIu64 " ring wraps), %" PRIu64 " commands, %" PRIu64
      " TX requests (%" PRIu64 " frames) at %u bits, %" PRIu64 " cycles, %" PRIu64
      " DMA writes, %" PRIu64 " DMA reads; placed %" PRIu64 " trimmed %" PRIu64 " dropped %" PRIu64
      " deferred %" PRIu64 " no payload %" PRIu64 "\n",
      s.frames, s.wraps, s.cmds, s.tx_requests, s.tx_frames, TB_DATA_WIDTH, b.cycles, b.dma_writes,
      b.dma_reads, s.decision[0], s.decision[1], s.decision[2], s.decision[3], s.decision[4]);
  return 0;
}
