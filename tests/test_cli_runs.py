"""``memkit runs``, ``memkit show``, ``memkit namespaces``: what a shell script and a person read."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import memkit
from memkit.cli import main
from memkit.traces import ExecutionHistory

HOSTILE = "boom \x1b]0;pwned\x07 \x1b[2J \u202egnp"
T0 = datetime(2026, 10, 1, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'runs.db'}?embedder=none"
    with memkit.open(url) as mem:
        mem.add("TP53 knockdown raises apoptosis", "alice", "bio")
        for r in range(3):
            for i in range(3):
                failed = r == 1 and i == 2
                mem.add_trace("bio", "align", {
                    "step_name": f"step_{i}", "tool": "bwa", "step_index": i, "run_id": f"run-{r}",
                    "status": "failed" if failed else "success", "duration_ms": 1000 * (i + 1),
                    "started_at": T0 + timedelta(hours=r, seconds=10 * i),
                    **({"error": HOSTILE} if failed else {}),
                }, user_id="alice")
        mem.add_trace("bio", "untimed", {"step_name": "s", "step_index": 0, "run_id": "u-1"}, user_id="bob")
        history = ExecutionHistory(memory_provider=mem, workflow_id="review", agent_id="bio",
                                          user_id="alice", run_id="rev-1")
        with history.step("look_up", tool="memory"):
            mem.search("TP53", "alice", "bio", limit=3, mode="keyword")
        history.close()
    return url


def _inert(text: str) -> None:
    assert not any(ch in text for ch in "\x1b\x07\u202e"), repr(text)


def test_runs_lists_newest_first_and_filters(
    store: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # room for the whole first error
    assert main(["--url", store, "runs"]) == 0
    out = capsys.readouterr().out
    _inert(out)
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["run", "started", "status"]
    keys = [line.split()[0] for line in lines[1:]]
    ids = [keys.index(f"alice/bio/align/run-{r}") for r in (2, 1, 0)]
    assert ids == sorted(ids)
    assert "\\x1b]0;pwned\\x07" in out  # the error is visible, escaped
    assert main(["--url", store, "runs", "--status", "failed", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["run"] == "alice/bio/align/run-1" and row["failed_steps"] == 1 and row["first_error"] == HOSTILE
    assert row["duration_s"] == 23.0  # 20 s from first start to the last step's start, plus its 3 s
    assert main(["--url", store, "runs", "--workflow", "review", "--json"]) == 0
    [row] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert row["recalls"] == 1


def test_runs_exit_codes_a_script_can_use(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "runs", "--status", "running"]) == 1  # nothing matched
    assert "no run matches" in capsys.readouterr().err
    assert main(["--url", store, "runs", "--since", "2100-01-01"]) == 1
    assert main(["--url", store, "runs", "--since", "3d", "--workflow", "review"]) == 0  # written just now
    capsys.readouterr()
    assert main(["--url", store, "runs", "--since", "yesterday"]) == 2
    err = capsys.readouterr().err
    assert "--since must be an ISO date or time" in err and "'yesterday'" in err
    assert main(["--url", store, "runs", "--limit", "0"]) == 2
    with pytest.raises(SystemExit) as bad:
        main(["--url", store, "runs", "--status", "exploded"])
    assert bad.value.code == 2


def test_show_prints_steps_errors_and_recalls(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "show", "alice/bio/align/run-1"]) == 0
    out = capsys.readouterr().out
    _inert(out)
    assert out.startswith("run alice/bio/align/run-1: failed · 3 steps")
    assert main(["--url", store, "show", "align/run-1"]) == 0  # the short id, naming one run
    assert capsys.readouterr().out == out
    assert "3.0 s" in out and "recorded" in out
    assert "errors:\n  step 2 step_2: boom \\x1b]0;pwned\\x07" in out
    assert main(["--url", store, "show", "rev-1"]) == 0  # a run_id naming one run
    out = capsys.readouterr().out
    assert "recalls:" in out and "search 'TP53' (keyword, alice / bio) -> 1 memories" in out
    assert "TP53 knockdown raises apoptosis" in out
    assert main(["--url", store, "show", "untimed/u-1"]) == 0
    assert "1 of 1 steps recorded no timing" in capsys.readouterr().out


def test_show_json_and_missing_runs(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "show", "review/rev-1", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["status"] == "success" and run["steps"][0]["step_name"] == "look_up"
    assert run["steps"][0]["timing"] == "recorded"
    assert run["recalls"][0]["hits"][0]["content"] == "TP53 knockdown raises apoptosis"
    assert main(["--url", store, "show", "no-such-run"]) == 1
    assert "no run 'no-such-run'" in capsys.readouterr().err
    assert main(["--url", store, "show", "align"]) == 2  # names three runs: say which
    assert "names 3 runs" in capsys.readouterr().err


def test_namespaces(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "namespaces", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {(r["user_id"], r["agent_id"]) for r in rows} == {("alice", "bio"), ("bob", "bio")}
    assert main(["--url", store, "namespaces"]) == 0
    assert capsys.readouterr().out.splitlines()[0].split() == ["user", "agent", "records", "first", "last"]
    assert main(["--url", "memory://", "namespaces"]) == 1


def test_a_bad_json_argument_is_a_clear_error(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--url", store, "search", "x", "--user", "alice", "--agent", "bio", "--filters", "{gene: TP53}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memkit: error: --filters must be JSON") and "character 1" in err
    assert "Expecting property name enclosed" in err and "Traceback" not in err


def test_memkit_testing_imports_without_pytest() -> None:
    code = ("import sys; sys.modules['pytest'] = None\n"
            "from memkit.testing import FalkorDBServer, Neo4jServer\n"
            "try:\n    from memkit.testing import ProviderConformance\nexcept ImportError:\n    print('lazy')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "lazy"


def test_reading_commands_leave_numpy_and_pandas_unloaded(store: str) -> None:
    """Every command pays for its imports on every call: counts and namespaces need neither."""
    code = ("import sys\nimport memkit\nfrom memkit.cli import main\n"
            "loaded = lambda: sorted(m for m in ('numpy', 'pandas') if m in sys.modules)\n"
            "print('import', loaded())\n"
            "print('stats', main(['--url', sys.argv[1], 'stats']), loaded())\n"
            "print('namespaces', main(['--url', sys.argv[1], 'namespaces']), loaded())\n"
            "print('runs', main(['--url', sys.argv[1], 'runs']), loaded())\n"
            "print('show', main(['--url', sys.argv[1], 'show', 'align/run-1']), loaded())\n")
    done = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, check=True)
    said = [line for line in done.stdout.splitlines()
            if line.startswith(("import ", "stats ", "namespaces ", "runs ", "show "))]
    # runs are read straight from the store, not through a runs_frame
    assert said == ["import []", "stats 0 []", "namespaces 0 []", "runs 0 []", "show 0 []"]


def test_lazy_names_are_the_same_objects() -> None:
    code = ("import memkit, memkit._sync, memkit._core._models, memkit._evaluate\n"
            "ns = {}\nexec('from memkit import *', ns)\n"
            "assert memkit.open is memkit._sync.open and ns['Memory'] is memkit._sync.Memory\n"
            "assert ns['Stats'] is memkit._core._models.Stats and memkit.evaluate is memkit._evaluate.evaluate\n"
            "assert set(memkit.__all__) <= set(dir(memkit)) and set(memkit.__all__) <= set(ns)\n"
            "try:\n    memkit.no_such_name\nexcept AttributeError as exc:\n    print(exc)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "module 'memkit' has no attribute 'no_such_name'"


def _researchers_store(url: str) -> memkit.Memory:
    """Two users running the same workflow ids (some runs without run_id), timing in six spellings or
    none, statuses missing or unknown, retries, errors, recalls and marks: as agents write them."""
    import random

    from memkit._recall._recording import Recall, RecalledMemory
    from memkit._sync import run_sync

    rng = random.Random(7)
    mem = memkit.open(url)
    note = {user: mem.add(f"{user}'s note on TP53", user, "bio") for user in ("alice", "bob")}
    recalls: list[Recall] = []
    for r in range(40):
        user = ("alice", "bob")[r % 2]
        workflow = f"wf-{r % 5}"
        run_id = None if r % 7 == 0 else f"run-{r // 4}"
        clock = T0 + timedelta(minutes=13 * r)
        for i in range(rng.randrange(1, 6)):
            tool = rng.choice(["bwa", "blast", None])
            data: dict[str, object] = {"step_name": f"s{i}", "step_index": i, "tool": tool}
            if run_id is not None:
                data["run_id"] = run_id
            status = rng.choice(["success", "success", "failed", "running", "weird", None])
            if status is not None:
                data["status"] = status
            if status == "failed" and rng.random() < 0.8:
                data["error"] = f"exit {r}{i}"
            if rng.random() < 0.3:
                data["retry_count"] = rng.randrange(3)
            seconds = round(rng.uniform(0.1, 90), 3)
            spelling = rng.randrange(7)
            if spelling == 0:
                data.update(duration=seconds, timestamp=clock.timestamp())
            elif spelling == 1:
                data.update(duration_ms=seconds * 1000, started_at=clock.isoformat())
            elif spelling == 2:
                data.update(latency_ms=seconds * 1000)
            elif spelling == 3:
                data.update(elapsed=seconds, start_time=clock.timestamp())
            elif spelling == 4:
                data.update(started_at=clock, ended_at=clock + timedelta(seconds=seconds))
            elif spelling == 5:
                data.update(started_at=clock.isoformat())
            step = mem.add_trace("bio" if r % 3 else "planner", workflow, data, user_id=user)
            if r % 5 == 1 and i == 0:
                mem.mark_step(step, good=r % 2 == 1, user_id=user, agent_id="bio" if r % 3 else "planner", note="ok")
            for _ in range(rng.randrange(3)):
                recalls.append(Recall(
                    id=uuid.uuid4().hex, created_at=clock, user_id=user, agent_id="bio", query="TP53", mode="keyword",
                    limit=5, workflow_id=workflow, run_id=run_id, step_index=i, step_name=f"s{i}", attempt=1,
                    trace_user_id=user, trace_agent_id="bio" if r % 3 else "planner",
                    hits=[RecalledMemory(id=note[user], rank=1, score=1.0, content=f"{user}'s note on TP53")],
                ))
            clock += timedelta(seconds=seconds + 1)
    run_sync(mem.provider.add_recalls(recalls))  # type: ignore[attr-defined]
    return mem


@pytest.mark.parametrize("backend", ["sqlite", "sqlite, as columns", "memory"])
def test_the_run_list_is_runs_frame_without_pandas(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``memkit runs`` reads (no pandas) is exactly ``runs_frame``: SQLite's run summaries, the
    store base's (memory://), and the base's read of a big store's trace columns (as on Postgres)."""
    from memkit._core import _runs
    from memkit._serve._runs import PortReads, Run, read_runs
    from memkit._sync import call
    from memkit.frames import runs_frame

    if backend == "sqlite, as columns":  # as a store of more than COLUMNS_FROM records is read
        monkeypatch.setattr(_runs, "COLUMNS_FROM", 0)
    url = f"sqlite:///{tmp_path / 'r.db'}?embedder=none" if backend.startswith("sqlite") else "memory://"
    with _researchers_store(url) as mem:
        frame = runs_frame(mem)
        # "as columns": the base's reading, not SQLite's own
        runs = ([Run(s) for s in call(mem, _runs.summaries)] if backend == "sqlite, as columns"
                else read_runs(PortReads(mem)))
        assert [r.key for r in runs] == list(frame.index) and len(runs) > 30
        assert all(r.key.startswith(("alice/", "bob/")) for r in runs)  # every id names its namespace
        for run, (key, row) in zip(runs, frame.iterrows(), strict=True):
            got = run.as_json()
            for column in ("workflow_id", "run_id", "user_id", "agent_id", "status", "steps", "failed_steps",
                           "retries", "recalls", "first_error"):
                assert got[column] == (None if row[column] is None else row[column]), (key, column)
            for column in ("started_at", "ended_at"):
                assert getattr(run, column) == (None if pd.isna(row[column]) else row[column]), (key, column)
            assert run.duration_kind == row["duration_kind"], key
            assert run.duration_s == pytest.approx(row["duration_s"], abs=1e-6, nan_ok=True) or (
                run.duration_s is None and pd.isna(row["duration_s"])), key
            assert run.tools == row["tools"], key
        for user in ("alice", "bob"):
            mine = read_runs(PortReads(mem), user_id=user, agent_id="bio")
            assert [r.key for r in mine] == list(runs_frame(mem, user_id=user, agent_id="bio").index)
        marked = {r.key: dict(r.marks) for r in runs if r.marks}
        assert marked and all(set(m) <= {"good", "bad"} for m in marked.values())


