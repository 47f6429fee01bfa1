// cc.cc - the algorithms by name, built in place in the storage a flow owns.
#include "cc.h"

#include <array>

#include "algorithms.h"

namespace cleave::transport::cc {
namespace {

// A flow's Storage must hold whichever algorithm an operator picks for it.
static_assert(sizeof(NewReno) <= kStorageBytes, "NewReno outgrew cc::Storage");
static_assert(sizeof(Cubic) <= kStorageBytes, "Cubic outgrew cc::Storage");
static_assert(sizeof(Dctcp) <= kStorageBytes, "Dctcp outgrew cc::Storage");
static_assert(alignof(NewReno) <= alignof(Storage), "NewReno needs a stricter cc::Storage");
static_assert(alignof(Cubic) <= alignof(Storage), "Cubic needs a stricter cc::Storage");
static_assert(alignof(Dctcp) <= alignof(Storage), "Dctcp needs a stricter cc::Storage");

// NewReno first: the default, the one every peer and middlebox has seen.
constexpr std::array<std::string_view, 3> kNames = {NewReno::kName, Cubic::kName, Dctcp::kName};

}  // namespace

Algorithm* construct(std::string_view name, Storage& mem) {
  if (name == NewReno::kName) return new (mem.bytes) NewReno();
  if (name == Cubic::kName) return new (mem.bytes) Cubic();
  if (name == Dctcp::kName) return new (mem.bytes) Dctcp();
  return nullptr;
}

std::span<const std::string_view> names() {
  return kNames;
}

}  // namespace cleave::transport::cc
