"""``TraceReplay``: which runs failed, what happened in one, what a step did and knew, what changed.

An anywidget panel: the run list is :func:`memkit.frames.runs_frame`, the timeline and
the step list are :func:`memkit.frames.run_steps`, what a step recalled is
:func:`memkit.frames.recalls_frame`'s rows for it, the comparison is
:func:`memkit.frames.compare_runs`. Every trait is readable and settable from Python
(``panel.filters = {"status": "failed"}``, ``panel.run = ...``, ``panel.step = 2``),
so a notebook or a test drives the panel exactly like a click does.
"""

from __future__ import annotations

import math
import os
from typing import Any

import anywidget
import pandas as pd
import traitlets as t

from memkit._core._errors import InvalidInputError, MemkitError
from memkit._core._items import READ_KEYS, agent_keys
from memkit._core._models import MemoryItem
from memkit._core._recalls import Recall, step_namespace
from memkit._display import format_duration, format_time, printable, shorten, status_of, summary
from memkit._sync import Memory
from memkit.frames import RUN_COLUMNS, filter_runs, traces_frame
from memkit.frames._compare import _compare_steps
from memkit.frames._recalls import _keeps_recalls
from memkit.frames._runs import (
    _normalised,
    _parent_positions,
    _pick_run,
    _runs_from_steps,
    _step_payloads,
    run_positions,
)
from memkit.frames._usage import PricesLike
from memkit.widgets._common import Panel
from memkit.widgets._trace_audit import (
    attribute_rows,
    payload_filter,
    run_usage_cells,
    step_usage_facts,
    timeline_usage,
)
from memkit.widgets._trace_live import LiveMixin
from memkit.widgets._trace_marks import MarksMixin
from memkit.widgets._trace_rows import (
    _jsonable,
    _seconds,
    _text,
    error_lines,
    memory_view,
    run_rows,
    step_tree,
    timeline,
)

__all__ = ["TraceReplay"]

MAX_RUN_ROWS = 5000
"""Run rows sent to the browser at once; the caption says when filters should narrow the list."""

_FILTER_KEYS = ("status", "agent_id", "user_id", "workflow_id", "tool", "since", "until", "min_duration",
                "max_duration", "text", "model", "min_tokens", "max_tokens", "min_cost", "max_cost",
                "session", "tag", "payload")
_SORTABLE = {"status", "workflow_id", "agent_id", "user_id", "run_id", "started_at", "duration_s", "steps",
             "failed_steps", "retries", "first_error", "recalls", "tokens_total", "cost"}
_LEGS = ("keyword", "semantic")
_DETAIL_READ = READ_KEYS | {"retry_errors"}  # the detail lists earlier attempts' errors itself
# The search mode memkit.otel records for a foreign framework's retriever span. Its hits are that
# framework's own documents: one missing from this store was never a memory here, not deleted since.
_FOREIGN_MODE = "retriever"


