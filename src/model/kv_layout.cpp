#include "model/kv_layout.h"

#include "core/error.h"

namespace tetra {

KvCacheDtype parse_kv_cache_dtype(const std::string& s) {
  if (s == "f32") return KvCacheDtype::f32;
  if (s == "bf16") return KvCacheDtype::bf16;
  if (s == "fp8") return KvCacheDtype::fp8;
  usage_error("--kv-cache-dtype must be f32, bf16 or fp8, got '", s, "'");
}

IndexerCacheDtype parse_indexer_cache_dtype(const std::string& s) {
  if (s == "f32") return IndexerCacheDtype::f32;
  if (s == "bf16") return IndexerCacheDtype::bf16;
  if (s == "fp4") return IndexerCacheDtype::fp4;
  usage_error("--indexer-cache-dtype must be f32, bf16 or fp4, got '", s, "'");
}

int64_t kv_entry_bytes(const ModelConfig& c, KvCacheDtype t) {
  switch (t) {
    case KvCacheDtype::f32: return 4 * c.head_dim;
    case KvCacheDtype::bf16: return 2 * c.head_dim;
    case KvCacheDtype::fp8: return kv_fp8_row_bytes(c.head_dim, c.rope_dim);
  }
  return 0;
}

int64_t indexer_entry_bytes(const ModelConfig& c, IndexerCacheDtype t) {
  switch (t) {
    case IndexerCacheDtype::f32: return 4 * c.index_head_dim;
    case IndexerCacheDtype::bf16: return 2 * c.index_head_dim;
    case IndexerCacheDtype::fp4: return indexer_fp4_row_bytes(c.index_head_dim);
  }
  return 0;
}

LayerKvBytes layer_kv_bytes(const ModelConfig& c, int64_t layer, KvCacheDtype kv, IndexerCacheDtype idx) {
  LayerKvBytes b;
  b.per_sequence = c.window * kv_entry_bytes(c, kv);
  const int64_t ratio = layer < c.n_layers ? c.compress_ratios[size_t(layer)] : 0;
  if (ratio > 0) {
    b.per_token = double(kv_entry_bytes(c, kv)) / double(ratio);
    if (c.attention_kind(layer) == AttentionKind::csa) b.per_token += double(indexer_entry_bytes(c, idx)) / double(ratio);
  }
  return b;
}

}  // namespace tetra
