#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tetra {

std::vector<std::span<const int32_t>> split_windows(std::span<const int32_t> ids, int64_t context) {
  if (context < 2) usage_error("the context must be at least 2 tokens, got ", context);
  std::vector<std::span<const int32_t>> windows;
  for (size_t from = 0; from + 1 < ids.size(); from += size_t(context))
    windows.push_back(ids.subspan(from, std::min(size_t(context), ids.size() - from)));
  return windows;
}

std::vector<double> token_nlls(std::span<const float> logits, std::span<const int32_t> window, int64_t vocab) {
  std::vector<double> nlls;
  for (size_t t = 0; t + 1 < window.size(); ++t) {
    const std::span<const float> row = logits.subspan(t * size_t(vocab), size_t(vocab));
    const double top = *std::max_element(row.begin(), row.end());
    double sum = 0;
    for (const float z : row) sum += std::exp(double(z) - top);
    nlls.push_back(top + std::log(sum) - double(row[size_t(window[t + 1])]));
  }
  return nlls;
}

WindowScore score_window(Model& model, Backend& backend, std::span<const int32_t> window) {
  SequenceState state = model.new_sequence();
  const std::vector<float> logits =
      backend.download(model.step({&state}, {std::vector<int32_t>(window.begin(), window.end())}).logits);
  WindowScore score;
  score.token_nlls = token_nlls(logits, window, model.config().vocab_size);
  score.tokens_scored = int64_t(score.token_nlls.size());
  for (const double nll : score.token_nlls) score.nll_sum += nll;
  return score;
}

double perplexity(std::span<const WindowScore> windows) {
  double nll = 0;
  int64_t tokens = 0;
  for (const WindowScore& w : windows) {
    nll += w.nll_sum;
    tokens += w.tokens_scored;
  }
  return tokens ? std::exp(nll / double(tokens)) : std::nan("");
}

}  // namespace tetra
