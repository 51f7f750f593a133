"""Talking to mem0 (``mem0ai==2.2.1``): its environment, its config, its two clients, its rows.

Everything here is blocking and knows mem0's shapes; :mod:`memkit.adapters._mem0._adapter` runs it on
a worker thread behind the port.

- Namespaces are mem0's ``user_id`` + ``agent_id``. mem0 trims ids and rejects
  whitespace, and ``"*"`` is its wildcard, so ids are escaped on the way in
  (``%``, ``*`` and whitespace become ``%XX``) and the originals are kept in the payload.
- Everything memkit knows about a memory (metadata, creation time, insertion
  order, the original ids) sits under one payload key, ``memkit``, because mem0
  reserves top-level keys such as ``role``, ``data``, ``hash`` and ``created_at``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable
from urllib.parse import unquote

from memkit._core._errors import BackendUnavailableError, ConfigError, InvalidInputError, StorageError, missing_extra
from memkit._core._records import Record, to_us
from memkit.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder

__all__ = [
    "DEFAULT_COLLECTION", "PAYLOAD_KEY", "Backend", "CloudBackend", "Mem0Memory", "OSSBackend", "Opened", "Row",
    "connect", "decode_id", "encode_id", "newest_first", "oss_config", "redact", "row_of",
]

PAYLOAD_KEY = "memkit"
_FIRST_PAGE = 2_048  # listing starts here and grows x8 until mem0 returns fewer than asked
_CLOUD_PAGE = 1_000
DEFAULT_COLLECTION = "memkit"


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


def prepare_environment(data_dir: Path | None, offline: bool) -> None:
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


def import_mem0() -> Any:
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
    collection: str = DEFAULT_COLLECTION,
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


def bind_embedder(root: Path, spec: object, collection: str) -> Embedder:
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


@runtime_checkable
class Mem0Memory(Protocol):
    """What memkit calls on a mem0 object it is handed: ``mem0.Memory`` (OSS) or ``mem0.MemoryClient``
    (cloud). Their own signatures vary between mem0 releases, so only the methods are named."""

    def add(self, *args: Any, **kwargs: Any) -> Any: ...
    def get(self, *args: Any, **kwargs: Any) -> Any: ...
    def get_all(self, *args: Any, **kwargs: Any) -> Any: ...
    def search(self, *args: Any, **kwargs: Any) -> Any: ...
    def delete(self, *args: Any, **kwargs: Any) -> Any: ...
    def reset(self, *args: Any, **kwargs: Any) -> Any: ...


class Backend(Protocol):
    mode: str
    owned: bool  # opened by memkit (so memkit closes it), not handed in

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


class OSSBackend:
    mode = "oss"

    def __init__(self, memory: Mem0Memory, owned: bool) -> None:
        self.memory: Any = memory
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


class CloudBackend:
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
class Row:
    record: Record
    seq: int
    score: float | None = None


def _created_us(raw: dict[str, Any]) -> int:
    stamp = raw.get("created_at")
    if isinstance(stamp, str):
        try:
            return to_us(datetime.fromisoformat(stamp))
        except ValueError:
            pass
    return 0


def row_of(raw: dict[str, Any]) -> Row | None:
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
    return Row(record, order)


def newest_first(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: (r.record.created_us, r.seq), reverse=True)


_SECRET_WORDS = ("key", "secret", "password", "token", "credential")


def secret_values(value: Any, secret: bool = False) -> list[str]:
    """Every string under a key that names a credential, anywhere in a config."""
    if isinstance(value, str):
        return [value] if secret and len(value) >= 4 else []
    if isinstance(value, Mapping):
        found: list[str] = []
        for key, item in value.items():
            named = secret or any(word in str(key).lower() for word in _SECRET_WORDS)
            found.extend(secret_values(item, named))
        return found
    if isinstance(value, (list, tuple)):
        return [s for item in value for s in secret_values(item, secret)]
    return []


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


# -- opening ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Opened:
    """What opening mem0 found out, kept even when it fails part-way (for the error messages)."""

    mode: str
    path: str | None = None
    embedder: Embedder | None = None
    secrets: list[str] = field(default_factory=list)


def connect(
    opened: Opened,
    call: Callable[..., Any],
path: str | os.PathLike[str] | None,
    api_key: str | None,
    base_url: str | None,
    config: Mapping[str, Any] | None,
    embedder: object,
    collection: str,
    llm: Mapping[str, Any] | None,
    memory: Mem0Memory | None,
) -> Backend:
    """Open mem0 in ``opened.mode`` (``call`` runs a blocking constructor on the adapter's worker
    thread), recording in ``opened`` what the adapter keeps: where, which embedder, which secrets."""
    if memory is not None and not isinstance(memory, Mem0Memory):
        raise InvalidInputError(
            f"memory must be a mem0 Memory (or a MemoryClient in cloud mode), got {type(memory).__name__}"
        )
    if opened.mode == "cloud":
        prepare_environment(None, offline=False)
        mem0 = import_mem0()
        if memory is not None:
            return CloudBackend(memory, owned=False)
        key = api_key or os.environ.get("MEM0_API_KEY")
        if not key:
            raise ConfigError("cloud mode needs an API key: pass api_key=... or set MEM0_API_KEY")
        opened.secrets.append(key)
        opened.path = base_url or "https://api.mem0.ai"
        try:
            client = call(lambda: mem0.MemoryClient(api_key=key, host=base_url))
        except Exception as exc:
            raise BackendUnavailableError(
                f"cannot reach the Mem0 platform at {opened.path}: {redact(str(exc), opened.secrets)}"
            ) from None
        return CloudBackend(client, owned=True)
    root = Path(path if path is not None else "data/mem0").expanduser()
    opened.path = str(root)
    prepare_environment(root, offline=config is None)
    mem0 = import_mem0()
    if memory is not None:
        return OSSBackend(memory, owned=False)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the mem0 folder {opened.path!r}: {exc}") from exc
    opened.secrets.extend(secret_values(llm) + secret_values(config))
    if config is not None:
        cfg = dict(config)
    else:
        opened.embedder = bind_embedder(root, embedder, collection)
        cfg = oss_config(root, embedder=opened.embedder, collection=collection, llm=llm)
    try:
        built = call(mem0.Memory.from_config, cfg)
    except Exception as exc:
        message = redact(f"{type(exc).__name__}: {exc}", opened.secrets)
        raise ConfigError(f"mem0 could not open {opened.path!r}: {message}") from None
    return OSSBackend(built, owned=True)
