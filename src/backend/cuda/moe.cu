#include "backend/cuda/moe.h"

#include <cub/block/block_scan.cuh>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/mma_rows.cuh"
#include "backend/cuda/row_dot.cuh"
#include "backend/cuda/launch.cuh"
#include "backend/cuda/swiglu.cuh"

namespace tetra::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kMaxRoutePerLane = 32;  // experts a lane holds (the picks' bit mask is 32 bits)

__device__ float score_of(float v, ScoringFunc f) {
  switch (f) {
    case ScoringFunc::sigmoid: return 1.0f / (1.0f + expf(-v));
    case ScoringFunc::sqrtsoftplus: return sqrtf(v > 20 ? v : log1pf(expf(v)));
    case ScoringFunc::softmax: break;
  }
  return v;  // softmax: normalized by the caller
}

// A key whose unsigned order is the order of the scores: higher score, higher key (-0 as +0);
// NaN lowest of all (0), so a NaN score is picked only when nothing else is left.
__device__ __forceinline__ uint32_t score_key(float v) {
  if (isnan(v)) return 0;
  const uint32_t u = __float_as_uint(v + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// One warp per token, expert e in lane e % 32 as register e / 32 of PerLane (experts <= 32·PerLane);
// dynamic shared memory: the experts' scores, then the k picks. Each pick is the best remaining
// biased score, ties to the lower index: every lane offers its own best, then two warp reductions
// (the highest key, the lowest expert of that key) instead of a butterfly of shuffles, and the
// scores stay in registers (a shared-memory scan a pick took 8.3 µs a launch at 1 row in the
// small-ops bench on the H200, this 5.7; 27.1 and 16.9 µs at 8192 rows).
template <int PerLane>
__global__ void route_kernel(const float* logits, const float* bias, const int32_t* tid2eid, const int32_t* ids,
                             RouteParams p, float* weights, int32_t* selected) {
  extern __shared__ float shared[];
  float* s = shared;
  int32_t* picked = reinterpret_cast<int32_t*>(shared + p.experts);
  const int lane = threadIdx.x;
  const int64_t r = blockIdx.x, E = p.experts, k = p.k;
  float expert_bias[PerLane];  // the model's: read while the kernel ahead finishes
#pragma unroll
  for (int i = 0; i < PerLane; ++i) expert_bias[i] = bias && lane + 32 * i < E ? bias[lane + 32 * i] : 0.0f;
  wait_for_inputs();
  allow_next_kernel();
  float score[PerLane];
#pragma unroll
  for (int i = 0; i < PerLane; ++i) {  // every load and score computed side by side
    const int64_t e = lane + 32 * i;
    score[i] = e < E ? score_of(logits[r * E + e], p.scoring) : 0.0f;
    if (e < E) s[e] = score[i];
  }
  __syncwarp();
  if (p.scoring == ScoringFunc::softmax) {
    float m = -INFINITY;
    for (int64_t e = lane; e < E; e += 32) m = fmaxf(m, s[e]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) m = fmaxf(m, __shfl_xor_sync(0xFFFFFFFFu, m, off));
    for (int64_t e = lane; e < E; e += 32) s[e] = expf(s[e] - m);
    __syncwarp();
    float sum = 0;  // in expert order, as the CPU adds them
    if (lane == 0)
      for (int64_t e = 0; e < E; ++e) sum += s[e];
    sum = __shfl_sync(0xFFFFFFFFu, sum, 0);
    for (int64_t e = lane; e < E; e += 32) s[e] /= sum;
    __syncwarp();
#pragma unroll
    for (int i = 0; i < PerLane; ++i)
      if (lane + 32 * i < E) score[i] = s[lane + 32 * i];
  }
  int32_t* sel = selected + r * k;
  if (tid2eid) {
    for (int64_t j = lane; j < k; j += 32) {
      const int32_t e = tid2eid[int64_t(ids[r]) * k + j];
      if (e < 0 || e >= E) __trap();
      sel[j] = picked[j] = e;
    }
  } else {
    uint32_t key[PerLane];
    uint32_t remaining = 0;  // bit i: expert lane + 32·i not picked yet
#pragma unroll
    for (int i = 0; i < PerLane; ++i) {
      const int64_t e = lane + 32 * i;
      key[i] = e < E ? score_key(score[i] + expert_bias[i]) : 0u;
      if (e < E) remaining |= 1u << i;
    }
    constexpr uint32_t kNone = 0xFFFFFFFFu;
    for (int64_t j = 0; j < k; ++j) {
      uint32_t best_key = 0, best = kNone;  // the lane's best remaining: highest key, then lowest expert
#pragma unroll
      for (int i = 0; i < PerLane; ++i)
        if (((remaining >> i) & 1) && (best == kNone || key[i] > best_key)) {
          best_key = key[i];
          best = uint32_t(lane + 32 * i);
        }
      const uint32_t top = __reduce_max_sync(0xFFFFFFFFu, best == kNone ? 0u : best_key);
      const uint32_t e = __reduce_min_sync(0xFFFFFFFFu, best != kNone && best_key == top ? best : kNone);
      if (e == kNone) __trap();  // fewer experts than k
      if (lane == int(e % 32)) remaining &= ~(1u << (e / 32));
      if (lane == 0) sel[j] = picked[j] = int32_t(e);
    }
  }
  __syncwarp();
  // every lane adds the picks' scores in pick order (the CPU's), then writes its picks' weights
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += s[picked[j]];
  for (int64_t j = lane; j < k; j += 32)
    weights[r * k + j] = (p.renormalize ? s[picked[j]] / (sum + 1e-20f) : s[picked[j]]) * p.route_scale;
}

// grid (n·k, inter / warps): h[pair, o] = swiglu(w1_e[o]·x_t, w3_e[o]·x_t)
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    expert_up_kernel(const float* x, int64_t dim, int64_t inter, const int32_t* selected, int64_t k, const WeightRef* w1,
                     const WeightRef* w3, float limit, bool round_input, float* h) {
  wait_for_inputs();
  allow_next_kernel();
  __shared__ __align__(16) float tile[kTilePitch];
  const int64_t o = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t pair = blockIdx.x, t = pair / k;
  const int32_t e = selected[pair];
  if (!w1[e].weight) return;  // another rank's expert (expert parallelism): its pairs stay zero
  float gate[1] = {}, up[1] = {};
  block_row_dot<1>(w1[e], o, o < inter, x + t * dim, dim, 1, round_input, tile, gate);
  block_row_dot<1>(w3[e], o, o < inter, x + t * dim, dim, 1, round_input, tile, up);
  if (o >= inter) return;
  const float v = clamped_swiglu(warp_sum(gate[0]), warp_sum(up[0]), limit);
  if ((threadIdx.x & 31) == 0) h[pair * inter + o] = v;
}

// grid (n·k, dim / warps): y[pair, o] = w2_e[o]·h[pair]
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    expert_down_kernel(const float* h, int64_t dim, int64_t inter, const int32_t* selected, const WeightRef* w2,
                       bool round_input, float* y) {
  wait_for_inputs();
  allow_next_kernel();
  __shared__ __align__(16) float tile[kTilePitch];
  const int64_t o = int64_t(blockIdx.y) * kWarpsPerBlock + threadIdx.x / 32;
  const int64_t pair = blockIdx.x;
  if (!w2[selected[pair]].weight) return;
  float acc[1] = {};
  block_row_dot<1>(w2[selected[pair]], o, o < dim, h + pair * inter, inter, 1, round_input, tile, acc);
  if (o >= dim) return;
  const float s = warp_sum(acc[0]);
  if ((threadIdx.x & 31) == 0) y[pair * dim + o] = s;
}

// ---- tensor-core decode path: one launch for w1/w3 and one for w2 over groups of up to 8 (token,
// slot) pairs of one expert, a pair per mma column, so an expert's weights are read and decoded
// once for its group (batch 32 of V4-Flash: ~135 distinct experts for 192 pairs). A block of
// `warps` warps splits the inputs of 16 rows of w1 and w3 (up) or 32 rows of w2 (down) of one
// group (one token tile: the instances fit the 128 registers of 16-warp blocks). A column's sums
// do not depend on the other columns, so a pair comes out the same in any group.
constexpr int kMaxSplit = 16;
constexpr int kGroupColumns = 8;
// Chunks a warp loads before it consumes them (mma_rows.cuh), and the deeper instances' largest
// block. A grid that fits one wave at the usual depth (a token's k pairs) leaves registers
// unused: the deep instances spend them on a third chunk, so each warp waits on memory fewer
// times (V4-Flash at batch 1: 130-134 registers, 15 warps an SM, the grid of 768 blocks of two
// warps still one wave). Larger grids keep the usual depth, whose occupancy they need.
constexpr int kDeepChunksInFlight = 3;
constexpr int kDeepMaxSplit = 8;
template <int InFlight>
constexpr int max_split() {
  return InFlight > kChunksInFlight ? kDeepMaxSplit : kMaxSplit;
}

// The pairs grouped by expert (group_pairs_kernel), or, with null tables (one token: its k
// experts are distinct), group g = pair g alone.
struct PairGroups {
  const int32_t* selected = nullptr;  // [pairs]: each pair's expert
  const int4* groups = nullptr;       // [pairs]: (expert, first, count, 0) of each group
  const int32_t* order = nullptr;     // [pairs]: pairs by expert, then pair; a group's are order[first..]
  const int32_t* count = nullptr;     // groups in the table
};
struct PairGroup {
  int expert, first, count;
};
__device__ __forceinline__ PairGroup group_at(const PairGroups& p, int g) {
  if (!p.groups) return {p.selected[g], g, 1};
  const int4 v = p.groups[g];
  return {v.x, v.y, v.z};
}
// The pair in column c of a group.
__device__ __forceinline__ int64_t pair_in(const PairGroups& p, const PairGroup& group, int c) {
  return p.order ? p.order[group.first + c] : group.first + c;
}

// One block: the pairs grouped by expert, a group per 8 pairs of an expert, experts in index order
// and each expert's pairs in pair order. Shared: the selections (dynamic) and per-expert counts.
// held (expert parallelism; may be null): the experts whose key is `experts` are another rank's
// and get no group, so no kernel reads their null tables (their pairs stay zero).
constexpr int kGroupThreads = 256, kGroupExpertsPerThread = 4;
constexpr int64_t kMaxGroupedExperts = kGroupThreads * kGroupExpertsPerThread;
__global__ void __launch_bounds__(kGroupThreads)
    group_pairs_kernel(const int32_t* selected, int pairs, int experts, const int32_t* expert_key, int4* groups,
                       int32_t* order, int32_t* count) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ int32_t expert_of[];
  __shared__ int32_t per_expert[kMaxGroupedExperts];  // pairs, then the first of each expert's pairs
  using Scan = cub::BlockScan<int, kGroupThreads>;
  __shared__ typename Scan::TempStorage scan;
  for (int e = threadIdx.x; e < kMaxGroupedExperts; e += kGroupThreads) per_expert[e] = 0;
  for (int p = threadIdx.x; p < pairs; p += kGroupThreads) {
    expert_of[p] = selected[p];
    if (expert_of[p] < 0 || expert_of[p] >= experts) __trap();  // the router's selections are in range
  }
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += kGroupThreads) atomicAdd(&per_expert[expert_of[p]], 1);
  __syncthreads();
  int n[kGroupExpertsPerThread], first[kGroupExpertsPerThread], blocks[kGroupExpertsPerThread],
      first_group[kGroupExpertsPerThread], total = 0;
#pragma unroll
  for (int i = 0; i < kGroupExpertsPerThread; ++i) {
    const int e = threadIdx.x * kGroupExpertsPerThread + i;
    n[i] = per_expert[e];
    const bool elsewhere = expert_key && e < experts && expert_key[e] == experts;
    blocks[i] = elsewhere ? 0 : (n[i] + kGroupColumns - 1) / kGroupColumns;
  }
  Scan(scan).ExclusiveSum(n, first);
  __syncthreads();
  Scan(scan).ExclusiveSum(blocks, first_group, total);
#pragma unroll
  for (int i = 0; i < kGroupExpertsPerThread; ++i) {
    const int e = threadIdx.x * kGroupExpertsPerThread + i;
    per_expert[e] = first[i];
    for (int q = 0; q < blocks[i]; ++q) {
      const int begin = kGroupColumns * q;
      groups[first_group[i] + q] = make_int4(e, first[i] + begin, min(kGroupColumns, n[i] - begin), 0);
    }
  }
  if (threadIdx.x == 0) *count = total;
  __syncthreads();
  for (int p = threadIdx.x; p < pairs; p += kGroupThreads) {
    const int e = expert_of[p];
    int rank = 0;
    for (int q = 0; q < p; ++q) rank += expert_of[q] == e;
    order[per_expert[e] + rank] = p;
  }
}

