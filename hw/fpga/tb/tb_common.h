// tb_common.h - what every Verilator testbench here shares: the seed, failure reports, bit and
// byte access to Verilated signals of any width, AXI-Stream sources and sinks with random
// backpressure, and an AXI-Lite master.
//
// A testbench is one process: it prints its seed first ("seed N"), and CLEAVE_RTL_SEED=N
// replays that run exactly (the DUT is reset with randomized initial state from the same seed).
#pragma once

#include <verilated.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace cleave::tb {

using Bytes = std::vector<uint8_t>;

// The value type of a Verilated port (Verilator 5 declares ports as references).
#define TB_SIG(top_type, port) std::remove_reference_t<decltype(top_type::port)>

// ---- run parameters -----------------------------------------------------------------------

inline uint64_t env_u64(const char* name, uint64_t dflt) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoull(v, nullptr, 0) : dflt;
}

inline uint64_t g_seed = 0;

// The run's seed: CLEAVE_RTL_SEED, else one from the clock. Printed so a failure replays.
inline uint64_t init_seed(const char* tb) {
  g_seed = env_u64("CLEAVE_RTL_SEED", 0);
  if (g_seed == 0) g_seed = std::random_device{}() | uint64_t(std::random_device{}()) << 32;
  std::printf("%s: seed %" PRIu64 " (replay with CLEAVE_RTL_SEED=%" PRIu64 ")\n", tb, g_seed,
              g_seed);
  std::fflush(stdout);
  return g_seed;
}

// A Verilated model whose uninitialized state is random, from the run's seed (replayable).
template <class Top>
Top* make_top(VerilatedContext* c, uint64_t seed) {
  c->randReset(2);
  c->randSeed(int(seed & 0x7FFFFFFF));
  return new Top(c);
}

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FAIL: %s\n  (seed %" PRIu64 ", replay with CLEAVE_RTL_SEED=%" PRIu64 ")\n",
               what.c_str(), g_seed, g_seed);
  std::exit(1);
}

#define TB_CHECK(cond, ...)                                                                       \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      char tb_msg_[512];                                                                          \
      std::snprintf(tb_msg_, sizeof tb_msg_, __VA_ARGS__);                                        \
      ::cleave::tb::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " #cond ": " + \
                         tb_msg_);                                                                \
    }                                                                                             \
  } while (0)

class Rng {
 public:
  explicit Rng(uint64_t seed) : g_(seed) {}
  uint64_t u64() { return g_(); }
  uint64_t below(uint64_t n) { return n == 0 ? 0 : g_() % n; }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(g_) < p; }

 private:
  std::mt19937_64 g_;
};

// ---- bits and bytes of Verilated signals ------------------------------------------------
// Verilator keeps a signal of up to 64 bits in an integer and a wider one in VlWide<N>
// (32-bit words, least significant first). These read and write any bit range of either.

template <typename T>
inline uint64_t get_bits(const T& s, unsigned lsb, unsigned w) {
  uint64_t v = uint64_t(s) >> lsb;
  return w >= 64 ? v : v & ((uint64_t(1) << w) - 1);
}
template <std::size_t N>
inline uint64_t get_bits(const VlWide<N>& s, unsigned lsb, unsigned w) {
  uint64_t v = 0;
  for (unsigned i = 0; i < w; i++) {
    unsigned b = lsb + i;
    v |= uint64_t((s[b / 32] >> (b % 32)) & 1u) << i;
  }
  return v;
}
template <typename T>
inline void set_bits(T& s, unsigned lsb, unsigned w, uint64_t v) {
  uint64_t mask = (w >= 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1) << lsb;
  s = T((uint64_t(s) & ~mask) | ((v << lsb) & mask));
}
template <std::size_t N>
inline void set_bits(VlWide<N>& s, unsigned lsb, unsigned w, uint64_t v) {
  for (unsigned i = 0; i < w; i++) {
    unsigned b = lsb + i;
    uint32_t bit = 1u << (b % 32);
    if ((v >> i) & 1u) {
      s[b / 32] |= bit;
    } else {
      s[b / 32] &= ~bit;
    }
  }
}
template <typename T>
inline uint8_t get_byte(const T& s, unsigned i) {
  return uint8_t(get_bits(s, 8 * i, 8));
}
template <std::size_t N>
inline uint8_t get_byte(const VlWide<N>& s, unsigned i) {
  return uint8_t(s[i / 4] >> (8 * (i % 4)));
}
template <typename T>
inline void set_byte(T& s, unsigned i, uint8_t v) {
  set_bits(s, 8 * i, 8, v);
}
template <std::size_t N>
inline void set_byte(VlWide<N>& s, unsigned i, uint8_t v) {
  uint32_t sh = 8 * (i % 4);
  s[i / 4] = (s[i / 4] & ~(0xFFu << sh)) | (uint32_t(v) << sh);
}
// A record signal (CMD, RX_CPL, ...) to and from the little-endian byte array the generated
// cleave_nic_hw.h helpers read.
template <typename T>
inline void to_bytes(const T& s, uint8_t* out, unsigned nbytes) {
  for (unsigned i = 0; i < nbytes; i++)
    out[i] = get_byte(s, i);
}
template <typename T>
inline void from_bytes(T& s, const uint8_t* in, unsigned nbytes) {
  for (unsigned i = 0; i < nbytes; i++)
    set_byte(s, i, in[i]);
}

