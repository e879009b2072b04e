#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "backend/cuda/cache_codec.h"
#include "backend/cuda/capture_arena.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/dequant_gemm.h"
#include "backend/cuda/dequantize.h"
#include "backend/cuda/device.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/gemm_operands.h"
#include "backend/cuda/linear.h"
#include "backend/cuda/mhc.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/moe_grouped.h"
#include "backend/cuda/norm_rope.h"
#include "backend/cuda/paged.h"
#include "backend/cuda/pool_buffer.h"
#include "core/error.h"

namespace tetra {
namespace {

using cuda::WeightRef;

// Dispatch by rows per sequence (RowRuns): short runs take the decode kernels (linear.cu,
// moe.cu: each weight byte read once per step, no host synchronization, every row computed
// the same way whatever the rows), long ones the tensor-core path (dequant_gemm.h,
// moe_grouped.h), one call per run. Linear: runs of 1..64 rows belong to the decode kernels.
// MoE: the grouped path overtook the per-pair one between 32 and 64 tokens on the H200
// (docs/cuda.md).
constexpr int64_t kTensorCoreMinRows = 65;
constexpr int64_t kGroupedExpertsMinTokens = 64;
// Attention (bf16 numerics): a row of a run of 64+ rows walks its whole key list in one block
// (the run fills the GPU); shorter runs (decode) split each row's keys over blocks and combine.
constexpr int64_t kWholeKeyListMinRows = 64;

void expect(bool ok, const char* op, const char* what) {
  if (!ok) runtime_error("cuda backend ", op, ": ", what);
}

// Rows that one kernel choice covers: each run of at least `min_rows` rows alone (`large`),
// consecutive shorter runs together.
struct RowRange {
  int64_t begin = 0, count = 0;
  bool large = false;
};
std::vector<RowRange> kernel_ranges(RowRuns runs, int64_t rows, int64_t min_rows) {
  const int64_t whole[] = {rows};
  std::vector<RowRange> out;
  int64_t begin = 0;
  for (const int64_t n : runs.empty() ? RowRuns(whole) : runs) {
    const bool large = n >= min_rows;
    if (!large && !out.empty() && !out.back().large) out.back().count += n;
    else if (n > 0) out.push_back({begin, n, large});
    begin += n;
  }
  expect(begin == rows, "row runs", "the runs do not add up to the rows");
  return out;
}

// The device-side WeightRef tables of one layer's routed experts, and the host-side copies
// and per-tensor factors that the grouped (prefill) path launches from.
struct ExpertTables {
  cuda::DeviceBuffer w1, w2, w3;
  cuda::ExpertLayout layout;
  int64_t inter = 0;
  bool round_input = true;
  std::vector<WeightRef> host_w1, host_w2, host_w3;
  std::vector<float> w2_alpha;
  cuda::DeviceBuffer up_alpha;  // [experts, 2]: w1's and w3's per-tensor factors
  // Expert parallelism: [experts] i32, e where expert e is held here, `experts` where not
  // (cuda::GroupedExperts::expert_key); empty when every expert is held.
  cuda::DeviceBuffer expert_key;
};

// A linear layer's checkpoint tensors on the device. Its Tensor is a u8 [out, in] handle whose
// storage is this host-side record (only this backend reads a weight's storage).
struct LinearOnDevice {
  cuda::DeviceLinear tensors;
  bool round_input = true;
  float alpha = 1;  // the per-tensor factor (nvfp4 weight_scale_2, fp8_tensor scalar) for the GEMM path
  // Built on first use when this is a layer's first routed expert; dies with the weights.
  std::unique_ptr<ExpertTables> expert_tables;

  WeightRef ref() const {
    return {tensors.format, tensors.weight_dtype, tensors.scale_dtype, tensors.weight.get(), tensors.scale.get(),
            tensors.global_scale, tensors.out, tensors.in};
  }
};

// The factor the tensor-core path applies as alpha instead of dequantizing it into the tile.
float per_tensor_factor(const LinearWeight& w) {
  if (w.format == WeightFormat::nvfp4) return w.global_scale;
  if (w.format != WeightFormat::fp8_tensor) return 1;
  float s = 0;
  std::memcpy(&s, w.scale.data, sizeof s);
  return s;
}

// Whether work queued on `stream` now is being captured into a CUDA graph: the tensor-core
// path may grow its scratch and synchronizes for the grouped MoE, so captures keep the decode
// kernels.
bool capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  TETRA_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

int current_device() {
  int device = 0;
  TETRA_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

class CudaBackend final : public Backend {
 public:
  // On the calling thread's current device.
  explicit CudaBackend(CudaNumerics numerics)
      : numerics_(numerics),
        device_(current_device()),
        attention_wgmma_(numerics.warpgroup_mma_attention && cuda::attention_warpgroup_mma_supported()),
        stream_(std::make_shared<cuda::CudaStream>()) {
    // Tensors come and go every step: keep freed memory in the pool instead of returning it.
    cudaMemPool_t pool = nullptr;
    TETRA_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device_));
    uint64_t keep = UINT64_MAX;
    TETRA_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }

  std::string name() const override { return "cuda"; }
  void bind_thread() override { TETRA_CUDA_CHECK(cudaSetDevice(device_)); }
  int device() const { return device_; }
  cudaStream_t work_stream() const { return stream_->get(); }
  int64_t free_memory_bytes() const override {
    // this backend's device, whichever the calling thread's is (ranks of expert parallelism)
    const int caller = current_device();
    TETRA_CUDA_CHECK(cudaSetDevice(device_));
    size_t free = 0, total = 0;
    const cudaError_t e = cudaMemGetInfo(&free, &total);
    TETRA_CUDA_CHECK(cudaSetDevice(caller));
    TETRA_CUDA_CHECK(e);
    return int64_t(free);
  }

