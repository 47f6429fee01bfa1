/* cleave-tcp.c - a netcat for cleave flows: listens or connects through cleaved, sends a
 * deterministic byte pattern and/or receives, hashes both directions with SHA-256, and never
 * waits longer than --timeout for anything.
 *
 * Written in C against <cleave/cleave.h>: one completion queue (with a doorbell) carries the
 * flow's completions and events, one submit queue its requests. Send buffers come from the
 * region's heap (cl_alloc) and stay untouched until their send completes (acknowledged by the
 * peer). Received bytes are hashed in stream order, in place: as CL_EV_DATA reports them in
 * buffers that are not complete yet, and as receive buffers complete; or, with --ring, where
 * cl_ring_recv points in the flow's receive ring (cl_ring_*). With --messages the flow is in
 * message mode (CL_FLOW_MESSAGE): each send is one message, each receive completion must be
 * exactly one. With --no-check it does no per-byte work of its own (for benchmarks against the
 * kernel): sends reuse buffers filled once, nothing is hashed. The integration tests
 * (tests/integration/test_tcp.py) and the demo drive it against the Linux kernel;
 * tests/integration/test_tcp_msg.py between two daemons. */
#include <arpa/inet.h>
#include <cleave/cleave.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cleave_pattern.h"
#include "tool_util.h"

static const char usage[] =
    "Usage: cleave-tcp [OPTIONS] (--listen PORT | --connect IPv4:PORT)\n"
    "       cleave-tcp --pattern BYTES [--seed N]\n"
    "\n"
    "A netcat for cleave flows: opens one flow through cleaved, sends a deterministic byte\n"
    "pattern and/or receives, and reports what went each way with its SHA-256.\n"
    "\n"
    "  -s, --socket PATH      cleaved's app socket (default $CLEAVE_APP_SOCKET, else\n"
    "                         /run/cleave/app.sock)\n"
    "  -l, --listen PORT      accept one flow on PORT (any of cleaved's addresses), serve it;\n"
    "                         stops listening once it is accepted (later ones are reset)\n"
    "  -c, --connect IP:PORT  open a flow to IP:PORT\n"
    "      --send BYTES       send BYTES of the pattern, then close once all is acknowledged\n"
    "      --recv             receive: a --window of receive buffers, and without --send the\n"
    "                         flow is closed only after the peer closed it. Without --recv a\n"
    "                         few small buffers take what the peer sends (and let its FIN in:\n"
    "                         with none posted the window is zero, which no FIN may enter)\n"
    "      --ring BYTES       receive through a receive ring of BYTES from the heap (cl_ring_*:\n"
    "                         read in place, released as hashed; --chunk is its chunk size);\n"
    "                         implies --recv\n"
    "      --messages N       message mode (CL_FLOW_MESSAGE): send N messages (0: none, to\n"
    "                         only receive), each one CL_OP_FLOW_SEND of the next bytes of\n"
    "                         the pattern, sizes from --msg-min to --msg-max (below); every\n"
    "                         receive must complete with exactly one message\n"
    "      --msg-min BYTES    the smallest message (default 1)\n"
    "      --msg-max BYTES    the largest message, and the size of each receive buffer in\n"
    "                         message mode (default 1M; at most 1G)\n"
    "      --msg-buf BYTES    receive buffers of BYTES instead of --msg-max: longer messages\n"
    "                         complete with CL_ETRUNC and are counted as truncated\n"
    "      --http BYTES       (with --listen) read one HTTP request, answer it with\n"
    "                         '200 OK', Content-Length BYTES and BYTES of the pattern, close\n"
    "      --seed N           the pattern's seed (default 1)\n"
    "      --chunk BYTES      bytes per send and per receive buffer (default 1M)\n"
    "      --window BYTES     send bytes in flight, and receive buffer bytes posted (default\n"
    "                         16M each; halved until the region's heap has room)\n"
    "      --close            close gracefully (FIN) after the sends (the default)\n"
    "      --abort            reset the flow (RST) as soon as the sends are acknowledged\n"
    "      --timeout SEC      the longest wait for anything: the connection, the next\n"
    "                         completion or event, the close (default 30)\n"
    "      --no-check         (for benchmarks) send from the window's buffers filled once\n"
    "                         with the pattern, not the pattern stream, and hash nothing\n"
    "                         either way: no per-byte work; the hashes are reported as null\n"
    "      --json             one JSON object on stdout instead of the summary line\n"
    "  -v, --verbose          every completion and event on stderr, as it is taken\n"
    "      --pattern BYTES    write BYTES of the pattern to stdout and exit (no cleaved)\n"
    "  -h, --help             this text\n"
    "\n";
/* The rest of --help (C99 string literals stop at 4095 characters). */
static const char usage_more[] =
    "BYTES: a number, optionally followed by k, m or g (KiB, MiB, GiB).\n"
    "\n"
    "The pattern is the byte stream of xorshift64*, with 64-bit unsigned arithmetic:\n"
    "  x = seed, or 0x9E3779B97F4A7C15 if seed is 0\n"
    "  for each 8 bytes: x ^= x >> 12; x ^= x << 25; x ^= x >> 27;\n"
    "                    emit (x * 0x2545F4914F6CDD1D mod 2^64) as 8 bytes, little-endian\n"
    "BYTES of the pattern are the first BYTES bytes of that stream (the Python version is\n"
    "tests/integration/cleave_pattern.py).\n"
    "\n"
    "Message sizes come from a second xorshift64* stream, seeded with seed ^ 0xD1B54A32D192ED03\n"
    "(0x9E3779B97F4A7C15 if that is 0): for each message one word w (the multiplied output);\n"
    "lo, hi = floor(log2(--msg-min)), floor(log2(--msg-max)); k = lo + (w mod 2^32) mod\n"
    "(hi - lo + 1); size = 2^k + (w >> 32) mod 2^k, clamped to [--msg-min, --msg-max]. So\n"
    "sizes spread evenly over the powers of two. The messages' bytes are the pattern stream\n"
    "cut into those sizes.\n"
    "\n"
    "Output: a summary line, or with --json one object: {\"flow\", \"sent\", \"sent_sha256\",\n"
    "\"received\", \"received_sha256\", \"seconds\", \"send_gbps\", \"recv_gbps\", "
    "\"close_status\",\n"
    "\"error\", \"message\"}; in message mode also \"messages_sent\", \"messages_received\",\n"
    "\"truncated\" (receives that completed with CL_ETRUNC), \"sent_lengths_sha256\" and\n"
    "\"received_lengths_sha256\" (SHA-256 over each message's length as 8 bytes little-endian,\n"
    "in order; a truncated message counts with its full length). sent counts pattern bytes\n"
    "(not an HTTP header); with --no-check the two hashes are null (not taken). close_status\n"
    "is the flow's CL_EV_CLOSED status; error is 0, or the CL_E* code of the first failure,\n"
    "which message and stderr describe.\n"
    "\n"
    "Exit status: 0 everything completed cleanly (every send acknowledged, the stream received\n"
    "to its end, the flow closed with status 0, or reset as --abort asked); 1 the flow was\n"
    "refused, reset or failed, data went missing, or a wait timed out; 2 usage, or no cleaved.\n";

