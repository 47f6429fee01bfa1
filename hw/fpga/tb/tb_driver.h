// tb_driver.h - the driver side of the whole-unit testbenches (tb_nic.cc, tb_app.cc): host
// rings, the command mailbox and debug block, RX completions and header slots, TX requests
// and completions, counters and host memory, all against the model through tb_scenario.h.
//
// A bench B provides: rng, write(addr, v) and read(addr) on the register blocks, cycle(), a
// source `rx` of received frames, sinks `copy` (the copy path) and `tx` (merged frames),
// push_tx_request(bytes), set_stalls(p), host memory `mem` (the MRs' bytes at kIovaBase) and
// `rings` (at kRingBase), and cycles.
#pragma once

#include <deque>
#include <string>

#include "cleave_nic_hw.h"
#include "tb_common.h"
#include "tb_scenario.h"
#include "tb_txgen.h"

namespace cleave::tb {

// Host memory: the MRs' bytes at kIovaBase (tb_scenario.h) and the rings at kRingBase.
constexpr uint64_t kRingBase = 0x0000'0030'0000'0000ull;
constexpr unsigned kRxLog2 = 8, kTxLog2 = 6;
constexpr uint64_t kRxCpl = kRingBase, kRxHdr = kRingBase + 0x10000, kTxCpl = kRingBase + 0x40000;
constexpr size_t kRingBytes = 0x50000;

struct Stats {
  uint64_t frames = 0, cmds = 0, tx_requests = 0, tx_frames = 0, wraps = 0, decision[5] = {};
};
inline Stats g_stats;

// ---- the driver ----------------------------------------------------------------------------

template <typename B>
void run_cmd(B& b, const Event& ev) {
  if (ev.query) {
    const uint32_t base = CLEAVE_NIC_RB_DEBUG_BASE;
    b.write(base + CLEAVE_NIC_RB_DEBUG_FLOW_SELECT,
            uint32_t(cleave_nic_get(ev.cmd.b, CLEAVE_NIC_CMD_FLOW_LSB, 24)));
    while (b.read(base + CLEAVE_NIC_RB_DEBUG_BUSY) & 1) {
    }
    uint32_t ms = b.read(base + CLEAVE_NIC_RB_DEBUG_MS_COUNT);
    uint32_t cur = b.read(base + CLEAVE_NIC_RB_DEBUG_CURSOR);
    uint32_t rds = b.read(base + CLEAVE_NIC_RB_DEBUG_READ_COUNT);
    TB_CHECK(ms == ev.q_ms && cur == ev.q_cursor && rds == ev.q_reads,
             "flow query: ms %u/%u cursor %u/%u reads %u/%u", ms, ev.q_ms, cur, ev.q_cursor, rds,
             ev.q_reads);
    return;
  }
  const uint32_t base = CLEAVE_NIC_RB_CMD_BASE;
  for (unsigned i = 0; i < 8; i++) {
    uint32_t w = uint32_t(cleave_nic_get(ev.cmd.b, 32 * i, 32));
    b.write(base + CLEAVE_NIC_RB_CMD_WORD0 + 4 * i, w);
  }
  const uint32_t tag = uint32_t(g_stats.cmds);
  b.write(base + CLEAVE_NIC_RB_CMD_TAG, tag);
  b.write(base + CLEAVE_NIC_RB_CMD_DOORBELL, 1);
  while (b.read(base + CLEAVE_NIC_RB_CMD_DOORBELL) & 1) {
  }
  uint32_t res = b.read(base + CLEAVE_NIC_RB_CMD_RESULT);
  TB_CHECK(res >> 31, "command result not done");
  TB_CHECK((res & 0xFF) == uint32_t(ev.want), "command %" PRIu64 " (op %u): RTL %s, model %s",
           g_stats.cmds, unsigned(ev.cmd.b[0]),
           std::string(nic::err_name(nic::Err(res & 0xFF))).c_str(),
           std::string(nic::err_name(ev.want)).c_str());
  if (ev.cmd.b[0] == CLEAVE_NIC_CMD_RKEY_CHECK && ev.want == nic::Err::kOk)
    TB_CHECK(((res >> 8) & 0xFFFF) == ev.want_mr, "rkey check MR");
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_CMD_RESULT_TAG) == tag, "result tag");
  g_stats.cmds++;
}

struct Rings {
  uint32_t rx_cons = 0, tx_cons = 0;
};

// The next RX completion, if its phase says it is there.
template <typename B>
bool rx_entry(B& b, Rings& r, uint8_t* rec) {
  const uint32_t slot = r.rx_cons & ((1u << kRxLog2) - 1);
  const uint8_t* p = &b.rings[kRxCpl - kRingBase + 32ull * slot];
  const unsigned phase = ((r.rx_cons >> kRxLog2) & 1) ^ 1;
  if (CLEAVE_NIC_RX_CPL_GET(p, PHASE) != phase) return false;
  std::copy(p, p + 32, rec);
  return true;
}

