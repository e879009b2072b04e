#pragma once
// JSON mode (OpenAI's response_format {"type": "json_object"}): the output is always a prefix of
// one JSON object, and is complete, ending the sequence, when the object closes.
#include <memory>

#include "runtime/token_constraint.h"
#include "text/json_object_prefix.h"
#include "text/json_token_masks.h"

namespace tetra::text {

class JsonObjectConstraint final : public TokenConstraint {
 public:
  explicit JsonObjectConstraint(std::shared_ptr<JsonTokenMasks> masks) : masks_(std::move(masks)) {}

  void mask(std::span<float> logits) override;
  void advance(int32_t token) override;
  bool complete() const override { return prefix_.complete(); }

 private:
  std::shared_ptr<JsonTokenMasks> masks_;
  JsonObjectPrefix prefix_;
};

}  // namespace tetra::text
