#!/usr/bin/python3
"""rdma_goodput.py - RoCEv2 goodput against message size between two cleaved daemons, like
ib_write_bw / ib_read_bw, with cleave TCP between the same daemons as the baseline of each round.

The set-up of test_roce.py: namespaces a and b joined by a veth, cleaved in each (a 10.99.0.1, b
10.99.0.2) on the cleave backend (net_cleave over net_af_packet), PMTU 1024 (the most a 1500-byte
port carries). Each round runs, in turn:
  OP SIZE                each of --ops (write, read, send) at each size: cleave-rdma --ops OP
                         --sizes SIZE --iters N (N x SIZE >= --bytes, at most 64 moves in
                         flight): the requester's MB/s from posting to the last completion (its
                         `MBps`), once per recovery of --recovery (gbn: go-back-N, sr: selective
                         repeat; --selective-repeat is --recovery sr), in turn;
  tcp                    cleave-tcp a -> b, --bytes: bytes / seconds of the sender's report.
With --loss P,...: each case runs again with each daemon's port dropping P of the
frames it sends (`cleavectl port fault p0 tx loss P seed S`, seeded per run), right after the
lossless one, and prints what the requester's daemon counted over it (rocev2 retransmits,
timeouts, NAKs received: what limited it).
Prints every run, then per case the median MB/s, the spread and the median of its ratio to the
same round's tcp (a lossy case: to the same round's lossless one). Asserts nothing. Root; a veth,
two daemons and the two cores they poll.

Usage: rdma_goodput.py [--runs N] [--bytes N] [--sizes 4k,64k,1m,16m] [--ops write,read,send]
                       [--selective-repeat | --recovery gbn,sr] [--loss 0.001,0.01]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import test_roce as tr  # noqa: E402  the daemons' configuration

RDMA = os.environ.get("CLEAVE_RDMA", "build/tools/cleave-rdma")
TCP = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")


def rdma(d, op, size, iters, sr):
    port = tr.free_port()
    args = ["--json", "--timeout", "120", "--ops", op, "--sizes", str(size), "--iters",
            str(iters), "--mtu", "1024"] + (["--selective-repeat"] if sr else [])
    srv = ct.spawn([RDMA, "-s", d["b"], "--listen", str(port)] + args, stdout=subprocess.PIPE,
                   text=True)
    ct.wait_until(lambda: ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip(), timeout=15,
                  what="cleave-rdma to listen")
    out = subprocess.run([RDMA, "-s", d["a"], "--connect", f"127.0.0.1:{port}"] + args,
                         capture_output=True, text=True, timeout=600)
    srv.communicate(timeout=60)
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or len(rows) != 1 or not rows[0]["match"]:
        raise SystemExit(f"cleave-rdma {op} {size} failed: {out.stderr}{out.stdout}")
    return rows[0]["MBps"]


# What the requester (daemon a) saw in a lossy case: its rocev2 totals' change over the run.
REQUESTER = ("retransmits", "timeouts", "naks_received")


def tcp(d, daemon_b, nbytes):
    port = tr.free_port() % 10000 + 20000
    rx = ct.spawn([TCP, "-s", d["b"], "--listen", str(port), "--recv", "--json", "--timeout",
                   "120"], stdout=subprocess.PIPE, text=True)
    ct.wait_until(lambda: any(l["local"].endswith(f":{port}") for l in
                              daemon_b.ctl("flow", "list")[1]["listeners"]),
                  timeout=15, what="cleave-tcp to listen")
    tx = subprocess.run([TCP, "-s", d["a"], "--connect", f"{tr.IP['b']}:{port}", "--send",
                         str(nbytes), "--json", "--timeout", "120"], capture_output=True,
                        text=True, timeout=600)
    rx.communicate(timeout=60)
    r = json.loads(tx.stdout.splitlines()[-1])
    if tx.returncode != 0 or r["error"] != 0:
        raise SystemExit(f"cleave-tcp failed: {tx.stderr}")
    return nbytes / r["seconds"] / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--bytes", type=int, default=64 << 20)
    ap.add_argument("--sizes", default="4k,64k,1m,16m")
    ap.add_argument("--ops", default="write,read", help="of write, read, send")
    ap.add_argument("--selective-repeat", action="store_true", help="--recovery sr")
    ap.add_argument("--recovery", default="", help="gbn, sr or both in turn: gbn,sr")
    ap.add_argument("--loss", default="", help="loss rates to run each case at too, e.g. 0.01")
    a = ap.parse_args()
    losses = [float(x) for x in a.loss.split(",") if x]
    recoveries = [r for r in (a.recovery or ("sr" if a.selective_repeat else "gbn")).split(",")]
    ops = a.ops.split(",")
    if not set(recoveries) <= {"gbn", "sr"} or not set(ops) <= {"write", "read", "send"}:
        raise SystemExit("rdma_goodput.py: --recovery takes gbn, sr; --ops write, read, send")
    ct.require_root()
    sizes = [ct.size_bytes(s) for s in a.sizes.split(",")]
    net = ct.Net("g", peer_addr=None)
    try:
        ifaces, nss = {"a": net.va, "b": net.vb}, {"a": net.a, "b": net.b}
        daemons = {s: ct.Daemon(tr.CONFIG % {"iface": ifaces[s], "mac": tr.MAC[s], "ip": tr.IP[s]},
                                ns=nss[s]) for s in ("a", "b")}
        sock = {s: os.path.join(daemons[s].run_dir, "app.sock") for s in ("a", "b")}
        results = {}

        def case(run, op, size, sr, tag):
            name = f"{op} {size}" + (f" {tag}" if tag else "")
            iters = max(1, a.bytes // size)
            mbps = rdma(sock, op, size, iters, sr)
            results.setdefault(name, []).append((mbps, mbps / base))
            print(f"run {run}: {name} x{iters}: {mbps:.1f} MB/s", flush=True)
            for p in losses:
                for d in daemons.values():
                    d.ctl("port", "fault", "p0", "tx", "loss", str(p), "seed", str(run + 1))
                before = daemons["a"].transport_stats("rocev2") or {}
                try:
                    lossy = rdma(sock, op, size, iters, sr)
                finally:
                    for d in daemons.values():
                        d.ctl("port", "fault", "p0", "off")
                after = daemons["a"].transport_stats("rocev2") or {}
                seen = "  ".join(f"{k} {after.get(k, 0) - before.get(k, 0)}" for k in REQUESTER)
                results.setdefault(f"{name} loss {p}", []).append((lossy, lossy / mbps))
                print(f"run {run}: {name} x{iters} loss {p}: {lossy:.1f} MB/s "
                      f"({lossy / mbps:.2f} of lossless; requester: {seen})", flush=True)

        for run in range(a.runs):
            base = tcp(sock, daemons["b"], a.bytes)
            results.setdefault("tcp", []).append((base, 1.0))
            print(f"run {run}: tcp {base:.1f} MB/s", flush=True)
            for op in ops:
                for size in sizes:
                    for rec in recoveries:
                        case(run, op, size, rec == "sr", rec if len(recoveries) > 1 else "")
        print(f"\nmedians over {a.runs} runs (MB/s; ratio to cleave tcp a->b of the same round, "
              "a lossy case's to its lossless one)")
        for name, v in results.items():
            rates = [x for x, _ in v]
            print(f"  {name:>30}: {statistics.median(rates):8.1f} MB/s  (spread "
                  f"{min(rates):.1f}-{max(rates):.1f})  ratio {statistics.median(r for _, r in v):.2f}")
    finally:
        ct._run_cleanups()


if __name__ == "__main__":
    main()
