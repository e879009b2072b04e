#pragma once
// Device memory for the tensors created while a CUDA graph is recorded. Stream-ordered
// allocation inside a capture records a memory node before nearly every kernel, and a
// programmatic (early-launch) edge only links a kernel to a kernel node right before it; so
// during a capture the backend places its tensors here instead: plain device memory in chunks
// that grow as needed and stay until the backend and its graphs are gone. A tensor released
// during the capture frees its range for the next tensors of that capture or of later ones:
// graphs replay one at a time on the backend's stream, and every kernel writes its outputs only
// after the kernels before it have finished (launch.cuh), so reuse is safe. Two branches of a
// graph run side by side, so while they are recorded releases are held back (hold_releases):
// a range one branch let go may still be in use by the other.
#include <cstddef>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tetra::cuda {

class CaptureArena {
 public:
  CaptureArena() = default;
  ~CaptureArena();
  CaptureArena(const CaptureArena&) = delete;
  CaptureArena& operator=(const CaptureArena&) = delete;

  // At least `bytes` (256-byte aligned): the first free range that fits, else a new chunk.
  void* allocate(size_t bytes);
  void release(void* p);
  // Between these two, released ranges stay taken; resume_releases frees them.
  void hold_releases();
  void resume_releases();
  size_t reserved_bytes() const;

 private:
  struct Chunk {
    std::byte* base = nullptr;
    size_t size = 0;
    std::map<size_t, size_t> free;  // offset → length, neighbours merged
  };
  struct Placement {
    size_t chunk = 0, offset = 0, length = 0;
  };
  static constexpr size_t kAlignment = 256;
  static constexpr size_t kMinChunk = size_t(64) << 20;

  void release_locked(void* p);

  mutable std::mutex mutex_;
  bool holding_ = false;
  std::vector<void*> held_;
  std::vector<Chunk> chunks_;
  std::unordered_map<const void*, Placement> live_;
};

}  // namespace tetra::cuda