#define KIND_SHIFT 56
/* What a request's completion belongs to: the kind in the wr_id's top byte, a slot below. */
enum kind { K_TX = 1, K_RX, K_HDR, K_CLOSE, K_ABORT, K_TEARDOWN, K_STRAY };
#define MAX_SLOTS 1024u
#define RX_SMALL (64u << 10) /* receive buffer bytes without --recv: 4 of them */
#define HTTP_REQ_MAX 16384u
#define POLL_BATCH 64
#define WAIT_SLICE_MS 100

static void print_usage(FILE* f) {
  fputs(usage, f);
  fputs(usage_more, f);
}

/* ---- The pattern (cleave_pattern.h) ---- */

/* Message sizes (--messages): spread evenly over the powers of two in [min, max]; --help has
 * the definition, tests/integration/test_tcp_msg.py the Python one. */
static uint32_t msg_size(struct pattern* g, uint64_t min, uint64_t max) {
  unsigned lo = 63u - (unsigned)__builtin_clzll(min), hi = 63u - (unsigned)__builtin_clzll(max);
  uint64_t w = pattern_word(g);
  unsigned k = lo + (unsigned)((w & 0xffffffffu) % (hi - lo + 1));
  uint64_t base = 1ull << k;
  uint64_t n = base + (w >> 32) % base;
  if (n < min) n = min;
  if (n > max) n = max;
  return (uint32_t)n;
}

static void msg_sizes_init(struct pattern* g, uint64_t seed) {
  pattern_init(g, seed ^ 0xD1B54A32D192ED03ull);
}

/* ---- Options ---- */

struct opts {
  const char* socket;
  bool listen, connect, send, recv, http, abort, json, verbose;
  bool message;  /* --messages: CL_FLOW_MESSAGE */
  bool no_check; /* --no-check: sends from buffers filled once, nothing hashed */
  uint64_t messages, msg_min, msg_max, msg_buf;
  uint16_t port;
  struct sockaddr_in peer;
  uint64_t send_bytes, http_bytes, seed, chunk, window, ring;
  double timeout;
  char peer_text[32];
};

/* ---- The run ---- */

struct tcp {
  const struct opts* o;
  cl_ctx* ctx;
  cl_cq* cq;
  cl_sq* sq;
  uint32_t listener;
  bool listening;
  cl_flow flow;
  bool have_flow, open, closed;
  int close_status;
  double t_start, t_open, t_closed, t_tx_done, t_rx_done, last_progress;

  /* Sending: `tx_slots` buffers of `tx_chunk` bytes in one heap block. */
  bool sending; /* --send, or --http once the request is in */
  uint8_t* tx_pool;
  uint32_t tx_chunk, tx_slots, tx_nfree;
  uint32_t tx_free[MAX_SLOTS];
  uint32_t tx_len[MAX_SLOTS];
  int tx_pending; /* a slot filled (and hashed) but not posted yet (submit queue full), or -1 */
  uint64_t tx_total, tx_filled, tx_acked;
  uint32_t tx_outstanding;
  struct pattern gen;
  EVP_MD_CTX* tx_sha;
  /* Message mode: the sizes' generator, messages filled and acknowledged, and the hashes of
   * the message lengths each way. */
  struct pattern sizes;
  uint64_t msgs_filled, msgs_acked, rx_msgs, rx_trunc;
  EVP_MD_CTX* tx_len_sha;
  EVP_MD_CTX* rx_len_sha;

  /* Receiving, always (whatever arrives is hashed): `rx_slots` buffers of `rx_chunk` bytes; the
   * posted ones in a FIFO, oldest first, all full-size, so the oldest incomplete one starts at
   * stream offset rx_done_end. */
  uint8_t* rx_pool;
  uint32_t rx_chunk, rx_slots, rx_nfree;
  uint32_t rx_free[MAX_SLOTS];
  uint32_t rx_fifo[MAX_SLOTS];
  uint32_t rx_head, rx_count;
  uint64_t rx_events;   /* in-order stream bytes reported by CL_EV_DATA, summed */
  uint64_t rx_done_end; /* stream offset where the completed buffers end */
  uint64_t rx_hashed;   /* stream bytes hashed so far, in order */
  bool rx_eos;          /* a short completion: the stream ended */
  bool peer_closed;
  EVP_MD_CTX* rx_sha;
  cl_ring* ring; /* --ring: the flow's receive ring, once the flow is open */

  /* HTTP: the request is gathered until its blank line. */
  char req[HTTP_REQ_MAX];
  uint32_t req_len;
  bool http_ready, hdr_posted, hdr_done;
  uint8_t* hdr_buf;
  uint32_t hdr_len;

  bool close_posted;    /* our close, or with --abort our abort */
  bool teardown_posted; /* an abort after a failure, so the flow's end can be reported */
  bool stop;            /* the library failed: nothing more can be learnt */
  int err;
  char msg[256];
};

static int fail(struct tcp* t, int code, const char* fmt, ...) {
  if (t->err != 0) return t->err;
  t->err = code != 0 ? code : CL_EPROTO;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t->msg, sizeof t->msg, fmt, ap);
  va_end(ap);
  return t->err;
}

static uint8_t* tx_buf(const struct tcp* t, uint32_t slot) {
  return t->tx_pool + (size_t)slot * t->tx_chunk;
}
static uint8_t* rx_buf(const struct tcp* t, uint32_t slot) {
  return t->rx_pool + (size_t)slot * t->rx_chunk;
}

/* One heap block for `slots` buffers of `*chunk` bytes, at most `want` bytes: fewer slots, then
 * smaller chunks, until the heap has room. */
static uint8_t* alloc_pool(cl_ctx* ctx, uint64_t want, uint32_t* chunk, uint32_t* slots) {
  for (;;) {
    uint64_t n = want / *chunk;
    if (n == 0) n = 1;
    if (n > MAX_SLOTS) n = MAX_SLOTS;
    void* p = cl_alloc(ctx, (size_t)(n * *chunk), 4096);
    if (p != NULL) {
      *slots = (uint32_t)n;
      return p;
    }
    if (n > 1) {
      want = n * *chunk / 2;
    } else if (*chunk > 4096) {
      *chunk /= 2;
    } else {
      return NULL;
    }
  }
}

/* A failure of the library itself (cleaved gone, the app evicted): waiting is pointless. */
static int fatal(struct tcp* t, int code, const char* what) {
  t->stop = true;
  return fail(t, code, "%s: %s", what, errtext(code));
}

