// nic_model_tx.cc - the model's send path: header + MS reference merged into frames, TSO,
// IPv4/TCP/UDP checksum offload, RoCEv2 pad and ICRC, the Solar block CRC32C, TX completions.
#include <algorithm>
#include <cstring>

#include "common/wire.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

constexpr size_t kEthLen = 14;
constexpr size_t kBthLen = 12;
constexpr size_t kSolarLen = 32;
constexpr size_t kSolarCrcAt = 28;  // the block's CRC32C in the Solar header
constexpr uint8_t kTcpFin = 0x01, kTcpPsh = 0x08, kTcpCwr = 0x80;

uint32_t rocev2_tail(const TxRequest& req) {
  // Pad and ICRC appended after the payload; the BTH sits right after the UDP header.
  if ((req.flags & kTxIcrc) == 0) return 0;
  size_t at =
      kEthLen + (req.header.size() > kEthLen ? size_t(req.header[kEthLen] & 0xF) * 4 : 0) + 8 + 1;
  return (at < req.header.size() ? (req.header[at] >> 4) & 3 : 0) + 4;
}

}  // namespace

// Where frames go: one flat buffer (frames[i] = offset, length) or one buffer per frame.
struct NicModel::TxDst {
  std::span<uint8_t> flat;
  std::span<TxFrame> frames;
  std::span<const std::span<uint8_t>> bufs;
  std::span<uint32_t> lens;
  bool per_frame = false;
};

uint32_t NicModel::tx_frames(const TxRequest& req) {
  if ((req.flags & kTxTso) == 0 || req.mss == 0) return 1;
  return std::max<uint32_t>(1, uint32_t((uint64_t(req.len) + req.mss - 1) / req.mss));
}

uint32_t NicModel::tx_frame_room(const TxRequest& req) {
  uint32_t seg =
      (req.flags & kTxTso) != 0 && req.mss != 0 ? std::min<uint32_t>(req.mss, req.len) : req.len;
  return uint32_t(req.header.size()) + seg + rocev2_tail(req);
}

TxStatus NicModel::tx(const TxRequest& req, std::span<uint8_t> out, std::span<TxFrame> frames,
                      uint16_t* nframes) {
  TxDst d;
  d.flat = out;
  d.frames = frames;
  return tx_impl(req, d, nframes);
}

TxStatus NicModel::tx(const TxRequest& req, std::span<const std::span<uint8_t>> bufs,
                      std::span<uint32_t> lens, uint16_t* nframes) {
  TxDst d;
  d.bufs = bufs;
  d.lens = lens;
  d.per_frame = true;
  return tx_impl(req, d, nframes);
}

