// Block arithmetic from the KV layout and the pool's accounting.
#include "runtime/cache_blocks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {

TEST(CacheBlocks, GeometryFollowsTheKvLayout) {
  const ModelConfig c = testing::tiny_config();
  const CacheGeometry g(c, KvCacheDtype::f32, IndexerCacheDtype::f32, 16);
  double per_token = 0;
  for (int64_t l = 0; l < c.n_layers; ++l) per_token += layer_kv_bytes(c, l, KvCacheDtype::f32, IndexerCacheDtype::f32).per_token;
  EXPECT_EQ(g.block_bytes(), std::max<int64_t>(int64_t(std::ceil(per_token * 16)), kv_entry_bytes(c, KvCacheDtype::f32)));
  // Growing by one block's tokens costs exactly one more block; the window rings are fixed.
  EXPECT_EQ(g.blocks_for(32) - g.blocks_for(16), 1);
  EXPECT_EQ(g.blocks_for(17), g.blocks_for(32));
  EXPECT_GT(g.blocks_for(1), 1);
}

TEST(CacheBlocks, PoolRefusesBeyondItsSize) {
  CacheBlockPool pool(10);
  EXPECT_TRUE(pool.try_take(6));
  EXPECT_FALSE(pool.try_take(5));
  EXPECT_EQ(pool.in_use(), 6);
  pool.give_back(6);
  EXPECT_TRUE(pool.try_take(10));
  EXPECT_EQ(pool.in_use(), 10);
}

}  // namespace
}  // namespace tetra
