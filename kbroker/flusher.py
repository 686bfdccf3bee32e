"""One thread that runs the broker's fsyncs, many at a time, and reports back to trio.

Handing each fsync to a fresh ``trio.to_thread`` call costs a thread wake-up
and a GIL hand-over per partition per flush; under a steady load of small
acks=all produces that was a third of the event loop's time. Here every
flush job queued while the thread was busy is run in one go, and one call
back into trio delivers all their results.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import trio

logger = logging.getLogger("kbroker.flusher")

Done = Callable[[object, BaseException | None], None]  # (job, error), called in the trio thread


class Flusher:
    def __init__(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        self._pending: list[tuple[object, Done]] = []
        self._wake = threading.Condition()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="kbroker-flusher", daemon=True)
        self._thread.start()

    def submit(self, job, done: Done) -> None:
        """Run ``job.run()`` on the flusher thread; ``done(job, error)`` follows in the trio thread."""
        with self._wake:
            self._pending.append((job, done))
            self._wake.notify()

    def stop(self) -> None:
        """Finish what was submitted, then end the thread (its results are dropped once trio has gone)."""
        with self._wake:
            self._stopping = True
            self._wake.notify()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._pending and not self._stopping:
                    self._wake.wait()
                batch, self._pending = self._pending, []
                if not batch and self._stopping:
                    return
            results = []
            for job, done in batch:
                try:
                    job.run()
                    results.append((job, done, None))
                except BaseException as error:  # an fsync failure is the waiters' to report
                    logger.error("fsync failed: %s", error)
                    results.append((job, done, error))
            try:
                self._token.run_sync_soon(_deliver, results)
            except trio.RunFinishedError:
                return


def _deliver(results) -> None:
    for job, done, error in results:
        done(job, error)
