"""The web console at ``/`` on the broker's HTTP port: the cluster, topics, messages and groups, read from the
broker's own state, and changed through its own Kafka listener as the signed-in user (app.py says how)."""
