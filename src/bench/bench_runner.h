#pragma once
// `tetra bench --synthetic`: builds a model of a published geometry with random weights in a
// checkpoint format on a backend, measures the device's ceilings, and times decode steps
// (batch × context points) and a prefill, each with its floor.
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/decode_floor.h"
#include "bench/device_measure.h"
#include "bench/prefill_flops.h"
#include "bench/routing_balance.h"
#include "bench/synthetic_weights.h"
#include "model/config.h"
#include "model/forward.h"

namespace tetra::bench {

struct BenchOptions {
  std::string geometry = "v4-flash";  // or a directory with config.json
  std::optional<int64_t> layers;      // default: all
  SyntheticFormat format = SyntheticFormat::nvfp4;
  std::vector<int64_t> batches{1};
  std::vector<int64_t> contexts{4096};
  int64_t prefill = 0;                // tokens of the timed prefill; 0: none
  int64_t steps = 5;                  // timed decode steps per point, after one warm-up step
  bool speculative = false;           // also time each point's two-token steps (input and draft)
  std::string device = "cuda";
  int ranks = 1;  // --expert-parallel: the routed experts split over this many backends (GPUs 0..ranks-1)
  uint64_t seed = 1;
  CacheTypes caches;
};

struct DecodeResult {
  int64_t batch = 0, context = 0;
  std::vector<double> step_seconds;  // one per timed step
  DecodeBytes floor_bytes;           // with the experts uniformly random routing would touch
  std::optional<DecodeBytes> measured_floor_bytes;  // with those a step's routing touched
  std::string error;                 // why the point could not run (e.g. out of memory)
  uint64_t logits_digest = 0;        // of the last timed step's logits (logits_digest)
  // With BenchOptions::speculative: steps of two tokens a sequence, the second taken back after
  // (a speculative step with its draft rejected: the same work as one taken); the MTP block's
  // drafting is not in them.
  std::vector<double> speculative_step_seconds;
  std::string speculative_error;
  double median_seconds() const;
  double speculative_median_seconds() const;
};

struct PrefillResult {
  int64_t tokens = 0;
  std::vector<double> seconds;  // one per timed run
  PrefillFlops flops;
  std::string error;
  uint64_t logits_digest = 0;  // of the last timed run's logits (logits_digest)
  double median_seconds() const;
};

// FNV-1a over the bits of every logit: equal digests, the same step computed bit for bit (two
// builds of a change meant to keep the bits, or one point measured in two runs).
// The most layers of `geometry` whose weights in format `f` take at most `bytes` (0: not one).
int64_t layers_within(const std::string& geometry, SyntheticFormat f, uint64_t bytes);

uint64_t logits_digest(const std::vector<float>& logits);
std::string digest_hex(uint64_t digest);  // 16 hex digits

// 1M-token sequences beside the whole model's weights (all layers of the geometry).
struct CapacityResult {
  int64_t tokens = int64_t(1) << 20;
  uint64_t bytes_per_sequence = 0;              // every layer of the geometry
  uint64_t bytes_per_sequence_benchmarked = 0;  // the benchmarked layers
  uint64_t model_weight_bytes = 0;              // every layer, in the benchmark's format
  uint64_t routed_expert_bytes = 0;             // of which the routed experts'
  std::optional<uint64_t> gpu_memory;           // the device's, when it is a GPU
  std::optional<int64_t> one_gpu, two_gpus;  // two: --expert-parallel 2 (sequences_that_fit)
};

struct BenchReport {
  BenchOptions options;
  ModelConfig config;  // as benchmarked (its layers)
  DeviceInfo device;
  Ceilings ceilings;
  uint64_t weight_bytes = 0;  // device bytes of the benchmarked model
  uint64_t rank_weight_bytes = 0;  // of which the largest rank holds (all of them on one backend)
  uint64_t host_bytes = 0;    // the shared host buffers of the synthetic weights
  double generate_seconds = 0, load_seconds = 0;
  RoutingBalance routing;  // the synthetic routers' calibration (routing_balance.h)
  std::vector<DecodeResult> decode;
  std::optional<PrefillResult> prefill;
  CapacityResult capacity;
  int64_t nonfinite_points = 0;  // points that failed because their logits were not finite
};

// Runs everything; progress lines go to `log`, and `on_result` (when set) sees the report after
// each timed point, so a run stopped from outside keeps what it measured. Option problems are
// usage errors; a point that fails at run time (out of memory, logits that are not finite) is
// recorded in its result and the others still run.
BenchReport run_bench(const BenchOptions& options, std::ostream& log,
                      const std::function<void(const BenchReport&)>& on_result = {});

}  // namespace tetra::bench
