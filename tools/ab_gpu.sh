#!/usr/bin/env bash
# For the GPU machine: the tree as it is (variant A) against the same tree with each patch applied
# (B, C, ...: one patch each, not cumulative), built in one build directory (a variant rebuilds
# only what its patch touches) and measured back to back on the same card, in one device call.
# Per variant: the GPU tests (patched variants; TETRA_AB_TESTS=2: A too, 0: none), `tetra bench`
# (20 layers of V4-Flash, batch 1 and 32 at 4k, a prefill of 8192), the linear, small-ops,
# attention and indexer kernel benches. Logs and JSON go to /tmp/tetra-ab/<variant>/, packed
# into $OUT/ab.tar.gz after each variant when $OUT is set (a device call returns only a few
# files); a table of the headline figures comes last. Make a patch here with `git diff main...BRANCH > .gpu_carry/x.patch`.
# Usage: tools/ab_gpu.sh [PATCH...]
# Settings: TETRA_AB_LAYERS (20), TETRA_AB_CONTEXTS ("4096"; e.g. "4096 1048575"), TETRA_AB_PREFILL
# (8192; 0 for none), TETRA_AB_TESTS (1).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
[ -d .gpu_carry/deps/usr ] && export CMAKE_PREFIX_PATH=$PWD/.gpu_carry/deps/usr
out=/tmp/tetra-ab
rm -rf "$out"
tests=${TETRA_AB_TESTS:-1}
layers=${TETRA_AB_LAYERS:-20} prefill=${TETRA_AB_PREFILL:-8192} contexts=${TETRA_AB_CONTEXTS:-4096}
patches=("$@")
for p in "${patches[@]}"; do
  [ -f "$p" ] || { echo "no such patch: $p" >&2; exit 2; }
  patch -p1 --dry-run -s <"$p" >/dev/null || { echo "$p does not apply to this tree" >&2; exit 2; }
done

cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${TETRA_CUDA_ARCHS:-90a}" >/dev/null || exit 1

# measure NAME: build, (tests), benches into $out/NAME
measure() {
  local name=$1 dir=$out/$1 start=$SECONDS
  mkdir -p "$dir"
  ninja -C build-gpu >"$dir/build.log" 2>&1 || { echo "$name: build failed"; tail -20 "$dir/build.log"; return 1; }
  echo "== $name built in $((SECONDS - start)) s"
  if { [ "$name" != A ] && [ "$tests" -ge 1 ]; } || [ "$tests" = 2 ]; then
    ctest --test-dir build-gpu -L gpu --output-on-failure >"$dir/gpu-tests.log" 2>&1
    grep -E "tests passed|Failed|FAILED" "$dir/gpu-tests.log" | head -12
  fi
  local prefill_args=()
  [ "$prefill" -gt 0 ] && prefill_args=(--prefill "$prefill")
  # shellcheck disable=SC2086  # the context list is meant to split
  timeout 150 build-gpu/src/tetra bench --synthetic v4-flash --layers "$layers" --batch 1 32 --context $contexts \
    "${prefill_args[@]}" --steps 5 --json "$dir/tetra.json" >"$dir/tetra.log" 2>&1 || echo "$name: tetra bench failed"
  timeout 60 build-gpu/bench/tetra_cuda_linear_bench --json "$dir/linear.json" >"$dir/linear.txt" 2>&1
  timeout 60 build-gpu/bench/tetra_cuda_small_ops_bench >"$dir/small_ops.txt" 2>&1
  timeout 60 build-gpu/bench/tetra_cuda_attention_bench --json "$dir/attn.json" >"$dir/attn.txt" 2>&1
  timeout 60 build-gpu/bench/tetra_cuda_indexer_bench >"$dir/indexer.txt" 2>&1
  echo "== $name measured at $SECONDS s"
  [ -n "${OUT:-}" ] && tar -czf "$OUT/ab.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
  return 0
}

measure A
names=(A)
letters=(B C D E F G H I J K)
i=0
for p in "${patches[@]}"; do
  name=${letters[i]}
  echo "$name = $p" >>"$out/variants.txt"  # before measuring: the variant's archive carries it
  patch -p1 -s <"$p" || exit 1
  measure "$name"
  patch -p1 -R -s <"$p" || exit 1
  names+=("$name")
  i=$((i + 1))
done

python3 - "$out" "${names[@]}" <<'PY'
import json, os, re, sys
out, names = sys.argv[1], sys.argv[2:]
def tetra(name):
    try:
        d = json.load(open(os.path.join(out, name, "tetra.json")))
    except (OSError, ValueError):
        return {}
    r = {f"b{s['batch']} at {s['context']} ms": s["step_seconds"] * 1e3 for s in d.get("decode", []) if s.get("step_seconds")}
    if d.get("prefill") and d["prefill"].get("seconds"):
        r["prefill s"] = d["prefill"]["seconds"]
    return r
def summary(name):
    try:
        text = open(os.path.join(out, name, "linear.txt")).read()
    except OSError:
        return {}
    r = {}
    m = re.search(r"gemm_m1_min_bw_fraction=([\d.]+)", text)
    if m:
        r["gemm m1 min bw"] = float(m.group(1))
    # two rows that moved most with past kernel changes: fp8 wq_b at M = 1, the NVFP4 experts of one token
    m = re.search(r"^attn\.wq_b \[\S+\]\s+fp8_block\s+[\d.]+\s+1\s+([\d.]+)", text, re.M)
    if m:
        r["fp8 wq_b m1 us"] = float(m.group(1))
    m = re.search(r"^nvfp4\s+1\s+([\d.]+)", text, re.M)
    if m:
        r["experts nvfp4 n1 us"] = float(m.group(1))
    return r
def attention(name):
    try:
        return {"attn 1M bw": json.load(open(os.path.join(out, name, "attn.json")))["attn_1m_bw_fraction"]}
    except (OSError, ValueError, KeyError):
        return {}
rows = {n: {**tetra(n), **summary(n), **attention(n)} for n in names}
keys = sorted({k for r in rows.values() for k in r})
print(f"{'':24s}" + "".join(f"{n:>12s}" for n in names))
for k in keys:
    print(f"{k:24s}" + "".join(f"{rows[n].get(k, float('nan')):12.4g}" for n in names))
PY
[ -f "$out/variants.txt" ] && cat "$out/variants.txt"
