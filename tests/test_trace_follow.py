"""A followed TraceReplay shows the runs and steps another process writes, as they are written.

Real stores (SQLite files, a PostgreSQL server, memory://), a real second process writing with
``add_trace`` while the panel is open, and a real OTel SDK streaming spans through
``MemkitSpanProcessor``; the panel is read as a notebook reads it (its traits).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memkit
from memkit.widgets import TraceReplay
from tests._research_runs import store_url

ROOT = Path(__file__).resolve().parents[1]


def _step(i: int, status: str = "success", run: str = "live-1") -> dict[str, Any]:
    return {"step_name": f"step-{i}", "tool": "fetch", "status": status, "step_index": i, "run_id": run,
            "timestamp": 1_700_000_000.0 + i, "duration": 0.5, "model": "gpt-4o",
            "usage": {"input_tokens": 100, "output_tokens": 10}}


def _writer(url: str, steps: int, pause: float) -> subprocess.Popen[str]:
    """Another process writing one run step by step, its last step still running; prints each step written."""
    script = textwrap.dedent(f"""
        import sys, time
        import memkit
        from tests.test_trace_follow import _step
        mem = memkit.open({url!r})
        for i in range({steps}):
            mem.add_trace("bot", "review", _step(i, "running" if i == {steps} - 1 else "success"), user_id="alice")
            print(i, flush=True)
            time.sleep({pause})
        mem.close()
    """)
    return subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _until(check: Callable[[], bool], timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    return store_url(request.param, request, tmp_path_factory, "follow")


def _followers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("memkit-follow-")]


def test_a_run_another_process_writes_appears_and_its_timeline_grows(url: str) -> None:
    with memkit.open(url) as mem:
        mem.add_trace("bot", "review", _step(0, run="old"), user_id="alice")
        panel = TraceReplay(mem, follow=True)
        try:
            assert panel.following and [r["run"] for r in panel.runs] == ["alice/bot/review/old"]
            writer = _writer(url, steps=8, pause=0.4)
            assert writer.stdout is not None
            seen: list[int] = []
            for line in writer.stdout:  # each step, once written, is shown within about a second
                written = int(line) + 1
                assert _until(lambda w=written: len(panel.steps) >= w if panel.run else _opened(panel), 2.0), (
                    f"step {written} not shown within 2 s: {panel.summary()}")
                seen.append(len(panel.steps))
            assert writer.wait(10) == 0
            assert _until(lambda: len(panel.steps) == 8, 2.0)
            assert len(set(seen)) >= 4, f"the open run's timeline did not grow step by step: {seen}"
            live = next(r for r in panel.runs if r["run"] == "alice/bot/review/live-1")
            assert live["status"] == "running" and panel.timeline["status"] == "running"
            assert panel.live_runs == ["alice/bot/review/live-1"]
            assert panel.timeline["n"] == 8 and live["tokens_total"] == 8 * 110
            assert panel.total_runs == 2
        finally:
            panel.close()
        assert not panel.following and _followers() == []


def _opened(panel: TraceReplay) -> bool:
    """Opens the live run once it is listed (as a researcher clicks it); whether it was."""
    if any(r["run"] == "alice/bot/review/live-1" for r in panel.runs):
        panel.run = "alice/bot/review/live-1"
        return len(panel.steps) >= 1
    return False


def test_the_open_step_stays_open_while_the_run_grows(tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'f.db'}?embedder=none") as mem:
        mem.add_trace("bot", "review", _step(0), user_id="alice")
        panel = TraceReplay(mem)
        panel.run = panel.runs[0]["run"]
        panel.step = 0
        mem.add_trace("bot", "review", _step(1, "failed") | {"error": "HTTP 404 from fetch"}, user_id="alice")
        assert panel.poll() == 1 and panel.poll() == 0
        assert panel.timeline["n"] == 2 and panel.timeline["status"] == "failed"
        assert panel.step == 0 and panel.detail["title"] == "step 0 · step-0"
        panel.close()


def test_spans_streamed_by_the_span_processor_appear_before_the_run_ends(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from memkit.otel import MemkitSpanProcessor

    with memkit.open(f"sqlite:///{tmp_path / 'otel.db'}?embedder=none") as mem:
        panel = TraceReplay(mem, follow=True)
        provider = TracerProvider()
        provider.add_span_processor(MemkitSpanProcessor(mem, user_id="alice", agent_id="bot", workflow_id="chat"))
        tracer = provider.get_tracer("agent")
        try:
            with tracer.start_as_current_span("agent"):
                for i in range(3):
                    with tracer.start_as_current_span(f"llm-{i}") as span:
                        span.set_attribute("gen_ai.request.model", "gpt-4o")
                        span.set_attribute("gen_ai.usage.input_tokens", 50)
                        span.set_attribute("gen_ai.usage.output_tokens", 5)
                    # the span ended and was stored; the panel shows it while the agent still runs
                    assert _until(lambda n=i + 1: bool(panel.runs) and panel.runs[0]["steps"] == n, 2.0), panel.runs
                    assert panel.runs[0]["tokens_total"] == 55 * (i + 1)
            assert _until(lambda: panel.runs[0]["steps"] == 4, 2.0)
        finally:
            panel.close()
            provider.shutdown()
        assert _followers() == []


def test_a_store_without_a_write_order_is_followed_too() -> None:
    with memkit.open("memory://") as mem:
        panel = TraceReplay(mem)
        mem.add_trace("bot", "review", _step(0), user_id="alice")
        assert panel.poll() == 1 and panel.total_runs == 1
        mem.add_trace("bot", "review", _step(1), user_id="alice")
        assert panel.poll() == 1 and panel.poll() == 0 and panel.runs[0]["steps"] == 2


@pytest.mark.parametrize("interval", [0, -1, "1", True, 1e9])
def test_a_bad_interval_is_refused_and_follows_nothing(interval: Any, tmp_path: Path) -> None:
    with memkit.open(f"sqlite:///{tmp_path / 'b.db'}?embedder=none") as mem:
        panel = TraceReplay(mem)
        with pytest.raises(memkit.InvalidInputError, match="interval"):
            panel.follow(interval)
        assert not panel.following and _followers() == []
        panel.close()


@pytest.fixture(autouse=True)
def _no_thread_left() -> Iterator[None]:
    yield
    assert _followers() == []


def test_a_store_that_goes_away_is_said_in_the_panel_and_closing_still_stops(tmp_path: Path) -> None:
    mem = memkit.open(f"sqlite:///{tmp_path / 'gone.db'}?embedder=none")
    mem.add_trace("bot", "review", _step(0), user_id="alice")
    panel = TraceReplay(mem, follow=True)
    mem.close()
    assert _until(lambda: panel.message.startswith("following: StorageError") and panel.message_kind == "error", 5)
    assert panel.following and panel.total_runs == 1  # what was shown stays
    panel.close()
    assert not panel.following
