// tb_tx.cc - cleave_tx against the model's tx(): random requests (TCP with and without TSO and
// options, UDP, RoCEv2 with pad and ICRC, other protocols; every combination of the offload
// flags; bad headers, payloads outside their MR, frames over the MTU) with random DMA read
// latency and backpressure on every stream. Compared: every frame byte for byte, every
// completion (cookie, status, frames, bytes) and the TX counters. CLEAVE_RTL_FRAMES sets the
// number of requests (default 4000).
#include <memory>

#include "Vcleave_tx.h"
#include "cleave_nic_hw.h"
#include "nic_model.h"
#include "tb_common.h"
#include "tb_frames.h"
#include "tb_txgen.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
constexpr uint64_t kIovaBase = 0x0000'0020'0000'0000ull;
using Top = Vcleave_tx;

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Top> top;
  Rng rng;
  AxisSource<TB_SIG(Top, s_axis_txd_tdata), TB_SIG(Top, s_axis_txd_tkeep)> src;
  AxisSource<TB_SIG(Top, s_axis_rd_tdata), TB_SIG(Top, s_axis_rd_tkeep)> rd;
  AxisSink<TB_SIG(Top, m_axis_tx_tdata), TB_SIG(Top, m_axis_tx_tkeep)> out;
  const Bytes* mem = nullptr;
  const std::vector<MrInfo>* mrs = nullptr;
  struct Cpl {
    uint64_t cookie;
    unsigned status, frames;
    uint32_t bytes;
  };
  std::deque<Cpl> cpls;
  std::vector<uint64_t> ctr = std::vector<uint64_t>(CLEAVE_NIC_COUNTERS);
  int rd_wait = -1;  // cycles until the pending DMA read's data starts
  bool rd_busy = false;
  double rd_ready_p = 0.7, cpl_stall = 0.3;
  uint64_t cycles = 0;

  explicit Bench(uint64_t seed)
      : top(make_top<Top>(ctx.get(), seed)),
        rng(seed ^ 0xA5A5A5A5ull),
        src(kNb, &top->s_axis_txd_tdata, &top->s_axis_txd_tkeep, &top->s_axis_txd_tvalid,
            &top->s_axis_txd_tlast, &top->s_axis_txd_tready),
        rd(kNb, &top->s_axis_rd_tdata, &top->s_axis_rd_tkeep, &top->s_axis_rd_tvalid,
           &top->s_axis_rd_tlast, &top->s_axis_rd_tready),
        out("tx", kNb, &top->m_axis_tx_tdata, &top->m_axis_tx_tkeep, &top->m_axis_tx_tvalid,
            &top->m_axis_tx_tlast, &top->m_axis_tx_tready) {}

  void cycle() {
    src.drive(rng);
    rd.drive(rng);
    out.drive(rng);
    top->m_dma_rd_ready = !rd_busy && rng.chance(rd_ready_p);
    top->m_txc_ready = rng.chance(cpl_stall) ? 0 : 1;
    // The MR table answers the address of the cycle before.
    top->clk = 0;
    top->eval();
    if (!top->rst) {
      src.fire();
      if (rd.fire()) rd_busy = false;
      out.fire();
      if (top->m_dma_rd_valid && top->m_dma_rd_ready) {
        uint64_t a = top->m_dma_rd_addr;
        uint32_t n = top->m_dma_rd_len;
        TB_CHECK(a >= kIovaBase && a - kIovaBase + n <= mem->size(), "DMA read outside memory");
        rd.push(Bytes(mem->begin() + long(a - kIovaBase), mem->begin() + long(a - kIovaBase + n)));
        rd_busy = true;
      }
      if (top->m_txc_valid && top->m_txc_ready)
        cpls.push_back({top->m_txc_cookie, top->m_txc_status, top->m_txc_frames, top->m_txc_bytes});
      for (unsigned i = 0; i < 4; i++) {
        if ((top->inc_en >> i) & 1) {
          unsigned idx = unsigned(get_bits(top->inc_idx, 8 * i, 8));
          TB_CHECK(idx < ctr.size(), "counter index %u", idx);
          ctr[idx] += get_bits(top->inc_amt, 32 * i, 32);
        }
      }
    }
    // MR table read (registered, one cycle)
    unsigned mr = top->mr_addr;
    uint64_t used = 0, base = 0, len = 0;
    if (mr < mrs->size() && (*mrs)[mr].used) {
      used = 1;
      base = kIovaBase + (*mrs)[mr].base;
      len = (*mrs)[mr].len;
    }
    top->clk = 1;
    top->eval();
    set_bits(top->mr_data, 104, 1, used);
    set_bits(top->mr_data, 40, 64, base);
    set_bits(top->mr_data, 0, 40, len);
    cycles++;
  }
};

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_tx");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t requests = env_u64("CLEAVE_RTL_FRAMES", 4000);
  Bytes mem(4u << 20);
  for (auto& x : mem)
    x = uint8_t(b.rng.u64());
  nic::NicConfig cfg;
  cfg.roce_write_ctxs = 1;  // the RTL keeps the flow entry's WRITE context only
  cfg.max_mrs = TB_MAX_MRS;
  cfg.max_flows = 4;
  cfg.ms_store_entries = 64;
  nic::NicModel model(cfg);
  std::vector<MrInfo> mrs(TB_MAX_MRS);
  for (unsigned i = 0; i + 1 < TB_MAX_MRS; i++) {  // the last id stays unused
    mrs[i] = {true, i * (mem.size() / TB_MAX_MRS), mem.size() / TB_MAX_MRS - b.rng.below(4096)};
    TB_CHECK(model.mr_add(uint16_t(i), mem.data() + mrs[i].base, mrs[i].len, 0) == nic::Err::kOk,
             "mr_add");
  }
  b.mem = &mem;
  b.mrs = &mrs;

  b.top->rst = 1;
  for (int i = 0; i < 8; i++)
    b.cycle();
  b.top->rst = 0;

  uint64_t done = 0, frames = 0, status[8] = {};
  while (done < requests) {
    if (b.rng.chance(0.05)) {
      b.src.set_stall(b.rng.chance(0.5) ? 0.0 : 0.5);
      b.rd.set_stall(b.rng.chance(0.5) ? 0.0 : 0.5);
      b.out.set_stall(b.rng.chance(0.5) ? 0.0 : 0.5);
      b.rd_ready_p = b.rng.chance(0.5) ? 1.0 : 0.3;
      b.cpl_stall = b.rng.chance(0.5) ? 0.0 : 0.5;
    }
    Request r = make_request(b.rng, mrs);
    TxResult t = model_tx(model, r);
    const nic::TxRequest& q = r.req;
    const nic::TxCompletion& mc = t.cpl;
    Bytes pkt = tx_packet(r);
    b.src.push(pkt);
    for (uint64_t guard = 0; b.cpls.empty(); guard++) {
      TB_CHECK(guard < 5000000, "request %" PRIu64 ": no completion", done);
      b.cycle();
    }
    Bench::Cpl c = b.cpls.front();
    b.cpls.pop_front();
    TB_CHECK(c.cookie == mc.cookie && c.status == unsigned(mc.status) && c.frames == mc.frames &&
                 c.bytes == mc.bytes,
             "request %" PRIu64
             " (flags %u, header %zu, len %u, mss %u): completion status %u/%u "
             "frames %u/%u bytes %u/%u",
             done, q.flags, r.header.size(), q.len, q.mss, c.status, unsigned(mc.status), c.frames,
             unsigned(mc.frames), c.bytes, mc.bytes);
    TB_CHECK(b.out.ready_frames() == t.frames.size(), "request %" PRIu64 ": %zu frames, model %zu",
             done, b.out.ready_frames(), t.frames.size());
    for (size_t i = 0; i < t.frames.size(); i++) {
      Bytes got = b.out.pop();
      const Bytes& want = t.frames[i];
      if (got != want) {
        size_t k = 0;
        while (k < got.size() && k < want.size() && got[k] == want[k])
          k++;
        fail("request " + std::to_string(done) + " frame " + std::to_string(i) + " (flags " +
             std::to_string(q.flags) + ", header " + std::to_string(r.header.size()) + ", " +
             std::to_string(got.size()) + "/" + std::to_string(want.size()) +
             " bytes) differs from byte " + std::to_string(k));
      }
      frames++;
    }
    status[unsigned(mc.status)]++;
    done++;
  }
  // The TX counters, as the model counts them.
  size_t i = 0;
  model.for_each_counter([&](std::string_view name, uint64_t v) {
    if (name.substr(0, 3) == "tx_") {
      TB_CHECK(b.ctr[i] == v, "counter %s: RTL %" PRIu64 ", model %" PRIu64,
               std::string(name).c_str(), b.ctr[i], v);
    }
    i++;
  });
  std::printf("tb_tx: ok, %" PRIu64 " requests, %" PRIu64 " frames at %u bits, %" PRIu64
              " cycles; status ok %" PRIu64 " bad_header %" PRIu64 " dma_fault %" PRIu64
              " too_long %" PRIu64 "\n",
              done, frames, TB_DATA_WIDTH, b.cycles, status[0], status[1], status[2], status[3]);
  if (done >= 2000) {
    TB_CHECK(status[0] && status[1] && status[2] && status[3], "a status never happened");
  }
  return 0;
}
