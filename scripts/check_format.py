#!/usr/bin/env python3
"""Fails on C++ lines changed since a base commit that clang-format (the repo's .clang-format)
would change: code that was already there is not checked, so old formatting never blocks a change.

  Checked:  *.cc, *.h, *.cuh lines added or changed between BASE and the working tree (staged or
            not), and every line of an untracked, not ignored, new file.
  Ignored:  deleted files, build*/ and .device/ (generated code), lines only removed.

A finding is reported on the line of the token whose text or preceding whitespace clang-format
would change, so a wrong indentation is reported on its own line, not the line before it.

Usage: check_format.py [--base REV] [ROOT]  prints each finding as path:line, exits 1 on any.
                                             REV defaults to HEAD~1; where it does not exist (one
                                             commit, a shallow clone) or ROOT is no git work tree,
                                             there is nothing to check and it passes.
       check_format.py --self-test           checks, in a temporary git repo, that a badly
                                             formatted changed line is flagged and nothing else is
Without clang-format on PATH (or $CLANG_FORMAT) both print "format: skipped: clang-format not
found" and pass. Fix findings with: git clang-format --extensions cc,h,cuh REV
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

from changed_lines import changed_lines, self_test_repo, work_tree_and_base

SKIP_MESSAGE = "format: skipped: clang-format not found (install-deps.sh installs it)"


def clang_format_binary():
    return shutil.which(os.environ.get("CLANG_FORMAT", "clang-format"))


def findings_in(binary, top, path, ranges):
    """[(line, text)] of the lines of `path` that clang-format would change within `ranges`."""
    full = os.path.join(top, path)
    with open(full, "rb") as f:
        content = f.read()
    nlines = content.count(b"\n") + (0 if content.endswith(b"\n") or not content else 1)
    args = [binary, "--style=file", f"--assume-filename={full}", "--output-replacements-xml"]
    for first, last in ranges:
        last = nlines if last is None else min(last, nlines)
        if first <= last:
            args.append(f"--lines={first}:{last}")
    if len(args) == 4:
        return []
    r = subprocess.run(args, input=content, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if r.returncode != 0:
        raise RuntimeError(f"clang-format {path}: {r.stderr.decode(errors='replace').strip()}")
    lines = content.split(b"\n")
    found = {}
    for rep in ET.fromstring(r.stdout).iter("replacement"):
        # The end of the replaced text is the token it precedes (or the end of its line):
        # whitespace before a token starts on the line above, but the finding is the token's.
        end = int(rep.get("offset")) + int(rep.get("length"))
        lineno = content.count(b"\n", 0, end) + 1
        found[lineno] = lines[lineno - 1].decode("utf-8", "replace").strip()
    return sorted(found.items())


def check(top, base, binary):
    found = []
    for path, ranges in sorted(changed_lines(top, base).items()):
        for lineno, text in findings_in(binary, top, path, ranges):
            found.append(f"{path}:{lineno}: not clang-formatted: {text[:80].rstrip()}")
    return found


def run(root, base, explicit_base):
    binary = clang_format_binary()
    if not binary:
        print(SKIP_MESSAGE)
        return 0
    top, rc = work_tree_and_base(root, base, explicit_base, "format")
    if top is None:
        return rc
    try:
        found = check(top, base, binary)
    except RuntimeError as e:
        print(f"format: {e}", file=sys.stderr)
        return 2
    for f in found:
        print(f)
    if found:
        print(f"format: {len(found)} changed line(s) since {base} not clang-formatted; fix with: "
              f"git clang-format --extensions cc,h,cuh {base}")
        return 1
    print(f"format: ok (lines changed since {base})")
    return 0


def self_test():
    binary = clang_format_binary()
    if not binary:
        print(SKIP_MESSAGE)
        return 0
    before = ("int f() {\n"
              "  int a = 1;\n"
              "  int b = 2;\n"
              "  int c = 3;\n"
              "  int  unchanged_bad=4;\n"
              "  return a + b + c;\n"
              "}\n")
    after = ("int f() {\n"
             "      int a = 10;\n"                # changed, badly indented: flagged
             "  int b = 2;\n"
             "  int c = 30;\n"                    # changed, well formatted: not flagged
             "  int  unchanged_bad=4;\n"          # unchanged, badly formatted: not flagged
             "  return a + b+c;\n"                # changed, bad spacing: flagged
             "}\n")
    files_before = {".clang-format": "BasedOnStyle: Google\nColumnLimit: 100\n",
                    "src/a.cc": before, "src/gone.h": "int  gone=1;\n",
                    "build/gen.cc": "int g() { return 1; }\n"}
    files_after = {"src/a.cc": after,
                   "src/new.h": "#pragma once\nint  n=1;\n",     # untracked new file: flagged
                   "build/gen.cc": "int g() {return  2;}\n",     # generated: not checked
                   "src/notes.txt": "int  x=1;\n"}               # not C++: not checked
    expected = {"src/a.cc:2", "src/a.cc:6", "src/new.h:2"}
    with tempfile.TemporaryDirectory() as root:
        with self_test_repo(root, files_before, files_after, removed=["src/gone.h"]) as sh:
            found = check(root, "HEAD", binary)
            # A clean tree against its own HEAD has nothing to check.
            sh("stash", "-q", "-u")
            clean = check(root, "HEAD", binary)
    flagged = {":".join(f.split(":")[:2]) for f in found}
    if flagged != expected or len(found) != len(expected) or clean:
        print("self-test failed: flagged", sorted(flagged), "expected", sorted(expected),
              "; on a clean tree:", clean)
        return 1
    print(f"self-test passed: {len(expected)} badly formatted changed lines flagged; a well "
          "formatted change, an unchanged bad line, a deleted, a generated and a non-C++ file not")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--base", help="the commit to compare the working tree with (HEAD~1)")
    p.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    a = p.parse_args()
    if a.self_test:
        return self_test()
    return run(a.root, a.base or "HEAD~1", a.base is not None)


if __name__ == "__main__":
    sys.exit(main())
