#!/usr/bin/env bash
# The GPU machine has CUDA, CMake and ninja but none of the Debian -dev packages the build needs
# and cannot install any. This copies them (headers, static libraries, CMake package files)
# from this machine into .gpu_carry/deps/usr, a git-ignored folder that the device tool can
# carry; there, run: CMAKE_PREFIX_PATH=$PWD/.gpu_carry/deps/usr ./scripts/gpu-test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
exclude=$(git rev-parse --git-path info/exclude)  # also right in a worktree, where .git is a file
grep -qx '/.gpu_carry/' "$exclude" 2>/dev/null || echo '/.gpu_carry/' >> "$exclude"
dest=.gpu_carry/deps
rm -rf "$dest"
for pkg in nlohmann-json3-dev libgtest-dev libgmock-dev libcpp-httplib-dev libcpp-httplib0.11; do
  dpkg -L "$pkg" | while read -r f; do
    case "$f" in /usr/include/*|/usr/lib/*|/usr/share/cmake/*|/usr/share/pkgconfig/*) ;; *) continue ;; esac
    [ -f "$f" ] || continue
    mkdir -p "$dest$(dirname "$f")"
    cp -P "$f" "$dest$f"
  done
done
# PCRE2 (the text layer): the header and the static library only. Its pkg-config file would
# point at /usr/include, which the GPU machine lacks; CMake finds these by path instead.
for f in /usr/include/pcre2.h /usr/lib/x86_64-linux-gnu/libpcre2-8.a; do
  mkdir -p "$dest$(dirname "$f")"
  cp "$f" "$dest$f"
done
du -sh "$dest"
