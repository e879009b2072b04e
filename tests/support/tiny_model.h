#pragma once
// A tiny checkpoint (tiny_checkpoint.h) written to a fresh temporary directory and loaded, for
// tests that run a Model on it; the directory goes with the object.
#include <memory>
#include <string>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/weights.h"
#include "support/tiny_checkpoint.h"

namespace tetra::testing {

struct TinyModel {
  explicit TinyModel(const TinyCheckpointOptions& options = {});
  ~TinyModel();
  TinyModel(const TinyModel&) = delete;
  TinyModel& operator=(const TinyModel&) = delete;

  std::string dir;
  ModelConfig config;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<ModelWeights> weights;
};

}  // namespace tetra::testing
