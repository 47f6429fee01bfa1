#!/usr/bin/python3
"""test_readmes.py - every folder README's file list matches the files git tracks there.

For each tracked README.md, the names it writes in backticks that look like files (`flows.cc`,
`wire.{h,cc}`, `tcp_*.cc`, `nic/`) are its file list. The test fails when
  - a file or folder tracked directly in the README's folder is named nowhere in it (README.md,
    meson.build and generated-data folders such as fuzz corpora aside), or
  - a name it gives matches no tracked file: a file that was renamed or removed.
Names with a slash are looked up from the README's folder, then from the top of the tree; bare
names from the README's folder down, then anywhere (a README may name a neighbour's header).
Names a meson.build gives as `output :` count as present in its folder (generated headers).
"""

import fnmatch
import os
import re
import subprocess
import sys
import unittest

ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXTENSIONS = (".cc", ".h", ".c", ".py", ".sh", ".sv", ".svh", ".v", ".yaml", ".in", ".map",
              ".md", ".lua", ".txt", ".8", ".5", ".json")
# Tracked entries a README need not name.
EXEMPT = {"README.md", "meson.build", ".gitignore", ".clang-format", ".clang-tidy"}
# Folders whose files are data, named as a whole by their parent (`corpus/`).
DATA_DIRS = ("tests/fuzz/corpus/",)
TICKS = re.compile(r"`([^`\n]+)`")


def tracked():
    out = subprocess.run(["git", "-C", ROOT, "ls-files"], check=True, capture_output=True,
                         text=True).stdout.split("\n")
    return [f for f in out if f]


def generated(files):
    """Files the build writes (a meson.build's `output :` names, in its folder): a README may
    name them though git does not track them."""
    out = []
    for f in files:
        if os.path.basename(f) != "meson.build":
            continue
        with open(os.path.join(ROOT, f)) as m:
            text = m.read()
        for group in re.findall(r"output\s*:\s*(\[[^\]]*\]|'[^']*')", text):
            out += [os.path.join(os.path.dirname(f), n) for n in re.findall(r"'([^'@]+)'", group)]
    return out


def expand(token):
    """`wire.{h,cc}` -> wire.h, wire.cc; anything else as is."""
    m = re.match(r"^(.*)\{([^}]*)\}(.*)$", token)
    if not m:
        return [token]
    return [n for alt in m.group(2).split(",") for n in expand(m.group(1) + alt + m.group(3))]


def names(text):
    """The file-like names a README gives in backticks (a command's first word included)."""
    out = []
    for t in TICKS.findall(text):
        t = t.strip().split(" ")[0]
        if (not t or t.startswith(("-", "$", "/", "http", ".", "_", "build")) or
                any(c in t for c in "=:<>()'\"") or re.match(r"^[A-Z][A-Za-z]*\.\*$", t) or
                not re.search(r"[a-z]", t)):
            continue  # options, absolute paths, build folders, gtest filters, fragments
        for n in expand(t):
            if n.endswith("/") or n.endswith(EXTENSIONS) or n.endswith(".*"):
                out.append(n)
    return out


def matches(pattern, paths):
    return [p for p in paths if fnmatch.fnmatchcase(p, pattern)]


def check(readme, files, text=None, built=()):
    """The problems of one README (its text read from the tree unless given): the names that
    match nothing (among the tracked files and those the build writes, `built`), and the entries
    of its folder it does not name."""
    folder = os.path.dirname(readme)
    prefix = folder + "/" if folder else ""
    dirs = {os.path.dirname(f) + "/" for f in files}
    dirs |= {d[: i + 1] for d in list(dirs) for i, c in enumerate(d) if c == "/"}
    everything = files + list(built) + sorted(dirs)
    if text is None:
        with open(os.path.join(ROOT, readme)) as f:
            text = f.read()
    given = names(text)
    stale, covered = [], set()
    base = lambda p: os.path.basename(p.rstrip("/")) + ("/" if p.endswith("/") else "")
    here = [p for p in everything if p.startswith(prefix)]
    for n in given:
        if "/" in n.rstrip("/"):
            # From the README's folder, each folder above it, then the top.
            found = []
            d = folder
            while not found:
                found = matches(os.path.normpath(os.path.join(d, n)) + ("/" if n.endswith("/")
                                                                        else ""), everything)
                if not d:
                    break
                d = os.path.dirname(d)
        else:
            # A folder may be named without its slash.
            ok = lambda p: fnmatch.fnmatchcase(base(p), n) or fnmatch.fnmatchcase(base(p), n + "/")
            found = [p for p in here if ok(p)] or [p for p in everything if ok(p)]
        if not found:
            stale.append(n)
        covered.update(found)
    entries = set()
    for f in files:
        if not f.startswith(prefix) or f.startswith(DATA_DIRS):
            continue
        rest = f[len(prefix):]
        entries.add(prefix + rest.split("/")[0] + ("/" if "/" in rest else ""))
    # A folder counts as named when something inside it is.
    unnamed = sorted(e for e in entries
                     if os.path.basename(e.rstrip("/")) not in EXEMPT and e not in covered and
                     not (e.endswith("/") and any(c.startswith(e) for c in covered)))
    return stale, unnamed


class Readmes(unittest.TestCase):
    def test_every_readme_lists_its_folder(self):
        files = tracked()
        built = generated(files)
        problems = []
        for r in sorted(f for f in files if os.path.basename(f) == "README.md"):
            if r == "README.md":
                continue  # the front door has its own layout table, checked by the folders' own
            stale, unnamed = check(r, files, built=built)
            problems += [f"{r}: names `{n}`, which git does not track" for n in stale]
            problems += [f"{r}: does not name `{os.path.basename(e.rstrip('/'))}"
                         f"{'/' if e.endswith('/') else ''}`" for e in unnamed]
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_the_check_sees_a_stale_and_a_missing_name(self):
        # The check itself: a README naming a removed file, and a folder with an unnamed file.
        files = ["x/README.md", "x/a.cc", "x/b.cc", "x/sub/README.md", "x/sub/c.h"]
        stale, unnamed = check("x/README.md", files, "`a.cc` and `gone.h`, `sub/`")
        self.assertEqual((stale, unnamed), (["gone.h"], ["x/b.cc"]))


if __name__ == "__main__":
    unittest.main(verbosity=2)
