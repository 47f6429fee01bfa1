#!/usr/bin/python3
"""test_datagram.py - UDP datagrams through cleaved by a plugin's claim, a Linux socket the peer.

Namespace a holds cleaved on a veth with the example datagram plugin loaded
(tests/plugin/datagram_transport.cc: it claims UDP 9000-9015), namespace b a Linux UDP socket at
10.99.0.2. The app is rawapp (the app socket's ABI byte by byte). On both NIC backends (net_cleave
over net_af_packet, and net_af_packet itself):
  - Linux to a listener: the app listens on UDP 9000 through the plugin; Linux's first datagram
    opens the flow (accepted), the app posts buffers and says "ready"; Linux then sends datagrams
    of sizes from 1 to 1400 bytes, the app checks each one's bytes and sends it back, and Linux
    checks what comes back: both directions, every byte;
  - the app connects to a Linux socket: its local port is one the plugin claims, its datagrams
    reach Linux intact (Linux checks their UDP checksum, which the NIC filled in) and Linux's
    answers to that port reach the app;
  - a listen on a UDP port the plugin does not claim is refused (CL_EINVAL); a datagram to a
    claimed port nobody listens on is dropped as udp_no_flow, one to a port nobody claims goes
    to no transport (no_handler: these configurations have no exception tap).
"""

import hashlib
import os

import cleavetest as ct
import flowcase
import rawapp as ra

PLUGIN = os.environ.get("CLEAVE_TEST_PLUGIN", "")
OURS, PEER_IP = "10.99.0.1", "10.99.0.2"
PEER = 0x0A630002
SIZES = [1, 7, 64, 100, 511, 512, 1000, 1400, 3, 1399]
BUF = 2048  # each receive buffer: longer than any datagram here
CONFIG = ct.CONFIG_HEAD + """transports:
  plugins: [%(plugin)s]
""" + ct.port_yaml("%(device)s", "02:00:00:00:00:01", OURS)


def payload(i):
    """Datagram i's bytes: sha256 blocks of its index, SIZES[i % len] long."""
    n = SIZES[i % len(SIZES)]
    out = b""
    while len(out) < n:
        out += hashlib.sha256(f"{i}/{len(out)}".encode()).digest()
    return out[:n]


PAYLOAD_PY = """
import hashlib
SIZES = %r
def payload(i):
    n = SIZES[i %% len(SIZES)]
    out = b""
    while len(out) < n:
        out += hashlib.sha256(f"{i}/{len(out)}".encode()).digest()
    return out[:n]
""" % (SIZES,)

# Linux's side of a listener: "open" until the app says "ready" (UDP promises nothing, so the
# first datagram may be lost), then every payload, then every echo checked.
KERNEL_TO_LISTENER = PAYLOAD_PY + """
import socket, sys
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('10.99.0.2', 0))
s.settimeout(0.05)
for _ in range(2000):
    s.sendto(b"open", ('10.99.0.1', 9000))
    try:
        d, a = s.recvfrom(4096)
    except socket.timeout:
        continue
    if d == b"ready":
        break
else:
    sys.exit("the app never said ready")
s.settimeout(20)
for i in range(n):
    s.sendto(payload(i), ('10.99.0.1', 9000))
got = []
while len(got) < n:
    d, a = s.recvfrom(4096)
    assert a == ('10.99.0.1', 9000), a
    got.append(d)
assert sorted(got) == sorted(payload(i) for i in range(n)), "echoes differ"
print("echoed", n, flush=True)
"""

# Linux's side of an app's connect: echoes n datagrams to where they came from.
KERNEL_SERVER = """
import socket, sys
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(('10.99.0.2', 5003))
s.settimeout(20)
print("listening", flush=True)
ports = set()
for _ in range(n):
    d, a = s.recvfrom(4096)
    ports.add(a[1])
    s.sendto(d, a)
print(*sorted(ports), flush=True)
"""


