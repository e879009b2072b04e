#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <unistd.h>

#include "backend/cpu/cache_codec.h"
#include "backend/cpu/paged_ops.h"
#include "core/dtype.h"
#include "core/error.h"

namespace tetra {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Tensor make(Shape shape, ElemType type) {
  const int64_t bytes = shape_numel(shape) * elem_bytes(type);
  return Tensor(std::move(shape), type, std::shared_ptr<std::byte[]>(new std::byte[size_t(std::max<int64_t>(bytes, 1))]()));
}

void expect(bool ok, const char* op, const char* what) {
  if (!ok) runtime_error("cpu backend ", op, ": ", what);
}

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// Row softmax in place.
void softmax(float* v, int64_t n) {
  float m = kNegInf;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, v[i]);
  float s = 0;
  for (int64_t i = 0; i < n; ++i) s += (v[i] = std::exp(v[i] - m));
  for (int64_t i = 0; i < n; ++i) v[i] /= s;
}

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  int64_t free_memory_bytes() const override {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0) runtime_error("cannot read the available memory");
    return int64_t(pages) * int64_t(page);
  }

  Tensor upload(std::span<const float> values, Shape shape) override {
    expect(int64_t(values.size()) == shape_numel(shape), "upload", "size does not match the shape");
    Tensor t = make(std::move(shape), ElemType::f32);
    std::copy(values.begin(), values.end(), t.data<float>());
    return t;
  }
  Tensor upload_i32(std::span<const int32_t> values, Shape shape) override {
    expect(int64_t(values.size()) == shape_numel(shape), "upload_i32", "size does not match the shape");
    Tensor t = make(std::move(shape), ElemType::i32);
    std::copy(values.begin(), values.end(), t.data<int32_t>());
    return t;
  }
  std::vector<float> download(const Tensor& t) override {
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  }
  std::vector<int32_t> download_i32(const Tensor& t) override {
    return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  }
  Tensor load_linear(const LinearWeight& w) override { return upload(dequantize(w), {w.out, w.in}); }
  Tensor zeros(Shape shape, ElemType type) override { return make(std::move(shape), type); }
  void write_i32(const Tensor& dst, int64_t offset, std::span<const int32_t> values) override {
    expect(dst.type() == ElemType::i32 && offset >= 0 && offset + int64_t(values.size()) <= dst.numel(), "write_i32",
           "values outside the tensor");
    std::copy(values.begin(), values.end(), dst.data<int32_t>() + offset);
  }

  Tensor embed(const Tensor& table, const Tensor& ids) override {
    const int64_t n = ids.numel(), d = table.dim(1);
    Tensor out = make({n, d}, ElemType::f32);
    for (int64_t r = 0; r < n; ++r) {
      const int32_t id = ids.data<int32_t>()[r];
      expect(id >= 0 && id < table.dim(0), "embed", "token id out of range");
      std::copy_n(table.data<float>() + int64_t(id) * d, d, out.data<float>() + r * d);
    }
    return out;
  }

  // The CPU computes every row the same way whatever the rows: no use for the runs.
  Tensor linear(const Tensor& x, const Tensor& w, RowRuns) override {
    const int64_t n = x.rows(), in = w.dim(1), out_dim = w.dim(0);
    expect(x.row_numel() == in, "linear", "input width does not match the weight");
    Tensor out = make({n, out_dim}, ElemType::f32);
    const float *xs = x.data<float>(), *ws = w.data<float>();
    float* ys = out.data<float>();
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < out_dim; ++o) ys[r * out_dim + o] = float(dot(xs + r * in, ws + o * in, in));
    return out;
  }

  Tensor grouped_linear(const Tensor& x, const Tensor& w, int64_t groups, RowRuns) override {
    const int64_t n = x.rows(), in_g = w.dim(1), out_g = w.dim(0) / groups;
    expect(x.row_numel() == groups * in_g, "grouped_linear", "input width does not match groups × weight width");
    Tensor out = make({n, groups * out_g}, ElemType::f32);
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t o = 0; o < groups * out_g; ++o)
        out.data<float>()[r * groups * out_g + o] =
            float(dot(x.data<float>() + r * groups * in_g + (o / out_g) * in_g, w.data<float>() + o * in_g, in_g));
    return out;
  }

  Tensor rms_norm(const Tensor& x, const Tensor* weight, int64_t group, double eps) override {
    expect(x.numel() % group == 0, "rms_norm", "size is not a multiple of the group");
    Tensor out = make(x.shape(), ElemType::f32);
    const int64_t runs = x.numel() / group;
#pragma omp parallel for schedule(static)
    for (int64_t g = 0; g < runs; ++g) {
      const float* v = x.data<float>() + g * group;
      float* o = out.data<float>() + g * group;
      const float r = 1.0f / std::sqrt(float(dot(v, v, group) / double(group)) + float(eps));
      for (int64_t i = 0; i < group; ++i) o[i] = v[i] * r * (weight ? weight->data<float>()[i] : 1.0f);
    }
    return out;
  }

  void rope(Tensor& x, const Tensor& positions, const Tensor& inv_freq, int64_t head_dim, bool inverse) override {
    const int64_t half = inv_freq.numel(), heads = x.row_numel() / head_dim;
    expect(positions.numel() == x.rows(), "rope", "one position per row is needed");
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < x.rows(); ++r) {
      const float pos = float(positions.data<int32_t>()[r]);
      for (int64_t i = 0; i < half; ++i) {
        const float angle = inv_freq.data<float>()[i] * pos;  // f32 as transformers computes it
        const float c = std::cos(angle), s = inverse ? -std::sin(angle) : std::sin(angle);
        for (int64_t h = 0; h < heads; ++h) {
          float* p = x.data<float>() + r * x.row_numel() + h * head_dim + head_dim - 2 * half + 2 * i;
          const float a = p[0], b = p[1];
          p[0] = a * c - b * s;
          p[1] = b * c + a * s;
        }
      }
    }
  }

  Tensor add(const Tensor& a, const Tensor& b) override {
    expect(a.numel() == b.numel(), "add", "sizes differ");
    Tensor out = make(a.shape(), ElemType::f32);
    for (int64_t i = 0; i < a.numel(); ++i) out.data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
    return out;
  }

  Tensor swiglu(const Tensor& gate, const Tensor& up, double limit) override {
    Tensor out = make(gate.shape(), ElemType::f32);
    const float lim = limit > 0 ? float(limit) : std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < gate.numel(); ++i) {
      const float g = std::min(gate.data<float>()[i], lim);
      const float u = std::clamp(up.data<float>()[i], -lim, lim);
      out.data<float>()[i] = g * sigmoid(g) * u;
    }
    return out;
  }

  MixWeights hc_pre(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                    const ModelConfig& c) override {
    const int64_t n = h.rows(), hc = c.hc_mult, d = c.dim, flat = hc * d, mix = (2 + hc) * hc;
    MixWeights m{make({n, d}, ElemType::f32), make({n, hc}, ElemType::f32), make({n, hc, hc}, ElemType::f32)};
    const float* sc = scale.data<float>();
    const float* bs = base.data<float>();
    const float eps = float(c.hc_eps);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const float* v = h.data<float>() + r * flat;
      const float rs = 1.0f / std::sqrt(float(dot(v, v, flat) / double(flat)) + float(c.norm_eps));
      std::vector<float> mixes(static_cast<size_t>(mix));
      for (int64_t k = 0; k < mix; ++k) mixes[size_t(k)] = float(dot(v, fn.data<float>() + k * flat, flat)) * rs;
      float* pre = m.x.data<float>() + r * d;  // filled below
      std::vector<float> pre_w(static_cast<size_t>(hc));
      for (int64_t i = 0; i < hc; ++i) {
        pre_w[size_t(i)] = sigmoid(mixes[size_t(i)] * sc[0] + bs[i]) + eps;
        m.post.data<float>()[r * hc + i] = 2 * sigmoid(mixes[size_t(hc + i)] * sc[1] + bs[hc + i]);
      }
      float* comb = m.comb.data<float>() + r * hc * hc;
      for (int64_t k = 0; k < hc * hc; ++k) comb[k] = mixes[size_t(2 * hc + k)] * sc[2] + bs[2 * hc + k];
      for (int64_t i = 0; i < hc; ++i) {
        softmax(comb + i * hc, hc);
        for (int64_t j = 0; j < hc; ++j) comb[i * hc + j] += eps;
      }
      auto normalize_columns = [&] {
        for (int64_t j = 0; j < hc; ++j) {
          float s = 0;
          for (int64_t i = 0; i < hc; ++i) s += comb[i * hc + j];
          for (int64_t i = 0; i < hc; ++i) comb[i * hc + j] /= s + eps;
        }
      };
      normalize_columns();
      for (int64_t it = 1; it < c.hc_sinkhorn_iters; ++it) {
        for (int64_t i = 0; i < hc; ++i) {
          float s = 0;
          for (int64_t j = 0; j < hc; ++j) s += comb[i * hc + j];
          for (int64_t j = 0; j < hc; ++j) comb[i * hc + j] /= s + eps;
        }
        normalize_columns();
      }
      for (int64_t k = 0; k < d; ++k) {
        float s = 0;
        for (int64_t i = 0; i < hc; ++i) s += pre_w[size_t(i)] * v[i * d + k];
        pre[k] = s;
      }
    }
    m.x = rms_norm(m.x, &norm, d, c.norm_eps);
    return m;
  }

  Tensor hc_post(const Tensor& h, const Tensor& sub_block_y, const Tensor* y_plus, const Tensor& post,
                 const Tensor& comb) override {
    const Tensor y = y_plus ? add(sub_block_y, *y_plus) : sub_block_y;
    const int64_t n = h.rows(), hc = post.dim(1), d = y.dim(1);
    Tensor out = make(h.shape(), ElemType::f32);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < hc; ++j)
        for (int64_t k = 0; k < d; ++k) {
          float s = post.data<float>()[r * hc + j] * y.data<float>()[r * d + k];
          for (int64_t i = 0; i < hc; ++i)
            s += comb.data<float>()[(r * hc + i) * hc + j] * h.data<float>()[(r * hc + i) * d + k];
          out.data<float>()[(r * hc + j) * d + k] = s;
        }
    return out;
  }

  Tensor hc_head(const Tensor& h, const Tensor& fn, const Tensor& base, const Tensor& scale, const Tensor& norm,
                 const ModelConfig& c) override {
    const int64_t n = h.rows(), hc = c.hc_mult, d = c.dim, flat = hc * d;
    Tensor out = make({n, d}, ElemType::f32);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < n; ++r) {
      const float* v = h.data<float>() + r * flat;
      const float rs = 1.0f / std::sqrt(float(dot(v, v, flat) / double(flat)) + float(c.norm_eps));
      std::vector<float> pre(static_cast<size_t>(hc));
      for (int64_t i = 0; i < hc; ++i)
        pre[size_t(i)] = sigmoid(float(dot(v, fn.data<float>() + i * flat, flat)) * rs * scale.data<float>()[0] +
                                 base.data<float>()[i]) + float(c.hc_eps);
      for (int64_t k = 0; k < d; ++k) {
        float s = 0;
        for (int64_t i = 0; i < hc; ++i) s += pre[size_t(i)] * v[i * d + k];
        out.data<float>()[r * d + k] = s;
      }
    }
    return rms_norm(out, &norm, d, c.norm_eps);
  }

  Routing route(const Tensor& logits, const Tensor* bias, const Tensor* tid2eid, const Tensor& ids,
                const ModelConfig& c) override {
    const int64_t n = logits.rows(), E = logits.dim(1), k = c.n_activated_experts;
    Routing out{make({n, k}, ElemType::f32), make({n, k}, ElemType::i32)};
    for (int64_t r = 0; r < n; ++r) {
      std::vector<float> s(logits.data<float>() + r * E, logits.data<float>() + (r + 1) * E);
      switch (c.scoring) {
        case ScoringFunc::softmax: softmax(s.data(), E); break;
        case ScoringFunc::sigmoid: for (float& v : s) v = sigmoid(v); break;
        case ScoringFunc::sqrtsoftplus:
          for (float& v : s) v = std::sqrt(v > 20 ? v : std::log1p(std::exp(v)));
          break;
      }
      int32_t* sel = out.experts.data<int32_t>() + r * k;
      if (tid2eid) {
        const int32_t id = ids.data<int32_t>()[r];
        for (int64_t j = 0; j < k; ++j) {
          sel[j] = tid2eid->data<int32_t>()[int64_t(id) * k + j];
          expect(sel[j] >= 0 && sel[j] < E, "route", "tid2eid names an expert out of range");
        }
      } else {
        std::vector<float> biased = s;
        if (bias) for (int64_t e = 0; e < E; ++e) biased[size_t(e)] += bias->data<float>()[e];
        std::vector<int32_t> order(static_cast<size_t>(E));
        std::iota(order.begin(), order.end(), 0);
        // higher score first, ties to the lower index (the CUDA router's order; partial_sort alone
        // left tied experts in any order)
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
          const float va = biased[size_t(a)], vb = biased[size_t(b)];
          return va > vb || (va == vb && a < b);
        });
        std::copy_n(order.begin(), k, sel);
      }
      float sum = 0;
      for (int64_t j = 0; j < k; ++j) sum += s[size_t(sel[j])];
      // transformers renormalizes always; the official code skips it for softmax scoring
      const bool renormalize = c.scoring != ScoringFunc::softmax || c.norm_topk_prob;
      for (int64_t j = 0; j < k; ++j)
        out.weights.data<float>()[r * k + j] =
            (renormalize ? s[size_t(sel[j])] / (sum + 1e-20f) : s[size_t(sel[j])]) * float(c.route_scale);
    }
    return out;
  }

  Tensor experts(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                 const std::vector<Tensor>& w3, double limit, RowRuns runs) override {
    return combine_slots(expert_slots(x, r, w1, w2, w3, limit, runs), r);
  }
  Tensor expert_slots(const Tensor& x, const Routing& r, const std::vector<Tensor>& w1, const std::vector<Tensor>& w2,
                      const std::vector<Tensor>& w3, double limit, RowRuns) override {
    const int64_t n = x.rows(), d = x.dim(1), k = r.experts.dim(1);
    for (int64_t i = 0; i < n * k; ++i)
      expect(r.experts.data<int32_t>()[i] >= 0 && r.experts.data<int32_t>()[i] < int64_t(w1.size()), "experts",
             "a row chose an expert outside the layer's");
    Tensor out = make({n * k, d}, ElemType::f32);
#pragma omp parallel for schedule(dynamic)
    for (int64_t t = 0; t < n; ++t) {
      const Tensor row = slice_rows(x, t, 1);
      for (int64_t j = 0; j < k; ++j) {
        float* slot = out.data<float>() + (t * k + j) * d;
        const int32_t e = r.experts.data<int32_t>()[t * k + j];
        if (w1[size_t(e)].empty()) {  // held by another rank
          std::fill(slot, slot + d, 0.0f);
          continue;
        }
        const Tensor y = linear(swiglu(linear(row, w1[size_t(e)], {}), linear(row, w3[size_t(e)], {}), limit), w2[size_t(e)], {});
        std::copy(y.data<float>(), y.data<float>() + d, slot);
      }
    }
    return out;
  }
  Tensor combine_slots(const Tensor& slots, const Routing& r) override {
    const int64_t k = r.experts.dim(1), n = slots.rows() / k, d = slots.dim(1);
    Tensor out = make({n, d}, ElemType::f32);
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n; ++t) {
      float* acc = out.data<float>() + t * d;
      std::fill(acc, acc + d, 0.0f);
      for (int64_t j = 0; j < k; ++j) {
        const float* slot = slots.data<float>() + (t * k + j) * d;
        const float wgt = r.weights.data<float>()[t * k + j];
        for (int64_t i = 0; i < d; ++i) acc[i] += slot[i] * wgt;
      }
    }
    return out;
  }

  void store_rows(const PagedRows& dst, const Tensor& rows, const StepRows& at, RowPlacement place) override {
    expect(rows.row_numel() * elem_bytes(rows.type()) == dst.row_bytes, "store_rows", "row size differs from the cache's");
    cpu::store_rows(dst, rows, at, place);
  }
  Tensor compress(const PagedRows& pending, const Tensor& kv, const Tensor& gate, const Tensor& ape, const StepRows& at,
                  int64_t ratio, bool overlap, RowRuns) override {
    expect(pending.row_bytes == 2 * kv.dim(1) * 4, "compress", "pending rows do not match the width");
    Tensor out = make({kv.rows(), overlap ? kv.dim(1) / 2 : kv.dim(1)}, ElemType::f32);
    cpu::compress(pending, kv, gate, ape, at, ratio, overlap, out);
    return out;
  }
  Tensor attention(const Tensor& q, const Tensor& step_kv, const PagedRows& window, const PagedRows* compressed,
                   const Tensor* /*step_entries: every entry is read from `compressed`*/, const Tensor* selected,
                   const Tensor& sinks, const StepRows& at, const AttentionShape& s, RowRuns) override {
    expect(step_kv.row_numel() * elem_bytes(step_kv.type()) == window.row_bytes, "attention", "step rows differ from the cache's");
    Tensor out = make({q.rows(), q.row_numel()}, ElemType::f32);
    cpu::attention(q, step_kv, window, compressed, selected, sinks, at, s, out);
    if (s.output_inv_freq) rope(out, at.position, *s.output_inv_freq, s.head_dim, true);
    return out;
  }
  Tensor indexer_topk(const Tensor& q, const Tensor& weights, const PagedRows& keys, IndexerCacheDtype t, const StepRows& at,
                      int64_t heads, int64_t k, int64_t ratio, double weight_scale) override {
    Tensor out = make({q.rows(), k}, ElemType::i32);
    cpu::indexer_topk(q, weights, keys, t, at, heads, k, ratio, weight_scale, out);
    return out;
  }

  Tensor encode_kv(const Tensor& rows, KvCacheDtype t, int64_t rope_dim) override {
    const int64_t n = rows.rows(), d = rows.row_numel();
    switch (t) {
      case KvCacheDtype::f32: return rows;
      case KvCacheDtype::bf16: {
        Tensor out = make({n, 2 * d}, ElemType::u8);
        for (int64_t i = 0; i < n * d; ++i) {
          const uint16_t b = f32_to_bf16(rows.data<float>()[i]);
          std::memcpy(out.data<uint8_t>() + 2 * i, &b, 2);
        }
        return out;
      }
      case KvCacheDtype::fp8: {
        const int64_t bytes = kv_fp8_row_bytes(d, rope_dim);
        Tensor out = make({n, bytes}, ElemType::u8);
        for (int64_t r = 0; r < n; ++r)
          encode_kv_fp8(std::span<const float>(rows.data<float>() + r * d, size_t(d)), rope_dim,
                        std::span<uint8_t>(out.data<uint8_t>() + r * bytes, size_t(bytes)));
        return out;
      }
    }
    return {};
  }

  Tensor decode_kv(const Tensor& bytes, KvCacheDtype t, int64_t head_dim, int64_t rope_dim) override {
    const int64_t n = bytes.rows();
    if (t == KvCacheDtype::f32) return bytes;
    Tensor out = make({n, head_dim}, ElemType::f32);
    const int64_t stride = bytes.row_numel();
    for (int64_t r = 0; r < n; ++r) {
      const uint8_t* in = bytes.data<uint8_t>() + r * stride;
      float* row = out.data<float>() + r * head_dim;
      if (t == KvCacheDtype::bf16) {
        for (int64_t i = 0; i < head_dim; ++i) row[i] = bf16_to_f32(uint16_t(in[2 * i] | (in[2 * i + 1] << 8)));
      } else {
        decode_kv_fp8(std::span<const uint8_t>(in, size_t(stride)), rope_dim, std::span<float>(row, size_t(head_dim)));
      }
    }
    return out;
  }

  Tensor encode_indexer(const Tensor& rows, IndexerCacheDtype t) override {
    const int64_t n = rows.rows(), d = rows.row_numel();
    if (t == IndexerCacheDtype::f32) return rows;
    if (t == IndexerCacheDtype::bf16) return encode_kv(rows, KvCacheDtype::bf16, 0);
    const int64_t bytes = indexer_fp4_row_bytes(d);
    Tensor out = make({n, bytes}, ElemType::u8);
    for (int64_t r = 0; r < n; ++r)
      encode_indexer_fp4(std::span<const float>(rows.data<float>() + r * d, size_t(d)),
                         std::span<uint8_t>(out.data<uint8_t>() + r * bytes, size_t(bytes)));
    return out;
  }

  Tensor decode_indexer(const Tensor& bytes, IndexerCacheDtype t, int64_t head_dim) override {
    if (t == IndexerCacheDtype::f32) return bytes;
    if (t == IndexerCacheDtype::bf16) return decode_kv(bytes, KvCacheDtype::bf16, head_dim, 0);
    const int64_t n = bytes.rows(), stride = bytes.row_numel();
    Tensor out = make({n, head_dim}, ElemType::f32);
    for (int64_t r = 0; r < n; ++r)
      decode_indexer_fp4(std::span<const uint8_t>(bytes.data<uint8_t>() + r * stride, size_t(stride)),
                         std::span<float>(out.data<float>() + r * head_dim, size_t(head_dim)));
    return out;
  }

  Tensor indexer_query(const Tensor& q, IndexerCacheDtype t, int64_t head_dim) override {
    if (t != IndexerCacheDtype::fp4) return q;
    const Tensor heads = upload(download(q), {q.numel() / head_dim, head_dim});
    Tensor round_trip = decode_indexer(encode_indexer(heads, t), t, head_dim);
    return upload(download(round_trip), q.shape());
  }
 protected:
  Tensor allocate(Shape shape, ElemType type) override { return make(std::move(shape), type); }
  void copy_bytes(std::byte* dst, const std::byte* src, size_t bytes) override { std::memcpy(dst, src, bytes); }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace tetra
