// fuzz_input.h - reading a fuzzer's bytes front to back as the operations of a harness, and
// writing them the same way (the seed generator, seeds.cc).
//
// Every read past the end yields zeros, so any input is a whole program: the harnesses stop
// when Reader::done() says so. Multi-byte values are little-endian. A harness fails a check with
// FUZZ_CHECK, which prints where and aborts, so libFuzzer keeps the input as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

namespace cleave::fuzz {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : p_(data), n_(size) {}

  bool done() const { return i_ >= n_; }
  size_t left() const { return i_ < n_ ? n_ - i_ : 0; }

  uint8_t u8() { return i_ < n_ ? p_[i_++] : 0; }
  uint16_t u16() { return uint16_t(u8() | u8() << 8); }
  uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
  uint64_t u64() { return uint64_t(u32()) | uint64_t(u32()) << 32; }
  bool flag() { return (u8() & 1) != 0; }
  // Up to `n` bytes (fewer at the end of the input), as a view into it.
  std::span<const uint8_t> bytes(size_t n) {
    const size_t k = n < left() ? n : left();
    std::span<const uint8_t> s(p_ + i_, k);
    i_ += k;
    return s;
  }
  // The rest of the input.
  std::span<const uint8_t> rest() { return bytes(left()); }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t i_ = 0;
};

class Writer {
 public:
  Writer& u8(uint8_t v) {
    b.push_back(v);
    return *this;
  }
  Writer& u16(uint16_t v) { return u8(uint8_t(v)).u8(uint8_t(v >> 8)); }
  Writer& u32(uint32_t v) { return u16(uint16_t(v)).u16(uint16_t(v >> 16)); }
  Writer& u64(uint64_t v) { return u32(uint32_t(v)).u32(uint32_t(v >> 32)); }
  Writer& bytes(std::span<const uint8_t> s) {
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  std::vector<uint8_t> b;
};

[[noreturn]] inline void check_failed(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n", file, line, what);
  std::abort();
}

}  // namespace cleave::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? void(0) : ::cleave::fuzz::check_failed(#cond, __FILE__, __LINE__))
