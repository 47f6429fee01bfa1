// nic_model.h - the header-split NIC's reference model: tables, RX placement, TX merge, commands.
//
// The single source of truth for NIC behaviour: the net_cleave PMD runs it as its device and the
// RTL testbenches compare against it. Plain C++20, standard library only.
//
// Ownership and threads: one NicModel is used by one thread at a time (the PMD's service lcore);
// commands and RX/TX may interleave on that thread and nothing locks. All tables are allocated
// in the constructor; rx(), tx() and the commands never allocate, throw or read or write outside
// the spans and memory regions they are given.
//
// Memory: the owner registers each memory region (MR) with a base pointer and a length
// (mr_add). The model reaches app memory only through dma_write()/dma_read(), which check every
// access against the MR as an IOMMU would; a failed check is counted, never performed.
//
// Receive queues (rx_queues > 1): every received frame is steered to one queue, reported in
// RxEntry::queue and counted per queue. A frame of a programmed flow goes to the queue its FlowSpec
// names (a RoCE QP is a flow, so RoCE is steered by its BTH DestQP, and Solar by the connection
// number in its header); other TCP and UDP by the Toeplitz hash of its IPv4 4-tuple through the
// RETA (src/common/rss.h: the default key, entries round-robin over the queues, both set by
// rss_set()); everything else (ARP, ICMP, fragments, frames the NIC cannot parse, RoCE to a QP
// and Solar to a connection no flow has) to queue 0. steer() answers the same without receiving
// the frame. One queue: every frame to queue 0, as before queues existed.
//
// Sequence spaces: TCP positions are 32-bit sequence numbers compared modulo 2^32; RoCEv2 PSNs
// are 24-bit and compared modulo 2^24; Solar places by the 64-bit byte offset in its header.
// The cursor is the first byte (TCP) or PSN (RoCEv2) the transport has not yet accepted.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/rss.h"
#include "nic_model_defs.h"  // enums, flags, constants: generated from hw/fpga/spec

