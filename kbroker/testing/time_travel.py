"""Time on demand: move a test broker's clock ahead, and what falls due meanwhile happens at once.

A test broker runs on an ``OffsetClock`` (kbroker/log/clock.py): the host's clocks plus an offset that only
grows. Everything Kafka decides by its ``Time`` reads that clock (kbroker/log/clock.py names the parts), so
moving it ahead by an hour is, for the broker, an hour gone by; the clients' own timers, the sockets and
the broker's liveness in its quorum keep real time. What waits for a deadline on that clock sleeps in
trio meanwhile, so :func:`advance` wakes each part and waits for what that led to:

- the group coordinator: classic members' session and rebalance timeouts, KIP-848 and share members'
  sessions, committed offsets past ``offsets.retention.minutes``;
- the transaction coordinator: transactions open past their ``transaction.timeout.ms`` aborted (their
  producer fenced, the markers written), transactional ids idle past ``transactional.id.expiration.ms``;
- the logs: producer ids idle past ``producer.id.expiration.ms``, retention by ``retention.ms`` (and
  ``retention.bytes``), the descriptors of deleted segments closed after ``file.delete.delay.ms``, and a
  compaction round;
- share groups: records whose acquisition lock (``group.share.record.lock.duration.ms``) ran out released.

Each periodic check runs at the new time whatever its interval (Kafka looks for timed-out transactions every
``transaction.abort.timed.out.transaction.cleanup.interval.ms``, for old segments every
``log.retention.check.interval.ms``): moving the clock past a timeout is enough.

The clients keep real time, as clients of a Kafka broker whose clock runs ahead would: a record a client
stamps (CreateTime) looks, to the broker, as old as the clock was moved, and retention and producer-id expiry
count its age from that stamp. To age records from the moment they were written, give the topic
``message.timestamp.type=LogAppendTime``: the broker stamps them with its own (moved) clock.
"""

from __future__ import annotations

_WAIT_S = 30.0  # the longest advance() waits for what fell due to be done (markers, writes, fsyncs)


async def advance(broker, ms: int) -> None:
    """Move ``broker``'s clock ``ms`` milliseconds ahead and carry out what is due by then; returns once done.
    Call in the broker's trio thread (``RunningBroker.advance_time`` does). The broker must run on a clock
    that can move (an ``OffsetClock``, as test brokers do, or a ``FakeClock``)."""
    clock = broker.clock
    if not hasattr(clock, "advance"):
        raise TypeError(f"the broker runs on {clock!r}, which cannot be moved: give it clock=OffsetClock() "
                        "(kbroker.log.clock), as running_broker does")
    clock.advance(ms)
    # Twice: what the first round finished may have set timers due at once (a transaction's completion
    # written again, a group emptied by an expired member that now has offsets to expire).
    for _ in range(2):
        await broker.maintenance.run_due_now()
        for runtime in (broker.groups, broker.transactions, broker.share_states):
            await runtime.run_due_now(_WAIT_S)
        await broker.share_partitions.expire_locks_now(_WAIT_S)
