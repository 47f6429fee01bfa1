/* cleave-rdma.c - ib_write_bw / ibv_rc_pingpong for cleave queue pairs: two apps, each on its
 * own cleaved, connect one RoCEv2 RC QP over a kernel TCP side channel (cl_qp_local_dest,
 * cl_qp_exchange, cl_qp_connect) and move a seeded pattern with SEND, SEND with immediate, RDMA
 * WRITE (with immediate) and RDMA READ, in lockstep, each move checked by SHA-256 on both ends.
 *
 * Written in C against <cleave/cleave.h>. Each side: a context, the PD, one CQ with a doorbell,
 * one memfd MR (the largest size, at least 4 KiB) with local and remote read and write, one QP.
 * The connector is the requester (it posts every SEND, WRITE and READ); the listener is the
 * responder (it posts the receives, fills the memory READs take, and checks what arrives). The
 * side channel carries short text lines ("plan ...", "ready N", "done", "sha256 HEX"), read a
 * byte at a time and bounded in length; every wait, on it or on the CQ, is bounded by --timeout.
 * The integration tests and the demo use it as their RoCE app. */
#include <arpa/inet.h>
#include <cleave/cleave.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleave_pattern.h"
#include "side_channel.h"
#include "tool_util.h"

static const char usage[] =
    "Usage: cleave-rdma (--listen PORT | --connect IPv4:PORT) [OPTIONS]\n"
    "\n"
    "ib_write_bw for cleave queue pairs: connects one RoCEv2 RC queue pair between two apps\n"
    "(each on its cleaved) over a kernel TCP side channel, moves a seeded pattern with each\n"
    "operation and size in lockstep, and checks every move by SHA-256 on both ends.\n"
    "\n"
    "  -l, --listen PORT      the responder (server): wait for the side channel on\n"
    "                         0.0.0.0:PORT (kernel TCP)\n"
    "  -c, --connect IP:PORT  the requester (client): open the side channel to IP:PORT\n"
    "                         (retried until --timeout while nobody listens)\n"
    "  -s, --socket PATH      cleaved's app socket (default $CLEAVE_APP_SOCKET, else\n"
    "                         /run/cleave/app.sock)\n"
    "      --ops LIST         comma list of send, send_imm, write, write_imm, read (default all\n"
    "                         five, in that order)\n"
    "      --sizes LIST       comma list of sizes, 1 byte to 1g, each a number with an optional\n"
    "                         k, m or g (KiB, MiB, GiB) (default 1,4k,1m)\n"
    "      --mtu N            path MTU: 256, 512, 1024, 2048 or 4096 (default 4096, or the\n"
    "                         largest the port's MTU carries if less)\n"
    "      --selective-repeat Cleave's IRN-style recovery (both sides must give it)\n"
    "      --params TEXT      the QP's transport parameters, e.g. \"dcqcn on\" (< 128 bytes)\n"
    "      --iters N          each data move N times, for goodput (default 1; hashed once)\n"
    "      --timeout SEC      the longest wait for anything: the peer, a completion, a line on\n"
    "                         the side channel (default 30)\n"
    "      --json             one JSON object per line instead of the text lines\n"
    "      --hold SEC         keep the queue pair up SEC seconds after the moves (0-3600,\n"
    "                         default 0), to look at it with cleavectl qp list|show\n"
    "  -h, --help             this text\n"
    "\n";
