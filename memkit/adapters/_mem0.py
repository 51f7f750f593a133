"""Mem0 (``mem0ai==2.2.1``) behind the port: a local, offline OSS store or the hosted service.

OSS mode runs mem0's own ``Memory`` on a local Qdrant folder with memkit's shipped
embedder (or any memkit embedder, handed to mem0 through its ``langchain`` provider, so
no torch is needed); nothing leaves the machine (telemetry off, Hugging Face offline,
no LLM call because adds pass ``infer=False``). Cloud mode talks to
the Mem0 platform through mem0's ``MemoryClient``.

How the port maps onto mem0 (see docs/mem0.md):

- Namespaces are mem0's ``user_id`` + ``agent_id``. mem0 trims ids and rejects
  whitespace, and ``"*"`` is its wildcard, so ids are escaped on the way in
  (``%``, ``*`` and whitespace become ``%XX``) and the originals are kept in the payload.
- Everything memkit knows about a memory (metadata, creation time, insertion
  order, the original ids) sits under one payload key, ``memkit``, because mem0
  reserves top-level keys such as ``role``, ``data``, ``hash`` and ``created_at``.
- Filters use the reference semantics (:func:`memkit._filters.matches`) on
  mem0's results; ordering is done here, because mem0's listing is unordered.
- mem0's calls are blocking; each adapter runs them on its own worker thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

from memkit import _marks, _recall
from memkit._errors import (
    BackendUnavailableError,
    ConfigError,
    InvalidInputError,
    MemkitError,
    StorageError,
    missing_extra,
)
from memkit._filters import Condition, matches, parse_filters
from memkit._marks import Mark
from memkit._models import Health, MemoryItem, NamespaceInfo, NewMemory, Stats
from memkit._recall import Recall, check_as_of
from memkit._records import Record, now_us, records_from_items, to_us
from memkit._retrieval import check_mode
from memkit._url import bool_option, query_options
from memkit._validate import (
    DEFAULT_LIMITS,
    Limits,
    check_id,
    check_limit,
    check_namespace,
    check_query,
    check_read,
    check_scope,
)
from memkit.adapters._plumbing import RecordWriter, Worker, namespace_infos, timed_health, trace_count
from memkit.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder

if TYPE_CHECKING:
    from memkit.adapters._sqlite import SQLiteAdapter

__all__ = ["Mem0Adapter", "decode_id", "encode_id"]

T = TypeVar("T")

PAYLOAD_KEY = "memkit"
_FIRST_PAGE = 2_048  # listing starts here and grows x8 until mem0 returns fewer than asked
_CLOUD_PAGE = 1_000
_DEFAULT_COLLECTION = "memkit"
_RECALLS_FILE = "memkit-recalls.db"
_SCORE_DIGITS = 7


# -- ids ----------------------------------------------------------------------------------------


def encode_id(value: str) -> str:
    """Escape an id for mem0: ``%``, ``*`` and whitespace become ``%XX``; the rest is unchanged.

    mem0 strips and rejects whitespace in ids, and treats ``"*"`` as "any value",
    which would let a user named ``*`` read every namespace.
    """
    out = []
    for char in value:
        if char in "%*" or char.isspace():
            out.append("".join(f"%{b:02X}" for b in char.encode("utf-8")))
        else:
            out.append(char)
    return "".join(out)


def decode_id(value: str) -> str:
    return unquote(value)


# -- environment --------------------------------------------------------------------------------


def _prepare_environment(data_dir: Path | None, offline: bool) -> None:
    """Set what mem0 and Hugging Face read at import time, before anything imports them."""
    # mem0 phones PostHog (and GitHub for notices) unless this is off when it is imported.
    os.environ["MEM0_TELEMETRY"] = "False"
    if data_dir is not None and "mem0" not in sys.modules and not os.environ.get("MEM0_DIR"):
        # mem0 keeps ~/.mem0/config.json (an anonymous id); keep it next to the store instead.
        # It is read once per process, so the first adapter's folder wins.
        os.environ["MEM0_DIR"] = str(data_dir / "mem0_home")
    if offline:
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _import_mem0() -> Any:
    try:
        import mem0
        import mem0.memory.main as mem0_main
        import mem0.memory.telemetry as mem0_telemetry
    except ImportError:
        raise missing_extra("mem0ai", "mem0") from None
    # If the caller imported mem0 before memkit could set MEM0_TELEMETRY, switch it
    # off in the loaded modules too: both flags are read at call time.
    mem0_telemetry.MEM0_TELEMETRY = False
    mem0_main.MEM0_TELEMETRY = False
    return mem0


def _langchain_embeddings(embedder: Embedder) -> Any:
    """A memkit :class:`~memkit.embeddings.Embedder` as the LangChain ``Embeddings`` mem0's
    ``langchain`` provider takes: that provider is mem0's documented way to bring an
    embedder of one's own, so mem0 runs on memkit's shipped model without torch."""
    try:
        from langchain.embeddings.base import Embeddings
    except ImportError:
        raise missing_extra("langchain", "mem0") from None

    class MemkitEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[float(x) for x in row] for row in embedder.embed(list(texts))]

        def embed_query(self, text: str) -> list[float]:
            return self.embed_documents([text])[0]

    return MemkitEmbeddings()


def oss_config(
    path: str | os.PathLike[str],
    *,
    embedder: object = "default",
    collection: str = _DEFAULT_COLLECTION,
    llm: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The mem0 ``Memory.from_config`` dict memkit uses for a local, offline store in ``path``.

    ``embedder`` is any memkit embedder option (``"default"``, ``"st:/folder"`` or an
    :class:`~memkit.embeddings.Embedder`), handed to mem0 through its ``langchain``
    provider. ``llm`` defaults to an OpenAI section with a placeholder key: mem0 always
    builds an LLM client, but never calls it for ``infer=False`` adds, searches or listings.
    """
    model = get_embedder(embedder)
    root = Path(path).expanduser()
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "path": str(root / "qdrant"),
                "collection_name": collection,
                "embedding_model_dims": model.dim,
            },
        },
        "embedder": {
            "provider": "langchain",
            "config": {"model": _langchain_embeddings(model), "embedding_dims": model.dim},
        },
        "llm": dict(llm) if llm is not None else {
            "provider": "openai",
            "config": {"api_key": "memkit-offline-placeholder", "model": "gpt-4.1-nano"},
        },
        "history_db_path": str(root / "history.db"),
    }


