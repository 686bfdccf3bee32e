"""A headless Chromium for the web console's tests: Debian's chromium and chromedriver, driven by Selenium.

Both binaries are named by path, so Selenium Manager never runs and never downloads a browser or driver; the
flags keep chromium itself off the network (no updates, sync, metrics, safe browsing or translation), and every
host but loopback goes to a proxy nobody listens on, since the tests only browse 127.0.0.1. Without selenium,
chromium or chromedriver the fixture skips, saying which is missing.

chromedriver and chromium get a TMPDIR of their own, removed after each test: chromedriver's throwaway profile,
chromium's shared memory files (--disable-dev-shm-usage puts them there) and the profile's singleton socket
folder, which a quit leaves behind, would otherwise pile up in /tmp.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait
except ImportError:  # the fixture skips; the helpers are only ever given a driver
    webdriver = None

PAGE_LOAD_TIMEOUT_S = 30
SCREENSHOTS = pathlib.Path(__file__).resolve().parents[1] / "console-screenshots"
CHROMIUM_ARGUMENTS = (
    "--headless=new",
    "--no-sandbox",  # the sandbox will not start as root, nor in most containers
    "--disable-gpu",
    "--disable-dev-shm-usage",  # a container's /dev/shm is often too small for chromium's shared memory
    "--window-size=1400,1000",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--metrics-recording-only",
    "--disable-breakpad",
    "--disable-client-side-phishing-detection",
    "--disable-domain-reliability",
    "--safebrowsing-disable-auto-update",
    "--no-pings",
    "--disable-features=Translate,OptimizationHints,MediaRouter,DialMediaRouteProvider,"
    "AutofillServerCommunication,CertificateTransparencyComponentUpdater,NetworkTimeServiceQuerying",
    # The flags are not enough (chromium 156 still asks update.googleapis.com and accounts.google.com): every host
    # but loopback, which chromium never proxies, goes to the discard port and is refused at once.
    "--proxy-server=127.0.0.1:9",
)


@pytest.fixture
def browser():
    """A fresh headless Chromium per test, so no page state or cookie leaks from one test into the next."""
    chromium = shutil.which("chromium") or shutil.which("/usr/bin/chromium")
    chromedriver = shutil.which("chromedriver")
    missing = [
        what
        for what, found in (
            ("selenium (pip install -e '.[test]')", webdriver is not None),
            ("chromium (apt-get install chromium)", chromium is not None),
            ("chromedriver (apt-get install chromium-driver)", chromedriver is not None),
        )
        if not found
    ]
    if missing:
        pytest.skip("browser tests need " + ", ".join(missing))
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in CHROMIUM_ARGUMENTS:
        options.add_argument(argument)
    with tempfile.TemporaryDirectory(prefix="kbroker-chromium-", ignore_cleanup_errors=True) as scratch:
        service = Service(executable_path=chromedriver, env={**os.environ, "TMPDIR": scratch})
        driver = webdriver.Chrome(service=service, options=options)
        try:
            driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT_S)
            yield driver
        finally:
            driver.quit()


def screenshot(driver, name: str) -> pathlib.Path:
    """Saves the window as <name>.png in console-screenshots/ (or $KBTEST_SCREENSHOTS), for a person to look at."""
    folder = pathlib.Path(os.environ.get("KBTEST_SCREENSHOTS") or SCREENSHOTS)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    path.write_bytes(driver.get_screenshot_as_png())
    return path


def wait_for(driver, css_selector: str, timeout: float = 10):
    """The first element matching css_selector, once the page's scripts have put it there."""
    return WebDriverWait(driver, timeout).until(
        expected_conditions.presence_of_element_located((By.CSS_SELECTOR, css_selector))
    )


def wait_for_text(driver, css_selector: str, text: str, timeout: float = 10):
    """The element matching css_selector, once its text contains text (a script may still be filling it in)."""
    WebDriverWait(driver, timeout).until(
        expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, css_selector), text)
    )
    return driver.find_element(By.CSS_SELECTOR, css_selector)
