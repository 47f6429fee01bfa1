#!/usr/bin/python3
"""blk_wires.py - Solar over two wires: goodput with one wire down against both up, and the time
from a wire cut to full goodput on the other wire.

The set-up of test_solar.py's SolarTwoWires: namespaces a and b joined by two veth pairs, cleaved
in each with two ports (a 10.99.0.1 and 10.99.1.1, b 10.99.0.2 and 10.99.1.2) on the cleave
backend; cleave-blk --export on b (64 MiB), --connect on a over four paths, so paths 0 and 2 go
over wire 0 and paths 1 and 3 over wire 1. Each round runs three cases for --time seconds each
(random --bs writes, --qd in flight), in an order that rotates from round to round:
  - both: both wires up;
  - one: a's second wire cut before the run (`port fault p1 loss 1`, both directions): its paths
    go down within their first timeouts and the run goes over wire 0;
  - cut: both up, and a's second wire cut halfway through. cleave-blk reports the I/Os done
    every --interval ms; the time to full goodput is from the cut to the end of the first
    window of --window ms after it whose goodput reaches 90 % of the round's `one` goodput,
    given also in RTOs of the cut paths (their rto_ns from `flow show` just before the cut).
Prints every run, then the medians over --runs rounds: goodput both, one, their ratio, and
the time from the cut to full goodput (ms and RTOs). Asserts nothing. Root; four veth ends, two
daemons and two tools on this machine's two cores: every figure is CPU-limited here (a wire is
a veth, not a link with a rate), so one wire carries what two do and the ratio says the
connection lost nothing by the cut, not what a second link's capacity adds.

Usage: blk_wires.py [--runs N] [--bs 64k] [--qd 16] [--time 4] [--interval 5] [--window 20]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import test_solar as ts  # noqa: E402  the daemons' configuration

BLK = os.environ.get("CLEAVE_BLK", "build/tools/cleave-blk")
def run_case(d, case, a):
    """One run: goodput (MB/s over the run), the cut (cut: its time on cleave-blk's clock and the
    ticks, else None), the cut paths' RTO in ms (cut, else None), and cleave-blk's result row."""
    port = ts.free_port()

    def tool(side, *args):
        return [BLK, "--socket", os.path.join(d[side].run_dir, "app.sock"), "--ctl",
                d[side].socket, "--json", "--timeout", "60", "--paths", "4", *args]
    d["a"].ctl("port", "fault", "p1", *(["loss", "1"] if case == "one" else ["off"]))
    tgt = ct.spawn(tool("b", "--export", str(port), "--volume", "64m"), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    ct.wait_until(lambda: ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip(), timeout=15,
                  what="cleave-blk to listen")
    ini = ct.spawn(tool("a", "--connect", f"127.0.0.1:{port}", "--rw", "randwrite", "--bs", a.bs,
                        "--qd", str(a.qd), "--time", str(a.time), "--interval", str(a.interval)),
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    ticks, rows, cut_t, rto_ms = [], [], None, None
    offset = None  # wall clock minus cleave-blk's t, from the latest tick read
    for line in ini.stdout:
        if not line.startswith("{"):
            continue
        r = json.loads(line)
        if "t" not in r:
            rows.append(r)
            continue
        ticks.append((r["t"], r["ios"]))
        offset = time.monotonic() - r["t"]
        if case == "cut" and cut_t is None and r["t"] >= a.time / 2:
            f = [x for x in d["a"].ctl("flow", "list")[1]["flows"] if x["transport"] == "solar"]
            info = d["a"].ctl("flow", "show", str(f[0]["id"]))[1]["info"]
            rto_ms = max(info["path1_rto_ns"], info["path3_rto_ns"]) / 1e6
            d["a"].ctl("port", "fault", "p1", "loss", "1")
            cut_t = time.monotonic() - offset  # applied when cleavectl returned
    ini.wait(timeout=120)
    tgt.communicate(timeout=60)
    d["a"].ctl("port", "fault", "p1", "off")
    if ini.returncode != 0 or len(rows) != 1 or not rows[0]["ok"]:
        raise SystemExit(f"cleave-blk {case} failed: {ini.stderr.read()} {rows}")
    r = rows[0]
    return r["mb_per_s"], (cut_t, ticks) if case == "cut" else None, rto_ms, r


def time_to_full(cut, target_mbps, a):
    """ms from the cut to the end of the first window of a.window ms after it whose goodput is
    at least 90 % of target_mbps; None when none is."""
    cut_t, ticks = cut
    bs = ct.size_bytes(a.bs)
    w = a.window / 1e3
    after = [(t, n) for t, n in ticks if t >= cut_t]
    for i, (t0, n0) in enumerate(after):
        for t1, n1 in after[i + 1:]:
            if t1 - t0 >= w:
                if (n1 - n0) * bs / (t1 - t0) / 1e6 >= 0.9 * target_mbps:
                    return (t1 - cut_t) * 1e3
                break
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bs", default="64k")
    ap.add_argument("--qd", type=int, default=16)
    ap.add_argument("--time", type=int, default=4)
    ap.add_argument("--interval", type=int, default=5)
    ap.add_argument("--window", type=int, default=20)
    a = ap.parse_args()
    ct.require_root()
    net = ct.Net("w", peer_addr=None)
    try:
        va1, vb1 = net.add_wire(1)
        wires = {"a": (net.va, va1), "b": (net.vb, vb1)}
        nss = {"a": net.a, "b": net.b}
        d = {s: ct.Daemon(ts.TWO_PORTS % {
            "device": ts.device("cleave", wires[s][0]), "mac": ts.MAC[s], "ip": ts.IP[s],
            "device1": ts.device("cleave", wires[s][1], 1), "mac1": ts.MAC1[s],
            "ip1": ts.IP1[s]}, ns=nss[s]) for s in ("a", "b")}
        cases = ["both", "one", "cut"]
        got = {c: [] for c in cases}
        full, rtos, ratios = [], [], []
        for run in range(a.runs):
            order = cases[run % 3:] + cases[:run % 3]
            this = {}
            for c in order:
                goodput, cut, rto_ms, r = run_case(d, c, a)
                this[c] = (goodput, cut, rto_ms)
                got[c].append(goodput)
                downs = [p["downs"] for p in r["path"]]
                print(f"run {run}: {c}: {goodput:.1f} MB/s, {r['iops']:.0f} IOPS, p99 "
                      f"{r['lat_us']['p99']:.0f} us, paths down {downs}", flush=True)
            ratios.append(this["one"][0] / this["both"][0])
            ms = time_to_full(this["cut"][1], this["one"][0], a)
            rto = this["cut"][2]
            print(f"run {run}: cut: full goodput on wire 0 {ms if ms is None else round(ms, 1)} "
                  f"ms after the cut; the cut paths' RTO {rto:.1f} ms", flush=True)
            if ms is not None:
                full.append(ms)
                rtos.append(ms / rto)
        print(f"\nmedians over {a.runs} runs, {a.bs} random writes, qd {a.qd}, four paths")
        print(f"  goodput both wires up   {statistics.median(got['both']):8.1f} MB/s")
        print(f"  goodput one wire down   {statistics.median(got['one']):8.1f} MB/s "
              f"(ratio to both, per round: {statistics.median(ratios):.2f})")
        if full:
            print(f"  cut to full goodput     {statistics.median(full):8.1f} ms "
                  f"({statistics.median(rtos):.1f} RTOs of the cut paths; {len(full)} of "
                  f"{a.runs} runs reached it)")
        else:
            print("  cut to full goodput: no run reached 90 % of the one-wire goodput")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