_MARKER = "memkit-embedder.json"


def _bind_embedder(root: Path, spec: object, collection: str) -> Embedder:
    """The embedder this folder's vectors were made with, recorded beside them.

    Vectors of two models can share a dimension and still mean nothing to each other,
    so a folder that records one embedder refuses another (as a SQLite store does), and
    a folder from before the record existed must be told which model made it.
    """
    marker = root / _MARKER
    recorded: dict[str, Any] = {}
    if marker.exists():
        try:
            recorded = json.loads(marker.read_text(encoding="utf-8")).get(collection) or {}
        except (OSError, ValueError, AttributeError) as exc:
            raise ConfigError(f"cannot read {str(marker)!r}: {exc}") from None
    if spec is None:
        if recorded:
            spec = recorded["name"] if recorded["name"] == DEFAULT_EMBEDDER else recorded.get("spec")
            if spec is None:
                raise ConfigError(
                    f"the mem0 folder {str(root)!r} was embedded with {recorded['name']!r}: pass that embedder"
                    " again (embedder=...)"
                )
        elif (root / "qdrant").exists() and not marker.exists():
            raise ConfigError(
                f"the mem0 folder {str(root)!r} records no embedder (an older memkit embedded it with"
                " all-MiniLM-L6-v2): open it with embedder='st:/path/to/all-MiniLM-L6-v2'"
            )
        else:
            spec = "default"
    model = get_embedder(spec)
    if recorded and (recorded.get("name"), recorded.get("dim")) != (model.name, model.dim):
        raise ConfigError(
            f"the mem0 folder {str(root)!r} holds vectors of {recorded.get('name')!r} ({recorded.get('dim')} dims),"
            f" not of {model.name!r} ({model.dim} dims): open it with the same embedder"
        )
    if not recorded:
        entries: dict[str, Any] = {}
        if marker.exists():
            entries = json.loads(marker.read_text(encoding="utf-8"))
        entries[collection] = {"name": model.name, "dim": model.dim,
                               "spec": spec if isinstance(spec, str) else None}
        marker.write_text(json.dumps(entries, indent=1, sort_keys=True), encoding="utf-8")
    return model


