"""`make lab` for real: JupyterLab on 127.0.0.1, the tour run in headless Chromium, nothing fetched outside.

The notebooks are copied to a temporary root (LAB_DIR) so JupyterLab's autosave
cannot touch the committed, nbval-checked files. Screenshot: .artifacts/lab.png.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Route, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
# Outside CI a developer may lack the browser; under CI (CI=true) a missing one must fail the run.
_NO_CHROMIUM = not Path(CHROMIUM).exists() and not os.environ.get("CI")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_NO_CHROMIUM, reason="needs the Debian package chromium (make install-test)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make"),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_make_lab_serves_the_tour_on_loopback(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    port = _free_port()
    log = (tmp_path / "lab.log").open("w+")
    env = {**os.environ, "BROWSER": "true"}  # no desktop browser: the test drives its own
    proc = subprocess.Popen(["make", "-C", str(ROOT), "lab", f"LAB_PORT={port}", f"LAB_DIR={tmp_path}"],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        url = None
        deadline = time.monotonic() + 180
        while url is None and time.monotonic() < deadline:
            assert proc.poll() is None, (tmp_path / "lab.log").read_text()
            found = re.search(rf"http://127\.0\.0\.1:{port}/lab\?token=\w+", (tmp_path / "lab.log").read_text())
            url = found.group(0) if found else None
            time.sleep(0.5)
        assert url, (tmp_path / "lab.log").read_text()
        assert (ROOT / "data" / "memory.db").stat().st_size > 0  # make lab loaded the demo store
        token = url.split("token=")[1]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/notebooks/00_tour.ipynb?token={token}") as r:
            assert r.status == 200
        _only_loopback(port)
        _run_the_tour(url.replace("/lab?", "/lab/tree/notebooks/00_tour.ipynb?"))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
        log.close()


def _only_loopback(port: int) -> None:
    """The server must not answer on the machine's other addresses."""
    try:
        others = {info[4][0] for info in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    except socket.gaierror:
        others = set()
    for address in others - {"127.0.0.1"}:
        if address.startswith("127."):
            continue
        with socket.socket() as s, pytest.raises(OSError):
            s.settimeout(2)
            s.connect((address, port))


def _run_the_tour(url: str) -> None:
    outside: list[str] = []

    def gate(route: Route) -> None:
        parts = urlsplit(route.request.url)
        if parts.scheme in ("data", "about", "blob") or parts.hostname in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", gate)
            page = context.new_page()
            page.goto(url)
            page.wait_for_selector(".jp-Notebook", timeout=90_000)
            page.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle")).wait_for(timeout=90_000)
            page.keyboard.press("Escape")
            page.click(".jp-Notebook")
            page.get_by_text("Run", exact=True).first.click()
            page.get_by_text("Run All Cells", exact=True).first.click()
            # The dashboard renders as live widgets; the last code cell draws the graph.
            try:
                page.wait_for_selector(".widget-tab", timeout=120_000)
            except Exception:
                (ROOT / ".artifacts").mkdir(exist_ok=True)
                page.screenshot(path=str(ROOT / ".artifacts" / "lab-failed.png"))
                raise
            page.locator("iframe.memkit-graph-frame").last.wait_for(state="attached", timeout=120_000)
            page.locator(".widget-tab").first.scroll_into_view_if_needed()
            page.wait_for_timeout(1500)
            text = page.locator(".widget-tab").first.inner_text()
            assert "9 namespaces, 335 memories" in text and "best hybrid matches" in text
            assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
            (ROOT / ".artifacts").mkdir(exist_ok=True)
            page.screenshot(path=str(ROOT / ".artifacts" / "lab.png"))
        finally:
            browser.close()
    assert outside == []
