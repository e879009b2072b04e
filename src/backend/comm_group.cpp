#include "backend/comm_group.h"

#include "backend/cpu/host_comm_group.h"
#include "core/error.h"
#ifdef TETRA_WITH_CUDA
#include "backend/cuda/cuda_comm_group.h"
#endif

namespace tetra {

std::unique_ptr<CommGroup> make_comm_group(const std::vector<Backend*>& backends) {
  if (backends.empty()) runtime_error("an expert-parallel group needs at least one backend");
  const std::string kind = backends.front()->name();
  for (const Backend* b : backends)
    if (b->name() != kind) runtime_error("expert parallelism over ", kind, " and ", b->name(), " backends at once");
  if (kind == "cpu") return make_host_comm_group(int(backends.size()));
#ifdef TETRA_WITH_CUDA
  if (kind == "cuda") return make_cuda_comm_group(backends);
#endif
  runtime_error("expert parallelism is not built for the ", kind, " backend");
}

}  // namespace tetra
