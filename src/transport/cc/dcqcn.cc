// dcqcn.cc - DCQCN's reaction point and its operator parameters (the NP is inline in dcqcn.h).
#include "dcqcn.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <system_error>

namespace cleave::transport::cc {
namespace {

constexpr uint64_t kMaxMbps = DcqcnParams::kMaxRateBps / 1'000'000;

bool parse_u64(std::string_view v, uint64_t lo, uint64_t hi, uint64_t& out) {
  uint64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi) return false;
  out = x;
  return true;
}

// A fraction in [0, 1] as "0.00390625" or "1/256", to Q20, rounded to nearest.
bool parse_fraction(std::string_view v, uint32_t& out) {
  const size_t slash = v.find('/');
  if (slash != std::string_view::npos) {
    uint64_t num = 0;
    uint64_t den = 0;
    if (!parse_u64(v.substr(0, slash), 0, 1u << 30, num) ||
        !parse_u64(v.substr(slash + 1), 1, 1u << 30, den) || num > den) {
      return false;
    }
    out = static_cast<uint32_t>((num * DcqcnParams::kOne + den / 2) / den);
    return true;
  }
  double d = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (ec != std::errc() || p != v.data() + v.size() || !(d >= 0 && d <= 1)) return false;
  out = static_cast<uint32_t>(std::llround(d * DcqcnParams::kOne));
  return true;
}

// The integer parameters: the value the operator writes times `scale` is stored.
struct U64Key {
  std::string_view key;
  uint64_t DcqcnParams::*field;
  uint64_t lo;
  uint64_t hi;
  uint64_t scale;
};
constexpr U64Key kU64Keys[] = {
    {"dcqcn_alpha_timer_us", &DcqcnParams::alpha_timer_ns, 1, 1'000'000, 1000},
    {"dcqcn_rate_timer_us", &DcqcnParams::rate_timer_ns, 1, 1'000'000, 1000},
    {"dcqcn_byte_counter_kb", &DcqcnParams::byte_counter, 1, 1u << 24, 1024},
    {"dcqcn_rai_mbps", &DcqcnParams::rai_bps, 1, kMaxMbps, 1'000'000},
    {"dcqcn_rhai_mbps", &DcqcnParams::rhai_bps, 1, kMaxMbps, 1'000'000},
    {"dcqcn_min_rate_mbps", &DcqcnParams::min_rate_bps, 1, kMaxMbps, 1'000'000},
    {"dcqcn_line_rate_mbps", &DcqcnParams::line_rate_bps, 1, kMaxMbps, 1'000'000},
    {"dcqcn_rate_reduce_period_us", &DcqcnParams::rate_reduce_period_ns, 0, 1'000'000, 1000},
    {"dcqcn_cnp_interval_us", &DcqcnParams::cnp_interval_ns, 0, 1'000'000, 1000},
};
struct U32Key {
  std::string_view key;
  uint32_t DcqcnParams::*field;
  uint64_t lo;
  uint64_t hi;
};
constexpr U32Key kU32Keys[] = {
    {"dcqcn_fast_recovery_steps", &DcqcnParams::fast_recovery_steps, 0, 255},
    {"dcqcn_min_dec_pct", &DcqcnParams::min_dec_pct, 1, 100},
    {"dcqcn_cnp_dscp", &DcqcnParams::cnp_dscp, 0, 63},
};

}  // namespace

std::string DcqcnParams::set(std::string_view key, std::string_view value) {
  const std::string bad =
      "dcqcn: bad value '" + std::string(value) + "' for " + std::string(key) + " (";
  if (key == "dcqcn_g" || key == "dcqcn_alpha_init") {
    uint32_t q = 0;
    const bool is_g = key == "dcqcn_g";
    if (!parse_fraction(value, q)) {
      return bad + (is_g ? "a fraction in (0, 1]" : "a fraction in [0, 1]") +
             ", as 0.00390625 or 1/256)";
    }
    if (is_g && q == 0) return bad + "rounds to 0; the smallest gain is 1/1048576)";
    (is_g ? g : alpha_init) = q;
    return "";
  }
  for (const U64Key& k : kU64Keys) {
    if (key != k.key) continue;
    uint64_t v = 0;
    if (!parse_u64(value, k.lo, k.hi, v)) {
      return bad + "a whole number " + std::to_string(k.lo) + ".." + std::to_string(k.hi) + ")";
    }
    v *= k.scale;
    // The two rates bound each other, so the error names the other one's current value.
    if (k.field == &DcqcnParams::min_rate_bps && v > line_rate_bps) {
      return bad + "above dcqcn_line_rate_mbps, " + std::to_string(line_rate_bps / 1'000'000) + ")";
    }
    if (k.field == &DcqcnParams::line_rate_bps && v < min_rate_bps) {
      return bad + "below dcqcn_min_rate_mbps, " + std::to_string(min_rate_bps / 1'000'000) + ")";
    }
    this->*k.field = v;
    return "";
  }
  for (const U32Key& k : kU32Keys) {
    if (key != k.key) continue;
    uint64_t v = 0;
    if (!parse_u64(value, k.lo, k.hi, v)) {
      return bad + "a whole number " + std::to_string(k.lo) + ".." + std::to_string(k.hi) + ")";
    }
    this->*k.field = static_cast<uint32_t>(v);
    return "";
  }
  std::string names = "dcqcn_g, dcqcn_alpha_init";
  for (const U64Key& k : kU64Keys)
    names += ", " + std::string(k.key);
  for (const U32Key& k : kU32Keys)
    names += ", " + std::string(k.key);
  return "dcqcn: unknown parameter '" + std::string(key) + "' (have " + names + ")";
}

