"""LLM usage of a trace step (model, tokens, cost) read from any common spelling, priced, and rolled up
per run without counting a call twice.

:func:`usage_of` is the one reader: every frame, panel, chart and command that shows tokens or cost
reads a step's usage through it. It reads the keys an agent or an instrumentation writes, flat
(``"gen_ai.usage.input_tokens": 12``) or nested (``{"usage": {"prompt_tokens": 12}}``), anywhere in
the step's data but its ``parameters`` (a request's ``max_tokens`` is not usage):

* OTel GenAI: ``gen_ai.usage.input_tokens`` / ``output_tokens`` (and the older ``prompt_tokens`` /
  ``completion_tokens``), ``gen_ai.response.model`` / ``gen_ai.request.model``;
* OpenInference: ``llm.token_count.prompt`` / ``completion`` / ``total``, ``llm.model_name``,
  ``llm.cost.total``;
* OpenAI's ``usage.prompt_tokens`` / ``completion_tokens`` / ``total_tokens``; Anthropic's
  ``input_tokens`` / ``output_tokens``; Gemini's ``prompt_token_count`` / ``candidates_token_count``;
* a step's own ``model``, ``cost``, ``tokens`` (a number: the total; a mapping: ``prompt`` / ``input``,
  ``completion`` / ``output``, ``total``) and ``usage``.

Where the same figure is spelled twice (an OTel import keeps both conventions) the shallowest key
wins; nothing is added up within a step. ``cache_*`` and ``*_details`` counts are parts of the
input, never read as it.

**Roll-up.** A parent LLM chain often reports the tokens of the calls beneath it as well. A run's
usage therefore counts a step only when no step below it (through ``parent_step_index`` or
``parent_span_id``) carries usage: the leaves that report usage, and a parent only when nothing
beneath it does. Every attempt of a retried step counts (each called the model).
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from memkit._core._errors import InvalidInputError

__all__ = ["Labels", "Prices", "Usage", "counted_steps", "labels_of", "usage_of"]

_CONTAINERS = frozenset(("tokens", "usage", "token_usage", "token_count", "usage_metadata"))
_IN = frozenset(("input_tokens", "prompt_tokens", "tokens_in", "prompt_token_count", "input_token_count"))
_OUT = frozenset(("output_tokens", "completion_tokens", "tokens_out", "candidates_token_count",
                  "output_token_count"))
_TOTAL = frozenset(("total_tokens", "tokens_total", "total_token_count"))
_COST = frozenset(("cost", "cost_usd", "total_cost"))
_MAX_DEPTH = 6


class Usage(NamedTuple):
    """One step's LLM usage (``None``: not recorded). ``cost`` is the agent's own figure where it
    recorded one, else priced from ``Prices`` (``cost_source``: ``recorded``, ``priced`` or ``None``)."""

    model: str | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_total: int | None = None
    cost: float | None = None
    cost_source: str | None = None

    @property
    def carried(self) -> bool:
        """Whether the step reported any tokens or cost (a model name alone is not usage)."""
        return any(v is not None for v in (self.tokens_in, self.tokens_out, self.tokens_total, self.cost))

    def priced(self, prices: Prices | None) -> Usage:
        """This usage with the cost ``prices`` gives where the step recorded none (``cost_source``
        ``priced``); as it is where it did, where ``prices`` is ``None`` or does not list its model."""
        if self.cost is not None or prices is None:
            return self
        cost = prices.cost(self.model, self.tokens_in, self.tokens_out)
        return self if cost is None else self._replace(cost=cost, cost_source="priced")


class Prices:
    """What a model costs, in currency per million input and output tokens: ``Prices({"gpt-4o": (2.5,
    10.0)})``. A model is priced by its own name, else by the longest name in the table it starts with
    (``gpt-4o-2024-08-06`` by ``gpt-4o``, ``gpt-4o-mini`` by ``gpt-4o-mini`` where both are listed)."""

    def __init__(self, table: Mapping[str, tuple[float, float]] | Prices | None = None) -> None:
        if isinstance(table, Prices):
            table = table.table
        if table is not None and not isinstance(table, Mapping):
            raise InvalidInputError(f"prices: a mapping of model -> (input, output) per million tokens, "
                                    f"got {type(table).__name__}")
        checked: dict[str, tuple[float, float]] = {}
        for model, pair in (table or {}).items():
            if not isinstance(model, str) or not model:
                raise InvalidInputError(f"prices: a model name is a non-empty string, got {model!r}")
            if (not isinstance(pair, (tuple, list)) or len(pair) != 2
                    or not all(_finite(p) is not None and float(p) >= 0 for p in pair)):
                raise InvalidInputError(
                    f"prices[{model!r}]: (input, output) price per million tokens, two numbers >= 0, got {pair!r}")
            checked[model] = (float(pair[0]), float(pair[1]))
        self.table: dict[str, tuple[float, float]] = checked
        self._by_length = sorted(checked, key=len, reverse=True)

    def __repr__(self) -> str:
        return f"Prices({self.table!r})"

    def of(self, model: str | None) -> tuple[float, float] | None:
        """The (input, output) price per million tokens of ``model``; ``None`` when it is not listed."""
        if model is None:
            return None
        if model in self.table:
            return self.table[model]
        return next((self.table[name] for name in self._by_length if model.startswith(name)), None)

    def cost(self, model: str | None, tokens_in: int | None, tokens_out: int | None) -> float | None:
        price = self.of(model)
        if price is None or (tokens_in is None and tokens_out is None):
            return None
        return ((tokens_in or 0) * price[0] + (tokens_out or 0) * price[1]) / 1e6


def as_prices(prices: Prices | Mapping[str, tuple[float, float]] | None) -> Prices | None:
    """``prices=`` as every view takes it: a :class:`Prices`, a plain mapping or ``None``."""
    return prices if prices is None or isinstance(prices, Prices) else Prices(prices)


def _count(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 2**53 else None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**53:
        return int(value)
    return None


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _leaves(data: Mapping[str, Any]) -> list[tuple[int, tuple[str, ...], Any]]:
    """Every (depth, key path, value) of ``data`` but its ``parameters``; a dotted key is split into its
    parts (``gen_ai.usage.input_tokens`` reads as ``usage.input_tokens`` nested under ``gen_ai``)."""
    out: list[tuple[int, tuple[str, ...], Any]] = []
    stack: list[tuple[int, tuple[str, ...], Mapping[str, Any]]] = [(0, (), data)]
    while stack:
        depth, path, node = stack.pop()
        for key, value in node.items():
            if not isinstance(key, str) or (depth == 0 and key == "parameters"):
                continue
            here = (*path, *key.split("."))
            if isinstance(value, str) and key == "attributes" and value[:1] == "{":
                try:  # foreign span attributes kept as JSON text
                    value = json.loads(value)
                except ValueError:
                    continue
            if isinstance(value, Mapping):
                if depth < _MAX_DEPTH:
                    stack.append((depth + 1, here, value))
            else:
                out.append((depth, here, value))
    out.sort(key=lambda leaf: leaf[0])  # shallowest first; stable within a depth
    return out


def usage_of(data: Mapping[str, Any] | None, prices: Prices | None = None) -> Usage:
    """A step's usage from its trace data (what ``add_trace`` stored), in any spelling memkit reads."""
    if not isinstance(data, Mapping):
        return Usage()
    found: dict[str, Any] = {}
    models: dict[str, str] = {}
    for _, path, value in _leaves(data):
        last = path[-1]
        parent = path[-2] if len(path) > 1 else ""
        if last in ("model", "model_name") and isinstance(value, str) and value:
            models.setdefault(parent if parent in ("response", "request") else "own", value)
            continue
        number = _count(value)
        if last in _IN or (last in ("prompt", "input") and parent in _CONTAINERS):
            field = "in"
        elif last in _OUT or (last in ("completion", "output") and parent in _CONTAINERS):
            field = "out"
        elif last in _TOTAL or (last == "total" and parent in _CONTAINERS) or path == ("tokens",):
            field = "total"
        elif last in _COST or (parent == "cost" and last in ("total", "usd")):
            if (cost := _finite(value)) is not None and cost >= 0:
                found.setdefault("cost", cost)
            continue
        else:
            continue
        if number is not None:
            found.setdefault(field, number)
    tokens_in, tokens_out = found.get("in"), found.get("out")
    total = found.get("total")
    if total is None and (tokens_in is not None or tokens_out is not None):
        total = (tokens_in or 0) + (tokens_out or 0)
    model = models.get("response") or models.get("own") or models.get("request")
    if model is None and isinstance(params := data.get("parameters"), Mapping):
        model = params.get("model") if isinstance(params.get("model"), str) and params.get("model") else None
    cost = found.get("cost")
    return Usage(model, tokens_in, tokens_out, total, cost, None if cost is None else "recorded").priced(prices)


