"""Memories another process writes appear in a followed NamespaceBrowser in real JupyterLab.

The notebook opens a SQLite file holding one memory and shows ``NamespaceBrowser(mem, follow=True)``;
then this test process (another process than the kernel) writes memories into the open namespace and
a namespace of its own. The test reads the page as a researcher looks at it: the new memories at the
top of the table and the new namespace in the list, nobody refreshing. Screenshots:
.artifacts/lab-nslive-*.png.
"""

from __future__ import annotations

import time
from pathlib import Path

from playwright.sync_api import Browser, Page
from test_browser import browser  # noqa: F401
from test_browser_graph import lab, pytestmark  # noqa: F401

import memkit
from tests._lab_notebook import notebook_page, shot

BUILD = '''
from memkit.widgets import NamespaceBrowser

mem = memkit.open("sqlite:///nslive.db?embedder=none")
mem.reset()
mem.add("the first note", "alice", "bot")
browser = NamespaceBrowser(mem, follow=True)
browser
'''
PANEL = ".memkit-namespace-browser"


def _texts(page: Page) -> list[str]:
    return [t.strip() for t in page.locator(f"{PANEL} .memkit-namespaces tbody td.mk-col-text").all_inner_texts()]


def _look(page: Page, store: Path) -> None:
    page.locator(f"{PANEL} .memkit-namespaces tbody tr").first.wait_for(timeout=180_000)
    assert _texts(page) == ["the first note"]
    with memkit.open(f"sqlite:///{store}?embedder=none") as writer:
        for i in range(3):
            written = time.monotonic()
            writer.add(f"note {i} from the agent", "alice", "bot")
            page.wait_for_function(
                "(t) => [...document.querySelectorAll('.memkit-namespace-browser .memkit-namespaces tbody "
                "td.mk-col-text')].some((td) => td.innerText.trim() === t)", arg=f"note {i} from the agent",
                timeout=10_000)
            assert time.monotonic() - written < 10
            time.sleep(0.3)
        shot(page, "lab-nslive-notes")
        writer.add("carol's first note", "carol", "helper")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.memkit-namespace-browser select option')]"
            ".some((o) => o.textContent.replace(/\\u00a0/g, ' ').startsWith('carol / helper'))", timeout=10_000)
    # newest first, the namespace still the one open, the overview counting both namespaces
    assert _texts(page) == ["note 2 from the agent", "note 1 from the agent", "note 0 from the agent",
                            "the first note"]
    # (a dropdown's labels keep their spaces as no-break spaces)
    namespace = page.locator(f"{PANEL} select").first
    options = [o.replace("\xa0", " ") for o in namespace.locator("option").all_text_contents()]
    assert options == ["alice / bot  (4)", "carol / helper  (1)"], options
    chosen = namespace.evaluate("(s) => s.options[s.selectedIndex].textContent")
    assert chosen.replace("\xa0", " ") == "alice / bot  (4)"
    assert "2 namespaces" in page.locator(PANEL).inner_text()
    shot(page, "lab-nslive-namespace")


def test_memories_written_by_another_process_appear(browser: Browser, lab: tuple[str, Path]) -> None:  # noqa: F811
    with notebook_page(browser, lab, "nslive", BUILD) as page:
        _look(page, lab[1] / "nslive.db")
