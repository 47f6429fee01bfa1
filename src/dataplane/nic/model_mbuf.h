// model_mbuf.h - the glue between mbufs and the NIC reference model, shared by the net_cleave PMD
// and the Nic's generic backend, so both hand out and take exactly the same mbufs.
//
// RX: a received mbuf run through the model and left as rte_pmd_cleave.h says rx_burst returns
// it (placement dynamic field, checksum flags, FDIR id, trimmed to its headers unless deferred).
// TX: a descriptor mbuf (header mbuf chained to payload segments, or one plain frame) turned into
// a nic::TxRequest, its payload found in a registered MR or bounced, and merged into frames.
// Commands: the rte_pmd_cleave_* arguments and errno values over the model's.
//
// Nothing here allocates, logs, throws or locks, except MrRanges::reserve (setup). Callers own
// the model and the scratch spans and use them from one thread at a time.
#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "nic_model.h"
#include "rte_pmd_cleave.h"

namespace cleave::model_mbuf {

inline constexpr uint32_t kMaxFrame = nic::kMaxMtu + 14 + 4;  // largest frame out of the model
inline constexpr uint32_t kBounceBytes = nic::kMaxTsoBytes + nic::kMaxMtu;
inline constexpr uint32_t kMaxTxFrames = nic::kMaxTsoBytes / 64 + 1;  // TSO with a 64-byte MSS

// ---- RX ---------------------------------------------------------------------------------------

// RTE_MBUF_F_RX_IP_CKSUM_* / _L4_CKSUM_* from the model's checks.
uint64_t rx_csum_flags(const nic::RxEntry& e);
// The placement dynamic field (at `offset`), checksum flags and FDIR id of `m` from `e`.
void fill_placement(rte_mbuf* m, const nic::RxEntry& e, int offset);
// Cuts the mbuf to its first `len` bytes (the headers); later segments are freed.
void keep_head(rte_mbuf* m, uint32_t len);
// One received frame through the model: a chained frame is copied flat into `flat` first (the
// model parses flat frames), then placed; the mbuf is left as rx_burst returns it. `e` is
// scratch (the model fills it). Returns true when the frame had to be linearized.
bool rx_frame(nic::NicModel& model, rte_mbuf* m, std::span<uint8_t> flat, nic::RxEntry& e,
              int offset);

// ---- TX ---------------------------------------------------------------------------------------

// The model's TxFlags asked by an mbuf's ol_flags (`icrc_mask`: RTE_PMD_CLEAVE_TX_ICRC_DYNFLAG,
// `crc32c_mask`: RTE_PMD_CLEAVE_TX_CRC32C_DYNFLAG).
uint8_t tx_flags(uint64_t ol_flags, uint64_t icrc_mask, uint64_t crc32c_mask);
// Length of Ethernet + IPv4 + TCP/UDP headers of a flat frame, with the UDP payload's own header
// the TxFlags `flags` imply (the 12-byte BTH for the ICRC, the 32-byte Solar header for the
// CRC32C), or 0 if it is not one.
uint32_t header_length(const uint8_t* f, uint32_t len, uint8_t flags);
// The request for descriptor `m`: header (the header mbuf of a chain; the parsed headers of a
// single-segment frame), payload length, MSS and `flags`. The payload reference (mr, offset) is
// tx_payload's. False when a single-segment frame has no headers the NIC can parse.
bool tx_request(const rte_mbuf* m, uint8_t flags, nic::TxRequest& req);

// Registered MRs sorted by base, to find the MR that holds a TX payload by its address.
struct MrRange {
  uintptr_t base = 0;
  uint64_t len = 0;
  uint16_t id = 0;
};
class MrRanges {
 public:
  void reserve(size_t n) { r_.reserve(n); }  // setup: insert() then never allocates
  void insert(uintptr_t base, uint64_t len, uint16_t id);
  void erase(uint16_t id);
  // The MR holding [p, p+len); false if none does.
  bool find(uintptr_t p, uint32_t len, uint16_t* mr, uint64_t* off) const;

 private:
  std::vector<MrRange> r_;
};

// True when the segments after the header lie back to back in memory (one extbuf, or a
// payload over 64 KB - 1 split into extbufs over one buffer).
bool payload_contiguous(const rte_mbuf* m);
// Copies `len` bytes of `m` from `from` into `buf`; false if they do not fit.
bool bounce(const rte_mbuf* m, uint32_t from, uint32_t len, std::span<uint8_t> buf);

enum class Payload : uint8_t {
  kNone,      // header only
  kZeroCopy,  // read from the registered MR that holds it
  kBounced,   // copied into the bounce buffer (MR `bounce_mr`) first
  kFailed,    // too large to bounce
};
// Fills req.mr / req.offset for the payload of `m` after its `hlen` header bytes.
Payload tx_payload(const rte_mbuf* m, uint32_t hlen, const MrRanges& mrs,
                   std::span<uint8_t> bounce_buf, uint16_t bounce_mr, nic::TxRequest& req);

// Buffers for one merge: up to kMaxTxFrames frame mbufs and their spans and lengths. Sized at
// setup (resize()), reused for every request.
struct FrameScratch {
  std::vector<rte_mbuf*> bufs;
  std::vector<std::span<uint8_t>> spans;
  std::vector<uint32_t> lens;
  std::array<nic::TxCompletion, 64> txc{};
  void resize(size_t n) {
    bufs.resize(n);
    spans.resize(n);
    lens.resize(n);
  }
};
// Empties the model's completion ring (the mbuf's release is the completion the app sees).
void poll_completions(nic::NicModel& model, FrameScratch& s);
// Merges `req` into nic::NicModel::tx_frames(req) frames from `pool` (each `room` data bytes).
// False when the pool is out of mbufs: nothing was consumed, try again later. Otherwise
// *status is the model's verdict and on kOk s.bufs[0, *got) hold the frames, lengths set, now
// the caller's; the rest went back to the pool.
bool merge(nic::NicModel& model, const nic::TxRequest& req, rte_mempool* pool, uint32_t room,
           FrameScratch& s, nic::TxStatus* status, uint16_t* got);

// ---- commands ---------------------------------------------------------------------------------

// The errno rte_pmd_cleave.h gives each model error (0 for kOk).
int to_errno(nic::Err e);
// The model's flow spec for an rte_pmd_cleave_flow; false for an invalid one (-EINVAL).
bool flow_spec(const rte_pmd_cleave_flow* flow, nic::FlowSpec& s);

}  // namespace cleave::model_mbuf
