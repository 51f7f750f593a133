"""An OTel import killed (SIGKILL) right after its first write to PostgreSQL leaves the file whole or absent,
never steps without their recalls (issue 40, item 6: the steps and the recalls were two transactions)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("openinference.instrumentation.langchain", reason="needs memkit[dev]")

import memkit
from memkit.otel import spans_to_otlp
from memkit.testing import PostgresServer
from tests.otel_corpus import make_spans

_ROOT = Path(__file__).resolve().parents[1]

# The import in a process of its own, which SIGKILLs itself as soon as its first write to
# PostgreSQL has committed: what a crash between two writes would leave.
_DYING = textwrap.dedent("""
    import os, signal, sys
    import memkit
    from memkit.adapters._postgres import _writes as _postgres_writes
    from memkit.otel import import_otlp

    original = _postgres_writes.insert

    async def insert_then_die(*args, **kwargs):
        await original(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)

    _postgres_writes.insert = insert_then_die
    import_otlp(memkit.open(sys.argv[1]), sys.argv[2], user_id="alice", agent_id="bot")
""")


def test_a_killed_postgres_import_is_all_or_nothing(postgres_server: PostgresServer, tmp_path: Path) -> None:
    spans = make_spans("langgraph-openinference")  # a retriever span: one recall with the steps
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(spans_to_otlp(spans)))
    url = str(postgres_server.url(f"crash{uuid.uuid4().hex[:8]}"))
    with memkit.open(url):
        pass  # the schema, made before the import starts
    done = subprocess.run([sys.executable, "-c", _DYING, url, str(path)], cwd=_ROOT, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(_ROOT)}, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    with memkit.open(url) as mem:
        steps = len(mem.get_all("alice", "bot", 1000))
        recalls = len(mem.recalls(user_id="alice", agent_id="bot"))
    assert (steps, recalls) == (len(spans), 1)
