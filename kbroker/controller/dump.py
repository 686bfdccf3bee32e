"""Print a controller's metadata as its disk holds it: snapshot, then every entry of the log.

    python -m kbroker.controller.dump DATA_DIR/__cluster_metadata-0

JSON on stdout: the quorum state, where the log starts and ends, and the image
the entries build (brokers, topics with their partitions, configs). It reads the
files only; run it on a stopped node's directory. Entries past the quorum's high
watermark (never committed) are applied too: the tool cannot know the quorum's
commit point, so compare nodes after they have caught up.
"""

from __future__ import annotations

import json
import sys

from kbroker.controller.state import MetadataState, decode_change
from kbroker.metadata import records
from kbroker.raft.node import LEADER_CHANGE
from kbroker.raft.store import RaftStore


def dump(directory: str) -> dict:
    store = RaftStore(directory)
    try:
        epoch, voted_for, snapshot, entries = store.load()
    finally:
        store.close()
    state = MetadataState(cluster_id="")
    log_start = 0
    if snapshot is not None:
        state.load_snapshot(snapshot.data)
        log_start = snapshot.id.end_offset
    created_twice = []
    for offset, entry in enumerate(entries, log_start):
        if entry.data is LEADER_CHANGE:
            continue
        for record in decode_change(entry.data):
            if isinstance(record, records.TopicRecord) and record.name in state.image.topics:
                created_twice.append(record.name)
        state.apply(offset, entry.data)
    image = state.image
    return {
        "epoch": epoch,
        "voted_for": voted_for,
        "log_start_offset": log_start,
        "log_end_offset": log_start + len(entries),
        "snapshot_end_offset": None if snapshot is None else snapshot.id.end_offset,
        "brokers": [{"id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack, "epoch": b.epoch,
                     "fenced": b.fenced} for b in image.brokers],
        "topics": {name: {"id": str(topic.topic_id),
                          "partitions": [{"leader": p.leader, "leader_epoch": p.leader_epoch,
                                          "replicas": list(p.replicas), "isr": list(p.isr)}
                                         for p in topic.partitions],
                          "configs": dict(sorted(topic.configs.items()))}
                   for name, topic in sorted(image.topics.items())},
        "broker_configs": {name: dict(sorted(configs.items())) for name, configs in sorted(image.broker_configs.items())},
        "group_configs": {name: dict(sorted(configs.items())) for name, configs in sorted(image.group_configs.items())},
        "next_producer_id": image.next_producer_id,
        "topics_created_twice": created_twice,
    }


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m kbroker.controller.dump METADATA_LOG_DIR", file=sys.stderr)
        return 2
    json.dump(dump(arguments[0]), sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