_SESSION_KEYS = ("session_id", "session.id", "gen_ai.conversation.id", "conversation_id", "thread_id")
_TAG_KEYS = ("tags", "tag.tags", "langfuse.tags")


class Labels(NamedTuple):
    """What a step says of its session and tags (``session.id``, ``gen_ai.conversation.id``, a
    ``session_id`` key...; ``tags``, OpenInference's ``tag.tags``), read by :func:`labels_of`."""

    session: str | None = None
    tags: tuple[str, ...] = ()


def labels_of(data: Mapping[str, Any] | None) -> Labels:
    """A step's session and tags, from its own keys or its ``metadata`` / ``attributes`` mapping."""
    if not isinstance(data, Mapping):
        return Labels()
    places = [data, *(v for k in ("metadata", "attributes") if isinstance(v := data.get(k), Mapping))]
    session: str | None = None
    tags: list[str] = []
    for place in places:
        for key in _SESSION_KEYS:
            value = place.get(key)
            if session is None and isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
                session = str(value)
        for key in _TAG_KEYS:
            value = place.get(key)
            if isinstance(value, str) and value[:1] == "[":  # OpenInference keeps a list as JSON text
                with contextlib.suppress(ValueError):  # not a list after all: a tag as written
                    value = json.loads(value)
            if isinstance(value, str):
                value = [value]
            if isinstance(value, (list, tuple)):
                tags += [t for t in dict.fromkeys(value) if isinstance(t, str) and t and t not in tags]
    return Labels(session, tuple(tags))


