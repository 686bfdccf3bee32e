"""A broker's data directories: one process each (Kafka's ``.lock``), and one line, not a traceback, when unusable."""

import os
import pathlib
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest

from kbroker.config import ConfigError
from kbroker.data_directories import DataDirectories
from kbroker.testing import running_broker
from kbroker.log.directory_lock import DirectoryInUse, DirectoryLock
from tests.kbroker.test_cli import free_port, start, wait_for_line


def refusal(cwd, *overrides, user: str | None = None) -> str:
    """The kbroker command's stderr when it refuses to start; it must exit non-zero with one line."""
    command = [sys.executable, "-m", "kbroker.cli", *(arg for o in overrides for arg in ("--override", o))]
    prefix = ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--clear-groups"] if user else []
    finished = subprocess.run(prefix + command, cwd=cwd, capture_output=True, text=True, timeout=30,
                              env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert finished.returncode != 0, finished.stdout + finished.stderr
    lines = finished.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbroker: "), finished.stderr
    return lines[0]


def test_a_second_process_on_the_same_directory_is_refused_and_a_killed_one_leaves_no_lock(tmp_path):
    data = tmp_path / "data"
    first = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", f"log.dirs={data}")
    try:
        wait_for_line(first, "ready on")
        line = refusal(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", f"log.dirs={data}")
        assert line.startswith(f"kbroker: log.dirs {data}: is in use by another kbroker (pid {first.pid}: ")
        assert "kbroker.cli" in line  # the holder's command line, from /proc
        first.send_signal(signal.SIGKILL)
        first.wait(10)
        second = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", f"log.dirs={data}")
        try:
            wait_for_line(second, "ready on")  # the kernel dropped the dead process's lock
        finally:
            second.kill()
            second.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)


def test_the_metadata_directory_is_locked_too(tmp_path):
    held = DirectoryLock.acquire(str(tmp_path))
    try:
        line = refusal(tmp_path, f"log.dirs={tmp_path / 'data'}", f"metadata.log.dir={tmp_path}")
        assert line.startswith(f"kbroker: metadata.log.dir {tmp_path}: is in use by another kbroker (pid {os.getpid()}")
        DirectoryLock.acquire(str(tmp_path / "data")).release()  # all or nothing: the first one was let go
    finally:
        held.release()


def test_two_brokers_in_one_process_exclude_each_other_until_the_first_stops(tmp_path):
    with running_broker(str(tmp_path)):
        with pytest.raises(ConfigError, match="is in use by another kbroker"):
            with running_broker(str(tmp_path)):
                pass
    with running_broker(str(tmp_path)) as again:
        assert again.port


def test_a_lock_names_its_holder_and_goes_with_its_descriptor(tmp_path):
    lock = DirectoryLock.acquire(str(tmp_path))
    with pytest.raises(DirectoryInUse) as refused:
        DirectoryLock.acquire(str(tmp_path))
    assert refused.value.holder_pid == os.getpid()
    lock.release()
    DirectoryLock.acquire(str(tmp_path)).release()


def test_a_file_as_the_data_directory(tmp_path):
    (tmp_path / "afile").write_text("")
    line = refusal(tmp_path, "log.dirs=afile")
    assert line == f"kbroker: log.dirs {tmp_path / 'afile'}: is a file, not a directory"


def test_a_data_directory_under_a_file(tmp_path):
    (tmp_path / "afile").write_text("")
    line = refusal(tmp_path, f"log.dirs={tmp_path}/afile/data")
    assert line == f"kbroker: log.dirs {tmp_path}/afile/data: cannot be created: {tmp_path}/afile is a file"


def _unprivileged_user() -> str | None:
    """The user to run the command as so that permissions apply (None: this one), or skip saying why there is none."""
    if os.geteuid() != 0:
        return None
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv (util-linux) to switch to an unprivileged user")
    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and there is no 'nobody' user to switch to")
    check = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-c",
                            "import kbroker.cli"], capture_output=True, timeout=30, env={**os.environ, "PYTHONPATH": os.getcwd()})
    if check.returncode:
        pytest.skip(f"user nobody cannot import kbroker here: {check.stderr.decode()[-200:]}")
    return "nobody"


@pytest.fixture
def read_only():
    """A folder nobody may write into, under one that everybody may enter (pytest's own is root's only)."""
    parent = pathlib.Path(tempfile.mkdtemp(prefix="kbroker-read-only-"))
    parent.chmod(0o755)
    folder = parent / "read-only"
    folder.mkdir(mode=0o555)
    folder.chmod(0o555)
    yield folder
    folder.chmod(0o755)
    shutil.rmtree(parent)


def test_the_default_directory_in_a_read_only_folder(read_only):
    line = refusal(read_only, user=_unprivileged_user())
    assert line == (f"kbroker: log.dir {read_only}/kbroker-data: cannot be written: permission denied on {read_only}")


def test_a_data_directory_without_write_permission(read_only):
    line = refusal(read_only.parent, f"log.dirs={read_only}", user=_unprivileged_user())
    assert line == f"kbroker: log.dirs {read_only}: cannot be written: permission denied on {read_only}"


def test_claiming_is_all_or_nothing(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(ConfigError, match="is a file"):
        DataDirectories.claim({str(tmp_path / "a"): "log.dirs", str(tmp_path / "afile"): "log.dirs"})
    DirectoryLock.acquire(str(tmp_path / "a")).release()  # the first claim was released
