#include "backend/cuda/scale_checks.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace tetra::cuda {

// Eight bytes at a time (a whole checkpoint's NVFP4 scales are gigabytes; a byte loop took 3.4×
// as long), then the bytes past the last whole word one by one.
size_t first_e4m3_nan(const uint8_t* p, size_t n) {
  constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL, kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t word;
    std::memcpy(&word, p + i, 8);
    const uint64_t x = (word & kLow7) ^ kLow7;  // a zero byte where the byte is NaN
    if ((x - kOnes) & ~x & kHigh) break;
  }
  for (; i < n; ++i)
    if ((p[i] & 0x7F) == 0x7F) return i;
  return n;
}

// The tensor-core kernels turn NVFP4 scale bytes into bf16 factors with integer operations that
// have no NaN case (bf16_codes.cuh, nvfp4_factors): a NaN scale would become a large finite
// factor, a silent wrong answer, so such a checkpoint fails at load by its tensor.
void check_nvfp4_scales(const LinearWeight& w) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(w.scale.data);
  const size_t at = first_e4m3_nan(bytes, w.scale.nbytes);
  if (at == w.scale.nbytes) return;
  const size_t blocks = size_t(w.in / 16);
  const std::string tensor = w.sources.size() > 1 ? w.sources[1] : w.role + " weight_scale";
  model_error(tensor, " (", w.role, "): NVFP4 block scale of row ", at / blocks, ", inputs ", 16 * (at % blocks), "..",
              16 * (at % blocks) + 15, " is NaN (0x", std::hex, int(bytes[at]), ")");
}

}  // namespace tetra::cuda