// ---- AXI-Stream -------------------------------------------------------------------------
// Frames as byte vectors; NB bytes per beat, tkeep contiguous from lane 0 (only the last beat
// of a frame may be partial). Each step: drive() before the clock edge, then fire() with the
// handshake seen at the edge. A source never drops tvalid before the handshake (AXI rule).

template <typename Data, typename Keep>
class AxisSource {
 public:
  AxisSource(unsigned nb, Data* tdata, Keep* tkeep, uint8_t* tvalid, uint8_t* tlast,
             const uint8_t* tready)
      : nb_(nb), tdata_(tdata), tkeep_(tkeep), tvalid_(tvalid), tlast_(tlast), tready_(tready) {}

  void push(Bytes frame) { q_.push_back(std::move(frame)); }
  bool idle() const { return q_.empty() && !presenting_; }
  size_t queued() const { return q_.size(); }
  void set_stall(double p) { stall_ = p; }

  void drive(Rng& rng) {
    if (!presenting_ && !q_.empty() && !rng.chance(stall_)) presenting_ = true;
    *tvalid_ = presenting_ ? 1 : 0;
    if (!presenting_) return;
    const Bytes& f = q_.front();
    for (unsigned i = 0; i < nb_; i++) {
      size_t at = pos_ + i;
      set_byte(*tdata_, i, at < f.size() ? f[at] : uint8_t(0));
      set_bits(*tkeep_, i, 1, at < f.size() ? 1 : 0);
    }
    *tlast_ = pos_ + nb_ >= f.size() ? 1 : 0;
  }
  // Returns true when a frame's last beat went.
  bool fire() {
    if (!presenting_ || *tready_ == 0) return false;
    presenting_ = false;
    pos_ += nb_;
    if (pos_ >= q_.front().size()) {
      q_.pop_front();
      pos_ = 0;
      return true;
    }
    return false;
  }

 private:
  unsigned nb_;
  Data* tdata_;
  Keep* tkeep_;
  uint8_t* tvalid_;
  uint8_t* tlast_;
  const uint8_t* tready_;
  std::deque<Bytes> q_;
  size_t pos_ = 0;
  bool presenting_ = false;
  double stall_ = 0.3;
};

// Collects frames from a master port of the DUT; tready is random (set_stall: its chance of
// being low each cycle). Checks tkeep is contiguous from lane 0 and only the last beat partial.
template <typename Data, typename Keep>
class AxisSink {
 public:
  AxisSink(const char* name, unsigned nb, const Data* tdata, const Keep* tkeep,
           const uint8_t* tvalid, const uint8_t* tlast, uint8_t* tready)
      : name_(name),
        nb_(nb),
        tdata_(tdata),
        tkeep_(tkeep),
        tvalid_(tvalid),
        tlast_(tlast),
        tready_(tready) {}

