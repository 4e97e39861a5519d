"""The HTML report in a real browser: headless Chromium opens `receval report`'s page from a
file:// URL; it loads without console errors, shows the summary table and decodes every figure.

Artefact: a full-page screenshot (1280 CSS px wide, the whole page's height) is written to
``test-artifacts/report-screenshot.png`` under the repository root (git-ignored; CI may upload
it) and its path is printed. Without a Chromium binary the tests skip with a reason; ``.ci/run``
installs Debian's ``chromium``.

How console errors are caught: the test drives Chromium over the DevTools protocol on a pipe
(``--remote-debugging-pipe``: file descriptors 3 and 4, no port, no network) and counts

* ``console.error`` / ``console.assert`` calls (``Runtime.consoleAPICalled``),
* uncaught exceptions (``Runtime.exceptionThrown``),
* the browser's own error entries, e.g. a resource that failed to load (``Log.entryAdded``).

``--enable-logging=stderr`` is not enough: it prints ``console.log`` and ``console.error`` as the
same ``INFO:CONSOLE`` line and says nothing about failed loads or broken images.
``test_the_detector_sees_console_errors_and_broken_images`` shows the detector failing a
deliberately broken page.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import select
import shutil
import struct
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from helpers import DATE_A, REPO, explain

from receval_spark.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ARTEFACT = REPO / "test-artifacts" / "report-screenshot.png"
WIDTH, HEIGHT = 1280, 1000  # the viewport; the screenshot spans the whole page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="Chromium not installed: apt-get install chromium; .ci/run installs it"
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--no-first-run",
    "--no-default-browser-check",
    "--mute-audio",
    "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # belt and braces: no host name resolves
    f"--window-size={WIDTH},{HEIGHT}",
    "--remote-debugging-pipe",
]

# Evaluated in the page once it has loaded: what the test asserts on besides the console.
FACTS = """(async () => ({
  summaryModels: [...document.querySelectorAll("table#summary td:first-child")].map(
    (td) => td.textContent.trim()),
  summaryHeight: document.getElementById("summary")?.getBoundingClientRect().height ?? 0,
  images: await Promise.all([...document.images].map(async (img) => ({
    alt: img.alt,
    dataPng: img.src.startsWith("data:image/png;base64,"),
    decoded: await img.decode().then(() => img.naturalWidth > 0, () => false),
  }))),
  resources: performance.getEntriesByType("resource").map((e) => e.name),
}))()"""


def _high_fd(fd: int) -> int:
    """``fd`` moved to a number >= 10, so the shell's ``3<&N 4>&M`` cannot clobber it."""
    high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return high


class DevTools:
    """Chromium with the DevTools protocol on a pipe: NUL-terminated JSON, commands written to
    the browser's fd 3, replies and events read from its fd 4."""

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        to_browser, self._commands = os.pipe()
        self._replies, from_browser = os.pipe()
        to_browser, from_browser = _high_fd(to_browser), _high_fd(from_browser)
        self._log = log.open("wb")
        self.proc = subprocess.Popen(
            [
                "bash",
                "-c",
                f'exec "$@" 3<&{to_browser} 4>&{from_browser} {to_browser}<&- {from_browser}>&-',
                "chromium",
                binary,
                *FLAGS,
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            pass_fds=(to_browser, from_browser),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise RuntimeError(f"Chromium exited (status {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, session: str | None = None, timeout=30):
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._commands, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(deadline)
            if message.get("id") != self._next_id:
                self.events.append(message)
            elif "error" in message:
                raise RuntimeError(f"{method}: {message['error']}")
            else:
                return message["result"]

    def wait_for(self, method: str, session: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event["params"]
            seen = len(self.events)
            self.events.append(self._read(deadline))

    def close(self) -> None:
        with contextlib.suppress(OSError):  # the browser may be gone already
            os.write(
                self._commands, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0"
            )
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._commands)
        os.close(self._replies)
        self._log.close()


@dataclass
class Page:
    errors: list[str]
    facts: dict[str, Any]
    screenshot: bytes
    messages: list[str] = field(default_factory=list)  # every console/log line, for context


def console_errors(events: list[dict[str, Any]], session: str) -> tuple[list[str], list[str]]:
    """(errors, all messages) among the page's DevTools events."""
    errors, messages = [], []
    for event in events:
        if event.get("sessionId") != session:
            continue
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])
            )
            line = f"console.{params['type']}: {text}"
            is_error = params["type"] in ("error", "assert")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text", "")
            line, is_error = f"uncaught: {text}", True
        elif method == "Log.entryAdded":
            entry = params["entry"]
            line = f"{entry['source']} {entry['level']}: {entry['text']} {entry.get('url', '')}"
            is_error = entry["level"] == "error"
        else:
            continue
        messages.append(line.strip())
        if is_error:
            errors.append(line.strip())
    return errors, messages


