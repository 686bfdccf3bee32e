"""kbroker/controller/partitions.py on hand-made images: elections and reassignments as Kafka's controller."""

import uuid

from kbroker.controller.partitions import (PREFERRED, UNCLEAN, completed_reassignments, elect, imbalanced,
                                           reassign)
from kbroker.metadata import records
from kbroker.metadata.image import BrokerEndpoint, MetadataImage, apply_record
from kbroker.wire.errors import ErrorCode

TOPIC_ID = uuid.uuid4()


def image_with(leader: int, isr: list[int], replicas=(1, 2, 3), live=(1, 2, 3, 4)) -> MetadataImage:
    image = MetadataImage(cluster_id="c", controller_id=-1,
                          brokers=tuple(BrokerEndpoint(b, "h", b, fenced=b not in live) for b in (1, 2, 3, 4)))
    for record in (records.TopicRecord(name="t", topic_id=TOPIC_ID),
                   records.PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=list(replicas), isr=isr,
                                           leader=leader, leader_epoch=0, partition_epoch=0)):
        image = apply_record(image, record)
    return image


def after(image, *change):
    for record in change:
        image = apply_record(image, record)
    return image.topics["t"].partitions[0]


def test_preferred_election_needs_the_preferred_replica_live_and_in_sync():
    assert elect(image_with(1, [1, 2, 3]), "t", 0, PREFERRED) == (ErrorCode.ELECTION_NOT_NEEDED, None)
    assert elect(image_with(2, [2, 3]), "t", 0, PREFERRED)[0] == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    image = image_with(2, [1, 2, 3])
    code, record = elect(image, "t", 0, PREFERRED)
    assert code == ErrorCode.NONE and after(image, record).leader == 1
    assert imbalanced(image, 10) == [("t", 0)] and imbalanced(image_with(1, [1, 2, 3]), 10) == []


def test_unclean_election_takes_any_live_replica_only_when_there_is_no_leader():
    assert elect(image_with(1, [1]), "t", 0, UNCLEAN)[0] == ErrorCode.ELECTION_NOT_NEEDED
    image = image_with(-1, [1], live=(2, 3, 4))
    code, record = elect(image, "t", 0, UNCLEAN)
    state = after(image, record)
    assert code == ErrorCode.NONE and (state.leader, state.isr) == (2, (2,))


def test_a_reassignment_adds_first_and_drops_only_once_the_new_replicas_are_in_sync():
    image = image_with(3, [1, 2, 3])
    code, record = reassign(image, "t", 0, [1, 2, 4])
    state = after(image, record)
    assert code == ErrorCode.NONE and (state.replicas, state.adding, state.removing) == ((1, 2, 4, 3), (4,), (3,))
    image = apply_record(image, record)
    assert completed_reassignments(image) == []  # 4 is not in the ISR yet
    image = apply_record(image, records.PartitionChangeRecord(partition_id=0, topic_id=TOPIC_ID, isr=[1, 2, 3, 4]))
    [done] = completed_reassignments(image)
    state = after(image, done)
    assert (state.replicas, state.isr, state.adding, state.removing) == ((1, 2, 4), (1, 2, 4), (), ())
    assert state.leader == 1  # the old leader 3 was dropped: a new one from the ISR


def test_a_cancelled_reassignment_goes_back_to_the_old_replicas():
    image = image_with(1, [1, 2, 3])
    image = apply_record(image, reassign(image, "t", 0, [1, 2, 4])[1])
    code, record = reassign(image, "t", 0, None)
    state = after(image, record)
    assert code == ErrorCode.NONE and (state.replicas, state.adding, state.removing) == ((1, 2, 3), (), ())
    assert reassign(image_with(1, [1, 2, 3]), "t", 0, None)[0] == ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
    assert reassign(image_with(1, [1, 2, 3]), "t", 0, [1, 9])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
