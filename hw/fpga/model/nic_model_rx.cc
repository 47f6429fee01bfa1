// nic_model_rx.cc - the model's receive path: parse, find the flow, decide, place.
//
// Every read of the frame is checked against its length before it happens; every write goes
// through dma_write(). The decision is made in full (all fragments known and checked) before
// the first payload byte is written, so a deferred frame leaves app memory untouched.
#include <algorithm>
#include <cstring>

#include "common/wire.h"
#include "nic_model.h"

namespace cleave::nic {

namespace {

constexpr uint16_t kEtherIpv4 = 0x0800;
constexpr size_t kEthLen = 14;
constexpr uint32_t kPsnMask = 0xFFFFFF;
constexpr size_t kBthLen = 12;
constexpr size_t kIcrcLen = 4;
constexpr size_t kSolarLen = 32;
constexpr size_t kSolarConnEnd = 8;         // Solar header bytes that name the connection (4..7)
constexpr uint32_t kMaxNumber = 0xFFFFFF;   // QPNs and the connection numbers the NIC finds
constexpr uint32_t kMaxMessage = 1u << 31;  // IBTA: the longest message, the largest DMA length

// Signed distance a - b in the 24-bit PSN space.
int32_t psn_diff(uint32_t a, uint32_t b) {
  return int32_t((a - b) << 8) >> 8;
}

// IBTA 10.9.3: P_Keys match when their low 15 bits are equal and not zero and one of the two is
// a full member (bit 15). The QP's is the default partition's as a full member, 0xFFFF: a
// packet's matches when its low 15 bits are all ones, whatever its own membership bit.
bool pkey_ok(uint16_t pkey) {
  return (pkey & 0x7FFF) == 0x7FFF;
}

enum class RoceKind : uint8_t { kSend, kWrite, kReadRequest, kReadResponse, kNoData, kUnsupported };

struct RoceOp {
  RoceKind kind = RoceKind::kUnsupported;
  bool first = false;
  bool last = false;
  uint8_t ext = 0;  // extension header bytes after the BTH
  bool reth = false;
};

// RC opcodes by their low five bits (UC = 0x20 | the same, SEND and WRITE only): what the packet
// carries and the extension headers between the BTH and the payload.
constexpr std::array<RoceOp, 0x18> kRoceOps = {{
    {RoceKind::kSend, true, false, 0, false},           // 0x00 SEND first
    {RoceKind::kSend, false, false, 0, false},          // 0x01 SEND middle
    {RoceKind::kSend, false, true, 0, false},           // 0x02 SEND last
    {RoceKind::kSend, false, true, 4, false},           // 0x03 SEND last + ImmDt
    {RoceKind::kSend, true, true, 0, false},            // 0x04 SEND only
    {RoceKind::kSend, true, true, 4, false},            // 0x05 SEND only + ImmDt
    {RoceKind::kWrite, true, false, 16, true},          // 0x06 WRITE first (RETH)
    {RoceKind::kWrite, false, false, 0, false},         // 0x07 WRITE middle
    {RoceKind::kWrite, false, true, 0, false},          // 0x08 WRITE last
    {RoceKind::kWrite, false, true, 4, false},          // 0x09 WRITE last + ImmDt
    {RoceKind::kWrite, true, true, 16, true},           // 0x0A WRITE only (RETH)
    {RoceKind::kWrite, true, true, 20, true},           // 0x0B WRITE only (RETH, ImmDt)
    {RoceKind::kReadRequest, true, true, 16, true},     // 0x0C READ request (RETH)
    {RoceKind::kReadResponse, true, false, 4, false},   // 0x0D READ response first (AETH)
    {RoceKind::kReadResponse, false, false, 0, false},  // 0x0E READ response middle
    {RoceKind::kReadResponse, false, true, 4, false},   // 0x0F READ response last (AETH)
    {RoceKind::kReadResponse, true, true, 4, false},    // 0x10 READ response only (AETH)
    {RoceKind::kNoData, false, false, 4, false},        // 0x11 ACK (AETH)
    {RoceKind::kNoData, false, false, 12, false},       // 0x12 atomic ACK (AETH, AtomicAckETH)
    // What the transport does not implement, and so refuses (an invalid-request NAK): the NIC
    // places none of it.
    {RoceKind::kUnsupported, true, true, 28, false},  // 0x13 compare-swap (AtomicETH)
    {RoceKind::kUnsupported, true, true, 28, false},  // 0x14 fetch-add (AtomicETH)
    {},                                               // 0x15 reserved
    {RoceKind::kUnsupported, false, true, 4, false},  // 0x16 SEND last + IETH
    {RoceKind::kUnsupported, true, true, 4, false},   // 0x17 SEND only + IETH
}};

RoceOp roce_op(uint8_t opcode) {
  uint8_t service = opcode >> 5, op = opcode & 0x1F;
  if (service > 1 || op >= kRoceOps.size()) return RoceOp{};
  RoceOp o = kRoceOps[op];
  if (service == 1 && o.kind != RoceKind::kSend && o.kind != RoceKind::kWrite) return RoceOp{};
  return o;
}

// The message option in a TCP header of `hlen` bytes (hw/fpga/docs/formats.md section 2):
// kind 253 (RFC 6994 experimental), length 20, ExID 0xC1EA, then, big-endian, the sender's
// credit limit, the message number, the sequence number where the message starts and its length.
// The transport's 8-byte form (limit only) and other ExIDs are someone else's options.
struct MsgOption {
  uint32_t number = 0;
  uint32_t start = 0;
  uint32_t length = 0;
};
enum class OptScan : uint8_t { kFound, kAbsent, kMalformed };

OptScan find_msg_option(const uint8_t* tcp, uint32_t hlen, MsgOption* o) {
  uint32_t i = 20;
  while (i < hlen) {
    uint8_t kind = tcp[i];
    if (kind == 0) break;
    if (kind == 1) {
      i++;
      continue;
    }
    // Every other option has a length byte of at least 2 that stays inside the header.
    if (i + 1 >= hlen || tcp[i + 1] < 2 || tcp[i + 1] > hlen - i) return OptScan::kMalformed;
    uint8_t len = tcp[i + 1];
    if (kind == 253 && len == 20 && wire::load16(tcp + i + 2) == 0xC1EA) {
      o->number = wire::load32(tcp + i + 8);
      o->start = wire::load32(tcp + i + 12);
      o->length = wire::load32(tcp + i + 16);
      return OptScan::kFound;
    }
    i += len;
  }
  return OptScan::kAbsent;
}

}  // namespace

struct NicModel::ParsedFrame {
  const uint8_t* frame = nullptr;
  size_t frame_len = 0;
  const uint8_t* ip = nullptr;
  uint32_t ip_hlen = 0;
  const uint8_t* l4 = nullptr;
  uint32_t l4_len = 0;
  FlowKey key;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
};

Decision NicModel::defer(RxEntry& out, DeferReason r) {
  out.reason = r;
  out.nfrags = 0;
  out.placed = 0;
  ctr_[size_t(Ctr::kCount) + size_t(r)]++;
  return finish(out, Decision::kDeferred);
}

Decision NicModel::finish(RxEntry& out, Decision d) {
  out.decision = d;
  switch (d) {
    case Decision::kPlaced:
      bump(out.out_of_order ? Ctr::kRxPastHole : Ctr::kRxInOrder);
      break;
    case Decision::kTrimmed:
      bump(Ctr::kRxTrimmed);
      bump(Ctr::kRxTrimmedBytes, out.trimmed);
      break;
    case Decision::kDropped:
      bump(Ctr::kRxDropped);
      break;
    case Decision::kDeferred:
      bump(Ctr::kRxDeferred);
      break;
    case Decision::kNoPayload:
      bump(Ctr::kRxNoPayload);
      break;
  }
  if (d == Decision::kPlaced || d == Decision::kTrimmed) {
    bump(Ctr::kRxPlacedBytes, out.placed);
    bump(Ctr::kRxFragments, out.nfrags);
  }
  return d;
}

size_t NicModel::rx_burst(std::span<const std::span<const uint8_t>> frames,
                          std::span<RxEntry> out) {
  size_t n = std::min(frames.size(), out.size());
  for (size_t i = 0; i < n; i++)
    rx(frames[i], out[i]);
  return n;
}

// Ethernet, IPv4 and the TCP/UDP header: bounds, lengths, checksums, the 5-tuple.
bool NicModel::parse(std::span<const uint8_t> frame, ParsedFrame& p, RxEntry& out) {
  p.frame = frame.data();
  p.frame_len = frame.size();
  if (p.frame_len < kEthLen) return defer(out, DeferReason::kTruncated), false;
  if (wire::load16(p.frame + 12) != kEtherIpv4) return defer(out, DeferReason::kNotIpv4), false;
  if (p.frame_len < kEthLen + 20) return defer(out, DeferReason::kTruncated), false;
  p.ip = p.frame + kEthLen;
  if ((p.ip[0] >> 4) != 4 || (p.ip[0] & 0xF) < 5) {
    return defer(out, DeferReason::kBadIpHeader), false;
  }
  p.ip_hlen = uint32_t(p.ip[0] & 0xF) * 4;
  uint32_t total = wire::load16(p.ip + 2);
  if (p.frame_len < kEthLen + p.ip_hlen) return defer(out, DeferReason::kTruncated), false;
  if (total < p.ip_hlen) return defer(out, DeferReason::kBadIpHeader), false;
  if (p.frame_len < kEthLen + total) return defer(out, DeferReason::kTruncated), false;
  if ((wire::load16(p.ip + 6) & 0x3FFF) != 0) return defer(out, DeferReason::kIpFragment), false;
  out.ip_csum = wire::csum_fold(wire::csum_partial(p.ip, p.ip_hlen, 0)) == 0 ? CsumStatus::kGood
                                                                             : CsumStatus::kBad;
  if (out.ip_csum == CsumStatus::kBad) return defer(out, DeferReason::kBadIpChecksum), false;

  p.l4 = p.ip + p.ip_hlen;
  p.l4_len = total - p.ip_hlen;
  p.key.src_ip = wire::load32(p.ip + 12);
  p.key.dst_ip = wire::load32(p.ip + 16);
  p.key.proto = p.ip[9];
  if (p.key.proto == 6) {
    if (p.l4_len < 20) return defer(out, DeferReason::kTruncated), false;
    uint32_t doff = uint32_t(p.l4[12] >> 4) * 4;
    if (doff < 20 || doff > p.l4_len) return defer(out, DeferReason::kBadL4Header), false;
    p.payload = p.l4 + doff;
    p.payload_len = p.l4_len - doff;
  } else if (p.key.proto == 17) {
    if (p.l4_len < 8) return defer(out, DeferReason::kTruncated), false;
    if (wire::load16(p.l4 + 4) != p.l4_len) return defer(out, DeferReason::kBadL4Header), false;
    p.payload = p.l4 + 8;
    p.payload_len = p.l4_len - 8;
  } else {
    return defer(out, DeferReason::kNotL4), false;
  }
  p.key.src_port = wire::load16(p.l4);
  p.key.dst_port = wire::load16(p.l4 + 2);
  if (cfg_.verify_l4_checksum && (p.key.proto == 6 || wire::load16(p.l4 + 6) != 0)) {
    uint64_t s = wire::pseudo_sum(p.ip, p.key.proto, p.l4_len);
    out.l4_csum = wire::csum_fold(wire::csum_partial(p.l4, p.l4_len, s)) == 0 ? CsumStatus::kGood
                                                                              : CsumStatus::kBad;
    if (out.l4_csum == CsumStatus::kBad) return defer(out, DeferReason::kBadL4Checksum), false;
  }
  return true;
}

// ---- receive steering -------------------------------------------------------------------------

// The flow a parsed frame belongs to: a RoCE QP by (addresses, BTH DestQP), a Solar connection
// by (addresses, the header's connection number; one of 2^24 or more names none), else the exact
// 5-tuple, else (UDP) the flow that takes any source port. kNil when none.
uint32_t NicModel::find_flow(const FlowKey& key, const uint8_t* payload,
                             uint32_t payload_len) const {
  uint32_t id = kNil;
  if (key.proto == 17 && key.dst_port == kRocePort && payload_len >= kBthLen) {
    const FlowKey qp{key.src_ip, key.dst_ip, 0, kRocePort, 17};
    id = lookup(qp, wire::load24(payload + 5));
  } else if (key.proto == 17 && key.dst_port == kSolarPort && payload_len >= kSolarConnEnd) {
    const uint32_t conn = wire::load32(payload + 4);
    const FlowKey c{key.src_ip, key.dst_ip, 0, kSolarPort, 17};
    if (conn <= kMaxNumber) id = lookup(c, conn);
  }
  if (id == kNil) id = lookup(key, kNoQp);
  if (id == kNil && key.proto == 17) {
    FlowKey any = key;
    any.src_port = 0;
    id = lookup(any, kNoQp);
  }
  return id;
}

// The queue of a TCP/UDP frame with key `key` and flow `id` (kNil: none).
uint16_t NicModel::queue_of(const FlowKey& key, uint32_t id) const {
  if (cfg_.rx_queues == 1) return 0;
  if (id != kNil) return flows_[id].spec.queue;
  // A QP or a Solar connection no flow has (nor a flow of its 5-tuple).
  if (key.proto == 17 && (key.dst_port == kRocePort || key.dst_port == kSolarPort)) return 0;
  return rss::reta_queue(
      reta_, rss::hash_ipv4_l4(rss_key_, key.src_ip, key.dst_ip, key.src_port, key.dst_port));
}

// The same header checks as parse() up to the ports, without checksums (a NIC steers before it
// verifies): a frame parse() accepts gets the same key here, and so the same queue.
uint16_t NicModel::steer(std::span<const uint8_t> frame) const {
  if (cfg_.rx_queues == 1) return 0;
  const uint8_t* f = frame.data();
  const size_t n = frame.size();
  if (n < kEthLen + 20 || wire::load16(f + 12) != kEtherIpv4) return 0;
  const uint8_t* ip = f + kEthLen;
  if ((ip[0] >> 4) != 4 || (ip[0] & 0xF) < 5) return 0;
  const uint32_t hlen = uint32_t(ip[0] & 0xF) * 4;
  const uint32_t total = wire::load16(ip + 2);
  if (n < kEthLen + hlen || total < hlen || n < kEthLen + total) return 0;
  if ((wire::load16(ip + 6) & 0x3FFF) != 0) return 0;
  const uint8_t* l4 = ip + hlen;
  const uint32_t l4_len = total - hlen;
  FlowKey key{wire::load32(ip + 12), wire::load32(ip + 16), 0, 0, ip[9]};
  uint32_t off = 0;
  if (key.proto == 6) {
    if (l4_len < 20) return 0;
    off = uint32_t(l4[12] >> 4) * 4;
    if (off < 20 || off > l4_len) return 0;
  } else if (key.proto == 17) {
    if (l4_len < 8 || wire::load16(l4 + 4) != l4_len) return 0;
    off = 8;
  } else {
    return 0;
  }
  key.src_port = wire::load16(l4);
  key.dst_port = wire::load16(l4 + 2);
  return queue_of(key, find_flow(key, l4 + off, l4_len - off));
}

Decision NicModel::rx(std::span<const uint8_t> frame, RxEntry& out) {
  out.flow_id = kNoFlow;
  out.parser = Parser::kTcp;  // a miss's, whatever the entry held before
  out.reason = DeferReason::kNone;
  out.nfrags = 0;
  out.out_of_order = false;
  out.ip_csum = out.l4_csum = CsumStatus::kNotChecked;
  out.header_len = 0;
  out.seq = out.payload_len = out.trimmed = out.placed = out.msg_seq = 0;
  bump(Ctr::kRxFrames);

  ParsedFrame p;
  if (!parse(frame, p, out)) {
    // Steered as the headers say, checksums aside (the frame still reaches its flow's queue).
    out.queue = steer(frame);
    queue_ctr_[out.queue]++;
    return out.decision;
  }
  // A RoCE QP is found by the BTH DestQP, a Solar connection by its number, whatever source port
  // the peer's path uses.
  const uint32_t id = find_flow(p.key, p.payload, p.payload_len);
  out.queue = queue_of(p.key, id);
  queue_ctr_[out.queue]++;
  if (id == kNil) {
    // Too short to name a QP or a connection: a RoCE frame cut before the end of its BTH, a
    // Solar one before the end of its connection number.
    const bool udp = p.key.proto == 17;
    if (udp && p.key.dst_port == kRocePort && p.payload_len < kBthLen)
      return defer(out, DeferReason::kTruncated);
    if (udp && p.key.dst_port == kSolarPort && p.payload_len < kSolarConnEnd)
      return defer(out, DeferReason::kTruncated);
    return defer(out, DeferReason::kFlowMiss);
  }
  Flow& f = flows_[id];
  out.flow_id = id;
  out.parser = f.spec.parser;
  if (f.spec.mode == FlowMode::kCopy) return defer(out, DeferReason::kCopyMode);

  switch (f.spec.parser) {
    case Parser::kTcp:
      return rx_tcp(f, p, out);
    case Parser::kRoce:
      return rx_roce(f, p, out);
    case Parser::kSolar:
      return rx_solar(f, p, out);
    case Parser::kUdp:
      break;
  }
  out.header_len = uint16_t(std::min<size_t>(p.payload - p.frame, kMaxHeaderBytes));
  std::memcpy(out.header.data(), p.frame, out.header_len);
  out.payload_len = p.payload_len;
  if (p.payload_len == 0) return finish(out, Decision::kNoPayload);
  return place_unreliable(f, p, out);
}

// ---- placement -------------------------------------------------------------------------------

// Writes the fragments already in `out`, taking payload bytes from p.payload + skip.
Decision NicModel::write_frags(const ParsedFrame& p, uint32_t skip, RxEntry& out) {
  // Check every fragment first: a fault must not leave half a payload written.
  for (uint8_t i = 0; i < out.nfrags; i++) {
    const Placement& pl = out.frags[i];
    const Mr* m = pl.mr < mrs_.size() ? &mrs_[pl.mr] : nullptr;
    if (m == nullptr || !m->used || pl.offset > m->len || pl.len > m->len - pl.offset) {
      return defer(out, DeferReason::kDmaFault);
    }
  }
  const uint8_t* src = p.payload + skip;
  uint32_t total = 0;
  for (uint8_t i = 0; i < out.nfrags; i++) {
    const Placement& pl = out.frags[i];
    if (cfg_.dma_payload) dma_write(pl.mr, pl.offset, src, pl.len);
    src += pl.len;
    total += pl.len;
  }
  out.placed = total;
  return finish(out, skip != 0 ? Decision::kTrimmed : Decision::kPlaced);
}

// Byte-stream placement: `dist` bytes past the oldest MS's first byte, `len` bytes long.
Decision NicModel::place_stream(Flow& f, const ParsedFrame& p, uint64_t dist, uint32_t len,
                                RxEntry& out) {
  if (dist >= f.list_bytes || len > f.list_bytes - dist) return defer(out, DeferReason::kNoMs);
  // Start from the MS the last placement ended in when the payload lies at or beyond it: in-order
  // data then costs one step however many MSs are posted; data before it walks from the head.
  uint32_t chunk = f.head_chunk, idx = f.head_idx;
  uint64_t start = 0;  // distance of MS (chunk, idx) from the oldest MS's first byte
  if (f.hint_chunk != kNil && dist >= f.hint_dist) {
    chunk = f.hint_chunk;
    idx = f.hint_idx;
    start = f.hint_dist;
  }
  auto step = [&](const MsEntry& e) {
    start += e.len;
    if (++idx == cfg_.ms_chunk) {
      chunk = chunk_next_[chunk];
      idx = 0;
    }
  };
  for (;;) {
    const MsEntry& e = entry(chunk, idx);
    if (dist - start < e.len) break;
    step(e);
  }
  uint64_t in = dist - start;
  uint8_t n = 0;
  uint32_t left = len;
  for (;;) {
    if (n == kMaxFrags) return defer(out, DeferReason::kTooManyFrags);
    const MsEntry& e = entry(chunk, idx);
    uint32_t take = uint32_t(std::min<uint64_t>(left, e.len - in));
    out.frags[n++] = {e.mr(), e.offset() + in, take};
    left -= take;
    if (left == 0) break;
    in = 0;
    step(e);
  }
  f.hint_chunk = chunk;
  f.hint_idx = idx;
  f.hint_dist = start;
  out.nfrags = n;
  return write_frags(p, out.trimmed, out);
}

// Message placement: the live MS posted for `msg`, `at` bytes into it. A payload that would run
// past the MS's end is deferred whole (`ms_overflow`): the NIC writes a payload entirely or not at
// all, so a placed verdict always means every byte is where the transport expects it.
Decision NicModel::place_message(Flow& f, const ParsedFrame& p, uint32_t msg, uint64_t at,
                                 uint32_t len, RxEntry& out) {
  out.msg_seq = msg;
  const MsEntry* e = find_message(f, msg);
  if (e == nullptr) return defer(out, DeferReason::kNoMessage);
  if (at > e->len || len > e->len - at) return defer(out, DeferReason::kMsOverflow);
  out.frags[0] = {e->mr(), e->offset() + at, len};
  out.nfrags = 1;
  Decision d = write_frags(p, out.trimmed, out);
  if (d != Decision::kDeferred) bump(Ctr::kRxMessage);
  return d;
}

// Unreliable flows: the whole payload into the oldest MS, which is then consumed.
Decision NicModel::place_unreliable(Flow& f, const ParsedFrame& p, RxEntry& out) {
  drop_tombstones(f);
  if (f.ms_count == 0) return defer(out, DeferReason::kNoMs);
  const MsEntry& e = entry(f.head_chunk, f.head_idx);
  if (out.payload_len > e.len) return defer(out, DeferReason::kMsOverflow);
  out.frags[0] = {e.mr(), e.offset(), out.payload_len};
  out.nfrags = 1;
  out.msg_seq = e.msg_seq;
  Decision d = write_frags(p, 0, out);
  if (d == Decision::kPlaced) {
    bump(Ctr::kRxUnreliable);
    pop_head(f);
  }
  return d;
}

// ---- transports ------------------------------------------------------------------------------

Decision NicModel::rx_tcp(Flow& f, const ParsedFrame& p, RxEntry& out) {
  const uint8_t* tcp = p.l4;
  uint8_t flags = tcp[13];
  uint32_t seq = wire::load32(tcp + 4);
  out.seq = seq;
  out.header_len = uint16_t(std::min<size_t>(p.payload - p.frame, kMaxHeaderBytes));
  std::memcpy(out.header.data(), p.frame, out.header_len);
  out.payload_len = p.payload_len;
  if (p.payload_len == 0 || (flags & 0x04) != 0) return finish(out, Decision::kNoPayload);
  if (flags & 0x02) seq++;  // SYN takes the first sequence number
  if (!f.spec.reliable) return place_unreliable(f, p, out);

  MsgOption o;
  if (f.spec.messages) {
    switch (find_msg_option(tcp, uint32_t(p.payload - tcp), &o)) {
      case OptScan::kFound:
        break;
      case OptScan::kAbsent:
        return defer(out, DeferReason::kNoMessage);
      case OptScan::kMalformed:
        return defer(out, DeferReason::kBadL4Header);
    }
  }
  int32_t rel = int32_t(seq - f.cursor);
  int64_t end = int64_t(rel) + p.payload_len;
  if (end <= 0) return finish(out, Decision::kDropped);   // (b)
  uint32_t trim = rel < 0 ? uint32_t(-int64_t(rel)) : 0;  // (c)
  out.trimmed = trim;
  out.out_of_order = rel > 0;  // (d)
  if (f.spec.messages) {
    // The option is the peer's word: the whole payload must lie inside the message it names
    // (start at or before seq, seq + payload at or before start + length). Whether messages
    // abut and numbers match their order is the transport's check; the NIC only keeps each
    // byte inside the MS of the number named, at seq - start.
    uint32_t off = seq - o.start;
    if (o.length == 0 || int32_t(off) < 0 || uint64_t(off) + p.payload_len > o.length) {
      return defer(out, DeferReason::kBadL4Header);
    }
    return place_message(f, p, o.number, uint64_t(off) + trim, p.payload_len - trim, out);
  }
  uint32_t first = seq + trim;
  uint32_t dist = first - uint32_t(f.head_pos);
  return place_stream(f, p, dist, p.payload_len - trim, out);
}

Decision NicModel::rx_roce(Flow& f, const ParsedFrame& p, RxEntry& out) {
  if (p.key.proto != 17 || p.key.dst_port != kRocePort) {
    return defer(out, DeferReason::kBadL4Header);
  }
  if (p.payload_len < kBthLen + kIcrcLen) return defer(out, DeferReason::kTruncated);
  const uint8_t* bth = p.payload;
  uint8_t opcode = bth[0];
  out.seq = wire::load24(bth + 9);
  if ((bth[1] & 0x0F) != 0) return defer(out, DeferReason::kBadL4Header);
  uint32_t pad = (bth[1] >> 4) & 3;

  if (cfg_.verify_l4_checksum) {
    // ICRC: over the packet from its IP header up to the ICRC (common/wire.h).
    const size_t icrc_at = size_t(bth - p.ip) + p.payload_len - kIcrcLen;
    const uint32_t crc = wire::roce_icrc(p.ip, icrc_at);
    const uint32_t got = wire::roce_icrc_load(p.ip + icrc_at);
    out.l4_csum = crc == got ? CsumStatus::kGood : CsumStatus::kBad;
    if (out.l4_csum == CsumStatus::kBad) return defer(out, DeferReason::kBadIcrc);
  }

  // The partition: a packet of another is nobody's here (the transport drops it and counts it).
  if (!pkey_ok(wire::load16(bth + 2))) return defer(out, DeferReason::kBadPkey);

  if (opcode == 0x81) {  // CNP: header only
    out.header_len = uint16_t(std::min<size_t>(bth + p.payload_len - p.frame, kMaxHeaderBytes));
    std::memcpy(out.header.data(), p.frame, out.header_len);
    return finish(out, Decision::kNoPayload);
  }
  // An RC QP (a reliable flow) takes RC opcodes only: UC's are another service's, dropped by the
  // transport (as by rxe), so nothing of them is placed.
  if (f.spec.reliable && (opcode >> 5) != 0) return defer(out, DeferReason::kUnsupported);
  RoceOp op = roce_op(opcode);
  if (p.payload_len < kBthLen + op.ext + kIcrcLen + pad) {
    return defer(out, DeferReason::kBadL4Header);
  }
  const uint8_t* data = bth + kBthLen + op.ext;
  uint32_t len = p.payload_len - kBthLen - op.ext - kIcrcLen - pad;
  out.header_len = uint16_t(std::min<size_t>(data - p.frame, kMaxHeaderBytes));
  std::memcpy(out.header.data(), p.frame, out.header_len);
  out.payload_len = len;
  ParsedFrame q = p;
  q.payload = data;
  q.payload_len = len;

  if (op.kind == RoceKind::kNoData) return finish(out, Decision::kNoPayload);
  if (op.kind == RoceKind::kUnsupported) {
    return len == 0 ? finish(out, Decision::kNoPayload) : defer(out, DeferReason::kUnsupported);
  }
  // READ responses are in the requester's own PSN space, not the cursor's (the responder-side
  // ePSN of incoming requests): never dropped or trimmed by it.
  if (op.kind == RoceKind::kReadResponse) {
    return len == 0 ? finish(out, Decision::kNoPayload) : place_read(f, q, op.first, op.last, out);
  }
  const uint32_t psn = out.seq;
  if (f.spec.reliable && psn_diff(psn, f.cursor) < 0) {
    return finish(out, Decision::kDropped);  // (b): a duplicate
  }
  // Go-back-N, RC's own recovery: a request is placed only at the PSN the NIC expects next, so
  // app memory only ever holds a prefix of the request stream, in order (a flag written after
  // its data is never seen before it). One past a gap goes to the transport unwritten, which
  // NAKs it; one the NIC passed already, which the transport did not take yet, too (the
  // transport decides, through the copy path).
  const bool gbn = !f.spec.selective_repeat;
  if (gbn && psn != f.expect) return defer(out, DeferReason::kOutOfSequence);
  out.out_of_order = !gbn && psn != f.cursor;
  const Decision d = roce_request(f, p, q, opcode, op.first, op.last, len, out);
  if (gbn && (d == Decision::kPlaced || d == Decision::kNoPayload)) {
    // Past what it placed, or had nothing to place: a READ request takes its responses' PSNs.
    const uint32_t span = op.kind == RoceKind::kReadRequest
                              ? psn_span(wire::load32(bth + kBthLen + 12), f.spec.pmtu)
                              : 1;
    f.expect = (psn + span) & kPsnMask;
  }
  return d;
}

// A request at or past the cursor (a SEND's, a WRITE's or a READ request): IBTA's lengths, the
// message it belongs to, its place. `p` is the frame, `q` its payload.
Decision NicModel::roce_request(Flow& f, const ParsedFrame& p, const ParsedFrame& q, uint8_t opcode,
                                bool first, bool last, uint32_t len, RxEntry& out) {
  const uint8_t* bth = p.payload;
  const uint32_t psn = out.seq;
  const uint32_t pmtu = f.spec.pmtu;
  const RoceKind kind = roce_op(opcode).kind;
  const bool at_start = f.next_start_known && f.next_start_psn == psn;
  if (kind == RoceKind::kReadRequest) {
    // Nothing to place. Begun where a message was known to begin, the next begins past the PSNs
    // its responses take.
    const uint32_t dma = wire::load32(bth + kBthLen + 12);
    if (dma > kMaxMessage) return defer(out, DeferReason::kBadLength);
    if (at_start) f.next_start_psn = (psn + psn_span(dma, pmtu)) & kPsnMask;
    return finish(out, Decision::kNoPayload);
  }
  // IBTA's lengths, before a byte is written (the transport NAKs a request that fails them as
  // invalid): a first or middle packet carries one PMTU, a last one 1..PMTU, an only one
  // 0..PMTU, and the payload and its pad are whole words.
  const uint32_t pad = (bth[1] >> 4) & 3;
  if (((len + pad) & 3) != 0) return defer(out, DeferReason::kBadL4Header);
  const bool len_ok =
      first ? (last ? len <= pmtu : len == pmtu) : (last ? len != 0 && len <= pmtu : len == pmtu);
  if (!len_ok) return defer(out, DeferReason::kBadLength);

  const bool gbn = !f.spec.selective_repeat;
  const bool is_send = kind == RoceKind::kSend;
  // The context the packet belongs to: the flow entry's, or (selective repeat, a WRITE) one of
  // the pool's the flow holds. `extra`: one of the pool's.
  RoceCtx* cp = is_send ? &f.send_ctx : &f.write_ctx;
  bool extra = false;
  if (first) {
    if (!is_send && !(cp->valid && cp->first_psn == psn)) {
      if (RoceCtx* x = write_ctx_first(f, psn)) {
        cp = x;
        extra = true;
      }
    }
    RoceCtx& c = *cp;
    if (c.valid && c.first_psn == psn) {
      // A retransmitted first packet. A WRITE first seen off the chain joins it now.
      if (at_start && !c.chained) {
        c.chained = true;
        f.next_start_known = false;
      }
    } else {
      // A SEND takes the next posted receive only where the previous message is known to end,
      // and once the cursor has passed that message, so its retransmissions still find it.
      // Also once it has passed a WRITE before it: a WRITE with immediate takes a receive too,
      // which only the transport knows (it accepted the WRITE's last packet and said which
      // receive is next, ROCE_RESYNC); a SEND opened earlier could take that receive's buffer.
      // Go-back-N: a WRITE too begins only where a message is known to begin (not inside
      // another message: the transport NAKs that).
      auto pending = [&](const RoceCtx& w) {
        return w.valid && psn_diff(w.end_psn, psn) < 0 && psn_diff(w.end_psn, f.cursor) >= 0;
      };
      bool write_pending = pending(f.write_ctx);
      for (uint32_t i = f.xctx_head; i != kNil && !write_pending; i = xctx_next_[i]) {
        write_pending = pending(xctx_[i]);
      }
      if ((is_send || gbn) && !at_start) return defer(out, DeferReason::kNoMessage);
      if (is_send && ((c.valid && psn_diff(c.end_psn, f.cursor) >= 0) || write_pending)) {
        return defer(out, DeferReason::kNoMessage);
      }
      RoceCtx n;
      n.valid = true;
      n.chained = at_start;
      n.first_psn = psn;
      n.next_psn = (psn + 1) & kPsnMask;
      if (is_send) {
        n.msg = f.next_msg++;
        n.end_known = last;
        n.end_psn = psn;
      } else {
        const uint8_t* reth = bth + kBthLen;
        uint32_t rkey = wire::load32(reth + 8);
        n.mr = uint16_t(rkey & 0xFFFF);
        n.tag = uint16_t(rkey >> 16);
        n.base = wire::load64(reth);
        n.limit = wire::load32(reth + 12);
        // The RETH's length: at most 2^31; a WRITE cut into packets is longer than one PMTU,
        // and a WRITE only carries all of it.
        if (n.limit > kMaxMessage || (!last && n.limit <= pmtu) || (last && len != n.limit)) {
          return defer(out, DeferReason::kBadLength);
        }
        // The whole extent the RETH claims, once; each packet is checked again below. A
        // zero-length WRITE touches nothing and needs no key.
        if (n.limit != 0 && !remote_ok(f, rkey, n.base, n.limit, kMrRemoteWrite)) {
          return defer(out, DeferReason::kRemoteAccess);
        }
        n.end_known = true;
        n.end_psn = uint32_t(psn + psn_span(uint32_t(n.limit), pmtu) - 1) & kPsnMask;
      }
      if (at_start) f.next_start_known = false;
      // Selective repeat: a later WRITE must not evict one the cursor has not passed yet: its
      // middle packets would find no context. The later one's first packet is self-describing
      // and placed anyway. (Go-back-N places in order: the earlier one is behind the NIC.)
      bool keep = !gbn && !is_send && c.valid && psn_diff(c.end_psn, f.cursor) >= 0 &&
                  psn_diff(psn, c.first_psn) > 0;
      if (keep) {
        if (n.chained) {
          f.next_start_psn = (n.end_psn + 1) & kPsnMask;
          f.next_start_known = true;
          n.chained = false;
        }
        // With more WRITE contexts (roce_write_ctxs), one from the pool keeps it, so its later
        // packets are placed too; with none left, they are deferred.
        if (RoceCtx* x = write_ctx_alloc(f)) *x = n;
        out.frags[0] = {n.mr, n.base, len};
        out.nfrags = len == 0 ? 0 : 1;
        return len == 0 ? finish(out, Decision::kNoPayload) : write_frags(q, 0, out);
      }
      // Selective repeat: an earlier WRITE takes the flow entry's context from a later one the
      // cursor has not passed either (the earlier one's first packet came again); the later one
      // moves to the pool when there is room there.
      if (!gbn && !is_send && write_live(f, c)) {
        if (RoceCtx* x = write_ctx_alloc(f)) *x = c;
      }
      c = n;
    }
  } else {
    if (!is_send &&
        !(cp->valid && psn_diff(psn, cp->first_psn) > 0 && psn_diff(cp->end_psn, psn) >= 0)) {
      if (RoceCtx* x = write_ctx_holding(f, psn)) {
        cp = x;
        extra = true;
      }
    }
    RoceCtx& c = *cp;
    if (!c.valid || psn_diff(psn, c.first_psn) <= 0) return defer(out, DeferReason::kNoMessage);
    if (c.end_known) {
      // Within the message; its last packet exactly at its end.
      int32_t to_end = psn_diff(c.end_psn, psn);
      if (to_end < 0 || (last != (to_end == 0))) return defer(out, DeferReason::kNoMessage);
    } else {
      if (psn_diff(psn, c.next_psn) > 0) return defer(out, DeferReason::kNoMessage);
      if (psn == c.next_psn) c.next_psn = (psn + 1) & kPsnMask;
      if (last) {
        c.end_known = true;
        c.end_psn = psn;
      }
    }
  }
  RoceCtx& c = *cp;
  uint64_t at = uint64_t((psn - c.first_psn) & kPsnMask) * pmtu;
  // A WRITE's last packet ends it exactly where its RETH said.
  if (!is_send && last && at + len != c.limit) return defer(out, DeferReason::kBadLength);
  if (c.chained && c.end_known) {
    // The message's end is known (a WRITE from its first packet): pass the chain on, through
    // a WRITE already seen that begins right there.
    f.next_start_psn = (c.end_psn + 1) & kPsnMask;
    f.next_start_known = true;
    c.chained = false;
    RoceCtx* w = &f.write_ctx;
    if (!(w->valid && w->first_psn == f.next_start_psn)) {
      if (RoceCtx* x = write_ctx_first(f, f.next_start_psn)) w = x;
    }
    if (w->valid && !w->chained && w->first_psn == f.next_start_psn) {
      f.next_start_psn = (w->end_psn + 1) & kPsnMask;
    }
  }
  if (len == 0) return finish(out, Decision::kNoPayload);
  if (is_send) return place_message(f, q, c.msg, at, len, out);
  if (at > c.limit || len > c.limit - at) return defer(out, DeferReason::kMsOverflow);
  // Again per packet: the MR may have been removed, or re-registered under another tag.
  if (!remote_ok(f, uint32_t(c.tag) << 16 | c.mr, c.base + at, len, kMrRemoteWrite)) {
    return defer(out, DeferReason::kRemoteAccess);
  }
  out.frags[0] = {c.mr, c.base + at, len};
  out.nfrags = 1;
  const Decision d = write_frags(q, 0, out);
  if (extra && !first && d == Decision::kPlaced) bump(Ctr::kRxPlacedPastGap);
  return d;
}

// A READ response: the posted sink whose PSN range holds the packet's PSN, at
// (psn - first) x PMTU inside it. First/only packets must open the range and last/only close
// it; a payload past the sink is deferred whole (ms_overflow). out.msg_seq = the sink's first PSN.
Decision NicModel::place_read(Flow& f, const ParsedFrame& p, bool first, bool last, RxEntry& out) {
  if (f.read_chunk == kNil) return defer(out, DeferReason::kNoMessage);
  const uint32_t psn = out.seq;
  for (uint32_t i = 0; i < cfg_.ms_chunk; i++) {
    const MsEntry& e = entry(f.read_chunk, i);
    if ((e.msg_seq & kSinkLive) == 0) continue;
    const uint32_t start = e.msg_seq & kPsnMask;
    const uint32_t k = (psn - start) & kPsnMask;
    const uint32_t n = psn_span(e.len, f.spec.pmtu);
    if (k >= n) continue;
    if (first != (k == 0) || last != (k == n - 1)) return defer(out, DeferReason::kNoMessage);
    out.msg_seq = start;
    const uint64_t at = uint64_t(k) * f.spec.pmtu;
    if (at > e.len || p.payload_len > e.len - at) return defer(out, DeferReason::kMsOverflow);
    out.frags[0] = {e.mr(), e.offset() + at, p.payload_len};
    out.nfrags = 1;
    return write_frags(p, 0, out);
  }
  return defer(out, DeferReason::kNoMessage);
}

Decision NicModel::rx_solar(Flow& f, const ParsedFrame& p, RxEntry& out) {
  if (p.key.proto != 17) return defer(out, DeferReason::kBadL4Header);
  if (p.payload_len < kSolarLen) return defer(out, DeferReason::kTruncated);
  const uint8_t* h = p.payload;
  uint8_t type = h[0];
  out.seq = wire::load32(h + 8);
  uint32_t io_id = wire::load32(h + 12);
  uint64_t offset = wire::load64(h + 16);
  ParsedFrame q = p;
  q.payload = h + kSolarLen;
  q.payload_len = p.payload_len - kSolarLen;
  out.header_len = uint16_t(std::min<size_t>(q.payload - p.frame, kMaxHeaderBytes));
  std::memcpy(out.header.data(), p.frame, out.header_len);
  out.payload_len = q.payload_len;
  if (type < 1 || type > 5) return defer(out, DeferReason::kBadL4Header);
  if (type != 1 && type != 3) {  // READ_REQ, ACK, NACK carry no block
    return q.payload_len == 0 ? finish(out, Decision::kNoPayload)
                              : defer(out, DeferReason::kBadL4Header);
  }
  if (cfg_.verify_l4_checksum) {
    bool ok = wire::crc32c(q.payload, q.payload_len) == wire::load32(h + 28);
    out.l4_csum = ok ? CsumStatus::kGood : CsumStatus::kBad;
    if (!ok) return defer(out, DeferReason::kBadCrc32c);
  }
  if (q.payload_len == 0) return finish(out, Decision::kNoPayload);
  if (!f.spec.reliable) return place_unreliable(f, q, out);
  if (f.spec.messages) return place_message(f, q, io_id, offset, q.payload_len, out);
  // A byte stream placed by offset: bytes before the oldest MS were retired (b, c).
  if (offset > UINT64_MAX - q.payload_len) return defer(out, DeferReason::kBadL4Header);
  uint64_t end = offset + q.payload_len;
  if (end <= f.head_pos) return finish(out, Decision::kDropped);
  uint64_t trim = offset < f.head_pos ? f.head_pos - offset : 0;
  out.trimmed = uint32_t(trim);
  return place_stream(f, q, offset + trim - f.head_pos, uint32_t(q.payload_len - trim), out);
}

}  // namespace cleave::nic
