// The CPU reference router: top-k by score, tied scores to the lower expert index (the order the
// CUDA router keeps; the GPU tests compare the two on tied logits).
#include <gtest/gtest.h>

#include <vector>

#include "backend/backend.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {

TEST(CpuRoute, TiesGoToTheLowerExpert) {
  ModelConfig c = testing::tiny_config();
  c.n_routed_experts = 8;
  c.n_activated_experts = 3;
  c.scoring = ScoringFunc::sigmoid;
  auto be = make_backend("cpu");
  // experts 1, 2, 4, 5 and 7 tie at the top; 6 is just below
  const std::vector<float> logits{0.5f, 1.0f, 1.0f, 0.2f, 1.0f, 1.0f, 0.9f, 1.0f};
  const Routing r = be->route(be->upload(logits, {1, 8}), nullptr, nullptr, be->upload_i32(std::vector<int32_t>{0}, {1}), c);
  EXPECT_EQ(be->download_i32(r.experts), (std::vector<int32_t>{1, 2, 4}));
  const std::vector<float> weights = be->download(r.weights);
  ASSERT_EQ(weights.size(), 3u);
  EXPECT_EQ(weights[0], weights[1]);
  EXPECT_EQ(weights[1], weights[2]);
  // a bias breaks the tie: expert 7 first, then 1 and 2
  std::vector<float> bias(8, 0.0f);
  bias[7] = 0.25f;
  const Tensor bias_tensor = be->upload(bias, {8});
  const Routing biased =
      be->route(be->upload(logits, {1, 8}), &bias_tensor, nullptr, be->upload_i32(std::vector<int32_t>{0}, {1}), c);
  EXPECT_EQ(be->download_i32(biased.experts), (std::vector<int32_t>{7, 1, 2}));
}

}  // namespace
}  // namespace tetra
