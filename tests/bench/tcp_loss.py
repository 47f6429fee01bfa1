#!/usr/bin/python3
"""tcp_loss.py - TCP goodput against the Linux kernel under seeded loss on cleave's side.

Starts cleaved as test_tcp.py does (a tap in a scratch namespace, the kernel on its other end)
on one NIC backend, and measures goodput kernel -> cleave (cleave-tcp --listen --recv) and
cleave -> kernel (cleave-tcp --connect --send) at each loss rate, set at run time with
`cleavectl port fault p0 loss P seed S` in both directions of the port (RX before the NIC sees
a frame, TX as frames leave it). Rounds interleave the rates, so drift on this shared machine
touches all of them alike; each round uses a new seed. Goodput is cleave-tcp's own figure (bytes
hashed, or bytes acknowledged, over its transfer time). Prints every run, then per rate and
direction the median, the spread (min-max) and the ratio of the medians against lossless (0 %),
measured in the same daemon run. A transfer that fails (at high loss the kernel's 30 s socket
timeout can end one that stalls in retransmission backoff) is printed, counted and left out of
the median. Asserts nothing. Needs root.

Usage: tcp_loss.py [--backend cleave|generic] [--runs N] [--bytes N] [--loss P,P,...]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import test_tcp as tcp  # noqa: E402

PEER = tcp.PEER


def transfer(sock, direction, port, n, timeout):
    """One transfer; returns cleave-tcp's goodput in Gb/s and its JSON."""
    tool = [tcp.TOOL, "-s", sock, "--json", "--timeout", str(int(timeout))]
    peer = ["ip", "netns", "exec", NS, "/usr/bin/python3", PEER]
    if direction == "kernel->cleave":
        t = ct.spawn(tool + ["--listen", str(port), "--recv"], stdout=subprocess.PIPE,
                             text=True)
        k = subprocess.run(peer + ["client", tcp.OURS, str(port), "--send", str(n), "--retry",
                                   "10"], capture_output=True, text=True, timeout=timeout)
        out, _ = t.communicate(timeout=timeout)
        key = "recv_gbps"
    else:
        k = ct.spawn(peer + ["server", tcp.KERNEL, str(port), "--recv"],
                             stdout=subprocess.PIPE, text=True)
        if k.stdout.readline() != "ready\n":
            raise RuntimeError("tcp_peer.py server did not start")
        out = subprocess.run(tool + ["--connect", f"{tcp.KERNEL}:{port}", "--send", str(n)],
                             capture_output=True, text=True, timeout=timeout).stdout
        k.communicate(timeout=timeout)
        key = "send_gbps"
    r = json.loads(out.splitlines()[-1])
    if r["error"] != 0 or r["close_status"] != 0:
        raise RuntimeError(f"{direction}: transfer failed: {r}")
    return r[key], r


def main():
    global NS
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["cleave", "generic"], default="cleave")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--loss", default="0,0.001,0.01,0.05")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args()
    ct.require_root()
    rates = [float(x) for x in args.loss.split(",")]
    directions = ["kernel->cleave", "cleave->kernel"]
    tag = os.getpid() % 100000
    NS = f"cl{tag}bl"
    figures = {(p, d): [] for p in rates for d in directions}
    failed = {(p, d): 0 for p in rates for d in directions}
    port = 6000
    try:
        d = tcp.start(args.backend, NS, f"clb{tag}")
        sock = os.path.join(d.run_dir, "app.sock")
        print(f"tcp_loss: backend {args.backend}, {args.bytes} bytes per transfer, "
              f"{args.runs} rounds, loss {rates} both directions on cleave's side", flush=True)
        for run in range(args.runs):
            for p in rates:
                if p == 0:
                    d.ctl("port", "fault", "p0", "off")
                else:
                    d.ctl("port", "fault", "p0", "loss", str(p), "seed", str(run + 1))
                for direction in directions:
                    port += 1
                    try:
                        gbps, r = transfer(sock, direction, port, args.bytes, args.timeout)
                    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                        # Counted, and left out of the median (the summary says how many).
                        failed[(p, direction)] += 1
                        print(f"  run {run + 1} loss {p * 100:g} % {direction}: FAILED: {e}",
                              flush=True)
                        continue
                    figures[(p, direction)].append(gbps)
                    print(f"  run {run + 1} loss {p * 100:g} % {direction}: {gbps:.3f} Gb/s "
                          f"({r['seconds']:.2f} s)", flush=True)
        d.ctl("port", "fault", "p0", "off")
        print(f"\nmedian goodput over {args.runs} runs (min-max), ratio against 0 % loss:")
        for direction in directions:
            zero = figures.get((0.0, direction))
            base = statistics.median(zero) if zero else None
            for p in rates:
                v = figures[(p, direction)]
                nfail = failed[(p, direction)]
                fails = f"  {nfail} run(s) failed" if nfail else ""
                if not v:
                    print(f"  {direction:15s} loss {p * 100:5g} %: no run finished{fails}")
                    continue
                med = statistics.median(v)
                ratio = f"  ratio {med / base:.2f}" if base else ""
                print(f"  {direction:15s} loss {p * 100:5g} %: {med:7.3f} Gb/s "
                      f"({min(v):.3f}-{max(v):.3f}){ratio}{fails}")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
