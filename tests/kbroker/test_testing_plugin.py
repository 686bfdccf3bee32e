"""The pytest plugin (kbroker/testing): cheap to load, fixtures that stock clients can use."""

import importlib.metadata
import os
import subprocess
import sys
import textwrap

import confluent_kafka
import confluent_kafka.admin


# What loading the plugin must not import: the packages of the broker and the event loop.
BROKER_PACKAGES = {"trio", "wire", "log", "raft", "kbroker"}
LIGHT_MODULES = {"kbroker", "kbroker.testing"}


def run_python(code: str, **options) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, **options)


# -- loading the plugin imports nothing heavy ----------------------------------------------------------------

def test_pytest_loads_kbroker_testing_as_the_plugin():
    [entry_point] = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "kbroker"]
    assert entry_point.value == "kbroker.testing"


def test_importing_the_plugin_imports_no_broker():
    result = run_python("import sys, kbroker.testing; print(*sys.modules, sep='\\n')")
    assert result.returncode == 0, result.stderr
    assert {name for name in result.stdout.split() if name.split(".")[0] in BROKER_PACKAGES} == LIGHT_MODULES


def test_the_old_imports_still_work_and_bring_the_broker_only_then():
    result = run_python("import sys; from kbroker.testing import running_broker, RunningBroker; "
                        "print('trio' in sys.modules, 'kbroker.broker' in sys.modules, RunningBroker.__module__)")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "kbroker.testing.in_process_broker"]


def test_a_pytest_run_imports_the_broker_only_for_a_test_that_asks(tmp_path):
    """Other plugins (pytest-trio) import trio themselves, so the run loads only this one."""
    (tmp_path / "test_lazy.py").write_text(textwrap.dedent(f"""
        import sys

        def broker_modules():
            return {{n for n in sys.modules if n.split(".")[0] in {sorted(BROKER_PACKAGES)}}}

        def test_without_the_fixture(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("kbroker.testing")
            assert broker_modules() == set({sorted(LIGHT_MODULES)})

        def test_with_the_fixture(kbroker):
            assert "kbroker.broker" in broker_modules() and "trio" in broker_modules()
    """))
    environment = dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "kbroker.testing",
                             "test_lazy.py"], cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 passed" in result.stdout


def test_pytest_fixtures_documents_what_each_fixture_yields(tmp_path):
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    result = subprocess.run([sys.executable, "-m", "pytest", "--fixtures", "-p", "no:cacheprovider"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    shown = result.stdout[result.stdout.index("from kbroker.testing"):]
    for words in ("kbroker -- ", "kbroker_session [session scope]", ".bootstrap", ".host", ".port", ".data_dir",
                  "running_broker(settings="):
        assert words in shown, words


# -- the fixtures and helpers, through a stock client ------------------------------------------------------

def test_fixture_broker_answers_metadata(kbroker):
    metadata = confluent_kafka.admin.AdminClient({"bootstrap.servers": kbroker.bootstrap}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [(kbroker.host, kbroker.port)]
    assert metadata.cluster_id == kbroker.broker.cluster_id


def test_each_test_gets_its_own_data_directory(kbroker, kbroker_session):
    assert kbroker.data_dir != kbroker_session.data_dir
    assert kbroker.port != kbroker_session.port
    assert os.path.isdir(kbroker.data_dir)
