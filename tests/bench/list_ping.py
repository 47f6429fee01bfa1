#!/usr/bin/python3
"""list_ping.py - ping through cleaved, and new apps, while `cleavectl flow list` lists many flows:
quiet against listing, for this build and a baseline's.

Namespace a holds cleaved (10.99.0.1, net_af_packet on a veth, idle_sleep_us 0); b the kernel that
pings it (ping_rtt.py's way, tests/bench/ping_rtt.py). An app (rawapp, ABI version 3, so any
revision serves it) creates --flows queue pairs: each is a flow in the dataplane's table (a QP in
RESET sends nothing). With --shards N the daemon runs N dataplane lcores (shard k on CPU 1 - k % 2,
so two have a CPU each) and N apps (cleaved gives each new app the shard with the fewest) make
--flows/N QPs each, so every shard holds its share; the pings reach shard 0 (ICMP's queue). Per
daemon and round: COUNT pings at 10 ms intervals with nothing else running (quiet), then the same
while `cleavectl -j flow list` runs in a loop (listing), where every 100 ms a new app also says
hello (refused or timed out: counted). Prints per round the ping median, p99 and max in
microseconds for both, the listings done and how long each took, and the apps refused; then the
medians over the rounds. With --baseline DIR (another revision's build dir) the daemons alternate
within each round. Asserts nothing. Needs root.

Usage: list_ping.py [--rounds N] [--count N] [--flows N] [--shards N] [--baseline DIR]
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import ping_rtt as pr  # noqa: E402
import rawapp as ra  # noqa: E402

CONFIG = """
runtime_dir: {run}
eal:
  file_prefix: {prefix}
dataplane:
  idle_sleep_us: 0
%(lcores)snic:
  max_flows: %(max_flows)d
apps:
  quota:
    flows: %(flows)d
  allow:
    - uid: 0
ports:
  - name: p0
    device: net_af_packet0,iface=%(iface)s
    ipv4: 10.99.0.1/24
"""


def ping_rtts(ns, count):
    """Round trips in microseconds of COUNT pings at 10 ms intervals."""
    p = subprocess.run(["ip", "netns", "exec", ns, "ping", "-n", "-c", str(count), "-i", "0.01",
                        "-W", "5", "10.99.0.1"], capture_output=True, text=True,
                       timeout=count * 0.01 + 120)
    return [float(x) * 1000.0 for x in pr.re.findall(r"time=([\d.]+) ms", p.stdout)]


def summary(v):
    if not v:
        return "no replies"
    return f"p50 {statistics.median(v):8.1f} p99 {pr.pct(v, 99):8.1f} max {max(v):8.1f}"


def measure(d, ns, count):
    quiet = ping_rtts(ns, count)
    stop = threading.Event()
    lists, refused = [], [0, 0]  # listing seconds; [hellos, refused]

    def lister():
        while not stop.is_set():
            t0 = time.monotonic()
            code, out, err = d.ctl("flow", "list", check=False)
            lists.append((time.monotonic() - t0, code == 0 and out is not None and
                          len(out["flows"])))

    def hellos():
        while not stop.is_set():
            refused[0] += 1
            try:
                a = ra.RawApp(os.path.join(d.run_dir, "app.sock"), "late", versions=(3, 3),
                              timeout=2)
                if a.status != 0:
                    refused[1] += 1
                a.close()
            except OSError:
                refused[1] += 1
            stop.wait(0.1)
    threads = [threading.Thread(target=f) for f in (lister, hellos)]
    for t in threads:
        t.start()
    busy = ping_rtts(ns, count)
    stop.set()
    for t in threads:
        t.join()
    return quiet, busy, lists, refused


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--flows", type=int, default=100000)
    ap.add_argument("--shards", type=int, default=1,
                    help="dataplane lcores (on CPUs 1, 0, 1, ...)")
    ap.add_argument("--baseline", help="another revision's build dir, measured alternately")
    args = ap.parse_args()
    ct.require_root()
    net = ct.Net("q")
    if args.shards < 1:
        ap.error("--shards: 1 or more")
    lcores = "" if args.shards == 1 else "  lcores: [%s]\n" % ", ".join(
        f'"{1 + k}@{1 - k % 2}"' for k in range(args.shards))
    cfg = CONFIG % {"max_flows": 1 << 17, "flows": args.flows + 16, "iface": net.va,
                    "lcores": lcores}
    got = {name: {"quiet": [], "busy": [], "lists": [], "refused": []}
           for name, _ in ct.builds(args.baseline)}
    print(f"{args.flows} flows (queue pairs) on {args.shards} shard(s); {args.count} pings at "
          f"10 ms per measure; cleaved's main lcore on CPU 0, shard k's on CPU 1 - k % 2 (shared "
          f"with ping, cleavectl and the rest of the machine)")
    for r in range(args.rounds):
        builds = ct.builds(args.baseline)
        for name, binary in (builds if r % 2 == 0 else builds[::-1]):
            ct.CLEAVED = binary
            d = ct.Daemon(cfg, ns=net.a)
            apps = [ra.RawApp(os.path.join(d.run_dir, "app.sock"), f"many{k}", versions=(3, 3),
                              timeout=30) for k in range(args.shards)]
            t0 = time.monotonic()
            timeouts = 0
            for k, app in enumerate(apps):
                cq = app.create_pipe(ra.COMPLETION, 1024)
                for i in range(args.flows * k // args.shards, args.flows * (k + 1) // args.shards):
                    st = app.qp_create(cq.id, 1, 1)[0]
                    while st == -110 and timeouts < 100:  # CL_ETIMEDOUT: a loaded lcore; again
                        timeouts += 1
                        st = app.qp_create(cq.id, 1, 1)[0]
                    if st != 0:
                        raise SystemExit(f"{name}: QP {i} refused ({st})")
            made = time.monotonic() - t0
            pr_warm = ping_rtts(net.b, 20)  # ARP on both sides
            quiet, busy, lists, refused = measure(d, net.b, args.count)
            for app in apps:
                app.close()
            d.stop(timeout=60)
            d.kill()
            g = got[name]
            g["quiet"] += quiet
            g["busy"] += busy
            g["lists"] += lists
            g["refused"].append(refused)
            secs = [s for s, _ in lists]
            rows = sorted({n for _, n in lists if n is not False})
            print(f"round {r + 1} {name:8}: {args.flows} QPs made in {made:.1f} s "
                  f"({len(pr_warm)} warm-up replies)\n"
                  f"  quiet   {summary(quiet)} us ({len(quiet)} replies)\n"
                  f"  listing {summary(busy)} us ({len(busy)} replies); {len(lists)} listings, "
                  f"{statistics.median(secs) if secs else 0:.2f} s each, rows {rows}; "
                  f"apps refused {refused[1]} of {refused[0]}", flush=True)
    print()
    for name, g in got.items():
        print(f"{name:8} quiet   {summary(g['quiet'])} us\n"
              f"{name:8} listing {summary(g['busy'])} us; apps refused "
              f"{sum(x[1] for x in g['refused'])} of {sum(x[0] for x in g['refused'])}")
    print("all replies of all rounds pooled (microseconds)")


if __name__ == "__main__":
    main()
