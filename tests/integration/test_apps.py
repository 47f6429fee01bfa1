#!/usr/bin/python3
"""test_apps.py - the app socket of a real cleaved: admission by SO_PEERCRED, version
negotiation, quotas, protocol violations, hostile apps next to a well-behaved one, and reclaim
after kill -9; local users flooding the socket (refused at accept, capped per uid); a dataplane
that does not answer an attach in time (the CLEAVE_TEST_HOOKS stall).

cleaved runs on a net_null port (no network is needed for the app path). Apps here speak the
protocol byte by byte (rawapp.py), as a hostile app would.
"""

import fcntl
import os
import random
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

import cleavetest as ct
import rawapp as ra

CONFIG = ct.CONFIG_HEAD + """apps:
  max_apps: 8
  quota:
    region_mb: 4
    memory_mb: 8
    pipes: 4
    mrs: 2
    pipe_entries: 1024
    error_budget: 32
  allow:
    - uid: 0
ports:
  - name: n0
    device: net_null0,no-rx=1
    ipv4: 10.9.0.1/24
"""


APPTEST = os.environ.get("CL_APPTEST", "build/tests/cl_apptest")
def open_conns(path, n):
    """n connections to the app socket, none saying hello, kept open; returns n."""
    open_conns.kept = []
    for _ in range(n):
        c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        c.connect(path)
        open_conns.kept.append(c)
    return n


def first_messages(expect):
    """The first message each of open_conns' connections got, as [type, status, reason] (None:
    nothing), waited for on the first `expect` of them only (the others are looked at without
    waiting)."""
    out = []
    for i, c in enumerate(open_conns.kept):
        c.settimeout(30 if i < expect else 0)
        try:
            msg = c.recv(512)
        except (socket.timeout, BlockingIOError, OSError):
            msg = b""
        if len(msg) < ra.HDR.size:
            out.append(None)
            continue
        _, _, mtype, _, status = ra.HDR.unpack_from(msg)
        out.append([mtype, status, int.from_bytes(msg[ra.HDR.size:ra.HDR.size + 4], "little")])
    return out


def flood_then_admit(path, n, expect):
    """uid 65534 opens n connections that never say hello and keeps them (until the child is
    released); meanwhile root's app must be admitted. Returns (first_messages(expect) of the n,
    the child)."""
    child = ct.Nobody(lambda: open_conns(path, n), then=lambda: first_messages(expect))
    assert child.result() == n
    app = ra.RawApp(path, "root")  # while the n are open on the user's side
    assert app.status == 0, app.status
    child.proceed()
    got = child.result()
    app.close()
    return got, child


