"""Putting cleaned segments in place of the ones they replace, crash-safely.

Kafka's protocol. A clean writes each replacement segment under
``<base>.log.cleaned`` (with ``.index.cleaned``, ``.timeindex.cleaned`` and
``.txnindex.cleaned``) and fsyncs it; then :func:`swap_in`

1. renames every ``.cleaned`` file to ``.swap``, the ``.log`` first, and
   fsyncs the directory: from here on the replacement is complete and wins;
2. deletes the replaced segments' files;
3. renames the ``.swap`` files to their final names, the ``.log`` first, and
   fsyncs the directory.

A crash anywhere leaves a directory that :func:`complete_interrupted_swaps`
(run when a partition is opened) turns into a valid log: ``.cleaned`` files
are an unfinished clean and go, and so does any ``.swap`` file at or above the
lowest ``.cleaned`` offset (its renames were cut short, so step 2 never
began); a remaining ``<base>.log.swap`` is complete, so every other segment
file whose offset lies in [base, next offset of the swap) is a replaced
original and is deleted, and the ``.swap`` files take their final names.

The replacement must reach the next offset of the last segment it replaces
(the cleaner keeps the last batch of every group, if only as an empty batch),
otherwise a replaced segment beyond its end would survive a crash.
"""

from __future__ import annotations

import logging
import os

from kbroker.log.descriptor_cache import open_descriptor, open_file
from kbroker.log.segment import segment_file_name
from kbroker.wire.records import HEADER_SIZE, MAGIC, BatchHeader, MIN_BATCH_LENGTH

logger = logging.getLogger("kbroker.log.segment_swap")

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
# The .log first: whether a .log.swap exists decides what recovery does.
SEGMENT_FILE_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex")


def segment_path(directory: str, base_offset: int, file_suffix: str, state_suffix: str = "") -> str:
    return os.path.join(directory, segment_file_name(base_offset, file_suffix + state_suffix))


def rename_segment_files(directory: str, base_offset: int, old_suffix: str, new_suffix: str) -> None:
    """Rename a segment's files from ``old_suffix`` to ``new_suffix``; absent indexes are skipped."""
    for file_suffix in SEGMENT_FILE_SUFFIXES:
        source = segment_path(directory, base_offset, file_suffix, old_suffix)
        if file_suffix != ".log" and not os.path.exists(source):
            continue
        os.replace(source, segment_path(directory, base_offset, file_suffix, new_suffix))


def remove_segment_files(directory: str, base_offset: int, state_suffix: str) -> None:
    for file_suffix in SEGMENT_FILE_SUFFIXES:
        try:
            os.unlink(segment_path(directory, base_offset, file_suffix, state_suffix))
        except FileNotFoundError:
            pass


def fsync_directory(directory: str) -> None:
    """Make renames and deletions in ``directory`` durable."""
    descriptor = open_descriptor(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def swap_in(directory: str, base_offset: int, replaced) -> None:
    """Steps 1-3 above: the cleaned segment at ``base_offset`` replaces the ``replaced`` segments.

    ``replaced`` are the old :class:`LogSegment` objects; their log files stay
    open and keep serving reads after their names are gone, until the log
    closes them (``file.delete.delay.ms`` after it took the replacement in).
    """
    try:
        rename_segment_files(directory, base_offset, CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_directory(directory)
    except Exception:
        # Nothing old is touched yet: abandon the clean.
        remove_segment_files(directory, base_offset, SWAP_SUFFIX)
        remove_segment_files(directory, base_offset, CLEANED_SUFFIX)
        raise
    for segment in replaced:
        segment.unlink(keep_open=True)
    rename_segment_files(directory, base_offset, SWAP_SUFFIX, "")
    fsync_directory(directory)


def complete_interrupted_swaps(directory: str) -> list[str]:
    """Finish or undo a swap a crash interrupted; returns what was done, for the log."""
    names = [name for name in os.listdir(directory) if name.endswith((CLEANED_SUFFIX, SWAP_SUFFIX))]
    if not names:
        return []
    actions = []
    cleaned = [name for name in names if name.endswith(CLEANED_SUFFIX)]
    lowest_cleaned = min((_offset_of(name) for name in cleaned), default=None)
    swaps = []
    for name in names:
        offset = _offset_of(name)
        unfinished = lowest_cleaned is not None and offset is not None and offset >= lowest_cleaned
        if name.endswith(CLEANED_SUFFIX) or unfinished or offset is None:
            os.unlink(os.path.join(directory, name))
            actions.append(f"deleted {name} of an unfinished clean")
        else:
            swaps.append(name)
    replaced_ranges = []
    for name in swaps:
        if name.endswith(".log" + SWAP_SUFFIX):
            base_offset = _offset_of(name)
            replaced_ranges.append((base_offset, _next_offset(os.path.join(directory, name), base_offset)))
    for name in os.listdir(directory):
        offset = _offset_of(name)
        is_segment_file = any(name.endswith(file_suffix) for file_suffix in SEGMENT_FILE_SUFFIXES)
        if offset is None or not is_segment_file:
            continue
        if any(start <= offset < end for start, end in replaced_ranges):
            os.unlink(os.path.join(directory, name))
            actions.append(f"deleted {name}, replaced by a cleaned segment")
    for name in sorted(swaps, key=lambda name: not name.endswith(".log" + SWAP_SUFFIX)):
        os.replace(os.path.join(directory, name), os.path.join(directory, name[: -len(SWAP_SUFFIX)]))
        actions.append(f"renamed {name} to its final name")
    fsync_directory(directory)
    for action in actions:
        logger.warning("%s: %s", directory, action)
    return actions


def _offset_of(name: str) -> int | None:
    stem = name.partition(".")[0]
    return int(stem) if stem.isdigit() else None


def _next_offset(path: str, base_offset: int) -> int:
    """One past the last offset of the whole batches in a segment file (headers only)."""
    next_offset = base_offset
    position = 0
    with open_file(path, "rb") as file:
        size = os.fstat(file.fileno()).st_size
        while position + HEADER_SIZE <= size:
            header = BatchHeader.read(os.pread(file.fileno(), HEADER_SIZE, position))
            if header.magic != MAGIC or header.batch_length < MIN_BATCH_LENGTH or position + header.size > size:
                break
            next_offset = max(next_offset, header.next_offset)
            position += header.size
    return next_offset