/* Posts one request; 1 posted, 0 the submit queue is full, < 0 an error. */
static int post(struct tcp* t, uint32_t opcode, enum kind k, uint32_t slot, uint64_t offset,
                uint32_t length, cl_flow flow) {
  struct cl_send_wr wr = {.wr_id = ((uint64_t)k << KIND_SHIFT) | slot,
                          .offset = offset,
                          .length = length,
                          .opcode = opcode,
                          .flow = flow};
  int r = cl_post_send(t->sq, &wr, 1);
  if (r < 0) return fatal(t, r, "cannot post a request");
  return r;
}

/* HTTP: gathers the request until its blank line, then lets the response go. */
static void http_take(struct tcp* t, const uint8_t* p, size_t n) {
  if (t->http_ready) return;
  size_t room = HTTP_REQ_MAX - 1 - t->req_len;
  if (n > room) {
    fail(t, CL_EPROTO, "the HTTP request has no end within %u bytes", HTTP_REQ_MAX);
    return;
  }
  uint32_t from = t->req_len > 3 ? t->req_len - 3 : 0;
  memcpy(t->req + t->req_len, p, n);
  t->req_len += (uint32_t)n;
  t->req[t->req_len] = '\0';
  if (strstr(t->req + from, "\r\n\r\n") != NULL) {
    t->http_ready = true;
    t->sending = true;
  }
}

/* Hashes stream bytes [rx_hashed, upto) where they lie: in the posted buffers from the oldest
 * incomplete one on. */
static void rx_take(struct tcp* t, uint64_t upto) {
  while (t->rx_hashed < upto && t->err == 0) {
    uint64_t rel = t->rx_hashed - t->rx_done_end;
    uint64_t k = rel / t->rx_chunk, in = rel % t->rx_chunk;
    if (k >= t->rx_count) {
      fail(t, CL_EPROTO, "cleaved reported %" PRIu64 " bytes beyond the posted receive buffers",
           upto - t->rx_hashed);
      return;
    }
    uint32_t slot = t->rx_fifo[(t->rx_head + k) % t->rx_slots];
    uint64_t n = t->rx_chunk - in;
    if (n > upto - t->rx_hashed) n = upto - t->rx_hashed;
    const uint8_t* p = rx_buf(t, slot) + in;
    if (!t->o->no_check && EVP_DigestUpdate(t->rx_sha, p, (size_t)n) != 1) {
      fail(t, CL_ENOMEM, "SHA-256 failed");
      return;
    }
    if (t->o->http) http_take(t, p, (size_t)n);
    t->rx_hashed += n;
  }
}

/* The stream is known up to the end of the completed buffers and up to what the data events
 * reported; CL_EV_DATA counts the in-order growth of the stream, bytes of buffers that completed
 * in the same burst included, so the two are compared, never added. */
static void rx_advance(struct tcp* t) {
  uint64_t known = t->rx_events > t->rx_done_end ? t->rx_events : t->rx_done_end;
  rx_take(t, known);
}

/* The stream has ended (the peer's FIN: an event, a short buffer, or a clean close) and every
 * posted buffer is back. */
static bool rx_finished(const struct tcp* t) {
  if (t->o->ring != 0) {
    size_t len = 0;
    return t->ring != NULL && cl_ring_status(t->ring) == 1 && cl_ring_recv(t->ring, &len) == NULL;
  }
  bool ended = t->peer_closed || t->rx_eos || (t->closed && t->close_status == 0);
  return ended && t->rx_count == 0;
}
static bool tx_finished(const struct tcp* t) {
  if (t->o->http) return t->http_ready && t->hdr_done && t->tx_acked == t->tx_total;
  return t->tx_acked == t->tx_total && t->tx_outstanding == 0;
}

/* Message mode: a message's length, as 8 bytes little-endian, into a lengths hash. */
static bool hash_len(EVP_MD_CTX* md, uint64_t len) {
  uint8_t b[8];
  put_le64(b, len);
  return EVP_DigestUpdate(md, b, sizeof b) == 1;
}

/* Whatever can be posted now: receive buffers, the HTTP header, sends, then the close. */
static void pump(struct tcp* t) {
  if (!t->open || t->closed || t->stop) return;
  if (t->err != 0) {
    /* Something failed while the flow is up: reset it, and report how it ended. */
    if (!t->teardown_posted && post(t, CL_OP_FLOW_ABORT, K_TEARDOWN, 0, 0, 0, t->flow) == 1)
      t->teardown_posted = true;
    return;
  }
  /* Receive buffers until the stream ends; after our FIN too (the peer may still send), not
   * after our abort. */
  bool stop_rx = t->o->ring != 0 || t->peer_closed || t->rx_eos || (t->o->abort && t->close_posted);
  while (!stop_rx && t->rx_nfree > 0) {
    uint32_t slot = t->rx_free[t->rx_nfree - 1];
    int r = post(t, CL_OP_FLOW_RECV, K_RX, slot, cl_heap_offset(t->ctx, rx_buf(t, slot)),
                 t->rx_chunk, t->flow);
    if (r <= 0) return;
    t->rx_nfree--;
    t->rx_fifo[(t->rx_head + t->rx_count++) % t->rx_slots] = slot;
  }
  if (t->o->http && t->http_ready && !t->hdr_posted) {
    int r =
        post(t, CL_OP_FLOW_SEND, K_HDR, 0, cl_heap_offset(t->ctx, t->hdr_buf), t->hdr_len, t->flow);
    if (r <= 0) return;
    t->hdr_posted = true;
  }
  while (t->sending && !t->close_posted) {
    if (t->tx_pending < 0) {
      if (t->tx_filled == t->tx_total || t->tx_nfree == 0) break;
      uint32_t slot = t->tx_free[--t->tx_nfree];
      uint64_t left = t->tx_total - t->tx_filled;
      uint32_t n = left < t->tx_chunk ? (uint32_t)left : t->tx_chunk;
      if (t->o->message) n = msg_size(&t->sizes, t->o->msg_min, t->o->msg_max);
      if (!t->o->no_check) { /* with --no-check the slot holds what set_up put there */
        pattern_fill(&t->gen, tx_buf(t, slot), n);
        if (EVP_DigestUpdate(t->tx_sha, tx_buf(t, slot), n) != 1 ||
            (t->o->message && !hash_len(t->tx_len_sha, n))) {
          fail(t, CL_ENOMEM, "SHA-256 failed");
          return;
        }
      }
      t->msgs_filled++;
      t->tx_len[slot] = n;
      t->tx_filled += n;
      t->tx_pending = (int)slot;
    }
    uint32_t slot = (uint32_t)t->tx_pending;
    int r = post(t, CL_OP_FLOW_SEND, K_TX, slot, cl_heap_offset(t->ctx, tx_buf(t, slot)),
                 t->tx_len[slot], t->flow);
    if (r <= 0) return;
    t->tx_pending = -1;
    t->tx_outstanding++;
  }
  if (t->close_posted) return;
  /* Close once our side is done: after the sends (or at once with nothing to send); when only
   * receiving, after the peer closed, so a peer that waits for our FIN is not needed. */
  bool has_tx = t->o->send || t->o->http || t->o->messages > 0;
  bool go = has_tx ? tx_finished(t) : (!t->o->recv || t->o->abort || rx_finished(t));
  if (!go) return;
  int r = t->o->abort ? post(t, CL_OP_FLOW_ABORT, K_ABORT, 0, 0, 0, t->flow)
                      : post(t, CL_OP_FLOW_CLOSE, K_CLOSE, 0, 0, 0, t->flow);
  if (r == 1) t->close_posted = true;
}

