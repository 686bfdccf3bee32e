"""Request handlers: one module per API, each registering its key and version range.

A handler is ``async def handle(broker, request_context, request) -> response``. The registry
(``registry``), answers that wait (``deferred``) and what metadata changes share
(``metadata_change``) are modules of their own; every other module here serves an API and
registers itself when imported, which this package does for all of them.
"""

from __future__ import annotations

from kbroker.handlers.deferred import Deferred
from kbroker.handlers.metadata_change import THROTTLED, admit_mutations, metadata_change
from kbroker.handlers.registry import HANDLERS, Handler, handles, load_handlers
from kbroker.results import mark_not_made  # for the handlers of metadata changes

__all__ = ["Deferred", "HANDLERS", "Handler", "THROTTLED", "admit_mutations", "handles", "mark_not_made",
           "metadata_change"]

load_handlers(__name__, __path__)
