"""CRC-32C (Castagnoli), the checksum of record batches, from the ``crc32c`` package's C extension.

The extension is loaded on its own: the package's ``__init__`` also imports
``importlib.metadata`` (and with it the ``email`` package) to learn its own
version, which is 13 ms of a broker's cold start. Should the layout of the
package change, the plain import is the fallback.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os


def _load():
    spec = importlib.util.find_spec("crc32c")  # locates the package without running it
    for directory in (spec.submodule_search_locations or []) if spec is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, "_crc32c" + suffix)
            if os.path.exists(path):
                loader = importlib.machinery.ExtensionFileLoader("crc32c._crc32c", path)
                module = importlib.util.module_from_spec(importlib.util.spec_from_loader("crc32c._crc32c", loader))
                loader.exec_module(module)
                return module.crc32c
    from crc32c import crc32c as fallback

    return fallback


crc32c = _load()
