#!/usr/bin/env python3
"""The man pages (docs/man) against the code: every configuration key the checker accepts, every
transport parameter, every cleavectl command and option and every cleaved option appears in its
page, in bold, and groff renders each page without a warning.

The keys are read from the code that accepts them (config.cc's mapping() lists, the transports'
parameter tables), and the commands from the programs' own --help, so a key or command added
without its documentation fails here."""
import os
import re
import shutil
import subprocess
import sys
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MAN = os.path.join(ROOT, "docs", "man")
CLEAVED = os.environ.get("CLEAVED")
CLEAVECTL = os.environ.get("CLEAVECTL")


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def bold_words(page):
    """Every word set in bold in a man page: the arguments of .B, and the bold ones of the
    alternating macros (.BR, .RB, .BI, .IB), and \\fB...\\fR runs."""
    words = set()
    alternating = {".BR": 0, ".BI": 0, ".RB": 1, ".IB": 1}
    for line in read("docs", "man", page).splitlines():
        line = line.replace("\\-", "-")
        macro, _, rest = line.partition(" ")
        if macro == ".B":
            words.update(re.findall(r"[\w.\-]+", rest))
        elif macro in alternating:
            args = re.findall(r'"[^"]*"|\S+', rest)
            for a in args[alternating[macro]::2]:
                words.update(re.findall(r"[\w.\-]+", a.strip('"')))
        for run in re.findall(r"\\fB(.*?)\\f[RIP]", line):
            words.update(re.findall(r"[\w.\-]+", run))
    # "log.level" documents both the section and the key.
    out = set()
    for w in words:
        w = w.strip(".")
        out.add(w)
        out.update(w.split("."))
    return out


def config_keys():
    """The keys config.cc's checker accepts: the lists it gives Checker::mapping()."""
    src = read("src", "dataplane", "config.cc")
    keys = set()
    for body in re.findall(r"\bmapping\(\s*[^{;]*?\{([^{}]*)\}", src):
        keys.update(re.findall(r'"(\w+)"', body))
    return keys


def transport_params():
    """The parameters the built-in transports take, from their parsers."""
    params = set()
    for path in (("src", "transport", "tcp", "tcp.cc"), ("src", "transport", "cc", "dcqcn.cc"),
                 ("src", "transport", "rocev2", "rc.cc"), ("src", "transport", "solar", "solar.cc")):
        src = read(*path)
        params.update(re.findall(r'\bkey\s*==\s*"(\w+)"', src))
        params.update(re.findall(r'\{"(\w+)",\s*&\w+::', src))
    return params


def help_text(prog, *args):
    p = subprocess.run([prog, *args], capture_output=True, text=True, timeout=20)
    return p.stdout + p.stderr


class ManPages(unittest.TestCase):
    def assertDocumented(self, names, page, what):
        missing = sorted(set(names) - bold_words(page))
        self.assertEqual(missing, [], f"{what} missing from docs/man/{page} (set them in bold)")

    def test_every_config_key(self):
        keys = config_keys()
        self.assertGreater(len(keys), 40, "config.cc's key lists were not found")
        self.assertDocumented(keys, "cleaved.yaml.5", "configuration keys")

    def test_every_transport_parameter(self):
        params = transport_params()
        for known in ("cc", "mss", "time_wait_ms", "dcqcn", "dcqcn_g", "dcqcn_line_rate_mbps"):
            self.assertIn(known, params, "the transports' parameter tables were not found")
        self.assertDocumented(params, "cleaved.yaml.5", "transport parameters")

    @unittest.skipUnless(CLEAVECTL, "CLEAVECTL not set")
    def test_every_cleavectl_command_and_option(self):
        text = help_text(CLEAVECTL, "--help")
        commands = re.findall(r"^  ([a-z]+)(?: ([a-z]+))?\b", text, re.M)
        self.assertGreater(len(commands), 15, text)
        words = set()
        for obj, verb in commands:
            words.add(obj)
            if verb:
                words.add(verb)
        options = re.findall(r"^  (-\w), (--[\w-]+)", text, re.M)
        self.assertGreater(len(options), 4, text)
        for short, long in options:
            words.update((short, long))
        self.assertDocumented(words, "cleavectl.8", "cleavectl commands or options")
        # Each object-verb pair is one entry of COMMANDS, not two words met somewhere.
        page = read("docs", "man", "cleavectl.8")
        for obj, verb in commands:
            if verb:
                self.assertRegex(page, rf'\.(B|BR|BI) "?{obj} {verb}\b',
                                 f"'{obj} {verb}' has no entry in cleavectl.8")

    @unittest.skipUnless(CLEAVED, "CLEAVED not set")
    def test_every_cleaved_option(self):
        text = help_text(CLEAVED, "--help")
        options = set(re.findall(r"(?<![\w-])(--?[a-zA-Z][\w-]*)", text.split("Options:")[1]))
        self.assertGreater(len(options), 5, text)
        self.assertDocumented(options, "cleaved.8", "cleaved options")

    @unittest.skipUnless(shutil.which("groff"), "groff not installed")
    def test_pages_render_without_warnings(self):
        for page in sorted(os.listdir(MAN)):
            p = subprocess.run(["groff", "-man", "-ww", "-z", os.path.join(MAN, page)],
                               capture_output=True, text=True, timeout=20)
            self.assertEqual((p.returncode, p.stderr), (0, ""), page)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0], "-v"])
