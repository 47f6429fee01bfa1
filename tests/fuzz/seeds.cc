// seeds.cc - writes the fuzzers' seed corpora: `fuzz_seeds OUTDIR SOURCE_ROOT` makes
// OUTDIR/<target>/<seed> for every target in tests/fuzz.
//
// Seeds are generated, not committed, so they always speak the harnesses' current input format
// (fuzz_input.h's Writer mirrors the Reader each harness uses). They come from what the tests
// build: the frames of tests/unit/model_frames.h, the golden RoCEv2 packets of
// tests/golden/roce_rc.txt, TCP headers from the transport's own builder, config/cleaved.yaml and
// the configurations of tests/unit/config_test.cc, app requests like tests/unit/apps_test.cc's.
#include <cleave/cleave.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../unit/model_frames.h"
#include "fuzz_input.h"
#include "nic_rx_ops.h"
#include "shm_abi.h"
#include "transport/rocev2/roce_wire.h"
#include "transport/tcp/tcp_wire.h"

namespace {

namespace fs = std::filesystem;
using cleave::fuzz::Writer;
using Bytes = std::vector<uint8_t>;
namespace mf = cleave::nic::test;

Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

fs::path g_out;
fs::path g_src;
int g_written = 0;

void seed(const std::string& target, const std::string& name, const Bytes& b) {
  const fs::path dir = g_out / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  g_written++;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "fuzz_seeds: cannot read %s\n", p.c_str());
    std::exit(1);
  }
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// tests/golden/roce_rc.txt: "NAME hex" per line, whole Ethernet frames.
std::map<std::string, Bytes> golden() {
  std::map<std::string, Bytes> out;
  std::istringstream in(read_text(g_src / "tests/golden/roce_rc.txt"));
  std::string name, hex;
  while (in >> name >> hex) {
    Bytes b;
    for (size_t i = 0; i + 1 < hex.size(); i += 2)
      b.push_back(uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
    out[name] = b;
  }
  if (out.empty()) {
    std::fprintf(stderr, "fuzz_seeds: no frames in tests/golden/roce_rc.txt\n");
    std::exit(1);
  }
  return out;
}

// ---- nic_rx (nic_rx_fuzz.cc) ----

namespace nic_rx {
using namespace cleave::fuzz::nic_rx;
enum Parser : uint8_t { kTcp, kRoce, kSolar, kUdp };
// Indexes into kIps: 10.0.0.1, 10.0.0.2, 10.0.0.3.
constexpr uint8_t kIp1 = 0, kIp2 = 1;
// Chunks of 4 entries, 2 committed chunks per flow, 6 in the store, checksums verified.
constexpr uint8_t kConfig = 0x80 | 2 | (2 << 2) | (1 << 4);

void mr_add(Writer& w, uint8_t id, uint16_t len, uint8_t access = 0) {
  w.u8(kMrAdd).u8(id).u16(uint16_t(len - 1)).u8(0).u8(access).u8(0);
}
struct Flow {
  uint8_t parser = kTcp;
  uint8_t src = kIp2, dst = kIp1;
  bool copy = false, unreliable = false, messages = false;
  uint16_t sport = 40000, dport = 5001;
  uint32_t seq = 0;
  uint8_t pmtu_log = 4;  // 256 << 4 = 4096
  uint32_t offset = 0;
  uint32_t qpn = 0;
};
void flow_add(Writer& w, uint8_t id, const Flow& f) {
  const uint8_t bits = uint8_t(f.src | f.dst << 2 | (f.copy ? 0x10 : 0) |
                               (f.unreliable ? 0x20 : 0) | (f.messages ? 0x40 : 0));
  w.u8(kFlowAdd).u8(id).u8(f.parser).u8(bits).u16(f.sport).u16(f.dport).u32(f.seq);
  w.u8(f.pmtu_log).u32(f.offset).u32(f.qpn).u8(0);
}
void ms_post(Writer& w, uint8_t flow, uint8_t mr, uint16_t off, uint16_t len, int32_t msg = -1) {
  w.u8(kMsPost).u8(flow).u8(mr).u16(off).u16(len);
  if (msg < 0) {
    w.u8(0);
  } else {
    w.u8(1).u32(uint32_t(msg));
  }
}
void frame(Writer& w, const Bytes& f, uint8_t fix = 0) {
  w.u8(kFrame).u8(0).u16(uint16_t(f.size())).bytes(f).u8(fix);
}

void write() {
  using mf::pattern;
  {  // TCP byte stream: in order, past a hole, trimmed, a duplicate, a FIN, a RST.
    Writer w;
    w.u8(kConfig);
    mr_add(w, 0, 4096);
    Flow f;
    f.seq = 1000;
    flow_add(w, 0, f);
    ms_post(w, 0, 0, 0, 1024);
    ms_post(w, 0, 0, 1024, 1024);
    ms_post(w, 0, 0, 2048, 2048);
    frame(w, mf::tcp_frame(1000, pattern(400)));
    frame(w, mf::tcp_frame(1600, pattern(700, 600)));
    w.u8(kCursor).u8(0).u8(1).u16(400);
    frame(w, mf::tcp_frame(1300, pattern(300, 300)));
    frame(w, mf::tcp_frame(1000, pattern(100)));
    frame(w, mf::tcp_frame(2300, pattern(50, 1300), 0x19));
    w.u8(kMsRetire).u8(0).u8(1);
    frame(w, mf::tcp_frame(900, {}, 0x04));
    seed("nic_rx", "tcp_stream", w.b);
  }
  {  // TCP message mode: the message option names the MS; one lies about its segment.
    Writer w;
    w.u8(kConfig);
    mr_add(w, 0, 4096);
    Flow f;
    f.seq = 5000;
    f.messages = true;
    flow_add(w, 0, f);
    ms_post(w, 0, 0, 0, 1000, 0);
    ms_post(w, 0, 0, 1000, 1000, 1);
    ms_post(w, 0, 0, 2000, 1000, 2);
    frame(w, mf::tcp_frame_opts(5000, pattern(600), mf::msg_option(0, 5000, 600)));
    frame(w, mf::tcp_frame_opts(5600, pattern(400), mf::msg_option(1, 5600, 800)));
    frame(w, mf::tcp_frame_opts(6000, pattern(400), mf::msg_option(1, 5600, 800)));
    frame(w, mf::tcp_frame_opts(6400, pattern(100), mf::msg_option(2, 6400, 50)));
    w.u8(kMsRetireMsg).u8(0).u8(0).u32(1);
    seed("nic_rx", "tcp_messages", w.b);
  }
  {  // UDP, unreliable: each datagram into the next MS, until there is none.
    Writer w;
    w.u8(kConfig);
    mr_add(w, 1, 2048);
    Flow f;
    f.parser = kUdp;
    f.sport = 0;
    f.dport = 9000;
    flow_add(w, 2, f);
    ms_post(w, 2, 1, 0, 512);
    ms_post(w, 2, 1, 512, 512);
    frame(w, mf::udp_frame(1234, 9000, pattern(300)));
    frame(w, mf::udp_frame(1234, 9000, pattern(600)));
    frame(w, mf::udp_frame(1234, 9000, pattern(100), false));
    seed("nic_rx", "udp", w.b);
  }
  {  // Solar: blocks placed by I/O id and offset, and as a byte stream by offset; connections
     // found by their number (the frames' mf::kSolarConn).
    Writer w;
    w.u8(kConfig);
    mr_add(w, 0, 4096);
    Flow f;
    f.parser = kSolar;
    f.messages = true;
    f.sport = 0;
    f.dport = 7000;
    f.qpn = mf::kSolarConn;
    flow_add(w, 0, f);
    ms_post(w, 0, 0, 0, 2048, 7);
    ms_post(w, 0, 0, 2048, 2048, 8);
    frame(w, mf::solar_frame(1, 7, 0, 1, pattern(512)));
    frame(w, mf::solar_frame(1, 7, 1024, 2, pattern(512, 1024)));
    frame(w, mf::solar_frame(3, 8, 0, 3, pattern(256)));
    frame(w, mf::solar_frame(4, 8, 0, 4, {}));
    Flow g = f;
    g.messages = false;
    g.src = 2;  // 10.0.0.3
    g.offset = 65536;
    flow_add(w, 1, g);
    ms_post(w, 1, 0, 0, 4096);
    Bytes s = mf::solar_frame(1, 0, 65536 + 100, 5, pattern(300));
    mf::put32(&s[14 + 12], 0x0A000003);  // from 10.0.0.3: its IP checksum is fixed up
    frame(w, s, 7);
    seed("nic_rx", "solar", w.b);
  }
  {  // RoCEv2: the golden packets of one QP, receives posted for its SENDs, a READ sink, an
     // MR the peer may write.
    const auto g = golden();
    Writer w;
    w.u8(kConfig);
    mr_add(w, 0, 4096, 3);
    Flow f;
    f.parser = kRoce;
    f.src = kIp1;
    f.dst = kIp2;
    f.sport = 0;
    f.dport = 4791;
    f.seq = 0x100;
    f.pmtu_log = 0;  // 256
    f.qpn = 0x22;
    flow_add(w, 0, f);
    for (int m = 0; m < 4; m++)
      ms_post(w, 0, 0, uint16_t(m * 1024), 1024, m);
    w.u8(kReadPost).u8(0).u32(0x100).u8(0).u16(0).u16(1024);
    for (const auto& [name, b] : g)
      frame(w, b);
    seed("nic_rx", "roce_golden", w.b);
    for (const auto& [name, b] : g) {
      Writer one;
      one.u8(kConfig);
      mr_add(one, 0, 4096, 3);
      flow_add(one, 0, f);
      ms_post(one, 0, 0, 0, 4096, 0);
      frame(one, b);
      seed("nic_rx", "roce_" + name, one.b);
    }
  }
  {  // RoCEv2 WRITE by rkey (tag 0, MR 0) from model_frames, checksums off.
    Writer w;
    w.u8(0x1A);
    mr_add(w, 0, 4096, 1);
    Flow f;
    f.parser = kRoce;
    f.sport = 0;
    f.dport = 4791;
    f.seq = 10;
    f.pmtu_log = 1;  // 512
    f.qpn = 17;
    flow_add(w, 0, f);
    frame(w, mf::roce_frame(0x06, 10, mf::reth(100, 0, 1500), pattern(512)));
    frame(w, mf::roce_frame(0x07, 11, {}, pattern(512, 512)));
    frame(w, mf::roce_frame(0x08, 12, {}, pattern(476, 1024)));
    frame(w, mf::roce_frame(0x0A, 13, mf::reth(3000, 0, 20), pattern(20)));
    seed("nic_rx", "roce_write", w.b);
  }
  {  // TX: a TCP header with a payload reference, segmented.
    Writer w;
    w.u8(kConfig);
    mr_add(w, 0, 4096);
    Bytes h = mf::tcp_frame(1, {});
    w.u8(kTx).u8(0).u8(uint8_t(h.size())).bytes(h).u8(0).u16(0).u16(3000).u16(1000).u8(7).u8(1);
    seed("nic_rx", "tx_tso", w.b);
  }
}
}  // namespace nic_rx

// ---- tcp_wire, roce_wire ----

void tcp_wire() {
  using namespace cleave::transport::tcp;
  auto put = [](const std::string& name, const BuildSpec& b) {
    Bytes h(kMaxHeaderLen);
    h.resize(build(b, h.data()));
    seed("tcp_wire", name, h);
  };
  BuildSpec syn;
  syn.src_port = 40000;
  syn.dst_port = 80;
  syn.seq = 1;
  syn.flags = kSyn;
  syn.window = 65535;
  syn.mss = 1460;
  syn.sack_permitted = true;
  syn.ts = true;
  syn.ts_val = 7;
  syn.wscale_opt = true;
  syn.wscale = 7;
  put("syn", syn);
  syn.msg = true;
  syn.msg_limit = 4;
  put("syn_msg", syn);
  BuildSpec data;
  data.flags = kAck | kPsh;
  data.seq = 1000;
  data.ack = 2000;
  data.ts = true;
  SackBlock blocks[3] = {{3000, 4000}, {5000, 6000}, {7000, 8000}};
  data.nsack = 3;
  data.sack = blocks;
  put("ack_sack", data);
  data.nsack = 0;
  data.msg = data.msg_data = true;
  data.msg_no = 3;
  data.msg_start = 1000;
  data.msg_len = 500;
  put("data_msg", data);
  // The segments the model tests feed, their TCP headers alone.
  Bytes f = mf::tcp_frame_opts(5000, {}, mf::msg_option(0, 5000, 600));
  seed("tcp_wire", "model_msg", Bytes(f.begin() + 34, f.end()));
}

void roce_wire() {
  for (const auto& [name, b] : golden())
    seed("roce_wire", name, Bytes(b.begin() + 34, b.end()));  // from the UDP header on
  Bytes w = mf::roce_frame(0x0B, 5, cat(mf::reth(1, 2, 3), Bytes{0, 0, 0, 9}), {});
  seed("roce_wire", "write_only_imm", Bytes(w.begin() + 34, w.end()));
}

// ---- config ----

void config() {
  seed("config", "cleaved.yaml", [] {
    std::string t = read_text(g_src / "config/cleaved.yaml");
    return Bytes(t.begin(), t.end());
  }());
  const std::string port = "ports:\n  - name: p0\n    device: net_null0\n    ipv4: 10.0.0.1/24\n";
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"minimal", port},
      {"full_port",
       "eal:\n  args: [--log-level, \"*:debug\"]\nports:\n  - name: p0\n"
       "    device: net_af_packet0,iface=va\n    mac: 02:00:00:00:00:01\n    mtu: 9000\n"
       "    ipv4: 10.0.0.1/24\n    gateway: 10.0.0.254\n    routes:\n"
       "      - {dst: 10.1.0.0/16, via: 10.0.0.2}\n    exception_tap: cl-exc0\n"
       "    faults: {seed: 9, rx: {loss: 0.01, reorder: 0.02}, tx: {duplicate: 0.5}}\n"},
      {"apps",
       "apps:\n  quota: {pipes: 8, error_budget: 10}\n  allow:\n    - uid: 1000\n    - gid: 100\n"
       "      quota: {memory_mb: 1024, region_mb: 64}\n" +
           port},
      {"transports",
       "transports:\n  plugins:\n    - /usr/lib/cleave/solar.so\n  bindings:\n    - port: 5001\n"
       "      transport: tcp\n      params: {cc: cubic, mss: 1400, sack: off}\n"
       "    - {port: 80}\n    - tuple: {local: \"10.0.0.1:*\", remote: \"*:443\"}\n"
       "      uid: 1000\n" +
           port},
      {"nic_dataplane",
       "nic: {max_flows: 100, ms_committed: 64, ms_store: 0}\ndataplane: {lcore: 2, burst: 64, "
       "idle_sleep_us: 50}\narp: {retries: 5}\nlog: {level: debug, format: plain}\n" +
           port},
      {"two_ports", port + "  - name: p1\n    device: net_null1\n    ipv4: 10.0.1.1/24\n"},
  };
  for (const auto& [name, t] : texts)
    seed("config", name, Bytes(t.begin(), t.end()));
}