/* The rest of --help (C99 string literals stop at 4095 characters). */
static const char usage_more[] =
    "Both sides must give the same --ops, --sizes, --iters and --selective-repeat (checked).\n"
    "For each op, for each size, with the bytes at offset 0 of each side's MR:\n"
    "  send, send_imm  the server posts receives of SIZE, says ready; the client fills SIZE\n"
    "                  bytes of the pattern and SENDs them (send_imm: immediate = SIZE); the\n"
    "                  server checks each receive: length SIZE (send_imm: CL_WC_IMM, imm SIZE)\n"
    "  write           the client fills, RDMA WRITEs to the server's rkey at address 0, says\n"
    "                  done\n"
    "  write_imm       as write, with immediate SIZE: the server posts receives first and\n"
    "                  checks each one completes with CL_WC_RDMA_WRITE | CL_WC_IMM, imm SIZE\n"
    "  read            the server fills and says ready; the client RDMA READs the server's\n"
    "                  bytes into its own\n"
    "The receiving side zeroes its bytes first. --iters N repeats the move N times (up to 64\n"
    "requests in flight). Then both hash their SIZE bytes (SHA-256), swap digests over the side\n"
    "channel and print one line:\n"
    "  op=write size=1048576 sha256=HEX peer=HEX match=yes us=US MBps=RATE\n"
    "us is the data move's time in microseconds (the client: from posting to the last\n"
    "completion, summed over the batches; the server: from saying ready to its last receive\n"
    "or the client's done), MBps = SIZE * N / us (10^6 bytes per second). With --json one\n"
    "object per line: {\"op\", \"size\", \"iters\", \"sha256\", \"peer\", \"match\", \"us\",\n"
    "\"MBps\", \"status\", \"message\"}; status is 0 or the CL_E* code of a failure.\n"
    "\n"
    "The pattern of a move is the byte stream of cleave-tcp --pattern (cleave_pattern.py) with\n"
    "seed = SIZE * 8 + K + 1, where K is the op's number in send=0, send_imm=1, write=2,\n"
    "write_imm=3, read=4.\n"
    "\n"
    "Exit status: 0 every move matched; 1 a mismatch, a failed completion, a timeout, or the\n"
    "peer went away; 2 usage, or no cleaved.\n";

#define MAX_SIZES 64
#define MAX_OPS 16
#define BATCH 64         /* requests in flight */
#define OOB_LINE_MAX 256 /* side-channel lines */
#define MIN_MR 4096u
#define MAX_SIZE (1ull << 30)

enum op { OP_SEND, OP_SEND_IMM, OP_WRITE, OP_WRITE_IMM, OP_READ, OP_COUNT };
static const char* const op_names[OP_COUNT] = {"send", "send_imm", "write", "write_imm", "read"};

struct opts {
  bool listen, connect, json, selective_repeat;
  const char* socket;
  const char* params;
  uint16_t port;
  struct sockaddr_in peer;
  char peer_text[32];
  int ops[MAX_OPS];
  unsigned nops;
  uint64_t sizes[MAX_SIZES];
  unsigned nsizes;
  uint32_t mtu; /* 0: cl_qp_connect's default */
  uint64_t iters;
  double timeout;
  unsigned hold; /* seconds the QP stays up after the moves */
};

struct rdma {
  const struct opts* o;
  cl_ctx* ctx;
  cl_pd* pd;
  cl_cq* cq;
  cl_mr* mr;
  cl_qp* qp;
  int memfd;
  uint8_t* buf;
  uint64_t mr_len;
  int sock; /* the side channel */
  struct cl_qp_dest local, remote;
  bool failed;
};

/* ---- Helpers ---- */

static void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("cleave-rdma: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static bool parse_ops(const char* s, struct opts* o) {
  o->nops = 0;
  while (*s != '\0') {
    const char* comma = strchr(s, ',');
    size_t n = comma != NULL ? (size_t)(comma - s) : strlen(s);
    int k = -1;
    for (int i = 0; i < OP_COUNT; i++)
      if (strlen(op_names[i]) == n && strncmp(s, op_names[i], n) == 0) k = i;
    if (k < 0 || o->nops == MAX_OPS) return false;
    o->ops[o->nops++] = k;
    s += n;
    if (*s == ',' && *++s == '\0') return false; /* a trailing comma */
  }
  return o->nops > 0;
}

static bool parse_sizes(const char* s, struct opts* o) {
  o->nsizes = 0;
  while (*s != '\0') {
    const char* comma = strchr(s, ',');
    const char* end = comma != NULL ? comma : s + strlen(s);
    uint64_t v;
    if (!parse_bytes(s, end, &v) || v < 1 || v > MAX_SIZE || o->nsizes == MAX_SIZES) return false;
    o->sizes[o->nsizes++] = v;
    s = end;
    if (*s == ',' && *++s == '\0') return false;
  }
  return o->nsizes > 0;
}

