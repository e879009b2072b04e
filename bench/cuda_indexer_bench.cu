// The lightning indexer's top-k (src/backend/cuda/indexer.cu) against the kernel it replaced,
// in one run, at V4-Flash geometry (64 heads × 128, k = 512, ratio 4, fp4 keys):
//   - one decode row at 4k, 64k and 1M tokens of context (1024 .. 262144 keys);
//   - a prefill of 2048 rows ending at 8k tokens (up to 2048 keys a row).
// The replaced kernel (a block per row scoring every key, then k block-wide argmax rounds) is
// kept here as the baseline, with the geometry as compile-time constants (the library's original
// took heads and d at run time); both must pick the same keys. Times are medians of event pairs.
// Usage: tetra_cuda_indexer_bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <vector>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/paged.cuh"
#include "backend/cuda/paged.h"

namespace {
using namespace tetra::cuda;

constexpr int64_t kHeads = 64, kDim = 128, kTopk = 512, kRatio = 4, kRowsPerBlock = 64;
constexpr int64_t kRowBytes = kDim / 2 + kDim / 32;  // fp4 codes, then a scale byte per 32

// ---- the baseline: the indexer kernel before the radix select
constexpr int kBaseThreads = 256;

__device__ __forceinline__ bool better(float a, int64_t ai, float b, int64_t bi) {
  if (ai < 0) return false;
  if (bi < 0) return true;
  return a > b || (a == b && ai < bi);
}

__global__ void __launch_bounds__(kBaseThreads)
    baseline_kernel(const float* q, const float* weights, PagedView keys, StepView at, float weight_scale, float* scratch,
                    int64_t capacity, int32_t* out) {
  __shared__ float values[32];
  __shared__ int64_t indices[32];
  const int64_t r = blockIdx.x, k = kTopk;
  const int32_t slot = at.slot[r];
  const int64_t count = slot < 0 ? 0 : (at.position[r] + 1) / kRatio;
  float* z = scratch + r * capacity;
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t c = warp; c < count; c += warps) {
    const uint8_t* row = paged_row(keys, slot, c);
    float key[kDim / 32];
    for (int u = 0; u < kDim / 32; ++u) key[u] = stored_value(row, lane + 32 * u, RowFormat::fp4_indexer, kDim, 0);
    float s = 0;
    for (int64_t h = 0; h < kHeads; ++h) {
      const float* qh = q + (r * kHeads + h) * kDim;
      float qk = 0;
      for (int u = 0; u < kDim / 32; ++u) qk = fmaf(qh[lane + 32 * u], key[u], qk);
      qk = warp_reduce_sum(qk);
      s += fmaxf(qk, 0.0f) * weights[r * kHeads + h] * weight_scale;
    }
    if (lane == 0) z[c] = s;
  }
  __syncthreads();
  const int64_t take = min(k, count);
  for (int64_t j = 0; j < k; ++j) {
    if (j >= take) {
      if (threadIdx.x == 0) out[r * k + j] = -1;
      continue;
    }
    float best = 0;
    int64_t bi = -1;
    for (int64_t c = threadIdx.x; c < count; c += blockDim.x)
      if (better(z[c], z[c] == -INFINITY ? -1 : c, best, bi)) best = z[c], bi = z[c] == -INFINITY ? -1 : c;
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xFFFFFFFFu, best, off);
      const int64_t oi = __shfl_xor_sync(0xFFFFFFFFu, bi, off);
      if (better(o, oi, best, bi)) best = o, bi = oi;
    }
    __syncthreads();
    if (lane == 0) values[warp] = best, indices[warp] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
      best = 0, bi = -1;
      for (int i = 0; i < warps; ++i)
        if (better(values[i], indices[i], best, bi)) best = values[i], bi = indices[i];
      out[r * k + j] = int32_t(bi);
      if (bi >= 0) z[bi] = -INFINITY;
    }
    __syncthreads();
  }
}

