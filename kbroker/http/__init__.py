"""The broker's one HTTP stack: hypercorn's trio worker serving ASGI applications (metrics, health and
readiness; the schema registry; the console to follow) on the broker's own event loop (server.py)."""
