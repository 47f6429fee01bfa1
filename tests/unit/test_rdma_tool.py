#!/usr/bin/python3
"""test_rdma_tool.py - cleave-rdma's command line, without a daemon: usage errors exit 2 with a
message naming the bad value, --help documents the options and the pattern's seeds, and no
cleaved is exit 2. The data moves need two daemons: tests/integration (root).
"""

import os
import subprocess
import tempfile
import unittest

TOOL = os.environ.get("CLEAVE_RDMA", "build/tools/cleave-rdma")


def run(*args):
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=10)


class CleaveRdmaCommandLine(unittest.TestCase):
    def test_usage_errors_exit_2_with_a_message(self):
        for args, want in [
                ([], "give one of --listen PORT and --connect IPv4:PORT"),
                (["--listen", "1", "--connect", "1.2.3.4:5"], "give one of"),
                (["--listen", "0"], "bad value '0' for --listen"),
                (["--listen", "65536"], "bad value '65536' for --listen"),
                (["--connect", "1.2.3.4"], "bad value '1.2.3.4' for --connect"),
                (["--connect", "host:80"], "bad value 'host:80' for --connect"),
                (["--listen", "80", "--ops", "send,foo"], "bad value 'send,foo' for --ops"),
                (["--listen", "80", "--ops", ""], "bad value '' for --ops"),
                (["--listen", "80", "--ops", "send,"], "bad value 'send,' for --ops"),
                (["--listen", "80", "--ops", "Send"], "bad value 'Send' for --ops"),
                (["--listen", "80", "--sizes", "0"], "bad value '0' for --sizes"),
                (["--listen", "80", "--sizes", "1g,2g"], "bad value '1g,2g' for --sizes"),
                (["--listen", "80", "--sizes", "1025m"], "bad value '1025m' for --sizes"),
                (["--listen", "80", "--sizes", "4x"], "bad value '4x' for --sizes"),
                (["--listen", "80", "--sizes", "1,,2"], "bad value '1,,2' for --sizes"),
                (["--listen", "80", "--sizes", "-1"], "bad value '-1' for --sizes"),
                (["--listen", "80", "--mtu", "1000"], "bad value '1000' for --mtu"),
                (["--listen", "80", "--mtu", "8192"], "bad value '8192' for --mtu"),
                (["--listen", "80", "--iters", "0"], "bad value '0' for --iters"),
                (["--listen", "80", "--iters", "-3"], "bad value '-3' for --iters"),
                (["--listen", "80", "--timeout", "0"], "bad value '0' for --timeout"),
                (["--listen", "80", "--params", "x" * 128], "for --params"),
                (["--listen", "80", "extra"], "unexpected argument 'extra'"),
                (["--listen", "80", "--bogus"], "unrecognized option"),
        ]:
            p = run(*args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(want, p.stderr, args)
            self.assertEqual(p.stdout, "", args)

    def test_help(self):
        p = run("--help")
        self.assertEqual(p.returncode, 0)
        self.assertEqual(p.stderr, "")
        for want in ["--listen PORT", "--connect IP:PORT", "--socket PATH", "--ops LIST",
                     "--sizes LIST", "--mtu N", "--selective-repeat", "--params TEXT",
                     "--iters N", "--timeout SEC", "--json",
                     "send, send_imm, write, write_imm, read",
                     "op=write size=1048576 sha256=HEX peer=HEX match=yes us=US MBps=RATE",
                     "seed = SIZE * 8 + K + 1", "send=0, send_imm=1, write=2",
                     "Exit status: 0"]:
            self.assertIn(want, p.stdout)

    def test_no_cleaved_is_exit_2(self):
        with tempfile.TemporaryDirectory() as d:
            p = run("-s", os.path.join(d, "none.sock"), "--listen", "5000", "--sizes", "1k",
                    "--ops", "write")
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot connect to cleaved", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
