// tetra bench on the GPU at a geometry the small models of the other GPU tests do not reach:
// V4-Flash's attention (64 heads of 512, o_groups 8, the indexer's 64 heads and top 512) and
// hidden size with 16 experts and 4 layers (tests/data/v4_flash_attention: 1.6 GB of NVFP4
// weights), once with plain kernel launches and once with early ones (PDL, TETRA_CUDA_PDL=1).
// Every point of both runs must compute finite logits (the command fails otherwise), and the
// early launches the plain ones' bits: a kernel that reads its input before the kernel ahead has
// written it computes other bits, or NaN as the FP8 linears once did on the H200 while the small
// models stayed exact (docs/cuda.md, "PDL").
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli/cli_runner.h"
#include "support/cuda_parity.h"

namespace tetra {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// The JSON of `tetra bench` on the geometry with TETRA_CUDA_PDL=pdl; an empty object (and a
// failure naming the output) when the command fails.
json bench_with_launches(const std::string& pdl, const fs::path& dir) {
  const fs::path out = dir / ("bench_pdl" + pdl + ".json");
  const std::string geometry = std::string(TETRA_SOURCE_DIR) + "/tests/data/v4_flash_attention";
  // contexts inside the window, and past it with compressed entries of both kinds
  const auto r = testing::run_command("TETRA_CUDA_PDL=" + pdl + " " + TETRA_BINARY + " bench --synthetic " + geometry +
                                      " --batch 1 4 --context 21 600 --prefill 300 --steps 2 --json " + out.string());
  EXPECT_EQ(r.exit_code, 0) << "TETRA_CUDA_PDL=" << pdl << ":\n" << r.output;
  if (r.exit_code != 0) return json::object();
  std::ifstream in(out);
  return json::parse(in);
}

TEST(CudaBench, V4FlashAttentionEarlyLaunchesComputeThePlainLaunchesBits) {
  TETRA_REQUIRE_GPU();
  const fs::path dir = fs::temp_directory_path() / ("tetra_cuda_bench_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const json plain = bench_with_launches("0", dir), early = bench_with_launches("1", dir);
  fs::remove_all(dir);
  ASSERT_FALSE(plain.empty() || early.empty());
  EXPECT_EQ(plain["device"]["kernel_launches"], "plain");
  EXPECT_EQ(early["device"]["kernel_launches"], "early (PDL)");
  ASSERT_EQ(plain["decode"].size(), 4u);
  ASSERT_EQ(early["decode"].size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const json &p = plain["decode"][i], &e = early["decode"][i];
    const std::string point = "batch " + p["batch"].dump() + ", context " + p["context"].dump();
    EXPECT_TRUE(p["error"].is_null()) << point << ": " << p["error"];
    EXPECT_TRUE(e["error"].is_null()) << point << ": " << e["error"];
    EXPECT_EQ(p["logits_digest"], e["logits_digest"]) << point;
  }
  ASSERT_TRUE(plain["prefill"].is_object() && early["prefill"].is_object());
  EXPECT_TRUE(plain["prefill"]["error"].is_null()) << plain["prefill"]["error"];
  EXPECT_TRUE(early["prefill"]["error"].is_null()) << early["prefill"]["error"];
  EXPECT_EQ(plain["prefill"]["logits_digest"], early["prefill"]["logits_digest"]);
}

}  // namespace
}  // namespace tetra
