#!/usr/bin/env python3
"""Checks that docs/design.md's file table names every source file of src/.

Usage: check_file_table.py [REPO_ROOT]

The table is the part of docs/design.md from the heading "## Files" to the next
"## " heading. A file src/<folder>/<name>.<ext> is covered when the table has a
row whose first cell names the folder (`<folder>/`) and whose text names the
file's stem (`name`, without extension): `a.hpp` and `a.cc` share one mention.
Brace groups are expanded first, so `reduce_{float,half}` names reduce_float and
reduce_half. Fails, listing them, on files the table does not name and on
names in the table that are no file of that folder.
"""
import os
import re
import sys

SOURCE_EXT = (".cc", ".hpp", ".h", ".cu", ".cuh", ".inc", ".map")
BRACES = re.compile(r"([\w./-]*)\{([^{}]*)\}([\w./-]*)")
CODE = re.compile(r"`([^`]+)`")


def expand(text):
    while True:
        m = BRACES.search(text)
        if not m:
            return text
        words = " ".join(m.group(1) + part.strip() + m.group(3) for part in m.group(2).split(","))
        text = text[: m.start()] + words + text[m.end():]


def table_rows(path):
    rows, inside = [], False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("## "):
                inside = line.strip() == "## Files"
                continue
            if inside and line.startswith("|") and not set(line.strip()) <= set("|-: "):
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 2:
                    rows.append(cells)
    return rows


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    src = os.path.join(root, "src")
    rows = table_rows(os.path.join(root, "docs", "design.md"))
    if not rows:
        sys.exit("docs/design.md: no '## Files' table")
    named = {}  # folder -> set of stems named
    for cells in rows:
        folder = CODE.findall(cells[0])
        if not folder or not folder[0].endswith("/"):
            continue
        stems = named.setdefault(folder[0].rstrip("/"), set())
        for code in CODE.findall(expand(" ".join(cells[1:-1]) if len(cells) > 2 else cells[1])):
            for word in expand(code).split():
                stems.add(os.path.splitext(os.path.basename(word))[0])
    missing, files = [], {}
    for dirpath, _, names in os.walk(src):
        folder = os.path.relpath(dirpath, src)
        for name in sorted(names):
            if not name.endswith(SOURCE_EXT):
                continue
            stem = os.path.splitext(name)[0]
            files.setdefault(folder, set()).add(stem)
            if stem not in named.get(folder, set()):
                missing.append(os.path.join("src", folder, name))
    stale = [f"src/{folder}/{stem}" for folder, stems in named.items() for stem in sorted(stems)
             if stem not in files.get(folder, set())]
    for f in missing:
        print(f"docs/design.md: the file table does not name {f}")
    for f in stale:
        print(f"docs/design.md: the file table names {f}, which is no file")
    if missing or stale:
        return 1
    print(f"docs/design.md: the file table names all {sum(len(s) for s in files.values())} source files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