/* ---- Completions and events ---- */

static void mark_done(struct tcp* t) {
  double now = now_s();
  if (t->sending && t->t_tx_done == 0 && tx_finished(t)) t->t_tx_done = now;
  if (t->t_rx_done == 0 && rx_finished(t)) t->t_rx_done = now;
}

/* --ring: the flow's receive ring, from the heap, once the flow is open. */
static void ring_open(struct tcp* t) {
  uint64_t chunk = t->o->chunk < t->o->ring ? t->o->chunk : t->o->ring;
  if (t->o->ring / chunk > 1024) chunk = (t->o->ring + 1023) / 1024; /* the CQ's room */
  struct cl_ring_attr a = {
      .sq = t->sq, .flow = t->flow, .size = t->o->ring, .chunk = (uint32_t)chunk};
  int r = cl_ring_create(t->ctx, &a, &t->ring);
  if (r != 0)
    fail(t, r, "cannot create a receive ring of %" PRIu64 " bytes: %s", t->o->ring, errtext(r));
}

/* --ring: hashes what is readable in the ring, in place, and releases it. */
static void ring_drain(struct tcp* t) {
  if (t->ring == NULL) return;
  size_t len;
  const uint8_t* p;
  while (t->err == 0 && (p = cl_ring_recv(t->ring, &len)) != NULL) {
    if (!t->o->no_check && EVP_DigestUpdate(t->rx_sha, p, len) != 1) {
      fail(t, CL_ENOMEM, "SHA-256 failed");
      return;
    }
    if (t->o->http) http_take(t, p, len);
    t->rx_hashed += len;
    int r = cl_ring_recv_done(t->ring, len);
    if (r != 0) fail(t, r, "cannot release ring bytes: %s", errtext(r));
  }
  int st = cl_ring_status(t->ring);
  /* The flow's own end (a reset) is judged from CL_EV_CLOSED; anything else fails here. */
  bool ours = t->o->abort && t->close_posted; /* our own abort fails the last chunks */
  if (st < 0 && !ours && !(t->closed && st == t->close_status))
    fail(t, st, "the receive ring failed after %" PRIu64 " bytes: %s", t->rx_hashed, errtext(st));
}

static void on_event(struct tcp* t, const struct cl_wc* wc) {
  bool ours = t->have_flow && wc->flow == t->flow;
  switch (wc->opcode) {
    case CL_EV_ACCEPTED:
      if (t->listening && !t->have_flow && wc->wr_id == t->listener) {
        t->have_flow = t->open = true;
        t->flow = wc->flow;
        t->t_open = now_s();
        t->listening = false;
        int r = cl_unlisten(t->ctx, t->listener);
        if (r != 0) fail(t, r, "cannot stop listening on port %u: %s", t->o->port, errtext(r));
        if (t->o->ring != 0) ring_open(t);
      } else {
        /* One flow per run: any other is reset (and its completions ignored). */
        post(t, CL_OP_FLOW_ABORT, K_STRAY, 0, 0, 0, wc->flow);
      }
      return;
    case CL_EV_CONNECTED:
      if (ours && !t->open) {
        t->open = true;
        t->t_open = now_s();
        if (t->o->ring != 0) ring_open(t);
      }
      return;
    case CL_EV_REFUSED:
      if (ours) {
        t->closed = true;
        t->close_status = wc->status;
        t->t_closed = now_s();
        fail(t, wc->status != 0 ? wc->status : CL_ECONNREFUSED, "connect to %s: %s",
             t->o->peer_text, errtext(wc->status));
      }
      return;
    case CL_EV_DATA:
      if (ours && t->o->message) {
        fail(t, CL_EPROTO, "a data event on a message-mode flow");
      } else if (ours) {
        t->rx_events += wc->length;
        rx_advance(t);
      }
      return;
    case CL_EV_PEER_CLOSED:
      if (ours) t->peer_closed = true;
      return;
    case CL_EV_CLOSED:
      if (ours) {
        t->closed = true;
        t->close_status = wc->status;
        t->t_closed = now_s();
      }
      return;
    default:
      return; /* an event this tool does not know: nothing it waits for */
  }
}

static void on_recv(struct tcp* t, uint32_t slot, const struct cl_wc* wc) {
  if (t->rx_count == 0 || t->rx_fifo[t->rx_head] != slot || wc->length > t->rx_chunk) {
    fail(t, CL_EPROTO, "a receive buffer completed out of order or overfull");
    return;
  }
  /* After the end of the stream (or our abort), the buffers still posted come back empty,
   * whatever their status says. */
  bool end = t->peer_closed || t->rx_eos || t->closed || (t->o->abort && t->close_posted);
  if (wc->status < 0 && !(wc->length == 0 && end))
    fail(t, wc->status, "a receive failed after %" PRIu64 " bytes: %s", t->rx_done_end,
         errtext(wc->status));
  uint64_t stream_end = t->rx_done_end + wc->length;
  if (wc->length < t->rx_chunk && t->rx_hashed > stream_end)
    fail(t, CL_EPROTO, "data events reported %" PRIu64 " bytes past the end of the stream",
         t->rx_hashed - stream_end);
  else
    rx_take(t, stream_end);
  t->rx_head = (t->rx_head + 1) % t->rx_slots;
  t->rx_count--;
  t->rx_done_end = stream_end;
  if (wc->length < t->rx_chunk) t->rx_eos = true;
  t->rx_free[t->rx_nfree++] = slot;
}

/* Message mode: each receive completes with exactly one message (or its first bytes and
 * CL_ETRUNC); an empty one after the peer's close. */
