#pragma once
// Backend: every operation the DeepSeek-V4 forward needs, on tensors in the backend's memory.
// The model (src/model/forward.*) is written once against this interface; cpu/ is the exact
// reference, a CUDA backend implements the same operations with kernels.
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/weights.h"

namespace tetra {

// Compressor state of one sequence for one compressor (attention or indexer): the tokens of
// the unfinished window and, with overlap, the first halves of the last finished window.
struct CompressorState {
  Tensor pending_kv, pending_gate;  // [tokens < ratio, width] (gate includes ape)
  Tensor previous_kv, previous_gate;  // [ratio, width/2]; empty before the first window
  int64_t windows = 0;               // finished windows so far
};

struct MixWeights {  // the outputs of mHC pre
  Tensor x;     // [n, dim]   sub-block input Σ pre[i]·h[i]
  Tensor post;  // [n, hc]
  Tensor comb;  // [n, hc, hc]
};

struct Routing {
  Tensor weights;  // [n, k] f32
  Tensor experts;  // [n, k] i32
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Bytes this backend could still allocate now (the host's available memory, or the device's
  // free memory): what sizes the cache pool once the weights are in.
  virtual int64_t free_memory_bytes() const = 0;

  // ---- memory
  virtual Tensor upload(std::span<const float> values, Shape shape) = 0;
  virtual Tensor upload_i32(std::span<const int32_t> values, Shape shape) = 0;
  virtual std::vector<float> download(const Tensor& t) = 0;
  virtual std::vector<int32_t> download_i32(const Tensor& t) = 0;
  virtual Tensor load_linear(const LinearWeight& w) = 0;  // exact values of any weight format
  // The same for every backend, built on upload(), allocate() and copy_bytes().
  Tensor load_param(const ParamWeight& p);  // f32 (i32 for integer tables)
  Tensor slice_rows(const Tensor& t, int64_t begin, int64_t count);
  Tensor concat_rows(const std::vector<Tensor>& parts, Shape row_shape, ElemType type);

  // ---- dense math (f32)
  virtual Tensor embed(const Tensor& table, const Tensor& ids) = 0;
  virtual Tensor linear(const Tensor& x, const Tensor& w) = 0;  // x·wᵀ
  // o_groups block-diagonal projection: x [n, groups·in_g], w [groups·out_g, in_g]
  virtual Tensor grouped_linear(const Tensor& x, const Tensor& w, int64_t groups) = 0;
  // RMSNorm over each run of `group` values (weight [group] or none).
  virtual Tensor rms_norm(const Tensor& x, const Tensor* weight, int64_t group, double eps) = 0;
  // Interleaved RoPE on the last inv_freq.size()·2 dims of every `head_dim` run of each row,
  // rotating row r by positions[r]·θ (by -positions[r]·θ when inverse).
  virtual void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, int64_t head_dim, bool inverse) = 0;
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor swiglu(const Tensor& gate, const Tensor& up, double limit) = 0;

  // ---- mHC
  virtual MixWeights hc_pre(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                            const ModelConfig& c) = 0;
  virtual Tensor hc_post(const Tensor& h, const Tensor& y, const Tensor& post, const Tensor& comb) = 0;
  virtual Tensor hc_head(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                         const ModelConfig& c) = 0;

  // ---- MoE
  // tid2eid (hash layers) or bias (optional, score layers) select; ids are the token ids.
  virtual Routing route(const Tensor& logits, const Tensor* bias, const Tensor* tid2eid, const Tensor& ids,
                        const ModelConfig& c) = 0;
  virtual Tensor experts(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1,
                         const std::vector<Tensor>& w2, const std::vector<Tensor>& w3, double limit) = 0;

  // ---- attention
  // Appends one sequence's tokens (kv, gate: [n, width]) to its compressor state and returns
  // the softmax-pooled entries of every window they complete ([m, width or width/2], before
  // the norm). ape [ratio, width] is added to the gate of the token at window slot t mod ratio.
  virtual Tensor compress(CompressorState& s, const Tensor& kv, const Tensor& gate, const Tensor& ape,
                          int64_t first_position, int64_t ratio, bool overlap) = 0;
  // Sparse attention with sinks: row r of q [n, heads·d] attends to rows idx[r] (-1: none) of kv [R, d].
  virtual Tensor attention(const Tensor& q, const Tensor& kv, const Tensor& idx, const Tensor& sinks, double scale) = 0;
  // Lightning indexer: per query row r, the top-k of the first visible[r] of the available[r]
  // keys starting at key_begin[r] (indices relative to key_begin, -1 when fewer exist).
  virtual Tensor indexer_topk(const Tensor& q, const Tensor& weights, const Tensor& keys, const Tensor& key_begin,
                              const Tensor& visible, const Tensor& available, int64_t heads, int64_t k,
                              double weight_scale) = 0;

  // ---- caches: encode rows into the storage layout, decode back to f32
  virtual Tensor encode_kv(const Tensor& rows, KvCacheDtype t, int64_t rope_dim) = 0;
  virtual Tensor decode_kv(const Tensor& bytes, KvCacheDtype t, int64_t head_dim, int64_t rope_dim) = 0;
  virtual Tensor encode_indexer(const Tensor& rows, IndexerCacheDtype t) = 0;
  virtual Tensor decode_indexer(const Tensor& bytes, IndexerCacheDtype t, int64_t head_dim) = 0;
  // The indexer query as the cache type sees it (fp4: rotated and rounded like the keys).
  virtual Tensor indexer_query(const Tensor& q, IndexerCacheDtype t, int64_t head_dim) = 0;

 protected:
  // Storage for a tensor in this backend's memory.
  virtual Tensor allocate(Shape shape, ElemType type) = 0;
  // Copies bytes between two places of this backend's memory.
  virtual void copy_bytes(std::byte* dst, const std::byte* src, size_t bytes) = 0;
};

// "cpu" gives the reference backend; "cuda" the CUDA backend (a runtime error saying why when
// tetra was built without it or no usable device is present).
std::unique_ptr<Backend> make_backend(const std::string& device);

}  // namespace tetra
