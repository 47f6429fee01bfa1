/* tool_util.h - what the Cleave tools (cleave-tcp, cleave-rdma) share besides the pattern:
 * argument parsing, the clock, error text and JSON strings. Header-only, C99. */
#ifndef CLEAVE_TOOLS_UTIL_H
#define CLEAVE_TOOLS_UTIL_H

#include <arpa/inet.h>
#include <cleave/cleave.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* cl_strerror with the number, also for codes the library does not name. Not reentrant. */
static inline const char* errtext(int code) {
  static char buf[128];
  snprintf(buf, sizeof buf, "%s (%d)", cl_strerror(code), code);
  return buf;
}

/* A byte count in [s, end_at) with an optional k/m/g suffix (powers of 1024); false if the
 * whole range is not one. */
static inline bool parse_bytes(const char* s, const char* end_at, uint64_t* out) {
  char* end = NULL;
  if (s == end_at || *s < '0' || *s > '9') return false;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  unsigned shift = 0;
  if (end < end_at && (*end == 'k' || *end == 'K')) shift = 10;
  if (end < end_at && (*end == 'm' || *end == 'M')) shift = 20;
  if (end < end_at && (*end == 'g' || *end == 'G')) shift = 30;
  if (shift != 0) end++;
  if (end != end_at || v > (UINT64_MAX >> shift)) return false;
  *out = (uint64_t)v << shift;
  return true;
}

static inline bool parse_port(const char* s, uint16_t* out) {
  char* end = NULL;
  errno = 0;
  if (*s < '0' || *s > '9') return false;
  unsigned long v = strtoul(s, &end, 10);
  if (errno != 0 || *end != '\0' || v == 0 || v > 65535) return false;
  *out = (uint16_t)v;
  return true;
}

/* IPv4:PORT */
static inline bool parse_peer(const char* s, struct sockaddr_in* a) {
  const char* colon = strrchr(s, ':');
  if (colon == NULL || colon - s >= 16) return false;
  char ip[16];
  memcpy(ip, s, (size_t)(colon - s));
  ip[colon - s] = '\0';
  uint16_t port;
  if (!parse_port(colon + 1, &port)) return false;
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_port = htons(port);
  return inet_pton(AF_INET, ip, &a->sin_addr) == 1;
}

/* A JSON string on stdout. */
static inline void json_string(const char* s) {
  putchar('"');
  for (; *s != '\0'; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      printf("\\%c", c);
    else if (c < 0x20)
      printf("\\u%04x", c);
    else
      putchar(c);
  }
  putchar('"');
}

#endif /* CLEAVE_TOOLS_UTIL_H */
