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

  static Top* make(VerilatedContext* c, uint64_t seed) {
    c->randReset(2);
    c->randSeed(int(seed & 0x7FFFFFFF));
    return new Top(c);
  }
  explicit Bench(uint64_t seed)
      : top(make(ctx.get(), seed)),
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

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_nic");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t frames = env_u64("CLEAVE_RTL_FRAMES", 5000);
  ScenarioConfig cfg;
  cfg.max_flows = TB_MAX_FLOWS;
  cfg.max_mrs = TB_MAX_MRS;
  cfg.ms_chunk = TB_MS_CHUNK;
  cfg.ms_committed = TB_MS_COMMITTED;
  cfg.ms_store = TB_MS_STORE;
  Scenario sc(seed, cfg);
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
