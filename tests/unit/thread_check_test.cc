// thread_check_test.cc - thread ownership is checked, not only documented (thread_check.h): a
// call from a thread other than the owner aborts with what was called, in debug and sanitizer
// builds; the thread that polls the app path owns it.
#include <gtest/gtest.h>

#include <thread>

#include "lcore/apps.h"
#include "thread_check.h"

namespace cleave::dp {
namespace {

// Runs `f` on a thread of its own and waits for it.
template <class F>
void on_another_thread(F&& f) {
  std::thread t(std::forward<F>(f));
  t.join();
}

class ThreadCheck : public testing::Test {
 protected:
  void SetUp() override {
    if (!kDatapathChecks) GTEST_SKIP() << "a release build: kDatapathChecks is off";
    GTEST_FLAG_SET(death_test_style, "threadsafe");
  }
};

TEST_F(ThreadCheck, TheOwnerPassesAndAnotherThreadTrips) {
  ThreadOwner owner("dataplane lcore");
  on_another_thread([&] { owner.check("before any bind"); });  // nobody owns it yet
  owner.bind();
  owner.check("the owner");
  EXPECT_DEATH(on_another_thread([&] { owner.check("FlowPath::listen"); }),
               "cleaved: FlowPath::listen called off the dataplane lcore thread");
}

TEST_F(ThreadCheck, AppPathBelongsToTheThreadThatPollsIt) {
  AppPath path(4, 32, 1'000'000);
  DpApp app;
  app.id = 1;
  path.poll(1);  // this thread drives the loop: it owns the app path
  EXPECT_TRUE(path.attach(&app, 1));
  EXPECT_DEATH(on_another_thread([&] { path.detach(1); }),
               "AppPath::detach called off the dataplane lcore thread");
  // Another thread that takes over the loop owns it from then on, and this one may not call in.
  on_another_thread([&] {
    path.poll(2);
    EXPECT_EQ(path.find(1), &app);
  });
  EXPECT_DEATH(path.set_mr(1, 0, DpMr{}), "AppPath::set_mr called off the dataplane lcore thread");
  path.poll(3);
  EXPECT_EQ(path.detach(1), &app);
}

}  // namespace
}  // namespace cleave::dp
