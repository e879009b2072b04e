// The sampler on hand-made logits: each parameter changes the choice the way it should, and a
// seed fixes the random stream.
#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "core/error.h"
#include "core/finite.h"

namespace tetra {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 0.0f};

std::vector<int32_t> draw_many(SamplingParams p, int n, std::span<const int32_t> prompt = {}) {
  Sampler s(p, prompt, 7);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) out.push_back(s.sample(kLogits).id);
  return out;
}

TEST(Sampler, GreedyTakesTheArgmaxAndLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(draw_many(p, 3), (std::vector<int32_t>{1, 1, 1}));
  Sampler tie(p, {}, 1);
  EXPECT_EQ(tie.sample(std::vector<float>{0.5f, 2.0f, 2.0f}).id, 1);
}

// Garbage logits are an error naming how many values were bad, never a token: greedy or not.
TEST(Sampler, NonFiniteLogitsAreAnErrorNotAToken) {
  EXPECT_EQ(count_nonfinite(kLogits), 0);
  const std::vector<float> nan = {1.0f, NAN, 2.0f, INFINITY, -INFINITY};
  EXPECT_EQ(count_nonfinite(nan), 3);
  for (const double temperature : {0.0, 1.0}) {
    SamplingParams p;
    p.temperature = temperature;
    Sampler s(p, {}, 1);
    try {
      s.sample(nan);
      ADD_FAILURE() << "a token was sampled from non-finite logits at temperature " << temperature;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::runtime);
      EXPECT_NE(std::string(e.what()).find("not finite (3 of 5"), std::string::npos) << e.what();
    }
    const int32_t next = s.sample(kLogits).id;  // the sampler goes on with the next logits
    if (temperature == 0) EXPECT_EQ(next, 1);
    else EXPECT_LT(size_t(next), kLogits.size());
  }
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferentTokens) {
  SamplingParams p;
  p.seed = 42;
  const auto a = draw_many(p, 64), b = draw_many(p, 64);
  EXPECT_EQ(a, b);
  p.seed = 43;
  EXPECT_NE(a, draw_many(p, 64));
}

TEST(Sampler, FrequenciesFollowTheSoftmax) {
  SamplingParams p;
  p.seed = 3;
  std::map<int32_t, int> counts;
  for (int32_t id : draw_many(p, 20000)) ++counts[id];
  double z = 0;
  for (float l : kLogits) z += std::exp(double(l));
  for (int32_t id = 0; id < 5; ++id) EXPECT_NEAR(counts[id] / 20000.0, std::exp(double(kLogits[size_t(id)])) / z, 0.015) << id;
}

TEST(Sampler, TopKTopPAndMinPRestrictTheCandidates) {
  SamplingParams p;
  p.seed = 5;
  p.top_k = 2;
  for (int32_t id : draw_many(p, 500)) EXPECT_TRUE(id == 1 || id == 2);
  p = {};
  p.seed = 5;
  p.top_p = 0.3;  // the best token alone holds more than 30%
  for (int32_t id : draw_many(p, 200)) EXPECT_EQ(id, 1);
  p = {};
  p.seed = 5;
  p.min_p = 0.5;  // exp(2.5-3) = 0.61 of the best passes, exp(1-3) = 0.14 does not
  for (int32_t id : draw_many(p, 500)) EXPECT_TRUE(id == 1 || id == 2);
}

TEST(Sampler, LogitBiasAndPenaltiesMoveTheChoice) {
  SamplingParams p;
  p.temperature = 0;
  p.logit_bias = {{4, 10.0f}};
  EXPECT_EQ(draw_many(p, 1)[0], 4);
  p = {};
  p.temperature = 0;
  p.frequency_penalty = 1.0;  // 3.0 → 2.0 after one use: token 2 (2.5) wins the second step
  EXPECT_EQ(draw_many(p, 2), (std::vector<int32_t>{1, 2}));
  p = {};
  p.temperature = 0;
  p.presence_penalty = 0.6;
  EXPECT_EQ(draw_many(p, 3), (std::vector<int32_t>{1, 2, 1}));  // 2.4 vs 1.9: back to token 1
  p = {};
  p.temperature = 0;
  p.repetition_penalty = 1.5;  // the prompt holds token 1: 3.0 / 1.5 = 2.0 < 2.5
  const std::vector<int32_t> prompt = {1};
  EXPECT_EQ(draw_many(p, 1, prompt)[0], 2);
}

TEST(Sampler, LogprobsAreTheRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0;
  p.top_logprobs = 2;
  p.logit_bias = {{0, 5.0f}};  // bias changes the choice, not the reported distribution
  Sampler s(p, {}, 1);
  const SampledToken t = s.sample(kLogits);
  double z = 0;
  for (float l : kLogits) z += std::exp(double(l));
  EXPECT_EQ(t.id, 0);
  EXPECT_NEAR(t.logprob, 1.0 - std::log(z), 1e-5);
  ASSERT_EQ(t.top.size(), 2u);
  EXPECT_EQ(t.top[0].first, 1);
  EXPECT_EQ(t.top[1].first, 2);
  EXPECT_NEAR(t.top[0].second, 3.0 - std::log(z), 1e-5);
}

