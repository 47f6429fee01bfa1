// solar_sim_test.cc - Solar end to end over the simulated network (tests/sim/solar_pair.h): WRITE
// I/Os from an initiator over N paths into a target's volume and READs back from it, through the
// fault matrix (loss, reordering, duplication, corrupted blocks, CE marks, broken headers,
// sequence wrap) and a path going down and coming back. Every case checks the bytes exactly and
// that every I/O completed once without error.
// Replay a seed: CLEAVE_SIM_SEED=<seed> ./build/tests/solar_sim_tests --gtest_filter=<test>.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "common/wire.h"
#include "solar_pair.h"

namespace cleave::sim {
namespace {

namespace wire = cleave::wire;
using transport::EventKind;
using transport::solar::PathInfo;

constexpr uint32_t kIoBytes = 64 * 1024;  // 64 blocks of 1 KiB

// `n` writes of kIoBytes from A's source (I/O i at i * kIoBytes) to distinct volume slots in a
// seeded order, so the blocks land all over the volume.
struct Plan {
  std::vector<uint64_t> slot;  // volume offset of I/O i
};

Plan plan(size_t n, size_t volume_bytes, uint64_t seed) {
  std::vector<uint64_t> slots(volume_bytes / kIoBytes);
  std::iota(slots.begin(), slots.end(), 0);
  std::mt19937_64 g(seed);
  std::shuffle(slots.begin(), slots.end(), g);
  Plan p;
  for (size_t i = 0; i < n; i++)
    p.slot.push_back(slots[i] * kIoBytes);
  return p;
}

void submit(SolarPair& p, const Plan& pl, size_t from, size_t to) {
  for (size_t i = from; i < to; i++)
    p.write(i + 1, i * kIoBytes, pl.slot[i], kIoBytes);
}

// Every I/O 1..n completed once, as `kind`, without error, whole.
void check_done(SolarPair& p, EventKind kind, size_t n) {
  std::vector<bool> seen(n + 1);
  for (const transport::Event& e : p.done) {
    ASSERT_EQ(e.kind, kind);
    ASSERT_EQ(e.status, 0) << "wr_id " << e.wr_id << "\n" << p.describe();
    ASSERT_EQ(e.len, kIoBytes);
    ASSERT_TRUE(e.wr_id >= 1 && e.wr_id <= n && !seen[e.wr_id]) << e.wr_id;
    seen[e.wr_id] = true;
  }
}

// Every I/O completed once, without error, and its bytes are at its volume slot; nothing else
// of the volume was written.
void check(SolarPair& p, const Plan& pl, size_t n) {
  ASSERT_EQ(p.done.size(), n) << p.describe();
  ASSERT_NO_FATAL_FAILURE(check_done(p, EventKind::kWriteDone, n));
  std::vector<bool> written(p.net->b().mr(p.vol_mr).size() / kIoBytes);
  for (size_t i = 0; i < n; i++) {
    ASSERT_TRUE(p.same(i * kIoBytes, pl.slot[i], kIoBytes)) << "I/O " << i << "\n" << p.describe();
    written[pl.slot[i] / kIoBytes] = true;
  }
  const std::span<uint8_t> vol = p.net->b().mr(p.vol_mr);
  for (size_t s = 0; s < written.size(); s++) {
    if (written[s]) continue;
    auto slot = vol.subspan(s * kIoBytes, kIoBytes);
    ASSERT_TRUE(std::all_of(slot.begin(), slot.end(), [](uint8_t b) { return b == 0; })) << s;
  }
}

// A 1 Gb/s link with a 256 KiB queue: the cases that cut a path or a route.
SolarConfig gigabit() {
  SolarConfig c;
  c.link.rate_bps = 1'000'000'000;
  c.link.queue_bytes = 256 * 1024;
  return c;
}

// Runs `n` I/Os through `cfg`, all submitted at once, and checks them.
void transfer(const SolarConfig& cfg, uint64_t seed, size_t n, SolarPair** out = nullptr) {
  static std::unique_ptr<SolarPair> keep;
  keep = std::make_unique<SolarPair>(seed, cfg);
  SolarPair& p = *keep;
  ASSERT_TRUE(p.ok);
  p.fill(0, n * kIoBytes, seed);
  const Plan pl = plan(n, cfg.volume_bytes, seed);
  submit(p, pl, 0, n);
  ASSERT_TRUE(p.run_until_done(n)) << p.describe();
  check(p, pl, n);
  if (out != nullptr) *out = &p;
}

TEST(SolarSim, CleanWriteSpreadsOverEveryPath) {
  const uint64_t seed = SimNet::seed_from_env(1);
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(SolarConfig{}, seed, 64, &p));
  EXPECT_EQ(p->ini_stats().blocks_acked, 64u * 64);
  EXPECT_EQ(p->tgt_stats().blocks_received, 64u * 64);  // nothing twice
  EXPECT_EQ(p->tgt_stats().crc_drops, 0u);
  for (uint16_t i = 0; i < 4; i++) {
    const PathInfo pi = p->path(i);
    EXPECT_TRUE(pi.up);
    EXPECT_GT(pi.blocks_sent, 64u * 64 / 8) << "path " << i << "\n" << p->describe();
    EXPECT_EQ(pi.blocks_resent, 0u);
    EXPECT_GT(pi.srtt_ns, 0u);
  }
  // Every block placed by the target's NIC, none on the copy path.
  EXPECT_EQ(p->net->b().stats().rx_deferred, 0u) << p->describe();
}

TEST(SolarSim, CopyPathWhenTheNicDoesNotPlace) {
  SolarConfig cfg;
  cfg.zero_copy = false;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(2), 16, &p));
  EXPECT_GT(p->net->b().stats().rx_deferred, 0u);
}

