#!/usr/bin/python3
"""test_tcp_tool.py - cleave-tcp against a fake cleaved whose flows are kernel TCP sockets on
loopback (fake_flowd.py), with the kernel peers of the integration tests (tcp_peer.py).

Checks the tool on its own: the pattern against the Python one, both directions and both at
once checked by SHA-256, small windows and odd sizes, an HTTP request answered, abort, a peer's
reset, a refused connect, the timeout, the command line. The real daemon is tested by
tests/integration/test_tcp.py. Needs no root and no DPDK.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import cleave_pattern  # noqa: E402
import fake_flowd  # noqa: E402

TOOL = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")
PEER = os.path.join(HERE, "..", "integration", "tcp_peer.py")
N = 8 << 20
EMPTY = hashlib.sha256().hexdigest()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Tool:
    """cleave-tcp running in the background."""

    def __init__(self, sock, *args):
        self.p = subprocess.Popen([TOOL, "-s", sock, "--json", *map(str, args)],
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)

    def result(self, timeout=60):
        out, err = self.p.communicate(timeout=timeout)
        self.code, self.stderr = self.p.returncode, err
        lines = out.splitlines()
        self.json = json.loads(lines[-1]) if lines else None
        return self.json

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class CleaveTcp(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="cleave-tcp-test-")
        self.sock = os.path.join(self.dir, "app.sock")
        self.d = fake_flowd.FakeFlowd(self.sock).start()
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if isinstance(p, Tool):
                p.kill()
            elif p.poll() is None:
                p.kill()
                p.wait()
        self.d.stop()
        os.rmdir(self.dir)

    def tool(self, *args):
        t = Tool(self.sock, *args)
        self.procs.append(t)
        return t

    def peer(self, *args, background=False):
        cmd = ["/usr/bin/python3", PEER, *[str(a) for a in args]]
        if not background:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            return json.loads(p.stdout.splitlines()[-1])
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self.procs.append(p)
        if args[0] == "server":
            self.assertEqual(p.stdout.readline(), "ready\n")
        return p

    def finish(self, p):
        out, _ = p.communicate(timeout=120)
        return json.loads(out.splitlines()[-1])

    def clean(self, t, r):
        self.assertEqual(t.code, 0, f"{t.stderr}\n{r}\n{self.d.log}")
        self.assertEqual((r["error"], r["close_status"], r["message"]), (0, 0, ""))

    def test_pattern_matches_the_python_generator(self):
        self.assertEqual(cleave_pattern._check(TOOL), 0)

    def test_kernel_client_to_listener(self):
        port = free_port()
        t = self.tool("--listen", port, "--recv")
        k = self.peer("client", "127.0.0.1", port, "--send", N, "--retry", 10)
        r = t.result()
        self.clean(t, r)
        self.assertIsNone(k["error"])
        self.assertEqual(r["received"], N)
        self.assertEqual(r["received_sha256"], cleave_pattern.sha256(1, N))
        self.assertEqual(r["received_sha256"], k["sent_sha256"])
        self.assertEqual((r["sent"], r["sent_sha256"]), (0, EMPTY))

    def test_connect_to_kernel_server(self):
        port = free_port()
        s = self.peer("server", "127.0.0.1", port, "--recv", background=True)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", N, "--seed", 77)
        r = t.result()
        k = self.finish(s)
        self.clean(t, r)
        self.assertEqual((r["sent"], k["received"]), (N, N))
        self.assertEqual(r["sent_sha256"], cleave_pattern.sha256(77, N))
        self.assertEqual(k["received_sha256"], r["sent_sha256"])

    def test_no_check_sends_and_receives_without_hashing(self):
        # --no-check: every byte still goes and is counted, the clean close is still required,
        # but nothing is hashed (null) and the sender reuses the window it filled once.
        port = free_port()
        n = N + 4097
        s = self.peer("server", "127.0.0.1", port, "--recv", background=True)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", n, "--no-check", "--chunk",
                      "64k", "--window", "256k")
        r = t.result()
        k = self.finish(s)
        self.clean(t, r)
        self.assertEqual((r["sent"], k["received"]), (n, n))
        self.assertIsNone(r["sent_sha256"])
        self.assertIsNone(r["received_sha256"])
        # Not the pattern stream: its first 256 KiB, sent again and again.
        self.assertNotEqual(k["received_sha256"], cleave_pattern.sha256(1, n))
        port = free_port()
        t = self.tool("--listen", port, "--recv", "--no-check")
        k = self.peer("client", "127.0.0.1", port, "--send", n, "--retry", 10)
        r = t.result()
        self.clean(t, r)
        self.assertEqual((r["received"], r["sent"]), (n, 0))
        self.assertIsNone(r["received_sha256"])
        self.assertIsNone(r["sent_sha256"])
        port = free_port()  # and through a receive ring
        t = self.tool("--listen", port, "--ring", "64k", "--no-check")
        k = self.peer("client", "127.0.0.1", port, "--send", n, "--retry", 10)
        r = t.result()
        self.clean(t, r)
        self.assertEqual(r["received"], n)
        self.assertIsNone(r["received_sha256"])

    def test_both_ways_with_small_windows_and_odd_sizes(self):
        port = free_port()
        n_out, n_in = N + 12345, 3 * N + 7
        s = self.peer("server", "127.0.0.1", port, "--recv", "--send", n_in, "--seed", 5,
                      background=True)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", n_out, "--recv", "--chunk",
                      "4099", "--window", "40k", "--seed", 9)
        r = t.result()
        k = self.finish(s)
        self.clean(t, r)
        self.assertIsNone(k["error"])
        self.assertEqual((r["sent"], r["received"]), (n_out, n_in))
        self.assertEqual(r["sent_sha256"], cleave_pattern.sha256(9, n_out))
        self.assertEqual(k["received_sha256"], r["sent_sha256"])
        self.assertEqual(r["received_sha256"], cleave_pattern.sha256(5, n_in))

    def test_both_ways_into_a_receive_ring_that_wraps(self):
        port = free_port()
        n_out, n_in = N + 12345, 3 * N + 7
        s = self.peer("server", "127.0.0.1", port, "--recv", "--send", n_in, "--seed", 5,
                      background=True)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", n_out, "--ring", "40000",
                      "--chunk", "4099", "--seed", 9)
        r = t.result()
        k = self.finish(s)
        self.clean(t, r)
        self.assertIsNone(k["error"])
        self.assertEqual((r["sent"], r["received"]), (n_out, n_in))
        self.assertEqual(k["received_sha256"], r["sent_sha256"])
        self.assertEqual(r["received_sha256"], cleave_pattern.sha256(5, n_in))

    def test_kernel_reset_is_reported_through_a_ring(self):
        port = free_port()
        t = self.tool("--listen", port, "--ring", "64k")
        self.peer("client", "127.0.0.1", port, "--send", 100000, "--reset", "--retry", 10)
        r = t.result()
        self.assertEqual(t.code, 1)
        self.assertEqual(r["close_status"], -104)
        self.assertIn("reset", t.stderr)

    def test_http_request_answered_with_the_pattern(self):
        port = free_port()
        n = 3 * 1000 * 1000 + 1
        t = self.tool("--listen", port, "--http", n, "--chunk", "64k")
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/x", timeout=10) as resp:
                    body = resp.read()
                    ctype = resp.headers["Content-Type"]
                break
            except (ConnectionRefusedError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        r = t.result()
        self.clean(t, r)
        self.assertEqual(ctype, "application/octet-stream")
        self.assertEqual(len(body), n)
        self.assertEqual(hashlib.sha256(body).hexdigest(), cleave_pattern.sha256(1, n))
        self.assertEqual(r["sent_sha256"], cleave_pattern.sha256(1, n))
        self.assertGreater(r["received"], 0)  # the request

    def test_abort_resets_the_kernel_after_the_data(self):
        port = free_port()
        s = self.peer("server", "127.0.0.1", port, "--recv", background=True)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", N, "--abort")
        r = t.result()
        k = self.finish(s)
        self.assertEqual(t.code, 0, t.stderr)
        self.assertEqual(r["sent"], N)
        self.assertEqual(k["error"], "ConnectionResetError")
        self.assertEqual(k["received_sha256"], cleave_pattern.sha256(1, k["received"]))

    def test_kernel_reset_is_reported(self):
        port = free_port()
        t = self.tool("--listen", port, "--recv")
        self.peer("client", "127.0.0.1", port, "--send", 100000, "--reset", "--retry", 10)
        r = t.result()
        self.assertEqual(t.code, 1)
        self.assertEqual(r["close_status"], -104)
        self.assertIn("reset", t.stderr)

    def test_refused_connect_fails_at_once(self):
        port = free_port()
        t0 = time.monotonic()
        t = self.tool("--connect", f"127.0.0.1:{port}", "--send", 10)
        r = t.result()
        self.assertEqual(t.code, 1)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(r["error"], -111)
        self.assertIn(f"connect to 127.0.0.1:{port}: connection refused (-111)", t.stderr)

    def test_every_wait_times_out(self):
        port = free_port()
        t0 = time.monotonic()
        t = self.tool("--listen", port, "--recv", "--timeout", "0.5")
        t.result()
        self.assertEqual(t.code, 1)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn(f"timed out after 0.5 s waiting for a connection on port {port}", t.stderr)
        # Connected, then a peer that neither sends nor closes.
        port = free_port()
        s = socket.socket()
        s.bind(("127.0.0.1", port))
        s.listen(1)
        self.addCleanup(s.close)
        t = self.tool("--connect", f"127.0.0.1:{port}", "--recv", "--timeout", "0.5")
        t.result()
        self.assertEqual(t.code, 1)
        self.assertIn("waiting for data or the peer's close (0 bytes received)", t.stderr)

    def test_command_line(self):
        for args, want in [([], "give one of --listen"),
                           (["--listen", "1", "--connect", "1.2.3.4:5"], "give one of"),
                           (["--listen", "0"], "bad value '0' for --listen"),
                           (["--connect", "1.2.3.4"], "bad value '1.2.3.4' for --connect"),
                           (["--connect", "host:80"], "bad value"),
                           (["--listen", "80", "--send", "1x"], "bad value '1x' for --send"),
                           (["--listen", "80", "--close", "--abort"], "exclude each other"),
                           (["--connect", "1.2.3.4:5", "--http", "10"], "needs --listen"),
                           (["--listen", "80", "--http", "1", "--send", "1"], "no --send"),
                           (["--listen", "80", "--timeout", "0"], "bad value '0' for --timeout"),
                           (["--listen", "80", "--ring", "0"], "bad value '0' for --ring"),
                           (["--listen", "80", "--messages", "-1"], "bad value '-1' for --messages"),
                           (["--listen", "80", "--messages", "1", "--msg-max", "0"],
                            "bad value '0' for --msg-max"),
                           (["--listen", "80", "--messages", "1", "--msg-max", "2g"],
                            "bad value '2g' for --msg-max"),
                           (["--listen", "80", "--messages", "1", "--send", "1"], "no --send"),
                           (["--listen", "80", "--messages", "1", "--ring", "1m"], "no --send"),
                           (["--listen", "80", "--msg-max", "4k"], "need --messages"),
                           (["--listen", "80", "--messages", "1", "--no-check"],
                            "--no-check measures a byte stream"),
                           (["--listen", "80", "--http", "1", "--no-check"],
                            "--no-check measures a byte stream"),
                           (["--listen", "80", "--messages", "1", "--msg-min", "2k",
                             "--msg-max", "1k"], "--msg-min is larger")]:
            p = subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=10)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(want, p.stderr, args)
        p = subprocess.run([TOOL, "--help"], capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0)
        self.assertIn("0x2545F4914F6CDD1D", p.stdout)
        self.assertIn("0xD1B54A32D192ED03", p.stdout)  # the message sizes' generator
        p = subprocess.run([TOOL, "-s", os.path.join(self.dir, "none.sock"), "--listen", "80"],
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot connect to cleaved", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
