/* cleave-blk.c - fio for Solar block I/O: a target exports a volume, an initiator on another
 * cleaved writes and reads blocks of it at offsets with many I/Os in flight, prints IOPS and
 * latency percentiles, the connection's paths as cleaved counts them, and verifies every byte.
 *
 * Written in C against <cleave/cleave.h> (cl_blk_*). Each side: a context, the PD, one CQ with a
 * doorbell, one memfd MR, one Solar QP; the two connect over a kernel TCP side channel, first
 * swapping their cleaveds' addresses (a routes line: the QP's "via", one route per port both
 * have), then the QP halves (cl_qp_local_dest, cl_qp_exchange, cl_qp_connect), the target
 * offering its volume (the exchanged MR length is the volume's size). The initiator keeps a shadow
 * of the volume: a write puts fresh bytes both in its buffer and in the shadow, a read is compared
 * with the shadow when it completes, and two I/Os in flight never share a slot (offsets are
 * multiples of --bs), so every comparison is exact. At the end the initiator says "done", the
 * target answers with the SHA-256 of its whole volume, and the initiator compares it with its
 * shadow's. Every wait is bounded by --timeout but the target's for the initiator's "done", which
 * lasts while the side channel stays open (the target cannot know how long the initiator runs). The
 * integration tests and the demo use it as their Solar app. --transport tcp moves the same I/Os as
 * messages over one cleave TCP flow instead (tests/bench/blk_qd.py's baseline). */
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
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "side_channel.h"
#include "tool_util.h"

static const char usage[] =
    "Usage: cleave-blk (--export PORT | --connect IPv4:PORT) [OPTIONS]\n"
    "\n"
    "fio for Solar block I/O over cleaved: the target (--export) exports a volume; the\n"
    "initiator (--connect) writes and reads it with many I/Os in flight, prints IOPS, latency\n"
    "percentiles and the connection's paths, and verifies every byte (a shadow of the volume,\n"
    "then the SHA-256 of the whole volume on both ends).\n"
    "\n"
    "  -e, --export PORT     the target: wait for the side channel on 0.0.0.0:PORT\n"
    "  -c, --connect IP:PORT the initiator: open the side channel to IP:PORT (kernel TCP;\n"
    "                        retried until --timeout while nobody listens)\n"
    "  -s, --socket PATH     cleaved's app socket (default $CLEAVE_APP_SOCKET, else\n"
    "                        /run/cleave/app.sock)\n"
    "      --ctl PATH        cleaved's management socket, for the path counters and the\n"
    "                        ports' addresses (default $CLEAVE_SOCKET, else\n"
    "                        /run/cleave/cleaved.sock)\n"
    "      --volume SIZE     the target's volume (default 64m; k, m, g suffixes)\n"
    "      --bs SIZE         bytes per I/O, a multiple of 512 up to 16m (default 4k)\n"
    "      --qd N            I/Os in flight, 1-1024 (default 16)\n"
    "      --rw MODE         write, read, randwrite, randread, randrw (default), or\n"
    "                        writeread: random writes for the first half of the I/Os (of\n"
    "                        --ios, or of --time), then random reads\n"
    "      --mix PCT         randrw: the share of reads, 0-100 (default 50)\n"
    "      --transport T     solar (default), or tcp: the same I/Os as messages over one\n"
    "                        cleave TCP flow (CL_FLOW_MESSAGE), for comparison: a request\n"
    "                        (a 24-byte header, a write's data) and a reply (a read's data);\n"
    "                        the target copies between its buffers and the volume. Both\n"
    "                        sides, with the same --bs and --qd (at most 512); the target\n"
    "                        needs --ctl (to learn its cleaved's address)\n"
    "      --paths N         the connection's paths, 1-64 (default 4); both sides\n"
    "      --routes N        the connection's routes, 1-4: with several ports on both\n"
    "                        cleaveds (their addresses from --ctl, swapped on the side\n"
    "                        channel), path p goes over route p % N, each through a port\n"
    "                        of its own (default: as many as both have)\n"
    "      --block B         Solar's block (one packet), 256-4096 bytes within the path MTU\n"
    "                        (default the path MTU); both sides\n"
    "      --time SEC        run this long (default 5)\n"
    "      --ios N           stop after N I/Os instead (0: by --time)\n"
    "      --seed N          the offsets' and the data's seed (default 1)\n"
    "      --interval MS     the initiator: with --json, a line {\"t\":SEC,\"ios\":N} every\n"
    "                        MS ms (1-10000) before the result, N the I/Os done by then\n"
    "      --timeout SEC     the longest wait for the peer, a completion or a line (default\n"
    "                        30); the target waits for the initiator's end while it runs\n"
    "      --json            one JSON object at the end instead of the text lines\n"
    "  -h, --help            this text\n"
    "\n"
    "Exit status: 0 every I/O completed and every byte matched; 1 an I/O failed, a byte\n"
    "differed, a wait timed out, or the peer went away; 2 usage, or no cleaved.\n";

#define OOB_LINE_MAX 160
#define MAX_QD 1024
#define MAX_PATHS 64
#define MAX_ROUTES 4       /* cleaved's: a QP's own route and 3 "via" */
#define MAX_LAT (1u << 22) /* latencies kept (4 Mi); past that, every other one is dropped */

enum mode { M_WRITE, M_READ, M_RANDWRITE, M_RANDREAD, M_RANDRW, M_WRITEREAD };
static const char* const mode_names[] = {"write",    "read",   "randwrite",
                                         "randread", "randrw", "writeread"};

struct opts {
  bool target, json, tcp;
  const char* socket;
  const char* ctl;
  uint16_t port;
  struct sockaddr_in peer;
  char peer_text[32];
  uint64_t volume, bs;
  unsigned qd, mix, paths, block, routes, interval_ms;
  enum mode mode;
  double time, timeout;
  uint64_t ios, seed;
};

struct io {
  bool busy, read;
  bool tx_done, rx_done; /* --transport tcp: the request's send and the reply are back */
  int32_t status;        /* --transport tcp: the first failure of the two */
  uint64_t slot;
  double sent;
};

/* --transport tcp: every message starts with this header, in the hosts' byte order (both ends
 * are this tool): a request (a write's data after it), or a reply (a read's data after it). */
struct tcp_hdr {
  uint16_t magic, op;
  uint32_t id;     /* the initiator's I/O */
  uint64_t offset; /* in the volume */
  uint32_t len;    /* bytes from offset */
  int32_t status;  /* a reply's: 0 or a CL_E* code */
};
enum {
  TCP_HDR = sizeof(struct tcp_hdr),
  TCP_MAGIC = 0xB1C0,
  TCP_WRITE = 1,
  TCP_READ = 2,
  TCP_REPLY = 3
};

