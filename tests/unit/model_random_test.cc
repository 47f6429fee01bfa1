// model_random_test.cc - seeded loss, reordering and duplication against the NIC model, and
// hostile frames (truncated, inconsistent, random) that must be deferred without harm.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "model_frames.h"
#include "nic_model.h"

namespace cleave::nic {
namespace {

using test::Bytes;

constexpr uint8_t kUntouched = 0xEE;

// Seeds per randomized test: 12, or CLEAVE_MODEL_SEEDS (the slow suite runs many more).
uint64_t seeds() {
  const char* v = std::getenv("CLEAVE_MODEL_SEEDS");
  return v != nullptr && std::atoi(v) > 0 ? uint64_t(std::atoi(v)) : 12;
}

// A TCP receiver as a transport would drive the NIC: it learns from RX entries which bytes
// landed, advances the cursor over the in-order prefix, retires MSs the cursor passed (checking
// their bytes against the stream first) and posts new ones to keep a window open.
class StreamSim {
 public:
  StreamSim(uint64_t seed, uint32_t isn, size_t stream_len)
      : rng_(seed), isn_(isn), stream_(test::pattern(stream_len, uint32_t(seed))) {
    NicConfig c;
    c.max_flows = 4;
    c.ms_committed_per_flow = 16;
    c.ms_store_entries = 256;
    c.ms_chunk = 8;
    nic_ = std::make_unique<NicModel>(c);
    mem_.assign(1 << 20, kUntouched);
    EXPECT_EQ(nic_->mr_add(0, mem_.data(), mem_.size(), 1), Err::kOk);
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
    s.initial_seq = isn;
    EXPECT_EQ(nic_->flow_add(0, s), Err::kOk);
    top_up();
  }

  // Runs until every byte has passed the cursor; returns the number of rounds.
  int run() {
    int rounds = 0;
    while (cursor_ < stream_.size() && rounds < 5000 && !::testing::Test::HasFailure()) {
      round();
      rounds++;
    }
    EXPECT_EQ(cursor_, stream_.size()) << "no progress after " << rounds << " rounds";
    // The last MSs may reach past the end of the stream: check what they hold.
    uint64_t pos = ms_.empty() ? 0 : ms_.front().start;
    for (const auto& m : ms_) {
      for (uint32_t i = 0; i < m.len && pos + i < stream_.size(); i++) {
        EXPECT_EQ(mem_[m.off + i], stream_[pos + i]) << "stream byte " << pos + i;
        verified_++;
      }
      pos += m.len;
    }
    EXPECT_EQ(verified_, stream_.size());
    uint64_t decided = 0;
    for (Ctr c : {Ctr::kRxInOrder, Ctr::kRxPastHole, Ctr::kRxTrimmed, Ctr::kRxDropped,
                  Ctr::kRxNoPayload, Ctr::kRxDeferred}) {
      decided += nic_->counter(c);
    }
    EXPECT_EQ(decided, nic_->counter(Ctr::kRxFrames));
    return rounds;
  }

  const NicModel& nic() const { return *nic_; }

 private:
  struct PostedMs {
    uint64_t start;  // stream position
    uint64_t off;    // in mem_
    uint32_t len;
  };
  struct Segment {
    uint64_t start;
    uint32_t len;
  };

