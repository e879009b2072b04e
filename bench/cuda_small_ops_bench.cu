// The small kernels of every layer at V4-Flash shapes (hc_mult 4, dim 4096, 64 heads of 512
// with 64 rope dims, q_lora 1024, 20 Sinkhorn iterations, top-6 of 256 experts): the mHC pre mix,
// its Sinkhorn normalization, post update and head mix, rms_norm over each width a layer
// normalizes, rope of the query and key heads, and the router; at 1 and 32 rows (decode) and 8192
// rows (prefill). A decode step runs them back to back inside a CUDA graph, so each time here is a
// graph of 50 back-to-back launches divided by 50 (median of 10 replays), reported against the
// op's bytes (each input read once, each output written once) over the device copy bandwidth
// measured in the same run.
// Usage: tetra_cuda_small_ops_bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "backend/cuda/capture_arena.h"
#include "backend/cuda/cuda_check.h"
#include "backend/cuda/cuda_event.h"
#include "backend/cuda/cuda_graph.h"
#include "backend/cuda/cuda_stream.h"
#include "backend/cuda/device_buffer.h"
#include "backend/cuda/mhc.h"
#include "backend/cuda/moe.h"
#include "backend/cuda/norm_rope.h"
#include "bench/cuda_measure.h"
#include "bench/random_fill.h"
#include "report_errors.h"

namespace {
using namespace tetra::cuda;

constexpr int64_t kHc = 4, kDim = 4096, kFlat = kHc * kDim, kMix = (2 + kHc) * kHc;
constexpr int64_t kHeads = 64, kHeadDim = 512, kRopeHalf = 32, kQLora = 1024;
constexpr int64_t kExperts = 256, kTopK = 6;
constexpr int kLaunches = 50;

DeviceBuffer random_floats(int64_t count, uint64_t seed, float scale) {
  std::vector<float> host(static_cast<size_t>(count));
  tetra::bench::parallel_fill(seed, count, [&](tetra::bench::SplitMix64& r, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) host[size_t(i)] = scale * r.symmetric();
  });
  DeviceBuffer d(size_t(count) * sizeof(float));
  TETRA_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), d.bytes(), cudaMemcpyHostToDevice));
  return d;
}

// Microseconds per launch of `launch` (which enqueues one op on the stream) inside a graph.
double us_per_launch(const std::shared_ptr<CudaStream>& stream, const std::function<void()>& launch) {
  launch();  // first use outside the capture
  TETRA_CUDA_CHECK(cudaStreamSynchronize(stream->get()));
  CudaGraph graph(stream, std::make_shared<CaptureArena>(), [&] {
    for (int i = 0; i < kLaunches; ++i) launch();
  });
  graph.launch();
  std::vector<double> ms;
  for (int i = 0; i < 10; ++i) {
    const CudaEvent start, stop;
    TETRA_CUDA_CHECK(cudaEventRecord(start.get(), stream->get()));
    graph.launch();
    TETRA_CUDA_CHECK(cudaEventRecord(stop.get(), stream->get()));
    TETRA_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float t = 0;
    TETRA_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] * 1e3 / kLaunches;
}

void report(const char* op, int64_t rows, double us, double bytes, double copy_bytes_per_s) {
  const double floor_us = bytes / copy_bytes_per_s * 1e6;
  std::printf("%-28s %6lld %10.2f %10.2f %10.3f %7.1f%%\n", op, (long long)rows, us, bytes / 1e6, floor_us,
              100 * floor_us / us);
}

