// nic_model_ctl.cc - the model's control side: table set-up, driver commands, DMA checks,
// counter names and the memory report.
#include <algorithm>
#include <cstring>

#include "nic_model.h"

namespace cleave::nic {
namespace {

constexpr uint32_t kPsnMask = 0xFFFFFF;

// Counter names with their group prefix, built once.
struct CounterNames {
  std::array<std::array<char, 40>, kCounterCount> buf{};
  std::array<std::string_view, kCounterCount> names{};
  CounterNames() {
    size_t i = 0;
    auto add = [&](std::string_view prefix, std::string_view n) {
      size_t len = std::min(prefix.size() + n.size(), buf[i].size());
      std::memcpy(buf[i].data(), prefix.data(), prefix.size());
      std::memcpy(buf[i].data() + prefix.size(), n.data(), len - prefix.size());
      names[i] = std::string_view(buf[i].data(), len);
      i++;
    };
    for (auto n : kCtrNames)
      add("", n);
    for (auto n : kDeferReasonNames)
      add("defer_", n);
    for (auto n : kErrNames)
      add("cmd_err_", n);
    for (auto n : kTxStatusNames)
      add("tx_status_", n);
  }
};

bool is_pow2(uint32_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace

std::string_view err_name(Err e) {
  return e < Err::kCount ? kErrNames[size_t(e)] : "?";
}
std::string_view defer_reason_name(DeferReason r) {
  return r < DeferReason::kCount ? kDeferReasonNames[size_t(r)] : "?";
}
std::string_view tx_status_name(TxStatus s) {
  return s < TxStatus::kCount ? kTxStatusNames[size_t(s)] : "?";
}
std::string_view decision_name(Decision d) {
  return size_t(d) < kDecisionNames.size() ? kDecisionNames[size_t(d)] : "?";
}

std::string_view NicModel::counter_name(size_t index) {
  static const CounterNames names;
  return index < kCounterCount ? names.names[index] : "?";
}

NicModel::NicModel(const NicConfig& cfg) : cfg_(cfg) {
  // Bad geometry is fixed up rather than thrown: the model must come up for any config.
  cfg_.max_flows = std::clamp<uint32_t>(cfg_.max_flows, 1, 1u << 24);
  cfg_.max_mrs = std::clamp<uint32_t>(cfg_.max_mrs, 1, 1u << 16);
  if (cfg_.ms_chunk == 0) cfg_.ms_chunk = 16;
  cfg_.ms_committed_per_flow -= cfg_.ms_committed_per_flow % cfg_.ms_chunk;
  cfg_.ms_store_entries -= cfg_.ms_store_entries % cfg_.ms_chunk;
  cfg_.tx_completions = std::max<uint32_t>(cfg_.tx_completions, 1);
  cfg_.roce_write_ctxs = std::clamp<uint32_t>(cfg_.roce_write_ctxs, 1, kMaxWriteCtxs);
  if (cfg_.roce_write_ctxs == 1) cfg_.roce_write_ctx_pool = 0;
  cfg_.roce_write_ctx_pool = std::min<uint32_t>(cfg_.roce_write_ctx_pool, 1u << 24);
  cfg_.rx_queues = std::clamp<uint16_t>(cfg_.rx_queues, 1, kMaxRxQueues);
  reta_ = rss::default_reta(cfg_.rx_queues);

  chunks_per_flow_ = cfg_.ms_committed_per_flow / cfg_.ms_chunk;
  committed_chunks_ = chunks_per_flow_ * cfg_.max_flows;
  total_chunks_ = committed_chunks_ + cfg_.ms_store_entries / cfg_.ms_chunk;

  uint32_t buckets = 1;
  while (buckets < cfg_.max_flows * 2)
    buckets <<= 1;
  hash_mask_ = buckets - 1;
  buckets_.assign(buckets, kNil);
  flows_.resize(cfg_.max_flows);
  mrs_.resize(cfg_.max_mrs);
  ms_.resize(size_t(total_chunks_) * cfg_.ms_chunk);
  chunk_next_.assign(total_chunks_, kNil);
  for (uint32_t c = total_chunks_; c-- > committed_chunks_;) {
    chunk_next_[c] = store_free_;
    store_free_ = c;
    store_free_count_++;
  }
  txc_.resize(cfg_.tx_completions);
  xctx_.resize(cfg_.roce_write_ctx_pool);
  xctx_next_.assign(cfg_.roce_write_ctx_pool, kNil);
  for (uint32_t i = cfg_.roce_write_ctx_pool; i-- > 0;) {
    xctx_next_[i] = xctx_free_;
    xctx_free_ = i;
    xctx_free_count_++;
  }
}

Err NicModel::count_cmd(Err e) {
  if (e == Err::kOk) {
    bump(Ctr::kCmdOk);
  } else {
    bump(Ctr::kCmdErrors);
    ctr_[size_t(Ctr::kCount) + size_t(DeferReason::kCount) + size_t(e)]++;
  }
  return e;
}

// ---- MR table ---------------------------------------------------------------------------------

Err NicModel::mr_add(uint16_t id, uint8_t* base, uint64_t len, uint32_t owner, uint8_t access,
                     uint16_t tag) {
  if (id >= mrs_.size()) return count_cmd(Err::kMrTableFull);
  if (base == nullptr || len == 0 || len >= (uint64_t(1) << 40)) {
    return count_cmd(Err::kOutOfBounds);
  }
  if ((access & ~(kMrRemoteWrite | kMrRemoteRead)) != 0) return count_cmd(Err::kBadArgument);
  Mr& m = mrs_[id];
  if (m.used) return count_cmd(Err::kMrExists);
  m = Mr{base, len, owner, 0, tag, access, true};
  mrs_in_use_++;
  return count_cmd(Err::kOk);
}

Err NicModel::mr_remove(uint16_t id) {
  if (id >= mrs_.size() || !mrs_[id].used) return count_cmd(Err::kUnknownMr);
  if (mrs_[id].refs != 0) return count_cmd(Err::kMrInUse);
  mrs_[id] = Mr{};
  mrs_in_use_--;
  return count_cmd(Err::kOk);
}

bool NicModel::dma_write(uint16_t mr, uint64_t offset, const uint8_t* src, uint32_t len) {
  if (mr >= mrs_.size()) return false;
  const Mr& m = mrs_[mr];
  if (!m.used || offset > m.len || len > m.len - offset) return false;
  if (len != 0) std::memcpy(m.base + offset, src, len);
  return true;
}

bool NicModel::dma_read(uint16_t mr, uint64_t offset, uint8_t* dst, uint32_t len) const {
  if (mr >= mrs_.size()) return false;
  const Mr& m = mrs_[mr];
  if (!m.used || offset > m.len || len > m.len - offset) return false;
  if (len != 0) std::memcpy(dst, m.base + offset, len);
  return true;
}

// ---- flow table -------------------------------------------------------------------------------

uint32_t NicModel::bucket_of(const FlowKey& k, uint32_t qpn) const {
  uint64_t h = (uint64_t(k.src_ip) << 32 | k.dst_ip) * 0x9E3779B97F4A7C15ull;
  h ^= (uint64_t(k.src_port) << 24 | uint64_t(k.dst_port) << 8 | k.proto) * 0xC2B2AE3D27D4EB4Full;
  h ^= uint64_t(qpn) * 0x165667B19E3779F9ull;
  return uint32_t(h >> 32) & hash_mask_;
}

uint32_t NicModel::lookup(const FlowKey& k, uint32_t qpn) const {
  for (uint32_t id = buckets_[bucket_of(k, qpn)]; id != kNil; id = flows_[id].hash_next) {
    const FlowSpec& s = flows_[id].spec;
    if (s.key == k && match_qpn(s) == qpn) return id;
  }
  return kNil;
}

NicModel::Flow* NicModel::flow_at(uint32_t id) {
  if (id >= flows_.size() || !flows_[id].used) return nullptr;
  return &flows_[id];
}

void NicModel::hash_unlink(uint32_t id) {
  const FlowSpec& s = flows_[id].spec;
  uint32_t* link = &buckets_[bucket_of(s.key, match_qpn(s))];
  while (*link != kNil && *link != id)
    link = &flows_[*link].hash_next;
  if (*link == id) *link = flows_[id].hash_next;
}

Err NicModel::flow_add(uint32_t id, const FlowSpec& spec) {
  if (id >= flows_.size())
    return count_cmd(id == kNoFlow ? Err::kBadArgument : Err::kFlowTableFull);
  if (flows_[id].used) return count_cmd(Err::kFlowExists);
  if (flows_in_use_ >= flows_.size()) return count_cmd(Err::kFlowTableFull);
  if (spec.key.proto != 6 && spec.key.proto != 17) return count_cmd(Err::kBadArgument);
  if ((spec.parser == Parser::kTcp) != (spec.key.proto == 6)) return count_cmd(Err::kBadArgument);
  if (spec.queue >= cfg_.rx_queues) return count_cmd(Err::kBadArgument);
  FlowSpec s = spec;
  if (s.parser == Parser::kRoce) {
    if (s.pmtu < 256 || s.pmtu > 4096 || !is_pow2(s.pmtu) || s.initial_seq > 0xFFFFFF ||
        s.qpn > 0xFFFFFF || s.key.dst_port != kRocePort) {
      return count_cmd(Err::kBadArgument);
    }
    s.key.src_port = 0;  // found by (src ip, dst ip, QPN): any source port
  } else if (s.parser == Parser::kSolar) {
    if (s.qpn > 0xFFFFFF || s.key.dst_port != kSolarPort) return count_cmd(Err::kBadArgument);
    s.key.src_port = 0;  // found by (src ip, dst ip, connection number): any source port
  }
  if (lookup(s.key, match_qpn(s)) != kNil) return count_cmd(Err::kFlowExists);

  Flow& f = flows_[id];
  f = Flow{};
  f.spec = s;
  f.used = true;
  // Solar places by the offset in its header and keeps no sequence: its cursor starts at 0
  // (the command's word 5 carries its connection number instead).
  f.cursor = spec.parser == Parser::kSolar ? 0 : spec.initial_seq;
  f.head_pos = spec.parser == Parser::kSolar ? spec.initial_offset : spec.initial_seq;
  f.next_start_psn = spec.initial_seq;
  f.expect = spec.initial_seq;
  for (uint32_t i = 0; i < chunks_per_flow_; i++) {
    uint32_t c = id * chunks_per_flow_ + i;
    chunk_next_[c] = f.private_free;
    f.private_free = c;
  }
  uint32_t b = bucket_of(s.key, match_qpn(s));
  f.hash_next = buckets_[b];
  buckets_[b] = id;
  flows_in_use_++;
  return count_cmd(Err::kOk);
}

Err NicModel::flow_remove(uint32_t id) {
  Flow* f = flow_at(id);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  while (f->ms_count > 0)
    pop_head(*f);
  release_reads(*f);
  write_ctxs_release(*f, true);
  hash_unlink(id);
  *f = Flow{};
  flows_in_use_--;
  return count_cmd(Err::kOk);
}

Err NicModel::flow_set_mode(uint32_t id, FlowMode mode) {
  Flow* f = flow_at(id);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (mode != FlowMode::kZeroCopy && mode != FlowMode::kCopy) return count_cmd(Err::kBadArgument);
  f->spec.mode = mode;
  return count_cmd(Err::kOk);
}

// ---- MS lists -----------------------------------------------------------------------------------

uint32_t NicModel::chunk_alloc(Flow& f) {
  uint32_t c = f.private_free;
  if (c != kNil) {
    f.private_free = chunk_next_[c];
  } else if (store_free_ != kNil) {
    c = store_free_;
    store_free_ = chunk_next_[c];
    store_free_count_--;
  } else {
    return kNil;
  }
  chunk_next_[c] = kNil;
  return c;
}

void NicModel::chunk_free(Flow& f, uint32_t c) {
  if (is_committed(c)) {
    chunk_next_[c] = f.private_free;
    f.private_free = c;
  } else {
    chunk_next_[c] = store_free_;
    store_free_ = c;
    store_free_count_++;
  }
}

void NicModel::pop_head(Flow& f) {
  MsEntry& e = entry(f.head_chunk, f.head_idx);
  if (f.hint_chunk == f.head_chunk && f.hint_idx == f.head_idx) {
    f.hint_chunk = kNil;
  } else if (f.hint_chunk != kNil) {
    f.hint_dist -= e.len;
  }
  if (e.len != 0) {
    mrs_[e.mr()].refs--;
    f.head_pos += e.len;
    f.list_bytes -= e.len;
  }
  e = MsEntry{};
  if (!is_committed(f.head_chunk)) ms_in_store_--;
  f.head_idx++;
  f.ms_count--;
  ms_in_use_--;
  if (f.ms_count == 0) {
    chunk_free(f, f.head_chunk);
    f.head_chunk = f.tail_chunk = kNil;
    f.head_idx = f.tail_idx = 0;
    f.msg_dense = true;
    f.msg_hint_chunk = kNil;
  } else if (f.head_idx == cfg_.ms_chunk) {
    uint32_t next = chunk_next_[f.head_chunk];
    if (f.msg_hint_chunk == f.head_chunk) f.msg_hint_chunk = kNil;
    chunk_free(f, f.head_chunk);
    f.head_chunk = next;
    f.head_idx = 0;
  }
}

void NicModel::drop_tombstones(Flow& f) {
  while (f.ms_count > 0 && entry(f.head_chunk, f.head_idx).len == 0)
    pop_head(f);
}

Err NicModel::ms_post(uint32_t flow, const MsDesc& ms) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (ms.mr >= mrs_.size() || !mrs_[ms.mr].used) return count_cmd(Err::kUnknownMr);
  const Mr& m = mrs_[ms.mr];
  if (ms.len == 0) return count_cmd(Err::kBadArgument);
  if (ms.offset > m.len || ms.len > m.len - ms.offset) return count_cmd(Err::kOutOfBounds);
  // The newest entry is (tail_chunk, tail_idx - 1) until a chunk is added below.
  const bool dense =
      f->ms_count == 0 ||
      (f->msg_dense && ms.msg_seq == entry(f->tail_chunk, f->tail_idx - 1).msg_seq + 1);
  if (f->tail_chunk == kNil || f->tail_idx == cfg_.ms_chunk) {
    uint32_t c = chunk_alloc(*f);
    if (c == kNil) return count_cmd(Err::kMsFull);
    if (f->tail_chunk == kNil) {
      f->head_chunk = c;
      f->head_idx = 0;
      // An empty byte-stream list starts again at the cursor: bytes the transport accepted
      // through the copy path are behind it.
      if (f->spec.parser == Parser::kTcp) f->head_pos = f->cursor;
    } else {
      chunk_next_[f->tail_chunk] = c;
    }
    f->tail_chunk = c;
    f->tail_idx = 0;
  }
  f->msg_dense = dense;
  MsEntry& e = entry(f->tail_chunk, f->tail_idx++);
  e.mr_offset = uint64_t(ms.mr) << 48 | ms.offset;
  e.len = ms.len;
  e.msg_seq = ms.msg_seq;
  f->ms_count++;
  f->list_bytes += ms.len;
  ms_in_use_++;
  if (!is_committed(f->tail_chunk)) ms_in_store_++;
  mrs_[ms.mr].refs++;
  return count_cmd(Err::kOk);
}

Err NicModel::cursor_update(uint32_t flow, uint32_t cursor) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (f->spec.parser == Parser::kRoce) {
    if (cursor > 0xFFFFFF || int32_t((cursor - f->cursor) << 8) < 0) {
      return count_cmd(Err::kBadArgument);
    }
    // The transport accepted up to here, perhaps through the copy path: placing goes on from
    // there at the earliest.
    if (int32_t((cursor - f->expect) << 8) > 0) f->expect = cursor;
    f->cursor = cursor;
    write_ctxs_release(*f, false);  // the WRITEs the cursor passed
  } else if (f->spec.parser == Parser::kTcp && int32_t(cursor - f->cursor) < 0) {
    return count_cmd(Err::kBadArgument);
  }
  f->cursor = cursor;
  return count_cmd(Err::kOk);
}

Err NicModel::ms_retire(uint32_t flow, uint32_t count) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (count > f->ms_count) return count_cmd(Err::kNotConsumed);
  if (f->spec.parser == Parser::kTcp && f->spec.reliable) {
    // The cursor must have passed every MS retired: walk them first, change nothing on error.
    uint32_t chunk = f->head_chunk, idx = f->head_idx;
    uint32_t pos = uint32_t(f->head_pos);
    for (uint32_t i = 0; i < count; i++) {
      pos += entry(chunk, idx).len;
      if (int32_t(f->cursor - pos) < 0) return count_cmd(Err::kNotConsumed);
      if (++idx == cfg_.ms_chunk) {
        chunk = chunk_next_[chunk];
        idx = 0;
      }
    }
  }
  for (uint32_t i = 0; i < count; i++)
    pop_head(*f);
  drop_tombstones(*f);
  return count_cmd(Err::kOk);
}

