#!/usr/bin/env bash
# Installs every Debian package that building and testing tetra needs. Idempotent: packages
# already present are left alone, so a second run only checks.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  nlohmann-json3-dev libgtest-dev libgmock-dev libomp-dev libpcre2-dev libcpp-httplib-dev curl
  python3
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq || echo "setup: apt-get update failed; trying the install with the lists at hand"
  $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

# Node.js runs the tokenizer comparison with the Hugging Face `tokenizers` library. Debian's
# nodejs/npm are installed only where no node is present (a NodeSource node ships its own npm).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "setup: installing nodejs npm"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo_cmd apt-get update -qq || true
  $sudo_cmd apt-get install -y -qq --no-install-recommends nodejs npm
fi

# The npm packages of tests/node (the library and the DeepSeek vocabulary), at the versions of
# its package-lock.json; reinstalled only when the lock file changed.
node_dir="$(dirname "$0")/../tests/node"
if [ ! -f "$node_dir/node_modules/.package-lock.json" ] || [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
  echo "setup: installing the npm packages of tests/node"
  (cd "$node_dir" && npm ci --no-audit --no-fund --loglevel=error)
else
  echo "setup: npm packages of tests/node present"
fi

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null 2>&1; then
  echo "setup: no CUDA toolkit found (expected /usr/local/cuda); configure with -DTETRA_CUDA=OFF to build without the CUDA backend" >&2
fi

# cuobjdump disassembles the built kernels for the test that checks what they do before waiting
# for the kernel ahead (tools/pdl_sass_check.py). A CUDA toolkit installed without it gets
# Debian's (package nvidia-cuda-toolkit, non-free, CUDA 11.8): it and the nvdisasm it runs, unpacked
# into /usr/local/lib/tetra (the whole package would put a second, older nvcc on the PATH). The
# package lists are fetched into a temporary folder: the system's apt sources stay as they are.
nvcc_path=/usr/local/cuda/bin/nvcc
[ -x "$nvcc_path" ] || nvcc_path=$(command -v nvcc || true)
if [ -n "$nvcc_path" ] && [ ! -x "$(dirname "$nvcc_path")/cuobjdump" ] && [ ! -x /usr/local/lib/tetra/cuobjdump ]; then
  echo "setup: fetching cuobjdump (Debian nvidia-cuda-toolkit)"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename non-free" \
    >"$tmp/sources.list"
  apt_tmp=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
           -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o APT::Sandbox::User=root)
  apt-get "${apt_tmp[@]}" update -qq
  (cd "$tmp" && apt-get "${apt_tmp[@]}" download -qq nvidia-cuda-toolkit)
  dpkg -x "$tmp"/nvidia-cuda-toolkit_*.deb "$tmp/unpacked"
  for tool in cuobjdump nvdisasm; do
    $sudo_cmd install -D -m 755 "$tmp/unpacked/usr/bin/$tool" "/usr/local/lib/tetra/$tool"
  done
fi
