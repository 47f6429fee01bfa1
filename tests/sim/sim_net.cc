// sim_net.cc - the simulated network: frame pool, faulty link, hosts over the NIC model, loop.
#include "sim_net.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <sstream>

#include "common/wire.h"
#include "transport/rocev2/roce_wire.h"

namespace cleave::sim {

using transport::Csum;
using transport::Placed;
using wire::load16;
using wire::load32;
using wire::store16;

namespace {

constexpr uint32_t kEthLen = 14;
constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// xoshiro256**: small state, fast, and the same sequence on every platform.
class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& w : s_)
      w = splitmix64(seed);
  }
  uint64_t next() {
    const uint64_t r = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return r;
  }
  // True with probability p; draws nothing when p is 0 or less.
  bool chance(double p) {
    if (p <= 0) return false;
    return double(next() >> 11) * 0x1.0p-53 < p;
  }
  // Uniform in [0, n), n > 0.
  uint32_t below(uint32_t n) { return uint32_t(next() % n); }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  std::array<uint64_t, 4> s_{};
};

// The L3/L4 layout of an Ethernet/IPv4 frame as the NIC sent it; ok false when it is not one.
struct Layout {
  bool ok = false;
  uint32_t ip_hlen = 0;
  uint32_t ip_len = 0;  // IP total length
  uint8_t proto = 0;
  uint32_t l4_hlen = 0;  // TCP data offset, 8 for UDP, 0 for other protocols
  uint32_t hdr_end() const { return kEthLen + ip_hlen + l4_hlen; }
  uint32_t end() const { return kEthLen + ip_len; }
};

Layout layout(const uint8_t* f, uint32_t len) {
  Layout l;
  if (len < kEthLen + 20 || load16(f + 12) != 0x0800 || (f[kEthLen] >> 4) != 4) return l;
  const uint8_t* ip = f + kEthLen;
  l.ip_hlen = uint32_t(ip[0] & 0xF) * 4;
  l.ip_len = load16(ip + 2);
  l.proto = ip[9];
  if (l.ip_hlen < 20 || l.ip_len < l.ip_hlen || kEthLen + l.ip_len > len) return l;
  const uint32_t l4_room = l.ip_len - l.ip_hlen;
  if (l.proto == 6) {
    if (l4_room < 20) return l;
    l.l4_hlen = uint32_t(ip[l.ip_hlen + 12] >> 4) * 4;
    if (l.l4_hlen < 20 || l.l4_hlen > l4_room) return l;
  } else if (l.proto == 17) {
    if (l4_room < 8) return l;
    l.l4_hlen = 8;
  }
  l.ok = true;
  return l;
}

void fix_ip_csum(uint8_t* ip, uint32_t ip_hlen) {
  store16(ip + 10, 0);
  store16(ip + 10, wire::csum_fold(wire::csum_partial(ip, ip_hlen, 0)));
}

// The dataplane's check of a frame the NIC did not check (flows.cc): the RoCEv2 ICRC (its UDP
// checksum is 0), else the TCP or UDP checksum.
Csum software_l4_csum(const uint8_t* l3, uint8_t proto, const uint8_t* l4, uint32_t l4_total) {
  if (proto == 17 && load16(l4 + 2) == transport::roce::kUdpPort) {
    return wire::roce_icrc_ok(l3, size_t(l4 - l3) + l4_total) ? Csum::kGood : Csum::kBad;
  }
  if (proto == 17 && load16(l4 + 6) == 0) return Csum::kNotChecked;  // UDP: no checksum
  uint64_t s = wire::pseudo_sum(l3, proto, l4_total);
  return wire::csum_fold(wire::csum_partial(l4, l4_total, s)) == 0 ? Csum::kGood : Csum::kBad;
}

}  // namespace

// ---- frame pool ---------------------------------------------------------------------------------

// Fixed-size frame buffers, allocated in blocks and recycled through a free list: the pool grows
// to the most frames ever in flight, then stops allocating.
class FramePool {
 public:
  explicit FramePool(uint32_t slot_bytes) : slot_bytes_((slot_bytes + 63) / 64 * 64) {}
  uint32_t slot_bytes() const { return slot_bytes_; }
  uint32_t alloc() {
    if (free_.empty()) grow();
    uint32_t s = free_.back();
    free_.pop_back();
    return s;
  }
  void release(uint32_t slot) { free_.push_back(slot); }
  uint8_t* data(uint32_t slot) {
    return blocks_[slot / kBlockSlots].get() + size_t(slot % kBlockSlots) * slot_bytes_;
  }
  size_t capacity() const { return blocks_.size() * kBlockSlots; }
  size_t in_use() const { return capacity() - free_.size(); }

 private:
  static constexpr uint32_t kBlockSlots = 256;
  void grow() {
    const auto first = uint32_t(blocks_.size() * kBlockSlots);
    blocks_.push_back(std::make_unique_for_overwrite<uint8_t[]>(size_t(kBlockSlots) * slot_bytes_));
    free_.reserve(capacity());
    for (uint32_t i = kBlockSlots; i-- > 0;)
      free_.push_back(first + i);  // lowest first out
  }
  uint32_t slot_bytes_;
  std::vector<std::unique_ptr<uint8_t[]>> blocks_;
  std::vector<uint32_t> free_;
};

// ---- link ---------------------------------------------------------------------------------------

// One direction: faults where frames enter, an ordering stage, a FIFO with serialization and
// delay. Frames are pool slots; the link owns them from send() until pop_due() hands them on.
class Link {
 public:
  using Frame = detail::Frame;

  Link(const LinkConfig& cfg, uint64_t seed, FramePool& pool) : cfg_(cfg), rng_(seed), pool_(pool) {
    queue_.resize(1024);
    held_.reserve(64);
    window_.reserve(64);
  }

  Faults faults;
  LinkStats stats;

