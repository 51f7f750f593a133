"""Seed 002's ``Mem0Adapter(cfg)`` and its Hydra memory group, as real OmegaConf ``DictConfig``s.

What runs offline (a local Qdrant folder) runs; a graph store, which needs an LLM, and a vector store
mem0 does not have are refused with a ConfigError that says why and what to use instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mem0", reason="the mem0 extra is not installed: pip install 'memkit[mem0]'")
from omegaconf import OmegaConf

from memkit import ConfigError, get_memory_provider
from memkit.adapters import Mem0Adapter

NEO4J = {"url": "bolt://127.0.0.1:7687", "username": "neo4j", "password": "s3cret-pw"}


def seed_config(**oss: Any) -> Any:
    """The seed's ``memory:`` group (configs/config.yaml), resolved as Hydra hands it over."""
    return OmegaConf.create({
        "enabled": True, "provider": "mem0", "mode": "oss", "oss": oss,
        "cloud": {"api_key": "${oc.env:MEM0_TEST_UNSET_KEY,''}", "base_url": "${oc.env:MEM0_TEST_UNSET_URL,''}"},
    })


async def test_the_seeds_shape_runs_offline_on_a_qdrant_folder(tmp_path: Path) -> None:
    folder = tmp_path / "seed-mem0"
    cfg = seed_config(vector_store={"provider": "qdrant", "config": {"path": str(folder), "collection_name": "seed"}})
    adapter = Mem0Adapter(cfg)  # the seed's own call
    try:
        assert adapter.path == str(folder) and adapter.mode == "oss"
        mem_id = await adapter.add("test memory", user_id="u1", agent_id="a1")
        results = await adapter.search("test", user_id="u1", agent_id="a1")
        assert any(r.id == mem_id for r in results)  # the seed's assertion
    finally:
        await adapter.aclose()
    assert (folder / "qdrant" / "collection" / "seed").is_dir()
    # get_memory_provider takes the same group and reads the same memory back.
    provider = get_memory_provider(cfg)
    try:
        assert isinstance(provider, Mem0Adapter)
        assert [i.content for i in await provider.get_all("u1", "a1")] == ["test memory"]
    finally:
        await provider.aclose()  # type: ignore[attr-defined]


@pytest.mark.parametrize("build", [Mem0Adapter, get_memory_provider], ids=["Mem0Adapter", "get_memory_provider"])
def test_a_graph_store_is_refused_saying_it_needs_an_llm(build: Any, tmp_path: Path) -> None:
    cfg = seed_config(graph_store={"provider": "neo4j", "config": NEO4J},
                      vector_store={"provider": "neo4j", "config": NEO4J})
    with pytest.raises(ConfigError) as info:
        build(cfg)
    message = str(info.value)
    assert "oss.graph_store cannot work here" in message and "needs a real LLM" in message, message
    assert "neo4j://" in message and "s3cret-pw" not in message, message


@pytest.mark.parametrize("build", [Mem0Adapter, get_memory_provider], ids=["Mem0Adapter", "get_memory_provider"])
def test_a_vector_store_mem0_has_not_is_refused_with_what_to_use(build: Any) -> None:
    with pytest.raises(ConfigError) as info:
        build(seed_config(vector_store={"provider": "neo4j", "config": NEO4J}))
    message = str(info.value)
    assert "mem0 2.2.1 has no neo4j vector store" in message and "Neo4jAdapter" in message, message
    assert "s3cret-pw" not in message
    with pytest.raises(ConfigError, match=r"oss\.embedding: memkit embeds for mem0 itself"):
        build(seed_config(embedding={"provider": "openai", "config": {"model": "text-embedding-3-small"}}))
    with pytest.raises(ConfigError, match=r"unknown key.* in oss: graph; it takes"):
        build(seed_config(graph={"provider": "neo4j"}))


def test_cloud_mode_reads_the_cloud_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEM0_API_KEY", raising=False)
    cfg = seed_config()
    cfg.mode = "cloud"
    # The seed's ${oc.env:MEM0_API_KEY,} is empty when the variable is unset: no key was given.
    with pytest.raises(ConfigError, match="cloud mode needs an API key"):
        Mem0Adapter(cfg)
    disabled = seed_config()
    disabled.enabled = False
    with pytest.raises(ConfigError, match="not enabled"):
        get_memory_provider(disabled)
