"""cleavetest.py - shared helpers for tests that run the real cleaved.

Network namespaces joined by veth pairs stand in for hosts; the Linux kernel in a namespace is
the peer. Everything a test creates (namespaces, processes, files) is registered for cleanup
and removed when the test ends, also when it fails or is interrupted.
Paths to the binaries come from the environment (CLEAVED, CLEAVECTL), set by meson.
"""

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

CLEAVED = os.environ.get("CLEAVED", "build/src/dataplane/cleaved")
CLEAVECTL = os.environ.get("CLEAVECTL", "build/tools/cleavectl")
SKIP = 77  # meson's "skipped" exit code

_cleanups = []


def _run_cleanups():
    while _cleanups:
        fn = _cleanups.pop()
        try:
            fn()
        except Exception as e:  # keep cleaning up the rest
            print(f"cleanup failed: {e}", file=sys.stderr)


atexit.register(_run_cleanups)


def spawn(cmd, **kw):
    """subprocess.Popen(cmd, **kw) in the background, killed by its pid at cleanup if it is
    still running."""
    p = subprocess.Popen(cmd, **kw)

    def end():
        if p.poll() is None:
            p.kill()
            p.wait()
    _cleanups.append(end)
    return p
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, lambda s, f: sys.exit(128 + s))


def require_root():
    if os.geteuid() != 0:
        print("skipped: needs root for network namespaces", file=sys.stderr)
        sys.exit(SKIP)


def sh(cmd, check=True, ns=None, timeout=30, **kw):
    """Runs cmd (a list) in namespace ns; returns CompletedProcess with text output."""
    if ns:
        cmd = ["ip", "netns", "exec", ns] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()}")
    return p


def size_bytes(text):
    """A size as the tools take it (cleave-rdma --sizes, cleave-blk --bs): a number with k, m or
    g (powers of 1024)."""
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1].lower(), 1)
    return int(text[:-1] if scale != 1 else text) * scale


def wait_until(fn, timeout=30.0, interval=0.02, what="condition"):
    """Polls fn until it returns something true, and returns that. The timeout only bounds a
    hang: a loaded machine (two polling daemons and a compile on two cores) may take seconds
    for what takes milliseconds when idle, so a test never passes a timeout that turns slowness
    into a failure. How fast something happens is a benchmark's figure, not a test's verdict."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# The head of every test configuration: the daemon's own runtime directory and EAL file prefix
# ({run} and {prefix}, filled in by Daemon), plain log lines, a dataplane that sleeps when idle
# (these machines have two cores).
CONFIG_HEAD = """
runtime_dir: {run}
log:
  format: plain
eal:
  file_prefix: {prefix}
dataplane:
  idle_sleep_us: 20
"""

# Apps as the TCP tests run them: cleave-tcp's region holds both its 16 MiB windows, and its CQ
# of 4096 entries fits the quota.
TCP_APPS = """apps:
  quota:
    memory_mb: 128
    region_mb: 64
    pipe_entries: 4096
  allow:
    - uid: 0
"""


def port_yaml(device, mac, ip):
    """The configuration's ports: one, p0, on `device` with its MAC and address (a /24)."""
    return f"""ports:
  - name: p0
    device: {device}
    mac: {mac}
    ipv4: {ip}/24
"""


class Net:
    """Two namespaces, a (cleaved's side) and b (the kernel peer), joined by a veth pair.
    peer_addr=None leaves the kernel in b without an address, for a second cleaved on vb."""

    def __init__(self, tag, peer_addr="10.99.0.2/24"):
        base = f"cl{os.getpid() % 100000}{tag}"
        self.a, self.b = base + "a", base + "b"
        self.va, self.vb = base + "va", base + "vb"
        for ns in (self.a, self.b):
            sh(["ip", "netns", "add", ns])
            _cleanups.append(lambda ns=ns: sh(["ip", "netns", "del", ns], check=False))
            sh(["ip", "link", "set", "lo", "up"], ns=ns)
        self._veth(self.va, self.vb)
        if peer_addr:
            sh(["ip", "addr", "add", peer_addr, "dev", self.vb], ns=self.b)
        self.peer_mac = json.loads(sh(["ip", "-j", "link", "show", self.vb], ns=self.b).stdout)[0][
            "address"]

    def _veth(self, va, vb):
        sh(["ip", "link", "add", va, "netns", self.a, "type", "veth", "peer", "name", vb, "netns",
            self.b])
        sh(["ip", "link", "set", va, "up"], ns=self.a)
        sh(["ip", "link", "set", vb, "up"], ns=self.b)
        # af_packet hands over what the kernel gives it: no offloads that make frames larger
        # than the MTU or leave checksums for later (reference/DPDK.md).
        sh(["ethtool", "-K", va, "tso", "off", "gso", "off", "gro", "off"], ns=self.a)
        sh(["ethtool", "-K", vb, "tso", "off", "gso", "off", "gro", "off", "tx", "off"], ns=self.b)

    def add_wire(self, n):
        """Another veth pair between a and b (a second wire): its two interface names."""
        va, vb = f"{self.va}{n}", f"{self.vb}{n}"
        self._veth(va, vb)
        return va, vb

    def close(self):
        for ns in (self.a, self.b):
            sh(["ip", "netns", "del", ns], check=False)


