// app_memory.h - app memory as cleaved holds it: the shared region it creates for each app and
// the memfds apps register, mapped, sealed against shrinking (so the daemon can never take a
// SIGBUS from memory an app controls) and registered with DPDK as external memory.
//
// Main thread only. Errors are negative CL_E* codes, with the reason in `why` for the log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace cleave::dp {

class AppMemory {
 public:
  AppMemory() = default;
  AppMemory(AppMemory&& o) noexcept { *this = std::move(o); }
  AppMemory& operator=(AppMemory&& o) noexcept;
  AppMemory(const AppMemory&) = delete;
  AppMemory& operator=(const AppMemory&) = delete;
  ~AppMemory() { reset(); }

  // A new sealed memfd of `size` bytes (rounded up to the page size), zeroed and mapped; backed
  // by hugepages when `try_huge` and enough are free, else by ordinary pages.
  static int create(const std::string& name, uint64_t size, bool try_huge, AppMemory& out,
                    std::string& why);
  // Maps the first `length` bytes of an app's memfd. The fd must be sealed with F_SEAL_SHRINK
  // and at least `length` long; it is not kept.
  static int import(int fd, uint64_t length, AppMemory& out, std::string& why);

  // Registers the mapping with DPDK (rte_extmem_register) and DMA-maps it for every port's
  // device that supports it, so PMDs can read and write it.
  int register_dpdk(const std::vector<uint16_t>& ports, std::string& why);

  void reset();  // deregisters, unmaps, closes

  // Asks DPDK (not our own flag) whether the whole mapping is known to it as external memory.
  bool dpdk_knows() const;
  size_t dma_mapped_ports() const { return dma_ports_.size(); }

  uint8_t* base() const { return base_; }
  uint64_t length() const { return length_; }  // usable bytes
  uint64_t mapped() const { return mapped_; }  // bytes mapped (length rounded to pages)
  uint64_t page_size() const { return page_size_; }
  bool hugetlb() const { return hugetlb_; }
  int fd() const { return fd_; }  // create(): the memfd to pass to the app; import(): -1

 private:
  // Takes a mapping made by create() or import() (fd -1: not kept).
  void adopt(int fd, uint8_t* base, uint64_t length, uint64_t mapped, uint64_t page, bool hugetlb);
  void unregister_dpdk();

  int fd_ = -1;
  uint8_t* base_ = nullptr;
  uint64_t length_ = 0;
  uint64_t mapped_ = 0;
  uint64_t page_size_ = 4096;
  bool hugetlb_ = false;
  bool dpdk_ = false;
  std::vector<uint16_t> dma_ports_;  // ports whose device accepted a DMA map
};

}  // namespace cleave::dp
