// sd_notify_test.cc - the watchdog pings only while the dataplane makes progress.
#include <gtest/gtest.h>

#include "control/sd_notify.h"

namespace cleave::dp {
namespace {

using namespace std::chrono_literals;
using V = WatchdogGate::Verdict;

TEST(WatchdogGate, PingsOncePerPeriodWhileProgressing) {
  WatchdogGate g(100ms);
  auto t = WatchdogGate::Clock::time_point{} + 1s;
  EXPECT_EQ(g.check(1, t), V::kPing);
  EXPECT_EQ(g.check(2, t + 50ms), V::kWait);  // not due yet
  EXPECT_EQ(g.check(3, t + 100ms), V::kPing);
  EXPECT_EQ(g.check(4, t + 150ms), V::kWait);
  EXPECT_EQ(g.check(5, t + 200ms), V::kPing);
}

TEST(WatchdogGate, WithholdsPingsWhileStalledAndReportsOnce) {
  WatchdogGate g(100ms);
  auto t = WatchdogGate::Clock::time_point{} + 1s;
  EXPECT_EQ(g.check(7, t), V::kPing);
  EXPECT_EQ(g.check(7, t + 100ms), V::kStalled);
  EXPECT_EQ(g.check(7, t + 110ms), V::kWait);
  EXPECT_EQ(g.check(7, t + 500ms), V::kWait);
  EXPECT_EQ(g.check(8, t + 510ms), V::kPing);  // progress again: pings resume
  EXPECT_EQ(g.check(8, t + 610ms), V::kStalled);
}

TEST(WatchdogGate, DisabledWithoutAPeriod) {
  WatchdogGate g(0ms);
  auto t = WatchdogGate::Clock::time_point{} + 1s;
  EXPECT_EQ(g.check(1, t), V::kWait);
  EXPECT_EQ(g.check(2, t + 1h), V::kWait);
}

}  // namespace
}  // namespace cleave::dp