  // A frame from the sending NIC at time `now`.
  void send(Frame f, uint64_t now) {
    stats.sent++;
    uint8_t* p = pool_.data(f.slot);
    if (f.len > kEthLen + cfg_.mtu) return drop(f, stats.dropped_mtu);
    if (faults.down) return drop(f, stats.dropped_down);
    if (faults.drop_if && faults.drop_if(std::span<const uint8_t>(p, f.len))) {
      return drop(f, stats.dropped_filter);
    }
    if (burst_left_ > 0 && now > burst_end_) burst_left_ = 0;  // the episode is over
    if (burst_left_ > 0) {
      burst_left_--;
      stats.burst_lost++;
      return drop(f, stats.lost);
    }
    if (rng_.chance(faults.loss)) {
      if (faults.loss_burst_len >= 2 && rng_.chance(faults.loss_burst)) {
        burst_left_ = 1 + rng_.below(faults.loss_burst_len - 1);
        burst_end_ = now + faults.loss_burst_max_ns;
      }
      return drop(f, stats.lost);
    }
    mutate(p, f.len);
    uint32_t copies = rng_.chance(faults.duplicate) ? 1 + rng_.below(3) : 0;
    order(f, now);
    for (uint32_t i = 0; i < copies; i++) {
      Frame c{pool_.alloc(), f.len};
      std::memcpy(pool_.data(c.slot), p, f.len);
      stats.duplicated++;
      order(c, now);
    }
  }

  // Releases held frames whose deadline has come.
  void release_due(uint64_t now) {
    if (!window_.empty() && window_deadline_ <= now) flush_window(now);
    for (size_t i = 0; i < held_.size();) {
      if (held_[i].deadline <= now) {
        Frame f = held_[i].f;
        held_.erase(held_.begin() + ptrdiff_t(i));
        enqueue(f, now);
      } else {
        i++;
      }
    }
  }

  // The earliest time something happens on this link: an arrival or a hold deadline.
  uint64_t next_event() const {
    uint64_t t = count_ != 0 ? queue_[head_].arrive : kNever;
    if (!window_.empty()) t = std::min(t, window_deadline_);
    for (const Held& h : held_)
      t = std::min(t, h.deadline);
    return t;
  }

  // The next frame that has arrived by `now`, if any. Frames arriving while `down` are lost.
  bool pop_due(uint64_t now, Frame& out) {
    while (count_ != 0 && queue_[head_].arrive <= now) {
      Frame f = queue_[head_].f;
      head_ = (head_ + 1) % queue_.size();
      count_--;
      if (faults.down) {
        drop(f, stats.dropped_down);
        continue;
      }
      stats.delivered++;
      stats.delivered_bytes += f.len;
      out = f;
      return true;
    }
    return false;
  }

  size_t in_flight() const { return count_ + held_.size() + window_.size(); }

  ~Link() {
    for (size_t i = 0; i < count_; i++)
      pool_.release(queue_[(head_ + i) % queue_.size()].f.slot);
    for (const Held& h : held_)
      pool_.release(h.f.slot);
    for (const Frame& f : window_)
      pool_.release(f.slot);
  }
  Link(const Link&) = delete;
  Link& operator=(const Link&) = delete;

 private:
  struct Queued {
    uint64_t arrive = 0;
    Frame f;
  };
  struct Held {
    Frame f;
    uint32_t after = 0;  // frames still to pass before it
    uint64_t deadline = 0;
  };

  void drop(Frame f, uint64_t& counter) {
    counter++;
    pool_.release(f.slot);
  }

  // CE marking, then bit flips, then truncation (so a CE checksum fix never hides a flip).
  void mutate(uint8_t* p, uint32_t& len) {
    const Layout l = layout(p, len);
    if (!l.ok) return;
    uint8_t* ip = p + kEthLen;
    if (rng_.chance(faults.ce) && (ip[1] & 3) != 0 && (ip[1] & 3) != 3) {
      ip[1] |= 3;
      fix_ip_csum(ip, l.ip_hlen);
      stats.ce_marked++;
    }
    if (rng_.chance(faults.corrupt_header)) {
      uint32_t bit = rng_.below((l.ip_hlen + l.l4_hlen) * 8);
      ip[bit / 8] ^= uint8_t(1u << (bit % 8));
      stats.corrupted_header++;
    }
    if (rng_.chance(faults.corrupt_payload) && l.end() > l.hdr_end()) {
      uint32_t bit = rng_.below((l.end() - l.hdr_end()) * 8);
      p[l.hdr_end() + bit / 8] ^= uint8_t(1u << (bit % 8));
      stats.corrupted_payload++;
    }
    if (rng_.chance(faults.corrupt_checksum) && (l.proto == 6 || l.proto == 17)) {
      uint32_t at = kEthLen + l.ip_hlen + (l.proto == 6 ? 16 : 6);
      uint32_t bit = rng_.below(16);
      p[at + bit / 8] ^= uint8_t(1u << (bit % 8));
      stats.corrupted_checksum++;
    }
    if (rng_.chance(faults.truncate) && len > 1) {
      len = 1 + rng_.below(len - 1);
      stats.truncated++;
    }
  }

  // Reorder holds and window reversal.
  void order(Frame f, uint64_t now) {
    if (faults.delay_if) {
      if (const uint64_t ns =
              faults.delay_if(std::span<const uint8_t>(pool_.data(f.slot), f.len))) {
        held_.push_back({f, UINT32_MAX, now + ns});
        stats.reordered++;
        return;
      }
    }
    if (!window_.empty()) {
      window_.push_back(f);
      if (window_.size() >= window_target_) flush_window(now);
      return;
    }
    if (faults.reverse_window >= 2 && rng_.chance(faults.reverse)) {
      window_target_ = faults.reverse_window;
      window_deadline_ = now + faults.reorder_max_hold_ns;
      window_.push_back(f);
      stats.reversals++;
      return;
    }
    if (faults.reorder_depth >= 1 && rng_.chance(faults.reorder)) {
      held_.push_back({f, 1 + rng_.below(faults.reorder_depth), now + faults.reorder_max_hold_ns});
      stats.reordered++;
      return;
    }
    pass(f, now);
  }

