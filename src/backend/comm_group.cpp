#include "backend/comm_group.h"

#include "backend/cpu/host_comm_group.h"
#include "core/error.h"

namespace tetra {

std::unique_ptr<CommGroup> make_comm_group(const std::vector<Backend*>& backends) {
  if (backends.empty()) runtime_error("an expert-parallel group needs at least one backend");
  for (const Backend* b : backends)
    if (b->name() != "cpu")
      runtime_error("expert parallelism on the ", b->name(),
                    " backend is not built yet: the experts split over ranks on the cpu backend only");
  return make_host_comm_group(int(backends.size()));
}

}  // namespace tetra
