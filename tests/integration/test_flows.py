#!/usr/bin/python3
"""test_flows.py - TCP flows through cleaved, with the Linux kernel as the peer that judges them.

Namespace a holds cleaved on a veth, namespace b the kernel at 10.99.0.2. The app is rawapp (the
ABI spoken byte by byte, version 2: listen, connect, flow requests, events), so this also checks
the wire contract independently of libcleave. Each case runs on both NIC backends: the cleave
backend (net_cleave over net_af_packet: zero-copy placement by the NIC model) and the generic
backend (net_af_packet itself, placement in software).
  - kernel client -> cleave listener: N bytes, sha256 equal, accepted / peer closed / closed;
  - cleave connect -> kernel server: N bytes, sha256 equal, a clean close both ways;
  - a SYN to a port nobody listens on is refused with RST (ConnectionRefusedError);
  - connect to a closed kernel port: refused event with CL_ECONNREFUSED.
CLEAVE_FLOW_BYTES sets N (default 32 MiB).
"""

import hashlib
import os

import cleavetest as ct
import flowcase
import rawapp as ra

N = int(os.environ.get("CLEAVE_FLOW_BYTES", 32 << 20))
CHUNK = 1 << 20
CONFIG = ct.CONFIG_HEAD + """ports:
  - name: p0
    device: %(device)s
    mac: 02:00:00:00:00:01
    ipv4: 10.99.0.1/24
"""
PEER = 0x0A630002  # 10.99.0.2

KERNEL_SEND = """
import hashlib, socket, sys
n = int(sys.argv[1])
s = socket.create_connection(('10.99.0.1', int(sys.argv[2])), timeout=20)
h = hashlib.sha256()
block = bytes(range(256)) * 4096
sent = 0
while sent < n:
    b = block[:min(len(block), n - sent)]
    s.sendall(b)
    h.update(b)
    sent += len(b)
s.shutdown(socket.SHUT_WR)
assert s.recv(1) == b''
print(sent, h.hexdigest(), flush=True)
"""

KERNEL_RECV = """
import hashlib, socket
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(('10.99.0.2', 5002))
l.listen()
print('listening', flush=True)
c, _ = l.accept()
c.settimeout(20)
h = hashlib.sha256()
n = 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
c.close()
print(n, h.hexdigest(), flush=True)
"""