  // A frame leaves the ordering stage; held frames it was the k-th for follow it.
  void pass(Frame f, uint64_t now) {
    enqueue(f, now);
    for (size_t i = 0; i < held_.size();) {
      if (--held_[i].after == 0) {
        Frame h = held_[i].f;
        held_.erase(held_.begin() + ptrdiff_t(i));
        enqueue(h, now);
      } else {
        i++;
      }
    }
  }

  void flush_window(uint64_t now) {
    // pass() may not add to the window, so iterating it backwards is safe.
    for (size_t i = window_.size(); i-- > 0;)
      pass(window_[i], now);
    window_.clear();
  }

  // Tail drop, serialization (in picoseconds, so rounding never accumulates), delay.
  void enqueue(Frame f, uint64_t now) {
    const uint64_t now_ps = now * 1000;
    const uint64_t wire = uint64_t(f.len) + cfg_.overhead_bytes;
    uint64_t backlog = 0;
    if (cfg_.rate_bps != 0 && busy_ps_ > now_ps) {
      backlog = uint64_t(std::llround(double(busy_ps_ - now_ps) * double(cfg_.rate_bps) / 8e12));
    }
    if (cfg_.queue_bytes != 0 && backlog + wire > cfg_.queue_bytes) {
      return drop(f, stats.dropped_queue);
    }
    stats.max_queue_bytes = std::max(stats.max_queue_bytes, backlog + wire);
    const uint64_t start = std::max(now_ps, busy_ps_);
    busy_ps_ = start + (cfg_.rate_bps == 0 ? 0 : wire * 8'000'000'000'000ull / cfg_.rate_bps);
    uint64_t arrive = (busy_ps_ + 999) / 1000 + cfg_.delay_ns;
    if (faults.path_delay_if)
      arrive += faults.path_delay_if(std::span<const uint8_t>(pool_.data(f.slot), f.len));
    if (count_ == queue_.size()) {
      // Double the ring, oldest first.
      std::vector<Queued> bigger(queue_.size() * 2);
      for (size_t i = 0; i < count_; i++)
        bigger[i] = queue_[(head_ + i) % queue_.size()];
      queue_.swap(bigger);
      head_ = 0;
    }
    // In arrival order: a frame on a faster path (path_delay_if) passes those before it.
    size_t at = count_;
    for (; at != 0 && queue_[(head_ + at - 1) % queue_.size()].arrive > arrive; at--)
      queue_[(head_ + at) % queue_.size()] = queue_[(head_ + at - 1) % queue_.size()];
    queue_[(head_ + at) % queue_.size()] = Queued{arrive, f};
    count_++;
  }

  LinkConfig cfg_;
  Rng rng_;
  FramePool& pool_;
  uint64_t busy_ps_ = 0;  // when the last queued frame has been serialized
  uint32_t burst_left_ = 0;
  uint64_t burst_end_ = 0;     // a burst also ends at this time
  std::vector<Queued> queue_;  // a ring: head_, count_
  size_t head_ = 0;
  size_t count_ = 0;
  std::vector<Held> held_;
  std::vector<Frame> window_;
  size_t window_target_ = 0;
  uint64_t window_deadline_ = 0;
};

// ---- host ---------------------------------------------------------------------------------------

size_t Host::KeyHash::operator()(const Key& k) const {
  uint64_t x = uint64_t(k.remote_ip) << 32 | k.local_ip;
  uint64_t y = uint64_t(k.remote_port) << 24 | uint64_t(k.local_port) << 8 | k.proto;
  uint64_t h = x * 0x9E3779B97F4A7C15ull ^ (y + 0x632BE59BD9B4E019ull) * 0xC2B2AE3D27D4EB4Full;
  return size_t(h ^ (h >> 29));
}

Host::Host(HostConfig cfg, std::string name, const uint64_t* clock, FramePool* pool)
    : Context(tx, ev),
      name_(std::move(name)),
      ip_(cfg.ip),
      mac_(cfg.mac),
      zero_copy_(cfg.zero_copy),
      nic_messages_(cfg.nic_messages),
      drop_bad_csum_(cfg.drop_bad_csum),
      nic_(cfg.nic),
      transport_(std::move(cfg.transport)),
      on_event_(std::move(cfg.on_event)),
      clock_(clock),
      pool_(pool) {
  pending_.reserve(256);
  app_work_.reserve(256);
  by_tuple_.reserve(64);
}

Host::~Host() {
  for (size_t i = 0; i < rx_n_; i++)
    pool_->release(rx_frames_[i].slot);
  transport_.reset();  // before the NIC and the memory it may refer to
}

uint16_t Host::add_mr(size_t bytes) {
  const auto id = uint16_t(mrs_.size());
  mrs_.emplace_back(bytes, uint8_t(0));
  const uint8_t remote = nic::kMrRemoteWrite | nic::kMrRemoteRead;
  if (nic_.mr_add(id, mrs_.back().data(), bytes, 0, remote) != nic::Err::kOk) stats_.cmd_errors++;
  return id;
}

void Host::set_mr_access(uint16_t mr, uint8_t access) {
  if (nic_.mr_remove(mr) != nic::Err::kOk ||
      nic_.mr_add(mr, mrs_.at(mr).data(), mrs_[mr].size(), 0, access) != nic::Err::kOk) {
    stats_.cmd_errors++;
  }
}

std::span<uint8_t> Host::mr(uint16_t id) {
  return id < mrs_.size() ? std::span<uint8_t>(mrs_[id]) : std::span<uint8_t>();
}

int Host::listen(ListenerId listener, uint16_t port, Params params) {
  int rc = transport_->listen(listener, endpoint(port), params);
  if (rc == 0) listeners_.emplace_back(port, listener);
  return rc;
}

void Host::unlisten(ListenerId listener) {
  transport_->unlisten(listener);
  std::erase_if(listeners_, [&](const auto& l) { return l.second == listener; });
}

FlowId Host::connect(uint16_t local_port, const Endpoint& remote, uint8_t proto, Params params,
                     int* err) {
  FlowTuple t{endpoint(local_port), remote, proto};
  FlowId id = alloc_flow(t);
  if (id == transport::kNoFlow) {
    if (err != nullptr) *err = -ENOSPC;
    return id;
  }
  sync_now();
  int rc = transport_->connect(id, t, params, *this);
  flush();
  if (err != nullptr) *err = rc;
  if (rc < 0) {
    free_flow(id);
    return transport::kNoFlow;
  }
  return id;
}

