"""A confluent-kafka ShareConsumer in a process of its own, for tests that kill or stop it while it holds
records: ``python -m compat_tests.share_worker BOOTSTRAP GROUP TOPIC``.

It joins the share group in explicit acknowledgement mode, prints one JSON line per record it receives
(``{"offset": .., "delivery_count": ..}``) and acknowledges nothing: it keeps what it acquired until it is
killed (the records go back when its connection closes) or stopped (they go back when their acquisition
locks run out). It exits after 60 s at most.
"""

from __future__ import annotations

import json
import sys
import time

from confluent_kafka import ShareConsumer

_LIFETIME_S = 60


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    deadline = time.monotonic() + _LIFETIME_S
    while time.monotonic() < deadline:
        messages = consumer.poll(0.5)
        for message in messages:
            if message.error() is None:
                print(json.dumps({"offset": message.offset(), "delivery_count": message.delivery_count()}),
                      flush=True)
        if messages:
            break  # holds them: polling again would need them acknowledged first
    time.sleep(max(0.0, deadline - time.monotonic()))


if __name__ == "__main__":
    main()
