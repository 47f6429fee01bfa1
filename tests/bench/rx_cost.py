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
  cleave        cleave-tcp --listen --recv --no-check in a, on this build's cleaved: one shard
                (dataplane lcore 1 on CPU 1), the NIC model inline in its bursts; the receiver
                runs on CPU 0 (taskset), off the shards' CPU, as apps do where the dataplane's
                cores are its own (in every cleave case);
  baseline      the same on --baseline DIR's cleaved (another revision's build dir);
  cleave-svc    the same receiver, one shard (lcore 1 on CPU 1, as cleave's) and the NIC
                service on lcore 2 on CPU 0 (nic.service_lcore "2@0"): the shard keeps the CPU
                it has in cleave, so the two compare the shard's own cost with the NIC in and
                out of its bursts; the NIC shares CPU 0 with the main lcore (asleep in epoll)
                and the sender, as the machine has no third CPU;
  cleave-2sh    two shards (lcores 1 and 2, both on CPU 1: the host gets the one CPU it has in
                cleave-svc) and the NIC service on lcore 3 on CPU 0; two receivers (cleaved
                gives each new app the shard with the fewest) and two kernel_tcp senders of
                BYTES/2 each, so both shards get a flow; the shards' figures are summed.
--cases picks some of them (linux-off and linux-on always run: the ratios need them).
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
    idle iteration, measured over a second with nothing flowing just before the transfer, and
    the packets received per busy iteration of the loop: how well bursts amortize). "In busy
    iterations" adds to the work what each busy iteration's polling costs at that idle rate.
    Work includes the app wake-ups, printed apart too: a doorbell to a receiver asleep on its
    completion queue, and the doorbells per MiB the receivers' app counters showed (looked at
    every 100 ms while they ran: a lower bound). On net_cleave a doorbell is the NIC's
    interrupt: the shard posts a command (host work) and the NIC writes the eventfd, as VFIO
    delivers an MSI-X vector on hardware, off the dataplane's cores; those writes are the NIC's,
    printed apart as "NIC interrupts" (in NIC+wire, or in the NIC service's thread). A shard
    writes the eventfd itself only without a net_cleave port (or with every vector taken).
    How often a receiver sleeps is its own choice (cleave-tcp spins 20 us first); one that
    polls needs none, so host work without the wake-ups is printed too.
    busy_cycles from `cleavectl stats show` (NIC included) is printed too: TSC cycles, so on a
    shared CPU it also counts the time the lcore was descheduled.
  cleave-svc, cleave-2sh: the shards' threads (EAL names lcore N's thread rte-worker-N, or
    lcore-worker-N in later DPDK releases, service lcores alike, so perf's tid tells the shards
    from the NIC service) run no NIC model: their samples under net_cleave's TX bursts (the
    rings the NIC service drains, a driver's side of descriptor rings on hardware) are host
    work, printed apart as "driver TX rings" (with the posted commands' enqueue: the cursor
    updates and retires every burst makes, a doorbell write on hardware); host = work + driver
    TX rings. The RX bursts' dequeue runs every iteration, so it is polling ("RX ring polls", in
    "with polling"): its share in the iterations that received cannot be told apart by call
    chain. The shards' other NIC commands (rte_pmd_cleave_ms_post and the like, which answer)
    run the model under the lock the NIC service holds while it runs, so a shard spins there
    while the service works (or is descheduled): printed apart as "NIC commands", left out of
    host as the NIC's (inline, the model's part of them is in NIC+wire). Beside them the
    shards' busy_cycles (stats, summed over the shards) per byte, and the NIC service's
    own cost labelled "NIC (emulated hardware)": its busy_cycles (RTE_SERVICE_ATTR_CYCLES) per
    byte and its thread's perf samples per byte (its polling included: no call chain tells a
    run that moved frames), and the frames received per busy run (busy_runs). Its service
    body returns -EAGAIN for a run that moved nothing, which DPDK leaves out of the cycles: the
    share of the wall clock they count over the idle second is printed as the check ("busy
    share of the wall clock when idle", 0 when nothing else reaches the veth).
Busy cycles are TSC time between two reads, descheduled time included: on this shared machine
perf's samples (time on a CPU) are the figure to trust where the two differ.
Prints per round, then per case the median and spread (min-max) of cycles per byte and the
median of per-round ratios to linux-off and linux-on. Asserts nothing. Needs root and perf.

--top N also prints the N functions the shards' work samples end in most, over all rounds.

Usage: rx_cost.py [--runs N] [--bytes N] [--freq HZ] [--baseline DIR] [--cases LIST] [--top N]
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
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402
import tcp_goodput as tg  # noqa: E402

# The NIC model and the wire, as seen in the lcore's call chains.
NIC = re.compile(r"cleave::pmd::|cleave::nic::|model_mbuf|NicModel|eth_af_packet|"
                 r"rte_service_run|service_run")
# With a NIC service, the shards' RX bursts only dequeue what it put on the rings, and their NIC
# commands (net_cleave's rte_pmd_cleave_* calls into the model, under its lock) are apart.
RX_RING = re.compile(r"cleave::pmd::rx_burst")
COMMAND = re.compile(r"\bcommand<rte_pmd_cleave_")
# The dataplane's work on packets and requests (what only runs when there is some); the rest of
# the host's samples are the loop polling.
WORK = re.compile(r"Dataplane::rx_packet|Dataplane::flush\(|FlowPath::rx\(|FlowPath::rx_flush|"
                  r"FlowPath::deliver|FlowPath::send|::app_burst|FlowPath::flow_request|"
                  r"CompletionBatch::|post_completions|AppPath::serve_sq|AppPath::execute")
# Waking an app that sleeps on its completion queue: the doorbell, an eventfd write (the
# syscall, the wake-up, and the lcore's own descheduling if the scheduler runs the woken app on
# its CPU). Host work, printed apart too: an app that polls its queue never needs one.
WAKE = re.compile(r"\b__GI___libc_write\b|\beventfd_write\b")
WAKE_FROM = re.compile(r"CompletionBatch::")
# On net_cleave the shard raises the NIC's interrupt vector instead (a posted command: host
# work, as every posted command's enqueue is) and the NIC writes the eventfd when it applies
# it: the NIC's, as an MSI-X interrupt's delivery is the kernel's on hardware, off the
# dataplane's cores. Printed apart ("NIC interrupts").
POSTED = re.compile(r"cleave::pmd::(?:\(anonymous namespace\)::)?post\(")
IRQ_FROM = re.compile(r"cleave::pmd::run_posted")


def is_irq(frames):
    """A sample of the NIC delivering an interrupt: an eventfd write under run_posted."""
    return any(WAKE.search(f) for f in frames) and any(IRQ_FROM.search(f) for f in frames)
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
    """[(comm, tid, period_ns, [frames])] of every sample (perf script runs once per file)."""
    out = subprocess.run(["perf", "script", "-i", path, "-F", "comm,tid,period,ip,sym,dso"],
                         capture_output=True, text=True, timeout=600).stdout
    res = []
    cur = None
    for line in out.splitlines():
        if not line.strip():  # samples are separated by blank lines
            if cur:
                res.append(cur)
            cur = None
        elif cur is None:
            m = re.match(r"\s*(.+?)\s+(\d+)\s+(\d+)\s*$", line)
            if m:
                cur = (m.group(1), int(m.group(2)), int(m.group(3)), [])
        else:
            cur[3].append(line.strip())
    if cur:
        res.append(cur)
    return res


def linux_rx_ns(smp):
    # Only the two kernel_tcp processes' samples: the veth delivers in the sender's context, the
    # receiver copies in its own, and what other processes on the machine receive stays out.
    return sum(p for comm, _, p, fr in smp
               if comm == "kernel_tcp" and any(LINUX_RX.search(f) for f in fr))


def lcore_split(smp, tids, inline=True):
    """{bucket: ns} of the samples of the dataplane lcores' threads `tids`: work, wake (the app
    wake-ups in work), poll, nic, cmd, rx_ring; and leaf, the work samples by the function they
    end in. With the NIC inline, nic is the NIC model and the wire (its commands included; cmd
    and rx_ring are 0). With a NIC service, nic is the shards' side of net_cleave's TX rings
    (the bursts' enqueue and the posted commands: host work), cmd the NIC commands they make
    that wait for an answer (the model's work and the wait for its lock, which the service holds
    while it runs) and rx_ring their RX bursts' dequeue, which every iteration polls: counted in
    poll too."""
    b = dict.fromkeys(("work", "wake", "poll", "nic", "cmd", "rx_ring", "irq"), 0)
    b["leaf"] = collections.Counter()  # work samples by the function they end in
    for _, tid, p, fr in smp:
        if tid not in tids:
            continue
        if not inline and any(COMMAND.search(f) for f in fr):
            b["cmd"] += p
            continue
        if not inline and any(RX_RING.search(f) for f in fr):
            b["poll"] += p
            b["rx_ring"] += p
            continue
        if any(WAKE.search(f) for f in fr) and any(WAKE_FROM.search(f) for f in fr):
            b["work"] += p
            b["wake"] += p
            b["leaf"][leaf(fr)] += p
            continue
        if is_irq(fr):
            b["nic"] += p  # the NIC delivering an interrupt (inline: in the shard's bursts)
            b["irq"] += p
            continue
        if inline and any(POSTED.search(f) for f in fr):
            b["work"] += p  # the enqueue of a posted command: the driver's doorbell write
            b["leaf"][leaf(fr)] += p
            continue
        # The kernel under the lcore is af_packet's (the wire).
        kernel = inline and fr and "[kernel.kallsyms]" in fr[0]
        if kernel or any(NIC.search(f) for f in fr):
            b["nic"] += p
        elif any(WORK.search(f) for f in fr):
            b["work"] += p
            b["leaf"][leaf(fr)] += p
        else:
            b["poll"] += p
    return b


def leaf(frames):
    """The function a call chain ends in (its first frame's symbol, offset and DSO left out)."""
    if not frames:
        return "?"
    m = re.match(r"[0-9a-f]+\s+(.*?)(?:\+0x[0-9a-f]+)?\s+\(", frames[0])
    return m.group(1) if m else frames[0]


def thread_ns(smp, tid):
    return sum(p for _, t, p, _ in smp if t == tid)


def irq_ns(smp, tid):
    """The NIC's interrupt deliveries (eventfd writes) in thread `tid`'s samples."""
    return sum(p for _, t, p, fr in smp if t == tid and is_irq(fr))


def lcore_tids(pid):
    """{lcore id: thread id} of cleaved's worker lcores: EAL names lcore N's thread rte-worker-N
    (lcore-worker-N in later DPDK releases), a service lcore's too."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{t}/comm") as f:
            m = re.match(r"(?:rte|lcore)-worker-(\d+)$", f.read().strip())
        if m:
            out[int(m.group(1))] = int(t)
    if not out:
        raise SystemExit("cleaved has no lcore worker thread")
    return out


# The cleave cases' lcores: (dataplane.lcores, their lcore ids, nic.service_lcore and its lcore
# id or None, receiver connections).
LAYOUTS = {
    "cleave": (None, [1], None, 1),
    "cleave-svc": ('["1@1"]', [1], ('"2@0"', 2), 1),
    "cleave-2sh": ('["1@1", "2@1"]', [1, 2], ('"3@0"', 3), 2),
}


def shard_sum(stats, key):
    return sum(x[key] for x in stats["lcores"] if x["role"] == "dataplane")


def nic_busy(stats, key="busy_cycles"):
    return sum(x[key] for x in stats["lcores"] if x["role"] == "nic")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=256 << 20)
    ap.add_argument("--freq", type=int, default=4999)
    ap.add_argument("--baseline", help="another revision's build dir, measured alternately")
    ap.add_argument("--top", type=int, default=0,
                    help="also print the N functions the shards' work samples end in most")
    ap.add_argument("--cases", default="cleave,cleave-svc,cleave-2sh",
                    help="cleave cases, comma-separated (of " + ", ".join(LAYOUTS) + ")")
    args = ap.parse_args()
    chosen = [c for c in args.cases.split(",") if c]
    if not chosen or any(c not in LAYOUTS for c in chosen):
        ap.error("--cases: a comma-separated list of " + ", ".join(LAYOUTS))
    ct.require_root()
    if shutil.which("perf") is None:
        print("skipped: perf is not installed")
        raise SystemExit(ct.SKIP)
    n = args.bytes
    hz, hz_from = tg.cpu_hz()
    tmp = tempfile.mkdtemp(prefix="cleave-rxcost-")
    ct._cleanups.append(lambda: shutil.rmtree(tmp, ignore_errors=True))  # perf data, on any exit
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

    # (case, cleaved binary, layout): the baseline build runs the first layout only.
    runs = []
    for b, binary in ct.builds(args.baseline):
        if b != "this":
            runs.append((b, binary, LAYOUTS["cleave"]))
            continue
        runs += [(c, binary, LAYOUTS[c]) for c in chosen]
    cases = ["linux-off", "linux-on"] + [c for c, _, _ in runs]
    res = collections.defaultdict(list)  # case -> [cycles/byte]: host work
    busy = collections.defaultdict(list)  # cleave cases: shards' busy cycles/byte
    nicr = collections.defaultdict(list)  # inline: NIC and wire; service: driver rings
    polled = collections.defaultdict(list)  # cleave cases: host work and polling cycles/byte
    wakes = collections.defaultdict(list)  # cleave cases: app wake-ups (in host) cycles/byte
    irqs = collections.defaultdict(list)  # cleave cases: the NIC's interrupt deliveries
    doorbells = collections.defaultdict(list)  # cleave cases: doorbells per MiB (lower bound)
    in_busy = collections.defaultdict(list)  # cleave cases: host cycles/byte in busy iterations
    leaves = collections.defaultdict(collections.Counter)  # cleave cases: work ns by leaf
    per_iter = collections.defaultdict(list)  # cleave cases: host cycles per idle iteration
    per_burst = collections.defaultdict(list)  # cleave cases: packets per busy iteration
    svc_busy = collections.defaultdict(list)  # service cases: NIC busy_cycles/byte
    svc_perf = collections.defaultdict(list)  # service cases: NIC thread's perf cycles/byte
    svc_idle = collections.defaultdict(list)  # service cases: NIC busy share of the idle second
    rxr = collections.defaultdict(list)  # service cases: the shards' RX ring polls cycles/byte
    cmds = collections.defaultdict(list)  # service cases: the shards' NIC commands cycles/byte
    per_run = collections.defaultdict(list)  # service cases: frames received per NIC busy run
    print(f"{n} bytes per transfer, {args.runs} rounds; CPU {hz / 1e6:.0f} MHz ({hz_from}); "
          f"perf cpu-clock at {args.freq} Hz; cleaved's main lcore on CPU 0; cleave, baseline: "
          f"dataplane lcore 1 on CPU 1; cleave-svc: lcore 1 on CPU 1, NIC service lcore 2 on "
          f"CPU 0; cleave-2sh: lcores 1 and 2 on CPU 1, NIC service lcore 3 on CPU 0 (the "
          f"sender and the rest of the machine share both CPUs)")
    print("load before: " + subprocess.run(["uptime"], capture_output=True, text=True)
          .stdout.strip(), flush=True)

    def cleave_case(case, binary, layout, port):
        lcores, shard_lcores, svc, conns = layout
        c = cfg
        if lcores:
            assert "dataplane:\n  lcore: 1\n" in c
            c = c.replace("dataplane:\n  lcore: 1\n", f"dataplane:\n  lcores: {lcores}\n")
        if svc:
            c += f"nic:\n  service_lcore: {svc[0]}\n"
        ct.CLEAVED = binary
        d = ct.Daemon(c, ns=net.a)
        ports = [port + 100 * i for i in range(conns)]
        rxs = []
        for p in ports:
            # The receiver runs on CPU 0, off the shards' CPU, as an app does on a host whose
            # dataplane cores are its own (woken there, it would take the CPU from its shard).
            rxs.append(tg.popen(["taskset", "-c", "0", tg.TOOL, "-s",
                                 os.path.join(d.run_dir, "app.sock"), "--json",
                                 "--timeout", "60", "--no-check", "--listen", str(p), "--recv"]))
            ct.wait_until(lambda: any(x["local"].endswith(f":{p}") for x in
                                      d.ctl("flow", "list")[1]["listeners"]), timeout=10,
                          what="the listener")
        tids = lcore_tids(d.proc.pid)
        shards = {tids[k] for k in shard_lcores}
        data = os.path.join(tmp, f"{case}.data")
        # Calibration: the host's time per iteration with nothing flowing, for a second.
        q0, t0 = d.stats(), time.monotonic()
        pf = perf_start(data, pid=d.proc.pid, freq=args.freq)
        time.sleep(1)
        perf_stop(pf)
        q1, t1 = d.stats(), time.monotonic()
        b = lcore_split(samples(data), shards, inline=svc is None)
        os.unlink(data)
        idle_host = b["work"] + b["poll"] + (b["nic"] if svc else 0)
        iters = shard_sum(q1, "iterations") - shard_sum(q0, "iterations")
        per_iter[case].append(idle_host * hz / 1e9 / max(1, iters))
        if svc:
            svc_idle[case].append((nic_busy(q1) - nic_busy(q0)) / (q1["tsc_hz"] * (t1 - t0)))
        s0 = d.stats()
        pf = perf_start(data, pid=d.proc.pid, freq=args.freq)
        txs = [tg.popen([tg.KERNEL_TCP, "send", tg.A_IP, str(p), str(n // conns)], ns=net.b)
               for p in ports]
        # The receivers' doorbells: their apps' counters, looked at every 100 ms until the
        # first receiver ends (its app and counters go with it): a lower bound.
        bells = {}

        def watch():
            while all(r.poll() is None for r in rxs):
                code, out, _ = d.ctl("app", "list", check=False)
                for a in out["apps"] if code == 0 else []:
                    code, one, _ = d.ctl("app", "show", str(a["id"]), check=False)
                    if code == 0 and "counters" in one:
                        bells[a["id"]] = one["counters"]["doorbells"]
                time.sleep(0.1)
        watcher = threading.Thread(target=watch)
        watcher.start()
        for tx in txs:
            tg.finish(tx, "sender")
        for rx in rxs:
            tg.finish(rx, "receiver")
        watcher.join()
        perf_stop(pf)
        doorbells[case].append(sum(bells.values()) * (1 << 20) / n)
        s1 = d.stats()
        d.stop()
        d.kill()
        smp = samples(data)
        os.unlink(data)
        b = lcore_split(smp, shards, inline=svc is None)
        work, poll, nic = b["work"], b["poll"], b["nic"]
        got = n // conns * conns
        host = work + (nic if svc else 0)
        res[case].append(host * hz / 1e9 / got)
        polled[case].append((work + poll + (nic if svc else 0)) * hz / 1e9 / got)
        wakes[case].append(b["wake"] * hz / 1e9 / got)
        irqs[case].append((b["irq"] + (irq_ns(smp, tids[svc[1]]) if svc else 0)) * hz / 1e9 / got)
        # The host in the iterations that received or served something: their work, and the
        # loop's polling each of them did as an idle one does (at the calibrated cost).
        busy_iters = shard_sum(s1, "busy_iterations") - shard_sum(s0, "busy_iterations")
        in_busy[case].append(res[case][-1] + busy_iters * per_iter[case][-1] / got)
        leaves[case].update(b["leaf"])
        nicr[case].append(nic * hz / 1e9 / got)
        busy[case].append((shard_sum(s1, "busy_cycles") - shard_sum(s0, "busy_cycles")) / got)
        per_burst[case].append((shard_sum(s1, "rx_packets") - shard_sum(s0, "rx_packets")) /
                               max(1, shard_sum(s1, "busy_iterations") -
                                   shard_sum(s0, "busy_iterations")))
        if not svc:
            return (f"{case} host work {res[case][-1]:.3f} (app wake-ups {wakes[case][-1]:.3f} "
                    f"of it, {doorbells[case][-1]:.1f} doorbells per MiB; with polling "
                    f"{polled[case][-1]:.3f}, "
                    f"in busy iterations {in_busy[case][-1]:.3f}; "
                    f"NIC+wire {nicr[case][-1]:.3f}; busy wall {busy[case][-1]:.3f}; "
                    f"{per_iter[case][-1]:.0f} cycles per idle iteration; "
                    f"{per_burst[case][-1]:.1f} packets per busy iteration)")
        svc_busy[case].append((nic_busy(s1) - nic_busy(s0)) / got)
        svc_perf[case].append(thread_ns(smp, tids[svc[1]]) * hz / 1e9 / got)
        rx = [b["rx_packets"] - a["rx_packets"] for a, b in
              zip(s0["lcores"], s1["lcores"]) if b["role"] == "dataplane"]
        per_run[case].append(sum(rx) / max(1, nic_busy(s1, "busy_runs") -
                                           nic_busy(s0, "busy_runs")))
        rxr[case].append(b["rx_ring"] * hz / 1e9 / got)
        cmds[case].append(b["cmd"] * hz / 1e9 / got)
        return (f"{case} host {res[case][-1]:.3f} (work {(work * hz / 1e9 / got):.3f}, app "
                f"wake-ups {wakes[case][-1]:.3f} of it, {doorbells[case][-1]:.1f} doorbells per "
                f"MiB; driver "
                f"TX rings {nicr[case][-1]:.3f}; with polling {polled[case][-1]:.3f}, in busy "
                f"iterations {in_busy[case][-1]:.3f}, RX ring "
                f"polls {rxr[case][-1]:.3f} of it; NIC commands {cmds[case][-1]:.3f}; shards busy "
                f"wall {busy[case][-1]:.3f}; {per_iter[case][-1]:.0f} cycles per idle "
                f"iteration; {per_burst[case][-1]:.1f} packets per busy iteration; shards' "
                f"rx packets {rx}; NIC (emulated hardware) busy "
                f"{svc_busy[case][-1]:.3f}, perf {svc_perf[case][-1]:.3f}, "
                f"{per_run[case][-1]:.1f} frames received per busy run, busy share idle "
                f"{svc_idle[case][-1]:.2f})")

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
            cpb = linux_rx_ns(samples(data)) * hz / 1e9 / n
            res[case].append(cpb)
            line.append(f"{case} {cpb:.3f}")
            os.unlink(data)
        set_offloads(False)
        for k, (case, binary, layout) in enumerate(runs):
            line.append(cleave_case(case, binary, layout, port + 2 + k))
        print(f"round {run + 1}: " + ", ".join(line) + " cycles/byte", flush=True)
    print("load after: " + subprocess.run(["uptime"], capture_output=True, text=True)
          .stdout.strip())

    def med(v):
        return f"{statistics.median(v):8.3f} ({min(v):.3f}-{max(v):.3f})"
    print(f"\n{'case':10} {'cycles/byte':>24} {'/ linux-off':>12} {'/ linux-on':>11}")
    for case in cases:
        r_off = statistics.median(a / b for a, b in zip(res[case], res["linux-off"]))
        r_on = statistics.median(a / b for a, b in zip(res[case], res["linux-on"]))
        print(f"{case:10} {med(res[case]):>24} {r_off:12.3f} {r_on:11.3f}")
    for case in cases[2:]:
        nowake = [h - w for h, w in zip(res[case], wakes[case])]
        print(f"{case:10} host without the app wake-ups (doorbells to a sleeping app: an app "
              f"polling its queue needs none) {med(nowake)} cycles/byte, / linux-on "
              f"{statistics.median(a / b for a, b in zip(nowake, res['linux-on'])):.3f}; "
              f"the wake-ups {med(wakes[case])}, doorbells per MiB (at least) "
              f"{med(doorbells[case])}")
        print(f"{'':10} NIC interrupts (the eventfd writes the NIC makes for the doorbells it "
              f"is asked to ring: the kernel's interrupt work on hardware, not the shards'; "
              f"in NIC): {med(irqs[case])} cycles/byte")
        if case not in svc_busy:
            print(f"{case:10} host with the loop's polling: {med(polled[case])} cycles/byte, in "
                  f"busy iterations (work and each one's polling at the idle cost) "
                  f"{med(in_busy[case])}; "
                  f"NIC model and wire (the emulated hardware's): {med(nicr[case])}; lcore busy "
                  f"TSC cycles (wall), NIC included: {med(busy[case])}; host cycles per idle "
                  f"iteration: {med(per_iter[case])}; packets per busy iteration: "
                  f"{med(per_burst[case])}")
            continue
        print(f"{case:10} host: driver TX rings {med(nicr[case])} of it; with the loop's "
              f"polling {med(polled[case])}, RX ring polls {med(rxr[case])} of that; shards' "
              f"busy TSC cycles (wall, NIC apart) "
              f"{med(busy[case])}; host cycles per idle iteration {med(per_iter[case])}; "
              f"host in busy iterations (work and each one's polling at that cost) "
              f"{med(in_busy[case])}; "
              f"packets per busy iteration {med(per_burst[case])}")
        print(f"{'':10} NIC commands from the shards (doorbells: the model's work and the "
              f"wait for its lock, the emulation's; not in host): {med(cmds[case])}")
        print(f"{'':10} NIC (emulated hardware): busy TSC cycles {med(svc_busy[case])} per "
              f"byte, perf {med(svc_perf[case])} per byte; frames received per busy run "
              f"{med(per_run[case])}; busy share of the wall clock when idle "
              f"{med(svc_idle[case])}")
    for case in cases[2:] if args.top else []:
        total = sum(leaves[case].values()) or 1
        print(f"{case:10} host work samples by the function they end in (all rounds, %):")
        for fn, ns in leaves[case].most_common(args.top):
            print(f"{'':10} {100 * ns / total:5.1f} % {fn}")
    print("medians over the rounds (min-max); ratios: median of per-round ratios; busy cycles "
          "count descheduled time (TSC), perf only time on a CPU: prefer perf where they differ")


if __name__ == "__main__":
    main()
