"""Small per-partition and per-log-dir state files, in Kafka's on-disk formats.

Kafka keeps a handful of text files next to the segments; a broker started on a
Kafka data directory (or the other way round) must read what the other wrote:

    recovery-point-offset-checkpoint   } version line, entry count line, then
    log-start-offset-checkpoint        } "topic partition offset" per line
    replication-offset-checkpoint      } (one file per log dir)
    cleaner-offset-checkpoint          }
    <topic>-<partition>/leader-epoch-checkpoint   version, count, "epoch start_offset"
    <topic>-<partition>/partition.metadata        "version: 0" / "topic_id: <base64>"

Every file is replaced whole through `write_atomically`, so a crash leaves the old
or the new content and never a torn mix; a leftover `.tmp` is simply never read.
"""

import base64
import bisect
import os
import re
import threading
import uuid
from typing import Callable, Iterable, NamedTuple

from kbroker.log.descriptor_cache import open_descriptor, open_file

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"

CHECKPOINT_VERSION = 0

# OffsetForLeaderEpoch answers for "no such epoch" (Kafka's UNDEFINED_EPOCH(_OFFSET)).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
# Java's Integer/Long.parseInt accept an optional sign and ASCII digits only;
# Python's int() would also take "1_000" and surrounding blanks.
_INTEGER = re.compile(r"[+-]?[0-9]+")
_KAFKA_UUID = re.compile(r"[A-Za-z0-9_-]{22}(==)?")
_ZERO_UUID = uuid.UUID(int=0)


class CheckpointError(Exception):
    """A checkpoint file exists but cannot be understood; says which file and line."""

    def __init__(self, path, problem: str, line_number: int | None = None, line: str | None = None):
        self.path = os.fspath(path)
        self.problem = problem
        self.line_number = line_number
        self.line = line
        where = self.path if line_number is None else f"{self.path}:{line_number}"
        text = f"{where}: {problem}"
        if line is not None:
            text += f": {line!r}"
        super().__init__(text)


