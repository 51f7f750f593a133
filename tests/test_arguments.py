"""Every public call of the facade and the tools answers a wrong call with a memkit error that names
the argument and what was expected, and changes nothing.

The test walks the public methods by introspection: a method added without a row in ``CALLS`` fails
``test_every_public_call_is_walked``, so no public call escapes the walk.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit import InvalidInputError, MemkitError
from memkit.tools import MemoryTools, ProviderTools, ToolDispatcher, register_pydantic_ai_tools

WRONG = object()  # of no kind any parameter takes


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[memkit.Memory]:
    with memkit.open(f"sqlite:///{tmp_path}/args.db?embedder=none") as store:
        store.add("TP53 is mutated in sample 7", "alice", "bio", {"gene": "TP53"})
        store.add_trace("bio", "wf-1", {"tool": "blast", "status": "success"}, "alice")
        yield store


@pytest.fixture
def kv(tmp_path: Path) -> Iterator[MemoryTools]:
    with MemoryTools(str(tmp_path / "kv.db"), "run-1") as tools:
        tools.write("k", "v")
        yield tools


def _public(cls: type) -> list[str]:
    names = [n for n, v in vars(cls).items() if inspect.isfunction(v) and not n.startswith("_")]
    return ["__init__", *names]


# A valid call of each public callable: (positional args, keyword args). The owner is built by the test.
CALLS: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "Memory.__init__": ((), {}),  # filled in with the store's provider
    "Memory.add": (("a note", "alice", "bio"), {"metadata": {"k": 1}}),
    "Memory.add_trace": (("bio", "wf-2", {"tool": "bwa"}), {"user_id": "alice"}),
    "Memory.search": (("TP53", "alice", "bio"), {"limit": 3, "filters": {"gene": "TP53"}, "mode": "keyword"}),
    "Memory.build_context": (("TP53", "alice", "bio"), {"token_budget": 200, "candidates": 5}),
    "Memory.reembed": ((), {"progress": False}),
    "Memory.get_all": (("alice", "bio"), {"limit": 5, "filters": None}),
    "Memory.delete": (("no-such-id",), {"user_id": "alice", "agent_id": "bio"}),
    "Memory.reset": ((), {}),
    "Memory.get": (("no-such-id",), {}),
    "Memory.add_many": (([{"content": "x", "user_id": "alice", "agent_id": "bio"}],), {"progress": False}),
    "Memory.namespaces": ((), {}),
    "Memory.recalls": ((), {"user_id": "alice", "agent_id": "bio", "workflow_id": "wf-1", "run_id": None}),
    "Memory.stats": ((), {}),
    "Memory.health": ((), {}),
    "Memory.get_page": (("alice", "bio"), {"offset": 0, "limit": 5, "filters": None}),
    "Memory.export": ((), {"user_id": "alice", "agent_id": "bio"}),
    "Memory.close": ((), {}),
    # An unknown recall, step or mark: the valid shape of the call, refused only as not found.
    "Memory.mark_memory": (("no-such-recall", "no-such-id"), {"relevant": True, "user_id": "alice",
                                                             "agent_id": "bio", "note": "n"}),
    "Memory.mark_step": (("no-such-step",), {"good": False, "user_id": "alice", "agent_id": "bio", "note": ""}),
    "Memory.unmark": (("no-such-mark",), {"user_id": "alice", "agent_id": "bio"}),
    "Memory.marks": ((), {"user_id": "alice", "agent_id": "bio", "workflow_id": "wf-1", "run_id": None}),
    "memkit.open": (("memory://",), {}),
    "memkit.get_memory_provider": (("memory://",), {}),
    "MemoryTools.__init__": ((), {"run_id": "run-2"}),  # db_path filled in
    "MemoryTools.close": ((), {}),
    "MemoryTools.write": (("k2", "v2"), {}),
    "MemoryTools.read": (("k",), {}),
    "MemoryTools.list": ((), {}),
    "MemoryTools.delete": (("k",), {}),
    "MemoryTools.pattern_search": (("k",), {}),
    "ProviderTools.__init__": ((), {"user_id": "alice", "agent_id": "bio"}),  # memory filled in
    "ProviderTools.arecall_memory": (("TP53",), {"limit": 2}),
    "ProviderTools.asave_note": (("a note",), {"metadata": {"k": 1}}),
    "ProviderTools.recall_memory": (("TP53",), {"limit": 2}),
    "ProviderTools.save_note": (("a note",), {"metadata": {"k": 1}}),
    "ToolDispatcher.__init__": ((), {"config": {"run_id": "r"}}),  # memory_tools filled in
    "ToolDispatcher.register": (("echo", lambda: "hi", {"type": "function"}), {}),
    "ToolDispatcher.dispatch": (("read", {"key": "k"}), {"run_id": "r", "cycle_number": 1}),
    "ToolDispatcher.get_tool_definitions": ((), {}),
    "register_pydantic_ai_tools": ((), {}),  # agent and tools filled in
}


def test_every_public_call_is_walked() -> None:
    walked = {f"{cls.__name__}.{name}" for cls in (memkit.Memory, MemoryTools, ProviderTools, ToolDispatcher)
              for name in _public(cls)}
    walked |= {"memkit.open", "memkit.get_memory_provider", "register_pydantic_ai_tools"}
    assert walked == set(CALLS)


class _Agent:
    """The two methods register_pydantic_ai_tools uses, so the walk needs no pydantic-ai."""

    def __init__(self) -> None:
        self.tools: list[Callable[..., Any]] = []

    def tool_plain(self, fn: Callable[..., Any]) -> None:
        self.tools.append(fn)


def _target(name: str, mem: memkit.Memory, kv: MemoryTools, tmp_path: Path) -> tuple[
    Callable[..., Any], tuple[Any, ...], dict[str, Any]
]:
    """The callable named ``name`` and a valid call of it."""
    args, kwargs = CALLS[name]
    owner, _, method = name.rpartition(".")
    if name == "memkit.open":
        return memkit.open, args, kwargs
    if name == "memkit.get_memory_provider":
        return memkit.get_memory_provider, args, kwargs
    if name == "register_pydantic_ai_tools":
        return register_pydantic_ai_tools, (_Agent(), ProviderTools(mem, "alice", "bio")), kwargs
    if method == "__init__":
        first = {"Memory": mem.provider, "MemoryTools": str(tmp_path / "kv2.db"),
                 "ProviderTools": mem, "ToolDispatcher": kv}[owner]
        cls = {"Memory": memkit.Memory, "MemoryTools": MemoryTools, "ProviderTools": ProviderTools,
               "ToolDispatcher": ToolDispatcher}[owner]
        return cls, (first, *args), kwargs
    instance = {"Memory": mem, "MemoryTools": kv, "ProviderTools": ProviderTools(mem, "alice", "bio"),
                "ToolDispatcher": ToolDispatcher(kv)}[owner]
    return getattr(instance, method), args, kwargs


def _call(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    if inspect.iscoroutine(result):  # checked when awaited, as any coroutine function's arguments
        return asyncio.run(result)
    if inspect.isgenerator(result):  # checked at the call, before the first item is asked for
        result.close()
    return result


def _answers_in_words(fn: Callable[..., Any]) -> bool:
    return isinstance(getattr(fn, "__self__", None), MemoryTools) and fn.__name__ != "close"


def _refusal(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """What the call refuses with: the InvalidInputError it raises or, for a key-value tool (which
    answers in words, as the seed's tools do), its error string."""
    if _answers_in_words(fn):
        answer = _call(fn, args, kwargs)
        assert answer.startswith(f"Error: Invalid arguments for tool '{fn.__name__}': "), answer
        return str(answer)
    with pytest.raises(InvalidInputError) as info:
        _call(fn, args, kwargs)
    return str(info.value)


def _refused(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> None:
    """The call is refused naming the argument ``name``."""
    message = _refusal(fn, args, kwargs)
    assert repr(name) in message, message


def _snapshot(mem: memkit.Memory, kv: MemoryTools) -> tuple[Any, ...]:
    items = [(i.id, i.content) for i in mem.get_all("alice", "bio", limit=100)]
    return mem.stats().memories, items, kv.list(), kv.read("k")


@pytest.mark.parametrize("name", sorted(CALLS))
def test_unknown_missing_and_wrong_kind_arguments_are_memkit_errors(
    name: str, mem: memkit.Memory, kv: MemoryTools, tmp_path: Path
) -> None:
    fn, args, kwargs = _target(name, mem, kv, tmp_path)
    before = _snapshot(mem, kv)
    signature = inspect.signature(fn)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    takes_any_keyword = any(p.kind is p.VAR_KEYWORD for p in params)

    # An argument nobody takes, by keyword and (one too many) by position.
    if not takes_any_keyword or name in ("Memory.search", "Memory.build_context"):
        # (search and build_context pass other keywords on, and only those the callee takes)
        _refused(fn, args, {**kwargs, "bogus": 1}, "bogus")
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if not any(p.kind is p.VAR_POSITIONAL for p in params):
        assert "too many positional arguments" in _refusal(fn, (*args, *[None] * (len(positional) - len(args) + 1)), {})

    # Each required argument left out.
    for param in params:
        if param.default is param.empty and param.kind not in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            index = positional.index(param) if param in positional else None
            if index is not None and index < len(args):
                given = {p.name for p in positional[:index + 1]}
                left = (args[:index], {k: v for k, v in kwargs.items() if k not in given})
            else:
                left = (args, {k: v for k, v in kwargs.items() if k != param.name})
            assert f"missing a required argument: '{param.name}'" in _refusal(fn, *left)

    # Each argument given something of no kind it takes: a memkit error, never a raw TypeError.
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        bound = signature.bind_partial(*args, **kwargs).arguments
        bound[param.name] = WRONG
        call_args = tuple(bound.pop(p.name) for p in positional if p.name in bound and
                          all(q.name in bound for q in positional[:positional.index(p)]))
        if name == "ToolDispatcher.dispatch":  # answers the model in words, never raises
            answer = _call(fn, call_args, bound)
            assert isinstance(answer, str) and answer.startswith("Error"), answer
            continue
        try:
            answer = _call(fn, call_args, bound)
            if _answers_in_words(fn):
                assert f"{param.name} must be" in answer, answer  # a key-value tool answers in words
                continue
        except InvalidInputError as exc:
            assert f"{param.name} must be" in str(exc), str(exc)
        except MemkitError:
            pass  # e.g. a ConfigError for a config that is no config: still memkit's
        except Exception as exc:  # pragma: no cover - the failure this test exists for
            raise AssertionError(f"{name}({param.name}=object()) raised {type(exc).__name__}: {exc}") from exc
        else:
            assert param.annotation in ("object", "Any"), f"{name} accepted {param.name}=object()"

    assert _snapshot(mem, kv) == before  # no refused call wrote, deleted or reset anything


def test_coroutine_methods_stay_coroutine_functions() -> None:
    assert inspect.iscoroutinefunction(ProviderTools.arecall_memory)
    assert inspect.iscoroutinefunction(ProviderTools.asave_note)


def test_the_messages_say_what_was_expected(mem: memkit.Memory) -> None:
    with pytest.raises(InvalidInputError) as info:
        mem.search(bogus=1)  # type: ignore[call-arg]
    assert "missing a required argument: 'query' (and got 'bogus', none of its own arguments)" in str(info.value)
    assert "Memory.search(query, user_id, agent_id, limit=5" in str(info.value)
    with pytest.raises(InvalidInputError, match=r"Memory.add_many\(\): items must be a list \(or other iterable\)"):
        mem.add_many(5)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"items must be a list .*, got dict"):
        mem.add_many({"content": "one memory, not a list of them", "user_id": "u", "agent_id": "a"})
    with pytest.raises(InvalidInputError, match=r"limit must be an integer, got str '5'"):
        mem.search("TP53", "alice", "bio", limit="5")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"'bogus'; besides its own arguments it passes on only those "
                                                r"SQLiteAdapter.search\(\) takes: hybrid, as_of"):
        mem.search("TP53", "alice", "bio", bogus=1)
    with pytest.raises(InvalidInputError, match="as_of must be a datetime or None, got str"):
        mem.search("TP53", "alice", "bio", as_of="yesterday")
    with pytest.raises(InvalidInputError, match=r"memkit.open\(\) got an unexpected argument 'bogus'"):
        memkit.open("memory://", bogus=1)  # type: ignore[call-arg]
    # What the adapters accepted before stays accepted: None as a query, a MemoryFilter as filters.
    assert mem.search(None, "alice", "bio", filters=memkit.MemoryFilter(metadata={"gene": "TP53"}))
    assert mem.get_all("alice", "bio", filters=memkit.MemoryFilter(metadata={"gene": "TP53"}))
