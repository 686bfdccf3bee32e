"""kbroker/txn/markers.py on a real partition: a marker ends the transaction there and carries the wall time
of the partition's clock (a FakeClock here)."""

from types import SimpleNamespace

import pytest

from kbroker.log.clock import FakeClock
from kbroker.log.config import LogConfig
from kbroker.log.partition_log import Log
from kbroker.replication.flusher import Flusher
from kbroker.replication.replica import Partition
from kbroker.txn.markers import write_markers
from kbroker.wire.errors import ErrorCode
from kbroker.wire.records import Record, build_batch, iter_batches

pytestmark = pytest.mark.trio

PRODUCER_ID, PRODUCER_EPOCH = 7, 0


def broker_leading(partition: Partition) -> SimpleNamespace:
    """What write_markers asks of a broker: the image, leadership, the verification guards and the partition."""
    topic = SimpleNamespace(partitions=[SimpleNamespace(partition=0)])
    return SimpleNamespace(image=SimpleNamespace(topics={"t": topic}), leads=lambda image, index: True,
                           txn_guards=SimpleNamespace(end=lambda topic, index, producer_id: None),
                           partition=lambda topic, index: partition)


async def test_a_marker_is_stamped_with_the_partitions_clock(tmp_path):
    flusher, clock = Flusher(), FakeClock(wall_ms=1_800_000_000_000)
    log = Log.open(str(tmp_path / "t-0"), LogConfig(), now_ms=clock.wall_ms())
    partition = Partition("t", 0, log, flusher, 0, node_id=1, replicas=(1,), isr=(1,), leader=1, clock=clock)
    partition.append(bytearray(build_batch([Record(value=b"v")], producer_id=PRODUCER_ID, producer_epoch=PRODUCER_EPOCH,
                                           base_sequence=0, transactional=True, base_timestamp=5)))
    assert partition.last_stable_offset == 0
    clock.advance(4000)
    errors = await write_markers(broker_leading(partition), PRODUCER_ID, PRODUCER_EPOCH, True, 0, [("t", 0)])
    assert errors == {("t", 0): ErrorCode.NONE}
    [_, (_, marker)] = list(iter_batches(log.read_bytes(0, 10_000)))
    assert marker.is_control and marker.base_timestamp == marker.max_timestamp == 1_800_000_004_000
    assert partition.last_stable_offset == 2
    flusher.stop()


async def test_a_leader_that_does_not_know_the_partition_yet_is_asked_again():
    """A remote leader's UNKNOWN_TOPIC_OR_PARTITION (its metadata behind the coordinator's, after a restart) is
    retried, as Kafka's marker sender retries it; a partition the coordinator's own metadata lacks is done."""
    from kbroker.txn.remote import write_markers_anywhere
    from kbroker.wire.schema import API_BY_NAME

    response_class = API_BY_NAME["WriteTxnMarkers"].response_class
    result = response_class.WritableTxnMarkerResult
    asked = []

    async def call(address, api, version, request, **_):
        asked.append((address, [(t.name, t.partition_indexes) for t in request.markers[0].topics]))
        return response_class(markers=[result(producer_id=PRODUCER_ID, topics=[result.WritableTxnMarkerTopicResult(
            name="t", partitions=[result.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                partition_index=0, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])])])

    broker = SimpleNamespace(node_id=1, image=SimpleNamespace(
        topics={"t": SimpleNamespace(partitions=[SimpleNamespace(leader=2)])},
        peer_address={2: ("127.0.0.1", 1)}.get), peers=SimpleNamespace(call=call))
    errors = await write_markers_anywhere(broker, PRODUCER_ID, PRODUCER_EPOCH, False, 0, [("t", 0), ("gone", 0)])
    assert asked == [(("127.0.0.1", 1), [("t", [0])])]
    assert errors == {("t", 0): ErrorCode.NOT_LEADER_OR_FOLLOWER, ("gone", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