class AppSocket(ct.TestCase):
    def setUp(self):
        self.d = ct.Daemon(CONFIG)
        self.path = os.path.join(self.d.run_dir, "app.sock")
        self.baseline_fds = self.daemon_fds()

    def daemon_fds(self):
        return len(os.listdir(f"/proc/{self.d.proc.pid}/fd"))

    def apps(self):
        return self.d.ctl("app", "list")[1]["apps"]

    def queues(self, app, entries=256):
        cq = app.create_pipe(ra.COMPLETION, entries * 2)
        sq = app.create_pipe(ra.SUBMIT, entries, cq.id)
        return cq, sq

    def wait_completion(self, cq, timeout=2.0):
        return _wait_completion(cq, timeout)

    def test_hello_region_and_round_trip(self):
        app = ra.RawApp(self.path, "probe")
        self.assertEqual(app.status, 0)
        self.assertEqual(struct_magic(app.region), ra.MAGIC)
        self.assertEqual(app.size, 4 << 20)
        self.assertEqual(app.quota[1:4], (4, 2, 64))  # pipes, mrs, flows
        cq, sq = self.queues(app)
        app.write_heap(0, bytes(range(256)) * 4)
        self.assertTrue(sq.produce(ra.send_entry(ra.OP_NOP, wr_id=1)))
        self.assertTrue(sq.produce(ra.send_entry(ra.OP_COPY, 2, 0, 0, 1024, 0, 65536)))
        c1, c2 = self.wait_completion(cq), self.wait_completion(cq)
        self.assertEqual((c1["wr_id"], c1["status"]), (1, 0))
        self.assertEqual((c2["wr_id"], c2["status"], c2["length"]), (2, 0, 1024))
        self.assertEqual(app.heap(65536, 1024), bytes(range(256)) * 4)
        [a] = self.apps()
        self.assertEqual((a["name"], a["pid"], a["uid"], a["pipes"]), ("probe", os.getpid(), 0, 2))
        self.assertEqual(a["counters"]["ops"], {"nop": 1, "copy": 1, "send": 0, "flow_send": 0,
                                                "flow_recv": 0, "flow_close": 0, "flow_abort": 0,
                                                "rdma_write": 0, "rdma_read": 0})
        self.assertEqual(a["counters"]["bytes"], 1024)
        self.assertTrue(a["dpdk_external_memory"])  # DPDK itself knows the region
        shown = self.d.ctl("app", "show", str(a["id"]))[1]
        self.assertEqual([p["kind"] for p in shown["pipe_list"]], ["completion", "submit"])
        self.assertEqual(shown["mr_list"][0]["kind"], "heap")
        app.close()
        ct.wait_until(lambda: not self.apps(), what="the app to be reclaimed")

    def test_submit_summary_word_is_a_hint(self):
        """Version 4: an app that marks its submit pipe in the summary word (the header page's
        second cache line) is served and the daemon takes the bit; one that never marks it,
        or writes garbage there, is served all the same (the daemon's sweep), every request
        exactly once."""
        app = ra.RawApp(self.path, "marks", versions=(4, 4))
        self.assertEqual((app.status, app.version), (0, 4))
        cq, sq = self.queues(app)
        word = 64  # abi::kSubmitSummaryOffset
        bit = 1 << (sq.id % 64)
        self.assertTrue(sq.produce(ra.send_entry(ra.OP_NOP, wr_id=1)))
        struct.pack_into("<Q", app.region, word, bit)
        self.assertEqual(self.wait_completion(cq)["wr_id"], 1)
        ct.wait_until(lambda: struct.unpack_from("<Q", app.region, word)[0] == 0,
                      what="the daemon to take the bit")
        # Never marked, then garbage that names every pipe but this one: served, in order.
        for i, garbage in enumerate([0, ~bit & (1 << 64) - 1, 0]):
            struct.pack_into("<Q", app.region, word, garbage)
            for k in range(3):
                self.assertTrue(sq.produce(ra.send_entry(ra.OP_NOP, wr_id=10 * i + k + 2)))
            got = [self.wait_completion(cq) for _ in range(3)]
            self.assertEqual([(c["wr_id"], c["status"]) for c in got],
                             [(10 * i + k + 2, 0) for k in range(3)])
        self.assertIsNone(cq.consume())
        [a] = self.apps()
        self.assertEqual(a["counters"]["ops"]["nop"], 10)
        self.assertEqual(a["counters"]["errors_total"], 0)
        app.close()

    def test_send_into_posted_receive_with_doorbell(self):
        _doorbell_round_trip(self, self.path)
        # A port without interrupts (net_null): the lcore wrote the eventfd itself.
        self.assertNotIn("irqs", self.d.ctl("port", "show", "n0")[1][0]["xstats"])

    def test_region_on_hugepages_when_reserved(self):
        nr = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        free = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages"
        if not os.path.exists(nr):
            self.skipTest("no 2 MiB hugepage support in this kernel")
        before = open(nr).read().strip()
        ct._cleanups.append(lambda: open(nr, "w").write(before))
        with open(nr, "w") as f:
            f.write(str(int(before) + 8))
        free_before = int(open(free).read())
        app = ra.RawApp(self.path, "huge")
        self.assertEqual(app.flags & 1, 1)  # kRegionHugetlb
        self.assertEqual(int(open(free).read()), free_before - 2)  # a 4 MiB region
        self.assertTrue(self.apps()[0]["hugepages"])
        cq, sq = self.queues(app)
        app.write_heap(0, b"on hugepages")
        sq.produce(ra.send_entry(ra.OP_COPY, 1, 0, 0, 12, 0, 1 << 20))
        self.assertEqual(self.wait_completion(cq)["status"], 0)
        self.assertEqual(app.heap(1 << 20, 12), b"on hugepages")
        app.close()
        ct.wait_until(lambda: int(open(free).read()) == free_before,
                      what="the region's hugepages to be given back")

    def test_not_admitted_uid_is_refused(self):
        os.chmod(self.d.dir, 0o755)  # let uid 65534 reach the socket: only cleaved may refuse it
        child = ct.Nobody(lambda: ra.RawApp(self.path).status)
        self.assertEqual(child.result(), ra.EPERM)
        child.release()
        self.assertIn("no rule in apps.allow admits it", self.d.logs())
        self.assertEqual(self.apps(), [])

    def test_a_user_no_rule_admits_is_refused_at_once_and_holds_no_slot(self):
        # More connections than max_apps (8) and max_pending (16) together, all kept open by a
        # user no rule admits: each is refused as it is accepted, so the admitted lose nothing.
        os.chmod(self.d.dir, 0o755)
        got, child = flood_then_admit(self.path, 40, 40)
        self.assertEqual(got, [[ra.T_NOTICE, ra.EPERM, ra.NOTICE_REFUSED]] * 40)
        st = self.d.ctl("status")[1]["app_socket"]
        self.assertEqual((st["refused_not_allowed"], st["pending"]), (40, 0))
        child.release()

    def test_version_negotiation(self):
        app = ra.RawApp(self.path, versions=(5, 6))
        self.assertEqual(app.status, ra.EVERSION)
        self.assertEqual(app.versions, (1, 4))
        ok = ra.RawApp(self.path, versions=(1, 9))
        self.assertEqual((ok.status, ok.version), (0, 4))
        v1 = ra.RawApp(self.path, versions=(1, 1))  # version 1 apps still connect
        self.assertEqual((v1.status, v1.version), (0, 1))

    def test_quotas_and_bad_arguments(self):
        app = ra.RawApp(self.path)
        cq = app.create_pipe(ra.COMPLETION, 1024)
        self.assertEqual(app.create_pipe(ra.COMPLETION, 2048), ra.EDQUOT)  # over pipe_entries
        self.assertEqual(app.create_pipe(ra.COMPLETION, 100), ra.EINVAL)   # not a power of two
        self.assertEqual(app.create_pipe(9, 64), ra.EINVAL)                # unknown kind
        self.assertEqual(app.create_pipe(ra.SUBMIT, 64, cq=3), ra.ENOENT)  # no such CQ
        r, w = os.pipe()  # a doorbell that is not an eventfd could block the dataplane
        self.assertEqual(app.create_pipe(ra.COMPLETION, 64, doorbell_fd=r), ra.EINVAL)
        self.assertEqual(app.create_pipe(ra.SUBMIT, 64, doorbell_fd=os.eventfd(0)), ra.EINVAL)
        sq = app.create_pipe(ra.SUBMIT, 64, cq.id)
        self.assertEqual(app.destroy_pipe(cq.id), ra.EBUSY)  # a queue still completes into it
        for _ in range(2):
            self.assertIsInstance(app.create_pipe(ra.RECV, 64, cq.id), ra.Pipe)
        self.assertEqual(app.create_pipe(ra.RECV, 64, cq.id), ra.EDQUOT)  # 4 pipes
        self.assertEqual(app.destroy_pipe(sq.id), 0)
        self.assertEqual(app.destroy_pipe(sq.id), ra.ENOENT)
        # MRs: sealed memfds only, within the memory quota (8 MiB, 4 of them the region).
        self.assertEqual(app.reg_mr(ra.sealed_memfd(4096, seal=False), 4096), ra.EINVAL)
        self.assertEqual(app.reg_mr(ra.sealed_memfd(4096), 8192), ra.EINVAL)  # longer than the fd
        self.assertEqual(app.reg_mr(ra.sealed_memfd(8 << 20), 5 << 20), ra.EDQUOT)
        self.assertEqual(app.reg_mr(ra.sealed_memfd(4096), 4096, access=0x10), ra.EINVAL)
        mr1 = app.reg_mr(ra.sealed_memfd(1 << 20), 1 << 20)
        mr2 = app.reg_mr(ra.sealed_memfd(4096), 4096, access=ra.READ)
        self.assertEqual((mr1, mr2), (1, 2))
        shown = self.d.ctl("app", "show", str(app.app_id))[1]
        self.assertEqual([(m["id"], m["access"], m["dpdk_external_memory"])
                          for m in shown["mr_list"][1:]], [(1, "rw", True), (2, "r", True)])
        self.assertEqual(app.reg_mr(ra.sealed_memfd(4096), 4096), ra.EDQUOT)  # 2 MRs
        [a] = self.apps()
        self.assertEqual(a["memory_bytes"], (4 << 20) + (1 << 20) + 4096)
        self.assertEqual(app.dereg_mr(mr1), 0)
        self.assertEqual(app.dereg_mr(mr1), ra.ENOENT)
        self.assertEqual(self.apps()[0]["mrs"], 1)

    def test_protocol_violations_close_the_connection(self):
        bad = [
            b"\x01\x02",                                               # shorter than a header
            ra.header(ra.T_HELLO, 1, magic=0xdeadbeef) + bytes(40),    # bad magic
            ra.header(ra.T_PIPE_CREATE, 1) + bytes(16),                # before hello
            ra.header(ra.T_HELLO, 1) + bytes(10),                      # wrong size
            ra.header(77, 1) + bytes(40),                              # unknown type
            bytes(random.Random(1).randrange(256) for _ in range(300)),  # noise
        ]
        for i, msg in enumerate(bad):
            app = ra.RawApp(self.path, hello=False)
            try:
                (_, _, _, _, status), _, _ = app.request(0, raw=msg)
                self.assertEqual(status, ra.EPROTO, f"message {i}")
            except (ConnectionResetError, OSError):
                pass
            with self.assertRaises((ConnectionResetError, OSError), msg=f"message {i}"):
                app.request(ra.T_HELLO, raw=ra.header(ra.T_HELLO, 2) + bytes(40))
            app.close()
        # After hello: a second hello, and a message with two fds.
        app = ra.RawApp(self.path)
        self.assertEqual(app.request(ra.T_HELLO, raw=ra.header(ra.T_HELLO, 5) + bytes(40))[0][4],
                         ra.EPROTO)
        app = ra.RawApp(self.path)
        fds = [os.eventfd(0), os.eventfd(0)]
        self.assertEqual(app.request(ra.T_PIPE_CREATE, bytes(16), fds)[0][4], ra.EPROTO)
        ct.wait_until(lambda: self.apps() == [], what="every app closed")
        self.assertIn("protocol error", self.d.logs())
        ct.wait_until(lambda: self.daemon_fds() <= self.baseline_fds,
                      what="the daemon's fds back to where they were")

    def test_kill9_reclaims_everything(self):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                app = ra.RawApp(self.path, "victim")
                cq = app.create_pipe(ra.COMPLETION, 512, doorbell_fd=os.eventfd(0))
                sq = app.create_pipe(ra.SUBMIT, 256, cq.id)
                app.reg_mr(ra.sealed_memfd(1 << 20), 1 << 20)
                os.write(w, b"x")
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # mid-use when the kill comes
                    sq.produce(ra.send_entry(ra.OP_COPY, 1, 0, 0, 65536, 0, 65536))
                    while cq.consume() is not None:
                        pass
            finally:
                os._exit(0)
        os.read(r, 1)
        [a] = self.apps()
        self.assertEqual((a["name"], a["pipes"], a["mrs"]), ("victim", 2, 1))
        ct.wait_until(lambda: self.apps()[0]["counters"]["ops"]["copy"] > 100,
                      what="the victim to be busy copying")
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        t0 = time.monotonic()
        ct.wait_until(lambda: self.apps() == [], interval=0.01,
                      what="the killed app to be reclaimed")
        # Reclaimed on the socket's hangup (no timer is involved: without it the app would stay
        # listed); how long it took is printed, not judged.
        print(f"killed app reclaimed in {time.monotonic() - t0:.3f} s", file=sys.stderr)
        self.assertRegex(self.d.logs(), r"'victim' \(pid \d+\) disconnected: reclaimed its "
                                        r"region, 2 pipe\(s\) and 1 MR\(s\)")
        ct.wait_until(lambda: self.daemon_fds() <= self.baseline_fds,
                      what="the daemon's fds back to where they were")
        os.close(r)
        os.close(w)

    def test_hostile_app_is_evicted_and_a_good_app_is_unaffected(self):
        good = ra.RawApp(self.path, "good")
        gcq, gsq = self.queues(good)
        evil = ra.RawApp(self.path, "evil")
        ecq, esq = self.queues(evil, 512)
        # The good app's data, which the hostile one must never see.
        secret = bytes(random.Random(2).randrange(256) for _ in range(4096))
        good.write_heap(0, secret)
        # The good app's MR 1 holds the secret too; MR ids are per app, so the hostile app's
        # "MR 1" below names nothing it owns.
        mfd = ra.sealed_memfd(1 << 20)
        os.pwrite(mfd, secret, 0)
        self.assertEqual(good.reg_mr(mfd, 1 << 20), 1)
        evil.write_heap(0, bytes(65536))
        stop = threading.Event()
        results = {"copies": 0, "bad": 0}

        def good_loop():
            n = 0
            while not stop.is_set():
                dst = 8192 + (n % 8) * 4096
                good.write_heap(dst, bytes(4096))
                gsq.produce(ra.send_entry(ra.OP_COPY, n, 0, 0, 4096, 0, dst))
                c = self.wait_completion(gcq)
                if c["status"] != 0 or c["wr_id"] != n or good.heap(dst, 4096) != secret:
                    results["bad"] += 1
                results["copies"] += 1
                n += 1

        t = threading.Thread(target=good_loop)
        t.start()
        try:
            big = evil.heap_size
            hostile = [
                ra.send_entry(ra.OP_COPY, 1, 0, big - 8, 64, 0, 0),           # past the end
                ra.send_entry(ra.OP_COPY, 2, 0, 2**64 - 16, 64, 0, 0),         # wraps
                ra.send_entry(ra.OP_COPY, 3, 1, 0, 64, 0, 0),                  # good's MR id
                ra.send_entry(ra.OP_COPY, 4, 0, 0, 64, 0, 2**63),              # far target
                ra.send_entry(200, 5),                                         # opcode
                ra.send_entry(ra.OP_SEND, 6, length=8, target=gsq.id + 100),   # no such pipe
            ]
            statuses = set()
            for e in hostile:
                self.assertTrue(esq.produce(e))
                statuses.add(self.wait_completion(ecq)["status"])
            self.assertEqual(statuses, {ra.EFAULT, -2, ra.EOPNOTSUPP, ra.EINVAL})
            # Descriptors rewritten after posting, random bytes in the ring, then a flood: the
            # error budget (32/s) runs out and the daemon says so before closing.
            rng = random.Random(3)
            ring = esq.offset + ra.PIPE_CTL
            for _ in range(3000):
                at = ring + rng.randrange(esq.entries) * 64
                evil.region[at:at + 64] = bytes(rng.randrange(256) for _ in range(64))
            for i in range(2000):
                if not esq.produce(ra.send_entry(ra.OP_COPY, i, 0, big, 1, 0, 0)):
                    break
            (magic, _, mtype, _, _), payload, _ = evil.reply()
            self.assertEqual(mtype, ra.T_NOTICE)
            self.assertEqual(int.from_bytes(payload[:4], "little"), ra.NOTICE_EVICTED)
        finally:
            time.sleep(0.3)
            stop.set()
            t.join()
        self.assertGreater(results["copies"], 10)
        self.assertEqual(results["bad"], 0)
        self.assertEqual(evil.heap(0, 65536), bytes(65536))  # never received foreign bytes
        [a] = self.apps()
        self.assertEqual(a["name"], "good")
        self.assertEqual(a["counters"]["errors_total"], 0)
        self.assertRegex(self.d.logs(), r"app \d+ 'evil' .* over its error budget")


