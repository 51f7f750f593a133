"""memkit against the store a LangGraph user would pick instead, on the same data, alternated.

``python bench/peers.py`` builds, for each backend, a memkit ``MemkitStore`` and LangGraph's own
store on the same generated items, and times the operations a LangGraph agent runs:

=========  ==========================================  =============================================
backend    memkit                                      peer
=========  ==========================================  =============================================
memory     ``MemkitStore("memory://")``                ``langgraph.store.memory.InMemoryStore``
sqlite     ``MemkitStore("sqlite:///…")``              ``langgraph.store.sqlite.SqliteStore``
postgres   ``MemkitStore("postgresql://…")``           ``langgraph.store.postgres.PostgresStore``
mem0       memkit's SQLite store, through the port     ``Mem0Adapter``: Mem0 2.2.1 OSS (local Qdrant)
otlp       ``import_otlp`` of a span file into SQLite  Arize Phoenix ingesting the same spans sent
                                                       over OTLP/HTTP, until its database holds them
=========  ==========================================  =============================================

Both sides are the same ``BaseStore`` interface, so one function drives both; both embed with
memkit's shipped model (the peer through its ``IndexConfig['embed']``), and both index the same
field. Each (backend, system, round) runs in a fresh process on a fresh database, so the peak RSS
is that system's own; the rounds alternate which system goes first. The numbers printed are
medians over the rounds of each round's median (latencies) or total (bulk put).

Postgres runs both systems against one local server (``memkit.testing.PostgresServer``, or
``--pg-url`` naming a server whose ``postgres`` database can create databases); the client's CPU
is measured, the server's is not.

``--write-readme`` replaces the table between the ``peers:start``/``peers:end`` markers in
README.md with this run's (generated, never typed). ``--quick`` is the smoke run the test suite
makes: a few hundred items, one round, checking the harness, not the speed.

The peers come from ``pip install -e '.[peers]'`` (benchmark-only: never memkit's install path);
Phoenix, whose dependencies do not install beside memkit's, from a venv of its own
(``make bench-peers`` makes ``.venv-phoenix``; ``--phoenix PYTHON`` names another), started on
127.0.0.1 with a working folder of its own and stopped after each round. Phoenix and Mem0 ingest far
slower than the stores, so their sizes are their own options (``--spans``, ``--mem0-size``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._util import load_average  # noqa: E402

#: Calls timed for a get (and a tenth as many for list_namespaces) whatever ``--samples`` says.
CHEAP_CALLS = 500
BACKENDS = ("memory", "sqlite", "postgres", "mem0", "otlp")
LANGGRAPH = ("memory", "sqlite", "postgres")
SYSTEMS = ("memkit", "peer")
GENES = [f"G{i:02d}" for i in range(20)]  # a gene filter keeps 5% of the items
# Labels of one width: SqliteStore matches a namespace prefix as text, so its ("notes", "project-3")
# would also list project-30..39 and the two systems would answer different questions.
NAMESPACES = [("notes", f"project-{i:02d}") for i in range(50)]
MARK_START, MARK_END = "<!-- peers:start -->", "<!-- peers:end -->"
# (operation, what the number is); lower is better for every one of them
_STORE_OPS = [
    ("put", "bulk put, s for all items"),
    ("get", "get one item, ms"),
    ("search", "search with a query, ms"),
    ("search_filter", "query + equality filter, ms"),
    # memkit's hybrid ranking (keyword + semantic) is what the peers do not do; with
    # MemkitStore(search_mode="semantic") it ranks as they do, vectors only
    ("search_semantic", "search with a query, memkit semantic-only, ms"),
    ("search_filter_semantic", "query + filter, memkit semantic-only, ms"),
    ("filter_only", "filter, no query, ms"),
    ("list10", "list 10 of a namespace, ms"),
    ("list_namespaces", "list_namespaces, ms"),
]
_FOOTPRINT = [("file_mb", "storage, MB"), ("rss_mb", "peak RSS, MB")]
# memkit's Postgres store indexes vectors in the background after writes (its ingest does not wait for
# the graph); a search right after a bulk load scans the rows not indexed yet. index_vectors() builds
# the index at once: these rows time it with the load, and the searches after it.
_INDEXED = [("put_indexed", "bulk put, then memkit's index_vectors(), s"),
            ("search_semantic_indexed", "search with a query, memkit semantic-only after index_vectors(), ms")]
OPERATIONS: dict[str, list[tuple[str, str]]] = {
    **{backend: _STORE_OPS + _FOOTPRINT for backend in LANGGRAPH},
    "postgres": _STORE_OPS + _INDEXED + _FOOTPRINT,
    "mem0": [("add", "add one memory, ms"), ("search", "search, ms"), ("list10", "list 10, ms"), *_FOOTPRINT],
    # memkit embeds every span for semantic search over steps; ?embedder=none stores none (keyword only)
    "otlp": [("ingest", "ingest all spans, s"), ("ingest_keyword", "ingest all spans, memkit keyword-only, s"),
             *_FOOTPRINT, ("file_mb_keyword", "storage, memkit keyword-only, MB")],
}

_WORDS = (
    "alignment variant coverage reads sample quality annotation pathway expression cohort "
    "mutation protein binding assay knockout tumour control replicate batch normalisation "
    "threshold cluster marker lineage enrichment motif promoter enhancer splice isoform"
).split()


def make_items(count: int, seed: int) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    """Research notes: a sentence of field words, a gene (20 values) and a lab, in 50 namespaces."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        gene = rng.choice(GENES)
        words = " ".join(rng.choices(_WORDS, k=rng.randint(6, 14)))
        value = {"text": f"{gene} {words}", "gene": gene, "lab": rng.choice(["north", "south"]), "n": i}
        items.append((NAMESPACES[i % len(NAMESPACES)], f"note-{i}", value))
    return items


