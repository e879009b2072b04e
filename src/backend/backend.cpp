#include "backend/backend.h"

#include <utility>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#ifdef TETRA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#endif

namespace tetra {

Tensor Backend::load_param(const ParamWeight& p) {
  const std::vector<float> v = to_f32(p.view);
  if (p.view.dtype == DType::i32 || p.view.dtype == DType::i64) {
    std::vector<int32_t> ids(v.size());
    for (size_t i = 0; i < v.size(); ++i) ids[i] = int32_t(v[i]);
    return upload_i32(ids, p.view.shape);
  }
  return upload(v, p.view.shape);
}

Tensor Backend::slice_rows(const Tensor& t, int64_t begin, int64_t count) {
  if (begin < 0 || count < 0 || begin + count > t.rows()) runtime_error(name(), " backend slice_rows: rows out of range");
  Shape s = t.shape();
  s[0] = count;
  Tensor out = allocate(s, t.type());
  const int64_t row_bytes = t.row_numel() * elem_bytes(t.type());
  copy_bytes(out.data<std::byte>(), t.data<std::byte>() + begin * row_bytes, size_t(count * row_bytes));
  return out;
}

Tensor Backend::concat_rows(const std::vector<Tensor>& parts, Shape row_shape, ElemType type) {
  int64_t rows = 0;
  for (const auto& p : parts) rows += p.empty() ? 0 : p.rows();
  Shape s{rows};
  s.insert(s.end(), row_shape.begin(), row_shape.end());
  Tensor out = allocate(s, type);
  std::byte* dst = out.data<std::byte>();
  for (const auto& p : parts) {
    if (p.empty() || p.rows() == 0) continue;
    if (p.row_numel() != shape_numel(row_shape) || p.type() != type)
      runtime_error(name(), " backend concat_rows: parts differ in row shape");
    const size_t bytes = size_t(p.numel() * elem_bytes(type));
    copy_bytes(dst, p.data<std::byte>(), bytes);
    dst += bytes;
  }
  return out;
}

std::unique_ptr<DeviceGraph> Backend::capture(const std::function<void()>&) { return nullptr; }

void Backend::concurrently(const std::function<void()>& side, const std::function<void()>& main) {
  side();
  main();
}

Tensor Backend::rms_norm_rope(const Tensor& x, const Tensor* weight, int64_t head_dim, double eps,
                              const Tensor& positions, const Tensor& inv_freq) {
  Tensor y = rms_norm(x, weight, head_dim, eps);
  rope(y, positions, inv_freq, head_dim, false);
  return y;
}

std::vector<Tensor> Backend::rms_norm_ropes(const std::vector<NormRopeInput>& inputs, int64_t head_dim, double eps,
                                            const Tensor& positions, const Tensor& inv_freq) {
  std::vector<Tensor> out;
  out.reserve(inputs.size());
  for (const NormRopeInput& in : inputs) out.push_back(rms_norm_rope(*in.x, in.weight, head_dim, eps, positions, inv_freq));
  return out;
}

Tensor Backend::gated_linear(const Tensor& x, const Tensor& w1, const Tensor& w3, double limit, RowRuns runs) {
  const std::vector<Tensor> p = linears(x, {&w1, &w3}, runs);  // a backend may share work on x
  return swiglu(p[0], p[1], limit);
}

std::vector<Tensor> Backend::linears(const Tensor& x, const std::vector<const Tensor*>& ws, RowRuns runs) {
  std::vector<Tensor> out;
  out.reserve(ws.size());
  for (const Tensor* w : ws) out.push_back(linear(x, *w, runs));
  return out;
}

Streams Backend::hc_post_pre(const Tensor& h, const Tensor& y, const Tensor* y_plus, const Tensor& post,
                             const Tensor& comb, const Tensor& fn, const Tensor& base, const Tensor& scale,
                             const Tensor& norm, const ModelConfig& c) {
  Tensor updated = hc_post(h, y, y_plus, post, comb);
  MixWeights mix = hc_pre(updated, fn, base, scale, norm, c);
  return {std::move(updated), std::move(mix)};
}

Tensor Backend::rope_indexer_query(const Tensor& q, const Tensor& positions, const Tensor& inv_freq,
                                   IndexerCacheDtype t, int64_t head_dim) {
  Tensor rotated = allocate(q.shape(), q.type());
  copy_into(rotated, q);
  rope(rotated, positions, inv_freq, head_dim, false);
  return indexer_query(rotated, t, head_dim);
}

Tensor Backend::expert_slots(const Tensor&, const Routing&, const std::vector<Tensor>&, const std::vector<Tensor>&,
                             const std::vector<Tensor>&, double, RowRuns) {
  runtime_error("the ", name(), " backend does not split the routed experts over ranks (expert parallelism)");
}

Tensor Backend::combine_slots(const Tensor&, const Routing&) {
  runtime_error("the ", name(), " backend does not split the routed experts over ranks (expert parallelism)");
}

void Backend::copy_into(const Tensor& dst, const Tensor& src) {
  const int64_t bytes = src.numel() * elem_bytes(src.type());
  if (bytes != dst.numel() * elem_bytes(dst.type())) runtime_error(name(), " backend copy_into: sizes differ");
  copy_bytes(dst.data<std::byte>(), src.data<std::byte>(), size_t(bytes));
}

std::unique_ptr<Backend> make_backend(const std::string& device, int index) {
  if (device == "cpu") return make_cpu_backend();
#ifdef TETRA_WITH_CUDA
  if (device == "cuda") return make_cuda_backend({}, index);
#else
  if (device == "cuda")
    runtime_error("--device cuda: this tetra was built without the CUDA backend (configure with -DTETRA_CUDA=ON)");
#endif
  usage_error("--device must be cpu or cuda, got '", device, "'");
}

std::vector<std::unique_ptr<Backend>> make_backends(const std::string& device, int ranks) {
  if (ranks < 1) usage_error("--expert-parallel must be at least 1, got ", ranks);
  std::vector<std::unique_ptr<Backend>> backends;
  for (int r = 0; r < ranks; ++r) backends.push_back(make_backend(device, ranks > 1 ? r : -1));
  backends.front()->bind_thread();
  return backends;
}

void in_turn(const std::vector<Backend*>& backends, const std::function<void(size_t)>& work) {
  for (size_t i = 0; i < backends.size(); ++i) {
    backends[i]->bind_thread();
    work(i);
  }
  if (!backends.empty()) backends.front()->bind_thread();
}

std::vector<Backend*> pointers(const std::vector<std::unique_ptr<Backend>>& backends) {
  std::vector<Backend*> p;
  for (const auto& b : backends) p.push_back(b.get());
  return p;
}

}  // namespace tetra
