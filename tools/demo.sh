#!/usr/bin/env bash
# demo.sh - the main job: build Cleave, start cleaved on its embedded default configuration,
# exercise it from the Linux kernel next to it, and print what happened.
#
# cleaved runs inside a scratch network namespace (cleave-demo) so nothing on the host changes.
# Its embedded default gives it one port, 198.18.0.1/24, on the header-split NIC (net_cleave,
# its reference model in software) whose wire is a DPDK tap device, cleave0; the kernel's end of
# that tap (198.18.0.2) plays the other host. For TCP between two cleave apps on two daemons, a
# second cleaved joins later on a second tap (cleave1, 198.18.0.3), the two taps bridged by the
# kernel. Run as root on Debian 12.
set -euo pipefail
cd "$(dirname "$0")/.."

tools/setup.sh >/dev/null

NS=cleave-demo
RUN=/run/cleave
CTL=(build/tools/cleavectl -s "$RUN/cleaved.sock")
LOG=$(mktemp /tmp/cleave-demo.XXXXXX.log)
pid=""
pid2=""
RUN2=/run/cleave-demo2
CTL2=(build/tools/cleavectl -s "$RUN2/cleaved.sock")
CONF2=$(mktemp /tmp/cleave-demo2.XXXXXX.yaml)
LOG2=$(mktemp /tmp/cleave-demo2.XXXXXX.log)
pid3=""
RUN3=/run/cleave-demo3
CTL3=(build/tools/cleavectl -s "$RUN3/cleaved.sock")
CONF3=$(mktemp /tmp/cleave-demo3.XXXXXX.yaml)
LOG3=$(mktemp /tmp/cleave-demo3.XXXXXX.log)

cleanup() {
  for p in "$pid3" "$pid2" "$pid"; do
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      kill -TERM "$p" 2>/dev/null || true
      wait "$p" 2>/dev/null || true
    fi
  done
  ip netns del "$NS" 2>/dev/null || true
  rm -f "$CONF2" "$LOG2" "$CONF3" "$LOG3"
}
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
say() { printf '    %s\n' "$*"; }
ns() { ip netns exec "$NS" "$@"; }
# wait_daemon SOCKET PID LOG: until the cleaved behind SOCKET answers (its log if it died).
wait_daemon() {
  for _ in $(seq 100); do
    build/tools/cleavectl -s "$1" status >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  cat "$3"
  echo "demo.sh: cleaved ($1) did not start" >&2
  exit 1
}
# stop_daemon PID LOG WHICH: SIGTERM to a cleaved started here, which must exit 0 (its log if not).
stop_daemon() {
  kill -TERM "$1"
  wait "$1" || { cat "$2"; echo "demo.sh: the $3 cleaved did not stop cleanly" >&2; exit 1; }
  say "the $3 cleaved stopped (SIGTERM, exit code 0)"
}
# wait_listener SOCKET PORT: until the cleaved behind SOCKET lists a listener on PORT.
wait_listener() {
  for _ in $(seq 250); do
    build/tools/cleavectl -s "$1" -j flow list 2>/dev/null | grep -q ":$2\"" && return 0
    sleep 0.02
  done
  echo "demo.sh: nothing listens on port $2 of cleaved ($1)" >&2
  exit 1
}
# wait_kernel_listener PORT [here]: until a kernel socket listens on PORT in the namespace, or
# with "here" in this one (cleave-rdma's side channel).
wait_kernel_listener() {
  local where=(ns)
  [ "${2:-}" = here ] && where=()
  for _ in $(seq 250); do
    "${where[@]}" ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
    sleep 0.02
  done
  echo "demo.sh: nothing listens on port $1 ${2:-in the namespace}" >&2
  exit 1
}

if ip netns list | grep -qw "$NS"; then
  echo "demo.sh: namespace $NS exists (an earlier demo was interrupted?); removing it" >&2
  ip netns del "$NS"
fi
ip netns add "$NS"
ns ip link set lo up

step "The embedded default configuration is valid"
build/src/dataplane/cleaved --check-config
say "(the file is config/cleaved.yaml; 'cleaved --help' lists the options)"

step "Starting cleaved on it, in namespace $NS"
# Not through ns(): $! must be cleaved itself (ip netns exec execs it), not a subshell.
ip netns exec "$NS" build/src/dataplane/cleaved >"$LOG" 2>&1 &
pid=$!
wait_daemon "$RUN/cleaved.sock" "$pid" "$LOG"
grep -v "dpdk: " "$LOG" | sed 's/^/    log: /'
say "(DPDK's net_tap may log that it cannot create a multiq qdisc: harmless, it only disables"
say " rte_flow on the tap)"

step "cleavectl status"
"${CTL[@]}" status | sed 's/^/    /'

step "The kernel side of the tap becomes the other host: 198.18.0.2"
ns ip link set cleave0 address 02:c1:ea:0e:00:02
ns ip addr add 198.18.0.2/24 dev cleave0
ns ip link set cleave0 up
say "ip addr add 198.18.0.2/24 dev cleave0 (with its own MAC, 02:c1:ea:0e:00:02)"

step "Linux pings cleaved: ARP and ICMP echo are answered by the dataplane"
ns ping -c 5 -i 0.2 198.18.0.1 | sed 's/^/    /'
say "Linux learned cleaved's MAC by ARP:"
ns ip neigh show 198.18.0.1 | sed 's/^/      /'

step "cleaved resolves the kernel's MAC (route get, like 'ip route get')"
"${CTL[@]}" route get 198.18.0.2 | sed 's/^/    /'
"${CTL[@]}" arp show | sed 's/^/    /'

