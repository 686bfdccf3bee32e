"""Followers' replication: this broker fetches the partitions it follows from their leaders.

One task per leader broker, one Fetch (v12, the client's own API with this broker's
id as ``replica_id``) for every partition followed from it, on the connection kept to
that leader for fetching alone (kbroker.peers, lane "fetch": a long poll held by the
leader delays no other request to it).
For each partition the follower sends its log end (which it holds durably: it
fsyncs what it appended before fetching again) and the epoch of its last batch.
The leader answers with batches, which are appended with the leader's offsets
and epochs, and its high watermark; or with a diverging epoch (KIP-320): the
follower's log holds batches the leader's does not, so it truncates to where
they part and fetches again. Batches stay opaque bytes throughout.
A partition the leader answers with an error (it has not applied the topic yet, its log
directory is offline, ...) is left out of the fetches for ``replica.fetch.backoff.ms``, as
Kafka's fetcher delays its partitions in error; the others go on being fetched.
"""

from __future__ import annotations

import logging

import trio

from kbroker.event_log import RepeatedWarning
from kbroker.log.offline import out_of_space
from kbroker.security.peer import PeerUnreachable
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import iter_batches
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.replication.fetcher")
_no_space = RepeatedWarning(logger, "replica fetcher from %s cannot append: %s")

FETCH = API_BY_NAME["Fetch"]
FetchRequest = FETCH.request_class
FETCH_VERSION = 12  # by topic name, with last_fetched_epoch and diverging_epoch


