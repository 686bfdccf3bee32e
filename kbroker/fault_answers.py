"""Error answers in the shape Kafka sends them, for the faults a test sets (kbroker/faults.py).

A request is seen as the parts Kafka can answer with an error on their own: a Produce's or a Fetch's
partitions, a DescribeGroups' groups, a CreateTopics' topics, or the whole request where the API has one
error code (JoinGroup, InitProducerId...). Each part is a :class:`Unit`, which a fault matches by topic,
partition, group or transactional id. The parts a fault took are answered with its error at the level the
API has it (each encoded by the API's own response class); the others are served by the real handler:

- partitioned APIs (Produce, ListOffsets, OffsetForLeaderEpoch, DeleteRecords, OffsetCommit, TxnOffsetCommit,
  OffsetDelete, DescribeProducers, AddPartitionsToTxn v0-3) and those keyed by group, topic or transactional
  id (DescribeGroups, DeleteGroups, ConsumerGroupDescribe, OffsetFetch v8+, FindCoordinator v4+,
  CreateTopics, DeleteTopics, CreatePartitions, DescribeTransactions): the handler is given the request
  without the faulted parts (nothing is appended, committed or deleted for them), and their errors are
  merged into its answer, after the served parts;
- Fetch: the handler answers the whole request at once (no long poll: Kafka answers at once when a
  partition has an error), and the faulted partitions' answers are replaced. The parts of an incremental
  fetch session count as well as those the request names, as Kafka reads them all;
- Metadata: the handler answers, then the faulted topics carry the error (with no partitions), or the
  faulted partitions do (LEADER_NOT_AVAILABLE and LISTENER_NOT_FOUND with leader -1, as Kafka shows a
  leaderless partition);
- any other API whose answer has a top-level error code: the whole request is answered with the error and
  not handled. APIs with none of these shapes at a version (a few admin APIs: DescribeConfigs, CreateAcls,
  ...) cannot be faulted: see :func:`answerable`.

A Produce with acks=0 that a fault refuses is served for its other partitions and then its connection is
closed, as Kafka tells an acks=0 producer of an error.
"""

from __future__ import annotations

from dataclasses import dataclass

from kbroker.handlers.deferred import Deferred
from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME
from kbroker.wire.schema.values import make_value_class, struct_of

__all__ = ["Unit", "after", "answerable", "shape_of"]


@dataclass(frozen=True)
class Unit:
    """One part of a request that can carry an error of its own, and what a fault matches it by. ``ref``
    locates it in the request (a topic name or id with a partition, a key), not matched."""

    topic: str | None = None
    partition: int | None = None
    group: str | None = None
    transactional_id: str | None = None
    ref: object = None


def after(response, change):
    """``change(response)`` once the handler's answer is ready: at once, or after a :class:`Deferred`'s wait."""
    if response is None:
        return None
    if not isinstance(response, Deferred):
        return change(response)
    changed = Deferred(None, None)

    async def ready() -> None:
        await response.ready()
        changed.response = change(response.response)

    changed.ready = ready
    return changed


def _has(value_class, name: str, version: int) -> bool:
    spec = next((field for field in value_class._spec.fields if field.name == name), None)
    return spec is not None and version in spec.versions


def _element(value_class, name: str):
    """The value class of the elements of ``value_class``'s array field ``name``."""
    spec = next(field for field in value_class._spec.fields if field.name == name)
    return make_value_class(struct_of(spec.type))


def _owners(request, version: int) -> dict:
    """The group and transactional id a request names at its top level, as units' attributes."""
    found = {}
    for attribute, name in (("group", "group_id"), ("transactional_id", "transactional_id"),
                            ("transactional_id", "v3_and_below_transactional_id")):
        if _has(type(request), name, version) and getattr(request, name):
            found[attribute] = getattr(request, name)
    return found


class Whole:
    """An API with one error code for the whole request: answered with it, not handled."""

    def __init__(self, api_name: str, **extra) -> None:
        self.api = API_BY_NAME[api_name]
        self.extra = extra  # other fields of Kafka's error answer (InitProducerId's epoch -1, ...)

    def units(self, request, version: int, broker) -> list[Unit]:
        return [Unit(**_owners(request, version))]

    async def answer(self, serve, request, version: int, broker, errors: dict) -> object:
        code = next(iter(errors.values()))
        return self.api.response_class(error_code=code, **self.extra)


