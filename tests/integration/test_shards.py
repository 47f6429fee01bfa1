#!/usr/bin/python3
"""test_shards.py - cleaved with two dataplane shards (dataplane.lcores), the kernel as the peer.

As test_tcp.py: cleaved in a scratch namespace on a DPDK tap, the kernel's end at 198.18.0.2, on
both NIC backends (a net_cleave port with a queue pair per shard, whose NIC steers; the tap
itself, whose single queue the generic backend's steering stage splits). Two shards on lcores 1
and 2, both on CPU 1 (this machine has two), so the main lcore keeps CPU 0.

What it shows:
  - apps are spread over the shards (`app list` says which), and each listener accepts flows
    whatever queue RSS puts their SYN on: a shard with no app of the port hands the frames to
    the listener's shard, whose flow the NIC then steers to that shard's queue; every transfer's
    hash is right, and frames handed between shards stay few (SYNs and what the NIC saw before
    the flow was programmed), so each flow's segments are all on one shard;
  - the kernel resolves us and pings us (ARP and ICMP reach shard 0; shard 1 learns from the
    copies shard 0 hands it, or it could not answer its flows' SYNs);
  - kill -9 of an app mid-transfer: both shards let go of it (its flows, and the listener the
    other shard knew), so an app on the other shard can listen on the port again.
"""

import json
import os
import signal
import socket
import subprocess

import cleave_pattern
import cleavetest as ct
import test_roce as tr
import test_tcp as tt

APPS = 4  # cleave-tcp listeners, each its own app: two per shard
N = 4 << 20

SHARDS = ct.CONFIG_HEAD.replace("dataplane:\n", "dataplane:\n  lcores: [1, \"2@1\"]\n")
CONFIG = SHARDS + ct.TCP_APPS + ct.port_yaml("%(device)s", tt.OUR_MAC, tt.OURS)


# The NICs' RSS (src/common/rss.h): Toeplitz under Microsoft's verification key, a RETA of 128
# entries round-robin over the queues. Checked against the suite's vectors below.
RSS_KEY = bytes.fromhex("6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c"
                        "6a42b73bbeac01fa")


def toeplitz(data):
    key = int.from_bytes(RSS_KEY, "big")
    nbits = len(RSS_KEY) * 8
    h = 0
    for i, byte in enumerate(data):
        for b in range(8):
            if byte & (0x80 >> b):
                h ^= (key >> (nbits - 32 - (i * 8 + b))) & 0xFFFFFFFF
    return h


def rss_queue(src, dst, sport, dport, queues=2):
    """The queue a TCP frame from src:sport to dst:dport reaches."""
    data = (socket.inet_aton(src) + socket.inet_aton(dst) + sport.to_bytes(2, "big")
            + dport.to_bytes(2, "big"))
    return (toeplitz(data) % 128) % queues


def sport_to(queue, dport, start):
    """The first kernel source port from `start` whose SYN to dport RSS puts on `queue`."""
    return next(p for p in range(start, 65536)
                if rss_queue(tt.KERNEL, tt.OURS, p, dport) == queue)


