// The decode attention's split rule (backend/cuda/attention_splits.h), on the CPU: every row of a
// launch, whatever its key count up to the launch's longest list, fits the splits the launch
// makes room for, and its splits cover its tiles with none empty.
#include "backend/cuda/attention_splits.h"

#include <gtest/gtest.h>

namespace tetra::cuda {
namespace {

constexpr int64_t kTile = kAttentionTileKeys;

TEST(AttentionSplits, EveryRowFitsItsLaunch) {
  for (int64_t longest = 1; longest <= 2000; ++longest) {  // in tiles: up to 128000 keys
    const int64_t room = launch_splits(longest * kTile);
    ASSERT_LE(room, kAttentionMaxSplits) << "longest " << longest << " tiles";
    for (int64_t tiles = 1; tiles <= longest; ++tiles) {
      for (const int64_t keys : {tiles * kTile - kTile + 1, tiles * kTile}) {
        const int64_t splits = split_count(keys), per = split_tiles(keys);
        ASSERT_LE(splits, room) << keys << " keys beside a list of " << longest << " tiles";
        ASSERT_GE(splits * per, tiles) << keys << " keys: the splits cover the tiles";
        ASSERT_LT((splits - 1) * per, tiles) << keys << " keys: no split is empty";
      }
    }
  }
}

// Why the launch's room is not the longest list's count: a list one tile past the most splits
// takes fewer splits than a shorter one.
TEST(AttentionSplits, CountIsNotMonotonicInTheKeys) {
  const int64_t most = kAttentionMaxSplits;
  EXPECT_EQ(split_count(most * kTile), most);
  EXPECT_EQ(split_count((most + 1) * kTile), (most + 2) / 2);
  EXPECT_EQ(launch_splits((most + 1) * kTile), most);
  EXPECT_EQ(launch_splits(3 * kTile), 3);
  EXPECT_EQ(launch_splits(0), 1);
}

}  // namespace
}  // namespace tetra::cuda
