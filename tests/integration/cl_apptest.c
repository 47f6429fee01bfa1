/* cl_apptest.c - a libcleave app driven by test_libcleave.py against the real cleaved.
 *
 *   cl_apptest SOCKET use     connect, allocate, register a memfd, copy and send through the
 *                             dataplane, sleep on the doorbell, deregister, close; checks every
 *                             byte and every status, prints "ok"
 *   cl_apptest SOCKET bad     the library's own checks, and MRs the daemon refuses (an
 *                             unsealable memfd, one over the memory quota); bad raw entries are
 *                             test_apps.py's business
 *   cl_apptest SOCKET wait    connect, print "ready", then one thread spins in cl_poll_cq and
 *                             another sleeps in cl_cq_wait(-1); each prints "gone CODE MS" when
 *                             its call fails (the test kills the daemon), then later calls are
 *                             checked to fail the same way
 *   cl_apptest SOCKET open    cl_open alone: prints "CODE STRERROR" (0 success), then closes
 * Exit 0 on success; on failure prints what differed and exits 1. */
#define _GNU_SOURCE
#include <cleave/cleave.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      fprintf(stderr, "FAILED %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                          \
      fprintf(stderr, "\n");                                 \
      exit(1);                                               \
    }                                                        \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static struct cl_wc wait_wc(cl_cq* cq) {
  struct cl_wc wc;
  int r = cl_cq_wait(cq, 2000);
  CHECK(r == 0, "cl_cq_wait: %s", cl_strerror(r));
  r = cl_poll_cq(cq, &wc, 1);
  CHECK(r == 1, "cl_poll_cq after a wakeup: %d", r);
  return wc;
}

static int use(const char* sock) {
  struct cl_open_attr attr = {.socket_path = sock, .name = "apptest"};
  cl_ctx* ctx;
  int r = cl_open(&attr, &ctx);
  CHECK(r == 0, "cl_open: %s", cl_strerror(r));
  cl_cq* cq;
  cl_sq* sq;
  cl_rq* rq;
  CHECK(cl_cq_create(ctx, 512, 1, 0, &cq) == 0, "cq");
  CHECK(cl_sq_create(ctx, cq, 128, &sq) == 0, "sq");
  CHECK(cl_rq_create(ctx, cq, 128, &rq) == 0, "rq");

  /* An MR of our own: a sealed memfd. */
  int fd = memfd_create("apptest", MFD_ALLOW_SEALING);
  CHECK(fd >= 0 && ftruncate(fd, 1 << 20) == 0, "memfd");
  cl_mr* mr;
  r = cl_mr_reg(ctx, fd, 1 << 20, CL_ACCESS_READ | CL_ACCESS_WRITE, &mr);
  CHECK(r == 0, "cl_mr_reg: %s", cl_strerror(r));
  CHECK(cl_mr_id(mr) >= 1 && cl_mr_length(mr) == 1 << 20, "mr id/length");
  unsigned char* mrmem = cl_mr_addr(mr);

  unsigned char* buf = cl_alloc(ctx, 8192, 64);
  CHECK(buf != NULL, "cl_alloc");
  for (int i = 0; i < 8192; i++)
    buf[i] = (unsigned char)(i * 13 + 5);
  uint64_t off = cl_heap_offset(ctx, buf);

  /* heap -> MR, then MR -> heap at another place, through the dataplane. */
  struct cl_send_wr w1 = {.wr_id = 1,
                          .offset = off,
                          .length = 8192,
                          .opcode = CL_OP_COPY,
                          .dst_mr = mr,
                          .dst_offset = 4096};
  CHECK(cl_post_send(sq, &w1, 1) == 1, "post copy");
  struct cl_wc wc = wait_wc(cq);
  CHECK(wc.wr_id == 1 && wc.status == 0 && wc.length == 8192, "copy completion %d", wc.status);
  CHECK(memcmp(mrmem + 4096, buf, 8192) == 0, "copy into the MR");
  unsigned char* back = cl_alloc(ctx, 8192, 4096);
  CHECK(back != NULL, "cl_alloc 2");
  struct cl_send_wr w2 = {.wr_id = 2,
                          .mr = mr,
                          .offset = 4096,
                          .length = 8192,
                          .opcode = CL_OP_COPY,
                          .dst_offset = cl_heap_offset(ctx, back)};
  CHECK(cl_post_send(sq, &w2, 1) == 1, "post copy back");
  wc = wait_wc(cq);
  CHECK(wc.wr_id == 2 && wc.status == 0, "copy back %d", wc.status);
  CHECK(memcmp(back, buf, 8192) == 0, "copy back into the heap");

  /* A send into a posted receive buffer, with immediate data. */
  memset(back, 0, 8192);
  struct cl_recv_wr rw = {.wr_id = 777, .offset = cl_heap_offset(ctx, back), .length = 8192};
  CHECK(cl_post_recv(rq, &rw, 1) == 1, "post recv");
  struct cl_send_wr w3 = {
      .wr_id = 3, .offset = off, .length = 1000, .opcode = CL_OP_SEND, .target = rq, .imm = 0xfeed};
  CHECK(cl_post_send(sq, &w3, 1) == 1, "post send");
  struct cl_wc got[2];
  int n = 0;
  double t0 = now_ms();
  while (n < 2 && now_ms() - t0 < 2000) {
    r = cl_poll_cq(cq, got + n, 2 - n);
    CHECK(r >= 0, "poll: %s", cl_strerror(r));
    n += r;
  }
  CHECK(n == 2, "two completions for a send");
  CHECK((got[0].flags & CL_WC_RECV) && got[0].wr_id == 777 && got[0].length == 1000 &&
            got[0].imm == 0xfeed && got[0].status == 0,
        "receive completion: wr_id %llu len %u imm %x status %d", (unsigned long long)got[0].wr_id,
        got[0].length, got[0].imm, got[0].status);
  CHECK(got[1].wr_id == 3 && got[1].status == 0, "send completion");
  CHECK(memcmp(back, buf, 1000) == 0 && back[1000] == 0, "received bytes");

  r = cl_mr_dereg(mr);
  CHECK(r == 0, "cl_mr_dereg: %s", cl_strerror(r));
  cl_free(ctx, buf);
  cl_free(ctx, back);
  CHECK(cl_close(ctx) == 0, "cl_close");
  close(fd);
  printf("ok\n");
  return 0;
}

