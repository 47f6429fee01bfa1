#!/usr/bin/python3
"""rx_cost.py - host cycles per byte to receive a TCP stream from Linux: cleaved's dataplane
lcore (net_cleave, the NIC model's time apart) against the Linux kernel receiving the same
stream over a veth, with offloads off and on, in the same run.

Namespaces and addresses as tcp_goodput.py (whose helpers this reuses): a holds cleaved
(10.99.0.1, net_cleave over net_af_packet on a's veth end) and the kernel's 10.99.1.1; b the
sender (kernel_tcp send, tests/bench/kernel_tcp.c) at 10.99.0.2 and 10.99.1.2. Cases, each run
once per round, every round in the same order so all see the same load:
  linux-off     kernel_tcp recv in a, veth offloads off (TSO, GSO, GRO: 1448-byte segments);
  linux-on      the same with TSO, GSO and GRO on (64 KB segments);
  cleave        cleave-tcp --listen --recv --no-check in a, on this build's cleaved;
  baseline      the same on --baseline DIR's cleaved (another revision's build dir).
perf records every CPU (cpu-clock, -F FREQ; for the cleave cases with DWARF call chains of the
cleaved process, which has no frame pointers) while the sender runs. A sample's weight is its
period, CPU time, turned into cycles at the CPU frequency tcp_goodput.py reports.
  Linux: samples of the two kernel_tcp processes whose kernel call chain is in the receive
    path (process_backlog, __netif_receive_skb_core, tcp_v4_rcv, tcp_recvmsg,
    tcp_rcv_established, __napi_poll): the receive softirq the veth runs in the sender's
    context and the receiver's copy to user space. The sender's ACK processing is in it too
    (a little more than the receiver alone); softirq work deferred to ksoftirqd is not (a
    little less): other processes' traffic on a shared machine cannot be told from it.
  cleave: samples of the dataplane lcore's thread, split by call chain into the NIC model and
    the wire (net_cleave's service body, the model, af_packet and the kernel under it: what
    hardware does), the dataplane's work on packets and requests (call chains through the RX
    path, the transports' bursts, completions, the app path's requests, TX flushes: "host"),
    and the rest, the loop polling (printed apart, "with polling", as is the host's cost of one
    idle iteration, measured over a second with nothing flowing just before the transfer).
    busy_cycles from `cleavectl stats show` (NIC included) is printed too: TSC cycles, so on a
    shared CPU it also counts the time the lcore was descheduled.
Prints per round, then per case the median and spread (min-max) of cycles per byte and the
median of per-round ratios to linux-off and linux-on. Asserts nothing. Needs root and perf.

Usage: rx_cost.py [--runs N] [--bytes N] [--freq HZ] [--baseline DIR]
"""

import argparse
import collections
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import tcp_goodput as tg  # noqa: E402

# The NIC model and the wire, as seen in the lcore's call chains.
NIC = re.compile(r"cleave::pmd::|cleave::nic::|model_mbuf|NicModel|eth_af_packet|"
                 r"rte_service_run|service_run")
# The dataplane's work on packets and requests (what only runs when there is some); the rest of
# the host's samples are the loop polling.
WORK = re.compile(r"Dataplane::rx_packet|Dataplane::flush\(|FlowPath::rx\(|FlowPath::rx_flush|"
                  r"FlowPath::deliver|FlowPath::send|FlowPath::app_flush|FlowPath::flow_request|"
                  r"CompletionBatch::|post_completions|AppPath::serve_sq|AppPath::execute")
# The Linux receive path.
LINUX_RX = re.compile(r"\b(process_backlog|__netif_receive_skb_core|tcp_v4_rcv|tcp_recvmsg|"
                      r"tcp_rcv_established|__napi_poll)\b")


def perf_start(out, pid=None, freq=4999):
    cmd = ["perf", "record", "-q", "-o", out, "-F", str(freq)]
    cmd += ["-p", str(pid), "--call-graph", "dwarf,16384"] if pid else ["-a", "-g"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.5)  # perf is recording
    return p


def perf_stop(p):
    p.send_signal(signal.SIGINT)
    p.wait(timeout=60)


