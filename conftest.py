"""The suite's one session hook: the project's modules are byte-compiled before any test runs.

The suite starts a thousand Python processes or so (brokers, cluster nodes, group members, workers, the
admin commands), each importing kbroker. Where PYTHONDONTWRITEBYTECODE is set (this project's machines
set it) and the checkout is an editable install, none of them finds bytecode and each compiles every
module it imports again: about 0.3 s per process, minutes over the suite. An installed kbroker has its
bytecode (pip compiles it), so compiling once here also makes the processes start as a user's do.
"""

from __future__ import annotations

import compileall
import pathlib

_SOURCES = ("kbroker", "wire", "log", "raft", "testkit", "compat_tests", "spark_it", "bench")


def pytest_sessionstart(session) -> None:
    root = pathlib.Path(__file__).resolve().parent
    for name in _SOURCES:
        if (root / name).is_dir():
            compileall.compile_dir(root / name, quiet=1, workers=1)
