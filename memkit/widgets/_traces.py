"""``TraceReplay``: step through one workflow run, with per-tool stats and failure patterns.

The step table comes from a frame-producing callable so ``memkit.frames.traces_frame``
plugs in unchanged; :func:`trace_frame` is the port-only default until then.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import ipywidgets as w
import pandas as pd

from memkit._sync import Memory
from memkit.widgets._common import Panel, esc, pretty, status_html, table_html
from memkit.widgets._common import workflows as list_workflows

__all__ = ["TRACE_COLUMNS", "TraceReplay", "trace_frame"]

TRACE_COLUMNS = ["step_index", "step_name", "tool", "status", "duration", "retry_count", "error",
                 "parameters", "result", "run_id", "created_at", "memory_id"]

FrameFn = Callable[[Memory, str, str, str], pd.DataFrame]
WorkflowsFn = Callable[[Memory], list[tuple[str, str, str]]]


def trace_frame(mem: Memory, user_id: str, agent_id: str, workflow_id: str, max_steps: int = 2000) -> pd.DataFrame:
    """The steps of one workflow, oldest first, one row per trace record (``TRACE_COLUMNS``)."""
    rows: list[dict[str, Any]] = []
    filters = {"type": "trace", "workflow_id": workflow_id}
    offset = 0
    while offset < max_steps:
        page = mem.get_page(user_id, agent_id, offset=offset, limit=500, filters=filters)
        for item in page:
            t = item.metadata.get("trace") or {}
            rows.append({
                "step_index": t.get("step_index"), "step_name": t.get("step_name"), "tool": t.get("tool"),
                "status": t.get("status"), "duration": t.get("duration"), "retry_count": t.get("retry_count", 0),
                "error": t.get("error"), "parameters": t.get("parameters"), "result": t.get("result"),
                "run_id": t.get("run_id"), "created_at": item.created_at, "memory_id": item.id,
            })
        offset += len(page)
        if len(page) < 500:
            break
    rows.reverse()
    return pd.DataFrame(rows, columns=TRACE_COLUMNS)


def tool_stats(frame: pd.DataFrame) -> pd.DataFrame:
    """Per tool: steps, failures, failure rate, retries and mean duration."""
    if frame.empty:
        return pd.DataFrame(columns=["tool", "steps", "failures", "failure_rate", "retries", "mean_duration"])
    failed = frame["status"].eq("failed")
    stats = frame.assign(failed=failed).groupby("tool", sort=True).agg(
        steps=("step_name", "size"), failures=("failed", "sum"), retries=("retry_count", "sum"),
        mean_duration=("duration", "mean"),
    )
    stats["failure_rate"] = (stats["failures"] / stats["steps"]).round(2)
    stats["mean_duration"] = stats["mean_duration"].round(2)
    return stats.reset_index()[["tool", "steps", "failures", "failure_rate", "retries", "mean_duration"]]


def failure_patterns(frame: pd.DataFrame) -> pd.DataFrame:
    """Failed steps grouped by error class (the text before the first ':') and tool."""
    failed = frame[frame["status"].eq("failed")]
    if failed.empty:
        return pd.DataFrame(columns=["error_class", "tool", "count"])
    kinds = failed["error"].fillna("unknown").astype(str).str.split(":", n=1).str[0]
    out = failed.assign(error_class=kinds).groupby(["error_class", "tool"]).size().rename("count")
    return out.reset_index().sort_values(["count", "error_class"], ascending=[False, True], ignore_index=True)


def _frame_table(frame: pd.DataFrame, current: int | None = None) -> str:
    headers = [str(c) for c in frame.columns]
    rows = [[("▶ " if n == current else "") + str(v) if i == 0 else v for i, v in enumerate(r)]
            for n, r in enumerate(frame.itertuples(index=False, name=None))]
    return table_html(headers, rows)


class TraceReplay(Panel):
    """Pick a workflow; read its step table; replay it step by step; per-tool stats; CSV export.

    Parameters
    ----------
    mem
        An open store.
    frame
        ``frame(mem, user_id, agent_id, workflow_id) -> DataFrame`` of steps, oldest
        first, with at least step_name, tool, status, duration, error, parameters,
        result (default: :func:`trace_frame`).
    workflows
        ``workflows(mem) -> [(user_id, agent_id, workflow_id), ...]``.
    """

    def __init__(self, mem: Memory, frame: FrameFn | None = None, workflows: WorkflowsFn | None = None) -> None:
        self.mem = mem
        self._frame_fn: FrameFn = frame or trace_frame
        self._workflows_fn: WorkflowsFn = workflows or list_workflows
        self.frame = pd.DataFrame(columns=TRACE_COLUMNS)

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
        found = self._guard(lambda: self._workflows_fn(self.mem))
        if found is None:
            return
        self.workflow.options = [(f"{wf}  ({u} / {a})", (u, a, wf)) for u, a, wf in found]
        if found:
            self.workflow.value = found[0]
        else:
            self.status.value = status_html("no traces in this store")

    def load(self) -> None:
        """Load the selected workflow's steps and show step 1."""
        if self.workflow.value is None:
            return
        user, agent, wf = self.workflow.value
        frame = self._guard(lambda: self._frame_fn(self.mem, user, agent, wf))
        if frame is None:
            return
        self.frame = frame.reset_index(drop=True)
        last = max(len(self.frame) - 1, 0)
        self.step.value = 0
        self.step.max = self.play.max = last
        self.stats.value = _frame_table(tool_stats(self.frame))
        pats = failure_patterns(self.frame)
        self.patterns.value = _frame_table(pats) if not pats.empty else status_html("no failed steps")
        failed = int(self.frame["status"].eq("failed").sum()) if len(self.frame) else 0
        self.status.value = status_html(f"{len(self.frame)} steps, {failed} failed", "error" if failed else "ok")
        self._show_step()

    def _move(self, delta: int) -> None:
        self.step.value = min(max(self.step.value + delta, 0), self.step.max)

    def _show_step(self) -> None:
        cols = [c for c in ("step_index", "step_name", "tool", "status", "duration", "retry_count", "error")
                if c in self.frame.columns]
        if self.frame.empty:
            self.step_view.value = self.table.value = ""
            return
        n = self.step.value
        row = self.frame.iloc[n]
        colour = "#b42318" if row.get("status") == "failed" else "#1a7f37"
        self.step_view.value = (
            f'<div class="memkit-step" style="border-left:4px solid {colour};padding-left:8px">'
            f"<b>step {n + 1} of {len(self.frame)}: {esc(row.get('step_name'))}</b> · tool {esc(row.get('tool'))}"
            f" · <span style=\"color:{colour}\">{esc(row.get('status'))}</span>"
            f" · {esc(row.get('duration'))} s · retries {esc(row.get('retry_count'))}"
            f"<br><b>parameters</b><pre>{esc(pretty(row.get('parameters')))}</pre>"
            f"<b>result</b><pre>{esc(pretty(row.get('result')))}</pre>"
            + (f"<b>error</b><pre>{esc(row.get('error'))}</pre>" if row.get("error") else "")
            + "</div>"
        )
        self.table.value = _frame_table(self.frame[cols], current=n)

    def export(self, path: str | None = None) -> str | None:
        """Write the step table to CSV and return the path."""
        target = path or self.csv_path.value.strip()
        if not target:
            self.status.value = status_html("give a file name for the CSV", "error")
            return None
        try:
            self.frame.to_csv(target, index=False)
        except OSError as exc:
            self.status.value = status_html(f"could not write {target}: {exc}", "error")
            return None
        self.status.value = status_html(f"wrote {len(self.frame)} steps to {os.path.abspath(target)}", "ok")
        return target

    def summary(self) -> str:
        wf = self.workflow.value[2] if self.workflow.value else "-"
        return f"TraceReplay: {len(self.workflow.options)} workflows; showing {wf}, {len(self.frame)} steps"