def write_atomically(path, data: bytes, durable: bool = True) -> None:
    """Replace `path` with `data` so that a crash at any point leaves old or new, whole.

    The data is fsynced before the rename (else the rename could reach the disk
    before the bytes and expose an empty file), and the directory is fsynced after
    it (else the rename itself may be lost and the old content come back).
    With ``durable=False`` both fsyncs are left to the caller (see
    :func:`fsync_file_and_directory`); until then a crash may leave the old
    content, the new, or an empty file.
    """
    path = os.fspath(path)
    temporary_path = path + ".tmp"
    try:
        with open_file(temporary_path, "wb") as temporary:
            temporary.write(data)
            temporary.flush()
            if durable:
                os.fsync(temporary.fileno())
        os.replace(temporary_path, path)
    except BaseException:
        try:
            os.unlink(temporary_path)
        except OSError:
            pass
        raise
    if durable:
        fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_file(path) -> None:
    """fsync one file's contents by its path."""
    descriptor = open_descriptor(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def fsync_file_and_directory(path) -> None:
    """Make a file written with ``write_atomically(durable=False)`` durable."""
    fsync_file(path)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_directory(directory) -> None:
    """Make creations, renames and deletions inside `directory` durable."""
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a directory; NTFS journals renames.
        return
    descriptor = open_descriptor(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _parse_integer(text: str, maximum: int, path, line_number: int, line: str) -> int:
    if not _INTEGER.fullmatch(text):
        raise CheckpointError(path, "not an integer", line_number, line)
    value = int(text)
    if not -maximum - 1 <= value <= maximum:
        raise CheckpointError(path, "integer out of range", line_number, line)
    return value


def _read_entry_lines(path, version: int) -> list[tuple[int, str, list[str]]]:
    """(1-based line number, line, its blank-separated fields) per entry of a versioned checkpoint.

    Mirrors Kafka's reader: a missing or empty file, or one holding only the version,
    has no entries (Kafka creates checkpoint files empty); the count must match.
    """
    try:
        with open_file(path, "rb") as checkpoint:
            data = checkpoint.read()
    except FileNotFoundError:
        return []
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise CheckpointError(path, f"not UTF-8 ({error.reason} at byte {error.start})") from None
    if not lines:
        return []
    found_version = _parse_integer(lines[0], _INT32_MAX, path, 1, lines[0])
    if found_version != version:
        raise CheckpointError(path, f"unrecognised version {found_version}, expected {version}", 1, lines[0])
    if len(lines) == 1:
        return []
    expected_count = _parse_integer(lines[1], _INT32_MAX, path, 2, lines[1])
    entries = [(number, line, line.split()) for number, line in enumerate(lines[2:], start=3)]
    if len(entries) != expected_count:
        raise CheckpointError(path, f"expected {expected_count} entries but found {len(entries)}")
    return entries


def _format_checkpoint(version: int, entry_lines: list[str]) -> bytes:
    lines = [str(version), str(len(entry_lines)), *entry_lines]
    return ("\n".join(lines) + "\n").encode("utf-8")


class OffsetCheckpointFile:
    """A map of (topic, partition) -> offset for every partition in one log dir."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def write(self, offsets: dict[tuple[str, int], int]) -> None:
        lines = []
        for (topic, partition), offset in sorted(offsets.items()):
            # A blank inside the name would make the file unreadable, by us and by Kafka.
            if not topic or any(character.isspace() for character in topic):
                raise ValueError(f"topic name {topic!r} cannot be written to an offset checkpoint")
            lines.append(f"{topic} {int(partition)} {int(offset)}")
        write_atomically(self.path, _format_checkpoint(CHECKPOINT_VERSION, lines))

    def read(self) -> dict[tuple[str, int], int]:
        offsets = {}
        for line_number, line, fields in _read_entry_lines(self.path, CHECKPOINT_VERSION):
            if len(fields) != 3:
                raise CheckpointError(self.path, "expected 'topic partition offset'", line_number, line)
            topic, partition_text, offset_text = fields
            partition = _parse_integer(partition_text, _INT32_MAX, self.path, line_number, line)
            offset = _parse_integer(offset_text, _INT64_MAX, self.path, line_number, line)
            offsets[(topic, partition)] = offset  # a repeated key: the later line wins, as in Kafka
        return offsets


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCheckpointFile:
    """The (epoch, first offset written in that epoch) history of one partition.

    Written by the event loop and by the flusher's thread (a write handed to the log's next flush):
    one write at a time, and with ``version`` given, never over a newer one."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._written_version = 0

    def write(self, entries: Iterable[tuple[int, int]], durable: bool = True, version: int | None = None) -> None:
        lines = [f"{int(epoch)} {int(start_offset)}" for epoch, start_offset in entries]
        with self._lock:
            if version is not None:
                if version <= self._written_version:
                    return  # a newer history is on disk already
                self._written_version = version
            write_atomically(self.path, _format_checkpoint(CHECKPOINT_VERSION, lines), durable)

    def read(self) -> list[EpochEntry]:
        entries = []
        for line_number, line, fields in _read_entry_lines(self.path, CHECKPOINT_VERSION):
            if len(fields) != 2:
                raise CheckpointError(self.path, "expected 'epoch start_offset'", line_number, line)
            epoch = _parse_integer(fields[0], _INT32_MAX, self.path, line_number, line)
            start_offset = _parse_integer(fields[1], _INT64_MAX, self.path, line_number, line)
            entries.append(EpochEntry(epoch, start_offset))
        return entries


class LeaderEpochCache:
    """Which leader epoch wrote which offsets; answers OffsetsForLeaderEpoch.

    Kafka's LeaderEpochFileCache semantics. The entries are kept strictly increasing
    in both epoch and start offset: an assignment that contradicts that means the
    log diverged, and the later entries it conflicts with are dropped so lookups can
    bisect.

    As in Kafka since KAFKA-15046, a new epoch met while appending is written
    without fsync: the log's next flush makes it durable with the batches
    (see ``unsynced_writes``), so a producer's first batch in an epoch pays
    no extra fsyncs on the event loop. Truncations are flushed at once.

    With ``write_later`` set (the log's ``defer_write``) that write too is the next flush's, in the
    flusher's thread, before its fsyncs: a new partition's first record then costs the event loop no
    file at all (on a VM disk its two calls were half of the loop's time producing to 2,000 new
    partitions). Until that flush the epoch is in memory only; a crash before it is made good on open,
    where recovery gives the cache the epochs of the batches it checks (``assign_recovered``), as
    Kafka's LogSegment.recover does.
    """

    def __init__(self, checkpoint_file: LeaderEpochCheckpointFile, *, read: bool = True):
        """``read=False`` for a log whose directory was just made: there is no file to read."""
        self.checkpoint_file = checkpoint_file
        self._entries: list[EpochEntry] = []
        self.unsynced_writes = 0  # checkpoint writes since the file was last fsynced (by the log's flush)
        self.write_later: Callable[[Callable[[], None]], None] | None = None  # hands a write to the next flush
        self._version = 0  # of the entries: bumped by every change
        # Replaying through _assign repairs a hand-edited or foreign non-monotonic file.
        for entry in checkpoint_file.read() if read else ():
            try:
                self._assign(entry)
            except ValueError as error:
                raise CheckpointError(checkpoint_file.path, str(error)) from None

    # --- queries ---------------------------------------------------------------

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        index = bisect.bisect_left(self._entries, epoch, key=_epoch_of)
        if index < len(self._entries) and self._entries[index].epoch == epoch:
            return self._entries[index]
        return None

    def previous_epoch(self, epoch: int | None = None) -> int | None:
        """The largest epoch below `epoch` (default: below the latest)."""
        if epoch is None:
            if not self._entries:
                return None
            epoch = self._entries[-1].epoch
        index = bisect.bisect_left(self._entries, epoch, key=_epoch_of)
        return self._entries[index - 1].epoch if index > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest epoch above `epoch`."""
        index = bisect.bisect_right(self._entries, epoch, key=_epoch_of)
        return self._entries[index].epoch if index < len(self._entries) else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch.

        The epoch is the largest known one <= requested; its end offset is the start of
        the next known epoch, or the log end offset for the latest epoch (a consumer
        validating its position after a rebalance asks about the current epoch).
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        higher_index = bisect.bisect_right(self._entries, requested_epoch, key=_epoch_of)
        if higher_index == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        next_start_offset = self._entries[higher_index].start_offset
        if higher_index == 0:
            # Older than anything we know (those entries were deleted with their data):
            # the follower should truncate to where our history begins.
            return requested_epoch, next_start_offset
        return self._entries[higher_index - 1].epoch, next_start_offset

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote `offset`: the last entry starting at or before it."""
        index = bisect.bisect_right(self._entries, offset, key=_start_offset_of)
        return self._entries[index - 1].epoch if index > 0 else None

    # --- changes (each persisted before returning) -------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        self.assign_many(((epoch, start_offset),))

    def assign_many(self, entries: Iterable[tuple[int, int]]) -> None:
        """Assign several entries (e.g. the batches of one fetch) with one checkpoint write. A write that
        fails (a full disk) leaves the cache as it was, so that the append it was for can be refused whole."""
        before = list(self._entries)
        changed = False
        for epoch, start_offset in entries:
            changed |= self._assign(EpochEntry(epoch, start_offset))
        if changed:
            try:
                self._persist(durable=False)
            except OSError:
                self._entries = before
                raise

    def assign_recovered(self, entries: Iterable[tuple[int, int]]) -> None:
        """The epochs of the batches recovery checked on open: those newer than the latest known are
        assigned (Kafka's LogSegment.recover), so that an epoch whose checkpoint write a crash lost is back."""
        changed = False
        for epoch, start_offset in entries:
            if epoch >= 0 and (self.latest_epoch is None or epoch > self.latest_epoch):
                changed |= self._assign(EpochEntry(epoch, start_offset))
        if changed:
            self._persist()  # at once and fsynced: the recovered batches were fsynced just now

    def truncate_from_end(self, end_offset: int) -> None:
        """Forget epochs starting at or after `end_offset` (the log was truncated there)."""
        if end_offset < 0:  # UNDEFINED_EPOCH_OFFSET: nothing to truncate to
            return
        keep = bisect.bisect_left(self._entries, end_offset, key=_start_offset_of)
        if keep < len(self._entries):
            del self._entries[keep:]
            self._persist()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget history before `start_offset` (the log start moved there).

        The epoch in force at `start_offset` stays, with its start clamped up to it,
        so `truncate_from_start(6)` keeps an entry starting exactly at 6.
        """
        covered = bisect.bisect_right(self._entries, start_offset, key=_start_offset_of)
        if covered == 0:
            return
        clamped = EpochEntry(self._entries[covered - 1].epoch, start_offset)
        if covered == 1 and self._entries[0] == clamped:
            return  # already starts exactly there
        self._entries[:covered] = [clamped]
        self._persist()

    def clear(self) -> None:
        self._entries.clear()
        self._persist()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self.latest_entry
        # Re-assigning the current epoch at a later offset is the normal case for
        # every batch of an epoch: the first offset of an epoch never moves forward.
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def _persist(self, durable: bool = True) -> None:
        self._version += 1
        if not durable and self.write_later is not None:
            entries, version = tuple(self._entries), self._version
            self.write_later(lambda: self.checkpoint_file.write(entries, False, version))
        else:
            self.checkpoint_file.write(self._entries, durable, self._version)
        self.unsynced_writes = 0 if durable else self.unsynced_writes + 1

    def synced(self, writes: int) -> None:
        """The log's flush fsynced the file as of ``writes`` unsynced writes."""
        self.unsynced_writes = max(0, self.unsynced_writes - writes)


def _epoch_of(entry: EpochEntry) -> int:
    return entry.epoch


def _start_offset_of(entry: EpochEntry) -> int:
    return entry.start_offset


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded (22 characters)."""
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; raises ValueError for anything that is not 16 bytes of base64url."""
    if not _KAFKA_UUID.fullmatch(text):
        raise ValueError(f"{text[:40]!r} is not a base64url-encoded Kafka Uuid")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text[:22] + "=="))


