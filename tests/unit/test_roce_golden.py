#!/usr/bin/python3
"""test_roce_golden.py - the RoCEv2 packets our RC transport sends, decoded by tshark.

roce_golden (tests/unit/roce_golden.cc) runs the real RcTransport over the simulated network
until it has sent every opcode it has, the ACK and each NAK and a CNP, and writes every frame
into a pcap. Here: every kind is there; every frame ECN-capable, the CNP at DSCP 48; each frame's ICRC verifies (computed with zlib.crc32 as
IBTA annex A17 defines it); UDP goes to 4791 from 49152-65535; tshark decodes every frame without
"Malformed" (or any error or warning) and reads the same BTH, RETH, AETH and ImmDt fields our own
parser below reads from the bytes; the first frame of each kind equals tests/golden/roce_rc.txt
byte for byte, and tshark decodes that committed file cleanly too. The CNP (0x81) is an opcode
tshark does not know: it shows "Opcode: Unknown (129)" and the 16 reserved bytes and the ICRC as
"Unknown/Vendor Specific Data", which is expected and not Malformed. A SEND only shorter than
13 bytes trips tshark 4.0's RPC-over-RDMA heuristic ("[Malformed Packet: RPCoRDMA]"); one is
decoded with that heuristic off to show the packet itself is right.

Regenerate the golden file after an intended change of the wire format (tests/README.md):
    build/tests/roce_golden /tmp/roce.pcap --golden tests/golden/roce_rc.txt
The tshark checks skip when tshark is not installed (tools/setup.sh installs it).
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.environ.get("ROCE_GOLDEN", "build/tests/roce_golden")
GOLDEN = os.path.join(HERE, "..", "golden", "roce_rc.txt")
TSHARK = shutil.which("tshark")

ETH, IP, UDP = 14, 20, 8
BTH = ETH + IP + UDP  # where the BTH starts in a frame

# RC opcodes: (name, RETH, AETH, ImmDt), from IBTA vol. 1 table 38 as listed there.
OPS = {
    0x00: ("SEND_FIRST", 0, 0, 0),
    0x01: ("SEND_MIDDLE", 0, 0, 0),
    0x02: ("SEND_LAST", 0, 0, 0),
    0x03: ("SEND_LAST_IMM", 0, 0, 1),
    0x04: ("SEND_ONLY", 0, 0, 0),
    0x05: ("SEND_ONLY_IMM", 0, 0, 1),
    0x06: ("WRITE_FIRST", 1, 0, 0),
    0x07: ("WRITE_MIDDLE", 0, 0, 0),
    0x08: ("WRITE_LAST", 0, 0, 0),
    0x09: ("WRITE_LAST_IMM", 0, 0, 1),
    0x0A: ("WRITE_ONLY", 1, 0, 0),
    0x0B: ("WRITE_ONLY_IMM", 1, 0, 1),
    0x0C: ("READ_REQUEST", 1, 0, 0),
    0x0D: ("READ_RESP_FIRST", 0, 1, 0),
    0x0E: ("READ_RESP_MIDDLE", 0, 0, 0),
    0x0F: ("READ_RESP_LAST", 0, 1, 0),
    0x10: ("READ_RESP_ONLY", 0, 1, 0),
    0x11: ("ACK", 0, 1, 0),
}
CNP = 0x81
KINDS = [v[0] for v in OPS.values()] + [
    "NAK_PSN_SEQUENCE_ERROR", "RNR_NAK", "NAK_REMOTE_ACCESS_ERROR", "CNP"]

# tshark field -> the key of our parser's dict (below).
FIELDS = [
    ("infiniband.bth.opcode", "opcode"),
    ("infiniband.bth.se", "se"),
    ("infiniband.bth.m", "migreq"),
    ("infiniband.bth.padcnt", "pad"),
    ("infiniband.bth.tver", "tver"),
    ("infiniband.bth.p_key", "pkey"),
    ("infiniband.bth.destqp", "destqp"),
    ("infiniband.bth.a", "ackreq"),
    ("infiniband.bth.psn", "psn"),
    ("infiniband.reth.va", "va"),
    ("infiniband.reth.r_key", "rkey"),
    ("infiniband.reth.dmalen", "dmalen"),
    ("infiniband.aeth.syndrome", "syndrome"),
    ("infiniband.aeth.msn", "msn"),
    ("infiniband.immdt", "imm"),
    ("infiniband.invariant.crc", "icrc"),
    ("udp.srcport", "sport"),
    ("udp.dstport", "dport"),
    ("udp.length", "udp_len"),
    ("ip.len", "ip_len"),
]


def be(b):
    return int.from_bytes(b, "big")


def parse(f):
    """Our own reading of a frame: IPv4, UDP, BTH and the headers its opcode carries."""
    assert be(f[12:14]) == 0x0800 and f[ETH] == 0x45 and f[ETH + 9] == 17, f.hex()
    b = f[BTH:]
    d = {
        "ip_len": be(f[ETH + 2:ETH + 4]), "sport": be(f[BTH - 8:BTH - 6]),
        "dport": be(f[BTH - 6:BTH - 4]), "udp_len": be(f[BTH - 4:BTH - 2]),
        "opcode": b[0], "se": b[1] >> 7, "migreq": (b[1] >> 6) & 1, "pad": (b[1] >> 4) & 3,
        "tver": b[1] & 15, "pkey": be(b[2:4]), "destqp": be(b[5:8]), "ackreq": b[8] >> 7,
        "psn": be(b[9:12]), "becn": (b[4] >> 6) & 1, "fecn": b[4] >> 7,
        "va": None, "rkey": None, "dmalen": None, "syndrome": None, "msn": None, "imm": None,
        # tshark shows the ICRC as a big-endian number of its four bytes; not for a CNP.
        "icrc": None if b[0] == CNP else be(f[-4:]),
    }
    n = 12
    if b[0] == CNP:
        d["hdr_len"] = n + 16
        return d
    _, reth, aeth, imm = OPS[b[0]]
    if reth:
        d["va"], d["rkey"], d["dmalen"] = be(b[n:n + 8]), be(b[n + 8:n + 12]), be(b[n + 12:n + 16])
        n += 16
    if aeth:
        d["syndrome"], d["msn"] = b[n], be(b[n + 1:n + 4])
        n += 4
    if imm:
        d["imm"] = be(b[n:n + 4])
        n += 4
    d["hdr_len"] = n
    return d


def kind(f):
    op = f[BTH]
    if op == CNP:
        return "CNP"
    if op != 0x11:
        return OPS[op][0]
    syn = parse(f)["syndrome"]
    if syn & 0x60 == 0x00:
        return "ACK"
    if syn & 0x60 == 0x20:
        return "RNR_NAK"
    return {0x60: "NAK_PSN_SEQUENCE_ERROR", 0x61: "NAK_INVALID_REQUEST",
            0x62: "NAK_REMOTE_ACCESS_ERROR"}.get(syn, "NAK_REMOTE_OPERATIONAL_ERROR")


def icrc(f):
    """The ICRC bytes of a frame (IBTA annex A17): zlib CRC-32 over 8 bytes of 0xFF and the
    packet from the IP header to the ICRC with TOS, TTL, IP checksum, UDP checksum and BTH byte 4
    as ones, least-significant byte first."""
    m = bytearray(b"\xff" * 8 + f[ETH:-4])
    for at in (1, 8, 10, 11, IP + 6, IP + 7, IP + UDP + 4):
        m[8 + at] = 0xFF
    return struct.pack("<I", zlib.crc32(bytes(m)))


def read_pcap(path):
    with open(path, "rb") as fh:
        data = fh.read()
    magic, major, minor, _, _, _, link = struct.unpack("<IHHiIII", data[:24])
    assert (magic, major, minor, link) == (0xA1B2C3D4, 2, 4, 1), "not classic pcap, Ethernet"
    frames, off = [], 24
    while off < len(data):
        _, _, incl, orig = struct.unpack("<IIII", data[off:off + 16])
        assert incl == orig
        frames.append(data[off + 16:off + 16 + incl])
        off += 16 + incl
    return frames


def write_pcap(path, frames):
    with open(path, "wb") as fh:
        fh.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, f in enumerate(frames):
            fh.write(struct.pack("<IIII", i, 0, len(f), len(f)) + f)


def read_golden(path):
    lines = []
    with open(path) as fh:
        for line in fh:
            name, hexbytes = line.split()
            lines.append((name, bytes.fromhex(hexbytes)))
    return lines


def tshark(*args):
    p = subprocess.run([TSHARK, "-n", "-o", "ip.check_checksum:TRUE", *args],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"tshark {' '.join(args)}: {p.returncode}\n{p.stderr}")
    return p.stdout


def tshark_fields(path, extra=()):
    """tshark's fields per frame: a list of dicts with our parser's keys."""
    args = [*extra, "-r", path, "-T", "fields", "-E", "separator=,", "-E", "occurrence=f",
            "-e", "frame.number"]
    for name, _ in FIELDS:
        args += ["-e", name]
    rows = []
    for line in tshark(*args).splitlines():
        cols = line.split(",")
        assert len(cols) == len(FIELDS) + 1, line
        row = {}
        for (name, key), v in zip(FIELDS, cols[1:]):
            if v == "":
                row[key] = None
            elif name == "infiniband.immdt":  # bytes, printed as hex without 0x
                row[key] = int(v, 16)
            else:
                row[key] = int(v, 0)
        rows.append(row)
    return rows


def tshark_frames_verbose(path, extra=()):
    """tshark -V split per frame."""
    text = tshark(*extra, "-r", path, "-V")
    parts = text.split("\nFrame ")
    return [p if i == 0 else "Frame " + p for i, p in enumerate(parts)]


class RoceGolden(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.pcap = os.path.join(cls.dir.name, "roce.pcap")
        cls.golden_out = os.path.join(cls.dir.name, "roce_rc.txt")
        p = subprocess.run([TOOL, cls.pcap, "--golden", cls.golden_out],
                           capture_output=True, text=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"roce_golden failed ({p.returncode}):\n{p.stderr}")
        cls.frames = read_pcap(cls.pcap)

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def need_tshark(self):
        if TSHARK is None:
            self.skipTest("tshark is not installed (tools/setup.sh installs it)")

    def test_every_kind_is_sent(self):
        seen = {kind(f) for f in self.frames}
        self.assertEqual(set(KINDS) - seen, set())
        self.assertEqual(seen - set(KINDS), set())

    def test_ports_lengths_and_pad(self):
        for i, f in enumerate(self.frames, 1):
            d = parse(f)
            self.assertEqual(d["dport"], 4791, f"frame {i}")
            self.assertTrue(49152 <= d["sport"] <= 65535, f"frame {i}: {d['sport']}")
            self.assertEqual(d["ip_len"], len(f) - ETH, f"frame {i}")
            self.assertEqual(d["udp_len"], len(f) - ETH - IP, f"frame {i}")
            self.assertEqual((d["tver"], d["pkey"]), (0, 0xFFFF), f"frame {i}")
            payload = len(f) - BTH - d["hdr_len"] - d["pad"] - 4
            self.assertGreaterEqual(payload, 0, f"frame {i}")
            self.assertEqual(d["pad"], -payload % 4, f"frame {i}")
            self.assertEqual(f[len(f) - 4 - d["pad"]:len(f) - 4], bytes(d["pad"]), f"frame {i}")
            if kind(f) == "CNP":
                self.assertEqual((d["becn"], d["psn"], d["udp_len"]), (1, 0, 40))
                self.assertEqual(f[BTH + 12:BTH + 28], bytes(16))

    def test_ecn_and_dscp(self):
        # DCQCN is on: every packet is ECN-capable, ECT(0) (or CE, marked on the way: the CNP's
        # link marks all), requests, responses, ACKs and NAKs, READ requests and the CNP alike;
        # the CNP goes at DSCP 48 (mlx5's), everything else at 0.
        for i, f in enumerate(self.frames, 1):
            tos = f[ETH + 1]
            self.assertIn(tos & 3, (2, 3), f"frame {i} ({kind(f)}): ECN {tos & 3}")
            self.assertEqual(tos >> 2, 48 if kind(f) == "CNP" else 0, f"frame {i} ({kind(f)})")

    def test_icrc_of_every_frame(self):
        for i, f in enumerate(self.frames, 1):
            self.assertEqual(f[-4:], icrc(f), f"frame {i} ({kind(f)})")
        # The check can fail: a flipped payload bit or DestQP bit is seen, a TTL change is not.
        f = bytearray(self.frames[0])
        f[BTH + 20] ^= 4
        self.assertNotEqual(bytes(f[-4:]), icrc(bytes(f)))
        f = bytearray(self.frames[0])
        f[BTH + 7] ^= 1
        self.assertNotEqual(bytes(f[-4:]), icrc(bytes(f)))
        f = bytearray(self.frames[0])
        f[ETH + 8] = 1
        self.assertEqual(bytes(f[-4:]), icrc(bytes(f)))

    def test_golden_file_matches(self):
        golden = read_golden(GOLDEN)
        self.assertEqual([n for n, _ in golden], KINDS)
        first = {}
        for f in self.frames:
            first.setdefault(kind(f), f)
        for name, want in golden:
            self.assertEqual(first[name].hex(), want.hex(),
                             f"{name} changed on the wire: if intended, regenerate "
                             f"tests/golden/roce_rc.txt (tests/README.md)")
        with open(GOLDEN, "rb") as a, open(self.golden_out, "rb") as b:
            self.assertEqual(a.read(), b.read(), "roce_golden --golden differs from the file")

    def test_deterministic(self):
        again = os.path.join(self.dir.name, "again.pcap")
        subprocess.run([TOOL, again], check=True, capture_output=True, timeout=120)
        with open(self.pcap, "rb") as a, open(again, "rb") as b:
            self.assertEqual(a.read(), b.read())

    def check_tshark(self, path, frames, extra=()):
        rows = tshark_fields(path, extra)
        self.assertEqual(len(rows), len(frames))
        for i, (f, row) in enumerate(zip(frames, rows), 1):
            want = {k: v for k, v in parse(f).items() if k in row}
            self.assertEqual(row, want, f"frame {i} ({kind(f)}): tshark vs our parser")
        verbose = tshark_frames_verbose(path, extra)
        self.assertEqual(len(verbose), len(frames))
        for i, (f, text) in enumerate(zip(frames, verbose), 1):
            self.assertNotIn("Malformed", text, f"frame {i} ({kind(f)})")
            self.assertNotIn("Expert Info (Error", text, f"frame {i} ({kind(f)})")
            self.assertNotIn("Expert Info (Warning", text, f"frame {i} ({kind(f)})")
            self.assertIn("[Header checksum status: Good]", text, f"frame {i}")
            self.assertIn("\nInfiniBand\n", text, f"frame {i}: not decoded as RoCEv2")
            if kind(f) == "CNP":
                self.assertIn("Opcode: Unknown (129)", text)
                self.assertIn("Unknown/Vendor Specific Data: " + f[BTH + 12:].hex(), text)

    def test_tshark_decodes_every_frame_as_we_do(self):
        self.need_tshark()
        self.check_tshark(self.pcap, self.frames)

    def test_tshark_decodes_the_committed_golden_file(self):
        self.need_tshark()
        golden = [f for _, f in read_golden(GOLDEN)]
        path = os.path.join(self.dir.name, "golden.pcap")
        write_pcap(path, golden)
        self.check_tshark(path, golden)
        for f in golden:
            self.assertEqual(f[-4:], icrc(f), kind(f))

    def test_a_short_send_only_trips_only_tsharks_rpcordma_heuristic(self):
        # The golden SEND only cut to 10 bytes (PadCnt 2). tshark 4.0's RPC-over-RDMA heuristic
        # throws on it; with that heuristic off the frame decodes cleanly and as we read it, so
        # the packet is right. A tshark that no longer throws passes the first check as well.
        self.need_tshark()
        send = dict(read_golden(GOLDEN))["SEND_ONLY"]
        hdr = BTH + 12
        f = bytearray(send[:hdr + 10] + bytes(2) + bytes(4))
        f[BTH + 1] = (f[BTH + 1] & 0xCF) | 2 << 4
        struct.pack_into("!H", f, ETH + 2, len(f) - ETH)
        struct.pack_into("!H", f, ETH + 10, 0)
        words = sum(struct.unpack("!10H", bytes(f[ETH:ETH + IP])))
        words = (words & 0xFFFF) + (words >> 16)
        struct.pack_into("!H", f, ETH + 10, ~((words & 0xFFFF) + (words >> 16)) & 0xFFFF)
        struct.pack_into("!H", f, ETH + IP + 4, len(f) - ETH - IP)
        f[-4:] = icrc(bytes(f))
        path = os.path.join(self.dir.name, "short_send.pcap")
        write_pcap(path, [bytes(f)])
        for line in tshark("-r", path, "-V").splitlines():
            if line.startswith("[Malformed Packet"):  # the layer that threw
                self.assertEqual(line, "[Malformed Packet: RPCoRDMA]")
        names = [n for n in ("rpcrdma_infiniband",)
                 if subprocess.run([TSHARK, "--disable-heuristic", n, "-r", path],
                                   capture_output=True).returncode == 0]
        if not names:
            self.skipTest("this tshark has no rpcrdma_infiniband heuristic")
        self.check_tshark(path, [bytes(f)], ["--disable-heuristic", names[0]])


if __name__ == "__main__":
    unittest.main(verbosity=2)
