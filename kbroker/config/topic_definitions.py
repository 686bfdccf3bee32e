"""Every topic config Kafka 4.4 has (its LogConfig), with the type and rules of the topic's own definition,
plus Confluent Server's two schema validation configs, which kbroker acts on.

A topic config's default comes from its broker synonym where it has one (``TOPIC_CONFIG_SYNONYMS``); the
``default`` here is used only by the configs that have none (the throttled replicas, remote storage's
switches, errors.deadletterqueue.group.enable). The rules are the topic's, which are sometimes stricter
than its broker synonym's: ``segment.ms`` at least 1 where ``log.roll.ms`` has no bound, ``retention.ms``
at least -1, ``flush.ms`` at least 0.

Configs marked ``used=False`` are accepted, checked and described as Kafka does, and change nothing
(docs/kafka-differences.md, "Settings accepted without effect"). ``internal.segment.bytes`` is Kafka's
internal config for tests (a segment size below ``segment.bytes``' 1 MiB floor): accepted and applied,
and described only where a topic sets it, as in Kafka.
"""

from __future__ import annotations

import re

from kbroker.config.definitions import (AtLeast, Between, GzipLevel, ListOf, OneOf, Setting, TOPIC_CONFIG_SYNONYMS,
                                        SETTINGS_BY_NAME)
from kbroker.topics import INTERNAL_SEGMENT_BYTES

LONG_MAX = 2**63 - 1
_REPLICA = re.compile(r"[0-9]+:[0-9]+")


class ThrottledReplicas:
    """Kafka's ThrottledReplicaListValidator: ``*`` or partition:broker entries."""

    def __call__(self, value) -> bool:
        return tuple(value) == ("*",) or all(_REPLICA.fullmatch(item) for item in value)

    def __str__(self) -> str:
        return "the literal '*' or a list of replicas as [partitionId]:[brokerId],[partitionId]:[brokerId],..."


