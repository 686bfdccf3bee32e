"""Share groups (KIP-932, Queues for Kafka): records of a topic-partition handed out one by one to the
members of a share group, each acknowledged, released or rejected, redelivered when a lock runs out.

A sans-IO core, as the group coordinator's (DESIGN.md; STYLE.md, "Sans-IO cores"):

``in_flight``   the records between a share-partition's start and end offsets, as ranges of one state each.
``partition``   one share-partition (one group, one topic-partition, kept by the partition's leader):
                acquisition, acknowledgement, acquisition locks, members leaving, the start offset; each
                change counts only once its write to the share coordinator is durable (rule 11).
``persisted``   what the share coordinator keeps (Read/WriteShareGroupState's shapes), the writes a
                share-partition asks for and how their failures are answered.
"""