const FlowTuple* Host::flow_tuple(FlowId flow) const {
  return flow < flows_.size() && flows_[flow].used ? &flows_[flow].tuple : nullptr;
}

FlowId Host::alloc_flow(const FlowTuple& tuple) {
  if (tuple.local.ip.family != 4 || tuple.remote.ip.family != 4) return transport::kNoFlow;
  Key k{tuple.remote.ip.v4_host(), tuple.local.ip.v4_host(), tuple.remote.port, tuple.local.port,
        tuple.proto};
  if (by_tuple_.contains(k)) return transport::kNoFlow;
  FlowId id;
  if (flows_.size() < nic_.config().max_flows) {
    id = FlowId(flows_.size());
    flows_.emplace_back();
  } else if (!free_ids_.empty()) {
    id = free_ids_.front();
    free_ids_.erase(free_ids_.begin());  // oldest first: a closed id rests as long as it can
  } else {
    return transport::kNoFlow;
  }
  flows_[id] = Flow{tuple, 0, true, false, false, false};
  by_tuple_.emplace(k, id);
  return id;
}

void Host::free_flow(FlowId id) {
  Flow& f = flows_[id];
  if (f.on_nic && nic_.flow_remove(id) != nic::Err::kOk) stats_.cmd_errors++;
  by_tuple_.erase(Key{f.tuple.remote.ip.v4_host(), f.tuple.local.ip.v4_host(), f.tuple.remote.port,
                      f.tuple.local.port, f.tuple.proto});
  f = Flow{};
  free_ids_.push_back(id);
}

int Host::nic_err(nic::Err e) {
  switch (e) {
    case nic::Err::kOk:
      return 0;
    case nic::Err::kUnknownFlow:
      stats_.cmd_errors++;
      return -ENOENT;
    case nic::Err::kMsFull:
      stats_.cmd_errors++;
      return -ENOBUFS;
    case nic::Err::kNotConsumed:
      stats_.cmd_errors++;
      return -EAGAIN;
    case nic::Err::kOutOfBounds:
      stats_.cmd_errors++;
      return -ERANGE;
    default:
      stats_.cmd_errors++;
      return -EINVAL;
  }
}

int Host::ms_post(FlowId flow, uint16_t mr, uint64_t offset, uint32_t len, uint32_t msg) {
  // A message flow's MSs only mean something to a NIC flow that places by message.
  if (flow < flows_.size() && flows_[flow].messages && !flows_[flow].nic_messages) {
    return -EOPNOTSUPP;
  }
  return nic_err(nic_.ms_post(flow, nic::MsDesc{mr, offset, len, msg}));
}

int Host::cursor_update(FlowId flow, uint32_t cursor) {
  return nic_err(nic_.cursor_update(flow, cursor));
}

int Host::ms_retire(FlowId flow, uint32_t count) {
  return nic_err(nic_.ms_retire(flow, count));
}

int Host::ms_retire_msg(FlowId flow, uint32_t msg) {
  return nic_err(nic_.ms_retire_msg(flow, msg));
}

bool Host::copy_in(const uint8_t* src, uint32_t len, uint16_t mr, uint64_t offset) {
  if (mr >= mrs_.size()) return false;
  std::vector<uint8_t>& m = mrs_[mr];
  if (offset > m.size() || len > m.size() - offset) return false;
  if (len != 0) std::memcpy(m.data() + offset, src, len);
  return true;
}

FlowId Host::flow_open(ListenerId /*listener*/, const FlowTuple& tuple, uint32_t initial_seq,
                       bool messages) {
  FlowId id = alloc_flow(tuple);
  if (id == transport::kNoFlow) return id;
  if (tuple.proto == 6) {
    flow_synced(id, initial_seq, messages);
    if (!flows_[id].on_nic) {
      free_flow(id);
      return transport::kNoFlow;
    }
  }
  return id;
}

void Host::flow_synced(FlowId flow, uint32_t initial_seq, bool messages) {
  if (flow >= flows_.size() || !flows_[flow].used) return;
  Flow& f = flows_[flow];
  if (f.on_nic || f.tuple.proto != 6) return;  // UDP stays off the NIC
  f.messages = messages;
  f.nic_messages = messages && nic_messages_;
  nic::FlowSpec spec;
  spec.key = nic::FlowKey{f.tuple.remote.ip.v4_host(), f.tuple.local.ip.v4_host(),
                          f.tuple.remote.port, f.tuple.local.port, 6};
  spec.mode = zero_copy_ ? nic::FlowMode::kZeroCopy : nic::FlowMode::kCopy;
  spec.parser = nic::Parser::kTcp;
  spec.reliable = true;
  spec.messages = f.nic_messages;
  spec.initial_seq = initial_seq;
  if (nic_.flow_add(flow, spec) == nic::Err::kOk) {
    f.on_nic = true;
  } else {
    stats_.cmd_errors++;
  }
}

FlowId Host::roce_flow(uint32_t remote_ip, uint32_t qpn, uint32_t initial_psn, uint32_t pmtu,
                       bool selective_repeat) {
  FlowTuple t{
      endpoint(transport::roce::kUdpPort), {transport::IpAddr::v4(remote_ip), uint16_t(qpn)}, 17};
  FlowId id = alloc_flow(t);
  if (id == transport::kNoFlow) return id;
  nic::FlowSpec spec;
  spec.key = nic::FlowKey{remote_ip, ip_, 0, transport::roce::kUdpPort, 17};
  spec.qpn = qpn;
  spec.owner = 0;  // the MRs' owner: one app per host here
  spec.mode = zero_copy_ ? nic::FlowMode::kZeroCopy : nic::FlowMode::kCopy;
  spec.parser = nic::Parser::kRoce;
  spec.reliable = true;
  spec.messages = true;
  spec.initial_seq = initial_psn;
  spec.pmtu = pmtu;
  spec.selective_repeat = selective_repeat;
  if (nic_.flow_add(id, spec) != nic::Err::kOk) {
    stats_.cmd_errors++;
    free_flow(id);
    return transport::kNoFlow;
  }
  flows_[id].on_nic = true;
  flows_[id].messages = flows_[id].nic_messages = true;
  return id;
}

