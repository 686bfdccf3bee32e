"""The layering the design promises, enforced: ``kbroker`` -> ``raft`` -> ``log`` -> ``wire``, the arrows
between kbroker's rooms written down here, and benchmarks that import no test modules.

A room is a subpackage of kbroker (``config``, ``group``, ...) or one of its top-level modules
(``broker``, ``server``, ...); ``wire``, ``log`` and ``raft`` are rooms of their own. An import inside a
function counts as much as one at the top: it is an arrow all the same. A new arrow fails this test
until it is written into ALLOWED, where a reviewer sees it.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORES = ("wire", "log", "raft")  # at the repository's root, installed as kbroker.wire, kbroker.log, kbroker.raft

# room -> the rooms it may import. The cores point one way. Within kbroker the arrows are today's
# (issue 25), three pairs pointing both ways among them: controller <-> handlers, controller <->
# metadata and coordinator_runtime <-> handlers, debts to pay as the broker is cut into narrow parts.
# http <-> schemas is a fourth: the registry serves on the HTTP stack, and the console shows the registry.
# Every room may use the cores and the package itself (kbroker.__version__). cli -> testing: the
# `kbroker test-broker` command is the test broker of kbroker/testing/test_broker.py, imported for it alone.
# faults (issue 43): the broker makes its Faults and its servers hand requests to them while one is set;
# fault_answers builds the error answers (and wraps a handler's Deferred); testing reaches them from a test.
ALLOWED: dict[str, set[str]] = {
    "wire": set(),
    "log": {"wire"},
    "raft": {"log", "wire"},
}
KBROKER_ARROWS = """
broker: config controller data_directories faults fetch_sessions group http lifecycle listen metadata metrics peers
        producer_ids replication schemas security server share topics txn
cli: broker collector config controller data_directories event_log http listen metadata schemas testing tools
collector:
config: metadata results security topics
controller: config handlers metadata peers producer_ids security server
coordinator_records:
coordinator_runtime: effects handlers topics
data_directories: config
effects:
event_log:
fault_answers: handlers
faults: effects fault_answers handlers
fetch_sessions:
group: coordinator_records coordinator_runtime effects topics
http: config metadata metrics schemas security tools
handlers: config controller coordinator_runtime effects event_log fetch_sessions group metadata producer_ids results
          schemas security share topics txn
lifecycle: controller
metadata: config controller
listen:
metrics:
peers: security
producer_ids: metadata
replication: controller event_log security
results:
schemas: config http topics
security: config effects
share: config coordinator_records coordinator_runtime effects topics
server: event_log handlers security
testing: broker config coordinator_records faults listen schemas tools
tools: config security
topics: metadata
txn: controller coordinator_records coordinator_runtime effects group topics
"""


def _room(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "kbroker":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[0] in CORES:
        parts.insert(0, "kbroker")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: pathlib.Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)  # from kbroker import tools
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def _arrows() -> dict[str, set[str]]:
    """room -> the rooms its modules import (kbroker's own rooms and the cores)."""
    arrows: dict[str, set[str]] = {}
    for folder in ("kbroker", *CORES):
        for path in (ROOT / folder).rglob("*.py"):
            room = _room(_module_name(path))
            for imported in _imports(path):
                target = _room(imported)
                if target is not None and target != room and (target in CORES or (ROOT / "kbroker" / target).exists()
                                                              or (ROOT / "kbroker" / f"{target}.py").exists()):
                    arrows.setdefault(room, set()).add(target)
    return arrows


def _allowed() -> dict[str, set[str]]:
    allowed = {room: set(targets) for room, targets in ALLOWED.items()}
    room = None
    for line in KBROKER_ARROWS.strip().splitlines():
        if not line.startswith(" "):
            room, _, line = line.partition(":")
            allowed[room] = {*CORES, "__init__"}
        allowed[room].update(line.split())
    return allowed


def test_every_import_follows_an_arrow_written_down():
    allowed = _allowed()
    unknown = sorted(set(_arrows()) - set(allowed))
    assert not unknown, f"rooms not written down in KBROKER_ARROWS: {unknown}"
    breaking = {room: sorted(targets - allowed[room]) for room, targets in _arrows().items() if targets - allowed[room]}
    assert not breaking, f"imports against the layering (room -> rooms it may not import): {breaking}"


def test_the_cores_point_one_way_and_import_no_trio_but_the_raft_driver():
    arrows = _arrows()
    assert arrows.get("wire", set()) == set()
    assert arrows.get("log", set()) <= {"wire"}
    assert arrows.get("raft", set()) <= {"log", "wire"}
    for folder in CORES:
        for path in (ROOT / folder).rglob("*.py"):
            if path.relative_to(ROOT).as_posix() != "raft/driver.py":  # the thin trio shell around the raft core
                assert not {name for name in _imports(path) if name.split(".")[0] == "trio"}, path


def test_benchmarks_import_no_test_modules():
    """What tests and benchmarks share lives in testkit/ (processes, clusters, proxies, raw requests)."""
    for path in (ROOT / "bench").glob("*.py"):
        test_imports = sorted(name for name in _imports(path) if name.split(".")[0] in ("tests", "compat_tests", "spark_it"))
        assert not test_imports, f"{path.name} imports {test_imports}"