class _JoinGroup(Whole):
    async def answer(self, serve, request, version, broker, errors):
        response = await super().answer(serve, request, version, broker, errors)
        response.protocol_name = None if version >= 7 else ""  # as Kafka's JoinGroupRequest.getErrorResponse
        return response


class _OldFindCoordinator(Whole):
    """FindCoordinator v0-3: one key; the error at the top, with no node."""

    def units(self, request, version, broker):
        return [_coordinator_unit(request.key, request.key_type)]


def _coordinator_unit(key: str, key_type: int) -> Unit:
    if key_type == 0:
        return Unit(group=key, ref=key)
    if key_type == 1:
        return Unit(transactional_id=key, ref=key)
    return Unit(ref=key)


class _OldOffsetFetch(Whole):
    """OffsetFetch v1-7, one group: v2+ says a group's error at the top, v1 on each partition asked for."""

    async def answer(self, serve, request, version, broker, errors):
        code = next(iter(errors.values()))
        response = self.api.response_class()
        if version >= 2:
            response.error_code = code
            return response
        topic_class = _element(type(response), "topics")
        partition_class = _element(topic_class, "partitions")
        response.topics = [topic_class(name=topic.name, partitions=[
            partition_class(partition_index=index, committed_offset=-1, metadata="", error_code=code)
            for index in topic.partition_indexes]) for topic in request.topics or ()]
        return response


@dataclass(frozen=True)
class Partitioned:
    """An API whose errors are per partition, its topics in a list each with its partitions: where each
    lives in the request and in the answer (field names as declared in kbroker/wire/schema)."""

    api_name: str
    topics: str  # the request's topics
    name: str  # a topic's name
    partitions: str  # a topic's partitions
    index: str | None  # a partition's index (None: the partitions are bare numbers)
    answer_topics: str
    answer_name: str
    answer_partitions: str
    answer_index: str
    error: str = "error_code"
    ids_from: int | None = None  # from this version topics are named by topic_id (KIP-516)
    extra: tuple = ()  # other fields of a refused partition's answer, as Kafka's

    @property
    def api(self):
        return API_BY_NAME[self.api_name]

    def _by_id(self, version: int) -> bool:
        return self.ids_from is not None and version >= self.ids_from

    def _topic(self, topic, version: int, broker) -> tuple[str | None, object]:
        """A request topic's name (None: an id no topic has) and what locates it (its name, or its id)."""
        if self._by_id(version):
            return broker.image.topic_names.get(topic.topic_id), topic.topic_id
        name = getattr(topic, self.name)
        return name, name

    def units(self, request, version: int, broker) -> list[Unit]:
        owners = _owners(request, version)
        units = []
        for topic in getattr(request, self.topics) or ():
            name, ref = self._topic(topic, version, broker)
            for partition in getattr(topic, self.partitions):
                index = partition if self.index is None else getattr(partition, self.index)
                units.append(Unit(topic=name, partition=index, ref=(ref, index), **owners))
        return units

    async def answer(self, serve, request, version: int, broker, errors: dict) -> object:
        refused = self._refused(request, version, broker, errors)
        if not self._without(request, {unit.ref for unit in errors}, version, broker):
            return refused
        served = await serve(request)
        return after(served, lambda answer: self._merge(answer, refused, version))

    def _refused(self, request, version: int, broker, errors: dict) -> object:
        """The answer to the refused parts alone, in request order."""
        codes = {unit.ref: code for unit, code in errors.items()}
        response = self.api.response_class()
        topic_class = _element(type(response), self.answer_topics)
        partition_class = _element(topic_class, self.answer_partitions)
        topics = []
        for topic in getattr(request, self.topics) or ():
            name, ref = self._topic(topic, version, broker)
            partitions = []
            for partition in getattr(topic, self.partitions):
                index = partition if self.index is None else getattr(partition, self.index)
                code = codes.get((ref, index))
                if code is not None:
                    partitions.append(self._refusal(partition_class, index, code))
            if partitions:
                answer = topic_class(**{self.answer_partitions: partitions})
                if self._by_id(version):
                    answer.topic_id = topic.topic_id
                else:
                    setattr(answer, self.answer_name, name)
                topics.append(answer)
        setattr(response, self.answer_topics, topics)
        return response

    def _refusal(self, partition_class, index: int, code: int):
        return partition_class(**{self.answer_index: index, self.error: code, **dict(self.extra)})

    def _without(self, request, refused: set, version: int, broker) -> bool:
        """Leave the refused partitions out of the request; whether any is left to handle."""
        kept_topics = []
        for topic in getattr(request, self.topics) or ():
            _, ref = self._topic(topic, version, broker)
            kept = [partition for partition in getattr(topic, self.partitions)
                    if (ref, partition if self.index is None else getattr(partition, self.index)) not in refused]
            if kept:
                setattr(topic, self.partitions, kept)
                kept_topics.append(topic)
        setattr(request, self.topics, kept_topics)
        return bool(kept_topics)

    def _answer_ref(self, topic, version: int):
        return topic.topic_id if self._by_id(version) else getattr(topic, self.answer_name)

    def _merge(self, served, refused, version: int):
        """The refused partitions' answers added to the served ones'."""
        topics = getattr(served, self.answer_topics)
        by_ref = {self._answer_ref(topic, version): topic for topic in topics}
        for topic in getattr(refused, self.answer_topics):
            same = by_ref.get(self._answer_ref(topic, version))
            if same is None:
                topics.append(topic)
            else:
                getattr(same, self.answer_partitions).extend(getattr(topic, self.answer_partitions))
        return served