  uint64_t rand(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  void top_up() {
    while (posted_end_ < cursor_ + 64 * 1024 && posted_end_ < stream_.size() + 4096) {
      uint32_t len = rand(8) == 0 ? uint32_t(1 + rand(16)) : uint32_t(1 + rand(6000));
      uint64_t off = mem_next_ + rand(64);
      if (off + len > mem_.size()) off = 0;
      mem_next_ = off + len;
      if (nic_->ms_post(0, {0, off, len, 0}) != Err::kOk) return;  // store full: later
      ms_.push_back({posted_end_, off, len});
      posted_end_ += len;
    }
  }

  void deliver(const Segment& s) {
    Bytes payload(stream_.begin() + long(s.start), stream_.begin() + long(s.start + s.len));
    RxEntry e;
    nic_->rx(test::tcp_frame(isn_ + uint32_t(s.start), payload), e);
    EXPECT_LE(e.placed, e.payload_len);
    if (e.decision == Decision::kPlaced || e.decision == Decision::kTrimmed) {
      ASSERT_EQ(e.placed + e.trimmed, s.len);
      uint64_t from = uint32_t(e.seq - isn_) + uint64_t(e.trimmed);
      add_range(from, s.start + s.len);
    } else if (e.decision == Decision::kDropped) {
      ASSERT_LE(s.start + s.len, cursor_) << "dropped data the cursor has not passed";
    } else if (e.decision == Decision::kDeferred) {
      // The copy path would deliver it; this transport treats it as lost instead.
      ASSERT_EQ(e.reason == DeferReason::kNoMs || e.reason == DeferReason::kTooManyFrags, true)
          << defer_reason_name(e.reason);
    }
    advance();
  }

  void add_range(uint64_t from, uint64_t to) {
    auto& end = got_[from];
    end = std::max(end, to);
  }

  void advance() {
    uint64_t c = cursor_;
    for (auto it = got_.begin(); it != got_.end() && it->first <= c;) {
      c = std::max(c, it->second);
      it = got_.erase(it);
    }
    if (c == cursor_) return;
    cursor_ = c;
    ASSERT_EQ(nic_->cursor_update(0, isn_ + uint32_t(cursor_)), Err::kOk);
    while (!ms_.empty() && ms_.front().start + ms_.front().len <= cursor_) {
      const PostedMs& m = ms_.front();
      for (uint32_t i = 0; i < m.len; i++) {
        ASSERT_EQ(mem_[m.off + i], stream_[m.start + i]) << "stream byte " << m.start + i;
      }
      verified_ += m.len;
      std::fill(mem_.begin() + long(m.off), mem_.begin() + long(m.off + m.len), kUntouched);
      ASSERT_EQ(nic_->ms_retire(0, 1), Err::kOk);
      ms_.pop_front();
    }
    top_up();
  }

  // One flight: repacketized from a little before the cursor, then lost, duplicated, reordered;
  // some packets are held back and arrive rounds later.
  void round() {
    std::vector<Segment> flight;
    uint64_t pos = cursor_ > 0 ? cursor_ - std::min<uint64_t>(cursor_, rand(600)) : 0;
    uint64_t limit = std::min<uint64_t>(stream_.size(), cursor_ + 48 * 1024 + rand(32 * 1024));
    while (pos < limit) {
      uint32_t len =
          uint32_t(std::min<uint64_t>(rand(10) == 0 ? rand(3) : 1 + rand(1460), limit - pos));
      Segment s{pos, len};
      pos += len;
      if (rand(100) < 15) continue;  // lost
      flight.push_back(s);
      if (rand(100) < 8) {
        for (uint64_t d = rand(3); d-- > 0;)
          flight.push_back(s);
      }
    }
    for (size_t i = 0; i + 1 < flight.size(); i++) {
      if (rand(100) < 20) std::swap(flight[i], flight[std::min(flight.size() - 1, i + rand(8))]);
    }
    for (const Segment& s : flight) {
      if (rand(100) < 3) {
        late_.push_back(s);
        continue;
      }
      deliver(s);
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (late_.size() > 20 || (!late_.empty() && rand(2) == 0)) {
      deliver(late_.front());
      late_.pop_front();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  std::mt19937_64 rng_;
  uint32_t isn_;
  Bytes stream_;
  std::unique_ptr<NicModel> nic_;
  std::vector<uint8_t> mem_;
  std::deque<PostedMs> ms_;
  std::deque<Segment> late_;
  std::map<uint64_t, uint64_t> got_;
  uint64_t posted_end_ = 0;
  uint64_t mem_next_ = 0;
  uint64_t cursor_ = 0;
  uint64_t verified_ = 0;
};

// Sums a counter over the seeds: every decision must occur somewhere, or the run proves little.
struct Coverage {
  std::map<std::string, uint64_t> seen;
  void add(const NicModel& nic) {
    nic.for_each_counter([&](std::string_view n, uint64_t v) { seen[std::string(n)] += v; });
  }
  uint64_t operator[](const char* n) const { return seen.count(n) ? seen.at(n) : 0; }
};

TEST(ModelRandom, PlacedBytesEqualTheStreamWhereverTheCursorPassed) {
  Coverage cov;
  for (uint64_t seed = 1; seed <= seeds(); seed++) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    // Every other seed starts just before the sequence space wraps.
    uint32_t isn = seed % 2 ? uint32_t(0xFFFFFFFF - seed * 7919) : uint32_t(seed * 1000003);
    StreamSim sim(seed, isn, 300 * 1000);
    sim.run();
    cov.add(sim.nic());
    if (HasFailure()) break;
  }
  EXPECT_GT(cov["rx_in_order"], 0u);
  EXPECT_GT(cov["rx_past_hole"], 0u);
  EXPECT_GT(cov["rx_trimmed"], 0u);
  EXPECT_GT(cov["rx_dropped"], 0u);
  EXPECT_GT(cov["rx_no_payload"], 0u);
  EXPECT_GT(cov["defer_no_ms"], 0u);
  EXPECT_GT(cov["defer_too_many_frags"], 0u);
}

// A RoCEv2 RC responder over the NIC: SEND and WRITE messages across the PSN wrap, lost,
// duplicated, reordered and retransmitted go-back-N style from the expected PSN. Each message
// is checked once the cursor passes it: SENDs fill their own posted receive and nothing beyond
// the message (short messages retire their receive unfilled); WRITEs fill their RETH range.
// Go-back-N (RC's recovery): the NIC places nothing past the expected PSN. `selective`: the flow
// recovers by selective repeat, and the responder also keeps packets the NIC placed past a hole;
// the NIC may then lose track of message starts and the responder resynchronises it.
class RoceSim {
 public:
  static constexpr uint32_t kPmtu = 256;
  static constexpr uint32_t kMask = 0xFFFFFF;

  RoceSim(uint64_t seed, int messages, bool selective) : rng_(seed), selective_(selective) {
    NicConfig c;
    c.max_flows = 2;
    c.ms_committed_per_flow = 16;
    c.ms_store_entries = 64;
    nic_ = std::make_unique<NicModel>(c);
    mem_.assign(1 << 21, kUntouched);
    EXPECT_EQ(nic_->mr_add(0, mem_.data(), mem_.size(), 1, kMrRemoteWrite), Err::kOk);
    first_psn_ = uint32_t(kMask - rand(200));  // messages cross the wrap
    uint64_t at = 0;
    uint32_t psn = first_psn_, sends = 0;
    for (int m = 0; m < messages; m++) {
      Msg g;
      g.send = rand(10) < 6;
      g.data = test::pattern(rand(20) == 0 ? 0 : 1 + rand(2000), uint32_t(seed * 7 + m));
      g.room = uint32_t(g.data.size() + (g.send ? rand(300) : 0));
      g.room = std::max<uint32_t>(g.room, 1);
      g.off = at + rand(64);
      at = g.off + g.room + 1;
      g.send_idx = g.send ? sends++ : 0;
      g.first_pkt = uint32_t(pkts_.size());
      uint32_t n = std::max<uint32_t>(1, uint32_t((g.data.size() + kPmtu - 1) / kPmtu));
      for (uint32_t i = 0; i < n; i++) {
        Pkt p{uint32_t(m), i, n, psn};
        psn = (psn + 1) & kMask;
        pkts_.push_back(p);
      }
      msgs_.push_back(g);
    }
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
    s.parser = Parser::kRoce;
    s.qpn = 17;  // roce_frame's DestQP
    s.owner = 1;
    s.pmtu = kPmtu;
    s.initial_seq = first_psn_;
    s.selective_repeat = selective;
    EXPECT_EQ(nic_->flow_add(0, s), Err::kOk);
    received_.assign(pkts_.size(), false);
    post_receives();
  }

  void run() {
    int rounds = 0;
    while (epsn_idx_ < pkts_.size() && rounds++ < 3000 && !::testing::Test::HasFailure()) {
      round();
    }
    EXPECT_EQ(epsn_idx_, pkts_.size()) << "stuck after " << rounds << " rounds";
    EXPECT_EQ(checked_, msgs_.size());
  }
  const NicModel& nic() const { return *nic_; }
  int resyncs() const { return resyncs_; }
  double copied_fraction() const { return double(copied_) / double(pkts_.size()); }

 private:
  struct Msg {
    bool send;
    Bytes data;
    uint32_t room;  // receive buffer (SEND) or RETH length (WRITE)
    uint64_t off;
    uint32_t send_idx;
    uint32_t first_pkt;
  };
  struct Pkt {
    uint32_t msg, index, count, psn;
  };

  uint64_t rand(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  void post_receives() {
    // Keep the next six SENDs' receives posted, as an app would.
    while (posted_ < msgs_.size() && posted_sends_ < retired_sends_ + 6) {
      const Msg& g = msgs_[posted_++];
      if (!g.send) continue;
      ASSERT_EQ(nic_->ms_post(0, {0, g.off, g.room, g.send_idx}), Err::kOk);
      posted_sends_++;
    }
  }

  Bytes frame(const Pkt& p) {
    const Msg& g = msgs_[p.msg];
    size_t from = size_t(p.index) * kPmtu;
    Bytes chunk(g.data.begin() + long(std::min(from, g.data.size())),
                g.data.begin() + long(std::min(from + kPmtu, g.data.size())));
    bool first = p.index == 0, last = p.index + 1 == p.count;
    uint8_t op = g.send ? (first && last ? 0x04
                           : first       ? 0x00
                           : last        ? 0x02
                                         : 0x01)
                        : (first && last ? 0x0A
                           : first       ? 0x06
                           : last        ? 0x08
                                         : 0x07);
    Bytes ext = first && !g.send ? test::reth(g.off, 0, uint32_t(g.data.size())) : Bytes{};
    return test::roce_frame(op, p.psn, ext, chunk, uint16_t(49152 + rand(64)));
  }

  void deliver(uint32_t idx) {
    const Pkt& p = pkts_[idx];
    RxEntry e;
    Bytes f = frame(p);
    nic_->rx(f, e);
    switch (e.decision) {
      case Decision::kPlaced:
      case Decision::kNoPayload:
        ASSERT_TRUE(selective_ || idx == epsn_idx_) << "go-back-N placed past the expected PSN";
        received_[idx] = true;
        break;
      case Decision::kDropped:
        ASSERT_LT(idx, epsn_idx_) << "dropped a PSN at or after the cursor";
        break;
      case Decision::kDeferred:
        ASSERT_TRUE(e.reason == DeferReason::kNoMessage ||
                    (!selective_ && e.reason == DeferReason::kOutOfSequence && idx != epsn_idx_))
            << defer_reason_name(e.reason);
        if (idx == epsn_idx_) copy_path(p, f);
        break;
      case Decision::kTrimmed:
        FAIL() << "RoCE packets are never trimmed";
    }
    advance();
  }

  // The responder takes a deferred packet at the expected PSN through the copy path, as the
  // dataplane would: it writes the payload itself. After the last packet of a message it tells
  // the NIC where the next one begins (the NIC never saw this end).
  void copy_path(const Pkt& p, const Bytes& f) {
    const Msg& g = msgs_[p.msg];
    size_t hdr = 14 + 20 + 8 + 12 + (p.index == 0 && !g.send ? 16 : 0);
    size_t pad = (f[42 + 1] >> 4) & 3;
    std::copy(f.begin() + long(hdr), f.end() - 4 - long(pad),
              mem_.begin() + long(g.off + size_t(p.index) * kPmtu));
    received_[epsn_idx_] = true;
    copied_++;
    if (p.index + 1 == p.count) {
      uint32_t next_send = g.send ? g.send_idx + 1 : 0;
      if (!g.send) {
        for (size_t m = p.msg; m-- > 0;) {
          if (msgs_[m].send) {
            next_send = msgs_[m].send_idx + 1;
            break;
          }
        }
      }
      ASSERT_EQ(nic_->roce_resync(0, (p.psn + 1) & kMask, next_send), Err::kOk);
      resyncs_++;
    }
  }

  void advance() {
    uint32_t before = epsn_idx_;
    while (epsn_idx_ < pkts_.size() && received_[epsn_idx_])
      epsn_idx_++;
    if (epsn_idx_ == before) return;
    uint32_t epsn = (first_psn_ + epsn_idx_) & kMask;
    ASSERT_EQ(nic_->cursor_update(0, epsn), Err::kOk);
    // Messages wholly before the cursor are complete: check and retire them.
    while (checked_ < msgs_.size()) {
      const Msg& g = msgs_[checked_];
      uint32_t n = std::max<uint32_t>(1, uint32_t((g.data.size() + kPmtu - 1) / kPmtu));
      if (g.first_pkt + n > epsn_idx_) break;
      for (size_t i = 0; i < g.data.size(); i++) {
        ASSERT_EQ(mem_[g.off + i], g.data[i]) << "message " << checked_ << " byte " << i;
      }
      for (size_t i = g.data.size(); i < g.room + 1; i++) {
        ASSERT_EQ(mem_[g.off + i], kUntouched) << "message " << checked_ << " wrote past its end";
      }
      if (g.send) {
        ASSERT_EQ(nic_->ms_retire_msg(0, g.send_idx), Err::kOk);
        retired_sends_++;
      }
      checked_++;
    }
    post_receives();
  }

  void round() {
    std::vector<uint32_t> flight;
    uint32_t end = std::min<uint32_t>(uint32_t(pkts_.size()), epsn_idx_ + 40 + uint32_t(rand(40)));
    for (uint32_t i = epsn_idx_; i < end; i++) {
      if (rand(100) < 10) continue;
      flight.push_back(i);
      if (rand(100) < 5) flight.push_back(i);
    }
    for (size_t i = 0; i + 1 < flight.size(); i++) {
      if (rand(100) < 15) std::swap(flight[i], flight[std::min(flight.size() - 1, i + rand(6))]);
    }
    for (uint32_t i : flight) {
      if (rand(100) < 3) {
        late_.push_back(i);
        continue;
      }
      deliver(i);
      if (::testing::Test::HasFatalFailure()) return;
    }
    while (late_.size() > 10 || (!late_.empty() && rand(2) == 0)) {
      deliver(late_.front());
      late_.pop_front();
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

  std::mt19937_64 rng_;
  bool selective_;
  std::unique_ptr<NicModel> nic_;
  std::vector<uint8_t> mem_;
  std::vector<Msg> msgs_;
  std::vector<Pkt> pkts_;
  std::vector<bool> received_;
  std::deque<uint32_t> late_;
  uint32_t first_psn_ = 0;
  uint32_t epsn_idx_ = 0;
  size_t posted_ = 0;
  size_t posted_sends_ = 0;
  size_t retired_sends_ = 0;
  size_t checked_ = 0;
  int resyncs_ = 0;
  size_t copied_ = 0;
};

TEST(ModelRandom, RoceMessagesLandInTheirOwnBuffersAcrossLossAndPsnWrap) {
  Coverage cov;
  for (uint64_t seed = 1; seed <= seeds(); seed++) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RoceSim sim(seed, 300, false);
    sim.run();
    // Go-back-N walks the NIC along every message start: nothing needs the copy path.
    EXPECT_EQ(sim.copied_fraction(), 0.0);
    cov.add(sim.nic());
    if (HasFailure()) break;
  }
  EXPECT_EQ(cov["rx_past_hole"], 0u);
  EXPECT_GT(cov["defer_out_of_sequence"], 0u);
  EXPECT_GT(cov["rx_dropped"], 0u);
  EXPECT_GT(cov["rx_no_payload"], 0u);
  EXPECT_GT(cov["rx_message"], 0u);
}

TEST(ModelRandom, RoceSelectiveResponderNeverMisplacesAMessage) {
  Coverage cov;
  for (uint64_t seed = 100; seed < 100 + seeds(); seed++) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    RoceSim sim(seed, 300, true);
    sim.run();
    // 12-20 % here with 10 % loss: WRITEs first seen past a hole never come again whole.
    EXPECT_LT(sim.copied_fraction(), 0.3);
    cov.add(sim.nic());
    if (HasFailure()) break;
  }
  EXPECT_GT(cov["rx_past_hole"], 0u);
}

// Solar with message semantics: I/Os of random size cut into blocks, sent over several paths
// with loss, duplication and reordering; each I/O's MS is retired as soon as all its blocks
// arrived, so MSs retire out of order (tombstones across chunk boundaries).
TEST(ModelRandom, SolarBlocksLandInTheirIoWhateverTheOrder) {
  for (uint64_t seed = 1; seed <= seeds(); seed++) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    std::mt19937_64 rng(seed);
    auto rand = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
    NicConfig c;
    c.max_flows = 2;
    c.ms_committed_per_flow = 8;
    c.ms_store_entries = 64;
    c.ms_chunk = 4;
    NicModel nic(c);
    std::vector<uint8_t> mem(1 << 23, kUntouched);  // 200 I/Os of up to 20 KB
    ASSERT_EQ(nic.mr_add(0, mem.data(), mem.size(), 1), Err::kOk);
    FlowSpec s;
    s.key = {test::kPeer, test::kLocal, 0, 7000, 17};
    s.parser = Parser::kSolar;
    s.qpn = test::kSolarConn;
    s.messages = true;
    ASSERT_EQ(nic.flow_add(0, s), Err::kOk);

    struct Io {
      uint32_t id;
      uint64_t off;
      uint32_t room;
      Bytes data;
      std::vector<bool> got;
    };
    constexpr uint32_t kBlock = 4096;
    std::vector<Io> ios;
    uint64_t at = 0;
    for (uint32_t i = 0; i < 200; i++) {
      Io io;
      io.id = 1000 + i * 3;  // sparse I/O ids
      io.data = test::pattern(1 + rand(5 * kBlock), uint32_t(seed + i));
      io.room = uint32_t(io.data.size() + rand(100));
      io.off = at + rand(64);
      at = io.off + io.room + 1;
      io.got.assign((io.data.size() + kBlock - 1) / kBlock, false);
      ios.push_back(std::move(io));
    }
    size_t next_post = 0, done = 0, live = 0;
    std::vector<bool> finished(ios.size(), false);
    uint32_t tx_seq = 0;
    for (int round = 0; done < ios.size() && round < 2000 && !HasFailure(); round++) {
      // Up to 30 I/Os in flight: more than the committed entries, so the store is used. MSs
      // retired out of order hold their place until the older ones go, so the list can fill:
      // the driver then posts later, as it must.
      while (next_post < ios.size() && live < 30) {
        const Io& io = ios[next_post];
        Err r = nic.ms_post(0, {0, io.off, io.room, io.id});
        if (r == Err::kMsFull) break;
        ASSERT_EQ(r, Err::kOk);
        next_post++;
        live++;
      }
      std::vector<std::pair<size_t, uint32_t>> flight;
      for (size_t i = 0; i < next_post; i++) {
        for (uint32_t b = 0; b < ios[i].got.size(); b++) {
          if (ios[i].got[b] || rand(100) < 20) continue;
          flight.emplace_back(i, b);
          if (rand(100) < 5) flight.emplace_back(i, b);
        }
      }
      for (size_t i = 0; i < flight.size(); i++)
        std::swap(flight[i], flight[rand(flight.size())]);
      for (auto [i, b] : flight) {
        Io& io = ios[i];
        size_t from = size_t(b) * kBlock;
        Bytes blk(io.data.begin() + long(from),
                  io.data.begin() + long(std::min(from + kBlock, io.data.size())));
        RxEntry e;
        nic.rx(test::solar_frame(1, io.id, from, tx_seq++, blk, uint16_t(rand(4))), e);
        if (finished[i]) {
          ASSERT_EQ(e.reason, DeferReason::kNoMessage);  // its MS is gone
          continue;
        }
        ASSERT_EQ(e.decision, Decision::kPlaced) << defer_reason_name(e.reason);
        ASSERT_EQ(e.msg_seq, io.id);
        io.got[b] = true;
        if (std::find(io.got.begin(), io.got.end(), false) != io.got.end()) continue;
        for (size_t k = 0; k < io.data.size(); k++)
          ASSERT_EQ(mem[io.off + k], io.data[k]);
        for (size_t k = io.data.size(); k <= io.room; k++)
          ASSERT_EQ(mem[io.off + k], kUntouched);
        ASSERT_EQ(nic.ms_retire_msg(0, io.id), Err::kOk);
        finished[i] = true;
        live--;
        done++;
      }
    }
    EXPECT_EQ(done, ios.size());
    EXPECT_EQ(nic.ms_count(0), 0u);
    EXPECT_EQ(nic.store_chunks_free(), 16u);  // every chunk came back
    if (HasFailure()) break;
  }
}

// ---- hostile frames ---------------------------------------------------------------------------

class ModelHostile : public ::testing::Test {
 protected:
  void SetUp() override {
    mem.assign(1 << 16, kUntouched);
    NicConfig c;
    c.max_flows = 8;
    c.ms_committed_per_flow = 8;
    c.ms_store_entries = 64;
    c.ms_chunk = 4;
    for (int i = 0; i < 2; i++) {
      c.verify_l4_checksum = i == 0;
      nics[i] = std::make_unique<NicModel>(c);
      NicModel& n = *nics[i];
      ASSERT_EQ(n.mr_add(0, mem.data(), mem.size(), 1, kMrRemoteWrite), Err::kOk);
      FlowSpec s;
      s.key = {test::kPeer, test::kLocal, 40000, 5001, 6};
      ASSERT_EQ(n.flow_add(0, s), Err::kOk);
      s.key = {test::kPeer, test::kLocal, 0, 4791, 17};
      s.parser = Parser::kRoce;
      s.qpn = 17;
      s.owner = 1;
      ASSERT_EQ(n.flow_add(1, s), Err::kOk);
      s.key = {test::kPeer, test::kLocal, 0, 7000, 17};
      s.parser = Parser::kSolar;
      s.qpn = test::kSolarConn;
      s.messages = true;
      ASSERT_EQ(n.flow_add(2, s), Err::kOk);
      s.key = {test::kPeer, test::kLocal, 0, 9000, 17};
      s.parser = Parser::kUdp;
      s.messages = false;
      s.reliable = false;
      ASSERT_EQ(n.flow_add(3, s), Err::kOk);
      s = FlowSpec{};
      s.key = {test::kPeer, test::kLocal, 40001, 5001, 6};
      s.messages = true;
      ASSERT_EQ(n.flow_add(4, s), Err::kOk);
      for (uint32_t f = 0; f < 5; f++) {
        for (uint32_t k = 0; k < 6; k++) {
          ASSERT_EQ(n.ms_post(f, {0, (f * 6 + k) * 2048u, 2048, k}), Err::kOk);  // 60 KB
        }
      }
    }
  }
  // Every entry is self-consistent and points inside the MR.
  void check(const RxEntry& e, size_t frame_len) {
    EXPECT_LE(e.header_len, std::min(frame_len, kMaxHeaderBytes));
    EXPECT_LE(e.nfrags, kMaxFrags);
    uint64_t sum = 0;
    for (uint8_t i = 0; i < e.nfrags; i++) {
      EXPECT_LE(e.frags[i].offset + e.frags[i].len, mem.size());
      sum += e.frags[i].len;
    }
    if (e.decision == Decision::kPlaced || e.decision == Decision::kTrimmed) {
      EXPECT_EQ(sum, e.placed);
      EXPECT_LE(e.placed, frame_len);
    } else {
      EXPECT_EQ(e.placed, 0u);
    }
    if (e.decision == Decision::kDeferred) {
      EXPECT_NE(e.reason, DeferReason::kNone);
    } else {
      EXPECT_EQ(e.reason, DeferReason::kNone);
    }
  }
  RxEntry rx(int which, const Bytes& f) {
    Bytes exact(f);  // exactly sized, so any over-read is a heap overflow under ASan
    RxEntry e;
    nics[which]->rx(exact, e);
    check(e, exact.size());
    return e;
  }
  std::vector<Bytes> valid_frames() {
    return {
        test::tcp_frame(0, test::pattern(300)),
        test::roce_frame(0x0A, 0, test::reth(0x100, 0, 300), test::pattern(300)),
        test::roce_frame(0x04, 1, {}, test::pattern(301)),  // after the WRITE's PSN
        test::solar_frame(1, 2, 100, 1, test::pattern(300)),
        test::udp_frame(5, 9000, test::pattern(300)),
        test::tcp_frame_opts(0, test::pattern(300), test::msg_option(2, 0, 300), 0x18, 40001),
    };
  }

  std::vector<uint8_t> mem;
  std::unique_ptr<NicModel> nics[2];
};

TEST_F(ModelHostile, EveryTruncationIsDeferred) {
  for (const Bytes& f : valid_frames()) {
    for (size_t len = 0; len < f.size(); len++) {
      RxEntry e = rx(0, Bytes(f.begin(), f.begin() + long(len)));
      ASSERT_EQ(e.decision, Decision::kDeferred) << "length " << len;
      ASSERT_EQ(e.reason, DeferReason::kTruncated);
    }
    EXPECT_NE(rx(0, f).decision, Decision::kDeferred);
    // The transport accepts the WRITE (PSN 0) before the SEND after it can open.
    if (f.size() > 42 && f[23] == 17 && f[42] == 0x0A) {
      ASSERT_EQ(nics[0]->cursor_update(1, 1), Err::kOk);
    }
  }
}

TEST_F(ModelHostile, InconsistentHeadersAreDeferredWithTheirReason) {
  auto fix_ip = [](Bytes& f) {
    test::put16(&f[24], 0);
    test::put16(&f[24], test::fold(test::sum16(&f[14], size_t(f[14] & 0xF) * 4)));
  };
  Bytes tcp = test::tcp_frame(0, test::pattern(100));
  Bytes f = tcp;
  f[12] = 0x86;  // IPv6 ethertype
  EXPECT_EQ(rx(0, f).reason, DeferReason::kNotIpv4);
  f = tcp;
  f[14] = 0x44;  // IHL 4
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadIpHeader);
  f = tcp;
  f[14] = 0x65;  // version 6
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadIpHeader);
  f = tcp;
  f[14] = 0x4F;  // IHL 15: options run past the packet's data offset field
  fix_ip(f);
  EXPECT_NE(rx(0, f).decision, Decision::kPlaced);
  f = tcp;
  test::put16(&f[16], 19);  // total length below the header length
  fix_ip(f);
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadIpHeader);
  f = tcp;
  test::put16(&f[16], uint16_t(f.size()));  // beyond the frame
  fix_ip(f);
  EXPECT_EQ(rx(0, f).reason, DeferReason::kTruncated);
  f = tcp;
  f[20] = 0x20;  // more fragments
  fix_ip(f);
  EXPECT_EQ(rx(0, f).reason, DeferReason::kIpFragment);
  f = tcp;
  f[22] ^= 1;  // TTL without fixing the checksum
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadIpChecksum);
  f = tcp;
  f[23] = 47;  // GRE
  fix_ip(f);
  EXPECT_EQ(rx(0, f).reason, DeferReason::kNotL4);
  f = tcp;
  f[34 + 12] = 0x40;  // data offset 4
  EXPECT_EQ(rx(1, f).reason, DeferReason::kBadL4Header);
  f = tcp;
  f[34 + 12] = 0xF0;  // 60 bytes, still inside; then beyond a short segment
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadL4Checksum);
  f = test::tcp_frame(0, test::pattern(10));
  f[34 + 12] = 0xF0;
  EXPECT_EQ(rx(1, f).reason, DeferReason::kBadL4Header);
  f = tcp;
  f.back() ^= 0xFF;
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadL4Checksum);
  Bytes udp = test::udp_frame(5, 9000, test::pattern(40));
  f = udp;
  test::put16(&f[34 + 4], 47);  // UDP length disagrees with IP
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadL4Header);
  // RoCE: pad count larger than the payload, TVer not zero, BTH cut short.
  f = test::roce_frame(0x04, 0, {}, {});
  f[42 + 1] = 0x30;
  EXPECT_EQ(rx(1, f).reason, DeferReason::kBadL4Header);
  f = test::roce_frame(0x04, 0, {}, test::pattern(8));
  f[42 + 1] |= 0x01;
  EXPECT_EQ(rx(1, f).reason, DeferReason::kBadL4Header);
  f = test::udp_frame(5, 4791, test::pattern(10), false);
  EXPECT_EQ(rx(1, f).reason, DeferReason::kTruncated);
  f = test::roce_frame(0x06, 0, {}, test::pattern(8));  // WRITE first without its RETH
  EXPECT_EQ(rx(1, f).reason, DeferReason::kBadL4Header);
  // Solar: short header (naming the flow's connection, or too short to name one), unknown type.
  Bytes h31 = test::pattern(31);
  test::put32(&h31[4], test::kSolarConn);
  f = test::udp_frame(5, 7000, h31);
  EXPECT_EQ(rx(0, f).reason, DeferReason::kTruncated);
  f = test::udp_frame(5, 7000, test::pattern(7));
  EXPECT_EQ(rx(0, f).reason, DeferReason::kTruncated);
  f = test::solar_frame(9, 1, 0, 1, test::pattern(10));
  EXPECT_EQ(rx(0, f).reason, DeferReason::kBadL4Header);
  f = test::solar_frame(1, 1, ~0ull - 4, 1, test::pattern(10));  // offset overflows
  EXPECT_EQ(rx(0, f).reason, DeferReason::kMsOverflow);
}

