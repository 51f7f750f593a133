"""A real browser looks at a panel: headless Chromium driven by Playwright (the graph: test_browser_graph.py).

Fails on any request that leaves the machine and on any script run from memory
text. Screenshots are kept in .artifacts/ (panel.png).
Needs /usr/bin/chromium (Debian package ``chromium``; ``make install-test`` installs it).
"""

from __future__ import annotations

import functools
import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, Route, sync_playwright

import memkit
from memkit.widgets import NamespaceBrowser
from memkit.widgets._static import snapshot_html

CHROMIUM = "/usr/bin/chromium"
# Outside CI a developer may lack the browser; under CI (CI=true) a missing one must fail the run.
_NO_CHROMIUM = not Path(CHROMIUM).exists() and not os.environ.get("CI")
ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'

pytestmark = pytest.mark.skipif(
    _NO_CHROMIUM, reason="needs the Debian package chromium (make install-test installs it)"
)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A static file server on 127.0.0.1 (loopback is the only place a page may fetch from)."""
    handler = functools.partial(_QuietHandler, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _guarded_page(browser: Browser, outside: list[str]) -> Page:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    # Generous by default: the CI machine may be loaded, and a wait on visible state costs nothing when it is not.
    context.set_default_timeout(60_000)

    def gate(route: Route) -> None:
        url = route.request.url
        parts = urlsplit(url)
        if parts.scheme in ("data", "about", "blob") or parts.hostname in ("127.0.0.1", "localhost", "::1"):
            route.continue_()
        else:
            outside.append(url)
            route.abort()

    context.route("**/*", gate)
    return context.new_page()


def _pwned(page: Page) -> list[Any]:
    return [frame.evaluate("() => window.__pwned === undefined ? null : window.__pwned") for frame in page.frames]


def test_the_detector_catches_a_real_payload(browser: Browser, site: tuple[str, Path]) -> None:
    """Positive control: the same payload, not escaped, does run; so the checks below can fail."""
    base, root = site
    (root / "bad.html").write_text(f"<!DOCTYPE html><html><body>{PAYLOAD}</body></html>", encoding="utf-8")
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.goto(f"{base}/bad.html")
    page.wait_for_function("() => window.__pwned === 1", timeout=5000)
    page.goto(f"{base}/bad.html?via=https")
    page.evaluate("() => fetch('https://example.org/x').catch(() => null)")
    page.wait_for_timeout(300)
    assert any(u.startswith("https://example.org") for u in outside)


def test_panel_snapshot_is_offline_and_inert(browser: Browser, site: tuple[str, Path]) -> None:
    base, root = site
    with memkit.open(f"sqlite:///{root / 'panel.db'}") as mem:
        from memkit._demo import demo_items

        mem.add_many(demo_items())
        mem.add(PAYLOAD, "alice", "bioinformatics", {"gene": "TP53", "note": PAYLOAD})
        panel = NamespaceBrowser(mem, page_size=8)
        panel.namespace.value = ("alice", "bioinformatics")
        panel.rows.value = panel.items[0].id
        (root / "panel.html").write_text(snapshot_html(panel), encoding="utf-8")
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    page.goto(f"{base}/panel.html")
    page.wait_for_load_state("load")
    page.wait_for_timeout(300)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "panel.png"), full_page=True)
    text = page.inner_text("body")
    assert "9 namespaces" in text and "memories 1–8 (of 44 records in the namespace)" in text
    assert "<img src=x onerror=" in text  # the payload is readable text
    assert page.evaluate("() => document.querySelectorAll('img, script').length") == 0
    assert _pwned(page) == [None]
    assert outside == []