  void set_stall(double p) { stall_ = p; }
  void drive(Rng& rng) { *tready_ = rng.chance(stall_) ? 0 : 1; }
  // Returns true when a frame completed (take it with pop()).
  bool fire() {
    if (*tvalid_ == 0 || *tready_ == 0) return false;
    unsigned n = 0;
    while (n < nb_ && get_bits(*tkeep_, n, 1))
      n++;
    for (unsigned i = n; i < nb_; i++)
      TB_CHECK(!get_bits(*tkeep_, i, 1), "%s: tkeep not contiguous", name_);
    TB_CHECK(n > 0, "%s: empty beat", name_);
    TB_CHECK(*tlast_ || n == nb_, "%s: partial beat before tlast", name_);
    for (unsigned i = 0; i < n; i++)
      cur_.push_back(get_byte(*tdata_, i));
    if (*tlast_) {
      done_.push_back(std::move(cur_));
      cur_.clear();
      return true;
    }
    return false;
  }
  bool empty() const { return done_.empty(); }
  size_t ready_frames() const { return done_.size(); }
  Bytes pop() {
    Bytes f = std::move(done_.front());
    done_.pop_front();
    return f;
  }
  bool mid_frame() const { return !cur_.empty(); }

 private:
  const char* name_;
  unsigned nb_;
  const Data* tdata_;
  const Keep* tkeep_;
  const uint8_t* tvalid_;
  const uint8_t* tlast_;
  uint8_t* tready_;
  double stall_ = 0.3;
  Bytes cur_;
  std::deque<Bytes> done_;
};

// ---- AXI-Lite master --------------------------------------------------------------------
// One access at a time, as an agent of the testbench's cycle loop: drive() before the clock
// edge, fire() after sampling. Address and data are offered in a random order with random gaps,
// and bready/rready come late at random. write()/read() run `cycle` until the access is done.
template <typename Top>
class AxilMaster {
 public:
  explicit AxilMaster(Top* top) : top_(top) {}

  void write(uint32_t addr, uint32_t data, const std::function<void()>& cycle) {
    start(true, addr, data);
    wait(cycle);
  }
  uint32_t read(uint32_t addr, const std::function<void()>& cycle) {
    start(false, addr, 0);
    wait(cycle);
    return rdata_;
  }

  void drive(Rng& rng) {
    top_->s_axil_awprot = 0;
    top_->s_axil_arprot = 0;
    top_->s_axil_wstrb = 0xF;
    top_->s_axil_awvalid = busy_ && write_ && !aw_done_ && (aw_shown_ || rng.chance(0.6));
    top_->s_axil_wvalid = busy_ && write_ && !w_done_ && (w_shown_ || rng.chance(0.6));
    top_->s_axil_arvalid = busy_ && !write_ && !ar_done_ && (ar_shown_ || rng.chance(0.6));
    aw_shown_ = top_->s_axil_awvalid;
    w_shown_ = top_->s_axil_wvalid;
    ar_shown_ = top_->s_axil_arvalid;
    top_->s_axil_bready = busy_ && write_ && rng.chance(0.5);
    top_->s_axil_rready = busy_ && !write_ && ar_done_ && rng.chance(0.5);
    top_->s_axil_awaddr = addr_;
    top_->s_axil_araddr = addr_;
    top_->s_axil_wdata = data_;
  }
  void fire() {
    if (!busy_) return;
    if (top_->s_axil_awvalid && top_->s_axil_awready) aw_done_ = true, aw_shown_ = false;
    if (top_->s_axil_wvalid && top_->s_axil_wready) w_done_ = true, w_shown_ = false;
    if (top_->s_axil_arvalid && top_->s_axil_arready) ar_done_ = true, ar_shown_ = false;
    if (write_ && top_->s_axil_bvalid && top_->s_axil_bready) {
      TB_CHECK(aw_done_ && w_done_, "bvalid before the write was taken");
      busy_ = false;
    }
    if (!write_ && top_->s_axil_rvalid && top_->s_axil_rready) {
      TB_CHECK(ar_done_, "rvalid before the read was taken");
      rdata_ = top_->s_axil_rdata;
      busy_ = false;
    }
  }
  bool busy() const { return busy_; }

 private:
  void start(bool write, uint32_t addr, uint32_t data) {
    busy_ = true;
    write_ = write;
    addr_ = addr;
    data_ = data;
    aw_done_ = w_done_ = ar_done_ = false;
  }
  void wait(const std::function<void()>& cycle) {
    for (int guard = 0; busy_; guard++) {
      TB_CHECK(guard < 100000, "AXI-Lite access to 0x%x never completed", addr_);
      cycle();
    }
  }

  Top* top_;
  bool busy_ = false, write_ = false;
  bool aw_done_ = false, w_done_ = false, ar_done_ = false;
  bool aw_shown_ = false, w_shown_ = false, ar_shown_ = false;
  uint32_t addr_ = 0, data_ = 0, rdata_ = 0;
};

}  // namespace cleave::tb
