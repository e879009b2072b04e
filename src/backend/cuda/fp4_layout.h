#pragma once
// How FP4 (e2m1) weights lie in device memory. The checkpoint packs two codes a byte, code i in
// bits 4i..4i+3 of a little-endian 32-bit word; the tensor-core decoders turn a word into four
// bf16 pairs, pair n holding codes n (low half) and n + 4 (high half): the code's sign at bit 15
// of its half and its magnitude bits (e1 e0 m) at 8..6 (bf16_codes.cuh). From the checkpoint's
// order that takes 15 integer operations a word. upload_linear (dequantize.cu) therefore
// rewrites every word once, in place, so that in each half pair n keeps (s, e1, e0, m) at
//   n = 0: 15, 8, 7, 6      the pair is the word under one mask
//   n = 1: 12, 5, 4, 3      shifted left 3, masked
//   n = 2:  9, 2, 1, 0      shifted left 6, masked
//   n = 3: 14, 13, 11, 10   sign left 1, e1 right 5, e0 and m right 4
// 11 operations a word. The bytes and their count stay as they were; decoders that read codes
// one by one (dequantization, the generic kernels) restore a word with fp4_unrepack first.
// Plain C++ as well, for the CPU tests of the layout.
#include <cstdint>

#if defined(__CUDACC__)
#define TETRA_FP4_HD __host__ __device__ __forceinline__
#else
#define TETRA_FP4_HD inline
#endif

namespace tetra::cuda {

// The checkpoint's codes n and n + 4 of w (n in 0..3) as a bf16 pair of value·2^-126.
TETRA_FP4_HD constexpr uint32_t fp4_pair(uint32_t w, int n) {
  const uint32_t sign = (w << (12 - 4 * n)) & 0x80008000u;
  const uint32_t mag = (n < 2 ? w << (6 - 4 * n) : w >> (4 * n - 6)) & 0x01C001C0u;
  return sign | mag;
}

// A checkpoint word in the device layout.
TETRA_FP4_HD constexpr uint32_t fp4_repack(uint32_t w) {
  return ((w << 6) & 0x01C001C0u) | ((w << 12) & 0x80008000u)    // codes 0, 4
         | ((w >> 1) & 0x00380038u) | ((w << 5) & 0x10001000u)   // codes 1, 5
         | ((w >> 8) & 0x00070007u) | ((w >> 2) & 0x02000200u)   // codes 2, 6
         | ((w >> 2) & 0x0C000C00u) | ((w >> 1) & 0x60006000u);  // codes 3, 7
}

// fp4_repack's inverse: the checkpoint's word.
TETRA_FP4_HD constexpr uint32_t fp4_unrepack(uint32_t r) {
  return ((r >> 6) & 0x00070007u) | ((r >> 12) & 0x00080008u)    // codes 0, 4
         | ((r << 1) & 0x00700070u) | ((r >> 5) & 0x00800080u)   // codes 1, 5
         | ((r << 8) & 0x07000700u) | ((r << 2) & 0x08000800u)   // codes 2, 6
         | ((r << 2) & 0x30003000u) | ((r << 1) & 0xC000C000u);  // codes 3, 7
}

// fp4_pair of the checkpoint word that r holds in the device layout (n a constant after unrolling).
TETRA_FP4_HD constexpr uint32_t fp4_packed_pair(uint32_t r, int n) {
  switch (n) {
    case 0: return r & 0x81C081C0u;
    case 1: return (r << 3) & 0x81C081C0u;
    case 2: return (r << 6) & 0x81C081C0u;
    default: return ((r << 1) & 0x80008000u) | ((r >> 5) & 0x01000100u) | ((r >> 4) & 0x00C000C0u);
  }
}

#if defined(__CUDACC__)
// Code k of a device-layout FP4 buffer (k counts from the buffer's start, as the checkpoint's
// codes do; the buffer is padded to whole words).
__device__ __forceinline__ uint8_t fp4_weight_code(const uint8_t* packed, int64_t k) {
  const uint32_t w = fp4_unrepack(*reinterpret_cast<const uint32_t*>(packed + (k >> 3) * 4));
  return uint8_t((w >> (4 * (k & 7))) & 0xF);
}
#endif

}  // namespace tetra::cuda
