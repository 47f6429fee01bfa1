// tb_app.cc - the Corundum application block (mqnic_app_block: cleave_nic, the DMA adapter and
// the interface streams) against the model, with the testbench playing Corundum around it:
// its DMA engine (write descriptors read the application's DMA RAM through rd_cmd/rd_resp and
// write host memory; read descriptors fill the RAM through wr_cmd with byte enables, then
// report their status), its TX queues (request packets on the merge queue's stream id, other
// packets that must pass unchanged), the MAC's TX completions, and its RX queues (the copy
// path). The driver and every comparison are tb_nic's (tb_driver.h); on top: passing packets
// arrive unchanged and in order, merged frames carry the merge stream id and the all-ones tag,
// and every packet Corundum sent gets exactly one TX completion with its tag.
// CLEAVE_RTL_FRAMES sets the number of received frames (default 2000).
#include <map>
#include <memory>

// The application block's parameters (meson passes -DTB_<parameter>),
// named as the unit's before the headers read them.
#define TB_DATA_WIDTH TB_AXIS_DATA_WIDTH
#define TB_MAX_FLOWS TB_CLEAVE_MAX_FLOWS
#define TB_MAX_MRS TB_CLEAVE_MAX_MRS
#define TB_MS_CHUNK TB_CLEAVE_MS_CHUNK
#define TB_MS_COMMITTED TB_CLEAVE_MS_COMMITTED
#define TB_MS_STORE TB_CLEAVE_MS_STORE

#include "Vmqnic_app_block.h"
#include "cleave_nic_hw.h"
#include "tb_common.h"
#include "tb_driver.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
constexpr unsigned kSegs = 2, kSegBytes = kNb / kSegs;  // RAM_SEG_COUNT 2: a row is a beat
constexpr unsigned kSegAddrW = 16 - 6;                  // RAM_ADDR_WIDTH 16, 64-byte rows
constexpr uint32_t kMergeTid = 5;
constexpr uint32_t kTagMerged = 0xFFFF;
using Top = Vmqnic_app_block;

// The AXI-Lite master's view of the application control port.
struct AppAxil {
  explicit AppAxil(Top* t)
      : s_axil_awaddr(t->s_axil_app_ctrl_awaddr),
        s_axil_awprot(t->s_axil_app_ctrl_awprot),
        s_axil_awvalid(t->s_axil_app_ctrl_awvalid),
        s_axil_awready(t->s_axil_app_ctrl_awready),
        s_axil_wdata(t->s_axil_app_ctrl_wdata),
        s_axil_wstrb(t->s_axil_app_ctrl_wstrb),
        s_axil_wvalid(t->s_axil_app_ctrl_wvalid),
        s_axil_wready(t->s_axil_app_ctrl_wready),
        s_axil_bvalid(t->s_axil_app_ctrl_bvalid),
        s_axil_bready(t->s_axil_app_ctrl_bready),
        s_axil_araddr(t->s_axil_app_ctrl_araddr),
        s_axil_arprot(t->s_axil_app_ctrl_arprot),
        s_axil_arvalid(t->s_axil_app_ctrl_arvalid),
        s_axil_arready(t->s_axil_app_ctrl_arready),
        s_axil_rdata(t->s_axil_app_ctrl_rdata),
        s_axil_rvalid(t->s_axil_app_ctrl_rvalid),
        s_axil_rready(t->s_axil_app_ctrl_rready) {}
  TB_SIG(Top, s_axil_app_ctrl_awaddr) & s_axil_awaddr;
  CData& s_axil_awprot;
  CData& s_axil_awvalid;
  CData& s_axil_awready;
  IData& s_axil_wdata;
  CData& s_axil_wstrb;
  CData& s_axil_wvalid;
  CData& s_axil_wready;
  CData& s_axil_bvalid;
  CData& s_axil_bready;
  TB_SIG(Top, s_axil_app_ctrl_araddr) & s_axil_araddr;
  CData& s_axil_arprot;
  CData& s_axil_arvalid;
  CData& s_axil_arready;
  IData& s_axil_rdata;
  CData& s_axil_rvalid;
  CData& s_axil_rready;
};

// Frames the driver takes merged frames from.
class FrameQueue {
 public:
  void push(Bytes f) { q_.push_back(std::move(f)); }
  bool empty() const { return q_.empty(); }
  size_t ready_frames() const { return q_.size(); }
  Bytes pop() {
    Bytes f = std::move(q_.front());
    q_.pop_front();
    return f;
  }
  void set_stall(double) {}

