// The arithmetic behind `tetra bench`'s floors, checked against hand computations: expected
// distinct experts, the bytes of a decode step, the FLOPs of a prefill, KV bytes per 1M-token
// sequence (SPEC.md) and capacity, and the published geometries.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/bench_runner.h"
#include "bench/decode_floor.h"
#include "bench/geometry.h"
#include "bench/kv_capacity.h"
#include "bench/prefill_flops.h"
#include "bench/synthetic_weights.h"
#include "core/error.h"
#include "model/kv_layout.h"

namespace tetra::bench {
namespace {

// One sliding-window layer, small enough to count every byte by hand (see each test).
ModelConfig micro_config() {
  ModelConfig c;
  c.vocab_size = 10;
  c.dim = 64;
  c.n_layers = 1;
  c.n_heads = 2;
  c.head_dim = 32;
  c.rope_dim = 8;
  c.q_lora_rank = 16;
  c.o_groups = 1;
  c.o_lora_rank = 16;
  c.n_routed_experts = 4;
  c.n_activated_experts = 2;
  c.n_shared_experts = 1;
  c.moe_inter_dim = 32;
  c.index_n_heads = 2;
  c.index_head_dim = 8;
  c.index_topk = 1;
  c.window = 8;
  c.swiglu_limit = 10;
  c.max_position_embeddings = 1024;
  c.compress_ratios = {0};
  c.hash_routed = {false};
  return c;
}

TEST(BenchArithmetic, ExpectedDistinctExperts) {
  EXPECT_DOUBLE_EQ(expected_distinct_experts(256, 6, 1), 6.0);
  EXPECT_DOUBLE_EQ(expected_distinct_experts(256, 6, 0), 0.0);
  // two tokens, each 2 of 4: an expert is missed by both with probability (1/2)^2
  EXPECT_DOUBLE_EQ(expected_distinct_experts(4, 2, 2), 3.0);
  EXPECT_NEAR(expected_distinct_experts(256, 6, 32), 256.0 * (1 - std::pow(250.0 / 256.0, 32)), 1e-9);
  EXPECT_NEAR(expected_distinct_experts(256, 6, 100000), 256.0, 1e-9);
}

TEST(BenchArithmetic, LinearBytesPerFormat) {
  EXPECT_EQ(linear_bytes(WeightFormat::nvfp4, 2048, 4096), 4194304u + 524288u);    // e2m1 + e4m3 per 16
  EXPECT_EQ(linear_bytes(WeightFormat::mxfp4, 2048, 4096), 4194304u + 262144u);    // e2m1 + ue8m0 per 32
  EXPECT_EQ(linear_bytes(WeightFormat::fp8_block, 32768, 1024), 33554432u + 2048u);  // 256 × 8 blocks
  EXPECT_EQ(linear_bytes(WeightFormat::fp8_block, 200, 300), 60000u + 2u * 3u);      // partial blocks count
  EXPECT_EQ(linear_bytes(WeightFormat::fp8_tensor, 512, 4096), 2097152u + 4u);
  EXPECT_EQ(linear_bytes(WeightFormat::dense, 129280, 4096), 2u * 129280u * 4096u);  // bf16
}

TEST(BenchArithmetic, DecodeStepBytesByHand) {
  const ModelConfig c = micro_config();
  const SyntheticWeights w(c, SyntheticFormat::nvfp4, 1);
  // Linear layers: per-tensor FP8 wq_a 16×64, wq_b 64×16, wkv 32×64, wo_a 16×64, wo_b 64×16
  // (n + 4 bytes each) = 6164; shared expert 3 × (2048 + 4) = 6156; bf16 router 4×64 = 512 and
  // head 10×64 = 1280; routed experts: 3 × (1024 + 128) = 3456 per NVFP4 expert, 2 expected.
  // f32 tensors: hc fn 2 × 24×256, bases 48, scales 6, attn/ffn norms 128, sinks 2, q_norm 16,
  // kv_norm 32, router bias 4, hc_head fn 1024, base 4, scale 1, norm 64 = 13617 values; and the
  // one embedding row read (64 values).
  const double weights_b1 = 6164 + 6156 + 512 + 1280 + 2 * 3456 + 4.0 * (13617 + 64);
  EXPECT_EQ(weights_b1, 75748.0);
  // fp8 KV entry: 24 e4m3 + 8 bf16 rope + one scale padded to 8 = 48 bytes; 5 stored tokens.
  const DecodeBytes b1 = decode_step_bytes(c, w.weights(), 1, 5, CacheTypes{});
  EXPECT_DOUBLE_EQ(b1.weights, weights_b1);
  EXPECT_DOUBLE_EQ(b1.kv, 5 * 48.0);
  EXPECT_DOUBLE_EQ(b1.experts_per_layer, 2.0);
  // batch 2: 3 experts expected, two embedding rows, twice the KV
  const DecodeBytes b2 = decode_step_bytes(c, w.weights(), 2, 5, CacheTypes{});
  EXPECT_DOUBLE_EQ(b2.weights, weights_b1 + 3456 + 4.0 * 64);
  EXPECT_DOUBLE_EQ(b2.kv, 2 * 5 * 48.0);
  // beyond the window only window-1 entries are read
  EXPECT_DOUBLE_EQ(decode_step_bytes(c, w.weights(), 1, 100, CacheTypes{}).kv, 7 * 48.0);
  // a step's measured routing instead of the expected count: batch 2 touching 4 experts
  const std::vector<int64_t> touched(size_t(c.n_layers), 4);
  const DecodeBytes m2 = decode_step_bytes(c, w.weights(), 2, 5, CacheTypes{}, &touched);
  EXPECT_DOUBLE_EQ(m2.weights, weights_b1 + 2 * 3456 + 4.0 * 64);
  EXPECT_DOUBLE_EQ(m2.experts_per_layer, 4.0);
  EXPECT_DOUBLE_EQ(m2.kv, b2.kv);
  const std::vector<int64_t> too_few(size_t(c.n_layers) + 1, 4);
  EXPECT_THROW(decode_step_bytes(c, w.weights(), 2, 5, CacheTypes{}, &too_few), Error);
}

TEST(BenchArithmetic, DecodeKvBytesOfCompressedLayers) {
  ModelConfig c = micro_config();
  c.n_layers = 3;
  c.compress_ratios = {0, 4, 8};  // sliding, CSA, HCA
  c.hash_routed = {false, false, false};
  c.index_topk = 2;
  // Context 20 (the new token is position 20): 7 window entries per layer = 3 × 7 × 48;
  // CSA: 21 / 4 = 5 entries, every indexer key (8 dims: 4 + 1 bytes) and the top 2 entries;
  // HCA: 21 / 8 = 2 entries.
  const double expected = 3 * 7 * 48.0 + (5 * 5.0 + 2 * 48.0) + 2 * 48.0;
  EXPECT_DOUBLE_EQ(decode_kv_bytes(c, 20, CacheTypes{}), expected);
  EXPECT_DOUBLE_EQ(decode_kv_bytes(c, 0, CacheTypes{}), 0.0);
  // f32 caches: 128-byte entries, 32-byte keys
  EXPECT_DOUBLE_EQ(decode_kv_bytes(c, 20, CacheTypes{KvCacheDtype::f32, IndexerCacheDtype::f32}),
                   3 * 7 * 128.0 + (5 * 32.0 + 2 * 128.0) + 2 * 128.0);
}

TEST(BenchArithmetic, PrefillFlopsByHand) {
  const ModelConfig c = micro_config();
  // Multiply-adds per token: wq_a 1024, wq_b 1024, wkv 2048, wo_a 1024, wo_b 1024, router 256,
  // shared 3 × 2048, routed 4 experts × 6144 × 2/4 active = 12288; two FLOPs each; the head
  // (640) once, for the last token's logits.
  const PrefillFlops f = prefill_flops(c, 3);
  EXPECT_DOUBLE_EQ(f.linear, 3 * 2.0 * 24832 + 2.0 * 640);
  // keys seen by tokens 0, 1, 2: 1 + 2 + 3; q·k and p·v: 4 FLOPs per key, head dim and head
  EXPECT_DOUBLE_EQ(f.attention, 6 * 4.0 * 2 * 32);
  EXPECT_DOUBLE_EQ(f.indexer, 0.0);

  ModelConfig csa = c;
  csa.compress_ratios = {4};
  // 9 tokens: complete entries after each (t+1)/4 = 0,0,0,1,1,1,1,2,2 (sum 8); top-1 keeps
  // 0,0,0,1,1,1,1,1,1 (6); window keys 1..8 then 8 (44).
  const PrefillFlops g = prefill_flops(csa, 9);
  EXPECT_DOUBLE_EQ(g.attention, (44 + 6) * 4.0 * 2 * 32);
  EXPECT_DOUBLE_EQ(g.indexer, 8 * 2.0 * 2 * 8);
}

TEST(BenchArithmetic, KvBytesPerMillionTokenSequenceFollowTheSpec) {
  const ModelConfig flash = synthetic_geometry("v4-flash", std::nullopt);
  const CacheTypes caches;  // fp8 KV (584-byte entries), fp4 indexer (68-byte keys)
  ASSERT_EQ(kv_entry_bytes(flash, caches.kv), 584);
  ASSERT_EQ(indexer_entry_bytes(flash, caches.indexer), 68);
  // 21 CSA layers: 2^20 / 4 entries of 584 + 68 bytes; 20 HCA: 2^20 / 128 entries of 584;
  // every one of the 43 layers a 128-entry window.
  const uint64_t expected = 21ull * 262144 * (584 + 68) + 20ull * 8192 * 584 + 43ull * 128 * 584;
  EXPECT_EQ(expected, 3688172544ull);
  EXPECT_EQ(kv_bytes_per_sequence(flash, 1 << 20, caches), expected);
  // the same as kv_layout's per-token arithmetic (what tetra info prints)
  double per_layer_sum = 0;
  for (int64_t i = 0; i < flash.n_layers; ++i) {
    const LayerKvBytes l = layer_kv_bytes(flash, i, caches.kv, caches.indexer);
    per_layer_sum += double(l.per_sequence) + l.per_token * double(1 << 20);
  }
  EXPECT_DOUBLE_EQ(per_layer_sum, double(expected));
  // a partial window holds no entry yet
  ModelConfig one = micro_config();
  one.compress_ratios = {8};
  EXPECT_EQ(kv_bytes_per_sequence(one, 15, caches), 8u * 48 + 1u * 48);
}

TEST(BenchArithmetic, SequencesThatFit) {
  // 10 shared bytes and 4 experts of 10 bytes on devices of 100
  EXPECT_EQ(sequences_that_fit(100, 1, 10, 40, 4, 7), 7);   // (100 - 50) / 7
  EXPECT_EQ(sequences_that_fit(100, 2, 10, 40, 4, 7), 10);  // each: (100 - 10 - 20) / 7, every sequence on both
  EXPECT_EQ(sequences_that_fit(100, 3, 10, 40, 4, 7), 10);  // the largest share is 2 experts
  EXPECT_EQ(sequences_that_fit(100, 4, 10, 40, 4, 7), 11);  // (100 - 10 - 10) / 7
  EXPECT_EQ(sequences_that_fit(100, 1, 10, 140, 4, 7), 0);  // the weights alone do not fit
  EXPECT_EQ(sequences_that_fit(100, 2, 10, 140, 4, 7), 2);  // (100 - 10 - 70) / 7
}

// What `tetra bench` names when a model does not fit: the layers whose weights do (20 layers of
// V4-Flash in NVFP4, 78.8 GB, loaded on an 80 GB H100 and failed at its first steps).
TEST(BenchArithmetic, LayersWithin) {
  const auto bytes = [](int64_t layers) {
    return synthetic_model_bytes(synthetic_geometry("v4-flash", layers), SyntheticFormat::nvfp4);
  };
  EXPECT_EQ(layers_within("v4-flash", SyntheticFormat::nvfp4, bytes(20)), 20);
  EXPECT_EQ(layers_within("v4-flash", SyntheticFormat::nvfp4, bytes(20) - 1), 19);
  EXPECT_EQ(layers_within("v4-flash", SyntheticFormat::nvfp4, bytes(1) - 1), 0);
  const int64_t all = synthetic_geometry("v4-flash", std::nullopt).n_layers;
  EXPECT_EQ(layers_within("v4-flash", SyntheticFormat::nvfp4, bytes(all) + 1), all);
}

TEST(BenchArithmetic, PublishedGeometries) {
  const ModelConfig flash = synthetic_geometry("v4-flash", 20);
  EXPECT_EQ(flash.n_layers, 20);
  EXPECT_EQ(flash.dim, 4096);
  EXPECT_EQ(flash.n_routed_experts, 256);
  EXPECT_EQ(flash.n_mtp_layers, 0);
  ASSERT_EQ(flash.compress_ratios.size(), 20u);
  EXPECT_EQ(flash.compress_ratios[0], 0);
  EXPECT_EQ(flash.compress_ratios[2], 4);
  EXPECT_EQ(flash.compress_ratios[19], 128);
  ASSERT_EQ(flash.hash_routed.size(), 20u);
  EXPECT_TRUE(flash.hash_routed[2]);
  EXPECT_FALSE(flash.hash_routed[3]);
  // SPEC.md's table for V4-Pro
  const ModelConfig pro = synthetic_geometry("v4-pro", std::nullopt);
  EXPECT_EQ(pro.n_layers, 61);
  EXPECT_EQ(pro.dim, 7168);
  EXPECT_EQ(pro.n_heads, 128);
  EXPECT_EQ(pro.q_lora_rank, 1536);
  EXPECT_EQ(pro.o_groups, 16);
  EXPECT_EQ(pro.o_lora_rank, 1024);
  EXPECT_EQ(pro.n_routed_experts, 384);
  EXPECT_EQ(pro.n_activated_experts, 6);
  EXPECT_EQ(pro.moe_inter_dim, 3072);
  EXPECT_EQ(pro.index_topk, 1024);
  EXPECT_DOUBLE_EQ(pro.route_scale, 2.5);
  EXPECT_EQ(pro.compress_ratios[0], 128);
  EXPECT_EQ(pro.compress_ratios[1], 128);
  EXPECT_EQ(pro.compress_ratios[2], 4);
  EXPECT_EQ(pro.compress_ratios[60], 4);
  EXPECT_EQ(pro.n_hash_layers(), 3);

  auto usage = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return e.code() == ExitCode::usage;
    }
    return false;
  };
  EXPECT_TRUE(usage([] { synthetic_geometry("v4-flash", 0); }));
  EXPECT_TRUE(usage([] { synthetic_geometry("v4-flash", 44); }));
  EXPECT_TRUE(usage([] { synthetic_geometry("v5", std::nullopt); }));
  EXPECT_TRUE(usage([] { parse_synthetic_format("fp8"); }));
}

}  // namespace
}  // namespace tetra::bench
