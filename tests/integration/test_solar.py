#!/usr/bin/python3
"""test_solar.py - Solar block I/O end to end: two cleaved daemons, cleave-blk on both.

The set-up of test_roce.py: namespaces a and b joined by a veth, cleaved in each (a at
10.99.0.1, b at 10.99.0.2) on the cleave backend (net_cleave over net_af_packet), and in one
case both on the generic backend. cleave-blk
(tools/cleave-blk) runs in the root namespace on each daemon's app socket: --export on b (the
target, whose volume is an MR of its own), --connect on a (the initiator); the two swap their QP
halves over kernel TCP on 127.0.0.1, and the Solar packets go between the daemons over the veth.
The initiator keeps a shadow of the volume, compares every read with it, and at the end compares
the SHA-256 of its shadow with the target's of the whole volume: cleave-blk exits 0 only when
every I/O completed without error and every byte matched. Cases:
  - random 4 KiB reads and writes, 32 in flight, over four paths: every path carries blocks and
    is up, the I/Os are verified, and while they run `flow show` on a shows the initiator's
    connection with its four paths and `solar list` on b the target's, the numbers crossed;
  - the same through seeded loss and reordering on a's port (`cleavectl port fault`): blocks are
    resent, no I/O fails, every byte matches;
  - 1 MiB sequential writes then reads over the whole volume with a 512-byte block (2048 blocks
    an I/O), on one path;
  - afterwards, on both daemons: no Solar flow is left, and the solar transport's counters show
    I/Os done and no bad header;
  - the wire, captured at both ends of the veth while I/Os run: every Solar frame has a UDP
    checksum, right, over the header and the block; every block's CRC32C (written by the NIC)
    matches it; tshark with tools/solar.lua decodes every frame with no error;
  - both daemons on the generic backend (af_packet alone): random reads and writes over four
    paths, the blocks placed and their CRC32C made and checked in software, verified the same way;
  - the same I/Os over one cleave TCP flow (`--transport tcp`, the figures' baseline), through
    loss and reordering, verified the same way; both sides refuse options that differ;
  - the tool's and the daemon's refusals: a --block past the path MTU is refused at connect (the
    QP goes no further than INIT), and a target with nobody to talk to gives up after --timeout.
Two wires (SolarTwoWires): each daemon has a second port on a second veth pair (a at 10.99.1.1,
b at 10.99.1.2); cleave-blk gives the QP the peer's second address (via), so the connection has
two routes and path p goes over wire p % 2. CLEAVE_SOLAR_BYTES (default 1g) of random 64 KiB
writes over a 64 MiB volume, then as many random reads (--rw writeread), verified as above:
  - both wires up: both routes listed by flow show, every path up and busy, none ever down, and
    both ports of both daemons carried thousands of frames each way;
  - a's second wire cut mid-run (`port fault p1 loss 1`, both directions): the paths on it (1
    and 3) go down while 0 and 2 stay up, I/Os go on over the first wire, and when the wire is
    restored (`port fault p1 off`) the paths come back and carry blocks again; no I/O fails, and
    the paths on the cut wire show one down and one up at least, the others none.
"""

import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

import cleavetest as ct

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit"))
import test_roce_golden as rgolden  # noqa: E402  the pcap reader
import test_solar_golden as golden  # noqa: E402  our reading of a frame, tshark with solar.lua

BLK = os.environ.get("CLEAVE_BLK", "build/tools/cleave-blk")
# The two-wire cases' bytes written (and as many read): 1 GiB unless told otherwise.
BYTES = ct.size_bytes(os.environ.get("CLEAVE_SOLAR_BYTES", "1g"))
IP = {"a": "10.99.0.1", "b": "10.99.0.2"}
MAC = {"a": "02:c1:ea:0e:0a:01", "b": "02:c1:ea:0e:0b:01"}

APPS = """apps:
  quota:
    memory_mb: 1024
    region_mb: 64
    pipe_entries: 4096
  allow:
    - uid: 0
"""
CONFIG = ct.CONFIG_HEAD + APPS + ct.port_yaml("%(device)s", "%(mac)s", "%(ip)s")


def device(backend, iface, n=0):
    """The cleave backend (net_cleave: the NIC model behind a PMD) or the generic one (af_packet
    alone: the same placement, CRC32C and checksums done by the dataplane in software); n: the
    daemon's n-th port."""
    if backend == "cleave":
        return f"net_cleave{n},wire=net_af_packet{n},wire_args=iface={iface},framecnt=4096"
    return f"net_af_packet{n},iface={iface},framecnt=4096"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def udp_checksum(f):
    """The ones'-complement sum over the IPv4 pseudo-header and the UDP datagram: 0 when the
    checksum in it is right."""
    ip = f[14:34]
    udp = f[34:14 + struct.unpack_from("!H", ip, 2)[0]]
    data = ip[12:20] + struct.pack("!BBH", 0, 17, len(udp)) + udp
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return 0xFFFF - s