struct LossCase {
  double loss;
  uint64_t seed;
};

class SolarLoss : public testing::TestWithParam<LossCase> {};

TEST_P(SolarLoss, EveryIoCompletesExactly) {
  SolarConfig cfg;
  cfg.ab.loss = GetParam().loss;
  cfg.ba.loss = GetParam().loss;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(GetParam().seed), 64, &p));
  uint64_t resent = 0;
  for (uint16_t i = 0; i < cfg.paths; i++)
    resent += p->path(i).blocks_resent;
  EXPECT_GT(resent, 0u) << p->describe();
  EXPECT_GT(p->net->stats(Dir::kAtoB).lost, 0u);
}

INSTANTIATE_TEST_SUITE_P(Matrix, SolarLoss,
                         testing::Values(LossCase{0.01, 11}, LossCase{0.05, 12},
                                         LossCase{0.05, 13}));

TEST(SolarSim, ReorderingAndDuplicates) {
  SolarConfig cfg;
  cfg.ab.reorder = 0.05;
  cfg.ab.reverse = 0.01;
  cfg.ab.duplicate = 0.03;
  cfg.ba.reorder = 0.05;
  cfg.ba.duplicate = 0.03;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(21), 64, &p));
  EXPECT_GT(p->net->stats(Dir::kAtoB).duplicated, 0u);
  EXPECT_GT(p->net->stats(Dir::kAtoB).reordered, 0u);
  // Duplicates reach the target and are placed again, harmlessly.
  EXPECT_GT(p->tgt_stats().blocks_received, 64u * 64);
}

// A lost ACK costs nothing: the next one's SACK bitmap names what it would have. Only the last
// ACKs of a path, with none after them, leave blocks to their RTO.
TEST(SolarSim, LostAcksAreCoveredByTheNextAcksBitmap) {
  SolarConfig cfg;
  cfg.ba.loss = 0.2;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(25), 64, &p));
  const uint64_t acks_lost = p->net->stats(Dir::kBtoA).lost;
  ASSERT_GT(acks_lost, 400u);
  uint64_t resent = 0;
  for (uint16_t i = 0; i < cfg.paths; i++)
    resent += p->path(i).blocks_resent;
  EXPECT_LT(resent * 20, acks_lost) << p->describe();
}

TEST(SolarSim, CorruptedBlocksAreDroppedNackedAndResent) {
  SolarConfig cfg;
  cfg.ab.corrupt_payload = 0.03;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(31), 64, &p));
  const uint64_t corrupted = p->net->stats(Dir::kAtoB).corrupted_payload;
  EXPECT_GT(corrupted, 0u);
  // Every corrupted frame was caught (its UDP checksum, which the NIC checks before the block's
  // CRC32C) and none written: a block NACKed and sent again, or a header too broken to answer
  // (its block is found lost and sent again).
  EXPECT_EQ(p->tgt_stats().crc_drops + p->tgt_stats().bad_headers, corrupted) << p->describe();
  EXPECT_GT(p->tgt_stats().crc_drops, corrupted / 2);
  // What the target took, the NIC placed: no corrupted block reached the volume by the copy path.
  EXPECT_EQ(p->net->b().stats().rx_placed, p->tgt_stats().blocks_received) << p->describe();
  EXPECT_GT(p->ini_stats().nacks_received, 0u);
  uint64_t resent = 0;
  for (uint16_t i = 0; i < cfg.paths; i++)
    resent += p->path(i).blocks_resent;
  EXPECT_GE(resent, p->ini_stats().nacks_received);
}

