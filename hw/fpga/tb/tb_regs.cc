// tb_regs.cc - cleave_regs against the spec: the register-block list a driver walks, the info
// block, the command mailbox and the flow query (the testbench plays the engine), counters with
// the high word latched, the queue blocks; random AXI-Lite timing throughout.
#include <memory>

#include "Vcleave_regs.h"
#include "cleave_nic_hw.h"
#include "nic_model.h"
#include "tb_common.h"

using namespace cleave::tb;

namespace {

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Vcleave_regs> top;
  Rng rng;
  AxilMaster<Vcleave_regs> axil;
  // The engine the testbench plays: takes a request after a random delay, answers later.
  bool have_req = false;
  VlWide<8> req{};
  int answer_in = -1;
  uint8_t rsp_err = 0;
  uint16_t rsp_mr = 0;
  uint32_t rsp_ms = 0, rsp_cursor = 0, rsp_reads = 0;
  uint64_t requests = 0;

  explicit Bench(uint64_t seed) : top(make(ctx.get(), seed)), rng(seed), axil(top.get()) {}

  // Initial register state is random (from the seed): reset must set everything that matters.
  static std::unique_ptr<Vcleave_regs> make(VerilatedContext* c, uint64_t seed) {
    c->randReset(2);
    c->randSeed(int(seed & 0x7FFFFFFF));
    return std::make_unique<Vcleave_regs>(c);
  }

  static uint64_t ctr_value(uint8_t sel) {
    return 0x0123456789ABCDEFull ^ (uint64_t(sel) * 0x9E3779B97F4A7C15ull);
  }

  void cycle() {
    axil.drive(rng);
    top->m_req_ready = !have_req && rng.chance(0.5);
    top->s_rsp_valid = 0;
    if (answer_in == 0) {
      top->s_rsp_valid = 1;
      top->s_rsp_err = rsp_err;
      top->s_rsp_mr = rsp_mr;
      top->s_rsp_ms_count = rsp_ms;
      top->s_rsp_cursor = rsp_cursor;
      top->s_rsp_read_count = rsp_reads;
    }
    top->clk = 0;
    top->eval();
    top->ctr_value = ctr_value(top->ctr_sel);
    top->eval();
    axil.fire();
    if (top->m_req_valid && top->m_req_ready && !top->rst) {
      have_req = true;
      req = top->m_req_data;
      requests++;
    }
    if (answer_in == 0) {
      answer_in = -1;
      have_req = false;
    } else if (answer_in > 0) {
      answer_in--;
    }
    top->clk = 1;
    top->eval();
  }
  void write(uint32_t a, uint32_t v) {
    axil.write(a, v, [this] { cycle(); });
  }
  uint32_t read(uint32_t a) {
    return axil.read(a, [this] { cycle(); });
  }
  void reset() {
    top->rst = 1;
    for (int i = 0; i < 8; i++)
      cycle();
    top->rst = 0;
    cycle();
  }
};

void check_block_list(Bench& b) {
  const uint32_t types[] = {CLEAVE_NIC_RB_INFO_TYPE,     CLEAVE_NIC_RB_CMD_TYPE,
                            CLEAVE_NIC_RB_COUNTERS_TYPE, CLEAVE_NIC_RB_RXQ_TYPE,
                            CLEAVE_NIC_RB_TXQ_TYPE,      CLEAVE_NIC_RB_DEBUG_TYPE};
  const uint32_t versions[] = {CLEAVE_NIC_RB_INFO_VERSION,     CLEAVE_NIC_RB_CMD_VERSION,
                               CLEAVE_NIC_RB_COUNTERS_VERSION, CLEAVE_NIC_RB_RXQ_VERSION,
                               CLEAVE_NIC_RB_TXQ_VERSION,      CLEAVE_NIC_RB_DEBUG_VERSION};
  // Walk the list as mqnic_enumerate_reg_block_list() does.
  uint32_t off = 0;
  unsigned n = 0;
  do {
    TB_CHECK(n < CLEAVE_NIC_RB_COUNT, "more blocks than the spec has");
    TB_CHECK(b.read(off + CLEAVE_NIC_RB_TYPE) == types[n], "block %u type", n);
    TB_CHECK(b.read(off + CLEAVE_NIC_RB_VERSION) == versions[n], "block %u version", n);
    off = b.read(off + CLEAVE_NIC_RB_NEXT);
    n++;
  } while (off != 0);
  TB_CHECK(n == CLEAVE_NIC_RB_COUNT, "walked %u blocks", n);
  TB_CHECK(b.read(CLEAVE_NIC_RB_COUNT * CLEAVE_NIC_RB_STRIDE) == 0, "past the last block");
}