def _wait_completion(cq, timeout=2.0):
    return ct.wait_until(cq.consume, timeout=timeout, interval=0.001, what="a completion")


def _doorbell_round_trip(t, path):
    """A SEND into a posted receive while the app sleeps on its completion queue's doorbell:
    woken, both completions there, the bytes placed."""
    app = ra.RawApp(path)
    efd = os.eventfd(0, os.EFD_NONBLOCK)
    cq = app.create_pipe(ra.COMPLETION, 512, doorbell_fd=efd)
    sq = app.create_pipe(ra.SUBMIT, 128, cq.id)
    rq = app.create_pipe(ra.RECV, 128, cq.id)
    app.write_heap(0, b"hello, cleave")
    t.assertTrue(rq.produce(ra.recv_entry(4096, 64)))
    # Asleep on the doorbell: the dataplane must write the eventfd.
    app.region[cq.offset + 64] = 1
    sq.produce(ra.send_entry(ra.OP_SEND, wr_id=9, length=13, target=rq.id, imm=77))
    ct.wait_until(lambda: _eventfd_value(efd), what="the doorbell")
    recv, sent = _wait_completion(cq), _wait_completion(cq)
    t.assertEqual((recv["flags"] & 1, recv["wr_id"], recv["length"], recv["imm"]),
                  (1, 0, 13, 77))
    t.assertEqual((sent["wr_id"], sent["status"]), (9, 0))
    t.assertEqual(app.heap(4096, 13), b"hello, cleave")
    t.assertGreaterEqual(t.d.ctl("app", "list")[1]["apps"][0]["counters"]["doorbells"], 1)
    os.close(efd)
    return app


