"""What a broker per test costs a user of kbroker's pytest plugin (issue 43): the same tests timed with
each way of getting a broker.

    python bench/test_double_bench.py [--tests 100] [--rounds 3] [--reset-samples 50]

Writes ``--tests`` pytest tests to a temporary directory, each creating a topic of its own, producing one
record to it with confluent-kafka and consuming it back, and runs them with ``python -m pytest`` once per
variant and round, the variants alternating so that drift in the machine falls on all alike:

- ``kbroker``: a fresh broker per test (the plugin's per-test fixture: from two broker hosts in turn,
  kbroker/testing/broker_host.py);
- ``in-process pool``: a fresh broker per test in the test's own process, started ahead of it in a
  thread (kbroker.testing.in_process_broker.BrokerPool: what the ``kbroker`` fixture was before its
  brokers moved to broker hosts);
- ``kbroker_session``: one broker shared by the session;
- ``kbroker_clean``: the shared broker, emptied after each test (kbroker/testing/reset.py);
- ``running_broker per test``: a fixture of the user's own around ``running_broker()``, as the plugin's
  documentation shows for a broker with settings: started and stopped in the test's time, with Kafka's
  50 partitions for ``__consumer_offsets`` (what the ``kbroker`` fixture cost before issue 43);
- ``external process``: no fixture of the plugin at all, a ``kbroker`` process started beforehand by this
  script (what a test pays for the produce and the consume alone, with the broker off its process).

A plugin in the generated conftest times each test from the start of its setup to the end of its
teardown (pytest's runtest protocol), as a user's clock sees it. Prints, per variant, the median test
(min-max of the rounds' medians) and its setup and teardown, what each costs over ``kbroker_session``
(the target: a per-test broker within 5 ms of it), and the whole pytest run's wall time divided by the
tests (start-up and the session's end included: what a broker stopped behind a test costs shows there).
Then, in this process, a broker's start and stop (``running_broker``), and ``reset()`` of a broker
holding a handful of topics with records, a group's committed offsets and a transaction (the target:
5 ms), the brokers with the fixtures' settings.

The machine's load moves every figure: compare variants within one run, never runs with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

TARGET_MS = 5
_TIMEOUT_S = 600
VARIANTS = ("kbroker", "in-process pool", "kbroker_session", "kbroker_clean", "running_broker per test", "external process")

CONFTEST = textwrap.dedent('''
    """Times each test (setup to teardown) and gives the tests the variant's broker as ``broker``."""
    import json
    import os
    import time

    import pytest

    VARIANT = os.environ["TEST_DOUBLE_BENCH_VARIANT"]
    _timings = []


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        started = time.perf_counter()
        yield
        _timings.append({"test": item.name, "ms": (time.perf_counter() - started) * 1000, **item.phase_ms})


    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        yield
        item.phase_ms = {**getattr(item, "phase_ms", {}), call.when: call.duration * 1000}


    def pytest_sessionfinish(session):
        with open(os.environ["TEST_DOUBLE_BENCH_OUTPUT"], "w") as file:
            json.dump(_timings, file)


    if VARIANT == "running_broker per test":
        from kbroker.testing import running_broker

        @pytest.fixture
        def broker():
            with running_broker() as running:
                yield running
    elif VARIANT == "in-process pool":
        from kbroker.testing import FIXTURE_SETTINGS
        from kbroker.testing.in_process_broker import BrokerPool

        @pytest.fixture(scope="session")
        def pool():
            pool = BrokerPool(settings=FIXTURE_SETTINGS)
            yield pool
            pool.close()

        @pytest.fixture
        def broker(pool):
            running = pool.take()
            yield running
            pool.give_back(running)
    elif VARIANT == "external process":
        from kbroker.testing.topic_creation import CreatesTopics

        class External(CreatesTopics):
            bootstrap = os.environ["TEST_DOUBLE_BENCH_BOOTSTRAP"]

        @pytest.fixture
        def broker():
            yield External()
    else:
        @pytest.fixture
        def broker(request):
            yield request.getfixturevalue(VARIANT)
