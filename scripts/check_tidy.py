#!/usr/bin/env python3
"""Fails on clang-tidy findings (the repo's .clang-tidy) on C++ lines changed since a base commit:
code that was already there is not checked, so old findings never block a change.

  Changed:  as for check_format.py (scripts/changed_lines.py): *.cc, *.h, *.cuh lines added or
            changed between BASE and the working tree, every line of an untracked new file;
            not deleted files, build*/ and .device/ (generated code), lines only removed.
  Run:      clang-tidy on each changed .cc that has an entry in the compile database
            (compile_commands.json, which CMake writes at configure time), with -header-filter
            naming the changed headers, so findings in a changed header's changed lines count too.
            A changed header that no changed .cc includes is checked through one .cc of the
            database that includes it (directly or through other headers; the same stem first).
  Counted:  the findings whose file:line is a changed line. A file clang-tidy cannot compile is an
            error (exit 2), wherever the compile error is.
  Skipped:  with a note, a changed .cc without a compile database entry (not built in this
            configuration) and a header or .cuh that no .cc in the database includes.

Usage: check_tidy.py [--base REV] [--build-dir DIR] [-j N] [ROOT]
            prints each finding as path:line:col: message [check], exits 1 on any. REV defaults
            to HEAD~1 (where it does not exist, or ROOT is no git work tree, it passes: nothing
            to check); DIR to the first of ROOT/build, ROOT/build-cuda with compile_commands.json.
       check_tidy.py --self-test
            checks, in a temporary git repo with its own .clang-tidy and compile database, that
            the findings on changed lines (a .cc's and headers') are flagged and nothing else is
Without clang-tidy on PATH (or $CLANG_TIDY), or without a compile database, it prints
"tidy: skipped: ..." and passes.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

from changed_lines import changed_lines, git, in_ranges, self_test_repo, work_tree_and_base

SKIP_PREFIX = "tidy: skipped: "
DEFAULT_BUILD_DIRS = ("build", "build-cuda")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
# path:line:col: warning|error|fatal error: message [check(s)]
DIAG = re.compile(r"^(.+?):(\d+):(\d+): (warning|error|fatal error): (.*?)(?: \[([^\]]+)\])?$")


def clang_tidy_binary():
    return shutil.which(os.environ.get("CLANG_TIDY", "clang-tidy"))


def find_build_dir(top, build_dir):
    """The directory whose compile_commands.json to use, or None."""
    candidates = [build_dir] if build_dir else [os.path.join(top, d) for d in DEFAULT_BUILD_DIRS]
    for d in candidates:
        if os.path.isfile(os.path.join(d, "compile_commands.json")):
            return os.path.realpath(d)
    return None


def compiled_files(build_dir, top):
    """The repo-relative paths of the files the compile database has an entry for."""
    with open(os.path.join(build_dir, "compile_commands.json")) as f:
        entries = json.load(f)
    out = set()
    for e in entries:
        full = os.path.realpath(os.path.join(e.get("directory", build_dir), e["file"]))
        rel = os.path.relpath(full, top)
        if not rel.startswith(".." + os.sep):
            out.add(rel)
    return out


def includers(top):
    """{header: {repo files that include it directly}} over the repo's C++ files (tracked or not,
    not ignored), resolving "x" against the repo root and the including file's directory."""
    files = git(top, "ls-files", "--cached", "--others", "--exclude-standard", "-z", "--",
                "*.cc", "*.h", "*.cuh").stdout.decode("utf-8", "replace").split("\0")
    files = set(filter(None, files))
    rev = {}
    for path in files:
        try:
            with open(os.path.join(top, path), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for inc in INCLUDE.findall(text):
            for cand in (inc, os.path.join(os.path.dirname(path), inc)):
                cand = os.path.normpath(cand)
                if cand in files:
                    rev.setdefault(cand, set()).add(path)
                    break
    return rev


def translation_units_for(header, rev, compiled):
    """The .cc files of the compile database that include `header`, directly or not."""
    seen, todo, units = {header}, [header], set()
    while todo:
        for inc in rev.get(todo.pop(), ()):
            if inc in seen:
                continue
            seen.add(inc)
            if inc.endswith(".cc"):
                if inc in compiled:
                    units.add(inc)
            else:
                todo.append(inc)
    return units


def plan(top, changed, compiled):
    """(units, notes): the .cc files to run clang-tidy on, and what is skipped and why."""
    units, notes = set(), []
    for path in sorted(changed):
        if path.endswith(".cc"):
            if path in compiled:
                units.add(path)
            else:
                notes.append(f"{path}: skipped, no entry in the compile database (not built in "
                             "this configuration)")
    headers = [p for p in sorted(changed) if not p.endswith(".cc")]
    rev = includers(top) if headers else {}
    for header in headers:
        found = translation_units_for(header, rev, compiled)
        if not found:
            notes.append(f"{header}: skipped, no .cc in the compile database includes it")
        elif not found & units:
            stem = os.path.splitext(header)[0]
            units.add(min(found, key=lambda u: (os.path.splitext(u)[0] != stem, u)))
    return sorted(units), notes


def ere_escape(text):
    return re.sub(r"([.\[\]()*+?{}|^$\\])", r"\\\1", text)


def run_tidy(binary, top, build_dir, unit, header_filter):
    """[(path, line, col, level, message, check)] clang-tidy reports for `unit`, repo-relative;
    RuntimeError where it cannot compile the file."""
    args = [binary, "--quiet", "-p", build_dir, f"--header-filter={header_filter}",
            os.path.join(top, unit)]
    r = subprocess.run(args, cwd=top, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = r.stdout.decode("utf-8", "replace")
    diags, errors = [], []
    for line in out.splitlines():
        m = DIAG.match(line)
        if not m:
            continue
        path, lineno, col, level, message, check = m.groups()
        full = os.path.realpath(os.path.join(top, path))
        rel = os.path.relpath(full, top)
        if level != "warning":
            errors.append(f"{rel}:{lineno}:{col}: {level}: {message}")
        diags.append((rel, int(lineno), int(col), level, message, check or ""))
    if errors or r.returncode != 0:
        why = errors[0] if errors else (r.stderr.decode("utf-8", "replace").strip().splitlines()
                                        or [f"exit status {r.returncode}"])[-1]
        raise RuntimeError(f"clang-tidy cannot compile {unit}: {why}")
    return diags


def check(top, base, binary, build_dir, jobs=None):
    """(findings, notes): the findings on lines changed since `base` as 'path:line:col: message
    [check]', and the notes on what was skipped."""
    top = os.path.realpath(top)
    changed = changed_lines(top, base)
    units, notes = plan(top, changed, compiled_files(build_dir, top))
    headers = sorted(p for p in changed if not p.endswith(".cc"))
    header_filter = ("(^|/)(" + "|".join(ere_escape(h) for h in headers) + ")$" if headers
                     else "^$")
    jobs = jobs or os.cpu_count() or 1
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(lambda u: run_tidy(binary, top, build_dir, u, header_filter),
                                units))
    found = set()
    for diags in results:
        for path, lineno, col, _, message, check_name in diags:
            if path in changed and in_ranges(lineno, changed[path]):
                found.add((path, lineno, col, message, check_name))
    return [f"{p}:{l}:{c}: {m} [{k}]" for p, l, c, m, k in sorted(found)], notes


def run(root, base, explicit_base, build_dir, jobs):
    binary = clang_tidy_binary()
    if not binary:
        print(SKIP_PREFIX + "clang-tidy not found (install-deps.sh installs it)")
        return 0
    top, rc = work_tree_and_base(root, base, explicit_base, "tidy")
    if top is None:
        return rc
    found_dir = find_build_dir(top, build_dir)
    if not found_dir:
        where = build_dir or " or ".join(os.path.join(top, d) for d in DEFAULT_BUILD_DIRS)
        print(SKIP_PREFIX + f"no compile database (compile_commands.json) in {where}; "
              "configure with cmake first")
        return 0
    if not os.path.isfile(os.path.join(top, ".clang-tidy")):
        print(SKIP_PREFIX + f"no .clang-tidy in {top}")
        return 0
    try:
        found, notes = check(top, base, binary, found_dir, jobs)
    except RuntimeError as e:
        print(f"tidy: {e}", file=sys.stderr)
        return 2
    for n in notes:
        print(f"tidy: note: {n}")
    for f in found:
        print(f)
    if found:
        print(f"tidy: {len(found)} clang-tidy finding(s) on lines changed since {base} "
              f"(compile database: {found_dir})")
        return 1
    print(f"tidy: ok (lines changed since {base}; compile database: {found_dir})")
    return 0


def self_test():
    binary = clang_tidy_binary()
    if not binary:
        print(SKIP_PREFIX + "clang-tidy not found (install-deps.sh installs it)")
        return 0
    clang_tidy = ("Checks: '-*,readability-identifier-naming,modernize-use-nullptr'\n"
                  "CheckOptions:\n"
                  "  - { key: readability-identifier-naming.VariableCase, value: lower_case }\n")
    files_before = {
        ".clang-tidy": clang_tidy,
        "src/a.h": ("#pragma once\n"
                    "inline int* Unchanged() { return 0; }\n"
                    "inline int Twice(int x) { return 2 * x; }\n"),
        "src/a.cc": ("#include \"src/a.h\"\n"
                     "int* Old() { return 0; }\n"
                     "int Sum(int x) {\n"
                     "  int y = x + 1;\n"
                     "  return y;\n"
                     "}\n"),
        "src/b.h": "#pragma once\ninline int B() { return 1; }\n",
        "src/b.cc": "#include \"src/b.h\"\nint UseB() { return B(); }\n",
        "src/d.h": "#pragma once\ninline int D() { return 1; }\n",
    }
    files_after = {
        "src/a.h": ("#pragma once\n"
                    "inline int* Unchanged() { return 0; }\n"      # pre-existing: not flagged
                    "inline int* Changed() { return 0; }\n"),      # changed, nullptr: flagged
        "src/a.cc": ("#include \"src/a.h\"\n"
                     "int* Old() { return 0; }\n"                  # pre-existing: not flagged
                     "int Sum(int x) {\n"
                     "  int BadName = x + 1;\n"                    # changed, naming: flagged
                     "  int fine = BadName + 1;\n"                 # new, clean: not flagged
                     "  return fine;\n"
                     "}\n"),
        # Only the unchanged src/b.cc includes it: checked through that file.
        "src/b.h": "#pragma once\ninline int B() { int CamelCase = 1; return CamelCase; }\n",
        "src/c.cc": "int* C() { return 0; }\n",                    # not in the database: note
        "src/d.h": "#pragma once\ninline int* D() { return 0; }\n",  # included by nothing: note
        "build/gen.cc": "int* G() { return 0; }\n",                # generated: not checked
    }
    expected = {"src/a.cc:4", "src/a.h:3", "src/b.h:2"}
    expected_notes = {"src/c.cc", "src/d.h"}
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.realpath(tmp)
        db = [{"directory": root, "file": f"src/{n}.cc",
               "arguments": ["c++", "-std=c++17", f"-I{root}", "-c", f"src/{n}.cc"]}
              for n in ("a", "b")]
        files_before["build/compile_commands.json"] = json.dumps(db, indent=1)
        build_dir = os.path.join(root, "build")
        try:
            with self_test_repo(root, files_before, files_after) as sh:
                found, notes = check(root, "HEAD", binary, build_dir)
                # A clean tree against its own HEAD has nothing to check.
                sh("stash", "-q", "-u")
                clean, clean_notes = check(root, "HEAD", binary, build_dir)
        except RuntimeError as e:
            print(f"self-test failed: {e}")
            return 1
    flagged = {":".join(f.split(":")[:2]) for f in found}
    noted = {n.split(":")[0] for n in notes}
    if (flagged != expected or len(found) != len(expected) or noted != expected_notes
            or clean or clean_notes):
        print("self-test failed: flagged", sorted(found), "expected", sorted(expected),
              "; noted", sorted(noted), "expected", sorted(expected_notes),
              "; on a clean tree:", clean, clean_notes)
        return 1
    print(f"self-test passed: {len(expected)} findings on changed lines flagged (a .cc's, a "
          "changed header's through that .cc, a header's through an unchanged .cc including it); "
          "pre-existing findings, a clean change and a generated file not; a .cc outside the "
          "compile database and a header nothing includes skipped with a note")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--self-test", action="store_true")
    p.add_argument("--base", help="the commit to compare the working tree with (HEAD~1)")
    p.add_argument("--build-dir", help="the directory with compile_commands.json (default: the "
                   "first of ROOT/build, ROOT/build-cuda that has one)")
    p.add_argument("-j", "--jobs", type=int, help="clang-tidy processes at once (CPU count)")
    p.add_argument("root", nargs="?", default=os.path.join(os.path.dirname(__file__), ".."))
    a = p.parse_args()
    if a.self_test:
        return self_test()
    return run(a.root, a.base or "HEAD~1", a.base is not None, a.build_dir, a.jobs)


if __name__ == "__main__":
    sys.exit(main())
