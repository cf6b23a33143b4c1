#!/usr/bin/env python3
"""PyTorch's own distributed test suite (the one shipped inside torch) for one backend.

    BACKEND=dccl WORLD_SIZE=2 TEMP_DIR=$(mktemp -d) driver.py [--json FILE] [-k REGEX] [--list]

The way out-of-tree backends run torch.testing._internal.distributed.distributed_test:
the backend, when it is not one torch knows, is named in
DistTestCases.backend_feature["plugin"] and in each feature set it supports
("ddp", "subgroup"), then DistributedTest._DistTestBase runs with TestDistBackend,
each test in WORLD_SIZE spawned processes (as torch's test/distributed/
test_distributed_spawn.py does). Every spawned process re-imports this file,
so the registration above happens in each of them too. CPU tensors: GPUs are hidden.

--json writes one record per test: {"test", "outcome" (pass, fail, skip), "reason",
"seconds"}. tests/torch/suite/run.py drives this for several backends and world sizes.
"""
import os
import sys

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # CPU tensors only
BACKEND = os.environ["BACKEND"]
# How ranks start: "spawn" as torch's test_distributed_spawn.py, or "fork" (the
# children inherit the parent's imports, about 10 s less per test on 2 cores).
START_METHOD = os.environ.get("START_METHOD", "spawn")
# Features of the plugin backend beside "plugin" itself: DistributedDataParallel and subgroups.
PLUGIN_FEATURES = ("plugin", "ddp", "subgroup")

import torch  # noqa: E402
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

if BACKEND not in ("gloo", "nccl", "mpi", "ucc"):
    import importlib

    importlib.import_module(os.environ.get("BACKEND_MODULE", f"torch_{BACKEND}"))  # registers the backend
    for feature in PLUGIN_FEATURES:
        DistTestCases.backend_feature[feature].add(BACKEND)

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if START_METHOD == "spawn":
            self._spawn_processes()
        else:  # the children inherit the imported torch: seconds less per test
            self._start_processes(torch.multiprocessing.get_context(START_METHOD).Process)
        torch.backends.cudnn.flags(enabled=True, allow_tf32=False).__enter__()


def main():
    import argparse
    import json
    import re
    import time
    import unittest

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write per-test records here")
    ap.add_argument("-k", "--filter", default=".", help="run the tests whose name matches this regex (re.search)")
    ap.add_argument("--list", action="store_true", help="print the selected test names and exit")
    ap.add_argument("-q", "--quiet", action="store_true", help="no unittest progress output")
    args = ap.parse_args()

    loader = unittest.TestLoader()
    names = [n for n in loader.getTestCaseNames(TestDistBackendWithSpawn) if re.search(args.filter, n)]
    if args.list:
        print("\n".join(names))
        return 0
    records = []

    class Result(unittest.TextTestResult):
        def startTest(self, test):
            self._t0 = time.monotonic()
            super().startTest(test)

        def _record(self, test, outcome, reason=""):
            records.append({"test": test.id().split(".")[-1], "outcome": outcome, "reason": reason,
                            "seconds": round(time.monotonic() - self._t0, 2)})
            if args.json:  # rewritten after every test: a killed run keeps what it had
                with open(args.json, "w") as f:
                    json.dump(records, f, indent=0)

        def addSuccess(self, test):
            super().addSuccess(test)
            self._record(test, "pass")

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._record(test, "skip", str(reason))

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._record(test, "fail", self._exc_info_to_string(err, test))

        def addError(self, test, err):
            super().addError(test, err)
            self._record(test, "fail", self._exc_info_to_string(err, test))

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._record(test, "pass", "expected failure")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._record(test, "fail", "unexpected success")

    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=Result, verbosity=0 if args.quiet else 2, stream=sys.stdout)
    result = runner.run(suite)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
