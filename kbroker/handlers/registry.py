"""The handlers' registry: each API's handler and the versions it serves, filled by the ``handles``
decorator as the handler modules are imported; ApiVersions answers from it, so what a listener
advertises is exactly what has a handler."""

from __future__ import annotations

import pkgutil
from dataclasses import dataclass
from importlib import import_module

from kbroker.wire.schema import API_BY_NAME, Api


@dataclass(frozen=True)
class Handler:
    api: Api
    min_version: int  # min_version to max_version: what ApiVersions advertises
    max_version: int
    handle: object  # async (broker, RequestContext, request) -> response

    def supports(self, version: int) -> bool:
        """Whether a request of ``version`` is served: advertised, and not among the versions the API's
        declaration rejects (Produce v0-2, advertised for librdkafka's sake: KAFKA-18659). The server
        closes the connection on any other version, as Kafka's SocketServer does on a version not enabled."""
        return self.min_version <= version <= self.max_version and version not in self.api.rejected_versions


HANDLERS: dict[int, Handler] = {}


def handles(api_name: str, min_version: int, max_version: int, registry: dict[int, Handler] = HANDLERS):
    """Register the decorated coroutine function as the handler of ``api_name`` (in the broker's
    registry, or in another listener's)."""
    api = API_BY_NAME[api_name]
    if not (api.min_version <= min_version <= max_version <= api.max_version):
        raise ValueError(f"{api_name} v{min_version}-{max_version} is outside the declared v{api.versions}")

    def register(function):
        if api.key in registry:
            raise ValueError(f"{api_name} has two handlers")
        registry[api.key] = Handler(api, min_version, max_version, function)
        return function

    return register


def load_handlers(package: str, path) -> None:
    """Import every module of the handlers package, so that each registers its API: a new handler
    module serves once it exists, with no list to keep."""
    for module in pkgutil.iter_modules(path):
        import_module(f"{package}.{module.name}")
