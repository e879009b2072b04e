#include "backend/cpu/paged_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "backend/cpu/cache_codec.h"
#include "core/dtype.h"

namespace tetra::cpu {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::byte* paged_row(const PagedRows& p, int32_t slot, int64_t row) {
  const int32_t block = p.tables.data<int32_t>()[int64_t(slot) * p.width + p.offset + row / p.rows_per_block];
  return p.pool.data<std::byte>() + int64_t(block) * p.block_bytes + (row % p.rows_per_block) * p.row_bytes;
}

struct Row {  // one step row's place in its sequence
  int32_t slot, position, start, last, first_row;
};
Row row_at(const StepRows& at, int64_t r) {
  return {at.slot.data<int32_t>()[r], at.position.data<int32_t>()[r], at.start.data<int32_t>()[r],
          at.last.data<int32_t>()[r], at.first_row.data<int32_t>()[r]};
}

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

float bf16_at(const uint8_t* p, int64_t i) { return bf16_to_f32(uint16_t(p[2 * i] | (p[2 * i + 1] << 8))); }

void decode_kv_row(const std::byte* bytes, int64_t row_bytes, KvCacheDtype t, int64_t d, int64_t rope_dim, float* out) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes);
  switch (t) {
    case KvCacheDtype::f32: std::memcpy(out, bytes, size_t(d) * sizeof(float)); break;
    case KvCacheDtype::bf16: for (int64_t i = 0; i < d; ++i) out[i] = bf16_at(in, i); break;
    case KvCacheDtype::fp8:
      decode_kv_fp8(std::span<const uint8_t>(in, size_t(row_bytes)), rope_dim, std::span<float>(out, size_t(d)));
      break;
  }
}

void decode_indexer_row(const std::byte* bytes, int64_t row_bytes, IndexerCacheDtype t, int64_t d, float* out) {
  const auto* in = reinterpret_cast<const uint8_t*>(bytes);
  switch (t) {
    case IndexerCacheDtype::f32: std::memcpy(out, bytes, size_t(d) * sizeof(float)); break;
    case IndexerCacheDtype::bf16: for (int64_t i = 0; i < d; ++i) out[i] = bf16_at(in, i); break;
    case IndexerCacheDtype::fp4:
      decode_indexer_fp4(std::span<const uint8_t>(in, size_t(row_bytes)), std::span<float>(out, size_t(d)));
      break;
  }
}

}  // namespace

void store_rows(const PagedRows& dst, const Tensor& rows, const StepRows& at, RowPlacement place) {
  const int64_t bytes = rows.row_numel() * elem_bytes(rows.type());
  for (int64_t r = 0; r < rows.rows(); ++r) {
    const Row w = row_at(at, r);
    if (w.slot < 0) continue;
    int64_t entry = -1;
    if (place.ring > 0 && w.position > w.last - place.ring) entry = w.position % place.ring;
    if (place.ring == 0 && (w.position + 1) % place.ratio == 0) entry = (w.position + 1) / place.ratio - 1;
    if (entry >= 0) std::memcpy(paged_row(dst, w.slot, entry), rows.data<std::byte>() + r * bytes, size_t(bytes));
  }
}

void compress(const PagedRows& pending, const Tensor& kv, const Tensor& gate, const Tensor& ape, const StepRows& at,
              int64_t ratio, bool overlap, Tensor& out) {
  const int64_t n = kv.rows(), width = kv.dim(1), out_w = overlap ? width / 2 : width;
  const int64_t ring = overlap ? 2 * ratio : ratio;
  // kv and biased gate of position p of row r's sequence: this step's row or the pending ring
  auto token = [&](const Row& w, int64_t p, int64_t ch, float& a, float& z) {
    if (p >= w.start) {
      const int64_t row = w.first_row + p - w.start;
      a = kv.data<float>()[row * width + ch];
      z = gate.data<float>()[row * width + ch] + ape.data<float>()[(p % ratio) * width + ch];
    } else {
      const float* slot = reinterpret_cast<const float*>(paged_row(pending, w.slot, p % ring));
      a = slot[ch];
      z = slot[width + ch];
    }
  };
  for (int64_t r = 0; r < n; ++r) {
    const Row w = row_at(at, r);
    if (w.slot < 0 || (w.position + 1) % ratio != 0) continue;
    const int64_t begin = w.position + 1 - ratio;  // the window this position completes
    for (int64_t ch = 0; ch < out_w; ++ch) {
      // candidates: (previous window's first halves,) this window's (second halves)
      std::vector<float> z, a;
      if (overlap && begin > 0)
        for (int64_t j = 0; j < ratio; ++j) token(w, begin - ratio + j, ch, a.emplace_back(), z.emplace_back());
      for (int64_t j = 0; j < ratio; ++j) token(w, begin + j, (overlap ? out_w : 0) + ch, a.emplace_back(), z.emplace_back());
      float m = kNegInf, s = 0;
      for (float v : z) m = std::max(m, v);
      for (float& v : z) s += (v = std::exp(v - m));
      float sum = 0;
      for (size_t j = 0; j < z.size(); ++j) sum += a[j] * (z[j] / s);
      out.data<float>()[r * out_w + ch] = sum;
    }
  }
  // then keep each sequence's last `ring` positions
  std::vector<float> row(static_cast<size_t>(2 * width));
  for (int64_t r = 0; r < n; ++r) {
    const Row w = row_at(at, r);
    if (w.slot < 0 || w.position <= w.last - ring) continue;
    for (int64_t ch = 0; ch < width; ++ch) token(w, w.position, ch, row[size_t(ch)], row[size_t(width + ch)]);
    std::memcpy(paged_row(pending, w.slot, w.position % ring), row.data(), row.size() * sizeof(float));
  }
}

