#include "server/serving_model.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "io/mapped_file.h"

namespace tetra::server {
namespace {

text::Tokenizer tokenizer_of(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::path(dir) / "tokenizer.json";
  if (!entry_exists(path.string())) model_error(path.string(), ": missing (a model directory to serve needs its tokenizer.json)");
  return text::Tokenizer::from_file(path);
}

}  // namespace

ServingModel::ServingModel(const std::string& dir, const std::string& device, CacheTypes caches, int ranks)
    : config_(load_model_config(dir)), tokenizer_(tokenizer_of(dir)), caches_(caches) {
  if (int64_t(tokenizer_.vocab_size()) > config_.vocab_size)
    model_error(dir, "/tokenizer.json: ", tokenizer_.vocab_size(), " tokens but config.json has vocab_size ", config_.vocab_size);
  backends_ = make_backends(device, ranks);
  store_ = std::make_unique<TensorStore>(dir);
  weights_ = std::make_unique<ModelWeights>(config_, *store_);
  model_ = std::make_unique<Model>(config_, *weights_, pointers(backends_), caches_);
}

int64_t ServingModel::free_memory_bytes_per_rank() const {
  int64_t least = backends_.front()->free_memory_bytes();
  for (const auto& b : backends_) least = std::min(least, b->free_memory_bytes());
  return backend().name() == "cpu" ? least / int64_t(backends_.size()) : least;
}

std::vector<int32_t> ServingModel::end_token_ids() const {
  if (tokenizer_.eos_id()) return {int32_t(*tokenizer_.eos_id())};
  if (config_.eos_token_id >= 0) return {int32_t(config_.eos_token_id)};
  return {};
}

}  // namespace tetra::server
