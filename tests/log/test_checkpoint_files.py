"""Checkpoint files: atomic replacement and Kafka's text formats, byte for byte."""

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kbroker.log.checkpoint as checkpoint
from kbroker.log.checkpoint import (
    CheckpointError,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    PartitionMetadataFile,
    kafka_uuid_string,
    parse_kafka_uuid,
    write_atomically,
)

# --- write_atomically ------------------------------------------------------------


def test_write_atomically_creates_and_replaces(tmp_path):
    path = tmp_path / "state"
    write_atomically(path, b"first")
    assert path.read_bytes() == b"first"
    write_atomically(str(path), b"second, longer")
    assert path.read_bytes() == b"second, longer"
    assert sorted(os.listdir(tmp_path)) == ["state"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc to tell a directory descriptor")
def test_write_atomically_syncs_data_then_renames_then_syncs_directory(tmp_path, durability_events):
    events = durability_events
    write_atomically(tmp_path / "state", b"data")
    assert events == [("fsync", False), ("replace", "state.tmp", "state"), ("fsync", True)]


def test_failed_write_leaves_old_content_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "state"
    write_atomically(path, b"old")

    def failing_fsync(descriptor):
        raise OSError(5, "simulated I/O error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="simulated"):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert not (tmp_path / "state.tmp").exists()


def test_failed_rename_leaves_old_content_and_no_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "state"
    write_atomically(path, b"old")

    def failing_replace(source, destination):
        raise OSError(28, "No space left on device")  # a directory that must grow, on a full disk

    monkeypatch.setattr(os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert not (tmp_path / "state.tmp").exists()


def test_stray_temporary_file_from_interrupted_write_is_ignored(tmp_path):
    path = tmp_path / checkpoint.RECOVERY_POINT_CHECKPOINT
    offsets = OffsetCheckpointFile(path)
    offsets.write({("orders", 0): 42})
    # A crash after writing half of the next version's temporary file.
    (tmp_path / (checkpoint.RECOVERY_POINT_CHECKPOINT + ".tmp")).write_bytes(b"0\n3\norders 0 9")
    assert offsets.read() == {("orders", 0): 42}
    offsets.write({("orders", 0): 43})  # and the next write simply overwrites it
    assert offsets.read() == {("orders", 0): 43}
    assert not (tmp_path / (checkpoint.RECOVERY_POINT_CHECKPOINT + ".tmp")).exists()


def test_killed_writer_always_leaves_a_whole_file(tmp_path):
    """SIGKILL a process that rewrites a checkpoint in a loop: every survivor is whole."""
    path = tmp_path / "replication-offset-checkpoint"
    contents = {
        version: {(f"topic-{index}", index % 7): version * 1000 + index for index in range(200)}
        for version in range(2)
    }
    OffsetCheckpointFile(path).write(contents[0])
    program = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.getcwd()!r})
        from kbroker.log.checkpoint import OffsetCheckpointFile
        contents = {contents!r}
        file = OffsetCheckpointFile({str(path)!r})
        print("ready", flush=True)
        version = 0
        while True:
            version ^= 1
            file.write(contents[version])
        """
    )
    for round_number in range(4):
        writer = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE)
        assert writer.stdout.readline() == b"ready\n"
        time.sleep(0.02 + 0.03 * round_number)
        writer.send_signal(signal.SIGKILL)
        writer.wait()
        writer.stdout.close()
        assert OffsetCheckpointFile(path).read() in (contents[0], contents[1])


# --- OffsetCheckpointFile ------------------------------------------------------------


def test_offset_checkpoint_writes_kafka_format(tmp_path):
    path = tmp_path / "recovery-point-offset-checkpoint"
    OffsetCheckpointFile(path).write({("b-topic", 1): 7, ("a.topic", 0): 0, ("b-topic", 0): 2**63 - 1})
    assert path.read_bytes() == b"0\n3\na.topic 0 0\nb-topic 0 9223372036854775807\nb-topic 1 7\n"


def test_offset_checkpoint_round_trip_and_empty(tmp_path):
    file = OffsetCheckpointFile(tmp_path / "log-start-offset-checkpoint")
    file.write({})
    assert (tmp_path / "log-start-offset-checkpoint").read_bytes() == b"0\n0\n"
    assert file.read() == {}
    offsets = {("__consumer_offsets", 49): 123456789, ("t", 0): 0}
    file.write(offsets)
    assert file.read() == offsets


@given(
    offsets=st.dictionaries(
        st.tuples(
            st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", min_size=1, max_size=249),
            st.integers(0, 2**31 - 1),
        ),
        st.integers(-1, 2**63 - 1),
        max_size=30,
    )
)
@settings(max_examples=60, deadline=None)
def test_offset_checkpoint_round_trip_property(tmp_path_factory, offsets):
    file = OffsetCheckpointFile(tmp_path_factory.mktemp("checkpoint") / "replication-offset-checkpoint")
    file.write(offsets)
    assert file.read() == offsets


def test_offset_checkpoint_missing_empty_and_version_only_have_no_entries(tmp_path):
    path = tmp_path / "cleaner-offset-checkpoint"
    assert OffsetCheckpointFile(path).read() == {}
    path.write_bytes(b"")  # Kafka creates checkpoint files empty before the first write
    assert OffsetCheckpointFile(path).read() == {}
    path.write_bytes(b"0\n")
    assert OffsetCheckpointFile(path).read() == {}


def test_offset_checkpoint_reads_what_kafka_tolerates(tmp_path):
    path = tmp_path / "replication-offset-checkpoint"
    # Kafka splits entries on any run of whitespace; Windows line endings also occur.
    path.write_bytes(b"0\r\n3\r\ntopic\t0  5\r\ntopic 1 +6\r\ntopic 0 9\r\n")
    assert OffsetCheckpointFile(path).read() == {("topic", 0): 9, ("topic", 1): 6}  # the later line wins


@pytest.mark.parametrize(
    ("content", "line_number", "problem"),
    [
        (b"1\n0\n", 1, "unrecognised version 1"),
        (b"zero\n0\n", 1, "not an integer"),
        (b" 0\n0\n", 1, "not an integer"),
        (b"0\nmany\n", 2, "not an integer"),
        (b"0\n2\nt 0 1\n", None, "expected 2 entries but found 1"),
        (b"0\n1\nt 0 1\nt 1 1\n", None, "expected 1 entries but found 2"),
        (b"0\n1\nt 0\n", 3, "expected 'topic partition offset'"),
        (b"0\n1\nt 0 1 2\n", 3, "expected 'topic partition offset'"),
        (b"0\n2\nt 0 1\n\n", 4, "expected 'topic partition offset'"),
        (b"0\n1\nt p 1\n", 3, "not an integer"),
        (b"0\n1\nt 0 1_000\n", 3, "not an integer"),
        (b"0\n1\nt 2147483648 1\n", 3, "integer out of range"),
        (b"0\n1\nt 0 9223372036854775808\n", 3, "integer out of range"),
        (b"0\n1\n\xff 0 1\n", None, "not UTF-8"),
    ],
)
def test_offset_checkpoint_malformed_files_raise_checkpoint_error(tmp_path, content, line_number, problem):
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        OffsetCheckpointFile(path).read()
    assert raised.value.path == str(path)
    assert raised.value.line_number == line_number
    assert problem in raised.value.problem
    assert str(path) in str(raised.value)


def test_offset_checkpoint_refuses_topic_names_it_could_not_read_back(tmp_path):
    file = OffsetCheckpointFile(tmp_path / "recovery-point-offset-checkpoint")
    for topic in ("two words", "", "tab\there"):
        with pytest.raises(ValueError):
            file.write({(topic, 0): 1})
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()


# --- LeaderEpochCheckpointFile ----------------------------------------------------------


def test_leader_epoch_checkpoint_format_and_round_trip(tmp_path):
    path = tmp_path / "leader-epoch-checkpoint"
    file = LeaderEpochCheckpointFile(path)
    file.write([(0, 0), (3, 150), (4, 2**40)])
    assert path.read_bytes() == b"0\n3\n0 0\n3 150\n4 1099511627776\n"
    assert file.read() == [EpochEntry(0, 0), EpochEntry(3, 150), EpochEntry(4, 2**40)]
    file.write([])
    assert path.read_bytes() == b"0\n0\n"
    assert file.read() == []


def test_leader_epoch_checkpoint_missing_is_empty(tmp_path):
    assert LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint").read() == []


@pytest.mark.parametrize(
    ("content", "line_number"),
    [
        (b"0\n1\n5\n", 3),
        (b"0\n1\n5 10 15\n", 3),
        (b"0\n1\nfive 10\n", 3),
        (b"0\n1\n2147483648 10\n", 3),
        (b"0\n1\n5 ten\n", 3),
        (b"7\n0\n", 1),
    ],
)
def test_leader_epoch_checkpoint_malformed(tmp_path, content, line_number):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        LeaderEpochCheckpointFile(path).read()
    assert raised.value.line_number == line_number
    assert f"{path}:{line_number}" in str(raised.value)


# --- Kafka Uuid strings and partition.metadata ---------------------------------------------


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (uuid.UUID(int=0), "AAAAAAAAAAAAAAAAAAAAAA"),  # Uuid.ZERO_UUID
        (uuid.UUID(int=1), "AAAAAAAAAAAAAAAAAAAAAQ"),  # Uuid.METADATA_TOPIC_ID, __cluster_metadata's id
        (uuid.UUID(int=2**128 - 1), "_____________________w"),  # "_" is 63: URL-safe, not "/"
        (uuid.UUID(bytes=bytes([0xFB, 0xEF] + [0] * 14)), "--8AAAAAAAAAAAAAAAAAAA"),  # "-" is 62: URL-safe, not "+"
    ],
)
def test_kafka_uuid_string_known_values(value, text):
    assert kafka_uuid_string(value) == text
    assert parse_kafka_uuid(text) == value


@given(st.binary(min_size=16, max_size=16))
def test_kafka_uuid_string_round_trip(raw):
    value = uuid.UUID(bytes=raw)
    text = kafka_uuid_string(value)
    assert len(text) == 22 and "=" not in text and "+" not in text and "/" not in text
    assert parse_kafka_uuid(text) == value
    assert parse_kafka_uuid(text + "==") == value  # Java's decoder also takes the padded form


@pytest.mark.parametrize(
    "text",
    ["", "AAAA", "AAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAA+A", "AAAAAAAAAAAAAAAAAAAA/A",
     "AAAAAAAAAAAAAAAAAAAAA=", "00000000-0000-0000-0000-000000000001", " AAAAAAAAAAAAAAAAAAAAAQ"],
)
def test_parse_kafka_uuid_rejects_other_strings(text):
    with pytest.raises(ValueError):
        parse_kafka_uuid(text)


def test_partition_metadata_written_exactly_as_kafka_does(tmp_path):
    path = tmp_path / "partition.metadata"
    topic_id = uuid.UUID("6c2ec3e5-1b34-4b2b-9f0e-3c6a6f0f8a11")
    PartitionMetadataFile(path).write(topic_id)
    assert path.read_bytes() == b"version: 0\ntopic_id: " + kafka_uuid_string(topic_id).encode()
    assert path.read_bytes().count(b"\n") == 1  # PartitionMetadata.encode has no final newline
    assert PartitionMetadataFile(path).read() == topic_id


def test_partition_metadata_missing_exists_delete(tmp_path):
    file = PartitionMetadataFile(tmp_path / "partition.metadata")
    assert not file.exists()
    assert file.read() is None
    file.write(uuid.uuid4())
    assert file.exists()
    file.delete()
    assert not file.exists()
    file.delete()  # deleting again is harmless


def test_partition_metadata_accepts_newer_version_and_trailing_newline(tmp_path):
    path = tmp_path / "partition.metadata"
    path.write_bytes(b"version: 1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    assert PartitionMetadataFile(path).read() == uuid.UUID(int=1)


@pytest.mark.parametrize(
    ("content", "line_number"),
    [
        (b"version 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: zero\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: -1\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ", 1),
        (b"version: 0\n", 2),
        (b"version: 0\ntopic_id:AAAAAAAAAAAAAAAAAAAAAQ", 2),
        (b"version: 0\ntopic_id: not-a-uuid", 2),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", 2),  # the zero Uuid
    ],
)
def test_partition_metadata_malformed(tmp_path, content, line_number):
    # An empty file is not malformed but unfinished (a write whose fsync a crash overtook): read() gives None.
    path = tmp_path / "partition.metadata"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        PartitionMetadataFile(path).read()
    assert raised.value.line_number == line_number
    assert raised.value.path == str(path)