static uint64_t seed_of(int op, uint64_t size) {
  return size * 8 + (uint64_t)op + 1; /* the op in the low bits: even 1-byte moves differ */
}

/* ---- The side channel: text lines over kernel TCP ---- */

static int oob_send(struct rdma* r, const char* fmt, ...) {
  char line[OOB_LINE_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n < 0 || n >= (int)sizeof line) return CL_EINVAL;
  return sc_send(r->sock, line, (size_t)n, r->o->timeout);
}

/* One line without its newline; CL_EPROTO past OOB_LINE_MAX, CL_ECONNRESET at EOF. */
static int oob_recv(struct rdma* r, char* line) {
  return sc_recv(r->sock, line, OOB_LINE_MAX, r->o->timeout);
}

/* Waits for the line `want` (a prefix match when `prefix`); its rest in `rest` if not NULL. */
static int oob_expect(struct rdma* r, const char* want, bool prefix, char* line, const char* what) {
  int e = oob_recv(r, line);
  if (e == CL_ETIMEDOUT) {
    say("timed out after %g s waiting for %s from the peer", r->o->timeout, what);
    return e;
  }
  if (e != 0) {
    say("the side channel failed waiting for %s: %s", what, errtext(e));
    return e;
  }
  size_t n = strlen(want);
  if (prefix ? strncmp(line, want, n) != 0 : strcmp(line, want) != 0) {
    say("expected %s from the peer, got '%.80s'", what, line);
    return CL_EPROTO;
  }
  return 0;
}

static int listen_oob(struct rdma* r) {
  return sc_listen("cleave-rdma", r->o->port, r->o->timeout, &r->sock);
}

static int connect_oob(struct rdma* r) {
  return sc_connect("cleave-rdma", &r->o->peer, r->o->peer_text, r->o->timeout, &r->sock);
}

/* ---- Completions ---- */

/* Takes `n` completions of the QP into wc (events are skipped), each wait bounded. */
static int take(struct rdma* r, struct cl_wc* wc, unsigned n, const char* what) {
  unsigned got = 0;
  double deadline = now_s() + r->o->timeout;
  while (got < n) {
    struct cl_wc w[BATCH];
    int k = cl_poll_cq(r->cq, w, n - got < BATCH ? n - got : BATCH);
    if (k < 0) {
      say("cannot poll the completion queue: %s", errtext(k));
      return k;
    }
    for (int i = 0; i < k; i++)
      if (!(w[i].flags & CL_WC_EVENT) && w[i].flow == cl_qp_flow(r->qp)) wc[got++] = w[i];
    if (k > 0) {
      deadline = now_s() + r->o->timeout;
      continue;
    }
    int left = sc_ms_left(deadline);
    if (left == 0) {
      say("timed out after %g s waiting for %s (%u of %u completions)", r->o->timeout, what, got,
          n);
      return CL_ETIMEDOUT;
    }
    int e = cl_cq_wait(r->cq, left < 100 ? left : 100);
    if (e < 0 && e != CL_ETIMEDOUT) {
      say("cannot wait on the completion queue: %s", errtext(e));
      return e;
    }
  }
  return 0;
}

/* ---- One op and size ---- */

struct result {
  uint64_t us;
  char sha[2 * EVP_MAX_MD_SIZE + 1];
  char peer[2 * EVP_MAX_MD_SIZE + 1];
  int status;
  char msg[160];
};

static int failed(struct result* res, int code, const char* fmt, ...) {
  if (res->status != 0) return res->status;
  res->status = code != 0 ? code : CL_EPROTO;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(res->msg, sizeof res->msg, fmt, ap);
  va_end(ap);
  say("%s", res->msg);
  return res->status;
}

