#include "backend/cuda/linear.h"

#include <cooperative_groups.h>

#include <type_traits>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma_rows.cuh"
#include "backend/cuda/row_dot.cuh"
#include "backend/cuda/staged_columns.cuh"
#include "backend/cuda/swiglu.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;

// ---- generic path (f32/f16 weights, ragged inputs): one warp per output row
// grid: (rows of a group / kWarpsPerBlock, tokens / Tokens, groups); every warp of a block in
// the same group (they share the staged input).
template <int Tokens>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    linear_kernel(WeightRef w, const float* x, int64_t n, int64_t out_per_group, int64_t x_stride, bool round_input,
                  float* y) {
  __shared__ __align__(16) float tile[Tokens * kTilePitch];
  const int64_t group = blockIdx.z;
  const int64_t r = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;  // row within the group
  const int64_t o = group * out_per_group + r;
  const int64_t t0 = int64_t(blockIdx.y) * Tokens;
  const int tokens = int(min(int64_t(Tokens), n - t0));
  allow_next_kernel();
  float acc[Tokens] = {};
  block_row_dot<Tokens>(w, o, r < out_per_group, x + t0 * x_stride + group * w.in, x_stride, tokens, round_input, tile,
                        acc);
  if (r >= out_per_group) return;
#pragma unroll
  for (int t = 0; t < Tokens; ++t) {
    const float s = warp_sum(acc[t]);
    if (t < tokens && (threadIdx.x & 31) == 0) y[(t0 + t) * w.out + o] = s;
  }
}

void generic_linear(const WeightRef& w, const float* x, int64_t n, int64_t groups, bool round_input, float* y,
                    cudaStream_t stream) {
  const int64_t per_group = w.out / groups;
  const unsigned row_blocks = unsigned((per_group + kWarpsPerBlock - 1) / kWarpsPerBlock);
  if (n == 1)  // decode of one sequence: a one-accumulator instance, fewer registers
    linear_kernel<1><<<dim3(row_blocks, 1, unsigned(groups)), kWarpsPerBlock * 32, 0, stream>>>(
        w, x, n, per_group, groups * w.in, round_input, y);
  else
    linear_kernel<kRowTokens><<<dim3(row_blocks, unsigned((n + kRowTokens - 1) / kRowTokens), unsigned(groups)),
                                kWarpsPerBlock * 32, 0, stream>>>(w, x, n, per_group, groups * w.in, round_input, y);
}

// ---- tensor-core path: a block of `warps` warps splits the chunks of 32 rows (2 m-tiles) for
// tokens_per_tile<P>(NT) tokens; grid (row tiles × splits × token passes of a group, 1, groups).
// Each warp keeps only two chunks in flight, so short matrices need many warps per row tile (up to
// 8). Measured on the H200 at M = 1: ~2048 warps in the grid beat 4096 (wq_b). The split depends
// on the matrix only, never on the tokens: a row's sum then runs in the same order whatever the
// batch, so a sequence's output does not depend on what shares its steps (and graph buckets,
// padded, replay what eager steps compute).
constexpr int max_split(int) { return 8; }
constexpr int64_t kTargetWarps = 2048;
// A matrix of few row tiles (the router, weights_proj, compressors) also splits each tile's
// chunks over several blocks until about this many blocks run, at most kMaxClusterBlocks per
// tile: a tile's blocks form a thread block cluster, and the first adds the others' sums from
// their shared memory in block order (before, a second kernel added partial outputs).
constexpr int64_t kMinBlocks = 128;
constexpr int kMaxClusterBlocks = 8;  // the portable cluster size

struct MmaSplit {
  int warps = 1;   // per block, sharing a row tile's chunks
  int blocks = 1;  // per row tile
};

