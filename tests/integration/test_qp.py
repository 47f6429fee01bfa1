#!/usr/bin/python3
"""test_qp.py - queue pairs (RoCEv2 RC) at cleaved's app socket, spoken byte by byte (rawapp.py)
as a buggy or hostile app would: what the daemon takes, what it refuses and why, and that it
loses nothing and keeps running.

cleaved runs on a net_null port (10.9.0.1/24): nothing ever answers, so a QP towards 10.9.0.2 can
go through its states and send, but its requests can only run out of retries. Cases:
  - QpCreate: each bad argument refused with its code; a good one gives a QP number whose low bits
    are the QP's id and the daemon's address as the GID; the QP shows in `cleavectl flow list`;
  - QpModify / QpQuery: transitions out of order, bad values, a PMTU the port's MTU cannot carry
    and the RTR address rules refused;
    RESET -> INIT -> RTR -> RTS taken and read back by QpQuery; another app's QP is not found;
  - work requests: RDMA opcodes and the immediate flag only where they mean something; a WRITE
    that gets no answer fails with CL_ETIMEDOUT after retry_cnt retries, moves the QP to ERR, and
    the requests behind it are flushed with CL_ECANCELED, each completed exactly once;
  - QpDestroy flushes posted receives with CL_ECANCELED; the QP is gone from the flow table;
  - MRs with remote access get an rkey (tag << 16 | NIC MR id) and a new one when re-registered;
    without remote access none;
  - a malformed QP message closes the connection with CL_EPROTO; an app killed with QPs open is
    reclaimed with them;
  - the parameters the daemon takes itself: `transport` (solar; an unknown one or one without
    queue pairs refused) and `volume` (an MR of the app's with remote read and write: another
    app's, an unknown one or one without both rights refused; rocev2 takes none); a Solar
    target's QP goes to RTS (a block larger than the PMTU refused at RTR), shows in
    `cleavectl solar list`, refuses I/O with CL_EOPNOTSUPP, and an initiator's READ towards a
    peer that never answers is flushed with CL_ECANCELED when the QP is destroyed.
"""

import os
import signal
import struct
import subprocess
import sys

import cleavetest as ct
import rawapp as ra

CONFIG = ct.CONFIG_HEAD + """apps:
  max_apps: 8
  quota:
    region_mb: 4
    memory_mb: 64
    pipes: 8
    mrs: 4
    pipe_entries: 1024
    error_budget: 1000
  allow:
    - uid: 0
ports:
  - name: n0
    device: net_null0,no-rx=1
    ipv4: 10.9.0.1/24
"""

PEER = 0x0A090002  # 10.9.0.2, host order
ALL_INIT = dict(access=ra.REMOTE_READ | ra.REMOTE_WRITE)