// ---- timing
template <class F>
double median_ms(cudaStream_t s, int iterations, F&& f) {
  f();
  std::vector<std::unique_ptr<CudaEvent>> start, stop;
  for (int i = 0; i < iterations; ++i) {
    start.push_back(std::make_unique<CudaEvent>());
    stop.push_back(std::make_unique<CudaEvent>());
    TETRA_CUDA_CHECK(cudaEventRecord(start.back()->get(), s));
    f();
    TETRA_CUDA_CHECK(cudaEventRecord(stop.back()->get(), s));
  }
  TETRA_CUDA_CHECK(cudaStreamSynchronize(s));
  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    float t = 0;
    TETRA_CUDA_CHECK(cudaEventElapsedTime(&t, start[size_t(i)]->get(), stop[size_t(i)]->get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class T>
DeviceBuffer upload(const std::vector<T>& v) {
  DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 1));
  TETRA_CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return b;
}

// One point: `rows` query rows of one sequence at positions context-rows .. context-1.
void point(const char* name, int64_t context, int64_t rows, std::mt19937& rng, const CudaStream& stream) {
  const int64_t capacity = context / kRatio, blocks = capacity / kRowsPerBlock;
  std::vector<uint8_t> pool(size_t(capacity * kRowBytes));
  for (int64_t c = 0; c < capacity; ++c) {
    for (int64_t i = 0; i < kDim / 2; ++i) pool[size_t(c * kRowBytes + i)] = uint8_t(rng());
    for (int64_t i = kDim / 2; i < kRowBytes; ++i) pool[size_t(c * kRowBytes + i)] = uint8_t(120 + rng() % 8);
  }
  std::vector<int32_t> tables(static_cast<size_t>(blocks)), at(static_cast<size_t>(5 * rows));
  for (int64_t b = 0; b < blocks; ++b) tables[size_t(b)] = int32_t(b);
  for (int64_t r = 0; r < rows; ++r) {
    at[size_t(r)] = 0;
    at[size_t(rows + r)] = int32_t(context - rows + r);
    at[size_t(2 * rows + r)] = int32_t(context - rows);
    at[size_t(3 * rows + r)] = int32_t(context - 1);
    at[size_t(4 * rows + r)] = 0;
  }
  std::normal_distribution<float> normal;
  std::vector<float> q(size_t(rows * kHeads * kDim)), w(size_t(rows * kHeads));
  for (float& x : q) x = normal(rng);
  for (float& x : w) x = normal(rng);
  const DeviceBuffer dpool = upload(pool), dtables = upload(tables), dat = upload(at), dq = upload(q), dw = upload(w);
  DeviceBuffer scratch(size_t(rows * capacity) * sizeof(float)), old_out(size_t(rows * kTopk) * 4),
      new_out(size_t(rows * kTopk) * 4);
  const PagedView view{dpool.get<uint8_t>(), dtables.get<int32_t>(), blocks, 0, kRowsPerBlock, kRowBytes,
                       kRowsPerBlock * kRowBytes};
  const int32_t* a = dat.get<int32_t>();
  const StepView step{a, a + rows, a + 2 * rows, a + 3 * rows, a + 4 * rows};
  auto run_old = [&] {
    baseline_kernel<<<unsigned(rows), kBaseThreads, 0, stream.get()>>>(dq.get<float>(), dw.get<float>(), view, step, 0.125f,
                                                                       scratch.get<float>(), capacity, old_out.get<int32_t>());
    TETRA_CUDA_CHECK(cudaGetLastError());
  };
  auto run_new = [&] {
    paged_indexer_topk(dq.get<float>(), dw.get<float>(), view, RowFormat::fp4_indexer, rows, step, kHeads, kDim, kTopk, kRatio,
                       0.125f, scratch.get<float>(), capacity, new_out.get<int32_t>(), stream.get());
  };
  const double old_ms = median_ms(stream.get(), context >= (1 << 20) || rows > 1 ? 3 : 10, run_old);
  const double new_ms = median_ms(stream.get(), 20, run_new);
  std::vector<int32_t> o(size_t(rows * kTopk)), n(o.size());
  TETRA_CUDA_CHECK(cudaMemcpy(o.data(), old_out.get(), o.size() * 4, cudaMemcpyDeviceToHost));
  TETRA_CUDA_CHECK(cudaMemcpy(n.data(), new_out.get(), n.size() * 4, cudaMemcpyDeviceToHost));
  std::printf("%-28s keys %7lld  old %10.3f ms  new %8.3f ms  speed-up %7.1fx  same picks: %s\n", name,
              (long long)capacity, old_ms, new_ms, old_ms / new_ms, o == n ? "yes" : "NO");
}

}  // namespace

int main() {
  std::mt19937 rng(11);
  const CudaStream stream;
  point("decode, 4k context", 4096, 1, rng, stream);
  point("decode, 64k context", 65536, 1, rng, stream);
  point("decode, 1M context", 1 << 20, 1, rng, stream);
  point("prefill 2048 rows, 8k", 8192, 2048, rng, stream);
  return 0;
}