  // ---- memory
  Tensor upload(std::span<const float> values, Shape shape) override {
    expect(int64_t(values.size()) == shape_numel(shape), "upload", "size does not match the shape");
    Tensor t = make(std::move(shape), ElemType::f32);
    copy_in(t, values.data(), values.size() * sizeof(float));
    return t;
  }
  Tensor upload_i32(std::span<const int32_t> values, Shape shape) override {
    expect(int64_t(values.size()) == shape_numel(shape), "upload_i32", "size does not match the shape");
    Tensor t = make(std::move(shape), ElemType::i32);
    copy_in(t, values.data(), values.size() * sizeof(int32_t));
    return t;
  }
  std::vector<float> download(const Tensor& t) override {
    expect(t.type() == ElemType::f32, "download", "tensor is not f32");
    std::vector<float> v(size_t(t.numel()));
    copy_out(t, v.data(), v.size() * sizeof(float));
    return v;
  }
  std::vector<int32_t> download_i32(const Tensor& t) override {
    expect(t.type() == ElemType::i32, "download_i32", "tensor is not i32");
    std::vector<int32_t> v(size_t(t.numel()));
    copy_out(t, v.data(), v.size() * sizeof(int32_t));
    return v;
  }
  Tensor load_linear(const LinearWeight& w) override {
    auto d = std::make_shared<LinearOnDevice>();
    d->tensors = cuda::upload_linear(w, stream());
    // The router and the head stay f32 (DESIGN.md numerics).
    d->round_input = numerics_.bf16_linear_inputs && !(w.role == "head" || ends_with(w.role, ".ffn.gate"));
    d->alpha = per_tensor_factor(w);
    std::shared_ptr<std::byte[]> storage(d, reinterpret_cast<std::byte*>(d.get()));
    return Tensor({w.out, w.in}, ElemType::u8, std::move(storage));
  }

  Tensor zeros(Shape shape, ElemType type) override {
    Tensor t = make(std::move(shape), type);
    TETRA_CUDA_CHECK(cudaMemsetAsync(t.data<std::byte>(), 0, size_t(t.numel() * elem_bytes(type)), stream()));
    return t;
  }
  void write_i32(const Tensor& dst, int64_t offset, std::span<const int32_t> values) override {
    expect(dst.type() == ElemType::i32 && offset >= 0 && offset + int64_t(values.size()) <= dst.numel(), "write_i32",
           "values outside the tensor");
    // From pageable memory the call returns once `values` is staged: the caller may reuse it.
    if (!values.empty())
      TETRA_CUDA_CHECK(cudaMemcpyAsync(dst.data<int32_t>() + offset, values.data(), values.size() * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream()));
  }
  std::unique_ptr<DeviceGraph> capture(const std::function<void()>& body) override {
    recording_ = true;  // make() places the body's tensors in the arena (capture_arena.h)
    struct Reset {
      CudaBackend& be;
      ~Reset() { be.recording_ = be.sinkhorn_pending_ = false; }
    } reset{*this};
    return std::make_unique<cuda::CudaGraph>(stream_, arena_, [&] {
      body();
      join_sinkhorn();  // a capture ends with every branch joined
    });
  }
  // While a graph is recorded, `side` goes on a second stream that forks from the main one here
  // and joins it before anything after this call: the graph gets two branches that run side by
  // side (small decode kernels fill few of the GPU's multiprocessors). Run eagerly, in order.
  void concurrently(const std::function<void()>& side, const std::function<void()>& main) override {
    if (!recording_ || branching_) return Backend::concurrently(side, main);
    TETRA_CUDA_CHECK(cudaEventRecord(fork_.get(), stream_->get()));
    TETRA_CUDA_CHECK(cudaStreamWaitEvent(side_stream_->get(), fork_.get()));
    struct Join {  // also when a branch throws: a capture with an unjoined stream fails to end
      CudaBackend& be;
      ~Join() {
        be.current_ = be.stream_->get();
        cudaEventRecord(be.join_.get(), be.side_stream_->get());
        cudaStreamWaitEvent(be.stream_->get(), be.join_.get());
        be.arena_->resume_releases();
        be.branching_ = false;
      }
    } join{*this};
    branching_ = true;
    arena_->hold_releases();
    current_ = side_stream_->get();
    side();
    current_ = stream_->get();
    main();
  }

