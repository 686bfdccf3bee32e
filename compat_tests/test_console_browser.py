"""The web console in a real browser (issue 30): Debian's chromium, headless, driven by Selenium, against a
real broker process and real Kafka clients. Each step saves a screenshot in console-screenshots/ (the README
names it; CI keeps it as an artifact), so a reader can see the pages the tests saw.

Skips, saying what is missing, without selenium, chromium or chromedriver (compat_tests/browser.py).
"""

from __future__ import annotations

import time
import uuid

import pytest

confluent_kafka = pytest.importorskip("confluent_kafka")

from compat_tests.browser import browser, screenshot, wait_for, wait_for_text  # noqa: E402, F401
from compat_tests.console_client import (USERS, ConsoleBroker, consume_and_commit, described_rows,  # noqa: E402
                                         make_topic, produce, registry_broker, secured_broker)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with ConsoleBroker(tmp_path_factory.mktemp("browser")) as process:
        yield process


def cells(driver, table_id: str) -> list[list[str]]:
    return [[cell.text for cell in row.find_elements("css selector", "td")]
            for row in driver.find_elements("css selector", f"table#{table_id} tbody tr")]


def submit(driver, form_id: str, **fields: str) -> None:
    """Fill a form's fields as a person types them, then press its button."""
    for name, value in fields.items():
        field = driver.find_element("css selector", f"form#{form_id} [name={name}]")
        if field.tag_name == "select":
            field.find_element("css selector", f"option[value='{value}']").click()
        else:
            field.clear()
            field.send_keys(value)
    driver.find_element("css selector", f"form#{form_id} button").click()


