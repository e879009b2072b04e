#include "bench/bench_runner.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <new>
#include <string_view>

#include "backend/backend.h"
#include "backend/comm_group.h"
#include "bench/geometry.h"
#include "bench/kv_capacity.h"
#include "bench/load_progress.h"
#include "bench/random_fill.h"
#include "bench/routing_balance.h"
#include "core/error.h"
#include "core/finite.h"

namespace tetra::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

void check(const BenchOptions& o) {
  if (o.batches.empty() && o.prefill == 0) usage_error("nothing to time: give --batch or --prefill");
  for (int64_t b : o.batches)
    if (b < 1) usage_error("--batch values must be at least 1, got ", b);
  if (!o.batches.empty() && o.contexts.empty()) usage_error("--context needs at least one value");
  if (o.steps < 1) usage_error("--steps must be at least 1, got ", o.steps);
  if (o.ranks < 1 || o.ranks > 64) usage_error("--expert-parallel must be in [1, 64], got ", o.ranks);
}

// Runs `f`, turning a run-time failure (out of device or host memory, a failed CUDA call) into
// the point's error message; usage and model errors still stop the benchmark.
template <class F>
void recorded(std::string& error, std::ostream& log, F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.code() != ExitCode::runtime) throw;
    error = e.what();
  } catch (const std::bad_alloc&) {
    error = "out of host memory";
  }
  if (!error.empty()) log << "  failed: " << error << "\n";
}

}  // namespace

int64_t layers_within(const std::string& geometry, SyntheticFormat f, uint64_t bytes) {
  const int64_t all = synthetic_geometry(geometry, std::nullopt).n_layers;
  int64_t fit = 0;
  while (fit < all && synthetic_model_bytes(synthetic_geometry(geometry, fit + 1), f) <= bytes) ++fit;
  return fit;
}

uint64_t logits_digest(const std::vector<float>& logits) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const float v : logits) {
    const auto bits = std::bit_cast<uint32_t>(v);
    for (int byte = 0; byte < 4; ++byte) h = (h ^ ((bits >> (8 * byte)) & 0xFF)) * 0x100000001b3ull;
  }
  return h;
}

std::string digest_hex(uint64_t digest) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(digest));
  return s;
}

double DecodeResult::median_seconds() const { return median(step_seconds); }
double DecodeResult::speculative_median_seconds() const { return median(speculative_step_seconds); }
double PrefillResult::median_seconds() const { return median(seconds); }

