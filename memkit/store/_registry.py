"""Turn a URL, a dict, or a config object into a provider.

One registry maps provider names and URL schemes to adapter classes, imported
lazily so a missing optional dependency only matters when that provider is asked for: memkit's
own backends are the table below, any other is an entry point of the group ``memkit.backends``
(its name the URL scheme, its value ``"module:Class"``) that an installed package declares, and,
for a store that offers them, to its one-shot reads (:mod:`memkit._core._reads`): what the
command line reads without building the store.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from memkit._core._errors import ConfigError, missing_extra
from memkit._core._validate import checked_as

if TYPE_CHECKING:
    from memkit._core._port import MemoryProvider
    from memkit._core._reads import OneShotReads

__all__ = [
    "DEFAULT_URL",
    "ENTRY_POINT_GROUP",
    "MOCK_URL",
    "adapter_modules",
    "build_provider",
    "default_url",
    "get_memory_provider",
    "one_shot_reads",
    "provider_names",
]

#: What :func:`memkit.open` opens by default (``$MEMKIT_URL`` first).
DEFAULT_URL = "sqlite:///data/memory.db"
#: What :func:`get_memory_provider` builds by default: the in-memory mock adapter.
MOCK_URL = "memory://"
#: Where an installed package registers a backend: entry point name = URL scheme (and provider name).
ENTRY_POINT_GROUP = "memkit.backends"


@dataclass(frozen=True)
class _Entry:
    name: str
    target: str  # "module:Class"
    schemes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    extra: str | None = None  # the pip extra that installs its dependencies
    requires: str | None = None  # the importable module the extra provides
    also: tuple[str, ...] = ()  # other names its module exports for the class (``from memkit.adapters import``)
    # "module:function" opening a URL's one-shot reads (None: build the store and read its port)
    reads: str | None = None


_REGISTRY: tuple[_Entry, ...] = (
    _Entry("memory", "memkit.adapters._memory._adapter:InMemoryAdapter", ("memory",), ("mock", "in_memory", "inmemory"),
           also=("MockMemoryAdapter",)),
    _Entry("sqlite", "memkit.adapters._sqlite:SQLiteAdapter", ("sqlite",),
           reads="memkit.adapters._sqlite._reads:open_reads"),
    _Entry("falkordb", "memkit.adapters._falkordb._adapter:FalkorDBAdapter", ("falkordb",), (), "graph", "falkordb"),
    _Entry("neo4j", "memkit.adapters._neo4j._adapter:Neo4jAdapter",
           ("neo4j", "neo4j+s", "neo4j+ssc", "bolt", "bolt+s", "bolt+ssc"), (), "graph", "neo4j"),
    _Entry("mem0", "memkit.adapters._mem0._adapter:Mem0Adapter", ("mem0", "mem0+cloud"), extra="mem0", requires="mem0"),
    _Entry("postgres", "memkit.adapters._postgres._adapter:PostgresAdapter", ("postgresql", "postgres"),
           ("postgresql",), "postgres", "psycopg"),
)


def adapter_modules() -> dict[str, str]:
    """``{class name: module}`` of every adapter, for :mod:`memkit.adapters`' lazy imports."""
    out: dict[str, str] = {}
    for entry in _REGISTRY:
        module, _, cls = entry.target.partition(":")
        out.update((name, module) for name in (cls, *entry.also))
    return out


def _entries(wanted: str | None = None) -> tuple[_Entry, ...]:
    """memkit's own backends, then those installed packages register (read at each lookup, so a
    package installed while the interpreter runs is found; memkit's own names win a clash).
    ``wanted``: a name or scheme; one of memkit's own is answered without reading any package's metadata."""
    taken = {n for e in _REGISTRY for n in (e.name, *e.aliases, *e.schemes)}
    if wanted in taken:
        return _REGISTRY
    found = [_Entry(ep.name.lower(), ep.value, (ep.name.lower(),))
             for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name.lower() not in taken]
    return (*_REGISTRY, *sorted(found, key=lambda e: e.name))


def provider_names() -> list[str]:
    """Every provider name the factory accepts."""
    return [e.name for e in _entries()]


def _entry_by_name(name: object) -> _Entry:
    wanted = str(name).strip().lower()
    for entry in _entries(wanted):
        if wanted == entry.name or wanted in entry.aliases:
            return entry
    raise ConfigError(f"unknown memory provider {name!r}; valid providers: {', '.join(provider_names())}")


