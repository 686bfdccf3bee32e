"""New partitions' directories made in worker threads, soon after the partitions are created.

Kafka makes a partition's log when its broker learns of the partition, apart from the CreateTopics
answer. kbroker answers first too, and then this module makes each new local partition's directory,
its first segment's (empty) file and its ``partition.metadata``, in a few threads at once. On a VM disk
one such file system call took 0.04-2 ms depending on the moment, and made one after another on the
event loop, 2,000 partitions' first records waited for some 8,000 of them; made by several threads
at once they overlap (2,000 partitions' files in 0.6 s where one thread took 8.5 s).

The owner (kbroker/log/manager.py) claims a directory before it touches it itself: one not yet started
is taken back (the caller makes it as it would have), one being made is waited for (its few calls),
one made is the caller's, ready. A directory is never touched by a worker and the owner at once.
Nothing here is fsynced: the log's first flush makes the directory durable, and a ``partition.metadata``
a crash loses is written again at the next open (kbroker/log/manager.py).
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import OrderedDict

from kbroker.log.checkpoint import PARTITION_METADATA, PartitionMetadataFile
from kbroker.log.segment import segment_file_name

logger = logging.getLogger("kbroker.log.preparer")

THREADS = 4


class LogPreparer:
    def __init__(self, threads: int = THREADS) -> None:
        self._lock = threading.Condition()
        self._queued: OrderedDict[str, uuid.UUID | None] = OrderedDict()  # directory -> its topic id
        self._running: dict[str, threading.Event] = {}  # directories a worker is making
        self._made: set[str] = set()  # made and not claimed yet
        self._stopping = False
        self.made = 0  # directories made so far (a count for tests and benchmarks)
        self._thread_count = threads
        self._threads: list[threading.Thread] = []  # started as directories wait, up to ``threads``
        self._idle = 0  # threads waiting for a directory

    def submit(self, directory: str, topic_id: uuid.UUID | None) -> None:
        """Have ``directory`` made, with the first segment's file and ``partition.metadata`` naming
        ``topic_id``, unless claimed first."""
        with self._lock:
            if directory in self._running or directory in self._made or self._stopping:
                return
            self._queued[directory] = topic_id
            self._lock.notify()
            if len(self._queued) > self._idle and len(self._threads) < self._thread_count:
                # one more worker for a directory no idle one will take: a topic of one partition starts
                # one thread (a broker's first topic paid for four), a burst of partitions up to four
                thread = threading.Thread(target=self._work, name=f"kbroker-log-preparer-{len(self._threads)}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()

    def claim(self, directory: str) -> bool:
        """Before the owner touches ``directory``: True if a worker made it (its first segment file and
        ``partition.metadata`` included), False if the owner is to make it itself (never submitted, taken
        back before a worker began, or a worker failed). Waits while a worker is making it."""
        with self._lock:
            if directory in self._made:
                self._made.discard(directory)
                return True
            if self._queued.pop(directory, False) is not False:
                return False
            making = self._running.get(directory)
        if making is None:
            return False
        making.wait()  # a worker's few file system calls
        with self._lock:
            if directory in self._made:
                self._made.discard(directory)
                return True
            return False

    def knows(self, directory: str) -> bool:
        """Whether ``directory`` is queued, being made or made and not claimed."""
        with self._lock:
            return directory in self._queued or directory in self._running or directory in self._made

    def stop(self) -> None:
        """Drop what has not begun, let the workers finish their directory, and end them."""
        with self._lock:
            self._stopping = True
            self._queued.clear()
            self._lock.notify_all()
        for thread in self._threads:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._queued and not self._stopping:
                    self._idle += 1
                    self._lock.wait()
                    self._idle -= 1
                if self._stopping:
                    return
                directory, topic_id = self._queued.popitem(last=False)
                making = self._running[directory] = threading.Event()
            made = _make(directory, topic_id)
            with self._lock:
                del self._running[directory]
                if made:
                    self._made.add(directory)
                    self.made += 1
            making.set()


def _make(directory: str, topic_id: uuid.UUID | None) -> bool:
    """Make a new partition's directory, its first segment's empty file and its ``partition.metadata``;
    False (and whatever was made left for the owner, who goes on from it) if a call failed."""
    try:
        try:
            os.mkdir(directory)
        except FileNotFoundError:
            os.makedirs(directory, exist_ok=True)
        os.close(os.open(os.path.join(directory, segment_file_name(0, ".log")), os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC,
                         0o644))
        if topic_id is not None:
            PartitionMetadataFile(os.path.join(directory, PARTITION_METADATA)).write(topic_id, durable=False)
    except OSError as error:  # full disk, no descriptors, already there: the owner makes it as before
        logger.debug("%s not made ahead: %s", directory, error)
        return False
    return True