Err NicModel::ms_retire_msg(uint32_t flow, uint32_t msg_seq) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (!f->spec.messages && f->spec.parser != Parser::kRoce) return count_cmd(Err::kBadArgument);
  MsEntry* e = find_message(*f, msg_seq);
  if (e == nullptr) return count_cmd(Err::kNoSuchMessage);
  mrs_[e->mr()].refs--;
  f->list_bytes -= e->len;
  e->len = 0;  // a tombstone until it reaches the head
  drop_tombstones(*f);
  return count_cmd(Err::kOk);
}

// Message numbers are posted in order, so with a dense list message m is the entry
// m - (head's number) places on: one hop per chunk, from the hint when m lies at or past it.
// Otherwise (numbers posted out of order, as Solar I/O ids may be) every entry is looked at.
NicModel::MsEntry* NicModel::find_message(Flow& f, uint32_t msg) {
  if (f.ms_count == 0) return nullptr;
  if (f.msg_dense) {
    const uint32_t k = msg - entry(f.head_chunk, f.head_idx).msg_seq;
    if (k >= f.ms_count) return nullptr;
    uint32_t chunk = f.head_chunk;
    uint32_t pos = f.head_idx + k;  // entry index counted from the head chunk's entry 0
    if (f.msg_hint_chunk != kNil) {
      const uint32_t d = msg - f.msg_hint_first;
      if (d < pos) {  // the hint's chunk holds m or lies before it (never behind the head)
        chunk = f.msg_hint_chunk;
        pos = d;
      }
    }
    for (; pos >= cfg_.ms_chunk; pos -= cfg_.ms_chunk)
      chunk = chunk_next_[chunk];
    f.msg_hint_chunk = chunk;
    f.msg_hint_first = msg - pos;
    MsEntry& e = entry(chunk, pos);
    return e.len != 0 && e.msg_seq == msg ? &e : nullptr;
  }
  uint32_t chunk = f.head_chunk, idx = f.head_idx;
  for (uint32_t i = 0; i < f.ms_count; i++) {
    MsEntry& e = entry(chunk, idx);
    if (e.len != 0 && e.msg_seq == msg) return &e;
    if (++idx == cfg_.ms_chunk) {
      chunk = chunk_next_[chunk];
      idx = 0;
    }
  }
  return nullptr;
}

