#!/usr/bin/python3
"""test_bindings.py - operating a running cleaved: transports and flow bindings.

cleaved runs as in test_tcp.py (a scratch namespace, the generic backend on a tap, the kernel at
198.18.0.2 on the tap's other end). Cases:
  - cleavectl transport attach: the example datagram plugin loaded into the running daemon (by a
    path relative to cleavectl's directory), listed, bound to a port, listened on by an app;
    broken plugins, a missing file, a taken name and the same object twice refused with their
    reason and exit 1, the daemon unharmed;
  - tuple bindings: the kernel connects to a cleave-tcp listener, and `flow show` reports the cc
    the tuple chose over the port binding's; after flow detach the next flow gets the port's,
    and the flow that exists keeps its own; an app's connect matching a tuple gets its cc;
  - uid: a port or tuple bound to uid 0 refuses an app of uid 65534 (CL_EACCES, counted as
    binding_refused) and admits root's; a kernel SYN matching a tuple of uid 0 opens no flow for
    a listener of uid 65534;
  - an accepted SYN whose tuple names another transport (the plugin) than its listener's (tcp)
    opens no flow.
"""

import json
import os
import subprocess

import cleavetest as ct
import rawapp as ra
import test_tcp as tt

OURS, KERNEL = tt.OURS, tt.KERNEL
PLUGIN = os.environ.get("CLEAVE_TEST_PLUGIN", "")
# Root's apps and uid 65534's (nobody), whose refusals the uid cases look for.
CONFIG = (ct.CONFIG_HEAD + ct.TCP_APPS + "    - uid: 65534\n" +
          ct.port_yaml("%(device)s", tt.OUR_MAC, OURS))


def host(ip):
    a = [int(x) for x in ip.split(".")]
    return a[0] << 24 | a[1] << 16 | a[2] << 8 | a[3]


