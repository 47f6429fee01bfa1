#!/usr/bin/env bash
# lint.sh [--deep] - clang-tidy (.clang-tidy; tests/.clang-tidy under tests/) over the C++
# sources and the tests' C sources build/ compiles, using its compile database. Warnings are
# errors. Run after tools/setup.sh. Without --deep, as tools/test.sh and CI run it (a few
# minutes): the checks but the static analyzer (clang-analyzer-*), over everything but the tests'
# own harnesses (tests/unit, tests/sim, tests/bench: about a third of the time, and code no user
# runs; the example plugins in tests/plugin are linted). With --deep, every source and the
# analyzer's path search too (twice as long or more: the slow suite's `lint-deep`). Not here:
# the Verilator testbenches (hw/fpga/tb, built by Verilator), the fuzzers (built only in
# build-fuzz/ by clang) and, not yet clean, the C tools (tools/cleave-*/*.c, tools/common).
set -euo pipefail
cd "$(dirname "$0")/.."
checks=("--checks=-clang-analyzer-*")
skip='^(hw/fpga/tb|tests/unit|tests/sim|tests/bench)/'
if [ "${1:-}" = --deep ]; then
  checks=()
  skip='^hw/fpga/tb/'
elif [ $# -ne 0 ]; then
  echo "usage: tools/lint.sh [--deep]" >&2
  exit 2
fi
[ -f build/compile_commands.json ] || { echo "lint.sh: build/ is not configured; run tools/setup.sh" >&2; exit 2; }
compiled=$(python3 -c '
import json, os
for e in json.load(open("build/compile_commands.json")):
    print(os.path.relpath(os.path.join(e["directory"], e["file"])))' | sort -u)
git ls-files '*.cc' 'tests/*.c' | grep -Ev "$skip" | sort | comm -12 - <(echo "$compiled") |
  xargs -P "$(nproc)" -n 1 clang-tidy -p build --quiet "${checks[@]}" 2>/dev/null
