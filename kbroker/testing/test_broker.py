"""``kbroker test-broker``: a broker for the tests of any language, with its control API.

    kbroker test-broker [--override KEY=VALUE ...] [--exit-on-stdin-close]

It starts the broker the pytest plugin gives a Python test (kbroker.testing.running_broker: in this
process, on a free loopback port, data in a temporary directory removed at the end) and its control
API (kbroker/testing/control_http.py) on another free loopback port, then prints exactly one line to
standard output and flushes it:

    {"bootstrap": "127.0.0.1:P", "control": "http://127.0.0.1:Q", "pid": N}

Nothing else is written there afterwards (standard output is pointed at standard error once the line is
out, so a parent that stops reading cannot block the broker); the broker's warnings go to standard error.

It stops, cleanly, on whichever comes first:
  * its parent process ending: the parent id is read every PARENT_POLL_S, and a change (the process was
    handed to init or a subreaper) stops it. Linux's PR_SET_PDEATHSIG was not taken: it fires when the
    *thread* that started the process ends, and the JVM and Go start processes from threads that come
    and go; polling works the same on every platform;
  * SIGTERM or SIGINT;
  * with ``--exit-on-stdin-close``, its standard input reaching its end: a parent that holds the write
    end of a pipe stops it by closing it, and its own death closes it too.
A start that fails prints one line to standard error and exits 2 (a bad setting) or 1.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading

PARENT_POLL_S = 0.25


def run(overrides: list[str], exit_on_stdin_close: bool = False) -> int:
    """Serve a test broker until told to stop (see the module's docstring); the command's exit status."""
    started_by = os.getppid()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        settings = _settings(overrides)
    except ValueError as error:
        print(f"kbroker test-broker: {error}", file=sys.stderr)
        return 2

    from kbroker.config import ConfigError
    from kbroker.wire.schema import code_cache

    code_cache.open_cache()  # the codecs a last run compiled, as the kbroker command keeps them
    try:
        return _serve(settings, started_by, stop, exit_on_stdin_close)
    except ConfigError as error:
        print(f"kbroker test-broker: {error}", file=sys.stderr)
        return 2
    except (OSError, RuntimeError) as error:
        print(f"kbroker test-broker: cannot start: {error}", file=sys.stderr)
        return 1
    finally:
        code_cache.save_cache()


def _settings(overrides: list[str]) -> dict[str, str]:
    settings = {}
    for override in overrides:
        name, equals, value = override.partition("=")
        if not equals or not name.strip():
            raise ValueError(f"--override expects KEY=VALUE, got {override!r}")
        settings[name.strip()] = value
    return settings


def _serve(settings: dict, started_by: int, stop: threading.Event, exit_on_stdin_close: bool) -> int:
    from kbroker.testing.control_http import ControlServer
    from kbroker.testing.in_process_broker import running_broker

    with running_broker(settings=settings) as running, ControlServer(running) as control:
        _announce({"bootstrap": running.bootstrap, "control": control.url, "pid": os.getpid()})
        if exit_on_stdin_close:
            threading.Thread(target=_wait_for_end_of_input, args=(stop,), name="kbroker-stdin", daemon=True).start()
        while not stop.wait(PARENT_POLL_S):
            if os.getppid() != started_by:
                break
    return 0


def _announce(line: dict) -> None:
    """The one line on standard output; then standard output goes to standard error, for good."""
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    sys.stdout = sys.stderr
    os.dup2(2, 1)


def _wait_for_end_of_input(stop: threading.Event) -> None:
    try:
        while os.read(0, 4096):
            pass
    except OSError:
        pass
    stop.set()
