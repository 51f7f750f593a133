"""memkit as a LangGraph long-term store: ``MemkitStore`` is a ``langgraph.store.base.BaseStore``.

>>> from memkit.langgraph import MemkitStore                     # doctest: +SKIP
>>> store = MemkitStore("sqlite:///data/memory.db", user_id="alice", agent_id="assistant")  # doctest: +SKIP
>>> graph = builder.compile(store=store)                          # doctest: +SKIP

One store writes into ONE memkit namespace (``user_id``, ``agent_id``) and never reads or writes
outside it: LangGraph's hierarchical namespaces (``("memories", "prefs")``) live inside it as
metadata, so two stores opened on the same database with different ``user_id`` see nothing of each
other, and every item a graph writes shows up in NamespaceBrowser under that namespace.

Each item is one memkit memory: its text (the whole value as JSON, or the fields the
``IndexConfig`` or ``put(index=[...])`` names) is what memkit's hybrid retrieval ranks, and its
metadata keeps the LangGraph namespace, key, value and times. Its memkit id is computed from the
LangGraph namespace and key and bound to the store's memkit namespace (no other namespace can hold
it); a put is checked first and replaces the item in one transaction (``WriteOp(replace=True)``:
concurrent puts of one key are upserts, the last one wins). ``search(query=...)`` runs memkit's
search (keyword + semantic with the store's own embedder) and is recorded as a recall, so a
LangGraph agent's searches appear in the recall audit (inside a memkit step or
:func:`memkit.recall_scope` they belong to that step, else to the store's ``workflow_id``).

``IndexConfig["embed"]``/``dims`` become the memkit store's embedder when MemkitStore opens it from
a URL, and are refused for a store already open (it keeps its own). TTL is refused: ``supports_ttl``
is ``False``, so LangGraph's ``put(ttl=...)`` raises its own ``NotImplementedError``.
Needs ``pip install 'memkit[langgraph]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

from memkit._core._errors import BackendUnavailableError, ConfigError, InvalidInputError
from memkit._core._filters import parse_filters
from memkit._core._models import MemoryItem
from memkit._core._port import MemoryProvider, SupportsAddMany, SupportsGet, SupportsPaging
from memkit._core._records import Record, records_from_items
from memkit._core._validate import DEFAULT_LIMITS, bound_id
from memkit._recall._recording import current_scope, recall_scope
from memkit._sync import Memory, call, provider_of, submit
from memkit.store._base import Store
from memkit.store._ops import ValuesOp, WriteOp

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as exc:  # pragma: no cover - depends on the install
    raise BackendUnavailableError(
        "memkit.langgraph needs LangGraph: pip install 'memkit[langgraph]'"
    ) from exc

__all__ = ["MemkitStore"]

# Metadata keys of an item's memory. ``lg_ns_<i>`` hold the namespace labels one by one so a
# namespace prefix is a conjunction of equality filters every adapter compiles.
_KIND = "langgraph_item"
_MAX_DEPTH = 32
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PAGE = 1_000
_FILTER_DEPTH = 8  # memkit's deepest filter path
_Place = tuple[tuple[str, ...], str]  # an item's (namespace, key)


class _InvalidNamespace(InvalidInputError, InvalidNamespaceError):
    """memkit's error and LangGraph's, so either ``except`` holds."""


def _checked(ops: Iterable[Op]) -> list[Op]:
    """``ops``, refused before anything runs if one has a label that could name another namespace (a
    path is its labels joined by dots: ``("a.b",)`` would read ``("a", "b")``), as LangGraph's stores do."""
    ops = list(ops)
    for op in ops:
        if isinstance(op, ListNamespacesOp):
            paths = [c.path for c in op.match_conditions or ()]
        else:  # GetOp and PutOp have a namespace, SearchOp a prefix (a loop: store.get runs this)
            paths = [op.namespace_prefix if isinstance(op, SearchOp) else getattr(op, "namespace", ())]
        for path in paths:
            for x in path:
                if not isinstance(x, str) or not x or "." in x or "\x00" in x:
                    raise _InvalidNamespace(
                        f"namespace {tuple(path)!r} refused: a label is a non-empty str without '.' or NUL"
                    )
    return ops


