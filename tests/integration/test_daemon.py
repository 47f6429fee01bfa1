#!/usr/bin/python3
"""test_daemon.py - cleaved on a veth (net_af_packet) with the Linux kernel as the peer.

Namespace a holds cleaved, namespace b the kernel at 10.99.0.2. Checks what an operator sees:
ping and ARP from Linux, next-hop resolution, cleavectl output field by field, drops by reason,
the exception tap carrying kernel traffic both ways, telemetry, SIGTERM shutdown, a second
instance refused, a broken management client.
"""

import json
import os
import socket
import tempfile
import subprocess
import time

import cleavetest as ct

OUR_MAC = "02:00:00:00:00:01"

CONFIG = ct.CONFIG_HEAD + """arp:
  retry_ms: 100
ports:
  - name: p0
    device: net_af_packet0,iface=%(va)s
    mac: %(mac)s
    ipv4: 10.99.0.1/24
    gateway: 10.99.0.2
    routes:
      - dst: 10.98.0.0/16
        via: 10.99.0.2
      - dst: 10.97.0.0/16
        via: 10.99.0.77
%(extra)s
"""


class DaemonTest(ct.TestCase):
    def start(self, extra="", iface=None, wait_ready=True):
        """cleaved on a fresh pair of namespaces; `extra` is appended to the port."""
        self.net = ct.Net("d")
        text = CONFIG % {"va": iface or self.net.va, "mac": OUR_MAC, "extra": extra}
        self.d = ct.Daemon(text, ns=self.net.a, wait_ready=wait_ready)
        return self.d

    def start_fails(self, **kw):
        """Starts cleaved expecting it to give up with exit code 1; returns its log."""
        d = self.start(wait_ready=False, **kw)
        self.assertEqual(d.proc.wait(timeout=15), 1)
        self.assertFalse(os.path.exists(d.socket))
        return d.logs()

    def test_kernel_pings_cleaved_and_learns_its_mac(self):
        d = self.start()
        before = d.stats()["icmp"]["echo_requests"]
        p = ct.sh(["ping", "-c", "10", "-i", "0.05", "-W", "1", "10.99.0.1"], ns=self.net.b)
        self.assertIn("10 received", p.stdout)
        neigh = json.loads(ct.sh(["ip", "-j", "neigh", "show", "10.99.0.1"], ns=self.net.b).stdout)
        self.assertEqual(neigh[0]["lladdr"], OUR_MAC)
        s = d.stats()
        self.assertEqual(s["icmp"]["echo_requests"] - before, 10)
        self.assertEqual(s["icmp"]["echo_replies"] - before, 10)
        self.assertGreaterEqual(s["ports"]["p0"]["rx_packets"], 10)
        self.assertGreaterEqual(s["ports"]["p0"]["tx_packets"], 10)
        lcore = s["lcores"][0]
        self.assertEqual(lcore["role"], "dataplane")
        self.assertGreater(lcore["iterations"], 0)
        self.assertGreater(lcore["busy_iterations"], 0)
        self.assertGreater(lcore["idle_cycles"], 0)

    def test_port_show_field_by_field(self):
        d = self.start()
        ct.sh(["ping", "-c", "3", "-i", "0.05", "10.99.0.1"], ns=self.net.b)
        _, ports, _ = d.ctl("port", "show")
        self.assertEqual(len(ports), 1)
        p = ports[0]
        self.assertEqual(p["name"], "p0")
        self.assertEqual(p["driver"], "net_af_packet")
        self.assertEqual(p["device"], f"net_af_packet0,iface={self.net.va}")
        self.assertEqual(p["mac"], OUR_MAC)
        self.assertEqual(p["mtu"], 1500)
        self.assertEqual(p["ipv4"], "10.99.0.1/24")
        self.assertEqual(p["gateway"], "10.99.0.2")
        self.assertEqual(p["routes"], [{"dst": "10.98.0.0/16", "via": "10.99.0.2"},
                                       {"dst": "10.97.0.0/16", "via": "10.99.0.77"}])
        self.assertIsNone(p["exception_tap"])
        self.assertTrue(p["link"]["up"])
        self.assertGreaterEqual(p["counters"]["rx_packets"], 3)
        self.assertGreaterEqual(p["counters"]["tx_packets"], 3)
        self.assertEqual(p["xstats"]["rx_good_packets"], p["counters"]["rx_packets"])
        # No faults configured: both directions off, nothing done.
        for direction in ("rx", "tx"):
            f = p["faults"][direction]
            self.assertEqual((f["enabled"], f["loss"], f["reorder"], f["duplicate"]),
                             (False, 0, 0, 0), f)
            self.assertEqual((f["dropped"], f["reordered"], f["duplicated"]), (0, 0, 0), f)
        # The kernel's own view of the veth agrees with the NIC counters (the MAC was applied).
        link = json.loads(ct.sh(["ip", "-j", "link", "show", self.net.va], ns=self.net.a).stdout)[0]
        self.assertEqual(link["address"], OUR_MAC)
        # By name, and an unknown name.
        self.assertEqual(d.ctl("port", "show", "p0")[1][0]["name"], "p0")
        code, _, err = d.ctl("port", "show", "nope", check=False)
        self.assertEqual(code, 1)
        self.assertIn("no port named 'nope'", err)

    def test_gateway_is_resolved_and_kept(self):
        d = self.start()
        entries = ct.wait_until(
            lambda: [e for e in d.ctl("arp", "show")[1]["entries"]
                     if e["ip"] == "10.99.0.2" and e["state"] == "reachable"],
            what="the gateway to resolve")
        self.assertEqual(entries[0]["mac"], self.net.peer_mac)
        self.assertTrue(entries[0]["pinned"])
        self.assertEqual(entries[0]["port"], "p0")

    def test_route_get_resolves_the_kernels_mac(self):
        d = self.start()
        _, r, _ = d.ctl("route", "get", "10.98.5.5")
        self.assertEqual(r["next_hop"], "10.99.0.2")
        self.assertEqual(r["kind"], "static")
        self.assertEqual(r["dst"], "10.98.0.0/16")
        self.assertEqual(r["port"], "p0")
        self.assertEqual(r["neighbour"]["state"], "reachable")
        self.assertEqual(r["neighbour"]["mac"], self.net.peer_mac)
        _, r, _ = d.ctl("route", "get", "192.0.2.1")
        self.assertEqual(r["kind"], "default")
        self.assertEqual(r["neighbour"]["mac"], self.net.peer_mac)
        # A next hop nobody answers for: retried, then reported failed, with no MAC.
        _, r, _ = d.ctl("route", "get", "10.97.1.1")
        self.assertEqual(r["next_hop"], "10.99.0.77")
        self.assertEqual(r["neighbour"]["state"], "failed")
        self.assertIsNone(r["neighbour"]["mac"])
        self.assertGreaterEqual(d.stats()["arp"]["failed"], 1)
        _, routes, _ = d.ctl("route", "show")
        self.assertEqual([(x["dst"], x["kind"]) for x in routes],
                         [("10.99.0.0/24", "connected"), ("10.98.0.0/16", "static"),
                          ("10.97.0.0/16", "static"), ("0.0.0.0/0", "default")])
        code, _, err = d.ctl("route", "get", "not-an-ip", check=False)
        self.assertEqual(code, 1)
        self.assertIn("not an IPv4 address", err)

    def test_unmatched_traffic_is_dropped_by_reason(self):
        d = self.start()
        before = d.stats()["drops"]
        # UDP to cleaved: no flow and no exception tap.
        ct.sh(["/usr/bin/python3", "-c",
               "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
               "for i in range(5): s.sendto(b'x'*100, ('10.99.0.1', 9999))"], ns=self.net.b)
        after = ct.wait_until(
            lambda: (lambda s: s if s["drops"]["no_handler"] - before["no_handler"] >= 5 else None)(
                d.stats()), what="no_handler drops")["drops"]
        self.assertEqual(after["no_handler"] - before["no_handler"], 5)
        self.assertEqual(after["ipv4_bad_checksum"], before["ipv4_bad_checksum"])

    def test_exception_tap_gives_the_kernel_unmatched_traffic(self):
        tap = f"clx{os.getpid() % 100000}"
        d = self.start(extra=f"    exception_tap: {tap}\n")
        a, b = self.net.a, self.net.b
        link = json.loads(ct.sh(["ip", "-j", "link", "show", tap], ns=a).stdout)[0]
        self.assertEqual(link["address"], OUR_MAC)  # the tap shares the port's MAC
        ct.sh(["ip", "addr", "add", "10.99.0.1/24", "dev", tap], ns=a)
        ct.sh(["ip", "link", "set", tap, "up"], ns=a)
        # A UDP echo server in the kernel behind cleaved, a client in the peer namespace.
        server = subprocess.Popen(
            ["ip", "netns", "exec", a, "/usr/bin/python3", "-c",
             "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
             "s.bind(('10.99.0.1', 7777))\n"
             "while True:\n  m, peer = s.recvfrom(2048); s.sendto(m.upper(), peer)"])
        ct._cleanups.append(lambda: (server.kill(), server.wait()))
        time.sleep(0.3)
        reply = ct.sh(["/usr/bin/python3", "-c",
                       "import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                       "s.settimeout(1)\n"
                       "for i in range(10):\n"
                       "  s.sendto(b'hello cleave', ('10.99.0.1', 7777))\n"
                       "  try: print(s.recv(100).decode()); break\n"
                       "  except OSError: pass"], ns=b)
        self.assertEqual(reply.stdout.strip(), "HELLO CLEAVE")
        s = d.stats()
        self.assertGreater(s["ports"]["p0"]["to_kernel"], 0)
        self.assertGreater(s["ports"]["p0"]["from_kernel"], 0)
        self.assertEqual(d.ctl("port", "show")[1][0]["exception_tap"], tap)
        # ICMP echo is still answered by cleaved itself.
        before = s["icmp"]["echo_requests"]
        ct.sh(["ping", "-c", "2", "-i", "0.05", "10.99.0.1"], ns=b)
        self.assertEqual(d.stats()["icmp"]["echo_requests"] - before, 2)
        # Stopping cleaved removes the tap.
        self.assertEqual(d.stop()[0], 0)
        self.assertNotEqual(ct.sh(["ip", "link", "show", tap], ns=a, check=False).returncode, 0)

    def telemetry(self, d, cmd):
        """Runs one command through DPDK's own client, dpdk-telemetry.py."""
        p = ct.sh(["dpdk-telemetry.py", "-f", d.prefix], input=cmd + "\n")
        line = [x for x in p.stdout.splitlines() if x.startswith("{")][-1]
        return json.loads(line)[cmd]

    def test_telemetry_commands(self):
        d = self.start()
        ct.sh(["ping", "-c", "2", "-i", "0.05", "10.99.0.1"], ns=self.net.b)
        status = self.telemetry(d, "/cleave/status")
        self.assertEqual(status["dataplane"]["state"], "running")
        self.assertEqual(status["ports"]["link_up"], 1)
        self.assertEqual(status["pid"], d.proc.pid)
        stats = self.telemetry(d, "/cleave/stats")
        self.assertGreaterEqual(stats["icmp"]["echo_requests"], 2)
        self.assertIn("no_handler", stats["drops"])
        ports = self.telemetry(d, "/cleave/ports")
        self.assertEqual(ports["p0"]["mac"], OUR_MAC)
        self.assertEqual(ports["p0"]["ipv4"], "10.99.0.1/24")
        self.assertEqual(ports["p0"]["link"]["up"], 1)

    # Within the systemd unit's TimeoutStopSec (5 s), past which systemd kills it.
    def test_sigterm_stops_cleanly_within_the_units_stop_timeout(self):
        d = self.start()
        code, took = d.stop()
        self.assertEqual(code, 0)
        self.assertLess(took, 5.0)
        self.assertFalse(os.path.exists(d.socket))
        logs = d.logs()
        self.assertIn("shutting down", logs)
        self.assertIn("cleaved stopped", logs)
        # The port is released: the veth still exists and the kernel can use it again.
        ct.sh(["ip", "link", "show", self.net.va], ns=self.net.a)

    def test_sigint_stops_too(self):
        d = self.start()
        code, took = d.stop(sig=2)
        self.assertEqual(code, 0)
        self.assertLess(took, 5.0)

    def test_second_instance_is_refused(self):
        d = self.start()
        p = ct.sh([ct.CLEAVED, "-c", d.config], ns=self.net.a, check=False, timeout=20)
        self.assertEqual(p.returncode, 1)
        self.assertRegex(p.stderr, r"another cleaved \(pid %d\) is already running" % d.proc.pid)
        self.assertEqual(d.ctl("status")[1]["dataplane"]["state"], "running")

    def test_log_level_changes_at_run_time(self):
        d = self.start()
        self.assertEqual(d.ctl("log", "level")[1]["level"], "info")
        self.assertEqual(d.ctl("log", "level", "debug")[1], {"level": "debug", "previous": "info"})
        self.assertEqual(d.ctl("status")[1]["log_level"], "debug")
        code, _, err = d.ctl("log", "level", "loud", check=False)
        self.assertEqual(code, 1)
        self.assertIn("unknown log level 'loud'", err)
        self.assertIn("log level changed from info to debug", d.logs())

    def test_status_fields(self):
        d = self.start()
        _, s, _ = d.ctl("status")
        self.assertEqual(s["daemon"], "cleaved")
        self.assertEqual(s["pid"], d.proc.pid)
        self.assertEqual(s["config"], d.config)
        self.assertEqual(s["runtime_dir"], d.run_dir)
        self.assertEqual(s["protocol"], 1)
        self.assertEqual(s["dataplane"], {"lcore": 1, "lcores": [1], "state": "running",
                                          "iterations": s["dataplane"]["iterations"]})
        self.assertEqual(s["ports"], {"total": 1, "link_up": 1})
        self.assertRegex(s["version"], r"^\d+\.\d+\.\d+$")

    def test_hostile_management_clients_do_not_hurt(self):
        d = self.start()
        for payload in (b"garbage\n", b"\xff\xfe\x00\n", b"{" * 70000, b'{"version":99}\n'):
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(d.socket)
            try:
                c.sendall(payload)
            except OSError:
                pass
            c.close()
        idle = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(70)]
        for c in idle:
            try:
                c.connect(d.socket)
            except OSError:
                pass
        self.assertEqual(d.ctl("status")[1]["dataplane"]["state"], "running")
        for c in idle:
            c.close()
        time.sleep(0.1)
        self.assertEqual(d.ctl("status")[1]["dataplane"]["state"], "running")

    def test_another_users_flood_cannot_close_a_request_being_sent(self):
        d = self.start()
        # uid 65534 reaches the socket as a member of its group would.
        os.chmod(d.dir, 0o755)
        os.chmod(d.socket, 0o666)
        req = b'{"version":1,"id":"slow","command":"status"}\n'
        slow = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        slow.settimeout(20)
        slow.connect(d.socket)
        slow.sendall(req[:12])  # root is sending its request when the flood comes
        path = d.socket

        def flood():
            held = []
            for _ in range(100):
                c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                c.connect(path)
                try:
                    c.sendall(b'{"version":1,')  # each one busy sending too
                except OSError:
                    pass  # refused already
                held.append(c)
            flood.held = held
            return len(held)

        child = ct.Nobody(flood)
        self.assertEqual(child.result(), 100)
        # 16 of them fit the user's cap; the others are refused or make room among its own.
        ct.wait_until(lambda: (lambda c: c["refused"] + c["evicted"])(
            d.ctl("status")[1]["control_socket"]) == 84, timeout=30,
            what="the flood's connections beyond its cap to be turned away")
        slow.sendall(req[12:])
        buf = b""
        while b"\n" not in buf:
            chunk = slow.recv(65536)
            self.assertTrue(chunk, "root's connection was closed")
            buf += chunk
        answer = json.loads(buf.split(b"\n")[0])
        self.assertEqual((answer["id"], answer["ok"]), ("slow", True))
        self.assertEqual(answer["result"]["control_socket"]["max_clients_per_uid"], 16)
        child.release()
        slow.close()

    def test_status_shows_the_sockets(self):
        d = self.start()
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(d.socket)
        try:
            c.sendall(b'{"version":1,"command":"log.get"}\n' + b"x" * 70000)
        except OSError:
            pass  # closed before it took the rest: the answers wait to be read
        got = b""
        try:
            while chunk := c.recv(65536):
                got += chunk
        except ConnectionResetError:
            pass
        c.close()
        lines = got.splitlines()
        self.assertEqual(len(lines), 2, got)
        self.assertTrue(json.loads(lines[0])["ok"])
        self.assertIn("longer than 65536 bytes", json.loads(lines[1])["error"]["message"])
        _, s, _ = d.ctl("status")
        self.assertEqual(s["control_socket"]["oversized"], 1)
        self.assertGreaterEqual(s["control_socket"]["requests"], 2)
        self.assertEqual(s["app_socket"]["apps"], 0)
        p = subprocess.run([ct.CLEAVECTL, "-s", d.socket, "status"], capture_output=True,
                           text=True, timeout=20)
        self.assertRegex(p.stdout, r"control +\d+ clients \(max 64, 16 per uid\), \d+ requests; "
                                   r"1 oversized, 0 evicted, 0 refused")
        self.assertRegex(p.stdout, r"app socket +0 apps \(max 32\), 0 waiting for hello "
                                   r"\(max 16, 4 per uid\)")

    def test_hugepages_are_used_when_free(self):
        # Reserve a few 2 MiB pages on a private hugetlbfs mount; put everything back after.
        nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        if not os.path.exists(nr):
            self.skipTest("no 2 MiB hugepage support in this kernel")
        with open(nr) as f:
            before = f.read().strip()
        mnt = tempfile.mkdtemp(prefix="cleave-huge-")
        ct._cleanups.append(lambda: os.rmdir(mnt))
        ct.sh(["mount", "-t", "hugetlbfs", "nodev", mnt])
        ct._cleanups.append(lambda: ct.sh(["umount", mnt], check=False))
        ct._cleanups.append(lambda: open(nr, "w").write(before))
        with open(nr, "w") as f:
            f.write(str(int(before) + 128))
        free = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
        free_before = int(open(free).read())
        d = self.start()
        self.assertTrue(d.ctl("status")[1]["hugepages"])
        self.assertLess(int(open(free).read()), free_before)  # cleaved's memory is in them
        p = ct.sh(["ping", "-c", "3", "-i", "0.05", "10.99.0.1"], ns=self.net.b)
        self.assertIn("3 received", p.stdout)
        self.assertEqual(d.stop()[0], 0)

    def test_no_hugepages_means_a_warning_not_a_failure(self):
        d = self.start()
        if d.ctl("status")[1]["hugepages"]:
            self.skipTest("this machine has free hugepages")
        self.assertIn("running without hugepages", d.logs())

    def test_flows_transports_and_bindings_without_an_app(self):
        plugin = os.environ.get("CLEAVE_TEST_PLUGIN")
        extra = ("transports:\n" + (f"  plugins: [{plugin}]\n" if plugin else "") +
                 "  bindings:\n    - port: 5002\n      params:\n        cc: dctcp\n")
        d = self.start(extra=extra)
        dctcp = {"port": 5002, "uid": None, "transport": "tcp", "params": {"cc": "dctcp"}}
        self.assertEqual(d.ctl("flow", "list")[1], {"flows": [], "listeners": [],
                                                    "transports": ["tcp"], "bindings": [dctcp]})
        self.assertIn("port 5002 bound to transport tcp cc dctcp", d.logs())
        # Bind a port; the transport refuses what it does not know, in its own words.
        cubic = {"port": 5001, "uid": None, "transport": "tcp", "params": {"cc": "cubic"}}
        self.assertEqual(d.ctl("flow", "attach", "port", "5001", "transport", "tcp", "cc",
                               "cubic")[1], cubic)
        code, _, err = d.ctl("flow", "attach", "port", "5001", "cc", "nosuch", check=False)
        self.assertEqual(code, 1)
        self.assertEqual(err, "cleavectl: cannot attach to port 5001: tcp: unknown congestion "
                              "control 'nosuch' (have newreno, cubic, dctcp)\n")
        code, _, err = d.ctl("flow", "attach", "port", "5001", "transport", "nope", check=False)
        self.assertEqual(code, 1)
        self.assertIn("no transport named 'nope'", err)
        code, _, err = d.ctl("flow", "attach", "port", "0", check=False)
        self.assertEqual(code, 2)
        self.assertEqual(d.ctl("flow", "list")[1]["bindings"], [dctcp, cubic])
        code, _, err = d.ctl("flow", "show", "0", check=False)
        self.assertEqual(code, 1)
        self.assertIn("no flow with id 0", err)
        # The kernel's SYN to a port nobody listens on: refused with a RST, counted.
        p = ct.sh(["/usr/bin/python3", "-c",
                   "import socket; s=socket.socket(); s.settimeout(3)\n"
                   "try: s.connect(('10.99.0.1', 5001)); print('connected')\n"
                   "except ConnectionRefusedError: print('refused')"], ns=self.net.b)
        self.assertEqual(p.stdout.strip(), "refused")
        s = d.stats()
        self.assertGreaterEqual(s["flows"]["rst_sent"], 1)
        self.assertGreaterEqual(s["drops"]["tcp_no_flow"], 1)
        # Transports: the registry's, which run, their flows.
        ts = {t["name"]: t for t in d.ctl("transport", "list")[1]["transports"]}
        self.assertEqual(ts["tcp"]["origin"], "built-in")
        self.assertTrue(ts["tcp"]["instantiated"])
        self.assertEqual((ts["tcp"]["flows"], ts["tcp"]["listeners"]), (0, 0))
        if plugin:
            self.assertEqual(ts["datagram"]["origin"], plugin)
            self.assertFalse(ts["datagram"]["instantiated"])
            d.ctl("flow", "attach", "port", "7", "transport", "datagram")
            ts = {t["name"]: t for t in d.ctl("transport", "list")[1]["transports"]}
            self.assertTrue(ts["datagram"]["instantiated"])
        # The tables for people.
        p = ct.sh([ct.CLEAVECTL, "-s", d.socket, "flow", "list"])
        self.assertIn("0 flow(s); transports running: tcp", p.stdout)
        self.assertRegex(p.stdout, r"\n  port 5001 +- +tcp +cc cubic\n")
        p = ct.sh([ct.CLEAVECTL, "-s", d.socket, "transport", "list"])
        self.assertRegex(p.stdout, r"\ntcp +built-in +IP protocol 6 +yes +0 +0 +TCP")
        self.assertRegex(p.stdout, r"\nrocev2 +built-in +UDP 4791 +no ")
        p = ct.sh([ct.CLEAVECTL, "-s", d.socket, "stats", "show"])
        self.assertRegex(p.stdout, r"\n  rst_sent +\d+  RSTs sent")

    def test_a_binding_the_transport_refuses_stops_the_start(self):
        self.net = ct.Net("d")
        text = CONFIG % {"va": self.net.va, "mac": OUR_MAC, "extra": (
            "transports:\n  bindings:\n    - port: 5001\n      params:\n        cc: nosuch\n")}
        d = ct.Daemon(text, ns=self.net.a, wait_ready=False)
        self.assertEqual(d.proc.wait(timeout=15), 2)
        self.assertIn(f"{d.config}:", d.logs())
        self.assertIn("transports.bindings[0].params: tcp: unknown congestion control 'nosuch'",
                      d.logs())
        self.assertIn("nothing was started", d.logs())

    def test_mtu_beyond_the_driver_is_a_clear_error(self):
        logs = self.start_fails(extra="    mtu: 9000\n")
        self.assertIn("MTU 9000 is outside what driver net_af_packet supports (46-1500)", logs)

    def test_missing_device_is_a_clear_error(self):
        logs = self.start_fails(iface="nosuchif0")
        self.assertRegex(logs, r"(EAL initialisation failed|did not come up in DPDK)")


if __name__ == "__main__":
    ct.main()
