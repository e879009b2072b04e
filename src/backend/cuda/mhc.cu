#include "backend/cuda/mhc.h"

#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/reduce.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/shared_tiles.cuh"

namespace tetra::cuda {
namespace {

constexpr int kMaxMix = (2 + kMaxHc) * kMaxHc;
constexpr int kSums = kMaxMix + 1;  // the mixes' dot products, then Σv²
constexpr int kThreads = 256;
// The mix pass splits each row into slices of a fixed length, one block per (rows, slice), so a
// decode step's single row spreads over the GPU; the slices' partial sums are added in slice
// order by the finishing kernels, the same order whatever the batch.
// 256 values: one per thread of a few-row block, and 64 blocks for a V4-Flash row (32 blocks of
// 512 took 7 µs).
constexpr int64_t kSliceLength = 256;
// The finishing kernels take a block per row, the row's x staged in shared memory for its RMS
// norm (rows of at most kMaxStagedDim): 1024 threads for a decode step's few rows (each thread's
// loads one round trip), 256 from kFewRowsFrom rows on. The norm's sum of squares runs on the
// first kNormLanes threads whatever the block's size, so a row's x does not depend on its step.
constexpr int kFinishThreads = 256, kFewRowsThreads = 1024, kNormLanes = 256;
constexpr int64_t kFewRowsFrom = 64;
constexpr int64_t kMaxStagedDim = 48 * 1024 / int64_t(sizeof(float));
constexpr int64_t kMaxSlices = 128;  // hc·dim up to 32768

__device__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

int64_t slice_count(const HcParams& p) { return (p.hc * p.dim + kSliceLength - 1) / kSliceLength; }

// Every dot product of the mix pass (fn[k]·v and Σv²) is summed in one order, whatever kernel
// runs it, so a row's mixes never depend on the batch: per slice of kSliceLength values, 32
// partial sums of 8 consecutive values each (an FMA chain from 0 in column order), added in
// warp_sum's butterfly tree (pairs 16 apart, then 8, 4, 2, 1); the finishing kernels add the
// slices in order. Values past the row's end are zeros on both sides of each product.
constexpr int kChain = 8;  // values per partial sum
static_assert(kSliceLength == 32 * kChain, "a slice is 32 partial sums");

__device__ __forceinline__ float output_at(const SubBlockOutput& y, int64_t i) {
  return y.plus ? y.y[i] + y.plus[i] : y.y[i];
}
__device__ __forceinline__ float4 output4_at(const SubBlockOutput& y, int64_t i) {
  const float4 v = *reinterpret_cast<const float4*>(y.y + i);
  if (!y.plus) return v;
  const float4 p = *reinterpret_cast<const float4*>(y.plus + i);
  return make_float4(v.x + p.x, v.y + p.y, v.z + p.z, v.w + p.w);
}

// Where the mix pass reads value i of row r: the streams as they are ...
struct StoredStreams {
  const float* h;
  int64_t flat;
  __device__ float operator()(int64_t r, int64_t i) const { return h[r * flat + i]; }
};
// ... or the previous sub-block's post update of them, computed (as hc_post_kernel does, the same
// roundings) and written to out on the way. Plus: y.plus is set (a template argument: the choice
// made per value took the 4-row mix kernel from 128 to 168 registers).
template <int HC, bool Plus>
struct UpdatedStreams {
  const float* h;
  SubBlockOutput y;
  const float *post, *comb;
  int64_t dim;
  float* out;
  __device__ float operator()(int64_t r, int64_t i) const {
    const int64_t j = i / dim, d = i % dim;
    const float yv = Plus ? y.y[r * dim + d] + y.plus[r * dim + d] : y.y[r * dim + d];
    float s = post[r * HC + j] * yv;
#pragma unroll
    for (int k = 0; k < HC; ++k) s += comb[(r * HC + k) * HC + j] * h[(r * HC + k) * dim + d];
    out[r * HC * dim + i] = s;
    return s;
  }
};

// partial[r][slice][k] = Σ over the slice of fn[k]·v (k < mix), and of v² at k = kMaxMix, for
// Rows rows per block (the rows share each fn load; a row's sums do not depend on its neighbours).
// The block first reads v = streams(r, i) once per value into shared memory (an updated stream is
// computed and stored once), then warp w takes sums w, w + 8, ...: lane p the partial sums of
// values 8p .. 8p + 7, the butterfly through shuffles.
constexpr int kSumsPerLane = (kSums + kThreads / 32 - 1) / (kThreads / 32);  // a lane's chains per row
template <int Rows, class Streams>
__global__ void __launch_bounds__(kThreads)
    hc_mix_kernel(Streams streams, const float* fn, int64_t n, int mix, int64_t flat, float* partial) {
  allow_next_kernel();
  const int64_t r0 = int64_t(blockIdx.x) * Rows, slice = blockIdx.y, slices = gridDim.y;
  const int64_t begin = slice * kSliceLength, end = min(begin + kSliceLength, flat);
  const int warp = threadIdx.x / 32, lane = threadIdx.x & 31, c0 = kChain * lane;
  // The lane's values of fn's rows (16-byte loads where they are aligned: the slice's end is then a
  // multiple of 4), requested before the wait for the kernel ahead: fn is a weight, and the streams
  // it multiplies are that kernel's output (their staging below is a round trip of its own).
  const bool vector_fn = flat % 4 == 0 && reinterpret_cast<uintptr_t>(fn) % 16 == 0;
  float w[kSumsPerLane][kChain] = {};
#pragma unroll
  for (int m = 0; m < kSumsPerLane; ++m) {
    const int k = warp + m * (kThreads / 32);
    if (k >= mix) continue;
    const float* w_row = fn + k * flat + begin + c0;
#pragma unroll
    for (int q = 0; q < kChain; q += 4) {
      const bool inside = begin + c0 + q < end;
      if (vector_fn) {
        const float4 f = inside ? *reinterpret_cast<const float4*>(w_row + q) : make_float4(0, 0, 0, 0);
        w[m][q] = f.x;
        w[m][q + 1] = f.y;
        w[m][q + 2] = f.z;
        w[m][q + 3] = f.w;
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) w[m][q + e] = begin + c0 + q + e < end ? w_row[q + e] : 0.0f;
      }
    }
  }
  wait_for_inputs();
  __shared__ __align__(16) float values[Rows][kSliceLength];
  for (int c = threadIdx.x; c < kSliceLength; c += blockDim.x)
#pragma unroll
    for (int j = 0; j < Rows; ++j) values[j][c] = r0 + j < n && begin + c < end ? streams(r0 + j, begin + c) : 0.0f;
  __syncthreads();
  float v[Rows][kChain];
#pragma unroll
  for (int j = 0; j < Rows; ++j)
#pragma unroll
    for (int q = 0; q < kChain; q += 4) {
      const float4 f = *reinterpret_cast<const float4*>(&values[j][c0 + q]);
      v[j][q] = f.x;
      v[j][q + 1] = f.y;
      v[j][q + 2] = f.z;
      v[j][q + 3] = f.w;
    }
  float chains[Rows][kSumsPerLane] = {};
#pragma unroll
  for (int m = 0; m < kSumsPerLane; ++m) {
    const int k = warp + m * (kThreads / 32);
    if (k < mix) {
#pragma unroll
      for (int q = 0; q < kChain; ++q)
#pragma unroll
        for (int j = 0; j < Rows; ++j) chains[j][m] = fmaf(w[m][q], v[j][q], chains[j][m]);
    } else if (k == kMaxMix) {
#pragma unroll
      for (int q = 0; q < kChain; ++q)
#pragma unroll
        for (int j = 0; j < Rows; ++j) chains[j][m] = fmaf(v[j][q], v[j][q], chains[j][m]);
    }
  }
#pragma unroll
  for (int j = 0; j < Rows; ++j)
#pragma unroll
    for (int m = 0; m < kSumsPerLane; ++m) {
      const int k = warp + m * (kThreads / 32);
      const float total = warp_sum(chains[j][m]);  // sums past mix, not Σv², stay 0
      if (k < kSums && lane == 0 && r0 + j < n) partial[((r0 + j) * slices + slice) * kSums + k] = total;
    }
}

// The mix pass for many rows, equal bit for bit to hc_mix_kernel: a lane per row (64 rows a block,
// staged in shared memory with the slice of fn's rows, which every lane of a warp reads at once:
// from L2 those loads left most warps waiting), a warp per kSumsPerWarp of the sums of 32 rows (the
// mixes in order, then Σv²). A lane computes the 32 partial sums of a slice one after another in
// the order the butterfly tree takes its leaves (bit-reversed: 0, 16, 8, 24, ...), adding each
// finished pair of subtrees at once, so each sum keeps five subtotals, not 32.
constexpr int kRowGroups = 2;  // of 32 rows: the fn slice serves 64 rows, two blocks fit an SM
constexpr int kTileRows = 32 * kRowGroups;
constexpr int kSumsPerWarp = 5;
constexpr int kGroupWarps = (kSums + kSumsPerWarp - 1) / kSumsPerWarp;  // the warps of one row group
constexpr int kTileWarps = kRowGroups * kGroupWarps;
constexpr int kTilePitch = kSliceLength + 4;  // a quarter warp's float4 reads fall on distinct banks
constexpr int kTreeLevels = 5;                // log2(32 partial sums)

__host__ __device__ constexpr int bit_reversed5(int i) {
  return ((i & 1) << 4) | ((i & 2) << 2) | (i & 4) | ((i & 8) >> 2) | ((i & 16) >> 4);
}

__global__ void __launch_bounds__(kTileWarps * 32)
    hc_mix_tile_kernel(const float* h, const float* fn, int64_t n, int mix, int64_t flat, float* partial) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ __align__(16) float tile[];  // [kTileRows][kTilePitch], then fn's slice [mix][kSliceLength]
  float* fn_slice = tile + kTileRows * kTilePitch;
  const int64_t r0 = int64_t(blockIdx.x) * kTileRows, slice = blockIdx.y, slices = gridDim.y;
  const int64_t begin = slice * kSliceLength, end = min(begin + kSliceLength, flat);
  // cp.async: every copy of the block in flight at once, none held in registers
  const uint32_t tile_at = shared_address(tile), fn_at = shared_address(fn_slice);
  for (int t = threadIdx.x; t < kTileRows * kSliceLength / 4; t += blockDim.x) {
    const int row = t / (kSliceLength / 4), c = 4 * (t % (kSliceLength / 4));
    const bool inside = r0 + row < n && begin + c < end;  // end - begin is a multiple of 4
    cp_async_16(tile_at + 4 * (row * kTilePitch + c), inside ? h + (r0 + row) * flat + begin + c : h, inside);
  }
  for (int t = threadIdx.x; t < mix * kSliceLength / 4; t += blockDim.x) {
    const int row = t / (kSliceLength / 4), c = 4 * (t % (kSliceLength / 4));
    cp_async_16(fn_at + 4 * (row * kSliceLength + c), begin + c < end ? fn + row * flat + begin + c : fn, begin + c < end);
  }
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();
  // Sum slot s of this warp is the (warp·kSumsPerWarp + s)-th sum (mix k < mix, then Σv²) of row
  // 32·group + lane.
  const int group = threadIdx.x / 32 / kGroupWarps, warp = threadIdx.x / 32 % kGroupWarps, lane = threadIdx.x & 31;
  const int row = 32 * group + lane;
  const float* x = tile + row * kTilePitch;
  // Every slot reads a row, so the loop has no branch: Σv²'s is x, unused slots past it read fn's first.
  int sum_of[kSumsPerWarp];
  const float* rows[kSumsPerWarp];
#pragma unroll
  for (int s = 0; s < kSumsPerWarp; ++s) {
    const int i = warp * kSumsPerWarp + s;
    sum_of[s] = i < mix ? i : i == mix ? kMaxMix : -1;
    rows[s] = i < mix ? fn_slice + i * kSliceLength : i == mix ? x : fn_slice;
  }
  float slice_sum[kSumsPerWarp] = {};
  if (warp * kSumsPerWarp <= mix) {
    float subtotal[kTreeLevels][kSumsPerWarp];  // subtotal[l]: a finished subtree of 2^l leaves
#pragma unroll
    for (int leaf = 0; leaf < 32; ++leaf) {
      const int c = kChain * bit_reversed5(leaf);
      const float4 x0 = *reinterpret_cast<const float4*>(x + c), x1 = *reinterpret_cast<const float4*>(x + c + 4);
      const float xs[kChain] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
#pragma unroll
      for (int s = 0; s < kSumsPerWarp; ++s) {
        const float4 w0 = *reinterpret_cast<const float4*>(rows[s] + c), w1 = *reinterpret_cast<const float4*>(rows[s] + c + 4);
        const float ws[kChain] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
        float chain = 0.0f;
#pragma unroll
        for (int q = 0; q < kChain; ++q) chain = fmaf(ws[q], xs[q], chain);
        // leaf's trailing one bits: the subtrees it completes, each added left (earlier) + right
        int level = 0;
#pragma unroll
        for (; level < kTreeLevels && ((leaf >> level) & 1); ++level) chain = subtotal[level][s] + chain;
        if (level < kTreeLevels) subtotal[level][s] = chain;
        else slice_sum[s] = chain;
      }
    }
  }
  __syncthreads();  // the tile becomes the block's sums, written out a row at a time
  float* sums = tile;
  for (int t = threadIdx.x; t < kTileRows * kSums; t += blockDim.x) sums[t] = 0.0f;  // sums past mix stay 0
  __syncthreads();
#pragma unroll
  for (int s = 0; s < kSumsPerWarp; ++s)
    if (sum_of[s] >= 0) sums[row * kSums + sum_of[s]] = slice_sum[s];
  __syncthreads();
  for (int t = threadIdx.x; t < kTileRows * kSums; t += blockDim.x) {
    const int64_t r = r0 + t / kSums;
    if (r < n) partial[(r * slices + slice) * kSums + t % kSums] = sums[t];
  }
}