class _Produce(Partitioned):
    async def answer(self, serve, request, version, broker, errors):
        if request.acks != 0:
            return await super().answer(serve, request, version, broker, errors)
        if self._without(request, {unit.ref for unit in errors}, version, broker):
            await serve(request)
        # Kafka answers no acks=0 produce: it closes the connection to tell the producer of an error.
        raise DecodeError("an acks=0 produce refused by a fault: closing the connection, as Kafka does")


# Errors Kafka's read path (ReplicaManager) gives, whose Fetch answers carry null aborted transactions.
_READ_PATH_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                               ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR})


class _Fetch(Partitioned):
    """The whole request is handled (a fetch reads and changes nothing), at once; the faulted partitions'
    answers are replaced. A fetch session's partitions count as well as those the request names."""

    def units(self, request, version, broker):
        units = super().units(request, version, broker)
        session = broker.fetch_sessions.session(request.session_id) if version >= 7 and request.session_id else None
        if session is not None and request.session_epoch > 0:
            named = {unit.ref for unit in units}
            by_id = self._by_id(version)
            forgotten = {(topic.topic_id if by_id else topic.topic, index)
                         for topic in request.forgotten_topics_data for index in topic.partitions}
            for cached in session.partitions:
                wanted = cached.request
                ref = (wanted.topic_id if by_id else wanted.topic_name, wanted.partition)
                if ref not in named and ref not in forgotten:
                    units.append(Unit(topic=wanted.topic_name, partition=wanted.partition, ref=ref))
        return units

    def _refusal(self, partition_class, index, code):
        return partition_class(partition_index=index, error_code=code, high_watermark=-1, records=b"",
                               aborted_transactions=None if code in _READ_PATH_ERRORS else [])

    async def answer(self, serve, request, version, broker, errors):
        by_ref: dict = {}
        for unit, code in errors.items():
            by_ref.setdefault(unit.ref[0], {})[unit.ref[1]] = (unit.topic, code)
        request.max_wait_ms = 0  # Kafka answers at once when a partition has an error
        served = await serve(request)
        return after(served, lambda answer: self._replace(answer, by_ref, version))

    def _replace(self, served, by_ref: dict, version: int):
        if served.error_code:  # a session error: the answer has no partitions to change
            return served
        topic_class = _element(type(served), "responses")
        partition_class = _element(topic_class, "partitions")
        answered = {self._answer_ref(topic, version): topic for topic in served.responses}
        for ref, partitions in by_ref.items():
            topic = answered.get(ref)
            if topic is None:
                topic = topic_class(partitions=[])
                if self._by_id(version):
                    topic.topic_id = ref
                else:
                    topic.topic = ref
                served.responses.append(topic)
            kept = [partition for partition in topic.partitions if partition.partition_index not in partitions]
            topic.partitions = kept + [self._refusal(partition_class, index, code)
                                       for index, (_, code) in sorted(partitions.items())]
        return served


