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

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

constexpr unsigned kNb = TB_DATA_WIDTH / 8;
constexpr uint64_t kIovaBase = 0x0000'0020'0000'0000ull;
using Top = Vcleave_tx;

struct MrInfo {
  bool used = false;
  uint64_t base = 0;  // offset in host memory
  uint64_t len = 0;
};

struct Request {
  Bytes header;
  nic::TxRequest req;
};

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

  static Top* make(VerilatedContext* c, uint64_t seed) {
    c->randReset(2);
    c->randSeed(int(seed & 0x7FFFFFFF));
    return new Top(c);
  }
  explicit Bench(uint64_t seed)
      : top(make(ctx.get(), seed)),
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

// A random header template and request.
Request make_request(Rng& rng, const std::vector<MrInfo>& mrs) {
  Request r;
  IpOpts o;
  o.ihl = rng.chance(0.8) ? 5 : unsigned(5 + rng.below(11));
  o.id = uint16_t(rng.u64());
  o.tos = uint8_t(rng.u64());
  o.ttl = uint8_t(rng.u64());
  o.src = uint32_t(rng.u64());
  o.dst = uint32_t(rng.u64());
  uint8_t flags = uint8_t(rng.below(16));
  const uint64_t kind = rng.below(10);
  if (kind < 5) {  // TCP
    Bytes opts = rng.chance(0.3) ? random_bytes(rng, rng.below(11) * 4) : Bytes{};
    Bytes f = tcp_frame(uint32_t(rng.u64()), {}, opts, uint8_t(rng.u64()), uint16_t(rng.u64()),
                        uint16_t(rng.u64()), o);
    r.header = f;
    if (rng.chance(0.5)) flags = uint8_t(flags | nic::kTxTso);
    flags &= uint8_t(~nic::kTxIcrc);
  } else if (kind < 7) {  // UDP
    r.header = udp_frame(uint16_t(rng.u64()), uint16_t(rng.u64()), random_bytes(rng, rng.below(24)),
                         rng.chance(0.5), o);
    flags &= uint8_t(~(nic::kTxTso | nic::kTxIcrc));
  } else if (kind < 9) {  // RoCEv2: BTH (+ RETH / AETH / ImmDt) in the header
    Bytes ext = random_bytes(rng, rng.below(6) * 4);
    Bytes f = roce_frame(uint8_t(rng.below(0x18)), uint32_t(rng.u64()), uint32_t(rng.u64()), ext,
                         {}, uint16_t(rng.u64()), o);
    f.resize(f.size() - 4);                                  // no ICRC in the template
    f[14 + 4 * o.ihl + 8 + 1] = uint8_t(rng.below(4) << 4);  // pad count
    r.header = f;
    flags = uint8_t((flags & ~nic::kTxTso) | (rng.chance(0.9) ? nic::kTxIcrc : 0));
  } else {  // another protocol
    r.header = ipv4_frame(uint8_t(rng.chance(0.5) ? 1 : rng.u64()),
                          random_bytes(rng, 8 * rng.below(5)), o);
    if (r.header.size() < 14 + 4 * o.ihl) r.header.resize(14 + 4 * o.ihl);
    if (rng.chance(0.8)) flags &= uint8_t(nic::kTxIpCsum);
  }
  // A broken header now and then: cut short, or a byte changed.
  if (rng.chance(0.04)) r.header.resize(rng.below(r.header.size()));
  if (rng.chance(0.04) && !r.header.empty())
    r.header[rng.below(std::min<size_t>(r.header.size(), 60))] ^= uint8_t(1 + rng.below(255));
  // The model sums an IPv4 header longer than the template over the frame's next bytes, past
  // the end of a short frame: not a case a driver sends (and not one the model guards).
  if (r.header.size() > 23 && r.header[23] != 6 && r.header[23] != 17 &&
      r.header.size() < 14 + 4 * size_t(r.header[14] & 0xF))
    r.header.resize(14 + 4 * size_t(r.header[14] & 0xF));
  if (r.header.size() > 255) r.header.resize(255);
  // The payload.
  nic::TxRequest& q = r.req;
  q.flags = flags;
  q.mss = uint16_t(rng.chance(0.02)  ? 0
                   : rng.chance(0.3) ? 1 + rng.below(200)
                                     : 200 + rng.below(9000));
  uint32_t len = uint32_t(rng.chance(0.1)         ? 0
                          : (flags & nic::kTxTso) ? rng.below(rng.chance(0.1) ? 70000 : 20000)
                                                  : rng.below(rng.chance(0.05) ? 10000 : 3000));
  q.mr = uint16_t(rng.below(mrs.size() + 1));
  const MrInfo* m = q.mr < mrs.size() && mrs[q.mr].used ? &mrs[q.mr] : nullptr;
  q.offset = m != nullptr && m->len > len ? rng.below(m->len - len + 1) : rng.below(1000);
  if (rng.chance(0.02) && m != nullptr) q.offset = m->len - rng.below(100);  // past its end
  q.len = len;
  q.cookie = rng.u64();
  // TSO with a tiny MSS makes thousands of frames: keep the run short.
  if ((flags & nic::kTxTso) && q.mss != 0 && q.len / q.mss > 200) q.mss = uint16_t(q.len / 200 + 1);
  return r;
}

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
    // The model: one buffer per frame, large enough.
    nic::TxRequest q = r.req;
    q.header = r.header;
    const uint32_t nf = nic::NicModel::tx_frames(q), room = nic::NicModel::tx_frame_room(q);
    std::vector<Bytes> bufs(nf, Bytes(room));
    std::vector<std::span<uint8_t>> spans;
    for (auto& x : bufs)
      spans.emplace_back(x);
    std::vector<uint32_t> lens(nf);
    uint16_t n = 0;
    nic::TxStatus st = model.tx(q, spans, lens, &n);
    nic::TxCompletion mc;
    TB_CHECK(model.tx_poll({&mc, 1}) == 1, "model completion");
    // The RTL: descriptor + template.
    uint8_t d[CLEAVE_NIC_TX_DESC_BYTES] = {};
    CLEAVE_NIC_TX_DESC_SET(d, HEADER_LEN, r.header.size());
    CLEAVE_NIC_TX_DESC_SET(d, FLAGS, q.flags);
    CLEAVE_NIC_TX_DESC_SET(d, MSS, q.mss);
    CLEAVE_NIC_TX_DESC_SET(d, MR, q.mr);
    CLEAVE_NIC_TX_DESC_SET(d, OFFSET, q.offset);
    CLEAVE_NIC_TX_DESC_SET(d, LEN, q.len);
    CLEAVE_NIC_TX_DESC_SET(d, COOKIE, q.cookie);
    Bytes pkt(d, d + sizeof d);
    pkt.insert(pkt.end(), r.header.begin(), r.header.end());
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
    TB_CHECK(b.out.ready_frames() == (st == nic::TxStatus::kOk ? n : 0),
             "request %" PRIu64 ": %zu frames, model %u", done, b.out.ready_frames(), unsigned(n));
    for (uint16_t i = 0; i < (st == nic::TxStatus::kOk ? n : 0); i++) {
      Bytes got = b.out.pop();
      Bytes want(bufs[i].begin(), bufs[i].begin() + lens[i]);
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