static void on_msg_recv(struct tcp* t, uint32_t slot, const struct cl_wc* wc) {
  if (t->rx_count == 0 || t->rx_fifo[t->rx_head] != slot || wc->length > t->rx_chunk) {
    fail(t, CL_EPROTO, "a receive buffer completed out of order or overfull");
    return;
  }
  t->rx_head = (t->rx_head + 1) % t->rx_slots;
  t->rx_count--;
  t->rx_free[t->rx_nfree++] = slot;
  bool end = t->peer_closed || t->rx_eos || t->closed || (t->o->abort && t->close_posted);
  if (wc->length == 0 && (wc->status == 0 || end)) {
    if (wc->status == 0) t->rx_eos = true;
    return;
  }
  uint64_t msg = t->rx_msgs + 1;
  if (wc->status == CL_ETRUNC) {
    if (wc->length != t->rx_chunk || wc->imm <= t->rx_chunk) {
      fail(t, CL_EPROTO, "message %" PRIu64 ": CL_ETRUNC with %u bytes of %u in a %u-byte buffer",
           msg, wc->length, wc->imm, t->rx_chunk);
      return;
    }
    t->rx_trunc++;
  } else if (wc->status != 0) {
    fail(t, wc->status, "a receive failed after %" PRIu64 " messages: %s", t->rx_msgs,
         errtext(wc->status));
    return;
  } else if (wc->imm != wc->length) {
    fail(t, CL_EPROTO, "message %" PRIu64 ": a receive of %u bytes says the message has %u", msg,
         wc->length, wc->imm);
    return;
  }
  if (EVP_DigestUpdate(t->rx_sha, rx_buf(t, slot), wc->length) != 1 ||
      !hash_len(t->rx_len_sha, wc->imm)) {
    fail(t, CL_ENOMEM, "SHA-256 failed");
    return;
  }
  t->rx_msgs++;
  t->rx_hashed += wc->length;
  t->rx_done_end += wc->length;
}

static void on_completion(struct tcp* t, const struct cl_wc* wc) {
  unsigned k = (unsigned)(wc->wr_id >> KIND_SHIFT);
  uint32_t slot = (uint32_t)wc->wr_id;
  switch (k) {
    case K_TX:
      if (slot >= t->tx_slots || t->tx_outstanding == 0) break;
      t->tx_outstanding--;
      if (wc->status != 0) {
        fail(t, wc->status, "a send failed with %" PRIu64 " of %" PRIu64 " bytes acknowledged: %s",
             t->tx_acked, t->tx_total, errtext(wc->status));
      } else if (wc->length != t->tx_len[slot]) {
        fail(t, CL_EPROTO, "a send of %u bytes completed with %u", t->tx_len[slot], wc->length);
      } else {
        t->tx_acked += wc->length;
        t->msgs_acked++;
      }
      t->tx_free[t->tx_nfree++] = slot;
      return;
    case K_HDR:
      if (wc->status != 0)
        fail(t, wc->status, "the HTTP header was not sent: %s", errtext(wc->status));
      t->hdr_done = true;
      return;
    case K_RX:
      if (slot >= t->rx_slots) break;
      if (t->o->message)
        on_msg_recv(t, slot, wc);
      else
        on_recv(t, slot, wc);
      return;
    case K_CLOSE:
      if (wc->status != 0) fail(t, wc->status, "close: %s", errtext(wc->status));
      return;
    case K_ABORT:
      if (wc->status != 0) fail(t, wc->status, "abort: %s", errtext(wc->status));
      return;
    case K_TEARDOWN:
    case K_STRAY:
      return; /* best effort: the flow's end is what counts */
    default:
      break;
  }
  fail(t, CL_EPROTO, "a completion with an unknown wr_id %#" PRIx64, wc->wr_id);
}

/* --verbose: one line per completion or event, with the time since the start. */
static void trace(const struct tcp* t, const struct cl_wc* wc) {
  static const char* const events[] = {"?",      "connected", "accepted", "peer-closed",
                                       "closed", "refused",   "data"};
  static const char* const kinds[] = {"?",     "send",  "recv",           "http-header",
                                      "close", "abort", "teardown-abort", "stray-abort"};
  double at = now_s() - t->t_start;
  if (wc->flags & CL_WC_EVENT) {
    const char* name = wc->opcode < 7 ? events[wc->opcode] : "unknown";
    fprintf(stderr,
            "%10.6f flow %" PRIu32 " event %s status %d length %" PRIu32 " wr_id %" PRIu64 "\n", at,
            wc->flow, name, wc->status, wc->length, wc->wr_id);
  } else {
    unsigned k = (unsigned)(wc->wr_id >> KIND_SHIFT);
    fprintf(stderr, "%10.6f flow %" PRIu32 " %s #%" PRIu32 " status %d length %" PRIu32 "\n", at,
            wc->flow, k < 8 ? kinds[k] : "unknown", (uint32_t)wc->wr_id, wc->status, wc->length);
  }
}

/* What the run is waiting for, for the timeout message. */
static void waiting_for(const struct tcp* t, char* buf, size_t n) {
  if (!t->have_flow && t->listening)
    snprintf(buf, n, "a connection on port %u", t->o->port);
  else if (!t->open)
    snprintf(buf, n, "the connection to %s", t->o->peer_text);
  else if (t->err != 0)
    snprintf(buf, n, "the flow to end after the failure");
  else if (t->o->http && !t->http_ready)
    snprintf(buf, n, "the HTTP request (%u bytes of it so far)", t->req_len);
  else if (t->sending && !tx_finished(t))
    snprintf(buf, n, "send completions (%" PRIu64 " of %" PRIu64 " bytes acknowledged)",
             t->tx_acked, t->tx_total);
  else if (t->ring != NULL && cl_ring_status(t->ring) == 0)
    snprintf(buf, n, "data or the peer's close (%" PRIu64 " bytes received through the ring)",
             t->rx_hashed);
  else if (t->ring == NULL && !t->peer_closed && !t->rx_eos)
    snprintf(buf, n, "data or the peer's close (%" PRIu64 " bytes received)", t->rx_hashed);
  else if (t->rx_count != 0)
    snprintf(buf, n, "the last %u receive buffers to complete", t->rx_count);
  else
    snprintf(buf, n, "the flow to close");
}

/* The event loop: post what can be posted, take completions, sleep on the doorbell in short
 * slices; at most --timeout without a completion or an event. */
