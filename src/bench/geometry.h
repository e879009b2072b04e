#pragma once
// Model geometries for synthetic benchmarks: the published DeepSeek-V4-Flash and V4-Pro configs
// (tests/data/v4_flash, tests/data/v4_pro, compiled into the binary so `tetra bench` runs from
// anywhere) or any directory holding a config.json, cut to its first N layers.
#include <cstdint>
#include <optional>
#include <string>

#include "model/config.h"

namespace tetra::bench {

// "v4-flash", "v4-pro", or a directory with config.json. `layers` (1 .. the config's count)
// keeps the first N main layers; the MTP block is dropped (the benchmark times main steps).
// Unknown names, unreadable directories and bad layer counts are usage errors.
ModelConfig synthetic_geometry(const std::string& name_or_dir, std::optional<int64_t> layers);

}  // namespace tetra::bench
