"""Run numbers a researcher can trust, on a store written the way research agents write it.

``tests/_research_runs.py`` writes 303 runs (mixed timing spellings and none, per-attempt rows, status
vocabularies, tracebacks, two users sharing workflow and run ids, ids containing ``/``) and records
what each run was. Every run's duration, start, status, failures, retries and recalls are checked
against that record in ``runs_frame``, TraceReplay's model, the success-rate chart and the command
line, on SQLite, memory://, PostgreSQL and FalkorDB.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import memkit
from memkit._core._runs import run_key
from memkit._serve._runs import PortReads, read_run, read_runs
from memkit.charts import failure_heatmap, success_rate_chart
from memkit.cli import main
from memkit.frames import failure_patterns, run_steps, runs_frame, traces_frame
from memkit.widgets import TraceReplay
from tests._research_runs import BACKENDS, ExpectedRun, store_url, write_runs


@pytest.fixture(scope="module", params=BACKENDS)
def written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[str, memkit.Memory, list[ExpectedRun]]]:
    url = store_url(request.param, request, tmp_path_factory, "runs")
    with memkit.open(url) as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the agents' own keys (``prompt``, ``cost``) are not timing
        expected = write_runs(mem)
        yield url, mem, expected


def _by_key(expected: list[ExpectedRun]) -> dict[str, ExpectedRun]:
    return {run_key(*run.ids): run for run in expected}


def _moment(value: Any) -> float | None:
    if value is None or value is pd.NaT or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return float(pd.Timestamp(value).timestamp())


def _check(run: ExpectedRun, got: dict[str, Any], where: str) -> None:
    """One run's figures as a view gives them, against what the generator wrote."""
    what = f"{where}: {run_key(*run.ids)} ({run.timing}, {run.vocabulary})"
    assert (got["status"], got["steps"], got["failed_steps"], got["retries"], got["recalls"]) == (
        run.status, run.steps, run.failed_steps, run.retries, run.recalls), what
    assert got["duration_kind"] == run.duration_kind, what
    if run.duration is None:
        assert got["duration_s"] is None or math.isnan(got["duration_s"]), what
    else:
        assert got["duration_s"] == pytest.approx(run.duration, abs=2e-3), what
    start = _moment(got["started_at"])
    assert (start is None) == (run.start is None), what
    if run.start is not None:
        assert start == pytest.approx(run.start, abs=2e-3), what
    assert got["first_error"] == run.first_error, what


def test_every_run_in_runs_frame_is_what_the_agent_wrote(written: tuple[str, memkit.Memory, list[ExpectedRun]]) \
        -> None:
    _, mem, expected = written
    runs = runs_frame(mem)
    assert len(runs) == len(expected) == 303 and runs.index.is_unique
    for key, run in _by_key(expected).items():
        _check(run, runs.loc[key].to_dict(), "runs_frame")
    kinds = runs["duration_kind"].value_counts().to_dict()
    assert kinds == pd.Series([r.duration_kind for r in expected]).value_counts().to_dict()
    assert kinds["sum of steps"] > 60 and kinds["unknown"] > 20  # a third record no start
    # A duration filter keeps the runs that took over an hour, however they recorded it.
    long = runs_frame(mem, min_duration=3600)
    wanted = {k for k, r in _by_key(expected).items() if r.duration is not None and r.duration >= 3600}
    assert set(long.index) == wanted and any(_by_key(expected)[k].duration_kind == "sum of steps" for k in wanted)