// mixes[k] = (fn[k] · v) · rsqrt(mean(v²) + eps) for k < mix, from row r's slice sums (block-wide):
// every thread loads some of the row's partial sums at once, then each sum adds its slices in order.
__device__ void gather_mixes(const float* partial, int64_t r, int64_t slices, int mix, int64_t flat, float eps,
                             float* mixes) {
  __shared__ float staged[kMaxSlices * kSums];
  __shared__ float sums[kSums];
#pragma unroll 8  // the loads in flight together: one round trip, not one an iteration
  for (int64_t i = threadIdx.x; i < slices * kSums; i += blockDim.x) staged[i] = partial[r * slices * kSums + i];
  __syncthreads();
  if (threadIdx.x < kSums) {
    float s = 0;
    for (int64_t j = 0; j < slices; ++j) s += staged[j * kSums + threadIdx.x];
    sums[threadIdx.x] = s;
  }
  __syncthreads();
  const float rs = 1.0f / sqrtf(sums[kMaxMix] / float(flat) + eps);
  if (threadIdx.x < mix) mixes[threadIdx.x] = sums[threadIdx.x] * rs;
  __syncthreads();
}

// Σ_i pre[i]·x[i] of one quad of columns, in stream order (every path below: the same bits).
template <int MaxHc>
__device__ __forceinline__ float4 mixed_quad(const float4 (&x)[MaxHc], const float* pre, int hc) {
  float4 s = make_float4(0, 0, 0, 0);
#pragma unroll
  for (int i = 0; i < MaxHc; ++i)
    if (i < hc) {
      s.x += pre[i] * x[i].x;
      s.y += pre[i] * x[i].y;
      s.z += pre[i] * x[i].z;
      s.w += pre[i] * x[i].w;
    }
  return s;
}

