#!/usr/bin/python3
"""test_cli.py - command lines and exit codes of cleaved and cleavectl, without a daemon.

cleavectl is tested against a fake cleaved that speaks the management protocol, so every
answer a real daemon could give (and some it should not) can be produced on demand.
Needs no root and no DPDK.
"""

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import unittest

CLEAVED = os.environ.get("CLEAVED", "build/src/dataplane/cleaved")
CLEAVECTL = os.environ.get("CLEAVECTL", "build/tools/cleavectl")


def run(cmd, timeout=20):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


class CleavedCommandLine(unittest.TestCase):
    def write(self, text):
        f = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        f.write(text)
        f.close()
        self.addCleanup(os.unlink, f.name)
        return f.name

    def test_embedded_default_checks(self):
        p = run([CLEAVED, "--check-config"])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, "<embedded>: configuration is valid\n")

    def test_good_file_checks(self):
        path = self.write("ports:\n  - {name: p0, device: net_null0, ipv4: 10.0.0.1/24}\n")
        p = run([CLEAVED, "--check-config", "-c", path])
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_errors_are_file_line_col_and_exit_2(self):
        path = self.write("dataplane:\n  burst: 0\n  colour: red\nports:\n"
                          "  - {name: p0, device: d, ipv4: 10.0.0.1/24, mtu: 10}\n")
        p = run([CLEAVED, "--check-config", "-c", path])
        self.assertEqual(p.returncode, 2)
        lines = p.stderr.splitlines()
        self.assertEqual(lines[0],
                         f"{path}:2:10: dataplane.burst: expected an integer from 1 to 512, got '0'")
        self.assertTrue(lines[1].startswith(f"{path}:3:3: unknown key 'dataplane.colour'"))
        self.assertTrue(lines[2].startswith(f"{path}:5:"), lines[2])
        self.assertIn("ports[0].mtu", lines[2])
        self.assertEqual(lines[3], f"cleaved: 3 error(s) in {path}; nothing was started")

    def test_running_with_a_bad_config_starts_nothing(self):
        path = self.write("ports: 5\n")
        p = run([CLEAVED, "-c", path])
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{path}:1:8: ports: expected a non-empty list", p.stderr)

    def test_missing_file(self):
        p = run([CLEAVED, "-c", "/nonexistent.yaml"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent.yaml: cannot read file", p.stderr)

    def test_transport_errors_are_config_errors(self):
        port = "ports:\n  - {name: p0, device: net_null0, ipv4: 10.0.0.1/24}\n"
        path = self.write("transports:\n  plugins: [/nonexistent/solar.so]\n  bindings:\n"
                          "    - {port: 5001, params: {cc: nosuch}}\n" + port)
        p = run([CLEAVED, "--check-config", "-c", path])
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.splitlines(), [
            f"{path}:2:13: transports.plugins[0]: /nonexistent/solar.so: cannot load: cannot "
            "open shared object file: No such file or directory",
            f"{path}:4:28: transports.bindings[0].params: tcp: unknown congestion control "
            "'nosuch' (have newreno, cubic, dctcp)",
            f"cleaved: 2 error(s) in {path}; nothing was started"])
        # Running is refused the same way, before anything starts.
        p = run([CLEAVED, "-c", path])
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{path}:2:13: transports.plugins[0]", p.stderr)

    def test_plugin_transport_checks(self):
        plugin = os.environ.get("CLEAVE_TEST_PLUGIN")
        if not plugin:
            self.skipTest("CLEAVE_TEST_PLUGIN is not set: run through meson test")
        port = "ports:\n  - {name: p0, device: net_null0, ipv4: 10.0.0.1/24}\n"
        path = self.write(f"transports:\n  plugins: [{plugin}]\n  bindings:\n"
                          "    - {port: 7, transport: datagram}\n"
                          "    - {port: 5001, transport: tcp, params: {cc: cubic}}\n" + port)
        p = run([CLEAVED, "--check-config", "-c", path])
        self.assertEqual(p.returncode, 0, p.stderr)
        path = self.write(f"transports:\n  plugins: [{plugin}]\n  bindings:\n"
                          "    - {port: 7, transport: datagram, params: {x: 1}}\n" + port)
        p = run([CLEAVED, "--check-config", "-c", path])
        self.assertEqual(p.returncode, 2)
        self.assertIn(f"{path}:4:46: transports.bindings[0].params: datagram: no parameters",
                      p.stderr)

    def test_version_help_and_bad_option(self):
        p = run([CLEAVED, "--version"])
        self.assertEqual(p.returncode, 0)
        self.assertRegex(p.stdout, r"^cleaved \d+\.\d+\.\d+\n$")
        p = run([CLEAVED, "--help"])
        self.assertEqual(p.returncode, 0)
        self.assertIn("--check-config", p.stdout)
        self.assertIn("Exit codes", p.stdout)
        p = run([CLEAVED, "--frobnicate"])
        self.assertEqual(p.returncode, 2)


class FakeDaemon:
    """A unix socket server that answers each request line with `reply(request)`."""

    def __init__(self, reply):
        self.dir = tempfile.mkdtemp(prefix="cleave-fake-")
        self.path = os.path.join(self.dir, "cleaved.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)
        self.reply = reply
        self.requests = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                self.answer(c)

    def answer(self, c):
        buf = b""
        while True:
            data = c.recv(65536)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                req = json.loads(line)
                self.requests.append(req)
                out = self.reply(req)
                if out == "close":
                    return
                if isinstance(out, bytes):
                    c.sendall(out)
                elif out is not None:
                    c.sendall((json.dumps(out) + "\n").encode())

    def close(self):
        # Wake the accept() and wait for the thread before the fd is closed: a thread still in
        # accept() when its fd number is reused would serve the next test's daemon.
        self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=30)
        self.sock.close()
        os.unlink(self.path)
        os.rmdir(self.dir)


def ok(req, result):
    return {"version": 1, "id": req.get("id"), "ok": True, "result": result}


class CleavectlAgainstFakeDaemon(unittest.TestCase):
    def fake(self, reply):
        d = FakeDaemon(reply)
        self.addCleanup(d.close)
        return d

    def ctl(self, d, *args, timeout=20):
        return run([CLEAVECTL, "-s", d.path] + list(args), timeout=timeout)

    def test_request_carries_version_command_and_args(self):
        d = self.fake(lambda r: ok(r, [{"name": "p0"}]))
        p = self.ctl(d, "-j", "port", "show", "p0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), [{"name": "p0"}])
        req = d.requests[0]
        self.assertEqual(req["version"], 1)
        self.assertEqual(req["command"], "port.show")
        self.assertEqual(req["args"], {"name": "p0"})

    def test_verb_defaults_to_show(self):
        d = self.fake(lambda r: ok(r, []))
        self.assertEqual(self.ctl(d, "-j", "route").returncode, 0)
        self.assertEqual(d.requests[0]["command"], "route.show")

    def test_daemon_error_is_exit_1_with_its_message(self):
        d = self.fake(lambda r: {"version": 1, "id": r["id"], "ok": False,
                                 "error": {"code": "not_found", "message": "no port named 'x'"}})
        p = self.ctl(d, "port", "show", "x")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "cleavectl: no port named 'x'\n")

    def test_malformed_answer_is_exit_2(self):
        d = self.fake(lambda r: b"this is not json\n")
        p = self.ctl(d, "status")
        self.assertEqual(p.returncode, 2)
        self.assertIn("malformed JSON", p.stderr)

    def test_daemon_closing_early_is_exit_2(self):
        d = self.fake(lambda r: "close")
        p = self.ctl(d, "status")
        self.assertEqual(p.returncode, 2)
        self.assertIn("closed the connection before answering", p.stderr)

    def test_silent_daemon_times_out_with_exit_2(self):
        d = self.fake(lambda r: None)
        p = self.ctl(d, "status", timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no answer from cleaved within 5 s", p.stderr)

    def test_tables_for_humans(self):
        arp = {"entries": [{"port": "p0", "ip": "10.0.0.2", "mac": "02:00:00:00:00:02",
                            "state": "reachable", "pinned": True, "age_ms": 1500}],
               "truncated": False, "capacity": 1024}
        d = self.fake(lambda r: ok(r, arp))
        p = self.ctl(d, "arp", "show")
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["PORT", "ADDRESS", "MAC", "STATE", "AGE"])
        self.assertEqual(lines[1].split(), ["p0", "10.0.0.2", "02:00:00:00:00:02", "reachable",
                                            "1.5s", "pinned"])

    def test_route_get_waits_for_resolution(self):
        answers = iter(["incomplete", "incomplete", "reachable"])

        def reply(r):
            state = next(answers)
            return ok(r, {"addr": "10.1.1.1", "dst": "0.0.0.0/0", "kind": "default", "port": "p0",
                          "next_hop": "10.0.0.254",
                          "neighbour": {"state": state,
                                        "mac": None if state == "incomplete" else "02:00:00:00:00:fe"}})
        d = self.fake(reply)
        p = self.ctl(d, "route", "get", "10.1.1.1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(d.requests), 3)
        self.assertIn("10.1.1.1 via 10.0.0.254 port p0 (default 0.0.0.0/0)", p.stdout)
        self.assertIn("lladdr 02:00:00:00:00:fe reachable", p.stdout)


    def test_nic_show(self):
        nic = {"name": "p0", "device": "net_cleave0,wire=net_ring0", "backend": "cleave",
               "memory": {"where": "nic", "total_bytes": 7422020,
                          "tables": {"flow_table": {"bytes": 960000, "in_use": 2},
                                     "ms_store": {"bytes": 1048576, "in_use": 0}}},
               "counters": {"nic_rx_in_order": 12, "nic_defer_no_ms": 0, "tx_zero_copy": 5},
               "truncated": False}
        d = self.fake(lambda r: ok(r, [nic]))
        p = self.ctl(d, "nic")  # the verb defaults to show
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "nic.show")
        self.assertIn("p0: net_cleave0,wire=net_ring0  backend cleave  table memory 7.42 MB "
                      "(on the NIC)", p.stdout)
        self.assertRegex(p.stdout, r"flow_table +960000 +2")
        self.assertRegex(p.stdout, r"nic_rx_in_order +12")
        self.assertNotIn("nic_defer_no_ms", p.stdout)
        self.assertIn("(1 at zero)", p.stdout)
        p = self.ctl(d, "-d", "nic", "show", "p0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["args"], {"name": "p0"})
        self.assertRegex(p.stdout, r"nic_defer_no_ms +0")

    def test_app_list_and_show(self):
        app = {"id": 3, "name": "kv", "pid": 42, "uid": 1000, "gid": 1000, "shard": 1,
               "connected_s": 75,
               "region_bytes": 16 << 20, "hugepages": True, "dpdk_external_memory": True,
               "dma_mapped_ports": 1, "memory_bytes": 17 << 20, "memory_quota_bytes": 256 << 20,
               "pipes": 3, "pipes_quota": 16, "mrs": 1, "mrs_quota": 8, "flows_quota": 64,
               "counters": {"ops": {"nop": 1, "copy": 2, "send": 3}, "bytes": 4096,
                            "completions": 9, "recv_taken": 3, "no_recv": 0, "cq_full": 0,
                            "doorbells": 0, "errors_total": 2, "flows": 5,
                            "flows_over_quota": 7},
               "errors": {"bad_mr": 2, "out_of_bounds": 0},
               "pipe_list": [{"id": 0, "kind": "completion", "entries": 1024, "offset": 4096,
                              "doorbell": True},
                             {"id": 1, "kind": "submit", "entries": 256, "offset": 40960,
                              "cq": 0, "doorbell": False}],
               "mr_list": [{"id": 0, "bytes": 12 << 20, "access": "rw", "kind": "heap"},
                           {"id": 1, "bytes": 1 << 20, "access": "r", "kind": "memfd",
                            "dpdk_external_memory": True}]}
        d = self.fake(lambda r: ok(r, {"apps": [app], "max_apps": 32, "socket": "/run/x"}
                                   if r["command"] == "app.list" else app))
        p = self.ctl(d, "app")  # the verb defaults to list
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["ID", "NAME", "PID", "UID", "SHARD", "MEMORY",
                                            "PIPES", "MRS", "FLOWS", "OVER_QUOTA", "COMPLETIONS",
                                            "ERRORS"])
        self.assertEqual(lines[1].split(), ["3", "kv", "42", "1000", "1", "17.0", "MiB", "/",
                                            "256.0", "MiB", "3/16", "1/8", "5/64", "7", "9", "2"])
        p = self.ctl(d, "app", "show", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["args"], {"id": 3})
        self.assertIn("app 3 'kv': pid 42 uid 1000 gid 1000, shard 1, connected 1m 15s", p.stdout)
        self.assertIn("hugepages, registered as DPDK external memory", p.stdout)
        self.assertIn("flows    5 of 64 (flows and QPs; refused over the quota: 7)", p.stdout)
        self.assertRegex(p.stdout, r"1 +submit +256 entries  -> cq 0")
        self.assertRegex(p.stdout, r"bad_mr +2")
        self.assertNotIn("out_of_bounds", p.stdout)  # zero counters are not listed
        p = self.ctl(d, "app", "show", "three")
        self.assertEqual(p.returncode, 2)
        self.assertIn("expected an app id (a number), got 'three'", p.stderr)


    FLOW = {"id": 3, "app": 2, "transport": "tcp", "local": "10.0.0.1:5001",
            "remote": "10.0.0.2:40000",
            "info": {"state": "established", "cc": "cubic", "mss": 1448, "cwnd": 14480,
                     "srtt_us": 1234, "bytes_in_flight": 2896, "retransmits": 1, "sack": "on",
                     "placed_bytes": 100, "custom": 7},
            "info_keys": ["state", "cc", "sack", "mss", "cwnd", "srtt_us", "bytes_in_flight",
                          "retransmits", "placed_bytes", "custom"]}

    def test_flow_list(self):
        listing = {"flows": [self.FLOW],
                   "listeners": [{"id": 0, "app": 2, "transport": "tcp",
                                  "local": "10.0.0.1:5001"}],
                   "transports": ["tcp"],
                   "bindings": [{"port": 5001, "uid": None, "transport": "tcp",
                                 "params": {"cc": "cubic", "mss": "1400"}},
                                {"tuple": {"local": "*:*", "remote": "10.0.0.2:443"},
                                 "uid": 1000, "transport": "tcp", "params": {"cc": "dctcp"}},
                                {"port": 80, "transport": "tcp", "params": {}}]}
        d = self.fake(lambda r: ok(r, listing))
        p = self.ctl(d, "flow")  # the verb defaults to list
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.list")
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["ID", "APP", "TRANSPORT", "LOCAL", "REMOTE", "STATE",
                                            "CWND", "SRTT", "IN-FLIGHT", "RETRANS"])
        self.assertEqual(lines[1].split(), ["3", "2", "tcp", "10.0.0.1:5001", "10.0.0.2:40000",
                                            "established", "14480", "1.234ms", "2896", "1"])
        self.assertEqual(lines[2], "1 flow(s); transports running: tcp")
        self.assertEqual(lines[3], "listeners:")
        self.assertEqual(lines[5].split(), ["0", "2", "tcp", "10.0.0.1:5001"])
        self.assertEqual(lines[6], "bindings:")
        self.assertEqual(lines[7].split(), ["BINDING", "UID", "TRANSPORT", "PARAMS"])
        self.assertEqual(lines[8].split(), ["port", "5001", "-", "tcp", "cc", "cubic", "mss",
                                            "1400"])
        self.assertEqual(lines[9].split(), ["tuple", "*:*", "10.0.0.2:443", "1000", "tcp", "cc",
                                            "dctcp"])
        self.assertEqual(lines[10].split(), ["port", "80", "-", "tcp", "-"])  # an older daemon
        p = self.ctl(d, "-j", "flow", "list")
        self.assertEqual(json.loads(p.stdout), listing)

    def test_flow_list_pages_under_the_hood(self):
        """cleavectl asks a page at a time (start, max) until next is null, and shows the pages
        joined: every flow once, in order, the listeners, transports and bindings once."""
        flows = [dict(self.FLOW, id=i) for i in range(700)]
        listeners = [{"id": 0, "app": 2, "transport": "tcp", "local": "10.0.0.1:5001"}]
        rows = [("l", x) for x in listeners] + [("f", x) for x in flows]
        binding = {"port": 5001, "uid": None, "transport": "tcp", "params": {}}

        def reply(r):
            start, n = r["args"].get("start", 0), r["args"].get("max", 256)
            page = rows[start:start + n]
            nxt = start + n if start + n < len(rows) else None
            return ok(r, {"flows": [x for k, x in page if k == "f"],
                          "listeners": [x for k, x in page if k == "l"],
                          "transports": ["tcp"], "bindings": [binding], "next": nxt})
        d = self.fake(reply)
        p = self.ctl(d, "-j", "flow", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([r["args"]["start"] for r in d.requests], [0, 256, 512])
        self.assertTrue(all(r["args"]["max"] <= 256 for r in d.requests))
        self.assertEqual(json.loads(p.stdout), {"flows": flows, "listeners": listeners,
                                                "transports": ["tcp"], "bindings": [binding]})
        p = self.ctl(d, "flow", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("700 flow(s); transports running: tcp", p.stdout)
        p = self.ctl(d, "-j", "qp", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), [])  # all 700 pages' flows are tcp

    def test_flow_list_when_empty(self):
        d = self.fake(lambda r: ok(r, {"flows": [], "listeners": [], "transports": ["tcp"],
                                       "bindings": []}))
        p = self.ctl(d, "flow", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[1:], [
            "0 flow(s); transports running: tcp", "listeners: none", "bindings: none"])

    def test_flow_show_groups_the_transports_values(self):
        d = self.fake(lambda r: ok(r, self.FLOW))
        p = self.ctl(d, "flow", "show", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.show")
        self.assertEqual(d.requests[-1]["args"], {"id": 3})
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "flow 3: tcp 10.0.0.1:5001 -> 10.0.0.2:40000  app 2")
        self.assertEqual(lines[1].split(), ["flow", "state", "established", "cc", "cubic"])
        self.assertEqual(lines[2].split(), ["window", "mss", "1448", "cwnd", "14480"])
        self.assertEqual(lines[3].split(), ["rtt", "srtt_us", "1234"])
        self.assertEqual(lines[4].split(), ["options", "sack", "on"])
        self.assertEqual(lines[5].split(), ["loss", "bytes_in_flight", "2896", "retransmits", "1"])
        self.assertEqual(lines[6].split(), ["placement", "placed_bytes", "100"])
        self.assertEqual(lines[7].split(), ["other", "custom", "7"])
        # Another transport's values, none of them TCP's: in the order it gave them.
        other = {"id": 9, "app": None, "transport": "datagram", "local": "10.0.0.1:7",
                 "remote": "10.0.0.2:7", "info": {"b": 1, "a": "x"}, "info_keys": ["b", "a"]}
        d = self.fake(lambda r: ok(r, other))
        p = self.ctl(d, "flow", "show", "9")
        self.assertEqual(p.stdout.splitlines(), [
            "flow 9: datagram 10.0.0.1:7 -> 10.0.0.2:7  app -", "  info        b 1  a x"])

    # A queue pair as the rocev2 transport reports it (RcTransport::flow_info: its keys in order).
    QP_KEYS = ["state", "recovery", "spray", "reorder", "dcqcn", "qpn", "dest_qpn", "pmtu", "sq_psn", "una_psn",
               "epsn", "msn", "send_queued", "recv_posted", "reads_outstanding",
               "outstanding_psns", "retries_left", "rnr_retries_left", "rate_limit_bps",
               "rate_bps", "target_rate_bps", "alpha_ppm", "rate_decreases", "tx_packets",
               "tx_bytes", "rx_packets", "retransmits", "timeouts", "naks_sent",
               "naks_received", "rnr_naks_sent", "rnr_naks_received", "acks_sent",
               "acks_received", "duplicates", "out_of_sequence", "read_responses",
               "access_errors", "invalid_requests", "bad_icrc", "bad_packets", "copied_bytes",
               "placed_bytes", "qp_errors", "ce_received", "cnps_sent", "cnps_received"]

    def qp(self, flow_id, qpn, **info):
        values = dict.fromkeys(self.QP_KEYS, 0)
        values.update(state="RTS", recovery="go-back-n", spray=1, reorder=1, dcqcn="on", qpn=qpn, dest_qpn=qpn + 1,
                      pmtu=4096, sq_psn=0x10020, una_psn=0x10010, epsn=0xABCDEF, msn=7,
                      send_queued=3, recv_posted=16, outstanding_psns=16, retries_left=7,
                      rnr_retries_left=6, rate_limit_bps=100_000_000_000,
                      rate_bps=12_500_000_000, target_rate_bps=25_000_000_000,
                      alpha_ppm=31250, tx_packets=900, cnps_sent=4, cnps_received=11)
        values.update(info)
        return {"id": flow_id, "app": 2, "transport": "rocev2",
                "local": "10.99.0.1:4791", "remote": "10.99.0.2:4791",
                "info": values, "info_keys": [k for k in self.QP_KEYS if k in values]}

    def qp_daemon(self):
        """A fake daemon with a TCP flow (3) and two queue pairs (5, 6); 6 is an older rocev2
        without DCQCN's values."""
        qp6 = self.qp(6, 0x20, state="ERR", rate_bps=100_000_000_000, alpha_ppm=1_000_000,
                      retries_left=0)
        for k in ("alpha_ppm", "cnps_sent", "cnps_received", "rate_bps"):
            del qp6["info"][k]
            qp6["info_keys"].remove(k)
        qp6["remote"] = "[fd00::2]:4791"
        flows = [self.FLOW, self.qp(5, 0x11), qp6]
        listing = {"flows": flows, "listeners": [], "transports": ["tcp", "rocev2"],
                   "bindings": []}

        def reply(r):
            if r["command"] == "flow.list":
                return ok(r, listing)
            for f in flows:
                if f["id"] == r["args"]["id"]:
                    return ok(r, f)
            return {"version": 1, "id": r["id"], "ok": False,
                    "error": {"code": "not_found", "message": f"no flow with id {r['args']['id']}"}}
        return self.fake(reply), flows

    def test_qp_list(self):
        d, flows = self.qp_daemon()
        p = self.ctl(d, "qp")  # the verb defaults to list
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.list")
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), [
            "ID", "APP", "QPN", "DEST-QPN", "PEER", "STATE", "SQ-PSN", "UNA-PSN", "EPSN",
            "OUTSTANDING", "SEND-Q", "RECV-POSTED", "RETRIES", "RNR-RETRIES", "RATE", "ALPHA",
            "CNPS-SENT", "CNPS-RECV"])
        self.assertEqual(lines[1].split(), [
            "5", "2", "17", "18", "10.99.0.2", "RTS", str(0x10020), str(0x10010), str(0xABCDEF),
            "16", "3", "16", "7", "6", "12.5G", "0.031", "4", "11"])
        # Keys the transport does not report are "-"; the peer of an IPv6 tuple has no brackets.
        self.assertEqual(lines[2].split(), [
            "6", "2", "32", "33", "fd00::2", "ERR", str(0x10020), str(0x10010), str(0xABCDEF),
            "16", "3", "16", "0", "6", "-", "-", "-", "-"])
        self.assertEqual(lines[3], "2 queue pair(s)")
        self.assertEqual(len(lines), 4)  # the TCP flow is not a queue pair
        # -j: the queue pairs' rows as the daemon gave them.
        p = self.ctl(d, "-j", "qp", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), flows[1:])

    def test_solar_list(self):
        keys = ["role", "conn", "peer_conn", "block_bytes", "paths", "ios_in_flight", "ios_done",
                "blocks_acked", "blocks_received", "crc_drops", "nacks_received"]
        info = dict(zip(keys, ["initiator", 0x21, 0x35, 1024, 2, 3, 400, 1600, 0, 0, 1]))
        info["route1"] = "port 1: 10.99.1.1 > 10.99.1.2"
        for p, vals in enumerate([("up", 0, 71680, 265261, 900, 2, 1, 0),
                                  ("down", 1, 1024, 0, 700, 9, 4, 1)]):
            for k, v in zip(["state", "route", "cwnd", "srtt_ns", "sent", "resent", "timeouts",
                             "downs"], vals):
                info[f"path{p}_{k}"] = v
        conn = {"id": 4, "app": 3, "transport": "solar", "local": "10.99.0.1:7000",
                "remote": "10.99.0.2:7000", "info": info, "info_keys": list(info)}
        listing = {"flows": [self.FLOW, conn], "listeners": [], "transports": ["tcp", "solar"],
                   "bindings": []}
        d = self.fake(lambda r: ok(r, listing))
        p = self.ctl(d, "solar")  # the verb defaults to list
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.list")
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), [
            "solar", "4:", "initiator", "conn", "33", "->", "10.99.0.2", "conn", "53", "app", "3",
            "block", "1024", "I/Os", "in", "flight", "3,", "done", "400", "blocks", "acked",
            "1600,", "received", "0", "crc", "drops", "0", "nacks", "1"])
        self.assertEqual(lines[1], "  route 1: port 1: 10.99.1.1 > 10.99.1.2")
        self.assertEqual(lines[2].split(), ["PATH", "STATE", "ROUTE", "CWND", "SRTT-US", "SENT",
                                            "RESENT", "TIMEOUTS", "DOWNS"])
        self.assertEqual(lines[3].split(), ["0", "up", "0", "71680", "265.3", "900", "2", "1", "0"])
        self.assertEqual(lines[4].split(), ["1", "down", "1", "1024", "0.0", "700", "9", "4", "1"])
        self.assertEqual(lines[5], "1 Solar connection(s)")
        p = self.ctl(d, "-j", "solar", "list")
        self.assertEqual(json.loads(p.stdout), [conn])

    def test_qp_list_rates_and_alpha(self):
        cases = [(100_000_000_000, 1_000_000, "100G", "1.000"),
                 (40_000_000_000, 500_000, "40G", "0.500"),
                 (1_234_000_000, 2, "1.234G", "0.000"),  # 4 significant digits
                 (800_000_000, 999_499, "800M", "0.999"),
                 (1_500, 0, "1.5K", "0.000"),
                 (10, 0, "10", "0.000")]
        for bps, ppm, rate, alpha in cases:
            listing = {"flows": [self.qp(1, 1, rate_bps=bps, alpha_ppm=ppm)], "listeners": [],
                       "transports": ["rocev2"], "bindings": []}
            d = self.fake(lambda r: ok(r, listing))
            p = self.ctl(d, "qp", "list")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout.splitlines()[1].split()[14:16], [rate, alpha], bps)

    def test_qp_list_when_none(self):
        d = self.fake(lambda r: ok(r, {"flows": [self.FLOW], "listeners": [],
                                       "transports": ["tcp"], "bindings": []}))
        p = self.ctl(d, "qp", "list")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.splitlines()[1:], ["0 queue pair(s)"])
        p = self.ctl(d, "-j", "qp", "list")
        self.assertEqual(json.loads(p.stdout), [])

    def test_qp_show_groups_every_value(self):
        d, flows = self.qp_daemon()
        p = self.ctl(d, "qp", "show", "5")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.show")
        self.assertEqual(d.requests[-1]["args"], {"id": 5})
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0], "qp 5: qpn 17 -> 10.99.0.2 qpn 18  RTS  app 2 "
                                   "(flow 10.99.0.1:4791 -> 10.99.0.2:4791)")
        self.assertEqual(lines[1].split(), ["qp", "state", "RTS", "qpn", "17", "dest_qpn", "18",
                                            "pmtu", "4096", "recovery", "go-back-n", "spray",
                                            "1", "reorder", "1"])
        self.assertEqual(lines[2].split(), [
            "requester", "sq_psn", str(0x10020), "una_psn", str(0x10010), "outstanding_psns",
            "16", "send_queued", "3", "reads_outstanding", "0"])
        self.assertEqual(lines[3].split(), ["responder", "epsn", str(0xABCDEF), "msn", "7",
                                            "recv_posted", "16"])
        self.assertEqual(lines[4].split()[:5], ["retries", "retries_left", "7",
                                                "rnr_retries_left", "6"])
        self.assertEqual(lines[5], "  dcqcn       dcqcn on  rate_bps 12500000000 (12.5G)  "
                         "target_rate_bps 25000000000 (25G)  rate_limit_bps 100000000000 (100G)"
                         "  alpha_ppm 31250 (0.031)  rate_decreases 0  ce_received 0  "
                         "cnps_sent 4  cnps_received 11")
        self.assertEqual(lines[6].split()[:3], ["counters", "tx_packets", "900"])
        self.assertEqual(lines[7].split()[0], "errors")
        self.assertEqual(len(lines), 8)  # no key left over
        # Every key the transport reported is printed once (after each line's theme).
        words = [w for line in lines[1:] for w in line.split()[1:]]
        for k in self.QP_KEYS:
            self.assertEqual(words.count(k), 1, k)
        p = self.ctl(d, "-j", "qp", "show", "6")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout), flows[2])

    def test_qp_show_errors(self):
        d, _ = self.qp_daemon()
        # A flow of another transport is not a queue pair; -j changes nothing.
        for args in (["qp", "show", "3"], ["-j", "qp", "show", "3"]):
            p = self.ctl(d, *args)
            self.assertEqual(p.returncode, 1, args)
            self.assertEqual(p.stdout, "")
            self.assertEqual(p.stderr, "cleavectl: flow 3 is not a queue pair (its transport is "
                                       "tcp, not rocev2)\n")
        p = self.ctl(d, "qp", "show", "4")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "cleavectl: no flow with id 4\n")
        sent = len(d.requests)
        for bad in ("x", "-1", "4294967295", "1.5"):
            p = self.ctl(d, "qp", "show", bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(f"qp show: expected a queue pair's flow id (a number), got '{bad}'",
                          p.stderr)
        self.assertEqual(len(d.requests), sent)  # usage errors send nothing

    def test_flow_show_errors(self):
        d = self.fake(lambda r: {"version": 1, "id": r["id"], "ok": False,
                                 "error": {"code": "not_found", "message": "no flow with id 4"}})
        p = self.ctl(d, "flow", "show", "4")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, "cleavectl: no flow with id 4\n")
        for bad in ("x", "-1", "4294967295", "1.5"):
            p = self.ctl(d, "flow", "show", bad)
            self.assertEqual(p.returncode, 2, bad)
            self.assertIn(f"flow show: expected a flow id (a number), got '{bad}'", p.stderr)
        self.assertEqual(len(d.requests), 1)  # usage errors send nothing

    def test_flow_attach(self):
        d = self.fake(lambda r: ok(r, {"port": 5001, "transport": "tcp",
                                       "params": {"cc": "cubic"}}))
        p = self.ctl(d, "flow", "attach", "port", "5001", "transport", "tcp", "cc", "cubic")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.attach")
        self.assertEqual(d.requests[-1]["args"],
                         {"port": 5001, "transport": "tcp", "params": {"cc": "cubic"}})
        self.assertEqual(p.stdout, "port 5001: transport tcp cc cubic\n")
        # Keywords in any order; no transport and no params are left out of the request.
        self.ctl(d, "flow", "attach", "mss", "1400", "port", "80")
        self.assertEqual(d.requests[-1]["args"], {"port": 80, "params": {"mss": "1400"}})
        self.ctl(d, "flow", "attach", "port", "80")
        self.assertEqual(d.requests[-1]["args"], {"port": 80})
        self.ctl(d, "flow", "attach", "port", "80", "uid", "1000")
        self.assertEqual(d.requests[-1]["args"], {"port": 80, "uid": 1000})

    def test_flow_attach_and_detach_a_tuple(self):
        b = {"tuple": {"local": "10.0.0.1:5001", "remote": "*:*"}, "uid": 0, "transport": "tcp",
             "params": {"cc": "dctcp"}}
        d = self.fake(lambda r: ok(r, b))
        p = self.ctl(d, "flow", "attach", "cc", "dctcp", "tuple", "10.0.0.1:5001", "*:*", "uid",
                     "0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.attach")
        self.assertEqual(d.requests[-1]["args"],
                         {"tuple": {"local": "10.0.0.1:5001", "remote": "*:*"}, "uid": 0,
                          "params": {"cc": "dctcp"}})
        self.assertEqual(p.stdout, "tuple 10.0.0.1:5001 *:*: transport tcp uid 0 cc dctcp\n")
        p = self.ctl(d, "flow", "detach", "tuple", "10.0.0.1:5001", "*:*")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "flow.detach")
        self.assertEqual(d.requests[-1]["args"],
                         {"tuple": {"local": "10.0.0.1:5001", "remote": "*:*"}})
        self.assertEqual(p.stdout, "removed tuple 10.0.0.1:5001 *:*: transport tcp uid 0 cc "
                                   "dctcp\n")
        self.ctl(d, "flow", "detach", "port", "80")
        self.assertEqual(d.requests[-1]["args"], {"port": 80})

    def test_flow_detach_usage_errors_send_nothing(self):
        d = self.fake(lambda r: ok(r, {}))
        for args, msg in (([], "flow detach: missing 'port PORT' or 'tuple LOCAL REMOTE'"),
                          (["port", "1", "cc", "cubic"], "flow detach: unexpected 'cc'"),
                          (["port", "1", "uid", "0"], "flow detach: unexpected 'uid'"),
                          (["tuple", "*:*"], "flow detach: 'tuple' needs two values"),
                          (["port", "1", "tuple", "*:*", "*:*"],
                           "give either 'port PORT' or 'tuple LOCAL REMOTE', not both")):
            p = self.ctl(d, "flow", "detach", *args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(msg, p.stderr, args)
        self.assertEqual(d.requests, [])

    def test_transport_attach_sends_an_absolute_path(self):
        d = self.fake(lambda r: ok(r, {"name": "datagram", "description": "example",
                                       "origin": r["args"]["path"]}))
        p = subprocess.run([CLEAVECTL, "-s", d.path, "transport", "attach", "plugins/../d.so"],
                           cwd="/tmp", capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "transport.attach")
        self.assertEqual(d.requests[-1]["args"], {"path": "/tmp/d.so"})
        self.assertEqual(p.stdout, "transport datagram loaded from /tmp/d.so: example\n")
        self.ctl(d, "transport", "attach", "/opt/x.so")
        self.assertEqual(d.requests[-1]["args"], {"path": "/opt/x.so"})

    def test_flow_attach_usage_errors_send_nothing(self):
        d = self.fake(lambda r: ok(r, {}))
        for args, msg in (([], "flow attach: missing 'port PORT' or 'tuple LOCAL REMOTE'"),
                          (["transport", "tcp"], "flow attach: missing 'port PORT'"),
                          (["tuple", "*:*"], "flow attach: 'tuple' needs two values"),
                          (["tuple", "*:*", "*:*", "port", "1"], "not both"),
                          (["port", "1", "uid", "root"],
                           "flow attach: expected a user id (a number), got 'root'"),
                          (["port", "1", "uid", "-1"], "got '-1'"),
                          (["port"], "flow attach: 'port' needs a value"),
                          (["port", "1", "cc"], "flow attach: 'cc' needs a value"),
                          (["port", "0"], "expected a port number from 1 to 65535, got '0'"),
                          (["port", "65536"], "got '65536'"),
                          (["port", "http"], "got 'http'"),
                          (["port", "1", "port", "2"], "flow attach: 'port' is given twice"),
                          (["port", "1", "transport", "a", "transport", "b"],
                           "flow attach: 'transport' is given twice"),
                          (["port", "1", "cc", "a", "cc", "b"], "flow attach: 'cc' is given twice")):
            p = self.ctl(d, "flow", "attach", *args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(msg, p.stderr, args)
            self.assertIn("Try 'cleavectl help'", p.stderr)
        self.assertEqual(d.requests, [])

    def test_port_fault(self):
        off = {"enabled": False, "loss": 0, "reorder": 0, "duplicate": 0, "seed": 1}
        on = {"enabled": True, "loss": 0.01, "reorder": 0.02, "duplicate": 0, "seed": 7}
        d = self.fake(lambda r: ok(r, {"name": "p0", "faults": {"rx": on, "tx": off}}))
        p = self.ctl(d, "port", "fault", "p0", "rx", "loss", "0.01", "reorder", "0.02", "seed",
                     "7")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "port.fault")
        self.assertEqual(d.requests[-1]["args"],
                         {"name": "p0", "dir": "rx", "loss": 0.01, "reorder": 0.02, "seed": 7})
        self.assertEqual(p.stdout, "p0:\n"
                         "    rx faults on: loss 0.01 reorder 0.02 duplicate 0 seed 7\n"
                         "    tx faults off: loss 0 reorder 0 duplicate 0 seed 1\n")
        # Both directions unless one is named; off sends no settings.
        self.ctl(d, "port", "fault", "p0", "duplicate", "0.5")
        self.assertEqual(d.requests[-1]["args"], {"name": "p0", "duplicate": 0.5})
        self.ctl(d, "port", "fault", "p0", "off")
        self.assertEqual(d.requests[-1]["args"], {"name": "p0"})
        self.ctl(d, "port", "fault", "p0", "tx", "off")
        self.assertEqual(d.requests[-1]["args"], {"name": "p0", "dir": "tx"})

    def test_port_fault_usage_errors_send_nothing(self):
        d = self.fake(lambda r: ok(r, {}))
        for args, msg in (([], "wrong number of arguments"),
                          (["p0"], "port fault: give off, or loss/reorder/duplicate P"),
                          (["p0", "rx"], "port fault: give off"),
                          (["p0", "loss"], "port fault: 'loss' needs a value"),
                          (["p0", "loss", "1.01"], "loss: expected a probability from 0 to 1, "
                                                   "got '1.01'"),
                          (["p0", "reorder", "-0.1"], "got '-0.1'"),
                          (["p0", "duplicate", "nan"], "got 'nan'"),
                          (["p0", "loss", "0.1", "loss", "0.2"], "'loss' is given twice"),
                          (["p0", "seed", "x"], "seed: expected a non-negative integer"),
                          (["p0", "corrupt", "0.1"], "unknown setting 'corrupt'"),
                          (["p0", "off", "loss", "0.1"], "nothing may follow 'off'")):
            p = self.ctl(d, "port", "fault", *args)
            self.assertEqual(p.returncode, 2, args)
            self.assertIn(msg, p.stderr, args)
        self.assertEqual(d.requests, [])

    def test_port_show_prints_faults_in_use(self):
        port = {"name": "p0", "device": "net_null0", "port_id": 0, "driver": "net_null",
                "link": None, "mtu": 1500, "mac": "02:00:00:00:00:01", "ipv4": "10.0.0.1/24",
                "gateway": None, "exception_tap": None, "routes": [], "counters": None,
                "xstats": {},
                "faults": {"rx": {"enabled": True, "loss": 0.01, "reorder": 0, "duplicate": 0,
                                  "seed": 3, "dropped": 12, "reordered": 0, "duplicated": 0},
                           "tx": {"enabled": False, "loss": 0, "reorder": 0, "duplicate": 0,
                                  "seed": 1, "dropped": 0, "reordered": 0, "duplicated": 0}}}
        d = self.fake(lambda r: ok(r, [port]))
        p = self.ctl(d, "port", "show")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("    rx faults on: loss 0.01 reorder 0 duplicate 0 seed 3  dropped 12 "
                      "reordered 0 duplicated 0\n", p.stdout)
        self.assertNotIn("tx faults", p.stdout)

    def test_flow_attach_refused_is_exit_1_with_the_transports_reason(self):
        msg = ("cannot attach to port 5001: tcp: unknown congestion control 'nosuch' "
               "(have newreno, cubic, dctcp)")
        d = self.fake(lambda r: {"version": 1, "id": r["id"], "ok": False,
                                 "error": {"code": "bad_request", "message": msg}})
        p = self.ctl(d, "flow", "attach", "port", "5001", "cc", "nosuch")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(p.stderr, f"cleavectl: {msg}\n")

    def test_transport_list(self):
        listing = {"transports": [
            {"name": "tcp", "description": "TCP on headers", "origin": "built-in",
             "claims": "IP protocol 6", "instantiated": True, "flows": 2, "listeners": 1},
            {"name": "datagram", "description": "example", "origin": "/x/d.so",
             "claims": "UDP 9000-9015", "instantiated": False, "flows": 0, "listeners": 0},
            {"name": "none", "description": "claims nothing", "origin": "/x/n.so",
             "claims": "", "instantiated": False, "flows": 0, "listeners": 0}]}
        d = self.fake(lambda r: ok(r, listing))
        p = self.ctl(d, "transport")  # the verb defaults to list
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(d.requests[-1]["command"], "transport.list")
        lines = p.stdout.splitlines()
        self.assertEqual(lines[0].split(), ["NAME", "ORIGIN", "CLAIMS", "RUNNING", "FLOWS",
                                            "LISTENERS", "DESCRIPTION"])
        self.assertEqual(lines[1].split(), ["tcp", "built-in", "IP", "protocol", "6", "yes", "2",
                                            "1", "TCP", "on", "headers"])
        self.assertEqual(lines[2].split(), ["datagram", "/x/d.so", "UDP", "9000-9015", "no", "0",
                                            "0", "example"])
        self.assertEqual(lines[3].split(), ["none", "/x/n.so", "-", "no", "0", "0", "claims",
                                            "nothing"])

    def test_stats_show_has_the_flow_path(self):
        arp = dict.fromkeys(["requests_rx", "requests_tx", "replies_rx", "replies_tx",
                             "resolved", "failed", "conflicts", "table_full"], 0)
        stats = {"lcores": [], "ports": {}, "arp": arp,
                 "icmp": {"echo_requests": 0, "echo_replies": 0}, "drops": {}, "drops_total": 0,
                 "flows": {"rx_segments": 12, "rst_sent": 1, "events": 0}}
        d = self.fake(lambda r: ok(r, stats))
        p = self.ctl(d, "stats")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("flow path:\n", p.stdout)
        self.assertRegex(p.stdout, r"\n  rx_segments +12  segments handed to transports\n")
        self.assertRegex(p.stdout, r"\n  rst_sent +1  RSTs sent for segments that matched no flow")
        self.assertNotIn("events", p.stdout)  # zero counters are not listed
        stats["flows"] = {"rx_segments": 0}
        p = self.ctl(d, "stats")
        self.assertIn("flow path: no activity (every counter is zero)\n", p.stdout)


class CleavectlUsage(unittest.TestCase):
    def test_usage_errors_are_exit_2(self):
        for args in ([], ["frob"], ["port", "frob"], ["route", "get"], ["arp", "show", "x"],
                     ["status", "now"], ["--frobnicate", "status"], ["flow", "frob"],
                     ["flow", "show"], ["flow", "list", "x"], ["flow", "attach"],
                     ["transport", "list", "x"], ["transport", "show"], ["transport", "attach"],
                     ["transport", "attach", "a.so", "b.so"], ["flow", "detach"],
                     ["qp", "show"], ["qp", "list", "x"], ["qp", "show", "1", "2"],
                     ["qp", "frob"]):
            p = run([CLEAVECTL, "-s", "/nonexistent.sock"] + args)
            self.assertEqual(p.returncode, 2, args)
            self.assertTrue(p.stderr.startswith("cleavectl: ") or p.stderr.startswith("Usage"),
                            (args, p.stderr))

    def test_help_is_exit_0(self):
        for args in (["help"], ["-h"], ["--help"]):
            p = run([CLEAVECTL] + args)
            self.assertEqual(p.returncode, 0)
            self.assertIn("Objects and verbs", p.stdout)

    def test_no_daemon_says_what_to_do(self):
        p = run([CLEAVECTL, "-s", "/nonexistent/cleaved.sock", "status"])
        self.assertEqual(p.returncode, 2)
        self.assertIn("cannot connect to cleaved at /nonexistent/cleaved.sock", p.stderr)
        self.assertIn("is cleaved running?", p.stderr)

    def test_stale_socket_is_explained(self):
        d = tempfile.mkdtemp()
        path = os.path.join(d, "cleaved.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.close()  # the file stays, nobody listens
        p = run([CLEAVECTL, "-s", path, "status"])
        os.unlink(path)
        os.rmdir(d)
        self.assertEqual(p.returncode, 2)
        self.assertIn("stale socket", p.stderr)

    def test_socket_from_environment(self):
        p = subprocess.run([CLEAVECTL, "status"], capture_output=True, text=True,
                           env=dict(os.environ, CLEAVE_SOCKET="/nonexistent/env.sock"))
        self.assertIn("/nonexistent/env.sock", p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
