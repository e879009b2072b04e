#pragma once
// Bytes of the per-sequence attention state, by cache storage type: the arithmetic behind
// KV capacity (tetra info, start-up capacity, benchmarks).
#include <cstdint>
#include <string>

#include "model/config.h"

namespace tetra {

enum class KvCacheDtype { f32, bf16, fp8 };        // fp8: the SPEC's fp8_ds_mla layout
enum class IndexerCacheDtype { f32, bf16, fp4 };  // fp4: e2m1 + one ue8m0 scale per 32

KvCacheDtype parse_kv_cache_dtype(const std::string& s);            // usage error otherwise
IndexerCacheDtype parse_indexer_cache_dtype(const std::string& s);  // usage error otherwise

// Bytes of one encoded row of `dims` values. fp8_ds_mla: e4m3 nope dims, bf16 rope dims, one
// ue8m0 scale per 64 nope values padded to 8 bytes (448 + 128 + 8 = 584 for V4). The indexer's
// fp4: e2m1 pairs and one ue8m0 scale per 32 values.
constexpr int64_t kv_fp8_row_bytes(int64_t dims, int64_t rope_dims) {
  const int64_t nope = dims - rope_dims;
  return nope + 2 * rope_dims + ((nope + 63) / 64 + 7) / 8 * 8;
}
constexpr int64_t indexer_fp4_row_bytes(int64_t dims) { return dims / 2 + (dims + 31) / 32; }

// One KV entry (one token of the window, or one compressed entry).
int64_t kv_entry_bytes(const ModelConfig& c, KvCacheDtype t);
// One indexer key (one compressed entry of a CSA layer).
int64_t indexer_entry_bytes(const ModelConfig& c, IndexerCacheDtype t);

struct LayerKvBytes {
  double per_token = 0;        // grows with the sequence: compressed entries (+ indexer keys)
  int64_t per_sequence = 0;    // fixed: the sliding window ring
};
LayerKvBytes layer_kv_bytes(const ModelConfig& c, int64_t layer, KvCacheDtype kv, IndexerCacheDtype idx);

}  // namespace tetra