FlowId Host::solar_flow(uint32_t remote_ip, uint16_t port, uint32_t conn, bool messages) {
  // Remote port 0: the software lookup, like the NIC, takes any source port (every path's).
  FlowTuple t{endpoint(port), {transport::IpAddr::v4(remote_ip), 0}, 17};
  FlowId id = alloc_flow(t);
  if (id == transport::kNoFlow) return id;
  nic::FlowSpec spec;
  spec.key = nic::FlowKey{remote_ip, ip_, 0, port, 17};
  spec.mode = zero_copy_ ? nic::FlowMode::kZeroCopy : nic::FlowMode::kCopy;
  spec.parser = nic::Parser::kSolar;
  spec.qpn = conn;  // the NIC finds a Solar connection by its number, as a QP by its QPN
  spec.reliable = true;
  spec.messages = messages;
  spec.initial_offset = 0;
  if (nic_.flow_add(id, spec) != nic::Err::kOk) {
    stats_.cmd_errors++;
    free_flow(id);
    return transport::kNoFlow;
  }
  flows_[id].on_nic = true;
  flows_[id].solar = true;
  flows_[id].messages = flows_[id].nic_messages = messages;
  return id;
}

int Host::rkey_check(FlowId flow, uint32_t rkey, uint64_t va, uint32_t len, bool write,
                     uint16_t* mr, uint64_t* offset) {
  // The NIC's rule (rkey = tag << 16 | MR id, VA = offset in the MR, the flow's owner, the MR's
  // remote access): the one its WRITE placement keeps.
  const uint8_t access = write ? nic::kMrRemoteWrite : nic::kMrRemoteRead;
  if (nic_.rkey_check(flow, rkey, va, len, access, mr) != nic::Err::kOk) return -EACCES;
  *offset = va;
  return 0;
}

int Host::read_post(FlowId flow, uint32_t psn, uint16_t mr, uint64_t offset, uint32_t len) {
  if (!zero_copy_) return -EOPNOTSUPP;  // copy mode: READ responses take the copy path too
  return nic_err(nic_.read_post(flow, psn, mr, offset, len));
}

int Host::read_retire(FlowId flow, uint32_t psn) {
  if (!zero_copy_) return -EOPNOTSUPP;
  return nic_err(nic_.read_retire(flow, psn));
}

int Host::roce_resync(FlowId flow, uint32_t psn, uint32_t next_msg) {
  return nic_err(nic_.roce_resync(flow, psn, next_msg));
}

void Host::flow_closed(FlowId flow) {
  if (flow < flows_.size() && flows_[flow].used) free_flow(flow);
}

// ---- host: send ---------------------------------------------------------------------------------

void Host::drain_tx(std::span<transport::TxDesc> descs) {
  for (const transport::TxDesc& d : descs)
    send_desc(d);
  poll_tx();
}

void Host::poll_tx() {
  while (nic_.tx_poll(tx_done_) == tx_done_.size()) {
  }
}

void Host::send_desc(const transport::TxDesc& d) {
  stats_.tx_descs++;
  if (d.flow >= flows_.size() || !flows_[d.flow].used) {
    stats_.tx_no_flow++;
    return;
  }
  Flow& fl = flows_[d.flow];
  if (d.l4_len < 8 || d.l4_len > transport::kMaxL4Header || d.len > transport::kMaxTxLen) {
    stats_.tx_bad_desc++;
    return;
  }
  // Ethernet and IPv4 in front of the transport's L4 header; the NIC fills lengths, ids under
  // TSO and checksums.
  uint8_t* h = tx_hdr_.data();
  std::memcpy(h, peer_mac_.data(), 6);
  std::memcpy(h + 6, mac_.data(), 6);
  store16(h + 12, 0x0800);
  uint8_t* ip = h + kEthLen;
  ip[0] = 0x45;
  ip[1] = uint8_t((d.dscp & 0x3F) << 2 | (d.ecn & 3));
  store16(ip + 2, uint16_t(std::min<uint64_t>(20 + d.l4_len + uint64_t(d.len), 0xFFFF)));
  store16(ip + 4, fl.ip_id);
  store16(ip + 6, 0x4000);        // DF
  ip[8] = uint8_t(64 - d.route);  // one wire stands for the flow's routes: TTL 64 - route
  ip[9] = fl.tuple.proto;
  store16(ip + 10, 0);
  wire::store32(ip + 12, ip_);
  wire::store32(ip + 16, fl.tuple.remote.ip.v4_host());
  std::memcpy(ip + 20, d.l4.data(), d.l4_len);

  nic::TxRequest req;
  req.header = std::span<const uint8_t>(h, kEthLen + 20 + d.l4_len);
  req.mr = d.mr;
  req.offset = d.offset;
  req.len = d.len;
  req.mss = d.mss;
  if ((d.flags & transport::kTxParserTrailer) != 0 && fl.solar) {
    // Solar: the block's CRC32C into its header, then the UDP checksum over it all.
    req.flags = uint8_t(nic::kTxIpCsum | nic::kTxL4Csum | nic::kTxCrc32c);
  } else if ((d.flags & transport::kTxParserTrailer) != 0) {
    req.flags = uint8_t(nic::kTxIpCsum | nic::kTxIcrc);  // RoCEv2: UDP checksum 0
  } else {
    req.flags = d.mss > 0 && d.len > d.mss ? uint8_t(nic::kTxTso)
                                           : uint8_t(nic::kTxIpCsum | nic::kTxL4Csum);
  }
  req.cookie = stats_.tx_descs;

  if (nic::NicModel::tx_frame_room(req) > pool_->slot_bytes()) return send_oversize(req, fl);
  const uint32_t n = nic::NicModel::tx_frames(req);
  if (tx_bufs_.size() < n) {
    tx_bufs_.resize(n);
    tx_lens_.resize(n);
    tx_slots_.resize(n);
  }
  for (uint32_t i = 0; i < n; i++) {
    tx_slots_[i] = pool_->alloc();
    tx_bufs_[i] = std::span<uint8_t>(pool_->data(tx_slots_[i]), pool_->slot_bytes());
  }
  uint16_t nf = 0;
  auto bufs = std::span<const std::span<uint8_t>>(tx_bufs_.data(), n);
  auto lens = std::span<uint32_t>(tx_lens_.data(), n);
  nic::TxStatus st = nic_.tx(req, bufs, lens, &nf);
  if (st == nic::TxStatus::kCompletionsFull) {
    poll_tx();
    st = nic_.tx(req, bufs, lens, &nf);
  }
  if (st != nic::TxStatus::kOk) {
    stats_.tx_errors++;
    nf = 0;
  }
  fl.ip_id = uint16_t(fl.ip_id + nf);
  for (uint32_t i = 0; i < n; i++) {
    if (i < nf) {
      stats_.tx_frames++;
      stats_.tx_bytes += tx_lens_[i];
      out_->send(Frame{tx_slots_[i], tx_lens_[i]}, *clock_);
    } else {
      pool_->release(tx_slots_[i]);
    }
  }
}

