"""Seed 001 MemoryTools/ToolDispatcher word for word, provider tools, and pydantic-ai registration."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from unittest.mock import Mock

import pytest

import memkit
from memkit.adapters._memory._adapter import InMemoryAdapter
from memkit.tools import MemoryTools, ProviderTools, ToolDispatcher, register_pydantic_ai_tools


@pytest.fixture
def temp_db(tmp_path: Path) -> str:
    return str(tmp_path / "nested" / "test_memory.db")


@pytest.fixture
def memory_tools(temp_db: str) -> Iterator[MemoryTools]:
    with MemoryTools(db_path=temp_db, run_id="test-run") as tools:
        yield tools


def test_init_creates_database_file(temp_db: str) -> None:
    MemoryTools(db_path=temp_db, run_id="r").close()
    assert Path(temp_db).exists() and Path(temp_db).parent.is_dir()


def test_write_creates_new_entry(memory_tools: MemoryTools) -> None:
    assert memory_tools.write("test_key", "test_value") == "Wrote value to key 'test_key'"
    assert memory_tools.read("test_key") == "test_value"


def test_write_updates_existing_entry(memory_tools: MemoryTools, temp_db: str) -> None:
    memory_tools.write("k", "v1")
    assert memory_tools.write("k", "v2") == "Updated key 'k' with new value"
    assert memory_tools.read("k") == "v2"
    rows = sqlite3.connect(temp_db).execute("SELECT count(*) FROM kv_memory WHERE key = 'k'").fetchone()[0]
    assert rows == 1


def test_read_key_not_found_returns_error(memory_tools: MemoryTools) -> None:
    assert memory_tools.read("nope") == "Error: Key 'nope' not found"


def test_list(memory_tools: MemoryTools) -> None:
    assert memory_tools.list() == "No keys stored"
    for key in ("task_status", "findings", "plan"):
        memory_tools.write(key, "x")
    memory_tools.write("task_status", "y")  # an update keeps its place
    assert memory_tools.list() == "task_status, findings, plan"


def test_delete(memory_tools: MemoryTools) -> None:
    memory_tools.write("k", "v")
    assert memory_tools.delete("k") == "Deleted key 'k'"
    assert memory_tools.read("k") == "Error: Key 'k' not found"
    assert memory_tools.delete("k") == "Error: Key 'k' not found"


def test_pattern_search(memory_tools: MemoryTools) -> None:
    for key in ("task_1", "task_2", "note_1"):
        memory_tools.write(key, "v")
    assert memory_tools.pattern_search("task") == "task_1, task_2"
    assert memory_tools.pattern_search("zzz") == "No keys found matching pattern 'zzz'"


def test_run_id_isolation(temp_db: str) -> None:
    with MemoryTools(temp_db, "run-a") as a, MemoryTools(temp_db, "run-b") as b:
        a.write("shared", "from a")
        b.write("shared", "from b")
        b.write("only_b", "x")
        assert (a.read("shared"), b.read("shared")) == ("from a", "from b")
        assert a.list() == "shared" and b.list() == "shared, only_b"
        assert a.read("only_b") == "Error: Key 'only_b' not found"


def test_memory_persists_across_instances(temp_db: str) -> None:
    with MemoryTools(temp_db, "r") as tools:
        tools.write("k", "v")
    with MemoryTools(temp_db, "r") as tools:
        assert tools.read("k") == "v"


def test_shares_the_file_with_a_memkit_store(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    with memkit.open(f"sqlite:///{path}") as mem, MemoryTools(str(path), "r") as tools:
        mem.add("note", "u", "a")
        tools.write("k", "v")
        assert mem.stats().memories == 1 and tools.read("k") == "v"


def test_several_processes_on_one_file(temp_db: str) -> None:
    MemoryTools(temp_db, "r").close()
    script = textwrap.dedent(
        """
        import sys
        from memkit.tools import MemoryTools
        tools = MemoryTools(sys.argv[1], "shared-run")
        for i in range(60):
            tools.write(f"{sys.argv[2]}-{i}", "v")
            tools.write("counter", sys.argv[2])
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, temp_db, f"p{n}"]) for n in range(3)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0]
    with MemoryTools(temp_db, "shared-run") as tools:
        keys = tools.list().split(", ")
        assert len(keys) == 181 and len(set(keys)) == 181
        assert tools.read("counter") in {"p0", "p1", "p2"}