class Shards:
    backend = None

    def setUp(self):
        tag = os.getpid() % 100000
        self.ns, self.tap = f"cl{tag}sh", f"cls{tag}"
        self.d = tt.start(self.backend, self.ns, self.tap, CONFIG)
        self.app_sock = os.path.join(self.d.run_dir, "app.sock")

    def tool(self, *args):
        return ct.spawn([tt.TOOL, "-s", self.app_sock, "--json", "--timeout", "30",
                         *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True)

    def peer(self, port, *args):
        return ct.spawn(["ip", "netns", "exec", self.ns, "/usr/bin/python3", tt.PEER, "client",
                         tt.OURS, str(port), *map(str, args)], stdout=subprocess.PIPE, text=True)



    def apps_by_shard(self, count):
        """Waits for `count` apps; {app id: shard}."""
        apps = {}

        def seen():
            apps.clear()
            for a in self.d.ctl("app", "list")[1]["apps"]:
                apps[a["id"]] = a["shard"]
            return len(apps) == count

        ct.wait_until(seen, what=f"{count} apps attached")
        return apps

    def listening(self, port):
        return any(l["local"].endswith(f":{port}")
                   for l in self.d.ctl("flow", "list")[1]["listeners"])

    def shards(self):
        return [l for l in self.d.stats()["lcores"] if l["role"] == "dataplane"]

    def test_flows_from_the_kernel_land_on_their_apps_shards(self):
        # This file's Toeplitz, against Microsoft's RSS verification suite (IPv4 with ports).
        self.assertEqual(toeplitz(socket.inet_aton("66.9.149.187") + socket.inet_aton(
            "161.142.100.80") + (2794).to_bytes(2, "big") + (1766).to_bytes(2, "big")),
            0x51ccc178)
        ports = [6000 + i for i in range(APPS)]
        tools = []
        for p in ports:
            tools.append(self.tool("--listen", p, "--recv"))
            ct.wait_until(lambda p=p: self.listening(p), what=f"a listener on {p}")
        apps = self.apps_by_shard(APPS)
        self.assertEqual(sorted(apps.values()), [0, 0, 1, 1], "apps spread over the shards")
        # Each listener is known to both shards, listed once, by its own.
        listeners = self.d.ctl("flow", "list")[1]["listeners"]
        self.assertEqual(len(listeners), APPS, listeners)

        # Half the kernel's connections from a source port whose SYN RSS puts on the other
        # shard's queue (the listener's shard must be handed it), half on the app's own.
        by_port = {int(l["local"].rsplit(":", 1)[1]): apps[l["app"]] for l in listeners}
        crossing = [i % 2 == 0 for i in range(APPS)]
        sports = [sport_to(1 - by_port[p] if crossing[i] else by_port[p], p, 20000 + 100 * i)
                  for i, p in enumerate(ports)]
        peers = [self.peer(p, "--send", N, "--retry", 10, "--seed", i + 1, "--sport", sports[i])
                 for i, p in enumerate(ports)]
        for i, (t, k) in enumerate(zip(tools, peers)):
            kout, _ = k.communicate(timeout=tt.RUN_TIMEOUT)
            out, err = t.communicate(timeout=tt.RUN_TIMEOUT)
            r = json.loads(out.splitlines()[-1])
            self.assertEqual(t.returncode, 0, f"{err}\n{r}\n{self.d.logs()[-3000:]}")
            self.assertEqual(r["received"], N)
            self.assertEqual(r["received_sha256"], cleave_pattern.sha256(i + 1, N))
            self.assertIsNone(json.loads(kout.splitlines()[-1])["error"])

        shards = self.shards()
        self.assertEqual(len(shards), 2)
        # Both shards opened flows for their apps (an app's flows are on its shard), and both
        # received: most segments on the flow's own shard, only a few handed over.
        opened = [s["flows_opened"] for s in shards]
        self.assertEqual(opened, [2, 2], shards)
        rx = sum(s["rx_packets"] for s in shards)
        handed = sum(s["handed_off"] for s in shards)
        self.assertGreater(rx, APPS * N // 1500, shards)
        # Each crossing SYN was handed over; after it, the NIC steered the flow to its shard.
        self.assertGreaterEqual(handed, sum(crossing), shards)
        self.assertLess(handed, APPS * 8, f"a flow's segments crossed shards: {shards}")
        self.assertEqual(sum(s["handed_in"] for s in shards), handed, shards)
        self.assertEqual(self.d.stats()["drops"]["hand_off_full"], 0)

    def test_arp_and_ping_with_two_shards(self):
        ct.sh(["ip", "neigh", "flush", "dev", self.tap], ns=self.ns, check=False)
        out = ct.sh(["ping", "-c", "3", "-i", "0.2", "-W", "2", tt.OURS], ns=self.ns).stdout
        self.assertIn("3 received", out)
        st = self.d.stats()
        self.assertGreaterEqual(st["icmp"]["echo_replies"], 3)
        self.assertGreaterEqual(st["arp"]["replies_tx"], 1)
        # Both shards know the kernel's MAC: the ARP table merges them, reachable.
        arp = self.d.ctl("arp", "show")[1]["entries"]
        self.assertTrue(any(e["ip"] == tt.KERNEL and e["state"] == "reachable" for e in arp), arp)

    def test_kill_9_mid_transfer_is_reclaimed_on_both_shards(self):
        first = self.tool("--listen", 6100, "--recv")
        ct.wait_until(lambda: self.listening(6100), what="a listener")
        self.assertEqual(list(self.apps_by_shard(1).values()), [0])
        k = self.peer(6100, "--send", 1 << 30, "--retry", 10)
        ct.wait_until(lambda: any(f.get("app") for f in self.d.ctl("flow", "list")[1]["flows"]),
                      what="the flow")
        first.send_signal(signal.SIGKILL)
        first.communicate(timeout=30)
        ct.wait_until(lambda: not self.d.ctl("app", "list")[1]["apps"], what="the app reclaimed")
        ct.wait_until(lambda: not any(f.get("app") for f in self.d.ctl("flow", "list")[1]["flows"]),
                      what="its flows gone from every shard")
        k.communicate(timeout=60)
        # Shard 1 forgot the listener it knew: an app there may listen on the port again. (A
        # new app goes to the shard with the fewest: one held on shard 0 first.)
        holder = self.tool("--listen", 6101, "--recv")
        ct.wait_until(lambda: self.listening(6101), what="the holder's listener")
        again = self.tool("--listen", 6100, "--recv")
        ct.wait_until(lambda: self.listening(6100), what="the port listened again")
        apps = self.apps_by_shard(2)
        self.assertEqual([apps[i] for i in sorted(apps)], [0, 1], "the second app on shard 1")
        for t in (holder, again):
            t.send_signal(signal.SIGTERM)
            t.communicate(timeout=30)


class RoceOnBothShards(ct.TestCase):
    """Two daemons with two shards each (test_roce.py's set-up otherwise): two cleave-rdma pairs
    at once, so each daemon has a QP on each shard; every move's bytes are right, and each
    shard's packets are its own QPs' (few handed over)."""

    tool = tr.Roce.tool
    why = tr.Roce.why
    results = tr.Roce.results
    start_pair = tr.Roce.start_pair
    finish_pair = tr.Roce.finish_pair

    def setUp(self):
        self.net = ct.Net("rs", peer_addr=None)
        ifaces = {"a": self.net.va, "b": self.net.vb}
        ns = {"a": self.net.a, "b": self.net.b}
        config = SHARDS + tr.RDMA_APPS + tr.CONFIG[len(ct.CONFIG_HEAD) + len(tr.RDMA_APPS):]
        self.d = {side: ct.Daemon(config % {"iface": ifaces[side], "mac": tr.MAC[side],
                                            "ip": tr.IP[side]}, ns=ns[side])
                  for side in ("a", "b")}

    def test_qps_on_both_shards(self):
        ops, sizes = ["send", "write", "read"], ["4097", "1m", "8m"]
        # A new app goes to the shard with the fewest apps: the first pair's to shard 0 of each
        # daemon; then, with an idle app held on shard 0, the second pair's to shard 1.
        self.finish_pair(self.start_pair(ops, sizes, "--selective-repeat"))
        holders = []
        for side in ("a", "b"):
            sock = os.path.join(self.d[side].run_dir, "app.sock")
            holders.append(ct.spawn([tt.TOOL, "-s", sock, "--listen", "6200", "--timeout", "60"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            ct.wait_until(lambda side=side: self.d[side].ctl("app", "list")[1]["apps"],
                          what=f"the idle app on {side}")
        self.finish_pair(self.start_pair(ops, sizes, "--selective-repeat"))
        for side in ("a", "b"):
            shards = [l for l in self.d[side].stats()["lcores"] if l["role"] == "dataplane"]
            rx = [s["rx_packets"] for s in shards]
            # Each shard received a pair's worth (2 x 9 MiB each way, in PMTU packets).
            self.assertTrue(all(n > 9 * (1 << 20) // tr.PMTU for n in rx), (side, shards))
            handed = sum(s["handed_off"] for s in shards)
            self.assertLess(handed, sum(rx) // 100, (side, shards))
        for h in holders:
            h.send_signal(signal.SIGTERM)
            h.wait(timeout=30)


class CleaveBackend(Shards, ct.TestCase):
    backend = "cleave"


class GenericBackend(Shards, ct.TestCase):
    backend = "generic"


if __name__ == "__main__":
    for tool in (tt.TOOL, tr.RDMA):
        if not os.access(tool, os.X_OK):
            print(f"skipped: {tool} is not built", flush=True)
            raise SystemExit(ct.SKIP)
    ct.main()
