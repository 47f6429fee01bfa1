#!/usr/bin/env bash
# fuzz-coverage.sh - line coverage of the parsers by the fuzzers' corpora (tests/fuzz/README.md).
#
#   tools/fuzz-coverage.sh [CORPUS_ROOT] [TARGET...]
#
# Builds the fuzzers with clang's source-based coverage into build-fuzz-cov/, replays each
# target's corpora once (the generated seeds, tests/fuzz/corpus/<target>, and
# CORPUS_ROOT/<target> when given: the corpus a long run grew) and prints, per target, the line
# coverage of the files it is there to exercise. Needs clang-14 and llvm-14 (tools/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-fuzz-cov
extra=${1:-}
shift || true

declare -A files=(
  [nic_rx]="hw/fpga/model/nic_model_rx.cc hw/fpga/model/nic_model_ctl.cc hw/fpga/model/nic_model_tx.cc"
  [tcp_wire]="src/transport/tcp/tcp_wire.cc"
  [roce_wire]="src/transport/rocev2/roce_wire.cc hw/fpga/model/wire.cc"
  [tcp_sim]="src/transport/tcp/tcp_input.cc src/transport/tcp/tcp_output.cc src/transport/tcp/tcp.cc src/transport/tcp/tcp_rack.cc src/transport/tcp/tcp_timer.cc"
  [roce_sim]="src/transport/rocev2/rc.cc"
  [config]="src/dataplane/config.cc src/dataplane/net.cc"
  [pipe]="src/dataplane/apps.cc"
  [mgmt]="src/dataplane/mgmt_server.cc src/dataplane/management.cc"
  [app]="src/dataplane/app_server.cc"
)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(nic_rx tcp_wire roce_wire tcp_sim roce_sim config pipe mgmt app)

if [ ! -f $build/build.ninja ]; then
  CC=clang-14 CXX=clang++-14 meson setup $build -Dfuzz=true -Dtests=false -Dbenchmarks=false \
    -Db_lundef=false -Doptimization=1 -Ddebug=false \
    "-Dcpp_args=-fprofile-instr-generate -fcoverage-mapping" \
    "-Dcpp_link_args=-fprofile-instr-generate" >/dev/null
fi
ninja -C $build fuzzers >/dev/null

out=$(mktemp -d "${TMPDIR:-/tmp}/cleave-fuzz-cov.XXXXXX")
trap 'rm -rf "$out"' EXIT
printf '%-10s %-40s %8s %8s %7s\n' target file lines missed cover
for t in "${targets[@]}"; do
  corpora=("$build/tests/fuzz/seeds/$t")
  [ -d "tests/fuzz/corpus/$t" ] && corpora+=("tests/fuzz/corpus/$t")
  [ -n "$extra" ] && [ -d "$extra/$t" ] && corpora+=("$extra/$t")
  LLVM_PROFILE_FILE="$out/$t.profraw" "$build/tests/fuzz/fuzz_$t" -runs=0 "${corpora[@]}" \
    >"$out/$t.log" 2>&1 || { echo "fuzz-coverage.sh: $t failed on its corpus:" >&2; tail "$out/$t.log" >&2; exit 1; }
  llvm-profdata-14 merge -sparse "$out/$t.profraw" -o "$out/$t.profdata"
  llvm-cov-14 export -summary-only "$build/tests/fuzz/fuzz_$t" -instr-profile="$out/$t.profdata" |
    python3 -c '
import json, os, sys
target, build, wanted = sys.argv[1], sys.argv[2], sys.argv[3].split()
root = os.path.abspath(".")
total = [0, 0]
for f in json.load(sys.stdin)["data"][0]["files"]:
    path = os.path.relpath(os.path.normpath(os.path.join(build, f["filename"])), root)
    if path not in wanted:
        continue
    lines = f["summary"]["lines"]
    total[0] += lines["count"]
    total[1] += lines["covered"]
    print("%-10s %-40s %8d %8d %6.1f%%" % (target, path, lines["count"],
          lines["count"] - lines["covered"], 100.0 * lines["covered"] / max(lines["count"], 1)))
print("%-10s %-40s %8d %8d %6.1f%%" % (target, "(all of the above)", total[0], total[0] - total[1],
      100.0 * total[1] / max(total[0], 1)))
' "$t" "$build" "${files[$t]}"
done