def test_the_tools_answer_a_refused_argument_in_words_and_store_nothing(memory_tools: MemoryTools) -> None:
    # The seed's tools return errors as strings and never raise, called directly too.
    assert memory_tools.write("k" * 257, "v") == (
        "Error: Invalid arguments for tool 'write': key is 257 characters; the limit is 256 (Limits.max_id_chars)")
    assert memory_tools.write("k", 3) == (  # type: ignore[arg-type]
        "Error: Invalid arguments for tool 'write': MemoryTools.write(): value must be a string, got int 3")
    assert memory_tools.write("k").startswith(  # type: ignore[call-arg]
        "Error: Invalid arguments for tool 'write': MemoryTools.write() missing a required argument: 'value'")
    assert memory_tools.read("k" * 257).startswith("Error: Invalid arguments for tool 'read': key is 257")
    assert memory_tools.delete(7).startswith(  # type: ignore[arg-type]
        "Error: Invalid arguments for tool 'delete': MemoryTools.delete(): key must be a string")
    assert memory_tools.pattern_search(None).startswith(  # type: ignore[arg-type]
        "Error: Invalid arguments for tool 'pattern_search': ")
    assert memory_tools.list() == "No keys stored"


# -- the dispatcher --------------------------------------------------------------------


def test_dispatch_calls_correct_tool() -> None:
    tools = Mock()
    tools.write.return_value = "Wrote value to key 'test'"
    dispatcher = ToolDispatcher(memory_tools=tools)
    assert dispatcher.dispatch("write", {"key": "test", "value": "data"}) == "Wrote value to key 'test'"
    tools.write.assert_called_once_with(key="test", value="data")


def test_dispatcher_executes_memory_operations(memory_tools: MemoryTools) -> None:
    dispatcher = ToolDispatcher(memory_tools)
    assert dispatcher.dispatch("write", {"key": "k", "value": "v"}) == "Wrote value to key 'k'"
    assert dispatcher.dispatch("read", {"key": "k"}) == "v"
    assert dispatcher.dispatch("list", {}) == "k"
    assert dispatcher.dispatch("pattern_search", '{"pattern": "k"}') == "k"  # JSON string arguments
    assert dispatcher.dispatch("delete", {"key": "k"}) == "Deleted key 'k'"
    assert dispatcher.dispatch("list", None) == "No keys stored"


def test_dispatch_invalid_tool_returns_error(memory_tools: MemoryTools) -> None:
    assert ToolDispatcher(memory_tools).dispatch("invalid_tool", {}) == "Error: Tool 'invalid_tool' not found"


def test_dispatch_invalid_arguments_returns_error(memory_tools: MemoryTools) -> None:
    dispatcher = ToolDispatcher(memory_tools)
    result = dispatcher.dispatch("write", {"wrong_param": "value"})
    assert result.startswith("Error: Invalid arguments for tool 'write': ")
    assert "wrong_param" in result
    wrong_type = dispatcher.dispatch("write", {"key": 1, "value": "v"})
    assert wrong_type.startswith("Error: Invalid arguments for tool 'write'")
    assert dispatcher.dispatch("read", "{not json").startswith("Error: Invalid arguments for tool 'read'")
    assert dispatcher.dispatch("read", ["k"]) == (  # type: ignore[arg-type]
        "Error: Invalid arguments for tool 'read': arguments must be a JSON object"
    )


def test_dispatch_reports_tool_failures(temp_db: str) -> None:
    tools = MemoryTools(temp_db, "r")
    tools.close()
    assert ToolDispatcher(tools).dispatch("read", {"key": "k"}).startswith("Error executing tool 'read': ")


def test_get_tool_definitions_follows_ollama_format(memory_tools: MemoryTools) -> None:
    definitions = ToolDispatcher(memory_tools).get_tool_definitions()
    assert [d["function"]["name"] for d in definitions] == ["write", "read", "list", "delete", "pattern_search"]
    for d in definitions:
        assert d["type"] == "function"
        assert set(d["function"]) == {"name", "description", "parameters"}
        assert d["function"]["parameters"]["type"] == "object"
    write = definitions[0]["function"]
    assert write["description"] == (
        "Write a value to persistent memory under a specified key. Overwrites if key exists."
    )
    assert write["parameters"] == {
        "type": "object",
        "properties": {
            "key": {"type": "string", "description": "The key to store the value under"},
            "value": {"type": "string", "description": "The value to store"},
        },
        "required": ["key", "value"],
    }
    assert definitions[2]["function"]["parameters"] == {"type": "object", "properties": {}, "required": []}
    definitions[0]["function"]["name"] = "changed"  # callers get copies
    assert ToolDispatcher(memory_tools).get_tool_definitions()[0]["function"]["name"] == "write"


# -- provider tools --------------------------------------------------------------------


