"""The request memory pool (queued.max.request.bytes, kbroker/server.py): large requests wait for room
before their bodies are read; one larger than the whole pool is let in alone. The bound under a real
burst is compat_tests/test_memory_bound.py."""

import pytest
import trio

from kbroker.server import RequestMemory

pytestmark = pytest.mark.trio


async def test_requests_past_the_bound_wait_until_others_are_handled():
    memory = RequestMemory(3_000_000)
    peak = [0]
    handled = []

    async def request(name: str, size: int) -> None:
        await memory.acquire(size)
        peak[0] = max(peak[0], memory.used_bytes)
        await trio.sleep(0.01)  # handled meanwhile
        handled.append(name)
        memory.release(size)

    async with trio.open_nursery() as nursery:
        for index in range(10):
            nursery.start_soon(request, f"r{index}", 1_000_000)
    assert len(handled) == 10 and peak[0] <= 3_000_000 and memory.used_bytes == 0


async def test_a_request_larger_than_the_pool_is_let_in_alone():
    memory = RequestMemory(1_000_000)
    await memory.acquire(400_000)
    admitted = trio.Event()

    async def huge() -> None:
        await memory.acquire(5_000_000)
        admitted.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(huge)
        await trio.sleep(0.01)
        assert not admitted.is_set()  # waits for the other to be handled
        memory.release(400_000)
        await admitted.wait()
        assert memory.used_bytes == 5_000_000
        memory.release(5_000_000)
