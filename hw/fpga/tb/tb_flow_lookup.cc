// tb_flow_lookup.cc - cleave_flow_lookup against the model's flow table: random flow adds and
// removes (TCP, UDP with a source port or any, RoCE QPs, Solar connections) from a small pool of
// addresses, ports and numbers so chains collide, and frames looked up the way the model's rx()
// does (by QPN or Solar connection number, then the exact key, then the UDP wildcard). Every
// flow id the RTL finds is the one NicModel::rx reports; every add the model refuses as
// flow_exists is a key the RTL finds.
#include <map>
#include <memory>

#include "Vcleave_flow_lookup.h"
#include "nic_model.h"
#include "tb_common.h"
#include "tb_frames.h"

using namespace cleave::tb;
namespace nic = cleave::nic;

namespace {

// flow_key_t (cleave_types.svh), most significant first: src 32, dst 32, sport 16, dport 16,
// udp 1, numbered 1, qpn 24.
struct Key {
  uint32_t src = 0, dst = 0;
  uint16_t sport = 0, dport = 0;
  bool udp = false, numbered = false;  // numbered: a RoCE QP or a Solar connection
  uint32_t qpn = 0;
};

template <typename T>
void put_key(T& sig, const Key& k) {
  set_bits(sig, 90, 32, k.src);
  set_bits(sig, 58, 32, k.dst);
  set_bits(sig, 42, 16, k.sport);
  set_bits(sig, 26, 16, k.dport);
  set_bits(sig, 25, 1, k.udp);
  set_bits(sig, 24, 1, k.numbered);
  set_bits(sig, 0, 24, k.qpn);
}

struct Bench {
  std::unique_ptr<VerilatedContext> ctx = std::make_unique<VerilatedContext>();
  std::unique_ptr<Vcleave_flow_lookup> top;
  Rng rng;
  uint64_t cycles = 0;

  static Vcleave_flow_lookup* make(VerilatedContext* c, uint64_t seed) {
    c->randReset(2);
    c->randSeed(int(seed & 0x7FFFFFFF));
    return new Vcleave_flow_lookup(c);
  }
  explicit Bench(uint64_t seed) : top(make(ctx.get(), seed)), rng(seed) {}

