"""``reset(broker)``: a running broker emptied for the next test, on the same port (issue 43).

What a test leaves behind is metadata and the internal topics' contents, and both go the way an
operator's admin requests would take them. Faults on demand, if the broker has any, are cleared first;
then the broker sends the active controller (in process, on a single node) DeleteTopics for every
topic, the internal ones included, DeleteAcls for every binding, AlterClientQuotas and
AlterUserScramCredentials removing every quota and SCRAM credential, and IncrementalAlterConfigs
deleting every dynamic broker and group config, the requests at once so that their records share the
quorum's fsync. The broker applies the committed records as it applies any: the topics' logs are
deleted (their files in worker threads, after this returns) and their share-partitions forgotten, and
each coordinator whose topic went (``__consumer_offsets``: groups and committed offsets;
``__transaction_state``: transactions; ``__share_group_state``: share-partitions' state) resigns its
partitions as it does when another broker leads them, and starts afresh when a client's first request
makes the topic again, as on a fresh broker. The schema registry's ``_schemas`` goes with the topics,
and its registry is emptied.

What stays, and why a client cannot tell it from a fresh broker: the port, the cluster id and the
broker's registration; the quorum's metadata log (it grows by the reset's records); the producer-id
blocks, which go on counting up (a fresh broker's first id is 0, a reset one's the next: ids are
opaque to clients); the clock (an ``OffsetClock`` moved ahead stays ahead: time never steps back);
client connections and their fetch and share sessions, which belong to the clients that opened them:
a client of the next test opens its own, and one left open by the test before finds its topics
gone, as after DeleteTopics. Dynamic logger levels (KIP-412) are not metadata and stay too. A log
directory taken offline by a failed fsync stays offline: that takes a restart (the ``kbroker_clean``
fixture restarts such a broker before it resets it).
"""

from __future__ import annotations

import functools

import trio

from kbroker.wire.errors import ErrorCode
from kbroker.wire.primitives import ZERO_UUID
from kbroker.wire.schema import API_BY_NAME

_WAIT_S = 30  # for the controller's answers and for the image to show them
_ROUNDS = 5  # deletions of what requests still on their way made again (reset's docstring)
_ANY = 1  # ANY in DeleteAcls filters: resource type, pattern type, operation, permission
_BROKER_RESOURCE, _GROUP_RESOURCE = 4, 32  # IncrementalAlterConfigs resource types
_DELETE = 1  # IncrementalAlterConfigs' DELETE operation
# Answers that mean done: nothing, or what was to be deleted is gone already (deleted meanwhile by another).
_GONE = frozenset({ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID,
                   ErrorCode.RESOURCE_NOT_FOUND})

DeleteTopics = API_BY_NAME["DeleteTopics"].request_class
DeleteAcls = API_BY_NAME["DeleteAcls"].request_class
AlterClientQuotas = API_BY_NAME["AlterClientQuotas"].request_class
AlterUserScramCredentials = API_BY_NAME["AlterUserScramCredentials"].request_class
IncrementalAlterConfigs = API_BY_NAME["IncrementalAlterConfigs"].request_class


class ResetFailed(Exception):
    """The controller refused part of the reset, or the broker's image did not show it in time."""


async def reset(broker) -> None:
    """Empty ``broker`` (a :class:`kbroker.broker.Broker`, serving) of every topic, group, committed offset,
    transaction, share-group state, schema, ACL, client quota, SCRAM credential and dynamic config, and of
    its faults; returns once its image shows it empty. Run in the broker's event loop.

    A request the test before left on its way (a consumer's FindCoordinator creating ``__consumer_offsets``
    in the background) may make something again just after it was deleted: the reset goes round again
    for it, up to ``_ROUNDS`` times."""
    broker.faults.clear()
    for _ in range(_ROUNDS):
        before = broker.image
        requests = _requests(before)
        if not requests:
            break
        failures: list[str] = []
        async with trio.open_nursery() as nursery:
            for api_name, version, body in requests:
                nursery.start_soon(_ask, broker, api_name, version, body, failures)
        if failures:
            raise ResetFailed("the reset was refused in part: " + "; ".join(failures))
        if not await broker.await_image(functools.partial(_gone, before), _WAIT_S):
            raise ResetFailed(f"the broker's image still holds {_left_in(broker.image)} after {_WAIT_S} s")
    else:
        if _requests(broker.image):
            raise ResetFailed(f"made again as often as it was deleted ({_ROUNDS} times): {_left_in(broker.image)}")
    if broker.schema_store is not None:
        await broker.schema_store.catch_up()  # its topic is gone: the registry starts empty