static void run(struct tcp* t) {
  struct cl_wc wc[POLL_BATCH];
  t->last_progress = now_s();
  while (!t->closed && !t->stop) {
    pump(t);
    int n = cl_poll_cq(t->cq, wc, POLL_BATCH);
    if (n < 0) {
      fatal(t, n, "cannot poll the completion queue");
      return;
    }
    for (int i = 0; i < n; i++) {
      if (t->o->verbose) trace(t, &wc[i]);
      if (t->ring != NULL && cl_ring_consume(t->ring, &wc[i]) == 1) continue;
      if (wc[i].flags & CL_WC_EVENT)
        on_event(t, &wc[i]);
      else
        on_completion(t, &wc[i]);
    }
    ring_drain(t);
    mark_done(t);
    double now = now_s();
    if (n > 0) {
      t->last_progress = now;
      continue;
    }
    double left = t->o->timeout - (now - t->last_progress);
    if (left <= 0) {
      char what[128];
      waiting_for(t, what, sizeof what);
      fail(t, CL_ETIMEDOUT, "timed out after %g s waiting for %s", t->o->timeout, what);
      return;
    }
    int ms = left * 1000 < WAIT_SLICE_MS ? (int)(left * 1000) + 1 : WAIT_SLICE_MS;
    int r = cl_cq_wait(t->cq, ms);
    if (r < 0 && r != CL_ETIMEDOUT) {
      fatal(t, r, "cannot wait on the completion queue");
      return;
    }
  }
  /* Requests posted just before the flow ended come back after its CL_EV_CLOSED (the daemon
   * refuses them with CL_EPIPE): take them before judging, for at most a second. */
  double until = now_s() + 1.0;
  for (;;) {
    int n = cl_poll_cq(t->cq, wc, POLL_BATCH);
    for (int i = 0; i < n; i++) {
      if (t->ring != NULL && cl_ring_consume(t->ring, &wc[i]) == 1) continue;
      if (!(wc[i].flags & CL_WC_EVENT)) on_completion(t, &wc[i]);
    }
    if (n < 0 || t->stop || (t->rx_count == 0 && t->tx_outstanding == 0) || now_s() > until) break;
    if (n == 0) cl_cq_wait(t->cq, WAIT_SLICE_MS);
  }
}

/* After the flow closed: did everything happen that should have? */
static void verdict(struct tcp* t) {
  if (t->err != 0) return;
  if (t->o->abort) {
    if (!t->close_posted)
      fail(t, t->close_status != 0 ? t->close_status : CL_EPROTO,
           "the flow ended before it could be aborted: %s", errtext(t->close_status));
  } else if (t->close_status == CL_ECONNRESET) {
    fail(t, CL_ECONNRESET, "the flow was reset: %s", errtext(t->close_status));
  } else if (t->close_status != 0) {
    fail(t, t->close_status, "the flow ended with %s", errtext(t->close_status));
  }
  if (t->err != 0 || t->o->abort) return;
  if (t->o->http && !t->http_ready)
    fail(t, CL_EPROTO, "the flow closed before a whole HTTP request arrived");
  else if (t->sending && !tx_finished(t))
    fail(t, CL_EPROTO, "the flow closed with %" PRIu64 " of %" PRIu64 " bytes acknowledged",
         t->tx_acked, t->tx_total);
  else if (!rx_finished(t))
    fail(t, CL_EPROTO,
         "the flow closed before the stream ended (%" PRIu64 " bytes received, %u buffers out%s)",
         t->rx_hashed, t->rx_count, t->ring != NULL ? ", through the ring" : "");
}

/* ---- Output ---- */

static void hex_digest(EVP_MD_CTX* md, char* out) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  if (md == NULL || EVP_DigestFinal_ex(md, d, &len) != 1) len = 0;
  for (unsigned i = 0; i < len; i++)
    sprintf(out + 2 * i, "%02x", d[i]);
  out[2 * len] = '\0';
}

static void report(struct tcp* t) {
  char tx_hex[2 * EVP_MAX_MD_SIZE + 1], rx_hex[2 * EVP_MAX_MD_SIZE + 1];
  hex_digest(t->tx_sha, tx_hex);
  hex_digest(t->rx_sha, rx_hex);
  char txl_hex[2 * EVP_MAX_MD_SIZE + 1], rxl_hex[2 * EVP_MAX_MD_SIZE + 1];
  hex_digest(t->tx_len_sha, txl_hex);
  hex_digest(t->rx_len_sha, rxl_hex);
  double end = t->t_closed != 0 ? t->t_closed : now_s();
  double secs = t->open ? end - t->t_open : 0;
  double tx_s = (t->t_tx_done != 0 ? t->t_tx_done : end) - t->t_open;
  double rx_s = (t->t_rx_done != 0 ? t->t_rx_done : end) - t->t_open;
  double tx_gbps = t->open && tx_s > 0 ? (double)t->tx_acked * 8 / tx_s / 1e9 : 0;
  double rx_gbps = t->open && rx_s > 0 ? (double)t->rx_hashed * 8 / rx_s / 1e9 : 0;
  if (t->o->no_check) { /* not taken: JSON null, and the summary says so */
    snprintf(tx_hex, sizeof tx_hex, "%s", t->o->json ? "null" : "not taken");
    snprintf(rx_hex, sizeof rx_hex, "%s", t->o->json ? "null" : "not taken");
  }
  const char* q = t->o->no_check ? "" : "\""; /* a hash is a string, or null */
  if (t->o->json) {
    printf("{\"flow\":%" PRIu32 ",\"sent\":%" PRIu64 ",\"sent_sha256\":%s%s%s,\"received\":%" PRIu64
           ",\"received_sha256\":%s%s%s,\"seconds\":%.6f,\"send_gbps\":%.3f,\"recv_gbps\":%.3f,"
           "\"close_status\":%d,\"error\":%d,\"message\":",
           t->flow, t->tx_acked, q, tx_hex, q, t->rx_hashed, q, rx_hex, q, secs, tx_gbps, rx_gbps,
           t->close_status, t->err);
    json_string(t->msg);
    if (t->o->message)
      printf(",\"messages_sent\":%" PRIu64 ",\"messages_received\":%" PRIu64
             ",\"truncated\":%" PRIu64
             ",\"sent_lengths_sha256\":\"%s\",\"received_lengths_sha256\":\"%s\"",
             t->msgs_acked, t->rx_msgs, t->rx_trunc, txl_hex, rxl_hex);
    printf("}\n");
  } else if (t->have_flow) {
    printf("cleave-tcp: flow %" PRIu32 ": sent %" PRIu64 " bytes (sha256 %s), received %" PRIu64
           " bytes (sha256 %s) in %.3f s: send %.3f Gbit/s, recv %.3f Gbit/s; closed: %s\n",
           t->flow, t->tx_acked, tx_hex, t->rx_hashed, rx_hex, secs, tx_gbps, rx_gbps,
           t->closed ? errtext(t->close_status) : "no");
    if (t->o->message)
      printf("cleave-tcp: messages: sent %" PRIu64 " (lengths sha256 %s), received %" PRIu64
             " (lengths sha256 %s), %" PRIu64 " truncated\n",
             t->msgs_acked, txl_hex, t->rx_msgs, rxl_hex, t->rx_trunc);
  }
  fflush(stdout);
  if (t->err != 0) fprintf(stderr, "cleave-tcp: %s\n", t->msg);
}

/* ---- Set-up ---- */

