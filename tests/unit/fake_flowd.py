"""fake_flowd.py - a stand-in for cleaved's flows, for testing flow apps (cleave-tcp) without the
daemon: it speaks the app socket and the shared-memory protocol of src/ipc/shm_abi.h (version 2)
to one app at a time and carries each flow over a kernel TCP socket on this host.

What it plays, as the TCP transport behind cleaved does (src/transport/tcp): Listen/Connect
replies, then CL_EV_CONNECTED or CL_EV_REFUSED; CL_EV_ACCEPTED with the listener id in wr_id;
sends complete when the kernel took them (not when acknowledged: close enough for the app);
receive buffers fill in order and complete when full, all of them at the peer's FIN (the partly
filled one short, the rest empty); CL_EV_DATA once per pass with the in-order growth of the
stream, emitted after that pass's completions and counting their bytes too; close and abort
complete at once on the submit queue's CQ; CL_EV_PEER_CLOSED at the peer's FIN unless our own
FIN went first (then the flow just closes); CL_EV_CLOSED 0 once both sides closed, CL_ECONNRESET
after a reset either way. Only the heap (MR 0) is served; no receive queues, copies or sends.

Run it in a thread: FakeFlowd(path).start(); .stop() ends it and resets its flows.
"""

import collections
import errno
import mmap
import os
import select
import socket
import struct
import threading

MAGIC = 0x314C5643
VERSION = 2
HDR = struct.Struct("<IHHIi")
T_HELLO, T_HELLO_REPLY, T_PIPE_CREATE, T_PIPE_REPLY, T_PIPE_DESTROY = 1, 2, 3, 4, 5
T_REPLY, T_LISTEN, T_LISTEN_REPLY, T_UNLISTEN, T_CONNECT, T_CONNECT_REPLY = 9, 11, 12, 13, 14, 15
SUBMIT, RECV, COMPLETION = 1, 2, 3
OP_FLOW_SEND, OP_FLOW_RECV, OP_FLOW_CLOSE, OP_FLOW_ABORT = 3, 4, 5, 6
COMP_EVENT = 1 << 2
EV_CONNECTED, EV_ACCEPTED, EV_PEER_CLOSED, EV_CLOSED, EV_REFUSED, EV_DATA = 1, 2, 3, 4, 5, 6
ENOENT, EINVAL, EPIPE, EPROTO, EOPNOTSUPP = -2, -22, -32, -71, -95
EADDRINUSE, ECONNRESET, ECONNREFUSED = -98, -104, -111
PIPE_CTL = 128
SEND_ENTRY = struct.Struct("<QQQIIIIIBB17xB")
COMPLETION_ENTRY = struct.Struct("<QIiIHBBI3x")  # without the phase byte
PIPE_AREA = 4 << 20


class Pipe:
    def __init__(self, region, kind, pid, entries, offset, cq, efd):
        self.region, self.kind, self.id = region, kind, pid
        self.entries, self.offset, self.cq, self.efd = entries, offset, cq, efd
        self.size = {SUBMIT: 64, RECV: 16, COMPLETION: 32}[kind]
        self.index = 0
        self.lap_shift = entries.bit_length() - 1
        self.backlog = collections.deque()  # completions waiting for room (CQ only)
        self.rung = False

    def slot(self, i):
        return self.offset + PIPE_CTL + (i % self.entries) * self.size

    def phase(self, i):
        return ((i >> self.lap_shift) + 1) & 1

    def take(self):
        """The next submit entry, or None."""
        at = self.slot(self.index)
        if self.region[at + self.size - 1] != self.phase(self.index):
            return None
        e = SEND_ENTRY.unpack_from(self.region, at)
        self.index += 1
        struct.pack_into("<Q", self.region, self.offset, self.index)
        return {"wr_id": e[0], "offset": e[1], "length": e[3], "mr": e[4], "target": e[6],
                "opcode": e[8], "flags": e[9]}

    def put(self, wr_id=0, length=0, status=0, opcode=0, flags=0, flow=0, pipe=0):
        self.backlog.append(COMPLETION_ENTRY.pack(wr_id, length, status, 0, pipe, opcode, flags,
                                                  flow))
        self.flush()

    def flush(self):
        consumer = struct.unpack_from("<Q", self.region, self.offset)[0]
        while self.backlog and self.index - consumer < self.entries:
            at = self.slot(self.index)
            self.region[at:at + self.size - 1] = self.backlog.popleft()
            self.region[at + self.size - 1] = self.phase(self.index)
            self.index += 1
            self.rung = True

    def ring(self):
        sleeping = struct.unpack_from("<I", self.region, self.offset + 64)[0]
        if self.rung and self.efd is not None and sleeping:
            os.write(self.efd, struct.pack("<Q", 1))
        self.rung = False


