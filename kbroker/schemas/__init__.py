"""The schema registry: Confluent's REST API served by the broker over the ``_schemas`` topic. The
pure parts parse schemas of each type (types.py) and decide compatibility between them
(compatibility.py); the registry's state and rules (registry.py) sit under the store that reads and
writes the topic (store.py) and the API (api.py)."""
