"""rawapp.py - an app that speaks cleaved's app protocol (src/ipc/shm_abi.h) byte by byte, without
libcleave: what a hostile or buggy app can send, and a second, independent reading of the ABI.
"""

import mmap
import os
import socket
import struct

MAGIC = 0x314C5643
VERSION = 1
HDR = struct.Struct("<IHHIi")  # magic, version, type, seq, status
T_HELLO, T_HELLO_REPLY, T_PIPE_CREATE, T_PIPE_REPLY, T_PIPE_DESTROY = 1, 2, 3, 4, 5
T_MR_REG, T_MR_REPLY, T_MR_DEREG, T_REPLY, T_NOTICE = 6, 7, 8, 9, 10
T_LISTEN, T_LISTEN_REPLY, T_UNLISTEN, T_CONNECT, T_CONNECT_REPLY = 11, 12, 13, 14, 15  # version 2
T_QP_CREATE, T_QP_REPLY, T_QP_MODIFY, T_QP_QUERY, T_QP_QUERY_REPLY, T_QP_DESTROY = (  # version 3
    16, 17, 18, 19, 20, 21)
SUBMIT, RECV, COMPLETION = 1, 2, 3
OP_NOP, OP_COPY, OP_SEND = 0, 1, 2
OP_FLOW_SEND, OP_FLOW_RECV, OP_FLOW_CLOSE, OP_FLOW_ABORT = 3, 4, 5, 6
OP_RDMA_WRITE, OP_RDMA_READ = 7, 8  # version 3
SEND_IMM = 1  # SendEntry flags, version 3
COMP_RECV, COMP_IMM, COMP_EVENT, COMP_RDMA_WRITE = 1, 2, 4, 8
EV_CONNECTED, EV_ACCEPTED, EV_PEER_CLOSED, EV_CLOSED, EV_REFUSED, EV_DATA = 1, 2, 3, 4, 5, 6
READ, WRITE, REMOTE_READ, REMOTE_WRITE = 1, 2, 4, 8
# Queue pairs (version 3): states, attribute mask bits, the QpAttr wire struct.
QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_ERR = 0, 1, 2, 3, 4
(QP_STATE, QP_PMTU, QP_DEST_QPN, QP_RQ_PSN, QP_SQ_PSN, QP_TIMEOUT, QP_RETRY_CNT, QP_RNR_RETRY,
 QP_MIN_RNR_TIMER, QP_MAX_RD_ATOMIC, QP_MAX_DEST_RD_ATOMIC, QP_ACCESS, QP_SELECTIVE_REPEAT,
 QP_RATE_LIMIT, QP_REMOTE_IP) = (1 << i for i in range(15))
QP_ATTR = struct.Struct("<8BIIIIIIQ")
QP_ATTR_FIELDS = ("state", "timeout", "retry_cnt", "rnr_retry", "min_rnr_timer", "max_rd_atomic",
                  "max_dest_rd_atomic", "selective_repeat", "access", "pmtu", "dest_qpn", "rq_psn",
                  "sq_psn", "remote_ip", "rate_limit_kbps")
DOORBELL = 1
PIPE_CTL = 128
SEND_ENTRY = struct.Struct("<QQQIIIIIBB17x")  # without the phase byte (63 bytes)
RECV_ENTRY = struct.Struct("<QIHB")  # without the phase byte (15 bytes)
COMPLETION_ENTRY = struct.Struct("<QIiIHBBI3xB")
EPERM, ENOENT, EAGAIN, EACCES, EFAULT, EBUSY, EINVAL = -1, -2, -11, -13, -14, -16, -22
EPROTO, EOPNOTSUPP, EDQUOT, EVERSION = -71, -95, -122, -1002
EPIPE, EADDRINUSE, ECONNRESET, ECONNREFUSED = -32, -98, -104, -111
ENOSPC, ENETUNREACH, ETIMEDOUT, ECANCELED = -28, -101, -110, -125
NOTICE_SHUTDOWN, NOTICE_EVICTED, NOTICE_REFUSED = 1, 2, 3


def header(mtype, seq, version=VERSION, magic=MAGIC):
    return HDR.pack(magic, version, mtype, seq, 0)


class ProtocolError(Exception):
    pass


