#!/usr/bin/env bash
# test.sh - install, build and run every test: the normal build, then ASan+UBSan, then format.
#
# Suites: unit (no root, no network), integration (root: namespaces, veth, taps), slow.
# Run as root on Debian 12. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)

tools/setup.sh
echo "==> tests (build/)"
meson test -C build --print-errorlogs

echo "==> tests under AddressSanitizer and UndefinedBehaviorSanitizer (build-asan/)"
if [ ! -f build-asan/build.ninja ]; then
  meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbenchmarks=false
fi
ninja -C build-asan
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --print-errorlogs

echo "==> format (.clang-format) and static checks (.clang-tidy)"
git ls-files '*.cc' '*.h' | xargs clang-format --dry-run --Werror
tools/lint.sh

echo "==> all tests passed in $(( $(date +%s) - start )) s"