// ---- pipe (pipe_fuzz.cc) ----

void pipe() {
  using namespace cleave;
  auto entry = [](Writer& w, uint8_t opcode, uint64_t wr_id, uint32_t mr, uint64_t off,
                  uint32_t len, uint32_t target = 0, uint32_t remote_mr = 0,
                  uint64_t remote_off = 0) {
    abi::SendEntry e{};
    e.opcode = opcode;
    e.wr_id = wr_id;
    e.mr = mr;
    e.offset = off;
    e.length = len;
    e.target = target;
    e.remote_mr = remote_mr;
    e.remote_offset = remote_off;
    const auto* p = reinterpret_cast<const uint8_t*>(&e);
    w.bytes({p, sizeof e - 1});
  };
  auto recv = [](Writer& w, uint16_t mr, uint64_t off, uint32_t len) {
    abi::RecvEntry e{};
    e.mr = mr;
    e.offset = off;
    e.length = len;
    const auto* p = reinterpret_cast<const uint8_t*>(&e);
    w.bytes({p, sizeof e - 1});
  };
  {  // Nop, copy, send into a posted receive; the app reads its completions.
    Writer w;
    w.u8(31).u8(31);
    w.u8(1).u8(0).u8(2);
    recv(w, 0, 4096, 512);
    recv(w, 2, 0, 100);
    w.u8(0).u8(0).u8(4);
    entry(w, abi::kOpNop, 1, 0, 0, 0);
    entry(w, abi::kOpCopy, 2, 0, 0, 256, 0, 2, 100);
    entry(w, abi::kOpSend, 3, 1, 0, 300, 2);
    entry(w, abi::kOpSend, 4, 0, 0, 300, 2);
    w.u8(2).u16(10);
    w.u8(3).u8(0).u8(15);
    seed("pipe", "local_ops", w.b);
  }
  {  // Flow requests on the second submit pipe (its completion pipe is small), bad ones too.
    Writer w;
    w.u8(31).u8(8);
    w.u8(0).u8(1).u8(7);
    entry(w, abi::kOpFlowSend, 0, 0, 0, 1000, 5);
    entry(w, abi::kOpFlowRecv, 4, 2, 0, 4096, 5);
    entry(w, abi::kOpFlowRecv, 8, 1, 0, 10, 5);  // read-only MR
    entry(w, abi::kOpRdmaWrite, 2, 0, 100, 100, 5);
    entry(w, abi::kOpRdmaRead, 3, 0, 8000, 500, 5);  // out of bounds
    entry(w, abi::kOpFlowClose, 5, 0, 0, 0, 5);
    entry(w, abi::kOpFlowAbort, 1, 0, 0, 0, 5);
    w.u8(2).u16(1);
    w.u8(3).u8(1).u8(15);
    w.u8(2).u16(1);
    seed("pipe", "flow_ops", w.b);
  }
  {  // A sleeping consumer, then a forged consumer index on the completion pipe.
    Writer w;
    w.u8(2).u8(16);
    w.u8(5).u8(1);
    w.u8(0).u8(0).u8(3);
    for (int i = 0; i < 3; i++)
      entry(w, abi::kOpNop, uint64_t(i), 0, 0, 0);
    w.u8(2).u16(1);
    w.u8(4).u8(0).u16(0).u8(8).u64(uint64_t(1) << 40);
    w.u8(0).u8(0).u8(2);
    entry(w, abi::kOpNop, 9, 0, 0, 0);
    entry(w, 200, 10, 0, 0, 0);
    w.u8(2).u16(1).u8(2).u16(1);
    seed("pipe", "doorbell_corrupt", w.b);
  }
}

