#!/usr/bin/python3
"""test_solar_golden.py - the golden Solar packets, and tshark's reading of them through
tools/solar.lua.

solar_golden (tests/unit/solar_golden.cc) builds one frame of each kind with the header codec.
Here: its output equals tests/golden/solar.txt byte for byte; our own reading of every frame
below (from src/transport/solar/README.md, with a bitwise CRC32C) finds the fields and a block
CRC that matches, except in WRITE_BLK_BAD_CRC; tshark with the dissector reads the same fields,
shows every frame without "Malformed" or any error or warning, and marks the bad CRC (and only
it) with an error; broken copies of the frames are shown malformed with the rule they break;
the dissector follows its port preference (-o solar.port:N).

Regenerate the golden file after an intended change of the wire format (tests/README.md):
    build/tests/solar_golden tests/golden/solar.txt
Without tshark the tshark checks skip and the test exits 77 (meson's skip) once the rest passed.
"""

import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TOOL = os.environ.get("SOLAR_GOLDEN", "build/tests/solar_golden")
GOLDEN = os.path.join(ROOT, "tests", "golden", "solar.txt")
LUA = os.path.join(ROOT, "tools", "solar.lua")
TSHARK = shutil.which("tshark")

ETH, IP, UDP = 14, 20, 8
SOLAR = ETH + IP + UDP  # where the Solar header starts in a frame
KINDS = ["WRITE_BLK", "WRITE_BLK_ACK_REQ", "ACK", "ACK_SACK_CE", "READ_REQ", "READ_BLK",
         "READ_BLK_RETX", "WRITE_BLK_BAD_CRC", "NACK", "ACK_PROBE", "ACK_PROBE_REPLY"]

# tshark field -> the key of our reading (below).
FIELDS = [
    ("udp.srcport", "sport"), ("udp.dstport", "dport"),
    ("solar.type", "type"), ("solar.flags", "flags"), ("solar.path", "path"),
    ("solar.conn", "conn"), ("solar.seq", "seq"), ("solar.io_id", "io_id"),
    ("solar.offset", "offset"), ("solar.index", "index"), ("solar.count", "count"),
    ("solar.crc", "crc"), ("solar.crc.computed", "crc_computed"),
    ("solar.crc.status", "crc_good"), ("solar.block_len", "block_len"),
    ("solar.length", "length"), ("solar.largest", "largest"), ("solar.sack", "sack"),
    ("solar.sacked", "sacked"), ("solar.echo", "echo"), ("solar.ack_delay", "ack_delay"),
    ("solar.ce_count", "ce_count"), ("solar.reason", "reason"),
]


def be(b):
    return int.from_bytes(b, "big")


def crc32c(data):
    """CRC-32C bit by bit (reflected 0x82F63B78), apart from every table in the tree."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def parse(f):
    """Our own reading of a frame: IPv4, UDP, the Solar header by its type, the block."""
    assert be(f[12:14]) == 0x0800 and f[ETH] == 0x45 and f[ETH + 9] == 17, f.hex()
    h = f[SOLAR:SOLAR + 32]
    block = f[SOLAR + 32:]
    d = {"sport": be(f[SOLAR - 8:SOLAR - 6]), "dport": be(f[SOLAR - 6:SOLAR - 4]),
         "type": h[0], "flags": h[1], "path": be(h[2:4]), "conn": be(h[4:8])}
    if h[0] == 4:
        largest, sack = be(h[8:12]), be(h[12:20])
        d.update(largest=largest, sack=sack, echo=be(h[20:24]), ack_delay=be(h[24:26]),
                 ce_count=be(h[28:32]),
                 sacked=[(largest - 1 - i) % 2**32 for i in range(64) if sack >> i & 1])
        if not d["sacked"]:
            del d["sacked"]  # tshark shows no field for no bit
        return d
    d.update(seq=be(h[8:12]), io_id=be(h[12:16]), offset=be(h[16:24]), index=be(h[24:26]),
             count=be(h[26:28]))
    if h[0] in (1, 3):
        d.update(crc=be(h[28:32]), crc_computed=crc32c(block), block_len=len(block))
        d["crc_good"] = int(d["crc"] == d["crc_computed"])
    elif h[0] == 2:
        d["length"] = be(h[28:32])
    else:
        d["reason"] = be(h[28:32])
    return d


def read_golden(path):
    with open(path) as f:
        return [(name, bytes.fromhex(hexs)) for name, hexs in
                (line.split() for line in f if line.strip())]


def write_pcap(path, frames):
    with open(path, "wb") as o:
        o.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, f in enumerate(frames):
            o.write(struct.pack("<IIII", i, 0, len(f), len(f)))
            o.write(f)


def tshark(*args):
    r = subprocess.run([TSHARK, "-X", "lua_script:" + LUA, *args], capture_output=True, text=True)
    if r.returncode != 0 or "Lua: Error" in r.stderr or "lua_script" in r.stderr:
        raise AssertionError(f"tshark {' '.join(args)}: {r.returncode}\n{r.stderr}")
    return r.stdout


def tshark_fields(path, extra=()):
    """Each frame's FIELDS as our reading's keys and ints (lists for repeated ones)."""
    args = ["-r", path, "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=;", *extra]
    for field, _ in FIELDS:
        args += ["-e", field]
    rows = []
    for line in tshark(*args).splitlines():
        row = {}
        for (_, key), value in zip(FIELDS, line.split("\t")):
            if value == "":
                continue
            values = [int(v, 0) for v in value.split(";")]
            row[key] = values if key == "sacked" else values[0]
        rows.append(row)
    return rows


def tshark_verbose(path, extra=()):
    """Each frame's -V text."""
    text = tshark("-r", path, "-V", *extra)
    return ["Frame " + t for t in text.split("\nFrame ")]


