// tb_scenario.h - seeded traffic and commands for the RX testbenches, run through the model.
//
// A Scenario owns a NicModel and the host memory its MRs point into, and produces rounds: a
// few driver commands (MR and flow adds and removes, MS posts and retires, cursor moves, RoCE
// resyncs, READ sinks, rkey checks, flow queries, and now and then a random or malformed one),
// then a burst of frames from flows of every kind (TCP byte streams, TCP message mode,
// unreliable TCP and UDP, Solar streams, messages and unreliable (connections found by number,
// several between the same hosts), RoCE QPs, go-back-N and selective repeat, with SEND, WRITE, READ
// requests and responses, go-back-N retransmissions, and now and then a P_Key of another partition
// or lengths IBTA forbids), with the fault matrix applied: loss, reordering, duplication,
// truncation, flipped bytes and bad checksums. Every command and frame has gone through the model
// when the round is returned: each event carries what the model answered (Err, RxEntry). A
// testbench replays the round into the RTL and compares.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "cleave_nic_hw.h"
#include "nic_model.h"
#include "tb_common.h"
#include "tb_frames.h"
#include "tb_txgen.h"

namespace cleave::tb {

namespace nic = cleave::nic;

inline constexpr uint64_t kIovaBase = 0x0000'0010'0000'0000ull;  // IOVA of host memory byte 0

// A command record (CMD) with its fields.
struct CmdRec {
  uint8_t b[CLEAVE_NIC_CMD_BYTES] = {};
  CmdRec& op(uint32_t v) { return set(CLEAVE_NIC_CMD_OPCODE_LSB, 8, v); }
  CmdRec& arg8(uint32_t v) { return set(CLEAVE_NIC_CMD_ARG8_LSB, 8, v); }
  CmdRec& arg16(uint32_t v) { return set(CLEAVE_NIC_CMD_ARG16_LSB, 16, v); }
  CmdRec& flow(uint32_t v) { return set(CLEAVE_NIC_CMD_FLOW_LSB, 24, v); }
  CmdRec& w(unsigned i, uint32_t v) { return set(32 * i, 32, v); }
  CmdRec& set(unsigned lsb, unsigned width, uint64_t v) {
    cleave_nic_set(b, lsb, width, v);
    return *this;
  }
};

struct Event {
  bool is_cmd = false;
  // a command
  CmdRec cmd;
  nic::Err want = nic::Err::kOk;
  uint16_t want_mr = 0;
  bool query = false;
  uint32_t q_ms = 0, q_cursor = 0, q_reads = 0;
  // a frame
  Bytes frame;
  nic::RxEntry entry;
};

struct ScenarioConfig {
  uint32_t max_flows = 64;
  uint32_t max_mrs = 16;
  uint32_t ms_chunk = 8;
  uint32_t ms_committed = 8;
  uint32_t ms_store = 256;
  size_t host_bytes = 4u << 20;
  double loss = 0.03, reorder = 0.05, dup = 0.04, trunc = 0.02, corrupt = 0.03;
  double junk_cmd = 0.05;  // a random or malformed command
};

#ifdef TB_MS_STORE
// The geometry the build gave this testbench (tb/meson.build's TB_* definitions).
inline ScenarioConfig built_geometry() {
  ScenarioConfig cfg;
  cfg.max_flows = TB_MAX_FLOWS;
  cfg.max_mrs = TB_MAX_MRS;
  cfg.ms_chunk = TB_MS_CHUNK;
  cfg.ms_committed = TB_MS_COMMITTED;
  cfg.ms_store = TB_MS_STORE;
  return cfg;
}
#endif

class Scenario {
 public:
  Scenario(uint64_t seed, const ScenarioConfig& c) : rng_(seed), cfg_(c) {
    nic::NicConfig n;
    n.max_flows = c.max_flows;
    n.max_mrs = c.max_mrs;
    n.ms_chunk = c.ms_chunk;
    n.ms_committed_per_flow = c.ms_committed;
    n.ms_store_entries = c.ms_store;
    n.roce_write_ctxs = 1;  // the RTL keeps the flow entry's WRITE context only
    model_ = std::make_unique<nic::NicModel>(n);
    mem_.assign(c.host_bytes, 0xEE);
    mrs_.resize(c.max_mrs);
    flows_.resize(c.max_flows);
    // MR regions: host memory split evenly; an MR covers a random part of its region.
    region_ = c.host_bytes / c.max_mrs;
  }

  nic::NicModel& model() { return *model_; }
  const Bytes& mem() const { return mem_; }
  Rng& rng() { return rng_; }
  uint64_t iova(uint16_t mr, uint64_t off) const { return kIovaBase + mrs_[mr].base + off; }
  // The MR table as a TX request generator sees it (bases are host memory offsets).
  std::vector<MrInfo> mr_info() const {
    std::vector<MrInfo> v(mrs_.size());
    for (size_t i = 0; i < mrs_.size(); i++)
      v[i] = {mrs_[i].live, mrs_[i].base, mrs_[i].len};
    return v;
  }

  // One round: commands (management now and then, the drivers of a few flows), then frames,
  // mostly from those flows.
  std::vector<Event> round() {
    std::vector<Event> out;
    if (rounds_ == 0) {
      for (uint16_t i = 0; i < cfg_.max_mrs; i++)
        mr_add(out, i);
      solar_conns(out);
      for (uint32_t i = 0; i < cfg_.max_flows; i += 2)
        flow_add(out, i);
    }
    int nmgmt = int(rng_.below(3));
    for (int i = 0; i < nmgmt; i++)
      command(out);
    active_.clear();
    int nact = int(1 + rng_.below(4));
    for (int i = 0; i < nact; i++) {
      uint32_t id = pick_live_flow();
      if (id == kNone) break;
      active_.push_back(id);
      int nd = int(1 + rng_.below(4));
      for (int k = 0; k < nd; k++)
        drive(out, id);
    }
    int nframes = int(1 + rng_.below(rng_.chance(0.2) ? 48 : 12));
    for (int i = 0; i < nframes; i++)
      frames(out);
    flush_held(out);
    rounds_++;
    return out;
  }

  // A flow query event for a random id (the debug block's view).
  Event query() {
    Event e;
    e.is_cmd = true;
    e.query = true;
    uint32_t id = uint32_t(rng_.below(cfg_.max_flows + 2));
    e.cmd.op(CLEAVE_NIC_CMD_FLOW_QUERY).flow(id);
    e.q_ms = model_->ms_count(id);
    e.q_cursor = model_->cursor(id);
    e.q_reads = model_->read_count(id);
    return e;
  }

 private:
  enum class Kind {
    kTcp,
    kTcpMsg,
    kTcpUnrel,
    kUdp,
    kUdpAny,
    kSolar,
    kSolarMsg,
    kSolarUnrel,
    kRoce
  };

