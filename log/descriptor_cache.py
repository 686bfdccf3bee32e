"""The open files of the process's logs, bounded whatever the partition count (issue 26).

A segment has up to four files (``.log``, ``.index``, ``.timeindex``, ``.txnindex``) and a broker
tens of thousands of partitions: kept open, as Kafka keeps them (and tells users to raise their limit
to 100,000), they exhaust ``ulimit -n 1024`` at a few hundred partitions. Here a segment opens its files
on use, and a :class:`DescriptorCache` shared by every log of the process closes the least recently used
segment's files once more than ``capacity`` descriptors are open: by default half of the soft
RLIMIT_NOFILE, leaving the other half to sockets and to the short-lived files (checkpoints, snapshots,
directories for fsync).

**Pins.** A segment is pinned while a thread uses its descriptors: a read or an append on the owner's
thread, an fsync on the flusher's, a file region being sent by a connection. Eviction, which may run on
any thread under the cache's lock, skips pinned segments, so no descriptor is closed under a system call
(nor its number reused by another open meanwhile). The cache may go over its capacity by what is pinned.

**Detached segments.** A segment whose files are unlinked or replaced (retention, truncation, a
compaction's swap) must never reopen its path: the name may belong to another file by then. It is
detached (:meth:`~kbroker.log.segment.LogSegment.unlink`): its log file stays open only if a file
region still refers to it, outside the cache's count (such regions are few: one per partition of the
fetch answers in flight), until the log closes it after ``file.delete.delay.ms``.

**Out of descriptors.** An open that fails with EMFILE or ENFILE closes half of the idle segments'
files and tries once more (:meth:`DescriptorCache.open`, :func:`open_descriptor`).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable

logger = logging.getLogger("kbroker.log.descriptor_cache")

OUT_OF_DESCRIPTORS = frozenset({errno.EMFILE, errno.ENFILE})
CAPACITY_SHARE_OF_LIMIT = 0.5  # of the soft RLIMIT_NOFILE; the rest is for sockets and short-lived files
CAPACITY_MIN = 16


def out_of_descriptors(error: BaseException) -> bool:
    """An open (or accept) failed because the process or the system has no descriptor left."""
    return isinstance(error, OSError) and error.errno in OUT_OF_DESCRIPTORS


def open_files_limits() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE of this process."""
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def describe_limits(soft: int, hard: int) -> str:
    def text(limit: int) -> str:
        return "unlimited" if limit == resource.RLIM_INFINITY else str(limit)

    return f"soft {text(soft)}, hard {text(hard)}"