namespace cleave::nic {

// ---- configuration and sizes ----------------------------------------------------------------

// On-NIC entry sizes assumed for memory accounting (the formats are in hw/fpga/docs).
inline constexpr size_t kFlowEntryBytes = 96;  // key, cursor, MS list, RoCE contexts (docs)
inline constexpr size_t kHashBucketBytes = 4;  // flow id of the chain head
inline constexpr size_t kMrEntryBytes = 20;    // 48-bit base, 40-bit length, owner, tag, flags
inline constexpr size_t kMsEntryBytes = 16;    // 48-bit offset, MR id, length, message seq
inline constexpr size_t kChunkLinkBytes = 4;   // next-chunk index per MS chunk
inline constexpr size_t kCounterBytes = 8;
// RoCE WRITE contexts beyond the flow entry's: a pool entry (PSNs, R_Key, VA, length, flags,
// link) and the list head and count each flow has when there is a pool (docs).
inline constexpr size_t kWriteCtxBytes = 32;
inline constexpr size_t kWriteCtxHeadBytes = 4;
inline constexpr uint32_t kMaxWriteCtxs = 64;  // roce_write_ctxs is clamped to this
// Receive steering (rx_queues > 1): a flow's queue (4 bits used), a RETA entry (4 bits used).
inline constexpr size_t kFlowQueueBytes = 1;
inline constexpr size_t kRetaEntryBytes = 1;
inline constexpr uint16_t kMaxRxQueues = rss::kMaxQueues;

struct NicConfig {
  uint32_t max_flows = 16384;
  uint32_t max_mrs = 4096;
  // MS lists: a committed allocation per flow plus a shared store drawn on demand. The defaults
  // keep 10K zero-copy flows within 8 MB of NIC memory, store included (hw/fpga/docs/formats.md
  // section 3): 32 entries cover a 2 MB window of 64 KB receive buffers per flow, and one flow
  // can still grow by 64K entries from the store.
  uint32_t ms_committed_per_flow = 32;   // entries each flow owns; a multiple of ms_chunk
  uint32_t ms_store_entries = 1u << 16;  // shared backing store
  uint32_t ms_chunk = 16;                // entries per chunk (allocation unit)
  uint32_t tx_completions = 4096;        // completion ring entries
  // RoCE selective repeat: WRITEs one flow keeps a placement context for at once, so that the
  // packets of any of them past a gap are placed, not deferred. The first context lives in the
  // flow entry; the others are drawn from a pool of roce_write_ctx_pool entries shared by all
  // flows, returned once the cursor passes their WRITE. 1: the flow entry's only (the RTL's
  // geometry; no pool). The defaults keep 10K flows within 8 MB (hw/fpga/docs/formats.md
  // section 3): 16 cover a window of 1024 PSNs of 64 KB WRITEs at PMTU 1024.
  uint32_t roce_write_ctxs = 16;
  uint32_t roce_write_ctx_pool = 8192;
  uint16_t rx_queues = 1;          // receive queues frames are steered to (1..kMaxRxQueues)
  bool verify_l4_checksum = true;  // TCP/UDP checksum, ICRC, CRC32C before placing
  bool dma_payload = true;         // false: decide and account, skip the payload copy (benchmarks)
};

// ---- enums ----------------------------------------------------------------------------------
// Err, FlowMode, Parser, Decision, DeferReason, CsumStatus, TxStatus, Ctr, TxFlags, MrAccess,
// kMaxFrags and the other limits, kNoFlow and kCounterCount come from nic_model_defs.h, which
// the build generates from hw/fpga/spec/nic_spec.py (the RTL and the PMD share that source).
// MrAccess is the access beyond the local access every MR allows (mr_add); a remote peer names
// an MR by its rkey = tag << 16 | MR id.

std::string_view err_name(Err e);
std::string_view decision_name(Decision d);
std::string_view defer_reason_name(DeferReason r);
std::string_view tx_status_name(TxStatus s);

// ---- commands and records ---------------------------------------------------------------------

// 5-tuple as the packet carries it: src = the remote peer. Host byte order. For UDP parsers a
// src_port of 0 matches any source port (RoCEv2 and Solar vary it per path). RoCE and Solar
// flows are found by (src_ip, dst_ip, FlowSpec::qpn) instead: their ports are implied (UDP dst
// kRocePort or kSolarPort, any source port), as a RoCE NIC finds the QP by the BTH DestQP and a
// Solar receiver its connection by the header's connection number (UDP payload bytes 4..7).
struct FlowKey {
  uint32_t src_ip = 0;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint8_t proto = 0;  // 6 TCP, 17 UDP
  bool operator==(const FlowKey&) const = default;
};

struct FlowSpec {
  FlowKey key;
  FlowMode mode = FlowMode::kZeroCopy;
  Parser parser = Parser::kTcp;
  bool reliable = true;         // placement by sequence/offset against the cursor; else next MS
  bool messages = false;        // a message sequence number selects the MS (Solar io id; RoCE SEND)
  uint32_t initial_seq = 0;     // TCP: first payload byte expected; RoCE: first PSN expected
                                // (Solar places by offset: its cursor starts at 0)
  uint32_t pmtu = 4096;         // RoCE: payload bytes per first/middle packet
  uint64_t initial_offset = 0;  // Solar without messages: stream offset of the first MS
  // RoCE: the local QP number, the BTH DestQP it receives; Solar: the local connection number,
  // the header's connection id it receives. Both below 2^24 (the NIC's key holds 24 bits).
  uint32_t qpn = 0;
  uint32_t owner = 0;  // RoCE: protection domain; remote access only to MRs of this owner
  // RoCE: the QP recovers by selective repeat, so a request past the expected PSN may be placed
  // (when its place is certain). False, go-back-N (IBTA's RC): only the request at the PSN the
  // NIC expects next is placed; any other is deferred unwritten (out_of_sequence).
  bool selective_repeat = false;
  uint16_t queue = 0;  // the receive queue its frames reach (below NicConfig::rx_queues)
};

struct MsDesc {
  uint16_t mr = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
  uint32_t msg_seq = 0;  // message semantics: the message this MS receives
};

struct Placement {
  uint16_t mr = 0;
  uint64_t offset = 0;
  uint32_t len = 0;
};

// What the NIC delivers to the driver for every received frame.
struct RxEntry {
  uint32_t flow_id = 0;  // kNoFlow on a miss
  Decision decision = Decision::kDeferred;
  DeferReason reason = DeferReason::kNone;
  Parser parser = Parser::kTcp;
  uint8_t nfrags = 0;
  bool out_of_order = false;  // placed past a hole (d)
  CsumStatus ip_csum = CsumStatus::kNotChecked;
  CsumStatus l4_csum = CsumStatus::kNotChecked;  // TCP/UDP checksum, ICRC or Solar CRC32C
  uint16_t header_len = 0;   // bytes copied into header[] (frame start up to the payload)
  uint32_t seq = 0;          // TCP seq, RoCE PSN or Solar tx seq of the frame
  uint32_t payload_len = 0;  // payload bytes in the frame (no pad or ICRC)
  uint32_t trimmed = 0;      // bytes cut before the cursor
  uint32_t placed = 0;       // bytes written
  uint32_t msg_seq = 0;      // message of the MS written (message semantics)
  uint16_t queue = 0;        // the receive queue the frame was steered to
  std::array<Placement, kMaxFrags> frags{};
  std::array<uint8_t, kMaxHeaderBytes> header{};
};

struct TxRequest {
  std::span<const uint8_t> header;  // Ethernet/IPv4/L4(/BTH/...) as the transport built it
  uint16_t mr = 0;                  // payload reference (len 0: header only)
  uint64_t offset = 0;
  uint32_t len = 0;
  uint16_t mss = 0;  // TSO: payload bytes per frame
  uint8_t flags = 0;
  uint64_t cookie = 0;  // echoed in the completion
};

struct TxFrame {
  uint32_t offset = 0;  // into the output buffer
  uint32_t len = 0;
};

struct TxCompletion {
  uint64_t cookie = 0;
  TxStatus status = TxStatus::kOk;
  uint16_t frames = 0;
  uint32_t bytes = 0;
};

// ---- counters -------------------------------------------------------------------------------

struct MemoryLine {
  std::string_view name;
  uint64_t entries = 0;      // capacity
  uint64_t entry_bytes = 0;  // on-NIC size per entry
  uint64_t in_use = 0;       // entries in use now
  uint64_t bytes() const { return entries * entry_bytes; }
};

struct MemoryReport {
  std::array<MemoryLine, 12> lines{};
  uint64_t total_bytes = 0;
  uint64_t per_flow_bytes = 0;  // flow entry + hash share + committed MS entries and links
};

// ---- the model --------------------------------------------------------------------------------

class NicModel {
 public:
  explicit NicModel(const NicConfig& cfg = {});
  NicModel(const NicModel&) = delete;
  NicModel& operator=(const NicModel&) = delete;

