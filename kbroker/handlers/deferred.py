"""An answer that waits: the response, and what must happen before it may be sent."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Deferred:
    """A response to send only once ``ready()`` (a coroutine function) has returned.

    The connection goes on reading and handling the requests behind it
    meanwhile, and responses still leave in request order: produce requests
    waiting for their fsync share one instead of taking turns.
    """

    response: object
    ready: object  # async () -> None
