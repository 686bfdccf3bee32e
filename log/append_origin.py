"""Where an append comes from, which decides what the log does with it (Kafka's AppendOrigin).

- ``CLIENT``: a producer's batches, appended by the partition's leader. The log stamps the
  offsets (and the leader epoch, and LogAppendTime when the topic asks for it) and the producer
  state checks everything: duplicates, sequence numbers, epochs, transaction state. What Kafka's
  LogValidator checks of the batch itself (one batch, its size and codec, keys on a compacted
  topic, timestamp bounds) is :func:`kbroker.log.validator.validate_produce`'s, which the Produce
  handler runs first and whose headers it hands to the append.
- ``COORDINATOR``: the broker's own writes as leader, from the group and transaction coordinators
  (their records and the transaction markers). Offsets stamped as for a client; the producer
  state checks epochs and transaction state only, since these batches carry no sequence numbers.
- ``REPLICATION``: batches that already have their offsets and leader epochs, which the log keeps
  (they must continue it): a follower copying its leader, and the Raft store writing the entries
  its core numbered. Kafka's Raft leader appends with a RAFT_LEADER origin that has the log assign
  offsets; ours numbers the entries in the Raft core, leader and follower alike, so the store's
  appends are replication's. The producer state is updated, never asked: the leader decided.

Every origin's raw bytes have their headers and CRC-32C checked by the append; only the
validator's already checked batches skip that.
"""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"

    @property
    def assigns_offsets(self) -> bool:
        """The log stamps base offsets (and leader epoch, LogAppendTime); else the batches keep theirs."""
        return self is not AppendOrigin.REPLICATION

    @property
    def checks_producer_state(self) -> bool:
        """Epochs and transaction state are checked before the append (a leader's decision)."""
        return self is not AppendOrigin.REPLICATION

    @property
    def checks_sequences(self) -> bool:
        """Sequence numbers and duplicates are checked too: only a producer's batches carry them."""
        return self is AppendOrigin.CLIENT
