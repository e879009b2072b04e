#pragma once
// Checks of a quantized weight's scales before upload, for the cases the tensor-core kernels do
// not decode (host code: it runs, and is tested, without a GPU).
#include <cstddef>
#include <cstdint>

#include "model/weights.h"

namespace tetra::cuda {

// The index of the first e4m3 NaN byte (low seven bits all ones) of p[0, n), or n.
size_t first_e4m3_nan(const uint8_t* p, size_t n);

// Throws a model error naming the tensor, the row and the inputs of the first NaN NVFP4 block
// scale (0x7F, 0xFF) of w.
void check_nvfp4_scales(const LinearWeight& w);

}  // namespace tetra::cuda
