// tetra bench on the GPU at a geometry the small models of the other GPU tests do not reach:
// V4-Flash's attention (64 heads of 512, o_groups 8, the indexer's 64 heads and top 512) and
// hidden size with 16 experts and 4 layers (tests/data/v4_flash_attention: 1.6 GB of NVFP4
// weights). Every point must compute finite logits: early-launched kernels (PDL) once decoded
// this geometry all-NaN on the H200 while the small models stayed exact (docs/cuda.md, "PDL").
#include <gtest/gtest.h>

#include <sstream>

#include "bench/bench_runner.h"
#include "support/cuda_parity.h"

namespace tetra {
namespace {

TEST(CudaBench, V4FlashAttentionDecodesFiniteLogits) {
  TETRA_REQUIRE_GPU();
  bench::BenchOptions o;
  o.geometry = std::string(TETRA_SOURCE_DIR) + "/tests/data/v4_flash_attention";
  o.batches = {1, 4};
  o.contexts = {21, 600};  // inside the window; past it, with compressed entries of both kinds
  o.prefill = 300;
  o.steps = 2;
  std::ostringstream log;
  const bench::BenchReport r = bench::run_bench(o, log);
  EXPECT_EQ(r.nonfinite_points, 0) << log.str();
  ASSERT_EQ(r.decode.size(), 4u) << log.str();
  for (const auto& d : r.decode) EXPECT_EQ(d.error, "") << "batch " << d.batch << ", context " << d.context;
  ASSERT_TRUE(r.prefill.has_value());
  EXPECT_EQ(r.prefill->error, "");
}

}  // namespace
}  // namespace tetra