def _entry_by_url(url: str) -> _Entry:
    scheme = urlsplit(url).scheme.lower()
    entries = _entries(scheme)
    for entry in entries:
        if scheme in entry.schemes:
            return entry
    schemes = sorted(s for e in entries for s in e.schemes)
    raise ConfigError(
        f"unknown memory URL scheme {scheme + '://' if scheme else repr(url)};"
        f" valid schemes: {', '.join(s + '://' for s in schemes)}"
    )


def _load(entry: _Entry) -> Any:
    if entry.requires is not None:
        try:
            importlib.import_module(entry.requires)
        except ImportError:
            raise missing_extra(entry.requires, entry.extra or entry.name) from None
    module_name, _, attr = entry.target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"the {entry.name!r} backend ({entry.target}) cannot be loaded: {exc}") from exc


def one_shot_reads(url: str) -> OneShotReads | None:
    """The one-shot reads of the store at ``url``, where its adapter offers them and can read it as
    it is; ``None``: open it with :func:`build_provider` (which also reports what is wrong with the URL)."""
    try:
        entry = _entry_by_url(url.strip())
    except ConfigError:
        return None
    if entry.reads is None:
        return None
    module_name, _, attr = entry.reads.partition(":")
    reads: OneShotReads | None = getattr(importlib.import_module(module_name), attr)(url.strip())
    return reads


def _plain(value: Any) -> Any:
    """Deep-convert Mapping-like config (OmegaConf DictConfig included) into dicts."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _as_options(cfg: object) -> dict[str, Any]:
    if isinstance(cfg, Mapping):
        return dict(_plain(cfg))
    if hasattr(cfg, "__dict__"):
        return {k: _plain(v) for k, v in vars(cfg).items() if not k.startswith("_")}
    raise ConfigError(
        f"memory config must be a URL, a dict or an object with attributes, got {type(cfg).__name__}"
    )


def _build(entry: _Entry, options: dict[str, Any], url: str | None) -> MemoryProvider:
    from memkit._core._port import MemoryProvider  # the models and pydantic: a store is being built

    cls = _load(entry)
    try:
        from_url = getattr(cls, "from_url", None)
        provider = from_url(url, **options) if url is not None and from_url is not None else cls(**options)
    except TypeError as exc:
        raise ConfigError(f"bad options for the {entry.name!r} provider: {exc}") from None
    if not isinstance(provider, MemoryProvider):  # pragma: no cover - guards the registry
        raise ConfigError(f"{entry.target} does not implement MemoryProvider")
    return provider


@checked_as("memkit.get_memory_provider")
def get_memory_provider(cfg: object = None) -> MemoryProvider:
    """Build a provider from a URL, a dict, or a config object.

    Parameters
    ----------
    cfg
        ``None``, or a config naming neither ``provider`` nor ``url``, gives the in-memory
        mock adapter (``memory://``): nothing is written anywhere, as the port's contract
        says. A string is a URL: ``memory://``, ``sqlite:///relative.db``,
        ``sqlite:////abs/path.db``. A dict (or OmegaConf ``DictConfig``, or any object with
        attributes) names ``provider`` and/or ``url``; every other key is passed to the
        adapter. (:func:`memkit.open` differs only in its default: a SQLite file.)

    Raises
    ------
    ConfigError
        Unknown provider or scheme (the message lists the valid ones) or bad options.
    BackendUnavailableError
        The provider's optional dependency is missing (the message names the extra).

    Examples
    --------
    >>> get_memory_provider(None)
    InMemoryAdapter(0 memories)
    >>> get_memory_provider({"provider": "mock"})
    InMemoryAdapter(0 memories)
    """
    return build_provider(cfg, MOCK_URL)


def default_url() -> str:
    """Where :func:`memkit.open` and the ``memkit`` command go unless told: ``$MEMKIT_URL``, else a SQLite file."""
    return os.environ.get("MEMKIT_URL") or DEFAULT_URL


def build_provider(cfg: object, default: str) -> MemoryProvider:
    """:func:`get_memory_provider`, with ``default`` as the URL of a config that names no store."""
    if cfg is None:
        cfg = default
    if isinstance(cfg, str):
        url = cfg.strip()
        if not url:
            raise ConfigError("memory URL is empty")
        return _build(_entry_by_url(url), {}, url)
    options = _as_options(cfg)
    name = options.pop("provider", None)
    url = options.pop("url", None)
    if url is not None and not isinstance(url, str):
        raise ConfigError(f"url must be a string, got {type(url).__name__}")
    if name is None and url is None:
        url = default
    entry = _entry_by_name(name) if name is not None else _entry_by_url(url or "")
    if url is not None and name is not None and _entry_by_url(url) is not entry:
        raise ConfigError(f"provider {name!r} does not match the scheme of url {url!r}")
    return _build(entry, options, url)