  const NicConfig& config() const { return cfg_; }

  // Driver commands. Each returns kOk or an error, and counts it; none crashes on bad input.
  // Tables are indexed by the id the driver chooses: an id beyond the capacity is "table full".
  // `access`: MrAccess bits (0: local only); `tag`: the rkey's upper 16 bits, chosen by the
  // driver so a stale or guessed rkey misses.
  Err mr_add(uint16_t id, uint8_t* base, uint64_t len, uint32_t owner, uint8_t access = 0,
             uint16_t tag = 0);
  Err mr_remove(uint16_t id);  // kMrInUse while posted MSs refer to it
  Err flow_add(uint32_t id, const FlowSpec& spec);
  Err flow_remove(uint32_t id);  // drops its MSs
  Err flow_set_mode(uint32_t id, FlowMode mode);
  // Appends an MS to the flow's list. Byte streams: it continues where the previous MS ends;
  // on an empty TCP list it begins at the cursor (post the unfilled rest of a buffer whose
  // first bytes came through the copy path). Message flows: MsDesc::msg_seq names the message.
  Err ms_post(uint32_t flow, const MsDesc& ms);
  // TCP: the byte the transport expects next; RoCE: its ePSN. Never moves backwards.
  Err cursor_update(uint32_t flow, uint32_t cursor);
  // Retires the `count` oldest MSs. Byte-stream flows: only MSs wholly before the cursor.
  Err ms_retire(uint32_t flow, uint32_t count);
  // Message flows: retires the MS of message msg_seq wherever it is in the list (short messages
  // retire their MS unfilled; Solar I/Os may finish out of order).
  Err ms_retire_msg(uint32_t flow, uint32_t msg_seq);
  // RoCE: a message starts at `psn` and the next SEND is message `next_msg`. For a transport
  // that accepted messages through the copy path, so the NIC saw no end it could chain from.
  Err roce_resync(uint32_t flow, uint32_t psn, uint32_t next_msg);
  // RoCE requester: READ responses for the READ whose request had PSN `first_psn` go to
  // [offset, offset + len) of MR `mr` (of the flow's owner). They use PSNs first_psn ..
  // first_psn + max(1, ceil(len / pmtu)) - 1, which must not overlap another posted READ's.
  // Up to ms_chunk READs per flow (16 by default: max_rd_atomic); they hold one MS chunk.
  Err read_post(uint32_t flow, uint32_t first_psn, uint16_t mr, uint64_t offset, uint32_t len);
  // The READ completed or was abandoned: its responses are deferred from now on.
  Err read_retire(uint32_t flow, uint32_t first_psn);
  // RoCE responder: may the peer of `flow` access [va, va + len) of the MR named by `rkey` with
  // `access` (MrAccess bits)? The rule WRITE placement keeps: the tag matches, the MR's owner is
  // the flow's, the flags allow it, the range lies inside the MR. kOk (and the MR id in
  // *mr_out when not null), kAccessDenied, kUnknownFlow, or kBadArgument (not a RoCE flow, no
  // access asked). A query: not counted.
  Err rkey_check(uint32_t flow, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access,
                 uint16_t* mr_out) const;

