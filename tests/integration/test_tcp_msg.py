#!/usr/bin/python3
"""test_tcp_msg.py - TCP message mode (CL_FLOW_MESSAGE) end to end: two cleaved daemons, apps on both.

The set-up of test_tcp_c2c.py (whose configuration and helpers it reuses): namespaces a and b
joined by a veth, cleaved in each (a at 10.99.0.1, b at 10.99.0.2), both on the cleave backend,
except in GenericToCleave, where a is on the generic backend. cleave-tcp --messages is the app:
the sender sends messages of sizes from a seeded generator (msg_sizes below, defined in
cleave-tcp --help) over the pattern bytes; the receiver posts buffers ahead and checks every
completion is one message. Both report a SHA-256 over the bytes and one over the message lengths,
which are checked against each other and against this file's own computation. Cases:
  - messages of 1 B .. 1 MiB mixed, one way, the other, and both ways on one flow;
  - a receiver whose buffers are shorter than some messages: CL_ETRUNC for exactly those, with
    their first bytes, and the message after each lands whole in the next buffer; messages as
    long as the buffer are not truncated;
  - a message-mode connect to a Linux listener is refused with CL_EPROTONOSUPPORT, and a stream
    connect to a message-mode listener is refused (CL_ECONNREFUSED);
  - placement: a receiver on the cleave backend gets every message byte placed by the NIC (its
    TCP counters over all flows, `cleavectl transport list`: placed_bytes = the bytes sent,
    copied_bytes 0; the flow path copied nothing, `stats show`; the NIC placed them by message,
    `nic show`: nic_rx_message, nic_rx_placed_bytes). The one exception is truncation: a segment
    reaching past a buffer shorter than its message is deferred whole (defer_ms_overflow), and
    the copy path keeps what fits, so copied_bytes is at most, per truncated message, its length
    past the buffer plus one segment. A receiver on the generic backend copies every byte.
CLEAVE_MSG_COUNT sets the messages per direction of the mixed cases (default 2000).
"""

import hashlib
import os
import socket
import struct
import subprocess

import cleave_pattern
import cleavetest as ct
import test_tcp_c2c as c2c

COUNT = int(os.environ.get("CLEAVE_MSG_COUNT", 2000))
MIB = 1 << 20
CL_EPROTONOSUPPORT = -93
CL_ECONNREFUSED = -111
CL_ETRUNC = -1005
KERNEL_IP = "10.99.0.3"  # the kernel's own address in namespace b, for the Linux listener
MSS = 1460  # no segment carries more payload (1428 with timestamps and the message option)
M64 = (1 << 64) - 1


def _word(x):
    x ^= x >> 12
    x ^= (x << 25) & M64
    x ^= x >> 27
    return x, (x * 0x2545F4914F6CDD1D) & M64


def msg_sizes(seed, count, lo_size, hi_size):
    """The message sizes cleave-tcp --messages sends (its --help defines them)."""
    x = (seed ^ 0xD1B54A32D192ED03) or 0x9E3779B97F4A7C15
    lo, hi = lo_size.bit_length() - 1, hi_size.bit_length() - 1
    out = []
    for _ in range(count):
        x, w = _word(x)
        k = lo + (w & 0xFFFFFFFF) % (hi - lo + 1)
        n = (1 << k) + (w >> 32) % (1 << k)
        out.append(min(max(n, lo_size), hi_size))
    return out


def lengths_sha256(sizes):
    return hashlib.sha256(b"".join(struct.pack("<Q", n) for n in sizes)).hexdigest()


def truncated_sha256(seed, sizes, buf):
    """SHA-256 of what a receiver with `buf`-byte buffers gets: each message's first bytes."""
    h, data = hashlib.sha256(), b"".join(cleave_pattern.pattern(seed, sum(sizes)))
    at = 0
    for n in sizes:
        h.update(data[at:at + min(n, buf)])
        at += n
    return h.hexdigest()


