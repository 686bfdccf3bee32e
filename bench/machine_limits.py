"""The machine's own ceilings, measured in the benchmark's run so broker figures can be read against them.

    python bench/machine_limits.py [--dir /tmp] [--smoke]

  loopback TCP copy   one thread sends, another receives, over 127.0.0.1, 1 MiB at a time
  file write          sequential 1 MiB writes to a new file in ``--dir``: without any sync
                      (page cache), twice, and with fdatasync after every 1 MiB (device and
                      filesystem). The first pass can be far slower than the second: on the
                      VM this was written on, fresh page-cache pages cost ~0.6 GB/s (freed memory
                      seemingly handed back to the host) while the second pass, reusing the pages
                      the first file freed, ran at ~5.7 GB/s. A broker writing new data meets
                      the first case.
Every figure is bounded in bytes and in seconds; files are removed afterwards. MB = 10^6 bytes.
--smoke takes each figure from at most 8 MiB in at most 1 s: it shows the script works, not the machine.
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import threading
import time

CHUNK_BYTES = 1024 * 1024
LOOPBACK_BYTES = 2 * 1024**3
WRITE_BYTES = 512 * 1024**2
SYNCED_WRITE_BYTES = 256 * 1024**2
LIMIT_S = 5.0
SMOKE_BYTES = 8 * CHUNK_BYTES
SMOKE_LIMIT_S = 1.0
SOCKET_TIMEOUT_S = 10.0


def loopback_copy_mb_s(total_bytes: int = LOOPBACK_BYTES, limit_s: float = LIMIT_S) -> float:
    """Bytes per second through one TCP connection on 127.0.0.1, counted at the receiver."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(SOCKET_TIMEOUT_S)
        outcome: dict = {}
        receiver = threading.Thread(target=_receive_all, args=(listener, total_bytes, outcome), daemon=True)
        receiver.start()
        payload = os.urandom(CHUNK_BYTES)
        with socket.create_connection(listener.getsockname(), timeout=SOCKET_TIMEOUT_S) as sender:
            started = time.perf_counter()
            sent = 0
            while sent < total_bytes and time.perf_counter() - started < limit_s:
                sender.sendall(payload)
                sent += len(payload)
        receiver.join(SOCKET_TIMEOUT_S)
    if "error" in outcome:
        raise outcome["error"]
    if outcome.get("bytes") != sent:
        raise RuntimeError(f"loopback: received {outcome.get('bytes')} of {sent} bytes")
    return outcome["bytes"] / (outcome["finished"] - started) / 1e6


def _receive_all(listener: socket.socket, expected_bytes: int, outcome: dict) -> None:
    try:
        connection, _address = listener.accept()
        with connection:
            connection.settimeout(SOCKET_TIMEOUT_S)
            buffer = memoryview(bytearray(CHUNK_BYTES))
            received = 0
            while True:  # until the sender closes; each wait bounded by the socket timeout
                count = connection.recv_into(buffer)
                if not count:
                    break
                received += count
            outcome.update(bytes=received, finished=time.perf_counter())
    except Exception as error:  # handed to the measuring thread
        outcome["error"] = error


def file_write_mb_s(directory: str, total_bytes: int, sync_every_chunk: bool, limit_s: float = LIMIT_S) -> float:
    """Sequential 1 MiB writes to a fresh file; with ``sync_every_chunk`` each is fdatasynced."""
    payload = os.urandom(CHUNK_BYTES)
    descriptor, path = tempfile.mkstemp(prefix="machine-limits-", dir=directory)
    try:
        started = time.perf_counter()
        written = 0
        while written < total_bytes and time.perf_counter() - started < limit_s:
            written += os.write(descriptor, payload)
            if sync_every_chunk:
                os.fdatasync(descriptor)
        os.close(descriptor)
        descriptor = -1
        elapsed = time.perf_counter() - started
    finally:
        if descriptor >= 0:
            os.close(descriptor)
        os.unlink(path)
    return written / elapsed / 1e6


def measure(directory: str, smoke: bool = False) -> dict[str, float]:
    """Every figure, in MB/s, keyed by the name the benchmark table shows; with ``smoke`` each from at most
    SMOKE_BYTES in SMOKE_LIMIT_S."""
    if smoke:
        loopback_bytes = write_bytes = synced_bytes = SMOKE_BYTES
        limit_s = SMOKE_LIMIT_S
    else:
        loopback_bytes, write_bytes, synced_bytes, limit_s = LOOPBACK_BYTES, WRITE_BYTES, SYNCED_WRITE_BYTES, LIMIT_S
    return {
        "loopback TCP copy": loopback_copy_mb_s(loopback_bytes, limit_s),
        "file write, no sync, first pass": file_write_mb_s(directory, write_bytes, False, limit_s),
        "file write, no sync, second pass": file_write_mb_s(directory, write_bytes, False, limit_s),
        "file write, fdatasync per MiB": file_write_mb_s(directory, synced_bytes, True, limit_s),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the write test puts its file")
    parser.add_argument("--smoke", action="store_true", help="each figure from at most 8 MiB in 1 s (a check that "
                        "the script runs, not a measurement)")
    arguments = parser.parse_args()
    for name, value in measure(arguments.dir, arguments.smoke).items():
        print(f"{name:34} {value:8.0f} MB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
