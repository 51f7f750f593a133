"""The store base: a backend written outside memkit with public imports only (``tests/dict_backend.py``),
registered by an entry point and opened by URL, passes the same conformance suite as memkit's
adapters; and what a backend offers follows from the methods it writes."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import memkit
from memkit import SupportsGet, SupportsMarks, SupportsStats, SupportsTraceColumns
from memkit.adapters import InMemoryAdapter, SQLiteAdapter
from memkit.store import HANDLERS, Capability, ListOp, MarksOp, PingOp, Store
from memkit.testing import ProviderConformance
from tests.dict_backend import DictStore

ROOT = Path(__file__).resolve().parents[1]


def _register(where: Path, scheme: str = "dict", target: str = "tests.dict_backend:DictStore") -> None:
    """Install a distribution that declares the backend, as ``pip install`` of a package would."""
    info = where / f"{scheme}_backend-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {scheme}-backend\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[memkit.backends]\n{scheme} = {target}\n")


@pytest.fixture
def registered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _register(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))


class TestDictStore(ProviderConformance):
    """A backend written against the public base alone, opened by its URL, passes the whole suite."""

    @pytest.fixture
    def make_provider(self, registered: None) -> Callable[[], object]:
        return lambda: memkit.get_memory_provider("dict://")


def test_an_entry_point_backend_opens_by_url_and_name(registered: None) -> None:
    assert type(memkit.get_memory_provider("dict://")) is DictStore
    assert type(memkit.get_memory_provider({"provider": "dict"})) is DictStore
    assert "dict" in memkit.store._registry.provider_names()
    with memkit.open("dict://") as mem:
        mem.add("kinase screen", "u", "a")
        assert [m.content for m in mem.search("kinase", "u", "a")] == ["kinase screen"]


def test_an_entry_point_backend_is_found_in_a_fresh_interpreter(tmp_path: Path) -> None:
    _register(tmp_path)
    code = "import memkit; print(type(memkit.get_memory_provider('dict://')).__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PATH": "/usr/bin:/bin"})
    assert out.stdout.strip() == "DictStore"


def test_a_backend_that_cannot_load_or_clashes_is_told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _register(tmp_path / "a", "broken", "tests.no_such_module:Nothing")
    _register(tmp_path / "b", "sqlite", "tests.dict_backend:DictStore")  # memkit's own scheme wins
    monkeypatch.syspath_prepend(str(tmp_path / "a"))
    monkeypatch.syspath_prepend(str(tmp_path / "b"))
    with pytest.raises(memkit.ConfigError, match=r"the 'broken' backend .* cannot be loaded"):
        memkit.get_memory_provider("broken://")
    with pytest.raises(memkit.ConfigError, match=r"unknown memory URL scheme nope://"):
        memkit.get_memory_provider("nope://")
    assert type(memkit.get_memory_provider("sqlite://")).__name__ == "SQLiteAdapter"


def test_the_public_base_needs_no_private_import() -> None:
    source = (ROOT / "tests" / "dict_backend.py").read_text()
    imports = [line for line in source.splitlines() if line.startswith(("import ", "from "))]
    assert imports and all(" memkit._" not in line and "memkit._" not in line.split()[1] for line in imports), imports
    code = [line for line in source.splitlines() if line.strip() and not line.lstrip().startswith(("#", '"""'))]
    assert len(code) <= 45, len(code)
    assert {Capability.GET, Capability.AS_OF, Capability.ADD_MANY, Capability.PAGING} == DictStore.capabilities


def test_isinstance_answers_from_the_declaration() -> None:
    store = DictStore()
    assert isinstance(store, SupportsGet)
    # The base has a stats() method, but the store does not declare STATS: it does not support it.
    assert not isinstance(store, SupportsStats) and not isinstance(store, SupportsMarks)
    assert not isinstance(InMemoryAdapter(), SupportsTraceColumns)
    sqlite = SQLiteAdapter(":memory:", embedder=None)
    try:
        assert isinstance(sqlite, SupportsTraceColumns) and isinstance(sqlite, SupportsMarks)
    finally:
        sqlite.close()


def test_an_undeclared_capability_is_absent() -> None:
    store = DictStore()
    # The base writes stats() and marks(); a store that does not declare them does not have them.
    assert not hasattr(store, "stats") and not hasattr(store, "put_marks") and hasattr(store, "get")
    with pytest.raises(AttributeError, match=r"DictStore does not support stats\(\)"):
        store.stats()  # type: ignore[unused-coroutine]


class _Forwarding:
    """A wrapper that forwards every attribute, as a third-party proxy may."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)


def test_a_forwarding_wrapper_offers_what_the_store_declares() -> None:
    assert isinstance(_Forwarding(InMemoryAdapter()), SupportsMarks)
    assert not isinstance(_Forwarding(InMemoryAdapter()), SupportsTraceColumns)
    assert not isinstance(_Forwarding(DictStore()), SupportsStats)


def test_half_a_capability_fails_at_class_definition() -> None:
    async def _marks(self: Store, op: MarksOp) -> list[memkit.Mark]:
        return []

    with pytest.raises(TypeError, match="writes _marks but not _put_marks, _remove_marks: MARKS is offered whole"):
        type("Half", (DictStore,), {"_marks": _marks})
    with pytest.raises(TypeError, match="sets capabilities: a backend offers one by writing its methods"):
        type("Declared", (DictStore,), {"capabilities": frozenset({Capability.MARKS})})


def test_every_operation_has_one_backend_method() -> None:
    names = [name for name, _ in HANDLERS.values()]
    assert len(names) == len(set(names))
    assert all(callable(getattr(Store, name)) for name in names)


class FailingPing(DictStore):
    async def _ping(self, op: PingOp) -> str:
        raise ConnectionError("the server went away")


@pytest.mark.asyncio
async def test_health_is_timed_and_a_failure_reported_not_raised() -> None:
    health = await FailingPing().health()
    assert (health.ok, health.provider, health.detail) == (False, "dict", "the server went away")
    assert health.latency_ms >= 0
    with pytest.raises(AttributeError, match="does not support health"):  # undeclared: absent, not reported
        await DictStore().health()


@pytest.mark.asyncio
async def test_execute_runs_an_operation_value() -> None:
    store = DictStore()
    memory_id = await store.add("kinase screen", "u", "a")
    assert [r.id for r in await store.execute(ListOp("u", "a", (), limit=10))] == [memory_id]
    with pytest.raises(NotImplementedError, match="does not support marks"):
        await store.execute(MarksOp(user_id="u"))
