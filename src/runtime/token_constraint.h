#pragma once
// A rule on which tokens may come next (e.g. JSON mode): the sampler masks the logits with it
// before drawing and tells it each token drawn. Each sequence has its own, since it holds where
// that sequence's output stands. A step's sequences sample side by side (one thread each at a
// time): what constraints share must be safe to use from several threads.
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace tetra {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets to -inf the logits of the tokens that may not come next; throws a runtime error when
  // no token may (a sampled token must always obey the rule).
  virtual void mask(std::span<float> logits) = 0;
  // Takes `token`, one mask() allowed, as the next of the output.
  virtual void advance(int32_t token) = 0;
  // Whether the output is finished by the rule: the sequence ends there.
  virtual bool complete() const = 0;
};

// Makes one sequence's constraint: a request with n choices makes n.
using MakeTokenConstraint = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace tetra
