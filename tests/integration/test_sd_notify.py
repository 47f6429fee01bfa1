#!/usr/bin/python3
"""test_sd_notify.py - cleaved speaks systemd's notify protocol: READY, STATUS, WATCHDOG, STOPPING.

The test plays systemd: it binds its own NOTIFY_SOCKET (a path, and the abstract '@' form) and
starts cleaved on a net_null port with WATCHDOG_USEC set.
"""

import os
import signal
import socket
import tempfile
import time

import cleavetest as ct

CONFIG = """
runtime_dir: {run}
eal:
  file_prefix: {prefix}
dataplane:
  idle_sleep_us: 20
ports:
  - name: n0
    device: net_null0,no-rx=1
    ipv4: 10.0.0.1/24
"""


class Notify:
    def __init__(self, abstract):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"cleave-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            self.dir = tempfile.mkdtemp(prefix="cleave-notify-")
            path = os.path.join(self.dir, "notify.sock")
            self.sock.bind(path)
            self.env = path
        self.messages = []

    def collect(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass
        return self.messages

    def wait_for(self, text, timeout=15):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if any(text in m for m in self.messages):
                return
            self.collect(0.05)
        raise AssertionError(f"no {text!r} in {self.messages}")


class SdNotifyTest(ct.TestCase):
    def run_daemon(self, abstract, watchdog_pid=None):
        n = Notify(abstract)
        env = {"NOTIFY_SOCKET": n.env, "WATCHDOG_USEC": "200000"}
        if watchdog_pid is not None:
            env["WATCHDOG_PID"] = str(watchdog_pid)
        d = ct.Daemon(CONFIG, env=env, wait_ready=False)
        n.wait_for("READY=1")
        return n, d

    def check_lifecycle(self, abstract):
        n, d = self.run_daemon(abstract)
        ready = [m for m in n.messages if "READY=1" in m][0]
        self.assertIn("STATUS=", ready)
        # The control socket answers once READY is sent.
        self.assertEqual(d.ctl("status")[1]["dataplane"]["state"], "running")
        n.messages.clear()
        n.collect(1.0)
        pings = sum(m.count("WATCHDOG=1") for m in n.messages)
        self.assertGreaterEqual(pings, 5, n.messages)  # every 100 ms: half of WATCHDOG_USEC
        self.assertTrue(any(m.startswith("STATUS=") and "ports up" in m for m in n.messages),
                        n.messages)
        code, _ = d.stop()
        self.assertEqual(code, 0)
        n.collect(0.2)
        self.assertTrue(any("STOPPING=1" in m for m in n.messages), n.messages)

    def test_path_socket(self):
        self.check_lifecycle(abstract=False)

    def test_abstract_socket(self):
        self.check_lifecycle(abstract=True)

    def test_watchdog_for_another_pid_is_ignored(self):
        n, d = self.run_daemon(abstract=False, watchdog_pid=1)
        n.messages.clear()
        n.collect(0.6)
        self.assertFalse(any("WATCHDOG=1" in m for m in n.messages), n.messages)
        self.assertEqual(d.stop()[0], 0)


    def test_journald_lines_carry_a_priority_and_no_timestamp(self):
        # systemd sets JOURNAL_STREAM when stderr goes to the journal; format: auto follows it.
        d = ct.Daemon(CONFIG, env={"JOURNAL_STREAM": "8:12345"})
        d.proc.send_signal(signal.SIGHUP)  # logged as a warning, and otherwise ignored
        ct.wait_until(lambda: "SIGHUP ignored" in d.logs(), what="the SIGHUP warning")
        self.assertEqual(d.stop()[0], 0)
        lines = [x for x in d.logs().splitlines() if x]
        for line in lines:
            self.assertRegex(line, r"^<[0-7]>[^<]", line)
        self.assertTrue(lines[0].startswith("<6>cleaved "), lines[0])
        self.assertIn("<4>SIGHUP ignored: cleaved does not reload its configuration; restart it "
                      "to apply changes", lines)
        self.assertIn("<6>Terminated received: shutting down", lines)
        # journald stamps lines itself (a whole date and time: a random MAC may hold "12:34:56")
        self.assertNotRegex(d.logs(), r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}")


if __name__ == "__main__":
    ct.main()