Err NicModel::roce_resync(uint32_t flow, uint32_t psn, uint32_t next_msg) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (f->spec.parser != Parser::kRoce || psn > 0xFFFFFF) return count_cmd(Err::kBadArgument);
  f->next_start_psn = psn;
  f->next_start_known = true;
  f->next_msg = next_msg;
  f->send_ctx = RoceCtx{};
  f->write_ctx = RoceCtx{};
  write_ctxs_release(*f, true);
  return count_cmd(Err::kOk);
}

// ---- RoCE remote access and READ sinks ----------------------------------------------------------

bool NicModel::remote_ok(const Flow& f, uint32_t rkey, uint64_t va, uint64_t len,
                         uint8_t access) const {
  const uint32_t id = rkey & 0xFFFF;
  if (id >= mrs_.size()) return false;
  const Mr& m = mrs_[id];
  return m.used && m.tag == rkey >> 16 && m.owner == f.spec.owner &&
         (m.access & access) == access && va <= m.len && len <= m.len - va;
}

Err NicModel::rkey_check(uint32_t flow, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access,
                         uint16_t* mr_out) const {
  if (flow >= flows_.size() || !flows_[flow].used) return Err::kUnknownFlow;
  const Flow& f = flows_[flow];
  if (f.spec.parser != Parser::kRoce || access == 0 ||
      (access & ~(kMrRemoteWrite | kMrRemoteRead)) != 0) {
    return Err::kBadArgument;
  }
  if (!remote_ok(f, rkey, va, len, access)) return Err::kAccessDenied;
  if (mr_out != nullptr) *mr_out = uint16_t(rkey & 0xFFFF);
  return Err::kOk;
}

