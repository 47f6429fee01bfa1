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
  # Paths as the build compiled them (relative to the build directory).
  srcs=()
  for f in ${files[$t]}; do srcs+=("../$f"); done
  (cd $build && llvm-cov-14 report "tests/fuzz/fuzz_$t" -instr-profile="$out/$t.profdata" "${srcs[@]}") |
    awk -v t="$t" '$1 ~ /^\.\.\// || $1 == "TOTAL" {
      name = $1; sub(/^\.\.\//, "", name)
      printf "%-10s %-40s %8s %8s %7s\n", t, name, $8, $9, $10 }'
done
