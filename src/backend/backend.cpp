#include "backend/backend.h"

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef TETRA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tetra {

std::unique_ptr<Backend> make_backend(const std::string& device) {
  if (device == "cpu") return make_cpu_backend();
#ifdef TETRA_WITH_CUDA
  if (device == "cuda") return make_cuda_backend();
#else
  if (device == "cuda")
    runtime_error("--device cuda: this tetra was built without the CUDA backend (configure with -DTETRA_CUDA=ON)");
#endif
  usage_error("--device must be cpu or cuda, got '", device, "'");
}

}  // namespace tetra
