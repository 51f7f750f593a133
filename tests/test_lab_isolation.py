"""Two users' runs of one workflow, in real JupyterLab: each run's panel shows only its own recalls.

alice and bob both run ``wf-1`` without a ``run_id`` over the same memory texts; bob's step
searches three times, alice's once. In the run list and in alice's step detail a person must
see alice's one search in her namespace, never bob's. Screenshot: .artifacts/lab-isolation.png.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nbformat
import pytest
from _lab_server import LabServer, lab_url
from test_lab import ROOT, _free_port, _lab_page, _rows, _shot

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/usr/bin/chromium").exists() and not os.environ.get("CI"),
                       reason="needs the Debian package chromium (make install-test)"),
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make"),
]

SETUP = '''\
import memkit
from memkit.traces import ExecutionHistory
from memkit.widgets import TraceReplay

mem = memkit.open("sqlite:///pair.db?embedder=none")
for user in ("alice", "bob"):
    for text in ("TP53 is mutated in sample 7", "TP53 loss in the relapse sample", "KRAS G12D in the control"):
        mem.add(text, user, "bio")
for user, queries in (("alice", ["TP53"]), ("bob", ["TP53 sample", "KRAS", "relapse"])):
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf-1", agent_id="bio", user_id=user)
    with history.step("look_up", tool="memory"):
        for query in queries:
            mem.search(query, user, "bio", limit=3, mode="keyword")
pair = TraceReplay(mem)
pair'''


def test_a_run_shows_only_its_own_namespace_recalls(tmp_path: Path) -> None:
    (tmp_path / "notebooks").mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(SETUP)])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, tmp_path / "notebooks" / "00_tour.ipynb")
    port = _free_port()
    env = {**os.environ, "BROWSER": "true", "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces")}
    cmd = ["make", "-C", str(ROOT), "lab-serve", f"LAB_PORT={port}", f"LAB_DIR={tmp_path}",
           f"LAB_DB={tmp_path / 'demo.db'}"]
    with LabServer(cmd, tmp_path / "lab.log", lab_url(port), env=env) as server:
        url = server.url
        _check(url.replace("/lab?", "/lab/tree/notebooks/00_tour.ipynb?reset&"))


def _check(url: str) -> None:
    with _lab_page(url, 1400, 1000) as page:
        page.keyboard.press("Escape")
        page.click(".jp-Notebook")
        page.get_by_text("Run", exact=True).first.click()
        page.get_by_text("Run All Cells", exact=True).first.click()
        panel = page.locator(".memkit-traces")
        panel.locator(".mk-runs tbody tr").first.wait_for(timeout=180_000)
        rows = _rows(panel)
        headers = panel.locator(".mk-runs th").all_inner_texts()
        by_key = {r["key"]: r["cells"][headers.index("recalls")] for r in rows}
        # Same workflow, no run_id: the two runs are told apart by namespace, each with its own count.
        assert by_key == {"alice/bio/wf-1": "1", "bob/bio/wf-1": "3"}
        panel.locator(".mk-runs tbody tr[data-key='alice/bio/wf-1']").click()
        panel.locator(".mk-timeline .mk-bar").first.wait_for(timeout=30_000)
        panel.locator(".mk-timeline .mk-bar[data-position='0']").click()
        recalled = panel.locator(".mk-detail .mk-recalled")
        recalled.locator(".mk-hits").wait_for(timeout=30_000)
        assert recalled.locator(".mk-query").all_inner_texts() == ["TP53"]  # alice's one search, not bob's three
        assert "alice / bio" in recalled.locator(".mk-recall-meta").inner_text()
        assert "bob" not in panel.locator(".mk-detail").inner_text()
        _shot(page, panel, "lab-isolation.png")
