#pragma once
// A CommGroup of CUDA backends in one process, one thread a rank (expert parallelism): each
// rank reads every rank's tensor from device memory (its own GPU's or, through peer access, the
// others') and adds them in rank order on its own stream. The ranks meet on the host, so its
// sums cannot be recorded into graphs.
#include <memory>
#include <vector>

#include "backend/comm_group.h"

namespace tetra {

// Every backend a CUDA backend; GPUs that cannot read each other's memory are a runtime error.
std::unique_ptr<CommGroup> make_cuda_comm_group(const std::vector<Backend*>& backends);

}  // namespace tetra
