#!/usr/bin/env bash
# For the GPU machine: one command for issue 8's figures. Builds tetra and the kernel
# benchmarks for the local GPU, then runs, each under its own time limit:
#   1. tetra bench --synthetic v4-flash, 20 layers, NVFP4: a prefill of 8192 tokens, and decode at
#      batch 1 and 32 at 4k, 64k and 1M context (1048575 tokens held: the new token takes the
#      last position the model has), with the measured ceilings;
#   2. the peer comparison at a layer count bf16 transformers fits on one GPU (4): tetra bench
#      and tools/transformers_baseline.py, batch-1 decode at context P and a P-token prefill;
#   3. the kernel benchmarks under bench/ (with --json where they offer it), and the small ops
#      (mHC, RMSNorm, rope) through PyTorch/transformers (tools/torch_small_ops.py);
# and writes docs/perf/h200-v4-flash.json (tools/perf_summary.py; a copy and every log and JSON
# under $OUT) and a summary table last. Settings through the environment:
#   TETRA_BENCH_LAYERS (20)  TETRA_BENCH_BATCHES ("1 32")  TETRA_BENCH_CONTEXTS ("4096 65536 1048575")
#   TETRA_BENCH_PREFILL (8192)  TETRA_BENCH_STEPS (5)  TETRA_PEER_LAYERS (4)  TETRA_PEER_PREFILL (8192)
#   TETRA_BENCH_LIMIT (seconds for step 1: 900)  TETRA_SKIP_BUILD=1 reuses build-gpu/.
#   TETRA_BENCH_KERNELS (which of step 3's kernel benchmarks run, by name: "attention indexer
#   linear prefill small_ops"; all by default; the JSON's GEMM and attention keys need "linear
#   attention")  TETRA_BENCH_TORCH (0 skips the PyTorch small ops)
#   TETRA_BENCH_PACKED=DIR: no build; tetra and the benches a development machine packed into DIR
#   (tools/pack_gpu_build.sh NAME: DIR=.gpu_carry/bin/NAME, which has the linear and attention
#   benches only), unpacked into build-gpu/.
# The JSON, then the GPU tests, demo parity and the server's e2e in one device call (the same
# form took 144 s in docs/perf.md's twenty-fourth run, with build-gpu/ already built):
#   TETRA_BENCH_CONTEXTS="4096 1048575" TETRA_BENCH_KERNELS="linear attention" TETRA_BENCH_TORCH=0 \
#     scripts/bench-h200.sh; TETRA_GPU_ONLY=1 TETRA_GPU_PART=tests scripts/gpu-test.sh
# Dependencies the machine lacks come from .gpu_carry/deps when present (tools/pack_gpu_deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
out=${OUT:-/tmp/tetra-bench}
mkdir -p "$out"
log=$out/bench-h200.log
: >"$log"
for d in .gpu_carry/deps/usr ../deps/usr; do
  [ -d "$d" ] && export CMAKE_PREFIX_PATH=${CMAKE_PREFIX_PATH:-$PWD/$d}
done
layers=${TETRA_BENCH_LAYERS:-20}
batches=${TETRA_BENCH_BATCHES:-1 32}
contexts=${TETRA_BENCH_CONTEXTS:-4096 65536 1048575}
prefill=${TETRA_BENCH_PREFILL:-8192}
steps=${TETRA_BENCH_STEPS:-5}
peer_layers=${TETRA_PEER_LAYERS:-4}
peer_prefill=${TETRA_PEER_PREFILL:-8192}
kernels=" ${TETRA_BENCH_KERNELS:-attention indexer linear prefill small_ops} "
torch=${TETRA_BENCH_TORCH:-1}

summary=()
# step NAME SECONDS COMMAND...: COMMAND under a time limit, its output on the console and in the
# log; records the result and the time taken.
step() {
  local name=$1 limit=$2 start=$SECONDS rc result=ok
  shift 2
  echo "== $name" | tee -a "$log"
  timeout "$limit" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 124 ] && result="timed out after ${limit}s"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && result="FAILED (exit $rc)"
  summary+=("$(printf '%-40s %-24s %5ss' "$name" "$result" $((SECONDS - start)))")
  return "$rc"
}

