// The MTP block's forward (speculative-decoding draft head): no peer implementation runs it
// (transformers drops the MTP weights), so these tests check its own consistency: the same
// tokens give the same draft logits whether the sequence arrives in one step or in pieces, and
// the block really uses its own weights.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "model/forward.h"
#include "support/tiny_model.h"

namespace tetra {
namespace {

// Draft logits of every position for `tokens`, fed to the model in chunks of `chunk` tokens.
std::vector<float> mtp_logits_in_chunks(Model& model, Backend& backend, const std::vector<int32_t>& tokens,
                                        size_t chunk) {
  SequenceState s = model.new_sequence();
  std::vector<float> all;
  // Position i's draft needs token i+1, so the last token only feeds the main model.
  for (size_t from = 0; from + 1 < tokens.size(); from += chunk) {
    const size_t to = std::min(tokens.size() - 1, from + chunk);
    const std::vector<int32_t> step(tokens.begin() + long(from), tokens.begin() + long(to));
    const std::vector<int32_t> next(tokens.begin() + long(from) + 1, tokens.begin() + long(to) + 1);
    const auto out = model.step({&s}, {step});
    const auto draft = backend.download(model.mtp_logits(0, {&s}, out.hidden, {next}));
    all.insert(all.end(), draft.begin(), draft.end());
  }
  return all;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(Mtp, ChunkedAndWholeSequencesGiveTheSameDraftLogits) {
  testing::TinyCheckpointOptions o;
  o.with_mtp = true;
  const testing::TinyModel tiny(o);
  const ModelConfig& config = tiny.config;
  const ModelWeights& weights = *tiny.weights;
  ASSERT_TRUE(weights.has_mtp());
  const auto backend = make_backend("cpu");
  Model model(config, weights, *backend, CacheTypes{KvCacheDtype::f32, IndexerCacheDtype::f32});

  std::vector<int32_t> tokens;
  for (int i = 0; i < 30; ++i) tokens.push_back(int32_t((i * 37 + 11) % config.vocab_size));  // > 3 windows
  const auto whole = mtp_logits_in_chunks(model, *backend, tokens, tokens.size());
  ASSERT_EQ(whole.size(), (tokens.size() - 1) * size_t(config.vocab_size));
  for (size_t chunk : {1u, 5u}) EXPECT_LT(relative_difference(mtp_logits_in_chunks(model, *backend, tokens, chunk), whole), 1e-5) << chunk;

  // The draft differs from the main model's next-token logits: it predicts one token further
  // with its own block and head.
  SequenceState s = model.new_sequence();
  const auto main_logits = backend->download(
      model.step({&s}, {std::vector<int32_t>(tokens.begin(), tokens.end() - 1)}).logits);
  EXPECT_GT(relative_difference(main_logits, whole), 1e-2);
}

TEST(Mtp, MissingBlockIsAClearError) {
  const testing::TinyModel tiny;
  const auto backend = make_backend("cpu");
  Model model(tiny.config, *tiny.weights, *backend, CacheTypes{});
  SequenceState s = model.new_sequence();
  const auto out = model.step({&s}, {{1, 2, 3}});
  EXPECT_THROW(model.mtp_logits(0, {&s}, out.hidden, {{2, 3, 4}}), Error);
}

}  // namespace
}  // namespace tetra
