#!/usr/bin/env bash
# under-load.sh - run a command while the machine is busy: two polling cleaved daemons (one
# busy-polling each of CPUs 0 and 1, on net_null ports) and a compile that never stops (the
# project's own largest sources, compiled over and over from build/compile_commands.json).
#
#   tools/under-load.sh [COMMAND ...]
#
# With no COMMAND it runs the integration suite: meson test -C build --suite integration.
# It prints the command's result and how many compiles ran meanwhile; it exits with the
# command's status. The tests must pass like this (they must survive a loaded
# machine): they wait for conditions and bound hangs, never judge speed. Needs root (the
# integration suite does) and a built `build/`.
set -euo pipefail
cd "$(dirname "$0")/.."

[ -x build/src/dataplane/cleaved ] || { echo "under-load.sh: build/ is not built" >&2; exit 2; }
[ $# -gt 0 ] || set -- meson test -C build --suite integration --print-errorlogs

work=$(mktemp -d /tmp/cleave-load.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# daemon NAME MAIN_LCORE POLL_LCORE: a cleaved polling a net_null port on POLL_LCORE.
daemon() {
  mkdir -p "$work/$1"
  cat >"$work/$1/cleaved.yaml" <<EOF
runtime_dir: $work/$1
log: {level: warn, format: plain}
eal: {main_lcore: $2, hugepages: "off", file_prefix: load-$1-$$, telemetry: false}
dataplane: {lcore: $3, idle_sleep_us: 0}
ports:
  - name: p0
    device: net_null_load$1
    ipv4: 198.51.100.1/24
EOF
  build/src/dataplane/cleaved -c "$work/$1/cleaved.yaml" >"$work/$1/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 300); do
    build/tools/cleavectl -s "$work/$1/cleaved.sock" status >/dev/null 2>&1 && return 0
    kill -0 "${pids[-1]}" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/$1/log" >&2
  echo "under-load.sh: the polling daemon $1 did not start" >&2
  exit 2
}
daemon a 0 1
daemon b 1 0

# The compile: the three largest translation units, compiled by their own command lines.
python3 - "$work/compile.sh" <<'EOF'
import json, os, shlex, sys
cmds = json.load(open("build/compile_commands.json"))
cmds.sort(key=lambda c: -os.path.getsize(os.path.join(c["directory"], c["file"])))
with open(sys.argv[1], "w") as f:
    f.write("set -e\nn=0\nwhile true; do\n")
    for c in cmds[:3]:
        args = shlex.split(c["command"])
        o = args.index("-o")
        args[o + 1] = os.path.join(os.path.dirname(sys.argv[1]), "load.o")
        # No dependency file: it would land in build/.
        args = [a for i, a in enumerate(args)
                if a not in ("-MD", "-MQ", "-MF") and args[i - 1] not in ("-MQ", "-MF")]
        f.write(f"  (cd {shlex.quote(c['directory'])} && {shlex.join(args)})\n")
    f.write("  n=$((n + 1)); echo $n > \"$(dirname \"$0\")/compiles\"\ndone\n")
EOF
bash "$work/compile.sh" >"$work/compile.log" 2>&1 &
pids+=($!)

echo "under-load.sh: 2 polling daemons (CPUs 0 and 1) and a compile loop; running: $*"
start=$(date +%s)
status=0
"$@" || status=$?
echo "under-load.sh: exit $status after $(($(date +%s) - start)) s," \
  "$(cat "$work/compiles" 2>/dev/null || echo 0) compile rounds meanwhile"
for i in 0 1; do
  d=$([ $i = 0 ] && echo a || echo b)
  kill -0 "${pids[$i]}" 2>/dev/null || { echo "under-load.sh: daemon $d died:" >&2; cat "$work/$d/log" >&2; }
done
exit "$status"
