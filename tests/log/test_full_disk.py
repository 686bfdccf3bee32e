"""A full disk under the log (issue 26): every write a log makes fails for space in its turn, injected
where the log calls the operating system, and the log is left as if the append had not been tried: no
partial batch, an epoch's checkpoint written by a later flush, indexes that catch up, appends that go on once
there is room. A restart's recovery on a full disk keeps rebuilt indexes in memory.
The broker-level cycle on a real full filesystem is compat_tests/test_disk_full.py."""

from __future__ import annotations

import errno
import os
from types import SimpleNamespace

import pytest

from kbroker.log import index as index_module
from kbroker.log import segment as segment_module
from kbroker.log.config import LogConfig
from kbroker.log.free_space import FreeSpace
from kbroker.log.manager import LogManager
from kbroker.log.partition_log import Log, WriteBeforeFsyncFailed
from kbroker.wire.records import Record, build_batch, iter_batches

FULL = OSError(errno.ENOSPC, "No space left on device")


def batch(value: bytes = b"v" * 100) -> bytearray:
    return bytearray(build_batch([Record(value=value)]))


def failing_write(monkeypatch, module, *, after_bytes: int):
    """Make ``module``'s os.write write at most ``after_bytes`` more bytes, then fail for space."""
    real_write = os.write
    budget = [after_bytes]

    def write(descriptor, data):
        if budget[0] <= 0:
            raise FULL
        written = real_write(descriptor, bytes(data)[:budget[0]])
        budget[0] -= written
        return written

    monkeypatch.setattr(module.os, "write", write)


def test_an_append_cut_off_by_a_full_disk_leaves_no_partial_batch(tmp_path, monkeypatch):
    log = Log.open(str(tmp_path / "p-0"), LogConfig())
    log.append(batch(), leader_epoch=3)
    size = os.path.getsize(log.active_segment.log_path)
    failing_write(monkeypatch, segment_module, after_bytes=40)  # part of the next batch's header
    with pytest.raises(OSError) as raised:
        log.append(batch(), leader_epoch=4)
    assert raised.value.errno == errno.ENOSPC
    assert log.log_end_offset == 1 and os.path.getsize(log.active_segment.log_path) == size
    monkeypatch.undo()
    assert log.append(batch(), leader_epoch=4).first_offset == 1  # room again: the log goes on
    log.close()
    reopened = Log.open(str(tmp_path / "p-0"), LogConfig())
    assert [header.base_offset for _, header in iter_batches(memoryview(reopened.read(0, 1 << 20).read()))] == [0, 1]
    reopened.close()


def test_an_epoch_whose_checkpoint_cannot_be_written_fails_its_flush_before_any_fsync(tmp_path, monkeypatch):
    """A new epoch's checkpoint is written by the log's next flush (LeaderEpochCache.write_later): a full
    disk fails that flush before its fsyncs (nothing written before is in doubt, and the partition's
    owner does not take the directory offline for it), and the next flush writes it."""
    manager = LogManager(str(tmp_path))
    log = manager.open("p", 0, LogConfig())
    log.append(batch(), leader_epoch=3)
    log.flush()
    epochs = log.leader_epochs
    log.append(batch(), leader_epoch=4)
    assert [entry.epoch for entry in epochs.entries] == [3, 4]  # in memory at once
    real_write = epochs.checkpoint_file.write
    monkeypatch.setattr(epochs.checkpoint_file, "write", lambda *arguments: (_ for _ in ()).throw(FULL))
    with pytest.raises(WriteBeforeFsyncFailed) as failed:
        log.flush()
    assert failed.value.errno == errno.ENOSPC and log.recovery_point == 1
    monkeypatch.setattr(epochs.checkpoint_file, "write", real_write)
    log.flush()
    assert log.recovery_point == 2 and epochs.unsynced_writes == 0
    assert [entry.epoch for entry in epochs.checkpoint_file.read()] == [3, 4]
    manager.close()


def test_index_entries_that_cannot_be_written_catch_up_where_they_stopped(tmp_path, monkeypatch):
    index = index_module.OffsetIndex(str(tmp_path / "0.index"), 0, 1 << 20)
    index.append(1, 100)
    index.append(2, 200)
    failing_write(monkeypatch, index_module, after_bytes=3)  # part of one entry
    with pytest.raises(OSError):
        index.write_pending()
    index.flush()  # a flush on a full disk syncs what was written, and raises nothing
    monkeypatch.undo()
    index.flush()
    index.close()
    reloaded = index_module.OffsetIndex(str(tmp_path / "0.index"), 0, 1 << 20)
    assert reloaded.entries == 2 and reloaded.lookup(2) == (2, 200)


def test_a_recovery_on_a_full_disk_keeps_its_rebuilt_indexes_in_memory(tmp_path, monkeypatch, caplog):
    directory = str(tmp_path / "p-0")
    log = Log.open(directory, LogConfig(index_interval_bytes=1))
    for _ in range(5):
        log.append(batch())
    log.close()
    index_path = log.active_segment.offset_index.path
    real_open = index_module.open_file

    def open_file(path, mode="rb", *arguments, **keywords):
        if "w" in mode:
            raise FULL
        return real_open(path, mode, *arguments, **keywords)

    monkeypatch.setattr(index_module, "open_file", open_file)
    recovered = Log.open(directory, LogConfig(index_interval_bytes=1), recovery_point=0)  # rebuilds the indexes
    assert "kept in memory" in caplog.text
    assert not os.path.exists(index_path)  # no start will trust a file the rebuild could not write
    assert recovered.log_end_offset == 5
    assert [header.base_offset for _, header in iter_batches(memoryview(recovered.read(3, 1 << 20).read()))] == [3, 4]
    monkeypatch.undo()
    recovered.close()


def test_free_space_refuses_what_would_eat_into_the_floor():
    free = [10_000_000]
    clock = [0.0]
    space = FreeSpace("/data", 4_000_000, interval_s=1.0, clock=lambda: clock[0],
                      statvfs=lambda path: SimpleNamespace(f_bavail=free[0] // 1000, f_frsize=1000))
    space.claim(5_000_000)
    with pytest.raises(OSError) as raised:
        space.claim(1_500_000)  # 5 MB left by the count since the last ask
    assert raised.value.errno == errno.ENOSPC and "log.dir.min.free.bytes=4000000" in str(raised.value)
    free[0] = 20_000_000  # space freed: seen at the next ask
    clock[0] += 1.0
    space.claim(1_500_000)
    assert FreeSpace("/data", 0, statvfs=None).claim(10**12) is None  # 0: no floor, and no ask


def test_checkpoints_that_cannot_be_written_wait_for_space(tmp_path, monkeypatch, caplog):
    manager = LogManager(str(tmp_path))
    log = manager.open("p", 0, LogConfig())
    log.append(batch())
    log.flush()
    manager.checkpoint()
    written = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    log.append(batch())
    log.flush()
    monkeypatch.setattr(os, "replace", lambda source, destination: (_ for _ in ()).throw(FULL))
    manager.checkpoint()  # no exception: a restart recovers from the last checkpoint
    assert "not written" in caplog.text
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == written
    monkeypatch.undo()
    manager.checkpoint()
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() != written
    manager.close()
