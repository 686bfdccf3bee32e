"""A broker's membership in a quorum-run cluster (KIP-631): register, heartbeat, shut down in order.

The broker registers with the active controller and gets its broker epoch; it
starts fenced. It heartbeats every ``broker.heartbeat.interval.ms`` with the
metadata offset it has applied, and is unfenced once that reaches its
registration. A heartbeat refused for a stale epoch or an unknown id means the
controller forgot this incarnation (its session expired and it re-registered,
say): it registers again. At shutdown it asks to be fenced first, so that its
partitions get other leaders before it goes (controlled shutdown).

When its log directory goes offline (an fsync failed: kbroker/broker.py storage_failed) the broker asks
to be fenced, and keeps asking in every heartbeat: the controller's fence takes it out of every ISR and
gives its leaderships to other in-sync replicas (kbroker/controller/brokers.py fence_records), so clients
go on writing elsewhere while this process stays up answering KAFKA_STORAGE_ERROR. Kafka's brokers report
an offline directory in BrokerHeartbeat v1's OfflineLogDirs instead, and halt once every directory has
failed; the schema has that field, but it names directories by their KIP-858 uuids, which kbroker's
registration and controller do not track, and a kbroker broker has one data directory, so all of its
storage is offline at once: want_fence (v0) says exactly that, through the fence path the controller
already has, and keeps the process (and its metadata) up for the operator to see.
"""

from __future__ import annotations

import logging
import time
import uuid

import trio

from kbroker.controller.channel import ControllerChannel, ControllerUnavailable
from kbroker.wire.errors import ErrorCode
from kbroker.wire.schema import API_BY_NAME

logger = logging.getLogger("kbroker.lifecycle")

BrokerRegistrationRequest = API_BY_NAME["BrokerRegistration"].request_class
BrokerHeartbeatRequest = API_BY_NAME["BrokerHeartbeat"].request_class
_REGISTRATION_VERSION = 0
_HEARTBEAT_VERSION = 0
_RE_REGISTER = (ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED)
_LANE = "lifecycle"  # registration and heartbeats on a connection of their own to each controller


class BrokerLifecycle:
    def __init__(self, broker, channel: ControllerChannel, *, interval_ms: int, session_timeout_ms: int = 9000) -> None:
        self.broker = broker
        self.channel = channel
        self.interval_s = interval_ms / 1000
        self.session_timeout_s = session_timeout_ms / 1000
        self._last_heartbeat = None  # time.monotonic() of the last heartbeat the controller answered
        self.incarnation_id = uuid.uuid4()
        self.broker_epoch = -1
        self.fenced = True
        self.want_fence = False  # the data directory went offline: stay fenced (storage_offline)
        self.registered = trio.Event()
        self.unfenced = trio.Event()  # set at the first heartbeat that finds this broker unfenced

    async def run(self, listeners: tuple[tuple[str, str, int, int], ...], rack: str | None) -> None:
        while True:
            await self._register(listeners, rack)
            while True:
                error = await self._heartbeat(want_shut_down=False)
                if error in _RE_REGISTER:
                    logger.info("re-registering broker %d: heartbeat refused with %s", self.broker.node_id,
                                ErrorCode(error).name)
                    break
                await trio.sleep(self.interval_s)

    async def shut_down(self) -> None:
        """Controlled shutdown: heartbeat asking to shut down until the controller agrees, its leaderships
        moved. Bounded by broker.session.timeout.ms (Kafka waits longer): by then the controller would
        have fenced this broker anyway, so waiting on gains nothing."""
        if self.broker_epoch < 0:
            return
        started = time.monotonic()
        with trio.move_on_after(self.session_timeout_s):
            while True:
                request = self._heartbeat_request(want_shut_down=True)
                try:
                    response = await self.channel.call("BrokerHeartbeat", _HEARTBEAT_VERSION, request,
                                                       deadline_s=self.session_timeout_s, lane=_LANE)
                except ControllerUnavailable:
                    break
                if response.error_code != ErrorCode.NONE or response.should_shut_down:
                    logger.info("broker %d: controlled shutdown %s after %.2f s", self.broker.node_id,
                                "approved" if response.should_shut_down else ErrorCode(response.error_code).name,
                                time.monotonic() - started)
                    return
                await trio.sleep(0.05)
        logger.warning("broker %d: no controller approved the controlled shutdown within %.1f s; stopping anyway "
                       "(the controller fences this broker when its session runs out)", self.broker.node_id,
                       self.session_timeout_s)

    async def _register(self, listeners: tuple[tuple[str, str, int, int], ...], rack: str | None) -> None:
        """Register with every listener, as (name, host, port, security protocol id), inter-broker first."""
        listeners = [BrokerRegistrationRequest.Listener(name=name, host=host, port=port, security_protocol=protocol)
                     for name, host, port, protocol in listeners]
        request = BrokerRegistrationRequest(broker_id=self.broker.node_id, cluster_id=self.broker.cluster_id,
                                            incarnation_id=self.incarnation_id, listeners=listeners, features=[],
                                            rack=rack)
        while True:
            try:
                response = await self.channel.call("BrokerRegistration", _REGISTRATION_VERSION, request, lane=_LANE)
            except ControllerUnavailable as error:
                logger.info("broker %d not registered yet: %s", self.broker.node_id, error)
                continue
            if response.error_code == ErrorCode.NONE:
                self.broker_epoch, self.fenced = response.broker_epoch, True
                self.registered.set()
                logger.info("broker %d registered with epoch %d", self.broker.node_id, self.broker_epoch)
                return
            logger.warning("broker %d registration refused: %s", self.broker.node_id,
                           ErrorCode(response.error_code).name)
            await trio.sleep(self.interval_s)

    async def _heartbeat(self, *, want_shut_down: bool) -> int:
        try:
            response = await self.channel.call("BrokerHeartbeat", _HEARTBEAT_VERSION,
                                               self._heartbeat_request(want_shut_down=want_shut_down), lane=_LANE)
        except ControllerUnavailable:
            return ErrorCode.NOT_CONTROLLER
        if response.error_code == ErrorCode.NONE:
            self._last_heartbeat = time.monotonic()
            if self.fenced != response.is_fenced:
                logger.info("broker %d is %s", self.broker.node_id, "fenced" if response.is_fenced else "unfenced")
            self.fenced = response.is_fenced
            if not self.fenced:
                self.unfenced.set()
        return response.error_code

    def storage_offline(self) -> None:
        """The data directory is offline: from the next heartbeat on, ask to be fenced."""
        self.want_fence = True
        logger.error("broker %d asks to be fenced: its log directory is offline", self.broker.node_id)

    @property
    def lease_expired(self) -> bool:
        """No heartbeat answered for broker.session.timeout.ms: the controller has fenced this broker
        by now, though no answer could say so (it is cut off from the quorum)."""
        return self._last_heartbeat is None or time.monotonic() - self._last_heartbeat > self.session_timeout_s

    def _heartbeat_request(self, *, want_shut_down: bool):
        return BrokerHeartbeatRequest(broker_id=self.broker.node_id, broker_epoch=self.broker_epoch,
                                      current_metadata_offset=self.broker.metadata_offset,
                                      want_fence=self.want_fence,
                                      want_shut_down=want_shut_down)
