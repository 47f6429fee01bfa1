/* kernel_tcp.c - the Linux kernel's end of a TCP goodput measurement, doing no per-byte work.
 *
 * send: connects to HOST:PORT (retrying a refused connect until --connect-timeout), writes
 * BYTES from one buffer filled once, half-closes, and waits for the peer's close, so the time is
 * until the receiver had every byte. recv: listens on HOST:PORT, prints "ready", accepts one
 * connection, reads into one buffer and drops what it reads until the peer's close, closes.
 * Neither side makes, copies or checks a pattern in the timed part: like iperf3, the sockets
 * are the only work, so the kernel is measured and not this tool.
 *
 * Prints one JSON line: {"role", "bytes", "seconds", "gbps", "cpu_user", "cpu_sys", "error"}
 * (error null, or what failed); the sender adds "cc" (its congestion control: --cc's, else the
 * namespace's net.ipv4.tcp_congestion_control) and "tcp_info", read from TCP_INFO once all it sent
 * is acknowledged, before its FIN: total_retrans, bytes_retrans, snd_cwnd and snd_ssthresh (in
 * segments), snd_mss, rtt_us, snd_wnd (the peer's last window), busy_us, rwnd_limited_us and
 * sndbuf_limited_us (how long the connection was sending, held by the peer's window, held by
 * its own send buffer). cpu_* are this process's CPU seconds (getrusage): against "seconds"
 * they say whether the tool was the limit. Exit 0 on success, 1 on a failure (the JSON says
 * which), 2 on usage.
 *
 * Usage: kernel_tcp send HOST PORT BYTES [--timeout SEC] [--connect-timeout SEC] [--cc NAME]
 *        kernel_tcp recv HOST PORT [--timeout SEC]
 * --timeout bounds every wait for progress (default 30 s); --cc sets the sender's congestion
 * control (TCP_CONGESTION: reno, cubic, bbr, ... as the kernel has them).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kBuf = 1 << 20 };
static char buf[kBuf];

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void set_timeouts(int fd, double sec) {
  struct timeval tv = {.tv_sec = (time_t)sec, .tv_usec = (long)((sec - (double)(time_t)sec) * 1e6)};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

struct result {
  const char* role;
  char cc[16]; /* the sender's congestion control */
  uint64_t bytes;
  double seconds;
  char error[200];
  bool have_info;
  struct tcp_info info;
};

static int report(const struct result* r) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
  double sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
  double gbps = r->seconds > 0 ? (double)r->bytes * 8 / r->seconds / 1e9 : 0;
  printf(
      "{\"role\":\"%s\",\"bytes\":%llu,\"seconds\":%.6f,\"gbps\":%.4f,\"cpu_user\":%.3f,"
      "\"cpu_sys\":%.3f,\"error\":",
      r->role, (unsigned long long)r->bytes, r->seconds, gbps, user, sys);
  if (r->error[0] != '\0') {
    printf("\"%s\"", r->error); /* our own text: no quotes or backslashes in it */
  } else {
    printf("null");
  }
  if (r->cc[0] != '\0') printf(",\"cc\":\"%s\"", r->cc);
  if (r->have_info) {
    const struct tcp_info* i = &r->info;
    printf(
        ",\"tcp_info\":{\"total_retrans\":%u,\"bytes_retrans\":%llu,\"snd_cwnd\":%u,"
        "\"snd_ssthresh\":%u,\"snd_mss\":%u,\"rtt_us\":%u,\"snd_wnd\":%u,\"busy_us\":%llu,"
        "\"rwnd_limited_us\":%llu,\"sndbuf_limited_us\":%llu}",
        i->tcpi_total_retrans, (unsigned long long)i->tcpi_bytes_retrans, i->tcpi_snd_cwnd,
        i->tcpi_snd_ssthresh, i->tcpi_snd_mss, i->tcpi_rtt, i->tcpi_snd_wnd,
        (unsigned long long)i->tcpi_busy_time, (unsigned long long)i->tcpi_rwnd_limited,
        (unsigned long long)i->tcpi_sndbuf_limited);
  }
  printf("}\n");
  fflush(stdout);
  return r->error[0] != '\0' ? 1 : 0;
}

/* Reads fd into buf until the peer's close; returns the bytes read, or -errno. */
static int64_t read_to_eof(int fd) {
  int64_t n = 0;
  for (;;) {
    ssize_t k = recv(fd, buf, kBuf, 0);
    if (k == 0) return n;
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return -errno;
    n += k;
  }
}

static int fail(struct result* r, const char* what, int err) {
  snprintf(r->error, sizeof r->error, "%s: %s", what,
           err == EAGAIN || err == EWOULDBLOCK ? "timed out" : strerror(err));
  return report(r);
}

/* A blocking connect, again while it is refused (the listener is not up yet), until `within`;
 * with congestion control `cc` unless it is NULL. */
static int connect_retry(const struct sockaddr_in* to, double within, double timeout,
                         const char* cc) {
  double deadline = now_s() + within;
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -errno;
    set_timeouts(fd, timeout);
    if (cc != NULL && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) != 0) {
      int e = errno;
      close(fd);
      return -e;
    }
    if (connect(fd, (const struct sockaddr*)to, sizeof *to) == 0) return fd;
    int e = errno;
    close(fd);
    if (e != ECONNREFUSED || now_s() > deadline) return -e;
    usleep(10000);
  }
}