static bool sha256_hex(const uint8_t* p, uint64_t n, char* out) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  bool ok = md != NULL && EVP_DigestInit_ex(md, EVP_sha256(), NULL) == 1 &&
            EVP_DigestUpdate(md, p, (size_t)n) == 1 && EVP_DigestFinal_ex(md, d, &len) == 1;
  EVP_MD_CTX_free(md);
  if (!ok) return false;
  for (unsigned i = 0; i < len; i++)
    sprintf(out + 2 * i, "%02x", d[i]);
  out[2 * len] = '\0';
  return true;
}

/* The peer's digest: 64 hex digits. */
static int peer_digest(struct result* res, const char* hex) {
  size_t n = strspn(hex, "0123456789abcdef");
  if (n != 64 || hex[n] != '\0') return failed(res, CL_EPROTO, "the peer's digest is malformed");
  memcpy(res->peer, hex, n + 1);
  return 0;
}

static bool uses_recv(int op) {
  return op == OP_SEND || op == OP_SEND_IMM || op == OP_WRITE_IMM;
}

/* The server's (responder's) side of one op and size. */
static int serve(struct rdma* r, int op, uint64_t size, struct result* res) {
  char line[OOB_LINE_MAX];
  uint32_t len = (uint32_t)size;
  if (op == OP_READ) {
    struct pattern p;
    pattern_init(&p, seed_of(op, size));
    pattern_fill(&p, r->buf, (size_t)size);
  } else {
    memset(r->buf, 0, (size_t)size);
  }
  double busy = 0;
  for (uint64_t done = 0; done < r->o->iters;) {
    unsigned k = r->o->iters - done < BATCH ? (unsigned)(r->o->iters - done) : BATCH;
    if (uses_recv(op)) {
      struct cl_recv_wr rw[BATCH];
      for (unsigned i = 0; i < k; i++)
        rw[i] = (struct cl_recv_wr){.wr_id = done + i, .mr = r->mr, .offset = 0, .length = len};
      int e = cl_qp_post_recv(r->qp, rw, k);
      if (e != (int)k)
        return failed(res, e < 0 ? e : CL_EAGAIN, "cannot post %u receives: %s", k,
                      errtext(e < 0 ? e : CL_EAGAIN));
    }
    double t0 = now_s();
    if (oob_send(r, "ready %u\n", k) != 0) return failed(res, CL_ECONNRESET, "the peer is gone");
    if (uses_recv(op)) {
      struct cl_wc wc[BATCH];
      int e = take(r, wc, k, "receive completions");
      if (e != 0) return failed(res, e, "%s", errtext(e));
      for (unsigned i = 0; i < k; i++) {
        const struct cl_wc* w = &wc[i];
        uint32_t want_flags = CL_WC_RECV | (op != OP_SEND ? CL_WC_IMM : 0) |
                              (op == OP_WRITE_IMM ? CL_WC_RDMA_WRITE : 0);
        if (w->status != 0)
          return failed(res, w->status, "%s of %" PRIu64 ": a receive failed: %s", op_names[op],
                        size, errtext(w->status));
        if (w->wr_id != done + i || w->opcode != CL_OP_FLOW_RECV || w->flags != want_flags ||
            w->length != len || (op != OP_SEND && w->imm != len))
          return failed(res, CL_EPROTO,
                        "%s of %" PRIu64 ": receive %" PRIu64
                        " completed with opcode %u flags %#x length %u imm %u",
                        op_names[op], size, w->wr_id, w->opcode, w->flags, w->length, w->imm);
      }
    }
    if (oob_expect(r, "done", false, line, "done") != 0)
      return failed(res, CL_EPROTO, "%s of %" PRIu64 ": no done from the peer", op_names[op], size);
    busy += now_s() - t0;
    done += k;
  }
  res->us = (uint64_t)(busy * 1e6);
  if (!sha256_hex(r->buf, size, res->sha)) return failed(res, CL_ENOMEM, "SHA-256 failed");
  if (oob_send(r, "sha256 %s\n", res->sha) != 0 ||
      oob_expect(r, "sha256 ", true, line, "the peer's digest") != 0)
    return failed(res, CL_EPROTO, "%s of %" PRIu64 ": no digest from the peer", op_names[op], size);
  return peer_digest(res, line + 7);
}

