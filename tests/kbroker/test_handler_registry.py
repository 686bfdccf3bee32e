"""The handler registry: what is advertised, and what of it is served, read from the schema."""

from kbroker.handlers import HANDLERS
from kbroker.handlers.api_versions import api_versions_response
from kbroker.wire.schema import API_BY_NAME

PRODUCE = API_BY_NAME["Produce"]


def test_produce_serves_what_it_advertises_but_the_versions_its_declaration_rejects():
    """KIP-896 removed Produce v0-2; KAFKA-18659 keeps them advertised: ``rejected 0-2`` in wire/schema/produce.py."""
    handler = HANDLERS[PRODUCE.key]
    assert [version for version in range(16) if version in PRODUCE.rejected_versions] == [0, 1, 2]
    assert [version for version in range(16) if handler.supports(version)] == list(range(3, 14))
    advertised = {key.api_key: (key.min_version, key.max_version) for key in api_versions_response().api_keys}
    assert advertised[PRODUCE.key] == (handler.min_version, handler.max_version) == (0, 13)


def test_an_api_without_rejected_versions_serves_all_it_advertises():
    for handler in HANDLERS.values():
        if handler.api is not PRODUCE:
            assert all(handler.supports(version) for version in range(handler.min_version, handler.max_version + 1))
