"""``TraceReplay``: step through one workflow run with the :mod:`memkit.frames` helpers.

The step table is :func:`memkit.frames.traces_frame` of the chosen workflow, the replay
is :func:`memkit.frames.replay`, and the summaries are :func:`memkit.frames.tool_stats`
and :func:`memkit.frames.failure_patterns` of the same frame.
"""

from __future__ import annotations

import os
from typing import Any

import ipywidgets as w
import pandas as pd

from memkit._sync import Memory
from memkit.frames import TRACE_COLUMNS, ReplayState, failure_patterns, replay, tool_stats, traces_frame
from memkit.widgets._common import Panel, esc, pretty, status_html, table_html
from memkit.widgets._common import workflows as list_workflows

__all__ = ["TraceReplay"]


def _cell(value: Any) -> object:
    if value is None or value is pd.NA or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, float):
        return round(value, 3)
    return value


def _frame_table(frame: pd.DataFrame, current: int | None = None) -> str:
    """Every cell escaped by ``table_html``; ``current`` marks the replayed row."""
    headers = [str(c) for c in frame.columns]
    rows = [[("▶ " if n == current else "") + str(_cell(v)) if i == 0 else _cell(v) for i, v in enumerate(r)]
            for n, r in enumerate(frame.itertuples(index=False, name=None))]
    return table_html(headers, rows)


def _nested(step: pd.Series, prefix: str) -> dict[str, Any]:
    """The ``params.*`` or ``result.*`` cells of one row as a dict (missing keys left out)."""
    return {str(k)[len(prefix):]: v for k, v in step.items()
            if str(k).startswith(prefix) and _cell(v) != ""}


class TraceReplay(Panel):
    """Pick a workflow; read its step table; replay it step by step; per-tool stats; CSV export.

    Parameters
    ----------
    mem
        An open store.
    """

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        self.frame = pd.DataFrame(columns=list(TRACE_COLUMNS))
        self.states: list[ReplayState] = []

        self.workflow = w.Dropdown(description="workflow", layout=w.Layout(width="560px"))
        self.status = w.HTML()
        self.table = w.HTML()
        self.step = w.IntSlider(min=0, max=0, value=0, description="step", continuous_update=False)
        self.play = w.Play(min=0, max=0, interval=900, description="play")
        w.jslink((self.play, "value"), (self.step, "value"))
        self.prev_button = w.Button(description="◀ previous")
        self.next_button = w.Button(description="next ▶")
        self.step_view = w.HTML()
        self.stats = w.HTML()
        self.patterns = w.HTML()
        self.csv_path = w.Text(value="trace.csv", description="CSV file")
        self.export_button = w.Button(description="export CSV", icon="download")

        self.widget = w.VBox([
            self.workflow, self.status,
            w.HBox([self.play, self.step, self.prev_button, self.next_button]),
            self.step_view, self.table,
            w.HTML("<b>per tool</b>"), self.stats,
            w.HTML("<b>failure patterns</b>"), self.patterns,
            w.HBox([self.csv_path, self.export_button]),
        ])
        self.workflow.observe(lambda c: self.load(), names="value")
        self.step.observe(lambda c: self._show_step(), names="value")
        self.prev_button.on_click(lambda _: self._move(-1))
        self.next_button.on_click(lambda _: self._move(+1))
        self.export_button.on_click(lambda _: self.export())
        self.refresh()

    def refresh(self) -> None:
        """Reload the list of workflows."""
        found = self._guard(lambda: list_workflows(self.mem))
        if found is None:
            return
        self.workflow.options = [(f"{wf}  ({u} / {a})", (u, a, wf)) for u, a, wf in found]
        if found:
            self.workflow.value = found[0]
        else:
            self.status.value = status_html("no traces in this store")

    def load(self) -> None:
        """Load the selected workflow's steps (``traces_frame``) and show step 1."""
        if self.workflow.value is None:
            return
        user, agent, wf = self.workflow.value
        frame = self._guard(lambda: traces_frame(self.mem, workflow_id=wf, agent_id=agent, user_id=user))
        if frame is None:
            return
        self.frame = frame
        self.states = list(replay(frame, wf))
        last = max(len(frame) - 1, 0)
        self.step.value = 0
        self.step.max = self.play.max = last
        self.stats.value = _frame_table(tool_stats(frame).reset_index())
        pats = failure_patterns(frame)
        self.patterns.value = _frame_table(pats) if not pats.empty else status_html("no failed steps")
        failed = int(frame["status"].eq("failed").sum())
        self.status.value = status_html(f"{len(frame)} steps, {failed} failed", "error" if failed else "ok")
        self._show_step()

    def _move(self, delta: int) -> None:
        self.step.value = min(max(self.step.value + delta, 0), self.step.max)

    def _show_step(self) -> None:
        if not self.states:
            self.step_view.value = self.table.value = ""
            return
        n = min(self.step.value, len(self.states) - 1)
        state = self.states[n]
        row = state.step
        failed_so_far = len(state.history.get_failed_steps())
        colour = "#b42318" if row["status"] == "failed" else "#1a7f37"
        error = _cell(row["error"])
        self.step_view.value = (
            f'<div class="memkit-step" style="border-left:4px solid {colour};padding-left:8px">'
            f"<b>step {n + 1} of {len(self.states)}: {esc(row['step_name'])}</b> · tool {esc(row['tool'])}"
            f" · <span style=\"color:{colour}\">{esc(row['status'])}</span>"
            f" · {esc(_cell(row['duration_s']))} s · retries {esc(_cell(row['retry_count']))}"
            f" · {failed_so_far} of {n + 1} steps failed so far"
            f"<br><b>params</b><pre>{esc(pretty(_nested(row, 'params.')))}</pre>"
            f"<b>result</b><pre>{esc(pretty(_nested(row, 'result.')))}</pre>"
            + (f"<b>error</b><pre>{esc(error)}</pre>" if error != "" else "")
            + "</div>"
        )
        self.table.value = _frame_table(self.frame[list(TRACE_COLUMNS)], current=n)

    def export(self, path: str | None = None) -> str | None:
        """Write the step frame (``step_id`` index and every column) to CSV and return the path."""
        target = path or self.csv_path.value.strip()
        if not target:
            self.status.value = status_html("give a file name for the CSV", "error")
            return None
        try:
            self.frame.to_csv(target)
        except OSError as exc:
            self.status.value = status_html(f"could not write {target}: {exc}", "error")
            return None
        self.status.value = status_html(f"wrote {len(self.frame)} steps to {os.path.abspath(target)}", "ok")
        return target

    def summary(self) -> str:
        wf = self.workflow.value[2] if self.workflow.value else "-"
        return f"TraceReplay: {len(self.workflow.options)} workflows; showing {wf}, {len(self.frame)} steps"
