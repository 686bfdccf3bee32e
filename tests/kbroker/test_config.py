"""Broker configuration: Kafka's names and defaults, sources and precedence, properties syntax, validation."""

import pathlib
import re

import pytest

from kbroker.config import BrokerConfig, ConfigError
from kbroker.config.broker_config import Endpoint, Voter
from kbroker.config.sources import Origin, Source, environment_originals
from kbroker.config.properties import parse_properties
from kbroker.config import definitions as config_definitions
from kbroker.config.definitions import CLUSTER_DEFAULTS, SETTINGS, SETTINGS_BY_NAME, TOPIC_CONFIG_SYNONYMS
from kbroker.config.admin import describe_broker
from kbroker.config.dynamic import ConfigLayers


def config(**settings):
    """A config from overrides given as keyword arguments: log_retention_ms=5 -> log.retention.ms=5."""
    return BrokerConfig.from_mapping({name.replace("_", "."): value for name, value in settings.items()})


def overrides(*pairs):
    return BrokerConfig.load(overrides=pairs)


def error_of(*pairs, environ=None, config_file=None) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        BrokerConfig.load(config_file=config_file, environ=environ, overrides=pairs)
    return caught.value


def write(tmp_path, text, name="server.properties"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


# --- defaults ---

def test_no_arguments_is_a_single_node_cluster_on_localhost():
    cfg = BrokerConfig()
    assert cfg.process_roles == ("broker", "controller")
    assert cfg.node_id == 1 and cfg.broker_id == 1
    assert cfg.listener_endpoints == [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert cfg.advertised_broker_endpoints == cfg.listener_endpoints
    assert cfg.is_embedded_quorum and cfg.quorum_voters == ()
    assert cfg.log_dirs == ("./kbroker-data",)
    assert cfg.metadata_log_dir == "./kbroker-data"
    assert cfg.inter_broker_listener_name == "PLAINTEXT"
    assert cfg.originals == {}


def test_defaults_that_differ_from_kafka_are_exactly_the_documented_ones():
    kafka_defaults = {
        "node.id": -1, "process.roles": (), "listeners": "PLAINTEXT://:9092", "log.dir": "/tmp/kafka-logs",
        "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    }
    for name, kafka_default in kafka_defaults.items():
        assert SETTINGS_BY_NAME[name].default != kafka_default
        assert name in config_definitions.__doc__


@pytest.mark.parametrize("name, default", [
    ("num.partitions", 1), ("default.replication.factor", 1), ("min.insync.replicas", 1),
    ("auto.create.topics.enable", True), ("delete.topic.enable", True), ("log.retention.hours", 168),
    ("log.retention.bytes", -1), ("log.segment.bytes", 1073741824), ("log.roll.hours", 168),
    ("log.index.interval.bytes", 4096), ("log.index.size.max.bytes", 10485760),
    ("log.flush.interval.messages", 2**63 - 1), ("log.cleanup.policy", ("delete",)), ("log.cleaner.enable", True),
    ("log.cleaner.delete.retention.ms", 86400000), ("log.message.timestamp.type", "CreateTime"),
    ("message.max.bytes", 1048588), ("socket.request.max.bytes", 104857600), ("socket.send.buffer.bytes", 102400),
    ("socket.receive.buffer.bytes", 102400), ("connections.max.idle.ms", 600000), ("max.connections", 2**31 - 1),
    ("queued.max.requests", 500), ("offsets.topic.num.partitions", 50), ("offsets.retention.minutes", 10080),
    ("transaction.state.log.num.partitions", 50), ("transaction.max.timeout.ms", 900000),
    ("group.min.session.timeout.ms", 6000), ("group.max.session.timeout.ms", 1800000),
    ("group.max.size", 2**31 - 1), ("broker.session.timeout.ms", 9000), ("broker.heartbeat.interval.ms", 2000),
    ("replica.lag.time.max.ms", 30000), ("unclean.leader.election.enable", False),
    ("auto.leader.rebalance.enable", True), ("producer.id.expiration.ms", 86400000),
    ("fetch.max.bytes", 57671680), ("num.io.threads", 8), ("num.network.threads", 3),
    ("compression.type", "producer"), ("broker.rack", None),
])
def test_kafka_defaults(name, default):
    assert BrokerConfig().declared(name) == default


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: setting.name)
def test_every_default_is_valid_and_survives_a_round_trip_through_text(setting):
    if setting.default is None:
        return
    assert setting.validator is None or setting.validator(setting.default)
    assert setting.parse(setting.format(setting.default)) == setting.default
    assert setting.doc and "\n" not in setting.doc


def test_settings_accepted_only_for_compatibility_say_so():
    unused = {setting.name for setting in SETTINGS if not setting.used}
    assert {"num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir"} <= unused
    assert overrides("num.io.threads=16").num_io_threads == 16


def test_settings_not_acted_on_are_named_when_given_another_value_than_their_default():
    config = overrides("num.io.threads=16", "socket.send.buffer.bytes=102400", "log.preallocate=true",
                       "num.partitions=3")
    assert config.ignored_settings() == ["num.io.threads=16 (--override num.io.threads=16)",
                                         "log.preallocate=true (--override log.preallocate=true)"]
    assert overrides().ignored_settings() == []


def test_roll_jitter_reaches_the_log_config_in_milliseconds():
    assert overrides("log.roll.jitter.hours=1").log_config().segment_jitter_ms == 3600 * 1000
    assert overrides("log.roll.jitter.ms=5", "log.roll.jitter.hours=1").log_config().segment_jitter_ms == 5
    assert overrides().log_config().segment_jitter_ms == 0


def test_every_setting_not_acted_on_is_listed_among_the_differences_from_kafka():
    differences = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md").read_text()
    unlisted = [setting.name for setting in SETTINGS if not setting.used and setting.name not in differences
                and not setting.name.startswith("share.coordinator.")]
    assert unlisted == []


def test_every_topic_config_not_acted_on_is_listed_among_the_differences_from_kafka():
    from kbroker.config.topic_definitions import TOPIC_SETTINGS
    differences = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md").read_text()
    assert [name for name, setting in TOPIC_SETTINGS.items() if not setting.used and f"`{name}`" not in differences] == []


# --- precedence and sources ---

def test_precedence_is_default_file_environment_override(tmp_path):
    path = write(tmp_path, "num.partitions=2\nlog.segment.bytes=1000\nmessage.max.bytes=500\n")
    environ = {"KBROKER_LOG_SEGMENT_BYTES": "2000", "KBROKER_MESSAGE_MAX_BYTES": "600"}
    cfg = BrokerConfig.load(config_file=path, environ=environ, overrides=["message.max.bytes=700"])
    assert (cfg.num_partitions, cfg.log_segment_bytes, cfg.message_max_bytes, cfg.min_insync_replicas) == (2, 2000, 700, 1)
    assert cfg.source("num.partitions") == Origin(Source.FILE, f"{path}:1")
    assert cfg.source("log.segment.bytes") == Origin(Source.ENVIRONMENT, "KBROKER_LOG_SEGMENT_BYTES")
    assert cfg.source("message.max.bytes") == Origin(Source.OVERRIDE, "message.max.bytes=700")
    assert cfg.source("min.insync.replicas") == Origin(Source.DEFAULT)
    assert cfg.originals["message.max.bytes"].text == "700"
    assert set(cfg.originals) == {"num.partitions", "log.segment.bytes", "message.max.bytes"}


def test_later_overrides_win_and_values_may_hold_equals_signs():
    cfg = overrides("num.partitions=2", "num.partitions=3", "broker.rack=a=b")
    assert cfg.num_partitions == 3 and cfg.broker_rack == "a=b"


def test_an_invalid_value_hidden_by_a_later_source_is_not_an_error(tmp_path):
    path = write(tmp_path, "num.partitions=zero\n")
    assert BrokerConfig.load(config_file=path, overrides=["num.partitions=4"]).num_partitions == 4


def test_sources_map_to_describe_configs_sources():
    assert Source.DEFAULT.kafka_config_source == 5
    assert {source.kafka_config_source for source in (Source.FILE, Source.ENVIRONMENT, Source.OVERRIDE)} == {4}


def test_from_mapping_takes_python_values():
    cfg = BrokerConfig.from_mapping({"auto.create.topics.enable": False, "log.cleanup.policy": ["compact", "delete"],
                                     "num.partitions": 3, "broker.rack": None})
    assert cfg.auto_create_topics_enable is False and cfg.log_cleanup_policy == ("compact", "delete")
    assert cfg.num_partitions == 3 and "broker.rack" not in cfg.originals


def test_override_without_equals_sign_is_refused():
    with pytest.raises(ConfigError, match="key=value"):
        BrokerConfig.load(overrides=["num.partitions"])


def test_missing_config_file_is_reported(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        BrokerConfig.load(config_file=str(tmp_path / "absent.properties"))


# --- properties syntax ---

def entries(text):
    return [(key, value) for key, value, _line in parse_properties(text)]


def test_separators_equals_colon_and_whitespace():
    assert entries("a=1\nb: 2\nc 3\nd\t=\t4\ne   :5\nf\n") == [
        ("a", "1"), ("b", "2"), ("c", "3"), ("d", "4"), ("e", "5"), ("f", "")]


def test_only_the_first_separator_counts():
    assert entries("a = = 1\nb=c=d\nc:d:e\n") == [("a", "= 1"), ("b", "c=d"), ("c", "d:e")]


def test_comments_and_blank_lines():
    assert entries("# comment\n! also\n   # indented\n\n   \na=1 # not a comment\n") == [("a", "1 # not a comment")]


def test_leading_whitespace_dropped_trailing_kept_then_trimmed_by_the_type():
    assert entries("   a=1  \n") == [("a", "1  ")]
    assert overrides("num.partitions= 7 ").num_partitions == 7


def test_line_continuations():
    text = "a=one,\\\n    two,\\\n\tthree\nb=x\\\\\nc=y\\\\\\\n  z\nd=\\\n# part of d\n"
    assert entries(text) == [("a", "one,two,three"), ("b", "x\\"), ("c", "y\\z"), ("d", "# part of d")]


def test_a_comment_is_not_continued_and_a_backslash_at_the_end_of_input_is_dropped():
    assert entries("# comment \\\na=1\nb=2\\") == [("a", "1"), ("b", "2")]


def test_escapes():
    text = "a=tab\\tnew\\nline\\rform\\f\nb=\\=\\:\\#\\!\\ \\\\\nc=\\u00e9\\u20AC\nd=\\q\ne=\\uD83D\\uDE00\n"
    assert entries(text) == [("a", "tab\tnew\nline\rform\f"), ("b", "=:#! \\"), ("c", "é€"), ("d", "q"), ("e", "😀")]


def test_escaped_separators_belong_to_the_key():
    assert entries("a\\=b=c\nd\\:e:f\ng\\ h i\n") == [("a=b", "c"), ("d:e", "f"), ("g h", "i")]


def test_line_endings_crlf_and_cr():
    assert entries("a=1\r\nb=2\rc=3") == [("a", "1"), ("b", "2"), ("c", "3")]


def test_line_numbers_are_those_of_the_first_line_of_an_entry():
    assert [line for _key, _value, line in parse_properties("# x\na=1\\\n 2\nb=3\n")] == [2, 4]


def test_malformed_unicode_escape_names_file_and_line(tmp_path):
    path = write(tmp_path, "a=1\nbroker.rack=\\u12G4\n")
    error = error_of(config_file=path)
    assert f"{path}:2" in str(error) and "\\uxxxx" in str(error)


def test_duplicate_keys_the_last_wins_and_is_the_origin(tmp_path):
    path = write(tmp_path, "num.partitions=2\nnum.partitions=5\n")
    cfg = BrokerConfig.load(config_file=path)
    assert cfg.num_partitions == 5 and cfg.source("num.partitions").where == f"{path}:2"


def test_a_latin_1_file_is_read_as_java_reads_it(tmp_path):
    path = write(tmp_path, "broker.rack=caf\xe9\n".encode("latin-1"))
    assert BrokerConfig.load(config_file=path).broker_rack == "café"


def test_kafkas_sample_kraft_server_properties_loads(tmp_path):
    lines = [
        "process.roles=broker,controller", "node.id=1", "controller.quorum.voters=1@localhost:9093",
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093", "inter.broker.listener.name=PLAINTEXT",
        "advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        "controller.listener.names=CONTROLLER",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,"
        "SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "num.network.threads=3", "num.io.threads=8", "socket.send.buffer.bytes=102400",
        "socket.receive.buffer.bytes=102400", "socket.request.max.bytes=104857600",
        "log.dirs=/tmp/kraft-combined-logs", "num.partitions=1", "num.recovery.threads.per.data.dir=1",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1", "share.coordinator.state.topic.replication.factor=1",
        "share.coordinator.state.topic.min.isr=1", "log.retention.hours=168", "log.segment.bytes=1073741824",
        "log.retention.check.interval.ms=300000",
    ]
    cfg = BrokerConfig.load(config_file=write(tmp_path, "\n".join(lines)))
    assert cfg.quorum_voters == (Voter(1, "localhost", 9093),) and not cfg.is_embedded_quorum
    assert cfg.controller_endpoints == [Endpoint("CONTROLLER", None, 9093, "PLAINTEXT")]
    assert cfg.advertised_broker_endpoints == [Endpoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT")]
    assert cfg.log_dirs == ("/tmp/kraft-combined-logs",)


# --- types and validators ---

@pytest.mark.parametrize("pair, expected", [
    ("num.partitions=0", "a value >= 1"),                      # AtLeast
    ("num.partitions=1.5", "a 32-bit integer"),                # int syntax
    ("num.partitions=1_000", "a 32-bit integer"),
    ("num.partitions=2147483648", "a 32-bit integer"),         # int range
    ("offsets.topic.replication.factor=40000", "a 16-bit integer"),
    ("log.retention.bytes=9223372036854775808", "a 64-bit integer"),
    ("log.cleaner.min.cleanable.ratio=1.5", "a value from 0 to 1"),  # Between
    ("log.cleaner.min.cleanable.ratio=half", "a number"),
    ("metrics.port=65536", "a value from -1 to 65535"),
    ("auto.create.topics.enable=yes", "true or false"),        # bool
    ("log.message.timestamp.type=createtime", "one of CreateTime, LogAppendTime"),  # OneOf, case-sensitive
    ("compression.type=brotli", "one of uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("security.inter.broker.protocol=TLS", "one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("log.cleanup.policy=delete,purge", "list of compact, delete"),  # ListOf
    ("process.roles=", "a non-empty, duplicate-free comma-separated list of broker, controller"),
    ("process.roles=broker,broker", "duplicate-free"),
    ("group.coordinator.rebalance.protocols=classic,eager", "list of classic, consumer, share"),
    ("fetch.max.bytes=1023", "a value >= 1024"),
    ("log.segment.bytes=13", "a value >= 14"),
    ("log.index.size.max.bytes=3", "a value >= 4"),
    ("log.flush.interval.messages=0", "a value >= 1"),
    ("socket.request.max.bytes=0", "a value >= 1"),
])
def test_invalid_values_name_setting_value_origin_and_what_is_allowed(pair, expected):
    error = error_of(pair)
    name, _, text = pair.partition("=")
    assert expected in str(error) and name in str(error) and repr(text) in str(error)
    assert (error.setting, error.value, error.origin) == (name, text, Origin(Source.OVERRIDE, pair))


@pytest.mark.parametrize("pair, value", [
    ("num.partitions=+3", 3), ("log.retention.bytes=-1", -1), ("auto.create.topics.enable=TRUE", True),
    ("auto.create.topics.enable= False ", False), ("log.cleaner.min.cleanable.ratio=1e-1", 0.1),
    ("log.cleaner.min.cleanable.ratio=1", 1.0), ("log.cleanup.policy=compact , delete", ("compact", "delete")),
    ("log.cleanup.policy=", ()), ("log.message.timestamp.type=LogAppendTime", "LogAppendTime"),
    ("compression.type=zstd", "zstd"), ("metrics.port=9404", 9404), ("broker.rack= rack-1 ", "rack-1"),
])
def test_valid_values_parse_as_kafka_parses_them(pair, value):
    name, _, _ = pair.partition("=")
    assert overrides(pair).get(name) == value


def test_invalid_file_value_names_file_and_line(tmp_path):
    path = write(tmp_path, "# header\n\nlog.segment.bytes=1GB\n")
    error = error_of(config_file=path)
    assert f"{path}:3" in str(error) and "'1GB'" in str(error) and "log.segment.bytes" in str(error)


def test_replica_fetch_wait_must_not_exceed_replica_lag_time():
    error = error_of("replica.fetch.wait.max.ms=40000")
    assert error.setting == "replica.fetch.wait.max.ms" and "replica.lag.time.max.ms" in str(error)


# --- unknown names ---

def test_unknown_name_suggests_the_closest_known_one():
    error = error_of("log.retention.msec=5")
    assert "unknown setting log.retention.msec" in str(error) and "did you mean log.retention.ms?" in str(error)
    assert error.origin == Origin(Source.OVERRIDE, "log.retention.msec=5")


def test_unknown_name_in_a_file_names_file_and_line(tmp_path):
    path = write(tmp_path, "num.partitions=1\nauto.create.topic.enable=false\n")
    error = error_of(config_file=path)
    assert f"({path}:2)" in str(error) and "did you mean auto.create.topics.enable?" in str(error)


def test_a_topic_config_at_broker_level_points_to_its_broker_synonym():
    assert "retention.ms is a topic config, whose broker-wide default is log.retention.ms" in str(error_of("retention.ms=1"))


def test_a_log_prefixed_topic_config_points_to_its_broker_synonym():
    message = str(error_of("log.segment.index.bytes=4096"))
    assert "did you mean log.index.size.max.bytes, the broker-wide default of topic config segment.index.bytes?" in message


def test_unknown_name_far_from_any_gets_no_suggestion():
    message = str(error_of("zookeeper.connect=localhost:2181"))
    assert "unknown setting zookeeper.connect" in message and "did you mean" not in message


def test_unknown_names_in_code_raise_key_and_attribute_errors():
    cfg = BrokerConfig()
    with pytest.raises(KeyError, match="did you mean num.partitions"):
        cfg.get("num.partition")
    with pytest.raises(AttributeError, match="did you mean 'num_partitions'|did you mean num_partitions"):
        cfg.num_partition


# --- environment ---

def test_environment_variables_map_to_kafka_names():
    cfg = BrokerConfig.load(environ={"KBROKER_LOG_RETENTION_MS": "1000", "KBROKER_AUTO_CREATE_TOPICS_ENABLE": "false",
                                     "KAFKA_NUM_PARTITIONS": "9", "PATH": "/bin"})
    assert cfg.log_retention_ms == 1000 and cfg.auto_create_topics_enable is False and cfg.num_partitions == 1


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda setting: setting.name)
def test_every_setting_has_its_environment_variable(setting):
    [original] = environment_originals({setting.environment_variable: "x"})
    assert original.name == setting.name


def test_unknown_environment_variable_suggests_the_right_variable():
    error = error_of(environ={"KBROKER_LOG_RETENTON_MS": "5"})
    message = str(error)
    assert "unknown setting in environment variable KBROKER_LOG_RETENTON_MS" in message
    assert "did you mean KBROKER_LOG_RETENTION_MS (log.retention.ms)?" in message


def test_invalid_environment_value_names_the_variable():
    error = error_of(environ={"KBROKER_NUM_PARTITIONS": "many"})
    assert "environment variable KBROKER_NUM_PARTITIONS" in str(error) and error.setting == "num.partitions"


def test_every_kbroker_variable_is_a_setting_and_the_test_knobs_are_not_kbroker_variables():
    """The suite's knobs (KBTEST_*) cannot be mistaken for settings; a misspelt setting is still refused."""
    assert BrokerConfig.load(environ={"KBTEST_LONG": "1", "KBTEST_TXN_SEED": "7"}).originals == {}
    assert "did you mean" in str(error_of(environ={"KBROKER_NUM_PARTITION": "3"}))


# --- retention, roll, flush and directory fallbacks ---

@pytest.mark.parametrize("pairs, retention_ms, supplier", [
    ((), 168 * 3600_000, None),
    (("log.retention.hours=1",), 3600_000, "log.retention.hours"),
    (("log.retention.hours=1", "log.retention.minutes=2"), 120_000, "log.retention.minutes"),
    (("log.retention.hours=1", "log.retention.minutes=2", "log.retention.ms=3"), 3, "log.retention.ms"),
    (("log.retention.ms=3", "log.retention.hours=5"), 3, "log.retention.ms"),
    (("log.retention.hours=-1",), -1, "log.retention.hours"),
    (("log.retention.minutes=-5",), -1, "log.retention.minutes"),
    (("log.retention.ms=-1", "log.retention.hours=2"), -1, "log.retention.ms"),
])
def test_retention_ms_over_minutes_over_hours(pairs, retention_ms, supplier):
    cfg = overrides(*pairs)
    assert cfg.log_retention_ms == retention_ms == cfg.get("log.retention.ms")
    assert cfg.log_config_defaults()["retention.ms"] == retention_ms
    assert cfg.topic_default_origin("retention.ms")[0] == supplier


def test_declared_retention_ms_is_unset_when_only_hours_are():
    cfg = overrides("log.retention.hours=2")
    assert cfg.declared("log.retention.ms") is None and cfg.declared("log.retention.hours") == 2


@pytest.mark.parametrize("pair", ["log.retention.ms=0", "log.retention.minutes=0", "log.retention.hours=0"])
def test_zero_retention_is_refused_naming_the_setting_that_gave_it(pair):
    error = error_of(pair)
    assert error.setting == pair.partition("=")[0] and "unlimited (-1) or at least 1 ms" in str(error)


def test_roll_and_jitter_and_flush_fall_back_like_kafka():
    cfg = overrides("log.roll.hours=2", "log.roll.jitter.hours=1", "log.flush.scheduler.interval.ms=500")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms, cfg.log_flush_interval_ms) == (7200_000, 3600_000, 500)
    cfg = overrides("log.roll.hours=2", "log.roll.ms=10", "log.roll.jitter.ms=3", "log.flush.interval.ms=40")
    assert (cfg.log_roll_ms, cfg.log_roll_jitter_ms, cfg.log_flush_interval_ms) == (10, 3, 40)
    assert error_of("log.roll.ms=0").setting == "log.roll.ms"
    assert error_of("log.roll.jitter.ms=-1").setting == "log.roll.jitter.ms"
    assert error_of("log.roll.hours=0").setting == "log.roll.hours"


def test_log_dirs_over_log_dir():
    assert overrides("log.dir=/a").log_dirs == ("/a",)
    cfg = overrides("log.dir=/a", "log.dirs=/b, /c,")
    assert cfg.log_dirs == ("/b", "/c") and cfg.metadata_log_dir == "/b" and cfg.declared("log.dirs") == "/b, /c,"
    assert overrides("log.dirs=/b", "metadata.log.dir=/m").metadata_log_dir == "/m"
    assert error_of("log.dirs= , ").setting == "log.dirs"


def test_broker_id_is_kafkas_older_name_for_node_id():
    assert overrides("broker.id=4").node_id == 4
    assert overrides("broker.id=4", "node.id=4").broker_id == 4
    assert error_of("broker.id=4", "node.id=5").setting == "broker.id"
    assert error_of("node.id=-1").setting == "node.id"


# --- topic-level defaults ---

def test_topic_defaults_come_from_their_broker_synonyms():
    cfg = overrides("log.segment.bytes=1024", "log.roll.hours=1", "log.index.size.max.bytes=4096",
                    "log.flush.interval.messages=1", "log.flush.interval.ms=100", "log.retention.bytes=10",
                    "message.max.bytes=2000", "log.index.interval.bytes=10", "log.cleaner.delete.retention.ms=5",
                    "log.cleaner.min.compaction.lag.ms=6", "log.cleaner.max.compaction.lag.ms=7",
                    "log.segment.delete.delay.ms=8", "log.cleaner.min.cleanable.ratio=0.25",
                    "log.cleanup.policy=compact", "unclean.leader.election.enable=true", "min.insync.replicas=2",
                    "compression.type=lz4", "log.message.timestamp.type=LogAppendTime")
    assert cfg.log_config_defaults() == {
        "segment.bytes": 1024, "segment.ms": 3600_000, "segment.jitter.ms": 0, "segment.index.bytes": 4096,
        "flush.messages": 1, "flush.ms": 100, "retention.bytes": 10, "retention.ms": 168 * 3600_000,
        "max.message.bytes": 2000, "index.interval.bytes": 10, "delete.retention.ms": 5, "min.compaction.lag.ms": 6,
        "max.compaction.lag.ms": 7, "file.delete.delay.ms": 8, "min.cleanable.dirty.ratio": 0.25,
        "cleanup.policy": ("compact",), "unclean.leader.election.enable": True, "min.insync.replicas": 2,
        "compression.type": "lz4", "message.timestamp.type": "LogAppendTime",
        "message.timestamp.before.max.ms": 2**63 - 1, "message.timestamp.after.max.ms": 3_600_000,
        "confluent.value.schema.validation": False, "confluent.key.schema.validation": False,
        "compression.gzip.level": -1, "compression.lz4.level": 9, "compression.zstd.level": 3, "preallocate": False,
        "local.retention.ms": -2, "local.retention.bytes": -2, "remote.copy.lag.ms": 0, "remote.copy.lag.bytes": -1,
        "max.decompressed.message.bytes": 2147483639,
    }
    assert cfg.topic_default_origin("segment.ms") == ("log.roll.hours", Origin(Source.OVERRIDE, "log.roll.hours=1"))
    assert cfg.topic_default_origin("retention.ms") == (None, Origin(Source.DEFAULT))


def test_every_topic_config_synonym_is_a_known_setting_and_has_a_default():
    defaults = BrokerConfig().log_config_defaults()
    assert set(defaults) == set(TOPIC_CONFIG_SYNONYMS) and None not in defaults.values()


def test_log_config_for_the_log_layer():
    log_config = overrides("log.cleanup.policy=compact,delete", "log.segment.bytes=4096", "log.retention.ms=-1",
                           "log.message.timestamp.type=LogAppendTime").log_config()
    assert log_config.compact and log_config.delete and log_config.segment_bytes == 4096
    assert log_config.retention_ms == -1 and log_config.message_timestamp_type == "LogAppendTime"
    assert log_config.max_message_bytes == 1048588 and log_config.segment_ms == 168 * 3600_000


def test_describe_formats_values_as_kafka_writes_them():
    formats = {name: SETTINGS_BY_NAME[name].format(BrokerConfig().declared(name))
               for name in ("log.cleanup.policy", "auto.create.topics.enable", "log.cleaner.min.cleanable.ratio",
                            "process.roles", "log.retention.ms")}
    assert formats == {"log.cleanup.policy": "delete", "auto.create.topics.enable": "true",
                       "log.cleaner.min.cleanable.ratio": "0.5", "process.roles": "broker,controller",
                       "log.retention.ms": None}


# --- listeners ---

def test_listeners_parse_into_name_host_port_protocol():
    cfg = overrides("listeners=plaintext://:9092, SSL://[::1]:9093 ,INTERNAL://10.0.0.1:0,EXTERNAL://0.0.0.0:0",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:sasl_plaintext,"
                    "External:SASL_SSL",
                    "advertised.listeners=PLAINTEXT://h:9092,SSL://h:9093,INTERNAL://h:1,EXTERNAL://h:1")
    assert cfg.listener_endpoints == [
        Endpoint("PLAINTEXT", None, 9092, "PLAINTEXT"), Endpoint("SSL", "::1", 9093, "SSL"),
        Endpoint("INTERNAL", "10.0.0.1", 0, "SASL_PLAINTEXT"), Endpoint("EXTERNAL", "0.0.0.0", 0, "SASL_SSL")]
    assert [endpoint.port for endpoint in cfg.advertised_endpoints] == [9092, 9093, 1, 1]  # ports may repeat


def test_advertised_listeners_default_to_listeners():
    cfg = overrides("listeners=PLAINTEXT://broker1:9092")
    assert cfg.advertised_endpoints == cfg.listener_endpoints and cfg.advertised_listeners == "PLAINTEXT://broker1:9092"
    assert cfg.declared("advertised.listeners") is None


def test_the_wildcard_address_cannot_be_advertised():
    error = error_of("listeners=PLAINTEXT://0.0.0.0:9092")
    assert error.setting == "listeners" and "non-routable meta-address 0.0.0.0" in str(error)
    assert error_of("advertised.listeners=PLAINTEXT://0.0.0.0:9092").setting == "advertised.listeners"
    cfg = overrides("listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners=PLAINTEXT://example.com:9092")
    assert cfg.advertised_broker_endpoints == [Endpoint("PLAINTEXT", "example.com", 9092, "PLAINTEXT")]


@pytest.mark.parametrize("pairs, setting, message", [
    (("listeners=PLAINTEXT:/localhost:9092",), "listeners", "cannot parse 'PLAINTEXT:/localhost:9092'"),
    (("listeners=PLAINTEXT://localhost",), "listeners", "as NAME://host:port"),
    (("listeners=PLAINTEXT://localhost:70000",), "listeners", "not in 0..65535"),
    (("listeners=CLIENT://localhost:9092",), "listeners", "no security protocol for listener CLIENT"),
    (("listeners=PLAINTEXT://a:1,plaintext://b:2",), "listeners", "different name"),
    (("listeners=PLAINTEXT://a:1,SSL://b:1",), "listeners", "different port"),
    (("listeners=PLAINTEXT://127.0.0.1:1,SSL://10.0.0.1:1",), "listeners", "different port"),
    (("listeners=PLAINTEXT://127.0.0.1:1,SSL://[::1]:1,SASL_SSL://[::2]:1",), "listeners", "different port"),
    (("listener.security.protocol.map=PLAINTEXT",), "listener.security.protocol.map", "is not NAME:PROTOCOL"),
    (("listener.security.protocol.map=PLAINTEXT:TLS",), "listener.security.protocol.map", "unknown security protocol"),
    (("advertised.listeners=SSL://h:9093", "listeners=PLAINTEXT://h:9092,SSL://h:9093"), "advertised.listeners",
     "inter-broker listener PLAINTEXT"),
    (("advertised.listeners=PLAINTEXT://h:9092,SSL://h:9093",), "advertised.listeners", "among those of listeners"),
    (("listeners=CLIENT://h:1", "listener.security.protocol.map=CLIENT:PLAINTEXT"), "listeners",
     "inter-broker listener PLAINTEXT"),
    (("inter.broker.listener.name=REPLICATION",), "inter.broker.listener.name", "not a listener name"),
    (("inter.broker.listener.name=PLAINTEXT", "security.inter.broker.protocol=PLAINTEXT"),
     "inter.broker.listener.name", "only one of"),
])
def test_listener_errors(pairs, setting, message):
    error = error_of(*pairs)
    assert error.setting == setting and message in str(error)


def test_ipv4_and_ipv6_listeners_may_share_a_port_and_port_zero_never_clashes():
    cfg = overrides("listeners=PLAINTEXT://127.0.0.1:9092,SSL://[::1]:9092")
    assert [endpoint.host for endpoint in cfg.listener_endpoints] == ["127.0.0.1", "::1"]
    assert len(overrides("listeners=PLAINTEXT://a:0,SSL://b:0").listener_endpoints) == 2


def test_named_listeners_and_the_inter_broker_listener():
    cfg = overrides("listeners=CLIENT://h:9092,REPLICATION://h:9093",
                    "listener.security.protocol.map=CLIENT:SSL,REPLICATION:PLAINTEXT",
                    "inter.broker.listener.name=replication")
    assert cfg.inter_broker_listener_name == "REPLICATION"
    assert [endpoint.security_protocol for endpoint in cfg.listener_endpoints] == ["SSL", "PLAINTEXT"]


def test_listener_errors_show_the_origin_of_the_setting(tmp_path):
    path = write(tmp_path, "listeners=PLAINTEXT://0.0.0.0:9092\n")
    assert f"listeners=PLAINTEXT://0.0.0.0:9092 ({path}:1)" in str(error_of(config_file=path))


# --- controller listeners and the quorum ---

def test_controller_listeners_map_to_plaintext_unless_ssl_or_sasl_is_in_use():
    cfg = overrides("listeners=PLAINTEXT://h:9092,CONTROLLER://h:9093", "controller.listener.names=controller")
    assert cfg.controller_listener_names == ("CONTROLLER",) and cfg.security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    assert cfg.controller_endpoints == [Endpoint("CONTROLLER", "h", 9093, "PLAINTEXT")]
    assert cfg.advertised_broker_endpoints == [Endpoint("PLAINTEXT", "h", 9092, "PLAINTEXT")]
    error = error_of("listeners=PLAINTEXT://h:9092,SSL://h:9094,CONTROLLER://h:9093",
                     "controller.listener.names=CONTROLLER")
    assert "no security protocol for listener CONTROLLER" in str(error)


def test_multi_node_quorum():
    combined = overrides("node.id=2", "controller.quorum.voters=1@a:9093, 2@b:9093,3@[::1]:9093",
                         "listeners=PLAINTEXT://b:9092,CONTROLLER://b:9093", "controller.listener.names=CONTROLLER")
    assert combined.quorum_voters == (Voter(1, "a", 9093), Voter(2, "b", 9093), Voter(3, "::1", 9093))
    broker = overrides("process.roles=broker", "node.id=4", "controller.quorum.voters=1@a:9093",
                       "controller.listener.names=CONTROLLER")
    assert broker.controller_endpoints == [] and broker.security_protocol_map["CONTROLLER"] == "PLAINTEXT"
    controller = overrides("process.roles=controller", "controller.quorum.voters=1@a:9093",
                           "listeners=CONTROLLER://a:9093", "controller.listener.names=CONTROLLER")
    assert controller.advertised_broker_endpoints == []


def test_a_cluster_node_replicates_the_internal_topics_as_kafka_unless_told_otherwise():
    cluster = ("node.id=2", "controller.quorum.voters=1@a:9093,2@b:9093,3@c:9093",
               "listeners=PLAINTEXT://b:9092,CONTROLLER://b:9093", "controller.listener.names=CONTROLLER")
    node = overrides(*cluster)
    assert (node.offsets_topic_replication_factor, node.transaction_state_log_replication_factor,
            node.transaction_state_log_min_isr) == (3, 3, 2)
    described = {entry.name: entry for entry in describe_broker(ConfigLayers(node), 2, "2", list(CLUSTER_DEFAULTS))}
    assert described["offsets.topic.replication.factor"].value == "3"
    assert described["transaction.state.log.min.isr"].synonyms[0].value == "2"
    told = overrides(*cluster, "offsets.topic.replication.factor=1", "transaction.state.log.min.isr=1")
    assert (told.offsets_topic_replication_factor, told.transaction_state_log_replication_factor,
            told.transaction_state_log_min_isr) == (1, 3, 1)
    alone = overrides()
    assert (alone.offsets_topic_replication_factor, alone.transaction_state_log_replication_factor,
            alone.transaction_state_log_min_isr) == (1, 1, 1)


def test_a_controller_advertises_its_listener_when_advertised_listeners_leave_it_out():
    cfg = overrides("listeners=PLAINTEXT://a:9092,CONTROLLER://a:9093", "controller.listener.names=CONTROLLER",
                    "advertised.listeners=PLAINTEXT://public:9092")
    assert cfg.advertised_controller_endpoints == [Endpoint("CONTROLLER", "a", 9093, "PLAINTEXT")]
    error = error_of("listeners=PLAINTEXT://0.0.0.0:9092,CONTROLLER://0.0.0.0:9093",
                     "controller.listener.names=CONTROLLER", "advertised.listeners=PLAINTEXT://public:9092")
    assert error.setting == "listeners" and "0.0.0.0" in str(error)


@pytest.mark.parametrize("pairs, setting, message", [
    (("process.roles=broker",), "controller.quorum.voters", "must list the controller quorum"),
    (("process.roles=controller",), "controller.quorum.voters", "must list the controller quorum"),
    (("controller.quorum.voters=2@a:9093",), "controller.quorum.voters", "must include this controller's node.id 1"),
    (("controller.quorum.voters=1@a:9093",), "controller.listener.names", "must name a listener"),
    (("controller.listener.names=CONTROLLER",), "controller.listener.names", "must appear in listeners"),
    (("process.roles=broker", "controller.quorum.voters=1@a:9093", "controller.listener.names=CONTROLLER"),
     "controller.quorum.voters", "must not include node.id 1"),
    (("process.roles=broker", "node.id=2", "controller.quorum.voters=1@a:9093"), "controller.listener.names",
     "broker-only"),
    (("process.roles=broker", "node.id=2", "controller.quorum.voters=1@a:9093", "controller.listener.names=PLAINTEXT"),
     "controller.listener.names", "must not appear in listeners"),
    (("process.roles=broker", "node.id=2", "controller.quorum.voters=1@a:9093", "controller.listener.names=CTL",
      "listener.security.protocol.map=PLAINTEXT:PLAINTEXT"), "listener.security.protocol.map", "needs a protocol for CTL"),
    (("process.roles=controller", "controller.quorum.voters=1@a:9093", "controller.listener.names=CONTROLLER",
      "listeners=PLAINTEXT://a:9092,CONTROLLER://a:9093"), "listeners", "only hold controller.listener.names"),
    (("listeners=PLAINTEXT://h:9092,CONTROLLER://h:9093", "controller.listener.names=PLAINTEXT,CONTROLLER"),
     "listeners", "at least one broker listener"),
    (("controller.quorum.voters=1@a",), "controller.quorum.voters", "is not {id}@{host}:{port}"),
    (("controller.quorum.voters=one@a:9093",), "controller.quorum.voters", "is not {id}@{host}:{port}"),
    (("controller.quorum.voters=1@a@b:9093",), "controller.quorum.voters", "is not {id}@{host}:{port}"),
    (("controller.quorum.voters=1@0.0.0.0:9093",), "controller.quorum.voters", "not routable"),
    (("controller.quorum.voters=1@a:9093,1@b:9093",), "controller.quorum.voters", "appears twice"),
])
def test_quorum_errors(pairs, setting, message):
    error = error_of(*pairs)
    assert error.setting == setting and message in str(error)


# -- security settings per listener (issue 11) -----------------------------------------------------------

def test_listener_prefixed_settings_override_the_plain_ones_for_that_listener_only():
    config = BrokerConfig.from_mapping({"ssl.client.auth": "requested",
                                        "listener.name.ssl.ssl.client.auth": "required",
                                        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": "x required;"})
    assert config.for_listener("SSL", "ssl.client.auth") == "required"
    assert config.for_listener("OTHER", "ssl.client.auth") == "requested"
    assert config.for_listener("SASL_SSL", "scram-sha-512.sasl.jaas.config") == "x required;"
    assert config.for_listener("SASL_SSL", "plain.sasl.jaas.config") is None


@pytest.mark.parametrize("name, value, message", [
    ("listener.name.ssl.log.dirs", "/x", "takes ssl.*, sasl.*"),
    ("listener.name.ssl.ssl.client.auth", "sometimes", "required"),
    ("listener.name..ssl.client.auth", "none", "takes ssl.*"),
    ("listener.name.sasl_ssl.kerberos.sasl.jaas.config", "x", "takes ssl.*"),
])
def test_listener_prefixed_settings_are_checked(name, value, message):
    assert message in str(error_of(f"{name}={value}"))


def test_brokers_of_a_cluster_may_reach_each_other_over_any_security_protocol():
    config = BrokerConfig.load(overrides=(
        "process.roles=broker,controller", "controller.quorum.voters=1@127.0.0.1:9093",
        "listeners=SSL://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map=SSL:SSL,CONTROLLER:SASL_SSL", "controller.listener.names=CONTROLLER",
        "inter.broker.listener.name=SSL", "sasl.mechanism.controller.protocol=SCRAM-SHA-512"))
    assert config.get("inter.broker.listener.name") == "SSL"
    assert config.security_protocol_map == {"SSL": "SSL", "CONTROLLER": "SASL_SSL"}
    assert config.get("sasl.mechanism.controller.protocol") == "SCRAM-SHA-512"


def test_the_suites_own_knobs_are_not_read_as_settings():
    """Every environment variable the tests and benchmarks read (and print as hints, e.g. KBTEST_TXN_SEED=...)
    has a prefix of its own, so a broker started with them set still starts."""
    root = pathlib.Path(__file__).resolve().parents[2]
    read = re.compile(r"""os\.environ(?:\.get\(|\[)\s*["'](KB[A-Z_]+)["']""")
    knobs = {name for folder in ("tests", "compat_tests", "spark_it", "bench")
             for path in (root / folder).rglob("*.py") for name in read.findall(path.read_text())}
    assert knobs and all(name.startswith("KBTEST_") for name in knobs), sorted(knobs)
    assert BrokerConfig.load(environ={name: "1" for name in knobs}).originals == {}
