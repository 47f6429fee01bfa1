// tb_txgen.h - random TX requests for the testbenches: header templates of every kind (TCP
// with options, UDP, RoCEv2 with pad, other protocols), every combination of offload flags,
// broken headers, payload references inside and outside their MR, oversize frames.
#pragma once

#include <vector>

#include "cleave_nic_hw.h"
#include "nic_model.h"
#include "tb_common.h"
#include "tb_frames.h"

namespace cleave::tb {

namespace nic = cleave::nic;

struct MrInfo {
  bool used = false;
  uint64_t base = 0;  // offset in host memory
  uint64_t len = 0;
};

struct Request {
  Bytes header;
  nic::TxRequest req;
};

// A random header template and request.
inline Request make_request(Rng& rng, const std::vector<MrInfo>& mrs) {
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

// What the TX stream carries for a request: the TX descriptor, then the header template.
inline Bytes tx_packet(const Request& r) {
  const nic::TxRequest& q = r.req;
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
  return pkt;
}

// The model's side of a request: its frames, one buffer each, and its completion.
struct TxResult {
  nic::TxStatus status = nic::TxStatus::kOk;
  std::vector<Bytes> frames;
  nic::TxCompletion cpl;
};
inline TxResult model_tx(nic::NicModel& m, const Request& r) {
  nic::TxRequest q = r.req;
  q.header = r.header;
  const uint32_t nf = nic::NicModel::tx_frames(q), room = nic::NicModel::tx_frame_room(q);
  std::vector<Bytes> bufs(nf, Bytes(room));
  std::vector<std::span<uint8_t>> spans;
  for (auto& x : bufs)
    spans.emplace_back(x);
  std::vector<uint32_t> lens(nf);
  uint16_t n = 0;
  TxResult t;
  t.status = m.tx(q, spans, lens, &n);
  TB_CHECK(m.tx_poll({&t.cpl, 1}) == 1, "model completion");
  if (t.status == nic::TxStatus::kOk) {
    for (uint16_t i = 0; i < n; i++)
      t.frames.emplace_back(bufs[i].begin(), bufs[i].begin() + lens[i]);
  }
  return t;
}

}  // namespace cleave::tb
