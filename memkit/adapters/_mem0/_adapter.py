"""Mem0 (``mem0ai==2.2.1``) behind the port: a local, offline OSS store or the hosted service.

OSS mode runs mem0's own ``Memory`` on a local Qdrant folder with memkit's shipped
embedder (or any memkit embedder, handed to mem0 through its ``langchain`` provider, so
no torch is needed); nothing leaves the machine (telemetry off, Hugging Face offline,
no LLM call because adds pass ``infer=False``). Cloud mode talks to
the Mem0 platform through mem0's ``MemoryClient``.

How the port maps onto mem0 (see docs/mem0.md):

- Ids and payloads: see :mod:`memkit.adapters._mem0._backend`, which holds every call into mem0.
- Search runs the shared pipeline (:mod:`memkit.store._search`): mem0's similarity is the one
  (semantic) leg, so scores, ties and ``score_details`` are those of every other store.
- Filters use the reference semantics (:func:`memkit._core._filters.matches`) on
  mem0's results; ordering is done here, because mem0's listing is unordered.
- mem0's calls are blocking; each adapter runs them on its own worker thread.
"""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar, Unpack
from urllib.parse import urlsplit

from memkit._core._errors import BackendUnavailableError, ConfigError, InvalidInputError, MemkitError, StorageError
from memkit._core._filters import Condition, matches
from memkit._core._models import MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._core._recalls import Mark, Recall
from memkit._core._records import Record, namespace_infos, now_us
from memkit._core._url import bool_option, query_options
from memkit._core._validate import DEFAULT_LIMITS, Limits
from memkit._retrieval._fusion import DenseScores
from memkit.adapters._mem0._backend import (
    DEFAULT_COLLECTION,
    PAYLOAD_KEY,
    Backend,
    Mem0Memory,
    Opened,
    Row,
    connect,
    encode_id,
    newest_first,
    redact,
    row_of,
)
from memkit.adapters._mem0._seed import seed_options
from memkit.adapters._plumbing import Worker
from memkit.embeddings import Embedder
from memkit.store import _ops as ops
from memkit.store import _search as _pipeline
from memkit.store._base import Store

if TYPE_CHECKING:
    from memkit.adapters._sqlite import SQLiteAdapter

__all__ = ["Mem0Adapter"]

T = TypeVar("T")

_RECALLS_FILE = "memkit-recalls.db"
_SCORE_DIGITS = 7



# -- the adapter ----------------------------------------------------------------------------------


class Mem0Options(TypedDict, total=False):
    """The keywords :class:`Mem0Adapter` takes besides its path (what ``from_url`` passes on)."""

    mode: str
    api_key: str | None
    base_url: str | None
    config: Mapping[str, Any] | None
    embedder: object  # a name, an Embedder, or None (see memkit.embeddings.get_embedder)
    collection: str
    llm: Mapping[str, Any] | None
    infer: bool
    threshold: float
    memory: Mem0Memory | None
    limits: Limits
    record_recalls: bool
    recalls_path: str | os.PathLike[str] | None
    oss: Mapping[str, Any] | None
    cloud: Mapping[str, Any] | None
    enabled: bool


