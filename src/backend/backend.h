#pragma once
// Backend: every operation the DeepSeek-V4 forward needs, on tensors in the backend's memory.
// The model (src/model/forward.*) is written once against this interface; cpu/ is the exact
// reference, a CUDA backend implements the same operations with kernels.
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/tensor.h"
#include "model/config.h"
#include "model/kv_layout.h"
#include "model/weights.h"

namespace tetra {

// One kind of per-sequence state in a paged cache: rows in fixed-size blocks of `pool`, and per
// sequence slot a row of `tables` listing its blocks (this kind's from column `offset`).
struct PagedRows {
  Tensor pool;    // the cache's blocks, block b at byte b·block_bytes
  Tensor tables;  // i32 [slots, width]
  int64_t width = 0, offset = 0;
  int64_t rows_per_block = 0, row_bytes = 0, block_bytes = 0;
  int64_t capacity = 0;  // rows a sequence can hold in this kind (the table's blocks)
};

// Where each row of a step sits in its sequence (i32 [rows] each, on the device). Padding rows
// (slot -1) read and write no state.
struct StepRows {
  Tensor slot;       // the sequence's slot in the cache tables
  Tensor position;   // the token's position
  Tensor start;      // first position of the sequence in this step
  Tensor last;       // last position of the sequence in this step
  Tensor first_row;  // the row of `start`
};

// How store_rows places row r (position t) of a step: a ring keeps the last `ring` positions
// (slot t mod ring); otherwise the row is entry (t+1)/ratio - 1, stored when t completes a window.
struct RowPlacement {
  int64_t ring = 0;
  int64_t ratio = 0;
};

struct AttentionShape {
  KvCacheDtype kv = KvCacheDtype::fp8;
  int64_t head_dim = 0, rope_dim = 0;
  int64_t window = 0;  // keys t-window+1 .. t
  int64_t ratio = 0;   // compressed entries: 0 none; with `selected` those, else every finished one
  double scale = 1;
  // Where set, the output leaves rotated back (inverse rope at each row's position by these
  // rope_dim/2 frequencies), as V4 rotates it before wo_a: one op, so that a backend can rotate
  // the values as it writes them.
  const Tensor* output_inv_freq = nullptr;
};

// A recorded sequence of backend work, replayed as a whole (a CUDA graph).
class DeviceGraph {
 public:
  virtual ~DeviceGraph() = default;
  virtual void launch() = 0;
};

struct MixWeights {  // the outputs of mHC pre
  Tensor x;     // [n, dim]   sub-block input: rms_norm(Σ pre[i]·h[i]) with the sub-block's norm
  Tensor post;  // [n, hc]
  Tensor comb;  // [n, hc, hc]
};

struct Streams {  // the residual streams entering a sub-block, with its mHC pre mix of them
  Tensor h;       // [n, hc·dim]
  MixWeights mix;
};

struct Routing {
  Tensor weights;  // [n, k] f32
  Tensor experts;  // [n, k] i32
};

// A step's rows as consecutive runs, one per sequence (their lengths, summing to the rows;
// empty: all rows are one run). Ops whose kernel depends on how many rows they get (linear
// layers, experts) choose it per run, so that a row's result depends only on its own
// sequence's rows: a sequence's output is the same whatever else shares its steps.
using RowRuns = std::span<const int64_t>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Bytes this backend could still allocate now (the host's available memory, or the device's
  // free memory): what sizes the cache pool once the weights are in.
  virtual int64_t free_memory_bytes() const = 0;
  // Makes this backend's device the calling thread's current one (GPUs; a no-op elsewhere):
  // expert parallelism runs each rank's backend from a thread of its own.
  virtual void bind_thread() {}

  // ---- memory
  virtual Tensor upload(std::span<const float> values, Shape shape) = 0;
  virtual Tensor upload_i32(std::span<const int32_t> values, Shape shape) = 0;
  virtual std::vector<float> download(const Tensor& t) = 0;
  virtual std::vector<int32_t> download_i32(const Tensor& t) = 0;
  virtual Tensor load_linear(const LinearWeight& w) = 0;  // exact values of any weight format
  virtual Tensor zeros(Shape shape, ElemType type) = 0;
  // Overwrites dst's i32 elements [offset, offset + values.size()), in order with the backend's work.
  virtual void write_i32(const Tensor& dst, int64_t offset, std::span<const int32_t> values) = 0;
  // Records what `body` runs into a graph to replay; nullptr when this backend only runs eagerly.
  virtual std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body);
  // Runs `side`, then `main`: two pieces of work of which neither reads or writes what the other
  // writes, so that a backend may run them side by side (a CUDA graph's two branches). Results
  // do not depend on which it does.
  virtual void concurrently(const std::function<void()>& side, const std::function<void()>& main);
  // The same for every backend, built on upload(), allocate() and copy_bytes().
  Tensor load_param(const ParamWeight& p);  // f32 (i32 for integer tables)
  Tensor slice_rows(const Tensor& t, int64_t begin, int64_t count);
  Tensor concat_rows(const std::vector<Tensor>& parts, Shape row_shape, ElemType type);
  void copy_into(const Tensor& dst, const Tensor& src);  // same byte size