// grid (inter / 16, groups): h[pair, o] = swiglu(w1_e[o]·x_t, w3_e[o]·x_t) for the group's pairs
template <WeightFormat F, int P, int InFlight>
__global__ void __launch_bounds__(max_split<InFlight>() * 32)
    expert_up_mma_kernel(const float* x, int64_t dim, int64_t inter, PairGroups pg, int64_t k, const WeightRef* w1,
                         const WeightRef* w3, float limit, int chunks, float* h) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ __align__(16) float red[];
  if (pg.count && int(blockIdx.y) >= *pg.count) return;  // the grid has room for one pair a group
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const PairGroup group = group_at(pg, int(blockIdx.y));
  const int64_t o0 = int64_t(blockIdx.x) * 16;
  const int column = lane / 4;  // the lane's B column
  const float* columns[1] = {column < group.count ? x + pair_in(pg, group, column) / k * dim : nullptr};
  float acc[kMmaTiles][1][4];
  warp_mma_rows<F, 1, P, true, false, InFlight>(w1[group.expert], w3[group.expert], o0, inter, columns,
                                                chunks * warp / warps, chunks * (warp + 1) / warps, acc);
  split_k_sum<1>(acc, red);
  if (warp != 0) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // lane (g, t) holds columns 2t, 2t + 1 of rows g and g + 8
    const int c = 2 * (lane % 4) + i % 2;
    const int64_t o = o0 + lane / 4 + 8 * (i / 2);
    if (c < group.count && o < inter)
      h[pair_in(pg, group, c) * inter + o] = clamped_swiglu(acc[0][0][i], acc[1][0][i], limit);
  }
}

