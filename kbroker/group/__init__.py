"""The group coordinator: classic and KIP-848 consumer groups over ``__consumer_offsets``.

Sans-IO cores in a thin trio shell (DESIGN.md; STYLE.md, "Sans-IO cores"):

``records``      Kafka's key/value record formats in ``__consumer_offsets`` and
                 which of its partitions coordinates a group.
``assignors``    KIP-848 server-side assignors, ``uniform`` and ``range``: pure functions.
``classic``      one classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) as a state
                 machine: inputs carry ``now_ms``, outputs are effects; no I/O, no trio.
``consumer``     one KIP-848 consumer group (ConsumerGroupHeartbeat) as a state machine.
``coordinator``  every group and committed offset of the partitions this broker leads:
                 routes requests to groups, keeps offsets, rebuilds itself from records.
``shell``        the trio driver: appends the records the cores ask for to
                 ``__consumer_offsets`` and answers only once they are durable, fires
                 timers, loads a partition's groups when this broker becomes its leader.

Effects are handled in order: records are made durable before any answer that
depends on them leaves (Kafka answers a SyncGroup or OffsetCommit only after
its records are written).
"""


def client_address(context) -> str:
    """A member's client host as Kafka records and describes it: Java's InetAddress.toString() of the
    connection's peer, "/127.0.0.1"."""
    return f"/{context.client_host}"