class ReplicaFetchers:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.config = broker.config
        self._tasks: dict[int, trio.CancelScope] = {}  # leader id -> its fetcher's scope
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            self.update()
            task_status.started()
            await trio.sleep_forever()

    def followed(self, leader: int) -> list:
        """The partitions this broker follows from ``leader``, as the image says now."""
        broker = self.broker
        found = []
        for topic in broker.image.topics.values():
            for state in topic.partitions:
                if state.leader == leader and broker.node_id in state.replicas and leader != broker.node_id:
                    partition = broker.partition(topic.name, state.partition)
                    if partition.offline is None:  # an offline replica takes nothing more (fsync failed)
                        found.append(partition)
        return found

    def update(self) -> None:
        """Start a fetcher for each leader this broker now follows something from; stop the others."""
        if self._nursery is None:
            return
        broker = self.broker
        leaders = {state.leader for topic in broker.image.topics.values() for state in topic.partitions
                   if broker.node_id in state.replicas and state.leader not in (-1, broker.node_id)}
        for leader in set(self._tasks) - leaders:
            self._tasks.pop(leader).cancel()
        for leader in leaders - set(self._tasks):
            scope = self._tasks[leader] = trio.CancelScope()
            self._nursery.start_soon(self._fetch_from, leader, scope)

    async def _fetch_from(self, leader: int, scope: trio.CancelScope) -> None:
        backoff_s = self.config.get("replica.fetch.backoff.ms") / 1000
        wait_ms = self.config.get("replica.fetch.wait.max.ms")
        refusal = ""  # the last TLS or SASL failure logged, so that a retry does not log it again
        refused = ErrorCode.NONE  # the leader's last top-level error, logged when it changes
        delayed: dict[tuple[str, int], float] = {}  # partitions answered an error -> when to ask again
        with scope:
            while True:
                endpoint = next((b for b in self.broker.image.brokers if b.node_id == leader), None)
                partitions = self.followed(leader)
                now = trio.current_time()
                ready = [p for p in partitions if delayed.get((p.topic, p.index), now) <= now]
                if endpoint is None or not ready:
                    pause = backoff_s if endpoint is None else 0.1
                    if partitions and not ready:
                        pause = min(delayed[(p.topic, p.index)] for p in partitions) - now
                    await trio.sleep(pause)
                    continue
                partitions = ready
                try:
                    response = await self.broker.peers.call(
                        (endpoint.host, endpoint.port), "Fetch", FETCH_VERSION, self._request(partitions, wait_ms),
                        client_id=f"replica-{self.broker.node_id}", timeout_s=wait_ms / 1000 + 30, lane="fetch")
                except PeerUnreachable as error:  # TLS or SASL refused: the settings, not the network
                    if str(error) != refusal:
                        refusal = str(error)
                        logger.warning("replica fetcher cannot log in to leader %d: %s", leader, error)
                    await trio.sleep(backoff_s)
                    continue
                except OSError as error:
                    logger.debug("replica fetcher for leader %d: %r", leader, error)
                    await trio.sleep(backoff_s)
                    continue
                refusal = ""
                if response.error_code != ErrorCode.NONE:
                    if response.error_code != refused:  # once per refusal, not once per retry
                        refused = response.error_code
                        hint = " (is this broker's principal in super.users?)" \
                            if refused == ErrorCode.CLUSTER_AUTHORIZATION_FAILED else ""
                        logger.warning("leader %d refuses this broker's fetches: %s%s", leader,
                                       ErrorCode(refused).name, hint)
                    await trio.sleep(backoff_s)
                    continue
                refused = ErrorCode.NONE
                try:
                    failed = await self._apply_all(leader, partitions, response)
                    now = trio.current_time()
                    delayed = {key: when for key, when in delayed.items() if when > now}
                    delayed.update((key, now + backoff_s) for key in failed)
                except OSError as error:
                    if not out_of_space(error):
                        logger.exception("replica fetcher for leader %d failed", leader)
                    else:  # a full disk: copies wait for space (this replica falls out of the ISRs meanwhile)
                        _no_space.warn(f"leader {leader}", error)
                    await trio.sleep(backoff_s)
                except Exception:  # a bug here must not take the broker down: log it, fetch again later
                    logger.exception("replica fetcher for leader %d failed", leader)
                    await trio.sleep(backoff_s)

    async def _apply_all(self, leader: int, partitions, response) -> list[tuple[str, int]]:
        """Append what the leader sent; what was appended is on disk before its offsets are reported.
        Returns the partitions the leader answered with an error, to be asked again after a backoff."""
        by_key = {(p.topic, p.index): p for p in partitions}
        waits = []
        failed = []
        for topic in response.responses:
            for answer in topic.partitions:
                partition = by_key.get((topic.topic, answer.partition_index))
                if partition is not None and partition.leader == leader:
                    if answer.error_code not in (ErrorCode.NONE, ErrorCode.OFFSET_OUT_OF_RANGE):
                        failed.append((topic.topic, answer.partition_index))
                    last = self._apply(partition, answer)
                    if last is not None:
                        waits.append((partition, last))
        for partition, last in waits:
            await partition.wait_durable(last)
        return failed

    def _request(self, partitions, wait_ms: int):
        topics: dict[str, list] = {}
        max_bytes = self.config.get("replica.fetch.max.bytes")
        for partition in partitions:
            log = partition.log
            last_epoch = log.leader_epochs.latest_epoch if log.leader_epochs is not None else None
            topics.setdefault(partition.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                partition=partition.index, current_leader_epoch=partition.leader_epoch,
                fetch_offset=log.log_end_offset, last_fetched_epoch=-1 if last_epoch is None else last_epoch,
                log_start_offset=log.log_start_offset, partition_max_bytes=max_bytes))
        return FetchRequest(
            replica_id=self.broker.node_id, max_wait_ms=wait_ms, min_bytes=1,
            max_bytes=self.config.get("replica.fetch.response.max.bytes"), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=name, partitions=wanted)
                                      for name, wanted in topics.items()],
            forgotten_topics_data=[], rack_id="")

    def _apply(self, partition, answer) -> int | None:
        """One partition's answer; the last offset appended, if any."""
        log = partition.log
        if answer.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if log.log_end_offset < answer.log_start_offset or log.log_end_offset == 0:
                log.truncate_fully_and_start_at(answer.log_start_offset)  # the leader no longer has what follows ours
            else:
                log.truncate_to(max(answer.high_watermark, log.log_start_offset))
            partition.truncated()
            return None
        if answer.error_code != ErrorCode.NONE:
            return None  # a leadership change on its way through the metadata: asked again next round
        diverging = answer.diverging_epoch
        if diverging is not None and diverging.end_offset >= 0:
            logger.info("%s-%d: truncating to %d (diverged from leader epoch %d)", partition.topic, partition.index,
                        diverging.end_offset, diverging.epoch)
            log.truncate_to(diverging.end_offset)
            partition.truncated()
            return None
        last = None
        records = bytes(answer.records or b"")
        whole = _whole_batches(records)
        if whole:
            last = partition.append_replicated(bytearray(whole)).last_offset
            partition.start_flush(last)
        partition.follow_high_watermark(answer.high_watermark)
        return last


def _whole_batches(data: bytes) -> bytes:
    """The whole batches at the front of ``data`` (a fetch may end inside one)."""
    end = 0
    for position, header in iter_batches(memoryview(data), allow_partial_tail=True):
        end = position + header.batch_length + 12
    return data[:end]