def fixed(f):
    """A frame with its IP and UDP lengths and IP checksum made right again, UDP checksum 0."""
    f = bytearray(f)
    struct.pack_into("!H", f, ETH + 2, len(f) - ETH)
    struct.pack_into("!H", f, ETH + 10, 0)
    words = sum(struct.unpack("!10H", bytes(f[ETH:ETH + IP])))
    words = (words & 0xFFFF) + (words >> 16)
    struct.pack_into("!H", f, ETH + 10, ~((words & 0xFFFF) + (words >> 16)) & 0xFFFF)
    struct.pack_into("!H", f, ETH + IP + 4, len(f) - ETH - IP)
    struct.pack_into("!H", f, ETH + IP + 6, 0)
    return bytes(f)


class SolarGolden(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        out = os.path.join(cls.dir.name, "solar.txt")
        subprocess.run([TOOL, out], check=True)
        with open(out) as f:
            cls.generated = f.read()
        cls.frames = read_golden(out)
        cls.pcap = os.path.join(cls.dir.name, "solar.pcap")
        write_pcap(cls.pcap, [f for _, f in cls.frames])

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def need_tshark(self):
        if not TSHARK:
            self.skipTest("tshark is not installed (tools/setup.sh installs it)")

    def test_the_codec_builds_the_committed_golden_file(self):
        with open(GOLDEN) as f:
            self.assertEqual(self.generated, f.read(),
                             "regenerate tests/golden/solar.txt if the change was intended")
        self.assertEqual([n for n, _ in self.frames], KINDS)

    def test_our_reading_of_each_frame(self):
        for name, f in self.frames:
            d = parse(f)
            self.assertEqual(d["dport"], 7000, name)
            self.assertEqual(d["sport"], 0xC000 | d["path"], name)
            if d["type"] in (1, 3):
                self.assertEqual(d["crc_good"], 0 if name == "WRITE_BLK_BAD_CRC" else 1, name)
        ack = parse(dict(self.frames)["ACK_SACK_CE"])
        self.assertEqual(ack["sacked"], [99, 97, 95, 36])
        self.assertNotIn("sacked", parse(dict(self.frames)["ACK"]))
        self.assertEqual(ack["ce_count"], 3)

    def test_tshark_reads_every_field_as_we_do(self):
        self.need_tshark()
        rows = tshark_fields(self.pcap)
        self.assertEqual(len(rows), len(self.frames))
        for (name, f), row in zip(self.frames, rows):
            self.assertEqual(row, parse(f), f"{name}: tshark vs our reading")

    def test_tshark_shows_no_error_but_the_bad_crc(self):
        self.need_tshark()
        texts = tshark_verbose(self.pcap)
        self.assertEqual(len(texts), len(self.frames))
        for (name, f), text in zip(self.frames, texts):
            self.assertIn("\nSolar\n", text, name)
            self.assertNotIn("Malformed", text, name)
            self.assertNotIn("Expert Info (Warning", text, name)
            if name == "WRITE_BLK_BAD_CRC":
                self.assertIn("Expert Info (Error/Checksum): Bad block CRC32C", text)
                self.assertIn("[CRC32C status: Bad (0)]", text)
            else:
                self.assertNotIn("Expert Info (Error", text, name)
            if parse(f)["type"] in (1, 3) and name != "WRITE_BLK_BAD_CRC":
                self.assertIn("[CRC32C status: Good (1)]", text, name)

    def test_tshark_shows_broken_headers_with_the_rule_they_break(self):
        self.need_tshark()
        frames = dict(self.frames)

        def at(f, i, value):
            f = bytearray(f)
            f[SOLAR + i] = value
            return fixed(f)

        cases = [
            ("truncated", fixed(frames["ACK"][:SOLAR + 31])),
            ("bad_type", at(frames["ACK"], 0, 6)),
            ("bad_flags", at(frames["NACK"], 1, 1)),
            ("block_on_control", fixed(frames["ACK"] + b"\x00")),
            ("no_block", fixed(frames["WRITE_BLK"][:SOLAR + 32])),
            ("zero_count", at(frames["READ_BLK"], 27, 0)),
            ("index_past_count", at(frames["READ_REQ"], 25, 2)),
            ("zero_length", at(frames["READ_REQ"], 31, 0)),
            ("bad_reason", at(frames["NACK"], 31, 9)),
            ("reserved", at(frames["ACK"], 26, 1)),
        ]
        over = bytearray(frames["READ_REQ"])
        over[SOLAR + 16:SOLAR + 24] = b"\xff" * 8
        cases.append(("offset_overflow", fixed(over)))
        path = os.path.join(self.dir.name, "broken.pcap")
        write_pcap(path, [f for _, f in cases])
        texts = tshark_verbose(path)
        self.assertEqual(len(texts), len(cases))
        for (rule, _), text in zip(cases, texts):
            self.assertIn("Malformed Solar header: " + rule, text, rule)

    def test_the_port_is_a_preference(self):
        self.need_tshark()
        f = bytearray(dict(self.frames)["READ_REQ"])
        struct.pack_into("!H", f, SOLAR - 6, 7001)
        path = os.path.join(self.dir.name, "port.pcap")
        write_pcap(path, [dict(self.frames)["READ_REQ"], fixed(f)])
        types = [r.get("type") for r in tshark_fields(path)]
        self.assertEqual(types, [2, None])
        types = [r.get("type") for r in tshark_fields(path, ["-o", "solar.port:7001"])]
        self.assertEqual(types, [None, 2])


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(0 if TSHARK else 77)
