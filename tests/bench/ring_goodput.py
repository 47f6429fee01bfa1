#!/usr/bin/python3
"""ring_goodput.py - receive goodput through a receive ring (cl_ring_*) against plain posted
buffers, a kernel sender, cleave-tcp receiving both ways in the same run.

Sets cleaved up as tests/integration/test_tcp.py does (a scratch namespace, one port at
198.18.0.1 over a DPDK tap whose kernel end is 198.18.0.2), on the backend asked for. Each
round runs cleave-tcp --listen twice, once with --recv (posted buffers of --chunk bytes, a
--window of them) and once with --ring (a ring of --window bytes, chunks of --chunk bytes), each
fed BYTES of the pattern by tcp_peer.py from the kernel; the order alternates between rounds.
Prints every run, the medians of recv_gbps and the ratio ring/posted. Every run must end clean
with the right SHA-256, else the script stops. Asserts nothing about speed. Needs root.

Usage: ring_goodput.py [--backend cleave|generic] [--runs N] [--bytes N] [--window N] [--chunk N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import cleave_pattern  # noqa: E402
import cleavetest as ct  # noqa: E402

import test_tcp  # noqa: E402  (its wire, addresses and cleaved set-up)

TOOL = test_tcp.TOOL
PEER = test_tcp.PEER
OURS = test_tcp.OURS


def setup(backend):
    """cleaved on a tap in a scratch namespace, as the TCP integration test sets it up."""
    tag = os.getpid() % 100000
    ns, tap = f"cl{tag}rg", f"clr{tag}"
    return ns, test_tcp.start(backend, ns, tap)


def one_run(ns, sock, port, mode, args):
    rx = (["--recv"] if mode == "posted" else ["--ring", str(args.window)])
    tool = subprocess.Popen([TOOL, "-s", sock, "--json", "--timeout", "30", "--listen", str(port),
                             "--window", str(args.window), "--chunk", str(args.chunk), *rx],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        peer = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", PEER, "client", OURS,
                               str(port), "--send", str(args.bytes), "--retry", "10"],
                              capture_output=True, text=True, timeout=300)
        out, err = tool.communicate(timeout=300)
    finally:
        if tool.poll() is None:
            tool.kill()
            tool.wait()
    r = json.loads(out.splitlines()[-1])
    k = json.loads(peer.stdout.splitlines()[-1])
    want = cleave_pattern.sha256(1, args.bytes)
    if (tool.returncode != 0 or r["error"] != 0 or k["error"] is not None
            or r["received"] != args.bytes or r["received_sha256"] != want):
        sys.exit(f"{mode} run failed: {r} {err.strip()} kernel: {k}")
    return r["recv_gbps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=["cleave", "generic"], default="cleave")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=64 << 20)
    ap.add_argument("--window", type=int, default=4 << 20)
    ap.add_argument("--chunk", type=int, default=256 << 10)
    args = ap.parse_args()
    ct.require_root()
    try:
        ns, d = setup(args.backend)
        sock = os.path.join(d.run_dir, "app.sock")
        res = {"posted": [], "ring": []}
        port = 6000
        for i in range(args.runs):
            order = ["posted", "ring"] if i % 2 == 0 else ["ring", "posted"]
            for mode in order:
                port += 1
                g = one_run(ns, sock, port, mode, args)
                res[mode].append(g)
                print(f"run {i + 1} {mode:6s} recv {g:.3f} Gbit/s", flush=True)
        mp, mr = statistics.median(res["posted"]), statistics.median(res["ring"])
        print(f"backend {args.backend}, {args.bytes} bytes per run, window/ring {args.window}, "
              f"chunk {args.chunk}, {args.runs} runs each")
        print(f"posted buffers: median {mp:.3f} Gbit/s (min {min(res['posted']):.3f}, "
              f"max {max(res['posted']):.3f})")
        print(f"receive ring:   median {mr:.3f} Gbit/s (min {min(res['ring']):.3f}, "
              f"max {max(res['ring']):.3f})")
        print(f"ratio ring/posted (medians): {mr / mp:.3f}")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