struct blk {
  const struct opts* o;
  cl_ctx* ctx;
  cl_pd* pd;
  cl_cq* cq;
  cl_mr* mr;
  cl_qp* qp;
  int memfd;
  uint8_t* buf; /* target: the volume; initiator: qd I/O buffers of bs each */
  uint64_t len;
  int sock;
  struct cl_qp_dest local, remote;
  /* --transport tcp: the submit queue, the flow, and where the message slots start in the MR
   * (each TCP_HDR + bs; target: after the volume, qd for requests then qd for replies;
   * initiator: qd requests then qd replies) */
  cl_sq* sq;
  cl_flow flow;
  uint64_t slots_at;
  /* initiator */
  uint64_t volume; /* the target's, from the exchange */
  uint8_t* shadow;
  uint8_t* slot_busy;
  struct io ios[MAX_QD];
  uint64_t rng, next_seq_slot;
  uint64_t posted; /* I/Os posted so far */
  double half_at;  /* --rw writeread by --time: when the reads start */
  float* lat_us;
  size_t nlat;
  uint64_t reads, writes, mismatches, failures;
  int first_error;
};

static void say(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("cleave-blk: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static uint64_t xorshift(uint64_t* x) {
  *x ^= *x << 13;
  *x ^= *x >> 7;
  *x ^= *x << 17;
  return *x;
}

static void fill(uint8_t* p, uint64_t n, uint64_t* x) {
  for (uint64_t i = 0; i < n; i += 8) {
    uint64_t v = xorshift(x);
    memcpy(p + i, &v, n - i < 8 ? n - i : 8);
  }
}

/* ---- the side channel: text lines over kernel TCP (side_channel.h) ---- */

static int oob_send(struct blk* b, const char* line) {
  return sc_send(b->sock, line, strlen(line), b->o->timeout);
}

static int oob_recv(struct blk* b, char* line, double timeout) {
  return sc_recv(b->sock, line, OOB_LINE_MAX, timeout);
}

static bool sha256_hex(const uint8_t* p, uint64_t n, char* out) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(p, n, md, &len, EVP_sha256(), NULL) != 1) return false;
  for (unsigned i = 0; i < len; i++)
    snprintf(out + 2 * i, 3, "%02x", md[i]);
  return true;
}

/* ---- setting up: context, PD, CQ, MR, the Solar QP, connected over the side channel ---- */