// Depends on the matrix only (never on the tokens): a row's sums keep their order whatever the batch.
MmaSplit mma_split(const WeightRef& w, int64_t groups, int split_k) {
  const int chunks = mma_chunks(w.format, w.in);
  const int64_t tiles = (w.out / groups + 31) / 32 * groups;
  MmaSplit s;
  if (split_k > 0) {
    s.warps = split_k;
    return s;
  }
  while (s.warps < 8 && 2 * s.warps <= chunks && tiles * s.warps < kTargetWarps) s.warps *= 2;
  // A matrix of kTargetWarps tiles or more (the head: 4040) still takes 4 warps a tile; 4040
  // one-warp blocks ran slower (the f32 head at M = 1 in the graph-timed linear bench: 283 µs at
  // 1 warp a tile, 285 at 2, 265 at 4, 261 at 8).
  if (tiles >= kTargetWarps)
    while (s.warps < 4 && 2 * s.warps <= chunks) s.warps *= 2;
  // Also when a tile's warps are capped at 8 and the grid is short of kTargetWarps, as long as each
  // warp keeps four chunks (wo_b, 128 tiles of 128 FP8 chunks: 1024 warps, 19.1 µs; 2048, 14.7 µs).
  while (s.blocks < kMaxClusterBlocks &&
         ((tiles * s.blocks * 2 <= kMinBlocks && chunks >= 4 * s.blocks * s.warps) ||
          (tiles * s.warps * s.blocks * 2 <= kTargetWarps && chunks >= 8 * s.blocks * s.warps)))
    s.blocks *= 2;
  return s;
}

template <bool Gated>
constexpr int kRowTileRows = Gated ? 16 : 32;  // output rows of a row tile (of each matrix when gated)

// Dynamic shared memory of a block of mma_block<F, NT, P, Gated>: split_k_sum's (warps - 1) sets of
// sums, then (staged columns) a slab a warp.
__host__ __device__ constexpr int64_t reduction_floats(int warps, int nt) {
  return int64_t(warps - 1) * kMmaTiles * nt * 4 * 32;
}
template <WeightFormat F, int NT, int P, bool Gated>
size_t mma_shared_bytes(int warps) {
  const size_t reduction = size_t(reduction_floats(warps, NT)) * sizeof(float);
  if constexpr (kStagedColumns<F, NT, P, Gated>) return reduction + size_t(warps) * slab_bytes<NT, kMmaTiles>();
  else return reduction;
}

// Warp 0's sums of a row tile (rows o0 .., of at most `end`; tokens t0 .. t0 + tokens) into y,
// rows `out` apart: a token's part columns added in order; gated, swiglu of the two matrices'.
template <int NT, int P, bool Gated>
__device__ __forceinline__ void store_tile(const float (&acc)[kMmaTiles][NT][4], int64_t out, float limit, int64_t o0,
                                           int64_t end, int64_t t0, int tokens, float* y) {
  constexpr int kTileRows = kRowTileRows<Gated>;
  const int lane = threadIdx.x & 31, g = lane / 4, t = lane % 4;
  if constexpr (P == kPartColumns) {
    __shared__ float columns[32][8 * NT + 1];
    __syncwarp();  // the warp's reads of an earlier tile are done
#pragma unroll
    for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) columns[16 * r + g + 8 * (i / 2)][8 * j + 2 * t + i % 2] = acc[r][j][i];
    __syncwarp();
    auto sum = [&](int row, int token) {
      return columns[row][3 * token] + columns[row][3 * token + 1] + columns[row][3 * token + 2];
    };
    for (int e = lane; e < kTileRows * tokens; e += 32) {
      const int row = e % kTileRows, token = e / kTileRows;
      const int64_t o = o0 + row;
      if (o >= end) continue;
      if constexpr (Gated) y[(t0 + token) * out + o] = clamped_swiglu(sum(row, token), sum(16 + row, token), limit);
      else y[(t0 + token) * out + o] = sum(row, token);
    }
  } else {
#pragma unroll
    for (int r = 0; r < (Gated ? 1 : kMmaTiles); ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const int64_t o = o0 + 16 * r + g + 8 * (i / 2);
          const int token = 8 * j + 2 * t + i % 2;
          if (o >= end || token >= tokens) continue;
          if constexpr (Gated) y[(t0 + token) * out + o] = clamped_swiglu(acc[0][j][i], acc[1][j][i], limit);
          else y[(t0 + token) * out + o] = acc[r][j][i];
        }
  }
}