  // Receive steering (see the top): the key and RETA a NIC driver programs (kBadArgument for an
  // entry naming a queue beyond rx_queues), and the queue a frame would reach, without receiving
  // it (no counter moves).
  Err rss_set(const rss::Key& key, const rss::Reta& reta);
  // The driver configures `n` queues (1..kMaxRxQueues; kBadArgument while a flow names a queue
  // beyond them): the RETA spreads over them again, the key stays.
  Err rx_queues_set(uint16_t n);
  const rss::Key& rss_key() const { return rss_key_; }
  const rss::Reta& reta() const { return reta_; }
  uint16_t steer(std::span<const uint8_t> frame) const;

  // Receive: parse, classify, place. Always fills `out`; never reads outside `frame`.
  Decision rx(std::span<const uint8_t> frame, RxEntry& out);
  // A burst: one entry per frame. Returns the number processed (min of both sizes).
  size_t rx_burst(std::span<const std::span<const uint8_t>> frames, std::span<RxEntry> out);

  // Transmit: merge header and payload into frames written back to back into `out`; on kOk
  // *nframes frames are described in `frames`. Posts a completion unless kCompletionsFull.
  TxStatus tx(const TxRequest& req, std::span<uint8_t> out, std::span<TxFrame> frames,
              uint16_t* nframes);
  // The same with one buffer per frame (a PMD passes one mbuf data area each): frame i goes to
  // bufs[i], its length to lens[i]. tx_frames() says how many buffers to offer and
  // tx_frame_room() how large each must be.
  TxStatus tx(const TxRequest& req, std::span<const std::span<uint8_t>> bufs,
              std::span<uint32_t> lens, uint16_t* nframes);
  static uint32_t tx_frames(const TxRequest& req);
  static uint32_t tx_frame_room(const TxRequest& req);
  size_t tx_poll(std::span<TxCompletion> out);

  // Bounds-checked access to app memory, as the DMA engine would do it.
  bool dma_write(uint16_t mr, uint64_t offset, const uint8_t* src, uint32_t len);
  bool dma_read(uint16_t mr, uint64_t offset, uint8_t* dst, uint32_t len) const;

