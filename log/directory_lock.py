"""One process per log directory, as Kafka's ``.lock`` file in every ``log.dirs`` entry.

The lock is ``flock`` on ``<dir>/.lock``: the kernel drops it when the holder's descriptor
closes, so a SIGKILLed broker leaves nothing behind. Locks belong to an open file, not to a
process, so two brokers in one process (the pytest plugin's threads) exclude each other too.
The holder writes its pid into the file so that a refused process can name it.
"""

from __future__ import annotations

import fcntl
import os

LOCK_FILE = ".lock"


class DirectoryInUse(Exception):
    """Another open file (another process, or another broker in this one) holds the directory's lock."""

    def __init__(self, directory: str, holder_pid: int | None) -> None:
        super().__init__(directory, holder_pid)
        self.directory, self.holder_pid = directory, holder_pid


class DirectoryLock:
    def __init__(self, directory: str, descriptor: int) -> None:
        self.directory = directory
        self._descriptor: int | None = descriptor

    @classmethod
    def acquire(cls, directory: str) -> DirectoryLock:
        """Lock ``directory`` (which must exist) or raise DirectoryInUse; other failures are OSError."""
        descriptor = os.open(os.path.join(directory, LOCK_FILE), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(descriptor)
            os.close(descriptor)
            raise DirectoryInUse(directory, holder) from None
        except BaseException:
            os.close(descriptor)
            raise
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
        return cls(directory, descriptor)

    @property
    def held(self) -> bool:
        return self._descriptor is not None

    def release(self) -> None:
        if self._descriptor is not None:
            os.close(self._descriptor)  # closing the only descriptor drops the flock
            self._descriptor = None

    def __del__(self) -> None:
        self.release()


def _read_pid(descriptor: int) -> int | None:
    try:
        text = os.pread(descriptor, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None
