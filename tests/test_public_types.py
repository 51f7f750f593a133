"""``Any`` in the public API's parameters only where the value really is arbitrary.

Every function and method a user can reach (the public modules' ``__all__``) is walked. A
parameter's annotation may hold ``Any`` only as the value of a string-keyed mapping (a JSON
object: metadata, trace data, a step's parameters and result, filters, a config section) or
when it is listed in :data:`ARBITRARY` with the reason. :data:`NOT_YET` lists the ones still to
type; it must shrink: an entry that is typed now fails until it is removed.
"""

from __future__ import annotations

import importlib
import inspect
import re
import typing
from collections.abc import Callable, Iterator

import pytest

MODULES = (
    "memkit", "memkit.adapters", "memkit.charts", "memkit.cli", "memkit.embeddings", "memkit.frames", "memkit.graph",
    "memkit.langgraph", "memkit.otel", "memkit.tools", "memkit.traces", "memkit.widgets",
)

#: Parameters whose value memkit passes along without reading its type: other libraries' objects,
#: a model's raw arguments, and call context recorded as given.
ARBITRARY: dict[str, str] = {
    "memkit.otel.MemkitSpanProcessor.on_start.span": "an OpenTelemetry span (optional dependency's type)",
    "memkit.otel.MemkitSpanProcessor.on_start.parent_context": "an OpenTelemetry context",
    "memkit.otel.MemkitSpanProcessor.on_end.span": "an OpenTelemetry span",
    "memkit.otel.spans_to_otlp.spans": "OpenTelemetry spans",
    "memkit.tools.ToolCall.__init__.arguments": "the arguments exactly as the model sent them",
    "memkit.tools.ToolDispatcher.dispatch.context": "call context, recorded as the agent passed it",
    "memkit.tools.ToolDispatcher.register.function": "any callable a user registers as a tool",
    "memkit.tools.register_pydantic_ai_tools.agent": "a pydantic-ai Agent (optional dependency's type)",
    "memkit.langgraph.MemkitStore.__init__.ttl": "LangGraph's TTL configuration, passed to its base store",
    "memkit.traces.Redactor.__init__.replacement": "any JSON value stands in for a secret",
}

#: Still typed ``Any`` though the value is not arbitrary: keyword options passed on to a
#: constructor or a search. Type them (a TypedDict with ``Unpack``) and delete the entry.
NOT_YET: set[str] = set()

# A JSON object's values: the one place ``Any`` says exactly what is meant.
_JSON_OBJECT = re.compile(r"\b(?:dict|Mapping)\[str, Any\]")
_UNPACK = re.compile(r"Unpack\[(\w+)\]")


def _functions() -> Iterator[tuple[str, Callable[..., object]]]:
    seen: set[int] = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name in sorted(module.__all__):
            obj = getattr(module, name)
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                    public = attr == "__init__" or not attr.startswith("_")
                    if public and inspect.isfunction(function) and id(function) not in seen:
                        seen.add(id(function))
                        yield f"{module_name}.{name}.{attr}", function
            elif inspect.isfunction(obj) and id(obj) not in seen:
                seen.add(id(obj))
                yield f"{module_name}.{name}", obj


def _loose(annotation: str, function: Callable[..., object]) -> bool:
    """Whether ``annotation`` holds an ``Any`` that is not a JSON object's value type (a
    ``**kwargs: Unpack[SomeTypedDict]`` is read through the TypedDict's fields, looked up where the
    function is defined: beneath any checking wrapper)."""
    if "Any" in _JSON_OBJECT.sub("", annotation):
        return True
    for typed_dict in _UNPACK.findall(annotation):
        fields = getattr(inspect.unwrap(function), "__globals__", {})[typed_dict].__annotations__
        if any(_loose(str(field), function) for field in fields.values()):
            return True
    return False


def _any_parameters() -> dict[str, str]:
    found: dict[str, str] = {}
    for qualified, function in _functions():
        for name, parameter in inspect.signature(function).parameters.items():
            annotation = parameter.annotation
            text = annotation if isinstance(annotation, str) else typing.cast(str, inspect.formatannotation(annotation))
            if name not in ("self", "cls") and _loose(text, function):
                found[f"{qualified}.{name}"] = text
    return found


def test_any_only_where_the_value_is_arbitrary() -> None:
    loose = _any_parameters()
    unexplained = {k: v for k, v in loose.items() if k not in ARBITRARY and k not in NOT_YET}
    assert not unexplained, f"typed Any: give them a type, or say in ARBITRARY why any value goes: {unexplained}"


def test_the_lists_name_only_parameters_still_typed_any() -> None:
    loose = _any_parameters()
    stale = sorted((set(ARBITRARY) | NOT_YET) - set(loose))
    assert not stale, f"typed now (or gone): remove them from the lists: {stale}"


@pytest.mark.parametrize(
    "qualified",
    ["memkit.frames.tool_stats.filters", "memkit.charts.duration_chart.filters", "memkit.frames.replay.filters",
     "memkit.adapters.Mem0Adapter.__init__.memory", "memkit.adapters.FalkorDBAdapter.__init__.options",
     "memkit.adapters.Neo4jAdapter.from_url.options"],
)
def test_the_walk_reads_these_and_finds_them_typed(qualified: str) -> None:
    """The walk reaches keyword filters, wrapped objects and graph options (so a regression to Any shows)."""
    names = {q for q, _ in _functions()}
    assert qualified.rpartition(".")[0] in names
    assert qualified not in _any_parameters()
