#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/finite.h"

namespace tetra {
namespace {

// log Σ exp(logit): the terms in f32 (a term's rounding is far below the float logprob's), their
// sum in f64.
double log_sum_exp(std::span<const float> logits) {
  const float peak = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(l - peak);
  return peak + std::log(sum);
}

// Whether token a ranks before token b: the higher value, ties to the lower id, so that every
// order below is reproducible.
struct Better {
  std::span<const float> values;
  bool operator()(int32_t a, int32_t b) const {
    const float x = values[size_t(a)], y = values[size_t(b)];
    return x > y || (x == y && a < b);
  }
};

// The `keep` best of `ids` to its front, best first, without sorting the rest (a vocabulary of
// 129k tokens is not sorted for a few of them): a heap of the few, or a selection, then a sort.
void rank_front(std::vector<int32_t>& ids, size_t keep, Better better) {
  keep = std::min(keep, ids.size());
  if (keep * 64 < ids.size()) {
    std::partial_sort(ids.begin(), ids.begin() + long(keep), ids.end(), better);
    return;
  }
  if (keep < ids.size()) std::nth_element(ids.begin(), ids.begin() + long(keep), ids.end(), better);
  std::sort(ids.begin(), ids.begin() + long(keep), better);
}

// The `keep` best token ids, best first.
std::vector<int32_t> ranked(std::span<const float> values, size_t keep) {
  std::vector<int32_t> ids(values.size());
  std::iota(ids.begin(), ids.end(), 0);
  rank_front(ids, keep, Better{values});
  ids.resize(std::min(keep, ids.size()));
  return ids;
}

// The nucleus of top_p: the smallest best-first prefix of `order` (positions in `weights`) whose
// share of `total` reaches top_p, ranked to `order`'s front in growing prefixes (a trained
// model's nucleus is a few hundred of its 129k tokens, not worth a sort of them all); its size.
size_t nucleus(std::vector<int32_t>& order, std::span<const float> weights, double total, double top_p) {
  const Better better{weights};  // (equal weights rank by position)
  for (size_t count = std::min<size_t>(256, order.size());; count = std::min(order.size(), count * 8)) {
    rank_front(order, count, better);
    double share = 0;
    size_t i = 0;
    while (i < count && (share += weights[size_t(order[i])] / total) < top_p) ++i;
    if (i < count || count == order.size()) return std::min(i + 1, order.size());
  }
}

// Log-softmax at `id`, the logits' log-sum-exp `norm` given.
float logprob_of(std::span<const float> logits, int32_t id, double norm) { return float(double(logits[size_t(id)]) - norm); }

// The k best tokens and their log-softmax, best first.
std::vector<std::pair<int32_t, float>> top_logprobs(std::span<const float> logits, int64_t k, double norm) {
  std::vector<std::pair<int32_t, float>> out;
  for (int32_t id : ranked(logits, size_t(k))) out.emplace_back(id, logprob_of(logits, id, norm));
  return out;
}

// The best token: the highest value, the lowest id among equals.
int32_t best_token(std::span<const float> values) {
  return int32_t(std::max_element(values.begin(), values.end()) - values.begin());
}

}  // namespace

float token_logprob(std::span<const float> logits, int32_t id) { return logprob_of(logits, id, log_sum_exp(logits)); }

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
  if (penalizes_counts())
    for (const auto& [id, count] : generated_counts_)
      logits[size_t(id)] -= float(params_.frequency_penalty * double(count) + params_.presence_penalty);
  for (const auto& [id, bias] : params_.logit_bias) logits[size_t(id)] += bias;
}

