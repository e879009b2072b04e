#pragma once
// KV capacity: the bytes of one sequence's attention state by the SPEC's arithmetic, and how
// many such sequences fit beside the weights.
#include <cstdint>

#include "model/config.h"
#include "model/forward.h"

namespace tetra::bench {

// After `tokens` tokens: per layer the sliding window (kv_layout's ring of `window` entries),
// one compressed entry per complete window of `ratio` tokens, and on CSA layers one indexer key
// per entry (fp8 KV: 584-byte entries, fp4 indexer: 68-byte keys for V4).
uint64_t kv_bytes_per_sequence(const ModelConfig& c, int64_t tokens, CacheTypes caches);

// The weight bytes of the rank holding the most experts when `ranks` devices split a model
// (expert parallelism, model/forward.h): `shared_bytes` (every weight but the routed experts) and
// ceil(experts / ranks) of the `experts` of each layer, whose bytes are `expert_bytes` in all.
uint64_t largest_rank_weight_bytes(int ranks, uint64_t shared_bytes, uint64_t expert_bytes, int64_t experts);

// Whole sequences of `per_sequence` bytes that fit on `ranks` devices of `device_bytes` each as
// tetra places a model on them: every device holds its weights (the largest rank's, above) and
// every sequence's state (attention runs on each). 0 when the weights alone do not fit.
int64_t sequences_that_fit(uint64_t device_bytes, int ranks, uint64_t shared_bytes, uint64_t expert_bytes, int64_t experts,
                           uint64_t per_sequence);

}  // namespace tetra::bench