static int set_up(struct blk* b) {
  const struct opts* o = b->o;
  const struct cl_open_attr attr = {o->socket, "cleave-blk"};
  int e = cl_open(&attr, &b->ctx);
  if (e != 0) {
    say("cannot reach cleaved at %s: %s", o->socket, errtext(e));
    return e;
  }
  if ((e = cl_pd_alloc(b->ctx, &b->pd)) != 0) return say("cl_pd_alloc: %s", errtext(e)), e;
  if ((e = cl_cq_create(b->ctx, 2048, 1, 50, &b->cq)) != 0)
    return say("cl_cq_create: %s", errtext(e)), e;
  const uint64_t msg_slots = o->tcp ? 2 * (uint64_t)o->qd * (TCP_HDR + o->bs) : 0;
  b->slots_at = o->target ? o->volume : 0;
  b->len = o->target ? o->volume + msg_slots : o->tcp ? msg_slots : (uint64_t)o->qd * o->bs;
  b->memfd = memfd_create("cleave-blk", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (b->memfd < 0 || ftruncate(b->memfd, (off_t)b->len) != 0) {
    say("cannot make %" PRIu64 " bytes of memory: %s", b->len, strerror(errno));
    return -errno;
  }
  unsigned access = CL_ACCESS_READ | CL_ACCESS_WRITE;
  if (o->target && !o->tcp) access |= CL_ACCESS_REMOTE_READ | CL_ACCESS_REMOTE_WRITE;
  if ((e = cl_mr_reg(b->ctx, b->memfd, b->len, access, &b->mr)) != 0) {
    say("cl_mr_reg of %" PRIu64 " bytes: %s", b->len, errtext(e));
    return e;
  }
  b->buf = cl_mr_addr(b->mr);
  if (o->tcp) { /* a request and a reply per I/O, with room to spare */
    uint32_t n = 64;
    while (n < 2 * o->qd + 16)
      n <<= 1;
    if ((e = cl_sq_create(b->ctx, b->cq, n, &b->sq)) != 0)
      return say("cl_sq_create: %s", errtext(e)), e;
    return 0;
  }
  return 0;
}

static int daemon_ips(const struct blk* b, char ips[][32], int max);

/* The Solar QP, its routes agreed first: each side says "routes R A B ..." (its --routes and its
 * cleaved's addresses); both take N = the least of the two R and the two address counts, and
 * give their QP the peer's addresses 2..N as "via" (its first is the QP's own, the GID's). */
static int make_qp(struct blk* b) {
  const struct opts* o = b->o;
  char own[MAX_ROUTES][32], peer[MAX_ROUTES][32];
  const int n_own = daemon_ips(b, own, MAX_ROUTES);
  char line[OOB_LINE_MAX];
  int k = snprintf(line, sizeof line, "routes %u", o->routes);
  for (int i = 0; i < n_own; i++)
    k += snprintf(line + k, sizeof line - (size_t)k, " %s", own[i]);
  snprintf(line + k, sizeof line - (size_t)k, "\n");
  int e = oob_send(b, line);
  if (e == 0 && (e = oob_recv(b, line, o->timeout)) != 0)
    say("no routes line from the peer: %s", errtext(e));
  if (e != 0) return e;
  unsigned r_peer = 0;
  int used = 0, n_peer = 0;
  if (sscanf(line, "routes %u%n", &r_peer, &used) != 1 || r_peer == 0 || r_peer > MAX_ROUTES)
    return say("expected the peer's routes, got '%.80s'", line), CL_EPROTO;
  for (const char* p = line + used;
       n_peer < MAX_ROUTES && sscanf(p, " %31s%n", peer[n_peer], &used) == 1; p += used) {
    struct in_addr a;
    if (inet_pton(AF_INET, peer[n_peer], &a) != 1)
      return say("the peer's routes line names '%s', not an IPv4 address", peer[n_peer]), CL_EPROTO;
    n_peer++;
  }
  unsigned n = o->routes < r_peer ? o->routes : r_peer;
  if ((unsigned)n_own < n) n = (unsigned)n_own;
  if ((unsigned)n_peer < n) n = (unsigned)n_peer;
  char params[128];
  k = snprintf(params, sizeof params, "paths %u", o->paths);
  if (o->block != 0) k += snprintf(params + k, sizeof params - (size_t)k, " block %u", o->block);
  for (unsigned i = 1; i < n; i++)
    k += snprintf(params + k, sizeof params - (size_t)k, "%s%s", i == 1 ? " via " : ",", peer[i]);
  e = cl_blk_create(b->pd, b->cq, o->target ? b->mr : NULL, o->qd, params, &b->qp);
  if (e != 0) say("cl_blk_create (%s): %s", params, errtext(e));
  return e;
}

static int connect_qp(struct blk* b) {
  int e = b->o->target
              ? sc_listen("cleave-blk", b->o->port, b->o->timeout, &b->sock)
              : sc_connect("cleave-blk", &b->o->peer, b->o->peer_text, b->o->timeout, &b->sock);
  if (e != 0) return e;
  if ((e = make_qp(b)) != 0) return e;
  if ((e = cl_qp_local_dest(b->qp, b->o->target ? b->mr : NULL, &b->local)) != 0)
    return say("cl_qp_local_dest: %s", errtext(e)), e;
  if ((e = cl_qp_exchange(b->sock, &b->local, &b->remote, (int)(b->o->timeout * 1000))) != 0) {
    say("cannot swap QP halves with the peer: %s", errtext(e));
    return e;
  }
  if (!b->o->target) {
    b->volume = b->remote.length;
    if (b->volume < b->o->bs) {
      say("the target's volume (%" PRIu64 " bytes) is smaller than one I/O (--bs %" PRIu64 ")",
          b->volume, b->o->bs);
      return CL_EINVAL;
    }
  }
  if ((e = cl_qp_connect(b->qp, &b->local, &b->remote, NULL, 0)) != 0) {
    say("cl_qp_connect: %s", errtext(e));
    return e;
  }
  return 0;
}

/* ---- the initiator's I/Os ---- */

static uint64_t slots(const struct blk* b) {
  return b->volume / b->o->bs;
}

/* The next I/O's slot: random or sequential, never one in flight; UINT64_MAX when none is free
 * after a few tries (the caller waits for a completion). */
static uint64_t pick_slot(struct blk* b) {
  const uint64_t n = slots(b);
  const bool seq = b->o->mode == M_WRITE || b->o->mode == M_READ;
  for (int tries = 0; tries < 64; tries++) {
    uint64_t s = seq ? b->next_seq_slot++ % n : xorshift(&b->rng) % n;
    if (!b->slot_busy[s]) return s;
  }
  return UINT64_MAX;
}

static bool pick_read(struct blk* b) {
  switch (b->o->mode) {
    case M_READ:
    case M_RANDREAD:
      return true;
    case M_RANDRW:
      return xorshift(&b->rng) % 100 < b->o->mix;
    case M_WRITEREAD:
      return b->o->ios != 0 ? b->posted >= b->o->ios / 2 : now_s() >= b->half_at;
    default:
      return false;
  }
}

static void record_latency(struct blk* b, double us) {
  if (b->nlat == MAX_LAT) { /* halve the sample: keep every other one */
    for (size_t k = 0; k < MAX_LAT / 2; k++)
      b->lat_us[k] = b->lat_us[2 * k];
    b->nlat = MAX_LAT / 2;
  }
  b->lat_us[b->nlat++] = (float)us;
}

static uint8_t* io_data(const struct blk* b, unsigned i, bool read);

/* I/O wc->wr_id ended. */
static void complete(struct blk* b, const struct cl_wc* wc) {
  if (wc->wr_id >= b->o->qd || !b->ios[wc->wr_id].busy) {
    say("a completion for no I/O in flight (wr_id %" PRIu64 ")", wc->wr_id);
    b->failures++;
    return;
  }
  struct io* io = &b->ios[wc->wr_id];
  const uint64_t bs = b->o->bs;
  io->busy = false;
  b->slot_busy[io->slot] = 0;
  if (wc->status != 0) {
    if (b->failures++ == 0) b->first_error = wc->status;
    say("%s of %" PRIu64 " bytes at %" PRIu64 " failed: %s", io->read ? "read" : "write", bs,
        io->slot * bs, errtext(wc->status));
    return;
  }
  record_latency(b, (now_s() - io->sent) * 1e6);
  if (io->read) {
    b->reads++;
    if (memcmp(io_data(b, (unsigned)wc->wr_id, true), b->shadow + io->slot * bs, bs) != 0) {
      if (b->mismatches++ < 5)
        say("read at volume offset %" PRIu64 " differs from what was written there", io->slot * bs);
    }
  } else {
    b->writes++;
  }
}

static int cmp_float(const void* a, const void* c) {
  float x = *(const float*)a, y = *(const float*)c;
  return x < y ? -1 : x > y;
}

static double pct(const float* v, size_t n, double p) {
  if (n == 0) return 0;
  size_t k = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
  return v[k];
}

/* ---- the connection's paths, as cleaved's management socket reports the flow ---- */

struct path_row {
  char state[8];
  uint64_t route, cwnd, srtt_ns, sent, resent, timeouts, downs, ups;
};

static bool json_number(const char* s, const char* key, uint64_t* out) {
  char k[48];
  snprintf(k, sizeof k, "\"%s\":", key);
  const char* p = strstr(s, k);
  if (p == NULL) return false;
  *out = strtoull(p + strlen(k), NULL, 10);
  return true;
}

/* One request to cleaved's management socket (--ctl): its answer line in ans (NUL-terminated),
 * true when it says ok. */
static bool mgmt_call(const struct blk* b, const char* command, const char* args, char* ans,
                      size_t size) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  struct sockaddr_un a = {.sun_family = AF_UNIX};
  if (strlen(b->o->ctl) >= sizeof a.sun_path) return close(s), false;
  strcpy(a.sun_path, b->o->ctl);
  struct timeval tv = {5, 0};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (connect(s, (struct sockaddr*)&a, sizeof a) != 0) return close(s), false;
  char req[256];
  int n = snprintf(req, sizeof req, "{\"version\":1,\"id\":1,\"command\":\"%s\",\"args\":%s}\n",
                   command, args);
  if (send(s, req, (size_t)n, MSG_NOSIGNAL) != n) return close(s), false;
  size_t got = 0;
  while (got < size - 1) {
    ssize_t r = recv(s, ans + got, size - 1 - got, 0);
    if (r <= 0) break;
    got += (size_t)r;
    if (memchr(ans + got - (size_t)r, '\n', (size_t)r) != NULL) break;
  }
  close(s);
  ans[got] = '\0';
  return strstr(ans, "\"ok\":true") != NULL;
}

/* The flow's paths and its crc_drops; the number of paths found, or -1 when the management
 * socket cannot be asked. */
