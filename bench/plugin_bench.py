"""What kbroker's pytest plugin costs every pytest run in an environment where kbroker is installed.

    python bench/plugin_bench.py [--runs 20]

Times ``python -m pytest --co -q`` of one trivial test file in a temporary directory, process spawn
to exit, with the plugin loaded (as any run loads it, through its pytest11 entry point) and with it
disabled (``-p no:kbroker``), the two alternating run after run after one warm-up of each, so
drift in the machine falls on both alike. A check first confirms that only the first loads the
plugin. Prints median (min-max) of each and the difference of the medians; the target is within
50 ms (issue 23). Other installed plugins (pytest-trio, hypothesis, ...) load in both. On a busy
machine a process's start-up varies by more than the plugin costs, so it also prints the plugin's
own import (``python -X importtime``, cumulative, in a process that imported pytest first), once per
run: what loading the plugin adds, without the spawn's noise.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MS = 50
_TIMEOUT_S = 120
VARIANTS = {"with the kbroker plugin": [], "without (-p no:kbroker)": ["-p", "no:kbroker"]}


def pytest_command(*options: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *options]


def run_ms(command: list[str], directory: Path, environment: dict) -> float:
    started = time.perf_counter()
    subprocess.run(command, cwd=directory, env=environment, check=True, stdout=subprocess.DEVNULL,
                   timeout=_TIMEOUT_S)
    return (time.perf_counter() - started) * 1000


def plugin_import_ms(environment: dict) -> float:
    """kbroker.testing's cumulative import time in a fresh process that has imported pytest already."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", "import pytest, kbroker.testing"],
                            env=environment, check=True, capture_output=True, text=True, timeout=_TIMEOUT_S)
    for line in result.stderr.splitlines():  # import time: self [us] | cumulative | imported package
        _, cumulative_us, module = line.split("|")
        if module.strip() == "kbroker.testing":
            return int(cumulative_us) / 1000
    sys.exit("plugin_bench: python -X importtime did not report kbroker.testing")


def check_variants(directory: Path, environment: dict) -> None:
    """The plugin's fixtures are listed with it and not without it: the two runs differ by the plugin."""
    for name, options in VARIANTS.items():
        shown = subprocess.run(pytest_command("--fixtures", *options), cwd=directory, env=environment, check=True,
                               capture_output=True, text=True, timeout=_TIMEOUT_S).stdout
        if ("from kbroker.testing" in shown) != (not options):
            sys.exit(f"plugin_bench: the run {name} does not load the plugin as expected")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="timed runs of each variant (default 20)")
    args = parser.parse_args()
    environment = {name: value for name, value in os.environ.items()
                   if name not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    timings: dict[str, list[float]] = {name: [] for name in VARIANTS}
    import_ms = []
    with tempfile.TemporaryDirectory(prefix="plugin-bench-") as directory_name:
        directory = Path(directory_name)
        (directory / "test_trivial.py").write_text("def test_trivial():\n    pass\n")
        check_variants(directory, environment)
        for run in range(args.runs + 1):  # run 0 warms the file cache and is not counted
            for name, options in VARIANTS.items():
                elapsed_ms = run_ms(pytest_command("--co", "-q", *options), directory, environment)
                if run:
                    timings[name].append(elapsed_ms)
            if run:
                import_ms.append(plugin_import_ms(environment))
    print(f"pytest start-up: python -m pytest --co -q of one trivial test, {args.runs} runs each, alternating")
    for name, values in timings.items():
        print(f"  {name:<26} {_summary(values)}")
    difference_ms = statistics.median(timings["with the kbroker plugin"]) \
        - statistics.median(timings["without (-p no:kbroker)"])
    verdict = "within" if difference_ms <= TARGET_MS else "over"
    print(f"  {'difference of medians':<26} {difference_ms:+7.1f} ms  ({verdict} the {TARGET_MS} ms target)")
    print(f"  {'import of kbroker.testing':<26} {_summary(import_ms, digits=2)}")


def _summary(values: list[float], digits: int = 1) -> str:
    """median (min-max) in ms"""
    return f"{statistics.median(values):7.{digits}f} ms  ({min(values):.{digits}f}-{max(values):.{digits}f})"


if __name__ == "__main__":
    main()