class QueuePairs(ct.TestCase):
    def setUp(self):
        self.d = ct.Daemon(CONFIG)
        self.path = os.path.join(self.d.run_dir, "app.sock")

    def app(self):
        a = ra.RawApp(self.path, versions=(3, 3))
        self.assertEqual(a.status, 0)
        self.addCleanup(a.close)
        cq = a.create_pipe(ra.COMPLETION, 256)
        sq = a.create_pipe(ra.SUBMIT, 128, cq.id)
        return a, cq, sq

    def qps(self):
        return [f for f in self.d.ctl("flow", "list")[1]["flows"] if f["transport"] == "rocev2"]

    def to_rts(self, a, qp, timeout=14, retry_cnt=7):
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE | ra.QP_ACCESS, state=ra.QPS_INIT, **ALL_INIT), 0)
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE | ra.QP_PMTU | ra.QP_DEST_QPN | ra.QP_RQ_PSN |
                                     ra.QP_REMOTE_IP, state=ra.QPS_RTR, pmtu=1024, dest_qpn=0x1234,
                                     rq_psn=0xFFFFF0, remote_ip=PEER), 0)
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE | ra.QP_SQ_PSN | ra.QP_TIMEOUT |
                                     ra.QP_RETRY_CNT | ra.QP_RNR_RETRY, state=ra.QPS_RTS,
                                     sq_psn=100, timeout=timeout, retry_cnt=retry_cnt,
                                     rnr_retry=7), 0)

    def completions(self, cq, n, timeout=5.0):
        out = []
        ct.wait_until(lambda: (out.extend(iter(cq.consume, None)), len(out) >= n)[1],
                      timeout=timeout, interval=0.002, what=f"{n} completions")
        return out

    def test_create_refusals_and_a_good_one(self):
        a, cq, sq = self.app()
        self.assertEqual(a.qp_create(sq.id)[0], ra.ENOENT)  # a submit pipe is not a CQ
        self.assertEqual(a.qp_create(999)[0], ra.ENOENT)
        self.assertEqual(a.qp_create(cq.id, send_wr=0)[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, recv_wr=4097)[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, raw_params=b"x" * 128)[0], ra.EINVAL)  # no NUL
        self.assertEqual(a.qp_create(cq.id, params=b"dcqcn maybe")[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=b"dcqcn")[0], ra.EINVAL)  # a key alone
        st, qp, qpn, ip = a.qp_create(cq.id, params=b"dcqcn off")
        self.assertEqual(st, 0)
        self.assertEqual(ip, 0x0A090001)
        self.assertEqual(a.max_pmtu, 1024)  # MTU 1500: 2048 and the headers do not fit
        self.assertGreater(qpn, 1)
        self.assertLess(qpn, 1 << 24)
        self.assertEqual(qpn & 0x3FFF, qp)  # max_flows 16384: 14 bits of id
        rows = [f for f in self.qps() if f["id"] == qp]
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0]["info"]["state"], "RESET")
        self.assertEqual(rows[0]["info"]["qpn"], qpn)
        # The id's next QP has another number.
        self.assertEqual(a.qp_destroy(qp), 0)
        st, qp2, qpn2, _ = a.qp_create(cq.id)
        self.assertEqual((st, qp2), (0, qp))
        self.assertNotEqual(qpn2, qpn)
        # DCQCN (on by default) runs from RTS on; before, the QP shows the rate it would start at.
        info = [f for f in self.qps() if f["id"] == qp2][0]["info"]
        self.assertEqual((info["dcqcn"], info["rate_bps"]), ("on", 100 * 10**9))
        self.assertEqual(a.qp_destroy(qp2), 0)
        self.assertEqual(a.qp_destroy(qp2), ra.ENOENT)

    def solar_flows(self):
        return [f for f in self.d.ctl("flow", "list")[1]["flows"] if f["transport"] == "solar"]

    def test_solar_queue_pairs(self):
        a, cq, sq = self.app()
        fd = ra.sealed_memfd(1 << 20)
        st, both, _ = a.reg_mr_rkey(fd, 1 << 20, ra.READ | ra.WRITE | ra.REMOTE_READ |
                                    ra.REMOTE_WRITE)
        self.assertEqual(st, 0)
        st, write_only, _ = a.reg_mr_rkey(fd, 4096, ra.READ | ra.WRITE | ra.REMOTE_WRITE)
        self.assertEqual(st, 0)
        vol = b"transport solar volume %d" % both
        # What the daemon refuses of its own two keys.
        self.assertEqual(a.qp_create(cq.id, params=b"transport nosuch")[0], ra.ENOENT)
        self.assertEqual(a.qp_create(cq.id, params=b"transport tcp")[0], ra.ENOENT)  # no QPs
        self.assertEqual(a.qp_create(cq.id, params=b"transport solar transport solar")[0],
                         ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=b"transport solar volume 77")[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=b"transport solar volume 0")[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=b"transport solar volume x1")[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=b"transport solar volume %d" % write_only)[0],
                         ra.EACCES)
        self.assertEqual(a.qp_create(cq.id, params=b"volume %d" % both)[0], ra.EINVAL)  # rocev2
        self.assertEqual(a.qp_create(cq.id, params=vol + b" paths 65")[0], ra.EINVAL)
        self.assertEqual(a.qp_create(cq.id, params=vol + b" dcqcn on")[0], ra.EINVAL)
        other = ra.RawApp(self.path, versions=(3, 3))
        self.addCleanup(other.close)
        ocq = other.create_pipe(ra.COMPLETION, 256)
        self.assertEqual(other.qp_create(ocq.id, params=vol)[0], ra.EINVAL)  # not its MR
        self.assertEqual(self.solar_flows(), [])
        # A target: RTS, listed, and it takes no I/O of its own.
        st, tgt, qpn, _ = a.qp_create(cq.id, params=vol + b" paths 2 block 2048")
        self.assertEqual(st, 0)
        self.assertEqual(a.qp_modify(tgt, ra.QP_STATE, state=ra.QPS_INIT), 0)
        rtr = ra.QP_STATE | ra.QP_PMTU | ra.QP_DEST_QPN | ra.QP_REMOTE_IP
        self.assertEqual(a.qp_modify(tgt, rtr, state=ra.QPS_RTR, pmtu=1024, dest_qpn=0x1234,
                                     remote_ip=PEER), ra.EINVAL)  # a 2048-byte block
        self.assertEqual(a.qp_destroy(tgt), 0)
        st, tgt, qpn, _ = a.qp_create(cq.id, params=vol + b" paths 2")
        self.assertEqual(st, 0)
        self.assertEqual(a.qp_modify(tgt, ra.QP_STATE, state=ra.QPS_INIT), 0)
        self.assertEqual(a.qp_modify(tgt, rtr, state=ra.QPS_RTR, pmtu=1024, dest_qpn=0x1234,
                                     remote_ip=PEER), 0)
        self.assertEqual(a.qp_modify(tgt, ra.QP_STATE, state=ra.QPS_RTS), 0)
        rows = self.d.ctl("solar", "list")[1]
        self.assertEqual(len(rows), 1, rows)
        info = rows[0]["info"]
        self.assertEqual((info["role"], info["conn"], info["peer_conn"], info["paths"],
                          info["block_bytes"]), ("target", qpn, 0x1234, 2, 1024), info)
        sq.produce(ra.send_entry(ra.OP_RDMA_WRITE, wr_id=7, mr=both, length=4096, target=tgt))
        c = self.completions(cq, 1)[0]
        self.assertEqual((c["wr_id"], c["status"]), (7, ra.EOPNOTSUPP))
        # An initiator's READ towards nobody stays in flight until the QP goes: CL_ECANCELED.
        st, ini, _, _ = a.qp_create(cq.id, params=b"transport solar")
        self.assertEqual(st, 0)
        self.assertEqual(a.qp_modify(ini, ra.QP_STATE, state=ra.QPS_INIT), 0)
        self.assertEqual(a.qp_modify(ini, rtr, state=ra.QPS_RTR, pmtu=1024, dest_qpn=qpn,
                                     remote_ip=PEER), 0)
        sq.produce(ra.send_entry(ra.OP_RDMA_WRITE, wr_id=8, mr=both, length=4096, target=ini))
        self.assertEqual(self.completions(cq, 1)[0]["status"], ra.EINVAL)
        self.assertEqual(a.qp_modify(ini, ra.QP_STATE, state=ra.QPS_RTS), 0)
        sq.produce(ra.send_entry(ra.OP_RDMA_READ, wr_id=9, mr=both, length=8192, target=ini))
        ct.wait_until(lambda: any(f["id"] == ini and f["info"]["ios_in_flight"] == 1
                                  for f in self.solar_flows()), what="the READ in flight")
        self.assertEqual(a.qp_destroy(ini), 0)
        c = self.completions(cq, 1)[0]
        self.assertEqual((c["wr_id"], c["status"]), (9, ra.ECANCELED))
        self.assertEqual(a.qp_destroy(tgt), 0)
        self.assertEqual(self.solar_flows(), [])

    def test_modify_rules_and_query(self):
        a, cq, sq = self.app()
        st, qp, _, _ = a.qp_create(cq.id)
        self.assertEqual(st, 0)
        self.assertEqual(a.qp_modify(qp + 1, ra.QP_STATE, state=ra.QPS_INIT), ra.ENOENT)
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE, state=ra.QPS_RTS), ra.EINVAL)  # skips
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE, state=9), ra.EINVAL)
        self.assertEqual(a.qp_modify(qp, 1 << 20, state=ra.QPS_INIT), ra.EINVAL)
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE | ra.QP_ACCESS, state=ra.QPS_INIT,
                                     access=ra.READ), ra.EINVAL)  # local bits are not QP access
        self.assertEqual(a.qp_modify(qp, ra.QP_STATE | ra.QP_ACCESS, state=ra.QPS_INIT,
                                     **ALL_INIT), 0)
        rtr = ra.QP_STATE | ra.QP_PMTU | ra.QP_DEST_QPN | ra.QP_RQ_PSN
        # RTR needs the peer's address, a route to it, and a PMTU the transport takes.
        self.assertEqual(a.qp_modify(qp, rtr, state=ra.QPS_RTR, pmtu=1024, dest_qpn=5), ra.EINVAL)
        self.assertEqual(a.qp_modify(qp, rtr | ra.QP_REMOTE_IP, state=ra.QPS_RTR, pmtu=1024,
                                     dest_qpn=5, remote_ip=0xC0000201), ra.ENETUNREACH)
        self.assertEqual(a.qp_modify(qp, rtr | ra.QP_REMOTE_IP, state=ra.QPS_RTR, pmtu=1000,
                                     dest_qpn=5, remote_ip=PEER), ra.EINVAL)
        self.assertEqual(a.qp_modify(qp, rtr | ra.QP_REMOTE_IP, state=ra.QPS_RTR, pmtu=2048,
                                     dest_qpn=5, remote_ip=PEER), ra.EINVAL)  # over the MTU
        # Another app sees no QP of that id.
        b, bcq, _ = self.app()
        self.assertEqual(b.qp_query(qp)[0], ra.ENOENT)
        self.assertEqual(b.qp_destroy(qp), ra.ENOENT)
        self.assertEqual(b.qp_modify(qp, ra.QP_STATE, state=ra.QPS_ERR), ra.ENOENT)
        a.qp_modify(qp, ra.QP_STATE, state=ra.QPS_RESET)
        self.to_rts(a, qp)
        st, attr = a.qp_query(qp)
        self.assertEqual(st, 0)
        self.assertEqual(attr["state"], ra.QPS_RTS)
        self.assertEqual(attr["pmtu"], 1024)
        self.assertEqual(attr["dest_qpn"], 0x1234)
        self.assertEqual(attr["rq_psn"], 0xFFFFF0)
        self.assertEqual(attr["sq_psn"], 100)
        self.assertEqual(attr["remote_ip"], PEER)
        self.assertEqual(attr["access"], ra.REMOTE_READ | ra.REMOTE_WRITE)
        row = [f for f in self.qps() if f["id"] == qp][0]
        self.assertEqual(row["info"]["state"], "RTS")
        self.assertEqual(row["remote"].split(":")[0], "10.9.0.2")
        self.assertEqual(a.qp_destroy(qp), 0)
        self.assertEqual(b.qp_create(bcq.id)[0], 0)  # b's QP goes with b (cleanup closes it)

    def test_work_requests_fail_and_flush(self):
        a, cq, sq = self.app()
        st, qp, _, _ = a.qp_create(cq.id)
        # Opcodes and flags where they mean nothing: refused at once, nothing taken.
        sq.produce(ra.send_entry(ra.OP_NOP, wr_id=1, flags=ra.SEND_IMM))
        sq.produce(ra.send_entry(ra.OP_FLOW_RECV, wr_id=2, length=64, target=qp,
                                 flags=ra.SEND_IMM))
        sq.produce(ra.send_entry(ra.OP_FLOW_CLOSE, wr_id=3, target=qp))
        sq.produce(ra.send_entry(ra.OP_RDMA_WRITE, wr_id=4, length=1 << 30, target=qp))
        sq.produce(ra.send_entry(9, wr_id=5, target=qp))
        got = {c["wr_id"]: c["status"] for c in self.completions(cq, 5)}
        self.assertEqual(got, {1: ra.EINVAL, 2: ra.EOPNOTSUPP, 3: ra.EOPNOTSUPP, 4: ra.EFAULT,
                               5: ra.EOPNOTSUPP})
        # In RTS towards a peer that never answers: timeout 4.096 us * 2^8 ~ 1 ms, two retries.
        self.to_rts(a, qp, timeout=8, retry_cnt=2)
        sq.produce(ra.send_entry(ra.OP_RDMA_WRITE, wr_id=10, length=4096, target=qp,
                                 remote_mr=0x10001, remote_offset=0))
        sq.produce(ra.send_entry(ra.OP_RDMA_READ, wr_id=11, length=100, target=qp,
                                 remote_mr=0x10001))
        sq.produce(ra.send_entry(ra.OP_FLOW_SEND, wr_id=12, length=1, target=qp,
                                 flags=ra.SEND_IMM, imm=7))
        sq.produce(ra.send_entry(ra.OP_FLOW_RECV, wr_id=13, length=64, target=qp))
        done = self.completions(cq, 4)
        by_id = {c["wr_id"]: c for c in done}
        self.assertEqual(len(done), 4, done)  # each exactly once
        self.assertEqual(by_id[10]["status"], ra.ETIMEDOUT)
        self.assertEqual(by_id[10]["opcode"], ra.OP_RDMA_WRITE)
        self.assertEqual(by_id[11]["opcode"], ra.OP_RDMA_READ)
        for w in (11, 12, 13):
            self.assertEqual(by_id[w]["status"], ra.ECANCELED, by_id[w])
            self.assertEqual(by_id[w]["flow"], qp)
        self.assertEqual(a.qp_query(qp)[1]["state"], ra.QPS_ERR)
        row = [f for f in self.qps() if f["id"] == qp][0]
        self.assertGreaterEqual(row["info"]["timeouts"], 3)
        self.assertIsNone(cq.consume())
        # In ERR a request completes at once, flushed.
        sq.produce(ra.send_entry(ra.OP_RDMA_WRITE, wr_id=14, length=1, target=qp, remote_mr=1))
        self.assertEqual(self.completions(cq, 1)[0]["status"], ra.ECANCELED)

    def test_destroy_flushes_receives(self):
        a, cq, sq = self.app()
        st, qp, _, _ = a.qp_create(cq.id)
        self.to_rts(a, qp)
        for i in range(3):
            sq.produce(ra.send_entry(ra.OP_FLOW_RECV, wr_id=20 + i, length=64, target=qp))
        before = len(self.qps())
        ct.wait_until(lambda: [f for f in self.qps() if f["id"] == qp][0]["info"]["recv_posted"]
                      == 3, what="three receives posted")
        self.assertEqual(a.qp_destroy(qp), 0)
        got = self.completions(cq, 3)
        self.assertEqual(sorted(c["wr_id"] for c in got), [20, 21, 22])
        self.assertTrue(all(c["status"] == ra.ECANCELED for c in got))
        self.assertEqual(len(self.qps()), before - 1)
        # Requests for the QP that is gone: no such flow.
        sq.produce(ra.send_entry(ra.OP_FLOW_RECV, wr_id=30, length=64, target=qp))
        self.assertEqual(self.completions(cq, 1)[0]["status"], ra.ENOENT)

    def test_rkeys(self):
        a, cq, sq = self.app()
        fd = ra.sealed_memfd(1 << 20)
        self.addCleanup(os.close, fd)
        st, mr, rkey = a.reg_mr_rkey(fd, 1 << 20, ra.READ | ra.WRITE)
        self.assertEqual((st, rkey), (0, 0))
        st, mr2, rkey2 = a.reg_mr_rkey(fd, 1 << 20, ra.READ | ra.WRITE | ra.REMOTE_WRITE)
        self.assertEqual(st, 0)
        self.assertNotEqual(rkey2, 0)
        self.assertNotEqual(rkey2 >> 16, 0)
        self.assertEqual(a.dereg_mr(mr2), 0)
        st, mr3, rkey3 = a.reg_mr_rkey(fd, 1 << 20, ra.READ | ra.REMOTE_READ)
        self.assertEqual(st, 0)
        self.assertEqual(rkey3 & 0xFFFF, rkey2 & 0xFFFF)  # the NIC MR id is reused...
        self.assertNotEqual(rkey3, rkey2)  # ...under a new tag
        # An older app (version 2) gets no rkey.
        old = ra.RawApp(self.path, versions=(2, 2))
        self.addCleanup(old.close)
        st, _, rk = old.reg_mr_rkey(fd, 4096, ra.READ | ra.REMOTE_READ)
        self.assertEqual((st, rk), (0, 0))
        # ...and no QP messages: a protocol error.
        with self.assertRaises((ConnectionResetError, OSError)):
            old.qp_create(0)
            old.qp_create(0)

    def test_malformed_and_killed(self):
        a, cq, sq = self.app()
        (_, _, _, _, st), _, _ = a.request(ra.T_QP_CREATE, struct.pack("<IIII", cq.id, 1, 1, 0))
        self.assertEqual(st, ra.EPROTO)  # too short
        with self.assertRaises((ConnectionResetError, OSError)):
            a.qp_create(cq.id)
        # A child app with QPs in RTS, killed: everything it held goes, the daemon stays.
        before = len(self.qps())
        child = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import rawapp as ra
