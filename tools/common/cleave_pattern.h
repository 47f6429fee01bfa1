/* cleave_pattern.h - the seeded byte pattern of the Cleave tools (cleave-tcp, cleave-rdma): the
 * byte stream of xorshift64*, header-only. The definition is in cleave-tcp --help and
 * tests/integration/cleave_pattern.py (the Python one):
 *   x = seed, or 0x9E3779B97F4A7C15 if seed is 0
 *   for each 8 bytes: x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
 *                     emit (x * 0x2545F4914F6CDD1D mod 2^64) as 8 bytes, little-endian */
#ifndef CLEAVE_TOOLS_PATTERN_H
#define CLEAVE_TOOLS_PATTERN_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct pattern {
  uint64_t x;
  uint8_t tail[8]; /* the last word's bytes; the final `ntail` of them not emitted yet */
  unsigned ntail;
};

static inline void pattern_init(struct pattern* p, uint64_t seed) {
  p->x = seed != 0 ? seed : 0x9E3779B97F4A7C15ull;
  p->ntail = 0;
}

static inline uint64_t pattern_word(struct pattern* p) {
  uint64_t x = p->x;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  p->x = x;
  return x * 0x2545F4914F6CDD1Dull;
}

static inline void put_le64(uint8_t* d, uint64_t w) {
  for (int i = 0; i < 8; i++)
    d[i] = (uint8_t)(w >> (8 * i));
}

/* The next n bytes of the stream into d. */
static inline void pattern_fill(struct pattern* p, uint8_t* d, size_t n) {
  for (; n > 0 && p->ntail > 0; n--)
    *d++ = p->tail[8 - p->ntail--];
  for (; n >= 8; n -= 8, d += 8)
    put_le64(d, pattern_word(p));
  if (n > 0) {
    put_le64(p->tail, pattern_word(p));
    memcpy(d, p->tail, n);
    p->ntail = 8 - (unsigned)n;
  }
}

#endif