class DoorbellByNicInterrupt(ct.TestCase):
    """On a net_cleave port the lcore raises the NIC's interrupt vector bound to the doorbell
    (a posted command) and the NIC writes the eventfd: the same wake-up, counted as irqs."""

    def test_send_into_posted_receive_woken_by_the_nic(self):
        self.d = ct.Daemon(CONFIG.replace("net_null0,no-rx=1",
                                          "net_cleave0,wire=net_null0,wire_args=no-rx=1"))
        path = os.path.join(self.d.run_dir, "app.sock")
        xstats = lambda: self.d.ctl("port", "show", "n0")[1][0]["xstats"]
        fds = lambda: len(os.listdir(f"/proc/{self.d.proc.pid}/fd"))
        before, fds_before = xstats(), fds()
        app = _doorbell_round_trip(self, path)
        after = xstats()
        self.assertGreaterEqual(after["irqs"], before["irqs"] + 1)
        self.assertEqual(after["irq_errors"], before["irq_errors"])
        # Closed, the app's vector is unbound: the next app's doorbell gets a vector again and
        # the NIC wakes it.
        app.close()
        ct.wait_until(lambda: not self.d.ctl("app", "list")[1]["apps"], what="the app gone")
        _doorbell_round_trip(self, path).close()
        self.assertGreaterEqual(xstats()["irqs"], after["irqs"] + 1)
        self.assertEqual(xstats()["irq_errors"], before["irq_errors"])
        # The NIC's duplicates of the doorbells are closed with their vectors (at most: the
        # first count may hold a management connection the daemon had not closed yet).
        ct.wait_until(lambda: fds() <= fds_before, what="the daemon's descriptors back to "
                      f"{fds_before}")


