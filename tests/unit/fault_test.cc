// fault_test.cc - the seeded wire fault stage alone (src/dataplane/nic/fault.h) over real mbufs.
//
// EAL runs without hugepages or root. Each frame carries its index in its first four bytes, so
// a test can say which frames came out, in which order, and how often.
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "fault.h"

namespace {

using cleave::dp::FaultDir;
using cleave::dp::FaultParams;
using cleave::dp::FaultStage;
using cleave::dp::kFaultReorderGap;

rte_mempool* g_pool = nullptr;

rte_mbuf* frame(uint32_t index) {
  rte_mbuf* m = rte_pktmbuf_alloc(g_pool);
  if (m == nullptr) return nullptr;
  m->data_len = 64;
  m->pkt_len = 64;
  auto* p = rte_pktmbuf_mtod(m, uint8_t*);
  std::memset(p, 0xab, 64);
  std::memcpy(p, &index, sizeof index);
  return m;
}

uint32_t index_of(const rte_mbuf* m) {
  uint32_t i = 0;
  std::memcpy(&i, rte_pktmbuf_mtod(m, const uint8_t*), sizeof i);
  return i;
}

// Runs `total` frames through the stage in bursts of `burst`, polling once after each burst as
// a dataplane loop would, then polls an idle line until nothing is held. Returns the indexes that
// came out, in order; frees every mbuf.
std::vector<uint32_t> run(FaultStage& s, uint32_t total, uint16_t burst = 32) {
  std::vector<uint32_t> out;
  std::vector<rte_mbuf*> in(burst);
  std::vector<rte_mbuf*> o(2 * burst + FaultStage::kMaxHeld);
  auto take = [&](uint16_t k) {
    for (uint16_t j = 0; j < k; j++) {
      out.push_back(index_of(o[j]));
      rte_pktmbuf_free(o[j]);
    }
  };
  for (uint32_t next = 0; next < total;) {
    const auto n = uint16_t(std::min<uint32_t>(burst, total - next));
    for (uint16_t j = 0; j < n; j++)
      in[j] = frame(next + j);
    next += n;
    take(s.apply(in.data(), n, o.data(), uint16_t(o.size())));
    take(s.poll(o.data(), uint16_t(o.size())));
  }
  for (int i = 0; i < FaultStage::kIdlePolls + 1 && s.held() != 0; i++)
    take(s.poll(o.data(), uint16_t(o.size())));
  return out;
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { avail_ = rte_mempool_avail_count(g_pool); }
  void TearDown() override {
    EXPECT_EQ(rte_mempool_avail_count(g_pool), avail_) << "every mbuf came back";
  }
  unsigned avail_ = 0;
};

TEST_F(FaultTest, OffPassesEverythingInOrderAndIsInactive) {
  FaultStage s;
  EXPECT_FALSE(s.active());
  s.configure(FaultParams{}, FaultDir::kRx);
  EXPECT_FALSE(s.active());
  std::vector<uint32_t> got = run(s, 1000);
  ASSERT_EQ(got.size(), 1000u);
  for (uint32_t i = 0; i < 1000; i++)
    EXPECT_EQ(got[i], i);
  EXPECT_EQ(s.counters().dropped + s.counters().reordered + s.counters().duplicated, 0u);
}

TEST_F(FaultTest, SameSeedSameFaultsOtherSeedOtherFaults) {
  const FaultParams p{0.05, 0.05, 0.05, 42};
  FaultStage a, b, c, d;
  a.configure(p, FaultDir::kRx);
  b.configure(p, FaultDir::kRx);
  c.configure(FaultParams{0.05, 0.05, 0.05, 43}, FaultDir::kRx);
  d.configure(p, FaultDir::kTx);  // the other direction draws its own sequence
  const std::vector<uint32_t> ra = run(a, 5000), rb = run(b, 5000), rc = run(c, 5000),
                              rd = run(d, 5000);
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
  EXPECT_NE(ra, rd);
  EXPECT_EQ(a.counters().dropped, b.counters().dropped);
  EXPECT_EQ(a.counters().reordered, b.counters().reordered);
  EXPECT_EQ(a.counters().duplicated, b.counters().duplicated);
}

TEST_F(FaultTest, RatesAreRoughlyThoseAskedFor) {
  constexpr uint32_t kFrames = 100000;
  FaultStage s;
  s.configure(FaultParams{0.01, 0.02, 0.03, 7}, FaultDir::kRx);
  const std::vector<uint32_t> got = run(s, kFrames);
  const auto& c = s.counters();
  // Binomial: within about five standard deviations.
  EXPECT_NEAR(double(c.dropped), 0.01 * kFrames, 160);
  EXPECT_NEAR(double(c.reordered), 0.02 * 0.99 * kFrames, 230);
  EXPECT_NEAR(double(c.duplicated), 0.03 * 0.99 * 0.98 * kFrames, 270);
  EXPECT_EQ(got.size(), kFrames - c.dropped + c.duplicated);
}

TEST_F(FaultTest, LossOneIsACutWire) {
  FaultStage s;
  s.configure(FaultParams{1, 0, 0, 3}, FaultDir::kTx);
  EXPECT_TRUE(run(s, 20000).empty());
  EXPECT_EQ(s.counters().dropped, 20000u);
}

TEST_F(FaultTest, EveryFrameNotDroppedComesOutOnceAndDuplicatesTwice) {
  FaultStage s;
  s.configure(FaultParams{0.1, 0.1, 0.1, 3}, FaultDir::kTx);
  const std::vector<uint32_t> got = run(s, 20000);
  std::map<uint32_t, int> seen;
  for (uint32_t i : got)
    seen[i]++;
  uint64_t twice = 0;
  for (auto [i, n] : seen) {
    ASSERT_LE(n, 2) << "frame " << i;
    twice += n == 2 ? 1 : 0;
  }
  EXPECT_EQ(twice, s.counters().duplicated);
  EXPECT_EQ(seen.size(), 20000 - s.counters().dropped);
  EXPECT_EQ(s.held(), 0);
}

TEST_F(FaultTest, AHeldFrameGoesAfterTheGapOrWhenTheLineIsIdle) {
  FaultStage s;
  // Reorder every frame that can be held: p just under 1.
  s.configure(FaultParams{0, 0.999999, 0, 1}, FaultDir::kRx);
  rte_mbuf* in[1] = {frame(0)};
  rte_mbuf* out[FaultStage::kMaxHeld + 2];
  EXPECT_EQ(s.apply(in, 1, out, 1), 0);
  EXPECT_EQ(s.held(), 1);
  EXPECT_EQ(s.counters().reordered, 1u);
  // Faults off: the held frame still leaves, once kIdlePolls polls in a row saw nothing pass.
  s.configure(FaultParams{}, FaultDir::kRx);
  EXPECT_TRUE(s.active()) << "a frame is still held";
  for (int i = 1; i < FaultStage::kIdlePolls; i++)
    ASSERT_EQ(s.poll(out, 4), 0) << "poll " << i;
  ASSERT_EQ(s.poll(out, 4), 1);
  EXPECT_EQ(index_of(out[0]), 0u);
  rte_pktmbuf_free(out[0]);
  EXPECT_FALSE(s.active());

  // Hold one, then kFaultReorderGap frames pass: it follows the last of them.
  s.configure(FaultParams{0, 0.999999, 0, 1}, FaultDir::kRx);
  in[0] = frame(100);
  EXPECT_EQ(s.apply(in, 1, out, 1), 0);
  s.configure(FaultParams{}, FaultDir::kRx);
  rte_mbuf* later[kFaultReorderGap];
  for (uint32_t i = 0; i < kFaultReorderGap; i++)
    later[i] = frame(101 + i);
  const uint16_t n = s.apply(later, kFaultReorderGap, out, kFaultReorderGap + 1);
  ASSERT_EQ(n, kFaultReorderGap + 1);
  for (uint32_t i = 0; i < kFaultReorderGap; i++)
    EXPECT_EQ(index_of(out[i]), 101 + i);
  EXPECT_EQ(index_of(out[kFaultReorderGap]), 100u);
  for (uint16_t i = 0; i < n; i++)
    rte_pktmbuf_free(out[i]);
  EXPECT_EQ(s.held(), 0);
}

TEST_F(FaultTest, AtMostKMaxHeldAndNoOutputOverflow) {
  FaultStage s;
  s.configure(FaultParams{0, 0.999999, 0.999999, 5}, FaultDir::kRx);
  std::vector<rte_mbuf*> in(64);
  for (uint32_t i = 0; i < in.size(); i++)
    in[i] = frame(i);
  // Room for exactly the input: duplicates and releases must not overflow it.
  std::vector<rte_mbuf*> out(in.size() + 1, nullptr);
  const uint16_t n = s.apply(in.data(), uint16_t(in.size()), out.data(), uint16_t(in.size()));
  EXPECT_LE(n, in.size());
  EXPECT_EQ(out[in.size()], nullptr) << "wrote past cap";
  EXPECT_EQ(s.held(), FaultStage::kMaxHeld);
  for (uint16_t i = 0; i < n; i++)
    rte_pktmbuf_free(out[i]);
  s.clear();  // frees what is held; the settings stay
  EXPECT_EQ(s.held(), 0);
  EXPECT_TRUE(s.active());
  s.configure(FaultParams{}, FaultDir::kRx);
  EXPECT_FALSE(s.active());
}

TEST_F(FaultTest, ADuplicateIsACopyOfTheFrame) {
  FaultStage s;
  s.configure(FaultParams{0, 0, 0.999999, 9}, FaultDir::kTx);
  rte_mbuf* in[1] = {frame(77)};
  rte_mbuf* out[2] = {};
  ASSERT_EQ(s.apply(in, 1, out, 2), 2);
  EXPECT_NE(out[0], out[1]);
  EXPECT_EQ(out[0]->pkt_len, out[1]->pkt_len);
  EXPECT_EQ(0, std::memcmp(rte_pktmbuf_mtod(out[0], void*), rte_pktmbuf_mtod(out[1], void*),
                           out[0]->pkt_len));
  EXPECT_EQ(s.counters().duplicated, 1u);
  rte_pktmbuf_free(out[0]);
  rte_pktmbuf_free(out[1]);
}

TEST(FaultParamsTest, ProbabilitiesAreChecked) {
  using cleave::dp::fault_probability_error;
  EXPECT_FALSE(fault_probability_error(0));
  EXPECT_FALSE(fault_probability_error(0.999));
  EXPECT_FALSE(fault_probability_error(1));  // a cut wire
  EXPECT_TRUE(fault_probability_error(1.0001));
  EXPECT_TRUE(fault_probability_error(-0.1));
  EXPECT_TRUE(fault_probability_error(std::numeric_limits<double>::quiet_NaN()));
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  std::string prefix = "--file-prefix=cleave-faulttest-" + std::to_string(getpid());
  const char* eal_argv[] = {
      "fault_tests",    "--no-huge",           "--no-shconf", "-m", "128", "--no-pci", "-l", "0",
      "--no-telemetry", "--log-level=*:error", prefix.c_str()};
  if (rte_eal_init(int(sizeof eal_argv / sizeof eal_argv[0]), const_cast<char**>(eal_argv)) < 0) {
    std::fprintf(stderr, "EAL init failed\n");
    return 1;
  }
  g_pool =
      rte_pktmbuf_pool_create("fault_pool", 4095, 0, 0, 256 + RTE_PKTMBUF_HEADROOM, SOCKET_ID_ANY);
  if (g_pool == nullptr) {
    std::fprintf(stderr, "mbuf pool: %s\n", rte_strerror(rte_errno));
    return 1;
  }
  const int rc = RUN_ALL_TESTS();
  rte_mempool_free(g_pool);
  rte_eal_cleanup();
  return rc;
}
