"""kbroker installed into a user's project as a user installs it: nothing of ours can clash with their modules.

A project with its own ``log.py``, ``raft.py`` and ``wire.py`` at its root (``log.py`` is common) runs
a test on the ``kbroker`` fixture; before kbroker installed everything under its own name, its
top-level ``log`` package lost to the project's module and every test run of the project failed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.test_deployment import clean_environment, copy_build_context

INSTALL_TIMEOUT_S = 600

PROJECT_TEST = '''
    import confluent_kafka

    import log, raft, wire  # the project's own modules


    def test_the_fixture_beside_modules_named_as_ours(kbroker):
        assert log.PROJECT and raft.PROJECT and wire.PROJECT
        producer = confluent_kafka.Producer({"bootstrap.servers": kbroker.bootstrap})
        producer.produce("orders", b"one book")
        assert producer.flush(10) == 0
        consumer = confluent_kafka.Consumer({"bootstrap.servers": kbroker.bootstrap, "group.id": "shipping",
                                             "auto.offset.reset": "earliest"})
        consumer.subscribe(["orders"])
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                break
        consumer.close()
        assert message.value() == b"one book"
'''


def run(command: list, cwd: Path, environment: dict, timeout_s: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], cwd=cwd, env=environment, capture_output=True,
                          text=True, timeout=timeout_s)


@pytest.mark.slow
def test_a_project_with_its_own_log_raft_and_wire_modules_runs_the_kbroker_fixture(tmp_path):
    venv, source, project = tmp_path / "venv", tmp_path / "kbroker", tmp_path / "project"
    environment = clean_environment()
    created = run([sys.executable, "-m", "venv", venv], tmp_path, environment)
    if created.returncode != 0:
        pytest.skip(f"cannot create a virtual environment here: {created.stderr[-500:]}")
    copy_build_context(source)  # what `pip install <repository>` builds from, without touching the repository
    python = venv / "bin" / "python"
    installed = run([python, "-m", "pip", "install", "-q", source, "pytest", "confluent-kafka"], tmp_path,
                    environment, INSTALL_TIMEOUT_S)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]

    project.mkdir()
    for name in ("log", "raft", "wire"):
        (project / f"{name}.py").write_text(f"PROJECT = {name!r}  # the user's own module\n")
    (project / "test_app.py").write_text(textwrap.dedent(PROJECT_TEST))
    tested = run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"], project, environment)
    assert tested.returncode == 0 and "1 passed" in tested.stdout, tested.stdout[-3000:] + tested.stderr[-3000:]

    for name in ("log", "raft", "wire"):  # outside the project, the venv has no such module
        imported = run([python, "-c", f"import {name}"], tmp_path, environment)
        assert imported.returncode == 1 and f"No module named '{name}'" in imported.stderr, imported.stderr
    site_packages = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], tmp_path,
                        environment).stdout.strip()
    top_level = {entry.split("-")[0] for entry in os.listdir(site_packages) if not entry.startswith(("_", "."))}
    assert not top_level & {"log", "raft", "wire"}
    assert (Path(site_packages) / "kbroker" / "log" / "partition_log.py").is_file()