  struct Posted {
    uint64_t pos;  // stream position (byte streams) or message number
    uint32_t len;
  };

  struct Msg {  // a RoCE message being sent: its packets
    std::deque<Bytes> packets;
  };

  struct FlowGen {
    bool live = false;
    Kind kind = Kind::kTcp;
    nic::FlowSpec spec;
    uint16_t mr = 0;  // the MR its MSs point into
    // byte streams: positions relative to the start (TCP: isn, Solar: initial offset)
    uint64_t snd = 0;     // next byte the sender sends
    uint64_t posted = 0;  // end of the MSs posted
    std::deque<Posted> ms;
    // messages
    uint32_t next_msg_post = 0;
    uint32_t next_msg_send = 0;
    std::map<uint32_t, uint32_t> msg_len;  // posted message lengths by number
    // RoCE
    uint32_t psn = 0;   // next PSN the sender uses
    uint32_t rpsn = 0;  // next PSN of our own READs (their responses come in our PSN space)
    uint32_t sends = 0;
    std::deque<Bytes> queue;  // packets not sent yet
    std::deque<Bytes> sent;   // the last ones sent, for go-back-N
    // where messages begin: PSN, SENDs before it (what a transport resyncs the NIC to)
    std::deque<std::pair<uint32_t, uint32_t>> starts;
    std::vector<std::pair<uint32_t, uint32_t>> reads;  // READ sinks: first PSN, length
  };

  struct MrGen {
    bool live = false;
    uint64_t base = 0;  // offset in host memory
    uint64_t len = 0;
    uint32_t owner = 0;
    uint8_t access = 0;
    uint16_t tag = 0;
  };

  // ---- commands -------------------------------------------------------------------------

  Event cmd_event(const CmdRec& c, nic::Err e, uint16_t mr = 0) {
    Event ev;
    ev.is_cmd = true;
    ev.cmd = c;
    ev.want = e;
    ev.want_mr = mr;
    return ev;
  }

  static constexpr uint32_t kNone = 0xFFFFFFFFu;
  static constexpr uint32_t kSolarConns = 8;  // Solar flows' connection numbers: 0 .. 7
  uint32_t pick_flow() { return uint32_t(rng_.below(cfg_.max_flows)); }
  uint32_t pick_live_flow() {
    for (int tries = 0; tries < 16; tries++) {
      uint32_t id = pick_flow();
      if (flows_[id].live) return id;
    }
    return kNone;
  }
  uint16_t pick_mr() { return uint16_t(rng_.below(cfg_.max_mrs)); }

