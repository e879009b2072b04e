// The device layout of FP4 weights (backend/cuda/fp4_layout.h): a bijection on words whose
// four-pair decode equals the checkpoint order's, checked on the CPU over every 16-bit half.
#include "backend/cuda/fp4_layout.h"

#include <gtest/gtest.h>

#include <random>

namespace tetra::cuda {
namespace {

void expect_same_pairs(uint32_t w) {
  const uint32_t r = fp4_repack(w);
  ASSERT_EQ(fp4_unrepack(r), w) << std::hex << "word 0x" << w;
  for (int n = 0; n < 4; ++n) ASSERT_EQ(fp4_packed_pair(r, n), fp4_pair(w, n)) << std::hex << "word 0x" << w << " pair " << n;
}

TEST(Fp4Layout, EveryHalfDecodesAsTheCheckpointOrder) {
  std::mt19937 rng(7);
  for (uint32_t half = 0; half < 0x10000u; ++half) {
    expect_same_pairs(half | (rng() & 0xFFFF0000u));  // the low half, under a random high one
    expect_same_pairs((half << 16) | (rng() & 0xFFFFu));
  }
}

TEST(Fp4Layout, RepackIsABijection) {
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) {
    const uint32_t w = rng();
    EXPECT_EQ(fp4_repack(fp4_unrepack(w)), w);
  }
  EXPECT_NE(fp4_repack(0x76543210u), 0x76543210u);  // it does move the codes
}

}  // namespace
}  // namespace tetra::cuda
