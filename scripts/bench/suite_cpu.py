"""Where the test suite's CPU goes: each test's own CPU time and its children's (the `memexp`
processes it starts), as a pytest plugin, and a summary by test and by file.

The children's time is what the test waited for (getrusage RUSAGE_CHILDREN); processes that run
outside the test's process tree, such as the SLURM cluster's jobs, are not in it: read
/proc/stat beside the suite for the machine's whole load.

    PYTHONPATH=scripts/bench SUITE_CPU_LOG=/tmp/cpu.jsonl PYTEST_ADDOPTS="-p suite_cpu" make test
    python scripts/bench/suite_cpu.py /tmp/cpu.jsonl            # the 30 costliest tests and files
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import Counter

import pytest


def _cpu() -> tuple[float, float]:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """One JSON line per test (setup, call and teardown together) in $SUITE_CPU_LOG."""
    own0, children0 = _cpu()
    start = time.time()
    yield
    own1, children1 = _cpu()
    with open(os.environ.get("SUITE_CPU_LOG", "suite_cpu.jsonl"), "a") as f:
        f.write(json.dumps({"id": item.nodeid.split("@")[0], "self": own1 - own0, "children": children1 - children0,
                            "wall": time.time() - start, "worker": os.environ.get("PYTEST_XDIST_WORKER")}) + "\n")


def main(path: str, top: int = 30) -> None:
    rows = [json.loads(line) for line in open(path)]
    total = {r["id"]: r["self"] + r["children"] for r in rows}
    print(f"{len(rows)} tests, {sum(total.values()):.0f} CPU-s ({sum(r['children'] for r in rows):.0f} in children)")
    for test, cpu in Counter(total).most_common(top):
        print(f"{cpu:8.1f}  {test}")
    by_file = Counter()
    for test, cpu in total.items():
        by_file[test.split("::")[0]] += cpu
    print()
    for name, cpu in by_file.most_common(top):
        print(f"{cpu:8.1f}  {name}")


if __name__ == "__main__":
    main(*sys.argv[1:2])
