"""How memories read in views: a trace is a step line, never the stored string."""

from __future__ import annotations

from datetime import UTC, datetime

import memkit
from memkit._display import format_duration, format_time, printable, status_of, summary


def test_a_trace_reads_as_a_step_line() -> None:
    mem = memkit.open("memory://")
    mem.add_trace("bio", "wf-1", {"tool": "bwa", "step_index": 3, "status": "failed", "duration": 2.13,
                                   "error": "Connection reset by peer"}, user_id="alice")
    [item] = mem.get_all("alice", "bio")
    line = summary(item)
    assert line == 'step 3 · bwa · failed · 2.1 s · "Connection reset by peer"'
    assert "data={" not in line


def test_a_statusless_trace_is_unknown_and_a_memory_is_its_text() -> None:
    mem = memkit.open("memory://")
    mem.add_trace("bio", "wf-1", {"tool": "fastqc", "step_index": 0}, user_id="alice")
    mem.add("TP53 knockdown\nin HeLa", "alice", "bio")
    lines = [summary(item) for item in mem.get_all("alice", "bio")]
    assert lines == ["TP53 knockdown in HeLa", "step 0 · fastqc · unknown"]
    assert status_of("weird") == status_of(None) == "unknown"
    assert status_of("FAILED") == "failed"


def test_times_durations_and_terminal_escapes() -> None:
    assert format_time(0.0) == "1970-01-01 00:00:00 UTC"
    assert format_time(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02 03:04:05 UTC"
    assert format_time(float("nan")) == format_time("x") == ""
    assert [format_duration(x) for x in (0.34, 2.13, 184, None, True)] == ["340 ms", "2.1 s", "3 min 4 s", "", ""]
    assert printable("a\x1b]0;pwned\x07b\u202e") == "a\\x1b]0;pwned\\x07b\\u202e"
