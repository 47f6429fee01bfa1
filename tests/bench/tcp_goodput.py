#!/usr/bin/python3
"""tcp_goodput.py - TCP goodput and host CPU cycles per byte: kernel<->kernel, cleave<->kernel,
cleave<->cleave, over one veth in one run.

Namespaces a and b are joined by a veth (offloads off, as cleaved's af_packet wire needs, so the
kernel baseline runs on the same link). The kernels have 10.99.1.1 (a) and 10.99.1.2 (b); b
also has 10.99.0.2 for the kernel end of the cleave cases. cleaved a (10.99.0.1) runs on the
cleave backend (net_cleave over net_af_packet) on a's veth end; cleaved b (10.99.0.3) on b's
end, for cleave<->cleave only. Cases, each run --runs times in rounds so all see the same load:
  kernel->kernel  iperf3 -n BYTES, client in a, server in b (no daemon running);
  cleave->kernel  cleave-tcp --connect --send in a, kernel_tcp recv in b;
  kernel->cleave  kernel_tcp send in b, cleave-tcp --listen --recv in a;
  cleave->cleave  cleave-tcp --connect --send on a, cleave-tcp --listen --recv on b.
No end does per-byte work of its own, like iperf3: kernel_tcp (tests/bench/kernel_tcp.c) sends
from one buffer filled once and drops what it reads, cleave-tcp runs with --no-check (no
pattern made, nothing hashed).

Goodput: payload bytes / wall time from starting the sending side until both ends have exited
(the receiver already listening). CPU: busy jiffies of all CPUs in /proc/stat (user + nice +
system + irq + softirq) over the same interval, times the CPU frequency, divided by the payload
bytes. The frequency is cpufreq's cpuinfo_max_freq when the kernel has cpufreq, else the
"cpu MHz" of /proc/cpuinfo (on a VM: the TSC frequency the hypervisor reports); the output says
which. Whole host: the daemons, the apps, the kernel's softirqs and everything else running.
cleaved's dataplane polls: with idle_sleep_us 0 (the daemon's default, used unless
--idle-sleep-us says otherwise) each running daemon keeps one core busy whether or not data
flows, which this measure counts, as it should.

Prints per-run figures, then per case the median goodput, median cycles per byte, the spread
(min-max) and the ratios to kernel->kernel of the same run. Asserts nothing. Needs root, iperf3.

Usage: tcp_goodput.py [--runs N] [--bytes N] [--idle-sleep-us US]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402

TOOL = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")
KERNEL_TCP = os.environ.get("KERNEL_TCP", "build/tests/kernel_tcp")
A_IP, B_IP, B_KIP = "10.99.0.1", "10.99.0.3", "10.99.0.2"
KA, KB = "10.99.1.1", "10.99.1.2"

CONFIG = """
runtime_dir: {run}
log:
  format: plain
eal:
  file_prefix: {prefix}
  main_lcore: %(main)d
dataplane:
  lcore: %(lcore)d