static int write_pattern(uint64_t bytes, uint64_t seed) {
  static uint8_t buf[1 << 20];
  struct pattern p;
  pattern_init(&p, seed);
  while (bytes > 0) {
    size_t n = bytes < sizeof buf ? (size_t)bytes : sizeof buf;
    pattern_fill(&p, buf, n);
    if (fwrite(buf, 1, n, stdout) != n) {
      fprintf(stderr, "cleave-tcp: writing the pattern: %s\n", strerror(errno));
      return 1;
    }
    bytes -= n;
  }
  if (fflush(stdout) != 0) {
    fprintf(stderr, "cleave-tcp: writing the pattern: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}

/* One CQ (with a doorbell) and one SQ, as large as the quota allows. */
static int make_queues(struct tcp* t) {
  for (uint32_t sq = 1024;; sq /= 2) {
    int r = cl_cq_create(t->ctx, sq * 4, 1, 20, &t->cq);
    if (r == 0) {
      r = cl_sq_create(t->ctx, t->cq, sq, &t->sq);
      if (r == 0) return 0;
      cl_cq_destroy(t->cq);
      t->cq = NULL;
    }
    if (r != CL_EDQUOT || sq == 64) return r;
  }
}

static int set_up(struct tcp* t) {
  const struct opts* o = t->o;
  t->tx_pending = -1;
  t->tx_sha = EVP_MD_CTX_new();
  t->rx_sha = EVP_MD_CTX_new();
  t->tx_len_sha = EVP_MD_CTX_new();
  t->rx_len_sha = EVP_MD_CTX_new();
  if (t->tx_sha == NULL || t->rx_sha == NULL || t->tx_len_sha == NULL || t->rx_len_sha == NULL ||
      EVP_DigestInit_ex(t->tx_sha, EVP_sha256(), NULL) != 1 ||
      EVP_DigestInit_ex(t->rx_sha, EVP_sha256(), NULL) != 1 ||
      EVP_DigestInit_ex(t->tx_len_sha, EVP_sha256(), NULL) != 1 ||
      EVP_DigestInit_ex(t->rx_len_sha, EVP_sha256(), NULL) != 1)
    return fail(t, CL_ENOMEM, "cannot set up SHA-256");
  pattern_init(&t->gen, o->seed);
  t->sending = o->send || o->messages > 0;
  t->tx_total = o->http ? o->http_bytes : o->send_bytes;
  if (o->message) { /* the sizes are known up front: tx_total is their sum */
    struct pattern g;
    msg_sizes_init(&g, o->seed);
    t->tx_total = 0;
    for (uint64_t i = 0; i < o->messages; i++)
      t->tx_total += msg_size(&g, o->msg_min, o->msg_max);
    msg_sizes_init(&t->sizes, o->seed);
  }
  int r = make_queues(t);
  if (r != 0) return fail(t, r, "cannot create queues: %s", errtext(r));

  if (o->http) {
    char hdr[256];
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 200 OK\r\nContent-Length: %" PRIu64
                     "\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                     o->http_bytes);
    t->hdr_buf = cl_alloc(t->ctx, (size_t)n, 64);
    if (t->hdr_buf == NULL) return fail(t, CL_ENOMEM, "no room in the region's heap");
    memcpy(t->hdr_buf, hdr, (size_t)n);
    t->hdr_len = (uint32_t)n;
  }
  if ((t->sending || o->http) && t->tx_total > 0) {
    t->tx_chunk = (uint32_t)(o->message ? o->msg_max : o->chunk);
    t->tx_pool = alloc_pool(t->ctx, o->window, &t->tx_chunk, &t->tx_slots);
    if (t->tx_pool == NULL || (o->message && t->tx_chunk != o->msg_max))
      return fail(t, CL_ENOMEM, "no room in the region's heap for sends");
    /* --no-check: the pattern's first window, once, before the flow opens; every send reuses
     * these bytes as they are. */
    if (o->no_check) pattern_fill(&t->gen, t->tx_pool, (size_t)t->tx_slots * t->tx_chunk);
    for (uint32_t i = 0; i < t->tx_slots; i++)
      t->tx_free[t->tx_nfree++] = t->tx_slots - 1 - i;
  }
  /* Receiving is the point with --recv and --http; otherwise a few small buffers. */
  bool rx_main = o->recv || o->http || o->message;
  uint64_t rx_chunk = rx_main || o->chunk < RX_SMALL ? o->chunk : RX_SMALL;
  if (o->message) rx_chunk = o->msg_buf; /* one message per buffer */
  uint64_t rx_window = rx_main || o->window < 4 * RX_SMALL ? o->window : 4 * RX_SMALL;
  t->rx_chunk = (uint32_t)rx_chunk;
  if (o->ring == 0) { /* with --ring the ring is made once the flow is open */
    t->rx_pool = alloc_pool(t->ctx, rx_window, &t->rx_chunk, &t->rx_slots);
    if (t->rx_pool == NULL || t->rx_chunk != rx_chunk)
      return fail(t, CL_ENOMEM, "no room in the region's heap for receive buffers");
    for (uint32_t i = 0; i < t->rx_slots; i++)
      t->rx_free[t->rx_nfree++] = t->rx_slots - 1 - i;
  }

  if (o->listen) {
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(o->port)};
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    r = cl_listen_ex(t->ctx, t->cq, &any, NULL, o->message ? CL_FLOW_MESSAGE : 0, &t->listener);
    if (r != 0) return fail(t, r, "cannot listen on port %u: %s", o->port, errtext(r));
    t->listening = true;
  } else {
    r = cl_connect_ex(t->ctx, t->cq, &o->peer, NULL, o->message ? CL_FLOW_MESSAGE : 0, &t->flow);
    if (r != 0) return fail(t, r, "cannot connect to %s: %s", o->peer_text, errtext(r));
    t->have_flow = true;
  }
  return 0;
}

int main(int argc, char** argv) {
  struct opts o = {.seed = 1,
                   .chunk = 1u << 20,
                   .window = 16u << 20,
                   .timeout = 30,
                   .msg_min = 1,
                   .msg_max = 1u << 20};
  uint64_t pattern_bytes = 0;
  bool pattern = false, close_opt = false;
  enum {
    O_SEND = 256,
    O_RECV,
    O_HTTP,
    O_SEED,
    O_CHUNK,
    O_WINDOW,
    O_CLOSE,
    O_ABORT,
    O_TIMEOUT,
    O_JSON,
    O_PATTERN,
    O_RING,
    O_MESSAGES,
    O_MSG_MIN,
    O_MSG_MAX,
    O_MSG_BUF,
    O_NO_CHECK
  };
  static const struct option longopts[] = {{"socket", required_argument, NULL, 's'},
                                           {"listen", required_argument, NULL, 'l'},
                                           {"connect", required_argument, NULL, 'c'},
                                           {"send", required_argument, NULL, O_SEND},
                                           {"recv", no_argument, NULL, O_RECV},
                                           {"http", required_argument, NULL, O_HTTP},
                                           {"seed", required_argument, NULL, O_SEED},
                                           {"chunk", required_argument, NULL, O_CHUNK},
                                           {"window", required_argument, NULL, O_WINDOW},
                                           {"close", no_argument, NULL, O_CLOSE},
                                           {"abort", no_argument, NULL, O_ABORT},
                                           {"timeout", required_argument, NULL, O_TIMEOUT},
                                           {"json", no_argument, NULL, O_JSON},
                                           {"verbose", no_argument, NULL, 'v'},
                                           {"pattern", required_argument, NULL, O_PATTERN},
                                           {"ring", required_argument, NULL, O_RING},
                                           {"messages", required_argument, NULL, O_MESSAGES},
                                           {"msg-min", required_argument, NULL, O_MSG_MIN},
                                           {"msg-max", required_argument, NULL, O_MSG_MAX},
                                           {"msg-buf", required_argument, NULL, O_MSG_BUF},
                                           {"no-check", no_argument, NULL, O_NO_CHECK},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "s:l:c:vh", longopts, NULL)) != -1;) {
    bool ok = true;
    switch (c) {
      case 's':
        o.socket = optarg;
        break;
      case 'l':
        ok = parse_port(optarg, &o.port);
        o.listen = true;
        break;
      case 'c':
        ok = parse_peer(optarg, &o.peer) && strlen(optarg) < sizeof o.peer_text;
        if (ok) snprintf(o.peer_text, sizeof o.peer_text, "%s", optarg);
        o.connect = true;
        break;
      case O_SEND:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.send_bytes);
        o.send = true;
        break;
      case O_RECV:
        o.recv = true;
        break;
      case O_HTTP:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.http_bytes);
        o.http = true;
        break;
      case O_SEED: {
        char* end = NULL;
        errno = 0;
        o.seed = strtoull(optarg, &end, 0);
        ok = errno == 0 && end != optarg && *end == '\0' && optarg[0] != '-';
        break;
      }
      case O_CHUNK:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.chunk) && o.chunk >= 1 &&
             o.chunk <= (1u << 30);
        break;
      case O_WINDOW:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.window) && o.window >= 1 &&
             o.window <= (1ull << 40);
        break;
      case O_CLOSE:
        close_opt = true;
        break;
      case O_ABORT:
        o.abort = true;
        break;
      case O_TIMEOUT: {
        char* end = NULL;
        o.timeout = strtod(optarg, &end);
        ok = end != optarg && *end == '\0' && o.timeout > 0 && o.timeout <= 86400;
        break;
      }
      case O_JSON:
        o.json = true;
        break;
      case 'v':
        o.verbose = true;
        break;
      case O_PATTERN:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &pattern_bytes);
        pattern = true;
        break;
      case O_RING:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.ring) && o.ring >= 1 &&
             o.ring <= (1ull << 40);
        o.recv = true;
        break;
      case O_MESSAGES: {
        char* end = NULL;
        errno = 0;
        o.messages = strtoull(optarg, &end, 10);
        ok = errno == 0 && end != optarg && *end == '\0' && optarg[0] != '-' &&
             o.messages <= 1000000000ull;
        o.message = true;
        break;
      }
      case O_MSG_MIN:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.msg_min) && o.msg_min >= 1 &&
             o.msg_min <= (1u << 30);
        break;
      case O_MSG_MAX:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.msg_max) && o.msg_max >= 1 &&
             o.msg_max <= (1u << 30);
        break;
      case O_MSG_BUF:
        ok = parse_bytes(optarg, optarg + strlen(optarg), &o.msg_buf) && o.msg_buf >= 1 &&
             o.msg_buf <= (1u << 30);
        break;
      case O_NO_CHECK:
        o.no_check = true;
        break;
      case 'h':
        print_usage(stdout);
        return 0;
      default:
        print_usage(stderr);
        return 2;
    }
    if (!ok) {
      const struct option* opt = longopts;
      while (opt->name != NULL && opt->val != c)
        opt++;
      fprintf(stderr, "cleave-tcp: bad value '%s' for --%s\n", optarg,
              opt->name != NULL ? opt->name : "?");
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cleave-tcp: unexpected argument '%s'\n", argv[optind]);
    print_usage(stderr);
    return 2;
  }
  if (pattern) {
    if (o.listen || o.connect) {
      fprintf(stderr, "cleave-tcp: --pattern takes no flow\n");
      return 2;
    }
    return write_pattern(pattern_bytes, o.seed);
  }
  const char* problem = NULL;
  if (o.listen == o.connect)
    problem = "give one of --listen PORT and --connect IPv4:PORT";
  else if (o.abort && close_opt)
    problem = "--close and --abort exclude each other";
  else if (o.http && !o.listen)
    problem = "--http serves a request: it needs --listen";
  else if (o.http && o.send)
    problem = "--http sends its own response: no --send with it";
  else if (o.message && (o.send || o.http || o.ring != 0))
    problem = "--messages sends and receives messages: no --send, --http or --ring with it";
  else if (!o.message && (o.msg_buf != 0 || o.msg_min != 1 || o.msg_max != (1u << 20)))
    problem = "--msg-min, --msg-max and --msg-buf need --messages";
  else if (o.msg_min > o.msg_max)
    problem = "--msg-min is larger than --msg-max";
  else if (o.no_check && (o.message || o.http))
    problem = "--no-check measures a byte stream: no --messages or --http with it";
  if (problem != NULL) {
    fprintf(stderr, "cleave-tcp: %s\n", problem);
    print_usage(stderr);
    return 2;
  }
  if (o.chunk > o.window) o.chunk = o.window;
  if (o.msg_buf == 0) o.msg_buf = o.msg_max;
  if (o.message && o.window < o.msg_max) o.window = o.msg_max;
  if (o.message && o.window < o.msg_buf) o.window = o.msg_buf;

  struct tcp* t = calloc(1, sizeof *t);
  if (t == NULL) {
    fprintf(stderr, "cleave-tcp: out of memory\n");
    return 2;
  }
  t->o = &o;
  t->t_start = now_s();
  struct cl_open_attr attr = {.socket_path = o.socket, .name = "cleave-tcp"};
  int r = cl_open(&attr, &t->ctx);
  if (r != 0) {
    fprintf(stderr, "cleave-tcp: cannot connect to cleaved: %s\n", errtext(r));
    free(t);
    return 2;
  }
  if (set_up(t) == 0) {
    run(t);
    verdict(t);
  }
  report(t);
  int code = t->err == 0 ? 0 : 1;
  EVP_MD_CTX_free(t->tx_sha);
  EVP_MD_CTX_free(t->rx_sha);
  EVP_MD_CTX_free(t->tx_len_sha);
  EVP_MD_CTX_free(t->rx_len_sha);
  cl_close(t->ctx); /* the daemon reclaims the flow, the queues, the ring and the heap */
  free(t);
  return code;
}
