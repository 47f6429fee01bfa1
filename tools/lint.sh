#!/usr/bin/env bash
# lint.sh [--deep] - clang-tidy (.clang-tidy; tests/.clang-tidy under tests/) over every C++
# source and the tests' C sources build/ compiles, using its compile database. Warnings are
# errors. Run after tools/setup.sh. Without --deep, the checks but the static analyzer
# (clang-analyzer-*), as tools/test.sh and CI run it (a few minutes); with it, the analyzer's
# path search too (twice as long or more: the slow suite's `lint-deep`). Not here: the
# Verilator testbenches (hw/fpga/tb, built by Verilator), the fuzzers (built only in build-fuzz/
# by clang) and, not yet clean, the C tools (tools/cleave-*/*.c, tools/common).
set -euo pipefail
cd "$(dirname "$0")/.."
checks=("--checks=-clang-analyzer-*")
if [ "${1:-}" = --deep ]; then
  checks=()
elif [ $# -ne 0 ]; then
  echo "usage: tools/lint.sh [--deep]" >&2
  exit 2
fi
[ -f build/compile_commands.json ] || { echo "lint.sh: build/ is not configured; run tools/setup.sh" >&2; exit 2; }
compiled=$(python3 -c '
import json, os
for e in json.load(open("build/compile_commands.json")):
    print(os.path.relpath(os.path.join(e["directory"], e["file"])))' | sort -u)
git ls-files '*.cc' 'tests/*.c' | grep -v '^hw/fpga/tb/' | sort | comm -12 - <(echo "$compiled") |
  xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet "${checks[@]}" 2>/dev/null