void attention(const Tensor& q, const Tensor& step_kv, const PagedRows& window, const PagedRows* compressed,
               const Tensor* selected, const Tensor& sinks, const StepRows& at, const AttentionShape& s, Tensor& out) {
  const int64_t n = q.rows(), d = s.head_dim, heads = q.row_numel() / d;
  const int64_t step_bytes = step_kv.row_numel() * elem_bytes(step_kv.type());
  const int64_t k = selected ? selected->dim(1) : 0;
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < n; ++r) {
    const Row w = row_at(at, r);
    if (w.slot < 0) continue;
    // the keys, decoded once for every head: window positions, then compressed entries
    std::vector<float> keys;
    auto add = [&](const std::byte* bytes, int64_t row_bytes) {
      keys.resize(keys.size() + size_t(d));
      decode_kv_row(bytes, row_bytes, s.kv, d, s.rope_dim, keys.data() + keys.size() - size_t(d));
    };
    for (int64_t p = std::max<int64_t>(0, w.position - s.window + 1); p <= w.position; ++p) {
      if (p >= w.start) add(step_kv.data<std::byte>() + (w.first_row + p - w.start) * step_bytes, step_bytes);
      else add(paged_row(window, w.slot, p % s.window), window.row_bytes);
    }
    if (compressed && selected) {
      for (int64_t j = 0; j < k; ++j)
        if (const int32_t e = selected->data<int32_t>()[r * k + j]; e >= 0) add(paged_row(*compressed, w.slot, e), compressed->row_bytes);
    } else if (compressed) {
      for (int64_t e = 0; e < (w.position + 1) / s.ratio; ++e) add(paged_row(*compressed, w.slot, e), compressed->row_bytes);
    }
    const int64_t K = int64_t(keys.size()) / d;
    std::vector<float> z(static_cast<size_t>(K));
    std::vector<double> acc(static_cast<size_t>(d));
    for (int64_t h = 0; h < heads; ++h) {
      const float* qh = q.data<float>() + (r * heads + h) * d;
      const float sink = sinks.data<float>()[h];
      float m = sink;
      for (int64_t j = 0; j < K; ++j) m = std::max(m, z[size_t(j)] = float(dot(qh, keys.data() + j * d, d)) * float(s.scale));
      float denom = std::exp(sink - m);
      for (float& v : z) denom += (v = std::exp(v - m));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < K; ++j) {
        const float p = z[size_t(j)] / denom;
        for (int64_t i = 0; i < d; ++i) acc[size_t(i)] += double(p) * keys[size_t(j * d + i)];
      }
      for (int64_t i = 0; i < d; ++i) out.data<float>()[(r * heads + h) * d + i] = float(acc[size_t(i)]);
    }
  }
}

void indexer_topk(const Tensor& q, const Tensor& weights, const PagedRows& keys, IndexerCacheDtype t, const StepRows& at,
                  int64_t heads, int64_t k, int64_t ratio, double weight_scale, Tensor& out) {
  const int64_t n = q.rows(), d = q.row_numel() / heads;
#pragma omp parallel for schedule(dynamic)
  for (int64_t r = 0; r < n; ++r) {
    const Row w = row_at(at, r);
    int32_t* o = out.data<int32_t>() + r * k;
    std::fill(o, o + k, -1);
    if (w.slot < 0) continue;
    const int64_t count = (w.position + 1) / ratio, total = (w.last + 1) / ratio;
    // (score, entry) with the not-yet-visible entries at -inf, as transformers scores them
    std::vector<std::pair<float, int32_t>> queue;
    std::vector<float> key(static_cast<size_t>(d));
    for (int64_t c = 0; c < total; ++c) {
      double s = 0;
      if (c < count) {
        decode_indexer_row(paged_row(keys, w.slot, c), keys.row_bytes, t, d, key.data());
        for (int64_t h = 0; h < heads; ++h) {
          const double qk = dot(q.data<float>() + (r * heads + h) * d, key.data(), d);
          s += std::max(qk, 0.0) * double(weights.data<float>()[r * heads + h]) * weight_scale;
        }
      }
      queue.emplace_back(c < count ? float(s) : kNegInf, int32_t(c));
    }
    // Equal scores (all heads' ReLU at zero) are common: pick among them exactly as
    // torch.topk does on the CPU (partial_sort for small k, else nth_element).
    const int64_t take = std::min(k, total);
    auto larger = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) { return a.first > b.first; };
    if (take > 0) {
      if (take * 64 <= total) {
        std::partial_sort(queue.begin(), queue.begin() + take, queue.end(), larger);
      } else {
        std::nth_element(queue.begin(), queue.begin() + take - 1, queue.end(), larger);
        std::sort(queue.begin(), queue.begin() + take - 1, larger);
      }
    }
    for (int64_t j = 0; j < take; ++j)
      if (queue[size_t(j)].second < count) o[j] = queue[size_t(j)].second;
  }
}

}  // namespace tetra::cpu
