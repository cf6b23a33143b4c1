#!/usr/bin/env python3
"""Checks that every #include in src/ points down the layer order of docs/design.md.

Usage: check_layers.py [REPO_ROOT]

The order is read from the line of docs/design.md that starts with
"Layer order:" (for example "Layer order: core < kernels < net"). A file in
src/<layer>/ may include its own layer, any layer below it, and the public
header dccl/dccl.h. The check fails on
  - an upward include (a lower layer including a higher one),
  - an include of an unknown folder, or a folder of src/ missing from the order,
  - a quoted include that names no file in src/ or include/,
  - a cycle among the files of src/ (followed through their includes),
  - where docs/design.md has a line "Link folders: A | B; assembled by F, G" (for
    example "Link folders: net/fabric | net/sock; assembled by net/x.cc"): a file in
    one link folder including a file of another, or a file of the same layer outside
    the link folders including one inside them unless it is one of the assembling
    files F, G (the routing and waiting code knows links only by their interface),
  - a getenv() in src/ or tools/ outside the settings code (src/core/config.cc,
    where the settings table and the outside variables are read), except the
    files of ENV_ALLOWED, which must read the environment themselves,
  - a memory backend's internals included from outside its folder: each
    subfolder of src/mem/ is a backend (host/, sim/, cuda/); code outside it (the
    rest of src/, tools/, python/, bench/, examples/, tests/) includes only the
    headers at the top of src/mem/ (the interface), and backends include nothing
    of each other. A test may include the internals of the backend its file name
    names (tests/unit/cuda_seam_test.cc: cuda),
  - a CUDA header (<cuda*.h>) included in src/ outside src/mem/cuda/toolkit/,
    the only files built just when the CUDA toolkit is found.
Every violation is printed with the file and line; the exit status is 1 if any.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CUDA_HEADER = re.compile(r'^\s*#\s*include\s+<(cuda[^>]*\.h)>')
BACKENDS = "mem"  # the layer whose subfolders are the memory backends
CUDA_TOOLKIT = "mem/cuda/toolkit/"
OUTSIDE_SRC = ("tools", "python", "bench", "examples", "tests")
SOURCE_EXT = (".cc", ".hpp", ".h", ".cu", ".cuh", ".inc")
GETENV = re.compile(r"\b(?:secure_)?getenv\s*\(")
SETTINGS_CODE = "src/core/config.cc"
# Files that read the environment directly, each with the reason it cannot go
# through the settings code.
ENV_ALLOWED = {
    "tools/dccl-perf/report.cc": "links only the public API: labels its report with DCCL_PROVIDER, FI_PROVIDER "
                                 "and DCCL_PEER_DIRECT as the user set them",
    "tools/dccl-run/options.cc": "-x NAME passes on dccl-run's own value of a variable the user names, as "
                                 "mpirun does: any name, not a setting",
}


def read_order(root):
    path = os.path.join(root, "docs", "design.md")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("Layer order:"):
                names = [n.strip() for n in line.split(":", 1)[1].split("<")]
                if not names or any(not n for n in names) or len(set(names)) != len(names):
                    sys.exit(f"{path}: malformed layer order line: {line.strip()}")
                return names
    sys.exit(f"{path}: no line starting with 'Layer order:'")


def read_link_folders(root):
    """(folders, assembling files) from the "Link folders:" line, or ([], [])."""
    path = os.path.join(root, "docs", "design.md")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("Link folders:"):
                body = line.split(":", 1)[1]
                folders_text, _, rest = body.partition(";")
                folders = [x.strip().strip("`/") for x in folders_text.split("|") if x.strip()]
                rest = rest.strip()
                if not folders or not rest.startswith("assembled by"):
                    sys.exit(f"{path}: malformed link folders line: {line.strip()}")
                files = [x.strip().strip("`") for x in rest[len("assembled by"):].split(",") if x.strip()]
                return folders, files
    return [], []


def folder_of(rel, folders):
    """The link folder holding src/<rel>, or None."""
    rel = rel.replace(os.sep, "/")
    for d in folders:
        if rel.startswith(d + "/"):
            return d
    return None


def check_links(src, graph, folders, assembling):
    """Every include between link folders, and into them from their layer, is allowed."""
    errors = []
    for d in folders:
        if not os.path.isdir(os.path.join(src, d)):
            errors.append(f"docs/design.md: link folder '{d}' is not a folder of src/")
    for f in assembling:
        if not os.path.isfile(os.path.join(src, f)):
            errors.append(f"docs/design.md: assembling file '{f}' is not a file of src/")
    layers = {d.split("/")[0] for d in folders}
    for rel, targets in sorted(graph.items()):
        rel_posix = rel.replace(os.sep, "/")
        if rel_posix.split("/")[0] not in layers:
            continue  # other layers: the layer order alone applies
        mine = folder_of(rel, folders)
        for target in targets:
            theirs = folder_of(target, folders)
            if theirs is None or theirs == mine:
                continue
            t = target.replace(os.sep, "/")
            if mine is not None:
                errors.append(f"src/{rel_posix}: includes \"{t}\": link folder '{mine}' must not include "
                              f"link folder '{theirs}'")
            elif rel_posix not in assembling:
                errors.append(f"src/{rel_posix}: includes \"{t}\" of link folder '{theirs}': outside the link "
                              f"folders only the assembling files ({', '.join(assembling)}) may; routing "
                              f"code includes the link interface")
    return errors


def source_files(src):
    for dirpath, _, files in os.walk(src):
        for name in sorted(files):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), src)


def backend_of(rel):
    """The backend whose folder holds rel (a '/'-path under src/), or None."""
    parts = rel.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == BACKENDS else None


def backend_violation(where, owner, target, test_name=None):
    """The message when a file of backend `owner` (None: no backend) may not include
    target (a '/'-path under src/), or None when it may. test_name: the includer's
    file name when it is a test."""
    tb = backend_of(target)
    if tb is None or tb == owner:
        return None
    if test_name is not None and tb in re.split(r"[_.\-]", test_name):
        return None
    if owner is not None:
        return (f"{where}: backend '{owner}' includes \"{target}\" of backend '{tb}': backends do not "
                f"include each other (share through the interface headers of src/{BACKENDS}/)")
    return (f"{where}: includes \"{target}\", an internal of backend '{tb}': outside src/{BACKENDS}/{tb}/ "
            f"include only the interface headers of src/{BACKENDS}/")


def find_cycle(graph):
    """Returns one cycle (a list of files) in graph, or None."""
    white, grey, black = 0, 1, 2
    color = {n: white for n in graph}
    stack = []

    def visit(n):
        color[n] = grey
        stack.append(n)
        for m in graph.get(n, ()):
            if color.get(m, black) == grey:
                return stack[stack.index(m):] + [m]
            if color.get(m) == white:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        color[n] = black
        return None

    for n in sorted(graph):
        if color[n] == white:
            found = visit(n)
            if found:
                return found
    return None


def check(root):
    order = read_order(root)
    rank = {name: i for i, name in enumerate(order)}
    src = os.path.join(root, "src")
    public = os.path.join(root, "include")
    errors = []

    folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    for d in folders:
        if d not in rank:
            errors.append(f"src/{d}/: folder is not in the layer order of docs/design.md")
    for name in order:
        if name not in folders:
            errors.append(f"docs/design.md: layer '{name}' has no folder src/{name}/")

    graph = {}
    for rel in source_files(src):
        layer = rel.split(os.sep)[0]
        if layer not in rank:
            continue  # already reported with its folder
        edges = graph.setdefault(rel, [])
        owner = backend_of(rel.replace(os.sep, "/"))
        with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                where = f"src/{rel}:{lineno}"
                c = CUDA_HEADER.match(line)
                if c and not rel.replace(os.sep, "/").startswith(CUDA_TOOLKIT):
                    errors.append(f"{where}: includes <{c.group(1)}> outside src/{CUDA_TOOLKIT}, "
                                  f"which alone is built only with the CUDA toolkit")
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = m.group(1)
                if os.path.isfile(os.path.join(public, target)):
                    continue  # the public header: allowed from every layer
                local = os.path.normpath(os.path.join(os.path.dirname(rel), target))
                if "/" not in target and os.path.isfile(os.path.join(src, local)):
                    edges.append(local)  # same folder, written without the folder
                    continue
                bad = backend_violation(where, owner, target)
                if bad:
                    errors.append(bad)
                top = target.split("/")[0]
                if top not in rank:
                    errors.append(f"{where}: includes \"{target}\": '{top}' is not a layer")
                    continue
                if not os.path.isfile(os.path.join(src, target)):
                    errors.append(f"{where}: includes \"{target}\", which is not a file in src/")
                    continue
                if rank[top] > rank[layer]:
                    errors.append(f"{where}: upward include: layer '{layer}' includes \"{target}\" "
                                  f"of the higher layer '{top}'")
                edges.append(os.path.normpath(target))

    cycle = find_cycle(graph)
    if cycle:
        errors.append("include cycle: " + " -> ".join(cycle))
    folders, assembling = read_link_folders(root)
    errors += check_links(src, graph, folders, assembling)
    errors += check_outside(root)
    errors += check_env(root)
    return order, len(graph), errors


def check_outside(root):
    """Tools, bindings, benchmarks, examples and tests include no backend's
    internals (a test: none but those of the backend its file name names)."""
    errors = []
    for top in OUTSIDE_SRC:
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for rel in source_files(base):
            path = f"{top}/{rel}".replace(os.sep, "/")
            test_name = os.path.basename(rel) if top == "tests" else None
            with open(os.path.join(base, rel), encoding="utf-8", errors="replace") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if m:
                        bad = backend_violation(f"{path}:{lineno}", None, m.group(1), test_name)
                        if bad:
                            errors.append(bad)
    return errors


def check_env(root):
    """Every getenv() in src/ and tools/ is in the settings code or allowed."""
    errors = []
    for top in ("src", "tools"):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for rel in source_files(base):
            path = f"{top}/{rel}".replace(os.sep, "/")
            with open(os.path.join(base, rel), encoding="utf-8", errors="replace") as f:
                hits = [n for n, line in enumerate(f, 1) if GETENV.search(line.split("//", 1)[0])]
            if path == SETTINGS_CODE:
                continue
            if path in ENV_ALLOWED:
                if not hits:
                    errors.append(f"{path}: in ENV_ALLOWED but reads no environment variable; drop the entry")
                continue
            for n in hits:
                errors.append(f"{path}:{n}: getenv outside the settings code: read it through "
                              f"{SETTINGS_CODE} (core::setting_text, core::env_value)")
    return errors


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    order, nfiles, errors = check(os.path.abspath(root))
    for e in errors:
        print(e)
    if errors:
        print(f"layers: {len(errors)} violation(s) of the order {' < '.join(order)}")
        return 1
    folders, _ = read_link_folders(os.path.abspath(root))
    print(f"layers: {nfiles} files of src/ include only downward ({' < '.join(order)}); no cycles; "
          f"link folders {', '.join(folders) or '(none)'} apart and included only where links are assembled; "
          f"no memory backend's internals included from outside its folder; "
          f"the environment is read only in {SETTINGS_CODE} and {len(ENV_ALLOWED)} allowed files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
