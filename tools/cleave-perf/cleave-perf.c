/* cleave-perf.c - a libcleave app that measures the app path through cleaved: request round
 * trips through the notification pipes, pipelined request rate, and bytes moved by the local
 * copy engine and by sends into posted receive buffers, each checked byte for byte.
 *
 * Written in C against <cleave/cleave.h> alone: it is also the proof that the C ABI is enough. */
#include <cleave/cleave.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DEPTH 256

static const char usage[] =
    "Usage: cleave-perf [OPTIONS] [nop|copy|send|base|all]\n"
    "\n"
    "Measures the app path through cleaved (default: all):\n"
    "  nop    request round trip through the dataplane, then the pipelined request rate\n"
    "  copy   the local copy engine: heap to heap, checked\n"
    "  send   sends into posted receive buffers, checked\n"
    "  base   baselines on this machine, now: a round trip over a unix socketpair between two\n"
    "         processes (syscall IPC) and memcpy of the same size in this process\n"
    "\n"
    "Options:\n"
    "  -s, --socket PATH   cleaved's app socket (default $CLEAVE_APP_SOCKET, else\n"
    "                      /run/cleave/app.sock)\n"
    "  -n, --count N       requests per measurement (default 100000)\n"
    "  -b, --bytes N       bytes per copy or send (default 65536, at most 1048576)\n"
    "  -q, --depth N       requests in flight when pipelining (default 32, at most 256)\n"
    "  -k, --check-every N compare the data of every Nth copy or send (default 1: all)\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit status: 0 success, 1 a request failed or data differed, 2 usage or connection error.\n";

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

struct perf {
  cl_ctx* ctx;
  cl_cq* cq;
  cl_sq* sq;
  cl_rq* rq;
  unsigned count, bytes, depth;
  unsigned check_every; /* compare the data of every Nth request */
};

/* Waits for one completion; fails on a bad status. */
static int wait_one(struct perf* p, struct cl_wc* wc) {
  for (;;) {
    int n = cl_poll_cq(p->cq, wc, 1);
    if (n < 0) return n;
    if (n == 1) return wc->status;
  }
}

static int run_nop(struct perf* p) {
  double* lat = malloc(sizeof(double) * p->count);
  if (lat == NULL) return CL_ENOMEM;
  struct cl_send_wr wr = {.opcode = CL_OP_NOP};
  struct cl_wc wc;
  for (unsigned i = 0; i < p->count; i++) {
    double t0 = now_us();
    wr.wr_id = i;
    int r = cl_post_send(p->sq, &wr, 1);
    if (r != 1 || (r = wait_one(p, &wc)) != 0 || wc.wr_id != i) {
      free(lat);
      return r < 0 ? r : CL_EPROTO;
    }
    lat[i] = now_us() - t0;
  }
  qsort(lat, p->count, sizeof(double), cmp_double);
  printf("nop   round trip through the dataplane: %u requests, median %.2f us, p99 %.2f us\n",
         p->count, lat[p->count / 2], lat[(size_t)p->count * 99 / 100]);
  free(lat);

  /* Pipelined: keep `depth` requests in flight. */
  unsigned posted = 0, done = 0;
  double t0 = now_us();
  struct cl_send_wr wrs[MAX_DEPTH];
  memset(wrs, 0, sizeof wrs);
  while (done < p->count) {
    unsigned room = p->depth - (posted - done);
    if (room > p->count - posted) room = p->count - posted;
    if (room > 0) {
      int r = cl_post_send(p->sq, wrs, room);
      if (r < 0) return r;
      posted += (unsigned)r;
    }
    struct cl_wc wcs[MAX_DEPTH];
    int n = cl_poll_cq(p->cq, wcs, MAX_DEPTH);
    if (n < 0) return n;
    for (int k = 0; k < n; k++) {
      if (wcs[k].status != 0) return wcs[k].status;
    }
    done += (unsigned)n;
  }
  double us = now_us() - t0;
  printf("nop   pipelined, %u in flight: %.2f M requests/s (%.0f ns each)\n", p->depth,
         p->count / us, us * 1e3 / p->count);
  return 0;
}

static void fill(unsigned char* b, unsigned n, unsigned seed) {
  for (unsigned i = 0; i < n; i++)
    b[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 8));
}

