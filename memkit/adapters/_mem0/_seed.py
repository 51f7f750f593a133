"""Seed 002's memory config, read into :class:`~memkit.adapters.Mem0Adapter`'s keywords.

The seed configures its adapter with one Hydra group (an OmegaConf ``DictConfig``, or a dict)::

    provider: mem0
    mode: oss            # or cloud
    oss:
      vector_store: {provider: ..., config: {...}}
      graph_store: {provider: neo4j, config: {url: ..., username: ..., password: ...}}
      llm: {...}
      embedding: ...
    cloud: {api_key: ..., base_url: ...}

What memkit can run is said here, once, and the rest is refused with the reason: memkit runs mem0
offline on a local Qdrant folder, and a graph store is not something offline mem0 can have.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memkit._core._errors import ConfigError

__all__ = ["SEED_KEYS", "seed_options"]

#: The keys of the seed's config besides ``provider``.
SEED_KEYS = ("enabled", "mode", "oss", "cloud")
_OSS_KEYS = ("vector_store", "graph_store", "llm", "embedding", "embedder")
_CLOUD_KEYS = ("api_key", "base_url")

_NO_GRAPH_STORE = (
    "oss.graph_store cannot work here: a mem0 graph store has mem0's LLM extract the entities and"
    " relations of every add, so it needs a real LLM and the network (memkit's mem0 store is offline"
    " and makes no LLM call), and mem0 2.2.1, the version memkit runs, has no graph store at all."
    " Leave graph_store out (mem0 keeps the vector search), or keep the memory graph in memkit's own"
    " graph adapters, which build it from metadata without an LLM:"
    " memkit.open('neo4j://user:password@host:7687') or memkit.open('falkordb://host:6379/memkit')"
)


def _plain(value: Any) -> Any:
    """A ``DictConfig`` (any Mapping) and its sections as dicts."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _section(config: dict[str, Any], name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    section = config.get(name) or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{name} must be a mapping of {', '.join(keys)}, got {type(section).__name__}")
    unknown = sorted(set(section) - set(keys))
    if unknown:
        raise ConfigError(f"unknown key(s) in {name}: {', '.join(unknown)}; it takes {', '.join(keys)}")
    return section


def seed_options(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """``Mem0Adapter``'s keywords (``mode``, ``path``, ``collection``, ``embedder``, ``llm``,
    ``api_key``, ``base_url``) for the seed's config; a ConfigError saying why for what cannot run."""
    config = _plain(cfg)
    provider = config.pop("provider", "mem0")
    if provider != "mem0":
        raise ConfigError(f"this is the mem0 adapter; the config names provider {provider!r}")
    unknown = sorted(set(config) - set(SEED_KEYS))
    if unknown:
        raise ConfigError(f"unknown key(s) in the mem0 config: {', '.join(unknown)}; it takes provider,"
                          f" {', '.join(SEED_KEYS)}")
    if config.get("enabled", True) is not True:
        raise ConfigError(f"this memory config is not enabled (enabled: {config['enabled']!r})")
    mode = config.get("mode") or "oss"
    options: dict[str, Any] = {"mode": mode}
    cloud = _section(config, "cloud", _CLOUD_KEYS)
    oss = _section(config, "oss", _OSS_KEYS)
    if mode == "cloud":
        # The seed writes ${oc.env:MEM0_API_KEY,}: an unset variable reads as "", which means "not given".
        options.update({k: cloud[k] for k in _CLOUD_KEYS if cloud.get(k)})
        return options
    if oss.get("graph_store"):
        raise ConfigError(_NO_GRAPH_STORE)
    vector_store = oss.get("vector_store") or {}
    if vector_store:
        options.update(_vector_store(vector_store))
    if oss.get("llm"):
        options["llm"] = oss["llm"]
    embedding = oss.get("embedding", oss.get("embedder"))
    if isinstance(embedding, Mapping):
        raise ConfigError(
            "oss.embedding: memkit embeds for mem0 itself, offline; give 'default' (the shipped model) or"
            " 'st:/path/to/model' (a sentence-transformers folder); a mem0 embedder section belongs in a"
            " complete mem0 config, passed as config="
        )
    if embedding is not None:
        options["embedder"] = embedding
    return options


def _vector_store(section: Any) -> dict[str, Any]:
    """``path`` and ``collection`` for a Qdrant folder; any other vector store is refused."""
    provider = section.get("provider") if isinstance(section, dict) else None
    settings = (section.get("config") or {}) if isinstance(section, dict) else {}
    local = {"path", "collection_name"}
    if provider != "qdrant" or not isinstance(settings, dict) or set(settings) - local:
        raise ConfigError(
            f"oss.vector_store {provider!r} with {sorted(settings) if isinstance(settings, dict) else settings!r}:"
            " memkit runs mem0 offline on a local Qdrant folder ({provider: qdrant, config: {path: ...,"
            " collection_name: ...}}). mem0 2.2.1 has no neo4j vector store; memkit's Neo4jAdapter keeps"
            " memories in Neo4j (memkit.open('neo4j://user:password@host:7687')). Any other mem0 vector"
            " store needs a complete mem0 config, passed as config="
        )
    found: dict[str, Any] = {}
    if settings.get("path"):
        found["path"] = settings["path"]
    if settings.get("collection_name"):
        found["collection"] = settings["collection_name"]
    return found
