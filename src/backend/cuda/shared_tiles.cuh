#pragma once
// Tiles in shared memory for the tensor cores: asynchronous copies from global memory
// (cp.async, no registers held while the bytes travel; groups committed and waited for) and mma.m16n8k16 fragments
// loaded from bf16 tiles (ldmatrix). Tiles of RowBytes-byte rows keep each 16-byte chunk at its index XOR the row's low
// 3 bits, so that the 8 rows one ldmatrix reads (same chunk, 8 consecutive rows) and the 8 consecutive chunks of one
// row each fall on all 32 banks once.
#include <cstdint>

namespace tetra::cuda {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <int RowBytes>
__device__ __forceinline__ uint32_t swizzled_chunk(int row, int chunk) {
  static_assert(RowBytes % 128 == 0, "rows of whole 128-byte lines");
  return uint32_t(row) * RowBytes + (uint32_t(chunk ^ (row & 7)) << 4);
}

// 8 bytes from global to shared memory (both 8-byte aligned), in flight until cp_async_wait_all.
__device__ __forceinline__ void cp_async_8(uint32_t shared, const void* global) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(shared), "l"(global) : "memory");
}
// 16 bytes (both 16-byte aligned), bypassing L1; or, when !valid, 16 zeros written and nothing read.
__device__ __forceinline__ void cp_async_16(uint32_t shared, const void* global, bool valid = true) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared), "l"(global), "r"(valid ? 16 : 0)
               : "memory");
}
// Bytes = 4 or 8 the same way, through L1.
template <int Bytes>
__device__ __forceinline__ void cp_async_small(uint32_t shared, const void* global, bool valid = true) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(shared), "l"(global), "n"(Bytes),
               "r"(valid ? Bytes : 0)
               : "memory");
}
// One group per commit: the copies issued since the last one.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// This thread's copies have landed (other threads' need a barrier after their own wait).
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }
// All but the Pending most recent of this thread's groups have landed.
template <int Pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}

// Barriers in shared memory (mbarrier, 8 bytes at a shared address) that count arrivals per
// phase: a phase completes when `count` arrivals have come, and the barrier starts the next.
__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(barrier), "r"(count) : "memory");
}
// One arrival, once all of this thread's cp.async copies issued so far have landed (`count` at
// init includes these arrivals).
__device__ __forceinline__ void cp_async_arrive(uint32_t barrier) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(barrier) : "memory");
}
__device__ __forceinline__ void mbarrier_arrive(uint32_t barrier) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(barrier) : "memory");
}
// Until the phase of parity `parity` (0 for the first, 1 for the second, ...) has completed.
__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra retry;\n"
      "}\n" ::"r"(barrier),
      "r"(parity)
      : "memory");
}

// Four 8x8 bf16 matrices; lane i gives the row address of matrix i/8, row i%8, and receives in
// r[j] the elements (i/4, 2(i%4) .. +1) of matrix j (of its transpose with _trans).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

}  // namespace tetra::cuda