// ---- tcp_sim, roce_sim (tcp_sim_fuzz.cc, roce_sim_fuzz.cc, sim_attack.h) ----

// An op byte: the side (0 A, 1 B) in the top bit, the operation in the low three.
uint8_t op(int side, uint8_t code) {
  return uint8_t(side << 7 | code);
}

// Attacker edits (sim_attack.h): each is a kind byte and its arguments; then the fix-up byte.
struct Edit {
  Bytes b;
};
Edit seq_step(int16_t d) {
  return {{1, uint8_t(d), uint8_t(uint16_t(d) >> 8)}};
}
Edit ack_step(int16_t d) {
  return {{2, uint8_t(d), uint8_t(uint16_t(d) >> 8)}};
}
Edit opcode(uint8_t o) {  // RoCE: the BTH opcode (TCP: the ack, whose step this byte starts)
  return {{2, o}};
}
Edit sport(uint16_t port) {  // RoCE: the UDP source port
  return {{3, uint8_t(port), uint8_t(port >> 8)}};
}
Edit flags(uint8_t f, uint16_t window) {
  return {{3, f, uint8_t(window), uint8_t(window >> 8)}};
}
Edit over_options(uint8_t at, const Bytes& bytes) {
  Edit e{{4, at, uint8_t(bytes.size())}};
  e.b.insert(e.b.end(), bytes.begin(), bytes.end());
  return e;
}
Edit byte_at(uint16_t pos, uint8_t v) {
  return {{0, uint8_t(pos), uint8_t(pos >> 8), v}};
}
void forge(Writer& w, int to_side, std::initializer_list<Edit> edits, uint8_t fix = 7) {
  w.u8(op(to_side, 3)).u8(uint8_t(edits.size()));
  for (const Edit& e : edits)
    w.bytes(e.b);
  w.u8(fix);
}

