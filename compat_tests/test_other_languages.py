"""The other-language examples, each run as its user runs it: ``examples/java`` (JUnit 5 and Kafka's Java
client, ``mvn test``), ``examples/node`` (kafkajs, ``npm ci`` then ``node --test``) and ``examples/go``
(franz-go, ``go test ./...``). Each example starts its own test broker through ``kbroker test-broker`` and
drives it over the control API (docs/test-broker.md): a Produce refused NOT_LEADER_OR_FOLLOWER twice and
the client's retry succeeding, the broker closing every connection and the clients connecting again, a
reset between tests, and the records produced read back through the API.

Each example is copied to a temporary directory first, as a user copies it, so that nothing is built in
the checkout; ``KBROKER`` points it at this environment's ``kbroker`` command. A missing toolchain skips
the test with one line naming it; on CI (``CI`` or ``KBTEST_REQUIRE_OTHER_LANGUAGES=1``, as .ci/run sets)
it fails instead. Maven uses the project's repository (testkit/maven.py), npm and Go their own caches,
all filled by .ci/run before the tests.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from testkit.maven import repository

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# A first run downloads (Maven, npm) or compiles (Go) the clients; later runs take seconds.
MAVEN_TIMEOUT_S = 600
NPM_TIMEOUT_S = 300
NODE_TEST_TIMEOUT_S = 240
GO_TIMEOUT_S = 600
_OUTPUT_LINES_SHOWN = 60


def languages_required() -> bool:
    """Whether a missing toolchain fails the test rather than skipping it."""
    ci = os.environ.get("CI", "").strip().lower()
    return ci not in ("", "0", "false", "no") or os.environ.get("KBTEST_REQUIRE_OTHER_LANGUAGES") == "1"


def require(*tools: str, example: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        reason = f"the {example} example needs {' and '.join(missing)} on PATH"
        if languages_required():
            pytest.fail(f"{reason} (required here: CI or KBTEST_REQUIRE_OTHER_LANGUAGES=1 is set)", pytrace=False)
        pytest.skip(reason)


def kbroker_command() -> str:
    """This environment's ``kbroker`` (the virtualenv's, beside its python), else the one on PATH."""
    beside = Path(sys.executable).parent / "kbroker"
    found = str(beside) if beside.is_file() else shutil.which("kbroker")
    assert found, "no kbroker command beside this python nor on PATH (pip install -e . makes it)"
    return found


def copy_example(name: str, into: Path) -> Path:
    target = into / name
    shutil.copytree(EXAMPLES / name, target, ignore=shutil.ignore_patterns("target", "node_modules"))
    return target


def run(command: list[str], directory: Path, timeout_s: int) -> str:
    """``command`` run in ``directory`` with KBROKER set; its output, or the test failed with its last lines."""
    environment = {**os.environ, "KBROKER": kbroker_command()}
    try:
        done = subprocess.run(command, cwd=directory, env=environment, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as expired:
        output = expired.output.decode(errors="replace") if isinstance(expired.output, bytes) else expired.output
        pytest.fail(f"{' '.join(command)} outlasted {timeout_s} s:\n{_tail(output or '')}", pytrace=False)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(command)} exited {done.returncode}:\n{_tail(done.stdout)}", pytrace=False)
    return done.stdout


def _tail(output: str) -> str:
    return "\n".join(output.splitlines()[-_OUTPUT_LINES_SHOWN:])


def test_the_java_example_passes_with_maven(tmp_path):
    require("mvn", "java", example="Java")
    project = copy_example("java", tmp_path)
    output = run(["mvn", "-B", "--no-transfer-progress", "-Dstyle.color=never", f"-Dmaven.repo.local={repository()}",
                  "test"], project, MAVEN_TIMEOUT_S)
    assert "Tests run: 3, Failures: 0, Errors: 0, Skipped: 0" in output, _tail(output)


def test_the_node_example_passes_with_node_test(tmp_path):
    require("node", "npm", example="Node")
    version = subprocess.run(["node", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    major = re.match(r"v(\d+)", version)
    if not major or int(major.group(1)) < 20:
        reason = f"the Node example needs Node 20 or later (its test runner), found {version or 'no version'}"
        if languages_required():
            pytest.fail(reason, pytrace=False)
        pytest.skip(reason)
    project = copy_example("node", tmp_path)
    run(["npm", "ci", "--no-audit", "--no-fund", "--prefer-offline"], project, NPM_TIMEOUT_S)
    output = run(["node", "--test"], project, NODE_TEST_TIMEOUT_S)
    assert re.search(r"^# pass 3$", output, re.MULTILINE) and re.search(r"^# fail 0$", output, re.MULTILINE), \
        _tail(output)


def test_the_go_example_passes_with_go_test(tmp_path):
    require("go", example="Go")
    project = copy_example("go", tmp_path)
    output = run(["go", "test", "-count=1", "-v", "./..."], project, GO_TIMEOUT_S)
    assert len(re.findall(r"^--- PASS: ", output, re.MULTILINE)) == 3 and re.search(r"^ok\s", output, re.MULTILINE), \
        _tail(output)
