#!/usr/bin/env python3
"""Shows that check_layers.py fails where it must: builds small source trees with
an upward include, a cycle, an unknown folder, a missing file, a getenv outside
the settings code and a memory backend's internals reached from outside its
folder, and clean trees, and checks the verdict and the message for each."""
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
    ] + backend_cases()
    return 0 if all(results) else 1


# A mem layer with an interface header and two backends, as src/mem/ has.
MEM_ORDER = "core < mem < high"
MEM_TREE = {
    "src/core/a.hpp": "",
    "src/mem/backend.hpp": "",
    "src/mem/sim/arena.hpp": '#include "mem/backend.hpp"\n',
    "src/mem/sim/sim_backend.cc": '#include "mem/sim/arena.hpp"\n#include "arena.hpp"\n',
    "src/mem/cuda/api.hpp": "",
    "src/mem/cuda/toolkit/runtime.cc": '#include <cuda_runtime.h>\n#include "mem/cuda/api.hpp"\n',
    "src/high/c.cc": '#include "mem/backend.hpp"\n',
}


def backend_case(name, extra, want):
    return expect(name, {**MEM_TREE, **extra}, want, order=MEM_ORDER)


def backend_cases():
    return [
        backend_case("backends: clean tree, a test of one backend reaching its internals", {
            "tests/unit/cuda_seam_test.cc": '#include "mem/cuda/api.hpp"\n#include "mem/backend.hpp"\n',
            "tests/unit/fake_cuda.hpp": '#include "mem/cuda/api.hpp"\n',
        }, None),
        backend_case("backends: a higher layer includes a backend's internals", {
            "src/high/d.cc": '#include "mem/sim/arena.hpp"\n',
        }, "src/high/d.cc:1: includes \"mem/sim/arena.hpp\", an internal of backend 'sim'"),
        backend_case("backends: the interface includes a backend's internals", {
            "src/mem/registry.cc": '#include "mem/backend.hpp"\n#include "mem/cuda/api.hpp"\n',
        }, "src/mem/registry.cc:2: includes \"mem/cuda/api.hpp\", an internal of backend 'cuda'"),
        backend_case("backends: one backend includes another", {
            "src/mem/host/host_backend.cc": '#include "mem/sim/arena.hpp"\n',
        }, "backend 'host' includes \"mem/sim/arena.hpp\" of backend 'sim'"),
        backend_case("backends: a tool includes a backend's internals", {
            "tools/t/main.cc": '#include "mem/sim/arena.hpp"\n',
        }, "tools/t/main.cc:1: includes \"mem/sim/arena.hpp\", an internal of backend 'sim'"),
        backend_case("backends: a test reaches another backend's internals", {
            "tests/unit/sim_backend_test.cc": '#include "mem/cuda/api.hpp"\n',
        }, "tests/unit/sim_backend_test.cc:1: includes \"mem/cuda/api.hpp\", an internal of backend 'cuda'"),
        backend_case("backends: a CUDA header outside the toolkit folder", {
            "src/mem/cuda/select.cc": '#include <cuda.h>\n',
        }, "src/mem/cuda/select.cc:1: includes <cuda.h> outside src/mem/cuda/toolkit/"),
    ]


if __name__ == "__main__":
    sys.exit(main())
