"""The compiled-codec cache (kbroker/wire/schema/code_cache.py): what one run saves, the next loads
instead of compiling; a changed source, a foreign or damaged file and an unwritable folder are
handled as Python handles bytecode it cannot use, by compiling."""

import os
import subprocess
import sys
import textwrap

import pytest

from kbroker.wire.schema import code_cache

SOURCE = "def add(a, b):\n    return a + b\n"


@pytest.fixture
def cache_path(tmp_path):
    yield str(tmp_path / "__pycache__" / "codecs.marshal")
    code_cache._cache = None  # the tests' process compiles without a cache, as before


def run(code) -> object:
    namespace = {}
    exec(code, namespace)
    return namespace["add"]


def test_a_saved_cache_is_loaded_and_used_without_compiling(cache_path):
    code_cache.open_cache(cache_path)
    assert run(code_cache.compile_generated(SOURCE, "<generated add>"))(2, 3) == 5
    code_cache.save_cache()
    assert os.path.exists(cache_path)

    code_cache.open_cache(cache_path)  # the next run
    cached = code_cache._cache
    assert len(cached.codes) == 1
    assert run(code_cache.compile_generated(SOURCE, "<generated add>"))(2, 3) == 5
    assert not cached.dirty  # nothing compiled: nothing to save
    modified_at = os.stat(cache_path).st_mtime_ns
    code_cache.save_cache()
    assert os.stat(cache_path).st_mtime_ns == modified_at


def test_a_changed_source_misses_and_only_what_a_run_used_is_kept(cache_path):
    code_cache.open_cache(cache_path)
    code_cache.compile_generated(SOURCE, "<generated add>")
    code_cache.save_cache()
    code_cache.open_cache(cache_path)
    changed = SOURCE.replace("a + b", "a + b + 1")
    assert run(code_cache.compile_generated(changed, "<generated add>"))(2, 3) == 6
    code_cache.save_cache()
    code_cache.open_cache(cache_path)
    assert len(code_cache._cache.codes) == 1  # the old function was not used by the last run


@pytest.mark.parametrize("content", [b"", b"not a cache", b"kbroker codecs 0\n" + b"\0" * 40,
                                     b"kbroker codecs 1\n" + b"\x01\x02\x03"])
def test_a_foreign_or_damaged_file_is_ignored(cache_path, content):
    os.makedirs(os.path.dirname(cache_path))
    with open(cache_path, "wb") as target:
        target.write(content)
    code_cache.open_cache(cache_path)
    assert run(code_cache.compile_generated(SOURCE, "<generated add>"))(1, 1) == 2
    code_cache.save_cache()  # replaced by a good one
    code_cache.open_cache(cache_path)
    assert len(code_cache._cache.codes) == 1


def test_an_unwritable_folder_only_costs_the_saving(tmp_path):
    blocker = tmp_path / "a file"
    blocker.write_text("")
    code_cache.open_cache(str(blocker / "__pycache__" / "codecs.marshal"))  # a folder cannot be made under a file
    try:
        assert run(code_cache.compile_generated(SOURCE, "<generated add>"))(1, 2) == 3
        code_cache.save_cache()
    finally:
        code_cache._cache = None


def test_the_codec_compiles_the_same_through_the_cache(cache_path):
    """A fresh process with the cache open round-trips a request; a second one does so from the cache alone."""
    script = textwrap.dedent(f"""
        from kbroker.wire.schema import API_BY_NAME, code_cache
        code_cache.open_cache({cache_path!r})
        api = API_BY_NAME["CreateTopics"]
        request = api.request_class(topics=[api.request_class.CreatableTopic(
            name="t", num_partitions=3, replication_factor=1, assignments=[], configs=[])], timeout_ms=5)
        assert api.decode_request(7, api.encode_request(7, request)) == request
        print(code_cache._cache.dirty)
        code_cache.save_cache()
    """)
    outputs = [subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
               for _ in range(2)]
    assert outputs == ["True\n", "False\n"]
