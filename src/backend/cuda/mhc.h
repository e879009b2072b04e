#pragma once
// Manifold-constrained hyper-connections (mHC), in f32: the pre mix, its Sinkhorn normalization,
// the post update, and the head's pre mix.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

constexpr int kMaxHc = 4;  // hc_mult of every DeepSeek-V4 model

struct HcParams {
  int64_t hc = 0, dim = 0, sinkhorn_iters = 0;
  float norm_eps = 0, hc_eps = 0;
};

// A sub-block's output as the post update reads it: y, plus `plus` where given (a MoE's routed and
// shared experts: the sum add() gives, bit for bit, without a pass of its own).
struct SubBlockOutput {
  const float* y;
  const float* plus = nullptr;
};

// Floats of device scratch hc_pre and hc_head need for n rows (partial sums of the mix pass).
int64_t hc_scratch_floats(int64_t n, const HcParams& p);
// h [n, hc·dim], fn [(2+hc)·hc, hc·dim], base [(2+hc)·hc], scale [3], norm [dim] → x [n, dim]
// (RMS-normalized with norm and norm_eps), post [n, hc], and comb [n, hc, hc] as logits:
// hc_sinkhorn makes them the mixing matrix (a launch of its own, so that it can run beside the
// sub-block, which does not read comb).
void hc_pre(const float* h, const float* fn, const float* base, const float* scale, const float* norm, int64_t n,
            const HcParams& p, float* scratch, float* x, float* post, float* comb, cudaStream_t stream);
// hc_post of h into out, then hc_pre of out with the next sub-block's fn, base, scale and norm
// (into x, next_post, next_comb: logits, as hc_pre's). Below 64 rows the mix pass computes the
// update itself and writes it as it reads it (one launch, the same values bit for bit).
void hc_post_pre(const float* h, SubBlockOutput y, const float* post, const float* comb, const float* fn,
                 const float* base, const float* scale, const float* norm, int64_t n, const HcParams& p,
                 float* scratch, float* out, float* x, float* next_post, float* next_comb, cudaStream_t stream);
// comb's logits [n, hc, hc] (hc_pre's, hc_post_pre's), in place, into the mixing matrix: the
// row softmax + hc_eps, then p.sinkhorn_iters Sinkhorn normalizations.
void hc_sinkhorn(float* comb, int64_t n, const HcParams& p, cudaStream_t stream);
// out[r, j] = post[r, j]·y[r] + Σ_i comb[r, i, j]·h[r, i]
void hc_post(const float* h, SubBlockOutput y, const float* post, const float* comb, int64_t n, int64_t hc, int64_t dim,
             float* out, cudaStream_t stream);
// fn [hc, hc·dim], base [hc], scale [1], norm [dim] → x [n, dim] (RMS-normalized with norm)
void hc_head(const float* h, const float* fn, const float* base, const float* scale, const float* norm, int64_t n,
             const HcParams& p, float* scratch, float* x, cudaStream_t stream);

}  // namespace tetra::cuda
