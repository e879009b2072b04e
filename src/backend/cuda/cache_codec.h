#pragma once
// The cache storage layouts of cpu/cache_codec.h on the device, bit-identical to the CPU
// encoders: KV fp8 ("fp8_ds_mla"), bf16 rows, and the indexer's Hadamard-rotated fp4.
#include <cuda_runtime.h>

#include <cstdint>

#include "model/kv_layout.h"  // kv_fp8_row_bytes, indexer_fp4_row_bytes

namespace tetra::cuda {

void encode_kv_fp8(const float* rows, int64_t n, int64_t d, int64_t rope_dim, uint8_t* out, cudaStream_t stream);
void decode_kv_fp8(const uint8_t* bytes, int64_t n, int64_t d, int64_t rope_dim, float* out, cudaStream_t stream);
void encode_bf16(const float* values, int64_t count, uint8_t* out, cudaStream_t stream);  // little-endian pairs
void decode_bf16(const uint8_t* bytes, int64_t count, float* out, cudaStream_t stream);
// d must be a power of two (the Walsh-Hadamard rotation).
void encode_indexer_fp4(const float* rows, int64_t n, int64_t d, uint8_t* out, cudaStream_t stream);
void decode_indexer_fp4(const uint8_t* bytes, int64_t n, int64_t d, float* out, cudaStream_t stream);
// q [rows, heads·d]: rope on each head's last 2·half values (row r at positions[r]), then each head
// as decode_indexer_fp4 gives it back from encode_indexer_fp4, in one pass.
void rotated_indexer_query_fp4(const float* q, const int32_t* positions, const float* inv_freq, int64_t half,
                               int64_t rows, int64_t heads, int64_t d, float* out, cudaStream_t stream);

}  // namespace tetra::cuda