Err NicModel::read_post(uint32_t flow, uint32_t first_psn, uint16_t mr, uint64_t offset,
                        uint32_t len) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (f->spec.parser != Parser::kRoce || first_psn > kPsnMask) return count_cmd(Err::kBadArgument);
  if (mr >= mrs_.size() || !mrs_[mr].used) return count_cmd(Err::kUnknownMr);
  const Mr& m = mrs_[mr];
  if (offset > m.len || len > m.len - offset) return count_cmd(Err::kOutOfBounds);
  // The peer writes the responses: only into memory of the flow's own protection domain.
  if (m.owner != f->spec.owner) return count_cmd(Err::kAccessDenied);
  // A response must name one sink: PSN ranges stay disjoint (and within half the PSN space).
  const uint32_t n = psn_span(len, f->spec.pmtu);
  if (n > (1u << 23)) return count_cmd(Err::kBadArgument);
  uint32_t free_idx = kNil;
  if (f->read_chunk != kNil) {
    for (uint32_t i = 0; i < cfg_.ms_chunk; i++) {
      const MsEntry& e = entry(f->read_chunk, i);
      if ((e.msg_seq & kSinkLive) == 0) {
        if (free_idx == kNil) free_idx = i;
        continue;
      }
      const uint32_t b = e.msg_seq & kPsnMask;
      if (((b - first_psn) & kPsnMask) < n ||
          ((first_psn - b) & kPsnMask) < psn_span(e.len, f->spec.pmtu)) {
        return count_cmd(Err::kBadArgument);
      }
    }
    if (free_idx == kNil) return count_cmd(Err::kMsFull);
  } else {
    const uint32_t c = chunk_alloc(*f);
    if (c == kNil) return count_cmd(Err::kMsFull);
    for (uint32_t i = 0; i < cfg_.ms_chunk; i++)
      entry(c, i) = MsEntry{};
    f->read_chunk = c;
    free_idx = 0;
  }
  MsEntry& e = entry(f->read_chunk, free_idx);
  e.mr_offset = uint64_t(mr) << 48 | offset;
  e.len = len;
  e.msg_seq = kSinkLive | first_psn;
  mrs_[mr].refs++;
  ms_in_use_++;
  if (!is_committed(f->read_chunk)) ms_in_store_++;
  return count_cmd(Err::kOk);
}

