#!/usr/bin/python3
"""check_layers.py - fails when a layer reaches where the architecture says it must not.

The rules (docs/architecture.md, "Layers"): what the sources of each folder may not depend on.
A dependency is any header the compiler actually read for an object (`ninja -t deps`, so how an
#include is spelled does not matter), plus, for headers no object of their own folder compiles,
the #include lines of every source file of the folder.

    tools/check_layers.py [BUILD_DIR]        (default: build; after a build)
    tools/check_layers.py --deps FILE        the same on a saved `ninja -t deps` listing

Prints each violation as `FILE: depends on DEP (RULE)` and exits 1 when there is one.
"""

import os
import re
import subprocess
import sys

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), ".."))

# (folder, what it may not reach, why). A target is a path prefix relative to the root, or
# "dpdk" for DPDK's headers. The first rule whose folder holds the file applies, so the more
# specific folder comes first.
RULES = [
    ("src/common/", ["dpdk", "src/dataplane/", "src/transport/", "src/ipc/", "src/compat/", "hw/"],
     "common helpers are leaves every layer may use"),
    ("src/transport/", ["dpdk", "src/dataplane/", "src/ipc/", "src/compat/", "hw/"],
     "a transport knows nothing of DPDK, ports or apps"),
    ("hw/fpga/model/", ["dpdk", "src/dataplane/", "src/transport/", "src/ipc/", "src/compat/"],
     "the NIC model is plain C++"),
    ("src/ipc/", ["dpdk", "src/transport/", "src/dataplane/", "src/compat/", "hw/"],
     "ipc knows nothing of transports or the daemon"),
    ("src/compat/", ["dpdk", "src/transport/", "src/dataplane/", "hw/", "src/ipc/libcleave/",
                     "src/ipc/shm_abi.h", "src/ipc/pipe.h"],
     "compat knows only <cleave/cleave.h>"),
    ("src/dataplane/", ["src/transport/tcp/", "src/transport/rocev2/", "src/transport/solar/",
                        "src/transport/cc/"],
     "the dataplane knows no transport's internals"),
    ("tools/cleave-perf/", ["dpdk", "src/dataplane/", "src/transport/", "hw/"],
     "an app knows only libcleave"),
    ("tools/cleave-tcp/", ["dpdk", "src/dataplane/", "src/transport/", "hw/"],
     "an app knows only libcleave"),
    ("tools/cleave-rdma/", ["dpdk", "src/dataplane/", "src/transport/", "hw/"],
     "an app knows only libcleave"),
]

DPDK_DIRS = ("/usr/include/dpdk/", "/usr/include/x86_64-linux-gnu/dpdk/")


def rule_for(path):
    for folder, banned, why in RULES:
        if path.startswith(folder):
            return banned, why
    return None, None


def classify(dep, build):
    """A dependency as a path relative to the source tree (the build directory's parent), "dpdk",
    or None (system headers, the rest)."""
    p = dep if os.path.isabs(dep) else os.path.normpath(os.path.join(build, dep))
    if p.startswith(DPDK_DIRS) or os.path.basename(p).startswith("rte_") and p.startswith("/usr/"):
        return "dpdk"
    p = os.path.realpath(p) if os.path.exists(p) else p
    build_abs = os.path.realpath(build)
    root = os.path.dirname(build_abs)
    if p.startswith(build_abs + os.sep):
        return os.path.relpath(p, build_abs)  # a generated header: its folder's
    if p.startswith(root + os.sep):
        return os.path.relpath(p, root)
    return None


def parse_deps(text):
    """{object's first dependency (its source): [its other dependencies]} from `ninja -t deps`."""
    out, src = {}, None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            src = None  # a new object; its first dependency is its source
            continue
        d = line.strip()
        if src is None:
            src = d
            out.setdefault(src, [])
        else:
            out[src].append(d)
    return out


def violations(deps, build):
    found = set()
    for src, ds in deps.items():
        s = classify(src, build)
        if s is None:
            continue
        banned, why = rule_for(s)
        if banned is None:
            continue
        for d in ds:
            c = classify(d, build)
            if c is not None and c != s and any(c.startswith(b) for b in banned):
                found.add((s, c, why))
    return found


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)


def header_violations_in(f, text):
    """The #include lines of one file (its path from the top) that break its folder's rule: DPDK
    by name, or a path-qualified include into a banned folder."""
    banned, why = rule_for(f)
    found = set()
    if banned is None:
        return found
    for inc in INCLUDE.findall(text):
        if "dpdk" in banned and (inc.startswith("rte_") or inc.startswith("dpdk/")):
            found.add((f, inc, why))
        for b in banned:
            if b != "dpdk" and (inc.startswith(b) or inc.startswith(b.removeprefix("src/"))):
                found.add((f, inc, why))
    return found


def header_violations(files):
    """header_violations_in for every file: catches what no object of the file's own folder
    compiles (a header only others include)."""
    found = set()
    for f in files:
        if rule_for(f)[0] is None:
            continue
        try:
            with open(os.path.join(ROOT, f), errors="replace") as h:
                found |= header_violations_in(f, h.read())
        except OSError:
            continue
    return found


def main(argv):
    if len(argv) > 1 and argv[0] == "--deps":
        text, build = open(argv[1]).read(), os.path.join(ROOT, "build")
        files = []
    else:
        build = os.path.abspath(argv[0] if argv else os.path.join(ROOT, "build"))
        text = subprocess.run(["ninja", "-C", build, "-t", "deps"], check=True,
                              capture_output=True, text=True).stdout
        files = subprocess.run(["git", "-C", ROOT, "ls-files", "*.h", "*.cc", "*.c"], check=True,
                               capture_output=True, text=True).stdout.split()
    deps = parse_deps(text)
    if not deps:
        print("check_layers.py: no dependencies recorded; build first", file=sys.stderr)
        return 2
    found = sorted(violations(deps, build) | header_violations(files))
    for f, d, why in found:
        print(f"{f}: depends on {d} ({why})")
    print(f"check_layers.py: {len(deps)} objects, {len(found)} violation(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
