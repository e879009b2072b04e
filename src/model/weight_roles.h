#pragma once
// The tensors a DeepSeek-V4 checkpoint must hold for a given config, by canonical (official)
// name, with their logical shapes.
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/config.h"

namespace tetra {

enum class RoleKind {
  linear,  // "<role>.weight" plus the scale tensors of its format; shape = [out, in]
  param,   // a float tensor of exactly this shape (norms, mHC, sinks, ape, router bias)
  index,   // an integer table (the hash router's tid2eid)
};

struct ExpectedRole {
  RoleKind kind;
  std::string role;
  Shape shape;
  bool optional = false;
};

// Main layers, head, and (when `with_mtp`) the MTP blocks.
std::vector<ExpectedRole> expected_roles(const ModelConfig& c, bool with_mtp);

}  // namespace tetra