class Daemon:
    """cleaved running in a namespace on a config written from `yaml` (with {run} and {prefix}
    filled in), with its own runtime directory."""

    def __init__(self, yaml, ns=None, env=None, wait_ready=True):
        self.dir = tempfile.mkdtemp(prefix="cleave-it-")
        _cleanups.append(lambda: shutil.rmtree(self.dir, ignore_errors=True))
        self.run_dir = os.path.join(self.dir, "run")
        self.prefix = "clit" + str(os.getpid()) + os.path.basename(self.dir)[-6:]
        self.socket = os.path.join(self.run_dir, "cleaved.sock")
        self.config = os.path.join(self.dir, "cleaved.yaml")
        with open(self.config, "w") as f:
            f.write(yaml.format(run=self.run_dir, prefix=self.prefix))
        self.log_path = os.path.join(self.dir, "cleaved.log")
        self.ns = ns
        self.proc = None
        self.start(env=env, wait_ready=wait_ready)

    def start(self, env=None, wait_ready=True):
        cmd = [CLEAVED, "-c", self.config]
        if self.ns:
            cmd = ["ip", "netns", "exec", self.ns] + cmd
        self.log = open(self.log_path, "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, **(env or {})))
        _cleanups.append(self.kill)
        if wait_ready:
            wait_until(lambda: self.ready(), what="cleaved to answer on its socket")

    def ready(self):
        if self.proc.poll() is not None:
            raise AssertionError(f"cleaved exited with {self.proc.returncode}:\n{self.logs()}")
        return os.path.exists(self.socket) and self.ctl("status", check=False)[0] == 0

    def ctl(self, *args, check=True):
        """cleavectl -j ARGS: returns (exit code, parsed JSON or None, stderr)."""
        p = subprocess.run([CLEAVECTL, "-j", "-s", self.socket] + list(args), capture_output=True,
                           text=True, timeout=60)
        out = json.loads(p.stdout) if p.returncode == 0 and p.stdout.strip() else None
        if check and p.returncode != 0:
            raise AssertionError(f"cleavectl {' '.join(args)} failed: {p.stderr}")
        return p.returncode, out, p.stderr

    def stats(self):
        return self.ctl("stats", "show")[1]

    def transport_stats(self, name):
        """Transport `name`'s counters over all its flows (`transport list`); None when it is
        not listed."""
        for t in self.ctl("transport", "list")[1]["transports"]:
            if t["name"] == name:
                return t["stats"]
        return None

    def stop(self, sig=signal.SIGTERM, timeout=5):
        """Signals cleaved and waits; returns (exit code, seconds it took)."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        return code, time.monotonic() - t0

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if not self.log.closed:
            self.log.close()

    def logs(self):
        with open(self.log_path) as f:
            return f.read()

    def request(self, command, args=None, timeout=20):
        """One request on the control socket as raw JSON (for commands cleavectl does not
        have, such as debug.*); returns the parsed answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(self.socket)
            s.sendall(json.dumps({"version": 1, "command": command,
                                  "args": args or {}}).encode() + b"\n")
            buf = b""
            while b"\n" not in buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise AssertionError(f"cleaved closed the connection before answering "
                                         f"{command}")
                buf += chunk
        return json.loads(buf.split(b"\n", 1)[0])


def builds(baseline):
    """The cleaved binaries a benchmark compares, as (name, path): this build's, and with
    `baseline` (the build dir of another revision, e.g. main's) that one's before it."""
    out = [("this", CLEAVED)]
    if baseline:
        out.insert(0, ("baseline", os.path.join(baseline, "src/dataplane/cleaved")))
    return out


NOBODY = 65534  # the user no configuration admits, for local-user tests


class Nobody:
    """fn() in a child process as uid and gid 65534; its JSON result comes back through a pipe
    (result()). Then, when the parent says proceed(), then() in the same child, its result
    likewise. The child stays, keeping whatever they opened, until release()."""

    def __init__(self, fn, then=None):
        r, w = os.pipe()
        r2, w2 = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            os.close(w2)

            def run(f):
                try:
                    out = f()
                except BaseException as e:  # the parent fails the test with it
                    out = {"error": repr(e)}
                data = json.dumps(out).encode() + b"\n"
                while data:
                    data = data[os.write(w, data):]

            os.setgid(NOBODY)
            os.setuid(NOBODY)
            run(fn)
            if then is not None and os.read(r2, 1):
                run(then)
            os.read(r2, 1)
            os._exit(0)
        os.close(w)
        os.close(r2)
        self.pid, self.r, self.w2 = pid, os.fdopen(r, "rb"), w2
        _cleanups.append(self.release)

    def result(self):
        return json.loads(self.r.readline())

    def proceed(self):
        os.write(self.w2, b"x")

    def release(self):
        if self.pid:
            os.close(self.w2)
            os.waitpid(self.pid, 0)
            self.r.close()
            self.pid = None


class TestCase(unittest.TestCase):
    def tearDown(self):
        _run_cleanups()


def main():
    require_root()
    for tool in ("ip", "ethtool"):
        if shutil.which(tool) is None:
            print(f"skipped: {tool} is not installed", file=sys.stderr)
            sys.exit(SKIP)
    unittest.main(verbosity=2)