  // Introspection for drivers and tests.
  uint64_t counter(Ctr c) const { return ctr_[size_t(c)]; }
  // Frames steered to queue q (counted by rx(), beside the counters the RTL shares).
  uint64_t queue_frames(uint16_t q) const { return q < kMaxRxQueues ? queue_ctr_[q] : 0; }
  uint64_t defer_count(DeferReason r) const { return ctr_[size_t(Ctr::kCount) + size_t(r)]; }
  uint64_t cmd_error_count(Err e) const {
    return ctr_[size_t(Ctr::kCount) + size_t(DeferReason::kCount) + size_t(e)];
  }
  uint64_t tx_status_count(TxStatus s) const {
    return ctr_[size_t(Ctr::kCount) + size_t(DeferReason::kCount) + size_t(Err::kCount) +
                size_t(s)];
  }
  // Every counter with a stable name ("rx_in_order", "defer_no_ms", "cmd_err_unknown_flow"...).
  template <typename F>
  void for_each_counter(F&& f) const {
    for (size_t i = 0; i < kCounterCount; i++)
      f(counter_name(i), ctr_[i]);
  }
  static std::string_view counter_name(size_t index);

  MemoryReport memory_report() const;
  uint32_t ms_count(uint32_t flow) const;
  uint32_t cursor(uint32_t flow) const;
  uint32_t read_count(uint32_t flow) const;  // READ sinks posted on the flow
  uint32_t flows_in_use() const { return flows_in_use_; }
  uint32_t store_chunks_free() const { return store_free_count_; }
  uint32_t write_ctxs(uint32_t flow) const;  // WRITE contexts the flow holds from the pool
  uint32_t write_ctx_pool_free() const { return xctx_free_count_; }

 private:
  static constexpr uint32_t kNil = 0xFFFFFFFFu;

  // On-NIC MS entry: exactly the 16 bytes the memory report assumes.
  struct MsEntry {
    uint64_t mr_offset = 0;  // MR id in bits 63..48, offset in bits 47..0
    uint32_t len = 0;        // 0: retired out of order (a tombstone)
    uint32_t msg_seq = 0;
    uint16_t mr() const { return uint16_t(mr_offset >> 48); }
    uint64_t offset() const { return mr_offset & ((uint64_t(1) << 48) - 1); }
  };
  static_assert(sizeof(MsEntry) == kMsEntryBytes);

  struct Mr {
    uint8_t* base = nullptr;
    uint64_t len = 0;
    uint32_t owner = 0;
    uint32_t refs = 0;  // posted MSs and READ sinks that point into it
    uint16_t tag = 0;
    uint8_t access = 0;
    bool used = false;
  };

  // A READ sink is an MS entry in the flow's READ chunk: msg_seq = kSinkLive | first PSN.
  static constexpr uint32_t kSinkLive = 1u << 31;
  // The match number of flows found by their 5-tuple (neither RoCE nor Solar).
  static constexpr uint32_t kNoQp = 0xFFFFFFFFu;

  // RoCE message context: the SEND (or WRITE) whose packets are arriving. A packet belongs to
  // it only when that is certain: a WRITE's extent is known from its RETH; a SEND's only once
  // its last packet arrived, and until then only the next PSN in order can extend it.
  // `chained`: the message began where the previous one was known to end, so its end tells
  // where the next message begins (a SEND may only start there: that keeps message numbers
  // right). Cleared once its end has been passed on. roce_resync() restarts the chain.
  struct RoceCtx {
    bool valid = false;
    bool chained = false;
    bool end_known = false;
    uint32_t first_psn = 0;
    uint32_t next_psn = 0;  // SEND: one past the packets seen in order from first_psn
    uint32_t end_psn = 0;   // the message's last PSN, when end_known
    uint16_t mr = 0;        // WRITE: the MR named by R_Key
    uint16_t tag = 0;       // WRITE: the R_Key's tag, checked again on every packet
    uint64_t base = 0;      // WRITE: the VA as an offset in that MR
    uint64_t limit = 0;     // WRITE: DMA length from RETH
    uint32_t msg = 0;       // SEND: message (MS) number
  };