// Gated: y = swiglu(x·waᵀ, x·wbᵀ) clamped at limit (the shared expert's w1 and w3): a row tile is
// 16 rows of each matrix, m-tile 0 of wa and m-tile 1 of wb, with the chunk split of wa alone, so
// every dot product adds in the order the ungated kernel uses and the result equals linear, linear
// and swiglu bit for bit.
// block: the block's index among w's (the split fastest: a cluster's blocks are consecutive, then
// the token pass, then the row tile; see launch_mma); group: the o_groups group.
template <WeightFormat F, int NT, int P, bool Gated>
__device__ __forceinline__ void mma_block(const WeightRef& w, const WeightRef& wb, float limit, const float* x,
                                          int64_t n, int64_t per_group, int64_t x_stride, int chunks, int splits,
                                          float* y, int64_t block, int64_t group) {
  extern __shared__ __align__(16) float red[];
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const int64_t first = group * per_group, end = first + per_group;
  constexpr int kTokens = tokens_per_tile<P>(NT);
  const int split = int(block % splits);
  const int64_t passes = (n + kTokens - 1) / kTokens, rest = block / splits, pass = rest % passes;
  constexpr int kTileRows = kRowTileRows<Gated>;
  const int64_t o0 = first + rest / passes * kTileRows;
  const int64_t t0 = pass * kTokens;
  const int tokens = int(min(int64_t(kTokens), n - t0));
  const int s_begin = chunks * split / splits, span = chunks * (split + 1) / splits - s_begin;
  const int c_begin = s_begin + span * warp / warps, c_end = s_begin + span * (warp + 1) / warps;
  allow_next_kernel();
  const float* xt = x + t0 * x_stride + group * w.in;
  float acc[kMmaTiles][NT][4];
  // the weights are immutable: their first loads go out before the wait for the kernel ahead
  if constexpr (kStagedColumns<F, NT, P, Gated>) {
    uint2* slabs = reinterpret_cast<uint2*>(red + reduction_floats(warps, NT));
    warp_staged_rows<NT, kMmaTiles>(w, o0, end, xt, x_stride, tokens, c_begin, c_end,
                                    slabs + warp * kSlabEntries<NT, kMmaTiles>, acc);
  } else {
    const float* columns[NT];
    strided_columns<NT, P>(xt, x_stride, tokens, columns);
    warp_mma_rows<F, NT, P, Gated, true>(w, Gated ? wb : w, o0, end, columns, c_begin, c_end, acc);
  }
  split_k_sum<NT>(acc, red);
  if (splits > 1) {  // the cluster of this row tile's blocks: block 0 adds the others' sums in order
    __shared__ float cluster_sums[kMmaTiles * NT * 4 * 32];
    namespace cg = cooperative_groups;
    const cg::cluster_group cluster = cg::this_cluster();
    if (warp == 0 && split > 0)
#pragma unroll
      for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int i = 0; i < 4; ++i) cluster_sums[((r * NT + j) * 4 + i) * 32 + lane] = acc[r][j][i];
    cluster.sync();
    if (warp == 0 && split == 0)
      for (int s = 1; s < splits; ++s) {
        const float* other = cluster.map_shared_rank(cluster_sums, s);
#pragma unroll
        for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
          for (int j = 0; j < NT; ++j)
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[r][j][i] += other[((r * NT + j) * 4 + i) * 32 + lane];
      }
    cluster.sync();  // every block keeps its shared memory until block 0 has read it
    if (split > 0) return;
  }
  if (warp == 0) store_tile<NT, P, Gated>(acc, w.out, limit, o0, end, t0, tokens, y);
}

// At one token tile (decode) ~2048 warps are 16 an SM of the H200: at most 128 registers a thread
// (two blocks of 256 threads an SM) keeps the grid in one wave, and the bound holds ptxas to it
// (spilling if it must: -Xptxas -v shows; none today).
template <WeightFormat F, int NT, int P, bool Gated>
__global__ void __launch_bounds__(max_split(NT) * 32, NT == 1 ? 2 : 1)
    linear_mma_kernel(WeightRef w, WeightRef wb, float limit, const float* x, int64_t n, int64_t per_group,
                      int64_t x_stride, int chunks, int splits, float* y) {
  mma_block<F, NT, P, Gated>(w, wb, limit, x, n, per_group, x_stride, chunks, splits, y, blockIdx.x, blockIdx.z);
}

// Matrices of one layout and input width that read the same x, in one grid: their row tiles one
// after another, matrix i's from first_tile[i] on.
constexpr int kMaxSet = kMaxLinearsPerLaunch;
struct LinearSet {
  WeightRef w[kMaxSet];
  float* y[kMaxSet];
  int64_t first_tile[kMaxSet + 1];
  int count;
};

