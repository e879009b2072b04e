#include "server/serving_model.h"

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

ServingModel::ServingModel(const std::string& dir, const std::string& device, CacheTypes caches)
    : config_(load_model_config(dir)), tokenizer_(tokenizer_of(dir)), caches_(caches) {
  if (int64_t(tokenizer_.vocab_size()) > config_.vocab_size)
    model_error(dir, "/tokenizer.json: ", tokenizer_.vocab_size(), " tokens but config.json has vocab_size ", config_.vocab_size);
  backend_ = make_backend(device);
  store_ = std::make_unique<TensorStore>(dir);
  weights_ = std::make_unique<ModelWeights>(config_, *store_);
  model_ = std::make_unique<Model>(config_, *weights_, *backend_, caches_);
}

std::vector<int32_t> ServingModel::end_token_ids() const {
  if (tokenizer_.eos_id()) return {int32_t(*tokenizer_.eos_id())};
  if (config_.eos_token_id >= 0) return {int32_t(config_.eos_token_id)};
  return {};
}

}  // namespace tetra::server