static int do_send(const struct sockaddr_in* to, uint64_t n, double timeout, double within,
                   const char* cc) {
  struct result r = {.role = "send"};
  memset(buf, 0x5a, sizeof buf); /* once, before the clock starts */
  int fd = connect_retry(to, within, timeout, cc);
  if (fd < 0) return fail(&r, cc != NULL ? "connect (or --cc)" : "connect", -fd);
  socklen_t cclen = sizeof r.cc - 1;
  if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, r.cc, &cclen) != 0) r.cc[0] = '\0';
  double t0 = now_s();
  while (r.bytes < n) {
    size_t k = n - r.bytes < kBuf ? (size_t)(n - r.bytes) : kBuf;
    ssize_t w = send(fd, buf, k, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      int e = w < 0 ? errno : EIO;
      close(fd);
      return fail(&r, "send", e);
    }
    r.bytes += (uint64_t)w;
  }
  /* TCP_INFO once everything is acknowledged (SIOCOUTQ: bytes not acknowledged yet), before
   * the close: a closed socket's window is not the one the transfer ended with. */
  double until = now_s() + timeout;
  for (int left; ioctl(fd, SIOCOUTQ, &left) == 0 && left > 0 && now_s() < until;)
    usleep(200);
  socklen_t len = sizeof r.info;
  r.have_info = getsockopt(fd, IPPROTO_TCP, TCP_INFO, &r.info, &len) == 0;
  /* The receiver closes once it has read everything: its close ends the clock. */
  if (shutdown(fd, SHUT_WR) != 0) {
    int e = errno;
    close(fd);
    return fail(&r, "shutdown", e);
  }
  int64_t got = read_to_eof(fd);
  if (got < 0) {
    close(fd);
    return fail(&r, "waiting for the receiver's close", (int)-got);
  }
  r.seconds = now_s() - t0;
  struct tcp_info end; /* the retransmissions the FIN needed too */
  len = sizeof end;
  if (r.have_info && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &end, &len) == 0 &&
      end.tcpi_total_retrans > r.info.tcpi_total_retrans) {
    r.info.tcpi_total_retrans = end.tcpi_total_retrans;
    r.info.tcpi_bytes_retrans = end.tcpi_bytes_retrans;
  }
  close(fd);
  return report(&r);
}

static int do_recv(const struct sockaddr_in* at, double timeout) {
  struct result r = {.role = "recv"};
  int l = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(l, (const struct sockaddr*)at, sizeof *at) != 0 || listen(l, 1) != 0)
    return fail(&r, "listen", errno);
  printf("ready\n");
  fflush(stdout);
  struct pollfd p = {.fd = l, .events = POLLIN};
  int ready = poll(&p, 1, (int)(timeout * 1000));
  if (ready <= 0) return fail(&r, "accept", ready == 0 ? EAGAIN : errno);
  int fd = accept(l, NULL, NULL);
  if (fd < 0) return fail(&r, "accept", errno);
  close(l);
  set_timeouts(fd, timeout);
  double t0 = now_s();
  int64_t got = read_to_eof(fd);
  if (got < 0) {
    close(fd);
    return fail(&r, "recv", (int)-got);
  }
  r.bytes = (uint64_t)got;
  r.seconds = now_s() - t0;
  close(fd);
  return report(&r);
}

static int usage(void) {
  fprintf(
      stderr,
      "usage: kernel_tcp send HOST PORT BYTES [--timeout SEC] [--connect-timeout SEC] [--cc NAME]\n"
      "       kernel_tcp recv HOST PORT [--timeout SEC]\n");
  return 2;
}

static bool parse_double(const char* s, double* out) {
  char* end = NULL;
  *out = strtod(s, &end);
  return end != s && *end == '\0' && *out > 0 && *out <= 86400;
}

int main(int argc, char** argv) {
  if (argc < 4) return usage();
  bool send_role = strcmp(argv[1], "send") == 0;
  if (!send_role && strcmp(argv[1], "recv") != 0) return usage();
  struct sockaddr_in addr = {.sin_family = AF_INET};
  char* end = NULL;
  unsigned long port = strtoul(argv[3], &end, 10);
  if (inet_pton(AF_INET, argv[2], &addr.sin_addr) != 1 || *end != '\0' || port == 0 || port > 65535)
    return usage();
  addr.sin_port = htons((uint16_t)port);
  int i = 4;
  unsigned long long bytes = 0;
  if (send_role) {
    if (argc < 5) return usage();
    bytes = strtoull(argv[4], &end, 10);
    if (*end != '\0' || argv[4][0] == '-' || argv[4][0] == '\0') return usage();
    i = 5;
  }
  double timeout = 30, within = 10;
  const char* cc = NULL;
  for (; i < argc; i += 2) {
    if (i + 1 >= argc) return usage();
    if (strcmp(argv[i], "--timeout") == 0 && parse_double(argv[i + 1], &timeout)) continue;
    if (send_role && strcmp(argv[i], "--connect-timeout") == 0 &&
        parse_double(argv[i + 1], &within))
      continue;
    if (send_role && strcmp(argv[i], "--cc") == 0 && strlen(argv[i + 1]) < 16) {
      cc = argv[i + 1];
      continue;
    }
    return usage();
  }
  return send_role ? do_send(&addr, bytes, timeout, within, cc) : do_recv(&addr, timeout);
}
