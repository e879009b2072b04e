#!/usr/bin/env bash
# For the GPU machine: builds tetra with the CUDA backend for the local GPU (sm_90a unless
# TETRA_CUDA_ARCHS says otherwise), then runs, each under its own time limit:
#   the GPU tests (verbose: they print their measured numbers), every other test unless
#   TETRA_GPU_ONLY=1, the demo model on CUDA against the CPU (tools/cuda_demo_parity.sh), the
#   server's end-to-end tests against `tetra serve --device cuda`, and compute-sanitizer's
#   memcheck and racecheck over every GPU test (tools/sanitize_gpu_tests.sh);
# (the benchmarks are scripts/bench-h200.sh's)
# and prints a summary table last. Logs go to $OUT (or /tmp) as gpu-test.log.
# Dependencies the machine lacks come from .gpu_carry and .gpu_node when present
# (tools/pack_gpu_deps.sh). TETRA_SKIP_BUILD=1 reuses build-gpu/ from an earlier call;
# TETRA_GPU_PART=tests or =sanitize runs only the tests, or only the sanitizers
# (to split the work over calls of a limited length); TETRA_SANITIZER_JOBS, _JOB_SECONDS and
# _SHARDS tune tools/sanitize_gpu_tests.sh.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH
log=${OUT:-/tmp}/gpu-test.log
: >"$log"
if [ -d .gpu_carry/deps/usr ]; then
  export CMAKE_PREFIX_PATH=$PWD/.gpu_carry/deps/usr
fi
if ! command -v node >/dev/null && [ -f .gpu_node/node.xz ]; then
  mkdir -p /tmp/tetra-node && xz -dc .gpu_node/node.xz >/tmp/tetra-node/node && chmod +x /tmp/tetra-node/node
  mkdir -p tests/node/node_modules && cp -r --update=none .gpu_node/node_modules/openai tests/node/node_modules/
fi
[ -x /tmp/tetra-node/node ] && export PATH=/tmp/tetra-node:$PATH

summary=()
# step NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output into the log (and on
# the console when STEP_ECHO=1), and records the result and the time taken.
step() {
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  echo "== $name" | tee -a "$log"
  if [ "${STEP_ECHO:-0}" = 1 ]; then
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    rc=${PIPESTATUS[0]}
  else
    timeout "$limit" "$@" >>"$log" 2>&1
    rc=$?
  fi
  local result=ok
  [ "$rc" -eq 124 ] && result="timed out after ${limit}s"
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && result="FAILED (exit $rc)"
  summary+=("$(printf '%-44s %-24s %5ss' "$name" "$result" $((SECONDS - start)))")
  return "$rc"
}

# BUILD_TESTING named: scripts/bench-h200.sh leaves it off in the same build directory's cache
build="cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON -DBUILD_TESTING=ON \
  -DCMAKE_CUDA_ARCHITECTURES=${TETRA_CUDA_ARCHS:-90a} && ninja -C build-gpu"
[ "${TETRA_SKIP_BUILD:-0}" = 1 ] || step build 900 bash -c "$build" || { tail -50 "$log"; echo "build failed"; exit 1; }

part=${TETRA_GPU_PART:-all}
if [ "$part" != sanitize ]; then
  step "GPU tests" 600 ctest --test-dir build-gpu --output-on-failure -L gpu -V
  grep -E "^[0-9]+: (f32|bf16|tetra logits|device:)|FAILED|Failure|Expected|Which is|Skipped" "$log" | grep -v "^--" | head -60
  if [ "${TETRA_GPU_ONLY:-0}" != 1 ]; then
    # 8 tests at once, each with its share of the cores (libgomp's spinning waits make
    # oversubscribed OpenMP processes crawl)
    step "CPU tests" 900 env OMP_NUM_THREADS=$(($(nproc) / 8 > 0 ? $(nproc) / 8 : 1)) \
      ctest --test-dir build-gpu --output-on-failure -j 8 -LE "slow|gpu"
    step "slow CPU tests" 900 ctest --test-dir build-gpu --output-on-failure -L slow -LE gpu -E "server\."
  fi
  STEP_ECHO=1 step "demo model: cuda vs cpu" 600 env TETRA=build-gpu/src/tetra tools/cuda_demo_parity.sh
  server_tests="serving_model|server\\.curl"
  command -v node >/dev/null && server_tests="serving_model|server\\..*" ||
    summary+=("$(printf '%-44s %s' "server.openai_sdk" "skipped: no node (tools/pack_gpu_deps.sh packs one)")")
  step "server e2e, serve --device cuda" 600 env TETRA_SERVE_ARGS="--device cuda" \
    ctest --test-dir build-gpu --output-on-failure -R "^($server_tests)\$"
fi

if [ "$part" = tests ]; then
  summary+=("$(printf '%-44s %s' "compute-sanitizer" "not run: TETRA_GPU_PART=tests")")
elif command -v compute-sanitizer >/dev/null; then
  STEP_ECHO=1 step "compute-sanitizer: memcheck + racecheck, every GPU test" 590 \
    tools/sanitize_gpu_tests.sh build-gpu "${OUT:-/tmp}/sanitizer" "${TETRA_SANITIZER_JOBS:-0}" \
    "${TETRA_SANITIZER_JOB_SECONDS:-480}" "${TETRA_SANITIZER_SHARDS:-0}"
else
  summary+=("$(printf '%-44s %s' "compute-sanitizer" "skipped: not installed")")
fi

echo
echo "== summary =="
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /'
grep -E "Test +#[0-9]+: .*(Failed|Timeout|Exception)" "$log" | sed 's/^/failed test: /'
grep -E "tests passed" "$log"
printf '%s\n' "${summary[@]}"