  // ---- dense math (f32)
  virtual Tensor embed(const Tensor& table, const Tensor& ids) = 0;
  // x·wᵀ. `runs`: the step's rows per sequence (RowRuns).
  virtual Tensor linear(const Tensor& x, const Tensor& w, RowRuns runs = {}) = 0;
  // o_groups block-diagonal projection: x [n, groups·in_g], w [groups·out_g, in_g]
  virtual Tensor grouped_linear(const Tensor& x, const Tensor& w, int64_t groups, RowRuns runs = {}) = 0;
  // RMSNorm over each run of `group` values (weight [group] or none).
  virtual Tensor rms_norm(const Tensor& x, const Tensor* weight, int64_t group, double eps) = 0;
  // Interleaved RoPE on the last inv_freq.size()·2 dims of every `head_dim` run of each row,
  // rotating row r by positions[r]·θ (by -positions[r]·θ when inverse).
  virtual void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, int64_t head_dim, bool inverse) = 0;
  // rms_norm over every head_dim run, then rope on it: one op so that a backend can do both in
  // one pass. The default composes the two.
  virtual Tensor rms_norm_rope(const Tensor& x, const Tensor* weight, int64_t head_dim, double eps,
                               const Tensor& positions, const Tensor& inv_freq);
  // rms_norm_rope of each (x, weight) pair, all at the same rows and positions: one op so that a
  // backend can run them in one launch (an attention layer's query and key). The default runs
  // them one by one.
  struct NormRopeInput {
    const Tensor* x;
    const Tensor* weight;  // may be null
  };
  virtual std::vector<Tensor> rms_norm_ropes(const std::vector<NormRopeInput>& inputs, int64_t head_dim, double eps,
                                             const Tensor& positions, const Tensor& inv_freq);
  virtual Tensor add(const Tensor& a, const Tensor& b) = 0;
  virtual Tensor swiglu(const Tensor& gate, const Tensor& up, double limit) = 0;
  // swiglu(x·w1ᵀ, x·w3ᵀ, limit): one op so that a backend can do it in one pass. The default
  // composes the three.
  virtual Tensor gated_linear(const Tensor& x, const Tensor& w1, const Tensor& w3, double limit, RowRuns runs = {});
  // x·wᵀ for every w of ws, in order: one op so that a backend can run linears sharing their
  // input in one launch (the projections of an attention layer's input). The default runs them
  // one by one.
  virtual std::vector<Tensor> linears(const Tensor& x, const std::vector<const Tensor*>& ws, RowRuns runs = {});

  // ---- mHC
  // The mixed streams come out RMS-normalized with `norm` (c.norm_eps), as the sub-block (and the
  // head) take them: one op so that a backend can normalize the row it has just mixed.
  virtual MixWeights hc_pre(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                            const Tensor& norm, const ModelConfig& c) = 0;
  // The sub-block's output y, plus y_plus where given (a MoE's routed and shared experts: the sum
  // add() gives, bit for bit, without its own pass), goes into the streams h.
  virtual Tensor hc_post(const Tensor& h, const Tensor& y, const Tensor* y_plus, const Tensor& post,
                         const Tensor& comb) = 0;
  // hc_post's update, then the next sub-block's hc_pre of the updated streams: one op so that a
  // backend can mix the rows as it updates them. The default runs the two.
  virtual Streams hc_post_pre(const Tensor& h, const Tensor& y, const Tensor* y_plus, const Tensor& post,
                              const Tensor& comb, const Tensor& fn, const Tensor& base, const Tensor& scale,
                              const Tensor& norm, const ModelConfig& c);
  virtual Tensor hc_head(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale,
                         const Tensor& norm, const ModelConfig& c) = 0;

  // ---- MoE
  // tid2eid (hash layers) or bias (optional, score layers) select; ids are the token ids.
  virtual Routing route(const Tensor& logits, const Tensor* bias, const Tensor* tid2eid, const Tensor& ids,
                        const ModelConfig& c) = 0;
  virtual Tensor experts(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1,
                         const std::vector<Tensor>& w2, const std::vector<Tensor>& w3, double limit, RowRuns runs = {}) = 0;
  // experts() in two halves, for ranks that each hold some of the experts (expert parallelism):
  // expert_slots gives every (row, slot) its expert's output, [n·k, dim] (row t·k + j), zeros
  // where that expert's weights are empty (another rank holds them); combine_slots adds each
  // row's slots times their weights in slot order: what experts() gives, bit for bit. The
  // defaults say this backend does not split experts.
  virtual Tensor expert_slots(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1,
                              const std::vector<Tensor>& w2, const std::vector<Tensor>& w3, double limit,
                              RowRuns runs = {});
  virtual Tensor combine_slots(const Tensor& slots, const Routing& r);

  // ---- attention over the paged per-sequence state
  // Copies rows [n, row_bytes] of a step into `dst` as `at` and `place` say (row_bytes = dst.row_bytes).
  virtual void store_rows(const PagedRows& dst, const Tensor& rows, const StepRows& at, RowPlacement place) = 0;
  // The compressor (SPEC): kv and gate [n, width] of a step's tokens, ape [ratio, width] added
  // to the gate by position mod ratio. Row r gives the softmax-pooled entry of the window its
  // position completes ([n, width or width/2], zeros where it completes none), reading earlier
  // positions of the window (and, with overlap, of the previous one) from `pending`; then each
  // sequence's last positions are kept in `pending` (row t mod pending ring: [kv | gate + ape]).
  // `runs`: the step's rows per sequence (RowRuns): with one row each the pool reads no ring row
  // the keep writes, and a backend may do both in one pass.
  virtual Tensor compress(const PagedRows& pending, const Tensor& kv, const Tensor& gate, const Tensor& ape,
                          const StepRows& at, int64_t ratio, bool overlap, RowRuns runs = {}) = 0;
  // Sparse attention with sinks, the key lists built here: row r (position t) of q [n, heads·d]
  // attends to positions max(0, t-window+1)..t (this step's rows of step_kv, stored-format
  // [n, row], for positions from its sequence's start; `window` ring rows before), then to
  // `compressed` entries: selected[r] (CSA, -1: none) or every e < (t+1)/ratio (HCA). Every key
  // is read in its stored format. `step_entries` (may be null): the entries this step's rows
  // complete as `compressed` stores them (row r: the entry its position completes, zeros
  // elsewhere), which a backend may read there instead: the same keys, the same result.
  // `runs`: the step's rows per sequence (RowRuns).
  virtual Tensor attention(const Tensor& q, const Tensor& step_kv, const PagedRows& window, const PagedRows* compressed,
                           const Tensor* step_entries, const Tensor* selected, const Tensor& sinks, const StepRows& at,
                           const AttentionShape& s, RowRuns runs = {}) = 0;
  // Lightning indexer over the stored keys: per row (position t, its sequence's last position
  // in this step `last`), the top-k of the first (t+1)/ratio of the (last+1)/ratio keys
  // (entry indices, -1 when fewer exist).
  virtual Tensor indexer_topk(const Tensor& q, const Tensor& weights, const PagedRows& keys, IndexerCacheDtype t,
                              const StepRows& at, int64_t heads, int64_t k, int64_t ratio, double weight_scale) = 0;

  // ---- caches: encode rows into the storage layout, decode back to f32
  virtual Tensor encode_kv(const Tensor& rows, KvCacheDtype t, int64_t rope_dim) = 0;
  virtual Tensor decode_kv(const Tensor& bytes, KvCacheDtype t, int64_t head_dim, int64_t rope_dim) = 0;
  virtual Tensor encode_indexer(const Tensor& rows, IndexerCacheDtype t) = 0;
  virtual Tensor decode_indexer(const Tensor& bytes, IndexerCacheDtype t, int64_t head_dim) = 0;
  // The indexer query as the cache type sees it (fp4: rotated and rounded like the keys).
  virtual Tensor indexer_query(const Tensor& q, IndexerCacheDtype t, int64_t head_dim) = 0;
  // rope on every head of q (not inverse), then indexer_query, leaving q as it was: one op so that
  // a backend can do both in one pass. The default runs the two on a copy.
  virtual Tensor rope_indexer_query(const Tensor& q, const Tensor& positions, const Tensor& inv_freq,
                                    IndexerCacheDtype t, int64_t head_dim);

 protected:
  // Storage for a tensor in this backend's memory.
  virtual Tensor allocate(Shape shape, ElemType type) = 0;
  // Copies bytes between two places of this backend's memory.
  virtual void copy_bytes(std::byte* dst, const std::byte* src, size_t bytes) = 0;
};

// "cpu" gives the reference backend; "cuda" the CUDA backend (a runtime error saying why when
// tetra was built without it or no usable device is present), on GPU `index` (-1: the calling
// thread's current device; the CPU ignores it).
std::unique_ptr<Backend> make_backend(const std::string& device, int index = -1);
// One backend a rank of expert parallelism (--expert-parallel): on cuda GPUs 0..ranks-1 (the
// current one for a single rank), on the cpu `ranks` reference backends.
std::vector<std::unique_ptr<Backend>> make_backends(const std::string& device, int ranks);
// The backends' addresses, in order (what Model takes).
std::vector<Backend*> pointers(const std::vector<std::unique_ptr<Backend>>& backends);
// work(i) for each backend i in turn on this thread, with that backend bound to it; the first
// bound after (where the calling thread's work goes on).
void in_turn(const std::vector<Backend*>& backends, const std::function<void(size_t)>& work);

}  // namespace tetra
