// Block arithmetic of the paged layout, the paged cache taking exactly those blocks, and the
// pool's accounting.
#include "runtime/cache_blocks.h"

#include <gtest/gtest.h>

#include "backend/backend.h"
#include "runtime/paged_cache.h"
#include "support/tiny_checkpoint.h"

namespace tetra {
namespace {

TEST(CacheBlocks, V4FlashBlocksAreTheSpecs) {
  ModelConfig c = testing::tiny_config();
  c.head_dim = 512;
  c.rope_dim = 64;
  c.index_head_dim = 128;
  c.window = 128;
  c.n_layers = 2;
  c.compress_ratios = {4, 128};
  const PagedLayout layout(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4, c.n_layers);
  EXPECT_EQ(layout.block_bytes(), 37376);  // 64 fp8_ds_mla entries of 584 bytes
  const StreamSpec& compressed = layout.streams()[size_t(layout.stream(0, StreamKind::compressed))];
  EXPECT_EQ(compressed.rows_per_block, 64);
  // the 65th CSA entry (token 260) and the 65th HCA entry (token 8320) each open a block
  const CacheGeometry g(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4);
  EXPECT_EQ(g.blocks_for(260) - g.blocks_for(259), 1);
  EXPECT_EQ(g.blocks_for(8320) - g.blocks_for(8319), 1);
  EXPECT_EQ(g.blocks_for(1) - g.blocks_for(0), 0);
  EXPECT_GT(g.blocks_for(0), 4);  // the window rings and pending windows are there from the start
}

TEST(CacheBlocks, PagedCacheTakesTheAccountedBlocks) {
  const ModelConfig c = testing::tiny_config();
  const auto cpu = make_backend("cpu");
  const CacheGeometry g(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4);
  PagedCache cache(*cpu, PagedLayout(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4, c.n_layers));
  const int32_t a = cache.acquire_slot(), b = cache.acquire_slot();
  for (int64_t tokens : {1, 17, 300, 1000}) {
    for (size_t i = 0; i < cache.layout().streams().size(); ++i)
      cache.reserve(a, int64_t(i), cache.layout().rows(cache.layout().streams()[i], tokens));
    EXPECT_EQ(cache.blocks_held(a), g.blocks_for(tokens)) << tokens;
  }
  cache.reserve(b, 0, 1);
  EXPECT_EQ(cache.blocks_in_use(), g.blocks_for(1000) + 1);
  cache.release_slot(a);
  EXPECT_EQ(cache.blocks_in_use(), 1);
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
