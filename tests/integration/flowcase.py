"""flowcase.py - the fixture test_flows.py and test_datagram.py share: cleaved on a veth in
namespace a (either NIC backend), a rawapp (ABI versions 1-2) with a completion pipe and a submit
pipe on it, the kernel peer's scripts run in namespace b, requests posted and completions taken.
"""

import os
import subprocess
import time

import cleavetest as ct
import rawapp as ra


def device(backend, iface):
    """The port's device on `iface`: "cleave" is net_cleave over net_af_packet (the NIC model
    places payloads), anything else net_af_packet itself (the generic backend)."""
    if backend == "cleave":
        return f"net_cleave0,wire=net_af_packet0,wire_args=iface={iface}"
    return f"net_af_packet0,iface={iface}"


class FlowCase(ct.TestCase):
    def start_app(self, tag, backend, config, **values):
        """A namespace pair named after `tag`, cleaved on `config` % values (and %(device)s),
        the app attached with its pipes (self.net, self.d, self.app, self.cq, self.sq)."""
        self.net = ct.Net(tag)
        self.d = ct.Daemon(config % dict(values, device=device(backend, self.net.va)),
                           ns=self.net.a)
        self.app = ra.RawApp(os.path.join(self.d.run_dir, "app.sock"), versions=(1, 2))
        self.assertEqual(self.app.status, 0)
        self.addCleanup(self.app.close)
        self.cq = self.app.create_pipe(ra.COMPLETION, 1024)
        self.sq = self.app.create_pipe(ra.SUBMIT, 256, cq=self.cq.id)

    def kernel(self, script, *args):
        """The Python `script` run in the kernel's namespace with `args`."""
        return subprocess.Popen(["ip", "netns", "exec", self.net.b, "python3", "-c", script] +
                                [str(a) for a in args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def post(self, op, flow, wr_id=0, offset=0, length=0):
        self.assertTrue(self.sq.produce(ra.send_entry(op, wr_id=wr_id, offset=offset,
                                                      length=length, target=flow)))

    def completions(self, timeout=60):
        """Completions as they come; fails when none comes for `timeout` seconds in all."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            c = self.cq.consume()
            if c is None:
                time.sleep(0.0002)
                continue
            yield c
        self.fail("no completion within %d s" % timeout)
