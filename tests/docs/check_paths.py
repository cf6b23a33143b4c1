#!/usr/bin/env python3
"""Checks that every path README.md and docs/*.md name exists.

Usage: check_paths.py [REPO_ROOT]

Two kinds of name are checked: a Markdown link's target (relative to the
document; web addresses and anchors left out) and a path in backquotes that
starts with one of the repository's folders (`src/...`, `tests/...`, `tools/...`,
...). A path with a `*` matches when some file does (a glob); a folder may end
with `/`. Paths under build folders, .venv and .gpu-deps are made by the build
and left out. Fails, listing each document, name and kind.
"""
import glob
import os
import re
import sys

TOP = ("src", "tests", "tools", "docs", "bench", "scripts", "examples", "include", "python", "cmake", ".ci")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")
CODE = re.compile(r"`([A-Za-z0-9_.*/\-]+)`")


def missing(root):
    out = []
    docs = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    for doc in docs:
        text = open(os.path.join(root, doc), encoding="utf-8").read()
        for m in LINK.finditer(text):
            target = m.group(1)
            if re.match(r"^[a-z]+:", target):
                continue
            if not os.path.exists(os.path.join(root, os.path.dirname(doc), target)):
                out.append((doc, "link", target))
        for m in CODE.finditer(text):
            path = m.group(1).rstrip("/")
            if "/" not in path or path.split("/")[0] not in TOP:
                continue
            if not glob.glob(os.path.join(root, path)):
                out.append((doc, "path", path))
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    bad = missing(root)
    for doc, kind, name in bad:
        print("%s: %s %s does not exist" % (doc, kind, name))
    if bad:
        return 1
    print("README.md and docs/*.md: every link and repository path exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
