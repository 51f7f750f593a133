"""The shortcuts a bulk span import takes give exactly what the general code gives.

with_timing's canonical fast path, the encoders trace_record keeps, and the id blocks.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memkit._core import _timing
from memkit._core._records import trace_record
from memkit._core._timing import with_timing

_numbers = st.one_of(
    st.none(), st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**15), 10**15),
    st.sampled_from([0.0, -0.0, 1e11, 1e11 + 1, 1.7e9, 1.7e12, 5e-324]), st.booleans(), st.text(max_size=5),
)
_extra = st.dictionaries(
    st.sampled_from(["step_name", "started_at", "duration_ms", "run_time", "tool", "ended_at"]),
    st.one_of(st.none(), st.floats(allow_nan=False), st.text(max_size=4)), max_size=3,
)


@settings(max_examples=400, deadline=None)
@given(start=_numbers, duration=_numbers, extra=_extra, present=st.sampled_from(["both", "start", "duration", "none"]))
def test_canonical_fast_path_equals_the_general_reading(
    start: Any, duration: Any, extra: dict[str, Any], present: str
) -> None:
    data = dict(extra)
    if present in ("both", "start"):
        data["timestamp"] = start
    if present in ("both", "duration"):
        data["duration"] = duration
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = with_timing(dict(data))
        with pytest.MonkeyPatch.context() as m:
            m.setattr(_timing, "_canonical", lambda *_: False)
            general = with_timing(dict(data))
    # Same keys, same values, same types (5 and 5.0 are equal but not the same stored JSON).
    assert json.dumps(fast) == json.dumps(general)
    assert [type(v) for v in fast.values()] == [type(v) for v in general.values()]


def test_fast_path_takes_what_an_import_writes_and_still_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    real = _timing.step_timing

    def counted(*args: Any, **kwargs: Any) -> _timing.StepTiming:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(_timing, "step_timing", counted)
    assert with_timing({"timestamp": 1.7e9, "duration": 0.25, "tool": "x"})["duration"] == 0.25
    assert calls == []  # the general reading was not needed
    with pytest.warns(UserWarning, match="wall_time_fast_path"):
        with_timing({"timestamp": 1.7e9, "wall_time_fast_path": 3})
    # An int, milliseconds or a negative duration still go the general way.
    assert with_timing({"timestamp": 1_700_000_000})["timestamp"] == 1.7e9
    assert type(with_timing({"timestamp": 1_700_000_000})["timestamp"]) is float
    assert with_timing({"timestamp": 1.7e12})["timestamp"] == 1.7e9
    assert "duration" in with_timing({"duration": -1.0})
    assert calls


def test_trace_record_encodes_as_json_dumps_does() -> None:
    data = {"step_name": "ünï", "tool": "t", "timestamp": 1.7e9, "duration": 0.5, "z": [1, {"b": 2, "a": None}],
            "parameters": {"q": "x\u2028y", "n": 1e300, "emoji": "🧬"}, "metadata": {"lab": "B"}}
    record = trace_record("agent", "wf", data, "user")
    payload = record.metadata["trace"]
    rendered = json.dumps(payload, ensure_ascii=False, sort_keys=True)
    assert record.content == f"[trace] workflow=wf agent=agent data={rendered}"
    assert record.metadata_json == json.dumps(record.metadata, ensure_ascii=False, separators=(",", ":"))


def test_a_known_key_set_is_still_redacted_and_depth_checked_below() -> None:
    from memkit._core._errors import InvalidInputError
    from memkit._core._validate import Limits

    steps = [{"tool": "db", "parameters": {"host": "h", "opts": {"n": i}}} for i in range(3)]
    for step in steps:  # the key tuples are now known
        trace_record("a", "wf", step, "u")
    secret = trace_record("a", "wf", {"tool": "db", "parameters": {"host": "h", "opts": {"password": "hunter2"}}}, "u")
    assert secret.metadata["trace"]["parameters"]["opts"] == {"password": "[REDACTED]"}
    assert "hunter2" not in secret.content and "hunter2" not in (secret.metadata_json or "")
    deep: dict[str, Any] = {"n": 0}
    for _ in range(12):
        deep = {"n": deep}
    with pytest.raises(InvalidInputError, match="deeper"):
        trace_record("a", "wf", {"tool": "db", "parameters": {"host": "h", "opts": deep}}, "u", Limits())


def _bench_like_file(path: Path, spans: int) -> Path:
    from bench.otel_import import make_file

    make_file(path, spans)
    return path


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="pinning a thread to a core needs Linux")
def test_the_benchmarks_reference_loop_times_each_core_and_unpins_this_thread() -> None:
    """bench/otel_import.py times a loop on each core before and after a round: one time a core, and
    this thread may run on all of them again after (the import's child inherits its affinity)."""
    from bench.otel_import import core_loop_ms

    cores = os.sched_getaffinity(0)
    times = core_loop_ms()
    assert len(times) == len(cores) and all(t > 0 for t in times)
    assert os.sched_getaffinity(0) == cores
