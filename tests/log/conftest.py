import os

import pytest


@pytest.fixture
def durability_events(monkeypatch):
    """Records fsyncs (and whether of a directory) and renames, in order, while letting them happen."""
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor):
        events.append(("fsync", os.path.isdir(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    def replace(source, destination):
        events.append(("replace", os.path.basename(source), os.path.basename(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events