static int query_paths(const struct blk* b, struct path_row* rows, uint64_t* crc_drops) {
  static char ans[1 << 16];
  char args[32];
  snprintf(args, sizeof args, "{\"id\":%u}", (unsigned)cl_qp_flow(b->qp));
  if (!mgmt_call(b, "flow.show", args, ans, sizeof ans)) return -1;
  json_number(ans, "crc_drops", crc_drops);
  int k = 0;
  for (; k < MAX_PATHS; k++) {
    char key[32];
    snprintf(key, sizeof key, "\"path%d_state\":\"", k);
    const char* p = strstr(ans, key);
    if (p == NULL) break;
    p += strlen(key);
    snprintf(rows[k].state, sizeof rows[k].state, "%.*s", (int)strcspn(p, "\""), p);
    const char* fields[] = {"route",  "cwnd",     "srtt_ns", "sent",
                            "resent", "timeouts", "downs",   "ups"};
    uint64_t* dst[] = {&rows[k].route,  &rows[k].cwnd,     &rows[k].srtt_ns, &rows[k].sent,
                       &rows[k].resent, &rows[k].timeouts, &rows[k].downs,   &rows[k].ups};
    for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) {
      snprintf(key, sizeof key, "path%d_%s", k, fields[f]);
      *dst[f] = 0;
      json_number(ans, key, dst[f]);
    }
  }
  return k;
}

/* ---- --transport tcp: the same I/Os as messages over one cleave TCP flow ----
 * Side channel: the initiator says "tcp BS QD", the target checks they are its own and answers
 * "tcp IPv4 PORT VOLUME" (its cleaved's first address, from the management socket) once it
 * listens there in message mode, or "differ". Each I/O: the initiator posts a receive for the
 * reply (replies come in request order, so receives are taken in the order they were posted),
 * then sends the request. The target serves requests in order: a write's data copied into the
 * volume, a read's copied out of it into the reply. Message slot i of each kind is TCP_HDR + bs
 * bytes; wr_id says which: K_REQ | i, K_REPLY | i. */

enum { K_REQ = 0, K_REPLY = 1 << 16 };

static uint8_t* msg_slot(const struct blk* b, unsigned kind, unsigned i) {
  const uint64_t one = TCP_HDR + b->o->bs;
  return b->buf + b->slots_at + (kind == K_REPLY ? b->o->qd + i : i) * one;
}

static uint64_t msg_offset(const struct blk* b, unsigned kind, unsigned i) {
  return (uint64_t)(msg_slot(b, kind, i) - b->buf);
}

static int post_msg(struct blk* b, uint32_t opcode, uint64_t wr_id, uint64_t offset, uint32_t len) {
  const struct cl_send_wr wr = {.wr_id = wr_id,
                                .mr = b->mr,
                                .offset = offset,
                                .length = len,
                                .opcode = opcode,
                                .flow = b->flow};
  int r = cl_post_send(b->sq, &wr, 1);
  if (r == 1) return 0;
  say("cl_post_send: %s", r == 0 ? "the submit queue is full" : errtext(r));
  return r == 0 ? CL_EAGAIN : r;
}

/* Waits for the flow's event `want` (CL_EV_ACCEPTED or CL_EV_CONNECTED); its flow in *flow. */
static int wait_flow_event(struct blk* b, uint32_t want, cl_flow* flow) {
  const double deadline = now_s() + b->o->timeout;
  while (now_s() < deadline) {
    struct cl_wc wc;
    int k = cl_poll_cq(b->cq, &wc, 1);
    if (k < 0) return say("cl_poll_cq: %s", errtext(k)), k;
    if (k == 0) {
      int e = cl_cq_wait(b->cq, 100);
      if (e < 0 && e != CL_ETIMEDOUT) return say("cl_cq_wait: %s", errtext(e)), e;
      continue;
    }
    if ((wc.flags & CL_WC_EVENT) == 0) continue;
    if (wc.opcode == want) {
      *flow = wc.flow;
      return 0;
    }
    if (wc.opcode == CL_EV_REFUSED)
      return say("the flow was refused: %s", errtext(wc.status)), wc.status;
  }
  say("no %s in %g s", want == CL_EV_ACCEPTED ? "flow from the initiator" : "connection",
      b->o->timeout);
  return CL_ETIMEDOUT;
}

/* The addresses of our cleaved's ports, first port first (from --ctl's port.show); how many, 0
 * when the management socket does not answer. */
static int daemon_ips(const struct blk* b, char ips[][32], int max) {
  static char ans[1 << 16];
  if (!mgmt_call(b, "port.show", "{}", ans, sizeof ans)) return 0;
  int n = 0;
  for (const char* p = ans; n < max && (p = strstr(p, "\"ipv4\":\"")) != NULL;) {
    p += strlen("\"ipv4\":\"");
    snprintf(ips[n], 32, "%.*s", (int)strcspn(p, "/\""), p);
    struct in_addr a;
    if (inet_pton(AF_INET, ips[n], &a) == 1) n++;
  }
  return n;
}

