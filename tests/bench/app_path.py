#!/usr/bin/python3
"""app_path.py - the app path through a running cleaved, measured by cleave-perf (libcleave).

Starts cleaved on a net_null port and runs cleave-perf RUNS times. Each run measures, in the same
process and moment, the request round trip through the dataplane and its baseline (a round trip
over a unix socketpair between two processes), and copy throughput by the dataplane and its
baseline (memcpy in the app). Prints every run, then medians and the ratios of the medians.
Asserts nothing. Needs root (cleavetest's helpers).

Usage: app_path.py [--runs N] [--count N] [--bytes N]
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402

PERF = os.environ.get("CLEAVE_PERF", "build/tools/cleave-perf")
CONFIG = """
runtime_dir: {run}
eal:
  file_prefix: {prefix}
ports:
  - name: n0
    device: net_null0,no-rx=1
    ipv4: 10.9.0.1/24
"""
FIGURES = {
    "rtt_us": r"nop   round trip .* median ([\d.]+) us",
    "rtt_p99_us": r"nop   round trip .* p99 ([\d.]+) us",
    "pipelined_mrps": r"nop   pipelined.*: ([\d.]+) M requests/s",
    "copy_gbps": r"copy  .*: ([\d.]+) GB/s",
    "send_gbps": r"send  .*: ([\d.]+) GB/s",
    "base_rtt_us": r"base  unix socketpair .* median ([\d.]+) us",
    "base_memcpy_gbps": r"base  memcpy .*: ([\d.]+) GB/s",
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--count", type=int, default=100000)
    ap.add_argument("--bytes", type=int, default=65536)
    args = ap.parse_args()
    ct.require_root()
    try:
        d = ct.Daemon(CONFIG)
        sock = os.path.join(d.run_dir, "app.sock")
        runs = []
        for i in range(args.runs):
            out = subprocess.run([PERF, "-s", sock, "-n", str(args.count), "-b", str(args.bytes),
                                  "-k", "64", "all"], capture_output=True, text=True, timeout=300,
                                 check=True).stdout
            r = {k: float(re.search(v, out).group(1)) for k, v in FIGURES.items()}
            runs.append(r)
            print(f"run {i + 1}: " + "  ".join(f"{k} {v:g}" for k, v in r.items()))
        med = {k: statistics.median(r[k] for r in runs) for k in FIGURES}
        print(f"\nmedians over {args.runs} runs, {args.count} requests of {args.bytes} B each:")
        print(f"  round trip app -> dataplane -> app: {med['rtt_us']:.2f} us (p99 "
              f"{med['rtt_p99_us']:.2f}); unix socketpair: {med['base_rtt_us']:.2f} us; "
              f"ratio {med['base_rtt_us'] / med['rtt_us']:.1f}x faster")
        print(f"  pipelined requests: {med['pipelined_mrps']:.2f} M/s")
        print(f"  copy by the dataplane: {med['copy_gbps']:.2f} GB/s, send into posted receives: "
              f"{med['send_gbps']:.2f} GB/s; memcpy in the app: {med['base_memcpy_gbps']:.2f} GB/s;"
              f" ratio {med['copy_gbps'] / med['base_memcpy_gbps']:.2f}")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
