#pragma once
// The paged per-sequence state as kernels see it (backend.h's PagedRows and StepRows as raw
// device pointers), and the launchers of the ops over it.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

struct PagedView {
  uint8_t* pool;
  const int32_t* tables;  // [slots, width]
  int64_t width, offset, rows_per_block, row_bytes, block_bytes;
};

struct StepView {  // per row of a step
  const int32_t *slot, *position, *start, *last, *first_row;
};

enum class RowFormat : int { f32, bf16, fp8_kv, fp4_indexer };

// Row r at position t goes to entry t mod ring (when t > last - ring), or with ring = 0 to
// entry (t+1)/ratio - 1 (when t completes a window); padding rows (slot -1) go nowhere.
void store_rows(PagedView dst, const uint8_t* rows, int64_t n, StepView at, int64_t ring, int64_t ratio,
                cudaStream_t stream);

// The compressor: pooled entries of completed windows into out [n, width or width/2] (zeros
// elsewhere), then each sequence's last positions into `pending` (rows [kv | gate + ape]).
// one_row_each: every row is a sequence of its own (a decode step): one launch does both.
void compress(PagedView pending, const float* kv, const float* gate, const float* ape, int64_t n, int64_t width,
              StepView at, int64_t ratio, bool overlap, bool one_row_each, float* out, cudaStream_t stream);

struct AttentionParams {
  RowFormat format;
  int64_t heads, d, rope_dim, window, ratio;
  float scale;
  // Set (the split kernels only): the combine writes the output rotated back, inverse rope at the
  // row's position by these rope_dim/2 frequencies (AttentionShape::output_inv_freq).
  const float* output_inv_freq = nullptr;
};

// Where a row's keys are (Backend::attention): this step's stored rows [n, step_bytes], the
// window ring, then the compressed entries: selected [n, k] (CSA picks, -1 none), or with
// selected null every finished entry; has_compressed false: none. max_entries bounds the
// entries any row sees (k, or the compressed rows a sequence can hold): it sizes grids only.
// step_bf16 and entry_bf16 (null: none; attention_bf16_rows): the step's rows and the entries
// the step's rows complete (by the completing row) as bf16 rows of d values, the tensor-core
// kernels' decode done once a step, which those kernels copy instead of decoding each key for
// every query that sees it.
struct AttentionKeys {
  const uint8_t* step_kv;
  int64_t step_bytes;
  PagedView window, compressed;
  bool has_compressed;
  const int32_t* selected;
  int64_t k, max_entries;
  const uint8_t* step_bf16 = nullptr;
  const uint8_t* entry_bf16 = nullptr;
};

enum class AttentionKernel {
  exact,         // f32 on the CUDA cores: a block per (row, head), every product in f32
  tensor_cores,  // a block per (row, group of 64 heads) over all the row's keys (long runs: prefill)
  // the same over splits of the key list (whole 64-key tiles, at most 16 splits, sized by the
  // row's key count alone), then a combine in split order (short runs: decode)
  tensor_cores_split,
};

// Whether the tensor-core kernels take this shape (else the exact kernel serves it):
// d <= 512 and rope_dim multiples of 8, rows of whole 8-byte words.
bool attention_tensor_cores_fit(const AttentionParams& p, int64_t row_bytes);
// Stored rows [n, row_bytes] of p.format as bf16 rows [n, p.d] (out: n·2·p.d bytes), bit for bit
// the tensor-core kernels' decode of them (AttentionKeys::step_bf16, entry_bf16).
void attention_bf16_rows(const uint8_t* rows, int64_t n, int64_t row_bytes, const AttentionParams& p, uint8_t* out,
                         cudaStream_t stream);
// Scratch floats of the split kernel for `rows` rows.
int64_t attention_split_floats(int64_t rows, const AttentionParams& p, const AttentionKeys& keys);
// Rows [begin, begin + count) of q [n, heads·d] into out [n, heads·d]. The tensor-core kernels
// round q, the keys and the probabilities to bf16 (f32 accumulation, f32 softmax); the exact one
// needs d <= 512. scratch: attention_split_floats(count) floats for tensor_cores_split, else null.
// warpgroup_mma: the tensor-core kernels on sm_90a's warpgroup MMA (where
// attention_warpgroup_mma_supported()), else on mma.sync, which every GPU runs. A process keeps one
// choice: the two may round differently.
void paged_attention(const float* q, const AttentionKeys& keys, const float* sinks, StepView at, int64_t begin,
                     int64_t count, AttentionParams p, AttentionKernel kernel, bool warpgroup_mma, float* scratch,
                     float* out, cudaStream_t stream);
// Whether this device runs warpgroup MMA (compute capability 9.0, whose sm_90a code the build holds).
bool attention_warpgroup_mma_supported();

// The indexer's scores: for row r (position t) and each of its (t+1)/ratio visible keys c,
// scratch[r·capacity + c] = sum over heads h of relu(q[r,h,:] · key c) · weights[r,h] · weight_scale
// (the rest of scratch untouched). bf16_inputs: queries and keys enter the tensor cores as bf16
// (fp4 keys and fp4-rounded queries exactly) with f32 accumulation, where the shape allows
// (heads <= 64, d of 32, 64 or 128, aligned rows); otherwise, and when false, everything is f32.
// Each score is summed in a fixed order whatever the step holds. d <= 512.
void paged_indexer_scores(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                          int64_t heads, int64_t d, int64_t ratio, float weight_scale, bool bf16_inputs, float* scratch,
                          int64_t capacity, cudaStream_t stream);

// The k best-scoring visible keys per row (the scores above), by score descending, ties to the
// lower index, -1 past the visible keys. scratch: indexer_topk_scratch_floats(n, capacity, k)
// floats (capacity >= every sequence's key count). k <= 6144.
int64_t indexer_topk_scratch_floats(int64_t n, int64_t capacity, int64_t k);
void paged_indexer_topk(const float* q, const float* weights, PagedView keys, RowFormat format, int64_t n, StepView at,
                        int64_t heads, int64_t d, int64_t k, int64_t ratio, float weight_scale, bool bf16_inputs,
                        float* scratch, int64_t capacity, int32_t* out, cudaStream_t stream);

}  // namespace tetra::cuda
