// heap.h - first-fit allocation of byte ranges with coalescing: cl_alloc's heap in libcleave and
// the pipe area in cleaved. All bookkeeping lives in private memory, where the app's other threads
// (or a buggy peer) writing to shared memory cannot corrupt it.
//
// Not thread-safe: libcleave's context serialises calls with its heap mutex; cleaved uses it from
// the main thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>

namespace cleave::ipc {

class Heap {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;
  static constexpr uint64_t kGranule = 64;  // sizes round up to this: no false sharing

  // `addr` is the heap's address (alignment is of addresses, not of offsets).
  void init(uintptr_t addr, uint64_t size);
  // Offset of a block of at least `size` bytes aligned to `align` (a power of two), or kNone.
  uint64_t alloc(uint64_t size, uint64_t align);
  // Frees the block at `offset`; false if no block starts there (double or stray free).
  bool free(uint64_t offset);

  uint64_t free_bytes() const { return free_bytes_; }
  size_t free_ranges() const { return free_.size(); }

 private:
  void insert_free(uint64_t off, uint64_t len);  // coalesces with its neighbours

  uintptr_t addr_ = 0;
  uint64_t size_ = 0;
  uint64_t free_bytes_ = 0;
  std::map<uint64_t, uint64_t> free_;            // offset -> length, disjoint, never adjacent
  std::unordered_map<uint64_t, uint64_t> used_;  // offset -> length
};

}  // namespace cleave::ipc
