#!/usr/bin/env bash
# lint.sh - clang-tidy (.clang-tidy) over every C++ source, using build/'s compile database.
# Warnings are errors. Run after tools/setup.sh; tools/test.sh runs it. The Verilator testbenches
# (hw/fpga/tb) are not in the compile database: Verilator builds them.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f build/compile_commands.json ] || { echo "lint.sh: build/ is not configured; run tools/setup.sh" >&2; exit 2; }
git ls-files '*.cc' | grep -v -e '^tests/' -e '^hw/fpga/tb/' |
  xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet 2>/dev/null
