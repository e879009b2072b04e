#pragma once
// Device helpers over the paged state: where a sequence's row lives, and one element of a row
// in its stored format (exact decoders, as cache_codec.cu).
#include "backend/cuda/formats.cuh"
#include "backend/cuda/paged.h"

namespace tetra::cuda {

// The pool block holding a sequence's row, and the row's address in that block: two steps, so
// that kernels can issue the table load well before they need the row.
__device__ __forceinline__ int32_t paged_block(const PagedView& p, int32_t slot, int64_t row) {
  return p.tables[int64_t(slot) * p.width + p.offset + row / p.rows_per_block];
}
__device__ __forceinline__ uint8_t* paged_address(const PagedView& p, int32_t block, int64_t row) {
  return p.pool + int64_t(block) * p.block_bytes + (row % p.rows_per_block) * p.row_bytes;
}
__device__ __forceinline__ uint8_t* paged_row(const PagedView& p, int32_t slot, int64_t row) {
  return paged_address(p, paged_block(p, slot, row), row);
}

// Element i of a stored row of d values (fp8_kv: the last rope_dim as bf16).
__device__ __forceinline__ float stored_value(const uint8_t* row, int64_t i, RowFormat f, int64_t d, int64_t rope_dim) {
  switch (f) {
    case RowFormat::f32: return reinterpret_cast<const float*>(row)[i];
    case RowFormat::bf16: return decode_bf16(uint16_t(row[2 * i] | (row[2 * i + 1] << 8)));
    case RowFormat::fp8_kv: {
      const int64_t nope = d - rope_dim;
      if (i < nope) return decode_e4m3(row[i]) * decode_e8m0(row[nope + 2 * rope_dim + i / 64]);
      const int64_t b = nope + 2 * (i - nope);
      return decode_bf16(uint16_t(row[b] | (row[b + 1] << 8)));
    }
    case RowFormat::fp4_indexer: return decode_e2m1(fp4_code(row, i)) * decode_e8m0(row[d / 2 + i / 32]);
  }
  return 0;
}

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xFFFFFFFFu, v, off);
  return v;
}

}  // namespace tetra::cuda