template <WeightFormat F, int NT, int P>
__global__ void __launch_bounds__(max_split(NT) * 32, NT == 1 ? 2 : 1)
    linear_set_kernel(LinearSet set, const float* x, int64_t n, int chunks, int splits) {
  constexpr int kTokens = tokens_per_tile<P>(NT);
  const int64_t blocks_per_tile = int64_t(splits) * ((n + kTokens - 1) / kTokens);
  const int64_t tile = blockIdx.x / blocks_per_tile;
  int i = 0;
  while (i + 1 < set.count && tile >= set.first_tile[i + 1]) ++i;
  const WeightRef& w = set.w[i];
  mma_block<F, NT, P, false>(w, w, 0, x, n, w.out, w.in, chunks, splits, set.y[i],
                             blockIdx.x - set.first_tile[i] * blocks_per_tile, 0);
}

// The staged part columns (staged_columns.cuh) where a row tile's blocks need no cluster (the
// head): each warp holds the m-tiles of kStagedTiles row tiles, so each split of an activation
// and each read of x serve that many times the rows. Its warps split the chunks as mma_block's
// (the matrix's split), so every row gets the same bits.
constexpr int kStagedTiles = 2;
template <int NT>
__global__ void __launch_bounds__(max_split(NT) * 32, 1)
    linear_staged_kernel(WeightRef w, const float* x, int64_t n, int64_t per_group, int64_t x_stride, int chunks,
                         float* y) {
  extern __shared__ __align__(16) float red[];
  constexpr int M = kStagedTiles * kMmaTiles, kTokens = tokens_per_tile<kPartColumns>(NT);
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32;
  const int64_t group = blockIdx.z, end = (group + 1) * per_group;
  const int64_t passes = (n + kTokens - 1) / kTokens, pass = blockIdx.x % passes;
  const int64_t o0 = group * per_group + blockIdx.x / passes * (kStagedTiles * 32), t0 = pass * kTokens;
  const int tokens = int(min(int64_t(kTokens), n - t0));
  allow_next_kernel();
  float acc[M][NT][4];
  uint2* slabs = reinterpret_cast<uint2*>(red + reduction_floats(warps, NT));
  warp_staged_rows<NT, M>(w, o0, end, x + t0 * x_stride + group * w.in, x_stride, tokens, chunks * warp / warps,
                          chunks * (warp + 1) / warps, slabs + warp * kSlabEntries<NT, M>, acc);
#pragma unroll
  for (int tile = 0; tile < kStagedTiles; ++tile) {
    float sums[kMmaTiles][NT][4];
#pragma unroll
    for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
      for (int j = 0; j < NT; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) sums[r][j][i] = acc[kMmaTiles * tile + r][j][i];
    if (tile > 0) __syncthreads();  // warp 0 has read the previous tile's sums
    split_k_sum<NT>(sums, red);
    if (warp == 0) store_tile<NT, kPartColumns, false>(sums, w.out, 0, o0 + 32 * tile, end, t0, tokens, y);
  }
}

// The grid of linear_mma_kernel<F, NT, P, Gated> for n tokens: x blocks (row tiles × splits ×
// token passes), groups, warps a block, blocks per cluster, dynamic shared memory.
struct MmaGrid {
  unsigned x = 0, groups = 0;
  int warps = 0, cluster = 1;
  size_t shared = 0;
};
template <WeightFormat F, int NT, int P, bool Gated>
MmaGrid mma_grid(const WeightRef& w, int64_t n, int64_t groups, int split_k) {
  const int64_t per_group = w.out / groups;
  const int64_t row_tiles = (per_group + kRowTileRows<Gated> - 1) / kRowTileRows<Gated>;
  const int64_t passes = (n + tokens_per_tile<P>(NT) - 1) / tokens_per_tile<P>(NT);
  const MmaSplit split = mma_split(w, groups, split_k);  // w's alone, gated or not
  if (split.warps > max_split(NT)) runtime_error("cuda linear: split ", split.warps, " too large");
  // The passes over the tokens of one row tile run side by side (adjacent block indices), so that
  // all but the first find the tile's weights in L2: the f32 head at 64 rows read its 1 GB once
  // per pass (4 passes of 21 tokens) when the pass was the slowest grid index.
  return {unsigned(row_tiles * split.blocks * passes), unsigned(groups), split.warps, split.blocks,
          mma_shared_bytes<F, NT, P, Gated>(split.warps)};
}

