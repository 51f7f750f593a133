"""Two researchers on one store, running the same workflow ids over the same memory texts: every
frame, view model, CLI command and MCP tool that reads recalls or traces shows each one only their own
(SQLite, memory://, real FalkorDB, Neo4j and PostgreSQL, and Mem0, whose recalls memkit keeps beside it).

Runs written without a ``run_id`` are keyed by ``workflow_id``, so alice's and bob's runs of ``wf-1``
share every key but the namespace; their memories share every text but the id. Whatever one of them
sees is checked by id against what they wrote, on every backend (real FalkorDB, Neo4j and PostgreSQL included).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memkit
from memkit import frames
from memkit._serve._mcp import Access, McpMemory
from memkit._sync import run_sync
from memkit.cli import main
from memkit.graph import memory_graph
from memkit.traces import ExecutionHistory
from memkit.widgets import GraphExplorer, NamespaceBrowser, TraceReplay

WORKFLOW = "wf-1"
USERS = ("alice", "bob")
SEARCHED = "bio"  # both search (user, "bio"); their traces go to (user, trace agent)
TEXTS = (
    "TP53 is mutated in sample 7",
    "BRCA1 carries a frameshift in sample 3",
    "KRAS G12D found in the pancreatic line",
    "sample 7 was sequenced on a NovaSeq",
)
QUERIES = ("TP53 sample", "BRCA1", "KRAS pancreatic", "sample 7", "nothing like this at all")


@dataclass
class Own:
    """What one user wrote: the ids anything shown to them must come from, and the counts to expect."""

    user: str
    trace_agent: str
    memories: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)
    recalls: set[str] = field(default_factory=set)
    per_step: dict[int, int] = field(default_factory=dict)  # step_index -> searches it made

    @property
    def records(self) -> set[str]:
        """What a search of theirs may return: their memories, and their steps' own records where
        a step is stored in the namespace searched (a semantic search returns those too)."""
        return self.memories | self.steps

    @property
    def everything(self) -> set[str]:
        return self.memories | self.steps | self.recalls


scenarios = st.fixed_dictionaries({
    "run_id": st.sampled_from([None, "r1"]),  # None: the runs are keyed by workflow_id alone
    # "bio": the trace is kept where the step searches; "planner": in another namespace of the same user
    "trace_agent": st.sampled_from(["bio", "planner"]),
    "via_scope": st.booleans(),  # ExecutionHistory steps, or add_trace + recall_scope by hand
    "steps": st.tuples(*(st.lists(st.lists(st.sampled_from(QUERIES), max_size=2), min_size=1, max_size=3)
                         for _ in USERS)),
})


@pytest.fixture(params=["memory", "sqlite", "falkordb", "neo4j", "mem0", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    if request.param == "memory":
        return "memory://"
    if request.param == "mem0":  # real mem0 code, offline; its recalls in memkit's SQLite file beside it
        return f"mem0:///{tmp_path_factory.mktemp('iso-mem0')}"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('iso') / 'iso.db'}?embedder=none"
    if request.param == "falkordb":
        return str(request.getfixturevalue("falkordb_server").url(f"iso-{uuid.uuid4().hex[:8]}"))
    if request.param == "postgres":
        return str(request.getfixturevalue("postgres_server").url(f"iso_{uuid.uuid4().hex[:8]}")) + "?embedder=none"
    return str(request.getfixturevalue("neo4j_uri"))


def _populate(mem: memkit.Memory, scenario: dict[str, Any]) -> dict[str, Own]:
    owns = {user: Own(user, scenario["trace_agent"]) for user in USERS}
    for user in USERS:  # the same texts in both namespaces
        owns[user].memories |= {mem.add(text, user, SEARCHED) for text in TEXTS}
    histories = {
        user: ExecutionHistory(memory_provider=mem, workflow_id=WORKFLOW, agent_id=scenario["trace_agent"],
                               user_id=user, run_id=scenario["run_id"])
        for user in USERS
    }
    plans = dict(zip(USERS, scenario["steps"], strict=True))
    # Interleaved: alice's step 0, bob's step 0, alice's step 1, ... so their recalls are mixed in storage.
    for index in range(max(len(p) for p in plans.values())):
        for user in USERS:
            if index >= len(plans[user]):
                continue
            queries = plans[user][index]
            if scenario["via_scope"]:
                with memkit.recall_scope(WORKFLOW, step=f"s{index}", step_index=index, run_id=scenario["run_id"],
                                         user_id=user, agent_id=scenario["trace_agent"]):
                    for query in queries:
                        mem.search(query, user, SEARCHED, limit=3)
                data = {"step_name": f"s{index}", "tool": "search", "status": "success", "step_index": index}
                if scenario["run_id"] is not None:
                    data["run_id"] = scenario["run_id"]
                mem.add_trace(scenario["trace_agent"], WORKFLOW, data, user_id=user)
            else:
                with histories[user].step(f"s{index}", tool="search"):
                    for query in queries:
                        mem.search(query, user, SEARCHED, limit=3)
            if queries:
                owns[user].per_step[index] = len(queries)
    for user in USERS:
        own = owns[user]
        own.recalls = {r.id for r in mem.recalls(user_id=user, agent_id=SEARCHED)}
        assert len(own.recalls) == sum(own.per_step.values())
        traces = frames.traces_frame(mem, user_id=user, agent_id=own.trace_agent)
        own.steps = set(traces.index)
        assert len(own.steps) == len(plans[user])
    return owns


def _check_frames(mem: memkit.Memory, own: Own, other: Own) -> None:
    user, agent = own.user, own.trace_agent
    df = frames.recalls_frame(mem, WORKFLOW, user_id=user, agent_id=SEARCHED)
    assert set(df.recall_id) == own.recalls
    assert set(df.memory_id.dropna()) <= own.records

    counts = frames.recall_counts(mem, WORKFLOW, user_id=user, agent_id=agent)
    assert dict(zip(counts.step_index, counts.recalls, strict=True)) == own.per_step
    assert set(counts.user_id) <= {user}

    steps = frames.traces_frame(mem, user_id=user, agent_id=agent, recalls=True)
    assert set(steps.index) == own.steps
    shown = {int(i): int(n) for i, n in zip(steps.step_index, steps.recalls, strict=True) if n}
    assert shown == own.per_step

    runs = frames.runs_frame(mem)
    (key,) = runs.index[runs.user_id.eq(user).to_numpy()]
    assert runs.loc[key, "recalls"] == sum(own.per_step.values())
    assert frames.runs_frame(mem, user_id=user)["recalls"].tolist() == [sum(own.per_step.values())]
    for run in (runs.loc[key], key):
        per_step = frames.run_steps(mem, run)
        assert set(per_step.index) == own.steps
        assert {int(i): int(n) for i, n in zip(per_step.step_index, per_step.recalls, strict=True) if n} == own.per_step

    states = list(frames.replay(mem, WORKFLOW, user_id=user, agent_id=agent))
    assert len(states) == len(own.steps) and set(states[-1].steps.index) == own.steps

    assert frames.tool_stats(mem, user_id=user, agent_id=agent)["steps"].sum() == len(own.steps)
    for recall_id in sorted(own.recalls)[:2]:
        replayed = frames.replay_recall(mem, recall_id)
        assert set(replayed.memory_id) <= own.records
    assert not set(frames.memories_frame(mem, user_id=user, agent_id=SEARCHED).index) & other.everything


def _check_views(mem: memkit.Memory, own: Own, other: Own) -> None:
    user, agent = own.user, own.trace_agent
    panel = TraceReplay(mem)
    runs = panel.all_runs
    assert runs is not None
    (key,) = runs.index[runs.user_id.eq(user).to_numpy()]
    panel.run = key
    assert {int(i): int(n) for i, n in zip(panel.steps.step_index, panel.timeline["recalls"], strict=True)
            if n} == own.per_step
    seen_recalls: set[str] = set()
    for position in range(len(panel.steps)):
        panel.step = position
        detail = panel.detail
        seen_recalls |= {r["id"] for r in detail["recalls"]}
        hits = {h["id"] for r in detail["recalls"] for h in r["hits"]}
        assert hits <= own.records
        assert all(r["namespace"] == f"{user} / {SEARCHED}" for r in detail["recalls"])
        for memory_id in sorted(hits)[:2]:
            opened = panel.open_memory(memory_id)
            assert user in opened["title"] and other.user not in opened["title"]
    assert seen_recalls == own.recalls

    browser = NamespaceBrowser(mem)
    for memory_id in own.memories:
        item = mem.get(memory_id)
        assert item is not None
        assert {r.id for r, _ in browser.recalled_by(item)} <= own.recalls

    explorer = GraphExplorer(mem)
    explorer.scope.value = "workflow"
    explorer.workflow.value = (user, agent, WORKFLOW)
    explorer.draw()
    view = explorer.view
    assert view is not None
    drawn = {n.id for n in view.nodes if n.type in ("Memory", "Step", "Recall")}
    assert not drawn & other.everything
    recalled = {e.target for e in view.edges if e.type == "RECALLED"}
    assert recalled <= own.records
    graph = memory_graph(mem, user_id=user, agent_id=agent, workflow_id=WORKFLOW)
    assert not {n.id for n in graph.nodes} & other.everything


def _check_cli(url: str, own: Own, other: Own, tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    user, agent = own.user, own.trace_agent
    html = tmp / f"{user}.html"
    assert main(["--url", url, "graph", "--workflow", WORKFLOW, "--user", user, "--agent", agent,
                 "--html", str(html)]) == 0
    page = html.read_text(encoding="utf-8")
    assert not [i for i in other.everything if i in page]
    assert [i for i in own.steps if i in page]  # the page does name this user's steps

    out = tmp / f"{user}.jsonl"
    for namespace in (SEARCHED, agent):
        assert main(["--url", url, "export", str(out), "--user", user, "--agent", namespace, "--quiet"]) == 0
        text = out.read_text(encoding="utf-8")
        assert not [i for i in other.everything if i in text]
    capsys.readouterr()
    assert main(["--url", url, "search", "TP53 sample", "--user", user, "--agent", SEARCHED, "--json"]) == 0
    found = {json.loads(line)["id"] for line in capsys.readouterr().out.splitlines() if line.strip()}
    assert found and found <= own.records


async def _check_mcp(mem: memkit.Memory, own: Own, other: Own) -> None:
    user, agent = own.user, own.trace_agent
    server = McpMemory(mem.provider, Access.from_flags(None, None, [f"{user}/{SEARCHED}", f"{user}/{agent}"], True))
    try:
        answer = await server.call("recall", {"query": "TP53 sample", "namespace": f"{user}/{SEARCHED}"})
        assert {r["id"] for r in answer["results"]} <= own.records
        for label in {f"{user}/{SEARCHED}", f"{user}/{agent}"}:
            recent = await server.read(f"memkit://namespace/{label}/recent")
            assert not [i for i in other.everything if i in recent]
            listed = await server.call("list_recent", {"limit": 50, "namespace": label})
            assert not {r["id"] for r in listed["results"]} & other.everything
        steps = await server.read(f"memkit://namespace/{user}/{agent}/workflow/{WORKFLOW}")
        assert len(steps.splitlines()) == len(own.steps)
    finally:
        server.close()


@pytest.mark.slow
def test_two_namespaces_sharing_workflow_ids_and_texts_never_see_each_other(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    examples = 12 if url.startswith(("memory", "sqlite", "postgresql")) else 3 if url.startswith("mem0") else 4

    @settings(max_examples=examples, deadline=None, database=None,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
    @given(scenario=scenarios)
    def check(scenario: dict[str, Any]) -> None:
        with memkit.open(url) as mem:
            mem.reset()
            owns = _populate(mem, scenario)
            for user, other in (USERS, USERS[::-1]):
                _check_frames(mem, owns[user], owns[other])
                _check_views(mem, owns[user], owns[other])
                run_sync(_check_mcp(mem, owns[user], owns[other]))
            if not url.startswith(("memory", "mem0")):
                # The CLI opens the store again in this process; a memory:// store lives only in
                # the Memory that made it, so there is nothing for the CLI to open, and mem0's
                # embedded vector store is locked by the Memory that has it open.
                mem.recalls()  # SQLite: write the queued recalls the CLI's own connection reads
                for user, other in (USERS, USERS[::-1]):
                    _check_cli(url, owns[user], owns[other], tmp_path, capsys)

    check()


def test_recall_counts_keep_two_runs_of_one_workflow_apart() -> None:
    """The case the property test generalises, written out: two users, wf-1, no run_id, step 0 each."""
    with memkit.open("memory://") as mem:
        for user in USERS:
            for text in TEXTS:
                mem.add(text, user, SEARCHED)
        for user, searches in (("alice", 1), ("bob", 3)):
            history = ExecutionHistory(memory_provider=mem, workflow_id=WORKFLOW, agent_id=SEARCHED, user_id=user)
            with history.step("look", tool="search"):
                for _ in range(searches):
                    mem.search("TP53", user, SEARCHED)
        runs = frames.runs_frame(mem).set_index("user_id")
        assert runs.loc["alice", "recalls"] == 1 and runs.loc["bob", "recalls"] == 3
        counts = frames.recall_counts(mem, WORKFLOW)
        assert sorted(zip(counts.user_id, counts.recalls, strict=True)) == [("alice", 1), ("bob", 3)]
        (recall,) = mem.recalls(user_id="alice", agent_id=SEARCHED)
        assert (recall.trace_user_id, recall.trace_agent_id) == ("alice", SEARCHED)


def test_recalls_recorded_before_they_kept_their_step_namespace_are_attributed_on_upgrade(tmp_path: Path) -> None:
    """A version 7 store: recalls name no step namespace. Upgrading gives each the one namespace
    holding its step; where two do, it is given to neither; where the searched one does, it stays."""
    import sqlite3

    from memkit.adapters._sqlite._schema import SCHEMA_VERSION

    path = tmp_path / "v7.db"
    with memkit.open(f"sqlite:///{path}?embedder=none") as mem:
        for user in USERS:
            mem.add("TP53 is mutated in sample 7", user, SEARCHED)
        # the seed's default: steps written as "system" while alice's searches read her namespace
        system = ExecutionHistory(memory_provider=mem, workflow_id="wf-sys", agent_id=SEARCHED)
        with system.step("look", tool="search"):
            mem.search("TP53", "alice", SEARCHED)
        # the same workflow run by two agents of "system": which one's was it? Not said, not guessed.
        for agent in ("a1", "a2"):
            history = ExecutionHistory(memory_provider=mem, workflow_id="wf-two", agent_id=agent)
            with history.step("look", tool="search"):
                mem.search("TP53", "bob", SEARCHED)
        # alice's and bob's own runs of wf-1, each searching their own namespace
        for user in USERS:
            history = ExecutionHistory(memory_provider=mem, workflow_id=WORKFLOW, agent_id=SEARCHED, user_id=user)
            with history.step("look", tool="search"):
                mem.search("TP53", user, SEARCHED)
        before = frames.runs_frame(mem).set_index(["workflow_id", "user_id", "agent_id"])["recalls"].to_dict()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE recalls SET body = json_remove(body, '$.trace_user_id', '$.trace_agent_id')")
    conn.execute("DROP TABLE marks")  # what version 7 did not have
    conn.execute("PRAGMA user_version = 7")
    conn.close()
    with memkit.open(f"sqlite:///{path}?embedder=none") as mem:
        after = frames.runs_frame(mem).set_index(["workflow_id", "user_id", "agent_id"])["recalls"].to_dict()
        assert after == {**before, ("wf-two", "system", "a1"): 0, ("wf-two", "system", "a2"): 0}
        assert before[("wf-sys", "system", SEARCHED)] == 1 and before[(WORKFLOW, "alice", SEARCHED)] == 1
        assert {(r.workflow_id, r.trace_user_id) for r in mem.recalls()} == {
            ("wf-sys", "system"), ("wf-two", None), (WORKFLOW, None)}
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
