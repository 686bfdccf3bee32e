"""``kbroker test-broker`` as a real process: its one JSON line, its control API over HTTP (the routes,
the answers to bad input), and each way it stops (SIGTERM, its parent's death, the end of its input).
The faults, time and look-inside routes call RunningBroker's members, tested in their own modules; the
other-language examples drive them all (compat_tests/test_other_languages.py)."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer

from testkit.broker_process import process_running

TIMEOUT_S = 30
COMMAND = [sys.executable, "-m", "kbroker.cli", "test-broker"]


def start(*arguments: str, **options) -> tuple[subprocess.Popen, dict]:
    process = subprocess.Popen([*COMMAND, *arguments], stdout=subprocess.PIPE, text=True, **options)
    line = process.stdout.readline()  # bounded: the command prints its line or exits
    assert line, f"no line; exit status {process.wait(TIMEOUT_S)}"
    return process, json.loads(line)


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    return process.wait(TIMEOUT_S)


def request(control: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, the answer's text) of one request to the control API."""
    host, port = control.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=TIMEOUT_S)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        answer = connection.getresponse()
        return answer.status, answer.read().decode()
    finally:
        connection.close()


@pytest.fixture(scope="module")
def served_broker():
    process, line = start()
    try:
        yield process, line
    finally:
        stop(process)


def test_one_line_then_the_api_serves_and_sigterm_stops_it_cleanly():
    process, line = start()
    try:
        assert set(line) == {"bootstrap", "control", "pid"} and line["pid"] == process.pid
        assert line["bootstrap"].startswith("127.0.0.1:") and line["control"].startswith("http://127.0.0.1:")
        status, text = request(line["control"], "GET", "/health")
        assert (status, json.loads(text)) == (200, {"status": "ok", "bootstrap": line["bootstrap"]})

        producer = Producer({"bootstrap.servers": line["bootstrap"]})
        producer.produce("orders", key=b"k", value=b"\x00\xffbytes", headers=[("h", b"v")])
        assert producer.flush(TIMEOUT_S) == 0
        status, text = request(line["control"], "GET", "/topics/orders/records?partition=0&from_offset=0")
        assert status == 200 and text.endswith("\n") and text.count("\n") == 1, text
        [record] = json.loads(text)["records"]
        assert (record["offset"], base64.b64decode(record["key"]), base64.b64decode(record["value"])) == \
            (0, b"k", b"\x00\xffbytes")
        assert record["headers"] == [{"key": "h", "value": base64.b64encode(b"v").decode()}]
    finally:
        assert stop(process) == 0
    assert process.stdout.read() == ""  # one line, and nothing after it


def test_the_routes_reach_the_broker_faults_time_restart_and_reset(served_broker):
    _, line = served_broker
    control = line["control"]

    def call(method: str, path: str, body: dict | None = None) -> dict:
        status, text = request(control, method, path, None if body is None else json.dumps(body).encode())
        assert status == 200, (path, text)
        return json.loads(text)

    answer = call("POST", "/faults/fail", {"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": 2,
                                           "topic": "routes"})
    assert answer["fault"]["remaining"] == 2 and answer["fault"]["error"] == "NOT_LEADER_OR_FOLLOWER"
    assert [fault["api"] for fault in call("GET", "/faults")["faults"]] == ["Produce"]
    producer = Producer({"bootstrap.servers": line["bootstrap"], "retry.backoff.ms": 50})
    producer.produce("routes", b"after two refusals")
    assert producer.flush(TIMEOUT_S) == 0
    assert call("GET", "/faults") == {"faults": []}  # both refusals spent
    assert call("POST", "/time/advance", {"ms": 60_000}) == {"ok": True}

    assert call("POST", "/restart", {}) == {"ok": True, "bootstrap": line["bootstrap"]}
    [record] = call("GET", "/topics/routes/records")["records"]
    assert base64.b64decode(record["value"]) == b"after two refusals"
    assert call("GET", "/groups/nobody") == {"group_id": "nobody", "type": None, "state": "Dead", "protocol": None,
                                             "members": [], "committed": []}
    assert call("GET", "/groups/nobody/offsets") == {"offsets": []}
    assert call("GET", "/transactions") == {"transactions": []}
    assert call("GET", "/schemas") == {"subjects": {}}

    assert call("POST", "/reset") == {"ok": True}
    assert request(control, "GET", "/topics/routes/records")[0] == 404


