"""New partitions' directories made ahead in worker threads (kbroker/log/preparer.py), and claimed by
their owner before it touches them."""

import os
import threading
import time
import uuid

import pytest

import kbroker.log.preparer as preparer_module
from kbroker.log.checkpoint import PartitionMetadataFile
from kbroker.log.config import LogConfig
from kbroker.log.manager import LogManager
from kbroker.log.preparer import LogPreparer
from kbroker.testing import running_broker
from kbroker.wire.records import Record, build_batch
from testkit.raw_client import call, request

WAIT_S = 10


def wait_until(condition, what: str) -> None:
    give_up = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"not within {WAIT_S} s: {what}")
        time.sleep(0.005)


def test_directories_are_made_with_their_first_segment_and_metadata_and_claimed_once(tmp_path):
    preparer = LogPreparer(threads=3)
    topic_id = uuid.uuid4()
    directories = [str(tmp_path / f"made-{index}") for index in range(40)]
    try:
        for directory in directories:
            preparer.submit(directory, topic_id)
        wait_until(lambda: preparer.made == 40, "40 directories made")
        for directory in directories:
            assert sorted(os.listdir(directory)) == ["00000000000000000000.log", "partition.metadata"]
            assert os.path.getsize(os.path.join(directory, "00000000000000000000.log")) == 0
            assert PartitionMetadataFile(os.path.join(directory, "partition.metadata")).read() == topic_id
            assert preparer.claim(directory) is True
            assert preparer.claim(directory) is False  # the owner's now
    finally:
        preparer.stop()


def test_a_directory_claimed_before_a_worker_began_is_not_made(tmp_path):
    preparer = LogPreparer(threads=0)  # no worker: everything stays queued
    preparer.submit(str(tmp_path / "queued"), uuid.uuid4())
    assert preparer.claim(str(tmp_path / "queued")) is False
    assert preparer.claim(str(tmp_path / "never-submitted")) is False
    preparer.stop()
    assert not (tmp_path / "queued").exists()


def test_a_claim_waits_for_the_worker_making_that_directory(tmp_path, monkeypatch):
    release = threading.Event()
    real_make = preparer_module._make

    def held_make(directory, topic_id):
        release.wait(WAIT_S)
        return real_make(directory, topic_id)

    monkeypatch.setattr(preparer_module, "_make", held_make)
    preparer = LogPreparer(threads=1)
    directory = str(tmp_path / "held")
    claimed = []
    try:
        preparer.submit(directory, None)
        wait_until(lambda: directory in preparer._running, "the worker began")
        claimer = threading.Thread(target=lambda: claimed.append(preparer.claim(directory)))
        claimer.start()
        time.sleep(0.1)
        assert claimed == []  # waiting for the worker, not making the directory beside it
        release.set()
        claimer.join(WAIT_S)
        assert claimed == [True]
        assert os.listdir(directory) == ["00000000000000000000.log"]  # no topic id, no metadata file
    finally:
        release.set()
        preparer.stop()


def test_a_failed_directory_is_left_to_the_owner(tmp_path):
    (tmp_path / "a-file").write_bytes(b"")
    preparer = LogPreparer(threads=1)
    try:
        preparer.submit(str(tmp_path / "a-file" / "cannot-be-made"), uuid.uuid4())
        wait_until(lambda: not preparer._queued and not preparer._running, "the worker tried")
        assert preparer.claim(str(tmp_path / "a-file" / "cannot-be-made")) is False
        assert preparer.made == 0
    finally:
        preparer.stop()


def test_stop_drops_what_has_not_begun(tmp_path):
    preparer = LogPreparer(threads=0)
    preparer.submit(str(tmp_path / "dropped"), None)
    preparer.stop()
    preparer.submit(str(tmp_path / "after-stop"), None)
    assert preparer._queued == {}


def test_a_prepared_log_opens_as_new_and_appends_without_making_anything(tmp_path):
    manager = LogManager(str(tmp_path))
    manager.preparer = LogPreparer(threads=2)
    topic_id = uuid.uuid4()
    try:
        manager.prepare("ahead", 0, topic_id)
        wait_until(lambda: manager.preparer.made == 1, "the directory made")
        log = manager.open("ahead", 0, LogConfig(), topic_id=topic_id, defer_directory=True)
        assert log.created and log.directory_made and log.topic_id == topic_id
        log.append(bytearray(build_batch([Record(offset_delta=0, value=b"first")], partition_leader_epoch=2)),
                   leader_epoch=2)
        log.flush()
        assert sorted(os.listdir(tmp_path / "ahead-0")) == ["00000000000000000000.log", "leader-epoch-checkpoint",
                                                           "partition.metadata"]
        manager.prepare("ahead", 0, topic_id)  # open already: nothing to make
        manager.prepare("ahead", 1, topic_id)
        assert manager.holds("ahead", 0) and manager.holds("ahead", 1) and not manager.holds("ahead", 2)
        manager.forget("ahead", 1)  # deleted before its first use: made or not, renamed away
        assert not manager.holds("ahead", 1)
        assert not (tmp_path / "ahead-1").exists()
    finally:
        manager.preparer.stop()
    manager.close()
    reopened = LogManager(str(tmp_path))
    again = reopened.open("ahead", 0, LogConfig(), topic_id=topic_id, defer_directory=True)
    assert (again.log_end_offset, again.topic_id, again.leader_epochs.latest_epoch) == (1, topic_id, 2)
    reopened.close()


@pytest.mark.parametrize("partitions", [50])
def test_a_broker_makes_a_new_topic_s_directories_ahead_and_serves_them(partitions):
    with running_broker() as running:
        answer = call(running.port, "CreateTopics", 7, request("CreateTopics", timeout_ms=10_000, topics=[
            request("CreateTopics").CreatableTopic(name="ahead", num_partitions=partitions, replication_factor=1)]))
        assert answer.topics[0].error_code == 0
        preparer = running.broker.logs.preparer
        wait_until(lambda: preparer.made == partitions, f"{partitions} directories made")
        data = request("Produce").TopicProduceData
        for index in range(partitions):
            records = bytearray(build_batch([Record(offset_delta=0, value=b"v%d" % index)]))
            produced = call(running.port, "Produce", 9, request("Produce", acks=-1, timeout_ms=5000, topic_data=[
                data(name="ahead", partition_data=[data.PartitionProduceData(index=index, records=records)])]))
            assert produced.responses[0].partition_responses[0].error_code == 0
        for index in range(partitions):
            log = running.broker.partition("ahead", index).log
            assert (log.log_end_offset, log.recovery_point) == (1, 1)