// Allows the tokens of `allowed` (the bias has run before it) and records what it is told.
class AllowOnly : public TokenConstraint {
 public:
  AllowOnly(std::vector<int32_t> allowed, std::vector<int32_t>& taken) : allowed_(std::move(allowed)), taken_(taken) {}
  void mask(std::span<float> logits) override {
    EXPECT_EQ(logits[4], kLogits[4] + 10.0f);
    for (size_t id = 0; id < logits.size(); ++id)
      if (std::find(allowed_.begin(), allowed_.end(), int32_t(id)) == allowed_.end()) logits[id] = -INFINITY;
  }
  void advance(int32_t token) override { taken_.push_back(token); }
  bool complete() const override { return taken_.size() >= 3; }

 private:
  std::vector<int32_t> allowed_;
  std::vector<int32_t>& taken_;
};

// Masked tokens are never drawn at any temperature or truncation; the logprobs stay the model's.
TEST(Sampler, AConstraintMasksAfterTheBiasAndLearnsEachToken) {
  for (const double temperature : {0.0, 0.7, 2.0})
    for (const int64_t top_k : {0, 5}) {
      SamplingParams p;
      p.temperature = temperature;
      p.top_k = top_k;
      p.logprobs = true;
      p.logit_bias = {{4, 10.0f}};
      std::vector<int32_t> taken;
      Sampler s(p, {}, 3, std::make_unique<AllowOnly>(std::vector<int32_t>{0, 3}, taken));
      std::vector<int32_t> drawn;
      while (!s.constraint_complete()) {
        const SampledToken t = s.sample(kLogits);
        EXPECT_TRUE(t.id == 0 || t.id == 3) << t.id;
        EXPECT_NEAR(t.logprob, token_logprob(kLogits, t.id), 1e-6);
        drawn.push_back(t.id);
      }
      EXPECT_EQ(drawn, taken);
      if (temperature == 0) {
        EXPECT_EQ(drawn, (std::vector<int32_t>{0, 0, 0}));
      }
    }
  EXPECT_FALSE(Sampler(SamplingParams{}, {}, 1).constraint_complete());
  // A constraint that allows nothing is an error, not some token.
  for (const double temperature : {0.0, 1.0}) {
    SamplingParams p;
    p.temperature = temperature;
    std::vector<int32_t> taken;
    p.logit_bias = {{4, 10.0f}};
    Sampler none(p, {}, 3, std::make_unique<AllowOnly>(std::vector<int32_t>{}, taken));
    EXPECT_THROW(none.sample(kLogits), Error) << temperature;
  }
}

// A token's logprob costs a pass over the vocabulary: computed when asked for (logprobs, or
// top_logprobs), and then the model's log-softmax.
TEST(Sampler, LogprobsOnlyWhenAskedFor) {
  SamplingParams p;
  p.seed = 1;
  const SampledToken plain = Sampler(p, {}, 1).sample(kLogits);
  EXPECT_EQ(plain.logprob, 0.0f);
  EXPECT_TRUE(plain.top.empty());
  p.logprobs = true;
  const SampledToken asked = Sampler(p, {}, 1).sample(kLogits);
  EXPECT_EQ(asked.id, plain.id);  // the same draw
  EXPECT_NEAR(asked.logprob, token_logprob(kLogits, asked.id), 1e-6);
  EXPECT_LT(asked.logprob, 0.0f);
}

// A nucleus of more tokens than the first ranked prefix (256) takes the next: 1000 equal
// tokens (every fifth id) in a vocabulary of 5000, the rest far below; top_p 0.5 keeps the 500
// of them with the lowest ids (ties rank by id), and the draws spread evenly over them.
TEST(Sampler, TopPOverALargeVocabularyKeepsTheWholeNucleus) {
  std::vector<float> logits(5000, -40.0f);
  for (size_t id = 3; id < logits.size(); id += 5) logits[id] = 0.0f;
  SamplingParams p;
  p.seed = 11;
  p.top_p = 0.5;
  Sampler s(p, {}, 1);
  std::map<int32_t, int> counts;
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const int32_t id = s.sample(logits).id;
    ASSERT_EQ(id % 5, 3) << id;
    ASSERT_LT(id, 2500) << id;  // the 500 lowest of the equal ids: 3, 8, ..., 2498
    ++counts[id];
  }
  EXPECT_EQ(counts.size(), 500u) << "every token of the nucleus is drawn";
  for (const auto& [id, n] : counts) EXPECT_NEAR(n, draws / 500.0, 25) << id;
}

}  // namespace
}  // namespace tetra
