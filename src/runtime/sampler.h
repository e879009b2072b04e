#pragma once
// Picks each next token of one sequence from its logits: penalties, logit bias, a token
// constraint (JSON mode), temperature, top-k / top-p / min-p, and a random stream of its own,
// so the same seed and request give the same tokens whatever else runs in the batch.
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/sampling_params.h"
#include "runtime/token_constraint.h"

namespace tetra {

struct SampledToken {
  int32_t id = 0;
  float logprob = 0;  // under the model's distribution (log-softmax of the raw logits), when asked for
  std::vector<std::pair<int32_t, float>> top;  // the top_logprobs most likely tokens, best first
};

class Sampler {
 public:
  // `prompt` feeds the repetition penalty; `fallback_seed` is used when params.seed is unset;
  // `constraint` (may be null) masks the logits after the penalties and bias.
  Sampler(SamplingParams params, std::span<const int32_t> prompt, uint64_t fallback_seed,
          std::unique_ptr<TokenConstraint> constraint = nullptr);

  // Chooses the next token and remembers it for the penalties and the constraint; logits that
  // are not all finite are a runtime error (no token comes from garbage).
  SampledToken sample(std::span<const float> logits);

  // Whether the constraint says the output is finished (never without one).
  bool constraint_complete() const { return constraint_ && constraint_->complete(); }

 private:
  void apply_penalties(std::vector<float>& logits) const;
  // Whether the frequency or presence penalty moves the tokens generated so far.
  bool penalizes_counts() const { return params_.frequency_penalty != 0 || params_.presence_penalty != 0; }
  int32_t draw(std::span<const float> logits);

  SamplingParams params_;
  std::unique_ptr<TokenConstraint> constraint_;
  std::mt19937_64 rng_;
  std::unordered_map<int32_t, int64_t> generated_counts_;
  std::vector<int32_t> seen_;  // prompt and generated ids, distinct (repetition penalty)
  std::vector<bool> is_seen_;
  // Scratch of a vocabulary's size, kept between draws: a fresh allocation of that size each
  // draw came from the kernel, zeroed page by page (a third of a draw's time).
  std::vector<float> adjusted_, weights_;
  std::vector<int32_t> order_;
};

// Log-softmax of the raw logits at `id` (what SampledToken::logprob reports).
float token_logprob(std::span<const float> logits, int32_t id);

}  // namespace tetra
