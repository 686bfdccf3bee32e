"""The broker's one HTTP stack: hypercorn's trio worker serving ASGI applications (the schema registry;
metrics, health and the console to follow) on the broker's own event loop."""