  // ---- dense math
  Tensor embed(const Tensor& table, const Tensor& ids) override {
    const int64_t n = ids.numel(), width = table.row_numel();
    Tensor out = make({n, width}, ElemType::f32);
    cuda::gather_rows(table.data<float>(), table.rows(), width, ids.data<int32_t>(), n, out.data<float>(), stream());
    return out;
  }
  Tensor linear(const Tensor& x, const Tensor& w, RowRuns runs) override { return grouped_linear(x, w, 1, runs); }
  Tensor grouped_linear(const Tensor& x, const Tensor& w, int64_t groups, RowRuns runs) override {
    bool round = false;
    float alpha = 1;
    const WeightRef ref = weight_ref(w, round, &alpha);
    expect(groups >= 1 && ref.out % groups == 0, "linear", "output rows are not a multiple of the groups");
    expect(x.row_numel() == groups * ref.in, "linear", "input width does not match groups × weight width");
    Tensor out = make({x.rows(), ref.out}, ElemType::f32);
    linear_ranges(x, ref, alpha, round, groups, kernel_ranges(runs, x.rows(), kTensorCoreMinRows), {},
                  out.data<float>());
    return out;
  }
  // Runs short enough for the decode kernels take the one-launch gated kernel, which equals the
  // three ops bit for bit; otherwise (a prefill run, or weights it does not take) the three ops.
  Tensor gated_linear(const Tensor& x, const Tensor& w1, const Tensor& w3, double limit, RowRuns runs) override {
    bool round1 = false, round3 = false;
    float alpha1 = 1, alpha3 = 1;
    const WeightRef r1 = weight_ref(w1, round1, &alpha1), r3 = weight_ref(w3, round3, &alpha3);
    const std::vector<RowRange> ranges = kernel_ranges(runs, x.rows(), kTensorCoreMinRows);
    const bool short_runs = std::none_of(ranges.begin(), ranges.end(), [&](const RowRange& r) { return tensor_cores(r.large); });
    if (short_runs && round1 == round3 && x.row_numel() == r1.in) {
      Tensor out = make({x.rows(), r1.out}, ElemType::f32);
      if (cuda::gated_linear(r1, r3, x.data<float>(), x.rows(), round1, float(limit), out.data<float>(), stream()))
        return out;
    }
    return Backend::gated_linear(x, w1, w3, limit, runs);
  }
  // The weights of a linears() call: their refs, per-tensor factors and input rounding.
  struct SharedInputWeights {
    std::vector<WeightRef> refs;
    std::vector<float> alphas;
    std::vector<bool> rounds;
  };
  SharedInputWeights shared_input_weights(const Tensor& x, const std::vector<const Tensor*>& ws) const {
    SharedInputWeights w{std::vector<WeightRef>(ws.size()), std::vector<float>(ws.size()),
                         std::vector<bool>(ws.size())};
    for (size_t i = 0; i < ws.size(); ++i) {
      bool round = false;
      w.refs[i] = weight_ref(*ws[i], round, &w.alphas[i]);
      w.rounds[i] = round;
      expect(x.row_numel() == w.refs[i].in, "linear", "input width does not match the weight width");
    }
    return w;
  }
  // Short runs (decode): the weights of one layout (format, dtypes, input rounding) run in one
  // launch per layout; anything else (a prefill run, weights the kernels do not take, a layout
  // of one weight) one linear at a time.
  std::vector<Tensor> linears(const Tensor& x, const std::vector<const Tensor*>& ws, RowRuns runs) override {
    const std::vector<RowRange> ranges = kernel_ranges(runs, x.rows(), kTensorCoreMinRows);
    const SharedInputWeights w = shared_input_weights(x, ws);
    if (std::any_of(ranges.begin(), ranges.end(), [&](const RowRange& r) { return tensor_cores(r.large); }))
      return tensor_core_linears(x, w, ranges);
    const std::vector<WeightRef>& refs = w.refs;
    const std::vector<bool>& rounds = w.rounds;
    std::vector<Tensor> out(ws.size());
    std::vector<bool> done(ws.size(), false);
    for (size_t i = 0; i < ws.size(); ++i) {
      if (done[i]) continue;
      std::vector<size_t> set;  // i and the later weights of its layout
      for (size_t j = i; j < ws.size() && set.size() < size_t(cuda::kMaxLinearsPerLaunch); ++j)
        if (!done[j] && rounds[j] == rounds[i] && cuda::same_encoding(refs[j], refs[i])) set.push_back(j);
      std::vector<WeightRef> set_refs;
      std::vector<Tensor> products;
      std::vector<float*> ys;
      for (size_t j : set) {
        set_refs.push_back(refs[j]);
        products.push_back(make({x.rows(), refs[j].out}, ElemType::f32));
        ys.push_back(products.back().data<float>());
      }
      if (set.size() > 1 &&
          cuda::linears(set_refs.data(), ys.data(), int(set.size()), x.data<float>(), x.rows(), rounds[i], stream())) {
        for (size_t k = 0; k < set.size(); ++k) {
          out[set[k]] = std::move(products[k]);
          done[set[k]] = true;
        }
      } else {
        out[i] = linear(x, *ws[i], runs);
        done[i] = true;
      }
    }
    return out;
  }
  // A step with tensor-core runs: each weight over every range, the long ranges' rows of x
  // rounded to bf16 once for all the weights that read them rounded (the x-projections of a
  // prefill chunk are up to 7 weights over the same [rows, dim]).
  std::vector<Tensor> tensor_core_linears(const Tensor& x, const SharedInputWeights& w,
                                          const std::vector<RowRange>& ranges) {
    std::vector<cuda::PoolBuffer> rounded(ranges.size());
    if (std::count(w.rounds.begin(), w.rounds.end(), true) > 1)
      for (size_t k = 0; k < ranges.size(); ++k)
        if (tensor_cores(ranges[k].large)) {
          const int64_t count = ranges[k].count * x.row_numel();
          rounded[k] = cuda::PoolBuffer(size_t(count) * cuda::operand_bytes(cuda::OperandType::bf16), stream());
          cuda::round_to_bf16(x.data<float>() + ranges[k].begin * x.row_numel(), count, rounded[k].get(), stream());
        }
    std::vector<Tensor> out;
    for (size_t i = 0; i < w.refs.size(); ++i) {
      out.push_back(make({x.rows(), w.refs[i].out}, ElemType::f32));
      linear_ranges(x, w.refs[i], w.alphas[i], w.rounds[i], 1, ranges, rounded, out.back().data<float>());
    }
    return out;
  }
  // y = x·wᵀ over a step's row ranges: the decode kernels for short ones, the tensor cores for
  // long ones (reading rounded[k], range k's rows of x in bf16, where there is one).
  void linear_ranges(const Tensor& x, const WeightRef& ref, float alpha, bool round, int64_t groups,
                     const std::vector<RowRange>& ranges, const std::vector<cuda::PoolBuffer>& rounded, float* y) {
    for (size_t k = 0; k < ranges.size(); ++k) {
      const RowRange& r = ranges[k];
      const float* xr = x.data<float>() + r.begin * x.row_numel();
      float* yr = y + r.begin * ref.out;
      if (tensor_cores(r.large))
        gemm().linear(ref, alpha, xr, r.count, groups, round, yr, k < rounded.size() ? rounded[k].get() : nullptr);
      else
        cuda::linear(ref, xr, r.count, groups, round, yr, stream());
    }
  }

