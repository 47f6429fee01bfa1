// rtt_test.cc - RttEstimator (src/transport/rtt.h) against RFC 6298 section 2's rules, with
// values worked out by hand from the RFC's formulas (alpha 1/8, beta 1/4, K 4).
#include <gtest/gtest.h>

#include <cstdint>

#include "rtt.h"

namespace cleave::transport {
namespace {

constexpr uint64_t kMs = 1'000'000;  // ns

TEST(Rtt, NoSampleBeforeTheFirstMeasurement) {
  RttEstimator e;
  EXPECT_FALSE(e.has_sample());
  EXPECT_EQ(e.srtt(), 0u);
  EXPECT_EQ(e.rttvar(), 0u);
}

// 2.2: SRTT <- R, RTTVAR <- R/2, RTO <- SRTT + max(G, K*RTTVAR).
TEST(Rtt, FirstMeasurementSetsSrttAndHalfOfItAsRttvar) {
  RttEstimator e;
  e.sample(100 * kMs);
  EXPECT_TRUE(e.has_sample());
  EXPECT_EQ(e.srtt(), 100 * kMs);
  EXPECT_EQ(e.rttvar(), 50 * kMs);
  EXPECT_EQ(e.rto(), 300 * kMs);           // 100 + 4 * 50
  EXPECT_EQ(e.rto(10 * kMs), 300 * kMs);   // G below K*RTTVAR changes nothing
  EXPECT_EQ(e.rto(500 * kMs), 600 * kMs);  // ... and above it takes its place
}

// 2.3: RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'| with the SRTT from before this measurement, then
// SRTT <- 7/8 SRTT + 1/8 R'.
TEST(Rtt, LaterMeasurementUpdatesRttvarWithTheOldSrtt) {
  RttEstimator e;
  e.sample(100 * kMs);
  e.sample(200 * kMs);
  // 3/4 * 50 + 1/4 * |100 - 200| = 62.5 ms; with the new SRTT (112.5) it would be 59.375 ms.
  EXPECT_EQ(e.rttvar(), 62'500'000u);
  EXPECT_EQ(e.srtt(), 112'500'000u);  // 7/8 * 100 + 1/8 * 200
  EXPECT_EQ(e.rto(), 362'500'000u);   // 112.5 + 4 * 62.5
}

TEST(Rtt, ShorterMeasurementCountsItsDistanceToo) {
  RttEstimator e;
  e.sample(100 * kMs);
  e.sample(20 * kMs);
  EXPECT_EQ(e.rttvar(), 57'500'000u);  // 3/4 * 50 + 1/4 * 80
  EXPECT_EQ(e.srtt(), 90 * kMs);       // 7/8 * 100 + 1/8 * 20
}

// A steady path: SRTT stays at R, RTTVAR shrinks by a quarter per sample, and the RTO falls to
// SRTT + G once K*RTTVAR is below the granularity.
TEST(Rtt, SteadySamplesLeaveTheGranularityAsTheMargin) {
  RttEstimator e;
  e.sample(8 * kMs);
  for (int i = 0; i < 60; i++)
    e.sample(8 * kMs);
  EXPECT_EQ(e.srtt(), 8 * kMs);
  EXPECT_LT(4 * e.rttvar(), kMs);
  EXPECT_EQ(e.rto(kMs), 9 * kMs);
}

TEST(Rtt, ZeroMeasurementCountsAsOneNanosecond) {
  RttEstimator e;
  e.sample(0);
  EXPECT_TRUE(e.has_sample());
  EXPECT_EQ(e.srtt(), 1u);
}

TEST(Rtt, ResetForgetsEverySample) {
  RttEstimator e;
  e.sample(100 * kMs);
  e.sample(200 * kMs);
  e.reset();
  EXPECT_FALSE(e.has_sample());
  e.sample(40 * kMs);  // a first measurement again (2.2)
  EXPECT_EQ(e.srtt(), 40 * kMs);
  EXPECT_EQ(e.rttvar(), 20 * kMs);
}

}  // namespace
}  // namespace cleave::transport
