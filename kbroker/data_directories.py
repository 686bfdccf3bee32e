"""Claiming the data directories at start: each made if missing, checked and locked, or one clear line why not.

Kafka refuses to start on a log directory another broker has locked; so does kbroker
(``log/directory_lock.py``). A directory that cannot be made or written, or is a file, stops the
start the same way: a ``ConfigError`` naming the setting, the path and the reason, which the
``kbroker`` command prints as one line.
"""

from __future__ import annotations

import errno
import os

from kbroker.config import ConfigError
from kbroker.log.directory_lock import DirectoryInUse, DirectoryLock


class DataDirectories:
    """The locks this broker holds on its directories, released together when it stops."""

    def __init__(self, locks: list[DirectoryLock]) -> None:
        self.locks = locks

    @classmethod
    def claim(cls, directories: dict[str, str]) -> DataDirectories:
        """Claim each directory, given as path -> the setting that names it; all or none."""
        locks: list[DirectoryLock] = []
        try:
            for path, setting in directories.items():
                locks.append(_claim(path, setting))
        except BaseException:
            for lock in locks:
                lock.release()
            raise
        return cls(locks)

    @classmethod
    def of_config(cls, config) -> DataDirectories:
        """Every ``log.dirs`` entry and ``metadata.log.dir`` of a BrokerConfig."""
        setting = "log.dirs" if config.declared("log.dirs") is not None else "log.dir"
        directories = {os.path.abspath(path): setting for path in config.get("log.dirs")}
        directories.setdefault(os.path.abspath(config.get("metadata.log.dir")), "metadata.log.dir")
        return cls.claim(directories)

    def release(self) -> None:
        for lock in self.locks:
            lock.release()


def _claim(path: str, setting: str) -> DirectoryLock:
    def refuse(reason: str) -> ConfigError:
        return ConfigError(f"{setting} {path}: {reason}", setting, path)

    blocker = _file_in_the_way(path)
    if blocker == path:
        raise refuse("is a file, not a directory")
    if blocker is not None:
        raise refuse(f"cannot be created: {blocker} is a file")
    try:
        os.makedirs(path, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
        return DirectoryLock.acquire(path)
    except DirectoryInUse as in_use:
        holder = f" (pid {in_use.holder_pid}{_command_of(in_use.holder_pid)})" if in_use.holder_pid else ""
        raise refuse(f"is in use by another kbroker{holder}; stop it or give this one another {setting}") from None
    except PermissionError:
        where = path if os.path.isdir(path) else _nearest_existing(path)
        raise refuse(f"cannot be written: permission denied on {where}") from None
    except OSError as error:
        raise refuse(f"cannot be used: {error.strerror or error}") from None


def _file_in_the_way(path: str) -> str | None:
    """``path`` itself or the first of its parents that exists and is not a directory, if any."""
    probe = path
    while True:
        if os.path.lexists(probe):
            return None if os.path.isdir(probe) else probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def _nearest_existing(path: str) -> str:
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def _command_of(pid: int) -> str:
    """`` : <command line>`` of a process where /proc tells it, else nothing."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            words = file.read().split(b"\0")
    except OSError:
        return ""
    command = " ".join(word.decode(errors="replace") for word in words if word)
    return f": {command[:120]}" if command else ""