def open_in_chromium(path: Path, workdir: Path) -> Page:
    """Load ``path`` from a file:// URL, wait for its load event, and collect the console errors,
    the FACTS and a full-page screenshot WIDTH px wide."""
    assert CHROMIUM is not None
    browser = DevTools(CHROMIUM, workdir / "profile", workdir / "chromium.log")
    try:
        pages = [t for t in browser.send("Target.getTargets")["targetInfos"] if t["type"] == "page"]
        target = (
            pages[0]["targetId"]
            if pages
            else browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        )
        session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Runtime", "Log", "Page"):
            browser.send(f"{domain}.enable", session=session)
        browser.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        facts = browser.send(
            "Runtime.evaluate",
            {"expression": FACTS, "awaitPromise": True, "returnByValue": True},
            session=session,
        )["result"]["value"]
        content = browser.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": WIDTH, "height": content["height"], "scale": 1}
        shot = browser.send(
            "Page.captureScreenshot",
            {"format": "png", "captureBeyondViewport": True, "clip": clip},
            session=session,
        )
        errors, messages = console_errors(browser.events, session)
    except Exception as error:
        log = (workdir / "chromium.log").read_text(errors="replace")[-3000:]
        raise AssertionError(
            f"driving Chromium failed: {error}\n--- chromium log ---\n{log}"
        ) from error
    finally:
        browser.close()
    return Page(errors, facts, base64.b64decode(shot["data"]), messages)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) from the PNG signature and IHDR chunk."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", png[16:24])


@pytest.fixture(scope="module")
def report_html(shipped_demo, tmp_path_factory) -> Path:
    """`receval report` of the shipped demo's run on ml-latest-small (every model, both
    protocols: the page a new user opens first)."""
    assert shipped_demo.proc.returncode == 0, explain(shipped_demo.proc)
    out = tmp_path_factory.mktemp("report-browser") / "report.html"
    reports = str(shipped_demo.output)
    assert main(["report", "--reports", reports, "--date", DATE_A, "--out", str(out)]) == 0
    return out


@needs_chromium
def test_the_detector_sees_console_errors_and_broken_images(tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<!DOCTYPE html><html><body><table id='summary'><tr><td>x</td></tr></table>"
        '<img alt="missing" src="missing.png">'
        '<img alt="corrupt" src="data:image/png;base64,iVBORw0KGgoAAAAbroken">'
        '<script>console.log("fine"); console.error("boom"); undefinedFn();</script>'
        "</body></html>",
        encoding="utf-8",
    )
    page = open_in_chromium(broken, tmp_path)

    assert any(e == "console.error: boom" for e in page.errors), page.errors
    assert any("undefinedFn is not defined" in e for e in page.errors), page.errors
    assert any("missing.png" in e for e in page.errors), page.errors  # failed load
    assert not any(e.endswith(": fine") for e in page.errors)  # console.log is no error
    assert "console.log: fine" in page.messages
    assert [i["decoded"] for i in page.facts["images"]] == [False, False]

    clean = tmp_path / "clean.html"
    clean.write_text("<!DOCTYPE html><p>ok</p><script>console.log('hi')</script>", "utf-8")
    assert open_in_chromium(clean, tmp_path).errors == []


@needs_chromium
def test_report_loads_in_chromium_without_console_errors(report_html: Path, tmp_path) -> None:
    html = report_html.read_text(encoding="utf-8")
    assert 'id="summary"' in html

    page = open_in_chromium(report_html, tmp_path)

    ARTEFACT.parent.mkdir(exist_ok=True)
    ARTEFACT.write_bytes(page.screenshot)
    print(f"report screenshot: {ARTEFACT}")
    assert page.errors == [], page.errors
    # a candidate's label names the users its popularity fallback served: "als (+ popularity ...)"
    models = sorted(label.split(" (+ ")[0] for label in page.facts["summaryModels"])
    assert models == ["als", "item_knn", "oracle", "popularity", "random"], page.facts
    assert page.facts["summaryHeight"] > 0, "the summary table is not displayed"
    images = page.facts["images"]
    assert len(images) >= 3 and len(images) == html.count("<img"), images
    assert all(i["dataPng"] and i["decoded"] for i in images), images
    assert page.facts["resources"] == [], "the report loaded something beyond itself"
    width, height = png_size(page.screenshot)
    assert width == WIDTH and height > HEIGHT, (width, height)  # the whole page, top to bottom
    assert len(page.screenshot) > 20_000, "a near-empty screenshot"
