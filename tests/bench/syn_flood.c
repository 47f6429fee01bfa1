/* syn_flood.c - spoofed TCP SYNs at a fixed rate, for the SYN flood benchmark (syn_flood.py).
 *
 * Sends SYNs to DST:PORT from random addresses of SRC_NET/24 (hosts 10-250) and random ports,
 * each with a random ISN and an MSS option, over a raw IPv4 socket (IP_HDRINCL) in batches of
 * sendmmsg(), paced by the monotonic clock: at most RATE per second on average, for SECONDS.
 * Prints what it achieved: "sent N in T s: R SYN/s". Test equipment for a network namespace the
 * benchmark made; root (CAP_NET_RAW).
 *
 * Usage: syn_flood DST PORT SRC_NET RATE SECONDS
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kBatch = 64, kLen = 20 + 24 };

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { /* xorshift64* */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (uint32_t)((rng_state * 0x2545F4914F6CDD1Dull) >> 32);
}

static uint16_t fold(uint32_t s) {
  while (s >> 16)
    s = (s & 0xFFFF) + (s >> 16);
  return (uint16_t)~s;
}

static uint32_t sum16(const uint8_t* p, size_t n) {
  uint32_t s = 0;
  for (size_t i = 0; i + 1 < n; i += 2)
    s += (uint32_t)(p[i] << 8 | p[i + 1]);
  return s;
}

static void put16(uint8_t* p, uint16_t v) {
  p[0] = (uint8_t)(v >> 8);
  p[1] = (uint8_t)v;
}

static void put32(uint8_t* p, uint32_t v) {
  put16(p, (uint16_t)(v >> 16));
  put16(p + 2, (uint16_t)v);
}

/* One SYN from a random host of src_net (host order) to dst:port. */
static void make_syn(uint8_t* f, uint32_t src_net, uint32_t dst, uint16_t port, uint16_t id) {
  const uint32_t src = src_net | (10 + rnd() % 241);
  memset(f, 0, kLen);
  f[0] = 0x45;
  put16(f + 2, kLen);
  put16(f + 4, id);
  f[8] = 64;
  f[9] = IPPROTO_TCP;
  put32(f + 12, src);
  put32(f + 16, dst);
  put16(f + 10, fold(sum16(f, 20)));
  uint8_t* t = f + 20;
  put16(t, (uint16_t)(1024 + rnd() % 64000));
  put16(t + 2, port);
  put32(t + 4, rnd());
  t[12] = 6 << 4; /* 24 bytes: the MSS option */
  t[13] = 0x02;   /* SYN */
  put16(t + 14, 64240);
  t[20] = 2;
  t[21] = 4;
  put16(t + 22, 1460);
  uint8_t ph[12];
  put32(ph, src);
  put32(ph + 4, dst);
  ph[8] = 0;
  ph[9] = IPPROTO_TCP;
  put16(ph + 10, 24);
  put16(t + 16, fold(sum16(ph, 12) + sum16(t, 24)));
}

int main(int argc, char** argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s DST PORT SRC_NET RATE SECONDS\n", argv[0]);
    return 2;
  }
  struct in_addr dst_a, net_a;
  if (inet_pton(AF_INET, argv[1], &dst_a) != 1 || inet_pton(AF_INET, argv[3], &net_a) != 1) {
    fprintf(stderr, "syn_flood: bad address\n");
    return 2;
  }
  const uint32_t dst = ntohl(dst_a.s_addr);
  const uint32_t src_net = ntohl(net_a.s_addr) & 0xFFFFFF00u;
  const uint16_t port = (uint16_t)atoi(argv[2]);
  const double rate = atof(argv[4]);
  const double seconds = atof(argv[5]);
  if (port == 0 || rate <= 0 || seconds <= 0) {
    fprintf(stderr, "syn_flood: PORT, RATE and SECONDS must be positive\n");
    return 2;
  }
  rng_state ^= (uint64_t)getpid() << 17 ^ now_ns();
  const int fd = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
  if (fd < 0) {
    perror("syn_flood: socket");
    return 1;
  }
  static uint8_t frames[kBatch][kLen];
  struct iovec iov[kBatch];
  struct mmsghdr msgs[kBatch];
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_addr = dst_a};
  for (int i = 0; i < kBatch; i++) {
    iov[i] = (struct iovec){frames[i], kLen};
    msgs[i] = (struct mmsghdr){
        .msg_hdr = {
            .msg_name = &to, .msg_namelen = sizeof to, .msg_iov = &iov[i], .msg_iovlen = 1}};
  }
  const uint64_t t0 = now_ns();
  const uint64_t end = t0 + (uint64_t)(seconds * 1e9);
  uint64_t sent = 0, failed = 0;
  uint16_t id = 0;
  for (;;) {
    const uint64_t t = now_ns();
    if (t >= end) break;
    /* Due by now at the rate; send up to one batch of it, else sleep a little. */
    const uint64_t due = (uint64_t)((double)(t - t0) * rate / 1e9) + 1;
    if (due <= sent) {
      const struct timespec nap = {0, 20000};
      nanosleep(&nap, NULL);
      continue;
    }
    unsigned n = (unsigned)(due - sent < kBatch ? due - sent : kBatch);
    for (unsigned i = 0; i < n; i++)
      make_syn(frames[i], src_net, dst, port, id++);
    const int k = sendmmsg(fd, msgs, n, 0);
    if (k < 0) {
      if (errno != ENOBUFS && errno != EAGAIN) {
        perror("syn_flood: sendmmsg");
        return 1;
      }
      failed += n;
      sent += n; /* counted as due: the rate is the offered one */
      continue;
    }
    sent += (unsigned)k;
  }
  const double secs = (double)(now_ns() - t0) / 1e9;
  printf("sent %llu in %.2f s: %.0f SYN/s (%llu refused by the local stack)\n",
         (unsigned long long)(sent - failed), secs, (double)(sent - failed) / secs,
         (unsigned long long)failed);
  close(fd);
  return 0;
}