Err NicModel::read_retire(uint32_t flow, uint32_t first_psn) {
  Flow* f = flow_at(flow);
  if (f == nullptr) return count_cmd(Err::kUnknownFlow);
  if (f->spec.parser != Parser::kRoce || first_psn > kPsnMask) return count_cmd(Err::kBadArgument);
  if (f->read_chunk == kNil) return count_cmd(Err::kNoSuchMessage);
  bool found = false, live = false;
  for (uint32_t i = 0; i < cfg_.ms_chunk; i++) {
    MsEntry& e = entry(f->read_chunk, i);
    if ((e.msg_seq & kSinkLive) == 0) continue;
    if (!found && e.msg_seq == (kSinkLive | first_psn)) {
      mrs_[e.mr()].refs--;
      ms_in_use_--;
      if (!is_committed(f->read_chunk)) ms_in_store_--;
      e = MsEntry{};
      found = true;
    } else {
      live = true;
    }
  }
  if (!found) return count_cmd(Err::kNoSuchMessage);
  if (!live) {
    chunk_free(*f, f->read_chunk);
    f->read_chunk = kNil;
  }
  return count_cmd(Err::kOk);
}

void NicModel::release_reads(Flow& f) {
  if (f.read_chunk == kNil) return;
  for (uint32_t i = 0; i < cfg_.ms_chunk; i++) {
    MsEntry& e = entry(f.read_chunk, i);
    if ((e.msg_seq & kSinkLive) == 0) continue;
    mrs_[e.mr()].refs--;
    ms_in_use_--;
    if (!is_committed(f.read_chunk)) ms_in_store_--;
    e = MsEntry{};
  }
  chunk_free(f, f.read_chunk);
  f.read_chunk = kNil;
}

