#pragma once
// A synthetic model's routers balanced as training balances a real one's: DeepSeek's
// auxiliary-loss-free rule moves each expert's router bias by a fixed step against its load
// (up when it takes fewer tokens than the mean, down when more). Random weights alone send a
// batch's tokens to a few favoured experts, which would price decode steps by experts that a
// trained model spreads its tokens over.
#include <cstdint>

#include "backend/backend.h"
#include "model/forward.h"

namespace tetra::bench {

struct RoutingBalance {
  int64_t steps = 0, tokens = 0;   // calibration steps, and one-token sequences in each
  double busiest_before = 0;       // the busiest expert's load over the mean, first step (mean over layers)
  double busiest_after = 0;        // the same, last step
};

// Sets every score-routed layer's router bias of `model` (none: nothing runs); deterministic for a seed.
RoutingBalance balance_routing(Model& model, Backend& backend, uint64_t seed);

}  // namespace tetra::bench