void check_info(Bench& b) {
  const uint32_t base = CLEAVE_NIC_RB_INFO_BASE;
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MAX_FLOWS) == TB_MAX_FLOWS, "max flows");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MAX_MRS) == TB_MAX_MRS, "max mrs");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MS_COMMITTED) == TB_MS_COMMITTED, "committed");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MS_STORE) == TB_MS_STORE, "store");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MS_CHUNK) == TB_MS_CHUNK, "chunk");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_HEADER_SLOT) == CLEAVE_NIC_RX_HEADER_SLOT_BYTES,
           "slot");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_MAX_FRAGS) == cleave::nic::kMaxFrags, "frags");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_DATA_WIDTH) == TB_DATA_WIDTH, "data width");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_RECORD_VERSION) == CLEAVE_NIC_RECORD_VERSION, "rec");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_INFO_CAPS) == 0x7F, "caps");
}

void check_mailbox(Bench& b, int rounds) {
  const uint32_t base = CLEAVE_NIC_RB_CMD_BASE;
  for (int r = 0; r < rounds; r++) {
    uint32_t w[8];
    for (auto& x : w)
      x = uint32_t(b.rng.u64());
    uint32_t tag = uint32_t(b.rng.u64());
    for (int i = 0; i < 8; i++)
      b.write(base + CLEAVE_NIC_RB_CMD_WORD0 + 4 * i, w[i]);
    b.write(base + CLEAVE_NIC_RB_CMD_TAG, tag);
    for (int i = 0; i < 8; i++)
      TB_CHECK(b.read(base + CLEAVE_NIC_RB_CMD_WORD0 + 4 * i) == w[i], "word %d reads back", i);
    uint64_t before = b.requests;
    b.write(base + CLEAVE_NIC_RB_CMD_DOORBELL, 1);
    TB_CHECK((b.read(base + CLEAVE_NIC_RB_CMD_RESULT) >> 31) == 0, "done cleared by doorbell");
    // A second doorbell while busy does nothing.
    b.write(base + CLEAVE_NIC_RB_CMD_DOORBELL, 1);
    while (!b.have_req)
      b.cycle();
    TB_CHECK(b.requests == before + 1, "one request per doorbell (%llu after %llu)",
             (unsigned long long)b.requests, (unsigned long long)before);
    for (int i = 0; i < 8; i++)
      TB_CHECK(b.req[i] == w[i], "request word %d", i);
    TB_CHECK((b.read(base + CLEAVE_NIC_RB_CMD_DOORBELL) & 1) == 1, "busy while the engine works");
    b.rsp_err = uint8_t(b.rng.below(14));
    b.rsp_mr = uint16_t(b.rng.u64());
    b.answer_in = int(b.rng.below(20));
    while ((b.read(base + CLEAVE_NIC_RB_CMD_DOORBELL) & 1) != 0) {
    }
    uint32_t res = b.read(base + CLEAVE_NIC_RB_CMD_RESULT);
    TB_CHECK(res >> 31 == 1, "done");
    TB_CHECK((res & 0xFF) == b.rsp_err && ((res >> 8) & 0xFFFF) == b.rsp_mr, "result 0x%x", res);
    TB_CHECK(b.read(base + CLEAVE_NIC_RB_CMD_RESULT_TAG) == tag, "result tag");
    TB_CHECK(b.requests == before + 1, "the doorbell while busy was ignored");
  }
}

void check_query(Bench& b, int rounds) {
  const uint32_t base = CLEAVE_NIC_RB_DEBUG_BASE;
  for (int r = 0; r < rounds; r++) {
    uint32_t flow = uint32_t(b.rng.below(1u << 24));
    b.write(base + CLEAVE_NIC_RB_DEBUG_FLOW_SELECT, flow);
    while (!b.have_req)
      b.cycle();
    uint8_t rec[32];
    to_bytes(b.req, rec, 32);
    TB_CHECK(CLEAVE_NIC_CMD_GET(rec, OPCODE) == CLEAVE_NIC_CMD_FLOW_QUERY, "query opcode");
    TB_CHECK(CLEAVE_NIC_CMD_GET(rec, FLOW) == flow, "query flow");
    b.rsp_ms = uint32_t(b.rng.u64());
    b.rsp_cursor = uint32_t(b.rng.u64());
    b.rsp_reads = uint32_t(b.rng.u64());
    b.answer_in = int(b.rng.below(10));
    while ((b.read(base + CLEAVE_NIC_RB_DEBUG_BUSY) & 1) != 0) {
    }
    TB_CHECK(b.read(base + CLEAVE_NIC_RB_DEBUG_MS_COUNT) == b.rsp_ms, "ms count");
    TB_CHECK(b.read(base + CLEAVE_NIC_RB_DEBUG_CURSOR) == b.rsp_cursor, "cursor");
    TB_CHECK(b.read(base + CLEAVE_NIC_RB_DEBUG_READ_COUNT) == b.rsp_reads, "reads");
    TB_CHECK(b.read(base + CLEAVE_NIC_RB_DEBUG_FLOW_SELECT) == flow, "select reads back");
  }
}

