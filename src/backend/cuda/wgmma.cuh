#pragma once
// Hopper's warpgroup MMA (wgmma, sm_90a only): the four warps of a warpgroup issue one
// asynchronous m64nNk16 product together. Here: A (64 rows × 16 k, bf16) from registers in the
// mma.sync m16n8k16 fragment layout (warp w holds rows 16w..16w + 15) or from shared memory as B
// is; B (16 k × N columns, bf16) from shared memory, K-major rows of 128 bytes in the 128-byte
// swizzle (16-byte unit u of row r stored at unit u ^ (r % 8); 8-row groups 1024 bytes apart,
// the tile 1024-byte aligned), f32 accumulators in the mma.sync C layout repeated over the N / 8
// n-tiles of 8 columns.
// The rules the PTX ISA sets: wgmma_fence() before a product whose A or accumulator registers
// were written since the last one; the A registers and accumulators stay untouched until a
// wgmma_wait() covers the product's group; shared memory written by threads needs
// fence_shared_for_async() (and a barrier) before a product reads it.
#include <cstdint>

namespace tetra::cuda {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TETRA_WGMMA 1
#else
#define TETRA_WGMMA 0
#endif

__device__ __forceinline__ void wgmma_fence() {
#if TETRA_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit() {
#if TETRA_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most Pending committed groups of this warpgroup are still running.
template <int Pending>
__device__ __forceinline__ void wgmma_wait() {
#if TETRA_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(Pending) : "memory");
#endif
}
__device__ __forceinline__ void fence_shared_for_async() {
#if TETRA_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// A barrier of this thread's warpgroup alone, of the first two: named barrier 1 + its index (0 is
// __syncthreads'), constant so that ptxas reserves three barriers, not all sixteen.
__device__ __forceinline__ void warpgroup_barrier() {
  if (threadIdx.x < 128) asm volatile("bar.sync 1, 128;\n" ::: "memory");
  else asm volatile("bar.sync 2, 128;\n" ::: "memory");
}

// Keeps the compiler from moving accesses of these registers across the asynchronous products.
template <int N>
__device__ __forceinline__ void wgmma_hold(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The shared-memory descriptor of a 128-byte-swizzled K-major operand whose rows start at a
// given address (the start advances by 32 bytes per k-step of 16 inside a row): start >> 4, the
// leading offset unused (1), 1024 bytes between 8-row groups, swizzle mode 1 (128 bytes). Kernels
// compute the low word (start and leading offset) once per tile and step it with
// swizzle128_descriptor_at: building each descriptor from its address cost ~6 uniform
// instructions a product.
__device__ __forceinline__ uint32_t swizzle128_low_word(uint32_t address) { return ((address & 0x3FFFF) >> 4) | (1u << 16); }
// The descriptor of the operand `bytes` (a multiple of 16) after the one whose low word is given:
// the start field is bits 0-13, and shared-memory addresses stay below 2^18, so the sum never
// carries out of it.
__device__ __forceinline__ uint64_t swizzle128_descriptor_at(uint32_t low_word, uint32_t bytes) {
  return (uint64_t((1024 >> 4) | (1u << 30)) << 32) | (low_word + (bytes >> 4));
}

// d[N / 2] += A (registers a[4]) · B (descriptor b): m64nNk16 (N = 64 or 128), bf16 inputs, f32
// accumulators.
template <int N>
__device__ __forceinline__ void wgmma_bf16(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b) {
  static_assert(N == 64 || N == 128, "the instances written out");
#if TETRA_WGMMA
  if constexpr (N == 128)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
        "%23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
        "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
          "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
          "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
          "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
          "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
  else if constexpr (N == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, "
        "%23, %24, %25, %26, %27, %28, %29, %30, %31}, "
        "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));
#else
  __trap();
#endif
}

// d[N / 2] += A (descriptor a: 64 rows × 16 k) · B (descriptor b): m64nNk16 with both operands in
// shared memory (N = 16, 32 or 64), bf16 inputs, f32 accumulators. A is K-major like B, or with
// TransA M-major: the 64 rows are the 64 values of a 128-byte row, the 16 k two 8-row groups
// 1024 bytes apart (the same descriptor fields, so the same tile serves as A and as Aᵀ).
template <int N, bool TransA = false>
__device__ __forceinline__ void wgmma_bf16_ss(float (&d)[N / 2], uint64_t a, uint64_t b) {
  static_assert(N == 16 || N == 32 || N == 64, "the instances written out");
#if TETRA_WGMMA
  if constexpr (N == 16)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
        : "l"(a), "l"(b), "r"(1), "n"(TransA ? 1 : 0));
  else if constexpr (N == 32)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, %19, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
        : "l"(a), "l"(b), "r"(1), "n"(TransA ? 1 : 0));
  else if constexpr (N == 64)
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, "
        "%21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, %35, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
          "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
          "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
          "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "l"(a), "l"(b), "r"(1), "n"(TransA ? 1 : 0));
#else
  __trap();
#endif
}

}  // namespace tetra::cuda