# -- the two backends: the blocking calls, nothing else ------------------------------------------


class _Backend(Protocol):
    mode: str

    def add(self, content: str, user: str, agent: str, payload: dict[str, Any], infer: bool) -> str: ...
    def get(self, memory_id: str) -> dict[str, Any] | None: ...
    def listing(self, filters: dict[str, Any]) -> list[dict[str, Any]]: ...
    def search(self, query: str, filters: dict[str, Any], top_k: int, threshold: float) -> list[dict[str, Any]]: ...
    def delete(self, memory_id: str) -> None: ...
    def reset(self) -> None: ...
    def close(self) -> None: ...


def _results(response: Any) -> list[dict[str, Any]]:
    rows = response.get("results", []) if isinstance(response, dict) else response
    return [r for r in rows or [] if isinstance(r, dict)]


class _OSSBackend:
    mode = "oss"

    def __init__(self, memory: Any, owned: bool) -> None:
        self.memory = memory
        self.owned = owned

    def add(self, content: str, user: str, agent: str, payload: dict[str, Any], infer: bool) -> str:
        response = self.memory.add(content, user_id=user, agent_id=agent, metadata=payload, infer=infer)
        # infer=False stores exactly one; with inference mem0's LLM may store several
        # facts (the port returns the first) or none (an error: nothing was remembered).
        rows = [r for r in _results(response) if r.get("id") and r.get("event", "ADD") == "ADD"]
        if not rows:
            raise StorageError("mem0 stored nothing for this add (its LLM extracted no fact)")
        return str(rows[0]["id"])

    def get(self, memory_id: str) -> dict[str, Any] | None:
        found = self.memory.get(memory_id)
        return found if isinstance(found, dict) else None

    def listing(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        # mem0 truncates at top_k (default 20) and its qdrant listing is unordered,
        # so ordering needs the whole namespace: ask until it returns fewer than asked.
        top_k = _FIRST_PAGE
        while True:
            rows = _results(self.memory.get_all(filters=dict(filters), top_k=top_k, show_expired=True))
            if len(rows) < top_k:
                return rows
            top_k *= 8

    def search(self, query: str, filters: dict[str, Any], top_k: int, threshold: float) -> list[dict[str, Any]]:
        return _results(
            self.memory.search(query, filters=dict(filters), top_k=top_k, threshold=threshold, explain=True)
        )

    def delete(self, memory_id: str) -> None:
        self.memory.delete(memory_id)

    def reset(self) -> None:
        self.memory.reset()

    def close(self) -> None:
        if not self.owned:
            return
        self.memory.close()
        client = getattr(getattr(self.memory, "vector_store", None), "client", None)
        if client is not None:
            client.close()  # releases the local Qdrant folder lock for the next opener


class _CloudBackend:
    mode = "cloud"

    def __init__(self, client: Any, owned: bool) -> None:
        self.client = client
        self.owned = owned

    def add(self, content: str, user: str, agent: str, payload: dict[str, Any], infer: bool) -> str:
        response = self.client.add(
            content, filters={"user_id": user, "agent_id": agent}, metadata=payload, infer=infer
        )
        rows = [r for r in _results(response) if r.get("id")]
        if len(rows) != 1:
            raise StorageError(
                "the Mem0 platform did not return the id of the new memory (is the project set to"
                " process adds asynchronously?)"
            )
        return str(rows[0]["id"])

    def get(self, memory_id: str) -> dict[str, Any] | None:
        from mem0.exceptions import MemoryNotFoundError

        try:
            found = self.client.get(memory_id)
        except MemoryNotFoundError:
            return None
        return found if isinstance(found, dict) and found.get("id") else None

    def listing(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        page = 1
        while True:
            response = self.client.get_all(filters=dict(filters), page=page, page_size=_CLOUD_PAGE)
            batch = _results(response)
            rows.extend(batch)
            if not (isinstance(response, dict) and response.get("next")) or not batch:
                return rows
            page += 1

    def search(self, query: str, filters: dict[str, Any], top_k: int, threshold: float) -> list[dict[str, Any]]:
        return _results(self.client.search(query, filters=dict(filters), top_k=top_k, threshold=threshold))

    def delete(self, memory_id: str) -> None:
        self.client.delete(memory_id)

    def reset(self) -> None:
        self.client.reset()

    def close(self) -> None:
        if self.owned:
            self.client.client.close()


# -- translating mem0 rows -----------------------------------------------------------------------


@dataclass(slots=True)
class _Row:
    record: Record
    seq: int
    score: float | None = None
    details: dict[str, Any] | None = None

    def item(self) -> MemoryItem:
        return self.record.to_item(self.score, self.details)


def _created_us(raw: dict[str, Any]) -> int:
    stamp = raw.get("created_at")
    if isinstance(stamp, str):
        try:
            return to_us(datetime.fromisoformat(stamp))
        except ValueError:
            pass
    return 0


def _row(raw: dict[str, Any]) -> _Row | None:
    """A mem0 result as a memkit record; ``None`` for rows outside any (user, agent) namespace."""
    meta: dict[str, Any] = raw["metadata"] if isinstance(raw.get("metadata"), dict) else {}
    ours = meta.get(PAYLOAD_KEY)
    if isinstance(ours, dict):
        user, agent = ours.get("user_id"), ours.get("agent_id")
        metadata = ours.get("metadata") if isinstance(ours.get("metadata"), dict) else {}
        created = ours.get("created_us")
        seq = ours.get("seq")
        created_us = created if isinstance(created, int) else _created_us(raw)
        order = seq if isinstance(seq, int) else created_us
    else:
        # A memory written by mem0 directly: show what mem0 has.
        raw_user, raw_agent = raw.get("user_id"), raw.get("agent_id")
        user = decode_id(raw_user) if isinstance(raw_user, str) else None
        agent = decode_id(raw_agent) if isinstance(raw_agent, str) else None
        metadata = {k: v for k, v in meta.items() if k != PAYLOAD_KEY}
        created_us = _created_us(raw)
        order = created_us
    if not isinstance(user, str) or not isinstance(agent, str):
        return None
    record = Record(
        id=str(raw.get("id")), user_id=user, agent_id=agent, content=str(raw.get("memory", "")),
        metadata=dict(metadata or {}), created_us=created_us,
    )
    return _Row(record, order)


def _newest_first(rows: list[_Row]) -> list[_Row]:
    return sorted(rows, key=lambda r: (r.record.created_us, r.seq), reverse=True)


_SECRET_WORDS = ("key", "secret", "password", "token", "credential")


def _secret_values(value: Any, secret: bool = False) -> list[str]:
    """Every string under a key that names a credential, anywhere in a config."""
    if isinstance(value, str):
        return [value] if secret and len(value) >= 4 else []
    if isinstance(value, Mapping):
        found: list[str] = []
        for key, item in value.items():
            named = secret or any(word in str(key).lower() for word in _SECRET_WORDS)
            found.extend(_secret_values(item, named))
        return found
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in _secret_values(item, secret)]
    return []


def _redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


# -- the adapter ----------------------------------------------------------------------------------


class Mem0Adapter(RecordWriter):
    """Memories in Mem0: a local offline store (OSS mode) or the Mem0 platform (cloud mode).

    Parameters
    ----------
    path
        OSS mode: the folder for the local Qdrant store, mem0's history database and
        mem0's home files. Default ``data/mem0``.
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

    Examples
    --------
    >>> mem = Mem0Adapter("data/mem0")                              # doctest: +SKIP
    >>> await mem.add("TP53 is mutated in sample 7", "u1", "bio")   # doctest: +SKIP
    """

    provider_name = "mem0"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        mode: str = "oss",
        api_key: str | None = None,
        base_url: str | None = None,
        config: Mapping[str, Any] | None = None,
        embedder: object = None,
        collection: str = _DEFAULT_COLLECTION,
        llm: Mapping[str, Any] | None = None,
        infer: bool = False,
        threshold: float = 0.1,
        memory: Any = None,
        limits: Limits = DEFAULT_LIMITS,
        record_recalls: bool = False,
        recalls_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(record_recalls, bool):
            raise ConfigError(f"record_recalls must be True or False, got {record_recalls!r}")
        self.record_recalls = record_recalls
        if mode not in ("oss", "cloud"):
            raise ConfigError(f"mode must be 'oss' or 'cloud', got {mode!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"threshold must be a number between 0 and 1, got {threshold!r}")
        if infer and mode == "oss" and llm is None and config is None and memory is None:
            raise ConfigError("infer=True needs a real LLM: pass llm={...} (mem0's llm section) or config")
        self.limits = limits
        self.mode = mode
        self.infer = infer
        self.threshold = float(threshold)
        self.path: str | None = None
        self.embedder: Embedder | None = None
        self._secrets: list[str] = []
        self._worker = Worker("memkit-mem0", self.__repr__, translate=self._memkit_error)
        self._recall_store: SQLiteAdapter | None = None
        self._warned_recalls = False
        try:
            self._backend: _Backend = self._connect(
                path, api_key, base_url, config, embedder, collection, llm, memory
            )
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

    def _connect(
        self,
        path: str | os.PathLike[str] | None,
        api_key: str | None,
        base_url: str | None,
        config: Mapping[str, Any] | None,
        embedder: object,
        collection: str,
        llm: Mapping[str, Any] | None,
        memory: Any,
    ) -> _Backend:
        if self.mode == "cloud":
            _prepare_environment(None, offline=False)
            mem0 = _import_mem0()
            if memory is not None:
                return _CloudBackend(memory, owned=False)
            key = api_key or os.environ.get("MEM0_API_KEY")
            if not key:
                raise ConfigError("cloud mode needs an API key: pass api_key=... or set MEM0_API_KEY")
            self._secrets.append(key)
            self.path = base_url or "https://api.mem0.ai"
            try:
                client = self._worker.call(lambda: mem0.MemoryClient(api_key=key, host=base_url))
            except Exception as exc:
                raise BackendUnavailableError(
                    f"cannot reach the Mem0 platform at {self.path}: {_redact(str(exc), self._secrets)}"
                ) from None
            return _CloudBackend(client, owned=True)
        root = Path(path if path is not None else "data/mem0").expanduser()
        self.path = str(root)
        _prepare_environment(root, offline=config is None)
        mem0 = _import_mem0()
        if memory is not None:
            return _OSSBackend(memory, owned=False)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot create the mem0 folder {self.path!r}: {exc}") from exc
        self._secrets.extend(_secret_values(llm) + _secret_values(config))
        if config is not None:
            cfg = dict(config)
        else:
            self.embedder = _bind_embedder(root, embedder, collection)
            cfg = oss_config(root, embedder=self.embedder, collection=collection, llm=llm)
        try:
            built = self._worker.call(mem0.Memory.from_config, cfg)
        except Exception as exc:
            message = _redact(f"{type(exc).__name__}: {exc}", self._secrets)
            raise ConfigError(f"mem0 could not open {self.path!r}: {message}") from None
        return _OSSBackend(built, owned=True)

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Mem0Adapter:
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
        message = _redact(f"{type(exc).__name__}: {exc}", self._secrets)
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

    def _write(self, records: list[Record], progress: bool = False) -> list[str]:
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

    async def _store(self, records: list[Record]) -> list[str]:
        return await self._run(self._write, records)

    async def add_many(
        self, items: Iterable[NewMemory | Mapping[str, Any]], *, progress: bool = False
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
        records = records_from_items(items, self.limits)
        if not records:
            return []
        return await self._run(self._write, records, progress)

    def _delete(self, memory_id: str, user_id: str | None, agent_id: str | None) -> bool:
        raw = self._backend.get(memory_id)
        row = None if raw is None else _row(raw)
        if row is None:
            return False
        if user_id is not None and row.record.user_id != user_id:
            return False
        if agent_id is not None and row.record.agent_id != agent_id:
            return False
        self._backend.delete(memory_id)
        return True

    async def delete(self, memory_id: str, *, user_id: str | None = None, agent_id: str | None = None) -> bool:
        """Delete one memory; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        return await self._run(self._delete, *check_scope(memory_id, user_id, agent_id, self.limits))

    async def reset(self) -> bool:
        """Delete every memory in this store: all namespaces, like mem0's own ``reset``.

        OSS mode wipes this folder's collection and mem0's history database. Cloud
        mode deletes every user, agent and run of the API key's project. Recorded
        recalls go too, as on every store.
        """
        await self._run(self._backend.reset)
        if self._recall_store is not None:
            await self._recall_store.reset()
        return True

    # -- reads ---------------------------------------------------------------------------------------

    def _namespace_rows(
        self, user: str, agent: str, conditions: tuple[Condition, ...], until_us: int | None = None
    ) -> list[_Row]:
        raw = self._backend.listing({"user_id": encode_id(user), "agent_id": encode_id(agent)})
        rows = [r for r in map(_row, raw) if r is not None]
        kept = [
            r for r in rows
            if r.record.user_id == user and r.record.agent_id == agent and matches(conditions, r.record.metadata)
            and (until_us is None or r.record.created_us <= until_us)
        ]
        return _newest_first(kept)

    def _all_rows(self) -> list[_Row]:
        # "*" is mem0's wildcard; real ids never reach mem0 as "*" (see encode_id).
        return [r for r in map(_row, self._backend.listing({"user_id": "*"})) if r is not None]

    def _search(
        self, text: str, user: str, agent: str, conditions: tuple[Condition, ...], limit: int,
        until_us: int | None = None,
    ) -> list[_Row]:
        scope = {"user_id": encode_id(user), "agent_id": encode_id(agent)}
        top_k = limit
        while True:
            raw = self._backend.search(text, scope, top_k, self.threshold)
            hits: list[_Row] = []
            for found in raw:
                row = _row(found)
                if row is None or row.record.user_id != user or row.record.agent_id != agent:
                    continue
                if not matches(conditions, row.record.metadata):
                    continue
                if until_us is not None and row.record.created_us > until_us:
                    continue
                score = found.get("score")
                # Vectors are float32: digits past the 7th are arithmetic noise, and
                # without rounding identical texts would not tie (then newest first).
                row.score = round(float(score), _SCORE_DIGITS) if isinstance(score, (int, float)) else None
                hits.append(row)
            # Filters run here, after mem0 ranked: widen until enough pass or mem0 runs dry.
            if len(hits) >= limit or len(raw) < top_k:
                break
            top_k *= 4
        hits.sort(key=lambda r: (-(r.score or 0.0), -r.record.created_us, -r.seq))
        hits = hits[:limit]
        for rank, row in enumerate(hits, start=1):
            row.details = {"mode": "semantic", "semantic": {"rank": rank, "score": row.score}}
        return hits

    #: mem0 ranks by its own vector similarity only.
    search_modes: tuple[str, ...] = ("semantic",)
    #: Every memory carries its creation time (memkit's, or mem0's own for rows mem0 wrote).
    searches_as_of = True

    async def search(
        self,
        query: str,
        user_id: str,
        agent_id: str,
        limit: int = 5,
        filters: dict[str, Any] | None = None,
        *,
        mode: str | None = None,
        as_of: datetime | None = None,
    ) -> list[MemoryItem]:
        """Rank one namespace by mem0's score (cosine similarity offline; higher is better).

        An empty query lists the namespace newest first with ``score=None``.
        ``as_of``: only memories that existed then (see :class:`memkit.SupportsAsOf`);
        like filters, it is applied to mem0's ranking, widened until enough pass.
        """
        text = check_query(query, self.limits)
        limit = check_limit(limit, self.limits)
        user, agent = check_namespace(user_id, agent_id, self.limits)
        conditions = parse_filters(filters)
        resolved = check_mode(mode, self.search_modes, "Mem0Adapter")
        until_us = check_as_of(as_of)
        if not text:
            rows = (await self._run(self._namespace_rows, user, agent, conditions, until_us))[:limit]
        else:
            rows = await self._run(self._search, text, user, agent, conditions, limit, until_us)
        hits = [r.item() for r in rows]
        _recall.record(
            self, query=text, user_id=user, agent_id=agent, mode=resolved, filters=filters,
            limit=limit, hits=hits, as_of=as_of,
        )
        return hits

    async def get_all(
        self, user_id: str, agent_id: str, limit: int = 10, filters: dict[str, Any] | None = None
    ) -> list[MemoryItem]:
        """The newest ``limit`` memories of a namespace (lists the whole namespace through mem0)."""
        return await self.get_page(user_id, agent_id, limit=limit, filters=filters)

    async def get_page(
        self,
        user_id: str,
        agent_id: str,
        *,
        offset: int = 0,
        limit: int = 50,
        filters: dict[str, Any] | None = None,
    ) -> list[MemoryItem]:
        read = check_read(user_id, agent_id, limit, filters, self.limits, offset)
        rows = await self._run(self._namespace_rows, read.user, read.agent, read.conditions)
        return [r.item() for r in rows[read.offset : read.offset + read.limit]]

    def _get(self, memory_id: str) -> _Row | None:
        raw = self._backend.get(memory_id)
        return None if raw is None else _row(raw)

    async def get(self, memory_id: str) -> MemoryItem | None:
        check_id(memory_id, "memory_id", self.limits)
        row = await self._run(self._get, memory_id)
        return None if row is None else row.item()

    # -- capabilities: each lists the whole store through mem0 -------------------------------------

    async def namespaces(self) -> list[NamespaceInfo]:
        return namespace_infos(r.record for r in await self._run(self._all_rows))

    async def stats(self) -> Stats:
        records = [r.record for r in await self._run(self._all_rows)]
        return Stats(
            provider=self.provider_name,
            memories=len(records),
            traces=trace_count(records),
            namespaces=len({(r.user_id, r.agent_id) for r in records}),
            storage_bytes=await self._run(self._folder_bytes),
            mode=self.mode,
            path=self.path if self.mode == "oss" else None,
        )

    def _folder_bytes(self) -> int | None:
        if self.mode != "oss" or self.path is None or not getattr(self._backend, "owned", False):
            return None
        return sum(f.stat().st_size for f in Path(self.path).rglob("*") if f.is_file())

    def _ping(self) -> str:
        # A search for a namespace that cannot exist touches the embedder and the store.
        probe = encode_id(f"memkit health {uuid.uuid4().hex}")
        self._backend.search("health check", {"user_id": probe, "agent_id": probe}, 1, self.threshold)
        return f"mem0 {self.mode} answers"

    async def health(self) -> Health:
        return await timed_health(
            self.provider_name, lambda: self._run(self._ping), (StorageError, BackendUnavailableError)
        )

    async def export(self, user_id: str | None = None, agent_id: str | None = None) -> AsyncIterator[MemoryItem]:
        """Every record (traces included), oldest first; loads the whole listing first."""
        if user_id is not None and agent_id is not None:
            rows = await self._run(self._namespace_rows, user_id, agent_id, ())
        else:
            rows = [
                r for r in await self._run(self._all_rows)
                if (user_id is None or r.record.user_id == user_id)
                and (agent_id is None or r.record.agent_id == agent_id)
            ]
            rows = _newest_first(rows)
        for row in reversed(rows):
            yield row.item()

    # -- recalls, kept in a SQLite file beside mem0's (see ``recalls_path``) ----------------------

    def _keep_recall(self, body: dict[str, Any]) -> None:
        if self._recall_store is not None:
            self._recall_store._keep_recall(body)
        elif not self._warned_recalls:
            self._warned_recalls = True
            warnings.warn(
                f"{self!r} keeps no recalls: open it with recalls_path=... to record what steps recalled",
                RuntimeWarning, stacklevel=3,
            )

    def _recalls_kept(self) -> SQLiteAdapter | None:
        if self._worker.closed:
            raise StorageError(f"{self!r} is closed; open the store again to use it")
        return self._recall_store

    async def recalls(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Recall]:
        """Recorded recalls, oldest first (see :class:`memkit.SupportsRecalls`); none without a recall file."""
        kept = self._recalls_kept()
        if kept is None:
            return []
        return await kept.recalls(
            user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id
        )

    async def get_recall(
        self, recall_id: str, *, user_id: str | None = None, agent_id: str | None = None
    ) -> Recall | None:
        """One recall; with ``user_id``/``agent_id`` only if it lives in that namespace."""
        kept = self._recalls_kept()
        if kept is None:
            check_id(recall_id, "recall_id", self.limits)
            return None
        return await kept.get_recall(recall_id, user_id=user_id, agent_id=agent_id)

    async def add_recalls(self, recalls: Iterable[Recall]) -> int:
        """Store recalls as given (an import), all or none; needs a recall file (``recalls_path``)."""
        kept = self._recalls_kept()
        if kept is None:
            raise ConfigError(f"{self!r} keeps no recalls: open it with recalls_path=... to import them")
        return await kept.add_recalls(recalls)

    async def marks(
        self,
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
    ) -> list[Mark]:
        """A researcher's marks, kept in the recall file beside the recalls they judge; none without one."""
        kept = self._recalls_kept()
        if kept is None:
            _marks.check_reads(self.limits, user_id=user_id, agent_id=agent_id, workflow_id=workflow_id,
                               run_id=run_id)
            return []
        return await kept.marks(user_id=user_id, agent_id=agent_id, workflow_id=workflow_id, run_id=run_id)

    async def put_marks(self, marks: Iterable[Mark]) -> int:
        """Store marks (see :class:`memkit.SupportsMarks`); needs a recall file (``recalls_path``)."""
        kept = self._recalls_kept()
        if kept is None:
            raise ConfigError(f"{self!r} keeps no recalls, so no marks: open it with recalls_path=... to keep them")
        return await kept.put_marks(marks)

    async def remove_marks(self, mark_ids: Iterable[str], *, user_id: str, agent_id: str) -> int:
        """Delete these marks, those of them that live in ``user_id``/``agent_id`` only."""
        kept = self._recalls_kept()
        if kept is None:
            _marks.checked_ids(mark_ids, self.limits)
            check_namespace(user_id, agent_id, self.limits)
            return 0
        return await kept.remove_marks(mark_ids, user_id=user_id, agent_id=agent_id)

    # -- closing ---------------------------------------------------------------------------------

    def _release(self) -> None:
        try:
            backend = getattr(self, "_backend", None)
            if backend is not None:
                backend.close()
        finally:
            if self._recall_store is not None:
                self._recall_store.close()

    async def aclose(self) -> None:
        """Close mem0's store (when this adapter opened it) and the recall file; again is a no-op."""
        await self._worker.aclose(self._release)

    def close(self) -> None:
        """:meth:`aclose` from sync code (no event loop needed)."""
        self._worker.close(self._release)