def make_queries(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(_WORDS, rng.randint(2, 4))) for _ in range(count)]


def _shipped_embed(texts: Sequence[str]) -> list[list[float]]:
    from memkit.embeddings import get_embedder

    embedder = get_embedder("default")
    return [list(map(float, row)) for row in embedder.embed(list(texts))]


@contextmanager
def open_system(backend: str, system: str, where: str) -> Iterator[tuple[Any, Callable[[], float], Any]]:
    """The store, a function giving its storage in MB (0 where it keeps nothing on disk), and the
    store ranking vectors only (memkit's ``search_mode="semantic"`` over the same items; the peer itself)."""
    if system == "memkit":
        from memkit.langgraph import MemkitStore

        url = {"memory": "memory://", "sqlite": f"sqlite:///{where}"}.get(backend, where)
        store = MemkitStore(url, index={"fields": ["text"]}, user_id="bench", agent_id="peers")
        # memory:// has no embedder unless given one: keyword-only there, on both of memkit's rows
        mode = "semantic" if "semantic" in getattr(store._provider, "search_modes", ()) else None
        semantic = MemkitStore(store._memory, index={"fields": ["text"]}, user_id="bench", agent_id="peers",
                               search_mode=mode)
        try:
            yield store, lambda: _storage_mb(backend, where), semantic
        finally:
            store.close()
        return
    index: Any = {"dims": 384, "embed": _shipped_embed, "fields": ["text"]}
    if backend == "memory":
        from langgraph.store.memory import InMemoryStore

        peer = InMemoryStore(index=index)
        yield peer, lambda: 0.0, peer
    elif backend == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        conn = _extension_sqlite().connect(where, check_same_thread=False, isolation_level=None)
        try:
            peer = SqliteStore(conn, index=index)
            peer.setup()
            yield peer, lambda: _storage_mb(backend, where), peer
        finally:
            conn.close()
    else:
        from langgraph.store.postgres import PostgresStore

        with PostgresStore.from_conn_string(where, index=index) as peer:
            peer.setup()
            yield peer, lambda: _storage_mb(backend, where), peer


def _extension_sqlite() -> Any:
    """An sqlite3 module that can load sqlite-vec: SqliteStore's vector index needs it, and a Python
    built without loadable extensions (pyenv's default) has none, so pysqlite3 stands in there."""
    import sqlite3

    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    import pysqlite3.dbapi2

    return pysqlite3.dbapi2


def _storage_mb(backend: str, where: str) -> float:
    if backend == "memory":
        return 0.0
    if backend == "sqlite":
        base = Path(where)
        return sum(p.stat().st_size for p in base.parent.glob(base.name + "*")) / 1e6
    import psycopg

    with psycopg.connect(where) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return float(row[0]) / 1e6 if row else 0.0