void tcp_sim() {
  auto run = [](Writer& w, uint16_t us) { w.u8(op(0, 0)).u16(us); };
  auto send = [](Writer& w, int side, uint32_t len) { w.u8(op(side, 1)).u16(uint16_t(len - 1)); };
  auto recv = [](Writer& w, int side, uint32_t len) { w.u8(op(side, 2)).u16(uint16_t(len - 1)); };
  auto transfer = [&](uint8_t setup, const std::string& name, bool both) {
    Writer w;
    w.u8(setup).u32(1000);
    run(w, 500);
    for (int i = 0; i < 4; i++) {
      recv(w, 1, 16384);
      if (both) recv(w, 0, 8000);
    }
    for (int i = 0; i < 4; i++) {
      send(w, 0, i == 3 ? 5000 : 16384);
      if (both) send(w, 1, 3000);
    }
    for (int i = 0; i < 5; i++)
      run(w, 2000);
    w.u8(op(0, 5));
    run(w, 1000);
    w.u8(op(1, 5));
    run(w, 5000);
    seed("tcp_sim", name, w.b);
  };
  transfer(0, "transfer", false);
  transfer(0, "both_ways", true);
  transfer(1, "copy_mode", true);
  transfer(2, "messages", true);
  transfer(4 | 8 | 16 | 32, "no_sack_no_ts_ecn_cubic", false);
  {  // An attacker in the middle of a transfer: data moved, a RST, bad options, a SYN.
    Writer w;
    w.u8(0).u32(77);
    run(w, 500);
    recv(w, 1, 16384);
    recv(w, 1, 16384);
    send(w, 0, 16384);
    run(w, 30);
    forge(w, 1, {seq_step(100)});
    forge(w, 1, {seq_step(-3000), ack_step(5)});
    forge(w, 0, {ack_step(2000)});
    forge(w, 1, {over_options(0, {5, 10, 0, 0, 0, 1, 0, 0, 0, 9})});
    forge(w, 1, {byte_at(50, 0xFF)}, 0);
    run(w, 3000);
    send(w, 0, 4000);
    run(w, 50);
    forge(w, 1, {flags(0x14, 0), seq_step(1)});
    forge(w, 0, {flags(0x02, 100)});
    run(w, 5000);
    seed("tcp_sim", "attacker", w.b);
  }
  {  // The link's faults both ways through a transfer.
    Writer w;
    w.u8(0).u32(5);
    w.u8(op(1, 4)).u8(2).u8(1).u8(3).u8(1).u8(4).u8(4 << 2 | 2);
    w.u8(op(0, 4)).u8(1).u8(2).u8(0).u8(0).u8(0).u8(8 << 2 | 1);
    run(w, 500);
    for (int i = 0; i < 3; i++)
      recv(w, 1, 16384);
    for (int i = 0; i < 3; i++)
      send(w, 0, 16384);
    for (int i = 0; i < 10; i++)
      run(w, 5000);
    seed("tcp_sim", "faults", w.b);
  }
}