@pytest.mark.parametrize("columns", [False, True], ids=["records", "columns"])
def test_show_keeps_two_users_runs_of_one_workflow_apart_and_shows_marks(
    columns: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkit._core import _runs

    if columns:  # as a store of more than COLUMNS_FROM records is read: workflow by workflow
        monkeypatch.setattr(_runs, "COLUMNS_FROM", 0)
    url = f"sqlite:///{tmp_path / 'two.db'}?embedder=none"
    with memkit.open(url) as mem:
        for user in ("alice", "bob"):
            mem.add(f"{user} only: TP53 note", user, "bio")
            history = ExecutionHistory(memory_provider=mem, workflow_id="wf-1", agent_id="bio", user_id=user)
            with history.step("look_up", tool="memory"):
                mem.search("TP53", user, "bio", limit=3, mode="keyword")
            history.close()
        [step] = [i for i in mem.get_all("alice", "bio", filters={"type": "trace"})]
        [recall] = mem.recalls(user_id="alice", agent_id="bio")
        mem.mark_step(step.id, good=False, user_id="alice", agent_id="bio", note="looked in the wrong \u202e place")
        mem.mark_memory(recall.id, recall.hits[0].id, relevant=True, user_id="alice", agent_id="bio")
    assert main(["--url", url, "runs", "--json"]) == 0
    rows = {r["run"]: r for r in map(json.loads, capsys.readouterr().out.splitlines())}
    assert set(rows) == {"alice/bio/wf-1", "bob/bio/wf-1"}
    assert rows["alice/bio/wf-1"]["marks"] == {"bad": 1} and rows["bob/bio/wf-1"]["marks"] == {}
    assert main(["--url", url, "runs"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[-3:] == ["marks", "first", "error"] and "1 bad" in out
    assert main(["--url", url, "show", "alice/bio/wf-1"]) == 0
    out = capsys.readouterr().out
    _inert(out)
    assert "alice only: TP53 note" in out and "bob only" not in out
    assert "[relevant]" in out and "marks:\n  step 0 look_up: bad: looked in the wrong \\u202e place" in out
    assert main(["--url", url, "show", "bob/bio/wf-1", "--json"]) == 0
    bob = json.loads(capsys.readouterr().out)
    assert [h["content"] for r in bob["recalls"] for h in r["hits"]] == ["bob only: TP53 note"]
    assert bob["marks"] == [] and bob["recalls"][0]["hits"][0]["mark"] is None


@pytest.mark.parametrize("columns", [False, True], ids=["records", "columns"])
def test_show_finds_a_run_whose_id_another_workflow_could_also_spell(
    columns: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkit._core import _runs

    if columns:
        monkeypatch.setattr(_runs, "COLUMNS_FROM", 0)
    url = f"sqlite:///{tmp_path / 'ids.db'}?embedder=none"
    with memkit.open(url) as mem:
        mem.add_trace("bio", "a/b", {"step_name": "slash", "status": "success"}, user_id="alice")
        mem.add_trace("bio", "a", {"step_name": "run b", "status": "failed", "run_id": "b"}, user_id="bob")
        mem.add_trace("bio", "a", {"step_name": "run c", "status": "success", "run_id": "c"}, user_id="alice")
    assert main(["--url", url, "runs", "--json"]) == 0
    keys = sorted(json.loads(line)["run"] for line in capsys.readouterr().out.splitlines())
    assert keys == ["alice/bio/a%2Fb", "alice/bio/a/c", "bob/bio/a/b"]
    assert main(["--url", url, "show", "bob/bio/a/b", "--json"]) == 0
    assert [s["step_name"] for s in json.loads(capsys.readouterr().out)["steps"]] == ["run b"]
    assert main(["--url", url, "show", "a/c", "--json"]) == 0
    assert [s["step_name"] for s in json.loads(capsys.readouterr().out)["steps"]] == ["run c"]
    assert main(["--url", url, "show", "alice/bio/a%2Fb", "--json"]) == 0
    assert [s["step_name"] for s in json.loads(capsys.readouterr().out)["steps"]] == ["slash"]
    assert main(["--url", url, "show", "a/b", "--json"]) == 2  # two runs' short ids: refused, both named
    assert "'alice/bio/a%2Fb'" in capsys.readouterr().err
    assert main(["--url", url, "show", "c", "--json"]) == 0  # a run_id naming one run
    assert json.loads(capsys.readouterr().out)["run"] == "alice/bio/a/c"


def test_sqlite_counts_run_summaries_as_the_generic_reads_do_and_within_a_namespace(tmp_path: Path) -> None:
    """SQLite's run summaries (step columns, recall counts from an index) equal what any store's
    public reads give, for the whole store, one namespace and one workflow; another namespace never shows."""
    from memkit._core._runs import summaries
    from memkit._sync import run_sync

    with _researchers_store(f"sqlite:///{tmp_path / 's.db'}?embedder=none") as mem:
        store = mem.provider
        for scope in ({}, {"user_id": "alice"}, {"user_id": "bob", "agent_id": "bio"}, {"workflow_id": "wf-1"}):
            fast = run_sync(store.run_summaries(**scope))  # type: ignore[attr-defined]
            slow = run_sync(summaries(store, scope.get("user_id"), scope.get("agent_id"), scope.get("workflow_id")))
            assert fast == slow and fast, scope
            assert all(r.recalls is not None for r in fast) and any(r.recalls for r in fast)
            assert any(r.marks for r in fast) or scope.get("workflow_id")
        assert {r.user_id for r in run_sync(store.run_summaries(user_id="alice"))} == {"alice"}  # type: ignore[attr-defined]
        with pytest.raises(memkit.InvalidInputError, match="user_id"):
            run_sync(store.run_summaries(user_id=""))  # type: ignore[attr-defined]


def test_one_workflows_steps_listed_through_the_trace_index_are_what_the_filters_select(tmp_path: Path) -> None:
    """SQLite lists one workflow's trace steps from the trace table's workflow index (what ``show``
    reads): the same memories, in the same order, as memory:// (which tests every record), with notes,
    steps of other workflows and of another namespace, a numeric workflow id and a workflow id that
    only a note has beside them."""
    url = f"sqlite:///{tmp_path / 'w.db'}?embedder=none"
    listings = []
    for each in (url, "memory://"):
        with memkit.open(each) as mem:
            for i in range(6):
                mem.add_trace("bio", "wf-1" if i % 2 else "wf-2", {"step_index": i, "run_id": "r"}, user_id="alice")
                mem.add_trace("bio", "wf-1", {"step_index": i, "run_id": "r"}, user_id="bob")
            mem.add("a note of wf-1", "alice", "bio", metadata={"workflow_id": "wf-1", "type": "note"})
            mem.add("a trace-typed note", "alice", "bio", metadata={"workflow_id": 7, "type": "trace"})
            mem.add("only a note names it", "alice", "bio", metadata={"workflow_id": "wf-9"})
            got = {}
            for workflow in ("wf-1", "wf-2", "wf-9", "7", "none"):
                items = mem.get_all("alice", "bio", 100, {"type": "trace", "workflow_id": workflow})
                got[workflow] = [(i.user_id, i.metadata["workflow_id"], i.metadata["trace"]["step_index"])
                                 for i in items]
            listings.append(got)
    assert listings[0] == listings[1]
    assert [s for _, _, s in listings[0]["wf-1"]] == [5, 3, 1] and {u for u, _, _ in listings[0]["wf-1"]} == {"alice"}
    assert listings[0]["wf-9"] == listings[0]["7"] == listings[0]["none"] == []


def test_a_one_shot_command_starts_blas_with_one_thread_unless_the_user_said(store: str) -> None:
    """The ``memkit`` command (argv from the shell) sets one OpenBLAS thread and no pydantic plugin
    scan before anything loads numpy, a value the user set wins, and ``main([...])`` called from
    Python leaves the caller's environment alone."""
    import os

    code = ("import os, sys\nfrom memkit.cli import main\n"
            "sys.argv = ['memkit', '--url', sys.argv[1], 'search', 'TP53', '--user', 'alice', '--agent', 'bio']\n"
            "code = main()\n"
            "print(code, os.environ.get('OPENBLAS_NUM_THREADS'), os.environ.get('PYDANTIC_DISABLE_PLUGINS'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "PYDANTIC_DISABLE_PLUGINS")}
    done = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, check=True, env=env)
    assert "TP53 knockdown" in done.stdout and done.stdout.splitlines()[-1] == "0 1 __all__"
    mine = {**env, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run([sys.executable, "-c", code, store], capture_output=True, text=True, check=True, env=mine)
    assert done.stdout.splitlines()[-1] == "0 2 __all__"
    before = dict(os.environ)
    assert main(["--url", store, "stats"]) == 0
    assert dict(os.environ) == before


def test_run_summaries_follow_when_steps_happened_not_the_order_they_were_imported(tmp_path: Path) -> None:
    """Steps imported out of order (an export merged from two machines): the first error is the first
    failed step's by time (a later one's when it says none), and runs starting at the same moment
    are listed in the order of their first steps, on SQLite as by the generic reads."""
    from memkit._core._runs import summaries
    from memkit._sync import run_sync

    def step(run: str, index: int, minute: int, status: str = "success", error: str | None = None) -> dict[str, Any]:
        trace: dict[str, Any] = {"step_index": index, "run_id": run, "status": status, "tool": "bwa"}
        if error is not None:
            trace["error"] = error
        return {"content": f"[trace] {run} {index}", "user_id": "alice", "agent_id": "bio",
                "created_at": T0 + timedelta(minutes=minute),
                "metadata": {"type": "trace", "workflow_id": "wf", "run_id": run, "status": status,
                             "step_index": index, "trace": trace}}

    rows = [
        step("a", 1, 70),  # written first, but not a's first step
        step("late", 1, 50, "failed", "the later error"),
        step("b", 0, 60),
        step("late", 0, 40, "failed"),  # first by time, no error text
        step("a", 0, 60),  # a starts with b; its first step written after b's
        step("late", 2, 45, "failed", "the first error"),
    ]
    got = []
    for url in (f"sqlite:///{tmp_path / 'o.db'}?embedder=none", "memory://"):
        with memkit.open(url) as mem:
            mem.add_many(rows)
            store = mem.provider
            slow = run_sync(summaries(store, None, None, None))
            if url != "memory://":
                assert run_sync(store.run_summaries()) == slow  # type: ignore[attr-defined]
            got.append([(r.run_id, r.first_error, r.failed_steps, r.steps) for r in slow])
    assert got[0] == got[1]
    assert got[0] == [("b", None, 0, 1), ("a", None, 0, 2), ("late", "the first error", 3, 3)]
