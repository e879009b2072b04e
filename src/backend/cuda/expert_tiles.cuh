#pragma once
// The row tiles of the expert-sorted (token, slot) rows, built on the device from the experts'
// offsets so that the expert GEMMs need no host synchronization, and what one pass of those GEMMs
// (up: w1 and w3 with SwiGLU; down: w2) reads.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "backend/cuda/weight_ref.h"

namespace tetra::cuda {

struct ExpertPass {
  const __nv_bfloat16* input;  // up: x rows [n, in]; down: h [pairs, in]; in the k order of the kernel's decoder
  const int32_t* order;        // up: sorted row → pair (its token: pair / k); down: null (row i of h)
  int64_t k;
  const int4* tiles;    // {expert, first sorted row, rows, 0}; expert -1 past the last tile
  int col_tiles;        // CTAs per row tile
  const WeightRef* wa;  // up: w1; down: w2 (device tables)
  const WeightRef* wb;  // up: w3
  int64_t in, out;      // the matrices' width and rows
  float limit;
  void* result;  // up: h bf16 [pairs, out] in the same k order; down: y f32 [pairs, out]
};

// Σ_e ceil(rows_e / TileRows) over the used experts (at most min(experts, pairs) of them): the
// grid's worst case.
inline int64_t expert_tile_bound(int64_t pairs, int64_t experts, int64_t tile_rows) {
  return (pairs + (tile_rows - 1) * (experts < pairs ? experts : pairs)) / tile_rows;
}

// tiles[i] = {expert, first sorted row, rows, 0} for every TileRows-row tile of every expert,
// in expert order, then {-1} up to `bound`. One warp: a scan of the tile counts 32 experts at a time.
template <int TileRows>
__global__ void expert_tiles_kernel(const int32_t* offsets, int64_t experts, int64_t bound, int4* tiles) {
  const int lane = threadIdx.x;
  int64_t done = 0;
  for (int64_t base = 0; base < experts; base += 32) {
    const int64_t e = base + lane;
    const int32_t first = e < experts ? offsets[e] : 0, count = e < experts ? offsets[e + 1] - first : 0;
    const int n = (count + TileRows - 1) / TileRows;
    int inclusive = n;
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xFFFFFFFFu, inclusive, d);
      if (lane >= d) inclusive += v;
    }
    const int64_t start = done + inclusive - n;
    for (int i = 0; i < n; ++i)
      tiles[start + i] = make_int4(int(e), first + i * TileRows, min(TileRows, count - i * TileRows), 0);
    done += __shfl_sync(0xFFFFFFFFu, inclusive, 31);
  }
  for (int64_t i = done + lane; i < bound; i += 32) tiles[i] = make_int4(-1, 0, 0, 0);
}

}  // namespace tetra::cuda
