#!/usr/bin/python3
"""test_blk_tool.py - cleave-blk's command line, without a daemon: usage errors exit 2 with a
message naming the bad value, --help documents every option and the exit statuses, and no
cleaved is exit 2. The I/O needs two daemons: tests/integration/test_solar.py (root).
"""

import os
import subprocess
import tempfile
import unittest

TOOL = os.environ.get("CLEAVE_BLK", "build/tools/cleave-blk")


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=10)


class CleaveBlkCommandLine(unittest.TestCase):
    def test_usage_errors_exit_2_with_a_message(self):
        for args, want in [
                ([], "give one of --export PORT and --connect IPv4:PORT"),
                (["--export", "1", "--connect", "1.2.3.4:5"], "give one of"),
                (["--export", "0"], "bad value '0' for --export"),
                (["--export", "65536"], "bad value '65536' for --export"),
                (["--connect", "1.2.3.4"], "bad value '1.2.3.4' for --connect"),
                (["--connect", "host:80"], "bad value 'host:80' for --connect"),
                (["--export", "80", "--volume", "1k"], "bad value '1k' for --volume"),
                (["--export", "80", "--volume", "65g"], "bad value '65g' for --volume"),
                (["--export", "80", "--bs", "1000"], "bad value '1000' for --bs"),
                (["--export", "80", "--bs", "32m"], "bad value '32m' for --bs"),
                (["--export", "80", "--bs", "0"], "bad value '0' for --bs"),
                (["--export", "80", "--qd", "0"], "bad value '0' for --qd"),
                (["--export", "80", "--qd", "1025"], "bad value '1025' for --qd"),
                (["--export", "80", "--rw", "RandRW"], "bad value 'RandRW' for --rw"),
                (["--export", "80", "--mix", "101"], "bad value '101' for --mix"),
                (["--export", "80", "--paths", "0"], "bad value '0' for --paths"),
                (["--export", "80", "--paths", "65"], "bad value '65' for --paths"),
                (["--export", "80", "--routes", "0"], "bad value '0' for --routes"),
                (["--export", "80", "--routes", "5"], "bad value '5' for --routes"),
                (["--connect", "1.2.3.4:5", "--interval", "0"], "bad value '0' for --interval"),
                (["--export", "80", "--block", "255"], "bad value '255' for --block"),
                (["--export", "80", "--block", "8192"], "bad value '8192' for --block"),
                (["--export", "80", "--time", "0"], "bad value '0' for --time"),
                (["--export", "80", "--ios", "-1"], "bad value '-1' for --ios"),
                (["--export", "80", "--timeout", "0"], "bad value '0' for --timeout"),
                (["--export", "80", "--transport", "rocev2"], "bad value 'rocev2' for --transport"),
                (["--export", "80", "--transport", "tcp", "--qd", "513"], "--qd up to 512"),
                (["--connect", "1.2.3.4:5", "--qd", "1024", "--bs", "2m"], "at most 1g"),
                (["--export", "80", "extra"], "unexpected argument 'extra'"),
                (["--export", "80", "--bogus"], "unrecognized option"),
        ]:
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(want, p.stderr, args)
            self.assertEqual(p.stdout, "", args)

    def test_help(self):
        p = run("--help")
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stderr, "")
        for want in ["--export PORT", "--connect IP:PORT", "--socket PATH", "--ctl PATH",
                     "--volume SIZE", "--bs SIZE", "--qd N", "--rw MODE", "--mix PCT",
                     "--paths N", "--routes N", "--block B", "--interval MS", "--time SEC", "--ios N", "--seed N",
                     "--timeout SEC", "--json", "--transport T",
                     "write, read, randwrite, randread, randrw (default), or",
                     "writeread: random writes for the first half",
                     "Exit status: 0"]:
            self.assertIn(want, p.stdout)

    def test_no_cleaved_is_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            p = run("-s", os.path.join(d, "none.sock"), "--export", "5000")
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot reach cleaved", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