class Msg(c2c.C2C):
    # The set-up and helpers of test_tcp_c2c.py, not its stream cases (None: not collected).
    test_a_sends_to_b = test_b_sends_to_a = None
    test_receiver_closes_first_and_still_receives = test_both_directions_at_once = None
    test_abort_is_a_reset_on_the_other_side = None

    def messages(self, src, dst, port, seed, count, lo, hi, buf=None):
        """count messages src -> dst; returns the sender's and receiver's JSON."""
        rx_args = ["--messages", 0, "--recv", "--msg-max", hi]
        if buf is not None:
            rx_args += ["--msg-buf", buf]
        rx = self.listen(dst, port, *rx_args)
        tx = self.tool(src, "--connect", f"{c2c.IP[dst]}:{port}", "--messages", count,
                       "--msg-min", lo, "--msg-max", hi, "--seed", seed)
        res_tx, res_rx = self.result(tx), self.result(rx)
        self.assert_clean(res_tx)
        self.assert_clean(res_rx)
        s, r = res_tx[1], res_rx[1]
        sizes = msg_sizes(seed, count, lo, hi)
        total = sum(sizes)
        self.assertEqual((s["messages_sent"], s["sent"]), (count, total), s)
        self.assertEqual(s["sent_sha256"], cleave_pattern.sha256(seed, total))
        self.assertEqual(s["sent_lengths_sha256"], lengths_sha256(sizes))
        # Every receive completion was one message, in order, with the sender's length.
        self.assertEqual(r["messages_received"], count, r)
        self.assertEqual(r["received_lengths_sha256"], s["sent_lengths_sha256"])
        for side in (src, dst):
            self.assertEqual(self.live_flows(side), [], f"{side} keeps no flow")
        return s, r, sizes

    def backend(self, side):
        return self.backend_a if side == "a" else "cleave"

    def assert_placement(self, side, sizes, buf=None):
        """Daemon `side` received the messages `sizes` (into buffers of `buf` bytes): on the
        cleave backend the NIC placed every byte a buffer holds, by message, except the
        segments of truncated messages that reach past their buffer, which are deferred; on
        the generic backend every byte took the copy path."""
        t = self.tcp_stats(side)
        total = sum(sizes)
        self.assertEqual(t["placed_bytes"] + t["copied_bytes"], total, t)
        # (msg_no_buffer may count: a sender without credit probes with a byte of the next
        # message, which has no buffer yet and is dropped.)
        self.assertEqual(t["msg_bad"], 0, t)
        truncated = [n for n in sizes if buf is not None and n > buf]
        self.assertEqual(t["msg_truncated"], len(truncated), t)
        nic = self.nic(side)
        c = nic["counters"]
        if self.backend(side) == "generic":
            self.assertEqual(nic["backend"], "generic", nic)
            self.assertEqual((t["placed_bytes"], t["copied_bytes"]), (0, total), t)
            self.assertEqual(c["nic_rx_message"], 0, c)
            return
        self.assertEqual(nic["backend"], "cleave", nic)
        # What may be copied: the deferred tails of truncated messages, no more.
        tails = sum(n - buf + MSS for n in truncated)
        self.assertLessEqual(t["copied_bytes"], tails, (t, self.defers(side)))
        # The flow path's own count: bytes it wrote (a tail past its buffer is not written).
        self.assertLessEqual(self.d[side].stats()["flows"]["rx_copied_bytes"], t["copied_bytes"])
        if not truncated:
            self.assertEqual((t["placed_bytes"], t["copied_bytes"]), (total, 0), t)
            self.assertEqual(c["nic_defer_ms_overflow"], 0, c)
        else:
            self.assertGreater(c["nic_defer_ms_overflow"], 0, c)
        # The NIC placed them itself, by message number and offset.
        self.assertGreaterEqual(c["nic_rx_placed_bytes"], t["placed_bytes"], c)
        self.assertGreaterEqual(c["nic_rx_message"], len(sizes), c)
        self.assertEqual(c["nic_defer_bad_l4_header"], 0, c)

    def test_mixed_a_to_b(self):
        s, r, sizes = self.messages("a", "b", 5101, 21, COUNT, 1, MIB)
        self.assertEqual((min(sizes), max(sizes) > MIB // 2), (1, True))  # the range is covered
        self.assertEqual((r["received"], r["truncated"]), (s["sent"], 0), r)
        self.assertEqual(r["received_sha256"], s["sent_sha256"])
        self.assert_placement("b", sizes)

    def test_mixed_b_to_a(self):
        s, r, sizes = self.messages("b", "a", 5102, 22, COUNT, 1, MIB)
        self.assertEqual((r["received"], r["truncated"]), (s["sent"], 0), r)
        self.assertEqual(r["received_sha256"], s["sent_sha256"])
        self.assert_placement("a", sizes)

    def test_both_ways_on_one_flow(self):
        n_ab, n_ba = COUNT // 4, COUNT // 4 + 7
        rx = self.listen("b", 5106, "--messages", n_ba, "--recv", "--seed", 32)
        tx = self.tool("a", "--connect", f"{c2c.IP['b']}:5106", "--messages", n_ab, "--recv",
                       "--seed", 31)
        ra, rb = self.result(tx), self.result(rx)
        self.assert_clean(ra)
        self.assert_clean(rb)
        a, b = ra[1], rb[1]
        for s, r, seed, n in ((a, b, 31, n_ab), (b, a, 32, n_ba)):
            sizes = msg_sizes(seed, n, 1, MIB)
            self.assertEqual((s["messages_sent"], r["messages_received"], r["truncated"]),
                             (n, n, 0), (s, r))
            self.assertEqual(r["received_sha256"], cleave_pattern.sha256(seed, sum(sizes)))
            self.assertEqual(r["received_sha256"], s["sent_sha256"])
            self.assertEqual(r["received_lengths_sha256"], lengths_sha256(sizes))
        self.assert_placement("b", msg_sizes(31, n_ab, 1, MIB))
        self.assert_placement("a", msg_sizes(32, n_ba, 1, MIB))


class CleaveToCleave(Msg, ct.TestCase):
    backend_a = "cleave"

    def test_short_buffers_truncate_exactly_the_long_messages(self):
        seed, count, buf = 23, 400, 3000
        s, r, sizes = self.messages("a", "b", 5103, seed, count, 1, 64 << 10, buf=buf)
        long_ones = sum(n > buf for n in sizes)
        self.assertGreater(long_ones, 50)
        self.assertLess(long_ones, count - 50)
        self.assertEqual(r["truncated"], long_ones, r)
        # Each truncated message left its first buf bytes and nothing else: the next message
        # started whole in the next buffer.
        self.assertEqual(r["received"], sum(min(n, buf) for n in sizes), r)
        self.assertEqual(r["received_sha256"], truncated_sha256(seed, sizes, buf))
        self.assert_placement("b", sizes, buf)

    def test_messages_as_long_as_the_buffer_are_not_truncated(self):
        s, r, sizes = self.messages("a", "b", 5107, 24, 50, 4096, 4096, buf=4096)
        self.assertEqual(set(sizes), {4096})
        self.assertEqual((r["truncated"], r["received"]), (0, 50 * 4096), r)
        self.assertEqual(r["received_sha256"], s["sent_sha256"])
        self.assert_placement("b", sizes, 4096)

    def test_message_connect_to_linux_is_refused(self):
        ct.sh(["ip", "addr", "add", KERNEL_IP + "/24", "dev", self.net.vb], ns=self.net.b)
        port = 5104
        # A Linux listener in namespace b, on the kernel's address: it accepts what comes.
        srv = subprocess.Popen(
            ["ip", "netns", "exec", self.net.b, "python3", "-c",
             "import socket,sys\n"
             f"s=socket.create_server(('{KERNEL_IP}',{port}))\n"
             "print('ready',flush=True)\n"
             "s.settimeout(20)\n"
             "try:\n"
             "  c,_=s.accept(); c.settimeout(5); print('accepted',flush=True); c.recv(1)\n"
             "except OSError as e: print('end',e,flush=True)\n"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        def end(p=srv):
            if p.poll() is None:
                p.kill()
            p.communicate()
        ct._cleanups.append(end)
        self.assertEqual(srv.stdout.readline().strip(), "ready")
        tx = self.tool("a", "--connect", f"{KERNEL_IP}:{port}", "--messages", 1)
        code, r, err = self.result(tx)
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual((r["error"], r["close_status"]), (CL_EPROTONOSUPPORT, CL_EPROTONOSUPPORT),
                         self.why(err, r))
        self.assertEqual(r["messages_sent"], 0)
        self.assertEqual(self.live_flows("a"), [])

    def test_stream_connect_to_message_listener_is_refused(self):
        rx = self.listen("b", 5105, "--messages", 0, "--recv", "--timeout", 10)
        tx = self.tool("a", "--connect", f"{c2c.IP['b']}:5105", "--send", 1000)
        code, r, err = self.result(tx)
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual(r["error"], CL_ECONNREFUSED, self.why(err, r))
        self.assertEqual(r["sent"], 0)
        # The listener took no flow from it and still waits: a message-mode connect is accepted.
        tx = self.tool("a", "--connect", f"{c2c.IP['b']}:5105", "--messages", 5, "--seed", 9)
        res_tx, res_rx = self.result(tx), self.result(rx)
        self.assert_clean(res_tx)
        self.assert_clean(res_rx)
        self.assertEqual(res_rx[1]["messages_received"], 5, res_rx[1])
        self.assertEqual(res_rx[1]["received_sha256"], res_tx[1]["sent_sha256"])


class GenericToCleave(Msg, ct.TestCase):
    backend_a = "generic"


if __name__ == "__main__":
    if not os.access(c2c.TOOL, os.X_OK):
        print(f"skipped: {c2c.TOOL} is not built", flush=True)
        raise SystemExit(ct.SKIP)
    ct.main()
