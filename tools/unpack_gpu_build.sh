# Sourced by the GPU machine's scripts (tools/ab_gpu.sh, tools/trace_decode.sh,
# scripts/bench-h200.sh): a build that tools/pack_gpu_build.sh packed here, unpacked there.
# unpack_gpu_build PACKED DEST: PACKED/src/tetra.xz (and, when packed, PACKED/bench/*.so, the kernel
# tracer, the benches PACKED/bench/*.xz and the GPU tests PACKED/tests/*.xz) into DEST/src,
# DEST/bench and DEST/tests, and the shared libraries the binary
# finds nowhere on the machine taken from PACKED/../lib.tar.xz onto LD_LIBRARY_PATH (only those:
# the machine's own come first). Returns non-zero, with a message, when something is missing.
# unpack_binary XZ OUT: the packed executable XZ, decompressed to OUT.
unpack_binary() {
  xz -dc "$1" >"$2" && chmod +x "$2"
}
unpack_gpu_build() {
  local packed=$1 dest=$2 b=$2/src/tetra missing libs lib
  [ -f "$packed/src/tetra.xz" ] || { echo "unpack_gpu_build: no $packed/src/tetra.xz" >&2; return 1; }
  mkdir -p "$dest/src"
  unpack_binary "$packed/src/tetra.xz" "$b" || return 1
  if [ -d "$packed/bench" ]; then
    mkdir -p "$dest/bench"
    cp "$packed"/bench/*.so "$dest/bench/" || return 1
  fi
  local dir xz
  for dir in bench tests; do
    for xz in "$packed/$dir"/*.xz; do
      [ -f "$xz" ] || continue
      mkdir -p "$dest/$dir"
      unpack_binary "$xz" "$dest/$dir/$(basename "$xz" .xz)" || return 1
    done
  done
  missing=$(ldd "$b" 2>/dev/null | awk '/not found/ {print $1}')
  [ -n "$missing" ] || return 0
  libs=$(dirname "$packed")/lib.tar.xz
  [ -f "$libs" ] || { echo "unpack_gpu_build: $b needs $missing, and there is no $libs" >&2; return 1; }
  mkdir -p /tmp/tetra-packed-lib/all /tmp/tetra-packed-lib/missing
  tar -xJf "$libs" -C /tmp/tetra-packed-lib/all --strip-components=1 || return 1
  for lib in $missing; do cp "/tmp/tetra-packed-lib/all/$lib" /tmp/tetra-packed-lib/missing/ || return 1; done
  case ":${LD_LIBRARY_PATH:-}:" in
    *:/tmp/tetra-packed-lib/missing:*) ;;
    *) export LD_LIBRARY_PATH=/tmp/tetra-packed-lib/missing${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;;
  esac
  echo "$(basename "$packed"): the packed $missing on the library path"
}