// staged[k] = Σ_i pre[i]·h[r, i, k] for the row's columns, by `threads` threads (this one is
// `thread` among them). Four columns a thread where the row allows 16-byte loads: the scalar loop
// kept ~4 loads in flight a thread and its FMAs waited on them (long scoreboard 68% of stalls at
// 8192 rows); each column sums the same products in the same order either way.
__device__ void mix_streams(const float* v, const float* pre, int hc, int64_t dim, int thread, int threads,
                            float* staged) {
  if (dim % 4 == 0 && reinterpret_cast<uintptr_t>(v) % 16 == 0) {
    const float4* v4 = reinterpret_cast<const float4*>(v);
    float4* staged4 = reinterpret_cast<float4*>(staged);
    const int64_t dim4 = dim / 4;
#pragma unroll 2
    for (int64_t k = thread; k < dim4; k += threads) {
      float4 x[kMaxHc];
#pragma unroll
      for (int i = 0; i < kMaxHc; ++i)
        if (i < hc) x[i] = v4[i * dim4 + k];
      staged4[k] = mixed_quad(x, pre, hc);
    }
    return;
  }
#pragma unroll 4
  for (int64_t k = thread; k < dim; k += threads) {
    float s = 0;
    for (int i = 0; i < hc; ++i) s += pre[i] * v[i * dim + k];
    staged[k] = s;
  }
}

