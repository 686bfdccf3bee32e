"""Room kept free on a log directory's filesystem, so that a full disk stops producers, not the broker.

Data appends (a producer's batches, a follower's copies) are refused once they would leave less than
``log.dir.min.free.bytes`` free, as if the disk were full (OSError ENOSPC, answered KAFKA_STORAGE_ERROR).
What remains is for the writes that keep the broker itself going: the metadata quorum's log and its
state, checkpoints, index and producer-state files, a restart's recovery. Without it a producer can
fill the disk to the last byte, and then a topic creation, an ISR change or a restart has no room.
Kafka has no such floor (it takes the directory offline on the first failed write); the floor is
kbroker's own, and 0 turns it off.

The filesystem is asked (``statvfs``) at most every ``interval_s``: between two asks an append is
measured against what was free at the last one, less what was appended since.
"""

from __future__ import annotations

import errno
import os
import time


class FreeSpace:
    def __init__(self, directory: str, min_free_bytes: int, *, interval_s: float = 0.1, clock=time.monotonic,
                 statvfs=os.statvfs) -> None:
        self.directory = directory
        self.min_free_bytes = min_free_bytes
        self.interval_s = interval_s
        self.clock = clock
        self.statvfs = statvfs
        self._asked_at: float | None = None
        self._free = 0  # bytes free at the last ask, less what was appended since
        self.full = False  # every append refused as if the disk were full (a test's disk_full: kbroker/faults.py)

    def free_bytes(self) -> int:
        now = self.clock()
        if self._asked_at is None or now - self._asked_at >= self.interval_s:
            stats = self.statvfs(self.directory)
            self._free = stats.f_bavail * stats.f_frsize
            self._asked_at = now
        return self._free

    def claim(self, size: int) -> None:
        """Allow an append of ``size`` bytes, or raise OSError(ENOSPC) when it would leave less than the floor."""
        if self.full:
            raise OSError(errno.ENOSPC, "no space left on the log directory's filesystem (a test's disk_full)",
                          self.directory)
        if self.min_free_bytes <= 0:
            return
        free = self.free_bytes()
        if free - size < self.min_free_bytes:
            raise OSError(errno.ENOSPC, f"{free} bytes free on the log directory's filesystem, "
                                        f"log.dir.min.free.bytes={self.min_free_bytes} kept free", self.directory)
        self._free = free - size
