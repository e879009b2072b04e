#pragma once
// A sequence that has "seen" `context` tokens without running them: its per-layer attention
// state (window, compressed entries, indexer keys, the compressors' unfinished windows) filled
// with random rows encoded by the backend into the cache layouts, so a decode step at a long
// context can be timed without a prefill of that length.
#include <cstdint>

#include "backend/backend.h"
#include "model/config.h"
#include "model/forward.h"
#include "runtime/sequence_state.h"

namespace tetra::bench {

// Random f32 values in the backend's memory that synthetic rows are copied from.
class RowPool {
 public:
  // Enough values for `context` tokens of every state kind of `c`.
  RowPool(Backend& backend, const ModelConfig& c, int64_t context, uint64_t seed);
  Tensor rows(int64_t n, int64_t width) const;  // a fresh [n, width] copy of the first n·width values

 private:
  Backend& backend_;
  Tensor pool_;
};

// Fills `s` (from Model::new_sequence) as if its first `context` tokens had been processed.
void fill_synthetic_state(Backend& backend, const ModelConfig& c, CacheTypes caches, int64_t context,
                          const RowPool& pool, SequenceState& s);

}  // namespace tetra::bench
