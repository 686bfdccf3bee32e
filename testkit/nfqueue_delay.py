"""A userspace packet delayer on NFQUEUE, for kernels without the netem qdisc.

    ip netns exec NAME python -m testkit.nfqueue_delay --queue 0 --delay-ms 100 [--jitter-ms 20]
                                                      [--loss-percent 10 --seed 7]

Firewall rules in the namespace send packets to queue ``--queue``; this process holds each one for
``--delay-ms`` (plus a uniform jitter of up to ``--jitter-ms`` either way) and then lets it go, in the
order the packets arrived, so a TCP stream is slowed but never reordered. With ``--loss-percent`` a
packet is dropped instead, drawn from a ``random.Random(--seed)``, so loss and delay combine. It prints
``ready`` on standard output once the queue is bound (packets sent to the queue before then pass
undelayed, through the rule's ``bypass``), and on SIGTERM or SIGINT lets every held packet go at once
before it exits.

It speaks the nfnetlink_queue protocol itself over a netlink socket, with ``struct``:
- ``AF_NETLINK`` / ``NETLINK_NETFILTER`` (CONFIG_NETFILTER_NETLINK, CONFIG_NETFILTER_NETLINK_QUEUE);
  each message is an ``nlmsghdr``, then ``struct nfgenmsg`` (family, version 0, the queue number
  big-endian), then attributes as (u16 length, u16 type) TLVs padded to 4 bytes, their payloads
  big-endian;
- NFQNL_MSG_CONFIG: bind the queue, copy mode META (the packet's id and metadata, none of its bytes:
  the delayer needs nothing else), the kernel's queue length (NFQA_CFG_QUEUE_MAXLEN) and the flags
  NFQA_CFG_F_FAIL_OPEN (a full queue lets packets through rather than dropping them) and
  NFQA_CFG_F_GSO (large segments are queued whole, not split for us);
- NFQNL_MSG_PACKET in, its id read from NFQA_PACKET_HDR; NFQNL_MSG_VERDICT (NF_ACCEPT or NF_DROP) out;
- a rule that feeds the queue: nftables' ``queue`` statement (CONFIG_NFT_QUEUE) or xtables' NFQUEUE
  target (CONFIG_NETFILTER_XT_TARGET_NFQUEUE, through CONFIG_NFT_COMPAT with iptables-nft), made by
  ``testkit.netns``, with ``bypass``: with no process bound to the queue the kernel accepts the
  packets, so a dead delayer never blackholes a host. (Closing the socket destroys the
  queue and the kernel drops what it still held: hence the accept-all on SIGTERM.)
The process ends by itself within a second of its parent's death (it watches its parent's pid), so
a killed test leaves no delayer holding its namespace.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import select
import signal
import socket
import struct
import sys
import time

NETLINK_NETFILTER = 12
NLMSG_ERROR = 2
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN, NFQA_CFG_MASK, NFQA_CFG_FLAGS = 1, 2, 3, 4, 5
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_PF_BIND = 1, 3
NFQNL_COPY_META = 1
NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_GSO = 1 << 0, 1 << 2
NF_DROP, NF_ACCEPT = 0, 1
NLA_TYPE_MASK = 0x3FFF  # the attribute type without the nested and byte-order flag bits

NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id (host order)
NFGENMSG = struct.Struct("!BBH")  # family, version, resource id = queue number (big-endian)
ATTRIBUTE_HEADER = struct.Struct("=HH")  # length, type (host order, as every netlink attribute)

QUEUE_LENGTH_MAX = 4096  # packets the kernel holds for us; past that FAIL_OPEN lets them through
# Room for every announcement the kernel can have pending (QUEUE_LENGTH_MAX of them, about 1 KiB of
# buffer each): a lost announcement (ENOBUFS) would leave its packet held until the queue closes.
RECEIVE_BUFFER_BYTES = 8 << 20
ACK_TIMEOUT_S = 2.0
PARENT_CHECK_S = 1.0  # how often the loop looks whether its parent died, when no packet wakes it


def attribute(kind: int, payload: bytes) -> bytes:
    header = ATTRIBUTE_HEADER.pack(ATTRIBUTE_HEADER.size + len(payload), kind)
    return header + payload + b"\0" * (-len(payload) % 4)


def parse_attributes(data: memoryview) -> dict[int, memoryview]:
    found, offset = {}, 0
    while offset + ATTRIBUTE_HEADER.size <= len(data):
        length, kind = ATTRIBUTE_HEADER.unpack_from(data, offset)
        if length < ATTRIBUTE_HEADER.size:
            break
        found[kind & NLA_TYPE_MASK] = data[offset + ATTRIBUTE_HEADER.size:offset + length]
        offset += (length + 3) & ~3
    return found


class QueueSocket:
    """One netlink socket bound to one nfnetlink queue."""

    def __init__(self, queue_number: int) -> None:
        self.queue_number = queue_number
        self.sequence = 0
        self.socket = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:  # root may go past net.core.rmem_max; otherwise take what the ordinary call allows
            self.socket.setsockopt(socket.SOL_SOCKET, 33, RECEIVE_BUFFER_BYTES)  # SO_RCVBUFFORCE
        except OSError:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER_BYTES)
        self.socket.bind((0, 0))

    def send(self, message_type: int, family: int, attributes: bytes, acknowledged: bool = False) -> int:
        self.sequence += 1
        flags = NLM_F_REQUEST | (NLM_F_ACK if acknowledged else 0)
        body = NFGENMSG.pack(family, 0, self.queue_number) + attributes
        header = NLMSG_HEADER.pack(NLMSG_HEADER.size + len(body), (NFNL_SUBSYS_QUEUE << 8) | message_type, flags,
                                   self.sequence, 0)
        self.socket.send(header + body)
        return self.sequence

    def configure(self, attributes: bytes, family: int = socket.AF_UNSPEC) -> None:
        """Sends one NFQNL_MSG_CONFIG and waits (bounded) for the kernel's acknowledgement."""
        sequence = self.send(NFQNL_MSG_CONFIG, family, attributes, acknowledged=True)
        deadline = time.monotonic() + ACK_TIMEOUT_S
        while (left_s := deadline - time.monotonic()) > 0:
            if not select.select([self.socket], [], [], left_s)[0]:
                break
            for message_type, message_sequence, payload in self.messages(self.socket.recv(1 << 16)):
                if message_type == NLMSG_ERROR and message_sequence == sequence:
                    error = -struct.unpack_from("=i", payload)[0]
                    if error:
                        raise OSError(error, f"nfqueue config: {os.strerror(error)}")
                    return
        raise TimeoutError("nfqueue config: no acknowledgement from the kernel")

    def bind(self, queue_length_max: int) -> None:
        # PF_BIND is a no-op on current kernels, and needed (per family) on old ones.
        self.configure(attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_PF_BIND, socket.AF_INET)),
                       family=socket.AF_INET)
        self.configure(attribute(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0)))
        self.configure(attribute(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META)))
        self.configure(attribute(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", queue_length_max)))
        flags = NFQA_CFG_F_FAIL_OPEN | NFQA_CFG_F_GSO
        try:
            self.configure(attribute(NFQA_CFG_MASK, struct.pack("!I", flags))
                           + attribute(NFQA_CFG_FLAGS, struct.pack("!I", flags)))
        except OSError as error:  # a kernel before 3.6 knows no flags: delay still works, fail-closed
            print(f"nfqueue_delay: queue flags not set ({error})", file=sys.stderr)

    def verdict(self, packet_id: int, verdict: int) -> None:
        header = struct.pack("!II", verdict, packet_id)
        self.send(NFQNL_MSG_VERDICT, socket.AF_UNSPEC, attribute(NFQA_VERDICT_HDR, header))

    @staticmethod
    def messages(data: bytes):
        """(type, sequence, payload after the nlmsghdr) of each netlink message in ``data``."""
        view, offset = memoryview(data), 0
        while offset + NLMSG_HEADER.size <= len(view):
            length, message_type, _, sequence, _ = NLMSG_HEADER.unpack_from(view, offset)
            if length < NLMSG_HEADER.size:
                break
            yield message_type, sequence, view[offset + NLMSG_HEADER.size:offset + length]
            offset += (length + 3) & ~3

    def packet_ids(self, data: bytes):
        """The id of each queued packet announced in ``data``."""
        for message_type, _, payload in self.messages(data):
            if message_type != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                continue
            header = parse_attributes(payload[NFGENMSG.size:]).get(NFQA_PACKET_HDR)
            if header is not None and len(header) >= 4:
                yield struct.unpack_from("!I", header)[0]


class Delayer:
    """Holds packets for their delay and lets them go in arrival order (the decisions, without I/O)."""

    def __init__(self, delay_ms: float, jitter_ms: float, loss_percent: float, seed: int) -> None:
        self.delay_s = delay_ms / 1000
        self.jitter_s = jitter_ms / 1000
        self.loss_fraction = loss_percent / 100
        self.random = random.Random(seed)
        self.held: collections.deque[tuple[float, int]] = collections.deque()  # (due, packet id), due ascending

    def arrived(self, packet_id: int, now: float) -> bool:
        """False: drop the packet now. True: it is held."""
        if self.loss_fraction and self.random.random() < self.loss_fraction:
            return False
        jitter_s = self.random.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0
        due = max(now + max(self.delay_s + jitter_s, 0.0), self.held[-1][0] if self.held else 0.0)
        self.held.append((due, packet_id))  # never before the one ahead of it: arrival order is kept
        return True

    def due(self, now: float) -> list[int]:
        released = []
        while self.held and self.held[0][0] <= now:
            released.append(self.held.popleft()[1])
        return released

    def wait_s(self, now: float) -> float:
        return max(self.held[0][0] - now, 0.0) if self.held else PARENT_CHECK_S


def run(queue_number: int, delayer: Delayer) -> None:
    # A signal writes to this pipe, so that it wakes the select (which Python retries after a signal).
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    stopping = []
    for signal_number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signal_number, lambda *_: stopping.append(True))
    parent_pid = os.getppid()
    queue = QueueSocket(queue_number)
    queue.bind(QUEUE_LENGTH_MAX)
    print("ready", flush=True)
    while not stopping and os.getppid() == parent_pid:
        wait_s = min(delayer.wait_s(time.monotonic()), PARENT_CHECK_S)
        readable = select.select([queue.socket, wakeup_read], [], [], wait_s)[0]
        now = time.monotonic()
        if queue.socket in readable:
            try:
                data = queue.socket.recv(1 << 16)
            except OSError as error:  # ENOBUFS, which the buffer's size rules out; said, not hidden
                print(f"nfqueue_delay: {error}", file=sys.stderr)
                data = b""
            for packet_id in queue.packet_ids(data):
                if not delayer.arrived(packet_id, now):
                    queue.verdict(packet_id, NF_DROP)
        for packet_id in delayer.due(time.monotonic()):
            queue.verdict(packet_id, NF_ACCEPT)
    for packet_id in delayer.due(float("inf")):  # the kernel would drop what is still held when we close
        queue.verdict(packet_id, NF_ACCEPT)
    queue.socket.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m testkit.nfqueue_delay", description=__doc__.split("\n")[0])
    parser.add_argument("--queue", type=int, default=0, help="the nfnetlink queue number the rules send to")
    parser.add_argument("--delay-ms", type=float, required=True)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--loss-percent", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    options = parser.parse_args(argv)
    run(options.queue, Delayer(options.delay_ms, options.jitter_ms, options.loss_percent, options.seed))


if __name__ == "__main__":
    main()
