#!/usr/bin/python3
"""test_nic.py - cleaved's two NIC backends on a veth, with the Linux kernel as the peer.

Namespace a holds cleaved, namespace b the kernel at 10.99.0.2. The same traffic (ping, ARP, a
TCP SYN to a port nothing serves, refused with RST) goes through
  - the cleave backend: a net_cleave port (the header-split NIC's model) over net_af_packet,
    probed by net_cleave itself from wire_args;
  - the generic backend: the net_af_packet port itself, split and placement in software.
Checks what an operator sees: `cleavectl nic show`, the port's xstats, DPDK telemetry
(/cleave/nic and /ethdev/xstats), and that both backends count the same decisions.
"""

import json

import cleavetest as ct

CONFIG = ct.CONFIG_HEAD + """nic:
  max_flows: 1000
  ms_committed: 16
  ms_store: 4096
ports:
  - name: p0
    device: %(device)s
    mac: 02:00:00:00:00:01
    ipv4: 10.99.0.1/24
"""


class NicTest(ct.TestCase):
    def start(self, backend):
        self.net = ct.Net("n")
        if backend == "cleave":
            device = ("net_cleave0,wire=net_af_packet0,max_flows=2000,ms_committed=32,"
                      f"ms_store=65536,wire_args=iface={self.net.va}")
        else:
            device = f"net_af_packet0,iface={self.net.va}"
        self.d = ct.Daemon(CONFIG % {"device": device}, ns=self.net.a)
        return self.d

    def nic(self):
        nics = self.d.ctl("nic", "show", "p0")[1]
        self.assertEqual(len(nics), 1)
        return nics[0]

    def traffic(self):
        """10 pings answered, and one TCP SYN to a port no flow serves."""
        p = ct.sh(["ping", "-c", "10", "-i", "0.05", "-W", "1", "10.99.0.1"], ns=self.net.b)
        self.assertIn("10 received", p.stdout)
        ct.sh(["python3", "-c",
               "import socket\ns = socket.socket()\ns.settimeout(0.3)\n"
               "try: s.connect(('10.99.0.1', 5001))\nexcept OSError: pass\n"], ns=self.net.b)

    def check_counters(self, n):
        """What both backends must report for traffic()."""
        c = n["counters"]
        # ICMP is IPv4 but neither TCP nor UDP; ARP is not IPv4; the SYN (and its kernel
        # retransmissions) match no flow. Each is deferred whole to the copy path.
        self.assertGreaterEqual(c["nic_defer_not_l4"], 10)
        self.assertGreaterEqual(c["nic_defer_not_ipv4"], 1)
        self.assertGreaterEqual(c["nic_defer_flow_miss"], 1)
        self.assertEqual(c["nic_rx_in_order"], 0)
        self.assertGreaterEqual(c["nic_rx_frames"],
                                c["nic_defer_not_l4"] + c["nic_defer_not_ipv4"] +
                                c["nic_defer_flow_miss"])
        self.assertEqual(c["nic_rx_deferred"], c["nic_rx_frames"])
        stats = self.d.stats()
        self.assertEqual(stats["drops"]["tcp_no_flow"], 1)  # the SYN, answered with RST
        self.assertEqual(stats["icmp"]["echo_replies"], 10)

    def memory(self, n):
        t = n["memory"]["tables"]
        self.assertEqual(n["memory"]["total_bytes"], sum(v["bytes"] for v in t.values()))
        return t

    def test_cleave_backend_on_a_veth(self):
        d = self.start("cleave")
        self.traffic()
        n = self.nic()
        self.assertEqual(n["backend"], "cleave")
        self.assertEqual(n["memory"]["where"], "nic")
        self.check_counters(n)
        # Sized by the devargs: 2000 flows x 96 B, 32 committed MS entries of 16 B each.
        t = self.memory(n)
        self.assertEqual(t["flow_table"]["bytes"], 2000 * 96)
        self.assertEqual(t["ms_committed"]["bytes"], 2000 * 32 * 16)
        self.assertEqual(t["ms_store"]["bytes"], 65536 * 16)
        # The PMD's own counters are there too: it merged nothing, passed frames through.
        self.assertGreaterEqual(n["counters"]["tx_pass_through"], 10)
        # The port's xstats (cleavectl port show) carry the same decision counters.
        port = d.ctl("port", "show", "p0")[1][0]
        self.assertEqual(port["driver"], "net_cleave")
        self.assertGreaterEqual(port["xstats"]["nic_defer_not_l4"], 10)

    def test_generic_backend_on_a_veth(self):
        self.start("generic")
        self.traffic()
        n = self.nic()
        self.assertEqual(n["backend"], "generic")
        self.assertEqual(n["memory"]["where"], "host")
        self.check_counters(n)
        # Sized by the config's nic: section.
        t = self.memory(n)
        self.assertEqual(t["flow_table"]["bytes"], 1000 * 96)
        self.assertEqual(t["ms_committed"]["bytes"], 1000 * 16 * 16)
        self.assertEqual(t["ms_store"]["bytes"], 4096 * 16)

    def telemetry(self, cmd):
        p = ct.sh(["dpdk-telemetry.py", "-f", self.d.prefix], input=cmd + "\n")
        line = [x for x in p.stdout.splitlines() if x.startswith("{")][-1]
        return json.loads(line)[cmd.split(",")[0]]  # keyed by the command without parameters

    def test_telemetry_shows_the_nic(self):
        d = self.start("cleave")
        self.traffic()
        nic = self.telemetry("/cleave/nic")
        self.assertEqual(nic["p0"]["backend"], "cleave")
        self.assertGreaterEqual(nic["p0"]["counters"]["nic_defer_not_l4"], 10)
        port_id = d.ctl("port", "show", "p0")[1][0]["port_id"]
        cmd = f"/ethdev/xstats,{port_id}"
        xstats = self.telemetry(cmd)
        self.assertGreaterEqual(xstats["nic_defer_not_l4"], 10)
        self.assertGreater(xstats["nic_mem_total_bytes"], 0)

    def test_unknown_port_is_an_error(self):
        d = self.start("generic")
        rc, _, err = d.ctl("nic", "show", "nope", check=False)
        self.assertEqual(rc, 1)
        self.assertIn("no port named 'nope'", err)


if __name__ == "__main__":
    ct.main()
