#!/usr/bin/python3
"""test_roce.py - RoCEv2 RC queue pairs end to end: two cleaved daemons, cleave-rdma on both.

The set-up of test_tcp_c2c.py: namespaces a and b joined by a veth, cleaved in each (a at
10.99.0.1, b at 10.99.0.2), both on the cleave backend (net_cleave over net_af_packet). The app is
cleave-rdma (tools/cleave-rdma): both processes run in the root namespace, each on its daemon's
app socket, and exchange their QPs' halves over kernel TCP on 127.0.0.1; the RoCE packets go
between the daemons over the veth. The connector (on a) is the requester, the listener (on b) the
responder. For each operation and size the tool moves size bytes of cleave-tcp's seeded pattern
(cleave_pattern.py; the seed from the operation and size, see pattern_seed) and both sides print
the SHA-256 of their MR's first size bytes and the peer's; both must be the pattern's, and each
side must agree with the other. Cases:
  - all five operations (SEND, SEND with immediate, WRITE, WRITE with immediate, READ) at 1, 4095,
    4096, 4097 bytes and 1 MiB; then 1 GiB, for SEND, WRITE and READ only (the immediate variants
    move the same bytes the same way, and 1 GiB takes time: the file stays well under 5 minutes);
  - selective repeat on both QPs, a few sizes, on a clean wire and on one with seeded loss and
    reordering on a's side (`cleavectl port fault`), where the transport must retransmit; and
    64 KiB WRITEs, many in flight, through seeded loss: b's NIC places packets past a gap of
    several WRITEs at once (its `nic_rx_placed_past_gap` counter rises);
  - PMTU 1024 (the largest the veth's MTU of 1500 carries; every case uses it unless it says
    otherwise) and 256 with sizes that are not multiples of them, the QPs seen meanwhile in
    `cleavectl qp list` at that PMTU, in RTS, towards the other daemon; PMTU 2048 is refused on
    both sides and leaves no QP;
  - afterwards, on both daemons: `cleavectl qp list` shows no queue pair left (each was
    destroyed), and the rocev2 transport's counters over all QPs (`cleavectl transport list`) show
    packets sent, as many payload bytes as the operations moved, and no bad packet, bad ICRC,
    access error, invalid request or failed QP;
  - the wire itself, captured on both ends of the veth while every operation runs (each side's
    frames where they arrive): each frame's ICRC (added by the NIC) verifies and tshark decodes
    every frame as RoCEv2 with no "Malformed" and no error (test_roce_golden.py's reader and checks);
  - 200 moves in flight per size with selective repeat and DCQCN on;
  - packet spraying (`--params "spray 8"`, selective repeat) through a wire that reorders a
    fifth of the frames: every byte moved, almost nothing sent again, 8 source ports on the wire
    (ACKs on one); and refused without selective repeat;
  - the tool's own rules: options that differ between the sides are refused by both (exit 1),
    and a requester with nobody to talk to gives up after --timeout.
Not here: a READ or WRITE naming a wrong rkey (remote access error); cleave-rdma has no way to ask
for one (tests/unit/roce_sim_test.cc covers it in the transport).
CLEAVE_RDMA_BIG sets the largest size (default 1g, as cleave-rdma --sizes takes it).
"""

import hashlib
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import cleave_pattern
import cleavetest as ct

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit"))
import test_roce_golden as golden  # noqa: E402  the pcap reader, ICRC and tshark checks

RDMA = os.environ.get("CLEAVE_RDMA", "build/tools/cleave-rdma")
TCP_TOOL = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")
IP = {"a": "10.99.0.1", "b": "10.99.0.2"}
MAC = {"a": "02:c1:ea:0e:0a:01", "b": "02:c1:ea:0e:0b:01"}
OPS = ["send", "send_imm", "write", "write_imm", "read"]  # cleave-rdma --ops, in its order
SMALL = ["1", "4095", "4096", "4097", "1m"]
BIG = os.environ.get("CLEAVE_RDMA_BIG", "1g")
# The largest PMTU a port of MTU 1500 carries (af_packet's limit on the veth): cleaved refuses
# more at RTR. Every case names its PMTU, so that what it runs at does not depend on a default.
PMTU = 1024