def test_the_command_line_lists_and_shows_the_same_runs(
    written: tuple[str, memkit.Memory, list[ExpectedRun]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, mem, expected = written
    by_key = _by_key(expected)
    if url == "memory://":  # another process cannot open this store: the command's reads, on this one
        printed = [run.as_json() for run in read_runs(PortReads(mem))]
    else:
        assert main(["--url", url, "runs", "--json", "--limit", "1000"]) == 0
        printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(p["run"] for p in printed) == sorted(by_key)
    for row in printed:
        _check(by_key[row["run"]], row, "memkit runs")
    # bob's runs, listed alone, keep the ids they have in the whole list, and each is shown back.
    if url != "memory://":
        assert main(["--url", url, "runs", "--user", "bob", "--json", "--limit", "1000"]) == 0
        bob = [json.loads(line)["run"] for line in capsys.readouterr().out.splitlines()]
        assert sorted(bob) == sorted(k for k, r in by_key.items() if r.user_id == "bob")
        for key in [*bob[:3], run_key("lab/alice", "bio", "wfc", "rc")]:
            assert main(["--url", url, "show", key, "--json"]) == 0, key
            shown = json.loads(capsys.readouterr().out)
            assert shown["run"] == key and len({s["step_index"] for s in shown["steps"]}) == by_key[key].steps


def test_a_big_stores_runs_are_what_the_agent_wrote(
    written: tuple[str, memkit.Memory, list[ExpectedRun]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every store's runs as its public reads give them, read as a store of more records than
    ``COLUMNS_FROM`` is: from its trace columns where it offers them (SQLite, PostgreSQL)."""
    from memkit._core import _runs
    from memkit._sync import call

    _, mem, expected = written
    monkeypatch.setattr(_runs, "COLUMNS_FROM", 0)
    by_key = _by_key(expected)
    summaries = call(mem, _runs.summaries)
    assert sorted(r.key for r in summaries) == sorted(by_key)
    for summary in summaries:
        _check(by_key[summary.key], summary.__dict__, "runs read as columns")


def test_run_ids_with_slashes_name_one_namespace_each(written: tuple[str, memkit.Memory, list[ExpectedRun]]) \
        -> None:
    """issue 40: three namespaces whose ids would join to ``lab/alice/bio/wfc/rc``."""
    _, mem, expected = written
    slashed = expected[-3:]
    keys = [run_key(*run.ids) for run in slashed]
    assert len(set(keys)) == 3 and "lab/alice/bio/wfc/rc" not in keys
    reads = PortReads(mem)
    for key, run in zip(keys, slashed, strict=True):
        steps = run_steps(mem, key)
        assert set(zip(steps["user_id"], steps["agent_id"], strict=True)) == {run.ids[:2]}, key
        assert steps["step_index"].nunique() == run.steps
        detail = read_run(reads, key)
        assert detail.run.key == key and {(s.user_id, s.agent_id) for s in detail.steps} == {run.ids[:2]}
    # The text all three used to print is mallory's workflow/run_id: it names her run, and within
    # lab/alice's namespace nothing.
    assert read_run(reads, "lab/alice/bio/wfc/rc").run.ids == slashed[2].ids
    with pytest.raises(memkit.InvalidInputError, match="no run"):
        read_run(reads, "lab/alice/bio/wfc/rc", user_id="lab/alice")
    with pytest.raises(memkit.InvalidInputError, match="no run"):  # asked within another namespace
        read_run(reads, keys[2], user_id="bob")


def test_trace_replay_and_the_success_rate_chart(written: tuple[str, memkit.Memory, list[ExpectedRun]]) -> None:
    _, mem, expected = written
    by_key = _by_key(expected)
    panel = TraceReplay(mem)
    rows = {row["run"]: row for row in panel.runs}
    assert set(rows) == set(by_key) and panel.all_runs is not None
    for key, run in by_key.items():
        got = panel.all_runs.loc[key].to_dict()
        _check(run, got, "TraceReplay")
        row = rows[key]
        assert (row["status"], row["retries"], row["failed_steps"]) == (run.status, run.retries, run.failed_steps)
        assert row["duration"].startswith("Σ ") == (run.duration_kind == "sum of steps"), key
        assert (row["duration"] == "") == (run.duration is None) and (row["started"] == "") == (run.start is None)
        if run.error_headline is not None:
            shown = row["first_error"].removesuffix("…")  # the exception, not "Traceback (most recent..."
            assert shown and run.error_headline.startswith(shown), key
    # Steps are counted on the day they ran (a step without a start: its run's), never the day written.
    chart = success_rate_chart(mem)
    counted: dict[str, list[int]] = {}
    for run in expected:
        for start, status in run.rows:
            when = start if start is not None else run.start
            if when is not None:
                day = datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")
                counted.setdefault(day, []).append(status == "success")
    drawn = {str(p["period"])[:10]: (p["steps"], p["success_rate"]) for p in chart.spec["data"]["values"]}
    assert drawn == {day: (len(ok), pytest.approx(sum(ok) / len(ok))) for day, ok in counted.items()}
    steps = traces_frame(mem)
    assert set(steps["status"]) <= {"success", "failed", "running", "pending", "retrying", "skipped"}


def test_show_prints_retries_and_nesting_and_stops_quietly_in_a_pipe(
    written: tuple[str, memkit.Memory, list[ExpectedRun]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _, expected = written
    if url.startswith("memory"):
        pytest.skip("a memory:// store lives in the test's process: the command, another process, has its own")
    nested = next(r for r in expected if r.nested and r.retries and r.steps >= 4)
    key = run_key(*nested.ids)
    assert main(["--url", url, "show", key]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("#"))
    assert header.split()[:8] == ["#", "step", "tool", "status", "duration", "timing", "retries", "recalls"]
    rows = [line for line in lines if line[:1].isdigit()]
    indent = {row.split()[1]: row.index("step-") for row in rows}
    assert indent["step-2"] == indent["step-3"] == indent["step-1"] + 2  # they ran inside step-1
    retried = [row for row in rows if " retrying " not in row and " step-1 " in row]
    assert retried and all(str(nested.retries) in row.split() for row in retried[-1:])
    # `memkit ... | head -1`: the reader leaves early (here after the first of 150 kB); no "Broken pipe"
    # on stderr, exit 0.
    for command in (f"show '{key}'", "runs --json --limit 1000"):
        shell = subprocess.run(
            f"{sys.executable} -m memkit --url '{url}' {command} | head -1; exit ${{PIPESTATUS[0]}}",
            shell=True, executable="/bin/bash", capture_output=True, text=True, cwd=Path(__file__).parent.parent,
            timeout=120)
        assert shell.stdout.count("\n") == 1 and shell.stderr == "" and shell.returncode == 0, shell


# What each error the agents write is about (issue 42, item 8): the category a researcher expects.
CATEGORIES = {"ConnectionError": "network_error", "TimeoutError": "network_error", "HTTP 429": "rate_limit_error",
              "ValueError": "parameter_error"}


def test_failures_are_counted_by_what_went_wrong(written: tuple[str, memkit.Memory, list[ExpectedRun]]) -> None:
    """Every failed step counts, whatever word its agent used (``error``, ``ERROR``, ``503``, ``exception``,
    ``timeout``, ``cancelled``), in the category its exception names, tracebacks included."""
    _, mem, expected = written
    wanted: dict[tuple[str, str], int] = {}
    for run in expected:
        if run.failed_tool is not None and run.error_headline is not None:
            category = next(c for prefix, c in CATEGORIES.items() if run.error_headline.startswith(prefix))
            wanted[(category, run.failed_tool)] = wanted.get((category, run.failed_tool), 0) + 1
    got = failure_patterns(mem)
    assert {(r.category, r.tool): r.count for r in got.itertuples()} == wanted
    drawn = failure_heatmap(mem).spec["data"]["values"]
    assert {(v["category"], v["tool"]): v["count"] for v in drawn} == wanted
    assert sum(wanted.values()) == sum(r.failed_steps for r in expected)


def test_every_key_the_agent_wrote_is_shown(written: tuple[str, memkit.Memory, list[ExpectedRun]]) -> None:
    """An agent's own payload keys (model, tokens, prompt, cost, traceback) in run_steps, traces_frame
    (``data=True``) and the step detail, as written."""
    _, mem, expected = written
    failed = next(r for r in expected if r.status == "failed" and r.vocabulary == "otel")
    key = run_key(*failed.ids)
    steps = run_steps(mem, key)
    first = steps.iloc[0]
    assert {k: first[f"data.{k}"] for k in failed.extra} == failed.extra
    last = steps.iloc[-1]
    assert last["data.traceback"].splitlines()[-1] == failed.error_headline and last["status"] == "failed"
    assert list(steps.columns)[-2:] == ["parent_step_index", "timing"]
    frame = traces_frame(mem, user_id=failed.user_id, agent_id=failed.agent_id, data=True)
    assert {k: frame.loc[steps.index[0], f"data.{k}"] for k in failed.extra} == failed.extra
    assert "data.model" not in traces_frame(mem, user_id=failed.user_id, agent_id=failed.agent_id).columns
    panel = TraceReplay(mem)
    panel.run = key
    panel.step = 0
    assert {k: panel.detail["data"][k] for k in failed.extra} == failed.extra
    panel.step = len(panel.steps) - 1
    assert panel.detail["data"]["traceback"].splitlines()[-1] == failed.error_headline
    assert "(written 'ERROR')" in dict(panel.detail["facts"])["status"]


def test_nested_steps_without_start_times_are_drawn_inside_their_parent(
    written: tuple[str, memkit.Memory, list[ExpectedRun]]
) -> None:
    _, mem, expected = written
    runs = [r for r in expected if r.nested and r.steps >= 3 and r.start is None and r.duration_kind == "sum of steps"]
    assert runs
    panel = TraceReplay(mem)
    for run in runs:
        panel.run = run_key(*run.ids)
        timeline = panel.timeline
        parent, start, duration = timeline["parent"], timeline["start_s"], timeline["duration_s"]
        children = [k for k, p in enumerate(parent) if p >= 0]
        assert children, run
        for k in children:
            p = parent[k]
            assert start[p] <= start[k] < start[p] + duration[p], (run, k)  # inside, not after, its parent's bar


def test_an_agents_recall_leaves_its_own_trace_records_out(
    written: tuple[str, memkit.Memory, list[ExpectedRun]]
) -> None:
    """issue 42, item 10: recall_memory (function calling, pydantic-ai) and MCP's recall return notes,
    not the agent's logged steps, unless asked; the port's search keeps the seed's behaviour."""
    from memkit._serve._catalogue import TOOLS
    from memkit._sync import run_sync
    from memkit.tools import ProviderTools

    _, mem, _ = written
    note = mem.add("pubmed strategy: search TP53 reviews first", "alice", "bio")
    try:
        seed = mem.search("pubmed", "alice", "bio", limit=10, mode="keyword")
        assert sum(hit.metadata.get("type") == "trace" for hit in seed) >= 5  # the port: as the seed
        tools = ProviderTools(mem, "alice", "bio")
        assert [hit["id"] for hit in tools.recall_memory("pubmed", limit=10)["results"]] == [note]
        asked = tools.recall_memory("pubmed", limit=10, include_traces=True)["results"]
        assert len(asked) == 10 and any(hit["metadata"].get("type") == "trace" for hit in asked)
        recall = TOOLS["recall"].run
        assert recall is not None
        found = run_sync(recall(mem.provider, ("alice", "bio"), "pubmed", 10, "keyword"))["results"]
        assert [hit["id"] for hit in found] == [note]
        steps = run_sync(recall(mem.provider, ("alice", "bio"), "pubmed", 3, "keyword", {"type": "trace"}))["results"]
        assert len(steps) == 3  # a filter on type asks for them
        with pytest.raises(memkit.InvalidInputError, match="include_traces"):
            tools.recall_memory("pubmed", include_traces="yes")  # type: ignore[arg-type]
    finally:
        mem.delete(note, user_id="alice", agent_id="bio")


def test_an_otlp_export_marks_each_failed_step_whatever_word_its_agent_used(
    written: tuple[str, memkit.Memory, list[ExpectedRun]]
) -> None:
    from memkit.otel import export_otlp

    _, mem, expected = written
    for vocabulary in ("ok/error", "otel", "http", "langchain"):
        run = next(r for r in expected if r.vocabulary == vocabulary and r.status == "failed")
        request = export_otlp(mem, user_id=run.user_id, agent_id=run.agent_id, workflow_id=run.workflow_id,
                              run_id=run.run_id)
        spans = [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
                 if s["name"].startswith("step-")]
        assert sum(s["status"]["code"] == 2 for s in spans) == run.failed_steps, vocabulary


def test_status_words_read_as_statuses_and_an_unknown_word_is_warned_about_once() -> None:
    from memkit._core._items import status_of

    words = {"ok": "success", "ERROR": "failed", "UNSET": "success", "STATUS_CODE_ERROR": "failed", "503": "failed",
             "HTTP 200": "success", "succeeded": "success", "exception": "failed", "timeout": "failed",
             "Timed-Out": "failed", "cancelled": "failed", "skipped": "skipped", "in progress": "running",
             "queued": "pending", "retrying": "retrying", "pending": "pending", "102": "running"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert {word: status_of(word) for word in words} == words
        assert status_of("frobnicated") == status_of("frobnicated") == status_of(None) == "unknown"
    assert [str(w.message) for w in caught if "frobnicated" in str(w.message)] == [
        "memkit: trace status 'frobnicated' is not a status memkit knows; the step reads as 'unknown' (use "
        "success, failed, running, pending, retrying or skipped)"]
    assert len(caught) == 1


def test_a_run_id_stays_when_another_user_later_reuses_it() -> None:
    with memkit.open("memory://") as mem:
        mem.add_trace("bio", "literature-review", {"step_name": "s", "run_id": "li-0019", "status": "ok"},
                      user_id="alice")
        before = list(runs_frame(mem).index)
        mem.add_trace("bio", "literature-review", {"step_name": "s", "run_id": "li-0019", "status": "ok"},
                      user_id="bob")
        after = runs_frame(mem)
        assert before == ["alice/bio/literature-review/li-0019"] and before[0] in after.index and len(after) == 2
        assert list(runs_frame(mem, user_id="alice").index) == before


def test_the_langgraph_store_searches_its_items_not_the_agents_trace_records() -> None:
    from memkit.langgraph import MemkitStore

    with memkit.open("memory://") as mem, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_runs(mem, runs=6)
        store = MemkitStore(mem, user_id="alice", agent_id="bio")
        store.put(("notes",), "pubmed", {"text": "pubmed strategy: TP53 reviews first"})
        assert len(mem.search("pubmed", "alice", "bio", limit=10, mode="keyword")) > 1  # traces match too
        assert [item.key for item in store.search(("notes",), query="pubmed")] == ["pubmed"]