def test_provider_tools_through_the_dispatcher(memory_tools: MemoryTools) -> None:
    mem = memkit.open("memory://")
    provider_tools = ProviderTools(mem, user_id="u1", agent_id="bio")
    dispatcher = ToolDispatcher(memory_tools, provider_tools)
    names = [d["function"]["name"] for d in dispatcher.get_tool_definitions()]
    assert names[-2:] == ["recall_memory", "save_note"]
    saved = json.loads(dispatcher.dispatch("save_note", {"content": "TP53 is mutated", "metadata": {"gene": "TP53"}}))
    recalled = json.loads(dispatcher.dispatch("recall_memory", {"query": "TP53", "limit": 3}))
    assert [r["id"] for r in recalled["results"]] == [saved["id"]]
    assert recalled["results"][0]["metadata"] == {"gene": "TP53"}
    other = ProviderTools(mem, user_id="u1", agent_id="chem")
    assert other.recall_memory("TP53") == {"results": []}  # namespaces never leak
    bad = dispatcher.dispatch("save_note", {"content": ""})
    assert bad == "Error: Invalid arguments for tool 'save_note': content must not be empty"
    assert mem.stats().memories == 1


async def test_provider_tools_async() -> None:
    tools = ProviderTools(InMemoryAdapter(), "u", "a")
    note = await tools.asave_note("remember the BLAST e-value")
    assert (await tools.arecall_memory("BLAST"))["results"][0]["id"] == note["id"]


def test_provider_tools_need_a_store() -> None:
    with pytest.raises(memkit.InvalidInputError, match="memory must be a MemoryProvider or a Memory"):
        ProviderTools(object(), "u", "a")  # type: ignore[arg-type]


def test_register_on_a_pydantic_ai_agent() -> None:
    pytest.importorskip("pydantic_ai", reason="pydantic-ai is optional (pip install 'memkit[agents]')")
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    mem = InMemoryAdapter()
    tools = ProviderTools(mem, "u1", "bio")
    agent = Agent(TestModel())
    register_pydantic_ai_tools(agent, tools)
    result = agent.run_sync("remember something")
    assert "recall_memory" in result.output and "save_note" in result.output
    import asyncio

    assert len(asyncio.run(mem.get_all("u1", "bio"))) == 1  # TestModel called save_note once


def test_function_calling_and_the_mcp_server_take_their_tools_from_one_catalogue(tmp_path: Path) -> None:
    from memkit._serve._catalogue import TOOLS
    from memkit._serve._mcp import Access, McpMemory

    mem = memkit.open("memory://")
    with MemoryTools(tmp_path / "kv.db", "r") as kv:
        dispatcher = ToolDispatcher(kv, ProviderTools(mem, "u", "a"))
        offered = dispatcher.get_tool_definitions()
    assert [d["function"]["name"] for d in offered] == [
        "write", "read", "list", "delete", "pattern_search", "recall_memory", "save_note"]
    for definition in offered:
        assert definition == TOOLS[definition["function"]["name"]].definition()
    served = McpMemory(mem.provider, Access.from_flags("u", "a"), kv_path=str(tmp_path / "kv.db"))
    try:
        assert {t.name for t in served.listed()} == {
            "remember", "recall", "forget", "list_recent", "record_step", "write", "read", "list", "delete",
            "pattern_search"}
        assert all(served.tools[t.name] is TOOLS[t.name] for t in served.listed())
    finally:
        served.close()
    # A definition handed out is a copy: changing it changes nothing for the next caller.
    offered[0]["function"]["parameters"]["properties"].clear()
    assert dispatcher.get_tool_definitions()[0]["function"]["parameters"]["properties"]
    assert TOOLS["write"].definition()["function"]["parameters"]["properties"]


def test_a_registered_tool_gets_the_call_context_it_asks_for(memory_tools: MemoryTools) -> None:
    config = {"run_id": "exp-001", "model_name": "llama3"}
    dispatcher = ToolDispatcher(memory_tools, config=config)
    seen: list[dict[str, object]] = []

    def note(text: str, run_id: str, cycle_number: int, config: dict[str, object]) -> str:
        seen.append({"text": text, "run_id": run_id, "cycle_number": cycle_number, "config": config})
        return "noted"

    def plain(text: str) -> str:
        return text.upper()

    dispatcher.register("note", note, {"type": "function", "function": {"name": "note"}})
    dispatcher.register("plain", plain, {"type": "function", "function": {"name": "plain"}})
    assert dispatcher.dispatch("note", {"text": "t"}, cycle_number=3) == "noted"
    # The dispatcher's context wins over a model that names another run.
    assert dispatcher.dispatch("note", {"text": "u", "run_id": "other"}, run_id="exp-002", cycle_number=4) == "noted"
    assert seen == [{"text": "t", "run_id": "exp-001", "cycle_number": 3, "config": config},
                    {"text": "u", "run_id": "exp-002", "cycle_number": 4, "config": config}]
    # A tool that asks for none of it gets the model's arguments only, and the seed's tools still work.
    assert dispatcher.dispatch("plain", {"text": "t"}, run_id="exp-001", cycle_number=5) == "T"
    assert dispatcher.dispatch("write", {"key": "k", "value": "v"}, cycle_number=5) == "Wrote value to key 'k'"
    assert ToolDispatcher(memory_tools).dispatch("note", {"text": "t"}) == "Error: Tool 'note' not found"
