"""A log directory that went offline: after a failed fsync nothing on it is acknowledged again.

After an fsync error the kernel may already have dropped the dirty pages, so a second fsync can succeed
over data that is gone (PostgreSQL's "fsyncgate"): the directory is taken offline instead, as Kafka
does, and its partitions answer KAFKA_STORAGE_ERROR until a restart recovers from what is on disk.
"""

from __future__ import annotations

import errno


class LogDirOffline(OSError):
    """The partition's log directory is offline after a failed fsync: what was not durable before it
    may be lost, and nothing on this directory is acknowledged again (Kafka's KAFKA_STORAGE_ERROR)."""

    def __init__(self, topic: str, index: int, cause: BaseException) -> None:
        super().__init__(errno.EIO, f"log directory of {topic}-{index} is offline after a failed fsync: {cause}")
        self.cause = cause


OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def out_of_space(error: BaseException) -> bool:
    """A write failed for space (a full filesystem, or a quota): unlike a failed fsync, nothing written
    before is in doubt, so the directory stays online and writes are tried again (Kafka would take it
    offline: a full disk is a state an operator fixes, and clients should resume without a restart)."""
    return isinstance(error, OSError) and not isinstance(error, LogDirOffline) and error.errno in OUT_OF_SPACE