static int connect_tcp(struct blk* b) {
  const struct opts* o = b->o;
  char line[OOB_LINE_MAX];
  int e = o->target ? sc_listen("cleave-blk", o->port, o->timeout, &b->sock)
                    : sc_connect("cleave-blk", &o->peer, o->peer_text, o->timeout, &b->sock);
  if (e != 0) return e;
  snprintf(line, sizeof line, "tcp %" PRIu64 " %u\n", o->bs, o->qd);
  if (o->target) {
    char got[OOB_LINE_MAX], ip[1][32];
    if ((e = oob_recv(b, got, o->timeout)) != 0)
      return say("no line from the initiator: %s", errtext(e)), e;
    strcat(got, "\n");
    if (strcmp(got, line) != 0) {
      oob_send(b, "differ\n");
      say("the peer's options differ (--transport, --bs, --qd): it sent '%.*s'",
          (int)strcspn(got, "\n"), got);
      return CL_EINVAL;
    }
    if (daemon_ips(b, ip, 1) != 1) {
      say("cleaved's management socket %s did not give its address (--transport tcp needs it)",
          o->ctl);
      return CL_EINVAL;
    }
    struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(o->port)};
    uint32_t listener = 0;
    if ((e = cl_listen_ex(b->ctx, b->cq, &any, "tcp", CL_FLOW_MESSAGE, &listener)) != 0)
      return say("cl_listen_ex on port %u: %s", o->port, errtext(e)), e;
    snprintf(line, sizeof line, "tcp %s %u %" PRIu64 "\n", ip[0], o->port, o->volume);
    if ((e = oob_send(b, line)) == 0) e = wait_flow_event(b, CL_EV_ACCEPTED, &b->flow);
    cl_unlisten(b->ctx, listener);
    if (e != 0) return e;
    for (unsigned i = 0; i < o->qd; i++) { /* a request fits each */
      if ((e = post_msg(b, CL_OP_FLOW_RECV, K_REQ | i, msg_offset(b, K_REQ, i),
                        (uint32_t)(TCP_HDR + o->bs))) != 0)
        return e;
    }
    return 0;
  }
  if ((e = oob_send(b, line)) != 0) return e;
  if ((e = oob_recv(b, line, o->timeout)) != 0)
    return say("no answer from the target: %s", errtext(e)), e;
  char ip[32];
  unsigned port = 0;
  if (strcmp(line, "differ") == 0) {
    say("the peer's options differ (--transport, --bs, --qd)");
    return CL_EINVAL;
  }
  struct sockaddr_in to = {.sin_family = AF_INET};
  if (sscanf(line, "tcp %31s %u %" SCNu64, ip, &port, &b->volume) != 3 || port == 0 ||
      port > 65535 || inet_pton(AF_INET, ip, &to.sin_addr) != 1)
    return say("expected the target's address, got '%.80s'", line), CL_EPROTO;
  if (b->volume < o->bs) {
    say("the target's volume (%" PRIu64 " bytes) is smaller than one I/O (--bs %" PRIu64 ")",
        b->volume, o->bs);
    return CL_EINVAL;
  }
  to.sin_port = htons((uint16_t)port);
  if ((e = cl_connect_ex(b->ctx, b->cq, &to, "tcp", CL_FLOW_MESSAGE, &b->flow)) != 0)
    return say("cl_connect_ex to %s:%u: %s", ip, port, errtext(e)), e;
  cl_flow f;
  return wait_flow_event(b, CL_EV_CONNECTED, &f);
}

/* The target: serves requests until the initiator says "done" on the side channel. */
static int serve_tcp(struct blk* b) {
  const struct opts* o = b->o;
  for (;;) {
    struct cl_wc wc[64];
    int k = cl_poll_cq(b->cq, wc, 64);
    if (k < 0) return say("cl_poll_cq: %s", errtext(k)), k;
    for (int j = 0; j < k; j++) {
      const struct cl_wc* w = &wc[j];
      if ((w->flags & CL_WC_EVENT) != 0) {
        if (w->opcode == CL_EV_CLOSED && w->flow == b->flow)
          return say("the initiator's flow closed: %s", errtext(w->status)), CL_ECONNRESET;
        continue;
      }
      const unsigned i = (unsigned)(w->wr_id & 0xFFFF);
      int e = 0;
      if (w->status != 0) {
        say("a %s failed: %s", w->opcode == CL_OP_FLOW_RECV ? "receive" : "send",
            errtext(w->status));
        return w->status;
      }
      if ((w->wr_id & K_REPLY) != 0) { /* the reply went: its request slot takes the next */
        e = post_msg(b, CL_OP_FLOW_RECV, K_REQ | i, msg_offset(b, K_REQ, i),
                     (uint32_t)(TCP_HDR + o->bs));
      } else {
        struct tcp_hdr q, r;
        memcpy(&q, msg_slot(b, K_REQ, i), sizeof q);
        r = (struct tcp_hdr){.magic = TCP_MAGIC, .op = TCP_REPLY, .id = q.id};
        uint32_t data = 0;
        const bool fits = q.len <= o->bs && q.offset <= o->volume && q.len <= o->volume - q.offset;
        if (q.magic != TCP_MAGIC || !fits ||
            (q.op == TCP_WRITE ? w->length != TCP_HDR + q.len
                               : q.op != TCP_READ || w->length != TCP_HDR)) {
          r.status = CL_EINVAL;
        } else if (q.op == TCP_WRITE) {
          memcpy(b->buf + q.offset, msg_slot(b, K_REQ, i) + TCP_HDR, q.len);
        } else {
          memcpy(msg_slot(b, K_REPLY, i) + TCP_HDR, b->buf + q.offset, q.len);
          data = q.len;
        }
        r.len = data;
        memcpy(msg_slot(b, K_REPLY, i), &r, sizeof r);
        e = post_msg(b, CL_OP_FLOW_SEND, K_REPLY | i, msg_offset(b, K_REPLY, i), TCP_HDR + data);
      }
      if (e != 0) return e;
    }
    if (k > 0) continue;
    struct pollfd p = {b->sock, POLLIN, 0};
    if (poll(&p, 1, 0) == 1) return 0; /* the initiator's "done" (or its end) */
    int e = cl_cq_wait(b->cq, 10);
    if (e < 0 && e != CL_ETIMEDOUT) return say("cl_cq_wait: %s", errtext(e)), e;
  }
}

/* The initiator: I/O `i`, its data in place (post), as a receive for the reply and the
 * request; 1 posted, or an error. */
static int post_tcp(struct blk* b, unsigned i) {
  const struct io* io = &b->ios[i];
  const uint64_t bs = b->o->bs;
  const struct tcp_hdr q = {.magic = TCP_MAGIC,
                            .op = io->read ? TCP_READ : TCP_WRITE,
                            .id = i,
                            .offset = io->slot * bs,
                            .len = (uint32_t)bs};
  memcpy(msg_slot(b, K_REQ, i), &q, sizeof q);
  int e = post_msg(b, CL_OP_FLOW_RECV, K_REPLY | i, msg_offset(b, K_REPLY, i),
                   (uint32_t)(TCP_HDR + bs));
  if (e == 0)
    e = post_msg(b, CL_OP_FLOW_SEND, K_REQ | i, msg_offset(b, K_REQ, i),
                 (uint32_t)(TCP_HDR + (io->read ? 0 : bs)));
  return e == 0 ? 1 : e;
}

/* Where I/O `i`'s bytes are: a write's before it goes, a read's once it has come. */
static uint8_t* io_data(const struct blk* b, unsigned i, bool read) {
  if (!b->o->tcp) return b->buf + (uint64_t)i * b->o->bs;
  return msg_slot(b, read ? K_REPLY : K_REQ, i) + TCP_HDR;
}

/* Posts I/O `i`: a slot (random or sequential, none in flight), a read or a write, its bytes
 * in place, then the transport's requests; 1 posted, 0 none free, or an error. */
