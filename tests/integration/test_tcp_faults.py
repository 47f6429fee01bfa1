#!/usr/bin/python3
"""test_tcp_faults.py - TCP against the Linux kernel over a lossy, reordering wire.

The set-up is test_tcp.py's (cleaved on a tap in a scratch namespace, the kernel on the tap's
other end; both NIC backends), with seeded wire faults on cleave's side of the port, in both
directions: 1 % loss and 1 % reordering (src/dataplane/nic/fault.h). RX faults act before the NIC
sees a frame, TX faults as frames leave it, so the kernel's data and cleave's ACKs are lost and
reordered alike. Each case checks that the bytes arrive intact (sha256 on both ends), that the
connection closes cleanly, that the fault counters show the faults happened, and that TCP had to
retransmit (the sender's count: the kernel's TCP_INFO, or cleave's `flow list`).

One case takes its faults from the YAML configuration, the other sets them at run time with
`cleavectl port fault`. CLEAVE_TCP_FAULT_BYTES sets the bytes per case (default 64 MiB).
"""

import os
import unittest

import cleave_pattern
import cleavetest as ct
import test_tcp as tcp
import wire_goodput as wg

N = int(os.environ.get("CLEAVE_TCP_FAULT_BYTES", 64 << 20))
SEED = int(os.environ.get("CLEAVE_FAULT_SEED", 1))
LOSSY = {"loss": 0.01, "reorder": 0.01}

# test_tcp.py's configuration with faults on the port.
CONFIG = tcp.CONFIG + f"""    faults:
      seed: {SEED}
      rx:
        loss: 0.01
        reorder: 0.01
      tx:
        loss: 0.01
        reorder: 0.01
"""
tcp.RUN_TIMEOUT = 60 + N / 1e6  # what tool_result and peer_result wait


class Faults(tcp.Tcp):
    """The cases; a subclass per backend sets `backend`."""

    config = CONFIG

    def faults(self):
        """port show's faults of p0: {"rx": {...}, "tx": {...}} with settings and counters."""
        return self.d.ctl("port", "show", "p0")[1][0]["faults"]

    def assert_faults_happened(self, f, seed):
        for d in ("rx", "tx"):
            self.assertTrue(f[d]["enabled"], f)
            self.assertEqual((f[d]["loss"], f[d]["reorder"], f[d]["seed"]),
                             (LOSSY["loss"], LOSSY["reorder"], seed), f)
            self.assertGreater(f[d]["dropped"], 0, f)
            self.assertGreater(f[d]["reordered"], 0, f)
            self.assertEqual(f[d]["duplicated"], 0, f)

    def test_kernel_client_sends_to_a_cleave_listener_over_a_lossy_wire(self):
        before = self.faults()
        self.assertEqual(before["rx"]["seed"], SEED, "the configuration's faults are on")
        _, k = self.kernel_client_to_cleave(5101, N)
        self.assertGreater(k["total_retrans"], 0, "the kernel had to retransmit")
        self.assert_faults_happened(self.faults(), SEED)

    def test_cleave_client_sends_to_a_kernel_server_over_a_lossy_wire(self):
        # Set at run time: off first (the counters stay), then other faults with another seed.
        code, r, _ = self.d.ctl("port", "fault", "p0", "off")
        self.assertFalse(r["faults"]["rx"]["enabled"] or r["faults"]["tx"]["enabled"], r)
        seed = SEED + 100
        self.d.ctl("port", "fault", "p0", "loss", "0.01", "reorder", "0.01", "seed", str(seed))
        code, _, err = self.d.ctl("port", "fault", "p0", "rx", "loss", "1.5", check=False)
        self.assertEqual(code, 2, err)  # refused by cleavectl itself
        self.assertIn("probability", err)
        watch = wg.FlowWatch(self.d)  # flows' last infos, read while they live
        s = self.peer("server", tcp.KERNEL, 5102, "--recv")
        code, r, err = self.tool_result(self.tool("--connect", f"{tcp.KERNEL}:5102", "--send", N,
                                                  "--seed", 3))
        k = self.peer_result(s)
        retransmits = max((f.get("retransmits", 0) for f in watch.done()), default=0)
        self.assert_clean(code, r, err)
        self.assertIsNone(k["error"], k)
        self.assertEqual((r["sent"], k["received"]), (N, N))
        self.assertEqual(k["received_sha256"], r["sent_sha256"])
        self.assertEqual(r["sent_sha256"], cleave_pattern.sha256(3, N))
        self.assertGreater(retransmits, 0, "cleave had to retransmit")
        self.assert_faults_happened(self.faults(), seed)


class CleaveBackend(Faults, ct.TestCase):
    backend = "cleave"


class GenericBackend(Faults, ct.TestCase):
    backend = "generic"


def load_tests(loader, standard_tests, pattern):
    """This file's cases only: those inherited from test_tcp.Tcp run in test_tcp.py."""
    suite = unittest.TestSuite()
    for cls in (CleaveBackend, GenericBackend):
        suite.addTests(cls(name) for name in loader.getTestCaseNames(cls) if name in vars(Faults))
    return suite


if __name__ == "__main__":
    if not os.access(tcp.TOOL, os.X_OK):
        print(f"skipped: {tcp.TOOL} is not built", flush=True)
        raise SystemExit(ct.SKIP)
    ct.main()
