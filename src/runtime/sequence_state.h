#pragma once
// Everything one sequence carries between forward steps, per layer: the encoded KV of its
// last window-1 tokens, the compressed KV entries, the indexer keys, and the compressors'
// unfinished windows. Tensors live in the backend's memory, in the cache storage layouts.
#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace tetra {

struct LayerState {
  Tensor recent_kv;     // encoded KV of positions length-(window-1) .. length-1 (fewer at the start)
  Tensor compressed;    // encoded compressed KV entries, one per finished window
  Tensor indexer_keys;  // encoded indexer keys (CSA layers), one per finished window
  CompressorState compressor, indexer;
};

struct SequenceState {
  int64_t length = 0;  // tokens processed so far
  std::vector<LayerState> layers;  // main layers, then the MTP blocks
};

}  // namespace tetra
