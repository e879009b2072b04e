#pragma once
// A CommGroup whose ranks share the host's memory: CPU backends, one thread each.
#include <memory>

#include "backend/comm_group.h"

namespace tetra {

std::unique_ptr<CommGroup> make_host_comm_group(int ranks);

}  // namespace tetra