def test_the_overview_shows_the_cluster_and_live_throughput(browser, broker):
    topic = make_topic(broker)
    browser.get(f"http://127.0.0.1:{broker.http_port}/")
    assert wait_for(browser, "h1").text == "Overview"
    assert cells(browser, "nodes")[0][:4] == ["1 (this node)", f"127.0.0.1:{broker.port}", "", "serving"]
    assert "quorum leader" in cells(browser, "nodes")[0][4]
    assert wait_for(browser, "#card-readiness strong").text == "ready"
    produce(broker, topic, 200)  # traffic for the chart, sampled every 2 s
    chart = wait_for(browser, "svg#rates-chart[data-points]", timeout=15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and not any(float(v) > 0 for v in (chart.get_attribute("data-latest") or "0").split(",")):
        time.sleep(0.5)
        browser.refresh()
        chart = wait_for(browser, "svg#rates-chart[data-points]", timeout=15)
    assert len(browser.find_elements("css selector", "svg#rates-chart polyline")) == 2
    assert cells(browser, "disks")[0][4] == "online"
    screenshot(browser, "overview")


def test_a_topic_from_a_client_appears_and_its_messages_are_found_by_key(browser, broker):
    topic = make_topic(broker, partitions=2)
    produce(broker, topic, 40, partition=1)
    browser.get(f"http://127.0.0.1:{broker.http_port}/topics")
    submit(browser, "search", q=topic)
    wait_for_text(browser, "#topic-count", "1 topics")
    screenshot(browser, "topics")
    browser.find_element("link text", topic).click()
    assert wait_for(browser, "h1").text == topic
    assert [row[5] for row in cells(browser, "partitions")] == ["0", "40"]  # high watermarks
    screenshot(browser, "topic")
    browser.find_element("id", "browse").click()
    submit(browser, "browse-form", partition="1", key="key-3")
    wait_for(browser, "table#messages")
    found = cells(browser, "messages")
    assert [int(row[0]) for row in found] == list(range(39, 0, -4))
    assert {row[2] for row in found} == {"key-3"}
    assert found[0][3].splitlines() == ["origin: test", "n: 39"] and found[0][4] == '{"n": 39}'
    screenshot(browser, "messages")


def test_group_lag_is_the_commands_and_a_reset_from_the_page_moves_the_group(browser, broker):
    topic, group = make_topic(broker), f"group-{uuid.uuid4().hex[:6]}"
    produce(broker, topic, 30)
    consume_and_commit(broker, topic, group, 12)
    browser.get(f"http://127.0.0.1:{broker.http_port}/groups")
    wait_for(browser, "table#groups")
    browser.find_element("link text", group).click()
    wait_for_text(browser, "#group-state", "Empty")
    shown = [row[:5] for row in cells(browser, "offsets")]
    printed = [row[1:6] for row in described_rows(broker, group)]
    assert shown == printed == [[topic, "0", "12", "30", "18"]]
    screenshot(browser, "group")
    submit(browser, "reset-dry-run", topic=topic, to="offset", offset="25")
    wait_for(browser, "table#reset-plan")
    assert cells(browser, "reset-plan") == [[topic, "0", "25"]]
    assert [row[3] for row in described_rows(broker, group)] == ["12"]  # a dry run moves nothing
    screenshot(browser, "reset-dry-run")
    browser.find_element("css selector", "form#reset-execute button").click()
    wait_for_text(browser, "#flash", f"Reset offsets of group {group} on {topic}.")
    assert [row[3:6] for row in described_rows(broker, group)] == [["25", "30", "5"]]
    assert [row[2:5] for row in cells(browser, "offsets")] == [["25", "30", "5"]]


def test_a_message_produced_from_the_page_is_read_by_a_consumer(browser, broker):
    topic = make_topic(broker)
    browser.get(f"http://127.0.0.1:{broker.http_port}/topics/{topic}")
    browser.find_element("xpath", "//summary[text()='Produce a message']").click()
    submit(browser, "produce", key="from-the-page", value='{"hello": "world"}', headers="trace: 42")
    wait_for_text(browser, "#flash", f"Produced to {topic}-0 at offset 0.")
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    deadline, message = time.monotonic() + 30, None
    while message is None and time.monotonic() < deadline:
        message = consumer.poll(0.5)
    consumer.close()
    assert (message.key(), message.value(), message.headers()) == (b"from-the-page", b'{"hello": "world"}',
                                                                  [("trace", b"42")])


def test_a_refused_action_shows_the_authorizers_refusal(browser, tmp_path):
    with secured_broker(tmp_path) as broker:
        browser.get(f"http://127.0.0.1:{broker.http_port}/topics")
        wait_for(browser, "form#login")
        screenshot(browser, "sign-in")
        submit(browser, "login", username="alice", password=USERS["alice"])
        assert wait_for(browser, "#principal").text == "User:alice"
        assert browser.current_url.endswith("/topics")  # back where the sign-in was asked for
        browser.find_element("xpath", "//summary[text()='Create a topic']").click()
        submit(browser, "create-topic", name="not-hers")
        error = wait_for(browser, "#error").text
        assert error.startswith("Refused: TOPIC_AUTHORIZATION_FAILED on not-hers")
        screenshot(browser, "refused")


def test_schema_versions_compared_and_a_value_decoded_through_its_schema(browser, tmp_path):
    with registry_broker(tmp_path) as (broker, topic, serialize):
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
        for n in range(3):
            producer.produce(topic, key=f"order-{n}", value=serialize({"id": n, "item": "widget",
                                                                        "note": "handle with care"}))
        assert producer.flush(30) == 0
        browser.get(f"http://127.0.0.1:{broker.http_port}/schemas")
        browser.find_element("link text", f"{topic}-value").click()
        submit(browser, "versions-form", version="2", compare="1")
        assert '"name": "note"' in wait_for(browser, "#diff span.added").find_element("xpath", "..").text
        screenshot(browser, "schema-versions")
        browser.get(f"http://127.0.0.1:{broker.http_port}/topics/{topic}/messages?partition=0")
        value = cells(browser, "messages")[0][4]
        assert value.startswith(f"schema 2 (AVRO, {topic}-value v2)") and '"note": "handle with care"' in value
        screenshot(browser, "messages-decoded")