int32_t Sampler::draw(std::span<const float> logits) {
  const int32_t best = best_token(logits);
  const float peak = logits[size_t(best)];
  if (std::isinf(peak)) runtime_error("sampling: the constraint allows no token");
  if (params_.temperature <= 0) return best;
  // The candidates: the top_k best (best first), else every token (in id order).
  const size_t vocab = logits.size();
  const size_t k = params_.top_k > 0 ? std::min(vocab, size_t(params_.top_k)) : vocab;
  const std::vector<int32_t> top = k < vocab ? ranked(logits, k) : std::vector<int32_t>();
  auto id_of = [&](size_t i) { return k < vocab ? top[i] : int32_t(i); };
  // Their weights at this temperature: exp((logit - best) / temperature), the best's 1 (in f32:
  // a weight under 2^-149 of the best's is 0, a masked token's too, and none is ever drawn).
  const auto temperature = float(params_.temperature);
  std::vector<float>& weights = weights_;
  weights.resize(k);
  double total = 0;
  for (size_t i = 0; i < k; ++i) {
    weights[i] = std::exp((logits[size_t(id_of(i))] - peak) / temperature);
    total += weights[i];
  }
  // A draw scans the candidates it may take in candidate order, each taking its weight's share
  // of [0, total): 53 random bits as a double in [0, 1), the same on every platform.
  const double unit = double(rng_() >> 11) * 0x1.0p-53;
  if (params_.top_p >= 1.0 && params_.min_p <= 0) {
    const double u = unit * total;
    double acc = 0;
    for (size_t i = 0; i < k; ++i)
      if (u < (acc += weights[i])) return id_of(i);
    return best;  // (acc ends at total: not reached)
  }
  // top_p keeps the nucleus, min_p the candidates of at least min_p times the best's weight.
  std::vector<int32_t>& order = order_;
  order.resize(k);
  std::iota(order.begin(), order.end(), 0);
  const size_t prefix = params_.top_p < 1.0 ? nucleus(order, weights, total, params_.top_p) : order.size();
  std::vector<int32_t> kept;
  for (size_t i = 0; i < prefix; ++i)
    if (weights[size_t(order[i])] >= params_.min_p) kept.push_back(order[i]);
  if (kept.empty()) return best;  // (min_p above 1)
  std::sort(kept.begin(), kept.end());  // candidate order, as unrestricted draws scan
  double mass = 0;
  for (const int32_t i : kept) mass += weights[size_t(i)];
  const double u = unit * mass;
  double acc = 0;
  for (const int32_t i : kept)
    if (u < (acc += weights[size_t(i)])) return id_of(size_t(i));
  return best;  // (acc ends at mass: not reached)
}

SampledToken Sampler::sample(std::span<const float> logits) {
  // Sampling NaN or infinite logits would pick some token and carry on as if the model had
  // answered (an H200 build once decoded V4-Flash to all-NaN logits: docs/cuda.md, "PDL").
  if (const int64_t bad = count_nonfinite(logits))
    runtime_error("the model computed logits that are not finite (", bad, " of ", logits.size(),
                  " are NaN or infinite)");
  // A copy only for what changes the logits (a vocabulary's copy costs as much as a greedy draw).
  std::vector<float>& adjusted = adjusted_;
  std::span<const float> scores = logits;
  if (params_.repetition_penalty != 1.0 || (penalizes_counts() && !generated_counts_.empty()) ||
      !params_.logit_bias.empty() || constraint_) {
    adjusted.assign(logits.begin(), logits.end());
    apply_penalties(adjusted);
    if (constraint_) constraint_->mask(adjusted);
    scores = adjusted;
  }
  SampledToken out;
  out.id = draw(scores);
  if (constraint_) constraint_->advance(out.id);
  if (params_.logprobs || params_.top_logprobs > 0) {
    const double norm = log_sum_exp(logits);
    out.logprob = logprob_of(logits, out.id, norm);
    if (params_.top_logprobs > 0) out.top = top_logprobs(logits, params_.top_logprobs, norm);
  }
  ++generated_counts_[out.id];
  if (size_t(out.id) >= is_seen_.size()) is_seen_.resize(size_t(out.id) + 1, false);
  if (!is_seen_[size_t(out.id)]) {
    is_seen_[size_t(out.id)] = true;
    seen_.push_back(out.id);
  }
  return out;
}

}  // namespace tetra
