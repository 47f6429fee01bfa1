#!/usr/bin/env bash
# run_fuzz.sh - one bounded libFuzzer run, as the fuzz and slow suites run it.
#
#   run_fuzz.sh FUZZER SECONDS ARTIFACT_DIR CORPUS_DIR...
#
# New inputs go to a scratch directory that is removed afterwards, so the seed corpora (generated
# or committed) are only read. Every input in CORPUS_DIR... (those that exist) runs first, then
# fuzzing goes on for SECONDS. A crash, a leak, a timeout or a failed invariant leaves the input
# in ARTIFACT_DIR and fails the run with the command that reproduces it.
set -euo pipefail
fuzzer=$1 seconds=$2 artifacts=$3
shift 3
name=$(basename "$fuzzer")
corpora=()
for d in "$@"; do
  [ -d "$d" ] && corpora+=("$d")
done
mkdir -p "$artifacts"
work=$(mktemp -d "${TMPDIR:-/tmp}/cleave-$name.XXXXXX")
trap 'rm -rf "$work"' EXIT
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
"$fuzzer" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2560 -print_final_stats=1 \
  -artifact_prefix="$artifacts/$name-" "$work" "${corpora[@]}" || status=$?
if [ "$status" -ne 0 ]; then
  echo "run_fuzz.sh: $name failed (exit $status); the input is in $artifacts/:" >&2
  ls -t "$artifacts" | grep "^$name-" | head -n 3 | sed "s|^|  $artifacts/|" >&2
  echo "reproduce: $fuzzer $artifacts/<that file>" >&2
fi
# libFuzzer exits 77 on a crash, which meson reads as "skipped".
[ "$status" -eq 0 ] || exit 1
