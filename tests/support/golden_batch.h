#pragma once
// Runs a golden fixture's batch (tests/data/golden/<name>: a checkpoint and tokens.json) through
// the Model on a backend: the first `prefill` tokens of every sequence in one step, then one
// token per step, all sequences together. Shared by the CPU golden test and the CUDA parity test.
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/forward.h"

namespace tetra::testing {

std::vector<std::vector<int32_t>> read_golden_tokens(const std::string& dir);

// Logits of every position, [sequence][position][vocab] flattened.
std::vector<float> run_golden_batch(Backend& be, const std::string& dir, int64_t prefill, CacheTypes caches);

// Logits of each sequence's last token, [sequence][vocab] flattened, from one step over every
// whole sequence that asks for those rows only (LogitRows::last_of_each_sequence).
std::vector<float> run_golden_last_logits(Backend& be, const std::string& dir, CacheTypes caches);

}  // namespace tetra::testing