static int bad(const char* sock) {
  struct cl_open_attr attr = {.socket_path = sock, .name = "apptest-bad"};
  cl_ctx* ctx;
  CHECK(cl_open(&attr, &ctx) == 0, "open");
  cl_cq* cq;
  cl_sq* sq;
  CHECK(cl_cq_create(ctx, 256, 0, 0, &cq) == 0, "cq");
  CHECK(cl_sq_create(ctx, cq, 128, &sq) == 0, "sq");
  struct cl_send_wr w = {.wr_id = 1, .offset = UINT64_MAX - 8, .length = 64, .opcode = CL_OP_COPY};
  CHECK(cl_post_send(sq, &w, 1) == CL_EFAULT, "the library checks bounds first");
  int fd = memfd_create("unsealable", 0);
  CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "memfd");
  cl_mr* mr;
  CHECK(cl_mr_reg(ctx, fd, 4096, CL_ACCESS_READ, &mr) == CL_EINVAL, "an unsealable memfd");
  close(fd);
  int big = memfd_create("big", MFD_ALLOW_SEALING);
  CHECK(big >= 0 && ftruncate(big, 1 << 30) == 0, "memfd");
  int r = cl_mr_reg(ctx, big, 1 << 30, CL_ACCESS_READ, &mr);
  CHECK(r == CL_EDQUOT, "1 GiB is over the quota: %s", cl_strerror(r));
  close(big);
  CHECK(cl_close(ctx) == 0, "close");
  printf("ok\n");
  return 0;
}

struct waiter {
  cl_cq* cq;
  double t_gone;
  int code;
};

static void* spin(void* arg) {
  struct waiter* w = arg;
  struct cl_wc wc;
  int r;
  while ((r = cl_poll_cq(w->cq, &wc, 1)) == 0) {
  }
  w->t_gone = now_ms();
  w->code = r;
  return NULL;
}

static void* sleeper(void* arg) {
  struct waiter* w = arg;
  int r = cl_cq_wait(w->cq, -1);
  w->t_gone = now_ms();
  w->code = r;
  return NULL;
}

static int wait_for_death(const char* sock) {
  struct cl_open_attr attr = {.socket_path = sock, .name = "apptest-wait"};
  cl_ctx* ctx;
  CHECK(cl_open(&attr, &ctx) == 0, "open");
  cl_cq *spin_cq, *sleep_cq;
  CHECK(cl_cq_create(ctx, 64, 0, 0, &spin_cq) == 0, "cq");
  CHECK(cl_cq_create(ctx, 64, 1, 10, &sleep_cq) == 0, "cq with doorbell");
  struct waiter a = {.cq = spin_cq}, b = {.cq = sleep_cq};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, spin, &a);
  pthread_create(&tb, NULL, sleeper, &b);
  printf("ready\n");
  fflush(stdout);
  /* The test kills the daemon and writes the time it did so on our stdin. */
  double t_kill = 0;
  CHECK(scanf("%lf", &t_kill) == 1, "the kill time on stdin");
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  printf("spin %d %.0f\nsleep %d %.0f\n", a.code, a.t_gone - t_kill, b.code, b.t_gone - t_kill);
  /* Every later call fails the same way, at once. */
  cl_cq* cq;
  struct cl_wc wc;
  int fd = memfd_create("late", MFD_ALLOW_SEALING);
  cl_mr* mr;
  CHECK(fd >= 0 && ftruncate(fd, 4096) == 0, "memfd");
  printf("later %d %d %d\n", cl_cq_create(ctx, 64, 0, 0, &cq), cl_poll_cq(spin_cq, &wc, 1),
         cl_mr_reg(ctx, fd, 4096, CL_ACCESS_READ, &mr));
  close(fd);
  cl_close(ctx);
  return 0;
}

static int open_only(const char* sock) {
  struct cl_open_attr attr = {.socket_path = sock, .name = "apptest-open"};
  cl_ctx* ctx = NULL;
  int r = cl_open(&attr, &ctx);
  printf("%d %s\n", r, cl_strerror(r));
  if (r == 0) cl_close(ctx);
  return 0;
}

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: cl_apptest SOCKET use|bad|wait|open\n");
    return 2;
  }
  if (strcmp(argv[2], "open") == 0) return open_only(argv[1]);
  if (strcmp(argv[2], "use") == 0) return use(argv[1]);
  if (strcmp(argv[2], "bad") == 0) return bad(argv[1]);
  if (strcmp(argv[2], "wait") == 0) return wait_for_death(argv[1]);
  return 2;
}