  struct Flow {
    FlowSpec spec;
    bool used = false;
    uint32_t hash_next = kNil;
    uint32_t cursor = 0;
    uint64_t head_pos = 0;  // stream position of the oldest MS's first byte
    // MS list: chunks linked head to tail; entries [head_idx, tail_idx) of the chain.
    uint32_t head_chunk = kNil;
    uint32_t tail_chunk = kNil;
    uint32_t head_idx = 0;
    uint32_t tail_idx = 0;
    uint32_t ms_count = 0;         // entries in the list, tombstones included
    uint64_t list_bytes = 0;       // bytes of the live entries
    uint32_t private_free = kNil;  // the flow's committed chunks not in its list
    // Where the last byte-stream placement ended: MS (chunk, idx), `hint_dist` bytes from the
    // oldest MS's first byte. Forgotten when that MS retires.
    uint32_t hint_chunk = kNil;
    uint32_t hint_idx = 0;
    uint64_t hint_dist = 0;
    // Message flows: while `msg_dense`, the list's entries (tombstones included) carry
    // consecutive message numbers from the head's on, so message m is entry m - head's number:
    // found by hopping chunks, from `msg_hint_chunk` (whose entry 0 is message msg_hint_first)
    // when m lies at or beyond it. Cleared by a post out of order; set again by an empty list.
    // On the NIC: a flag bit and the 7 spare bytes of the flow entry (chunk 3 B, number 4 B).
    bool msg_dense = true;
    uint32_t msg_hint_chunk = kNil;
    uint32_t msg_hint_first = 0;
    // RoCE
    RoceCtx send_ctx;
    RoceCtx write_ctx;
    // Selective repeat: more WRITE contexts, from the pool (never chained): a list of
    // xctx_count entries linked from xctx_head.
    uint32_t xctx_head = kNil;
    uint32_t xctx_count = 0;
    // Go-back-N: the PSN of the next request the NIC may place, never behind the cursor. It
    // passes each request the NIC placed in order (or that had nothing to place), so a burst
    // is placed before the transport moves the cursor; a request the NIC deferred holds it
    // until the cursor passes (the transport took it through the copy path).
    uint32_t expect = 0;
    bool next_start_known = true;
    uint32_t next_start_psn = 0;  // where the next message begins, once its predecessor ended
    uint32_t next_msg = 0;        // message number of the next SEND
    uint32_t read_chunk = kNil;   // the MS chunk holding the posted READ sinks
  };

  struct ParsedFrame;
  struct TxDst;

  // Tables.
  Flow* flow_at(uint32_t id);
  // Flows are hashed by key and number: a RoCE flow's QPN or a Solar flow's connection number
  // (its key's src_port 0), kNoQp for others.
  static uint32_t match_qpn(const FlowSpec& s) {
    return s.parser == Parser::kRoce || s.parser == Parser::kSolar ? s.qpn : kNoQp;
  }
  uint32_t bucket_of(const FlowKey& k, uint32_t qpn) const;
  uint32_t lookup(const FlowKey& k, uint32_t qpn) const;
  bool remote_ok(const Flow& f, uint32_t rkey, uint64_t va, uint64_t len, uint8_t access) const;
  void release_reads(Flow& f);
  void hash_unlink(uint32_t id);
  uint32_t chunk_alloc(Flow& f);
  void chunk_free(Flow& f, uint32_t chunk);
  MsEntry& entry(uint32_t chunk, uint32_t idx) { return ms_[size_t(chunk) * cfg_.ms_chunk + idx]; }
  void pop_head(Flow& f);
  void drop_tombstones(Flow& f);
  // The live MS of message `msg`, or null (none posted, or retired).
  MsEntry* find_message(Flow& f, uint32_t msg);
  bool is_committed(uint32_t chunk) const { return chunk < committed_chunks_; }
  // RoCE: the PSNs a message of `len` bytes takes (a READ's responses, a WRITE's packets).
  static uint32_t psn_span(uint32_t len, uint32_t pmtu) {
    return len == 0 ? 1 : uint32_t((uint64_t(len) + pmtu - 1) / pmtu);
  }
  Err count_cmd(Err e);
  // Selective repeat's WRITE contexts beyond the flow entry's (roce_write_ctxs > 1).
  RoceCtx* write_ctx_first(Flow& f, uint32_t psn);    // the one whose WRITE begins at psn
  RoceCtx* write_ctx_holding(Flow& f, uint32_t psn);  // one a non-first packet at psn is in
  RoceCtx* write_ctx_alloc(Flow& f);           // a dead one of the flow's, or a new one; null: none
  void write_ctxs_release(Flow& f, bool all);  // returns the dead ones (all: every one)
  bool write_live(const Flow& f, const RoceCtx& w) const {
    return w.valid && int32_t((w.end_psn - f.cursor) << 8) >= 0;
  }

