"""What the tests and the benchmarks share (not installed): kbroker processes and clusters on loopback
(``broker_process``, ``quorum_process``, ``secure_broker``), a fault-injecting proxy between nodes
(``link_proxy``), raw Kafka requests over a socket (``raw_client``), consumer-group members as processes
(``group_member``), and the bridge to the independent ``kio`` codec (``kio_bridge``)."""
