"""An agent written against the seed's ``MemoryTools``/``ToolDispatcher`` runs on memkit.tools unchanged.

Everything between the ``seed agent`` markers is the seed's usage (its ``initialize_services`` and a
cycle loop that hands the model's tool calls to ``ToolDispatcher.dispatch``, in Ollama's tool-call
format), with only the import changed. The model is scripted, so the run is deterministic; the store
is the real SQLite file at ``data/memory.db``, as the seed's ExperimentRunner opens it.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

# -- seed agent ------------------------------------------------------------------------------------
from memkit.tools import MemoryTools, ToolDispatcher  # was: from contreact_ollama.tools... import ...


@dataclass
class ExperimentConfig:
    run_id: str
    model_name: str = "llama3"
    cycle_count: int = 3


class ExperimentRunner:
    def __init__(self, config: ExperimentConfig) -> None:
        self.config = config

    def initialize_services(self) -> dict:  # type: ignore[type-arg]
        services = {}
        db_path = "data/memory.db"
        memory_tools = MemoryTools(db_path=db_path, run_id=self.config.run_id)
        services["memory_tools"] = memory_tools
        tool_dispatcher = ToolDispatcher(memory_tools=memory_tools, config=self.config)
        services["tool_dispatcher"] = tool_dispatcher
        return services


class CycleOrchestrator:
    def __init__(self, config: ExperimentConfig, services: dict, model: Any) -> None:  # type: ignore[type-arg]
        self.config = config
        self.tool_dispatcher = services["tool_dispatcher"]
        self.model = model
        self.log: list[dict] = []  # type: ignore[type-arg]

    def run_cycle(self, cycle_number: int) -> None:
        messages = [{"role": "user", "content": f"cycle {cycle_number}"}]
        tools = self.tool_dispatcher.get_tool_definitions()
        while True:
            response = self.model.chat(model=self.config.model_name, messages=messages, tools=tools)
            message = response["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return
            for tool_call in message["tool_calls"]:
                tool_name = tool_call["function"]["name"]
                arguments = tool_call["function"]["arguments"]
                result = self.tool_dispatcher.dispatch(
                    tool_name, arguments, run_id=self.config.run_id, cycle_number=cycle_number
                )
                self.log.append({"cycle": cycle_number, "tool": tool_name, "result": result})
                messages.append({"role": "tool", "content": result})

    def run_experiment(self) -> None:
        for cycle_number in range(1, self.config.cycle_count + 1):
            self.run_cycle(cycle_number)
# -- end of seed agent -----------------------------------------------------------------------------


@dataclass
class ScriptedModel:
    """Answers ``chat`` with the next scripted assistant message, in Ollama's response shape."""

    turns: list[list[tuple[str, Any]]]
    seen: list[list[dict[str, Any]]] = field(default_factory=list)

    def chat(self, model: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> dict[str, Any]:
        assert [t["function"]["name"] for t in tools] == ["write", "read", "list", "delete", "pattern_search"]
        self.seen.append(list(messages))
        calls = self.turns.pop(0) if self.turns else []
        return {"model": model, "message": {"role": "assistant", "content": "" if calls else "done",
                                            "tool_calls": [{"function": {"name": n, "arguments": a}}
                                                           for n, a in calls]}}


def _script() -> list[list[tuple[str, Any]]]:
    return [
        # cycle 1: notes down its plan; a model often writes a number or a list where a string is asked
        [("write", {"key": "task_status", "value": "in_progress"}), ("write", {"key": "attempts", "value": 3})],
        [("write", {"key": "attempts", "value": "3"}), ("write", {"key": "genes", "value": ["TP53", "BRCA2"]})],
        [],
        # cycle 2: reads back, lists, searches, with JSON-string arguments as some models send them
        [("read", {"key": "task_status"}), ("list", {}), ("pattern_search", '{"pattern": "task"}')],
        [("delete", {"key": "attempts"}), ("read", {"key": "attempts"}), ("no_such_tool", {})],
        [],
        # cycle 3: finishes, and sends arguments the tool does not take
        [("write", {"key": "task_status", "value": "complete"}), ("read", {"wrong_param": "x"})],
        [],
    ]


def test_an_agent_written_against_the_seed_runs_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = ExperimentConfig(run_id="llama3-experiment-001")
    services = ExperimentRunner(config).initialize_services()
    orchestrator = CycleOrchestrator(config, services, ScriptedModel(_script()))
    orchestrator.run_experiment()

    assert [(e["cycle"], e["tool"], e["result"]) for e in orchestrator.log] == [
        (1, "write", "Wrote value to key 'task_status'"),
        # Only strings are stored (what read returns is what was written); anything else is refused
        # with the seed's own message for bad arguments, and nothing is written.
        (1, "write", "Error: Invalid arguments for tool 'write': "
                     "MemoryTools.write(): value must be a string, got int 3"),
        (1, "write", "Wrote value to key 'attempts'"),
        (1, "write", "Error: Invalid arguments for tool 'write': "
                     "MemoryTools.write(): value must be a string, got list"),
        (2, "read", "in_progress"),
        (2, "list", "task_status, attempts"),
        (2, "pattern_search", "task_status"),
        (2, "delete", "Deleted key 'attempts'"),
        (2, "read", "Error: Key 'attempts' not found"),
        (2, "no_such_tool", "Error: Tool 'no_such_tool' not found"),
        (3, "write", "Updated key 'task_status' with new value"),
        (3, "read", "Error: Invalid arguments for tool 'read': MemoryTools.read() got an unexpected argument"
                    " 'wrong_param'; it takes MemoryTools.read(key)"),
    ]
    # The file is where the seed puts it, one row per (run_id, key), values as written.
    rows = sqlite3.connect(tmp_path / "data" / "memory.db").execute(
        "SELECT run_id, key, value FROM kv_memory ORDER BY rowid").fetchall()
    assert rows == [("llama3-experiment-001", "task_status", "complete")]

    # The dispatcher kept every call with the context the agent passed along.
    dispatcher: ToolDispatcher = services["tool_dispatcher"]
    assert dispatcher.config is config
    calls = list(dispatcher.calls)
    assert [(c.tool, c.context, c.ok) for c in calls][:2] == [
        ("write", {"run_id": "llama3-experiment-001", "cycle_number": 1}, True),
        ("write", {"run_id": "llama3-experiment-001", "cycle_number": 1}, False),
    ]
    assert [c.context["cycle_number"] for c in calls] == [e["cycle"] for e in orchestrator.log]
    assert calls[6].arguments == '{"pattern": "task"}' and calls[6].result == "task_status"


def test_two_runs_share_the_seed_file_and_see_only_their_own_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runs = {}
    for run_id in ("run-a", "run-b"):
        config = ExperimentConfig(run_id=run_id, cycle_count=1)
        services = ExperimentRunner(config).initialize_services()
        script = [[("write", {"key": "owner", "value": run_id})], [("read", {"key": "owner"}), ("list", {})], []]
        orchestrator = CycleOrchestrator(config, services, ScriptedModel(script))
        orchestrator.run_experiment()
        runs[run_id] = [e["result"] for e in orchestrator.log]
    assert runs == {"run-a": ["Wrote value to key 'owner'", "run-a", "owner"],
                    "run-b": ["Wrote value to key 'owner'", "run-b", "owner"]}


def test_the_config_run_id_is_the_context_of_calls_that_name_none(tmp_path: Path) -> None:
    tools = MemoryTools(str(tmp_path / "m.db"), "r1")
    by_object = ToolDispatcher(memory_tools=tools, config=ExperimentConfig(run_id="r1"))
    by_dict = ToolDispatcher(memory_tools=tools, config={"run_id": "r1", "cycle_count": 2})
    answers = []
    for dispatcher in (by_object, by_dict):
        answers.append(dispatcher.dispatch("write", {"key": "k", "value": "v"}, cycle_number=4))
        assert dispatcher.calls[-1].context == {"cycle_number": 4, "run_id": "r1"}
    assert answers == ["Wrote value to key 'k'", "Updated key 'k' with new value"]
    plain = ToolDispatcher(tools)
    plain.dispatch("list", {})
    assert plain.calls[-1].context == {}
    assert json.loads(json.dumps([c.context for c in by_dict.calls])) == [{"cycle_number": 4, "run_id": "r1"}]


def test_the_dispatcher_keeps_the_last_thousand_calls(tmp_path: Path) -> None:
    dispatcher = ToolDispatcher(MemoryTools(str(tmp_path / "m.db"), "r1"))
    for cycle in range(1_005):
        dispatcher.dispatch("list", {}, cycle_number=cycle)
    assert len(dispatcher.calls) == 1_000
    assert [c.context["cycle_number"] for c in (dispatcher.calls[0], dispatcher.calls[-1])] == [5, 1_004]
    assert all(c.ok and c.result == "No keys stored" and c.duration_ms >= 0 for c in dispatcher.calls)
