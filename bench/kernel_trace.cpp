// A CUPTI injection library: every kernel a CUDA program runs, with its GPU start and end times,
// written as CSV at exit. Kernels inside CUDA graphs are recorded one by one (concurrent-kernel
// tracing keeps their overlap), so a graph-replayed decode step shows which kernels ran side by
// side and where the GPU waited, which Nsight Compute (one kernel at a time) cannot show and the
// GPU machine has no Nsight Systems for.
//   CUDA_INJECTION64_PATH=build-gpu/bench/libtetra_kernel_trace.so TETRA_KERNEL_TRACE=trace.csv PROGRAM...
// Columns: launch (the correlation id of the API call that launched it: one per graph launch),
// stream, start_ns, end_ns, grid, block, registers, shared bytes, the mangled name.
// tools/kernel_timeline.py reads the file.
#include <cupti.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

namespace {

constexpr size_t kBufferBytes = 8 << 20;

// The output file, opened at injection and closed after the last flush at exit. The driver calls
// the injection entry point once per process; CUPTI's callbacks reach the file only through here.
struct TraceFile {
  std::mutex mutex;
  FILE* file = nullptr;
};
TraceFile& trace() {
  static TraceFile t;
  return t;
}

void report(const char* what, CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  std::fprintf(stderr, "tetra kernel trace: %s failed: %s\n", what, text ? text : "unknown error");
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  std::unique_ptr<uint8_t, decltype(&std::free)> owned(buffer, &std::free);
  TraceFile& t = trace();
  std::lock_guard lock(t.mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !t.file) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::fprintf(t.file, "%u,%u,%llu,%llu,%dx%dx%d,%dx%dx%d,%u,%d,%s\n", k->correlationId, k->streamId,
                 static_cast<unsigned long long>(k->start), static_cast<unsigned long long>(k->end), k->gridX,
                 k->gridY, k->gridZ, k->blockX, k->blockY, k->blockZ, unsigned(k->registersPerThread),
                 k->staticSharedMemory + k->dynamicSharedMemory, k->name ? k->name : "?");
  }
  size_t dropped = 0;
  if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS && dropped > 0)
    std::fprintf(stderr, "tetra kernel trace: %zu records dropped\n", dropped);
}

void flush_at_exit() {
  if (const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); r != CUPTI_SUCCESS)
    report("cuptiActivityFlushAll", r);
  TraceFile& t = trace();
  std::lock_guard lock(t.mutex);
  if (t.file) std::fclose(t.file);
  t.file = nullptr;
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library; nonzero is success.
extern "C" __attribute__((visibility("default"))) int InitializeInjection() {
  const char* path = std::getenv("TETRA_KERNEL_TRACE");
  if (!path || !*path) path = "kernel_trace.csv";
  TraceFile& t = trace();
  t.file = std::fopen(path, "w");
  if (!t.file) {
    std::fprintf(stderr, "tetra kernel trace: cannot write %s: %s\n", path, std::strerror(errno));
    return 0;
  }
  std::fprintf(t.file, "launch,stream,start_ns,end_ns,grid,block,registers,shared_bytes,name\n");
  if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    report("cuptiActivityRegisterCallbacks", r);
    return 0;
  }
  if (const CUptiResult r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); r != CUPTI_SUCCESS) {
    report("cuptiActivityEnable(CONCURRENT_KERNEL)", r);
    return 0;
  }
  std::atexit(flush_at_exit);
  std::fprintf(stderr, "tetra kernel trace: writing %s\n", path);
  return 1;
}