// grid (dim / 32, groups): y[pair, o] = w2_e[o]·h[pair] for the group's pairs
template <WeightFormat F, int P, int InFlight>
__global__ void __launch_bounds__(max_split<InFlight>() * 32)
    expert_down_mma_kernel(const float* h, int64_t dim, int64_t inter, PairGroups pg, const WeightRef* w2, int chunks,
                           float* y) {
  wait_for_inputs();
  allow_next_kernel();
  extern __shared__ __align__(16) float red[];
  if (pg.count && int(blockIdx.y) >= *pg.count) return;
  const int warps = blockDim.x / 32, warp = threadIdx.x / 32, lane = threadIdx.x & 31;
  const PairGroup group = group_at(pg, int(blockIdx.y));
  const int64_t o0 = int64_t(blockIdx.x) * 32;
  const int column = lane / 4;
  const float* columns[1] = {column < group.count ? h + pair_in(pg, group, column) * inter : nullptr};
  const WeightRef& w = w2[group.expert];
  float acc[kMmaTiles][1][4];
  warp_mma_rows<F, 1, P, false, false, InFlight>(w, w, o0, dim, columns, chunks * warp / warps,
                                                 chunks * (warp + 1) / warps, acc);
  split_k_sum<1>(acc, red);
  if (warp != 0) return;
#pragma unroll
  for (int r = 0; r < kMmaTiles; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int c = 2 * (lane % 4) + i % 2;
      const int64_t o = o0 + 16 * r + lane / 4 + 8 * (i / 2);
      if (c < group.count && o < dim) y[pair_in(pg, group, c) * dim + o] = acc[r][0][i];
    }
}

