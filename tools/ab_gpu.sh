#!/usr/bin/env bash
# For the GPU machine: the tree as it is (variant A) against the same tree with each patch applied
# (B, C, ...: one patch each, not cumulative), measured on the same card in one device call.
# Each variant builds in a tree of its own (A in build-gpu/, which an earlier call may have left;
# the others in copies under /tmp/tetra-ab-src, built at the same time), then the benchmarks run
# in rounds, every variant once a round (A B C A B C ...): the card drifts by a few per cent
# within a call, and a variant measured only after A reads that drift as its own.
# Per variant: the GPU tests (patched variants; TETRA_AB_TESTS=2: A too, 0: none, "B D": those); per
# variant and round: `tetra bench` (20 layers of V4-Flash, batch 1 and 32 at 4k, a prefill of 8192),
# the linear (graph-timed, M = 1), small-ops, attention and indexer kernel benches. Logs and JSON go
# to /tmp/tetra-ab/<variant>/<round>/, packed into $OUT/ab.tar.gz after each round when $OUT is set
# (a device call returns only a few files); a table of the headline figures (with the indexer's and
# the small ops' one-row times), each round's and their mean, then whether each variant's logits
# equal A's bit for bit (tetra bench's digests), come last. Make a patch here with
# `git diff main...BRANCH > .gpu_carry/x.patch`. A variant given as env:NAME=VALUE[,NAME=VALUE...]
# is A's build run with those environment variables (its tests and benchmarks), e.g.
# env:TETRA_CUDA_PDL=1 for the early launches: no second build. A variant given as bin:DIR is a
# `tetra` built on the development machine (tools/pack_gpu_build.sh NAME [PATCH] packs it as
# DIR=.gpu_carry/bin/NAME), and TETRA_AB_A=bin:DIR makes A one too: nothing is built for those, so
# a call short of device time spends none on builds; they run `tetra bench` and the kernel
# benchmarks packed with it (linear, attention), no GPU tests (ctest needs a build tree).
# Usage: tools/ab_gpu.sh [PATCH | env:NAME=VALUE... | bin:DIR]...
# Settings: TETRA_AB_LAYERS (20), TETRA_AB_CONTEXTS ("4096"; e.g. "4096 1048575"), TETRA_AB_PREFILL
# (8192; 0 for none), TETRA_AB_TESTS (1), TETRA_AB_ROUNDS (2), TETRA_AB_BENCHES (which of
# "tetra linear small_ops attention indexer" run; all by default), TETRA_AB_SASS ("SOURCE REGEX":
# the loops of those kernels of src/backend/cuda/SOURCE.cu in each variant, before the benchmarks).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
[ -d .gpu_carry/deps/usr ] && export CMAKE_PREFIX_PATH=$PWD/.gpu_carry/deps/usr
out=/tmp/tetra-ab src=/tmp/tetra-ab-src
rm -rf "$out" "$src" /tmp/tetra-ab-bin
. tools/unpack_gpu_build.sh
mkdir -p "$out"
tests=${TETRA_AB_TESTS:-1} rounds=${TETRA_AB_ROUNDS:-2}
benches=" ${TETRA_AB_BENCHES:-tetra linear small_ops attention indexer} "
layers=${TETRA_AB_LAYERS:-20} prefill=${TETRA_AB_PREFILL:-8192} contexts=${TETRA_AB_CONTEXTS:-4096}
variants=()  # a patch's absolute path, env:NAME=VALUE,... or bin:DIR (DIR absolute)
for p in "$@"; do
  if [[ $p == bin:?* ]]; then
    variants+=("bin:$(realpath "${p#bin:}")")
    continue
  fi
  if [[ $p == env:?*=* ]]; then
    variants+=("$p")
    continue
  fi
  [ -f "$p" ] || { echo "no such patch: $p" >&2; exit 2; }
  patch -p1 --dry-run -s <"$p" >/dev/null || { echo "$p does not apply to this tree" >&2; exit 2; }
  variants+=("$(realpath "$p")")
done
# An earlier call's objects of a file a patch changes are newer than the copied tree: touch them
# (-c: a file the patch creates stays absent, or the copies would hold it empty).
for p in "${variants[@]}"; do
  [[ $p == env:* || $p == bin:* ]] || grep '^+++ b/' "$p" | sed 's|^+++ b/||' | xargs -r touch -c
done

# configure_and_build NAME ROOT BUILD_DIR: the build log in $out/NAME/build.log. Only what the call
# runs is built: tetra, the kernel benchmarks it runs and, for a variant whose GPU tests run, the
# GPU tests' binaries (the gpu_tests target): the CPU-only test binaries are about a quarter of a
# build's compile time, the benchmarks a sixth (docs/perf.md, twenty-fourth and fifth runs).
bench_targets=()
for b in $benches; do
  [ "$b" = tetra ] || bench_targets+=("tetra_cuda_${b}_bench")
done
configure_and_build() {
  local name=$1 root=$2 dir=$3 targets=(tetra "${bench_targets[@]}")
  tests_in_build "$dir" && targets+=(gpu_tests)
  mkdir -p "$out/$name"
  cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON -DBUILD_TESTING=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${TETRA_CUDA_ARCHS:-90a}" >"$out/$name/build.log" 2>&1 &&
    ninja -C "$dir" "${targets[@]}" >>"$out/$name/build.log" 2>&1
}
# runs_tests NAME: whether the variant's GPU tests run (TETRA_AB_TESTS: 1 the patched ones, 2 all,
# 0 none, or the variants' letters, e.g. "B D": ~70 s a variant, which a 600 s call may not spare)
runs_tests() {
  [ -n "${prebuilt[$1]:-}" ] && return 1  # a packed build has no ctest tree
  case "$tests" in
    0) return 1 ;;
    1) [ "$1" != A ] ;;
    2) return 0 ;;
    *) [[ " $tests " == *" $1 "* ]] ;;
  esac
}