void roce_sim() {
  auto run = [](Writer& w, uint16_t tenths_us) { w.u8(op(0, 0)).u16(tenths_us); };
  auto send = [](Writer& w, int side, uint16_t len, bool imm) {
    w.u8(op(side, 1)).u16(len).u8(imm);
  };
  auto recv = [](Writer& w, int side, uint16_t len) { w.u8(op(side, 2)).u16(len); };
  auto write = [](Writer& w, int side, uint16_t len, bool imm) {
    w.u8(op(side, 3)).u16(len).u8(imm).u8(1);
  };
  auto read = [](Writer& w, int side, uint16_t len) { w.u8(op(side, 4)).u16(len).u8(1); };
  auto ops = [&](uint8_t setup, const std::string& name, bool both, bool attack) {
    Writer w;
    w.u8(setup).u32(0x100).u32(0xFFFFF0);  // B's PSNs wrap
    for (int s = 0; s < (both ? 2 : 1); s++) {
      recv(w, 1 - s, 8192);
      recv(w, 1 - s, 8192);
      recv(w, 1 - s, 100);
      send(w, s, 3000, true);
      send(w, s, 0, false);
      write(w, s, 8192, false);
      write(w, s, 700, true);
      read(w, s, 5000);
      read(w, s, 1);
    }
    run(w, 20);
    if (attack) {
      forge(w, 1, {seq_step(1)});
      forge(w, 1, {seq_step(-2)});
      forge(w, 0, {opcode(0x11)});  // an ACK where data was
      forge(w, 1, {sport(0xC123)});
      forge(w, 1, {over_options(0, {0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 0, 0, 0, 0xFF, 0xFF})});
      forge(w, 1, {byte_at(60, 1)}, 0);
    }
    for (int i = 0; i < 4; i++)
      run(w, 20000);
    seed("roce_sim", name, w.b);
  };
  ops(1, "ops", false, false);
  ops(0, "both_ways_256", true, false);
  ops(2 | 8, "copy_path_1024", true, false);
  ops(16 | 32, "selective_repeat_dcqcn", false, false);
  ops(1, "attacker", false, true);
  {  // A SEND with no receive (RNR), a WRITE with a key the peer never gave, loss.
    Writer w;
    w.u8(1 | 16).u32(7).u32(9);
    w.u8(op(1, 6)).u8(2).u8(0).u8(2).u8(0).u8(0).u8(0);
    send(w, 0, 2000, false);
    w.u8(op(0, 3)).u16(100).u8(0).u8(0).u32(0xDEAD0001);
    w.u8(op(0, 4)).u16(100).u8(0).u32(0x00010001);
    write(w, 0, 4000, false);
    for (int i = 0; i < 4; i++)
      run(w, 30000);
    seed("roce_sim", "errors_and_loss", w.b);
  }
}