def capacity_for_limit(soft_limit: int) -> int:
    if soft_limit == resource.RLIM_INFINITY:
        soft_limit = 1 << 20
    return max(CAPACITY_MIN, int(soft_limit * CAPACITY_SHARE_OF_LIMIT))


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise the soft RLIMIT_NOFILE to the hard limit; returns (soft before, soft now, hard).

    For the process's owner to call, as the ``kbroker`` command does at start. Nothing in ``log`` or in
    an in-process :class:`~kbroker.broker.Broker` calls it: a library must not change a limit of the
    process it is embedded in (a test runner, an application) behind its back, and the limit it finds
    is still enough, as the cache is sized from it. Where the hard limit is unlimited, or above what the
    kernel allows one process (Linux's ``fs.nr_open``, macOS's ``OPEN_MAX``), the highest soft limit
    accepted of those is kept.
    """
    soft, hard = open_files_limits()
    for target in _limit_candidates(hard):
        if target <= soft:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            continue
        return soft, target, hard
    return soft, soft, hard


def _limit_candidates(hard: int) -> list[int]:
    candidates = [] if hard == resource.RLIM_INFINITY else [hard]
    try:
        with open("/proc/sys/fs/nr_open") as nr_open:
            candidates.append(int(nr_open.read()))
    except (OSError, ValueError):
        pass
    candidates.append(10240)  # macOS's OPEN_MAX
    if hard != resource.RLIM_INFINITY:
        candidates = [min(candidate, hard) for candidate in candidates]
    return sorted(set(candidates), reverse=True)


class DescriptorCache:
    """Segments with open descriptors, least recently used first; at most ``capacity`` descriptors
    open among the unpinned ones.

    A holder (a :class:`~kbroker.log.segment.LogSegment`) has ``pins`` (an int the cache changes under
    its lock), ``detached`` (never reopened: not counted), ``closing`` (closed while pinned: the last
    unpin closes it), ``descriptor_count()`` and ``close_descriptors()``, which closes what it has open.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.lock = threading.RLock()
        self.capacity = capacity_for_limit(open_files_limits()[0]) if capacity is None else capacity
        self._open: OrderedDict = OrderedDict()  # holder -> its descriptors when last counted
        self.open_descriptors = 0  # counted: those of the holders in _open
        self.evictions = 0  # holders closed to make room, since start

    def __repr__(self) -> str:
        return (f"DescriptorCache(capacity={self.capacity}, open={self.open_descriptors}, "
                f"holders={len(self._open)}, evictions={self.evictions})")

    def fit_to_limit(self) -> int:
        """Size the cache from the soft RLIMIT_NOFILE as it is now (after the process raised it)."""
        with self.lock:
            self.capacity = capacity_for_limit(open_files_limits()[0])
            self._evict_to(self.capacity)
            return self.capacity

    def pin(self, holder) -> None:
        with self.lock:
            holder.pins += 1
            if holder.pins == 1 and holder in self._open:
                self._open.move_to_end(holder)

    def unpin(self, holder) -> None:
        """The last unpin counts what ``holder`` opened meanwhile (or closes it, if it was closed while
        pinned), then closes the least recently used idle holders' files while over capacity."""
        with self.lock:
            holder.pins -= 1
            if holder.pins:
                return
            if holder.closing:
                holder.closing = False
                holder.close_descriptors()
            self.recount(holder)
            if self.open_descriptors > self.capacity:
                self._evict_to(self.capacity)

    def recount(self, holder) -> None:
        with self.lock:
            count = 0 if holder.detached else holder.descriptor_count()
            before = self._open.get(holder, 0)
            if count:
                self._open[holder] = count  # a new holder goes last; one counted before keeps its place
            else:
                self._open.pop(holder, None)
            self.open_descriptors += count - before

    def forget(self, holder) -> None:
        """``holder`` closed its files itself (or was detached): no longer counted."""
        with self.lock:
            self.open_descriptors -= self._open.pop(holder, 0)

    def open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """``os.open``; out of descriptors, idle segments make room and it is tried once more."""
        try:
            return os.open(path, flags, mode)
        except OSError as error:
            if error.errno not in OUT_OF_DESCRIPTORS:
                raise
            self.make_room(path)
        return os.open(path, flags, mode)

    def make_room(self, path: str) -> int:
        """Out of descriptors opening ``path``: close the files of the least recently used half of the idle
        holders; returns how many were closed."""
        with self.lock:
            before = self.evictions
            self._evict_to(self.open_descriptors // 2)
            closed = self.evictions - before
        logger.warning("out of file descriptors opening %s: closed %d idle segments' files, trying again", path,
                       closed)
        return closed

    def close_idle(self) -> int:
        """Close every unpinned holder's files (they reopen on use); returns how many were closed."""
        with self.lock:
            before = self.evictions
            self._evict_to(0)
            return self.evictions - before

    def _evict_to(self, target: int) -> None:
        looked = 0
        total = len(self._open)
        while self.open_descriptors > target and looked < total:
            looked += 1
            holder = next(iter(self._open))
            if holder.pins:
                self._open.move_to_end(holder)  # in use: as good as used just now
                continue
            count = self._open.pop(holder)
            self.open_descriptors -= count
            self.evictions += 1
            holder.close_descriptors()


DESCRIPTORS = DescriptorCache()  # the process's: every log's segments share it unless given their own


def open_descriptor(path: str, flags: int, mode: int = 0o644) -> int:
    """``os.open`` for the logs' short-lived files (checkpoints, snapshots, directories to fsync), making
    room among the process's segments when out of descriptors."""
    return DESCRIPTORS.open(path, flags, mode)


def fsync_closed_file(path: str, opener: Callable[[str, int], int] = open_descriptor) -> None:
    """fsync a file whose descriptor was closed since it was written (the cache made room): its dirty pages
    are the file's, whichever descriptor syncs them. A file removed meanwhile has nothing left to keep."""
    try:
        descriptor = opener(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def open_file(path: str, mode: str = "rb"):
    """The built-in ``open`` for the logs' short-lived files, making room as :func:`open_descriptor` does."""
    try:
        return open(path, mode)
    except OSError as error:
        if error.errno not in OUT_OF_DESCRIPTORS:
            raise
        DESCRIPTORS.make_room(path)
    return open(path, mode)