uint32_t NicModel::read_count(uint32_t flow) const {
  if (flow >= flows_.size() || !flows_[flow].used || flows_[flow].read_chunk == kNil) return 0;
  uint32_t n = 0;
  for (uint32_t i = 0; i < cfg_.ms_chunk; i++)
    n += (ms_[size_t(flows_[flow].read_chunk) * cfg_.ms_chunk + i].msg_seq & kSinkLive) != 0;
  return n;
}

uint32_t NicModel::ms_count(uint32_t flow) const {
  return flow < flows_.size() && flows_[flow].used ? flows_[flow].ms_count : 0;
}

uint32_t NicModel::cursor(uint32_t flow) const {
  return flow < flows_.size() && flows_[flow].used ? flows_[flow].cursor : 0;
}

// ---- accounting -------------------------------------------------------------------------------

Err NicModel::rss_set(const rss::Key& key, const rss::Reta& reta) {
  for (uint16_t q : reta) {
    if (q >= cfg_.rx_queues) return count_cmd(Err::kBadArgument);
  }
  rss_key_ = key;
  reta_ = reta;
  return count_cmd(Err::kOk);
}

Err NicModel::rx_queues_set(uint16_t n) {
  if (n < 1 || n > kMaxRxQueues) return count_cmd(Err::kBadArgument);
  for (const Flow& f : flows_) {
    if (f.used && f.spec.queue >= n) return count_cmd(Err::kBadArgument);
  }
  cfg_.rx_queues = n;
  reta_ = rss::default_reta(n);
  return count_cmd(Err::kOk);
}

