"""kill -9 and the PostgreSQL store: an acknowledged write is committed, whoever dies.

A write returns only after PostgreSQL committed it (and a recorded search only after its recall
was committed), so killing the writing process, or the server itself, at any moment loses
nothing the writer was told was stored.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
import uuid

import pytest

from memkit import BackendUnavailableError, StorageError
from memkit.adapters._postgres._adapter import PostgresAdapter
from memkit.testing import PostgresServer

_WRITER = """
import sys
import memkit

url, trial = sys.argv[1], sys.argv[2]
mem = memkit.open(url)
i = 0
while True:
    if i % 3 == 0:
        ids = mem.add_many([{"content": f"batch {trial} {i} {k} TP53", "user_id": "u", "agent_id": trial}
                            for k in range(5)])
    elif i % 3 == 1:
        ids = [mem.add(f"single {trial} {i} TP53", "u", trial, {"i": i})]
    else:
        with memkit.recall_scope("wf", step="look", step_index=i, run_id=trial, user_id="u", agent_id=trial):
            mem.search("TP53", "u", trial, limit=3)
        ids = [mem.add_trace(trial, "wf", {"tool": "search", "step_index": i, "run_id": trial}, user_id="u")]
    print(" ".join(ids), flush=True)  # acknowledged: the call returned
    i += 1
"""


def _run_and_kill(url: str, trial: str, rng: random.Random) -> list[str]:
    """Start a writer, kill -9 it at a random moment once it is writing; the ids it acknowledged."""
    child = subprocess.Popen([sys.executable, "-c", _WRITER, url, trial], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    acknowledged: list[str] = []
    try:
        line = child.stdout.readline()
        assert line, "the writer died before its first write"
        acknowledged += line.split()
        deadline = time.monotonic() + rng.uniform(0.05, 0.6)
        while time.monotonic() < deadline:
            line = child.stdout.readline()
            assert line, "the writer died on its own"
            acknowledged += line.split()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()
    return acknowledged


@pytest.mark.slow
def test_killing_the_writer_loses_no_acknowledged_write(postgres_server: PostgresServer) -> None:
    url = postgres_server.url(f"killed_{uuid.uuid4().hex[:10]}") + "?embedder=none"
    PostgresAdapter.from_url(url).close()
    rng = random.Random(26)
    acknowledged = {f"t{trial}": _run_and_kill(url, f"t{trial}", rng) for trial in range(30)}

    async def check() -> None:
        mem = PostgresAdapter.from_url(url)
        try:
            for trial, ids in acknowledged.items():
                stored = {i.id async for i in mem.export(user_id="u", agent_id=trial)}
                assert set(ids) <= stored, f"trial {trial} lost {len(set(ids) - stored)} acknowledged writes"
                # Every stored step's search was recorded before the step was written.
                steps = {i.metadata["step_index"] for i in await mem.get_all("u", trial, limit=10_000,
                                                                             filters={"type": "trace"})}
                recalled = {r.step_index for r in await mem.recalls(workflow_id="wf", run_id=trial)}
                assert steps <= recalled
            stats = await mem.stats()
            assert stats.memories == len([i async for i in mem.export()])  # no count drifted in a kill
        finally:
            await mem.aclose()

    assert sum(map(len, acknowledged.values())) > 100
    asyncio.run(check())


async def _write_until_the_server_dies(url: str, acknowledged: list[str], stop: asyncio.Event) -> None:
    mem = PostgresAdapter.from_url(url)
    try:
        i = 0
        while not stop.is_set():
            try:
                acknowledged.append(await mem.add(f"note {i} TP53", "u", "a"))
            except (StorageError, BackendUnavailableError):
                return
            i += 1
    finally:
        await mem.aclose()


@pytest.mark.slow
def test_killing_the_server_loses_no_acknowledged_write() -> None:
    rng = random.Random(27)
    with PostgresServer() as server:
        url = server.url("crash") + "?embedder=none&pool_size=1"
        PostgresAdapter.from_url(url).close()
        acknowledged: list[str] = []

        async def trial() -> None:
            stop = asyncio.Event()
            writer = asyncio.create_task(_write_until_the_server_dies(url, acknowledged, stop))
            await asyncio.sleep(rng.uniform(0.1, 0.4))
            server.kill()  # SIGKILL to the postmaster and every backend, mid-write
            try:
                await asyncio.wait_for(writer, 30)
            finally:
                stop.set()

        for _ in range(10):
            asyncio.run(trial())
            server.restart()  # crash recovery replays the write-ahead log

        async def check() -> None:
            mem = PostgresAdapter.from_url(url)
            try:
                stored = {i.id async for i in mem.export()}
                assert set(acknowledged) <= stored
                assert (await mem.stats()).memories == len(stored)
            finally:
                await mem.aclose()

        assert len(acknowledged) > 50
        asyncio.run(check())