TxStatus NicModel::tx_impl(const TxRequest& req, const TxDst& dst, uint16_t* nframes) {
  bump(Ctr::kTxRequests);
  if (nframes != nullptr) *nframes = 0;
  auto done = [&](TxStatus s, uint16_t n, uint32_t bytes) {
    ctr_[size_t(Ctr::kCount) + size_t(DeferReason::kCount) + size_t(Err::kCount) + size_t(s)]++;
    if (s == TxStatus::kCompletionsFull) return s;
    if (s != TxStatus::kOk) bump(Ctr::kTxErrors);
    txc_[(txc_head_ + txc_count_) % txc_.size()] = TxCompletion{req.cookie, s, n, bytes};
    txc_count_++;
    return s;
  };
  if (txc_count_ == txc_.size()) {
    bump(Ctr::kTxErrors);
    return done(TxStatus::kCompletionsFull, 0, 0);
  }

  // The header: Ethernet, IPv4 and a whole TCP or UDP header (plus the BTH for ICRC).
  const uint8_t* h = req.header.data();
  const size_t hlen = req.header.size();
  if (hlen < kEthLen + 20 || wire::load16(h + 12) != 0x0800 || (h[kEthLen] >> 4) != 4 ||
      (h[kEthLen] & 0xF) < 5) {
    return done(TxStatus::kBadHeader, 0, 0);
  }
  const size_t ip_hlen = size_t(h[kEthLen] & 0xF) * 4;
  const size_t l4 = kEthLen + ip_hlen;
  const uint8_t proto = h[kEthLen + 9];
  const bool tso = (req.flags & kTxTso) != 0;
  const bool icrc = (req.flags & kTxIcrc) != 0;
  const bool ip_csum = tso || (req.flags & kTxIpCsum) != 0;
  const bool l4_csum = tso || (req.flags & kTxL4Csum) != 0;
  if (proto == 6) {
    if (hlen < l4 + 20 || hlen != l4 + size_t(h[l4 + 12] >> 4) * 4 || (h[l4 + 12] >> 4) < 5) {
      return done(TxStatus::kBadHeader, 0, 0);
    }
  } else if (proto == 17) {
    if (hlen < l4 + 8) return done(TxStatus::kBadHeader, 0, 0);
  } else if (tso || l4_csum) {
    return done(TxStatus::kBadHeader, 0, 0);
  }
  if ((tso && (proto != 6 || req.mss == 0)) || (icrc && (proto != 17 || hlen < l4 + 8 + kBthLen))) {
    return done(TxStatus::kBadHeader, 0, 0);
  }
  // Solar: the template is exactly Ethernet/IPv4/UDP/Solar header, so each frame's payload is
  // the block its CRC covers.
  const bool crc32c = (req.flags & kTxCrc32c) != 0;
  if (crc32c && (proto != 17 || icrc || hlen != l4 + 8 + kSolarLen)) {
    return done(TxStatus::kBadHeader, 0, 0);
  }
  const uint32_t pad = icrc ? (h[l4 + 8 + 1] >> 4) & 3 : 0;
  const uint32_t tail = pad + (icrc ? 4 : 0);

  // The payload: one bounds check over the whole reference, as the DMA engine would do.
  const uint8_t* payload = nullptr;
  if (req.len > 0) {
    const Mr* m = req.mr < mrs_.size() ? &mrs_[req.mr] : nullptr;
    if (m == nullptr || !m->used || req.offset > m->len || req.len > m->len - req.offset) {
      return done(TxStatus::kDmaFault, 0, 0);
    }
    payload = m->base + req.offset;
  }

  const uint32_t seg = tso ? req.mss : req.len;
  const uint32_t nseg = tso ? std::max<uint32_t>(1, (req.len + seg - 1) / seg) : 1;
  if ((tso && req.len > kMaxTsoBytes) || hlen - kEthLen + std::min(seg, req.len) + tail > kMaxMtu) {
    return done(TxStatus::kTooLong, 0, 0);
  }
  if (dst.per_frame) {
    // Every frame but the last is full size; the last is never larger.
    const size_t room = hlen + std::min(seg, req.len) + tail;
    if (nseg > dst.bufs.size() || nseg > dst.lens.size()) return done(TxStatus::kNoRoom, 0, 0);
    for (uint32_t i = 0; i < nseg; i++) {
      size_t flen = i + 1 < nseg ? room : hlen + (req.len - i * seg) + tail;
      if (dst.bufs[i].size() < flen) return done(TxStatus::kNoRoom, 0, 0);
    }
  } else {
    const size_t need = nseg * (hlen + tail) + req.len;
    if (nseg > dst.frames.size() || need > dst.flat.size()) {
      return done(TxStatus::kNoRoom, 0, 0);
    }
  }

  const uint16_t ip_id = wire::load16(h + kEthLen + 4);
  const uint32_t seq = proto == 6 ? wire::load32(h + l4 + 4) : 0;
  size_t off = 0;
  uint32_t sent = 0;
  for (uint32_t i = 0; i < nseg; i++) {
    const uint32_t plen = std::min(seg, req.len - sent);
    uint8_t* f = dst.per_frame ? dst.bufs[i].data() : dst.flat.data() + off;
    std::memcpy(f, h, hlen);
    if (plen > 0) std::memcpy(f + hlen, payload + sent, plen);
    size_t end = hlen + plen;
    std::memset(f + end, 0, pad);
    end += pad;
    const size_t flen = end + (icrc ? 4 : 0);
    uint8_t* ip = f + kEthLen;
    wire::store16(ip + 2, uint16_t(flen - kEthLen));
    if (proto == 17) wire::store16(f + l4 + 4, uint16_t(flen - l4));
    if (tso) {
      wire::store16(ip + 4, uint16_t(ip_id + i));
      wire::store32(f + l4 + 4, seq + i * seg);
      if (i + 1 < nseg) f[l4 + 13] &= uint8_t(~(kTcpFin | kTcpPsh));
      if (i > 0) f[l4 + 13] &= uint8_t(~kTcpCwr);
    }
    if (icrc) wire::roce_icrc_store(f + end, wire::roce_icrc(ip, end - kEthLen));
    if (crc32c) wire::store32(f + l4 + 8 + kSolarCrcAt, wire::crc32c(f + hlen, plen));
    if (l4_csum) {
      // UDP after the ICRC and the CRC32C: the checksum covers them (the ICRC masks it).
      size_t csum_at = proto == 6 ? l4 + 16 : l4 + 6;
      wire::store16(f + csum_at, 0);
      uint32_t l4_len = uint32_t(flen - l4);
      uint16_t c =
          wire::csum_fold(wire::csum_partial(f + l4, l4_len, wire::pseudo_sum(ip, proto, l4_len)));
      if (proto == 17 && c == 0) c = 0xFFFF;
      wire::store16(f + csum_at, c);
    }
    if (ip_csum) {
      wire::store16(ip + 10, 0);
      wire::store16(ip + 10, wire::csum_fold(wire::csum_partial(ip, ip_hlen, 0)));
    }
    if (dst.per_frame) {
      dst.lens[i] = uint32_t(flen);
    } else {
      dst.frames[i] = TxFrame{uint32_t(off), uint32_t(flen)};
    }
    off += flen;
    sent += plen;
  }
  if (nframes != nullptr) *nframes = uint16_t(nseg);
  bump(Ctr::kTxFrames, nseg);
  bump(Ctr::kTxBytes, off);
  if (tso) bump(Ctr::kTxTsoRequests);
  return done(TxStatus::kOk, uint16_t(nseg), uint32_t(off));
}

size_t NicModel::tx_poll(std::span<TxCompletion> out) {
  size_t n = std::min(out.size(), txc_count_);
  for (size_t i = 0; i < n; i++) {
    out[i] = txc_[txc_head_];
    txc_head_ = (txc_head_ + 1) % txc_.size();
  }
  txc_count_ -= n;
  return n;
}

}  // namespace cleave::nic