class Placed(NamedTuple):
    """Where a step sits in its run's tree: its index and span, and its parent's (any may be unknown)."""

    step_index: int | None = None
    span_id: str | None = None
    parent_step_index: int | None = None
    parent_span_id: str | None = None


def place_of(data: Mapping[str, Any] | None) -> Placed:
    if not isinstance(data, Mapping):
        return Placed()

    def index(key: str) -> int | None:
        value = data.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def text(key: str) -> str | None:
        value = data.get(key)
        return value if isinstance(value, str) else None

    return Placed(index("step_index"), text("span_id"), index("parent_step_index"), text("parent_span_id"))


def counted_steps(steps: Iterable[tuple[Placed, bool]]) -> list[bool]:
    """For one run's steps (where each sits, whether it carries usage): whether its usage counts in the
    run's totals, i.e. it carries usage and no step beneath it does (see the module docstring)."""
    listed = list(steps)
    by_index: dict[int, Placed] = {}
    by_span: dict[str, Placed] = {}
    for place, _ in listed:
        if place.step_index is not None:
            by_index.setdefault(place.step_index, place)
        if place.span_id is not None:
            by_span.setdefault(place.span_id, place)
    covered_index: set[int] = set()
    covered_span: set[str] = set()
    for place, carried in listed:
        if not carried:
            continue
        seen: set[int] = {id(place)}
        current = place
        while True:  # mark every ancestor: its usage already counts here
            parent = None
            if current.parent_step_index is not None and current.parent_step_index != current.step_index:
                parent = by_index.get(current.parent_step_index)
                covered_index.add(current.parent_step_index)
            elif current.parent_span_id is not None and current.parent_span_id != current.span_id:
                parent = by_span.get(current.parent_span_id)
                covered_span.add(current.parent_span_id)
            if parent is None or id(parent) in seen:
                break
            seen.add(id(parent))
            if parent.step_index is not None:
                covered_index.add(parent.step_index)
            if parent.span_id is not None:
                covered_span.add(parent.span_id)
            current = parent
    return [carried and not ((place.step_index is not None and place.step_index in covered_index)
                             or (place.span_id is not None and place.span_id in covered_span))
            for place, carried in listed]