// A finishing block's streams of one row, requested before the pre weights that mix them are
// known, so their round trip overlaps gather_mixes' (the decode step's finish kernels ran ~4 µs,
// two dependent L2 round trips among it): the thread's quads of columns k = thread + j·threads,
// where the row takes 16-byte loads and every quad fits kPreloadQuads a thread; `ready` false
// otherwise (mix_streams then loads them after).
constexpr int kPreloadQuads = 1;
struct PreloadedStreams {
  float4 x[kPreloadQuads][kMaxHc];
  bool ready = false;
};
__device__ PreloadedStreams preload_streams(const float* v, int hc, int64_t dim) {
  PreloadedStreams s;
  const int64_t dim4 = dim / 4;
  s.ready = dim % 4 == 0 && reinterpret_cast<uintptr_t>(v) % 16 == 0 && dim4 <= int64_t(kPreloadQuads) * blockDim.x;
  if (!s.ready) return s;
  const float4* v4 = reinterpret_cast<const float4*>(v);
#pragma unroll
  for (int j = 0; j < kPreloadQuads; ++j) {
    const int64_t k = threadIdx.x + int64_t(j) * blockDim.x;
#pragma unroll
    for (int i = 0; i < kMaxHc; ++i) s.x[j][i] = i < hc && k < dim4 ? v4[i * dim4 + k] : make_float4(0, 0, 0, 0);
  }
  return s;
}
// mix_streams over the whole block, from the preloaded quads where there are.
__device__ void mix_preloaded_streams(const PreloadedStreams& s, const float* v, const float* pre, int hc, int64_t dim,
                                      float* staged) {
  if (!s.ready) {
    mix_streams(v, pre, hc, dim, threadIdx.x, blockDim.x, staged);
    return;
  }
  float4* staged4 = reinterpret_cast<float4*>(staged);
#pragma unroll
  for (int j = 0; j < kPreloadQuads; ++j) {
    const int64_t k = threadIdx.x + int64_t(j) * blockDim.x;
    if (k < dim / 4) staged4[k] = mixed_quad(s.x[j], pre, hc);
  }
}

