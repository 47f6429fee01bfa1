#!/usr/bin/env python3
"""check-readme-files.py - a folder README's file list against the files git tracks there.

Usage: check-readme-files.py FOLDER... (paths from the repository's root). For each folder,
every file git tracks directly in it (but the README) must be named in its README.md, and every
file a list item of the README names (a line starting "- `") must exist in the folder. A name is
written as `name.ext`, or `stem.{h,cc}` for several. Exit 1, with what is wrong, when one is off.
"""

import os
import re
import subprocess
import sys

SOURCE = {"h", "cc", "c", "build", "py", "sh"}  # what a list item names as a file
NAME = re.compile(r"`([A-Za-z0-9_.\-]+)\.\{([a-z,]+)\}`|`([A-Za-z0-9_\-]+(?:\.[A-Za-z0-9]+)+)`")


def names(text):
    out = set()
    for stem, exts, plain in NAME.findall(text):
        if stem:
            out.update(f"{stem}.{e}" for e in exts.split(","))
        else:
            out.add(plain)
    return out


def check(root, folder):
    tracked = subprocess.run(["git", "-C", root, "ls-files", "--", folder], check=True,
                             capture_output=True, text=True).stdout.split()
    here = {os.path.relpath(p, folder) for p in tracked}
    files = {p for p in here if "/" not in p and p != "README.md"}
    with open(os.path.join(root, folder, "README.md"), encoding="utf-8") as f:
        text = f.read()
    listed = {n for n in names("\n".join(l for l in text.splitlines() if l.startswith("- `")))
              if n.rsplit(".", 1)[-1] in SOURCE}
    problems = [f"{folder}/README.md does not name {p}" for p in sorted(files - names(text))]
    problems += [f"{folder}/README.md lists {p}, which git does not track there"
                 for p in sorted(listed - files)]
    return problems


def main():
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True,
                          cwd=os.path.dirname(os.path.abspath(__file__))).stdout.strip()
    problems = [p for folder in sys.argv[1:] for p in check(root, folder)]
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
