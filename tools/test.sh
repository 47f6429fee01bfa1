#!/usr/bin/env bash
# test.sh - install, build and run every test: the normal build, then ASan+UBSan, then TSan on
# the pipes and libcleave, then a short run of every fuzzer, then format, the layers and lint.
#
# Suites: unit (no root, no network), integration (root: namespaces, veth, taps), rtl (the NIC's
# Verilator testbenches, with verilator installed); slow (long runs) is left out here, as by
# `meson test` without --suite: meson test -C build --suite slow.
# Run as root on Debian 12. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Each stage's heading says how long the run has taken so far (CI allows 90 minutes).
stage() { echo "==> $* ($(( $(date +%s) - start )) s in)"; }

tools/setup.sh
stage "tests (build/)"
meson test -C build --print-errorlogs

stage "tests under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/)"
# Without the RTL testbenches: simulation under the sanitizers would double their share of the
# run (build them there by hand: meson configure build-asan -Drtl=enabled).
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbenchmarks=false -Drtl=disabled -Doptimization=0
fi
ninja -C build-asan
# The same code paths with fewer bytes through the sanitizers (the normal build above moves the
# defaults): the RoCE test's largest move 256 MiB instead of 1 GiB, the simulated TCP fault
# matrix 25 MB a case instead of 100, the TCP streams 32 MiB instead of 64, 1000 messages a
# message test instead of 2000, Solar's two-wire cases 128 MiB each way instead of 1 GiB.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  CLEAVE_RDMA_BIG=256m CLEAVE_TCP_SIM_MB=25 CLEAVE_TCP_BYTES=33554432 CLEAVE_MSG_COUNT=1000 \
  CLEAVE_SOLAR_BYTES=128m \
  meson test -C build-asan --print-errorlogs

stage "notification pipes and libcleave under ThreadSanitizer (build-tsan/)"
# Only the two tests that need it: the pipe and the library against its fake daemon. GCC warns
# that TSan does not model atomic_thread_fence (-Wtsan): the doorbell's fences order accesses that
# are all atomic, so TSan cannot report a false race there, and DoorbellLosesNoWakeup checks
# what the fences are for. GCC does not instrument memcpy it expands inline, which is how pipe
# entries are copied: -fno-builtin-memcpy makes those copies visible to TSan.
if [ ! -f build-tsan/build.ninja ]; then
  meson setup build-tsan -Dwerror=true -Db_sanitize=thread -Db_lundef=false -Dbenchmarks=false \
    "-Dcpp_args=-Wno-tsan -fno-builtin-memcpy"
fi
ninja -C build-tsan -j2 tests/pipe_tests tests/libcleave_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/tests/pipe_tests
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 build-tsan/tests/libcleave_tests

stage "fuzzers, a few seconds each after their corpora (build-fuzz/, tests/fuzz/README.md)"
# clang with libFuzzer, ASan and UBSan; only the fuzzers and the libraries they link are built.
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 meson setup build-fuzz -Dwerror=true -Dfuzz=true -Dtests=false \
    -Dbenchmarks=false -Db_lundef=false -Doptimization=1 -Ddebug=false
fi
ninja -C build-fuzz fuzzers
meson test -C build-fuzz --no-rebuild --print-errorlogs --suite fuzz

stage "format (.clang-format), layers (docs/architecture.md) and static checks (.clang-tidy, without the analyzer and the tests' harnesses: tools/lint.sh --deep has them)"
git ls-files '*.cc' '*.h' '*.c' | xargs clang-format --dry-run --Werror
python3 tools/check_layers.py build
tools/lint.sh

echo "==> all tests passed in $(( $(date +%s) - start )) s"