static int post(struct blk* b, unsigned i) {
  struct io* io = &b->ios[i];
  uint64_t s = pick_slot(b);
  if (s == UINT64_MAX) return 0;
  io->slot = s;
  io->read = pick_read(b);
  io->tx_done = io->rx_done = false;
  io->status = 0;
  const uint64_t bs = b->o->bs;
  uint8_t* data = io_data(b, i, io->read);
  if (io->read) {
    memset(data, 0xA5, bs); /* stale bytes must not pass for the volume's */
  } else {
    fill(data, bs, &b->rng);
    memcpy(b->shadow + s * bs, data, bs); /* the slot is ours until the write completes */
  }
  int e;
  if (b->o->tcp) {
    e = post_tcp(b, i);
  } else {
    const uint64_t at = (uint64_t)i * bs;
    e = io->read ? cl_blk_read(b->qp, i, b->mr, at, (uint32_t)bs, s * bs)
                 : cl_blk_write(b->qp, i, b->mr, at, (uint32_t)bs, s * bs);
    if (e < 0) say("cl_blk_%s: %s", io->read ? "read" : "write", errtext(e));
  }
  if (e <= 0) return e;
  io->busy = true;
  b->slot_busy[s] = 1;
  io->sent = now_s();
  return 1;
}

/* A completion of the initiator's flow: true when it ended I/O `i` (both halves back). */
static bool complete_tcp(struct blk* b, const struct cl_wc* wc) {
  const unsigned i = (unsigned)(wc->wr_id & 0xFFFF);
  if (i >= b->o->qd || !b->ios[i].busy) {
    say("a completion for no I/O in flight (wr_id %" PRIu64 ")", wc->wr_id);
    b->failures++;
    return false;
  }
  struct io* io = &b->ios[i];
  struct cl_wc done = *wc;
  done.wr_id = i;
  if ((wc->wr_id & K_REPLY) != 0) {
    io->rx_done = true;
    struct tcp_hdr r;
    memcpy(&r, msg_slot(b, K_REPLY, i), sizeof r);
    const uint32_t want = io->read ? (uint32_t)b->o->bs : 0;
    if (wc->status == 0 && (r.magic != TCP_MAGIC || r.op != TCP_REPLY || r.id != i ||
                            (r.status == 0 && (r.len != want || wc->length != TCP_HDR + want)))) {
      done.status = CL_EPROTO;
    } else if (wc->status == 0) {
      done.status = r.status;
    }
    if (io->status == 0) io->status = done.status;
  } else {
    io->tx_done = true;
    if (io->status == 0) io->status = wc->status;
  }
  if (!io->tx_done || !io->rx_done) return false;
  done.status = io->status;
  complete(b, &done);
  return true;
}

/* ---- the two roles ---- */

static int run_target(struct blk* b) {
  const uint64_t volume = b->o->volume;
  if (!b->o->json) {
    if (b->o->tcp) {
      printf("exported %" PRIu64 " bytes over cleave TCP, serving the initiator\n", volume);
    } else {
      printf("exported %" PRIu64 " bytes as connection %u (peer %u), waiting for the initiator\n",
             volume, b->local.qpn, b->remote.qpn);
    }
    fflush(stdout);
  }
  char line[OOB_LINE_MAX];
  if (b->o->tcp) {
    int e = serve_tcp(b);
    if (e != 0) return e;
  }
  /* The initiator runs for --time or --ios: wait for its "done" with no limit of our own past
   * the side channel's EOF, which ends us too. */
  int e;
  while ((e = oob_recv(b, line, 3600)) == CL_ETIMEDOUT) {
  }
  if (e != 0) return say("the side channel failed waiting for done: %s", errtext(e)), e;
  if (strcmp(line, "done") != 0) return say("expected done, got '%.80s'", line), CL_EPROTO;
  char hex[65], out[OOB_LINE_MAX];
  if (!sha256_hex(b->buf, volume, hex)) return CL_ENOMEM;
  snprintf(out, sizeof out, "sha256 %s\n", hex);
  if ((e = oob_send(b, out)) != 0) return e;
  if (b->o->json) {
    printf("{\"role\":\"target\",\"volume\":%" PRIu64 ",\"sha256\":\"%s\"}\n", volume, hex);
  } else {
    printf("volume sha256 %s\n", hex);
  }
  return 0;
}

