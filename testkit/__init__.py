"""What the tests and the benchmarks share (not installed): kbroker processes and clusters on loopback
(``broker_process``, ``quorum_process``, ``secure_broker``), a fault-injecting proxy between nodes
(``link_proxy``), raw Kafka requests over a socket (``raw_client``), consumer-group members as processes
(``group_member``), the bridge to the independent ``kio`` codec (``kio_bridge``), hosts in network
namespaces partitioned by the kernel's firewall (``netns``, ``nfqueue_delay``, ``netns_cluster``), and the
reference Apache Kafka (``reference_kafka``, its jars through Maven by ``maven`` and ``jvm/pom.xml``)."""