  // RX stages.
  bool parse(std::span<const uint8_t> frame, ParsedFrame& p, RxEntry& out);
  Decision place_stream(Flow& f, const ParsedFrame& p, uint64_t dist, uint32_t len, RxEntry& out);
  Decision place_message(Flow& f, const ParsedFrame& p, uint32_t msg, uint64_t at, uint32_t len,
                         RxEntry& out);
  Decision place_unreliable(Flow& f, const ParsedFrame& p, RxEntry& out);
  uint32_t find_flow(const FlowKey& key, const uint8_t* payload, uint32_t payload_len) const;
  uint16_t queue_of(const FlowKey& key, uint32_t id) const;
  Decision rx_tcp(Flow& f, const ParsedFrame& p, RxEntry& out);
  Decision rx_roce(Flow& f, const ParsedFrame& p, RxEntry& out);
  Decision roce_request(Flow& f, const ParsedFrame& p, const ParsedFrame& q, uint8_t opcode,
                        bool first, bool last, uint32_t len, RxEntry& out);
  Decision place_read(Flow& f, const ParsedFrame& p, bool first, bool last, RxEntry& out);
  Decision rx_solar(Flow& f, const ParsedFrame& p, RxEntry& out);
  Decision write_frags(const ParsedFrame& p, uint32_t skip, RxEntry& out);
  Decision defer(RxEntry& out, DeferReason r);
  Decision finish(RxEntry& out, Decision d);

  TxStatus tx_impl(const TxRequest& req, const TxDst& dst, uint16_t* nframes);

  void bump(Ctr c, uint64_t n = 1) { ctr_[size_t(c)] += n; }

  NicConfig cfg_;
  uint32_t chunks_per_flow_ = 0;
  uint32_t committed_chunks_ = 0;  // chunk ids below this are committed (per flow)
  uint32_t total_chunks_ = 0;
  uint32_t store_free_ = kNil;  // shared free list
  uint32_t store_free_count_ = 0;
  uint32_t flows_in_use_ = 0;
  uint32_t mrs_in_use_ = 0;
  uint64_t ms_in_use_ = 0;
  uint64_t ms_in_store_ = 0;  // of those, entries in shared-store chunks
  uint32_t hash_mask_ = 0;
  std::vector<Flow> flows_;
  std::vector<uint32_t> buckets_;
  std::vector<Mr> mrs_;
  std::vector<MsEntry> ms_;           // committed chunks first, then the shared store
  std::vector<uint32_t> chunk_next_;  // per chunk
  std::vector<TxCompletion> txc_;
  std::vector<RoceCtx> xctx_;        // the WRITE context pool
  std::vector<uint32_t> xctx_next_;  // per pool entry: the next of its flow's, or free list
  uint32_t xctx_free_ = kNil;
  uint32_t xctx_free_count_ = 0;
  size_t txc_head_ = 0;
  size_t txc_count_ = 0;
  std::array<uint64_t, kCounterCount> ctr_{};
  std::array<uint64_t, kMaxRxQueues> queue_ctr_{};
  rss::Key rss_key_ = rss::kDefaultKey;
  rss::Reta reta_{};
};

}  // namespace cleave::nic