 private:
  std::deque<Bytes> q_;
};

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Top> top;
  Rng rng;
  AppAxil axil_ports;
  AxilMaster<AppAxil> axil;
  AxisSource<TB_SIG(Top, s_axis_if_rx_tdata), TB_SIG(Top, s_axis_if_rx_tkeep)> rx;
  AxisSink<TB_SIG(Top, m_axis_if_rx_tdata), TB_SIG(Top, m_axis_if_rx_tkeep)> copy;
  FrameQueue tx;
  Bytes* mem = nullptr;
  Bytes rings = Bytes(kRingBytes, 0);
  uint64_t cycles = 0;

  // Corundum's TX queues: packets with their stream id and tag.
  struct TxPkt {
    Bytes data;
    uint32_t tid, tag;
  };
  std::deque<TxPkt> txq;
  size_t tx_pos = 0;
  bool tx_showing = false;
  double tx_stall = 0.3;
  uint32_t next_tag = 1;
  std::deque<TxPkt> passing;         // sent to pass: expected out in order
  std::map<uint32_t, int> cpl_owed;  // tags whose completion Corundum still waits for
  uint64_t passed = 0, merged = 0;
  // The network side of TX: frames out, their completions back.
  Bytes out_cur;
  double out_stall = 0.3;
  std::deque<uint32_t> mac_cpl;  // tags of frames sent, completed after a while

  // Corundum's DMA engine.
  struct Desc {
    uint64_t addr;
    uint32_t ram, len, tag;
  };
  std::deque<Desc> wdesc, rdesc;
  // the write descriptor in progress: rows asked and rows answered, per segment
  bool w_busy = false;
  Desc w_cur{};
  uint32_t w_row0 = 0, w_rows = 0, w_asked[kSegs] = {}, w_got[kSegs] = {};
  std::vector<Bytes> w_data;                     // rows as they come back
  std::deque<std::pair<bool, uint32_t>> status;  // (write?, tag), in order
  int status_wait = 0;
  // the read descriptor in progress: rows written, writes done
  bool r_busy = false;
  Desc r_cur{};
  uint32_t r_row0 = 0, r_rows = 0, r_sent[kSegs] = {}, r_done[kSegs] = {};
  double ram_ready = 0.8;

  explicit Bench(uint64_t seed)
      : top(make_top<Top>(ctx.get(), seed)),
        rng(seed ^ 0x77777777ull),
        axil_ports(top.get()),
        axil(&axil_ports),
        rx(kNb, &top->s_axis_if_rx_tdata, &top->s_axis_if_rx_tkeep, &top->s_axis_if_rx_tvalid,
           &top->s_axis_if_rx_tlast, &top->s_axis_if_rx_tready),
        copy("if_rx", kNb, &top->m_axis_if_rx_tdata, &top->m_axis_if_rx_tkeep,
             &top->m_axis_if_rx_tvalid, &top->m_axis_if_rx_tlast, &top->m_axis_if_rx_tready) {
    top->s_axis_if_rx_tid = 0;
    top->s_axis_if_rx_tdest = 0;
    set_bits(top->s_axis_if_rx_tuser, 0, 64, 0);
    set_bits(top->s_axis_if_rx_tuser, 64, 33, 0);
  }

  uint8_t* host(uint64_t addr, uint64_t len) {
    if (addr >= kIovaBase && addr - kIovaBase + len <= mem->size())
      return &(*mem)[addr - kIovaBase];
    if (addr >= kRingBase && addr - kRingBase + len <= rings.size())
      return &rings[addr - kRingBase];
    fail("DMA outside host memory at 0x" + std::to_string(addr));
  }

  void push_tx_request(Bytes pkt) {
    // now and then a packet of another queue first, which must pass unchanged
    if (rng.chance(0.3)) {
      TxPkt p{random_bytes(rng, 60 + rng.below(200)), uint32_t(1 + rng.below(4)), next_tag++};
      passing.push_back(p);
      cpl_owed[p.tag]++;
      txq.push_back(std::move(p));
    }
    TxPkt q{std::move(pkt), kMergeTid, next_tag++};
    cpl_owed[q.tag]++;
    txq.push_back(std::move(q));
    next_tag &= 0x7FFF;
  }
  void set_stalls(double p) {
    copy.set_stall(rng.chance(0.5) ? 0.0 : p);
    rx.set_stall(rng.chance(0.5) ? 0.0 : 0.4);
    tx_stall = rng.chance(0.5) ? 0.0 : 0.4;
    out_stall = rng.chance(0.5) ? 0.0 : p;
    ram_ready = rng.chance(0.5) ? 1.0 : 0.5;
  }

  void drive_tx_in() {
    if (!tx_showing && !txq.empty() && !rng.chance(tx_stall)) tx_showing = true;
    top->s_axis_if_tx_tvalid = tx_showing;
    if (!tx_showing) return;
    const TxPkt& p = txq.front();
    for (unsigned i = 0; i < kNb; i++) {
      size_t at = tx_pos + i;
      set_byte(top->s_axis_if_tx_tdata, i, at < p.data.size() ? p.data[at] : 0);
      set_bits(top->s_axis_if_tx_tkeep, i, 1, at < p.data.size());
    }
    top->s_axis_if_tx_tlast = tx_pos + kNb >= p.data.size();
    top->s_axis_if_tx_tid = p.tid;
    top->s_axis_if_tx_tdest = 0;
    top->s_axis_if_tx_tuser = (p.tag << 1);
  }
  void fire_tx_in() {
    if (!tx_showing || !top->s_axis_if_tx_tready) return;
    tx_showing = false;
    tx_pos += kNb;
    if (tx_pos >= txq.front().data.size()) {
      txq.pop_front();
      tx_pos = 0;
    }
  }
  void fire_tx_out() {
    if (!top->m_axis_if_tx_tvalid || !top->m_axis_if_tx_tready) return;
    for (unsigned i = 0; i < kNb; i++)
      if (get_bits(top->m_axis_if_tx_tkeep, i, 1))
        out_cur.push_back(get_byte(top->m_axis_if_tx_tdata, i));
    if (!top->m_axis_if_tx_tlast) return;
    const uint32_t tid = top->m_axis_if_tx_tid, tag = uint32_t(top->m_axis_if_tx_tuser >> 1);
    TB_CHECK((top->m_axis_if_tx_tuser & 1) == 0, "a frame marked bad");
    if (tid == kMergeTid) {
      TB_CHECK(tag == kTagMerged, "merged frame with tag %u", tag);
      tx.push(std::move(out_cur));
      merged++;
    } else {
      TB_CHECK(!passing.empty(), "a frame passed that was not sent");
      TB_CHECK(out_cur == passing.front().data && tid == passing.front().tid &&
                   tag == passing.front().tag,
               "passing packet changed");
      passing.pop_front();
      passed++;
    }
    mac_cpl.push_back(tag);
    out_cur.clear();
  }

  // One step of Corundum's DMA engine, before the clock edge (inputs) and after it (fires).
  void dma_drive() {
    top->m_axis_data_dma_write_desc_ready = rng.chance(0.7);
    top->m_axis_data_dma_read_desc_ready = rng.chance(0.7);
    top->s_axis_data_dma_write_desc_status_valid = 0;
    top->s_axis_data_dma_read_desc_status_valid = 0;
    if (!status.empty() && --status_wait <= 0) {
      auto [w, tag] = status.front();
      if (w) {
        top->s_axis_data_dma_write_desc_status_valid = 1;
        top->s_axis_data_dma_write_desc_status_tag = tag;
        top->s_axis_data_dma_write_desc_status_error = 0;
      } else {
        top->s_axis_data_dma_read_desc_status_valid = 1;
        top->s_axis_data_dma_read_desc_status_tag = tag;
        top->s_axis_data_dma_read_desc_status_error = 0;
      }
    }
    // read commands of the write descriptor in progress (one row of each segment at a time)
    top->data_dma_ram_rd_cmd_valid = 0;
    top->data_dma_ram_rd_resp_ready = 0;
    top->data_dma_ram_wr_cmd_valid = 0;
    for (unsigned s = 0; s < kSegs; s++) {
      if (w_busy && w_asked[s] < w_rows && rng.chance(ram_ready)) {
        top->data_dma_ram_rd_cmd_valid |= 1u << s;
        set_bits(top->data_dma_ram_rd_cmd_addr, kSegAddrW * s, kSegAddrW, w_row0 + w_asked[s]);
        set_bits(top->data_dma_ram_rd_cmd_sel, 4 * s, 4, w_cur.ram >> 16);
      }
      if (rng.chance(ram_ready)) top->data_dma_ram_rd_resp_ready |= 1u << s;
      // write commands of the read descriptor in progress
      if (r_busy && r_sent[s] < r_rows && rng.chance(ram_ready)) {
        const uint32_t row = r_sent[s];
        top->data_dma_ram_wr_cmd_valid |= 1u << s;
        set_bits(top->data_dma_ram_wr_cmd_addr, kSegAddrW * s, kSegAddrW, r_row0 + row);
        set_bits(top->data_dma_ram_wr_cmd_sel, 4 * s, 4, 1);
        for (unsigned i = 0; i < kSegBytes; i++) {
          uint64_t b = uint64_t(row) * kNb + s * kSegBytes + i;  // byte of the transfer
          bool on = b < r_cur.len;
          set_bits(top->data_dma_ram_wr_cmd_be, kSegBytes * s + i, 1, on);
          set_byte(top->data_dma_ram_wr_cmd_data, kSegBytes * s + i,
                   on ? *host(r_cur.addr + b, 1) : uint8_t(rng.u64()));
        }
      }
    }
  }
  void dma_fire() {
    if (top->s_axis_data_dma_write_desc_status_valid ||
        top->s_axis_data_dma_read_desc_status_valid) {
      status.pop_front();
      status_wait = int(rng.below(4));
    }
    if (top->m_axis_data_dma_write_desc_valid && top->m_axis_data_dma_write_desc_ready) {
      wdesc.push_back({top->m_axis_data_dma_write_desc_dma_addr,
                       uint32_t(top->m_axis_data_dma_write_desc_ram_addr) |
                           uint32_t(top->m_axis_data_dma_write_desc_ram_sel) << 16,
                       top->m_axis_data_dma_write_desc_len, top->m_axis_data_dma_write_desc_tag});
    }
    if (top->m_axis_data_dma_read_desc_valid && top->m_axis_data_dma_read_desc_ready) {
      TB_CHECK(top->m_axis_data_dma_read_desc_ram_sel == 1, "read descriptor RAM select");
      rdesc.push_back({top->m_axis_data_dma_read_desc_dma_addr,
                       uint32_t(top->m_axis_data_dma_read_desc_ram_addr),
                       top->m_axis_data_dma_read_desc_len, top->m_axis_data_dma_read_desc_tag});
    }
    for (unsigned s = 0; s < kSegs; s++) {
      if (((top->data_dma_ram_rd_cmd_valid & top->data_dma_ram_rd_cmd_ready) >> s) & 1)
        w_asked[s]++;
      if (((top->data_dma_ram_rd_resp_valid & top->data_dma_ram_rd_resp_ready) >> s) & 1) {
        TB_CHECK(w_busy && w_got[s] < w_asked[s], "a RAM read answer nobody asked for");
        Bytes& row = w_data[w_got[s]];
        for (unsigned i = 0; i < kSegBytes; i++)
          row[s * kSegBytes + i] = get_byte(top->data_dma_ram_rd_resp_data, kSegBytes * s + i);
        w_got[s]++;
      }
      if (((top->data_dma_ram_wr_cmd_valid & top->data_dma_ram_wr_cmd_ready) >> s) & 1) r_sent[s]++;
    }
    // a write descriptor whose rows all came back: bytes to the host, then its status
    if (w_busy && std::all_of(w_got, w_got + kSegs, [&](uint32_t g) { return g == w_rows; })) {
      const uint32_t lane = (w_cur.ram & 0xFFFF) % kNb;
      uint8_t* dst = host(w_cur.addr, w_cur.len);
      for (uint32_t i = 0; i < w_cur.len; i++)
        dst[i] = w_data[(lane + i) / kNb][(lane + i) % kNb];
      status.push_back({true, w_cur.tag});
      w_busy = false;
    }
    if (!w_busy && !wdesc.empty()) {
      w_cur = wdesc.front();
      wdesc.pop_front();
      const uint32_t a = w_cur.ram & 0xFFFF;
      w_row0 = a / kNb;
      w_rows = (a % kNb + w_cur.len + kNb - 1) / kNb;
      w_data.assign(w_rows, Bytes(kNb));
      std::fill(w_asked, w_asked + kSegs, 0);
      std::fill(w_got, w_got + kSegs, 0);
      w_busy = true;
    }
    // a read descriptor whose rows are all written: its status
    if (r_busy && std::all_of(r_done, r_done + kSegs, [&](uint32_t d) { return d == r_rows; })) {
      status.push_back({false, r_cur.tag});
      r_busy = false;
    }
    if (!r_busy && !rdesc.empty()) {
      r_cur = rdesc.front();
      rdesc.pop_front();
      TB_CHECK(r_cur.ram % kNb == 0, "read RAM address not a row");
      r_row0 = r_cur.ram / kNb;
      r_rows = (r_cur.len + kNb - 1) / kNb;
      std::fill(r_sent, r_sent + kSegs, 0);
      std::fill(r_done, r_done + kSegs, 0);
      r_busy = r_rows > 0;
      if (!r_busy) status.push_back({false, r_cur.tag});
    }
  }

  void cycle() {
    axil.drive(rng);
    rx.drive(rng);
    copy.drive(rng);
    drive_tx_in();
    top->m_axis_if_tx_tready = rng.chance(out_stall) ? 0 : 1;
    // the MAC's completions and Corundum's queues taking the forwarded ones
    top->s_axis_if_tx_cpl_valid = !mac_cpl.empty() && rng.chance(0.5);
    if (top->s_axis_if_tx_cpl_valid) top->s_axis_if_tx_cpl_tag = mac_cpl.front();
    top->m_axis_if_tx_cpl_ready = rng.chance(0.7);
    dma_drive();
    top->clk = 0;
    top->eval();
    if (!top->rst) {
      axil.fire();
      rx.fire();
      copy.fire();
      fire_tx_in();
      fire_tx_out();
      if (top->s_axis_if_tx_cpl_valid && top->s_axis_if_tx_cpl_ready) mac_cpl.pop_front();
      if (top->m_axis_if_tx_cpl_valid && top->m_axis_if_tx_cpl_ready) {
        const uint32_t tag = top->m_axis_if_tx_cpl_tag;
        TB_CHECK(tag != kTagMerged && cpl_owed[tag] > 0, "TX completion for tag %u not owed", tag);
        cpl_owed[tag]--;
      }
      for (unsigned s = 0; s < kSegs; s++)
        if ((top->data_dma_ram_wr_done >> s) & 1) r_done[s]++;
      dma_fire();
    }
    top->clk = 1;
    top->eval();
    cycles++;
  }
  void write(uint32_t a, uint32_t v) {
    axil.write(a, v, [this] { cycle(); });
  }
  uint32_t read(uint32_t a) {
    return axil.read(a, [this] { cycle(); });
  }
};

