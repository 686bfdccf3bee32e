"""Transactions: the transaction coordinator over ``__transaction_state`` and the
partition side of transactions (markers).

A sans-IO core in a thin trio shell, as the group coordinator (kbroker/group):

``records``      Kafka's key/value record formats in ``__transaction_state``.
``metadata``     one transactional id's state and the moves it may make, with
                 Kafka's epoch rules (fencing, transaction version 2 bumps).
``coordinator``  every transactional id of the partitions this broker leads:
                 InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
                 timeouts, expiry, DescribeTransactions and ListTransactions;
                 no I/O, time comes in as ``now_ms``.
``shell``        the trio driver (kbroker/coordinator_runtime.py): persists the
                 records, answers once they are durable, writes the markers.
``markers``      the partition leader's side of WriteTxnMarkers: COMMIT/ABORT
                 control batches through the log's producer state.

A transaction's decision (PrepareCommit/PrepareAbort) is durable before the
producer hears of it and before any marker is written; a coordinator that
restarts finds it and writes the markers again. The first transactional batch
a partition takes from a producer is checked with the coordinator first
(KIP-890 part 1, kbroker/handlers/produce.py).
"""