def _compare(item_value: Any, filter_value: Any) -> bool:
    """LangGraph's filter semantics (as its in-memory and Postgres stores apply them)."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_operator(item_value, k, v) for k, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(_compare(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (
            isinstance(item_value, (list, tuple))
            and len(item_value) == len(filter_value)
            and all(_compare(a, b) for a, b in zip(item_value, filter_value, strict=True))
        )
    return bool(item_value == filter_value)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(operand)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]
    raise ConfigError(f"unsupported filter operator {operator!r}: use $eq, $ne, $gt, $gte, $lt or $lte")


def _equal_to(value: Any) -> Any:
    """A memkit condition holding wherever Python's ``item == value`` (LangGraph's equality) holds."""
    if isinstance(value, bool) or (type(value) in (int, float) and value in (0, 1)):
        # 1 == True in Python; memkit's equality never mixes numbers and booleans.
        return {"$in": [value, int(value) if isinstance(value, bool) else bool(value)]}
    return value


def _scalar(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    # An int memkit's filters cannot hold (beyond 64 bits) stays unpushed, compared by _compare.
    return value is None or isinstance(value, (str, bool)) or (isinstance(value, int) and -(2**63) <= value < 2**63)


def _pushed(filter_: Mapping[str, Any] | None, path: tuple[str, ...] = ("lg_value",)) -> dict[str, Any]:
    """A memkit filter that keeps every item the LangGraph filter keeps (and few others), so the
    database narrows and memkit ranks within what passes; the result is checked again with
    LangGraph's own semantics (:func:`_compare`). Lists and keys memkit cannot name stay unpushed."""
    pushed: dict[str, Any] = {}
    for key, want in (filter_ or {}).items():
        if not isinstance(key, str) or not _IDENT.match(key) or len(path) >= _FILTER_DEPTH:
            continue
        where = (*path, key)
        name = ".".join(where)
        if isinstance(want, Mapping) and any(str(k).startswith("$") for k in want):
            condition: dict[str, Any] = {}
            for operator, operand in want.items():
                if operator == "$eq" and _scalar(operand):
                    equal = _equal_to(operand)
                    condition.update(equal if isinstance(equal, dict) else {"$eq": equal})
                elif operator == "$ne" and _scalar(operand):
                    # memkit's $ne keeps a missing key, as LangGraph's does (None != operand), and
                    # excludes no more than it: 1 only, where LangGraph's excludes True too.
                    condition["$ne"] = operand
                elif operator in ("$gt", "$gte", "$lt", "$lte") and type(operand) in (int, float) and _scalar(operand):
                    condition[operator] = operand
            if condition:
                pushed[name] = condition
        elif isinstance(want, Mapping):
            pushed.update(_pushed(want, where))
        elif _scalar(want):
            pushed[name] = _equal_to(want)
    return pushed


def _path_range(prefix: tuple[str, ...]) -> dict[str, Any]:
    """A filter on ``lg_path`` keeping every item under ``prefix`` (its path, or its path and a dot
    and more) and few others; the stores find those through their index of ``lg_path``."""
    if not prefix:
        return {}
    path = ".".join(prefix)
    return {"lg_path": {"$gte": path, "$lt": path + "/"}}  # "/" is the character after "."


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    pairs = zip(namespace, path, strict=False) if condition.match_type == "prefix" else zip(
        reversed(namespace), reversed(path), strict=False
    )
    return all(p == "*" or n == p for n, p in pairs)


class _LangChainEmbedder:
    """A LangChain ``Embeddings`` (LangGraph's ``IndexConfig['embed']``) as a memkit embedder."""

    def __init__(self, embeddings: Any, dims: int) -> None:
        self._embeddings = embeddings
        self.dim = dims
        self.name = f"langgraph:{type(embeddings).__name__}:{dims}"

    def embed(self, texts: Any) -> Any:
        import numpy as np

        matrix = np.asarray(self._embeddings.embed_documents(list(texts)), dtype=np.float32).reshape(-1, self.dim)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms == 0, 1, norms)


