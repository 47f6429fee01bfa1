// ring.cc - receive rings: a flow's stream received into one ring of app memory that the
// library keeps posted as consecutive CL_OP_FLOW_RECV chunks, read in place (PipeDevice-style).
//
// Create and destroy are control calls (they allocate, and take the context lock to list the
// ring); recv, recv_done and consume are data path: no locks, no allocation, no syscalls beyond
// those of cl_post_send (none). The ring is used by one thread, the one posting on its sq.
//
// How bytes become readable: CL_EV_DATA counts the stream's in-order growth from its start,
// bytes of chunks that completed in the same burst included, and a chunk completion says its
// stream range [start, start + length) is in. The two are compared, never added: a chunk that
// completes short at the peer's FIN carries bytes no data event reports.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <new>

#include "internal.h"

using namespace cleave;

namespace {

constexpr uint32_t kDefaultChunk = 256u << 10;
constexpr uint32_t kMaxChunks = 4096;
constexpr unsigned kPostBurst = 32;
// A chunk's wr_id: this tag, the ring's id, the chunk's index. The tag and id keep another
// ring's (or the app's) completions on a reused flow id from being taken for this ring's.
constexpr uint64_t kTag = 0xC1EAull << 48;

uint64_t wr_id_of(const cl_ring* r, uint32_t chunk) {
  return kTag | (uint64_t{r->id} << 32) | chunk;
}

bool ended(const cl_ring* r) {
  return r->peer_closed || r->short_done || r->closed;
}

uint64_t known(const cl_ring* r) {
  return std::max(r->data_sum, r->done_end);
}

// Posts every chunk whose ring bytes are released and whose last posting came back, in ring
// order; stops at the first that is not ready, or when the submit queue is full (a later call
// retries). Nothing is posted once the stream ended or failed.
int post_more(cl_ring* r) {
  while (r->err == 0 && !ended(r)) {
    cl_send_wr wr[kPostBurst];
    unsigned n = 0;
    uint32_t c = r->next_chunk;
    uint64_t start = r->next_start;
    while (n < kPostBurst) {
      const cl_ring::Chunk& k = r->chunks[c];
      if (k.posted || start + k.len > r->consumed + r->size) break;
      std::memset(&wr[n], 0, sizeof wr[n]);
      wr[n].wr_id = wr_id_of(r, c);
      wr[n].mr = r->mr;
      wr[n].offset = r->mr_offset + k.off;
      wr[n].length = k.len;
      wr[n].opcode = CL_OP_FLOW_RECV;
      wr[n].flow = r->flow;
      n++;
      start += k.len;
      if (++c == r->nchunks) c = 0;
    }
    if (n == 0) return 0;
    int put = cl_post_send(r->sq, wr, n);
    if (put < 0) {
      r->err = put;
      return put;
    }
    for (int i = 0; i < put; i++) {
      cl_ring::Chunk& k = r->chunks[r->next_chunk];
      k.start = r->next_start;
      k.posted = true;
      r->posted++;
      r->next_start += k.len;
      if (++r->next_chunk == r->nchunks) r->next_chunk = 0;
    }
    if (static_cast<unsigned>(put) < n) return 0;
  }
  return 0;
}

// Completion of one of the ring's chunks.
void chunk_done(cl_ring* r, cl_ring::Chunk& k, const cl_wc* wc) {
  k.posted = false;
  r->posted--;
  if (wc->length > k.len) {
    if (r->err == 0) r->err = CL_EPROTO;
    return;
  }
  // Bytes in this chunk mean the stream reached them; an empty completion says nothing (a chunk
  // posted past the stream's end comes back empty at the FIN or a reset).
  if (wc->length != 0) r->done_end = std::max(r->done_end, k.start + wc->length);
  if (wc->status < 0) {
    // Chunks posted after the stream ended come back refused (CL_EPIPE) or empty: not a
    // failure. Before that, the flow's failure is the ring's.
    if (!ended(r) && r->err == 0) r->err = wc->status;
  } else if (wc->length < k.len) {
    r->short_done = true;
  }
}

}  // namespace

// The cl_* functions keep the C linkage cleave.h declared them with.