// solar_sim (solar_sim_fuzz.cc): op bytes are the operation in the low bits (of 6) and, for a
// forged packet or faults, the direction in the top bit (0 towards the target).
void solar_sim() {
  auto run = [](Writer& w, uint16_t tenths_us) { w.u8(0).u16(tenths_us); };
  auto write = [](Writer& w, uint8_t slot, uint8_t vol, uint16_t len) {
    w.u8(1).u8(slot).u8(vol).u16(len);
  };
  auto read = [](Writer& w, uint8_t slot, uint8_t vol, uint16_t len) {
    w.u8(2).u8(slot).u8(vol).u16(len);
  };
  auto ops = [&](uint8_t setup, const std::string& name, bool attack, bool loss) {
    Writer w;
    w.u8(setup);
    if (loss) w.u8(4).u8(2).u8(1).u8(2).u8(0).u8(1).u8(0);  // faults towards the target
    for (uint8_t i = 0; i < 4; i++)
      write(w, i, uint8_t(i * 3), uint16_t(4096 + i * 3000));
    run(w, 20);
    for (uint8_t i = 0; i < 4; i++)
      read(w, i, uint8_t(i * 3 + 1), 9000);
    if (attack) {
      forge(w, 0, {seq_step(1)});
      forge(w, 1, {seq_step(-2)});
      forge(w, 0, {byte_at(42 + 16, 0x40)});  // a block's offset
      forge(w, 1, {byte_at(42, 4)}, 0);       // an ACK where a block was
    }
    for (int i = 0; i < 4; i++)
      run(w, 30000);
    seed("solar_sim", name, w.b);
  };
  ops(3, "four_paths", false, false);
  ops(0 | 4 | 16, "one_path_copy_path", false, true);
  ops(1 | 8 | 32, "wrapping_sequences", false, false);
  ops(3, "attacker", true, false);
}

