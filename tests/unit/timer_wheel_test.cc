// timer_wheel_test.cc - deadlines, cancel, re-arm from a callback, stalls, far deadlines.
#include <gtest/gtest.h>

#include <vector>

#include "timer_wheel.h"

namespace cleave {
namespace {

struct Probe {
  Timer t;
  std::vector<uint64_t>* log = nullptr;
  uint64_t* now = nullptr;
  uint64_t rearm = 0;  // re-arm for this many cycles when fired
  TimerWheel* wheel = nullptr;

  static void fire(Timer* t, void* arg) {
    auto* p = static_cast<Probe*>(arg);
    p->log->push_back(*p->now);
    if (p->rearm != 0) p->wheel->arm(t, p->rearm);
  }
};

class TimerWheelTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kTick = 100;  // cycles per tick
  TimerWheel wheel{kTick, 0, 64};
  uint64_t now = 0;
  std::vector<uint64_t> fired;

  Probe make() {
    Probe p;
    p.t.fn = Probe::fire;
    p.log = &fired;
    p.now = &now;
    p.wheel = &wheel;
    return p;
  }
  unsigned advance_to(uint64_t t) {
    now = t;
    return wheel.advance(t);
  }
};

TEST_F(TimerWheelTest, FiresAtDeadlineNotBefore) {
  Probe p = make();
  p.t.arg = &p;
  wheel.arm(&p.t, 250);  // rounds up to 3 ticks
  EXPECT_EQ(advance_to(299), 0u);
  EXPECT_TRUE(p.t.armed());
  EXPECT_EQ(advance_to(300), 1u);
  EXPECT_EQ(fired, std::vector<uint64_t>{300});
  EXPECT_FALSE(p.t.armed());
  EXPECT_EQ(wheel.armed_count(), 0u);
  EXPECT_EQ(advance_to(10000), 0u);
}

TEST_F(TimerWheelTest, ZeroDelayFiresOnNextTick) {
  Probe p = make();
  p.t.arg = &p;
  wheel.arm(&p.t, 0);
  EXPECT_EQ(advance_to(99), 0u);
  EXPECT_EQ(advance_to(100), 1u);
}

TEST_F(TimerWheelTest, CancelAndRearm) {
  Probe a = make(), b = make();
  a.t.arg = &a;
  b.t.arg = &b;
  wheel.arm(&a.t, 500);
  wheel.arm(&b.t, 500);
  wheel.cancel(&a.t);
  wheel.cancel(&a.t);     // twice is harmless
  wheel.arm(&b.t, 1000);  // re-arm moves it
  EXPECT_EQ(wheel.armed_count(), 1u);
  EXPECT_EQ(advance_to(900), 0u);
  EXPECT_EQ(advance_to(1000), 1u);
  EXPECT_EQ(fired, std::vector<uint64_t>{1000});
}

TEST_F(TimerWheelTest, DeadlinePastOneRevolution) {
  Probe p = make();
  p.t.arg = &p;
  wheel.arm(&p.t, 64 * kTick * 3 + 5 * kTick);  // three laps of a 64-slot wheel and then some
  for (uint64_t t = 0; t < 64 * kTick * 3 + 5 * kTick; t += kTick)
    ASSERT_EQ(advance_to(t), 0u) << t;
  EXPECT_EQ(advance_to(64 * kTick * 3 + 5 * kTick), 1u);
}

TEST_F(TimerWheelTest, LongStallFiresEverythingDueOnce) {
  std::vector<Probe> probes(20, make());
  for (size_t i = 0; i < probes.size(); i++) {
    probes[i].t.arg = &probes[i];
    wheel.arm(&probes[i].t, (i + 1) * 37 * kTick);  // spread over several laps
  }
  EXPECT_EQ(advance_to(1000000), 20u);
  EXPECT_EQ(wheel.armed_count(), 0u);
  EXPECT_EQ(advance_to(2000000), 0u);
}

TEST_F(TimerWheelTest, CallbackRearmsPeriodically) {
  Probe p = make();
  p.t.arg = &p;
  p.rearm = 200;
  wheel.arm(&p.t, 200);
  for (uint64_t t = 0; t <= 1000; t += 50)
    advance_to(t);
  EXPECT_EQ(fired, (std::vector<uint64_t>{200, 400, 600, 800, 1000}));
}

TEST_F(TimerWheelTest, CallbackMayCancelAnotherDueTimer) {
  struct Killer {
    Timer t;
    Timer* victim;
    TimerWheel* wheel;
    int fired = 0;
  } k{};
  Probe victim = make();
  victim.t.arg = &victim;
  k.victim = &victim.t;
  k.wheel = &wheel;
  k.t.fn = [](Timer*, void* arg) {
    auto* self = static_cast<Killer*>(arg);
    self->fired++;
    self->wheel->cancel(self->victim);
  };
  k.t.arg = &k;
  wheel.arm(&k.t, 100);
  wheel.arm(&victim.t, 100);  // same tick, after the killer
  EXPECT_EQ(advance_to(100), 1u);
  EXPECT_EQ(k.fired, 1);
  EXPECT_TRUE(fired.empty());
  EXPECT_EQ(wheel.armed_count(), 0u);
}

}  // namespace
}  // namespace cleave
