#!/usr/bin/python3
"""tcp_loss.py - TCP under loss on a real wire: cleave's sender against Linux's, measured fairly.

cleaved runs as test_tcp.py starts it (a tap in a scratch namespace, the kernel on its other
end), one daemon per NIC backend (cleave: net_cleave over the tap; generic: the tap itself),
both up for the whole run. Faults are set on cleave's port in both directions, seeded, as a new
user would: `cleavectl port fault p0 loss P reorder R seed S` (RX before the NIC sees a frame,
TX as frames leave it). For each backend, each reorder rate (default 0 and 1 %) and each loss
rate (default 0, 0.1, 1 and 5 %), two transfers of --bytes:
  linux  sender: kernel_tcp send (the kernel) -> cleave-tcp --listen --recv --no-check
  cleave sender: cleave-tcp --connect --send --no-check -> kernel_tcp recv (the kernel)
so each row is also cleave against Linux as the receiver (the Linux sender's figure is received
by cleave, cleave's by Linux). Neither end does per-byte work (tests/integration/wire_goodput.py
says how each is measured); the kernel keeps no metrics between connections. Goodput is the
receiver's bytes over its accept-to-FIN time.

Rounds alternate every case (and which sender goes first), so drift on this shared machine
touches all alike; each case's two transfers in a round use the same fault seed, a new one
per round. A line per transfer shows progress: goodput, and what limited the sender (its CPU
and the dataplane lcore's busy time against the wall time, the window at the end (cleave's as
last polled, every 50 ms), retransmissions). Then the table: per backend, reorder and loss,
the median goodput and spread (min-max) of each sender, each as a fraction of its own lossless
median (same backend, loss 0, reorder 0), and cleave's fraction over Linux's (target: >= 1);
then the limits table (medians). A failed or stalled transfer is printed, counted in the
table and left out of the medians. The curve (fraction of lossless against loss, a line per
sender, a panel per backend and reorder rate) goes to --png through gnuplot (Debian's
gnuplot-nox; skipped with a note without it). The last line is every figure as JSON.

Both senders run the same congestion control, --cc (cleave's name; Linux gets its own for
the same algorithm by TCP_CONGESTION): cubic, the default of both, or newreno (Linux: reno).
--linux-cc gives Linux another instead (e.g. bbr, a host's choice that does not take loss for
congestion, so no like-for-like measure of loss recovery).

A default run is 2 backends x 2 reorder x 4 loss x 2 senders x 5 rounds = 160 transfers of
32 MiB: about 12 minutes on a shared two-core VM, most of it at 5 % loss. Asserts
nothing. Needs root.

Usage: tcp_loss.py [--backend cleave|generic|both] [--runs N] [--bytes N] [--loss P,...]
                   [--reorder R,...] [--cc NAME] [--linux-cc NAME] [--png PATH]
                   [--timeout SEC]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import test_tcp as tcp  # noqa: E402
import wire_goodput as wg  # noqa: E402

NAME = {"linux": "Linux", "cleave": "cleave"}


def pct(x):
    return f"{x * 100:g} %"


def med(v):
    return statistics.median(v) if v else None


def fmt(x, spec, none="-"):
    return none if x is None else format(x, spec)


def progress(i, total, rnd, backend, reorder, loss, r):
    head = (f"[{i:3d}/{total}] round {rnd} {backend:7s} reorder {pct(reorder):5s} "
            f"loss {pct(loss):6s} {NAME[r['sender']]:6s} sender:")
    if not r["ok"]:
        return f"{head} FAILED: {r['error']}"
    wall = r["sender_wall"]
    wnd = f"{r['snd_wnd'] / 1048576:.1f} MiB" if r["snd_wnd"] is not None else "-"
    return (f"{head} {r['gbps']:6.3f} Gb/s ({r['seconds']:.2f} s); sender CPU "
            f"{r['sender_cpu'] / wall * 100:3.0f} %, dataplane busy "
            f"{r['dataplane_busy'] / wall * 100:3.0f} %; cwnd {fmt(r['cwnd'], 'd')} "
            f"ssthresh {fmt(r['ssthresh'], 'd')} segs, peer window {wnd}, "
            f"{r['retransmits']} retransmitted")


def plot(path, backends, reorders, rates, frac):
    """Fraction of lossless against loss (the nonzero rates, log scale), a line with min-max
    bars per sender, a panel per backend and reorder rate. Returns a note for the output."""
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        return "no plot: gnuplot is not installed (apt-get install gnuplot-nox)"
    lossy = [p for p in rates if p > 0]
    tmp = tempfile.mkdtemp(prefix="tcp-loss-plot-")
    try:
        script = [f"set terminal pngcairo size {560 * len(reorders)},{420 * len(backends)} "
                  "font ',10'", f"set output '{path}'",
                  f"set multiplot layout {len(backends)},{len(reorders)}",
                  "set logscale x", "set xlabel 'loss each way (%)'",
                  "set ylabel 'goodput / own lossless'", "set yrange [0:*]", "set grid",
                  "set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2",
                  "set key bottom left",
                  "set xtics (" + ", ".join(f"'{p * 100:g}' {p * 100}" for p in lossy) + ")",
                  f"set xrange [{min(lossy) * 100 / 1.5}:"
                  f"{max(lossy) * 100 * 1.5}]"]
        for b in backends:
            for ro in reorders:
                plots = []
                for s in wg.SENDERS:
                    f = os.path.join(tmp, f"{b}-{ro}-{s}.dat")
                    with open(f, "w") as out:
                        for p in lossy:
                            m, lo, hi = frac[(b, ro, p, s)]
                            if m is not None:
                                out.write(f"{p * 100} {m} {lo} {hi}\n")
                    if os.path.getsize(f):
                        plots.append(f"'{f}' using 1:2:3:4 with yerrorlines lw 2 "
                                     f"title '{NAME[s]} sender'")
                script.append(f"set title '{b} backend, reorder {pct(ro)} each way'")
                script.append("plot " + ", ".join(plots) if plots else
                              "set label 1 'no transfer finished' at graph 0.3,0.5; "
                              "plot 2 notitle; unset label 1")
        script.append("unset multiplot")
        p = subprocess.run([gnuplot], input="\n".join(script) + "\n", capture_output=True,
                           text=True, timeout=60)
        if p.returncode != 0:
            return f"no plot: gnuplot failed: {p.stderr.strip()}"
        return f"plot: {os.path.abspath(path)}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=["cleave", "generic", "both"], default="both")
    ap.add_argument("--runs", type=int, default=5, help="rounds (default 5)")
    ap.add_argument("--bytes", type=int, default=32 << 20, help="per transfer (default 32 MiB)")
    ap.add_argument("--loss", default="0,0.001,0.01,0.05", help="loss rates; 0 is always run")
    ap.add_argument("--reorder", default="0,0.01", help="reorder rates; 0 is always run")
    ap.add_argument("--cc", choices=sorted(wg.LINUX_CC), default="cubic",
                    help="both senders' congestion control (default cubic)")
    ap.add_argument("--linux-cc", help="Linux's instead of --cc's (a kernel name: bbr, ...)")
    ap.add_argument("--png", default="tcp_loss.png", help="the plot (default ./tcp_loss.png)")
    ap.add_argument("--timeout", type=float, default=180, help="per transfer, seconds")
    args = ap.parse_args()
    ct.require_root()
    for tool in (tcp.TOOL, wg.KERNEL_TCP):
        if not os.access(tool, os.X_OK):
            raise SystemExit(f"{tool} is not built (set CLEAVE_TCP / KERNEL_TCP)")
    rates = sorted({0.0} | {float(x) for x in args.loss.split(",")})
    reorders = sorted({0.0} | {float(x) for x in args.reorder.split(",")})
    backends = ["cleave", "generic"] if args.backend == "both" else [args.backend]
    cases = [(b, ro, p) for b in backends for ro in reorders for p in rates]
    keys = [(b, ro, p, s) for b, ro, p in cases for s in wg.SENDERS]
    res = {k: [] for k in keys}
    failed = {k: 0 for k in keys}
    total = len(keys) * args.runs
    tag = os.getpid() % 100000
    daemons, port, i = {}, 6000, 0
    t_start = time.monotonic()
    try:
        for b in backends:
            ns = f"cl{tag}l{b[0]}"
            daemons[b] = (tcp.start(b, ns, f"cll{tag}{b[0]}"), ns)
            wg.no_metrics(ns)
            same = wg.set_cc(daemons[b][0], args.cc)
            linux_cc = args.linux_cc or same
        print(f"tcp_loss: backends {', '.join(backends)}; {args.bytes} bytes per transfer; "
              f"{args.runs} rounds; loss {', '.join(pct(p) for p in rates)}, reorder "
              f"{', '.join(pct(r) for r in reorders)}, each way on cleave's port; "
              f"congestion control: cleave {args.cc}, Linux {linux_cc}; {total} transfers",
              flush=True)
        for rnd in range(1, args.runs + 1):
            for ci, (b, ro, p) in enumerate(cases):
                d, ns = daemons[b]
                seed = rnd * 1000 + ci
                order = wg.SENDERS if (rnd + ci) % 2 else wg.SENDERS[::-1]
                for s in order:
                    wg.set_faults(d, p, ro, seed)  # the same draws for both senders
                    port += 1
                    i += 1
                    try:
                        r = wg.transfer(d, ns, s, port, args.bytes, args.timeout, linux_cc)
                    except (subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
                        r = {"ok": False, "error": repr(e), "sender": s}
                    print(progress(i, total, rnd, b, ro, p, r), flush=True)
                    if r["ok"]:
                        res[(b, ro, p, s)].append(r)
                    else:
                        failed[(b, ro, p, s)] += 1
            for d, _ in daemons.values():
                wg.set_faults(d, 0, 0, 0)
    finally:
        ct._run_cleanups()
    report(args, backends, reorders, rates, res, failed, time.monotonic() - t_start)


def report(args, backends, reorders, rates, res, failed, elapsed):
    # The fraction of lossless: a sender's median over its own median at loss 0, reorder 0;
    # its spread is min and max over that same median.
    frac = {}
    for (b, ro, p, s), v in res.items():
        g = [r["gbps"] for r in v]
        base = med([r["gbps"] for r in res[(b, 0.0, 0.0, s)]])
        frac[(b, ro, p, s)] = ((med(g) / base, min(g) / base, max(g) / base) if g and base
                               else (None, None, None))
    print(f"\n{args.runs} rounds in {elapsed / 60:.1f} min, congestion control cleave {args.cc}, "
          f"Linux {args.linux_cc or wg.LINUX_CC[args.cc]}. Goodput: median Gb/s (min-max); "
          "frac: of the same sender's lossless median; cleave/Linux: cleave's frac over Linux's "
          "(target >= 1). The Linux sender's figure is cleave receiving, cleave's is Linux "
          "receiving.")
    print(f"{'backend':8} {'reorder':>7} {'loss':>6} | {'Linux sender Gb/s':>23} {'frac':>5} | "
          f"{'cleave sender Gb/s':>23} {'frac':>5} | {'cleave/Linux':>12} | failed")
    for b in backends:
        for ro in reorders:
            for p in rates:
                cols = []
                for s in wg.SENDERS:
                    g = [r["gbps"] for r in res[(b, ro, p, s)]]
                    f = frac[(b, ro, p, s)][0]
                    cols.append(f"{fmt(med(g), '.3f'):>7} ({fmt(min(g) if g else None, '.3f')}-"
                                f"{fmt(max(g) if g else None, '.3f')}) {fmt(f, '.2f'):>5}"
                                if g else f"{'no run finished':>29}")
                fl, fc = frac[(b, ro, p, "linux")][0], frac[(b, ro, p, "cleave")][0]
                ratio = fmt(fc / fl if fl and fc is not None else None, ".2f")
                nf = f"{failed[(b, ro, p, 'linux')]}/{failed[(b, ro, p, 'cleave')]}"
                print(f"{b:8} {pct(ro):>7} {pct(p):>6} | {cols[0]} | {cols[1]} | {ratio:>12} | "
                      f"{nf}")
    print("\nWhat limited each sender (medians): its CPU and the dataplane lcore's busy time "
          "over the transfer's wall time; cwnd and ssthresh at the end (segments); the peer's "
          "window at the end; retransmissions. A dataplane near 100 % busy is the wire's limit "
          "(the tap), a full window the receiver's, a sender CPU near 100 % the sender's.")
    print(f"{'backend':8} {'reorder':>7} {'loss':>6} {'sender':>6} | {'CPU':>4} {'dp busy':>7} | "
          f"{'cwnd':>5} {'ssthr':>5} {'peer wnd':>9} {'retrans':>7}")
    for b in backends:
        for ro in reorders:
            for p in rates:
                for s in wg.SENDERS:
                    v = res[(b, ro, p, s)]
                    if not v:
                        continue
                    cpu = med([r["sender_cpu"] / r["sender_wall"] for r in v])
                    dp = med([r["dataplane_busy"] / r["sender_wall"] for r in v])
                    cw = med([r["cwnd"] for r in v if r["cwnd"] is not None])
                    ss = med([r["ssthresh"] for r in v if r["ssthresh"] is not None])
                    wn = med([r["snd_wnd"] for r in v if r["snd_wnd"] is not None])
                    rt = med([r["retransmits"] for r in v])
                    print(f"{b:8} {pct(ro):>7} {pct(p):>6} {NAME[s]:>6} | {cpu * 100:3.0f}% "
                          f"{dp * 100:6.0f}% | {fmt(cw, '5.0f'):>5} {fmt(ss, '5.0f'):>5} "
                          f"{fmt(wn / 1048576 if wn else None, '6.1f'):>6} MiB {rt:7.0f}")
    print(plot(args.png, backends, reorders, rates, frac))
    keep = ("gbps", "seconds", "sender_cpu", "receiver_cpu", "sender_wall", "dataplane_busy",
            "cwnd", "ssthresh", "snd_wnd", "retransmits", "counters")
    print(json.dumps({"bytes": args.bytes, "runs": args.runs, "cc": args.cc,
                      "linux_cc": args.linux_cc or wg.LINUX_CC[args.cc], "results": [
        {"backend": b, "reorder": ro, "loss": p, "sender": s, "failed": failed[(b, ro, p, s)],
         "runs": [{k: r.get(k) for k in keep} for r in res[(b, ro, p, s)]]}
        for (b, ro, p, s) in res]}))


if __name__ == "__main__":
    main()