@pytest.mark.parametrize("method, path, body, status, says", [
    ("POST", "/faults/fail", b"{not json", 400, "not JSON"),
    ("POST", "/faults/fail", b"[1, 2]", 400, "a JSON object"),
    ("POST", "/faults/fail", b'{"error": "NOT_LEADER_OR_FOLLOWER"}', 400, "api is required"),
    ("POST", "/faults/fail", b'{"api": "Produce", "error": true}', 400, "error must be"),
    ("POST", "/faults/fail", b'{"api": "Produce", "error": 6, "count": 0}', 400, "count must be at least 1"),
    ("POST", "/faults/fail", b'{"api": "Produce", "error": 6, "colour": "red"}', 400, "unknown field colour"),
    ("POST", "/faults/delay", b'{"api": "Fetch", "ms": "500"}', 400, "ms must be an integer"),
    ("POST", "/faults/move-coordinator", b"{}", 400, "exactly one of group and transactional_id"),
    ("POST", "/faults/disk-full", b'{"full": "yes"}', 400, "full must be true or false"),
    ("POST", "/time/advance", b'{"ms": -5}', 400, "at least 0"),
    ("GET", "/topics/orders/records?partition=first", None, 400, "partition must be an integer"),
    ("GET", "/topics/orders/records?colour=red", None, 400, "unknown query parameter colour"),
    ("GET", "/topics/no-such-topic/records", None, 404, "no topic"),
    ("GET", "/no/such/route", None, 404, "no route"),
    ("DELETE", "/reset", None, 405, "use POST"),
    ("POST", "/faults/fail", b'{"api": "Nope", "error": 6}', 400, "no Kafka API named 'Nope'"),
    ("POST", "/faults/rebalance", b'{"group": "nobody"}', 400, "no group 'nobody'"),
])
def test_bad_input_is_answered_with_one_json_line(served_broker, method, path, body, status, says):
    _, line = served_broker
    answered, text = request(line["control"], method, path, body)
    assert answered == status and text.count("\n") == 1, (answered, text)
    assert says in json.loads(text)["error"], text


def test_a_body_too_large_is_refused_and_the_server_goes_on(served_broker):
    _, line = served_broker
    status, text = request(line["control"], "POST", "/faults/clear", b"{}",
                           headers={"Content-Length": str(10 * 1024 * 1024)})
    assert status == 400 and "at most" in json.loads(text)["error"]
    assert request(line["control"], "GET", "/health")[0] == 200


def test_it_stops_when_its_parent_dies():
    if not os.path.exists("/proc/self/stat"):
        pytest.skip("this machine has no /proc to tell a finished process from a running one")
    parent = subprocess.Popen([sys.executable, "-c", (
        "import subprocess, sys\n"
        f"child = subprocess.Popen({COMMAND!r}, stdout=subprocess.PIPE, text=True)\n"
        "print(child.stdout.readline(), end='', flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    line = json.loads(parent.stdout.readline())
    parent.kill()
    parent.wait(TIMEOUT_S)
    deadline = time.monotonic() + TIMEOUT_S
    while process_running(line["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_running(line["pid"]), "the test broker outlived its parent"


def test_with_exit_on_stdin_close_the_end_of_its_input_stops_it():
    process, _ = start("--exit-on-stdin-close", stdin=subprocess.PIPE)
    process.stdin.close()
    assert process.wait(TIMEOUT_S) == 0


def test_a_bad_setting_is_one_line_and_exit_status_2():
    done = subprocess.run([*COMMAND, "--override", "num.partitions=many"], capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr.startswith("kbroker test-broker: ") and done.stderr.count("\n") == 1, done.stderr