BenchReport run_bench(const BenchOptions& o, std::ostream& log, const std::function<void(const BenchReport&)>& on_result) {
  check(o);
  BenchReport r;
  r.options = o;
  r.config = synthetic_geometry(o.geometry, o.layers);
  const ModelConfig& c = r.config;
  for (int64_t ctx : o.contexts)
    if (ctx < 0 || ctx >= c.max_position_embeddings)
      usage_error("--context values must be in [0, ", c.max_position_embeddings, "), got ", ctx);
  if (o.prefill < 0 || o.prefill > c.max_position_embeddings)
    usage_error("--prefill must be in [0, ", c.max_position_embeddings, "], got ", o.prefill);

  if (o.ranks > c.n_routed_experts)
    usage_error("--expert-parallel ", o.ranks, ": the model has only ", c.n_routed_experts, " routed experts a layer");
  const auto backends = make_backends(o.device, o.ranks);
  Backend& be = *backends.front();  // the logits' rank
  r.device = device_info(o.device);
  log << "device: " << r.device.name;
  if (!r.device.kernel_launches.empty()) log << ", " << r.device.kernel_launches << " kernel launches";
  log << "\n";
  r.ceilings = measure_ceilings(o.device);
  log << "copy bandwidth: " << r.ceilings.copy_bytes_per_s / 1e9 << " GB/s (read + write)";
  if (r.ceilings.matrix_flops_per_s) log << ", bf16 matrix rate: " << *r.ceilings.matrix_flops_per_s / 1e12 << " TFLOP/s";
  log << "\n";

  const ModelConfig full = synthetic_geometry(o.geometry, std::nullopt);
  r.capacity.bytes_per_sequence = kv_bytes_per_sequence(full, r.capacity.tokens, o.caches);
  r.capacity.bytes_per_sequence_benchmarked = kv_bytes_per_sequence(c, r.capacity.tokens, o.caches);
  r.capacity.model_weight_bytes = synthetic_model_bytes(full, o.format);
  r.capacity.routed_expert_bytes = synthetic_routed_expert_bytes(full, o.format);
  r.capacity.gpu_memory = r.device.memory;
  if (r.device.memory) {
    const uint64_t shared = r.capacity.model_weight_bytes - r.capacity.routed_expert_bytes;
    auto fit = [&](int ranks) {
      return sequences_that_fit(*r.device.memory, ranks, shared, r.capacity.routed_expert_bytes, full.n_routed_experts,
                                r.capacity.bytes_per_sequence);
    };
    r.capacity.one_gpu = fit(1);
    r.capacity.two_gpus = fit(2);
  }

  // What does not fit fails here, named, not as an allocation deep in the load or the first step.
  r.weight_bytes = synthetic_model_bytes(c, o.format);
  const uint64_t routed_bytes = synthetic_routed_expert_bytes(c, o.format);
  r.rank_weight_bytes = largest_rank_weight_bytes(o.ranks, r.weight_bytes - routed_bytes, routed_bytes, c.n_routed_experts);
  auto gb = [](uint64_t bytes) { return cat(double(bytes) / 1e9, " GB"); };
  auto fewer_layers = [&] {
    return r.device.memory ? cat("; ", layers_within(o.geometry, o.format, *r.device.memory), " layers' weights fit in ",
                                 gb(*r.device.memory), ", and the caches and activations need room beside them: try fewer (--layers)")
                           : std::string();
  };
  if (r.device.memory && r.rank_weight_bytes > *r.device.memory)
    runtime_error("the synthetic ", o.geometry, " model of ", c.n_layers, " layers has ", gb(r.weight_bytes),
                  " of weights", o.ranks > 1 ? cat(" (", gb(r.rank_weight_bytes), " on the largest of ", o.ranks, " ranks)") : std::string(),
                  ", more than the device's ", gb(*r.device.memory), fewer_layers());

  auto t0 = Clock::now();
  const SyntheticWeights synthetic(c, o.format, o.seed);
  r.generate_seconds = seconds_since(t0);
  r.host_bytes = synthetic.host_bytes();
  log << c.n_layers << " layers, " << synthetic_format_name(o.format) << ": " << double(r.weight_bytes) / 1e9
      << " GB of weights from " << double(r.host_bytes) / 1e9 << " GB of shared host buffers (" << r.generate_seconds
      << " s to generate)\n";
  t0 = Clock::now();
  std::optional<Model> model;
  {
    const LoadProgress progress(log, o.device, r.weight_bytes, std::chrono::seconds(5));
    model.emplace(c, synthetic.weights(), pointers(backends), o.caches);
  }
  r.load_seconds = seconds_since(t0);
  log << "loaded in " << r.load_seconds << " s\n";
  t0 = Clock::now();
  try {
    r.routing = balance_routing(*model, be, o.seed);
  } catch (const Error& e) {
    if (e.code() != ExitCode::runtime) throw;
    // The layers hint only for memory: a kernel's fault (an illegal instruction) is not the model's size.
    const bool out_of_memory = std::string_view(e.what()).find("out of memory") != std::string_view::npos;
    runtime_error("balancing the routers after loading ", gb(r.weight_bytes), " of weights: ", e.what(),
                  out_of_memory ? fewer_layers() : std::string());
  }
  if (r.routing.steps > 0)
    log << "routers balanced in " << r.routing.steps << " steps of " << r.routing.tokens << " tokens ("
        << seconds_since(t0) << " s): the busiest expert " << r.routing.busiest_before << " -> "
        << r.routing.busiest_after << " x the mean load\n";

  // Each point draws its tokens from a stream of its own (the seed, the point's kind and shape), so
  // that what it measures never depends on the points before it: one shared stream gave the
  // batch-32 point other tokens after a batch-1 point than alone (docs/perf.md, thirty-fifth run).
  auto token_stream = [&](std::string_view kind, int64_t batch, int64_t context) {
    const int64_t shape[] = {batch, context};
    return SplitMix64(stream_seed(o.seed, shape, kind));
  };
  auto random_tokens = [&](SplitMix64& ids, int64_t n) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& id : t) id = int32_t(ids.next() % uint64_t(c.vocab_size));
    return t;
  };
  // A time is reported only for a step that computed numbers: the V4-Flash geometry once decoded
  // all-NaN logits on the H200 (kernels chained by PDL, docs/perf.md, thirty-sixth run) and
  // every figure of the run still looked plausible.
  // The digest of a timed step's logits, downloaded once they are checked.
  auto checked_digest = [&](const Tensor& out_logits) {
    const std::vector<float> logits = be.download(out_logits);
    if (const int64_t bad = count_nonfinite(logits)) {
      ++r.nonfinite_points;
      runtime_error("its logits are not finite (", bad, " of ", logits.size(),
                    " values are NaN or infinite): the step computed garbage, so its time is not reported");
    }
    return logits_digest(logits);
  };
  // Downloading one value waits for everything queued before it: the end of a step (every
  // rank's: a rank may finish its step after the logits' one).
  std::vector<Tensor> fences;
  in_turn(pointers(backends), [&](size_t i) { fences.push_back(backends[i]->upload(std::vector<float>{0.0f}, {1})); });
  auto finish = [&] { in_turn(pointers(backends), [&](size_t i) { backends[i]->download(fences[i]); }); };

  auto decode_points = [&](int64_t ctx) {
    for (int64_t batch : o.batches) {
      DecodeResult d;
      d.batch = batch;
      d.context = ctx;
      d.floor_bytes = decode_step_bytes(c, synthetic.weights(), batch, ctx, o.caches, nullptr, o.ranks);
      log << "decode: batch " << batch << ", context " << ctx << "\n";
      recorded(d.error, log, [&] {
        // The sequences "have seen" ctx tokens: their cache blocks are taken (in one pool
        // allocation, so that it need not grow by copying) and read as they are. The blocks of
        // the steps to come are taken too: a table growing mid-run re-records the step's graph
        // (~10 ms), which two of three timed steps at 4k once did. Room: the warm-up, the timed
        // steps and the routing's step, and as many two-token steps (each keeps one).
        const int64_t room = (o.speculative ? 2 : 1) * (o.steps + 2);
        model->reserve_cache(batch * model->cache_layout().blocks_for(ctx + room, c.n_layers));
        std::vector<SequenceState> states;
        std::vector<SequenceState*> active;
        for (int64_t s = 0; s < batch; ++s) {
          states.push_back(model->new_sequence());
          model->resize(states.back(), ctx, room);
        }
        for (auto& s : states) active.push_back(&s);
        SplitMix64 ids = token_stream("decode tokens", batch, ctx);
        std::optional<ProfiledRegion> profiled;  // the timed steps, for a profiler (tools/profile_decode.sh)
        for (int64_t step = 0; step <= o.steps; ++step) {
          std::vector<std::vector<int32_t>> tokens;
          for (int64_t s = 0; s < batch; ++s) tokens.push_back(random_tokens(ids, 1));
          finish();
          const auto s0 = Clock::now();
          const Model::StepOutput out = model->step(active, tokens);
          finish();
          if (step > 0) d.step_seconds.push_back(seconds_since(s0));  // step 0 warms up
          if (step == 0) profiled.emplace(o.device);
          if (step == o.steps) {
            profiled.reset();  // the download is not a step's work
            d.logits_digest = checked_digest(out.logits);
          }
        }
        if (o.speculative) {
          recorded(d.speculative_error, log, [&] {
            for (int64_t step = 0; step <= o.steps; ++step) {
              std::vector<std::vector<int32_t>> tokens;
              for (int64_t s = 0; s < batch; ++s) tokens.push_back(random_tokens(ids, 2));
              finish();
              const auto s0 = Clock::now();
              model->step(active, tokens);
              finish();
              if (step > 0) d.speculative_step_seconds.push_back(seconds_since(s0));  // step 0 records its graph
              for (SequenceState* s : active) model->drop_last_token(*s);
            }
          });
        }
        // One more step, eager, untimed: the experts its tokens touch in each layer price the
        // step's floor as measured (synthetic routers need not spread a batch's tokens as
        // uniformly random routing would, which the expected floor assumes); over several ranks,
        // the most any rank's experts are touched.
        std::vector<int64_t> touched(size_t(c.n_layers), 0);
        const ScopedRoutingObserver observing(*model, [&](int64_t layer, const Tensor& experts) {
          std::vector<int32_t> ids = be.download_i32(experts);
          std::sort(ids.begin(), ids.end());
          ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
          std::vector<int64_t> per_rank(size_t(o.ranks), 0);
          for (const int32_t e : ids) ++per_rank[size_t(expert_owner(e, o.ranks, c.n_routed_experts))];
          touched[size_t(layer)] = *std::max_element(per_rank.begin(), per_rank.end());
        });
        std::vector<std::vector<int32_t>> tokens;
        for (int64_t s = 0; s < batch; ++s) tokens.push_back(random_tokens(ids, 1));
        try {
          model->step(active, tokens);
          d.measured_floor_bytes = decode_step_bytes(c, synthetic.weights(), batch, ctx, o.caches, &touched, o.ranks);
        } catch (const Error& e) {  // e.g. out of memory eagerly: the timed steps stand without it
          if (e.code() != ExitCode::runtime) throw;
          log << "  routing not measured: " << e.what() << "\n";
        }
      });
      if (d.error.empty()) {
        log << "  " << d.median_seconds() * 1e3 << " ms per step, logits " << digest_hex(d.logits_digest);
        if (d.measured_floor_bytes) log << "; experts a layer " << d.measured_floor_bytes->experts_per_layer;
        log << " (random routing " << d.floor_bytes.experts_per_layer << ")\n";
        if (!d.speculative_step_seconds.empty())
          log << "  two tokens a sequence: " << d.speculative_median_seconds() * 1e3 << " ms per step\n";
      }
      r.decode.push_back(std::move(d));
      if (on_result) on_result(r);
    }
  };

  auto prefill = [&] {
    model->release_cache();  // the decode points' blocks (50 GB at 1M × 32) back to the backend
    PrefillResult p;
    p.tokens = o.prefill;
    p.flops = prefill_flops(c, o.prefill);
    log << "prefill: " << o.prefill << " tokens\n";
    recorded(p.error, log, [&] {
      SplitMix64 ids = token_stream("prefill tokens", 1, o.prefill);
      {  // warm-up: first-use work (expert tables, pools) stays out of the timing
        SequenceState s = model->new_sequence();
        model->step({&s}, {random_tokens(ids, std::min<int64_t>(o.prefill, 2 * c.window))},
                    LogitRows::last_of_each_sequence());
        finish();
      }
      // Up to 3 runs while they take under 10 s together.
      double spent = 0;
      while (p.seconds.size() < 3 && spent < 10) {
        SequenceState s = model->new_sequence();
        const std::vector<std::vector<int32_t>> tokens{random_tokens(ids, o.prefill)};
        finish();
        std::optional<ProfiledRegion> profiled;  // the first timed prefill, for a profiler
        if (p.seconds.empty()) profiled.emplace(o.device);
        const auto s0 = Clock::now();
        const Model::StepOutput out = model->step({&s}, tokens, LogitRows::last_of_each_sequence());  // as a server's prefill
        finish();
        p.seconds.push_back(seconds_since(s0));
        profiled.reset();
        p.logits_digest = checked_digest(out.logits);
        spent += p.seconds.back();
      }
    });
    if (p.error.empty()) log << "  " << p.median_seconds() << " s, logits " << digest_hex(p.logits_digest) << "\n";
    r.prefill = std::move(p);
    if (on_result) on_result(r);
  };

  // The first context's decode points (the headline ones), the prefill, then the other contexts:
  // each kind of work slowed the other measured right after it (docs/perf.md, thirty-second run):
  // batch 1 by 3-4% after a prefill, a prefill by 12% after the 1M × 32 point even with its cache
  // given back, but not after the 4k points.
  if (!o.contexts.empty()) decode_points(o.contexts.front());
  if (o.prefill > 0) prefill();
  for (size_t i = 1; i < o.contexts.size(); ++i) decode_points(o.contexts[i]);
  return r;
}

}  // namespace tetra::bench
