"""Release 0.1.0's single-node metadata log becomes the one-voter quorum's log (kbroker/controller/upgrade.py):
the same image, and a start after a crash at any step of the carrying over ends in the same place."""

from __future__ import annotations

import os
import tarfile

import pytest

from kbroker.controller import upgrade
from kbroker.controller.state import MetadataState
from kbroker.raft.store import RaftStore
from tests.fixtures import make_data_directory as fixture

ARCHIVE = os.path.join(os.path.dirname(fixture.__file__), "data_directory_0.1.0.tar.gz")


@pytest.fixture
def metadata_directory(tmp_path) -> str:
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(tmp_path, filter="data")
    return str(tmp_path / "kbroker-data" / "__cluster_metadata-0")


def _image(directory: str):
    store = RaftStore(directory)
    try:
        epoch, voted_for, snapshot, entries = store.load()
    finally:
        store.close()
    assert (epoch, voted_for, entries) == (0, None, [])
    state = MetadataState("cluster")
    state.load_snapshot(snapshot.data)
    return state.image


def _assert_release_content(image) -> None:
    assert len(image.topics[fixture.ORDERS].partitions) == 3
    assert {name: image.topics[fixture.ORDERS].configs[name] for name in fixture.ORDERS_CONFIGS} == fixture.ORDERS_CONFIGS
    assert image.topics[fixture.COMPACTED].configs["cleanup.policy"] == "compact"
    assert {"__consumer_offsets", "__transaction_state"} <= image.topics.keys()
    assert [user for user, _ in image.scram_credentials] == [fixture.SCRAM_USER]
    assert image.broker_configs["1"] == {fixture.DYNAMIC_CONFIG[0]: fixture.DYNAMIC_CONFIG[1]}
    assert image.next_producer_id > 0


def test_the_old_log_becomes_a_snapshot_of_the_same_image(metadata_directory):
    upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    _assert_release_content(_image(metadata_directory))
    assert sorted(os.listdir(os.path.dirname(metadata_directory))).count("__cluster_metadata-0") == 1
    assert not any(name.endswith((upgrade.UPGRADING, upgrade.REPLACED))
                   for name in os.listdir(os.path.dirname(metadata_directory)))
    upgrade.upgrade_single_node_log(metadata_directory, "cluster")  # a quorum's log: nothing to do
    _assert_release_content(_image(metadata_directory))


def test_a_new_directory_is_left_alone(tmp_path):
    upgrade.upgrade_single_node_log(str(tmp_path / "__cluster_metadata-0"), "cluster")
    assert os.listdir(tmp_path) == []


def test_a_crash_while_building_builds_again(metadata_directory, monkeypatch):
    def crash(*_):
        raise KeyboardInterrupt("the process dies before the old log is renamed away")

    with monkeypatch.context() as patched:
        patched.setattr(upgrade.os, "rename", crash)
        with pytest.raises(KeyboardInterrupt):
            upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    assert os.path.isdir(metadata_directory + upgrade.UPGRADING)
    upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    _assert_release_content(_image(metadata_directory))
    assert not os.path.exists(metadata_directory + upgrade.UPGRADING)


def test_a_crash_between_the_renames_finishes_them(metadata_directory, monkeypatch):
    def crash(*_):
        raise KeyboardInterrupt("the process dies with the old log renamed away, the new one not in place")

    with monkeypatch.context() as patched:
        patched.setattr(upgrade, "_finish", crash)
        with pytest.raises(KeyboardInterrupt):
            upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    assert not os.path.exists(metadata_directory)
    upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    _assert_release_content(_image(metadata_directory))
    assert not os.path.exists(metadata_directory + upgrade.REPLACED)


def test_a_crash_before_the_old_log_is_deleted_deletes_it(metadata_directory, monkeypatch):
    with monkeypatch.context() as patched:
        patched.setattr(upgrade.shutil, "rmtree", lambda path: None)
        upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    assert os.path.isdir(metadata_directory + upgrade.REPLACED)
    upgrade.upgrade_single_node_log(metadata_directory, "cluster")
    assert not os.path.exists(metadata_directory + upgrade.REPLACED)
    _assert_release_content(_image(metadata_directory))
