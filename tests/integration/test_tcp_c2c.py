#!/usr/bin/python3
"""test_tcp_c2c.py - TCP between two cleaved daemons: our stack on both ends of the wire.

Namespaces a and b are joined by a veth; cleaved runs in each (a at 10.99.0.1, b at 10.99.0.2;
the kernels there have no address on the veth, so only the daemons answer). Both daemons are on
the cleave backend (net_cleave over net_af_packet: the NIC model places payloads), except in the
interoperation cases, where a is on the generic backend (net_af_packet alone: the copy path).
cleave-tcp is the app on both sides; both hash what they send and receive (the pattern of
cleave_pattern.py). Cases:
  - a -> b and b -> a, sha256 equal, a clean close both ways;
  - both directions at once on one flow;
  - an abort on one side reaches the other as a reset;
  - zero copy: while the data flows, the receiving flow's copied_bytes stays 0
    (`cleavectl flow list`); afterwards the receiving daemon's TCP counters over all flows
    (`cleavectl transport list`) show placed_bytes equal to the transfer and copied_bytes 0, its
    flow-path copy counter (`stats show`) is 0 and its NIC placed at least the transfer
    (`nic show`);
  - generic <-> cleave both ways: the generic side copies, the cleave side still places.
CLEAVE_TCP_BYTES sets the bytes per direction (default 64 MiB).
"""

import json
import os
import subprocess
import threading
import time

import cleave_pattern
import cleavetest as ct

TOOL = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")
N = int(os.environ.get("CLEAVE_TCP_BYTES", 64 << 20))
RUN_TIMEOUT = 60 + N / 1e6
CL_ECONNRESET = -104
IP = {"a": "10.99.0.1", "b": "10.99.0.2"}
MAC = {"a": "02:c1:ea:0e:0a:01", "b": "02:c1:ea:0e:0b:01"}

CONFIG = ct.CONFIG_HEAD + ct.TCP_APPS + ct.port_yaml("%(device)s", "%(mac)s", "%(ip)s")


def device(backend, iface):
    if backend == "cleave":
        return f"net_cleave0,wire=net_af_packet0,wire_args=iface={iface}"
    return f"net_af_packet0,iface={iface}"


