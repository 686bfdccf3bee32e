"""The browser harness (compat_tests/browser.py) against a static page on loopback, without the console.

A failure here is the harness's or chromium's, not the console's; the page changes its text a moment after the
click, so the waits are seen to wait.
"""

import functools
import http.server
import threading

import pytest

from compat_tests.browser import browser, screenshot, wait_for, wait_for_text  # noqa: F401  (the browser fixture)

pytestmark = pytest.mark.timeout(120)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
INDEX_HTML = """<!doctype html>
<title>harness</title>
<h1 id=t>hello</h1>
<button id=b onclick="setTimeout(() => { document.getElementById('t').textContent = 'clicked' }, 300)">click</button>
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        """Each request would print a line to stderr."""


@pytest.fixture
def page_url(tmp_path):
    """A static site on a free loopback port, served from a thread until the test ends."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(INDEX_HTML)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_browse_click_and_screenshot(browser, page_url, tmp_path, monkeypatch):
    monkeypatch.setenv("KBTEST_SCREENSHOTS", str(tmp_path / "screenshots"))
    browser.get(page_url)
    assert wait_for(browser, "h1#t").text == "hello"
    wait_for(browser, "button#b").click()
    assert wait_for_text(browser, "h1#t", "clicked", timeout=5).text == "clicked"
    path = screenshot(browser, "harness")
    assert path == tmp_path / "screenshots" / "harness.png"
    assert path.read_bytes().startswith(PNG_SIGNATURE)