TEST_F(ModelHostile, RandomAndMutatedFramesNeverEscapeTheirBuffers) {
  std::mt19937_64 rng(42);
  auto rand = [&](uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); };
  std::vector<Bytes> seeds = valid_frames();
  uint64_t frames = 0;
  for (int i = 0; i < 30000; i++) {
    Bytes f;
    if (rand(4) == 0) {
      f.resize(rand(200));
      for (auto& b : f)
        b = uint8_t(rand(256));
      if (f.size() > 14 && rand(2)) test::put16(&f[12], 0x0800);
    } else {
      f = seeds[rand(seeds.size())];
      for (uint64_t k = 1 + rand(4); k-- > 0;)
        f[rand(f.size())] = uint8_t(rand(256));
      if (rand(3) == 0) f.resize(rand(f.size() + 1));
      if (rand(2) && f.size() >= 34 && (f[14] & 0xF) >= 5 && f.size() >= 14 + (f[14] & 0xFu) * 4) {
        test::put16(&f[24], 0);
        test::put16(&f[24], test::fold(test::sum16(&f[14], size_t(f[14] & 0xF) * 4)));
      }
    }
    for (int which = 0; which < 2; which++) {
      rx(which, f);
      frames++;
    }
    if (HasFailure()) break;
  }
  uint64_t decided = 0;
  for (auto& n : nics) {
    for (Ctr c : {Ctr::kRxInOrder, Ctr::kRxPastHole, Ctr::kRxTrimmed, Ctr::kRxDropped,
                  Ctr::kRxNoPayload, Ctr::kRxDeferred}) {
      decided += n->counter(c);
    }
  }
  EXPECT_EQ(decided, frames);
  // Unverified parsing went deep enough to place some mutated frames.
  EXPECT_GT(nics[1]->counter(Ctr::kRxPlacedBytes), 0u);
}

}  // namespace
}  // namespace cleave::nic
