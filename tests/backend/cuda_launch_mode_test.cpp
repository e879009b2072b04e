// The run-time choice of early kernel launches (launch_mode.h; host code, runs without a GPU).
// The choice is read once per process, and ctest runs each case in a process of its own.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "backend/cuda/launch_mode.h"
#include "core/error.h"

namespace tetra {
namespace {

// A value other than 0 or 1 is an error naming the variable and the value (and is not taken
// as a choice: the next read looks again); 1 turns the early launches on in any build.
TEST(CudaLaunchMode, EnvironmentChoosesEarlyLaunches) {
  ASSERT_EQ(::setenv("TETRA_CUDA_PDL", "yes", 1), 0);
  try {
    cuda::early_launches();
    FAIL() << "TETRA_CUDA_PDL=yes was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("TETRA_CUDA_PDL"), std::string::npos) << what;
    EXPECT_NE(what.find("'yes'"), std::string::npos) << what;
  }
  ASSERT_EQ(::setenv("TETRA_CUDA_PDL", "1", 1), 0);
  EXPECT_TRUE(cuda::early_launches());
  ASSERT_EQ(::setenv("TETRA_CUDA_PDL", "0", 1), 0);
  EXPECT_TRUE(cuda::early_launches()) << "read once: a process keeps its first choice";
}

}  // namespace
}  // namespace tetra