/* The client's (requester's) side of one op and size. */
static int request(struct rdma* r, int op, uint64_t size, struct result* res) {
  char line[OOB_LINE_MAX];
  uint32_t len = (uint32_t)size;
  if (op == OP_READ) {
    memset(r->buf, 0, (size_t)size);
  } else {
    struct pattern p;
    pattern_init(&p, seed_of(op, size));
    pattern_fill(&p, r->buf, (size_t)size);
  }
  static const uint32_t wr_op[OP_COUNT] = {CL_WR_SEND, CL_WR_SEND_WITH_IMM, CL_WR_RDMA_WRITE,
                                           CL_WR_RDMA_WRITE_WITH_IMM, CL_WR_RDMA_READ};
  static const uint32_t wc_op[OP_COUNT] = {CL_OP_FLOW_SEND, CL_OP_FLOW_SEND, CL_OP_RDMA_WRITE,
                                           CL_OP_RDMA_WRITE, CL_OP_RDMA_READ};
  double busy = 0;
  for (uint64_t done = 0; done < r->o->iters;) {
    if (oob_expect(r, "ready ", true, line, "ready") != 0)
      return failed(res, CL_EPROTO, "%s of %" PRIu64 ": the peer is not ready", op_names[op], size);
    char* end = NULL;
    unsigned long k = strtoul(line + 6, &end, 10);
    if (*end != '\0' || k == 0 || k > BATCH || k > r->o->iters - done)
      return failed(res, CL_EPROTO, "the peer is ready for %.20s requests", line + 6);
    struct cl_qp_wr wr[BATCH];
    for (unsigned i = 0; i < k; i++)
      wr[i] = (struct cl_qp_wr){.wr_id = done + i,
                                .mr = r->mr,
                                .offset = 0,
                                .length = len,
                                .opcode = wr_op[op],
                                .imm = len,
                                .rkey = r->remote.rkey,
                                .remote_addr = r->remote.addr};
    double t0 = now_s();
    int e = cl_qp_post_send(r->qp, wr, (unsigned)k);
    if (e != (int)k)
      return failed(res, e < 0 ? e : CL_EAGAIN, "cannot post %lu requests: %s", k,
                    errtext(e < 0 ? e : CL_EAGAIN));
    struct cl_wc wc[BATCH];
    if ((e = take(r, wc, (unsigned)k, "request completions")) != 0)
      return failed(res, e, "%s", errtext(e));
    busy += now_s() - t0;
    for (unsigned i = 0; i < k; i++) {
      const struct cl_wc* w = &wc[i];
      if (w->status != 0)
        return failed(res, w->status, "%s of %" PRIu64 " failed: %s", op_names[op], size,
                      errtext(w->status));
      if (w->wr_id != done + i || w->opcode != wc_op[op])
        return failed(res, CL_EPROTO,
                      "%s of %" PRIu64 ": request %" PRIu64 " completed as %" PRIu64
                      " with opcode %u",
                      op_names[op], size, done + i, w->wr_id, w->opcode);
    }
    if (oob_send(r, "done\n") != 0) return failed(res, CL_ECONNRESET, "the peer is gone");
    done += k;
  }
  res->us = (uint64_t)(busy * 1e6);
  if (!sha256_hex(r->buf, size, res->sha)) return failed(res, CL_ENOMEM, "SHA-256 failed");
  if (oob_expect(r, "sha256 ", true, line, "the peer's digest") != 0 ||
      oob_send(r, "sha256 %s\n", res->sha) != 0)
    return failed(res, CL_EPROTO, "%s of %" PRIu64 ": no digest from the peer", op_names[op], size);
  return peer_digest(res, line + 7);
}