MemoryReport NicModel::memory_report() const {
  MemoryReport r;
  uint64_t store_entries = uint64_t(total_chunks_ - committed_chunks_) * cfg_.ms_chunk;
  uint64_t committed_entries = uint64_t(committed_chunks_) * cfg_.ms_chunk;
  r.lines[0] = {"flow_table", flows_.size(), kFlowEntryBytes, flows_in_use_};
  r.lines[1] = {"flow_hash", buckets_.size(), kHashBucketBytes, flows_in_use_};
  r.lines[2] = {"mr_table", mrs_.size(), kMrEntryBytes, mrs_in_use_};
  r.lines[3] = {"ms_committed", committed_entries, kMsEntryBytes, ms_in_use_ - ms_in_store_};
  r.lines[4] = {"ms_store", store_entries, kMsEntryBytes, ms_in_store_};
  r.lines[5] = {"ms_chunk_links", total_chunks_, kChunkLinkBytes,
                uint64_t(total_chunks_ - committed_chunks_) - store_free_count_};
  r.lines[6] = {"counters", kCounterCount, kCounterBytes, kCounterCount};
  r.lines[7] = {"roce_write_ctx", xctx_.size(), kWriteCtxBytes, xctx_.size() - xctx_free_count_};
  r.lines[8] = {"roce_write_ctx_heads", xctx_.empty() ? 0 : flows_.size(), kWriteCtxHeadBytes,
                xctx_.empty() ? 0 : flows_in_use_};
  // Steering exists only with more than one queue: a queue per flow, the RETA, the key.
  const bool steer = cfg_.rx_queues > 1;
  r.lines[9] = {"flow_queue", steer ? flows_.size() : 0, kFlowQueueBytes,
                steer ? flows_in_use_ : 0};
  r.lines[10] = {"rss_reta", steer ? rss::kRetaSize : 0, kRetaEntryBytes,
                 steer ? rss::kRetaSize : 0};
  r.lines[11] = {"rss_key", steer ? 1u : 0u, rss::kKeyBytes, steer ? 1u : 0u};
  for (const auto& l : r.lines)
    r.total_bytes += l.bytes();
  r.per_flow_bytes = kFlowEntryBytes + (buckets_.size() / flows_.size()) * kHashBucketBytes +
                     uint64_t(cfg_.ms_committed_per_flow) * kMsEntryBytes +
                     uint64_t(chunks_per_flow_) * kChunkLinkBytes +
                     (xctx_.empty() ? 0 : kWriteCtxHeadBytes) + (steer ? kFlowQueueBytes : 0);
  return r;
}

