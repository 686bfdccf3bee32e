"""Partitions on this broker and their copies on others: the leader's append and read (``replica``),
followers fetching from leaders (``fetcher``), the in-sync replica set (``isr``), group commit of
fsyncs (``flusher``), and retention and compaction (``log_maintenance``)."""