# tests_in_build DIR: whether a variant built in DIR runs its GPU tests (an env: variant runs A's)
tests_in_build() {
  local name
  for name in "${names[@]}"; do [ "${build[$name]}" = "$1" ] && runs_tests "$name" && return 0; done
  return 1
}

names=(A)
declare -A build=([A]=$PWD/build-gpu) run_env=([A]="") prebuilt=()
if [[ ${TETRA_AB_A:-} == bin:?* ]]; then
  build[A]=$(realpath "${TETRA_AB_A#bin:}") prebuilt[A]=1
  echo "A = ${TETRA_AB_A}" >>"$out/variants.txt"
fi
letters=(B C D E F G H I J K)
for i in "${!variants[@]}"; do
  name=${letters[i]} v=${variants[i]}
  names+=("$name")
  echo "$name = $v" >>"$out/variants.txt"
  if [[ $v == bin:* ]]; then
    build[$name]=${v#bin:} prebuilt[$name]=1 run_env[$name]=""
  elif [[ $v == env:* ]]; then
    build[$name]=${build[A]}  # A's build, packed or not
    run_env[$name]=${v#env:}
    run_env[$name]=${run_env[$name]//,/ }
  else
    build[$name]=$src/$name/build-gpu
    run_env[$name]=""
  fi
done
start=$SECONDS
[ -n "${prebuilt[A]:-}" ] || configure_and_build A "$PWD" "$PWD/build-gpu" &
for i in "${!variants[@]}"; do
  name=${letters[i]}
  [[ ${variants[i]} == env:* || ${variants[i]} == bin:* ]] && continue
  mkdir -p "$src/$name"
  tar --exclude=./build-gpu --exclude=./build -cf - . | tar -xf - -C "$src/$name"
  (cd "$src/$name" && patch -p1 -s <"${variants[i]}") || exit 1
  configure_and_build "$name" "$src/$name" "${build[$name]}" &
done
wait
# Packed builds: unpacked outside the tree (which a later call carries again); every variant that
# runs a packed build (an env: variant of a packed A) then runs the unpacked one.
for name in "${!prebuilt[@]}"; do
  packed=${build[$name]}
  if [ ! -x "$packed/src/tetra" ]; then
    unpack_gpu_build "$packed" "/tmp/tetra-ab-bin/$name" || exit 1
    for other in "${names[@]}"; do [ "${build[$other]}" = "$packed" ] && build[$other]=/tmp/tetra-ab-bin/$name; done
  fi
done
for name in "${names[@]}"; do
  [ -x "${build[$name]}/src/tetra" ] || { echo "$name: build failed"; tail -20 "$out/$name/build.log"; exit 1; }
done
echo "== built in $((SECONDS - start)) s"

# TETRA_AB_SASS="SOURCE REGEX" (e.g. "moe expert_up_mma_kernelILNS_12WeightFormatE4ELi1E"): each
# variant's loops of the matching kernels of src/backend/cuda/SOURCE.cu (tools/sass_loops.py).
if [ -n "${TETRA_AB_SASS:-}" ]; then
  read -r sass_source sass_pattern <<<"$TETRA_AB_SASS"
  for name in "${names[@]}"; do
    cuobjdump -sass "${build[$name]}/src/backend/cuda/CMakeFiles/tetra_cuda.dir/$sass_source.cu.o" >"$out/$name/$sass_source.sass"
    echo "== $name: the loops of $sass_source.cu's $sass_pattern"
    python3 tools/sass_loops.py "$out/$name/$sass_source.sass" "$sass_pattern" | cut -c1-200
  done
fi

for name in "${names[@]}"; do
  if runs_tests "$name"; then
    mkdir -p "$out/$name"
    # shellcheck disable=SC2086  # NAME=VALUE words
    env ${run_env[$name]} ctest --test-dir "${build[$name]}" -L gpu --output-on-failure >"$out/$name/gpu-tests.log" 2>&1
    echo "$name: $(grep -E "tests passed|tests failed" "$out/$name/gpu-tests.log")"
  fi
done

# measure NAME ROUND: the benchmarks of one variant into $out/NAME/ROUND
measure() {
  local name=$1 dir=$out/$1/$2 b=${build[$1]}
  mkdir -p "$dir"
  local e
  read -r -a e <<<"${run_env[$1]}"
  local prefill_args=()
  [ "$prefill" -gt 0 ] && prefill_args=(--prefill "$prefill")
  if [[ $benches == *" tetra "* ]]; then
    # shellcheck disable=SC2086  # the context list is meant to split
    env "${e[@]}" timeout 150 "$b/src/tetra" bench --synthetic v4-flash --layers "$layers" --batch 1 32 --context $contexts \
      "${prefill_args[@]}" --steps 5 --json "$dir/tetra.json" >"$dir/tetra.log" 2>&1 || echo "$name: tetra bench failed: $(tail -1 "$dir/tetra.log")"
  fi
  [[ $benches == *" linear "* && -x $b/bench/tetra_cuda_linear_bench ]] &&
    env "${e[@]}" timeout 60 "$b/bench/tetra_cuda_linear_bench" --tokens 1 --timing graph --json "$dir/linear.json" >"$dir/linear.txt" 2>&1
  [[ $benches == *" small_ops "* && -x $b/bench/tetra_cuda_small_ops_bench ]] && env "${e[@]}" timeout 60 "$b/bench/tetra_cuda_small_ops_bench" >"$dir/small_ops.txt" 2>&1
  [[ $benches == *" attention "* && -x $b/bench/tetra_cuda_attention_bench ]] &&
    env "${e[@]}" timeout 60 "$b/bench/tetra_cuda_attention_bench" --json "$dir/attn.json" >"$dir/attn.txt" 2>&1
  [[ $benches == *" indexer "* && -x $b/bench/tetra_cuda_indexer_bench ]] && env "${e[@]}" timeout 60 "$b/bench/tetra_cuda_indexer_bench" >"$dir/indexer.txt" 2>&1
  return 0
}
for round in $(seq "$rounds"); do
  for name in "${names[@]}"; do measure "$name" "$round"; done
  echo "== round $round measured at $((SECONDS - start)) s"
  [ -n "${OUT:-}" ] && tar -czf "$OUT/ab.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
done

python3 - "$out" "$rounds" "${names[@]}" <<'PY'
import json, os, re, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def tetra(d):
    try:
        j = json.load(open(os.path.join(d, "tetra.json")))
    except (OSError, ValueError):
        return {}
    r = {f"b{s['batch']} at {s['context']} ms": s["step_seconds"] * 1e3 for s in j.get("decode", []) if s.get("step_seconds")}
    if j.get("prefill") and j["prefill"].get("seconds"):
        r["prefill s"] = j["prefill"]["seconds"]
    return r
def text_of(d, name):
    try:
        return open(os.path.join(d, name)).read()
    except OSError:
        return ""
def linear(d):
    text, r = text_of(d, "linear.txt"), {}
    m = re.search(r"gemm_m1_min_bw_fraction=([\d.]+)", text)
    if m:
        r["gemm m1 min bw"] = float(m.group(1))
    # rows that moved most with past kernel changes: fp8 wq_b, the experts of one token
    m = re.search(r"^attn\.wq_b \[\S+\]\s+fp8_block\s+[\d.]+\s+1\s+([\d.]+)", text, re.M)
    if m:
        r["fp8 wq_b m1 us"] = float(m.group(1))
    for fmt in ("fp8_block", "nvfp4"):
        m = re.search(rf"^{fmt}\s+1\s+([\d.]+)", text, re.M)
        if m:
            r[f"experts {fmt} n1 us"] = float(m.group(1))
    return r
def attention(d):
    try:
        return {"attn 1M bw": json.load(open(os.path.join(d, "attn.json")))["attn_1m_bw_fraction"]}
    except (OSError, ValueError, KeyError):
        return {}
def indexer(d):
    # the score pass's tensor-core time of each row of the table: "decode, 1024k context 32 rows us"
    pattern = r"^(decode, \d+k context|prefill \d+ rows, \d+k)\s+(\d+)\s+\d+\s+[\d.]+\s+([\d.]+)"
    return {f"score {m.group(1)}, {m.group(2)} rows us": float(m.group(3))
            for m in re.finditer(pattern, text_of(d, "indexer.txt"), re.M)}
def small_ops(d):
    # each op's time at one row (a decode step's): "small mhc pre + norm, 1 row us"
    pattern = r"^(\S.*?)\s+1\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+%"
    return {f"small {m.group(1).strip()}, 1 row us": float(m.group(2))
            for m in re.finditer(pattern, text_of(d, "small_ops.txt"), re.M)}
runs = {(n, k): {**tetra(f"{out}/{n}/{k}"), **linear(f"{out}/{n}/{k}"), **attention(f"{out}/{n}/{k}"),
                 **indexer(f"{out}/{n}/{k}"), **small_ops(f"{out}/{n}/{k}")}
        for n in names for k in range(1, rounds + 1)}
keys = sorted({key for r in runs.values() for key in r})
print(f"{'':44s}" + "".join(f"{n:>12s}" for n in names) + "   (mean of the rounds; each round below)")
for key in keys:
    means = []
    for n in names:
        values = [runs[n, k][key] for k in range(1, rounds + 1) if key in runs[n, k]]
        means.append(sum(values) / len(values) if values else float("nan"))
    print(f"{key:44s}" + "".join(f"{m:12.4g}" for m in means))
    for k in range(1, rounds + 1):
        print(f"{'  round ' + str(k):44s}" + "".join(f"{runs[n, k].get(key, float('nan')):12.4g}" for n in names))
# Whether each variant computes A's bits: the logits digests of tetra bench's points (each point's
# tokens are its own, so every round's digest of a point is the same in a variant that keeps them).
def digests(d):
    try:
        j = json.load(open(os.path.join(d, "tetra.json")))
    except (OSError, ValueError):
        return {}
    r = {f"b{s['batch']} at {s['context']}": s.get("logits_digest") for s in j.get("decode", [])}
    if j.get("prefill"):
        r["prefill"] = j["prefill"].get("logits_digest")
    return {k: v for k, v in r.items() if v}
for n in names:  # a variant's own rounds: the same bits every time (else the step is not deterministic)
    first = digests(f"{out}/{n}/1")
    for k in range(2, rounds + 1):
        again = digests(f"{out}/{n}/{k}")
        differ = [p for p in first if p in again and first[p] != again[p]]
        if differ:
            print(f"{n}: round {k}'s logits differ from round 1's at {', '.join(differ)}")
for n in names[1:]:
    a, b = digests(f"{out}/A/1"), digests(f"{out}/{n}/1")
    if a and b:
        differ = [k for k in a if k in b and a[k] != b[k]]
        print(f"{n}: logits " + (f"differ from A's at {', '.join(differ)}" if differ else "equal to A's bit for bit"))
PY
[ -f "$out/variants.txt" ] && cat "$out/variants.txt"
exit 0
