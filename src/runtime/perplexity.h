#pragma once
// Perplexity of a token stream, as llama.cpp's perplexity tool measures it: the stream is cut
// into consecutive windows of `context` tokens, each window runs from an empty sequence, and
// every token after a window's first is scored by the model's log-probability given the
// tokens before it in that window.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/forward.h"

namespace tetra {

struct WindowScore {
  int64_t tokens_scored = 0;
  double nll_sum = 0;  // sum of -log p(token | window prefix), natural log
  std::vector<double> token_nlls;  // each scored token's -log p, in order
};

// Consecutive windows of `context` tokens; the last may be shorter, and is dropped when it has
// fewer than 2 tokens (it would score nothing). `context` must be at least 2.
std::vector<std::span<const int32_t>> split_windows(std::span<const int32_t> ids, int64_t context);

// -log p(token t | tokens < t) for t = 1 .. size-1, from one prefill of `logits` rows
// [size, vocab] (row t predicts token t+1); computed in double.
std::vector<double> token_nlls(std::span<const float> logits, std::span<const int32_t> window, int64_t vocab);

// Runs `window` through a fresh sequence in one prefill step and scores it.
WindowScore score_window(Model& model, Backend& backend, std::span<const int32_t> window);

// exp(total nll / total tokens scored).
double perplexity(std::span<const WindowScore> windows);

}  // namespace tetra
