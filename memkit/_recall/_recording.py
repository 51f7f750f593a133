"""Recalls: what a search returned, to whom, at which step of which workflow.

A recall is written by the store that answered the search, in the namespace that was
searched, so reading recalls obeys the same isolation as reading memories. Each hit
keeps a snapshot of the text it had when returned: the record stays true after the
memory is deleted, edited by a re-import, or re-ranked by a re-embed.

When a search is recorded:

* inside a step scope (:meth:`memkit.traces.ExecutionHistory.step`, ``retrying``, or
  :func:`recall_scope`), always; the recall carries the scope's workflow, run and step;
* outside any scope, only when the store was opened with ``record_recalls=True``;
* never inside :func:`paused` (replays and :func:`memkit.build_context`'s own search,
  which records the context it built instead).

The scope is a :class:`contextvars.ContextVar`: tasks, ``asyncio.to_thread`` and
memkit's sync facade (whose calls run on memkit's loop in a copy of the caller's
context) all see the scope of the code that made the call. A bare
``threading.Thread`` starts with an empty context; run its target through
``contextvars.copy_context().run`` to carry a scope into it.

Recording never changes a search's results: a recall that cannot be built or stored
is reported with a :class:`RuntimeWarning` and the search returns as usual.
"""

from __future__ import annotations

import itertools
import json
import os
import secrets
import warnings
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Literal

import pydantic_core

from memkit._core._errors import InvalidInputError
from memkit._core._models import MemoryFilter, MemoryItem
from memkit._core._port import RecallKeeper
from memkit._core._recalls import Recall
from memkit._core._records import from_us, now_us, to_us
from memkit._core._stamps import iso_us as _iso
from memkit._core._stamps import json_time
from memkit._core._validate import DEFAULT_LIMITS, Limits, check_id, check_namespace

__all__ = [
    "RecallScope",
    "body_of",
    "check_as_of",
    "checked_bodies",
    "checked_recalls",
    "created_us",
    "current_scope",
    "dumps",
    "encode",
    "json_time",
    "loads",
    "paused",
    "recall_scope",
    "record",
    "settle",
    "step_scope",
]


_HIT_FIELDS = ("id", "rank", "score", "details", "content")

# How stores keep a recall: Recall's fields as a JSON object, except ``created_at`` (microseconds
# since the epoch while queued, ISO 8601 once encoded) and ``hits``, kept as arrays
# ``[id, rank, score, details, content]``. A recorded search queues its hits as :class:`_Hits`,
# encoded on its path in one call of the encoder, which is also their snapshot (a caller editing a
# returned item's details cannot edit the recall): nothing is copied, and the store's writer only
# encodes the few other fields. Imports queue hits as plain lists. The JSONL export writes the
# model's own shape (:func:`dumps`).


class _Hits(list[list[Any]]):
    """A recorded search's hits as arrays (ids, ranks and scores for the stores that index them),
    with ``json``, their encoding at the time of the search: what :func:`encode` writes."""

    __slots__ = ("json",)

    def __init__(self, rows: list[list[Any]]) -> None:
        super().__init__(rows)
        self.json = pydantic_core.to_json(rows)


def _hits(hits: Sequence[MemoryItem], ranks: Sequence[int] | None) -> _Hits:
    return _Hits([
        [item.id, rank, item.score, item.score_details, item.content]
        for rank, item in zip(range(1, len(hits) + 1) if ranks is None else ranks, hits, strict=False)
    ])


def created_us(body: dict[str, Any]) -> int:
    stamp = body["created_at"]
    return stamp if isinstance(stamp, int) else to_us(datetime.fromisoformat(stamp))


def encode(body: dict[str, Any]) -> str:
    """The stored JSON text of a recall body (pydantic-core's encoder: five times the json module's)."""
    hits = body["hits"]
    stamp = body["created_at"]
    if isinstance(stamp, int):
        body = {**body, "created_at": _iso(stamp)}
    if not isinstance(hits, _Hits):
        return pydantic_core.to_json(body).decode()
    # "hits" is the last key: the body encoded with no hits ends in '[]}'; the snapshot goes in there.
    head = pydantic_core.to_json({**body, "hits": ()})
    return (head[:-3] + hits.json + b"}").decode()


def body_of(recall: Recall) -> dict[str, Any]:
    """A recall as stores keep it (for imports)."""
    body = recall.model_dump(mode="json")
    body["hits"] = [[hit[field] for field in _HIT_FIELDS] for hit in body["hits"]]
    return body


def loads(text: str) -> Recall:
    """A stored recall, read back."""
    body = json.loads(text)
    body["hits"] = [dict(zip(_HIT_FIELDS, hit, strict=True)) for hit in body["hits"]]
    return Recall.model_validate(body)


