#pragma once
// The byte floor of one decode step: the weight bytes it must read (every layer's attention,
// shared expert, router and mHC parameters, the routed experts its tokens hit, the head) and
// the KV / indexer cache bytes its attention must read at a given context. Over the measured
// copy bandwidth this is the fastest any implementation of the step can run.
#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"

namespace tetra::bench {

// Expected number of distinct experts that `tokens` tokens select when each picks `active`
// distinct experts of `experts` uniformly at random: experts·(1 - (1 - active/experts)^tokens).
double expected_distinct_experts(int64_t experts, int64_t active, int64_t tokens);

// Cache bytes one decode step reads for one sequence holding `context` tokens (the new token
// is position `context`): per layer the stored window (min(context, window-1) entries; the new
// token's own entry is computed, not read), and for compressed layers the entries complete
// after the new token: CSA reads every indexer key and the top-k selected entries, HCA every entry.
double decode_kv_bytes(const ModelConfig& c, int64_t context, CacheTypes caches);

struct DecodeBytes {
  double weights = 0;           // weight bytes one step reads
  double kv = 0;                // cache bytes one step reads, all sequences
  double experts_per_layer = 0;  // distinct routed experts per layer (of the largest rank): expected, or the mean of those given
  double total() const { return weights + kv; }
};

// `batch` sequences of `context` tokens each take one token. Weight bytes are the backends'
// device bytes: linear layers at their checkpoint bytes, other tensors as f32 (i32) copies;
// of the embedding and the hash tables only the `batch` rows used count. The routed experts:
// touched[i] of main layer i where given (a step's measured routing), else the expected count
// of uniformly random routing. Over `ranks` devices (expert parallelism), which run the step
// side by side: the bytes of the rank holding the most experts (ceil(experts / ranks) of each
// layer), whose share of the expected count it reads; `touched` then gives that rank's counts.
DecodeBytes decode_step_bytes(const ModelConfig& c, const ModelWeights& w, int64_t batch, int64_t context,
                              CacheTypes caches, const std::vector<int64_t>* touched = nullptr, int ranks = 1);

}  // namespace tetra::bench
