#!/usr/bin/python3
"""msg_goodput.py - TCP message-mode goodput between two cleaved daemons, and where the receiver's
payload went: placed by the NIC or copied by the dataplane.

The set-up of tests/integration/test_tcp_c2c.py: namespaces a and b joined by a veth, cleaved in
each on the cleave backend (net_cleave over net_af_packet). Each run: cleave-tcp --listen
--messages 0 --recv on b, cleave-tcp --connect --messages COUNT --msg-min --msg-max on a (the
seeded sizes of cleave-tcp --help); goodput is the receiver's recv_gbps (message bytes over its
time from the first byte to the last). After each run the receiver's TCP counters
(`cleavectl transport list`) say how many bytes the NIC placed and how many were copied.

--baseline DIR runs the same cases with DIR's cleaved (a build dir of another revision, e.g. the
copy path of main) in alternating rounds, so both see the same load, and prints the ratio of
the medians. Prints every run, then medians and spread. Asserts nothing about speed; every run
must end clean with equal SHA-256s, else the script stops. Needs root.

Usage: msg_goodput.py [--runs N] [--count N] [--msg-min B] [--msg-max B] [--baseline DIR]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import cleavetest as ct  # noqa: E402

import test_tcp_c2c as c2c  # noqa: E402  (its wire, addresses and daemon configuration)


def run_once(cleaved, args, port):
    """One transfer a -> b with `cleaved`; returns (recv_gbps, placed, copied)."""
    ct.CLEAVED = cleaved
    net = ct.Net("m", peer_addr=None)
    d = {}
    try:
        for side, iface, ns in (("a", net.va, net.a), ("b", net.vb, net.b)):
            d[side] = ct.Daemon(c2c.CONFIG % {"device": c2c.device("cleave", iface),
                                             "mac": c2c.MAC[side], "ip": c2c.IP[side]}, ns=ns)

        def tool(side, *a):
            sock = os.path.join(d[side].run_dir, "app.sock")
            p = subprocess.Popen([c2c.TOOL, "-s", sock, "--json", "--timeout", "60",
                                  *map(str, a)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
            ct._cleanups.append(lambda p=p: p.poll() is None and (p.kill(), p.wait()))
            return p

        rx = tool("b", "--listen", port, "--messages", 0, "--recv", "--msg-max", args.msg_max)

        def listed():
            code, out, _ = d["b"].ctl("flow", "list", check=False)
            return code == 0 and any(l["local"].endswith(f":{port}") for l in out["listeners"])
        ct.wait_until(listed, timeout=10, what="the listener")
        tx = tool("a", "--connect", f"{c2c.IP['b']}:{port}", "--messages", args.count,
                  "--msg-min", args.msg_min, "--msg-max", args.msg_max, "--seed", 5)
        res = {}
        for name, p in (("tx", tx), ("rx", rx)):
            out, err = p.communicate(timeout=600)
            if p.returncode != 0 or not out.strip():
                sys.exit(f"{name} failed ({p.returncode}): {err}")
            res[name] = json.loads(out.splitlines()[-1])
        if res["rx"]["received_sha256"] != res["tx"]["sent_sha256"]:
            sys.exit(f"the bytes differ: {res}")
        stats = next(t["stats"] for t in d["b"].ctl("transport", "list")[1]["transports"]
                     if t["name"] == "tcp")
        return res["rx"]["recv_gbps"], stats["placed_bytes"], stats["copied_bytes"]
    finally:
        ct._run_cleanups()  # daemons, processes, namespaces, temporary directories


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--msg-min", type=int, default=64 << 10)
    ap.add_argument("--msg-max", type=int, default=1 << 20)
    ap.add_argument("--baseline", help="build dir whose cleaved to compare against")
    args = ap.parse_args()
    ct.require_root()
    builds = ct.builds(args.baseline)
    got = {name: [] for name, _ in builds}
    port = 6000
    for r in range(args.runs):
        order = builds if r % 2 == 0 else builds[::-1]
        for name, path in order:
            port += 1
            g, placed, copied = run_once(path, args, port)
            got[name].append(g)
            print(f"run {r + 1} {name:8s} {g:7.3f} Gb/s  receiver placed {placed} B, "
                  f"copied {copied} B", flush=True)
    print(f"{args.count} messages of {args.msg_min}..{args.msg_max} B, {args.runs} runs")
    for name, v in got.items():
        print(f"{name:8s} median {statistics.median(v):7.3f} Gb/s  (min {min(v):.3f}, "
              f"max {max(v):.3f})")
    if args.baseline:
        print(f"ratio this/baseline: "
              f"{statistics.median(got['this']) / statistics.median(got['baseline']):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