if [ -n "${TETRA_BENCH_PACKED:-}" ]; then
  . tools/unpack_gpu_build.sh
  unpack_gpu_build "$TETRA_BENCH_PACKED" build-gpu || { echo "cannot unpack $TETRA_BENCH_PACKED"; exit 1; }
elif [ "${TETRA_SKIP_BUILD:-0}" != 1 ]; then
  targets="tetra"  # and the kernel benchmarks step 3 runs
  for k in $kernels; do targets+=" tetra_cuda_${k}_bench"; done
  step build 600 bash -c "cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=${TETRA_CUDA_ARCHS:-90a} -DBUILD_TESTING=OFF >/dev/null && ninja -C build-gpu $targets" ||
    { echo "build failed"; exit 1; }
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader | tee -a "$log"
tetra=build-gpu/src/tetra

# shellcheck disable=SC2086  # the lists are meant to split
step "tetra bench v4-flash, $layers layers" "${TETRA_BENCH_LIMIT:-900}" $tetra bench --synthetic v4-flash \
  --layers "$layers" --format nvfp4 --batch $batches --context $contexts --prefill "$prefill" --steps "$steps" \
  --json "$out/tetra.json"
step "tetra bench v4-flash, $peer_layers layers (peer)" 600 $tetra bench --synthetic v4-flash \
  --layers "$peer_layers" --format nvfp4 --batch 1 --context "$peer_prefill" --prefill "$peer_prefill" \
  --steps "$steps" --json "$out/tetra_peer.json"
step "transformers bf16, $peer_layers layers" 600 python3 tools/transformers_baseline.py --synthetic v4-flash \
  --layers "$peer_layers" --prefill "$peer_prefill" --decode-steps "$steps" --json "$out/transformers.json"

kernel_json=()
for b in build-gpu/bench/tetra_cuda_*; do
  [ -x "$b" ] || continue
  name=$(basename "$b")
  short=${name#tetra_cuda_}
  [[ $kernels == *" ${short%_bench} "* ]] || continue
  # the linear layers as a decode step runs them: replayed from a CUDA graph, no host launch between calls
  extra=()
  [ "$short" = linear_bench ] && extra=(--timing graph)
  if grep -q -- '--json' "bench/${name#tetra_}".c* 2>/dev/null; then
    step "$name" 300 "$b" "${extra[@]}" --json "$out/$name.json" && kernel_json+=("$out/$name.json")
  else
    step "$name" 300 "$b" "${extra[@]}"
  fi
done

# the peer of tetra_cuda_small_ops_bench: transformers' own mHC / RMSNorm modules on the same shapes
[ "$torch" = 0 ] || step "torch small ops" 300 python3 tools/torch_small_ops.py --json "$out/torch_small_ops.json"

mkdir -p docs/perf
step "summary" 60 python3 tools/perf_summary.py --tetra "$out/tetra.json" --tetra-peer "$out/tetra_peer.json" \
  --baseline "$out/transformers.json" --kernel "${kernel_json[@]}" \
  --command "scripts/bench-h200.sh (TETRA_BENCH_LAYERS=$layers TETRA_BENCH_BATCHES='$batches' TETRA_BENCH_CONTEXTS='$contexts' TETRA_BENCH_PREFILL=$prefill TETRA_BENCH_STEPS=$steps TETRA_PEER_LAYERS=$peer_layers TETRA_PEER_PREFILL=$peer_prefill TETRA_BENCH_KERNELS='${kernels:1:-1}')" \
  --out docs/perf/h200-v4-flash.json
cp docs/perf/h200-v4-flash.json "$out/" 2>/dev/null

echo
echo "== summary =="
printf '%s\n' "${summary[@]}"