class Mem0Adapter(Store):
    """Memories in Mem0: a local offline store (OSS mode) or the Mem0 platform (cloud mode).

    Parameters
    ----------
    path
        OSS mode: the folder for the local Qdrant store, mem0's history database and
        mem0's home files. Default ``data/mem0``. Or seed 002's whole config
        (``Mem0Adapter(cfg)``, a ``DictConfig`` or a dict; see ``oss``).
    mode
        ``"oss"`` (default) or ``"cloud"``.
    api_key, base_url
        Cloud mode: the Mem0 API key (default ``$MEM0_API_KEY``) and API base URL
        (default ``https://api.mem0.ai``). Never shown in reprs or errors.
    config
        OSS mode: a complete ``mem0.Memory.from_config`` dict instead of the offline
        default built by :func:`oss_config` (then nothing is promised about the network).
    embedder, collection
        OSS mode: the embedder (``"default"``: memkit's shipped static model, numpy
        only; ``"st:/folder"`` for a sentence-transformers model, needs
        ``memkit[embeddings]``; or an :class:`~memkit.embeddings.Embedder`) and the
        Qdrant collection name. The folder records the embedder and refuses another;
        left out, an existing folder keeps what it records.
    llm
        OSS mode: mem0's ``llm`` config section. Only used when ``infer=True``.
    infer
        Let mem0's LLM rewrite each add into extracted facts (needs a real ``llm``,
        calls it over the network, and may store several memories per add: ``add``
        returns the first id; refused unless ``llm`` or ``config`` is given). Default
        ``False``: the content is stored verbatim, one memory per add.
    threshold
        Minimum semantic similarity for a search hit (mem0's ``threshold``, 0..1).
        Default 0.1, mem0's own: with MiniLM, unrelated texts score about -0.1..0.1.
    memory
        An existing ``mem0.Memory`` or ``mem0.MemoryClient`` to wrap; the adapter
        then does not close it.
    limits
        Input bounds (see :class:`memkit.Limits`).
    record_recalls
        Record searches made outside any step scope as recalls too (URL
        ``?record_recalls=true``); inside a step they are always recorded. See
        :class:`memkit.SupportsRecalls`.
    recalls_path
        The SQLite file that keeps recalls. OSS mode: ``memkit-recalls.db`` in the
        folder. Cloud mode, or a wrapped ``memory`` without ``path``: none unless
        given (then recalls are not kept, with a warning when a step's search would
        have recorded one). mem0 has no place
        for them: its history database belongs to mem0 (and ``reset`` drops it),
        and its vector store holds memories only.

    oss, cloud, enabled
        Seed 002's config sections, as ``get_memory_provider`` passes them on:
        ``oss: {vector_store, graph_store, llm, embedding}`` and ``cloud: {api_key,
        base_url}``. A Qdrant ``vector_store`` gives the folder and collection; a
        ``graph_store``, or another vector store, is a ConfigError saying why (see
        docs/mem0.md).

    Examples
    --------
    >>> mem = Mem0Adapter("data/mem0")                              # doctest: +SKIP
    >>> await mem.add("TP53 is mutated in sample 7", "u1", "bio")   # doctest: +SKIP
    """

    provider_name = "mem0"
    # Recalls and marks live in the recall file (``recalls_path``); without one they read as none.
    supports_as_of = True
    health_failures = (StorageError, BackendUnavailableError)
    keeps_given_ids = False  # mem0 assigns ids itself

    def __init__(
        self,
        path: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        *,
        mode: str = "oss",
        api_key: str | None = None,
        base_url: str | None = None,
        config: Mapping[str, Any] | None = None,
        embedder: object = None,
        collection: str = DEFAULT_COLLECTION,
        llm: Mapping[str, Any] | None = None,
        infer: bool = False,
        threshold: float = 0.1,
        memory: Mem0Memory | None = None,
        limits: Limits = DEFAULT_LIMITS,
        record_recalls: bool = False,
        recalls_path: str | os.PathLike[str] | None = None,
        oss: Mapping[str, Any] | None = None,
        cloud: Mapping[str, Any] | None = None,
        enabled: bool = True,
    ) -> None:
        super().__init__(limits=limits, record_recalls=record_recalls)
        seed = {"mode": mode, "oss": oss, "cloud": cloud, "enabled": enabled}
        if isinstance(path, Mapping) or oss is not None or cloud is not None or enabled is not True:
            # Seed 002's shape: Mem0Adapter(cfg), or its sections through get_memory_provider.
            found = seed_options(path if isinstance(path, Mapping) else seed)
            path, mode = found.get("path"), found["mode"]
            api_key, base_url = api_key or found.get("api_key"), base_url or found.get("base_url")
            llm, embedder = llm or found.get("llm"), embedder if embedder is not None else found.get("embedder")
            collection = found.get("collection", collection)
        if mode not in ("oss", "cloud"):
            raise ConfigError(f"mode must be 'oss' or 'cloud', got {mode!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a number between 0 and 1, got {threshold!r}")
        if infer and mode == "oss" and llm is None and config is None and memory is None:
            raise ConfigError("infer=True needs a real LLM: pass llm={...} (mem0's llm section) or config")
        self.mode = mode
        self.infer = infer
        self.threshold = float(threshold)
        self.path: str | None = None
        self._embedder: Embedder | None = None
        self._secrets: list[str] = []
        self._worker = Worker("memkit-mem0", self.__repr__, translate=self._memkit_error)
        self._recall_store: SQLiteAdapter | None = None
        self._warned_recalls = False
        try:
            opened = Opened(mode, secrets=self._secrets)
            try:
                self._backend: Backend = connect(
                    opened, self._worker.call, path, api_key, base_url, config, embedder, collection, llm, memory
                )
            finally:
                self.path, self._embedder = opened.path, opened.embedder
            # A wrapped mem0 object without a folder of ours gets no file we were not asked for.
            if recalls_path is None and self.mode == "oss" and (path is not None or memory is None):
                recalls_path = Path(str(self.path)) / _RECALLS_FILE
            if recalls_path is not None:
                from memkit.adapters._sqlite import SQLiteAdapter

                self._recall_store = SQLiteAdapter(recalls_path, embedder=None, limits=limits)
        except BaseException:
            with contextlib.suppress(Exception):  # the error that stopped the opening is the one to see
                self._worker.close(self._release)
            raise

    @property
    def embedder(self) -> Embedder | None:
        """The embedder memkit handed mem0 (OSS mode with memkit's config); ``None`` otherwise."""
        return self._embedder

    @classmethod
    def from_url(cls, url: str, **options: Unpack[Mem0Options]) -> Mem0Adapter:
        """``mem0:///rel/dir``, ``mem0:////abs/dir`` (OSS) or ``mem0+cloud://host[:port][/prefix]`` (cloud).

        The cloud URL is turned into ``https://host...`` (``?tls=0`` for http); the API
        key comes from ``api_key=`` or ``$MEM0_API_KEY``, never from the URL.
        """
        parts = urlsplit(url)
        query = query_options(url)
        if parts.username or parts.password:
            raise ConfigError("do not put credentials in a mem0 URL: pass api_key=... or set MEM0_API_KEY")
        if parts.scheme == "mem0":
            if parts.netloc:
                raise ConfigError("mem0:// URLs have no host: use mem0:///relative/dir or mem0:////absolute/dir")
            if "embedder" in query:
                spec = query.pop("embedder")
                if spec.lower() == "none":
                    raise ConfigError("a mem0 store always embeds: ?embedder=none is not an option for mem0://")
                options.setdefault("embedder", spec)
            if "record_recalls" in query:
                options.setdefault("record_recalls", bool_option("record_recalls", query.pop("record_recalls")))
            if query:
                raise ConfigError(f"unknown mem0:// URL options: {', '.join(sorted(query))}")
            path = parts.path[1:] if parts.path.startswith("/") else parts.path
            return cls(path or None, **options)
        if parts.scheme == "mem0+cloud":
            tls = query.pop("tls", "1")
            if query:
                raise ConfigError(f"unknown mem0+cloud:// URL options: {', '.join(sorted(query))}")
            if not parts.netloc:
                raise ConfigError("mem0+cloud:// needs a host, e.g. mem0+cloud://api.mem0.ai")
            scheme = "http" if tls in ("0", "false", "no") else "https"
            options.setdefault("base_url", f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}")
            options.setdefault("mode", "cloud")
            return cls(**options)
        raise ConfigError(f"not a mem0 URL: {parts.scheme}://...")

    def __repr__(self) -> str:
        where = self.path if self.mode == "oss" else urlsplit(self.path or "").netloc
        return f"Mem0Adapter(mode={self.mode!r}, {where!r})"

    # -- running mem0 off the event loop -------------------------------------------------------

    def _memkit_error(self, exc: Exception) -> MemkitError | None:
        if isinstance(exc, MemkitError):
            return None
        if isinstance(exc, ImportError):
            return BackendUnavailableError(f"mem0 needs a package that is missing: {exc}")
        message = redact(f"{type(exc).__name__}: {exc}", self._secrets)
        return StorageError(f"mem0 failed ({self.mode}): {message}")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await self._worker.run(fn, *args)

    # -- writes ------------------------------------------------------------------------------------

    @staticmethod
    def _payload(record: Record) -> dict[str, Any]:
        return {
            PAYLOAD_KEY: {
                "v": 1,
                "user_id": record.user_id,
                "agent_id": record.agent_id,
                "metadata": record.metadata,
                "created_us": record.created_us,
                "seq": now_us(),
            },
            # mem0 keeps a payload created_at instead of stamping its own: one clock for both.
            "created_at": record.created_at.isoformat(),
        }

    def _add_all(self, records: Sequence[Record], progress: bool = False) -> list[str]:
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(records), desc="add_many", unit="mem")
        written: list[str] = []
        try:
            for record in records:
                written.append(
                    self._backend.add(
                        record.content, encode_id(record.user_id), encode_id(record.agent_id),
                        self._payload(record), self.infer,
                    )
                )
                if bar is not None:
                    bar.update(1)
        except BaseException:
            # mem0 has no transactions: undo what this call wrote so the batch is all or nothing.
            for memory_id in written:
                try:
                    self._backend.delete(memory_id)
                except Exception:  # keep undoing the rest; the original error is what matters
                    continue
            raise
        finally:
            if bar is not None:
                bar.close()
        return written

    async def _write(self, op: ops.WriteOp) -> list[str]:
        return await self._run(self._add_all, op.records, op.progress)

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False, replace: bool = False
    ) -> list[str]:
        """Validate every item, then add them one by one (mem0 embeds one text per add).

        mem0 assigns ids itself, so items may not carry an ``id``. A backend failure
        part-way deletes what this call already wrote.
        """
        items = list(items)
        for index, raw in enumerate(items):
            given = raw.id if isinstance(raw, NewMemory) else (raw.get("id") if isinstance(raw, Mapping) else None)
            if given is not None:
                raise InvalidInputError(
                    f"item {index} of add_many has an id: mem0 assigns ids itself, leave 'id' out"
                )
        return await super().add_many(items, progress=progress, replace=replace)

    def _delete_blocking(self, op: ops.DeleteOp) -> bool:
        row = self._get_blocking(op.memory_id)
        if row is None:
            return False
        if op.user_id not in (None, row.record.user_id) or op.agent_id not in (None, row.record.agent_id):
            return False
        self._backend.delete(op.memory_id)
        return True

    async def _delete(self, op: ops.DeleteOp) -> bool:
        return await self._run(self._delete_blocking, op)

    async def _reset(self, op: ops.ResetOp) -> None:
        """Every memory of this store: all namespaces, like mem0's own ``reset`` (OSS mode wipes this
        folder's collection and mem0's history database; cloud mode every user, agent and run of the
        API key's project), and the recall file's recalls and marks."""
        await self._run(self._backend.reset)
        if self._recall_store is not None:
            await self._recall_store.reset()

    # -- reads ---------------------------------------------------------------------------------------

    def _namespace_rows(
        self, user: str, agent: str, conditions: tuple[Condition, ...] = (), until_us: int | None = None
    ) -> list[Row]:
        raw = self._backend.listing({"user_id": encode_id(user), "agent_id": encode_id(agent)})
        kept = [
            r for r in map(row_of, raw)
            if r is not None and (r.record.user_id, r.record.agent_id) == (user, agent)
            and matches(conditions, r.record.metadata) and (until_us is None or r.record.created_us <= until_us)
        ]
        return newest_first(kept)

    def _all_rows(self) -> list[Row]:
        # "*" is mem0's wildcard; real ids never reach mem0 as "*" (see encode_id).
        return [r for r in map(row_of, self._backend.listing({"user_id": "*"})) if r is not None]

    async def _list(self, op: ops.ListOp) -> list[Record]:
        """The namespace newest first (mem0 lists it whole and unordered: memkit orders it)."""
        rows = await self._run(self._namespace_rows, op.user_id, op.agent_id, op.conditions, op.until_us)
        return [r.record for r in rows[op.offset : op.offset + op.limit]]

    def _candidates(self, op: ops.SearchOp) -> list[Row]:
        """mem0's ranking of the namespace, kept to the memories that pass the filters and
        ``as_of``, best first (ties newest first): widened until ``limit`` pass or mem0 runs dry."""
        scope = {"user_id": encode_id(op.user_id), "agent_id": encode_id(op.agent_id)}
        top_k = op.limit
        while True:
            raw = self._backend.search(op.query, scope, top_k, self.threshold)
            hits: list[Row] = []
            for found in raw:
                row = row_of(found)
                if row is None or (row.record.user_id, row.record.agent_id) != (op.user_id, op.agent_id):
                    continue
                if not matches(op.conditions, row.record.metadata):
                    continue
                if op.until_us is not None and row.record.created_us > op.until_us:
                    continue
                score = found.get("score")
                # Vectors are float32: digits past the 7th are arithmetic noise, and
                # without rounding identical texts would not tie (then newest first).
                row.score = round(float(score), _SCORE_DIGITS) if isinstance(score, (int, float)) else 0.0
                hits.append(row)
            if len(hits) >= op.limit or len(raw) < top_k:
                break
            top_k *= 4
        hits.sort(key=lambda r: (-(r.score or 0.0), -r.record.created_us, -r.seq))
        return hits

    async def _rank(self, op: ops.SearchOp) -> list[MemoryItem]:
        # mem0's similarity is the semantic leg; the shared pipeline ranks it and writes the details.
        rows = {r.record.id: r for r in await self._run(self._candidates, op)}
        dense = DenseScores({k: r.score or 0.0 for k, r in rows.items()}, list(rows), 0.0, 0.0, "index")
        ranked = _pipeline.rank(op, [], dense, lambda keys: {k: (rows[k].record.created_us, rows[k].seq)
                                                             for k in keys})
        return [rows[k].record.to_item(score, details) for k, score, details in ranked]

    @property
    def search_modes(self) -> tuple[str, ...]:
        """mem0 ranks by its own vector similarity only."""
        return ("semantic",)

    def _get_blocking(self, memory_id: str) -> Row | None:
        raw = self._backend.get(memory_id)
        return None if raw is None else row_of(raw)

    async def _get(self, op: ops.GetOp) -> Record | None:
        row = await self._run(self._get_blocking, op.memory_id)
        return None if row is None else row.record

    # -- capabilities: each lists the whole store through mem0 -------------------------------------

    async def _namespaces(self, op: ops.NamespacesOp) -> list[NamespaceInfo]:
        return namespace_infos(r.record for r in await self._run(self._all_rows))

    async def _stats(self, op: ops.StatsOp) -> Stats:
        records = [r.record for r in await self._run(self._all_rows)]
        return Stats(
            provider=self.provider_name,
            memories=len(records),
            traces=sum(1 for r in records if r.metadata.get("type") == "trace"),
            namespaces=len({(r.user_id, r.agent_id) for r in records}),
            storage_bytes=await self._run(self._folder_bytes),
            mode=self.mode,
            path=self.path if self.mode == "oss" else None,
        )

    def _folder_bytes(self) -> int | None:
        if self.mode != "oss" or self.path is None or not self._backend.owned:
            return None
        return sum(f.stat().st_size for f in Path(self.path).rglob("*") if f.is_file())

    def _ping_blocking(self) -> str:
        # A search for a namespace that cannot exist touches the embedder and the store.
        probe = encode_id(f"memkit health {uuid.uuid4().hex}")
        self._backend.search("health check", {"user_id": probe, "agent_id": probe}, 1, self.threshold)
        return f"mem0 {self.mode} answers"

    async def _ping(self, op: ops.PingOp) -> str:
        return await self._run(self._ping_blocking)

    async def _export(self, op: ops.ExportOp) -> AsyncIterator[Record]:
        """Every record (traces included), oldest first; loads the whole listing first."""
        if op.user_id is not None and op.agent_id is not None:
            rows = await self._run(self._namespace_rows, op.user_id, op.agent_id)
        else:
            rows = newest_first([
                r for r in await self._run(self._all_rows)
                if op.user_id in (None, r.record.user_id) and op.agent_id in (None, r.record.agent_id)
            ])
        for row in reversed(rows):
            yield row.record

    # -- recalls and marks, kept in a SQLite file beside mem0's (see ``recalls_path``) ---------------

    def _keep_recall(self, body: dict[str, Any]) -> None:
        if self._recall_store is not None:
            self._recall_store._keep_recall(body)
        elif not self._warned_recalls:
            self._warned_recalls = True
            warnings.warn(
                f"{self!r} keeps no recalls: open it with recalls_path=... to record what steps recalled",
                RuntimeWarning, stacklevel=3,
            )

    def _kept(self) -> SQLiteAdapter | None:
        if self._worker.closed:
            raise StorageError(f"{self!r} is closed; open the store again to use it")
        return self._recall_store

    def _kept_for(self, what: str) -> SQLiteAdapter:
        kept = self._kept()
        if kept is None:
            raise ConfigError(f"{self!r} keeps no recalls{what}: open it with recalls_path=... to keep them")
        return kept

    async def add_recalls(self, recalls: Iterable[Recall]) -> int:
        """Store recalls as given (an import), all or none; needs a recall file (``recalls_path``)."""
        self._kept_for("")  # even for none: the caller learns where recalls would go
        return await super().add_recalls(recalls)

    async def put_marks(self, marks: Iterable[Mark]) -> int:
        """Store marks (see :class:`memkit.SupportsMarks`); needs a recall file (``recalls_path``)."""
        self._kept_for(", so no marks")
        return await super().put_marks(marks)

    async def _recalls(self, op: ops.RecallsOp) -> list[Recall]:
        kept = self._kept()
        return [] if kept is None else await kept.execute(op)

    async def _add_recalls(self, op: ops.AddRecallsOp) -> int:
        return await self._kept_for("").execute(op)

    async def _marks(self, op: ops.MarksOp) -> list[Mark]:
        kept = self._kept()
        return [] if kept is None else await kept.execute(op)

    async def _put_marks(self, op: ops.PutMarksOp) -> int:
        return await self._kept_for(", so no marks").execute(op)

    async def _remove_marks(self, op: ops.RemoveMarksOp) -> int:
        kept = self._kept()
        return 0 if kept is None else await kept.execute(op)

    # -- closing ---------------------------------------------------------------------------------

    def _release(self) -> None:
        try:
            backend = getattr(self, "_backend", None)
            if backend is not None:
                backend.close()
        finally:
            if self._recall_store is not None:
                self._recall_store.close()

    async def _close(self, op: ops.CloseOp) -> None:
        """Close mem0's store (when this adapter opened it) and the recall file; again is a no-op."""
        await self._worker.aclose(self._release)

    def close(self) -> None:
        """:meth:`aclose` from sync code (no event loop needed)."""
        self._worker.close(self._release)
