#!/usr/bin/python3
"""test_tcp.py - TCP flows through cleaved with the Linux kernel as the peer.

As in the demo: cleaved runs in a scratch namespace with one port at 198.18.0.1 whose wire is a
DPDK tap; the kernel's end of the tap is 198.18.0.2, in the same namespace. Every case runs on
both NIC backends:
  - cleave: a net_cleave port (the header-split NIC's model) over the tap, probed by net_cleave;
  - generic: the net_tap port itself, split and placement in software.
The app is cleave-tcp (tools/cleave-tcp), the kernel's end tcp_peer.py run in the namespace;
both hash what they send and receive, and the pattern is cleave_pattern.py's. Cases: a kernel
client to a cleave listener; a cleave client to a kernel server; both directions at once; an
abort and a kernel reset; refusals both ways; curl against --http; the options of cleave's
SYN-ACK (TCP_INFO, and a tshark capture when tshark is installed); a kernel client into a
receive ring (cl_ring_*, cleave-tcp --ring), also at its end and at a reset.

CLEAVE_TCP_BYTES sets the bytes per direction (default 64 MiB; 1073741824 for the 1 GiB check).
"""

import hashlib
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time

import cleave_pattern
import cleavetest as ct

TOOL = os.environ.get("CLEAVE_TCP", "build/tools/cleave-tcp")
PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tcp_peer.py")
N = int(os.environ.get("CLEAVE_TCP_BYTES", 64 << 20))
OURS, KERNEL = "198.18.0.1", "198.18.0.2"
OUR_MAC, KERNEL_MAC = "02:c1:ea:0e:00:01", "02:c1:ea:0e:00:02"
# A transfer may take this long before a test gives up on it (the tool's own --timeout bounds
# every wait inside it): a minute plus a second per MB.
RUN_TIMEOUT = 60 + N / 1e6
CL_ECONNRESET, CL_ECONNREFUSED = -104, -111

CONFIG = ct.CONFIG_HEAD + ct.TCP_APPS + ct.port_yaml("%(device)s", OUR_MAC, OURS)


def start(backend, ns, tap, config=None):
    """A scratch namespace `ns` with cleaved on a tap `tap` (backend cleave or generic) and the
    kernel's end of the tap at KERNEL; returns the Daemon. Everything is removed at cleanup."""
    ct.sh(["ip", "netns", "add", ns])
    ct._cleanups.append(lambda: ct.sh(["ip", "netns", "del", ns], check=False))
    ct.sh(["ip", "link", "set", "lo", "up"], ns=ns)
    if backend == "cleave":
        device = f"net_cleave0,wire=net_tap0,wire_args=iface={tap}"
    else:
        device = f"net_tap0,iface={tap}"
    d = ct.Daemon((config or CONFIG) % {"device": device}, ns=ns)
    ct.wait_until(lambda: ct.sh(["ip", "link", "show", tap], ns=ns, check=False).returncode == 0,
                  what="the tap")
    # The kernel's end of the wire, as demo.sh sets it up. The tap has no offloads DPDK
    # would have to finish; these keep it that way.
    ct.sh(["ip", "link", "set", tap, "address", KERNEL_MAC], ns=ns)
    ct.sh(["ip", "addr", "add", KERNEL + "/24", "dev", tap], ns=ns)
    ct.sh(["ip", "link", "set", tap, "up"], ns=ns)
    ct.sh(["ethtool", "-K", tap, "tso", "off", "gso", "off", "gro", "off", "tx", "off"], ns=ns,
          check=False)
    return d