/* copy and send: `depth` slots of `bytes`; each request's target is checked when it completes. */
static int run_data(struct perf* p, int send) {
  unsigned slots = p->depth;
  unsigned char* src = cl_alloc(p->ctx, p->bytes, 64);
  unsigned char* dst = cl_alloc(p->ctx, (size_t)p->bytes * slots, 64);
  if (src == NULL || dst == NULL) {
    fprintf(stderr, "cleave-perf: the region's heap is too small for %u x %u bytes; use -b or -q\n",
            slots, p->bytes);
    return CL_ENOMEM;
  }
  fill(src, p->bytes, 1);
  uint64_t src_off = cl_heap_offset(p->ctx, src), dst_off = cl_heap_offset(p->ctx, dst);
  unsigned posted = 0, done = 0, sends_done = 0, bad = 0, checked = 0;
  double t0 = now_us();
  while (done < p->count) {
    while (posted < p->count && posted - done < slots) {
      unsigned slot = posted % slots;
      if (send) {
        struct cl_recv_wr rw = {
            .wr_id = slot, .offset = dst_off + (uint64_t)slot * p->bytes, .length = p->bytes};
        int r = cl_post_recv(p->rq, &rw, 1);
        if (r != 1) return r < 0 ? r : CL_EAGAIN;
      }
      struct cl_send_wr wr = {.wr_id = slot,
                              .offset = src_off,
                              .length = p->bytes,
                              .opcode = send ? CL_OP_SEND : CL_OP_COPY,
                              .dst_offset = dst_off + (uint64_t)slot * p->bytes,
                              .target = p->rq};
      /* The submit queue holds twice the requests in flight: it is never full here. */
      int r = cl_post_send(p->sq, &wr, 1);
      if (r != 1) return r < 0 ? r : CL_EAGAIN;
      posted++;
    }
    struct cl_wc wcs[MAX_DEPTH];
    int n = cl_poll_cq(p->cq, wcs, MAX_DEPTH);
    if (n < 0) return n;
    for (int k = 0; k < n; k++) {
      if (wcs[k].status != 0) return wcs[k].status;
      int data_landed = send ? (wcs[k].flags & CL_WC_RECV) != 0 : 1;
      if (send && !data_landed) {
        sends_done++;
        continue;
      }
      unsigned slot = (unsigned)wcs[k].wr_id;
      if (wcs[k].length != p->bytes) bad++;
      if (done % p->check_every == 0) {
        if (memcmp(dst + (size_t)slot * p->bytes, src, p->bytes) != 0) bad++;
        memset(dst + (size_t)slot * p->bytes, 0, p->bytes); /* the next use must write it again */
        checked++;
      }
      done++;
    }
  }
  while (send && sends_done < p->count) { /* the send completions still owed */
    struct cl_wc wc;
    int r = cl_poll_cq(p->cq, &wc, 1);
    if (r < 0) return r;
    if (r == 1 && wc.status != 0) return wc.status;
    sends_done += (unsigned)r;
  }
  double us = now_us() - t0;
  printf("%-5s %u x %u B, %u in flight: %.2f GB/s, %.2f M requests/s, %u checked, %u differed\n",
         send ? "send" : "copy", p->count, p->bytes, slots, (double)p->count * p->bytes / us / 1e3,
         p->count / us, checked, bad);
  cl_free(p->ctx, src);
  cl_free(p->ctx, dst);
  return bad == 0 ? 0 : CL_EPROTO;
}

/* Baselines measured in the same run: what an app would pay without cleave's pipes. */
static int run_base(struct perf* p) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return CL_ENOMEM;
  pid_t child = fork();
  if (child == 0) { /* echo until EOF */
    char b[64];
    close(sv[0]);
    ssize_t n;
    while ((n = read(sv[1], b, sizeof b)) > 0)
      if (write(sv[1], b, (size_t)n) != n) break;
    _exit(0);
  }
  close(sv[1]);
  double* lat = malloc(sizeof(double) * p->count);
  char msg[64] = {0};
  for (unsigned i = 0; lat != NULL && i < p->count; i++) {
    double t0 = now_us();
    if (write(sv[0], msg, sizeof msg) != sizeof msg || read(sv[0], msg, sizeof msg) != sizeof msg)
      break;
    lat[i] = now_us() - t0;
  }
  close(sv[0]);
  waitpid(child, NULL, 0);
  if (lat == NULL) return CL_ENOMEM;
  qsort(lat, p->count, sizeof(double), cmp_double);
  printf("base  unix socketpair round trip, two processes: median %.2f us, p99 %.2f us\n",
         lat[p->count / 2], lat[(size_t)p->count * 99 / 100]);
  free(lat);

  unsigned char *src = malloc(p->bytes), *dst = malloc((size_t)p->bytes * p->depth);
  if (src == NULL || dst == NULL) return CL_ENOMEM;
  fill(src, p->bytes, 1);
  double t0 = now_us();
  for (unsigned i = 0; i < p->count; i++)
    memcpy(dst + (size_t)(i % p->depth) * p->bytes, src, p->bytes);
  double us = now_us() - t0;
  int same = memcmp(dst, src, p->bytes) == 0;
  printf("base  memcpy in this process, %u x %u B: %.2f GB/s\n", p->count, p->bytes,
         (double)p->count * p->bytes / us / 1e3);
  free(src);
  free(dst);
  return same ? 0 : CL_EPROTO;
}

