#!/usr/bin/python3
"""test_tcp_loss.py - cleave's TCP sender at 1 % loss is not far below Linux's on the same wire.

The set-up is test_tcp.py's (cleaved on a tap in a scratch namespace, the kernel on the tap's
other end; both NIC backends). Each of 8 rounds runs four transfers of CLEAVE_TCP_LOSS_BYTES
(default 16 MiB), the order alternating: lossless, then with 1 % loss on cleave's port in both
directions (`cleavectl port fault p0 loss 0.01 seed S`, the same S for both senders of a
round), Linux sending to cleave-tcp and cleave-tcp sending to Linux, neither end doing per-byte
work (wire_goodput.py: kernel_tcp against cleave-tcp --no-check), both with CUBIC (cleave's
default; Linux's by TCP_CONGESTION, whatever the host's default: a host may run bbr, which does
not take loss for congestion and so is no measure of loss recovery). Every transfer must
complete.
A sender's fraction is its best goodput at 1 % loss over its best lossless goodput, and
cleave's must be at least half of Linux's. Prints every figure.

Why the best and not the median: on a shared two-core machine the tap and the dataplane are
the wire's limit, and whether another process holds their core at the time splits transfers
into two groups, about 1.2 and 0.45 Gb/s here, whatever the sender or the loss. A median of
a few rounds, or of per-round fractions, then swings by that factor: Linux against itself
through this test gave cleave/Linux from 0.49 to 1.62 that way, and from 0.94 to 1.12 (once
0.34) with the best of 5. The best of N is what each sender achieves when the machine lets it.
The bound is generous on purpose: this is a test that must not flake, not the measurement
(tests/bench/tcp_loss.py is, with medians and spread); it fails when cleave's loss recovery
falls far behind, as a sender stuck at a tiny window or in timeouts does.
"""

import os

import cleavetest as ct
import test_tcp as tcp
import wire_goodput as wg

N = int(os.environ.get("CLEAVE_TCP_LOSS_BYTES", 16 << 20))
LOSS = 0.01
ROUNDS = 8
BOUND = 0.5


class Loss:
    """The case; a subclass per backend sets `backend`."""

    backend = None

    def setUp(self):
        tag = os.getpid() % 100000
        self.ns = f"cl{tag}tl"
        self.d = tcp.start(self.backend, self.ns, f"cltl{tag}")
        wg.no_metrics(self.ns)
        self.linux_cc = wg.set_cc(self.d, "cubic")

    def test_cleave_sender_at_one_percent_loss_is_not_far_below_linux(self):
        g = {(s, p): [] for s in wg.SENDERS for p in (0, LOSS)}
        port = 7100
        for rnd in range(ROUNDS):
            for p in (0, LOSS):
                order = wg.SENDERS if rnd % 2 == 0 else wg.SENDERS[::-1]
                for s in order:
                    wg.set_faults(self.d, p, 0, 100 + rnd)
                    port += 1
                    r = wg.transfer(self.d, self.ns, s, port, N, linux_cc=self.linux_cc)
                    self.assertTrue(r["ok"], f"{s} sender, loss {p}: {r['error']}\n"
                                    f"cleaved log (tail):\n{self.d.logs()[-3000:]}")
                    g[(s, p)].append(r["gbps"])
        faults = self.d.ctl("port", "show", "p0")[1][0]["faults"]  # the wire did drop
        self.assertGreater(faults["rx"]["dropped"], 0, faults)
        self.assertGreater(faults["tx"]["dropped"], 0, faults)
        frac = {s: max(g[(s, LOSS)]) / max(g[(s, 0)]) for s in wg.SENDERS}
        print(f"\n{self.backend} backend, {N} bytes, {ROUNDS} rounds, Gb/s lossless / at "
              f"{LOSS * 100:g} % loss: " + "; ".join(
                  f"{s} sender {g[(s, 0)]} / {g[(s, LOSS)]}, fraction {frac[s]:.2f}"
                  for s in wg.SENDERS) +
              f"; cleave/Linux {frac['cleave'] / frac['linux']:.2f} (bound {BOUND})", flush=True)
        self.assertGreaterEqual(frac["cleave"], BOUND * frac["linux"],
                                f"cleave's sender keeps {frac['cleave']:.2f} of its lossless "
                                f"goodput at {LOSS * 100:g} % loss, Linux's {frac['linux']:.2f}: "
                                f"{g}")


class CleaveBackend(Loss, ct.TestCase):
    backend = "cleave"


class GenericBackend(Loss, ct.TestCase):
    backend = "generic"


if __name__ == "__main__":
    for tool in (tcp.TOOL, wg.KERNEL_TCP):
        if not os.access(tool, os.X_OK):
            print(f"skipped: {tool} is not built", flush=True)
            raise SystemExit(ct.SKIP)
    ct.main()