def samples(path):
    """(comm, tid, period_ns, [frames]) of every sample."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,period,ip,sym,dso"],
                         capture_output=True, text=True, timeout=600).stdout
    cur = None
    for line in out.splitlines():
        if not line.strip():  # samples are separated by blank lines
            if cur:
                yield cur
            cur = None
        elif cur is None:
            m = re.match(r"\s*(.+?)\s+(\d+)\s+(\d+)\s*$", line)
            if m:
                cur = (m.group(1), int(m.group(2)), int(m.group(3)), [])
        else:
            cur[3].append(line.strip())
    if cur:
        yield cur


def linux_rx_ns(path):
    # Only the two kernel_tcp processes' samples: the veth delivers in the sender's context, the
    # receiver copies in its own, and what other processes on the machine receive stays out.
    return sum(p for comm, _, p, fr in samples(path)
               if comm == "kernel_tcp" and any(LINUX_RX.search(f) for f in fr))


def lcore_split(path, lcore_tid):
    """(work ns, polling ns, NIC and wire ns) of the dataplane lcore's samples."""
    work = poll = nic = 0
    for _, tid, p, fr in samples(path):
        if tid != lcore_tid:
            continue
        # The kernel under the lcore is af_packet's (the wire), but for an app's doorbell.
        kernel = fr and "[kernel.kallsyms]" in fr[0] and not any("eventfd" in f for f in fr)
        if kernel or any(NIC.search(f) for f in fr):
            nic += p
        elif any(WORK.search(f) for f in fr):
            work += p
        else:
            poll += p
    return work, poll, nic