void DcqcnRp::init(const DcqcnParams& p, uint64_t now_ns) {
  // The fields are public, so they may hold what set() would refuse: clamp rather than divide
  // by zero or loop forever later.
  line_bps_ = std::clamp<uint64_t>(p.line_rate_bps, 1, DcqcnParams::kMaxRateBps);
  min_bps_ = std::clamp<uint64_t>(p.min_rate_bps, 1, line_bps_);
  rai_bps_ = std::max<uint64_t>(p.rai_bps, 1);
  rhai_bps_ = std::max<uint64_t>(p.rhai_bps, 1);
  k_ns_ = std::max<uint64_t>(p.alpha_timer_ns, 1);
  t_ns_ = std::max<uint64_t>(p.rate_timer_ns, 1);
  b_bytes_ = std::max<uint64_t>(p.byte_counter, 1);
  reduce_period_ns_ = p.rate_reduce_period_ns;
  g_ = std::clamp<uint32_t>(p.g, 1, DcqcnParams::kOne);
  f_ = p.fast_recovery_steps;
  min_dec_pct_ = std::clamp<uint32_t>(p.min_dec_pct, 1, 100);

  rc_ = rt_ = line_bps_;
  alpha_ = std::min(p.alpha_init, DcqcnParams::kOne);
  timer_count_ = byte_count_ = 0;
  bytes_ = 0;
  alpha_due_ns_ = alpha_ == 0 ? kNever : now_ns + k_ns_;
  increase_due_ns_ = kNever;  // at line rate: nothing to increase
  last_cut_ns_ = 0;
  cut_once_ = false;
  c_ = DcqcnRpCounters{};
}

bool DcqcnRp::on_cnp(uint64_t now_ns) {
  c_.cnps++;
  if (cut_once_ && now_ns - last_cut_ns_ < reduce_period_ns_) {
    c_.cnps_coalesced++;
    return false;
  }
  cut_once_ = true;
  last_cut_ns_ = now_ns;
  c_.decreases++;

  const uint64_t old = rc_;
  rt_ = rc_;
  // R_C (1 - alpha/2): rc_ < 2^41 and alpha_ <= 2^20, so the product fits.
  const uint64_t cut = (rc_ * alpha_) >> (DcqcnParams::kOneShift + 1);
  const uint64_t floor = std::max(rc_ * min_dec_pct_ / 100, min_bps_);
  rc_ = std::max(rc_ - cut, floor);
  alpha_ = static_cast<uint32_t>((uint64_t{alpha_} * (DcqcnParams::kOne - g_)) >>
                                 DcqcnParams::kOneShift) +
           g_;

  alpha_due_ns_ = now_ns + k_ns_;
  increase_due_ns_ = now_ns + t_ns_;
  timer_count_ = byte_count_ = 0;
  bytes_ = 0;
  return rc_ != old;
}

// The byte counter reached B (once or more): an increase event each time.
bool DcqcnRp::byte_events() {
  bool changed = false;
  while (bytes_ >= b_bytes_) {
    bytes_ -= b_bytes_;
    byte_count_++;
    c_.byte_events++;
    changed |= increase_event();
    if (increase_due_ns_ == kNever) break;  // reached line rate
  }
  return changed;
}

bool DcqcnRp::tick(uint64_t now_ns) {
  bool changed = false;
  for (uint32_t n = 0; alpha_due_ns_ <= now_ns && n < kMaxCatchUp; ++n) {
    // Rounded down, so alpha reaches 0 (and its timer stops) instead of sticking at g's floor.
    alpha_ = static_cast<uint32_t>((uint64_t{alpha_} * (DcqcnParams::kOne - g_)) >>
                                   DcqcnParams::kOneShift);
    c_.alpha_decays++;
    alpha_due_ns_ = alpha_ == 0 ? kNever : alpha_due_ns_ + k_ns_;
  }
  for (uint32_t n = 0; increase_due_ns_ <= now_ns && n < kMaxCatchUp; ++n) {
    increase_due_ns_ += t_ns_;
    timer_count_++;
    c_.timer_events++;
    changed |= increase_event();  // at line rate it stops the timer
  }
  return changed;
}

uint64_t DcqcnRp::next_timer_ns() const {
  return std::min(alpha_due_ns_, increase_due_ns_);
}

bool DcqcnRp::increase_event() {
  const uint64_t old = rc_;
  const uint32_t most = std::max(timer_count_, byte_count_);
  const uint32_t least = std::min(timer_count_, byte_count_);
  if (most <= f_) {
    c_.fast_recovery++;
  } else if (least > f_) {
    c_.hyper++;
    const uint64_t i = least - f_;
    // i R_HAI, saturating: past line rate it is clamped below anyway.
    rt_ += i >= line_bps_ / rhai_bps_ ? line_bps_ : i * rhai_bps_;
  } else {
    c_.additive++;
    rt_ += rai_bps_;
  }
  rt_ = std::min(rt_, line_bps_);
  // (R_T + R_C) / 2 rounded up (R_T >= R_C always), so that R_C does reach R_T.
  rc_ += (rt_ - rc_ + 1) / 2;
  if (rc_ >= line_bps_) {
    rc_ = line_bps_;
    increase_due_ns_ = kNever;
    bytes_ = 0;
  }
  return rc_ != old;
}

}  // namespace cleave::transport::cc
