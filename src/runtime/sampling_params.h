#pragma once
// What a request asks of the sampler: the OpenAI / vLLM sampling parameters.
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tetra {

struct SamplingParams {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: off
  double top_p = 1.0;
  double min_p = 0.0;
  double presence_penalty = 0.0;    // generated tokens only (OpenAI)
  double frequency_penalty = 0.0;   // generated tokens only (OpenAI)
  double repetition_penalty = 1.0;  // prompt and generated tokens (HF / vLLM)
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;  // none: a fresh random seed
  bool logprobs = false;         // report each token's logprob (a pass over the vocabulary a token)
  int64_t top_logprobs = 0;      // alternatives reported per token (their logprobs and the token's too)
};

}  // namespace tetra