static void print_result(const struct opts* o, int op, uint64_t size, const struct result* res,
                         bool match) {
  double mbps = res->us > 0 ? (double)size * (double)o->iters / (double)res->us : 0;
  if (o->json) {
    printf("{\"op\":\"%s\",\"size\":%" PRIu64 ",\"iters\":%" PRIu64
           ",\"sha256\":\"%s\",\"peer\":\"%s\",\"match\":%s,\"us\":%" PRIu64
           ",\"MBps\":%.1f,\"status\":%d,\"message\":",
           op_names[op], size, o->iters, res->sha, res->peer, match ? "true" : "false", res->us,
           mbps, res->status);
    json_string(res->msg);
    printf("}\n");
  } else {
    printf("op=%s size=%" PRIu64 " sha256=%s peer=%s match=%s us=%" PRIu64 " MBps=%.1f\n",
           op_names[op], size, res->sha[0] ? res->sha : "-", res->peer[0] ? res->peer : "-",
           match ? "yes" : "no", res->us, mbps);
  }
  fflush(stdout);
}

/* ---- Set-up and tear-down ---- */

static int set_up(struct rdma* r) {
  const struct opts* o = r->o;
  int e = cl_pd_alloc(r->ctx, &r->pd);
  if (e != 0) {
    say("cannot allocate a protection domain: %s", errtext(e));
    return e;
  }
  if ((e = cl_cq_create(r->ctx, 512, 1, 20, &r->cq)) != 0) {
    say("cannot create a completion queue: %s", errtext(e));
    return e;
  }
  uint64_t largest = MIN_MR;
  for (unsigned i = 0; i < o->nsizes; i++)
    if (o->sizes[i] > largest) largest = o->sizes[i];
  r->mr_len = (largest + 4095) / 4096 * 4096;
  r->memfd = memfd_create("cleave-rdma", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (r->memfd < 0 || ftruncate(r->memfd, (off_t)r->mr_len) != 0) {
    say("cannot make a memfd of %" PRIu64 " bytes: %s", r->mr_len, strerror(errno));
    return CL_ENOMEM;
  }
  unsigned access =
      CL_ACCESS_READ | CL_ACCESS_WRITE | CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE;
  if ((e = cl_mr_reg(r->ctx, r->memfd, r->mr_len, access, &r->mr)) != 0) {
    say("cannot register %" PRIu64 " bytes: %s", r->mr_len, errtext(e));
    return e;
  }
  r->buf = cl_mr_addr(r->mr);
  struct cl_qp_init_attr qa = {
      .cq = r->cq, .max_send_wr = BATCH * 2, .max_recv_wr = BATCH * 2, .params = o->params};
  if ((e = cl_qp_create(r->pd, &qa, &r->qp)) != 0) {
    say("cannot create a queue pair: %s", errtext(e));
    return e;
  }
  return 0;
}

/* The side channel, the halves, the plan, and the QP to RTS. */
static int connect_qp(struct rdma* r) {
  const struct opts* o = r->o;
  int e = o->listen ? listen_oob(r) : connect_oob(r);
  if (e != 0) return e;
  int one = 1;
  setsockopt(r->sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if ((e = cl_qp_local_dest(r->qp, r->mr, &r->local)) != 0) {
    say("cannot describe the queue pair: %s", errtext(e));
    return e;
  }
  if ((e = cl_qp_exchange(r->sock, &r->local, &r->remote, (int)(o->timeout * 1000))) != 0) {
    say("exchanging the queue pairs' halves failed: %s", errtext(e));
    return e;
  }
  /* Both sides must walk the same plan. */
  char plan[OOB_LINE_MAX], theirs[OOB_LINE_MAX];
  int n = snprintf(plan, sizeof plan, "plan iters=%" PRIu64 " sr=%d ops=", o->iters,
                   o->selective_repeat ? 1 : 0);
  for (unsigned i = 0; i < o->nops && n < (int)sizeof plan; i++)
    n += snprintf(plan + n, sizeof plan - (size_t)n, "%s%s", i ? "," : "", op_names[o->ops[i]]);
  for (unsigned i = 0; i < o->nsizes && n < (int)sizeof plan; i++)
    n +=
        snprintf(plan + n, sizeof plan - (size_t)n, "%s%" PRIu64, i ? "," : " sizes=", o->sizes[i]);
  if (n >= (int)sizeof plan - 1) {
    /* Too long for one line: compare a digest of it instead. */
    char hex[2 * EVP_MAX_MD_SIZE + 1];
    if (!sha256_hex((const uint8_t*)plan, strlen(plan), hex)) return CL_ENOMEM;
    snprintf(plan, sizeof plan, "plan sha256=%s", hex);
  }
  if ((e = oob_send(r, "%s\n", plan)) != 0 ||
      (e = oob_expect(r, "plan ", true, theirs, "the peer's plan")) != 0) {
    if (e != CL_ETIMEDOUT) say("cannot agree on the plan: %s", errtext(e));
    return e;
  }
  if (strcmp(plan, theirs) != 0) {
    say("the peer's options differ: ours '%s', theirs '%.200s'", plan, theirs);
    return CL_EINVAL;
  }
  struct cl_qp_attr opt = {.path_mtu = o->mtu, .selective_repeat = o->selective_repeat ? 1 : 0};
  unsigned mask =
      (o->mtu != 0 ? CL_QP_PATH_MTU : 0) | (o->selective_repeat ? CL_QP_SELECTIVE_REPEAT : 0);
  if ((e = cl_qp_connect(r->qp, &r->local, &r->remote, &opt, mask)) != 0) {
    say("cannot connect the queue pair to QPN %#x: %s", r->remote.qpn, errtext(e));
    return e;
  }
  if (r->remote.length < r->mr_len) {
    say("the peer offers %" PRIu64 " bytes, fewer than the %" PRIu64 " the sizes need",
        r->remote.length, r->mr_len);
    return CL_EINVAL;
  }
  return 0;
}

static void tear_down(struct rdma* r) {
  if (r->sock >= 0) close(r->sock);
  if (r->qp != NULL) {
    int e = cl_qp_destroy(r->qp);
    if (e != 0 && e != CL_EDAEMON) say("cannot destroy the queue pair: %s", errtext(e));
  }
  /* Flushed requests may still be on the CQ: they need nothing from us. */
  if (r->mr != NULL) cl_mr_dereg(r->mr);
  if (r->cq != NULL) cl_cq_destroy(r->cq);
  if (r->pd != NULL) cl_pd_dealloc(r->pd);
  if (r->memfd >= 0) close(r->memfd);
  if (r->ctx != NULL) cl_close(r->ctx);
}

int main(int argc, char** argv) {
  struct opts o = {.iters = 1, .timeout = 30};
  bool ops_given = false, sizes_given = false;
  enum { O_OPS = 256, O_SIZES, O_MTU, O_SR, O_PARAMS, O_ITERS, O_JSON, O_TIMEOUT, O_HOLD };
  static const struct option longopts[] = {{"listen", required_argument, NULL, 'l'},
                                           {"connect", required_argument, NULL, 'c'},
                                           {"socket", required_argument, NULL, 's'},
                                           {"ops", required_argument, NULL, O_OPS},
                                           {"sizes", required_argument, NULL, O_SIZES},
                                           {"mtu", required_argument, NULL, O_MTU},
                                           {"selective-repeat", no_argument, NULL, O_SR},
                                           {"params", required_argument, NULL, O_PARAMS},
                                           {"iters", required_argument, NULL, O_ITERS},
                                           {"json", no_argument, NULL, O_JSON},
                                           {"timeout", required_argument, NULL, O_TIMEOUT},
                                           {"hold", required_argument, NULL, O_HOLD},
                                           {"help", no_argument, NULL, 'h'},
                                           {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "l:c:s:h", longopts, NULL)) != -1;) {
    bool ok = true;
    switch (c) {
      case 'l':
        ok = parse_port(optarg, &o.port);
        o.listen = true;
        break;
      case 'c':
        ok = strlen(optarg) < sizeof o.peer_text && parse_peer(optarg, &o.peer);
        if (ok) snprintf(o.peer_text, sizeof o.peer_text, "%s", optarg);
        o.connect = true;
        break;
      case 's':
        o.socket = optarg;
        break;
      case O_OPS:
        ok = parse_ops(optarg, &o);
        ops_given = true;
        break;
      case O_SIZES:
        ok = parse_sizes(optarg, &o);
        sizes_given = true;
        break;
      case O_MTU: {
        char* end = NULL;
        errno = 0;
        unsigned long v = strtoul(optarg, &end, 10);
        ok = errno == 0 && end != optarg && *end == '\0' &&
             (v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096);
        o.mtu = (uint32_t)v;
        break;
      }
      case O_SR:
        o.selective_repeat = true;
        break;
      case O_PARAMS:
        ok = strlen(optarg) < 128;
        o.params = optarg;
        break;
      case O_ITERS: {
        char* end = NULL;
        errno = 0;
        o.iters = strtoull(optarg, &end, 10);
        ok = errno == 0 && end != optarg && *end == '\0' && optarg[0] != '-' && o.iters >= 1 &&
             o.iters <= 1000000000ull;
        break;
      }
      case O_JSON:
        o.json = true;
        break;
      case O_TIMEOUT: {
        char* end = NULL;
        o.timeout = strtod(optarg, &end);
        ok = end != optarg && *end == '\0' && o.timeout > 0 && o.timeout <= 86400;
        break;
      }
      case O_HOLD: {
        char* end = NULL;
        unsigned long v = strtoul(optarg, &end, 10);
        ok = end != optarg && *end == '\0' && v <= 3600;
        o.hold = (unsigned)v;
        break;
      }
      case 'h':
        fputs(usage, stdout);
        fputs(usage_more, stdout);
        return 0;
      default:
        fputs(usage, stderr);
        return 2;
    }
    if (!ok) {
      const struct option* opt = longopts;
      while (opt->name != NULL && opt->val != c)
        opt++;
      fprintf(stderr, "cleave-rdma: bad value '%s' for --%s\n", optarg,
              opt->name != NULL ? opt->name : "?");
      return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "cleave-rdma: unexpected argument '%s'\n", argv[optind]);
    fputs(usage, stderr);
    return 2;
  }
  if (o.listen == o.connect) {
    fprintf(stderr, "cleave-rdma: give one of --listen PORT and --connect IPv4:PORT\n");
    fputs(usage, stderr);
    return 2;
  }
  if (!ops_given) {
    for (int i = 0; i < OP_COUNT; i++)
      o.ops[o.nops++] = i;
  }
  if (!sizes_given) {
    o.sizes[0] = 1;
    o.sizes[1] = 4096;
    o.sizes[2] = 1u << 20;
    o.nsizes = 3;
  }

  struct rdma r = {.o = &o, .memfd = -1, .sock = -1};
  struct cl_open_attr attr = {.socket_path = o.socket, .name = "cleave-rdma"};
  int e = cl_open(&attr, &r.ctx);
  if (e != 0) {
    say("cannot connect to cleaved: %s", errtext(e));
    return 2;
  }
  int code = 0;
  if (set_up(&r) != 0 || connect_qp(&r) != 0) code = 1;
  for (unsigned i = 0; code == 0 && i < o.nops; i++) {
    for (unsigned j = 0; code == 0 && j < o.nsizes; j++) {
      int op = o.ops[i];
      uint64_t size = o.sizes[j];
      struct result res = {0};
      e = o.listen ? serve(&r, op, size, &res) : request(&r, op, size, &res);
      bool match = e == 0 && strcmp(res.sha, res.peer) == 0;
      if (e == 0 && !match)
        failed(&res, CL_EPROTO, "%s of %" PRIu64 ": the digests differ (ours %s, the peer's %s)",
               op_names[op], size, res.sha, res.peer);
      print_result(&o, op, size, &res, match);
      if (!match) code = 1;
    }
  }
  if (code == 0 && o.hold != 0) {
    /* The moves are done and printed: the QP stays in RTS for cleavectl qp list|show. */
    fflush(stdout);
    sleep(o.hold);
  }
  tear_down(&r);
  return code;
}
