"""Every Kafka API we speak, declared once and compiled on demand.

``API_BY_KEY[3]`` (or ``API_BY_NAME["Metadata"]``) is an :class:`Api` with the
request and response value classes and version-specific codecs::

    metadata = API_BY_NAME["Metadata"]
    request = metadata.decode_request(12, body)
    out = bytearray()
    metadata.encode_response(12, response, out)

Message classes are also attributes of this module (``wire.schema.MetadataResponse``),
with their nested structs as class attributes (``MetadataResponse.MetadataResponseTopic``).
"""

from __future__ import annotations

import struct
from importlib import import_module

from kbroker.wire.primitives import DecodeError
from kbroker.wire.schema.codegen import CodeGenerator
from kbroker.wire.schema.values import EncodeBuffer, Encoded, Region, make_value_class
from kbroker.wire.schema.declaration import ApiSpec, parse_declaration

__all__ = ["API_BY_KEY", "API_BY_NAME", "Api", "EncodeBuffer", "Encoded", "Region", "UnsupportedVersion"]

# One module per API family; each defines DECLARATIONS, a list of declaration texts.
_FAMILIES = (
    "produce",
    "fetch",
    "offsets",
    "metadata",
    "groups",
    "consumer_groups",
    "share_groups",
    "versions_and_sasl",
    "topics",
    "configs",
    "acls",
    "transactions",
    "quorum",
    "cluster",
    "quotas_and_credentials",
    "telemetry",
)


class UnsupportedVersion(DecodeError):
    """The API key is unknown or the version is outside the declared range."""


class Api:
    """One API: its declaration, value classes and per-version codecs."""

    def __init__(self, spec: ApiSpec) -> None:
        self.spec = spec
        self.key = spec.key
        self.name = spec.name
        self.versions = spec.versions
        self.min_version = spec.versions.low
        self.max_version = spec.versions.high
        self.rejected_versions = spec.rejected
        self._generator = CodeGenerator()

    # Classes are built on first use: a broker touches a handful of its APIs at start.
    @property
    def request_class(self) -> type:
        return make_value_class(self.spec.request)

    @property
    def response_class(self) -> type:
        return make_value_class(self.spec.response)

    def __repr__(self) -> str:
        return f"Api({self.name}, key={self.key}, versions={self.versions})"

    def is_flexible(self, version: int) -> bool:
        return version in self.spec.flexible

    def request_header_version(self, version: int) -> int:
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        # ApiVersions responses use header v0 always: a client that sent a version
        # the broker does not know must still be able to read the answer.
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def _check(self, version: int) -> None:
        if version not in self.versions:
            raise UnsupportedVersion(f"{self.name} v{version} is outside v{self.versions}")

    def request_reader(self, version: int):
        self._check(version)
        return self._generator.reader(self.spec.request, version, self.is_flexible(version))

    def response_reader(self, version: int):
        self._check(version)
        return self._generator.reader(self.spec.response, version, self.is_flexible(version))

    def request_writer(self, version: int):
        self._check(version)
        return self._generator.writer(self.spec.request, version, self.is_flexible(version))

    def response_writer(self, version: int):
        self._check(version)
        return self._generator.writer(self.spec.response, version, self.is_flexible(version))

    def decode_request(self, version: int, buf, pos: int = 0, *, exact: bool = True):
        """The request value; ``exact=False`` ignores bytes after it, as Kafka's
        broker does (librdkafka's all-topics Metadata v12 carries three extra bytes)."""
        return _decode(self.request_reader(version), buf, pos, exact)

    def decode_response(self, version: int, buf, pos: int = 0):
        return _decode(self.response_reader(version), buf, pos)

    def encode_request(self, version: int, value, out: bytearray | None = None) -> bytearray:
        out = bytearray() if out is None else out
        self.request_writer(version)(out, value)
        return out

    def encode_response_part(self, version: int, value) -> Encoded:
        """``value``, a struct inside this API's responses, encoded for ``version``: an array of the
        response takes it where the value would go (values.Encoded)."""
        self._check(version)
        out = bytearray()
        self._generator.writer(value._spec, version, self.is_flexible(version))(out, value)
        return Encoded(bytes(out))

    def encode_response(self, version: int, value, out: bytearray | None = None) -> bytearray:
        out = bytearray() if out is None else out
        self.response_writer(version)(out, value)
        return out


def _decode(reader, buf, pos: int, exact: bool = True):
    """Run a reader over the whole of ``buf``; the value must use every byte."""
    view = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        value, end = reader(view, pos)
    except (struct.error, IndexError, OverflowError, UnicodeDecodeError) as error:
        raise DecodeError(f"truncated or malformed message: {error}") from None
    if exact and end != len(view):
        raise DecodeError(f"{len(view) - end} bytes left over after the message")
    return value


def _load() -> tuple[dict[int, Api], dict[str, Api]]:
    by_key: dict[int, Api] = {}
    for family in _FAMILIES:
        module = import_module(f"{__name__}.{family}")
        for text in module.DECLARATIONS:
            api = Api(parse_declaration(text))
            if api.key in by_key:
                raise ValueError(f"api key {api.key} declared twice")
            by_key[api.key] = api
    by_key = dict(sorted(by_key.items()))
    return by_key, {api.name: api for api in by_key.values()}


API_BY_KEY, API_BY_NAME = _load()
_MESSAGES = {message.name: message for api in API_BY_KEY.values() for message in (api.spec.request, api.spec.response)}


def __getattr__(name: str):
    try:
        return make_value_class(_MESSAGES[name])
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
