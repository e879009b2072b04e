#pragma once
// The ranks of one process that split a model's routed experts between them (expert
// parallelism, model/forward.h): each rank runs the whole forward on its own backend, holds
// some of the experts, and the ranks add up the experts' outputs here.
#include <memory>
#include <stdexcept>
#include <vector>

#include "backend/backend.h"

namespace tetra {

// What a rank's all_reduce_sum throws when another rank failed before reaching it.
struct CommAborted : std::runtime_error {
  CommAborted() : std::runtime_error("another rank of the expert-parallel group failed") {}
};

class CommGroup {
 public:
  virtual ~CommGroup() = default;
  virtual int ranks() const = 0;
  // Rank `rank`'s t (f32, in its backend's memory) becomes the element-wise sum of every rank's
  // t, added in rank order, so that every rank holds the same bits. Every rank calls it, each
  // from its own thread, with tensors of one shape.
  virtual void all_reduce_sum(int rank, Tensor& t) = 0;
  // Rank 0's t in rank `rank`'s memory: every rank calls it with rank 0's tensor (the others
  // do not read it; their copies arrive through the group).
  virtual Tensor broadcast(int rank, const Tensor& t) = 0;
  // Makes every waiting (and later) all_reduce_sum throw CommAborted: a rank that fails before
  // its part calls it so that the others do not wait forever. Once every rank has returned,
  // recover() makes the group usable again.
  virtual void abort() = 0;
  virtual void recover() = 0;
};

// Where expert parallelism places the routed experts: expert e of n_experts is held by rank
// e·ranks / n_experts (consecutive ranges), so a rank holds at most ceil(n_experts / ranks).
inline int expert_owner(int64_t e, int ranks, int64_t n_experts) { return int(e * ranks / n_experts); }
inline int64_t largest_expert_share(int64_t n_experts, int ranks) { return (n_experts + ranks - 1) / ranks; }

// A group for these backends, one rank each, in order: every backend of one kind (cpu: ranks
// that add through host memory; expert parallelism across GPUs is not built yet).
std::unique_ptr<CommGroup> make_comm_group(const std::vector<Backend*>& backends);

}  // namespace tetra