TEST(SolarSim, CeMarksShrinkTheWindowsNotTheData) {
  SolarConfig cfg;
  cfg.ab.ce = 0.2;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(41), 64, &p));
  EXPECT_GT(p->net->stats(Dir::kAtoB).ce_marked, 0u);
  for (uint16_t i = 0; i < cfg.paths; i++)
    EXPECT_EQ(p->path(i).blocks_resent, 0u);
}

// Transmit sequences wrap past 2^32 mid-transfer, with loss: ACKs, SACK bits and the loss rule
// compare modulo 2^32.
TEST(SolarSim, SequencesWrap) {
  SolarConfig cfg;
  cfg.first_seq = 0xFFFFFFF0u;  // 16 before the wrap; each path sends hundreds
  cfg.ab.loss = 0.01;
  cfg.ba.loss = 0.01;
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(61), 64, &p));
  for (uint16_t i = 0; i < cfg.paths; i++)
    EXPECT_GT(p->path(i).blocks_sent, 16u) << "path " << i << " did not wrap";
}

// Bit flips in the IP and UDP headers and checksums, and truncated frames, both ways: whatever
// reaches the transport broken is refused, and every block still lands once, intact.
TEST(SolarSim, BrokenHeadersAndTruncatedFrames) {
  SolarConfig cfg;
  for (Faults* f : {&cfg.ab, &cfg.ba}) {
    f->corrupt_header = 0.01;
    f->corrupt_checksum = 0.01;
    f->truncate = 0.01;
  }
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, SimNet::seed_from_env(71), 64, &p));
  EXPECT_GT(p->net->stats(Dir::kAtoB).corrupted(), 0u);
  EXPECT_GT(p->net->stats(Dir::kBtoA).truncated, 0u);
}

// The UDP source port of an Ethernet/IPv4/UDP frame, or 0.
uint16_t udp_sport(std::span<const uint8_t> f) {
  if (f.size() < 14 + 20 + 8 || f[14 + 9] != 17) return 0;
  const size_t l4 = 14 + size_t(f[14] & 0xF) * 4;
  return f.size() < l4 + 2 ? 0 : uint16_t(f[l4] << 8 | f[l4 + 1]);
}