class PartitionMetadataFile:
    """`partition.metadata`: the topic id a partition directory belongs to.

    It lets a broker notice that a directory is left over from a deleted topic of
    the same name.
    """

    def __init__(self, path):
        self.path = os.fspath(path)

    def exists(self) -> bool:
        return os.path.exists(self.path)

    def write(self, topic_id: uuid.UUID, durable: bool = True) -> None:
        # Byte for byte what Kafka writes, including the missing final newline.
        text = f"version: {CHECKPOINT_VERSION}\ntopic_id: {kafka_uuid_string(topic_id)}"
        write_atomically(self.path, text.encode("ascii"), durable)

    def read(self) -> uuid.UUID | None:
        try:
            with open_file(self.path, "rb") as metadata:
                data = metadata.read()
        except FileNotFoundError:
            return None
        if not data:
            return None  # written without fsync and cut short by a crash: the broker writes it again
        try:
            lines = data.decode("utf-8").splitlines()
        except UnicodeDecodeError:
            raise CheckpointError(self.path, "not UTF-8") from None
        version_line = lines[0] if lines else ""
        version_fields = re.split(r":\s+", version_line)
        if len(version_fields) != 2 or version_fields[0] != "version":
            raise CheckpointError(self.path, "expected 'version: <n>'", 1, version_line)
        version = _parse_integer(version_fields[1], _INT32_MAX, self.path, 1, version_line)
        # Kafka accepts newer versions (their first two lines are compatible) so that a
        # downgraded broker can still start.
        if version < CHECKPOINT_VERSION:
            raise CheckpointError(self.path, f"unrecognised version {version}", 1, version_line)
        topic_line = lines[1] if len(lines) > 1 else ""
        topic_fields = re.split(r":\s+", topic_line)
        if len(topic_fields) != 2 or topic_fields[0] != "topic_id":
            raise CheckpointError(self.path, "expected 'topic_id: <id>'", 2, topic_line)
        try:
            topic_id = parse_kafka_uuid(topic_fields[1])
        except ValueError:
            raise CheckpointError(self.path, "malformed topic id", 2, topic_line) from None
        if topic_id == _ZERO_UUID:
            raise CheckpointError(self.path, "the zero Uuid is not a topic id", 2, topic_line)
        return topic_id

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
