"""What the JupyterLab panel tests share: a one-cell notebook run in real JupyterLab, the run list read
back by column, and the checks every such test ends with (no payload ran, nothing fetched from outside,
this tree's memkit in the kernel).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from weakref import WeakKeyDictionary

import nbformat
from playwright.sync_api import Browser, Locator, Page
from test_browser import ARTIFACTS, _guarded_page, _pwned
from test_browser_graph import _run_all

ROOT = Path(__file__).resolve().parents[1]

# The head of every notebook: this tree's memkit first on the path, and the generator's warnings quiet.
PREAMBLE = f"""
import sys, warnings
sys.path.insert(0, {str(ROOT)!r})
warnings.simplefilter("ignore")
import memkit
print("memkit from", memkit.__file__)
"""


def write_notebook(root: Path, name: str, *cells: str) -> None:
    """``root/name.ipynb`` of ``cells`` (the first after :data:`PREAMBLE`) on the Python 3 kernel."""
    sources = [PREAMBLE + cells[0], *cells[1:]]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, root / f"{name}.ipynb")


def row_cells(row: Locator, panel: str = ".memkit-traces .mk-runs") -> dict[str, str]:
    """A grid row's cells by column label (a label's sort arrow dropped)."""
    labels = row.page.locator(f"{panel} thead th").all_inner_texts()
    texts = row.locator("td").all_inner_texts()
    return {label.strip().split("\n")[0].strip(" ▲▼"): text.strip() for label, text in zip(labels, texts, strict=True)}


@contextmanager
def notebook_page(browser: Browser, lab: tuple[str, Path], name: str, *cells: str) -> Iterator[Page]:
    """The notebook of ``cells`` opened and run in the lab; on leaving, a failure leaves a full-page
    screenshot ``lab-<name>-failed.png``, and a success is checked: no payload ran, nothing was
    fetched from outside, the kernel ran this tree's memkit."""
    url, root = lab
    write_notebook(root, name, *cells)
    outside: list[str] = []
    page = _guarded_page(browser, outside)
    sent: list[str | bytes] = []
    _SENT[page] = sent
    page.on("websocket", lambda ws: ws.on("framesent", lambda frame: sent.append(frame)))
    page.set_viewport_size({"width": 1500, "height": 1100})
    ARTIFACTS.mkdir(exist_ok=True)
    _run_all(page, url.replace("graph.ipynb", f"{name}.ipynb"))
    try:
        yield page
    except Exception:
        page.screenshot(path=str(ARTIFACTS / f"lab-{name}-failed.png"), full_page=True)
        raise
    assert _pwned(page) == [None] * len(page.frames)
    assert outside == []
    memkit_from = page.locator(".jp-OutputArea-output").filter(has_text="memkit from").first.inner_text()
    assert str(ROOT / "memkit") in memkit_from  # the kernel ran this tree's memkit


_SENT: WeakKeyDictionary[Page, list[str | bytes]] = WeakKeyDictionary()


def comm_messages_sent(page: Page) -> int:
    """How many widget messages the page has sent its kernels so far (a click or keystroke a panel reports)."""
    return sum(b"comm_msg" in (f if isinstance(f, bytes) else f.encode()) for f in _SENT.get(page, []))


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=False)