class PendingPerUser(ct.TestCase):
    """Admitted users' connections that have not said hello: capped per uid (4 by default)."""

    def setUp(self):
        self.d = ct.Daemon(CONFIG.replace("    - uid: 0\n", f"    - uid: 0\n    - uid: {ct.NOBODY}\n"))
        self.path = os.path.join(self.d.run_dir, "app.sock")
        os.chmod(self.d.dir, 0o755)

    def test_one_users_idle_connections_cannot_lock_others_out(self):
        # 30 connections that never say hello, more than max_apps + max_pending (24): at its
        # cap of 4, each newcomer of the user makes room by closing that user's oldest idle one.
        path = self.path
        got, child = flood_then_admit(path, 30, 26)
        self.assertEqual(got[:26], [[ra.T_NOTICE, ra.EAGAIN, ra.NOTICE_REFUSED]] * 26)
        self.assertEqual(got[26:], [None] * 4)  # the user's newest four wait for their hello
        st = self.d.ctl("status")[1]["app_socket"]
        self.assertEqual((st["evicted"], st["max_pending_per_uid"]), (26, 4))
        self.assertEqual(st["pending"] + st["hello_timeouts"], 4)
        child.release()
        # The user's own app is admitted as usual once it says hello.
        child = ct.Nobody(lambda: ra.RawApp(path, "nobody").status)
        self.assertEqual(child.result(), 0)
        child.release()