class TraceReplay(Panel, MarksMixin, LiveMixin, anywidget.AnyWidget):
    """Audit workflow runs: a sortable, filterable run list; a run's timeline; a step's detail; two runs compared.

    Parameters
    ----------
    mem
        An open store.
    load
        Read the traces now (default); ``False`` waits for the first use (``Dashboard``
        reads them when its Traces tab is first shown).
    recalls
        Show what steps recalled (a store that keeps recalls): the run list's *recalls*
        column and the timeline's marks need every recall read once per refresh (about
        0.3 ms each on a 2-core machine); ``False`` skips that count on a store with very
        many recalls. A step's detail lists its recalls either way.
    prices
        Price table for steps that recorded tokens and no cost (:class:`memkit.Prices` or a dict
        model -> (input, output) per million tokens): the runs' and steps' ``cost``.
    follow
        Show runs and steps as another process writes them, within about a second
        (:meth:`follow`; closing the panel stops it).

    Examples
    --------
    >>> panel = TraceReplay(memkit.open("sqlite:///data/memory.db"))        # doctest: +SKIP
    >>> panel.filters = {"status": "failed"}; panel.run = panel.runs[0]["run"]  # doctest: +SKIP
    >>> panel.step = 2; panel.detail["error"]                                # doctest: +SKIP
    """

    _esm = Panel.module("_traces.js")

    runs: t.List[dict[str, Any]] = t.List().tag(sync=True)  # elements not validated one by one: 1000s of rows
    """The run rows shown (filtered and sorted), at most ``MAX_RUN_ROWS``."""
    total_runs = t.Int(0).tag(sync=True)
    runs_capped = t.Bool(False).tag(sync=True)
    options = t.Dict().tag(sync=True)
    """Values offered by the filter menus: ``statuses``, ``users``, ``agents``, ``tools``."""
    filters = t.Dict().tag(sync=True)
    """:data:`_FILTER_KEYS` (as :func:`~memkit.frames.runs_frame`'s; ``payload``: :func:`~memkit.frames.find_steps`)."""
    sort = t.Dict({"column": "started_at", "descending": True}).tag(sync=True)
    hidden_columns = t.List(t.Unicode()).tag(sync=True)
    run = t.Unicode("").tag(sync=True)
    """The open run (a :func:`~memkit.frames.runs_frame` id); ``""`` for none."""
    timeline = t.Dict().tag(sync=True)
    step = t.Int(-1).tag(sync=True)
    """Position of the open step in the run (``-1`` for none)."""
    detail = t.Dict().tag(sync=True)
    compare_with = t.Unicode("").tag(sync=True)
    compare_options: t.List[dict[str, Any]] = t.List().tag(sync=True)
    """Runs the open run can be compared with: every run of its workflow (``hidden`` when the
    filters leave it out of the list), then the listed runs of other workflows (``other_workflow``)."""
    comparison = t.Dict().tag(sync=True)
    memory = t.Dict().tag(sync=True)
    """The memory opened from the step detail (a recalled or written one); ``{}`` for none."""

    def __init__(self, mem: Memory, *, load: bool = True, recalls: bool = True, prices: PricesLike = None,
                 follow: bool = False) -> None:
        # The comm opens once the traces are read, so the browser gets them in its first state.
        self._open_later = True
        super().__init__()
        self.mem = mem
        self.prices = prices
        self.count_recalls = recalls and _keeps_recalls(mem)
        self.steps_all: pd.DataFrame = pd.DataFrame()
        self.all_runs: pd.DataFrame | None = None
        self._positions: dict[str, Any] = {}
        self._all_rows: list[dict[str, Any]] = []
        self._row_of = pd.Index([])
        self.shown: pd.DataFrame = pd.DataFrame(columns=list(RUN_COLUMNS))
        self.steps: pd.DataFrame = pd.DataFrame()
        self.diff: pd.DataFrame = pd.DataFrame()
        self._recalls: dict[int, list[Recall]] = {}  # the open run's recalls, by step_index
        # One change at a time: a followed store's new steps are added from the following thread.
        self.observe(lambda _: self._locked(self._apply), names=["filters", "sort"])
        self.observe(lambda c: self._locked(lambda: self.open_run(c["new"])), names="run")
        self.observe(lambda c: self._locked(lambda: self.open_step(c["new"])), names="step")
        self.observe(lambda c: self._locked(lambda: self.compare(c["new"])), names="compare_with")
        self.on_msg(self._on_message)
        self.answer_ready()
        if load:
            self.refresh()
        else:
            self.say("the traces are read when this panel is first used")
        self._open_later = False
        self.open()
        if follow:
            self.follow()

    def open(self) -> None:
        """Open the comm to the browser (held back while the constructor reads the traces)."""
        if not getattr(self, "_open_later", False):
            super().open()

    def ensure_loaded(self) -> None:
        """Read the traces if nothing has been read yet."""
        if self.all_runs is None:
            self.refresh()

    def _on_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not isinstance(content, dict):
            return
        if content.get("action") == "find_memories":
            self.find_memories()
        elif content.get("action") == "open_memory" and isinstance(content.get("id"), str):
            self.open_memory(content["id"])
        elif content.get("action") in ("mark_memory", "mark_step"):
            # As sent: the store's checks refuse a wrong type with the same words as in Python.
            flag: Any = content.get("relevant", content.get("good"))
            note: Any = content.get("note", "")
            recall: Any = content.get("recall")
            memory: Any = content.get("memory")
            if content["action"] == "mark_memory":
                self._guarded(lambda: self.mark_memory(recall, memory, relevant=flag, note=note))
            else:
                self._guarded(lambda: self.mark_step(good=flag, note=note))

    def _guarded(self, act: Any) -> None:
        """A click's bad input is said in the panel (a browser message has no caller to raise to)."""
        try:
            act()
        except (MemkitError, NotImplementedError) as exc:
            self.say(f"not marked: {exc}", "error")

    # -- run list ------------------------------------------------------------------------

    def refresh(self) -> None:
        """Read the store's traces again (one columnar read) and redraw the run list."""
        with self.working("reading traces"):
            self._show_steps(_normalised(traces_frame(self.mem, recalls=self.count_recalls, prices=self.prices)))

    def _show_steps(self, frame: pd.DataFrame, runs: pd.DataFrame | None = None,
                    positions: dict[str, Any] | None = None, rows: list[dict[str, Any]] | None = None,
                    grown: pd.DataFrame | None = None) -> None:
        """Show ``frame`` (every step held) as the run list; ``runs``, their ``positions`` in it and their
        ``rows``: already summarised (a followed store's runs, where only the ``grown`` ones changed)."""
        self.steps_all = frame
        self.all_runs = runs = _runs_from_steps(frame) if runs is None else runs
        self._positions = run_positions(frame, runs) if positions is None else positions
        self._all_rows = self.row_cells(runs) if rows is None else rows
        self._row_of = pd.Index(runs.index)
        of = runs if grown is None else grown  # a run that grew can only add values to the menus
        offered = {
            "statuses": set(of["status"]),
            "agents": {a for a in of["agent_id"] if isinstance(a, str)},
            "users": {u for u in of["user_id"] if isinstance(u, str)},
            **{key: {x for ms in of[column] for x in ms.split(", ") if x}
               for key, column in (("tools", "tools"), ("models", "models"), ("sessions", "sessions"),
                                   ("tags", "tags"))},
        }
        kept = {} if grown is None else self.options
        self.options = {key: sorted(values | set(kept.get(key, ()))) for key, values in offered.items()}
        self._apply()
        if not len(runs):
            self.say("no traces in this store")

    @staticmethod
    def row_cells(runs: pd.DataFrame) -> list[dict[str, Any]]:
        """The run list's row of each of ``runs``, as sent to the browser."""
        return [row | usage for row, usage in zip(run_rows(runs), run_usage_cells(runs), strict=True)]

    def _apply(self) -> None:
        if self.all_runs is None:
            self.refresh()  # which comes back here
            return
        with self.working("filtering runs"):
            wanted = {k: v for k, v in self.filters.items() if k in _FILTER_KEYS and v not in (None, "")}
            words = wanted.pop("payload", None)  # the store's keyword search over the steps' data
            shown, failed_search = payload_filter(self.mem, filter_runs(self.all_runs, **wanted), words)
            column = self.sort.get("column", "started_at")
            if column in _SORTABLE:
                shown = shown.sort_values(column, ascending=not self.sort.get("descending", True),
                                          kind="stable", na_position="last")
            self.shown = shown
            self.total_runs = len(self.all_runs)
            self.runs_capped = len(shown) > MAX_RUN_ROWS
            where = self._row_of.get_indexer(shown.index[:MAX_RUN_ROWS])
            self.runs = [self._all_rows[i] for i in where]
            if self.run and self.run in self.all_runs.index:
                self.compare_options = self._compare_options(self.run, self.all_runs.loc[self.run])
            failed = int(shown["status"].eq("failed").sum())
            if failed_search:
                self.say(failed_search, "error")
            elif len(self.all_runs):
                self.say(f"{len(shown):,} of {len(self.all_runs):,} runs, {failed:,} failed",
                         "error" if failed else "ok")

    # -- one run -------------------------------------------------------------------------

    def open_run(self, run: str) -> None:
        """Show ``run``'s timeline (``""`` closes it); the same as clicking its row."""
        if run != self.run:
            self.run = run  # the observer comes back here
            return
        self.step = -1
        self.detail = {}
        self.memory = {}
        self.compare_with = ""
        self.comparison = {}
        self._recalls = {}
        if run:
            self.ensure_loaded()
        if not run or self.all_runs is None:
            self.timeline, self.steps = {}, pd.DataFrame()
            return
        if run not in self.all_runs.index:
            try:  # a short name (workflow/run_id, run_id) naming one run opens it under its id
                self.run = str(_pick_run(self.all_runs, run).name)
            except InvalidInputError as exc:
                self.say(str(exc), "error")
                self.timeline, self.steps = {}, pd.DataFrame()
            return
        with self.working("loading the run"):
            self._draw_run(run)

    def _draw_run(self, run: str) -> None:
        """The open run's steps, timeline and recalls, from the steps held (opened or grown)."""
        assert self.all_runs is not None
        row = self.all_runs.loc[run]
        steps = self.steps_all.iloc[self._positions[run]]
        tree = step_tree(_parent_positions(steps, _step_payloads(self.mem, row, steps)))
        parents = None
        if tree is not None:  # a nested run: shown (and exported) parent first, children under it
            order, parents = tree
            steps = steps.iloc[order]
        self.steps = steps
        self.compare_options = self._compare_options(run, row)
        self._recalls = self._run_recalls(row)
        self.timeline = timeline(run, row, steps, parents) | timeline_usage(row, steps)

    def _run_recalls(self, row: pd.Series) -> dict[int, list[Recall]]:
        """The recalls the run's steps made, by ``step_index`` (every namespace they searched,
        but only this run's namespace's steps: another user's run of the same workflow is not this one)."""
        if not _keeps_recalls(self.mem) or not isinstance(row["workflow_id"], str):
            return {}
        if row["recalls"] is not pd.NA and row["recalls"] == 0:  # counted, and none
            return {}
        run_id = row["run_id"]
        space = (row["user_id"], row["agent_id"])
        found: dict[int, list[Recall]] = {}
        for recall in self.mem.recalls(workflow_id=row["workflow_id"], run_id=run_id):
            if recall.run_id == run_id and recall.step_index is not None and step_namespace(recall) == space:
                found.setdefault(recall.step_index, []).append(recall)
        return found

    def _compare_options(self, run: str, row: pd.Series) -> list[dict[str, Any]]:
        assert self.all_runs is not None
        runs = self.all_runs
        listed = runs.index.isin(self.shown.index)
        same = runs["workflow_id"].eq(row["workflow_id"]).to_numpy(dtype=bool)
        options: list[dict[str, Any]] = []
        for pick, other in ((same, False), (~same & listed, True)):
            chosen = runs[pick][:MAX_RUN_ROWS]
            hidden = ~listed[pick][:MAX_RUN_ROWS]
            options += [{"run": printable(r), "status": status, "hidden": bool(h), "other_workflow": other}
                        for r, status, h in zip(chosen.index, chosen["status"], hidden, strict=True) if r != run]
        return options

    # -- one step ------------------------------------------------------------------------

    def open_step(self, position: int) -> None:
        """Open the step at ``position`` in the run (``-1`` closes it); the same as clicking its bar."""
        if position != self.step:
            self.step = position
            return
        self.memory = {}
        if position < 0 or position >= len(self.steps):
            self.detail = {}
            return
        with self.working("opening the step"):
            self.detail = self._detail(self.steps.iloc[position], str(self.steps.index[position]))

    def _detail(self, row: pd.Series, step_id: str) -> dict[str, Any]:
        item = self.mem.get(step_id)
        payload: dict[str, Any] = {}
        same_namespace = item is not None and (item.user_id, item.agent_id) == (row["user_id"], row["agent_id"])
        if item is not None and same_namespace and isinstance(item.metadata.get("trace"), dict):
            payload = item.metadata["trace"]
        index = row["step_index"]
        name, tool = _text(row["step_name"]) or "?", _text(row["tool"]) or "?"
        retries = 0 if row["retry_count"] is pd.NA else int(row["retry_count"])
        written = payload.get("status")
        facts = [
            ("tool", tool), ("step", f"{index if index is not pd.NA else '?'} · {name}"),
            ("status", status_of(row["status"]) + (f" (written {written!r})" if isinstance(written, str)
                                                   and written != status_of(row["status"]) else "")),
            ("started", format_time(row["started_at"].to_pydatetime()) if pd.notna(row["started_at"]) else ""),
            ("duration", format_duration(_seconds(row["duration_s"]))), ("retries", str(retries)),
            ("workflow", _text(row["workflow_id"]) or ""), ("run id", _text(row["run_id"]) or "—"),
            ("step id", step_id), *step_usage_facts(row),
        ]
        return {
            "title": f"step {index if index is not pd.NA else '?'} · {name}", "status": status_of(row["status"]),
            "facts": [[k, printable(v)] for k, v in facts],
            "error": error_lines(_text(row["error"]) or ""),
            "retry_errors": [printable(e) for e in payload.get("retry_errors") or [] if isinstance(e, str)],
            "parameters": _jsonable(payload.get("parameters")) if payload else None,
            "result": _jsonable(payload.get("result")) if payload else None,
            # every other key the agent wrote (model, tokens, prompt, cost, its own traceback...)
            "data": _jsonable(agent_keys(payload, _DETAIL_READ)) if payload else None,
            **self._recall_detail(None if index is pd.NA else int(index)),
            "wrote": None, "attributes": attribute_rows(payload),
        } | self._marks_detail(row, step_id, None if index is pd.NA else int(index))

    def _recall_detail(self, index: int | None) -> dict[str, Any]:
        """What the step recalled: each search with its query and mode, each hit with rank, score,
        the legs that found it and the text it had then; hits deleted since are marked."""
        recalls = self._recalls.get(index, []) if index is not None else []
        ids = list(dict.fromkeys(hit.id for r in recalls for hit in r.hits))
        gone = {memory_id for memory_id in ids if self.mem.get(memory_id) is None}
        shown = []
        for r in recalls:
            hits = []
            for hit in r.hits:
                legs = [leg for leg in _LEGS if isinstance((hit.details or {}).get(leg), dict)
                        and hit.details[leg].get("rank") is not None]  # type: ignore[index]
                hits.append({
                    "id": hit.id, "rank": hit.rank, "legs": " + ".join(legs) or r.mode,
                    "score": hit.score if hit.score is not None and math.isfinite(hit.score) else None,
                    "text": shorten(printable(hit.content), 160), "full": printable(hit.content),
                    "deleted": hit.id in gone and r.mode != _FOREIGN_MODE,
                    "external": hit.id in gone and r.mode == _FOREIGN_MODE,
                })
            shown.append({
                "id": r.id, "kind": r.kind, "query": printable(r.query), "mode": r.mode, "limit": r.limit,
                "when": format_time(r.created_at), "namespace": printable(f"{r.user_id} / {r.agent_id}"),
                "attempt": r.attempt, "hits": hits,
            })
        # hits from the traced agent's own retriever are its documents, not memories recalled here
        documents = sum(hit.id in gone for r in recalls if r.mode == _FOREIGN_MODE for hit in r.hits)
        return {"recalls": shown, "recalled": sum(len(r.hits) for r in recalls), "documents": documents,
                "keeps_recalls": _keeps_recalls(self.mem)}

    def open_memory(self, memory_id: str) -> dict[str, Any]:
        """Show a memory the open step recalled or wrote; one deleted since shows as the step recalled it."""
        with self.working("opening the memory"):
            item = self.mem.get(memory_id)
            if item is not None:
                self.memory = memory_view(item)
            else:
                hit = next(((r, h) for rs in self._recalls.values() for r in rs for h in r.hits if h.id == memory_id),
                           None)
                if hit is None:
                    self.say(f"no memory {memory_id!r} in this store", "error")
                    self.memory = {}
                else:
                    recall, recalled = hit
                    if recall.mode == _FOREIGN_MODE:
                        self.memory = {
                            "id": printable(memory_id), "deleted": False, "external": True,
                            "text": printable(recalled.content),
                            "title": f"document {printable(memory_id)[:8]} · from the agent's retriever",
                            "facts": [["namespace", printable(f"{recall.user_id} / {recall.agent_id}")],
                                      ["recalled", format_time(recall.created_at)], ["rank", str(recalled.rank)]],
                            "note": "returned by the traced agent's own retriever; not a memory in this store",
                        }
                        return dict(self.memory)
                    self.memory = {
                        "id": printable(memory_id), "deleted": True, "text": printable(recalled.content),
                        "title": f"memory {printable(memory_id)[:8]} · deleted since",
                        "facts": [["namespace", printable(f"{recall.user_id} / {recall.agent_id}")],
                                  ["recalled", format_time(recall.created_at)], ["rank", str(recalled.rank)]],
                        "note": "deleted from the store since; this is the text the step recalled",
                    }
        return dict(self.memory)

    def find_memories(self) -> list[str]:
        """The memories the open step wrote (their summaries; ``detail["wrote"]`` lists them to open):
        the non-trace memories whose metadata names the step (``workflow_id`` and ``step_index``)
        in the step's namespace and in those its searches read, at most 50. A metadata scan, so
        only on request."""
        if self.step < 0 or self.step >= len(self.steps) or not self.detail:
            return []
        row = self.steps.iloc[self.step]
        wrote: list[MemoryItem] = []
        with self.working("finding the step's memories"):
            if row["step_index"] is not pd.NA and row["user_id"] is not None and row["agent_id"] is not None:
                # Traces are often kept under "system" while the step works in its user's
                # namespace: look there too when the step searched it (its recalls say so).
                spaces = [(row["user_id"], row["agent_id"])]
                for recall in self._recalls.get(int(row["step_index"]), []):
                    if (recall.user_id, recall.agent_id) not in spaces:
                        spaces.append((recall.user_id, recall.agent_id))
                for user, agent in spaces:
                    wrote += self.mem.get_page(user, agent, offset=0, limit=50 - len(wrote), filters={
                        "workflow_id": row["workflow_id"], "step_index": int(row["step_index"]),
                        "type": {"$ne": "trace"}})
                    if len(wrote) >= 50:
                        break
            self.detail = {**self.detail, "wrote": [{"id": m.id, "text": summary(m, 160)} for m in wrote]}
        return [summary(m) for m in wrote]

    # -- two runs ------------------------------------------------------------------------

    def compare(self, other: str) -> None:
        """Compare the open run (A) with ``other`` (B), step by step (``""`` closes the comparison)."""
        if other != self.compare_with:
            self.compare_with = other
            return
        if not other or not self.run or self.all_runs is None:
            self.comparison, self.diff = {}, pd.DataFrame()
            return
        if other not in self.all_runs.index:
            try:
                self.compare_with = str(_pick_run(self.all_runs, other).name)
            except InvalidInputError as exc:
                self.say(str(exc), "error")
            return
        with self.working("comparing runs"):
            # The same table as compare_runs, from the rows this panel already holds for each run.
            diff = _compare_steps(*(self.steps_all.iloc[self._positions[r]] for r in (self.run, other)))
            self.diff = diff
            rows = []
            for r in diff.itertuples(index=False):
                rows.append({
                    "step_index": int(r.step_index), "name_a": _text(r.step_name_a) or "—",
                    "name_b": _text(r.step_name_b) or "—", "status_a": r.status_a, "status_b": r.status_b,
                    "duration_a": format_duration(_seconds(r.duration_a_s)),
                    "duration_b": format_duration(_seconds(r.duration_b_s)),
                    "change": r.change, "changes": printable(r.changes),
                })
            changed = int(diff["change"].isin(["changed", "only in a", "only in b"]).sum())
            data = int((diff["change"] == "data differs").sum())
            wf_a, wf_b = (self.all_runs.at[r, "workflow_id"] for r in (self.run, other))
            self.comparison = {
                "rows": rows, "caption": f"A = {printable(self.run)} · B = {printable(other)} · {changed} of "
                                         f"{len(diff)} steps changed, {data} more with other parameters or results",
                "workflow_note": "" if wf_a == wf_b else
                f"different workflows: A is {printable(wf_a)}, B is {printable(wf_b)}; steps are aligned by "
                f"index and need not do the same thing",
            }

    # -- export and text -----------------------------------------------------------------

    def export(self, path: str) -> str:
        """Write the open run's steps (``step_id`` index and every column) to CSV and return the path."""
        try:
            self.steps.to_csv(path)
        except OSError as exc:
            self.say(f"could not write {path}: {exc}", "error")
            raise
        self.say(f"wrote {len(self.steps)} steps to {os.path.abspath(path)}", "ok")
        return path

    def summary(self) -> str:
        if self.all_runs is None:
            return "TraceReplay: traces not read yet"
        failed = sum(1 for r in self.runs if r["status"] == "failed")
        line = f"TraceReplay: {len(self.runs)} of {self.total_runs} runs shown, {failed} failed"
        if self.run:
            line += f"; open: {self.run} ({len(self.steps)} steps)"
        if self.detail:
            line += f"; step: {self.detail['title']}"
        return line

