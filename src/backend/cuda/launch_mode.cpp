#include "backend/cuda/launch_mode.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

#ifndef TETRA_CUDA_PDL
#define TETRA_CUDA_PDL 0
#endif

namespace tetra::cuda {

bool early_launches() {
  static const bool early = [] {
    const char* value = std::getenv("TETRA_CUDA_PDL");
    if (value == nullptr) return TETRA_CUDA_PDL != 0;
    const std::string v = value;
    if (v != "0" && v != "1") runtime_error("TETRA_CUDA_PDL must be 0 (plain launches) or 1 (early launches), not '", v, "'");
    return v == "1";
  }();
  return early;
}

}  // namespace tetra::cuda
