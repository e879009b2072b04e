#include "bench/routing_balance.h"

#include <algorithm>
#include <vector>

#include "bench/random_fill.h"

namespace tetra::bench {
namespace {

// Steps, and the bias step of the first (falling linearly to nothing by the last: ~0.8 in all,
// several times the ~0.15 spread of V4's sqrt-softplus scores of unit-variance logits, since an
// expert that random weights favour can lead the others by more). On the CPU, 256 experts, 6 a
// token: the busiest expert 20× the mean load before, 2.3× after (random routing's noise: ~2×).
constexpr int64_t kSteps = 32;
constexpr float kFirstStep = 0.05f;

}  // namespace

RoutingBalance balance_routing(Model& model, Backend& backend, uint64_t seed) {
  const ModelConfig& c = model.config();
  const int64_t experts = c.n_routed_experts, k = c.n_activated_experts;
  std::vector<int64_t> layers;
  for (int64_t i = 0; i < c.n_layers; ++i)
    if (model.has_router_bias(i)) layers.push_back(i);
  RoutingBalance r;
  if (layers.empty()) return r;
  r.steps = kSteps;
  r.tokens = std::min<int64_t>(512, (8 * experts + k - 1) / k);  // ~8 tokens an expert
  const double mean = double(r.tokens * k) / double(experts);

  std::vector<std::vector<int64_t>> load(size_t(c.n_layers), std::vector<int64_t>(size_t(experts)));
  const ScopedRoutingObserver observing(model, [&](int64_t layer, const Tensor& picks) {
    for (const int32_t e : backend.download_i32(picks)) ++load[size_t(layer)][size_t(e)];
  });

  std::vector<std::vector<float>> bias(size_t(c.n_layers), std::vector<float>(size_t(experts), 0.0f));
  const int64_t shape[] = {r.tokens};
  SplitMix64 ids(stream_seed(seed, shape, "routing balance tokens"));
  for (int64_t step = 0; step < kSteps; ++step) {
    for (auto& l : load) std::fill(l.begin(), l.end(), 0);
    {
      std::vector<SequenceState> states;
      std::vector<SequenceState*> active;
      std::vector<std::vector<int32_t>> tokens;
      for (int64_t s = 0; s < r.tokens; ++s) {
        states.push_back(model.new_sequence());
        tokens.push_back({int32_t(ids.next() % uint64_t(c.vocab_size))});
      }
      for (auto& s : states) active.push_back(&s);
      model.step(active, tokens);
    }
    double busiest = 0;
    const float move = kFirstStep * float(kSteps - step) / float(kSteps);
    for (const int64_t layer : layers) {
      const auto& l = load[size_t(layer)];
      busiest += double(*std::max_element(l.begin(), l.end())) / mean / double(layers.size());
      auto& b = bias[size_t(layer)];
      for (int64_t e = 0; e < experts; ++e) {
        const double n = double(l[size_t(e)]);
        b[size_t(e)] += n < mean ? move : n > mean ? -move : 0.0f;
      }
      model.set_router_bias(layer, b);
    }
    if (step == 0) r.busiest_before = busiest;
    r.busiest_after = busiest;
  }
  return r;
}

}  // namespace tetra::bench
