/* side_channel.h - the out-of-band channel two Cleave tools (cleave-rdma, cleave-blk) meet on
 * to swap their queue pairs' halves and short text lines: kernel TCP, one side listening on
 * 0.0.0.0:PORT, the other connecting (retried while refused). Lines are read a byte at a time,
 * so nothing past a newline is taken, and bounded in length; every wait is bounded. Errors are
 * said on stderr with the tool's name. Header-only, C11; tool_util.h for the clock. */
#ifndef CLEAVE_TOOLS_SIDE_CHANNEL_H
#define CLEAVE_TOOLS_SIDE_CHANNEL_H

#include <arpa/inet.h>
#include <cleave/cleave.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tool_util.h"

/* Milliseconds left until `deadline` (now_s() based), at least 0. */
static inline int sc_ms_left(double deadline) {
  double left = (deadline - now_s()) * 1000;
  if (left <= 0) return 0;
  return left > 1e9 ? 1000000000 : (int)left + 1;
}

/* Writes the n bytes of `line` within `timeout` seconds: 0, CL_ETIMEDOUT or a negative errno. */
static inline int sc_send(int fd, const char* line, size_t n, double timeout) {
  double deadline = now_s() + timeout;
  for (size_t off = 0; off < n;) {
    struct pollfd p = {fd, POLLOUT, 0};
    int pr = poll(&p, 1, sc_ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return CL_ETIMEDOUT;
    ssize_t w = send(fd, line + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w < 0) return -errno;
    off += (size_t)w;
  }
  return 0;
}

/* One line without its newline into line[max], within `timeout` seconds: 0, CL_ETIMEDOUT,
 * CL_EPROTO past max - 1 bytes, CL_ECONNRESET at EOF, or a negative errno. */
static inline int sc_recv(int fd, char* line, size_t max, double timeout) {
  double deadline = now_s() + timeout;
  size_t n = 0;
  for (;;) {
    struct pollfd p = {fd, POLLIN, 0};
    int pr = poll(&p, 1, sc_ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) return CL_ETIMEDOUT;
    char c;
    ssize_t got = recv(fd, &c, 1, MSG_DONTWAIT);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (got < 0) return -errno;
    if (got == 0) return CL_ECONNRESET;
    if (c == '\n') break;
    if (n == max - 1) return CL_EPROTO;
    line[n++] = c;
  }
  line[n] = '\0';
  return 0;
}

/* Waits up to `timeout` seconds for one peer on 0.0.0.0:port; its socket in *out. */
static inline int sc_listen(const char* tool, uint16_t port, double timeout, int* out) {
  int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) return -errno;
  int one = 1;
  setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  a.sin_addr.s_addr = htonl(INADDR_ANY);
  if (bind(l, (struct sockaddr*)&a, sizeof a) != 0 || listen(l, 1) != 0) {
    int e = -errno;
    fprintf(stderr, "%s: cannot listen on 0.0.0.0:%u: %s\n", tool, port, strerror(-e));
    close(l);
    return e;
  }
  double deadline = now_s() + timeout;
  for (;;) {
    struct pollfd p = {l, POLLIN, 0};
    int pr = poll(&p, 1, sc_ms_left(deadline));
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) {
      fprintf(stderr, "%s: timed out after %g s waiting for a peer on port %u\n", tool, timeout,
              port);
      close(l);
      return CL_ETIMEDOUT;
    }
    *out = accept4(l, NULL, NULL, SOCK_CLOEXEC);
    if (*out >= 0) break;
    if (errno != EINTR && errno != ECONNABORTED) {
      int e = -errno;
      close(l);
      return e;
    }
  }
  close(l);
  return 0;
}

/* Connects to `peer` (`text` names it), retried every 100 ms while refused, up to `timeout`
 * seconds; the socket in *out. */
static inline int sc_connect(const char* tool, const struct sockaddr_in* peer, const char* text,
                             double timeout, int* out) {
  double deadline = now_s() + timeout;
  for (;;) {
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) return -errno;
    if (connect(s, (const struct sockaddr*)peer, sizeof *peer) == 0) {
      *out = s;
      return 0;
    }
    int e = errno;
    close(s);
    if (e != ECONNREFUSED && e != EINTR) {
      fprintf(stderr, "%s: cannot connect to %s: %s\n", tool, text, strerror(e));
      return -e;
    }
    if (now_s() >= deadline) {
      fprintf(stderr, "%s: timed out after %g s connecting to %s (refused)\n", tool, timeout, text);
      return CL_ETIMEDOUT;
    }
    struct timespec nap = {0, 100 * 1000 * 1000};
    nanosleep(&nap, NULL);
  }
}

#endif /* CLEAVE_TOOLS_SIDE_CHANNEL_H */
