"""The C++ lines changed since a base commit, shared by check_format.py and check_tidy.py.

  Changed:  *.cc, *.h, *.cuh lines added or changed between BASE and the working tree (staged or
            not), and every line of an untracked, not ignored, new file.
  Ignored:  deleted files, build*/ and .device/ (generated code), lines only removed.
"""
import contextlib
import os
import re
import subprocess
import sys

PATHSPECS = ("*.cc", "*.h", "*.cuh")
SOURCE_EXT = (".cc", ".h", ".cuh")
GENERATED = re.compile(r"^(build[^/]*|\.device)/")
HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@")


def git(top, *args, check=True):
    # Fixed prefixes, no pager, no external diff and unquoted paths, whatever the user's config.
    cmd = ["git", "-C", top, "-c", "core.quotePath=off", "-c", "diff.noprefix=false", *args]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.decode(errors='replace').strip()}")
    return r


def changed_lines(top, base):
    """{path: [(first, last), ...]} of the lines added or changed since `base`, untracked files
    whole (last None)."""
    out = git(top, "diff", "-U0", "--no-color", "--no-ext-diff", "--src-prefix=a/",
              "--dst-prefix=b/", base, "--", *PATHSPECS).stdout.decode("utf-8", "replace")
    ranges, path = {}, None
    for line in out.splitlines():
        if line.startswith("+++ "):
            name = line[4:].rstrip("\t")
            path = name[2:] if name.startswith("b/") else None  # /dev/null: deleted
        elif line.startswith("@@") and path:
            m = HUNK.match(line)
            first, count = int(m.group(1)), int(m.group(2) if m.group(2) is not None else 1)
            if count:  # 0: only removed lines
                ranges.setdefault(path, []).append((first, first + count - 1))
    untracked = git(top, "ls-files", "--others", "--exclude-standard", "-z", "--",
                    *PATHSPECS).stdout.decode("utf-8", "replace")
    for path in filter(None, untracked.split("\0")):
        ranges[path] = [(1, None)]
    return {p: r for p, r in ranges.items()
            if p.endswith(SOURCE_EXT) and not GENERATED.match(p)
            and os.path.isfile(os.path.join(top, p))}


def work_tree_and_base(root, base, explicit_base, tag):
    """(top, None) where `root` is in a git work tree that has `base`; else (None, exit code) after
    saying why: 0 (nothing to check) where there is no work tree or the default base is missing (a
    single commit, a shallow clone), 2 where an explicitly given base is no commit."""
    r = git(root, "rev-parse", "--show-toplevel", check=False)
    if r.returncode != 0:
        print(f"{tag}: ok: {root} is no git work tree, nothing to check")
        return None, 0
    top = r.stdout.decode().strip()
    if git(top, "rev-parse", "--verify", "-q", f"{base}^{{commit}}", check=False).returncode:
        if explicit_base:
            print(f"{tag}: base {base} is no commit", file=sys.stderr)
            return None, 2
        print(f"{tag}: ok: no {base} (a single commit or a shallow clone), nothing to check")
        return None, 0
    return top, None


def in_ranges(lineno, ranges):
    return any(first <= lineno and (last is None or lineno <= last) for first, last in ranges)


@contextlib.contextmanager
def self_test_repo(root, files_before, files_after, removed=()):
    """For the checkers' self-tests: makes `root` (an empty directory) a git repository with
    `files_before` committed and `files_after` written (and `removed` deleted) on top, uncommitted.
    Inside the block git runs without user or system config, for the code under test too (the
    environment is restored after). Yields a function running git in `root`."""
    env = dict(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_AUTHOR_NAME="t",
               GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def write(files):
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w") as f:
                f.write(text)

    def sh(*args):
        subprocess.run(["git", "-C", root, *args], env=dict(os.environ, **env), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    sh("init", "-q")
    write(files_before)
    sh("add", "-A")
    sh("commit", "-q", "-m", "base")
    write(files_after)
    for rel in removed:
        os.remove(os.path.join(root, rel))
    old_env = dict(os.environ)
    os.environ.update(env)
    try:
        yield sh
    finally:
        os.environ.clear()
        os.environ.update(old_env)
