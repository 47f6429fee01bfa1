// errors_test.cc - errors at the app ABI (errors.h): the CL_E* codes are pinned to their errno
// values at compile time; here, the one status a completion does not carry as it is.
#include <gtest/gtest.h>

#include <cerrno>

#include "errors.h"

namespace cleave::dp {
namespace {

TEST(Errors, ACompletionCarriesTheErrnoButATruncatedReceive) {
  EXPECT_EQ(completion_status(0, true), CL_OK);
  EXPECT_EQ(completion_status(-ECONNRESET, true), CL_ECONNRESET);
  EXPECT_EQ(completion_status(-ECANCELED, false), CL_ECANCELED);
  EXPECT_EQ(completion_status(-EMSGSIZE, true), CL_ETRUNC);
  EXPECT_EQ(completion_status(-EMSGSIZE, false), -EMSGSIZE) << "only a receive is truncated";
}

}  // namespace
}  // namespace cleave::dp