class Solar(ct.TestCase):
    backend = "cleave"

    def setUp(self):
        self.net = ct.Net("s", peer_addr=None)
        ifaces = {"a": self.net.va, "b": self.net.vb}
        ns = {"a": self.net.a, "b": self.net.b}
        self.d = {side: ct.Daemon(CONFIG % {"device": device(self.backend, ifaces[side]),
                                            "mac": MAC[side], "ip": IP[side]}, ns=ns[side])
                  for side in ("a", "b")}

    def tool(self, side, timeout, *args):
        d = self.d[side]
        return ct.spawn([BLK, "--socket", os.path.join(d.run_dir, "app.sock"), "--ctl", d.socket,
                         "--json", "--timeout", str(timeout), *map(str, args)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def why(self, err, extra=""):
        logs = "".join(f"cleaved {s} log (tail):\n{d.logs()[-2000:]}\n" for s, d in self.d.items())
        return f"cleave-blk: {err.strip()}\n{extra}\n{logs}"

    def finish(self, p, timeout):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail(self.why(err, f"cleave-blk did not finish in {timeout} s:\n{out}"))
        rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        return p.returncode, rows, err

    def start(self, target_args, initiator_args, timeout=60):
        port = free_port()
        tgt = self.tool("b", timeout, "--export", port, *target_args)

        def listening():
            if tgt.poll() is not None:
                out, err = tgt.communicate()
                self.fail(self.why(err, f"the target exited with {tgt.returncode}:\n{out}"))
            return ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip() != ""
        ct.wait_until(listening, what=f"cleave-blk to listen on port {port}")
        ini = self.tool("a", timeout, "--connect", f"127.0.0.1:{port}", *initiator_args)
        return ini, tgt

    def run_pair(self, target_args, initiator_args, timeout=60):
        """Both sides to the end: the initiator's JSON result, checked to be verified."""
        ini, tgt = self.start(target_args, initiator_args, timeout)
        return self.finish_pair(ini, tgt, timeout)

    def finish_pair(self, ini, tgt, timeout):
        code_a, rows_a, err_a = self.finish(ini, timeout + 30)
        code_b, rows_b, err_b = self.finish(tgt, timeout + 30)
        both = self.why(f"initiator (a): {err_a.strip()}\ntarget (b): {err_b.strip()}",
                        {"a": rows_a, "b": rows_b})
        self.assertEqual((code_a, code_b), (0, 0), both)
        self.assertEqual(len(rows_a), 1, both)
        r = rows_a[0]
        self.assertIs(r["ok"], True, both)
        self.assertEqual((r["failed"], r["mismatches"]), (0, 0), both)
        self.assertIs(r["volume_sha256_match"], True, both)
        self.assertEqual(rows_b[0]["role"], "target", both)
        return r

    def solar_flows(self, side):
        return [f for f in self.d[side].ctl("flow", "list")[1]["flows"]
                if f["transport"] == "solar"]

    def solar_stats(self, side):
        for t in self.d[side].ctl("transport", "list")[1]["transports"]:
            if t["name"] == "solar":
                return t
        self.fail(f"daemon {side} lists no solar transport")

    def assert_clean(self):
        for side in ("a", "b"):
            ct.wait_until(lambda s=side: self.solar_flows(s) == [],
                          what=f"daemon {side}'s Solar flows to go")
            t = self.solar_stats(side)
            self.assertIs(t["instantiated"], True, t)
            self.assertEqual(t["stats"].get("bad_headers", 0), 0, t)

    # ---- cases

    def test_random_reads_and_writes_over_four_paths(self):
        ini, tgt = self.start(["--volume", "16m", "--paths", "4"],
                              ["--rw", "randrw", "--bs", "4k", "--qd", "32", "--paths", "4",
                               "--ios", "40000"])
        # While it runs: the QP, of transport solar, towards b, with four paths.
        def shown():
            fs = self.solar_flows("a")
            return fs[0] if fs else None
        f = ct.wait_until(shown, what="a's Solar flow")
        info = self.d["a"].ctl("flow", "show", str(f["id"]))[1]["info"]
        self.assertEqual(info["role"], "initiator", info)
        self.assertEqual(info["paths"], 4, info)
        listed = self.d["b"].ctl("solar", "list")[1]
        self.assertEqual(len(listed), 1, listed)
        self.assertEqual(listed[0]["info"]["role"], "target", listed)
        self.assertEqual(listed[0]["info"]["peer_conn"], info["conn"], listed)
        self.assertEqual(info["peer_conn"], listed[0]["info"]["conn"], info)
        self.assertEqual(f["remote"].split(":")[0], IP["b"], f)
        r = self.finish_pair(ini, tgt, 60)
        self.assertEqual(r["ios"], 40000, r)
        self.assertGreater(r["reads"], 10000, r)
        self.assertGreater(r["writes"], 10000, r)
        self.assertEqual(len(r["path"]), 4, r)
        for p in r["path"]:
            self.assertEqual(p["state"], "up", r)
            self.assertGreater(p["sent"], 1000, r)  # spread over every path
        self.assert_clean()
        self.assertGreaterEqual(self.solar_stats("a")["stats"]["ios_done"], 40000)

    def test_loss_and_reordering_lose_no_io(self):
        self.d["a"].ctl("port", "fault", "p0", "loss", "0.02", "reorder", "0.02", "seed", "11")
        r = self.run_pair(["--volume", "8m", "--paths", "2"],
                          ["--rw", "randrw", "--bs", "16k", "--qd", "16", "--paths", "2",
                           "--ios", "4000"])
        self.assertEqual(r["ios"], 4000, r)
        self.assertGreater(sum(p["resent"] for p in r["path"]), 0, r)
        faults = self.d["a"].ctl("port", "show", "p0")[1][0]["faults"]
        self.assertGreater(faults["rx"]["dropped"] + faults["tx"]["dropped"], 0, faults)
        self.assert_clean()

    def test_large_sequential_ios_with_small_blocks(self):
        for mode in ("write", "read"):
            r = self.run_pair(["--volume", "32m", "--paths", "1", "--block", "512"],
                              ["--rw", mode, "--bs", "1m", "--qd", "4", "--paths", "1", "--block",
                               "512", "--ios", "64"])
            self.assertEqual(r["ios"], 64, r)
            self.assertEqual(r["reads" if mode == "read" else "writes"], 64, r)
        self.assert_clean()

    def test_the_same_ios_over_cleave_tcp(self):
        # --transport tcp, the figures' baseline: the same I/Os as messages over one cleave TCP
        # flow between the daemons, verified the same way, through seeded loss and reordering.
        self.d["a"].ctl("port", "fault", "p0", "loss", "0.01", "reorder", "0.01", "seed", "5")
        before = sum((self.d[s].transport_stats("tcp") or {}).get("retransmits", 0) for s in "ab")
        r = self.run_pair(["--transport", "tcp", "--volume", "8m", "--bs", "16k", "--qd", "16"],
                          ["--transport", "tcp", "--rw", "randrw", "--bs", "16k", "--qd", "16",
                           "--ios", "3000"])
        self.assertEqual((r["transport"], r["ios"]), ("tcp", 3000), r)
        self.assertGreater(min(r["reads"], r["writes"]), 500, r)
        # TCP carried them (its retransmissions repaired the loss), no Solar flow did.
        after = sum(self.d[s].transport_stats("tcp").get("retransmits", 0) for s in "ab")
        self.assertGreater(after, before)
        self.assertEqual(self.solar_flows("a"), [])
        # Options that differ between the two sides: both refuse.
        ini, tgt = self.start(["--transport", "tcp", "--qd", "8"],
                              ["--transport", "tcp", "--qd", "16", "--ios", "10"], timeout=10)
        for p in (ini, tgt):
            code, rows, err = self.finish(p, 40)
            self.assertEqual((code, rows), (1, []), err)
            self.assertIn("options differ", err)

    def test_the_wire_checks_and_decodes(self):
        if shutil.which("tshark") is None:
            self.skipTest("tshark is not installed")
        caps = {}
        for side, ns, iface in (("a", self.net.a, self.net.va), ("b", self.net.b, self.net.vb)):
            pcap = os.path.join(self.d[side].dir, "wire.pcap")
            caps[pcap] = ct.spawn(["ip", "netns", "exec", ns, "tshark", "-q", "-i", iface, "-f",
                                   "udp port 7000", "-F", "pcap", "-w", pcap],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for pcap in caps:
            ct.wait_until(lambda: os.path.exists(pcap) and os.path.getsize(pcap) >= 24,
                          what="tshark to start capturing")
        time.sleep(0.5)
        self.run_pair(["--volume", "1m", "--paths", "2"],
                      ["--rw", "randrw", "--bs", "4k", "--qd", "4", "--paths", "2", "--ios", "200"])
        time.sleep(0.5)
        for cap in caps.values():
            cap.send_signal(signal.SIGINT)
            cap.communicate(timeout=30)
        types = set()
        for pcap in caps:
            frames = rgolden.read_pcap(pcap)
            self.assertGreater(len(frames), 100, pcap)
            for i, f in enumerate(frames, 1):
                d = golden.parse(f)
                types.add(d["type"])
                self.assertNotEqual(struct.unpack_from("!H", f, 14 + 20 + 6)[0], 0,
                                    f"frame {i}: no UDP checksum")
                self.assertEqual(udp_checksum(f), 0, f"frame {i}: bad UDP checksum")
                if d["type"] in (1, 3):
                    self.assertEqual(d["crc_good"], 1, f"frame {i}: {d}")
            verbose = golden.tshark_verbose(pcap)
            self.assertEqual(len(verbose), len(frames))
            for i, text in enumerate(verbose, 1):
                self.assertNotIn("Malformed", text, f"frame {i}")
                self.assertNotIn("Expert Info (Error", text, f"frame {i}")
        self.assertTrue({1, 2, 3, 4} <= types, types)  # WRITE_BLK, READ_REQ, READ_BLK, ACK

    def test_refusals(self):
        # A block longer than the path MTU (1024 on the veth): cl_qp_connect fails at RTR.
        ini, tgt = self.start(["--volume", "1m", "--block", "2048", "--timeout", "5"],
                              ["--block", "2048", "--ios", "10", "--timeout", "5"], timeout=5)
        code_a, _, err_a = self.finish(ini, 30)
        code_b, _, err_b = self.finish(tgt, 30)
        self.assertEqual(code_a, 1, err_a)
        self.assertIn("cl_qp_connect", err_a)
        self.assertEqual(code_b, 1, err_b)
        # Nobody to talk to: the target gives up after --timeout.
        p = self.tool("b", 1, "--export", free_port())
        code, _, err = self.finish(p, 30)
        self.assertEqual(code, 1, err)
        self.assertIn("timed out", err)
        self.assert_clean()


class SolarGeneric(Solar):
    """Both daemons on the generic backend: blocks placed, their CRC32C written and checked, in
    software."""
    backend = "generic"

    def test_random_reads_and_writes_over_four_paths(self):
        r = self.run_pair(["--volume", "8m", "--paths", "4"],
                          ["--rw", "randrw", "--bs", "4k", "--qd", "16", "--paths", "4",
                           "--ios", "4000"])
        self.assertEqual(r["ios"], 4000, r)
        for p in r["path"]:
            self.assertGreater(p["sent"], 100, r)
        # The generic backend placed every block the target was written, and every block the
        # initiator read, in software.
        for side, n in (("b", r["writes"]), ("a", r["reads"])):
            nic = self.d[side].ctl("nic", "show")[1][0]
            self.assertEqual(nic["backend"], "generic", nic)
            self.assertGreaterEqual(nic["counters"]["nic_rx_placed_bytes"], n * 4096, (side, r))
        self.assert_clean()

    # The cleave backend's cases, not again here.
    test_loss_and_reordering_lose_no_io = None
    test_large_sequential_ios_with_small_blocks = None
    test_the_wire_checks_and_decodes = None
    test_refusals = None


# The second wire's addresses and MACs.
IP1 = {"a": "10.99.1.1", "b": "10.99.1.2"}
MAC1 = {"a": "02:c1:ea:0e:0a:02", "b": "02:c1:ea:0e:0b:02"}
TWO_PORTS = CONFIG + """  - name: p1
    device: %(device1)s
    mac: %(mac1)s
    ipv4: %(ip1)s/24
"""


class SolarTwoWires(Solar):
    """Two daemons, each with two ports on two separate wires (two veth pairs between a and b):
    one connection's paths over both, path p on wire p % 2, and a wire cut and restored
    mid-run."""

    def setUp(self):
        self.net = ct.Net("s", peer_addr=None)
        va1, vb1 = self.net.add_wire(1)
        wires = {"a": (self.net.va, va1), "b": (self.net.vb, vb1)}
        ns = {"a": self.net.a, "b": self.net.b}
        self.d = {side: ct.Daemon(TWO_PORTS % {
            "device": device(self.backend, wires[side][0]), "mac": MAC[side], "ip": IP[side],
            "device1": device(self.backend, wires[side][1], 1), "mac1": MAC1[side],
            "ip1": IP1[side]}, ns=ns[side]) for side in ("a", "b")}

    def flow_info(self, side):
        fs = self.solar_flows(side)
        return self.d[side].ctl("flow", "show", str(fs[0]["id"]))[1]["info"] if fs else None

    def path_states(self, side):
        info = self.flow_info(side) or {}
        return [info.get(f"path{p}_state") for p in range(4)]

    def wires_carried(self):
        """Solar frames each daemon's two ports sent and received."""
        out = {}
        for side in ("a", "b"):
            ports = self.d[side].ctl("port", "show")[1]
            out[side] = [(p["counters"]["tx_packets"], p["counters"]["rx_packets"]) for p in ports]
        return out

    def run_writeread(self, cut=False):
        """BYTES of 64 KiB random writes then as many random reads, over four paths on the two
        wires, verified; with `cut`, a's second wire is cut mid-run and restored."""
        ios = 2 * BYTES // (64 << 10)
        ini, tgt = self.start(["--volume", "64m", "--paths", "4"],
                              ["--rw", "writeread", "--bs", "64k", "--qd", "16", "--paths", "4",
                               "--ios", ios], timeout=300)
        info = ct.wait_until(lambda: self.flow_info("a"), what="a's Solar flow")
        self.assertEqual(info["routes"], 2, info)
        self.assertIn(f"{IP1['a']} > {IP1['b']}", info["route1"], info)
        if cut:
            # Blocks on both wires, then wire 1 cut on a's side (both directions): the paths
            # on it (1 and 3) go down, the I/Os go on over wire 0 and none fails.
            def sent(info, p):
                return info.get(f"path{p}_sent", 0)
            ct.wait_until(lambda: min(sent(self.flow_info("a") or {}, p) for p in range(4)) > 100,
                          what="blocks on every path")
            self.d["a"].ctl("port", "fault", "p1", "loss", "1")
            ct.wait_until(lambda: self.path_states("a") == ["up", "down", "up", "down"],
                          timeout=120, what="the paths on the cut wire to go down")
            done = self.flow_info("a")["ios_done"]
            ct.wait_until(lambda: self.flow_info("a")["ios_done"] >= done + 200, timeout=120,
                          what="I/Os to go on over the other wire")
            down = self.flow_info("a")
            self.d["a"].ctl("port", "fault", "p1", "off")
            # Restored: probes bring the paths back, and blocks flow on them again.
            ct.wait_until(lambda: self.path_states("a") == ["up"] * 4, timeout=120,
                          what="the paths on the restored wire to come back")
            ct.wait_until(lambda: sent(self.flow_info("a"), 1) > sent(down, 1) + 100,
                          timeout=120, what="blocks on the restored wire")
        r = self.finish_pair(ini, tgt, 300)
        self.assertEqual((r["ios"], r["writes"], r["reads"]), (ios, ios // 2, ios // 2), r)
        self.assertEqual([p["route"] for p in r["path"]], [0, 1, 0, 1], r)
        for p in r["path"]:
            self.assertEqual(p["state"], "up", r)
        return r

    def test_writes_then_reads_over_two_wires(self):
        before = self.wires_carried()
        r = self.run_writeread()
        after = self.wires_carried()
        for p in r["path"]:
            self.assertGreater(p["sent"], 1000, r)  # spread over every path, both wires
            self.assertEqual(p["downs"], 0, r)
        for side in ("a", "b"):
            for port in (0, 1):  # each port sent and received a share of the blocks
                sent = after[side][port][0] - before[side][port][0]
                got = after[side][port][1] - before[side][port][1]
                self.assertGreater(min(sent, got), 5000, (side, port, before, after))
        self.assert_clean()

    def test_a_wire_cut_mid_run_loses_no_io(self):
        r = self.run_writeread(cut=True)
        for k, p in enumerate(r["path"]):
            if p["route"] == 1:  # down once, back once
                self.assertGreaterEqual((p["downs"], p["ups"]), (1, 1), r)
            else:
                self.assertEqual(p["downs"], 0, r)
        self.assertEqual(self.d["a"].ctl("port", "show", "p1")[1][0]["faults"]["tx"]["enabled"],
                         False)
        self.assert_clean()

    test_random_reads_and_writes_over_four_paths = None
    test_loss_and_reordering_lose_no_io = None
    test_large_sequential_ios_with_small_blocks = None
    test_the_same_ios_over_cleave_tcp = None
    test_the_wire_checks_and_decodes = None
    test_refusals = None


if __name__ == "__main__":
    ct.main()
