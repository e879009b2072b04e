#pragma once
// Everything generation needs from a model directory: config, weights on the backend, the
// forward, and the tokenizer at DIR/tokenizer.json.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "io/safetensors.h"
#include "model/forward.h"
#include "text/tokenizer.h"

namespace tetra::server {

// The trained demo model, used when no --model is given.
inline constexpr const char* kDemoModelDir = "models/demo/nvfp4";

class ServingModel {
 public:
  // ranks > 1: the routed experts split over that many backends of `device` (expert
  // parallelism, model/forward.h).
  ServingModel(const std::string& dir, const std::string& device, CacheTypes caches, int ranks = 1);

  const ModelConfig& config() const { return config_; }
  Model& model() { return *model_; }
  // The first rank's backend, where logits arrive.
  Backend& backend() { return *backends_.front(); }
  const Backend& backend() const { return *backends_.front(); }
  // The bytes each rank's copy of the cache pool may take: the least any rank's backend could
  // still allocate, shared out where the ranks share the host's memory.
  int64_t free_memory_bytes_per_rank() const;
  const text::Tokenizer& tokenizer() const { return tokenizer_; }
  const CacheTypes& caches() const { return caches_; }
  // Tokens that end a turn: the tokenizer's eos token, else config.json's eos_token_id.
  std::vector<int32_t> end_token_ids() const;

 private:
  ModelConfig config_;
  text::Tokenizer tokenizer_;
  CacheTypes caches_;
  std::unique_ptr<TensorStore> store_;
  std::unique_ptr<ModelWeights> weights_;
  std::vector<std::unique_ptr<Backend>> backends_;
  std::unique_ptr<Model> model_;
};

}  // namespace tetra::server