// The 16 bytes of the norm weight that store_normalized's vector path gives this thread first
// (zeros where it takes none): a finish kernel reads them before the wait for the kernel ahead.
__device__ float4 first_norm_weights(const float* weight, int64_t dim) {
  const bool vector = dim % 4 == 0 && reinterpret_cast<uintptr_t>(weight) % 16 == 0;
  return vector && threadIdx.x < dim / 4 ? reinterpret_cast<const float4*>(weight)[threadIdx.x] : make_float4(0, 0, 0, 0);
}

// x = staged · rsqrt(mean(staged²) + eps) · weight, rms_norm's formula; staged is the whole row.
// first: first_norm_weights(weight, dim), loaded early by the caller.
__device__ void store_normalized(const float* staged, const float* weight, float4 first, int64_t dim, float eps,
                                 float* x) {
  __shared__ float warp_sums[kNormLanes / 32];
  __syncthreads();  // staged is complete
  if (threadIdx.x < kNormLanes) {
    float s = 0;
    for (int64_t k = threadIdx.x; k < dim; k += kNormLanes) s = fmaf(staged[k], staged[k], s);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x / 32] = s;
  }
  __syncthreads();
  float total = 0;
#pragma unroll
  for (int w = 0; w < kNormLanes / 32; ++w) total += warp_sums[w];
  const float r = 1.0f / sqrtf(total / float(dim) + eps);
  if (dim % 4 == 0 && (reinterpret_cast<uintptr_t>(weight) | reinterpret_cast<uintptr_t>(x)) % 16 == 0) {
    const float4 *staged4 = reinterpret_cast<const float4*>(staged), *weight4 = reinterpret_cast<const float4*>(weight);
    auto store = [&](int64_t k, float4 w) {
      const float4 v = staged4[k];
      reinterpret_cast<float4*>(x)[k] = make_float4(v.x * r * w.x, v.y * r * w.y, v.z * r * w.z, v.w * r * w.w);
    };
    if (int64_t(threadIdx.x) < dim / 4) store(threadIdx.x, first);
    for (int64_t k = threadIdx.x + int64_t(blockDim.x); k < dim / 4; k += blockDim.x) store(k, weight4[k]);
    return;
  }
  for (int64_t k = threadIdx.x; k < dim; k += blockDim.x) x[k] = staged[k] * r * weight[k];
}

// A block per row derives the row's pre and post weights, comb's logits (hc_sinkhorn_kernel
// normalizes them) and x, RMS-normalized with `norm`. Dynamic shared memory: the row's dim floats.
template <int HC>
__global__ void __launch_bounds__(kFewRowsThreads)
    hc_pre_finish_kernel(const float* h, const float* partial, int64_t slices, const float* base, const float* scale,
                         const float* norm, HcParams p, float* x, float* post, float* comb) {
  allow_next_kernel();
  // The weights this thread uses, read before the wait for the kernel ahead (whose output the
  // partial sums and the streams are): each was a dependent round trip after a barrier.
  const int t = threadIdx.x;
  const float pre_base = t < HC ? base[t] : 0.0f, post_base = t < HC ? base[HC + t] : 0.0f;
  const float comb_base = t < HC * HC ? base[2 * HC + t] : 0.0f;
  const float pre_scale = scale[0], post_scale = scale[1], comb_scale = scale[2];
  const float4 norm_first = first_norm_weights(norm, p.dim);
  wait_for_inputs();
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[HC];
  extern __shared__ __align__(16) float staged[];
  const int64_t r = blockIdx.x, flat = HC * p.dim;
  const PreloadedStreams streams = preload_streams(h + r * flat, HC, p.dim);
  gather_mixes(partial, r, slices, (2 + HC) * HC, flat, p.norm_eps, mixes);
  if (t < HC) {
    pre[t] = sigmoid(mixes[t] * pre_scale + pre_base) + p.hc_eps;
    post[r * HC + t] = 2 * sigmoid(mixes[HC + t] * post_scale + post_base);
  }
  if (t < HC * HC) comb[r * HC * HC + t] = mixes[2 * HC + t] * comb_scale + comb_base;
  __syncthreads();
  mix_preloaded_streams(streams, h + r * flat, pre, HC, p.dim, staged);
  store_normalized(staged, norm, norm_first, p.dim, p.norm_eps, x + r * p.dim);
}

