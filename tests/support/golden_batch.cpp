#include "support/golden_batch.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/safetensors.h"

namespace tetra::testing {

std::vector<std::vector<int32_t>> read_golden_tokens(const std::string& dir) {
  std::ifstream in(dir + "/tokens.json");
  auto batch = nlohmann::json::parse(in).get<std::vector<std::vector<int32_t>>>();
  // Under compute-sanitizer every decode step costs seconds: tools/sanitize_gpu_tests.sh keeps
  // sequences just long enough to pass every path (window wrap, both compression rates, top-k).
  if (const char* limit = std::getenv("TETRA_GOLDEN_MAX_TOKENS"))
    for (auto& seq : batch) seq.resize(std::min(seq.size(), size_t(std::max(1L, std::atol(limit)))));
  return batch;
}

namespace {

// A fixture's model on a backend, and a fresh state for each of its token sequences.
struct GoldenModel {
  GoldenModel(Backend& be, const std::string& dir, CacheTypes caches)
      : config(load_model_config(dir)),
        store(dir),
        weights(config, store),
        model(config, weights, be, caches),
        batch(read_golden_tokens(dir)) {
    for (size_t s = 0; s < batch.size(); ++s) states.push_back(model.new_sequence());
  }
  const ModelConfig config;
  const TensorStore store;
  const ModelWeights weights;
  Model model;
  const std::vector<std::vector<int32_t>> batch;
  std::vector<SequenceState> states;
};

}  // namespace

std::vector<float> run_golden_batch(Backend& be, const std::string& dir, int64_t prefill, CacheTypes caches) {
  GoldenModel g(be, dir, caches);
  const ModelConfig& config = g.config;
  Model& model = g.model;
  const auto& batch = g.batch;
  std::vector<SequenceState>& states = g.states;
  std::vector<std::vector<float>> logits(batch.size());
  for (bool first = true;; first = false) {
    std::vector<SequenceState*> active;
    std::vector<std::vector<int32_t>> tokens;
    std::vector<size_t> which;
    for (size_t s = 0; s < batch.size(); ++s) {
      const size_t from = size_t(states[s].length), to = std::min(batch[s].size(), from + size_t(first ? prefill : 1));
      if (from >= to) continue;
      active.push_back(&states[s]);
      tokens.emplace_back(batch[s].begin() + long(from), batch[s].begin() + long(to));
      which.push_back(s);
    }
    if (active.empty()) break;
    const auto out = be.download(model.step(active, tokens).logits);
    size_t offset = 0;
    for (size_t i = 0; i < which.size(); ++i) {
      const size_t n = tokens[i].size() * size_t(config.vocab_size);
      logits[which[i]].insert(logits[which[i]].end(), out.begin() + long(offset), out.begin() + long(offset + n));
      offset += n;
    }
  }
  std::vector<float> all;
  for (const auto& l : logits) all.insert(all.end(), l.begin(), l.end());
  return all;
}

std::vector<float> run_golden_last_logits(Backend& be, const std::string& dir, CacheTypes caches) {
  GoldenModel g(be, dir, caches);
  std::vector<SequenceState*> active;
  for (auto& s : g.states) active.push_back(&s);
  return be.download(g.model.step(active, g.batch, LogitRows::last_of_each_sequence()).logits);
}

}  // namespace tetra::testing