# Apps hold an MR of the largest size on each side (1 GiB), besides their shared region.
RDMA_APPS = """apps:
  quota:
    memory_mb: 3072
    region_mb: 64
    pipe_entries: 4096
  allow:
    - uid: 0
"""
# RoCE expects a lossless fabric. On the veth the loss is af_packet's receive ring overflowing
# while the other daemon sends a window of packets or READ responses at once. 4096 frames (DPDK's
# default is 512) hold a requester's window of 1024 PSNs four times over; measured, the cases here
# then lose only the frames the port's faults drop. (A long READ's responses are not bounded by
# the window; on a real fabric PFC or DCQCN's ECN marks keep them.)
CONFIG = ct.CONFIG_HEAD + RDMA_APPS + ct.port_yaml(
    "net_cleave0,wire=net_af_packet0,wire_args=iface=%(iface)s,framecnt=4096", "%(mac)s", "%(ip)s")


def pattern_seed(op, size):
    """The seed of the bytes cleave-rdma moves for operation `op` (a name of OPS) and `size`
    bytes, as its --help gives it: SIZE * 8 + K + 1, K the op's number in OPS."""
    return size * 8 + OPS.index(op) + 1


_digests = {}


def pattern_sha256(seed, n):
    """SHA-256 of the pattern's first n bytes; past 64 MiB from cleave-tcp --pattern (C speed;
    the tcp-tool test checks it against cleave_pattern.py), when it is built."""
    if (seed, n) not in _digests:
        if n > 64 << 20 and os.access(TCP_TOOL, os.X_OK):
            h = hashlib.sha256()
            p = subprocess.Popen([TCP_TOOL, "--pattern", str(n), "--seed", str(seed)],
                                 stdout=subprocess.PIPE)
            got = 0
            while chunk := p.stdout.read(1 << 20):
                h.update(chunk)
                got += len(chunk)
            if p.wait() != 0 or got != n:
                raise AssertionError(f"cleave-tcp --pattern {n} --seed {seed} failed")
            _digests[seed, n] = h.hexdigest()
        else:
            _digests[seed, n] = cleave_pattern.sha256(seed, n)
    return _digests[seed, n]


def expected_sha256(op, size):
    return pattern_sha256(pattern_seed(op, size), size)


