"""The leader's side of ISR changes (Kafka's ``maybeShrinkIsr`` and ``maybeExpandIsr``).

Every ``replica.lag.time.max.ms / 2`` (and at once when a follower catches up), for
each partition this broker leads:

- a follower in the ISR that has not fetched from the log end for
  ``replica.lag.time.max.ms`` leaves it: the high watermark stops waiting for it;
- a replica outside the ISR that is fetching (its last fetch within
  ``replica.lag.time.max.ms``) and whose fetches reached the high watermark and
  this leader's epoch joins it again (Kafka weighs a replica for the ISR as its
  fetches come). Never one that stopped fetching: it sits at the high watermark
  only because the high watermark waited for it, and while another stalled
  follower holds the high watermark there, taking it back would swap the two
  in and out of the ISR round after round, and nothing would be acknowledged.

The change goes to the active controller as AlterPartition, at the leader and
partition epochs of the image; until the image shows the result, the high
watermark counts the larger of the two ISRs, so nothing is acknowledged on the
strength of an ISR the controller has not agreed to.

Lag is measured on the monotonic reading of the ``Clock`` the manager is given, the one its
partitions stamp their followers' catching up with (kbroker/replication/replica.py).
"""

from __future__ import annotations

import logging

import trio

from kbroker.controller.channel import ControllerUnavailable
from kbroker.log.clock import SYSTEM_CLOCK, Clock
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.replication.isr")

AlterPartitionRequest = API_BY_NAME["AlterPartition"].request_class
_VERSION = 2


class IsrManager:
    def __init__(self, broker, clock: Clock = SYSTEM_CLOCK) -> None:
        self.broker = broker
        self.clock = clock
        self.lag_max_ms = broker.config.get("replica.lag.time.max.ms")
        self.wake = trio.Event()  # set when a follower may have caught up

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with trio.move_on_after(self.lag_max_ms / 2000):
                await self.wake.wait()
            self.wake = trio.Event()
            await self.check(self.clock.monotonic_ms())

    def changes(self, now_ms: int) -> list[tuple]:
        """(partition, its image state, the ISR it should have) for each partition whose ISR should change."""
        broker = self.broker
        live = {b.node_id for b in broker.image.live_brokers}
        found = []
        for partition in broker.replicas():
            name, index = partition.topic, partition.index
            topic = broker.image.topics.get(name)
            if topic is None or not partition.is_leader or len(partition.replicas) <= 1 or partition.pending_isr:
                continue
            state = topic.partitions[index]
            if state.leader_epoch != partition.leader_epoch:
                continue  # the image is ahead of this replica's view: the next update settles it
            isr = [r for r in state.isr if r == broker.node_id
                   or now_ms - partition.caught_up_ms.get(r, now_ms) <= self.lag_max_ms]
            lagging = set(state.isr) - set(isr)
            epoch_start = partition.log.leader_epochs.epoch_entry(partition.leader_epoch)
            start = epoch_start.start_offset if epoch_start is not None else 0
            for replica in state.replicas:
                # A follower that stopped fetching sits at the high watermark it holds back: at the
                # high watermark, but not back in the ISR until its fetches reach it again (Kafka
                # weighs a follower for the ISR when it fetches; see the module's docstring).
                offset = partition.follower_offsets.get(replica, -1)
                fetched_ms = partition.last_fetch_ms(replica)
                if (replica not in isr and replica not in lagging and replica in live
                        and fetched_ms is not None and now_ms - fetched_ms <= self.lag_max_ms
                        and offset >= partition.high_watermark and offset >= start):
                    isr.append(replica)
            if set(isr) != set(state.isr) and broker.node_id in isr:
                found.append((partition, state, tuple(isr)))
        return found

    async def check(self, now_ms: int) -> None:
        changes = self.changes(now_ms)
        if not changes or self.broker.lifecycle is None:
            return
        topics: dict = {}
        for partition, state, isr in changes:
            partition.pending_isr = isr
            if self.broker.metrics is not None:
                (self.broker.metrics.isr_shrinks if len(isr) < len(state.isr) else self.broker.metrics.isr_expands).add()
            topic_id = self.broker.image.topics[partition.topic].topic_id
            topics.setdefault(topic_id, []).append(AlterPartitionRequest.TopicData.PartitionData(
                partition_index=partition.index, leader_epoch=state.leader_epoch, new_isr=list(isr),
                new_isr_with_epochs=[], leader_recovery_state=0, partition_epoch=state.partition_epoch))
            logger.info("%s-%d: asking for ISR %s (was %s)", partition.topic, partition.index, list(isr),
                        list(state.isr))
        request = AlterPartitionRequest(broker_id=self.broker.node_id, broker_epoch=self.broker.lifecycle.broker_epoch,
                                        topics=[AlterPartitionRequest.TopicData(topic_id=topic_id, partitions=wanted)
                                                for topic_id, wanted in topics.items()])
        try:
            response = await self.broker.lifecycle.channel.call("AlterPartition", _VERSION, request)
        except ControllerUnavailable:
            response = None
        accepted = set()
        if response is not None and response.error_code == ErrorCode.NONE:
            for topic in response.topics:
                for answer in topic.partitions:
                    if answer.error_code == ErrorCode.NONE:
                        accepted.add((topic.topic_id, answer.partition_index))
        for partition, _, _ in changes:  # refused or lost: ask again next round, from the image as it is then
            if (self.broker.image.topics[partition.topic].topic_id, partition.index) not in accepted:
                partition.pending_isr = None
