#pragma once
// Deterministic, fast random fills for synthetic tensors: splitmix64 streams, one per chunk
// of a buffer, so the fill runs on every core and gives the same bytes whatever the thread count.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

namespace tetra::bench {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1): standard deviation 1/sqrt(3).
  float symmetric() { return float(int64_t(next() >> 40) - (int64_t(1) << 23)) * (1.0f / float(1 << 23)); }

 private:
  uint64_t state_;
};

// Calls fill(rng, begin, end) over consecutive element ranges of [0, count), each range with
// its own generator derived from `seed`, in parallel.
void parallel_fill(uint64_t seed, int64_t count, const std::function<void(SplitMix64&, int64_t, int64_t)>& fill);

// A seed for one named buffer: the same name and shape always give the same stream.
uint64_t stream_seed(uint64_t seed, std::span<const int64_t> shape, const std::string_view name);

}  // namespace tetra::bench