template <typename B>
void check_rx(B& b, Rings& r, const Event& ev, const uint8_t* rec, uint64_t n) {
  const nic::RxEntry& e = ev.entry;
  const uint32_t slot = r.rx_cons & ((1u << kRxLog2) - 1);
#define FIELD(f, want)                                                                           \
  TB_CHECK(CLEAVE_NIC_RX_CPL_GET(rec, f) == uint64_t(want),                                      \
           "frame %" PRIu64 " (%s/%s): " #f " %" PRIu64 " want %" PRIu64, n,                     \
           std::string(nic::decision_name(e.decision)).c_str(),                                  \
           std::string(nic::defer_reason_name(e.reason)).c_str(), CLEAVE_NIC_RX_CPL_GET(rec, f), \
           uint64_t(want))
  FIELD(FLOW_ID, e.flow_id == nic::kNoFlow ? nic::kNoFlow24 : e.flow_id);
  FIELD(DECISION, e.decision);
  FIELD(REASON, e.reason);
  FIELD(SEQ, e.seq);
  FIELD(PAYLOAD_LEN, e.payload_len);
  FIELD(HEADER_LEN, e.header_len);
  FIELD(NFRAGS, e.nfrags);
  FIELD(OUT_OF_ORDER, e.out_of_order);
  FIELD(IP_CSUM, e.ip_csum);
  FIELD(L4_CSUM, e.l4_csum);
  FIELD(TRIMMED, e.trimmed);
  FIELD(PLACED, e.placed);
  FIELD(MSG_SEQ, e.msg_seq);
  FIELD(PARSER, e.parser);
  FIELD(SLOT, slot);
  FIELD(COPY, e.decision == nic::Decision::kDeferred);
  if (e.nfrags > 0) {
    FIELD(MR, e.frags[0].mr);
    FIELD(OFFSET, e.frags[0].offset);
  }
#undef FIELD
  const uint8_t* h = &b.rings[kRxHdr - kRingBase + 256ull * slot];
  TB_CHECK(std::equal(h, h + e.header_len, e.header.begin()), "frame %" PRIu64 ": header slot", n);
  if (e.decision == nic::Decision::kDeferred) {
    TB_CHECK(!b.copy.empty(), "frame %" PRIu64 ": not on the copy path", n);
    TB_CHECK(b.copy.pop() == ev.frame, "frame %" PRIu64 ": copy-path frame differs", n);
  }
  g_stats.decision[unsigned(e.decision)]++;
}

template <typename B>
void check_counters(B& b, Scenario& sc) {
  const uint32_t base = CLEAVE_NIC_RB_COUNTERS_BASE;
  TB_CHECK(b.read(base + CLEAVE_NIC_RB_COUNTERS_COUNT) == nic::kCounterCount, "counter count");
  size_t i = 0;
  sc.model().for_each_counter([&](std::string_view name, uint64_t v) {
    b.write(base + CLEAVE_NIC_RB_COUNTERS_SELECT, uint32_t(i));
    uint64_t lo = b.read(base + CLEAVE_NIC_RB_COUNTERS_VALUE_LO);
    uint64_t hi = b.read(base + CLEAVE_NIC_RB_COUNTERS_VALUE_HI);
    TB_CHECK((hi << 32 | lo) == v, "counter %s: RTL %" PRIu64 ", model %" PRIu64,
             std::string(name).c_str(), hi << 32 | lo, v);
    i++;
  });
  const uint32_t dbg = CLEAVE_NIC_RB_DEBUG_BASE;
  TB_CHECK(b.read(dbg + CLEAVE_NIC_RB_DEBUG_FLOWS_IN_USE) == sc.model().flows_in_use(), "flows");
  TB_CHECK(b.read(dbg + CLEAVE_NIC_RB_DEBUG_STORE_FREE) == sc.model().store_chunks_free(),
           "store chunks free");
  TB_CHECK(*b.mem == sc.mem(), "host memory differs from the model's");
}