// ---- mgmt (mgmt_fuzz.cc): request lines as cleavectl and the tests send them ----

void mgmt() {
  const std::vector<std::pair<std::string, std::string>> seeds = {
      {"show",
       R"({"version": 1, "id": 1, "command": "status"}
{"version": 1, "id": 2, "command": "port.show", "args": {"name": "p0"}}
{"version": 1, "id": 3, "command": "arp.show"}
{"version": 1, "id": 4, "command": "route.show"}
{"version": 1, "id": 5, "command": "route.get", "args": {"addr": "10.0.0.7"}}
{"version": 1, "id": 6, "command": "stats.show"}
{"version": 1, "id": 7, "command": "nic.show"}
{"version": 1, "id": 8, "command": "log.get"}
{"version": 1, "id": 9, "command": "app.list"}
{"version": 1, "id": 10, "command": "transport.list"}
)"},
      {"flows",
       R"({"version": 1, "id": "a", "command": "flow.attach", "args": {"port": 5001, "transport": "tcp", "params": {"cc": "cubic", "mss": 1400, "sack": "off"}}}
{"version": 1, "id": "b", "command": "flow.attach", "args": {"tuple": {"local": "10.0.0.1:*", "remote": "*:443"}, "uid": 1000}}
{"version": 1, "id": "c", "command": "flow.attach", "args": {"port": 4791, "transport": "rocev2", "params": {"dcqcn": "on"}}}
{"version": 1, "id": null, "command": "flow.list"}
{"version": 1, "command": "flow.show", "args": {"id": 3}}
{"version": 1, "command": "flow.detach", "args": {"port": 5001}}
{"version": 1, "command": "flow.detach", "args": {"tuple": {"local": "10.0.0.1:*", "remote": "*:443"}}}
)"},
      {"errors",
       R"({"version": 2, "id": 1, "command": "status"}
{"id": 2, "command": "status"}
{"version": 1, "command": "no.such"}
{"version": 1, "command": "flow.attach", "args": {"port": 70000}}
{"version": 1, "command": "flow.attach", "args": {"port": 1, "tuple": {}}}
{"version": 1, "command": "flow.attach", "args": {"port": 5, "params": {"": "x"}}}
{"version": 1, "command": "flow.attach", "args": {"port": 5, "uid": -1, "params": {"mss": 1.5}}}
{"version": 1, "command": "port.fault", "args": {"name": "p0", "dir": "rx", "loss": 0.5, "seed": 3}}
{"version": 1, "command": "log.set", "args": {"level": "loud"}}
{"version": 1, "command": "app.show", "args": {"id": 1}}
[1, 2, 3]
{"version": 1, "command": "route.get", "args": {"addr": "300.1.2.3"}}
not json
)"},
  };
  for (const auto& [name, text] : seeds)
    seed("mgmt", name, Bytes(text.begin(), text.end()));
}

// ---- app (app_fuzz.cc): an app's session as libcleave speaks it ----

