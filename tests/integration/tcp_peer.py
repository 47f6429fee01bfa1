#!/usr/bin/python3
"""tcp_peer.py - the Linux kernel's end of a TCP test: one connection through the kernel's own
stack, sending the cleave-tcp pattern and/or hashing what arrives, reported as one JSON line.

    tcp_peer.py client HOST PORT [options]   connect (retrying while refused, see --retry)
    tcp_peer.py server HOST PORT [options]   listen, print "ready", serve one connection

    --send N        send N bytes of the pattern (--seed), then shut down writing
    --recv          read and hash until EOF (at the same time as sending)
    --seed N        pattern seed (default 1)
    --reset         instead of shutting down: close with SO_LINGER 0 (an RST) once the sends
                    are written, without reading
    --retry SEC     client: keep retrying a refused or unanswered connect for SEC seconds
                    (default 0: one try)
    --timeout SEC   every socket operation (default 30)
    --sport N       client: connect from local port N (SO_REUSEADDR; default: the kernel's)

Output: {"sent", "sent_sha256", "received", "received_sha256", "error", "tcp_info", "seconds",
"total_retrans"}.
error is null, or the name of the exception that ended the connection (ConnectionResetError,
ConnectionRefusedError, TimeoutError, ...); tcp_info is what the kernel negotiated (client and
server alike): "timestamps", "sack", "wscale" (booleans), "snd_wscale", "rcv_wscale", "snd_mss";
total_retrans is the kernel's count of segments it retransmitted (TCP_INFO), read once all it
sent was acknowledged (or null when the connection failed first).
The exit status is 0 whenever the JSON was written: the caller judges it.
"""

import argparse
import hashlib
import json
import os
import socket
import struct
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cleave_pattern  # noqa: E402

TCPI_OPT_TIMESTAMPS, TCPI_OPT_SACK, TCPI_OPT_WSCALE = 1, 2, 4


def tcp_info(s):
    """The options the kernel negotiated with the peer (struct tcp_info, linux/tcp.h)."""
    raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
    opts, wscale = raw[5], raw[6]
    (snd_mss,) = struct.unpack_from("<I", raw, 16)
    return {"timestamps": bool(opts & TCPI_OPT_TIMESTAMPS), "sack": bool(opts & TCPI_OPT_SACK),
            "wscale": bool(opts & TCPI_OPT_WSCALE), "snd_wscale": wscale & 0xF,
            "rcv_wscale": wscale >> 4, "snd_mss": snd_mss}


def total_retrans(s, timeout):
    """The kernel's retransmissions on s (tcpi_total_retrans), once all it sent is acknowledged
    (tcpi_unacked 0) or `timeout` seconds have passed; None when the socket is gone."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            raw = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 104)
            (unacked,) = struct.unpack_from("<I", raw, 24)
            if unacked == 0 or time.monotonic() >= deadline:
                return struct.unpack_from("<I", raw, 100)[0]
            time.sleep(0.01)
    except OSError:
        return None


def serve(s, args, result):
    """Sends and receives on connected socket s; fills result."""
    result["tcp_info"] = tcp_info(s)
    errors = []

    def sender():
        h = hashlib.sha256()
        sent = 0
        try:
            for chunk in cleave_pattern.pattern(args.seed, args.send):
                s.sendall(chunk)
                h.update(chunk)
                sent += len(chunk)
            if not args.reset:
                s.shutdown(socket.SHUT_WR)
        except OSError as e:
            errors.append(type(e).__name__)
        result["sent"], result["sent_sha256"] = sent, h.hexdigest()

    t = threading.Thread(target=sender)
    t.start()
    h = hashlib.sha256()
    received = 0
    if args.recv and not args.reset:
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        try:
            while True:
                n = s.recv_into(buf)
                if n == 0:
                    break
                h.update(view[:n])
                received += n
        except OSError as e:
            errors.append(type(e).__name__)
    t.join()
    result["received"], result["received_sha256"] = received, h.hexdigest()
    result["total_retrans"] = total_retrans(s, args.timeout)
    if args.reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    result["error"] = errors[0] if errors else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("role", choices=["client", "server"])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--send", type=int, default=0)
    p.add_argument("--recv", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--reset", action="store_true")
    p.add_argument("--retry", type=float, default=0)
    p.add_argument("--timeout", type=float, default=30)
    p.add_argument("--sport", type=int, default=0)
    args = p.parse_args()

    empty = hashlib.sha256().hexdigest()
    result = {"sent": 0, "sent_sha256": empty, "received": 0, "received_sha256": empty,
              "error": None, "tcp_info": None, "seconds": 0, "total_retrans": None}
    t0 = time.monotonic()
    s = None
    try:
        if args.role == "server":
            ls = socket.socket()
            ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            ls.bind((args.host, args.port))
            ls.listen(1)
            ls.settimeout(args.timeout)
            print("ready", flush=True)
            s, _ = ls.accept()
            ls.close()
        else:
            deadline = time.monotonic() + args.retry
            while True:
                s = socket.socket()
                s.settimeout(min(args.timeout, 2) if args.retry else args.timeout)
                if args.sport:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    s.bind(("", args.sport))
                try:
                    s.connect((args.host, args.port))
                    break
                except (ConnectionRefusedError, TimeoutError, socket.timeout):
                    s.close()
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(0.05)
        t0 = time.monotonic()
        s.settimeout(args.timeout)
        serve(s, args, result)
    except OSError as e:
        result["error"] = type(e).__name__
    finally:
        if s is not None:
            s.close()
    result["seconds"] = time.monotonic() - t0
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