static int run_initiator(struct blk* b) {
  const struct opts* o = b->o;
  b->shadow = calloc(1, b->volume);
  b->slot_busy = calloc(1, slots(b));
  b->lat_us = malloc(sizeof(float) * MAX_LAT);
  if (b->shadow == NULL || b->slot_busy == NULL || b->lat_us == NULL) return CL_ENOMEM;
  b->rng = o->seed * 0x9E3779B97F4A7C15ull + 1;
  const double start = now_s();
  const double end = start + o->time;
  b->half_at = start + o->time / 2;
  uint64_t done = 0, inflight = 0;
  double last_progress = start;
  double next_report = start + o->interval_ms / 1e3;
  int e = 0;
  for (;;) {
    if (o->interval_ms != 0 && o->json && now_s() >= next_report) {
      printf("{\"t\":%.4f,\"ios\":%" PRIu64 "}\n", now_s() - start, done);
      fflush(stdout); /* read as it comes (tests/bench/blk_wires.py) */
      next_report += o->interval_ms / 1e3;
    }
    const bool more = o->ios != 0 ? b->posted < o->ios : now_s() < end;
    if (more && b->failures == 0) {
      for (unsigned i = 0; i < o->qd && (o->ios == 0 || b->posted < o->ios); i++) {
        if (b->ios[i].busy) continue;
        int r = post(b, i);
        if (r < 0) return r;
        if (r == 0) break;
        b->posted++;
        inflight++;
      }
    }
    if (inflight == 0 && (!more || b->failures != 0)) break;
    struct cl_wc wc[64];
    int k = cl_poll_cq(b->cq, wc, 64);
    if (k < 0) return say("cl_poll_cq: %s", errtext(k)), k;
    const cl_flow mine = o->tcp ? b->flow : cl_qp_flow(b->qp);
    for (int j = 0; j < k; j++) {
      if (wc[j].flow != mine) continue;
      if ((wc[j].flags & CL_WC_EVENT) != 0) {
        if (wc[j].opcode != CL_EV_CLOSED) continue;
        say("the flow to the target closed: %s", errtext(wc[j].status));
        return CL_ECONNRESET;
      }
      if (o->tcp) {
        if (!complete_tcp(b, &wc[j])) continue;
      } else {
        complete(b, &wc[j]);
      }
      done++;
      inflight--;
    }
    if (k > 0) {
      last_progress = now_s();
      continue;
    }
    if (now_s() - last_progress > o->timeout) {
      say("no I/O completed for %g s (%" PRIu64 " in flight)", o->timeout, inflight);
      return CL_ETIMEDOUT;
    }
    if ((e = cl_cq_wait(b->cq, 10)) < 0 && e != CL_ETIMEDOUT) {
      return say("cl_cq_wait: %s", errtext(e)), e;
    }
  }
  const double secs = now_s() - start;

  /* The whole volume, both ends. */
  char line[OOB_LINE_MAX], hex[65];
  if ((e = oob_send(b, "done\n")) != 0) return say("cannot say done: %s", errtext(e)), e;
  if ((e = oob_recv(b, line, o->timeout)) != 0)
    return say("no digest from the target: %s", errtext(e)), e;
  if (strncmp(line, "sha256 ", 7) != 0 || !sha256_hex(b->shadow, b->volume, hex))
    return say("expected the target's digest, got '%.80s'", line), CL_EPROTO;
  const bool same = strcmp(line + 7, hex) == 0;

  qsort(b->lat_us, b->nlat, sizeof(float), cmp_float);
  const double iops = secs > 0 ? (double)done / secs : 0;
  const double mbps = iops * (double)o->bs / 1e6;
  const double p50 = pct(b->lat_us, b->nlat, 50), p99 = pct(b->lat_us, b->nlat, 99),
               p999 = pct(b->lat_us, b->nlat, 99.9);
  struct path_row rows[MAX_PATHS];
  uint64_t crc_drops = 0;
  int np = o->tcp ? 0 : query_paths(b, rows, &crc_drops);
  const bool ok = b->failures == 0 && b->mismatches == 0 && same;
  if (o->json) {
    printf("{\"role\":\"initiator\",\"transport\":\"%s\",\"rw\":\"%s\",\"bs\":%" PRIu64
           ",\"qd\":%u,\"paths\":%u,"
           "\"ios\":%" PRIu64 ",\"reads\":%" PRIu64 ",\"writes\":%" PRIu64
           ",\"seconds\":%.3f,"
           "\"iops\":%.0f,\"mb_per_s\":%.1f,\"lat_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f},"
           "\"failed\":%" PRIu64 ",\"first_error\":%d,\"mismatches\":%" PRIu64
           ",\"volume_sha256_match\":%s,\"crc_drops\":%" PRIu64 ",\"path\":[",
           o->tcp ? "tcp" : "solar", mode_names[o->mode], o->bs, o->qd, o->paths, done, b->reads,
           b->writes, secs, iops, mbps, p50, p99, p999, b->failures, b->first_error, b->mismatches,
           same ? "true" : "false", crc_drops);
    for (int k = 0; k < np; k++) {
      printf("%s{\"state\":\"%s\",\"route\":%" PRIu64 ",\"cwnd\":%" PRIu64 ",\"srtt_ns\":%" PRIu64
             ",\"sent\":%" PRIu64 ",\"resent\":%" PRIu64 ",\"timeouts\":%" PRIu64
             ",\"downs\":%" PRIu64 ",\"ups\":%" PRIu64 "}",
             k == 0 ? "" : ",", rows[k].state, rows[k].route, rows[k].cwnd, rows[k].srtt_ns,
             rows[k].sent, rows[k].resent, rows[k].timeouts, rows[k].downs, rows[k].ups);
    }
    printf("],\"ok\":%s}\n", ok ? "true" : "false");
  } else {
    char over[32];
    if (o->tcp) {
      snprintf(over, sizeof over, "over cleave TCP");
    } else {
      snprintf(over, sizeof over, "paths %u", o->paths);
    }
    printf("%s bs %" PRIu64 " qd %u %s: %" PRIu64 " I/Os (%" PRIu64 " reads, %" PRIu64
           " writes) in %.2f s\n",
           mode_names[o->mode], o->bs, o->qd, over, done, b->reads, b->writes, secs);
    printf("  %.0f IOPS, %.1f MB/s; latency p50 %.1f us, p99 %.1f us, p99.9 %.1f us\n", iops, mbps,
           p50, p99, p999);
    if (np < 0) {
      printf("  paths: cleaved's management socket %s did not answer\n", o->ctl);
    } else if (!o->tcp) {
      printf("  %-5s %-5s %5s %10s %10s %10s %8s %8s %5s\n", "PATH", "STATE", "ROUTE", "CWND",
             "SRTT-US", "SENT", "RESENT", "TIMEOUTS", "DOWNS");
      for (int k = 0; k < np; k++)
        printf("  %-5d %-5s %5" PRIu64 " %10" PRIu64 " %10.1f %10" PRIu64 " %8" PRIu64 " %8" PRIu64
               " %5" PRIu64 "\n",
               k, rows[k].state, rows[k].route, rows[k].cwnd, (double)rows[k].srtt_ns / 1000,
               rows[k].sent, rows[k].resent, rows[k].timeouts, rows[k].downs);
    }
    printf("  verify: %" PRIu64 " failed, %" PRIu64 " reads differed, volume sha256 %s\n",
           b->failures, b->mismatches, same ? "matches" : "DIFFERS");
  }
  return ok ? 0 : CL_EIO;
}

static void tear_down(struct blk* b) {
  if (b->sock >= 0) close(b->sock);
  if (b->qp != NULL) cl_qp_destroy(b->qp);
  if (b->sq != NULL) cl_sq_destroy(b->sq); /* CL_EBUSY while the flow is open: cl_close ends both */
  if (b->mr != NULL) cl_mr_dereg(b->mr);
  if (b->cq != NULL) cl_cq_destroy(b->cq);
  if (b->pd != NULL) cl_pd_dealloc(b->pd);
  if (b->ctx != NULL) cl_close(b->ctx);
  if (b->memfd >= 0) close(b->memfd);
  free(b->shadow);
  free(b->slot_busy);
  free(b->lat_us);
}

/* ---- options ---- */

