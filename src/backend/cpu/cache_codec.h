#pragma once
// The SPEC's cache storage layouts, one entry at a time (exact; tested bit for bit).
//  KV fp8 ("fp8_ds_mla"): nope dims as e4m3 with one ue8m0 scale per 64 values
//    (scale = 2^ceil(log2(max(amax, 1e-4)/448))), rope dims as bf16; bytes: nope codes,
//    rope bf16 pairs, scale exponents padded to 8.
//  Indexer fp4: normalized Walsh-Hadamard rotation, then e2m1 with one ue8m0 scale per 32
//    (scale = 2^ceil(log2(max(amax, 6·2^-126)/6))); bytes: packed codes (low nibble first), scales.
#include <cstdint>
#include <span>

namespace tetra {

// Smallest e with 2^e >= x (x > 0), exactly.
int ceil_log2(float x);

void encode_kv_fp8(std::span<const float> row, int64_t rope_dim, std::span<uint8_t> out);
void decode_kv_fp8(std::span<const uint8_t> in, int64_t rope_dim, std::span<float> row);

void hadamard_rotate(std::span<float> v);  // in place, normalized (orthogonal); size a power of 2
void encode_indexer_fp4(std::span<const float> row, std::span<uint8_t> out);  // rotates first
void decode_indexer_fp4(std::span<const uint8_t> in, std::span<float> row);   // stays rotated

}  // namespace tetra