class FlowWatch(threading.Thread):
    """Samples `cleavectl flow list` on a daemon until stopped: every flow row seen."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d, self.rows, self.done = d, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            code, out, _ = self.d.ctl("flow", "list", check=False)
            if code == 0 and out:
                self.rows += out["flows"]
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.join(timeout=30)
        return self.rows


class C2C:
    """The cases; a subclass sets the backend of daemon a (b is always on the cleave backend)."""

    backend_a = "cleave"

    def setUp(self):
        self.net = ct.Net("c", peer_addr=None)
        ifaces = {"a": self.net.va, "b": self.net.vb}
        ns = {"a": self.net.a, "b": self.net.b}
        backends = {"a": self.backend_a, "b": "cleave"}
        self.d = {}
        for side in ("a", "b"):
            self.d[side] = ct.Daemon(CONFIG % {"device": device(backends[side], ifaces[side]),
                                               "mac": MAC[side], "ip": IP[side]}, ns=ns[side])

    # ---- processes: each one is registered and killed by its pid in teardown

    def tool(self, side, *args):
        """cleave-tcp with --json in the background, on daemon `side`."""
        sock = os.path.join(self.d[side].run_dir, "app.sock")
        return ct.spawn([TOOL, "-s", sock, "--json", "--timeout", "30", *map(str, args)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def listen(self, side, port, *args):
        """A listener on `side`, ready once the daemon lists it."""
        p = self.tool(side, "--listen", port, *args)

        def listed():
            # A busy machine may keep the dataplane from answering in time: ask again.
            code, out, _ = self.d[side].ctl("flow", "list", check=False)
            return code == 0 and any(l["local"].endswith(f":{port}") for l in out["listeners"])
        ct.wait_until(listed, what=f"the listener on {side}:{port}")
        return p

    def result(self, p):
        """(exit code, JSON, stderr) of a cleave-tcp run."""
        out, err = p.communicate(timeout=RUN_TIMEOUT)
        lines = out.splitlines()
        self.assertTrue(lines, f"cleave-tcp printed nothing (exit {p.returncode}): {err}")
        return p.returncode, json.loads(lines[-1]), err

    def why(self, err, r):
        logs = "".join(f"cleaved {s} log (tail):\n{d.logs()[-2000:]}\n" for s, d in self.d.items())
        return f"cleave-tcp: {err.strip()}\n{r}\n{logs}"

    def assert_clean(self, res):
        code, r, err = res
        self.assertEqual(code, 0, self.why(err, r))
        self.assertEqual((r["error"], r["close_status"]), (0, 0), self.why(err, r))

    def flows(self, side):
        return self.d[side].ctl("flow", "list")[1]["flows"]

    def live_flows(self, side):
        """The flows but those in TIME-WAIT, which the daemon keeps after their app exited."""
        flows = self.flows(side)
        for f in flows:
            if f["info"].get("state") == "TIME-WAIT":
                self.assertIsNone(f["app"], f)  # the app is gone, the record is the daemon's
        return [f for f in flows if f["info"].get("state") != "TIME-WAIT"]

    def nic(self, side):
        return self.d[side].ctl("nic", "show", "p0")[1][0]

    def defers(self, side):
        """The NIC's defer counters that are not zero: why frames went to the copy path."""
        c = self.nic(side)["counters"]
        return {k: v for k, v in c.items() if k.startswith("nic_defer_") and v != 0}

    def tcp_stats(self, side):
        """The TCP transport's counters over all flows of daemon `side`."""
        stats = self.d[side].transport_stats("tcp")
        self.assertIsNotNone(stats, "no tcp transport listed")
        return stats

    # ---- one way

    def one_way(self, src, dst, port, seed, half_close=False):
        # half_close: the receiver's FIN goes first (--send 0), and it goes on receiving.
        rx = self.listen(dst, port, "--recv", *(["--send", 0] if half_close else []))
        watch = FlowWatch(self.d[dst])
        watch.start()
        tx = self.tool(src, "--connect", f"{IP[dst]}:{port}", "--send", N, "--seed", seed)
        res_tx, res_rx = self.result(tx), self.result(rx)
        during = watch.stop()
        self.assert_clean(res_tx)
        self.assert_clean(res_rx)
        s, r = res_tx[1], res_rx[1]
        self.assertEqual((s["sent"], r["received"]), (N, N))
        self.assertEqual(r["received_sha256"], s["sent_sha256"])
        self.assertEqual(s["sent_sha256"], cleave_pattern.sha256(seed, N))
        # Each daemon opened one flow and released it: nothing left behind.
        for side in (src, dst):
            t = self.tcp_stats(side)
            self.assertEqual((t["conn_opened"], t["conn_closed"]), (1, 1), t)
        # The rows of the receiver's flow while it was open; the side that closes first
        # ends in a TIME-WAIT record, which keeps only the state.
        rows = [f["info"] for f in during if f["id"] == r["flow"]]
        return [i for i in rows if i.get("state") != "TIME-WAIT"]

    def assert_zero_copy(self, side, during):
        """Daemon `side` received N bytes, every one placed by the NIC, none copied."""
        self.assertTrue(all(i["copied_bytes"] == 0 for i in during), during)
        t = self.tcp_stats(side)
        self.assertEqual((t["placed_bytes"], t["copied_bytes"]), (N, 0), (t, self.defers(side)))
        self.assertEqual(self.d[side].stats()["flows"]["rx_copied_bytes"], 0)
        nic = self.nic(side)
        self.assertEqual(nic["backend"], "cleave", nic)
        self.assertGreaterEqual(nic["counters"]["nic_rx_placed_bytes"], N, nic)

    def test_a_sends_to_b(self):
        self.assert_zero_copy("b", self.one_way("a", "b", 5001, 3))

    def test_b_sends_to_a(self):
        during = self.one_way("b", "a", 5002, 4)
        if self.backend_a == "cleave":
            self.assert_zero_copy("a", during)
        else:
            # The generic backend: no NIC placement, so the transport reports what its
            # software placement or the copy path delivered; every byte, once.
            t = self.tcp_stats("a")
            self.assertEqual(t["placed_bytes"] + t["copied_bytes"], N, t)

    def test_receiver_closes_first_and_still_receives(self):
        self.assert_zero_copy("b", self.one_way("a", "b", 5005, 5, half_close=True))

    # ---- both directions on one flow

    def test_both_directions_at_once(self):
        n_back = N // 2 + 4097  # a different size, not a multiple of anything
        rx = self.listen("b", 5003, "--recv", "--send", n_back, "--seed", 11)
        tx = self.tool("a", "--connect", f"{IP['b']}:5003", "--send", N, "--recv", "--seed", 10)
        ra, rb = self.result(tx), self.result(rx)
        self.assert_clean(ra)
        self.assert_clean(rb)
        a, b = ra[1], rb[1]
        self.assertEqual((a["sent"], b["received"]), (N, N))
        self.assertEqual(b["received_sha256"], cleave_pattern.sha256(10, N))
        self.assertEqual(a["sent_sha256"], b["received_sha256"])
        self.assertEqual((b["sent"], a["received"]), (n_back, n_back))
        self.assertEqual(a["received_sha256"], cleave_pattern.sha256(11, n_back))
        placing = [("b", N)] + ([("a", n_back)] if self.backend_a == "cleave" else [])
        for side, n in placing:
            t = self.tcp_stats(side)
            self.assertEqual((t["placed_bytes"], t["copied_bytes"]), (n, 0), (t, self.defers(side)))

    # ---- resets

    def test_abort_is_a_reset_on_the_other_side(self):
        n = 1 << 20
        rx = self.listen("b", 5004, "--recv")
        tx = self.tool("a", "--connect", f"{IP['b']}:5004", "--send", n, "--abort")
        code, s, err = self.result(tx)
        self.assertEqual(code, 0, self.why(err, s))
        self.assertEqual(s["sent"], n)
        code, r, err = self.result(rx)
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual(r["close_status"], CL_ECONNRESET, self.why(err, r))
        self.assertIn("reset", err)
        # Every send was acknowledged before the RST: all of it was received, then the reset.
        self.assertEqual(r["received"], n, self.why(err, r))
        self.assertEqual(r["received_sha256"], s["sent_sha256"])
        for side in ("a", "b"):
            self.assertEqual(self.flows(side), [], f"{side} keeps no flow after a reset")


class CleaveToCleave(C2C, ct.TestCase):
    backend_a = "cleave"


class GenericToCleave(C2C, ct.TestCase):
    backend_a = "generic"


if __name__ == "__main__":
    if not os.access(TOOL, os.X_OK):
        print(f"skipped: {TOOL} is not built", flush=True)
        raise SystemExit(ct.SKIP)
    ct.main()
