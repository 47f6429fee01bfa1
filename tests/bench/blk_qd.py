#!/usr/bin/python3
"""blk_qd.py - block I/O IOPS and latency against queue depth between two cleaved daemons: Solar
against cleave TCP carrying the same I/Os, in the same rounds.

The set-up of test_solar.py: namespaces a and b joined by a veth, cleaved in each (a 10.99.0.1,
b 10.99.0.2) on the cleave backend (net_cleave over net_af_packet). cleave-blk --export on b (a
--volume of 64 MiB by default), --connect on a, for each --rw mode (randread, randwrite) and
each queue depth of --qd (1, 4, 16, 64), --bs bytes an I/O (4k) for --time seconds (3), every
I/O verified as the tool does. Each case runs twice a round, in turn: `solar` (--paths paths,
4) and `tcp` (--transport tcp: each I/O a request message and a reply over one cleave TCP
flow, the target copying between its message buffers and the volume). The order of the two
alternates from round to round. Prints every run (IOPS, p50, p99), then per case the medians
over --runs rounds and the median of the per-round ratio Solar / TCP (IOPS; latency: Solar's
over TCP's, lower is better). Asserts nothing. Root; a veth, two daemons and the two cores
they poll, shared with the two tools: the figures are CPU-limited on this machine.

Usage: blk_qd.py [--runs N] [--qd 1,4,16,64] [--rw randread,randwrite] [--bs 4k] [--time 3]
                 [--paths 4] [--volume 64m]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import test_solar as ts  # noqa: E402  the daemons' configuration

BLK = os.environ.get("CLEAVE_BLK", "build/tools/cleave-blk")


def blk(daemons, transport, rw, qd, a):
    """One run of the pair: the initiator's JSON row."""
    port = ts.free_port()
    common = ["--json", "--timeout", "60", "--bs", a.bs, "--qd", str(qd)]
    if transport == "tcp":
        common += ["--transport", "tcp"]
    else:
        common += ["--paths", str(a.paths)]

    def tool(side, *args):
        d = daemons[side]
        return [BLK, "--socket", os.path.join(d.run_dir, "app.sock"), "--ctl", d.socket, *common,
                *args]
    tgt = ct.spawn(tool("b", "--export", str(port), "--volume", a.volume), stdout=subprocess.PIPE,
                   stderr=subprocess.PIPE, text=True)
    ct.wait_until(lambda: ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip(), timeout=15,
                  what="cleave-blk to listen")
    out = subprocess.run(tool("a", "--connect", f"127.0.0.1:{port}", "--rw", rw, "--time",
                              str(a.time)), capture_output=True, text=True, timeout=300)
    tgt.communicate(timeout=60)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or len(rows) != 1 or not rows[0]["ok"]:
        raise SystemExit(f"cleave-blk {transport} {rw} qd {qd} failed: {out.stderr}{out.stdout}")
    return rows[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--qd", default="1,4,16,64")
    ap.add_argument("--rw", default="randread,randwrite")
    ap.add_argument("--bs", default="4k")
    ap.add_argument("--time", type=int, default=3)
    ap.add_argument("--paths", type=int, default=4)
    ap.add_argument("--volume", default="64m")
    a = ap.parse_args()
    depths = [int(x) for x in a.qd.split(",")]
    modes = a.rw.split(",")
    ct.require_root()
    net = ct.Net("q", peer_addr=None)
    try:
        ifaces, nss = {"a": net.va, "b": net.vb}, {"a": net.a, "b": net.b}
        daemons = {s: ct.Daemon(ts.CONFIG % {"device": ts.device("cleave", ifaces[s]),
                                             "mac": ts.MAC[s], "ip": ts.IP[s]}, ns=nss[s])
                   for s in ("a", "b")}
        results = {}  # (rw, qd, transport) -> [(iops, p50, p99)]
        for run in range(a.runs):
            order = ["solar", "tcp"] if run % 2 == 0 else ["tcp", "solar"]
            for rw in modes:
                for qd in depths:
                    for t in order:
                        r = blk(daemons, t, rw, qd, a)
                        lat = r["lat_us"]
                        results.setdefault((rw, qd, t), []).append((r["iops"], lat["p50"],
                                                                    lat["p99"]))
                        print(f"run {run}: {rw} qd {qd} {t}: {r['iops']:.0f} IOPS, p50 "
                              f"{lat['p50']:.1f} us, p99 {lat['p99']:.1f} us", flush=True)
        print(f"\nmedians over {a.runs} runs, {a.bs} I/Os (ratio: Solar / TCP of the same round)")
        print(f"  {'case':>22} {'solar IOPS':>11} {'tcp IOPS':>9} {'ratio':>6} "
              f"{'p50 us s/t':>15} {'ratio':>6} {'p99 us s/t':>17} {'ratio':>6}")
        for rw in modes:
            for qd in depths:
                s, t = results[(rw, qd, "solar")], results[(rw, qd, "tcp")]
                med = [[statistics.median(x[k] for x in v) for k in range(3)] for v in (s, t)]
                ratio = [statistics.median(x[k] / y[k] for x, y in zip(s, t) if y[k] > 0)
                         for k in range(3)]
                print(f"  {rw + ' qd ' + str(qd):>22} {med[0][0]:11.0f} {med[1][0]:9.0f} "
                      f"{ratio[0]:6.2f} {med[0][1]:7.1f}/{med[1][1]:<7.1f} {ratio[1]:6.2f} "
                      f"{med[0][2]:8.1f}/{med[1][2]:<8.1f} {ratio[2]:6.2f}")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
