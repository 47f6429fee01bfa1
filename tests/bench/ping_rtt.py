#!/usr/bin/python3
"""ping_rtt.py - ICMP echo round trip from a Linux peer: through cleaved vs a kernel-owned veth.

Namespace b (the pinging kernel) has two veth links: one to cleaved (net_af_packet, in
namespace a) and one to a plain Linux interface (namespace c), the baseline. Rounds alternate
the two targets so both see the same machine load; each round sends COUNT pings at 1 ms
intervals. Prints per-round medians, then the median and p99 over all pings and the ratio to the
baseline. Asserts nothing. Needs root.

Usage: ping_rtt.py [--rounds N] [--count N]
"""

import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402

CONFIG = """
runtime_dir: {run}
eal:
  file_prefix: {prefix}
dataplane:
  idle_sleep_us: 0
ports:
  - name: p0
    device: net_af_packet0,iface=%s
    ipv4: 10.99.0.1/24
"""


def ping(ns, addr, count):
    p = ct.sh(["ping", "-n", "-c", str(count), "-i", "0.001", "-W", "1", addr],
              ns=ns, timeout=count * 0.01 + 30)
    return [float(x) * 1000.0 for x in re.findall(r"time=([\d.]+) ms", p.stdout)]  # us


def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--count", type=int, default=1000)
    args = ap.parse_args()
    ct.require_root()

    net = ct.Net("p")
    # The baseline: a kernel interface one veth hop from the same pinging namespace.
    c = net.a[:-1] + "c"
    vc, vb2 = net.va[:-2] + "vc", net.va[:-2] + "v2"
    ct.sh(["ip", "netns", "add", c])
    ct._cleanups.append(lambda: ct.sh(["ip", "netns", "del", c], check=False))
    ct.sh(["ip", "link", "add", vb2, "netns", net.b, "type", "veth", "peer", "name", vc, "netns", c])
    ct.sh(["ip", "addr", "add", "10.99.1.2/24", "dev", vb2], ns=net.b)
    ct.sh(["ip", "link", "set", vb2, "up"], ns=net.b)
    ct.sh(["ip", "addr", "add", "10.99.1.1/24", "dev", vc], ns=c)
    ct.sh(["ip", "link", "set", vc, "up"], ns=c)
    ct.sh(["ethtool", "-K", vb2, "tso", "off", "gso", "off", "gro", "off", "tx", "off"], ns=net.b)

    d = ct.Daemon(CONFIG % net.va, ns=net.a)
    ping(net.b, "10.99.0.1", 50)  # warm up: ARP on both sides
    ping(net.b, "10.99.1.1", 50)

    rows, all_cl, all_k = [], [], []
    for r in range(args.rounds):
        cl = ping(net.b, "10.99.0.1", args.count)
        k = ping(net.b, "10.99.1.1", args.count)
        all_cl += cl
        all_k += k
        rows.append((statistics.median(cl), statistics.median(k), len(cl), len(k)))
        print(f"round {r + 1}: cleaved median {rows[-1][0]:.1f} us ({len(cl)} replies), "
              f"kernel median {rows[-1][1]:.1f} us ({len(k)} replies), "
              f"ratio {rows[-1][0] / rows[-1][1]:.2f}")
    s = d.stats()
    d.stop()
    print()
    print(f"ping RTT over {len(all_cl)} pings each, {args.rounds} alternating rounds "
          f"of {args.count} at 1 ms:")
    print(f"  through cleaved (af_packet on veth): median {statistics.median(all_cl):6.1f} us  "
          f"p99 {pct(all_cl, 99):6.1f} us")
    print(f"  kernel-owned veth (baseline):        median {statistics.median(all_k):6.1f} us  "
          f"p99 {pct(all_k, 99):6.1f} us")
    print(f"  ratio cleaved/kernel: median of round ratios "
          f"{statistics.median(a / b for a, b, _, _ in rows):.2f}, "
          f"p99 {pct(all_cl, 99) / pct(all_k, 99):.2f}")
    lcore = s["lcores"][0]
    print(f"  cleaved answered {s['icmp']['echo_replies']} echo requests; dataplane busy "
          f"{lcore['busy_percent']:.3f}% of its lcore's cycles")


if __name__ == "__main__":
    main()
