"""Jars from Maven Central for the project's JVM needs, through one pom (testkit/jvm/pom.xml) whose profiles
each name one set (``kafka``: an Apache Kafka broker).

``classpath(profile)`` runs one Maven command,

    mvn -q -B -f testkit/jvm/pom.xml -P<profile> -Dmaven.repo.local=<repository>
        dependency:build-classpath -Dmdep.outputFile=<file>

with the local repository outside the checkout (``~/.cache/kbroker-maven/repository``, or
``$KBTEST_MAVEN_REPO``), and keeps the classpath it wrote, keyed by a hash of the pom, the profile and the
repository's path, so that later runs start no Maven at all while every jar is still there. Where ``mvn``
is missing, Maven Central cannot be reached or the command outlasts ``MVN_TIMEOUT_S``, it raises
:class:`Unavailable` with one line saying so, for a test to skip with (or to fail with, on CI).

``python -m testkit.maven prefetch kafka [profile ...]`` resolves the profiles before a test run (.ci/run);
it exits 1 with that line when one cannot be resolved. This module uses the standard library only, so that
.ci/run can run it with the machine's python3 before the virtual environment exists.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

POM = Path(__file__).resolve().parent / "jvm" / "pom.xml"
# The first resolution of the kafka profile downloads about 100 MB; later ones only read the pom.
MVN_TIMEOUT_S = 900
_ERROR_LINE_CHARS_MAX = 300
_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # Maven 3.8 colours some lines even in batch mode


class Unavailable(Exception):
    """A JVM dependency cannot be had on this machine; the message is one line saying why."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kbroker-maven"


def repository() -> Path:
    """Maven's local repository: ``$KBTEST_MAVEN_REPO``, else ``~/.cache/kbroker-maven/repository``."""
    named = os.environ.get("KBTEST_MAVEN_REPO")
    return Path(named).expanduser().resolve() if named else cache_dir() / "repository"


def classpath(profile: str) -> list[Path]:
    """The jars of ``profile`` in the pom, in Maven's order, resolved once and then read from the cache."""
    if f"<id>{profile}</id>" not in POM.read_text():
        raise ValueError(f"{POM} has no profile {profile!r}")
    cached = _cached_classpath_file(profile)
    jars = _read_classpath(cached)
    if jars is not None:
        return jars
    _resolve(profile, cached)
    jars = _read_classpath(cached)
    if jars is None:
        raise Unavailable(f"Maven resolved the {profile!r} profile but its classpath names jars that are not there "
                          f"(in {repository()})")
    return jars


def classpath_text(profile: str) -> str:
    """``classpath(profile)`` as one ``-cp`` argument."""
    return os.pathsep.join(map(str, classpath(profile)))


def _cached_classpath_file(profile: str) -> Path:
    digest = hashlib.sha256(POM.read_bytes())
    digest.update(b"\0" + profile.encode() + b"\0" + str(repository()).encode())
    return cache_dir() / "classpaths" / f"{profile}-{digest.hexdigest()[:16]}.txt"


def _read_classpath(path: Path) -> list[Path] | None:
    """The jars listed in ``path``, or None if it is missing, empty or names a jar no longer there."""
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    jars = [Path(entry) for entry in text.split(os.pathsep) if entry]
    if not jars or not all(jar.is_file() for jar in jars):
        return None
    return jars


def _resolve(profile: str, target: Path) -> None:
    """Run the one Maven command for ``profile``, its classpath written to ``target`` (atomically)."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise Unavailable("mvn not found on PATH (the reference Kafka's jars come from Maven Central through Maven)")
    try:
        repository().mkdir(parents=True, exist_ok=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, partial = tempfile.mkstemp(prefix=target.name, suffix=".part", dir=target.parent)
    except OSError as error:
        raise Unavailable(f"no room for Maven's jars: {error}") from None
    os.close(handle)
    command = [mvn, "-q", "-B", "-Dstyle.color=never", "-f", str(POM), f"-P{profile}",
               f"-Dmaven.repo.local={repository()}", "dependency:build-classpath", f"-Dmdep.outputFile={partial}"]
    try:
        try:
            result = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                    timeout=MVN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise Unavailable(f"Maven did not resolve the {profile!r} profile within {MVN_TIMEOUT_S} s "
                              "(is Maven Central reachable?)") from None
        except OSError as error:
            raise Unavailable(f"could not run mvn: {error}") from None
        if result.returncode != 0:
            raise Unavailable(f"Maven could not resolve the {profile!r} profile (is Maven Central reachable?): "
                              f"{_first_error(result.stdout + result.stderr)}")
        os.replace(partial, target)
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _first_error(output: str) -> str:
    """Maven's first [ERROR] line (the cause; later ones are advice), shortened to one line."""
    lines = [_ANSI_ESCAPE.sub("", line).strip() for line in output.splitlines()]
    lines = [line for line in lines if line]
    errors = [line.removeprefix("[ERROR]").removesuffix("-> [Help 1]").strip()
              for line in lines if line.startswith("[ERROR]")]
    first = next((line for line in errors if line), lines[-1] if lines else "no output")
    return first if len(first) <= _ERROR_LINE_CHARS_MAX else first[:_ERROR_LINE_CHARS_MAX - 3] + "..."


def main(arguments: list[str]) -> int:
    if len(arguments) < 2 or arguments[0] != "prefetch":
        print("usage: python -m testkit.maven prefetch PROFILE [PROFILE ...]", file=sys.stderr)
        return 2
    for profile in arguments[1:]:
        started = time.monotonic()
        try:
            jars = classpath(profile)
        except Unavailable as missing:
            print(f"testkit.maven: {missing}", file=sys.stderr)
            return 1
        print(f"testkit.maven: {profile}: {len(jars)} jars in {repository()} "
              f"({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