// comb's logits of each row, in place, into its mixing matrix: the row softmax + eps, then
// Sinkhorn's alternating row and column normalizations (~2 µs of dependent shuffles and divisions
// a row: a kernel of its own, which a recorded decode step runs beside the sub-block that does not
// need comb). A warp per row holds the HC×HC matrix, one element per lane; row and column sums
// read the other lanes' elements in index order, so every value rounds as in a sequential loop
// (the CPU's).
constexpr int kSinkhornRowsPerBlock = 8;
template <int HC>
__global__ void __launch_bounds__(32 * kSinkhornRowsPerBlock)
    hc_sinkhorn_kernel(float* comb, int64_t n, int64_t iterations, float eps) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t r = int64_t(blockIdx.x) * kSinkhornRowsPerBlock + threadIdx.x / 32;
  if (r >= n) return;  // a whole warp: the shuffles below see every lane
  const int lane = threadIdx.x % 32, l = min(lane, HC * HC - 1), i = l / HC, j = l % HC;
  auto row_sum = [&](float v) {
    float s = 0;
#pragma unroll
    for (int jj = 0; jj < HC; ++jj) s += __shfl_sync(0xFFFFFFFFu, v, i * HC + jj);
    return s;
  };
  auto column_sum = [&](float v) {
    float s = 0;
#pragma unroll
    for (int ii = 0; ii < HC; ++ii) s += __shfl_sync(0xFFFFFFFFu, v, ii * HC + j);
    return s;
  };
  float c = comb[r * HC * HC + l], m = -INFINITY;
#pragma unroll
  for (int jj = 0; jj < HC; ++jj) m = fmaxf(m, __shfl_sync(0xFFFFFFFFu, c, i * HC + jj));
  c = expf(c - m);
  c = c / row_sum(c) + eps;
  for (int64_t it = 0; it < max(iterations, int64_t(1)); ++it) {
    if (it > 0) c /= row_sum(c) + eps;
    c /= column_sum(c) + eps;
  }
  if (lane < HC * HC) comb[r * HC * HC + l] = c;
}

// The head's mix of row r (pre weights only), RMS-normalized with `norm`, as hc_pre_finish_kernel.
__global__ void __launch_bounds__(kFewRowsThreads)
    hc_head_finish_kernel(const float* h, const float* partial, int64_t slices, const float* base, const float* scale,
                          const float* norm, HcParams p, float* x) {
  allow_next_kernel();
  const int hc = int(p.hc);
  // this thread's weights before the wait, as hc_pre_finish_kernel
  const float pre_base = int(threadIdx.x) < hc ? base[threadIdx.x] : 0.0f, pre_scale = scale[0];
  const float4 norm_first = first_norm_weights(norm, p.dim);
  wait_for_inputs();
  __shared__ float mixes[kMaxMix];
  __shared__ float pre[kMaxHc];
  extern __shared__ __align__(16) float staged[];
  const int64_t r = blockIdx.x, flat = p.hc * p.dim;
  const PreloadedStreams streams = preload_streams(h + r * flat, hc, p.dim);
  gather_mixes(partial, r, slices, hc, flat, p.norm_eps, mixes);
  if (int(threadIdx.x) < hc) pre[threadIdx.x] = sigmoid(mixes[threadIdx.x] * pre_scale + pre_base) + p.hc_eps;
  __syncthreads();
  mix_preloaded_streams(streams, h + r * flat, pre, hc, p.dim, staged);
  store_normalized(staged, norm, norm_first, p.dim, p.norm_eps, x + r * p.dim);
}

// One thread per (row, column): reads the column's hc stream values and y once and writes its hc
// outputs (a thread per output re-read every stream value hc times: 27% of copy bandwidth at
// 8192 rows). Each output adds the same terms in the same order as before.
template <int HC>
__global__ void hc_post_kernel(const float* h, SubBlockOutput y, const float* post, const float* comb, int64_t n,
                               int64_t dim, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= n * dim) return;
  const int64_t d = k % dim, r = k / dim;
  float v[HC];
#pragma unroll
  for (int i = 0; i < HC; ++i) v[i] = h[(r * HC + i) * dim + d];
  const float yv = output_at(y, r * dim + d);
#pragma unroll
  for (int j = 0; j < HC; ++j) {
    float s = post[r * HC + j] * yv;
#pragma unroll
    for (int i = 0; i < HC; ++i) s += comb[(r * HC + i) * HC + j] * v[i];
    out[(r * HC + j) * dim + d] = s;
  }
}