  Tensor rms_norm(const Tensor& x, const Tensor* weight, int64_t group, double eps) override {
    expect(x.numel() % group == 0, "rms_norm", "size is not a multiple of the group");
    Tensor out = make(x.shape(), ElemType::f32);
    cuda::rms_norm(x.data<float>(), weight ? weight->data<float>() : nullptr, x.numel() / group, group, float(eps),
                   out.data<float>(), stream());
    return out;
  }
  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, int64_t head_dim, bool inverse) override {
    expect(positions.numel() == x.rows(), "rope", "one position per row is needed");
    cuda::rope(x.data<float>(), positions.data<int32_t>(), inv_freq.data<float>(), x.rows(), x.row_numel() / head_dim,
               head_dim, inv_freq.numel(), inverse, stream());
  }
  Tensor rms_norm_rope(const Tensor& x, const Tensor* weight, int64_t head_dim, double eps, const Tensor& positions,
                       const Tensor& inv_freq) override {
    expect(x.row_numel() % head_dim == 0, "rms_norm_rope", "a row is not a whole number of heads");
    expect(positions.numel() == x.rows(), "rms_norm_rope", "one position per row is needed");
    Tensor out = make(x.shape(), ElemType::f32);
    if (cuda::rms_norm_rope(x.data<float>(), weight ? weight->data<float>() : nullptr, x.rows(), x.row_numel() / head_dim,
                            head_dim, float(eps), positions.data<int32_t>(), inv_freq.data<float>(), inv_freq.numel(),
                            out.data<float>(), stream()))
      return out;
    return Backend::rms_norm_rope(x, weight, head_dim, eps, positions, inv_freq);  // shapes the fused kernel does not take
  }
  std::vector<Tensor> rms_norm_ropes(const std::vector<NormRopeInput>& inputs, int64_t head_dim, double eps,
                                     const Tensor& positions, const Tensor& inv_freq) override {
    std::vector<Tensor> out;
    std::vector<cuda::NormRopePart> parts;
    for (const NormRopeInput& in : inputs) {
      const Tensor& x = *in.x;
      expect(x.row_numel() % head_dim == 0, "rms_norm_ropes", "a row is not a whole number of heads");
      expect(x.rows() == positions.numel(), "rms_norm_ropes", "one position per row is needed");
      out.push_back(make(x.shape(), ElemType::f32));
      parts.push_back({x.data<float>(), in.weight ? in.weight->data<float>() : nullptr, x.row_numel() / head_dim,
                       out.back().data<float>()});
    }
    if (cuda::rms_norm_ropes(parts.data(), int(parts.size()), positions.numel(), head_dim, float(eps),
                             positions.data<int32_t>(), inv_freq.data<float>(), inv_freq.numel(), stream()))
      return out;
    return Backend::rms_norm_ropes(inputs, head_dim, eps, positions, inv_freq);  // more parts, or other shapes
  }
  Tensor add(const Tensor& a, const Tensor& b) override {
    expect(a.numel() == b.numel(), "add", "sizes differ");
    Tensor out = make(a.shape(), ElemType::f32);
    cuda::add(a.data<float>(), b.data<float>(), a.numel(), out.data<float>(), stream());
    return out;
  }
  Tensor swiglu(const Tensor& gate, const Tensor& up, double limit) override {
    expect(gate.numel() == up.numel(), "swiglu", "sizes differ");
    Tensor out = make(gate.shape(), ElemType::f32);
    cuda::swiglu(gate.data<float>(), up.data<float>(), gate.numel(), float(limit), out.data<float>(), stream());
    return out;
  }

  // ---- mHC
  MixWeights hc_pre(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                    const ModelConfig& c) override {
    const int64_t n = h.rows();
    MixWeights m{make({n, c.dim}, ElemType::f32), make({n, c.hc_mult}, ElemType::f32),
                 make({n, c.hc_mult, c.hc_mult}, ElemType::f32)};
    const Tensor scratch = make({cuda::hc_scratch_floats(n, hc_params(c))}, ElemType::f32);
    cuda::hc_pre(h.data<float>(), fn.data<float>(), base.data<float>(), scale.data<float>(), norm.data<float>(), n,
                 hc_params(c), scratch.data<float>(), m.x.data<float>(), m.post.data<float>(), m.comb.data<float>(),
                 stream());
    sinkhorn_aside(m.comb, c);
    return m;
  }
  Streams hc_post_pre(const Tensor& h, const Tensor& y, const Tensor* y_plus, const Tensor& post, const Tensor& comb,
                      const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                      const ModelConfig& c) override {
    const int64_t n = h.rows();
    expect(post.dim(1) == c.hc_mult && y.dim(1) == c.dim, "hc_post_pre", "post or y does not match the config");
    Streams s{make(h.shape(), ElemType::f32),
              {make({n, c.dim}, ElemType::f32), make({n, c.hc_mult}, ElemType::f32),
               make({n, c.hc_mult, c.hc_mult}, ElemType::f32)}};
    const Tensor scratch = make({cuda::hc_scratch_floats(n, hc_params(c))}, ElemType::f32);
    join_sinkhorn();  // comb
    cuda::hc_post_pre(h.data<float>(), sub_block_output(y, y_plus), post.data<float>(), comb.data<float>(), fn.data<float>(),
                      base.data<float>(), scale.data<float>(), norm.data<float>(), n, hc_params(c),
                      scratch.data<float>(), s.h.data<float>(), s.mix.x.data<float>(), s.mix.post.data<float>(),
                      s.mix.comb.data<float>(), stream());
    sinkhorn_aside(s.mix.comb, c);
    return s;
  }
  Tensor hc_post(const Tensor& h, const Tensor& y, const Tensor* y_plus, const Tensor& post,
                 const Tensor& comb) override {
    Tensor out = make(h.shape(), ElemType::f32);
    join_sinkhorn();  // comb
    cuda::hc_post(h.data<float>(), sub_block_output(y, y_plus), post.data<float>(), comb.data<float>(), h.rows(), post.dim(1), y.dim(1),
                  out.data<float>(), stream());
    return out;
  }
  Tensor hc_head(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                 const ModelConfig& c) override {
    Tensor out = make({h.rows(), c.dim}, ElemType::f32);
    const Tensor scratch = make({cuda::hc_scratch_floats(h.rows(), hc_params(c))}, ElemType::f32);
    cuda::hc_head(h.data<float>(), fn.data<float>(), base.data<float>(), scale.data<float>(), norm.data<float>(),
                  h.rows(), hc_params(c), scratch.data<float>(), out.data<float>(), stream());
    return out;
  }

  // ---- MoE
  Routing route(const Tensor& logits, const Tensor* bias, const Tensor* tid2eid, const Tensor& ids,
                const ModelConfig& c) override {
    const int64_t n = logits.rows(), k = c.n_activated_experts;
    Routing out{make({n, k}, ElemType::f32), make({n, k}, ElemType::i32)};
    cuda::RouteParams p;
    p.experts = logits.dim(1);
    p.k = k;
    p.scoring = c.scoring;
    // transformers renormalizes always; the official code skips it for softmax scoring
    p.renormalize = c.scoring != ScoringFunc::softmax || c.norm_topk_prob;
    p.route_scale = float(c.route_scale);
    cuda::route(logits.data<float>(), bias ? bias->data<float>() : nullptr, tid2eid ? tid2eid->data<int32_t>() : nullptr,
                ids.data<int32_t>(), n, p, out.weights.data<float>(), out.experts.data<int32_t>(), stream());
    return out;
  }
  Tensor experts(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                 const std::vector<Tensor>& w3, double limit, RowRuns runs) override {
    return routed(x, r, w1, w2, w3, limit, runs, false);
  }
  Tensor expert_slots(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                      const std::vector<Tensor>& w3, double limit, RowRuns runs) override {
    return routed(x, r, w1, w2, w3, limit, runs, true);
  }
  Tensor combine_slots(const Tensor& slots, const Routing& r) override {
    const int64_t n = r.experts.dim(0), k = r.experts.dim(1), d = slots.dim(1);
    expect(slots.rows() == n * k, "combine_slots", "slots do not match the routing");
    Tensor out = make({n, d}, ElemType::f32);
    cuda::combine_expert_slots(slots.data<float>(), r.weights.data<float>(), n, k, d, out.data<float>(), stream());
    return out;
  }

