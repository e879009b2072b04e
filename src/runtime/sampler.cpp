#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/finite.h"

namespace tetra {
namespace {

double log_sum_exp(std::span<const float> logits) {
  const float peak = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - peak);
  return peak + std::log(sum);
}

// Indices ordered by value, highest first; ties go to the lower id so the order is reproducible.
std::vector<int32_t> ranked(std::span<const float> values, size_t keep) {
  std::vector<int32_t> ids(values.size());
  std::iota(ids.begin(), ids.end(), 0);
  keep = std::min(keep, ids.size());
  const auto better = [&](int32_t a, int32_t b) { return values[size_t(a)] > values[size_t(b)] || (values[size_t(a)] == values[size_t(b)] && a < b); };
  std::partial_sort(ids.begin(), ids.begin() + long(keep), ids.end(), better);
  ids.resize(keep);
  return ids;
}

}  // namespace

float token_logprob(std::span<const float> logits, int32_t id) {
  return float(double(logits[size_t(id)]) - log_sum_exp(logits));
}

std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int64_t k) {
  const double norm = log_sum_exp(logits);
  std::vector<std::pair<int32_t, float>> out;
  for (int32_t id : ranked(logits, size_t(k))) out.emplace_back(id, float(double(logits[size_t(id)]) - norm));
  return out;
}

Sampler::Sampler(SamplingParams params, std::span<const int32_t> prompt, uint64_t fallback_seed,
                 std::unique_ptr<TokenConstraint> constraint)
    : params_(std::move(params)), constraint_(std::move(constraint)), rng_(params_.seed.value_or(fallback_seed)) {
  for (int32_t id : prompt) {
    if (size_t(id) >= is_seen_.size()) is_seen_.resize(size_t(id) + 1, false);
    if (!is_seen_[size_t(id)]) {
      is_seen_[size_t(id)] = true;
      seen_.push_back(id);
    }
  }
}

void Sampler::apply_penalties(std::vector<float>& logits) const {
  if (params_.repetition_penalty != 1.0) {
    const auto p = float(params_.repetition_penalty);
    for (int32_t id : seen_) {
      float& l = logits[size_t(id)];
      l = l > 0 ? l / p : l * p;
    }
  }
  for (const auto& [id, count] : generated_counts_)
    logits[size_t(id)] -= float(params_.frequency_penalty * double(count) + params_.presence_penalty);
  for (const auto& [id, bias] : params_.logit_bias) logits[size_t(id)] += bias;
}

int32_t Sampler::draw(const std::vector<float>& logits) {
  if (params_.temperature <= 0) return ranked(logits, 1)[0];
  const size_t vocab = logits.size();
  const size_t k = params_.top_k > 0 ? std::min(vocab, size_t(params_.top_k)) : vocab;
  const std::vector<int32_t> candidates = ranked(logits, k);

  // Probabilities of the top-k candidates at this temperature, best first.
  const double peak = logits[size_t(candidates[0])];
  std::vector<double> probs(candidates.size());
  double total = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    probs[i] = std::exp((double(logits[size_t(candidates[i])]) - peak) / params_.temperature);
    total += probs[i];
  }
  size_t kept = candidates.size();
  if (params_.top_p < 1.0) {  // the smallest prefix whose mass reaches top_p
    double mass = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      mass += probs[i] / total;
      if (mass >= params_.top_p) {
        kept = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0) {  // drop tokens below min_p times the best one
    const double floor = params_.min_p * probs[0];
    while (kept > 1 && probs[kept - 1] < floor) --kept;
  }
  while (kept > 1 && probs[kept - 1] == 0) --kept;  // masked tokens (-inf) are never drawn
  const double kept_total = std::accumulate(probs.begin(), probs.begin() + long(kept), 0.0);
  // 53 random bits as a double in [0, 1): the same on every platform, unlike std distributions.
  const double u = double(rng_() >> 11) * 0x1.0p-53 * kept_total;
  double acc = 0;
  for (size_t i = 0; i < kept; ++i) {
    acc += probs[i];
    if (u < acc) return candidates[i];
  }
  return candidates[kept - 1];
}

SampledToken Sampler::sample(std::span<const float> logits) {
  // Sampling NaN or infinite logits would pick some token and carry on as if the model had
  // answered (an H200 build once decoded V4-Flash to all-NaN logits: docs/cuda.md, "PDL").
  if (const int64_t bad = count_nonfinite(logits))
    runtime_error("the model computed logits that are not finite (", bad, " of ", logits.size(),
                  " are NaN or infinite)");
  std::vector<float> adjusted(logits.begin(), logits.end());
  apply_penalties(adjusted);
  if (constraint_) constraint_->mask(adjusted);
  SampledToken out;
  out.id = draw(adjusted);
  if (constraint_) constraint_->advance(out.id);
  out.logprob = token_logprob(logits, out.id);
  if (params_.top_logprobs > 0) out.top = top_logprobs(logits, params_.top_logprobs);
  ++generated_counts_[out.id];
  if (size_t(out.id) >= is_seen_.size()) is_seen_.resize(size_t(out.id) + 1, false);
  if (!is_seen_[size_t(out.id)]) {
    is_seen_[size_t(out.id)] = true;
    seen_.push_back(out.id);
  }
  return out;
}

}  // namespace tetra
