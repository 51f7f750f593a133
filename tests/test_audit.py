"""Auditing an agent as Phoenix and Langfuse users do: session and tag filters, latency percentiles per
tool, model and run, and steps found by the words in their inputs, outputs or errors (the store's keyword
search, one namespace at a time), in frames and in TraceReplay."""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator

import pytest

import memkit
from memkit._core._usage import Labels, labels_of
from memkit.frames import find_steps, latency_stats, runs_frame, traces_frame


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[memkit.Memory]:
    if request.param == "memory":
        url = "memory://"
    elif request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('audit') / 'audit.db'}?embedder=none"
    else:
        url = str(request.getfixturevalue("postgres_server").url(f"audit_{uuid.uuid4().hex[:8]}")) + "?embedder=none"
    with memkit.open(url) as opened, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps = [
            ("alice", "r1", {"tool": "fetch", "session_id": "s-1", "tags": ["exp-a"], "duration": 1.0,
                             "result": {"body": "HTTP 404 Not Found for /gene/TP53"}}),
            ("alice", "r1", {"tool": "llm", "session_id": "s-1", "duration": 3.0, "llm.model_name": "gpt-4o",
                             "llm.token_count.prompt": 10, "llm.token_count.completion": 2}),
            ("alice", "r2", {"tool": "fetch", "gen_ai.conversation.id": "s-2", "duration": 0.5,
                             "tag.tags": '["exp-b"]', "result": {"body": "200 OK"}}),
            ("alice", "r2", {"tool": "fetch", "duration": 0.7, "error": "KRAS lookup failed: 404",
                             "status": "failed"}),
            ("bob", "r3", {"tool": "fetch", "session.id": "s-3", "duration": 2.0, "result": {"body": "404 again"}}),
            ("bob", "r3", {"tool": "llm", "duration": 9.0, "parameters": {"q": "what is 404"},
                           "gen_ai.response.model": "claude-3"}),
        ]
        for index, (user, run, data) in enumerate(steps):
            opened.add_trace("bio", "wf", {"step_name": f"s{index}", "step_index": index, "run_id": run, **data},
                             user_id=user)
        yield opened


def test_sessions_and_tags_in_every_spelling() -> None:
    assert labels_of({"session.id": "a", "tag.tags": '["x", "y"]'}) == Labels("a", ("x", "y"))
    assert labels_of({"gen_ai.conversation.id": 7, "tags": "solo"}) == Labels("7", ("solo",))
    assert labels_of({"metadata": {"session_id": "m", "tags": ["t", "t", 3]}}) == Labels("m", ("t",))
    assert labels_of({"session_id": True, "tags": "[broken"}) == Labels(None, ("[broken",))
    assert labels_of({"attributes": {"conversation_id": "c", "langfuse.tags": ["lf"]}}) == Labels("c", ("lf",))
    assert labels_of({"thread_id": "t"}) == Labels("t", ())


def test_runs_filter_by_session_tag_and_model(mem: memkit.Memory) -> None:
    runs = runs_frame(mem)
    assert runs.loc["alice/bio/wf/r1", "sessions"] == "s-1" and runs.loc["alice/bio/wf/r2", "tags"] == "exp-b"
    assert list(runs_frame(mem, session="s-2").index) == ["alice/bio/wf/r2"]
    assert list(runs_frame(mem, session=["s-1", "s-3"]).index.sort_values()) == ["alice/bio/wf/r1", "bob/bio/wf/r3"]
    assert list(runs_frame(mem, tag="exp-a").index) == ["alice/bio/wf/r1"]
    assert list(runs_frame(mem, model="claude-3").index) == ["bob/bio/wf/r3"]
    assert runs_frame(mem, session="s-9").empty
    assert list(traces_frame(mem, user_id="bob")["session_id"]) == ["s-3", None]


def test_latency_percentiles_per_tool_model_and_run(mem: memkit.Memory) -> None:
    by_tool = latency_stats(mem)
    fetch = [1.0, 0.5, 0.7, 2.0]
    assert by_tool.loc["fetch", "steps"] == 4 and by_tool.loc["fetch", "latency_p50_s"] == pytest.approx(0.85)
    assert by_tool.loc["fetch", "latency_p95_s"] == pytest.approx(sorted(fetch)[2] + 0.85 * (2.0 - 1.0))
    assert list(by_tool.index) == ["llm", "fetch"]  # slowest p95 first
    by_model = latency_stats(mem, by="model")
    assert by_model.loc["claude-3", "latency_p99_s"] == 9.0 and by_model.loc["(none)", "steps"] == 4
    by_run = latency_stats(mem, by="run", user_id="alice")
    assert sorted(by_run.index) == ["alice/bio/wf/r1", "alice/bio/wf/r2"]
    assert by_run.loc["alice/bio/wf/r1", "latency_max_s"] == 3.0
    with pytest.raises(memkit.InvalidInputError, match="latency_stats"):
        latency_stats(mem, by="colour")


def test_find_steps_searches_payloads_ranked_within_each_namespace(mem: memkit.Memory) -> None:
    found = find_steps(mem, "404", tool="fetch")
    assert set(found["run"]) == {"alice/bio/wf/r1", "alice/bio/wf/r2", "bob/bio/wf/r3"}
    assert list(found["rank"]) == [1, 2, 3] and found["score"].is_monotonic_decreasing
    assert all("404" in m for m in found["match"])
    assert set(find_steps(mem, "404")["tool"]) == {"fetch", "llm"}  # a parameter holds the word too
    assert set(find_steps(mem, "404", tool="fetch", status="failed")["run"]) == {"alice/bio/wf/r2"}
    # alice's search never returns bob's steps, and a namespace that holds none finds nothing.
    assert set(find_steps(mem, "404", user_id="alice")["user_id"]) == {"alice"}
    assert find_steps(mem, "404", user_id="carol", agent_id="bio").empty
    assert find_steps(mem, "nothing-like-this").empty
    for bad in ({"query": ""}, {"query": "404", "limit": 0}, {"query": "404", "tool": 3}):
        with pytest.raises(memkit.InvalidInputError, match="find_steps"):
            find_steps(mem, **bad)  # type: ignore[arg-type]


def test_trace_replay_filters_runs_by_session_and_by_words_inside_their_steps(mem: memkit.Memory) -> None:
    from memkit.widgets import TraceReplay

    panel = TraceReplay(mem)
    assert panel.options["sessions"] == ["s-1", "s-2", "s-3"] and panel.options["tags"] == ["exp-a", "exp-b"]
    panel.filters = {"session": "s-3"}
    assert [r["run"] for r in panel.runs] == ["bob/bio/wf/r3"]
    panel.filters = {"payload": "404", "user_id": "alice"}
    assert sorted(r["run"] for r in panel.runs) == ["alice/bio/wf/r1", "alice/bio/wf/r2"]
    panel.filters = {"payload": "TP53"}
    assert [r["run"] for r in panel.runs] == ["alice/bio/wf/r1"]