// The driver: queues set up, then rounds of commands, received frames and TX requests until
// `frames` frames were checked, then everything the unit counts.
template <typename B>
void drive(B& b, Scenario& sc, uint64_t frames) {
  // The queues: rings in host memory, zeroed (phase 0), then enabled.
  const uint32_t rq = CLEAVE_NIC_RB_RXQ_BASE, tq = CLEAVE_NIC_RB_TXQ_BASE;
  b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_BASE_LO, uint32_t(kRxCpl));
  b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_BASE_HI, uint32_t(kRxCpl >> 32));
  b.write(rq + CLEAVE_NIC_RB_RXQ_HDR_BASE_LO, uint32_t(kRxHdr));
  b.write(rq + CLEAVE_NIC_RB_RXQ_HDR_BASE_HI, uint32_t(kRxHdr >> 32));
  b.write(rq + CLEAVE_NIC_RB_RXQ_LOG2_ENTRIES, kRxLog2);
  b.write(rq + CLEAVE_NIC_RB_RXQ_ENABLE, 1);
  b.write(tq + CLEAVE_NIC_RB_TXQ_CPL_BASE_LO, uint32_t(kTxCpl));
  b.write(tq + CLEAVE_NIC_RB_TXQ_CPL_BASE_HI, uint32_t(kTxCpl >> 32));
  b.write(tq + CLEAVE_NIC_RB_TXQ_LOG2_ENTRIES, kTxLog2);
  b.write(tq + CLEAVE_NIC_RB_TXQ_ENABLE, 1);

  Rings rings;
  uint64_t rounds = 0;
  while (g_stats.frames < frames) {
    if (b.rng.chance(0.03)) {
      double p = b.rng.chance(0.5) ? 0.0 : 0.5;
      b.set_stalls(p);
    }
    const bool query = b.rng.chance(0.1);
    Event q = query ? sc.query() : Event{};
    std::vector<Event> evs = sc.round();
    if (query) evs.insert(evs.begin(), q);
    std::deque<const Event*> pending;
    for (const Event& ev : evs) {
      if (ev.is_cmd) {
        run_cmd(b, ev);
      } else {
        b.rx.push(ev.frame);
        pending.push_back(&ev);
      }
    }
    // TX requests once the frames have landed (the model read the MRs after all of them),
    // then both rings drained; the consumer index moves in steps, so the NIC sees them fill up.
    std::deque<TxResult> txq;
    const int ntx = int(b.rng.below(4));
    bool tx_sent = false;
    uint32_t rx_told = rings.rx_cons, tx_told = rings.tx_cons;
    for (uint64_t idle = 0; !pending.empty() || !txq.empty() || !tx_sent; idle++) {
      if (pending.empty() && !tx_sent) {
        for (int i = 0; i < ntx; i++) {
          Request r = make_request(b.rng, sc.mr_info());
          txq.push_back(model_tx(sc.model(), r));
          b.push_tx_request(tx_packet(r));
          g_stats.tx_requests++;
        }
        tx_sent = true;
      }
      TB_CHECK(idle < 3000000, "round %" PRIu64 ": %zu frames, %zu TX requests never completed",
               rounds, pending.size(), txq.size());
      b.cycle();
      uint8_t rec[32];
      while (!pending.empty() && rx_entry(b, rings, rec)) {
        check_rx(b, rings, *pending.front(), rec, g_stats.frames++);
        pending.pop_front();
        if ((++rings.rx_cons & ((1u << kRxLog2) - 1)) == 0) g_stats.wraps++;
        idle = 0;
      }
      while (!txq.empty()) {
        const uint32_t slot = rings.tx_cons & ((1u << kTxLog2) - 1);
        const uint8_t* p = &b.rings[kTxCpl - kRingBase + 8ull * slot];
        if (CLEAVE_NIC_TX_CPL_GET(p, PHASE) != (((rings.tx_cons >> kTxLog2) & 1) ^ 1)) break;
        const TxResult& t = txq.front();
        TB_CHECK(CLEAVE_NIC_TX_CPL_GET(p, COOKIE) == uint32_t(t.cpl.cookie) &&
                     CLEAVE_NIC_TX_CPL_GET(p, STATUS) == unsigned(t.cpl.status) &&
                     CLEAVE_NIC_TX_CPL_GET(p, FRAMES) == t.cpl.frames,
                 "TX completion %" PRIu64 ": status %u want %u, frames %u want %u",
                 g_stats.tx_requests, unsigned(CLEAVE_NIC_TX_CPL_GET(p, STATUS)),
                 unsigned(t.cpl.status), unsigned(CLEAVE_NIC_TX_CPL_GET(p, FRAMES)),
                 unsigned(t.cpl.frames));
        TB_CHECK(b.tx.ready_frames() >= t.frames.size(), "TX frames missing");
        for (const Bytes& f : t.frames) {
          TB_CHECK(b.tx.pop() == f, "TX frame differs");
          g_stats.tx_frames++;
        }
        txq.pop_front();
        rings.tx_cons++;
        idle = 0;
      }
      // Tell the NIC what was consumed, now and then.
      if (rings.rx_cons != rx_told && (pending.empty() || b.rng.chance(0.05))) {
        b.write(rq + CLEAVE_NIC_RB_RXQ_CPL_CONS, rings.rx_cons);
        rx_told = rings.rx_cons;
      }
      if (rings.tx_cons != tx_told && (txq.empty() || b.rng.chance(0.05))) {
        b.write(tq + CLEAVE_NIC_RB_TXQ_CPL_CONS, rings.tx_cons);
        tx_told = rings.tx_cons;
      }
    }
    TB_CHECK(b.copy.empty() && b.tx.empty(), "round %" PRIu64 ": output left over", rounds);
    if (++rounds % 32 == 0) check_counters(b, sc);
  }
  check_counters(b, sc);
  TB_CHECK(b.read(rq + CLEAVE_NIC_RB_RXQ_CPL_PROD) == rings.rx_cons, "RX producer index");
  TB_CHECK(b.read(tq + CLEAVE_NIC_RB_TXQ_CPL_PROD) == rings.tx_cons, "TX producer index");
}

}  // namespace cleave::tb
