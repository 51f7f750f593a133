"""Step timing in whatever spelling an agent wrote it: stored, read, shown, and said when missing."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pytest

import memkit
import memkit._core._timing
from memkit._display import summary
from memkit.charts import duration_chart
from memkit.frames import compare_runs, run_steps, runs_frame, traces_frame
from memkit.traces import ExecutionHistory, ExecutionItem, ExecutionStatus
from memkit.widgets import TraceReplay

T0 = datetime(2026, 10, 1, 12, 0, tzinfo=UTC)

# (what the agent wrote, the seconds memkit must read)
SPELLINGS: list[tuple[dict[str, object], float | None]] = [
    ({"duration": 2.5}, 2.5),
    ({"duration_s": 3}, 3.0),
    ({"duration_ms": 1500}, 1.5),
    ({"latency_ms": 250}, 0.25),
    ({"elapsed": 7}, 7.0),
    ({"elapsed": timedelta(seconds=4)}, 4.0),
    ({"started_at": T0.isoformat(), "ended_at": (T0 + timedelta(seconds=9)).isoformat()}, 9.0),
    ({"start_time": T0, "end_time": T0 + timedelta(seconds=11)}, 11.0),
    ({"start_time": T0.timestamp(), "end_time": T0.timestamp() + 5}, 5.0),
    ({"started_at": T0.timestamp() * 1000, "ended_at": T0.timestamp() * 1000 + 6000}, 6.0),  # epoch ms
    ({"started_at": "2026-10-01T12:00:00Z", "duration_ms": 800}, 0.8),
    ({}, None),
]


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memkit._core._timing, "_warned", set())


@pytest.fixture(params=["sqlite", "memory"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[memkit.Memory]:
    url = f"sqlite:///{tmp_path / 't.db'}?embedder=none" if request.param == "sqlite" else "memory://"
    with memkit.open(url) as store:
        yield store


def _write(mem: memkit.Memory) -> None:
    for i, (timing, _) in enumerate(SPELLINGS):
        mem.add_trace("agent", "wf", {"step_name": f"s{i}", "tool": "t", "step_index": i, "run_id": "r1",
                                      "status": "success", **timing}, user_id="lab")


def test_every_spelling_becomes_a_duration(mem: memkit.Memory) -> None:
    _write(mem)
    steps = run_steps(mem, "wf/r1")
    expected = [seconds for _, seconds in SPELLINGS]
    got = [None if pd.isna(v) else round(float(v), 6) for v in steps["duration_s"]]
    assert got == expected
    assert steps["timing"].tolist() == ["recorded"] * (len(SPELLINGS) - 1) + ["none"]
    assert set(steps["timing"]) <= {"recorded", "start only", "none"}
    # A start written as ISO text, a datetime or epoch milliseconds is the same moment.
    starts = steps["started_at"].tolist()
    assert starts[6] == starts[7] == starts[8] == starts[9] == starts[10] == pd.Timestamp(T0)


def test_the_timing_column_says_where_timing_came_from(mem: memkit.Memory) -> None:
    mem.add_trace("agent", "wf", {"step_name": "a", "step_index": 0, "run_id": "r", "duration_ms": 5}, user_id="u")
    mem.add_trace("agent", "wf", {"step_name": "b", "step_index": 1, "run_id": "r", "started_at": T0}, user_id="u")
    mem.add_trace("agent", "wf", {"step_name": "c", "step_index": 2, "run_id": "r"}, user_id="u")
    assert run_steps(mem, "u/agent/wf/r")["timing"].tolist() == ["recorded", "start only", "none"]


def test_the_stored_trace_keeps_what_the_agent_wrote(mem: memkit.Memory) -> None:
    step_id = mem.add_trace("agent", "wf", {"step_name": "a", "duration_ms": 1500, "started_at": T0}, user_id="u")
    item = mem.get(step_id)
    assert item is not None
    trace = item.metadata["trace"]
    assert trace["duration_ms"] == 1500 and trace["started_at"] == T0.isoformat()
    assert trace["duration"] == 1.5 and trace["timestamp"] == T0.timestamp()
    assert "1.5 s" in summary(item)


def test_an_unread_timing_key_warns_once(mem: memkit.Memory) -> None:
    with pytest.warns(UserWarning, match="'took_ms' looks like step timing"):
        mem.add_trace("agent", "wf", {"step_name": "a", "took_ms": 5}, user_id="u")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem.add_trace("agent", "wf", {"step_name": "b", "took_ms": 6}, user_id="u")  # said once is enough
    with pytest.warns(UserWarning, match="'duration_ms' holds 'fast'"):
        mem.add_trace("agent", "wf", {"step_name": "c", "duration_ms": "fast"}, user_id="u")


def test_ordinary_keys_do_not_warn(mem: memkit.Memory) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mem.add_trace("agent", "wf", {"step_name": "a", "tool": "bwa", "retry_count": 0, "step_index": 0,
                                      "parameters": {"threads": 4}, "result": {"records": 3}}, user_id="u")


def test_history_step_times_itself_and_explicit_timing_is_kept(mem: memkit.Memory) -> None:
    history = ExecutionHistory(memory_provider=mem, workflow_id="wf", agent_id="agent", run_id="h1")
    with history.step("timed", tool="t"):
        pass
    history.add_item(ExecutionItem("given", "t", ExecutionStatus.SUCCESS, duration=4.0))
    history.add_item(ExecutionItem("spelled", "t", ExecutionStatus.SUCCESS),
                     extra={"started_at": T0, "duration_ms": 2500})
    history.close()
    steps = run_steps(mem, "wf/h1")
    assert steps["timing"].tolist() == ["recorded"] * 3
    durations = steps["duration_s"].tolist()
    assert 0 <= durations[0] < 1 and durations[1:] == [4.0, 2.5]
    assert steps["started_at"].iloc[2] == pd.Timestamp(T0)


def test_charts_and_frames_read_the_same_timing(mem: memkit.Memory) -> None:
    _write(mem)
    chart = duration_chart(mem)
    drawn = sorted(round(row["duration_s"], 6) for row in chart.spec["data"]["values"])
    assert drawn == sorted(s for _, s in SPELLINGS if s is not None)
    assert traces_frame(mem)["duration_s"].notna().sum() == len(SPELLINGS) - 1


def test_the_panel_says_when_a_run_has_no_timing(mem: memkit.Memory) -> None:
    for i in range(4):
        mem.add_trace("agent", "none", {"step_name": f"s{i}", "step_index": i, "run_id": "r"}, user_id="u")
        mem.add_trace("agent", "some", {"step_name": f"s{i}", "step_index": i, "run_id": "r",
                                        **({"duration_ms": 100 * (i + 1)} if i else {})}, user_id="u")
    panel = TraceReplay(mem)
    panel.run = "u/agent/none/r"
    assert panel.timeline["timing_note"].startswith("No step timing recorded in this run")
    assert panel.timeline["axis"] == "steps" and panel.timeline["start_s"] == [0, 1, 2, 3]
    assert len(set(panel.timeline["duration_s"])) == 1
    panel.run = "u/agent/some/r"
    assert panel.timeline["timing_note"] == "1 of 4 steps recorded no duration: drawn as thin marks."
    assert panel.timeline["axis"] == "seconds" and panel.timeline["timed"] == [False, True, True, True]


def test_compare_runs_of_two_workflows_is_labelled(mem: memkit.Memory) -> None:
    for wf in ("wf-a", "wf-b"):
        for run in ("r1", "r2"):
            mem.add_trace("agent", wf, {"step_name": "s", "step_index": 0, "run_id": run, "duration": 1},
                          user_id="u")
    assert compare_runs(mem, "u/agent/wf-a/r1", "u/agent/wf-a/r2").attrs["same_workflow"] is True
    diff = compare_runs(mem, "u/agent/wf-a/r1", "u/agent/wf-b/r1")
    assert diff.attrs["same_workflow"] is False and diff.attrs["workflows"] == ("wf-a", "wf-b")
    panel = TraceReplay(mem)
    panel.filters = {"text": "r1"}  # wf-a/r2 is filtered out of the list...
    panel.run = "u/agent/wf-a/r1"
    options = {o["run"]: o for o in panel.compare_options}
    hidden = options["u/agent/wf-a/r2"]
    assert hidden["hidden"] is True and hidden["other_workflow"] is False  # ...yet offered
    assert options["u/agent/wf-b/r1"]["other_workflow"] is True and "u/agent/wf-b/r2" not in options
    panel.compare_with = "u/agent/wf-b/r1"
    assert panel.comparison["workflow_note"].startswith("different workflows: A is wf-a, B is wf-b")
    panel.compare_with = "u/agent/wf-a/r2"
    assert panel.comparison["workflow_note"] == ""


def test_runs_frame_duration_from_any_spelling(mem: memkit.Memory) -> None:
    mem.add_trace("agent", "wf", {"step_name": "a", "step_index": 0, "run_id": "r", "started_at": T0,
                                  "duration_ms": 2000}, user_id="u")
    mem.add_trace("agent", "wf", {"step_name": "b", "step_index": 1, "run_id": "r",
                                  "started_at": T0 + timedelta(seconds=3), "ended_at": T0 + timedelta(seconds=10)},
                  user_id="u")
    assert runs_frame(mem).loc["u/agent/wf/r", "duration_s"] == 10.0


def test_readme_timing_example_runs() -> None:
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    code = readme.split("<!-- readme-timing -->\n```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), namespace)
    steps = namespace["steps"]
    assert isinstance(steps, pd.DataFrame)
    assert steps["duration_s"].round(6).tolist()[:2] == [0.42, 12.0] and pd.isna(steps["duration_s"].iloc[2])
    assert steps["timing"].tolist() == ["recorded", "recorded", "none"]


@pytest.mark.parametrize("key", ["took_ms", "wall_time", "finished_at", "completed_at", "runtime_s", "end"])
def test_timing_like_keys_are_named(key: str) -> None:
    with pytest.warns(UserWarning, match=f"'{key}' looks like step timing"):
        memkit._core._timing.step_timing({key: 1})


@pytest.mark.parametrize("key", ["stop_codon", "end_reason", "start_gene", "timeout_ms", "updated_at", "n_items"])
def test_bioinformatics_keys_are_not_mistaken_for_timing(key: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memkit._core._timing.step_timing({key: 1})
