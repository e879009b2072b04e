#include "support/tiny_model.h"

#include <stdlib.h>

#include <filesystem>

#include "core/error.h"

namespace tetra::testing {

TinyModel::TinyModel(const TinyCheckpointOptions& options) {
  std::string pattern = (std::filesystem::temp_directory_path() / "tetra_tiny_XXXXXX").string();
  if (!mkdtemp(pattern.data())) runtime_error("cannot make a temporary directory from ", pattern);
  dir = pattern;
  write_tiny_checkpoint(dir, options);
  config = load_model_config(dir);
  store = std::make_unique<TensorStore>(dir);
  weights = std::make_unique<ModelWeights>(config, *store);
}

TinyModel::~TinyModel() {
  weights.reset();
  store.reset();  // its mappings before the files
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace tetra::testing
