#!/usr/bin/env bash
# For the GPU machine: where a synthetic decode step spends its time, kernel by kernel.
# Runs `tetra bench --synthetic` under Nsight Compute (each CUDA-graph node timed on its own,
# clocks not locked; caches flushed before each kernel, or left as the previous kernel left them
# with NCU_CACHE_CONTROL=none, nearer a real step for kernels whose inputs the previous one
# wrote) and prints the kernels by total time. Only the timed decode steps and the first timed
# prefill are recorded (the bench brackets them with cudaProfilerStart/Stop: no loading,
# ceilings or warm-ups), so per-step figures are totals / STEPS. For a prefill's table, add
# `--prefill P --steps 1`: the one batch-1 decode step left in it is ~1% of a prefill's time.
# The kernels run one at a time under the profiler: the sum is above a step's time, whose
# graph overlaps branches and launches.
# Usage: tools/profile_decode.sh [TETRA_BINARY] [bench arguments...]
set -euo pipefail
tetra=${1:-build-gpu/src/tetra}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--synthetic v4-flash --layers 4 --batch 1 --context 4096 --steps 1)
csv=$(mktemp)
ncu --profile-from-start off --graph-profiling node --clock-control none --cache-control "${NCU_CACHE_CONTROL:-all}" --metrics gpu__time_duration.sum --csv --page raw \
  --print-units base "$tetra" bench "${args[@]}" >"$csv" 2>/dev/null || true
python3 - "$csv" <<'PY'
import csv, sys, collections
rows = [l for l in open(sys.argv[1]) if l.startswith('"')]
reader = csv.DictReader(rows)
total, count = collections.Counter(), collections.Counter()
for r in reader:
    t = r.get("gpu__time_duration.sum", "")
    try:
        ns = float(t.replace(",", ""))
    except ValueError:
        continue  # the units row
    name = r["Kernel Name"]
    name = name.split("(")[0] if not name.startswith("void ") else name[5:].split("(")[0]
    total[name] += ns
    count[name] += 1
all_ns = sum(total.values())
print(f"{sum(count.values())} kernels, {all_ns / 1e6:.3f} ms in all")
print(f"{'ms':>9} {'share':>6} {'calls':>6} {'us/call':>8}  kernel")
for name, ns in total.most_common(45):
    print(f"{ns / 1e6:9.3f} {ns / all_ns:6.1%} {count[name]:6d} {ns / count[name] / 1e3:8.1f}  {name[:150]}")
PY
