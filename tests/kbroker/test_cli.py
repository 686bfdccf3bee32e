"""The `kbroker` command as a real process: starts, serves, stops cleanly, refuses bad config."""

import os
import signal
import socket
import subprocess
import sys
import time

import confluent_kafka.admin
import pytest


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(tmp_path, *overrides):
    command = [sys.executable, "-m", "kbroker.cli", *(arg for o in overrides for arg in ("--override", o))]
    return subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for_line(process, text, timeout_s=20):
    deadline = time.monotonic() + timeout_s
    lines = []
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return line
    raise AssertionError(f"no {text!r} in {lines}")


def test_starts_serves_and_stops_on_sigterm(tmp_path):
    port = free_port()
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}")
    try:
        ready = wait_for_line(process, "ready on")
        assert f"127.0.0.1:{port}" in ready
        metadata = confluent_kafka.admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10)
        assert [(b.id, b.port) for b in metadata.brokers.values()] == [(1, port)]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert "stopped" in process.stdout.read()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert os.path.exists(tmp_path / "kbroker-data" / "meta.properties")


def test_a_setting_kbroker_does_not_act_on_is_named_in_a_warning_at_start(tmp_path):
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "socket.send.buffer.bytes=65536")
    try:
        warning = wait_for_line(process, "socket.send.buffer.bytes=65536")
        assert "WARNING" in warning and "does not act on it" in warning
        wait_for_line(process, "ready on")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_bad_settings_fail_fast_with_a_clear_message(tmp_path):
    for override, expected in [
        ("log.retention.ms=soon", "log.retention.ms"),
        ("log.retension.ms=1", "did you mean"),
        ("listeners=PLAINTEXT://127.0.0.1:notaport", "listeners"),
    ]:
        process = start(tmp_path, override)
        output, _ = process.communicate(timeout=20)
        assert process.returncode == 2 and expected in output, output


def test_a_listener_without_its_security_material_is_refused_at_start(tmp_path):
    for settings, named in [((f"listeners=SSL://127.0.0.1:{free_port()}", "inter.broker.listener.name=SSL"),
                             "ssl.keystore.location"),
                            ((f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                              "inter.broker.listener.name=SASL_PLAINTEXT"), "GSSAPI"),
                            ((f"listeners=SASL_PLAINTEXT://127.0.0.1:{free_port()}",
                              "inter.broker.listener.name=SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN"),
                             "plain.sasl.jaas.config")]:
        process = start(tmp_path, *settings)
        assert process.wait(timeout=20) == 2
        assert named in process.stdout.read()


def test_metrics_port_flag_serves_health(tmp_path):
    import urllib.request

    port, metrics_port = free_port(), free_port()
    command = [sys.executable, "-m", "kbroker.cli", "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
               "--metrics-port", str(metrics_port)]
    process = subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_line(process, "ready on")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/ready", timeout=5) as answer:
            assert answer.status == 200
    finally:
        process.kill()
        process.wait()


def _holding(host: str, port: int):
    """A listening socket on host:port, or None where another process has it already (taken either way)."""
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the broker binds: a TIME_WAIT is no owner
    try:
        holder.bind((host, port))
    except OSError:
        holder.close()
        return None
    holder.listen()
    return holder


def test_the_console_is_served_by_default_on_the_listeners_host(tmp_path):
    import urllib.request

    holder = _holding("127.0.0.1", 8080)
    if holder is None:
        pytest.skip("127.0.0.1:8080, the console's default port, is taken on this machine")
    holder.close()
    port = free_port()
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{port}", "schema.registry.listeners=")
    try:
        assert "http://127.0.0.1:8080 (console, /metrics, /health, /ready)" in wait_for_line(process, "ready on")
        with urllib.request.urlopen("http://127.0.0.1:8080/", timeout=10) as answer:
            assert answer.status == 200 and b"<h1>Overview</h1>" in answer.read()
    finally:
        process.kill()
        process.wait()


def test_the_default_console_port_taken_is_a_warning_not_a_failed_start(tmp_path):
    holder = _holding("127.0.0.1", 8080)
    try:
        process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "schema.registry.listeners=")
        try:
            warning = wait_for_line(process, "no web console")
            assert "cannot listen on 127.0.0.1:8080" in warning and "metrics.port sets another port" in warning
            assert "console" not in wait_for_line(process, "ready on")
        finally:
            process.kill()
            process.wait()
    finally:
        if holder is not None:
            holder.close()