class Pipe:
    """One pipe in the mapped region, written and read as the ABI says."""

    def __init__(self, region, kind, pid, entries, offset):
        self.region, self.kind, self.id, self.entries, self.offset = region, kind, pid, entries, offset
        self.size = {SUBMIT: 64, RECV: 16, COMPLETION: 32}[kind]
        self.index = 0  # producer head or consumer tail
        self.lap_shift = entries.bit_length() - 1

    def slot(self, i):
        return self.offset + PIPE_CTL + (i % self.entries) * self.size

    def phase(self, i):
        return ((i >> self.lap_shift) + 1) & 1

    def consumer_index(self):
        return struct.unpack_from("<Q", self.region, self.offset)[0]

    def produce(self, body):
        """Writes one entry (body without its phase byte); False when the ring is full."""
        if self.index - self.consumer_index() >= self.entries:
            return False
        at = self.slot(self.index)
        self.region[at:at + self.size - 1] = body
        self.region[at + self.size - 1] = self.phase(self.index)
        self.index += 1
        return True

    def consume(self):
        at = self.slot(self.index)
        if self.region[at + self.size - 1] != self.phase(self.index):
            return None
        e = COMPLETION_ENTRY.unpack_from(self.region, at)
        self.index += 1
        struct.pack_into("<Q", self.region, self.offset, self.index)
        return {"wr_id": e[0], "length": e[1], "status": e[2], "imm": e[3], "pipe": e[4],
                "opcode": e[5], "flags": e[6], "flow": e[7]}