%(sleep)s""" + ct.TCP_APPS + ct.port_yaml(
    "net_cleave0,wire=net_af_packet0,wire_args=iface=%(iface)s", "%(mac)s", "%(ip)s")

def cpu_hz():
    f = "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"
    if os.path.exists(f):
        with open(f) as fh:
            return int(fh.read()) * 1e3, "cpufreq cpuinfo_max_freq"
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) * 1e6, "/proc/cpuinfo cpu MHz"
    raise SystemExit("cannot tell the CPU frequency")


def busy_jiffies():
    with open("/proc/stat") as fh:
        v = [int(x) for x in fh.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6]  # user nice system irq softirq


def popen(cmd, ns=None):
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    return ct.spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(p, what, timeout=300):
    out, err = p.communicate(timeout=timeout)
    if p.returncode != 0:
        raise SystemExit(f"{what} failed ({p.returncode}): {err.strip()}\n{out}")
    return out


def measure(start_receiver, start_sender, n):
    """Starts the receiver (ready when this returns), then times the sender: (seconds, jiffies)."""
    rx = start_receiver()
    j0, t0 = busy_jiffies(), time.monotonic()
    tx = start_sender()
    finish(tx, "sender")
    finish(rx, "receiver")
    return time.monotonic() - t0, busy_jiffies() - j0


def ready(p):
    line = p.stdout.readline()
    if line.strip() not in ("ready",):
        raise SystemExit(f"receiver did not start: {line} {p.stderr.read()}")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--idle-sleep-us", type=int, default=None,
                    help="cleaved's dataplane.idle_sleep_us (default: the daemon's own, 0)")
    args = ap.parse_args()
    ct.require_root()
    if shutil.which("iperf3") is None:
        print("skipped: iperf3 is not installed (apt-get install iperf3)")
        raise SystemExit(ct.SKIP)
    n = args.bytes
    hz, hz_from = cpu_hz()
    hz_per_jiffy = hz / os.sysconf("SC_CLK_TCK")
    sleep = "" if args.idle_sleep_us is None else f"  idle_sleep_us: {args.idle_sleep_us}\n"

    net = ct.Net("g", peer_addr=B_KIP + "/24")
    ct.sh(["ip", "addr", "add", KA + "/24", "dev", net.va], ns=net.a)
    ct.sh(["ip", "addr", "add", KB + "/24", "dev", net.vb], ns=net.b)
    # Two daemons on two cores: a polls on core 1, b on core 0.
    cfg_a = CONFIG % {"main": 0, "lcore": 1, "sleep": sleep, "iface": net.va,
                      "mac": "02:c1:ea:0e:0a:01", "ip": A_IP}
    cfg_b = CONFIG % {"main": 1, "lcore": 0, "sleep": sleep, "iface": net.vb,
                      "mac": "02:c1:ea:0e:0b:01", "ip": B_IP}

    def tool(d, *a):
        return popen([TOOL, "-s", os.path.join(d.run_dir, "app.sock"), "--json", "--timeout",
                      "60", "--no-check", *map(str, a)])

    def listening(d, port):
        ct.wait_until(lambda: any(x["local"].endswith(f":{port}") for x in
                                  d.ctl("flow", "list")[1]["listeners"]), timeout=10,
                      what="the listener")

    cases = ["kernel->kernel", "cleave->kernel", "kernel->cleave", "cleave->cleave"]
    res = {c: [] for c in cases}  # (gbit/s, cycles/byte)
    print(f"{n} bytes per transfer, {args.runs} runs; CPU {hz / 1e6:.0f} MHz ({hz_from}); "
          f"idle_sleep_us {'default (0)' if args.idle_sleep_us is None else args.idle_sleep_us}")
    for run in range(args.runs):
        port = 6000 + run * 10
        out = {}

        def rec(case, secs, jif):
            res[case].append((n * 8 / secs / 1e9, jif * hz_per_jiffy / n))
            out[case] = res[case][-1]

        # kernel -> kernel, no daemon running.
        def iperf_server():
            p = popen(["iperf3", "-s", "-1", "-B", KB, "-p", str(port)], ns=net.b)
            ct.wait_until(lambda: f":{port} " in ct.sh(["ss", "-ltnH"], ns=net.b).stdout,
                          timeout=10, what="iperf3 server")
            return p
        rec("kernel->kernel", *measure(
            iperf_server, lambda: popen(["iperf3", "-c", KB, "-p", str(port), "-n", str(n),
                                         "-J"], ns=net.a), n))

        da = ct.Daemon(cfg_a, ns=net.a)
        # cleave -> kernel
        rec("cleave->kernel", *measure(
            lambda: ready(popen([KERNEL_TCP, "recv", B_KIP, str(port + 1)], ns=net.b)),
            lambda: tool(da, "--connect", f"{B_KIP}:{port + 1}", "--send", n), n))

        # kernel -> cleave
        def cleave_listener(d, p):
            t = tool(d, "--listen", p, "--recv")
            listening(d, p)
            return t
        rec("kernel->cleave", *measure(
            lambda: cleave_listener(da, port + 2),
            lambda: popen([KERNEL_TCP, "send", A_IP, str(port + 2), str(n)], ns=net.b), n))

        # cleave -> cleave
        db = ct.Daemon(cfg_b, ns=net.b)
        rec("cleave->cleave", *measure(
            lambda: cleave_listener(db, port + 3),
            lambda: tool(da, "--connect", f"{B_IP}:{port + 3}", "--send", n), n))
        for d in (db, da):
            d.stop()
            d.kill()
        print(f"run {run + 1}: " + ", ".join(f"{c} {g:.2f} Gbit/s {cpb:.1f} cyc/B"
                                             for c, (g, cpb) in out.items()), flush=True)

    base_g = [g for g, _ in res["kernel->kernel"]]
    base_c = [c for _, c in res["kernel->kernel"]]
    print(f"\n{'case':16} {'goodput Gbit/s':>22} {'cycles/byte':>20} {'goodput/kk':>11} "
          f"{'cyc/B / kk':>11}")
    for case in cases:
        g = [x for x, _ in res[case]]
        c = [x for _, x in res[case]]
        rg = statistics.median(a / b for a, b in zip(g, base_g))
        rc = statistics.median(a / b for a, b in zip(c, base_c))
        print(f"{case:16} {statistics.median(g):8.2f} ({min(g):5.2f}-{max(g):5.2f}) "
              f"{statistics.median(c):8.1f} ({min(c):5.1f}-{max(c):5.1f}) {rg:11.2f} {rc:11.2f}")
    print("medians over the runs (min-max); ratios: median of per-run ratios to kernel->kernel")
    print(json.dumps({"bytes": n, "runs": args.runs, "cpu_hz": hz, "cpu_hz_from": hz_from,
                      "results": res}))


if __name__ == "__main__":
    main()
