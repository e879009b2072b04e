#pragma once
// How a decode step's attention splits a row's key list over blocks (attention.cu): whole tiles
// of kAttentionTileKeys keys, at most kAttentionMaxSplits splits of equal tile counts, a rule of
// the row's key count alone (so a row's sums never depend on what shares its step); and how many
// splits a launch makes room for, which every row up to the launch's longest list must fit.
// Plain C++ as well, so that a CPU test holds the rule to that (backend/attention_splits_test.cpp).
#include <cstdint>

#if defined(__CUDACC__)
#define TETRA_SPLITS_HD __host__ __device__ __forceinline__
#else
#define TETRA_SPLITS_HD inline
#endif

namespace tetra::cuda {

constexpr int kAttentionTileKeys = 64;
constexpr int64_t kAttentionMaxSplits = 16;

TETRA_SPLITS_HD int64_t tiles_of(int64_t keys) { return (keys + kAttentionTileKeys - 1) / kAttentionTileKeys; }
// Tiles per split: the fewest that keep the splits at kAttentionMaxSplits.
TETRA_SPLITS_HD int64_t split_tiles(int64_t keys) {
  const int64_t t = (tiles_of(keys) + kAttentionMaxSplits - 1) / kAttentionMaxSplits;
  return t > 0 ? t : 1;
}
TETRA_SPLITS_HD int64_t split_count(int64_t keys) {
  return (tiles_of(keys) + split_tiles(keys) - 1) / split_tiles(keys);
}
// The splits a launch whose rows have up to max_keys keys makes room for (grid and scratch). Not
// split_count(max_keys): a row's count is not monotonic in its keys (16 tiles take 16 splits, 17
// take 9), so a shorter row may use more than the longest list.
TETRA_SPLITS_HD int64_t launch_splits(int64_t max_keys) {
  const int64_t tiles = tiles_of(max_keys);
  return tiles < kAttentionMaxSplits ? (tiles > 0 ? tiles : 1) : kAttentionMaxSplits;
}

}  // namespace tetra::cuda
