"""A start the machine or the disk refuses ends with one line naming the problem and a non-zero exit, never a
traceback: metadata that cannot be read as it was written, a file the broker must open that it cannot."""

import os
import subprocess
import sys

import pytest

from tests.kbroker.test_cli import free_port


def _first_start_and_stop(data_dir) -> None:
    """A single node started once on ``data_dir`` and stopped, leaving its metadata log there."""
    from kbroker.testing import running_broker

    with running_broker(str(data_dir)):
        pass


def _failed_start(data_dir) -> tuple[str, str]:
    """(the last line of stderr, all of stderr) of a start that must fail."""
    command = [sys.executable, "-m", "kbroker.cli", "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
               "--override", f"log.dirs={data_dir}"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert finished.returncode == 1, finished.stderr
    assert "Traceback" not in finished.stderr, finished.stderr
    return finished.stderr.splitlines()[-1], finished.stderr


@pytest.fixture
def stopped_node(tmp_path):
    _first_start_and_stop(tmp_path / "data")
    return tmp_path / "data"


def test_a_quorum_state_that_cannot_be_read(stopped_node):
    state = stopped_node / "__cluster_metadata-0" / "quorum-state"
    state.write_text("garbage{")
    line, _ = _failed_start(stopped_node)
    assert line.startswith(f"kbroker: cannot start: {state}: not a readable quorum state (")


def test_a_file_the_broker_must_read_that_it_cannot(stopped_node):
    state = stopped_node / "__cluster_metadata-0" / "quorum-state"
    state.unlink()
    state.mkdir()  # opening it for reading fails: the machine's refusal, as one line
    line, _ = _failed_start(stopped_node)
    assert line == f"kbroker: cannot start: Is a directory ({state})"


@pytest.mark.parametrize("code, text, advice", [
    (28, "No space left on device", ": free some space there"),
    (24, "Too many open files", ": raise the open files limit (ulimit -n)"),
    (5, "Input/output error", ": the disk reported an I/O error"),
    (21, "Is a directory", ""),
])
def test_the_machine_s_refusals_read_as_one_line_with_what_to_do(code, text, advice):
    from kbroker.cli import machine_problem

    assert machine_problem(OSError(code, text, "/data/t-0/00000000000000000000.log")) == \
        f"{text} (/data/t-0/00000000000000000000.log){advice}"
