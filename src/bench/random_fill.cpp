#include "bench/random_fill.h"

#include <algorithm>

namespace tetra::bench {

void parallel_fill(uint64_t seed, int64_t count, const std::function<void(SplitMix64&, int64_t, int64_t)>& fill) {
  constexpr int64_t kChunk = int64_t(1) << 20;
  const int64_t chunks = (count + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic)
  for (int64_t k = 0; k < chunks; ++k) {
    SplitMix64 rng(seed ^ (uint64_t(k) * 0xd1342543de82ef95ull));
    rng.next();
    fill(rng, k * kChunk, std::min(count, (k + 1) * kChunk));
  }
}

uint64_t stream_seed(uint64_t seed, std::span<const int64_t> shape, const std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull ^ seed;  // FNV-1a over the name and the dims
  auto mix = [&](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (char ch : name) mix(uint64_t(uint8_t(ch)));
  for (int64_t d : shape) mix(uint64_t(d));
  return h;
}

}  // namespace tetra::bench