static bool parse_uint(const char* s, uint64_t lo, uint64_t hi, uint64_t* out) {
  char* end = NULL;
  if (*s < '0' || *s > '9') return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

/* A usage error: exit status 2. */
static int bad(const char* option, const char* got, const char* want) {
  fprintf(stderr, "cleave-blk: bad value '%s' for --%s (%s); see --help\n", got, option, want);
  return 2;
}

int main(int argc, char** argv) {
  struct opts o = {.volume = 64ull << 20,
                   .bs = 4096,
                   .qd = 16,
                   .mix = 50,
                   .paths = 4,
                   .routes = MAX_ROUTES,
                   .mode = M_RANDRW,
                   .time = 5,
                   .timeout = 30,
                   .seed = 1};
  o.socket =
      getenv("CLEAVE_APP_SOCKET") != NULL ? getenv("CLEAVE_APP_SOCKET") : "/run/cleave/app.sock";
  o.ctl = getenv("CLEAVE_SOCKET") != NULL ? getenv("CLEAVE_SOCKET") : "/run/cleave/cleaved.sock";
  enum {
    O_CTL = 256,
    O_VOLUME,
    O_BS,
    O_QD,
    O_RW,
    O_MIX,
    O_PATHS,
    O_ROUTES,
    O_INTERVAL,
    O_BLOCK,
    O_TIME,
    O_IOS,
    O_SEED,
    O_TIMEOUT,
    O_JSON,
    O_TRANSPORT
  };
  static const struct option longs[] = {{"export", required_argument, 0, 'e'},
                                        {"connect", required_argument, 0, 'c'},
                                        {"socket", required_argument, 0, 's'},
                                        {"ctl", required_argument, 0, O_CTL},
                                        {"volume", required_argument, 0, O_VOLUME},
                                        {"bs", required_argument, 0, O_BS},
                                        {"qd", required_argument, 0, O_QD},
                                        {"rw", required_argument, 0, O_RW},
                                        {"mix", required_argument, 0, O_MIX},
                                        {"paths", required_argument, 0, O_PATHS},
                                        {"routes", required_argument, 0, O_ROUTES},
                                        {"interval", required_argument, 0, O_INTERVAL},
                                        {"block", required_argument, 0, O_BLOCK},
                                        {"time", required_argument, 0, O_TIME},
                                        {"ios", required_argument, 0, O_IOS},
                                        {"seed", required_argument, 0, O_SEED},
                                        {"timeout", required_argument, 0, O_TIMEOUT},
                                        {"json", no_argument, 0, O_JSON},
                                        {"transport", required_argument, 0, O_TRANSPORT},
                                        {"help", no_argument, 0, 'h'},
                                        {0, 0, 0, 0}};
  bool exp = false, con = false;
  int c;
  uint64_t v;
  while ((c = getopt_long(argc, argv, "e:c:s:h", longs, NULL)) != -1) {
    switch (c) {
      case 'e':
        if (!parse_port(optarg, &o.port)) return bad("export", optarg, "a port, 1-65535");
        exp = true;
        break;
      case 'c':
        if (!parse_peer(optarg, &o.peer)) return bad("connect", optarg, "IPv4:PORT");
        snprintf(o.peer_text, sizeof o.peer_text, "%s", optarg);
        con = true;
        break;
      case 's':
        o.socket = optarg;
        break;
      case O_CTL:
        o.ctl = optarg;
        break;
      case O_VOLUME:
        if (!parse_bytes(optarg, optarg + strlen(optarg), &o.volume) || o.volume < 4096 ||
            o.volume > (64ull << 30))
          return bad("volume", optarg, "4k to 64g");
        break;
      case O_BS:
        if (!parse_bytes(optarg, optarg + strlen(optarg), &o.bs) || o.bs == 0 || o.bs % 512 != 0 ||
            o.bs > (16u << 20))
          return bad("bs", optarg, "a multiple of 512 up to 16m");
        break;
      case O_QD:
        if (!parse_uint(optarg, 1, MAX_QD, &v)) return bad("qd", optarg, "1-1024");
        o.qd = (unsigned)v;
        break;
      case O_RW: {
        int m = -1;
        for (int k = 0; k < (int)(sizeof mode_names / sizeof *mode_names); k++)
          if (strcmp(optarg, mode_names[k]) == 0) m = k;
        if (m < 0)
          return bad("rw", optarg, "write, read, randwrite, randread, randrw or writeread");
        o.mode = (enum mode)m;
        break;
      }
      case O_MIX:
        if (!parse_uint(optarg, 0, 100, &v)) return bad("mix", optarg, "0-100");
        o.mix = (unsigned)v;
        break;
      case O_PATHS:
        if (!parse_uint(optarg, 1, MAX_PATHS, &v)) return bad("paths", optarg, "1-64");
        o.paths = (unsigned)v;
        break;
      case O_INTERVAL:
        if (!parse_uint(optarg, 1, 10000, &v)) return bad("interval", optarg, "1-10000 ms");
        o.interval_ms = (unsigned)v;
        break;
      case O_ROUTES:
        if (!parse_uint(optarg, 1, MAX_ROUTES, &v)) return bad("routes", optarg, "1-4");
        o.routes = (unsigned)v;
        break;
      case O_BLOCK:
        if (!parse_uint(optarg, 256, 4096, &v)) return bad("block", optarg, "256-4096");
        o.block = (unsigned)v;
        break;
      case O_TIME:
        if (!parse_uint(optarg, 1, 86400, &v)) return bad("time", optarg, "1-86400 seconds");
        o.time = (double)v;
        break;
      case O_IOS:
        if (!parse_uint(optarg, 0, UINT64_MAX, &v)) return bad("ios", optarg, "a count");
        o.ios = v;
        break;
      case O_SEED:
        if (!parse_uint(optarg, 0, UINT64_MAX, &v)) return bad("seed", optarg, "a number");
        o.seed = v;
        break;
      case O_TIMEOUT:
        if (!parse_uint(optarg, 1, 3600, &v)) return bad("timeout", optarg, "1-3600 seconds");
        o.timeout = (double)v;
        break;
      case O_JSON:
        o.json = true;
        break;
      case O_TRANSPORT:
        if (strcmp(optarg, "solar") != 0 && strcmp(optarg, "tcp") != 0)
          return bad("transport", optarg, "solar or tcp");
        o.tcp = strcmp(optarg, "tcp") == 0;
        break;
      case 'h':
        fputs(usage, stdout);
        return 0;
      default:
        fputs("cleave-blk: see --help\n", stderr);
        return 2;
    }
  }
  if (optind != argc) {
    fprintf(stderr, "cleave-blk: unexpected argument '%s'; see --help\n", argv[optind]);
    return 2;
  }
  if (exp == con) {
    fputs("cleave-blk: give one of --export PORT and --connect IPv4:PORT; see --help\n", stderr);
    return 2;
  }
  o.target = exp;
  if (o.tcp && o.qd > 512) {
    fputs("cleave-blk: --transport tcp takes --qd up to 512; see --help\n", stderr);
    return 2;
  }
  if ((uint64_t)o.qd * o.bs > (1ull << 30)) {
    fputs("cleave-blk: --qd x --bs: at most 1g of buffers; see --help\n", stderr);
    return 2;
  }
  struct blk b = {.o = &o, .memfd = -1, .sock = -1};
  int e = set_up(&b);
  const bool no_cleaved = b.ctx == NULL;
  if (e == 0) e = o.tcp ? connect_tcp(&b) : connect_qp(&b);
  if (e == 0) e = o.target ? run_target(&b) : run_initiator(&b);
  tear_down(&b);
  return e == 0 ? 0 : no_cleaved ? 2 : 1;
}
