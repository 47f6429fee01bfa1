#!/usr/bin/python3
"""syn_flood.py - legitimate TCP connections a cleaved listener accepts per second while spoofed
SYNs flood it, against none.

Namespace a holds cleaved (10.99.0.1, net_cleave over net_af_packet on a veth; the default app
quota, 64 flows); namespace b the kernel (10.99.0.2), the flood and the client. An acceptor app
(rawapp, in this process) listens on 5001, counts each CL_EV_ACCEPTED and resets the flow at
once. For each case, on a fresh cleaved (a flood's leftovers, like half-open flows that wait
for their SYN-ACK retries, would otherwise weigh on the next case):
  - the flood: syn_flood (tests/bench/syn_flood.c) sends SYNs from random addresses of
    10.99.0.0/24 at RATE per second for SECONDS + 1 (none for rate 0), and says what it achieved;
  - after 0.5 s of it, a kernel client in b connects, waits for the acceptor's RST, and connects
    again, for SECONDS: each connect and each wait for the RST may take 1 s, else it counts as
    failed (the RST may also reach connect() before it returns: accepted all the same).
Figures: client connections completed (connected and accepted) per second, failures, the app's
accepts, the achieved flood rate; per daemon and rate the median of --runs runs (the rates, and
the daemons given with --cleaved, alternate within each run) and the spread. Asserts nothing.
Needs root.

Usage: syn_flood.py [--runs N] [--seconds S] [--rates 0,10000,100000] [--cleaved A,B]
Environment: CLEAVED (the daemon to measure unless --cleaved names some), SYN_FLOOD (the sender).
"""

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import rawapp as ra  # noqa: E402

FLOOD = os.environ.get("SYN_FLOOD", "build/tests/syn_flood")
CONFIG = ct.CONFIG_HEAD + ct.port_yaml(
    "net_cleave0,wire=net_af_packet0,wire_args=iface=%(iface)s", "02:00:00:00:00:01", "10.99.0.1")

CLIENT = """
import collections, socket, sys, time
secs = float(sys.argv[1]); ok = 0; why = collections.Counter()
end = time.monotonic() + secs
while time.monotonic() < end:
    s = socket.socket()
    s.settimeout(1.0)
    try:
        s.connect(('10.99.0.1', 5001))
        s.recv(1)
        ok += 1
    except ConnectionResetError:  # the acceptor's RST, before or after connect() returned
        ok += 1
    except OSError as e:
        why[type(e).__name__] += 1
    finally:
        s.close()
print(ok, sum(why.values()), ",".join("%s:%d" % kv for kv in sorted(why.items())) or "-",
      flush=True)
"""


class Acceptor(threading.Thread):
    """Listens on 5001; counts accepted flows and resets each at once."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.app = ra.RawApp(os.path.join(d.run_dir, "app.sock"), versions=(1, 2))
        self.cq = self.app.create_pipe(ra.COMPLETION, 1024)
        self.sq = self.app.create_pipe(ra.SUBMIT, 1024, cq=self.cq.id)
        st, _ = self.app.listen(5001, self.cq.id)
        assert st == 0, st
        self.accepted = 0
        self.stop = False
        self.start()

    def run(self):
        while not self.stop:
            c = self.cq.consume()
            if c is None:
                time.sleep(0.0001)
                continue
            if c["flags"] & ra.COMP_EVENT and c["opcode"] == ra.EV_ACCEPTED:
                self.accepted += 1
                while not self.sq.produce(ra.send_entry(ra.OP_FLOW_ABORT, target=c["flow"])):
                    time.sleep(0.0001)

    def close(self):
        self.stop = True
        self.join()
        self.app.close()


def case(rate, seconds):
    net = ct.Net("s")
    d = ct.Daemon(CONFIG % {"iface": net.va}, ns=net.a)
    acc = Acceptor(d)
    flood = None
    try:
        if rate:
            flood = subprocess.Popen(["ip", "netns", "exec", net.b, FLOOD, "10.99.0.1", "5001",
                                      "10.99.0.0", str(rate), str(seconds + 1)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
        before = acc.accepted
        client = subprocess.run(["ip", "netns", "exec", net.b, "python3", "-c", CLIENT,
                                 str(seconds)], capture_output=True, text=True, timeout=60)
        accepted = acc.accepted - before
        ok, fail, why = client.stdout.split()
        ok, fail = int(ok), int(fail)
        achieved = "-"
        if flood is not None:
            out, err = flood.communicate(timeout=60)
            if flood.returncode != 0:
                raise SystemExit(f"syn_flood failed: {err}")
            achieved = out.strip()
        tcp = d.transport_stats("tcp") or {}
        return ok / seconds, f"{fail} failed ({why})", accepted, achieved, tcp
    finally:
        if flood is not None and flood.poll() is None:
            flood.kill()
            flood.wait()
        acc.close()
        d.stop()
        net.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--rates", default="0,10000,100000")
    ap.add_argument("--cleaved", default=ct.CLEAVED, help="daemons to compare, comma-separated")
    args = ap.parse_args()
    ct.require_root()
    rates = [int(r) for r in args.rates.split(",")]
    daemons = [os.path.abspath(p) for p in args.cleaved.split(",")]
    for i, p in enumerate(daemons):
        print(f"cleaved {i}: {p}")
    res = {(i, r): [] for i in range(len(daemons)) for r in rates}
    cases = [(i, r) for r in rates for i in range(len(daemons))]
    for run in range(args.runs):
        for i, r in cases if run % 2 == 0 else list(reversed(cases)):
            ct.CLEAVED = daemons[i]
            cps, fail, accepted, achieved, tcp = case(r, args.seconds)
            res[(i, r)].append(cps)
            keys = ("syncookies_sent", "syncookies_recv", "syn_no_room", "conn_opened")
            extra = " ".join(f"{k}={tcp[k]}" for k in keys if k in tcp)
            print(f"run {run} cleaved {i} flood {r:>6}/s: {cps:7.1f} conn/s accepted, {fail}, "
                  f"app accepts {accepted}; flood: {achieved}; {extra}", flush=True)
    print("\nmedian connections/s accepted (min-max) over %d runs of %.1f s" %
          (args.runs, args.seconds))
    for i in range(len(daemons)):
        base = statistics.median(res[(i, rates[0])])
        for r in rates:
            v = res[(i, r)]
            m = statistics.median(v)
            ratio = f"  {m / base:.2f} of no flood" if base and r else ""
            print(f"  cleaved {i} flood {r:>6} SYN/s: {m:8.1f}  ({min(v):.1f}-{max(v):.1f}){ratio}")


if __name__ == "__main__":
    main()
