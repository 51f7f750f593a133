"""get_memory_provider / memkit.open: every accepted config shape and every refusal."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

import memkit
from memkit import ConfigError
from memkit.adapters import InMemoryAdapter, MockMemoryAdapter, SQLiteAdapter


@pytest.mark.parametrize("cfg", [None, {}, SimpleNamespace(), {"embedder": None}], ids=["none", "dict", "obj", "opts"])
def test_the_factory_default_is_the_seeds_mock_and_writes_nothing(
    cfg: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMKIT_URL", f"sqlite:///{tmp_path}/env.db")  # the factory's default ignores it
    monkeypatch.chdir(tmp_path)
    provider = memkit.get_memory_provider() if cfg is None else memkit.get_memory_provider(cfg)
    assert isinstance(provider, MockMemoryAdapter)
    assert list(tmp_path.iterdir()) == []  # no ./data/memory.db, no env.db


def test_open_defaults_to_sqlite_data_memory_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMKIT_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    for mem in (memkit.open(), memkit.open({"busy_timeout_ms": 50})):
        assert isinstance(mem.provider, SQLiteAdapter)
        assert Path(mem.provider.path) == Path("data/memory.db")
        mem.close()
    assert (tmp_path / "data" / "memory.db").exists()


def test_env_url_wins_over_the_open_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMKIT_URL", "memory://")
    assert isinstance(memkit.open().provider, InMemoryAdapter)
    assert isinstance(memkit.open({}).provider, InMemoryAdapter)


@pytest.mark.parametrize("name", ["mock", "memory", "in_memory", "MOCK"])
def test_seed_provider_names(name: str) -> None:
    assert isinstance(memkit.get_memory_provider({"provider": name}), MockMemoryAdapter)


def test_sqlite_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    absolute = memkit.get_memory_provider(f"sqlite:///{tmp_path}/abs.db")
    assert isinstance(absolute, SQLiteAdapter) and absolute.path == f"{tmp_path}/abs.db"
    absolute.close()
    monkeypatch.chdir(tmp_path)
    relative = memkit.get_memory_provider("sqlite:///rel/x.db")
    assert isinstance(relative, SQLiteAdapter) and relative.path == "rel/x.db"
    relative.close()
    in_ram = memkit.get_memory_provider("sqlite://")
    assert isinstance(in_ram, SQLiteAdapter) and in_ram.path == ":memory:"
    in_ram.close()


def test_dict_and_object_configs(tmp_path: Path) -> None:
    by_dict = memkit.get_memory_provider({"provider": "sqlite", "path": str(tmp_path / "a.db"), "busy_timeout_ms": 50})
    assert isinstance(by_dict, SQLiteAdapter)
    by_dict.close()
    by_url = memkit.get_memory_provider({"url": f"sqlite:///{tmp_path}/b.db"})
    assert isinstance(by_url, SQLiteAdapter)
    by_url.close()
    # an OmegaConf-style object with attributes, without importing omegaconf
    by_attrs = memkit.get_memory_provider(SimpleNamespace(provider="sqlite", path=str(tmp_path / "c.db")))
    assert isinstance(by_attrs, SQLiteAdapter)
    by_attrs.close()


def test_mapping_subclass_like_dictconfig() -> None:
    from collections.abc import Iterator, Mapping

    class FakeDictConfig(Mapping[str, object]):
        def __init__(self, data: dict[str, object]) -> None:
            self._data = data

        def __getitem__(self, key: str) -> object:
            return self._data[key]

        def __iter__(self) -> Iterator[str]:
            return iter(self._data)

        def __len__(self) -> int:
            return len(self._data)

    assert isinstance(memkit.get_memory_provider(FakeDictConfig({"provider": "mock"})), InMemoryAdapter)


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"provider": "redis"}, "valid providers: memory, sqlite"),
        ("redis://localhost", "valid schemes"),
        ("", "empty"),
        ({"provider": "sqlite", "nope": 1}, "bad options for the 'sqlite' provider"),
        ({"provider": "memory", "url": "sqlite:///x.db"}, "does not match"),
        ("sqlite://host/x.db", "no host"),
        ("sqlite:///x.db?foo=1", "unknown sqlite:// URL options: foo"),
        (42, "must be a URL, a dict or an object"),
    ],
)
def test_bad_configs_raise_config_error(cfg: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        memkit.get_memory_provider(cfg)
    assert isinstance(info.value, ValueError)  # the seed's contract: a ValueError


def test_missing_optional_dependency_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    from memkit.store import _registry as _factory

    entry = _factory._Entry("fancy", "memkit.adapters._memory._adapter:InMemoryAdapter", ("fancy",), extra="fancy",
                            requires="memkit_not_installed_pkg")
    monkeypatch.setattr(_factory, "_REGISTRY", (*_factory._REGISTRY, entry))
    with pytest.raises(memkit.BackendUnavailableError, match=r"pip install 'memkit\[fancy\]'"):
        memkit.get_memory_provider("fancy://x")
