#pragma once
// The reference implementations of the Backend ops over the paged per-sequence state (see
// backend.h): every key list is built from the step rows' positions, every cached row read in
// its stored format.
#include "backend/backend.h"

namespace tetra::cpu {

void store_rows(const PagedRows& dst, const Tensor& rows, const StepRows& at, RowPlacement place);
// out: [n, width or width/2], zero-filled.
void compress(const PagedRows& pending, const Tensor& kv, const Tensor& gate, const Tensor& ape, const StepRows& at,
              int64_t ratio, bool overlap, Tensor& out);
// out: [n, heads·d], zero-filled.
void attention(const Tensor& q, const Tensor& step_kv, const PagedRows& window, const PagedRows* compressed,
               const Tensor* selected, const Tensor& sinks, const StepRows& at, const AttentionShape& s, Tensor& out);
// out: i32 [n, k].
void indexer_topk(const Tensor& q, const Tensor& weights, const PagedRows& keys, IndexerCacheDtype t, const StepRows& at,
                  int64_t heads, int64_t k, int64_t ratio, double weight_scale, Tensor& out);

}  // namespace tetra::cpu
