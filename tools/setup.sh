#!/usr/bin/env bash
# setup.sh - install what Cleave needs from Debian 12 and build it into build/.
#
# Used by demo.sh and test.sh; safe to run again (installs only what is missing, rebuilds only
# what changed). Needs root for apt-get. Extra arguments go to `meson setup`.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "setup.sh: run as root: it installs Debian packages, and Cleave's tests and demo create" \
       "network namespaces" >&2
  exit 2
fi

packages=(
  build-essential g++ pkg-config meson ninja-build python3
  dpdk dpdk-dev libdpdk-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev
  libgtest-dev libbenchmark-dev
  iproute2 ethtool iputils-ping systemd clang-format clang-tidy
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "==> installing: ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror=true "$@"
fi
ninja -C build
