"""wire_goodput.py - one TCP transfer between cleave and the Linux kernel over test_tcp.start()'s
tap, measured with no per-byte work on either end, and what limited each side.

The kernel's end is kernel_tcp (tests/bench/kernel_tcp.c: sends from one buffer filled once, or
reads and drops), cleave's is `cleave-tcp --no-check` (sends its window's buffers as filled once,
hashes nothing). sender "linux": kernel_tcp send in the namespace -> cleave-tcp --listen --recv;
sender "cleave": cleave-tcp --connect --send -> kernel_tcp recv. Goodput is the receiver's: bytes
read over the time from its accept to the sender's FIN, the same definition on both sides. The
kernel keeps no metrics between connections (no_metrics), so every transfer starts afresh.

What limited each side, per transfer: the sending app's CPU seconds (its rusage) and the
dataplane lcore's busy time (cleaved's own busy-cycle count) against the wall time; for cleave's
sender the flow's last cwnd, ssthresh and peer window (polled from flow.list every 50 ms while
it lives) and the TCP transport's retransmissions, fast recoveries and RTOs over the transfer;
for Linux's sender its TCP_INFO once everything was acknowledged (kernel_tcp's JSON).

Congestion control: set_cc() gives both senders an algorithm (cleave's by a tuple binding on
the daemon, `flow attach tuple '*:*' KERNEL:* cc NAME`; Linux's by TCP_CONGESTION, kernel_tcp
--cc), so loss-based algorithms are compared like for like. The kernel's own default may be
another (Debian's is cubic; a host may have chosen bbr, which does not take loss for congestion).

Used by tests/bench/tcp_loss.py and test_tcp_loss.py.
"""

import json
import os
import subprocess
import threading
import time

import cleavetest as ct
import test_tcp as tcp

KERNEL_TCP = os.environ.get("KERNEL_TCP", "build/tests/kernel_tcp")
SENDERS = ("linux", "cleave")
# cleave's congestion control names and Linux's for the same algorithm.
LINUX_CC = {"newreno": "reno", "cubic": "cubic", "dctcp": "dctcp"}


def set_cc(d, cleave_cc):
    """cleave's flows to the kernel use `cleave_cc` from now on (a tuple binding); returns the
    name of Linux's same algorithm, for transfer()'s linux_cc."""
    d.ctl("flow", "attach", "tuple", "*:*", f"{tcp.KERNEL}:*", "cc", cleave_cc)
    return LINUX_CC[cleave_cc]
WATCHED = ("retransmits", "fast_recoveries", "rtos", "tlp_probes", "rack_losses")


def no_metrics(ns):
    """Every kernel connection in `ns` starts afresh, as cleave's do: the kernel would otherwise
    start one with the ssthresh and RTT it saved from the last to the same host (tcp_metrics),
    so a lossless run after a lossy one would begin below its window, and a lossy one would skip
    the slow start that overshoots."""
    ct.sh(["sysctl", "-qw", "net.ipv4.tcp_no_metrics_save=1"], ns=ns)
    ct.sh(["ip", "tcp_metrics", "flush"], ns=ns, check=False)


def set_faults(d, loss, reorder, seed):
    """Seeded faults on both directions of cleave's port p0 (`cleavectl port fault`); off when
    both rates are 0. Setting them again with the same seed replays the same draws."""
    if loss == 0 and reorder == 0:
        d.ctl("port", "fault", "p0", "off")
        return
    args = (["loss", str(loss)] if loss else []) + (["reorder", str(reorder)] if reorder else [])
    d.ctl("port", "fault", "p0", *args, "seed", str(seed))


class FlowWatch:
    """Polls flow.list on the control socket while a transfer runs; keeps each TCP flow's last
    info (a flow is gone once closed, so it is read while it lives)."""

    def __init__(self, daemon, interval=0.05):
        self.d, self.interval, self.last = daemon, interval, {}
        self.stop = threading.Event()
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop.wait(self.interval):
            try:
                r = self.d.request("flow.list")
            except (OSError, AssertionError, ValueError):
                continue
            for f in r.get("result", {}).get("flows", []):
                if "info" in f and "cwnd" in f["info"]:
                    self.last[f.get("id", f.get("flow"))] = f["info"]

    def done(self):
        """The flows' last infos, the one that sent most first."""
        self.stop.set()
        self.t.join(timeout=30)
        return sorted(self.last.values(), key=lambda i: -i.get("bytes_sent", 0))


def tcp_counters(d):
    r = d.request("transport.list")["result"]["transports"]
    return next(t["stats"] for t in r if t["name"] == "tcp")


def dataplane_busy(d):
    """(busy seconds of the dataplane lcores so far, tsc_hz)."""
    s = d.stats()
    return sum(c["busy_cycles"] for c in s["lcores"] if c["role"] == "dataplane") / s["tsc_hz"]