def _embedder(index: Mapping[str, Any] | None) -> _LangChainEmbedder:
    from langgraph.store.base.embed import ensure_embeddings

    assert index is not None
    dims = index.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims <= 0:
        raise ConfigError(f"IndexConfig['dims'] must be a positive int with 'embed', got {dims!r}")
    return _LangChainEmbedder(ensure_embeddings(index["embed"]), dims)


class MemkitStore(BaseStore):
    """A LangGraph ``BaseStore`` over a memkit store, inside one memkit namespace.

    Parameters
    ----------
    store
        A memkit URL (``"sqlite:///memory.db"``, ``"memory://"``, ``"falkordb://..."``), a
        :class:`memkit.Memory` or a provider.
    user_id, agent_id
        The memkit namespace every item of this store lives in.
    index
        LangGraph's ``IndexConfig``: ``fields`` (the JSON paths whose text memkit ranks) is
        honoured; ``embed`` and ``dims`` become the memkit store's embedder when ``store`` is a
        URL (a store already open keeps its own, and ``embed`` is then refused).
    workflow_id
        What searches made outside any memkit step are recorded under in the recall audit.
    search_mode
        How ``search(query=...)`` ranks: ``"hybrid"`` (keyword and semantic legs fused, the
        default where the store has an embedder), ``"semantic"`` (vectors only, as LangGraph's own
        stores rank, and cheaper: no keyword leg) or ``"keyword"``.
    """

    supports_ttl: bool = False

    def __init__(
        self,
        store: str | Memory | MemoryProvider | None = None,
        *,
        user_id: str = "langgraph",
        agent_id: str = "langgraph",
        index: IndexConfig | None = None,
        workflow_id: str = "langgraph",
        ttl: Any = None,
        search_mode: str | None = None,
    ) -> None:
        if ttl is not None:
            raise ConfigError(
                "MemkitStore keeps no TTL (supports_ttl is False): memories stay until deleted; pass ttl=None"
            )
        if index is not None:
            if not isinstance(index, Mapping):
                raise ConfigError(f"index must be a LangGraph IndexConfig dict, got {type(index).__name__}")
            unknown = set(index) - {"dims", "embed", "fields"}
            if unknown:
                raise ConfigError(f"IndexConfig has fields MemkitStore does not know: {sorted(unknown)}")
        embed = (index or {}).get("embed")
        self._owns = isinstance(store, str) or store is None
        if store is None or isinstance(store, str):
            from memkit._sync import open as open_store

            url = store or "memory://"
            self._memory = open_store(url if embed is None else {"url": url, "embedder": _embedder(index)})
        elif embed is not None:
            raise ConfigError(
                "IndexConfig['embed'] applies when MemkitStore opens the store from a URL; a store already"
                " open ranks with its own embedder (leave 'embed' out)"
            )
        elif isinstance(store, Memory):
            self._memory = store
        else:
            self._memory = Memory(provider_of(store))
        self._provider = self._memory.provider
        if not isinstance(self._provider, SupportsAddMany) or not getattr(self._provider, "keeps_given_ids", True):
            if self._owns:
                self._memory.close()
            raise ConfigError(
                f"MemkitStore cannot write to {type(self._provider).__name__}: a LangGraph item is found again by"
                " the id its namespace and key give it, and this store assigns every id itself (Mem0) or cannot"
                " write with ids (no add_many); use SQLite, memory://, Postgres, FalkorDB or Neo4j"
            )
        from memkit._core._validate import check_namespace

        self.user_id, self.agent_id = check_namespace(user_id, agent_id)
        self.workflow_id = workflow_id
        modes = getattr(self._provider, "search_modes", ("keyword", "semantic", "hybrid"))
        if search_mode is not None and search_mode not in modes:
            if self._owns:
                self._memory.close()
            raise ConfigError(f"search_mode must be one of {', '.join(modes)} for this store, got {search_mode!r}")
        self.search_mode = search_mode
        fields = list((index or {}).get("fields") or ["$"])
        self.index_config = index
        self._fields = [(f, tokenize_path(f) if f != "$" else f) for f in fields]
        self._limit = int(getattr(getattr(self._provider, "limits", None), "max_limit", 10_000))
        self._get_now: Callable[[str], Record | None] | None = getattr(self._provider, "get_now", None)

    def __repr__(self) -> str:
        return f"MemkitStore({type(self._provider).__name__}, user_id={self.user_id!r}, agent_id={self.agent_id!r})"

    def close(self) -> None:
        """Close the memkit store if this object opened it from a URL."""
        if self._owns:
            self._memory.close()

    def __enter__(self) -> MemkitStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- LangGraph's two entry points ----------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = _checked(ops)
        gets = [op for op in ops if isinstance(op, GetOp)]
        if self._get_now is not None and ops and len(gets) == len(ops):
            # Gets only (LangGraph's store.get): read in this thread where the store can, since the
            # hand-over to memkit's loop and back costs several times the read.
            try:
                return [self._got(self._get_now(self._id(tuple(op.namespace), str(op.key)))) for op in gets]
            except NotImplementedError:
                pass
        return call(self._provider, _run_batch, self, ops)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        # The provider lives on memkit's loop (the graph drivers are bound to it): run there.
        return await asyncio.wrap_future(submit(self._batch(_checked(ops))))

    # -- the operations ------------------------------------------------------------------------

    def _id(self, namespace: tuple[str, ...], key: str) -> str:
        # Bound to this store's memkit namespace: computable, so another namespace could otherwise
        # take an item's id before its first put and make that put fail.
        digest = hashlib.sha256(json.dumps([list(namespace), key]).encode()).hexdigest()
        return bound_id(self.user_id, self.agent_id, f"lg-{digest[:40]}")

    async def _batch(self, ops: list[Op]) -> list[Result]:
        # As LangGraph's SqliteStore: every put is checked before anything runs, the reads answer
        # from the store as it was before the batch, then the puts (the last one per key) are
        # written together, replacing, never deleting first.
        results: list[Result] = [None] * len(ops)
        puts: dict[_Place, PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), str(op.key))] = op
            elif not isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                raise ConfigError(f"unknown LangGraph operation {type(op).__name__}")
        now = datetime.now(UTC).isoformat()
        olds = await self._fetch_all(list(puts)) if puts else {}
        rows = {place: self._row(place[0], place[1], op, now, olds[place]) for place, op in puts.items()}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[i] = await self._get(tuple(op.namespace), str(op.key))
            elif isinstance(op, SearchOp):
                results[i] = await self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[i] = await self._list_namespaces(op)
        if rows:
            await self._apply_puts(rows, olds)
        return results

    def _item(self, memory: MemoryItem | Record, score: float | None = None, *, search: bool = False) -> Item:
        meta = memory.metadata
        kwargs = {
            "namespace": tuple(meta["lg_ns"]),
            "key": meta["lg_key"],
            "value": meta["lg_value"],
            "created_at": datetime.fromisoformat(meta["lg_created_at"]),
            "updated_at": datetime.fromisoformat(meta["lg_updated_at"]),
        }
        return SearchItem(**kwargs, score=score) if search else Item(**kwargs)

    def _mine(self, memory: MemoryItem | Record | None) -> bool:
        return (
            memory is not None
            and memory.user_id == self.user_id
            and memory.agent_id == self.agent_id
            and memory.metadata.get("type") == _KIND
        )

    async def _fetch_all(self, places: list[_Place]) -> dict[_Place, MemoryItem | Record | None]:
        ids = {place: self._id(*place) for place in places}
        provider, found = self._provider, cast("dict[str, MemoryItem | Record] | None", None)
        if self._get_now is not None:
            # Read here where the store can: a put reads the item it replaces, and waiting for the
            # store's worker once an item costs more than the read.
            with contextlib.suppress(NotImplementedError):
                found = {i: now for i in ids.values() if (now := self._get_now(i)) is not None}
        if found is None:
            if isinstance(provider, SupportsGet):
                found = {i: item for i in ids.values() if (item := await provider.get(i)) is not None}
            else:
                found = {i: hits[0] for i in ids.values() if (hits := await provider.get_all(
                    self.user_id, self.agent_id, 1, {"type": _KIND, "lg_id": i}))}
        return {place: got if self._mine(got := found.get(i)) else None for place, i in ids.items()}

    async def _get(self, namespace: tuple[str, ...], key: str) -> Item | None:
        found = (await self._fetch_all([place := (namespace, key)]))[place]
        return None if found is None else self._item(found)

    def _got(self, found: Record | None) -> Item | None:
        return self._item(found) if found is not None and self._mine(found) else None

    def _text(self, value: dict[str, Any], index: Any) -> str:
        if index is None:
            paths = self._fields
        elif index is False:
            paths = []
        else:
            paths = [(p, tokenize_path(p) if p != "$" else p) for p in index]
        texts: list[str] = []
        for path, tokens in paths:
            if path == "$":
                texts.append(json.dumps(value, ensure_ascii=False, sort_keys=True, allow_nan=False))
            else:
                texts.extend(get_text_at_path(value, tokens))
        return "\n".join(t for t in texts if t)

    def _row(
        self, namespace: tuple[str, ...], key: str, op: PutOp, now: str, old: MemoryItem | Record | None
    ) -> tuple[dict[str, Any], Record] | None:
        """The memory a put writes, and it checked as memkit checks it (``None``: a delete)."""
        if len(namespace) > _MAX_DEPTH:
            raise ConfigError(f"namespace {namespace!r} is deeper than {_MAX_DEPTH} labels")
        if not namespace:  # the labels are checked already (_checked)
            raise _InvalidNamespace(f"put {namespace!r}, {key!r} refused: a namespace has one label or more")
        if op.value is None:
            return None
        if not isinstance(op.value, dict):
            raise ConfigError(f"a LangGraph value must be a dict, got {type(op.value).__name__}")
        memory_id = self._id(namespace, key)
        meta: dict[str, Any] = {
            "type": _KIND,
            "lg_id": memory_id,
            "lg_ns": list(namespace),
            "lg_path": ".".join(namespace),
            "lg_depth": len(namespace),
            "lg_key": key,
            "lg_value": op.value,
            "lg_created_at": now if old is None else old.metadata["lg_created_at"],
            "lg_updated_at": now,
        }
        meta.update({f"lg_ns_{i}": label for i, label in enumerate(namespace)})
        try:
            text = self._text(op.value, op.index)
            if not text:  # LangGraph scores no item it has no text of (score None)
                meta["lg_indexed"] = False
            row = {
                "id": memory_id, "content": text or "(not indexed)",
                "user_id": self.user_id, "agent_id": self.agent_id, "metadata": meta,
            }
            [record] = records_from_items([row], getattr(self._provider, "limits", DEFAULT_LIMITS))
        except (InvalidInputError, TypeError, ValueError) as exc:
            reason = str(exc).removeprefix("item 0 of add_many: ")
            raise InvalidInputError(f"put {namespace!r}, {key!r} refused: {reason}") from None
        return row, record

    async def _apply_puts(
        self, rows: dict[_Place, tuple[dict[str, Any], Record] | None], olds: dict[_Place, MemoryItem | Record | None]
    ) -> None:
        provider = self._provider
        for place, row in rows.items():
            old = olds[place]
            if row is None and old is not None:
                await provider.delete(old.id, user_id=self.user_id, agent_id=self.agent_id)
        written = [row for row in rows.values() if row is not None]
        if not written:
            return
        if isinstance(provider, Store):  # the records are checked already: written as they are
            await provider.execute(WriteOp(tuple(record for _, record in written), replace=True))
        else:
            assert isinstance(provider, SupportsAddMany)  # refused when the store opened otherwise
            await provider.add_many([row for row, _ in written], replace=True)

    def _prefix_filter(self, prefix: tuple[str, ...]) -> dict[str, Any]:
        found: dict[str, Any] = {"type": _KIND, **_path_range(prefix)}
        found.update({f"lg_ns_{i}": label for i, label in enumerate(prefix)})
        return found

    async def _listed(
        self, filters: dict[str, Any], prefix: tuple[str, ...], filter_: Mapping[str, Any] | None,
        want: int, skip: set[str],
    ) -> list[MemoryItem]:
        """The first ``want`` items under the filters, newest first (a replaced item is a new memory, so
        memkit's order is LangGraph's ``updated_at`` order), leaving out ``skip``; reads pages only as
        far as it needs."""
        provider = self._provider
        if not isinstance(provider, SupportsPaging):
            return self._kept(await provider.get_all(self.user_id, self.agent_id, self._limit, filters),
                              prefix, filter_, skip)[:want]
        out: list[MemoryItem] = []
        offset, size = 0, min(_PAGE, want + len(skip))
        while size:
            page = await provider.get_page(self.user_id, self.agent_id, offset=offset, limit=size, filters=filters)
            out.extend(self._kept(page, prefix, filter_, skip))
            if len(out) >= want or len(page) < size:
                break
            offset += size
            size = min(_PAGE, size * 4)
        return out[:want]

    async def _ranked(
        self, query: str, filters: dict[str, Any], prefix: tuple[str, ...], filter_: Mapping[str, Any] | None,
        want: int,
    ) -> list[MemoryItem]:
        """memkit's ranking of ``query`` within the filters, the first ``want`` that pass ``filter_``."""
        limit = min(self._limit, max(want, 10))
        while True:
            mode = {} if self.search_mode is None else {"mode": self.search_mode}
            if current_scope() is None:
                with recall_scope(self.workflow_id, step="store.search"):
                    hits = await self._provider.search(query, self.user_id, self.agent_id, limit, filters, **mode)
            else:
                hits = await self._provider.search(query, self.user_id, self.agent_id, limit, filters, **mode)
            kept = self._kept(hits, prefix, filter_, set())
            # A part of the filter memkit could not take (a list, an odd key) may drop hits: ask for more.
            if len(kept) >= want or len(hits) < limit or limit >= self._limit:
                return kept[:want]
            limit = min(self._limit, limit * 4)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        # The caller's filter first: the stores test conditions in order, and it, not the prefix
        # every item under the namespace passes, is what drops most rows.
        filters = {**_pushed(op.filter), **self._prefix_filter(prefix)}
        want = op.offset + op.limit
        found = await self._ranked(op.query, filters, prefix, op.filter, want) if op.query else []
        scored = {m.id for m in found}
        if len(found) < want:
            # LangGraph's stores return every item under the prefix that passes the filter, ranked
            # ones first; memkit's retrieval returns only matches, so the rest follow, newest first.
            found.extend(await self._listed(filters, prefix, op.filter, want - len(found), scored))
        items = []
        for m in found[op.offset : want]:
            score: float | None = None
            if op.query and m.metadata.get("lg_indexed", True):
                # LangGraph gives every indexed item a float score: one memkit's retrieval did not
                # find is below every one it did.
                score = float(m.score) if m.id in scored and m.score is not None else 0.0
            items.append(self._item(m, score, search=True))
        return items  # type: ignore[return-value]

    def _kept(
        self, hits: list[MemoryItem], prefix: tuple[str, ...], filter_: Mapping[str, Any] | None, skip: set[str]
    ) -> list[MemoryItem]:
        return [
            m for m in hits
            if m.id not in skip and self._mine(m) and tuple(m.metadata["lg_ns"])[: len(prefix)] == prefix
            and all(_compare(m.metadata["lg_value"].get(k), v) for k, v in (filter_ or {}).items())
        ]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        filters: dict[str, Any] = {"type": _KIND}
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                filters.update({f"lg_ns_{i}": label for i, label in enumerate(condition.path) if label != "*"})
                leading = tuple(condition.path)[: [*condition.path, "*"].index("*")]
                filters.update(_path_range(leading))
        provider = self._provider
        if isinstance(provider, Store):
            # The distinct paths, from the store's index of them (labels hold no dot: see _row).
            found = await provider.execute(
                ValuesOp(self.user_id, self.agent_id, parse_filters(filters), ("lg_path",))
            )
            seen = {tuple(path.split(".")) for path in found if isinstance(path, str)}
        else:
            seen = {tuple(m.metadata["lg_ns"]) for m in await self._listed(filters, (), None, 2**62, set())}
        namespaces = [ns for ns in seen if all(_does_match(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            namespaces = sorted({ns[: op.max_depth] for ns in namespaces})
        else:
            namespaces = sorted(namespaces)
        return namespaces[op.offset : op.offset + op.limit]


async def _run_batch(provider: MemoryProvider, store: MemkitStore, ops: list[Op]) -> list[Result]:
    """``store``'s operations, for :func:`memkit._sync.call` (``provider`` is the store's own)."""
    return await store._batch(ops)