a = ra.RawApp({self.path!r}, versions=(3, 3))
cq = a.create_pipe(ra.COMPLETION, 256)
sq = a.create_pipe(ra.SUBMIT, 64, cq.id)
for i in range(4):
    st, qp, _, _ = a.qp_create(cq.id)
    assert st == 0
    assert a.qp_modify(qp, ra.QP_STATE | ra.QP_ACCESS, state=ra.QPS_INIT, access=12) == 0
    assert a.qp_modify(qp, 1 | 2 | 4 | 8 | ra.QP_REMOTE_IP, state=ra.QPS_RTR, pmtu=1024,
                       dest_qpn=77, rq_psn=1, remote_ip={PEER}) == 0
    sq.produce(ra.send_entry(ra.OP_FLOW_RECV, wr_id=i, length=64, target=qp))
print("ready", flush=True)
time.sleep(60)
"""], stdout=subprocess.PIPE, text=True)
        self.addCleanup(lambda: child.poll() is None and child.kill())
        self.assertEqual(child.stdout.readline().strip(), "ready")
        ct.wait_until(lambda: len(self.qps()) == before + 4, what="the child's QPs")
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        ct.wait_until(lambda: len(self.qps()) == before, what="the QPs reclaimed")
        self.assertIsNone(self.d.proc.poll())


if __name__ == "__main__":
    ct.main()
