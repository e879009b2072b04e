#pragma once
// The reference backend: f32 activations in host memory, weights dequantized exactly once at
// load, OpenMP over rows. Every other backend is checked against it.
#include "backend/backend.h"

namespace tetra {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace tetra
