// Synthetic models for `tetra bench`: the published formats per role, well-scaled values that
// decode exactly like checkpoint tensors, shared host buffers, and sequences sized to a context
// without running it (Model::resize, what the bench times decode steps with), run through the
// CPU reference forward.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "backend/backend.h"
#include "bench/synthetic_weights.h"
#include "model/forward.h"
#include "support/tiny_checkpoint.h"

namespace tetra::bench {
namespace {

ModelConfig tiny() {
  ModelConfig c = testing::tiny_config();  // layers: sliding, CSA (4), HCA (8), CSA; hash layer 0
  c.n_mtp_layers = 0;
  return c;
}

double rms(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s / double(v.size()));
}

TEST(SyntheticWeights, FormatsFollowThePublishedCheckpoints) {
  for (SyntheticFormat f : {SyntheticFormat::nvfp4, SyntheticFormat::mxfp4_fp8}) {
    const bool nv = f == SyntheticFormat::nvfp4;
    EXPECT_EQ(synthetic_weight_format("layers.3.ffn.experts.7.w2", f), nv ? WeightFormat::nvfp4 : WeightFormat::mxfp4);
    for (const char* role : {"layers.0.attn.wq_a", "layers.0.attn.wq_b", "layers.0.attn.wkv", "layers.0.attn.wo_a",
                             "layers.0.attn.wo_b", "layers.0.ffn.shared_experts.w1", "layers.2.attn.indexer.wq_b"})
      EXPECT_EQ(synthetic_weight_format(role, f), nv ? WeightFormat::fp8_tensor : WeightFormat::fp8_block) << role;
    for (const char* role : {"head", "layers.0.ffn.gate", "layers.2.attn.compressor.wkv",
                             "layers.2.attn.indexer.compressor.wgate", "layers.2.attn.indexer.weights_proj"})
      EXPECT_EQ(synthetic_weight_format(role, f), WeightFormat::dense) << role;
  }
}

TEST(SyntheticWeights, WellScaledSharedAndCountedRight) {
  const ModelConfig c = tiny();
  for (SyntheticFormat f : {SyntheticFormat::nvfp4, SyntheticFormat::mxfp4_fp8}) {
    const SyntheticWeights s(c, f, 3);
    const ModelWeights& w = s.weights();
    uint64_t total = 0;
    std::set<WeightFormat> seen;
    for (const LinearWeight* l : w.linears()) {
      total += l->bytes();
      seen.insert(l->format);
      EXPECT_EQ(l->format, synthetic_weight_format(l->role, f)) << l->role;
      // every format decodes to values of standard deviation 1/sqrt(fan_in)
      const double ratio = rms(dequantize(*l)) * std::sqrt(double(l->in));
      EXPECT_GT(ratio, 0.8) << l->role;
      EXPECT_LT(ratio, 1.25) << l->role;
    }
    EXPECT_EQ(seen.size(), 3u);  // dense, FP8, FP4
    for (const ParamWeight* p : w.params()) total += 4 * uint64_t(p->view.numel());
    EXPECT_EQ(total, synthetic_model_bytes(c, f));
    // tensors of one shape and format view one host buffer
    EXPECT_EQ(w.linear("layers.1.ffn.experts.0.w1").weight.data, w.linear("layers.3.ffn.experts.2.w1").weight.data);
    EXPECT_LT(s.host_bytes(), total);
  }
  const SyntheticWeights s(c, SyntheticFormat::nvfp4, 3);
  const std::vector<float> table = to_f32(s.weights().param("layers.0.ffn.gate.tid2eid").view);
  for (int64_t t = 0; t < c.vocab_size; ++t) {
    std::set<float> experts(table.begin() + t * c.n_activated_experts, table.begin() + (t + 1) * c.n_activated_experts);
    EXPECT_EQ(int64_t(experts.size()), c.n_activated_experts) << "token " << t;
    EXPECT_GE(*experts.begin(), 0);
    EXPECT_LT(*experts.rbegin(), c.n_routed_experts);
  }
  EXPECT_FALSE(s.weights().has_param("layers.0.ffn.gate.bias"));  // hash layers have none
  EXPECT_TRUE(s.weights().has_param("layers.1.ffn.gate.bias"));
  // no random router bias: it would pick the same experts for every token of a batch
  for (const float b : to_f32(s.weights().param("layers.1.ffn.gate.bias").view)) EXPECT_EQ(b, 0.0f);
}

TEST(SyntheticState, ResizedSequencesHoldTheirContextsBlocksAndDecode) {
  const ModelConfig c = tiny();
  const SyntheticWeights s(c, SyntheticFormat::nvfp4, 5);
  const auto be = make_backend("cpu");
  Model model(c, s.weights(), *be, CacheTypes{});
  for (int64_t context : {0, 3, 21, 300}) {
    SequenceState state = model.new_sequence();
    model.resize(state, context);
    EXPECT_EQ(state.length, context);
    EXPECT_EQ(state.cache()->blocks_held(state.slot()), model.cache_layout().blocks_for(context, c.n_layers))
        << "context " << context;
    // Decode steps continue it, taking blocks as compressed entries complete.
    for (int step = 0; step < 9; ++step) {
      const auto out = model.step({&state}, {{int32_t(step + 2)}});
      for (float x : be->download(out.logits)) ASSERT_TRUE(std::isfinite(x)) << "context " << context << ", step " << step;
    }
    EXPECT_EQ(state.length, context + 9);
    EXPECT_GE(state.cache()->blocks_held(state.slot()), model.cache_layout().blocks_for(context + 9, c.n_layers));
  }
}

TEST(SyntheticState, RoomForTheTimedStepsTakesNoBlocksLater) {
  const ModelConfig c = tiny();
  const SyntheticWeights s(c, SyntheticFormat::nvfp4, 5);
  const auto be = make_backend("cpu");
  Model model(c, s.weights(), *be, CacheTypes{});
  constexpr int64_t kContext = 300, kRoom = 9;
  SequenceState state = model.new_sequence();
  model.resize(state, kContext, kRoom);
  EXPECT_EQ(state.length, kContext);
  const int64_t held = state.cache()->blocks_held(state.slot());
  EXPECT_EQ(held, model.cache_layout().blocks_for(kContext + kRoom, c.n_layers));
  const uint64_t generation = state.cache()->generation();
  for (int step = 0; step < kRoom; ++step) model.step({&state}, {{int32_t(step + 2)}});
  EXPECT_EQ(state.cache()->blocks_held(state.slot()), held);
  EXPECT_EQ(state.cache()->generation(), generation) << "the block tables moved during the steps";
}

}  // namespace
}  // namespace tetra::bench
