#!/usr/bin/python3
"""test_flow_limits.py - what an app, or the wire, may take of the flow path, with the Linux
kernel as the peer.

Namespace a holds cleaved (net_cleave over net_af_packet on a veth), namespace b the kernel at
10.99.0.2. The app is rawapp (the ABI byte by byte).
  - quota.flows: connects and QPs past it fail with CL_EDQUOT, counted per app and in all; a
    kernel connect to a listener of an app at its quota is not accepted (SYN cookie, its ACK
    dropped: listen overflow) until the app closes a flow, then it is;
  - a flood of 2000 spoofed SYNs at a listener: half-open flows stay within half the app's
    quota, the rest get SYN cookies, and a real connect right after succeeds at once and moves
    data;
  - TIME-WAIT outlives the app: the app closes, TIME-WAIT begins, the app exits, and the
    kernel's retransmitted FIN (our ACK of it dropped by tc on its side) gets ACKs, never a RST.
"""

import os
import random
import socket
import struct
import subprocess
import time

import cleavetest as ct
import rawapp as ra

CONFIG = ct.CONFIG_HEAD + """apps:
  quota:
    flows: %(flows)d
  allow:
    - uid: 0
ports:
  - name: p0
    device: %(device)s
    mac: 02:00:00:00:00:01
    ipv4: 10.99.0.1/24
"""
CLEAVE_NIC = "net_cleave0,wire=net_af_packet0,wire_args=iface=%s"
# The generic backend, its frames through the kernel's qdisc (tc can drop some of them).
GENERIC_QDISC = "net_af_packet0,iface=%s,qdisc_bypass=0"
PEER = 0x0A630002  # 10.99.0.2

