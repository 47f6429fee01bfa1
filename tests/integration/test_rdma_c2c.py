#!/usr/bin/python3
"""test_rdma_c2c.py - RoCEv2 queue pairs between two cleaved daemons, driven by cleave-rdma.

Namespaces a and b are joined by a veth; cleaved runs in each (a at 10.99.0.1, b at 10.99.0.2),
both on the cleave backend (net_cleave over net_af_packet). cleave-rdma runs in the root
namespace on both sides (the app sockets are paths; its side channel is kernel TCP on loopback):
the server (responder) on b, the client (requester) on a. Cases:
  - every op (send, send_imm, write, write_imm, read) at 1 byte, 4 KiB and 1 MiB: both sides
    exit 0, every line matches, and each digest is the pattern's (cleave_pattern.py) for the
    seed cleave-rdma --help defines;
  - many moves in flight (--iters), selective repeat, a 1024-byte PMTU and DCQCN on;
  - options that differ between the sides are refused by both (exit 1), and a client with
    nobody to talk to gives up after --timeout;
  - afterwards neither daemon keeps a QP.
"""

import json
import os
import subprocess

import cleave_pattern
import cleavetest as ct

TOOL = os.environ.get("CLEAVE_RDMA", "build/tools/cleave-rdma")
IP = {"a": "10.99.0.1", "b": "10.99.0.2"}
MAC = {"a": "02:c1:ea:0e:0a:01", "b": "02:c1:ea:0e:0b:01"}
OPS = ["send", "send_imm", "write", "write_imm", "read"]
CONFIG = ct.CONFIG_HEAD + ct.TCP_APPS + ct.port_yaml("%(device)s", "%(mac)s", "%(ip)s")
PORT = 18515


def seed(op, size):
    return size * 8 + OPS.index(op) + 1


class RdmaC2C(ct.TestCase):
    def setUp(self):
        self.net = ct.Net("q", peer_addr=None)
        ifaces = {"a": self.net.va, "b": self.net.vb}
        ns = {"a": self.net.a, "b": self.net.b}
        self.d = {}
        for side in ("a", "b"):
            dev = f"net_cleave0,wire=net_af_packet0,wire_args=iface={ifaces[side]}"
            self.d[side] = ct.Daemon(CONFIG % {"device": dev, "mac": MAC[side], "ip": IP[side]},
                                     ns=ns[side])

    def tool(self, side, *args):
        sock = os.path.join(self.d[side].run_dir, "app.sock")
        return ct.spawn([TOOL, "-s", sock, "--json", *map(str, args)], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True)

    def pair(self, *args, server_args=(), timeout=30):
        srv = self.tool("b", "--listen", PORT, "--timeout", timeout, *args, *server_args)
        cli = self.tool("a", "--connect", f"127.0.0.1:{PORT}", "--timeout", timeout, *args)
        out = {}
        for name, p in (("client", cli), ("server", srv)):
            o, e = p.communicate(timeout=300)
            out[name] = (p.returncode, [json.loads(l) for l in o.splitlines()], e)
        return out

    def why(self, out):
        logs = "".join(f"cleaved {s} log (tail):\n{d.logs()[-2000:]}\n" for s, d in self.d.items())
        return f"{out}\n{logs}"

    def qps(self, side):
        return [f for f in self.d[side].ctl("flow", "list")[1]["flows"]
                if f["transport"] == "rocev2"]

    def assert_all_matched(self, out, ops, sizes):
        for name in ("client", "server"):
            code, lines, err = out[name]
            self.assertEqual(code, 0, self.why(out))
            self.assertEqual([(l["op"], l["size"]) for l in lines],
                             [(o, s) for o in ops for s in sizes])
            for l in lines:
                self.assertTrue(l["match"], l)
                self.assertEqual(l["status"], 0, l)
                self.assertEqual(l["sha256"], l["peer"], l)
                self.assertEqual(l["sha256"],
                                 cleave_pattern.sha256(seed(l["op"], l["size"]), l["size"]), l)
        for side in ("a", "b"):
            self.assertEqual(self.qps(side), [], f"{side} keeps a QP")

    def test_every_op_and_size(self):
        out = self.pair()
        self.assert_all_matched(out, OPS, [1, 4096, 1 << 20])

    def test_many_in_flight_with_selective_repeat_a_small_pmtu_and_dcqcn(self):
        out = self.pair("--iters", 200, "--sizes", "1,64k", "--selective-repeat", "--mtu", 1024,
                        "--params", "dcqcn on")
        self.assert_all_matched(out, OPS, [1, 65536])
        self.assertTrue(all(l["iters"] == 200 for l in out["client"][1]))

    def test_options_that_differ_are_refused(self):
        out = self.pair("--ops", "write", server_args=("--sizes", "8k"), timeout=10)
        for name in ("client", "server"):
            code, lines, err = out[name]
            self.assertEqual(code, 1, self.why(out))
            self.assertIn("the peer's options differ", err)
            self.assertEqual(lines, [])

    def test_nobody_to_talk_to_times_out(self):
        p = self.tool("a", "--connect", f"127.0.0.1:{PORT}", "--timeout", 1)
        o, e = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 1)
        self.assertIn(f"timed out after 1 s connecting to 127.0.0.1:{PORT}", e)
        self.assertEqual(self.qps("a"), [])


if __name__ == "__main__":
    if not os.access(TOOL, os.X_OK):
        print(f"skipped: {TOOL} is not built", flush=True)
        raise SystemExit(ct.SKIP)
    ct.main()