def test_a_chosen_console_port_taken_stops_the_start_in_one_line(tmp_path):
    holder = _holding("0.0.0.0", 0)
    taken = holder.getsockname()[1]
    try:
        process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", f"metrics.port={taken}")
        assert process.wait(timeout=20) == 1
        assert process.stdout.read().strip().splitlines()[-1] == \
            f"kbroker: cannot listen on 0.0.0.0:{taken} (metrics.port): Address already in use"
    finally:
        holder.close()


def test_no_console_with_metrics_port_minus_one(tmp_path):
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}", "metrics.port=-1",
                    "schema.registry.listeners=")
    try:
        assert "http://" not in wait_for_line(process, "ready on")
    finally:
        process.kill()
        process.wait()


def kbroker(*arguments, timeout_s=30):
    return subprocess.run([sys.executable, "-m", "kbroker.cli", *arguments], capture_output=True, text=True,
                          timeout=timeout_s)


def test_help_lists_every_command_in_one_line_beside_the_broker_options():
    done = kbroker("--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for command in ("topics", "groups", "produce", "consume", "cluster", "mirror"):
        [line] = [line for line in lines if line.split()[:1] == [command]]
        assert len(line.split()) > 2, line  # the command, then what it does
    for option in ("--config", "--override", "--metrics-port", "--bootstrap-server", "--command-config"):
        assert option in done.stdout


def test_every_command_and_every_option_has_help():
    import argparse

    from kbroker.cli import build_parser

    def undocumented(parser, path):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for choice in action._choices_actions:
                    if not choice.help:
                        yield f"{path} {choice.dest}"
                for name, subparser in action.choices.items():
                    yield from undocumented(subparser, f"{path} {name}")
            elif not action.help or action.help == argparse.SUPPRESS:
                yield f"{path} {action.option_strings or action.dest}"

    assert list(undocumented(build_parser(), "kbroker")) == []
    for command in (["topics", "describe"], ["groups", "reset-offsets"], ["produce"], ["consume"], ["mirror"]):
        done = kbroker(*command, "--help")
        assert done.returncode == 0 and "usage: kbroker " + " ".join(command) in done.stdout, done.stdout + done.stderr


def test_help_and_the_admin_commands_import_neither_trio_nor_the_broker():
    for arguments in (["--help"], ["topics", "list", "--bootstrap-server", f"127.0.0.1:{free_port()}"]):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "kbroker.cli", *arguments],
                              capture_output=True, text=True, timeout=30)
        imported = {line.split("|")[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time")}
        assert imported, done.stderr
        assert not {"trio", "kbroker.broker", "kbroker.server", "kbroker.handlers"} & imported, arguments


def test_options_of_the_broker_and_of_the_commands_are_not_mixed():
    done = kbroker("--override", "log.dirs=/tmp/x", "topics", "list")
    assert done.returncode == 2 and "--override: only for starting a broker" in done.stderr
    done = kbroker("--bootstrap-server", "127.0.0.1:9092")
    assert done.returncode == 2 and "--bootstrap-server: only for the admin commands" in done.stderr


def test_kbroker_with_no_arguments_serves_a_schema_registry_at_localhost_8081(tmp_path):
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    try:
        probe = socket.create_server(("127.0.0.1", 8081))
    except OSError as error:
        pytest.skip(f"127.0.0.1:8081 is taken on this machine ({error.strerror}): the default cannot be shown")
    probe.close()
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}")
    try:
        assert "http://localhost:8081 (schema registry)" in wait_for_line(process, "ready on")
        client = SchemaRegistryClient({"url": "http://localhost:8081"})
        schema = '{"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}'
        assert client.register_schema("users-value", Schema(schema, "AVRO")) == 1
        assert client.get_schema(1).schema_str.replace(" ", "") == schema.replace(" ", "")
    finally:
        stop(process)


def test_the_default_registry_address_taken_starts_the_broker_without_it(tmp_path):
    try:  # held here, or already taken by someone else: taken either way
        holder = socket.create_server(("127.0.0.1", 8081))
    except OSError:
        holder = None
    process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}")
    try:
        warning = wait_for_line(process, "no schema registry")
        assert "WARNING" in warning and "cannot listen on localhost:8081" in warning
        assert "schema registry)" not in wait_for_line(process, "ready on")
    finally:
        stop(process)
        if holder is not None:
            holder.close()


def test_a_chosen_registry_address_taken_is_one_line_and_no_start(tmp_path):
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        process = start(tmp_path, f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
                        f"schema.registry.listeners=http://127.0.0.1:{port}")
        output, _ = process.communicate(timeout=30)
    assert process.returncode == 1
    assert output.strip() == (f"kbroker: cannot listen on 127.0.0.1:{port} (schema.registry.listeners): "
                              "Address already in use")


def stop(process) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