void check_counters(Bench& b, int rounds) {
  const uint32_t base = CLEAVE_NIC_RB_COUNTERS_BASE;
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_COUNTERS_COUNT) == cleave::nic::kCounterCount,
           "counter count is the model's");
  for (int r = 0; r < rounds; r++) {
    uint8_t sel = uint8_t(b.rng.below(CLEAVE_NIC_COUNTERS));
    b.write(base + CLEAVE_NIC_RB_COUNTERS_SELECT, sel);
    uint64_t want = Bench::ctr_value(sel);
    uint32_t lo = b.read(base + CLEAVE_NIC_RB_COUNTERS_VALUE_LO);
    // The high word is the one latched by the low read, whatever the select says now.
    b.write(base + CLEAVE_NIC_RB_COUNTERS_SELECT, uint8_t(sel + 1));
    uint32_t hi = b.read(base + CLEAVE_NIC_RB_COUNTERS_VALUE_HI);
    TB_CHECK((uint64_t(hi) << 32 | lo) == want, "counter %u", sel);
  }
}

void check_queues(Bench& b, int rounds) {
  struct Reg {
    uint32_t addr, mask;
  };
  const Reg regs[] = {
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_BASE_LO, ~0u},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_BASE_HI, ~0u},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_LOG2_ENTRIES, 0x1F},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_CONS, ~0u},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_HDR_BASE_LO, ~0u},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_HDR_BASE_HI, ~0u},
      {CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_ENABLE, 1},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_CPL_BASE_LO, ~0u},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_CPL_BASE_HI, ~0u},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_LOG2_ENTRIES, 0x1F},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_CPL_CONS, ~0u},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_MERGE_QUEUE, 0xFFFF},
      {CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_ENABLE, 1},
  };
  for (int r = 0; r < rounds; r++) {
    const Reg& g = regs[b.rng.below(std::size(regs))];
    uint32_t v = uint32_t(b.rng.u64());
    b.write(g.addr, v);
    TB_CHECK(b.read(g.addr) == (v & g.mask), "register 0x%x", g.addr);
  }
  b.write(CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_BASE_LO, 0x89ABCDEF);
  b.write(CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_BASE_HI, 0x01234567);
  b.cycle();
  TB_CHECK(b.top->rxq_cpl_base == 0x0123456789ABCDEFull, "rxq base reaches the port");
  b.top->rxq_prod = 0x1234;
  b.top->txq_prod = 0x5678;
  TB_CHECK(b.read(CLEAVE_NIC_RB_RXQ_BASE + CLEAVE_NIC_RB_RXQ_CPL_PROD) == 0x1234, "rx prod");
  TB_CHECK(b.read(CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_CPL_PROD) == 0x5678, "tx prod");
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_regs");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const int rounds = int(env_u64("CLEAVE_RTL_ROUNDS", 200));
  b.top->flows_in_use = 7;
  b.top->engine_busy = 0;
  b.top->dma_errors = 1234;
  b.top->rxq_prod = 0;
  b.top->txq_prod = 0;
  b.top->store_free = 99;
  b.reset();
  check_block_list(b);
  check_info(b);
  TB_CHECK(b.read(CLEAVE_NIC_RB_DEBUG_BASE + CLEAVE_NIC_RB_DEBUG_FLOWS_IN_USE) == 7, "flows");
  TB_CHECK(b.read(CLEAVE_NIC_RB_DEBUG_BASE + CLEAVE_NIC_RB_DEBUG_STORE_FREE) == 99, "store");
  TB_CHECK(b.read(CLEAVE_NIC_RB_DEBUG_BASE + CLEAVE_NIC_RB_DEBUG_DMA_ERRORS) == 1234, "dma errors");
  check_mailbox(b, rounds / 4);
  check_query(b, rounds / 4);
  check_counters(b, rounds);
  check_queues(b, rounds);
  std::printf("tb_regs: ok (%d rounds)\n", rounds);
  return 0;
}