size_t split_reduction_bytes(int warps) { return size_t(warps - 1) * kMmaTiles * 4 * 32 * sizeof(float); }

// Warps per block for `kernel`: the most (up to kMaxSplit, at least two chunks each) that keep the
// grid of one token's k pairs (tiles · k blocks) in one wave on this device, from the kernel's
// occupancy at that block size. More warps keep more bytes in flight: with two a block, V4-Flash's
// NVFP4 up-projection (768 blocks) ran at 11 warps an SM and 32% of DRAM bandwidth (ncu), where
// its 86 registers a thread allow 21. The down-projection's 127 registers fit 15 warps of blocks
// of 3: it keeps 2. Depends on the matrix, k and the device, never on the tokens of the step, so
// a pair's sum runs in the same order whatever the batch (batch invariance).
template <typename Kernel>
int expert_split(Kernel kernel, int64_t tiles, int64_t k, int chunks) {
  int warps = 1;
  for (int w = 2; w <= kMaxSplit && 2 * w <= chunks; ++w) {  // fewer blocks fit as blocks grow: stop at the first miss
    if (tiles * k > one_wave_blocks(kernel, w * 32, split_reduction_bytes(w))) break;
    warps = w;
  }
  return warps;
}

// Launches `deep` where its grid of `warps`-warp blocks fits one wave on this device, `usual`
// otherwise. A warp adds its chunks in order at any depth, so both give the same sums at the same
// split, and the choice may follow the grid (the step's pairs) without breaking batch invariance.
template <typename Kernel, typename... Args>
void launch_at_depth(Kernel usual, Kernel deep, dim3 grid, int warps, cudaStream_t stream, Args... args) {
  const bool one_wave = warps <= kDeepMaxSplit &&
                        int64_t(grid.x) * grid.y <= one_wave_blocks(deep, warps * 32, split_reduction_bytes(warps));
  launch_early(one_wave ? deep : usual, grid, dim3(warps * 32), split_reduction_bytes(warps), stream, args...);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

template <WeightFormat F, int P>
void experts_mma(const float* x, int64_t pairs, int64_t dim, int64_t inter, const PairGroups& groups, int64_t k,
                 const WeightRef* w1, const WeightRef* w2, const WeightRef* w3, float limit, float* h, float* y,
                 cudaStream_t stream, int split) {
  const int up_chunks = mma_chunks(F, dim), down_chunks = mma_chunks(F, inter);
  const int64_t up_tiles = (inter + 15) / 16, down_tiles = (dim + 31) / 32;
  const auto up = expert_up_mma_kernel<F, P, kChunksInFlight>;
  const auto down = expert_down_mma_kernel<F, P, kChunksInFlight>;
  const int up_warps = split > 0 ? split : expert_split(up, up_tiles, k, up_chunks);
  const int down_warps = split > 0 ? split : expert_split(down, down_tiles, k, down_chunks);
  launch_at_depth(up, expert_up_mma_kernel<F, P, kDeepChunksInFlight>, dim3(unsigned(up_tiles), unsigned(pairs)),
                  up_warps, stream, x, dim, inter, groups, k, w1, w3, limit, up_chunks, h);
  launch_at_depth(down, expert_down_mma_kernel<F, P, kDeepChunksInFlight>, dim3(unsigned(down_tiles), unsigned(pairs)),
                  down_warps, stream, h, dim, inter, groups, w2, down_chunks, y);
}

template <WeightFormat F>
void experts_mma_parts(bool round_input, const float* x, int64_t pairs, int64_t dim, int64_t inter,
                       const PairGroups& groups, int64_t k, const WeightRef* w1, const WeightRef* w2,
                       const WeightRef* w3, float limit, float* h, float* y, cudaStream_t stream, int split) {
  if (round_input) experts_mma<F, kRounded>(x, pairs, dim, inter, groups, k, w1, w2, w3, limit, h, y, stream, split);
  else experts_mma<F, kThreeParts>(x, pairs, dim, inter, groups, k, w1, w2, w3, limit, h, y, stream, split);
}

__global__ void combine_kernel(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim, float* out) {
  wait_for_inputs();
  allow_next_kernel();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * dim) return;
  const int64_t t = i / dim, d = i % dim;
  float acc = 0;
  for (int64_t j = 0; j < k; ++j) acc += y[(t * k + j) * dim + d] * weights[t * k + j];
  out[i] = acc;
}

}  // namespace

