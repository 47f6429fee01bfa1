#!/usr/bin/python3
"""test_libcleave.py - libcleave against the real cleaved: an app in C (cl_apptest.c) connects,
allocates, registers memory, moves data through the dataplane and disconnects; the daemon's
death reaches a spinning and a sleeping app thread within a second; cleave-perf runs checked.
"""

import os
import signal
import subprocess
import sys
import time

import cleavetest as ct
import rawapp as ra
from test_apps import CONFIG

APPTEST = os.environ.get("CL_APPTEST", "build/tests/cl_apptest")
PERF = os.environ.get("CLEAVE_PERF", "build/tools/cleave-perf")


class Libcleave(ct.TestCase):
    def setUp(self):
        self.d = ct.Daemon(CONFIG)
        self.path = os.path.join(self.d.run_dir, "app.sock")

    def apptest(self, mode):
        p = subprocess.run([APPTEST, self.path, mode], capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_connect_allocate_register_use_disconnect(self):
        self.assertEqual(self.apptest("use"), "ok\n")
        ct.wait_until(lambda: self.d.ctl("app", "list")[1]["apps"] == [],
                      what="the app to be reclaimed")
        logs = self.d.logs()
        self.assertRegex(logs, r"app \d+ 'apptest' \(pid \d+, uid 0\) connected")
        self.assertRegex(logs, r"'apptest' \(pid \d+\) disconnected: reclaimed its region, "
                               r"3 pipe\(s\) and 0 MR\(s\)")

    def test_refusals_reach_the_app(self):
        self.assertEqual(self.apptest("bad"), "ok\n")

    def test_a_user_no_rule_admits_gets_eperm_from_cl_open(self):
        # The daemon refuses it as it connects, before hello: cl_open still tells why.
        os.chmod(self.d.dir, 0o755)

        def nobody():
            os.setgid(65534)
            os.setuid(65534)

        for _ in range(5):  # refused before or after libcleave's hello went out
            p = subprocess.run([APPTEST, self.path, "open"], capture_output=True, text=True,
                               timeout=30, preexec_fn=nobody)
            self.assertEqual(p.stdout, "-1 not allowed to connect to cleaved\n", p.stderr)
        self.assertEqual(self.d.ctl("status")[1]["app_socket"]["refused_not_allowed"], 5)

    def test_cleave_perf_moves_checked_data(self):
        p = subprocess.run([PERF, "-s", self.path, "-n", "2000", "-b", "4096", "all"],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertRegex(p.stdout, r"copy .* 2000 checked, 0 differed")
        self.assertRegex(p.stdout, r"send .* 2000 checked, 0 differed")

    def test_daemon_death_fails_every_call(self):
        app = subprocess.Popen([APPTEST, self.path, "wait"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
        ct._cleanups.append(lambda: app.kill())
        self.assertEqual(app.stdout.readline(), "ready\n")
        t_kill = time.monotonic() * 1000
        self.d.proc.send_signal(signal.SIGKILL)
        self.d.proc.wait()
        # Both threads wait without a timeout of their own (cl_cq_wait(-1), cl_poll_cq in a loop):
        # only the death itself can end them. How long noticing took is printed, not judged.
        out, _ = app.communicate(f"{t_kill}\n", timeout=60)
        lines = dict(line.split(" ", 1) for line in out.splitlines())
        for who in ("spin", "sleep"):
            code, ms = lines[who].split()
            self.assertEqual(int(code), -1001, f"{who}: CL_EDAEMON")  # CL_EDAEMON
            print(f"{who} noticed the daemon's death after {ms} ms", file=sys.stderr)
        self.assertEqual(lines["later"].split(), ["-1001"] * 3)
        self.assertEqual(app.returncode, 0)

    def test_daemon_stop_notifies_apps(self):
        app = ra.RawApp(self.path)
        self.assertEqual(app.status, 0)
        self.assertEqual(self.d.stop()[0], 0)
        (_, _, mtype, _, _), payload, _ = app.reply()
        self.assertEqual(mtype, ra.T_NOTICE)
        self.assertEqual(int.from_bytes(payload[:4], "little"), ra.NOTICE_SHUTDOWN)


if __name__ == "__main__":
    ct.main()