// Frames larger than a pool slot (an MSS above the link MTU): built in a flat buffer, copied
// into slots when they fit, and otherwise handed to the link, which drops them as over MTU.
void Host::send_oversize(const nic::TxRequest& req, Flow& fl) {
  const uint32_t n = nic::NicModel::tx_frames(req);
  const size_t need = size_t(n) * nic::NicModel::tx_frame_room(req) + req.len;
  if (tx_flat_.size() < need) tx_flat_.resize(need);
  if (tx_flat_frames_.size() < n) tx_flat_frames_.resize(n);
  uint16_t nf = 0;
  nic::TxStatus st = nic_.tx(req, tx_flat_, tx_flat_frames_, &nf);
  if (st == nic::TxStatus::kCompletionsFull) {
    poll_tx();
    st = nic_.tx(req, tx_flat_, tx_flat_frames_, &nf);
  }
  if (st != nic::TxStatus::kOk) {
    stats_.tx_errors++;
    return;
  }
  fl.ip_id = uint16_t(fl.ip_id + nf);
  for (uint16_t i = 0; i < nf; i++) {
    const nic::TxFrame& tf = tx_flat_frames_[i];
    stats_.tx_frames++;
    stats_.tx_bytes += tf.len;
    Frame f{pool_->alloc(), std::min(tf.len, pool_->slot_bytes())};
    std::memcpy(pool_->data(f.slot), tx_flat_.data() + tf.offset, f.len);
    if (tf.len > pool_->slot_bytes()) f.len = tf.len;  // too big for the link: dropped as such
    out_->send(f, *clock_);
  }
}

// ---- host: receive ------------------------------------------------------------------------------

void Host::rx_frame(Frame f) {
  stats_.rx_frames++;
  const uint8_t* p = pool_->data(f.slot);
  nic::RxEntry& e = rx_entries_[rx_n_];
  transport::RxHeader& h = rx_hdrs_[rx_n_];
  h = transport::RxHeader{};
  const nic::Decision d = nic_.rx(std::span<const uint8_t>(p, f.len), e);
  auto drop = [&](uint64_t& counter) {
    counter++;
    pool_->release(f.slot);
  };

  uint8_t proto = 0;
  uint32_t l4_total = 0;  // L4 header and payload
  if (d != nic::Decision::kDeferred) {
    // The NIC split the frame: headers from its entry, the payload is in app memory (or gone).
    const uint8_t* l3 = e.header.data() + kEthLen;
    h.l3 = l3;
    h.l3_len = uint16_t((l3[0] & 0xF) * 4);
    h.l4 = l3 + h.l3_len;
    h.l4_len = uint16_t(e.header_len - kEthLen - h.l3_len);
    h.payload_len = e.payload_len;
    h.trimmed = e.trimmed;
    h.out_of_order = e.out_of_order;
    h.flow = e.flow_id;
    proto = l3[9];
    l4_total = load16(l3 + 2) - h.l3_len;
    switch (d) {
      case nic::Decision::kPlaced:
        h.placed = Placed::kPlaced;
        stats_.rx_placed++;
        break;
      case nic::Decision::kTrimmed:
        h.placed = Placed::kTrimmed;
        stats_.rx_trimmed++;
        break;
      case nic::Decision::kDropped:
        h.placed = Placed::kDropped;
        stats_.rx_dup_dropped++;
        break;
      default:
        h.placed = Placed::kNoPayload;
        stats_.rx_no_payload++;
        break;
    }
  } else {
    switch (e.reason) {
      case nic::DeferReason::kNotIpv4:
      case nic::DeferReason::kBadIpHeader:
      case nic::DeferReason::kIpFragment:
      case nic::DeferReason::kBadIpChecksum:
      case nic::DeferReason::kNotL4:
        return drop(stats_.rx_bad_ip);
      case nic::DeferReason::kTruncated:
        return drop(stats_.rx_truncated);
      case nic::DeferReason::kBadL4Header:
        return drop(stats_.rx_bad_l4_header);
      default:
        break;
    }
    // The copy path: headers and payload from the frame itself, which the NIC parsed this far.
    const Layout l = layout(p, f.len);
    if (!l.ok || (l.proto != 6 && l.proto != 17)) return drop(stats_.rx_bad_ip);
    const uint8_t* l3 = p + kEthLen;
    h.l3 = l3;
    h.l3_len = uint16_t(l.ip_hlen);
    h.l4 = l3 + l.ip_hlen;
    h.l4_len = uint16_t(l.l4_hlen);
    h.payload_len = l.ip_len - l.ip_hlen - l.l4_hlen;
    h.flow = e.flow_id;
    proto = l.proto;
    l4_total = l.ip_len - l.ip_hlen;
    if (proto == 17 && load16(h.l4 + 2) == transport::roce::kUdpPort) {
      // RoCEv2: a UDP checksum the sender filled in and got wrong is the UDP layer's to drop
      // (the dataplane's roce_bad_udp_checksum), not a bad ICRC.
      if (e.reason == nic::DeferReason::kBadL4Checksum) return drop(stats_.rx_bad_udp_csum);
      // The headers run to the payload, which ends before the pad and the ICRC.
      size_t hl = 0;
      uint32_t pl = 0;
      if (!transport::roce::split(h.l4, l4_total, &hl, &pl)) return drop(stats_.rx_bad_l4_header);
      h.l4_len = uint16_t(hl);
      h.payload_len = pl;
    }
    if (h.payload_len != 0) {
      h.placed = Placed::kDeferred;
      h.payload = h.l4 + h.l4_len;
      stats_.rx_deferred++;
    } else {
      h.placed = Placed::kNoPayload;
      stats_.rx_no_payload++;
    }
  }
  h.ecn = h.l3[1] & 3;
  h.route = uint8_t(64 - h.l3[8]);  // the route it came on (send_desc)

  // Checksum: the NIC's verdict, else the dataplane's software check. For a placed frame the
  // frame is still at hand here (a real dataplane would trust the NIC, which checked it).
  switch (e.l4_csum) {
    case nic::CsumStatus::kGood:
      h.l4_csum = Csum::kGood;
      break;
    case nic::CsumStatus::kBad:
      h.l4_csum = Csum::kBad;
      break;
    case nic::CsumStatus::kNotChecked:
      stats_.rx_sw_csum++;
      h.l4_csum = software_l4_csum(p + kEthLen, proto, p + kEthLen + h.l3_len, l4_total);
      break;
  }
  if (h.l4_csum == Csum::kBad) {
    stats_.rx_bad_csum++;
    if (drop_bad_csum_) {
      pool_->release(f.slot);
      return;
    }
  }

  if (h.flow == nic::kNoFlow) {
    const uint8_t* l3 = h.l3;
    const uint8_t* l4 = h.l4;
    Key k{load32(l3 + 12), load32(l3 + 16), load16(l4), load16(l4 + 2), proto};
    auto it = by_tuple_.find(k);
    if (it == by_tuple_.end() && proto == 17) {
      k.remote_port = 0;  // a flow of any source port (solar_flow)
      it = by_tuple_.find(k);
    }
    if (it != by_tuple_.end()) {
      h.flow = it->second;
    } else {
      h.flow = transport::kNoFlow;
      const uint16_t port = k.local_port;
      auto l = std::find_if(listeners_.begin(), listeners_.end(),
                            [&](const auto& x) { return x.first == port; });
      if (l == listeners_.end() || k.local_ip != ip_) return drop(stats_.rx_no_flow);
      h.has_listener = true;
      h.listener = l->second;
    }
  }
  if (h.placed == Placed::kDeferred && h.l4_len == 8 && h.flow < flows_.size() &&
      flows_[h.flow].solar && h.payload_len >= 32) {
    // Solar on the copy path: its 32-byte header is the transport's, the block after it the
    // payload (the NIC says the same of the frames it places).
    h.l4_len = 8 + 32;
    h.payload_len -= 32;
    h.payload += 32;
    if (h.payload_len == 0) {
      h.placed = Placed::kNoPayload;
      h.payload = nullptr;
    }
  }
  rx_frames_[rx_n_] = f;
  if (++rx_n_ == kRxBurst) rx_flush();
}