class DatagramTest(flowcase.FlowCase):
    def start(self, backend):
        if not PLUGIN:
            self.skipTest("CLEAVE_TEST_PLUGIN is not set (run through meson test)")
        self.start_app("d", backend, CONFIG, plugin=PLUGIN)

    def send_from(self, flow, offset, data, wr_id):
        """Sends `data` from the heap at `offset` (a send buffer apart from the receive ones)."""
        self.app.write_heap(offset, data)
        self.post(ra.OP_FLOW_SEND, flow, wr_id, offset, len(data))

    def kernel_to_listener(self, backend, n=40):
        self.start(backend)
        st, _ = self.app.listen(9000, self.cq.id, transport=b"datagram")
        self.assertEqual(st, 0)
        peer = self.kernel(KERNEL_TO_LISTENER, n)
        nbuf, send_at = 64, 64 * BUF
        flow, got, sends_done, sent = None, [], 0, 0
        for c in self.completions():
            if c["flags"] & ra.COMP_EVENT:
                self.assertEqual(c["opcode"], ra.EV_ACCEPTED, c)
                self.assertIsNone(flow, "one peer, one flow")
                flow = c["flow"]
                for i in range(nbuf):
                    self.post(ra.OP_FLOW_RECV, flow, i, i * BUF, BUF)
                self.send_from(flow, send_at, b"ready", 1 << 40)
                sent += 1
            elif c["opcode"] == ra.OP_FLOW_RECV:
                self.assertEqual(c["status"], 0, c)
                data = self.app.heap(c["wr_id"] * BUF, c["length"])
                self.post(ra.OP_FLOW_RECV, flow, c["wr_id"], c["wr_id"] * BUF, BUF)
                if data == b"open":
                    continue  # Linux's knocks before it heard "ready"
                self.assertEqual(data, payload(len(got)), f"datagram {len(got)}")
                # Echo it from a send buffer of its own: the plugin completes a send when it
                # hands it to the NIC, which may read the buffer later (it is never reused here).
                self.send_from(flow, send_at + (1 + len(got)) * BUF, data, len(got))
                got.append(data)
                sent += 1
            elif c["opcode"] == ra.OP_FLOW_SEND:
                self.assertEqual(c["status"], 0, c)
                sends_done += 1
                if len(got) == n and sends_done == sent:
                    break
        out, err = peer.communicate(timeout=30)
        self.assertEqual(peer.returncode, 0, err)
        self.assertEqual(out.strip(), f"echoed {n}")
        return self.d.stats()

    def app_to_kernel(self, backend, n=20):
        self.start(backend)
        peer = self.kernel(KERNEL_SERVER, n)
        self.assertEqual(peer.stdout.readline().strip(), "listening")
        st, flow = self.app.connect(PEER, 5003, self.cq.id, transport=b"datagram")
        self.assertEqual(st, 0)
        nbuf, send_at = 32, 32 * BUF
        got = []
        for c in self.completions():
            if c["flags"] & ra.COMP_EVENT:
                self.assertEqual((c["opcode"], c["flow"]), (ra.EV_CONNECTED, flow), c)
                for i in range(nbuf):
                    self.post(ra.OP_FLOW_RECV, flow, i, i * BUF, BUF)
                for i in range(n):
                    self.send_from(flow, send_at + i * BUF, payload(i), 1000 + i)
            elif c["opcode"] == ra.OP_FLOW_RECV:
                self.assertEqual(c["status"], 0, c)
                got.append(self.app.heap(c["wr_id"] * BUF, c["length"]))
                if len(got) == n:
                    break
            elif c["opcode"] == ra.OP_FLOW_SEND:
                self.assertEqual(c["status"], 0, c)
        self.assertEqual(sorted(got), sorted(payload(i) for i in range(n)))
        out, err = peer.communicate(timeout=30)
        self.assertEqual(peer.returncode, 0, err)
        port = int(out.strip())  # one flow, one source port: one the plugin claims
        self.assertIn(port, range(9000, 9016))
        row = self.d.ctl("flow", "show", str(flow))[1]
        self.assertEqual((row["transport"], row["local"], row["remote"]),
                         ("datagram", f"{OURS}:{port}", f"{PEER_IP}:5003"))

    def test_kernel_to_listener_cleave_backend(self):
        self.kernel_to_listener("cleave")

    def test_kernel_to_listener_generic_backend(self):
        self.kernel_to_listener("generic")

    def test_app_to_kernel_cleave_backend(self):
        self.app_to_kernel("cleave")

    def test_app_to_kernel_generic_backend(self):
        self.app_to_kernel("generic")

    def test_only_claimed_ports(self):
        self.start("generic")
        self.assertEqual(self.app.listen(7, self.cq.id, transport=b"datagram")[0], ra.EINVAL)
        self.assertEqual(self.app.listen(9015, self.cq.id, transport=b"datagram")[0], 0)
        before = self.d.stats()["drops"]
        ct.sh(["python3", "-c", "import socket\ns = socket.socket(socket.AF_INET, "
               "socket.SOCK_DGRAM)\nfor p in (9016, 9014):\n"
               f"    s.sendto(b'x', ('{OURS}', p))"], ns=self.net.b)
        # 9014 is claimed and nobody listens: no flow; 9016 is nobody's: no handler.
        ct.wait_until(lambda: self.d.stats()["drops"]["udp_no_flow"] == before["udp_no_flow"] + 1
                      and self.d.stats()["drops"]["no_handler"] == before["no_handler"] + 1,
                      what="both datagrams to be counted")


if __name__ == "__main__":
    ct.main()
