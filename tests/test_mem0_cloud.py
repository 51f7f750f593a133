"""Mem0 cloud mode: real ``mem0.MemoryClient`` code against a stand-in for the Mem0 platform.

The stand-in is the one fake in memkit's tests: the real service is not reachable
from here. It is a small HTTP server on 127.0.0.1 that speaks only the endpoints
the adapter uses, with the request and response shapes of mem0ai 2.2.1's client
(``/v1/ping/``, ``/v3/memories/add/``, ``/v3/memories/`` with ``page``/``page_size``,
``/v3/memories/search/``, ``/v1/memories/<id>/``, ``/v1/entities/``,
``/v2/entities/<type>/<name>/``). Its search ranks by word overlap; the platform's
ranking is the platform's business, the adapter only relies on "higher is better".
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("mem0", reason="the mem0 extra is not installed: pip install 'memkit[mem0]'")

from memkit import BackendUnavailableError, StorageError, get_memory_provider
from memkit.adapters import Mem0Adapter
from memkit.adapters._mem0 import _backend as mem0_module

API_KEY = "m0-test-secret-key-0123456789"


class _Platform:
    """The state of the stand-in service."""

    def __init__(self) -> None:
        self.memories: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str]] = []
        self.fail_search = False
        self.add_bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    @staticmethod
    def _scoped(memory: dict[str, Any], filters: dict[str, Any]) -> bool:
        for key in ("user_id", "agent_id", "run_id"):
            if key in filters and filters[key] != "*" and memory.get(key) != filters[key]:
                return False
        return True

    def select(self, filters: dict[str, Any]) -> list[dict[str, Any]]:
        with self.lock:
            return [m for m in self.memories.values() if self._scoped(m, filters)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


def _handler(platform: _Platform) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # keep pytest output clean
            return

        def _reply(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def _route(self, method: str) -> None:
            parts = urlsplit(self.path)
            path, query = parts.path, parse_qs(parts.query)
            platform.requests.append((method, re.sub(r"/[0-9a-f-]{36}/", "/<id>/", path)))
            if self.headers.get("Authorization") != f"Token {API_KEY}":
                self._reply(401, {"detail": "Invalid API key"})
                return
            if method == "GET" and path == "/v1/ping/":
                self._reply(200, {"org_id": "org", "project_id": "proj", "user_email": None})
            elif method == "POST" and path == "/v3/memories/add/":
                body = self._body()
                platform.add_bodies.append(body)
                now = datetime.now(UTC).isoformat()
                memory = {"id": str(uuid.uuid4()), "memory": body["messages"][0]["content"],
                          "metadata": body.get("metadata"), "created_at": now, "updated_at": now,
                          **body.get("filters", {})}
                with platform.lock:
                    platform.memories[memory["id"]] = memory
                self._reply(200, {"results": [{"id": memory["id"], "memory": memory["memory"], "event": "ADD"}]})
            elif method == "POST" and path == "/v3/memories/":
                rows = platform.select(self._body().get("filters", {}))
                page, size = int(query.get("page", ["1"])[0]), int(query.get("page_size", ["100"])[0])
                chunk = rows[(page - 1) * size : page * size]
                more = page * size < len(rows)
                self._reply(200, {"count": len(rows), "next": f"{path}?page={page + 1}" if more else None,
                                  "previous": None, "results": chunk})
            elif method == "POST" and path == "/v3/memories/search/":
                if platform.fail_search:
                    self._reply(500, {"detail": "search backend down"})
                    return
                body = self._body()
                wanted = _words(body["query"])
                scored = []
                for m in platform.select(body.get("filters", {})):
                    score = len(wanted & _words(m["memory"])) / max(len(wanted), 1)
                    if score >= body.get("threshold", 0.0) and score > 0:
                        scored.append({**m, "score": score})
                scored.sort(key=lambda m: -m["score"])
                self._reply(200, {"results": scored[: body.get("top_k", 20)]})
            elif path.startswith("/v1/memories/") and method in ("GET", "DELETE"):
                memory_id = path.split("/")[3]
                with platform.lock:
                    found = platform.memories.get(memory_id)
                    if found is not None and method == "DELETE":
                        del platform.memories[memory_id]
                if found is None:
                    self._reply(404, {"detail": "Memory not found"})
                else:
                    self._reply(200, found if method == "GET" else {"message": "Memory deleted successfully!"})
            elif method == "GET" and path == "/v1/entities/":
                names = {("user", m["user_id"]) for m in platform.select({})} | {
                    ("agent", m["agent_id"]) for m in platform.select({})}
                self._reply(200, {"results": [{"type": t, "name": n} for t, n in sorted(names)]})
            elif method == "DELETE" and path.startswith("/v2/entities/"):
                _, _, _, kind, name, _ = path.split("/")
                with platform.lock:
                    for memory_id in [i for i, m in platform.memories.items() if m.get(f"{kind}_id") == name]:
                        del platform.memories[memory_id]
                self._reply(200, {"message": "Entity deleted"})
            else:
                self._reply(404, {"detail": f"no such endpoint: {method} {path}"})

        def do_GET(self) -> None:
            self._route("GET")

        def do_POST(self) -> None:
            self._route("POST")

        def do_DELETE(self) -> None:
            self._route("DELETE")

    return Handler


@pytest.fixture
def platform() -> Iterator[tuple[_Platform, str]]:
    state = _Platform()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
async def cloud(platform: tuple[_Platform, str]) -> Any:
    adapter = Mem0Adapter(mode="cloud", api_key=API_KEY, base_url=platform[1])
    yield adapter
    await adapter.aclose()


async def test_cloud_round_trip_through_the_client(cloud: Mem0Adapter, platform: tuple[_Platform, str]) -> None:
    state, _ = platform
    first = await cloud.add("TP53 mutation found in sample 7", "alice", "bio", {"gene": "TP53", "n": 1})
    second = await cloud.add("BRCA1 variant is benign", "alice", "bio", {"gene": "BRCA1", "n": 2})
    await cloud.add("TP53 in another namespace", "bob", "bio")
    trace = await cloud.add_trace("bio", "wf-1", {"tool": "blast", "status": "ok"}, user_id="alice")

    items = await cloud.get_all("alice", "bio")
    assert [i.id for i in items] == [trace, second, first]
    assert items[2].metadata == {"gene": "TP53", "n": 1} and items[2].user_id == "alice"
    hits = await cloud.search("TP53 mutation", "alice", "bio")
    assert hits[0].id == first and hits[0].score == 1.0
    assert [h.id for h in await cloud.search("", "alice", "bio", filters={"n": {"$gte": 2}})] == [second]
    assert [h.id for h in await cloud.search("blast", "alice", "bio", filters={"type": "trace"})] == [trace]

    stats = await cloud.stats()
    assert (stats.memories, stats.traces, stats.namespaces, stats.mode) == (4, 1, 2, "cloud")
    assert {(n.user_id, n.agent_id, n.count) for n in await cloud.namespaces()} == {
        ("alice", "bio", 3), ("bob", "bio", 1)}
    got = await cloud.get(first)
    assert got is not None and got.content == "TP53 mutation found in sample 7"
    assert await cloud.get(str(uuid.uuid4())) is None
    assert await cloud.delete(first, user_id="bob") is False
    assert await cloud.delete(first) is True
    assert await cloud.delete(first) is False

    # Identities travel inside filters (the v3 API rejects them at the top level) and
    # adds never ask the platform to infer.
    assert set(state.requests) <= {
        ("GET", "/v1/ping/"), ("POST", "/v3/memories/add/"), ("POST", "/v3/memories/"),
        ("POST", "/v3/memories/search/"), ("GET", "/v1/memories/<id>/"), ("DELETE", "/v1/memories/<id>/"),
    }
    stored = state.memories[second]
    assert (stored["user_id"], stored["agent_id"]) == ("alice", "bio")
    assert all(b["infer"] is False and "user_id" not in b for b in state.add_bodies)


async def test_cloud_listing_follows_pages(
    cloud: Mem0Adapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mem0_module, "_CLOUD_PAGE", 3)
    ids = [await cloud.add(f"note {i}", "u", "a") for i in range(8)]
    assert [i.id for i in await cloud.get_all("u", "a", limit=8)] == ids[::-1]
    assert (await cloud.stats()).memories == 8


async def test_cloud_reset_deletes_every_entity(cloud: Mem0Adapter, platform: tuple[_Platform, str]) -> None:
    await cloud.add("one", "u1", "a1")
    await cloud.add("two", "u2", "a2")
    assert await cloud.reset() is True
    assert platform[0].memories == {}
    assert ("GET", "/v1/entities/") in platform[0].requests


async def test_cloud_errors_never_show_the_key(platform: tuple[_Platform, str]) -> None:
    state, url = platform
    with pytest.raises(BackendUnavailableError) as err:
        Mem0Adapter(mode="cloud", api_key="wrong-" + API_KEY, base_url=url)
    assert API_KEY not in str(err.value) and "127.0.0.1" in str(err.value)

    adapter = Mem0Adapter(mode="cloud", api_key=API_KEY, base_url=url)
    try:
        assert API_KEY not in repr(adapter)
        state.fail_search = True
        with pytest.raises(StorageError) as failure:
            await adapter.search("anything", "u", "a")
        assert API_KEY not in str(failure.value)
        health = await adapter.health()
        assert health.ok is False and API_KEY not in health.detail
    finally:
        await adapter.aclose()


async def test_cloud_from_url_takes_the_key_from_options_or_env(
    platform: tuple[_Platform, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = platform
    host = urlsplit(url).netloc
    adapter = get_memory_provider({"url": f"mem0+cloud://{host}?tls=0", "api_key": API_KEY})
    assert isinstance(adapter, Mem0Adapter) and adapter.mode == "cloud"
    assert repr(adapter) == f"Mem0Adapter(mode='cloud', {host!r})"
    adapter.close()
    monkeypatch.setenv("MEM0_API_KEY", API_KEY)
    from_env = get_memory_provider(f"mem0+cloud://{host}?tls=0")
    assert (await from_env.health()).ok is True  # type: ignore[attr-defined]
    from_env.close()  # type: ignore[attr-defined]
    monkeypatch.delenv("MEM0_API_KEY")
    with pytest.raises(Exception, match="API key"):
        get_memory_provider(f"mem0+cloud://{host}?tls=0")
