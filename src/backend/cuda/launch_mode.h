#pragma once
// Whether launch_early (launch.cuh) lets a kernel start before the kernel ahead of it has
// finished (programmatic dependent launch). The environment's TETRA_CUDA_PDL, 0 or 1, where it is
// set; else the build's default, the CMake option of the same name (ON: docs/cuda.md, "PDL").
// Read once per process; anything else in the variable is an error naming it.
namespace tetra::cuda {

bool early_launches();

}  // namespace tetra::cuda
