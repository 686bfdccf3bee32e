"""A broker-only node's copy of the cluster metadata: a Raft observer of the controller quorum.

It fetches ``__cluster_metadata`` from the quorum's leader like a voter does, and
keeps it on disk the same way, but it never votes and has no listener of its
own: nothing asks it anything. Its applied image is the broker's.
"""

from __future__ import annotations

import trio

from kbroker.config import BrokerConfig
from kbroker.controller.controller import quorum_cluster_id, quorum_member
from kbroker.controller.state import MetadataState


class QuorumObserver:
    servers = ()  # it listens on nothing
    is_active = False  # it never leads the quorum

    def __init__(self, config: BrokerConfig) -> None:
        self.node_id = config.node_id
        self.cluster_id = quorum_cluster_id(config)
        self.state = MetadataState(self.cluster_id)
        self.store, self.driver = quorum_member(config, self.state)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.driver.run)
                task_status.started()
        finally:
            self.store.close()

    def addresses(self) -> list[str]:
        """None: it has no listener of its own."""
        return []

    async def shutdown(self) -> None:
        """Nothing to hand over: an observer leads nothing."""