  void tick() {
    top->clk = 0;
    top->eval();
    top->clk = 1;
    top->eval();
    cycles++;
  }
  // One operation; returns (hit, id).
  std::pair<bool, uint32_t> op(unsigned code, const Key& k, uint32_t id) {
    for (uint64_t gap = rng.below(3); gap > 0; gap--) {
      top->s_req_valid = 0;
      tick();
    }
    top->s_req_valid = 1;
    top->s_req_op = code;
    put_key(top->s_req_key, k);
    top->s_req_id = id;
    for (int guard = 0;; guard++) {
      TB_CHECK(guard < 100000, "request not taken");
      top->clk = 0;
      top->eval();
      bool taken = top->s_req_ready;
      TB_CHECK(!top->m_rsp_valid, "response without a request");
      top->clk = 1;
      top->eval();
      cycles++;
      if (taken) break;
    }
    top->s_req_valid = 0;
    for (int guard = 0;; guard++) {
      TB_CHECK(guard < 100000, "no response");
      top->clk = 0;
      top->eval();
      if (top->m_rsp_valid) {
        std::pair<bool, uint32_t> r{top->m_rsp_hit != 0, top->m_rsp_id};
        top->clk = 1;
        top->eval();
        cycles++;
        return r;
      }
      top->clk = 1;
      top->eval();
      cycles++;
    }
  }
};

struct Flow {
  Key key;
  nic::FlowSpec spec;
};

// A random key from small pools: collisions and near misses are common.
Key random_key(Rng& rng) {
  Key k;
  k.src = 0x0A000000u + uint32_t(rng.below(4));
  k.dst = 0x0A000100u + uint32_t(rng.below(3));
  switch (rng.below(5)) {
    case 0:  // TCP
      k.sport = uint16_t(40000 + rng.below(6));
      k.dport = uint16_t(5000 + rng.below(3));
      break;
    case 1: {  // UDP (plain UDP flows on the RoCE and Solar ports too)
      k.udp = true;
      k.sport = uint16_t(rng.chance(0.3) ? 0 : 49152 + rng.below(6));
      const uint64_t p = rng.below(10);
      k.dport = p < 3 ? kRocePort : p < 6 ? kSolarPort : uint16_t(7001 + rng.below(2));
      break;
    }
    case 2:  // Solar connection
      k.udp = true;
      k.numbered = true;
      k.dport = kSolarPort;
      k.qpn = uint32_t(rng.below(8));
      break;
    default:  // RoCE QP
      k.udp = true;
      k.numbered = true;
      k.dport = kRocePort;
      k.qpn = uint32_t(rng.below(8));
      break;
  }
  return k;
}

nic::FlowSpec spec_of(const Key& k) {
  nic::FlowSpec s;
  s.key = {k.src, k.dst, k.sport, k.dport, uint8_t(k.udp ? 17 : 6)};
  s.parser = !k.udp                 ? nic::Parser::kTcp
             : !k.numbered          ? nic::Parser::kUdp
             : k.dport == kRocePort ? nic::Parser::kRoce
                                    : nic::Parser::kSolar;
  s.qpn = k.qpn;
  return s;
}

// A frame that reaches the flow lookup with this 5-tuple, and to the RoCE and Solar ports the
// number `num` (BTH DestQP, 24 bits; Solar connection number, 32) unless it is too short to
// carry one.
Bytes frame_for(Rng& rng, const Key& k, uint16_t sport, uint32_t num, bool short_frame) {
  IpOpts ipo;
  ipo.src = k.src;
  ipo.dst = k.dst;
  if (!k.udp) return tcp_frame(1, random_bytes(rng, rng.below(8)), {}, 0x18, sport, k.dport, ipo);
  if (short_frame) return udp_frame(sport, k.dport, random_bytes(rng, rng.below(8)), true, ipo);
  if (k.dport == kRocePort)
    return roce_frame(0x04, 0, num, {}, random_bytes(rng, rng.below(8)), sport, ipo);
  Bytes u = random_bytes(rng, k.dport == kSolarPort ? 32 + rng.below(8) : rng.below(8));
  if (k.dport == kSolarPort) cleave::wire::store32(&u[4], num);  // the Solar header's connection id
  return udp_frame(sport, k.dport, u, true, ipo);
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = init_seed("tb_flow_lookup");
  Bench b(seed);
  b.ctx->commandArgs(argc, argv);
  const uint64_t rounds = env_u64("CLEAVE_RTL_ROUNDS", 20000);
  nic::NicConfig cfg;
  cfg.roce_write_ctxs = 1;  // the RTL keeps the flow entry's WRITE context only
  cfg.max_flows = TB_MAX_FLOWS;
  cfg.max_mrs = 4;
  cfg.ms_store_entries = 64;
  nic::NicModel model(cfg);

  b.top->rst = 1;
  b.top->s_req_valid = 0;
  for (int i = 0; i < 4; i++)
    b.tick();
  b.top->rst = 0;

  std::map<uint32_t, Flow> flows;
  uint64_t adds = 0, exists = 0, removes = 0, lookups = 0, hits = 0;
  for (uint64_t r = 0; r < rounds; r++) {
    uint64_t what = b.rng.below(10);
    if (what < 3) {
      uint32_t id = uint32_t(b.rng.below(TB_MAX_FLOWS));
      if (flows.count(id)) continue;  // the engine refuses a used id before looking
      Key k = random_key(b.rng);
      nic::Err e = model.flow_add(id, spec_of(k));
      auto [hit, hid] = b.op(0, k, 0);
      TB_CHECK(hit == (e == nic::Err::kFlowExists), "add %u: RTL hit %d, model %s", id, hit,
               std::string(nic::err_name(e)).c_str());
      if (hit) {
        TB_CHECK(flows.count(hid) && spec_of(flows[hid].key).key == spec_of(k).key, "hit id");
        exists++;
        continue;
      }
      TB_CHECK(e == nic::Err::kOk, "model refused add: %s", std::string(nic::err_name(e)).c_str());
      b.op(1, k, id);
      flows[id] = {k, spec_of(k)};
      adds++;
    } else if (what < 5) {
      if (flows.empty()) continue;
      auto it = flows.begin();
      std::advance(it, long(b.rng.below(flows.size())));
      TB_CHECK(model.flow_remove(it->first) == nic::Err::kOk, "model remove");
      auto [hit, hid] = b.op(2, it->second.key, it->first);
      TB_CHECK(hit && hid == it->first, "remove %u not found in its chain", it->first);
      flows.erase(it);
      removes++;
    } else {
      // A frame: the key of a flow, or a random one; UDP source ports vary (wildcards).
      Key k = !flows.empty() && b.rng.chance(0.7)
                  ? std::next(flows.begin(), long(b.rng.below(flows.size())))->second.key
                  : random_key(b.rng);
      uint16_t sport = k.sport;
      if (k.udp && (k.sport == 0 || b.rng.chance(0.3))) sport = uint16_t(49152 + b.rng.below(8));
      // the flow's number, now and then another; a Solar one of 2^24 or more (whose low 24
      // bits may be a flow's) names no connection
      uint32_t num = b.rng.chance(0.8) ? k.qpn : uint32_t(b.rng.below(10));
      if (k.dport == kSolarPort && b.rng.chance(0.1)) num |= uint32_t(1 + b.rng.below(255)) << 24;
      const bool short_frame = k.udp && b.rng.chance(0.05);
      Bytes f = frame_for(b.rng, k, sport, num, short_frame);
      nic::RxEntry e;
      model.rx(f, e);
      // The model's lookups, in its order (the engine's S_RX_LK steps).
      Key q{k.src, k.dst, sport, k.dport, k.udp, false, 0};
      std::pair<bool, uint32_t> got{false, 0};
      if (k.udp && !short_frame &&
          (k.dport == kRocePort || (k.dport == kSolarPort && num <= 0xFFFFFF))) {
        Key qp{k.src, k.dst, 0, k.dport, true, true, num & 0xFFFFFF};
        got = b.op(0, qp, 0);
      }
      if (!got.first) got = b.op(0, q, 0);
      if (!got.first && k.udp) {
        Key any = q;
        any.sport = 0;
        got = b.op(0, any, 0);
      }
      uint32_t rtl_id = got.first ? got.second : nic::kNoFlow;
      TB_CHECK(rtl_id == e.flow_id, "lookup: RTL %u, model %u", rtl_id, e.flow_id);
      lookups++;
      hits += got.first;
    }
  }
  std::printf("tb_flow_lookup: ok, %" PRIu64 " adds (%" PRIu64 " refused as existing), %" PRIu64
              " removes, %" PRIu64 " lookups (%" PRIu64 " hits), %" PRIu64 " cycles\n",
              adds, exists, removes, lookups, hits, b.cycles);
  TB_CHECK(rounds < 1000 || (exists > 0 && hits > 0 && hits < lookups), "outcomes missing");
  return 0;
}
