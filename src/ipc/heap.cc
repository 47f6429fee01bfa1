// heap.cc - first fit with coalescing over the heap of the shared region (see heap.h).
#include "heap.h"

#include <iterator>

namespace cleave::ipc {

void Heap::init(uintptr_t addr, uint64_t size) {
  addr_ = addr;
  size_ = size;
  free_.clear();
  used_.clear();
  free_bytes_ = 0;
  if (size != 0) insert_free(0, size);
}

uint64_t Heap::alloc(uint64_t size, uint64_t align) {
  if (size == 0 || size > size_ || align == 0 || (align & (align - 1)) != 0 || align > size_)
    return kNone;
  size = (size + kGranule - 1) & ~(kGranule - 1);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    uint64_t off = it->first, len = it->second;
    uint64_t start = ((addr_ + off + align - 1) & ~(align - 1)) - addr_;
    uint64_t pad = start - off;
    if (pad > len || len - pad < size) continue;
    free_.erase(it);
    free_bytes_ -= len;
    // The padding in front and the tail stay free; neither touches another free range, since
    // the range they were cut from did not.
    if (pad != 0) {
      free_.emplace(off, pad);
      free_bytes_ += pad;
    }
    if (len - pad > size) {
      free_.emplace(start + size, len - pad - size);
      free_bytes_ += len - pad - size;
    }
    used_.emplace(start, size);
    return start;
  }
  return kNone;
}

bool Heap::free(uint64_t offset) {
  auto it = used_.find(offset);
  if (it == used_.end()) return false;
  uint64_t len = it->second;
  used_.erase(it);
  insert_free(offset, len);
  return true;
}

void Heap::insert_free(uint64_t off, uint64_t len) {
  free_bytes_ += len;
  auto next = free_.lower_bound(off);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == off) {
      off = prev->first;
      len += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && off + len == next->first) {
    len += next->second;
    free_.erase(next);
  }
  free_.emplace(off, len);
}

}  // namespace cleave::ipc
