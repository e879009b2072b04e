#!/usr/bin/env bash
# For the GPU machine: Nsight Compute's view of a prefill's two largest kernels (docs/perf.md,
# twenty-ninth run): the whole-list attention of every layer and the routed experts on warpgroup
# MMA (the first MoE layer's up and down). Per kernel: throughput, occupancy, the pipes, where the
# warps wait, and the per-instruction stall samples summarised by tools/sass_regions.py. Only the
# bench's first timed prefill and its decode steps are profiled (the bench brackets them with
# cudaProfilerStart/Stop); the kernel names pick the prefill's launches. Clocks are not locked.
# Usage: tools/profile_prefill.sh [TETRA_BINARY] [OUT_DIR]
# Settings: LAYERS (4: two window-only layers, a CSA and an HCA one), PREFILL (8192).
# Writes NAME.ncu-rep, NAME.txt (the sections), NAME-regions.txt and NAME-sass.csv.gz per kernel.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tetra=${1:-build-gpu/src/tetra}
out=${2:-${OUT:-/tmp}/profile-prefill}
mkdir -p "$out"
args=(bench --synthetic v4-flash --layers "${LAYERS:-4}" --batch 1 --context 4096 --prefill "${PREFILL:-8192}" --steps 1)

# profile NAME KERNEL_REGEX COUNT: the first COUNT launches whose demangled name matches
profile() {
  local name=$1 regex=$2 count=$3
  echo "== $name: $regex, $count launches"
  ncu --profile-from-start off --clock-control none --kernel-name-base demangled -k "regex:$regex" \
    --launch-count "$count" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section SourceCounters -f -o "$out/$name" "$tetra" "${args[@]}" >"$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log"; return 1; }
  ncu --import "$out/$name.ncu-rep" --print-summary none 2>&1 | grep -vE '^ *-{5,}' | cut -c1-160 >"$out/$name.txt"
  ncu --import "$out/$name.ncu-rep" --page source --csv --print-source sass >"$out/$name-sass.csv" 2>/dev/null &&
    python3 tools/sass_regions.py "$out/$name-sass.csv" >"$out/$name-regions.txt" 2>&1
  gzip -f "$out/$name-sass.csv"
  # the headline lines of each launch
  grep -E 'mma_attention_kernel|expert_wgmma_kernel|Duration|Compute \(SM\) Throughput|Memory Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|L2 Hit Rate|Registers Per' \
    "$out/$name.txt" | cut -c1-150
}

status=0
profile attention 'mma_attention_kernel<(false|.bool.0), (64|.int.64)' "${LAYERS:-4}" || status=1
profile experts 'expert_wgmma_kernel' 2 || status=1
exit $status