def _finish(p, deadline):
    """stdout, stderr and the rusage of a process that ends by `deadline` (killed after it):
    (exit code, last stdout line, stderr, CPU seconds)."""
    timer = threading.Timer(max(deadline - time.monotonic(), 0), p.kill)
    timer.start()
    try:
        out = p.stdout.read()
        err = p.stderr.read() if p.stderr else ""
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)  # for the cleanups' poll()
    lines = out.splitlines()
    return p.returncode, (lines[-1] if lines else ""), err, ru.ru_utime + ru.ru_stime


def transfer(d, ns, sender, port, n, timeout=120, linux_cc=None):
    """One transfer of n bytes, sender "linux" (with congestion control linux_cc, else the
    kernel's default) or "cleave", on `port`. Returns a dict: ok,
    error (text or None), gbps and seconds (the receiver's), sender_cpu and receiver_cpu
    (seconds), dataplane_busy (seconds), cwnd and ssthresh (segments, the sender's at the end;
    ssthresh None before any loss), snd_wnd (bytes), retransmits, and the raw JSON of both
    ends ("kernel", "cleave") and cleave's flow info ("flow")."""
    app_sock = os.path.join(d.run_dir, "app.sock")
    tool = [tcp.TOOL, "-s", app_sock, "--json", "--no-check", "--timeout", "30"]
    kernel = ["ip", "netns", "exec", ns, KERNEL_TCP]
    deadline = time.monotonic() + timeout
    c0, b0 = tcp_counters(d), dataplane_busy(d)
    watch = FlowWatch(d)
    pipes = dict(stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if sender == "linux":
        rx = ct.spawn(tool + ["--listen", str(port), "--recv"], **pipes)
        cc = ["--cc", linux_cc] if linux_cc else []
        tx = ct.spawn(kernel + ["send", tcp.OURS, str(port), str(n), "--timeout", "30"] + cc,
                      **pipes)
        tx_res = _finish(tx, deadline)
        rx_res = _finish(rx, deadline)
        kj, cj = tx_res[1], rx_res[1]
    else:
        rx = ct.spawn(kernel + ["recv", tcp.KERNEL, str(port), "--timeout", "30"], **pipes)
        ready = rx.stdout.readline()
        if ready != "ready\n":
            watch.done()
            rx.kill()
            rx.wait()
            return {"ok": False, "error": f"kernel_tcp recv did not start: {ready!r}"}
        tx = ct.spawn(tool + ["--connect", f"{tcp.KERNEL}:{port}", "--send", str(n)], **pipes)
        tx_res = _finish(tx, deadline)
        rx_res = _finish(rx, deadline)
        kj, cj = rx_res[1], tx_res[1]
    flows = watch.done()
    c1, b1 = tcp_counters(d), dataplane_busy(d)
    r = {"ok": False, "error": None, "sender": sender, "sender_cpu": tx_res[3],
         "receiver_cpu": rx_res[3], "dataplane_busy": b1 - b0,
         "counters": {k: c1[k] - c0[k] for k in WATCHED}}
    try:
        r["kernel"], r["cleave"] = json.loads(kj), json.loads(cj)
    except ValueError:  # one was killed at the deadline: say what each end said
        k_res, c_res = (tx_res, rx_res) if sender == "linux" else (rx_res, tx_res)
        r["error"] = (f"sender exit {tx_res[0]}, receiver exit {rx_res[0]} (-9: killed after "
                      f"{timeout:g} s); kernel_tcp: {kj or '-'} {k_res[2].strip()}; "
                      f"cleave-tcp: {cj or '-'} {c_res[2].strip()}")
        return r
    k, c = r["kernel"], r["cleave"]
    if k["error"] is not None or c["error"] != 0 or c["close_status"] != 0 or tx_res[0] != 0 \
            or rx_res[0] != 0:
        r["error"] = f"kernel_tcp: {k['error']}; cleave-tcp: {c['message'] or c['error']}"
        return r
    got = c["received"] if sender == "linux" else k["bytes"]
    if got != n:
        r["error"] = f"{got} of {n} bytes arrived"
        return r
    r["ok"] = True
    if sender == "linux":
        r["gbps"], r["seconds"] = c["recv_gbps"], c["seconds"]
        i = k["tcp_info"]
        r.update(cwnd=i["snd_cwnd"], ssthresh=i["snd_ssthresh"] if i["snd_ssthresh"] < 1 << 30
                 else None, snd_wnd=i["snd_wnd"], retransmits=i["total_retrans"],
                 sender_wall=k["seconds"])
    else:
        r["gbps"], r["seconds"] = k["gbps"], k["seconds"]
        f = flows[0] if flows else {}
        mss = f.get("mss") or 1460
        r.update(cwnd=round(f["cwnd"] / mss) if "cwnd" in f else None,
                 ssthresh=round(f["ssthresh"] / mss) if "ssthresh" in f else None,
                 snd_wnd=f.get("snd_wnd"), retransmits=r["counters"]["retransmits"],
                 sender_wall=c["seconds"])
        r["flow"] = f
    return r