int cl_ring_create(cl_ctx* ctx, const cl_ring_attr* attr, cl_ring** out) {
  if (out == nullptr) return CL_EINVAL;
  *out = nullptr;
  if (ctx == nullptr || attr == nullptr || attr->sq == nullptr || attr->sq->ctx != ctx ||
      attr->size == 0 || (attr->mr != nullptr && attr->mr->ctx != ctx))
    return CL_EINVAL;
  if (int e = ctx->check()) return e;
  if (ctx->version < lib::kFlowVersion) return CL_EOPNOTSUPP;
  // At least two chunks: a lone chunk's unfilled tail can be smaller than the window's scale
  // unit, so the peer would see a zero window that only another chunk reopens, and the chunk
  // would never complete to be posted again.
  const uint64_t chunk = std::min<uint64_t>(attr->chunk != 0 ? attr->chunk : kDefaultChunk,
                                            std::max<uint64_t>(1, (attr->size + 1) / 2));
  if (chunk > UINT32_MAX) return CL_EINVAL;
  const uint64_t nchunks = (attr->size + chunk - 1) / chunk;
  if (nchunks > kMaxChunks) return CL_EINVAL;

  // Where the ring lies, as the requests will name it, and that it may be written.
  uint8_t* base = static_cast<uint8_t*>(attr->addr);
  bool owns = false;
  if (base == nullptr) {
    if (attr->mr != nullptr) return CL_EINVAL;
    if (attr->size > SIZE_MAX) return CL_ENOMEM;
    base = static_cast<uint8_t*>(cl_alloc(ctx, static_cast<size_t>(attr->size), 4096));
    if (base == nullptr) return CL_ENOMEM;
    owns = true;
  }
  uint64_t offset;
  int err = 0;
  if (attr->mr == nullptr) {
    offset = cl_heap_offset(ctx, base);
    if (offset == UINT64_MAX || attr->size > ctx->heap_size - offset) err = CL_EFAULT;
  } else {
    auto a = reinterpret_cast<uintptr_t>(base), m = reinterpret_cast<uintptr_t>(attr->mr->addr);
    offset = a - m;
    if (a < m || offset > attr->mr->length || attr->size > attr->mr->length - offset) {
      err = CL_EFAULT;
    } else if ((attr->mr->access & CL_ACCESS_WRITE) == 0) {
      err = CL_EACCES;
    }
  }
  auto* r = err == 0 ? new (std::nothrow) cl_ring : nullptr;
  if (r != nullptr) {
    r->chunks.reset(new (std::nothrow) cl_ring::Chunk[nchunks]);
    if (r->chunks == nullptr) {
      delete r;
      r = nullptr;
    }
  }
  if (err == 0 && r == nullptr) err = CL_ENOMEM;
  if (err != 0) {
    if (owns) cl_free(ctx, base);
    return err;
  }
  r->ctx = ctx;
  r->sq = attr->sq;
  r->flow = attr->flow;
  r->mr = attr->mr;
  r->base = base;
  r->mr_offset = offset;
  r->size = attr->size;
  r->owns_memory = owns;
  r->nchunks = static_cast<uint32_t>(nchunks);
  for (uint32_t i = 0; i < r->nchunks; i++) {
    uint64_t off = uint64_t{i} * chunk;
    r->chunks[i] = {0, off, static_cast<uint32_t>(std::min(chunk, attr->size - off)), false};
  }
  {
    std::lock_guard lk(ctx->ctl_mu);
    r->id = ctx->next_ring_id++;
    ctx->rings.push_back(r);
  }
  post_more(r);
  if (r->err != 0 && r->posted == 0) {
    int e = r->err;
    cl_ring_destroy(r);
    return e;
  }
  *out = r;
  return 0;
}

int cl_ring_destroy(cl_ring* r) {
  if (r == nullptr) return CL_EINVAL;
  cl_ctx* ctx = r->ctx;
  if (r->posted != 0 && !r->closed && ctx->check() == 0) return CL_EBUSY;
  {
    std::lock_guard lk(ctx->ctl_mu);
    ctx->rings.erase(std::remove(ctx->rings.begin(), ctx->rings.end(), r), ctx->rings.end());
  }
  if (r->owns_memory) cl_free(ctx, r->base);
  delete r;
  return 0;
}

int cl_ring_consume(cl_ring* r, const cl_wc* wc) {
  if (r == nullptr || wc == nullptr) return CL_EINVAL;
  if (wc->flow != r->flow) return 0;
  if ((wc->flags & CL_WC_EVENT) != 0) {
    if (r->closed) return 0;  // the flow id may belong to another flow now
    switch (wc->opcode) {
      case CL_EV_DATA:
        r->data_sum += wc->length;
        if (r->data_sum > r->next_start && r->err == 0) r->err = CL_EPROTO;  // not into the ring
        return 1;
      case CL_EV_PEER_CLOSED:
        r->peer_closed = true;
        return 1;
      case CL_EV_CLOSED:
        r->closed = true;
        if (wc->status < 0 && r->err == 0) r->err = wc->status;
        return 0;
      default:
        return 0;
    }
  }
  if (wc->opcode != CL_OP_FLOW_RECV || (wc->wr_id >> 32) != (kTag >> 32 | r->id)) return 0;
  const auto c = static_cast<uint32_t>(wc->wr_id);
  if (c >= r->nchunks || !r->chunks[c].posted) return 0;
  chunk_done(r, r->chunks[c], wc);
  post_more(r);
  return 1;
}

void* cl_ring_recv(cl_ring* r, size_t* len) {
  if (len != nullptr) *len = 0;
  if (r == nullptr || len == nullptr) return nullptr;
  if (r->posted < r->nchunks && r->err == 0 && !ended(r)) post_more(r);
  const uint64_t avail = known(r) - r->consumed;
  if (avail == 0) return nullptr;
  *len = static_cast<size_t>(std::min(avail, r->size - r->consumed_off));
  return r->base + r->consumed_off;
}

int cl_ring_recv_done(cl_ring* r, size_t n) {
  if (r == nullptr) return CL_EINVAL;
  if (n > known(r) - r->consumed) return CL_EINVAL;
  r->consumed += n;
  r->consumed_off += n;
  if (r->consumed_off >= r->size) r->consumed_off -= r->size;
  return post_more(r);
}

int cl_ring_status(const cl_ring* r) {
  if (r == nullptr) return CL_EINVAL;
  if (r->err != 0) return r->err;
  // After CL_EV_PEER_CLOSED the chunks still posted come back (the last one short): only then
  // is the stream's length known. A short chunk alone is no end: at a reset the partly filled
  // chunk comes back short too, before CL_EV_CLOSED says why.
  if (r->closed || (r->peer_closed && r->posted == 0)) return 1;
  return 0;
}
