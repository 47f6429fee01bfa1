#!/usr/bin/python3
"""mgmt_load.py - what one management client can impose on another: the requests per second a
client flooding the control socket with tiny pipelined requests gets served, against the
latency of another client's `status` (a new connection per request, as cleavectl makes).

Each run measures the status latency twice on the same daemon: quiet (the baseline), then while
a separate process floods one connection with one-line `log.get` requests (writing them as fast
as the socket takes them, reading the answers in another thread). Prints per run the requests/s
the flood sent and got answered within its time, and the status p50/p99 quiet and flooded, then
their medians over the runs.
--baseline DIR alternates the runs with DIR's cleaved (another revision's build dir, e.g.
main's). Asserts nothing. Needs root (as the integration tests).

Usage: mgmt_load.py [--runs N] [--seconds S] [--baseline DIR]
"""

import argparse
import multiprocessing
import os
import socket
import statistics
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import cleavetest as ct  # noqa: E402

CONFIG = ct.CONFIG_HEAD + """ports:
  - name: n0
    device: net_null0,no-rx=1
    ipv4: 10.9.0.1/24
"""

REQUEST = b'{"version":1,"command":"log.get"}\n'
STATUS = b'{"version":1,"id":1,"command":"status"}\n'
GIVE_UP_S = 60.0  # a status unanswered this long counts as this long (and is reported)


def status_rtt(path):
    """One status request on a new connection; seconds until its answer, or GIVE_UP_S."""
    t0 = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(GIVE_UP_S)
        s.connect(path)
        s.sendall(STATUS)
        buf = b""
        while b"\n" not in buf:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                return GIVE_UP_S
            if not chunk:
                raise RuntimeError("cleaved closed the status connection")
            buf += chunk
    return time.monotonic() - t0


def probe(path, seconds, min_probes):
    """Status round trips one after another for `seconds`, and at least min_probes unless one
    goes unanswered for GIVE_UP_S."""
    out = []
    end = time.monotonic() + seconds
    while time.monotonic() < end or (len(out) < min_probes and GIVE_UP_S not in out):
        out.append(status_rtt(path))
    return out


def flood(path, seconds, started, result):
    """One connection: pipelined requests for `seconds`, answers counted by a reader thread.
    Puts (requests sent, answers received, seconds) in result."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    answers = [0]
    done = threading.Event()

    def reader():
        while not done.is_set():
            try:
                chunk = s.recv(1 << 20)
            except OSError:
                return
            if not chunk:
                return
            answers[0] += chunk.count(b"\n")

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    batch = memoryview(REQUEST * 2048)
    off = 0
    sent = 0
    started.set()
    t0 = time.monotonic()
    end = t0 + seconds
    s.settimeout(0.2)
    while time.monotonic() < end:
        try:
            n = s.send(batch[off:])
            sent += n
            off = (off + n) % len(batch)  # whole lines, however it splits
        except socket.timeout:
            pass
        except OSError:
            break
    elapsed = time.monotonic() - t0
    got = answers[0]
    done.set()
    s.close()
    result.put((sent // len(REQUEST), got, elapsed))


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def one_run(binary, seconds):
    ct.CLEAVED = binary
    d = ct.Daemon(CONFIG)
    try:
        path = d.socket
        for _ in range(20):  # warm up
            status_rtt(path)
        quiet = probe(path, seconds, 50)
        started = multiprocessing.Event()
        result = multiprocessing.Queue()
        p = multiprocessing.Process(target=flood, args=(path, seconds, started, result))
        p.start()
        started.wait()
        flooded = probe(path, seconds, 10)
        sent, answers, elapsed = result.get(timeout=600)
        p.join()
        return {"sent": sent / elapsed, "rate": answers / elapsed, "quiet": quiet,
                "flooded": flooded}
    finally:
        d.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--baseline", help="build dir whose cleaved to compare against")
    args = ap.parse_args()
    ct.require_root()
    builds = ct.builds(args.baseline)
    got = {name: [] for name, _ in builds}
    for r in range(args.runs):
        for name, binary in (builds if r % 2 == 0 else builds[::-1]):  # alternate who goes first
            x = one_run(binary, args.seconds)
            got[name].append(x)
            ms = lambda v: v * 1000.0  # noqa: E731
            print(f"run {r + 1} {name}: flood {x['sent']:.0f} requests/s sent, {x['rate']:.0f} "
                  f"answered; status "
                  f"quiet p50 {ms(pct(x['quiet'], 50)):.2f} ms p99 {ms(pct(x['quiet'], 99)):.2f} ms "
                  f"({len(x['quiet'])}), flooded p50 {ms(pct(x['flooded'], 50)):.2f} ms "
                  f"p99 {ms(pct(x['flooded'], 99)):.2f} ms ({len(x['flooded'])}, "
                  f"{x['flooded'].count(GIVE_UP_S)} unanswered after {GIVE_UP_S:.0f} s)", flush=True)
    for name, _ in builds:
        xs = got[name]
        med = lambda f: statistics.median(f(x) for x in xs)  # noqa: E731
        print(f"{name}: median of {len(xs)} runs: flood {med(lambda x: x['sent']):.0f} requests/s "
              f"sent, {med(lambda x: x['rate']):.0f} answered; "
              f"status quiet p50 {med(lambda x: pct(x['quiet'], 50)) * 1e3:.2f} ms "
              f"p99 {med(lambda x: pct(x['quiet'], 99)) * 1e3:.2f} ms; "
              f"flooded p50 {med(lambda x: pct(x['flooded'], 50)) * 1e3:.2f} ms "
              f"p99 {med(lambda x: pct(x['flooded'], 99)) * 1e3:.2f} ms "
              f"(spread of flooded p99: {min(pct(x['flooded'], 99) for x in xs) * 1e3:.2f}-"
              f"{max(pct(x['flooded'], 99) for x in xs) * 1e3:.2f} ms)")


if __name__ == "__main__":
    main()