@dataclass(frozen=True)
class Keyed:
    """An API whose errors are per group, topic or transactional id, listed in the request (as strings, or
    entries with a key field) and answered one entry each."""

    api_name: str
    entries: str  # the request's list
    key: str | None  # an entry's key field (None: the entries are the keys)
    answer_entries: str
    answer_key: str
    unit: str  # what a key is: "group", "topic" or "transactional_id"
    extra: tuple = ()  # other fields of a refused entry's answer, as Kafka's
    id_key: str | None = None  # DeleteTopics v6+: an entry names its topic by this id field when its key is null

    @property
    def api(self):
        return API_BY_NAME[self.api_name]

    def _key(self, entry, broker) -> tuple[str | None, object]:
        """An entry's name, and what locates it."""
        key = entry if self.key is None else getattr(entry, self.key)
        if key is None and self.id_key is not None:
            topic_id = getattr(entry, self.id_key)
            return broker.image.topic_names.get(topic_id), topic_id
        return key, key

    def _unit(self, request, key: str | None, ref) -> Unit:
        return Unit(**{self.unit: key}, ref=ref)

    def units(self, request, version, broker):
        return [self._unit(request, *self._key(entry, broker)) for entry in getattr(request, self.entries) or ()]

    async def answer(self, serve, request, version, broker, errors):
        codes = {unit.ref: code for unit, code in errors.items()}
        response = self.api.response_class()
        entry_class = _element(type(response), self.answer_entries)
        refused, kept = [], []
        for entry in getattr(request, self.entries) or ():
            name, ref = self._key(entry, broker)
            code = codes.get(ref)
            if code is None:
                kept.append(entry)
                continue
            answer = entry_class(error_code=code, **dict(self.extra))
            setattr(answer, self.answer_key, name)
            if self.id_key is not None and name is not ref:
                setattr(answer, self.id_key, ref)
            refused.append(answer)
        if not kept:
            setattr(response, self.answer_entries, refused)
            return response
        setattr(request, self.entries, kept)

        def merge(served):
            getattr(served, self.answer_entries).extend(refused)
            return served

        return after(await serve(request), merge)


class _CoordinatorKeys(Keyed):
    """FindCoordinator v4+: the keys are groups or transactional ids by the request's key type."""

    def _unit(self, request, key, ref):
        return _coordinator_unit(key, request.key_type)


class _Metadata:
    """Answered by the handler; then the faulted topics carry the error with no partitions, or the faulted
    partitions carry it (LEADER_NOT_AVAILABLE and LISTENER_NOT_FOUND with leader -1)."""

    api = API_BY_NAME["Metadata"]

    def units(self, request, version, broker):
        image = broker.image
        if request.topics is None or (version == 0 and not request.topics):
            names = list(image.topics)
        else:
            names = [image.topic_names.get(topic.topic_id) if version >= 10 and topic.name is None else topic.name
                     for topic in request.topics]
        units = []
        for name in names:
            units.append(Unit(topic=name, ref=(name, None)))
            topic = image.topics.get(name)
            units += [Unit(topic=name, partition=state.partition, ref=(name, state.partition))
                      for state in (topic.partitions if topic is not None else ())]
        return units

    async def answer(self, serve, request, version, broker, errors):
        codes = {unit.ref: code for unit, code in errors.items()}
        served = await serve(request)
        # Decoded again from its encoding: the handler keeps topics' answers encoded (kbroker/metadata/answers.py).
        answer = self.api.decode_response(version, self.api.encode_response(version, served))
        for topic in answer.topics:
            name = topic.name if topic.name is not None else broker.image.topic_names.get(topic.topic_id)
            code = codes.get((name, None))
            if code is not None:
                topic.error_code, topic.partitions = code, []
                continue
            for partition in topic.partitions:
                code = codes.get((name, partition.partition_index))
                if code is not None:
                    partition.error_code = code
                    if code in (ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.LISTENER_NOT_FOUND):
                        partition.leader_id = -1
        return answer


