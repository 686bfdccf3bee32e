"""Compiled codec functions kept between a broker's runs, as Python keeps ``.pyc`` files.

The codec writes a reader and a writer for each struct and version the first time a
process uses them (codegen.py), and a value class's constructor the first time one is
built (values.py). Compiling that generated source is most of the work a broker does
between serving and answering its first produce: some 20 ms on 2 cores. The ``kbroker``
command turns this cache on (``open_cache``): the code objects it compiles are saved at
its clean stop in ``__pycache__/codecs.<python tag>.marshal`` beside this file, keyed by
their source text, and the next start loads them instead of compiling. A changed source
misses and is compiled anew; a cache that cannot be read or written is left alone, as
Python does with bytecode it cannot cache: the cache only ever saves time.

Only code objects are kept (``marshal``, the format of ``.pyc`` files), never the values
they were built with: a generated function still takes its constants from the namespace
its generator fills in each run.
"""

from __future__ import annotations

import hashlib
import importlib.util
import marshal
import os
import sys
import tempfile

_FORMAT = b"kbroker codecs 1\n" + importlib.util.MAGIC_NUMBER  # another Python or layout: not read


class _Cache:
    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[bytes, object] = {}
        self.used: set[bytes] = set()
        self.dirty = False

    def load(self) -> None:
        try:
            with open(self.path, "rb") as source:
                if source.read(len(_FORMAT)) != _FORMAT:
                    return
                codes = marshal.load(source)
        except (OSError, EOFError, ValueError, TypeError):
            return
        if isinstance(codes, dict):
            self.codes = codes

    def compile(self, source: str, filename: str):
        key = hashlib.blake2b(f"{filename}\0{source}".encode(), digest_size=16).digest()
        self.used.add(key)
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = compile(source, filename, "exec")
            self.dirty = True
        return code

    def save(self) -> None:
        """Keep what this run used (so the file holds one broker's working set, not every codec
        any run ever made), atomically: a reader sees the old file or the new one."""
        if not self.dirty:
            return
        kept = {key: code for key, code in self.codes.items() if key in self.used}
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".codecs-")
            try:
                os.chmod(descriptor, 0o644)  # as Python's own bytecode files
                with os.fdopen(descriptor, "wb") as target:
                    target.write(_FORMAT)
                    marshal.dump(kept, target)
                os.replace(temporary, self.path)
            except BaseException:
                os.unlink(temporary)
                raise
        except OSError:
            return
        self.dirty = False


_cache: _Cache | None = None


def default_path() -> str:
    return os.path.join(os.path.dirname(__file__), "__pycache__", f"codecs.{sys.implementation.cache_tag}.marshal")


def open_cache(path: str | None = None) -> None:
    """Compile through the cache at ``path`` (by default beside this module) from now on."""
    global _cache
    _cache = _Cache(path or default_path())
    _cache.load()


def save_cache() -> None:
    if _cache is not None:
        _cache.save()


def compile_generated(source: str, filename: str):
    """``compile(source, filename, "exec")``, from the cache when one is open and holds it."""
    if _cache is None:
        return compile(source, filename, "exec")
    return _cache.compile(source, filename)
