"""A broker's requests to the active controller, over the controllers' listener.

A broker does not know for sure which controller is active: it asks the one its
quorum view names as leader (``leader_hint``), else each voter in turn, and
moves on when one answers NOT_CONTROLLER, fails or times out, as Kafka's
``NodeToControllerChannelManager`` does. A call is bounded in attempts and time.

Every request (registration, heartbeats, AlterPartition, forwarded admin requests) travels on the
connection kept to each controller (kbroker.peers), made and secured once, not one per request.
"""

from __future__ import annotations

import logging

import trio

from kbroker.peers import Peers
from kbroker.wire.errors import ErrorCode

logger = logging.getLogger("kbroker.controller.channel")


class ControllerUnavailable(Exception):
    """No controller took the request within the call's time."""


def top_level_not_controller(response) -> bool:
    return getattr(response, "error_code", ErrorCode.NONE) == ErrorCode.NOT_CONTROLLER


class ControllerChannel:
    def __init__(self, client_id: str, voters: dict[int, tuple[str, int]], peers: Peers, leader_hint=lambda: None, *,
                 request_timeout_s: float = 5.0, backoff_s: float = 0.05) -> None:
        self.client_id = client_id
        self.voters = dict(voters)
        self.leader_hint = leader_hint  # () -> node id of the quorum leader as this node knows it, or None
        self.request_timeout_s = request_timeout_s
        self.backoff_s = backoff_s
        self.peers = peers  # the connections kept to the controllers' listeners
        self._order = sorted(voters)
        self._next = 0
        self._avoid: int | None = None  # the controller that last failed or refused

    async def call(self, api_name: str, version: int, body, *, deadline_s: float = 10.0,
                   not_controller=top_level_not_controller, lane: str = "", timeout_s: float | None = None):
        """The active controller's response; ControllerUnavailable if none answered in ``deadline_s``.
        ``lane`` names a connection of its own (kbroker.peers): the broker's registration and heartbeats
        have one, so that they never wait behind a forwarded request (Kafka's lifecycle manager too
        has a channel of its own). ``timeout_s``: how long one attempt waits (controller.quorum.request.
        timeout.ms unless given); a request that must not be applied twice gives its whole deadline, so
        that a slow answer is never taken for a lost one and sent again."""
        with trio.move_on_after(deadline_s):
            while True:
                target = self._target()
                try:
                    response = await self.peers.call(self.voters[target], api_name, version, body,
                                                     client_id=self.client_id,
                                                     timeout_s=self.request_timeout_s if timeout_s is None else timeout_s,
                                                     lane=lane)
                except OSError as error:
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
