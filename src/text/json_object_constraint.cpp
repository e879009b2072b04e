#include "text/json_object_constraint.h"

#include <limits>

#include "core/error.h"

namespace tetra::text {

void JsonObjectConstraint::mask(std::span<float> logits) {
  const std::shared_ptr<const JsonTokenMasks::Mask> allowed = masks_->allowed(prefix_);
  bool any = false;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (id < allowed->size() && (*allowed)[id])
      any = true;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  if (!any) runtime_error("JSON mode: no token of the vocabulary continues the JSON object");
}

void JsonObjectConstraint::advance(int32_t token) {
  const bool continues = masks_->is_end_token(token)
                             ? complete()
                             : size_t(token) < masks_->vocab_size() && !masks_->token_bytes(token).empty() &&
                                   prefix_.feed(masks_->token_bytes(token));
  if (!continues)  // mask() did not allow it: the sampler broke the rule
    runtime_error("JSON mode: token ", token, " does not continue the JSON object");
}

}  // namespace tetra::text