class RawApp:
    def __init__(self, path, name="rawapp", versions=(VERSION, VERSION), hello=True, timeout=5):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.seq = 0
        self.version = versions[1]
        self.region = None
        if hello:
            self.status = self.hello(name, versions)

    def request(self, mtype, body=b"", fds=(), raw=None):
        self.seq += 1
        msg = raw if raw is not None else header(mtype, self.seq, self.version) + body
        try:
            socket.send_fds(self.sock, [msg], list(fds)) if fds else self.sock.send(msg)
        except BrokenPipeError:
            pass  # refused as it connected: the daemon's notice waits to be read
        return self.reply()

    def reply(self):
        """The next message; (header tuple, payload, fds). Raises on EOF."""
        try:
            msg, fds, _, _ = socket.recv_fds(self.sock, 512, 4)
        except ConnectionResetError:
            # The daemon closed with our message unread: the reset comes first and may hide
            # a notice that says why (a refusal as it accepted us), readable next.
            timeout = self.sock.gettimeout()
            self.sock.setblocking(False)
            try:
                msg, fds, _, _ = socket.recv_fds(self.sock, 512, 4)
            except OSError:
                raise ConnectionResetError("cleaved reset the connection") from None
            finally:
                self.sock.settimeout(timeout)
        if not msg:
            raise ConnectionResetError("cleaved closed the connection")
        return HDR.unpack_from(msg), msg[HDR.size:], fds

    def hello(self, name, versions):
        body = struct.pack("<HHI", versions[0], versions[1], 0) + name.encode().ljust(32, b"\0")
        (magic, ver, mtype, seq, status), payload, fds = self.request(T_HELLO, body)
        if mtype == T_NOTICE:  # refused as it connected; the status says why
            self.notice = int.from_bytes(payload[:4], "little")
            return status
        self.versions = struct.unpack_from("<HH", payload)
        self.version = ver
        if status != 0:
            return status
        (_, _, self.app_id, self.size, self.pipe_off, self.pipe_size, self.heap_off,
         self.heap_size, self.flags, _) = struct.unpack_from("<HHIQQQQQII", payload)
        self.quota = struct.unpack_from("<QIIII", payload, 56)
        self.region = mmap.mmap(fds[0], self.size)
        os.close(fds[0])
        return 0

    def create_pipe(self, kind, entries, cq=0, doorbell_fd=None, flags=None):
        if flags is None:
            flags = DOORBELL if doorbell_fd is not None else 0
        body = struct.pack("<B3xIII", kind, entries, cq, flags)
        fds = [doorbell_fd] if doorbell_fd is not None else []
        (_, _, _, _, status), payload, _ = self.request(T_PIPE_CREATE, body, fds)
        if status != 0:
            return status
        pid, n, off = struct.unpack_from("<IIQ", payload)
        return Pipe(self.region, kind, pid, n, off)

    def destroy_pipe(self, pid):
        return self.request(T_PIPE_DESTROY, struct.pack("<II", pid, 0))[0][4]

    def reg_mr(self, fd, length, access=READ | WRITE):
        (_, _, _, _, status), payload, _ = self.request(T_MR_REG, struct.pack("<QII", length, access,
                                                                              0), [fd])
        return status if status != 0 else struct.unpack_from("<I", payload)[0]

    def reg_mr_rkey(self, fd, length, access):
        """Version 3: (status, mr id, rkey)."""
        (_, _, _, _, status), payload, _ = self.request(T_MR_REG, struct.pack("<QII", length, access,
                                                                              0), [fd])
        return (status, *struct.unpack_from("<II", payload)) if status == 0 else (status, 0, 0)

    def qp_create(self, cq, send_wr=64, recv_wr=64, params=b"", raw_params=None):
        """Version 3: (status, qp id, qpn, ip); the largest PMTU in self.max_pmtu."""
        body = struct.pack("<IIII", cq, send_wr, recv_wr, 0)
        body += raw_params if raw_params is not None else params.ljust(128, b"\0")
        (_, _, _, _, status), payload, _ = self.request(T_QP_CREATE, body)
        if status != 0:
            return status, 0, 0, 0
        qp, qpn, ip, self.max_pmtu = struct.unpack_from("<IIII", payload)
        return status, qp, qpn, ip

    def qp_modify(self, qp, mask, **attr):
        """Version 3: the status. attr: QP_ATTR_FIELDS by name, the rest 0."""
        values = [attr.pop(f, 0) for f in QP_ATTR_FIELDS]
        assert not attr, attr
        body = struct.pack("<II", qp, mask) + QP_ATTR.pack(*values)
        return self.request(T_QP_MODIFY, body)[0][4]

    def qp_query(self, qp):
        """Version 3: (status, dict of the attributes)."""
        (_, _, _, _, status), payload, _ = self.request(T_QP_QUERY, struct.pack("<II", qp, 0))
        if status != 0:
            return status, None
        return 0, dict(zip(QP_ATTR_FIELDS, QP_ATTR.unpack_from(payload)))

    def qp_destroy(self, qp):
        return self.request(T_QP_DESTROY, struct.pack("<II", qp, 0))[0][4]

    def dereg_mr(self, mr):
        return self.request(T_MR_DEREG, struct.pack("<II", mr, 0))[0][4]

    def listen(self, port, cq, ip=0, transport=b""):
        """Version 2: (status, listener id)."""
        body = struct.pack("<IHHII", ip, port, 0, cq, 0) + transport.ljust(32, b"\0")
        (_, _, _, _, status), payload, _ = self.request(T_LISTEN, body)
        return status, (struct.unpack_from("<I", payload)[0] if status == 0 else None)

    def unlisten(self, listener):
        return self.request(T_UNLISTEN, struct.pack("<II", listener, 0))[0][4]

    def connect(self, ip, port, cq, transport=b""):
        """Version 2: (status, flow id); ip in host order."""
        body = struct.pack("<IHHII", ip, port, 0, cq, 0) + transport.ljust(32, b"\0")
        (_, _, _, _, status), payload, _ = self.request(T_CONNECT, body)
        return status, (struct.unpack_from("<I", payload)[0] if status == 0 else None)

    def heap(self, offset, length):
        return self.region[self.heap_off + offset:self.heap_off + offset + length]

    def write_heap(self, offset, data):
        self.region[self.heap_off + offset:self.heap_off + offset + len(data)] = data

    def close(self):
        self.sock.close()
        if self.region is not None:
            self.region.close()


def send_entry(op, wr_id=0, mr=0, offset=0, length=0, remote_mr=0, remote_offset=0, target=0,
               imm=0, flags=0):
    return SEND_ENTRY.pack(wr_id, offset, remote_offset, length, mr, remote_mr, target, imm, op,
                           flags)


def recv_entry(offset, length, mr=0):
    return RECV_ENTRY.pack(offset, length, mr, 0)


def sealed_memfd(size, seal=True):
    fd = os.memfd_create("rawapp-mr", os.MFD_ALLOW_SEALING if seal else 0)
    os.ftruncate(fd, size)
    if seal:
        import fcntl
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)
    return fd
