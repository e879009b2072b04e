// Block arithmetic of the paged layout, the paged cache taking exactly those blocks, and the
// pool's accounting.
#include "runtime/cache_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "backend/backend.h"
#include "core/error.h"
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

// Growing the pool keeps what live blocks hold; an idle pool is replaced by the larger one.
TEST(CacheBlocks, PoolGrowsAroundLiveBlocksAndAnewWhenIdle) {
  const ModelConfig c = testing::tiny_config();
  const auto cpu = make_backend("cpu");
  PagedCache cache(*cpu, PagedLayout(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4, c.n_layers));
  const int32_t a = cache.acquire_slot();
  cache.reserve(a, 0, 1);
  const PagedRows before = cache.rows(0);
  const int32_t block = before.tables.data<int32_t>()[a * before.width + before.offset];
  uint8_t* bytes = before.pool.data<uint8_t>() + int64_t(block) * before.block_bytes;
  for (int64_t i = 0; i < before.block_bytes; ++i) bytes[i] = uint8_t(i * 7 + 1);
  const uint64_t generation = cache.generation();

  cache.reserve_pool(before.pool.rows() + 40);  // slot a lives: the pool grows by copying
  const PagedRows grown = cache.rows(0);
  EXPECT_EQ(grown.pool.rows(), before.pool.rows() + 40);
  EXPECT_GT(cache.generation(), generation);
  const uint8_t* kept = grown.pool.data<uint8_t>() + int64_t(block) * grown.block_bytes;
  for (int64_t i = 0; i < grown.block_bytes; ++i) ASSERT_EQ(kept[i], uint8_t(i * 7 + 1)) << "byte " << i;

  cache.release_slot(a);
  cache.reserve_pool(grown.pool.rows() + 100);  // nothing lives: a fresh pool, nothing copied
  const PagedRows fresh = cache.rows(0);
  EXPECT_EQ(fresh.pool.rows(), grown.pool.rows() + 100);
  const uint8_t* left = fresh.pool.data<uint8_t>() + int64_t(block) * fresh.block_bytes;
  EXPECT_EQ(std::count(left, left + fresh.block_bytes, uint8_t(0)), fresh.block_bytes);
  const int32_t b = cache.acquire_slot();
  cache.reserve(b, 0, 1);
  EXPECT_EQ(cache.blocks_in_use(), 1);
}

// Releasing gives the whole pool back, refused while a slot holds blocks; the next use takes a new one.
TEST(CacheBlocks, PoolReleasedOnlyWhenIdle) {
  const ModelConfig c = testing::tiny_config();
  const auto cpu = make_backend("cpu");
  PagedCache cache(*cpu, PagedLayout(c, KvCacheDtype::fp8, IndexerCacheDtype::fp4, c.n_layers));
  const int32_t a = cache.acquire_slot();
  cache.reserve(a, 0, 1);
  EXPECT_THROW(cache.release_pool(), Error);
  EXPECT_EQ(cache.blocks_in_use(), 1);
  cache.release_slot(a);
  const uint64_t generation = cache.generation();
  cache.release_pool();
  EXPECT_GT(cache.generation(), generation);
  EXPECT_TRUE(cache.rows(0).pool.empty());
  const int32_t b = cache.acquire_slot();
  cache.reserve(b, 0, 1);
  EXPECT_EQ(cache.blocks_in_use(), 1);
  EXPECT_GE(cache.rows(0).pool.rows(), 1);
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