step "Traffic nobody handles is dropped and counted by reason"
for _ in 1 2 3; do ns bash -c 'echo hello > /dev/udp/198.18.0.1/9'; done
sleep 0.2
say "3 UDP datagrams to 198.18.0.1:9 (no exception tap in the default configuration)"

step "cleavectl stats show"
"${CTL[@]}" stats show | sed 's/^/    /'

step "cleavectl port show"
"${CTL[@]}" port show | sed 's/^/    /'

step "The header-split NIC under the port: cleavectl nic show"
say "Every frame went through the NIC model's parser and flow table. No transport has programmed"
say "a flow yet, so each was deferred whole to the copy path, counted by reason (defer_*):"
say "ARP is not IPv4, ICMP is not TCP/UDP, the UDP datagrams matched no flow."
"${CTL[@]}" nic show | sed 's/^/    /'

step "The same counters over DPDK telemetry (dpdk-telemetry.py, /cleave/stats)"
echo /cleave/stats | dpdk-telemetry.py -f cleave 2>/dev/null | grep '^{' | /usr/bin/python3 -c '
import json, sys
s = json.loads(sys.stdin.read())["/cleave/stats"]
print("    icmp echo requests %d, replies %d; drops total %d (no_handler %d)" % (
    s["icmp"]["echo_requests"], s["icmp"]["echo_replies"], s["drops_total"],
    s["drops"]["no_handler"]))'

step "An application moves data through cleaved (libcleave, cleave-perf)"
say "cleave-perf links libcleave: it connects to $RUN/app.sock, gets a shared region, and posts"
say "requests on notification pipes that the dataplane lcore polls; every copy and send is checked."
PERF_OUT=$(mktemp /tmp/cleave-demo-perf.XXXXXX)
build/tools/cleave-perf -s "$RUN/app.sock" -n 200000 -b 65536 -k 16 >"$PERF_OUT" 2>&1 &
perf_pid=$!
for _ in $(seq 100); do
  "${CTL[@]}" -j app list 2>/dev/null | grep -q '"name":"cleave-perf"' && break
  sleep 0.02
done
say "while it runs, cleavectl app list:"
"${CTL[@]}" app list | sed 's/^/      /'
wait "$perf_pid" && perf_rc=0 || perf_rc=$?
sed 's/^/    /' "$PERF_OUT"
rm -f "$PERF_OUT"
[ "$perf_rc" -eq 0 ] || { echo "demo.sh: cleave-perf failed ($perf_rc)" >&2; exit 1; }
say "after it exits, everything it held is reclaimed:"
"${CTL[@]}" app list | sed 's/^/      /'
grep "cleave-perf" "$LOG" | sed 's/^/    log: /'

step "TCP: a cleave app serves HTTP to curl"
say "cleave-tcp (tools/cleave-tcp) is a netcat over libcleave flows. It listens on port 8080;"
say "the flow's headers run through cleaved's TCP, its payload stays in the app's memory."
TCP=build/tools/cleave-tcp
HTTP_BYTES=$((4 << 20))
"$TCP" -s "$RUN/app.sock" --listen 8080 --http "$HTTP_BYTES" --timeout 20 >/dev/null &
tcp_pid=$!
wait_listener "$RUN/cleaved.sock" 8080
curl_sum=$(ns curl -sS --max-time 20 "http://198.18.0.1:8080/" | sha256sum | cut -c1-64)
wait "$tcp_pid" || { echo "demo.sh: cleave-tcp --http failed" >&2; exit 1; }
want_sum=$("$TCP" --pattern "$HTTP_BYTES" | sha256sum | cut -c1-64)
say "curl http://198.18.0.1:8080/ got $HTTP_BYTES bytes, sha256 ${curl_sum:0:16}..."
say "the pattern cleave-tcp sent has sha256 ${want_sum:0:16}...: $( [ "$curl_sum" = "$want_sum" ] \
  && echo equal || echo DIFFERENT)"
[ "$curl_sum" = "$want_sum" ] || exit 1

step "Operations on the running daemon: a transport plugin and a tuple binding"
PLUGIN_DIR=build/tests
PLUGIN=libcleave_transport_datagram.so
if [ -f "$PLUGIN_DIR/$PLUGIN" ]; then
  say "cleavectl transport attach loads the example datagram plugin into cleaved (dlopen on its"
  say "main thread); a relative path is cleavectl's own, here from $PLUGIN_DIR:"
  (cd "$PLUGIN_DIR" && ../tools/cleavectl -s "$RUN/cleaved.sock" transport attach "$PLUGIN") |
    sed 's/^/      /'
  "${CTL[@]}" transport list | sed 's/^/      /'
  say "the same object again is refused, and cleaved runs on:"
  ("${CTL[@]}" transport attach "$PLUGIN_DIR/$PLUGIN" 2>&1 || true) | sed 's/^/      /'
else
  say "(the example plugin $PLUGIN_DIR/$PLUGIN is not built: no transport attach)"
fi
say "TCP flows between 198.18.0.1:5001 and any port of 198.18.0.2 get NewReno (tcp's default is"
say "CUBIC, as Linux's), chosen when the flow is created; the next step's flow show says which:"
"${CTL[@]}" flow attach tuple 198.18.0.1:5001 '198.18.0.2:*' cc newreno | sed 's/^/      /'

