"""Open a single node's metadata written by release 0.1.0 as the one-voter quorum's log.

Release 0.1.0's single node kept ``__cluster_metadata-0`` as a plain partition log: one batch per
change, each record one metadata record, committed by an fsync, no ``quorum-state``. Since then a
single node is a one-voter Raft quorum (kbroker/controller/controller.py) whose log has Raft's layout
(raft/store.py). At the first start on such a directory the old log is replayed into an image once,
and the image becomes the new log's first snapshot, so that everything in it (topics, configs,
brokers, producer-id blocks, SCRAM users, ACLs, quotas) carries over.

Crash-safe by renames: the new log is built beside the old one (``.upgrading``) and fsynced; the old
one is renamed away (``.replaced``), the new one into its place, and only then is the old one deleted.
A start after a crash at any step finds where it stopped and goes on.
"""

from __future__ import annotations

import logging
import os
import shutil

from kbroker.controller.state import encode_change, image_records
from kbroker.log.checkpoint import fsync_directory
from kbroker.log.partition_log import Log
from kbroker.metadata.image import MetadataImage, apply_record
from kbroker.metadata.records import MetadataRecordCodec
from kbroker.raft.messages import Ready, Snapshot, SnapshotId
from kbroker.raft.store import QUORUM_STATE, SNAPSHOT_SUFFIX, RaftStore
from kbroker.wire.records import decode_records, iter_batches

logger = logging.getLogger("kbroker.metadata")

_READ_BYTES = 8 * 1024 * 1024
UPGRADING, REPLACED = ".upgrading", ".replaced"


def upgrade_single_node_log(directory: str, cluster_id: str) -> None:
    """Turn a 0.1.0 single node's metadata log at ``directory`` into a one-voter quorum's; nothing to do
    for a quorum's log or a new directory."""
    building, old = directory + UPGRADING, directory + REPLACED
    if not os.path.isdir(directory) and os.path.isdir(building) and os.path.isdir(old):
        _finish(directory, building, old)  # stopped between the two renames
        return
    if os.path.isdir(old):
        shutil.rmtree(old)  # stopped after the renames, before the old log was deleted
    if not _is_release_0_1_log(directory):
        return
    if os.path.isdir(building):
        shutil.rmtree(building)  # stopped while building: build again
    image = _replay(directory, cluster_id)
    store = RaftStore(building)
    try:
        # The image as a snapshot at offset 1 of epoch 0: the voter's first election makes epoch 1.
        store.persist([Ready(quorum_state=(0, None), snapshot=Snapshot(SnapshotId(1, 0), encode_change(
            image_records(image))), log_start=1)])
    finally:
        store.close()
    os.rename(directory, old)
    _finish(directory, building, old)
    logger.info("%s: metadata of release 0.1.0 (%d topics) carried over to the quorum's log", directory,
                len(image.topics))


def _is_release_0_1_log(directory: str) -> bool:
    if not os.path.isdir(directory):
        return False
    names = os.listdir(directory)
    return QUORUM_STATE not in names and not any(name.endswith(SNAPSHOT_SUFFIX) for name in names) and any(
        name.endswith(".log") for name in names)


def _replay(directory: str, cluster_id: str) -> MetadataImage:
    """The image the 0.1.0 log holds: every record applied in order, as release 0.1.0 replayed it."""
    codec = MetadataRecordCodec()
    image = MetadataImage(cluster_id=cluster_id, controller_id=-1)
    log = Log.open(directory)
    try:
        offset = log.log_start_offset
        while offset < log.log_end_offset:
            data = log.read_bytes(offset, _READ_BYTES)
            for position, header in iter_batches(data, allow_partial_tail=True):
                for record in decode_records(data, position)[1]:
                    image = apply_record(image, codec.decode(record.value))
                offset = header.last_offset + 1
    finally:
        log.close()
    return image


def _finish(directory: str, building: str, old: str) -> None:
    os.rename(building, directory)
    fsync_directory(os.path.dirname(os.path.abspath(directory)))
    shutil.rmtree(old)