bool same_layout(const WeightRef& a, const WeightRef& b) {
  return same_encoding(a, b) && a.out == b.out && a.in == b.in;
}

void route(const float* logits, const float* bias, const int32_t* tid2eid, const int32_t* ids, int64_t n,
           const RouteParams& p, float* weights, int32_t* selected, cudaStream_t stream) {
  if (n == 0) return;
  if (p.experts > 32 * kMaxRoutePerLane)
    runtime_error("cuda route: ", p.experts, " experts are more than the router's ", 32 * kMaxRoutePerLane);
  if (p.k > p.experts) runtime_error("cuda route: top-", p.k, " of ", p.experts, " experts");
  const size_t shared = size_t(p.experts) * sizeof(float) + size_t(p.k) * sizeof(int32_t);
  auto run = [&](auto kernel) {
    launch_early(kernel, dim3(unsigned(n)), dim3(32), shared, stream, logits, bias, tid2eid, ids, p, weights, selected);
  };
  if (p.experts <= 32 * 8) run(route_kernel<8>);
  else if (p.experts <= 32 * 16) run(route_kernel<16>);
  else run(route_kernel<kMaxRoutePerLane>);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

int64_t routed_experts_scratch_floats(int64_t n, int64_t k, int64_t dim, int64_t inter) {
  const int64_t pairs = n * k;
  return pairs * (inter + dim) + 5 * pairs + 1;  // h, y, then the groups (int4 each), their order and count
}

namespace {

// y [pairs, dim]: each (token, slot) pair's expert output; zeros where the expert's weights are
// absent (`some_absent`: another rank holds them).
void expert_pairs(const float* x, int64_t n, int64_t dim, int64_t inter, const int32_t* selected, int64_t k,
                  const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                  const ExpertLayout& layout, float limit, bool round_input_to_bf16, float* scratch, float* y,
                  cudaStream_t stream, int split) {
  const int64_t pairs = n * k;
  if (split < 0 || split > kMaxSplit) runtime_error("cuda experts: split ", split, " outside 0..", kMaxSplit);
  float* h = scratch;
  const float lim = limit > 0 ? limit : INFINITY;
  if (layout.some_absent) TETRA_CUDA_CHECK(cudaMemsetAsync(y, 0, size_t(pairs * dim) * sizeof(float), stream));
  // x rows (dim floats) and h rows (inter floats) stay 16-byte aligned when the widths are
  // whole segments, which mma_rows_supported checks.
  if (layout.uniform && mma_rows_supported(layout.up, x, 1) && mma_rows_supported(layout.down, h, 1) &&
      layout.up.format == layout.down.format) {
    PairGroups groups{.selected = selected};
    const size_t group_shared = size_t(pairs) * sizeof(int32_t);
    // Grouped where experts share pairs, and always where some are another rank's (no group,
    // no block for those: the kernels never read their null tables).
    if ((n > 1 || layout.some_absent) && layout.experts > 0 && layout.experts <= kMaxGroupedExperts &&
        group_shared <= 48 * 1024) {
      // the tables after h and y: pairs·(inter + dim) floats keep them 16-byte aligned (whole segments)
      int4* table = reinterpret_cast<int4*>(scratch + pairs * (inter + dim));
      int32_t* order = reinterpret_cast<int32_t*>(table + pairs);
      launch_early(group_pairs_kernel, dim3(1), dim3(kGroupThreads), group_shared, stream, selected, int(pairs),
                   int(layout.experts), layout.expert_key, table, order, order + pairs);
      TETRA_CUDA_CHECK(cudaGetLastError());
      groups = {selected, table, order, order + pairs};
    }
    auto run = [&](auto launch) {
      launch(round_input_to_bf16, x, pairs, dim, inter, groups, k, experts_w1, experts_w2, experts_w3, lim, h, y,
             stream, split);
    };
    switch (layout.up.format) {
      case WeightFormat::dense: run(experts_mma_parts<WeightFormat::dense>); break;
      case WeightFormat::fp8_block: run(experts_mma_parts<WeightFormat::fp8_block>); break;
      case WeightFormat::fp8_tensor: run(experts_mma_parts<WeightFormat::fp8_tensor>); break;
      case WeightFormat::mxfp4: run(experts_mma_parts<WeightFormat::mxfp4>); break;
      case WeightFormat::nvfp4: run(experts_mma_parts<WeightFormat::nvfp4>); break;
    }
    return;
  }
  launch_early(expert_up_kernel, dim3(unsigned(pairs), unsigned((inter + kWarpsPerBlock - 1) / kWarpsPerBlock)),
               dim3(kWarpsPerBlock * 32), 0, stream, x, dim, inter, selected, k, experts_w1, experts_w3, lim,
               round_input_to_bf16, h);
  TETRA_CUDA_CHECK(cudaGetLastError());
  launch_early(expert_down_kernel, dim3(unsigned(pairs), unsigned((dim + kWarpsPerBlock - 1) / kWarpsPerBlock)),
               dim3(kWarpsPerBlock * 32), 0, stream, h, dim, inter, selected, experts_w2, round_input_to_bf16, y);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void combine_expert_slots(const float* y, const float* weights, int64_t n, int64_t k, int64_t dim, float* out,
                          cudaStream_t stream) {
  if (n == 0) return;
  launch_early(combine_kernel, dim3(unsigned((n * dim + 255) / 256)), dim3(256), 0, stream, y, weights, n, k, dim, out);
  TETRA_CUDA_CHECK(cudaGetLastError());
}

void routed_experts(const float* x, int64_t n, int64_t dim, int64_t inter, const float* weights, const int32_t* selected,
                    int64_t k, const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                    const ExpertLayout& layout, float limit, bool round_input_to_bf16, float* scratch, float* out,
                    cudaStream_t stream, int split) {
  const int64_t pairs = n * k;
  if (pairs == 0) return;
  float* y = scratch + pairs * inter;
  expert_pairs(x, n, dim, inter, selected, k, experts_w1, experts_w2, experts_w3, layout, limit, round_input_to_bf16,
               scratch, y, stream, split);
  // out: each token's pairs' y weighted and added in slot order (either path of expert_pairs)
  combine_expert_slots(y, weights, n, k, dim, out, stream);
}

void routed_expert_slots(const float* x, int64_t n, int64_t dim, int64_t inter, const int32_t* selected, int64_t k,
                         const WeightRef* experts_w1, const WeightRef* experts_w2, const WeightRef* experts_w3,
                         const ExpertLayout& layout, float limit, bool round_input_to_bf16, float* scratch,
                         float* slots, cudaStream_t stream) {
  if (n * k == 0) return;
  expert_pairs(x, n, dim, inter, selected, k, experts_w1, experts_w2, experts_w3, layout, limit, round_input_to_bf16,
               scratch, slots, stream, 0);
}

}  // namespace tetra::cuda