  void mr_add(std::vector<Event>& out, uint16_t id) {
    MrGen m;
    m.base = id * region_ + rng_.below(64);
    m.len = region_ - 64 - rng_.below(region_ / 4);
    m.owner = uint32_t(1 + rng_.below(2));
    m.access = uint8_t(rng_.below(4));
    m.tag = uint16_t(rng_.u64());
    uint64_t len = m.len;
    uint64_t base = kIovaBase + m.base;
    // now and then a bad one: zero or too long, an unknown access bit
    if (rng_.chance(0.05)) len = rng_.chance(0.5) ? 0 : (uint64_t(1) << 40);
    uint8_t access = rng_.chance(0.03) ? uint8_t(4 | m.access) : m.access;
    nic::Err e = model_->mr_add(id, mem_.data() + m.base, len, m.owner, access, m.tag);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_MR_ADD).arg16(id).arg8(access).w(2, m.owner);
    c.w(3, uint32_t(base)).w(4, uint32_t(base >> 32)).w(5, uint32_t(len)).w(6, uint32_t(len >> 32));
    c.w(7, m.tag);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) {
      m.live = true;
      mrs_[id] = m;
    }
  }

  void mr_remove(std::vector<Event>& out, uint16_t id) {
    nic::Err e = model_->mr_remove(id);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_MR_REMOVE).arg16(id);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) mrs_[id].live = false;
  }

  // An MR the flow's MSs go into: live, and for RoCE of the flow's owner.
  bool pick_mr_for(FlowGen& g) {
    for (int tries = 0; tries < 8; tries++) {
      uint16_t id = pick_mr();
      if (mrs_[id].live && (g.kind != Kind::kRoce || mrs_[id].owner == g.spec.owner)) {
        g.mr = id;
        return true;
      }
    }
    return mrs_[g.mr].live;
  }

  void flow_add(std::vector<Event>& out, uint32_t id) {
    FlowGen g;
    g.kind = Kind(rng_.below(9));
    nic::FlowSpec& s = g.spec;
    s.key.src_ip = 0x0A000000u + uint32_t(rng_.below(6));
    s.key.dst_ip = 0x0A000100u + uint32_t(rng_.below(2));
    s.initial_seq = uint32_t(rng_.u64());
    switch (g.kind) {
      case Kind::kTcp:
      case Kind::kTcpMsg:
      case Kind::kTcpUnrel:
        s.key.proto = 6;
        s.key.src_port = uint16_t(40000 + rng_.below(50));
        s.key.dst_port = uint16_t(5000 + rng_.below(4));
        s.parser = nic::Parser::kTcp;
        s.messages = g.kind == Kind::kTcpMsg;
        s.reliable = g.kind != Kind::kTcpUnrel;
        break;
      case Kind::kUdp:
      case Kind::kUdpAny:
        s.key.proto = 17;
        s.key.src_port = g.kind == Kind::kUdpAny ? 0 : uint16_t(49152 + rng_.below(50));
        s.key.dst_port = uint16_t(6000 + rng_.below(4));
        s.parser = nic::Parser::kUdp;
        s.reliable = false;
        break;
      case Kind::kSolar:
      case Kind::kSolarMsg:
      case Kind::kSolarUnrel:
        // A connection, found by its number: several between the same hosts
        s.key.proto = 17;
        s.key.src_port = 0;
        s.key.dst_port = kSolarPort;
        s.qpn = uint32_t(rng_.below(kSolarConns));
        s.parser = nic::Parser::kSolar;
        s.messages = g.kind == Kind::kSolarMsg;
        s.reliable = g.kind != Kind::kSolarUnrel;
        s.initial_offset = rng_.chance(0.5) ? 0 : rng_.u64() >> 8;
        break;
      case Kind::kRoce:
        s.key.proto = 17;
        s.key.src_port = 0;
        s.key.dst_port = kRocePort;
        s.parser = nic::Parser::kRoce;
        s.initial_seq &= 0xFFFFFF;
        s.qpn = uint32_t(rng_.below(16));
        s.owner = uint32_t(1 + rng_.below(2));
        s.pmtu = rng_.chance(0.7) ? 256 : 1024;
        s.messages = true;
        s.reliable = rng_.chance(0.85);  // else UC
        break;
    }
    // RoCE: the QP's recovery; other parsers ignore the flag
    s.selective_repeat = rng_.chance(g.kind == Kind::kRoce ? 0.5 : 0.1);
    s.mode = rng_.chance(0.05) ? nic::FlowMode::kCopy : nic::FlowMode::kZeroCopy;
    // now and then a bad one: protocol and parser apart, a bad PMTU, QPN or connection number
    // (2^24 or more), Solar on another port
    const bool solar = s.parser == nic::Parser::kSolar;
    if (rng_.chance(0.03)) s.key.proto = rng_.chance(0.5) ? 6 : 17;
    if (g.kind == Kind::kRoce && rng_.chance(0.03)) s.pmtu = uint32_t(rng_.below(5000));
    if ((g.kind == Kind::kRoce || solar) && rng_.chance(0.02)) s.qpn = uint32_t(rng_.u64());
    if (solar && rng_.chance(0.02)) s.key.dst_port = uint16_t(kSolarPort + 1 + rng_.below(3));
    install(out, id, std::move(g));
  }

  // Adds the flow `g` describes as `id` to the model and as a command; the generator keeps it
  // when the model took it.
  void install(std::vector<Event>& out, uint32_t id, FlowGen g) {
    const nic::FlowSpec& s = g.spec;
    nic::Err e = model_->flow_add(id, s);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_FLOW_ADD).flow(id).arg8(s.key.proto).arg16(s.pmtu);
    c.set(CLEAVE_NIC_CMD_FPARSER_LSB, 2, uint32_t(s.parser));
    c.set(CLEAVE_NIC_CMD_FMODE_LSB, 1, uint32_t(s.mode));
    c.set(CLEAVE_NIC_CMD_FRELIABLE_LSB, 1, s.reliable);
    c.set(CLEAVE_NIC_CMD_FMESSAGES_LSB, 1, s.messages);
    c.set(CLEAVE_NIC_CMD_FSELREP_LSB, 1, s.selective_repeat);
    c.w(2, s.key.src_ip).w(3, s.key.dst_ip).w(4, uint32_t(s.key.dst_port) << 16 | s.key.src_port);
    if (s.parser == nic::Parser::kSolar) {
      c.w(5, s.qpn);  // a Solar flow has no initial sequence: word 5 is its number
      c.w(6, uint32_t(s.initial_offset)).w(7, uint32_t(s.initial_offset >> 32));
    } else {
      c.w(5, s.initial_seq).w(6, s.owner).w(7, s.qpn);
    }
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk && !flows_[id].live) {
      g.live = true;
      g.psn = s.initial_seq;
      g.rpsn = uint32_t(rng_.u64()) & 0xFFFFFF;
      boundary(g);
      pick_mr_for(g);
      flows_[id] = std::move(g);
    }
  }

  void flow_remove(std::vector<Event>& out, uint32_t id) {
    nic::Err e = model_->flow_remove(id);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_FLOW_REMOVE).flow(id);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) flows_[id] = FlowGen{};
  }

  void ms_post(std::vector<Event>& out, uint32_t id, FlowGen& g, uint32_t len, uint32_t msg) {
    if (!pick_mr_for(g)) return;
    const MrGen& m = mrs_[g.mr];
    uint64_t off = rng_.below(m.len > len ? m.len - len : 1);
    if (rng_.chance(0.02)) off = m.len + rng_.below(100);  // outside the MR
    if (rng_.chance(0.01)) len = 0;
    uint16_t mr = rng_.chance(0.02) ? pick_mr() : g.mr;
    bool was_empty = model_->ms_count(id) == 0;
    nic::Err e = model_->ms_post(id, {mr, off, len, msg});
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_MS_POST).flow(id).arg16(mr).w(2, uint32_t(off)).w(3, uint32_t(off >> 32));
    c.w(4, len).w(5, msg);
    out.push_back(cmd_event(c, e));
    if (e != nic::Err::kOk) return;
    if (g.kind == Kind::kTcp && was_empty) {
      // An empty byte-stream list starts again at the cursor.
      g.posted = uint32_t(model_->cursor(id) - g.spec.initial_seq);
      g.ms.clear();
    }
    g.ms.push_back({g.posted, len});
    g.posted += len;
    if (g.spec.messages) g.msg_len[msg] = len;
  }

  void cursor(std::vector<Event>& out, uint32_t id, uint32_t v) {
    nic::Err e = model_->cursor_update(id, v);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_CURSOR).flow(id).w(2, v);
    out.push_back(cmd_event(c, e));
  }

  void retire(std::vector<Event>& out, uint32_t id, FlowGen& g, uint32_t count) {
    nic::Err e = model_->ms_retire(id, count);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_MS_RETIRE).flow(id).w(2, count);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) {
      for (uint32_t i = 0; i < count && !g.ms.empty(); i++)
        g.ms.pop_front();
    }
  }

  void retire_msg(std::vector<Event>& out, uint32_t id, FlowGen& g, uint32_t msg) {
    nic::Err e = model_->ms_retire_msg(id, msg);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_MS_RETIRE_MSG).flow(id).w(2, msg);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) g.msg_len.erase(msg);
  }

  void read_post(std::vector<Event>& out, uint32_t id, FlowGen& g, uint32_t first, uint32_t len) {
    if (!pick_mr_for(g)) return;
    const MrGen& m = mrs_[g.mr];
    uint64_t off = rng_.below(m.len > len ? m.len - len : 1);
    nic::Err e = model_->read_post(id, first, g.mr, off, len);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_READ_POST).flow(id).arg16(g.mr).w(2, first).w(3, uint32_t(off));
    c.w(4, uint32_t(off >> 32)).w(5, len);
    out.push_back(cmd_event(c, e));
    if (e == nic::Err::kOk) g.reads.push_back({first, len});
  }

  void read_retire(std::vector<Event>& out, uint32_t id, FlowGen& g, uint32_t first) {
    nic::Err e = model_->read_retire(id, first);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_READ_RETIRE).flow(id).w(2, first);
    out.push_back(cmd_event(c, e));
    for (size_t i = 0; i < g.reads.size(); i++) {
      if (e == nic::Err::kOk && g.reads[i].first == first) {
        g.reads.erase(g.reads.begin() + long(i));
        break;
      }
    }
  }

  void resync(std::vector<Event>& out, uint32_t id, uint32_t psn, uint32_t next) {
    nic::Err e = model_->roce_resync(id, psn, next);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_ROCE_RESYNC).flow(id).w(2, psn).w(3, next);
    out.push_back(cmd_event(c, e));
  }

  void rkey_check(std::vector<Event>& out, uint32_t id) {
    uint16_t mr = pick_mr();
    uint32_t rkey = uint32_t(mrs_[mr].tag) << 16 | mr;
    if (rng_.chance(0.3)) rkey ^= uint32_t(1) << rng_.below(32);
    uint64_t va = rng_.below(mrs_[mr].len + 100);
    uint64_t len = rng_.below(mrs_[mr].len + 100);
    uint8_t access = uint8_t(rng_.below(rng_.chance(0.05) ? 256 : 4));
    uint16_t got = 0;
    nic::Err e = model_->rkey_check(id, rkey, va, len, access, &got);
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_RKEY_CHECK).flow(id).arg8(access).w(2, rkey);
    c.w(3, uint32_t(va)).w(4, uint32_t(va >> 32)).w(5, uint32_t(len)).w(6, uint32_t(len >> 32));
    out.push_back(cmd_event(c, e, e == nic::Err::kOk ? got : 0));
  }

  void flow_mode(std::vector<Event>& out, uint32_t id, uint8_t mode) {
    nic::Err e = model_->flow_set_mode(id, nic::FlowMode(mode));
    CmdRec c;
    c.op(CLEAVE_NIC_CMD_FLOW_MODE).flow(id).arg8(mode);
    out.push_back(cmd_event(c, e));
  }

  // The driver side of one flow: post, move the cursor, retire.
  void drive(std::vector<Event>& out, uint32_t id) {
    FlowGen& g = flows_[id];
    const uint32_t isn = g.spec.initial_seq;
    switch (g.kind) {
      case Kind::kTcp: {
        if (model_->ms_count(id) < 10 && g.posted < g.snd + 20000 && rng_.chance(0.6)) {
          ms_post(out, id, g, uint32_t(1 + rng_.below(rng_.chance(0.2) ? 64 : 3000)), 0);
        } else {
          // The cursor moves up to what was sent: mostly all of it, as an in-order receiver's
          // would, sometimes part of it, now and then backwards (refused).
          uint64_t cur = uint32_t(model_->cursor(id) - isn);
          uint64_t to = rng_.chance(0.6) ? std::max(cur, std::min(g.snd, g.posted))
                                         : cur + rng_.below(g.snd > cur ? g.snd - cur + 1 : 2);
          if (rng_.chance(0.02)) to = cur - rng_.below(10);
          cursor(out, id, isn + uint32_t(to));
          uint32_t k = 0;
          uint64_t c2 = uint32_t(model_->cursor(id) - isn);
          while (k < g.ms.size() && g.ms[k].pos + g.ms[k].len <= c2)
            k++;
          if (k > 0 || rng_.chance(0.05)) retire(out, id, g, k + (rng_.chance(0.05) ? 1 : 0));
        }
        break;
      }
      case Kind::kTcpMsg:
      case Kind::kSolarMsg:
      case Kind::kRoce: {
        // A RoCE transport moves its ePSN as it takes requests: often.
        if (g.kind == Kind::kRoce && rng_.chance(0.7)) roce_cursor(out, id, g);
        if (g.kind == Kind::kRoce && rng_.chance(0.4)) {
          roce_driver(out, id, g);
          break;
        }
        if (model_->ms_count(id) < 8) {
          uint32_t msg = g.next_msg_post;
          if (rng_.chance(0.05)) msg += uint32_t(rng_.below(4));  // out of order
          ms_post(out, id, g, uint32_t(1 + rng_.below(g.kind == Kind::kRoce ? 1500 : 4000)), msg);
          g.next_msg_post = msg + 1;
        } else if (!g.msg_len.empty()) {
          auto it = g.msg_len.begin();
          if (rng_.chance(0.3)) std::advance(it, long(rng_.below(g.msg_len.size())));
          // RoCE: the transport retires the receives SENDs before the cursor took (and now
          // and then another)
          if (g.kind != Kind::kRoce || g.msg_len.begin()->first < sends_at(g, model_->cursor(id)) ||
              rng_.chance(0.1)) {
            if (g.kind == Kind::kRoce && rng_.chance(0.9)) it = g.msg_len.begin();
            retire_msg(out, id, g, it->first);
          }
        }
        if (g.kind == Kind::kTcpMsg && rng_.chance(0.3)) {
          uint64_t cur = uint32_t(model_->cursor(id) - isn);
          cursor(out, id, isn + uint32_t(cur + rng_.below(g.snd > cur ? g.snd - cur + 1 : 2)));
        }
        break;
      }
      case Kind::kSolar: {
        if (model_->ms_count(id) < 12 && g.posted < g.snd + 30000) {
          ms_post(out, id, g, uint32_t(1 + rng_.below(3000)), 0);
        } else if (!g.ms.empty() && g.ms.front().pos + g.ms.front().len <= g.snd) {
          retire(out, id, g, 1);
        } else if (rng_.chance(0.1)) {
          retire(out, id, g, uint32_t(rng_.below(3)));
        }
        break;
      }
      default:  // unreliable: the next MS takes the next payload
        if (model_->ms_count(id) < 6) {
          uint32_t len =
              uint32_t(rng_.chance(0.03) ? 1 + rng_.below(100) : 1000 + rng_.below(2000));
          ms_post(out, id, g, len, g.next_msg_post++);
        }
        break;
    }
  }

  // The responder's transport takes requests (some through the copy path): its ePSN moves to
  // the start of a message the sender has reached, mostly the latest, and the NIC's chain is
  // resynced there. Now and then it moves anywhere up to the sender's PSN instead.
  void roce_cursor(std::vector<Event>& out, uint32_t id, FlowGen& g) {
    const uint32_t cur = model_->cursor(id);
    uint32_t front = g.psn;  // the first request not sent yet (READ responses aside)
    for (const Bytes& f : g.queue) {
      const uint8_t op = f[bth_at(f)];
      if (op < 0x0D || op > 0x10) {
        front = bth_psn(f);
        break;
      }
    }
    auto ahead = [&](uint32_t p, uint32_t of) { return ((p - of) & 0xFFFFFF) < 0x800000; };
    std::vector<std::pair<uint32_t, uint32_t>> can;
    for (const auto& st : g.starts)
      if (ahead(st.first, cur) && ahead(front, st.first)) can.push_back(st);
    if (can.empty() || rng_.chance(0.1)) {
      uint32_t up = (g.psn - cur) & 0xFFFFFF;
      if (up >= 0x800000) up = 0;
      cursor(out, id, (cur + uint32_t(rng_.below(up + 1))) & 0xFFFFFF);
      return;
    }
    const auto& st = rng_.chance(0.7) ? can.back() : can[rng_.below(can.size())];
    cursor(out, id, st.first);
    if (rng_.chance(0.8)) resync(out, id, st.first, st.second);
  }

  void roce_driver(std::vector<Event>& out, uint32_t id, FlowGen& g) {
    switch (rng_.below(5)) {
      case 0:
        roce_cursor(out, id, g);
        break;
      case 1:  // the transport restarts the chain where the sender is
        resync(out, id, g.psn, g.sends);
        break;
      case 2:
        if (g.reads.size() < 4) {
          uint32_t len = uint32_t(rng_.below(3 * g.spec.pmtu + 10));
          uint32_t n = std::max<uint32_t>(1, (len + g.spec.pmtu - 1) / g.spec.pmtu);
          read_post(out, id, g, g.rpsn, len);
          if (!out.empty() && out.back().want == nic::Err::kOk) {
            // its responses come later, in our own PSN space
            read_responses(g, g.rpsn, len);
            g.rpsn = (g.rpsn + n) & 0xFFFFFF;
          }
        }
        break;
      case 3:
        if (!g.reads.empty()) read_retire(out, id, g, g.reads[rng_.below(g.reads.size())].first);
        break;
      default:
        rkey_check(out, id);
        break;
    }
  }

  // A command with random fields, or one naming what does not exist.
  void junk(std::vector<Event>& out) {
    CmdRec c;
    uint32_t op = uint32_t(1 + rng_.below(13));
    uint32_t id = uint32_t(rng_.below(cfg_.max_flows + 4));
    c.op(op).flow(id).arg8(uint32_t(rng_.below(rng_.chance(0.5) ? 3 : 256)));
    c.arg16(uint32_t(rng_.below(rng_.chance(0.5) ? cfg_.max_mrs + 2 : 65536)));
    for (unsigned w = 2; w < 8; w++)
      c.w(w, uint32_t(rng_.chance(0.5) ? rng_.below(64) : rng_.u64()));
    Event e;
    if (!apply_junk(c, e)) return;
    out.push_back(e);
  }

  // Runs a junk command on the model; false when it would have changed a generator's state.
  bool apply_junk(const CmdRec& c, Event& ev) {
    auto g = [&](unsigned lsb, unsigned w) { return cleave_nic_get(c.b, lsb, w); };
    const uint32_t op = uint32_t(g(0, 8)), flow = uint32_t(g(32, 24));
    const uint32_t arg8 = uint32_t(g(8, 8)), arg16 = uint32_t(g(16, 16));
    auto w = [&](unsigned i) { return uint32_t(g(32 * i, 32)); };
    const bool known = flow < cfg_.max_flows && flows_[flow].live;
    nic::Err e = nic::Err::kOk;
    uint16_t mr = 0;
    switch (op) {
      // Only what cannot change the generators' MRs and flows behind their backs.
      case CLEAVE_NIC_CMD_MR_ADD:
        return false;
      case CLEAVE_NIC_CMD_MR_REMOVE:
        if (arg16 < cfg_.max_mrs) return false;
        e = model_->mr_remove(uint16_t(arg16));
        break;
      case CLEAVE_NIC_CMD_FLOW_ADD:
        if (flow < cfg_.max_flows) return false;
        e = model_->flow_add(flow, nic::FlowSpec{});
        break;
      case CLEAVE_NIC_CMD_FLOW_REMOVE:
        if (flow < cfg_.max_flows) return false;
        e = model_->flow_remove(flow);
        break;
      case CLEAVE_NIC_CMD_FLOW_MODE:
        if (known) return false;
        e = model_->flow_set_mode(flow, nic::FlowMode(arg8));
        break;
      case CLEAVE_NIC_CMD_MS_POST:
        if (known) return false;
        e = model_->ms_post(flow,
                            {uint16_t(arg16), uint64_t(w(3) & 0xFFFF) << 32 | w(2), w(4), w(5)});
        break;
      case CLEAVE_NIC_CMD_CURSOR:
        e = model_->cursor_update(flow, w(2));
        break;
      case CLEAVE_NIC_CMD_MS_RETIRE:
        if (known) return false;
        e = model_->ms_retire(flow, w(2));
        break;
      case CLEAVE_NIC_CMD_MS_RETIRE_MSG:
        if (known) return false;
        e = model_->ms_retire_msg(flow, w(2));
        break;
      case CLEAVE_NIC_CMD_ROCE_RESYNC:
        e = model_->roce_resync(flow, w(2), w(3));
        break;
      case CLEAVE_NIC_CMD_READ_POST:
        if (known) return false;
        e = model_->read_post(flow, w(2), uint16_t(arg16), uint64_t(w(4) & 0xFFFF) << 32 | w(3),
                              w(5));
        break;
      case CLEAVE_NIC_CMD_READ_RETIRE:
        if (known) return false;
        e = model_->read_retire(flow, w(2));
        break;
      default:  // RKEY_CHECK
        e = model_->rkey_check(flow, w(2), uint64_t(w(4)) << 32 | w(3), uint64_t(w(6)) << 32 | w(5),
                               uint8_t(arg8), &mr);
        if (e != nic::Err::kOk) mr = 0;
        break;
    }
    ev = cmd_event(c, e, mr);
    return true;
  }

  void command(std::vector<Event>& out) {
    if (rng_.chance(cfg_.junk_cmd * 4)) {
      junk(out);
      return;
    }
    const uint64_t r = rng_.below(100);
    if (r < 25) {
      uint16_t id = pick_mr();
      if (!mrs_[id].live) {
        mr_add(out, id);
      } else if (rng_.chance(0.2)) {
        mr_remove(out, id);  // refused while MSs point into it
      } else {
        mr_add(out, id);  // exists
      }
    } else if (r < 60) {
      uint32_t id = pick_flow();
      if (!flows_[id].live) {
        flow_add(out, id);
      } else if (rng_.chance(0.15)) {
        flow_remove(out, id);
      } else {
        flow_add(out, id);  // exists
      }
    } else if (r < 70) {
      uint32_t id = pick_flow();
      if (flows_[id].live) flow_mode(out, id, rng_.chance(0.9) ? 0 : rng_.chance(0.9) ? 1 : 2);
    } else {
      uint32_t id = pick_flow();
      if (flows_[id].live) drive(out, id);
    }
  }

  // Solar connections are found by number (hw/fpga/docs/formats.md section 2): two between the
  // same hosts, flows 1 and 3 (the first round adds even ids), each take their own frames into
  // their own MS; a number no flow has, one of 2^24 or more whose low 24 bits are a flow's, and a
  // frame too short to carry one find none. Checked here against what the model must answer;
  // the testbench compares the RTL with it as with every event. Both flows stay for the random
  // traffic that follows.
  void solar_conns(std::vector<Event>& out) {
    uint16_t mr = 0;
    while (mr < cfg_.max_mrs && (!mrs_[mr].live || mrs_[mr].len < 3 * kSolarMs))
      mr++;
    if (cfg_.max_flows < 4) return;
    TB_CHECK(mr < cfg_.max_mrs, "no MR for the Solar connections");
    const uint32_t ids[2] = {1, 3};
    const uint32_t conns[2] = {0x00A1B2, 0x00A1B3};
    for (int i = 0; i < 2; i++) {
      FlowGen g;
      g.kind = Kind::kSolar;
      g.spec.key = {0x0A000042, 0x0A000100, 0, kSolarPort, 17};
      g.spec.parser = nic::Parser::kSolar;
      g.spec.qpn = conns[i];
      g.mr = mr;
      install(out, ids[i], std::move(g));
      TB_CHECK(out.back().want == nic::Err::kOk, "Solar connection %d not added", i);
      FlowGen& f = flows_[ids[i]];
      f.mr = mr;  // install() may have picked another
      const uint64_t off = uint64_t(i) * 2 * kSolarMs;
      nic::Err e = model_->ms_post(ids[i], {mr, off, kSolarMs, 0});
      TB_CHECK(e == nic::Err::kOk, "Solar connection %d: MS not posted", i);
      CmdRec c;
      c.op(CLEAVE_NIC_CMD_MS_POST).flow(ids[i]).arg16(mr).w(2, uint32_t(off)).w(3, 0);
      c.w(4, kSolarMs).w(5, 0);
      out.push_back(cmd_event(c, e));
      f.ms.push_back({0, kSolarMs});
      f.posted = kSolarMs;
    }
    IpOpts o;
    o.src = 0x0A000042;
    o.dst = 0x0A000100;
    auto frame = [&](const Bytes& f) {
      emit(out, f);
      return out.back().entry;
    };
    for (int i = 0; i < 2; i++) {
      const uint32_t len = 100 * uint32_t(i + 1);
      nic::RxEntry e =
          frame(solar_frame(1, conns[i], 0, 0, 1, payload(len), kSolarPort, uint16_t(1 + i), o));
      TB_CHECK(e.flow_id == ids[i] && e.decision == nic::Decision::kPlaced && e.nfrags == 1 &&
                   e.frags[0].mr == mr && e.frags[0].offset == uint64_t(i) * 2 * kSolarMs &&
                   e.placed == len,
               "Solar connection %d: flow %u, %s", i, e.flow_id,
               std::string(nic::decision_name(e.decision)).c_str());
      flows_[ids[i]].snd = len;
    }
    for (uint32_t conn : {0x00A1B4u, 0x0100A1B2u}) {
      nic::RxEntry e = frame(solar_frame(1, conn, 0, 0, 1, payload(64), kSolarPort, 1, o));
      TB_CHECK(e.flow_id == nic::kNoFlow && e.reason == nic::DeferReason::kFlowMiss,
               "Solar connection number %#x found flow %u", conn, e.flow_id);
    }
    for (uint32_t len = 0; len < 8; len += 7) {
      nic::RxEntry e = frame(udp_frame(0xC001, kSolarPort, payload(len), true, o));
      TB_CHECK(e.flow_id == nic::kNoFlow && e.reason == nic::DeferReason::kTruncated,
               "a Solar frame of %u bytes: flow %u, %s", len, e.flow_id,
               std::string(nic::defer_reason_name(e.reason)).c_str());
    }
  }
  static constexpr uint32_t kSolarMs = 4096;

  // ---- frames --------------------------------------------------------------------------

  IpOpts ipo(const FlowGen& g) {
    IpOpts o;
    o.src = g.spec.key.src_ip;
    o.dst = g.spec.key.dst_ip;
    if (rng_.chance(0.1)) o.ihl = unsigned(5 + rng_.below(11));
    o.tos = uint8_t(rng_.u64());
    o.ttl = uint8_t(rng_.u64());
    return o;
  }

  uint16_t udp_sport(const FlowGen& g) {
    return g.spec.key.src_port != 0 ? g.spec.key.src_port : uint16_t(49152 + rng_.below(16));
  }

  Bytes payload(size_t n) {
    Bytes b(n);
    for (auto& x : b)
      x = uint8_t(rng_.u64());
    return b;
  }

  // The next frame of a flow's sender (TCP, UDP and Solar); RoCE packets come from its queue.
  bool next_frame(FlowGen& g, Bytes& f) {
    const nic::FlowSpec& s = g.spec;
    switch (g.kind) {
      case Kind::kTcp:
      case Kind::kTcpUnrel: {
        uint32_t len = uint32_t(rng_.below(rng_.chance(0.1) ? 9000 : 1460));
        if (rng_.chance(0.1)) len = 0;
        uint64_t at = g.snd;
        // A retransmission (of bytes before or across the cursor), or new data past a hole;
        // new data waits for posted buffers, as a window would hold it.
        if ((rng_.chance(0.2) || (g.kind == Kind::kTcp && g.snd > g.posted + 2000)) && g.snd > 0)
          at = g.snd - rng_.below(std::min<uint64_t>(g.snd, 5000));
        else if (rng_.chance(0.05))
          at = g.snd + rng_.below(3000);
        uint8_t flags = 0x18;
        if (rng_.chance(0.02)) flags |= 0x02;  // SYN
        if (rng_.chance(0.02)) flags |= 0x04;  // RST
        Bytes opts;
        if (rng_.chance(0.2)) opts = random_tcp_options(rng_);
        f = tcp_frame(s.initial_seq + uint32_t(at), payload(len), opts, flags, s.key.src_port,
                      s.key.dst_port, ipo(g));
        if (at + len > g.snd) g.snd = at + len;
        return true;
      }
      case Kind::kTcpMsg: {
        // A message of the posted ones (or one never posted), this segment's part of it.
        uint32_t msg = g.next_msg_send;
        uint32_t mlen = g.msg_len.count(msg) ? g.msg_len[msg] : uint32_t(1 + rng_.below(3000));
        if (rng_.chance(0.1)) msg = uint32_t(rng_.below(g.next_msg_post + 2));
        uint32_t start = uint32_t(g.snd);
        uint32_t off = uint32_t(rng_.below(mlen));
        uint32_t len = uint32_t(1 + rng_.below(std::min<uint32_t>(mlen - off, 2000)));
        Bytes opt = msg_option(msg, s.initial_seq + start, mlen);
        if (rng_.chance(0.05)) wire::store32(&opt[16], uint32_t(rng_.below(4)));  // it lies
        if (rng_.chance(0.05)) opt = random_tcp_options(rng_);
        f = tcp_frame(s.initial_seq + start + off, payload(len), opt, 0x18, s.key.src_port,
                      s.key.dst_port, ipo(g));
        if (rng_.chance(0.4)) {
          g.snd += mlen;
          g.next_msg_send++;
        }
        return true;
      }
      case Kind::kUdp:
      case Kind::kUdpAny:
        f = udp_frame(udp_sport(g), s.key.dst_port,
                      payload(rng_.below(rng_.chance(0.1)   ? 64
                                         : rng_.chance(0.9) ? 1200
                                                            : 3000)),
                      rng_.chance(0.7), ipo(g));
        return true;
      case Kind::kSolar:
      case Kind::kSolarMsg:
      case Kind::kSolarUnrel: {
        if (rng_.chance(0.02)) {  // too short to name its connection: truncated
          f = udp_frame(udp_sport(g), s.key.dst_port, payload(rng_.below(8)), rng_.chance(0.7),
                        ipo(g));
          return true;
        }
        // its connection's number; now and then another (another flow's, or none's), or one of
        // 2^24 or more whose low 24 bits are this one's (which names none)
        uint32_t conn = s.qpn;
        if (rng_.chance(0.03))
          conn = uint32_t(rng_.below(kSolarConns + 2));
        else if (rng_.chance(0.02))
          conn |= uint32_t(1 + rng_.below(255)) << 24;
        uint8_t type =
            rng_.chance(0.85) ? uint8_t(rng_.chance(0.5) ? 1 : 3) : uint8_t(rng_.below(7));
        uint32_t len = uint32_t(rng_.below(2000));
        uint64_t off = s.initial_offset + g.snd;
        uint32_t io = g.next_msg_send;
        if (g.kind == Kind::kSolarMsg) {
          uint32_t mlen = g.msg_len.count(io) ? g.msg_len[io] : 1000;
          off = rng_.below(rng_.chance(0.9) ? mlen : mlen + 10);
          len = uint32_t(rng_.below(rng_.chance(0.9) && off <= mlen ? mlen - off + 1 : mlen + 1));
          if (rng_.chance(0.3)) g.next_msg_send++;
          if (rng_.chance(0.1)) io = uint32_t(rng_.u64());
        } else {
          if (rng_.chance(0.15) && g.snd > 0) off -= rng_.below(std::min<uint64_t>(g.snd, 4000));
          if (off + len > s.initial_offset + g.snd) g.snd = off + len - s.initial_offset;
          if (rng_.chance(0.01)) off = ~uint64_t(0) - rng_.below(100);  // wraps
        }
        f = solar_frame(type, conn, io, off, uint32_t(rng_.u64()), payload(len), s.key.dst_port,
                        uint16_t(rng_.below(8)), ipo(g));
        return true;
      }
      case Kind::kRoce:
        if (rng_.chance(0.04)) go_back(g);
        if (g.queue.empty()) roce_message(g);
        if (g.queue.empty()) return false;
        f = std::move(g.queue.front());
        g.queue.pop_front();
        g.sent.push_back(f);
        if (g.sent.size() > 48) g.sent.pop_front();
        bth_faults(f);
        return true;
    }
    return false;
  }

  // Go-back-N as a requester recovers: everything sent from the responder's ePSN (the cursor)
  // on, again, before what is new.
  void go_back(FlowGen& g) {
    const uint32_t cur = model_->cursor(uint32_t(&g - flows_.data()));
    std::deque<Bytes> again;
    for (const Bytes& f : g.sent)
      if (((bth_psn(f) - cur) & 0xFFFFFF) < 0x800000) again.push_back(f);
    g.queue.insert(g.queue.begin(), again.begin(), again.end());
  }

  static size_t bth_at(const Bytes& f) { return 14 + size_t(f[14] & 0x0F) * 4 + 8; }
  static uint32_t bth_psn(const Bytes& f) { return wire::load32(&f[bth_at(f) + 8]) & 0xFFFFFF; }

  Bytes roce_pkt(FlowGen& g, uint8_t op, uint32_t psn, const Bytes& ext, const Bytes& pl) {
    IpOpts o = ipo(g);
    return roce_frame(op, psn, g.spec.qpn, ext, pl, uint16_t(49152 + rng_.below(64)), o);
  }

  // Now and then a P_Key of another partition (or the default one as a limited member), or a
  // pad count that leaves the payload not whole words; the ICRC still good. (On the way out:
  // a go-back-N retransmission sends the packet as it was made.)
  void bth_faults(Bytes& f) {
    const size_t b = bth_at(f);
    if (rng_.chance(0.01)) {
      const uint16_t keys[] = {0x7FFF, 0x8001, 0x0000, 0xFFFE, uint16_t(rng_.u64())};
      wire::store16(&f[b + 2], keys[rng_.below(std::size(keys))]);
      fix_icrc(f);
    } else if (rng_.chance(0.005)) {
      f[b + 1] = uint8_t((f[b + 1] + 0x10) & 0x30);
      fix_icrc(f);
    }
  }

  // A message's packet payload: PMTU for all but the last; now and then one IBTA forbids.
  uint32_t pkt_len(uint32_t pmtu, uint32_t len, uint32_t i, uint32_t n) {
    uint32_t pl = i + 1 < n ? pmtu : len - i * pmtu;
    if (rng_.chance(0.02)) pl = rng_.chance(0.5) ? pl + 4 : (pl >= 4 ? pl - 4 : pmtu + 4);
    return pl;
  }

  // A message of packets into the flow's queue: SEND, WRITE, or something else now and then.
  void roce_message(FlowGen& g) {
    const uint32_t pmtu = g.spec.pmtu;
    const uint64_t kind = rng_.below(10);
    // WRITEs are cut into packets more often: their extent and lengths are checked per packet
    uint32_t len = uint32_t(rng_.below(rng_.chance(kind < 5 ? 0.3 : 0.6) ? 4 * pmtu : pmtu + 10));
    uint32_t n = std::max<uint32_t>(1, (len + pmtu - 1) / pmtu);
    if (kind < 5) {  // SEND, mostly as long as the receive posted for it
      if (g.msg_len.count(g.sends) && rng_.chance(0.8)) {
        len = g.msg_len[g.sends] - uint32_t(rng_.below(std::min<uint32_t>(g.msg_len[g.sends], 64)));
        n = std::max<uint32_t>(1, (len + pmtu - 1) / pmtu);
      }
      for (uint32_t i = 0; i < n; i++) {
        uint32_t pl = pkt_len(pmtu, len, i, n);
        uint8_t op = n == 1      ? (rng_.chance(0.2) ? 0x05 : 0x04)
                     : i == 0    ? 0x00
                     : i + 1 < n ? 0x01
                                 : (rng_.chance(0.2) ? 0x03 : 0x02);
        Bytes ext = (op == 0x03 || op == 0x05) ? payload(4) : Bytes{};
        g.queue.push_back(roce_pkt(g, op, (g.psn + i) & 0xFFFFFF, ext, payload(pl)));
      }
      g.sends++;
    } else if (kind < 8) {  // WRITE into an MR of the owner (or a bad key)
      uint16_t mr = pick_mr();
      for (int tries = 0; tries < 16 && rng_.chance(0.9); tries++) {
        const MrGen& c = mrs_[mr];
        if (c.live && c.owner == g.spec.owner && (c.access & nic::kMrRemoteWrite)) break;
        mr = pick_mr();
      }
      const MrGen& m = mrs_[mr];
      uint64_t va = m.len > len ? rng_.below(m.len - len) : 0;
      uint32_t rkey = uint32_t(m.tag) << 16 | mr;
      if (rng_.chance(0.1)) rkey ^= 1u << 16;
      // the RETH's length: now and then not the message's, or past IBTA's 2^31
      uint32_t dma = len;
      if (rng_.chance(0.15)) dma = rng_.chance(0.8) ? len + 4 : 0x80000000u + 4;
      for (uint32_t i = 0; i < n; i++) {
        uint32_t pl = pkt_len(pmtu, len, i, n);
        uint8_t op = n == 1      ? (rng_.chance(0.2) ? 0x0B : 0x0A)
                     : i == 0    ? 0x06
                     : i + 1 < n ? 0x07
                                 : (rng_.chance(0.2) ? 0x09 : 0x08);
        Bytes ext;
        if (op == 0x06 || op == 0x0A || op == 0x0B) ext = reth(va, rkey, dma);
        if (op == 0x0B || op == 0x09) {
          Bytes imm = payload(4);
          ext.insert(ext.end(), imm.begin(), imm.end());
        }
        g.queue.push_back(roce_pkt(g, op, (g.psn + i) & 0xFFFFFF, ext, payload(pl)));
      }
    } else if (kind < 9 && rng_.chance(0.5)) {  // a READ request: its responses' PSNs
      uint16_t mr = pick_mr();
      uint32_t dma = uint32_t(rng_.below(4 * pmtu));
      if (rng_.chance(0.03)) dma = 0x80000000u + uint32_t(rng_.below(100));
      g.queue.push_back(roce_pkt(g, 0x0C, g.psn,
                                 reth(rng_.below(4096), uint32_t(mrs_[mr].tag) << 16 | mr, dma),
                                 payload(rng_.chance(0.05) ? 4 : 0)));
      // (one refused for its length takes one PSN: the requester will not go on past it)
      n = dma > 0x80000000u ? 1
                            : std::max<uint32_t>(1, uint32_t((uint64_t(dma) + pmtu - 1) / pmtu));
    } else if (kind < 9) {  // ACK, CNP, an atomic, SEND with invalidate, a UC or unknown opcode
      uint8_t ops[] = {0x11, 0x81, 0x13, 0x14, 0x16, 0x17, 0x24, 0x2A, 0x15, 0x19, 0x64};
      uint8_t op = ops[rng_.below(std::size(ops))];
      g.queue.push_back(
          roce_pkt(g, op, g.psn, payload(rng_.below(5) * 4), payload(rng_.below(40))));
      n = 1;
    } else {  // a packet of a message that never started (its first one lost)
      g.queue.push_back(roce_pkt(g, 0x01, g.psn, {}, payload(pmtu)));
      n = 1;
    }
    g.psn = (g.psn + n) & 0xFFFFFF;
    boundary(g);
  }

  // SENDs begun before PSN `psn`, as far as the message starts remembered tell.
  static uint32_t sends_at(const FlowGen& g, uint32_t psn) {
    uint32_t n = 0;
    for (const auto& st : g.starts)
      if (((psn - st.first) & 0xFFFFFF) < 0x800000) n = st.second;
    return n;
  }

  void boundary(FlowGen& g) {
    g.starts.emplace_back(g.psn, g.sends);
    if (g.starts.size() > 64) g.starts.pop_front();
  }

  void read_responses(FlowGen& g, uint32_t first, uint32_t len) {
    const uint32_t pmtu = g.spec.pmtu;
    uint32_t n = std::max<uint32_t>(1, (len + pmtu - 1) / pmtu);
    for (uint32_t i = 0; i < n; i++) {
      uint32_t pl = i + 1 < n ? pmtu : len - i * pmtu;
      uint8_t op = n == 1 ? 0x10 : i == 0 ? 0x0D : i + 1 < n ? 0x0E : 0x0F;
      Bytes ext = (op == 0x0D || op == 0x0F || op == 0x10) ? payload(4) : Bytes{};
      g.queue.push_back(roce_pkt(g, op, (first + i) & 0xFFFFFF, ext, payload(pl)));
    }
  }

  // A frame from an active flow (or any live one, or a stray one), through the fault matrix.
  void frames(std::vector<Event>& out) {
    Bytes f;
    uint32_t id = !active_.empty() && rng_.chance(0.9) ? active_[rng_.below(active_.size())]
                                                       : pick_live_flow();
    if (id != kNone && rng_.chance(0.97)) {
      if (!next_frame(flows_[id], f)) return;
    } else {
      // a frame no flow has, or garbage
      f = rng_.chance(0.5) ? tcp_frame(uint32_t(rng_.u64()), payload(rng_.below(100)))
                           : random_bytes(rng_, 1 + rng_.below(120));
    }
    if (rng_.chance(cfg_.loss)) return;
    if (rng_.chance(cfg_.trunc) && f.size() > 1) f.resize(1 + rng_.below(f.size() - 1));
    if (rng_.chance(cfg_.corrupt)) corrupt(rng_, f);
    if (rng_.chance(cfg_.reorder)) {
      held_.push_back(f);  // sent after the next few
      return;
    }
    emit(out, f);
    if (rng_.chance(cfg_.dup)) emit(out, f);
    if (!held_.empty() && rng_.chance(0.3)) {
      emit(out, held_.front());
      held_.pop_front();
    }
  }

  void flush_held(std::vector<Event>& out) {
    while (!held_.empty() && rng_.chance(0.5)) {
      emit(out, held_.front());
      held_.pop_front();
    }
  }

  void emit(std::vector<Event>& out, const Bytes& f) {
    if (f.empty()) return;
    Event ev;
    ev.frame = f;
    model_->rx(f, ev.entry);
    out.push_back(std::move(ev));
  }

  Rng rng_;
  ScenarioConfig cfg_;
  std::unique_ptr<nic::NicModel> model_;
  Bytes mem_;
  uint64_t region_ = 0;
  std::vector<MrGen> mrs_;
  std::vector<FlowGen> flows_;
  std::deque<Bytes> held_;
  std::vector<uint32_t> active_;
  uint64_t rounds_ = 0;
};

}  // namespace cleave::tb