int run() {
  const double copy = tetra::bench::cuda_copy_bandwidth();
  const auto stream = std::make_shared<CudaStream>();
  const cudaStream_t s = stream->get();
  std::printf("device copy %.0f GB/s (read + write); %d launches per graph\n\n", copy / 1e9, kLaunches);
  std::printf("%-28s %6s %10s %10s %10s %8s\n", "op", "rows", "us/launch", "MB", "floor us", "of copy");

  const HcParams hc{kHc, kDim, 20, 1e-6f, 1e-6f};
  const DeviceBuffer fn = random_floats(kMix * kFlat, 1, 0.02f), base = random_floats(kMix, 2, 1.0f),
                     scale = random_floats(3, 3, 1.0f), norm_weight = random_floats(kDim, 4, 1.0f),
                     inv_freq = random_floats(kRopeHalf, 5, 0.5f);
  for (int64_t n : {1, 32, 8192}) {
    const DeviceBuffer h = random_floats(n * kFlat, 10 + uint64_t(n), 1.0f), y = random_floats(n * kDim, 20, 1.0f),
                       q = random_floats(n * kHeads * kHeadDim, 30, 1.0f);
    DeviceBuffer x(size_t(n * kDim) * 4), post(size_t(n * kHc) * 4), comb(size_t(n * kHc * kHc) * 4),
        out(size_t(n * kFlat) * 4), normed(size_t(n * kHeads * kHeadDim) * 4),
        scratch(size_t(hc_scratch_floats(n, hc)) * 4);
    std::vector<int32_t> positions(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positions[size_t(i)] = int32_t(4096 + i);
    DeviceBuffer pos(positions.size() * 4);
    TETRA_CUDA_CHECK(cudaMemcpy(pos.get(), positions.data(), pos.bytes(), cudaMemcpyHostToDevice));
    const double f = 4;  // bytes per float

    report("mhc pre + norm", n, us_per_launch(stream, [&] {
             hc_pre(h.get<float>(), fn.get<float>(), base.get<float>(), scale.get<float>(), norm_weight.get<float>(), n,
                    hc, scratch.get<float>(), x.get<float>(), post.get<float>(), comb.get<float>(), s);
           }),
           f * double(n * kFlat + kMix * kFlat + kDim + n * (kDim + kHc + kHc * kHc)), copy);
    // comb's Sinkhorn normalization (a decode graph runs it beside the sub-block); each launch
    // normalizes the last one's matrix again, the same work
    report("mhc Sinkhorn (20 iterations)", n,
           us_per_launch(stream, [&] { hc_sinkhorn(comb.get<float>(), n, hc, s); }), f * double(2 * n * kHc * kHc),
           copy);
    report("mhc post", n, us_per_launch(stream, [&] {
             hc_post(h.get<float>(), {y.get<float>()}, post.get<float>(), comb.get<float>(), n, kHc, kDim, out.get<float>(),
                     s);
           }),
           f * double(2 * n * kFlat + n * kDim + n * (kHc + kHc * kHc)), copy);
    report("mhc head + norm", n, us_per_launch(stream, [&] {
             hc_head(h.get<float>(), fn.get<float>(), base.get<float>(), scale.get<float>(), norm_weight.get<float>(), n,
                     hc, scratch.get<float>(), x.get<float>(), s);
           }),
           f * double(n * kFlat + kHc * kFlat + kDim + n * kDim), copy);
    // rms_norm (with its weight): the layer input (dim), the q latent (q_lora), each query head
    // and the kv head (512)
    struct Norm {
      const char* name;
      int64_t runs, group;
    };
    for (const Norm& m : {Norm{"rms_norm dim 4096", n, kDim}, Norm{"rms_norm q_lora 1024", n, kQLora},
                          Norm{"rms_norm 64 heads x 512", n * kHeads, kHeadDim}, Norm{"rms_norm kv 512", n, kHeadDim}})
      report(m.name, n, us_per_launch(stream, [&] {
               rms_norm(q.get<float>(), norm_weight.get<float>(), m.runs, m.group, 1e-6f, normed.get<float>(), s);
             }),
             f * double(2 * m.runs * m.group + m.group), copy);
    // rope in place on the rope dims of every query head, and of the kv head
    for (int64_t heads : {kHeads, int64_t(1)})
      report(heads == 1 ? "rope kv head" : "rope 64 query heads", n, us_per_launch(stream, [&] {
               rope(normed.get<float>(), pos.get<int32_t>(), inv_freq.get<float>(), n, heads, kHeadDim, kRopeHalf, false, s);
             }),
             f * double(2 * n * heads * 2 * kRopeHalf), copy);
    // the router: top-6 of 256 experts by sqrtsoftplus score plus a bias, as V4-Flash routes
    const DeviceBuffer logits = random_floats(n * kExperts, 40, 2.0f), bias = random_floats(kExperts, 41, 0.1f);
    DeviceBuffer route_weights(size_t(n * kTopK) * 4), selected(size_t(n * kTopK) * 4);
    const RouteParams route_params{kExperts, kTopK, tetra::ScoringFunc::sqrtsoftplus, true, 1.5f};
    report("route top-6 of 256", n, us_per_launch(stream, [&] {
             route(logits.get<float>(), bias.get<float>(), nullptr, nullptr, n, route_params, route_weights.get<float>(),
                   selected.get<int32_t>(), s);
           }),
           f * double(n * kExperts + kExperts + 2 * n * kTopK), copy);
  }
  return 0;
}

}  // namespace

int main() {
  return report_errors("tetra_cuda_small_ops_bench", [] { return run(); });
}