TCP_BYTES=$((256 << 20))
step "TCP: Linux sends $((TCP_BYTES >> 20)) MiB to a cleave app (zero copy on the header-split NIC)"
say "cleave-tcp --ring 8m reads the stream in place from an 8 MiB receive ring (cl_ring_*)"
TCP_OUT=$(mktemp /tmp/cleave-demo-tcp.XXXXXX)
"$TCP" -s "$RUN/app.sock" --listen 5001 --ring 8m --json --timeout 30 >"$TCP_OUT" &
tcp_pid=$!
wait_listener "$RUN/cleaved.sock" 5001
"$TCP" --pattern "$TCP_BYTES" | ns socat -u - TCP:198.18.0.1:5001 &
send_pid=$!
flow=""
for _ in $(seq 200); do
  flow=$("${CTL[@]}" -j flow list 2>/dev/null | /usr/bin/python3 -c '
import json, sys
f = [r for r in json.load(sys.stdin)["flows"] if r["info"].get("state") == "ESTABLISHED"]
print(f[0]["id"] if f else "")' 2>/dev/null || true)
  [ -n "$flow" ] && break
  sleep 0.01
done
if [ -n "$flow" ]; then
  sleep 0.3
  say "cleavectl flow list, mid-transfer:"
  "${CTL[@]}" flow list | sed 's/^/      /'
  say "cleavectl flow show $flow (TCP_INFO-like; placed_bytes went by NIC placement):"
  "${CTL[@]}" flow show "$flow" | sed 's/^/      /'
fi
wait "$send_pid"
wait "$tcp_pid" || { cat "$TCP_OUT"; echo "demo.sh: cleave-tcp --recv failed" >&2; exit 1; }
want_sum=$("$TCP" --pattern "$TCP_BYTES" | sha256sum | cut -c1-64)
/usr/bin/python3 - "$(cat "$TCP_OUT")" "$want_sum" <<'PY'
import json, sys
r, want = json.loads(sys.argv[1]), sys.argv[2]
ok = "equal" if r["received_sha256"] == want else "DIFFERENT"
print(f"    cleave-tcp received {r['received']} bytes in {r['seconds']:.2f} s "
      f"({r['recv_gbps']:.2f} Gbit/s); sha256 {r['received_sha256'][:16]}... {ok} to what "
      f"socat sent; close status {r['close_status']}")
sys.exit(0 if ok == "equal" else 1)
PY

step "TCP: a cleave app sends $((TCP_BYTES >> 20)) MiB to a Linux socket"
SINK=$(mktemp /tmp/cleave-demo-sink.XXXXXX)
ns socat -u TCP-LISTEN:5002,reuseaddr - | sha256sum | cut -c1-64 >"$SINK" &
sink_pid=$!
wait_kernel_listener 5002
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.2:5002 --send "$TCP_BYTES" --json --timeout 30 \
  >"$TCP_OUT" || { cat "$TCP_OUT"; echo "demo.sh: cleave-tcp --send failed" >&2; exit 1; }
wait "$sink_pid"
/usr/bin/python3 - "$(cat "$TCP_OUT")" "$(cat "$SINK")" <<'PY'
import json, sys
r, got = json.loads(sys.argv[1]), sys.argv[2]
ok = "equal" if r["sent_sha256"] == got else "DIFFERENT"
print(f"    cleave-tcp sent {r['sent']} bytes in {r['seconds']:.2f} s ({r['send_gbps']:.2f} "
      f"Gbit/s), each send completing when Linux acknowledged it; the kernel's sha256 "
      f"{got[:16]}... is {ok}; close status {r['close_status']}")
sys.exit(0 if ok == "equal" else 1)
PY

step "TCP between two cleave daemons: a second cleaved joins the wire"
say "A second cleaved starts in the same namespace on its own port, 198.18.0.3, whose wire is a"
say "second tap, cleave1; a kernel bridge joins cleave0 and cleave1 (the switch between two"
say "hosts) and keeps 198.18.0.2 (its second port, 198.18.1.3 on tap cleave2, waits for Solar)."
say "The second daemon polls the other core with two shards (lcores 0 and 2, both on CPU 0: each"
say "polls its own queue of every port, whose NIC steers by RSS, and sleeps 20 us when idle):"
cat >"$CONF2" <<EOF
runtime_dir: $RUN2
log:
  format: plain
eal:
  main_lcore: 1
  file_prefix: cleave-demo2
dataplane:
  lcores: [0, "2@0"]
  idle_sleep_us: 20
ports:
  - name: nic0
    device: net_cleave1,wire=net_tap1,wire_args=iface=cleave1
    mac: 02:c1:ea:0e:00:03
    ipv4: 198.18.0.3/24
  - name: nic1
    device: net_cleave2,wire=net_tap2,wire_args=iface=cleave2
    mac: 02:c1:ea:0e:01:03
    ipv4: 198.18.1.3/24
EOF
grep -E "device|ipv4|lcore" "$CONF2" | sed 's/^/      /'
ip netns exec "$NS" build/src/dataplane/cleaved -c "$CONF2" >"$LOG2" 2>&1 &
pid2=$!
wait_daemon "$RUN2/cleaved.sock" "$pid2" "$LOG2"
ns ip link add br0 type bridge
ns ip link set br0 address 02:c1:ea:0e:00:02
ns ip addr flush dev cleave0
ns ip link set cleave0 master br0
# The kernel's end of a DPDK tap starts with the port's own MAC; a bridge would take frames to
# that MAC for itself instead of forwarding them to the tap, so it gets another (as cleave0 did).
ns ip link set cleave1 address 02:c1:ea:0e:00:04
ns ip link set cleave1 up
ns ip link set cleave1 master br0
ns ip addr add 198.18.0.2/24 dev br0
ns ip link set br0 up
# A tap holds txqueuelen frames for its daemon to read (1000 by default): fewer than the READ
# responses a queue pair may send at once, and RoCE expects a lossless fabric.
ns ip link set cleave0 txqueuelen 4096
ns ip link set cleave1 txqueuelen 4096
say "ip link add br0 type bridge; cleave0 and cleave1 are its ports; 198.18.0.2 moves to br0;"
say "each tap queues 4096 frames for its daemon (ip link set cleave1 txqueuelen 4096)"

say "cleave-tcp on the second daemon listens on 5003; one on the first connects and sends"
say "$((TCP_BYTES >> 20)) MiB: both ends are cleave apps, both TCPs run on headers only."
"$TCP" -s "$RUN2/app.sock" --listen 5003 --recv --json --timeout 30 >"$TCP_OUT" &
tcp_pid=$!
wait_listener "$RUN2/cleaved.sock" 5003
SEND_OUT=$(mktemp /tmp/cleave-demo-send.XXXXXX)
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.3:5003 --send "$TCP_BYTES" --json --timeout 30 \
  >"$SEND_OUT" || { cat "$SEND_OUT"; echo "demo.sh: cleave-tcp --send failed" >&2; exit 1; }
wait "$tcp_pid" || { cat "$TCP_OUT"; echo "demo.sh: cleave-tcp --recv failed" >&2; exit 1; }
/usr/bin/python3 - "$(cat "$SEND_OUT")" "$(cat "$TCP_OUT")" \
  "$("${CTL2[@]}" -j stats show)" "$("${CTL2[@]}" -j nic show)" <<'PY'
import json, sys
tx, rx, st, nic = (json.loads(a) for a in sys.argv[1:5])
ok = "equal" if tx["sent_sha256"] == rx["received_sha256"] else "DIFFERENT"
print(f"    sent {tx['sent']} bytes in {tx['seconds']:.2f} s ({tx['send_gbps']:.2f} Gbit/s); "
      f"received {rx['received']}, sha256 {ok} on both ends; close status {tx['close_status']} "
      f"and {rx['close_status']}")
c = nic[0]["counters"]
print(f"    the second daemon's NIC placed {c['nic_rx_placed_bytes']} payload byte(s) into the "
      f"app's buffers; its daemon copied {st['flows']['rx_copied_bytes']}")
sys.exit(0 if ok == "equal" else 1)
PY
step "Two shards: two apps on the second daemon, their flows each on its own lcore"
say "A new app goes to the shard with the fewest. Two cleave-tcp listen on the second daemon"
say "(5005, 5006); two on the first connect at once and send $((TCP_BYTES >> 22)) MiB each. A SYN"
say "that RSS puts on the other shard's queue is handed over; the rest of each flow stays on its"
say "shard (counts since the daemon started):"
OUT5=$(mktemp /tmp/cleave-demo-5005.XXXXXX)
OUT6=$(mktemp /tmp/cleave-demo-5006.XXXXXX)
"$TCP" -s "$RUN2/app.sock" --listen 5005 --recv --json --timeout 30 >"$OUT5" &
l5=$!
wait_listener "$RUN2/cleaved.sock" 5005
"$TCP" -s "$RUN2/app.sock" --listen 5006 --recv --json --timeout 30 >"$OUT6" &
l6=$!
wait_listener "$RUN2/cleaved.sock" 5006
"${CTL2[@]}" app list | sed 's/^/      /'
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.3:5005 --send $((TCP_BYTES >> 2)) --timeout 30 \
  >/dev/null &
s5=$!
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.3:5006 --send $((TCP_BYTES >> 2)) --seed 2 \
  --timeout 30 >/dev/null &
s6=$!
for p in $s5 $s6 $l5 $l6; do
  wait "$p" || { cat "$OUT5" "$OUT6"; echo "demo.sh: the two-shard transfers failed" >&2; exit 1; }
done
/usr/bin/python3 - "$(cat "$OUT5")" "$(cat "$OUT6")" "$("${CTL2[@]}" -j stats show)" \
  "$(build/tools/cleave-tcp --pattern $((TCP_BYTES >> 2)) | sha256sum | cut -d' ' -f1)" \
  "$(build/tools/cleave-tcp --pattern $((TCP_BYTES >> 2)) --seed 2 | sha256sum | cut -d' ' -f1)" \
  <<'PY'
import json, sys
r5, r6, st = (json.loads(a) for a in sys.argv[1:4])
ok = r5["received_sha256"] == sys.argv[4] and r6["received_sha256"] == sys.argv[5]
print(f"    received {r5['received']} and {r6['received']} bytes, sha256 "
      f"{'equal to the patterns' if ok else 'DIFFERENT'}; per shard (cleavectl stats show):")
for l in st["lcores"]:
    if l["role"] == "dataplane":
        print(f"      shard {l['shard']} on lcore {l['lcore']}: {l['rx_packets']} frames received, "
              f"{l['flows_opened']} flows opened, {l['handed_off']} frame(s) handed to the other "
              f"shard, busy {l['busy_percent']:.1f} %")
sys.exit(0 if ok else 1)
PY
rm -f "$OUT5" "$OUT6"

step "TCP message mode between the two daemons: the NIC places each message in its own buffer"
say "cleave-tcp --messages sends 2000 messages of 1 B to 1 MiB (seeded sizes); each send is one"
say "message and each posted receive takes exactly one. The boundaries ride in a TCP option"
say "(kind 253), so the receiving NIC puts every segment at its message's buffer + offset."
before2=$("${CTL2[@]}" -j transport list)
"$TCP" -s "$RUN2/app.sock" --listen 5005 --messages 0 --recv --msg-max 1048576 --json \
  --timeout 30 >"$TCP_OUT" &
tcp_pid=$!
wait_listener "$RUN2/cleaved.sock" 5005
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.3:5005 --messages 2000 --msg-min 1 \
  --msg-max 1048576 --json --timeout 30 >"$SEND_OUT" ||
  { cat "$SEND_OUT"; echo "demo.sh: cleave-tcp --messages failed" >&2; exit 1; }
wait "$tcp_pid" || { cat "$TCP_OUT"; echo "demo.sh: cleave-tcp --messages --recv failed" >&2; exit 1; }
/usr/bin/python3 - "$(cat "$SEND_OUT")" "$(cat "$TCP_OUT")" "$before2" \
  "$("${CTL2[@]}" -j transport list)" <<'PY'
import json, sys
tx, rx = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def tcp(a):
    return next(t for t in json.loads(a)["transports"] if t["name"] == "tcp")["stats"]
b, a = tcp(sys.argv[3]), tcp(sys.argv[4])
ok = (tx["sent_sha256"] == rx["received_sha256"] and
      tx["sent_lengths_sha256"] == rx["received_lengths_sha256"])
print(f"    sent {tx['messages_sent']} messages ({tx['sent']} bytes); received "
      f"{rx['messages_received']}, bytes and lengths {'equal' if ok else 'DIFFERENT'}")
print(f"    the receiving TCP counted {a['placed_bytes'] - b['placed_bytes']} byte(s) placed by "
      f"the NIC and {a['copied_bytes'] - b['copied_bytes']} copied")
sys.exit(0 if ok and rx["messages_received"] == tx["messages_sent"] else 1)
PY

step "RoCEv2 between the two daemons: an app WRITEs into another's memory, then READs it back"
say "cleave-rdma is ib_write_bw for cleave. Each side opens a queue pair with libcleave's"
say "verbs-style calls (cl_pd_alloc, cl_mr_reg with remote access, cl_qp_create); the two swap"
say "QPN, PSN, GID and rkey over a kernel TCP socket as ibv_rc_pingpong does (cl_qp_exchange)"
say "and move their QPs to RTS (cl_qp_connect). The first daemon's app then RDMA WRITEs a seeded"
say "pattern into the second's memory and READs it back; both ends hash the bytes. RoCEv2 packets"
say "(UDP 4791, BTH/RETH/AETH, the ICRC added and checked by the NIC) cross the bridge; each NIC"
say "places WRITE and READ-response payloads straight at their target address."
RDMA_OUT=$(mktemp /tmp/cleave-demo-rdma.XXXXXX)
RDMA_SRV=$(mktemp /tmp/cleave-demo-rdma-srv.XXXXXX)
RDMA_ARGS=(--ops write,read --sizes 4k,1m,64m --hold 2 --timeout 30)
before2=$("${CTL2[@]}" -j transport list)
build/tools/cleave-rdma -s "$RUN2/app.sock" --listen 18515 "${RDMA_ARGS[@]}" >"$RDMA_SRV" &
rdma_pid=$!
wait_kernel_listener 18515 here
build/tools/cleave-rdma -s "$RUN/app.sock" --connect 127.0.0.1:18515 "${RDMA_ARGS[@]}" \
  >"$RDMA_OUT" &
rdma_cli=$!
# While both hold their QPs after the moves (--hold): the operator's view of them.
for _ in $(seq 1500); do
  [ "$(grep -c '^op=' "$RDMA_OUT")" -ge 6 ] && break
  kill -0 "$rdma_cli" 2>/dev/null || break
  sleep 0.02
done
sed 's/^/    /' "$RDMA_OUT"
say "cleavectl qp list, on each daemon while the QPs are still up:"
"${CTL[@]}" qp list | sed 's/^/      /'
"${CTL2[@]}" qp list | sed 's/^/      /'
wait "$rdma_cli" || { cat "$RDMA_OUT"; echo "demo.sh: cleave-rdma --connect failed" >&2; exit 1; }
wait "$rdma_pid" || { cat "$RDMA_SRV"; echo "demo.sh: cleave-rdma --listen failed" >&2; exit 1; }
/usr/bin/python3 - "$before2" "$("${CTL2[@]}" -j transport list)" "$RDMA_OUT" <<'PY'
import json, sys
def roce(a):
    return next(t for t in json.loads(a)["transports"] if t["name"] == "rocev2").get("stats", {})
b, a = roce(sys.argv[1]), roce(sys.argv[2])
lines = [l for l in open(sys.argv[3]) if l.startswith("op=")]
ok = len(lines) == 6 and all("match=yes" in l for l in lines)
d = lambda k: a.get(k, 0) - b.get(k, 0)
print(f"    {len(lines)} moves, every one {'equal on both ends' if ok else 'NOT EQUAL'}; the second "
      f"daemon's QP took {d('rx_packets')} packets: {d('placed_bytes')} payload byte(s) placed by "
      f"the NIC, {d('copied_bytes')} copied; it sent {d('read_responses')} READ responses, "
      f"{d('acks_sent')} ACKs, {d('naks_sent')} NAK(s); {d('bad_icrc')} bad ICRC")
sys.exit(0 if ok else 1)
PY

step "RoCEv2 through a lossy wire: go-back-N against selective repeat"
say "RoCE assumes a lossless fabric; on a lossy one a QP can recover the standard way (go-back-N:"
say "a NAK or timeout sends everything from the loss on again) or, when both sides agree, by"
say "selective repeat (IRN-style: only what was lost, on a timeout from the measured round trip)."
say "The third run sprays each QP over 8 UDP source ports (--params \"spray 8\"), as it would to"
say "spread one QP over an ECMP fabric's paths; its receivers take the reordering that makes."
say "With 1 % of the frames dropped each way at the first daemon's port, 16 MiB WRITE and READ:"
"${CTL[@]}" port fault nic0 loss 0.01 seed 7 | sed 's/^/      /'
port=18516
for mode in go-back-n selective-repeat sprayed; do
  args=(--ops write,read --sizes 16m --timeout 60)
  [ "$mode" = selective-repeat ] && args+=(--selective-repeat)
  [ "$mode" = sprayed ] && args+=(--selective-repeat --params "spray 8")
  before=$("${CTL[@]}" -j transport list)
  build/tools/cleave-rdma -s "$RUN2/app.sock" --listen "$port" "${args[@]}" >"$RDMA_SRV" &
  rdma_pid=$!
  wait_kernel_listener "$port" here
  build/tools/cleave-rdma -s "$RUN/app.sock" --connect "127.0.0.1:$port" "${args[@]}" \
    >"$RDMA_OUT" || { cat "$RDMA_OUT"; echo "demo.sh: cleave-rdma --connect failed" >&2; exit 1; }
  wait "$rdma_pid" || { cat "$RDMA_SRV"; echo "demo.sh: cleave-rdma --listen failed" >&2; exit 1; }
  /usr/bin/python3 - "$mode" "$before" "$("${CTL[@]}" -j transport list)" "$RDMA_OUT" <<'PY'
import json, re, sys
def roce(a):
    return next(t for t in json.loads(a)["transports"] if t["name"] == "rocev2").get("stats", {})
b, a = roce(sys.argv[2]), roce(sys.argv[3])
lines = [l for l in open(sys.argv[4]) if l.startswith("op=")]
ok = len(lines) == 2 and all("match=yes" in l for l in lines)
rate = {re.search(r"op=(\w+)", l)[1]: re.search(r"MBps=([\d.]+)", l)[1] for l in lines}
d = lambda k: a.get(k, 0) - b.get(k, 0)
print(f"    {sys.argv[1]:>16}: WRITE {rate.get('write', '?')} MB/s, READ {rate.get('read', '?')} "
      f"MB/s, {'equal on both ends' if ok else 'NOT EQUAL'}; the first daemon resent "
      f"{d('retransmits')} packet(s) or READ request(s), {d('timeouts')} timeout(s)")
sys.exit(0 if ok else 1)
PY
  port=$((port + 1))
done
"${CTL[@]}" port fault nic0 off | sed 's/^/      /'
rm -f "$RDMA_OUT" "$RDMA_SRV"

step "Solar between the two daemons: block I/O over four paths, through the same lossy wire"
say "Solar is Cleave's block-storage transport: every data packet is one block that carries its own"
say "volume offset and CRC32C, so the target's NIC places it wherever it lands, in any order, and"
say "no one keeps a reorder buffer. A connection spreads its blocks over N paths (UDP source ports"
say "0xC000 | path), each with its own window and RTT. cleave-blk (fio for Solar, cl_blk_*) on the"
say "second daemon exports a 64 MiB volume; one on the first runs random 4 KiB reads and writes, 16"
say "in flight, for 3 s, with 1 % of the frames dropped each way at the first daemon's port. It"
say "checks every read against its shadow of the volume, then both ends hash the whole volume:"
"${CTL[@]}" port fault nic0 loss 0.01 seed 9 | sed 's/^/      /'
BLK_OUT=$(mktemp /tmp/cleave-demo-blk.XXXXXX)
BLK_SRV=$(mktemp /tmp/cleave-demo-blk-srv.XXXXXX)
build/tools/cleave-blk -s "$RUN2/app.sock" --ctl "$RUN2/cleaved.sock" --export 18520 \
  --volume 64m --paths 4 --timeout 30 >"$BLK_SRV" &
blk_srv=$!
wait_kernel_listener 18520 here
build/tools/cleave-blk -s "$RUN/app.sock" --ctl "$RUN/cleaved.sock" --connect 127.0.0.1:18520 \
  --rw randrw --bs 4k --qd 16 --paths 4 --time 3 --timeout 30 >"$BLK_OUT" &
blk_cli=$!
sleep 1.5
say "cleavectl solar list on the second daemon (the target), mid-run:"
"${CTL2[@]}" solar list | sed 's/^/      /'
wait "$blk_cli" || { cat "$BLK_OUT"; echo "demo.sh: cleave-blk --connect failed" >&2; exit 1; }
wait "$blk_srv" || { cat "$BLK_SRV"; echo "demo.sh: cleave-blk --export failed" >&2; exit 1; }
say "cleave-blk on the first daemon (the initiator):"
sed 's/^/    /' "$BLK_OUT"
"${CTL[@]}" port fault nic0 off | sed 's/^/      /'
rm -f "$BLK_OUT" "$BLK_SRV"

step "Solar over two wires: a third daemon, two ports each, and a wire cut mid-run"
say "A third cleaved starts with two ports: 198.18.0.4 on tap cleave3, bridged with the others"
say "(br0), and 198.18.1.4 on tap cleave4, which a second bridge (br1) joins with the second"
say "daemon's second port (198.18.1.3, tap cleave2): two hosts with two wires between them."
cat >"$CONF3" <<EOF
runtime_dir: $RUN3
log:
  format: plain
eal:
  main_lcore: 0
  file_prefix: cleave-demo3
dataplane:
  lcore: 1
  idle_sleep_us: 20
ports:
  - name: nic0
    device: net_cleave3,wire=net_tap3,wire_args=iface=cleave3
    mac: 02:c1:ea:0e:00:05
    ipv4: 198.18.0.4/24
  - name: nic1
    device: net_cleave4,wire=net_tap4,wire_args=iface=cleave4
    mac: 02:c1:ea:0e:01:05
    ipv4: 198.18.1.4/24
EOF
ip netns exec "$NS" build/src/dataplane/cleaved -c "$CONF3" >"$LOG3" 2>&1 &
pid3=$!
wait_daemon "$RUN3/cleaved.sock" "$pid3" "$LOG3"
ns ip link add br1 type bridge
# The kernel's end of each tap gets a MAC of its own, as cleave1's did.
for tap in cleave2=02:c1:ea:0e:01:04=br1 cleave3=02:c1:ea:0e:00:06=br0 \
  cleave4=02:c1:ea:0e:01:06=br1; do
  IFS== read -r dev mac br <<<"$tap"
  ns ip link set "$dev" address "$mac"
  ns ip link set "$dev" txqueuelen 4096
  ns ip link set "$dev" up
  ns ip link set "$dev" master "$br"
done
ns ip link set br1 up
say "cleave-blk on each side learns its cleaved's addresses (port show) and the two swap them on"
say "their side channel; each gives its QP the peer's second address (via), so the connection has"
say "two routes, one per wire: path p goes over route p % 2. The third daemon's cleave-blk writes"
say "64 KiB at random offsets of the second's 64 MiB volume for 2 s, then reads for 2 s; 1 s in,"
say "the third daemon's second wire is cut (port fault nic1 loss 1), and restored 1.5 s later:"
build/tools/cleave-blk -s "$RUN2/app.sock" --ctl "$RUN2/cleaved.sock" --export 18521 \
  --volume 64m --paths 4 --timeout 30 >"$BLK_SRV" &
blk_srv=$!
wait_kernel_listener 18521 here
build/tools/cleave-blk -s "$RUN3/app.sock" --ctl "$RUN3/cleaved.sock" --connect 127.0.0.1:18521 \
  --rw writeread --bs 64k --qd 16 --paths 4 --time 4 --timeout 30 >"$BLK_OUT" &
blk_cli=$!
sleep 1
"${CTL3[@]}" port fault nic1 loss 1 | sed 's/^/      /'
sleep 0.7
say "0.7 s after the cut, the connection as the third daemon shows it (cleavectl solar list):"
"${CTL3[@]}" solar list | sed 's/^/      /'
sleep 0.8
"${CTL3[@]}" port fault nic1 off | sed 's/^/      /'
wait "$blk_cli" || { cat "$BLK_OUT"; echo "demo.sh: cleave-blk --connect failed" >&2; exit 1; }
wait "$blk_srv" || { cat "$BLK_SRV"; echo "demo.sh: cleave-blk --export failed" >&2; exit 1; }
say "cleave-blk on the third daemon: the paths on the cut wire (1 and 3, route 1) went down and"
say "came back, the others carried the blocks meanwhile, and no I/O failed:"
sed 's/^/    /' "$BLK_OUT"
rm -f "$BLK_OUT" "$BLK_SRV"
stop_daemon "$pid3" "$LOG3" third
pid3=""

stop_daemon "$pid2" "$LOG2" second
pid2=""

step "TCP through a lossy wire: 1 % loss and 1 % reordering on cleaved's side"
say "cleavectl port fault injects seeded faults between the NIC and the wire, both directions"
say "(test equipment: these machines have no netem). The first cleaved sends 64 MiB to Linux:"
"${CTL[@]}" port fault nic0 loss 0.01 reorder 0.01 seed 7 | sed 's/^/      /'
before=$("${CTL[@]}" -j transport list)
ns socat -u TCP-LISTEN:5004,reuseaddr - | sha256sum | cut -c1-64 >"$SINK" &
sink_pid=$!
wait_kernel_listener 5004
LOSS_BYTES=$((64 << 20))
"$TCP" -s "$RUN/app.sock" --connect 198.18.0.2:5004 --send "$LOSS_BYTES" --json --timeout 60 \
  >"$SEND_OUT" || { cat "$SEND_OUT"; echo "demo.sh: cleave-tcp --send failed" >&2; exit 1; }
wait "$sink_pid"
/usr/bin/python3 - "$(cat "$SEND_OUT")" "$(cat "$SINK")" "$before" \
  "$("${CTL[@]}" -j transport list)" "$("${CTL[@]}" -j port show nic0)" <<'PY'
import json, sys
r, got = json.loads(sys.argv[1]), sys.argv[2]
def tcp(a):
    return next(t for t in json.loads(a)["transports"] if t["name"] == "tcp")["stats"]
b, a = tcp(sys.argv[3]), tcp(sys.argv[4])
port = json.loads(sys.argv[5])
port = port[0] if isinstance(port, list) else port
f = port["faults"]
ok = "equal" if r["sent_sha256"] == got else "DIFFERENT"
print(f"    the wire dropped {f['tx']['dropped']} frame(s) going out and {f['rx']['dropped']} "
      f"coming in, and held back {f['tx']['reordered'] + f['rx']['reordered']} to reorder them")
print(f"    TCP retransmitted {a['retransmits'] - b['retransmits']} segment(s) "
      f"({a['fast_recoveries'] - b['fast_recoveries']} fast recoveries, "
      f"{a['rtos'] - b['rtos']} timeouts)")
print(f"    cleave-tcp sent {r['sent']} bytes in {r['seconds']:.2f} s ({r['send_gbps']:.2f} "
      f"Gbit/s); the kernel's sha256 is {ok}; close status {r['close_status']}")
sys.exit(0 if ok == "equal" else 1)
PY
"${CTL[@]}" port fault nic0 off | sed 's/^/      /'
rm -f "$SEND_OUT" "$TCP_OUT" "$SINK"

step "A spoofed SYN flood against a listener, while curl still gets its page (SYN cookies)"
FLOOD=build/tests/syn_flood
if [ -x "$FLOOD" ]; then
  say "Port 8081's listener may hold 16 half-open connections (the tcp parameter backlog; 128 by"
  say "default). Past that, cleaved answers each SYN with a SYN cookie (RFC 4987) and keeps"
  say "nothing until the handshake's ACK proves the address. syn_flood (tests/bench/syn_flood.c)"
  say "sends 20 000 SYN/s for 3 s from random spoofed hosts of 198.18.0.0/24; curl fetches meanwhile"
  say "(cleave-tcp stops listening once curl is accepted: later SYNs find no listener):"
  "${CTL[@]}" flow attach port 8081 backlog 16 | sed 's/^/      /'
  before=$("${CTL[@]}" -j transport list)
  before_stats=$("${CTL[@]}" -j stats show)
  "$TCP" -s "$RUN/app.sock" --listen 8081 --http "$HTTP_BYTES" --timeout 30 >/dev/null &
  tcp_pid=$!
  wait_listener "$RUN/cleaved.sock" 8081
  FLOOD_OUT=$(mktemp /tmp/cleave-demo-flood.XXXXXX)
  ns "$FLOOD" 198.18.0.1 8081 198.18.0.0 20000 3 >"$FLOOD_OUT" &
  flood_pid=$!
  sleep 1
  curl_sum=$(ns curl -sS --max-time 30 "http://198.18.0.1:8081/" | sha256sum | cut -c1-64)
  wait "$tcp_pid" || { echo "demo.sh: cleave-tcp --http under the flood failed" >&2; exit 1; }
  wait "$flood_pid" || { echo "demo.sh: syn_flood failed" >&2; exit 1; }
  say "syn_flood: $(cat "$FLOOD_OUT")"
  rm -f "$FLOOD_OUT"
  want_sum=$("$TCP" --pattern "$HTTP_BYTES" | sha256sum | cut -c1-64)
  say "curl got $HTTP_BYTES bytes during the flood, sha256 $( [ "$curl_sum" = "$want_sum" ] \
    && echo equal to the pattern || echo DIFFERENT)"
  [ "$curl_sum" = "$want_sum" ] || exit 1
  /usr/bin/python3 - "$before" "$("${CTL[@]}" -j transport list)" "$before_stats" \
    "$("${CTL[@]}" -j stats show)" <<'PY'
import json, sys
def tcp(a):
    return next(t for t in json.loads(a)["transports"] if t["name"] == "tcp")["stats"]
b, a = tcp(sys.argv[1]), tcp(sys.argv[2])
d = lambda k: a.get(k, 0) - b.get(k, 0)
print(f"    TCP answered {d('syncookies_sent')} SYN(s) with a cookie, took {d('syncookies_recv')} "
      f"cookie(s) back as connections, dropped {d('syn_dropped_no_room')} SYN(s) for want of room")
sb, sa = json.loads(sys.argv[3])["drops"], json.loads(sys.argv[4])["drops"]
drops = sorted(((sa[k] - sb.get(k, 0), k) for k in sa if sa[k] > sb.get(k, 0)), reverse=True)
print("    the dataplane's drops meanwhile, by reason: "
      + (", ".join(f"{k} {n}" for n, k in drops) or "none"))
PY
  "${CTL[@]}" flow detach port 8081 | sed 's/^/      /'
else
  say "($FLOOD is not built (meson -Dbenchmarks=false): no flood)"
fi

step "Log level changed at run time"
"${CTL[@]}" log level debug | sed 's/^/    /'
"${CTL[@]}" log level info | sed 's/^/    /'

step "What happened"
json=$("${CTL[@]}" -j stats show)
/usr/bin/python3 - "$json" <<'PY'
import json, sys
s = json.loads(sys.argv[1])
l = s["lcores"][0]
print(f"    cleaved answered {s['icmp']['echo_replies']} of {s['icmp']['echo_requests']} pings and "
      f"{s['arp']['replies_tx']} ARP request(s); it resolved {s['arp']['resolved']} neighbour(s)")
print(f"    {s['drops']['no_handler']} unmatched packet(s) dropped as no_handler; "
      f"{s['drops_total']} drop(s) in all")
f = s["flows"]
print(f"    flows (TCP, RoCE queue pairs, a Solar connection): {f['flows_opened']} opened, "
      f"{f['flows_closed']} closed; {f['rx_segments']} header(s) to the transports, "
      f"{f['tx_descs']} descriptor(s) "
      f"out; {f['rx_copied_bytes']} payload byte(s) copied by the daemon")
print(f"    the dataplane lcore ran {l['iterations']} loop iterations, busy "
      f"{l['busy_percent']:.3f}% of its cycles")
PY
json=$("${CTL[@]}" -j nic show)
/usr/bin/python3 - "$json" <<'PY'
import json, sys
n = json.loads(sys.argv[1])[0]
c = n["counters"]
print(f"    the {n['backend']} NIC parsed {c['nic_rx_frames']} frame(s), placed "
      f"{c['nic_rx_placed_bytes']} payload byte(s) straight into app buffers and deferred "
      f"{c['nic_rx_deferred']} frame(s) to the copy path; its tables take "
      f"{n['memory']['total_bytes'] / 1e6:.2f} MB of NIC memory")
PY

step "Stopping cleaved with SIGTERM"
t0=$(date +%s%N)
kill -TERM "$pid"
wait "$pid" && rc=0 || rc=$?
t1=$(date +%s%N)
say "exit code $rc after $(( (t1 - t0) / 1000000 )) ms"
tail -n 2 "$LOG" | sed 's/^/    log: /'
[ -e "$RUN/cleaved.sock" ] && say "control socket still there (unexpected)" \
                           || say "control socket removed; tap cleave0 gone with the namespace"
pid=""
rm -f "$LOG"
