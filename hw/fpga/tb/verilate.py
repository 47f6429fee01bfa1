#!/usr/bin/env python3
"""verilate.py - build one Verilator testbench binary (used by hw/fpga/tb/meson.build).

Usage: verilate.py --top MODULE --out BINARY --mdir DIR [--param NAME=VALUE]... [--inc DIR]...
                   [--cflags FLAGS] [--ldflags FLAGS] [--jobs N] SOURCES...
SOURCES: the RTL (.sv) and the C++ testbench (.cc) files; --ldflags names the libraries to link.
Runs `verilator --cc --exe --build -Wall`, so every build is also a lint with warnings as errors.
Compiles through ccache (OBJCACHE) when it is installed.
"""
import argparse
import os
import shutil
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mdir", required=True)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--inc", action="append", default=[])
    ap.add_argument("--cflags", default="")
    ap.add_argument("--ldflags", default="")
    ap.add_argument("--jobs", default="2")
    ap.add_argument("sources", nargs="+")
    a = ap.parse_args()

    out = os.path.abspath(a.out)
    mdir = os.path.abspath(a.mdir)
    os.makedirs(mdir, exist_ok=True)
    cmd = ["verilator", "--cc", "--exe", "--build", "-Wall", "-j", a.jobs,
           "--top-module", a.top, "--Mdir", mdir, "-o", out,
           "--x-assign", "unique", "--x-initial", "unique",
           "-O3", "--output-split", "20000",
           # C++ optimization: verilated.mk's defaults (-Os for the eval code and the runtime)
           # override -CFLAGS' -O; -O1 compiles the 512-bit models ~40 % faster than -Os and
           # runs them faster too, and the run-once (Slow) code needs no optimizing at all.
           "-MAKEFLAGS", "OPT_FAST=-O1 OPT_SLOW=-O0 OPT_GLOBAL=-O1"]
    for p in a.param:
        cmd.append("-G" + p)
    for d in a.inc:
        cmd.append("-I" + os.path.abspath(d))
    cflags = "-std=c++20 " + a.cflags
    cmd += ["-CFLAGS", cflags]
    if a.ldflags:
        cmd += ["-LDFLAGS", a.ldflags]
    cmd += [os.path.abspath(s) for s in a.sources]
    env = dict(os.environ)
    if shutil.which("ccache"):
        env["OBJCACHE"] = "ccache"
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.stdout.write(r.stdout)
        sys.exit(r.returncode)


if __name__ == "__main__":
    main()