// linear_staged_kernel<NT>'s grid where linear_mma_kernel's would be `mma` (no cluster): the
// same warps, kStagedTiles row tiles a block.
template <int NT>
MmaGrid staged_grid(const MmaGrid& mma, const WeightRef& w, int64_t n, int64_t groups) {
  constexpr int M = kStagedTiles * kMmaTiles, kTokens = tokens_per_tile<kPartColumns>(NT);
  const int64_t row_tiles = (w.out / groups + 31) / 32, passes = (n + kTokens - 1) / kTokens;
  const size_t shared = size_t(reduction_floats(mma.warps, NT)) * sizeof(float) + size_t(mma.warps) * slab_bytes<NT, M>();
  return {unsigned((row_tiles + kStagedTiles - 1) / kStagedTiles * passes), mma.groups, mma.warps, 1, shared};
}

// wb: the second matrix of a gated call (Gated), else unused.
template <WeightFormat F, int NT, int P, bool Gated = false>
void launch_mma(const WeightRef& w, const WeightRef& wb, float limit, const float* x, int64_t n, int64_t groups,
                int split_k, float* y, cudaStream_t stream) {
  const MmaGrid grid = mma_grid<F, NT, P, Gated>(w, n, groups, split_k);
  if constexpr (kStagedColumns<F, NT, P, Gated>)
    if (grid.cluster == 1) {
      const MmaGrid staged = staged_grid<NT>(grid, w, n, groups);
      launch_early(linear_staged_kernel<NT>, dim3(staged.x, 1, staged.groups), dim3(staged.warps * 32), staged.shared,
                   stream, w, x, n, w.out / groups, groups * w.in, mma_chunks(F, w.in), y);
      return;
    }
  launch_early_clustered(linear_mma_kernel<F, NT, P, Gated>, dim3(grid.x, 1, grid.groups), dim3(grid.warps * 32),
                         unsigned(grid.cluster), grid.shared, stream, w, wb, limit, x, n, w.out / groups,
                         groups * w.in, mma_chunks(F, w.in), grid.cluster, y);
}

// fn(std::integral_constant NT, std::integral_constant P): the token tile of the kernel instance
// for n rows (f32 activations: three bf16 parts each, in columns of their own).
template <class Fn>
void with_token_tile(int64_t n, bool round_input, Fn&& fn) {
  using std::integral_constant;
  using Parts = integral_constant<int, kPartColumns>;
  using Rounded = integral_constant<int, kRounded>;
  if (!round_input) {
    if (n <= tokens_per_tile<kPartColumns>(1)) fn(integral_constant<int, 1>{}, Parts{});
    else if (n <= tokens_per_tile<kPartColumns>(3)) fn(integral_constant<int, 3>{}, Parts{});
    else fn(integral_constant<int, 8>{}, Parts{});
  } else if (n <= 8) fn(integral_constant<int, 1>{}, Rounded{});
  else if (n <= 16) fn(integral_constant<int, 2>{}, Rounded{});
  else if (n <= 32) fn(integral_constant<int, 4>{}, Rounded{});
  else fn(integral_constant<int, 8>{}, Rounded{});
}

template <WeightFormat F, bool Gated = false>
void dispatch_tokens(const WeightRef& w, const WeightRef& wb, float limit, const float* x, int64_t n, int64_t groups,
                     bool round_input, int split_k, float* y, cudaStream_t stream) {
  with_token_tile(n, round_input, [&](auto nt, auto p) {
    launch_mma<F, decltype(nt)::value, decltype(p)::value, Gated>(w, wb, limit, x, n, groups, split_k, y, stream);
  });
}

// fn(std::integral_constant<WeightFormat, f>): the kernels' format as a compile-time constant.
template <class Fn>
void with_format(WeightFormat f, Fn&& fn) {
  switch (f) {
    case WeightFormat::dense: fn(std::integral_constant<WeightFormat, WeightFormat::dense>{}); break;
    case WeightFormat::fp8_block: fn(std::integral_constant<WeightFormat, WeightFormat::fp8_block>{}); break;
    case WeightFormat::fp8_tensor: fn(std::integral_constant<WeightFormat, WeightFormat::fp8_tensor>{}); break;
    case WeightFormat::mxfp4: fn(std::integral_constant<WeightFormat, WeightFormat::mxfp4>{}); break;
    case WeightFormat::nvfp4: fn(std::integral_constant<WeightFormat, WeightFormat::nvfp4>{}); break;
  }
}

}  // namespace

