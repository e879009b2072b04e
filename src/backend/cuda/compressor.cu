#include <algorithm>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/paged.cuh"
#include "backend/cuda/launch.cuh"

namespace tetra::cuda {
namespace {

struct Tokens {  // this step's rows and the pending ring of one sequence
  const float *kv, *gate, *ape;
  PagedView pending;
  int64_t width, ratio, ring;
  int32_t slot, start, first_row;

  __device__ void at(int64_t p, int64_t ch, float& a, float& z) const {
    if (p >= start) {
      const int64_t row = first_row + p - start;
      a = kv[row * width + ch];
      z = gate[row * width + ch] + ape[(p % ratio) * width + ch];
    } else {
      const float* s = reinterpret_cast<const float*>(paged_row(pending, slot, p % ring));
      a = s[ch];
      z = s[width + ch];
    }
  }
};

__device__ Tokens tokens_of(int64_t r, const float* kv, const float* gate, const float* ape, PagedView pending,
                            int64_t width, StepView at, int64_t ratio, bool overlap) {
  return {kv, gate, ape, pending, width, ratio, overlap ? 2 * ratio : ratio, at.slot[r], at.start[r], at.first_row[r]};
}

// One thread per (row, channel); candidates in the reference's order: previous, current. Their
// (value, gate) pairs are requested kPoolChunk at a time, all in flight together, and a window of
// at most kPoolChunk candidates (CSA's 2 × 4) is read once for the three passes: read a candidate
// at a time, every pass was a chain of dependent round trips (24 for CSA, 384 for HCA's 128),
// 16-22 µs of a compressing decode step's chain per CSA layer on the H200 (a kernel timeline).
// The passes add in candidate order as before: the same bits.
constexpr int kPoolChunk = 8, kPoolThreads = 128, kPoolRowBlocks = 512;

// Channel ch of row r into *o: the pooled entry where the row completes one, else 0.
__device__ __forceinline__ void pool_channel(PagedView pending, const float* kv, const float* gate, const float* ape,
                                             int64_t width, StepView at, int64_t ratio, bool overlap, int64_t r,
                                             int64_t ch, float* o) {
  const int64_t out_w = overlap ? width / 2 : width, t = at.position[r];
  if (at.slot[r] < 0 || (t + 1) % ratio != 0) {
    *o = 0;
    return;
  }
  const Tokens tok = tokens_of(r, kv, gate, ape, pending, width, at, ratio, overlap);
  const int64_t begin = t + 1 - ratio, off = overlap ? out_w : 0;
  const int64_t previous = overlap && begin > 0 ? ratio : 0, count = previous + ratio;
  // candidates c0 .. c0 + kPoolChunk - 1 (those below count) into a, z
  auto load = [&](int64_t c0, float (&a)[kPoolChunk], float (&z)[kPoolChunk]) {
#pragma unroll
    for (int i = 0; i < kPoolChunk; ++i) {
      const int64_t c = c0 + i;
      if (c < previous) tok.at(begin - ratio + c, ch, a[i], z[i]);
      else if (c < count) tok.at(begin + c - previous, off + ch, a[i], z[i]);
    }
  };
  float a[kPoolChunk], z[kPoolChunk];
  // pass(a, z, c0): the candidates of one chunk, in order
  auto each_chunk = [&](auto pass) {
    for (int64_t c0 = 0; c0 < count; c0 += kPoolChunk) {
      if (count > kPoolChunk) load(c0, a, z);  // else loaded once, before the first pass
      pass(c0);
    }
  };
  if (count <= kPoolChunk) load(0, a, z);
  float m = -INFINITY;
  each_chunk([&](int64_t c0) {
#pragma unroll
    for (int i = 0; i < kPoolChunk; ++i)
      if (c0 + i < count) m = fmaxf(m, z[i]);
  });
  float s = 0;
  each_chunk([&](int64_t c0) {
#pragma unroll
    for (int i = 0; i < kPoolChunk; ++i)
      if (c0 + i < count) s += expf(z[i] - m);
  });
  float sum = 0;
  each_chunk([&](int64_t c0) {
#pragma unroll
    for (int i = 0; i < kPoolChunk; ++i)
      if (c0 + i < count) sum += a[i] * (expf(z[i] - m) / s);
  });
  *o = sum;
}

// The keep of one decode row (its sequence's only row in the step, position t) by the thread of
// pooled channel ch: channels ch, ch + out_w, ... of row t mod ring; the values keep_kernel stores.
__device__ __forceinline__ void keep_row_channels(PagedView pending, const float* kv, const float* gate, const float* ape,
                                                  int64_t width, StepView at, int64_t ratio, bool overlap, int64_t r,
                                                  int64_t ch, int64_t out_w) {
  const Tokens tok = tokens_of(r, kv, gate, ape, pending, width, at, ratio, overlap);
  if (tok.slot < 0) return;
  const int64_t t = at.position[r];
  float* s = reinterpret_cast<float*>(paged_row(pending, tok.slot, t % tok.ring));
  for (int64_t c = ch; c < width; c += out_w) {
    float a, z;
    tok.at(t, c, a, z);
    s[c] = a;
    s[width + c] = z;
  }
}

// Block (channel block x, y) takes the y-th of gridDim.y runs of consecutive rows: in a prefill
// only one row in `ratio` completes an entry, and a block per (row, 128 channels) spent its time
// launching blocks that store zeros (an 8192-row prefill: 224 µs a CSA layer, 344 an HCA one).
// Consecutive rows, not a stride: rows y, y + 512, ... put all 64 of an HCA prefill's completing
// rows (every 128th) on 4 blocks, each pooling 16 of them one after another (the likely cause of
// +12 ms a prefill in the twenty-ninth run of docs/perf.md).
// Keep: a decode step's pool and keep in one launch. When every sequence has one row (position
// t), its pool reads the ring rows of positions t - ring + 1 .. t - 1 only, never row t mod ring,
// which the keep writes, so nothing orders the two (a step of several rows a sequence keeps
// positions whose ring rows its earlier rows pool: there keep_kernel follows this kernel). In a
// decode step's chain (the indexer's keys of a CSA layer) keep_kernel's one block waited ~6 µs for
// a slot beside wq_b's blocks (docs/perf.md, thirty-eighth run).
template <bool Keep>
__global__ void pool_kernel(PagedView pending, const float* kv, const float* gate, const float* ape, int64_t n,
                            int64_t width, StepView at, int64_t ratio, bool overlap, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t out_w = overlap ? width / 2 : width;
  const int64_t ch = int64_t(blockIdx.x) * kPoolThreads + threadIdx.x;
  if (ch >= out_w) return;
  const int64_t per = (n + gridDim.y - 1) / gridDim.y, end = min(n, (blockIdx.y + 1) * per);
#pragma unroll 1
  for (int64_t r = blockIdx.y * per; r < end; ++r) {
    pool_channel(pending, kv, gate, ape, width, at, ratio, overlap, r, ch, out + r * out_w + ch);
    if constexpr (Keep) keep_row_channels(pending, kv, gate, ape, width, at, ratio, overlap, r, ch, out_w);
  }
}

// One block per row: the last `ring` positions of each sequence into the pending ring. A thread
// loads kKeepPerThread channels before it stores any (one round trip, not one a channel: 4.9 µs
// for a decode row of 1024 channels at 128 threads).
constexpr int kKeepThreads = 256, kKeepPerThread = 4;
__global__ void __launch_bounds__(kKeepThreads)
    keep_kernel(PagedView pending, const float* kv, const float* gate, const float* ape, int64_t width, StepView at,
                int64_t ratio, bool overlap) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t r = blockIdx.x, t = at.position[r];
  const Tokens tok = tokens_of(r, kv, gate, ape, pending, width, at, ratio, overlap);
  if (tok.slot < 0 || t <= at.last[r] - tok.ring) return;
  float* s = reinterpret_cast<float*>(paged_row(pending, tok.slot, t % tok.ring));
  for (int64_t c0 = threadIdx.x; c0 < width; c0 += kKeepPerThread * blockDim.x) {
    float a[kKeepPerThread], z[kKeepPerThread];
#pragma unroll
    for (int u = 0; u < kKeepPerThread; ++u)
      if (c0 + u * blockDim.x < width) tok.at(t, c0 + u * blockDim.x, a[u], z[u]);
#pragma unroll
    for (int u = 0; u < kKeepPerThread; ++u)
      if (c0 + u * blockDim.x < width) {
        s[c0 + u * blockDim.x] = a[u];
        s[width + c0 + u * blockDim.x] = z[u];
      }
  }
}

}  // namespace

void compress(PagedView pending, const float* kv, const float* gate, const float* ape, int64_t n, int64_t width,
              StepView at, int64_t ratio, bool overlap, bool one_row_each, float* out, cudaStream_t stream) {
  const int64_t out_w = overlap ? width / 2 : width;
  if (n * out_w == 0) return;
  const dim3 pool_grid(unsigned((out_w + kPoolThreads - 1) / kPoolThreads), unsigned(std::min<int64_t>(n, kPoolRowBlocks)));
  launch_early(one_row_each ? pool_kernel<true> : pool_kernel<false>, pool_grid, dim3(kPoolThreads), 0, stream, pending,
               kv, gate, ape, n, width, at, ratio, overlap, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
  if (one_row_each) return;
  launch_early(keep_kernel, dim3(unsigned(n)), dim3(kKeepThreads), 0, stream, pending, kv, gate, ape, width, at, ratio,
               overlap);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
