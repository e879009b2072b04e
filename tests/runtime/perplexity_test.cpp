// Windowing and per-token negative log-likelihoods of the perplexity computation.
#include "runtime/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"

namespace tetra {
namespace {

TEST(Perplexity, WindowsAreConsecutiveAndDropAOneTokenTail) {
  const std::vector<int32_t> ids = {10, 11, 12, 13, 14, 15, 16};
  const auto three = split_windows(ids, 3);
  ASSERT_EQ(three.size(), 2u);  // {10,11,12} {13,14,15}; {16} alone scores nothing
  EXPECT_EQ(three[0].front(), 10);
  EXPECT_EQ(three[1].front(), 13);
  EXPECT_EQ(three[1].size(), 3u);
  const auto four = split_windows(ids, 4);
  ASSERT_EQ(four.size(), 2u);
  EXPECT_EQ(four[1].size(), 3u);  // a shorter last window
  EXPECT_EQ(split_windows(ids, 100).size(), 1u);
  EXPECT_THROW(split_windows(ids, 1), Error);
}

TEST(Perplexity, TokenNllIsTheNegativeLogSoftmaxOfTheNextToken) {
  // vocab 3; row t predicts window[t+1]
  const std::vector<float> logits = {0, 1, 2, /**/ 5, 5, 5, /**/ 9, 9, 9};
  const std::vector<int32_t> window = {0, 2, 1};
  const auto nll = token_nlls(logits, window, 3);
  ASSERT_EQ(nll.size(), 2u);
  EXPECT_NEAR(nll[0], std::log(1 + std::exp(1.0) + std::exp(2.0)) - 2.0, 1e-12);
  EXPECT_NEAR(nll[1], std::log(3.0), 1e-12);
  const std::vector<WindowScore> scores = {{2, nll[0] + nll[1], nll}, {1, std::log(3.0), {std::log(3.0)}}};
  EXPECT_NEAR(perplexity(scores), std::exp((nll[0] + nll[1] + std::log(3.0)) / 3), 1e-12);
}

}  // namespace
}  // namespace tetra