def _timed(calls: Sequence[Callable[[], Any]]) -> tuple[list[float], float]:
    """Wall seconds of each call, and the CPU seconds of all of them."""
    walls = []
    cpu0 = time.process_time()
    for call in calls:
        start = time.perf_counter()
        call()
        walls.append(time.perf_counter() - start)
    return walls, time.process_time() - cpu0


def _latency(walls: list[float], cpu: float) -> dict[str, float]:
    ordered = sorted(walls)
    return {
        "median": statistics.median(ordered) * 1e3,
        "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))] * 1e3,
        "cpu": cpu / len(walls) * 1e3,
    }


def run_worker(backend: str, system: str, size: int, samples: int, where: str) -> dict[str, Any]:
    """One system on one fresh database: every operation, its numbers as a dict."""
    from langgraph.store.base import PutOp

    items = make_items(size, seed=size)
    queries = make_queries(samples, seed=size + 1)
    rng = random.Random(size + 2)
    out: dict[str, Any] = {}
    with open_system(backend, system, where) as (store, storage_mb, semantic):
        batches = [
            [PutOp(namespace=ns, key=key, value=value) for ns, key, value in items[i : i + 500]]
            for i in range(0, len(items), 500)
        ]
        walls, cpu = _timed([lambda ops=ops: store.batch(ops) for ops in batches])
        out["put"] = {"median": sum(walls), "p95": sum(walls), "cpu": cpu, "per_s": size / sum(walls)}
        # A get is a few hundredths of a millisecond: its median over a handful of calls measures how
        # warm the connection's page cache happens to be (memkit reads through a connection of its
        # own, the peer through the one that just wrote), not the read. Both sides get the same picks.
        picks = [rng.choice(items) for _ in range(max(samples, CHEAP_CALLS))]
        out["get"] = _latency(*_timed([lambda p=p: store.get(p[0], p[1]) for p in picks]))
        out["search"] = _latency(*_timed([lambda q=q: store.search(("notes",), query=q, limit=10) for q in queries]))
        genes = [rng.choice(GENES) for _ in queries]
        out["search_filter"] = _latency(*_timed([
            lambda q=q, g=g: store.search(("notes",), query=q, filter={"gene": g}, limit=10)
            for q, g in zip(queries, genes, strict=True)
        ]))
        out["search_semantic"] = _latency(*_timed([
            lambda q=q: semantic.search(("notes",), query=q, limit=10) for q in queries
        ]))
        out["search_filter_semantic"] = _latency(*_timed([
            lambda q=q, g=g: semantic.search(("notes",), query=q, filter={"gene": g}, limit=10)
            for q, g in zip(queries, genes, strict=True)
        ]))
        out["filter_only"] = _latency(*_timed([
            lambda g=g: store.search(("notes",), filter={"gene": g}, limit=10) for g in genes
        ]))
        spaces = [rng.choice(NAMESPACES) for _ in queries]
        out["list10"] = _latency(*_timed([lambda ns=ns: store.search(ns, limit=10) for ns in spaces]))
        out["list_namespaces"] = _latency(*_timed([
            lambda: store.list_namespaces(limit=100) for _ in range(max(samples, CHEAP_CALLS // 10))
        ]))
        if backend == "postgres":
            built, built_cpu = 0.0, 0.0
            if system == "memkit":
                from memkit._sync import run_sync

                walls, built_cpu = _timed([lambda: run_sync(store._provider.index_vectors())])
                built = walls[0]
            total = out["put"]["median"] + built
            out["put_indexed"] = {"median": total, "p95": total, "cpu": out["put"]["cpu"] + built_cpu}
            out["search_semantic_indexed"] = _latency(*_timed([
                lambda q=q: semantic.search(("notes",), query=q, limit=10) for q in queries
            ]))
        # the systems must answer the same questions: a wrong answer fast is not a win
        sample = store.search(spaces[0], limit=10)
        out["check"] = {"list10": len(sample), "namespaces": len(store.list_namespaces(limit=100))}
        out["file_mb"] = {"median": storage_mb()}
    out["rss_mb"] = {"median": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return out


def run_mem0_worker(system: str, size: int, samples: int, where: str) -> dict[str, Any]:
    """memkit's SQLite store or Mem0 through the same port calls: single adds, searches, lists."""
    import asyncio

    from memkit.adapters import Mem0Adapter, SQLiteAdapter
    from memkit.embeddings import get_embedder

    embedder = get_embedder("default")
    items = make_items(size, seed=size)
    queries = make_queries(samples, seed=size + 1)

    async def go() -> dict[str, Any]:
        store: Any = (SQLiteAdapter(where, embedder=embedder) if system == "memkit"
                      else Mem0Adapter(where, threshold=0.0, embedder=embedder))
        out: dict[str, Any] = {}
        for op, calls in (
            ("add", [lambda v=v: store.add(v["text"], "bench", "peers", {"gene": v["gene"]}) for _, _, v in items]),
            ("search", [lambda q=q: store.search(q, "bench", "peers", limit=10) for q in queries]),
            ("list10", [lambda: store.get_all("bench", "peers", limit=10) for _ in queries]),
        ):
            walls, cpu0 = [], time.process_time()
            for call in calls:
                start = time.perf_counter()
                await call()
                walls.append(time.perf_counter() - start)
            out[op] = _latency(walls, time.process_time() - cpu0)
        out["check"] = {"listed": len(await store.get_all("bench", "peers", limit=10))}
        await store.aclose()
        out["file_mb"] = {"median": _tree_mb(Path(where))}
        return out

    result = asyncio.run(go())
    result["rss_mb"] = {"median": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    return result


def _tree_mb(path: Path) -> float:
    files = [path] if path.is_file() else list(path.rglob("*")) if path.is_dir() else []
    files += list(path.parent.glob(path.name + "-*")) if path.is_file() else []
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def run_otlp_worker(system: str, spans: int, where: str) -> dict[str, Any]:
    """The same SDK spans into memkit (``import_otlp`` of their OTLP file, store closed) or into
    Phoenix (sent over OTLP/HTTP in exporter-sized batches, until its database counts them all)."""
    from bench.otel_import import make_spans

    made = make_spans(spans)
    folder = Path(where)
    folder.mkdir(parents=True, exist_ok=True)
    if system == "memkit":
        import memkit
        from memkit.otel import import_otlp, spans_to_otlp

        path = folder / "spans.json"
        path.write_text(json.dumps(spans_to_otlp(made)))
        measured = []
        for name, options in (("memkit.db", ""), ("keyword.db", "?embedder=none")):
            cpu0, start = _all_cpu(), time.perf_counter()
            with memkit.open(f"sqlite:///{folder / name}{options}") as mem:
                import_otlp(mem, path)
            measured.append((time.perf_counter() - start, _all_cpu() - cpu0, _tree_mb(folder / name)))
        (wall, cpu, storage), (kw_wall, kw_cpu, kw_storage) = measured
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # the default import's (more)
    else:
        wall, cpu, storage, rss = _phoenix_ingest(made, folder)
        kw_wall, kw_cpu, kw_storage = wall, cpu, storage  # the same Phoenix, beside memkit's other mode
    return {"ingest": {"median": wall, "p95": wall, "cpu": cpu, "per_s": len(made) / wall},
            "ingest_keyword": {"median": kw_wall, "p95": kw_wall, "cpu": kw_cpu},
            "file_mb": {"median": storage}, "file_mb_keyword": {"median": kw_storage},
            "rss_mb": {"median": rss}, "check": {"spans": len(made)}}


def _all_cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _phoenix_ingest(spans: Any, folder: Path) -> tuple[float, float, float, float]:
    """Start Phoenix on 127.0.0.1, send the spans, wait until stored; wall s, CPU s (Phoenix's and the
    sender's), storage MB, Phoenix's peak RSS MB. Phoenix is stopped before this returns."""
    import sqlite3
    import urllib.request

    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    python = os.environ.get("MEMKIT_BENCH_PHOENIX") or str(ROOT / ".venv-phoenix" / "bin" / "python")
    if not Path(python).exists():
        raise RuntimeError(f"no Phoenix at {python}: `make bench-peers` makes .venv-phoenix, or pass --phoenix")
    port = _free_port()
    env = {**os.environ, "PHOENIX_WORKING_DIR": str(folder), "PHOENIX_HOST": "127.0.0.1",
           "PHOENIX_PORT": str(port), "PHOENIX_GRPC_PORT": str(_free_port())}
    log = (folder / "phoenix.log").open("w")
    server = subprocess.Popen([python, str(Path(__file__).with_name("_phoenix_serve.py"))], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                    break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Phoenix did not start: see {folder / 'phoenix.log'}") from None
                time.sleep(0.5)
        exporter = OTLPSpanExporter(endpoint=f"http://127.0.0.1:{port}/v1/traces")
        server_cpu0, cpu0, start = _proc_cpu(server.pid), time.process_time(), time.perf_counter()
        for i in range(0, len(spans), 512):  # the BatchSpanProcessor's default batch
            exporter.export(spans[i : i + 512])
        while True:
            with sqlite3.connect(folder / "phoenix.db") as db:
                stored = db.execute("SELECT count(*) FROM spans").fetchone()[0]
            if stored >= len(spans):
                break
            if time.perf_counter() - start > 3600:
                raise RuntimeError(f"Phoenix stored {stored} of {len(spans)} spans in an hour")
            time.sleep(0.1)
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu0 + _proc_cpu(server.pid) - server_cpu0
        rss = _proc_peak_mb(server.pid)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()
    return wall, cpu, _tree_mb(folder / "phoenix.db"), rss


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _proc_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _worker_process(backend: str, system: str, size: int, samples: int, where: str) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", backend, system, str(size),
           str(samples), where]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{backend}/{system} at {size} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


@contextmanager
def _postgres(pg_url: str | None) -> Iterator[Callable[[str], str]]:
    """A function naming a fresh database on the benchmark's Postgres server by name."""
    if pg_url:
        import psycopg
        from psycopg import sql

        base = pg_url.rsplit("/", 1)[0]

        def fresh(name: str) -> str:
            with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            return f"{base}/{name}"

        yield fresh
        return
    from memkit.testing import PostgresServer

    with PostgresServer() as server:
        yield server.url


def run(backends: Sequence[str], sizes: Sequence[int], rounds: int, samples: int, pg_url: str | None = None,
        *, spans: int = 10_000, mem0_size: int = 2_000) -> dict[str, Any]:
    """Every backend and size, ``rounds`` times, the two systems alternating which goes first."""
    runs: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
    plan = [(b, n) for n in sizes for b in backends if b in LANGGRAPH]
    plan += [("mem0", mem0_size)] * ("mem0" in backends) + [("otlp", spans)] * ("otlp" in backends)
    with tempfile.TemporaryDirectory(prefix="memkit-peers-") as tmp, _postgres(
        pg_url if "postgres" in backends else "unused://") as fresh_pg:
        for r in range(rounds):
            for backend, size in plan:
                order = SYSTEMS if r % 2 == 0 else SYSTEMS[::-1]
                for system in order:
                    if backend == "postgres":
                        where = fresh_pg(f"peers_{system}_{size}_{r}")
                    else:
                        where = str(Path(tmp) / f"{backend}-{system}-{size}-{r}.db")
                    result = _worker_process(backend, system, size, samples, where)
                    runs.setdefault((backend, size, system), []).append(result)
                    first, label = OPERATIONS[backend][0]
                    print(f"  {backend:8} {system:6} {size:>7,} round {r + 1}: {label} "
                          f"{result[first]['median']:.2f}", file=sys.stderr)
    rows = []
    for (backend, size, system), results in runs.items():
        if system != "memkit":
            continue
        peers = runs[(backend, size, "peer")]
        for op, label in OPERATIONS[backend]:
            mine = statistics.median(r[op]["median"] for r in results)
            theirs = statistics.median(r[op]["median"] for r in peers)
            row = {"backend": backend, "size": size, "operation": op, "what": label,
                   "memkit": mine, "peer": theirs, "ratio": mine / theirs if theirs else None}
            if "p95" in results[0][op]:
                row["memkit_p95"] = statistics.median(r[op]["p95"] for r in results)
                row["peer_p95"] = statistics.median(r[op]["p95"] for r in peers)
                row["cpu_ratio"] = (statistics.median(r[op]["cpu"] for r in results)
                                    / max(statistics.median(r[op]["cpu"] for r in peers), 1e-9))
            rows.append(row)
    part = {"what": _what(rows), "rounds": rounds, "samples": samples, "load": load_average()}
    return {"rows": rows, "parts": [part],
            "checks": {f"{b}/{s}/{sy}": [r["check"] for r in rs] for (b, s, sy), rs in runs.items()}}


def _what(rows: Sequence[dict[str, Any]]) -> str:
    """What a run measured, for the caption: its backends and sizes."""
    sizes = ", ".join(f"{n:,}" for n in sorted({row["size"] for row in rows}))
    return f"{', '.join(dict.fromkeys(row['backend'] for row in rows))} at {sizes}"


def merge(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One table from runs made apart (a slow peer's rows, another size): each part keeps its own
    rounds and load average in the caption, and the rows follow the backends' order."""
    rows = [row for result in results for row in result["rows"]]
    order = {b: i for i, b in enumerate(BACKENDS)}
    rows.sort(key=lambda row: (order[row["backend"]], row["size"]))
    # a part saved before captions named their sizes is named from its rows
    parts = [{**part, "what": _what(result["rows"])} if " at " not in part["what"] else part
             for result in results for part in result["parts"]]
    return {"rows": rows, "parts": parts,
            "checks": {k: v for result in results for k, v in result["checks"].items()}}


def table(result: dict[str, Any]) -> str:
    """The markdown table of a run (what ``--write-readme`` puts in the README)."""
    parts = "; ".join(f"{p['what']}: {p['rounds']} alternated round{'s' * (p['rounds'] != 1)}, {p['samples']} "
                      f"calls a latency, load average at the end {p['load']}"
                      for p in result["parts"])
    lines = [
        f"Generated by `python bench/peers.py` ({parts}). Ratio is memkit / peer: below 1.0 memkit is "
        f"faster or smaller. A LangGraph `get` is timed over at least {CHEAP_CALLS} calls, `list_namespaces` over "
        f"{CHEAP_CALLS // 10}.",
        "",
        "| backend | items | operation | memkit | peer | ratio | p95 memkit / peer | CPU ratio |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for row in result["rows"]:
        ratio = "n/a" if row["ratio"] is None else f"{row['ratio']:.2f}"
        p95 = f"{row['memkit_p95']:.2f} / {row['peer_p95']:.2f}" if "memkit_p95" in row else ""
        cpu = f"{row['cpu_ratio']:.2f}" if "cpu_ratio" in row else ""
        lines.append(f"| {row['backend']} | {row['size']:,} | {row['what']} | {row['memkit']:.2f} | "
                     f"{row['peer']:.2f} | {ratio} | {p95} | {cpu} |")
    return "\n".join(lines)


def write_readme(text: str, readme: Path) -> None:
    body = readme.read_text(encoding="utf-8")
    start, end = body.index(MARK_START) + len(MARK_START), body.index(MARK_END)
    readme.write_text(body[:start] + "\n" + text + "\n" + body[end:], encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", nargs=5, metavar=("BACKEND", "SYSTEM", "SIZE", "SAMPLES", "WHERE"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=100, help="calls timed for each latency")
    parser.add_argument("--spans", type=int, default=10_000, help="spans for the otlp comparison")
    parser.add_argument("--mem0-size", type=int, default=2_000, help="memories for the mem0 comparison")
    parser.add_argument("--pg-url", help="a server to use instead of starting one")
    parser.add_argument("--phoenix", help="the Python of a venv with arize-phoenix (default .venv-phoenix)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 300 items (100 for mem0, 500 spans), one round, 10 calls")
    parser.add_argument("--write-readme", action="store_true", help="put the table into README.md")
    parser.add_argument("--readme", type=Path, default=ROOT / "README.md")
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    parser.add_argument("--merge", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: make the table from results saved with --json")
    args = parser.parse_args(argv)
    if args.worker:
        backend, system, size, samples, where = args.worker
        if backend == "mem0":
            result = run_mem0_worker(system, int(size), int(samples), where)
        elif backend == "otlp":
            result = run_otlp_worker(system, int(size), where)
        else:
            result = run_worker(backend, system, int(size), int(samples), where)
        print(json.dumps(result))
        return 0
    if args.phoenix:
        os.environ["MEMKIT_BENCH_PHOENIX"] = args.phoenix
    if args.quick:
        args.sizes, args.rounds, args.samples, args.spans, args.mem0_size = [300], 1, 10, 500, 100
    if args.merge:
        result = merge([json.loads(path.read_text(encoding="utf-8")) for path in args.merge])
    else:
        result = run(args.backends, args.sizes, args.rounds, args.samples, args.pg_url, spans=args.spans,
                     mem0_size=args.mem0_size)
    text = table(result)
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")
    if args.write_readme:
        write_readme(text, args.readme)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
