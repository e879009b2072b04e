#!/usr/bin/env bash
# Builds `tetra` for the H200 here (Release, sm_90a only) and packs it, xz-compressed, into
# .gpu_carry/bin/NAME/src/tetra.xz with the kernel tracer and the linear and attention benches beside
# it (bench/), for tools/ab_gpu.sh's bin:.gpu_carry/bin/NAME variants, TETRA_TRACE_BIN=.gpu_carry/bin/NAME
# tools/trace_decode.sh and TETRA_BENCH_PACKED=.gpu_carry/bin/NAME scripts/bench-h200.sh (issue 8's
# JSON): a device call then spends no time building (a cold device machine takes ~100 s a tree,
# which a session short of device time cannot spare). With PATCH, the tree as it is plus that patch.
# TETRA_PACK_TESTS="cuda_ops_test ...": those GPU test binaries too (tests/NAME.xz, ~7 MB each,
# unpacked by tools/unpack_gpu_build.sh and run from there); cuda_forward_test and cuda_bench_test
# find the CLI and fixtures by this build's paths (/tmp/tetra-pack/...): they run in device builds.
# One source copy and build directory (/tmp/tetra-pack) serve every NAME: a call rebuilds only the
# files that differ from the last call's tree (a patch's, for a B after an A).
# Usage: tools/pack_gpu_build.sh NAME [PATCH]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: tools/pack_gpu_build.sh NAME [PATCH]" >&2; exit 2; }
name=$1 patch=${2:-}
[[ $name =~ ^[A-Za-z0-9_-]+$ ]] || { echo "pack_gpu_build: NAME must be letters, digits, '_' or '-': $name" >&2; exit 2; }
if [ -n "$patch" ]; then
  [ -f "$patch" ] || { echo "pack_gpu_build: no such patch: $patch" >&2; exit 2; }
  patch=$(realpath "$patch")
fi
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu_carry/' "$exclude" 2>/dev/null || echo '/.gpu_carry/' >>"$exclude"

work=/tmp/tetra-pack
src=$work/src
# The tree as tracked and as edited (untracked files included), patched, in a staging copy; then
# each file whose bytes differ from the last build's copy replaces it (a fresh time), so ninja
# rebuilds only what changed, and a file a patch changed back is rebuilt too.
rm -rf "$work/stage"
mkdir -p "$work/stage" "$src"
# (a tracked file deleted here is listed but absent: skipped, not an error)
git ls-files -co --exclude-standard -z | tar --null -T - --ignore-failed-read -cf - 2>/dev/null | tar -xf - -C "$work/stage"
[ -z "$patch" ] || (cd "$work/stage" && patch -p1 -s <"$patch")
(cd "$work/stage" && find . -type f) | while read -r f; do
  cmp -s "$work/stage/$f" "$src/$f" || { mkdir -p "$(dirname "$src/$f")" && cp "$work/stage/$f" "$src/$f"; }
done
read -r -a tests <<<"${TETRA_PACK_TESTS:-}"
cmake -S "$src" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTETRA_CUDA=ON \
  -DBUILD_TESTING="$([ ${#tests[@]} -gt 0 ] && echo ON || echo OFF)" -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
ninja -C "$work/build" tetra tetra_kernel_trace tetra_cuda_linear_bench tetra_cuda_attention_bench "${tests[@]}"
packed=.gpu_carry/bin/$name
mkdir -p "$packed/src" "$packed/bench"
# pack_binary PATH: the build's PATH (relative to it), stripped and xz-compressed, to $packed/PATH.xz
pack_binary() {
  rm -f "$packed/$1.xz"
  strip -o "$packed/$1" "$work/build/$1"
  xz -T0 -6 "$packed/$1"
}
pack_binary src/tetra
pack_binary bench/tetra_cuda_linear_bench
pack_binary bench/tetra_cuda_attention_bench
rm -rf "$packed/tests"
if [ ${#tests[@]} -gt 0 ]; then
  mkdir -p "$packed/tests"
  for t in "${tests[@]}"; do pack_binary "tests/$t"; done
fi
strip -o "$packed/bench/libtetra_kernel_trace.so" "$work/build/bench/libtetra_kernel_trace.so"
# The shared libraries it needs from outside the CUDA toolkit and the C library (cpp-httplib,
# PCRE2, OpenSSL, brotli, ...): the GPU machine's image lacks some; ab_gpu.sh unpacks
# .gpu_carry/bin/lib.tar.xz onto the library path for whichever of them the machine does not have.
libs=$work/lib
rm -rf "$libs"
mkdir -p "$libs"
ldd "$work/build/src/tetra" | awk '$3 ~ /^\// {print $3}' | grep -v -e '/cuda' -e '/libc\.so' -e '/libm\.so' \
  -e '/libdl\.so' -e '/libpthread\.so' -e '/librt\.so' -e '/libgcc_s\.so' -e '/libstdc++\.so' |
  while read -r lib; do cp -L "$lib" "$libs/"; done
tar -cJf .gpu_carry/bin/lib.tar.xz -C "$work" lib
git rev-parse HEAD >"$packed/commit"
git diff --quiet HEAD -- . || echo "with uncommitted changes" >>"$packed/commit"
rm -f "$packed/patch"
[ -z "$patch" ] || basename "$patch" >"$packed/patch"
du -sh "$packed"