# A kernel server on 5002: accepts, and closes each connection when the peer has closed it and
# a line arrives on stdin (so the test can act in between).
KERNEL_SERVER = """
import socket, sys, threading
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('10.99.0.2', 5002))
l.listen(64)
print('listening', flush=True)
def serve(c):
    while c.recv(65536):
        pass
    print('eof', flush=True)
    sys.stdin.readline()
    c.close()
    print('closed', flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""

# A kernel client of 10.99.0.1:PORT: connects (within TIMEOUT s), sends N bytes, and waits for
# the end of the stream; prints the seconds the connect took.
KERNEL_CLIENT = """
import socket, sys, time
port, n, timeout = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
t0 = time.monotonic()
s = socket.create_connection(('10.99.0.1', port), timeout=timeout)
print('connected %.3f' % (time.monotonic() - t0), flush=True)
s.settimeout(60)
s.sendall(bytes(range(256)) * (n // 256))
s.shutdown(socket.SHUT_WR)
assert s.recv(1) == b''
print('done', flush=True)
"""

# Spoofed SYNs from 10.99.0.10-250 (each from its own port) to 10.99.0.1:PORT, raw socket.
SYN_FLOOD = """
import random, socket, struct, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
def csum(b):
    if len(b) % 2:
        b += b'\\0'
    s = sum(struct.unpack('!%dH' % (len(b) // 2), b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF
r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
dst = socket.inet_aton('10.99.0.1')
rnd = random.Random(7)
for i in range(count):
    src = socket.inet_aton('10.99.0.%d' % rnd.randint(10, 250))
    opts = struct.pack('!BBH', 2, 4, 1460)
    tcp = struct.pack('!HHIIBBHHH', 1024 + i, port, rnd.getrandbits(32), 0,
                      (5 + len(opts) // 4) << 4, 0x02, 64240, 0, 0) + opts
    c = csum(src + dst + struct.pack('!BBH', 0, 6, len(tcp)) + tcp)
    tcp = tcp[:16] + struct.pack('!H', c) + tcp[18:]
    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(tcp), i & 0xFFFF, 0, 64, 6, 0, src, dst)
    r.sendto(ip + tcp, ('10.99.0.1', 0))
    if i % 50 == 49:
        time.sleep(0.002)  # about 20 K SYN/s: what a busy shared machine's af_packet ring takes
print('sent', count, flush=True)
"""


class FlowLimits(ct.TestCase):
    def start(self, flows, device=CLEAVE_NIC):
        self.net = ct.Net("l")
        self.d = ct.Daemon(CONFIG % {"flows": flows, "device": device % self.net.va},
                           ns=self.net.a)
        self.app = ra.RawApp(os.path.join(self.d.run_dir, "app.sock"), versions=(1, 3))
        self.assertEqual(self.app.status, 0)
        self.addCleanup(self.app.close)
        self.cq = self.app.create_pipe(ra.COMPLETION, 1024)
        self.sq = self.app.create_pipe(ra.SUBMIT, 256, cq=self.cq.id)
        self.seen = []  # every completion consumed
        self.pending = []  # ...and those no wait_for() took yet

    def kernel(self, script, *args):
        p = subprocess.Popen(["ip", "netns", "exec", self.net.b, "python3", "-c", script] +
                             [str(a) for a in args], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def end():
            p.kill()
            p.communicate()
        self.addCleanup(end)
        return p

    def post(self, op, flow, wr_id=0, offset=0, length=0):
        self.assertTrue(self.sq.produce(ra.send_entry(op, wr_id=wr_id, offset=offset,
                                                      length=length, target=flow)))

    def wait_for(self, pred, timeout=30, what="a completion"):
        """The first completion, consumed earlier or now, for which pred(c) holds."""
        def step():
            for i, c in enumerate(self.pending):
                if pred(c):
                    return self.pending.pop(i)
            while (c := self.cq.consume()) is not None:
                self.seen.append(c)
                if pred(c):
                    return c
                self.pending.append(c)
            return None
        return ct.wait_until(step, timeout=timeout, interval=0.0005, what=what)

    def event(self, opcode, flow=None, timeout=30):
        return self.wait_for(lambda c: c["flags"] & ra.COMP_EVENT and c["opcode"] == opcode and
                             (flow is None or c["flow"] == flow), timeout,
                             f"event {opcode} on flow {flow}")

    def tcp_stats(self):
        stats = self.d.transport_stats("tcp")
        self.assertIsNotNone(stats, "no tcp transport")
        return stats

    def app_counters(self):
        apps = self.d.ctl("app", "list")[1]["apps"]
        self.assertEqual(len(apps), 1)
        return apps[0]["counters"], apps[0]["flows_quota"]

    def test_quota_bounds_connects_qps_and_accepts(self):
        self.start(flows=4)
        server = self.kernel(KERNEL_SERVER)
        self.assertEqual(server.stdout.readline().strip(), "listening")
        flows = []
        for _ in range(4):
            st, f = self.app.connect(PEER, 5002, self.cq.id)
            self.assertEqual(st, 0)
            flows.append(f)
        for f in flows:
            self.event(ra.EV_CONNECTED, f)
        self.assertEqual(self.app.connect(PEER, 5002, self.cq.id)[0], ra.EDQUOT)
        self.assertEqual(self.app.qp_create(self.cq.id)[0], ra.EDQUOT)
        c, quota = self.app_counters()
        self.assertEqual((c["flows"], c["flows_over_quota"], quota), (4, 2, 4))
        self.assertEqual(self.d.stats()["flows"]["flows_over_quota"], 2)

        # An accepted flow counts too: at its quota the app hears of no new connection. The
        # kernel's SYN gets a cookie and its connect completes, but the handshake's ACK finds no
        # room (a listen overflow) and the connection waits at the kernel's side.
        st, listener = self.app.listen(5001, self.cq.id)
        self.assertEqual(st, 0)
        client = self.kernel(KERNEL_CLIENT, 5001, 4096, 10)
        self.assertTrue(client.stdout.readline().startswith("connected"))
        ct.wait_until(lambda: self.tcp_stats()["listen_overflows"] >= 1,
                      what="the handshake's ACK dropped for the quota")
        self.assertGreaterEqual(self.tcp_stats()["syncookies_sent"], 1)
        self.assertFalse(any(e["flags"] & ra.COMP_EVENT and e["opcode"] == ra.EV_ACCEPTED
                             for e in self.seen + list(iter(self.cq.consume, None))))
        self.assertEqual(self.app_counters()[0]["flows"], 4)

        # The app closes a flow: once it is closed (TIME-WAIT is not the app's), the waiting
        # connection is accepted from its cookie, and its data arrives.
        self.post(ra.OP_FLOW_RECV, flows[0], 1, 65536, 4096)  # a window for the kernel's FIN
        self.post(ra.OP_FLOW_CLOSE, flows[0])
        self.assertEqual(server.stdout.readline().strip(), "eof")
        server.stdin.write("\n")
        server.stdin.flush()
        self.event(ra.EV_CLOSED, flows[0])
        acc = self.event(ra.EV_ACCEPTED, timeout=60)
        self.assertEqual(acc["wr_id"], listener)
        self.assertGreaterEqual(self.tcp_stats()["syncookies_recv"], 1)
        self.post(ra.OP_FLOW_RECV, acc["flow"], 1, 0, 8192)
        got = self.wait_for(lambda c: not c["flags"] & ra.COMP_EVENT and
                            c["opcode"] == ra.OP_FLOW_RECV and c["flow"] == acc["flow"],
                            what="the kernel's bytes")
        self.assertEqual((got["status"], got["length"]), (0, 4096))
        self.assertEqual(self.app.heap(0, 4096), bytes(range(256)) * 16)
        self.assertEqual(self.app_counters()[0]["flows"], 4)

    def test_syn_flood_leaves_room_for_real_connections(self):
        self.start(flows=64)
        st, _ = self.app.listen(5001, self.cq.id)
        self.assertEqual(st, 0)
        flood = self.kernel(SYN_FLOOD, 5001, 2000)
        out, err = flood.communicate(timeout=60)
        self.assertEqual(flood.returncode, 0, err)
        # Most of them reach TCP (a loaded host's af_packet ring may drop a few).
        ct.wait_until(lambda: self.d.stats()["flows"]["rx_segments"] >= 1500, timeout=30,
                      what="the spoofed SYNs handed to TCP")
        flood_segs = self.d.stats()["flows"]["rx_segments"]

        # A real client now: it connects (through a cookie) and moves its data. Without cookies
        # the half-open flows hold the listener for about two minutes; 20 s only bounds a hang,
        # so a slow, loaded host does not fail this (the connect time is printed, not judged).
        client = self.kernel(KERNEL_CLIENT, 5001, 1 << 20, 20)
        line = client.stdout.readline()
        self.assertTrue(line.startswith("connected"), client.stderr.read() if not line else line)
        acc = self.event(ra.EV_ACCEPTED)
        flow, got, off = acc["flow"], 0, 0
        for i in range(4):
            self.post(ra.OP_FLOW_RECV, flow, i, i * 65536, 65536)
        nxt = 4
        while got < 1 << 20:
            c = self.wait_for(lambda c: c["flow"] == flow and c["opcode"] == ra.OP_FLOW_RECV and
                              not c["flags"] & ra.COMP_EVENT)
            self.assertEqual(c["status"], 0)
            self.assertNotEqual(c["length"], 0)
            got += c["length"]
            if c["length"] == 65536:
                self.post(ra.OP_FLOW_RECV, flow, nxt, (nxt % 4) * 65536, 65536)
                nxt += 1
        self.assertEqual(got, 1 << 20)
        self.event(ra.EV_PEER_CLOSED, flow)
        self.post(ra.OP_FLOW_CLOSE, flow)
        self.assertEqual(client.stdout.readline().strip(), "done")
        # The flood's SYNs: half-open flows within half the quota, cookies for the rest.
        s = self.tcp_stats()
        self.assertGreaterEqual(s["syncookies_sent"], flood_segs - 32)
        # Each SYN (the real one too) made a half-open connection or found no room.
        self.assertGreaterEqual(s["syn_no_room"] + s["conn_opened"] - s["syncookies_recv"],
                                flood_segs + 1)
        self.assertGreaterEqual(s["syncookies_recv"], 1)
        self.assertLessEqual(self.app_counters()[0]["flows"], 32 + 1)

    def test_time_wait_outlives_the_app(self):
        self.start(flows=4, device=GENERIC_QDISC)
        server = self.kernel(KERNEL_SERVER)
        self.assertEqual(server.stdout.readline().strip(), "listening")
        st, flow = self.app.connect(PEER, 5002, self.cq.id)
        self.assertEqual(st, 0)
        self.event(ra.EV_CONNECTED, flow)
        self.post(ra.OP_FLOW_RECV, flow, 1, 0, 4096)  # a window for the kernel's FIN
        self.post(ra.OP_FLOW_CLOSE, flow)
        self.assertEqual(server.stdout.readline().strip(), "eof")
        # From now on cleave's bare ACKs (TCP flags 0x10 at IP offset 33) are lost on its way
        # out: tc puts them in a class whose token bucket is smaller than any frame. The kernel
        # never hears the ACK of its FIN and sends the FIN again and again (LAST-ACK).
        tc = ["ip", "netns", "exec", self.net.a, "tc"]
        dev = ["dev", self.net.va]
        ct.sh(tc + ["qdisc", "add"] + dev + ["root", "handle", "1:", "htb", "default", "10"])
        ct.sh(tc + ["class", "add"] + dev + ["parent", "1:", "classid", "1:10", "htb", "rate",
                                             "10gbit"])
        ct.sh(tc + ["class", "add"] + dev + ["parent", "1:", "classid", "1:20", "htb", "rate",
                                             "8bit"])
        ct.sh(tc + ["qdisc", "add"] + dev + ["parent", "1:20", "handle", "20:", "tbf", "rate",
                                             "8bit", "burst", "32", "limit", "1"])
        ct.sh(tc + ["filter", "add"] + dev + ["parent", "1:", "protocol", "ip", "prio", "1",
                                              "u32", "match", "ip", "protocol", "6", "0xff",
                                              "match", "u8", "0x10", "0xff", "at", "33",
                                              "flowid", "1:20"])
        server.stdin.write("\n")
        server.stdin.flush()
        self.assertEqual(server.stdout.readline().strip(), "closed")
        self.event(ra.EV_CLOSED, flow)
        # The app exits. TIME-WAIT is the daemon's: it stays.
        self.app.close()
        ct.wait_until(lambda: not self.d.ctl("app", "list")[1]["apps"], what="the app gone")
        segs = self.d.stats()["flows"]["rx_segments"]
        ct.wait_until(lambda: self.d.stats()["flows"]["rx_segments"] >= segs + 2,
                      what="the kernel's FIN sent twice more")
        self.assertEqual(self.d.stats()["flows"]["rst_sent"], 0)
        last_ack = ["ip", "netns", "exec", self.net.b, "ss", "-Htn", "state", "last-ack"]
        self.assertNotEqual(ct.sh(last_ack).stdout.strip(), "", "a RST ended the kernel's side")
        s = self.tcp_stats()
        self.assertEqual(s["time_wait_records"], 1)
        self.assertGreaterEqual(s["time_wait_acks"], 2)
        # Once the ACK gets through, the kernel's side closes, without a RST.
        ct.sh(tc + ["qdisc", "del"] + dev + ["root"])
        ct.wait_until(lambda: ct.sh(last_ack).stdout.strip() == "",
                      what="the kernel's LAST-ACK ended")
        self.assertEqual(self.d.stats()["flows"]["rst_sent"], 0)


if __name__ == "__main__":
    ct.main()
