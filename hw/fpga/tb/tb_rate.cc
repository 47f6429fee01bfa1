// tb_rate.cc - figures: frames per cycle the Verilated receive side (cleave_rx) sustains.
//
// For each workload, a stream of frames with no backpressure anywhere (the source always
// valid, every output always ready) after the flows and MSs are set up through the command
// channel; cycles are counted from the first beat in to the last decision out, and every frame
// must have been placed (or the run fails: a figure of deferred frames would mean nothing).
// Printed per workload: cycles per frame (median of five runs with different payload bytes),
// frames per cycle, and what that is at 250 MHz in frames/s and Gb/s of frame bytes; beside it
// the baseline of the same run: the beats the frames occupy on the stream (the input's own
// bound). Asserts nothing about speed. Run: build/hw/fpga/tb/tb_rate_64 and tb_rate_512.
#include <algorithm>
#include <memory>

#include "Vcleave_rx.h"
#include "cleave_nic_hw.h"
#include "tb_common.h"
#include "tb_frames.h"
#include "tb_scenario.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
constexpr double kClockHz = 250e6;
using Top = Vcleave_rx;

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Top> top = std::make_unique<Top>(ctx.get());
  uint64_t cycles = 0, decisions = 0, placed = 0;

  void tick() {
    top->clk = 0;
    top->eval();
    if (top->m_cpl_valid) {
      decisions++;
      placed += get_bits(top->m_cpl, 754 - 27, 3) == 0;  // rx_dec_t: decision after flow_id
    }
    top->clk = 1;
    top->eval();
    cycles++;
  }
  void reset() {
    top->rst = 1;
    top->m_axis_hdr_tready = top->m_axis_copy_tready = top->m_axis_pay_tready = 1;
    top->m_desc_ready = top->m_cpl_ready = 1;
    top->s_axis_tvalid = 0;
    top->s_cmd_valid = 0;
    top->tx_inc_en = 0;
    top->tx_mr_addr = 0;
    for (int i = 0; i < 8; i++)
      tick();
    top->rst = 0;
    for (int i = 0; i < 20000; i++)  // the tables' reset walk
      tick();
  }
  void cmd(const CmdRec& c) {
    from_bytes(top->s_cmd_data, c.b, CLEAVE_NIC_CMD_BYTES);
    top->s_cmd_valid = 1;
    bool taken = false;
    for (int guard = 0; guard < 100000; guard++) {
      top->clk = 0;
      top->eval();
      const bool ready = top->s_cmd_ready, done = top->m_rsp_valid;
      const unsigned err = top->m_rsp_err;
      top->clk = 1;
      top->eval();
      if (ready) {
        taken = true;
        top->s_cmd_valid = 0;
      }
      if (done) {
        TB_CHECK(err == 0, "set-up command %u failed: %u", unsigned(c.b[0]), err);
        return;
      }
    }
    TB_CHECK(taken, "command not taken");
    fail("command not answered");
  }
  // Streams the frames back to back; returns the cycles until the last decision.
  uint64_t run(const std::vector<Bytes>& frames) {
    const uint64_t c0 = cycles, d0 = decisions;
    size_t f = 0, pos = 0;
    while (decisions - d0 < frames.size()) {
      top->s_axis_tvalid = f < frames.size();
      if (f < frames.size()) {
        const Bytes& fr = frames[f];
        for (unsigned i = 0; i < kNb; i++) {
          set_byte(top->s_axis_tdata, i, pos + i < fr.size() ? fr[pos + i] : 0);
          set_bits(top->s_axis_tkeep, i, 1, pos + i < fr.size());
        }
        top->s_axis_tlast = pos + kNb >= fr.size();
      }
      top->clk = 0;
      top->eval();
      const bool fire = top->s_axis_tvalid && top->s_axis_tready;
      if (top->m_cpl_valid) {
        decisions++;
        placed += get_bits(top->m_cpl, 754 - 27, 3) == 0;
      }
      top->clk = 1;
      top->eval();
      cycles++;
      if (fire) {
        pos += kNb;
        if (pos >= frames[f].size()) {
          f++;
          pos = 0;
        }
      }
      TB_CHECK(cycles - c0 < 100'000'000, "stuck");
    }
    top->s_axis_tvalid = 0;
    return cycles - c0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  init_seed("tb_rate");
  const uint32_t n = uint32_t(env_u64("CLEAVE_RTL_FRAMES", 2000));
  std::printf("receive side at %u bits, %u frames a run, no backpressure; 250 MHz assumed\n",
              TB_DATA_WIDTH, n);
  std::printf("%-28s %12s %12s %12s %12s %14s\n", "workload", "cycles/frame", "frames/cycle",
              "Mframes/s", "Gb/s", "beats/frame");
  struct Spec {
    const char* name;
    int kind;  // 0 TCP stream, 1 UDP unreliable, 2 RoCE WRITE
    uint32_t payload;
  };
  const Spec specs[] = {
      {"TCP in order, 1460 B", 0, 1460},    {"TCP in order, 64 B frames", 0, 10},
      {"TCP in order, 9000 B", 0, 8960},    {"UDP unreliable, 512 B", 1, 512},
      {"RoCE WRITE only, 1024 B", 2, 1024},
  };
  for (const Spec& sp : specs) {
    std::vector<double> per_frame;
    double beats = 0;
    size_t flen = 0;
    for (int rep = 0; rep < 5; rep++) {
      Bench b;
      b.ctx->commandArgs(argc, argv);
      b.reset();
      // One MR over 64 MB of (imaginary) host memory, one flow, MSs enough for the run.
      CmdRec mr;
      mr.op(CLEAVE_NIC_CMD_MR_ADD).arg16(0).arg8(1).w(2, 1).w(3, 0x1000).w(4, 0).w(5, 64u << 20);
      mr.w(6, 0).w(7, 0x55);
      b.cmd(mr);
      CmdRec f;
      f.op(CLEAVE_NIC_CMD_FLOW_ADD).flow(0);
      const uint32_t isn = 1000;
      if (sp.kind == 0) {
        f.arg8(6).set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, CLEAVE_NIC_PARSER_TCP);
        f.set(CLEAVE_NIC_CMD_FRELIABLE_LSB, 1, 1).w(4, 5001u << 16 | 40000);
      } else if (sp.kind == 1) {
        f.arg8(17).set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, CLEAVE_NIC_PARSER_UDP).w(4, 6000u << 16 | 0);
      } else {
        f.arg8(17).arg16(4096).set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, CLEAVE_NIC_PARSER_ROCE);
        f.set(CLEAVE_NIC_CMD_FRELIABLE_LSB, 1, 1).w(4, 4791u << 16).w(6, 1).w(7, 17);
      }
      f.w(2, 0x0A000002).w(3, 0x0A000001).w(5, isn);
      b.cmd(f);
      // Byte streams: a few large MSs; unreliable: one per frame (up to the list's room).
      const uint32_t posts = sp.kind == 1 ? std::min<uint32_t>(n, TB_MS_STORE) : 8;
      const uint32_t ms_len = sp.kind == 1 ? sp.payload : (n * sp.payload) / 8 + 1;
      for (uint32_t i = 0; i < posts; i++) {
        CmdRec p;
        p.op(CLEAVE_NIC_CMD_MS_POST).flow(0).arg16(0).w(2, i * ms_len).w(3, 0).w(4, ms_len).w(5, i);
        b.cmd(p);
      }
      Rng rng(rep + 1);
      std::vector<Bytes> frames;
      const uint32_t count = sp.kind == 1 ? posts : n;
      for (uint32_t i = 0; i < count; i++) {
        Bytes pl = random_bytes(rng, sp.payload);
        if (sp.kind == 0) {
          frames.push_back(tcp_frame(isn + i * sp.payload, pl));
        } else if (sp.kind == 1) {
          frames.push_back(udp_frame(49152, 6000, pl));
        } else {
          frames.push_back(roce_frame(0x0A, (isn + i) & 0xFFFFFF, 17,
                                      reth(uint64_t(i) * sp.payload, 0x55u << 16, sp.payload), pl));
        }
      }
      const uint64_t p0 = b.placed;
      const uint64_t cyc = b.run(frames);
      TB_CHECK(b.placed - p0 == frames.size(), "%s: %" PRIu64 " of %zu frames placed", sp.name,
               b.placed - p0, frames.size());
      per_frame.push_back(double(cyc) / double(frames.size()));
      flen = frames[0].size();
      beats = double((flen + kNb - 1) / kNb);
    }
    std::sort(per_frame.begin(), per_frame.end());
    const double cpf = per_frame[per_frame.size() / 2];
    std::printf("%-28s %12.2f %12.4f %12.2f %12.2f %14.0f\n", sp.name, cpf, 1.0 / cpf,
                kClockHz / cpf / 1e6, kClockHz / cpf * double(flen) * 8 / 1e9, beats);
  }
  return 0;
}