_NO_ANSWER = (("base_offset", -1), ("log_append_time_ms", -1), ("log_start_offset", -1))
_NO_NODE = (("node_id", -1), ("host", ""), ("port", -1))

_SHAPES = {shape.api_name: shape for shape in (
    _Produce("Produce", "topic_data", "name", "partition_data", "index", "responses", "name", "partition_responses",
             "index", ids_from=13, extra=_NO_ANSWER),
    _Fetch("Fetch", "topics", "topic", "partitions", "partition", "responses", "topic", "partitions",
           "partition_index", ids_from=13),
    Partitioned("ListOffsets", "topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                "partition_index"),
    Partitioned("OffsetForLeaderEpoch", "topics", "topic", "partitions", "partition", "topics", "topic", "partitions",
                "partition"),
    Partitioned("DeleteRecords", "topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                "partition_index", extra=(("low_watermark", -1),)),
    Partitioned("OffsetCommit", "topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                "partition_index", ids_from=10),
    Partitioned("TxnOffsetCommit", "topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                "partition_index", ids_from=6),
    Partitioned("OffsetDelete", "topics", "name", "partitions", "partition_index", "topics", "name", "partitions",
                "partition_index"),
    Partitioned("DescribeProducers", "topics", "name", "partition_indexes", None, "topics", "name", "partitions",
                "partition_index"),
    Keyed("DescribeGroups", "groups", None, "groups", "group_id", "group"),
    Keyed("DeleteGroups", "groups_names", None, "results", "group_id", "group"),
    Keyed("ConsumerGroupDescribe", "group_ids", None, "groups", "group_id", "group"),
    Keyed("CreateTopics", "topics", "name", "topics", "name", "topic"),
    Keyed("CreatePartitions", "topics", "name", "results", "name", "topic"),
    Keyed("DescribeTransactions", "transactional_ids", None, "transaction_states", "transactional_id",
          "transactional_id"),
)}
_BY_VERSION = {  # API -> (first version, shape from it), latest first
    "AddPartitionsToTxn": ((4, Whole("AddPartitionsToTxn")),  # v4+ only between brokers
                           (0, Partitioned("AddPartitionsToTxn", "v3_and_below_topics", "name", "partitions", None,
                                           "results_by_topic_v3_and_below", "name", "results_by_partition",
                                           "partition_index", error="partition_error_code"))),
    "OffsetFetch": ((8, Keyed("OffsetFetch", "groups", "group_id", "groups", "group_id", "group")),
                    (0, _OldOffsetFetch("OffsetFetch"))),
    "FindCoordinator": ((4, _CoordinatorKeys("FindCoordinator", "coordinator_keys", None, "coordinators", "key",
                                             "group", extra=_NO_NODE)),
                        (0, _OldFindCoordinator("FindCoordinator", **dict(_NO_NODE)))),
    "DeleteTopics": ((6, Keyed("DeleteTopics", "topics", "name", "responses", "name", "topic", id_key="topic_id")),
                     (0, Keyed("DeleteTopics", "topic_names", None, "responses", "name", "topic"))),
    "Metadata": ((0, _Metadata()),),
}
_WHOLE = {"InitProducerId": Whole("InitProducerId", producer_epoch=-1), "JoinGroup": _JoinGroup("JoinGroup")}


def shape_of(api_name: str, version: int):
    """How a request of ``api_name`` at ``version`` is seen in parts and answered with errors; None when the
    API has no error to give at that version."""
    shape = _SHAPES.get(api_name)
    if shape is not None:
        return shape
    for first, shape in _BY_VERSION.get(api_name, ()):
        if version >= first:
            return shape
    shape = _WHOLE.get(api_name)
    if shape is None:
        api = API_BY_NAME[api_name]
        if not _has(api.response_class, "error_code", version):
            return None
        shape = _WHOLE[api_name] = Whole(api_name)
    return shape


def answerable(api_name: str) -> bool:
    """Whether a fault can answer some version of ``api_name`` with an error."""
    api = API_BY_NAME[api_name]
    return any(shape_of(api_name, version) is not None for version in range(api.min_version, api.max_version + 1))