class Bindings(ct.TestCase):
    def setUp(self):
        tag = os.getpid() % 100000
        self.ns, self.tap = f"cl{tag}bnd", f"clb{tag}"
        self.d = tt.start("generic", self.ns, self.tap, CONFIG)
        self.app_sock = os.path.join(self.d.run_dir, "app.sock")


    def names(self):
        return [t["name"] for t in self.d.ctl("transport", "list")[1]["transports"]]

    def app(self):
        app = ra.RawApp(self.app_sock, versions=(1, 2))
        self.assertEqual(app.status, 0)
        return app, app.create_pipe(ra.COMPLETION, 64)

    def as_nobody(self, fn):
        """fn(app, cq) in a child of uid 65534; returns its result (a status)."""
        os.chmod(self.d.dir, 0o755)  # let uid 65534 reach the socket: only cleaved may refuse
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                os.setgid(65534)
                os.setuid(65534)
                app = ra.RawApp(self.app_sock, versions=(1, 2))
                status = app.status if app.status != 0 else fn(app, app.create_pipe(
                    ra.COMPLETION, 64))
            except BaseException as e:  # noqa: B036 - the parent sees it as a failed status
                status = repr(e)
            finally:
                os.write(w, str(status).encode())
                os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        out = os.read(r, 4096).decode()
        os.close(r)
        return int(out) if out.lstrip("-").isdigit() else out

    def kernel_client(self, port):
        """A kernel connection to cleave at `port`, held open until its stdin closes."""
        script = ("import socket, sys, time\n"
                  "end = time.monotonic() + 10\n"
                  "while True:\n"
                  "    try:\n"
                  f"        s = socket.create_connection(('{OURS}', {port}), timeout=2); break\n"
                  "    except OSError:\n"
                  "        if time.monotonic() > end: raise\n"
                  "        time.sleep(0.1)\n"
                  "print(s.getsockname()[1], flush=True)\n"
                  "sys.stdin.read()\n"
                  "s.close()\n")
        p = ct.spawn(["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-c", script],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        kport = int(p.stdout.readline())
        return p, kport

    def flow(self, local, remote):
        """The flow with these ends, once cleave lists it."""
        def find():
            for f in self.d.ctl("flow", "list")[1]["flows"]:
                if f["local"] == local and f["remote"] == remote:
                    return f
            return None
        return ct.wait_until(find, what=f"flow {local} -> {remote}")

    def accepted(self, port):
        """cleave-tcp accepts a held kernel connection on `port`: (tool, client, flow)."""
        tool = ct.spawn([tt.TOOL, "-s", self.app_sock, "--json", "--timeout", "30", "--listen",
                           str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        client, kport = self.kernel_client(port)
        return tool, client, self.flow(f"{OURS}:{port}", f"{KERNEL}:{kport}")

    def finish(self, tool, client):
        client.stdin.close()
        client.wait(timeout=10)
        out, err = tool.communicate(timeout=40)
        self.assertEqual(tool.returncode, 0, err)
        self.assertEqual(json.loads(out.splitlines()[-1])["error"], 0)

    # ---- transport attach

    def test_a_plugin_attached_at_run_time(self):
        self.assertTrue(PLUGIN, "CLEAVE_TEST_PLUGIN is not set: run through meson test")
        self.assertEqual(self.names(), ["tcp", "rocev2", "solar"])
        refused = [("/nonexistent/solar.so", "cannot open shared object file: No such file")]
        for var, why in (("NO_ENTRY", "not a Cleave transport: no entry point "
                          "cleave_transport_plugin_v1"),
                         ("WRONG_ABI", "built for transport ABI version 999, this build of Cleave "
                          "has version"),
                         ("TAKEN", 'transport name "tcp" is taken (by built-in)')):
            refused.append((os.environ["CLEAVE_TEST_BAD_PLUGIN_" + var], why))
        for path, why in refused:
            code, _, err = self.d.ctl("transport", "attach", path, check=False)
            self.assertEqual(code, 1, err)
            self.assertTrue(err.startswith(f"cleavectl: cannot attach transport: {path}: "), err)
            self.assertIn(why, err)
        self.assertEqual(self.names(), ["tcp", "rocev2", "solar"])  # nothing refused was added
        # A relative path is cleavectl's, from its own directory.
        p = subprocess.run([ct.CLEAVECTL, "-j", "-s", self.d.socket, "transport", "attach",
                            os.path.basename(PLUGIN)], cwd=os.path.dirname(PLUGIN),
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 0, p.stderr)
        r = json.loads(p.stdout)
        self.assertEqual((r["name"], r["origin"]), ("datagram", PLUGIN))
        self.assertIn(f"transport datagram loaded from {PLUGIN}", self.d.logs())
        code, _, err = self.d.ctl("transport", "attach", PLUGIN, check=False)
        self.assertEqual((code, err), (1, f"cleavectl: cannot attach transport: {PLUGIN}: "
                                          'already loaded (transport "datagram")\n'))
        ts = {t["name"]: t for t in self.d.ctl("transport", "list")[1]["transports"]}
        self.assertEqual(list(ts), ["tcp", "rocev2", "solar", "datagram"])
        self.assertEqual((ts["datagram"]["origin"], ts["datagram"]["instantiated"]),
                         (PLUGIN, False))
        # Bound to a port it claims (UDP 9000-9015), it runs; an app's listener on that port is
        # the plugin's.
        self.assertEqual(self.d.ctl("flow", "attach", "port", "9007", "transport", "datagram")[1],
                         {"port": 9007, "uid": None, "transport": "datagram", "params": {}})
        app, cq = self.app()
        st, lid = app.listen(9007, cq.id)
        self.assertEqual(st, 0)
        self.assertEqual(self.d.ctl("flow", "list")[1]["listeners"],
                         [{"id": lid, "app": app.app_id, "shard": 0, "transport": "datagram",
                           "local": "0.0.0.0:9007"}])
        ts = {t["name"]: t for t in self.d.ctl("transport", "list")[1]["transports"]}
        self.assertEqual((ts["datagram"]["instantiated"], ts["datagram"]["listeners"]), (True, 1))
        self.assertEqual(self.d.ctl("status")[0], 0)
        app.close()

    # ---- tuple bindings

    def test_a_tuple_binding_chooses_cc_over_the_port_binding(self):
        self.d.ctl("flow", "attach", "port", "5001", "cc", "newreno")  # the default is cubic
        b = self.d.ctl("flow", "attach", "tuple", f"{OURS}:5001", f"{KERNEL}:*", "cc", "dctcp")[1]
        tuple_b = {"tuple": {"local": f"{OURS}:5001", "remote": f"{KERNEL}:*"}, "uid": None,
                   "transport": "tcp", "params": {"cc": "dctcp"}}
        self.assertEqual(b, tuple_b)
        self.assertEqual(self.d.ctl("flow", "list")[1]["bindings"],
                         [{"port": 5001, "uid": None, "transport": "tcp",
                           "params": {"cc": "newreno"}}, tuple_b])
        text = ct.sh([ct.CLEAVECTL, "-s", self.d.socket, "flow", "list"]).stdout
        self.assertRegex(text, rf"\n  tuple {OURS}:5001 {KERNEL}:\* +- +tcp +cc dctcp\n")
        self.assertRegex(text, r"\n  port 5001 +- +tcp +cc newreno\n")
        tool1, client1, f1 = self.accepted(5001)
        self.assertEqual(f1["info"]["cc"], "dctcp")
        # Detached: the next flow gets the port's cc; the one that exists keeps its own.
        r = self.d.ctl("flow", "detach", "tuple", f"{OURS}:5001", f"{KERNEL}:*")[1]
        self.assertEqual(r, tuple_b)
        code, _, err = self.d.ctl("flow", "detach", "tuple", f"{OURS}:5001", f"{KERNEL}:*",
                                  check=False)
        self.assertEqual((code, err), (1, f"cleavectl: no binding for tuple {OURS}:5001 "
                                          f"{KERNEL}:*\n"))
        tool2, client2, f2 = self.accepted(5001)
        self.assertEqual(f2["info"]["cc"], "newreno")
        self.assertEqual(self.d.ctl("flow", "show", str(f1["id"]))[1]["info"]["cc"], "dctcp")
        self.finish(tool1, client1)
        self.finish(tool2, client2)

    def test_a_tuple_binding_on_an_apps_connect(self):
        server = ct.spawn(["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-c",
                             "import socket, sys\n"
                             f"s = socket.create_server(('{KERNEL}', 6001))\n"
                             "print('ready', flush=True)\nsys.stdin.read()\n"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.assertEqual(server.stdout.readline(), "ready\n")
        # The most specific tuple wins: the second names the remote port too.
        self.d.ctl("flow", "attach", "tuple", "*:*", f"{KERNEL}:*", "cc", "newreno")
        self.d.ctl("flow", "attach", "tuple", "*:*", f"{KERNEL}:6001", "cc", "dctcp")
        app, cq = self.app()
        st, fid = app.connect(host(KERNEL), 6001, cq.id)
        self.assertEqual(st, 0)
        # The flow shows its transport's state once ARP has answered ("resolving" until then).
        f = ct.wait_until(lambda: (lambda f: f if "cc" in f["info"] else None)(
            self.d.ctl("flow", "show", str(fid))[1]), what="the connect to leave resolving")
        self.assertEqual((f["remote"], f["info"]["cc"]), (f"{KERNEL}:6001", "dctcp"))
        app.close()
        server.stdin.close()
        server.wait(timeout=10)

    def test_an_accepted_flow_whose_tuple_names_another_transport_is_not_opened(self):
        self.d.ctl("transport", "attach", PLUGIN)
        self.d.ctl("flow", "attach", "tuple", f"{OURS}:5005", "*:*", "transport", "datagram")
        app, cq = self.app()
        self.assertEqual(app.listen(5005, cq.id)[0], 0)  # tcp's listener
        p = ct.sh(["/usr/bin/python3", "-c",
                   "import socket\ntry:\n"
                   f"    socket.create_connection(('{OURS}', 5005), timeout=1); print('open')\n"
                   "except OSError as e: print(type(e).__name__)"], ns=self.ns)
        self.assertEqual(p.stdout.strip(), "TimeoutError")
        self.assertGreaterEqual(self.d.stats()["flows"]["binding_refused"], 1)
        self.assertEqual(self.d.ctl("flow", "list")[1]["flows"], [])
        app.close()

    # ---- uid

    def test_a_tuple_for_a_uid_opens_no_flow_for_another_users_listener(self):
        self.d.ctl("flow", "attach", "tuple", f"{OURS}:5004", "*:*", "uid", "0")
        os.chmod(self.d.dir, 0o755)
        status_r, status_w = os.pipe()
        done_r, done_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # uid 65534 listens on 5004 (no port binding stops it) until told
            os.close(status_r)
            os.close(done_w)
            try:
                os.setgid(65534)
                os.setuid(65534)
                app = ra.RawApp(self.app_sock, versions=(1, 2))
                status = app.listen(5004, app.create_pipe(ra.COMPLETION, 64).id)[0]
            except BaseException as e:  # noqa: B036 - the parent sees it as a failed status
                status = repr(e)
            os.write(status_w, str(status).encode())
            os.read(done_r, 1)
            os._exit(0)
        os.close(status_w)
        os.close(done_r)
        try:
            self.assertEqual(os.read(status_r, 4096), b"0")
            # The kernel's SYNs reach the listener; the tuple is root's: no flow, counted.
            p = ct.sh(["/usr/bin/python3", "-c",
                       "import socket\ntry:\n"
                       f"    socket.create_connection(('{OURS}', 5004), timeout=1); print('open')\n"
                       "except OSError as e: print(type(e).__name__)"], ns=self.ns)
            self.assertEqual(p.stdout.strip(), "TimeoutError")
            self.assertGreaterEqual(self.d.stats()["flows"]["binding_refused"], 1)
            self.assertEqual(self.d.ctl("flow", "list")[1]["flows"], [])
        finally:
            os.write(done_w, b"x")
            os.waitpid(pid, 0)
            os.close(done_w)
            os.close(status_r)

    def test_a_binding_for_a_uid_refuses_other_apps(self):
        self.d.ctl("flow", "attach", "port", "5002", "uid", "0")
        b = self.d.ctl("flow", "attach", "tuple", "*:*", f"{KERNEL}:6002", "uid", "0")[1]
        self.assertEqual(b["uid"], 0)
        self.assertEqual(self.as_nobody(lambda app, cq: app.listen(5002, cq.id)[0]), ra.EACCES)
        self.assertEqual(self.as_nobody(lambda app, cq: app.connect(host(KERNEL), 6002,
                                                                    cq.id)[0]), ra.EACCES)
        self.assertEqual(self.d.stats()["flows"]["binding_refused"], 2)
        # Others' ports and flows are theirs to use; root may use these.
        self.assertEqual(self.as_nobody(lambda app, cq: app.listen(5003, cq.id)[0]), 0)
        app, cq = self.app()
        self.assertEqual(app.listen(5002, cq.id)[0], 0)
        self.assertEqual(app.connect(host(KERNEL), 6002, cq.id)[0], 0)
        self.assertEqual(self.d.stats()["flows"]["binding_refused"], 2)
        # Detached, the port is anyone's again.
        self.d.ctl("flow", "detach", "tuple", "*:*", f"{KERNEL}:6002")
        self.assertEqual(self.as_nobody(lambda app, cq: app.connect(host(KERNEL), 6002,
                                                                    cq.id)[0]), 0)
        app.close()


if __name__ == "__main__":
    for tool in (tt.TOOL,):
        if not os.access(tool, os.X_OK):
            print(f"skipped: {tool} is not built", flush=True)
            raise SystemExit(ct.SKIP)
    ct.main()