void linear(const WeightRef& w, const float* x, int64_t n, int64_t groups, bool round_input_to_bf16, float* y,
            cudaStream_t stream, int split_k) {
  if (n == 0 || w.out == 0) return;
  if (!mma_rows_supported(w, x, groups))
    generic_linear(w, x, n, groups, round_input_to_bf16, y, stream);
  else
    with_format(w.format, [&](auto f) {
      dispatch_tokens<decltype(f)::value>(w, w, 0, x, n, groups, round_input_to_bf16, split_k, y, stream);
    });
  TETRA_CUDA_CHECK(cudaGetLastError());
}

LinearGrid linear_grid(const WeightRef& w, int64_t n, int64_t groups, bool round_input_to_bf16) {
  LinearGrid g;
  if (n == 0 || !mma_rows_supported(w, nullptr, groups)) return g;
  with_format(w.format, [&](auto f) {
    with_token_tile(n, round_input_to_bf16, [&](auto nt, auto p) {
      constexpr int NT = decltype(nt)::value, P = decltype(p)::value;
      constexpr WeightFormat F = decltype(f)::value;
      const MmaGrid grid = mma_grid<F, NT, P, false>(w, n, groups, 0);
      auto report = [&](auto kernel, const MmaGrid& run) {
        g.blocks = int64_t(run.x) * run.groups;
        g.warps = run.warps;
        allow_shared_bytes(kernel, run.shared);
        TETRA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g.blocks_per_sm, kernel, run.warps * 32, run.shared));
      };
      if constexpr (kStagedColumns<F, NT, P, false>)
        if (grid.cluster == 1) return report(linear_staged_kernel<NT>, staged_grid<NT>(grid, w, n, groups));
      report(linear_mma_kernel<F, NT, P, false>, grid);
    });
  });
  return g;
}

bool linears(const WeightRef* w, float* const* y, int count, const float* x, int64_t n, bool round_input_to_bf16,
             cudaStream_t stream) {
  if (count < 1 || count > kMaxSet) return false;
  LinearSet set{};
  set.count = count;
  int64_t tiles = 0;
  for (int i = 0; i < count; ++i) {
    const WeightRef& a = w[i];
    if (!mma_rows_supported(a, x, 1) || !same_encoding(a, w[0]) || a.in != w[0].in) return false;
    set.w[i] = a;
    set.y[i] = y[i];
    set.first_tile[i] = tiles;
    tiles += (a.out + kRowTileRows<false> - 1) / kRowTileRows<false>;
  }
  set.first_tile[count] = tiles;
  if (n == 0 || tiles == 0) return true;
  // The grid and split of one matrix of all the row tiles: depends on the matrices only.
  WeightRef all = w[0];
  all.out = tiles * kRowTileRows<false>;
  with_format(all.format, [&](auto f) {
    with_token_tile(n, round_input_to_bf16, [&](auto nt, auto p) {
      constexpr int NT = decltype(nt)::value, P = decltype(p)::value;
      const MmaGrid grid = mma_grid<decltype(f)::value, NT, P, false>(all, n, 1, 0);
      const auto kernel = linear_set_kernel<decltype(f)::value, NT, P>;
      launch_early_clustered(kernel, dim3(grid.x), dim3(grid.warps * 32), unsigned(grid.cluster), grid.shared, stream,
                             set, x, n, mma_chunks(all.format, all.in), grid.cluster);
    });
  });
  TETRA_CUDA_CHECK(cudaGetLastError());
  return true;
}

bool gated_linear(const WeightRef& w1, const WeightRef& w3, const float* x, int64_t n, bool round_input_to_bf16,
                  float limit, float* y, cudaStream_t stream) {
  if (!mma_rows_supported(w1, x, 1) || !mma_rows_supported(w3, x, 1) || !same_encoding(w1, w3) || w1.out != w3.out ||
      w1.in != w3.in)
    return false;
  if (n == 0 || w1.out == 0) return true;
  const float lim = limit > 0 ? limit : INFINITY;
  with_format(w1.format, [&](auto f) {
    dispatch_tokens<decltype(f)::value, true>(w1, w3, lim, x, n, 1, round_input_to_bf16, 0, y, stream);
  });
  TETRA_CUDA_CHECK(cudaGetLastError());
  return true;
}

}  // namespace tetra::cuda
