#!/usr/bin/env bash
# Configures and builds tetra into build/ (CUDA backend included when nvcc is present).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda=ON
if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "build: no nvcc found; building without the CUDA backend" >&2
  cuda=OFF
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTETRA_CUDA=$cuda >/dev/null
ninja -C build