def dumps(recall: Recall) -> str:
    """A recall as one JSON object in the model's shape (the JSONL export's recall lines)."""
    return pydantic_core.to_json(recall.model_dump(mode="json")).decode()


def _reseed() -> None:
    global _prefix, _counter
    _prefix, _counter = secrets.token_hex(8), itertools.count()


_prefix, _counter = "", itertools.count()
_reseed()
os.register_at_fork(after_in_child=_reseed)  # a forked child must not hand out its parent's ids


def _new_id() -> str:
    """32 hex digits like ``secrets.token_hex(16)``: random per process, then a counter (no system call)."""
    return f"{_prefix}{next(_counter):016x}"


@dataclass(frozen=True, slots=True)
class RecallScope:
    """Where searches made now belong: a workflow, its run, and a step, in the namespace
    (``user_id``, ``agent_id``) its trace is stored in (``None``: the namespace searched)."""

    workflow_id: str | None = None
    run_id: str | None = None
    step_index: int | None = None
    step_name: str | None = None
    attempt: int | None = None
    user_id: str | None = None
    agent_id: str | None = None


_NOWHERE = RecallScope()
_SCOPE: ContextVar[RecallScope | None] = ContextVar("memkit_recall_scope", default=None)
_PAUSED: ContextVar[bool] = ContextVar("memkit_recall_paused", default=False)


def current_scope() -> RecallScope | None:
    """The scope searches made here are recorded under (``None`` outside any)."""
    return _SCOPE.get()


class _Scoped:
    """Sets a scope for a ``with`` or ``async with`` block (the same task or thread must leave it)."""

    def __init__(self, scope: RecallScope) -> None:
        self.scope = scope
        self._tokens: list[tuple[Token[RecallScope | None], RecallScope | None]] = []

    def __enter__(self) -> RecallScope:
        previous = _SCOPE.get()
        self._tokens.append((_SCOPE.set(self.scope), previous))
        return self.scope

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        token, previous = self._tokens.pop()
        try:
            _SCOPE.reset(token)
        except ValueError:
            # Left in another context than it was entered in (say, entered in one notebook
            # cell and left in the next): restore what this block replaced, here.
            _SCOPE.set(previous)

    async def __aenter__(self) -> RecallScope:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


def _optional_text(value: object, name: str) -> str | None:
    return None if value is None else check_id(value, name)


def recall_scope(
    workflow_id: str | None = None,
    *,
    step: str | None = None,
    step_index: int | None = None,
    run_id: str | None = None,
    user_id: str | None = None,
    agent_id: str | None = None,
) -> _Scoped:
    """Record every search made in this block as a recall of ``workflow_id``'s ``step``.

    For agents that do not use :class:`memkit.traces.ExecutionHistory` (whose steps set
    the scope themselves). Works with ``with`` and ``async with``; scopes nest (the
    innermost wins). Inside a scope searches are recorded whatever the store's
    ``record_recalls`` setting. ``user_id``/``agent_id``: the namespace the step's trace
    is written in, when it is not the namespace its searches read (the recalls then count
    for that namespace's run; see :func:`step_namespace`).

    Examples
    --------
    >>> with memkit.recall_scope("wf-42", step="plan"):          # doctest: +SKIP
    ...     hits = mem.search("TP53", user_id="u1", agent_id="bio")
    """
    if step_index is not None and (
        isinstance(step_index, bool) or not isinstance(step_index, int) or step_index < 0
    ):
        raise InvalidInputError(f"step_index must be a non-negative int, got {step_index!r}")
    if (user_id is None) != (agent_id is None):
        raise InvalidInputError("recall_scope takes user_id and agent_id together (the step's namespace), or neither")
    scope = RecallScope(
        workflow_id=_optional_text(workflow_id, "workflow_id"),
        run_id=_optional_text(run_id, "run_id"),
        step_index=step_index,
        step_name=_optional_text(step, "step"),
        user_id=_optional_text(user_id, "user_id"),
        agent_id=_optional_text(agent_id, "agent_id"),
    )
    return _Scoped(scope)


def step_scope(scope: RecallScope) -> _Scoped:
    """The scope a trace step sets (already validated by the history)."""
    return _Scoped(scope)


@contextmanager
def paused() -> Iterator[None]:
    """Searches in this block are not recorded (replays, and the search inside build_context)."""
    token = _PAUSED.set(True)
    try:
        yield
    finally:
        _PAUSED.reset(token)


