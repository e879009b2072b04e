#pragma once
// The arithmetic of a prefill: matrix FLOPs of one batched step over `tokens` new tokens of one
// sequence starting empty, as a server's prefill computes it (Model::step with the logits of the
// last token only: the head runs on one row).
// Over the measured bf16 matrix rate this is the floor of the prefill.
#include <cstdint>

#include "model/config.h"

namespace tetra::bench {

struct PrefillFlops {
  double linear = 0;     // every linear layer a token passes: attention, compressors, indexer
                         // projections, router, shared expert, its active routed experts; the
                         // head on the last token
  double attention = 0;  // q·k and p·v over the keys each query sees (window + compressed)
  double indexer = 0;    // indexer scores q·k over every visible compressed key (CSA layers)
  double total() const { return linear + attention + indexer; }
};

PrefillFlops prefill_flops(const ModelConfig& c, int64_t tokens);

}  // namespace tetra::bench