def lcore_tid(pid):
    """The dataplane lcore's thread: EAL names its workers rte-worker-N (lcore-worker-N in
    later DPDK releases)."""
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            if f.read().startswith(("rte-worker", "lcore-worker")):
                return int(t)
    raise SystemExit("cleaved has no lcore worker thread")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--freq", type=int, default=4999)
    ap.add_argument("--baseline", help="another revision's build dir, measured alternately")
    args = ap.parse_args()
    ct.require_root()
    if shutil.which("perf") is None:
        print("skipped: perf is not installed")
        raise SystemExit(ct.SKIP)
    n = args.bytes
    hz, hz_from = tg.cpu_hz()
    tmp = tempfile.mkdtemp(prefix="cleave-rxcost-")
    net = ct.Net("x", peer_addr=tg.B_KIP + "/24")
    ct.sh(["ip", "addr", "add", tg.KA + "/24", "dev", net.va], ns=net.a)
    ct.sh(["ip", "addr", "add", tg.KB + "/24", "dev", net.vb], ns=net.b)
    cfg = tg.CONFIG % {"main": 0, "lcore": 1, "sleep": "", "iface": net.va,
                       "mac": "02:c1:ea:0e:0a:01", "ip": tg.A_IP}
    offloads = ["tso", "gso", "gro"]

    def set_offloads(on):
        v = "on" if on else "off"
        for ns, dev in ((net.a, net.va), (net.b, net.vb)):
            ct.sh(["ethtool", "-K", dev] + [x for o in offloads for x in (o, v)], ns=ns)
        ct.sh(["ethtool", "-K", net.vb, "tx", v], ns=net.b)

    builds = ct.builds(args.baseline)
    cases = ["linux-off", "linux-on"] + [("cleave" if b == "this" else b) for b, _ in builds]
    res = collections.defaultdict(list)  # case -> [cycles/byte]
    busy = collections.defaultdict(list)  # cleave cases: lcore busy cycles/byte, NIC included
    nicr = collections.defaultdict(list)  # cleave cases: NIC and wire cycles/byte
    polled = collections.defaultdict(list)  # cleave cases: host work and polling cycles/byte
    per_iter = collections.defaultdict(list)  # cleave cases: host cycles per idle iteration
    print(f"{n} bytes per transfer, {args.runs} rounds; CPU {hz / 1e6:.0f} MHz ({hz_from}); "
          f"perf cpu-clock at {args.freq} Hz; cleaved: main lcore on CPU 0, dataplane lcore "
          f"on CPU 1 (the sender and the rest of the machine share both)")
    for run in range(args.runs):
        port = 7000 + run * 10
        line = []
        for on, case in ((False, "linux-off"), (True, "linux-on")):
            set_offloads(on)
            # cleaved may have left the veth end with its own MAC: the kernels learn again.
            for ns in (net.a, net.b):
                ct.sh(["ip", "neigh", "flush", "all"], ns=ns)
            data = os.path.join(tmp, f"{case}.{run}.data")
            rx = tg.ready(tg.popen([tg.KERNEL_TCP, "recv", tg.KA, str(port + on)], ns=net.a))
            pf = perf_start(data, freq=args.freq)
            tx = tg.popen([tg.KERNEL_TCP, "send", tg.KA, str(port + on), str(n)], ns=net.b)
            tg.finish(tx, "sender")
            tg.finish(rx, "receiver")
            perf_stop(pf)
            cpb = linux_rx_ns(data) * hz / 1e9 / n
            res[case].append(cpb)
            line.append(f"{case} {cpb:.3f}")
            os.unlink(data)
        set_offloads(False)
        for k, (name, binary) in enumerate(builds):
            case = "cleave" if name == "this" else name
            ct.CLEAVED = binary
            d = ct.Daemon(cfg, ns=net.a)
            p = port + 2 + k
            t = tg.popen([tg.TOOL, "-s", os.path.join(d.run_dir, "app.sock"), "--json",
                          "--timeout", "60", "--no-check", "--listen", str(p), "--recv"])
            ct.wait_until(lambda: any(x["local"].endswith(f":{p}") for x in
                                      d.ctl("flow", "list")[1]["listeners"]), timeout=10,
                          what="the listener")
            tid = lcore_tid(d.proc.pid)
            data = os.path.join(tmp, f"{case}.{run}.data")
            # Calibration: the host's time per iteration with nothing flowing, for a second.
            q0 = d.stats()["lcores"][0]
            pf = perf_start(data, pid=d.proc.pid, freq=args.freq)
            time.sleep(1)
            perf_stop(pf)
            q1 = d.stats()["lcores"][0]
            w, p_, _ = lcore_split(data, tid)
            per_iter[case].append((w + p_) * hz / 1e9 / max(1, q1["iterations"] - q0["iterations"]))
            s0 = d.stats()["lcores"][0]
            pf = perf_start(data, pid=d.proc.pid, freq=args.freq)
            tx = tg.popen([tg.KERNEL_TCP, "send", tg.A_IP, str(p), str(n)], ns=net.b)
            tg.finish(tx, "sender")
            tg.finish(t, "receiver")
            perf_stop(pf)
            s1 = d.stats()["lcores"][0]
            d.stop()
            d.kill()
            work, poll, nic = lcore_split(data, tid)
            os.unlink(data)
            res[case].append(work * hz / 1e9 / n)
            polled[case].append((work + poll) * hz / 1e9 / n)
            nicr[case].append(nic * hz / 1e9 / n)
            busy[case].append((s1["busy_cycles"] - s0["busy_cycles"]) / n)
            line.append(f"{case} host work {res[case][-1]:.3f} (with polling "
                        f"{polled[case][-1]:.3f}; NIC+wire {nicr[case][-1]:.3f}; busy wall "
                        f"{busy[case][-1]:.3f}; {per_iter[case][-1]:.0f} cycles per idle "
                        f"iteration)")
        print(f"round {run + 1}: " + ", ".join(line) + " cycles/byte", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)

    def med(v):
        return f"{statistics.median(v):8.3f} ({min(v):.3f}-{max(v):.3f})"
    print(f"\n{'case':10} {'cycles/byte':>24} {'/ linux-off':>12} {'/ linux-on':>11}")
    for case in cases:
        r_off = statistics.median(a / b for a, b in zip(res[case], res["linux-off"]))
        r_on = statistics.median(a / b for a, b in zip(res[case], res["linux-on"]))
        print(f"{case:10} {med(res[case]):>24} {r_off:12.3f} {r_on:11.3f}")
    for case in cases[2:]:
        print(f"{case:10} host with the loop's polling: {med(polled[case])} cycles/byte; "
              f"NIC model and wire (the emulated hardware's): {med(nicr[case])}; lcore busy TSC "
              f"cycles (wall), NIC included: {med(busy[case])}; host cycles per idle iteration: "
              f"{med(per_iter[case])}")
    print("medians over the rounds (min-max); ratios: median of per-round ratios")


if __name__ == "__main__":
    main()