  // ---- attention over the paged state
  void store_rows(const PagedRows& dst, const Tensor& rows, const StepRows& at, RowPlacement place) override {
    expect(rows.row_numel() * elem_bytes(rows.type()) == dst.row_bytes, "store_rows", "row size differs from the cache's");
    cuda::store_rows(view(dst), rows.data<uint8_t>(), rows.rows(), view(at), place.ring, place.ratio, stream());
  }
  Tensor compress(const PagedRows& pending, const Tensor& kv, const Tensor& gate, const Tensor& ape, const StepRows& at,
                  int64_t ratio, bool overlap, RowRuns runs) override {
    const int64_t width = kv.dim(1);
    expect(pending.row_bytes == 2 * width * 4, "compress", "pending rows do not match the width");
    Tensor out = make({kv.rows(), overlap ? width / 2 : width}, ElemType::f32);
    const bool one_row_each =
        int64_t(runs.size()) == kv.rows() && std::all_of(runs.begin(), runs.end(), [](int64_t n) { return n == 1; });
    cuda::compress(view(pending), kv.data<float>(), gate.data<float>(), ape.data<float>(), kv.rows(), width, view(at), ratio,
                   overlap, one_row_each, out.data<float>(), stream());
    return out;
  }
  Tensor attention(const Tensor& q, const Tensor& step_kv, const PagedRows& window, const PagedRows* compressed,
                   const Tensor* step_entries, const Tensor* selected, const Tensor& sinks, const StepRows& at,
                   const AttentionShape& s, RowRuns runs) override {
    const int64_t step_bytes = step_kv.row_numel() * elem_bytes(step_kv.type());
    expect(step_bytes == window.row_bytes, "attention", "step rows differ from the cache's");
    Tensor out = make({q.rows(), q.row_numel()}, ElemType::f32);
    const cuda::RowFormat f = s.kv == KvCacheDtype::f32    ? cuda::RowFormat::f32
                              : s.kv == KvCacheDtype::bf16 ? cuda::RowFormat::bf16
                                                           : cuda::RowFormat::fp8_kv;
    const cuda::AttentionParams p{f, q.row_numel() / s.head_dim, s.head_dim, s.rope_dim, s.window, s.ratio, float(s.scale)};
    if (s.output_inv_freq)
      expect(s.output_inv_freq->numel() * 2 == s.rope_dim && at.position.numel() == q.rows(), "attention",
             "the output's rotation needs rope_dim/2 frequencies and a position per row");
    const int64_t k = selected ? selected->dim(1) : 0;
    if (step_entries)
      expect(compressed && step_entries->rows() == q.rows() &&
                 step_entries->row_numel() * elem_bytes(step_entries->type()) == compressed->row_bytes,
             "attention", "the step's entries are not a stored row per step row");
    cuda::AttentionKeys keys{step_kv.data<uint8_t>(),
                             step_bytes,
                             view(window),
                             compressed ? view(*compressed) : cuda::PagedView{},
                             compressed != nullptr,
                             selected ? selected->data<int32_t>() : nullptr,
                             k,
                             selected ? k : compressed ? compressed->capacity : 0};
    // The split kernels' combine rotates the output back as it writes it; after the others, a
    // rope pass over their rows does.
    auto run = [&](const RowRange& rows, cuda::AttentionKernel kernel, float* scratch) {
      const bool split = kernel == cuda::AttentionKernel::tensor_cores_split;
      cuda::AttentionParams rp = p;
      if (split && s.output_inv_freq) rp.output_inv_freq = s.output_inv_freq->data<float>();
      cuda::paged_attention(q.data<float>(), keys, sinks.data<float>(), view(at), rows.begin, rows.count, rp, kernel,
                            attention_wgmma_, scratch, out.data<float>(), stream());
      if (!split && s.output_inv_freq)
        cuda::rope(out.data<float>() + rows.begin * q.row_numel(), at.position.data<int32_t>() + rows.begin,
                   s.output_inv_freq->data<float>(), rows.count, p.heads, s.head_dim, s.rope_dim / 2, true, stream());
    };
    if (!numerics_.bf16_linear_inputs || !cuda::attention_tensor_cores_fit(p, step_bytes)) {
      run({0, q.rows()}, cuda::AttentionKernel::exact, nullptr);
      return out;
    }
    const std::vector<RowRange> ranges = kernel_ranges(runs, q.rows(), kWholeKeyListMinRows);
    // Long runs share their keys (a prefill's window rows and entries are seen by up to 128 and
    // ~k·ratio of its rows): the tensor-core kernels copy the step's rows and entries as bf16
    // rows decoded once here rather than decoding fp8 rows for every query.
    Tensor step_copy, entry_copy;
    if (f == cuda::RowFormat::fp8_kv && std::any_of(ranges.begin(), ranges.end(), [](const RowRange& r) { return r.large; })) {
      auto bf16_rows = [&](const Tensor& rows) {
        Tensor out = make({rows.rows(), 2 * s.head_dim}, ElemType::u8);
        cuda::attention_bf16_rows(rows.data<uint8_t>(), rows.rows(), rows.row_numel() * elem_bytes(rows.type()), p,
                                  out.data<uint8_t>(), stream());
        return out;
      };
      step_copy = bf16_rows(step_kv);
      keys.step_bf16 = step_copy.data<uint8_t>();
      if (step_entries) {
        entry_copy = bf16_rows(*step_entries);
        keys.entry_bf16 = entry_copy.data<uint8_t>();
      }
    }
    for (const RowRange& rows : ranges) {
      if (rows.large) {
        run(rows, cuda::AttentionKernel::tensor_cores, nullptr);
      } else {
        Tensor scratch = make({cuda::attention_split_floats(rows.count, p, keys)}, ElemType::f32);
        run(rows, cuda::AttentionKernel::tensor_cores_split, scratch.data<float>());
      }
    }
    return out;
  }
  Tensor indexer_topk(const Tensor& q, const Tensor& weights, const PagedRows& keys, IndexerCacheDtype t, const StepRows& at,
                      int64_t heads, int64_t k, int64_t ratio, double weight_scale) override {
    const int64_t n = q.rows(), d = q.row_numel() / heads;
    Tensor scratch = make({cuda::indexer_topk_scratch_floats(n, std::max<int64_t>(keys.capacity, 1), k)}, ElemType::f32);
    Tensor out = make({n, k}, ElemType::i32);
    const cuda::RowFormat f = t == IndexerCacheDtype::f32    ? cuda::RowFormat::f32
                              : t == IndexerCacheDtype::bf16 ? cuda::RowFormat::bf16
                                                             : cuda::RowFormat::fp4_indexer;
    // bf16 numerics: the scores on the tensor cores (bf16 queries and keys, f32 sums)
    cuda::paged_indexer_topk(q.data<float>(), weights.data<float>(), view(keys), f, n, view(at), heads, d, k, ratio,
                             float(weight_scale), numerics_.bf16_linear_inputs, scratch.data<float>(), keys.capacity,
                             out.data<int32_t>(), stream());
    return out;
  }

