"""A broker's requests to the active controller, over the controllers' listener.

A broker does not know for sure which controller is active: it asks the one its
quorum view names as leader (``leader_hint``), else each voter in turn, and
moves on when one answers NOT_CONTROLLER, fails or times out, as Kafka's
``NodeToControllerChannelManager`` does. A call is bounded in attempts and time.
"""

from __future__ import annotations

import logging

import trio

from kbroker.wire import DecodeError
from kbroker.wire.errors import ErrorCode
from kbroker.wire.frame import decode_response, encode_request, read_frame
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.controller.channel")


class ControllerUnavailable(Exception):
    """No controller took the request within the call's time."""


class RequestFailed(Exception):
    """A request to another node got no answer: refused, cut, unreadable or too slow."""


async def request_once(address: tuple[str, int], api_name: str, version: int, body, client_id: str,
                       timeout_s: float, connect=trio.open_tcp_stream):
    """One request on a fresh connection to another node (a controller, a partition leader, a
    transaction coordinator), made by ``connect(host, port)`` (kbroker.security.peer: secured as the
    node's listener wants): its decoded response, or RequestFailed."""
    api = API_BY_NAME[api_name]
    frame = encode_request(api.key, version, 1, client_id, body)
    try:
        with trio.fail_after(timeout_s):
            stream = await connect(*address)
            async with stream:
                await stream.send_all(frame)
                return decode_response(api.key, version, await read_frame(stream))[1]
    except (OSError, trio.BrokenResourceError, trio.TooSlowError, DecodeError, EOFError) as error:
        raise RequestFailed(f"{api_name} to {address[0]}:{address[1]}: {error!r}") from error


def top_level_not_controller(response) -> bool:
    return getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER


class ControllerChannel:
    def __init__(self, client_id: str, voters: dict[int, tuple[str, int]], leader_hint=lambda: None, *,
                 request_timeout_s: float = 5.0, backoff_s: float = 0.05, connect=trio.open_tcp_stream) -> None:
        self.client_id = client_id
        self.voters = dict(voters)
        self.leader_hint = leader_hint  # () -> node id of the quorum leader as this node knows it, or None
        self.request_timeout_s = request_timeout_s
        self.backoff_s = backoff_s
        self.connect = connect  # (host, port) -> a stream to a controller's listener
        self._order = sorted(voters)
        self._next = 0
        self._avoid: int | None = None  # the controller that last failed or refused

    async def call(self, api_name: str, version: int, body, *, deadline_s: float = 10.0,
                   not_controller=top_level_not_controller):
        """The active controller's response; ControllerUnavailable if none answered in ``deadline_s``."""
        with trio.move_on_after(deadline_s):
            while True:
                target = self._target()
                try:
                    response = await request_once(self.voters[target], api_name, version, body, self.client_id,
                                                  self.request_timeout_s, self.connect)
                except RequestFailed as error:
                    logger.debug("%s to controller %d failed: %r", api_name, target, error)
                    self._avoid = target
                    await trio.sleep(self.backoff_s)
                    continue
                if not_controller(response):
                    self._avoid = target
                    await trio.sleep(self.backoff_s)
                    continue
                self._avoid = None
                return response
        raise ControllerUnavailable(f"no active controller answered {api_name} within {deadline_s} s")

    def _target(self) -> int:
        """The leader as this node knows it, unless it just failed us; else the next voter in turn."""
        hint = self.leader_hint()
        if hint in self.voters and hint != self._avoid:
            return hint
        candidates = [v for v in self._order if v != self._avoid] or self._order
        self._next += 1
        return candidates[self._next % len(candidates)]