class StalledDataplane(ct.TestCase):
    """The dataplane does not answer an app's attach in time (a stalled or descheduled lcore,
    made by the debug.ctl_stall test hook). max_apps is 1, so an app the dataplane kept behind
    the main thread's back would leave no room for the next."""

    def setUp(self):
        self.d = ct.Daemon(CONFIG.replace("max_apps: 8", "max_apps: 1"),
                           env={"CLEAVE_TEST_HOOKS": "1"})
        self.path = os.path.join(self.d.run_dir, "app.sock")

    def stall(self, mode):
        a = self.d.request("debug.ctl_stall", {"mode": mode})
        self.assertTrue(a["ok"], a)

    def app_socket(self):
        return self.d.ctl("status")[1]["app_socket"]

    def apps(self):
        return [a["name"] for a in self.d.ctl("app", "list")[1]["apps"]]

    def test_attach_not_taken_in_time_is_withdrawn_and_the_next_app_admitted(self):
        self.stall("queued")
        p = subprocess.run([APPTEST, self.path, "open"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(p.stdout, f"{ra.ETIMEDOUT} timed out\n", p.stderr)
        self.stall("off")
        ct.wait_until(lambda: self.d.ctl("status")[1]["dataplane"]["state"] == "running",
                      what="the dataplane to answer again")
        app = ra.RawApp(self.path, "next")
        self.assertEqual(app.status, 0)
        self.assertEqual(self.apps(), ["next"])
        st = self.app_socket()
        self.assertGreaterEqual(st["dataplane_timeouts"], 1)
        self.assertEqual((st["late_attaches"], st["limbo"]), (0, 0))
        # The table is full for real now (max_apps 1), and frees when the app goes.
        self.assertEqual(ra.RawApp(self.path, "third").status, ra.ENOSPC)
        app.close()
        ct.wait_until(lambda: self.apps() == [], what="the app to be reclaimed")
        self.assertEqual(ra.RawApp(self.path, "fourth").status, 0)

    def test_attach_applied_after_its_hello_gave_up_is_undone(self):
        self.stall("attach")  # the lcore takes the attach and holds it unanswered
        late = ra.RawApp(self.path, "late", timeout=30)
        self.assertEqual(late.status, ra.ETIMEDOUT)
        self.assertEqual(self.app_socket()["limbo"], 1)
        # Until the dataplane answers, its place counts: try again, not "full".
        self.assertEqual(ra.RawApp(self.path, "early", timeout=30).status, ra.EAGAIN)
        self.stall("off")
        ct.wait_until(lambda: self.app_socket()["limbo"] == 0,
                      what="the late attach to be undone")
        self.assertEqual(self.app_socket()["late_attaches"], 1)
        self.assertIn("attached it after its hello had given up", self.d.logs())
        app = ra.RawApp(self.path, "next")
        self.assertEqual(app.status, 0)
        self.assertEqual(self.apps(), ["next"])


def struct_magic(region):
    return int.from_bytes(region[0:4], "little")


def _eventfd_value(fd):
    try:
        return os.eventfd_read(fd)
    except BlockingIOError:
        return 0


if __name__ == "__main__":
    ct.main()