  // ---- caches
  Tensor encode_kv(const Tensor& rows, KvCacheDtype t, int64_t rope_dim) override {
    const int64_t n = rows.rows(), d = rows.row_numel();
    switch (t) {
      case KvCacheDtype::f32: return rows;
      case KvCacheDtype::bf16: {
        Tensor out = make({n, 2 * d}, ElemType::u8);
        cuda::encode_bf16(rows.data<float>(), n * d, out.data<uint8_t>(), stream());
        return out;
      }
      case KvCacheDtype::fp8: {
        Tensor out = make({n, kv_fp8_row_bytes(d, rope_dim)}, ElemType::u8);
        cuda::encode_kv_fp8(rows.data<float>(), n, d, rope_dim, out.data<uint8_t>(), stream());
        return out;
      }
    }
    return {};
  }
  Tensor decode_kv(const Tensor& bytes, KvCacheDtype t, int64_t head_dim, int64_t rope_dim) override {
    if (t == KvCacheDtype::f32) return bytes;
    const int64_t n = bytes.rows();
    Tensor out = make({n, head_dim}, ElemType::f32);
    if (t == KvCacheDtype::bf16)
      cuda::decode_bf16(bytes.data<uint8_t>(), n * head_dim, out.data<float>(), stream());
    else
      cuda::decode_kv_fp8(bytes.data<uint8_t>(), n, head_dim, rope_dim, out.data<float>(), stream());
    return out;
  }
  Tensor encode_indexer(const Tensor& rows, IndexerCacheDtype t) override {
    if (t == IndexerCacheDtype::f32) return rows;
    if (t == IndexerCacheDtype::bf16) return encode_kv(rows, KvCacheDtype::bf16, 0);
    const int64_t n = rows.rows(), d = rows.row_numel();
    Tensor out = make({n, indexer_fp4_row_bytes(d)}, ElemType::u8);
    cuda::encode_indexer_fp4(rows.data<float>(), n, d, out.data<uint8_t>(), stream());
    return out;
  }
  Tensor decode_indexer(const Tensor& bytes, IndexerCacheDtype t, int64_t head_dim) override {
    if (t == IndexerCacheDtype::f32) return bytes;
    if (t == IndexerCacheDtype::bf16) return decode_kv(bytes, KvCacheDtype::bf16, head_dim, 0);
    const int64_t n = bytes.rows();
    Tensor out = make({n, head_dim}, ElemType::f32);
    cuda::decode_indexer_fp4(bytes.data<uint8_t>(), n, head_dim, out.data<float>(), stream());
    return out;
  }
  Tensor indexer_query(const Tensor& q, IndexerCacheDtype t, int64_t head_dim) override {
    if (t != IndexerCacheDtype::fp4) return q;
    const Tensor heads = q.view({q.numel() / head_dim, head_dim});
    return decode_indexer(encode_indexer(heads, t), t, head_dim).view(q.shape());
  }
  Tensor rope_indexer_query(const Tensor& q, const Tensor& positions, const Tensor& inv_freq, IndexerCacheDtype t,
                            int64_t head_dim) override {
    if (t != IndexerCacheDtype::fp4) return Backend::rope_indexer_query(q, positions, inv_freq, t, head_dim);
    expect(q.row_numel() % head_dim == 0, "rope_indexer_query", "a row is not a whole number of heads");
    expect(positions.numel() == q.rows(), "rope_indexer_query", "one position per row is needed");
    Tensor out = make(q.shape(), ElemType::f32);
    cuda::rotated_indexer_query_fp4(q.data<float>(), positions.data<int32_t>(), inv_freq.data<float>(), inv_freq.numel(),
                                    q.rows(), q.row_numel() / head_dim, head_dim, out.data<float>(), stream());
    return out;
  }

 protected:
  Tensor allocate(Shape shape, ElemType type) override { return make(std::move(shape), type); }
  void copy_bytes(std::byte* dst, const std::byte* src, size_t bytes) override { copy_device(dst, src, bytes); }

 private:
  // Where ops enqueue their work: the main stream, or the side one while a side branch is recorded.
  cudaStream_t stream() const { return current_; }

  // A long run takes the tensor cores unless a graph is being recorded (that path may grow its
  // scratch and synchronizes).
  bool tensor_cores(bool long_run) const { return long_run && !capturing(stream()); }
  // Created on first use: decode-only runs never hold its handle and scratch.
  cuda::DequantGemm& gemm() {
    if (!gemm_) gemm_ = std::make_unique<cuda::DequantGemm>(stream());
    return *gemm_;
  }