def _filters_json(filters: object) -> dict[str, Any] | None:
    if filters is None:
        return None
    raw = filters.metadata if isinstance(filters, MemoryFilter) else filters
    # A copy through JSON: the caller's dict may change after the search; the recall must not.
    return json.loads(json.dumps(raw)) if isinstance(raw, dict) and raw else None


def record(
    store: object,
    *,
    query: str,
    user_id: str,
    agent_id: str,
    mode: str,
    filters: object,
    limit: int,
    hits: Sequence[MemoryItem],
    as_of: datetime | None = None,
    kind: Literal["search", "context"] = "search",
    options: dict[str, Any] | None = None,
    ranks: Sequence[int] | None = None,
) -> Awaitable[None] | None:
    """Record one recall on ``store`` if recording is on here; never raises, never touches ``hits``.

    ``ranks`` overrides the 1..n ranks (a context keeps its memories' ranks among the candidates).
    A store whose ``_keep_recall`` writes asynchronously (the graph databases) returns the write:
    the caller awaits it with :func:`settle`.
    """
    if _PAUSED.get():
        return None
    scope = _SCOPE.get()
    if not isinstance(store, RecallKeeper) or (scope is None and not store.record_recalls):
        return None
    keep = store._keep_recall
    try:
        # The stored shape (see encode). This runs on every recorded search's path: the hits are
        # encoded at once (their snapshot), everything else is a reference to an immutable value.
        where = scope or _NOWHERE
        body = {
            "id": _new_id(),
            "created_at": now_us(),
            "user_id": user_id,
            "agent_id": agent_id,
            "kind": kind,
            "query": query,
            "mode": mode,
            "filters": None if filters is None else _filters_json(filters),
            "limit": limit,
            "as_of": None if as_of is None else from_us(to_us(as_of)).isoformat(),
            "options": options,
            "workflow_id": where.workflow_id,
            "run_id": where.run_id,
            "step_index": where.step_index,
            "step_name": where.step_name,
            "attempt": where.attempt,
            "trace_user_id": where.user_id,
            "trace_agent_id": where.agent_id,
            "hits": _hits(hits, ranks),
        }
        pending: Awaitable[None] | None = keep(body)
        return pending
    except Exception as exc:  # a recording failure must not fail (or change) the search
        warnings.warn(f"memkit could not record a recall: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=3)
        return None


async def settle(pending: Awaitable[None] | None) -> None:
    """Finish a recall write :func:`record` started; a failure warns and never reaches the search."""
    if pending is None:
        return
    try:
        await pending
    except Exception as exc:
        warnings.warn(f"memkit could not record a recall: {type(exc).__name__}: {exc}", RuntimeWarning, stacklevel=2)


def checked_recalls(recalls: Iterable[Recall], limits: Limits = DEFAULT_LIMITS) -> list[Recall]:
    """Recalls to import, checked like any other write (namespaces, ids, no duplicates in the batch)."""
    if isinstance(recalls, (str, bytes, Recall)) or not isinstance(recalls, Iterable):
        raise InvalidInputError("add_recalls takes an iterable of Recall")
    batch: list[Recall] = []
    seen: set[str] = set()
    for recall in recalls:
        if not isinstance(recall, Recall):
            raise InvalidInputError(f"add_recalls takes Recall objects, got {type(recall).__name__}")
        check_id(recall.id, "recall id", limits)
        check_namespace(recall.user_id, recall.agent_id, limits)
        if recall.id in seen:
            raise InvalidInputError(f"recall id {recall.id!r} appears twice")
        seen.add(recall.id)
        batch.append(recall)
    return batch


def checked_bodies(
    bodies: Sequence[dict[str, Any]], limits: Limits = DEFAULT_LIMITS, seen: set[str] | None = None
) -> list[dict[str, Any]]:
    """Recall bodies (as :func:`body_of` gives them) to import, checked as :func:`checked_recalls` checks
    recalls, with the same messages; ``seen``: the ids of the import's bodies checked before these
    (added to), when they come in parts."""
    seen = set() if seen is None else seen
    for body in bodies:
        recall_id = body["id"]
        check_id(recall_id, "recall id", limits)
        check_namespace(body["user_id"], body["agent_id"], limits)
        if recall_id in seen:
            raise InvalidInputError(f"recall id {recall_id!r} appears twice")
        seen.add(recall_id)
    return list(bodies)


def check_as_of(as_of: object) -> int | None:
    """``as_of`` as microseconds since the epoch (a naive datetime is taken as UTC)."""
    if as_of is None:
        return None
    if not isinstance(as_of, datetime):
        raise InvalidInputError(f"as_of must be a datetime, got {type(as_of).__name__}")
    return to_us(as_of)
