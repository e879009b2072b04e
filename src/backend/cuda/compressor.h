#pragma once
// The KV compressor's softmax pooling over windows of `ratio` tokens, in f32.
#include <cuda_runtime.h>

#include <cstdint>

namespace tetra::cuda {

// out[t, i] = gate[t, i] + ape[(first_position + t) mod ratio, i]
void add_position_bias(const float* gate, const float* ape, int64_t n, int64_t width, int64_t first_position,
                       int64_t ratio, float* out, cudaStream_t stream);

// Pools `windows` complete windows of kv/gate ([windows·ratio, width], gate already biased).
// Without overlap: out[w, ch] = Σ_j softmax_j(gate)·kv over the window's rows. With overlap
// (out width = width/2): candidates are the first halves of the previous window's rows
// (window w-1, or prev_kv/prev_gate [ratio, width/2] for w = 0; none if those are null) and
// the second halves of window w's rows, softmaxed jointly per channel.
void pool_windows(const float* kv, const float* gate, const float* prev_kv, const float* prev_gate, int64_t windows,
                  int64_t ratio, int64_t width, bool overlap, float* out, cudaStream_t stream);

}  // namespace tetra::cuda