// Path 1 loses everything both ways mid-transfer: it times out k times in a row, goes down, its
// blocks move to the other paths; when the wire comes back a probe brings it up and it carries
// blocks again. No I/O is lost or failed and the volume is exact. A 1 Gbit/s link with a 256 KB
// queue keeps the transfer long and the RTT short, so the cut lands mid-transfer.
TEST(SolarSim, PathGoesDownAndComesBack) {
  const uint64_t seed = SimNet::seed_from_env(51);
  SolarConfig cfg = gigabit();
  cfg.ab.loss = 0.001;
  SolarPair p(seed, cfg);
  ASSERT_TRUE(p.ok);
  constexpr size_t kFirst = 120;
  constexpr size_t kN = 128;
  p.fill(0, kN * kIoBytes, seed);
  const Plan pl = plan(kN, cfg.volume_bytes, seed);
  const uint16_t dead = transport::solar::udp_sport(1);

  submit(p, pl, 0, kFirst);
  ASSERT_TRUE(p.run_until_done(10)) << p.describe();
  ASSERT_GT(p.path(1).blocks_sent, 0u);
  bool cut = true;
  auto drop = [&](std::span<const uint8_t> f) { return cut && udp_sport(f) == dead; };
  p.net->faults(Dir::kAtoB).drop_if = drop;
  p.net->faults(Dir::kBtoA).drop_if = drop;

  // Down after k timeouts in a row, while I/Os are still in flight; the others carry on.
  ASSERT_TRUE(p.net->run_until([&] { return !p.path(1).up; }, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.path(1).downs, 1u);
  EXPECT_EQ(p.path(1).timeouts, 3u);
  EXPECT_LT(p.done.size(), kFirst) << "the cut came after the transfer";
  EXPECT_EQ(p.path(1).inflight, 0u);
  ASSERT_TRUE(p.run_until_done(kFirst)) << p.describe();
  EXPECT_FALSE(p.path(1).up);  // still cut: probes go unanswered
  EXPECT_GT(p.path(1).probes, 0u);
  EXPECT_EQ(p.path(1).ups, 0u);
  EXPECT_GT(p.net->stats(Dir::kAtoB).dropped_filter, 0u);

  // The wire comes back: the next probe's reply brings the path up, and it carries blocks.
  cut = false;
  ASSERT_TRUE(p.net->run_until([&] { return p.path(1).up; }, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.path(1).ups, 1u);
  const uint64_t sent_at_up = p.path(1).blocks_sent;
  submit(p, pl, kFirst, kN);
  ASSERT_TRUE(p.run_until_done(kN)) << p.describe();
  EXPECT_GT(p.path(1).blocks_sent, sent_at_up) << p.describe();
  EXPECT_TRUE(p.path(1).up);
  check(p, pl, kN);
}

// Two routes (cleaved gives a QP one per local port it reaches the peer's addresses through;
// the simulated wire tells them apart by TTL): path p leaves on route p % 2, the target answers
// each path on the route it came on. Cutting route 1 takes down paths 1 and 3 and no other, the
// I/Os go on over route 0, and the paths come back when the route does.
TEST(SolarSim, PathsSpreadOverTwoRoutesAndARouteCutTakesDownOnlyItsPaths) {
  const uint64_t seed = SimNet::seed_from_env(53);
  SolarConfig cfg = gigabit();
  cfg.routes = 2;
  cfg.via_qp = true;  // the routes reach the transport at RTR, as from cleaved
  SolarPair p(seed, cfg);
  ASSERT_TRUE(p.ok);
  constexpr size_t kFirst = 120;
  constexpr size_t kN = 128;
  p.fill(0, kN * kIoBytes, seed);
  const Plan pl = plan(kN, cfg.volume_bytes, seed);
  // Every frame, both ways: its route (TTL) is its path's (UDP source port) modulo 2.
  bool cut = false;
  std::array<std::array<uint64_t, 2>, 2> on_route{};  // [direction][route]
  uint64_t astray = 0;
  auto watch = [&](int dir) {
    return [&, dir](std::span<const uint8_t> f) {
      const unsigned route = 64u - f[14 + 8];
      const unsigned path = wire::load16(f.data() + 14 + 20) & 0x3FFF;
      if (route > 1 || route != path % 2) astray++;
      on_route[dir][route & 1]++;
      return cut && route == 1;
    };
  };
  p.net->faults(Dir::kAtoB).drop_if = watch(0);
  p.net->faults(Dir::kBtoA).drop_if = watch(1);

  submit(p, pl, 0, kFirst / 2);
  ASSERT_TRUE(p.run_until_done(kFirst / 2)) << p.describe();
  for (uint16_t i = 0; i < 4; i++) {
    EXPECT_EQ(p.path(i).route, i % 2);
    EXPECT_EQ(p.tgt_path(i).route, i % 2);  // learned from what came
    EXPECT_GT(p.path(i).blocks_sent, 0u) << i;
  }
  EXPECT_GT(std::min({on_route[0][0], on_route[0][1], on_route[1][0], on_route[1][1]}), 0u);

  cut = true;
  submit(p, pl, kFirst / 2, kFirst);
  ASSERT_TRUE(p.net->run_until([&] { return !p.path(1).up && !p.path(3).up; }, 1'000'000'000))
      << p.describe();
  ASSERT_TRUE(p.run_until_done(kFirst)) << p.describe();
  EXPECT_TRUE(p.path(0).up && p.path(2).up);
  EXPECT_EQ(p.path(0).downs + p.path(2).downs, 0u);

  cut = false;
  ASSERT_TRUE(p.net->run_until([&] { return p.path(1).up && p.path(3).up; }, 1'000'000'000))
      << p.describe();
  const uint64_t sent_at_up = p.path(1).blocks_sent;
  submit(p, pl, kFirst, kN);
  ASSERT_TRUE(p.run_until_done(kN)) << p.describe();
  EXPECT_GT(p.path(1).blocks_sent, sent_at_up) << p.describe();
  EXPECT_EQ(astray, 0u);
  check(p, pl, kN);
}

// ---- READ ----

struct ReadCase {
  const char* name;
  double ab_loss = 0, ba_loss = 0;
  double ba_corrupt = 0;
  double reorder = 0, duplicate = 0;
  bool zero_copy = true;
  uint64_t seed = 0;
  friend void PrintTo(const ReadCase& c, std::ostream* os) { *os << c.name; }
};

class SolarRead : public testing::TestWithParam<ReadCase> {};

// `n` READs of kIoBytes from seeded volume slots into A's read buffers (READ i at i * kIoBytes):
// every one completes once, without error, with the volume's bytes.
TEST_P(SolarRead, EveryReadCompletesWithTheVolumesBytes) {
  const ReadCase& rc = GetParam();
  SolarConfig cfg;
  cfg.zero_copy = rc.zero_copy;
  cfg.ab.loss = rc.ab_loss;
  cfg.ba.loss = rc.ba_loss;
  cfg.ba.corrupt_payload = rc.ba_corrupt;
  for (Faults* f : {&cfg.ab, &cfg.ba}) {
    f->reorder = rc.reorder;
    f->duplicate = rc.duplicate;
  }
  const uint64_t seed = SimNet::seed_from_env(rc.seed);
  SolarPair p(seed, cfg);
  ASSERT_TRUE(p.ok);
  constexpr size_t kN = 64;
  p.fill_volume(0, cfg.volume_bytes, seed);
  const Plan pl = plan(kN, cfg.volume_bytes, seed);
  for (size_t i = 0; i < kN; i++)
    p.read(i + 1, i * kIoBytes, pl.slot[i], kIoBytes);
  ASSERT_TRUE(p.run_until_done(kN)) << p.describe();
  ASSERT_NO_FATAL_FAILURE(check_done(p, EventKind::kReadDone, kN));
  for (size_t i = 0; i < kN; i++) {
    ASSERT_TRUE(p.read_same(i * kIoBytes, pl.slot[i], kIoBytes)) << "READ " << i << "\n"
                                                                 << p.describe();
  }
  // The target hears the last ACKs a little later: then every READ it served is done there.
  EXPECT_TRUE(p.net->run_until([&] { return p.tgt_stats().ios_done == kN; }, 1'000'000'000))
      << p.describe();
  if (rc.zero_copy && rc.ba_corrupt == 0 && rc.ba_loss == 0 && rc.duplicate == 0) {
    EXPECT_EQ(p.net->a().stats().rx_placed, kN * 64) << "the NIC placed every READ_BLK once";
  }
  if (!rc.zero_copy) {
    EXPECT_GT(p.net->a().stats().rx_deferred, 0u);
  }
  if (rc.ba_corrupt > 0) {
    EXPECT_GT(p.ini_stats().crc_drops, 0u);
    EXPECT_GT(p.tgt_stats().nacks_received, 0u);
  }
  if (rc.ab_loss > 0) {
    uint64_t reqs = 0;
    for (uint16_t i = 0; i < cfg.paths; i++)
      reqs += p.path(i).read_reqs;
    EXPECT_GE(reqs, kN);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Matrix, SolarRead,
    testing::Values(ReadCase{.name = "clean", .seed = 81},
                    ReadCase{.name = "copy_path", .zero_copy = false, .seed = 82},
                    ReadCase{.name = "loss1", .ab_loss = 0.01, .ba_loss = 0.01, .seed = 83},
                    ReadCase{.name = "loss5", .ab_loss = 0.05, .ba_loss = 0.05, .seed = 84},
                    ReadCase{.name = "corrupt", .ba_corrupt = 0.03, .seed = 85},
                    ReadCase{
                        .name = "reorder_dup", .reorder = 0.05, .duplicate = 0.03, .seed = 86}),
    [](const testing::TestParamInfo<ReadCase>& i) { return std::string(i.param.name); });

// READs with path 1 cut both ways mid-transfer: the target, which sends the READ_BLKs, finds the
// path down after k timeouts and moves its blocks to the others; the wire restored, its probe
// brings the path back. Every READ completes with the volume's bytes.
TEST(SolarSim, ReadsSurviveAPathGoingDownAtTheTarget) {
  const uint64_t seed = SimNet::seed_from_env(91);
  SolarConfig cfg = gigabit();
  SolarPair p(seed, cfg);
  ASSERT_TRUE(p.ok);
  constexpr size_t kN = 120;
  p.fill_volume(0, cfg.volume_bytes, seed);
  const Plan pl = plan(kN, cfg.volume_bytes, seed);
  for (size_t i = 0; i < kN; i++)
    p.read(i + 1, i * kIoBytes, pl.slot[i], kIoBytes);
  ASSERT_TRUE(p.run_until_done(10)) << p.describe();
  const uint16_t dead = transport::solar::udp_sport(1);
  bool cut = true;
  auto drop = [&](std::span<const uint8_t> f) { return cut && udp_sport(f) == dead; };
  p.net->faults(Dir::kAtoB).drop_if = drop;
  p.net->faults(Dir::kBtoA).drop_if = drop;
  ASSERT_TRUE(p.net->run_until([&] { return !p.tgt_path(1).up; }, 1'000'000'000)) << p.describe();
  EXPECT_LT(p.done.size(), kN) << "the cut came after the transfer";
  ASSERT_TRUE(p.run_until_done(kN)) << p.describe();
  cut = false;
  ASSERT_TRUE(p.net->run_until([&] { return p.tgt_path(1).up; }, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.tgt_path(1).downs, 1u);
  EXPECT_EQ(p.tgt_path(1).ups, 1u);
  for (const transport::Event& e : p.done) {
    ASSERT_EQ(e.kind, EventKind::kReadDone);
    ASSERT_EQ(e.status, 0);
  }
  for (size_t i = 0; i < kN; i++)
    ASSERT_TRUE(p.read_same(i * kIoBytes, pl.slot[i], kIoBytes)) << "READ " << i;
}

// The same seed replays the same run: every counter equal.
// A peer asking for more READs than a target holds: past 1024 READs, or 2^18 blocks, on one
// connection a new READ_REQ is left unacknowledged and counted, and nothing more is kept; one
// for a READ already held is still taken.
TEST(SolarSim, ATargetHoldsBoundedReads) {
  SolarConfig cfg;
  cfg.volume_bytes = 64u << 20;
  auto read_reqs = [&](SolarPair& p, uint32_t first_io, uint32_t n, uint16_t count) {
    std::vector<std::array<uint8_t, 40>> l4(n);
    std::vector<transport::RxHeader> hs(n);
    for (uint32_t i = 0; i < n; i++) {
      transport::solar::Header h;
      h.type = transport::solar::Type::kReadReq;
      h.conn = SolarPair::kConnB;
      h.seq = first_io + i;
      h.io_id = first_io + i;
      h.count = count;
      h.length = uint32_t(count) * cfg.block_bytes;
      wire::store16(l4[i].data(), transport::solar::udp_sport(0));
      wire::store16(l4[i].data() + 2, transport::solar::kUdpPort);
      wire::store16(l4[i].data() + 4, 40);
      transport::solar::encode(h, l4[i].data() + 8);
      hs[i].l4 = l4[i].data();
      hs[i].l4_len = 40;
      hs[i].flow = p.fb;
      hs[i].l4_csum = transport::Csum::kGood;
      hs[i].placed = transport::Placed::kNoPayload;
    }
    p.tgt->rx_burst(hs, p.net->b());
    p.net->b().flush();
  };
  {
    SolarPair p(SimNet::seed_from_env(81), cfg);
    ASSERT_TRUE(p.ok);
    read_reqs(p, 1, 1100, 1);
    EXPECT_EQ(p.tgt_stats().reads_deferred, 1100u - 1024u);
    const uint64_t acks = p.tgt_stats().acks_sent;
    read_reqs(p, 1, 1, 1);  // a READ it holds: taken, and acknowledged at once (a low sequence)
    EXPECT_EQ(p.tgt_stats().reads_deferred, 76u);
    EXPECT_GT(p.tgt_stats().acks_sent, acks);
    const uint64_t acks2 = p.tgt_stats().acks_sent;
    read_reqs(p, 5000, 1, 1);  // a new one: deferred, and not acknowledged
    EXPECT_EQ(p.tgt_stats().reads_deferred, 77u);
    EXPECT_EQ(p.tgt_stats().acks_sent, acks2);
  }
  {
    SolarPair p(SimNet::seed_from_env(82), cfg);
    ASSERT_TRUE(p.ok);
    read_reqs(p, 1, 5, 65535);  // 4 x 65535 blocks fit in 2^18, the fifth does not
    EXPECT_EQ(p.tgt_stats().reads_deferred, 1u);
    read_reqs(p, 10, 1, 4);
    EXPECT_EQ(p.tgt_stats().reads_deferred, 1u) << "4 more blocks still fit";
  }
}

// Every path cut both ways: no I/O can finish, and each fails -ETIMEDOUT once its timeout has
// passed (not before, at most 1/16 of it after); the connection goes on: with the wire back, the
// paths come up by their probes and a new I/O completes.
TEST(SolarSim, IosTimeOutWhenEveryPathIsCut) {
  SolarConfig cfg;
  cfg.io_timeout_ns = 50'000'000;
  SolarPair p(SimNet::seed_from_env(91), cfg);
  ASSERT_TRUE(p.ok);
  p.net->faults(Dir::kAtoB).loss = 1.0;
  p.net->faults(Dir::kBtoA).loss = 1.0;
  p.fill(0, 4 * kIoBytes, 91);
  const uint64_t t0 = p.net->now_ns();
  for (uint64_t i = 0; i < 4; i++)
    p.write(i + 1, i * kIoBytes, i * kIoBytes, kIoBytes);
  for (uint64_t i = 0; i < 2; i++)
    p.read(10 + i, i * kIoBytes, i * kIoBytes, kIoBytes);
  ASSERT_TRUE(p.net->run_until([&] { return p.done.size() >= 1; }, 1'000'000'000)) << p.describe();
  const uint64_t first = p.net->now_ns() - t0;
  EXPECT_GE(first, cfg.io_timeout_ns);
  EXPECT_LE(first, cfg.io_timeout_ns + cfg.io_timeout_ns / 16 + 1'000'000);
  ASSERT_TRUE(p.run_until_done(6, 1'000'000'000)) << p.describe();
  for (const transport::Event& e : p.done)
    EXPECT_EQ(e.status, -ETIMEDOUT) << e.wr_id;
  EXPECT_EQ(p.ini_stats().io_timeouts, 6u);
  p.net->faults(Dir::kAtoB) = Faults{};
  p.net->faults(Dir::kBtoA) = Faults{};
  p.done.clear();
  p.write(20, 0, 0, kIoBytes);
  ASSERT_TRUE(p.run_until_done(1, 1'000'000'000)) << p.describe();
  EXPECT_EQ(p.done[0].status, 0);
  EXPECT_TRUE(p.same(0, 0, kIoBytes));
}

// ---- queue pairs (QpControl): how cleaved opens connections ----

TEST(SolarQp, WritesAndReadsThroughQueuePairsWithLoss) {
  SolarConfig cfg;
  cfg.via_qp = true;
  cfg.ab.loss = 0.02;
  cfg.ba.loss = 0.02;
  const uint64_t seed = SimNet::seed_from_env(101);
  SolarPair* p = nullptr;
  ASSERT_NO_FATAL_FAILURE(transfer(cfg, seed, 32, &p));
  transport::QpAttr a;
  ASSERT_EQ(p->ini->query_qp(p->fa, &a), 0);
  EXPECT_EQ(a.state, transport::QpState::kRts);
  EXPECT_EQ(a.dest_qpn, SolarPair::kConnB);
  EXPECT_EQ(a.pmtu, 4096u);
  EXPECT_GT(p->path(3).blocks_sent, 0u) << "every path carries blocks";
  // Read the volume back into A's read buffer.
  p->done.clear();
  for (uint64_t i = 0; i < 8; i++)
    p->read(100 + i, i * kIoBytes, i * kIoBytes, kIoBytes);
  ASSERT_TRUE(p->run_until_done(8)) << p->describe();
  for (const transport::Event& e : p->done) {
    EXPECT_EQ(e.kind, EventKind::kReadDone);
    EXPECT_EQ(e.status, 0);
  }
  EXPECT_TRUE(p->read_same(0, 0, 8 * kIoBytes));
}

// The states as ibv_modify_qp walks them, what each step needs, and what a QP that is not in RTS
// does with an I/O.
TEST(SolarQp, StatesParametersAndFlushes) {
  SolarConfig cfg;
  cfg.via_qp = true;
  SolarPair p(SimNet::seed_from_env(7), cfg);
  ASSERT_TRUE(p.ok);
  transport::solar::SolarTransport& t = *p.ini;
  transport::Context& ctx = p.net->a();
  using transport::QpAttr;
  using transport::QpState;
  constexpr transport::FlowId kQp = 1000;
  auto param = [&](std::string_view k, std::string_view v) {
    const transport::Param ps[] = {{k, v}};
    return t.create_qp(kQp + 1, 9, {}, ps);
  };
  EXPECT_EQ(param("paths", "0"), -EINVAL);
  EXPECT_EQ(param("paths", "65"), -EINVAL);
  EXPECT_EQ(param("block", "100"), -EINVAL);
  EXPECT_EQ(param("block", "8192"), -EINVAL);
  EXPECT_EQ(param("dcqcn", "on"), -EINVAL);
  EXPECT_EQ(param("io_timeout_ms", "3600001"), -EINVAL);
  EXPECT_EQ(param("io_timeout_ms", "-1"), -EINVAL);
  EXPECT_EQ(t.check_params({}), "");
  const transport::Param ok_params[] = {{"paths", "2"}, {"block", "2048"}};
  EXPECT_EQ(t.check_params(ok_params), "");

  ASSERT_EQ(t.create_qp(kQp, 0x33, {}, ok_params), 0);
  EXPECT_EQ(t.create_qp(kQp, 0x34, {}, {}), -EEXIST);
  QpAttr a;
  a.state = QpState::kRtr;
  EXPECT_EQ(t.modify_qp(kQp, a, transport::kAttrState, ctx), -EINVAL) << "RESET to RTR";
  a.state = QpState::kInit;
  ASSERT_EQ(t.modify_qp(kQp, a, transport::kAttrState, ctx), 0);
  a.state = QpState::kRtr;
  a.dest_qpn = 0x44;
  a.pmtu = 1024;  // below the block
  const uint32_t rtr = transport::kAttrState | transport::kAttrDestQpn | transport::kAttrPmtu;
  EXPECT_EQ(t.modify_qp(kQp, a, rtr, ctx), -EINVAL) << "a 2048-byte block over a 1024 MTU";
  EXPECT_EQ(t.modify_qp(kQp, a, transport::kAttrState | transport::kAttrPmtu, ctx), -EINVAL)
      << "no peer number";
  a.pmtu = 3000;
  EXPECT_EQ(t.modify_qp(kQp, a, rtr, ctx), -EINVAL) << "not an MTU";
  a.pmtu = 2048;
  ASSERT_EQ(t.modify_qp(kQp, a, rtr, ctx), 0);
  QpAttr q;
  ASSERT_EQ(t.query_qp(kQp, &q), 0);
  EXPECT_EQ(q.state, QpState::kRtr);
  EXPECT_EQ(q.dest_qpn, 0x44u);
  EXPECT_EQ(q.pmtu, 2048u);
  EXPECT_TRUE(t.rtr_nic_flow(kQp, a, rtr).messages) << "the initiator's READs land by I/O id";
  EXPECT_FALSE(p.tgt->rtr_nic_flow(p.fb, a, rtr).messages) << "blocks land by offset at the target";
  EXPECT_EQ(t.rtr_nic_flow(kQp, a, rtr).parser, transport::NicParser::kSolar);

  // Not in RTS yet: an I/O is refused, and nothing is sent.
  const size_t events = p.done.size();
  p.net->a().submit(
      {.flow = kQp, .kind = transport::ReqKind::kWrite, .mr = p.src_mr, .len = 4096, .wr_id = 5});
  p.net->run_until([&] { return p.done.size() > events; }, 1'000'000);
  ASSERT_EQ(p.done.size(), events + 1);
  EXPECT_EQ(p.done.back().status, -EINVAL);

  // RTS opens the connection (its peer does not exist: the I/O stays in flight), ERR flushes it
  // with -ECANCELED, and so is any I/O given after.
  a.state = QpState::kRts;
  ASSERT_EQ(t.modify_qp(kQp, a, transport::kAttrState, ctx), 0);
  EXPECT_EQ(t.flow_count(), 2u);
  p.net->a().submit(
      {.flow = kQp, .kind = transport::ReqKind::kWrite, .mr = p.src_mr, .len = 4096, .wr_id = 6});
  p.net->run_until([] { return false; }, 2'000'000);
  EXPECT_EQ(p.done.size(), events + 1) << "in flight";
  a.state = QpState::kErr;
  ASSERT_EQ(t.modify_qp(kQp, a, transport::kAttrState, ctx), 0);
  p.net->a().flush();
  p.net->a().submit(
      {.flow = kQp, .kind = transport::ReqKind::kWrite, .mr = p.src_mr, .len = 4096, .wr_id = 7});
  p.net->run_until([&] { return p.done.size() >= events + 3; }, 1'000'000);
  ASSERT_EQ(p.done.size(), events + 3);
  EXPECT_EQ(p.done[events + 1].wr_id, 6u);
  EXPECT_EQ(p.done[events + 1].status, -ECANCELED);
  EXPECT_EQ(p.done[events + 2].wr_id, 7u);
  EXPECT_EQ(p.done[events + 2].status, -ECANCELED);
  EXPECT_EQ(t.flow_count(), 1u);
  EXPECT_EQ(t.destroy_qp(kQp, ctx), 0);
  EXPECT_EQ(t.destroy_qp(kQp, ctx), -ENOENT);
  EXPECT_EQ(t.query_qp(kQp, &q), -ENOENT);

  // The largest MTU whose block fits above IP: UDP 8 + Solar 32 bytes of headers.
  EXPECT_EQ(t.max_pmtu(1500 - 20), 1024u);
  EXPECT_EQ(t.max_pmtu(4096 + 40), 4096u);
  EXPECT_EQ(t.max_pmtu(4096 + 39), 2048u);
  EXPECT_EQ(t.max_pmtu(256 + 39), 0u);
}

TEST(SolarSim, SeedReplays) {
  SolarConfig cfg;
  cfg.ab.loss = 0.02;
  cfg.ba.reorder = 0.05;
  std::vector<LinkStats> runs;
  std::vector<uint64_t> resent;
  for (int r = 0; r < 2; r++) {
    SolarPair p(7, cfg);
    ASSERT_TRUE(p.ok);
    p.fill(0, 16 * kIoBytes, 7);
    submit(p, plan(16, cfg.volume_bytes, 7), 0, 16);
    ASSERT_TRUE(p.run_until_done(16)) << p.describe();
    runs.push_back(p.net->stats(Dir::kAtoB));
    resent.push_back(p.path(0).blocks_resent + p.path(1).blocks_resent);
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(resent[0], resent[1]);
}

}  // namespace
}  // namespace cleave::sim