// ---- RoCE WRITE contexts beyond the flow entry's ------------------------------------------------

uint32_t NicModel::write_ctxs(uint32_t flow) const {
  return flow < flows_.size() && flows_[flow].used ? flows_[flow].xctx_count : 0;
}

NicModel::RoceCtx* NicModel::write_ctx_first(Flow& f, uint32_t psn) {
  for (uint32_t i = f.xctx_head; i != kNil; i = xctx_next_[i]) {
    if (xctx_[i].valid && xctx_[i].first_psn == psn) return &xctx_[i];
  }
  return nullptr;
}

NicModel::RoceCtx* NicModel::write_ctx_holding(Flow& f, uint32_t psn) {
  for (uint32_t i = f.xctx_head; i != kNil; i = xctx_next_[i]) {
    const RoceCtx& w = xctx_[i];
    if (w.valid && int32_t((psn - w.first_psn) << 8) > 0 && int32_t((w.end_psn - psn) << 8) >= 0) {
      return &xctx_[i];
    }
  }
  return nullptr;
}

NicModel::RoceCtx* NicModel::write_ctx_alloc(Flow& f) {
  for (uint32_t i = f.xctx_head; i != kNil; i = xctx_next_[i]) {
    if (!write_live(f, xctx_[i])) return &xctx_[i];
  }
  if (f.xctx_count + 1 >= cfg_.roce_write_ctxs || xctx_free_ == kNil) return nullptr;
  const uint32_t i = xctx_free_;
  xctx_free_ = xctx_next_[i];
  xctx_free_count_--;
  xctx_next_[i] = f.xctx_head;
  f.xctx_head = i;
  f.xctx_count++;
  xctx_[i] = RoceCtx{};
  return &xctx_[i];
}

void NicModel::write_ctxs_release(Flow& f, bool all) {
  uint32_t* link = &f.xctx_head;
  while (*link != kNil) {
    const uint32_t i = *link;
    if (!all && write_live(f, xctx_[i])) {
      link = &xctx_next_[i];
      continue;
    }
    *link = xctx_next_[i];
    xctx_[i] = RoceCtx{};
    xctx_next_[i] = xctx_free_;
    xctx_free_ = i;
    xctx_free_count_++;
    f.xctx_count--;
  }
}

}  // namespace cleave::nic