class FlowTest(flowcase.FlowCase):
    def start(self, backend):
        self.start_app("f", backend, CONFIG)
        self.assertEqual(self.app.version, 2)

    def events(self, evs):
        return [c["opcode"] for c in evs]

    def receive(self, backend):
        self.start(backend)
        st, _ = self.app.listen(5001, self.cq.id)
        self.assertEqual(st, 0)
        self.assertEqual(self.app.listen(5001, self.cq.id)[0], ra.EADDRINUSE)
        peer = self.kernel(KERNEL_SEND, N, 5001)
        nbuf = 4
        h, got, flow, evs, done = hashlib.sha256(), 0, None, [], False
        for c in self.completions():
            if c["flags"] & ra.COMP_EVENT:
                if c["opcode"] == ra.EV_DATA:
                    continue
                evs.append(c)
                if c["opcode"] == ra.EV_ACCEPTED:
                    flow = c["flow"]
                    for i in range(nbuf):
                        self.post(ra.OP_FLOW_RECV, flow, i, i * CHUNK, CHUNK)
                elif c["opcode"] == ra.EV_PEER_CLOSED:
                    self.post(ra.OP_FLOW_CLOSE, flow)
                elif c["opcode"] == ra.EV_CLOSED:
                    break
            elif c["opcode"] == ra.OP_FLOW_RECV:
                self.assertEqual(c["status"], 0, c)
                off = (c["wr_id"] % nbuf) * CHUNK
                h.update(self.app.heap(off, c["length"]))
                got += c["length"]
                if c["length"] == CHUNK and not done:
                    self.post(ra.OP_FLOW_RECV, flow, c["wr_id"] + nbuf, off, CHUNK)
                else:
                    done = True  # the stream ended in this buffer
        out, err = peer.communicate(timeout=30)
        self.assertEqual(peer.returncode, 0, err)
        sent, digest = out.split()
        self.assertEqual(got, int(sent))
        self.assertEqual(h.hexdigest(), digest)
        self.assertEqual(self.events(evs), [ra.EV_ACCEPTED, ra.EV_PEER_CLOSED, ra.EV_CLOSED])
        self.assertEqual(evs[-1]["status"], 0)
        return self.d.stats()

    def send(self, backend):
        self.start(backend)
        peer = self.kernel(KERNEL_RECV)
        self.assertEqual(peer.stdout.readline().strip(), "listening")
        window = 8
        pattern = os.urandom(window * CHUNK)
        self.app.write_heap(0, pattern)
        st, flow = self.app.connect(PEER, 5002, self.cq.id)
        self.assertEqual(st, 0)
        h, sent, acked, evs = hashlib.sha256(), 0, 0, []

        def send_next():
            nonlocal sent
            off = sent % len(pattern)
            self.post(ra.OP_FLOW_SEND, flow, sent, off, CHUNK)
            h.update(pattern[off:off + CHUNK])
            sent += CHUNK

        for c in self.completions():
            if c["flags"] & ra.COMP_EVENT:
                evs.append(c)
                if c["opcode"] == ra.EV_CONNECTED:
                    # A receive buffer, so the peer's FIN finds an open window.
                    self.post(ra.OP_FLOW_RECV, flow, 1 << 40, len(pattern), 4096)
                    for _ in range(window):
                        send_next()
                elif c["opcode"] in (ra.EV_CLOSED, ra.EV_REFUSED):
                    break
            elif c["opcode"] == ra.OP_FLOW_SEND:
                self.assertEqual(c["status"], 0, c)
                self.assertEqual(c["length"], CHUNK)
                acked += CHUNK
                if sent < N:
                    send_next()
                elif acked == N:
                    self.post(ra.OP_FLOW_CLOSE, flow)
            elif c["opcode"] == ra.OP_FLOW_RECV:
                self.assertEqual((c["status"], c["length"]), (0, 0))  # the end of the stream
        out, err = peer.communicate(timeout=30)
        self.assertEqual(peer.returncode, 0, err)
        n, digest = out.split()
        self.assertEqual(int(n), N)
        self.assertEqual(digest, h.hexdigest())
        self.assertEqual(self.events(evs), [ra.EV_CONNECTED, ra.EV_PEER_CLOSED, ra.EV_CLOSED])
        self.assertEqual(evs[-1]["status"], 0)
        return self.d.stats()

    def refused(self, backend):
        self.start(backend)
        r = ct.sh(["ip", "netns", "exec", self.net.b, "python3", "-c",
                   "import socket\ntry:\n socket.create_connection(('10.99.0.1', 5999), timeout=5)\n"
                   "except ConnectionRefusedError:\n print('refused')"])
        self.assertEqual(r.stdout.strip(), "refused")
        self.assertGreaterEqual(self.d.stats()["drops"]["tcp_no_flow"], 1)
        st, flow = self.app.connect(PEER, 5999, self.cq.id)
        self.assertEqual(st, 0)
        c = next(self.completions(timeout=10))
        self.assertEqual((c["flags"], c["opcode"], c["flow"], c["status"]),
                         (ra.COMP_EVENT, ra.EV_REFUSED, flow, ra.ECONNREFUSED))

    def test_kernel_to_cleave_cleave_backend(self):
        self.receive("cleave")

    def test_kernel_to_cleave_generic_backend(self):
        self.receive("generic")

    def test_cleave_to_kernel_cleave_backend(self):
        self.send("cleave")

    def test_cleave_to_kernel_generic_backend(self):
        self.send("generic")

    def test_refused_both_ways_cleave_backend(self):
        self.refused("cleave")

    def test_refused_both_ways_generic_backend(self):
        self.refused("generic")


if __name__ == "__main__":
    ct.main()
