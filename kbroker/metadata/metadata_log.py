"""The ``__cluster_metadata`` partition: committed metadata records, replayed at start.

On a single node the quorum has one voter, so a record is committed once it
is fsynced here; the raft issue replaces this with a replicated log of the
same partition and the same records.
"""

from __future__ import annotations

import os

from kbroker.metadata.image import MetadataImage, apply_record
from kbroker.metadata.records import MetadataRecordCodec
from kbroker.log.partition_log import Log
from kbroker.wire.records import Record, decode_records, iter_batches, build_batch

METADATA_TOPIC = "__cluster_metadata"
_READ_BYTES = 8 * 1024 * 1024


class MetadataLog:
    def __init__(self, data_dir: str) -> None:
        self.log = Log.open(os.path.join(data_dir, f"{METADATA_TOPIC}-0"))
        self.codec = MetadataRecordCodec()

    def replay(self, image: MetadataImage) -> MetadataImage:
        """``image`` with every record in the log applied, in order."""
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            data = self.log.read_bytes(offset, _READ_BYTES)
            for position, header in iter_batches(data, allow_partial_tail=True):
                _, batch_records = decode_records(data, position)
                for record in batch_records:
                    image = apply_record(image, self.codec.decode(record.value))
                offset = header.last_offset + 1
        return image

    def commit(self, image: MetadataImage, records: list) -> MetadataImage:
        """Append ``records`` as one batch, fsync, and return the image with them applied.

        One batch, so a change made of several records (a topic and its
        partitions) is all there after a crash or not at all.
        """
        values = [Record(offset_delta=i, value=self.codec.encode(record)) for i, record in enumerate(records)]
        self.log.append(bytearray(build_batch(values)), origin="coordinator")
        self.log.flush()
        for record in records:
            image = apply_record(image, record)
        return image

    def close(self) -> None:
        self.log.close()
