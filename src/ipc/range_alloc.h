// range_alloc.h - first-fit allocation of byte ranges with coalescing, for the daemon's pipe
// area and the library's heap. The bookkeeping lives in private memory, never in the shared
// region it describes. Not thread-safe: the owner locks if it needs to.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace cleave::ipc {

class RangeAlloc {
 public:
  static constexpr uint64_t kNone = UINT64_MAX;

  RangeAlloc() = default;
  RangeAlloc(uint64_t base, uint64_t size) {
    if (size != 0) free_[base] = size;
  }

  // Offset of `size` bytes aligned to `align` (a power of two), or kNone.
  uint64_t alloc(uint64_t size, uint64_t align) {
    if (size == 0 || align == 0 || (align & (align - 1)) != 0) return kNone;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      uint64_t start = it->first, len = it->second;
      uint64_t at = (start + align - 1) & ~(align - 1);
      if (at < start || at - start > len || len - (at - start) < size) continue;
      free_.erase(it);
      if (at > start) free_[start] = at - start;
      if (uint64_t tail = len - (at - start) - size; tail != 0) free_[at + size] = tail;
      used_[at] = size;
      in_use_ += size;
      return at;
    }
    return kNone;
  }

  // Returns the size freed, or 0 when `at` is not the start of an allocation.
  uint64_t free(uint64_t at) {
    auto u = used_.find(at);
    if (u == used_.end()) return 0;
    uint64_t size = u->second;
    used_.erase(u);
    in_use_ -= size;
    auto [it, fresh] = free_.emplace(at, size);
    if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
      it->second += next->second;
      free_.erase(next);
    }
    if (it != free_.begin()) {
      if (auto prev = std::prev(it); prev->first + prev->second == it->first) {
        prev->second += it->second;
        free_.erase(it);
      }
    }
    return size;
  }

  // Size of the allocation starting at `at`, or 0.
  uint64_t size_of(uint64_t at) const {
    auto u = used_.find(at);
    return u == used_.end() ? 0 : u->second;
  }
  uint64_t in_use() const { return in_use_; }
  size_t allocations() const { return used_.size(); }

 private:
  std::map<uint64_t, uint64_t> free_;  // start -> length
  std::map<uint64_t, uint64_t> used_;  // start -> length
  uint64_t in_use_ = 0;
};

}  // namespace cleave::ipc