class Tcp:
    """The cases; a subclass per backend sets `backend` (and may set `config`)."""

    backend = None
    config = None

    def setUp(self):
        tag = os.getpid() % 100000
        self.ns, self.tap = f"cl{tag}tcp", f"clt{tag}"
        self.d = start(self.backend, self.ns, self.tap, self.config)
        self.app_sock = os.path.join(self.d.run_dir, "app.sock")
        self.dir = tempfile.mkdtemp(prefix="cleave-tcp-")
        ct._cleanups.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))

    # ---- processes: each one is registered and killed by its pid in teardown


    def tool(self, *args):
        """cleave-tcp with --json in the background."""
        return ct.spawn([TOOL, "-s", self.app_sock, "--json", "--timeout", "30",
                           *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)

    def tool_result(self, p):
        """(exit code, JSON, stderr) of a cleave-tcp run."""
        out, err = p.communicate(timeout=RUN_TIMEOUT)
        lines = out.splitlines()
        self.assertTrue(lines, f"cleave-tcp printed nothing (exit {p.returncode}): {err}")
        return p.returncode, json.loads(lines[-1]), err

    def peer(self, role, host, port, *args):
        """tcp_peer.py in the namespace, in the background; a server is ready to accept."""
        p = ct.spawn(["ip", "netns", "exec", self.ns, "/usr/bin/python3", PEER, role, host,
                        str(port), *map(str, args)], stdout=subprocess.PIPE, text=True)
        if role == "server":
            self.assertEqual(p.stdout.readline(), "ready\n")
        return p

    def peer_result(self, p):
        out, _ = p.communicate(timeout=RUN_TIMEOUT)
        self.assertTrue(out.strip(), "tcp_peer.py printed nothing")
        return json.loads(out.splitlines()[-1])

    def why(self, err, r):
        """What a failing assertion shows: the tool's complaint, its JSON, cleaved's log."""
        return f"cleave-tcp: {err.strip()}\n{r}\ncleaved log (tail):\n{self.d.logs()[-3000:]}"

    def assert_clean(self, code, r, err):
        self.assertEqual(code, 0, self.why(err, r))
        self.assertEqual((r["error"], r["close_status"]), (0, 0), self.why(err, r))

    # ---- 1. kernel client -> cleave server

    def kernel_client_to_cleave(self, port, n, *rx):
        t = self.tool("--listen", port, *(rx or ("--recv",)))
        k = self.peer_result(self.peer("client", OURS, port, "--send", n, "--retry", 10))
        code, r, err = self.tool_result(t)
        self.assert_clean(code, r, err)
        self.assertIsNone(k["error"], k)
        self.assertEqual(k["sent"], n)
        self.assertEqual(r["received"], n)
        self.assertEqual(r["received_sha256"], k["sent_sha256"])
        self.assertEqual(r["received_sha256"], cleave_pattern.sha256(1, n))
        return r, k

    def test_kernel_client_sends_to_a_cleave_listener(self):
        self.kernel_client_to_cleave(5001, N)

    # ---- 2. cleave client -> kernel server

    def test_cleave_client_sends_to_a_kernel_server(self):
        s = self.peer("server", KERNEL, 5002, "--recv")
        code, r, err = self.tool_result(self.tool("--connect", f"{KERNEL}:5002", "--send", N,
                                                  "--seed", 3))
        k = self.peer_result(s)
        self.assert_clean(code, r, err)
        self.assertIsNone(k["error"], k)
        self.assertEqual((r["sent"], k["received"]), (N, N))
        self.assertEqual(k["received_sha256"], r["sent_sha256"])
        self.assertEqual(r["sent_sha256"], cleave_pattern.sha256(3, N))

    # ---- 3. both directions on one flow

    def test_both_directions_at_once(self):
        n_back = N // 2 + 4097  # a different size, not a multiple of anything
        s = self.peer("server", KERNEL, 5003, "--recv", "--send", n_back, "--seed", 11)
        code, r, err = self.tool_result(self.tool("--connect", f"{KERNEL}:5003", "--send", N,
                                                  "--recv", "--seed", 10))
        k = self.peer_result(s)
        self.assert_clean(code, r, err)
        self.assertIsNone(k["error"], k)
        self.assertEqual((r["sent"], k["received"]), (N, N))
        self.assertEqual(k["received_sha256"], cleave_pattern.sha256(10, N))
        self.assertEqual(r["sent_sha256"], k["received_sha256"])
        self.assertEqual((k["sent"], r["received"]), (n_back, n_back))
        self.assertEqual(r["received_sha256"], cleave_pattern.sha256(11, n_back))

    # ---- 4. resets

    def test_abort_resets_the_kernel_after_the_data(self):
        n = 1 << 20
        s = self.peer("server", KERNEL, 5004, "--recv")
        code, r, err = self.tool_result(self.tool("--connect", f"{KERNEL}:5004", "--send", n,
                                                  "--abort"))
        k = self.peer_result(s)
        self.assertEqual(code, 0, self.why(err, r))
        self.assertEqual(r["sent"], n)
        # Every send was acknowledged before the RST, so the kernel has all of it, then the reset.
        self.assertEqual(k["error"], "ConnectionResetError", k)
        self.assertEqual(k["received"], n)
        self.assertEqual(k["received_sha256"], r["sent_sha256"])

    def test_kernel_reset_reaches_cleave(self):
        t = self.tool("--listen", 5005, "--recv")
        k = self.peer_result(self.peer("client", OURS, 5005, "--send", 1 << 20, "--reset",
                                       "--retry", 10))
        code, r, err = self.tool_result(t)
        self.assertIsNone(k["error"], k)
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual(r["close_status"], CL_ECONNRESET, self.why(err, r))
        self.assertIn("reset", err)

    # ---- 5. refusals

    def test_connect_to_a_closed_kernel_port_is_refused(self):
        t0 = time.monotonic()
        code, r, err = self.tool_result(self.tool("--connect", f"{KERNEL}:5006", "--send", 10))
        self.assertLess(time.monotonic() - t0, 5, "refused promptly, not timed out")
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual(r["error"], CL_ECONNREFUSED, self.why(err, r))
        self.assertIn(f"connect to {KERNEL}:5006: connection refused", err)

    def test_kernel_connect_to_a_port_nobody_listens_on_is_refused(self):
        t0 = time.monotonic()
        k = self.peer_result(self.peer("client", OURS, 5007, "--timeout", 5))
        self.assertEqual(k["error"], "ConnectionRefusedError", k)
        self.assertLess(time.monotonic() - t0, 5)

    # ---- 6. curl

    def test_curl_gets_the_pattern_over_http(self):
        if shutil.which("curl") is None:
            self.skipTest("curl is not installed")
        out = os.path.join(self.dir, "body")
        t = self.tool("--listen", 8080, "--http", N)
        deadline = time.monotonic() + 10
        while True:  # until the listener is there: curl's exit 7 is "could not connect"
            c = ct.sh(["curl", "-sS", "--max-time", str(int(RUN_TIMEOUT)), "-o", out,
                       f"http://{OURS}:8080/"], ns=self.ns, check=False, timeout=RUN_TIMEOUT + 5)
            if c.returncode != 7 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        code, r, err = self.tool_result(t)
        self.assertEqual(c.returncode, 0, f"curl: {c.stderr}\n{self.why(err, r)}")
        self.assert_clean(code, r, err)
        h = hashlib.sha256()
        with open(out, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        self.assertEqual(os.path.getsize(out), N)
        self.assertEqual(h.hexdigest(), cleave_pattern.sha256(1, N))
        self.assertEqual(r["sent_sha256"], h.hexdigest())
        self.assertGreater(r["received"], 0)  # the request

    # ---- 7. what cleave's SYN-ACK offers

    def test_syn_ack_offers_mss_sack_timestamps_and_window_scaling(self):
        tshark = shutil.which("tshark")
        capture = os.path.join(self.dir, "syn.pcap")
        cap = None
        if tshark:
            cap = ct.spawn(["ip", "netns", "exec", self.ns, tshark, "-i", self.tap, "-w",
                              capture, "-f", "tcp port 5008"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
            # Wait for the capture to start: tshark says so on stderr.
            seen, deadline = "", time.monotonic() + 15
            while "Capturing on" not in seen:
                left = deadline - time.monotonic()
                ready = select.select([cap.stderr], [], [], max(left, 0))[0]
                chunk = os.read(cap.stderr.fileno(), 4096).decode(errors="replace") if ready else ""
                self.assertTrue(chunk, f"tshark did not start capturing: {seen}")
                seen += chunk
        _, k = self.kernel_client_to_cleave(5008, 1 << 20)
        # The kernel offered everything; what it negotiated is what cleave's SYN-ACK accepted.
        info = k["tcp_info"]
        self.assertTrue(info["timestamps"] and info["sack"] and info["wscale"], info)
        self.assertGreater(info["snd_mss"], 0)
        self.assertLessEqual(info["snd_mss"], 1460)
        if cap is None:
            self.skipTest("tshark is not installed: checked TCP_INFO only")
        cap.send_signal(signal.SIGINT)  # by its pid: ip netns exec became tshark
        cap.communicate(timeout=15)
        p = ct.sh([tshark, "-r", capture, "-Y",
                   f"tcp.flags.syn==1 && tcp.flags.ack==1 && ip.src=={OURS}", "-T", "fields",
                   "-e", "tcp.options.mss_val", "-e", "tcp.options.sack_perm", "-e",
                   "tcp.options.wscale.shift", "-e", "tcp.options.timestamp.tsval"])
        rows = [line.split("\t") for line in p.stdout.splitlines() if line.strip()]
        self.assertGreaterEqual(len(rows), 1, f"no SYN-ACK from {OURS} captured: {p.stdout}")
        mss, sack, wscale, tsval = rows[0]
        self.assertTrue(mss and sack and wscale and tsval, f"SYN-ACK options: {rows[0]}")
        self.assertLessEqual(int(mss), 1460)
        self.assertGreater(int(mss), 0)
        self.assertLessEqual(int(wscale), 14)

    # ---- 8. a receive ring (cl_ring_*): the stream read in place

    def counters(self):
        return self.d.ctl("nic", "show", "p0")[1][0]["counters"], self.d.stats()["flows"]

    def test_kernel_client_sends_into_a_receive_ring(self):
        nic0, flows0 = self.counters()
        # A ring of 16 MiB in chunks of 1 MiB (cleave-tcp's --recv geometry): 64 MiB wraps
        # around it 4 times. (With windows of 1 MiB the daemon defers a segment now and then,
        # ring or posted buffers alike: nic_defer_no_ms, copied.)
        self.kernel_client_to_cleave(5009, N, "--ring", "16m", "--chunk", "1m")
        nic1, flows1 = self.counters()
        placed = nic1["nic_rx_placed_bytes"] - nic0["nic_rx_placed_bytes"]
        copied = flows1["rx_copied_bytes"] - flows0["rx_copied_bytes"]
        if self.backend == "cleave":
            # The NIC placed every byte into the ring; nobody copied one.
            self.assertGreaterEqual(placed, N)
            self.assertEqual(copied, 0)
            self.assertEqual(nic1["rx_linearized"] - nic0["rx_linearized"], 0)
        else:
            self.assertGreaterEqual(placed + copied, N)

    def test_a_small_ring_and_a_stream_that_ends_mid_chunk(self):
        # 10000 bytes, cut in two chunks (the chunk asked for is larger): 1 MiB + 1 wraps it 104
        # times and ends mid-chunk.
        self.kernel_client_to_cleave(5010, (1 << 20) + 1, "--ring", "10000", "--chunk", "64k")

    def test_kernel_reset_reaches_a_ring(self):
        t = self.tool("--listen", 5011, "--ring", "1m")
        k = self.peer_result(self.peer("client", OURS, 5011, "--send", 1 << 20, "--reset",
                                       "--retry", 10))
        code, r, err = self.tool_result(t)
        self.assertIsNone(k["error"], k)
        self.assertEqual(code, 1, self.why(err, r))
        self.assertEqual(r["close_status"], CL_ECONNRESET, self.why(err, r))
        self.assertIn("reset", err)


class CleaveBackend(Tcp, ct.TestCase):
    backend = "cleave"


class GenericBackend(Tcp, ct.TestCase):
    backend = "generic"


if __name__ == "__main__":
    for tool in (TOOL,):
        if not os.access(tool, os.X_OK):
            print(f"skipped: {tool} is not built", flush=True)
            raise SystemExit(ct.SKIP)
    ct.main()
