"""The broker's one HTTP stack: hypercorn's trio worker serving ASGI applications (metrics, health and
readiness, and the web console; the schema registry) on the broker's own event loop (server.py)."""

LISTENER = "HTTP"  # the bound sockets' name among a node's listeners (``metrics.port``)
