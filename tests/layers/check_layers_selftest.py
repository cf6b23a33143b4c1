#!/usr/bin/env python3
"""Shows that check_layers.py fails where it must: builds small source trees with
an upward include, a cycle, an unknown folder and a missing file, and one clean
tree, and checks the verdict and the message for each."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_layers  # noqa: E402


def tree(files, order="low < high", extra=""):
    root = tempfile.mkdtemp(prefix="dccl-layers-")
    files = dict(files)
    files["docs/design.md"] = f"# x\n\nLayer order: {order}\n{extra}"
    files.setdefault("include/dccl/dccl.h", "")
    for rel, text in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    return root


def expect(name, files, want, order="low < high", extra=""):
    _, _, errors = check_layers.check(tree(files, order, extra))
    text = "\n".join(errors)
    ok = (not errors) if want is None else (want in text)
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {text or 'no violations'}")
    return ok


def main():
    links = "Link folders: low/a | low/b; assembled by low/build.cc\n"
    link_tree = {
        "src/low/link.hpp": "",
        "src/low/a/x.hpp": '#include "low/link.hpp"\n',
        "src/low/b/y.hpp": '#include "low/link.hpp"\n',
        "src/low/build.cc": '#include "low/a/x.hpp"\n#include "low/b/y.hpp"\n',
        "src/low/route.cc": '#include "low/link.hpp"\n',
        "src/high/c.cc": '#include "low/a/x.hpp"\n',
    }
    results = [
        expect("link folders kept apart", link_tree, None, extra=links),
        expect("link folder including another", {**link_tree, "src/low/a/z.cc": '#include "low/b/y.hpp"\n'},
               "link folder 'low/a' must not include link folder 'low/b'", extra=links),
        expect("routing code including a link kind", {**link_tree, "src/low/route.cc": '#include "low/a/x.hpp"\n'},
               "src/low/route.cc: includes \"low/a/x.hpp\" of link folder 'low/a'", extra=links),
        expect("link folder missing", link_tree, "link folder 'low/c' is not a folder of src/",
               extra="Link folders: low/a | low/b | low/c; assembled by low/build.cc\n"),
        expect("clean tree", {
            "src/low/a.hpp": '#include "dccl/dccl.h"\n',
            "src/low/b.cc": '#include "low/a.hpp"\n#include "a.hpp"\n',
            "src/high/c.cc": '#include "low/a.hpp"\n#include <vector>\n',
        }, None),
        expect("upward include", {
            "src/low/a.hpp": "",
            "src/low/b.cc": '#include "high/c.hpp"\n',
            "src/high/c.hpp": "",
        }, "upward include: layer 'low' includes \"high/c.hpp\""),
        expect("cycle inside a layer", {
            "src/low/a.hpp": '#include "low/b.hpp"\n',
            "src/low/b.hpp": '#include "low/a.hpp"\n',
            "src/high/c.hpp": "",
        }, "include cycle: low/a.hpp -> low/b.hpp -> low/a.hpp"),
        expect("folder not in the order", {
            "src/low/a.hpp": "",
            "src/high/c.hpp": "",
            "src/stray/d.cc": "",
        }, "src/stray/: folder is not in the layer order"),
        expect("include of an unknown folder", {
            "src/low/a.hpp": '#include "other/x.hpp"\n',
            "src/high/c.hpp": "",
        }, "'other' is not a layer"),
        expect("include of a missing file", {
            "src/low/a.hpp": '#include "low/missing.hpp"\n',
            "src/high/c.hpp": "",
        }, "not a file in src/"),
        expect("layer without a folder", {
            "src/low/a.hpp": "",
        }, "layer 'high' has no folder"),
        expect("getenv outside the settings code", {
            "src/low/a.cc": 'int f() { return std::getenv("X") != nullptr; }\n',
            "src/high/c.hpp": "",
        }, "src/low/a.cc:1: getenv outside the settings code"),
        expect("getenv in a tool", {
            "src/low/a.hpp": "",
            "src/high/c.hpp": "",
            "tools/t/main.cc": '// getenv in a comment is fine\nconst char* p = getenv("P");\n',
        }, "tools/t/main.cc:2: getenv outside the settings code"),
        expect("getenv in the settings code", {
            "src/core/config.cc": 'const char* v = getenv("DCCL_X");\n',
        }, None, order="core"),
        expect("stale allow-list entry", {
            "src/low/a.hpp": "",
            "src/high/c.hpp": "",
            "tools/dccl-run/options.cc": "int x;\n",
        }, "tools/dccl-run/options.cc: in ENV_ALLOWED but reads no environment variable"),
    ]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
