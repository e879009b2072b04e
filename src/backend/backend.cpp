#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"

namespace tetra {

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (device == "cpu") return make_cpu_backend();
  if (device == "cuda")
    runtime_error("--device cuda: the CUDA backend is not built yet; use --device cpu (the reference backend)");
  usage_error("--device must be cpu or cuda, got '", device, "'");
}

}  // namespace tetra
