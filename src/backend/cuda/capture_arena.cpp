#include "backend/cuda/capture_arena.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "backend/cuda/cuda_check.h"

namespace tetra::cuda {

CaptureArena::~CaptureArena() {
  for (Chunk& c : chunks_) cudaFree(c.base);
}

void* CaptureArena::allocate(size_t bytes) {
  const size_t length = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < chunks_.size(); ++i) {
    Chunk& c = chunks_[i];
    for (auto it = c.free.begin(); it != c.free.end(); ++it) {
      if (it->second < length) continue;
      const size_t offset = it->first, rest = it->second - length;
      c.free.erase(it);
      if (rest) c.free.emplace(offset + length, rest);
      void* p = c.base + offset;
      live_.emplace(p, Placement{i, offset, length});
      return p;
    }
  }
  Chunk c;
  c.size = std::max(length, kMinChunk);
  // cudaMalloc is refused while this thread records a stream in the strict capture modes; it
  // enqueues nothing, so allow it for this call.
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  TETRA_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  const cudaError_t status = cudaMalloc(&c.base, c.size);
  TETRA_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
  TETRA_CUDA_CHECK(status);
  if (c.size > length) c.free.emplace(length, c.size - length);
  chunks_.push_back(std::move(c));
  void* p = chunks_.back().base;
  live_.emplace(p, Placement{chunks_.size() - 1, 0, length});
  return p;
}

void CaptureArena::release(void* p) {
  std::lock_guard lock(mutex_);
  if (holding_) held_.push_back(p);
  else release_locked(p);
}

void CaptureArena::hold_releases() {
  std::lock_guard lock(mutex_);
  holding_ = true;
}

void CaptureArena::resume_releases() {
  std::lock_guard lock(mutex_);
  holding_ = false;
  for (void* p : held_) release_locked(p);
  held_.clear();
}

void CaptureArena::release_locked(void* p) {
  const auto found = live_.find(p);
  if (found == live_.end()) return;
  const Placement at = found->second;
  live_.erase(found);
  std::map<size_t, size_t>& free = chunks_[at.chunk].free;
  size_t offset = at.offset, length = at.length;
  if (auto next = free.find(offset + length); next != free.end()) {
    length += next->second;
    free.erase(next);
  }
  if (auto next = free.lower_bound(offset); next != free.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      offset = prev->first;
      length += prev->second;
      free.erase(prev);
    }
  }
  free.emplace(offset, length);
}

size_t CaptureArena::reserved_bytes() const {
  std::lock_guard lock(mutex_);
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.size;
  return total;
}

}  // namespace tetra::cuda
