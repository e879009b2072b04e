#include "bench/geometry.h"

#include <filesystem>

#include "bench/published_configs.h"
#include "core/error.h"

namespace tetra::bench {

ModelConfig synthetic_geometry(const std::string& name_or_dir, std::optional<int64_t> layers) {
  ModelConfig c;
  if (name_or_dir == "v4-flash") {
    c = parse_model_config(kV4FlashConfigJson, "tests/data/v4_flash/config.json (built in)");
  } else if (name_or_dir == "v4-pro") {
    c = parse_model_config(kV4ProConfigJson, "tests/data/v4_pro/config.json (built in)");
  } else if (std::filesystem::is_regular_file(std::filesystem::path(name_or_dir) / "config.json")) {
    c = load_model_config(name_or_dir);
  } else {
    usage_error("--synthetic must be v4-flash, v4-pro or a directory holding config.json, got '", name_or_dir, "'");
  }
  if (layers) {
    if (*layers < 1 || *layers > c.n_layers)
      usage_error("--layers must be between 1 and ", c.n_layers, " for ", name_or_dir, ", got ", *layers);
    c.n_layers = *layers;
    c.compress_ratios.resize(size_t(*layers));
    c.hash_routed.resize(size_t(*layers));
  }
  c.n_mtp_layers = 0;
  return c;
}

}  // namespace tetra::bench
