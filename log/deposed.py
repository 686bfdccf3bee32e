"""A leader's write that can no longer be committed: its leader was deposed first (issue 44).

The replica layer (kbroker/replication/replica.py) raises it to whoever waits for a write's replication;
it lives here, beside the log's other write failures (LogDirOffline), so that every room that appends
(the Produce handler, the coordinators, the transaction markers, the schema store) names it without
importing the replica layer.
"""

from __future__ import annotations


class NotLeaderForEpoch(Exception):
    """A write appended as leader in ``leader_epoch`` can no longer be committed by this replica: it stopped
    leading, or leads in another epoch, before the high watermark passed the write. Its records may be gone
    (a deposed leader truncates to its successor's log), so it is never acknowledged: Kafka answers such a
    delayed produce NOT_LEADER_OR_FOLLOWER, and the producer sends it again to the new leader."""

    def __init__(self, topic: str, index: int, offset: int, leader_epoch: int) -> None:
        super().__init__(f"{topic}-{index}: offset {offset}, appended as leader in epoch {leader_epoch}, was not "
                         f"committed before this replica stopped leading in that epoch")
        self.topic, self.index, self.offset, self.leader_epoch = topic, index, offset, leader_epoch