void Host::rx_flush() {
  if (rx_n_ == 0) return;
  sync_now();
  stats_.rx_bursts++;
  stats_.rx_to_transport += rx_n_;
  transport_->rx_burst(std::span<const transport::RxHeader>(rx_hdrs_.data(), rx_n_), *this);
  flush();
  for (size_t i = 0; i < rx_n_; i++)
    pool_->release(rx_frames_[i].slot);
  rx_n_ = 0;
}

bool Host::app_flush() {
  if (pending_.empty()) return false;
  // Requests the event handler submits meanwhile wait for the next burst.
  app_work_.swap(pending_);
  sync_now();
  for (size_t i = 0; i < app_work_.size(); i += kAppBurst) {
    size_t n = std::min(kAppBurst, app_work_.size() - i);
    stats_.app_requests += n;
    transport_->app_burst(std::span<const AppRequest>(app_work_.data() + i, n), *this);
    flush();
  }
  app_work_.clear();
  return true;
}

void Host::tick() {
  sync_now();
  transport_->tick(*this);
  flush();
}

void Host::drain_events(std::span<const Event> events) {
  for (const Event& e : events) {
    if (size_t(e.kind) < stats_.events.size()) stats_.events[size_t(e.kind)]++;
    if (on_event_) on_event_(e);
  }
}

// ---- the network --------------------------------------------------------------------------------

SimNet::SimNet(uint64_t seed, const LinkConfig& link, Faults a_to_b, Faults b_to_a, HostConfig a,
               HostConfig b)
    : seed_(seed), link_(link) {
  pool_ = std::make_unique<FramePool>(kEthLen + std::min(link_.mtu, nic::kMaxMtu));
  uint64_t s = seed;
  links_[0] = std::make_unique<Link>(link_, splitmix64(s), *pool_);
  links_[1] = std::make_unique<Link>(link_, splitmix64(s), *pool_);
  links_[0]->faults = std::move(a_to_b);
  links_[1]->faults = std::move(b_to_a);
  if (a.ip == 0) a.ip = 0x0A000001;
  if (b.ip == 0) b.ip = 0x0A000002;
  if (a.mac == std::array<uint8_t, 6>{}) a.mac = {2, 0, 0, 0, 0, 1};
  if (b.mac == std::array<uint8_t, 6>{}) b.mac = {2, 0, 0, 0, 0, 2};
  a_ = std::unique_ptr<Host>(new Host(std::move(a), "a", &now_, pool_.get()));
  b_ = std::unique_ptr<Host>(new Host(std::move(b), "b", &now_, pool_.get()));
  a_->out_ = links_[0].get();
  b_->out_ = links_[1].get();
  a_->peer_mac_ = b_->mac_;
  b_->peer_mac_ = a_->mac_;
}

