// app_memory.cc - memfd regions for apps: creation with hugepage fallback, import of app memfds
// with their seals checked, and registration with DPDK.
#include "control/app_memory.h"

#include <cleave/cleave.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_memory.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace cleave::dp {

namespace {

constexpr uint64_t kHugePage = 2ull << 20;

uint64_t round_up(uint64_t x, uint64_t to) {
  return (x + to - 1) / to * to;
}

std::string errstr(const char* what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// Maps `mapped` bytes of fd shared and read-write.
uint8_t* map(int fd, uint64_t mapped) {
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<uint8_t*>(p);
}

}  // namespace

AppMemory& AppMemory::operator=(AppMemory&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = std::exchange(o.fd_, -1);
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    mapped_ = std::exchange(o.mapped_, 0);
    page_size_ = o.page_size_;
    hugetlb_ = o.hugetlb_;
    dpdk_ = std::exchange(o.dpdk_, false);
    dma_ports_ = std::move(o.dma_ports_);
  }
  return *this;
}

int AppMemory::create(const std::string& name, uint64_t size, bool try_huge, AppMemory& out,
                      std::string& why) {
  out.reset();
  constexpr unsigned kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;
  if (try_huge) {
    int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_HUGETLB);
    uint64_t mapped = round_up(size, kHugePage);
    uint8_t* base = nullptr;
    // With too few free hugepages the mapping fails (MAP_POPULATE reserves them all now), so
    // the app can never fault on a missing page later.
    if (fd >= 0 && ftruncate(fd, static_cast<off_t>(mapped)) == 0 &&
        fcntl(fd, F_ADD_SEALS, kSeals) == 0 && (base = map(fd, mapped)) != nullptr) {
      out.adopt(fd, base, size, mapped, kHugePage, true);
      return 0;
    }
    why = errstr("no hugepage-backed region");
    if (fd >= 0) close(fd);
  }
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    why = errstr("memfd_create");
    return CL_ENOMEM;
  }
  uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  uint64_t mapped = round_up(size, page);
  uint8_t* base = nullptr;
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0 ||
      (base = map(fd, mapped)) == nullptr) {
    why = errstr("region");
    close(fd);
    return CL_ENOMEM;
  }
  out.adopt(fd, base, size, mapped, page, false);
  return 0;
}

int AppMemory::import(int fd, uint64_t length, AppMemory& out, std::string& why) {
  out.reset();
  struct stat st {};
  if (length == 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    why = "not a memfd of nonzero length";
    return CL_EINVAL;
  }
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    why = "memfd not sealed with F_SEAL_SHRINK";
    return CL_EINVAL;
  }
  if (static_cast<uint64_t>(st.st_size) < length) {
    why =
        "memfd is " + std::to_string(st.st_size) + " bytes, shorter than " + std::to_string(length);
    return CL_EINVAL;
  }
  struct statfs fs {};
  bool huge = fstatfs(fd, &fs) == 0 && fs.f_type == HUGETLBFS_MAGIC;
  uint64_t page =
      huge ? static_cast<uint64_t>(fs.f_bsize) : static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  // Pages wholly past the end of the file would fault; the seal keeps the file at least this
  // long, and rounding up never reaches past the page that holds byte length - 1.
  uint64_t mapped = round_up(length, page);
  uint8_t* base = map(fd, mapped);
  if (base == nullptr) {
    why = errstr("mmap");
    return CL_ENOMEM;
  }
  out.adopt(-1, base, length, mapped, page, huge);
  return 0;
}

int AppMemory::register_dpdk(const std::vector<uint16_t>& ports, std::string& why) {
  size_t pages = mapped_ / page_size_;
  std::vector<rte_iova_t> iova;
  bool va = rte_eal_iova_mode() == RTE_IOVA_VA;
  if (va) {
    iova.resize(pages);
    for (size_t i = 0; i < pages; i++)
      iova[i] = reinterpret_cast<uintptr_t>(base_) + i * page_size_;
  }
  if (rte_extmem_register(base_, mapped_, va ? iova.data() : nullptr,
                          va ? static_cast<unsigned>(pages) : 0, page_size_) != 0) {
    why = std::string("rte_extmem_register: ") + rte_strerror(rte_errno) +
          (rte_errno == ENOSPC ? " (DPDK's memory segment lists are all in use)" : "");
    return rte_errno == ENOSPC ? CL_ENOSPC : CL_ENOMEM;
  }
  dpdk_ = true;
  if (!va) return 0;  // physical addressing: only PMDs that translate themselves can use it
  for (uint16_t port : ports) {
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port, &info) != 0 || info.device == nullptr) continue;
    // Virtual devices have nothing to map (ENOTSUP); a NIC behind an IOMMU needs it.
    if (rte_dev_dma_map(info.device, base_, reinterpret_cast<uintptr_t>(base_), mapped_) == 0) {
      dma_ports_.push_back(port);
    } else if (rte_errno != ENOTSUP) {
      why = std::string("rte_dev_dma_map on port ") + std::to_string(port) + ": " +
            rte_strerror(rte_errno);
      unregister_dpdk();
      return CL_ENOMEM;
    }
  }
  return 0;
}

void AppMemory::adopt(int fd, uint8_t* base, uint64_t length, uint64_t mapped, uint64_t page,
                      bool hugetlb) {
  fd_ = fd;
  base_ = base;
  length_ = length;
  mapped_ = mapped;
  page_size_ = page;
  hugetlb_ = hugetlb;
}

bool AppMemory::dpdk_knows() const {
  if (base_ == nullptr) return false;
  const rte_memseg_list* msl = rte_mem_virt2memseg_list(base_);
  return msl != nullptr && msl->external != 0 && msl->base_va == base_ && msl->len >= mapped_;
}

void AppMemory::unregister_dpdk() {
  if (!dpdk_) return;
  for (uint16_t p : dma_ports_) {
    rte_eth_dev_info i{};
    if (rte_eth_dev_info_get(p, &i) == 0 && i.device != nullptr) {
      rte_dev_dma_unmap(i.device, base_, reinterpret_cast<uintptr_t>(base_), mapped_);
    }
  }
  dma_ports_.clear();
  rte_extmem_unregister(base_, mapped_);
  dpdk_ = false;
}

void AppMemory::reset() {
  unregister_dpdk();
  if (base_ != nullptr) munmap(base_, mapped_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  base_ = nullptr;
  length_ = mapped_ = 0;
}

}  // namespace cleave::dp