''')

TESTS = textwrap.dedent('''
    import time

    import confluent_kafka
    import pytest

    RUN = time.time_ns()  # topic names of their own in every run, for the external broker's sake


    @pytest.mark.parametrize("index", range({tests}))
    def test_round_trip(broker, index):
        topic = f"round-trip-{{RUN}}-{{index}}"
        broker.create_topic(topic)
        producer = confluent_kafka.Producer({{"bootstrap.servers": broker.bootstrap}})
        producer.produce(topic, b"value %d" % index)
        assert producer.flush(10) == 0
        consumer = confluent_kafka.Consumer({{"bootstrap.servers": broker.bootstrap, "group.id": topic,
                                              "enable.auto.commit": False}})
        consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 10
        message = None
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.1)
        consumer.close()
        assert message is not None and message.error() is None and message.value() == b"value %d" % index
''')


def run_variant(variant: str, directory: Path, environment: dict, bootstrap: str) -> tuple[list[dict], float]:
    """Each test's timings in one pytest run of the variant, and the whole run's wall time in ms."""
    output = directory / "timings.json"
    environment = dict(environment, TEST_DOUBLE_BENCH_VARIANT=variant, TEST_DOUBLE_BENCH_OUTPUT=str(output),
                       TEST_DOUBLE_BENCH_BOOTSTRAP=bootstrap)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x"], cwd=directory,
                            env=environment, capture_output=True, text=True, timeout=_TIMEOUT_S)
    elapsed_ms = (time.perf_counter() - started) * 1000
    if result.returncode != 0:
        sys.exit(f"test_double_bench: the {variant} run failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return json.loads(output.read_text()), elapsed_ms


def measure_tests(args) -> None:
    from kbroker.testing import running_cluster

    environment = {name: value for name, value in os.environ.items()
                   if name not in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")}
    medians: dict[str, dict[str, list[float]]] = {variant: {"ms": [], "setup": [], "teardown": [], "run": []}
                                                  for variant in args.variants}
    with tempfile.TemporaryDirectory(prefix="test-double-bench-") as directory_name, \
            running_cluster(nodes=1) as external:
        directory = Path(directory_name)
        (directory / "conftest.py").write_text(CONFTEST)
        (directory / "test_round_trips.py").write_text(TESTS.format(tests=args.tests))
        for variant in args.variants:  # a warm-up of each: the file cache, the first imports
            run_variant(variant, directory, environment, external.bootstrap)
        for _ in range(args.rounds):
            for variant in args.variants:
                timings, run_ms = run_variant(variant, directory, environment, external.bootstrap)
                for figure in ("ms", "setup", "teardown"):
                    medians[variant][figure].append(statistics.median(timing[figure] for timing in timings))
                medians[variant]["run"].append(run_ms / args.tests)
    print(f"{args.tests} tests of one create_topic, one produce and one consume (confluent-kafka), "
          f"{args.rounds} rounds, variants alternating")
    print(f"  {'variant':<23} {'median test':>24} {'setup':>9} {'teardown':>9} {'over kbroker_session':>21} "
          f"{'whole run / tests':>18}")
    reference = statistics.median(medians["kbroker_session"]["ms"]) if "kbroker_session" in medians else None
    for variant, figures in medians.items():
        median_ms = statistics.median(figures["ms"])
        over = f"{median_ms - reference:+8.2f} ms" if reference is not None else "n/a"
        print(f"  {variant:<23} {median_ms:8.2f} ms ({min(figures['ms']):.2f}-{max(figures['ms']):.2f}) "
              f"{statistics.median(figures['setup']):6.2f} ms {statistics.median(figures['teardown']):6.2f} ms "
              f"{over:>21} {statistics.median(figures['run']):15.2f} ms")
    if reference is not None:
        for variant in ("kbroker", "in-process pool", "kbroker_clean"):
            if variant in medians:
                added = statistics.median(medians[variant]["ms"]) - reference
                verdict = "within" if added <= TARGET_MS else "over"
                print(f"  {variant} adds {added:+.2f} ms a test ({verdict} the {TARGET_MS} ms target)")


def measure_broker(args) -> None:
    """A broker's start and stop, and a reset, timed from the calling thread as a test sees them."""
    import confluent_kafka

    from kbroker.testing import FIXTURE_SETTINGS, running_broker

    with running_broker(settings=FIXTURE_SETTINGS):  # the first imports and compilations, not counted
        pass
    starts, stops = [], []
    for _ in range(args.reset_samples):
        started = time.perf_counter()
        blocks = running_broker(settings=FIXTURE_SETTINGS)
        blocks.__enter__()
        ready = time.perf_counter()
        blocks.__exit__(None, None, None)
        starts.append((ready - started) * 1000)
        stops.append((time.perf_counter() - ready) * 1000)
    resets = []
    with running_broker(settings=FIXTURE_SETTINGS) as running:  # as kbroker_clean's
        for sample in range(args.reset_samples + 1):
            fill(running, sample, args.topics, confluent_kafka)
            started = time.perf_counter()
            running.reset()
            if sample:  # the first reset imports its modules
                resets.append((time.perf_counter() - started) * 1000)
            assert not running.broker.image.topics.keys() - {"__consumer_offsets", "__transaction_state"}, \
                f"topics left after reset: {sorted(running.broker.image.topics)}"
    print(f"in this process, {args.reset_samples} samples each, the fixtures' settings (FIXTURE_SETTINGS):")
    print(f"  {'running_broker start':<26} {_summary(starts)}")
    print(f"  {'running_broker stop':<26} {_summary(stops)}")
    verdict = "within" if statistics.median(resets) <= TARGET_MS else "over"
    print(f"  {'reset, ' + str(args.topics) + ' topics':<26} {_summary(resets)}  ({verdict} the {TARGET_MS} ms target;"
          f" each time after {args.topics} topics with a record each, a group's commits and a transaction)")


def fill(running, sample: int, topics: int, confluent_kafka) -> None:
    """A handful of topics with a record each, a group's committed offsets and a committed transaction."""
    names = [f"filled-{sample}-{index}" for index in range(topics)]
    for name in names:
        running.create_topic(name)
    producer = confluent_kafka.Producer({"bootstrap.servers": running.bootstrap,
                                         "transactional.id": f"filler-{sample}"})
    producer.init_transactions(10)
    producer.begin_transaction()
    for name in names:
        producer.produce(name, b"value")
    producer.commit_transaction(10)
    consumer = confluent_kafka.Consumer({"bootstrap.servers": running.bootstrap, "group.id": f"filler-{sample}",
                                         "enable.auto.commit": False})
    consumer.commit(offsets=[confluent_kafka.TopicPartition(name, 0, 1) for name in names], asynchronous=False)
    consumer.close()


def _summary(values: list[float]) -> str:
    """median (min-max) in ms"""
    return f"{statistics.median(values):7.2f} ms  ({min(values):.2f}-{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tests", type=int, default=100, help="tests in the generated file (default 100)")
    parser.add_argument("--rounds", type=int, default=3, help="timed runs of each variant (default 3)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS, metavar="VARIANT",
                        help=f"which to run (default all: {', '.join(VARIANTS)})")
    parser.add_argument("--reset-samples", type=int, default=50, help="broker starts, stops and resets timed")
    parser.add_argument("--topics", type=int, default=5, help="topics a broker holds when it is reset (default 5)")
    args = parser.parse_args()
    measure_tests(args)
    measure_broker(args)


if __name__ == "__main__":
    main()