void app() {
  using namespace cleave;
  enum : uint8_t {
    kHello,
    kPipeCreate,
    kPipeDestroy,
    kMrReg,
    kMrDereg,
    kListen,
    kConnect,
    kUnlisten,
    kQpCreate,
    kQpModify,
    kQpQuery,
    kQpDestroy
  };
  // A message of kind `k` from client `c` with the body of `m` (its header is the harness's).
  auto msg = [](Writer& w, int c, uint8_t k, const auto& m, uint8_t fd_kind = 0,
                uint32_t fd_size = 0) {
    w.u8(uint8_t(c << 4 | 1)).u8(k);
    const auto* p = reinterpret_cast<const uint8_t*>(&m);
    w.bytes({p + sizeof(abi::MsgHeader), sizeof m - sizeof(abi::MsgHeader)});
    w.u8(0).u8(fd_kind).u32(fd_size);
  };
  auto hello = [&](Writer& w, int c) {
    abi::Hello h{};
    h.min_version = 1;
    h.max_version = abi::kAbiVersion;
    std::strcpy(h.name, "fuzz-app");
    w.u8(uint8_t(c << 4));
    msg(w, c, kHello, h);
  };
  auto pipe = [&](Writer& w, int c, abi::PipeKind kind, uint32_t entries, uint32_t cq,
                  bool doorbell = false) {
    abi::PipeCreate m{};
    m.kind = uint8_t(kind);
    m.entries = entries;
    m.cq = cq;
    m.flags = doorbell ? abi::kPipeDoorbell : 0;
    msg(w, c, kPipeCreate, m, doorbell ? 1 : 0);
  };
  {  // A session: pipes, an MR, listen, connect, the refusals of each.
    Writer w;
    hello(w, 0);
    pipe(w, 0, abi::PipeKind::kCompletion, 128, 0, true);
    pipe(w, 0, abi::PipeKind::kSubmit, 64, 0);
    pipe(w, 0, abi::PipeKind::kRecv, 64, 0);
    pipe(w, 0, abi::PipeKind::kSubmit, 100, 0);  // not a power of two
    abi::MrReg mr{};
    mr.length = 65536;
    mr.access = abi::kAccessRead | abi::kAccessWrite | abi::kAccessRemoteWrite;
    msg(w, 0, kMrReg, mr, 2, 65536);
    msg(w, 0, kMrReg, mr, 3, 65536);  // not sealed
    abi::FlowOpen f{};
    f.port = 5001;
    f.cq = 0;
    msg(w, 0, kListen, f);
    f.ip = 0x0A000002;
    std::strcpy(f.transport, "tcp");
    f.flags = abi::kFlowMessage;
    msg(w, 0, kConnect, f);
    abi::Unlisten u{};
    u.listener = 1;
    msg(w, 0, kUnlisten, u);
    abi::MrDereg d{};
    d.mr = 1;
    msg(w, 0, kMrDereg, d);
    abi::PipeDestroy pd{};
    pd.pipe = 1;
    msg(w, 0, kPipeDestroy, pd);
    pd.pipe = 0;
    msg(w, 0, kPipeDestroy, pd);
    w.u8(0 << 4 | 2);
    seed("app", "session", w.b);
  }
  {  // Queue pairs.
    Writer w;
    hello(w, 1);
    pipe(w, 1, abi::PipeKind::kCompletion, 64, 0);
    abi::QpCreate q{};
    q.cq = 0;
    q.max_send_wr = 16;
    q.max_recv_wr = 16;
    std::strcpy(q.params, "dcqcn on");
    msg(w, 1, kQpCreate, q);
    abi::QpModify m{};
    m.qp = 1;
    m.mask = abi::kQpAttrState | abi::kQpAttrAccess;
    m.attr.state = abi::kQpInit;
    m.attr.access = abi::kAccessRemoteWrite;
    msg(w, 1, kQpModify, m);
    abi::QpId id{};
    id.qp = 1;
    msg(w, 1, kQpQuery, id);
    msg(w, 1, kQpDestroy, id);
    id.reserved = 1;
    msg(w, 1, kQpQuery, id);
    seed("app", "queue_pairs", w.b);
  }
  {  // Two apps; a second hello; a message before hello; a bad magic; two fds; a short one.
    Writer w;
    hello(w, 0);
    hello(w, 1);
    abi::Hello h{};
    h.min_version = 1;
    h.max_version = 3;
    msg(w, 1, kHello, h);
    w.u8(2 << 4);
    abi::PipeDestroy pd{};
    msg(w, 2, kPipeDestroy, pd);
    w.u8(2 << 4);
    w.u8(2 << 4 | 1).u8(kHello | 0x40).u32(0x12345678);
    w.bytes(Bytes(sizeof(abi::Hello) - sizeof(abi::MsgHeader), 0)).u8(0).u8(0).u32(0);
    abi::MrReg mr{};
    mr.length = 4096;
    msg(w, 0, kMrReg, mr, 0x80 | 2 << 3 | 1, 4096);
    w.u8(0 << 4 | 1).u8(kPipeDestroy | 0x10);
    w.bytes(Bytes(sizeof(abi::PipeDestroy) - sizeof(abi::MsgHeader), 0))
        .u8(uint8_t(-4))
        .u8(0)
        .u32(0);
    w.u8(3);
    seed("app", "refusals", w.b);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: fuzz_seeds OUTDIR SOURCE_ROOT\n");
    return 2;
  }
  g_out = argv[1];
  g_src = argv[2];
  fs::remove_all(g_out);
  nic_rx::write();
  tcp_wire();
  roce_wire();
  config();
  pipe();
  tcp_sim();
  roce_sim();
  solar_sim();
  mgmt();
  app();
  std::printf("fuzz_seeds: %d seeds in %s\n", g_written, g_out.c_str());
  return 0;
}