// The direct and sync streams pass straight through.
void check_passthrough(Bench& b) {
  Top* t = b.top.get();
  for (int i = 0; i < 16; i++) {
    uint64_t v = b.rng.u64();
    set_bits(t->s_axis_direct_rx_tdata, 0, 64, v);
    t->s_axis_direct_rx_tvalid = 1;
    t->m_axis_direct_rx_tready = uint8_t(i & 1);
    set_bits(t->s_axis_sync_tx_tdata, 64, 64, ~v);
    t->s_axis_sync_tx_tvalid = uint8_t(i & 1);
    t->eval();
    TB_CHECK(get_bits(t->m_axis_direct_rx_tdata, 0, 64) == v && t->m_axis_direct_rx_tvalid == 1,
             "direct RX passes");
    TB_CHECK(t->s_axis_direct_rx_tready == uint8_t(i & 1), "direct RX ready passes");
    TB_CHECK(get_bits(t->m_axis_sync_tx_tdata, 64, 64) == ~v &&
                 t->m_axis_sync_tx_tvalid == uint8_t(i & 1),
             "sync TX passes");
  }
  t->s_axis_direct_rx_tvalid = 0;
  t->s_axis_sync_tx_tvalid = 0;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_app");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t frames = env_u64("CLEAVE_RTL_FRAMES", 2000);
  Scenario sc(seed, built_geometry());
  Bytes mem = sc.mem();
  b.mem = &mem;

  b.top->rst = 1;
  for (int i = 0; i < 8; i++)
    b.cycle();
  b.top->rst = 0;
  check_passthrough(b);
  b.write(CLEAVE_NIC_RB_TXQ_BASE + CLEAVE_NIC_RB_TXQ_MERGE_QUEUE, kMergeTid);
  drive(b, sc, frames);
  // Everything sent has left and every packet got its completion.
  for (uint64_t guard = 0; !(b.txq.empty() && b.passing.empty() && b.mac_cpl.empty()); guard++) {
    TB_CHECK(guard < 1000000, "packets or completions left");
    b.cycle();
  }
  for (int i = 0; i < 200; i++)
    b.cycle();
  for (auto [tag, n] : b.cpl_owed)
    TB_CHECK(n == 0, "tag %u: %d completions missing", tag, n);
  TB_CHECK(b.read(CLEAVE_NIC_RB_DEBUG_BASE + CLEAVE_NIC_RB_DEBUG_DMA_ERRORS) == 0, "DMA errors");
  const Stats& s = g_stats;
  std::printf("tb_app: ok, %" PRIu64 " frames, %" PRIu64 " commands, %" PRIu64
              " TX requests (%" PRIu64 " merged frames), %" PRIu64
              " packets passed, at %u bits, %" PRIu64 " cycles\n",
              s.frames, s.cmds, s.tx_requests, b.merged, b.passed, TB_DATA_WIDTH, b.cycles);
  return 0;
}