def _requests(image) -> list[tuple[str, int, object]]:
    """The admin requests that take ``image`` back to empty: none for what is empty already."""
    requests = []
    if image.topics:
        requests.append(("DeleteTopics", 6, DeleteTopics(timeout_ms=_WAIT_S * 1000, topics=[
            DeleteTopics.DeleteTopicState(name=name, topic_id=ZERO_UUID) for name in image.topics])))
    if image.acls:
        requests.append(("DeleteAcls", 3, DeleteAcls(filters=[DeleteAcls.DeleteAclsFilter(
            resource_type_filter=_ANY, resource_name_filter=None, pattern_type_filter=_ANY, principal_filter=None,
            host_filter=None, operation=_ANY, permission_type=_ANY)])))
    if any(image.client_quotas.values()):
        requests.append(("AlterClientQuotas", 1, AlterClientQuotas(validate_only=False, entries=[
            AlterClientQuotas.EntryData(
                entity=[AlterClientQuotas.EntryData.EntityData(entity_type=kind, entity_name=name)
                        for kind, name in entity],
                ops=[AlterClientQuotas.EntryData.OpData(key=key, value=0.0, remove=True) for key in values])
            for entity, values in image.client_quotas.items() if values])))
    if image.scram_credentials:
        requests.append(("AlterUserScramCredentials", 0, AlterUserScramCredentials(upsertions=[], deletions=[
            AlterUserScramCredentials.ScramCredentialDeletion(name=user, mechanism=mechanism)
            for user, mechanism in image.scram_credentials])))
    resources = [(_BROKER_RESOURCE, name, configs) for name, configs in image.broker_configs.items() if configs] + \
                [(_GROUP_RESOURCE, name, configs) for name, configs in image.group_configs.items() if configs]
    if resources:
        Resource = IncrementalAlterConfigs.AlterConfigsResource
        requests.append(("IncrementalAlterConfigs", 1, IncrementalAlterConfigs(validate_only=False, resources=[
            Resource(resource_type=kind, resource_name=name, configs=[
                Resource.AlterableConfig(name=config, config_operation=_DELETE, value=None) for config in configs])
            for kind, name, configs in resources])))
    return requests


async def _ask(broker, api_name: str, version: int, body, failures: list[str]) -> None:
    """``body`` sent to the active controller as the broker forwards an admin request; what it refused
    goes into ``failures``."""
    response = await broker.lifecycle.channel.call(api_name, version, body, deadline_s=_WAIT_S, timeout_s=_WAIT_S)
    failures.extend(f"{api_name}: {ErrorCode(code).name}" for code in _error_codes(response) if code not in _GONE)


def _error_codes(value):
    """Every error code in a response, however deeply its results are nested."""
    if hasattr(value, "error_code"):
        yield value.error_code
    for field in ("responses", "filter_results", "entries", "results"):
        for result in getattr(value, field, None) or ():
            yield from _error_codes(result)


def _gone(before, image) -> bool:
    """Nothing ``before`` held (and the reset deleted) is in ``image`` as it was: what a request on its way
    made again since is for the next round."""
    return not (before.topic_names.keys() & image.topic_names.keys()) and not (before.acls.keys() & image.acls.keys()) \
        and all(image.client_quotas.get(entity) is not values for entity, values in before.client_quotas.items()) \
        and all(image.scram_credentials.get(key) is not value for key, value in before.scram_credentials.items()) \
        and all(image.broker_configs.get(name) is not configs for name, configs in before.broker_configs.items()
                if configs) \
        and all(image.group_configs.get(name) is not configs for name, configs in before.group_configs.items()
                if configs)


def _left_in(image) -> list[str]:
    """What of the reset ``image`` still holds, named."""
    return [what for what, held in ((f"topics {sorted(image.topics)}", image.topics), ("ACLs", image.acls),
                                    ("client quotas", any(image.client_quotas.values())),
                                    ("SCRAM credentials", image.scram_credentials),
                                    ("dynamic broker configs", any(image.broker_configs.values())),
                                    ("group configs", any(image.group_configs.values()))) if held]