_S = Setting
_NONE = "not read: kbroker has no tiered storage"
TOPIC_SETTINGS: dict[str, Setting] = {setting.name: setting for setting in (
    _S("segment.bytes", "int", 1024**3, "Largest segment file of the partition's log.", AtLeast(1024 * 1024)),
    _S("segment.ms", "long", 7 * 24 * 3600 * 1000, "A new segment is rolled after this long.", AtLeast(1)),
    _S("segment.jitter.ms", "long", 0, "Random jitter subtracted from segment.ms.", AtLeast(0)),
    _S("segment.index.bytes", "int", 10 * 1024**2, "Largest offset index file.", AtLeast(4)),
    _S("flush.messages", "long", LONG_MAX, "fsync after this many unflushed messages.", AtLeast(1)),
    _S("flush.ms", "long", LONG_MAX, "fsync data older than this.", AtLeast(0)),
    _S("retention.bytes", "long", -1, "Delete old segments beyond this many bytes per partition (-1: no limit)."),
    _S("retention.ms", "long", 7 * 24 * 3600 * 1000, "Delete segments older than this (-1: never).", AtLeast(-1)),
    _S("max.message.bytes", "int", 1024 * 1024 + 12, "Largest record batch accepted.", AtLeast(0)),
    _S("index.interval.bytes", "int", 4096, "Bytes between offset index entries.", AtLeast(0)),
    _S("delete.retention.ms", "long", 24 * 3600 * 1000, "How long tombstones survive compaction.", AtLeast(0)),
    _S("min.compaction.lag.ms", "long", 0, "Records stay uncompacted at least this long.", AtLeast(0)),
    _S("max.compaction.lag.ms", "long", LONG_MAX, "Records become compactable at most this late.", AtLeast(1)),
    _S("file.delete.delay.ms", "long", 60000, "Wait before deleting a retired segment's files.", AtLeast(0)),
    _S("min.cleanable.dirty.ratio", "double", 0.5, "Dirty share of the log that makes it worth cleaning.",
       Between(0, 1)),
    _S("cleanup.policy", "list", ("delete",), "What happens to old segments: delete, compact or both.",
       ListOf("compact", "delete")),
    _S("unclean.leader.election.enable", "bool", False, "Let an out-of-sync replica become leader; not read: "
       "leaders come from the ISR only.", used=False),
    _S("min.insync.replicas", "int", 1, "Fewest in-sync replicas an acks=all produce needs.", AtLeast(1)),
    _S("compression.type", "string", "producer", "Compression of the topic's batches; producer: the "
       "producer's.", OneOf("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    _S("compression.gzip.level", "int", -1, "gzip level when the broker compresses; not read.", GzipLevel(),
       used=False),
    _S("compression.lz4.level", "int", 9, "lz4 level when the broker compresses; not read.", Between(1, 17),
       used=False),
    _S("compression.zstd.level", "int", 3, "zstd level when the broker compresses; not read.",
       Between(-131072, 22), used=False),
    _S("preallocate", "bool", False, "Preallocate segment files; not done here.", used=False),
    _S("message.timestamp.type", "string", "CreateTime", "Record timestamps: the producer's or the append time.",
       OneOf("CreateTime", "LogAppendTime")),
    _S("message.timestamp.before.max.ms", "long", LONG_MAX, "How far in the past a CreateTime timestamp may be.",
       AtLeast(0)),
    _S("message.timestamp.after.max.ms", "long", 3_600_000, "How far in the future a CreateTime timestamp may be.",
       AtLeast(0)),
    _S("leader.replication.throttled.replicas", "list", (), "Replicas whose leader side is throttled; not read: "
       "kbroker has no replication throttle.", ThrottledReplicas(), used=False),
    _S("follower.replication.throttled.replicas", "list", (), "Replicas whose follower side is throttled; not "
       "read.", ThrottledReplicas(), used=False),
    _S("remote.storage.enable", "bool", False, f"Tiered storage for the topic; {_NONE}, so true is refused, as "
       "by a Kafka whose tiered storage is off.", used=False),
    _S("local.retention.ms", "long", -2, f"Local retention time under tiered storage; {_NONE}.", AtLeast(-2),
       used=False),
    _S("local.retention.bytes", "long", -2, f"Local retention size under tiered storage; {_NONE}.", AtLeast(-2),
       used=False),
    _S("remote.log.copy.disable", "bool", False, f"Stop copying to tiered storage; {_NONE}.", used=False),
    _S("remote.copy.lag.ms", "long", 0, f"Delay before a segment is copied to tiered storage; {_NONE}.",
       AtLeast(-1), used=False),
    _S("remote.copy.lag.bytes", "long", -1, f"Bytes held back from tiered storage; {_NONE}.", AtLeast(-1),
       used=False),
    _S("remote.log.delete.on.disable", "bool", False, f"Delete remote data when tiered storage is turned off; "
       f"{_NONE}.", used=False),
    _S("max.decompressed.message.bytes", "int", 2147483639, "Largest decompressed size of a batch the broker "
       "decompresses; not read.", AtLeast(1), used=False),
    _S("errors.deadletterqueue.group.enable", "bool", False, "Share groups' dead letter queue for the topic; "
       "not read: kbroker's share groups have none.", used=False),
    _S("confluent.value.schema.validation", "bool", False, "Confluent Server's: refuse records whose value does "
       "not name a schema of the topic's subject in the schema registry."),
    _S("confluent.key.schema.validation", "bool", False, "Confluent Server's: the same for record keys."),
)}
# Accepted, and described only where a topic sets one (Kafka's defineInternal).
INTERNAL_TOPIC_SETTINGS: dict[str, Setting] = {
    INTERNAL_SEGMENT_BYTES: _S(INTERNAL_SEGMENT_BYTES, "int", None, "Kafka's segment size for tests, below "
                               "segment.bytes' floor.", AtLeast(14)),
}
TOPIC_CONFIG_NAMES: frozenset[str] = frozenset(TOPIC_SETTINGS) | frozenset(INTERNAL_TOPIC_SETTINGS)

assert set(TOPIC_CONFIG_SYNONYMS) <= set(TOPIC_SETTINGS)
assert all(TOPIC_SETTINGS[topic].type == SETTINGS_BY_NAME[synonyms[0][0]].type
           for topic, synonyms in TOPIC_CONFIG_SYNONYMS.items())


def topic_setting(name: str) -> Setting:
    """The definition of topic config ``name`` (KeyError for a name that is none)."""
    return TOPIC_SETTINGS.get(name) or INTERNAL_TOPIC_SETTINGS[name]


def topic_only_default(name: str):
    """The default of a topic config with no broker synonym (None for one that has a synonym)."""
    return None if name in TOPIC_CONFIG_SYNONYMS else topic_setting(name).default
