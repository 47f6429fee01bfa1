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
  build-essential g++ pkg-config meson ninja-build python3 dpkg-dev
  dpdk dpdk-dev libdpdk-dev
  libspdlog-dev libfmt-dev libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libssl-dev
  libgtest-dev libbenchmark-dev
  iproute2 ethtool iputils-ping systemd groff-base clang-format clang-tidy curl socat iperf3 tshark
  clang-14 libclang-rt-14-dev llvm-14  # the fuzzers (tests/fuzz): libFuzzer, coverage tools
  verilator yosys  # the NIC's RTL (hw/fpga/tb, tools/synth.sh)
  gnuplot-nox  # the loss benchmark's plot (tests/bench/tcp_loss.py)
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

# The net_cleave PMD needs DPDK's driver-SDK headers (ethdev_driver.h, bus_vdev_driver.h, ...),
# which libdpdk-dev does not ship. They come from Debian's source package of the installed
# version, unpacked under /var/cache/cleave (the build finds it there; -Ddpdk_src overrides).
# Source packages need a deb-src entry: a copy of the machine's own Debian entry, so no host name
# is written into the repository.
dpdk_version=$(dpkg-query -W -f='${Version}' libdpdk-dev)
dpdk_upstream=${dpdk_version#*:}
dpdk_upstream=${dpdk_upstream%%-*}
dpdk_src=/var/cache/cleave/dpdk-stable-$dpdk_upstream
if [ ! -f "$dpdk_src/lib/ethdev/ethdev_driver.h" ]; then
  echo "==> fetching the DPDK $dpdk_version source package for the driver-SDK headers"
  deb_src=/etc/apt/sources.list.d/cleave-deb-src.sources
  if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    entry=$(grep -lsE '^Types:(.* )?deb( .*)?$' /etc/apt/sources.list.d/*.sources | head -n1 || true)
    if [ -n "$entry" ]; then
      sed -E 's/^Types:.*/Types: deb-src/' "$entry" > "$deb_src"
    elif grep -qsE '^deb ' /etc/apt/sources.list; then
      grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' \
        > /etc/apt/sources.list.d/cleave-deb-src.list
    else
      echo "setup.sh: no Debian apt entry to copy as deb-src; unpack DPDK $dpdk_upstream" \
           "yourself and pass -Ddpdk_src=DIR to meson" >&2
      exit 1
    fi
  fi
  apt-get update -qq
  mkdir -p /var/cache/cleave
  dl=$(mktemp -d /var/cache/cleave/dpdk-download.XXXXXX)
  (cd "$dl" && apt-get source -qq --download-only "dpdk=$dpdk_version")
  dpkg-source -x "$dl"/dpdk_*.dsc "$dpdk_src"
  rm -rf "$dl" /var/cache/cleave/dpdk_*.orig.tar.*  # dpkg-source copies the tarball beside the tree
fi

if [ ! -f build/build.ninja ]; then
  meson setup build -Dwerror=true "$@"
fi
ninja -C build