  // Stream-ordered allocation; the free is ordered after every use on the same stream. While a
  // graph is recorded, from the capture arena instead.
  Tensor make(Shape shape, ElemType type) const {
    const size_t bytes = size_t(std::max<int64_t>(shape_numel(shape) * elem_bytes(type), 1));
    if (recording_) {
      std::shared_ptr<cuda::CaptureArena> arena = arena_;
      std::shared_ptr<std::byte[]> storage(static_cast<std::byte*>(arena->allocate(bytes)),
                                           [arena](std::byte* q) { arena->release(q); });
      return Tensor(std::move(shape), type, std::move(storage));
    }
    void* p = nullptr;
    TETRA_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream()));
    std::shared_ptr<cuda::CudaStream> owner = stream_;
    std::shared_ptr<std::byte[]> storage(static_cast<std::byte*>(p),
                                         [owner](std::byte* q) { cudaFreeAsync(q, owner->get()); });
    return Tensor(std::move(shape), type, std::move(storage));
  }
  void copy_in(const Tensor& t, const void* src, size_t bytes) const {
    if (bytes) TETRA_CUDA_CHECK(cudaMemcpyAsync(t.data<std::byte>(), src, bytes, cudaMemcpyHostToDevice, stream()));
  }
  void copy_out(const Tensor& t, void* dst, size_t bytes) const {
    if (bytes) TETRA_CUDA_CHECK(cudaMemcpyAsync(dst, t.data<std::byte>(), bytes, cudaMemcpyDeviceToHost, stream()));
    stream_->synchronize();
  }
  void copy_device(void* dst, const void* src, size_t bytes) const {
    if (bytes) TETRA_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()));
  }
  static cuda::PagedView view(const PagedRows& p) {
    return {p.pool.data<uint8_t>(), p.tables.data<int32_t>(), p.width, p.offset, p.rows_per_block, p.row_bytes, p.block_bytes};
  }
  static cuda::StepView view(const StepRows& at) {
    return {at.slot.data<int32_t>(), at.position.data<int32_t>(), at.start.data<int32_t>(), at.last.data<int32_t>(),
            at.first_row.data<int32_t>()};
  }

  // f32 tensors (an embedding table used as the head) are dense f32 weights read in f32.
  WeightRef weight_ref(const Tensor& w, bool& round_input, float* alpha = nullptr) const {
    if (alpha) *alpha = 1;
    if (w.type() == ElemType::f32) {
      round_input = false;
      return {WeightFormat::dense, DType::f32, DType::f32, w.data<float>(), nullptr, 1.0f, w.dim(0), w.dim(1)};
    }
    expect(w.type() == ElemType::u8, "linear", "the weight is not a loaded linear layer");
    const LinearOnDevice& d = *w.data<LinearOnDevice>();
    round_input = d.round_input;
    if (alpha) *alpha = d.alpha;
    return d.ref();
  }

  // The routed experts of every run: each row's weighted sum, or (slots) each (row, slot)'s
  // output, [n·k, dim], for combine_slots. A run takes the kernels its row count picks either way.
  Tensor routed(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                const std::vector<Tensor>& w3, double limit, RowRuns runs, bool slots) {
    const int64_t d = x.dim(1), k = r.experts.dim(1);
    const ExpertTables& t = expert_tables(w1, w2, w3);
    expect(slots || !t.layout.some_absent, "experts", "some experts are held by other ranks: use expert_slots");
    Tensor out = make({slots ? x.rows() * k : x.rows(), d}, ElemType::f32);
    for (const RowRange& rows : kernel_ranges(runs, x.rows(), kGroupedExpertsMinTokens)) {
      const float* xr = x.data<float>() + rows.begin * d;
      const float* weights = r.weights.data<float>() + rows.begin * k;
      const int32_t* selected = r.experts.data<int32_t>() + rows.begin * k;
      float* yr = out.data<float>() + rows.begin * (slots ? k : 1) * d;
      if (tensor_cores(rows.large)) {
        const cuda::GroupedExperts g{.experts = int64_t(w1.size()),
                                     .dim = d,
                                     .inter = t.inter,
                                     .w1 = t.host_w1.data(),
                                     .w2 = t.host_w2.data(),
                                     .w3 = t.host_w3.data(),
                                     .device_w1 = t.w1.get<WeightRef>(),
                                     .device_w2 = t.w2.get<WeightRef>(),
                                     .device_w3 = t.w3.get<WeightRef>(),
                                     .layout = t.layout,
                                     .w2_alpha = t.w2_alpha.data(),
                                     .up_alpha = t.up_alpha.get<float>(),
                                     .expert_key = t.expert_key.get<int32_t>()};
        if (slots) cuda::grouped_expert_slots(gemm(), g, xr, rows.count, selected, k, float(limit), t.round_input, yr);
        else cuda::grouped_experts(gemm(), g, xr, rows.count, weights, selected, k, float(limit), t.round_input, yr);
      } else {
        Tensor scratch = make({cuda::routed_experts_scratch_floats(rows.count, k, d, t.inter)}, ElemType::f32);
        if (slots)
          cuda::routed_expert_slots(xr, rows.count, d, t.inter, selected, k, t.w1.get<WeightRef>(), t.w2.get<WeightRef>(),
                                    t.w3.get<WeightRef>(), t.layout, float(limit), t.round_input, scratch.data<float>(),
                                    yr, stream());
        else
          cuda::routed_experts(xr, rows.count, d, t.inter, weights, selected, k, t.w1.get<WeightRef>(),
                               t.w2.get<WeightRef>(), t.w3.get<WeightRef>(), t.layout, float(limit), t.round_input,
                               scratch.data<float>(), yr, stream());
      }
    }
    return out;
  }

  const ExpertTables& expert_tables(const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                                    const std::vector<Tensor>& w3) const {
    expect(!w1.empty() && w1.size() == w2.size() && w1.size() == w3.size(), "experts", "expert weight lists differ");
    // The first expert held here keeps the tables (under expert parallelism the experts other
    // ranks hold are empty tensors; their table entries are null and their pairs come out zero).
    const auto first_held = std::find_if(w1.begin(), w1.end(), [](const Tensor& w) { return !w.empty(); });
    expect(first_held != w1.end(), "experts", "no expert of the layer is held here");
    const size_t first = size_t(first_held - w1.begin());
    expect(w1[first].type() == ElemType::u8, "experts", "expert weights are not loaded linear layers");
    LinearOnDevice& keeper = *w1[first].data<LinearOnDevice>();
    if (keeper.expert_tables) return *keeper.expert_tables;
    auto t = std::make_unique<ExpertTables>();
    t->layout.up = weight_ref(w1[first], t->round_input);
    t->layout.down = weight_ref(w2[first], t->round_input);
    t->layout.uniform = true;
    t->layout.experts = int64_t(w1.size());
    std::vector<float> up_alpha;
    std::vector<int32_t> key(w1.size());
    auto table = [&](const std::vector<Tensor>& ws, std::vector<WeightRef>& refs, std::vector<float>& alphas,
                     size_t stride, size_t at, const WeightRef& like) {
      alphas.resize(ws.size() * stride);
      for (size_t e = 0; e < ws.size(); ++e) {
        key[e] = ws[e].empty() ? int32_t(ws.size()) : int32_t(e);
        if (ws[e].empty()) {
          refs.push_back(WeightRef{});
          alphas[e * stride + at] = 1;
          t->layout.some_absent = true;
          continue;
        }
        refs.push_back(weight_ref(ws[e], t->round_input, &alphas[e * stride + at]));
        t->layout.uniform &= cuda::same_layout(refs.back(), like);
      }
      cuda::DeviceBuffer b(refs.size() * sizeof(WeightRef));
      TETRA_CUDA_CHECK(cudaMemcpyAsync(b.get(), refs.data(), b.bytes(), cudaMemcpyHostToDevice, stream()));
      return b;
    };
    t->w1 = table(w1, t->host_w1, up_alpha, 2, 0, t->layout.up);
    t->w3 = table(w3, t->host_w3, up_alpha, 2, 1, t->layout.up);
    t->w2 = table(w2, t->host_w2, t->w2_alpha, 1, 0, t->layout.down);
    for (size_t e = 0; e < w1.size(); ++e)
      expect(w1[e].empty() == w2[e].empty() && w1[e].empty() == w3[e].empty(), "experts",
             "an expert is held in part (w1, w2 and w3 go together)");
    t->up_alpha = cuda::DeviceBuffer(up_alpha.size() * sizeof(float));
    TETRA_CUDA_CHECK(
        cudaMemcpyAsync(t->up_alpha.get(), up_alpha.data(), t->up_alpha.bytes(), cudaMemcpyHostToDevice, stream()));
    if (t->layout.some_absent) {
      t->expert_key = cuda::DeviceBuffer(key.size() * sizeof(int32_t));
      TETRA_CUDA_CHECK(cudaMemcpyAsync(t->expert_key.get(), key.data(), t->expert_key.bytes(), cudaMemcpyHostToDevice,
                                       stream()));
      t->layout.expert_key = t->expert_key.get<int32_t>();
    }
    stream_->synchronize();  // the host vectors above are copied before they change or die
    t->inter = w1[first].dim(0);
    keeper.expert_tables = std::move(t);
    return *keeper.expert_tables;
  }

  static cuda::SubBlockOutput sub_block_output(const Tensor& y, const Tensor* y_plus) {
    if (y_plus) expect(y_plus->numel() == y.numel(), "hc_post", "y_plus's size differs from y's");
    return {y.data<float>(), y_plus ? y_plus->data<float>() : nullptr};
  }
  // hc_pre's comb logits into the mixing matrix (cuda::hc_sinkhorn). While a graph is recorded
  // on the main stream, on a stream of its own that forks here: nothing reads comb before the
  // sub-block's post update, which waits for it (join_sinkhorn), so the Sinkhorn iterations leave
  // the step's critical path. Otherwise in order.
  void sinkhorn_aside(const Tensor& comb, const ModelConfig& c) {
    if (!recording_ || branching_) {
      cuda::hc_sinkhorn(comb.data<float>(), comb.dim(0), hc_params(c), stream());
      return;
    }
    join_sinkhorn();
    TETRA_CUDA_CHECK(cudaEventRecord(sinkhorn_fork_.get(), stream_->get()));
    TETRA_CUDA_CHECK(cudaStreamWaitEvent(sinkhorn_stream_->get(), sinkhorn_fork_.get()));
    cuda::hc_sinkhorn(comb.data<float>(), comb.dim(0), hc_params(c), sinkhorn_stream_->get());
    TETRA_CUDA_CHECK(cudaEventRecord(sinkhorn_done_.get(), sinkhorn_stream_->get()));
    sinkhorn_pending_ = true;
  }
  // The main stream waits for the Sinkhorn branch, if one is open.
  void join_sinkhorn() {
    if (!sinkhorn_pending_) return;
    sinkhorn_pending_ = false;
    TETRA_CUDA_CHECK(cudaStreamWaitEvent(stream_->get(), sinkhorn_done_.get()));
  }

  static cuda::HcParams hc_params(const ModelConfig& c) {
    return {c.hc_mult, c.dim, c.hc_sinkhorn_iters, float(c.norm_eps), float(c.hc_eps)};
  }

  CudaNumerics numerics_;
  int device_;
  bool attention_wgmma_;  // numerics_.warpgroup_mma_attention, where the device has it
  std::shared_ptr<cuda::CudaStream> stream_;
  std::shared_ptr<cuda::CaptureArena> arena_ = std::make_shared<cuda::CaptureArena>();  // shared with the graphs
  bool recording_ = false;  // a graph capture is running: make() uses arena_
  // concurrently()'s second branch: its stream, and the events that fork it off and join it back.
  std::unique_ptr<cuda::CudaStream> side_stream_ = std::make_unique<cuda::CudaStream>();
  cuda::CudaEvent fork_{cudaEventDisableTiming}, join_{cudaEventDisableTiming};
  bool branching_ = false;
  // sinkhorn_aside()'s branch: its stream, the events that fork it off and mark it done, and
  // whether the main stream has yet to wait for it.
  std::unique_ptr<cuda::CudaStream> sinkhorn_stream_ = std::make_unique<cuda::CudaStream>();
  cuda::CudaEvent sinkhorn_fork_{cudaEventDisableTiming}, sinkhorn_done_{cudaEventDisableTiming};
  bool sinkhorn_pending_ = false;
  cudaStream_t current_ = stream_->get();
  std::unique_ptr<cuda::DequantGemm> gemm_;  // after stream_: destroyed first
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(CudaNumerics numerics, int device) {
  const cuda::DeviceStatus status = cuda::probe_device();
  if (!status.usable) runtime_error("--device cuda: ", status.description);
  if (device >= 0) {
    int count = 0;
    TETRA_CUDA_CHECK(cudaGetDeviceCount(&count));
    if (device >= count) runtime_error("--device cuda: GPU ", device, " asked for, this machine has ", count);
    TETRA_CUDA_CHECK(cudaSetDevice(device));
  }
  return std::make_unique<CudaBackend>(numerics);
}

namespace {
const CudaBackend& as_cuda(const Backend& backend) {
  const auto* b = dynamic_cast<const CudaBackend*>(&backend);
  if (!b) runtime_error("the ", backend.name(), " backend is not a CUDA backend");
  return *b;
}
}  // namespace

cudaStream_t cuda_stream_of(Backend& backend) { return as_cuda(backend).work_stream(); }
int cuda_device_of(const Backend& backend) { return as_cuda(backend).device(); }

}  // namespace tetra
