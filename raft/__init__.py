"""Raft consensus as a pure state machine (lands with the raft issue)."""