// hc_post_kernel four columns a thread (16-byte loads and stores; the row's post and comb read
// once for the four), for many rows: the same terms in the same order, so the same bits.
template <int HC>
__global__ void hc_post4_kernel(const float* h, SubBlockOutput y, const float* post, const float* comb, int64_t n,
                                int64_t dim, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x, quads = dim / 4;
  if (k >= n * quads) return;
  const int64_t d = 4 * (k % quads), r = k / quads;
  float4 v[HC];
#pragma unroll
  for (int i = 0; i < HC; ++i) v[i] = *reinterpret_cast<const float4*>(h + (r * HC + i) * dim + d);
  const float4 yv = output4_at(y, r * dim + d);
#pragma unroll
  for (int j = 0; j < HC; ++j) {
    const float pj = post[r * HC + j];
    float4 s = make_float4(pj * yv.x, pj * yv.y, pj * yv.z, pj * yv.w);
#pragma unroll
    for (int i = 0; i < HC; ++i) {
      const float c = comb[(r * HC + i) * HC + j];
      s.x += c * v[i].x;
      s.y += c * v[i].y;
      s.z += c * v[i].z;
      s.w += c * v[i].w;
    }
    *reinterpret_cast<float4*>(out + (r * HC + j) * dim + d) = s;
  }
}

void check_hc(const HcParams& p) {
  if (p.hc < 1 || p.hc > kMaxHc) runtime_error("cuda mHC: hc_mult ", p.hc, " is not supported (at most ", kMaxHc, ")");
  if (slice_count(p) > kMaxSlices)
    runtime_error("cuda mHC: hc_mult·dim ", p.hc * p.dim, " is above ", kMaxSlices * kSliceLength);
  if (p.dim > kMaxStagedDim) runtime_error("cuda mHC: dim ", p.dim, " is above ", kMaxStagedDim);
}

