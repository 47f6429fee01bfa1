#!/usr/bin/python3
"""test_check_layers.py - tools/check_layers.py finds what each layer must not reach, on made-up
`ninja -t deps` listings. tools/test.sh runs the check itself on the real build."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import check_layers  # noqa: E402

BUILD = "/nowhere/tree/build"


def listing(objects):
    """A `ninja -t deps` listing: {source: [deps]} relative to BUILD as ninja writes them."""
    out = []
    for src, deps in objects.items():
        out.append(f"obj/{os.path.basename(src)}.o: #deps {len(deps) + 1}, deps mtime 1 (VALID)")
        out += [f"    {d}" for d in [src] + deps]
        out.append("")
    return "\n".join(out)


def found(objects):
    deps = check_layers.parse_deps(listing(objects))
    return sorted((f, d) for f, d, _ in check_layers.violations(deps, BUILD))


class Rules(unittest.TestCase):
    def test_dpdk_in_a_transport(self):
        self.assertEqual(found({"../src/transport/tcp/tcp.cc": [
            "../src/transport/transport.h", "/usr/include/dpdk/rte_mbuf.h", "/usr/include/c++/12/map"]}),
            [("src/transport/tcp/tcp.cc", "dpdk")])

    def test_a_transports_internals_in_the_dataplane(self):
        self.assertEqual(found({"../src/dataplane/flows.cc": [
            "../src/transport/transport.h", "../src/transport/rocev2/rc.h",
            "/usr/include/dpdk/rte_mbuf.h"]}),
            [("src/dataplane/flows.cc", "src/transport/rocev2/rc.h")])

    def test_the_model_and_ipc_stay_plain(self):
        self.assertEqual(found({
            "../hw/fpga/model/nic_model_rx.cc": ["../src/dataplane/nic/nic.h"],
            "../src/ipc/libcleave/libcleave.cc": ["../src/transport/transport.h",
                                                  "../src/ipc/shm_abi.h"],
        }), [("hw/fpga/model/nic_model_rx.cc", "src/dataplane/nic/nic.h"),
             ("src/ipc/libcleave/libcleave.cc", "src/transport/transport.h")])

    def test_what_is_allowed_passes(self):
        self.assertEqual(found({
            "../src/dataplane/flows.cc": ["../src/transport/transport.h",
                                          "/usr/include/dpdk/rte_mbuf.h", "../src/ipc/pipe.h"],
            "../src/transport/tcp/tcp.cc": ["../src/transport/tcp/tcp.h"],
            "../tests/unit/tcp_test.cc": ["../src/transport/tcp/tcp.h",
                                          "/usr/include/dpdk/rte_mbuf.h"],
        }), [])

    def test_an_include_line_is_checked_where_no_object_reads_it(self):
        v = check_layers.header_violations_in("src/transport/foo.h",
                                              '#include <rte_mbuf.h>\n#include "dataplane/apps.h"\n')
        self.assertEqual(sorted(i for _, i, _ in v), ["dataplane/apps.h", "rte_mbuf.h"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
