#pragma once
// config.json text for a ModelConfig, in the legacy (official repo) or transformers shape;
// what tetra quantize writes next to the tensors it produces.
#include <string>

#include "model/config.h"

namespace tetra {

std::string model_config_json(const ModelConfig& c, ConfigForm form);

}  // namespace tetra
