#!/usr/bin/env bash
# The GPU machine has CUDA, CMake and ninja but none of the Debian -dev packages the build needs
# and cannot install any. This copies them (headers, static libraries, CMake package files)
# from this machine into .gpu_carry/deps/usr, a git-ignored folder that the device tool can
# carry; there, run ./scripts/gpu-test.sh (it finds them).
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
# Node and the OpenAI SDK for the server's end-to-end tests, in .gpu_node: the GPU machine has
# no node. The binary travels stripped and xz-compressed and the SDK without its sources,
# typings and maps; scripts/gpu-test.sh unpacks both. With the tracked tree, .gpu_carry and
# .gpu_node together pass the device tool's 64 MiB limit: carry .gpu_node in a second call
# made while the machine is still warm (build-gpu/ stays there).
grep -qx '/.gpu_node/' "$exclude" 2>/dev/null || echo '/.gpu_node/' >> "$exclude"
rm -rf .gpu_node
mkdir -p .gpu_node/node_modules
strip -o .gpu_node/node "$(command -v node)"
xz -T0 -6 .gpu_node/node
cp -r tests/node/node_modules/openai .gpu_node/node_modules/
find .gpu_node/node_modules/openai \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' \) -delete
rm -rf .gpu_node/node_modules/openai/src
du -sh .gpu_node