class Flow:
    def __init__(self, fid, sock, cq, connecting):
        self.id, self.sock, self.cq = fid, sock, cq
        self.connecting = connecting
        self.sendq = collections.deque()  # [wr_id, offset, length, written]
        self.recvq = collections.deque()  # [wr_id, offset, length, have]
        self.close_asked = self.shut_wr = self.peer_eof = self.done = False
        self.growth = 0


class FakeFlowd:
    def __init__(self, path, heap=32 << 20, listen_host="127.0.0.1"):
        self.path, self.heap_size, self.listen_host = path, heap, listen_host
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lsock.bind(path)
        self.lsock.listen(4)
        self.app = None
        self.running = True
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.log = []  # what happened, for a failing test to show

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.running = False
        self.thread.join(timeout=5)
        self.lsock.close()
        if os.path.exists(self.path):
            os.unlink(self.path)

    # ---- the app socket

    def reset_app(self):
        for f in list(getattr(self, "flows", {}).values()):
            self.rst(f)
        for lst in getattr(self, "listeners", {}).values():
            lst[0].close()
        for p in getattr(self, "pipes", {}).values():
            if p.efd is not None:
                os.close(p.efd)
        if self.app is not None:
            self.app.close()
        self.app = None
        self.pipes, self.flows, self.listeners = {}, {}, {}
        self.next_pipe, self.next_flow, self.next_listener = 1, 1, 1
        self.pipe_off = 4096

    def reply(self, mtype, seq, status, body=b"", fds=()):
        msg = HDR.pack(MAGIC, VERSION, mtype, seq, status) + body
        if fds:
            socket.send_fds(self.app, [msg], list(fds))
        else:
            self.app.send(msg)

    def control(self):
        try:
            msg, fds, _, _ = socket.recv_fds(self.app, 512, 4)
        except OSError:
            msg, fds = b"", []
        if not msg:
            self.log.append("app left")
            self.reset_app()
            return
        _, _, mtype, seq, _ = HDR.unpack_from(msg)
        body = msg[HDR.size:]
        if mtype == T_HELLO:
            self.hello(seq, body)
        elif mtype == T_PIPE_CREATE:
            kind, entries, cq, flags = struct.unpack_from("<B3xIII", body)
            efd = fds.pop(0) if fds else None
            size = PIPE_CTL + entries * {SUBMIT: 64, RECV: 16, COMPLETION: 32}[kind]
            off = self.pipe_off
            self.pipe_off += size
            pid = self.next_pipe
            self.next_pipe += 1
            self.pipes[pid] = Pipe(self.region, kind, pid, entries, off, cq, efd)
            self.reply(T_PIPE_REPLY, seq, 0, struct.pack("<IIQ", pid, entries, off))
        elif mtype == T_PIPE_DESTROY:
            (pid,) = struct.unpack_from("<I", body)
            p = self.pipes.pop(pid, None)
            self.reply(T_REPLY, seq, 0 if p else ENOENT)
        elif mtype == T_LISTEN:
            ip, port, _, cq, _ = struct.unpack_from("<IHHII", body)
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((self.listen_host if ip == 0 else socket.inet_ntoa(struct.pack(">I", ip)),
                        port))
                s.listen(16)
            except OSError as e:
                s.close()
                self.reply(T_LISTEN_REPLY, seq, EADDRINUSE if e.errno == errno.EADDRINUSE
                           else EINVAL, struct.pack("<II", 0, 0))
                return
            s.setblocking(False)
            lid = self.next_listener
            self.next_listener += 1
            self.listeners[lid] = (s, cq)
            self.log.append(f"listen {port} -> {lid}")
            self.reply(T_LISTEN_REPLY, seq, 0, struct.pack("<II", lid, 0))
        elif mtype == T_UNLISTEN:
            (lid,) = struct.unpack_from("<I", body)
            lst = self.listeners.pop(lid, None)
            if lst:
                lst[0].close()
            self.reply(T_REPLY, seq, 0 if lst else ENOENT)
        elif mtype == T_CONNECT:
            ip, port, _, cq, _ = struct.unpack_from("<IHHII", body)
            s = socket.socket()
            s.setblocking(False)
            err = s.connect_ex((socket.inet_ntoa(struct.pack(">I", ip)), port))
            f = self.new_flow(s, cq, connecting=True)
            self.reply(T_CONNECT_REPLY, seq, 0, struct.pack("<II", f.id, 0))
            if err not in (0, errno.EINPROGRESS):
                self.refused(f, -err)
        else:
            self.reply(T_REPLY, seq, EPROTO)

    def hello(self, seq, body):
        fd = os.memfd_create("fake-flowd", os.MFD_ALLOW_SEALING)
        heap_off = 4096 + PIPE_AREA
        size = heap_off + self.heap_size
        os.ftruncate(fd, size)
        self.region = mmap.mmap(fd, size)
        struct.pack_into("<IHHIIQQQQQ", self.region, 0, MAGIC, VERSION, 0, 9, 0, size, 4096,
                         PIPE_AREA, heap_off, self.heap_size)
        self.heap_off = heap_off
        self.heap = memoryview(self.region)[heap_off:heap_off + self.heap_size]
        body = struct.pack("<HHIQQQQQII", 1, VERSION, 9, size, 4096, PIPE_AREA, heap_off,
                           self.heap_size, 0, 0) + struct.pack("<QIIII", 1 << 30, 16, 8, 64, 4096)
        self.reply(T_HELLO_REPLY, seq, 0, body, [fd])
        os.close(fd)

    # ---- flows

    def new_flow(self, s, cq, connecting):
        f = Flow(self.next_flow, s, cq, connecting)
        self.next_flow += 1
        self.flows[f.id] = f
        return f

    def event(self, f, code, status=0, length=0, wr_id=0):
        cq = self.pipes.get(f.cq)
        if cq is not None:
            cq.put(wr_id=wr_id, length=length, status=status, opcode=code, flags=COMP_EVENT,
                   flow=f.id)

    def complete(self, f, wr_id, opcode, length=0, status=0):
        cq = self.pipes.get(f.cq)
        if cq is not None:
            cq.put(wr_id=wr_id, length=length, status=status, opcode=opcode, flow=f.id)

    def refused(self, f, status):
        self.log.append(f"flow {f.id} refused {status}")
        f.sock.close()
        del self.flows[f.id]
        self.event(f, EV_REFUSED, status=ECONNREFUSED if status == -errno.ECONNREFUSED else status)

    def end(self, f, status):
        """Every pending request completes, then the flow is gone."""
        for wr_id, _, _, _ in f.sendq:
            self.complete(f, wr_id, OP_FLOW_SEND, status=status if status else EPIPE)
        for wr_id, _, _, have in f.recvq:
            self.complete(f, wr_id, OP_FLOW_RECV, length=have, status=0 if have else status)
        f.sendq.clear()
        f.recvq.clear()
        f.done = True
        self.event(f, EV_CLOSED, status=status)
        f.sock.close()
        self.flows.pop(f.id, None)
        self.log.append(f"flow {f.id} closed {status}")

    def rst(self, f):
        try:
            f.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
        self.end(f, ECONNRESET)

    def submit(self, sq, e):
        f = self.flows.get(e["target"])
        op = e["opcode"]
        if f is None or f.connecting or op not in (OP_FLOW_SEND, OP_FLOW_RECV, OP_FLOW_CLOSE,
                                                  OP_FLOW_ABORT) or e["mr"] != 0:
            cq = self.pipes.get(sq.cq)
            status = ENOENT if op in (OP_FLOW_SEND, OP_FLOW_RECV, OP_FLOW_CLOSE,
                                      OP_FLOW_ABORT) else EOPNOTSUPP
            if cq:
                cq.put(wr_id=e["wr_id"], status=status, opcode=op, flow=e["target"], pipe=sq.id)
            return
        if op in (OP_FLOW_CLOSE, OP_FLOW_ABORT):
            cq = self.pipes.get(sq.cq)
            if cq:
                cq.put(wr_id=e["wr_id"], opcode=op, flow=f.id, pipe=sq.id)
            if op == OP_FLOW_ABORT:
                self.rst(f)
            else:
                f.close_asked = True
            return
        if e["offset"] > self.heap_size or e["length"] > self.heap_size - e["offset"] or \
                e["length"] == 0:
            self.complete(f, e["wr_id"], op, status=EINVAL)
        elif op == OP_FLOW_SEND:
            if f.close_asked:
                self.complete(f, e["wr_id"], op, status=EPIPE)
            else:
                f.sendq.append([e["wr_id"], e["offset"], e["length"], 0])
        elif f.peer_eof:
            self.complete(f, e["wr_id"], op)  # after the FIN: back at once, empty
        else:
            f.recvq.append([e["wr_id"], e["offset"], e["length"], 0])

    def io(self, f):
        """One pass of a flow's socket work."""
        heap = self.heap
        try:
            while f.sendq:
                k = f.sendq[0]
                n = f.sock.send(heap[k[1] + k[3]:k[1] + k[2]])
                k[3] += n
                if k[3] < k[2]:
                    break
                f.sendq.popleft()
                self.complete(f, k[0], OP_FLOW_SEND, length=k[2])
            if f.close_asked and not f.sendq and not f.shut_wr:
                f.sock.shutdown(socket.SHUT_WR)
                f.shut_wr = True
            while f.recvq and not f.peer_eof:
                k = f.recvq[0]
                n = f.sock.recv_into(heap[k[1] + k[3]:k[1] + k[2]])
                if n == 0:
                    f.peer_eof = True
                    break
                k[3] += n
                f.growth += n
                if k[3] == k[2]:
                    f.recvq.popleft()
                    self.complete(f, k[0], OP_FLOW_RECV, length=k[2])
            if not f.recvq and not f.peer_eof:
                # Nothing posted: only look for the FIN (or a reset), leave data in the kernel.
                if f.sock.recv(1, socket.MSG_PEEK) == b"":
                    f.peer_eof = True
        except BlockingIOError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            self.end(f, ECONNRESET)
            return
        if f.growth and not f.peer_eof:
            self.event(f, EV_DATA, length=f.growth)
        f.growth = 0
        if f.peer_eof and not getattr(f, "eof_told", False):
            f.eof_told = True
            for wr_id, _, _, have in f.recvq:
                self.complete(f, wr_id, OP_FLOW_RECV, length=have)
            f.recvq.clear()
            if not f.shut_wr:
                self.event(f, EV_PEER_CLOSED)
        if f.peer_eof and f.shut_wr and not f.sendq:
            self.end(f, 0)

    # ---- the loop

    def run(self):
        self.reset_app()
        while self.running:
            rd = [self.lsock] + ([self.app] if self.app else [])
            rd += [s for s, _ in self.listeners.values()]
            rd += [f.sock for f in self.flows.values() if not f.connecting]
            wr = [f.sock for f in self.flows.values() if f.connecting or f.sendq]
            try:
                r, w, _ = select.select(rd, wr, [], 0.001)
            except (OSError, ValueError):
                r, w = [], []
            # The app first: one that exited before the next connected has hung up, and must be
            # let go before the next is taken (else the next is turned away, as a second app).
            if self.app is not None and self.app in r:
                self.control()
                if self.app is None:
                    continue
            if self.lsock in r:
                c, _ = self.lsock.accept()
                if self.app is None:
                    self.app = c
                else:
                    c.close()
            for lid, (s, cq) in list(self.listeners.items()):
                if s in r:
                    try:
                        c, _ = s.accept()
                    except BlockingIOError:
                        continue
                    c.setblocking(False)
                    f = self.new_flow(c, cq, connecting=False)
                    self.log.append(f"accepted flow {f.id} on listener {lid}")
                    cq_pipe = self.pipes.get(cq)
                    if cq_pipe:
                        cq_pipe.put(wr_id=lid, opcode=EV_ACCEPTED, flags=COMP_EVENT, flow=f.id)
            for f in list(self.flows.values()):
                if f.connecting and f.sock in w:
                    err = f.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self.refused(f, -err)
                    else:
                        f.connecting = False
                        self.event(f, EV_CONNECTED)
            for p in list(self.pipes.values()):
                if p.kind != SUBMIT:
                    continue
                for _ in range(256):
                    e = p.take()
                    if e is None:
                        break
                    self.submit(p, e)
            for f in list(self.flows.values()):
                if not f.connecting and not f.done:
                    self.io(f)
            for p in self.pipes.values():
                if p.kind == COMPLETION:
                    p.flush()
                    p.ring()
        self.reset_app()