def free_port():
    """A TCP port on 127.0.0.1 that nothing uses now, for the out-of-band exchange."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class QpWatch(threading.Thread):
    """Samples `cleavectl qp list` on a daemon until stopped: every row seen."""

    def __init__(self, d):
        super().__init__(daemon=True)
        self.d, self.rows, self.done = d, [], threading.Event()

    def run(self):
        while not self.done.is_set():
            code, out, _ = self.d.ctl("qp", "list", check=False)
            if code == 0 and out:
                self.rows += out
            time.sleep(0.02)

    def stop(self):
        self.done.set()
        self.join(timeout=30)
        return self.rows


class Roce(ct.TestCase):
    def setUp(self):
        self.net = ct.Net("r", peer_addr=None)
        ifaces = {"a": self.net.va, "b": self.net.vb}
        ns = {"a": self.net.a, "b": self.net.b}
        self.d = {side: ct.Daemon(CONFIG % {"iface": ifaces[side], "mac": MAC[side],
                                            "ip": IP[side]}, ns=ns[side])
                  for side in ("a", "b")}

    # ---- cleave-rdma: each process is registered and killed by its pid in teardown

    def tool(self, side, timeout, *args):
        sock = os.path.join(self.d[side].run_dir, "app.sock")
        return ct.spawn([RDMA, "--socket", sock, "--json", "--timeout", str(timeout),
                         *map(str, args)],
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def why(self, err, extra=""):
        logs = "".join(f"cleaved {s} log (tail):\n{d.logs()[-2000:]}\n" for s, d in self.d.items())
        return f"cleave-rdma: {err.strip()}\n{extra}\n{logs}"

    def results(self, p, timeout):
        """cleave-rdma's exit code, its lines by (op, size), and its stderr."""
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            self.fail(self.why(err, f"cleave-rdma did not finish in {timeout} s:\n{out}"))
        rows = {}
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "op" in r:
                key = r["op"], ct.size_bytes(str(r["size"]))  # bytes, or as --sizes wrote it
                self.assertNotIn(key, rows, line)
                rows[key] = r
        return p.returncode, rows, err

    def run_pair(self, ops, sizes, *extra, mtu=PMTU, timeout=120):
        """cleave-rdma --listen on b and --connect on a, the same --ops, --sizes, --mtu and
        `extra` on both; checks every line of both and returns the rows of (a, b)."""
        return self.finish_pair(self.start_pair(ops, sizes, *extra, mtu=mtu, timeout=timeout))

    def start_pair(self, ops, sizes, *extra, mtu=PMTU, timeout=120):
        """run_pair's first half: both tools started (each an app of its daemon)."""
        port = free_port()
        common = ["--ops", ",".join(ops), "--sizes", ",".join(sizes), "--mtu", mtu, *extra]
        rsp = self.tool("b", timeout, "--listen", port, *common)

        def listening():
            if rsp.poll() is not None:
                out, err = rsp.communicate()
                self.fail(self.why(err, f"the listener exited with {rsp.returncode}:\n{out}"))
            ss = ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout
            return ss.strip() != ""
        ct.wait_until(listening, what=f"cleave-rdma to listen on port {port}")
        req = self.tool("a", timeout, "--connect", f"127.0.0.1:{port}", *common)
        return req, rsp, ops, sizes, timeout

    def finish_pair(self, pair):
        """run_pair's second half: waits for both tools and checks them."""
        req, rsp, ops, sizes, timeout = pair
        code_a, rows_a, err_a = self.results(req, timeout + 30)
        code_b, rows_b, err_b = self.results(rsp, timeout + 30)
        both = self.why(f"requester (a): {err_a.strip()}\nresponder (b): {err_b.strip()}",
                        {"a": rows_a, "b": rows_b})
        self.assertEqual((code_a, code_b), (0, 0), both)
        want = {(op, ct.size_bytes(s)) for op in ops for s in sizes}
        self.assertEqual(set(rows_a), want, self.why(err_a))
        self.assertEqual(set(rows_b), want, self.why(err_b))
        for key in sorted(want):
            a, b = rows_a[key], rows_b[key]
            self.assertEqual((a["status"], b["status"]), (0, 0), (a, b))
            # Both sides hold the same bytes, each says so, and they are the pattern's.
            self.assertEqual(a["sha256"], b["sha256"], (a, b))
            self.assertEqual((a["peer"], b["peer"]), (b["sha256"], a["sha256"]), (a, b))
            self.assertIs(a["match"], True, a)
            self.assertIs(b["match"], True, b)
            self.assertEqual(a["sha256"], expected_sha256(*key), (key, a))
        return rows_a, rows_b

    # ---- the daemons afterwards

    def roce_stats(self, side):
        """The rocev2 transport's counters over all QPs of daemon `side`."""
        stats = self.d[side].transport_stats("rocev2")
        self.assertIsNotNone(stats, f"daemon {side} lists no rocev2 transport")
        return stats

    def assert_clean_daemons(self, ops, sizes):
        """No QP left on either daemon; the transport moved at least the bytes of `ops` x
        `sizes` and saw nothing bad."""
        for side in ("a", "b"):
            self.assertEqual(self.d[side].ctl("qp", "list")[1], [], f"{side} keeps QPs")
            flows = self.d[side].ctl("flow", "list")[1]["flows"]
            self.assertEqual([f for f in flows if f["transport"] == "rocev2"], [], side)
        # The requester (a) sends the payload of SENDs and WRITEs, the responder (b) that of READs.
        total = sum(ct.size_bytes(s) for s in sizes)
        payload = {"a": total * sum(op != "read" for op in ops), "b": total * ("read" in ops)}
        for side in ("a", "b"):
            t = self.roce_stats(side)
            self.assertGreater(t["tx_packets"], 0, t)
            self.assertGreater(t["rx_packets"], 0, t)
            self.assertGreaterEqual(t["tx_bytes"], payload[side], t)
            for k in ("bad_packets", "bad_icrc", "access_errors", "invalid_requests",
                      "qp_errors"):
                self.assertEqual(t[k], 0, (side, k, t))
        return {side: self.roce_stats(side) for side in ("a", "b")}

    # ---- cases

    def test_every_operation_small_sizes(self):
        self.run_pair(OPS, SMALL)
        self.assert_clean_daemons(OPS, SMALL)

    def test_one_gib(self):
        ops = ["send", "write", "read"]
        big = ct.size_bytes(BIG)
        for op in ops:
            expected_sha256(op, big)  # before the clock starts
        rows, _ = self.run_pair(ops, [BIG], timeout=60 + 3 * big // 10_000_000)
        self.assert_clean_daemons(ops, [BIG])
        for op in ops:  # for the log, asserted nothing
            print(f"  {op} of {BIG}: {rows[op, big]['MBps']:.0f} MB/s", flush=True)

    def test_selective_repeat(self):
        sizes = ["1", "4097", "1m", "8m"]
        self.run_pair(OPS, sizes, "--selective-repeat")
        self.assert_clean_daemons(OPS, sizes)

    def test_selective_repeat_recovers_from_loss(self):
        # Seeded loss and reordering both ways on a's side of the wire.
        self.d["a"].ctl("port", "fault", "p0", "loss", "0.01", "reorder", "0.01", "seed", "7")
        sizes = ["4097", "1m", "8m"]
        self.run_pair(OPS, sizes, "--selective-repeat", timeout=240)
        stats = self.assert_clean_daemons(OPS, sizes)
        self.assertGreater(stats["a"]["retransmits"] + stats["b"]["retransmits"], 0, stats)
        dropped = self.d["a"].ctl("port", "show", "p0")[1][0]["faults"]
        self.assertGreater(dropped["rx"]["dropped"] + dropped["tx"]["dropped"], 0, dropped)

    def test_sprayed_qps_over_a_reordering_wire(self):
        # `spray 8`: each request and READ response of a QP leaves from the next of 8 UDP source
        # ports (an ECMP fabric would spread them over its paths); ACKs keep one. Through a wire
        # that reorders a fifth of the frames both ways (each passed by 3 later ones), selective
        # repeat with the sprayed QPs' reordering tolerance moves every byte and takes almost
        # none of the reordering for loss (measured: 1 frame resent for 9473 reordered; with
        # `reorder 1`, no tolerance, 348). What a sends is captured where it arrives, on b's end.
        self.d["a"].ctl("port", "fault", "p0", "reorder", "0.2", "seed", "11")
        tshark = shutil.which("tshark") is not None
        if tshark:
            pcap = os.path.join(self.d["b"].dir, "sprayed.pcap")
            cap = ct.spawn(["ip", "netns", "exec", self.net.b, "tshark", "-q", "-i", self.net.vb,
                            "-f", "udp port 4791", "-F", "pcap", "-w", pcap],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            ct.wait_until(lambda: os.path.exists(pcap) and os.path.getsize(pcap) >= 24,
                          what="tshark to start capturing")
            time.sleep(0.5)
        sizes = ["4097", "1m", "8m"]
        watch = QpWatch(self.d["a"])
        watch.start()
        self.run_pair(OPS, sizes, "--selective-repeat", "--params", "spray 8", timeout=240)
        rows = watch.stop()
        stats = self.assert_clean_daemons(OPS, sizes)
        faults = self.d["a"].ctl("port", "show", "p0")[1][0]["faults"]
        reordered = faults["rx"]["reordered"] + faults["tx"]["reordered"]
        self.assertGreater(reordered, 1000, faults)
        resent = stats["a"]["retransmits"] + stats["b"]["retransmits"]
        self.assertLess(resent, reordered // 100, (stats, faults))
        self.assertIn(8, {r["info"].get("spray") for r in rows}, "qp list shows the spray")
        if tshark:
            time.sleep(0.5)
            cap.send_signal(signal.SIGINT)
            cap.communicate(timeout=30)
            ports = {}
            for f in golden.read_pcap(pcap):
                sport = struct.unpack(">H", f[34:36])[0]
                ports.setdefault(golden.kind(f) == "ACK", set()).add(sport)
            self.assertEqual(len(ports[False]), 8, sorted(ports[False]))
            self.assertEqual(len(ports.get(True, {0})), 1, ports.get(True))

    def test_spray_needs_selective_repeat(self):
        port = free_port()
        common = ["--ops", "write", "--sizes", "8k", "--params", "spray 8"]
        rsp = self.tool("b", 10, "--listen", port, *common)
        ct.wait_until(lambda: ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip(),
                      what="cleave-rdma to listen")
        req = self.tool("a", 10, "--connect", f"127.0.0.1:{port}", *common)
        for p in (req, rsp):
            code, rows, err = self.results(p, 40)
            self.assertEqual((code, rows), (1, {}), err)
            self.assertIn("cannot connect the queue pair", err)
        for side in ("a", "b"):
            self.assertEqual(self.d[side].ctl("qp", "list")[1], [], f"{side} keeps QPs")

    def nic_counter(self, side, name):
        """Counter `name` of daemon `side`'s NIC (`cleavectl nic show`)."""
        return self.d[side].ctl("nic", "show")[1][0]["counters"].get(name, 0)

    def test_selective_repeat_places_past_gaps_of_many_writes(self):
        # 64 KiB WRITEs, many in flight, through seeded loss on what a sends: past a gap in one
        # WRITE, b's NIC places the packets of the WRITEs after it through its further WRITE
        # contexts (one context per flow deferred them all to the copy path), and the bytes
        # arrive intact (run_pair's SHA-256 on both sides).
        before = self.nic_counter("b", "nic_rx_placed_past_gap")
        self.d["a"].ctl("port", "fault", "p0", "tx", "loss", "0.01", "seed", "7")
        self.run_pair(["write", "write_imm"], ["64k"], "--iters", 64, "--selective-repeat",
                      timeout=240)
        self.assert_clean_daemons(["write", "write_imm"], ["64k"])
        dropped = self.d["a"].ctl("port", "show", "p0")[1][0]["faults"]["tx"]["dropped"]
        self.assertGreater(dropped, 0)
        placed = self.nic_counter("b", "nic_rx_placed_past_gap") - before
        self.assertGreater(placed, 0, "no WRITE packet placed past a gap through a further context")

    def pmtu_case(self, mtu, sizes):
        watch = {side: QpWatch(self.d[side]) for side in ("a", "b")}
        for w in watch.values():
            w.start()
        self.run_pair(OPS, sizes, mtu=mtu)
        seen = {side: w.stop() for side, w in watch.items()}
        self.assert_clean_daemons(OPS, sizes)
        # While they ran, `cleavectl qp list` showed the QPs ready to send (RTS) at that PMTU,
        # each towards the other daemon (before RTR a QP has neither).
        for side, peer in (("a", "b"), ("b", "a")):
            rts = [r for r in seen[side] if r["info"]["state"] == "RTS"]
            self.assertTrue(rts, f"no QP in RTS seen on {side}: {seen[side][:3]}")
            self.assertEqual({r["info"]["pmtu"] for r in rts}, {mtu}, rts[:3])
            self.assertEqual({r["remote"].split(":")[0] for r in rts}, {IP[peer]}, rts[:3])

    def test_pmtu_1024(self):
        self.pmtu_case(1024, ["1023", "1025", "3000", "65537", "1000001", "33554433"])

    def test_pmtu_256(self):
        self.pmtu_case(256, ["255", "257", "1000", "65537", "8388609"])

    def test_a_pmtu_the_wire_cannot_carry_is_refused(self):
        # 2048-byte packets and their headers do not fit the port's MTU of 1500: the QP does
        # not connect, on either side, and nothing is left behind.
        port = free_port()
        common = ["--ops", "write", "--sizes", "4k", "--mtu", "2048", "--timeout", "10"]
        rsp = self.tool("b", 10, "--listen", port, *common)
        req = self.tool("a", 10, "--connect", f"127.0.0.1:{port}", *common)
        for p in (req, rsp):
            code, rows, err = self.results(p, 40)
            self.assertNotEqual(code, 0, err)
            self.assertEqual(rows, {}, err)
            self.assertIn("cannot connect the queue pair", err)
        for side in ("a", "b"):
            self.assertEqual(self.d[side].ctl("qp", "list")[1], [], f"{side} keeps QPs")

    def test_the_wire_decodes_in_tshark(self):
        # What the daemons put on the wire: every frame's ICRC (added by the NIC) verifies, and
        # tshark decodes each as RoCEv2 without complaint. Each side's frames are captured where
        # they arrive, on the other end of the veth (a packet socket does not see what another
        # one sends past the qdisc, as af_packet's wire does).
        if shutil.which("tshark") is None:
            self.skipTest("tshark is not installed")
        caps = {}
        for side, ns, iface in (("a", self.net.a, self.net.va), ("b", self.net.b, self.net.vb)):
            pcap = os.path.join(self.d[side].dir, "wire.pcap")
            caps[pcap] = ct.spawn(["ip", "netns", "exec", ns, "tshark", "-q", "-i", iface, "-f",
                                   "udp port 4791", "-F", "pcap", "-w", pcap],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for pcap in caps:
            ct.wait_until(lambda: os.path.exists(pcap) and os.path.getsize(pcap) >= 24,
                          what="tshark to start capturing")
        time.sleep(0.5)  # the capture filter is in place once the file exists; settle anyway
        # At least 13 bytes per SEND: a shorter SEND only trips tshark's RPC-over-RDMA heuristic
        # (test_roce_golden.py shows it).
        sizes = ["4097", "64k"]
        self.run_pair(OPS, sizes)
        time.sleep(0.5)
        for cap in caps.values():
            cap.send_signal(signal.SIGINT)
            cap.communicate(timeout=30)
        pcaps = list(caps)
        # On a arrive the responder's frames (b's), on b the requester's (a's).
        self.check_capture(pcaps[0], ("READ_RESP_FIRST", "READ_RESP_MIDDLE", "READ_RESP_LAST",
                                      "ACK"))
        self.check_capture(pcaps[1], ("SEND_FIRST", "SEND_LAST", "SEND_LAST_IMM", "WRITE_FIRST",
                                      "WRITE_MIDDLE", "WRITE_LAST", "WRITE_LAST_IMM",
                                      "READ_REQUEST"))

    def check_capture(self, pcap, want):
        frames = golden.read_pcap(pcap)
        kinds = {golden.kind(f) for f in frames}
        for k in want:
            self.assertIn(k, kinds, (pcap, sorted(kinds)))
        for i, f in enumerate(frames, 1):
            self.assertEqual(f[-4:], golden.icrc(f), f"frame {i} ({golden.kind(f)})")
        verbose = golden.tshark_frames_verbose(pcap)
        self.assertEqual(len(verbose), len(frames))
        for i, (f, text) in enumerate(zip(frames, verbose), 1):
            self.assertNotIn("Malformed", text, f"frame {i} ({golden.kind(f)})")
            self.assertNotIn("Expert Info (Error", text, f"frame {i} ({golden.kind(f)})")
            self.assertIn("\nInfiniBand\n", text, f"frame {i}: not decoded as RoCEv2")

    def test_many_in_flight_with_dcqcn(self):
        rows, _ = self.run_pair(OPS, ["1", "64k"], "--iters", 200, "--selective-repeat",
                                "--params", "dcqcn on")
        self.assertTrue(all(r["iters"] == 200 for r in rows.values()), rows)
        self.assert_clean_daemons(OPS, ["1", "64k"])

    def test_options_that_differ_are_refused(self):
        port = free_port()
        rsp = self.tool("b", 10, "--listen", port, "--ops", "write", "--sizes", "8k")
        ct.wait_until(lambda: ct.sh(["ss", "-Hltn", f"sport = :{port}"]).stdout.strip(),
                      what="cleave-rdma to listen")
        req = self.tool("a", 10, "--connect", f"127.0.0.1:{port}", "--ops", "write")
        for p in (req, rsp):
            code, rows, err = self.results(p, 40)
            self.assertEqual((code, rows), (1, {}), err)
            self.assertIn("the peer's options differ", err)

    def test_nobody_to_talk_to_times_out(self):
        port = free_port()
        code, rows, err = self.results(self.tool("a", 1, "--connect", f"127.0.0.1:{port}"), 30)
        self.assertEqual((code, rows), (1, {}), err)
        self.assertIn(f"timed out after 1 s connecting to 127.0.0.1:{port}", err)
        self.assertEqual(self.d["a"].ctl("qp", "list")[1], [])


if __name__ == "__main__":
    if not os.access(RDMA, os.X_OK):
        print(f"skipped: {RDMA} is not built", flush=True)
        raise SystemExit(ct.SKIP)
    ct.main()