int main(int argc, char** argv) {
  struct perf p = {.count = 100000, .bytes = 65536, .depth = 32, .check_every = 1};
  const char* sock = NULL;
  static const struct option opts[] = {{"socket", required_argument, NULL, 's'},
                                       {"count", required_argument, NULL, 'n'},
                                       {"bytes", required_argument, NULL, 'b'},
                                       {"depth", required_argument, NULL, 'q'},
                                       {"check-every", required_argument, NULL, 'k'},
                                       {"help", no_argument, NULL, 'h'},
                                       {NULL, 0, NULL, 0}};
  for (int c; (c = getopt_long(argc, argv, "s:n:b:q:k:h", opts, NULL)) != -1;) {
    char* end = NULL;
    unsigned long v = 0;
    if (c == 'n' || c == 'b' || c == 'q' || c == 'k') {
      errno = 0;
      v = strtoul(optarg, &end, 10);
      if (errno != 0 || *end != '\0' || v == 0 || (c == 'b' && v > (1u << 20)) ||
          (c == 'q' && v > MAX_DEPTH) || v > 1000000000ul) {
        fprintf(stderr, "cleave-perf: bad value '%s' for -%c\n%s", optarg, c, usage);
        return 2;
      }
    }
    switch (c) {
      case 's':
        sock = optarg;
        break;
      case 'n':
        p.count = (unsigned)v;
        break;
      case 'b':
        p.bytes = (unsigned)v;
        break;
      case 'q':
        p.depth = (unsigned)v;
        break;
      case 'k':
        p.check_every = (unsigned)v;
        break;
      case 'h':
        fputs(usage, stdout);
        return 0;
      default:
        fputs(usage, stderr);
        return 2;
    }
  }
  const char* mode = optind < argc ? argv[optind] : "all";
  int all = strcmp(mode, "all") == 0;
  if (!all && strcmp(mode, "nop") != 0 && strcmp(mode, "copy") != 0 && strcmp(mode, "send") != 0 &&
      strcmp(mode, "base") != 0) {
    fprintf(stderr, "cleave-perf: unknown mode '%s'\n%s", mode, usage);
    return 2;
  }

  struct cl_open_attr attr = {.socket_path = sock, .name = "cleave-perf"};
  int r = cl_open(&attr, &p.ctx);
  if (r != 0) {
    fprintf(stderr, "cleave-perf: cannot connect to cleaved: %s\n", cl_strerror(r));
    return 2;
  }
  unsigned q = 1;
  while (q < p.depth * 2 || q < 64)
    q <<= 1;
  if ((r = cl_cq_create(p.ctx, q * 4, 0, 0, &p.cq)) != 0 ||
      (r = cl_sq_create(p.ctx, p.cq, q, &p.sq)) != 0 ||
      (r = cl_rq_create(p.ctx, p.cq, q, &p.rq)) != 0) {
    fprintf(stderr, "cleave-perf: cannot create queues: %s\n", cl_strerror(r));
    cl_close(p.ctx);
    return 2;
  }
  printf("cleave-perf: app %u connected\n", cl_app_id(p.ctx));
  r = 0;
  if (r == 0 && (all || strcmp(mode, "nop") == 0)) r = run_nop(&p);
  if (r == 0 && (all || strcmp(mode, "copy") == 0)) r = run_data(&p, 0);
  if (r == 0 && (all || strcmp(mode, "send") == 0)) r = run_data(&p, 1);
  if (r == 0 && (all || strcmp(mode, "base") == 0)) r = run_base(&p);
  if (r != 0) fprintf(stderr, "cleave-perf: %s\n", cl_strerror(r));
  cl_close(p.ctx);
  return r == 0 ? 0 : 1;
}