SimNet::~SimNet() {
  // Hosts first (their transports may still flush), then the links, then the pool.
  a_.reset();
  b_.reset();
  links_[0].reset();
  links_[1].reset();
}

Faults& SimNet::faults(Dir d) {
  return links_[size_t(d)]->faults;
}
const LinkStats& SimNet::stats(Dir d) const {
  return links_[size_t(d)]->stats;
}
void SimNet::reset_stats() {
  for (auto& l : links_)
    l->stats = LinkStats{};
}
size_t SimNet::in_flight(Dir d) const {
  return links_[size_t(d)]->in_flight();
}

void SimNet::inject(Dir d, std::span<const uint8_t> frame) {
  const uint32_t slot = pool_->alloc();
  const auto len = uint32_t(std::min<size_t>(frame.size(), pool_->slot_bytes()));
  if (len != 0) std::memcpy(pool_->data(slot), frame.data(), len);
  links_[size_t(d)]->send(detail::Frame{slot, len}, now_);
}

bool SimNet::step() {
  for (auto& l : links_)
    l->release_due(now_);
  for (size_t d = 0; d < 2; d++) {
    Host& dst = d == 0 ? *b_ : *a_;
    detail::Frame f;
    while (links_[d]->pop_due(now_, f)) {
      if (tap_) tap_(Dir(d), std::span<const uint8_t>(pool_->data(f.slot), f.len));
      dst.rx_frame(f);
    }
    dst.rx_flush();
  }
  a_->app_flush();
  b_->app_flush();
  a_->tick();
  b_->tick();
  return a_->app_pending() || b_->app_pending();
}

bool SimNet::run_until(const std::function<bool()>& done, uint64_t max_ns) {
  const uint64_t end = max_ns > kNever - now_ ? kNever : now_ + max_ns;
  if (done()) return true;
  uint32_t same_time = 0;
  while (now_ < end) {
    const bool app_pending = step();
    if (done()) return true;
    // Requests an event handler queued are served at the same instant (a bounded number of
    // times, so a handler that always submits cannot stop the clock).
    if (app_pending && ++same_time < 64) continue;
    same_time = 0;
    uint64_t next = std::min(links_[0]->next_event(), links_[1]->next_event());
    next = std::min({next, now_ + tick_ns_, end});
    now_ = std::max(next, now_ + 1);
  }
  return false;
}

void SimNet::run_for(uint64_t ns) {
  run_until([] { return false; }, ns);
}

namespace {

void put_faults(std::ostringstream& o, const Faults& f) {
  o << "loss " << f.loss;
  if (f.loss_burst > 0) o << " burst " << f.loss_burst << "x" << f.loss_burst_len;
  if (f.reorder > 0) o << " reorder " << f.reorder << "/" << f.reorder_depth;
  if (f.reverse > 0) o << " reverse " << f.reverse << "/" << f.reverse_window;
  if (f.duplicate > 0) o << " dup " << f.duplicate;
  if (f.corrupt_header > 0) o << " corrupt_hdr " << f.corrupt_header;
  if (f.corrupt_payload > 0) o << " corrupt_payload " << f.corrupt_payload;
  if (f.corrupt_checksum > 0) o << " corrupt_csum " << f.corrupt_checksum;
  if (f.truncate > 0) o << " truncate " << f.truncate;
  if (f.ce > 0) o << " ce " << f.ce;
  if (f.down) o << " DOWN";
  if (f.drop_if) o << " drop_if";
  if (f.delay_if) o << " delay_if";
  if (f.path_delay_if) o << " path_delay_if";
}

void put_stats(std::ostringstream& o, const LinkStats& s) {
  o << "sent " << s.sent << " delivered " << s.delivered << " lost " << s.lost << " (burst "
    << s.burst_lost << ") down " << s.dropped_down << " filter " << s.dropped_filter << " mtu "
    << s.dropped_mtu << " queue " << s.dropped_queue << " dup " << s.duplicated << " reordered "
    << s.reordered << " reversals " << s.reversals << " corrupted " << s.corrupted_header << "/"
    << s.corrupted_payload << "/" << s.corrupted_checksum << " truncated " << s.truncated << " ce "
    << s.ce_marked << " max_queue " << s.max_queue_bytes << "B";
}

void put_host(std::ostringstream& o, const Host& h) {
  const HostStats& s = h.stats();
  o << "host " << h.name() << ": rx " << s.rx_frames << " to_transport " << s.rx_to_transport
    << " placed " << s.rx_placed << " deferred " << s.rx_deferred << " bad_ip " << s.rx_bad_ip
    << " truncated " << s.rx_truncated << " bad_csum " << s.rx_bad_csum << " bad_udp_csum "
    << s.rx_bad_udp_csum << " no_flow " << s.rx_no_flow << "; tx descs " << s.tx_descs << " frames "
    << s.tx_frames << " errors " << s.tx_errors << " no_flow " << s.tx_no_flow << "; cmd_errors "
    << s.cmd_errors << "; flows " << h.flows_open();
}

}  // namespace

std::string SimNet::describe() const {
  std::ostringstream o;
  o << "sim seed " << seed_ << " (replay: CLEAVE_SIM_SEED=" << seed_ << ") at " << now_
    << " ns; link delay " << link_.delay_ns << " ns rate " << link_.rate_bps << " bit/s mtu "
    << link_.mtu << " queue " << link_.queue_bytes << " B\n";
  for (size_t d = 0; d < 2; d++) {
    o << (d == 0 ? "  a->b faults: " : "  b->a faults: ");
    put_faults(o, links_[d]->faults);
    o << "\n         stats: ";
    put_stats(o, links_[d]->stats);
    o << " in_flight " << links_[d]->in_flight() << "\n";
  }
  o << "  ";
  put_host(o, *a_);
  o << "\n  ";
  put_host(o, *b_);
  return o.str();
}

uint64_t SimNet::seed_from_env(uint64_t fallback) {
  const char* s = std::getenv("CLEAVE_SIM_SEED");  // NOLINT(concurrency-mt-unsafe)
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  uint64_t v = std::strtoull(s, &end, 0);
  return end != nullptr && *end == '\0' ? v : fallback;
}

}  // namespace cleave::sim