// The mix pass over n rows: Rows per block once there are enough rows to share the fn loads, the
// tiled kernel (same sums, bit for bit) from kTileFrom rows when the rows are float4-aligned. On
// the H200 the tiled kernel took 1.41 ms at 8192 rows (4.48 before) but 36.6 µs at 32 (26.0).
constexpr int64_t kTileFrom = 64;
template <class Streams>
void launch_small_mix(const Streams& streams, const float* fn, int64_t n, int mix, int64_t flat, unsigned slices,
                      float* partial, cudaStream_t stream) {
  if (n < 4)
    launch_early(hc_mix_kernel<1, Streams>, dim3(unsigned(n), slices), dim3(kThreads), 0, stream, streams, fn, n, mix,
                 flat, partial);
  else
    launch_early(hc_mix_kernel<4, Streams>, dim3(unsigned((n + 3) / 4), slices), dim3(kThreads), 0, stream, streams, fn,
                 n, mix, flat, partial);
}
void launch_mix(const float* h, const float* fn, int64_t n, int mix, const HcParams& p, float* partial,
                cudaStream_t stream) {
  const int64_t flat = p.hc * p.dim;
  const unsigned slices = unsigned(slice_count(p));
  const bool aligned = flat % 4 == 0 && (reinterpret_cast<uintptr_t>(h) | reinterpret_cast<uintptr_t>(fn)) % 16 == 0;
  if (n >= kTileFrom && aligned)
    launch_early(hc_mix_tile_kernel, dim3(unsigned((n + kTileRows - 1) / kTileRows), slices), dim3(kTileWarps * 32),
                 sizeof(float) * size_t(kTileRows * kTilePitch + mix * kSliceLength), stream, h, fn, n, mix, flat,
                 partial);
  else
    launch_small_mix(StoredStreams{h, flat}, fn, n, mix, flat, slices, partial, stream);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

unsigned finish_threads(int64_t n) { return n < kFewRowsFrom ? kFewRowsThreads : kFinishThreads; }
size_t staged_bytes(const HcParams& p) { return size_t(p.dim) * sizeof(float); }

// fn(std::integral_constant<int, hc>) for hc_mult 1 .. kMaxHc
template <class Fn>
void with_hc(int64_t hc, Fn&& fn) {
  switch (hc) {
    case 1: fn(std::integral_constant<int, 1>{}); break;
    case 2: fn(std::integral_constant<int, 2>{}); break;
    case 3: fn(std::integral_constant<int, 3>{}); break;
    default: fn(std::integral_constant<int, 4>{}); break;
  }
}

// The finishing kernel of hc_pre over the mix pass's partial sums in scratch.
void launch_pre_finish(const float* h, const float* scratch, const float* base, const float* scale, const float* norm,
                       int64_t n, const HcParams& p, float* x, float* post, float* comb, cudaStream_t stream) {
  with_hc(p.hc, [&](auto hc) {
    launch_early(hc_pre_finish_kernel<decltype(hc)::value>, dim3(unsigned(n)), dim3(finish_threads(n)),
                 staged_bytes(p), stream, h, scratch, slice_count(p), base, scale, norm, p, x, post, comb);
  });
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

int64_t hc_scratch_floats(int64_t n, const HcParams& p) { return n * slice_count(p) * kSums; }

void hc_pre(const float* h, const float* fn, const float* base, const float* scale, const float* norm, int64_t n,
            const HcParams& p, float* scratch, float* x, float* post, float* comb, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  launch_mix(h, fn, n, int((2 + p.hc) * p.hc), p, scratch, stream);
  launch_pre_finish(h, scratch, base, scale, norm, n, p, x, post, comb, stream);
}

void hc_post_pre(const float* h, SubBlockOutput y, const float* post, const float* comb, const float* fn,
                 const float* base, const float* scale, const float* norm, int64_t n, const HcParams& p,
                 float* scratch, float* out, float* x, float* next_post, float* next_comb, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  if (n >= kTileFrom) {  // the tiled mix pass reads rows it did not compute
    hc_post(h, y, post, comb, n, p.hc, p.dim, out, stream);
    hc_pre(out, fn, base, scale, norm, n, p, scratch, x, next_post, next_comb, stream);
    return;
  }
  with_hc(p.hc, [&](auto hc) {
    auto mix = [&](auto streams) {
      launch_small_mix(streams, fn, n, int((2 + p.hc) * p.hc), p.hc * p.dim, unsigned(slice_count(p)), scratch, stream);
    };
    if (y.plus) mix(UpdatedStreams<decltype(hc)::value, true>{h, y, post, comb, p.dim, out});
    else mix(UpdatedStreams<decltype(hc)::value, false>{h, y, post, comb, p.dim, out});
  });
  TETRA_CUDA_CHECK(cudaGetLastError());
  launch_pre_finish(out, scratch, base, scale, norm, n, p, x, next_post, next_comb, stream);
}

void hc_sinkhorn(float* comb, int64_t n, const HcParams& p, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  with_hc(p.hc, [&](auto hc) {
    launch_early(hc_sinkhorn_kernel<decltype(hc)::value>,
                 dim3(unsigned((n + kSinkhornRowsPerBlock - 1) / kSinkhornRowsPerBlock)), dim3(32 * kSinkhornRowsPerBlock),
                 0, stream, comb, n, p.sinkhorn_iters, p.hc_eps);
  });
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void hc_post(const float* h, SubBlockOutput y, const float* post, const float* comb, int64_t n, int64_t hc, int64_t dim,
             float* out, cudaStream_t stream) {
  if (hc < 1 || hc > kMaxHc) runtime_error("cuda mHC: hc_mult ", hc, " is not supported (at most ", kMaxHc, ")");
  const int64_t total = n * dim;
  if (total == 0) return;
  // Decode steps keep a thread per column (more threads for few rows); prefills take four.
  const bool quads =
      n >= kTileFrom && dim % 4 == 0 &&
      (reinterpret_cast<uintptr_t>(h) | reinterpret_cast<uintptr_t>(y.y) | reinterpret_cast<uintptr_t>(y.plus) |
       reinterpret_cast<uintptr_t>(out)) % 16 == 0;
  const unsigned blocks = unsigned((total / (quads ? 4 : 1) + 255) / 256);
  auto post_kernel = [&](auto one, auto four) {
    launch_early(quads ? four : one, dim3(blocks), dim3(256), 0, stream, h, y, post, comb, n, dim, out);
  };
  switch (hc) {
    case 1: post_kernel(hc_post_kernel<1>, hc_post4_kernel<1>); break;
    case 2: post_kernel(hc_post_kernel<2>, hc_post4_kernel<2>); break;
    case 3: post_kernel(hc_post_kernel<3>, hc_post4_kernel<3>); break;
    default: post_kernel(hc_post_kernel<4>, hc_post4_kernel<4>); break;
  }
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void hc_head(const float* h, const float* fn, const float* base, const float* scale, const float* norm, int64_t n,
             const HcParams& p, float* scratch, float* x, cudaStream_t stream) {
  check_hc(p);
  if (n == 0) return;
  launch_mix(h, fn, n, int(p.hc), p, scratch, stream);
  launch_early(hc_head_finish_kernel, dim3(unsigned(n)), dim3(finish_threads(n)), staged_bytes(p), stream, h, scratch,
               slice_count(p), base, scale, norm, p, x);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tetra::cuda
